//! Scan and If outputs whose shape is known only at run time get their real rank at import (a Scan's state
//! output: the state's; its scan output: the body output's + 1; an If output: its branches'), so the ops after
//! them resolve negative axes right; branches of two ranks leave it unknown, and an op that needs it is refused.
//! Compared with onnxruntime on cpu: every output within 1e-5 relative (per element: |ours - ort| <= 1e-5 ·
//! (|ort| + mean |ort|)), on random inputs (int64 `k` from 0 to 3: run-time lengths from 1 to 4).
//!
//! The models are `core/tests/data/control_flow_rank/*.onnx`, written by
//! `scripts/make_control_flow_rank_models.py` (onnx.helper). onnxruntime runs through `scripts/ort_run.py` with the
//! Python in `TPU_SDK_PYTHON`; without it the comparison says so and passes, unless `TPU_SDK_REQUIRE_ORACLES=1`.

use std::path::PathBuf;

use tpu_sdk_core::import::onnx::{load, ImportOptions};
use tpu_sdk_core::ir::Tensor;
use tpu_sdk_core::runtime::Session;
use tpu_sdk_test_support::{fresh_dir, onnxruntime, oracle, random_inputs, repo};

fn model(name: &str) -> PathBuf {
    repo().join("core/tests/data/control_flow_rank").join(format!("{name}.onnx"))
}

#[test]
fn scan_and_if_outputs_of_run_time_shape_match_onnxruntime() {
    let Some(py) = oracle::python() else { return };
    let tmp = fresh_dir("control-flow-ranks");
    let mut failures = Vec::new();
    for name in ["scan_run_time_rank", "if_run_time_rank"] {
        let path = model(name);
        let g = load(&path, &ImportOptions::default()).unwrap_or_else(|e| panic!("{name}: {e}"));
        for seed in [1, 2, 3, 4, 5] {
            let mut inputs = random_inputs(&g, seed);
            // k (the last input) from 0 to 3: the Slices keep 1 to 4 elements, the run-time lengths differ per seed
            *inputs.last_mut().unwrap() = Tensor::from_i64(vec![1], vec![seed as i64 % 4]);
            let ours = Session::new(g.clone()).and_then(|mut s| s.run(&inputs)).unwrap_or_else(|e| panic!("{name}: {e}"));
            let shapes: Vec<_> = ours.iter().map(|t| t.shape.clone()).collect();
            match onnxruntime::worst_vs_onnxruntime(&py, &path, &g, inputs, &ours, &tmp, 1e-5) {
                Ok(w) => println!("{name:<20} seed {seed}: output shapes {shapes:?}, worst relative error {w:.2e}"),
                Err(e) => failures.push(e),
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// An If whose branches give an output of ranks 2 and 1 leaves its rank unknown (onnxruntime runs such If
/// nodes, and ONNX's function expansions write them): the Softmax after it, which needs the rank for its axis -1,
/// is refused naming itself and the value.
#[test]
fn an_op_needing_the_rank_of_an_if_output_whose_branches_differ_in_rank_is_refused() {
    let err = load(&model("bad_if_ranks"), &ImportOptions::default()).expect_err("branches of rank 2 and 1").to_string();
    assert!(err.contains("'soft'") && err.contains("needs the rank of input 'm', which is not known before run time"), "unexpected error: {err}");
}
