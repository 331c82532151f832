//! `tpu-sdk` on TFLite files: int8 and float models made by TensorFlow's converter run and inspect, and
//! truncated or corrupted `.tflite` files (including a flatbuffer whose offsets point outside the file) exit
//! with status 3 and a message, never a panic.

use std::path::Path;
use std::process::Output;

use tpu_sdk_test_support::cli::{self, assert_cannot_load, expect, noise, truncations};
use tpu_sdk_test_support::repo;

fn tpu_sdk(args: &[&str]) -> Output {
    cli::run(env!("CARGO_BIN_EXE_tpu-sdk"), args)
}

const INT8: &str = "core/tests/data/int8/cnn_int8.tflite";
/// A legacy uint8 model (uint8 activations, uint8 weights with non-zero zero points).
const UINT8: &str = "core/tests/data/int8/legacy_uint8.tflite";
const F32: &str = "targets/edgetpu/tests/data/convnet_f32.tflite";

#[test]
fn runs_and_inspects_tflite_models() {
    let tmp = tempfile::tempdir().unwrap();
    for model in [INT8, UINT8, F32] {
        let (out, _) = expect(tpu_sdk(&["inspect", model]), 0);
        // TFLite inputs are NHWC; the graph says so and shows the transpose into the IR's NCHW
        assert!(out.contains("Transpose"), "{model}: {out}");
        assert!(out.contains("layout NHWC"), "{model}: {out}");
        let out_dir = tmp.path().join(Path::new(model).file_stem().unwrap());
        let (stdout, stderr) = expect(tpu_sdk(&["run", model, "--random-input", "--output-dir", out_dir.to_str().unwrap()]), 0);
        assert!(std::fs::read_dir(&out_dir).map(|d| d.count() > 0).unwrap_or(false), "{model}: no outputs\n{stdout}\n{stderr}");
        if model == UINT8 {
            // uint8 in and out, run on the int8 CPU kernels
            assert!(out.contains("input  %image: u8[1,12,12,3]"), "{out}");
            let (json, _) = expect(tpu_sdk(&["run", model, "--random-input", "--output-dir", out_dir.to_str().unwrap(), "--json"]), 0);
            assert_eq!(json.matches("\"dtype\": \"u8\"").count(), 2, "{json}");
        }
    }
}

#[test]
fn broken_tflite_files_exit_3_with_a_message() {
    let tmp = tempfile::tempdir().unwrap();
    let good = std::fs::read(repo().join(INT8)).unwrap();
    let mut cases = truncations(&good, &[3, 7, 8, 100, good.len() / 2, good.len() - 1]);
    // the root table offset pointing past the end of the file
    let mut far = good.clone();
    far[..4].copy_from_slice(&(good.len() as u32 + 1000).to_le_bytes());
    cases.push(("root offset outside the buffer".into(), far));
    // a vtable offset (the root table's first word) pointing far outside
    let mut vt = good.clone();
    let root = u32::from_le_bytes(good[..4].try_into().unwrap()) as usize;
    vt[root..root + 4].copy_from_slice(&i32::MIN.to_le_bytes());
    cases.push(("vtable offset outside the buffer".into(), vt));
    // the right identifier followed by noise
    let mut noise = noise(4096, 99);
    noise[4..8].copy_from_slice(b"TFL3");
    cases.push(("identifier then noise".into(), noise));
    for (what, data) in cases {
        let p = tmp.path().join("m.tflite");
        std::fs::write(&p, &data).unwrap();
        for cmd in ["run", "inspect"] {
            let args: Vec<&str> = if cmd == "run" { vec!["run", p.to_str().unwrap(), "--random-input"] } else { vec!["inspect", p.to_str().unwrap()] };
            assert_cannot_load(tpu_sdk(&args), &format!("{cmd} {what}"));
        }
    }
}
