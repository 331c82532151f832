//! Activation fusion: a Relu, or a Clip with constant bounds (Relu6 when they are 0 and 6), that is the only
//! reader of a float Conv/ConvTranspose/Gemm/Add output becomes that op's fused activation, applied in the
//! producer's output loop.

use crate::ir::{Activation, BinaryOp, Graph, Op, UnaryOp};

fn activation_of(op: &Op) -> Option<Activation> {
    match op {
        Op::Unary(UnaryOp::Relu) => Some(Activation::Relu),
        Op::Unary(UnaryOp::Clip { min, max }) if *min == 0.0 && *max == 6.0 => Some(Activation::Relu6),
        Op::Unary(UnaryOp::Clip { min, max }) => Some(Activation::Clip { min: *min, max: *max }),
        _ => None,
    }
}

/// Fuses eligible pairs; returns how many activations were fused.
pub fn run(g: &mut Graph) -> usize {
    let uses = g.use_counts();
    let producers = g.producers();
    let mut remove = vec![false; g.nodes.len()];
    let mut fused = 0;
    for i in 0..g.nodes.len() {
        let Some(act) = activation_of(&g.nodes[i].op) else { continue };
        let Some(x) = g.nodes[i].input(0) else { continue };
        let Some(p) = producers[x.0] else { continue };
        if uses[x.0] != 1 || super::is_graph_output(g, x) || remove[p] || !g.values[x.0].dtype.is_float() {
            continue;
        }
        let slot = match &mut g.nodes[p].op {
            Op::Conv(a) => &mut a.activation,
            Op::ConvTranspose(a) => &mut a.conv.activation,
            Op::Gemm { activation, .. } => activation,
            Op::Binary(BinaryOp::Add, a) => a,
            _ => continue,
        };
        if slot.is_some() {
            continue;
        }
        *slot = Some(act);
        g.nodes[p].outputs = g.nodes[i].outputs.clone();
        remove[i] = true;
        fused += 1;
    }
    super::remove_nodes(g, &remove);
    fused
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{builder::GraphBuilder, verify::verify, DType};
    use crate::runtime::CpuEval;

    #[test]
    fn fuses_relu6_into_add_and_keeps_the_output_name() {
        let mut b = GraphBuilder::with_eval("t", &CpuEval);
        let x = b.input("x", DType::F32, &[4]);
        let a = b.add(x, x).unwrap();
        let y = b.op(Op::Unary(UnaryOp::Clip { min: 0.0, max: 6.0 }), &[a]).unwrap();
        b.output(y);
        let mut g = b.finish().unwrap();
        assert_eq!(run(&mut g), 1);
        assert_eq!(g.nodes.len(), 1);
        assert_eq!(g.nodes[0].op, Op::Binary(BinaryOp::Add, Some(Activation::Relu6)));
        assert_eq!(g.nodes[0].outputs, vec![y]);
        verify(&g).unwrap();
    }

    /// A dead reader (a transpose nothing reads any more, as sink_transposes leaves them) does not keep
    /// `optimize` from fusing the Relu.
    #[test]
    fn a_dead_second_reader_does_not_block_the_fusion() {
        let mut b = GraphBuilder::with_eval("t", &CpuEval);
        let x = b.input("x", DType::F32, &[4, 3]);
        let a = b.add(x, x).unwrap();
        let _dead = b.op(Op::Transpose { perm: vec![1, 0] }, &[a]).unwrap();
        let y = b.relu(a).unwrap();
        b.output(y);
        let mut g = b.finish().unwrap();
        crate::passes::optimize(&mut g).unwrap();
        assert_eq!(g.nodes.len(), 1, "{:?}", g.nodes);
        assert_eq!(g.nodes[0].op, Op::Binary(BinaryOp::Add, Some(Activation::Relu)));
    }
}
