//! int8 accuracy against the peer quantizer: each head of `tests/make_int8_heads.py` is quantized by us
//! (calibrate, quantize, export) and by onnxruntime's `quantize_static` (per channel, QDQ, the same samples,
//! `tests/ort_quantize_static.py`); our file must run in LiteRT's optimized builtin kernels exactly as in our
//! int8 runtime, and its relative L2 error against the float model on held-out samples must stay within
//! 1.25× onnxruntime's.

use std::path::Path;
use std::process::Command;

use tpu_sdk_core::format::tflite::schema;
use tpu_sdk_core::import::onnx;
use tpu_sdk_core::ir::{Graph, Tensor};
use tpu_sdk_core::passes;
use tpu_sdk_core::quant::compare::{dequantized, to_graph_input};
use tpu_sdk_core::quant::{calibrate, prepare, quantize, QuantizeOptions, RangeMethod};
use tpu_sdk_core::runtime::Session;
use tpu_sdk_core::target::Progress;
use tpu_sdk_edgetpu::export::{export, ExportOptions};
use tpu_sdk_test_support::{differing, f32_samples, litert, oracle};

fn script(name: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests").join(name)
}

/// What one head gave: the exported file's ops, how many output values differ from LiteRT's optimized
/// kernels, our relative L2 error and onnxruntime's.
struct Outcome {
    ops: Vec<String>,
    differing: usize,
    ours: f64,
    peer: f64,
}

/// Writes the heads into `dir`; `None` without the oracle Python.
fn write_heads(dir: &Path) -> Option<()> {
    let py = oracle::python()?;
    let st = Command::new(py).arg(script("make_int8_heads.py")).arg(dir).output().unwrap();
    assert!(st.status.success(), "make_int8_heads.py failed: {}", String::from_utf8_lossy(&st.stderr));
    Some(())
}

/// Quantizes `dir/name.onnx` both ways on 16 calibration samples in [lo, hi) and measures both on 8 others.
fn measure(dir: &Path, name: &str, lo: f32, hi: f32) -> Option<Outcome> {
    let model = dir.join(format!("{name}.onnx"));
    let mut g: Graph = onnx::load(&model, &onnx::ImportOptions::default()).unwrap();
    passes::optimize(&mut g).unwrap();
    prepare(&mut g);
    let shapes: Vec<Vec<usize>> = g.inputs.iter().map(|&i| g.value(i).shape.clone()).collect();
    let cal = f32_samples(&shapes, 16, 71, lo, hi);
    let eval = f32_samples(&shapes, 8, 72, lo, hi);
    let c = calibrate(&g, &cal, RangeMethod::MinMax, &Progress::default()).unwrap();
    let q = quantize(&g, &c, &QuantizeOptions { method: RangeMethod::MinMax, float_io: false }).unwrap();
    let ex = export(&q, &ExportOptions::default()).unwrap();
    let m = schema::parse_model(&ex.bytes).unwrap();
    let codes = m.operator_codes().unwrap();
    let ops = m.subgraphs().unwrap().get(0).operators().unwrap().iter().map(|o| codes.get(o.opcode_index() as usize).name()).collect();

    let ours_in: Vec<Vec<Tensor>> = eval.iter().map(|s| vec![to_graph_input(&s[0], &q, q.inputs[0]).unwrap()]).collect();
    let feeds: Vec<Vec<Tensor>> = ours_in.iter().map(|s| vec![s[0].permuted(&ex.inputs[0].perm)]).collect();
    let lite = litert::run(&ex.bytes, litert::OPTIMIZED, &feeds)?;
    let (mut qs, mut fs) = (Session::new(q.clone()).unwrap(), Session::new(g.clone()).unwrap());
    let (mut diff, mut noise, mut signal) = (0, 0.0, 0.0);
    let mut want_all = Vec::new();
    for ((x, f), l) in ours_in.iter().zip(&eval).zip(&lite) {
        let got = qs.run(x).unwrap().remove(0);
        diff += differing(&got, &l[0]);
        let want = fs.run(f).unwrap().remove(0).to_f64_vec();
        for (a, b) in dequantized(&got, q.value(q.outputs[0]).quant.as_ref()).iter().zip(&want) {
            noise += (a - b) * (a - b);
            signal += b * b;
        }
        want_all.push(want);
    }

    // onnxruntime's quantize_static on the same samples
    for (what, set) in [("cal", &cal), ("eval", &eval)] {
        for (i, s) in set.iter().enumerate() {
            tpu_sdk_core::npy::write(&dir.join(format!("{what}{i}.npy")), &s[0]).unwrap();
        }
    }
    let st = Command::new(oracle::python().unwrap())
        .arg(script("ort_quantize_static.py"))
        .arg(&model)
        .arg(dir)
        .arg(cal.len().to_string())
        .arg(eval.len().to_string())
        .output()
        .unwrap();
    assert!(st.status.success(), "ort_quantize_static.py failed: {}", String::from_utf8_lossy(&st.stderr));
    let (mut pn, mut ps) = (0.0, 0.0);
    for (i, want) in want_all.iter().enumerate() {
        let got = tpu_sdk_core::npy::read(&dir.join(format!("ort_int8_eval{i}.npy"))).unwrap().to_f64_vec();
        for (a, b) in got.iter().zip(want) {
            pn += (a - b) * (a - b);
            ps += b * b;
        }
    }
    Some(Outcome { ops, differing: diff, ours: (noise / signal).sqrt(), peer: (pn / ps).sqrt() })
}

/// A Logistic's output concatenated with wide-ranged values (YOLO's class probabilities next to its box
/// distances): the Concat's output gets the range of both and the probabilities a requantization (QUANTIZE),
/// where tying them to the Logistic's fixed [0, 1) parameters clipped every distance at 1.
#[test]
fn a_logistic_concatenated_with_box_distances_is_as_accurate_as_onnxruntime() {
    let dir = tempfile::tempdir().unwrap();
    if write_heads(dir.path()).is_none() {
        return;
    }
    let Some(o) = measure(dir.path(), "detect_head", 0.0, 1.0) else { return };
    eprintln!("detect_head: ops {:?}; {} values differ from LiteRT; int8 relative L2 ours {:.4}, onnxruntime {:.4}", o.ops, o.differing, o.ours, o.peer);
    assert_eq!(o.ops.iter().filter(|n| *n == "QUANTIZE").count(), 1, "one requantization, of the probabilities: {:?}", o.ops);
    assert_eq!(o.differing, 0, "our int8 runtime differs from LiteRT's optimized kernels");
    assert!(o.ours <= 1.25 * o.peer, "int8 relative L2 {:.4}, more than 1.25x onnxruntime's {:.4}", o.ours, o.peer);
}

/// A fully-connected head whose weight rows differ in magnitude while its outputs do not (rows that read one
/// feature next to rows that mix all 512, as in MediaPipe's landmark heads): its weights are int8 per output
/// row (TFLite's per-channel FULLY_CONNECTED, as TF's converter writes dense layers), where one scale for the
/// whole matrix left the mixing rows a few int8 steps (5× onnxruntime's error).
#[test]
fn a_dense_head_with_rows_of_different_magnitude_is_as_accurate_as_onnxruntime() {
    let dir = tempfile::tempdir().unwrap();
    if write_heads(dir.path()).is_none() {
        return;
    }
    let Some(o) = measure(dir.path(), "dense_head", -0.3, 1.0) else { return };
    eprintln!("dense_head: ops {:?}; {} values differ from LiteRT; int8 relative L2 ours {:.4}, onnxruntime {:.4}", o.ops, o.differing, o.ours, o.peer);
    assert_eq!(o.ops, vec!["FULLY_CONNECTED"]);
    assert_eq!(o.differing, 0, "our int8 runtime differs from LiteRT's optimized kernels");
    assert!(o.ours <= 1.25 * o.peer, "int8 relative L2 {:.4}, more than 1.25x onnxruntime's {:.4}", o.ours, o.peer);
}
