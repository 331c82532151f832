//! Tensor sequences resolved at import time. The IR has no sequence type: a sequence value whose structure
//! is known while importing (built by SequenceConstruct/SequenceEmpty/SequenceInsert/SequenceErase/
//! SplitToSequence with constant positions and sizes) is tracked here as the list of IR values it holds, and
//! the ops that read it ([`super::ops`]'s sequence family) pick from that list. A sequence that a Loop body
//! appends to comes out of the Loop as one tensor stacking its elements (a scan output,
//! `ops/sequence_loop.rs`), whose length is known only at run time; the readers index that tensor instead. A
//! sequence a Loop/If/Scan body reads from outside goes in the same way, as the stack of its elements. A
//! sequence that must exist at run time in any other form (a graph or region output, a value used by another op)
//! is refused with the reason.

use super::graph::{Cx, NodeIn};
use crate::ir::{DType, ValueId};
use crate::{Error, Result};

/// Most tensors a sequence resolved at import time may hold (a hostile file must not make one node create
/// millions of values).
pub const MAX_SEQUENCE_LEN: usize = 1 << 16;

/// Refuses a sequence of `len` tensors over [`MAX_SEQUENCE_LEN`].
pub fn check_len(n: &NodeIn, len: usize) -> Result<()> {
    if len > MAX_SEQUENCE_LEN {
        return Err(n.unsupported(format!("the sequence would hold {len} tensors; at most {MAX_SEQUENCE_LEN} are resolved at import time")));
    }
    Ok(())
}

/// A sequence known at import time: its elements, or a tensor stacking them.
#[derive(Clone, Debug)]
pub struct Seq {
    /// The elements, in order (empty when `stack` holds them).
    pub elems: Vec<ValueId>,
    /// The element type (from the elements, or SequenceEmpty's `dtype`); `None` when not known.
    pub dtype: Option<DType>,
    /// A tensor whose slices along axis 0 are the elements, in order, their number known only at run time (a
    /// sequence built by a Loop); `None` when `elems` lists them.
    pub stack: Option<ValueId>,
}

impl Seq {
    /// The sequence of `elems` (of type `dtype` when known).
    pub fn of(elems: Vec<ValueId>, dtype: Option<DType>) -> Seq {
        Seq { elems, dtype, stack: None }
    }

    /// The sequence of the slices of `stack` along axis 0.
    pub fn stacked(stack: ValueId, dtype: Option<DType>) -> Seq {
        Seq { elems: Vec::new(), dtype, stack: Some(stack) }
    }
}

impl Cx<'_> {
    /// The sequence `v` holds, if it is one.
    pub fn seq(&self, v: ValueId) -> Option<&Seq> {
        self.seqs.get(&v)
    }

    /// Records that `v` holds the sequence `s`.
    pub fn set_seq(&mut self, v: ValueId, s: Seq) {
        self.seqs.insert(v, s);
    }
}

/// Refuses a node that is not a sequence op (the caller knows) but reads a sequence (a Loop/If/Scan carrying
/// one, say).
pub fn refuse_seq_inputs(cx: &Cx, n: &NodeIn) -> Result<()> {
    let why = match n.op_type {
        "If" | "Loop" | "Scan" => "sequences crossing a Loop/If/Scan boundary are not supported",
        _ => "sequences are resolved at import time and can only be read by the sequence ops",
    };
    match n.inputs.iter().flatten().find(|&&v| cx.seq(v).is_some()) {
        Some(&v) => Err(n.unsupported(format!("input '{}' is a tensor sequence; {why}", cx.g.value(v).name))),
        None => Ok(()),
    }
}

/// Refuses `v` as an output of a graph (`region`: the region's name; `None` for the model's graph).
pub fn refuse_seq_output(cx: &Cx, v: ValueId, region: Option<&str>) -> Result<()> {
    if cx.seq(v).is_none() {
        return Ok(());
    }
    let name = &cx.g.value(v).name;
    Err(Error::Unsupported(match region {
        None => format!("graph output '{name}' is a tensor sequence; sequence-typed graph outputs are not supported"),
        Some(r) => format!(
            "output '{name}' of region '{r}' is a tensor sequence; a sequence leaves a Loop/If/Scan body only as a Loop's carried sequence that the body appends to"
        ),
    }))
}
