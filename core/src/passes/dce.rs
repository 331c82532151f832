//! Dead-code elimination: removes nodes whose outputs nobody reads, then drops values nothing refers to
//! (unused weights included) and renumbers the rest.

use crate::ir::{Graph, ValueId};

/// Removes dead nodes and unreferenced values; returns the number of nodes removed.
pub fn run(g: &mut Graph) -> usize {
    let before = g.nodes.len();
    // Walk backwards: a node is live when one of its outputs is a graph output or read by a live node.
    let mut needed = vec![false; g.values.len()];
    for o in &g.outputs {
        needed[o.0] = true;
    }
    let mut live = vec![false; g.nodes.len()];
    for (i, n) in g.nodes.iter().enumerate().rev() {
        if n.outputs.iter().any(|o| needed[o.0]) {
            live[i] = true;
            for v in n.inputs.iter().flatten() {
                needed[v.0] = true;
            }
        }
    }
    let mut it = live.iter();
    g.nodes.retain(|_| *it.next().expect("one flag per node"));
    compact(g);
    before - g.nodes.len()
}

/// Drops values that no node, graph input or graph output refers to, renumbering ids.
pub fn compact(g: &mut Graph) {
    let mut used = vec![false; g.values.len()];
    for &i in g.inputs.iter().chain(&g.outputs) {
        used[i.0] = true;
    }
    for n in &g.nodes {
        for v in n.inputs.iter().flatten().chain(&n.outputs) {
            used[v.0] = true;
        }
    }
    if used.iter().all(|&u| u) {
        return;
    }
    let mut remap = vec![usize::MAX; g.values.len()];
    let mut kept = Vec::with_capacity(g.values.len());
    for (i, v) in std::mem::take(&mut g.values).into_iter().enumerate() {
        if used[i] {
            remap[i] = kept.len();
            kept.push(v);
        }
    }
    g.values = kept;
    let m = |v: &mut ValueId| v.0 = remap[v.0];
    g.inputs.iter_mut().for_each(m);
    g.outputs.iter_mut().for_each(m);
    for n in &mut g.nodes {
        n.inputs.iter_mut().flatten().for_each(m);
        n.outputs.iter_mut().for_each(m);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{builder::GraphBuilder, verify::verify, DType, Op, Tensor, UnaryOp};
    use crate::runtime::CpuEval;

    #[test]
    fn removes_dead_nodes_and_unused_weights() {
        let mut b = GraphBuilder::with_eval("t", &CpuEval);
        let x = b.input("x", DType::F32, &[2]);
        let _unused = b.constant("w", Tensor::zeros(DType::F32, vec![1000]));
        b.named_op("dead", "dead", Op::Unary(UnaryOp::Neg), &[Some(x)]).unwrap();
        let y = b.named_op("live", "y", Op::Unary(UnaryOp::Relu), &[Some(x)]).unwrap();
        b.output(y);
        let mut g = b.finish().unwrap();
        assert_eq!(run(&mut g), 1);
        assert_eq!(g.values.len(), 2);
        assert_eq!(g.nodes[0].name, "live");
        assert_eq!(g.value(g.outputs[0]).name, "y");
        verify(&g).unwrap();
    }
}
