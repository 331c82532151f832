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
    use crate::ir::builder::GraphBuilder;
    use crate::ir::{BinaryOp, DType};

    #[test]
    fn folds_constant_chains_and_propagates_dynamic() {
        // The builder infers each node as it is added, folding through CpuEval.
        let mut gb = GraphBuilder::with_eval("t", &CpuEval);
        let x = gb.input("x", DType::F32, &[2, 3]);
        let c = gb.constant("c", Tensor::from_f32(vec![3], vec![1.0, 2.0, 3.0]));
        let d = gb.constant("d", Tensor::from_f32(vec![3], vec![1.0, 1.0, 1.0]));
        let cd = gb.add(c, d).unwrap();
        let y = gb.add(x, cd).unwrap();
        gb.output(y);
        let g = gb.finish().unwrap();
        assert_eq!(g.constant(cd).unwrap().as_f32().unwrap(), &[2.0, 3.0, 4.0]);
        assert_eq!(g.value(y).shape, vec![2, 3]);
        assert!(g.constant(y).is_none());

        let mut bad = GraphBuilder::with_eval("bad", &CpuEval);
        let a = bad.input("a", DType::F32, &[2]);
        let b = bad.input("b", DType::F32, &[3]);
        let e = bad.named_op("mismatch", "o", Op::Binary(BinaryOp::Mul, None), &[Some(a), Some(b)]).unwrap_err().to_string();
        assert!(e.contains("mismatch") && e.contains("broadcast"), "{e}");
    }
}
