//! Normalizations: batch, instance, layer, group, LRN, Lp, RMS and mean-variance.

use super::{aux, axis_of, base, dtype_attr, pass, scalar_const, single, trimmed, MapFn};
use crate::import::onnx::graph::{Cx, NodeIn};
use crate::ir::{BinaryOp, Op, ReduceOp, Tensor, UnaryOp};
use crate::Result;

/// The ops of this family.
pub(super) const OPS: &[(&str, MapFn)] = &[
    ("BatchNormalization", batch_norm),
    ("GroupNormalization", group_norm),
    ("InstanceNormalization", |cx, n| pass(cx, n, Op::InstanceNorm { epsilon: n.attrs.float_or("epsilon", 1e-5)? })),
    ("LayerNormalization", layer_norm),
    ("LpNormalization", lp_norm),
    ("LRN", lrn),
    ("MeanVarianceNormalization", mvn),
    ("RMSNormalization", rms_norm),
];

/// BatchNormalization at inference (no training-mode outputs).
fn batch_norm(cx: &mut Cx, n: &NodeIn) -> Result<()> {
    let a = &n.attrs;
    a.ignore(&["momentum", "is_test"]);
    if !a.bool_or("spatial", true)? {
        return Err(a.unsupported("spatial", "= 0 (per-activation statistics) is not supported"));
    }
    if a.bool_or("training_mode", false)? {
        return Err(a.unsupported("training_mode", "= 1 is not supported (inference only)"));
    }
    if n.out_used.iter().skip(1).any(|&u| u) {
        return Err(n.unsupported("the running/saved mean and variance outputs exist only in training mode, which is not supported"));
    }
    let epsilon = a.float_or("epsilon", 1e-5)?;
    cx.emit(
        n.name.clone(),
        Op::BatchNorm { epsilon },
        trimmed(&n.inputs),
        vec![n.outputs.first().copied().ok_or_else(|| n.invalid("has no outputs"))?],
    )
}

fn layer_norm(cx: &mut Cx, n: &NodeIn) -> Result<()> {
    let a = &n.attrs;
    a.ignore(&["stash_type"]);
    let x = n.req(0)?;
    n.req(1)?;
    let axis = axis_of(cx, n, x, a.int_or("axis", -1)?, "axis", false)?;
    let outs = n.outs(1, 3)?;
    cx.emit(n.name.clone(), Op::LayerNorm { axis, epsilon: a.float_or("epsilon", 1e-5)? }, trimmed(&n.inputs), outs)
}

fn lrn(cx: &mut Cx, n: &NodeIn) -> Result<()> {
    let a = &n.attrs;
    let size = a.usize_or("size", 0)?;
    if size == 0 {
        return Err(n.invalid("attribute 'size' is required and must be positive"));
    }
    let op = Op::Lrn { alpha: a.float_or("alpha", 1e-4)?, beta: a.float_or("beta", 0.75)?, bias: a.float_or("bias", 1.0)?, size };
    single(cx, n, op, vec![Some(n.req(0)?)])
}

fn lp_norm(cx: &mut Cx, n: &NodeIn) -> Result<()> {
    let a = &n.attrs;
    let x = n.req(0)?;
    let axis = axis_of(cx, n, x, a.int_or("axis", -1)?, "axis", false)?;
    let p = match a.int_or("p", 2)? {
        1 => 1,
        2 => 2,
        p => return Err(a.unsupported("p", format!("= {p}: only 1 and 2 are supported"))),
    };
    single(cx, n, Op::LpNorm { axis, p }, vec![Some(x)])
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
