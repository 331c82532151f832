//! Replays every input kept in `fuzz/regressions/<target>/` (inputs the fuzzers once crashed on, and the
//! memory bombs) through the fuzz targets' own code (`fuzz/fuzz_targets/harness.rs`) on the stable toolchain:
//! each must now return without a panic. `bash scripts/fuzz.sh` runs the fuzzers themselves.

#![cfg(all(feature = "edgetpu", feature = "cloud-tpu"))]

#[path = "../../fuzz/fuzz_targets/harness.rs"]
mod harness;

use tpu_sdk_test_support::repo;

type Target = fn(&[u8]);

const TARGETS: [(&str, Target); 6] = [
    ("onnx_import", harness::onnx_import),
    ("tflite_import", harness::tflite_import),
    ("npy_read", harness::npy_read),
    ("compiler_log", harness::compiler_log),
    ("stablehlo_lower", |d| {
        harness::stablehlo_lower(d);
    }),
    ("session_run", |d| {
        harness::session_run(d);
    }),
];

#[test]
fn every_kept_fuzz_input_runs_without_a_panic() {
    let mut replayed = 0;
    for (name, run) in TARGETS {
        let dir = repo().join("fuzz/regressions").join(name);
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        let mut files: Vec<_> = entries.flatten().map(|e| e.path()).filter(|p| p.is_file()).collect();
        files.sort();
        for f in files {
            let data = std::fs::read(&f).unwrap();
            let r = std::panic::catch_unwind(|| run(&data));
            assert!(r.is_ok(), "{name}: {} panics again", f.display());
            replayed += 1;
        }
    }
    assert!(replayed > 0, "fuzz/regressions holds no inputs");
}

#[test]
fn the_harness_runs_real_models_end_to_end() {
    // the seeds the fuzzers start from must get through the harness (not just fail to import), or the fuzzers
    // would explore nothing past the importers
    for seed in ["core/tests/data/converter/unet.tflite", "core/tests/data/int8/cnn_int8.tflite", "core/tests/data/converter/transformer.tflite"] {
        let model = std::fs::read(repo().join(seed)).unwrap();
        harness::tflite_import(&model);
        assert!(harness::stablehlo_lower(&model) || seed.contains("int8"), "{seed}: not lowered");
        assert!(harness::session_run(&model), "{seed}: did not run");
    }
}
