//! `--dtype bf16`: the graph rewritten to compute in bfloat16 (the TPU's native matrix type).
//!
//! Every f32 value becomes bf16 and every f32 constant (weights included) is rounded to bf16; casts to f32 and
//! `EyeLike` of f32 become bf16. The program keeps its f32 interface: each f32 graph input is cast to bf16 by a
//! node at the front and each f32 output is cast back at the end, so callers feed and receive the same types.

use half::bf16;
use tpu_sdk_core::ir::{DType, Graph, Node, Op, Tensor, TensorData, ValueId};

/// The bf16 version of `g` (see the module docs).
pub fn to_bf16(g: &Graph) -> Graph {
    to_bf16_keeping(g, &[], &[])
}

/// [`to_bf16`], except that the inputs and outputs at the given indices keep bf16 types at the interface (no
/// casts): values that stay on the device between calls (a generation's key/value cache) are stored in bf16.
pub fn to_bf16_keeping(g: &Graph, bf16_inputs: &[usize], bf16_outputs: &[usize]) -> Graph {
    let mut out = g.clone();
    retype_graph(&mut out);
    // The f32 interface: new f32 inputs cast in, new f32 outputs cast out.
    let mut front = Vec::new();
    for k in 0..out.inputs.len() {
        if bf16_inputs.contains(&k) {
            continue;
        }
        let inner = out.inputs[k];
        let Some((name, outer)) = f32_twin(g, &mut out, inner) else { continue };
        out.inputs[k] = outer;
        front.push(Node { name: format!("{name}.to_bf16"), op: Op::Cast { to: DType::BF16 }, inputs: vec![Some(outer)], outputs: vec![inner], keep_float: false });
    }
    out.nodes.splice(0..0, front);
    for k in 0..out.outputs.len() {
        if bf16_outputs.contains(&k) {
            continue;
        }
        let inner = out.outputs[k];
        // An output that is also an input or a constant is cast too; its f32 name moves to the cast.
        let Some((name, outer)) = f32_twin(g, &mut out, inner) else { continue };
        out.add_node(format!("{name}.to_f32"), Op::Cast { to: DType::F32 }, vec![Some(inner)], vec![outer]);
        out.outputs[k] = outer;
    }
    out
}

/// Every f32 value of `g` (constants included) and every f32 dtype attribute of its nodes (regions included)
/// becomes bf16, without interface casts.
fn retype_graph(g: &mut Graph) {
    for v in g.values.iter_mut() {
        if v.dtype == DType::F32 {
            v.dtype = DType::BF16;
            if let Some(t) = &v.constant {
                let data = t.as_f32().expect("an f32 value holds f32 data").iter().map(|&x| bf16::from_f32(x)).collect();
                v.constant = Some(Tensor { shape: t.shape.clone(), data: TensorData::BF16(data) });
            }
        }
    }
    for n in g.nodes.iter_mut() {
        retype(&mut n.op);
    }
}

/// For an f32 interface value `inner` of `g`: renames it `NAME.bf16` in `out` and adds a new f32 value `NAME` of
/// its shape there; returns (NAME, the new value). `None` for a value that is not f32.
fn f32_twin(g: &Graph, out: &mut Graph, inner: ValueId) -> Option<(String, ValueId)> {
    if g.value(inner).dtype != DType::F32 {
        return None;
    }
    let name = g.value(inner).name.clone();
    out.value_mut(inner).name = format!("{name}.bf16");
    let outer = out.add_value(name.clone(), DType::F32, g.value(inner).shape.clone());
    Some((name, outer))
}

/// Makes the f32 dtype attributes of `op` bf16. Every op is named: one that gains a dtype attribute must decide.
fn retype(op: &mut Op) {
    let bf16 = |d: &mut DType| {
        if *d == DType::F32 {
            *d = DType::BF16
        }
    };
    match op {
        Op::Cast { to } => bf16(to),
        Op::EyeLike { dtype, k: _ } => dtype.iter_mut().for_each(bf16),
        // QuantizeLinear's `to` is its integer type; ConstantOfShape's value is converted to the (retyped)
        // output's dtype where it is used.
        Op::QuantizeLinear { .. } | Op::ConstantOfShape { .. } => {}
        // No dtype attribute.
        Op::Conv(_) | Op::ConvTranspose(_) | Op::Gemm { .. } | Op::MatMul | Op::Binary(..) | Op::Unary(_) => {}
        Op::ClipDynamic | Op::Variadic(_) | Op::VariadicMean | Op::Where | Op::Identity | Op::DequantizeLinear { .. } => {}
        Op::MaxPool(_) | Op::AveragePool(_) | Op::LpPool(..) | Op::GlobalAveragePool | Op::GlobalMaxPool => {}
        Op::BatchNorm { .. } | Op::InstanceNorm { .. } | Op::LayerNorm { .. } | Op::GroupNorm { .. } | Op::Lrn { .. } => {}
        Op::LpNorm { .. } | Op::Softmax { .. } | Op::LogSoftmax { .. } | Op::Hardmax { .. } | Op::TopK { .. } => {}
        Op::Reduce { .. } | Op::ArgReduce { .. } | Op::CumSum { .. } | Op::Range | Op::NonZero | Op::OneHot { .. } => {}
        Op::Reshape { .. } | Op::Flatten { .. } | Op::Squeeze { .. } | Op::Unsqueeze { .. } | Op::Transpose { .. } => {}
        Op::Concat { .. } | Op::Split { .. } | Op::Slice | Op::Pad { .. } | Op::Expand | Op::Tile | Op::Trilu { .. } => {}
        Op::Gather { .. } | Op::GatherElements { .. } | Op::GatherNd { .. } | Op::ScatterElements { .. } => {}
        Op::ScatterNd { .. } | Op::TensorScatter { .. } | Op::ReverseSequence { .. } | Op::Resize(_) | Op::DepthToSpace { .. } => {}
        Op::SpaceToDepth { .. } | Op::Shape { .. } | Op::Size => {}
        // Regions compute in bf16 like the rest: their inputs (captures, carried values) arrive as bf16.
        Op::If(_) | Op::Loop(_) | Op::Scan(_) => {
            for r in tpu_sdk_core::ir::ops::control_flow::regions_mut(op) {
                retype_graph(r);
            }
        }
        Op::Rnn(_) => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tpu_sdk_core::ir::builder::GraphBuilder;

    #[test]
    fn keeps_an_f32_interface_around_a_bf16_body() {
        let mut gb = GraphBuilder::new("t");
        let x = gb.input("x", DType::F32, &[2]);
        let w = gb.constant("w", Tensor::from_f32(vec![2], vec![1.0, 1.0 / 3.0]));
        let y = gb.named_op("m", "y", Op::Binary(tpu_sdk_core::ir::BinaryOp::Mul, None), &[Some(x), Some(w)]).unwrap();
        gb.output(y);
        let g = gb.finish().unwrap();
        let b = to_bf16(&g);
        assert_eq!(b.value(b.inputs[0]).dtype, DType::F32);
        assert_eq!(b.value(b.inputs[0]).name, "x");
        assert_eq!(b.value(b.outputs[0]).dtype, DType::F32);
        assert_eq!(b.value(b.outputs[0]).name, "y");
        assert_eq!(b.value(w).dtype, DType::BF16);
        assert_eq!(b.nodes.first().unwrap().op, Op::Cast { to: DType::BF16 });
        assert_eq!(b.nodes.last().unwrap().op, Op::Cast { to: DType::F32 });
    }
}
