//! The CNN ops real models need in int8 (issue 13's zoo rows): a BatchNorm that cannot fold (after a Concat,
//! DenseNet) rewritten to MUL + ADD, DepthToSpace (MediaPipe detectors) as DEPTH_TO_SPACE, Tile (Keras
//! UpSampling2D) as TILE, a grouped convolution (RegNet) as SPLIT + CONV_2D per group + CONCATENATION, and
//! int8 SUM (YOLO's DFL head). Each graph is quantized, exported, loaded and run by LiteRT's builtin kernels,
//! and our int8 CPU runtime must compute exactly what LiteRT computes (on the graph and on the file read back).

use tpu_sdk_core::ir::builder::GraphBuilder;
use tpu_sdk_core::ir::{Activation, BinaryOp, DType, Graph, Op, ReduceOp, Tensor, UnaryOp};
use tpu_sdk_core::quant;
use tpu_sdk_edgetpu::export::{export, ExportOptions};
use tpu_sdk_edgetpu::report::Placement;
use tpu_sdk_edgetpu::rules::{analyze_bytes, RulesOptions};
use tpu_sdk_test_support::f32_samples;

mod int8_support;
use int8_support::{conv, input_shapes, ops_of, ours_equal_litert, quantized, sqnr, weights};

/// Quantizes `g` (both I/O kinds), exports it, checks the file has every op of `want_ops`, and runs the
/// exact-match harness; asserts every output's SQNR against the float graph exceeds `min_db`.
fn check(label: &str, g: &Graph, want_ops: &[&str], min_db: f64) -> Vec<String> {
    let eval = f32_samples(&input_shapes(g), 3, 91, -1.0, 1.0);
    let mut ops = Vec::new();
    for float_io in [false, true] {
        let q = quantized(g, -1.0, 1.0, float_io);
        let ex = export(&q, &ExportOptions::default()).unwrap_or_else(|e| panic!("{label}: export refused: {e}"));
        ops = ops_of(&ex.bytes);
        for w in want_ops {
            assert!(ops.iter().any(|o| o == w), "{label}: no {w} in {ops:?}");
        }
        let name = format!("{label} float_io={float_io}");
        let ours = ours_equal_litert(&name, &q, &ex, &eval);
        for k in 0..ours.first().map_or(0, |o| o.len()) {
            let s = sqnr(g, &q, &eval, &ours, k);
            eprintln!("{name}: output {k} SQNR {s:.1} dB");
            assert!(s > min_db, "{name}: output {k} SQNR {s} dB");
        }
    }
    ops
}

/// DenseNet's transition: Conv, Concat with its input, a BatchNorm on the concatenation (nothing to fold
/// into), ReLU, 1×1 Conv. The BatchNorm becomes MUL + ADD by per-channel constants before calibration.
#[test]
fn a_batch_norm_after_concat_becomes_mul_add_and_matches_litert() {
    let mut b = GraphBuilder::new("bn_after_concat");
    let x = b.input("x", DType::F32, &[1, 4, 6, 6]);
    let w = b.constant("w", weights(&[4, 4, 3, 3], 81, 0.5));
    let c = b.op(conv(3, 1, 1, None), &[x, w]).unwrap();
    let cat = b.op(Op::Concat { axis: 1 }, &[x, c]).unwrap();
    let gamma = b.constant("gamma", weights(&[8], 82, 1.5));
    let beta = b.constant("beta", weights(&[8], 83, 0.5));
    let mean = b.constant("mean", weights(&[8], 84, 0.3));
    let var = b.constant("var", Tensor::from_f32(vec![8], (0..8).map(|i| 0.5 + i as f32 * 0.25).collect()));
    let bn = b.op(Op::BatchNorm { epsilon: 1e-5 }, &[cat, gamma, beta, mean, var]).unwrap();
    let r = b.op(Op::Unary(UnaryOp::Relu), &[bn]).unwrap();
    let w2 = b.constant("w2", weights(&[6, 8, 1, 1], 85, 0.5));
    let y = b.op(conv(1, 0, 1, None), &[r, w2]).unwrap();
    b.output(y);
    let mut g = b.finish().unwrap();
    quant::prepare(&mut g);
    assert!(!g.nodes.iter().any(|n| matches!(n.op, Op::BatchNorm { .. })));
    check("bn_after_concat", &g, &["MUL", "ADD", "CONCATENATION"], 25.0);
}

/// A MediaPipe detector head: Conv, DepthToSpace (block 2, DCR: TFLite's order), Conv.
#[test]
fn depth_to_space_exports_as_depth_to_space_and_matches_litert() {
    let mut b = GraphBuilder::new("depth_to_space");
    let x = b.input("x", DType::F32, &[1, 3, 4, 4]);
    let w = b.constant("w", weights(&[8, 3, 3, 3], 86, 0.5));
    let c = b.op(conv(3, 1, 1, Some(Activation::Relu)), &[x, w]).unwrap();
    let d = b.op(Op::DepthToSpace { blocksize: 2, crd: false }, &[c]).unwrap();
    let w2 = b.constant("w2", weights(&[3, 2, 3, 3], 87, 0.5));
    let y = b.op(conv(3, 1, 1, None), &[d, w2]).unwrap();
    b.output(y);
    b.output(d);
    let g = b.finish().unwrap();
    check("depth_to_space", &g, &["DEPTH_TO_SPACE"], 25.0);
    // Not on the Edge TPU's published op list: it runs on the CPU, and so does everything after it.
    let q = quantized(&g, -1.0, 1.0, false);
    let report = analyze_bytes(&export(&q, &ExportOptions::default()).unwrap().bytes, &RulesOptions::default()).unwrap();
    let d2s = report.ops.iter().find(|o| o.op == "DEPTH_TO_SPACE").unwrap();
    assert_eq!(d2s.placement, Placement::Cpu, "{}", report.to_text());
    // CRD (PyTorch's PixelShuffle) has no TFLite op: a clear refusal naming the node.
    let mut crd = g.clone();
    for n in &mut crd.nodes {
        if let Op::DepthToSpace { crd: c, .. } = &mut n.op {
            *c = true;
        }
    }
    let e = export(&crd, &ExportOptions::default()).map(|_| ()).unwrap_err().to_string();
    assert!(e.contains("DepthToSpace") && e.contains("CRD"), "{e}");
}

/// Keras UpSampling2D's nearest upsampling as the importer sees it (Reshape → Tile → Reshape) between
/// convolutions, and a plain Tile of a feature map.
#[test]
fn tile_exports_as_tile_and_matches_litert() {
    let mut b = GraphBuilder::new("tile");
    let x = b.input("x", DType::F32, &[1, 3, 4, 4]);
    let w = b.constant("w", weights(&[4, 3, 3, 3], 88, 0.5));
    let c = b.op(conv(3, 1, 1, Some(Activation::Relu)), &[x, w]).unwrap();
    let r = b.reshape(c, &[1, 4, 4, 1, 4, 1]).unwrap();
    let reps = b.constant("reps", Tensor::from_i64(vec![6], vec![1, 1, 1, 2, 1, 2]));
    let t = b.op(Op::Tile, &[r, reps]).unwrap();
    let up = b.reshape(t, &[1, 4, 8, 8]).unwrap();
    let w2 = b.constant("w2", weights(&[3, 4, 3, 3], 89, 0.5));
    let y = b.op(conv(3, 1, 1, None), &[up, w2]).unwrap();
    b.output(y);
    let reps2 = b.constant("reps2", Tensor::from_i64(vec![4], vec![1, 2, 1, 3]));
    let y2 = b.op(Op::Tile, &[c, reps2]).unwrap();
    b.output(y2);
    let g = b.finish().unwrap();
    check("tile", &g, &["TILE"], 25.0);
}

/// RegNet's grouped 3×3 convolutions: 8 → 8 channels in 2 groups with a ReLU, then 8 → 12 in 4 groups
/// with stride 2 and a bias.
#[test]
fn a_grouped_conv_exports_as_split_conv_concat_and_matches_litert() {
    let mut b = GraphBuilder::new("grouped_conv");
    let x = b.input("x", DType::F32, &[1, 8, 8, 8]);
    let w = b.constant("w", weights(&[8, 4, 3, 3], 90, 0.5));
    let c = b.op(conv(3, 1, 2, Some(Activation::Relu)), &[x, w]).unwrap();
    let w2 = b.constant("w2", weights(&[12, 2, 3, 3], 92, 0.5));
    let b2 = b.constant("b2", weights(&[12], 93, 0.2));
    let mut a = match conv(3, 1, 4, None) {
        Op::Conv(a) => a,
        _ => unreachable!(),
    };
    a.strides = vec![2, 2];
    let y = b.op(Op::Conv(a), &[c, w2, b2]).unwrap();
    b.output(y);
    let g = b.finish().unwrap();
    let ops = check("grouped_conv", &g, &["SPLIT", "CONCATENATION"], 25.0);
    assert_eq!(ops.iter().filter(|o| *o == "CONV_2D").count(), 6, "{ops:?}");
    // RegNetY-400MF's first stage: 48 channels in groups of 8, stride 2, 14×14, ReLU; then one of stride 1.
    let mut b = GraphBuilder::new("regnet_stage");
    let x = b.input("x", DType::F32, &[1, 48, 14, 14]);
    let w = b.constant("w", weights(&[48, 8, 3, 3], 95, 0.3));
    let bias = b.constant("bias", weights(&[48], 96, 0.2));
    let mut a = match conv(3, 1, 6, Some(Activation::Relu)) {
        Op::Conv(a) => a,
        _ => unreachable!(),
    };
    a.strides = vec![2, 2];
    let c = b.op(Op::Conv(a), &[x, w, bias]).unwrap();
    let w2 = b.constant("w2", weights(&[48, 8, 3, 3], 97, 0.3));
    let y = b.op(conv(3, 1, 6, Some(Activation::Relu)), &[c, w2]).unwrap();
    b.output(y);
    check("regnet_stage", &b.finish().unwrap(), &["SPLIT", "CONCATENATION"], 25.0);
}

/// YOLO's DFL head: Conv, Sigmoid, Mul by a ramp, ReduceSum over the 16 bins (axis 2 of [1, 4, 16, 8],
/// no keepdims); and a channel sum with keepdims. The inputs' zero points are not 0, so LiteRT's
/// zero-point term (with its own element count) is exercised.
#[test]
fn int8_reduce_sum_matches_litert() {
    let mut b = GraphBuilder::new("reduce_sum");
    let x = b.input("x", DType::F32, &[1, 3, 4, 2]);
    let w = b.constant("w", weights(&[64, 3, 1, 1], 94, 0.8));
    let c = b.op(conv(1, 0, 1, None), &[x, w]).unwrap();
    let r = b.reshape(c, &[1, 4, 16, 8]).unwrap();
    let s = b.op(Op::Unary(UnaryOp::Sigmoid), &[r]).unwrap();
    let ramp = b.constant("ramp", Tensor::from_f32(vec![1, 1, 16, 1], (0..16).map(|i| i as f32).collect()));
    let m = b.op(Op::Binary(BinaryOp::Mul, None), &[s, ramp]).unwrap();
    let sum = Op::Reduce { op: ReduceOp::Sum, axes: Some(vec![2]), keepdims: false, noop_with_empty_axes: false };
    let y = b.op(sum, &[m]).unwrap();
    b.output(y);
    let sum_c = Op::Reduce { op: ReduceOp::Sum, axes: Some(vec![1]), keepdims: true, noop_with_empty_axes: false };
    let y2 = b.op(sum_c, &[c]).unwrap();
    b.output(y2);
    let g = b.finish().unwrap();
    check("reduce_sum", &g, &["SUM"], 15.0);
}
