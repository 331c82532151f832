//! Replays every input kept in `fuzz/regressions/<target>/` (inputs the fuzzers once crashed on, and the
//! memory bombs) through the fuzz targets' own code (`fuzz/fuzz_targets/harness.rs`) on the stable toolchain:
//! each must now return without a panic. `bash scripts/fuzz.sh` runs the fuzzers themselves.

#![cfg(all(feature = "edgetpu", feature = "cloud-tpu"))]

#[path = "../../fuzz/fuzz_targets/harness.rs"]
mod harness;

use tpu_sdk_test_support::repo;

type Target = fn(&[u8]);

const TARGETS: [(&str, Target); 7] = [
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
    ("graph_build", |d| {
        harness::graph_build(d);
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

/// The structure-aware target builds, runs and compares real graphs from arbitrary bytes (not only refusals):
/// 300 pseudo-random recipes on stable, each through the before/after-optimisation comparison.
#[test]
fn graph_recipes_build_and_run() {
    let mut s = 0x2545_F491_4F6C_DD1Du64;
    let mut compared = 0;
    for _ in 0..300 {
        let bytes: Vec<u8> = (0..256)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                (s >> 24) as u8
            })
            .collect();
        compared += harness::graph_build(&bytes) as usize;
    }
    assert!(compared >= 100, "only {compared} of 300 recipes ran and were compared");
    eprintln!("{compared} of 300 recipes built, ran and matched after the passes");
}
