//! Reductions (ReduceSum/Mean/Max/Min/Prod/L1/L2/LogSum/LogSumExp/SumSquare), ArgMax/ArgMin, CumSum and TopK.
//!
//! A reduction first merges adjacent dimensions that are both reduced or both kept (size-1 dims are dropped),
//! so `[N, C, H, W]` reduced over `H, W` becomes `[N*C | H*W]`: the last group is then either reduced (each
//! output folds one contiguous slice) or kept (each input row is folded into a contiguous output row), and
//! the groups in front are walked block by block with an odometer. Work is split across threads by the first
//! kept group (or by columns for `[reduced, kept]`).
//!
//! Empty reductions give the identity of the operation, as in the ONNX reference: Sum/L1/L2/SumSquare 0,
//! Prod 1, Max -inf (integer minimum), Min +inf (integer maximum), LogSum/LogSumExp -inf, Mean NaN (0 for
//! integers). Integer reductions wrap like numpy's fixed-width arithmetic; an integer Mean truncates toward 0.
//! f16/bf16 reductions are computed in f32.

use std::cmp::Ordering;

use crate::runtime::spin_pool;

use super::numeric::Arith;
use super::{input, Scratch};
use crate::ir::ops::dims::step_index;
use crate::ir::ops::reduce::{arg_reduce_shape, axes_values, check_axis, check_reduce_dtype, cumsum_axis, reduce_mask, reduced_shape, topk_k};
use crate::ir::{DType, Element, ReduceOp, Tensor, TensorData};
use crate::with_data;

/// Inputs with at least this many elements are processed in parallel.
const PAR_MIN: usize = 1 << 15;

/// Runs a reduction (axes from the attribute, else input 1).
pub(super) fn reduce(rop: ReduceOp, axes: Option<&[usize]>, keepdims: bool, noop_with_empty_axes: bool, inputs: &[Option<&Tensor>], outputs: &mut [Tensor], scratch: &mut Scratch) -> Result<(), String> {
    let x = input(inputs, 0)?;
    let out = outputs.first_mut().ok_or("the node has no output")?;
    let rank = x.shape.len();
    check_reduce_dtype(rop, x.dtype())?;
    let listed: Option<Vec<i64>> = match axes {
        Some(a) => Some(a.iter().map(|&v| v as i64).collect()),
        None => match inputs.get(1).copied().flatten() {
            Some(t) if !t.is_empty() => Some(axes_values(t)?),
            _ => None,
        },
    };
    let mask = reduce_mask(listed.as_deref(), rank, noop_with_empty_axes)?;
    let shape = reduced_shape(&x.shape, &mask, keepdims);
    reduce_tensor(x, &mask, rop, &shape, out, scratch)
}

/// Runs ArgMax (`max`) or ArgMin.
pub(super) fn arg_reduce_op(max: bool, axis: usize, keepdims: bool, select_last_index: bool, inputs: &[Option<&Tensor>], outputs: &mut [Tensor]) -> Result<(), String> {
    let x = input(inputs, 0)?;
    let out = outputs.first_mut().ok_or("the node has no output")?;
    let shape = arg_reduce_shape(&x.shape, axis, keepdims)?;
    let (axis, len) = (axis, x.shape[axis]);
    let (outer, inner) = outer_inner(&x.shape, axis);
    let o = out.reset::<i64>(&shape);
    with_data!(&x.data, v => arg_reduce(v, outer, len, inner, max, select_last_index, o));
    Ok(())
}

/// Runs CumSum along the axis given by input 1.
pub(super) fn cumsum_op(exclusive: bool, reverse: bool, inputs: &[Option<&Tensor>], outputs: &mut [Tensor]) -> Result<(), String> {
    let x = input(inputs, 0)?;
    let out = outputs.first_mut().ok_or("the node has no output")?;
    let rank = x.shape.len();
    let axis = cumsum_axis(input(inputs, 1)?, rank)?;
    let (outer, inner) = outer_inner(&x.shape, axis);
    let len = if rank == 0 { 1 } else { x.shape[axis] };
    if x.dtype() == DType::Bool {
        return Err("CumSum does not take bool tensors".into());
    }
    with_data!(&x.data, v => {
        let o = out.reset(&x.shape);
        cumsum(v, outer, len, inner, exclusive, reverse, o);
    });
    Ok(())
}

/// Runs TopK (values and indices).
pub(super) fn topk(axis: usize, largest: bool, inputs: &[Option<&Tensor>], outputs: &mut [Tensor]) -> Result<(), String> {
    let x = input(inputs, 0)?;
    let axis = check_axis(axis, x.shape.len())?;
    let len = x.shape[axis];
    let k = topk_k(input(inputs, 1)?, len)?;
    let mut shape = x.shape.clone();
    shape[axis] = k;
    let (outer, inner) = outer_inner(&x.shape, axis);
    let (vals, rest) = outputs.split_first_mut().ok_or("the node has no output")?;
    let idx = rest.first_mut().ok_or("TopK needs two outputs (values and indices)")?;
    let idx = idx.reset::<i64>(&shape);
    with_data!(&x.data, v => {
        let ov = vals.reset(&shape);
        top_k(v, outer, len, inner, k, largest, ov, idx);
    });
    Ok(())
}

// ---------------------------------------------------------------------------------------------------------
// Shared helpers
// ---------------------------------------------------------------------------------------------------------

/// (product of dims before `axis`, product of dims after it).
fn outer_inner(shape: &[usize], axis: usize) -> (usize, usize) {
    if shape.is_empty() {
        return (1, 1);
    }
    (shape[..axis].iter().product(), shape[axis + 1..].iter().product())
}

// ---------------------------------------------------------------------------------------------------------
// Reduce
// ---------------------------------------------------------------------------------------------------------

/// One fold of a reduction: `step` folds an input element into an accumulator (applying the per-element
/// transform), `merge` combines two accumulators. `SHIFT` folds read a per-output shift (LogSumExp's max).
trait Fold<T: Arith> {
    const SHIFT: bool = false;
    fn step(acc: T, x: T, shift: T) -> T;
    fn merge(a: T, b: T) -> T;
    fn init() -> T;
}

struct SumF;
struct AbsSumF;
struct SqSumF;
struct ProdF;
struct MaxF;
struct MinF;
struct ExpSumF;

/// Implements [`Fold`] for `$f`: `step(acc, x, shift)`, `merge(a, b)` and the initial value.
macro_rules! fold {
    ($f:ident, $shift:expr, |$a:ident, $x:ident, $s:ident| $step:expr, |$m:ident, $n:ident| $merge:expr, $init:ident) => {
        impl<T: Arith> Fold<T> for $f {
            const SHIFT: bool = $shift;
            #[inline(always)]
            fn step($a: T, $x: T, $s: T) -> T {
                $step
            }
            #[inline(always)]
            fn merge($m: T, $n: T) -> T {
                $merge
            }
            fn init() -> T {
                T::$init
            }
        }
    };
}
fold!(SumF, false, |a, x, _s| a.add(x), |a, b| a.add(b), ZERO);
fold!(AbsSumF, false, |a, x, _s| a.add(x.abs()), |a, b| a.add(b), ZERO);
fold!(SqSumF, false, |a, x, _s| a.add(x.mul(x)), |a, b| a.add(b), ZERO);
fold!(ProdF, false, |a, x, _s| a.mul(x), |a, b| a.mul(b), ONE);
fold!(MaxF, false, |a, x, _s| a.max_(x), |a, b| a.max_(b), LOWEST);
fold!(MinF, false, |a, x, _s| a.min_(x), |a, b| a.min_(b), HIGHEST);
fold!(ExpSumF, true, |a, x, s| a.add(x.sub(s).exp()), |a, b| a.add(b), ZERO);

/// Dispatches a reduction on the input dtype; f16/bf16 are reduced in f32 through the scratch buffer.
fn reduce_tensor(
    x: &Tensor,
    mask: &[bool],
    op: ReduceOp,
    shape: &[usize],
    out: &mut Tensor,
    scratch: &mut Scratch,
) -> Result<(), String> {
    match &x.data {
        TensorData::F16(v) => scratch.via_f32(v, shape, out, |xs, os| reduce_slice(xs, &x.shape, mask, op, os)),
        TensorData::BF16(v) => scratch.via_f32(v, shape, out, |xs, os| reduce_slice(xs, &x.shape, mask, op, os)),
        data => with_data!(data, v => {
            let o = out.reset(shape);
            reduce_slice(v, &x.shape, mask, op, o);
        }),
    }
    Ok(())
}

/// Reduces `x` (shape `shape`) over the dims flagged in `mask` into `out` (the kept dims, row-major).
fn reduce_slice<T: Arith>(x: &[T], shape: &[usize], mask: &[bool], op: ReduceOp, out: &mut [T]) {
    let count: usize = shape.iter().zip(mask).filter(|(_, &m)| m).map(|(&d, _)| d).product();
    // Merge adjacent dims of the same kind; drop size-1 dims.
    let mut dims: Vec<usize> = Vec::with_capacity(shape.len() + 1);
    let mut red: Vec<bool> = Vec::with_capacity(shape.len() + 1);
    for (&d, &m) in shape.iter().zip(mask) {
        if d == 1 {
            continue;
        }
        if red.last() == Some(&m) {
            *dims.last_mut().expect("dims and red have the same length") *= d;
        } else {
            dims.push(d);
            red.push(m);
        }
    }
    if dims.is_empty() {
        dims.push(1);
        red.push(false);
    }
    let run = !x.is_empty();
    use ReduceOp::*;
    match op {
        Sum | Mean | LogSum => fold_all::<T, SumF>(x, &dims, &red, out, &[], run),
        L1 => fold_all::<T, AbsSumF>(x, &dims, &red, out, &[], run),
        L2 | SumSquare => fold_all::<T, SqSumF>(x, &dims, &red, out, &[], run),
        Prod => fold_all::<T, ProdF>(x, &dims, &red, out, &[], run),
        Max => fold_all::<T, MaxF>(x, &dims, &red, out, &[], run),
        Min => fold_all::<T, MinF>(x, &dims, &red, out, &[], run),
        LogSumExp => {
            fold_all::<T, MaxF>(x, &dims, &red, out, &[], run);
            // Shift by the max where it is finite (the reference's overflow guard), then sum exp(x - shift).
            let shift: Vec<T> = out.iter().map(|&m| if m.finite() { m } else { T::ZERO }).collect();
            fold_all::<T, ExpSumF>(x, &dims, &red, out, &shift, run);
            for (o, &s) in out.iter_mut().zip(&shift) {
                *o = o.ln().add(s);
            }
        }
    }
    match op {
        Mean => out.iter_mut().for_each(|o| *o = o.div_count(count)),
        L2 => out.iter_mut().for_each(|o| *o = o.sqrt()),
        LogSum => out.iter_mut().for_each(|o| *o = o.ln()),
        _ => {}
    }
}

/// Fills `out` with the fold's identity, then folds `x` into it (when `run`).
fn fold_all<T: Arith, F: Fold<T>>(x: &[T], dims: &[usize], red: &[bool], out: &mut [T], shift: &[T], run: bool) {
    out.fill(F::init());
    if !run || out.is_empty() {
        return;
    }
    // Output stride of each group: 0 for reduced groups.
    let m = dims.len();
    let mut ostr = vec![0usize; m];
    let mut acc = 1;
    for g in (0..m).rev() {
        if !red[g] {
            ostr[g] = acc;
            acc *= dims[g];
        }
    }
    let threads = spin_pool::threads();
    let par = x.len() >= PAR_MIN && threads > 1;
    if par && m >= 2 && !red[0] {
        // Split by the first (kept) group: each part owns a contiguous input and output range.
        let k0 = dims[0];
        let ib = x.len() / k0;
        let ob = out.len() / k0;
        let per = k0.div_ceil(threads * 4).max(1);
        spin_pool::for_each_chunk_mut(out, per * ob, &|ci, o| {
            let start = ci * per;
            let cnt = o.len() / ob;
            let xs = &x[start * ib..(start + cnt) * ib];
            let sh = if F::SHIFT { &shift[start * ob..(start + cnt) * ob] } else { &[][..] };
            let mut d = dims.to_vec();
            d[0] = cnt;
            fold_seq::<T, F>(xs, &d, red, &ostr, o, sh);
        });
    } else if par && m == 2 && red[0] {
        // [reduced, kept]: split the kept columns.
        let k = dims[1];
        let per = k.div_ceil(threads * 4).max(64);
        spin_pool::for_each_chunk_mut(out, per, &|ci, o| {
            let c0 = ci * per;
            for row in x.chunks_exact(k) {
                let xr = &row[c0..c0 + o.len()];
                if F::SHIFT {
                    let sh = &shift[c0..c0 + o.len()];
                    for ((a, &v), &s) in o.iter_mut().zip(xr).zip(sh) {
                        *a = F::step(*a, v, s);
                    }
                } else {
                    for (a, &v) in o.iter_mut().zip(xr) {
                        *a = F::step(*a, v, T::ZERO);
                    }
                }
            }
        });
    } else {
        fold_seq::<T, F>(x, dims, red, &ostr, out, shift);
    }
}

/// Sequential fold over merged groups; the last group is either folded as contiguous slices (reduced) or
/// row by row into a contiguous output row (kept).
fn fold_seq<T: Arith, F: Fold<T>>(x: &[T], dims: &[usize], red: &[bool], ostr: &[usize], out: &mut [T], shift: &[T]) {
    let m = dims.len();
    let l = dims[m - 1];
    if l == 0 {
        return;
    }
    let last_red = red[m - 1];
    let mut idx = vec![0usize; m - 1];
    let mut o = 0usize;
    for xs in x.chunks_exact(l) {
        if last_red {
            let s = if F::SHIFT { shift[o] } else { T::ZERO };
            out[o] = F::merge(out[o], fold_slice::<T, F>(xs, s));
        } else {
            let os = &mut out[o..o + l];
            if F::SHIFT {
                for ((a, &v), &s) in os.iter_mut().zip(xs).zip(&shift[o..o + l]) {
                    *a = F::step(*a, v, s);
                }
            } else {
                for (a, &v) in os.iter_mut().zip(xs) {
                    *a = F::step(*a, v, T::ZERO);
                }
            }
        }
        // Advance the odometer over the groups in front of the last one.
        step_index(&mut idx, dims, ostr, &mut o);
    }
}

/// Folds a contiguous slice with 8 independent accumulators (vectorisable, and more accurate for sums).
#[inline]
fn fold_slice<T: Arith, F: Fold<T>>(xs: &[T], s: T) -> T {
    let mut acc = [F::init(); 8];
    let mut chunks = xs.chunks_exact(8);
    for c in &mut chunks {
        for i in 0..8 {
            acc[i] = F::step(acc[i], c[i], s);
        }
    }
    let mut r = F::init();
    for &v in chunks.remainder() {
        r = F::step(r, v, s);
    }
    let a = [F::merge(acc[0], acc[4]), F::merge(acc[1], acc[5]), F::merge(acc[2], acc[6]), F::merge(acc[3], acc[7])];
    F::merge(r, F::merge(F::merge(a[0], a[2]), F::merge(a[1], a[3])))
}

// ---------------------------------------------------------------------------------------------------------
// ArgMax / ArgMin
// ---------------------------------------------------------------------------------------------------------

/// Whether `v` replaces the current best `b` (NaN counts as the extremum, as in numpy).
#[inline(always)]
#[allow(clippy::eq_op)]
fn better<T: PartialOrd>(v: T, b: T, max: bool, last: bool) -> bool {
    let v_nan = v != v;
    let b_nan = b != b;
    match (max, last) {
        (true, false) => v > b || (v_nan && !b_nan),
        (true, true) => v >= b || v_nan,
        (false, false) => v < b || (v_nan && !b_nan),
        (false, true) => v <= b || v_nan,
    }
}

fn arg_reduce<T: Element>(x: &[T], outer: usize, len: usize, inner: usize, max: bool, last: bool, out: &mut [i64]) {
    if out.is_empty() {
        return;
    }
    let block = |xb: &[T], ob: &mut [i64]| {
        if inner == 1 {
            let mut bi = 0;
            let mut b = xb[0];
            for (i, &v) in xb.iter().enumerate().skip(1) {
                if better(v, b, max, last) {
                    b = v;
                    bi = i;
                }
            }
            ob[0] = bi as i64;
        } else {
            ob.fill(0);
            for r in 1..len {
                let row = &xb[r * inner..(r + 1) * inner];
                for (j, (o, &v)) in ob.iter_mut().zip(row).enumerate() {
                    if better(v, xb[*o as usize * inner + j], max, last) {
                        *o = r as i64;
                    }
                }
            }
        }
    };
    let xs = &x[..outer * len * inner];
    if x.len() >= PAR_MIN && outer > 1 {
        spin_pool::for_each_piece_mut(out, inner, || (), |_, i, ob| block(&xs[i * len * inner..(i + 1) * len * inner], ob));
    } else {
        out.chunks_mut(inner).zip(xs.chunks(len * inner)).for_each(|(ob, xb)| block(xb, ob));
    }
}

// ---------------------------------------------------------------------------------------------------------
// CumSum
// ---------------------------------------------------------------------------------------------------------

fn cumsum<T: Arith>(x: &[T], outer: usize, len: usize, inner: usize, exclusive: bool, reverse: bool, out: &mut [T]) {
    if out.is_empty() {
        return;
    }
    let block = |xb: &[T], ob: &mut [T]| {
        // Visit rows in scan order; `prev` is the previous row visited (its output holds the running sum).
        let mut prev: Option<usize> = None;
        for s in 0..len {
            let r = if reverse { len - 1 - s } else { s };
            let cur = r * inner..(r + 1) * inner;
            match prev {
                None => {
                    if exclusive {
                        ob[cur].fill(T::ZERO);
                    } else {
                        ob[cur.clone()].copy_from_slice(&xb[cur]);
                    }
                }
                Some(p) => {
                    // exclusive: out[r] = out[p] + x[p]; inclusive: out[r] = out[p] + x[r]
                    let src = if exclusive { p } else { r };
                    let (po, co) = if p < r {
                        let (a, b) = ob.split_at_mut(r * inner);
                        (&a[p * inner..(p + 1) * inner], &mut b[..inner])
                    } else {
                        let (a, b) = ob.split_at_mut(p * inner);
                        (&b[..inner], &mut a[r * inner..(r + 1) * inner])
                    };
                    let xr = &xb[src * inner..(src + 1) * inner];
                    for ((c, &a), &v) in co.iter_mut().zip(po).zip(xr) {
                        *c = a.add(v);
                    }
                }
            }
            prev = Some(r);
        }
    };
    let xs = &x[..outer * len * inner];
    let bl = (len * inner).max(1);
    if x.len() >= PAR_MIN && outer > 1 {
        spin_pool::for_each_piece_mut(out, bl, || (), |_, i, ob| block(&xs[i * bl..(i + 1) * bl], ob));
    } else {
        out.chunks_mut(bl).zip(xs.chunks(bl)).for_each(|(ob, xb)| block(xb, ob));
    }
}

// ---------------------------------------------------------------------------------------------------------
// TopK
// ---------------------------------------------------------------------------------------------------------

/// A total order on elements: NaN above everything (and equal to itself).
#[inline]
#[allow(clippy::eq_op)]
fn total_cmp<T: PartialOrd>(a: T, b: T) -> Ordering {
    match a.partial_cmp(&b) {
        Some(o) => o,
        None => match (a != a, b != b) {
            (true, true) => Ordering::Equal,
            (true, false) => Ordering::Greater,
            _ => Ordering::Less,
        },
    }
}

/// Up to this k, TopK keeps a sorted list of the best k in one pass instead of partially sorting the axis.
const SMALL_K: usize = 16;

#[allow(clippy::too_many_arguments)]
fn top_k<T: Element>(
    x: &[T],
    outer: usize,
    len: usize,
    inner: usize,
    k: usize,
    largest: bool,
    vals: &mut [T],
    idx: &mut [i64],
) {
    if k == 0 || vals.is_empty() {
        return;
    }
    let block = |order: &mut Vec<usize>, xb: &[T], vb: &mut [T], ib: &mut [i64]| {
        for j in 0..inner {
            let key = |i: usize| xb[i * inner + j];
            // Largest first (or smallest first); ties go to the lower index.
            let cmp = |a: &usize, b: &usize| {
                let o = if largest { total_cmp(key(*b), key(*a)) } else { total_cmp(key(*a), key(*b)) };
                o.then(a.cmp(b))
            };
            order.clear();
            if k <= SMALL_K {
                // One pass keeping the k best in order; a later equal value never displaces an earlier one.
                for i in 0..len {
                    let v = key(i);
                    let beats = |b: usize| {
                        let o = total_cmp(v, key(b));
                        if largest {
                            o == Ordering::Greater
                        } else {
                            o == Ordering::Less
                        }
                    };
                    if order.len() == k {
                        if !beats(order[k - 1]) {
                            continue;
                        }
                        order.pop();
                    }
                    let p = order.iter().position(|&b| beats(b)).unwrap_or(order.len());
                    order.insert(p, i);
                }
            } else {
                order.extend(0..len);
                if k < len {
                    order.select_nth_unstable_by(k - 1, cmp);
                }
                order[..k].sort_unstable_by(cmp);
            }
            for (r, &i) in order[..k].iter().enumerate() {
                vb[r * inner + j] = key(i);
                ib[r * inner + j] = i as i64;
            }
        }
    };
    let xs = &x[..outer * len * inner];
    let (bx, bo) = (len * inner, k * inner);
    if x.len() >= PAR_MIN && outer > 1 {
        // runs of about two blocks' worth per thread, each with its own order buffer
        let per = outer.div_ceil(2 * spin_pool::threads()).max(1);
        spin_pool::for_each_chunk_mut2(vals, per * bo, idx, per * bo, &|t, vr, ir| {
            let mut order = Vec::with_capacity(len);
            for (k, (vb, ib)) in vr.chunks_mut(bo).zip(ir.chunks_mut(bo)).enumerate() {
                let o = t * per + k;
                block(&mut order, &xs[o * bx..(o + 1) * bx], vb, ib);
            }
        });
    } else {
        let mut order = Vec::with_capacity(len);
        for ((vb, ib), xb) in vals.chunks_mut(bo).zip(idx.chunks_mut(bo)).zip(xs.chunks(bx)) {
            block(&mut order, xb, vb, ib);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::Op;
    use crate::runtime::kernels::test_util::run;
    use crate::runtime::kernels::eval;
    use crate::ir::ops::{infer, InferError, TypeInfo};


    fn red(op: ReduceOp, axes: Option<Vec<usize>>, keepdims: bool) -> Op {
        Op::Reduce { op, axes, keepdims, noop_with_empty_axes: false }
    }

    #[test]
    fn reduce_patterns_match_hand_values() {
        // x = [[[1,2],[3,4]],[[5,6],[7,8]]]
        let x = Tensor::from_f32(vec![2, 2, 2], (1..=8).map(|v| v as f32).collect());
        let y = &run(red(ReduceOp::Sum, Some(vec![1]), true), &[Some(&x)], 1)[0];
        assert_eq!(y.shape, vec![2, 1, 2]);
        assert_eq!(y.as_f32().unwrap(), &[4.0, 6.0, 12.0, 14.0]);
        let y = &run(red(ReduceOp::Max, Some(vec![0, 2]), false), &[Some(&x)], 1)[0];
        assert_eq!(y.as_f32().unwrap(), &[6.0, 8.0]);
        let y = &run(red(ReduceOp::Prod, Some(vec![2]), false), &[Some(&x)], 1)[0];
        assert_eq!(y.as_f32().unwrap(), &[2.0, 12.0, 30.0, 56.0]);
        let y = &run(red(ReduceOp::Mean, None, false), &[Some(&x)], 1)[0];
        assert_eq!(y.shape, Vec::<usize>::new());
        assert_eq!(y.as_f32().unwrap(), &[4.5]);
        // axes from input 1 (negative), L2 over the last axis: sqrt(1+4), sqrt(9+16), ...
        let axes = Tensor::from_i64(vec![1], vec![-1]);
        let y = &run(red(ReduceOp::L2, None, false), &[Some(&x), Some(&axes)], 1)[0];
        assert!((y.as_f32().unwrap()[1] - 5.0).abs() < 1e-6);
        // LogSumExp of [1000, 1000] = 1000 + ln 2 (needs the max shift).
        let big = Tensor::from_f32(vec![2], vec![1000.0, 1000.0]);
        let y = &run(red(ReduceOp::LogSumExp, None, false), &[Some(&big)], 1)[0];
        assert!((y.as_f32().unwrap()[0] - (1000.0 + std::f32::consts::LN_2)).abs() < 1e-3);
    }

    #[test]
    fn empty_reductions_and_noop() {
        let x = Tensor::from_f32(vec![2, 0, 3], vec![]);
        let y = &run(red(ReduceOp::Max, Some(vec![1]), true), &[Some(&x)], 1)[0];
        assert_eq!(y.shape, vec![2, 1, 3]);
        assert!(y.as_f32().unwrap().iter().all(|&v| v == f32::NEG_INFINITY));
        let y = &run(red(ReduceOp::Prod, Some(vec![1]), false), &[Some(&x)], 1)[0];
        assert!(y.as_f32().unwrap().iter().all(|&v| v == 1.0));
        let xi = Tensor::from_i64(vec![0], vec![]);
        let y = &run(red(ReduceOp::Min, None, false), &[Some(&xi)], 1)[0];
        assert_eq!(y.to_i64_vec(), vec![i64::MAX]);
        let x = Tensor::from_f32(vec![3], vec![1.0, -2.0, 3.0]);
        let noop = Op::Reduce { op: ReduceOp::Sum, axes: None, keepdims: true, noop_with_empty_axes: true };
        assert_eq!(run(noop, &[Some(&x)], 1)[0], x);
        // integer mean truncates toward zero
        let xi = Tensor::from_i64(vec![2], vec![-3, 0]);
        assert_eq!(run(red(ReduceOp::Mean, None, false), &[Some(&xi)], 1)[0].to_i64_vec(), vec![-1]);
    }

    #[test]
    fn large_reductions_agree_with_a_naive_sum() {
        // Exercise the parallel paths: [K, R], [R, K], [K, R, K].
        let (a, b, c) = (64, 33, 40);
        let x: Vec<f32> = (0..a * b * c).map(|i| ((i * 7919) % 13) as f32 - 6.0).collect();
        let t = Tensor::from_f32(vec![a, b, c], x.clone());
        let naive = |keep: &dyn Fn(usize, usize, usize) -> usize, n: usize| {
            let mut o = vec![0.0f32; n];
            for i in 0..a {
                for j in 0..b {
                    for k in 0..c {
                        o[keep(i, j, k)] += x[(i * b + j) * c + k];
                    }
                }
            }
            o
        };
        let y = run(red(ReduceOp::Sum, Some(vec![1]), false), &[Some(&t)], 1).remove(0);
        assert_eq!(y.as_f32().unwrap(), naive(&|i, _, k| i * c + k, a * c).as_slice());
        let y = run(red(ReduceOp::Sum, Some(vec![0, 1]), false), &[Some(&t)], 1).remove(0);
        assert_eq!(y.as_f32().unwrap(), naive(&|_, _, k| k, c).as_slice());
        let y = run(red(ReduceOp::Sum, Some(vec![1, 2]), false), &[Some(&t)], 1).remove(0);
        assert_eq!(y.as_f32().unwrap(), naive(&|i, _, _| i, a).as_slice());
        let y = run(red(ReduceOp::Sum, Some(vec![0, 2]), false), &[Some(&t)], 1).remove(0);
        assert_eq!(y.as_f32().unwrap(), naive(&|_, j, _| j, b).as_slice());
    }

    #[test]
    fn argmax_cumsum_topk() {
        let x = Tensor::from_f32(vec![2, 3], vec![1.0, 5.0, 5.0, 7.0, 2.0, 7.0]);
        let am = |axis, last| Op::ArgReduce { max: true, axis, keepdims: false, select_last_index: last };
        assert_eq!(run(am(1, false), &[Some(&x)], 1)[0].to_i64_vec(), vec![1, 0]);
        assert_eq!(run(am(1, true), &[Some(&x)], 1)[0].to_i64_vec(), vec![2, 2]);
        assert_eq!(run(am(0, false), &[Some(&x)], 1)[0].to_i64_vec(), vec![1, 0, 1]);
        let amin = Op::ArgReduce { max: false, axis: 0, keepdims: true, select_last_index: false };
        let y = &run(amin, &[Some(&x)], 1)[0];
        assert_eq!((y.shape.clone(), y.to_i64_vec()), (vec![1, 3], vec![0, 1, 0]));

        // ONNX CumSum examples: [1,2,3,4,5] → exclusive [0,1,3,6,10], reverse [15,14,12,9,5],
        // exclusive reverse [14,12,9,5,0]
        let v = Tensor::from_f32(vec![5], vec![1.0, 2.0, 3.0, 4.0, 5.0]);
        let ax = Tensor::from_i64(vec![], vec![0]);
        let cs = |exclusive, reverse| run(Op::CumSum { exclusive, reverse }, &[Some(&v), Some(&ax)], 1).remove(0);
        assert_eq!(cs(false, false).as_f32().unwrap(), &[1.0, 3.0, 6.0, 10.0, 15.0]);
        assert_eq!(cs(true, false).as_f32().unwrap(), &[0.0, 1.0, 3.0, 6.0, 10.0]);
        assert_eq!(cs(false, true).as_f32().unwrap(), &[15.0, 14.0, 12.0, 9.0, 5.0]);
        assert_eq!(cs(true, true).as_f32().unwrap(), &[14.0, 12.0, 9.0, 5.0, 0.0]);
        // 2-D along axis 0: [[1,2,3],[4,5,6]] → [[1,2,3],[5,7,9]]
        let m = Tensor::from_i64(vec![2, 3], vec![1, 2, 3, 4, 5, 6]);
        let y = run(Op::CumSum { exclusive: false, reverse: false }, &[Some(&m), Some(&ax)], 1).remove(0);
        assert_eq!(y.to_i64_vec(), vec![1, 2, 3, 5, 7, 9]);

        // TopK with ties: lower index first.
        let t = Tensor::from_f32(vec![1, 5], vec![3.0, 1.0, 3.0, 2.0, 5.0]);
        let k = Tensor::from_i64(vec![1], vec![3]);
        let o = run(Op::TopK { axis: 1, largest: true, sorted: true }, &[Some(&t), Some(&k)], 2);
        assert_eq!(o[0].as_f32().unwrap(), &[5.0, 3.0, 3.0]);
        assert_eq!(o[1].to_i64_vec(), vec![4, 0, 2]);
        let o = run(Op::TopK { axis: 1, largest: false, sorted: true }, &[Some(&t), Some(&k)], 2);
        assert_eq!(o[1].to_i64_vec(), vec![1, 3, 0]);
        // k above SMALL_K takes the partial-sort path: both must agree (values descending, ties by index).
        let long: Vec<f32> = (0..40).map(|i| ((i * 7) % 10) as f32).collect();
        let lt = Tensor::from_f32(vec![40], long.clone());
        let top = Op::TopK { axis: 0, largest: true, sorted: true };
        for kk in [3i64, 20] {
            let kt = Tensor::from_i64(vec![1], vec![kk]);
            let o = run(top.clone(), &[Some(&lt), Some(&kt)], 2);
            let mut want: Vec<usize> = (0..40).collect();
            want.sort_by(|&a, &b| long[b].partial_cmp(&long[a]).unwrap().then(a.cmp(&b)));
            let want: Vec<i64> = want[..kk as usize].iter().map(|&i| i as i64).collect();
            assert_eq!(o[1].to_i64_vec(), want);
        }
        let k9 = Tensor::from_i64(vec![1], vec![9]);
        let mut outs = vec![Tensor::default(); 2];
        let top = Op::TopK { axis: 1, largest: true, sorted: true };
        assert!(eval(&top, &[Some(&t), Some(&k9)], &mut outs, &mut Scratch::default()).is_err());
    }

    #[test]
    fn infer_reads_constant_axes_and_k() {
        let s = [2usize, 3, 4];
        let x = TypeInfo { dtype: DType::F32, shape: &s, value: None };
        let a = Tensor::from_i64(vec![1], vec![1]);
        let ax = TypeInfo { dtype: DType::I64, shape: &[1], value: Some(&a) };
        let op = red(ReduceOp::Sum, None, true);
        assert_eq!(infer(&op, &[Some(x), Some(ax)]).unwrap(), vec![(DType::F32, vec![2, 1, 4])]);
        let dyn_ax = TypeInfo { value: None, ..ax };
        assert_eq!(infer(&op, &[Some(x), Some(dyn_ax)]), Err(InferError::Dynamic));
        let top = Op::TopK { axis: 2, largest: true, sorted: true };
        let k = Tensor::from_i64(vec![1], vec![2]);
        let kt = TypeInfo { dtype: DType::I64, shape: &[1], value: Some(&k) };
        assert_eq!(infer(&top, &[Some(x), Some(kt)]).unwrap()[1], (DType::I64, vec![2, 3, 2]));
    }
}
