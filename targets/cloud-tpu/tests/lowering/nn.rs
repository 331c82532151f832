//! Convolutions, Gemm/MatMul, pooling, normalizations and Resize.

use super::*;

/// A Conv case: the ONNX Conv node with attributes `onnx_attrs` over as many inputs as `ins` has.
fn conv_case(cs: &mut Cases, onnx_attrs: &str, a: ConvAttrs, ins: Vec<In>) {
    let names: Vec<String> = (0..ins.len()).map(|i| format!("\"i{i}\"")).collect();
    cs.check(&format!(r#"helper.make_node("Conv", [{}], ["o0"], {onnx_attrs})"#, names.join(", ")), Op::Conv(a), ins, 1);
}

#[test]
fn conv_2d_strides_pads_dilations_groups_bias_and_auto_pad() {
    let mut cs = Cases::default();
    let a = ConvAttrs { strides: vec![2, 2], pads: vec![1, 1, 1, 1], ..conv_attrs() };
    conv_case(&mut cs, "strides=[2, 2], pads=[1, 1, 1, 1]", a, vec![x(&[2, 3, 9, 8], 1), c(&[4, 3, 3, 3], 2), c(&[4], 3)]);
    let a = ConvAttrs { group: 4, dilations: vec![2, 1], pads: vec![2, 0, 1, 1], ..conv_attrs() };
    conv_case(&mut cs, "group=4, dilations=[2, 1], pads=[2, 0, 1, 1]", a, vec![x(&[1, 8, 7, 7], 4), c(&[8, 2, 3, 3], 5)]);
    // Depthwise with SAME_UPPER and stride 2 (MobileNet), odd input.
    let a = ConvAttrs { group: 6, strides: vec![2, 2], auto_pad: AutoPad::SameUpper, ..conv_attrs() };
    let ins = vec![x(&[1, 6, 11, 10], 6), c(&[6, 1, 5, 5], 7), c(&[6], 8)];
    conv_case(&mut cs, r#"group=6, strides=[2, 2], auto_pad="SAME_UPPER""#, a, ins);
    let a = ConvAttrs { auto_pad: AutoPad::SameLower, ..conv_attrs() };
    conv_case(&mut cs, r#"auto_pad="SAME_LOWER""#, a, vec![x(&[1, 2, 6, 6], 9), c(&[3, 2, 2, 2], 10)]);
    cs.run();
}

#[test]
fn conv_1d_and_3d_and_a_fused_activation() {
    let mut cs = Cases::default();
    let a = ConvAttrs { pads: vec![1, 2], strides: vec![3], ..conv_attrs() };
    conv_case(&mut cs, "pads=[1, 2], strides=[3]", a, vec![x(&[2, 3, 20], 11), c(&[5, 3, 4], 12)]);
    let a = ConvAttrs { pads: vec![1; 6], ..conv_attrs() };
    conv_case(&mut cs, "pads=[1, 1, 1, 1, 1, 1]", a, vec![x(&[1, 2, 4, 5, 6], 13), c(&[3, 2, 3, 3, 3], 14)]);
    cs.run();
    // Conv with a fused Relu6 (as the fusion pass leaves it), against a hand-computed result: a 1x1 kernel of 10.
    let a = ConvAttrs { activation: Some(Activation::Relu6), ..conv_attrs() };
    let w = Tensor::from_f32(vec![1, 1, 1, 1], vec![10.0]);
    let xin = rand_f32(&[1, 1, 3, 3], 15);
    let Some(plugin) = common::cpu_plugin() else { return };
    let mut g = Graph::new("fused");
    let xi = g.add_input("x", DType::F32, vec![1, 1, 3, 3]);
    let wi = g.add_constant("w", w);
    let y = g.add_value("y", DType::F32, vec![1, 1, 3, 3]);
    g.add_node("c", Op::Conv(a), vec![Some(xi), Some(wi)], vec![y]);
    g.outputs.push(y);
    let got = CloudTpuTarget::with_plugin(&plugin).compile_graph(g).unwrap().execute(std::slice::from_ref(&xin)).unwrap();
    let want: Vec<f32> = xin.as_f32().unwrap().iter().map(|v| (v * 10.0).clamp(0.0, 6.0)).collect();
    assert_close(&got[0], &Tensor::from_f32(vec![1, 1, 3, 3], want), 1e-6, 1e-6, "conv+relu6");
}

#[test]
fn conv_transpose_strides_pads_output_padding_groups() {
    let mut cs = Cases::default();
    let a = ConvTransposeAttrs {
        conv: ConvAttrs { strides: vec![2, 2], pads: vec![1, 0, 1, 1], ..conv_attrs() },
        output_padding: vec![1, 0],
        output_shape: vec![],
    };
    cs.check(
        r#"helper.make_node("ConvTranspose", ["i0", "i1", "i2"], ["o0"], strides=[2, 2], pads=[1, 0, 1, 1], output_padding=[1, 0])"#,
        Op::ConvTranspose(a),
        vec![x(&[2, 3, 5, 4], 21), c(&[3, 4, 3, 3], 22), c(&[4], 23)],
        1,
    );
    let grouped = ConvTransposeAttrs {
        conv: ConvAttrs { strides: vec![2, 2], group: 2, dilations: vec![1, 2], ..conv_attrs() },
        output_padding: vec![],
        output_shape: vec![],
    };
    // output_shape larger than the full output (the given pads hold at the start), and SAME_UPPER/SAME_LOWER with
    // an output_shape whose total padding is negative (the window starts before the first tap).
    let a = ConvTransposeAttrs {
        conv: ConvAttrs { strides: vec![3, 2], ..conv_attrs() },
        output_padding: vec![],
        output_shape: vec![10, 8],
    };
    cs.check(
        r#"helper.make_node("ConvTranspose", ["i0", "i1"], ["o0"], strides=[3, 2], output_shape=[10, 8])"#,
        Op::ConvTranspose(a),
        vec![x(&[1, 1, 3, 3], 26), c(&[1, 2, 3, 3], 27)],
        1,
    );
    for (mode, auto_pad) in [("SAME_UPPER", AutoPad::SameUpper), ("SAME_LOWER", AutoPad::SameLower)] {
        let a = ConvTransposeAttrs {
            conv: ConvAttrs { strides: vec![2, 2], auto_pad, ..conv_attrs() },
            output_padding: vec![],
            output_shape: vec![9, 6],
        };
        cs.check(
            &format!(r#"helper.make_node("ConvTranspose", ["i0", "i1", "i2"], ["o0"], strides=[2, 2], auto_pad="{mode}", output_shape=[9, 6])"#),
            Op::ConvTranspose(a),
            vec![x(&[2, 2, 3, 3], 28), c(&[2, 3, 3, 3], 29), c(&[3], 30)],
            1,
        );
    }
    // onnx.reference does not implement grouped ConvTranspose; onnxruntime does.
    cs.check_ort(
        r#"helper.make_node("ConvTranspose", ["i0", "i1"], ["o0"], strides=[2, 2], group=2, dilations=[1, 2])"#,
        Op::ConvTranspose(grouped),
        vec![x(&[1, 4, 3, 3], 24), c(&[4, 3, 2, 2], 25)],
        1,
    );
    cs.run();
}

#[test]
fn gemm_and_matmul() {
    let mut cs = Cases::default();
    let gemm = |alpha: f32, beta: f32, ta: bool, tb: bool| Op::Gemm { alpha, beta, trans_a: ta, trans_b: tb, activation: None };
    cs.check(
        r#"helper.make_node("Gemm", ["i0", "i1", "i2"], ["o0"], transB=1)"#,
        gemm(1.0, 1.0, false, true),
        vec![x(&[3, 5], 31), c(&[4, 5], 32), c(&[4], 33)],
        1,
    );
    cs.check(
        r#"helper.make_node("Gemm", ["i0", "i1", "i2"], ["o0"], transA=1, alpha=0.5, beta=2.0)"#,
        gemm(0.5, 2.0, true, false),
        vec![x(&[5, 3], 34), x(&[5, 4], 35), c(&[3, 1], 36)],
        1,
    );
    cs.check(r#"helper.make_node("MatMul", ["i0", "i1"], ["o0"])"#, Op::MatMul, vec![x(&[2, 3, 7, 5], 37), c(&[5, 6], 38)], 1);
    cs.check(r#"helper.make_node("MatMul", ["i0", "i1"], ["o0"])"#, Op::MatMul, vec![x(&[2, 1, 4, 5], 39), x(&[3, 5, 2], 40)], 1);
    cs.check(r#"helper.make_node("MatMul", ["i0", "i1"], ["o0"])"#, Op::MatMul, vec![x(&[5], 41), x(&[2, 5, 3], 42)], 1);
    cs.check(r#"helper.make_node("MatMul", ["i0", "i1"], ["o0"])"#, Op::MatMul, vec![x(&[2, 4, 5], 43), x(&[5], 44)], 1);
    cs.run();
}

/// A pooling case: the ONNX node `onnx_op` over one input, with `n_out` outputs and attributes `onnx_attrs`.
fn pool_case(cs: &mut Cases, onnx_op: &str, n_out: usize, onnx_attrs: &str, op: Op, input: In) {
    let outs: Vec<String> = (0..n_out).map(|k| format!("\"o{k}\"")).collect();
    cs.check(&format!(r#"helper.make_node("{onnx_op}", ["i0"], [{}], {onnx_attrs})"#, outs.join(", ")), op, vec![input], n_out);
}

#[test]
fn pooling() {
    let mut cs = Cases::default();
    let a = PoolAttrs { strides: vec![2, 2], pads: vec![1, 1, 1, 1], ..pool_attrs(&[3, 3]) };
    let k3s2p1 = "kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]";
    pool_case(&mut cs, "MaxPool", 1, k3s2p1, Op::MaxPool(a.clone()), x(&[2, 3, 9, 10], 200));
    let m = PoolAttrs { ceil_mode: true, pads: vec![0, 0, 0, 0], dilations: vec![1, 2], ..a.clone() };
    let attrs = "kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1, dilations=[1, 2]";
    pool_case(&mut cs, "MaxPool", 1, attrs, Op::MaxPool(m), x(&[1, 2, 10, 11], 201));
    // The second output: flat indices of the maxima (padding and ceil_mode cells never win).
    pool_case(&mut cs, "MaxPool", 2, k3s2p1, Op::MaxPool(a.clone()), x(&[2, 3, 9, 10], 209));
    let mc = PoolAttrs { strides: vec![2, 2], ceil_mode: true, ..pool_attrs(&[2, 3]) };
    pool_case(&mut cs, "MaxPool", 2, "kernel_shape=[2, 3], strides=[2, 2], ceil_mode=1", Op::MaxPool(mc), x(&[1, 2, 7, 8], 210));
    pool_case(&mut cs, "AveragePool", 1, k3s2p1, Op::AveragePool(a.clone()), x(&[1, 3, 9, 10], 202));
    let inc = PoolAttrs { count_include_pad: true, ..a.clone() };
    let attrs = format!("{k3s2p1}, count_include_pad=1");
    pool_case(&mut cs, "AveragePool", 1, &attrs, Op::AveragePool(inc), x(&[1, 3, 9, 10], 203));
    let ceil = PoolAttrs { strides: vec![2, 2], ceil_mode: true, ..pool_attrs(&[2, 2]) };
    pool_case(&mut cs, "AveragePool", 1, "kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1", Op::AveragePool(ceil), x(&[1, 2, 5, 7], 204));
    let same = PoolAttrs { auto_pad: AutoPad::SameUpper, strides: vec![2], ..pool_attrs(&[3]) };
    pool_case(&mut cs, "MaxPool", 1, r#"kernel_shape=[3], strides=[2], auto_pad="SAME_UPPER""#, Op::MaxPool(same), x(&[2, 3, 10], 205));
    pool_case(&mut cs, "LpPool", 1, "kernel_shape=[2, 2], p=2", Op::LpPool(pool_attrs(&[2, 2]), 2), x(&[1, 2, 4, 5], 206));
    cs.check(r#"helper.make_node("GlobalAveragePool", ["i0"], ["o0"])"#, Op::GlobalAveragePool, vec![x(&[2, 5, 6, 7], 207)], 1);
    cs.check(r#"helper.make_node("GlobalMaxPool", ["i0"], ["o0"])"#, Op::GlobalMaxPool, vec![x(&[2, 5, 6, 7], 208)], 1);
    cs.run();
}

#[test]
fn normalizations() {
    let mut cs = Cases::default();
    cs.check(
        r#"helper.make_node("BatchNormalization", ["i0", "i1", "i2", "i3", "i4"], ["o0"], epsilon=1e-3)"#,
        Op::BatchNorm { epsilon: 1e-3 },
        vec![x(&[2, 3, 4, 5], 400), c(&[3], 401), c(&[3], 402), c(&[3], 403), In::C(Tensor::from_f32(vec![3], vec![0.5, 1.0, 2.0]))],
        1,
    );
    cs.check(
        r#"helper.make_node("InstanceNormalization", ["i0", "i1", "i2"], ["o0"], epsilon=1e-5)"#,
        Op::InstanceNorm { epsilon: 1e-5 },
        vec![x(&[2, 3, 4, 5], 404), c(&[3], 405), c(&[3], 406)],
        1,
    );
    cs.check(
        r#"helper.make_node("LayerNormalization", ["i0", "i1", "i2"], ["o0", "o1", "o2"], axis=-1, epsilon=1e-5)"#,
        Op::LayerNorm { axis: 2, epsilon: 1e-5 },
        vec![x(&[2, 3, 8], 407), c(&[8], 408), c(&[8], 409)],
        3,
    );
    cs.check(
        r#"helper.make_node("LayerNormalization", ["i0", "i1"], ["o0"], axis=1)"#,
        Op::LayerNorm { axis: 1, epsilon: 1e-5 },
        vec![x(&[2, 3, 4], 410), c(&[3, 4], 411)],
        1,
    );
    cs.check(
        r#"helper.make_node("GroupNormalization", ["i0", "i1", "i2"], ["o0"], num_groups=2, epsilon=1e-5)"#,
        Op::GroupNorm { num_groups: 2, epsilon: 1e-5 },
        vec![x(&[2, 4, 3, 3], 412), c(&[4], 413), c(&[4], 414)],
        1,
    );
    cs.check(
        r#"helper.make_node("LpNormalization", ["i0"], ["o0"], axis=1, p=2)"#,
        Op::LpNorm { axis: 1, p: 2 },
        vec![x(&[3, 5], 415)],
        1,
    );
    cs.run();
}

#[test]
fn resize_nearest_linear_cubic_with_coordinate_modes() {
    let mut cs = Cases::default();
    let attrs = |mode: ResizeMode, coord: CoordTransform, nearest: NearestMode| ResizeAttrs {
        mode,
        coord,
        nearest,
        cubic_coeff_a: -0.75,
        exclude_outside: false,
        extrapolation_value: 0.0,
    };
    let scales = |v: &[f32]| In::C(Tensor::from_f32(vec![v.len()], v.to_vec()));
    cs.check(
        r#"helper.make_node("Resize", ["i0", "", "i2"], ["o0"], mode="nearest", coordinate_transformation_mode="asymmetric", nearest_mode="floor")"#,
        Op::Resize(attrs(ResizeMode::Nearest, CoordTransform::Asymmetric, NearestMode::Floor)),
        vec![x(&[1, 2, 3, 4], 700), In::Absent, scales(&[1.0, 1.0, 2.0, 2.0])],
        1,
    );
    cs.check(
        r#"helper.make_node("Resize", ["i0", "", "i2"], ["o0"], mode="nearest")"#,
        Op::Resize(attrs(ResizeMode::Nearest, CoordTransform::HalfPixel, NearestMode::RoundPreferFloor)),
        vec![x(&[1, 2, 5, 7], 701), In::Absent, scales(&[1.0, 1.0, 0.6, 1.5])],
        1,
    );
    cs.check(
        r#"helper.make_node("Resize", ["i0", "", "i2"], ["o0"], mode="linear")"#,
        Op::Resize(attrs(ResizeMode::Linear, CoordTransform::HalfPixel, NearestMode::RoundPreferFloor)),
        vec![x(&[2, 3, 4, 5], 702), In::Absent, scales(&[1.0, 1.0, 2.0, 1.5])],
        1,
    );
    cs.check(
        r#"helper.make_node("Resize", ["i0", "", "", "i3"], ["o0"], mode="linear", coordinate_transformation_mode="align_corners")"#,
        Op::Resize(attrs(ResizeMode::Linear, CoordTransform::AlignCorners, NearestMode::RoundPreferFloor)),
        vec![x(&[1, 1, 4, 4], 703), In::Absent, In::Absent, ci(&[1, 1, 7, 3])],
        1,
    );
    cs.check(
        r#"helper.make_node("Resize", ["i0", "", "i2"], ["o0"], mode="linear", coordinate_transformation_mode="pytorch_half_pixel")"#,
        Op::Resize(attrs(ResizeMode::Linear, CoordTransform::PytorchHalfPixel, NearestMode::RoundPreferFloor)),
        vec![x(&[1, 2, 6, 4], 704), In::Absent, scales(&[1.0, 1.0, 0.5, 2.0])],
        1,
    );
    // tf_crop_and_resize: a region of interest partly outside the input; outside samples take extrapolation_value.
    let roi = In::C(Tensor::from_f32(vec![8], vec![0.0, 0.0, 0.25, -0.2, 1.0, 1.0, 1.35, 0.95]));
    for (mode, m) in [("linear", ResizeMode::Linear), ("nearest", ResizeMode::Nearest), ("cubic", ResizeMode::Cubic)] {
        let mut t = attrs(m, CoordTransform::TfCropAndResize, NearestMode::RoundPreferFloor);
        t.extrapolation_value = 7.5;
        cs.check(
            &format!(r#"helper.make_node("Resize", ["i0", "i1", "", "i3"], ["o0"], mode="{mode}", coordinate_transformation_mode="tf_crop_and_resize", extrapolation_value=7.5)"#),
            Op::Resize(t),
            vec![x(&[1, 2, 5, 6], 706), roi_clone(&roi), In::Absent, ci(&[1, 2, 7, 4])],
            1,
        );
    }
    let mut cubic = attrs(ResizeMode::Cubic, CoordTransform::HalfPixel, NearestMode::RoundPreferFloor);
    cubic.exclude_outside = true;
    cubic.cubic_coeff_a = -0.5;
    cs.check(
        r#"helper.make_node("Resize", ["i0", "", "i2"], ["o0"], mode="cubic", exclude_outside=1, cubic_coeff_a=-0.5)"#,
        Op::Resize(cubic),
        vec![x(&[1, 1, 5, 6], 705), In::Absent, scales(&[1.0, 1.0, 1.6, 0.5])],
        1,
    );
    cs.run();
}
