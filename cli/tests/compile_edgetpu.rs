//! `tpu-sdk compile --target edgetpu`: the int8 model, the report, exit codes for bad calibration data, and
//! the edgetpu_compiler hand-off (with a fake compiler that behaves like the real one's file contract).
#![cfg(feature = "edgetpu")]

#![cfg(unix)]

use std::path::{Path, PathBuf};
use std::process::Output;

use tpu_sdk::core::format::tflite::schema::{self, tensor_type as tt};
use tpu_sdk::core::npy;
use tpu_sdk::Tensor;
use tpu_sdk_test_support::cli::{self, expect, fails};
use tpu_sdk_test_support::{repo, Rng};

#[path = "../../targets/edgetpu/tests/common/mod.rs"]
mod edgetpu_common;

const MODEL: &str = "examples/models/text_direction_cls.onnx";
const SHAPE: &[&str] = &["--input-shape", "x=1,3,48,192"];

/// Runs the CLI with no compiler reachable unless `--edgetpu-compiler` is given.
fn tpu_sdk(args: &[&str]) -> Output {
    tpu_sdk_with_path(args, "/nonexistent")
}

/// Runs the CLI with `PATH` set to `path`.
fn tpu_sdk_with_path(args: &[&str], path: &str) -> Output {
    cli::command(env!("CARGO_BIN_EXE_tpu-sdk"))
        .env_remove("TPU_SDK_EDGETPU_COMPILER")
        .env("PATH", path)
        .args(["--threads", "2"])
        .args(args)
        .args(if args.first() == Some(&"compile") { SHAPE } else { &[] })
        .output()
        .unwrap()
}

/// N pseudo-random samples of the model's input (1,3,48,192) stacked on a new first axis.
fn calibration(dir: &Path, n: usize) -> PathBuf {
    let p = dir.join("cal.npy");
    npy::write(&p, &Rng::from_state(12345).f32_tensor(&[n, 1, 3, 48, 192], -1.0, 1.0)).unwrap();
    p
}

#[test]
fn compiles_to_int8_tflite_with_report_and_says_the_compiler_is_absent() {
    let dir = tempfile::tempdir().unwrap();
    let cal = calibration(dir.path(), 8);
    let out = dir.path().join("model.tflite");
    let report = dir.path().join("r.json");
    let (stdout, _) = expect(
        tpu_sdk(&["compile", MODEL, "--target", "edgetpu", "--calibration", cal.to_str().unwrap(), "-o", out.to_str().unwrap(), "--report", report.to_str().unwrap(), "--json"]),
        0,
    );
    let doc: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(doc, serde_json::from_str::<serde_json::Value>(&std::fs::read_to_string(&report).unwrap()).unwrap());
    assert_eq!(doc["target"], "edgetpu");
    assert_eq!(doc["calibration"]["samples"], 8);
    assert_eq!(doc["io_dtype"], "int8");
    assert_eq!(doc["inputs"][0]["dtype"], "i8");
    // The NCHW model's image input is NHWC in the file (the layout is converted once, at export).
    assert_eq!(doc["inputs"][0]["shape"], serde_json::json!([1, 48, 192, 3]));
    assert_eq!(doc["inputs"][0]["layout_perm"], serde_json::json!([0, 2, 3, 1]));
    assert!(doc["mapping"]["tpu_ops"].as_u64().unwrap() > 0);
    assert_eq!(doc["mapping"]["cpu_ops"], 0, "{}", doc["mapping"]);
    let sq = doc["error"]["outputs"][0]["sqnr_db"].as_f64().unwrap();
    assert!(sq > 20.0, "SQNR {sq}");
    assert!(doc["error"]["outputs"][0]["max_abs_error"].as_f64().is_some());
    assert!(doc["notes"][0].as_str().unwrap().contains("edgetpu_compiler was not found"), "{}", doc["notes"]);
    assert!(doc["notes"][0].as_str().unwrap().contains("apt-get install edgetpu-compiler"));
    // The file is an int8 TFLite model: int8 input, no leftover temp file.
    let bytes = std::fs::read(&out).unwrap();
    let m = schema::parse_model(&bytes).unwrap();
    let sg = m.subgraphs().unwrap().get(0);
    assert_eq!(sg.tensors().unwrap().get(sg.inputs().unwrap().get(0) as usize).type_(), tt::INT8);
    let leftovers: Vec<_> = std::fs::read_dir(dir.path()).unwrap().filter_map(|e| e.ok()).filter(|e| e.file_name().to_string_lossy().contains(".tmp")).collect();
    assert!(leftovers.is_empty());

    // Text mode names the int8 model, the mapping and the error.
    let (text, _) = expect(tpu_sdk(&["compile", MODEL, "--target", "edgetpu", "--calibration", cal.to_str().unwrap(), "-o", out.to_str().unwrap(), "--io-dtype", "float"]), 0);
    assert!(text.contains("Number of operations that will run on Edge TPU") && text.contains("SQNR") && text.contains("edgetpu_compiler was not found"), "{text}");
    assert!(text.contains("[1, 48, 192, 3] (NHWC)"), "{text}");
}

#[test]
fn bad_or_missing_calibration_data_is_a_usage_error() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.npy");
    npy::write(&bad, &Tensor::from_f32(vec![4, 7], vec![0.0; 28])).unwrap();
    let out = dir.path().join("m.tflite");
    let (_, err) = expect(tpu_sdk(&["compile", MODEL, "--target", "edgetpu", "--calibration", bad.to_str().unwrap(), "-o", out.to_str().unwrap()]), 2);
    assert!(err.contains("not N samples of input 'x'") && err.contains("[4, 7]"), "{err}");
    let (_, err) = expect(tpu_sdk(&["compile", MODEL, "--target", "edgetpu", "-o", out.to_str().unwrap()]), 2);
    assert!(err.contains("--calibration"), "{err}");
    let cal = calibration(dir.path(), 2);
    let (_, err) = expect(tpu_sdk(&["compile", MODEL, "--target", "edgetpu", "--calibration", cal.to_str().unwrap(), "--calibration-method", "kl", "-o", out.to_str().unwrap()]), 2);
    assert!(err.contains("percentile"), "{err}");
    // An empty folder, and a folder with an image that does not decode.
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let (_, err) = expect(tpu_sdk(&["compile", MODEL, "--target", "edgetpu", "--calibration", empty.to_str().unwrap(), "-o", out.to_str().unwrap()]), 2);
    assert!(err.contains("no .npy files, images or sample folders"), "{err}");
    let broken = dir.path().join("broken");
    std::fs::create_dir(&broken).unwrap();
    std::fs::write(broken.join("a.png"), b"not a png").unwrap();
    let err = fails(tpu_sdk(&["compile", MODEL, "--target", "edgetpu", "--calibration", broken.to_str().unwrap(), "-o", out.to_str().unwrap()]));
    assert!(err.contains("cannot read calibration samples") && err.contains("a.png"), "{err}");
    assert!(!out.exists(), "nothing is written on error");
}

/// What the compiler prints (and writes to its log) for the test model: every op on the Edge TPU.
fn log() -> String {
    const TPU: &str = "Mapped to Edge TPU";
    edgetpu_common::compiler_log(
        "Edge TPU Compiler version 16.0.384591198
Model compiled successfully in 12 ms.
Number of Edge TPU subgraphs: 1
Total number of operations: 5
Number of operations that will run on Edge TPU: 5
Number of operations that will run on CPU: 0
",
        &[("CONV_2D", 2, TPU), ("MAX_POOL_2D", 1, TPU), ("MEAN", 1, TPU), ("FULLY_CONNECTED", 1, TPU)],
    )
}

#[test]
fn runs_a_given_edgetpu_compiler_and_reports_its_mapping() {
    let dir = tempfile::tempdir().unwrap();
    let fake = edgetpu_common::fake_compiler(dir.path(), &log(), &log(), 0);
    let cal = calibration(dir.path(), 4);
    let out = dir.path().join("net.tflite");
    let (stdout, _) = expect(
        // The fake compiler is a shell script that needs the usual tools on PATH.
        tpu_sdk_with_path(
            &["compile", MODEL, "--target", "edgetpu", "--calibration", cal.to_str().unwrap(), "-o", out.to_str().unwrap(), "--edgetpu-compiler", fake.to_str().unwrap(), "--json"],
            "/usr/bin:/bin",
        ),
        0,
    );
    let doc: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let compiled_path = dir.path().join("net_edgetpu.tflite");
    assert!(compiled_path.is_file());
    assert_eq!(doc["edgetpu_compiler"]["model"], compiled_path.to_str().unwrap());
    assert_eq!(doc["edgetpu_compiler"]["edgetpu_subgraphs"], 1);
    assert_eq!(doc["mapping"]["source"]["edgetpu_compiler"]["version"], "16.0.384591198", "{}", doc["mapping"]["source"]);
    assert_eq!(doc["mapping"]["tpu_ops"], 5);
    assert!(doc["predicted_mapping"]["tpu_ops"].as_u64().unwrap() > 0);
    assert!(doc["files"].as_array().unwrap().iter().any(|f| f == compiled_path.to_str().unwrap()));

    // A compiler path that is not executable is an error before any work.
    let (_, err) = expect(
        tpu_sdk(&["compile", MODEL, "--target", "edgetpu", "--calibration", cal.to_str().unwrap(), "-o", out.to_str().unwrap(), "--edgetpu-compiler", "/nonexistent/edgetpu_compiler"]),
        4,
    );
    assert!(err.contains("/nonexistent/edgetpu_compiler"), "{err}");
}

#[test]
fn calibrates_on_a_folder_of_images_preprocessed_like_run_image() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("tdc.tflite");
    let (stdout, _) = expect(
        tpu_sdk(&["compile", MODEL, "--target", "edgetpu", "--calibration", "examples/images", "--mean", "0.5", "--std", "0.5", "-o", out.to_str().unwrap(), "--json"]),
        0,
    );
    let doc: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(doc["calibration"]["samples"], std::fs::read_dir(repo().join("examples/images")).unwrap().count());
    // [-1, 1] after mean/std 0.5: the int8 input scale is about 2/255.
    let scale = doc["inputs"][0]["scale"].as_f64().unwrap();
    assert!((scale - 2.0 / 255.0).abs() < 2e-4, "input scale {scale}");
    assert_eq!(doc["mapping"]["cpu_ops"], 0);
}

/// The shipped model leaves N, H and W free (`x: [N, 3, H, W]`): without `--input-shape`, the calibration
/// samples fix them, in each form samples come in; image samples fix only the batch, so an input with a free
/// image size is a clear usage error naming the flag.
#[test]
fn free_input_dims_are_taken_from_the_calibration_samples() {
    let dir = tempfile::tempdir().unwrap();
    let compile = |cal: &Path| {
        let out = dir.path().join("model.tflite");
        let o = cli::command(env!("CARGO_BIN_EXE_tpu-sdk"))
            .env_remove("TPU_SDK_EDGETPU_COMPILER")
            .env("PATH", "/nonexistent")
            .args(["--threads", "2", "compile", MODEL, "--target", "edgetpu", "--calibration", cal.to_str().unwrap(), "-o", out.to_str().unwrap(), "--json"])
            .output()
            .unwrap();
        o
    };
    let shape_of = |o: Output| -> (serde_json::Value, u64) {
        let (stdout, stderr) = expect(o, 0);
        assert!(stderr.contains("note: input 'x' has free dimensions"), "{stderr}");
        let doc: serde_json::Value = serde_json::from_str(&stdout).unwrap();
        (doc["inputs"][0]["shape"].clone(), doc["calibration"]["samples"].as_u64().unwrap())
    };
    let mut rng = Rng::from_state(99);
    // N samples stacked on a new first axis.
    let stacked = dir.path().join("stacked.npy");
    npy::write(&stacked, &rng.f32_tensor(&[3, 1, 3, 48, 96], -1.0, 1.0)).unwrap();
    assert_eq!(shape_of(compile(&stacked)), (serde_json::json!([1, 48, 96, 3]), 3));
    // N samples along the (free) batch axis.
    let batched = dir.path().join("batched.npy");
    npy::write(&batched, &rng.f32_tensor(&[4, 3, 48, 128], -1.0, 1.0)).unwrap();
    assert_eq!(shape_of(compile(&batched)), (serde_json::json!([1, 48, 128, 3]), 4));
    // A folder of one-sample files.
    let folder = dir.path().join("folder");
    std::fs::create_dir(&folder).unwrap();
    for k in 0..2 {
        npy::write(&folder.join(format!("{k}.npy")), &rng.f32_tensor(&[1, 3, 48, 160], -1.0, 1.0)).unwrap();
    }
    assert_eq!(shape_of(compile(&folder)), (serde_json::json!([1, 48, 160, 3]), 2));
    // Images cannot fix a free image size.
    let images = dir.path().join("images");
    std::fs::create_dir(&images).unwrap();
    std::fs::copy(repo().join("examples/images/text_upright.png"), images.join("a.png")).unwrap();
    let (_, err) = expect(compile(&images), 2);
    assert!(err.contains("--input-shape x="), "{err}");
}
