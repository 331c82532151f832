//! Float rewrites that make a graph quantizable, applied before calibration (so every new value gets a
//! range): division by a constant becomes multiplication by its reciprocal, and HardSigmoid
//! (`clip(αx + β, 0, 1)`) becomes a Mul and an Add with a fused clip — int8 TFLite has kernels for those,
//! not for DIV or a hard sigmoid. The rewritten graph computes the same function.

use crate::ir::{Activation, BinaryOp, DType, Graph, Node, Op, Tensor, TensorData, UnaryOp};

/// Rewrites `g` in place (see the module docs).
pub fn prepare(g: &mut Graph) {
    let nodes = std::mem::take(&mut g.nodes);
    let mut out = Vec::with_capacity(nodes.len());
    for mut n in nodes {
        match n.op {
            Op::Binary(BinaryOp::Div, act) => {
                let rhs = n.input(1).and_then(|b| g.value(b).constant.clone());
                match rhs {
                    Some(Tensor { shape, data: TensorData::F32(v) }) if g.value(n.outputs[0]).dtype == DType::F32 => {
                        let name = format!("{}/reciprocal", g.value(n.input(1).expect("present")).name);
                        let r = g.add_constant(name, Tensor::from_f32(shape, v.iter().map(|x| 1.0 / x).collect()));
                        n.op = Op::Binary(BinaryOp::Mul, act);
                        n.inputs[1] = Some(r);
                        out.push(n);
                    }
                    _ => out.push(n),
                }
            }
            Op::Unary(UnaryOp::HardSigmoid { alpha, beta }) if g.value(n.outputs[0]).dtype == DType::F32 => {
                let x = n.input(0).expect("unary input");
                let y = n.outputs[0];
                let shape = g.value(x).shape.clone();
                let a = g.add_constant(format!("{}/alpha", n.name), Tensor::from_f32(vec![], vec![alpha]));
                let b = g.add_constant(format!("{}/beta", n.name), Tensor::from_f32(vec![], vec![beta]));
                let ax = g.add_value(format!("{}/scaled", g.value(y).name), DType::F32, shape);
                out.push(Node { name: format!("{}/mul", n.name), op: Op::Binary(BinaryOp::Mul, None), inputs: vec![Some(x), Some(a)], outputs: vec![ax] });
                out.push(Node {
                    name: n.name.clone(),
                    op: Op::Binary(BinaryOp::Add, Some(Activation::Clip { min: 0.0, max: 1.0 })),
                    inputs: vec![Some(ax), Some(b)],
                    outputs: vec![y],
                });
            }
            _ => out.push(n),
        }
    }
    g.nodes = out;
}
