//! Reductions (Reduce*, ArgMax/ArgMin) and Softmax/LogSoftmax.

use tpu_sdk_core::ir::{Node, ReduceOp};

use super::emit::{Combine, Cx, V};
use crate::error::Result;

/// Reduce* over constant axes (an attribute, or input 1).
pub(super) fn reduce_op(cx: &mut Cx, node: &Node, op: ReduceOp, axes: &Option<Vec<usize>>, noop_with_empty_axes: bool) -> Result<V> {
    let x = cx.input(node, 0)?;
    let (_, out_shape) = cx.out(node, 0);
    let rank = x.rank() as i64;
    let axes: Vec<usize> = match axes {
        Some(a) => a.clone(),
        None => match cx.const_ints(node, 1, "axes")? {
            Some(a) => {
                let mut v = Vec::new();
                for &ax in &a {
                    let n = if ax < 0 { ax + rank } else { ax };
                    if n < 0 || n >= rank {
                        return Err(cx.unsupported(node, format!("axis {ax} is out of range for rank {rank}")));
                    }
                    v.push(n as usize);
                }
                v.sort_unstable();
                v.dedup();
                v
            }
            None => Vec::new(),
        },
    };
    if let Some(&bad) = axes.iter().find(|&&a| a >= x.rank()) {
        return Err(cx.unsupported(node, format!("axis {bad} is out of range for rank {rank}")));
    }
    let axes = if axes.is_empty() {
        if noop_with_empty_axes {
            return Ok(cx.reshape(&x, &out_shape));
        }
        (0..x.rank()).collect()
    } else {
        axes
    };
    let r = reduce(cx, node, op, &x, &axes)?;
    Ok(cx.reshape(&r, &out_shape))
}

/// ArgMax (`max`) or ArgMin along `axis`.
pub(super) fn arg_reduce(cx: &mut Cx, node: &Node, max: bool, axis: usize, select_last_index: bool) -> Result<V> {
    let x = cx.input(node, 0)?;
    let (_, out_shape) = cx.out(node, 0);
    if axis >= x.rank() {
        return Err(cx.unsupported(node, format!("axis {axis} is out of range for rank {}", x.rank())));
    }
    let r = cx.arg_reduce(&x, axis, max, select_last_index);
    Ok(cx.reshape(&r, &out_shape))
}

/// Softmax (or LogSoftmax with `log`) along `axis`.
pub(super) fn softmax_op(cx: &mut Cx, node: &Node, axis: usize, log: bool) -> Result<V> {
    let x = cx.input(node, 0)?;
    if axis >= x.rank() || !x.dtype.is_float() {
        return Err(cx.unsupported(node, format!("axis {axis} of a rank-{} {} tensor", x.rank(), x.dtype)));
    }
    Ok(softmax(cx, &x, axis, log))
}

/// Broadcasts a value reduced over `axes` back to `shape`.
pub(super) fn unreduce(cx: &mut Cx, r: &V, axes: &[usize], shape: &[usize]) -> V {
    let dims: Vec<usize> = (0..shape.len()).filter(|d| !axes.contains(d)).collect();
    cx.broadcast_in_dim(r, &dims, shape)
}

/// exp(x - max) / sum(exp(x - max)) along `axis` (or its logarithm).
pub(super) fn softmax(cx: &mut Cx, x: &V, axis: usize, log: bool) -> V {
    let m = cx.reduce(x, &[axis], Combine::Max);
    // A row of -inf would give (-inf) - (-inf) = NaN; use 0 as its shift instead (the result is then NaN-free
    // where the CPU reference is).
    let finite = cx.is_finite(&m);
    let zero = cx.splat_like(0.0, &m);
    let m = cx.select(&finite, &m, &zero);
    let mb = unreduce(cx, &m, &[axis], &x.shape);
    let shifted = cx.sub(x, &mb);
    let e = cx.unary("exponential", &shifted);
    let s = cx.reduce(&e, &[axis], Combine::Add);
    if log {
        let ls = cx.unary("log", &s);
        let lb = unreduce(cx, &ls, &[axis], &x.shape);
        cx.sub(&shifted, &lb)
    } else {
        let sb = unreduce(cx, &s, &[axis], &x.shape);
        cx.div(&e, &sb)
    }
}

/// Reduces `x` over `axes` (removed from the shape).
fn reduce(cx: &mut Cx, node: &Node, op: ReduceOp, x: &V, axes: &[usize]) -> Result<V> {
    let count: usize = axes.iter().map(|&a| x.shape[a]).product();
    let needs_float = matches!(op, ReduceOp::L2 | ReduceOp::LogSum | ReduceOp::LogSumExp);
    if needs_float && !x.dtype.is_float() {
        return Err(cx.unsupported(node, format!("{op:?} on {}", x.dtype)));
    }
    Ok(match op {
        ReduceOp::Sum => cx.reduce(x, axes, Combine::Add),
        ReduceOp::Mean => {
            let s = cx.reduce(x, axes, Combine::Add);
            cx.binary_scalar("divide", &s, count.max(1) as f64)
        }
        ReduceOp::Max => cx.reduce(x, axes, Combine::Max),
        ReduceOp::Min => cx.reduce(x, axes, Combine::Min),
        ReduceOp::Prod => cx.reduce(x, axes, Combine::Mul),
        ReduceOp::L1 => {
            let a = cx.unary("abs", x);
            cx.reduce(&a, axes, Combine::Add)
        }
        ReduceOp::L2 => {
            let sq = cx.mul(x, x);
            let s = cx.reduce(&sq, axes, Combine::Add);
            cx.unary("sqrt", &s)
        }
        ReduceOp::SumSquare => {
            let sq = cx.mul(x, x);
            cx.reduce(&sq, axes, Combine::Add)
        }
        ReduceOp::LogSum => {
            let s = cx.reduce(x, axes, Combine::Add);
            cx.unary("log", &s)
        }
        ReduceOp::LogSumExp => {
            let m = cx.reduce(x, axes, Combine::Max);
            let finite = cx.is_finite(&m);
            let zero = cx.splat_like(0.0, &m);
            let m = cx.select(&finite, &m, &zero);
            let mb = unreduce(cx, &m, axes, &x.shape);
            let d = cx.sub(x, &mb);
            let e = cx.unary("exponential", &d);
            let s = cx.reduce(&e, axes, Combine::Add);
            let l = cx.unary("log", &s);
            cx.add(&l, &m)
        }
    })
}
