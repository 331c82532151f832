//! Activations: the unary ones (with their attributes and per-opset defaults), Swish/SwiGLU and Shrink as
//! small graphs, and the softmax family.

use super::math::unary;
use super::{aux, aux_name, axis_of, base, scalar_const, single, MapFn};
use crate::import::onnx::graph::{Cx, NodeIn};
use crate::ir::{BinaryOp, Op, UnaryOp};
use crate::Result;

/// The ops of this family.
pub(super) const OPS: &[(&str, MapFn)] = &[
    ("HardSwish", |cx, n| unary(cx, n, UnaryOp::HardSwish)),
    ("Mish", |cx, n| unary(cx, n, UnaryOp::Mish)),
    ("Relu", |cx, n| unary(cx, n, UnaryOp::Relu)),
    ("Sigmoid", |cx, n| unary(cx, n, UnaryOp::Sigmoid)),
    ("Softplus", |cx, n| unary(cx, n, UnaryOp::Softplus)),
    ("Softsign", |cx, n| unary(cx, n, UnaryOp::Softsign)),
    ("Tanh", |cx, n| unary(cx, n, UnaryOp::Tanh)),
    ("Celu", |cx, n| unary(cx, n, UnaryOp::Celu { alpha: n.attrs.float_or("alpha", 1.0)? })),
    ("Elu", |cx, n| unary(cx, n, UnaryOp::Elu { alpha: n.attrs.float_or("alpha", 1.0)? })),
    ("Gelu", gelu),
    ("HardSigmoid", |cx, n| {
        let a = &n.attrs;
        unary(cx, n, UnaryOp::HardSigmoid { alpha: a.float_or("alpha", 0.2)?, beta: a.float_or("beta", 0.5)? })
    }),
    ("LeakyRelu", |cx, n| unary(cx, n, UnaryOp::LeakyRelu { alpha: n.attrs.float_or("alpha", 0.01)? })),
    ("Selu", selu),
    ("ThresholdedRelu", |cx, n| unary(cx, n, UnaryOp::ThresholdedRelu { alpha: n.attrs.float_or("alpha", 1.0)? })),
    ("Shrink", shrink),
    ("SwiGLU", swish), ("Swish", swish),
    ("Hardmax", |cx, n| softmax_like(cx, n, |axis| Op::Hardmax { axis })),
    ("LogSoftmax", |cx, n| softmax_like(cx, n, |axis| Op::LogSoftmax { axis })),
    ("Softmax", |cx, n| softmax_like(cx, n, |axis| Op::Softmax { axis })),
];

/// Selu, whose default constants were rounded before opset 6.
fn selu(cx: &mut Cx, n: &NodeIn) -> Result<()> {
    let a = &n.attrs;
    let (da, dg) = if n.opset < 6 { (1.6732, 1.0507) } else { (1.673_263_2, 1.050_701) };
    unary(cx, n, UnaryOp::Selu { alpha: a.float_or("alpha", da)?, gamma: a.float_or("gamma", dg)? })
}

fn gelu(cx: &mut Cx, n: &NodeIn) -> Result<()> {
    let a = &n.attrs;
    let tanh = match a.string_or("approximate", "none")?.as_str() {
        "none" => false,
        "tanh" => true,
        s => return Err(a.invalid("approximate", format!("has unknown value '{s}' (expected none or tanh)"))),
    };
    unary(cx, n, UnaryOp::Gelu { tanh })
}

/// Swish(x) = x * sigmoid(alpha * x); SwiGLU(a, b) = Swish(a) * b.
fn swish(cx: &mut Cx, n: &NodeIn) -> Result<()> {
    let x = n.req(0)?;
    let alpha = n.attrs.float_or("alpha", 1.0)?;
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

/// Shrink: y = x + bias if x < -lambd; x - bias if x > lambd; else 0.
fn shrink(cx: &mut Cx, n: &NodeIn) -> Result<()> {
    let a = &n.attrs;
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
