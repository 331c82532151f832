use crate::format::tflite::builder::*;
use crate::format::tflite::schema::{builtin_operator as bo, tensor_type as tt};
use crate::format::tflite::tests::conv_model;
use crate::ir::{Activation, Op, Tensor};
use crate::Error;
use super::*;

#[test]
fn malformed_files_give_errors_never_panics() {
    let good = conv_model(bo::CONV_2D).to_bytes();
    let opts = ImportOptions::default();
    let sg = &conv_model(bo::CONV_2D).subgraphs[0];
    let fi = file_interface(&good).unwrap();
    assert_eq!(fi.inputs.iter().map(|(t, _)| *t as i32).collect::<Vec<_>>(), sg.inputs);
    assert_eq!(fi.outputs.iter().map(|(t, _)| *t as i32).collect::<Vec<_>>(), sg.outputs);
    assert!(fi.signatures.is_empty());
    // Not a model.
    let e = load_bytes(b"hello world, not a model", &opts).unwrap_err().to_string();
    assert!(e.contains("not a TFLite model") && e.contains("TFL3"), "{e}");
    assert!(load_bytes(b"abc", &opts).unwrap_err().to_string().contains("too short"));
    // Every truncation.
    for n in 0..good.len() {
        assert!(load_bytes(&good[..n], &opts).is_err(), "truncated to {n} bytes was accepted");
        assert!(file_interface(&good[..n]).is_err(), "truncated to {n} bytes: its interface was read");
    }
    // Root offset pointing outside the buffer.
    let mut bad = good.clone();
    bad[0..4].copy_from_slice(&(good.len() as u32 + 100).to_le_bytes());
    let e = load_bytes(&bad, &opts).unwrap_err().to_string();
    assert!(e.contains("corrupt TFLite flatbuffer") && e.contains("outside the buffer"), "{e}");
    // Every single-byte corruption either parses (and then imports or fails cleanly) or is rejected.
    for i in 8..good.len() {
        for v in [0x00u8, 0x7f, 0xff] {
            let mut b = good.clone();
            b[i] = v;
            let _ = load_bytes(&b, &opts);
            let _ = file_interface(&b);
        }
    }
}

#[test]
fn unknown_ops_and_unsupported_quantized_ops_are_named_in_the_error() {
    let mut m = conv_model(bo::CONV_2D);
    m.operator_codes[0] = OperatorCodeT::builtin(bo::code("UNIQUE").unwrap(), 1);
    m.subgraphs[0].operators[0].builtin_options = None;
    let e = load_bytes(&m.to_bytes(), &ImportOptions::default()).unwrap_err();
    assert!(matches!(e, Error::Unsupported(_)), "{e}");
    assert!(e.to_string().contains("operator #0") && e.to_string().contains("UNIQUE"), "{e}");

    let mut m = conv_model(bo::CONV_2D);
    m.operator_codes[0] = OperatorCodeT { builtin_code: bo::CUSTOM, custom_code: Some("MyOp".into()), version: 1 };
    let e = load_bytes(&m.to_bytes(), &ImportOptions::default()).unwrap_err().to_string();
    assert!(e.contains("CUSTOM(MyOp)"), "{e}");

    let mut m = conv_model(bo::CONV_2D);
    for t in [0, 3] {
        let t = &mut m.subgraphs[0].tensors[t];
        t.type_ = tt::INT8;
        t.quantization = Some(QuantizationT { scale: vec![0.1], zero_point: vec![-3], ..Default::default() });
    }
    // int8 activations with f32 weights: not the quantized-graph contract; refused by name when the session
    // prepares the integer kernel
    let e = load_bytes(&m.to_bytes(), &ImportOptions::default()).and_then(crate::runtime::Session::new).map(|_| ()).unwrap_err();
    assert!(matches!(e, Error::Unsupported(_)) && e.to_string().contains("expected i8"), "{e}");

    // A tensor index past the end.
    let mut m = conv_model(bo::CONV_2D);
    m.subgraphs[0].operators[0].inputs[1] = 42;
    let e = load_bytes(&m.to_bytes(), &ImportOptions::default()).unwrap_err().to_string();
    assert!(e.contains("tensor index 42 is out of range"), "{e}");
}

#[test]
fn permutes_constant_data() {
    // [2,3] transposed.
    let t = Tensor::from_f32(vec![2, 3], vec![1., 2., 3., 4., 5., 6.]);
    let p = t.permuted(&[1, 0]);
    assert_eq!(p.shape, vec![3, 2]);
    assert_eq!(p.as_f32().unwrap(), &[1., 4., 2., 5., 3., 6.]);
    // OHWI [1,1,2,2] → OIHW [1,2,1,2]: element (o,h,w,i) moves to (o,i,h,w).
    let t = Tensor::from_f32(vec![1, 1, 2, 2], vec![10., 11., 20., 21.]);
    assert_eq!(t.permuted(&[0, 3, 1, 2]).as_f32().unwrap(), &[10., 20., 11., 21.]);
}

#[test]
fn conv_is_wrapped_in_layout_transposes_with_tflite_padding() {
    let g = load_bytes(&conv_model(bo::CONV_2D).to_bytes(), &ImportOptions::default()).unwrap();
    let ops: Vec<String> = g.nodes.iter().map(|n| n.op.name()).collect();
    assert_eq!(ops, ["Transpose", "Conv", "Transpose"]);
    let Op::Conv(a) = &g.nodes[1].op else { unreachable!() };
    assert_eq!((a.strides.clone(), a.pads.clone(), a.group, a.activation), (vec![2, 2], vec![0, 0, 1, 1], 1, Some(Activation::Relu)));
    let w = g.constant(g.nodes[1].inputs[1].unwrap()).unwrap();
    assert_eq!(w.shape, vec![3, 2, 3, 3]);
    assert_eq!(g.value(g.inputs[0]).name, "x");
    assert_eq!(g.value(g.outputs[0]).name, "y");
    assert_eq!(g.value(g.outputs[0]).shape, vec![1, 2, 2, 3]);

    // A declared shape that disagrees with the op is reported with the tensor's name.
    let mut m = conv_model(bo::CONV_2D);
    m.subgraphs[0].tensors[3].shape = vec![1, 3, 3, 3];
    let e = load_bytes(&m.to_bytes(), &ImportOptions::default()).unwrap_err().to_string();
    assert!(e.contains("'y' is declared [1, 3, 3, 3]") && e.contains("[1, 2, 2, 3]"), "{e}");
}

/// x [1, 8] → SPLIT_V with constant `sizes` along axis 1 → one output per size, declared [1, size] (a -1 as
/// the rest of the 8).
fn split_v_model(sizes: &[i32]) -> ModelT {
    let rest = 8 - sizes.iter().filter(|&&s| s > 0).sum::<i32>();
    use crate::format::tflite::tests::tensor;
    let i32_bytes = |v: &[i32]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
    let mut tensors = vec![
        tensor("x", &[1, 8], tt::FLOAT32, 0),
        tensor("size_splits", &[sizes.len() as i32], tt::INT32, 1),
        tensor("axis", &[], tt::INT32, 2),
    ];
    for (k, &s) in sizes.iter().enumerate() {
        tensors.push(tensor(&format!("y{k}"), &[1, if s == -1 { rest } else { s }], tt::FLOAT32, 0));
    }
    let outs: Vec<i32> = (3..3 + sizes.len() as i32).collect();
    ModelT {
        version: 3,
        operator_codes: vec![OperatorCodeT::builtin(bo::SPLIT_V, 2)],
        subgraphs: vec![SubGraphT {
            tensors,
            inputs: vec![0],
            outputs: outs.clone(),
            operators: vec![OperatorT {
                opcode_index: 0,
                inputs: vec![0, 1, 2],
                outputs: outs,
                builtin_options: Some(OptionsT::new(crate::format::tflite::schema::builtin_options::SPLIT_V).with(0, FieldT::I32(sizes.len() as i32))),
                custom_options: None,
                intermediates: Vec::new(),
            }],
            name: Some("main".into()),
        }],
        buffers: vec![BufferT::default(), BufferT { data: i32_bytes(sizes) }, BufferT { data: i32_bytes(&[1]) }],
        ..Default::default()
    }
}

#[test]
fn split_v_resolves_its_free_size_and_refuses_sizes_that_do_not_add_up() {
    let g = load_bytes(&split_v_model(&[2, -1, 3]).to_bytes(), &ImportOptions::default()).unwrap();
    let shapes: Vec<Vec<usize>> = g.outputs.iter().map(|&v| g.value(v).shape.clone()).collect();
    assert_eq!(shapes, [vec![1, 2], vec![1, 3], vec![1, 3]]);
    let Op::Split { split, .. } = &g.nodes[0].op else { panic!("{:?}", g.nodes[0].op) };
    assert_eq!(split.as_deref(), Some(&[2, 3, 3][..]));

    for (sizes, what) in [(&[2, 3, 4][..], "do not add up to"), (&[6, -1, 3][..], "do not add up to"), (&[-1, -1, 4][..], "cannot split")] {
        let e = load_bytes(&split_v_model(sizes).to_bytes(), &ImportOptions::default()).unwrap_err();
        let m = e.to_string();
        assert!(matches!(e, Error::InvalidModel(_)), "{m}");
        assert!(m.contains("SPLIT_V") && m.contains("size_splits") && m.contains(what) && m.contains("size 8"), "{sizes:?}: {m}");
    }
}

#[test]
fn declared_shapes_are_checked_except_where_the_signature_leaves_a_dimension_free() {
    // The converter records a free (-1) dimension as 1 in the shape: a computed 2 fits it.
    let mut m = split_v_model(&[2, 6]);
    m.subgraphs[0].tensors[3].shape = vec![1, 1];
    let e = load_bytes(&m.to_bytes(), &ImportOptions::default()).unwrap_err().to_string();
    assert!(e.contains("'y0' is declared [1, 1] but the op computes [1, 2]"), "{e}");
    m.subgraphs[0].tensors[3].shape_signature = Some(vec![1, -1]);
    load_bytes(&m.to_bytes(), &ImportOptions::default()).unwrap();
}

#[test]
fn reshape_to_a_run_time_shape_infers_the_one_free_dimension_and_refuses_two() {
    use crate::format::tflite::tests::tensor;
    // x [1, 12] and a shape that is a graph input (known only at run time) → RESHAPE → y, declared [1, 6]
    // with signature [-1, 6].
    let model = |signature: Vec<i32>| ModelT {
        version: 3,
        operator_codes: vec![OperatorCodeT::builtin(bo::RESHAPE, 1)],
        subgraphs: vec![SubGraphT {
            tensors: vec![
                tensor("x", &[1, 12], tt::FLOAT32, 0),
                tensor("shape", &[2], tt::INT32, 0),
                TensorT { shape_signature: Some(signature), ..tensor("y", &[1, 6], tt::FLOAT32, 0) },
            ],
            inputs: vec![0, 1],
            outputs: vec![2],
            operators: vec![OperatorT { opcode_index: 0, inputs: vec![0, 1], outputs: vec![2], ..Default::default() }],
            name: Some("main".into()),
        }],
        buffers: vec![BufferT::default()],
        ..Default::default()
    };
    let g = load_bytes(&model(vec![-1, 6]).to_bytes(), &ImportOptions::default()).unwrap();
    assert_eq!(g.value(g.outputs[0]).shape, vec![2, 6]);
    let e = load_bytes(&model(vec![-1, -1]).to_bytes(), &ImportOptions::default()).unwrap_err();
    assert!(matches!(e, Error::Unsupported(_)) && e.to_string().contains("several free dimensions"), "{e}");
}

/// Quantization parameters LiteRT's Prepare would refuse are a malformed model here too (a fuzzed zero point of
/// 14745600 on a uint8 tensor once reached an int8 kernel's clamp with min > max).
#[test]
fn out_of_range_zero_points_and_bad_scales_are_malformed_models() {
    use crate::format::tflite::builder::QuantizationT;
    use crate::format::tflite::tests::tensor;
    for (zp, scale, want) in [(14_745_600i64, 0.5f32, "zero point 14745600"), (3, 0.0, "scale 0"), (3, f32::NAN, "scale NaN")] {
        let q = |zp: i64| Some(QuantizationT { scale: vec![scale], zero_point: vec![zp], ..Default::default() });
        let mut x = tensor("x", &[1, 4], tt::UINT8, 0);
        x.quantization = q(zp);
        let mut y = tensor("y", &[1, 4], tt::UINT8, 0);
        y.quantization = q(3);
        let m = ModelT {
            version: 3,
            operator_codes: vec![OperatorCodeT::builtin(bo::RELU, 1)],
            subgraphs: vec![SubGraphT {
                tensors: vec![x, y],
                inputs: vec![0],
                outputs: vec![1],
                operators: vec![OperatorT { opcode_index: 0, inputs: vec![0], outputs: vec![1], builtin_options: None, custom_options: None, intermediates: Vec::new() }],
                name: Some("main".into()),
            }],
            buffers: vec![BufferT::default()],
            ..Default::default()
        };
        let e = super::load_bytes(&m.to_bytes(), &Default::default()).unwrap_err();
        assert!(matches!(&e, Error::InvalidModel(msg) if msg.contains(want)), "{want}: {e}");
    }
}
