//! TFLite models others produced: MediaPipe's published float models (face detection and landmarks, hands, palm,
//! pose, iris, selfie segmentation; the `.tflite` files of the `mediapipe` 0.10.14 wheel, which `scripts/test.sh`
//! downloads and unpacks into `$TPU_SDK_MEDIAPIPE_MODELS`) are imported, run on random inputs by our CPU runtime
//! and by LiteRT (`tpu_sdk_test_support::litert`, builtin kernels without delegates, and the reference kernels), and compared.
//!
//! The bar is LiteRT's own spread: each output may differ from LiteRT's builtin kernels by at most
//! `max(1e-4 · max|output|, 4 · max|builtin − reference|, 1e-6)`: deep float networks on random inputs amplify rounding
//! differences, and LiteRT's two kernel sets disagree with each other by as much.
//!
//! LiteRT cannot run MediaPipe's own custom ops. For `Convolution2DTransposeBias` (selfie segmentation) the peer is
//! the same model with that op rewritten to the builtin TRANSPOSE_CONV with a bias input (`zoo/mediapipe_peer.py`
//! writes the twin); the op itself is also checked on synthetic models against LiteRT's TRANSPOSE_CONV over
//! strides, kernels and SAME/VALID padding. Models with the custom ops not imported yet
//! (`Landmarks2TransformMatrix`) must fail with an error naming the op.

use std::path::{Path, PathBuf};
use std::process::Command;

use tpu_sdk_core::format::tflite::builder::*;
use tpu_sdk_core::format::tflite::schema::{builtin_operator as bo, builtin_options, padding, tensor_type as tt};
use tpu_sdk_core::import::tflite::{load, load_bytes, ImportOptions};
use tpu_sdk_core::ir::Tensor;
use tpu_sdk_core::passes;
use tpu_sdk_core::runtime::Session;
use tpu_sdk_test_support::{assert_close, litert, oracle, Rng};

/// Models whose import must fail, and the op the error must name.
const UNSUPPORTED: &[(&str, &str)] = &[("face_landmark_with_attention", "Landmarks2TransformMatrix")];

/// Models LiteRT runs as their builtin twin (`zoo/mediapipe_peer.py`: Convolution2DTransposeBias → TRANSPOSE_CONV).
const TWINNED: &[&str] = &["selfie_segmentation", "selfie_segmentation_landscape"];

/// The builtin twin of MediaPipe model `m`, written into `dir` by `zoo/mediapipe_peer.py`.
fn builtin_twin(py: &Path, m: &Path, dir: &Path) -> PathBuf {
    let twin = dir.join(m.file_name().unwrap());
    let script = tpu_sdk_test_support::repo().join("zoo").join("mediapipe_peer.py");
    let out = Command::new(py).arg(&script).arg(m).arg(&twin).output().expect("run zoo/mediapipe_peer.py");
    assert!(out.status.success(), "zoo/mediapipe_peer.py on {}: {}", m.display(), String::from_utf8_lossy(&out.stderr));
    twin
}

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
    let twins = tpu_sdk_test_support::fresh_dir("mediapipe_twins");
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
        let peer = if TWINNED.contains(&name.as_str()) { builtin_twin(&py, m, &twins) } else { m.clone() };
        let [builtin, reference] = [litert::OPTIMIZED, litert::REFERENCE]
            .map(|r| litert::run_file(&py, &peer, r, sets).unwrap_or_else(|e| panic!("LiteRT ({r}) on {name}: {e}")).remove(0));
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

fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// A one-op model x [1,h,w,cin] → y with constant OHWI weights and a bias: MediaPipe's custom
/// Convolution2DTransposeBias (`custom`), or its builtin twin TRANSPOSE_CONV v3 (output shape, weights, input, bias).
#[allow(clippy::too_many_arguments)]
fn transpose_conv_bias_model(custom: bool, [h, w, cin, cout]: [i32; 4], [kh, kw]: [i32; 2], [sh, sw]: [i32; 2], same: bool, seed: u64) -> (ModelT, [i32; 4]) {
    let size = |i: i32, k: i32, s: i32| s * (i - 1) + k - if same { (k - (i - 1) % s - 1).max(0) } else { 0 };
    let out = [1, size(h, kh, sh), size(w, kw, sw), cout];
    let mut rng = Rng::new(seed);
    let weights: Vec<f32> = (0..cout * kh * kw * cin).map(|_| rng.uniform(-1.0, 1.0)).collect();
    let bias: Vec<f32> = (0..cout).map(|_| rng.uniform(-1.0, 1.0)).collect();
    let t = |name: &str, shape: &[i32], type_, buffer| TensorT { shape: shape.to_vec(), type_, buffer, name: name.into(), ..Default::default() };
    let mut tensors = vec![t("x", &[1, h, w, cin], tt::FLOAT32, 0), t("w", &[cout, kh, kw, cin], tt::FLOAT32, 1), t("b", &[cout], tt::FLOAT32, 2), t("y", &out, tt::FLOAT32, 0)];
    let mut buffers = vec![BufferT::default(), BufferT { data: f32_bytes(&weights) }, BufferT { data: f32_bytes(&bias) }];
    let (code, op) = if custom {
        let options: Vec<u8> = [if same { 1i32 } else { 2 }, sw, sh].iter().flat_map(|v| v.to_le_bytes()).collect();
        let code = OperatorCodeT { builtin_code: bo::CUSTOM, custom_code: Some("Convolution2DTransposeBias".into()), version: 1 };
        (code, OperatorT { opcode_index: 0, inputs: vec![0, 1, 2], outputs: vec![3], builtin_options: None, custom_options: Some(options), intermediates: Vec::new() })
    } else {
        tensors.push(t("output_shape", &[4], tt::INT32, 3));
        buffers.push(BufferT { data: out.iter().flat_map(|v| v.to_le_bytes()).collect() });
        let pad = if same { padding::SAME } else { padding::VALID };
        let opts = OptionsT::new(builtin_options::TRANSPOSE_CONV).with(0, FieldT::I8(pad)).with(1, FieldT::I32(sw)).with(2, FieldT::I32(sh));
        (OperatorCodeT::builtin(bo::TRANSPOSE_CONV, 3), OperatorT { opcode_index: 0, inputs: vec![4, 1, 0, 2], outputs: vec![3], builtin_options: Some(opts), custom_options: None, intermediates: Vec::new() })
    };
    let sg = SubGraphT { tensors, inputs: vec![0], outputs: vec![3], operators: vec![op], name: Some("main".into()) };
    (ModelT { version: 3, operator_codes: vec![code], subgraphs: vec![sg], buffers, ..Default::default() }, out)
}

#[test]
fn convolution2d_transpose_bias_matches_litert_transpose_conv() {
    // ([h, w, cin, cout], kernel, stride, SAME): the selfie models' 2×2 stride-2 upsampling, odd and asymmetric
    // SAME crops, VALID, a kernel smaller than the stride, unequal strides.
    let cases: &[([i32; 4], [i32; 2], [i32; 2], bool)] = &[
        ([8, 8, 4, 3], [2, 2], [2, 2], true),
        ([5, 7, 3, 2], [3, 3], [2, 2], true),
        ([5, 6, 2, 3], [4, 3], [3, 2], true),
        ([4, 4, 2, 2], [3, 3], [2, 2], false),
        ([3, 5, 2, 2], [1, 1], [2, 3], true),
        ([6, 4, 3, 1], [3, 2], [1, 1], true),
    ];
    let mut failures = Vec::new();
    for (i, &(dims, k, s, same)) in cases.iter().enumerate() {
        let what = format!("case {i}: input {dims:?}, kernel {k:?}, stride {s:?}, {}", if same { "SAME" } else { "VALID" });
        let (custom, out) = transpose_conv_bias_model(true, dims, k, s, same, 7 + i as u64);
        let (twin, _) = transpose_conv_bias_model(false, dims, k, s, same, 7 + i as u64);
        let g = load_bytes(&custom.to_bytes(), &ImportOptions::default()).unwrap_or_else(|e| panic!("{what}: {e}"));
        assert_eq!(g.value(g.outputs[0]).shape, out.iter().map(|&d| d as usize).collect::<Vec<_>>(), "{what}");
        let x = Rng::new(100 + i as u64).f32_tensor(&[1, dims[0] as usize, dims[1] as usize, dims[2] as usize], -1.0, 1.0);
        let ours = Session::new(g).and_then(|mut s| s.run(std::slice::from_ref(&x))).unwrap_or_else(|e| panic!("{what}: {e}"));
        let Some(theirs) = litert::run(&twin.to_bytes(), litert::OPTIMIZED, &[vec![x]]) else { return };
        if let Err(e) = std::panic::catch_unwind(|| assert_close(&ours[0], &theirs[0][0], 1e-5, 1e-5, &what)) {
            failures.push(e.downcast_ref::<String>().cloned().unwrap_or(what));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn convolution2d_transpose_bias_refuses_bad_options_and_shapes_by_name() {
    let (mut m, _) = transpose_conv_bias_model(true, [4, 4, 2, 2], [2, 2], [2, 2], true, 1);
    m.subgraphs[0].operators[0].custom_options = Some(vec![1, 0, 0, 0]);
    let e = load_bytes(&m.to_bytes(), &ImportOptions::default()).unwrap_err().to_string();
    assert!(e.contains("Convolution2DTransposeBias") && e.contains("custom options are 4 bytes"), "{e}");
    let (mut m, _) = transpose_conv_bias_model(true, [4, 4, 2, 2], [2, 2], [2, 2], true, 1);
    m.subgraphs[0].operators[0].custom_options = Some([1i32, 0, 2].iter().flat_map(|v| v.to_le_bytes()).collect());
    let e = load_bytes(&m.to_bytes(), &ImportOptions::default()).unwrap_err().to_string();
    assert!(e.contains("Convolution2DTransposeBias") && e.contains("strides"), "{e}");
    let (mut m, _) = transpose_conv_bias_model(true, [4, 4, 2, 2], [2, 2], [2, 2], true, 1);
    m.subgraphs[0].tensors[2].shape = vec![3];
    m.buffers[2].data = f32_bytes(&[0.0; 3]);
    let e = load_bytes(&m.to_bytes(), &ImportOptions::default()).unwrap_err().to_string();
    assert!(e.contains("Convolution2DTransposeBias") && e.contains("does not fit"), "{e}");
    let (mut m, _) = transpose_conv_bias_model(true, [4, 4, 2, 2], [2, 2], [2, 2], true, 1);
    m.operator_codes[0].custom_code = Some("Resampler".into());
    let e = load_bytes(&m.to_bytes(), &ImportOptions::default()).unwrap_err().to_string();
    assert!(e.contains("CUSTOM(Resampler)") && e.contains("Convolution2DTransposeBias"), "{e}");
}
