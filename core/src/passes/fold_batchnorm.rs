//! BatchNorm folding: a Conv (or ConvTranspose with one group, or Gemm) with constant weights whose only
//! reader is an inference BatchNormalization with constant parameters absorbs it into its weights and bias:
//! `w' = w * s`, `b' = (b - mean) * s + beta` with `s = gamma / sqrt(var + eps)` per output channel.

use crate::ir::{Graph, Op, Tensor};

fn f32s(g: &Graph, v: Option<crate::ir::ValueId>) -> Option<Vec<f32>> {
    v.and_then(|v| g.constant(v)).and_then(|t| t.as_f32()).map(|s| s.to_vec())
}

/// Folds every eligible Conv/ConvTranspose/Gemm → BatchNorm pair; returns how many were folded.
pub fn run(g: &mut Graph) -> usize {
    let uses = g.use_counts();
    let producers = g.producers();
    let mut folded = 0;
    let mut remove = vec![false; g.nodes.len()];
    for bn_idx in 0..g.nodes.len() {
        let Op::BatchNorm { epsilon } = g.nodes[bn_idx].op else { continue };
        let bn = g.nodes[bn_idx].clone();
        let Some(x) = bn.input(0) else { continue };
        let Some(p) = producers[x.0] else { continue };
        if uses[x.0] != 1 || super::is_graph_output(g, x) || remove[p] {
            continue;
        }
        let (Some(gamma), Some(beta), Some(mean), Some(var)) =
            (f32s(g, bn.input(1)), f32s(g, bn.input(2)), f32s(g, bn.input(3)), f32s(g, bn.input(4)))
        else {
            continue;
        };
        let c = gamma.len();
        if [beta.len(), mean.len(), var.len()].iter().any(|&l| l != c) {
            continue;
        }
        let s: Vec<f32> = (0..c).map(|i| gamma[i] / (var[i] + epsilon).sqrt()).collect();
        let prod = g.nodes[p].clone();
        let Some(w_id) = prod.input(1) else { continue };
        let Some(w) = g.constant(w_id).and_then(|t| t.as_f32()).map(|s| s.to_vec()) else { continue };
        let w_shape = g.value(w_id).shape.clone();
        let new_w: Vec<f32>;
        let old_bias: Vec<f32>;
        let mut new_op = prod.op.clone();
        match &prod.op {
            Op::Conv(a) if a.activation.is_none() && w_shape.first() == Some(&c) => {
                let per = w.len() / c;
                new_w = w.iter().enumerate().map(|(i, &v)| v * s[i / per]).collect();
                old_bias = match prod.input(2) {
                    Some(b) => match f32s(g, Some(b)) {
                        Some(b) if b.len() == c => b,
                        _ => continue,
                    },
                    None => vec![0.0; c],
                };
            }
            Op::ConvTranspose(a) if a.conv.activation.is_none() && a.conv.group <= 1 && w_shape.len() >= 2 && w_shape[1] == c => {
                let inner: usize = w_shape[2..].iter().product();
                new_w = w.iter().enumerate().map(|(i, &v)| v * s[(i / inner) % c]).collect();
                old_bias = match prod.input(2) {
                    Some(b) => match f32s(g, Some(b)) {
                        Some(b) if b.len() == c => b,
                        _ => continue,
                    },
                    None => vec![0.0; c],
                };
            }
            Op::Gemm { alpha, beta: gb, trans_b, activation: None, .. } if w_shape.len() == 2 => {
                let (k, n) = if *trans_b { (w_shape[1], w_shape[0]) } else { (w_shape[0], w_shape[1]) };
                if n != c {
                    continue;
                }
                new_w = w
                    .iter()
                    .enumerate()
                    .map(|(i, &v)| {
                        let col = if *trans_b { i / k } else { i % n };
                        v * alpha * s[col]
                    })
                    .collect();
                old_bias = match prod.input(2) {
                    Some(b) => match g.constant(b).and_then(|t| t.as_f32()) {
                        Some(v) if v.len() == c && g.value(b).shape.last() == Some(&c) => v.iter().map(|x| x * gb).collect(),
                        Some(v) if v.len() == 1 => vec![v[0] * gb; c],
                        _ => continue,
                    },
                    None => vec![0.0; c],
                };
                if let Op::Gemm { alpha, beta, .. } = &mut new_op {
                    *alpha = 1.0;
                    *beta = 1.0;
                }
            }
            _ => continue,
        }
        let new_b: Vec<f32> = (0..c).map(|i| (old_bias[i] - mean[i]) * s[i] + beta[i]).collect();
        let base = if prod.name.is_empty() { format!("node{p}") } else { prod.name.clone() };
        let w_new = g.add_constant(format!("{base}.weight_bnfolded"), Tensor::from_f32(w_shape, new_w));
        let b_new = g.add_constant(format!("{base}.bias_bnfolded"), Tensor::from_f32(vec![c], new_b));
        let node = &mut g.nodes[p];
        node.op = new_op;
        node.inputs = vec![node.inputs[0], Some(w_new), Some(b_new)];
        node.outputs = bn.outputs.clone();
        remove[bn_idx] = true;
        folded += 1;
    }
    super::remove_nodes(g, &remove);
    folded
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{builder::GraphBuilder, AutoPad, ConvAttrs, DType};
    use crate::runtime::CpuEval;
    use crate::runtime::Session;

    /// Conv→BN folded must compute what the unfolded graph computes (the kernels are checked against
    /// onnxruntime separately; this checks the algebra of the rewrite).
    #[test]
    fn folded_conv_matches_unfolded() {
        let mut gb = GraphBuilder::with_eval("t", &CpuEval);
        let x = gb.input("x", DType::F32, &[1, 2, 4, 4]);
        let w = gb.constant("w", Tensor::from_f32(vec![3, 2, 3, 3], (0..54).map(|i| (i as f32 * 0.37).sin()).collect()));
        let b = gb.constant("b", Tensor::from_f32(vec![3], vec![0.1, -0.2, 0.3]));
        let mut p = |n: &str, v: Vec<f32>| gb.constant(n, Tensor::from_f32(vec![3], v));
        let [gamma, beta, mean, var] = [
            p("gamma", vec![1.5, 0.5, -1.0]),
            p("beta", vec![0.2, 0.0, -0.3]),
            p("mean", vec![0.05, -0.1, 0.4]),
            p("var", vec![0.9, 2.0, 0.3]),
        ];
        let attrs = ConvAttrs { kernel_shape: vec![], strides: vec![], dilations: vec![], pads: vec![1; 4], auto_pad: AutoPad::NotSet, group: 1, activation: None };
        let y = gb.op(Op::Conv(attrs), &[x, w, b]).unwrap();
        let z = gb.op(Op::BatchNorm { epsilon: 1e-5 }, &[y, gamma, beta, mean, var]).unwrap();
        gb.output(z);
        let mut g = gb.finish().unwrap();
        let input = Tensor::from_f32(vec![1, 2, 4, 4], (0..32).map(|i| (i as f32 * 0.11).cos()).collect());
        let want = Session::new(g.clone()).unwrap().run(&[input.clone()]).unwrap();
        assert_eq!(run(&mut g), 1);
        super::super::dce::run(&mut g);
        assert_eq!(g.nodes.len(), 1);
        let got = Session::new(g).unwrap().run(&[input]).unwrap();
        for (a, b) in want[0].as_f32().unwrap().iter().zip(got[0].as_f32().unwrap()) {
            assert!((a - b).abs() <= 1e-5 * (1.0 + a.abs()), "{a} vs {b}");
        }
    }
}
