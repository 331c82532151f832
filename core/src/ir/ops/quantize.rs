//! QuantizeLinear and DequantizeLinear: attributes, arity and shape rules; and the rule of quantized graphs
//! (ordinary ops on int8/uint8 values that carry `QuantParams`, run by the integer kernels of
//! `runtime::kernels::int8`): which nodes compute on quantized values, and their output types.

use super::dims::norm_axis;
use super::{info, Arity, InferError, Inferred, Op, TypeInfo};
use crate::ir::{DType, Graph, QuantParams};

/// Rounding of `QuantizeLinear` (float input).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum QuantRounding {
    /// ONNX: `x / scale` in the input's type, rounded half to even.
    #[default]
    HalfToEven,
    /// TFLite QUANTIZE: `x / scale` in f64, rounded half away from zero (`TfLiteRound`).
    TfLite,
}

/// Checks scale / zero-point shapes against the input and picks per-tensor or per-axis application.
/// `None` for one parameter for the whole tensor, else `Some((channels, inner))`: row `r` of `inner` elements
/// uses parameter `r % channels`.
pub fn layout(name: &str, x: &[usize], scale: &[usize], zp: Option<&[usize]>, axis: i64) -> Result<Option<(usize, usize)>, String> {
    let ns: usize = scale.iter().product();
    if let Some(z) = zp {
        if z.iter().product::<usize>() != ns || (z.len() > 1 && z != scale) {
            return Err(format!("{name} zero point of shape {z:?} does not match the scale of shape {scale:?}"));
        }
    }
    if ns == 1 && scale.len() <= 1 {
        return Ok(None);
    }
    if scale.len() != 1 {
        return Err(format!("{name} with a scale of shape {scale:?} (blocked quantization) is not supported"));
    }
    let ax = norm_axis(axis, x.len())?;
    if x.is_empty() || x[ax] != ns {
        return Err(format!("{name} scale has {ns} elements but axis {ax} of the input shape {x:?} does not"));
    }
    Ok(Some((ns, x[ax + 1..].iter().product::<usize>().max(1))))
}

/// Output dtype of QuantizeLinear.
pub fn quant_dtype(x: DType, scale: DType, zp: Option<DType>, to: DType) -> Result<DType, String> {
    if !x.is_float() || !scale.is_float() {
        return Err(format!("QuantizeLinear needs float input and scale, got {x} and {scale}"));
    }
    let out = zp.unwrap_or(to);
    if !matches!(out, DType::U8 | DType::I8 | DType::I16) {
        return Err(format!("QuantizeLinear to {out} is not supported (u8, i8, i16 are)"));
    }
    Ok(out)
}

/// Output dtype of DequantizeLinear.
pub fn dequant_dtype(x: DType, scale: DType, zp: Option<DType>) -> Result<DType, String> {
    if !matches!(x, DType::U8 | DType::I8 | DType::I16 | DType::I32) {
        return Err(format!("DequantizeLinear of {x} is not supported (u8, i8, i16, i32 are)"));
    }
    if !scale.is_float() {
        return Err(format!("DequantizeLinear scale is {scale}, expected a float type"));
    }
    if let Some(z) = zp {
        if z != x {
            return Err(format!("DequantizeLinear zero point is {z} but the input is {x}"));
        }
    }
    Ok(scale)
}

/// Shape rule of QuantizeLinear (float input): the input's shape in the zero point's type (else `to`).
pub fn infer_quantize(axis: i64, to: DType, inputs: &[Option<TypeInfo>]) -> Result<Inferred, InferError> {
    let (x, s) = (info(inputs, 0)?, info(inputs, 1)?);
    let zp = inputs.get(2).copied().flatten();
    let dt = quant_dtype(x.dtype, s.dtype, zp.map(|z| z.dtype), to)?;
    layout("QuantizeLinear", x.shape, s.shape, zp.map(|z| z.shape), axis)?;
    Ok(vec![(dt, x.shape.to_vec())])
}

/// Shape rule of DequantizeLinear: the input's shape in the scale's type.
pub fn infer_dequantize(axis: i64, inputs: &[Option<TypeInfo>]) -> Result<Inferred, InferError> {
    let (x, s) = (info(inputs, 0)?, info(inputs, 1)?);
    let zp = inputs.get(2).copied().flatten();
    let dt = dequant_dtype(x.dtype, s.dtype, zp.map(|z| z.dtype))?;
    layout("DequantizeLinear", x.shape, s.shape, zp.map(|z| z.shape), axis)?;
    Ok(vec![(dt, x.shape.to_vec())])
}

/// Arity: x, scale, zero_point?.
pub const ARITY: Arity = (2, 3, 1, 1);

/// Whether `dtype` with `quant` is a quantized integer activation/weight.
pub fn is_q(dtype: DType, quant: Option<&QuantParams>) -> bool {
    quant.is_some() && matches!(dtype, DType::I8 | DType::U8)
}

/// Ops that only move data: on quantized values they run the ordinary kernels and keep the parameters.
pub fn moves_data(op: &Op) -> bool {
    matches!(
        op,
        Op::Reshape { .. }
            | Op::Flatten { .. }
            | Op::Squeeze { .. }
            | Op::Unsqueeze { .. }
            | Op::Transpose { .. }
            | Op::Split { .. }
            | Op::Slice
            | Op::Gather { .. }
            | Op::Pad { .. }
            | Op::Expand
            | Op::Tile
            | Op::Identity
            | Op::DepthToSpace { .. }
            | Op::SpaceToDepth { .. }
            | Op::Shape { .. }
            | Op::Size
            | Op::DequantizeLinear { .. }
    )
}

/// True when node `n` of `g` computes on quantized values and so runs an integer kernel.
pub fn is_quantized_node(g: &Graph, n: usize) -> bool {
    let node = &g.nodes[n];
    if moves_data(&node.op) {
        return false;
    }
    node.inputs.iter().flatten().any(|v| {
        let val = &g.values[v.0];
        is_q(val.dtype, val.quant.as_ref())
    })
}

/// Shape rule of a quantized node: the float rule on the shapes, output dtype the quantized input's
/// (the zero point's for a requantizing `QuantizeLinear`).
pub fn infer_quantized(op: &Op, inputs: &[Option<TypeInfo>]) -> Result<Inferred, InferError> {
    let qdt = inputs.iter().flatten().map(|i| i.dtype).find(|d| matches!(d, DType::I8 | DType::U8)).unwrap_or(DType::I8);
    if let Op::QuantizeLinear { to, .. } = op {
        let x = info(inputs, 0)?;
        let out = inputs.get(2).copied().flatten().map(|z| z.dtype).unwrap_or(*to);
        if !matches!(out, DType::I8 | DType::U8) {
            return Err(InferError::Invalid(format!("requantization to {out} is not supported (i8, u8 are)")));
        }
        return Ok(vec![(out, x.shape.to_vec())]);
    }
    let f: Vec<Option<TypeInfo>> = inputs
        .iter()
        .enumerate()
        .map(|(k, i)| {
            i.map(|i| {
                // A recurrent layer's sequence_lens stays an integer input.
                let lens = matches!(op, Op::Rnn(_)) && k == super::recurrent::input::SEQ_LENS;
                if matches!(i.dtype, DType::I8 | DType::U8 | DType::I16 | DType::I32) && !lens {
                    TypeInfo { dtype: DType::F32, shape: i.shape, value: None }
                } else {
                    i
                }
            })
        })
        .collect();
    let mut out = super::infer(op, &f)?;
    for (k, o) in out.iter_mut().enumerate() {
        if matches!(op, Op::Rnn(_)) && k == 2 {
            // An integer LSTM's final cell state is int16, like the cell state it carries.
            o.0 = DType::I16;
        } else if o.0 == DType::F32 && !(matches!(op, Op::MaxPool(_)) && k == 1) {
            o.0 = qdt;
        }
    }
    Ok(out)
}
