//! ConvTranspose on the Edge TPU path: int8 quantization (weights per output channel), the TRANSPOSE_CONV
//! export, and the int8 CPU kernel, against LiteRT (`ai-edge-litert`, from the Python named by
//! `TPU_SDK_PYTHON`): LiteRT loads every file we write, our int8 runtime computes exactly what LiteRT's builtin
//! kernels compute on it (zero differing values), the int8 output stays close to the float model's, the float
//! export runs in LiteRT like our float runtime, and what TFLite cannot express is refused by name.

use std::path::Path;
use std::process::Command;

use tpu_sdk_core::format::tflite::schema;
use tpu_sdk_core::import::onnx;
use tpu_sdk_core::ir::builder::GraphBuilder;
use tpu_sdk_core::ir::{Activation, AutoPad, ConvAttrs, ConvTransposeAttrs, DType, Graph, Op, Tensor, UnaryOp};
use tpu_sdk_core::passes;
use tpu_sdk_core::quant::compare::{dequantized, to_graph_input};
use tpu_sdk_core::quant::{calibrate, quantize, QuantizeOptions, RangeMethod};
use tpu_sdk_core::runtime::Session;
use tpu_sdk_core::target::Progress;
use tpu_sdk_edgetpu::export::{export, ExportOptions, Exported};
use tpu_sdk_edgetpu::rules::{analyze_bytes, RulesOptions};
use tpu_sdk_test_support::{differing, f32_samples, litert, oracle};

/// One ConvTranspose layer to test.
struct Layer {
    name: &'static str,
    c_in: usize,
    c_out: usize,
    hw: [usize; 2],
    k: usize,
    pads: [usize; 4],
    output_padding: [usize; 2],
    bias: bool,
    act: Option<UnaryOp>,
}

fn attrs(k: usize, s: usize, pads: [usize; 4], output_padding: [usize; 2], group: usize, dil: usize) -> ConvTransposeAttrs {
    ConvTransposeAttrs {
        conv: ConvAttrs { kernel_shape: vec![k, k], strides: vec![s, s], dilations: vec![dil, dil], pads: pads.to_vec(), auto_pad: AutoPad::NotSet, group, activation: None },
        output_padding: output_padding.to_vec(),
        output_shape: vec![],
    }
}

fn weights(shape: &[usize], seed: u64, a: f32) -> Tensor {
    f32_samples(&[shape.to_vec()], 1, seed, -a, a).remove(0).remove(0)
}

/// x → ConvTranspose (stride 2) → activation, optimised (a ReLU fuses into the ConvTranspose).
fn layer_graph(l: &Layer) -> Graph {
    let mut b = GraphBuilder::new(l.name);
    let x = b.input("x", DType::F32, &[1, l.c_in, l.hw[0], l.hw[1]]);
    let w = b.constant("w", weights(&[l.c_in, l.c_out, l.k, l.k], 41 + l.k as u64, 0.6));
    let mut ins = vec![Some(x), Some(w)];
    if l.bias {
        ins.push(Some(b.constant("b", weights(&[l.c_out], 43, 0.3))));
    }
    let mut y = b.node(Op::ConvTranspose(attrs(l.k, 2, l.pads, l.output_padding, 1, 1)), &ins, 1).unwrap()[0];
    if let Some(u) = l.act {
        y = b.op(Op::Unary(u), &[y]).unwrap();
    }
    b.output(y);
    let mut g = b.finish().unwrap();
    passes::optimize(&mut g).unwrap();
    g
}

fn layers() -> Vec<Layer> {
    let l = |name, c_in, c_out, k, pads, output_padding, bias, act| Layer { name, c_in, c_out, hw: [7, 6], k, pads, output_padding, bias, act };
    vec![
        // k = s: VALID and SAME alike; 12 output channels: 8 in LiteRT's vector blocks, 4 in its scalar tail.
        l("k2_pads0_bias_relu", 5, 12, 2, [0; 4], [0, 0], true, Some(UnaryOp::Relu)),
        // No activation, 24 channels (3 vector blocks): negative accumulators show the blocks' rounding (here
        // LiteRT's reference kernel, which rounds them as the scalar tail, differs from its optimized one).
        l("k2_pads0_linear_24ch", 8, 24, 2, [0; 4], [0, 0], true, None),
        // TensorFlow's SAME for k=4, s=2 (PyTorch padding=1).
        l("k4_same_bias_relu", 6, 16, 4, [1; 4], [0, 0], true, Some(UnaryOp::Relu)),
        // TensorFlow's SAME for k=3, s=2: the extra pad at the end.
        l("k3_same_tf_nobias_relu6", 4, 6, 3, [0, 0, 1, 1], [0, 0], false, Some(UnaryOp::Clip { min: 0.0, max: 6.0 })),
        // VALID: the full output.
        l("k3_valid_bias", 3, 7, 3, [0; 4], [0, 0], true, None),
        // PyTorch's k=3, s=2, padding=1, output_padding=1: neither SAME nor VALID, exported as VALID + a crop.
        l("k3_torch_p1_op1_nobias_relu", 4, 9, 3, [1; 4], [1, 1], false, Some(UnaryOp::Relu)),
        // k=4, s=2 without padding, 2 output channels (all in the scalar tail).
        l("k4_valid_nobias", 3, 2, 4, [0; 4], [0, 0], false, None),
        // output_padding without pads: TFLite's VALID with the longer output (the last row and column get the
        // bias alone).
        l("k3_valid_op1_bias", 4, 5, 3, [0; 4], [1, 1], true, None),
    ]
}

/// Calibrates (8 samples in [-0.3, 1)), quantizes with int8 I/O and exports; also returns the calibration
/// samples and 3 held-out ones.
fn quantize_export(g: &Graph) -> (Graph, Exported, Vec<Vec<Tensor>>, Vec<Vec<Tensor>>) {
    let shapes: Vec<Vec<usize>> = g.inputs.iter().map(|&i| g.value(i).shape.clone()).collect();
    let cal = f32_samples(&shapes, 8, 51, -0.3, 1.0);
    let c = calibrate(g, &cal, RangeMethod::MinMax, &Progress::default()).unwrap();
    let q = quantize(g, &c, &QuantizeOptions { method: RangeMethod::MinMax, float_io: false }).unwrap();
    let ex = export(&q, &ExportOptions::default()).unwrap();
    let eval = f32_samples(&shapes, 3, 52, -0.3, 1.0);
    (q, ex, cal, eval)
}

/// The exported model's op names.
fn ops_of(bytes: &[u8]) -> Vec<String> {
    let m = schema::parse_model(bytes).unwrap();
    let codes = m.operator_codes().unwrap();
    m.subgraphs().unwrap().get(0).operators().unwrap().iter().map(|o| codes.get(o.opcode_index() as usize).name()).collect()
}

/// (type, quantized_dimension, number of scales) of every TRANSPOSE_CONV's weights (input 1).
fn transpose_conv_filters(bytes: &[u8]) -> Vec<(i8, i32, usize)> {
    let m = schema::parse_model(bytes).unwrap();
    let codes = m.operator_codes().unwrap();
    let sg = m.subgraphs().unwrap().get(0);
    let tensors = sg.tensors().unwrap();
    sg.operators()
        .unwrap()
        .iter()
        .filter(|o| codes.get(o.opcode_index() as usize).name() == "TRANSPOSE_CONV")
        .map(|o| {
            let t = tensors.get(o.inputs().unwrap().get(1) as usize);
            let q = t.quantization().expect("weights are quantized");
            (t.type_(), q.quantized_dimension(), q.scale().map(|s| s.len()).unwrap_or(0))
        })
        .collect()
}

/// What one int8 model gave against LiteRT and the float model.
struct Outcome {
    /// Values compared per resolver, and how many differ from ours: (optimized, reference).
    total: usize,
    optimized: usize,
    reference: usize,
    /// Relative L2 error of our int8 output (dequantized) against the float graph's.
    rel_l2: f64,
}

/// Runs the int8 graph `q` (and its export read back by our importer) in our runtime, the export in LiteRT's
/// optimized and reference kernels on `eval`, and the float graph `g`. `None` without the oracle.
fn compare(g: &Graph, q: &Graph, ex: &Exported, eval: &[Vec<Tensor>]) -> Option<Outcome> {
    let ours_in: Vec<Vec<Tensor>> = eval.iter().map(|s| s.iter().enumerate().map(|(k, t)| to_graph_input(t, q, q.inputs[k]).unwrap()).collect()).collect();
    let feeds: Vec<Vec<Tensor>> = ours_in.iter().map(|s| s.iter().enumerate().map(|(k, t)| t.permuted(&ex.inputs[k].perm)).collect()).collect();
    let opt = litert::run(&ex.bytes, litert::OPTIMIZED, &feeds)?;
    let reference = litert::run(&ex.bytes, litert::REFERENCE, &feeds)?;
    let (mut qs, mut fs) = (Session::new(q.clone()).unwrap(), Session::new(g.clone()).unwrap());
    let mut o = Outcome { total: 0, optimized: 0, reference: 0, rel_l2: 0.0 };
    let (mut noise, mut signal) = (0.0, 0.0);
    for ((x, f), (lo, lr)) in ours_in.iter().zip(eval).zip(opt.iter().zip(&reference)) {
        let ours = qs.run(x).unwrap();
        let want = fs.run(f).unwrap();
        for k in 0..ours.len() {
            o.total += ours[k].len();
            o.optimized += differing(&ours[k], &lo[k]);
            o.reference += differing(&ours[k], &lr[k]);
            let deq = dequantized(&ours[k], q.value(q.outputs[k]).quant.as_ref());
            for (a, b) in deq.iter().zip(want[k].to_f64_vec()) {
                noise += (a - b) * (a - b);
                signal += b * b;
            }
        }
    }
    o.rel_l2 = (noise / signal).sqrt();
    // The file read back by our TFLite importer runs like LiteRT's optimized kernels too.
    let mut back = Session::new(tpu_sdk_core::import::tflite::load_bytes(&ex.bytes, &Default::default()).expect("our importer reads the file")).unwrap();
    for (x, lo) in feeds.iter().zip(&opt) {
        for (k, got) in back.run(x).unwrap().iter().enumerate() {
            o.optimized += differing(got, &lo[k]);
        }
    }
    Some(o)
}

#[test]
fn int8_transpose_conv_matches_litert_exactly_and_stays_close_to_float() {
    let mut failures = Vec::new();
    for l in layers() {
        let g = layer_graph(&l);
        let (q, ex, _, eval) = quantize_export(&g);
        let ops = ops_of(&ex.bytes);
        assert_eq!(ops.iter().filter(|o| *o == "TRANSPOSE_CONV").count(), 1, "{}: {ops:?}", l.name);
        // The image input is NHWC in the file: no TRANSPOSE before the TRANSPOSE_CONV.
        assert_eq!((ex.inputs[0].perm.as_slice(), ops[0].as_str()), ([0, 2, 3, 1].as_slice(), "TRANSPOSE_CONV"), "{}", l.name);
        // Weights: int8, symmetric per output channel on OHWI's axis 0 (the TFLite int8 spec).
        assert_eq!(transpose_conv_filters(&ex.bytes), vec![(schema::tensor_type::INT8, 0, l.c_out)], "{}", l.name);
        // Every op maps to the Edge TPU once its compiler knows TRANSPOSE_CONV; an older one does not.
        let recent = analyze_bytes(&ex.bytes, &RulesOptions { assume_recent_runtime: true }).unwrap();
        assert!(recent.all_on_tpu(), "{}:\n{}", l.name, recent.to_text());
        assert!(!analyze_bytes(&ex.bytes, &RulesOptions::default()).unwrap().all_on_tpu());
        let Some(o) = compare(&g, &q, &ex, &eval) else { return };
        eprintln!(
            "{}: ops {ops:?}; ours vs LiteRT optimized: {} of {} values differ, vs reference: {}; int8 vs float relative L2 {:.4}",
            l.name, o.optimized, o.total, o.reference, o.rel_l2
        );
        if o.optimized != 0 {
            failures.push(format!("{}: {} of {} values differ from LiteRT's optimized kernels", l.name, o.optimized, o.total));
        }
        // The reference kernel rounds every channel as LiteRT's optimized one rounds its scalar tail.
        if l.c_out < 8 && o.reference != 0 {
            failures.push(format!("{}: {} of {} values differ from LiteRT's reference kernels", l.name, o.reference, o.total));
        }
        if o.rel_l2 > 0.05 {
            failures.push(format!("{}: int8 vs float relative L2 {:.4} > 0.05", l.name, o.rel_l2));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn float_transpose_conv_export_runs_in_litert_like_our_runtime() {
    for l in layers() {
        let g = layer_graph(&l);
        let ex = export(&g, &ExportOptions::default()).unwrap();
        let x = f32_samples(&[vec![1, l.c_in, l.hw[0], l.hw[1]]], 1, 61, -1.0, 1.0).remove(0);
        let want = Session::new(g.clone()).unwrap().run(&x).unwrap();
        let feed = vec![x[0].permuted(&ex.inputs[0].perm)];
        let Some(got) = litert::run(&ex.bytes, litert::OPTIMIZED, &[feed]) else { return };
        let (a, b) = (got[0][0].to_f64_vec(), want[0].to_f64_vec());
        assert_eq!(got[0][0].shape, want[0].shape, "{}", l.name);
        let e = a.iter().zip(&b).map(|(x, y)| (x - y).abs() / (1.0 + y.abs())).fold(0.0, f64::max);
        assert!(e < 1e-5, "{}: LiteRT differs from our float runtime by {e:e}", l.name);
    }
}

/// A quantization error for a float ConvTranspose graph with these attributes.
fn quantize_error(a: ConvTransposeAttrs, w_shape: &[usize]) -> String {
    let mut b = GraphBuilder::new("refused");
    let x = b.input("x", DType::F32, &[1, 4, 5, 5]);
    let w = b.constant("w", weights(w_shape, 3, 0.5));
    let y = b.node(Op::ConvTranspose(a), &[Some(x), Some(w)], 1).unwrap()[0];
    b.output(y);
    let g = b.finish().unwrap();
    let name = g.nodes[0].name.clone();
    let c = calibrate(&g, &f32_samples(&[vec![1, 4, 5, 5]], 2, 1, -1.0, 1.0), RangeMethod::MinMax, &Progress::default()).unwrap();
    let e = quantize(&g, &c, &QuantizeOptions::default()).unwrap_err().to_string();
    assert!(e.contains(&format!("'{name}'")) && e.contains("ConvTranspose"), "{e}");
    e
}

#[test]
fn what_transpose_conv_cannot_express_is_refused_with_the_node_and_what_to_do() {
    let e = quantize_error(attrs(3, 2, [1; 4], [0, 0], 2, 1), &[4, 3, 3, 3]);
    assert!(e.contains("group 2") && e.contains("--io-dtype float` does not help") && e.contains("--target cpu"), "{e}");
    let e = quantize_error(attrs(3, 2, [0; 4], [0, 0], 1, 2), &[4, 3, 3, 3]);
    assert!(e.contains("dilat") && e.contains("--target cpu"), "{e}");

    // Begin pads with an output_padding beyond the end pads: the output reaches past what the kernel covers
    // and starts inside it, which neither TFLite's padding nor a crop of its full output gives.
    let mut b = GraphBuilder::new("refused");
    let x = b.input("x", DType::F32, &[1, 4, 5, 5]);
    let w = b.constant("w", weights(&[4, 3, 3, 3], 3, 0.5));
    let y = b.node(Op::ConvTranspose(attrs(3, 2, [1, 1, 0, 0], [1, 1], 1, 1)), &[Some(x), Some(w)], 1).unwrap()[0];
    b.output(y);
    let g = b.finish().unwrap();
    let e = export(&g, &ExportOptions::default()).unwrap_err().to_string();
    assert!(e.contains(&format!("'{}'", g.nodes[0].name)) && e.contains("output_padding") && e.contains("--target cpu"), "{e}");
}

fn script(name: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests").join(name)
}

/// The U-Net-like decoder of `tests/make_unet_decoder.py` (written to `dir`), imported and optimised; `None`
/// without the Python.
fn unet_decoder(dir: &Path) -> Option<Graph> {
    let py = oracle::python()?;
    let path = dir.join("unet_decoder.onnx");
    let st = Command::new(py).arg(script("make_unet_decoder.py")).arg(&path).output().unwrap();
    assert!(st.status.success(), "make_unet_decoder.py failed: {}", String::from_utf8_lossy(&st.stderr));
    let mut g = onnx::load(&path, &onnx::ImportOptions::default()).unwrap();
    passes::optimize(&mut g).unwrap();
    Some(g)
}

/// Relative L2 error against the float graph `g` of onnxruntime's `quantize_static` (per channel) of the ONNX
/// model `model`, calibrated on `cal` and run on `eval`.
fn onnxruntime_int8_rel_l2(g: &Graph, model: &Path, cal: &[Vec<Tensor>], eval: &[Vec<Tensor>]) -> f64 {
    let dir = model.parent().unwrap();
    for (what, set) in [("cal", cal), ("eval", eval)] {
        for (i, s) in set.iter().enumerate() {
            tpu_sdk_core::npy::write(&dir.join(format!("{what}{i}.npy")), &s[0]).unwrap();
        }
    }
    let py = oracle::python().unwrap();
    let st = Command::new(py).arg(script("ort_quantize_static.py")).arg(model).arg(dir).arg(cal.len().to_string()).arg(eval.len().to_string()).output().unwrap();
    assert!(st.status.success(), "ort_quantize_static.py failed: {}", String::from_utf8_lossy(&st.stderr));
    let mut fs = Session::new(g.clone()).unwrap();
    let (mut noise, mut signal) = (0.0, 0.0);
    for (i, s) in eval.iter().enumerate() {
        let want = fs.run(s).unwrap().remove(0).to_f64_vec();
        let got = tpu_sdk_core::npy::read(&dir.join(format!("ort_int8_eval{i}.npy"))).unwrap().to_f64_vec();
        for (a, b) in got.iter().zip(&want) {
            noise += (a - b) * (a - b);
            signal += b * b;
        }
    }
    (noise / signal).sqrt()
}

#[test]
fn a_unet_decoder_quantizes_exports_and_matches_litert_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let Some(mut g) = unet_decoder(dir.path()) else { return };
    tpu_sdk_core::quant::prepare(&mut g);
    let convt: Vec<_> = g.nodes.iter().filter_map(|n| if let Op::ConvTranspose(a) = &n.op { Some(a.conv.activation) } else { None }).collect();
    assert_eq!(convt, vec![Some(Activation::Relu), None], "the first ReLU fuses");
    let (q, ex, cal, eval) = quantize_export(&g);
    let ops = ops_of(&ex.bytes);
    assert_eq!(ops.iter().filter(|o| *o == "TRANSPOSE_CONV").count(), 2, "{ops:?}");
    let recent = analyze_bytes(&ex.bytes, &RulesOptions { assume_recent_runtime: true }).unwrap();
    assert!(recent.all_on_tpu(), "{}", recent.to_text());
    let Some(o) = compare(&g, &q, &ex, &eval) else { return };
    let peer = onnxruntime_int8_rel_l2(&g, &dir.path().join("unet_decoder.onnx"), &cal, &eval);
    eprintln!(
        "unet_decoder: ops {ops:?}; ours vs LiteRT optimized: {} of {} values differ, vs reference: {}; int8 vs float relative L2 {:.4}, \
         onnxruntime quantize_static (per channel, same samples) {peer:.4}",
        o.optimized, o.total, o.reference, o.rel_l2
    );
    assert_eq!(o.optimized, 0, "our int8 runtime differs from LiteRT's optimized kernels");
    assert!(o.rel_l2 <= 1.25 * peer, "int8 vs float relative L2 {:.4}, more than 1.25x onnxruntime's {peer:.4}", o.rel_l2);
}
