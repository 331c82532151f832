//! How each op family maps: attributes and their per-opset defaults, attributes that became inputs, the ops
//! that decompose into several core ops, and the op tables themselves.

use super::*;

#[test]
fn maps_unary_ops_with_defaults_per_opset() {
    assert_eq!(ops(&one(13, "Relu", &[2], vec![]).unwrap()), vec![Op::Unary(UnaryOp::Relu)]);
    assert_eq!(ops(&one(16, "LeakyRelu", &[2], vec![]).unwrap()), vec![Op::Unary(UnaryOp::LeakyRelu { alpha: 0.01 })]);
    let Op::Unary(UnaryOp::Selu { alpha, gamma }) = one(13, "Selu", &[2], vec![]).unwrap().nodes[0].op else { panic!() };
    assert_eq!((alpha, gamma), (1.673_263_2, 1.050_701));
    assert_eq!(ops(&one(13, "HardSigmoid", &[2], vec![]).unwrap()), vec![Op::Unary(UnaryOp::HardSigmoid { alpha: 0.2, beta: 0.5 })]);
    assert_eq!(ops(&one(20, "Gelu", &[2], vec![astr("approximate", "tanh")]).unwrap()), vec![Op::Unary(UnaryOp::Gelu { tanh: true })]);
    assert_eq!(
        ops(&one(20, "IsInf", &[2], vec![ai("detect_negative", 0)]).unwrap()),
        vec![Op::Unary(UnaryOp::IsInf { detect_positive: true, detect_negative: false })]
    );
    // opset 1 consumed_inputs is an optimisation hint and is accepted
    assert_eq!(ops(&one(1, "Relu", &[2], vec![ais("consumed_inputs", &[0])]).unwrap()), vec![Op::Unary(UnaryOp::Relu)]);
    // Clip before 11: attributes
    assert_eq!(
        ops(&one(6, "Clip", &[2], vec![af("min", 0.0), af("max", 6.0)]).unwrap()),
        vec![Op::Unary(UnaryOp::Clip { min: 0.0, max: 6.0 })]
    );
}

#[test]
fn clip_with_constant_bounds_is_unary_and_with_inputs_is_dynamic() {
    let m = model(13, vec![node("Clip", &["x", "", "hi"], &["y"], vec![])], vec![fin("x", &[2])], &["y"], vec![tf32("hi", &[], &[6.0])]);
    assert_eq!(ops(&import(&m).unwrap()), vec![Op::Unary(UnaryOp::Clip { min: f32::NEG_INFINITY, max: 6.0 })]);
    let m = model(13, vec![node("Clip", &["x", "lo"], &["y"], vec![])], vec![fin("x", &[2]), fin("lo", &[])], &["y"], vec![]);
    let g = import(&m).unwrap();
    assert_eq!(ops(&g), vec![Op::ClipDynamic]);
    assert_eq!(g.nodes[0].inputs.len(), 2);
}

#[test]
fn maps_binary_variadic_and_legacy_broadcast() {
    let two = |op: &str, opset: i64, n_in: usize| {
        let names = ["a", "b", "c"];
        let ins = &names[..n_in];
        import(&model(opset, vec![node(op, ins, &["y"], vec![])], ins.iter().map(|n| fin(n, &[2, 3])).collect(), &["y"], vec![]))
    };
    assert_eq!(ops(&two("Add", 14, 2).unwrap()), vec![Op::Binary(BinaryOp::Add, None)]);
    assert_eq!(ops(&two("Max", 13, 2).unwrap()), vec![Op::Binary(BinaryOp::Max, None)]);
    assert_eq!(ops(&two("Max", 13, 3).unwrap()), vec![Op::Variadic(BinaryOp::Max)]);
    assert_eq!(ops(&two("Sum", 13, 3).unwrap()), vec![Op::Variadic(BinaryOp::Add)]);
    assert_eq!(ops(&two("Mean", 13, 2).unwrap()), vec![Op::VariadicMean]);
    assert_eq!(ops(&two("BitwiseXor", 18, 2).unwrap()), vec![Op::Binary(BinaryOp::BitXor, None)]);
    assert_eq!(ops(&two("PRelu", 16, 2).unwrap()), vec![Op::Binary(BinaryOp::PRelu, None)]);
    let m = |fmod| {
        model(13, vec![node("Mod", &["a", "b"], &["y"], vec![ai("fmod", fmod)])], vec![fin("a", &[2]), fin("b", &[2])], &["y"], vec![])
    };
    assert_eq!(ops(&import(&m(1)).unwrap()), vec![Op::Binary(BinaryOp::Fmod, None)]);
    assert_eq!(ops(&import(&m(0)).unwrap()), vec![Op::Binary(BinaryOp::Mod, None)]);

    // opset 6: B [3] broadcast at axis 1 of A [2,3,4,5] → B unsqueezed to [3,1,1]
    let m = model(
        6,
        vec![node("Add", &["a", "b"], &["y"], vec![ai("broadcast", 1), ai("axis", 1)])],
        vec![fin("a", &[2, 3, 4, 5])],
        &["y"],
        vec![tf32("b", &[3], &[1.0, 2.0, 3.0])],
    );
    let g = import(&m).unwrap();
    assert_eq!(ops(&g), vec![Op::Unsqueeze { axes: Some(vec![1, 2]) }, Op::Binary(BinaryOp::Add, None)]);
    assert_eq!(g.nodes[1].inputs[1], Some(g.nodes[0].outputs[0]));
    // at opset 7 the legacy attributes no longer exist
    let m = model(7, vec![node("Add", &["a", "a"], &["y"], vec![ai("broadcast", 1)])], vec![fin("a", &[2])], &["y"], vec![]);
    assert!(matches!(import(&m), Err(Error::Unsupported(m)) if m.contains("'broadcast'")));
}

#[test]
fn maps_conv_pool_and_norm_attributes() {
    let g = import(&model(
        11,
        vec![node(
            "Conv",
            &["x", "w"],
            &["y"],
            vec![
                ais("kernel_shape", &[3, 3]),
                ais("pads", &[1, 1, 1, 1]),
                ais("strides", &[2, 2]),
                ai("group", 1),
                astr("auto_pad", "NOTSET"),
            ],
        )],
        vec![fin("x", &[1, 3, 8, 8])],
        &["y"],
        vec![tf32("w", &[4, 3, 3, 3], &[0.0; 108])],
    ))
    .unwrap();
    let Op::Conv(c) = &g.nodes[0].op else { panic!() };
    assert_eq!((c.kernel_shape.clone(), c.pads.clone(), c.strides.clone(), c.group), (vec![3, 3], vec![1, 1, 1, 1], vec![2, 2], 1));
    assert_eq!(c.auto_pad, crate::ir::AutoPad::NotSet);
    assert!(g.constant(g.nodes[0].inputs[1].unwrap()).is_some());

    let g =
        one(12, "MaxPool", &[1, 1, 4, 4], vec![ais("kernel_shape", &[2, 2]), ai("ceil_mode", 1), astr("auto_pad", "SAME_UPPER")]).unwrap();
    let Op::MaxPool(p) = &g.nodes[0].op else { panic!() };
    assert!(p.ceil_mode && p.auto_pad == crate::ir::AutoPad::SameUpper);
    let e = one(12, "MaxPool", &[1, 1, 4, 4], vec![]).unwrap_err();
    assert!(e.to_string().contains("kernel_shape"), "{e}");

    let g = one(17, "LayerNormalization", &[2, 3, 4], vec![]);
    // scale is required
    assert!(g.unwrap_err().to_string().contains("required input 1"));
    let m = model(
        17,
        vec![node("LayerNormalization", &["x", "s"], &["y"], vec![af("epsilon", 1e-3)])],
        vec![fin("x", &[2, 3, 4])],
        &["y"],
        vec![tf32("s", &[4], &[1.0; 4])],
    );
    assert_eq!(ops(&import(&m).unwrap()), vec![Op::LayerNorm { axis: 2, epsilon: 1e-3 }]);

    let bn = |attrs, outs: &[&str]| {
        let inits = ["s", "b", "m", "v"].iter().map(|n| tf32(n, &[3], &[1.0; 3])).collect();
        import(&model(
            15,
            vec![node("BatchNormalization", &["x", "s", "b", "m", "v"], outs, attrs)],
            vec![fin("x", &[1, 3, 2, 2])],
            &outs[..1],
            inits,
        ))
    };
    assert_eq!(ops(&bn(vec![af("epsilon", 1e-3), af("momentum", 0.9)], &["y"]).unwrap()), vec![Op::BatchNorm { epsilon: 1e-3 }]);
    assert!(matches!(bn(vec![ai("training_mode", 1)], &["y"]), Err(Error::Unsupported(m)) if m.contains("training_mode")));
    // unused training outputs are dropped
    assert_eq!(bn(vec![], &["y", "rm", "rv"]).unwrap().nodes[0].outputs.len(), 1);
}

#[test]
fn softmax_before_13_coerces_to_2d() {
    assert_eq!(ops(&one(11, "Softmax", &[2, 5], vec![]).unwrap()), vec![Op::Softmax { axis: 1 }]);
    assert_eq!(ops(&one(13, "Softmax", &[2, 3, 5], vec![]).unwrap()), vec![Op::Softmax { axis: 2 }]);
    assert_eq!(ops(&one(11, "LogSoftmax", &[2, 3, 5], vec![ai("axis", -1)]).unwrap()), vec![Op::LogSoftmax { axis: 2 }]);
    let g = one(11, "Softmax", &[2, 3, 5], vec![]).unwrap();
    assert_eq!(ops(&g), vec![Op::Flatten { axis: 1 }, Op::Softmax { axis: 1 }, Op::Reshape { allowzero: true }]);
    assert_eq!(const_input(&g, 2, 1).to_i64_vec(), vec![2, 3, 5]);
    assert_eq!(g.nodes[2].outputs[0], g.outputs[0]);
}

#[test]
fn maps_attributes_that_became_inputs() {
    // Reshape-1 shape attribute
    let g = one(1, "Reshape", &[2, 3], vec![ais("shape", &[3, 2])]).unwrap();
    assert_eq!(const_input(&g, 0, 1).to_i64_vec(), vec![3, 2]);
    // Slice-1
    let g = one(1, "Slice", &[4, 4], vec![ais("starts", &[1]), ais("ends", &[3]), ais("axes", &[1])]).unwrap();
    assert_eq!(g.nodes[0].inputs.len(), 4);
    assert_eq!(const_input(&g, 0, 3).to_i64_vec(), vec![1]);
    // Squeeze before and after 13
    assert_eq!(ops(&one(11, "Squeeze", &[1, 3], vec![ais("axes", &[0])]).unwrap()), vec![Op::Squeeze { axes: Some(vec![0]) }]);
    let m = model(13, vec![node("Unsqueeze", &["x", "ax"], &["y"], vec![])], vec![fin("x", &[3])], &["y"], vec![ti64("ax", &[1], &[0])]);
    let g = import(&m).unwrap();
    assert_eq!(ops(&g), vec![Op::Unsqueeze { axes: None }]);
    assert_eq!(g.nodes[0].inputs.len(), 2);
    // Pad-2 pads/value attributes; the value takes the input's dtype
    let g = one(2, "Pad", &[2, 2], vec![ais("pads", &[1, 1, 1, 1]), af("value", 1.5)]).unwrap();
    assert_eq!(const_input(&g, 0, 1).to_i64_vec(), vec![1, 1, 1, 1]);
    assert_eq!(const_input(&g, 0, 2), Tensor::scalar(1.5f32));
    // TopK-1 k attribute
    let m = model(1, vec![node("TopK", &["x"], &["v", "i"], vec![ai("k", 2)])], vec![fin("x", &[3, 4])], &["v", "i"], vec![]);
    let g = import(&m).unwrap();
    assert_eq!(ops(&g), vec![Op::TopK { axis: 1, largest: true, sorted: true }]);
    assert_eq!(const_input(&g, 0, 1).to_i64_vec(), vec![2]);
    // ReduceSum: axes attribute before 13 (normalised, sorted), input after
    assert_eq!(
        ops(&one(11, "ReduceSum", &[2, 3, 4], vec![ais("axes", &[-1, 0]), ai("keepdims", 0)]).unwrap()),
        vec![Op::Reduce { op: ReduceOp::Sum, axes: Some(vec![0, 2]), keepdims: false, noop_with_empty_axes: false }]
    );
    assert_eq!(
        ops(&one(13, "ReduceMean", &[2, 3], vec![ais("axes", &[1])]).unwrap()),
        vec![Op::Reduce { op: ReduceOp::Mean, axes: Some(vec![1]), keepdims: true, noop_with_empty_axes: false }]
    );
    let e = one(13, "ReduceSum", &[2, 3], vec![ais("axes", &[1])]).unwrap_err();
    assert!(matches!(e, Error::Unsupported(ref m) if m.contains("'axes'")), "{e}");
    assert_eq!(
        ops(&one(18, "ReduceMax", &[2, 3], vec![ai("noop_with_empty_axes", 1)]).unwrap()),
        vec![Op::Reduce { op: ReduceOp::Max, axes: None, keepdims: true, noop_with_empty_axes: true }]
    );
    // Split: attribute before 13, equal parts, num_outputs must match
    let split =
        |opset, attrs| import(&model(opset, vec![node("Split", &["x"], &["a", "b"], attrs)], vec![fin("x", &[4, 2])], &["a", "b"], vec![]));
    assert_eq!(ops(&split(11, vec![ais("split", &[1, 3])]).unwrap()), vec![Op::Split { axis: 0, split: Some(vec![1, 3]), num_outputs: 2 }]);
    assert_eq!(
        ops(&split(18, vec![ai("num_outputs", 2), ai("axis", -1)]).unwrap()),
        vec![Op::Split { axis: 1, split: None, num_outputs: 2 }]
    );
    assert!(split(18, vec![ai("num_outputs", 3)]).unwrap_err().to_string().contains("num_outputs"));
    // Cast to, also the opset-1 string form, and CastLike
    assert_eq!(ops(&one(13, "Cast", &[2], vec![ai("to", dt::INT64 as i64)]).unwrap()), vec![Op::Cast { to: DType::I64 }]);
    assert_eq!(ops(&one(1, "Cast", &[2], vec![astr("to", "FLOAT16")]).unwrap()), vec![Op::Cast { to: DType::F16 }]);
    assert!(matches!(one(13, "Cast", &[2], vec![ai("to", dt::STRING as i64)]), Err(Error::Unsupported(m)) if m.contains("STRING")));
    let m = model(15, vec![node("CastLike", &["x", "t"], &["y"], vec![])], vec![fin("x", &[2])], &["y"], vec![ti64("t", &[], &[0])]);
    assert_eq!(ops(&import(&m).unwrap()), vec![Op::Cast { to: DType::I64 }]);
}

#[test]
fn maps_resize_upsample_and_dropout() {
    let m = model(
        10,
        vec![node("Resize", &["x", "s"], &["y"], vec![astr("mode", "linear")])],
        vec![fin("x", &[1, 1, 2, 2])],
        &["y"],
        vec![tf32("s", &[4], &[1.0, 1.0, 2.0, 2.0])],
    );
    let g = import(&m).unwrap();
    let Op::Resize(r) = &g.nodes[0].op else { panic!() };
    assert_eq!((r.mode, r.coord), (crate::ir::ResizeMode::Linear, crate::ir::CoordTransform::Asymmetric));
    assert_eq!(g.nodes[0].inputs[1], None);
    assert!(g.nodes[0].inputs[2].is_some());

    // opset 11: empty roi/scales constants count as absent
    let m = model(
        11,
        vec![node(
            "Resize",
            &["x", "roi", "sc", "sz"],
            &["y"],
            vec![astr("coordinate_transformation_mode", "align_corners"), astr("nearest_mode", "floor")],
        )],
        vec![fin("x", &[1, 1, 2, 2])],
        &["y"],
        vec![tf32("roi", &[0], &[]), tf32("sc", &[0], &[]), ti64("sz", &[4], &[1, 1, 4, 4])],
    );
    let g = import(&m).unwrap();
    assert_eq!(&g.nodes[0].inputs[..3], &[g.nodes[0].inputs[0], None, None]);
    let Op::Resize(r) = &g.nodes[0].op else { panic!() };
    assert_eq!((r.coord, r.nearest), (crate::ir::CoordTransform::AlignCorners, crate::ir::NearestMode::Floor));
    // axes: scales expanded to every axis
    let m = model(
        18,
        vec![node("Resize", &["x", "", "sc"], &["y"], vec![ais("axes", &[3, 2])])],
        vec![fin("x", &[1, 1, 2, 2])],
        &["y"],
        vec![tf32("sc", &[2], &[3.0, 2.0])],
    );
    let g = import(&m).unwrap();
    assert_eq!(g.nodes[0].op, Op::ScatterElements { axis: 0, reduction: None });
    assert_eq!(const_input(&g, 0, 0).to_f64_vec(), vec![1.0; 4]);
    assert_eq!(const_input(&g, 0, 1).to_i64_vec(), vec![3, 2]);
    assert_eq!(g.nodes[1].inputs[2], Some(g.nodes[0].outputs[0]));
    let e = one(18, "Resize", &[1, 1, 2, 2], vec![ai("antialias", 1)]).unwrap_err();
    assert!(matches!(e, Error::Unsupported(ref m) if m.contains("antialias")), "{e}");

    let g = one(7, "Upsample", &[1, 1, 2, 2], vec![afs("scales", &[1.0, 1.0, 2.0, 2.0])]).unwrap();
    assert_eq!(const_input(&g, 0, 2).to_f64_vec(), vec![1.0, 1.0, 2.0, 2.0]);

    let m = model(13, vec![node("Dropout", &["x"], &["y", "mask"], vec![])], vec![fin("x", &[2, 2])], &["y", "mask"], vec![]);
    let g = import(&m).unwrap();
    assert_eq!(g.nodes.len(), 3);
    assert_eq!(g.nodes[0].op, Op::Identity);
    assert!(matches!(&g.nodes[2].op, Op::ConstantOfShape { value } if value.to_f64_vec() == vec![1.0] && value.dtype() == DType::Bool));
    let m = model(
        13,
        vec![node("Dropout", &["x", "", "t"], &["y"], vec![])],
        vec![fin("x", &[2])],
        &["y"],
        vec![TensorProto { data_type: Some(dt::BOOL), int32_data: vec![1], name: Some("t".into()), ..Default::default() }],
    );
    assert!(matches!(import(&m), Err(Error::Unsupported(m)) if m.contains("training_mode")));
}

#[test]
fn decomposes_ops_without_a_core_op() {
    let names = |g: &Graph| g.nodes.iter().map(|n| n.op.name()).collect::<Vec<_>>().join(",");
    assert_eq!(names(&one(24, "Swish", &[2], vec![]).unwrap()), "Sigmoid,Mul");
    assert_eq!(names(&one(24, "Swish", &[2], vec![af("alpha", 2.0)]).unwrap()), "Mul,Sigmoid,Mul");
    assert_eq!(names(&one(9, "Shrink", &[2], vec![af("lambd", 1.0)]).unwrap()), "Less,Greater,Add,Sub,Where,Where");
    let g = one(13, "MeanVarianceNormalization", &[1, 2, 3, 4], vec![]).unwrap();
    assert_eq!(names(&g), "Reduce,Mul,Mul,Reduce,Sub,Sqrt,Sub,Add,Div");
    assert!(matches!(&g.nodes[0].op, Op::Reduce { axes: Some(a), keepdims: true, .. } if a == &vec![0, 2, 3]));
    let m = model(
        23,
        vec![node("RMSNormalization", &["x", "s"], &["y"], vec![ai("axis", 1)])],
        vec![vi("x", dt::FLOAT16, Some(vec![D::V(2), D::V(3), D::V(4)]))],
        &["y"],
        vec![tf32("s", &[3, 4], &[1.0; 12])],
    );
    let g = import(&m).unwrap();
    assert_eq!(names(&g), "Cast,Mul,Reduce,Add,Sqrt,Reciprocal,Mul,Cast,Mul");
    assert!(matches!(&g.nodes[2].op, Op::Reduce { axes: Some(a), .. } if a == &vec![1, 2]));
    let g = one(28, "SpaceToDepth", &[1, 2, 4, 6], vec![ai("blocksize", 2), astr("mode", "CRD")]).unwrap();
    assert_eq!(names(&g), "Reshape,Transpose,Reshape");
    assert_eq!(const_input(&g, 2, 1).to_i64_vec(), vec![1, 8, 2, 3]);
    assert_eq!(ops(&one(28, "SpaceToDepth", &[1, 2, 4, 6], vec![ai("blocksize", 2)]).unwrap()), vec![Op::SpaceToDepth { blocksize: 2 }]);
    let g = one(2, "GlobalLpPool", &[1, 2, 5, 7], vec![ai("p", 1)]).unwrap();
    assert!(matches!(&g.nodes[0].op, Op::LpPool(p, 1) if p.kernel_shape == vec![5, 7]));

    // GroupNormalization-18 per-group scale/bias become per-channel
    let m = model(
        18,
        vec![node("GroupNormalization", &["x", "s", "b"], &["y"], vec![ai("num_groups", 2)])],
        vec![fin("x", &[1, 4, 3])],
        &["y"],
        vec![tf32("s", &[2], &[1.0, 2.0]), tf32("b", &[2], &[3.0, 4.0])],
    );
    let g = import(&m).unwrap();
    assert_eq!(const_input(&g, 0, 1).to_f64_vec(), vec![1.0, 1.0, 2.0, 2.0]);
    assert_eq!(const_input(&g, 0, 2).to_f64_vec(), vec![3.0, 3.0, 4.0, 4.0]);

    // QLinearConv: dequantize, Conv, quantize; the int32 bias is scaled by x_scale * w_scale
    let u8t = |name: &str, dims: &[i64], v: &[i32]| TensorProto {
        name: Some(name.into()),
        dims: dims.to_vec(),
        data_type: Some(dt::UINT8),
        int32_data: v.to_vec(),
        ..Default::default()
    };
    let m = model(
        10,
        vec![node("QLinearConv", &["x", "xs", "xz", "w", "ws", "wz", "ys", "yz", "b"], &["y"], vec![])],
        vec![vi("x", dt::UINT8, Some(vec![D::V(1), D::V(1), D::V(3), D::V(3)]))],
        &["y"],
        vec![
            tf32("xs", &[], &[0.5]),
            u8t("xz", &[], &[1]),
            u8t("w", &[2, 1, 1, 1], &[3, 4]),
            tf32("ws", &[2], &[0.1, 0.2]),
            u8t("wz", &[2], &[0, 0]),
            tf32("ys", &[], &[0.25]),
            u8t("yz", &[], &[5]),
            TensorProto { name: Some("b".into()), dims: vec![2], data_type: Some(dt::INT32), int32_data: vec![7, 8], ..Default::default() },
        ],
    );
    let g = import(&m).unwrap();
    // (without inference the multiplier's type is unknown, hence the Cast to f32 after Div)
    assert_eq!(names(&g), "Cast,Cast,Sub,Cast,Cast,Unsqueeze,Sub,Cast,Conv,Unsqueeze,Mul,Div,Cast,Mul,QuantizeLinear");
    assert_eq!(g.nodes[5].op, Op::Unsqueeze { axes: Some(vec![1, 2, 3]) });
    assert_eq!(g.nodes[9].op, Op::Unsqueeze { axes: Some(vec![1, 2]) });
    assert_eq!(g.nodes[14].op, Op::QuantizeLinear { axis: 0, to: DType::U8, rounding: Default::default() });

    // DequantizeLinear output_dtype adds a Cast; QuantizeLinear takes the zero point's type
    let m = model(
        23,
        vec![node("DequantizeLinear", &["x", "s"], &["y"], vec![ai("output_dtype", dt::FLOAT16 as i64)])],
        vec![vi("x", dt::INT8, Some(vec![D::V(2)]))],
        &["y"],
        vec![tf32("s", &[], &[0.5])],
    );
    assert_eq!(names(&import(&m).unwrap()), "DequantizeLinear,Cast");
    let m = model(
        13,
        vec![node("QuantizeLinear", &["x", "s", "z"], &["y"], vec![])],
        vec![fin("x", &[2])],
        &["y"],
        vec![
            tf32("s", &[], &[0.5]),
            TensorProto { name: Some("z".into()), data_type: Some(dt::INT8), int32_data: vec![-1], ..Default::default() },
        ],
    );
    assert_eq!(ops(&import(&m).unwrap()), vec![Op::QuantizeLinear { axis: 0, to: DType::I8, rounding: Default::default() }]);
}

#[test]
fn resolves_negative_axes_of_values_only_known_at_run_time() {
    // NonZero's output shape depends on the data, but its rank (2) does not; later ops keep track of it.
    let m = model(
        13,
        vec![
            node("NonZero", &["x"], &["nz"], vec![]),
            node("Cast", &["nz"], &["f"], vec![ai("to", dt::FLOAT as i64)]),
            node("Unsqueeze", &["f", "ax"], &["u"], vec![]),
            node("Concat", &["u", "u"], &["c"], vec![ai("axis", -1)]),
            node("Softmax", &["c"], &["y"], vec![]),
            node("ReduceSum", &["y"], &["s"], vec![ai("keepdims", 0)]),
        ],
        vec![fin("x", &[2, 3])],
        &["y", "s"],
        vec![ti64("ax", &[1], &[0])],
    );
    let g = super::load_bytes(&m.encode_to_vec(), None, &ImportOptions::default()).unwrap();
    let find = |name: &str| g.nodes.iter().find(|n| n.op.name() == name).map(|n| n.op.clone()).unwrap();
    assert_eq!(find("Concat"), Op::Concat { axis: 2 });
    assert_eq!(find("Softmax"), Op::Softmax { axis: 2 });
    assert!(g.value(g.outputs[0]).dynamic);
}

#[test]
fn every_listed_op_is_mapped() {
    for &op in super::SUPPORTED_OPS {
        let m = model(
            23,
            vec![node(op, &["a", "b", "c"], &["y"], vec![])],
            vec![fin("a", &[1, 2, 4, 4]), fin("b", &[1, 2, 4, 4]), fin("c", &[1, 2, 4, 4])],
            &["y"],
            vec![],
        );
        // attributes or inputs may be missing, but the op itself must be known
        if let Err(e) = import(&m) {
            assert!(!e.to_string().starts_with(&format!("unsupported: op '{op}'")), "{op}: {e}");
        }
    }
}

#[test]
fn the_op_tables_hold_each_listed_op_once() {
    let mut mapped: Vec<&str> = crate::import::onnx::ops::FAMILIES.iter().flat_map(|ops| ops.iter().map(|(op, _)| *op)).collect();
    mapped.sort_by_key(|op| op.to_ascii_lowercase());
    // Constant nodes become constants in the graph import, before the op tables are consulted
    let listed: Vec<&str> = SUPPORTED_OPS.iter().copied().filter(|&op| op != "Constant").collect();
    assert_eq!(mapped, listed);
}
