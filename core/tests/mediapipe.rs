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
//! strides, kernels and SAME/VALID padding. The attention face mesh's ops (`Landmarks2TransformMatrix`,
//! `TransformTensorBilinear`, `TransformLandmarks`) are compared with MediaPipe's own runtime in
//! `cli/tests/mediapipe_attention.rs`; here each is checked on small models against what MediaPipe's formulas give
//! (a rotated square of landmarks, bilinear samples of a linear ramp, which bilinear interpolation reproduces
//! exactly, samples out of range), and bad options and shapes must be errors that name the op.

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
const UNSUPPORTED: &[(&str, &str)] = &[];

/// Models with MediaPipe's custom ops that LiteRT cannot run: compared with MediaPipe's runtime instead
/// (`cli/tests/mediapipe_attention.rs`); here they must import.
const MEDIAPIPE_RUNTIME: &[&str] = &["face_landmark_with_attention"];

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
        if MEDIAPIPE_RUNTIME.contains(&name.as_str()) {
            println!("{name:<36} imports (compared with MediaPipe's runtime in cli/tests/mediapipe_attention.rs)");
            continue;
        }
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

// ----- MediaPipe's attention ops (v2) on small models ----------------------------------------------------------

/// A custom option value for [`flexbuffer_map`].
enum Opt {
    Int(i32),
    Float(f32),
    Ints(Vec<i32>),
}

/// The FlexBuffers map `entries` as flexbuffers' builder lays it out (keys sorted, 4-byte values): MediaPipe's
/// custom options.
fn flexbuffer_map(entries: &[(&str, Opt)]) -> Vec<u8> {
    let mut entries: Vec<&(&str, Opt)> = entries.iter().collect();
    entries.sort_by_key(|e| e.0);
    let mut b = Vec::new();
    let align = |b: &mut Vec<u8>| b.resize(b.len().div_ceil(4) * 4, 0);
    let key_at: Vec<usize> = entries.iter().map(|(k, _)| {
        let at = b.len();
        b.extend(k.as_bytes());
        b.push(0);
        at
    }).collect();
    let mut vec_at = vec![0; entries.len()];
    for (i, (_, v)) in entries.iter().enumerate() {
        if let Opt::Ints(xs) = v {
            align(&mut b);
            b.extend((xs.len() as u32).to_le_bytes());
            vec_at[i] = b.len();
            for x in xs {
                b.extend(x.to_le_bytes());
            }
        }
    }
    align(&mut b);
    b.extend((entries.len() as u32).to_le_bytes());
    let keys = b.len();
    for &k in &key_at {
        let here = b.len();
        b.extend(((here - k) as u32).to_le_bytes());
    }
    let meta = b.len();
    b.extend(((meta - keys) as u32).to_le_bytes());
    b.extend(4u32.to_le_bytes());
    b.extend((entries.len() as u32).to_le_bytes());
    let map = b.len();
    for (i, (_, v)) in entries.iter().enumerate() {
        let here = b.len();
        match v {
            Opt::Int(x) => b.extend(x.to_le_bytes()),
            Opt::Float(x) => b.extend(x.to_bits().to_le_bytes()),
            Opt::Ints(_) => b.extend(((here - vec_at[i]) as u32).to_le_bytes()),
        }
    }
    for (_, v) in &entries {
        // packed types: INT, FLOAT, VECTOR_INT, each 4 bytes wide
        b.push(match v {
            Opt::Int(_) => 1 << 2 | 2,
            Opt::Float(_) => 3 << 2 | 2,
            Opt::Ints(_) => 11 << 2 | 2,
        });
    }
    let root = b.len();
    b.extend(((root - map) as u32).to_le_bytes());
    b.push(9 << 2 | 2); // a map of 4-byte values
    b.push(4);
    b
}

/// A model of one MediaPipe custom op `name` (version `version`) whose inputs are the graph's inputs.
fn custom_op_model(name: &str, version: i32, inputs: &[&[i32]], output: &[i32], options: Vec<u8>) -> ModelT {
    let t = |n: String, shape: &[i32]| TensorT { shape: shape.to_vec(), type_: tt::FLOAT32, buffer: 0, name: n, ..Default::default() };
    let mut tensors: Vec<TensorT> = inputs.iter().enumerate().map(|(i, s)| t(format!("in{i}"), s)).collect();
    tensors.push(t("out".into(), output));
    let n = inputs.len() as i32;
    let code = OperatorCodeT { builtin_code: bo::CUSTOM, custom_code: Some(name.into()), version };
    let op = OperatorT { opcode_index: 0, inputs: (0..n).collect(), outputs: vec![n], builtin_options: None, custom_options: Some(options), intermediates: Vec::new() };
    let sg = SubGraphT { tensors, inputs: (0..n).collect(), outputs: vec![n], operators: vec![op], name: Some("main".into()) };
    ModelT { version: 3, operator_codes: vec![code], subgraphs: vec![sg], buffers: vec![BufferT::default()], ..Default::default() }
}

fn run_model(m: &ModelT, inputs: &[Tensor]) -> Tensor {
    let g = load_bytes(&m.to_bytes(), &ImportOptions::default()).unwrap_or_else(|e| panic!("import: {e}"));
    Session::new(g).and_then(|mut s| s.run(inputs)).unwrap_or_else(|e| panic!("run: {e}")).remove(0)
}

fn l2tm_options(left: i32, right: i32, subset: Vec<i32>, target: Option<f32>) -> Vec<(&'static str, Opt)> {
    let mut o = vec![
        ("left_rotation_idx", Opt::Int(left)),
        ("right_rotation_idx", Opt::Int(right)),
        ("output_height", Opt::Int(16)),
        ("output_width", Opt::Int(20)),
        ("scale_x", Opt::Float(1.5)),
        ("scale_y", Opt::Float(2.0)),
        ("subset_idxs", Opt::Ints(subset)),
    ];
    if let Some(t) = target {
        o.push(("target_rotation_radians", Opt::Float(t)));
    }
    o
}

/// Landmarks: 0 and 1 on a line through (50, 60) at angle `phi`, 2..5 the corners of a square of side 20 about
/// (50, 60) rotated by `phi` (z: junk MediaPipe ignores).
fn square_landmarks(phi: f64) -> Tensor {
    let (c, s) = (phi.cos(), phi.sin());
    let at = |u: f64, v: f64| [50.0 + c * u - s * v, 60.0 + s * u + c * v];
    let pts = [at(-10.0, 0.0), at(10.0, 0.0), at(-10.0, -10.0), at(10.0, -10.0), at(10.0, 10.0), at(-10.0, 10.0)];
    Tensor::from_f32(vec![1, 6, 3], pts.iter().enumerate().flat_map(|(i, p)| [p[0] as f32, p[1] as f32, i as f32 * 7.0]).collect())
}

/// The transform MediaPipe's formula gives when the crop is rotated by `angle`, has size (bw, bh) and centre
/// (50, 60): output pixel (u, v) ↦ centre + R(angle) · (sx·(u − w/2), sy·(v − h/2)), sx = 1.5·bw/20,
/// sy = 2·bh/16.
fn expected_matrix(angle: f64, bw: f64, bh: f64) -> Vec<f64> {
    let (c, s) = (angle.cos(), angle.sin());
    let (sx, sy) = (1.5 * bw / 20.0, 2.0 * bh / 16.0);
    let (u0, v0) = (-10.0, -8.0);
    vec![
        c * sx, -s * sy, 0.0, 50.0 + c * sx * u0 - s * sy * v0, //
        s * sx, c * sy, 0.0, 60.0 + s * sx * u0 + c * sy * v0, //
        0.0, 0.0, 1.0, 0.0, //
        0.0, 0.0, 0.0, 1.0,
    ]
}

fn assert_close_f64(got: &Tensor, want: &[f64], tol: f64, what: &str) {
    let got = got.to_f64_vec();
    assert_eq!(got.len(), want.len(), "{what}");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!((g - w).abs() <= tol, "{what}: element {i} is {g}, expected {w} (all: {got:?})");
    }
}

#[test]
fn landmarks_to_transform_matrix_of_a_rotated_square() {
    let phi = 30f64.to_radians();
    let x = square_landmarks(phi);
    let model = |left, right, target| custom_op_model("Landmarks2TransformMatrix", 2, &[&[1, 6, 3]], &[1, 4, 4], flexbuffer_map(&l2tm_options(left, right, vec![2, 3, 4, 5], target)));
    // the crop follows the landmarks' direction: the square un-rotated is a 20×20 box
    let m = run_model(&model(0, 1, None), std::slice::from_ref(&x));
    assert_eq!(m.shape, vec![1, 4, 4]);
    assert_close_f64(&m, &expected_matrix(phi, 20.0, 20.0), 1e-4, "target 0");
    // a target rotation of 90°: r = π/2 − φ, the crop is turned by φ − π/2 (the square's box is 20×20 again)
    let m = run_model(&model(0, 1, Some(std::f32::consts::FRAC_PI_2)), std::slice::from_ref(&x));
    assert_close_f64(&m, &expected_matrix(phi - std::f64::consts::FRAC_PI_2, 20.0, 20.0), 1e-4, "target π/2");
    // left and right the same landmark: atan2(0, 0) = 0, no rotation; the box bounds the tilted square
    let side = 20.0 * (phi.cos() + phi.sin());
    let m = run_model(&model(2, 2, None), std::slice::from_ref(&x));
    assert_close_f64(&m, &expected_matrix(0.0, side, side), 1e-4, "a zero direction");
    // an odd subset list pairs its last index with itself (MediaPipe) — the same box
    let m = run_model(&custom_op_model("Landmarks2TransformMatrix", 2, &[&[1, 6, 3]], &[1, 4, 4], flexbuffer_map(&l2tm_options(0, 1, vec![2, 3, 4, 5, 4], None))), &[x]);
    assert_close_f64(&m, &expected_matrix(phi, 20.0, 20.0), 1e-4, "odd subset");
}

/// The sample position of output pixel (u, v) under MediaPipe's v2 bilinear transform (pixel centres).
fn sample_at(m: &[f32; 16], u: usize, v: usize) -> (f64, f64) {
    let m = m.map(|x| x as f64);
    let (u, v) = (u as f64 + 0.5, v as f64 + 0.5);
    (m[0] * u + m[1] * v + m[3] - 0.5, m[4] * u + m[5] * v + m[7] - 0.5)
}

#[test]
fn transform_tensor_bilinear_samples_a_ramp_exactly_and_zero_outside() {
    // data (h, w, c) ↦ 10h + w + 100c: bilinear interpolation reproduces a linear function exactly
    let (h, w, ch, oh, ow) = (6usize, 7usize, 2usize, 5usize, 4usize);
    let x = Tensor::from_f32(vec![1, h, w, ch], (0..h * w * ch).map(|i| (10 * (i / (w * ch)) + (i / ch) % w + 100 * (i % ch)) as f32).collect());
    let rot = 25f32.to_radians();
    let matrices: [[f32; 16]; 5] = [
        [1.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0],
        [1.0, 0.0, 0.0, 0.25, 0.0, 1.0, 0.0, 1.5, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0],
        // scaled up past the input: the right and lower samples fall outside
        [1.7, 0.0, 0.0, 0.3, 0.0, 1.3, 0.0, 0.2, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0],
        [rot.cos(), -rot.sin(), 0.0, 2.1, rot.sin(), rot.cos(), 0.0, 0.7, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0],
        // shifted left and up: samples at negative positions are 0
        [0.9, 0.1, 0.0, -1.3, -0.1, 0.9, 0.0, -0.8, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0],
    ];
    let options = flexbuffer_map(&[("output_height", Opt::Int(oh as i32)), ("output_width", Opt::Int(ow as i32))]);
    let model = custom_op_model("TransformTensorBilinear", 2, &[&[1, h as i32, w as i32, ch as i32], &[1, 4, 4]], &[1, oh as i32, ow as i32, ch as i32], options);
    let (mut inside, mut outside) = (0, 0);
    for (k, mat) in matrices.iter().enumerate() {
        let y = run_model(&model, &[x.clone(), Tensor::from_f32(vec![1, 4, 4], mat.to_vec())]);
        assert_eq!(y.shape, vec![1, oh, ow, ch]);
        let y = y.to_f64_vec();
        for v in 0..oh {
            for u in 0..ow {
                let (sx, sy) = sample_at(mat, u, v);
                let margin = sx.min(sy).min(w as f64 - 1.0 - sx).min(h as f64 - 1.0 - sy);
                if margin.abs() < 1e-3 {
                    continue; // on the border: float rounding decides
                }
                for c in 0..ch {
                    let want = if margin > 0.0 { 10.0 * sy + sx + 100.0 * c as f64 } else { 0.0 };
                    let got = y[(v * ow + u) * ch + c];
                    assert!((got - want).abs() <= 1e-3, "matrix {k}, pixel ({u}, {v}) channel {c}: {got}, expected {want} (sample at {sx}, {sy})");
                }
                if margin > 0.0 { inside += 1 } else { outside += 1 }
            }
        }
    }
    assert!(inside > 40 && outside > 10, "{inside} samples inside, {outside} outside");
    // a sample exactly on the last pixel (x = W − 1) reads it (its right neighbour has weight 0)
    let mut mat = matrices[0];
    mat[3] = (w - ow) as f32; // output column ow − 1 samples input column w − 1
    let y = run_model(&model, &[x.clone(), Tensor::from_f32(vec![1, 4, 4], mat.to_vec())]).to_f64_vec();
    assert_eq!(y[(ow - 1) * ch], (w - 1) as f64);
}

#[test]
fn transform_landmarks_applies_the_affine_part() {
    let mat = [0.5f32, -1.0, 9.0, 3.0, 2.0, 0.25, 9.0, -4.0, 9.0, 9.0, 9.0, 9.0, 9.0, 9.0, 9.0, 9.0];
    for d in [2usize, 3] {
        let x = Tensor::from_f32(vec![1, 4, d], (0..4 * d).map(|i| i as f32 * 1.5 - 2.0).collect());
        let model = custom_op_model("TransformLandmarks", 2, &[&[1, 4, d as i32], &[1, 4, 4]], &[1, 4, d as i32], Vec::new());
        let y = run_model(&model, &[x.clone(), Tensor::from_f32(vec![1, 4, 4], mat.to_vec())]);
        let xs = x.to_f64_vec();
        let m = mat.map(|v| v as f64);
        let want: Vec<f64> = xs
            .chunks(d)
            .flat_map(|p| {
                let mut q = vec![m[0] * p[0] + m[1] * p[1] + m[3], m[4] * p[0] + m[5] * p[1] + m[7]];
                q.extend(p.get(2));
                q
            })
            .collect();
        assert_close_f64(&y, &want, 1e-5, &format!("{d}-D landmarks"));
    }
}

#[test]
fn mediapipe_attention_ops_refuse_bad_options_and_shapes_by_name() {
    let l2tm = |opts: &[(&str, Opt)], shape: &[i32], version: i32| custom_op_model("Landmarks2TransformMatrix", version, &[shape], &[1, 4, 4], flexbuffer_map(opts));
    let err = |m: ModelT| load_bytes(&m.to_bytes(), &ImportOptions::default()).unwrap_err().to_string();
    let good = l2tm_options(0, 1, vec![2, 3], None);
    let without = |key: &str| -> Vec<(&'static str, Opt)> { l2tm_options(0, 1, vec![2, 3], None).into_iter().filter(|(k, _)| *k != key).collect() };
    let cases: Vec<(ModelT, &str)> = vec![
        (l2tm(&without("scale_x"), &[1, 6, 3], 2), "'scale_x' is missing"),
        (l2tm(&without("subset_idxs"), &[1, 6, 3], 2), "'subset_idxs' is missing"),
        (l2tm(&l2tm_options(0, 1, vec![2, 3], None).into_iter().chain([("bbox_size_multiplier", Opt::Float(1.0))]).collect::<Vec<_>>(), &[1, 6, 3], 2), "'bbox_size_multiplier'"),
        (l2tm(&l2tm_options(0, 6, vec![2, 3], None), &[1, 6, 3], 2), "right_rotation_idx 6"),
        (l2tm(&l2tm_options(0, 1, vec![2, -1], None), &[1, 6, 3], 2), "subset_idxs entry -1"),
        (l2tm(&l2tm_options(0, 1, vec![], None), &[1, 6, 3], 2), "subset_idxs is empty"),
        (l2tm(&[("scale_x", Opt::Int(0))].into_iter().chain(without("scale_x")).collect::<Vec<_>>(), &[1, 6, 3], 2), "must be positive"),
        (l2tm(&good, &[1, 6, 2], 2), "[1, N, 3]"),
        (l2tm(&good, &[1, 6, 3], 1), "version 1"),
        (custom_op_model("Landmarks2TransformMatrix", 2, &[&[1, 6, 3]], &[1, 4, 4], vec![1, 2, 3, 4, 5]), "flexbuffer"),
        (custom_op_model("TransformTensorBilinear", 2, &[&[1, 8, 8, 2], &[1, 4, 4]], &[1, 4, 4, 2], flexbuffer_map(&[("output_height", Opt::Int(4))])), "'output_width' is missing"),
        (custom_op_model("TransformTensorBilinear", 2, &[&[1, 8, 8, 2], &[1, 3, 4]], &[1, 4, 4, 2], flexbuffer_map(&[("output_height", Opt::Int(4)), ("output_width", Opt::Int(4))])), "[1, 4, 4] transform matrix"),
        (custom_op_model("TransformTensorBilinear", 2, &[&[2, 8, 8, 2], &[1, 4, 4]], &[2, 4, 4, 2], flexbuffer_map(&[("output_height", Opt::Int(4)), ("output_width", Opt::Int(4))])), "one batch"),
        // the options must agree with the declared output
        (custom_op_model("TransformTensorBilinear", 2, &[&[1, 8, 8, 2], &[1, 4, 4]], &[1, 4, 4, 2], flexbuffer_map(&[("output_height", Opt::Int(5)), ("output_width", Opt::Int(4))])), "declared"),
        (custom_op_model("TransformLandmarks", 2, &[&[1, 5, 4], &[1, 4, 4]], &[1, 5, 4], Vec::new()), "[1, N, 2 or 3]"),
        (custom_op_model("TransformLandmarks", 2, &[&[1, 5, 2]], &[1, 5, 2], Vec::new()), "2 inputs"),
    ];
    for (i, (m, want)) in cases.into_iter().enumerate() {
        let op = m.operator_codes[0].custom_code.clone().unwrap();
        let e = err(m);
        assert!(e.contains(&op) && e.contains(want), "case {i}: the error should name {op} and say '{want}': {e}");
    }
}
