//! Quantization: QuantizeLinear / DequantizeLinear, and QLinearConv / QLinearMatMul as integer runtimes
//! compute them.

use super::nn::conv_attrs;
use super::{aux, aux_name, axis_of, base, dtype_attr, scalar_const, single, trimmed, MapFn};
use crate::import::onnx::graph::{Cx, NodeIn};
use crate::import::onnx::tensor::elem_type_name;
use crate::ir::{BinaryOp, DType, Op, ValueId};
use crate::Result;

/// The ops of this family.
pub(super) const OPS: &[(&str, MapFn)] =
    &[("DequantizeLinear", quant), ("QuantizeLinear", quant), ("QLinearConv", qlinear), ("QLinearMatMul", qlinear)];

/// QuantizeLinear / DequantizeLinear (per-tensor and per-axis; blocked quantization is not supported).
fn quant(cx: &mut Cx, n: &NodeIn) -> Result<()> {
    let a = &n.attrs;
    let x = n.req(0)?;
    let scale = n.req(1)?;
    let zp = n.opt(2);
    if a.int_or("block_size", 0)? != 0 {
        return Err(a.unsupported("block_size", "is not 0: blocked quantization is not supported"));
    }
    a.ignore(&["saturate"]);
    let axis = a.int_or("axis", 1)?;
    // The axis only matters for per-axis parameters; with a one-element scale any value is accepted.
    let per_tensor = cx.shape(scale).is_some_and(|s| s.iter().product::<usize>() == 1);
    let axis = match cx.rank(x) {
        Some(r) if per_tensor && (axis >= r as i64 || axis < -(r as i64)) => 0,
        Some(0) => 0,
        Some(_) => axis_of(cx, n, x, axis, "axis", false)? as i64,
        None if axis >= 0 => axis,
        None => cx.need_rank(n, x, "a negative axis")? as i64,
    };
    let output_dtype = match a.int_or("output_dtype", 0)? {
        0 => None,
        c => Some(dtype_attr(n, "output_dtype", c)?),
    };
    let inputs = trimmed(&[Some(x), Some(scale), zp]);
    if n.op_type == "DequantizeLinear" {
        let out = n.outs(1, 1)?;
        match output_dtype {
            Some(dt) if cx.dtype(scale) != Some(dt) => {
                let b = base(cx, n);
                let y = cx.tmp(&format!("{b}:dq"));
                cx.emit(n.name.clone(), Op::DequantizeLinear { axis }, inputs, vec![y])?;
                cx.emit(aux_name(n, "cast"), Op::Cast { to: dt }, vec![Some(y)], out)
            }
            _ => cx.emit(n.name.clone(), Op::DequantizeLinear { axis }, inputs, out),
        }
    } else {
        match a.int_or("precision", 0)? {
            0 | 1 => {}
            p => return Err(a.unsupported("precision", format!("= {} is not supported", elem_type_name(p as i32)))),
        }
        let zp_dtype = match zp {
            Some(z) => Some(cx.need_dtype(n, z, "QuantizeLinear")?),
            None => None,
        };
        let to = match (output_dtype, zp_dtype) {
            (Some(o), Some(z)) if o != z => {
                return Err(n.invalid(format!("output_dtype {o} differs from the zero point's type {z}")));
            }
            (Some(o), _) => o,
            (None, Some(z)) => z,
            (None, None) => DType::U8,
        };
        single(cx, n, Op::QuantizeLinear { axis, to, rounding: Default::default() }, inputs)
    }
}

/// QLinearConv / QLinearMatMul the way integer runtimes compute them: the accumulation runs on the
/// zero-point-centred integer values (held exactly in f32), the QLinearConv int32 bias is added to it, then the
/// accumulator is requantized with the multiplier x_scale * w_scale / y_scale (per output channel for
/// per-channel weights) and the output zero point.
fn qlinear(cx: &mut Cx, n: &NodeIn) -> Result<()> {
    let conv = n.op_type == "QLinearConv";
    let [x, xs, xz, w, ws, wz, ys, yz] = [0, 1, 2, 3, 4, 5, 6, 7].map(|i| n.opt(i));
    let req = |v: Option<ValueId>, i: usize| v.ok_or_else(|| n.invalid(format!("input {i} is required")));
    let (x, xs, w, ws, ys) = (req(x, 0)?, req(xs, 1)?, req(w, 3)?, req(ws, 4)?, req(ys, 6)?);
    let f32t = DType::F32;
    // a 1-D per-axis parameter (more than one element) that must be reshaped to broadcast
    let per_axis = |cx: &Cx, v: ValueId| cx.rank(v) == Some(1) && cx.shape(v).is_some_and(|s| s[0] > 1);
    let unsqueeze_tail = |cx: &mut Cx, v: ValueId, count: usize, what: &str| -> Result<ValueId> {
        if count == 0 {
            return Ok(v);
        }
        aux(cx, n, what, Op::Unsqueeze { axes: Some((1..=count as i64).collect()) }, vec![Some(v)])
    };
    let centred = |cx: &mut Cx, v: ValueId, z: Option<ValueId>, z_tail: usize, what: &str| -> Result<ValueId> {
        let vf = aux(cx, n, &format!("{what}_f"), Op::Cast { to: f32t }, vec![Some(v)])?;
        let Some(z) = z else { return Ok(vf) };
        let zf = aux(cx, n, &format!("{what}_zp_f"), Op::Cast { to: f32t }, vec![Some(z)])?;
        let zf = if per_axis(cx, z) { unsqueeze_tail(cx, zf, z_tail, &format!("{what}_zp_axis"))? } else { zf };
        aux(cx, n, &format!("{what}_centred"), Op::Binary(BinaryOp::Sub, None), vec![Some(vf), Some(zf)])
    };
    let x_rank = cx.need_rank(n, x, n.op_type)?;
    let w_rank = cx.need_rank(n, w, n.op_type)?;
    // zero points: QLinearConv's w per output channel (axis 0); QLinearMatMul's a per row (axis -2), b per
    // column (the last axis, which broadcasts as it is)
    let xc = centred(cx, x, xz, if conv { 0 } else { 1 }, "x")?;
    let wc = centred(cx, w, wz, if conv { w_rank.saturating_sub(1) } else { 0 }, "w")?;
    let acc = if conv {
        let mut ins = vec![Some(xc), Some(wc)];
        if let Some(b) = n.opt(8) {
            ins.push(Some(aux(cx, n, "bias_f", Op::Cast { to: f32t }, vec![Some(b)])?));
        }
        aux(cx, n, "acc", Op::Conv(conv_attrs(n)?), ins)?
    } else {
        aux(cx, n, "acc", Op::MatMul, vec![Some(xc), Some(wc)])?
    };
    // multiplier = x_scale * w_scale / y_scale, shaped to broadcast against the accumulator
    let xs_b = if !conv && per_axis(cx, xs) { unsqueeze_tail(cx, xs, 1, "x_scale_axis")? } else { xs };
    let ws_b = if conv && per_axis(cx, ws) { unsqueeze_tail(cx, ws, x_rank.saturating_sub(2), "w_scale_axis")? } else { ws };
    let prod = aux(cx, n, "scale_prod", Op::Binary(BinaryOp::Mul, None), vec![Some(xs_b), Some(ws_b)])?;
    let mult = aux(cx, n, "multiplier", Op::Binary(BinaryOp::Div, None), vec![Some(prod), Some(ys)])?;
    // computed in the scales' type (f16 scales give an f16 multiplier), applied in f32
    let mult = if cx.dtype(mult) == Some(f32t) { mult } else { aux(cx, n, "multiplier_f", Op::Cast { to: f32t }, vec![Some(mult)])? };
    let yf = aux(cx, n, "requant", Op::Binary(BinaryOp::Mul, None), vec![Some(acc), Some(mult)])?;
    let to = match yz {
        Some(z) => cx.need_dtype(n, z, n.op_type)?,
        None => DType::U8,
    };
    let one = scalar_const(cx, n, "one", f32t, 1.0);
    single(cx, n, Op::QuantizeLinear { axis: 0, to, rounding: Default::default() }, trimmed(&[Some(yf), Some(one), yz]))
}
