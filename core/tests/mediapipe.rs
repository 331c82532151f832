//! TFLite models others produced: MediaPipe's published float models (face detection and landmarks, hands, palm,
//! pose, iris, selfie segmentation; the `.tflite` files of the `mediapipe` 0.10.14 wheel, which `scripts/test.sh`
//! downloads and unpacks into `$TPU_SDK_MEDIAPIPE_MODELS`) are imported, run on random inputs by our CPU runtime
//! and by LiteRT (`litert_oracle.py`, builtin kernels without delegates, and the reference kernels), and compared.
//!
//! The bar is LiteRT's own spread: each output may differ from LiteRT's builtin kernels by at most
//! `max(1e-4 · max|output|, 4 · max|builtin − reference|, 1e-6)`: deep float networks on random inputs amplify rounding
//! differences, and LiteRT's two kernel sets disagree with each other by as much.
//!
//! Models that use MediaPipe's own custom ops (`Convolution2DTransposeBias`, `Landmarks2TransformMatrix`) cannot
//! be run by LiteRT either; for them the import must fail with an error naming the op.

use std::path::{Path, PathBuf};
use std::process::Command;

use tpu_sdk_core::import::tflite::{load, ImportOptions};
use tpu_sdk_core::ir::Tensor;
use tpu_sdk_core::runtime::Session;
use tpu_sdk_core::{npy, passes};

/// Models whose import must fail, and the op the error must name.
const UNSUPPORTED: &[(&str, &str)] = &[
    ("face_landmark_with_attention", "Landmarks2TransformMatrix"),
    ("selfie_segmentation", "Convolution2DTransposeBias"),
    ("selfie_segmentation_landscape", "Convolution2DTransposeBias"),
];

const RESOLVERS: [&str; 2] = ["BUILTIN_WITHOUT_DEFAULT_DELEGATES", "BUILTIN_REF"];

fn required() -> bool {
    std::env::var("TPU_SDK_REQUIRE_ORACLES").as_deref() == Ok("1")
}

fn models_dir() -> Option<PathBuf> {
    let dir = std::env::var_os("TPU_SDK_MEDIAPIPE_MODELS").filter(|v| !v.is_empty()).map(PathBuf::from);
    if dir.as_ref().is_some_and(|d| d.is_dir()) {
        return dir;
    }
    assert!(!required(), "TPU_SDK_REQUIRE_ORACLES=1 but TPU_SDK_MEDIAPIPE_MODELS is not a folder (scripts/test.sh fetches the models)");
    eprintln!("note: TPU_SDK_MEDIAPIPE_MODELS is not set; skipping the MediaPipe models (scripts/test.sh fetches them)");
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

/// Deterministic inputs in [-1, 1) (what MediaPipe's image models take after normalisation).
fn random_input(shape: &[usize], seed: u64) -> Tensor {
    let mut s = seed;
    let n: usize = shape.iter().product();
    Tensor::from_f32(
        shape.to_vec(),
        (0..n)
            .map(|_| {
                s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                (s >> 40) as f32 / (1u64 << 23) as f32 - 1.0
            })
            .collect(),
    )
}

fn max_abs_diff(a: &Tensor, b: &Tensor) -> f64 {
    a.to_f64_vec().iter().zip(b.to_f64_vec()).map(|(x, y)| (x - y).abs()).fold(0.0, f64::max)
}

#[test]
fn mediapipe_models_match_litert() {
    let Some(dir) = models_dir() else { return };
    let py = std::env::var("TPU_SDK_PYTHON").unwrap_or_else(|_| "python3".into());
    let oracle = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/litert_oracle.py");
    let mut models = Vec::new();
    find_tflite(&dir, &mut models);
    models.sort();
    assert!(models.len() >= 10, "expected MediaPipe's models in {}, found {}", dir.display(), models.len());
    let work = std::env::temp_dir().join(format!("tpu_sdk_mediapipe_{}", std::process::id()));
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
        let d = work.join(&name);
        std::fs::create_dir_all(&d).unwrap();
        let inputs: Vec<Tensor> =
            g.inputs.iter().enumerate().map(|(k, &v)| random_input(&g.value(v).shape, 0x5EED + k as u64 + name.len() as u64)).collect();
        for (k, t) in inputs.iter().enumerate() {
            npy::write(&d.join(format!("case0.input_{k}.npy")), t).unwrap();
        }
        for r in RESOLVERS {
            let out = Command::new(&py).arg(&oracle).arg(m).arg(r).arg(&d).arg("1").output().expect("runs the LiteRT oracle");
            assert!(out.status.success(), "LiteRT ({r}) on {name}: {}", String::from_utf8_lossy(&out.stderr));
        }
        let ours = Session::new(g).and_then(|mut s| s.run(&inputs)).unwrap_or_else(|e| panic!("{name}: {e}"));
        let mut worst = 0f64;
        for (k, o) in ours.iter().enumerate() {
            let read = |r: &str| npy::read(&d.join(format!("case0.{r}.output_{k}.npy"))).unwrap();
            let (builtin, reference) = (read(RESOLVERS[0]), read(RESOLVERS[1]));
            if o.shape != builtin.shape {
                failures.push(format!("{name} output {k}: shape {:?}, LiteRT {:?}", o.shape, builtin.shape));
                continue;
            }
            let scale = builtin.to_f64_vec().iter().fold(0f64, |m, v| m.max(v.abs()));
            let spread = max_abs_diff(&builtin, &reference);
            let tol = (1e-4 * scale).max(4.0 * spread).max(1e-6);
            let err = max_abs_diff(o, &builtin);
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
    let _ = std::fs::remove_dir_all(&work);
    println!("MediaPipe: {compared} models compared with LiteRT, {} not importable (custom ops)", UNSUPPORTED.len());
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
