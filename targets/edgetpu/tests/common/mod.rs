//! Test helpers shared by the Edge TPU runtime tests and the command-line tests (which include this file with
//! `#[path]`): stub TFLite C / libedgetpu libraries built with `cc` from tests/stubs/, minimal compiled
//! Edge TPU models, and a fake `edgetpu_compiler`.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

use tpu_sdk_core::format::tflite::builder::{BufferT, ModelT, OperatorCodeT, OperatorT, QuantizationT, SubGraphT, TensorT};
use tpu_sdk_core::format::tflite::schema::tensor_type as tt;

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

/// A compiled model as the real compiler writes it: a QUANTIZE-free int8 graph with one edgetpu-custom-op.
pub fn compiled_model() -> Vec<u8> {
    let t = |name: &str| TensorT { shape: vec![1, 4], type_: tt::INT8, name: name.into(), ..Default::default() };
    ModelT {
        version: 3,
        operator_codes: vec![OperatorCodeT { builtin_code: 32, custom_code: Some("edgetpu-custom-op".into()), version: 1 }],
        subgraphs: vec![SubGraphT {
            tensors: vec![t("x"), t("y")],
            inputs: vec![0],
            outputs: vec![1],
            operators: vec![OperatorT { opcode_index: 0, inputs: vec![0], outputs: vec![1], builtin_options: None, custom_options: Some(vec![1, 2, 3]), intermediates: Vec::new() }],
            name: None,
        }],
        buffers: vec![BufferT::default()],
        ..Default::default()
    }
    .to_bytes()
}

/// Writes a fake compiler into `dir` that prints `stdout`, exits with `code`, and (on success) writes the
/// compiled model and the log into the `-o` directory as the real compiler does.
#[cfg(unix)]
pub fn fake_compiler(dir: &Path, stdout: &str, log: &str, code: i32) -> PathBuf {
    let compiled = dir.join("prepared_edgetpu.tflite");
    std::fs::write(&compiled, compiled_model()).unwrap();
    std::fs::write(dir.join("stdout.txt"), stdout).unwrap();
    std::fs::write(dir.join("log.txt"), log).unwrap();
    let script = format!(
        r#"#!/bin/sh
if [ "$1" = "--version" ]; then echo "Edge TPU Compiler version 16.0.384591198"; exit 0; fi
out=.
model=
while [ $# -gt 0 ]; do
  case "$1" in
    -o|--out_dir) out="$2"; shift 2 ;;
    -m|-t|-i) echo "$1 $2" >> "{args}"; shift 2 ;;
    -s) shift ;;
    *) model="$1"; shift ;;
  esac
done
stem=$(basename "$model" .tflite)
cat "{stdout}"
if [ {code} -ne 0 ]; then echo "Internal compiler error. Aborting!" >&2; exit {code}; fi
cp "{compiled}" "$out/${{stem}}_edgetpu.tflite"
cp "{log}" "$out/${{stem}}_edgetpu.log"
exit 0
"#,
        args = dir.join("args.txt").display(),
        stdout = dir.join("stdout.txt").display(),
        log = dir.join("log.txt").display(),
        compiled = compiled.display(),
    );
    let path = dir.join("edgetpu_compiler");
    std::fs::write(&path, script).unwrap();
    std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    path
}

/// What edgetpu_compiler prints: `head` (version, timings, counts), the operator table with one row per
/// (op, count, status), and the closing lines.
pub fn compiler_log(head: &str, ops: &[(&str, usize, &str)]) -> String {
    let rows: String = ops.iter().map(|(op, n, status)| format!("{op:<31}{n:<11}{status}\n")).collect();
    format!("{head}\nOperator                       Count      Status\n\n{rows}Compilation child process completed within timeout period.\nCompilation succeeded!\n")
}
