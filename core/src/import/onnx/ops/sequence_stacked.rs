//! The sequence ops on a sequence held as one stacked tensor ([`Seq::stack`]: a Loop's appended elements,
//! `sequence_loop.rs`), whose slices along axis 0 are the elements and whose length is known only at run time:
//! - SequenceAt: a Gather on axis 0; the position may be computed at run time, a negative one counts from the
//!   back, and one out of range is a run-time error (as in onnxruntime; an import error when the position and
//!   the Loop's trip count are both constants);
//! - SequenceLength: the stack's dim 0 (Shape, Squeeze);
//! - ConcatFromSequence with `new_axis` 1: the stack with its axis 0 moved to `axis` (a Transpose); with
//!   `new_axis` 0: that Transpose to just before `axis`, then a Reshape merging the two axes;
//! - SequenceInsert without a position (an append): a Concat of the stack and the new element.
//!
//! Shape arithmetic is emitted as Shape/Mul/Concat nodes, which fold to constants when the stack's shape is
//! static. A stack of no elements (a Loop that ran no iteration) concatenates into a tensor with 0 along the
//! axis, where onnxruntime fails (its ConcatFromSequence refuses an empty sequence).

use super::{aux, scalar_const, single};
use crate::import::onnx::graph::{Cx, NodeIn};
use crate::import::onnx::seq::Seq;
use crate::ir::ops::BinaryOp;
use crate::ir::{DType, Op, ValueId};
use crate::Result;

/// The value a Loop/If/Scan body (of node `n`) captures for the outer value `v`: `v` itself when it is not a
/// sequence, else the tensor stacking its elements (a Concat of them unsqueezed, or the stack a Loop built),
/// recorded as a sequence held as that stack, so the body's SequenceAt (with the iteration number, say) and
/// SequenceLength read it. The elements must share one static shape.
pub(super) fn captured(cx: &mut Cx, n: &NodeIn, v: ValueId) -> Result<ValueId> {
    let Some(s) = cx.seq(v).cloned() else { return Ok(v) };
    let name = cx.g.value(v).name.clone();
    let refuse = |why: &str| {
        n.unsupported(format!(
            "its subgraph uses the tensor sequence '{name}', {why}; a sequence goes into a Loop/If/Scan body as the stack of its elements, which needs at least one element and one static shape for all"
        ))
    };
    let stack = match s.stack {
        Some(stack) => stack,
        None => {
            let first = *s.elems.first().ok_or_else(|| refuse("which is empty"))?;
            let shape = cx.shape(first).map(<[usize]>::to_vec);
            if shape.is_none() || s.elems.iter().any(|&e| cx.shape(e) != shape.as_deref()) {
                return Err(refuse("whose elements differ in shape or have shapes known only at run time"));
            }
            let mut parts = Vec::with_capacity(s.elems.len());
            for (k, &e) in s.elems.iter().enumerate() {
                parts.push(Some(aux(cx, n, &format!("{name}:element{k}"), Op::Unsqueeze { axes: Some(vec![0]) }, vec![Some(e)])?));
            }
            aux(cx, n, &format!("{name}:stacked"), Op::Concat { axis: 0 }, parts)?
        }
    };
    let dtype = s.dtype.or(cx.dtype(stack));
    cx.set_seq(stack, Seq::stacked(stack, dtype));
    Ok(stack)
}

/// SequenceAt(`stack`, input 1). A constant position into a stack of static length is checked here and a
/// negative one counted from the front (TFLite's GATHER takes no negative index).
pub(super) fn at(cx: &mut Cx, n: &NodeIn, stack: ValueId) -> Result<()> {
    let mut pos = n.req(1)?;
    if cx.rank(pos).is_some_and(|r| r != 0) || cx.dtype(pos).is_some_and(|d| !matches!(d, DType::I32 | DType::I64)) {
        return Err(n.invalid("the position must be one int32 or int64 value (a scalar)"));
    }
    let known = cx.constant(pos).map(|t| (t.dtype(), t.to_i64_vec()[0])).zip(cx.shape(stack).map(|s| s[0] as i64));
    if let Some(((dtype, p), len)) = known {
        if p < -len || p >= len {
            return Err(n.invalid(format!("position {p} is out of range for a sequence of {len} tensors (accepted: [{}, {}])", -len, len - 1)));
        }
        if p < 0 {
            pos = scalar_const(cx, n, "position", dtype, (p + len) as f64);
        }
    }
    single(cx, n, Op::Gather { axis: 0 }, vec![Some(stack), Some(pos)])
}

/// SequenceLength(`stack`).
pub(super) fn length(cx: &mut Cx, n: &NodeIn, stack: ValueId) -> Result<()> {
    let dim0 = aux(cx, n, "length", Op::Shape { start: 0, end: Some(1) }, vec![Some(stack)])?;
    single(cx, n, Op::Squeeze { axes: Some(vec![0]) }, vec![Some(dim0)])
}

/// SequenceInsert(`s`, input 1) without a position, `s` held as `stack`.
pub(super) fn append(cx: &mut Cx, n: &NodeIn, s: &Seq, stack: ValueId) -> Result<Seq> {
    let t = n.req(1)?;
    let slice = aux(cx, n, "slice", Op::Unsqueeze { axes: Some(vec![0]) }, vec![Some(t)])?;
    let all = aux(cx, n, "stacked", Op::Concat { axis: 0 }, vec![Some(stack), Some(slice)])?;
    Ok(Seq::stacked(all, s.dtype.or(cx.dtype(t))))
}

/// ConcatFromSequence(`stack`) along `axis`, on a new axis when `new_axis`.
pub(super) fn concat(cx: &mut Cx, n: &NodeIn, stack: ValueId, axis: i64, new_axis: bool) -> Result<()> {
    let r = cx.need_rank(n, stack, "ConcatFromSequence of a sequence built by a Loop")?.saturating_sub(1) as i64;
    // accepted: [-r - 1, r] with a new axis, [-r, r - 1] without
    let (lo, hi) = if new_axis { (-r - 1, r) } else { (-r, r - 1) };
    if axis < lo || axis > hi {
        let how = if new_axis { "with new_axis over" } else { "of" };
        return Err(n.invalid(format!("axis {axis} is out of range {how} tensors of rank {r} (accepted: [{lo}, {hi}])")));
    }
    let a = if axis < 0 { axis - lo } else { axis } as usize;
    let moved = if a == 0 {
        stack
    } else {
        // the stack's axis 0 moved to position a: [e0 .. e(a-1), N, ea ..]
        let mut perm: Vec<usize> = (1..=a).collect();
        perm.push(0);
        perm.extend(a + 1..=r as usize);
        if new_axis {
            return single(cx, n, Op::Transpose { perm }, vec![Some(stack)]);
        }
        aux(cx, n, "moved", Op::Transpose { perm }, vec![Some(stack)])?
    };
    if new_axis {
        return single(cx, n, Op::Identity, vec![Some(moved)]);
    }
    let shape = merged_shape(cx, n, moved, a, r as usize)?;
    single(cx, n, Op::Reshape { allowzero: true }, vec![Some(moved), Some(shape)])
}

/// The shape of `v` (rank `r + 1`) with axes `a` and `a + 1` merged into one, as an i64 vector.
fn merged_shape(cx: &mut Cx, n: &NodeIn, v: ValueId, a: usize, r: usize) -> Result<ValueId> {
    let (a, r) = (a as i64, r as i64);
    let dim = |cx: &mut Cx, k: i64, what: &str| aux(cx, n, what, Op::Shape { start: k, end: Some(k + 1) }, vec![Some(v)]);
    let count = dim(cx, a, "count")?;
    let size = dim(cx, a + 1, "size")?;
    let merged = aux(cx, n, "merged", Op::Binary(BinaryOp::Mul, None), vec![Some(count), Some(size)])?;
    let mut parts = Vec::with_capacity(3);
    if a > 0 {
        parts.push(Some(aux(cx, n, "before", Op::Shape { start: 0, end: Some(a) }, vec![Some(v)])?));
    }
    parts.push(Some(merged));
    if a + 2 <= r {
        parts.push(Some(aux(cx, n, "after", Op::Shape { start: a + 2, end: None }, vec![Some(v)])?));
    }
    if parts.len() == 1 {
        return Ok(merged);
    }
    aux(cx, n, "shape", Op::Concat { axis: 0 }, parts)
}
