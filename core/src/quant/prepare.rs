//! Float rewrites that make a graph quantizable, applied before calibration (so every new value gets a
//! range): division by a constant becomes multiplication by its reciprocal, HardSigmoid
//! (`clip(αx + β, 0, 1)`) becomes a Mul and an Add with a fused clip, and a BatchNorm that could not fold
//! into a convolution (one after a Concat, as in DenseNet) becomes a Mul and an Add by per-channel constants
//! (`a = γ/√(σ²+ε)`, `b = β − μ·a`, the float kernel's own arithmetic; TF's converter does the same) — int8
//! TFLite has kernels for those, not for DIV, a hard sigmoid or a batch norm. Division by a square root and the
//! reciprocal of one become RSQRT (and a Mul); `x^2` becomes `x·x`; Neg becomes a Mul by −1 (LiteRT's int8 NEG
//! negates the stored integers, which is only right for a zero point of 0). A 1-D convolution, LayerNorm,
//! InstanceNorm, GroupNorm, the erf form of GELU, a short LSTM whose state starts from the model's inputs and a GRU
//! (unrolled: TFLite has no GRU) decompose as [`super::decompose`] describes; a Scan of static length (the opset-8
//! batched form too) and a Loop with scan outputs and a trip count known before running unroll as
//! [`super::unroll`] describes (TFLite has no scan form), and the constants that leaves fold. The rewritten graph
//! computes the same function.

use super::{decompose, unroll};
use crate::ir::{Activation, BinaryOp, DType, Graph, Node, Op, Tensor, TensorData, UnaryOp};

/// Whether [`prepare`] would rewrite something in `g` that a float TFLite export cannot write as it is.
pub fn needed(g: &Graph) -> bool {
    g.nodes.iter().any(|n| {
        matches!(n.op, Op::Unary(UnaryOp::HardSigmoid { .. } | UnaryOp::Erf) | Op::BatchNorm { .. } | Op::LayerNorm { .. } | Op::InstanceNorm { .. } | Op::GroupNorm { .. } | Op::Rnn(_) | Op::Scan(_))
            || matches!(&n.op, Op::Loop(a) if a.body.outputs.len() > 1 + a.num_carried)
            || matches!(n.op, Op::Conv(_)) && n.input(0).is_some_and(|x| g.value(x).shape.len() == 3)
    })
}

/// Rewrites `g` in place (see the module docs).
pub fn prepare(g: &mut Graph) {
    decompose::fuse_erf_gelu(g);
    fuse_rsqrt(g);
    let uses = g.use_counts();
    let nodes = std::mem::take(&mut g.nodes);
    let mut out = Vec::with_capacity(nodes.len());
    let mut unrolled_loops = false;
    for mut n in nodes {
        if n.keep_float {
            // stays float in the int8 graph: nothing to make quantizable
            out.push(n);
            continue;
        }
        let f32_out = g.value(n.outputs[0]).dtype == DType::F32;
        match n.op {
            Op::LayerNorm { .. } | Op::InstanceNorm { .. } | Op::GroupNorm { .. } => match decompose::normalization(g, &n, &uses) {
                Some(nodes) => out.extend(nodes),
                None => out.push(n),
            },
            Op::Rnn(_) => match decompose::unrolled_lstm(g, &n, &uses).or_else(|| decompose::unrolled_gru(g, &n)) {
                Some(nodes) => out.extend(nodes),
                None => out.push(n),
            },
            Op::Scan(_) => match unroll::unrolled_scan(g, &n) {
                Some(nodes) => out.extend(nodes),
                None => out.push(n),
            },
            Op::Loop(_) => match unroll::unrolled_loop(g, &n) {
                Some(nodes) => {
                    out.extend(nodes);
                    unrolled_loops = true;
                }
                None => out.push(n),
            },
            Op::Conv(ref a) if a.kernel_shape.len() == 1 || n.input(1).is_some_and(|w| g.value(w).shape.len() == 3) => match decompose::conv1d(g, &n) {
                Some(nodes) => out.extend(nodes),
                None => out.push(n),
            },
            Op::Unary(UnaryOp::Neg) if f32_out => {
                let m = g.add_constant(format!("{}/minus_one", n.name), Tensor::from_f32(vec![], vec![-1.0]));
                n.op = Op::Binary(BinaryOp::Mul, None);
                n.inputs.push(Some(m));
                out.push(n);
            }
            Op::Binary(BinaryOp::Pow, None) if f32_out && n.input(1).and_then(|e| g.value(e).constant.as_ref()).is_some_and(|e| e.to_f64_vec() == [2.0]) => {
                let x = n.input(0).expect("binary input");
                n.op = Op::Binary(BinaryOp::Mul, None);
                n.inputs = vec![Some(x), Some(x)];
                out.push(n);
            }
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
                out.push(Node { name: format!("{}/mul", n.name), op: Op::Binary(BinaryOp::Mul, None), inputs: vec![Some(x), Some(a)], outputs: vec![ax], keep_float: false });
                out.push(Node {
                    name: n.name.clone(),
                    op: Op::Binary(BinaryOp::Add, Some(Activation::Clip { min: 0.0, max: 1.0 })),
                    inputs: vec![Some(ax), Some(b)],
                    outputs: vec![y],
                    keep_float: false,
                });
            }
            Op::BatchNorm { epsilon } if g.value(n.outputs[0]).dtype == DType::F32 => match batch_norm_affine(g, &n, epsilon) {
                Some((a, b)) => {
                    let x = n.input(0).expect("BatchNorm input");
                    let y = n.outputs[0];
                    let shape = g.value(x).shape.clone();
                    let a = g.add_constant(format!("{}/scale", n.name), a);
                    let b = g.add_constant(format!("{}/offset", n.name), b);
                    let ax = g.add_value(format!("{}/scaled", g.value(y).name), DType::F32, shape);
                    out.push(Node { name: format!("{}/mul", n.name), op: Op::Binary(BinaryOp::Mul, None), inputs: vec![Some(x), Some(a)], outputs: vec![ax], keep_float: false });
                    out.push(Node { name: n.name.clone(), op: Op::Binary(BinaryOp::Add, None), inputs: vec![Some(ax), Some(b)], outputs: vec![y], keep_float: false });
                }
                None => out.push(n),
            },
            _ => out.push(n),
        }
    }
    g.nodes = out;
    if unrolled_loops {
        fold_constants(g);
    }
}

/// Folds what an unrolled Loop leaves constant (a cast of its iteration number, its body's condition) and
/// removes what then goes unread; `g` stays as it is if folding fails (it computes the same either way).
fn fold_constants(g: &mut Graph) {
    let mut folded = g.clone();
    if crate::passes::const_fold::run(&mut folded).is_ok() {
        crate::passes::dce::run(&mut folded);
        *g = folded;
    }
}

/// The per-channel `(a, b)` of `y = a·x + b` for BatchNorm node `n` with constant parameters, shaped
/// `[C, 1, …]` to broadcast over an NC… input; `None` when a parameter is not a constant of C values.
fn batch_norm_affine(g: &Graph, n: &Node, epsilon: f32) -> Option<(Tensor, Tensor)> {
    let x = g.value(n.input(0)?);
    if x.shape.len() < 2 {
        return None;
    }
    let c = x.shape[1];
    let param = |i: usize| -> Option<Vec<f32>> {
        let t = g.value(n.input(i)?).constant.as_ref()?;
        let v = t.as_f32()?.to_vec();
        (v.len() == c).then_some(v)
    };
    let (gamma, beta, mean, var) = (param(1)?, param(2)?, param(3)?, param(4)?);
    let a: Vec<f32> = (0..c).map(|i| gamma[i] / (var[i] + epsilon).sqrt()).collect();
    let b: Vec<f32> = (0..c).map(|i| beta[i] - mean[i] * a[i]).collect();
    let mut shape = vec![c];
    shape.resize(x.shape.len() - 1, 1);
    Some((Tensor::from_f32(shape.clone(), a), Tensor::from_f32(shape, b)))
}

/// `a / sqrt(v)` becomes `a · rsqrt(v)` and `1 / sqrt(v)` becomes `rsqrt(v)` when nothing else reads the
/// square root.
fn fuse_rsqrt(g: &mut Graph) {
    let uses = g.use_counts();
    let prod = g.producers();
    let mut drop = vec![false; g.nodes.len()];
    for k in 0..g.nodes.len() {
        let n = &g.nodes[k];
        if n.keep_float {
            continue;
        }
        let (s, div) = match n.op {
            Op::Binary(BinaryOp::Div, _) => (n.input(1), true),
            Op::Unary(UnaryOp::Reciprocal) => (n.input(0), false),
            _ => continue,
        };
        let Some(s) = s.filter(|s| uses[s.0] == 1 && g.value(*s).dtype == DType::F32) else { continue };
        let Some(ks) = prod[s.0].filter(|&ks| matches!(g.nodes[ks].op, Op::Unary(UnaryOp::Sqrt))) else { continue };
        g.nodes[ks].op = Op::Unary(UnaryOp::Rsqrt);
        if div {
            if let Op::Binary(_, act) = g.nodes[k].op {
                g.nodes[k].op = Op::Binary(BinaryOp::Mul, act);
            }
        } else {
            let y = g.nodes[k].outputs[0];
            g.nodes[ks].outputs[0] = y;
            drop[k] = true;
        }
    }
    let nodes = std::mem::take(&mut g.nodes);
    g.nodes = nodes.into_iter().enumerate().filter(|(k, _)| !drop[*k]).map(|(_, n)| n).collect();
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::builder::GraphBuilder;
    use crate::runtime::Session;

    /// A BatchNorm after a Concat (nothing to fold into) becomes Mul + Add computing what BatchNorm computes.
    #[test]
    fn a_standalone_batch_norm_becomes_mul_and_add() {
        let mut b = GraphBuilder::with_eval("t", &crate::runtime::CpuEval);
        let x = b.input("x", DType::F32, &[1, 2, 3, 3]);
        let y = b.input("y", DType::F32, &[1, 1, 3, 3]);
        let cat = b.op(Op::Concat { axis: 1 }, &[x, y]).unwrap();
        let p = |b: &mut GraphBuilder, name: &str, v: [f32; 3]| b.constant(name, Tensor::from_f32(vec![3], v.to_vec()));
        let (gamma, beta, mean, var) = (p(&mut b, "g", [0.5, -2.0, 1.5]), p(&mut b, "b", [0.1, 0.2, -0.3]), p(&mut b, "m", [1.0, -1.0, 0.25]), p(&mut b, "v", [4.0, 0.5, 2.0]));
        let bn = b.op(Op::BatchNorm { epsilon: 1e-3 }, &[cat, gamma, beta, mean, var]).unwrap();
        b.output(bn);
        let g = b.finish().unwrap();
        let mut r = g.clone();
        prepare(&mut r);
        let ops: Vec<String> = r.nodes.iter().map(|n| n.op.name()).collect();
        assert!(ops.iter().all(|o| o != "BatchNorm") && ops.iter().any(|o| o == "Mul") && ops.iter().any(|o| o == "Add"), "{ops:?}");
        crate::ir::verify::verify(&r).unwrap();
        let feeds = vec![Tensor::from_f32(vec![1, 2, 3, 3], (0..18).map(|i| i as f32 * 0.3 - 2.0).collect()), Tensor::from_f32(vec![1, 1, 3, 3], (0..9).map(|i| 1.0 - i as f32 * 0.7).collect())];
        let want = Session::new(g).unwrap().run(&feeds).unwrap().remove(0);
        let got = Session::new(r).unwrap().run(&feeds).unwrap().remove(0);
        assert_eq!(got.shape, want.shape);
        for (a, b) in got.to_f64_vec().iter().zip(want.to_f64_vec()) {
            assert!((a - b).abs() <= 1e-6 * b.abs().max(1.0), "{a} vs {b}");
        }
    }
}
