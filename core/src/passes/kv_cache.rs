//! A decoder's key/value cache made static for generation on an accelerator.
//!
//! A decoder exported from transformers returns `present = Concat(past, new)`: `P + S` positions for a cache of
//! `P` and `S` new tokens, so each step's cache would be larger than the last and every step a new program.
//! With a fixed capacity `P` of which the first `len` positions are filled (the attention mask hides the rest),
//! the next cache is `past` with the `count` real new positions written at `len`:
//!
//! `next[j] = present[j]` for `j < len`, `present[P + j - len]` for `len <= j < len + count`, `present[j]` after
//!
//! — one `Gather` along the positions axis per cache tensor, with indices computed from two new scalar inputs,
//! `len` and `count`. The rewritten graph's cache outputs have the shapes of its cache inputs, so a target can
//! keep them in device memory and feed them back (with input/output aliasing) without a trip to the host.

use crate::ir::infer::infer_node;
use crate::ir::ops::BinaryOp;
use crate::ir::{DType, Graph, Op, Tensor, ValueId};
use crate::runtime::CpuEval;
use crate::{Error, Result};

/// Name of the input added for the number of filled cache positions (an i64 of shape `[1]`).
pub const CACHE_LEN_INPUT: &str = "tpu_sdk.cache_len";
/// Name of the input added for the number of real new positions this step writes (an i64 of shape `[1]`).
pub const NEW_COUNT_INPUT: &str = "tpu_sdk.new_count";

/// Rewrites each `(past input, present output)` pair of `g` (by value) so that the output is the `past`-shaped
/// cache with this step's positions written in (see the module doc); both tensors are
/// `[batch, heads, positions, head_dim]`. Appends the inputs [`CACHE_LEN_INPUT`] and [`NEW_COUNT_INPUT`] to the
/// graph inputs, and returns them.
pub fn write_cache_in_place(g: &mut Graph, pairs: &[(ValueId, ValueId)]) -> Result<(ValueId, ValueId)> {
    let Some(&(past0, _)) = pairs.first() else {
        return Err(Error::InvalidModel("no cache tensors to rewrite".into()));
    };
    let cap = match g.value(past0).shape.as_slice() {
        [_, _, p, _] => *p,
        s => return Err(Error::InvalidModel(format!("cache input '{}' is {s:?}, not [batch, heads, positions, head_dim]", g.value(past0).name))),
    };
    for &(past, present) in pairs {
        let (ps, qs) = (&g.value(past).shape, &g.value(present).shape);
        let fits = ps.len() == 4 && qs.len() == 4 && ps[0] == qs[0] && ps[1] == qs[1] && ps[3] == qs[3] && ps[2] == cap && qs[2] >= cap;
        if !fits {
            return Err(Error::InvalidModel(format!(
                "cache output '{}' {qs:?} does not extend cache input '{}' {ps:?} along positions",
                g.value(present).name,
                g.value(past).name
            )));
        }
        if !g.outputs.contains(&present) || !g.inputs.contains(&past) {
            return Err(Error::InvalidModel(format!("'{}' must be a graph output and '{}' a graph input", g.value(present).name, g.value(past).name)));
        }
    }
    let len = g.add_input(CACHE_LEN_INPUT, DType::I64, vec![1]);
    let count = g.add_input(NEW_COUNT_INPUT, DType::I64, vec![1]);
    let positions = g.add_constant("tpu_sdk.cache_positions", Tensor::from_i64(vec![cap], (0..cap as i64).collect()));
    let cap_c = g.add_constant("tpu_sdk.cache_capacity", Tensor::from_i64(vec![1], vec![cap as i64]));
    let node = |g: &mut Graph, name: &str, op: Op, ins: &[ValueId]| -> Result<ValueId> {
        let out = g.add_value(format!("tpu_sdk.{name}"), DType::I64, vec![]);
        g.add_node(format!("tpu_sdk.{name}"), op, ins.iter().map(|&v| Some(v)).collect(), vec![out]);
        infer_node(g, g.nodes.len() - 1, &CpuEval)?;
        Ok(out)
    };
    let bin = |b| Op::Binary(b, None);
    let before = node(g, "before_new", bin(BinaryOp::Less), &[positions, len])?;
    let end = node(g, "new_end", bin(BinaryOp::Add), &[len, count])?;
    let before_end = node(g, "before_end", bin(BinaryOp::Less), &[positions, end])?;
    let from_len = node(g, "from_len", bin(BinaryOp::Sub), &[positions, len])?;
    let shifted = node(g, "new_source", bin(BinaryOp::Add), &[from_len, cap_c])?;
    let inner = node(g, "new_or_old", Op::Where, &[before_end, shifted, positions])?;
    let index = node(g, "cache_index", Op::Where, &[before, positions, inner])?;
    for &(_, present) in pairs {
        let name = g.value(present).name.clone();
        g.value_mut(present).name = format!("{name}.concatenated");
        let dtype = g.value(present).dtype;
        let out = g.add_value(name.clone(), dtype, vec![]);
        g.add_node(format!("tpu_sdk.write_cache.{name}"), Op::Gather { axis: 2 }, vec![Some(present), Some(index)], vec![out]);
        infer_node(g, g.nodes.len() - 1, &CpuEval)?;
        for o in g.outputs.iter_mut().filter(|o| **o == present) {
            *o = out;
        }
    }
    crate::ir::verify::verify(g)?;
    Ok((len, count))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::Session;

    /// past [1, 1, 4, 2] and new [1, 1, 2, 2] → present = Concat(past, new) [1, 1, 6, 2]
    fn decoder() -> (Graph, ValueId, ValueId) {
        let mut g = Graph::new("cache");
        let past = g.add_input("past", DType::F32, vec![1, 1, 4, 2]);
        let new = g.add_input("new", DType::F32, vec![1, 1, 2, 2]);
        let present = g.add_value("present", DType::F32, vec![]);
        g.add_node("cat", Op::Concat { axis: 2 }, vec![Some(past), Some(new)], vec![present]);
        crate::ir::infer::infer_graph(&mut g, &CpuEval).unwrap();
        g.outputs.push(present);
        (g, past, present)
    }

    #[test]
    fn writes_the_new_positions_after_the_filled_ones() {
        let (mut g, past, present) = decoder();
        write_cache_in_place(&mut g, &[(past, present)]).unwrap();
        assert_eq!(g.value(g.outputs[0]).shape, vec![1, 1, 4, 2]);
        assert_eq!(g.value(g.outputs[0]).name, "present");
        let mut s = Session::new(g).unwrap();
        let p = Tensor::from_f32(vec![1, 1, 4, 2], vec![1., 1., 2., 2., 0., 0., 0., 0.]);
        let n = Tensor::from_f32(vec![1, 1, 2, 2], vec![7., 7., 9., 9.]);
        // two filled positions, one real new one (the second new position is padding)
        let out = s.run(&[p.clone(), n.clone(), Tensor::from_i64(vec![1], vec![2]), Tensor::from_i64(vec![1], vec![1])]).unwrap();
        assert_eq!(out[0].as_f32().unwrap(), &[1., 1., 2., 2., 7., 7., 0., 0.]);
        // empty cache, both new positions
        let out = s.run(&[p, n, Tensor::from_i64(vec![1], vec![0]), Tensor::from_i64(vec![1], vec![2])]).unwrap();
        assert_eq!(out[0].as_f32().unwrap(), &[7., 7., 9., 9., 0., 0., 0., 0.]);
    }

    #[test]
    fn refuses_outputs_that_do_not_extend_the_cache() {
        let (mut g, past, _) = decoder();
        let new = g.inputs[1];
        let e = write_cache_in_place(&mut g, &[(past, new)]).unwrap_err().to_string();
        assert!(e.contains("does not extend"), "{e}");
    }
}
