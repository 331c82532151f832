//! Control flow of a length known before running, unrolled into plain dataflow: one copy of the body per
//! iteration ([`inline_region`]), the per-iteration outputs stacked with `Unsqueeze` and `Concat`.
//!
//! * A `Scan` (opset 9 and later): step `t` reads slice `t` of each scan input (a `Gather` with a scalar index,
//!   which drops the iterated axis; the last slice first for a reversed input), the states the step before
//!   wrote, and the captures; each scan output's slices are stacked along its axis (the last step first for a
//!   reversed output), and the final states are the last step's.
//! * The opset-8 batched `Scan` (no `sequence_lens`, which the importer refuses): a `Gather` of each batch row
//!   of the states and scan inputs, the row's scan unrolled as above, and the rows' outputs stacked on axis 0.
//! * A `Loop` with scan outputs whose trip count is known ([`static_trip_count`]: a constant `M`, and a
//!   condition that cannot stop it early): iteration `t` runs the body with the constant `t` as its iteration
//!   number and a constant true as its condition; the carried values pass from one copy to the next and each
//!   scan output's slices stack on a new axis 0. [`super::prepare`] folds the constants this leaves (a cast of
//!   the iteration number, the body's condition) afterwards.
//!
//! Why unrolling when the count is known, and not a TFLite `WHILE` growing the scan outputs (the exporter's form
//! for a Loop that cannot unroll, which keeps the file small for long loops): a WHILE runs on the CPU
//! only (the Edge TPU takes no control flow) and stays float between DEQUANTIZE and QUANTIZE in an int8 model,
//! while the unrolled form is ordinary ops that quantize with calibrated ranges per iteration and that the Edge
//! TPU compiler can map; and a Scan has to be unrolled anyway. So the three forms unroll, up to
//! [`MAX_UNROLLED_NODES`] nodes; a Loop with scan outputs that cannot unroll (too long, a trip count known only
//! at run time, a condition that may stop it early) stays, and the TFLite exporter writes it as a WHILE growing
//! each scan output by a row per iteration (LiteRT's WHILE lets a loop variable change shape).

use crate::ir::ops::control_flow::{static_trip_count, LoopAttrs, ScanAttrs};
use crate::ir::ops::TypeInfo;
use crate::ir::{DType, Graph, Node, Op, Tensor, ValueId};
use crate::passes::inline_if::inline_region;

/// The most nodes one unrolled Scan or Loop may become (iterations × (body nodes + slicing and stacking)).
pub const MAX_UNROLLED_NODES: usize = 20_000;

/// A `Scan` unrolled (see the module docs); `None` (the node stays, and the exporter refuses it by name) for a
/// scan without scan inputs, a dynamic or zero length, or more than [`MAX_UNROLLED_NODES`] nodes in all.
pub(super) fn unrolled_scan(g: &mut Graph, n: &Node) -> Option<Vec<Node>> {
    let Op::Scan(a) = &n.op else { return None };
    if a.batched {
        return unrolled_batched_scan(g, n, a);
    }
    let (ns, m) = (a.num_state, a.num_scan_inputs);
    let body = a.body.as_ref();
    let k_out = body.outputs.len().checked_sub(ns)?;
    if m == 0 || n.inputs.len() < ns + m || n.outputs.len() != ns + k_out || body.inputs.len() != n.inputs.len() {
        return None;
    }
    let scans: Vec<ValueId> = n.inputs[ns..ns + m].iter().copied().collect::<Option<_>>()?;
    let steps = scan_length(g, a, &scans, 0)?;
    if steps == 0 || steps.saturating_mul(scan_step_nodes(a)) > MAX_UNROLLED_NODES {
        return None;
    }
    let base = if n.name.is_empty() { "scan".to_string() } else { n.name.clone() };
    let mut nodes = Vec::new();
    let mut state: Vec<Option<ValueId>> = n.inputs[..ns].to_vec();
    let mut stacked: Vec<Vec<ValueId>> = vec![Vec::new(); k_out];
    for t in 0..steps {
        let prefix = format!("{base}/step{t}");
        let mut inputs = state.clone();
        for (j, &x) in scans.iter().enumerate() {
            let axis = a.input_axes[j];
            let at = if a.input_reverse.get(j).copied().unwrap_or(false) { steps - 1 - t } else { t };
            let mut shape = g.value(x).shape.clone();
            shape.remove(axis);
            let (s, gather) = gathered(g, &format!("{prefix}/slice{j}"), x, axis, at, shape, n.keep_float);
            nodes.push(gather);
            inputs.push(Some(s));
        }
        inputs.extend_from_slice(&n.inputs[ns + m..]);
        let outs = step_outputs(g, body, &prefix);
        nodes.extend(inline_region(g, body, &inputs, &outs, &prefix));
        state = outs[..ns].iter().map(|&v| Some(v)).collect();
        for (k, s) in stacked.iter_mut().enumerate() {
            s.push(outs[ns + k]);
        }
    }
    nodes.extend(finals(&base, "final_state", &state, &n.outputs[..ns], n.keep_float));
    for (k, mut slices) in stacked.into_iter().enumerate() {
        if a.output_reverse.get(k).copied().unwrap_or(false) {
            slices.reverse();
        }
        nodes.extend(stack(g, &format!("{base}/stack{k}"), &slices, *a.output_axes.get(k)?, n.outputs[ns + k], n.keep_float)?);
    }
    Some(nodes)
}

/// The opset-8 batched `Scan`, one unbatched scan per row of the batch axis (see the module docs).
fn unrolled_batched_scan(g: &mut Graph, n: &Node, a: &ScanAttrs) -> Option<Vec<Node>> {
    let (ns, m) = (a.num_state, a.num_scan_inputs);
    if m == 0 || n.inputs.len() < ns + m || n.outputs.len() != a.body.outputs.len() {
        return None;
    }
    let data: Vec<ValueId> = n.inputs[..ns + m].iter().copied().collect::<Option<_>>()?;
    let batch = *g.value(data[0]).shape.first()?;
    if data.iter().chain(&n.outputs).any(|&v| g.value(v).dynamic || g.value(v).shape.first() != Some(&batch)) {
        return None;
    }
    let steps = scan_length(g, a, &data[ns..], 1)?;
    if batch == 0 || batch.saturating_mul(steps).saturating_mul(scan_step_nodes(a)) > MAX_UNROLLED_NODES {
        return None;
    }
    let base = if n.name.is_empty() { "scan".to_string() } else { n.name.clone() };
    let mut row = Node { name: String::new(), op: Op::Scan(ScanAttrs { batched: false, ..a.clone() }), inputs: Vec::new(), outputs: Vec::new(), keep_float: n.keep_float };
    let mut nodes = Vec::new();
    let mut rows: Vec<Vec<ValueId>> = vec![Vec::new(); n.outputs.len()];
    for b in 0..batch {
        row.name = format!("{base}/row{b}");
        row.inputs.clear();
        for (j, &x) in data.iter().enumerate() {
            let shape = g.value(x).shape[1..].to_vec();
            let (r, gather) = gathered(g, &format!("{}/in{j}", row.name), x, 0, b, shape, n.keep_float);
            nodes.push(gather);
            row.inputs.push(Some(r));
        }
        row.inputs.extend_from_slice(&n.inputs[ns + m..]);
        row.outputs = n.outputs.iter().enumerate().map(|(k, &o)| g.add_value(format!("{}/out{k}", row.name), g.value(o).dtype, g.value(o).shape[1..].to_vec())).collect();
        nodes.extend(unrolled_scan(g, &row)?);
        for (r, &o) in rows.iter_mut().zip(&row.outputs) {
            r.push(o);
        }
    }
    for (k, r) in rows.iter().enumerate() {
        nodes.extend(stack(g, &format!("{base}/rows{k}"), r, 0, n.outputs[k], n.keep_float)?);
    }
    Some(nodes)
}

/// The common length of `scans` along their scan axes (each `skip` + its axis), if static.
fn scan_length(g: &Graph, a: &ScanAttrs, scans: &[ValueId], skip: usize) -> Option<usize> {
    let mut steps = None;
    for (j, &x) in scans.iter().enumerate() {
        let v = g.value(x);
        let len = *v.shape.get(skip + *a.input_axes.get(j)?)?;
        if v.dynamic || steps.is_some_and(|s| s != len) {
            return None;
        }
        steps = Some(len);
    }
    steps
}

/// The nodes one step of an unrolled Scan writes (its body, the slices, the outputs' copies).
fn scan_step_nodes(a: &ScanAttrs) -> usize {
    a.body.nodes.len() + a.body.outputs.len() + a.num_scan_inputs
}

/// A `Loop` with scan outputs unrolled (see the module docs); `None` (the node stays, and the exporter says
/// why, from [`loop_iterations`]) when it has no scan outputs (it exports as a `WHILE`) or cannot unroll.
pub(super) fn unrolled_loop(g: &mut Graph, n: &Node) -> Option<Vec<Node>> {
    let Op::Loop(a) = &n.op else { return None };
    let (nc, body) = (a.num_carried, a.body.as_ref());
    let k_out = body.outputs.len().checked_sub(1 + nc).filter(|&k| k > 0)?;
    let steps = loop_iterations(g, n).ok()?;
    let (iv, cv) = (body.value(*body.inputs.first()?), body.value(*body.inputs.get(1)?));
    let (ishape, cshape) = (iv.shape.clone(), cv.shape.clone());
    if iv.dtype != DType::I64 || cv.dtype != DType::Bool || n.inputs.len() != body.inputs.len() || n.inputs.len() < 2 + nc || n.outputs.len() != nc + k_out {
        return None;
    }
    let base = if n.name.is_empty() { "loop".to_string() } else { n.name.clone() };
    let go = g.add_constant(format!("{base}/cond"), Tensor::from_vec(cshape, vec![true])?);
    let mut nodes = Vec::new();
    let mut carried: Vec<Option<ValueId>> = n.inputs[2..2 + nc].to_vec();
    let mut stacked: Vec<Vec<ValueId>> = vec![Vec::new(); k_out];
    for t in 0..steps {
        let prefix = format!("{base}/iter{t}");
        let i = g.add_constant(format!("{prefix}/i"), Tensor::from_vec(ishape.clone(), vec![t as i64])?);
        let mut inputs = vec![Some(i), Some(go)];
        inputs.extend_from_slice(&carried);
        inputs.extend_from_slice(&n.inputs[2 + nc..]);
        let outs = step_outputs(g, body, &prefix);
        nodes.extend(inline_region(g, body, &inputs, &outs, &prefix));
        carried = outs[1..1 + nc].iter().map(|&v| Some(v)).collect();
        for (k, s) in stacked.iter_mut().enumerate() {
            s.push(outs[1 + nc + k]);
        }
    }
    nodes.extend(finals(&base, "final", &carried, &n.outputs[..nc], n.keep_float));
    for (k, slices) in stacked.iter().enumerate() {
        nodes.extend(stack(g, &format!("{base}/stack{k}"), slices, 0, n.outputs[nc + k], n.keep_float)?);
    }
    Some(nodes)
}

/// How many iterations Loop `n` of `g` runs, if it can unroll: its trip count is known before running (see
/// [`static_trip_count`]), it runs at least once, and unrolled it stays within [`MAX_UNROLLED_NODES`] nodes.
/// `Err` says why not, for the exporter's refusal.
pub fn loop_iterations(g: &Graph, n: &Node) -> Result<usize, String> {
    let Op::Loop(LoopAttrs { body, .. }) = &n.op else { return Err(format!("'{}' is not a Loop", n.name)) };
    let info = |k: usize| n.input(k).map(|v| g.value(v)).map(|v| TypeInfo { dtype: v.dtype, shape: &v.shape, value: v.constant.as_ref() });
    let steps = static_trip_count(body, &[info(0), info(1)])?;
    let per_step = body.nodes.len() + body.outputs.len();
    match steps.checked_mul(per_step) {
        _ if steps == 0 => Err("it runs no iterations (its trip count is 0)".into()),
        Some(total) if total <= MAX_UNROLLED_NODES => Ok(steps),
        _ => Err(format!("it runs {steps} iterations of {per_step} nodes, more than the {MAX_UNROLLED_NODES} nodes it may unroll into")),
    }
}

/// A `Gather` of index `at` along `axis` of `x` into a new value named `name` of `shape`, and the value.
fn gathered(g: &mut Graph, name: &str, x: ValueId, axis: usize, at: usize, shape: Vec<usize>, keep_float: bool) -> (ValueId, Node) {
    let idx = g.add_constant(format!("{name}/index"), Tensor::scalar(at as i64));
    let dtype = g.value(x).dtype;
    let s = g.add_value(name.to_string(), dtype, shape);
    (s, Node { name: name.to_string(), op: Op::Gather { axis }, inputs: vec![Some(x), Some(idx)], outputs: vec![s], keep_float })
}

/// Fresh values for one unrolled copy of `body`'s outputs.
fn step_outputs(g: &mut Graph, body: &Graph, prefix: &str) -> Vec<ValueId> {
    body.outputs
        .iter()
        .enumerate()
        .map(|(k, &o)| {
            let v = &body.values[o.0];
            g.add_value(format!("{prefix}/out{k}"), v.dtype, v.shape.clone())
        })
        .collect()
}

/// `Identity` nodes writing the last iteration's values `last` to the node's outputs `outs`.
fn finals(base: &str, what: &str, last: &[Option<ValueId>], outs: &[ValueId], keep_float: bool) -> Vec<Node> {
    last.iter().zip(outs).enumerate().map(|(i, (&s, &o))| Node { name: format!("{base}/{what}{i}"), op: Op::Identity, inputs: vec![s], outputs: vec![o], keep_float }).collect()
}

/// Nodes writing `y`: `slices` stacked on a new axis `axis` (an `Unsqueeze` each, then a `Concat`; one slice's
/// `Unsqueeze` writes `y` itself). `None` when `axis` is beyond the slices' rank.
fn stack(g: &mut Graph, name: &str, slices: &[ValueId], axis: usize, y: ValueId, keep_float: bool) -> Option<Vec<Node>> {
    let mut nodes = Vec::with_capacity(slices.len() + 1);
    let mut parts = Vec::with_capacity(slices.len());
    for (t, &s) in slices.iter().enumerate() {
        let mut shape = g.value(s).shape.clone();
        if axis > shape.len() {
            return None;
        }
        shape.insert(axis, 1);
        let dtype = g.value(s).dtype;
        let u = if slices.len() == 1 { y } else { g.add_value(format!("{name}_{t}"), dtype, shape) };
        nodes.push(Node { name: format!("{name}_{t}"), op: Op::Unsqueeze { axes: Some(vec![axis as i64]) }, inputs: vec![Some(s)], outputs: vec![u], keep_float });
        parts.push(Some(u));
    }
    if slices.len() > 1 {
        nodes.push(Node { name: name.to_string(), op: Op::Concat { axis }, inputs: parts, outputs: vec![y], keep_float });
    }
    Some(nodes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::infer::infer_graph;
    use crate::ir::{verify::verify, BinaryOp};
    use crate::runtime::{CpuEval, Session};

    /// `Loop(m, cond, v0, x)` over `(i, c, v, x) → (c', v + x, (v + x)·i)`: a running sum, and a scan output
    /// scaled by the iteration number. `c'` is `c` passed through, or `i < 100` when `computed`; `m` is a
    /// constant, or an input when `None`.
    fn loop_graph(m: Option<i64>, computed: bool) -> Graph {
        let mut body = Graph::new("body");
        let i = body.add_input("i", DType::I64, vec![]);
        let c = body.add_input("c", DType::Bool, vec![]);
        let v = body.add_input("v", DType::F32, vec![2]);
        let x = body.add_input("x", DType::F32, vec![2]);
        let s = body.add_value("s", DType::F32, vec![2]);
        body.add_node("sum", Op::Binary(BinaryOp::Add, None), vec![Some(v), Some(x)], vec![s]);
        let fi = body.add_value("fi", DType::F32, vec![]);
        body.add_node("cast", Op::Cast { to: DType::F32 }, vec![Some(i)], vec![fi]);
        let y = body.add_value("y", DType::F32, vec![2]);
        body.add_node("scale", Op::Binary(BinaryOp::Mul, None), vec![Some(s), Some(fi)], vec![y]);
        let c2 = if computed {
            let limit = body.add_constant("limit", Tensor::scalar(100i64));
            let c2 = body.add_value("c2", DType::Bool, vec![]);
            body.add_node("less", Op::Binary(BinaryOp::Less, None), vec![Some(i), Some(limit)], vec![c2]);
            c2
        } else {
            c
        };
        body.outputs = vec![c2, s, y];
        infer_graph(&mut body, &CpuEval).unwrap();
        let mut g = Graph::new("loop");
        let m = match m {
            Some(m) => g.add_constant("m", Tensor::scalar(m)),
            None => g.add_input("m", DType::I64, vec![]),
        };
        let v0 = g.add_input("v0", DType::F32, vec![2]);
        let x = g.add_input("x", DType::F32, vec![2]);
        let (v, ys) = (g.add_value("v", DType::F32, vec![]), g.add_value("ys", DType::F32, vec![]));
        g.add_node("loop", Op::Loop(LoopAttrs { body: Box::new(body), num_carried: 1 }), vec![Some(m), None, Some(v0), Some(x)], vec![v, ys]);
        g.outputs = vec![v, ys];
        infer_graph(&mut g, &CpuEval).unwrap();
        g
    }

    #[test]
    fn a_loop_with_a_known_count_unrolls_into_the_same_function() {
        for m in [1, 4] {
            let g = loop_graph(Some(m), false);
            assert_eq!(loop_iterations(&g, &g.nodes[0]), Ok(m as usize));
            let mut p = g.clone();
            super::super::prepare(&mut p);
            verify(&p).unwrap();
            let ops: Vec<String> = p.nodes.iter().map(|n| n.op.name()).collect();
            // the iteration number's Cast folds into constants
            assert!(!ops.iter().any(|o| o == "Loop" || o == "Cast") && ops.iter().filter(|o| *o == "Add").count() == m as usize, "{ops:?}");
            assert_eq!(p.value(p.outputs[1]).shape, vec![m as usize, 2]);
            let feeds = [Tensor::from_f32(vec![2], vec![0.5, -1.0]), Tensor::from_f32(vec![2], vec![1.5, 2.0])];
            let want = Session::new(g).unwrap().run(&feeds).unwrap();
            let got = Session::new(p).unwrap().run(&feeds).unwrap();
            assert_eq!(got, want, "M = {m}");
        }
    }

    #[test]
    fn a_loop_that_cannot_unroll_stays_and_says_why() {
        for (g, why) in [
            (loop_graph(Some(4), true), "its body computes the condition, which may stop it before M iterations"),
            (loop_graph(None, false), "its trip count M is known only at run time"),
            (loop_graph(Some(0), false), "it runs no iterations"),
            (loop_graph(Some(10_000), false), "it runs 10000 iterations of 6 nodes, more than the 20000 nodes"),
        ] {
            let e = loop_iterations(&g, &g.nodes[0]).unwrap_err();
            assert!(e.contains(why), "{e}");
            let mut p = g.clone();
            super::super::prepare(&mut p);
            assert!(p.nodes.iter().any(|n| matches!(n.op, Op::Loop(_))), "{why}: unrolled");
        }
    }
}
