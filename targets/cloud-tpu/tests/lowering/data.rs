//! Shape and data-movement ops, gather/scatter, ReverseSequence, and CumSum, OneHot, Hardmax, TopK, LRN,
//! GatherElements and quantization.

use super::*;

#[test]
fn shape_and_data_movement_ops() {
    let mut cs = Cases::default();
    cs.check(r#"helper.make_node("Reshape", ["i0", "i1"], ["o0"])"#, Op::Reshape { allowzero: false }, vec![x(&[2, 3, 4], 500), ci(&[4, -1])], 1);
    cs.check(r#"helper.make_node("Flatten", ["i0"], ["o0"], axis=2)"#, Op::Flatten { axis: 2 }, vec![x(&[2, 3, 4, 5], 501)], 1);
    cs.check(r#"helper.make_node("Squeeze", ["i0", "i1"], ["o0"])"#, Op::Squeeze { axes: None }, vec![x(&[2, 1, 4, 1], 502), ci(&[1])], 1);
    cs.check(r#"helper.make_node("Unsqueeze", ["i0", "i1"], ["o0"])"#, Op::Unsqueeze { axes: None }, vec![x(&[2, 4], 503), ci(&[0, 3])], 1);
    cs.check(r#"helper.make_node("Transpose", ["i0"], ["o0"], perm=[2, 0, 1])"#, Op::Transpose { perm: vec![2, 0, 1] }, vec![x(&[2, 3, 4], 504)], 1);
    cs.check(r#"helper.make_node("Transpose", ["i0"], ["o0"])"#, Op::Transpose { perm: vec![] }, vec![x(&[2, 3, 4], 505)], 1);
    cs.check(
        r#"helper.make_node("Concat", ["i0", "i1", "i2"], ["o0"], axis=1)"#,
        Op::Concat { axis: 1 },
        vec![x(&[2, 3, 2], 506), c(&[2, 1, 2], 507), x(&[2, 0, 2], 508)],
        1,
    );
    cs.check(
        r#"helper.make_node("Slice", ["i0", "i1", "i2", "i3", "i4"], ["o0"])"#,
        Op::Slice,
        vec![x(&[5, 6, 7], 509), ci(&[1, -1, 0]), ci(&[100, 0, -2]), ci(&[0, 1, 2]), ci(&[2, -2, 3])],
        1,
    );
    cs.check(
        r#"helper.make_node("Slice", ["i0", "i1", "i2"], ["o0"])"#,
        Op::Slice,
        vec![x(&[5, 6], 510), ci(&[-3, 2]), ci(&[-1, 4])],
        1,
    );
    cs.check(
        r#"helper.make_node("Split", ["i0", "i1"], ["o0", "o1", "o2"], axis=1)"#,
        Op::Split { axis: 1, split: None, num_outputs: 3 },
        vec![x(&[2, 7, 3], 511), ci(&[2, 4, 1])],
        3,
    );
    cs.check(
        r#"helper.make_node("Split", ["i0"], ["o0", "o1"], axis=0, num_outputs=2)"#,
        Op::Split { axis: 0, split: None, num_outputs: 2 },
        vec![x(&[5, 2], 512)],
        2,
    );
    for (mode, pm) in [("constant", PadMode::Constant), ("reflect", PadMode::Reflect), ("edge", PadMode::Edge), ("wrap", PadMode::Wrap)] {
        cs.check(
            &format!(r#"helper.make_node("Pad", ["i0", "i1", "i2"], ["o0"], mode="{mode}")"#),
            Op::Pad { mode: pm },
            vec![x(&[1, 2, 4, 5], 513), ci(&[0, 0, 2, 1, 0, 1, 1, 3]), In::C(Tensor::from_f32(vec![], vec![0.5]))],
            1,
        );
    }
    // Negative pads crop (onnx.reference rejects them; onnxruntime implements them).
    cs.check_ort(
        r#"helper.make_node("Pad", ["i0", "i1", "i2"], ["o0"], mode="constant")"#,
        Op::Pad { mode: PadMode::Constant },
        vec![x(&[1, 2, 4, 5], 521), ci(&[0, 0, 2, -1, 0, 1, -1, 3]), In::C(Tensor::from_f32(vec![], vec![0.5]))],
        1,
    );
    cs.check_ort(
        r#"helper.make_node("Pad", ["i0", "i1"], ["o0"], mode="reflect")"#,
        Op::Pad { mode: PadMode::Reflect },
        vec![x(&[3, 5], 522), ci(&[-1, 2, 1, -2])],
        1,
    );
    cs.check(r#"helper.make_node("Expand", ["i0", "i1"], ["o0"])"#, Op::Expand, vec![x(&[3, 1], 514), ci(&[2, 3, 4])], 1);
    cs.check(r#"helper.make_node("Tile", ["i0", "i1"], ["o0"])"#, Op::Tile, vec![x(&[2, 3], 515), ci(&[3, 2])], 1);
    cs.check(
        r#"helper.make_node("DepthToSpace", ["i0"], ["o0"], blocksize=2, mode="DCR")"#,
        Op::DepthToSpace { blocksize: 2, crd: false },
        vec![x(&[1, 8, 2, 3], 516)],
        1,
    );
    cs.check(
        r#"helper.make_node("DepthToSpace", ["i0"], ["o0"], blocksize=2, mode="CRD")"#,
        Op::DepthToSpace { blocksize: 2, crd: true },
        vec![x(&[1, 8, 2, 3], 517)],
        1,
    );
    cs.check(r#"helper.make_node("SpaceToDepth", ["i0"], ["o0"], blocksize=2)"#, Op::SpaceToDepth { blocksize: 2 }, vec![x(&[1, 2, 4, 6], 518)], 1);
    cs.check(r#"helper.make_node("Trilu", ["i0", "i1"], ["o0"], upper=1)"#, Op::Trilu { upper: true }, vec![x(&[2, 4, 5], 519), In::C(Tensor::from_i64(vec![], vec![1]))], 1);
    cs.check(r#"helper.make_node("Trilu", ["i0"], ["o0"], upper=0)"#, Op::Trilu { upper: false }, vec![x(&[4, 3], 520)], 1);
    cs.run();
}

#[test]
fn gather_embeddings_and_axes() {
    let mut cs = Cases::default();
    let idx = Tensor::from_i64(vec![2, 3], vec![0, 4, -1, 2, 2, -5]);
    cs.check(r#"helper.make_node("Gather", ["i0", "i1"], ["o0"], axis=0)"#, Op::Gather { axis: 0 }, vec![c(&[5, 4], 600), In::X(idx.clone())], 1);
    cs.check(r#"helper.make_node("Gather", ["i0", "i1"], ["o0"], axis=0)"#, Op::Gather { axis: 0 }, vec![x(&[5, 4], 601), In::C(idx)], 1);
    cs.check(
        r#"helper.make_node("Gather", ["i0", "i1"], ["o0"], axis=1)"#,
        Op::Gather { axis: 1 },
        vec![x(&[2, 3, 4], 602), In::X(Tensor::new(vec![2], TensorData::I32(vec![2, 0])).unwrap())],
        1,
    );
    cs.check(
        r#"helper.make_node("Gather", ["i0", "i1"], ["o0"], axis=2)"#,
        Op::Gather { axis: 2 },
        vec![x(&[2, 3, 4], 603), In::C(Tensor::from_i64(vec![], vec![3]))],
        1,
    );
    cs.run();
}

#[test]
fn gather_nd_scatter_nd_and_scatter_elements() {
    let mut cs = Cases::default();
    let gnd = |b: usize| format!(r#"helper.make_node("GatherND", ["i0", "i1"], ["o0"], batch_dims={b})"#);
    cs.check(&gnd(0), Op::GatherNd { batch_dims: 0 }, vec![x(&[3, 4, 5], 700), xi(&[2, 2], &[0, 1, -1, 3])], 1);
    cs.check(&gnd(0), Op::GatherNd { batch_dims: 0 }, vec![x(&[3, 4], 701), xi(&[2, 1, 2], &[2, 3, 0, -4])], 1);
    cs.check(&gnd(0), Op::GatherNd { batch_dims: 0 }, vec![c(&[4, 3], 702), xi(&[3, 1], &[3, 0, 1])], 1);
    cs.check(&gnd(1), Op::GatherNd { batch_dims: 1 }, vec![x(&[2, 3, 4], 703), xi(&[2, 1], &[2, -3])], 1);
    cs.check(&gnd(1), Op::GatherNd { batch_dims: 1 }, vec![x(&[2, 3, 4], 704), xi(&[2, 2, 2], &[0, 1, 2, 3, 1, 0, -1, -1])], 1);
    let snd = |r: &str| format!(r#"helper.make_node("ScatterND", ["i0", "i1", "i2"], ["o0"], reduction="{r}")"#);
    cs.check(&snd("none"), Op::ScatterNd { reduction: None }, vec![x(&[4, 3], 710), xi(&[2, 1], &[1, -1]), x(&[2, 3], 711)], 1);
    cs.check(&snd("add"), Op::ScatterNd { reduction: Some(BinaryOp::Add) }, vec![x(&[3, 4], 712), xi(&[3, 2], &[0, 1, 2, 3, 0, 1]), x(&[3], 713)], 1);
    cs.check(&snd("mul"), Op::ScatterNd { reduction: Some(BinaryOp::Mul) }, vec![x(&[2, 2, 3], 714), xi(&[1, 2], &[1, 0]), x(&[1, 3], 715)], 1);
    cs.check(&snd("max"), Op::ScatterNd { reduction: Some(BinaryOp::Max) }, vec![x(&[5], 716), xi(&[3, 1], &[4, 0, 4]), x(&[3], 717)], 1);
    let se = |a: i64, r: &str| format!(r#"helper.make_node("ScatterElements", ["i0", "i1", "i2"], ["o0"], axis={a}, reduction="{r}")"#);
    cs.check(&se(1, "none"), Op::ScatterElements { axis: 1, reduction: None }, vec![x(&[3, 4], 720), xi(&[3, 2], &[1, 3, 0, -1, 2, 0]), x(&[3, 2], 721)], 1);
    cs.check(&se(0, "add"), Op::ScatterElements { axis: 0, reduction: Some(BinaryOp::Add) }, vec![x(&[3, 2], 722), xi(&[2, 2], &[0, 2, 0, 2]), x(&[2, 2], 723)], 1);
    cs.check(&se(0, "min"), Op::ScatterElements { axis: 0, reduction: Some(BinaryOp::Min) }, vec![x(&[4], 724), xi(&[3], &[3, -1, 1]), x(&[3], 725)], 1);
    cs.run();
}

#[test]
fn reverse_sequence_with_run_time_lengths() {
    let mut cs = Cases::default();
    let lens = |v: &[i64]| In::X(Tensor::from_i64(vec![v.len()], v.to_vec()));
    cs.check(
        r#"helper.make_node("ReverseSequence", ["i0", "i1"], ["o0"], batch_axis=0, time_axis=1)"#,
        Op::ReverseSequence { batch_axis: 0, time_axis: 1 },
        vec![x(&[4, 5, 3], 760), lens(&[1, 5, 3, 0])],
        1,
    );
    cs.check(
        r#"helper.make_node("ReverseSequence", ["i0", "i1"], ["o0"], batch_axis=1, time_axis=0)"#,
        Op::ReverseSequence { batch_axis: 1, time_axis: 0 },
        vec![x(&[6, 3, 2, 2], 761), lens(&[6, 2, 4])],
        1,
    );
    cs.run();
}

#[test]
fn cumsum_onehot_hardmax_topk_lrn_gather_elements_and_quantization() {
    let mut cs = Cases::default();
    let axis = |a: i64| In::C(Tensor::from_i64(vec![], vec![a]));
    for (ex, rev) in [(false, false), (true, false), (false, true), (true, true)] {
        cs.check(
            &format!(r#"helper.make_node("CumSum", ["i0", "i1"], ["o0"], exclusive={}, reverse={})"#, ex as u8, rev as u8),
            Op::CumSum { exclusive: ex, reverse: rev },
            vec![x(&[3, 5], 800), axis(-1)],
            1,
        );
    }
    cs.check(
        r#"helper.make_node("OneHot", ["i0", "i1", "i2"], ["o0"], axis=1)"#,
        Op::OneHot { axis: 1 },
        vec![
            In::X(Tensor::from_i64(vec![2, 2], vec![0, 3, -1, 2])),
            In::C(Tensor::from_i64(vec![], vec![4])),
            In::C(Tensor::from_f32(vec![2], vec![-1.0, 5.0])),
        ],
        1,
    );
    cs.check(r#"helper.make_node("Hardmax", ["i0"], ["o0"], axis=1)"#, Op::Hardmax { axis: 1 }, vec![x(&[3, 6], 801)], 1);
    let k = In::C(Tensor::from_i64(vec![1], vec![3]));
    cs.check(
        r#"helper.make_node("TopK", ["i0", "i1"], ["o0", "o1"], axis=1)"#,
        Op::TopK { axis: 1, largest: true, sorted: true },
        vec![x(&[2, 7, 3], 802), k],
        2,
    );
    cs.check(
        r#"helper.make_node("TopK", ["i0", "i1"], ["o0", "o1"], axis=-1, largest=0)"#,
        Op::TopK { axis: 1, largest: false, sorted: true },
        vec![x(&[4, 9], 803), In::C(Tensor::from_i64(vec![1], vec![2]))],
        2,
    );
    // onnx.reference's LRN loops over the batch instead of the channels; onnxruntime is right.
    cs.check_ort(
        r#"helper.make_node("LRN", ["i0"], ["o0"], alpha=1e-3, beta=0.75, bias=2.0, size=3)"#,
        Op::Lrn { alpha: 1e-3, beta: 0.75, bias: 2.0, size: 3 },
        vec![x(&[1, 5, 3, 3], 804)],
        1,
    );
    cs.check(
        r#"helper.make_node("GatherElements", ["i0", "i1"], ["o0"], axis=1)"#,
        Op::GatherElements { axis: 1 },
        vec![x(&[3, 4], 805), In::X(Tensor::from_i64(vec![3, 2], vec![0, 3, -1, 1, 2, 2]))],
        1,
    );
    let q = Tensor::new(vec![2, 3], TensorData::U8(vec![0, 128, 255, 7, 100, 200])).unwrap();
    cs.check(
        r#"helper.make_node("DequantizeLinear", ["i0", "i1", "i2"], ["o0"], axis=1)"#,
        Op::DequantizeLinear { axis: 1 },
        vec![
            In::X(q),
            In::C(Tensor::from_f32(vec![3], vec![0.1, 0.02, 0.5])),
            In::C(Tensor::new(vec![3], TensorData::U8(vec![128, 0, 10])).unwrap()),
        ],
        1,
    );
    cs.check(
        r#"helper.make_node("QuantizeLinear", ["i0", "i1", "i2"], ["o0"])"#,
        Op::QuantizeLinear { axis: 1, to: DType::I8, rounding: Default::default() },
        vec![
            In::X(Tensor::from_f32(vec![6], vec![-3.0, -0.05, 0.05, 0.15, 1.0, 9.0])),
            In::C(Tensor::from_f32(vec![], vec![0.1])),
            In::C(Tensor::new(vec![], TensorData::I8(vec![-2])).unwrap()),
        ],
        1,
    );
    cs.run();
}
