//! Real models on the CPU target against onnxruntime, a peer implementation: every output must agree within
//! 1e-4 relative (per element: |ours - ort| <= 1e-4 * (|ort| + mean |ort|)).
//!
//! Models: the shipped text-direction classifier (a trained MobileNetV3) and the architectures written by
//! `scripts/make_test_models.py` (MobileNetV2, two minGPT blocks, a Llama block, a UNet, a DLRM, a YOLOv8-style
//! C2f block whose SiLUs the CPU runtime fuses into its Conv, ConvTranspose and Gemm). onnxruntime
//! runs through `scripts/ort_run.py` with the Python in `TPU_SDK_PYTHON` (set by scripts/test.sh). Without it
//! the test says so and passes, unless `TPU_SDK_REQUIRE_ORACLES=1` (set by CI).

use std::path::Path;
use std::process::Command;

use tpu_sdk::{LoadOptions, Model};
use tpu_sdk_test_support::{onnxruntime, oracle, random_inputs, relative_to_mean, repo};

fn check(py: &Path, tmp: &Path, path: &Path, shapes: &[(&str, Vec<usize>)]) -> Result<(), String> {
    let stem = path.file_stem().unwrap().to_string_lossy().to_string();
    let mut opts = LoadOptions::default();
    for (n, s) in shapes {
        opts.input_shapes.insert(n.to_string(), s.clone());
    }
    let model = Model::load_with(path, &opts).map_err(|e| format!("{stem}: load: {e}"))?;
    let g = model.graph();
    let inputs = random_inputs(g, 7);
    let ours = model.prepare("cpu").and_then(|mut e| e.run(&inputs)).map_err(|e| format!("{stem}: run: {e}"))?;
    let named: Vec<(String, _)> = g.inputs.iter().zip(inputs).map(|(&i, t)| (g.value(i).name.clone(), t)).collect();
    let theirs = onnxruntime::run_model(py, path, &named, &tmp.join(&stem));
    let mut worst = 0.0f64;
    for (k, t) in ours.iter().enumerate() {
        let want = theirs.get(k).ok_or_else(|| format!("{stem}: onnxruntime has no output {k}"))?;
        worst = worst.max(relative_to_mean(&stem, k, t, want, "onnxruntime", 1e-4)?);
    }
    println!("{stem:<20} {} nodes, {} outputs, worst relative error {worst:.2e}", g.nodes.len(), ours.len());
    Ok(())
}

#[test]
fn real_models_match_onnxruntime() {
    let Some(py) = oracle::python() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let models = tmp.path().join("models");
    let st = Command::new(&py).arg(repo().join("scripts/make_test_models.py")).arg(&models).status().unwrap();
    assert!(st.success(), "make_test_models.py failed");
    let mut failures = Vec::new();
    let text_cls = repo().join("examples/models/text_direction_cls.onnx");
    if let Err(e) = check(&py, tmp.path(), &text_cls, &[("x", vec![1, 3, 48, 192])]) {
        failures.push(e);
    }
    for m in ["mobilenet_v2", "gpt_block", "llama_block", "unet", "dlrm", "yolo_c2f"] {
        if let Err(e) = check(&py, tmp.path(), &models.join(format!("{m}.onnx")), &[]) {
            failures.push(e);
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
