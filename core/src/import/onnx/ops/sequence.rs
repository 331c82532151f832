//! Sequence ops, resolved at import time ([`crate::import::onnx`]'s `seq` module): the ops that build a
//! sequence record its elements, the ops that read one emit tensor ops on them (Identity, Concat, Split,
//! Unsqueeze, Squeeze). Positions and split sizes must be constants; the spec's negative positions count from
//! the back.

use super::{aux, dtype_attr, scalar_const, single, MapFn};
use crate::import::onnx::graph::{Cx, NodeIn};
use crate::import::onnx::seq::{check_len, refuse_seq_inputs, Seq};
use crate::ir::{DType, Op, ValueId};
use crate::Result;

pub(super) const OPS: &[(&str, MapFn)] = &[
    ("ConcatFromSequence", super::sequence_tensor::concat_from_sequence),
    ("SequenceAt", sequence_at),
    ("SequenceConstruct", sequence_construct),
    ("SequenceEmpty", sequence_empty),
    ("SequenceErase", sequence_erase),
    ("SequenceInsert", sequence_insert),
    ("SequenceLength", sequence_length),
    ("SplitToSequence", super::sequence_tensor::split_to_sequence),
];

/// A node of another op reading a sequence: an Identity of a sequence is that sequence (an alias), any other
/// op is refused ([`crate::import::onnx::seq::refuse_seq_inputs`]). `None` for the sequence ops and for nodes
/// that read no sequence.
pub(super) fn other_op_on_sequence(cx: &mut Cx, n: &NodeIn) -> Option<Result<()>> {
    if OPS.iter().any(|(op, _)| *op == n.op_type) || n.inputs.iter().flatten().all(|&v| cx.seq(v).is_none()) {
        return None;
    }
    if n.op_type == "Identity" && n.inputs.len() == 1 {
        return Some(seq_in(cx, n, 0).and_then(|s| seq_out(cx, n, s)));
    }
    // a Loop carrying sequences decides itself (`sequence_loop.rs`); its trip count and condition are tensors
    if n.op_type == "Loop" && n.inputs.iter().take(2).flatten().all(|&v| cx.seq(v).is_none()) {
        return None;
    }
    Some(refuse_seq_inputs(cx, n))
}

/// The sequence that input `i` holds.
pub(super) fn seq_in(cx: &Cx, n: &NodeIn, i: usize) -> Result<Seq> {
    let v = n.req(i)?;
    cx.seq(v).cloned().ok_or_else(|| n.invalid(format!("input '{}' is not a tensor sequence", cx.g.value(v).name)))
}

/// Records `s` as the node's sequence output.
pub(super) fn seq_out(cx: &mut Cx, n: &NodeIn, s: Seq) -> Result<()> {
    let out = n.outs(1, 1)?[0];
    check_len(n, s.elems.len())?;
    cx.set_seq(out, s);
    Ok(())
}

/// The refusal of node `n`, which does `what` with its input sequence built by a Loop (held as a stack).
fn refuse_stacked(cx: &Cx, n: &NodeIn, what: &str) -> crate::Error {
    let name = n.opt(0).map(|v| cx.g.value(v).name.clone()).unwrap_or_default();
    n.unsupported(format!(
        "'{name}' is a sequence a Loop appended to (its length is known only at run time) and this node {what}; such a \
         sequence is only read by ConcatFromSequence, SequenceAt and SequenceLength, and appended to by SequenceInsert \
         without a position"
    ))
}

/// The constant position in input `i` (`None` when absent).
fn position(cx: &Cx, n: &NodeIn, i: usize) -> Result<Option<i64>> {
    let Some(v) = n.opt(i) else { return Ok(None) };
    let t = cx.constant(v).ok_or_else(|| n.unsupported("sequence position is computed at run time; only constant positions are supported"))?;
    if t.len() != 1 || !matches!(t.dtype(), DType::I32 | DType::I64) {
        return Err(n.invalid("the position must be one int32 or int64 value"));
    }
    Ok(Some(t.to_i64_vec()[0]))
}

/// `pos` resolved in a sequence of `len` tensors: accepted in `[-len, len - 1]`, or `[-len, len]` when
/// `inclusive` (SequenceInsert).
fn index(n: &NodeIn, pos: i64, len: usize, inclusive: bool) -> Result<usize> {
    let l = len as i64;
    let hi = if inclusive { l } else { l - 1 };
    if pos < -l || pos > hi {
        return Err(n.invalid(format!("position {pos} is out of range for a sequence of {len} tensors (accepted: [{}, {hi}])", -l)));
    }
    Ok(if pos < 0 { pos + l } else { pos } as usize)
}

/// Checks that `v` has the element type of `s` (when both are known); returns that type.
fn element_type(cx: &Cx, n: &NodeIn, s: &Seq, v: ValueId) -> Result<Option<DType>> {
    match (s.dtype, cx.dtype(v)) {
        (Some(d), Some(e)) if d != e => Err(n.invalid(format!(
            "tensor '{}' has element type {e:?}, the sequence holds {d:?}",
            cx.g.value(v).name
        ))),
        (d, e) => Ok(d.or(e)),
    }
}

fn sequence_construct(cx: &mut Cx, n: &NodeIn) -> Result<()> {
    let mut s = Seq::of(Vec::new(), None);
    for i in 0..n.inputs.len() {
        let v = n.req(i)?;
        s.dtype = element_type(cx, n, &s, v)?;
        s.elems.push(v);
    }
    if s.elems.is_empty() {
        return Err(n.invalid("needs at least one input"));
    }
    seq_out(cx, n, s)
}

fn sequence_empty(cx: &mut Cx, n: &NodeIn) -> Result<()> {
    let dtype = match n.attrs.int("dtype")? {
        Some(code) => dtype_attr(n, "dtype", code)?,
        None => DType::F32,
    };
    seq_out(cx, n, Seq::of(Vec::new(), Some(dtype)))
}

fn sequence_insert(cx: &mut Cx, n: &NodeIn) -> Result<()> {
    let mut s = seq_in(cx, n, 0)?;
    let t = n.req(1)?;
    if let Some(stack) = s.stack {
        if n.opt(2).is_some() {
            return Err(refuse_stacked(cx, n, "inserts into it at a position"));
        }
        let s = super::sequence_stacked::append(cx, n, &s, stack)?;
        return seq_out(cx, n, s);
    }
    let at = match position(cx, n, 2)? {
        Some(p) => index(n, p, s.elems.len(), true)?,
        None => s.elems.len(),
    };
    s.dtype = element_type(cx, n, &s, t)?;
    s.elems.insert(at, t);
    seq_out(cx, n, s)
}

fn sequence_erase(cx: &mut Cx, n: &NodeIn) -> Result<()> {
    let mut s = seq_in(cx, n, 0)?;
    if s.stack.is_some() {
        return Err(refuse_stacked(cx, n, "erases from it"));
    }
    if s.elems.is_empty() {
        return Err(n.invalid("cannot erase from an empty sequence"));
    }
    let at = index(n, position(cx, n, 1)?.unwrap_or(-1), s.elems.len(), false)?;
    s.elems.remove(at);
    seq_out(cx, n, s)
}

fn sequence_at(cx: &mut Cx, n: &NodeIn) -> Result<()> {
    let s = seq_in(cx, n, 0)?;
    if let Some(stack) = s.stack {
        return super::sequence_stacked::at(cx, n, stack);
    }
    let pos = position(cx, n, 1)?.ok_or_else(|| n.invalid("required input 1 (position) is missing"))?;
    let v = s.elems[index(n, pos, s.elems.len(), false)?];
    single(cx, n, Op::Identity, vec![Some(v)])
}

fn sequence_length(cx: &mut Cx, n: &NodeIn) -> Result<()> {
    let s = seq_in(cx, n, 0)?;
    if let Some(stack) = s.stack {
        return super::sequence_stacked::length(cx, n, stack);
    }
    let len = s.elems.len();
    let c = scalar_const(cx, n, "length", DType::I64, len as f64);
    single(cx, n, Op::Identity, vec![Some(c)])
}

/// Emits `op` on each of `elems` (aux nodes named `what{i}`), returning the results.
pub(super) fn each(cx: &mut Cx, n: &NodeIn, what: &str, op: Op, elems: &[ValueId]) -> Result<Vec<ValueId>> {
    elems.iter().enumerate().map(|(i, &e)| aux(cx, n, &format!("{what}{i}"), op.clone(), vec![Some(e)])).collect()
}

