//! The elementwise family: binary ops with broadcasting (and a fused activation), unary ops, Clip with
//! bound inputs, the variadic ops, Where and Cast: attributes, arity and type/shape rules.

use super::dims::{broadcast_shape, broadcast_shapes};
use super::{info, Arity, InferError, Inferred, Op, TypeInfo};
use crate::ir::DType;

/// Activation fused into a producing op by the fusion pass.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Activation {
    /// max(x, 0)
    Relu,
    /// min(max(x, 0), 6)
    Relu6,
    /// min(max(x, lo), hi)
    Clip {
        /// lower bound
        min: f32,
        /// upper bound
        max: f32,
    },
    /// x · sigmoid(x) (SiLU, Swish). Fused only by the CPU runtime when it plans a session
    /// ([`crate::passes::fuse_silu`]); the graphs other targets compile never hold it.
    Silu,
}

impl Activation {
    /// The activation's (lower, upper) clamp bounds, or None for one that is not a clamp (SiLU).
    pub fn clamp_bounds(self) -> Option<(f32, f32)> {
        match self {
            Activation::Relu => Some((0.0, f32::INFINITY)),
            Activation::Relu6 => Some((0.0, 6.0)),
            Activation::Clip { min, max } => Some((min, max)),
            Activation::Silu => None,
        }
    }

    /// Applies the activation to one value.
    #[inline]
    pub fn apply(self, x: f32) -> f32 {
        match self {
            Activation::Relu => x.max(0.0),
            Activation::Relu6 => x.clamp(0.0, 6.0),
            Activation::Clip { min, max } => x.max(min).min(max),
            Activation::Silu => x / (1.0 + (-x).exp()),
        }
    }
}

/// Binary elementwise operations with numpy broadcasting.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(missing_docs)]
pub enum BinaryOp {
    Add,
    Sub,
    Mul,
    Div,
    Pow,
    Max,
    Min,
    /// Integer/float remainder with the sign of the divisor (ONNX Mod fmod=0).
    Mod,
    /// C fmod: sign of the dividend (ONNX Mod fmod=1).
    Fmod,
    Equal,
    Less,
    LessOrEqual,
    Greater,
    GreaterOrEqual,
    And,
    Or,
    Xor,
    BitAnd,
    BitOr,
    BitXor,
    /// PRelu: x if x >= 0 else slope * x.
    PRelu,
}

impl BinaryOp {
    /// True for comparison ops (output is bool).
    pub fn is_comparison(self) -> bool {
        use BinaryOp::*;
        matches!(self, Equal | Less | LessOrEqual | Greater | GreaterOrEqual)
    }
    /// True for logical ops on bools.
    pub fn is_logical(self) -> bool {
        matches!(self, BinaryOp::And | BinaryOp::Or | BinaryOp::Xor)
    }
}

/// Unary elementwise operations.
#[derive(Clone, Copy, Debug, PartialEq)]
#[allow(missing_docs)]
pub enum UnaryOp {
    Neg,
    Abs,
    Sqrt,
    Exp,
    Log,
    Reciprocal,
    /// `1 / sqrt(x)` (TFLite's RSQRT, which has an int8 kernel; the quantizer's prepare step makes it).
    Rsqrt,
    Floor,
    Ceil,
    /// Round half to even.
    Round,
    Sign,
    Relu,
    Sigmoid,
    Tanh,
    Sin,
    Cos,
    Tan,
    Asin,
    Acos,
    Atan,
    Sinh,
    Cosh,
    Asinh,
    Acosh,
    Atanh,
    Erf,
    Not,
    BitNot,
    Softplus,
    Softsign,
    IsNaN,
    /// IsInf with the two detection flags.
    IsInf { detect_positive: bool, detect_negative: bool },
    LeakyRelu { alpha: f32 },
    Elu { alpha: f32 },
    Selu { alpha: f32, gamma: f32 },
    Celu { alpha: f32 },
    ThresholdedRelu { alpha: f32 },
    HardSigmoid { alpha: f32, beta: f32 },
    HardSwish,
    Mish,
    /// Gelu; `tanh` selects the tanh approximation.
    Gelu { tanh: bool },
    /// Clip with constant bounds (absent bounds are +/- infinity).
    Clip { min: f32, max: f32 },
}


/// Output dtype of a binary op, or why the input dtypes are not accepted.
pub fn binary_dtype(op: BinaryOp, a: DType, b: DType) -> Result<DType, String> {
    use BinaryOp::*;
    let same = || {
        if a == b {
            Ok(())
        } else {
            Err(format!("{op:?} needs two inputs of one type, got {a} and {b}"))
        }
    };
    let numeric = |t: DType| {
        if t == DType::Bool {
            Err(format!("{op:?} is not defined for bool"))
        } else {
            Ok(())
        }
    };
    match op {
        Pow => {
            numeric(a)?;
            numeric(b)?;
            Ok(a)
        }
        Equal => {
            same()?;
            Ok(DType::Bool)
        }
        Less | LessOrEqual | Greater | GreaterOrEqual => {
            same()?;
            numeric(a)?;
            Ok(DType::Bool)
        }
        And | Or | Xor => {
            same()?;
            if a != DType::Bool {
                return Err(format!("{op:?} needs bool inputs, got {a}"));
            }
            Ok(DType::Bool)
        }
        BitAnd | BitOr | BitXor => {
            same()?;
            if !a.is_int() {
                return Err(format!("{op:?} needs integer inputs, got {a}"));
            }
            Ok(a)
        }
        Add | Sub | Mul | Div | Max | Min | Mod | Fmod | PRelu => {
            same()?;
            numeric(a)?;
            Ok(a)
        }
    }
}

/// Output shape of a binary op: the numpy broadcast, except PRelu whose slope broadcasts into x.
pub fn binary_shape(op: BinaryOp, a: &[usize], b: &[usize]) -> Result<Vec<usize>, String> {
    let s = broadcast_shape(a, b)?;
    if op == BinaryOp::PRelu && s != a {
        return Err(format!("PRelu slope of shape {b:?} does not broadcast to the input shape {a:?}"));
    }
    Ok(s)
}

/// Checks that a fused activation fits the op's output.
pub fn check_activation(op: BinaryOp, act: Option<Activation>, out: DType) -> Result<(), String> {
    if act.is_some() && !(out.is_float() || out.is_int()) {
        return Err(format!("a fused activation is not supported on {op:?}, whose output is {out}"));
    }
    if let Some(a) = act.filter(|a| a.clamp_bounds().is_none()) {
        return Err(format!("a fused {a:?} activation is supported on Conv, ConvTranspose and Gemm only, not on {op:?}"));
    }
    Ok(())
}

/// Output dtype of a unary op, or why the input dtype is not accepted.
pub fn unary_dtype(u: UnaryOp, a: DType) -> Result<DType, String> {
    use UnaryOp::*;
    let ok = match a {
        DType::Bool => matches!(u, Not),
        t if t.is_int() => matches!(u, Neg | Abs | Sign | Relu | BitNot | Clip { .. }),
        _ => !matches!(u, Not | BitNot),
    };
    if !ok {
        return Err(format!("{} is not defined for {a}", Op::Unary(u).name()));
    }
    Ok(if matches!(u, IsNaN | IsInf { .. }) { DType::Bool } else { a })
}

/// Whether a variadic op (None: Mean) accepts inputs of `dt`.
pub fn variadic_dtype(op: Option<BinaryOp>, dt: DType) -> Result<(), String> {
    use BinaryOp::*;
    let ok = match op {
        None => dt.is_float(),
        Some(Add | Sub | Mul | Max | Min) => dt.is_float() || dt.is_int(),
        Some(And | Or | Xor) => dt == DType::Bool,
        Some(BitAnd | BitOr | BitXor) => dt.is_int(),
        Some(_) => false,
    };
    if ok {
        Ok(())
    } else {
        let name = op.map(|b| format!("{b:?}")).unwrap_or_else(|| "Mean".into());
        Err(format!("variadic {name} is not defined for {dt}"))
    }
}


/// Checks a Clip bound input (`i` 1: min, 2: max) against the input type.
pub fn clip_bound_check(i: usize, dt: DType, shape: &[usize], x: DType) -> Result<(), String> {
    let what = if i == 1 { "min" } else { "max" };
    if dt != x {
        return Err(format!("Clip {what} is {dt} but the input is {x}"));
    }
    if shape.iter().product::<usize>() != 1 {
        return Err(format!("Clip {what} must be a scalar, got shape {shape:?}"));
    }
    Ok(())
}

/// Checks Where's condition and branch types.
pub fn where_check(c: DType, x: DType, y: DType) -> Result<(), String> {
    if c != DType::Bool {
        return Err(format!("Where condition is {c}, expected bool"));
    }
    if x != y {
        return Err(format!("Where branches have different types {x} and {y}"));
    }
    Ok(())
}


/// Shape rule of a binary op: broadcast shapes, the op's output type.
pub fn infer_binary(b: BinaryOp, act: Option<Activation>, inputs: &[Option<TypeInfo>]) -> Result<Inferred, InferError> {
    let (x, y) = (info(inputs, 0)?, info(inputs, 1)?);
    let dt = binary_dtype(b, x.dtype, y.dtype)?;
    check_activation(b, act, dt)?;
    Ok(vec![(dt, binary_shape(b, x.shape, y.shape)?)])
}

/// Shape rule of a unary op: the input's shape.
pub fn infer_unary(u: UnaryOp, inputs: &[Option<TypeInfo>]) -> Result<Inferred, InferError> {
    let x = info(inputs, 0)?;
    Ok(vec![(unary_dtype(u, x.dtype)?, x.shape.to_vec())])
}

/// Shape rule of Clip with bound inputs (x, min?, max?).
pub fn infer_clip_dynamic(inputs: &[Option<TypeInfo>]) -> Result<Inferred, InferError> {
    let x = info(inputs, 0)?;
    if !(x.dtype.is_float() || x.dtype.is_int()) {
        return Err(format!("Clip is not defined for {}", x.dtype).into());
    }
    for i in 1..3 {
        if let Some(b) = inputs.get(i).copied().flatten() {
            clip_bound_check(i, b.dtype, b.shape, x.dtype)?;
        }
    }
    Ok(vec![(x.dtype, x.shape.to_vec())])
}

/// Shape rule of a variadic op (`None`: Mean): inputs of one type, broadcast together.
pub fn infer_variadic(bop: Option<BinaryOp>, inputs: &[Option<TypeInfo>]) -> Result<Inferred, InferError> {
    let x = info(inputs, 0)?;
    variadic_dtype(bop, x.dtype)?;
    for i in 1..inputs.len() {
        let t = info(inputs, i)?;
        if t.dtype != x.dtype {
            return Err(format!("input {i} is {}, input 0 is {}", t.dtype, x.dtype).into());
        }
    }
    let shape = broadcast_shapes(inputs.iter().flatten().map(|t| t.shape))?;
    Ok(vec![(x.dtype, shape)])
}

/// Shape rule of Where(cond, x, y).
pub fn infer_where(inputs: &[Option<TypeInfo>]) -> Result<Inferred, InferError> {
    let (c, x, y) = (info(inputs, 0)?, info(inputs, 1)?, info(inputs, 2)?);
    where_check(c.dtype, x.dtype, y.dtype)?;
    Ok(vec![(x.dtype, broadcast_shapes([c.shape, x.shape, y.shape])?)])
}

/// Shape rule of Cast: the input's shape in type `to`.
pub fn infer_cast(to: DType, inputs: &[Option<TypeInfo>]) -> Result<Inferred, InferError> {
    Ok(vec![(to, info(inputs, 0)?.shape.to_vec())])
}

/// Arity of the binary ops.
pub const BINARY_ARITY: Arity = (2, 2, 1, 1);
/// Arity of the unary ops and Cast.
pub const UNARY_ARITY: Arity = (1, 1, 1, 1);
/// Arity of Clip with bound inputs: x, min?, max?.
pub const CLIP_DYNAMIC_ARITY: Arity = (1, 3, 1, 1);
/// Arity of the variadic ops: one or more inputs.
pub const VARIADIC_ARITY: Arity = (1, usize::MAX, 1, 1);
/// Arity of Where: cond, x, y.
pub const WHERE_ARITY: Arity = (3, 3, 1, 1);
