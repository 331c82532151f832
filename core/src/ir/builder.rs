//! A builder for graphs written in Rust: add inputs, constants and ops; shapes are inferred as you go, so a
//! mistake (shapes that do not fit) is reported at the line that makes it.
//!
//! Nodes whose inputs are all constant are folded by the [`ConstEval`] given to
//! [`GraphBuilder::with_eval`] (the CPU runtime's is `runtime::CpuEval`); [`GraphBuilder::new`] folds nothing.
//!
//! ```
//! use tpu_sdk_core::ir::{builder::GraphBuilder, DType, Tensor};
//! use tpu_sdk_core::runtime::CpuEval;
//! let mut b = GraphBuilder::with_eval("mlp", &CpuEval);
//! let x = b.input("x", DType::F32, &[1, 4]);
//! let w = b.constant("w", Tensor::from_f32(vec![4, 2], vec![0.5; 8]));
//! let h = b.matmul(x, w).unwrap();
//! let y = b.relu(h).unwrap();
//! b.output(y);
//! let g = b.finish().unwrap();
//! assert_eq!(g.value(g.outputs[0]).shape, vec![1, 2]);
//! ```

use super::infer::{self, NoFold};
use super::{verify, BinaryOp, ConstEval, DType, Graph, Op, Tensor, UnaryOp, ValueId};
use crate::Result;

/// Builds a [`Graph`] node by node.
pub struct GraphBuilder<'e> {
    g: Graph,
    eval: &'e dyn ConstEval,
}

impl std::fmt::Debug for GraphBuilder<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GraphBuilder").field("g", &self.g).finish_non_exhaustive()
    }
}

impl GraphBuilder<'static> {
    /// An empty graph called `name` that folds nothing (see [`GraphBuilder::with_eval`]).
    pub fn new(name: impl Into<String>) -> GraphBuilder<'static> {
        GraphBuilder::with_eval(name, &NoFold)
    }
}

impl<'e> GraphBuilder<'e> {
    /// An empty graph called `name`; `eval` folds nodes whose inputs are all constant.
    pub fn with_eval(name: impl Into<String>, eval: &'e dyn ConstEval) -> GraphBuilder<'e> {
        GraphBuilder { g: Graph::new(name), eval }
    }

    /// Adds a graph input.
    pub fn input(&mut self, name: &str, dtype: DType, shape: &[usize]) -> ValueId {
        self.g.add_input(name, dtype, shape.to_vec())
    }

    /// Adds a constant (a weight).
    pub fn constant(&mut self, name: &str, t: Tensor) -> ValueId {
        self.g.add_constant(name, t)
    }

    /// Adds a node with `n_outputs` outputs and infers their types; absent optional inputs are `None`.
    pub fn node(&mut self, op: Op, inputs: &[Option<ValueId>], n_outputs: usize) -> Result<Vec<ValueId>> {
        let base = format!("{}_{}", op.name().to_lowercase(), self.g.nodes.len());
        let names: Vec<String> =
            (0..n_outputs).map(|k| if n_outputs == 1 { base.clone() } else { format!("{base}_{k}") }).collect();
        self.add_node(base, op, inputs, names)
    }

    /// Adds a single-output node called `node` whose output value is called `output` (for a graph whose
    /// names matter, e.g. to a test that looks them up).
    pub fn named_op(&mut self, node: &str, output: &str, op: Op, inputs: &[Option<ValueId>]) -> Result<ValueId> {
        Ok(self.add_node(node.to_string(), op, inputs, vec![output.to_string()])?[0])
    }

    /// Adds the node `name` with one output value per name in `outputs`, infers their types, and takes it
    /// back out when inference fails.
    fn add_node(&mut self, name: String, op: Op, inputs: &[Option<ValueId>], outputs: Vec<String>) -> Result<Vec<ValueId>> {
        let idx = self.g.nodes.len();
        let n_outputs = outputs.len();
        let outs: Vec<ValueId> = outputs.into_iter().map(|o| self.g.add_value(o, DType::F32, vec![])).collect();
        self.g.add_node(name, op, inputs.to_vec(), outs.clone());
        if let Err(e) = infer::infer_node(&mut self.g, idx, self.eval) {
            self.g.nodes.pop();
            self.g.values.truncate(self.g.values.len() - n_outputs);
            return Err(e);
        }
        Ok(outs)
    }

    /// Adds a single-output node.
    pub fn op(&mut self, op: Op, inputs: &[ValueId]) -> Result<ValueId> {
        let ins: Vec<Option<ValueId>> = inputs.iter().map(|&v| Some(v)).collect();
        Ok(self.node(op, &ins, 1)?[0])
    }

    /// `a + b` with broadcasting.
    pub fn add(&mut self, a: ValueId, b: ValueId) -> Result<ValueId> {
        self.op(Op::Binary(BinaryOp::Add, None), &[a, b])
    }

    /// `a * b` with broadcasting.
    pub fn mul(&mut self, a: ValueId, b: ValueId) -> Result<ValueId> {
        self.op(Op::Binary(BinaryOp::Mul, None), &[a, b])
    }

    /// Matrix product (numpy semantics).
    pub fn matmul(&mut self, a: ValueId, b: ValueId) -> Result<ValueId> {
        self.op(Op::MatMul, &[a, b])
    }

    /// max(x, 0).
    pub fn relu(&mut self, x: ValueId) -> Result<ValueId> {
        self.op(Op::Unary(UnaryOp::Relu), &[x])
    }

    /// Softmax over the last axis.
    pub fn softmax(&mut self, x: ValueId) -> Result<ValueId> {
        let rank = self.g.value(x).shape.len();
        self.op(Op::Softmax { axis: rank.saturating_sub(1) }, &[x])
    }

    /// Reshape to a static shape.
    pub fn reshape(&mut self, x: ValueId, shape: &[i64]) -> Result<ValueId> {
        let s = self.g.add_constant(format!("shape_{}", self.g.values.len()), Tensor::from_i64(vec![shape.len()], shape.to_vec()));
        self.op(Op::Reshape { allowzero: false }, &[x, s])
    }

    /// Marks a graph output.
    pub fn output(&mut self, v: ValueId) {
        self.g.outputs.push(v);
    }

    /// The graph so far (for reading shapes while building).
    pub fn graph(&self) -> &Graph {
        &self.g
    }

    /// Verifies and returns the graph.
    pub fn finish(self) -> Result<Graph> {
        verify::verify(&self.g)?;
        Ok(self.g)
    }
}

#[cfg(test)]
mod tests {
    use super::*;


    #[test]
    fn reports_a_shape_error_at_the_offending_op_and_stays_usable() {
        let mut b = GraphBuilder::new("t");
        let x = b.input("x", DType::F32, &[2, 3]);
        let w = b.constant("w", Tensor::zeros(DType::F32, vec![4, 5]));
        assert!(b.matmul(x, w).is_err());
        let y = b.relu(x).unwrap();
        b.output(y);
        let g = b.finish().unwrap();
        assert_eq!(g.nodes.len(), 1);
    }
}
