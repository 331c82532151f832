//! Constant folding: evaluates every node whose inputs are all constants (with the CPU kernels, through
//! shape inference) and removes it, leaving its outputs as constants.

use crate::ir::{infer, Graph};
use crate::runtime::CpuEval;
use crate::Result;

/// Folds and removes constant nodes; returns how many nodes were removed.
pub fn run(g: &mut Graph) -> Result<usize> {
    infer::infer_graph(g, &CpuEval)?;
    let before = g.nodes.len();
    let values = &g.values;
    g.nodes.retain(|n| n.outputs.iter().any(|o| values[o.0].constant.is_none()));
    Ok(before - g.nodes.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{builder::GraphBuilder, BinaryOp, DType, Op, Tensor, UnaryOp};

    #[test]
    fn folds_a_constant_subgraph() {
        // GraphBuilder::new folds nothing, so the Abs of a constant is still a node for the pass to fold.
        let mut b = GraphBuilder::new("t");
        let x = b.input("x", DType::F32, &[2]);
        let c = b.constant("c", Tensor::from_f32(vec![2], vec![-1.0, 4.0]));
        let a = b.op(Op::Unary(UnaryOp::Abs), &[c]).unwrap();
        let y = b.op(Op::Binary(BinaryOp::Mul, None), &[x, a]).unwrap();
        b.output(y);
        let mut g = b.finish().unwrap();
        assert_eq!(run(&mut g).unwrap(), 1);
        assert_eq!(g.nodes.len(), 1);
        assert_eq!(g.constant(a).unwrap().as_f32().unwrap(), &[1.0, 4.0]);
    }
}
