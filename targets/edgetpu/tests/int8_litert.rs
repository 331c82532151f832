//! Int8 files LiteRT accepts: models with dead and tiny weight channels (which used to give scales so small
//! that LiteRT refused the file in `Prepare`), the exporter's own copy of LiteRT's `Prepare` checks (a graph
//! with a broken scale is an error naming the tensor and the rule, never a written file), and Split (SPLIT /
//! SPLIT_V with the input's parameters). Every exported model is loaded and run by LiteRT's builtin kernels
//! (`ai-edge-litert`, from the Python named by `TPU_SDK_PYTHON`), and our int8 CPU runtime, running the
//! quantized graph that was exported, must compute exactly what LiteRT computes on the file. The reported case
//! itself, a Keras MobileNetV2 with dead depthwise channels converted by TensorFlow, runs when
//! `TPU_SDK_TF_PYTHON` names a Python with tensorflow.

use std::path::PathBuf;
use std::process::Command;

use tpu_sdk_core::import::tflite;
use tpu_sdk_core::ir::builder::GraphBuilder;
use tpu_sdk_core::ir::{Activation, AutoPad, BinaryOp, DType, Graph, Op, PoolAttrs, Tensor, UnaryOp};
use tpu_sdk_core::quant::compare::to_graph_input;
use tpu_sdk_core::runtime::Session;
use tpu_sdk_core::target::{CompileOptions, EdgeTpuOptions, Target};
use tpu_sdk_core::{npy, passes};
use tpu_sdk_edgetpu::export::{export, ExportOptions};
use tpu_sdk_edgetpu::report::Placement;
use tpu_sdk_edgetpu::rules::{analyze_bytes, RulesOptions};
use tpu_sdk_edgetpu::EdgeTpuTarget;
use tpu_sdk_test_support::{differing, f32_samples, litert, oracle};

mod int8_support;
use int8_support::{conv, input_shapes, ops_of, ours_equal_litert, quantized, sqnr, weights};

/// A MobileNet-style block whose depthwise convolution has a dead channel (all weights 0) and a tiny one
/// (weights 1e-9), both with a bias; a second depthwise convolution whose channels are all dead or tiny, so
/// that its RELU6 output's calibrated range is ~1e-8 wide (LiteRT refused such files: `6 / scale` overflowed
/// int32); a fully-connected layer of tiny weights with a bias (int32 bias overflow, per output row); and a SUB whose
/// inputs almost cancel.
fn dead_channels() -> Graph {
    let mut b = GraphBuilder::new("dead_channels");
    let x = b.input("x", DType::F32, &[1, 4, 8, 8]);
    let mut wd = weights(&[4, 1, 3, 3], 51, 0.8).as_f32().unwrap().to_vec();
    wd[..9].iter_mut().for_each(|v| *v = 0.0);
    wd[9..18].iter_mut().for_each(|v| *v = 1e-9);
    let wd = b.constant("wd", Tensor::from_f32(vec![4, 1, 3, 3], wd));
    let bd = b.constant("bd", Tensor::from_f32(vec![4], vec![0.3, 0.2, 0.1, -0.1]));
    let d = b.op(conv(3, 1, 4, Some(Activation::Relu6)), &[x, wd, bd]).unwrap();
    let w1 = b.constant("w1", weights(&[6, 4, 1, 1], 52, 0.5));
    let y1 = b.op(conv(1, 0, 1, None), &[d, w1]).unwrap();
    b.output(y1);
    let mut wt = vec![0.0f32; 4 * 9];
    wt[9..18].iter_mut().for_each(|v| *v = 1e-9);
    wt[27..].iter_mut().for_each(|v| *v = -1e-9);
    let wt = b.constant("wt", Tensor::from_f32(vec![4, 1, 3, 3], wt));
    let y2 = b.op(conv(3, 1, 4, Some(Activation::Relu6)), &[x, wt]).unwrap();
    b.output(y2);
    let gap = b.op(Op::GlobalAveragePool, &[y1]).unwrap();
    let fl = b.op(Op::Flatten { axis: 1 }, &[gap]).unwrap();
    let wf = b.constant("wf", Tensor::from_f32(vec![3, 6], vec![1e-9; 18]));
    let bf = b.constant("bf", Tensor::from_f32(vec![3], vec![0.5, -0.25, 0.125]));
    let y3 = b.op(Op::Gemm { alpha: 1.0, beta: 1.0, trans_a: false, trans_b: true, activation: None }, &[fl, wf, bf]).unwrap();
    b.output(y3);
    // x·(1 + 1e-7) − x: a SUB whose output range is ~10^6 times narrower than its inputs' (LiteRT's int8
    // SUB aborts unless 2·max(input scales) / (2^20 · output scale) < 1).
    let c = b.constant("c", Tensor::from_f32(vec![1], vec![1.0 + 1e-7]));
    let m = b.op(Op::Binary(BinaryOp::Mul, None), &[x, c]).unwrap();
    let y4 = b.op(Op::Binary(BinaryOp::Sub, None), &[m, x]).unwrap();
    b.output(y4);
    b.finish().unwrap()
}

#[test]
fn dead_and_tiny_weight_channels_give_a_file_litert_loads_and_we_match() {
    let g = dead_channels();
    // Held-out inputs in the calibrated range (the SQNR is about the dead channels, not saturation).
    let eval = f32_samples(&input_shapes(&g), 3, 42, -1.0, 1.0);
    for float_io in [false, true] {
        let q = quantized(&g, -1.0, 1.0, float_io);
        // The dead and tiny channels get TF's minimum weight scale (absmax 5e-7), widened where their bias
        // would not fit int32 at input scale × weight scale.
        let dw = q.nodes.iter().find(|n| matches!(&n.op, Op::Conv(a) if a.group == 4)).unwrap();
        let ws = q.value(dw.input(1).unwrap()).quant.clone().unwrap().scale;
        let s_in = q.value(dw.input(0).unwrap()).quant.clone().unwrap().scale[0] as f64;
        for (c, bias) in [(0, 0.3f64), (1, 0.2)] {
            assert!(ws[c] as f64 >= 5e-7 / 127.0 * 0.999, "channel {c} scale {:e}", ws[c]);
            assert!(bias / (s_in * ws[c] as f64) <= 0.5 * i32::MAX as f64 + 1.0, "channel {c}: bias overflows int32");
        }
        let ex = export(&q, &ExportOptions::default()).unwrap_or_else(|e| panic!("export refused: {e}"));
        let label = format!("dead_channels float_io={float_io}");
        let ours = ours_equal_litert(&label, &q, &ex, &eval);
        if ours.is_empty() {
            return;
        }
        // The dead channels' biases survive quantization: the block stays close to the float model.
        for k in [0, 2] {
            let s = sqnr(&g, &q, &eval, &ours, k);
            eprintln!("{label}: output {k} SQNR {s:.1} dB");
            assert!(s > 25.0, "{label}: output {k} SQNR {s} dB");
        }
    }
}

/// Conv → RELU6 → softmax head, quantized; the tests break one parameter of it.
fn small_net() -> (Graph, Graph) {
    let mut b = GraphBuilder::new("small");
    let x = b.input("x", DType::F32, &[1, 3, 6, 6]);
    let w = b.constant("w", weights(&[4, 3, 3, 3], 61, 0.5));
    let bias = b.constant("b", weights(&[4], 62, 0.2));
    let c = b.op(conv(3, 1, 1, Some(Activation::Relu6)), &[x, w, bias]).unwrap();
    let r = b.reshape(c, &[1, 144]).unwrap();
    let s = b.softmax(r).unwrap();
    b.output(s);
    let g = b.finish().unwrap();
    let q = quantized(&g, -1.0, 1.0, false);
    (g, q)
}

/// Exports `q` after `breaking` it, expecting an error that contains every string of `want`.
fn refused(breaking: impl Fn(&mut Graph), want: &[&str]) {
    let (_, mut q) = small_net();
    export(&q, &ExportOptions::default()).expect("the intact graph exports");
    breaking(&mut q);
    let e = export(&q, &ExportOptions::default()).map(|_| ()).expect_err("a broken graph must not export").to_string();
    for w in want {
        assert!(e.contains(w), "error lacks '{w}': {e}");
    }
}

fn conv_node(q: &Graph) -> &tpu_sdk_core::ir::Node {
    q.nodes.iter().find(|n| matches!(n.op, Op::Conv(_))).unwrap()
}

#[test]
fn the_exporter_refuses_what_litert_would_refuse_naming_tensor_and_rule() {
    // A conv output scale so small that RELU6's bound 6/scale overflows int32 (the reported DEPTHWISE_CONV_2D
    // failure, `no_integer_overflow_from_quantization`).
    refused(
        |q| {
            let y = conv_node(q).outputs[0];
            q.value_mut(y).quant.as_mut().unwrap().scale[0] = 1e-14;
        },
        &["CONV_2D", "no_integer_overflow_from_quantization", "not written"],
    );
    // A bias whose scale is not input scale × filter scale.
    refused(
        |q| {
            let b = conv_node(q).input(2).unwrap();
            q.value_mut(b).quant.as_mut().unwrap().scale[1] *= 1.5;
        },
        &["bias", "scale[1]", "input scale × filter scale"],
    );
    // A per-channel weight scale of 0.
    refused(
        |q| {
            let w = conv_node(q).input(1).unwrap();
            q.value_mut(w).quant.as_mut().unwrap().scale[2] = 0.0;
        },
        &["scale[2]", "finite and > 0"],
    );
    // A softmax output without the fixed parameters (1/256, -128).
    refused(
        |q| {
            let o = q.outputs[0];
            q.value_mut(o).quant.as_mut().unwrap().scale[0] = 1.0 / 100.0;
        },
        &["SOFTMAX", "scale 0.00390625 and zero point -128"],
    );
}

/// A YOLO-style channel split: Conv → Split in two equal halves (SPLIT), one half through a 3×3 conv, Concat
/// of the three; an unequal channel split (SPLIT_V) whose parts are reordered; a split of the height (a
/// non-channel axis, which NHWC moves) whose halves are pooled and added.
fn split_net() -> Graph {
    let mut b = GraphBuilder::new("split_net");
    let x = b.input("x", DType::F32, &[1, 3, 8, 8]);
    let w0 = b.constant("w0", weights(&[8, 3, 3, 3], 71, 0.5));
    let b0 = b.constant("b0", weights(&[8], 72, 0.2));
    let c = b.op(conv(3, 1, 1, Some(Activation::Relu)), &[x, w0, b0]).unwrap();
    let halves = b.node(Op::Split { axis: 1, split: None, num_outputs: 2 }, &[Some(c)], 2).unwrap();
    let w1 = b.constant("w1", weights(&[4, 4, 3, 3], 73, 0.5));
    let m = b.op(conv(3, 1, 1, None), &[halves[1], w1]).unwrap();
    let m = b.op(Op::Unary(UnaryOp::Sigmoid), &[m]).unwrap();
    let m = b.op(Op::Binary(BinaryOp::Mul, None), &[m, halves[1]]).unwrap();
    let cat = b.op(Op::Concat { axis: 1 }, &[halves[0], halves[1], m]).unwrap();
    let w2 = b.constant("w2", weights(&[6, 12, 1, 1], 74, 0.4));
    let y1 = b.op(conv(1, 0, 1, None), &[cat, w2]).unwrap();
    b.output(y1);
    let parts = b.node(Op::Split { axis: 1, split: Some(vec![2, 2, 4]), num_outputs: 3 }, &[Some(c)], 3).unwrap();
    let y2 = b.op(Op::Concat { axis: 1 }, &[parts[2], parts[0]]).unwrap();
    b.output(y2);
    let rows = b.node(Op::Split { axis: 2, split: None, num_outputs: 2 }, &[Some(m)], 2).unwrap();
    let pool = PoolAttrs { kernel_shape: vec![2, 2], strides: vec![2, 2], dilations: vec![], pads: vec![0; 4], auto_pad: AutoPad::NotSet, ceil_mode: false, count_include_pad: false };
    let top = b.node(Op::MaxPool(pool.clone()), &[Some(rows[0])], 1).unwrap()[0];
    let bottom = b.node(Op::MaxPool(pool), &[Some(rows[1])], 1).unwrap()[0];
    let y3 = b.op(Op::Binary(BinaryOp::Add, None), &[top, bottom]).unwrap();
    b.output(y3);
    b.finish().unwrap()
}

#[test]
fn split_quantizes_exports_as_split_and_split_v_and_matches_litert() {
    let g = split_net();
    let eval = f32_samples(&input_shapes(&g), 3, 43, -1.2, 1.2);
    for float_io in [false, true] {
        let q = quantized(&g, -1.0, 1.0, float_io);
        // Every part shares the split input's parameters.
        for n in q.nodes.iter().filter(|n| matches!(n.op, Op::Split { .. })) {
            let p = q.value(n.input(0).unwrap()).quant.clone();
            assert!(p.is_some());
            for &o in &n.outputs {
                assert_eq!(q.value(o).quant, p, "split part '{}'", q.value(o).name);
            }
        }
        let ex = export(&q, &ExportOptions::default()).unwrap_or_else(|e| panic!("export refused: {e}"));
        let ops = ops_of(&ex.bytes);
        assert_eq!(ops.iter().filter(|o| *o == "SPLIT").count(), 2, "{ops:?}");
        assert_eq!(ops.iter().filter(|o| *o == "SPLIT_V").count(), 1, "{ops:?}");
        // The splits follow the NHWC layout: the only transposes are those of the three NCHW graph outputs.
        assert_eq!(ops.iter().filter(|o| *o == "TRANSPOSE").count(), 3, "{ops:?}");
        // SPLIT is on the Edge TPU's published op list (SPLIT_V is not).
        let report = analyze_bytes(&ex.bytes, &RulesOptions::default()).unwrap();
        let first_split = report.ops.iter().find(|o| o.op == "SPLIT").unwrap();
        assert_eq!(first_split.placement, Placement::Tpu, "{}", report.to_text());
        let label = format!("split_net float_io={float_io}");
        let ours = ours_equal_litert(&label, &q, &ex, &eval);
        for k in 0..ours.first().map_or(0, |o| o.len()) {
            let s = sqnr(&g, &q, &eval, &ours, k);
            eprintln!("{label}: output {k} SQNR {s:.1} dB");
            assert!(s > 20.0, "{label}: output {k} SQNR {s} dB");
        }
    }
}

/// A pre-norm transformer block as PyTorch's ONNX export writes it: LayerNorm, Q/K/V projections, two heads
/// of attention (`Q·Kᵀ` and `P·V` multiply two activations), the output projection and residual, a second
/// LayerNorm written out as PaddleOCR's export does (`ReduceMean`, `Pow(d, 2)`, `Sqrt`, `Div`), and an MLP whose
/// GELU is the erf form (`x/√2`, `Erf`, `+1`, `·x`, `·0.5`).
fn transformer_block() -> Graph {
    let (t, c, h) = (8usize, 16usize, 2usize);
    let mut b = GraphBuilder::new("transformer_block");
    let x = b.input("x", DType::F32, &[1, t, c]);
    let scalar = |b: &mut GraphBuilder, name: &str, v: f32| b.constant(name, Tensor::from_f32(vec![], vec![v]));
    let mul = Op::Binary(BinaryOp::Mul, None);
    let add = Op::Binary(BinaryOp::Add, None);
    let g1 = b.constant("ln1_g", weights(&[c], 60, 1.5));
    let b1 = b.constant("ln1_b", weights(&[c], 61, 0.5));
    let ln1 = b.node(Op::LayerNorm { axis: 2, epsilon: 1e-5 }, &[Some(x), Some(g1), Some(b1)], 1).unwrap()[0];
    let proj = |b: &mut GraphBuilder, x, name: &str, seed, n: usize, k: usize| {
        let w = b.constant(name, weights(&[k, n], seed, 0.5));
        b.op(Op::MatMul, &[x, w]).unwrap()
    };
    let (q, k, v) = (proj(&mut b, ln1, "wq", 62, c, c), proj(&mut b, ln1, "wk", 63, c, c), proj(&mut b, ln1, "wv", 64, c, c));
    let heads = |b: &mut GraphBuilder, x, perm: Vec<usize>| {
        let r = b.reshape(x, &[1, t as i64, h as i64, (c / h) as i64]).unwrap();
        b.op(Op::Transpose { perm }, &[r]).unwrap()
    };
    let (qh, kt, vh) = (heads(&mut b, q, vec![0, 2, 1, 3]), heads(&mut b, k, vec![0, 2, 3, 1]), heads(&mut b, v, vec![0, 2, 1, 3]));
    let s = b.op(Op::MatMul, &[qh, kt]).unwrap();
    let sc = scalar(&mut b, "scale", 1.0 / ((c / h) as f32).sqrt());
    let s = b.op(mul.clone(), &[s, sc]).unwrap();
    let p = b.op(Op::Softmax { axis: 3 }, &[s]).unwrap();
    let o = b.op(Op::MatMul, &[p, vh]).unwrap();
    let o = b.op(Op::Transpose { perm: vec![0, 2, 1, 3] }, &[o]).unwrap();
    let o = b.reshape(o, &[1, t as i64, c as i64]).unwrap();
    let o = proj(&mut b, o, "wo", 65, c, c);
    let r = b.op(add.clone(), &[o, x]).unwrap();
    // LayerNorm as separate ops.
    let mean = |b: &mut GraphBuilder, x| b.op(Op::Reduce { op: tpu_sdk_core::ir::ReduceOp::Mean, axes: Some(vec![2]), keepdims: true, noop_with_empty_axes: false }, &[x]).unwrap();
    let m = mean(&mut b, r);
    let d = b.op(Op::Binary(BinaryOp::Sub, None), &[r, m]).unwrap();
    let two = scalar(&mut b, "two", 2.0);
    let d2 = b.op(Op::Binary(BinaryOp::Pow, None), &[d, two]).unwrap();
    let var = mean(&mut b, d2);
    let eps = scalar(&mut b, "eps", 1e-5);
    let ve = b.op(add.clone(), &[var, eps]).unwrap();
    let sd = b.op(Op::Unary(UnaryOp::Sqrt), &[ve]).unwrap();
    let n = b.op(Op::Binary(BinaryOp::Div, None), &[d, sd]).unwrap();
    let g2 = b.constant("ln2_g", weights(&[c], 66, 1.5));
    let n = b.op(mul.clone(), &[n, g2]).unwrap();
    let b2 = b.constant("ln2_b", weights(&[c], 67, 0.5));
    let n = b.op(add.clone(), &[n, b2]).unwrap();
    // MLP with the erf GELU.
    let f = proj(&mut b, n, "w1", 68, 2 * c, c);
    let r2 = scalar(&mut b, "sqrt2", std::f32::consts::SQRT_2);
    let u = b.op(Op::Binary(BinaryOp::Div, None), &[f, r2]).unwrap();
    let e = b.op(Op::Unary(UnaryOp::Erf), &[u]).unwrap();
    let one = scalar(&mut b, "one", 1.0);
    let e1 = b.op(add.clone(), &[e, one]).unwrap();
    let fe = b.op(mul.clone(), &[f, e1]).unwrap();
    let half = scalar(&mut b, "half", 0.5);
    let gelu = b.op(mul, &[fe, half]).unwrap();
    let f2 = proj(&mut b, gelu, "w2", 69, c, 2 * c);
    let y = b.op(add, &[f2, r]).unwrap();
    b.output(y);
    b.finish().unwrap()
}

/// Convolution features normalized as torchvision's GroupNorm exports (Reshape, InstanceNormalization,
/// Reshape, per-channel scale and shift), then an InstanceNorm with its own γ/β and a Neg (TF's LayerNorm
/// decomposition writes one).
fn norm_net() -> Graph {
    let mut b = GraphBuilder::new("norm_net");
    let x = b.input("x", DType::F32, &[1, 3, 6, 6]);
    let w = b.constant("w", weights(&[8, 3, 3, 3], 70, 0.6));
    let y = b.op(conv(3, 1, 1, None), &[x, w]).unwrap();
    let r = b.reshape(y, &[1, 2, -1]).unwrap();
    let ones = b.constant("ones", Tensor::from_f32(vec![2], vec![1.0; 2]));
    let zeros = b.constant("zeros", Tensor::from_f32(vec![2], vec![0.0; 2]));
    let i = b.op(Op::InstanceNorm { epsilon: 1e-5 }, &[r, ones, zeros]).unwrap();
    let i = b.reshape(i, &[1, 8, 6, 6]).unwrap();
    let gs = b.constant("gn_g", weights(&[8, 1, 1], 71, 1.5));
    let i = b.op(Op::Binary(BinaryOp::Mul, None), &[i, gs]).unwrap();
    let gb = b.constant("gn_b", weights(&[8, 1, 1], 72, 0.5));
    let i = b.op(Op::Binary(BinaryOp::Add, Some(Activation::Relu)), &[i, gb]).unwrap();
    let g2 = b.constant("in_g", weights(&[8], 73, 1.5));
    let b2 = b.constant("in_b", weights(&[8], 74, 0.5));
    let n = b.op(Op::InstanceNorm { epsilon: 1e-3 }, &[i, g2, b2]).unwrap();
    let n = b.op(Op::Unary(UnaryOp::Neg), &[n]).unwrap();
    b.output(n);
    b.finish().unwrap()
}

/// Issue 13 item 4: LayerNorm, GroupNorm/InstanceNorm, erf-GELU, Pow/Sqrt/Div, Neg and attention's
/// activation-by-activation matmuls quantize to TFLite ops with int8 kernels (MEAN, SUB, MUL, RSQRT, ADD,
/// GELU, BATCH_MATMUL, SOFTMAX), LiteRT runs the file, and our int8 runtime computes exactly what it computes.
#[test]
fn transformer_and_normalization_blocks_quantize_to_int8_ops_and_match_litert() {
    for (g, lo, hi, min_sqnr) in [(transformer_block(), -2.0, 2.0, 20.0), (norm_net(), -1.0, 1.0, 20.0)] {
        let mut p = g.clone();
        tpu_sdk_core::quant::prepare(&mut p);
        let eval = f32_samples(&input_shapes(&p), 3, 44, lo, hi);
        for float_io in [false, true] {
            let q = quantized(&p, lo, hi, float_io);
            let ex = export(&q, &ExportOptions::default()).unwrap_or_else(|e| panic!("{}: export refused: {e}", g.name));
            let ops = ops_of(&ex.bytes);
            for gone in ["POW", "DIV", "SQRT", "NEG"] {
                assert!(!ops.iter().any(|o| o == gone), "{}: {gone} left in {ops:?}", g.name);
            }
            let want: &[&str] = if g.name == "transformer_block" { &["MEAN", "RSQRT", "GELU", "BATCH_MATMUL", "SOFTMAX"] } else { &["MEAN", "RSQRT"] };
            for w in want {
                assert!(ops.iter().any(|o| o == w), "{}: no {w} in {ops:?}", g.name);
            }
            // RSQRT maps only on a recent Edge TPU runtime; GELU and BATCH_MATMUL stay on the CPU.
            let report = analyze_bytes(&ex.bytes, &RulesOptions::default()).unwrap();
            let rsqrt = report.ops.iter().find(|o| o.op == "RSQRT").unwrap();
            assert_eq!(rsqrt.placement, Placement::Cpu, "{}", report.to_text());
            let label = format!("{} float_io={float_io}", g.name);
            let ours = ours_equal_litert(&label, &q, &ex, &eval);
            if !ours.is_empty() {
                let s = sqnr(&p, &q, &eval, &ours, 0);
                eprintln!("{label}: SQNR {s:.1} dB");
                assert!(s > min_sqnr, "{label}: SQNR {s:.1} dB");
            }
        }
    }
}

/// Issue 13's report: a float TFLite MobileNetV2 (Keras, weights=None, seeded, converted by TensorFlow) whose
/// depthwise channels are dead quantized "successfully", but LiteRT refused the file
/// (`no_integer_overflow_from_quantization ... DEPTHWISE_CONV_2D failed to prepare`). Compiled for the Edge TPU
/// as `tpu-sdk compile --target edgetpu --calibration` does, the file now loads in LiteRT, runs, and our int8
/// runtime (reading the file back) computes exactly what LiteRT computes.
#[test]
fn a_keras_mobilenet_v2_with_dead_depthwise_channels_compiles_to_a_file_litert_loads() {
    let Some(tf_py) = oracle::tf_python("the Keras MobileNetV2 case") else { return };
    let dir = tempfile::tempdir().unwrap();
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/make_dead_channel_mobilenet.py");
    let out = Command::new(&tf_py).arg(script).arg(dir.path()).output().unwrap();
    assert!(out.status.success(), "make_dead_channel_mobilenet.py failed: {}", String::from_utf8_lossy(&out.stderr));
    let mut g = tflite::load(dir.path().join("mnv2_dead.tflite"), &tflite::ImportOptions::default()).unwrap();
    passes::optimize(&mut g).unwrap();
    let all = npy::read(&dir.path().join("samples.npy")).unwrap();
    let per: usize = all.shape[1..].iter().product();
    let v = all.as_f32().unwrap();
    let samples: Vec<Vec<Tensor>> = (0..all.shape[0]).map(|i| vec![Tensor::from_f32(all.shape[1..].to_vec(), v[i * per..(i + 1) * per].to_vec())]).collect();
    let output = dir.path().join("mnv2_int8.tflite");
    let opts = CompileOptions { output: output.clone(), target: EdgeTpuOptions { calibration: samples.clone(), ..Default::default() }.into(), ..Default::default() };
    let res = EdgeTpuTarget::default().compile(g, &opts).unwrap_or_else(|e| panic!("compile refused: {e}"));
    eprintln!("{}", res.summary.lines().find(|l| l.contains("SQNR")).unwrap_or(""));
    let bytes = std::fs::read(&output).unwrap();
    let Some(py) = oracle::python() else { return };
    let q = tflite::load_bytes(&bytes, &tflite::ImportOptions::default()).unwrap();
    let feeds: Vec<Vec<Tensor>> = samples[..3].iter().map(|s| vec![to_graph_input(&s[0], &q, q.inputs[0]).unwrap()]).collect();
    let want = litert::run_bytes(&py, &bytes, litert::OPTIMIZED, &feeds).unwrap_or_else(|e| panic!("LiteRT refuses the int8 MobileNetV2: {e}"));
    let mut s = Session::new(q).unwrap();
    for (x, w) in feeds.iter().zip(&want) {
        let got = s.run(x).unwrap();
        assert_eq!(differing(&got[0], &w[0]), 0, "ours {:?} LiteRT {:?}", got[0].to_f64_vec(), w[0].to_f64_vec());
    }
    eprintln!("Keras MobileNetV2 with dead depthwise channels: LiteRT loads the int8 file; our int8 runtime equals LiteRT on 3 samples");
}
