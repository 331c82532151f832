//! Stateful streaming (`run --chunk N --context C --state-from OUTPUT=INPUT`): the pretrained silero-vad model
//! (If + LSTM, from its PyPI wheel) over a WAV of synthetic speech with pauses (`cli/tests/data/speech_16k.wav`,
//! made by `scripts/make_speech_wav.py` with espeak-ng), chunk by chunk with its LSTM state carried, against
//! onnxruntime streaming it the way silero's own wrapper does (`scripts/ort_vad_stream.py`); the same on the
//! cloud-tpu target (XLA CPU plugin); and the streaming flags' errors. Needs `$TPU_SDK_PYTHON`; without it the
//! tests say so and pass, unless `TPU_SDK_REQUIRE_ORACLES=1`.

use std::path::{Path, PathBuf};
use std::process::Command;

use tpu_sdk::core::npy;
use tpu_sdk_test_support::cli::{self, expect, ok};
use tpu_sdk_test_support::{fresh_dir, oracle, repo};

const WAV: &str = "cli/tests/data/speech_16k.wav";
/// Where the generator put speech (seconds), and the quiet stretches between and around it.
const SPEECH: [(f32, f32); 2] = [(1.00, 4.96), (6.46, 11.02)];
const SILENCE: [(f32, f32); 3] = [(0.0, 0.9), (5.3, 6.3), (11.4, 12.0)];

fn tpu_sdk(args: &[&str]) -> std::process::Output {
    cli::run(env!("CARGO_BIN_EXE_tpu-sdk"), args)
}

/// silero-vad's 16 kHz ONNX model from the zoo's cache, fetched from its wheel (zoo/build_wheels.py) when missing.
fn silero(py: &Path) -> Option<PathBuf> {
    let p = repo().join(".cache/zoo/models/silero_vad_16k/model.onnx");
    if !p.exists() {
        let st = Command::new(py).arg(repo().join("zoo/build_wheels.py")).env("ZOO_ONLY", "silero_vad_16k").status();
        if !st.is_ok_and(|s| s.success()) || !p.exists() {
            oracle::skip("silero-vad could not be fetched from PyPI (zoo/build_wheels.py)");
            return None;
        }
    }
    Some(p)
}

fn sr_file(dir: &Path) -> PathBuf {
    let p = dir.join("sr.npy");
    npy::write(&p, &tpu_sdk::Tensor::from_i64(vec![], vec![16000])).unwrap();
    p
}

/// `run` streaming the WAV through the model on `target` (extra flags appended); returns the per-chunk speech
/// probabilities and the final state.
fn stream(model: &Path, dir: &Path, target: &[&str]) -> (Vec<f32>, tpu_sdk::Tensor) {
    let sr = sr_file(dir);
    let out = dir.join(format!("out{}", target.len()));
    let input = format!("input={}", repo().join(WAV).display());
    let sr = format!("sr={}", sr.display());
    let mut args = vec!["run", model.to_str().unwrap(), "--input", &input, "--input", &sr, "--chunk", "512", "--context", "64",
                        "--state-from", "stateN=state", "--output-dir", out.to_str().unwrap(), "--json"];
    args.extend_from_slice(target);
    let doc: serde_json::Value = serde_json::from_str(&ok(tpu_sdk(&args))).unwrap();
    assert_eq!(doc["chunks"], 376, "{doc}");
    assert_eq!(doc["padding"], 115, "{doc}"); // 192,397 samples
    assert_eq!(doc["outputs"][1]["state"], true, "{doc}");
    let probs = npy::read(&out.join("output_0.npy")).unwrap();
    assert_eq!(probs.shape, vec![376, 1, 1]);
    (probs.as_f32().unwrap().to_vec(), npy::read(&out.join("output_1.npy")).unwrap())
}

/// Share of the chunks inside `span` (seconds) whose probability is at least 0.5, and the largest probability there.
fn speech_share(probs: &[f32], span: (f32, f32)) -> (f32, f32) {
    let step = 512.0 / 16000.0;
    let inside: Vec<f32> = probs.iter().enumerate().filter(|(k, _)| *k as f32 * step >= span.0 && (*k + 1) as f32 * step <= span.1).map(|(_, &p)| p).collect();
    (inside.iter().filter(|&&p| p >= 0.5).count() as f32 / inside.len() as f32, inside.iter().cloned().fold(0.0, f32::max))
}

#[test]
fn silero_vad_streams_over_a_wav_like_onnxruntime_and_finds_the_speech() {
    let Some(py) = oracle::python() else { return };
    let Some(model) = silero(&py) else { return };
    let dir = fresh_dir("streaming_vad");
    let (ours, state) = stream(&model, &dir, &[]);

    let peer = dir.join("ort");
    let st = Command::new(&py).arg(repo().join("scripts/ort_vad_stream.py")).arg(&model).arg(repo().join(WAV)).arg(&peer).status().unwrap();
    assert!(st.success(), "onnxruntime's stream failed");
    let theirs = npy::read(&peer.join("probs.npy")).unwrap();
    let worst = ours.iter().zip(theirs.as_f32().unwrap()).map(|(a, b)| (a - b).abs()).fold(0.0f32, f32::max);
    assert!(worst <= 1e-4, "speech probabilities differ from onnxruntime's by up to {worst}");
    let their_state = npy::read(&peer.join("state.npy")).unwrap();
    tpu_sdk_test_support::assert_close(&state, &their_state, 1e-4, 1e-4, "final LSTM state vs onnxruntime");
    println!("silero-vad over {WAV}: 376 chunks, worst probability difference to onnxruntime {worst:.1e}");

    // the model hears what the generator put there: speech where it spoke, nothing in the pauses
    for span in SPEECH {
        let (share, _) = speech_share(&ours, span);
        assert!(share >= 0.6, "only {:.0}% of the chunks in the speech at {span:?} s are speech", share * 100.0);
    }
    for span in SILENCE {
        let (_, top) = speech_share(&ours, span);
        assert!(top < 0.5, "speech probability {top} in the pause at {span:?} s");
    }
}

#[cfg(feature = "cloud-tpu")]
#[test]
fn the_same_stream_on_the_cloud_tpu_target_equals_the_cpu() {
    let Some(py) = oracle::python() else { return };
    let Some(model) = silero(&py) else { return };
    let Some(plugin) = oracle::xla_cpu_plugin_of_python() else {
        oracle::skip("the XLA CPU plugin was not found through TPU_SDK_PYTHON");
        return;
    };
    let dir = fresh_dir("streaming_vad_cloud");
    let (cpu, _) = stream(&model, &dir, &[]);
    let (cloud, _) = stream(&model, &dir, &["--target", "cloud-tpu", "--plugin", plugin.to_str().unwrap()]);
    let worst = cpu.iter().zip(&cloud).map(|(a, b)| (a - b).abs()).fold(0.0f32, f32::max);
    assert!(worst <= 1e-4, "cloud-tpu's probabilities differ from the cpu's by up to {worst}");
}

#[test]
fn streaming_flags_give_clear_errors() {
    let Some(py) = oracle::python() else { return };
    let Some(model) = silero(&py) else { return };
    let dir = fresh_dir("streaming_errors");
    let (m, sr) = (model.to_str().unwrap(), sr_file(&dir));
    let wav = format!("input={}", repo().join(WAV).display());
    let sr = format!("sr={}", sr.display());
    let run = |extra: &[&str]| {
        let mut a = vec!["run", m, "--input", &wav, "--input", &sr];
        a.extend_from_slice(extra);
        tpu_sdk(&a)
    };
    let (_, err) = expect(run(&["--chunk", "512", "--context", "64", "--state-from", "hidden=state"]), 2);
    assert!(err.contains("no output 'hidden'") && err.contains("stateN"), "{err}");
    let (_, err) = expect(run(&["--chunk", "512", "--context", "64", "--state-from", "stateN=c0"]), 2);
    assert!(err.contains("no input 'c0'"), "{err}");
    let (_, err) = expect(run(&["--chunk", "512", "--context", "64", "--state-from", "output=state"]), 2);
    assert!(err.contains("dtype and shape"), "{err}");
    let (_, err) = expect(run(&["--chunk", "audio=512", "--state-from", "stateN=state"]), 2);
    assert!(err.contains("no --input audio=FILE"), "{err}");
    let (_, err) = expect(run(&["--chunk", "0"]), 2);
    assert!(err.contains("chunk size"), "{err}");
    let (_, err) = expect(run(&["--state-from", "stateN"]), 2);
    assert!(err.contains("OUTPUT=INPUT"), "{err}");
    // a state input that is neither given nor fed
    let (_, err) = expect(tpu_sdk(&["run", m, "--input", &wav, "--chunk", "512", "--context", "64", "--state-from", "stateN=state"]), 2);
    assert!(err.contains("'sr' is missing"), "{err}");
    // a truncated WAV
    let bytes = std::fs::read(repo().join(WAV)).unwrap();
    let cut = dir.join("cut.wav");
    std::fs::write(&cut, &bytes[..30]).unwrap();
    let cut_arg = format!("input={}", cut.display());
    let (_, err) = expect(tpu_sdk(&["run", m, "--input", &cut_arg, "--input", &sr, "--chunk", "512", "--state-from", "stateN=state"]), 2);
    assert!(err.contains("WAV") && err.contains("cut.wav"), "{err}");
}

/// silero-vad exports to a float TFLite file (its LSTM, fed its state from the inputs, unrolled into the cell's
/// arithmetic; the int64 sample-rate arithmetic kept int64) that LiteRT runs equal to onnxruntime.
#[test]
fn silero_vad_exports_to_a_float_tflite_litert_runs() {
    use tpu_sdk::Tensor;
    use tpu_sdk_test_support::{litert, onnxruntime, relative_to_mean};
    let Some(py) = oracle::python() else { return };
    let Some(model) = silero(&py) else { return };
    let dir = fresh_dir("streaming_vad_tflite");
    let out = dir.join("silero.tflite");
    ok(tpu_sdk(&["compile", model.to_str().unwrap(), "--target", "tflite", "--input-shape", "input=1,576", "--input-shape", "state=2,1,128", "-o", out.to_str().unwrap()]));
    for seed in 1..=3u64 {
        let audio = tpu_sdk_test_support::f32_samples(&[vec![1, 576], vec![2, 1, 128]], 1, seed, -0.5, 0.5).remove(0);
        let inputs = vec![audio[0].clone(), audio[1].clone(), Tensor::from_i64(vec![], vec![16000])];
        let theirs = litert::run_file(&py, &out, litert::OPTIMIZED, std::slice::from_ref(&inputs)).unwrap().remove(0);
        let named: Vec<(String, Tensor)> = ["input", "state", "sr"].iter().map(|s| s.to_string()).zip(inputs).collect();
        let ort = onnxruntime::run_model(&py, &model, &named, &dir.join(format!("ort{seed}")));
        assert_eq!(theirs.len(), ort.len());
        for (k, (a, b)) in theirs.iter().zip(&ort).enumerate() {
            let b = Tensor { shape: a.shape.clone(), data: b.data.clone() };
            relative_to_mean("silero.tflite", k, a, &b, "onnxruntime", 1e-4).unwrap_or_else(|e| panic!("{e}"));
        }
    }
}
