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
    use crate::ir::{BinaryOp, DType, Op, Tensor, UnaryOp};

    #[test]
    fn folds_a_constant_subgraph() {
        let mut g = Graph::new("t");
        let x = g.add_input("x", DType::F32, vec![2]);
        let c = g.add_constant("c", Tensor::from_f32(vec![2], vec![-1.0, 4.0]));
        let a = g.add_value("a", DType::F32, vec![]);
        let y = g.add_value("y", DType::F32, vec![]);
        g.add_node("abs", Op::Unary(UnaryOp::Abs), vec![Some(c)], vec![a]);
        g.add_node("mul", Op::Binary(BinaryOp::Mul, None), vec![Some(x), Some(a)], vec![y]);
        g.outputs.push(y);
        assert_eq!(run(&mut g).unwrap(), 1);
        assert_eq!(g.nodes.len(), 1);
        assert_eq!(g.constant(a).unwrap().as_f32().unwrap(), &[1.0, 4.0]);
    }
}
