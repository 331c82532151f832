//! Decompositions of the normalisations and of the erf form of GELU into ops that int8 TFLite has kernels
//! for, the way TensorFlow's converter lowers a Keras `LayerNormalization` and `gelu`:
//!
//! * LayerNorm (over axes `[axis, rank)`) and InstanceNorm (over the spatial axes, per channel) become
//!   `mean = MEAN(x)`, `d = SUB(x, mean)`, `var = MEAN(MUL(d, d))`, `r = RSQRT(ADD(var, ε))`,
//!   `y = ADD(MUL(MUL(d, r), γ), β)` (the γ multiply and β add are left out when γ is all ones or β all zeros).
//!   GroupNorm is the same over `[N, G, C/G·spatial]` between two RESHAPEs, then γ and β per channel.
//! * `0.5·x·(1 + erf(x/√2))`, as PyTorch's ONNX export writes GELU (in any order of its three products), becomes
//!   one `Gelu` (TFLite GELU, an int8 lookup table in LiteRT).
//!
//! * A 1-D convolution becomes a 2-D one between two RESHAPEs.
//!
//! Every rewrite computes the same function in float, so the float graph (and a float TFLite export) can use
//! it too.

use super::unroll::MAX_UNROLLED_NODES;
use crate::ir::{BinaryOp, DType, Graph, Node, Op, ReduceOp, Tensor, TensorData, UnaryOp, ValueId};

/// The nodes that compute normalisation `n` of `g` (LayerNorm, InstanceNorm, GroupNorm), or `None` when it
/// does not decompose (non-constant or non-broadcastable γ/β of InstanceNorm/GroupNorm, a used mean or
/// inverse-std-dev output, a non-f32 or dynamic input): the node then stays and the quantizer names it.
pub(super) fn normalization(g: &mut Graph, n: &Node, uses: &[usize]) -> Option<Vec<Node>> {
    let x = n.input(0)?;
    let xv = g.value(x);
    if xv.dtype != DType::F32 || xv.dynamic || n.outputs.iter().skip(1).any(|o| uses[o.0] > 0) {
        return None;
    }
    let shape = xv.shape.clone();
    let rank = shape.len();
    let (axes, eps, groups) = match n.op {
        Op::LayerNorm { axis, epsilon } => ((axis..rank).collect::<Vec<_>>(), epsilon, None),
        Op::InstanceNorm { epsilon } if rank >= 3 => ((2..rank).collect(), epsilon, None),
        Op::GroupNorm { num_groups, epsilon } if rank >= 3 && num_groups > 0 && shape[1] % num_groups == 0 => (vec![2], epsilon, Some(num_groups)),
        _ => return None,
    };
    // γ and β as constants that broadcast against x (per channel for Instance/GroupNorm).
    let per_channel = !matches!(n.op, Op::LayerNorm { .. });
    let mut affine = Vec::new();
    for (i, identity) in [(1, 1.0f32), (2, 0.0)] {
        let Some(v) = n.input(i) else {
            affine.push(None);
            continue;
        };
        if !per_channel {
            let c = g.value(v).constant.as_ref();
            let trivial = c.is_some_and(|c| c.to_f64_vec().iter().all(|&e| e == identity as f64));
            affine.push((!trivial).then_some(v));
            continue;
        }
        let c = g.value(v).constant.as_ref()?;
        let data = c.to_f64_vec();
        if data.len() != shape[1] {
            return None;
        }
        if data.iter().all(|&e| e == identity as f64) {
            affine.push(None);
            continue;
        }
        let mut s = vec![shape[1]];
        s.extend(std::iter::repeat_n(1, rank - 2));
        let name = format!("{}/{}", n.name, if i == 1 { "gamma" } else { "beta" });
        affine.push(Some(g.add_constant(name, Tensor::from_f32(s, data.iter().map(|&e| e as f32).collect()))));
    }
    let y = n.outputs[0];
    let mut b = Emit { g, nodes: Vec::new(), base: n.name.clone() };
    let (xin, inner_shape) = match groups {
        Some(gr) => {
            let inner = vec![shape[0], gr, shape[1..].iter().product::<usize>() / gr];
            (b.reshape("grouped", x, &inner), inner)
        }
        None => (x, shape.clone()),
    };
    let mut red = inner_shape.clone();
    for &a in &axes {
        red[a] = 1;
    }
    let mean_op = Op::Reduce { op: ReduceOp::Mean, axes: Some(axes.clone()), keepdims: true, noop_with_empty_axes: false };
    let mean = b.op("mean", mean_op.clone(), &[xin], &red);
    let d = b.op("centered", Op::Binary(BinaryOp::Sub, None), &[xin, mean], &inner_shape);
    let sq = b.op("squared", Op::Binary(BinaryOp::Mul, None), &[d, d], &inner_shape);
    let var = b.op("variance", mean_op, &[sq], &red);
    let e = b.g.add_constant(format!("{}/epsilon", n.name), Tensor::from_f32(vec![], vec![eps]));
    let ve = b.op("variance_eps", Op::Binary(BinaryOp::Add, None), &[var, e], &red);
    let r = b.op("rsqrt", Op::Unary(UnaryOp::Rsqrt), &[ve], &red);
    let mut cur = b.op("normalized", Op::Binary(BinaryOp::Mul, None), &[d, r], &inner_shape);
    if groups.is_some() {
        cur = b.reshape("ungrouped", cur, &shape);
    }
    if let Some(gamma) = affine[0] {
        cur = b.op("scaled", Op::Binary(BinaryOp::Mul, None), &[cur, gamma], &shape);
    }
    if let Some(beta) = affine[1] {
        b.op("shifted", Op::Binary(BinaryOp::Add, None), &[cur, beta], &shape);
    }
    // The last node writes the original output value.
    let last = b.nodes.last_mut().expect("at least the normalizing Mul");
    last.outputs[0] = y;
    last.name = n.name.clone();
    Some(b.nodes)
}

/// A 1-D convolution (Whisper's stem) as a 2-D one over `[N, C, 1, L]` between two Reshapes: TFLite has no
/// 1-D CONV. `None` (the node stays) unless x is a static f32 `[N, C, L]` and the weights are constant.
pub(super) fn conv1d(g: &mut Graph, n: &Node) -> Option<Vec<Node>> {
    let Op::Conv(a) = &n.op else { return None };
    let (x, w, y) = (n.input(0)?, n.input(1)?, n.outputs[0]);
    let xv = g.value(x);
    let ys = g.value(y).shape.clone();
    if xv.shape.len() != 3 || xv.dtype != DType::F32 || xv.dynamic || ys.len() != 3 {
        return None;
    }
    let xs = xv.shape.clone();
    let mut wt = g.value(w).constant.clone()?;
    if wt.shape.len() != 3 {
        return None;
    }
    wt.shape.insert(2, 1);
    let unit = |v: &[usize]| if v.is_empty() { Vec::new() } else { [1].iter().chain(v).copied().collect() };
    let attrs = crate::ir::ConvAttrs {
        kernel_shape: vec![1, wt.shape[3]],
        strides: unit(&a.strides),
        dilations: unit(&a.dilations),
        pads: if a.pads.is_empty() { Vec::new() } else { vec![0, a.pads[0], 0, a.pads[1]] },
        auto_pad: a.auto_pad,
        group: a.group,
        activation: a.activation,
    };
    let w2 = g.add_constant(format!("{}/weights_2d", n.name), wt);
    let mut b = Emit { g, nodes: Vec::new(), base: n.name.clone() };
    let x2 = b.reshape("rows", x, &[xs[0], xs[1], 1, xs[2]]);
    let y2 = b.g.add_value(format!("{}/conv_2d", n.name), DType::F32, vec![ys[0], ys[1], 1, ys[2]]);
    b.nodes.push(Node { name: format!("{}/conv_2d", n.name), op: Op::Conv(attrs), inputs: vec![Some(x2), Some(w2), n.input(2)], outputs: vec![y2], keep_float: false });
    b.reshape("unrows", y2, &ys);
    let last = b.nodes.last_mut().expect("three nodes");
    last.outputs[0] = y;
    last.name = n.name.clone();
    Some(b.nodes)
}

/// Appends nodes with fresh f32 outputs named after the decomposed node.
struct Emit<'a> {
    g: &'a mut Graph,
    nodes: Vec<Node>,
    base: String,
}

impl Emit<'_> {
    fn op(&mut self, what: &str, op: Op, inputs: &[ValueId], shape: &[usize]) -> ValueId {
        let name = format!("{}/{what}", self.base);
        let v = self.g.add_value(name.clone(), DType::F32, shape.to_vec());
        self.nodes.push(Node { name, op, inputs: inputs.iter().map(|&i| Some(i)).collect(), outputs: vec![v], keep_float: false });
        v
    }
    /// `parts` equal pieces of `x` along axis 1, each of `shape`.
    fn split(&mut self, what: &str, x: ValueId, parts: usize, shape: &[usize]) -> Vec<ValueId> {
        let outs: Vec<ValueId> = (0..parts).map(|k| self.g.add_value(format!("{}/{what}_{k}", self.base), DType::F32, shape.to_vec())).collect();
        self.nodes.push(Node {
            name: format!("{}/{what}", self.base),
            op: Op::Split { axis: 1, split: None, num_outputs: parts },
            inputs: vec![Some(x)],
            outputs: outs.clone(),
            keep_float: false,
        });
        outs
    }
    fn reshape(&mut self, what: &str, x: ValueId, shape: &[usize]) -> ValueId {
        let s = self.g.add_constant(format!("{}/{what}_shape", self.base), Tensor::from_vec(vec![shape.len()], shape.iter().map(|&d| d as i64).collect()).expect("1-D"));
        let name = format!("{}/{what}", self.base);
        let v = self.g.add_value(name.clone(), DType::F32, shape.to_vec());
        self.nodes.push(Node { name, op: Op::Reshape { allowzero: false }, inputs: vec![Some(x), Some(s)], outputs: vec![v], keep_float: false });
        v
    }
}

/// The single f32 element of constant `v`, if it is one.
fn scalar(g: &Graph, v: ValueId) -> Option<f32> {
    match &g.value(v).constant {
        Some(Tensor { data: TensorData::F32(d), .. }) if d.len() == 1 => Some(d[0]),
        _ => None,
    }
}

fn close(a: f32, b: f32) -> bool {
    (a - b).abs() <= 1e-4 * b.abs().max(1.0)
}

/// Replaces every erf-form GELU chain in `g` by one `Gelu { tanh: false }` node (see the module docs).
pub(super) fn fuse_erf_gelu(g: &mut Graph) {
    let uses = g.use_counts();
    let prod = g.producers();
    let mut consumer = vec![None; g.values.len()];
    for (k, n) in g.nodes.iter().enumerate() {
        for i in n.inputs.iter().flatten() {
            consumer[i.0] = Some(k);
        }
    }
    // The single consumer of `v` when it has exactly one, and v's other operand of that binary node.
    let only_user = |v: ValueId| (uses[v.0] == 1).then(|| consumer[v.0]).flatten();
    let other = |n: &Node, v: ValueId| -> Option<ValueId> {
        match (n.input(0), n.input(1)) {
            (Some(a), Some(b)) if a == v => Some(b),
            (Some(a), Some(b)) if b == v => Some(a),
            _ => None,
        }
    };
    let is_mul = |k: usize| matches!(g.nodes[k].op, Op::Binary(BinaryOp::Mul, None));
    let mut remove = vec![false; g.nodes.len()];
    let mut replace: Vec<(usize, Node)> = Vec::new();
    for (ke, e) in g.nodes.iter().enumerate() {
        if !matches!(e.op, Op::Unary(UnaryOp::Erf)) {
            continue;
        }
        let Some(u) = e.input(0) else { continue };
        // u = x / √2 or x · (1/√2)
        let Some(kp) = prod[u.0].filter(|_| uses[u.0] == 1) else { continue };
        let p = &g.nodes[kp];
        let x = match p.op {
            Op::Binary(BinaryOp::Div, None) if p.input(1).and_then(|c| scalar(g, c)).is_some_and(|c| close(c, std::f32::consts::SQRT_2)) => p.input(0),
            Op::Binary(BinaryOp::Mul, None) => [(0, 1), (1, 0)].into_iter().find_map(|(i, j)| {
                p.input(j).and_then(|c| scalar(g, c)).filter(|&c| close(c, std::f32::consts::FRAC_1_SQRT_2)).and(p.input(i))
            }),
            _ => None,
        };
        let Some(x) = x.filter(|x| g.value(*x).dtype == DType::F32 && g.value(*x).constant.is_none()) else { continue };
        // a = erf(u) + 1
        let Some(ka) = only_user(e.outputs[0]) else { continue };
        let a = &g.nodes[ka];
        if !matches!(a.op, Op::Binary(BinaryOp::Add, None)) || other(a, e.outputs[0]).and_then(|c| scalar(g, c)) != Some(1.0) {
            continue;
        }
        let Some(km) = only_user(a.outputs[0]).filter(|&k| is_mul(k)) else { continue };
        let m = &g.nodes[km];
        let Some(o) = other(m, a.outputs[0]) else { continue };
        let half = |v: ValueId| scalar(g, v).is_some_and(|c| close(c, 0.5));
        // Which nodes make up the chain, and the one whose output is the GELU.
        let (chain, last) = if o == x {
            // ((1 + erf) · x) · 0.5
            let Some(k2) = only_user(m.outputs[0]).filter(|&k| is_mul(k) && other(&g.nodes[k], m.outputs[0]).is_some_and(half)) else { continue };
            (vec![kp, ke, ka, km, k2], k2)
        } else if half(o) {
            // ((1 + erf) · 0.5) · x
            let Some(k2) = only_user(m.outputs[0]).filter(|&k| is_mul(k) && other(&g.nodes[k], m.outputs[0]) == Some(x)) else { continue };
            (vec![kp, ke, ka, km, k2], k2)
        } else {
            // (x · 0.5) · (1 + erf)
            let Some(kh) = prod[o.0].filter(|&k| is_mul(k) && uses[o.0] == 1) else { continue };
            let h = &g.nodes[kh];
            if !(other(h, x).is_some_and(half)) {
                continue;
            }
            (vec![kh, kp, ke, ka, km], km)
        };
        if chain.iter().any(|&k| remove[k]) {
            continue;
        }
        for &k in &chain {
            remove[k] = true;
        }
        let y = g.nodes[last].outputs[0];
        replace.push((last, Node { name: format!("{}/gelu", e.name), op: Op::Unary(UnaryOp::Gelu { tanh: false }), inputs: vec![Some(x)], outputs: vec![y], keep_float: false }));
    }
    if replace.is_empty() {
        return;
    }
    let mut at: Vec<Option<Node>> = vec![None; g.nodes.len()];
    for (k, n) in replace {
        at[k] = Some(n);
    }
    let nodes = std::mem::take(&mut g.nodes);
    g.nodes = nodes.into_iter().enumerate().filter_map(|(k, n)| if remove[k] { at[k].take() } else { Some(n) }).collect();
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::builder::GraphBuilder;
    use crate::runtime::Session;

    fn run(g: &Graph, x: &Tensor) -> Vec<f64> {
        Session::new(g.clone()).unwrap().run(std::slice::from_ref(x)).unwrap()[0].to_f64_vec()
    }

    fn assert_close(a: &[f64], b: &[f64], tol: f64) {
        assert_eq!(a.len(), b.len());
        for (i, (x, y)) in a.iter().zip(b).enumerate() {
            assert!((x - y).abs() <= tol * (1.0 + y.abs()), "element {i}: {x} vs {y}");
        }
    }

    fn ramp(shape: &[usize]) -> Tensor {
        let n: usize = shape.iter().product();
        Tensor::from_f32(shape.to_vec(), (0..n).map(|i| ((i * 37 % 23) as f32 - 11.0) / 5.0).collect())
    }

    #[test]
    fn normalizations_decompose_into_the_same_function() {
        let x_shape = [2usize, 4, 3, 5];
        let cases: Vec<(Op, Vec<usize>)> = vec![
            (Op::LayerNorm { axis: 3, epsilon: 1e-5 }, vec![5]),
            (Op::LayerNorm { axis: 2, epsilon: 1e-3 }, vec![3, 5]),
            (Op::InstanceNorm { epsilon: 1e-5 }, vec![4]),
            (Op::GroupNorm { num_groups: 2, epsilon: 1e-5 }, vec![4]),
        ];
        for (op, ps) in cases {
            let mut b = GraphBuilder::with_eval("t", &crate::runtime::CpuEval);
            let x = b.input("x", DType::F32, &x_shape);
            let np: usize = ps.iter().product();
            let gamma = b.constant("g", Tensor::from_f32(ps.clone(), (0..np).map(|i| 0.5 + i as f32 / 7.0).collect()));
            let beta = b.constant("b", Tensor::from_f32(ps.clone(), (0..np).map(|i| i as f32 / 3.0 - 1.0).collect()));
            let y = b.node(op.clone(), &[Some(x), Some(gamma), Some(beta)], 1).unwrap()[0];
            b.output(y);
            let g = b.finish().unwrap();
            let mut p = g.clone();
            super::super::prepare(&mut p);
            assert!(p.nodes.iter().all(|n| !matches!(n.op, Op::LayerNorm { .. } | Op::InstanceNorm { .. } | Op::GroupNorm { .. })), "{op:?} stayed");
            assert!(p.nodes.iter().any(|n| matches!(n.op, Op::Unary(UnaryOp::Rsqrt))));
            crate::ir::verify::verify(&p).unwrap();
            let xt = ramp(&x_shape);
            assert_close(&run(&p, &xt), &run(&g, &xt), 1e-5);
        }
    }

    #[test]
    fn a_1d_convolution_becomes_a_2d_one_between_reshapes() {
        for (pads, strides, group) in [(vec![1, 1], vec![], 1), (vec![2, 0], vec![2], 2)] {
            let mut b = GraphBuilder::with_eval("t", &crate::runtime::CpuEval);
            let x = b.input("x", DType::F32, &[1, 4, 9]);
            let w = b.constant("w", ramp(&[6, 4 / group, 3]));
            let bias = b.constant("bias", Tensor::from_f32(vec![6], (0..6).map(|i| i as f32 / 4.0).collect()));
            let attrs = crate::ir::ConvAttrs { kernel_shape: vec![3], strides, dilations: vec![], pads, auto_pad: crate::ir::AutoPad::NotSet, group, activation: None };
            let y = b.op(Op::Conv(attrs), &[x, w, bias]).unwrap();
            b.output(y);
            let g = b.finish().unwrap();
            let mut p = g.clone();
            super::super::prepare(&mut p);
            crate::ir::verify::verify(&p).unwrap();
            let convs: Vec<_> = p.nodes.iter().filter_map(|n| if let Op::Conv(a) = &n.op { Some(a.kernel_shape.clone()) } else { None }).collect();
            assert_eq!(convs, vec![vec![1, 3]]);
            let xt = ramp(&[1, 4, 9]);
            assert_close(&run(&p, &xt), &run(&g, &xt), 1e-6);
        }
    }

    #[test]
    fn erf_gelu_in_each_order_becomes_one_gelu() {
        for order in 0..3 {
            let mut b = GraphBuilder::with_eval("t", &crate::runtime::CpuEval);
            let x = b.input("x", DType::F32, &[2, 6]);
            let c = |b: &mut GraphBuilder, n: &str, v: f32| b.constant(n, Tensor::from_f32(vec![], vec![v]));
            let r2 = c(&mut b, "r2", std::f32::consts::SQRT_2);
            let one = c(&mut b, "one", 1.0);
            let half = c(&mut b, "half", 0.5);
            let u = b.op(Op::Binary(BinaryOp::Div, None), &[x, r2]).unwrap();
            let e = b.op(Op::Unary(UnaryOp::Erf), &[u]).unwrap();
            let a = b.op(Op::Binary(BinaryOp::Add, None), &[e, one]).unwrap();
            let mul = Op::Binary(BinaryOp::Mul, None);
            let y = match order {
                0 => {
                    let m = b.op(mul.clone(), &[x, a]).unwrap();
                    b.op(mul, &[m, half]).unwrap()
                }
                1 => {
                    let m = b.op(mul.clone(), &[a, half]).unwrap();
                    b.op(mul, &[x, m]).unwrap()
                }
                _ => {
                    let h = b.op(mul.clone(), &[x, half]).unwrap();
                    b.op(mul, &[h, a]).unwrap()
                }
            };
            b.output(y);
            let g = b.finish().unwrap();
            let mut p = g.clone();
            super::super::prepare(&mut p);
            assert_eq!(p.nodes.len(), 1, "order {order}: {:?}", p.nodes.iter().map(|n| n.op.name()).collect::<Vec<_>>());
            assert!(matches!(p.nodes[0].op, Op::Unary(UnaryOp::Gelu { tanh: false })));
            let xt = ramp(&[2, 6]);
            assert_close(&run(&p, &xt), &run(&g, &xt), 1e-6);
        }
    }
}

/// A short forward LSTM that TFLite's `UNIDIRECTIONAL_SEQUENCE_LSTM` cannot express (its states are variable
/// tensors that start at zero: an initial state from the model's inputs, as streaming models such as silero-vad
/// feed, or a final cell state the model reads) unrolled into the cell's arithmetic, step by step: per step
/// `gates = x_t·Wᵀ + h·Rᵀ + (Wb + Rb)`, split into i, o, f, c (ONNX's order), `C = σ(f)·C + σ(i)·tanh(c)`,
/// `h = σ(o)·tanh(C)`. Every op has a float and an int8 TFLite kernel, so the layer exports and quantizes like
/// the rest of the graph. `None` (the node stays) for anything else: other cells or directions, batch-major
/// layout, non-default activations, clip, coupled gates, peepholes, sequence lengths, non-constant weights, more
/// than [`MAX_UNROLLED_STEPS`] steps, or a zero initial state (the fused TFLite op handles that).
pub(super) fn unrolled_lstm(g: &mut Graph, n: &Node, uses: &[usize]) -> Option<Vec<Node>> {
    use crate::ir::ops::recurrent::{input, RnnActivation as Act, RnnCell, RnnDirection};
    let Op::Rnn(a) = &n.op else { return None };
    let default_acts = matches!(a.activations[..], [Act::Sigmoid, Act::Tanh, Act::Tanh]);
    if a.cell != RnnCell::Lstm || a.direction != RnnDirection::Forward || a.batch_major || !default_acts || a.clip.is_some() || a.input_forget || a.cell_clip.is_some() {
        return None;
    }
    let x = n.input(input::X)?;
    let xs = g.value(x).shape.clone();
    if g.value(x).dtype != DType::F32 || g.value(x).dynamic || xs.len() != 3 || xs[0] > MAX_UNROLLED_STEPS || n.input(input::SEQ_LENS).is_some() {
        return None;
    }
    let (seq, batch, hidden) = (xs[0], xs[1], a.hidden_size);
    let peephole_zero = n.input(input::P).is_none_or(|p| g.value(p).constant.as_ref().is_some_and(|t| t.to_f64_vec().iter().all(|&v| v == 0.0)));
    let constant = |i: usize| n.input(i).and_then(|v| g.value(v).constant.clone());
    let (w, r) = (constant(input::W)?, constant(input::R)?);
    let b = match n.input(input::B) {
        Some(_) => Some(constant(input::B)?),
        None => None,
    };
    // only where the fused op cannot go: a state that does not start at zero, or a read final cell state
    let zero_or_absent = |i: usize| zero_state(g, n, i);
    let cell_out_read = n.outputs.get(2).is_some_and(|&o| uses[o.0] > 0 || g.outputs.contains(&o));
    let (zero_h, zero_c) = (zero_or_absent(input::INITIAL_H), zero_or_absent(input::INITIAL_C));
    if !peephole_zero || (zero_h && zero_c && !cell_out_read) {
        return None;
    }
    let gates = 4 * hidden;
    let wv = w.as_f32()?.to_vec();
    let rv = r.as_f32()?.to_vec();
    if wv.len() != gates * xs[2] || rv.len() != gates * hidden {
        return None;
    }
    let bias: Vec<f32> = match &b {
        Some(t) => {
            let v = t.as_f32()?;
            if v.len() != 2 * gates {
                return None;
            }
            (0..gates).map(|k| v[k] + v[gates + k]).collect()
        }
        None => vec![0.0; gates],
    };
    let base = n.name.clone();
    let wc = g.add_constant(format!("{base}/w"), Tensor::from_f32(vec![gates, xs[2]], wv));
    let rc = g.add_constant(format!("{base}/r"), Tensor::from_f32(vec![gates, hidden], rv));
    let bc = g.add_constant(format!("{base}/bias"), Tensor::from_f32(vec![gates], bias));
    let gemm = Op::Gemm { alpha: 1.0, beta: 1.0, trans_a: false, trans_b: true, activation: None };
    let mut e = Emit { g, nodes: Vec::new(), base: base.clone() };
    // `None`: a zero state (absent or constant zero), whose first step has no products with it (a constant
    // operand of FULLY_CONNECTED or MUL would not quantize)
    let state = |e: &mut Emit, i: usize, zero: bool, what: &str| -> Option<ValueId> {
        match n.input(i) {
            Some(v) if !zero => Some(e.reshape(what, v, &[batch, hidden])),
            _ => None,
        }
    };
    let mut h = state(&mut e, input::INITIAL_H, zero_h, "h0");
    let mut c = state(&mut e, input::INITIAL_C, zero_c, "c0");
    let mut ys = Vec::new();
    for t in 0..seq {
        let idx = e.g.add_constant(format!("{base}/t{t}"), Tensor::from_vec(vec![], vec![t as i64]).expect("scalar"));
        let xt = e.op(&format!("x{t}"), Op::Gather { axis: 0 }, &[x, idx], &[batch, xs[2]]);
        let xg = e.op(&format!("xw{t}"), gemm.clone(), &[xt, wc, bc], &[batch, gates]);
        let z = match h {
            Some(h) => {
                let hg = e.op(&format!("hr{t}"), gemm.clone(), &[h, rc], &[batch, gates]);
                e.op(&format!("gates{t}"), Op::Binary(BinaryOp::Add, None), &[xg, hg], &[batch, gates])
            }
            None => xg,
        };
        let parts = e.split(&format!("gate{t}"), z, 4, &[batch, hidden]);
        let sig = |e: &mut Emit, v: ValueId, what: &str| e.op(&format!("{what}{t}"), Op::Unary(UnaryOp::Sigmoid), &[v], &[batch, hidden]);
        let (i, o, f) = (sig(&mut e, parts[0], "i"), sig(&mut e, parts[1], "o"), sig(&mut e, parts[2], "f"));
        let cand = e.op(&format!("candidate{t}"), Op::Unary(UnaryOp::Tanh), &[parts[3]], &[batch, hidden]);
        let added = e.op(&format!("added{t}"), Op::Binary(BinaryOp::Mul, None), &[i, cand], &[batch, hidden]);
        let cn = match c {
            Some(c) => {
                let kept = e.op(&format!("kept{t}"), Op::Binary(BinaryOp::Mul, None), &[f, c], &[batch, hidden]);
                e.op(&format!("c{}", t + 1), Op::Binary(BinaryOp::Add, None), &[kept, added], &[batch, hidden])
            }
            None => added,
        };
        c = Some(cn);
        let tc = e.op(&format!("tanh_c{}", t + 1), Op::Unary(UnaryOp::Tanh), &[cn], &[batch, hidden]);
        let hn = e.op(&format!("h{}", t + 1), Op::Binary(BinaryOp::Mul, None), &[o, tc], &[batch, hidden]);
        h = Some(hn);
        ys.push(e.reshape(&format!("y{t}"), hn, &[1, 1, batch, hidden]));
    }
    // the original outputs, written by the last node of each
    let outs: [Option<ValueId>; 3] = [n.outputs.first().copied(), n.outputs.get(1).copied(), n.outputs.get(2).copied()];
    if let Some(y) = outs[0] {
        if ys.len() == 1 {
            e.nodes.last_mut().expect("y0").outputs[0] = y;
        } else {
            let concat = e.op("y", Op::Concat { axis: 0 }, &ys, &[seq, 1, batch, hidden]);
            let last = e.nodes.last_mut().expect("concat");
            debug_assert_eq!(last.outputs[0], concat);
            last.outputs[0] = y;
        }
    }
    for (k, v) in [(1, h), (2, c)] {
        if let Some(out) = outs[k] {
            let v = v.expect("a step ran (seq >= 1)");
            e.reshape(if k == 1 { "y_h" } else { "y_c" }, v, &[1, batch, hidden]);
            e.nodes.last_mut().expect("reshape").outputs[0] = out;
        }
    }
    Some(e.nodes)
}

/// Whether recurrent node `n`'s state input `i` is absent or a constant of zeros (the state a layer starts
/// from when none is given).
fn zero_state(g: &Graph, n: &Node, i: usize) -> bool {
    n.input(i).is_none_or(|v| g.value(v).constant.as_ref().is_some_and(|t| t.to_f64_vec().iter().all(|&e| e == 0.0)))
}

/// The longest sequence [`unrolled_lstm`] unrolls (each step adds about twenty ops).
pub const MAX_UNROLLED_STEPS: usize = 16;

/// The longest sequence [`unrolled_gru`] unrolls, per direction (each step adds about twenty ops, so a
/// bidirectional GRU stays within [`MAX_UNROLLED_NODES`]).
pub const MAX_UNROLLED_GRU_STEPS: usize = MAX_UNROLLED_NODES / 40;

/// A GRU of static length unrolled into the cell's arithmetic, step by step and direction by direction (TFLite
/// has no GRU op; TensorFlow's converter unrolls Keras GRUs the same way). Per step, with ONNX's gate order
/// z, r, h and `x_t` the step's slice of X:
/// `xg = x_t·Wᵀ + (Wb + [Rb_z, Rb_r, 0 or Rb_h])`, `hg = h·R_zrᵀ`, `z = σ(xg_z + hg_z)`, `r = σ(xg_r + hg_r)`;
/// `linear_before_reset`: `n = tanh(xg_h + r·(h·R_hᵀ + Rb_h))`, otherwise `n = tanh(xg_h + (r·h)·R_hᵀ)` (Rb_h
/// then in `xg`); `h' = n + z·(h − n)`, which is `(1 − z)·n + z·h`. Y stacks each direction's states in
/// time order (a reverse direction runs from the last step); Y_h is each direction's last state. Every op has
/// float and int8 TFLite kernels. `None` (the node stays, and the exporter refuses it by name) for other
/// activations than sigmoid and tanh, clip, `sequence_lens` shorter than the sequence, non-constant weights,
/// a dynamic or zero length, or more than [`MAX_UNROLLED_GRU_STEPS`] steps.
pub(super) fn unrolled_gru(g: &mut Graph, n: &Node) -> Option<Vec<Node>> {
    use crate::ir::ops::recurrent::{input, RnnActivation as Act, RnnCell};
    let Op::Rnn(a) = &n.op else { return None };
    let dirs = a.direction.count();
    if a.cell != RnnCell::Gru || a.clip.is_some() || (0..dirs).any(|d| a.activations_of(d) != [Act::Sigmoid, Act::Tanh]) {
        return None;
    }
    let x = n.input(input::X)?;
    let xs = g.value(x).shape.clone();
    if g.value(x).dtype != DType::F32 || g.value(x).dynamic || xs.len() != 3 {
        return None;
    }
    let (seq_axis, batch_axis) = if a.batch_major { (1, 0) } else { (0, 1) };
    let (seq, batch, isz, hid) = (xs[seq_axis], xs[batch_axis], xs[2], a.hidden_size);
    if seq == 0 || seq > MAX_UNROLLED_GRU_STEPS {
        return None;
    }
    if let Some(l) = n.input(input::SEQ_LENS) {
        let full = g.value(l).constant.as_ref().is_some_and(|c| c.to_i64_vec().iter().all(|&s| s == seq as i64));
        if !full {
            return None;
        }
    }
    let constant = |i: usize| n.input(i).and_then(|v| g.value(v).constant.clone());
    let (w, r) = (constant(input::W)?, constant(input::R)?);
    let (wv, rv) = (w.as_f32()?.to_vec(), r.as_f32()?.to_vec());
    let bv = match n.input(input::B) {
        Some(_) => constant(input::B)?.as_f32()?.to_vec(),
        None => vec![0.0; dirs * 6 * hid],
    };
    if wv.len() != dirs * 3 * hid * isz || rv.len() != dirs * 3 * hid * hid || bv.len() != dirs * 6 * hid {
        return None;
    }
    if let Some(h0) = n.input(input::INITIAL_H) {
        let want = if a.batch_major { [batch, dirs, hid] } else { [dirs, batch, hid] };
        if g.value(h0).shape != want || g.value(h0).dtype != DType::F32 {
            return None;
        }
    }
    let base = n.name.clone();
    let gemm_t = Op::Gemm { alpha: 1.0, beta: 1.0, trans_a: false, trans_b: true, activation: None };
    let mut e = Emit { g, nodes: Vec::new(), base: base.clone() };
    let mut ys: Vec<Vec<ValueId>> = vec![Vec::new(); dirs]; // per direction, in time order
    let mut finals = Vec::with_capacity(dirs);
    for d in 0..dirs {
        let (wd, rd, bd) = (&wv[d * 3 * hid * isz..(d + 1) * 3 * hid * isz], &rv[d * 3 * hid * hid..(d + 1) * 3 * hid * hid], &bv[d * 6 * hid..(d + 1) * 6 * hid]);
        let (wb, rb) = bd.split_at(3 * hid);
        // the input projection's bias: Wb, plus Rb for z and r, and Rb_h unless it is applied before the reset
        let xbias: Vec<f32> = (0..3 * hid).map(|k| wb[k] + if k < 2 * hid || !a.linear_before_reset { rb[k] } else { 0.0 }).collect();
        let wc = e.g.add_constant(format!("{base}/d{d}/w"), Tensor::from_f32(vec![3 * hid, isz], wd.to_vec()));
        let xb = e.g.add_constant(format!("{base}/d{d}/x_bias"), Tensor::from_f32(vec![3 * hid], xbias));
        let (rzr, rh) = rd.split_at(2 * hid * hid);
        let rzr = e.g.add_constant(format!("{base}/d{d}/r_zr"), Tensor::from_f32(vec![2 * hid, hid], rzr.to_vec()));
        let rh = e.g.add_constant(format!("{base}/d{d}/r_h"), Tensor::from_f32(vec![hid, hid], rh.to_vec()));
        let rbh = e.g.add_constant(format!("{base}/d{d}/r_bias_h"), Tensor::from_f32(vec![hid], rb[2 * hid..].to_vec()));
        // `None`: the zero state (no initial_h, or a constant zero one), whose first step needs no recurrent
        // products (and a constant operand of a FULLY_CONNECTED would not quantize)
        let zero_h0 = zero_state(e.g, n, input::INITIAL_H);
        let mut h: Option<ValueId> = match n.input(input::INITIAL_H) {
            Some(h0) if !zero_h0 => {
                let idx = e.g.add_constant(format!("{base}/d{d}/index"), Tensor::from_vec(vec![], vec![d as i64]).expect("scalar"));
                Some(e.op(&format!("d{d}/h0"), Op::Gather { axis: if a.batch_major { 1 } else { 0 } }, &[h0, idx], &[batch, hid]))
            }
            _ => None,
        };
        let reverse = (dirs == 2 && d == 1) || matches!(a.direction, crate::ir::ops::recurrent::RnnDirection::Reverse);
        let mut hs = vec![None; seq];
        let bin = |e: &mut Emit, what: String, op: BinaryOp, x: ValueId, y: ValueId| e.op(&what, Op::Binary(op, None), &[x, y], &[batch, hid]);
        for k in 0..seq {
            let t = if reverse { seq - 1 - k } else { k };
            let s = format!("d{d}/t{t}");
            let idx = e.g.add_constant(format!("{base}/{s}/index"), Tensor::from_vec(vec![], vec![t as i64]).expect("scalar"));
            let xt = e.op(&format!("{s}/x"), Op::Gather { axis: seq_axis }, &[x, idx], &[batch, isz]);
            let xg = e.op(&format!("{s}/xw"), gemm_t.clone(), &[xt, wc, xb], &[batch, 3 * hid]);
            let xparts = e.split(&format!("{s}/xw_split"), xg, 3, &[batch, hid]);
            let (zsum, rsum) = match h {
                Some(h) => {
                    let hg = e.op(&format!("{s}/hr"), gemm_t.clone(), &[h, rzr], &[batch, 2 * hid]);
                    let hparts = e.split(&format!("{s}/hr_split"), hg, 2, &[batch, hid]);
                    (bin(&mut e, format!("{s}/z_in"), BinaryOp::Add, xparts[0], hparts[0]), bin(&mut e, format!("{s}/r_in"), BinaryOp::Add, xparts[1], hparts[1]))
                }
                None => (xparts[0], xparts[1]),
            };
            let z = e.op(&format!("{s}/z"), Op::Unary(UnaryOp::Sigmoid), &[zsum], &[batch, hid]);
            let rg = e.op(&format!("{s}/r"), Op::Unary(UnaryOp::Sigmoid), &[rsum], &[batch, hid]);
            let recurrent = match (h, a.linear_before_reset) {
                (Some(h), true) => {
                    let hh = e.op(&format!("{s}/hr_h"), gemm_t.clone(), &[h, rh, rbh], &[batch, hid]);
                    Some(bin(&mut e, format!("{s}/reset"), BinaryOp::Mul, rg, hh))
                }
                (Some(h), false) => {
                    let reset = bin(&mut e, format!("{s}/reset"), BinaryOp::Mul, rg, h);
                    Some(e.op(&format!("{s}/hr_h"), gemm_t.clone(), &[reset, rh], &[batch, hid]))
                }
                // h = 0: h·R_hᵀ is 0, leaving r·Rb_h before the reset (and nothing after it)
                (None, true) => Some(bin(&mut e, format!("{s}/reset"), BinaryOp::Mul, rg, rbh)),
                (None, false) => None,
            };
            let nsum = match recurrent {
                Some(v) => bin(&mut e, format!("{s}/n_in"), BinaryOp::Add, xparts[2], v),
                None => xparts[2],
            };
            let nv = e.op(&format!("{s}/n"), Op::Unary(UnaryOp::Tanh), &[nsum], &[batch, hid]);
            let next = match h {
                Some(h) => {
                    let diff = bin(&mut e, format!("{s}/h_minus_n"), BinaryOp::Sub, h, nv);
                    let kept = bin(&mut e, format!("{s}/z_h_minus_n"), BinaryOp::Mul, z, diff);
                    bin(&mut e, format!("{s}/h"), BinaryOp::Add, nv, kept)
                }
                None => {
                    // (1 − z)·n = n − z·n
                    let zn = bin(&mut e, format!("{s}/z_n"), BinaryOp::Mul, z, nv);
                    bin(&mut e, format!("{s}/h"), BinaryOp::Sub, nv, zn)
                }
            };
            h = Some(next);
            hs[t] = Some(next);
        }
        let h = h.expect("at least one step");
        ys[d] = hs.into_iter().map(|v| v.expect("every step ran")).collect();
        finals.push(h);
    }
    // Y: [seq, dirs, batch, hid] (layout 0) or [batch, seq, dirs, hid] (layout 1)
    if let Some(&y) = n.outputs.first() {
        let step_shape: Vec<usize> = if a.batch_major { vec![batch, 1, 1, hid] } else { vec![1, 1, batch, hid] };
        let (dir_axis, seq_out_axis) = if a.batch_major { (2, 1) } else { (1, 0) };
        let mut steps = Vec::with_capacity(seq);
        for t in 0..seq {
            let per_dir: Vec<ValueId> = (0..dirs).map(|d| e.reshape(&format!("d{d}/t{t}/y"), ys[d][t], &step_shape)).collect();
            let mut shape = step_shape.clone();
            shape[dir_axis] = dirs;
            steps.push(if dirs == 1 { per_dir[0] } else { e.op(&format!("t{t}/y"), Op::Concat { axis: dir_axis }, &per_dir, &shape) });
        }
        let mut shape = step_shape;
        shape[dir_axis] = dirs;
        shape[seq_out_axis] = seq;
        if seq == 1 {
            // the one step's last node writes Y
            e.nodes.last_mut().expect("a step").outputs[0] = y;
        } else {
            e.op("y", Op::Concat { axis: seq_out_axis }, &steps, &shape);
            e.nodes.last_mut().expect("concat").outputs[0] = y;
        }
        e.g.values[y.0].shape = shape;
    }
    // Y_h: [dirs, batch, hid] (layout 0) or [batch, dirs, hid]
    if let Some(&yh) = n.outputs.get(1) {
        let one: Vec<usize> = if a.batch_major { vec![batch, 1, hid] } else { vec![1, batch, hid] };
        let axis = if a.batch_major { 1 } else { 0 };
        let per_dir: Vec<ValueId> = finals.iter().enumerate().map(|(d, &h)| e.reshape(&format!("d{d}/y_h"), h, &one)).collect();
        if dirs > 1 {
            let mut shape = one.clone();
            shape[axis] = dirs;
            e.op("y_h", Op::Concat { axis }, &per_dir, &shape);
        }
        e.nodes.last_mut().expect("y_h").outputs[0] = yh;
    }
    Some(e.nodes)
}
