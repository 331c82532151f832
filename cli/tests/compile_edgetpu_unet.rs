//! `tpu-sdk compile --target edgetpu` on a U-Net-like decoder from ONNX (Conv → MaxPool → Conv →
//! ConvTranspose → Concat skip → Conv → ConvTranspose with PyTorch's padding=1/output_padding=1 → Conv):
//! the ConvTransposes become int8 TRANSPOSE_CONV, LiteRT loads and runs the written file, and the report says
//! that TRANSPOSE_CONV needs a recent Edge TPU compiler. (That our int8 runtime matches LiteRT bit for bit on
//! this model is `targets/edgetpu/tests/conv_transpose.rs`.)
#![cfg(feature = "edgetpu")]


use tpu_sdk::core::format::tflite::schema::{self, tensor_type as tt};
use tpu_sdk::core::npy;
use tpu_sdk_test_support::cli::{self, expect};
use tpu_sdk_test_support::{litert, oracle, Rng};

#[test]
fn a_unet_decoder_compiles_to_int8_transpose_conv_that_litert_runs() {
    let Some(py) = oracle::python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("unet_decoder.onnx");
    oracle::run_script(&py, "targets/edgetpu/tests/make_unet_decoder.py", &[&model]);
    let cal = dir.path().join("cal.npy");
    npy::write(&cal, &Rng::from_state(99).f32_tensor(&[8, 1, 3, 32, 32], -1.0, 1.0)).unwrap();
    let out = dir.path().join("unet.tflite");
    let o = cli::command(env!("CARGO_BIN_EXE_tpu-sdk"))
        .env_remove("TPU_SDK_EDGETPU_COMPILER")
        .env("PATH", "/nonexistent")
        .args(["--threads", "2", "compile", model.to_str().unwrap(), "--target", "edgetpu", "--calibration", cal.to_str().unwrap(), "-o", out.to_str().unwrap(), "--json"])
        .output()
        .unwrap();
    let (stdout, _) = expect(o, 0);
    let doc: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let sq = doc["error"]["outputs"][0]["sqnr_db"].as_f64().unwrap();
    eprintln!("unet_decoder int8 (our runtime) vs float: SQNR {sq:.1} dB; mapping {}", doc["mapping"]);
    assert!(sq > 25.0, "SQNR {sq} dB");
    // The rules predict TRANSPOSE_CONV for recent Edge TPU compilers only: the ops before it map.
    let mapping = doc["mapping"].to_string();
    assert!(mapping.contains("TRANSPOSE_CONV") && mapping.contains("recent Edge TPU compiler"), "{mapping}");
    assert!(doc["mapping"]["tpu_ops"].as_u64().unwrap() >= 3, "{mapping}");

    let bytes = std::fs::read(&out).unwrap();
    let m = schema::parse_model(&bytes).unwrap();
    let codes = m.operator_codes().unwrap();
    let sg = m.subgraphs().unwrap().get(0);
    let ops: Vec<String> = sg.operators().unwrap().iter().map(|o| codes.get(o.opcode_index() as usize).name()).collect();
    assert_eq!(ops.iter().filter(|o| *o == "TRANSPOSE_CONV").count(), 2, "{ops:?}");
    let input = sg.tensors().unwrap().get(sg.inputs().unwrap().get(0) as usize);
    assert_eq!(input.type_(), tt::INT8);
    // LiteRT loads the file and runs it: int8 [1, 2, 64, 64] out.
    let x = Rng::from_state(5).tensor(tpu_sdk::DType::I8, &[1, 32, 32, 3]);
    let got = litert::run_file(&py, &out, litert::OPTIMIZED, &[vec![x]]).unwrap_or_else(|e| panic!("LiteRT cannot run the compiled model: {e}"));
    assert_eq!((got[0][0].dtype(), got[0][0].shape.clone()), (tpu_sdk::DType::I8, vec![1, 2, 64, 64]));
}
