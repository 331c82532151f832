//! Elementwise ops: binary ops with numpy broadcasting, unary functions and activations, Clip, Where, Cast,
//! variadic Sum/Max/Min/Mean, Identity.

use tpu_sdk_core::ir::{Activation, BinaryOp, DType, Node, UnaryOp};

use super::emit::{Cx, V};
use crate::error::Result;

/// Identity: the input itself.
pub(super) fn identity(cx: &mut Cx, node: &Node) -> Result<V> {
    cx.input(node, 0)
}

/// Cast to `to`.
pub(super) fn cast(cx: &mut Cx, node: &Node, to: DType) -> Result<V> {
    let x = cx.input(node, 0)?;
    Ok(cx.convert(&x, to))
}

/// A unary elementwise function.
pub(super) fn unary_op(cx: &mut Cx, node: &Node, u: UnaryOp) -> Result<V> {
    let x = cx.input(node, 0)?;
    unary(cx, node, u, &x)
}

/// A broadcasting binary op with its fused activation.
pub(super) fn binary_op(cx: &mut Cx, node: &Node, b: BinaryOp, act: Option<Activation>) -> Result<V> {
    let (_, oshape) = cx.out(node, 0);
    let x = cx.input(node, 0)?;
    let y = cx.input(node, 1)?;
    let r = binary(cx, node, b, &x, &y, &oshape)?;
    Ok(cx.activation(r, act))
}

/// `op` folded over all inputs (Sum, Max, Min of N inputs), broadcast to the output shape.
pub(super) fn variadic(cx: &mut Cx, node: &Node, b: BinaryOp) -> Result<V> {
    let (_, oshape) = cx.out(node, 0);
    fold(cx, node, b, &oshape)
}

/// Mean of all inputs.
pub(super) fn variadic_mean(cx: &mut Cx, node: &Node) -> Result<V> {
    let (_, oshape) = cx.out(node, 0);
    let acc = fold(cx, node, BinaryOp::Add, &oshape)?;
    Ok(cx.binary_scalar("divide", &acc, node.inputs.len() as f64))
}

/// The inputs of `node` combined left to right with `b`, broadcast to `oshape`.
fn fold(cx: &mut Cx, node: &Node, b: BinaryOp, oshape: &[usize]) -> Result<V> {
    let first = cx.input(node, 0)?;
    let mut acc = cx.broadcast_to(&first, oshape)?;
    for i in 1..node.inputs.len() {
        let x = cx.input(node, i)?;
        acc = binary(cx, node, b, &acc, &x, oshape)?;
    }
    Ok(acc)
}

/// Where(cond, x, y).
pub(super) fn where_(cx: &mut Cx, node: &Node) -> Result<V> {
    let (_, oshape) = cx.out(node, 0);
    let c = cx.input(node, 0)?;
    let x = cx.input(node, 1)?;
    let y = cx.input(node, 2)?;
    if x.dtype != y.dtype || c.dtype != DType::Bool {
        return Err(cx.unsupported(node, "Where needs a bool condition and two values of one dtype"));
    }
    let c = cx.broadcast_to(&c, &oshape)?;
    let x = cx.broadcast_to(&x, &oshape)?;
    let y = cx.broadcast_to(&y, &oshape)?;
    Ok(cx.select(&c, &x, &y))
}

/// Clip with bounds given as (optional) inputs.
pub(super) fn clip_dynamic(cx: &mut Cx, node: &Node) -> Result<V> {
    let mut x = cx.input(node, 0)?;
    for (i, op) in [(1, "maximum"), (2, "minimum")] {
        if let Some(bound) = cx.opt_input(node, i)? {
            let bound = cx.convert(&bound, x.dtype);
            let bound = cx.broadcast_to(&bound, &x.shape.clone())?;
            x = cx.binary(op, &x, &bound);
        }
    }
    Ok(x)
}

/// `a op b` with both operands broadcast to `shape`.
fn binary(cx: &mut Cx, node: &Node, op: BinaryOp, a: &V, b: &V, shape: &[usize]) -> Result<V> {
    let b = if matches!(op, BinaryOp::Pow | BinaryOp::PRelu) { cx.convert(b, a.dtype) } else { b.clone() };
    if a.dtype != b.dtype {
        return Err(cx.unsupported(node, format!("operands have different dtypes ({} and {})", a.dtype, b.dtype)));
    }
    let x = cx.broadcast_to(a, shape)?;
    let y = cx.broadcast_to(&b, shape)?;
    use BinaryOp::*;
    let name = match op {
        Add => "add",
        Sub => "subtract",
        Mul => "multiply",
        Div => "divide",
        Pow => "power",
        Max => "maximum",
        Min => "minimum",
        Fmod => "remainder",
        And | BitAnd => "and",
        Or | BitOr => "or",
        Xor | BitXor => "xor",
        Equal => return Ok(cx.compare("EQ", &x, &y)),
        Less => return Ok(cx.compare("LT", &x, &y)),
        LessOrEqual => return Ok(cx.compare("LE", &x, &y)),
        Greater => return Ok(cx.compare("GT", &x, &y)),
        GreaterOrEqual => return Ok(cx.compare("GE", &x, &y)),
        Mod => {
            // Remainder with the sign of the divisor: r = a rem b; if r != 0 and sign(r) != sign(b) then r + b.
            let r = cx.binary("remainder", &x, &y);
            let zero = cx.splat_like(0.0, &r);
            let nonzero = cx.compare("NE", &r, &zero);
            let r_neg = cx.compare("LT", &r, &zero);
            let y_neg = cx.compare("LT", &y, &zero);
            let differ = cx.binary("xor", &r_neg, &y_neg);
            let fix = cx.binary("and", &nonzero, &differ);
            let shifted = cx.add(&r, &y);
            return Ok(cx.select(&fix, &shifted, &r));
        }
        PRelu => {
            let zero = cx.splat_like(0.0, &x);
            let neg = cx.compare("LT", &x, &zero);
            let scaled = cx.mul(&x, &y);
            return Ok(cx.select(&neg, &scaled, &x));
        }
    };
    Ok(cx.binary(name, &x, &y))
}

/// `exp(x) - 1` computed accurately near 0.
fn expm1(cx: &mut Cx, x: &V) -> V {
    cx.unary("exponential_minus_one", x)
}

/// log(1 + exp(x)), stable for large |x|: max(x, 0) + log1p(exp(-|x|)).
fn softplus(cx: &mut Cx, x: &V) -> V {
    let pos = cx.relu(x);
    let ax = cx.unary("abs", x);
    let nax = cx.unary("negate", &ax);
    let e = cx.unary("exponential", &nax);
    let l = cx.unary("log_plus_one", &e);
    cx.add(&pos, &l)
}

fn unary(cx: &mut Cx, node: &Node, u: UnaryOp, x: &V) -> Result<V> {
    use UnaryOp::*;
    let float = x.dtype.is_float();
    let needs_float = !matches!(u, Neg | Abs | Sign | Relu | Not | BitNot | Clip { .. } | IsNaN | IsInf { .. });
    if needs_float && !float {
        return Err(cx.unsupported(node, format!("{u:?} on {} (needs a float type)", x.dtype)));
    }
    Ok(match u {
        Neg => cx.unary("negate", x),
        Abs => cx.unary("abs", x),
        Sqrt => cx.unary("sqrt", x),
        Rsqrt => cx.unary("rsqrt", x),
        Exp => cx.unary("exponential", x),
        Log => cx.unary("log", x),
        Reciprocal => {
            let one = cx.splat_like(1.0, x);
            cx.div(&one, x)
        }
        Floor => cx.unary("floor", x),
        Ceil => cx.unary("ceil", x),
        Round => cx.unary("round_nearest_even", x),
        Sign => cx.unary("sign", x),
        Relu => cx.relu(x),
        Sigmoid => cx.unary("logistic", x),
        Tanh => cx.unary("tanh", x),
        Sin => cx.unary("sine", x),
        Cos => cx.unary("cosine", x),
        Tan => cx.chlo_unary("tan", x),
        Asin => cx.chlo_unary("asin", x),
        Acos => cx.chlo_unary("acos", x),
        Atan => {
            let one = cx.splat_like(1.0, x);
            cx.binary("atan2", x, &one)
        }
        Sinh => cx.chlo_unary("sinh", x),
        Cosh => cx.chlo_unary("cosh", x),
        Asinh => cx.chlo_unary("asinh", x),
        Acosh => cx.chlo_unary("acosh", x),
        Atanh => cx.chlo_unary("atanh", x),
        Erf => cx.chlo_unary("erf", x),
        Not | BitNot => cx.unary("not", x),
        Softplus => softplus(cx, x),
        Softsign => {
            let ax = cx.unary("abs", x);
            let d = cx.binary_scalar("add", &ax, 1.0);
            cx.div(x, &d)
        }
        IsNaN => cx.compare("NE", x, x),
        IsInf { detect_positive, detect_negative } => {
            if !float {
                let f = cx.splat(0.0, DType::Bool, &x.shape.clone());
                return Ok(f);
            }
            let pinf = cx.splat_like(f64::INFINITY, x);
            let ninf = cx.splat_like(f64::NEG_INFINITY, x);
            let p = cx.compare("EQ", x, &pinf);
            let n = cx.compare("EQ", x, &ninf);
            match (detect_positive, detect_negative) {
                (true, true) => cx.binary("or", &p, &n),
                (true, false) => p,
                (false, true) => n,
                (false, false) => cx.splat(0.0, DType::Bool, &x.shape.clone()),
            }
        }
        LeakyRelu { alpha } => {
            let zero = cx.splat_like(0.0, x);
            let nonneg = cx.compare("GE", x, &zero);
            let scaled = cx.binary_scalar("multiply", x, alpha as f64);
            cx.select(&nonneg, x, &scaled)
        }
        Elu { alpha } => {
            let zero = cx.splat_like(0.0, x);
            let nonneg = cx.compare("GE", x, &zero);
            let e = expm1(cx, x);
            let e = cx.binary_scalar("multiply", &e, alpha as f64);
            cx.select(&nonneg, x, &e)
        }
        Selu { alpha, gamma } => {
            let zero = cx.splat_like(0.0, x);
            let pos = cx.compare("GT", x, &zero);
            let e = expm1(cx, x);
            let e = cx.binary_scalar("multiply", &e, alpha as f64);
            let s = cx.select(&pos, x, &e);
            cx.binary_scalar("multiply", &s, gamma as f64)
        }
        Celu { alpha } => {
            let pos = cx.relu(x);
            let xs = cx.binary_scalar("divide", x, alpha as f64);
            let e = expm1(cx, &xs);
            let e = cx.binary_scalar("multiply", &e, alpha as f64);
            let neg = cx.binary_scalar("minimum", &e, 0.0);
            cx.add(&pos, &neg)
        }
        ThresholdedRelu { alpha } => {
            let a = cx.splat_like(alpha as f64, x);
            let gt = cx.compare("GT", x, &a);
            let zero = cx.splat_like(0.0, x);
            cx.select(&gt, x, &zero)
        }
        HardSigmoid { alpha, beta } => {
            let s = cx.binary_scalar("multiply", x, alpha as f64);
            let s = cx.binary_scalar("add", &s, beta as f64);
            cx.clamp(&s, 0.0, 1.0)
        }
        HardSwish => {
            // ONNX: x * max(0, min(1, x / 6 + 0.5)), with alpha = 1/6 as an f32.
            let s = cx.binary_scalar("multiply", x, (1.0f32 / 6.0) as f64);
            let s = cx.binary_scalar("add", &s, 0.5);
            let s = cx.clamp(&s, 0.0, 1.0);
            cx.mul(x, &s)
        }
        Mish => {
            let sp = softplus(cx, x);
            let t = cx.unary("tanh", &sp);
            cx.mul(x, &t)
        }
        Gelu { tanh: false } => {
            let s = cx.binary_scalar("multiply", x, std::f64::consts::FRAC_1_SQRT_2);
            let e = cx.chlo_unary("erf", &s);
            let e = cx.binary_scalar("add", &e, 1.0);
            let h = cx.binary_scalar("multiply", x, 0.5);
            cx.mul(&h, &e)
        }
        Gelu { tanh: true } => {
            let x3 = cx.mul(x, x);
            let x3 = cx.mul(&x3, x);
            let inner = cx.binary_scalar("multiply", &x3, 0.044715);
            let inner = cx.add(x, &inner);
            let inner = cx.binary_scalar("multiply", &inner, (2.0 / std::f64::consts::PI).sqrt());
            let t = cx.unary("tanh", &inner);
            let t = cx.binary_scalar("add", &t, 1.0);
            let h = cx.binary_scalar("multiply", x, 0.5);
            cx.mul(&h, &t)
        }
        Clip { min, max } => cx.clamp(x, min as f64, max as f64),
    })
}
