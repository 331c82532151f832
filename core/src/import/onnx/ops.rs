//! ONNX operators (default domain) → core [`Op`]s, per opset.
//!
//! Each arm reads the attributes of the node's opset (attributes that later became inputs are turned into
//! constant inputs), and emits one core node, or a few when older semantics need it (opset < 13 Softmax,
//! opset < 7 broadcasting with `axis`, a Dropout mask). Attributes that change the semantics in a way the core
//! op cannot express are rejected; anything not read is reported by [`super::attrs::Attrs::finish`].

use super::graph::{Cx, NodeIn};
use super::tensor::{dtype_of, elem_type_name, to_tensor};
use crate::ir::{
    AutoPad, BinaryOp, ConvAttrs, ConvTransposeAttrs, CoordTransform, DType, NearestMode, Op, PadMode, PoolAttrs, ReduceOp, ResizeAttrs,
    ResizeMode, Tensor, TensorData, UnaryOp, ValueId,
};
use crate::{Error, Result};

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
    "Hardmax",
    "HardSigmoid",
    "HardSwish",
    "Identity",
    "InstanceNormalization",
    "IsInf",
    "IsNaN",
    "LayerNormalization",
    "LeakyRelu",
    "Less",
    "LessOrEqual",
    "Log",
    "LogSoftmax",
    "LpNormalization",
    "LpPool",
    "LRN",
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
    "Round",
    "Scatter",
    "ScatterElements",
    "ScatterND",
    "Selu",
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
    "Sqrt",
    "Squeeze",
    "Sub",
    "Sum",
    "SwiGLU",
    "Swish",
    "Tan",
    "Tanh",
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

fn simple_unary(op: &str) -> Option<UnaryOp> {
    use UnaryOp::*;
    Some(match op {
        "Neg" => Neg,
        "Abs" => Abs,
        "Sqrt" => Sqrt,
        "Exp" => Exp,
        "Log" => Log,
        "Reciprocal" => Reciprocal,
        "Floor" => Floor,
        "Ceil" => Ceil,
        "Round" => Round,
        "Sign" => Sign,
        "Relu" => Relu,
        "Sigmoid" => Sigmoid,
        "Tanh" => Tanh,
        "Sin" => Sin,
        "Cos" => Cos,
        "Tan" => Tan,
        "Asin" => Asin,
        "Acos" => Acos,
        "Atan" => Atan,
        "Sinh" => Sinh,
        "Cosh" => Cosh,
        "Asinh" => Asinh,
        "Acosh" => Acosh,
        "Atanh" => Atanh,
        "Erf" => Erf,
        "Not" => Not,
        "BitwiseNot" => BitNot,
        "Softplus" => Softplus,
        "Softsign" => Softsign,
        "IsNaN" => IsNaN,
        "HardSwish" => HardSwish,
        "Mish" => Mish,
        _ => return None,
    })
}

/// Binary ops; the bool says whether opsets before 7 had the legacy `broadcast`/`axis` attributes.
fn simple_binary(op: &str) -> Option<(BinaryOp, bool)> {
    use BinaryOp::*;
    Some(match op {
        "Add" => (Add, true),
        "Sub" => (Sub, true),
        "Mul" => (Mul, true),
        "Div" => (Div, true),
        "Pow" => (Pow, true),
        "Equal" => (Equal, true),
        "Less" => (Less, true),
        "Greater" => (Greater, true),
        "And" => (And, true),
        "Or" => (Or, true),
        "Xor" => (Xor, true),
        "LessOrEqual" => (LessOrEqual, false),
        "GreaterOrEqual" => (GreaterOrEqual, false),
        "BitwiseAnd" => (BitAnd, false),
        "BitwiseOr" => (BitOr, false),
        "BitwiseXor" => (BitXor, false),
        "PRelu" => (PRelu, false),
        _ => return None,
    })
}

fn reduce_op(op: &str) -> Option<ReduceOp> {
    use ReduceOp::*;
    Some(match op {
        "ReduceSum" => Sum,
        "ReduceMean" => Mean,
        "ReduceMax" => Max,
        "ReduceMin" => Min,
        "ReduceProd" => Prod,
        "ReduceL1" => L1,
        "ReduceL2" => L2,
        "ReduceLogSum" => LogSum,
        "ReduceLogSumExp" => LogSumExp,
        "ReduceSumSquare" => SumSquare,
        _ => return None,
    })
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

fn auto_pad(n: &NodeIn) -> Result<AutoPad> {
    Ok(match n.attrs.string_or("auto_pad", "NOTSET")?.as_str() {
        "NOTSET" | "" => AutoPad::NotSet,
        "SAME_UPPER" => AutoPad::SameUpper,
        "SAME_LOWER" => AutoPad::SameLower,
        "VALID" => AutoPad::Valid,
        s => return Err(n.attrs.invalid("auto_pad", format!("has unknown value '{s}'"))),
    })
}

fn conv_attrs(n: &NodeIn) -> Result<ConvAttrs> {
    let a = &n.attrs;
    let group = a.usize_or("group", 1)?;
    if group == 0 {
        return Err(a.invalid("group", "must be at least 1"));
    }
    Ok(ConvAttrs {
        kernel_shape: a.usizes("kernel_shape")?,
        strides: a.usizes("strides")?,
        dilations: a.usizes("dilations")?,
        pads: a.usizes("pads")?,
        auto_pad: auto_pad(n)?,
        group,
        activation: None,
    })
}

fn pool_attrs(n: &NodeIn, kernel_required: bool) -> Result<PoolAttrs> {
    let a = &n.attrs;
    let kernel_shape = a.usizes("kernel_shape")?;
    if kernel_required && kernel_shape.is_empty() {
        return Err(n.invalid("attribute 'kernel_shape' is required"));
    }
    Ok(PoolAttrs {
        kernel_shape,
        strides: a.usizes("strides")?,
        dilations: a.usizes("dilations")?,
        pads: a.usizes("pads")?,
        auto_pad: auto_pad(n)?,
        ceil_mode: a.bool_or("ceil_mode", false)?,
        count_include_pad: a.bool_or("count_include_pad", false)?,
    })
}

/// The `p` of LpPool / GlobalLpPool (a float attribute in opset 1, an int later).
fn lp_p(n: &NodeIn) -> Result<u32> {
    let a = &n.attrs;
    let p = match a.get("p").map(super::attrs::kind) {
        None => 2,
        Some(super::proto::attr_type::FLOAT) => {
            let f = a.float("p")?.unwrap_or(2.0);
            if f.fract() != 0.0 || f < 1.0 {
                return Err(a.unsupported("p", format!("= {f}: only integer p >= 1 is supported")));
            }
            f as i64
        }
        Some(_) => a.int_or("p", 2)?,
    };
    u32::try_from(p).ok().filter(|&p| p >= 1).ok_or_else(|| a.invalid("p", format!("must be at least 1, found {p}")))
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

/// The element type code for an opset-1 Cast `to` string ("FLOAT", ...).
fn elem_type_from_name(s: &str) -> Option<i64> {
    let up = s.to_ascii_uppercase();
    (0..=28).find(|&c| elem_type_name(c) == up).map(i64::from)
}

/// `v` unless it is an empty constant (opset 11 Resize passes empty tensors for unused roi/scales).
fn non_empty(cx: &Cx, v: Option<ValueId>) -> Option<ValueId> {
    v.filter(|&v| cx.constant(v).is_none_or(|t| !t.is_empty()))
}

/// Maps one node. Unknown ops fail with an `Unsupported` error in the documented format.
pub fn map_node(cx: &mut Cx, n: &NodeIn) -> Result<()> {
    let a = &n.attrs;
    let v = n.opset;
    a.ignore(&["consumed_inputs"]);
    if let Some(u) = simple_unary(n.op_type) {
        return single(cx, n, Op::Unary(u), vec![Some(n.req(0)?)]);
    }
    if let Some((b, legacy)) = simple_binary(n.op_type) {
        return binary(cx, n, b, legacy && v < 7);
    }
    if let Some(r) = reduce_op(n.op_type) {
        return reduce(cx, n, r);
    }
    let unary = |cx: &mut Cx, u: UnaryOp| single(cx, n, Op::Unary(u), vec![Some(n.req(0)?)]);
    match n.op_type {
        "LeakyRelu" => unary(cx, UnaryOp::LeakyRelu { alpha: a.float_or("alpha", 0.01)? }),
        "Elu" => unary(cx, UnaryOp::Elu { alpha: a.float_or("alpha", 1.0)? }),
        "Selu" => {
            let (da, dg) = if v < 6 { (1.6732, 1.0507) } else { (1.673_263_2, 1.050_701) };
            unary(cx, UnaryOp::Selu { alpha: a.float_or("alpha", da)?, gamma: a.float_or("gamma", dg)? })
        }
        "Celu" => unary(cx, UnaryOp::Celu { alpha: a.float_or("alpha", 1.0)? }),
        "ThresholdedRelu" => unary(cx, UnaryOp::ThresholdedRelu { alpha: a.float_or("alpha", 1.0)? }),
        "HardSigmoid" => unary(cx, UnaryOp::HardSigmoid { alpha: a.float_or("alpha", 0.2)?, beta: a.float_or("beta", 0.5)? }),
        "Gelu" => {
            let tanh = match a.string_or("approximate", "none")?.as_str() {
                "none" => false,
                "tanh" => true,
                s => return Err(a.invalid("approximate", format!("has unknown value '{s}' (expected none or tanh)"))),
            };
            unary(cx, UnaryOp::Gelu { tanh })
        }
        "IsInf" => unary(
            cx,
            UnaryOp::IsInf { detect_positive: a.bool_or("detect_positive", true)?, detect_negative: a.bool_or("detect_negative", true)? },
        ),
        "Clip" => clip(cx, n),
        "Mod" => {
            let op = if a.bool_or("fmod", false)? { BinaryOp::Fmod } else { BinaryOp::Mod };
            single(cx, n, Op::Binary(op, None), vec![Some(n.req(0)?), Some(n.req(1)?)])
        }
        "Sum" | "Max" | "Min" | "Mean" => {
            if n.inputs.is_empty() || n.inputs.iter().any(|i| i.is_none()) {
                return Err(n.invalid("needs one or more inputs, none of them empty"));
            }
            let op = match (n.op_type, n.inputs.len()) {
                ("Mean", _) => Op::VariadicMean,
                (t, k) => {
                    let b = match t {
                        "Sum" => BinaryOp::Add,
                        "Max" => BinaryOp::Max,
                        _ => BinaryOp::Min,
                    };
                    if k == 2 {
                        Op::Binary(b, None)
                    } else {
                        Op::Variadic(b)
                    }
                }
            };
            single(cx, n, op, n.inputs.clone())
        }
        "Where" => pass(cx, n, Op::Where),
        "Cast" => {
            let code = match a.get("to").map(super::attrs::kind) {
                Some(super::proto::attr_type::STRING) => {
                    let s = a.string("to")?.unwrap_or_default();
                    elem_type_from_name(&s).ok_or_else(|| a.invalid("to", format!("has unknown type name '{s}'")))?
                }
                _ => a.int("to")?.ok_or_else(|| n.invalid("attribute 'to' is required"))?,
            };
            a.ignore(&["saturate", "round_mode"]);
            let to = dtype_attr(n, "to", code)?;
            single(cx, n, Op::Cast { to }, vec![Some(n.req(0)?)])
        }
        "CastLike" => {
            a.ignore(&["saturate", "round_mode"]);
            let to = cx.need_dtype(n, n.req(1)?, "CastLike")?;
            single(cx, n, Op::Cast { to }, vec![Some(n.req(0)?)])
        }
        "Conv" => pass(cx, n, Op::Conv(conv_attrs(n)?)),
        "ConvTranspose" => {
            let conv = conv_attrs(n)?;
            let output_padding = a.usizes("output_padding")?;
            let output_shape = a.usizes("output_shape")?;
            pass(cx, n, Op::ConvTranspose(ConvTransposeAttrs { conv, output_padding, output_shape }))
        }
        "Gemm" => {
            if v < 7 {
                // Legacy: broadcast=0 requires C to have the output shape, which numpy broadcasting also accepts.
                a.ignore(&["broadcast"]);
            }
            let op = Op::Gemm {
                alpha: a.float_or("alpha", 1.0)?,
                beta: a.float_or("beta", 1.0)?,
                trans_a: a.bool_or("transA", false)?,
                trans_b: a.bool_or("transB", false)?,
                activation: None,
            };
            pass(cx, n, op)
        }
        "MatMul" => pass(cx, n, Op::MatMul),
        "MaxPool" => {
            let p = pool_attrs(n, true)?;
            let outs = n.outs(1, 2)?;
            if outs.len() == 2 && a.int_or("storage_order", 0)? != 0 {
                return maxpool_column_major(cx, n, p, outs);
            }
            a.ignore(&["storage_order"]);
            cx.emit(n.name.clone(), Op::MaxPool(p), vec![Some(n.req(0)?)], outs)
        }
        "AveragePool" => single(cx, n, Op::AveragePool(pool_attrs(n, true)?), vec![Some(n.req(0)?)]),
        "LpPool" => {
            let pa = pool_attrs(n, true)?;
            single(cx, n, Op::LpPool(pa, lp_p(n)?), vec![Some(n.req(0)?)])
        }
        "GlobalAveragePool" => single(cx, n, Op::GlobalAveragePool, vec![Some(n.req(0)?)]),
        "GlobalMaxPool" => single(cx, n, Op::GlobalMaxPool, vec![Some(n.req(0)?)]),
        "GlobalLpPool" => {
            let x = n.req(0)?;
            let p = lp_p(n)?;
            let shape = cx.shape(x).ok_or_else(|| n.unsupported("GlobalLpPool needs the input's spatial shape before run time"))?;
            if shape.len() < 3 {
                return Err(n.invalid(format!("input has rank {}, GlobalLpPool needs N, C and spatial dims", shape.len())));
            }
            let pa = PoolAttrs {
                kernel_shape: shape[2..].to_vec(),
                strides: vec![],
                dilations: vec![],
                pads: vec![],
                auto_pad: AutoPad::NotSet,
                ceil_mode: false,
                count_include_pad: false,
            };
            single(cx, n, Op::LpPool(pa, p), vec![Some(x)])
        }
        "BatchNormalization" => {
            a.ignore(&["momentum", "is_test"]);
            if !a.bool_or("spatial", true)? {
                return Err(a.unsupported("spatial", "= 0 (per-activation statistics) is not supported"));
            }
            if a.bool_or("training_mode", false)? {
                return Err(a.unsupported("training_mode", "= 1 is not supported (inference only)"));
            }
            if n.out_used.iter().skip(1).any(|&u| u) {
                return Err(
                    n.unsupported("the running/saved mean and variance outputs exist only in training mode, which is not supported")
                );
            }
            let epsilon = a.float_or("epsilon", 1e-5)?;
            cx.emit(
                n.name.clone(),
                Op::BatchNorm { epsilon },
                trimmed(&n.inputs),
                vec![n.outputs.first().copied().ok_or_else(|| n.invalid("has no outputs"))?],
            )
        }
        "InstanceNormalization" => pass(cx, n, Op::InstanceNorm { epsilon: a.float_or("epsilon", 1e-5)? }),
        "LayerNormalization" => {
            a.ignore(&["stash_type"]);
            let x = n.req(0)?;
            n.req(1)?;
            let axis = axis_of(cx, n, x, a.int_or("axis", -1)?, "axis", false)?;
            let outs = n.outs(1, 3)?;
            cx.emit(n.name.clone(), Op::LayerNorm { axis, epsilon: a.float_or("epsilon", 1e-5)? }, trimmed(&n.inputs), outs)
        }
        "GroupNormalization" => group_norm(cx, n),
        "LRN" => {
            let size = a.usize_or("size", 0)?;
            if size == 0 {
                return Err(n.invalid("attribute 'size' is required and must be positive"));
            }
            let op = Op::Lrn { alpha: a.float_or("alpha", 1e-4)?, beta: a.float_or("beta", 0.75)?, bias: a.float_or("bias", 1.0)?, size };
            single(cx, n, op, vec![Some(n.req(0)?)])
        }
        "LpNormalization" => {
            let x = n.req(0)?;
            let axis = axis_of(cx, n, x, a.int_or("axis", -1)?, "axis", false)?;
            let p = match a.int_or("p", 2)? {
                1 => 1,
                2 => 2,
                p => return Err(a.unsupported("p", format!("= {p}: only 1 and 2 are supported"))),
            };
            single(cx, n, Op::LpNorm { axis, p }, vec![Some(x)])
        }
        "Softmax" => softmax_like(cx, n, |axis| Op::Softmax { axis }),
        "LogSoftmax" => softmax_like(cx, n, |axis| Op::LogSoftmax { axis }),
        "Hardmax" => softmax_like(cx, n, |axis| Op::Hardmax { axis }),
        "ArgMax" | "ArgMin" => {
            let x = n.req(0)?;
            let op = Op::ArgReduce {
                max: n.op_type == "ArgMax",
                axis: axis_of(cx, n, x, a.int_or("axis", 0)?, "axis", false)?,
                keepdims: a.bool_or("keepdims", true)?,
                select_last_index: a.bool_or("select_last_index", false)?,
            };
            single(cx, n, op, vec![Some(x)])
        }
        "CumSum" => pass(cx, n, Op::CumSum { exclusive: a.bool_or("exclusive", false)?, reverse: a.bool_or("reverse", false)? }),
        "TopK" => {
            let x = n.req(0)?;
            let k = if v < 10 {
                let k = a.int("k")?.ok_or_else(|| n.invalid("attribute 'k' is required"))?;
                let b = base(cx, n);
                cx.const_i64(&format!("{b}:k"), vec![k])
            } else {
                n.req(1)?
            };
            let op = Op::TopK {
                axis: axis_of(cx, n, x, a.int_or("axis", -1)?, "axis", false)?,
                largest: a.bool_or("largest", true)?,
                sorted: a.bool_or("sorted", true)?,
            };
            let outs = n.outs(2, 2)?;
            cx.emit(n.name.clone(), op, vec![Some(x), Some(k)], outs)
        }
        "Reshape" => {
            let x = n.req(0)?;
            let shape = if v < 5 {
                let s = a.ints("shape")?.ok_or_else(|| n.invalid("attribute 'shape' is required"))?;
                let b = base(cx, n);
                cx.const_i64(&format!("{b}:shape"), s)
            } else {
                n.req(1)?
            };
            single(cx, n, Op::Reshape { allowzero: a.bool_or("allowzero", false)? }, vec![Some(x), Some(shape)])
        }
        "Flatten" => {
            let x = n.req(0)?;
            let axis = axis_of(cx, n, x, a.int_or("axis", 1)?, "axis", true)?;
            single(cx, n, Op::Flatten { axis }, vec![Some(x)])
        }
        "Squeeze" | "Unsqueeze" => {
            let x = n.req(0)?;
            let (axes, inputs) = if v < 13 {
                let axes = a.ints("axes")?;
                if n.op_type == "Unsqueeze" && axes.is_none() {
                    return Err(n.invalid("attribute 'axes' is required"));
                }
                (axes, vec![Some(x)])
            } else {
                (None, trimmed(&n.inputs))
            };
            let op = if n.op_type == "Squeeze" { Op::Squeeze { axes } } else { Op::Unsqueeze { axes } };
            single(cx, n, op, inputs)
        }
        "Transpose" => {
            let x = n.req(0)?;
            let perm = a.ints("perm")?.unwrap_or_default();
            let perm = perm.iter().map(|&p| axis_of(cx, n, x, p, "perm entry", false)).collect::<Result<Vec<_>>>()?;
            single(cx, n, Op::Transpose { perm }, vec![Some(x)])
        }
        "Concat" => {
            if n.inputs.is_empty() || n.inputs.iter().any(|i| i.is_none()) {
                return Err(n.invalid("needs one or more inputs, none of them empty"));
            }
            let axis = match a.int("axis")? {
                Some(ax) => ax,
                None if v < 4 => 1,
                None => return Err(n.invalid("attribute 'axis' is required")),
            };
            // any input with a known rank resolves a negative axis
            let known = n.inputs.iter().flatten().copied().find(|&i| cx.rank(i).is_some());
            let axis = axis_of(cx, n, known.unwrap_or(n.req(0)?), axis, "axis", false)?;
            single(cx, n, Op::Concat { axis }, n.inputs.clone())
        }
        "Split" => split(cx, n),
        "Slice" => {
            if v < 10 {
                let x = n.req(0)?;
                let starts = a.ints("starts")?.ok_or_else(|| n.invalid("attribute 'starts' is required"))?;
                let ends = a.ints("ends")?.ok_or_else(|| n.invalid("attribute 'ends' is required"))?;
                let b = base(cx, n);
                let mut ins =
                    vec![Some(x), Some(cx.const_i64(&format!("{b}:starts"), starts)), Some(cx.const_i64(&format!("{b}:ends"), ends))];
                if let Some(axes) = a.ints("axes")? {
                    ins.push(Some(cx.const_i64(&format!("{b}:axes"), axes)));
                }
                single(cx, n, Op::Slice, ins)
            } else {
                pass(cx, n, Op::Slice)
            }
        }
        "Gather" | "GatherElements" => {
            let x = n.req(0)?;
            let axis = axis_of(cx, n, x, a.int_or("axis", 0)?, "axis", false)?;
            let op = if n.op_type == "Gather" { Op::Gather { axis } } else { Op::GatherElements { axis } };
            single(cx, n, op, vec![Some(x), Some(n.req(1)?)])
        }
        "GatherND" => pass(cx, n, Op::GatherNd { batch_dims: a.usize_or("batch_dims", 0)? }),
        "Scatter" | "ScatterElements" => {
            let x = n.req(0)?;
            let axis = axis_of(cx, n, x, a.int_or("axis", 0)?, "axis", false)?;
            let reduction = scatter_reduction(n)?;
            pass(cx, n, Op::ScatterElements { axis, reduction })
        }
        "ScatterND" => {
            let reduction = scatter_reduction(n)?;
            pass(cx, n, Op::ScatterNd { reduction })
        }
        "Pad" => pad(cx, n),
        "Resize" => resize(cx, n),
        "Upsample" => upsample(cx, n),
        "Expand" => pass(cx, n, Op::Expand),
        "Tile" => {
            if v < 6 {
                return Err(n.unsupported("Tile-1 (tiles and axis inputs) is not supported; use opset 6 or later"));
            }
            pass(cx, n, Op::Tile)
        }
        "Shape" => {
            let start = a.int_or("start", 0)?;
            let end = a.int("end")?;
            single(cx, n, Op::Shape { start, end }, vec![Some(n.req(0)?)])
        }
        "Size" => pass(cx, n, Op::Size),
        "NonZero" => pass(cx, n, Op::NonZero),
        "Range" => {
            // stash_type (opset 27) only sets the accumulation precision of f16/bf16 ranges
            a.ignore(&["stash_type"]);
            pass(cx, n, Op::Range)
        }
        "Identity" => pass(cx, n, Op::Identity),
        "ConstantOfShape" => {
            let value = match a.tensor("value")? {
                Some(t) => {
                    let t = to_tensor(t, None, &format!("{}: attribute 'value'", n.desc))?;
                    if t.len() != 1 {
                        return Err(a.invalid("value", format!("must hold one element, found {}", t.len())));
                    }
                    Tensor { shape: vec![1], data: t.data }
                }
                None => Tensor::from_f32(vec![1], vec![0.0]),
            };
            single(cx, n, Op::ConstantOfShape { value }, vec![Some(n.req(0)?)])
        }
        "Dropout" => dropout(cx, n),
        "Trilu" => pass(cx, n, Op::Trilu { upper: a.bool_or("upper", true)? }),
        "OneHot" => pass(cx, n, Op::OneHot { axis: a.int_or("axis", -1)? }),
        "EyeLike" => {
            let dtype = match a.int("dtype")? {
                Some(c) => Some(dtype_attr(n, "dtype", c)?),
                None => None,
            };
            single(cx, n, Op::EyeLike { dtype, k: a.int_or("k", 0)? }, vec![Some(n.req(0)?)])
        }
        "DepthToSpace" | "SpaceToDepth" => {
            let blocksize = a.usize_or("blocksize", 0)?;
            if blocksize == 0 {
                return Err(n.invalid("attribute 'blocksize' is required and must be positive"));
            }
            let crd = match a.string_or("mode", "DCR")?.as_str() {
                "DCR" => false,
                "CRD" => true,
                s => return Err(a.invalid("mode", format!("has unknown value '{s}' (expected DCR or CRD)"))),
            };
            let op = match (n.op_type, crd) {
                ("SpaceToDepth", true) => return space_to_depth_crd(cx, n, blocksize),
                ("SpaceToDepth", false) => Op::SpaceToDepth { blocksize },
                _ => Op::DepthToSpace { blocksize, crd },
            };
            single(cx, n, op, vec![Some(n.req(0)?)])
        }
        "ReverseSequence" => {
            let op = Op::ReverseSequence { batch_axis: a.usize_or("batch_axis", 1)?, time_axis: a.usize_or("time_axis", 0)? };
            pass(cx, n, op)
        }
        "DequantizeLinear" | "QuantizeLinear" => quant(cx, n),
        "Swish" | "SwiGLU" => {
            // Swish(x) = x * sigmoid(alpha * x); SwiGLU(a, b) = Swish(a) * b
            let x = n.req(0)?;
            let alpha = a.float_or("alpha", 1.0)?;
            let ax = if alpha == 1.0 {
                x
            } else {
                let dt = cx.need_dtype(n, x, n.op_type)?;
                let c = scalar_const(cx, n, "alpha", dt, alpha as f64);
                aux(cx, n, "scaled", Op::Binary(BinaryOp::Mul, None), vec![Some(x), Some(c)])?
            };
            let sig = aux(cx, n, "sigmoid", Op::Unary(UnaryOp::Sigmoid), vec![Some(ax)])?;
            if n.op_type == "Swish" {
                single(cx, n, Op::Binary(BinaryOp::Mul, None), vec![Some(x), Some(sig)])
            } else {
                let b = n.req(1)?;
                let sw = aux(cx, n, "swish", Op::Binary(BinaryOp::Mul, None), vec![Some(x), Some(sig)])?;
                single(cx, n, Op::Binary(BinaryOp::Mul, None), vec![Some(sw), Some(b)])
            }
        }
        "CenterCropPad" => center_crop_pad(cx, n),
        "Shrink" => {
            // y = x + bias if x < -lambd; x - bias if x > lambd; else 0
            let x = n.req(0)?;
            let lambd = a.float_or("lambd", 0.5)? as f64;
            let bias = a.float_or("bias", 0.0)? as f64;
            let dt = cx.need_dtype(n, x, "Shrink")?;
            let (neg_l, l, b, zero) = (
                scalar_const(cx, n, "neg_lambd", dt, -lambd),
                scalar_const(cx, n, "lambd", dt, lambd),
                scalar_const(cx, n, "bias", dt, bias),
                scalar_const(cx, n, "zero", dt, 0.0),
            );
            let below = aux(cx, n, "below", Op::Binary(BinaryOp::Less, None), vec![Some(x), Some(neg_l)])?;
            let above = aux(cx, n, "above", Op::Binary(BinaryOp::Greater, None), vec![Some(x), Some(l)])?;
            let plus = aux(cx, n, "plus", Op::Binary(BinaryOp::Add, None), vec![Some(x), Some(b)])?;
            let minus = aux(cx, n, "minus", Op::Binary(BinaryOp::Sub, None), vec![Some(x), Some(b)])?;
            let hi = aux(cx, n, "hi", Op::Where, vec![Some(above), Some(minus), Some(zero)])?;
            single(cx, n, Op::Where, vec![Some(below), Some(plus), Some(hi)])
        }
        "RMSNormalization" => rms_norm(cx, n),
        "QLinearConv" | "QLinearMatMul" => qlinear(cx, n),
        "MeanVarianceNormalization" => mvn(cx, n),
        "Einsum" => Err(Error::Unsupported(format!(
            "op 'Einsum' (node '{}', domain '{}', opset {v}) is not supported; rewrite it as MatMul/Transpose/ReduceSum",
            n.name, n.domain
        ))),
        other => Err(Error::Unsupported(format!("op '{other}' (node '{}', domain '{}', opset {v}) is not supported", n.name, n.domain))),
    }
}

/// Binary ops, with opset < 7 `broadcast=1, axis=k` broadcasting (B aligned at axis k of A) turned into numpy
/// broadcasting by appending size-1 dims to B.
fn binary(cx: &mut Cx, n: &NodeIn, b: BinaryOp, legacy: bool) -> Result<()> {
    let x = n.req(0)?;
    let mut y = n.req(1)?;
    if legacy {
        let a = &n.attrs;
        let broadcast = a.bool_or("broadcast", false)?;
        let axis = a.int("axis")?;
        if let (true, Some(axis)) = (broadcast, axis) {
            let ra = cx.need_rank(n, x, "legacy broadcasting with 'axis'")?;
            let rb = cx.need_rank(n, y, "legacy broadcasting with 'axis'")?;
            let ax = axis_of(cx, n, x, axis, "axis", false)?;
            if ax + rb > ra {
                return Err(n.invalid(format!("cannot broadcast a rank-{rb} B at axis {axis} of a rank-{ra} A")));
            }
            let t = ra - ax - rb;
            if t > 0 {
                let bn = base(cx, n);
                let y2 = cx.tmp(&format!("{bn}:bcast"));
                let axes = (rb..rb + t).map(|i| i as i64).collect();
                cx.emit(aux_name(n, "unsqueeze"), Op::Unsqueeze { axes: Some(axes) }, vec![Some(y)], vec![y2])?;
                y = y2;
            }
        }
    }
    single(cx, n, Op::Binary(b, None), vec![Some(x), Some(y)])
}

/// Clip: bounds from attributes (opset < 11) or from inputs; constant bounds give `Unary(Clip)`.
fn clip(cx: &mut Cx, n: &NodeIn) -> Result<()> {
    let a = &n.attrs;
    let x = n.req(0)?;
    if n.opset < 11 {
        let (lo, hi) = if n.opset < 6 { (f32::NEG_INFINITY, f32::INFINITY) } else { (f32::MIN, f32::MAX) };
        let min = a.float_or("min", lo)?;
        let max = a.float_or("max", hi)?;
        return single(cx, n, Op::Unary(UnaryOp::Clip { min, max }), vec![Some(x)]);
    }
    // A bound as an f32 when it is absent or a constant that f32 holds exactly.
    let bound = |v: Option<ValueId>, default: f32| -> Result<Option<f32>> {
        let Some(v) = v else { return Ok(Some(default)) };
        let Some(t) = cx.constant(v) else { return Ok(None) };
        if t.len() != 1 {
            return Err(n.invalid(format!("Clip bounds must hold one element, '{}' has {}", cx.g.value(v).name, t.len())));
        }
        let f = t.to_f64_vec()[0];
        let exact = f.is_nan() || f.is_infinite() || (f as f32) as f64 == f;
        Ok(exact.then_some(f as f32))
    };
    let lo = bound(n.opt(1), f32::NEG_INFINITY)?;
    let hi = bound(n.opt(2), f32::INFINITY)?;
    match (lo, hi) {
        (Some(min), Some(max)) => single(cx, n, Op::Unary(UnaryOp::Clip { min, max }), vec![Some(x)]),
        _ => pass(cx, n, Op::ClipDynamic),
    }
}

/// Reductions: axes from an attribute (ReduceSum < 13, others < 18) or from input 1.
fn reduce(cx: &mut Cx, n: &NodeIn, op: ReduceOp) -> Result<()> {
    let a = &n.attrs;
    let x = n.req(0)?;
    let keepdims = a.bool_or("keepdims", true)?;
    let axes_from_input = (n.op_type == "ReduceSum" && n.opset >= 13) || n.opset >= 18;
    if axes_from_input {
        let noop = a.bool_or("noop_with_empty_axes", false)?;
        let op = Op::Reduce { op, axes: None, keepdims, noop_with_empty_axes: noop };
        return single(cx, n, op, trimmed(&n.inputs));
    }
    let axes = match a.ints("axes")? {
        None => None,
        Some(v) if v.is_empty() => None,
        Some(v) => {
            let mut axes = v.iter().map(|&ax| axis_of(cx, n, x, ax, "axes entry", false)).collect::<Result<Vec<_>>>()?;
            axes.sort_unstable();
            if axes.windows(2).any(|w| w[0] == w[1]) {
                return Err(a.invalid("axes", format!("{v:?} names an axis twice")));
            }
            Some(axes)
        }
    };
    single(cx, n, Op::Reduce { op, axes, keepdims, noop_with_empty_axes: false }, vec![Some(x)])
}

/// Softmax, LogSoftmax and Hardmax. Before opset 13 they act on the input coerced to 2-D at `axis`, which
/// equals the opset-13 op when `axis` is the last dim and is otherwise imported as Flatten → op → Reshape.
fn softmax_like(cx: &mut Cx, n: &NodeIn, mk: fn(usize) -> Op) -> Result<()> {
    let x = n.req(0)?;
    let legacy = n.opset < 13;
    let axis = n.attrs.int_or("axis", if legacy { 1 } else { -1 })?;
    let rank = cx.need_rank(n, x, n.op_type)?;
    let ax = axis_of(cx, n, x, axis, "axis", false)?;
    if !legacy || ax + 1 == rank {
        return single(cx, n, mk(ax), vec![Some(x)]);
    }
    let out = n.outs(1, 1)?;
    let b = base(cx, n);
    let flat = cx.tmp(&format!("{b}:2d"));
    cx.emit(aux_name(n, "flatten"), Op::Flatten { axis: ax }, vec![Some(x)], vec![flat])?;
    let y2 = cx.tmp(&format!("{b}:2d_out"));
    cx.emit(n.name.clone(), mk(1), vec![Some(flat)], vec![y2])?;
    let shape = match cx.shape(x) {
        Some(s) => {
            let s = s.iter().map(|&d| d as i64).collect();
            cx.const_i64(&format!("{b}:shape"), s)
        }
        None => {
            let s = cx.tmp(&format!("{b}:shape"));
            cx.emit(aux_name(n, "shape"), Op::Shape { start: 0, end: None }, vec![Some(x)], vec![s])?;
            s
        }
    };
    cx.emit(aux_name(n, "reshape"), Op::Reshape { allowzero: true }, vec![Some(y2), Some(shape)], out)
}

/// GroupNormalization. Opset 18 takes scale and bias per group; they are expanded to per channel (opset 21
/// semantics) when they are constants and the channel count is known.
fn group_norm(cx: &mut Cx, n: &NodeIn) -> Result<()> {
    let a = &n.attrs;
    a.ignore(&["stash_type"]);
    let num_groups = a.usize_or("num_groups", 0)?;
    if num_groups == 0 {
        return Err(n.invalid("attribute 'num_groups' is required and must be positive"));
    }
    let epsilon = a.float_or("epsilon", 1e-5)?;
    let x = n.req(0)?;
    let mut scale = n.req(1)?;
    let mut bias = n.req(2)?;
    if n.opset < 21 {
        let channels = cx.shape(x).and_then(|s| s.get(1).copied());
        let per_group = |t: Option<&Tensor>| t.map(|t| t.len() == num_groups).unwrap_or(false);
        if !(per_group(cx.constant(scale)) && per_group(cx.constant(bias))) || channels.is_none() {
            return Err(n.unsupported(
                "GroupNormalization-18 (scale and bias per group) needs constant scale and bias and a known channel count; use opset 21",
            ));
        }
        let c = channels.unwrap_or(0);
        if c % num_groups != 0 {
            return Err(n.invalid(format!("{c} channels do not divide into {num_groups} groups")));
        }
        // Repeats each group's value over the group's channels, keeping the dtype.
        let expand = |t: &Tensor| -> Tensor {
            let per = c / num_groups;
            let idx = |i: usize| i / per;
            let data = crate::map_data!(&t.data, v => (0..c).map(|i| v[idx(i)]).collect());
            Tensor { shape: vec![c], data }
        };
        let b = base(cx, n);
        let s = expand(cx.constant(scale).expect("checked above"));
        let bi = expand(cx.constant(bias).expect("checked above"));
        scale = cx.constant_value(&format!("{b}:scale"), s);
        bias = cx.constant_value(&format!("{b}:bias"), bi);
    }
    single(cx, n, Op::GroupNorm { num_groups, epsilon }, vec![Some(x), Some(scale), Some(bias)])
}

/// Split: sizes from the `split` attribute (before 13) or input; otherwise equal parts (the last one smaller
/// with `num_outputs` from opset 18).
fn split(cx: &mut Cx, n: &NodeIn) -> Result<()> {
    let a = &n.attrs;
    let x = n.req(0)?;
    let axis = axis_of(cx, n, x, a.int_or("axis", 0)?, "axis", false)?;
    let count = n.outputs.len();
    if count == 0 {
        return Err(n.invalid("has no outputs"));
    }
    if let Some(k) = a.int("num_outputs")? {
        if k != count as i64 {
            return Err(a.invalid("num_outputs", format!("is {k} but the node has {count} outputs")));
        }
    }
    let split = if n.opset < 13 { a.ints("split")? } else { None };
    let (split, inputs) = match split {
        Some(s) if !s.is_empty() => {
            if s.len() != count {
                return Err(a.invalid("split", format!("has {} sizes but the node has {count} outputs", s.len())));
            }
            let s = s
                .iter()
                .map(|&x| usize::try_from(x).map_err(|_| a.invalid("split", format!("has a negative size {x}"))))
                .collect::<Result<Vec<_>>>()?;
            (Some(s), vec![Some(x)])
        }
        _ => (None, trimmed(&n.inputs)),
    };
    cx.emit(n.name.clone(), Op::Split { axis, split, num_outputs: count }, inputs, n.outputs.clone())
}

fn scatter_reduction(n: &NodeIn) -> Result<Option<BinaryOp>> {
    Ok(match n.attrs.string_or("reduction", "none")?.as_str() {
        "none" => None,
        "add" => Some(BinaryOp::Add),
        "mul" => Some(BinaryOp::Mul),
        "max" => Some(BinaryOp::Max),
        "min" => Some(BinaryOp::Min),
        s => return Err(n.attrs.invalid("reduction", format!("has unknown value '{s}'"))),
    })
}

/// Pad: pads and value from attributes before opset 11, inputs after.
fn pad(cx: &mut Cx, n: &NodeIn) -> Result<()> {
    let a = &n.attrs;
    let x = n.req(0)?;
    let mode = match a.string_or("mode", "constant")?.as_str() {
        "constant" => PadMode::Constant,
        "reflect" => PadMode::Reflect,
        "edge" => PadMode::Edge,
        "wrap" => PadMode::Wrap,
        s => return Err(a.invalid("mode", format!("has unknown value '{s}'"))),
    };
    if n.opset >= 11 {
        return pass(cx, n, Op::Pad { mode });
    }
    let key = if n.opset < 2 { "paddings" } else { "pads" };
    let pads = a.ints(key)?.ok_or_else(|| n.invalid(format!("attribute '{key}' is required")))?;
    let value = a.float_or("value", 0.0)?;
    let b = base(cx, n);
    let mut ins = vec![Some(x), Some(cx.const_i64(&format!("{b}:pads"), pads))];
    if mode == PadMode::Constant && value != 0.0 {
        let dt = cx.need_dtype(n, x, "Pad with a 'value'")?;
        ins.push(Some(cx.constant_value(&format!("{b}:value"), scalar_of(dt, value as f64))));
    }
    single(cx, n, Op::Pad { mode }, ins)
}

fn resize_mode(n: &NodeIn) -> Result<ResizeMode> {
    Ok(match n.attrs.string_or("mode", "nearest")?.as_str() {
        "nearest" => ResizeMode::Nearest,
        "linear" | "bilinear" | "trilinear" => ResizeMode::Linear,
        "cubic" | "bicubic" => ResizeMode::Cubic,
        s => return Err(n.attrs.invalid("mode", format!("has unknown value '{s}'"))),
    })
}

/// Attributes of Upsample and Resize-10: asymmetric coordinates, floor for nearest.
fn legacy_resize_attrs(mode: ResizeMode) -> ResizeAttrs {
    ResizeAttrs {
        mode,
        coord: CoordTransform::Asymmetric,
        nearest: NearestMode::Floor,
        cubic_coeff_a: -0.75,
        exclude_outside: false,
        extrapolation_value: 0.0,
    }
}

fn resize(cx: &mut Cx, n: &NodeIn) -> Result<()> {
    let a = &n.attrs;
    let x = n.req(0)?;
    let mode = resize_mode(n)?;
    if n.opset < 11 {
        let scales = n.req(1)?;
        return single(cx, n, Op::Resize(legacy_resize_attrs(mode)), vec![Some(x), None, Some(scales), None]);
    }
    let coord = match a.string_or("coordinate_transformation_mode", "half_pixel")?.as_str() {
        "half_pixel" => CoordTransform::HalfPixel,
        "half_pixel_symmetric" => CoordTransform::HalfPixelSymmetric,
        "pytorch_half_pixel" => CoordTransform::PytorchHalfPixel,
        "align_corners" => CoordTransform::AlignCorners,
        "asymmetric" => CoordTransform::Asymmetric,
        "tf_crop_and_resize" => CoordTransform::TfCropAndResize,
        "tf_half_pixel_for_nn" => {
            return Err(a.unsupported("coordinate_transformation_mode", "= tf_half_pixel_for_nn is not supported"));
        }
        s => return Err(a.invalid("coordinate_transformation_mode", format!("has unknown value '{s}'"))),
    };
    let nearest = match a.string_or("nearest_mode", "round_prefer_floor")?.as_str() {
        "round_prefer_floor" => NearestMode::RoundPreferFloor,
        "round_prefer_ceil" => NearestMode::RoundPreferCeil,
        "floor" => NearestMode::Floor,
        "ceil" => NearestMode::Ceil,
        s => return Err(a.invalid("nearest_mode", format!("has unknown value '{s}'"))),
    };
    if a.int_or("antialias", 0)? != 0 {
        return Err(a.unsupported("antialias", "= 1 is not supported"));
    }
    let policy = a.string_or("keep_aspect_ratio_policy", "stretch")?;
    let not_larger = match policy.as_str() {
        "stretch" => None,
        "not_larger" => Some(true),
        "not_smaller" => Some(false),
        s => return Err(a.invalid("keep_aspect_ratio_policy", format!("has unknown value '{s}'"))),
    };
    let attrs = ResizeAttrs {
        mode,
        coord,
        nearest,
        cubic_coeff_a: a.float_or("cubic_coeff_a", -0.75)?,
        exclude_outside: a.bool_or("exclude_outside", false)?,
        extrapolation_value: a.float_or("extrapolation_value", 0.0)?,
    };
    let mut roi = non_empty(cx, n.opt(1));
    let mut scales = non_empty(cx, n.opt(2));
    let mut sizes = non_empty(cx, n.opt(3));
    let rank = cx.rank(x);
    let axes = match a.ints("axes")? {
        Some(axes) => {
            cx.need_rank(n, x, "Resize with 'axes'")?;
            axes.iter().map(|&ax| axis_of(cx, n, x, ax, "axes entry", false)).collect::<Result<Vec<_>>>()?
        }
        None => (0..rank.unwrap_or(0)).collect(),
    };
    if rank.is_some_and(|r| axes != (0..r).collect::<Vec<_>>()) {
        // Scatter the per-axis values into full-rank vectors (folded to constants when they are constant).
        let r = rank.unwrap_or(0);
        let b = base(cx, n);
        let scatter = |cx: &mut Cx, fill: Tensor, idx: Vec<i64>, v: ValueId, what: &str| -> Result<ValueId> {
            let data = cx.constant_value(&format!("{b}:{what}_fill"), fill);
            let ix = cx.const_i64(&format!("{b}:{what}_axes"), idx);
            aux(cx, n, &format!("{what}_full"), Op::ScatterElements { axis: 0, reduction: None }, vec![Some(data), Some(ix), Some(v)])
        };
        let ax: Vec<i64> = axes.iter().map(|&a| a as i64).collect();
        if let Some(v) = scales {
            let dt = cx.need_dtype(n, v, "Resize with 'axes'")?;
            scales = Some(scatter(cx, vec_of(dt, &vec![1.0; r]), ax.clone(), v, "scales")?);
        }
        if let Some(v) = roi {
            let dt = cx.need_dtype(n, v, "Resize with 'axes'")?;
            let fill: Vec<f64> = (0..2 * r).map(|i| if i < r { 0.0 } else { 1.0 }).collect();
            let idx = ax.iter().copied().chain(ax.iter().map(|&a| a + r as i64)).collect();
            roi = Some(scatter(cx, vec_of(dt, &fill), idx, v, "roi")?);
        }
        if let Some(v) = sizes {
            let shape = aux(cx, n, "in_shape", Op::Shape { start: 0, end: None }, vec![Some(x)])?;
            let ix = cx.const_i64(&format!("{b}:sizes_axes"), ax.clone());
            let v = match cx.dtype(v) {
                Some(DType::I64) => v,
                _ => aux(cx, n, "sizes_i64", Op::Cast { to: DType::I64 }, vec![Some(v)])?,
            };
            sizes = Some(aux(cx, n, "sizes_full", Op::ScatterElements { axis: 0, reduction: None }, vec![Some(shape), Some(ix), Some(v)])?);
        }
    }
    if let Some(not_larger) = not_larger {
        // One scale for all `axes`: the smallest (not_larger) or largest (not_smaller) of sizes / input size,
        // output size round_half_up(scale * input). Expressed as `scales` when floor(input * scale) gives
        // the same output sizes, which is what the kernel computes from scales.
        let what = "keep_aspect_ratio_policy needs constant 'sizes' and a static input shape";
        let shape = cx.shape(x).map(|s| s.to_vec()).ok_or_else(|| n.unsupported(what))?;
        let want = sizes.and_then(|v| cx.constant(v)).map(|t| t.to_i64_vec()).ok_or_else(|| n.unsupported(what))?;
        if want.len() != shape.len() {
            return Err(n.invalid(format!("sizes has {} values for an input of rank {}", want.len(), shape.len())));
        }
        let ratios = axes.iter().map(|&i| want[i] as f64 / shape[i] as f64);
        let scale = if not_larger { ratios.fold(f64::INFINITY, f64::min) } else { ratios.fold(0.0, f64::max) };
        let s32 = scale as f32;
        let exact = axes.iter().all(|&i| ((shape[i] as f64) * s32 as f64).floor() == (scale * shape[i] as f64 + 0.5).floor());
        if !exact || !scale.is_finite() || scale <= 0.0 {
            return Err(a.unsupported("keep_aspect_ratio_policy", format!("= {policy}: the output size cannot be expressed with a scale")));
        }
        let full: Vec<f32> = (0..shape.len()).map(|i| if axes.contains(&i) { s32 } else { 1.0 }).collect();
        let b = base(cx, n);
        scales = Some(cx.constant_value(&format!("{b}:scales"), Tensor::from_f32(vec![full.len()], full)));
        sizes = None;
    }
    single(cx, n, Op::Resize(attrs), trimmed(&[Some(x), roi, scales, sizes]))
}

fn upsample(cx: &mut Cx, n: &NodeIn) -> Result<()> {
    let a = &n.attrs;
    let x = n.req(0)?;
    let mode = resize_mode(n)?;
    let scales = if n.opset < 7 {
        let h = a.float("height_scale")?.ok_or_else(|| n.invalid("attribute 'height_scale' is required"))?;
        let w = a.float("width_scale")?.ok_or_else(|| n.invalid("attribute 'width_scale' is required"))?;
        let b = base(cx, n);
        cx.constant_value(&format!("{b}:scales"), Tensor::from_f32(vec![4], vec![1.0, 1.0, h, w]))
    } else if n.opset < 9 {
        let s = a.floats("scales")?.ok_or_else(|| n.invalid("attribute 'scales' is required"))?;
        let b = base(cx, n);
        cx.constant_value(&format!("{b}:scales"), Tensor::from_f32(vec![s.len()], s))
    } else {
        n.req(1)?
    };
    single(cx, n, Op::Resize(legacy_resize_attrs(mode)), vec![Some(x), None, Some(scales), None])
}

/// Dropout at inference: the identity; a requested mask is all true (nothing dropped).
fn dropout(cx: &mut Cx, n: &NodeIn) -> Result<()> {
    let a = &n.attrs;
    let x = n.req(0)?;
    a.ignore(&["ratio", "is_test", "seed"]);
    if let Some(tm) = n.opt(2) {
        match cx.constant(tm) {
            Some(t) if t.to_f64_vec().iter().all(|&v| v == 0.0) => {}
            Some(_) => return Err(n.unsupported("training_mode = true is not supported (inference only)")),
            None => return Err(n.unsupported("training_mode must be a constant false")),
        }
    }
    let outs = n.outs(1, 2)?;
    cx.emit(n.name.clone(), Op::Identity, vec![Some(x)], vec![outs[0]])?;
    if let Some(&mask) = outs.get(1) {
        let value = if n.opset >= 10 {
            Tensor { shape: vec![1], data: TensorData::Bool(vec![true]) }
        } else {
            let dt = cx.need_dtype(n, x, "Dropout's mask output")?;
            let mut t = scalar_of(dt, 1.0);
            t.shape = vec![1];
            t
        };
        let b = base(cx, n);
        let shape = cx.tmp(&format!("{b}:shape"));
        cx.emit(aux_name(n, "shape"), Op::Shape { start: 0, end: None }, vec![Some(x)], vec![shape])?;
        cx.emit(aux_name(n, "mask"), Op::ConstantOfShape { value }, vec![Some(shape)], vec![mask])?;
    }
    Ok(())
}

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

/// SpaceToDepth with mode CRD (opset 28), as Reshape → Transpose → Reshape on a static shape.
fn space_to_depth_crd(cx: &mut Cx, n: &NodeIn, b: usize) -> Result<()> {
    let x = n.req(0)?;
    let s = cx.shape(x).map(|s| s.to_vec()).ok_or_else(|| n.unsupported("SpaceToDepth mode CRD needs a static input shape"))?;
    let [bn, c, h, w] = s[..] else {
        return Err(n.invalid(format!("SpaceToDepth needs a rank-4 input, found rank {}", s.len())));
    };
    if h % b != 0 || w % b != 0 {
        return Err(n.invalid(format!("input {h}x{w} is not divisible by blocksize {b}")));
    }
    let base_name = base(cx, n);
    let to6 = cx.const_i64(&format!("{base_name}:shape6"), [bn, c, h / b, b, w / b, b].iter().map(|&d| d as i64).collect());
    let r6 = aux(cx, n, "reshape6", Op::Reshape { allowzero: true }, vec![Some(x), Some(to6)])?;
    let t = aux(cx, n, "transpose", Op::Transpose { perm: vec![0, 1, 3, 5, 2, 4] }, vec![Some(r6)])?;
    let to4 = cx.const_i64(&format!("{base_name}:shape4"), [bn, c * b * b, h / b, w / b].iter().map(|&d| d as i64).collect());
    single(cx, n, Op::Reshape { allowzero: true }, vec![Some(t), Some(to4)])
}

/// RMSNormalization (opset 23), as its ONNX function body: x / sqrt(mean(x², axes [axis, rank)) + epsilon) *
/// scale, computed in `stash_type`.
fn rms_norm(cx: &mut Cx, n: &NodeIn) -> Result<()> {
    let a = &n.attrs;
    let x = n.req(0)?;
    let scale = n.req(1)?;
    let rank = cx.need_rank(n, x, "RMSNormalization")?;
    let axis = axis_of(cx, n, x, a.int_or("axis", -1)?, "axis", false)?;
    let epsilon = a.float_or("epsilon", 1e-5)?;
    let stash = dtype_attr(n, "stash_type", a.int_or("stash_type", 1)?)?;
    let dt = cx.need_dtype(n, x, "RMSNormalization")?;
    let xu = if dt == stash { x } else { aux(cx, n, "stash", Op::Cast { to: stash }, vec![Some(x)])? };
    let sq = aux(cx, n, "square", Op::Binary(BinaryOp::Mul, None), vec![Some(xu), Some(xu)])?;
    let axes = Some((axis..rank).collect());
    let mean = aux(cx, n, "mean", Op::Reduce { op: ReduceOp::Mean, axes, keepdims: true, noop_with_empty_axes: false }, vec![Some(sq)])?;
    let eps = scalar_const(cx, n, "epsilon", stash, epsilon as f64);
    let plus = aux(cx, n, "plus_eps", Op::Binary(BinaryOp::Add, None), vec![Some(mean), Some(eps)])?;
    let rms = aux(cx, n, "rms", Op::Unary(UnaryOp::Sqrt), vec![Some(plus)])?;
    let inv = aux(cx, n, "inv_rms", Op::Unary(UnaryOp::Reciprocal), vec![Some(rms)])?;
    let norm = aux(cx, n, "normalized", Op::Binary(BinaryOp::Mul, None), vec![Some(xu), Some(inv)])?;
    let norm = if dt == stash { norm } else { aux(cx, n, "unstash", Op::Cast { to: dt }, vec![Some(norm)])? };
    single(cx, n, Op::Binary(BinaryOp::Mul, None), vec![Some(norm), Some(scale)])
}

/// MeanVarianceNormalization, as its ONNX function body: (x - mean) / (sqrt(mean(x²) - mean²) + 1e-9).
fn mvn(cx: &mut Cx, n: &NodeIn) -> Result<()> {
    let x = n.req(0)?;
    let axes = n.attrs.ints("axes")?.unwrap_or_else(|| vec![0, 2, 3]);
    let mut axes = axes.iter().map(|&ax| axis_of(cx, n, x, ax, "axes entry", false)).collect::<Result<Vec<_>>>()?;
    axes.sort_unstable();
    axes.dedup();
    let dt = cx.need_dtype(n, x, "MeanVarianceNormalization")?;
    let reduce = Op::Reduce { op: ReduceOp::Mean, axes: Some(axes), keepdims: true, noop_with_empty_axes: false };
    let mean = aux(cx, n, "mean", reduce.clone(), vec![Some(x)])?;
    let mean_sq = aux(cx, n, "mean_sq", Op::Binary(BinaryOp::Mul, None), vec![Some(mean), Some(mean)])?;
    let x_sq = aux(cx, n, "x_sq", Op::Binary(BinaryOp::Mul, None), vec![Some(x), Some(x)])?;
    let e_x_sq = aux(cx, n, "e_x_sq", reduce, vec![Some(x_sq)])?;
    let var = aux(cx, n, "variance", Op::Binary(BinaryOp::Sub, None), vec![Some(e_x_sq), Some(mean_sq)])?;
    let std = aux(cx, n, "std", Op::Unary(UnaryOp::Sqrt), vec![Some(var)])?;
    let centered = aux(cx, n, "centered", Op::Binary(BinaryOp::Sub, None), vec![Some(x), Some(mean)])?;
    let eps = scalar_const(cx, n, "epsilon", dt, 1e-9);
    let denom = aux(cx, n, "denominator", Op::Binary(BinaryOp::Add, None), vec![Some(std), Some(eps)])?;
    single(cx, n, Op::Binary(BinaryOp::Div, None), vec![Some(centered), Some(denom)])
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

/// MaxPool with `storage_order = 1`: the kernel's row-major indices `((n*C + c)*H + h)*W + w` of a 2-D pool are
/// rewritten as column-major `((n*C + c)*W + w)*H + h`, which needs the input's spatial size.
fn maxpool_column_major(cx: &mut Cx, n: &NodeIn, p: PoolAttrs, outs: Vec<ValueId>) -> Result<()> {
    let x = n.req(0)?;
    let (h, w) = match cx.shape(x) {
        Some(&[_, _, h, w]) => (h as f64, w as f64),
        _ => return Err(n.attrs.unsupported("storage_order", "= 1 needs a 2-D pool over an input of static shape")),
    };
    let idx = {
        let b = base(cx, n);
        cx.tmp(&format!("{b}:row_major"))
    };
    cx.emit(n.name.clone(), Op::MaxPool(p), vec![Some(x)], vec![outs[0], idx])?;
    let hw = scalar_const(cx, n, "hw", DType::I64, h * w);
    let wc = scalar_const(cx, n, "w", DType::I64, w);
    let hc = scalar_const(cx, n, "h", DType::I64, h);
    let bin = |op| Op::Binary(op, None);
    let within = aux(cx, n, "within", bin(BinaryOp::Mod), vec![Some(idx), Some(hw)])?;
    let plane = aux(cx, n, "plane", bin(BinaryOp::Sub), vec![Some(idx), Some(within)])?;
    let row = aux(cx, n, "row", bin(BinaryOp::Div), vec![Some(within), Some(wc)])?;
    let col = aux(cx, n, "col", bin(BinaryOp::Mod), vec![Some(within), Some(wc)])?;
    let col_h = aux(cx, n, "col_h", bin(BinaryOp::Mul), vec![Some(col), Some(hc)])?;
    let t = aux(cx, n, "col_h_row", bin(BinaryOp::Add), vec![Some(col_h), Some(row)])?;
    cx.emit(aux_name(n, "indices"), bin(BinaryOp::Add), vec![Some(plane), Some(t)], vec![outs[1]])
}

/// CenterCropPad, as its ONNX function body: pad each listed axis up to the target (the odd pixel at the end),
/// then slice a centred window of the target size. With a static input and a constant target the
/// shape arithmetic folds to constants.
fn center_crop_pad(cx: &mut Cx, n: &NodeIn) -> Result<()> {
    let x = n.req(0)?;
    let target = n.req(1)?;
    let axes = match n.attrs.ints("axes")? {
        Some(a) => a.iter().map(|&ax| axis_of(cx, n, x, ax, "axes entry", false).map(|a| a as i64)).collect::<Result<Vec<_>>>()?,
        None => (0..cx.need_rank(n, x, "CenterCropPad")? as i64).collect(),
    };
    let b = base(cx, n);
    let axes_v = cx.const_i64(&format!("{b}:axes"), axes);
    let two = scalar_const(cx, n, "two", DType::I64, 2.0);
    let bin = |op| Op::Binary(op, None);
    let target = match cx.dtype(target) {
        Some(DType::I64) => target,
        _ => aux(cx, n, "target_i64", Op::Cast { to: DType::I64 }, vec![Some(target)])?,
    };
    let all = aux(cx, n, "in_shape", Op::Shape { start: 0, end: None }, vec![Some(x)])?;
    let cur = aux(cx, n, "in_dims", Op::Gather { axis: 0 }, vec![Some(all), Some(axes_v)])?;
    let padded = aux(cx, n, "padded_dims", bin(BinaryOp::Max), vec![Some(target), Some(cur)])?;
    let amount = aux(cx, n, "pad_amount", bin(BinaryOp::Sub), vec![Some(padded), Some(cur)])?;
    let left = aux(cx, n, "pad_left", bin(BinaryOp::Div), vec![Some(amount), Some(two)])?;
    let right = aux(cx, n, "pad_right", bin(BinaryOp::Sub), vec![Some(amount), Some(left)])?;
    let pads = aux(cx, n, "pads", Op::Concat { axis: 0 }, vec![Some(left), Some(right)])?;
    let y = aux(cx, n, "padded", Op::Pad { mode: PadMode::Constant }, vec![Some(x), Some(pads), None, Some(axes_v)])?;
    let diff = aux(cx, n, "excess", bin(BinaryOp::Sub), vec![Some(padded), Some(target)])?;
    let starts = aux(cx, n, "starts", bin(BinaryOp::Div), vec![Some(diff), Some(two)])?;
    let ends = aux(cx, n, "ends", bin(BinaryOp::Add), vec![Some(starts), Some(target)])?;
    single(cx, n, Op::Slice, vec![Some(y), Some(starts), Some(ends), Some(axes_v)])
}
