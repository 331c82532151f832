//! Softmax, LogSoftmax and Hardmax along one axis (opset-13 semantics: each 1-D slice along `axis` is
//! normalised independently), on f32/f64/f16/bf16 (half types compute in f32).
//!
//! The maximum of each slice is subtracted before exponentiating. When `axis` is the last dim the slices are
//! contiguous rows; otherwise each block `[n, inner]` is handled column-wise: per-column max and sum first,
//! then a pass over the rows, both with contiguous inner loops.

use std::mem::size_of;

use crate::runtime::spin_pool;

use super::broadcast::{data, CHUNK, PAR_MIN};
use super::dispatch::with_float;
use super::numeric::{vector::avx2_copy, Float, Real};
use super::input;
use crate::ir::ops::softmax::geometry;
use crate::ir::Tensor;

/// Which normalisation.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Kind {
    /// Softmax
    Soft,
    /// LogSoftmax
    Log,
    /// Hardmax
    Hard,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Soft => "Softmax",
            Kind::Log => "LogSoftmax",
            Kind::Hard => "Hardmax",
        }
    }
}

/// Runs Softmax / LogSoftmax / Hardmax along `axis`.
pub(super) fn eval(kind: Kind, axis: usize, inputs: &[Option<&Tensor>], outputs: &mut [Tensor]) -> Result<(), String> {
    let name = kind.name();
    let x = input(inputs, 0)?;
    let (outer, n, inner) = geometry(name, x.dtype(), &x.shape, axis)?;
    let out = outputs.first_mut().ok_or_else(|| format!("{name} needs an output"))?;
    with_float!(x.dtype(), T => {
        let a = data::<T>(x, "input")?;
        let o = out.reset::<T>(&x.shape);
        if inner == 1 {
            rows::<T>(kind, a, o, n);
        } else {
            blocks::<T>(kind, a, o, outer, n, inner);
        }
        Ok(())
    }, Err(format!("{name} is not defined for {}", x.dtype())))
}

/// True when the storage type is its own compute type (f32, f64): results can be kept in the output
/// between passes without rounding.
fn exact<T: Float>() -> bool {
    size_of::<T>() == size_of::<T::C>()
}

/// Index of the first maximum (a NaN counts as the maximum, like numpy `argmax`).
#[inline]
fn argmax<C: Real>(mut it: impl Iterator<Item = C>) -> usize {
    let Some(mut best) = it.next() else { return 0 };
    let mut idx = 0;
    for (i, v) in it.enumerate() {
        if !best.is_nan() && (v > best || v.is_nan()) {
            best = v;
            idx = i + 1;
        }
    }
    idx
}

/// Independent accumulators for reductions over a row: they let the loops vectorise (a single running
/// float sum or max is a serial dependency the compiler must keep in order).
const LANES: usize = 8;

/// Maximum of `f(x_i)` over a row (NaN is skipped; it reaches the output through the exponentials).
#[inline(always)]
fn lane_max<T: Float>(x: &[T]) -> T::C {
    let mut acc = [<T::C as Real>::NEG_INFINITY; LANES];
    let mut chunks = x.chunks_exact(LANES);
    for c in &mut chunks {
        for (a, v) in acc.iter_mut().zip(c) {
            let v = v.load();
            *a = if v > *a { v } else { *a };
        }
    }
    let mut m = <T::C as Real>::NEG_INFINITY;
    for v in acc.into_iter().chain(chunks.remainder().iter().map(|v| v.load())) {
        m = if v > m { v } else { m };
    }
    m
}

/// Sum of `f(x_i)` over a row, in `LANES` independent accumulators.
#[inline(always)]
fn lane_sum_of<T: Float>(x: &[T], f: impl Fn(T::C) -> T::C) -> T::C {
    let zero = <T::C as Real>::ZERO;
    let mut acc = [zero; LANES];
    let mut chunks = x.chunks_exact(LANES);
    for c in &mut chunks {
        for (a, v) in acc.iter_mut().zip(c) {
            *a = *a + f(v.load());
        }
    }
    let mut s = zero;
    for v in acc.into_iter().chain(chunks.remainder().iter().map(|v| f(v.load()))) {
        s = s + v;
    }
    s
}

/// Sum of `exp(x_i - m)` over a row.
#[inline(always)]
fn lane_sum_exp<T: Float>(x: &[T], m: T::C) -> T::C {
    lane_sum_of(x, |v| (v - m).exp())
}

/// Sum of a row.
#[inline(always)]
fn lane_sum<T: Float>(x: &[T]) -> T::C {
    lane_sum_of(x, |v| v)
}

/// One contiguous slice.
#[inline(always)]
fn row<T: Float>(kind: Kind, x: &[T], o: &mut [T]) {
    match kind {
        Kind::Hard => {
            let k = argmax(x.iter().map(|v| v.load()));
            o.fill(T::store(<T::C as Real>::ZERO));
            if let Some(v) = o.get_mut(k) {
                *v = T::store(<T::C as Real>::ONE);
            }
        }
        Kind::Soft => {
            let m = lane_max(x);
            if exact::<T>() {
                // the exponentials are kept in the output (no rounding for f32/f64), summed, then scaled
                for (o, v) in o.iter_mut().zip(x) {
                    *o = T::store((v.load() - m).exp());
                }
                let s = lane_sum(o);
                for o in o.iter_mut() {
                    *o = T::store(o.load() / s);
                }
            } else {
                let s = lane_sum_exp(x, m);
                for (o, v) in o.iter_mut().zip(x) {
                    *o = T::store((v.load() - m).exp() / s);
                }
            }
        }
        Kind::Log => {
            let m = lane_max(x);
            // (x - max) is exact; subtracting ln(sum) separately keeps large inputs precise
            let ls = lane_sum_exp(x, m).ln();
            for (o, v) in o.iter_mut().zip(x) {
                *o = T::store((v.load() - m) - ls);
            }
        }
    }
}

/// Contiguous slices of length `n` (axis is the last dim), rows split over the thread team when large.
fn rows<T: Float>(kind: Kind, x: &[T], o: &mut [T], n: usize) {
    if n == 0 || o.is_empty() {
        return;
    }
    let run = |x: &[T], o: &mut [T]| rows_run::<T>(kind, x, o, n);
    if o.len() >= PAR_MIN && o.len() / n > 1 {
        let per = (CHUNK / n).max(1) * n;
        spin_pool::for_each_chunk_mut(o, per, &|i, oc| run(&x[i * per..][..oc.len()], oc));
    } else {
        run(x, o);
    }
}

avx2_copy!(
    /// [`row`] over the `n`-long rows of `x` (compiled for AVX2 + FMA where the CPU has them, for the
    /// vectorised exponentials).
    fn rows_run<T: Float>(kind: Kind, x: &[T], o: &mut [T], n: usize) => rows_run_body);

#[inline(always)]
fn rows_run_body<T: Float>(kind: Kind, x: &[T], o: &mut [T], n: usize) {
    for (xr, or) in x.chunks_exact(n).zip(o.chunks_exact_mut(n)) {
        row(kind, xr, or);
    }
}

/// Blocks `[n, inner]` (axis not last): per-column statistics, then the rows.
fn blocks<T: Float>(kind: Kind, x: &[T], o: &mut [T], outer: usize, n: usize, inner: usize) {
    let block = n * inner;
    if block == 0 || outer == 0 {
        return;
    }
    let zero = <T::C as Real>::ZERO;
    // Softmax of f32/f64 on one thread per block: one exponential per value (soft_block)
    let single = kind == Kind::Soft && exact::<T>();
    if block >= PAR_MIN || outer == 1 {
        // few large blocks: parallel inside each block (when large)
        let par = block >= PAR_MIN;
        let mut st = vec![zero; inner];
        let mut st2 = vec![zero; inner];
        let mut idx = vec![0usize; if kind == Kind::Hard { inner } else { 0 }];
        for (xb, ob) in x.chunks_exact(block).zip(o.chunks_exact_mut(block)) {
            if single && !par {
                soft_block::<T>(xb, ob, n, &mut st, &mut st2);
                continue;
            }
            block_stats::<T>(kind, xb, n, inner, &mut st, &mut st2, &mut idx, par);
            block_out::<T>(kind, xb, ob, inner, &st, &st2, &idx, par);
        }
    } else {
        // many small blocks: parallel over blocks, serial inside
        let per = (CHUNK / block).max(1) * block;
        spin_pool::for_each_chunk_mut(o, per, &|i, oc| {
            let xc = &x[i * per..][..oc.len()];
            let (mut st, mut st2, mut idx) = (vec![zero; inner], vec![zero; inner], vec![0usize; if kind == Kind::Hard { inner } else { 0 }]);
            for (xb, ob) in xc.chunks_exact(block).zip(oc.chunks_exact_mut(block)) {
                if single {
                    soft_block::<T>(xb, ob, n, &mut st, &mut st2);
                    continue;
                }
                block_stats::<T>(kind, xb, n, inner, &mut st, &mut st2, &mut idx, false);
                block_out::<T>(kind, xb, ob, inner, &st, &st2, &idx, false);
            }
        });
    }
}

avx2_copy!(
    /// Softmax of one block `[n, inner]` of f32/f64 ([`exact`]) on one thread: the column maxima, then each
    /// exponential once, kept in the output while the column sums add it up, then the division. The sums add
    /// the same values in the same order as [`block_stats`]' and the quotients are [`block_out`]'s (the two
    /// passes took each exponential twice: YOLOv8's DFL softmax, 4×16×1024, 0.18 ms against onnxruntime's 0.08).
    /// `st`, `st2`: `inner` values of scratch.
    fn soft_block<T: Float>(xb: &[T], ob: &mut [T], n: usize, st: &mut [T::C], st2: &mut [T::C]) => soft_block_body);

#[inline(always)]
fn soft_block_body<T: Float>(xb: &[T], ob: &mut [T], n: usize, st: &mut [T::C], st2: &mut [T::C]) {
    let inner = st.len();
    st.fill(<T::C as Real>::NEG_INFINITY);
    for xr in xb.chunks_exact(inner).take(n) {
        for (m, v) in st.iter_mut().zip(xr) {
            let v = v.load();
            if v > *m {
                *m = v;
            }
        }
    }
    st2.fill(<T::C as Real>::ZERO);
    for (xr, or) in xb.chunks_exact(inner).zip(ob.chunks_exact_mut(inner)).take(n) {
        for (((o, v), m), s) in or.iter_mut().zip(xr).zip(st.iter()).zip(st2.iter_mut()) {
            let e = (v.load() - *m).exp();
            *o = T::store(e);
            *s = *s + e;
        }
    }
    for or in ob.chunks_exact_mut(inner).take(n) {
        for (o, s) in or.iter_mut().zip(st2.iter()) {
            *o = T::store(o.load() / *s);
        }
    }
}

/// Column statistics of one block: Soft: (max, sum); Log: (max, ln sum); Hard: (max, unused), argmax in `idx`.
#[allow(clippy::too_many_arguments)]
fn block_stats<T: Float>(kind: Kind, xb: &[T], n: usize, inner: usize, st: &mut [T::C], st2: &mut [T::C], idx: &mut [usize], par: bool) {
    // columns [j0, j0 + st.len()) of the block
    let cols = |j0: usize, st: &mut [T::C], st2: &mut [T::C], idx: &mut [usize]| {
        let w = st.len();
        let col = |k: usize| &xb[k * inner + j0..k * inner + j0 + w];
        match kind {
            Kind::Hard => {
                for (j, (b, i)) in st.iter_mut().zip(idx.iter_mut()).enumerate() {
                    *b = xb[j0 + j].load();
                    *i = 0;
                }
                for k in 1..n {
                    for ((b, i), v) in st.iter_mut().zip(idx.iter_mut()).zip(col(k)) {
                        let v = v.load();
                        if !b.is_nan() && (v > *b || v.is_nan()) {
                            *b = v;
                            *i = k;
                        }
                    }
                }
            }
            Kind::Soft | Kind::Log => {
                st.fill(<T::C as Real>::NEG_INFINITY);
                for k in 0..n {
                    for (m, v) in st.iter_mut().zip(col(k)) {
                        let v = v.load();
                        if v > *m {
                            *m = v;
                        }
                    }
                }
                st2.fill(<T::C as Real>::ZERO);
                for k in 0..n {
                    for ((s, m), v) in st2.iter_mut().zip(st.iter()).zip(col(k)) {
                        *s = *s + (v.load() - *m).exp();
                    }
                }
                if kind == Kind::Log {
                    for s in st2.iter_mut() {
                        *s = s.ln();
                    }
                }
            }
        }
    };
    const TILE: usize = 512;
    if par && inner > TILE {
        // Hardmax keeps (max, argmax) per column, the others (max, sum)
        if kind == Kind::Hard {
            spin_pool::for_each_chunk_mut2(st, TILE, idx, TILE, &|t, a, i| cols(t * TILE, a, &mut [], i));
        } else {
            spin_pool::for_each_chunk_mut2(st, TILE, st2, TILE, &|t, a, b| cols(t * TILE, a, b, &mut []));
        }
    } else {
        cols(0, st, st2, idx);
    }
}

/// Writes one block from its column statistics.
#[allow(clippy::too_many_arguments)]
fn block_out<T: Float>(kind: Kind, xb: &[T], ob: &mut [T], inner: usize, st: &[T::C], st2: &[T::C], idx: &[usize], par: bool) {
    let one = <T::C as Real>::ONE;
    let zero = <T::C as Real>::ZERO;
    let row = |k: usize, xr: &[T], or: &mut [T]| match kind {
        Kind::Soft => {
            for (((o, v), m), s) in or.iter_mut().zip(xr).zip(st).zip(st2) {
                *o = T::store((v.load() - *m).exp() / *s);
            }
        }
        Kind::Log => {
            for (((o, v), m), ls) in or.iter_mut().zip(xr).zip(st).zip(st2) {
                *o = T::store((v.load() - *m) - *ls);
            }
        }
        Kind::Hard => {
            for (o, &i) in or.iter_mut().zip(idx) {
                *o = T::store(if i == k { one } else { zero });
            }
        }
    };
    if par {
        spin_pool::for_each_piece_mut(ob, inner, || (), |_, k, or| row(k, &xb[k * inner..][..inner], or));
    } else {
        for (k, (or, xr)) in ob.chunks_mut(inner).zip(xb.chunks(inner)).enumerate() {
            row(k, xr, or);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::Op;
    use crate::runtime::kernels::{eval, Scratch};
    use crate::ir::ops::{infer, TypeInfo};
    use crate::ir::DType;

    fn run(op: Op, x: &Tensor) -> Tensor {
        let mut outs = vec![Tensor::default()];
        eval(&op, &[Some(x)], &mut outs, &mut Scratch::default()).unwrap();
        let inf = infer(&op, &[Some(TypeInfo { dtype: x.dtype(), shape: &x.shape, value: None })]).unwrap();
        assert_eq!(inf, vec![(outs[0].dtype(), outs[0].shape.clone())]);
        outs.remove(0)
    }

    /// Softmax of one slice computed directly in f64.
    fn naive(v: &[f64]) -> Vec<f64> {
        let m = v.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        let s: f64 = v.iter().map(|x| (x - m).exp()).sum();
        v.iter().map(|x| (x - m).exp() / s).collect()
    }

    #[test]
    fn softmax_example_and_large_values() {
        // ONNX Softmax example: [[-1, 0, 1]] -> [[0.09003057, 0.24472847, 0.66524096]]
        let y = run(Op::Softmax { axis: 1 }, &Tensor::from_f32(vec![1, 3], vec![-1.0, 0.0, 1.0]));
        for (g, w) in y.as_f32().unwrap().iter().zip([0.09003057, 0.24472847, 0.66524096]) {
            assert!((g - w).abs() < 1e-7);
        }
        // ONNX test_logsoftmax_large_number: stable for 10000.
        let x = Tensor::from_f32(vec![2, 4], vec![0.0, 1.0, 2.0, 3.0, 10000.0, 10001.0, 10002.0, 10003.0]);
        let y = run(Op::LogSoftmax { axis: 1 }, &x);
        let want = [-3.4401896, -2.4401896, -1.4401897, -0.44018966];
        for (i, g) in y.as_f32().unwrap().iter().enumerate() {
            assert!((g - want[i % 4]).abs() < 1e-5, "{g} vs {}", want[i % 4]);
        }
        // the same along a strided axis
        let xt = Tensor::from_f32(vec![4, 2], vec![0.0, 10000.0, 1.0, 10001.0, 2.0, 10002.0, 3.0, 10003.0]);
        let y = run(Op::LogSoftmax { axis: 0 }, &xt);
        for (i, g) in y.as_f32().unwrap().iter().enumerate() {
            assert!((g - want[i / 2]).abs() < 1e-5, "{g} vs {}", want[i / 2]);
        }
    }

    #[test]
    fn every_axis_matches_the_naive_slices() {
        let shape = [3usize, 4, 5];
        let v: Vec<f32> = (0..60).map(|i| ((i * 37 % 11) as f32 - 5.0) * 0.7).collect();
        let x = Tensor::from_f32(shape.to_vec(), v.clone());
        for axis in 0..3 {
            let y = run(Op::Softmax { axis }, &x);
            let l = run(Op::LogSoftmax { axis }, &x);
            let h = run(Op::Hardmax { axis }, &x);
            let (y, l, h) = (y.as_f32().unwrap(), l.as_f32().unwrap(), h.as_f32().unwrap());
            let st = [20usize, 5, 1];
            // every slice along `axis`: the other two indices fixed
            for base in 0..60usize {
                if (base / st[axis]) % shape[axis] != 0 {
                    continue;
                }
                let ids: Vec<usize> = (0..shape[axis]).map(|k| base + k * st[axis]).collect();
                let xs: Vec<f64> = ids.iter().map(|&i| v[i] as f64).collect();
                let want = naive(&xs);
                let first_max = xs.iter().enumerate().fold(0, |b, (i, &x)| if x > xs[b] { i } else { b });
                for (k, &i) in ids.iter().enumerate() {
                    assert!((y[i] as f64 - want[k]).abs() < 1e-6, "axis {axis} softmax");
                    assert!((l[i] as f64 - want[k].ln()).abs() < 1e-5, "axis {axis} logsoftmax");
                    assert_eq!(h[i], if k == first_max { 1.0 } else { 0.0 }, "axis {axis} hardmax");
                }
            }
        }
    }

    #[test]
    fn large_parallel_and_half_inputs() {
        // strided with a large block (parallel inside the block), and contiguous rows in parallel
        let (n, inner) = (3usize, 40000usize);
        let v: Vec<f32> = (0..n * inner).map(|i| (i % 7) as f32 * 0.5).collect();
        let y = run(Op::Softmax { axis: 0 }, &Tensor::from_f32(vec![n, inner], v.clone()));
        let y = y.as_f32().unwrap();
        for j in [0usize, 1, 12345, inner - 1] {
            let want = naive(&(0..n).map(|k| v[k * inner + j] as f64).collect::<Vec<_>>());
            for k in 0..n {
                assert!((y[k * inner + j] as f64 - want[k]).abs() < 1e-6);
            }
        }
        let h = run(Op::Hardmax { axis: 1 }, &Tensor::from_f32(vec![inner, n], v.clone()));
        assert!(h.as_f32().unwrap().chunks(n).all(|r| r.iter().sum::<f32>() == 1.0));
        let x16 = Tensor::from_vec(vec![1, 3], vec![half::f16::from_f32(-1.0), half::f16::ZERO, half::f16::ONE]).unwrap();
        let y = run(Op::Softmax { axis: 1 }, &x16);
        for (g, w) in y.to_f64_vec().iter().zip([0.09003057, 0.24472847, 0.66524096]) {
            assert!((g - w).abs() < 1e-3);
        }
        assert!(infer(&Op::Softmax { axis: 2 }, &[Some(TypeInfo { dtype: DType::F32, shape: &[2, 2], value: None })]).is_err());
        assert!(infer(&Op::Softmax { axis: 0 }, &[Some(TypeInfo { dtype: DType::I32, shape: &[2], value: None })]).is_err());
    }
}
