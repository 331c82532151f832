//! The edgetpu target through the command line on a machine without Coral hardware: `devices` answers
//! (no device is exit 0), `run --target edgetpu` explains what it runs, bad delegate options are refused.
#![cfg(feature = "edgetpu")]

use std::path::PathBuf;
use std::process::Output;

use tpu_sdk_test_support::cli::{self, expect};

fn tpu_sdk(args: &[&str], env: &[(&str, &str)]) -> Output {
    cli::command(env!("CARGO_BIN_EXE_tpu-sdk")).args(["--threads", "2"]).args(args).envs(env.iter().copied()).output().unwrap()
}

#[test]
fn devices_answers_with_or_without_hardware() {
    let (out, _) = expect(tpu_sdk(&["devices", "--target", "edgetpu", "--json"], &[]), 0);
    let doc: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert!(doc["devices"].as_array().unwrap().iter().all(|d| d["target"] == "edgetpu"), "{doc}");
    assert_eq!(doc["problems"].as_array().unwrap().len(), 0, "{doc}");
    expect(tpu_sdk(&["devices", "--target", "edgetpu"], &[]), 0);
}

#[test]
fn run_on_edgetpu_needs_a_compiled_tflite() {
    let args = ["run", "examples/models/text_direction_cls.onnx", "--input-shape", "x=1,3,48,192", "--random-input", "--target", "edgetpu"];
    let (_, err) = expect(tpu_sdk(&args, &[]), 3);
    assert!(err.contains("compiled .tflite") && err.contains("compile"), "{err}");
    let (_, err) = expect(tpu_sdk(&args, &[("TPU_SDK_EDGETPU_OPTIONS", "Performance=Turbo")]), 3);
    assert!(err.contains("Low, Medium, High or Max"), "{err}");
}

#[path = "../../targets/edgetpu/tests/common/mod.rs"]
mod edgetpu_stubs;

/// A compiled Edge TPU model in a temporary folder, with stub libraries standing in for the TFLite C library and
/// libedgetpu (three devices: usb:0, usb:1, pci:0; the stub delegate's "program" copies input to output).
fn compiled_model_with_stubs() -> Option<(edgetpu_stubs::Stubs, PathBuf)> {
    let s = edgetpu_stubs::Stubs::build(&[])?;
    let model = s.dir.path().join("tiny_edgetpu.tflite");
    std::fs::write(&model, edgetpu_stubs::model("edgetpu-custom-op")).unwrap();
    Some((s, model))
}

fn stub_env(s: &edgetpu_stubs::Stubs) -> Vec<(&'static str, String)> {
    vec![("TPU_SDK_TFLITE_C_LIB", s.tflite.display().to_string()), ("TPU_SDK_LIBEDGETPU", s.edgetpu.display().to_string())]
}

fn with_env<'a>(env: &'a [(&'static str, String)]) -> Vec<(&'static str, &'a str)> {
    env.iter().map(|(k, v)| (*k, v.as_str())).collect()
}

#[test]
fn run_a_compiled_model_through_the_edgetpu_runtime() {
    let Some((s, model)) = compiled_model_with_stubs() else { return };
    let env = stub_env(&s);
    let input = s.dir.path().join("x.npy");
    let x = tpu_sdk::Tensor::from_vec(vec![1, 8], vec![-128i8, -3, 0, 1, 2, 50, 100, 127]).unwrap();
    tpu_sdk::core::npy::write(&input, &x).unwrap();
    let out_dir = s.dir.path().join("out");
    let m = model.to_str().unwrap();
    let args = ["run", m, "--target", "edgetpu", "--device", "usb:1", "--input", input.to_str().unwrap(), "--output-dir", out_dir.to_str().unwrap(), "--json"];
    let (out, _) = expect(tpu_sdk(&args, &with_env(&env)), 0);
    let doc: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert!(doc["latency_ms"].as_f64().unwrap() >= 0.0, "{doc}");
    assert_eq!(doc["outputs"][0]["name"], "output", "{doc}");
    // The stub program copies its input: the output went through the delegate and back.
    assert_eq!(tpu_sdk::core::npy::read(&out_dir.join("output_0.npy")).unwrap(), x);
    assert!(s.log().iter().any(|l| l.starts_with("edgetpu_create_delegate type=1 name=/sys/bus/usb/devices/2-2")), "{:?}", s.log());
    // Wrong input shapes are refused with exit code 2, a missing device with 4.
    let bad = s.dir.path().join("bad.npy");
    tpu_sdk::core::npy::write(&bad, &tpu_sdk::Tensor::zeros(tpu_sdk::DType::I8, vec![1, 9])).unwrap();
    let (_, err) = expect(tpu_sdk(&["run", m, "--target", "edgetpu", "--input", bad.to_str().unwrap()], &with_env(&env)), 2);
    assert!(err.contains("[1, 8]") || err.contains("1, 8"), "{err}");
    let (_, err) = expect(tpu_sdk(&["run", m, "--target", "edgetpu", "--device", "usb:5", "--random-input"], &with_env(&env)), 4);
    assert!(err.contains("no Edge TPU usb:5"), "{err}");
}

#[test]
fn without_libedgetpu_the_message_says_what_to_install() {
    let Some((s, model)) = compiled_model_with_stubs() else { return };
    let nowhere = s.dir.path().join("nowhere/libedgetpu.so.1");
    let env = [("TPU_SDK_TFLITE_C_LIB", s.tflite.to_str().unwrap()), ("TPU_SDK_LIBEDGETPU", nowhere.to_str().unwrap())];
    let (_, err) = expect(tpu_sdk(&["run", model.to_str().unwrap(), "--target", "edgetpu", "--random-input"], &env), 4);
    assert!(err.contains("libedgetpu1-std"), "{err}");
}

#[test]
fn bench_on_every_edgetpu_at_once() {
    let Some((s, model)) = compiled_model_with_stubs() else { return };
    let env = stub_env(&s);
    let args = ["bench", model.to_str().unwrap(), "--target", "edgetpu", "--all-devices", "--iterations", "20", "--warmup", "2", "--json"];
    let (out, _) = expect(tpu_sdk(&args, &with_env(&env)), 0);
    let doc: serde_json::Value = serde_json::from_str(&out).unwrap();
    let mut devices: Vec<&str> = doc["devices"].as_array().unwrap().iter().map(|d| d["device"].as_str().unwrap()).collect();
    devices.sort();
    assert_eq!(devices, ["pci:0", "usb:0", "usb:1"], "{doc}");
    assert!(doc["throughput_per_s"].as_f64().unwrap() > 0.0, "{doc}");
    let log = s.log();
    assert_eq!(log.iter().filter(|l| l.starts_with("edgetpu_create_delegate")).count(), 3, "one interpreter per device: {log:?}");
    assert_eq!(log.iter().filter(|l| *l == "TfLiteInterpreterInvoke").count(), 3 * 22, "{log:?}");
    // A single device too, and the text report.
    let (out, _) = expect(tpu_sdk(&["bench", model.to_str().unwrap(), "--target", "edgetpu", "--iterations", "3"], &with_env(&env)), 0);
    assert!(out.contains("latency ms"), "{out}");
}

#[test]
fn bench_all_devices_on_the_cpu_target_uses_its_one_device() {
    let args = ["bench", "examples/models/text_direction_cls.onnx", "--input-shape", "x=1,3,48,192", "--all-devices", "--iterations", "2", "--warmup", "1", "--json"];
    let (out, _) = expect(tpu_sdk(&args, &[]), 0);
    let doc: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(doc["devices"].as_array().unwrap().len(), 1, "{doc}");
}
