//! TFLite models others produced: MediaPipe's published float models (face detection and landmarks, hands, palm,
//! pose, iris, selfie segmentation; the `.tflite` files of the `mediapipe` 0.10.14 wheel, which `scripts/test.sh`
//! downloads and unpacks into `$TPU_SDK_MEDIAPIPE_MODELS`) are imported, run on random inputs by our CPU runtime
//! and by LiteRT (`tpu_sdk_test_support::litert`, builtin kernels without delegates, and the reference kernels), and compared.
//!
//! The bar is LiteRT's own spread: each output may differ from LiteRT's builtin kernels by at most
//! `max(1e-4 · max|output|, 4 · max|builtin − reference|, 1e-6)`: deep float networks on random inputs amplify rounding
//! differences, and LiteRT's two kernel sets disagree with each other by as much.
//!
//! Models that use MediaPipe's own custom ops (`Convolution2DTransposeBias`, `Landmarks2TransformMatrix`) cannot
//! be run by LiteRT either; for them the import must fail with an error naming the op.

use std::path::{Path, PathBuf};

use tpu_sdk_core::import::tflite::{load, ImportOptions};
use tpu_sdk_core::ir::Tensor;
use tpu_sdk_core::passes;
use tpu_sdk_core::runtime::Session;
use tpu_sdk_test_support::{litert, oracle, Rng};

/// Models whose import must fail, and the op the error must name.
const UNSUPPORTED: &[(&str, &str)] = &[
    ("face_landmark_with_attention", "Landmarks2TransformMatrix"),
    ("selfie_segmentation", "Convolution2DTransposeBias"),
    ("selfie_segmentation_landscape", "Convolution2DTransposeBias"),
];

fn models_dir() -> Option<PathBuf> {
    let dir = std::env::var_os("TPU_SDK_MEDIAPIPE_MODELS").filter(|v| !v.is_empty()).map(PathBuf::from);
    if dir.as_ref().is_some_and(|d| d.is_dir()) {
        return dir;
    }
    oracle::skip("TPU_SDK_MEDIAPIPE_MODELS is not a folder (scripts/test.sh fetches the MediaPipe models)");
    None
}

fn find_tflite(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            find_tflite(&p, out);
        } else if p.extension().is_some_and(|x| x == "tflite") {
            out.push(p);
        }
    }
}

fn max_abs_diff(a: &Tensor, b: &Tensor) -> f64 {
    a.to_f64_vec().iter().zip(b.to_f64_vec()).map(|(x, y)| (x - y).abs()).fold(0.0, f64::max)
}

#[test]
fn mediapipe_models_match_litert() {
    let Some(dir) = models_dir() else { return };
    let py = oracle::python_or_default();
    let mut models = Vec::new();
    find_tflite(&dir, &mut models);
    models.sort();
    assert!(models.len() >= 10, "expected MediaPipe's models in {}, found {}", dir.display(), models.len());
    let mut failures = Vec::new();
    let mut compared = 0;
    for m in &models {
        let name = m.file_stem().unwrap().to_string_lossy().to_string();
        let loaded = load(m, &ImportOptions::default());
        if let Some((_, op)) = UNSUPPORTED.iter().find(|(n, _)| *n == name) {
            match loaded {
                Ok(_) => failures.push(format!("{name}: imports now; take it off the UNSUPPORTED list")),
                Err(e) if e.to_string().contains(op) => println!("{name:<36} not imported: {e}"),
                Err(e) => failures.push(format!("{name}: the error should name {op}: {e}")),
            }
            continue;
        }
        let mut g = match loaded {
            Ok(g) => g,
            Err(e) => {
                failures.push(format!("{name}: {e}"));
                continue;
            }
        };
        passes::optimize(&mut g).unwrap_or_else(|e| panic!("{name}: {e}"));
        // Deterministic inputs in [-1, 1) (what MediaPipe's image models take after normalisation).
        // (The tolerance below was set on these values: keep the stream.)
        let inputs: Vec<Tensor> = g
            .inputs
            .iter()
            .enumerate()
            .map(|(k, &v)| Rng::from_state(0x5EED + k as u64 + name.len() as u64).f32_tensor(&g.value(v).shape, -1.0, 1.0))
            .collect();
        let sets = std::slice::from_ref(&inputs);
        let [builtin, reference] = [litert::OPTIMIZED, litert::REFERENCE]
            .map(|r| litert::run_file(&py, m, r, sets).unwrap_or_else(|e| panic!("LiteRT ({r}) on {name}: {e}")).remove(0));
        let ours = Session::new(g).and_then(|mut s| s.run(&inputs)).unwrap_or_else(|e| panic!("{name}: {e}"));
        let mut worst = 0f64;
        for (k, o) in ours.iter().enumerate() {
            let (builtin, reference) = (&builtin[k], &reference[k]);
            if o.shape != builtin.shape {
                failures.push(format!("{name} output {k}: shape {:?}, LiteRT {:?}", o.shape, builtin.shape));
                continue;
            }
            let scale = builtin.to_f64_vec().iter().fold(0f64, |m, v| m.max(v.abs()));
            let spread = max_abs_diff(builtin, reference);
            let tol = (1e-4 * scale).max(4.0 * spread).max(1e-6);
            let err = max_abs_diff(o, builtin);
            worst = worst.max(err / scale.max(1e-30));
            if !(err <= tol) {
                failures.push(format!(
                    "{name} output {k}: max |ours - LiteRT| = {err:.3e} > {tol:.3e} (max |output| {scale:.3e}, LiteRT builtin vs reference {spread:.3e})"
                ));
            }
        }
        compared += 1;
        println!("{name:<36} {} output(s), max |ours - LiteRT| / max|output| = {worst:.2e}", ours.len());
    }
    println!("MediaPipe: {compared} models compared with LiteRT, {} not importable (custom ops)", UNSUPPORTED.len());
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
