//! SiLU fusion for the CPU runtime: `Mul(x, Sigmoid(x))` (either operand order), where `x` is the float output
//! of a Conv, ConvTranspose or Gemm without a fused activation and nothing else reads `x` or the sigmoid,
//! becomes that op's fused [`Activation::Silu`], applied in its output loop while the block is in cache
//! (YOLO-style detectors spend a third of their time in the two separate passes otherwise).
//!
//! The fused form computes `x · sigmoid(x)` with the same sigmoid as the Sigmoid kernel, so a fused and an
//! unfused run give the same numbers. Only the CPU runtime runs this pass, when it plans a session
//! ([`crate::runtime::Session::new`]): the other targets have no fused SiLU, so [`super::optimize`] leaves
//! it out.

use crate::ir::{Activation, BinaryOp, Graph, Op, UnaryOp};

/// Fuses eligible Sigmoid/Mul pairs; returns how many were fused.
pub fn run(g: &mut Graph) -> usize {
    let uses = g.use_counts();
    let producers = g.producers();
    let mut remove = vec![false; g.nodes.len()];
    let mut fused = 0;
    for m in 0..g.nodes.len() {
        if g.nodes[m].op != Op::Binary(BinaryOp::Mul, None) {
            continue;
        }
        let (Some(a), Some(b)) = (g.nodes[m].input(0), g.nodes[m].input(1)) else { continue };
        for (x, s) in [(a, b), (b, a)] {
            let (Some(sp), Some(p)) = (producers[s.0], producers[x.0]) else { continue };
            let sig = &g.nodes[sp];
            if sig.op != Op::Unary(UnaryOp::Sigmoid) || sig.input(0) != Some(x) || remove[sp] || remove[p] {
                continue;
            }
            let xv = &g.values[x.0];
            if uses[x.0] != 2 || uses[s.0] != 1 || !xv.dtype.is_float() || xv.quant.is_some() || xv.shape != g.values[g.nodes[m].outputs[0].0].shape {
                continue;
            }
            if super::is_graph_output(g, x) || super::is_graph_output(g, s) || g.nodes[p].outputs.len() != 1 {
                continue;
            }
            let slot = match &mut g.nodes[p].op {
                Op::Conv(c) => &mut c.activation,
                Op::ConvTranspose(c) => &mut c.conv.activation,
                Op::Gemm { activation, .. } => activation,
                _ => continue,
            };
            if slot.is_some() {
                continue;
            }
            *slot = Some(Activation::Silu);
            g.nodes[p].outputs = g.nodes[m].outputs.clone();
            remove[sp] = true;
            remove[m] = true;
            fused += 1;
            break;
        }
    }
    super::remove_nodes(g, &remove);
    fused
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{builder::GraphBuilder, verify::verify, AutoPad, ConvAttrs, DType, Graph, Tensor};
    use crate::runtime::{CpuEval, Session};

    fn conv_attrs() -> ConvAttrs {
        ConvAttrs { kernel_shape: vec![], strides: vec![], dilations: vec![], pads: vec![1, 1, 1, 1], auto_pad: AutoPad::NotSet, group: 1, activation: None }
    }

    /// x = Conv(input); y = Mul(x, Sigmoid(x)) (operands flipped when `flip`); `also_out`: x is a graph output too.
    fn conv_silu(flip: bool, also_out: bool) -> Graph {
        let mut b = GraphBuilder::with_eval("t", &CpuEval);
        let i = b.input("i", DType::F32, &[1, 2, 5, 6]);
        let w = b.constant("w", Tensor::from_f32(vec![3, 2, 3, 3], (0..54).map(|k| ((k * 7 % 11) as f32 - 5.0) * 0.3).collect()));
        let bias = b.constant("b", Tensor::from_f32(vec![3], vec![0.5, -1.0, 0.25]));
        let x = b.op(Op::Conv(conv_attrs()), &[i, w, bias]).unwrap();
        let s = b.op(Op::Unary(UnaryOp::Sigmoid), &[x]).unwrap();
        let y = if flip { b.mul(s, x) } else { b.mul(x, s) }.unwrap();
        b.output(y);
        if also_out {
            b.output(x);
        }
        b.finish().unwrap()
    }

    #[test]
    fn fuses_sigmoid_mul_into_the_conv_with_the_same_numbers() {
        let input = Tensor::from_f32(vec![1, 2, 5, 6], (0..60).map(|k| (k as f32 * 0.37).sin() * 4.0).collect());
        for flip in [false, true] {
            let mut g = conv_silu(flip, false);
            let y = g.outputs[0];
            assert_eq!(run(&mut g), 1, "flip {flip}");
            assert_eq!(g.nodes.len(), 1);
            let Op::Conv(a) = &g.nodes[0].op else { panic!("{:?}", g.nodes[0].op) };
            assert_eq!(a.activation, Some(Activation::Silu));
            assert_eq!(g.nodes[0].outputs, vec![y]);
            verify(&g).unwrap();
        }
        // Session::new fuses by itself; its output equals x·sigmoid(x) computed from the plain conv's output
        // with the sigmoid of the Sigmoid kernel (the same function), element by element
        let g = conv_silu(false, false);
        let mut s = Session::new(g.clone()).unwrap();
        assert_eq!(s.graph().nodes.len(), 1);
        let fused = s.run(std::slice::from_ref(&input)).unwrap().remove(0);
        let mut plain = g.clone();
        let x = plain.nodes[0].outputs[0];
        plain.nodes.truncate(2); // Conv, Sigmoid
        plain.outputs = vec![x, plain.nodes[1].outputs[0]];
        let outs = Session::new(plain).unwrap().run(std::slice::from_ref(&input)).unwrap();
        let (xv, sv) = (outs[0].as_f32().unwrap(), outs[1].as_f32().unwrap());
        let want: Vec<f32> = xv.iter().zip(sv).map(|(x, s)| x * s).collect();
        assert_eq!(fused.as_f32().unwrap(), &want[..]);
        assert!(want.iter().any(|&v| v < -0.1) && want.iter().any(|&v| v > 1.0), "the test data spans the curve");
    }

    #[test]
    fn leaves_pairs_whose_values_are_read_elsewhere() {
        // the conv output is also a graph output
        let mut g = conv_silu(false, true);
        assert_eq!(run(&mut g), 0);
        assert_eq!(g.nodes.len(), 3);
        // a Sigmoid of one value multiplied by another
        let mut b = GraphBuilder::with_eval("t", &CpuEval);
        let i = b.input("i", DType::F32, &[4]);
        let j = b.input("j", DType::F32, &[4]);
        let s = b.op(Op::Unary(UnaryOp::Sigmoid), &[i]).unwrap();
        let y = b.mul(j, s).unwrap();
        b.output(y);
        let mut g = b.finish().unwrap();
        assert_eq!(run(&mut g), 0);
        // the producer already has an activation
        let mut g = conv_silu(false, false);
        let Op::Conv(a) = &mut g.nodes[0].op else { unreachable!() };
        a.activation = Some(Activation::Relu);
        assert_eq!(run(&mut g), 0);
    }
}
