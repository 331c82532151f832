//! Generation reads the logits of one position per step (the last real token), but a decoder computes them for
//! every position it runs: a prefill of `S` tokens (or a no-cache step over a padded sequence) multiplies `S` rows
//! by the LM head, the largest matrix of a small model. This pass narrows the head to one row chosen at run time:
//!
//! `logits = MatMul(x [b, S, h], W)` becomes `logits = MatMul(Gather(x, row, axis 1), W)` with `row` a new
//! i64 `[1]` input ([`LOGITS_ROW_INPUT`]), so `logits` is `[b, 1, vocab]` — what transformers' `generate` does with
//! `logits_to_keep = 1`. The values of the chosen row are unchanged (the same products, in the same order).

use crate::ir::infer::infer_node;
use crate::ir::{DType, Graph, Op, ValueId};
use crate::runtime::CpuEval;
use crate::Result;

/// Name of the input added for the position whose logits are computed (an i64 of shape `[1]`).
pub const LOGITS_ROW_INPUT: &str = "tpu_sdk.logits_row";

/// Narrows the graph output `logits` (by value) to the row given by a new input [`LOGITS_ROW_INPUT`] (appended to
/// the graph inputs) when a MatMul of a `[b, S, h]` activation makes it; returns the new input, or `None` with the
/// graph untouched when the output is made another way or has one row already.
pub fn select_logits_row(g: &mut Graph, logits: ValueId) -> Result<Option<ValueId>> {
    let Some(at) = g.nodes.iter().position(|n| n.outputs.contains(&logits)) else { return Ok(None) };
    let node = &g.nodes[at];
    let (Op::MatMul, [Some(x), Some(_)]) = (&node.op, node.inputs.as_slice()) else { return Ok(None) };
    let x = *x;
    let xs = &g.value(x).shape;
    if xs.len() != 3 || xs[1] <= 1 || g.value(x).dynamic || g.outputs.contains(&x) {
        return Ok(None);
    }
    let row = g.add_input(LOGITS_ROW_INPUT, DType::I64, vec![1]);
    let picked = g.add_value("tpu_sdk.logits_row.hidden", g.value(x).dtype, vec![]);
    g.add_node("tpu_sdk.logits_row.gather", Op::Gather { axis: 1 }, vec![Some(x), Some(row)], vec![picked]);
    // the Gather goes right before the head, which now reads its one row
    let gather = g.nodes.pop().expect("added above");
    g.nodes.insert(at, gather);
    g.nodes[at + 1].inputs[0] = Some(picked);
    infer_node(g, at, &CpuEval)?;
    infer_node(g, at + 1, &CpuEval)?;
    Ok(Some(row))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::infer::infer_graph;
    use crate::ir::Tensor;
    use crate::runtime::Session;

    /// The narrowed head gives the chosen row of the full one, bit for bit, for every row.
    #[test]
    fn the_chosen_row_equals_the_full_heads_row() {
        let mut g = Graph::new("head");
        let x = g.add_input("x", DType::F32, vec![1, 5, 3]);
        let w = g.add_constant("w", Tensor::from_f32(vec![3, 4], (0..12).map(|i| i as f32 * 0.25 - 1.0).collect()));
        let y = g.add_value("logits", DType::F32, vec![]);
        g.add_node("head", Op::MatMul, vec![Some(x), Some(w)], vec![y]);
        g.outputs.push(y);
        infer_graph(&mut g, &CpuEval).unwrap();
        let xt = Tensor::from_f32(vec![1, 5, 3], (0..15).map(|i| (i as f32).sin()).collect());
        let full = Session::new(g.clone()).unwrap().run(std::slice::from_ref(&xt)).unwrap().remove(0);
        let row = select_logits_row(&mut g, y).unwrap().expect("a MatMul head is narrowed");
        assert_eq!(g.value(row).name, LOGITS_ROW_INPUT);
        assert_eq!(g.value(y).shape, vec![1, 1, 4]);
        let mut s = Session::new(g.clone()).unwrap();
        for r in 0..5 {
            let got = s.run(&[xt.clone(), Tensor::from_i64(vec![1], vec![r])]).unwrap().remove(0);
            assert_eq!(got.as_f32().unwrap(), &full.as_f32().unwrap()[r as usize * 4..][..4], "row {r}");
        }
        // one row already: nothing to do
        let mut g1 = Graph::new("one");
        let x = g1.add_input("x", DType::F32, vec![1, 1, 3]);
        let w = g1.add_constant("w", Tensor::from_f32(vec![3, 2], vec![0.0; 6]));
        let y = g1.add_value("logits", DType::F32, vec![]);
        g1.add_node("head", Op::MatMul, vec![Some(x), Some(w)], vec![y]);
        g1.outputs.push(y);
        infer_graph(&mut g1, &CpuEval).unwrap();
        assert_eq!(select_logits_row(&mut g1, y).unwrap(), None);
        assert_eq!(g1.inputs.len(), 1);
    }
}
