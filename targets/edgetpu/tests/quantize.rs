//! Post-training int8 quantization + int8 TFLite export, checked against LiteRT (the reference TFLite
//! runtime, `ai-edge-litert`, from the Python named by `TPU_SDK_PYTHON`): LiteRT loads and runs our int8
//! files, its outputs stay close to the float model's (SQNR on held-out inputs), per-axis quantization is
//! where TFLite expects it, and the Edge TPU rules analyzer maps CNNs fully to the TPU.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use tpu_sdk_core::format::tflite::schema;
use tpu_sdk_core::import::{onnx, tflite};
use tpu_sdk_core::ir::builder::GraphBuilder;
use tpu_sdk_core::ir::{
    Activation, AutoPad, BinaryOp, ConvAttrs, CoordTransform, DType, Graph, NearestMode, Op, PoolAttrs, ResizeAttrs, ResizeMode, Tensor, UnaryOp,
};
use tpu_sdk_core::quant::compare::{dequantized, to_graph_input};
use tpu_sdk_core::quant::params::sqnr_db;
use tpu_sdk_core::quant::{calibrate, quantize, QuantizeOptions, RangeMethod};
use tpu_sdk_core::runtime::Session;
use tpu_sdk_core::target::Progress;
use tpu_sdk_core::{npy, passes};
use tpu_sdk_edgetpu::export::{export, ExportOptions, Exported};
use tpu_sdk_edgetpu::rules::{analyze_bytes, RulesOptions};
use tpu_sdk_test_support::{differing, f32_samples, litert, oracle};

fn manifest() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Runs `model` in LiteRT's reference kernels on several input sets; `None` when no oracle Python is configured.
fn litert(model: &[u8], inputs: &[Vec<Tensor>]) -> Option<Vec<Vec<Tensor>>> {
    litert::run(model, litert::REFERENCE, inputs)
}

/// Calibration and evaluation samples for the inputs of `g`: (count, seed) of each, values in [lo, hi).
fn samples_for(g: &Graph, cal: (usize, u64), eval: (usize, u64), lo: f32, hi: f32) -> (Vec<Vec<Tensor>>, Vec<Vec<Tensor>>) {
    let shapes = input_shapes(g);
    (f32_samples(&shapes, cal.0, cal.1, lo, hi), f32_samples(&shapes, eval.0, eval.1, lo, hi))
}

fn input_shapes(g: &Graph) -> Vec<Vec<usize>> {
    g.inputs.iter().map(|&i| g.value(i).shape.clone()).collect()
}

fn quantize_export(g: &Graph, cal: &[Vec<Tensor>], method: RangeMethod, float_io: bool) -> (Graph, Exported) {
    let c = calibrate(g, cal, method, &Progress::default()).unwrap();
    let q = quantize(g, &c, &QuantizeOptions { method, float_io }).unwrap();
    let ex = export(&q, &ExportOptions::default()).unwrap();
    (q, ex)
}

/// SQNR (dB) per output of the exported int8 model run by LiteRT against the float graph on `eval`.
/// `None` without the oracle.
fn litert_sqnr(g: &Graph, q: &Graph, ex: &Exported, eval: &[Vec<Tensor>]) -> Option<Vec<f64>> {
    let feeds: Vec<Vec<Tensor>> = eval
        .iter()
        .map(|s| s.iter().enumerate().map(|(k, t)| to_graph_input(t, q, q.inputs[k]).unwrap().permuted(&ex.inputs[k].perm)).collect())
        .collect();
    let got = litert(&ex.bytes, &feeds)?;
    let mut fs = Session::new(g.clone()).unwrap();
    let no = g.outputs.len();
    let (mut want, mut have) = (vec![Vec::new(); no], vec![Vec::new(); no]);
    for (s, outs) in eval.iter().zip(&got) {
        let f = fs.run(s).unwrap();
        assert_eq!(outs.len(), no);
        for j in 0..no {
            assert_eq!(outs[j].shape, f[j].shape, "output {j} shape");
            want[j].extend(f[j].to_f64_vec());
            have[j].extend(dequantized(&outs[j], q.value(q.outputs[j]).quant.as_ref()));
        }
    }
    Some((0..no).map(|j| sqnr_db(&want[j], &have[j])).collect())
}

/// (op name, quantized_dimension, number of scales) of every op's filter input (input 1) in a TFLite file.
fn filters(bytes: &[u8]) -> Vec<(String, i32, usize, i8)> {
    let m = schema::parse_model(bytes).unwrap();
    let codes = m.operator_codes().unwrap();
    let sg = m.subgraphs().unwrap().get(0);
    let tensors = sg.tensors().unwrap();
    let mut out = Vec::new();
    for o in sg.operators().unwrap().iter() {
        let name = codes.get(o.opcode_index() as usize).name();
        if matches!(name.as_str(), "CONV_2D" | "DEPTHWISE_CONV_2D" | "FULLY_CONNECTED") {
            let t = tensors.get(o.inputs().unwrap().get(1) as usize);
            let q = t.quantization().expect("filter is quantized");
            out.push((name, q.quantized_dimension(), q.scale().map(|s| s.len()).unwrap_or(0), t.type_()));
        }
    }
    out
}

/// The TF-made float CNN fixture, optimised.
fn convnet() -> Graph {
    let mut g = tflite::load(manifest().join("tests/data/convnet_f32.tflite"), &tflite::ImportOptions::default()).unwrap();
    passes::optimize(&mut g).unwrap();
    g
}

/// The shipped text-direction classifier (x = 1,3,48,192), optimised and prepared for quantization.
fn text_direction_classifier() -> Graph {
    let opts = onnx::ImportOptions { input_shapes: [("x".to_string(), vec![1, 3, 48, 192])].into_iter().collect(), ..Default::default() };
    let mut g = onnx::load(&manifest().join("../../examples/models/text_direction_cls.onnx"), &opts).unwrap();
    passes::optimize(&mut g).unwrap();
    tpu_sdk_core::quant::prepare(&mut g);
    g
}

fn mobilenet(dir: &Path) -> Option<Graph> {
    let py = oracle::python()?;
    let st = Command::new(py).arg(manifest().join("../../scripts/make_test_models.py")).arg(dir).output().unwrap();
    assert!(st.status.success(), "make_test_models.py failed: {}", String::from_utf8_lossy(&st.stderr));
    let mut g = onnx::load(&dir.join("mobilenet_v2.onnx"), &onnx::ImportOptions::default()).unwrap();
    passes::optimize(&mut g).unwrap();
    Some(g)
}

#[test]
fn mobilenet_v2_int8_runs_in_litert_close_to_float_and_maps_to_the_tpu() {
    let dir = tempfile::tempdir().unwrap();
    let Some(g) = mobilenet(dir.path()) else { return };
    let (cal, eval) = samples_for(&g, (16, 1), (4, 2), -1.0, 1.0);
    let (q, ex) = quantize_export(&g, &cal, RangeMethod::MinMax, false);
    // Per-axis filters, one scale per output channel: CONV_2D OHWI axis 0, DEPTHWISE_CONV_2D 1HWC axis 3,
    // FULLY_CONNECTED [O, I] axis 0 (what TF's converter writes for dense layers).
    let f = filters(&ex.bytes);
    assert!(f.iter().any(|x| x.0 == "DEPTHWISE_CONV_2D"));
    for (op, dim, n, ty) in &f {
        assert_eq!(*ty, schema::tensor_type::INT8, "{op} filter type");
        match op.as_str() {
            "CONV_2D" => assert!(*dim == 0 && *n > 1, "{op}: dim {dim}, {n} scales"),
            "DEPTHWISE_CONV_2D" => assert!(*dim == 3 && *n > 1, "{op}: dim {dim}, {n} scales"),
            "FULLY_CONNECTED" => assert!(*dim == 0 && *n > 1, "{op}: dim {dim}, {n} scales"),
            _ => unreachable!("filters() lists only these ops"),
        }
    }
    let report = analyze_bytes(&ex.bytes, &RulesOptions::default()).unwrap();
    assert!(report.all_on_tpu(), "not all ops map to the Edge TPU:\n{}", report.to_text());
    let Some(sq) = litert_sqnr(&g, &q, &ex, &eval) else { return };
    eprintln!("mobilenet_v2 int8 (LiteRT) vs float: SQNR {sq:?} dB");
    assert!(sq[0] > 15.0, "SQNR {} dB", sq[0]);
}

#[test]
fn tflite_fixture_int8_and_float_io_run_in_litert() {
    let g = convnet();
    let (cal, eval) = samples_for(&g, (32, 3), (4, 4), 0.0, 1.0);
    for float_io in [false, true] {
        let (q, ex) = quantize_export(&g, &cal, RangeMethod::MinMax, float_io);
        let m = schema::parse_model(&ex.bytes).unwrap();
        let sg = m.subgraphs().unwrap().get(0);
        let t_in = sg.tensors().unwrap().get(sg.inputs().unwrap().get(0) as usize);
        let want = if float_io { schema::tensor_type::FLOAT32 } else { schema::tensor_type::INT8 };
        assert_eq!(t_in.type_(), want, "input type with float_io={float_io}");
        let Some(sq) = litert_sqnr(&g, &q, &ex, &eval) else { return };
        eprintln!("convnet_f32 int8 (float_io={float_io}) vs float: SQNR {sq:?} dB");
        for s in sq {
            assert!(s > 30.0, "SQNR {s} dB");
        }
    }
}

#[test]
fn calibration_methods_all_produce_working_models() {
    let g = convnet();
    let (cal, eval) = samples_for(&g, (16, 5), (3, 6), 0.0, 1.0);
    let mut results = HashMap::new();
    for m in ["minmax", "percentile:99.99", "mse"] {
        let method = RangeMethod::parse(m).unwrap();
        let (q, ex) = quantize_export(&g, &cal, method, false);
        let Some(sq) = litert_sqnr(&g, &q, &ex, &eval) else { return };
        results.insert(m, sq[0]);
    }
    eprintln!("SQNR by method: {results:?}");
    for (m, s) in &results {
        assert!(*s > 15.0, "{m}: SQNR {s} dB");
    }
}

#[test]
fn text_direction_classifier_int8_runs_in_litert_close_to_float_and_maps_to_the_tpu() {
    // A trained MobileNetV3-style network (hard-swish written with Div, HardSigmoid squeeze-excite blocks:
    // the quantizer's float rewrites make it fully int8).
    let g = text_direction_classifier();
    let (cal, eval) = samples_for(&g, (8, 7), (3, 8), -1.0, 1.0);
    let (q, ex) = quantize_export(&g, &cal, RangeMethod::MinMax, false);
    let report = analyze_bytes(&ex.bytes, &RulesOptions::default()).unwrap();
    assert!(report.all_on_tpu(), "not all ops map to the Edge TPU:\n{}", report.to_text());
    let Some(sq) = litert_sqnr(&g, &q, &ex, &eval) else { return };
    eprintln!("text_direction_cls int8 (LiteRT) vs float: SQNR {sq:?} dB");
    assert!(sq[0] > 20.0, "SQNR {} dB", sq[0]);
}

/// The inputs of the exported model for float samples: quantized with the int8 inputs' parameters (float
/// inputs stay float) and permuted to the file's layout (NHWC for image inputs).
fn file_feeds(q: &Graph, ex: &Exported, eval: &[Vec<Tensor>]) -> Vec<Vec<Tensor>> {
    eval.iter().map(|s| s.iter().enumerate().map(|(k, t)| to_graph_input(t, q, q.inputs[k]).unwrap().permuted(&ex.inputs[k].perm)).collect()).collect()
}

/// Runs the exported int8 model in our CPU runtime (the file imported back with the TFLite importer, as given
/// and after the optimisation passes) and in LiteRT's optimized kernels on the same inputs. Returns (values
/// compared, differing values), both over the two runs; `None` without the oracle.
fn ours_vs_litert(name: &str, ex: &Exported, feeds: &[Vec<Tensor>]) -> Option<(usize, usize)> {
    let want = litert::run(&ex.bytes, litert::OPTIMIZED, feeds)?;
    let (mut total, mut diff) = (0, 0);
    for optimize in [false, true] {
        let mut g = tflite::load_bytes(&ex.bytes, &tflite::ImportOptions::default()).unwrap_or_else(|e| panic!("{name}: import of the exported model: {e}"));
        if optimize {
            passes::optimize(&mut g).unwrap();
        }
        let mut s = Session::new(g).unwrap_or_else(|e| panic!("{name}: our runtime cannot run the exported model: {e}"));
        for (i, (f, w)) in feeds.iter().zip(&want).enumerate() {
            let got = s.run(f).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(got.len(), w.len(), "{name}: number of outputs");
            for (k, (o, w)) in got.iter().zip(w).enumerate() {
                let d = differing(o, w);
                if d > 0 {
                    let (a, b) = (o.to_f64_vec(), w.to_f64_vec());
                    let first: Vec<String> = (0..a.len()).filter(|&j| a[j].to_bits() != b[j].to_bits()).take(6).map(|j| format!("[{j}] ours {} litert {}", a[j], b[j])).collect();
                    eprintln!("{name} (optimize={optimize}) sample {i} output {k}: {d} of {} values differ: {}", o.len(), first.join(", "));
                }
                total += o.len();
                diff += d;
            }
        }
    }
    eprintln!("{name}: our int8 runtime vs LiteRT (optimized kernels) on the exported model: {diff} of {total} values differ");
    if diff > 0 {
        eprintln!("{name}: first op that differs: {}", first_divergence(ex, &feeds[0]).unwrap_or_default());
    }
    Some((total, diff))
}

/// Where our runtime and LiteRT part ways on one input set: runs the exported model in LiteRT keeping every
/// tensor, and in our runtime with every value the file names as an output, then names the first op (in
/// LiteRT's execution order) whose output differs.
fn first_divergence(ex: &Exported, feed: &[Tensor]) -> Option<String> {
    let py = oracle::python()?;
    let dir = tempfile::tempdir().unwrap();
    let mp = dir.path().join("model.tflite");
    std::fs::write(&mp, &ex.bytes).unwrap();
    let mut cmd = Command::new(&py);
    cmd.arg(manifest().join("tests/dump_litert_tensors.py")).arg(&mp).arg(dir.path());
    for (k, x) in feed.iter().enumerate() {
        let p = dir.path().join(format!("in{k}.npy"));
        npy::write(&p, x).unwrap();
        cmd.arg(p);
    }
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "LiteRT failed: {}", String::from_utf8_lossy(&out.stderr));
    let mut g = tflite::load_bytes(&ex.bytes, &tflite::ImportOptions::default()).unwrap();
    let by_name: HashMap<String, usize> = g.values.iter().enumerate().filter(|(_, v)| v.constant.is_none()).map(|(i, v)| (v.name.clone(), i)).collect();
    let inputs = g.inputs.clone();
    let tapped: Vec<usize> = by_name.values().copied().filter(|i| !inputs.iter().any(|x| x.0 == *i)).collect();
    g.outputs = tapped.iter().map(|&i| tpu_sdk_core::ir::ValueId(i)).collect();
    let ours = Session::new(g).unwrap().run(feed).unwrap();
    let ours: HashMap<usize, &Tensor> = tapped.iter().copied().zip(ours.iter()).collect();
    for line in std::fs::read_to_string(dir.path().join("ops.txt")).unwrap().lines() {
        let (op, outs) = line.split_once('\t').unwrap();
        for o in outs.split(' ') {
            let (name, idx) = o.rsplit_once('=').unwrap();
            let (Some(v), Ok(want)) = (by_name.get(name), npy::read(&dir.path().join(format!("t{idx}.npy")))) else { continue };
            let Some(got) = ours.get(v) else { continue };
            if got.shape == want.shape && got.dtype() == want.dtype() && differing(got, &want) > 0 {
                let (a, b) = (got.to_f64_vec(), want.to_f64_vec());
                let j = (0..a.len()).find(|&j| a[j].to_bits() != b[j].to_bits()).unwrap();
                return Some(format!("{op} -> '{name}': {} of {} values differ (first at {j}: ours {} LiteRT {})", differing(got, &want), a.len(), a[j], b[j]));
            }
        }
    }
    Some("no single op's output differs".into())
}

fn conv(k: usize, stride: usize, pad: usize, group: usize, activation: Option<Activation>) -> Op {
    Op::Conv(ConvAttrs {
        kernel_shape: vec![k, k],
        strides: vec![stride, stride],
        dilations: vec![],
        pads: vec![pad; 4],
        auto_pad: AutoPad::NotSet,
        group,
        activation,
    })
}

fn pool(k: usize) -> PoolAttrs {
    PoolAttrs { kernel_shape: vec![k, k], strides: vec![k, k], dilations: vec![], pads: vec![0; 4], auto_pad: AutoPad::NotSet, ceil_mode: false, count_include_pad: false }
}

/// Deterministic weights in [-a, a).
fn weights(shape: &[usize], seed: u64, a: f32) -> Tensor {
    f32_samples(&[shape.to_vec()], 1, seed, -a, a).remove(0).remove(0)
}

/// A float CNN using every op class the quantizer handles: convolutions with fused ReLU/ReLU6, a depthwise
/// convolution, average and max pooling, logistic, tanh, hard-swish, leaky ReLU, add, mul, concatenation,
/// a 1×1 convolution, global average pooling, flatten, a fully-connected layer and softmax; two outputs
/// (the class scores and a 4-D feature map).
fn op_mix() -> Graph {
    let mut b = GraphBuilder::new("op_mix");
    let x = b.input("x", DType::F32, &[1, 3, 16, 16]);
    let w1 = b.constant("w1", weights(&[8, 3, 3, 3], 11, 0.5));
    let b1 = b.constant("b1", weights(&[8], 12, 0.2));
    let c1 = b.op(conv(3, 2, 1, 1, Some(Activation::Relu6)), &[x, w1, b1]).unwrap();
    let wd = b.constant("wd", weights(&[8, 1, 3, 3], 13, 0.8));
    let d1 = b.op(conv(3, 1, 1, 8, Some(Activation::Relu)), &[c1, wd]).unwrap();
    let a = b.node(Op::AveragePool(pool(2)), &[Some(d1)], 1).unwrap()[0];
    let m = b.node(Op::MaxPool(pool(2)), &[Some(c1)], 1).unwrap()[0];
    let s = b.op(Op::Unary(UnaryOp::Sigmoid), &[a]).unwrap();
    let t = b.op(Op::Unary(UnaryOp::Tanh), &[m]).unwrap();
    let add = b.op(Op::Binary(BinaryOp::Add, None), &[s, t]).unwrap();
    let mul = b.op(Op::Binary(BinaryOp::Mul, None), &[add, m]).unwrap();
    let hs = b.op(Op::Unary(UnaryOp::HardSwish), &[mul]).unwrap();
    let lr = b.op(Op::Unary(UnaryOp::LeakyRelu { alpha: 0.1 }), &[a]).unwrap();
    let cat = b.op(Op::Concat { axis: 1 }, &[hs, lr]).unwrap();
    let w2 = b.constant("w2", weights(&[8, 16, 1, 1], 14, 0.4));
    let b2 = b.constant("b2", weights(&[8], 15, 0.1));
    let c2 = b.op(conv(1, 1, 0, 1, None), &[cat, w2, b2]).unwrap();
    let gap = b.op(Op::GlobalAveragePool, &[c2]).unwrap();
    let fl = b.op(Op::Flatten { axis: 1 }, &[gap]).unwrap();
    let wf = b.constant("wf", weights(&[5, 8], 16, 0.6));
    let bf = b.constant("bf", weights(&[5], 17, 0.1));
    let fc = b.op(Op::Gemm { alpha: 1.0, beta: 1.0, trans_a: false, trans_b: true, activation: None }, &[fl, wf, bf]).unwrap();
    let sm = b.softmax(fc).unwrap();
    b.output(sm);
    b.output(c2);
    b.finish().unwrap()
}

/// A ResNet stem: 7×7/2 convolution with ReLU, then a 3×3/2 max pool with pads 1 on every side, which TFLite's
/// SAME padding (pads 0 before, 1 after) cannot express: it exports as PAD + a VALID MAX_POOL_2D.
fn resnet_stem() -> Graph {
    let mut b = GraphBuilder::new("resnet_stem");
    let x = b.input("x", DType::F32, &[1, 3, 16, 16]);
    let w = b.constant("w", weights(&[8, 3, 7, 7], 41, 0.3));
    let c = b.op(conv(7, 2, 3, 1, Some(Activation::Relu)), &[x, w]).unwrap();
    let p = PoolAttrs { kernel_shape: vec![3, 3], strides: vec![2, 2], dilations: vec![], pads: vec![1; 4], auto_pad: AutoPad::NotSet, ceil_mode: false, count_include_pad: false };
    let m = b.node(Op::MaxPool(p), &[Some(c)], 1).unwrap()[0];
    let w2 = b.constant("w2", weights(&[4, 8, 1, 1], 42, 0.5));
    let y = b.op(conv(1, 1, 0, 1, None), &[m, w2]).unwrap();
    b.output(y);
    b.finish().unwrap()
}

/// PRelu (BlazeFace-style landmark and palm models): a per-channel slope after a convolution (TFLite PRELU
/// broadcasts it over NHWC) and a scalar slope, each with negative and positive inputs.
fn prelu_mix() -> Graph {
    let mut b = GraphBuilder::new("prelu_mix");
    let x = b.input("x", DType::F32, &[1, 3, 8, 8]);
    let w1 = b.constant("w1", weights(&[6, 3, 3, 3], 31, 0.6));
    let b1 = b.constant("b1", weights(&[6], 32, 0.3));
    let c1 = b.op(conv(3, 1, 1, 1, None), &[x, w1, b1]).unwrap();
    let slope = b.constant("slope", weights(&[6, 1, 1], 33, 0.5));
    let p1 = b.op(Op::Binary(BinaryOp::PRelu, None), &[c1, slope]).unwrap();
    let w2 = b.constant("w2", weights(&[4, 6, 1, 1], 34, 0.5));
    let c2 = b.op(conv(1, 1, 0, 1, None), &[p1, w2]).unwrap();
    let s2 = b.constant("slope2", Tensor::from_f32(vec![1], vec![0.25]));
    let p2 = b.op(Op::Binary(BinaryOp::PRelu, None), &[c2, s2]).unwrap();
    b.output(p2);
    b.finish().unwrap()
}

/// A float CNN whose feature map is resized: bilinear with half-pixel centres (×2 up), bilinear with aligned
/// corners and nearest (floor, asymmetric) to non-integer sizes; the three are outputs.
fn resize_mix() -> Graph {
    let mut b = GraphBuilder::new("resize_mix");
    let x = b.input("x", DType::F32, &[1, 3, 6, 7]);
    let w = b.constant("w", weights(&[5, 3, 3, 3], 31, 0.5));
    let bias = b.constant("b", weights(&[5], 32, 0.2));
    let c = b.op(conv(3, 1, 1, 1, None), &[x, w, bias]).unwrap();
    let resize = |mode, coord, nearest| {
        Op::Resize(ResizeAttrs { mode, coord, nearest, cubic_coeff_a: -0.75, exclude_outside: false, extrapolation_value: 0.0 })
    };
    for (i, (op, size)) in [
        (resize(ResizeMode::Linear, CoordTransform::HalfPixel, NearestMode::Floor), [12, 14]),
        (resize(ResizeMode::Linear, CoordTransform::AlignCorners, NearestMode::Floor), [9, 5]),
        (resize(ResizeMode::Nearest, CoordTransform::Asymmetric, NearestMode::Floor), [11, 10]),
    ]
    .into_iter()
    .enumerate()
    {
        let sizes = b.constant(&format!("sizes{i}"), Tensor::from_i64(vec![4], vec![1, 5, size[0], size[1]]));
        let y = b.node(op, &[Some(c), None, None, Some(sizes)], 1).unwrap()[0];
        b.output(y);
    }
    b.finish().unwrap()
}

/// Models on which the int8 CPU runtime's kernels (core/src/runtime/kernels/int8, not this crate) are known
/// to part from LiteRT's optimized kernels, with the first op that differs (as of 2026-12-03). The test prints their
/// differing-value counts and the op, and fails on every other model; an entry that became exact is
/// reported so that it can be removed.
const KNOWN_KERNEL_GAPS: &[(&str, &str)] = &[];

/// The heart of the int8 contract: our runtime, reading back the file we export, computes exactly what
/// LiteRT computes on it (zero differing values), for int8 and float I/O.
#[test]
fn our_int8_runtime_matches_litert_exactly_on_exported_models() {
    let mut models: Vec<(String, Graph, f32, f32)> =
        vec![("op_mix".into(), op_mix(), -1.0, 1.0), ("resize_mix".into(), resize_mix(), -1.0, 1.0), ("prelu_mix".into(), prelu_mix(), -1.0, 1.0)];
    models.push(("resnet_stem".into(), resnet_stem(), -1.0, 1.0));
    let g = convnet();
    models.push(("convnet_f32".into(), g, 0.0, 1.0));
    let g = text_direction_classifier();
    models.push(("text_direction_cls".into(), g, -1.0, 1.0));
    let dir = tempfile::tempdir().unwrap();
    if let Some(g) = mobilenet(dir.path()) {
        models.push(("mobilenet_v2".into(), g, -1.0, 1.0));
    }
    let mut failures = Vec::new();
    for (name, g, lo, hi) in &models {
        let shapes = input_shapes(g);
        let cal = f32_samples(&shapes, 8, 21, *lo, *hi);
        // Held-out inputs, some beyond the calibrated range (saturation paths).
        let eval = f32_samples(&shapes, 3, 22, *lo * 1.2, *hi * 1.2);
        for float_io in [false, true] {
            let (q, ex) = quantize_export(g, &cal, RangeMethod::MinMax, float_io);
            let label = format!("{name} float_io={float_io}");
            let Some((n, d)) = ours_vs_litert(&label, &ex, &file_feeds(&q, &ex, &eval)) else { return };
            match KNOWN_KERNEL_GAPS.iter().find(|(m, _)| *m == label) {
                Some((_, why)) if d > 0 => eprintln!("KNOWN GAP {label}: {d} of {n} values differ; int8 kernel issue: {why}"),
                Some(_) => eprintln!("{label} is now exact: remove it from KNOWN_KERNEL_GAPS"),
                None if d > 0 => failures.push(format!("{label}: {d} of {n} values differ")),
                None => {}
            }
        }
    }
    assert!(failures.is_empty(), "our int8 runtime disagrees with LiteRT:\n{}", failures.join("\n"));
}

/// MediaPipe's float face detector (BlazeFace, from the mediapipe wheel; its residual blocks pad channels
/// with PAD after ReLU, where the int8 zero point is -128): our int8 runtime equals LiteRT on the int8 file,
/// and the compile report's error (measured on the int8 graph before export) agrees with the error of the
/// file LiteRT runs. The report said -16.9 dB for the classificators while LiteRT's run of the file gave
/// +11.5 dB: the int8 graph padded with the integer 0 instead of the data's zero point.
///
/// The file itself is still only ~10 dB from the float model on the classificators (uniform-noise inputs):
/// the per-layer SQNR falls from 36 dB after the first convolution to ~20 dB at the end of the backbone and
/// to 7 dB at the last classificator convolution, whose [-46, 0] logits share the concatenated output's
/// scale. The bound below guards against regressions; issue 13 item 5 (accuracy) is about raising it.
#[test]
fn mediapipe_face_detector_int8_matches_litert_and_the_report_tells_its_error() {
    let Some(dir) = std::env::var_os("TPU_SDK_MEDIAPIPE_MODELS").filter(|v| !v.is_empty()).map(PathBuf::from) else {
        return oracle::skip("TPU_SDK_MEDIAPIPE_MODELS is not set (scripts/test.sh fetches the MediaPipe models)");
    };
    let path = dir.join("mediapipe/modules/face_detection/face_detection_short_range.tflite");
    let mut g = tflite::load(&path, &tflite::ImportOptions::default()).unwrap();
    passes::optimize(&mut g).unwrap();
    tpu_sdk_core::quant::prepare(&mut g);
    let (cal, eval) = samples_for(&g, (8, 21), (4, 22), -1.0, 1.0);
    let (q, ex) = quantize_export(&g, &cal, RangeMethod::MinMax, false);
    let Some(file) = litert_sqnr(&g, &q, &ex, &eval) else { return };
    let report = tpu_sdk_core::quant::compare::compare(&g, &q, &eval, &Progress::default()).unwrap();
    for (k, (o, &f)) in report.outputs.iter().zip(&file).enumerate() {
        eprintln!("face detection output {k} '{}': report {:.1} dB, LiteRT on the file {f:.1} dB", o.name, o.sqnr_db);
        assert!(f > 8.0, "output {k}: the int8 file is far from the float model ({f:.1} dB)");
        assert!((o.sqnr_db - f).abs() < 1.5, "output {k}: the report says {:.1} dB, the file's error is {f:.1} dB", o.sqnr_db);
    }
    let (n, d) = ours_vs_litert("face_detection_short_range", &ex, &file_feeds(&q, &ex, &eval[..2])).unwrap();
    assert_eq!(d, 0, "{d} of {n} values differ from LiteRT");
}

