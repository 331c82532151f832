//! ONNX sequence ops resolved at import time (`core/tests/data/sequence/*.onnx`, written by
//! `scripts/make_sequence_models.py` and `scripts/make_sequence_torch.py`) lowered to StableHLO and run by XLA
//! (the CPU PJRT plugin), against onnxruntime: every output within 1e-5 relative. Sequences a Loop appends to
//! (Python lists built in a loop) are the Loop's scan outputs, which lower when the trip count is known when
//! compiling: a constant, an input's dim, or an input bound to a value (`--bind`); outer sequences that Loop/If
//! bodies read go in as the stacks of their elements.

mod common;

use std::path::Path;

use tpu_sdk_cloud_tpu::CloudTpuTarget;
use tpu_sdk_core::import::onnx::{load, ImportOptions};
use tpu_sdk_core::ir::Tensor;
use tpu_sdk_test_support::{fresh_dir, onnxruntime, oracle, rand_f32, random_inputs, relative_to_mean, repo};

#[test]
fn sequence_models_on_xla_match_onnxruntime() {
    let Some(plugin) = common::cpu_plugin() else { return };
    let Some(py) = oracle::python() else { return };
    let tmp = fresh_dir("cloud-tpu-sequence-models");
    let names = [
        "construct_insert_at",
        "split_concat",
        "empty_insert",
        "torch_list_ops",
        "loop_append_outer",
        "loop_initial",
        "torch_loop_two_lists",
        "torch_list_loop",
        "if_capture",
        "loop_reads_loop",
    ];
    for name in names {
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

/// One run of a list-loop model on XLA: `shapes` for its inputs, `bound` inputs fixed to values when compiling
/// (onnxruntime gets them as inputs), the rest random. Returns the worst relative error.
fn list_loop_on_xla(plugin: &Path, py: &Path, tmp: &Path, name: &str, shapes: &[(&str, Vec<usize>)], bound: &[(&str, Tensor)]) -> f64 {
    let path = repo().join("core/tests/data/sequence").join(format!("{name}.onnx"));
    let opts = ImportOptions {
        input_shapes: shapes.iter().map(|(k, s)| (k.to_string(), s.clone())).collect(),
        input_values: bound.iter().map(|(k, t)| (k.to_string(), t.clone())).collect(),
        ..ImportOptions::default()
    };
    let mut g = load(&path, &opts).unwrap_or_else(|e| panic!("{name}: {e}"));
    tpu_sdk_core::passes::optimize(&mut g).unwrap_or_else(|e| panic!("{name}: {e}"));
    let exe = CloudTpuTarget::with_plugin(plugin).compile_graph(g.clone()).unwrap_or_else(|e| panic!("{name}: compile: {e}"));
    let inputs: Vec<Tensor> = g.inputs.iter().enumerate().map(|(k, &i)| rand_f32(&g.value(i).shape, 11 + k as u64)).collect();
    let ours = exe.execute(&inputs).unwrap_or_else(|e| panic!("{name}: run: {e}"));
    let mut named: Vec<(String, Tensor)> = g.inputs.iter().zip(inputs).map(|(&i, t)| (g.value(i).name.clone(), t)).collect();
    named.extend(bound.iter().map(|(k, t)| (k.to_string(), t.clone())));
    let theirs = onnxruntime::run_model(py, &path, &named, &tmp.join(name));
    assert_eq!(ours.len(), theirs.len(), "{name}: outputs");
    let mut worst = 0.0f64;
    for (k, (a, b)) in ours.iter().zip(&theirs).enumerate() {
        worst = worst.max(relative_to_mean(name, k, a, b, "onnxruntime", 1e-5).unwrap_or_else(|e| panic!("{e}")));
    }
    worst
}

/// torch's `for i in range(x.size(0))` with x's dim 0 fixed when compiling, and loops whose trip count is an
/// input bound to a value (0 included): the Loop's scan outputs have static shapes, as XLA needs.
#[test]
fn list_loops_on_xla_match_onnxruntime() {
    let Some(plugin) = common::cpu_plugin() else { return };
    let Some(py) = oracle::python() else { return };
    let tmp = fresh_dir("cloud-tpu-sequence-loops");
    let trips = |m: i64| Tensor::from_i64(vec![], vec![m]);
    let runs: Vec<(&str, Vec<(&str, Vec<usize>)>, Vec<(&str, Tensor)>)> = vec![
        ("torch_loop_stack", vec![("x", vec![2, 4, 5])], vec![]),
        ("torch_loop_stack", vec![("x", vec![6, 4, 5])], vec![]),
        ("loop_readers", vec![], vec![("m", trips(4)), ("pos", trips(13))]),
        ("loop_zero_trips", vec![], vec![("m", trips(0))]),
        ("torch_loop_count", vec![], vec![("n", trips(3))]),
        ("torch_loop_count", vec![], vec![("n", trips(0))]),
        ("loop_concat_trips", vec![], vec![("m", trips(5))]),
    ];
    for (name, shapes, bound) in runs {
        let worst = list_loop_on_xla(&plugin, &py, &tmp, name, &shapes, &bound);
        let values: Vec<(&str, Vec<i64>)> = bound.iter().map(|(k, t)| (*k, t.to_i64_vec())).collect();
        println!("{name:<18} {shapes:?} {values:?}: worst relative error vs onnxruntime {worst:.2e}");
    }
}
