//! `tpu-sdk compile --target tflite`: a float TFLite file that LiteRT runs, checked against the source model's
//! peer — onnxruntime for an ONNX model (a U-Net-like decoder: Conv, MaxPool, ConvTranspose, Concat), LiteRT on the
//! original file for a TFLite model — on the same inputs (transposed to the file's input layout, which the
//! `--json` report names). And the edgetpu hint: a model with an op that has no int8 form fails `--target edgetpu`
//! with an error that names `--target tflite`, and an op with no TFLite writer is refused by name.
#![cfg(feature = "edgetpu")]

use std::path::Path;
use std::process::Command;

use tpu_sdk::core::ir::Tensor;
use tpu_sdk::core::npy;
use tpu_sdk_test_support::cli::{self, expect};
use tpu_sdk_test_support::{assert_close, litert, onnxruntime, oracle, repo, Rng};

fn tpu_sdk(args: &[&str]) -> std::process::Output {
    cli::command(env!("CARGO_BIN_EXE_tpu-sdk")).args(["--threads", "2"]).args(args).output().unwrap()
}

/// Compiles `model` to a float TFLite file in `dir`; returns its path and the `--json` report.
fn compile_tflite(model: &Path, dir: &Path) -> (std::path::PathBuf, serde_json::Value) {
    let out = dir.join("float.tflite");
    let (stdout, _) = expect(tpu_sdk(&["compile", model.to_str().unwrap(), "--target", "tflite", "-o", out.to_str().unwrap(), "--json"]), 0);
    let doc: serde_json::Value = serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"));
    assert_eq!(doc["target"], "tflite", "{doc}");
    assert_eq!(doc["quantized"], false, "{doc}");
    assert_eq!(doc["bytes"].as_u64().unwrap(), std::fs::metadata(&out).unwrap().len(), "{doc}");
    assert!(std::fs::read_dir(dir).unwrap().flatten().all(|e| !e.file_name().to_string_lossy().contains(".tmp.")), "a temporary file was left behind");
    (out, doc)
}

/// `x` in the layout the report gives input `k` (`layout_perm`).
fn to_file_layout(x: &Tensor, doc: &serde_json::Value, k: usize) -> Tensor {
    let perm: Vec<usize> = doc["inputs"][k]["layout_perm"].as_array().unwrap().iter().map(|v| v.as_u64().unwrap() as usize).collect();
    x.permuted(&perm)
}

#[test]
fn an_onnx_model_compiles_to_float_tflite_that_litert_runs_as_onnxruntime_does() {
    let Some(py) = oracle::python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("unet_decoder.onnx");
    oracle::run_script(&py, "targets/edgetpu/tests/make_unet_decoder.py", &[&model]);
    let (file, doc) = compile_tflite(&model, dir.path());
    let ops = doc["operators"].to_string();
    assert!(ops.contains("TRANSPOSE_CONV") && ops.contains("CONV_2D") && ops.contains("MAX_POOL_2D"), "{ops}");
    let x = Rng::from_state(41).f32_tensor(&[1, 3, 32, 32], -1.0, 1.0);
    let want = onnxruntime::run_model(&py, &model, &[("x".into(), x.clone())], &dir.path().join("ort"));
    let got = litert::run_file(&py, &file, litert::OPTIMIZED, &[vec![to_file_layout(&x, &doc, 0)]]).unwrap_or_else(|e| panic!("LiteRT: {e}"));
    assert_eq!(got[0][0].shape, want[0].shape);
    assert_close(&got[0][0], &want[0], 1e-4, 1e-5, "float TFLite (LiteRT) vs onnxruntime");
}

#[test]
fn a_tflite_model_compiles_to_float_tflite_that_litert_runs_as_the_original() {
    let Some(py) = oracle::python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let src = repo().join("targets/edgetpu/tests/data/convnet_f32.tflite");
    let (file, doc) = compile_tflite(&src, dir.path());
    let shape: Vec<usize> = doc["inputs"][0]["shape"].as_array().unwrap().iter().map(|v| v.as_u64().unwrap() as usize).collect();
    // The source's input is NHWC too: the same tensor feeds both files.
    let x = Rng::from_state(42).f32_tensor(&shape, -1.0, 1.0);
    let want = litert::run_file(&py, &src, litert::OPTIMIZED, &[vec![x.clone()]]).unwrap_or_else(|e| panic!("LiteRT on the source: {e}"));
    let got = litert::run_file(&py, &file, litert::OPTIMIZED, &[vec![x]]).unwrap_or_else(|e| panic!("LiteRT on ours: {e}"));
    assert_eq!(got[0].len(), want[0].len());
    for (k, (g, w)) in got[0].iter().zip(&want[0]).enumerate() {
        assert_close(g, w, 1e-4, 1e-5, &format!("output {k}: float TFLite vs the source model, both in LiteRT"));
    }
}

#[test]
fn edgetpu_names_the_tflite_target_for_an_op_with_no_int8_form_and_tflite_refuses_an_op_it_cannot_write() {
    let Some(py) = oracle::python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let make = |op: &str, path: &Path| {
        let script = format!(
            "import onnx, numpy as np, sys\nfrom onnx import helper as h, TensorProto as T\n\
             w = h.make_tensor('w', T.FLOAT, [4, 3, 3, 3], np.random.default_rng(0).uniform(-1, 1, 108).astype(np.float32))\n\
             g = h.make_graph([h.make_node('Conv', ['x', 'w'], ['c'], pads=[1, 1, 1, 1], name='conv'), h.make_node('{op}', ['c'], ['y'], name='the_{op}')],\n\
               'g', [h.make_tensor_value_info('x', T.FLOAT, [1, 3, 8, 8])], [h.make_tensor_value_info('y', T.FLOAT, [1, 4, 8, 8])], [w])\n\
             onnx.save(h.make_model(g, opset_imports=[h.make_opsetid('', 13)]), sys.argv[1])\n"
        );
        let st = Command::new(&py).arg("-c").arg(script).arg(path).output().unwrap();
        assert!(st.status.success(), "{}", String::from_utf8_lossy(&st.stderr));
    };
    let cal = dir.path().join("cal.npy");
    npy::write(&cal, &Rng::from_state(3).f32_tensor(&[4, 1, 3, 8, 8], -1.0, 1.0)).unwrap();
    let out = dir.path().join("m.tflite");
    // Exp: float TFLite has EXP, our int8 path has no Exp
    let exp = dir.path().join("exp.onnx");
    make("Exp", &exp);
    let o = cli::command(env!("CARGO_BIN_EXE_tpu-sdk"))
        .env("PATH", "/nonexistent")
        .args(["compile", exp.to_str().unwrap(), "--target", "edgetpu", "--calibration", cal.to_str().unwrap(), "-o", out.to_str().unwrap()])
        .output()
        .unwrap();
    let (_, err) = expect(o, 3);
    assert!(err.contains("the_Exp") && err.contains("--target tflite") && err.contains("LiteRT"), "{err}");
    assert!(!out.exists(), "edgetpu wrote a file although it failed");
    let (file, _) = compile_tflite(&exp, dir.path());
    assert!(file.exists());
    // Erf: TFLite has no ERF builtin: refused by name, and the edgetpu error does not point at --target tflite
    let erf = dir.path().join("erf.onnx");
    make("Erf", &erf);
    let bad = dir.path().join("erf.tflite");
    let (_, err) = expect(tpu_sdk(&["compile", erf.to_str().unwrap(), "--target", "tflite", "-o", bad.to_str().unwrap()]), 3);
    assert!(err.contains("the_Erf") && err.contains("Erf"), "{err}");
    assert!(!bad.exists(), "a refused export wrote a file");
    let o = cli::command(env!("CARGO_BIN_EXE_tpu-sdk"))
        .env("PATH", "/nonexistent")
        .args(["compile", erf.to_str().unwrap(), "--target", "edgetpu", "--calibration", cal.to_str().unwrap(), "-o", out.to_str().unwrap()])
        .output()
        .unwrap();
    let (_, err) = expect(o, 3);
    assert!(err.contains("the_Erf") && !err.contains("--target tflite"), "{err}");
}

#[test]
fn run_on_the_tflite_target_says_it_only_writes_files() {
    let (_, err) = expect(tpu_sdk(&["run", "targets/edgetpu/tests/data/convnet_f32.tflite", "--target", "tflite", "--random-input"]), 3);
    assert!(err.contains("compile") && err.contains("--target tflite"), "{err}");
}
