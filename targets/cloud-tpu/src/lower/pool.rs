//! Pooling: MaxPool, AveragePool and LpPool as `reduce_window`; global pools as `reduce`.

use tpu_sdk_core::ir::{Node, PoolAttrs, Tensor};

use super::conv::{check_window, window_padding};
use super::emit::{Combine, Cx, V};
use crate::error::Result;

/// MaxPool with its optional second output: the flat (row-major, storage_order 0) index of each window's maximum.
pub(super) fn max_pool(cx: &mut Cx, node: &Node, a: &PoolAttrs) -> Result<Vec<V>> {
    let x = pooled_input(cx, node)?;
    if node.outputs.len() < 2 {
        return window(cx, node, &x, a, Kind::Max).map(|v| vec![v]);
    }
    let (v, i) = window_argmax(cx, node, &x, a)?;
    Ok(vec![v, i])
}

/// AveragePool.
pub(super) fn average_pool(cx: &mut Cx, node: &Node, a: &PoolAttrs) -> Result<V> {
    let x = pooled_input(cx, node)?;
    window(cx, node, &x, a, Kind::Avg)
}

/// LpPool of order `p`.
pub(super) fn lp_pool(cx: &mut Cx, node: &Node, a: &PoolAttrs, p: u32) -> Result<V> {
    let x = pooled_input(cx, node)?;
    window(cx, node, &x, a, Kind::Lp(p))
}

/// GlobalAveragePool (`max` false) or GlobalMaxPool: a reduction over all spatial dims, kept as 1.
pub(super) fn global_pool(cx: &mut Cx, node: &Node, max: bool) -> Result<V> {
    let x = pooled_input(cx, node)?;
    let spatial: Vec<usize> = (2..x.rank()).collect();
    if max {
        return Ok(cx.reduce_keep(&x, &spatial, Combine::Max));
    }
    let s = cx.reduce_keep(&x, &spatial, Combine::Add);
    let n: usize = x.shape[2..].iter().product();
    Ok(cx.binary_scalar("divide", &s, n as f64))
}

/// Input 0 of a pooling node, which must be N x C x spatial.
fn pooled_input(cx: &mut Cx, node: &Node) -> Result<V> {
    let x = cx.input(node, 0)?;
    if x.rank() < 3 {
        return Err(cx.unsupported(node, format!("pooling needs an N x C x spatial input, got {:?}", x.shape)));
    }
    Ok(x)
}

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Max,
    Avg,
    Lp(u32),
}

/// The window of a pooling node: kernel, strides, dilations (each with leading 1, 1 for N and C), the padding
/// (ceil_mode's extra end cells included), the declared padding and the output shape.
struct Window {
    dims: Vec<usize>,
    strides: Vec<usize>,
    dilations: Vec<usize>,
    padding: Vec<(usize, usize)>,
    declared: Vec<(i64, i64)>,
    out_shape: Vec<usize>,
}

fn plan(cx: &mut Cx, node: &Node, x: &V, a: &PoolAttrs) -> Result<Window> {
    let (_, out_shape) = cx.out(node, 0);
    let nsp = x.rank() - 2;
    if a.kernel_shape.len() != nsp {
        return Err(cx.unsupported(node, format!("kernel_shape {:?} does not fit input {:?}", a.kernel_shape, x.shape)));
    }
    let k = a.kernel_shape.clone();
    let s = if a.strides.is_empty() { vec![1; nsp] } else { a.strides.clone() };
    let d = if a.dilations.is_empty() { vec![1; nsp] } else { a.dilations.clone() };
    check_window(cx, node, nsp, &k, &s, &d)?;
    let input = &x.shape[2..];
    let declared = window_padding(a.auto_pad, &a.pads, input, &k, &s, &d);
    // ceil_mode: extend the end padding so that the last (partial) window exists; its extra cells never count.
    let mut padding = vec![(0usize, 0usize); 2];
    for i in 0..nsp {
        let eff = (k[i] - 1) * d[i] + 1;
        let out = out_shape[i + 2];
        let need = if out == 0 { 0 } else { (out - 1) * s[i] + eff } as i64;
        let have = input[i] as i64 + declared[i].0 + declared[i].1;
        let extra = (need - have).max(0);
        padding.push((declared[i].0.max(0) as usize, (declared[i].1 + extra).max(0) as usize));
    }
    let mut wdims = vec![1, 1];
    wdims.extend_from_slice(&k);
    let mut wstr = vec![1, 1];
    wstr.extend_from_slice(&s);
    let mut wdil = vec![1, 1];
    wdil.extend_from_slice(&d);
    Ok(Window { dims: wdims, strides: wstr, dilations: wdil, padding, declared, out_shape })
}

fn window_argmax(cx: &mut Cx, node: &Node, x: &V, a: &PoolAttrs) -> Result<(V, V)> {
    let w = plan(cx, node, x, a)?;
    Ok(cx.reduce_window_argmax(x, &w.dims, &w.strides, &w.dilations, &w.padding, &w.out_shape))
}

fn window(cx: &mut Cx, node: &Node, x: &V, a: &PoolAttrs, kind: Kind) -> Result<V> {
    let Window { dims: wdims, strides: wstr, dilations: wdil, padding, declared, out_shape } = plan(cx, node, x, a)?;
    let nsp = x.rank() - 2;
    let (k, s, d) = (a.kernel_shape.clone(), wstr[2..].to_vec(), wdil[2..].to_vec());
    let input = &x.shape[2..];
    match kind {
        Kind::Max => Ok(cx.reduce_window(x, Combine::Max, &wdims, &wstr, &wdil, &padding, &out_shape)),
        Kind::Lp(p) => {
            let ax = cx.unary("abs", x);
            let xp = if p == 1 { ax } else { cx.binary_scalar("power", &ax, p as f64) };
            let sum = cx.reduce_window(&xp, Combine::Add, &wdims, &wstr, &wdil, &padding, &out_shape);
            Ok(if p == 1 { sum } else { cx.binary_scalar("power", &sum, 1.0 / p as f64) })
        }
        Kind::Avg => {
            if !x.dtype.is_float() {
                return Err(cx.unsupported(node, format!("AveragePool on {}", x.dtype)));
            }
            let sum = cx.reduce_window(x, Combine::Add, &wdims, &wstr, &wdil, &padding, &out_shape);
            // The divisor of each output cell, computed here: the window cells inside the input (or inside the
            // input and its declared padding with count_include_pad), never the ceil_mode extension.
            let per_dim: Vec<Vec<f64>> = (0..nsp)
                .map(|i| {
                    let (lo, hi) = if a.count_include_pad {
                        (-declared[i].0, input[i] as i64 + declared[i].1)
                    } else {
                        (0, input[i] as i64)
                    };
                    (0..out_shape[i + 2])
                        .map(|o| {
                            (0..k[i])
                                .filter(|&j| {
                                    let p = (o * s[i] + j * d[i]) as i64 - padding[i + 2].0 as i64;
                                    p >= lo && p < hi
                                })
                                .count()
                                .max(1) as f64
                        })
                        .collect()
                })
                .collect();
            // The divisor is separable: the product of one count per spatial dim. A dim whose counts are all
            // equal is a scalar factor; each other dim is a 1-D constant broadcast along it, and the factors
            // multiply into the divisor (exactly: the counts are small integers). A constant of the output's
            // whole spatial size would grow with the product of the dims (a huge padding made it hundreds of
            // megabytes of program text).
            let mut scalar = 1.0f64;
            let mut divisor: Option<V> = None;
            for (i, counts) in per_dim.iter().enumerate() {
                let first = counts.first().copied().unwrap_or(1.0);
                if counts.iter().all(|&c| c == first) {
                    scalar *= first;
                    continue;
                }
                let t = Tensor::from_f32(vec![counts.len()], counts.iter().map(|&c| c as f32).collect());
                let cv = cx.constant(&t);
                let cv = cx.convert(&cv, x.dtype);
                let cb = cx.broadcast_in_dim(&cv, &[i + 2], &out_shape);
                divisor = Some(match divisor {
                    Some(d) => cx.mul(&d, &cb),
                    None => cb,
                });
            }
            Ok(match divisor {
                None => cx.binary_scalar("divide", &sum, scalar),
                Some(d) => {
                    let d = if scalar == 1.0 { d } else { cx.binary_scalar("multiply", &d, scalar) };
                    cx.div(&sum, &d)
                }
            })
        }
    }
}
