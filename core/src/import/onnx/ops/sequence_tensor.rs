//! The sequence ops that convert between a sequence (resolved at import time) and a tensor:
//! ConcatFromSequence (Concat, with an Unsqueeze of each element for `new_axis`) and SplitToSequence (Split,
//! with a Squeeze of each part when `keepdims` is 0 and the parts have size 1).

use super::sequence::{each, seq_in, seq_out};
use super::{aux_name, axis_of, single};
use crate::import::onnx::graph::{Cx, NodeIn};
use crate::import::onnx::seq::{check_len, Seq};
use crate::ir::{Op, ValueId};
use crate::Result;

pub(super) fn concat_from_sequence(cx: &mut Cx, n: &NodeIn) -> Result<()> {
    let s = seq_in(cx, n, 0)?;
    let axis = n.attrs.int("axis")?.ok_or_else(|| n.invalid("attribute 'axis' is required"))?;
    if let Some(stack) = s.stack {
        let new_axis = match n.attrs.int_or("new_axis", 0)? {
            k @ (0 | 1) => k == 1,
            k => return Err(n.attrs.invalid("new_axis", format!("is {k}; it must be 0 or 1"))),
        };
        return super::sequence_stacked::concat(cx, n, stack, axis, new_axis);
    }
    let first = *s.elems.first().ok_or_else(|| n.invalid("the sequence is empty; there is nothing to concatenate"))?;
    let (axis, parts) = match n.attrs.int_or("new_axis", 0)? {
        0 => (axis_of(cx, n, first, axis, "axis", false)?, s.elems),
        1 => {
            let axis = new_axis_of(cx, n, first, axis)?;
            (axis, each(cx, n, "unsqueeze", Op::Unsqueeze { axes: Some(vec![axis as i64]) }, &s.elems)?)
        }
        k => return Err(n.attrs.invalid("new_axis", format!("is {k}; it must be 0 or 1"))),
    };
    single(cx, n, Op::Concat { axis }, parts.into_iter().map(Some).collect())
}

/// The position of the new axis for `new_axis` = 1: accepted in `[-r - 1, r]` for elements of rank `r`.
fn new_axis_of(cx: &Cx, n: &NodeIn, v: ValueId, axis: i64) -> Result<usize> {
    let r = cx.need_rank(n, v, "ConcatFromSequence with new_axis")? as i64;
    if axis < -r - 1 || axis > r {
        return Err(n.invalid(format!("axis {axis} is out of range for new_axis over tensors of rank {r} (accepted: [{}, {r}])", -r - 1)));
    }
    Ok(if axis < 0 { axis + r + 1 } else { axis } as usize)
}

pub(super) fn split_to_sequence(cx: &mut Cx, n: &NodeIn) -> Result<()> {
    let x = n.req(0)?;
    let axis = axis_of(cx, n, x, n.attrs.int_or("axis", 0)?, "axis", false)?;
    let keepdims = n.attrs.int_or("keepdims", 1)?;
    let dim = match cx.shape(x) {
        Some(s) => s[axis],
        None => return Err(n.unsupported("SplitToSequence needs the static shape of its input; it is only known at run time")),
    };
    let sizes = split_sizes(cx, n, dim)?;
    check_len(n, sizes.len())?;
    let squeeze = keepdims == 0 && unit_parts(cx, n);
    let mut elems = split_parts(cx, n, x, axis, sizes)?;
    if squeeze {
        elems = each(cx, n, "squeeze", Op::Squeeze { axes: Some(vec![axis as i64]) }, &elems)?;
    }
    seq_out(cx, n, Seq::of(elems, cx.dtype(x)))
}

/// Whether `keepdims` = 0 applies: without `split` (parts of size 1), and, as onnxruntime does (what
/// torch.onnx.export writes for `torch.unbind`), with a scalar `split` of 1. The spec and onnx's reference
/// ignore `keepdims` whenever `split` is given; onnxruntime fails on another scalar.
fn unit_parts(cx: &Cx, n: &NodeIn) -> bool {
    match n.opt(1) {
        None => true,
        Some(v) => cx.constant(v).is_some_and(|t| t.shape.is_empty() && t.to_i64_vec() == [1]),
    }
}

/// The part sizes along an axis of size `dim`: ones without `split`, chunks of a scalar `split` (the last one
/// smaller), or the sizes of a 1-D `split` (summing to `dim`).
fn split_sizes(cx: &Cx, n: &NodeIn, dim: usize) -> Result<Vec<usize>> {
    let Some(v) = n.opt(1) else { return Ok(vec![1; dim]) };
    let t = cx.constant(v).ok_or_else(|| n.unsupported("the split sizes are computed at run time; only constant sizes are supported"))?;
    let vals = t.to_i64_vec();
    if vals.iter().any(|&s| s <= 0) {
        return Err(n.invalid(format!("split {vals:?} must contain only positive numbers")));
    }
    let sizes: Vec<usize> = vals.iter().map(|&s| s as usize).collect();
    if t.shape.is_empty() {
        let c = sizes[0];
        return Ok((0..dim.div_ceil(c)).map(|i| c.min(dim - i * c)).collect());
    }
    if sizes.iter().sum::<usize>() != dim {
        return Err(n.invalid(format!("split {vals:?} does not sum to the size {dim} of the split axis")));
    }
    Ok(sizes)
}

/// `x` split along `axis` into parts of `sizes` (no node for no parts).
fn split_parts(cx: &mut Cx, n: &NodeIn, x: ValueId, axis: usize, sizes: Vec<usize>) -> Result<Vec<ValueId>> {
    if sizes.is_empty() {
        return Ok(Vec::new());
    }
    let b = super::base(cx, n);
    let outs: Vec<ValueId> = (0..sizes.len()).map(|i| cx.tmp(&format!("{b}:part{i}"))).collect();
    let op = Op::Split { axis, num_outputs: sizes.len(), split: Some(sizes) };
    cx.emit(aux_name(n, "split"), op, vec![Some(x)], outs.clone())?;
    Ok(outs)
}
