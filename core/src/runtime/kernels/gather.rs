//! Indexed reads and writes: Gather, GatherElements, GatherND, ScatterElements, ScatterND and TensorScatter.
//!
//! Data may be of any dtype; indices are int32 or int64, negative indices count from the end of their axis
//! and out-of-range indices are an error. Gather copies whole contiguous rows (for axis 0, the embedding
//! lookup, each index copies one row of the table), in parallel when the output is large.

use super::layout::for_rows;
use super::util::strides;
use crate::ir::ops::dims::step_index;
use super::input;
use crate::ir::ops::gather::{elements_check, gather_nd_shape, gather_shape, reduction_ok, scatter_nd_check, tensor_scatter_check};
use crate::ir::{BinaryOp, Element, Tensor, TensorData};
use crate::with_data;
use half::{bf16, f16};

/// An index element type (int32 or int64).
trait Index: Copy + Send + Sync {
    fn get(self) -> i64;
}
impl Index for i32 {
    #[inline]
    fn get(self) -> i64 {
        self as i64
    }
}
impl Index for i64 {
    #[inline]
    fn get(self) -> i64 {
        self
    }
}

/// Calls `$body` with `$v` bound to the elements of an int32/int64 index tensor; other dtypes return an error.
macro_rules! with_indices {
    ($t:expr, $v:ident => $body:expr) => {
        match &$t.data {
            TensorData::I64($v) => $body,
            TensorData::I32($v) => $body,
            other => return Err(format!("indices must be int32 or int64, not {}", other.dtype())),
        }
    };
}

/// Wraps a negative index and checks it against the axis size.
#[inline]
fn wrap(i: i64, n: usize, axis: usize) -> Result<usize, String> {
    let j = if i < 0 { i + n as i64 } else { i };
    if j < 0 || j >= n as i64 {
        return Err(format!("indices value {i} is out of range for axis {axis} of size {n}"));
    }
    Ok(j as usize)
}

// ---------------------------------------------------------------------------------------------------------
// Evaluation
// ---------------------------------------------------------------------------------------------------------

/// The data and indices inputs and the output of a gather or scatter.
fn args<'a, 'o>(inputs: &[Option<&'a Tensor>], outputs: &'o mut [Tensor]) -> Result<(&'a Tensor, &'a Tensor, &'o mut Tensor), String> {
    Ok((input(inputs, 0)?, input(inputs, 1)?, outputs.first_mut().ok_or("the node has no output")?))
}

/// Runs Gather along `axis`.
pub(super) fn gather_op(axis: usize, inputs: &[Option<&Tensor>], outputs: &mut [Tensor]) -> Result<(), String> {
    let (data, idx, out) = args(inputs, outputs)?;
    let shape = gather_shape(&data.shape, &idx.shape, axis)?;
    let n = data.shape[axis];
    let inner: usize = data.shape[axis + 1..].iter().product();
    with_indices!(idx, iv => {
        if let Some(&bad) = iv.iter().find(|&&i| wrap(i.get(), n, axis).is_err()) {
            return Err(wrap(bad.get(), n, axis).unwrap_err());
        }
        with_data!(&data.data, v => gather(v.as_slice(), iv.as_slice(), n, inner, out.reset(&shape)))
    });
    Ok(())
}

/// Runs GatherElements along `axis`.
pub(super) fn gather_elements_op(axis: usize, inputs: &[Option<&Tensor>], outputs: &mut [Tensor]) -> Result<(), String> {
    let (data, idx, out) = args(inputs, outputs)?;
    elements_check(&data.shape, &idx.shape, axis)?;
    with_indices!(idx, iv => with_data!(&data.data, v => {
        gather_elements(v.as_slice(), &data.shape, iv.as_slice(), &idx.shape, axis, out.reset(&idx.shape))
    }))
}

/// Runs GatherND.
pub(super) fn gather_nd_op(batch_dims: usize, inputs: &[Option<&Tensor>], outputs: &mut [Tensor]) -> Result<(), String> {
    let (data, idx, out) = args(inputs, outputs)?;
    let shape = gather_nd_shape(&data.shape, &idx.shape, batch_dims)?;
    with_indices!(idx, iv => with_data!(&data.data, v => {
        gather_nd(v.as_slice(), &data.shape, iv.as_slice(), &idx.shape, batch_dims, out.reset(&shape))
    }))
}

/// Runs ScatterElements along `axis`.
pub(super) fn scatter_elements_op(axis: usize, reduction: Option<BinaryOp>, inputs: &[Option<&Tensor>], outputs: &mut [Tensor]) -> Result<(), String> {
    let (data, idx, out) = args(inputs, outputs)?;
    reduction_ok(reduction)?;
    elements_check(&data.shape, &idx.shape, axis)?;
    let upd = input(inputs, 2)?;
    if upd.shape != idx.shape {
        return Err(format!("updates shape {:?} differs from indices shape {:?}", upd.shape, idx.shape));
    }
    with_indices!(idx, iv => with_data!(&data.data, v => {
        let u = upd.view().ok_or_else(|| format!("updates are {}, data is {}", upd.dtype(), data.dtype()))?;
        let o = out.reset(&data.shape);
        o.copy_from_slice(v);
        with_reduction(reduction, |f| scatter_elements(o, &data.shape, iv.as_slice(), &idx.shape, u, axis, f))
    }))
}

/// Runs ScatterND.
pub(super) fn scatter_nd_op(reduction: Option<BinaryOp>, inputs: &[Option<&Tensor>], outputs: &mut [Tensor]) -> Result<(), String> {
    let (data, idx, out) = args(inputs, outputs)?;
    reduction_ok(reduction)?;
    let upd = input(inputs, 2)?;
    scatter_nd_check(&data.shape, &idx.shape, &upd.shape)?;
    with_indices!(idx, iv => with_data!(&data.data, v => {
        let u = upd.view().ok_or_else(|| format!("updates are {}, data is {}", upd.dtype(), data.dtype()))?;
        let o = out.reset(&data.shape);
        o.copy_from_slice(v);
        with_reduction(reduction, |f| scatter_nd(o, &data.shape, iv.as_slice(), &idx.shape, u, f))
    }))
}

/// Runs TensorScatter: the cache copied to the output, then the update written in ([`tensor_scatter_into`]).
pub(super) fn tensor_scatter_op(axis: usize, circular: bool, inputs: &[Option<&Tensor>], outputs: &mut [Tensor]) -> Result<(), String> {
    let cache = input(inputs, 0)?;
    let out = outputs.first_mut().ok_or("TensorScatter has one output")?;
    out.assign(cache);
    tensor_scatter_into(axis, circular, out, inputs)
}

/// Writes TensorScatter's update (input 1) into `cache` where it is: for batch row `b`, update position `i` goes
/// to cache position `write_indices[b] + i` (input 2, zeros when absent), modulo the positions when `circular`.
/// Only the update's elements are written — what lets the CPU runtime update a key/value cache in its own
/// buffer. A linear write past the last position is an error.
pub(crate) fn tensor_scatter_into(axis: usize, circular: bool, cache: &mut Tensor, inputs: &[Option<&Tensor>]) -> Result<(), String> {
    let upd = input(inputs, 1)?;
    let idx = inputs.get(2).copied().flatten();
    tensor_scatter_check(&cache.shape, &upd.shape, idx.map(|i| i.shape.as_slice()), axis)?;
    let batch = cache.shape[0];
    let (max, seq) = (cache.shape[axis], upd.shape[axis]);
    let starts: Vec<usize> = match idx {
        None => vec![0; batch],
        Some(i) => {
            let v = i.view::<i64>().ok_or_else(|| format!("write_indices must be int64, not {}", i.dtype()))?;
            v.iter()
                .map(|&w| match (circular, w) {
                    (true, _) if max > 0 => Ok(w.rem_euclid(max as i64) as usize),
                    (false, w) if w >= 0 && (w as u64).saturating_add(seq as u64) <= max as u64 => Ok(w as usize),
                    _ => Err(format!("write index {w} with {seq} new positions does not fit {max} cache positions")),
                })
                .collect::<Result<_, _>>()?
        }
    };
    if upd.dtype() != cache.dtype() {
        return Err(format!("the update is {}, the cache {}", upd.dtype(), cache.dtype()));
    }
    let inner: usize = cache.shape[axis + 1..].iter().product();
    let per_batch: usize = cache.shape[1..axis].iter().product();
    with_data!(&upd.data, u => {
        let c = cache.view_mut().expect("dtypes checked equal");
        for (o, src) in u.chunks_exact((seq * inner).max(1)).enumerate().take(batch * per_batch) {
            let start = starts[o / per_batch.max(1)];
            let base = o * max * inner;
            for (i, row) in src.chunks_exact(inner.max(1)).enumerate() {
                let at = base + ((start + i) % max.max(1)) * inner;
                c[at..at + inner].copy_from_slice(row);
            }
        }
    });
    Ok(())
}

/// out[o, j, :] = data[o, idx[j], :] for rows of `inner` elements; indices are already checked.
fn gather<T: Element, I: Index>(data: &[T], idx: &[I], n: usize, inner: usize, out: &mut [T]) {
    let ni = idx.len();
    if ni == 0 {
        return;
    }
    for_rows(out, inner, |first, rows| {
        let (mut o, mut j) = (first / ni, first % ni);
        for dst in rows.chunks_mut(inner) {
            let mut i = idx[j].get();
            if i < 0 {
                i += n as i64;
            }
            let src = (o * n + i as usize) * inner;
            dst.copy_from_slice(&data[src..src + inner]);
            j += 1;
            if j == ni {
                j = 0;
                o += 1;
            }
        }
    });
}

/// Calls `f(out_offset, data_offset_without_axis)` for each row of `ishape` (all dims but the last), reading
/// data with `dst` strides.
fn rows_of(
    ishape: &[usize],
    dst: &[usize],
    mut f: impl FnMut(usize, usize) -> Result<(), String>,
) -> Result<(), String> {
    let r = ishape.len();
    let rows: usize = ishape[..r - 1].iter().product();
    let row = ishape[r - 1];
    if row == 0 {
        return Ok(());
    }
    let mut idx = vec![0usize; r - 1];
    let mut base = 0usize;
    for k in 0..rows {
        f(k * row, base)?;
        step_index(&mut idx, ishape, dst, &mut base);
    }
    Ok(())
}

/// Calls `f(k, p)` for every element `k` of the indices (row-major over `ishape`), with `p` the data offset
/// it addresses along `axis`, after checking the index.
fn along_axis<I: Index>(dshape: &[usize], idx: &[I], ishape: &[usize], axis: usize, mut f: impl FnMut(usize, usize)) -> Result<(), String> {
    let mut dst = strides(dshape);
    let (n, sa) = (dshape[axis], dst[axis]);
    dst[axis] = 0;
    let r = dshape.len();
    let step = dst[r - 1];
    let row = ishape[r - 1];
    rows_of(ishape, &dst, |o, base| {
        for j in 0..row {
            let a = wrap(idx[o + j].get(), n, axis)?;
            f(o + j, base + j * step + a * sa);
        }
        Ok(())
    })
}

fn gather_elements<T: Element, I: Index>(
    data: &[T],
    dshape: &[usize],
    idx: &[I],
    ishape: &[usize],
    axis: usize,
    out: &mut [T],
) -> Result<(), String> {
    along_axis(dshape, idx, ishape, axis, |k, p| out[k] = data[p])
}

fn gather_nd<T: Element, I: Index>(
    data: &[T],
    dshape: &[usize],
    idx: &[I],
    ishape: &[usize],
    b: usize,
    out: &mut [T],
) -> Result<(), String> {
    let q = ishape.len();
    let m = ishape[q - 1];
    let dst = strides(dshape);
    let chunk: usize = dshape[b + m..].iter().product();
    let batches: usize = dshape[..b].iter().product();
    let per_batch: usize = ishape[b..q - 1].iter().product();
    let bstride: usize = dshape[b..].iter().product();
    for bi in 0..batches {
        for t in 0..per_batch {
            let k = bi * per_batch + t;
            let mut off = bi * bstride;
            for (j, i) in idx[k * m..(k + 1) * m].iter().enumerate() {
                off += wrap(i.get(), dshape[b + j], b + j)? * dst[b + j];
            }
            out[k * chunk..(k + 1) * chunk].copy_from_slice(&data[off..off + chunk]);
        }
    }
    Ok(())
}

/// Element combination of the scatter reductions (bools: add is or, mul is and).
trait Combine: Element {
    fn add(self, o: Self) -> Self;
    fn mul(self, o: Self) -> Self;
    fn max(self, o: Self) -> Self {
        if o > self {
            o
        } else {
            self
        }
    }
    fn min(self, o: Self) -> Self {
        if o < self {
            o
        } else {
            self
        }
    }
}

macro_rules! combine_int {
    ($($t:ty),*) => {$(
        impl Combine for $t {
            fn add(self, o: Self) -> Self { self.wrapping_add(o) }
            fn mul(self, o: Self) -> Self { self.wrapping_mul(o) }
        }
    )*};
}
combine_int!(i8, u8, i16, i32, i64);

impl Combine for f32 {
    fn add(self, o: Self) -> Self {
        self + o
    }
    fn mul(self, o: Self) -> Self {
        self * o
    }
}
impl Combine for f64 {
    fn add(self, o: Self) -> Self {
        self + o
    }
    fn mul(self, o: Self) -> Self {
        self * o
    }
}
impl Combine for f16 {
    fn add(self, o: Self) -> Self {
        f16::from_f32(self.to_f32() + o.to_f32())
    }
    fn mul(self, o: Self) -> Self {
        f16::from_f32(self.to_f32() * o.to_f32())
    }
}
impl Combine for bf16 {
    fn add(self, o: Self) -> Self {
        bf16::from_f32(self.to_f32() + o.to_f32())
    }
    fn mul(self, o: Self) -> Self {
        bf16::from_f32(self.to_f32() * o.to_f32())
    }
}
impl Combine for bool {
    fn add(self, o: Self) -> Self {
        self | o
    }
    fn mul(self, o: Self) -> Self {
        self & o
    }
}

/// Calls `k` with the element function of the reduction (dispatched once per call).
fn with_reduction<T: Combine, R>(r: Option<BinaryOp>, k: impl FnOnce(&dyn Fn(T, T) -> T) -> R) -> R {
    match r {
        Some(BinaryOp::Add) => k(&T::add),
        Some(BinaryOp::Mul) => k(&T::mul),
        Some(BinaryOp::Max) => k(&T::max),
        Some(BinaryOp::Min) => k(&T::min),
        _ => k(&|_, u| u),
    }
}

fn scatter_elements<T: Element, I: Index>(
    out: &mut [T],
    dshape: &[usize],
    idx: &[I],
    ishape: &[usize],
    upd: &[T],
    axis: usize,
    f: &dyn Fn(T, T) -> T,
) -> Result<(), String> {
    along_axis(dshape, idx, ishape, axis, |k, p| out[p] = f(out[p], upd[k]))
}

fn scatter_nd<T: Element, I: Index>(
    out: &mut [T],
    dshape: &[usize],
    idx: &[I],
    ishape: &[usize],
    upd: &[T],
    f: &dyn Fn(T, T) -> T,
) -> Result<(), String> {
    let m = ishape[ishape.len() - 1];
    let dst = strides(dshape);
    let chunk: usize = dshape[m..].iter().product();
    let tuples: usize = ishape[..ishape.len() - 1].iter().product();
    for k in 0..tuples {
        let mut off = 0;
        for (j, i) in idx[k * m..(k + 1) * m].iter().enumerate() {
            off += wrap(i.get(), dshape[j], j)? * dst[j];
        }
        for (o, &u) in out[off..off + chunk].iter_mut().zip(&upd[k * chunk..(k + 1) * chunk]) {
            *o = f(*o, u);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::Op;
    use crate::runtime::kernels::{eval, Scratch};
    use crate::ir::ops::{infer, TypeInfo};

    fn run(op: Op, inputs: &[&Tensor]) -> Result<Tensor, String> {
        let ins: Vec<Option<&Tensor>> = inputs.iter().map(|t| Some(*t)).collect();
        let infos: Vec<Option<TypeInfo>> =
            inputs.iter().map(|t| Some(TypeInfo { dtype: t.dtype(), shape: &t.shape, value: None })).collect();
        let inferred = infer(&op, &infos).map_err(|e| format!("{e:?}"))?;
        let mut outs = vec![Tensor::default()];
        eval(&op, &ins, &mut outs, &mut Scratch::default())?;
        assert_eq!((outs[0].dtype(), &outs[0].shape), (inferred[0].0, &inferred[0].1));
        Ok(outs.remove(0))
    }
    fn f(shape: &[usize], v: &[f32]) -> Tensor {
        Tensor::from_f32(shape.to_vec(), v.to_vec())
    }
    fn i(shape: &[usize], v: &[i64]) -> Tensor {
        Tensor::from_i64(shape.to_vec(), v.to_vec())
    }

    #[test]
    fn gather_axes_and_negative_indices() {
        // ONNX example, axis 0: data [[1.0, 1.2], [2.3, 3.4], [4.5, 5.7]], indices [[0, 1], [1, 2]]
        let data = f(&[3, 2], &[1.0, 1.2, 2.3, 3.4, 4.5, 5.7]);
        let y = run(Op::Gather { axis: 0 }, &[&data, &i(&[2, 2], &[0, 1, 1, 2])]).unwrap();
        assert_eq!(y.shape, vec![2, 2, 2]);
        assert_eq!(y.as_f32().unwrap(), &[1.0, 1.2, 2.3, 3.4, 2.3, 3.4, 4.5, 5.7]);
        // axis 1 with a negative index, int32 indices
        let idx = Tensor::from_vec(vec![1, 2], vec![-1i32, 0]).unwrap();
        let y = run(Op::Gather { axis: 1 }, &[&data, &idx]).unwrap();
        assert_eq!(y.shape, vec![3, 1, 2]);
        assert_eq!(y.as_f32().unwrap(), &[1.2, 1.0, 3.4, 2.3, 5.7, 4.5]);
        let e = run(Op::Gather { axis: 0 }, &[&data, &i(&[1], &[3])]).unwrap_err();
        assert!(e.contains("3 is out of range for axis 0 of size 3"), "{e}");
        // a large embedding lookup goes through the parallel row path
        let table = f(&[100, 1000], &(0..100_000).map(|x| x as f32).collect::<Vec<_>>());
        let y = run(Op::Gather { axis: 0 }, &[&table, &i(&[3], &[7, -1, 0])]).unwrap();
        assert_eq!(y.as_f32().unwrap()[1000], 99_000.0);
        let ids = i(&[200], &(0..200).map(|k| k % 100).collect::<Vec<_>>());
        let y = run(Op::Gather { axis: 0 }, &[&table, &ids]).unwrap();
        assert_eq!(y.as_f32().unwrap()[150 * 1000 + 5], 50_005.0);
    }

    #[test]
    fn gather_elements_and_nd() {
        // ONNX GatherElements examples
        let data = f(&[2, 2], &[1., 2., 3., 4.]);
        let y = run(Op::GatherElements { axis: 1 }, &[&data, &i(&[2, 2], &[0, 0, 1, 0])]).unwrap();
        assert_eq!(y.as_f32().unwrap(), &[1., 1., 4., 3.]);
        let data = f(&[3, 3], &[1., 2., 3., 4., 5., 6., 7., 8., 9.]);
        let y = run(Op::GatherElements { axis: 0 }, &[&data, &i(&[2, 3], &[1, 2, 0, 2, 0, 0])]).unwrap();
        assert_eq!(y.as_f32().unwrap(), &[4., 8., 3., 7., 2., 3.]);
        // ONNX GatherND examples
        let d = Tensor::from_vec(vec![2, 2, 2], vec![0i32, 1, 2, 3, 4, 5, 6, 7]).unwrap();
        let y = run(Op::GatherNd { batch_dims: 0 }, &[&d, &i(&[2, 2], &[0, 1, 1, 0])]).unwrap();
        assert_eq!((y.shape.as_slice(), y.view::<i32>().unwrap()), (&[2, 2][..], &[2, 3, 4, 5][..]));
        let y = run(Op::GatherNd { batch_dims: 1 }, &[&d, &i(&[2, 1], &[1, 0])]).unwrap();
        assert_eq!((y.shape.as_slice(), y.view::<i32>().unwrap()), (&[2, 2][..], &[2, 3, 4, 5][..]));
        let y = run(Op::GatherNd { batch_dims: 0 }, &[&d, &i(&[2, 1, 3], &[0, 0, 1, 1, -1, 0])]).unwrap();
        assert_eq!((y.shape.as_slice(), y.view::<i32>().unwrap()), (&[2, 1][..], &[1, 6][..]));
    }

    #[test]
    fn scatter_with_reductions() {
        // ONNX ScatterElements example: data zeros [3,3], axis 0
        let data = f(&[3, 3], &[0.; 9]);
        let idx = i(&[2, 3], &[1, 0, 2, 0, 2, 1]);
        let upd = f(&[2, 3], &[1.0, 1.1, 1.2, 2.0, 2.1, 2.2]);
        let y = run(Op::ScatterElements { axis: 0, reduction: None }, &[&data, &idx, &upd]).unwrap();
        assert_eq!(y.as_f32().unwrap(), &[2.0, 1.1, 0.0, 1.0, 0.0, 2.2, 0.0, 2.1, 1.2]);
        // duplicate indices with add / mul: data [[1,2,3,4,5]], indices [[1,1]], updates [[1.1,2.1]], axis 1
        let data = f(&[1, 5], &[1., 2., 3., 4., 5.]);
        let (idx, upd) = (i(&[1, 2], &[1, 1]), f(&[1, 2], &[1.1, 2.1]));
        let y = run(Op::ScatterElements { axis: 1, reduction: Some(BinaryOp::Add) }, &[&data, &idx, &upd]).unwrap();
        assert!((y.as_f32().unwrap()[1] - 5.2).abs() < 1e-6);
        let y = run(Op::ScatterElements { axis: 1, reduction: Some(BinaryOp::Mul) }, &[&data, &idx, &upd]).unwrap();
        assert!((y.as_f32().unwrap()[1] - 4.62).abs() < 1e-5);
        let y =
            run(Op::ScatterElements { axis: 1, reduction: Some(BinaryOp::Max) }, &[&data, &i(&[1, 2], &[-1, 0]), &upd])
                .unwrap();
        assert_eq!(y.as_f32().unwrap(), &[2.1, 2., 3., 4., 5.]);
        // ONNX ScatterND example 1: data [1..8], indices [[4],[3],[1],[7]], updates [9,10,11,12]
        let data = f(&[8], &[1., 2., 3., 4., 5., 6., 7., 8.]);
        let y = run(
            Op::ScatterNd { reduction: None },
            &[&data, &i(&[4, 1], &[4, 3, 1, 7]), &f(&[4], &[9., 10., 11., 12.])],
        )
        .unwrap();
        assert_eq!(y.as_f32().unwrap(), &[1., 11., 3., 10., 9., 6., 7., 12.]);
        let y =
            run(Op::ScatterNd { reduction: Some(BinaryOp::Add) }, &[&data, &i(&[2, 1], &[0, 0]), &f(&[2], &[1., 2.])])
                .unwrap();
        assert_eq!(y.as_f32().unwrap()[0], 4.);
        assert!(run(Op::ScatterNd { reduction: None }, &[&data, &i(&[1, 1], &[8]), &f(&[1], &[0.])]).is_err());
    }
}
