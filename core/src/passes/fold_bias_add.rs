//! Bias folding: a Conv or ConvTranspose with constant weights whose only reader is an `Add` of a constant that
//! is one value per output channel (shape `[C, 1, .., 1]` after leading ones, or a single value) takes that
//! constant into its bias. PaddlePaddle's exporter and others write every convolution's bias this way
//! (`Conv` without bias, then `Add`); folded, the CPU runs one op instead of two and int8 export keeps the bias
//! in the convolution's int32 bias instead of an int8 constant added after it (an extra rounding per layer).

use crate::ir::{Graph, Op, Tensor, ValueId};
use crate::ir::ops::BinaryOp;

/// Per-channel values of `v` for a convolution output of `shape` (channel axis 1), when `v` is a constant that
/// varies along that axis only.
fn per_channel(g: &Graph, v: ValueId, shape: &[usize]) -> Option<Vec<f32>> {
    let t = g.constant(v)?;
    let vals = t.as_f32()?;
    let c = *shape.get(1)?;
    if vals.len() == 1 {
        return Some(vec![vals[0]; c]);
    }
    if vals.len() != c || t.shape.len() > shape.len() {
        return None;
    }
    // right-aligned broadcasting: the constant's axis holding C must land on axis 1, every other axis be 1
    let offset = shape.len() - t.shape.len();
    let ok = t.shape.iter().enumerate().all(|(i, &d)| if i + offset == 1 { d == c } else { d == 1 });
    ok.then(|| vals.to_vec())
}

/// Folds every eligible Conv/ConvTranspose → Add pair; returns how many were folded.
pub fn run(g: &mut Graph) -> usize {
    let uses = g.use_counts();
    let producers = g.producers();
    let mut folded = 0;
    let mut remove = vec![false; g.nodes.len()];
    for add_idx in 0..g.nodes.len() {
        let Op::Binary(BinaryOp::Add, None) = g.nodes[add_idx].op else { continue };
        let add = g.nodes[add_idx].clone();
        let (Some(a), Some(b)) = (add.input(0), add.input(1)) else { continue };
        // the convolution on one side, the constant on the other
        let Some((x, k, p)) = [(a, b), (b, a)].into_iter().find_map(|(x, k)| {
            let p = producers[x.0]?;
            matches!(g.nodes[p].op, Op::Conv(_) | Op::ConvTranspose(_)).then_some((x, k, p))
        }) else {
            continue;
        };
        if uses[x.0] != 1 || super::is_graph_output(g, x) || remove[p] || g.value(add.outputs[0]).shape != g.value(x).shape {
            continue;
        }
        let conv = g.nodes[p].clone();
        let activation_free = match &conv.op {
            Op::Conv(c) => c.activation.is_none(),
            Op::ConvTranspose(c) => c.conv.activation.is_none(),
            _ => false,
        };
        let shape = g.value(x).shape.clone();
        let (Some(add_bias), true) = (per_channel(g, k, &shape), activation_free) else { continue };
        if g.value(x).dtype != crate::ir::DType::F32 || conv.input(1).and_then(|w| g.constant(w)).is_none() {
            continue;
        }
        let old: Vec<f32> = match conv.input(2) {
            None => vec![0.0; add_bias.len()],
            Some(b) => match g.constant(b).and_then(|t| t.as_f32()) {
                Some(v) if v.len() == add_bias.len() => v.to_vec(),
                _ => continue,
            },
        };
        let bias: Vec<f32> = old.iter().zip(&add_bias).map(|(o, a)| o + a).collect();
        let base = if conv.name.is_empty() { format!("node{p}") } else { conv.name.clone() };
        let c = bias.len();
        let b_new = g.add_constant(format!("{base}.bias_add_folded"), Tensor::from_f32(vec![c], bias));
        let node = &mut g.nodes[p];
        node.inputs.resize(3, None);
        node.inputs[2] = Some(b_new);
        node.outputs = add.outputs.clone();
        remove[add_idx] = true;
        folded += 1;
    }
    super::remove_nodes(g, &remove);
    folded
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{builder::GraphBuilder, AutoPad, ConvAttrs, DType};
    use crate::runtime::{CpuEval, Session};

    fn conv(gb: &mut GraphBuilder, x: ValueId, bias: bool) -> ValueId {
        let w = gb.constant("w", Tensor::from_f32(vec![3, 2, 3, 3], (0..54).map(|i| (i as f32 * 0.37).sin()).collect()));
        let mut ins = vec![x, w];
        if bias {
            ins.push(gb.constant("b", Tensor::from_f32(vec![3], vec![0.1, -0.2, 0.3])));
        }
        let attrs = ConvAttrs { kernel_shape: vec![], strides: vec![], dilations: vec![], pads: vec![1; 4], auto_pad: AutoPad::NotSet, group: 1, activation: None };
        gb.op(Op::Conv(attrs), &ins).unwrap()
    }

    /// Folding must compute what the unfolded graph computes, for the bias shapes exporters write; constants
    /// that vary along another axis stay an Add.
    #[test]
    fn a_per_channel_add_after_a_conv_becomes_its_bias() {
        let input = Tensor::from_f32(vec![1, 2, 4, 4], (0..32).map(|i| (i as f32 * 0.11).cos()).collect());
        for (shape, has_bias, conv_first, folds) in [
            (vec![1, 3, 1, 1], false, true, true),
            (vec![3, 1, 1], true, false, true),
            (vec![1], false, true, true),
            (vec![4], false, true, false),        // [4] broadcasts along the width, not the channels
            (vec![1, 3, 4, 1], false, true, false), // varies along the height too
        ] {
            let mut gb = GraphBuilder::with_eval("t", &CpuEval);
            let x = gb.input("x", DType::F32, &[1, 2, 4, 4]);
            let y = conv(&mut gb, x, has_bias);
            let n: usize = shape.iter().product();
            let k = gb.constant("k", Tensor::from_f32(shape.clone(), (0..n).map(|i| 0.5 - i as f32 * 0.25).collect()));
            let z = if conv_first { gb.add(y, k) } else { gb.add(k, y) }.unwrap();
            gb.output(z);
            let mut g = gb.finish().unwrap();
            let want = Session::new(g.clone()).unwrap().run(std::slice::from_ref(&input)).unwrap();
            assert_eq!(run(&mut g), usize::from(folds), "{shape:?}");
            super::super::dce::run(&mut g);
            assert_eq!(g.nodes.len(), if folds { 1 } else { 2 }, "{shape:?}");
            let got = Session::new(g).unwrap().run(std::slice::from_ref(&input)).unwrap();
            for (a, b) in want[0].as_f32().unwrap().iter().zip(got[0].as_f32().unwrap()) {
                assert!((a - b).abs() <= 1e-5 * (1.0 + a.abs()), "{shape:?}: {a} vs {b}");
            }
        }
    }
}
