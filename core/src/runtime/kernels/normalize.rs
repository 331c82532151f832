//! Normalisation ops: BatchNorm (inference), InstanceNorm, LayerNorm, GroupNorm, LRN and LpNorm.
//!
//! All kernels compute in f32: f32 tensors are read and written in place, f64/f16/bf16 tensors are converted
//! to f32 through the scratch buffer and back. Parameter tensors (scale, bias, mean, var) may be any float
//! type. Statistics are two-pass (mean, then mean squared deviation) with 8-lane partial sums.

use std::borrow::Cow;

use crate::runtime::spin_pool;

use super::util::{broadcast_shape, broadcast_strides, for_each_broadcast};
use super::{input, Scratch};
use crate::ir::{Element, Tensor, TensorData};

/// Tensors with at least this many elements are processed in parallel.
const PAR_MIN: usize = 1 << 15;

/// (N, C, spatial size) of an input of rank >= 2.
fn channels(name: &str, shape: &[usize]) -> Result<(usize, usize, usize), String> {
    if shape.len() < 2 {
        return Err(format!("{name} needs an input of rank >= 2, got {shape:?}"));
    }
    Ok((shape[0], shape[1], shape[2..].iter().product()))
}

/// Runs BatchNorm (inference).
pub(super) fn batch_norm(epsilon: f32, inputs: &[Option<&Tensor>], outputs: &mut [Tensor], scratch: &mut Scratch) -> Result<(), String> {
    let x = input(inputs, 0)?;
    let y = outputs.first_mut().ok_or("the node has no output")?;
    let shape = x.shape.clone();
    let channels = || channels("BatchNorm", &shape);
    let (_, c, sp) = channels()?;
    let p: Vec<Cow<[f32]>> = (1..5).map(|i| param(inputs, i, c, "BatchNorm")).collect::<Result<_, _>>()?;
    let eps = epsilon;
    with_f32(x, y, &shape, scratch, |xs, ys| {
        planes(xs, ys, sp, |i, xp, yp| {
            let ch = i % c;
            let a = p[0][ch] / (p[3][ch] + eps).sqrt();
            let b = p[1][ch] - p[2][ch] * a;
            for (o, &v) in yp.iter_mut().zip(xp) {
                *o = v * a + b;
            }
        });
        Ok(())
    })
}

/// Runs InstanceNorm.
pub(super) fn instance_norm(epsilon: f32, inputs: &[Option<&Tensor>], outputs: &mut [Tensor], scratch: &mut Scratch) -> Result<(), String> {
    let x = input(inputs, 0)?;
    let y = outputs.first_mut().ok_or("the node has no output")?;
    let shape = x.shape.clone();
    let channels = || channels("InstanceNorm", &shape);
    let (_, c, sp) = channels()?;
    let scale = param(inputs, 1, c, "InstanceNorm")?;
    let bias = param(inputs, 2, c, "InstanceNorm")?;
    let eps = epsilon;
    with_f32(x, y, &shape, scratch, |xs, ys| {
        planes(xs, ys, sp, |i, xp, yp| {
            let ch = i % c;
            let (mean, var) = mean_var(xp);
            let a = scale[ch] / (var + eps).sqrt();
            let b = bias[ch] - mean * a;
            for (o, &v) in yp.iter_mut().zip(xp) {
                *o = v * a + b;
            }
        });
        Ok(())
    })
}

/// Runs GroupNorm.
pub(super) fn group_norm(num_groups: usize, epsilon: f32, inputs: &[Option<&Tensor>], outputs: &mut [Tensor], scratch: &mut Scratch) -> Result<(), String> {
    let x = input(inputs, 0)?;
    let y = outputs.first_mut().ok_or("the node has no output")?;
    let shape = x.shape.clone();
    let channels = || channels("GroupNorm", &shape);
    let (_, c, sp) = channels()?;
    let g = num_groups;
    if g == 0 || c % g != 0 {
        return Err(format!("{c} channels do not split into {g} groups"));
    }
    let scale = input(inputs, 1)?;
    // Opset 21: per-channel scale/bias; opset 18: per-group.
    let per_group = scale.len() != c && scale.len() == g;
    let n_par = if per_group { g } else { c };
    let scale = param(inputs, 1, n_par, "GroupNorm")?;
    let bias = param(inputs, 2, n_par, "GroupNorm")?;
    let cg = c / g;
    let eps = epsilon;
    with_f32(x, y, &shape, scratch, |xs, ys| {
        planes(xs, ys, cg * sp, |i, xp, yp| {
            let grp = i % g;
            let (mean, var) = mean_var(xp);
            let inv = 1.0 / (var + eps).sqrt();
            for (k, (yc, xc)) in yp.chunks_mut(sp.max(1)).zip(xp.chunks(sp.max(1))).enumerate() {
                let pi = if per_group { grp } else { grp * cg + k };
                let a = scale[pi] * inv;
                let b = bias[pi] - mean * a;
                for (o, &v) in yc.iter_mut().zip(xc) {
                    *o = v * a + b;
                }
            }
        });
        Ok(())
    })
}

/// Runs LayerNorm over axes [axis, rank).
pub(super) fn layer_norm_op(axis: usize, epsilon: f32, inputs: &[Option<&Tensor>], outputs: &mut [Tensor], scratch: &mut Scratch) -> Result<(), String> {
    let x = input(inputs, 0)?;
    let (y, rest) = outputs.split_first_mut().ok_or("the node has no output")?;
    let shape = x.shape.clone();
    let rank = shape.len();
    let axis = axis;
    if axis >= rank {
        return Err(format!("axis {axis} is out of range for rank {rank}"));
    }
    let rows: usize = shape[..axis].iter().product();
    let cols: usize = shape[axis..].iter().product();
    let norm = &shape[axis..];
    let scale = ln_param(inputs.get(1).copied().flatten().ok_or("LayerNorm needs a scale input")?, norm)?;
    let bias = match inputs.get(2).copied().flatten() {
        Some(b) => Some(ln_param(b, norm)?),
        None => None,
    };
    let mut stat_shape = shape[..axis].to_vec();
    stat_shape.resize(rank, 1);
    let (mean_out, inv_out) = match rest {
        [] => (None, None),
        [m] => (Some(m.reset::<f32>(&stat_shape)), None),
        [m, s, ..] => (Some(m.reset::<f32>(&stat_shape)), Some(s.reset::<f32>(&stat_shape))),
    };
    let eps = epsilon;
    with_f32(x, y, &shape, scratch, |xs, ys| {
        layer_norm(xs, ys, rows, cols, &scale, bias.as_deref(), eps, mean_out, inv_out);
        Ok(())
    })
}

/// Runs LRN across channels.
pub(super) fn lrn(alpha: f32, beta: f32, bias: f32, size: usize, inputs: &[Option<&Tensor>], outputs: &mut [Tensor], scratch: &mut Scratch) -> Result<(), String> {
    let x = input(inputs, 0)?;
    let y = outputs.first_mut().ok_or("the node has no output")?;
    let shape = x.shape.clone();
    let channels = || channels("Lrn", &shape);
    let (_, c, sp) = channels()?;
    if size == 0 {
        return Err("LRN size must be at least 1".into());
    }
    let (alpha, beta, bias, size) = (alpha, beta, bias, size);
    let lo = (size - 1) / 2;
    let hi = size / 2 + 1; // ceil((size - 1) / 2) + 1
    let k = alpha / size as f32;
    with_f32(x, y, &shape, scratch, |xs, ys| {
        let work = |i: usize, yp: &mut [f32]| {
            let (n, ch) = (i / c, i % c);
            let base = n * c * sp;
            yp.fill(0.0);
            for cc in ch.saturating_sub(lo)..(ch + hi).min(c) {
                let xp = &xs[base + cc * sp..base + (cc + 1) * sp];
                for (o, &v) in yp.iter_mut().zip(xp) {
                    *o += v * v;
                }
            }
            let xp = &xs[base + ch * sp..base + (ch + 1) * sp];
            // powf is most of the cost; the usual exponents have cheaper exact forms.
            if beta == 0.75 {
                for (o, &v) in yp.iter_mut().zip(xp) {
                    let r = (bias + k * *o).sqrt();
                    *o = v / (r * r.sqrt());
                }
            } else if beta == 0.5 {
                for (o, &v) in yp.iter_mut().zip(xp) {
                    *o = v / (bias + k * *o).sqrt();
                }
            } else if beta == 1.0 {
                for (o, &v) in yp.iter_mut().zip(xp) {
                    *o = v / (bias + k * *o);
                }
            } else {
                for (o, &v) in yp.iter_mut().zip(xp) {
                    *o = v / (bias + k * *o).powf(beta);
                }
            }
        };
        if sp == 0 {
            return Ok(());
        }
        if xs.len() >= PAR_MIN {
            spin_pool::for_each_piece_mut(ys, sp, || (), |_, i, yp| work(i, yp));
        } else {
            ys.chunks_mut(sp).enumerate().for_each(|(i, yp)| work(i, yp));
        }
        Ok(())
    })
}

/// Runs LpNormalization along `axis`.
pub(super) fn lp_norm_op(axis: usize, p: u32, inputs: &[Option<&Tensor>], outputs: &mut [Tensor], scratch: &mut Scratch) -> Result<(), String> {
    let x = input(inputs, 0)?;
    let y = outputs.first_mut().ok_or("the node has no output")?;
    let shape = x.shape.clone();
    let rank = shape.len();
    let (axis, p) = (axis, p);
    if !(p == 1 || p == 2) {
        return Err(format!("LpNormalization supports p = 1 or 2, not {p}"));
    }
    let (outer, len, inner) = if rank == 0 {
        (1, 1, 1)
    } else if axis < rank {
        (shape[..axis].iter().product(), shape[axis], shape[axis + 1..].iter().product::<usize>())
    } else {
        return Err(format!("axis {axis} is out of range for rank {rank}"));
    };
    with_f32(x, y, &shape, scratch, |xs, ys| {
        lp_norm(xs, ys, outer, len, inner, p);
        Ok(())
    })
}

/// Runs `f` on the input and output as f32 slices, converting other float types through `scratch`.
fn with_f32(
    x: &Tensor,
    y: &mut Tensor,
    shape: &[usize],
    scratch: &mut Scratch,
    f: impl FnOnce(&[f32], &mut [f32]) -> Result<(), String>,
) -> Result<(), String> {
    fn via<T: Element>(
        v: &[T],
        y: &mut Tensor,
        shape: &[usize],
        scratch: &mut Scratch,
        f: impl FnOnce(&[f32], &mut [f32]) -> Result<(), String>,
    ) -> Result<(), String> {
        let n = v.len();
        let buf = &mut scratch.f32;
        buf.clear();
        buf.resize(2 * n, 0.0);
        let (xs, ys) = buf.split_at_mut(n);
        for (d, &s) in xs.iter_mut().zip(v) {
            *d = s.to_f64() as f32;
        }
        f(xs, ys)?;
        for (d, &s) in y.reset::<T>(shape).iter_mut().zip(ys.iter()) {
            *d = T::from_f64(s as f64);
        }
        Ok(())
    }
    match &x.data {
        TensorData::F32(v) => f(v, y.reset::<f32>(shape)),
        TensorData::F64(v) => via(v, y, shape, scratch, f),
        TensorData::F16(v) => via(v, y, shape, scratch, f),
        TensorData::BF16(v) => via(v, y, shape, scratch, f),
        _ => Err(format!("normalisation takes float tensors, not {}", x.dtype())),
    }
}

/// A float tensor as f32 (borrowed when it is f32).
fn as_f32(t: &Tensor) -> Result<Cow<'_, [f32]>, String> {
    match &t.data {
        TensorData::F32(v) => Ok(Cow::Borrowed(v)),
        TensorData::F64(_) | TensorData::F16(_) | TensorData::BF16(_) => {
            Ok(Cow::Owned(t.to_f64_vec().into_iter().map(|v| v as f32).collect()))
        }
        _ => Err(format!("expected a float tensor, got {}", t.dtype())),
    }
}

/// Per-channel parameter input `i` with `n` elements, as f32.
fn param<'a>(inputs: &[Option<&'a Tensor>], i: usize, n: usize, name: &str) -> Result<Cow<'a, [f32]>, String> {
    let t = input(inputs, i)?;
    if t.len() != n {
        return Err(format!("{name} input {i} has shape {:?}; expected {n} elements", t.shape));
    }
    as_f32(t)
}

/// A LayerNorm scale/bias broadcast to the normalised shape `norm` (flattened).
fn ln_param<'a>(t: &'a Tensor, norm: &[usize]) -> Result<Cow<'a, [f32]>, String> {
    if broadcast_shape(&t.shape, norm).ok().as_deref() != Some(norm) {
        return Err(format!("LayerNorm parameter of shape {:?} does not broadcast to {norm:?}", t.shape));
    }
    let v = as_f32(t)?;
    let n: usize = norm.iter().product();
    if v.len() == n {
        return Ok(v);
    }
    // Expand (rare: a scale broadcast over part of the normalised shape).
    let st = broadcast_strides(&t.shape[t.shape.len().saturating_sub(norm.len())..], norm);
    let mut out = vec![0.0f32; n];
    for_each_broadcast(norm, [st.as_slice()], |o, [i]| out[o] = v[i]);
    Ok(Cow::Owned(out))
}

/// Calls `f(plane_index, x_plane, y_plane)` for consecutive planes of `len` elements, in parallel when large.
fn planes(xs: &[f32], ys: &mut [f32], len: usize, f: impl Fn(usize, &[f32], &mut [f32]) + Sync) {
    if len == 0 {
        return;
    }
    if xs.len() >= PAR_MIN {
        spin_pool::for_each_piece_mut(ys, len, || (), |_, i, yp| f(i, &xs[i * len..][..len], yp));
    } else {
        ys.chunks_mut(len).zip(xs.chunks(len)).enumerate().for_each(|(i, (yp, xp))| f(i, xp, yp));
    }
}

/// Sum with 8 independent accumulators.
#[inline]
fn sum8(xs: &[f32], f: impl Fn(f32) -> f32) -> f32 {
    let mut acc = [0.0f32; 8];
    let mut chunks = xs.chunks_exact(8);
    for c in &mut chunks {
        for i in 0..8 {
            acc[i] += f(c[i]);
        }
    }
    let mut r: f32 = chunks.remainder().iter().map(|&v| f(v)).sum();
    r += ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
    r
}

/// Population mean and variance.
#[inline]
fn mean_var(xs: &[f32]) -> (f32, f32) {
    let n = xs.len() as f32;
    let mean = sum8(xs, |v| v) / n;
    let var = sum8(xs, |v| (v - mean) * (v - mean)) / n;
    (mean, var)
}

#[allow(clippy::too_many_arguments)]
fn layer_norm(
    xs: &[f32],
    ys: &mut [f32],
    rows: usize,
    cols: usize,
    scale: &[f32],
    bias: Option<&[f32]>,
    eps: f32,
    mean_out: Option<&mut [f32]>,
    inv_out: Option<&mut [f32]>,
) {
    if rows == 0 || cols == 0 {
        // Statistics of empty rows are NaN, as in the reference (0/0).
        mean_out.into_iter().chain(inv_out).for_each(|s| s.fill(f32::NAN));
        return;
    }
    let row = |xr: &[f32], yr: &mut [f32]| -> (f32, f32) {
        let (mean, var) = mean_var(xr);
        let inv = 1.0 / (var + eps).sqrt();
        match bias {
            Some(b) => {
                for (((o, &v), &s), &b) in yr.iter_mut().zip(xr).zip(scale).zip(b) {
                    *o = (v - mean) * inv * s + b;
                }
            }
            None => {
                for ((o, &v), &s) in yr.iter_mut().zip(xr).zip(scale) {
                    *o = (v - mean) * inv * s;
                }
            }
        }
        (mean, inv)
    };
    let mut mean_buf;
    let mut inv_buf;
    // The statistics outputs are optional; without them a throw-away slot per row is enough.
    let (m, s): (&mut [f32], &mut [f32]) = match (mean_out, inv_out) {
        (Some(m), Some(s)) => (m, s),
        (m, s) => {
            mean_buf = if m.is_none() { vec![0.0; rows] } else { Vec::new() };
            inv_buf = if s.is_none() { vec![0.0; rows] } else { Vec::new() };
            (m.unwrap_or(&mut mean_buf[..]), s.unwrap_or(&mut inv_buf[..]))
        }
    };
    type Row<'a> = ((&'a mut [f32], &'a [f32]), (&'a mut f32, &'a mut f32));
    let work = |((yr, xr), (m, s)): Row| {
        let (a, b) = row(xr, yr);
        *m = a;
        *s = b;
    };
    if xs.len() >= PAR_MIN && rows > 1 {
        // runs of rows per task, each row's (mean, scale) into a pair list, copied out after
        let per = rows.div_ceil(4 * spin_pool::threads()).max(1);
        let mut stats = vec![(0.0f32, 0.0f32); rows];
        spin_pool::for_each_chunk_mut2(ys, per * cols, &mut stats, per, &|t, yc, sc| {
            for (k, (yr, st)) in yc.chunks_mut(cols).zip(sc.iter_mut()).enumerate() {
                let (a, b) = (&mut st.0, &mut st.1);
                work(((yr, &xs[(t * per + k) * cols..][..cols]), (a, b)));
            }
        });
        for ((mi, si), (a, b)) in m.iter_mut().zip(s.iter_mut()).zip(stats) {
            (*mi, *si) = (a, b);
        }
    } else {
        ys.chunks_mut(cols).zip(xs.chunks(cols)).zip(m.iter_mut().zip(s.iter_mut())).for_each(work);
    }
}

/// `v / n`, with 0 for a zero norm (as the ONNX reference does for all-zero vectors).
#[inline(always)]
fn div0(v: f32, n: f32) -> f32 {
    if n == 0.0 {
        0.0
    } else {
        v / n
    }
}

fn lp_norm(xs: &[f32], ys: &mut [f32], outer: usize, len: usize, inner: usize, p: u32) {
    let block = len * inner;
    if block == 0 || outer == 0 {
        return;
    }
    let work = |yb: &mut [f32], xb: &[f32]| {
        if inner == 1 {
            let n = if p == 1 { sum8(xb, f32::abs) } else { sum8(xb, |v| v * v).sqrt() };
            for (o, &v) in yb.iter_mut().zip(xb) {
                *o = div0(v, n);
            }
            return;
        }
        // Norms per column are accumulated in the last output row, which is written last.
        let (head, last) = yb.split_at_mut((len - 1) * inner);
        last.fill(0.0);
        for xr in xb.chunks_exact(inner) {
            for (a, &v) in last.iter_mut().zip(xr) {
                *a += if p == 1 { v.abs() } else { v * v };
            }
        }
        if p == 2 {
            last.iter_mut().for_each(|a| *a = a.sqrt());
        }
        for (yr, xr) in head.chunks_exact_mut(inner).zip(xb.chunks_exact(inner)) {
            for ((o, &v), &n) in yr.iter_mut().zip(xr).zip(last.iter()) {
                *o = div0(v, n);
            }
        }
        for (o, &v) in last.iter_mut().zip(&xb[(len - 1) * inner..]) {
            *o = div0(v, *o);
        }
    };
    if xs.len() >= PAR_MIN && outer > 1 {
        spin_pool::for_each_piece_mut(ys, block, || (), |_, i, yb| work(yb, &xs[i * block..][..block]));
    } else {
        ys.chunks_mut(block).zip(xs.chunks(block)).for_each(|(yb, xb)| work(yb, xb));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::Op;
    use crate::runtime::kernels::test_util::run;
    use half::f16;


    fn close(a: &[f32], b: &[f32]) {
        assert_eq!(a.len(), b.len());
        for (x, y) in a.iter().zip(b) {
            assert!((x - y).abs() <= 1e-4 + 1e-4 * y.abs(), "{a:?} vs {b:?}");
        }
    }

    #[test]
    fn batch_and_instance_norm() {
        // [N=1, C=2] (rank 2): channel 0 scale 2, mean 1, var 3 (eps 1 → sqrt 2 = 2) → (x-1)/2*2 + 0.5
        let x = Tensor::from_f32(vec![1, 2], vec![3.0, 5.0]);
        let c = |v: [f32; 2]| Tensor::from_f32(vec![2], v.to_vec());
        let (s, b, m, v) = (c([2.0, 1.0]), c([0.5, 0.0]), c([1.0, 1.0]), c([3.0, 0.0]));
        let y = run(Op::BatchNorm { epsilon: 1.0 }, &[Some(&x), Some(&s), Some(&b), Some(&m), Some(&v)], 1);
        close(y[0].as_f32().unwrap(), &[2.5, 4.0]);
        // instance norm of [1, 3] per channel: mean 2, var 1 → [-1, 1] (eps 0)
        let x = Tensor::from_f32(vec![1, 2, 2], vec![1.0, 3.0, 0.0, 4.0]);
        let y = run(Op::InstanceNorm { epsilon: 0.0 }, &[Some(&x), Some(&c([1.0, 2.0])), Some(&c([0.0, 1.0]))], 1);
        close(y[0].as_f32().unwrap(), &[-1.0, 1.0, -1.0, 3.0]);
    }

    #[test]
    fn layer_norm_with_stats_and_f16() {
        let x = Tensor::from_f32(vec![2, 2], vec![1.0, 3.0, 2.0, 2.0]);
        let s = Tensor::from_f32(vec![2], vec![1.0, 2.0]);
        let b = Tensor::from_f32(vec![2], vec![0.0, 1.0]);
        let o = run(Op::LayerNorm { axis: 1, epsilon: 0.0 }, &[Some(&x), Some(&s), Some(&b)], 3);
        // row 0: mean 2, var 1 → [-1, 1] → [-1, 3]; row 1: var 0 → inv inf, (0*inf) = NaN as in the reference
        close(&o[0].as_f32().unwrap()[..2], &[-1.0, 3.0]);
        assert_eq!(o[1].shape, vec![2, 1]);
        close(o[1].as_f32().unwrap(), &[2.0, 2.0]);
        close(&o[2].as_f32().unwrap()[..1], &[1.0]);
        let xh = Tensor::from_vec(vec![1, 2], vec![f16::from_f32(1.0), f16::from_f32(3.0)]).unwrap();
        let o = run(Op::LayerNorm { axis: 1, epsilon: 0.0 }, &[Some(&xh), Some(&s)], 1);
        assert_eq!(o[0].view::<f16>().unwrap(), &[f16::from_f32(-1.0), f16::from_f32(2.0)]);
    }

    #[test]
    fn group_norm_both_param_forms() {
        // C=4, 2 groups, one element per channel: group 0 = [1, 3] → [-1, 1]; group 1 = [4, 6] → [-1, 1]
        let x = Tensor::from_f32(vec![1, 4, 1], vec![1.0, 3.0, 4.0, 6.0]);
        let sc = Tensor::from_f32(vec![4], vec![1.0, 2.0, 1.0, 1.0]);
        let bc = Tensor::from_f32(vec![4], vec![0.0, 0.0, 1.0, 0.0]);
        let op = Op::GroupNorm { num_groups: 2, epsilon: 0.0 };
        let y = run(op.clone(), &[Some(&x), Some(&sc), Some(&bc)], 1);
        close(y[0].as_f32().unwrap(), &[-1.0, 2.0, 0.0, 1.0]);
        let sg = Tensor::from_f32(vec![2], vec![2.0, 1.0]);
        let bg = Tensor::from_f32(vec![2], vec![0.0, 7.0]);
        let y = run(op, &[Some(&x), Some(&sg), Some(&bg)], 1);
        close(y[0].as_f32().unwrap(), &[-2.0, 2.0, 6.0, 8.0]);
    }

    #[test]
    fn lrn_and_lp_norm() {
        // size 2: window for c is [c, c+1]; alpha=size so k = 1; bias 0, beta 1: y = x / sum(x^2 in window)
        let x = Tensor::from_f32(vec![1, 3, 1], vec![1.0, 2.0, 3.0]);
        let y = run(Op::Lrn { alpha: 2.0, beta: 1.0, bias: 0.0, size: 2 }, &[Some(&x)], 1);
        close(y[0].as_f32().unwrap(), &[1.0 / 5.0, 2.0 / 13.0, 3.0 / 9.0]);
        // size 3: window [c-1, c+1]
        let y = run(Op::Lrn { alpha: 3.0, beta: 1.0, bias: 0.0, size: 3 }, &[Some(&x)], 1);
        close(y[0].as_f32().unwrap(), &[1.0 / 5.0, 2.0 / 14.0, 3.0 / 13.0]);
        // ONNX examples: [[3,4],[6,8]] l2 along axis 1 → [0.6,0.8]; l1 along axis 0 → [3/9, 4/12, 6/9, 8/12]
        let x = Tensor::from_f32(vec![2, 2], vec![3.0, 4.0, 6.0, 8.0]);
        let y = run(Op::LpNorm { axis: 1, p: 2 }, &[Some(&x)], 1);
        close(y[0].as_f32().unwrap(), &[0.6, 0.8, 0.6, 0.8]);
        let y = run(Op::LpNorm { axis: 0, p: 1 }, &[Some(&x)], 1);
        close(y[0].as_f32().unwrap(), &[3.0 / 9.0, 4.0 / 12.0, 6.0 / 9.0, 8.0 / 12.0]);
        // an all-zero vector normalises to zeros
        let z = Tensor::from_f32(vec![2, 2], vec![0.0, 1.0, 0.0, -1.0]);
        let y = run(Op::LpNorm { axis: 0, p: 2 }, &[Some(&z)], 1);
        close(y[0].as_f32().unwrap(), &[0.0, 1.0 / 2f32.sqrt(), 0.0, -1.0 / 2f32.sqrt()]);
    }
}
