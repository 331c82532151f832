//! Normalizations: BatchNorm (inference), InstanceNorm, GroupNorm, LayerNorm, LpNorm.

use tpu_sdk_core::ir::Node;

use super::emit::{Combine, Cx, V};
use super::reduce::unreduce;
use crate::error::Result;

/// Input 0 of a normalization node, which must be a float tensor.
fn float_input(cx: &mut Cx, node: &Node) -> Result<V> {
    let x = cx.input(node, 0)?;
    if !x.dtype.is_float() {
        return Err(cx.unsupported(node, format!("normalization of {}", x.dtype)));
    }
    Ok(x)
}

/// Inference BatchNorm: `(x - mean) * scale / sqrt(var + eps) + bias` per channel.
pub(super) fn batch_norm(cx: &mut Cx, node: &Node, epsilon: f32) -> Result<V> {
    let x = float_input(cx, node)?;
    if x.rank() < 2 {
        return Err(cx.unsupported(node, format!("BatchNorm input {:?} has no channel dim", x.shape)));
    }
    let scale = channel(cx, node, 1, &x)?;
    let bias = channel(cx, node, 2, &x)?;
    let mean = channel(cx, node, 3, &x)?;
    let var = channel(cx, node, 4, &x)?;
    // y = (x - mean) * scale / sqrt(var + eps) + bias, folded per channel into x * a + b.
    let ve = cx.binary_scalar("add", &var, epsilon as f64);
    let inv = cx.unary("rsqrt", &ve);
    let a = cx.mul(&scale, &inv);
    let ma = cx.mul(&mean, &a);
    let b = cx.sub(&bias, &ma);
    let a = cx.broadcast_along(&a, 1, &x.shape);
    let b = cx.broadcast_along(&b, 1, &x.shape);
    let y = cx.mul(&x, &a);
    Ok(cx.add(&y, &b))
}

/// InstanceNorm: normalized over the spatial dims of each (sample, channel), then scaled and shifted.
pub(super) fn instance_norm(cx: &mut Cx, node: &Node, epsilon: f32) -> Result<V> {
    let x = float_input(cx, node)?;
    if x.rank() < 3 {
        return Err(cx.unsupported(node, format!("InstanceNorm input {:?} has no spatial dims", x.shape)));
    }
    let axes: Vec<usize> = (2..x.rank()).collect();
    let (y, _, _) = normalize(cx, &x, &axes, epsilon);
    scale_shift(cx, node, &y, &x)
}

/// GroupNorm: normalized over each group of channels (and the spatial dims), then scaled and shifted.
pub(super) fn group_norm(cx: &mut Cx, node: &Node, num_groups: usize, epsilon: f32) -> Result<V> {
    let x = float_input(cx, node)?;
    let c = x.shape.get(1).copied().unwrap_or(0);
    if x.rank() < 2 || num_groups == 0 || c % num_groups != 0 {
        return Err(cx.unsupported(node, format!("{num_groups} groups do not divide the channels of {:?}", x.shape)));
    }
    let rest: usize = x.shape[1..].iter().product::<usize>() / num_groups;
    let g = cx.reshape(&x, &[x.shape[0], num_groups, rest]);
    let (y, _, _) = normalize(cx, &g, &[2], epsilon);
    let y = cx.reshape(&y, &x.shape);
    scale_shift(cx, node, &y, &x)
}

/// LpNorm (p = 1 or 2) along `axis`.
pub(super) fn lp_norm(cx: &mut Cx, node: &Node, axis: usize, p: u32) -> Result<V> {
    let x = float_input(cx, node)?;
    if axis >= x.rank() || !(p == 1 || p == 2) {
        return Err(cx.unsupported(node, format!("LpNorm with p = {p} over axis {axis} of rank {}", x.rank())));
    }
    let n = if p == 1 {
        let a = cx.unary("abs", &x);
        cx.reduce(&a, &[axis], Combine::Add)
    } else {
        let sq = cx.mul(&x, &x);
        let s = cx.reduce(&sq, &[axis], Combine::Add);
        cx.unary("sqrt", &s)
    };
    let nb = unreduce(cx, &n, &[axis], &x.shape);
    // A zero norm gives 0, not NaN (ONNX's reference and the CPU runtime).
    let zero = cx.splat_like(0.0, &nb);
    let is_zero = cx.compare("EQ", &nb, &zero);
    let q = cx.div(&x, &nb);
    let zeros = cx.splat_like(0.0, &q);
    Ok(cx.select(&is_zero, &zeros, &q))
}

/// `y * scale + bias` with the per-channel inputs 1 (scale) and 2 (bias) of `node` along dim 1 of `x`.
fn scale_shift(cx: &mut Cx, node: &Node, y: &V, x: &V) -> Result<V> {
    let scale = channel(cx, node, 1, x)?;
    let bias = channel(cx, node, 2, x)?;
    let s = cx.broadcast_along(&scale, 1, &x.shape);
    let b = cx.broadcast_along(&bias, 1, &x.shape);
    let y = cx.mul(y, &s);
    Ok(cx.add(&y, &b))
}

/// A per-channel parameter input (any shape with C elements) as a 1-D vector of the input's dtype.
fn channel(cx: &mut Cx, node: &Node, i: usize, x: &V) -> Result<V> {
    let p = cx.input(node, i)?;
    let c = x.shape[1];
    if p.shape.iter().product::<usize>() != c {
        return Err(cx.unsupported(node, format!("input {i} has shape {:?}, expected {c} channel values", p.shape)));
    }
    let p = cx.convert(&p, x.dtype);
    Ok(cx.reshape(&p, &[c]))
}

/// (x - mean) / sqrt(var + eps) over `axes`; also returns mean and 1/sqrt(var + eps) (reduced shapes).
fn normalize(cx: &mut Cx, x: &V, axes: &[usize], eps: f32) -> (V, V, V) {
    let n: usize = axes.iter().map(|&a| x.shape[a]).product();
    let s = cx.reduce(x, axes, Combine::Add);
    let mean = cx.binary_scalar("divide", &s, n.max(1) as f64);
    let mb = unreduce(cx, &mean, axes, &x.shape);
    let d = cx.sub(x, &mb);
    let sq = cx.mul(&d, &d);
    let vs = cx.reduce(&sq, axes, Combine::Add);
    let var = cx.binary_scalar("divide", &vs, n.max(1) as f64);
    let ve = cx.binary_scalar("add", &var, eps as f64);
    let inv = cx.unary("rsqrt", &ve);
    let ib = unreduce(cx, &inv, axes, &x.shape);
    (cx.mul(&d, &ib), mean, inv)
}

/// LayerNorm over [axis, rank): outputs y, and (when the node has them) mean and 1/std with the reduced dims
/// kept as 1.
pub(super) fn layer_norm(cx: &mut Cx, node: &Node, axis: usize, eps: f32) -> Result<Vec<V>> {
    let x = cx.input(node, 0)?;
    if !x.dtype.is_float() || axis >= x.rank() {
        return Err(cx.unsupported(node, format!("LayerNorm over axis {axis} of a rank-{} {} tensor", x.rank(), x.dtype)));
    }
    let axes: Vec<usize> = (axis..x.rank()).collect();
    let (y, mean, inv) = normalize(cx, &x, &axes, eps);
    let scale = cx.input(node, 1)?;
    let scale = cx.convert(&scale, x.dtype);
    let scale = cx.broadcast_to(&scale, &x.shape)?;
    let mut y = cx.mul(&y, &scale);
    if let Some(b) = cx.opt_input(node, 2)? {
        let b = cx.convert(&b, x.dtype);
        let b = cx.broadcast_to(&b, &x.shape)?;
        y = cx.add(&y, &b);
    }
    let mut outs = vec![y];
    for (k, v) in [(1, mean), (2, inv)] {
        if k < node.outputs.len() {
            let (_, shape) = cx.out(node, k);
            outs.push(cx.reshape(&v, &shape));
        }
    }
    Ok(outs)
}
