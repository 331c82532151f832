//! The command-line contract: outputs, JSON, exit codes and error messages, and no panic on bad files.

use std::process::Output;

use tpu_sdk::core::npy;
use tpu_sdk::{DType, Tensor};
use tpu_sdk_test_support::cli::{self, assert_cannot_load, expect, noise, truncations};
use tpu_sdk_test_support::repo;

const MODEL: &str = "examples/models/text_direction_cls.onnx";

fn tpu_sdk(args: &[&str]) -> Output {
    cli::run(env!("CARGO_BIN_EXE_tpu-sdk"), args)
}

fn classify(image: &str) -> String {
    let (out, _) = expect(
        tpu_sdk(&[
            "run", MODEL, "--input-shape", "x=1,3,48,192", "--image", image, "--mean", "0.5", "--std", "0.5", "--top-k", "1",
            "--labels", "examples/models/text_direction_cls.labels.txt", "--json",
        ]),
        0,
    );
    let doc: serde_json::Value = serde_json::from_str(&out).unwrap();
    doc["top_k"][0]["label"].as_str().unwrap().to_string()
}

#[test]
fn the_trained_example_model_tells_upright_from_upside_down_text() {
    assert_eq!(classify("examples/images/text_upright.png"), "0");
    assert_eq!(classify("examples/images/text_upside_down.png"), "180");
}

#[test]
fn run_writes_outputs_in_order_and_reports_json() {
    let tmp = tempfile::tempdir().unwrap();
    let x = tmp.path().join("x.npy");
    npy::write(&x, &Tensor::zeros(DType::F32, vec![2, 3, 48, 192])).unwrap();
    let out_dir = tmp.path().join("out");
    let (out, _) = expect(
        tpu_sdk(&["run", MODEL, "--target", "cpu", "--input", x.to_str().unwrap(), "--output-dir", out_dir.to_str().unwrap(), "--json"]),
        0,
    );
    let doc: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(doc["outputs"][0]["shape"], serde_json::json!([2, 2]));
    let y = npy::read(&out_dir.join("output_0.npy")).unwrap();
    assert_eq!(y.shape, vec![2, 2]);
    let s = y.as_f32().unwrap();
    assert!((s[0] + s[1] - 1.0).abs() < 1e-5, "softmax scores sum to 1: {s:?}");
    // named input form
    let named = format!("x={}", x.display());
    expect(tpu_sdk(&["run", MODEL, "--input", &named]), 0);
}

#[test]
fn wrong_inputs_exit_2_and_show_expected_and_given() {
    let tmp = tempfile::tempdir().unwrap();
    let bad = tmp.path().join("bad.npy");
    npy::write(&bad, &Tensor::zeros(DType::F32, vec![1, 3, 48, 100])).unwrap();
    let (_, err) = expect(tpu_sdk(&["run", MODEL, "--input-shape", "x=1,3,48,192", "--input", bad.to_str().unwrap()]), 2);
    assert!(err.contains("expected") && err.contains("[1, 3, 48, 192]") && err.contains("[1, 3, 48, 100]"), "{err}");

    let ints = tmp.path().join("ints.npy");
    npy::write(&ints, &Tensor::zeros(DType::I64, vec![1, 3, 48, 192])).unwrap();
    let (_, err) = expect(tpu_sdk(&["run", MODEL, "--input-shape", "x=1,3,48,192", "--input", ints.to_str().unwrap()]), 2);
    assert!(err.contains("f32") && err.contains("i64"), "{err}");

    let (_, err) = expect(tpu_sdk(&["run", MODEL, "--input", bad.to_str().unwrap(), "--input", bad.to_str().unwrap()]), 2);
    assert!(err.contains("1 input"), "{err}");

    let nope = format!("nope={}", bad.display());
    let (_, err) = expect(tpu_sdk(&["run", MODEL, "--input", &nope]), 2);
    assert!(err.contains("no input 'nope'"), "{err}");
}

#[test]
fn broken_model_files_exit_3_with_a_message_and_never_panic() {
    let tmp = tempfile::tempdir().unwrap();
    let bytes = std::fs::read(repo().join(MODEL)).unwrap();
    let mut cases = truncations(&bytes, &[1, 7, 100, 1000, bytes.len() / 2, bytes.len() - 1]);
    cases.push(("random bytes".into(), noise(4096, 12345)));
    for (what, data) in cases {
        let p = tmp.path().join("m.onnx");
        std::fs::write(&p, &data).unwrap();
        assert_cannot_load(tpu_sdk(&["inspect", p.to_str().unwrap()]), &what);
    }
    let (_, err) = expect(tpu_sdk(&["inspect", "no/such/model.onnx"]), 1);
    assert!(err.contains("no/such/model.onnx"), "{err}");
}

#[test]
fn inspect_and_bench_report_what_they_promise() {
    let (out, _) = expect(tpu_sdk(&["inspect", MODEL, "--input-shape", "x=1,3,48,192"]), 0);
    assert!(out.contains("Conv") && out.contains("MACs"), "{out}");
    let (out, _) = expect(tpu_sdk(&["inspect", MODEL, "--input-shape", "x=1,3,48,192", "--json"]), 0);
    let doc: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(doc["inputs"][0]["shape"], serde_json::json!([1, 3, 48, 192]));
    assert!(doc["macs"].as_u64().unwrap() > 1_000_000);
    assert!(doc["parameters"].as_u64().unwrap() > 100_000);

    let (out, _) = expect(tpu_sdk(&["bench", MODEL, "--input-shape", "x=1,3,48,192", "--iterations", "3", "--warmup", "1", "--json"]), 0);
    let doc: serde_json::Value = serde_json::from_str(&out).unwrap();
    let l = &doc["latency_ms"];
    assert!(l["min"].as_f64().unwrap() > 0.0 && l["min"].as_f64() <= l["median"].as_f64() && l["median"].as_f64() <= l["p90"].as_f64());
    assert!(doc["throughput_per_s"].as_f64().unwrap() > 0.0);
    // The peak resident memory of the process (VmHWM), on Linux at least the model's weights.
    // and its CPU time per timed run (all threads)
    if cfg!(target_os = "linux") {
        assert!(doc["peak_resident_bytes"].as_u64().unwrap() > 1 << 20, "{doc}");
        assert!(doc["cpu_ms_per_run"].as_f64().unwrap() > 0.0, "{doc}");
    }

    // --profile: time per op kind and every node, slowest first (op, name, output type), the nodes at most the
    // ops' total
    let (out, _) = expect(tpu_sdk(&["bench", MODEL, "--input-shape", "x=1,3,48,192", "--iterations", "3", "--warmup", "1", "--profile", "--json"]), 0);
    let doc: serde_json::Value = serde_json::from_str(&out).unwrap();
    let ops = doc["profile"].as_array().unwrap();
    let nodes = doc["slowest_nodes"].as_array().unwrap();
    assert!(!ops.is_empty() && nodes.len() > 10, "--json lists every node: {doc}");
    assert!(ops.iter().any(|o| o["op"] == "Conv"), "{doc}");
    let first = nodes[0]["node"].as_str().unwrap();
    assert!(first.contains(" -> f32[1, ") && first.contains('\''), "{first}");
    let ms = |v: &serde_json::Value| v["ms_per_run"].as_f64().unwrap();
    assert!(nodes.windows(2).all(|w| ms(&w[0]) >= ms(&w[1])), "{doc}");
    assert!(ms(&nodes[0]) <= ops.iter().map(ms).sum::<f64>() + 1e-9, "{doc}");
    let all_nodes = nodes.iter().map(ms).sum::<f64>();
    assert!(ops.iter().map(ms).sum::<f64>() <= all_nodes + 1e-3, "the op kinds (ten at most) take no more than all nodes: {doc}");

    let (_, err) = expect(tpu_sdk(&["run", MODEL, "--target", "quantum"]), 2);
    assert!(err.contains("'quantum'") && err.contains("cpu"), "{err}");
}

/// A flag of another target than `--target` is refused by the command line, naming the flag and the target it
/// belongs to (exit 3); a malformed target value is a usage error (exit 2) naming the flag.
#[test]
#[cfg(all(feature = "cloud-tpu", feature = "edgetpu"))]
fn flags_of_another_target_are_refused_by_name() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("m.pjrt");
    let compile = |target: &str, flags: &[&str]| {
        tpu_sdk(&[&["compile", MODEL, "--input-shape", "x=1,3,48,192", "--target", target, "-o", out.to_str().unwrap()], flags].concat())
    };
    for (flags, want) in [(&["--calibration-method", "mse"][..], "--calibration-method"), (&["--io-dtype", "float"][..], "--io-dtype float")] {
        let (_, err) = expect(compile("cloud-tpu", flags), 3);
        assert!(err.contains(want) && err.contains("edgetpu only"), "{err}");
    }
    let (_, err) = expect(compile("edgetpu", &["--topology", "v5e:2x2"]), 3);
    assert!(err.contains("--topology applies to --target cloud-tpu only"), "{err}");
    for (flag, value) in [("--emit", "tflite"), ("--shard", "w1"), ("--topology", "v5e"), ("--replicas", "0"), ("--calibration-method", "kl")] {
        let (_, err) = expect(compile("cloud-tpu", &[flag, value]), 2);
        assert!(err.contains(flag), "{flag} {value}: {err}");
    }
    let (_, err) = expect(tpu_sdk(&["run", MODEL, "--input-shape", "x=1,3,48,192", "--random-input", "--plugin", "/no/such.so"]), 3);
    assert!(err.contains("--plugin applies to --target cloud-tpu only, not to --target cpu"), "{err}");
    assert!(!out.exists(), "nothing is written on errors");
}
