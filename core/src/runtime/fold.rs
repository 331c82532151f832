//! Constant folding on the CPU: the [`ConstEval`] that shape inference (`ir::infer`) uses to run nodes whose
//! inputs are all constant.

use super::kernels::{self, Scratch};
use crate::ir::{ConstEval, Op, Tensor};

/// Runs constant nodes with the CPU kernels ([`kernels::eval`]).
#[derive(Clone, Copy, Debug, Default)]
pub struct CpuEval;

impl ConstEval for CpuEval {
    fn eval(&self, op: &Op, inputs: &[Option<&Tensor>], outputs: &mut [Tensor]) -> Result<(), String> {
        kernels::eval(op, inputs, outputs, &mut Scratch::default())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::infer::infer_graph;
    use crate::ir::{BinaryOp, DType, Graph};

    #[test]
    fn folds_constant_chains_and_propagates_dynamic() {
        let mut g = Graph::new("t");
        let x = g.add_input("x", DType::F32, vec![2, 3]);
        let c = g.add_constant("c", Tensor::from_f32(vec![3], vec![1.0, 2.0, 3.0]));
        let d = g.add_constant("d", Tensor::from_f32(vec![3], vec![1.0, 1.0, 1.0]));
        let cd = g.add_value("cd", DType::F32, vec![]);
        g.add_node("fold", Op::Binary(BinaryOp::Add, None), vec![Some(c), Some(d)], vec![cd]);
        let y = g.add_value("y", DType::F32, vec![]);
        g.add_node("add", Op::Binary(BinaryOp::Add, None), vec![Some(x), Some(cd)], vec![y]);
        g.outputs.push(y);
        infer_graph(&mut g, &CpuEval).unwrap();
        assert_eq!(g.constant(cd).unwrap().as_f32().unwrap(), &[2.0, 3.0, 4.0]);
        assert_eq!(g.value(y).shape, vec![2, 3]);
        assert!(g.constant(y).is_none());

        let mut bad = Graph::new("bad");
        let a = bad.add_input("a", DType::F32, vec![2]);
        let b = bad.add_input("b", DType::F32, vec![3]);
        let o = bad.add_value("o", DType::F32, vec![]);
        bad.add_node("mismatch", Op::Binary(BinaryOp::Mul, None), vec![Some(a), Some(b)], vec![o]);
        let e = infer_graph(&mut bad, &CpuEval).unwrap_err().to_string();
        assert!(e.contains("mismatch") && e.contains("broadcast"), "{e}");
    }
}
