//! Elementwise math (binary ops with their fused activations, comparisons and logic, floor division and
//! modulo, unary ops, squares) and reductions.

use super::{OpIn, ImportFn};
use crate::format::tflite::schema::{self, activation, builtin_operator as bo};
use crate::import::tflite::importer::{Fused, Importer};
use crate::ir::{BinaryOp, DType, Op, ReduceOp, UnaryOp, ValueId};
use crate::Result;

/// The ops of this family.
pub(super) const OPS: &[(i32, ImportFn)] = &[
    (bo::ADD, arithmetic), (bo::SUB, arithmetic), (bo::MUL, arithmetic), (bo::DIV, arithmetic),
    (bo::MAXIMUM, |imp, o| binary(imp, o, BinaryOp::Max)),
    (bo::MINIMUM, |imp, o| binary(imp, o, BinaryOp::Min)),
    (bo::POW, |imp, o| binary(imp, o, BinaryOp::Pow)),
    (bo::LESS, |imp, o| binary(imp, o, BinaryOp::Less)),
    (bo::LESS_EQUAL, |imp, o| binary(imp, o, BinaryOp::LessOrEqual)),
    (bo::GREATER, |imp, o| binary(imp, o, BinaryOp::Greater)),
    (bo::GREATER_EQUAL, |imp, o| binary(imp, o, BinaryOp::GreaterOrEqual)),
    (bo::EQUAL, |imp, o| binary(imp, o, BinaryOp::Equal)),
    (bo::PRELU, |imp, o| binary(imp, o, BinaryOp::PRelu)),
    (bo::NOT_EQUAL, not_equal),
    (bo::LOGICAL_AND, |imp, o| binary(imp, o, BinaryOp::And)),
    (bo::LOGICAL_OR, |imp, o| binary(imp, o, BinaryOp::Or)),
    (bo::LOGICAL_NOT, |imp, o| unary(imp, o, UnaryOp::Not)),
    (bo::FLOOR_MOD, |imp, o| binary(imp, o, BinaryOp::Mod)),
    (bo::FLOOR_DIV, floor_div),
    (bo::ADD_N, add_n),
    (bo::ROUND, |imp, o| unary(imp, o, UnaryOp::Round)),
    (bo::SIGN, |imp, o| unary(imp, o, UnaryOp::Sign)),
    (bo::SQUARED_DIFFERENCE, squared_difference),
    (bo::SQUARE, square),
    (bo::LOGISTIC, |imp, o| unary(imp, o, UnaryOp::Sigmoid)),
    (bo::TANH, |imp, o| unary(imp, o, UnaryOp::Tanh)),
    (bo::RELU, |imp, o| unary(imp, o, UnaryOp::Relu)),
    (bo::RELU6, |imp, o| unary(imp, o, UnaryOp::Clip { min: 0.0, max: 6.0 })),
    (bo::RELU_N1_TO_1, |imp, o| unary(imp, o, UnaryOp::Clip { min: -1.0, max: 1.0 })),
    (bo::HARD_SWISH, |imp, o| unary(imp, o, UnaryOp::HardSwish)),
    (bo::EXP, |imp, o| unary(imp, o, UnaryOp::Exp)),
    (bo::LOG, |imp, o| unary(imp, o, UnaryOp::Log)),
    (bo::SQRT, |imp, o| unary(imp, o, UnaryOp::Sqrt)),
    (bo::ABS, |imp, o| unary(imp, o, UnaryOp::Abs)),
    (bo::NEG, |imp, o| unary(imp, o, UnaryOp::Neg)),
    (bo::FLOOR, |imp, o| unary(imp, o, UnaryOp::Floor)),
    (bo::CEIL, |imp, o| unary(imp, o, UnaryOp::Ceil)),
    (bo::SIN, |imp, o| unary(imp, o, UnaryOp::Sin)),
    (bo::COS, |imp, o| unary(imp, o, UnaryOp::Cos)),
    (bo::ELU, |imp, o| unary(imp, o, UnaryOp::Elu { alpha: 1.0 })),
    (bo::LEAKY_RELU, leaky_relu),
    (bo::GELU, gelu),
    (bo::RSQRT, rsqrt),
    (bo::MEAN, |imp, o| reduce(imp, o, ReduceOp::Mean)),
    (bo::SUM, |imp, o| reduce(imp, o, ReduceOp::Sum)),
    (bo::REDUCE_MAX, |imp, o| reduce(imp, o, ReduceOp::Max)),
    (bo::REDUCE_MIN, |imp, o| reduce(imp, o, ReduceOp::Min)),
    (bo::REDUCE_PROD, |imp, o| reduce(imp, o, ReduceOp::Prod)),
    (bo::ARG_MAX, arg_reduce), (bo::ARG_MIN, arg_reduce),
    (bo::CAST, cast),
];

/// ADD, SUB, MUL and DIV, with their fused activation.
fn arithmetic(imp: &mut Importer, o: &OpIn) -> Result<ValueId> {
    let base = &o.base;
    let a = imp.value(imp.req(o, 0)?)?;
    let b = imp.value(imp.req(o, 1)?)?;
    let (bin, act) = match o.code {
        bo::ADD => (BinaryOp::Add, o.op.options::<schema::AddOptions>().map(|p| p.fused_activation_function())),
        bo::SUB => (BinaryOp::Sub, o.op.options::<schema::SubOptions>().map(|p| p.fused_activation_function())),
        bo::MUL => (BinaryOp::Mul, o.op.options::<schema::MulOptions>().map(|p| p.fused_activation_function())),
        _ => (BinaryOp::Div, o.op.options::<schema::DivOptions>().map(|p| p.fused_activation_function())),
    };
    let fused = imp.fused(act.unwrap_or(activation::NONE))?;
    let y = imp.op1(Op::Binary(bin, None), &[a, b], if fused == Fused::None { base.clone() } else { format!("{base}/op") })?;
    imp.apply_fused(y, fused, base.clone())
}

/// A binary op without options.
fn binary(imp: &mut Importer, o: &OpIn, bin: BinaryOp) -> Result<ValueId> {
    let a = imp.value(imp.req(o, 0)?)?;
    let b = imp.value(imp.req(o, 1)?)?;
    imp.op1(Op::Binary(bin, None), &[a, b], o.base.clone())
}
fn not_equal(imp: &mut Importer, o: &OpIn) -> Result<ValueId> {
    let base = &o.base;
    let a = imp.value(imp.req(o, 0)?)?;
    let b = imp.value(imp.req(o, 1)?)?;
    let eq = imp.op1(Op::Binary(BinaryOp::Equal, None), &[a, b], format!("{base}/equal"))?;
    imp.op1(Op::Unary(UnaryOp::Not), &[eq], base.clone())
}

/// FLOOR_DIV: floor(a / b) for floats; for integers (a - floor_mod(a, b)) / b, an exact division.
fn floor_div(imp: &mut Importer, o: &OpIn) -> Result<ValueId> {
    let base = &o.base;
    let a = imp.value(imp.req(o, 0)?)?;
    let b = imp.value(imp.req(o, 1)?)?;
    if imp.dtype(a).is_float() {
        let q = imp.op1(Op::Binary(BinaryOp::Div, None), &[a, b], format!("{base}/div"))?;
        return imp.op1(Op::Unary(UnaryOp::Floor), &[q], base.clone());
    }
    let m = imp.op1(Op::Binary(BinaryOp::Mod, None), &[a, b], format!("{base}/mod"))?;
    let d = imp.op1(Op::Binary(BinaryOp::Sub, None), &[a, m], format!("{base}/multiple"))?;
    imp.op1(Op::Binary(BinaryOp::Div, None), &[d, b], base.clone())
}

/// ADD_N: the sum of all inputs.
fn add_n(imp: &mut Importer, o: &OpIn) -> Result<ValueId> {
    let vals = o.ins.iter().filter(|&&t| t >= 0).map(|&t| imp.value(t)).collect::<Result<Vec<_>>>()?;
    if vals.is_empty() {
        return Err(imp.invalid("ADD_N has no inputs"));
    }
    imp.op1(Op::Variadic(BinaryOp::Add), &vals, o.base.clone())
}

fn squared_difference(imp: &mut Importer, o: &OpIn) -> Result<ValueId> {
    let base = &o.base;
    let a = imp.value(imp.req(o, 0)?)?;
    let b = imp.value(imp.req(o, 1)?)?;
    let d = imp.op1(Op::Binary(BinaryOp::Sub, None), &[a, b], format!("{base}/diff"))?;
    imp.op1(Op::Binary(BinaryOp::Mul, None), &[d, d], base.clone())
}
fn square(imp: &mut Importer, o: &OpIn) -> Result<ValueId> {
    let base = &o.base;
    let a = imp.value(imp.req(o, 0)?)?;
    imp.op1(Op::Binary(BinaryOp::Mul, None), &[a, a], base.clone())
}

/// A unary op on input 0.
fn unary(imp: &mut Importer, o: &OpIn, u: UnaryOp) -> Result<ValueId> {
    let x = imp.value(imp.req(o, 0)?)?;
    imp.op1(Op::Unary(u), &[x], o.base.clone())
}

fn leaky_relu(imp: &mut Importer, o: &OpIn) -> Result<ValueId> {
    let x = imp.value(imp.req(o, 0)?)?;
    let u = UnaryOp::LeakyRelu { alpha: opts!(imp, o, schema::LeakyReluOptions).alpha() };
    imp.op1(Op::Unary(u), &[x], o.base.clone())
}

fn gelu(imp: &mut Importer, o: &OpIn) -> Result<ValueId> {
    let x = imp.value(imp.req(o, 0)?)?;
    let u = UnaryOp::Gelu { tanh: o.op.options::<schema::GeluOptions>().map(|p| p.approximate()).unwrap_or(false) };
    imp.op1(Op::Unary(u), &[x], o.base.clone())
}
fn rsqrt(imp: &mut Importer, o: &OpIn) -> Result<ValueId> {
    let base = &o.base;
    let x = imp.value(imp.req(o, 0)?)?;
    imp.op1(Op::Unary(UnaryOp::Rsqrt), &[x], base.clone())
}

/// MEAN, SUM and REDUCE_*: constant axes, keep_dims from the options.
fn reduce(imp: &mut Importer, o: &OpIn, rop: ReduceOp) -> Result<ValueId> {
    let base = &o.base;
    let x = imp.value(imp.req(o, 0)?)?;
    let rank = imp.shape(x).len();
    let mut axes = Vec::new();
    for a in imp.const_ints(imp.req(o, 1)?, "the reduction axes")? {
        axes.push(imp.axis(a, rank)?);
    }
    axes.sort_unstable();
    axes.dedup();
    let keepdims = o.op.options::<schema::ReducerOptions>().map(|p| p.keep_dims()).unwrap_or(false);
    imp.op1(Op::Reduce { op: rop, axes: Some(axes), keepdims, noop_with_empty_axes: true }, &[x], base.clone())
}

/// ARG_MAX and ARG_MIN: a constant axis; the i64 indices cast to the declared output type.
fn arg_reduce(imp: &mut Importer, o: &OpIn) -> Result<ValueId> {
    let base = &o.base;
    let x = imp.value(imp.req(o, 0)?)?;
    let a = imp.const_ints(imp.req(o, 1)?, "the axis")?;
    let a = *a.first().ok_or_else(|| imp.invalid("the axis is empty"))?;
    let axis = imp.axis(a, imp.shape(x).len())?;
    let (to, _) = imp.declared(o.outs[0])?;
    let rop = Op::ArgReduce { max: o.code == bo::ARG_MAX, axis, keepdims: false, select_last_index: false };
    if to == DType::I64 {
        imp.op1(rop, &[x], base.clone())
    } else {
        let y = imp.op1(rop, &[x], format!("{base}/i64"))?;
        imp.op1(Op::Cast { to }, &[y], base.clone())
    }
}

/// CAST to the declared output type.
fn cast(imp: &mut Importer, o: &OpIn) -> Result<ValueId> {
    let base = &o.base;
    let x = imp.value(imp.req(o, 0)?)?;
    let (to, _) = imp.declared(o.outs[0])?;
    imp.op1(Op::Cast { to }, &[x], base.clone())
}
