//! Loop-carried sequences that the body only appends to, turned into scan outputs. `torch.onnx.export` writes
//! a Python list built in a loop (`out = []; for ...: out.append(t)`) as a sequence carried through the Loop
//! (`SequenceEmpty` before it) and `SequenceInsert(seq, t)` without a position (an append) in the body. Each
//! such sequence leaves the carried values: the body gives `t` as one more scan output instead, which the Loop
//! stacks on a new axis 0, and the Loop's final sequence is that stack ([`Seq::stacked`]) with the initial
//! sequence's elements concatenated in front. The ops that read it after the loop index the stack
//! (`sequence_stacked.rs`). Its elements must keep one shape across iterations (a scan output does; the CPU
//! runtime says which output changed shape if one does not).
//!
//! A carried sequence the body does anything else with (reads it, inserts at a position, erases from it, gives
//! it back unchanged, appends twice) is refused with the node and the reason.

use super::aux;
use super::control_flow::emit_loop;
use crate::import::onnx::graph::{is_default_domain, node_desc, node_uses, Cx, NodeIn};
use crate::import::onnx::proto::GraphProto;
use crate::import::onnx::seq::Seq;
use crate::ir::{Op, ValueId};
use crate::Result;

/// A carried sequence the body appends to.
struct Appended {
    /// Its index among the Loop's carried values.
    carried: usize,
    /// The index of the body node appending to it (a SequenceInsert).
    insert: usize,
}

/// Imports Loop `n` whose carried values `carried` include sequences: each must be one the body appends to
/// (see the module documentation).
pub(super) fn loop_with_sequences(cx: &mut Cx, n: &NodeIn, body_g: &GraphProto, carried: &[ValueId]) -> Result<()> {
    let nc = carried.len();
    let is_seq: Vec<bool> = carried.iter().map(|&v| cx.seq(v).is_some()).collect();
    let appended: Vec<Appended> = (0..nc).filter(|&i| is_seq[i]).map(|i| appended_to(n, body_g, i)).collect::<Result<_>>()?;
    let body = without_sequences(body_g, &appended);
    let mut outputs: Vec<ValueId> = (0..nc).filter(|&i| !is_seq[i]).map(|i| n.outputs[i]).collect();
    outputs.extend_from_slice(&n.outputs[nc..]);
    let mut stacks = Vec::with_capacity(appended.len());
    for a in &appended {
        let name = format!("{}:stacked", cx.g.value(n.outputs[a.carried]).name);
        stacks.push(cx.tmp(&name));
    }
    outputs.extend(&stacks);
    let tensors: Vec<ValueId> = (0..nc).filter(|&i| !is_seq[i]).map(|i| carried[i]).collect();
    emit_loop(cx, n, &body, tensors, outputs)?;
    for (a, &stack) in appended.iter().zip(&stacks) {
        let initial = cx.seq(carried[a.carried]).cloned().ok_or_else(|| n.invalid("a carried sequence went missing"))?;
        let elem = cx.dtype(stack);
        if let (Some(d), Some(e)) = (initial.dtype, elem) {
            if d != e {
                return Err(n.invalid(format!("carried sequence {} holds {d} tensors, the body appends {e} ones", a.carried)));
            }
        }
        let all = with_initial(cx, n, a.carried, &initial, stack)?;
        cx.set_seq(n.outputs[a.carried], Seq::stacked(all, initial.dtype.or(elem)));
    }
    Ok(())
}

/// Checks that the body only appends to carried sequence `i` and finds the node that does.
fn appended_to(n: &NodeIn, body: &GraphProto, i: usize) -> Result<Appended> {
    let name_in = body.input[2 + i].name.as_deref().unwrap_or("");
    let name_out = body.output[1 + i].name.as_deref().unwrap_or("");
    let refuse = |why: String| {
        n.unsupported(format!(
            "carried sequence {i} ('{name_in}' in the body): {why}; only a sequence the body appends to (SequenceInsert \
             without a position, read nowhere else in the body) is carried through a Loop"
        ))
    };
    let found = body.node.iter().position(|b| b.output.iter().any(|o| o == name_out));
    let Some(k) = found else {
        return Err(refuse(format!("the body gives back '{name_out}', which no node of the body computes")));
    };
    let b = &body.node[k];
    let desc = node_desc(b, k);
    if b.op_type.as_deref() != Some("SequenceInsert") || !is_default_domain(b.domain.as_deref().unwrap_or("")) {
        return Err(refuse(format!("its next value comes from the body's {desc}")));
    }
    if b.input.get(2).is_some_and(|p| !p.is_empty()) {
        return Err(refuse(format!("the body's {desc} inserts at a position")));
    }
    if b.input.first().map(String::as_str) != Some(name_in) || b.input.get(1).is_none_or(|t| t.is_empty()) {
        return Err(refuse(format!("the body's {desc} does not append a tensor to it")));
    }
    for (j, other) in body.node.iter().enumerate() {
        let mut uses = node_uses(other);
        if j == k {
            uses.remove(0);
        }
        if uses.iter().any(|u| u == name_in) {
            return Err(refuse(format!("the body's {} reads it", node_desc(other, j))));
        }
        if uses.iter().any(|u| u == name_out) {
            return Err(refuse(format!("the body's {} reads '{name_out}', the sequence after the append", node_desc(other, j))));
        }
    }
    let outs = |name: &str| body.output.iter().filter(|o| o.name.as_deref() == Some(name)).count();
    if outs(name_in) > 0 || outs(name_out) > 1 {
        return Err(refuse("the body gives it back as another output too".into()));
    }
    Ok(Appended { carried: i, insert: k })
}

/// `body` with the appended sequences taken out of its inputs and outputs: each SequenceInsert becomes an
/// Identity of the appended tensor (keeping its node name and output name), and that output moves to the end
/// of the body's outputs, as a scan output.
fn without_sequences(body: &GraphProto, appended: &[Appended]) -> GraphProto {
    let mut g = body.clone();
    let mut scans = Vec::with_capacity(appended.len());
    for a in appended {
        let node = &mut g.node[a.insert];
        node.op_type = Some("Identity".into());
        node.input = vec![node.input[1].clone()];
        let mut out = body.output[1 + a.carried].clone();
        out.r#type = None;
        scans.push(out);
    }
    let dropped = |k: usize, first: usize| appended.iter().any(|a| k == first + a.carried);
    g.input = body.input.iter().enumerate().filter(|&(k, _)| !dropped(k, 2)).map(|(_, v)| v.clone()).collect();
    g.output = body.output.iter().enumerate().filter(|&(k, _)| !dropped(k, 1)).map(|(_, v)| v.clone()).collect();
    g.output.extend(scans);
    g
}

/// The stack of the whole final sequence: `initial`'s elements (known ones unsqueezed, a stacked one as is)
/// in front of the Loop's `stack` (for carried sequence `i`).
fn with_initial(cx: &mut Cx, n: &NodeIn, i: usize, initial: &Seq, stack: ValueId) -> Result<ValueId> {
    let mut parts = Vec::with_capacity(initial.elems.len() + 2);
    for (k, &e) in initial.elems.iter().enumerate() {
        parts.push(Some(aux(cx, n, &format!("seq{i}:initial{k}"), Op::Unsqueeze { axes: Some(vec![0]) }, vec![Some(e)])?));
    }
    parts.extend(initial.stack.map(Some));
    if parts.is_empty() {
        return Ok(stack);
    }
    parts.push(Some(stack));
    aux(cx, n, &format!("seq{i}:all"), Op::Concat { axis: 0 }, parts)
}
