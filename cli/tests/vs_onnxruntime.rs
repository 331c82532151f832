//! Real models on the CPU target against onnxruntime, a peer implementation: every output must agree within
//! 1e-4 relative (per element: |ours - ort| <= 1e-4 * (|ort| + mean |ort|)).
//!
//! Models: the shipped text-direction classifier (a trained MobileNetV3) and the architectures written by
//! `scripts/make_test_models.py` (MobileNetV2, two minGPT blocks, a Llama block, a UNet, a DLRM). onnxruntime
//! runs through `scripts/ort_run.py` with the Python in `TPU_SDK_PYTHON` (set by scripts/test.sh). Without it
//! the test says so and passes, unless `TPU_SDK_REQUIRE_ORACLES=1` (set by CI).

use std::path::{Path, PathBuf};
use std::process::Command;

use tpu_sdk::core::npy;
use tpu_sdk::{DType, LoadOptions, Model, Tensor};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn python() -> Option<PathBuf> {
    match std::env::var_os("TPU_SDK_PYTHON") {
        Some(p) => Some(PathBuf::from(p)),
        None => {
            let required = std::env::var("TPU_SDK_REQUIRE_ORACLES").is_ok_and(|v| v == "1");
            assert!(!required, "TPU_SDK_REQUIRE_ORACLES=1 but TPU_SDK_PYTHON is not set");
            eprintln!("note: TPU_SDK_PYTHON is not set; skipping the onnxruntime comparison (run scripts/test.sh)");
            None
        }
    }
}

/// Deterministic inputs: floats uniform in [-1, 1), integers in [0, 20).
fn random_input(dtype: DType, shape: &[usize], seed: u64) -> Tensor {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut next = move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        (s >> 11) as f64 / (1u64 << 53) as f64
    };
    let n: usize = shape.iter().product();
    match dtype {
        DType::F32 => Tensor::from_vec(shape.to_vec(), (0..n).map(|_| next() as f32 * 2.0 - 1.0).collect::<Vec<f32>>()),
        DType::I64 => Tensor::from_vec(shape.to_vec(), (0..n).map(|_| (next() * 20.0) as i64).collect::<Vec<i64>>()),
        other => panic!("test inputs of dtype {other} are not generated"),
    }
    .expect("length matches shape")
}

fn compare(model: &str, k: usize, ours: &Tensor, theirs: &Tensor) -> Result<f64, String> {
    if ours.shape != theirs.shape || ours.dtype() != theirs.dtype() {
        return Err(format!("{model} output {k}: {}{:?} vs onnxruntime {}{:?}", ours.dtype(), ours.shape, theirs.dtype(), theirs.shape));
    }
    let (a, b) = (ours.to_f64_vec(), theirs.to_f64_vec());
    let mean_abs = b.iter().map(|x| x.abs()).sum::<f64>() / b.len().max(1) as f64;
    let mut worst = 0.0f64;
    for (i, (&x, &y)) in a.iter().zip(&b).enumerate() {
        let rel = (x - y).abs() / (y.abs() + mean_abs).max(f64::MIN_POSITIVE);
        if !(rel <= 1e-4) {
            return Err(format!("{model} output {k} element {i}: ours {x}, onnxruntime {y} (relative error {rel:.2e})"));
        }
        worst = worst.max(rel);
    }
    Ok(worst)
}

fn check(py: &Path, tmp: &Path, path: &Path, shapes: &[(&str, Vec<usize>)]) -> Result<(), String> {
    let stem = path.file_stem().unwrap().to_string_lossy().to_string();
    let mut opts = LoadOptions::default();
    for (n, s) in shapes {
        opts.input_shapes.insert(n.to_string(), s.clone());
    }
    let model = Model::load_with(path, &opts).map_err(|e| format!("{stem}: load: {e}"))?;
    let g = model.graph();
    let dir = tmp.join(&stem);
    std::fs::create_dir_all(&dir).unwrap();
    let mut inputs = Vec::new();
    let mut args = Vec::new();
    for (k, &i) in g.inputs.iter().enumerate() {
        let v = g.value(i);
        let t = random_input(v.dtype, &v.shape, k as u64 + 7);
        let p = dir.join(format!("input_{k}.npy"));
        npy::write(&p, &t).unwrap();
        args.push(format!("{}={}", v.name, p.display()));
        inputs.push(t);
    }
    let ours = model.prepare("cpu").and_then(|mut e| e.run(&inputs)).map_err(|e| format!("{stem}: run: {e}"))?;
    let out_dir = dir.join("ort");
    let st = Command::new(py).arg(repo().join("scripts/ort_run.py")).arg(path).arg(&out_dir).args(&args).status().unwrap();
    assert!(st.success(), "onnxruntime failed on {stem}");
    let mut worst = 0.0f64;
    for (k, t) in ours.iter().enumerate() {
        let theirs = npy::read(&out_dir.join(format!("output_{k}.npy"))).unwrap();
        worst = worst.max(compare(&stem, k, t, &theirs)?);
    }
    println!("{stem:<20} {} nodes, {} outputs, worst relative error {worst:.2e}", g.nodes.len(), ours.len());
    Ok(())
}

#[test]
fn real_models_match_onnxruntime() {
    let Some(py) = python() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let models = tmp.path().join("models");
    let st = Command::new(&py).arg(repo().join("scripts/make_test_models.py")).arg(&models).status().unwrap();
    assert!(st.success(), "make_test_models.py failed");
    let mut failures = Vec::new();
    let text_cls = repo().join("examples/models/text_direction_cls.onnx");
    if let Err(e) = check(&py, tmp.path(), &text_cls, &[("x", vec![1, 3, 48, 192])]) {
        failures.push(e);
    }
    for m in ["mobilenet_v2", "gpt_block", "llama_block", "unet", "dlrm"] {
        if let Err(e) = check(&py, tmp.path(), &models.join(format!("{m}.onnx")), &[]) {
            failures.push(e);
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
