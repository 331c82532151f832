//! What the lowering refuses (naming the node and op), and constants of every dtype through the MLIR text.

use super::*;

#[test]
fn unsupported_ops_name_the_node_and_op() {
    let mut g = Graph::new("u");
    let xi = g.add_input("x", DType::F32, vec![]);
    let y = g.add_value("y", DType::F32, vec![4]);
    g.add_node("my_range", Op::Range, vec![Some(xi), Some(xi), Some(xi)], vec![y]);
    g.outputs.push(y);
    let e = tpu_sdk_cloud_tpu::lower::lower(&g).unwrap_err().to_string();
    assert!(e.contains("my_range") && e.contains("Range"), "{e}");
    let core: tpu_sdk_core::Error = tpu_sdk_cloud_tpu::lower::lower(&g).unwrap_err().into();
    assert!(matches!(core, tpu_sdk_core::Error::Unsupported(_)), "{core:?}");
}

#[test]
fn malformed_nodes_are_errors_naming_the_node_not_panics() {
    let mut g = Graph::new("bad");
    let a = g.add_input("a", DType::F32, vec![2]);
    let b = g.add_input("b", DType::F32, vec![3]);
    let y = g.add_value("y", DType::F32, vec![3]);
    g.add_node("bad_add", Op::Binary(BinaryOp::Add, None), vec![Some(a), Some(b)], vec![y]);
    g.outputs.push(y);
    let e = tpu_sdk_cloud_tpu::lower::lower(&g).unwrap_err().to_string();
    assert!(e.contains("bad_add") && e.contains("broadcast"), "{e}");

    let mut g = Graph::new("bad_conv");
    let x = g.add_input("x", DType::F32, vec![1, 1, 4, 4]);
    let w = g.add_constant("w", Tensor::zeros(DType::F32, vec![1, 1, 2, 2]));
    let y = g.add_value("y", DType::F32, vec![1, 1, 3, 3]);
    let attrs = ConvAttrs { strides: vec![0, 1], ..conv_attrs() };
    g.add_node("zero_stride", Op::Conv(attrs), vec![Some(x), Some(w)], vec![y]);
    g.outputs.push(y);
    let e = tpu_sdk_cloud_tpu::lower::lower(&g).unwrap_err().to_string();
    assert!(e.contains("zero_stride") && e.contains("strides"), "{e}");

    // A node whose recorded output shape disagrees with what it computes.
    let mut g = Graph::new("wrong_shape");
    let x = g.add_input("x", DType::F32, vec![2, 3]);
    let y = g.add_value("y", DType::F32, vec![3, 2]);
    g.add_node("relu", Op::Unary(UnaryOp::Relu), vec![Some(x)], vec![y]);
    g.outputs.push(y);
    let e = tpu_sdk_cloud_tpu::lower::lower(&g).unwrap_err().to_string();
    assert!(e.contains("relu") && e.contains("[2, 3]") && e.contains("[3, 2]"), "{e}");
}

#[test]
fn constants_of_every_dtype_survive_the_mlir_text_exactly() {
    let Some(plugin) = common::cpu_plugin() else { return };
    let consts = vec![
        Tensor::from_f32(vec![2, 2], vec![1.5, -0.0, f32::INFINITY, f32::MIN_POSITIVE]),
        Tensor::from_f32(vec![3], vec![0.1; 3]),
        Tensor::new(vec![2], TensorData::F64(vec![std::f64::consts::PI, -1e-300])).unwrap(),
        Tensor::new(vec![2], TensorData::F16(vec![half::f16::from_f32(0.333), half::f16::from_f32(-2.0)])).unwrap(),
        Tensor::new(vec![2], TensorData::BF16(vec![half::bf16::from_f32(0.333), half::bf16::from_f32(-2.0)])).unwrap(),
        Tensor::new(vec![3], TensorData::I8(vec![-128, 0, 127])).unwrap(),
        Tensor::new(vec![2], TensorData::U8(vec![0, 255])).unwrap(),
        Tensor::new(vec![2], TensorData::I16(vec![-32768, 5])).unwrap(),
        Tensor::new(vec![2], TensorData::I32(vec![i32::MIN, 1 << 20])).unwrap(),
        Tensor::from_i64(vec![2, 1], vec![i64::MIN, i64::MAX]),
        Tensor::new(vec![2, 3], TensorData::Bool(vec![true, false, false, true, true, false])).unwrap(),
        Tensor::new(vec![2], TensorData::Bool(vec![true, true])).unwrap(),
        Tensor::from_f32(vec![], vec![-7.25]),
        Tensor::from_f32(vec![0, 2], vec![]),
    ];
    let mut g = Graph::new("consts");
    // One input so that the program has an argument; the outputs are the constants themselves.
    g.add_input("unused", DType::F32, vec![1]);
    for (i, t) in consts.iter().enumerate() {
        let v = g.add_constant(format!("c{i}"), t.clone());
        g.outputs.push(v);
    }
    let exe = CloudTpuTarget::with_plugin(&plugin).compile_graph(g).unwrap();
    let got = exe.execute(&[Tensor::from_f32(vec![1], vec![0.0])]).unwrap();
    assert_eq!(got, consts);
}
