//! MediaPipe's attention face mesh (`face_landmark_with_attention.tflite` of the mediapipe 0.10.14 wheel, in
//! `$TPU_SDK_MEDIAPIPE_MODELS`), whose custom ops `Landmarks2TransformMatrix`, `TransformTensorBilinear` and
//! `TransformLandmarks` import as core IR ops (`core/src/import/tflite/ops/mediapipe.rs`), on every target, on a
//! real face (a crop of scikit-image's public-domain astronaut photo, `core/tests/data/astronaut_face_192.jpg`):
//! - cpu against MediaPipe's own runtime (`zoo/mediapipe_graph_peer.py`: a `CalculatorGraph` feeding the same
//!   float tensor to the model with MediaPipe's kernels for its custom ops), all 7 outputs. That peer needs a Python with the `mediapipe`
//!   wheel (`$TPU_SDK_MEDIAPIPE_PYTHON`, else the zoo's `.cache/zoo/venv-mp`, which scripts/test.sh and so CI
//!   make); without it the test notes the skip (a failure with `TPU_SDK_REQUIRE_MEDIAPIPE=1`, which
//!   scripts/test.sh sets once the venv imports mediapipe);
//! - cloud-tpu (the XLA CPU PJRT plugin) against cpu;
//! - `compile --target edgetpu`: the int8 file keeps the transform matrices float (a float island between
//!   DEQUANTIZE and QUANTIZE), LiteRT loads and runs it, and our int8 CPU runtime equals LiteRT's builtin kernels
//!   bit for bit.
#![cfg(all(unix, feature = "edgetpu", feature = "cloud-tpu"))]

use std::path::{Path, PathBuf};
use std::process::Command;

use tpu_sdk::core::import::tflite::{load, ImportOptions};
use tpu_sdk::core::npy;
use tpu_sdk::core::passes;
use tpu_sdk::core::runtime::Session;
use tpu_sdk::{DType, Tensor};
use tpu_sdk_test_support::cli::{self, ok};
use tpu_sdk_test_support::{fresh_dir, litert, oracle, repo};

const MODEL: &str = "face_landmark_with_attention.tflite";
const FACE: &str = "core/tests/data/astronaut_face_192.jpg";

fn find(dir: &Path, name: &str) -> Option<PathBuf> {
    for e in std::fs::read_dir(dir).ok()?.flatten() {
        let p = e.path();
        if p.is_dir() {
            if let Some(f) = find(&p, name) {
                return Some(f);
            }
        } else if p.file_name().is_some_and(|n| n == name) {
            return Some(p);
        }
    }
    None
}

/// The model, or `None` after a note (a failure when oracles are required).
fn model() -> Option<PathBuf> {
    let dir = std::env::var_os("TPU_SDK_MEDIAPIPE_MODELS").filter(|v| !v.is_empty()).map(PathBuf::from);
    match dir.as_deref().and_then(|d| find(d, MODEL)) {
        Some(m) => Some(m),
        None => {
            oracle::skip(&format!("TPU_SDK_MEDIAPIPE_MODELS holds no {MODEL} (scripts/test.sh fetches the MediaPipe models)"));
            None
        }
    }
}

/// A Python with the `mediapipe` wheel: `$TPU_SDK_MEDIAPIPE_PYTHON`, else the zoo's venv; `None` after a note.
fn mediapipe_python() -> Option<PathBuf> {
    let p = std::env::var_os("TPU_SDK_MEDIAPIPE_PYTHON")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| repo().join(".cache/zoo/venv-mp/bin/python"));
    if p.is_file() {
        return Some(p);
    }
    assert!(std::env::var("TPU_SDK_REQUIRE_MEDIAPIPE").as_deref() != Ok("1"), "TPU_SDK_REQUIRE_MEDIAPIPE=1 but {} does not exist", p.display());
    eprintln!(
        "note: no Python with the mediapipe wheel ({}; set TPU_SDK_MEDIAPIPE_PYTHON, or make the zoo's venv: python3.11 -m venv \
         .cache/zoo/venv-mp && .cache/zoo/venv-mp/bin/pip install mediapipe==0.10.14 'numpy<2'); skipping",
        p.display()
    );
    None
}

/// The face crop as the model's input: [1, 192, 192, 3] RGB in [0, 1].
fn face() -> Tensor {
    let img = image::open(repo().join(FACE)).expect("decode the face crop").to_rgb8();
    assert_eq!(img.dimensions(), (192, 192));
    Tensor::from_f32(vec![1, 192, 192, 3], img.into_raw().into_iter().map(|p| p as f32 / 255.0).collect())
}

fn max_abs(t: &Tensor) -> f64 {
    t.to_f64_vec().iter().fold(0.0, |m, v| m.max(v.abs()))
}

fn max_abs_diff(a: &Tensor, b: &Tensor) -> f64 {
    assert_eq!(a.len(), b.len());
    a.to_f64_vec().iter().zip(b.to_f64_vec()).map(|(x, y)| (x - y).abs()).fold(0.0, f64::max)
}

fn cpu_outputs(m: &Path, x: &Tensor) -> Vec<Tensor> {
    let mut g = load(m, &ImportOptions::default()).expect("the model imports");
    passes::optimize(&mut g).unwrap();
    Session::new(g).and_then(|mut s| s.run(std::slice::from_ref(x))).expect("the CPU runtime runs it")
}

#[test]
fn face_landmark_with_attention_on_cpu_matches_mediapipe() {
    let (Some(m), Some(mp)) = (model(), mediapipe_python()) else { return };
    let dir = fresh_dir("mediapipe_attention_peer");
    // the face upright, and turned a quarter (the crops the model computes then rotate by ~90°)
    let up = face();
    let v = up.to_f64_vec();
    let turned: Vec<f32> = (0..192 * 192 * 3).map(|i| {
        let (y, x, c) = (i / (192 * 3), (i / 3) % 192, i % 3);
        v[(x * 192 + (191 - y)) * 3 + c] as f32
    }).collect();
    let samples = [up, Tensor::from_f32(vec![1, 192, 192, 3], turned)];
    let stacked: Vec<f32> = samples.iter().flat_map(|t| t.to_f64_vec().into_iter().map(|x| x as f32)).collect();
    npy::write(&dir.join("x.npy"), &Tensor::from_f32(vec![2, 192, 192, 3], stacked)).unwrap();
    let o = Command::new(&mp)
        .arg(repo().join("zoo/mediapipe_graph_peer.py"))
        .arg(&m)
        .arg(dir.join("x.npy"))
        .arg(&dir)
        .arg("7")
        .output()
        .expect("run zoo/mediapipe_graph_peer.py");
    assert!(o.status.success(), "zoo/mediapipe_graph_peer.py: {}", String::from_utf8_lossy(&o.stderr));
    let theirs: Vec<Vec<f64>> = (0..7).map(|k| npy::read(&dir.join(format!("output_{k}.npy"))).unwrap().to_f64_vec()).collect();
    let mut failures = Vec::new();
    for (s, (x, what)) in samples.iter().zip(["upright", "turned"]).enumerate() {
        let ours = cpu_outputs(&m, x);
        assert_eq!(ours.len(), 7);
        for (k, o) in ours.iter().enumerate() {
            let n = o.len();
            let t = Tensor::from_f32(o.shape.clone(), theirs[k][s * n..(s + 1) * n].iter().map(|&v| v as f32).collect());
            let (err, scale) = (max_abs_diff(o, &t), max_abs(&t));
            println!("{what} output {k} {:?}: max |ours - MediaPipe| = {err:.3e} (max |MediaPipe| {scale:.3e}, relative {:.2e})", o.shape, err / scale);
            // seen: ≤ 4e-7 of the largest value upright, 2.4e-6 turned (float rounding through 700 ops, bilinear
            // samples near pixel boundaries); the landmarks are pixels in 0..192
            if err > 1e-5 * scale || err.is_nan() {
                failures.push(format!("{what} output {k}: max |ours - MediaPipe| = {err:.3e} > 1e-5 · {scale:.3e}"));
            }
        }
        // the upright face is found (its face flag logit is ~19; turned, the model is unsure: ~−4)
        if s == 0 {
            assert!(ours[6].to_f64_vec()[0] > 5.0, "{what}: face flag {:?}", ours[6].to_f64_vec());
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn face_landmark_with_attention_on_cloud_tpu_equals_cpu() {
    let Some(m) = model() else { return };
    let Some(plugin) = oracle::xla_cpu_plugin_of_python() else {
        oracle::skip("no XLA CPU PJRT plugin (TPU_SDK_PYTHON's fastatomstruct-xla-cpu)");
        return;
    };
    let dir = fresh_dir("mediapipe_attention_cloud_tpu");
    let x = face();
    npy::write(&dir.join("x.npy"), &x).unwrap();
    let (model_arg, x_arg, plugin_arg) = (m.display().to_string(), dir.join("x.npy").display().to_string(), plugin.display().to_string());
    let run = |target: &str, out: &str| {
        let out_dir = dir.join(out).display().to_string();
        let mut args = vec!["run", &model_arg, "--target", target, "--input", &x_arg, "--output-dir", &out_dir];
        if target == "cloud-tpu" {
            args.extend(["--plugin", &plugin_arg]);
        }
        ok(cli::run(env!("CARGO_BIN_EXE_tpu-sdk"), &args));
        (0..7).map(|k| npy::read(&dir.join(out).join(format!("output_{k}.npy"))).unwrap()).collect::<Vec<_>>()
    };
    let cpu = run("cpu", "cpu");
    let tpu = run("cloud-tpu", "tpu");
    for (k, (c, t)) in cpu.iter().zip(&tpu).enumerate() {
        let (err, scale) = (max_abs_diff(t, c), max_abs(c));
        println!("output {k}: max |cloud-tpu - cpu| = {err:.3e} (max |cpu| {scale:.3e})");
        assert!(err <= 1e-5 * scale.max(1.0), "output {k}: max |cloud-tpu - cpu| = {err:.3e}, max |cpu| {scale:.3e}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn face_landmark_with_attention_int8_runs_in_litert_bit_equal() {
    let Some(m) = model() else { return };
    let Some(py) = oracle::python() else { return };
    let dir = fresh_dir("mediapipe_attention_int8");
    let cal = dir.join("calibration");
    std::fs::create_dir_all(&cal).unwrap();
    std::fs::copy(repo().join(FACE), cal.join("face.jpg")).unwrap();
    let q = dir.join("face_int8.tflite");
    let args = ["compile", m.to_str().unwrap(), "--target", "edgetpu", "--calibration", cal.to_str().unwrap(), "-o", q.to_str().unwrap()];
    let out = cli::command(env!("CARGO_BIN_EXE_tpu-sdk")).env_remove("TPU_SDK_EDGETPU_COMPILER").env("PATH", "/nonexistent").args(args).output().unwrap();
    ok(out);
    let g = load(&q, &ImportOptions::default()).expect("our int8 file imports");
    // the transform matrices (and the MUL by a constant between the custom ops) stay float
    for name in ["landmarks_to_transform_matrix_v2", "landmarks_to_transform_matrix_v2_1", "multiply_by_constant_1"] {
        let v = g.values.iter().find(|v| v.name == name).unwrap_or_else(|| panic!("no value '{name}' in the int8 file"));
        assert_eq!(v.dtype, DType::F32, "'{name}' should stay float in the int8 file");
    }
    let input = g.value(g.inputs[0]);
    assert_eq!(input.dtype, DType::I8);
    let p = input.quant.clone().expect("a quantized input");
    let xq: Vec<i8> = face().to_f64_vec().iter().map(|&v| ((v as f32 / p.scale[0]).round() as i64 + p.zero_point[0]).clamp(-128, 127) as i8).collect();
    let xq = Tensor::from_vec(input.shape.clone(), xq).unwrap();
    let ours = Session::new(g).and_then(|mut s| s.run(std::slice::from_ref(&xq))).expect("the int8 CPU runtime runs it");
    let theirs = litert::run_file(&py, &q, litert::OPTIMIZED, &[vec![xq]]).unwrap_or_else(|e| panic!("LiteRT on our int8 file: {e}")).remove(0);
    assert_eq!(ours.len(), theirs.len());
    for (k, (o, t)) in ours.iter().zip(&theirs).enumerate() {
        assert_eq!(o.dtype(), DType::I8, "output {k}");
        let diff = tpu_sdk_test_support::compare::differing(o, t);
        assert_eq!(diff, 0, "output {k}: {diff} of {} int8 values differ from LiteRT's", o.len());
    }
    let _ = std::fs::remove_dir_all(&dir);
}
