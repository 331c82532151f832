//! Conv and ConvTranspose as `stablehlo.convolution` in NCHW (`[b, f, 0, 1]x[o, i, 0, 1]->[b, f, 0, 1]`).

use tpu_sdk_core::ir::{AutoPad, ConvAttrs, ConvTransposeAttrs, Node};

use super::emit::{list, ty, Cx, V};
use crate::error::Result;

/// Per spatial dim: value of an attribute list, or `default` when the list is empty.
fn per_dim(v: &[usize], n: usize, default: usize) -> Vec<usize> {
    if v.is_empty() {
        vec![default; n]
    } else {
        v.to_vec()
    }
}

/// Checks the window attributes: one entry per spatial dim, all at least 1.
pub(super) fn check_window(cx: &Cx, node: &Node, nsp: usize, kernel: &[usize], strides: &[usize], dilations: &[usize]) -> Result<()> {
    for (what, v) in [("kernel_shape", kernel), ("strides", strides), ("dilations", dilations)] {
        if v.len() != nsp || v.contains(&0) {
            return Err(cx.unsupported(node, format!("{what} {v:?} must have {nsp} entries of at least 1")));
        }
    }
    Ok(())
}

/// (begin, end) padding of a convolution-like window over an input of size `input` (ONNX auto_pad rules).
pub(super) fn window_padding(
    auto_pad: AutoPad,
    pads: &[usize],
    input: &[usize],
    kernel: &[usize],
    strides: &[usize],
    dilations: &[usize],
) -> Vec<(i64, i64)> {
    let n = input.len();
    (0..n)
        .map(|i| match auto_pad {
            AutoPad::NotSet => {
                if pads.len() == 2 * n {
                    (pads[i] as i64, pads[i + n] as i64)
                } else {
                    (0, 0)
                }
            }
            AutoPad::Valid => (0, 0),
            AutoPad::SameUpper | AutoPad::SameLower => {
                let s = strides[i] as i64;
                let inp = input[i] as i64;
                let out = (inp + s - 1) / s;
                let eff = (kernel[i] as i64 - 1) * dilations[i] as i64 + 1;
                let total = ((out - 1) * s + eff - inp).max(0);
                if auto_pad == AutoPad::SameUpper {
                    (total / 2, total - total / 2)
                } else {
                    (total - total / 2, total / 2)
                }
            }
        })
        .collect()
}

/// Emits `stablehlo.convolution` in NC... layout; returns the result (shape computed from the window).
#[allow(clippy::too_many_arguments)]
fn convolution(
    cx: &mut Cx,
    x: &V,
    w: &V,
    strides: &[usize],
    padding: &[(i64, i64)],
    lhs_dilation: &[usize],
    rhs_dilation: &[usize],
    groups: usize,
) -> V {
    let nsp = x.rank() - 2;
    let mut shape = vec![x.shape[0], w.shape[0]];
    for i in 0..nsp {
        let dilated_in = if x.shape[i + 2] == 0 { 0 } else { (x.shape[i + 2] as i64 - 1) * lhs_dilation[i] as i64 + 1 };
        let padded = dilated_in + padding[i].0 + padding[i].1;
        let eff = (w.shape[i + 2] as i64 - 1) * rhs_dilation[i] as i64 + 1;
        let n = if padded < eff { 0 } else { (padded - eff) / strides[i] as i64 + 1 };
        shape.push(n as usize);
    }
    let sp: Vec<String> = (0..nsp).map(|i| i.to_string()).collect();
    let sp = sp.join(", ");
    let pads: Vec<String> = padding.iter().map(|(l, h)| format!("[{l}, {h}]")).collect();
    let out = ty(x.dtype, &shape);
    let precision = cx.opts.precision.attr_conv(x.dtype);
    cx.emit(
        format!(
            "stablehlo.convolution({}, {}) dim_numbers = [b, f, {sp}]x[o, i, {sp}]->[b, f, {sp}], window = {{stride = {}, pad = [{}], lhs_dilate = {}, rhs_dilate = {}}} {{batch_group_count = 1 : i64, feature_group_count = {groups} : i64{precision}}} : ({}, {}) -> {out}",
            x.name,
            w.name,
            list(strides),
            pads.join(", "),
            list(lhs_dilation),
            list(rhs_dilation),
            x.ty(),
            w.ty()
        ),
        x.dtype,
        shape,
    )
}

fn check_operands(cx: &Cx, node: &Node, x: &V, w: &V) -> Result<()> {
    if x.rank() < 3 || w.rank() != x.rank() || x.dtype != w.dtype {
        return Err(cx.unsupported(
            node,
            format!("needs input and weight of equal rank >= 3 and one dtype, got {:?} {} and {:?} {}", x.shape, x.dtype, w.shape, w.dtype),
        ));
    }
    Ok(())
}

fn add_bias(cx: &mut Cx, node: &Node, y: V) -> Result<V> {
    match cx.opt_input(node, 2)? {
        Some(b) => {
            let b = cx.reshape(&b, &[b.shape.iter().product()]);
            let b = cx.broadcast_along(&b, 1, &y.shape.clone());
            Ok(cx.add(&y, &b))
        }
        None => Ok(y),
    }
}

pub(super) fn conv(cx: &mut Cx, node: &Node, a: &ConvAttrs) -> Result<V> {
    let x = cx.input(node, 0)?;
    let w = cx.input(node, 1)?;
    check_operands(cx, node, &x, &w)?;
    let nsp = x.rank() - 2;
    let kernel = w.shape[2..].to_vec();
    let strides = per_dim(&a.strides, nsp, 1);
    let dilations = per_dim(&a.dilations, nsp, 1);
    check_window(cx, node, nsp, &kernel, &strides, &dilations)?;
    let padding = window_padding(a.auto_pad, &a.pads, &x.shape[2..], &kernel, &strides, &dilations);
    let group = a.group.max(1);
    let y = convolution(cx, &x, &w, &strides, &padding, &vec![1; nsp], &dilations, group);
    let y = add_bias(cx, node, y)?;
    Ok(cx.activation(y, a.activation))
}

/// ConvTranspose as the gradient convolution: the input dilated by the strides, the kernel flipped and its
/// in/out channels swapped per group, padded by `dilation * (k - 1) - pad`.
pub(super) fn conv_transpose(cx: &mut Cx, node: &Node, a: &ConvTransposeAttrs) -> Result<V> {
    let x = cx.input(node, 0)?;
    let w = cx.input(node, 1)?;
    check_operands(cx, node, &x, &w)?;
    let (_, out_shape) = cx.out(node, 0);
    let c = &a.conv;
    let nsp = x.rank() - 2;
    let g = c.group.max(1);
    let kernel = w.shape[2..].to_vec();
    let strides = per_dim(&c.strides, nsp, 1);
    let dilations = per_dim(&c.dilations, nsp, 1);
    let out_pad = per_dim(&a.output_padding, nsp, 0);
    check_window(cx, node, nsp, &kernel, &strides, &dilations)?;
    if out_pad.len() != nsp {
        return Err(cx.unsupported(node, format!("output_padding {out_pad:?} must have {nsp} entries")));
    }
    let cin = w.shape[0];
    let mg = w.shape[1];
    if cin % g != 0 || x.shape[1] != cin {
        return Err(cx.unsupported(node, format!("weight {:?} does not fit input {:?} with {g} groups", w.shape, x.shape)));
    }
    // Padding of the forward convolution this op is the transpose of, as the CPU runtime (and the ONNX reference)
    // place the output window: SAME_UPPER/SAME_LOWER without pads split the total padding (the extra unit at the
    // end for SAME_UPPER), otherwise the given pads hold at the start and an `output_shape` sets where it ends.
    let same = matches!(c.auto_pad, AutoPad::SameUpper | AutoPad::SameLower) && c.pads.is_empty();
    if !same && !c.pads.is_empty() && c.pads.len() != 2 * nsp {
        return Err(cx.unsupported(node, format!("{} pads for {nsp} spatial dims", c.pads.len())));
    }
    let fwd: Vec<(i64, i64)> = (0..nsp)
        .map(|i| {
            let full =
                (x.shape[i + 2] as i64 - 1) * strides[i] as i64 + out_pad[i] as i64 + (kernel[i] as i64 - 1) * dilations[i] as i64 + 1;
            let out = out_shape.get(i + 2).copied().unwrap_or(0) as i64;
            if same {
                let total = full - out;
                let begin = if c.auto_pad == AutoPad::SameUpper { total.div_euclid(2) } else { total - total.div_euclid(2) };
                (begin, total - begin)
            } else {
                let begin = if c.pads.is_empty() || c.auto_pad == AutoPad::Valid { 0 } else { c.pads[i] as i64 };
                (begin, full - begin - out)
            }
        })
        .collect();
    let padding: Vec<(i64, i64)> = (0..nsp)
        .map(|i| {
            let e = (kernel[i] as i64 - 1) * dilations[i] as i64;
            (e - fwd[i].0, e - fwd[i].1 + out_pad[i] as i64)
        })
        .collect();
    // [C, M/g, k...] -> [g, C/g, M/g, k...] -> [g, M/g, C/g, k...] -> [M, C/g, k...], spatially flipped.
    let mut split = vec![g, cin / g, mg];
    split.extend_from_slice(&kernel);
    let ws = cx.reshape(&w, &split);
    let mut perm = vec![0, 2, 1];
    perm.extend(3..3 + nsp);
    let wt = cx.transpose(&ws, &perm);
    let mut merged = vec![g * mg, cin / g];
    merged.extend_from_slice(&kernel);
    let wm = cx.reshape(&wt, &merged);
    let flip: Vec<usize> = (2..2 + nsp).collect();
    let wf = cx.reverse(&wm, &flip);
    let y = convolution(cx, &x, &wf, &vec![1; nsp], &padding, &strides, &dilations, g);
    let y = add_bias(cx, node, y)?;
    Ok(cx.activation(y, c.activation))
}
