//! Shape-only op simplification: removes ops that do not change their input (Identity, a Reshape/Flatten/
//! Squeeze/Unsqueeze to the same shape, an identity Transpose, a Cast to the same dtype) and collapses chains
//! of reshapes into one.

use crate::ir::{Graph, Op};

/// True when `op` only changes the shape metadata of its first input.
fn is_reshape_like(op: &Op) -> bool {
    matches!(op, Op::Reshape { .. } | Op::Flatten { .. } | Op::Squeeze { .. } | Op::Unsqueeze { .. })
}

/// Simplifies in place; returns the number of nodes removed or rewritten.
pub fn run(g: &mut Graph) -> usize {
    let mut changed = 0;
    // Reshape-like of reshape-like: read the first one's input directly (the first may become dead).
    let producers = g.producers();
    for i in 0..g.nodes.len() {
        let n = &g.nodes[i];
        if !is_reshape_like(&n.op) {
            continue;
        }
        let Some(src) = n.input(0) else { continue };
        let Some(p) = producers[src.0] else { continue };
        // A Reshape reads only its input's element count, unless its target shape copies input dims (a 0
        // without allowzero): only then would reading the earlier input change the result.
        let copies_dims = match n.op {
            Op::Reshape { allowzero: false } => {
                n.input(1).and_then(|s| g.values[s.0].constant.as_ref()).is_none_or(|t| t.to_i64_vec().contains(&0))
            }
            _ => true,
        };
        if is_reshape_like(&g.nodes[p].op) && matches!(n.op, Op::Reshape { .. }) && !copies_dims {
            if let Some(orig) = g.nodes[p].input(0) {
                if !g.values[orig.0].dynamic {
                    g.nodes[i].inputs[0] = Some(orig);
                    changed += 1;
                }
            }
        }
    }
    // No-op nodes: replace uses of the output by the input.
    let mut remove = vec![false; g.nodes.len()];
    for i in 0..g.nodes.len() {
        let n = &g.nodes[i];
        let (Some(inp), Some(&out)) = (n.input(0), n.outputs.first()) else { continue };
        let (vi, vo) = (&g.values[inp.0], &g.values[out.0]);
        if vi.dynamic || vo.dynamic || vo.constant.is_some() || n.outputs.len() != 1 {
            continue;
        }
        let same_type = vi.shape == vo.shape && vi.dtype == vo.dtype;
        let noop = match &n.op {
            Op::Identity => true,
            Op::Reshape { .. } | Op::Flatten { .. } | Op::Squeeze { .. } | Op::Unsqueeze { .. } | Op::Expand => same_type,
            Op::Transpose { perm } => same_type && perm.iter().enumerate().all(|(k, &p)| k == p) && !perm.is_empty(),
            Op::Cast { to } => *to == vi.dtype,
            _ => false,
        };
        if noop && !super::is_graph_output(g, out) {
            g.replace_uses(out, inp);
            remove[i] = true;
            changed += 1;
        }
    }
    super::remove_nodes(g, &remove);
    changed
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{builder::GraphBuilder, DType, Tensor};
    use crate::runtime::CpuEval;

    #[test]
    fn removes_noop_reshape_and_identity() {
        let mut b = GraphBuilder::with_eval("t", &CpuEval);
        let x = b.input("x", DType::F32, &[2, 3]);
        let a = b.reshape(x, &[2, 3]).unwrap();
        let id = b.op(Op::Identity, &[a]).unwrap();
        let y = b.relu(id).unwrap();
        b.output(y);
        let mut g = b.finish().unwrap();
        assert_eq!(run(&mut g), 2);
        assert_eq!(g.nodes.len(), 1);
        assert_eq!(g.nodes[0].input(0), Some(x));
    }

    #[test]
    fn keeps_a_reshape_whose_zero_copies_a_dim_of_the_earlier_reshape() {
        let mut b = GraphBuilder::with_eval("t", &CpuEval);
        let x = b.input("x", DType::F32, &[2, 3, 4]);
        let axes = b.constant("axes", Tensor::from_i64(vec![1], vec![0]));
        let a = b.op(Op::Unsqueeze { axes: None }, &[x, axes]).unwrap();
        let y = b.reshape(a, &[0, -1]).unwrap();
        b.output(y);
        let mut g = b.finish().unwrap();
        run(&mut g);
        assert_eq!(g.nodes[1].input(0), Some(a));
    }
}
