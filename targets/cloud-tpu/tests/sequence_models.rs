//! ONNX sequence ops resolved at import time (`core/tests/data/sequence/*.onnx`, written by
//! `scripts/make_sequence_models.py` and `scripts/make_sequence_torch.py`) lowered to StableHLO and run by XLA
//! (the CPU PJRT plugin), against onnxruntime: every output within 1e-5 relative.

mod common;

use tpu_sdk_cloud_tpu::CloudTpuTarget;
use tpu_sdk_core::import::onnx::{load, ImportOptions};
use tpu_sdk_test_support::{fresh_dir, onnxruntime, oracle, random_inputs, repo};

#[test]
fn sequence_models_on_xla_match_onnxruntime() {
    let Some(plugin) = common::cpu_plugin() else { return };
    let Some(py) = oracle::python() else { return };
    let tmp = fresh_dir("cloud-tpu-sequence-models");
    for name in ["construct_insert_at", "split_concat", "empty_insert", "torch_list_ops"] {
        let path = repo().join("core/tests/data/sequence").join(format!("{name}.onnx"));
        let mut g = load(&path, &ImportOptions::default()).unwrap_or_else(|e| panic!("{name}: {e}"));
        tpu_sdk_core::passes::optimize(&mut g).unwrap_or_else(|e| panic!("{name}: {e}"));
        let exe = CloudTpuTarget::with_plugin(&plugin).compile_graph(g.clone()).unwrap_or_else(|e| panic!("{name}: compile: {e}"));
        let inputs = random_inputs(&g, 7);
        let ours = exe.execute(&inputs).unwrap_or_else(|e| panic!("{name}: run: {e}"));
        let worst = onnxruntime::worst_vs_onnxruntime(&py, &path, &g, inputs, &ours, &tmp, 1e-5).unwrap_or_else(|e| panic!("{e}"));
        println!("{name:<22} {} outputs on XLA, worst relative error vs onnxruntime {worst:.2e}", ours.len());
    }
}
