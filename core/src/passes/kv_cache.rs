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
//!
//! For a decode step (one new token) there is a form with no copy of the cache at all
//! ([`scatter_cache_in_place`]): the `Concat` becomes a `TensorScatter` that writes the new position into the
//! cache input at `len`, and attention reads the cache itself. The cache input then has the capacity
//! `P + 1` of the graph's `present`, and the attention mask is laid out like the cache (filled positions, then the
//! new one at `len`, free positions after). Key order does not matter to attention under a mask, and a single
//! query attends to every key the mask allows, so this is exact for one new token; with several (a prefill) the
//! graph's causal mask, laid out for the `Concat`, would not match, which is why the form is for decode steps.

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

/// Name of the input [`scatter_cache_in_place`] adds: where each batch row's new position goes (i64 `[batch]`).
pub const WRITE_INDEX_INPUT: &str = "tpu_sdk.write_index";

/// Rewrites each `(past input, present output)` pair of `g`, where `present = Concat(past, new)` along the
/// positions (through any single-input `Concat`/`Identity` copies of `past`), into
/// `present = TensorScatter(past, new, write_index)` with `past` widened to `present`'s positions (see the module
/// doc). Nothing else may read `past`. Adds the input [`WRITE_INDEX_INPUT`]. The CPU runtime then writes the new
/// positions into the cache's own buffer ([`crate::runtime::Session::run_owned`]).
pub fn scatter_cache_in_place(g: &mut Graph, pairs: &[(ValueId, ValueId)]) -> Result<()> {
    let producers = g.producers();
    let readers = |g: &Graph, v: ValueId| g.nodes.iter().filter(|n| n.inputs.contains(&Some(v))).count() + g.outputs.iter().filter(|&&o| o == v).count();
    let mut plan = Vec::with_capacity(pairs.len());
    for &(past, present) in pairs {
        let not_concat = || Error::Unsupported(format!("cache output '{}' is not a Concat of '{}' and the new positions", g.value(present).name, g.value(past).name));
        let n = producers[present.0].ok_or_else(not_concat)?;
        let node = &g.nodes[n];
        let ps = &g.value(present).shape;
        let (Op::Concat { axis }, [Some(mut from), Some(new)]) = (&node.op, node.inputs.as_slice()) else { return Err(not_concat()) };
        if ps.len() != 4 || *axis != 2 || g.value(*new).shape.get(2) != Some(&1) {
            return Err(Error::Unsupported(format!("cache output '{}' {ps:?} does not add one position on axis 2 of [batch, heads, positions, head_dim]", g.value(present).name)));
        }
        // copies of the cache input on the way (an exporter's one-input Concat)
        while from != past {
            let p = producers[from.0].ok_or_else(not_concat)?;
            let copy = matches!(g.nodes[p].op, Op::Concat { .. } | Op::Identity) && g.nodes[p].inputs.len() == 1;
            if !copy || readers(g, from) != 1 {
                return Err(not_concat());
            }
            from = g.nodes[p].inputs[0].ok_or_else(not_concat)?;
        }
        if readers(g, past) != 1 {
            return Err(Error::Unsupported(format!("cache input '{}' is read by more than its Concat", g.value(past).name)));
        }
        plan.push((n, past, *new, ps.clone()));
    }
    let batch = g.value(pairs[0].0).shape[0];
    let write = g.add_input(WRITE_INDEX_INPUT, DType::I64, vec![batch]);
    for (n, past, new, shape) in plan {
        g.value_mut(past).shape = shape;
        let node = &mut g.nodes[n];
        node.op = Op::TensorScatter { axis: 2, circular: false };
        node.inputs = vec![Some(past), Some(new), Some(write)];
    }
    crate::passes::dce::run(g);
    crate::ir::verify::verify(g)
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

    /// past [1, 1, 3, 2] → Identity → Concat with new [1, 1, 1, 2]: the cache input grows to 4 positions and the
    /// new one is written at the write index.
    #[test]
    fn a_decode_step_writes_its_position_into_the_cache_input() {
        let mut g = Graph::new("cache");
        let past = g.add_input("past", DType::F32, vec![1, 1, 3, 2]);
        let new = g.add_input("new", DType::F32, vec![1, 1, 1, 2]);
        let copy = g.add_value("copy", DType::F32, vec![]);
        g.add_node("copy", Op::Identity, vec![Some(past)], vec![copy]);
        let present = g.add_value("present", DType::F32, vec![]);
        g.add_node("cat", Op::Concat { axis: 2 }, vec![Some(copy), Some(new)], vec![present]);
        crate::ir::infer::infer_graph(&mut g, &CpuEval).unwrap();
        g.outputs.push(present);
        scatter_cache_in_place(&mut g, &[(past, present)]).unwrap();
        assert_eq!(g.nodes.len(), 1, "the copy is gone");
        assert_eq!(g.value(g.inputs[0]).shape, vec![1, 1, 4, 2]);
        let mut s = Session::new(g).unwrap();
        let cache = Tensor::from_f32(vec![1, 1, 4, 2], vec![1., 1., 2., 2., 0., 0., 0., 0.]);
        let out = s.run_owned(vec![cache, Tensor::from_f32(vec![1, 1, 1, 2], vec![7., 7.]), Tensor::from_i64(vec![1], vec![2])]).unwrap();
        assert_eq!(out[0].as_f32().unwrap(), &[1., 1., 2., 2., 7., 7., 0., 0.]);

        // a Concat of two new positions (a prefill) is refused
        let (mut g, past, present) = decoder();
        let e = scatter_cache_in_place(&mut g, &[(past, present)]).unwrap_err().to_string();
        assert!(e.contains("one position"), "{e}");
    }

    #[test]
    fn refuses_outputs_that_do_not_extend_the_cache() {
        let (mut g, past, _) = decoder();
        let new = g.inputs[1];
        let e = write_cache_in_place(&mut g, &[(past, new)]).unwrap_err().to_string();
        assert!(e.contains("does not extend"), "{e}");
    }
}
