//! silero-vad's combined 8 kHz + 16 kHz model (`silero_vad.onnx` of the silero-vad wheel): an outer `If` on the
//! sample-rate input `sr` picks one of two whole networks, and only the one taken fits the chunk length given
//! (576 samples at 16 kHz, 288 at 8 kHz). Checked against onnxruntime, which only ever looks at the branch it
//! takes: the library loads it with `sr` left an input (the branch that does not fit is kept as an error if
//! taken), `run` binds `sr` to the value given so that the `If` folds (cpu and cloud-tpu on the XLA CPU
//! plugin; also when streaming at 8 kHz with `--chunk 256 --context 32 --state-from stateN=state`), and
//! `compile --bind sr=8000` AOT-compiles it for v5e:2x2 (with `TPU_SDK_LIBTPU`). Needs
//! `$TPU_SDK_PYTHON`; without it the tests say so and pass, unless `TPU_SDK_REQUIRE_ORACLES=1`.

use std::path::{Path, PathBuf};
use std::process::Command;

use tpu_sdk::core::npy;
use tpu_sdk::{LoadOptions, Model, Tensor};
use tpu_sdk_test_support::cli::{self, expect, ok};
use tpu_sdk_test_support::random::Rng;
use tpu_sdk_test_support::{fresh_dir, onnxruntime, oracle, relative_to_mean, repo};

fn tpu_sdk(args: &[&str]) -> std::process::Output {
    cli::run(env!("CARGO_BIN_EXE_tpu-sdk"), args)
}

/// The model from the zoo's cache, fetched from its wheel (zoo/build_wheels.py) when missing.
fn model(py: &Path) -> Option<PathBuf> {
    let p = repo().join(".cache/zoo/models/silero_vad_8k16k/model.onnx");
    if !p.exists() {
        let st = Command::new(py).arg(repo().join("zoo/build_wheels.py")).env("ZOO_ONLY", "silero_vad_8k16k").status();
        if !st.is_ok_and(|s| s.success()) || !p.exists() {
            oracle::skip("silero-vad could not be fetched from PyPI (zoo/build_wheels.py)");
            return None;
        }
    }
    Some(p)
}

/// The two rates and the samples per call at each (a 512/256-sample chunk and its 64/32 samples of context).
const RATES: [(i64, usize); 2] = [(16000, 576), (8000, 288)];

/// Audio-like input in [-1, 1], a small random LSTM state and the rate, as (name, tensor).
fn inputs(sr: i64, n: usize, seed: u64) -> Vec<(String, Tensor)> {
    let mut r = Rng::new(seed);
    let x: Vec<f32> = (0..n).map(|_| r.uniform(-1.0, 1.0)).collect();
    let s: Vec<f32> = (0..256).map(|_| r.uniform(-0.5, 0.5)).collect();
    vec![
        ("input".into(), Tensor::from_f32(vec![1, n], x)),
        ("state".into(), Tensor::from_f32(vec![2, 1, 128], s)),
        ("sr".into(), Tensor::from_i64(vec![], vec![sr])),
    ]
}

/// `run` on `target` (extra flags) with the inputs written as named .npy files; the outputs.
fn run_cli(model: &Path, dir: &Path, named: &[(String, Tensor)], target: &[&str]) -> Vec<Tensor> {
    std::fs::create_dir_all(dir).unwrap();
    let mut args: Vec<String> = vec!["run".into(), model.display().to_string()];
    for (name, t) in named {
        let p = dir.join(format!("{name}.npy"));
        npy::write(&p, t).unwrap();
        args.extend(["--input".into(), format!("{name}={}", p.display())]);
    }
    let out = dir.join("out");
    args.extend(["--output-dir".into(), out.display().to_string()]);
    args.extend(target.iter().map(|s| s.to_string()));
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    ok(tpu_sdk(&a));
    (0..2).map(|k| npy::read(&out.join(format!("output_{k}.npy"))).unwrap()).collect()
}

fn compare(what: &str, ours: &[Tensor], theirs: &[Tensor]) {
    assert_eq!(ours.len(), theirs.len(), "{what}: output count");
    for (k, (a, b)) in ours.iter().zip(theirs).enumerate() {
        assert_eq!(a.shape, b.shape, "{what}: output {k} shape");
        relative_to_mean(what, k, a, b, "onnxruntime", 1e-4).unwrap_or_else(|e| panic!("{e}"));
    }
}

#[test]
fn both_rates_match_onnxruntime_on_the_cpu_with_sr_an_input_and_bound() {
    let Some(py) = oracle::python() else { return };
    let Some(model) = model(&py) else { return };
    let dir = fresh_dir("silero_rates_cpu");
    for (sr, n) in RATES {
        let mut opts = LoadOptions::default();
        opts.input_shapes.insert("input".into(), vec![1, n]);
        // sr stays an input: the branch of the other rate does not fit n samples and is kept as an error if taken
        let m = Model::load_with(&model, &opts).unwrap_or_else(|e| panic!("sr {sr}: load: {e}"));
        // (the 16 kHz network also takes 288 samples; the 8 kHz one does not take 576)
        let text = m.graph().to_string();
        assert_eq!(text.contains("else 'If_0_else_branch' cannot run with these shapes (an error if taken)"), n == 576, "sr {sr}");
        for seed in [1, 2] {
            let named = inputs(sr, n, seed);
            let theirs = onnxruntime::run_model(&py, &model, &named, &dir.join(format!("ort_{sr}_{seed}")));
            let feed: Vec<Tensor> = named.iter().map(|(_, t)| t.clone()).collect();
            let ours = m.prepare("cpu").and_then(|mut e| e.run(&feed)).unwrap_or_else(|e| panic!("sr {sr}: run: {e}"));
            compare(&format!("sr {sr} (library)"), &ours, &theirs);
            // `run` binds sr to the value given: the If folds to the branch of that rate
            let cli = run_cli(&model, &dir.join(format!("cli_{sr}_{seed}")), &named, &[]);
            compare(&format!("sr {sr} (run)"), &cli, &theirs);
            // the same with the inputs given by position (sr, the last, taken out; the others keep their slots)
            let d = dir.join(format!("pos_{sr}_{seed}"));
            std::fs::create_dir_all(&d).unwrap();
            let files: Vec<String> = named.iter().map(|(n, t)| {
                let p = d.join(format!("{n}.npy"));
                npy::write(&p, t).unwrap();
                p.display().to_string()
            }).collect();
            let out = d.join("out");
            ok(tpu_sdk(&["run", model.to_str().unwrap(), "--input", &files[0], "--input", &files[1], "--input", &files[2], "--output-dir", out.to_str().unwrap()]));
            let pos: Vec<Tensor> = (0..2).map(|k| npy::read(&out.join(format!("output_{k}.npy"))).unwrap()).collect();
            compare(&format!("sr {sr} (run, positional)"), &pos, &theirs);
        }
    }
}

/// onnxruntime streaming `audio` (`[1, n]`) through the model at 8 kHz the way silero's wrapper does: pieces of
/// 256 samples after the 32 before them, the last one zero-padded, the state carried; (probabilities, final state).
const ORT_STREAM_8K: &str = r#"
import sys, numpy as np, onnxruntime as ort
model, audio, out = sys.argv[1:]
s = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
x = np.load(audio)[0]
state, ctx, probs = np.zeros((2, 1, 128), np.float32), np.zeros(32, np.float32), []
for start in range(0, len(x), 256):
    piece = np.pad(x[start:start + 256], (0, 256 - len(x[start:start + 256])))
    p, state = s.run(None, {"input": np.concatenate([ctx, piece])[None], "state": state, "sr": np.array(8000, np.int64)})
    ctx = piece[-32:]
    probs.append(p)
np.save(out + "/probs.npy", np.stack(probs).astype(np.float32))
np.save(out + "/state.npy", state)
"#;

#[test]
fn streaming_at_8_khz_matches_onnxruntime() {
    let Some(py) = oracle::python() else { return };
    let Some(model) = model(&py) else { return };
    let dir = fresh_dir("silero_rates_stream");
    // two seconds: a quiet second, then a tone with noise
    let mut r = Rng::new(9);
    let audio: Vec<f32> = (0..16000).map(|i| if i < 8000 { 0.0 } else { 0.3 * (i as f32 / 7.0).sin() + r.uniform(-0.05, 0.05) }).collect();
    let a = dir.join("audio.npy");
    npy::write(&a, &Tensor::from_f32(vec![1, 16000], audio)).unwrap();
    let sr = dir.join("sr.npy");
    npy::write(&sr, &Tensor::from_i64(vec![], vec![8000])).unwrap();
    let out = dir.join("ours");
    let (input, rate) = (format!("input={}", a.display()), format!("sr={}", sr.display()));
    ok(tpu_sdk(&["run", model.to_str().unwrap(), "--input", &input, "--input", &rate, "--chunk", "256", "--context", "32",
                 "--state-from", "stateN=state", "--output-dir", out.to_str().unwrap()]));
    let st = Command::new(&py).arg("-c").arg(ORT_STREAM_8K).arg(&model).arg(&a).arg(&dir).status().unwrap();
    assert!(st.success(), "onnxruntime's stream failed");
    let (ours, theirs) = (npy::read(&out.join("output_0.npy")).unwrap(), npy::read(&dir.join("probs.npy")).unwrap());
    assert_eq!(ours.shape, vec![63, 1, 1]);
    compare("8 kHz stream", &[ours, npy::read(&out.join("output_1.npy")).unwrap()], &[theirs, npy::read(&dir.join("state.npy")).unwrap()]);
}

#[test]
fn a_rate_the_chunk_length_does_not_fit_is_a_clear_error() {
    let Some(py) = oracle::python() else { return };
    let Some(model) = model(&py) else { return };
    let mut opts = LoadOptions::default();
    opts.input_shapes.insert("input".into(), vec![1, 576]);
    let m = Model::load_with(&model, &opts).unwrap();
    let mut feed: Vec<Tensor> = inputs(8000, 576, 3).into_iter().map(|(_, t)| t).collect();
    let e = m.prepare("cpu").and_then(|mut e| e.run(&feed)).unwrap_err().to_string();
    assert!(e.contains("'If_0'") && e.contains("takes else_branch, which cannot run with the input shapes") && e.contains("LSTM input X must be 3-D"), "{e}");
    // the session stays usable: the rate that fits still runs
    feed[2] = Tensor::from_i64(vec![], vec![16000]);
    m.prepare("cpu").and_then(|mut e| e.run(&feed)).unwrap();

    // `run` binds sr=8000, so only the 8 kHz network is imported, and it does not fit 576 samples
    let dir = fresh_dir("silero_rates_bad");
    let mut args: Vec<String> = vec!["run".into(), model.display().to_string()];
    for (name, t) in inputs(8000, 576, 3) {
        let p = dir.join(format!("{name}.npy"));
        npy::write(&p, &t).unwrap();
        args.extend(["--input".into(), format!("{name}={}", p.display())]);
    }
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    let (_, err) = expect(tpu_sdk(&a), 3);
    assert!(err.contains("cannot load") && err.contains("LSTM input X must be 3-D"), "{err}");
    // --bind that disagrees with the input given
    let b = a.iter().copied().chain(["--bind", "sr=16000"]).collect::<Vec<_>>();
    let (_, err) = expect(tpu_sdk(&b), 2);
    assert!(err.contains("input 'sr' is given as [8000.0] but bound with --bind to [16000.0]"), "{err}");
    // binding an input the model does not have, or a value that is not a number
    let path = model.display().to_string();
    let (_, err) = expect(tpu_sdk(&["compile", &path, "--target", "cloud-tpu", "-o", "/dev/null", "--bind", "rate=16000"]), 2);
    assert!(err.contains("a value is bound to 'rate', which is not a graph input (inputs: input, sr, state)"), "{err}");
    let (_, err) = expect(tpu_sdk(&["compile", &path, "--target", "cloud-tpu", "-o", "/dev/null", "--bind", "sr=fast"]), 2);
    assert!(err.contains("--bind 'sr=fast': 'fast' is not a number or true/false"), "{err}");
}

#[cfg(feature = "cloud-tpu")]
#[test]
fn both_rates_match_onnxruntime_on_cloud_tpu_and_a_fixed_rate_compiles_for_v5e() {
    let Some(py) = oracle::python() else { return };
    let Some(model) = model(&py) else { return };
    let Some(plugin) = oracle::xla_cpu_plugin_of_python() else {
        oracle::skip("the XLA CPU plugin was not found through TPU_SDK_PYTHON");
        return;
    };
    let dir = fresh_dir("silero_rates_cloud");
    let p = plugin.display().to_string();
    for (sr, n) in RATES {
        let named = inputs(sr, n, 4);
        let theirs = onnxruntime::run_model(&py, &model, &named, &dir.join(format!("ort_{sr}")));
        let ours = run_cli(&model, &dir.join(format!("cli_{sr}")), &named, &["--target", "cloud-tpu", "--plugin", &p]);
        compare(&format!("sr {sr} (cloud-tpu)"), &ours, &theirs);
    }
    // compiling with sr free cannot lower the branch that does not fit; the error says how to fix it
    let path = model.display().to_string();
    let mlir = dir.join("m.mlir");
    let (_, err) = expect(tpu_sdk(&["compile", &path, "--target", "cloud-tpu", "-o", mlir.to_str().unwrap(), "--input-shape", "input=1,576"]), 3);
    assert!(err.contains("else_branch cannot run with the input shapes") && err.contains("--bind NAME=VALUE"), "{err}");
    ok(tpu_sdk(&["compile", &path, "--target", "cloud-tpu", "-o", mlir.to_str().unwrap(), "--input-shape", "input=1,576", "--bind", "sr=16000"]));
    // sr is no longer an argument, and the If folded away
    let text = std::fs::read_to_string(&mlir).unwrap();
    assert!(text.contains("func.func @main(%arg0: tensor<1x576xf32>, %arg1: tensor<2x1x128xf32>) ->") && !text.contains("stablehlo.if"), "{text}");
    if let Some(libtpu) = oracle::libtpu_path() {
        let exe = dir.join("v5e.pjrt");
        let st = cli::command(env!("CARGO_BIN_EXE_tpu-sdk"))
            .args(["compile", &path, "--target", "cloud-tpu", "--topology", "v5e:2x2", "-o", exe.to_str().unwrap(), "--plugin"])
            .arg(&libtpu)
            .args(["--input-shape", "input=1,288", "--bind", "sr=8000"])
            .envs([("TPU_SKIP_MDS_QUERY", "1"), ("TPU_ACCELERATOR_TYPE", "v5litepod-4"), ("TPU_WORKER_ID", "0"), ("TPU_WORKER_HOSTNAMES", "localhost")])
            .output()
            .unwrap();
        ok(st);
        assert!(std::fs::metadata(&exe).unwrap().len() > 1000, "no executable written");
    }
}
