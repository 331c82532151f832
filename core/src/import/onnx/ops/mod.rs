//! ONNX operators (default domain) → core [`Op`]s, per opset.
//!
//! One module per op family registers its ops in a table from op type to mapping function ([`MapFn`]);
//! [`map_node`] looks the node's op type up in them. Each function reads the attributes of the node's opset
//! (attributes that later became inputs are turned into constant inputs), and emits one core node, or a few
//! when older semantics need it (opset < 13 Softmax, opset < 7 broadcasting with `axis`, a Dropout mask).
//! Attributes that change the semantics in a way the core op cannot express are rejected; anything not read
//! is reported by [`super::attrs::Attrs::finish`].

use super::graph::{Cx, NodeIn};
use super::tensor::{dtype_of, elem_type_name};
use crate::ir::{DType, Op, Tensor, TensorData, ValueId};
use crate::{Error, Result};

mod activation;
mod control_flow;
mod array;
mod index;
mod math;
mod nn;
mod norm;
mod quant;
mod recurrent;
mod resize;
mod sequence;
mod sequence_loop;
mod sequence_stacked;
mod sequence_tensor;

/// Maps one node of a known op type into the graph.
pub(super) type MapFn = fn(&mut Cx, &NodeIn) -> Result<()>;

/// The op tables of the families, each a list of (ONNX op type, mapping function).
pub(super) const FAMILIES: [&[(&str, MapFn)]; 11] =
    [math::OPS, activation::OPS, nn::OPS, norm::OPS, array::OPS, index::OPS, resize::OPS, quant::OPS, control_flow::OPS, recurrent::OPS, sequence::OPS];

/// The ONNX ops (default domain) the importer maps, in alphabetical order.
pub const SUPPORTED_OPS: &[&str] = &[
    "Abs",
    "Acos",
    "Acosh",
    "Add",
    "And",
    "ArgMax",
    "ArgMin",
    "Asin",
    "Asinh",
    "Atan",
    "Atanh",
    "AveragePool",
    "BatchNormalization",
    "BitwiseAnd",
    "BitwiseNot",
    "BitwiseOr",
    "BitwiseXor",
    "Cast",
    "CastLike",
    "Ceil",
    "Celu",
    "CenterCropPad",
    "Clip",
    "Concat",
    "ConcatFromSequence",
    "Constant",
    "ConstantOfShape",
    "Conv",
    "ConvTranspose",
    "Cos",
    "Cosh",
    "CumSum",
    "DepthToSpace",
    "DequantizeLinear",
    "Div",
    "Dropout",
    "Elu",
    "Equal",
    "Erf",
    "Exp",
    "Expand",
    "EyeLike",
    "Flatten",
    "Floor",
    "Gather",
    "GatherElements",
    "GatherND",
    "Gelu",
    "Gemm",
    "GlobalAveragePool",
    "GlobalLpPool",
    "GlobalMaxPool",
    "Greater",
    "GreaterOrEqual",
    "GroupNormalization",
    "GRU",
    "Hardmax",
    "HardSigmoid",
    "HardSwish",
    "Identity",
    "If",
    "InstanceNormalization",
    "IsInf",
    "IsNaN",
    "LayerNormalization",
    "LeakyRelu",
    "Less",
    "LessOrEqual",
    "Log",
    "LogSoftmax",
    "Loop",
    "LpNormalization",
    "LpPool",
    "LRN",
    "LSTM",
    "MatMul",
    "Max",
    "MaxPool",
    "Mean",
    "MeanVarianceNormalization",
    "Min",
    "Mish",
    "Mod",
    "Mul",
    "Neg",
    "NonZero",
    "Not",
    "OneHot",
    "Or",
    "Pad",
    "Pow",
    "PRelu",
    "QLinearConv",
    "QLinearMatMul",
    "QuantizeLinear",
    "Range",
    "Reciprocal",
    "ReduceL1",
    "ReduceL2",
    "ReduceLogSum",
    "ReduceLogSumExp",
    "ReduceMax",
    "ReduceMean",
    "ReduceMin",
    "ReduceProd",
    "ReduceSum",
    "ReduceSumSquare",
    "Relu",
    "Reshape",
    "Resize",
    "ReverseSequence",
    "RMSNormalization",
    "RNN",
    "Round",
    "Scan",
    "Scatter",
    "ScatterElements",
    "ScatterND",
    "Selu",
    "SequenceAt",
    "SequenceConstruct",
    "SequenceEmpty",
    "SequenceErase",
    "SequenceInsert",
    "SequenceLength",
    "Shape",
    "Shrink",
    "Sigmoid",
    "Sign",
    "Sin",
    "Sinh",
    "Size",
    "Slice",
    "Softmax",
    "Softplus",
    "Softsign",
    "SpaceToDepth",
    "Split",
    "SplitToSequence",
    "Sqrt",
    "Squeeze",
    "Sub",
    "Sum",
    "SwiGLU",
    "Swish",
    "Tan",
    "Tanh",
    "TensorScatter",
    "ThresholdedRelu",
    "Tile",
    "TopK",
    "Transpose",
    "Trilu",
    "Unsqueeze",
    "Upsample",
    "Where",
    "Xor",
];

/// Maps one node. Unknown ops fail with an `Unsupported` error in the documented format.
pub fn map_node(cx: &mut Cx, n: &NodeIn) -> Result<()> {
    n.attrs.ignore(&["consumed_inputs"]);
    if let Some(r) = sequence::other_op_on_sequence(cx, n) {
        return r;
    }
    match FAMILIES.iter().flat_map(|ops| ops.iter()).find(|(op, _)| *op == n.op_type) {
        Some((_, map)) => map(cx, n),
        None if n.op_type == "Einsum" => Err(Error::Unsupported(format!(
            "op 'Einsum' (node '{}', domain '{}', opset {}) is not supported; rewrite it as MatMul/Transpose/ReduceSum",
            n.name, n.domain, n.opset
        ))),
        None => Err(Error::Unsupported(format!("op '{}' (node '{}', domain '{}', opset {}) is not supported", n.op_type, n.name, n.domain, n.opset))),
    }
}

/// The name of an aux node derived from `n`.
fn aux_name(n: &NodeIn, suffix: &str) -> String {
    if n.name.is_empty() {
        String::new()
    } else {
        format!("{}::{suffix}", n.name)
    }
}

/// A base for generated value names.
fn base(cx: &Cx, n: &NodeIn) -> String {
    n.outputs.first().map(|&o| cx.g.value(o).name.clone()).unwrap_or_else(|| n.op_type.to_string())
}

/// Emits an aux node computing `op` into a new intermediate value, which it returns.
fn aux(cx: &mut Cx, n: &NodeIn, suffix: &str, op: Op, inputs: Vec<Option<ValueId>>) -> Result<ValueId> {
    let b = base(cx, n);
    let v = cx.tmp(&format!("{b}:{suffix}"));
    cx.emit(aux_name(n, suffix), op, inputs, vec![v])?;
    Ok(v)
}

/// A scalar constant of `dtype`.
fn scalar_const(cx: &mut Cx, n: &NodeIn, suffix: &str, dtype: DType, x: f64) -> ValueId {
    let b = base(cx, n);
    cx.constant_value(&format!("{b}:{suffix}"), scalar_of(dtype, x))
}

/// Input 1 of the node, or, before opset `since`, its older form: the integer attribute `name` (read by
/// `read`, required) as a constant.
fn input_or_attr(
    cx: &mut Cx,
    n: &NodeIn,
    since: i64,
    name: &str,
    read: impl FnOnce(&super::attrs::Attrs<'_>) -> Result<Option<Vec<i64>>>,
) -> Result<ValueId> {
    if n.opset >= since {
        return n.req(1);
    }
    let values = read(&n.attrs)?.ok_or_else(|| n.invalid(format!("attribute '{name}' is required")))?;
    let b = base(cx, n);
    Ok(cx.const_i64(&format!("{b}:{name}"), values))
}

/// `inputs` without trailing absent ones.
fn trimmed(inputs: &[Option<ValueId>]) -> Vec<Option<ValueId>> {
    let mut v = inputs.to_vec();
    while v.last() == Some(&None) {
        v.pop();
    }
    v
}

/// Emits `op` on `inputs` as the node's (single) main output.
fn single(cx: &mut Cx, n: &NodeIn, op: Op, inputs: Vec<Option<ValueId>>) -> Result<()> {
    let out = n.outs(1, 1)?;
    cx.emit(n.name.clone(), op, inputs, out)
}

/// Emits `op` on all of the node's inputs (trailing absent ones dropped).
fn pass(cx: &mut Cx, n: &NodeIn, op: Op) -> Result<()> {
    single(cx, n, op, trimmed(&n.inputs))
}

/// Resolves an axis attribute against the rank of `v` (`inclusive`: `rank` itself is allowed, as in Flatten).
/// A non-negative axis is taken as is when the rank is not known (the kernel checks the range).
fn axis_of(cx: &Cx, n: &NodeIn, v: ValueId, axis: i64, what: &str, inclusive: bool) -> Result<usize> {
    let rank = match cx.rank(v) {
        Some(r) => r,
        None if axis >= 0 => return Ok(axis as usize),
        None => cx.need_rank(n, v, &format!("negative {what} {axis}"))?,
    };
    let r = rank as i64;
    let hi = if inclusive { r } else { r - 1 };
    if axis < -r || axis > hi {
        return Err(n.invalid(format!("{what} {axis} is out of range for an input of rank {rank}")));
    }
    Ok(if axis < 0 { axis + r } else { axis } as usize)
}

/// A scalar of `dtype` holding `x`.
fn scalar_of(dtype: DType, x: f64) -> Tensor {
    let mut t = vec_of(dtype, &[x]);
    t.shape = vec![];
    t
}

/// A 1-D tensor of `dtype` holding `v` (converted like a Cast).
fn vec_of(dtype: DType, v: &[f64]) -> Tensor {
    use half::{bf16, f16};
    let data = match dtype {
        DType::F32 => TensorData::F32(v.iter().map(|&x| x as f32).collect()),
        DType::F64 => TensorData::F64(v.to_vec()),
        DType::F16 => TensorData::F16(v.iter().map(|&x| f16::from_f64(x)).collect()),
        DType::BF16 => TensorData::BF16(v.iter().map(|&x| bf16::from_f64(x)).collect()),
        DType::I8 => TensorData::I8(v.iter().map(|&x| x as i8).collect()),
        DType::U8 => TensorData::U8(v.iter().map(|&x| x as u8).collect()),
        DType::I16 => TensorData::I16(v.iter().map(|&x| x as i16).collect()),
        DType::I32 => TensorData::I32(v.iter().map(|&x| x as i32).collect()),
        DType::I64 => TensorData::I64(v.iter().map(|&x| x as i64).collect()),
        DType::Bool => TensorData::Bool(v.iter().map(|&x| x != 0.0).collect()),
    };
    Tensor { shape: vec![v.len()], data }
}

/// A core dtype from an ONNX element type attribute value.
fn dtype_attr(n: &NodeIn, attr: &str, code: i64) -> Result<DType> {
    let c = i32::try_from(code).map_err(|_| n.attrs.invalid(attr, format!("has invalid element type {code}")))?;
    dtype_of(c).ok_or_else(|| {
        if elem_type_name(c).starts_with("data type") || c == 0 {
            n.attrs.invalid(attr, format!("has invalid element type {code}"))
        } else {
            n.attrs.unsupported(attr, format!("= {}: that element type is not supported", elem_type_name(c)))
        }
    })
}


/// String attribute `attr` (default `default`) looked up in `choices`; another string is an `InvalidModel`
/// error ("has unknown value").
fn choice<T: Copy>(n: &NodeIn, attr: &str, default: &str, choices: &[(&str, T)]) -> Result<T> {
    let s = n.attrs.string_or(attr, default)?;
    choices.iter().find(|(k, _)| *k == s).map(|&(_, v)| v).ok_or_else(|| n.attrs.invalid(attr, format!("has unknown value '{s}'")))
}

/// `v` unless it is an empty constant (opset 11 Resize passes empty tensors for unused roi/scales).
fn non_empty(cx: &Cx, v: Option<ValueId>) -> Option<ValueId> {
    v.filter(|&v| cx.constant(v).is_none_or(|t| !t.is_empty()))
}

