//! Our post-training int8 quantization against TensorFlow's: for a few Keras models, TF's converter makes a
//! float TFLite model and a full-int8 one from the same representative data; we quantize the float TFLite
//! model (imported, calibrated on that data, exported as int8). Both int8 models run in the TFLite
//! interpreter on held-out samples, and our error against the float model must be no worse than TF's (within
//! a small margin). Runs when `TPU_SDK_TF_PYTHON` names a Python with tensorflow; otherwise it says so and
//! passes (or fails with `TPU_SDK_REQUIRE_TF=1`: tensorflow is not among the pinned oracles).

use std::path::PathBuf;
use std::process::Command;

use tpu_sdk_core::import::tflite;
use tpu_sdk_core::ir::Tensor;
use tpu_sdk_core::target::{CompileOptions, Target};
use tpu_sdk_core::{npy, passes};
use tpu_sdk_edgetpu::EdgeTpuTarget;
use tpu_sdk_test_support::oracle;

/// How much lower (dB) our SQNR may be than TF's.
const MARGIN_DB: f64 = 1.0;

fn script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scripts/compare_tf_quantization.py")
}

fn split(all: &Tensor) -> Vec<Vec<Tensor>> {
    let per: usize = all.shape[1..].iter().product();
    let v = all.to_f64_vec();
    (0..all.shape[0]).map(|i| vec![Tensor::from_f32(all.shape[1..].to_vec(), v[i * per..(i + 1) * per].iter().map(|&x| x as f32).collect())]).collect()
}

#[test]
fn our_int8_error_is_no_worse_than_tensorflows() {
    let Some(py) = oracle::tf_python("the TensorFlow quantization comparison") else { return };
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(&py).arg(script()).arg("make").arg(dir.path()).output().unwrap();
    assert!(out.status.success(), "make failed: {}", String::from_utf8_lossy(&out.stderr));
    let names: Vec<String> = String::from_utf8_lossy(&out.stdout).lines().filter_map(|l| l.strip_prefix("MODEL ")).map(|l| l.trim().to_string()).collect();
    assert!(names.len() >= 3, "models: {names:?}");
    let mut table = Vec::new();
    for name in &names {
        let p = |k: &str| dir.path().join(format!("{name}_{k}"));
        let mut g = tflite::load(p("float.tflite"), &tflite::ImportOptions::default()).unwrap();
        passes::optimize(&mut g).unwrap();
        let opts = CompileOptions {
            output: p("ours.tflite"),
            target: tpu_sdk_core::target::EdgeTpuOptions { calibration: split(&npy::read(&p("cal.npy")).unwrap()), ..Default::default() }.into(),
            ..Default::default()
        };
        let res = EdgeTpuTarget::default().compile(g, &opts).unwrap();
        eprintln!("{name}: {}", res.summary.lines().find(|l| l.contains("SQNR")).unwrap_or(""));
        let out = Command::new(&py).arg(script()).arg("eval").arg(dir.path()).arg(name).output().unwrap();
        assert!(out.status.success(), "eval failed: {}", String::from_utf8_lossy(&out.stderr));
        let text = String::from_utf8_lossy(&out.stdout);
        let line = text.lines().find_map(|l| l.strip_prefix("RESULT ")).unwrap_or_else(|| panic!("no RESULT line in:\n{text}"));
        let doc: serde_json::Value = serde_json::from_str(line).unwrap();
        let (ours, tf) = (doc["ours_sqnr_db"].as_f64().unwrap_or(f64::INFINITY), doc["tf_sqnr_db"].as_f64().unwrap_or(f64::INFINITY));
        table.push(format!("{name:>10}: ours {ours:6.2} dB (max abs {:.4}), TensorFlow {tf:6.2} dB (max abs {:.4})", doc["ours_max_abs"], doc["tf_max_abs"]));
        assert!(ours >= tf - MARGIN_DB, "{name}: our SQNR {ours:.2} dB is worse than TensorFlow's {tf:.2} dB\n{}", table.join("\n"));
    }
    eprintln!("int8 vs float SQNR on held-out samples:\n{}", table.join("\n"));
}
