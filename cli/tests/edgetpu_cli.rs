//! The edgetpu target through the command line on a machine without Coral hardware: `devices` answers
//! (no device is exit 0), `run --target edgetpu` explains what it runs, bad delegate options are refused.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn tpu_sdk(args: &[&str], env: &[(&str, &str)]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tpu-sdk")).current_dir(repo()).args(["--threads", "2"]).args(args).envs(env.iter().copied()).output().unwrap()
}

fn expect(o: Output, code: i32) -> (String, String) {
    let (out, err) = (String::from_utf8_lossy(&o.stdout).into_owned(), String::from_utf8_lossy(&o.stderr).into_owned());
    assert!(!err.contains("panicked"), "the CLI panicked:\n{err}");
    assert_eq!(o.status.code(), Some(code), "stdout:\n{out}\nstderr:\n{err}");
    (out, err)
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
