//! Indexing: gathers, scatters (TensorScatter included), NonZero and OneHot.

use super::{axis_of, choice, pass, single, MapFn};
use crate::import::onnx::graph::{Cx, NodeIn};
use crate::ir::{BinaryOp, Op};
use crate::Result;

/// The ops of this family.
pub(super) const OPS: &[(&str, MapFn)] = &[
    ("Gather", gather), ("GatherElements", gather),
    ("GatherND", |cx, n| pass(cx, n, Op::GatherNd { batch_dims: n.attrs.usize_or("batch_dims", 0)? })),
    ("Scatter", scatter_elements), ("ScatterElements", scatter_elements),
    ("ScatterND", |cx, n| {
        let reduction = scatter_reduction(n)?;
        pass(cx, n, Op::ScatterNd { reduction })
    }),
    ("TensorScatter", tensor_scatter),
    ("NonZero", |cx, n| pass(cx, n, Op::NonZero)),
    ("OneHot", |cx, n| pass(cx, n, Op::OneHot { axis: n.attrs.int_or("axis", -1)? })),
];

/// Gather and GatherElements.
fn gather(cx: &mut Cx, n: &NodeIn) -> Result<()> {
    let x = n.req(0)?;
    let axis = axis_of(cx, n, x, n.attrs.int_or("axis", 0)?, "axis", false)?;
    let op = if n.op_type == "Gather" { Op::Gather { axis } } else { Op::GatherElements { axis } };
    single(cx, n, op, vec![Some(x), Some(n.req(1)?)])
}

/// Scatter (the opset 9 name) and ScatterElements.
fn scatter_elements(cx: &mut Cx, n: &NodeIn) -> Result<()> {
    let x = n.req(0)?;
    let axis = axis_of(cx, n, x, n.attrs.int_or("axis", 0)?, "axis", false)?;
    let reduction = scatter_reduction(n)?;
    pass(cx, n, Op::ScatterElements { axis, reduction })
}

/// TensorScatter (opset 24): `axis` (default -2) and `mode` linear/circular.
fn tensor_scatter(cx: &mut Cx, n: &NodeIn) -> Result<()> {
    let cache = n.req(0)?;
    let axis = axis_of(cx, n, cache, n.attrs.int_or("axis", -2)?, "axis", false)?;
    let circular = choice(n, "mode", "linear", &[("linear", false), ("circular", true)])?;
    pass(cx, n, Op::TensorScatter { axis, circular })
}

fn scatter_reduction(n: &NodeIn) -> Result<Option<BinaryOp>> {
    use BinaryOp::*;
    choice(n, "reduction", "none", &[("none", None), ("add", Some(Add)), ("mul", Some(Mul)), ("max", Some(Max)), ("min", Some(Min))])
}
