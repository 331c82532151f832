//! `--dtype bf16`: the graph rewritten to compute in bfloat16 (the TPU's native matrix type).
//!
//! Every f32 value becomes bf16 and every f32 constant (weights included) is rounded to bf16; casts to f32 and
//! `EyeLike` of f32 become bf16. The program keeps its f32 interface: each f32 graph input is cast to bf16 by a
//! node at the front and each f32 output is cast back at the end, so callers feed and receive the same types.

use half::bf16;
use tpu_sdk_core::ir::{DType, Graph, Node, Op, Tensor, TensorData, ValueId};

/// The bf16 version of `g` (see the module docs).
pub fn to_bf16(g: &Graph) -> Graph {
    let mut out = g.clone();
    for v in out.values.iter_mut() {
        if v.dtype == DType::F32 {
            v.dtype = DType::BF16;
            if let Some(t) = &v.constant {
                let data = t.as_f32().expect("an f32 value holds f32 data").iter().map(|&x| bf16::from_f32(x)).collect();
                v.constant = Some(Tensor { shape: t.shape.clone(), data: TensorData::BF16(data) });
            }
        }
    }
    for n in out.nodes.iter_mut() {
        match &mut n.op {
            Op::Cast { to } if *to == DType::F32 => *to = DType::BF16,
            Op::EyeLike { dtype: Some(d), .. } if *d == DType::F32 => *d = DType::BF16,
            _ => {}
        }
    }
    // The f32 interface: new f32 inputs cast in, new f32 outputs cast out.
    let mut front = Vec::new();
    for k in 0..out.inputs.len() {
        let inner = out.inputs[k];
        if g.value(inner).dtype != DType::F32 {
            continue;
        }
        let name = g.value(inner).name.clone();
        out.value_mut(inner).name = format!("{name}.bf16");
        let outer = out.add_value(name.clone(), DType::F32, g.value(inner).shape.clone());
        out.inputs[k] = outer;
        front.push(Node { name: format!("{name}.to_bf16"), op: Op::Cast { to: DType::BF16 }, inputs: vec![Some(outer)], outputs: vec![inner] });
    }
    out.nodes.splice(0..0, front);
    for k in 0..out.outputs.len() {
        let inner = out.outputs[k];
        if g.value(inner).dtype != DType::F32 {
            continue;
        }
        let name = g.value(inner).name.clone();
        // An output that is also an input or a constant is cast too; its f32 name moves to the cast.
        out.value_mut(inner).name = format!("{name}.bf16");
        let outer: ValueId = out.add_value(name.clone(), DType::F32, g.value(inner).shape.clone());
        out.add_node(format!("{name}.to_f32"), Op::Cast { to: DType::F32 }, vec![Some(inner)], vec![outer]);
        out.outputs[k] = outer;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_an_f32_interface_around_a_bf16_body() {
        let mut g = Graph::new("t");
        let x = g.add_input("x", DType::F32, vec![2]);
        let w = g.add_constant("w", Tensor::from_f32(vec![2], vec![1.0, 1.0 / 3.0]));
        let y = g.add_value("y", DType::F32, vec![2]);
        g.add_node("m", Op::Binary(tpu_sdk_core::ir::BinaryOp::Mul, None), vec![Some(x), Some(w)], vec![y]);
        g.outputs.push(y);
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
