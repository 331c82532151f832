//! Elementwise math (unary, binary with the legacy broadcasting, variadic, Where, Cast, Clip) and reductions
//! (Reduce*, ArgMax/ArgMin, CumSum, TopK).

use super::{axis_of, base, dtype_attr, input_or_attr, pass, single, trimmed, MapFn};
use crate::import::onnx::graph::{Cx, NodeIn};
use crate::import::onnx::tensor::elem_type_name;
use crate::ir::{BinaryOp, Op, ReduceOp, UnaryOp, ValueId};
use crate::Result;

/// The ops of this family.
pub(super) const OPS: &[(&str, MapFn)] = &[
    // unary ops without attributes
    ("Abs", |cx, n| unary(cx, n, UnaryOp::Abs)),
    ("Acos", |cx, n| unary(cx, n, UnaryOp::Acos)),
    ("Acosh", |cx, n| unary(cx, n, UnaryOp::Acosh)),
    ("Asin", |cx, n| unary(cx, n, UnaryOp::Asin)),
    ("Asinh", |cx, n| unary(cx, n, UnaryOp::Asinh)),
    ("Atan", |cx, n| unary(cx, n, UnaryOp::Atan)),
    ("Atanh", |cx, n| unary(cx, n, UnaryOp::Atanh)),
    ("BitwiseNot", |cx, n| unary(cx, n, UnaryOp::BitNot)),
    ("Ceil", |cx, n| unary(cx, n, UnaryOp::Ceil)),
    ("Cos", |cx, n| unary(cx, n, UnaryOp::Cos)),
    ("Cosh", |cx, n| unary(cx, n, UnaryOp::Cosh)),
    ("Erf", |cx, n| unary(cx, n, UnaryOp::Erf)),
    ("Exp", |cx, n| unary(cx, n, UnaryOp::Exp)),
    ("Floor", |cx, n| unary(cx, n, UnaryOp::Floor)),
    ("IsNaN", |cx, n| unary(cx, n, UnaryOp::IsNaN)),
    ("Log", |cx, n| unary(cx, n, UnaryOp::Log)),
    ("Neg", |cx, n| unary(cx, n, UnaryOp::Neg)),
    ("Not", |cx, n| unary(cx, n, UnaryOp::Not)),
    ("Reciprocal", |cx, n| unary(cx, n, UnaryOp::Reciprocal)),
    ("Round", |cx, n| unary(cx, n, UnaryOp::Round)),
    ("Sign", |cx, n| unary(cx, n, UnaryOp::Sign)),
    ("Sin", |cx, n| unary(cx, n, UnaryOp::Sin)),
    ("Sinh", |cx, n| unary(cx, n, UnaryOp::Sinh)),
    ("Sqrt", |cx, n| unary(cx, n, UnaryOp::Sqrt)),
    ("Tan", |cx, n| unary(cx, n, UnaryOp::Tan)),
    ("IsInf", is_inf),
    // binary ops; `true`: opsets before 7 had the legacy `broadcast`/`axis` attributes
    ("Add", |cx, n| binary(cx, n, BinaryOp::Add, true)),
    ("And", |cx, n| binary(cx, n, BinaryOp::And, true)),
    ("BitwiseAnd", |cx, n| binary(cx, n, BinaryOp::BitAnd, false)),
    ("BitwiseOr", |cx, n| binary(cx, n, BinaryOp::BitOr, false)),
    ("BitwiseXor", |cx, n| binary(cx, n, BinaryOp::BitXor, false)),
    ("Div", |cx, n| binary(cx, n, BinaryOp::Div, true)),
    ("Equal", |cx, n| binary(cx, n, BinaryOp::Equal, true)),
    ("Greater", |cx, n| binary(cx, n, BinaryOp::Greater, true)),
    ("GreaterOrEqual", |cx, n| binary(cx, n, BinaryOp::GreaterOrEqual, false)),
    ("Less", |cx, n| binary(cx, n, BinaryOp::Less, true)),
    ("LessOrEqual", |cx, n| binary(cx, n, BinaryOp::LessOrEqual, false)),
    ("Mul", |cx, n| binary(cx, n, BinaryOp::Mul, true)),
    ("Or", |cx, n| binary(cx, n, BinaryOp::Or, true)),
    ("Pow", |cx, n| binary(cx, n, BinaryOp::Pow, true)),
    ("PRelu", |cx, n| binary(cx, n, BinaryOp::PRelu, false)),
    ("Sub", |cx, n| binary(cx, n, BinaryOp::Sub, true)),
    ("Xor", |cx, n| binary(cx, n, BinaryOp::Xor, true)),
    ("Mod", modulo),
    // variadic and selection
    ("Max", variadic), ("Mean", variadic), ("Min", variadic), ("Sum", variadic),
    ("Where", |cx, n| pass(cx, n, Op::Where)),
    ("Clip", clip),
    // conversions
    ("Cast", cast),
    ("CastLike", cast_like),
    // reductions
    ("ReduceL1", |cx, n| reduce(cx, n, ReduceOp::L1)),
    ("ReduceL2", |cx, n| reduce(cx, n, ReduceOp::L2)),
    ("ReduceLogSum", |cx, n| reduce(cx, n, ReduceOp::LogSum)),
    ("ReduceLogSumExp", |cx, n| reduce(cx, n, ReduceOp::LogSumExp)),
    ("ReduceMax", |cx, n| reduce(cx, n, ReduceOp::Max)),
    ("ReduceMean", |cx, n| reduce(cx, n, ReduceOp::Mean)),
    ("ReduceMin", |cx, n| reduce(cx, n, ReduceOp::Min)),
    ("ReduceProd", |cx, n| reduce(cx, n, ReduceOp::Prod)),
    ("ReduceSum", |cx, n| reduce(cx, n, ReduceOp::Sum)),
    ("ReduceSumSquare", |cx, n| reduce(cx, n, ReduceOp::SumSquare)),
    ("ArgMax", arg_reduce), ("ArgMin", arg_reduce),
    ("CumSum", |cx, n| {
        let a = &n.attrs;
        pass(cx, n, Op::CumSum { exclusive: a.bool_or("exclusive", false)?, reverse: a.bool_or("reverse", false)? })
    }),
    ("TopK", top_k),
];

/// A unary op on input 0.
pub(super) fn unary(cx: &mut Cx, n: &NodeIn, u: UnaryOp) -> Result<()> {
    single(cx, n, Op::Unary(u), vec![Some(n.req(0)?)])
}

fn is_inf(cx: &mut Cx, n: &NodeIn) -> Result<()> {
    let a = &n.attrs;
    let u = UnaryOp::IsInf { detect_positive: a.bool_or("detect_positive", true)?, detect_negative: a.bool_or("detect_negative", true)? };
    unary(cx, n, u)
}

/// Binary ops, with opset < 7 `broadcast=1, axis=k` broadcasting (B aligned at axis k of A) turned into numpy
/// broadcasting by appending size-1 dims to B (`legacy`: the op had those attributes).
fn binary(cx: &mut Cx, n: &NodeIn, b: BinaryOp, legacy: bool) -> Result<()> {
    let x = n.req(0)?;
    let mut y = n.req(1)?;
    if legacy && n.opset < 7 {
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
                cx.emit(super::aux_name(n, "unsqueeze"), Op::Unsqueeze { axes: Some(axes) }, vec![Some(y)], vec![y2])?;
                y = y2;
            }
        }
    }
    single(cx, n, Op::Binary(b, None), vec![Some(x), Some(y)])
}

fn modulo(cx: &mut Cx, n: &NodeIn) -> Result<()> {
    let op = if n.attrs.bool_or("fmod", false)? { BinaryOp::Fmod } else { BinaryOp::Mod };
    single(cx, n, Op::Binary(op, None), vec![Some(n.req(0)?), Some(n.req(1)?)])
}

/// Sum, Max, Min (a binary op for two inputs) and Mean.
fn variadic(cx: &mut Cx, n: &NodeIn) -> Result<()> {
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

/// The element type code for an opset-1 Cast `to` string ("FLOAT", ...).
fn elem_type_from_name(s: &str) -> Option<i64> {
    let up = s.to_ascii_uppercase();
    (0..=28).find(|&c| elem_type_name(c) == up).map(i64::from)
}

fn cast(cx: &mut Cx, n: &NodeIn) -> Result<()> {
    let a = &n.attrs;
    let code = match a.get("to").map(crate::import::onnx::attrs::kind) {
        Some(crate::import::onnx::proto::attr_type::STRING) => {
            let s = a.string("to")?.unwrap_or_default();
            elem_type_from_name(&s).ok_or_else(|| a.invalid("to", format!("has unknown type name '{s}'")))?
        }
        _ => a.int("to")?.ok_or_else(|| n.invalid("attribute 'to' is required"))?,
    };
    a.ignore(&["saturate", "round_mode"]);
    let to = dtype_attr(n, "to", code)?;
    single(cx, n, Op::Cast { to }, vec![Some(n.req(0)?)])
}

fn cast_like(cx: &mut Cx, n: &NodeIn) -> Result<()> {
    n.attrs.ignore(&["saturate", "round_mode"]);
    let to = cx.need_dtype(n, n.req(1)?, "CastLike")?;
    single(cx, n, Op::Cast { to }, vec![Some(n.req(0)?)])
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

/// ArgMax and ArgMin.
fn arg_reduce(cx: &mut Cx, n: &NodeIn) -> Result<()> {
    let a = &n.attrs;
    let x = n.req(0)?;
    let op = Op::ArgReduce {
        max: n.op_type == "ArgMax",
        axis: axis_of(cx, n, x, a.int_or("axis", 0)?, "axis", false)?,
        keepdims: a.bool_or("keepdims", true)?,
        select_last_index: a.bool_or("select_last_index", false)?,
    };
    single(cx, n, op, vec![Some(x)])
}

/// TopK: `k` from an attribute before opset 10, from input 1 after.
fn top_k(cx: &mut Cx, n: &NodeIn) -> Result<()> {
    let a = &n.attrs;
    let x = n.req(0)?;
    let k = input_or_attr(cx, n, 10, "k", |a| Ok(a.int("k")?.map(|k| vec![k])))?;
    let op = Op::TopK {
        axis: axis_of(cx, n, x, a.int_or("axis", -1)?, "axis", false)?,
        largest: a.bool_or("largest", true)?,
        sorted: a.bool_or("sorted", true)?,
    };
    let outs = n.outs(2, 2)?;
    cx.emit(n.name.clone(), op, vec![Some(x), Some(k)], outs)
}
