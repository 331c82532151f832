//! ONNX sequence ops resolved at import time, on the CPU runtime against onnxruntime: every output within
//! 1e-5 relative (per element: |ours - ort| <= 1e-5 · (|ort| + mean |ort|)), and the models the importer must
//! refuse (a run-time position, an out-of-range position, a sequence graph output, a sequence carried by a
//! Loop) refused with the reason.
//!
//! The models are `core/tests/data/sequence/*.onnx`, written by `scripts/make_sequence_models.py` (onnx.helper)
//! and `scripts/make_sequence_torch.py` (torch.onnx.export of TorchScript list code). onnxruntime runs through
//! `scripts/ort_run.py` with the Python in `TPU_SDK_PYTHON`; without it the comparison says so and passes,
//! unless `TPU_SDK_REQUIRE_ORACLES=1`.

use std::path::PathBuf;

use tpu_sdk_core::import::onnx::{load, ImportOptions};
use tpu_sdk_core::ir::{Graph, Op};
use tpu_sdk_core::runtime::Session;
use tpu_sdk_core::Error;
use tpu_sdk_test_support::{fresh_dir, onnxruntime, oracle, random_inputs, repo};

fn model(name: &str) -> PathBuf {
    repo().join("core/tests/data/sequence").join(format!("{name}.onnx"))
}

fn count(g: &Graph, f: fn(&Op) -> bool) -> usize {
    g.nodes.iter().filter(|n| f(&n.op)).count()
}

#[test]
fn sequence_models_import_to_tensor_ops() {
    for (name, splits, concats) in [("construct_insert_at", 0, 0), ("split_concat", 4, 4), ("empty_insert", 0, 1), ("torch_list_ops", 2, 3)] {
        let g = load(&model(name), &ImportOptions::default()).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(count(&g, |o| matches!(o, Op::Split { .. })), splits, "{name}: Split nodes");
        assert_eq!(count(&g, |o| matches!(o, Op::Concat { .. })), concats, "{name}: Concat nodes");
    }
}

#[test]
fn sequence_models_match_onnxruntime() {
    let Some(py) = oracle::python() else { return };
    let tmp = fresh_dir("sequence-models");
    let mut failures = Vec::new();
    for name in ["construct_insert_at", "split_concat", "empty_insert", "torch_list_ops"] {
        let path = model(name);
        let g = load(&path, &ImportOptions::default()).unwrap_or_else(|e| panic!("{name}: {e}"));
        for seed in [1, 2, 3] {
            let inputs = random_inputs(&g, seed);
            let ours = Session::new(g.clone()).and_then(|mut s| s.run(&inputs)).unwrap_or_else(|e| panic!("{name}: {e}"));
            match onnxruntime::worst_vs_onnxruntime(&py, &path, &g, inputs, &ours, &tmp, 1e-5) {
                Ok(w) => println!("{name:<22} seed {seed}: {} outputs, worst relative error {w:.2e}", ours.len()),
                Err(e) => failures.push(e),
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Each bad model: the error kind and pieces of its message.
#[test]
fn non_static_sequences_are_refused_with_the_reason() {
    let cases: [(&str, bool, &[&str]); 6] = [
        ("bad_position_range", false, &["at_two", "position 2 is out of range for a sequence of 2 tensors"]),
        ("bad_runtime_position", true, &["at_pos", "sequence position is computed at run time; only constant positions are supported"]),
        ("bad_sequence_output", true, &["graph output 's' is a tensor sequence"]),
        ("bad_loop_sequence", true, &["loop", "input 'e' is a tensor sequence; sequences crossing a Loop/If/Scan boundary"]),
        ("bad_if_capture", true, &["branch", "uses the tensor sequence 's'; sequences crossing a Loop/If/Scan boundary"]),
        ("torch_list_loop", true, &["Loop", "is a tensor sequence"]),
    ];
    for (name, unsupported, pieces) in cases {
        let e = load(&model(name), &ImportOptions::default()).expect_err(name);
        assert_eq!(matches!(e, Error::Unsupported(_)), unsupported, "{name}: {e:?}");
        let msg = e.to_string();
        for p in pieces {
            assert!(msg.contains(p), "{name}: '{msg}' should say '{p}'");
        }
        println!("{name}: {msg}");
    }
}
