//! The broadcast engine of the elementwise kernels: outputs walked as rows whose inputs are contiguous or
//! one repeated value, split over the thread team when large; and typed views of tensor data.

use std::ops::Range;

use crate::runtime::spin_pool;

use super::numeric::vector;
use super::util::broadcast_strides;
use crate::ir::{Element, Tensor};

/// Outputs with at least this many elements are computed in parallel.
pub(super) const PAR_MIN: usize = 1 << 16;
/// Elements per parallel task.
pub(super) const CHUNK: usize = 1 << 14;

/// The output of a broadcast elementwise op seen as `rows` contiguous rows of `inner` elements, in which
/// each of the `K` inputs is either contiguous (row stride 1) or a single repeated value (stride 0).
///
/// Adjacent dims are merged when every input treats them alike, so rows are as long as possible.
#[derive(Debug)]
pub(super) struct RowPlan<const K: usize> {
    outer: Vec<usize>,
    outer_strides: [Vec<usize>; K],
    /// Length of each row.
    pub inner: usize,
    /// Per input, its element step along a row (0 or 1).
    pub inner_strides: [usize; K],
}

impl<const K: usize> RowPlan<K> {
    /// Plans the iteration; every input shape must broadcast to `out` (checked by the caller).
    pub fn new(out: &[usize], inputs: [&[usize]; K]) -> RowPlan<K> {
        let st: [Vec<usize>; K] = std::array::from_fn(|k| broadcast_strides(inputs[k], out));
        let mut dims: Vec<(usize, [usize; K])> = Vec::with_capacity(out.len());
        for (d, &n) in out.iter().enumerate() {
            if n == 1 {
                continue;
            }
            let s: [usize; K] = std::array::from_fn(|k| st[k][d]);
            if let Some(last) = dims.last_mut() {
                if (0..K).all(|k| last.1[k] == s[k] * n) {
                    last.0 *= n;
                    last.1 = s;
                    continue;
                }
            }
            dims.push((n, s));
        }
        let (inner, inner_strides) = dims.pop().unwrap_or((1, [0; K]));
        let outer = dims.iter().map(|d| d.0).collect();
        let outer_strides = std::array::from_fn(|k| dims.iter().map(|d| d.1[k]).collect());
        RowPlan { outer, outer_strides, inner, inner_strides }
    }

    /// Number of rows.
    pub fn rows(&self) -> usize {
        self.outer.iter().product()
    }

    /// Calls `f(row, offsets)` for each row in `rows`, where `offsets[k]` is where input `k`'s data for the
    /// row starts.
    pub fn for_rows(&self, rows: Range<usize>, mut f: impl FnMut(usize, [usize; K])) {
        if rows.is_empty() {
            return;
        }
        let r = self.outer.len();
        let mut idx = vec![0usize; r];
        let mut offs = [0usize; K];
        let mut rem = rows.start;
        for d in (0..r).rev() {
            idx[d] = rem % self.outer[d];
            rem /= self.outer[d];
            for (o, st) in offs.iter_mut().zip(&self.outer_strides) {
                *o += idx[d] * st[d];
            }
        }
        for row in rows {
            f(row, offs);
            let mut d = r;
            while d > 0 {
                d -= 1;
                idx[d] += 1;
                for (o, st) in offs.iter_mut().zip(&self.outer_strides) {
                    *o += st[d];
                }
                if idx[d] < self.outer[d] {
                    break;
                }
                for (o, st) in offs.iter_mut().zip(&self.outer_strides) {
                    *o -= st[d] * self.outer[d];
                }
                idx[d] = 0;
            }
        }
    }
}

/// Calls `f(i, chunk)` for the `chunk`-sized pieces of `o` in parallel (on [`spin_pool`]).
///
/// `f` is a trait object so that the splitting is compiled once per element type rather than once per op; the
/// dynamic call happens once per chunk.
pub(super) fn par_chunks<O: Send>(o: &mut [O], chunk: usize, f: &(dyn Fn(usize, &mut [O]) + Sync)) {
    spin_pool::for_each_chunk_mut(o, chunk, f);
}

/// Splits `o` (rows of `inner` elements) over the thread team when large and calls `run(first_row, chunk)`.
pub(super) fn par_rows<O: Send>(o: &mut [O], inner: usize, rows: usize, run: &(dyn Fn(usize, &mut [O]) + Sync)) {
    if o.len() >= PAR_MIN && rows > 1 {
        let per = (CHUNK / inner.max(1)).max(1);
        par_chunks(o, per * inner, &|i, oc| run(i * per, oc));
    } else {
        run(0, o)
    }
}

/// Element step of an input of `len` elements over an output of `n`: 1 when it has one element per output
/// element, 0 when it is a single value, `None` when it broadcasts in a more general way.
#[inline]
pub(super) fn flat_step(len: usize, n: usize) -> Option<usize> {
    if len == n {
        Some(1)
    } else if len == 1 {
        Some(0)
    } else {
        None
    }
}

/// One row of a binary op; `sa`/`sb` are 1 (contiguous) or 0 (repeat element 0).
#[inline(always)]
pub(super) fn row2<A: Copy, B: Copy, O>(a: &[A], sa: usize, b: &[B], sb: usize, o: &mut [O], f: &impl Fn(A, B) -> O) {
    let n = o.len();
    match (sa, sb) {
        (1, 1) => {
            for ((o, &x), &y) in o.iter_mut().zip(&a[..n]).zip(&b[..n]) {
                *o = f(x, y);
            }
        }
        (1, _) => {
            let y = b[0];
            for (o, &x) in o.iter_mut().zip(&a[..n]) {
                *o = f(x, y);
            }
        }
        (_, 1) => {
            let x = a[0];
            for (o, &y) in o.iter_mut().zip(&b[..n]) {
                *o = f(x, y);
            }
        }
        _ => {
            let (x, y) = (a[0], b[0]);
            for o in o.iter_mut() {
                *o = f(x, y);
            }
        }
    }
}

/// `o = f(a, b)` with `a` and `b` broadcast to `osh` (their shapes must broadcast to it).
pub(super) fn bin<A, B, O, F>(a: &[A], ash: &[usize], b: &[B], bsh: &[usize], o: &mut [O], osh: &[usize], f: F)
where
    A: Copy + Sync,
    B: Copy + Sync,
    O: Send,
    F: Fn(A, B) -> O + Sync,
{
    let n = o.len();
    if n == 0 {
        return;
    }
    if let (Some(sa), Some(sb)) = (flat_step(a.len(), n), flat_step(b.len(), n)) {
        if n >= PAR_MIN {
            par_chunks(o, CHUNK, &|i, oc| {
                let s = i * CHUNK;
                row2(&a[s * sa..], sa, &b[s * sb..], sb, oc, &f)
            });
        } else {
            row2(a, sa, b, sb, o, &f);
        }
        return;
    }
    let plan = RowPlan::new(osh, [ash, bsh]);
    let inner = plan.inner;
    let [ia, ib] = plan.inner_strides;
    par_rows(o, inner, plan.rows(), &|r0, oc| {
        plan.for_rows(r0..r0 + oc.len() / inner, |r, [pa, pb]| {
            let s = (r - r0) * inner;
            row2(&a[pa..], ia, &b[pb..], ib, &mut oc[s..s + inner], &f)
        })
    });
}

/// `o = f(o, b)` with `b` broadcast to `o`'s shape `osh`.
pub(super) fn acc<B, O, F>(o: &mut [O], osh: &[usize], b: &[B], bsh: &[usize], f: F)
where
    B: Copy + Sync,
    O: Copy + Send,
    F: Fn(O, B) -> O + Sync,
{
    let n = o.len();
    if n == 0 {
        return;
    }
    let row = |o: &mut [O], b: &[B], sb: usize| {
        if sb == 1 {
            let m = o.len();
            for (o, &y) in o.iter_mut().zip(&b[..m]) {
                *o = f(*o, y);
            }
        } else {
            let y = b[0];
            for o in o.iter_mut() {
                *o = f(*o, y);
            }
        }
    };
    if let Some(sb) = flat_step(b.len(), n) {
        if n >= PAR_MIN {
            par_chunks(o, CHUNK, &|i, oc| row(oc, &b[i * CHUNK * sb..], sb));
        } else {
            row(o, b, sb);
        }
        return;
    }
    let plan = RowPlan::new(osh, [bsh]);
    let inner = plan.inner;
    let [ib] = plan.inner_strides;
    par_rows(o, inner, plan.rows(), &|r0, oc| {
        plan.for_rows(r0..r0 + oc.len() / inner, |r, [pb]| {
            let s = (r - r0) * inner;
            row(&mut oc[s..s + inner], &b[pb..], ib)
        })
    });
}

/// `o = f(a, b, c)` with the three inputs broadcast to `osh`.
#[allow(clippy::too_many_arguments)]
pub(super) fn tern<A, B, C, O, F>(a: &[A], ash: &[usize], b: &[B], bsh: &[usize], c: &[C], csh: &[usize], o: &mut [O], osh: &[usize], f: F)
where
    A: Copy + Sync,
    B: Copy + Sync,
    C: Copy + Sync,
    O: Send,
    F: Fn(A, B, C) -> O + Sync,
{
    let n = o.len();
    if n == 0 {
        return;
    }
    let row = |a: &[A], sa: usize, b: &[B], sb: usize, c: &[C], sc: usize, o: &mut [O]| {
        let m = o.len();
        if sa == 1 && sb == 1 && sc == 1 {
            for (((o, &x), &y), &z) in o.iter_mut().zip(&a[..m]).zip(&b[..m]).zip(&c[..m]) {
                *o = f(x, y, z);
            }
        } else {
            for (i, o) in o.iter_mut().enumerate() {
                *o = f(a[i * sa], b[i * sb], c[i * sc]);
            }
        }
    };
    if let (Some(sa), Some(sb), Some(sc)) = (flat_step(a.len(), n), flat_step(b.len(), n), flat_step(c.len(), n)) {
        if n >= PAR_MIN {
            par_chunks(o, CHUNK, &|i, oc| {
                let s = i * CHUNK;
                row(&a[s * sa..], sa, &b[s * sb..], sb, &c[s * sc..], sc, oc)
            });
        } else {
            row(a, sa, b, sb, c, sc, o);
        }
        return;
    }
    let plan = RowPlan::new(osh, [ash, bsh, csh]);
    let inner = plan.inner;
    let [ia, ib, ic] = plan.inner_strides;
    par_rows(o, inner, plan.rows(), &|r0, oc| {
        plan.for_rows(r0..r0 + oc.len() / inner, |r, [pa, pb, pc]| {
            let s = (r - r0) * inner;
            row(&a[pa..], ia, &b[pb..], ib, &c[pc..], ic, &mut oc[s..s + inner])
        })
    });
}

/// `o[i] = f(a[i])`, in parallel when large.
pub(super) fn map<A: Copy + Sync, O: Send>(a: &[A], o: &mut [O], f: impl Fn(A) -> O + Sync) {
    map_slices(a, o, |a: &[A], o: &mut [O]| vector::map(a, o, &f));
}

/// `row(a', o')` over pieces `o'` of `o` and the parts `a'` of `a` from the same index on (at least as long), in
/// parallel when large: [`map`] with a kernel of its own per piece.
pub(super) fn map_slices<A: Copy + Sync, O: Send>(a: &[A], o: &mut [O], row: impl Fn(&[A], &mut [O]) + Sync) {
    if o.len() >= PAR_MIN {
        par_chunks(o, CHUNK, &|i, oc| row(&a[i * CHUNK..], oc));
    } else {
        row(a, o);
    }
}

/// `o[i] = f(o[i])`, in parallel when large.
pub(super) fn map_inplace<O: Copy + Send>(o: &mut [O], f: impl Fn(O) -> O + Sync) {
    let row = |o: &mut [O]| vector::update(o, &f);
    if o.len() >= PAR_MIN {
        par_chunks(o, CHUNK, &|_, oc| row(oc));
    } else {
        row(o);
    }
}

/// The elements of `t` as `T`, checking the dtype and that the data matches the shape.
pub(super) fn data<'a, T: Element>(t: &'a Tensor, what: &str) -> Result<&'a [T], String> {
    let v = t.view::<T>().ok_or_else(|| format!("{what} is {}, expected {}", t.dtype(), T::DTYPE))?;
    if v.len() != t.shape.iter().product::<usize>() {
        return Err(format!("{what} holds {} elements but its shape {:?} says otherwise", v.len(), t.shape));
    }
    Ok(v)
}
