//! Test helpers shared by the Edge TPU runtime tests and the command-line tests (which include this file with
//! `#[path]`): stub TFLite C / libedgetpu libraries built with `cc` from tests/stubs/, and a minimal compiled
//! Edge TPU model.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

use tpu_sdk_core::import::tflite::builder::{BufferT, ModelT, OperatorCodeT, OperatorT, QuantizationT, SubGraphT, TensorT};

/// The stub libraries in a temporary folder; `calls.log` there records every call.
pub struct Stubs {
    pub dir: tempfile::TempDir,
    pub tflite: PathBuf,
    pub edgetpu: PathBuf,
}

/// The workspace root: `file!()` paths are relative to it.
fn workspace_root() -> PathBuf {
    let mut d = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    while !d.join("Cargo.lock").is_file() && d.pop() {}
    d
}

impl Stubs {
    pub fn log(&self) -> Vec<String> {
        std::fs::read_to_string(self.dir.path().join("calls.log")).unwrap_or_default().lines().map(String::from).collect()
    }

    /// Compiles both stubs with `defines` into a fresh folder; `None` (said visibly) without a C compiler.
    pub fn build(defines: &[&str]) -> Option<Stubs> {
        let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
        if Command::new(&cc).arg("--version").output().is_err() {
            eprintln!("SKIPPED: no C compiler ({cc}) to build the stub libraries");
            return None;
        }
        let dir = tempfile::tempdir().unwrap();
        let src = Path::new(file!()).parent().expect("tests/common").with_file_name("stubs");
        let src = if src.is_absolute() { src } else { workspace_root().join(src) };
        let log = dir.path().join("calls.log");
        let build = |c: &str, out: &Path| {
            let o = Command::new(&cc)
                .args(["-shared", "-fPIC", "-O1", "-o"])
                .arg(out)
                .arg(src.join(c))
                .arg(format!("-DLOG_PATH=\"{}\"", log.display()))
                .args(defines.iter().map(|d| format!("-D{d}")))
                .output()
                .unwrap();
            assert!(o.status.success(), "cc {c}: {}", String::from_utf8_lossy(&o.stderr));
        };
        let tflite = dir.path().join("libtensorflowlite_c.so");
        let edgetpu = dir.path().join("libedgetpu.so.1");
        build("tflite_stub.c", &tflite);
        build("edgetpu_stub.c", &edgetpu);
        Some(Stubs { dir, tflite, edgetpu })
    }
}

/// A `.tflite` whose one op is `custom_code` (int8 [1, 8] in and out), as edgetpu_compiler writes them.
pub fn model(custom_code: &str) -> Vec<u8> {
    // int8 tensors with per-tensor parameters, as the Edge TPU's inputs and outputs have.
    let t = |name: &str, scale: f32, zero_point: i64| TensorT {
        shape: vec![1, 8],
        type_: 9,
        buffer: 0,
        name: name.into(),
        quantization: Some(QuantizationT { scale: vec![scale], zero_point: vec![zero_point], ..Default::default() }),
        ..Default::default()
    };
    ModelT {
        version: 3,
        operator_codes: vec![OperatorCodeT { builtin_code: 32, custom_code: Some(custom_code.into()), version: 1 }],
        subgraphs: vec![SubGraphT {
            tensors: vec![t("input", 0.5, -3), t("output", 0.25, 1)],
            inputs: vec![0],
            outputs: vec![1],
            operators: vec![OperatorT { opcode_index: 0, inputs: vec![0], outputs: vec![1], custom_options: Some(vec![1, 2, 3]), ..Default::default() }],
            name: Some("main".into()),
        }],
        buffers: vec![BufferT::default()],
        ..Default::default()
    }
    .to_bytes()
}

