//! Moves layout transposes out of the way: an elementwise op (unary, binary incl. PRelu) whose every computed input
//! is `Transpose(perm)` of something runs on the untransposed data instead, followed by one `Transpose(perm)`
//! of its result (constant operands are permuted once, here); so does a `Pad` with constant pads (permuted); two transposes in a row become one, and an
//! identity transpose is later removed by [`super::simplify_shapes`]; a reduction without kept dims whose
//! remaining dims keep their order reads the untransposed data over the permuted axes.
//!
//! Importers of NHWC formats (TFLite) wrap every NCHW convolution in a pair of transposes; between two
//! convolutions the elementwise ops (bias-free PRelu, residual Add) pin them in place. Sinking them through the
//! elementwise ops lets each `to_nhwc` meet the next `to_nchw` and cancel, so the data stays NCHW between
//! convolutions. Float values and per-tensor quantized int8/uint8 values are moved; values with per-axis
//! quantization parameters stay (their axis would move too).

use crate::ir::{DType, Graph, Node, Op, Tensor, ValueId};

/// Rewrites in place; returns the number of ops moved or transposes merged.
pub fn run(g: &mut Graph) -> usize {
    let mut changed = 0;
    // Each step moves a transpose strictly downstream or removes one, so this terminates; the bound is a guard.
    for _ in 0..4 * g.nodes.len() + 16 {
        if merge_transpose_chains(g) || reduce_before_transpose(g) {
            changed += 1;
            continue;
        }
        let producers = g.producers();
        match (0..g.nodes.len()).find_map(|i| sinkable(g, &producers, i).map(|perm| (i, perm))) {
            Some((i, perm)) => {
                sink(g, &producers, i, &perm);
                changed += 1;
            }
            None => break,
        }
    }
    changed
}

/// `Transpose(p2)` of `Transpose(p1)` of `x` reads `x` with the composed permutation. Returns whether one changed.
fn merge_transpose_chains(g: &mut Graph) -> bool {
    let producers = g.producers();
    for i in 0..g.nodes.len() {
        let Op::Transpose { perm: p2 } = &g.nodes[i].op else { continue };
        let Some(src) = g.nodes[i].input(0) else { continue };
        let Some(p) = producers[src.0] else { continue };
        let Op::Transpose { perm: p1 } = &g.nodes[p].op else { continue };
        let (Some(x), false) = (g.nodes[p].input(0), p1.is_empty() || p2.is_empty() || p1.len() != p2.len()) else { continue };
        if !movable(g, x) {
            continue;
        }
        let perm: Vec<usize> = p2.iter().map(|&k| p1[k]).collect();
        g.nodes[i].inputs[0] = Some(x);
        g.nodes[i].op = Op::Transpose { perm };
        return true;
    }
    false
}

/// A reduction without kept dims of `Transpose(perm)` of `x` whose remaining dims keep their order under the
/// permutation reads `x` directly, over the permuted axes (a TFLite global average pool, `Mean` over NHWC's H
/// and W after the importer's to-NHWC transpose, becomes a mean over NCHW's H and W: no transpose at all).
/// Returns whether one changed.
fn reduce_before_transpose(g: &mut Graph) -> bool {
    let producers = g.producers();
    for i in 0..g.nodes.len() {
        let Op::Reduce { axes: Some(axes), keepdims: false, .. } = &g.nodes[i].op else { continue };
        let Some(src) = g.nodes[i].input(0) else { continue };
        if g.nodes[i].inputs.len() > 1 && g.nodes[i].input(1).is_some() {
            continue;
        }
        let Some(p) = producers[src.0] else { continue };
        let Op::Transpose { perm } = &g.nodes[p].op else { continue };
        let Some(x) = g.nodes[p].input(0) else { continue };
        let rank = g.value(src).shape.len();
        if perm.len() != rank || g.value(x).shape.len() != rank || axes.iter().any(|&a| a >= rank) || !movable(g, x) || !movable(g, src) {
            continue;
        }
        let kept: Vec<usize> = (0..rank).filter(|k| !axes.contains(k)).map(|k| perm[k]).collect();
        if kept.windows(2).any(|w| w[0] > w[1]) {
            continue;
        }
        let mut moved: Vec<usize> = axes.iter().map(|&a| perm[a]).collect();
        moved.sort_unstable();
        let Op::Reduce { axes, .. } = &mut g.nodes[i].op else { unreachable!("matched above") };
        *axes = Some(moved);
        g.nodes[i].inputs[0] = Some(x);
        return true;
    }
    false
}

/// Floats without quantization parameters, and int8/uint8 values quantized per tensor (moving them moves no
/// parameter, and the int8 kernels of the ops moved here do not depend on the layout).
fn movable(g: &Graph, v: ValueId) -> bool {
    let val = g.value(v);
    let float = matches!(val.dtype, DType::F32 | DType::F16 | DType::BF16 | DType::F64) && val.quant.is_none();
    let per_tensor = matches!(val.dtype, DType::I8 | DType::U8) && val.quant.as_ref().is_some_and(|q| q.axis.is_none());
    (float || per_tensor) && !val.dynamic
}

/// The permutation to sink through node `i`, when it is elementwise and every computed input is a transpose by
/// that permutation (and there is at least one).
fn sinkable(g: &Graph, producers: &[Option<usize>], i: usize) -> Option<Vec<usize>> {
    let n = &g.nodes[i];
    let out = *n.outputs.first()?;
    let rank = g.value(out).shape.len();
    if n.outputs.len() != 1 || !movable(g, out) || rank < 2 {
        return None;
    }
    // The inputs that carry data in the output's layout (the rest are Pad's pads and fill value).
    let data_inputs = match n.op {
        Op::Unary(_) | Op::Binary(..) => n.inputs.len(),
        Op::Pad { .. } => {
            let pads = g.constant(n.input(1)?)?;
            let fill_ok = n.input(2).is_none_or(|f| g.constant(f).is_some());
            if pads.len() != 2 * rank || !fill_ok || n.input(3).is_some() {
                return None;
            }
            1
        }
        // Layout-sensitive ops and the rest: a transpose does not move through them.
        Op::Conv(_) | Op::ConvTranspose(_) | Op::Gemm { .. } | Op::MatMul | Op::ClipDynamic | Op::Variadic(_) | Op::VariadicMean => return None,
        Op::Where | Op::MaxPool(_) | Op::AveragePool(_) | Op::LpPool(..) | Op::GlobalAveragePool | Op::GlobalMaxPool => return None,
        Op::BatchNorm { .. } | Op::InstanceNorm { .. } | Op::LayerNorm { .. } | Op::GroupNorm { .. } | Op::Lrn { .. } => return None,
        Op::LpNorm { .. } | Op::Softmax { .. } | Op::LogSoftmax { .. } | Op::Hardmax { .. } | Op::Reduce { .. } => return None,
        Op::ArgReduce { .. } | Op::CumSum { .. } | Op::Reshape { .. } | Op::Flatten { .. } | Op::Squeeze { .. } => return None,
        Op::Unsqueeze { .. } | Op::Transpose { .. } | Op::Concat { .. } | Op::Split { .. } | Op::Slice | Op::Gather { .. } => return None,
        Op::GatherElements { .. } | Op::GatherNd { .. } | Op::ScatterElements { .. } | Op::ScatterNd { .. } | Op::Resize(_) => return None,
        Op::TensorScatter { .. } => return None,
        Op::Expand | Op::Tile | Op::Shape { .. } | Op::Size | Op::ConstantOfShape { .. } | Op::Range | Op::Cast { .. } => return None,
        Op::Identity | Op::Trilu { .. } | Op::OneHot { .. } | Op::EyeLike { .. } | Op::DepthToSpace { .. } => return None,
        Op::SpaceToDepth { .. } | Op::TopK { .. } | Op::NonZero | Op::ReverseSequence { .. } => return None,
        Op::DequantizeLinear { .. } | Op::QuantizeLinear { .. } => return None,
        Op::If(_) | Op::Loop(_) | Op::Scan(_) => return None,
        Op::Rnn(_) => return None,
    };
    let mut perm: Option<Vec<usize>> = None;
    for v in n.inputs.iter().take(data_inputs) {
        let v = (*v)?;
        if let Some(c) = g.constant(v) {
            if c.shape.len() > rank || g.value(v).quant.as_ref().is_some_and(|q| q.axis.is_some()) {
                return None;
            }
            continue;
        }
        let p = producers[v.0]?;
        let Op::Transpose { perm: tp } = &g.nodes[p].op else { return None };
        let x = g.nodes[p].input(0)?;
        if tp.len() != rank || g.value(v).shape.len() != rank || !movable(g, v) || !movable(g, x) {
            return None;
        }
        match &perm {
            None => perm = Some(tp.clone()),
            Some(q) if q == tp => {}
            Some(_) => return None,
        }
    }
    perm
}

/// Runs node `i` on the transposes' inputs (constants permuted by the inverse) and transposes its result.
fn sink(g: &mut Graph, producers: &[Option<usize>], i: usize, perm: &[usize]) {
    let rank = perm.len();
    let mut inverse = vec![0; rank];
    for (k, &p) in perm.iter().enumerate() {
        inverse[p] = k;
    }
    let node = g.nodes[i].clone();
    let mut inputs = Vec::with_capacity(node.inputs.len());
    if matches!(node.op, Op::Pad { .. }) {
        // Padding dim k of the transposed tensor is padding dim perm[k] of its source.
        let src = producers[node.inputs[0].expect("checked").0].expect("checked by sinkable");
        inputs.push(g.nodes[src].input(0));
        let pads = g.constant(node.inputs[1].expect("checked")).expect("checked").to_i64_vec();
        let moved: Vec<i64> = (0..2 * rank).map(|j| pads[(j / rank) * rank + inverse[j % rank]]).collect();
        let name = format!("{}/untransposed", g.value(node.inputs[1].expect("checked")).name);
        inputs.push(Some(g.add_constant(name, Tensor::from_i64(vec![2 * rank], moved))));
        inputs.extend(node.inputs.iter().skip(2).copied());
    }
    for v in node.inputs.iter().flatten().filter(|_| !matches!(node.op, Op::Pad { .. })) {
        let nv = match g.constant(*v) {
            Some(c) => {
                // Broadcast from the right to the full rank, then into the untransposed layout.
                let mut shape = vec![1; rank - c.shape.len()];
                shape.extend_from_slice(&c.shape);
                let full = Tensor { shape, data: c.data.clone() };
                let moved = full.permuted(&inverse);
                let name = format!("{}/untransposed", g.value(*v).name);
                let quant = g.value(*v).quant.clone();
                let c = g.add_constant(name, moved);
                g.value_mut(c).quant = quant;
                c
            }
            None => {
                let p = producers[v.0].expect("checked by sinkable");
                g.nodes[p].input(0).expect("checked by sinkable")
            }
        };
        inputs.push(Some(nv));
    }
    let out = node.outputs[0];
    let (name, dtype, shape) = {
        let o = g.value(out);
        (format!("{}/untransposed", o.name), o.dtype, inverse.iter().map(|&k| o.shape[k]).collect::<Vec<usize>>())
    };
    let inner = g.add_value(name, dtype, shape);
    g.value_mut(inner).quant = g.value(out).quant.clone();
    g.nodes[i] = Node { name: node.name.clone(), op: node.op.clone(), inputs, outputs: vec![inner], keep_float: node.keep_float };
    let t = Node { name: format!("{}/transpose", node.name), op: Op::Transpose { perm: perm.to_vec() }, inputs: vec![Some(inner)], outputs: vec![out], keep_float: node.keep_float };
    g.nodes.insert(i + 1, t);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{BinaryOp, UnaryOp};
    use crate::runtime::Session;

    fn transpose(g: &mut Graph, x: ValueId, perm: &[usize]) -> ValueId {
        let s: Vec<usize> = perm.iter().map(|&p| g.value(x).shape[p]).collect();
        let y = g.add_value("t", DType::F32, s);
        g.add_node("t", Op::Transpose { perm: perm.to_vec() }, vec![Some(x)], vec![y]);
        y
    }

    /// A global average pool over NHWC (`Mean` over axes 1, 2 of the to-NHWC transpose) reads the NCHW data
    /// over axes 2, 3 and no transpose is left; a reduction whose kept dims would change order keeps it.
    #[test]
    fn reductions_read_the_untransposed_data() {
        let mut g = Graph::new("t");
        let x = g.add_input("x", DType::F32, vec![1, 3, 4, 5]);
        let t = transpose(&mut g, x, &[0, 2, 3, 1]);
        let y = g.add_value("y", DType::F32, vec![1, 3]);
        g.add_node("mean", Op::Reduce { op: crate::ir::ReduceOp::Mean, axes: Some(vec![1, 2]), keepdims: false, noop_with_empty_axes: false }, vec![Some(t)], vec![y]);
        g.outputs.push(y);
        let data: Vec<f32> = (0..60).map(|i| (i * 7 % 11) as f32 - 3.5).collect();
        let before = Session::new(g.clone()).expect("a session").run(&[Tensor::from_f32(vec![1, 3, 4, 5], data.clone())]).expect("runs");
        assert!(run(&mut g) > 0);
        crate::passes::simplify_shapes::run(&mut g);
        crate::passes::dce::run(&mut g);
        assert!(g.nodes.iter().all(|n| !matches!(n.op, Op::Transpose { .. })), "{:?}", g.nodes.iter().map(|n| &n.op).collect::<Vec<_>>());
        assert!(matches!(&g.nodes.last().expect("a node").op, Op::Reduce { axes: Some(a), .. } if a == &vec![2, 3]));
        let after = Session::new(g).expect("a session").run(&[Tensor::from_f32(vec![1, 3, 4, 5], data)]).expect("runs");
        assert_eq!(before, after);
        // kept dims [2, 1] of x after the permutation: not moved
        let mut g = Graph::new("t");
        let x = g.add_input("x", DType::F32, vec![2, 3, 4]);
        let t = transpose(&mut g, x, &[2, 0, 1]);
        let y = g.add_value("y", DType::F32, vec![4, 3]);
        g.add_node("sum", Op::Reduce { op: crate::ir::ReduceOp::Sum, axes: Some(vec![1]), keepdims: false, noop_with_empty_axes: false }, vec![Some(t)], vec![y]);
        g.outputs.push(y);
        let _ = run(&mut g);
        assert!(g.nodes.iter().any(|n| matches!(n.op, Op::Transpose { .. })));
    }

    /// NCHW conv-like stand-ins (Softmax over the channels: layout-bound, not elementwise) wrapped in to-NHWC / to-NCHW transposes, with PRelu and a residual Add in
    /// NHWC between them: after the pass no transpose is left and the result is unchanged.
    #[test]
    fn layout_transposes_between_convolutions_cancel() {
        let (to_nhwc, to_nchw) = ([0, 2, 3, 1], [0, 3, 1, 2]);
        let mut g = Graph::new("t");
        let x = g.add_input("x", DType::F32, vec![1, 3, 4, 5]);
        let a = g.add_value("a", DType::F32, vec![1, 3, 4, 5]);
        g.add_node("conv1", Op::Softmax { axis: 1 }, vec![Some(x)], vec![a]);
        let a_nhwc = transpose(&mut g, a, &to_nhwc);
        let slope = g.add_constant("slope", Tensor::from_f32(vec![3], vec![0.1, 0.2, 0.3]));
        let p = g.add_value("p", DType::F32, vec![1, 4, 5, 3]);
        g.add_node("prelu", Op::Binary(BinaryOp::PRelu, None), vec![Some(a_nhwc), Some(slope)], vec![p]);
        let p_nchw = transpose(&mut g, p, &to_nchw);
        let b = g.add_value("b", DType::F32, vec![1, 3, 4, 5]);
        g.add_node("conv2", Op::Softmax { axis: 1 }, vec![Some(p_nchw)], vec![b]);
        let b_nhwc = transpose(&mut g, b, &to_nhwc);
        let s = g.add_value("s", DType::F32, vec![1, 4, 5, 3]);
        g.add_node("residual", Op::Binary(BinaryOp::Add, None), vec![Some(p), Some(b_nhwc)], vec![s]);
        let s_nchw = transpose(&mut g, s, &to_nchw);
        let y = g.add_value("y", DType::F32, vec![1, 3, 4, 5]);
        g.add_node("conv3", Op::Softmax { axis: 1 }, vec![Some(s_nchw)], vec![y]);
        g.outputs = vec![y];

        let input = Tensor::from_f32(vec![1, 3, 4, 5], (0..60).map(|i| (i as f32 - 30.0) / 7.0).collect());
        let want = Session::new(g.clone()).unwrap().run(std::slice::from_ref(&input)).unwrap();
        assert!(run(&mut g) > 0);
        crate::passes::simplify_shapes::run(&mut g);
        crate::passes::dce::run(&mut g);
        crate::ir::verify::verify(&g).unwrap();
        let left = g.nodes.iter().filter(|n| matches!(n.op, Op::Transpose { .. })).count();
        assert_eq!(left, 0, "{:#?}", g.nodes);
        let got = Session::new(g).unwrap().run(&[input]).unwrap();
        assert_eq!(got, want);
    }

    #[test]
    fn pads_move_with_the_transpose() {
        let mut g = Graph::new("t");
        let x = g.add_input("x", DType::F32, vec![1, 2, 3, 4]);
        let xt = transpose(&mut g, x, &[0, 2, 3, 1]);
        // NHWC pads: H by (1, 0), W by (2, 1), fill 0.5.
        let pads = g.add_constant("pads", Tensor::from_i64(vec![8], vec![0, 1, 2, 0, 0, 0, 1, 0]));
        let fill = g.add_constant("fill", Tensor::from_f32(vec![], vec![0.5]));
        let p = g.add_value("p", DType::F32, vec![1, 4, 7, 2]);
        g.add_node("pad", Op::Pad { mode: crate::ir::PadMode::Constant }, vec![Some(xt), Some(pads), Some(fill)], vec![p]);
        let pt = transpose(&mut g, p, &[0, 3, 1, 2]);
        let y = g.add_value("y", DType::F32, vec![1, 2, 4, 7]);
        g.add_node("softmax", Op::Softmax { axis: 1 }, vec![Some(pt)], vec![y]);
        g.outputs = vec![y];
        let input = Tensor::from_f32(vec![1, 2, 3, 4], (0..24).map(|i| i as f32 / 5.0).collect());
        let want = Session::new(g.clone()).unwrap().run(std::slice::from_ref(&input)).unwrap();
        crate::passes::optimize(&mut g).unwrap();
        assert!(!g.nodes.iter().any(|n| matches!(n.op, Op::Transpose { .. })), "{:#?}", g.nodes);
        assert_eq!(Session::new(g).unwrap().run(&[input]).unwrap(), want);
    }

    #[test]
    fn mixed_permutations_and_per_axis_quantized_values_stay() {
        let mut g = Graph::new("t");
        let x = g.add_input("x", DType::F32, vec![2, 3]);
        let z = g.add_input("z", DType::F32, vec![2, 3]);
        let xt = transpose(&mut g, x, &[1, 0]);
        let y = g.add_value("y", DType::F32, vec![3, 2]);
        // One input transposed, the other computed without a transpose: nothing to sink.
        let zz = g.add_value("zz", DType::F32, vec![3, 2]);
        g.add_node("r", Op::Reshape { allowzero: false }, vec![Some(z), None], vec![zz]);
        g.add_node("add", Op::Binary(BinaryOp::Add, None), vec![Some(xt), Some(zz)], vec![y]);
        g.outputs = vec![y];
        assert_eq!(run(&mut g), 0);
        let mut q = Graph::new("q");
        let x = q.add_input("x", DType::I8, vec![2, 3]);
        let xt = transpose(&mut q, x, &[1, 0]);
        q.value_mut(xt).dtype = DType::I8;
        // Per-axis parameters (axis 1 of x is axis 0 of its transpose) pin the transpose.
        let per_axis = |axis| Some(crate::ir::QuantParams { scale: vec![0.1, 0.2, 0.3], zero_point: vec![0; 3], axis: Some(axis) });
        q.value_mut(x).quant = per_axis(1);
        q.value_mut(xt).quant = per_axis(0);
        let y = q.add_value("y", DType::I8, vec![3, 2]);
        q.value_mut(y).quant = per_axis(0);
        q.add_node("neg", Op::Unary(UnaryOp::Neg), vec![Some(xt)], vec![y]);
        q.outputs = vec![y];
        assert_eq!(run(&mut q), 0);
    }
}
