//! Recurrent models (LSTM, GRU, RNN; `core/tests/data/rnn/*.onnx`, written by
//! `core/tests/data/make_rnn_models.py`) lowered to StableHLO and run by XLA (the CPU PJRT plugin), against
//! onnxruntime: every output within 1e-4 relative (|xla - ort| <= 1e-4 · (|ort| + mean |ort|)). With
//! `$TPU_SDK_LIBTPU` set, each lowered model is also compiled ahead of time for a TPU v5e:2x2 slice. The seq-7
//! single-node models take the unrolled lowering, the longer ones (seq 9, 20, 25) the `stablehlo.while`; both
//! with sequence_lens (gru_bi_linear_before_reset_lens, lstm_peephole_clip_forget_acts / lstm_bi_lens_long).

mod common;

use std::path::{Path, PathBuf};

use tpu_sdk_cloud_tpu::pjrt::NamedValue;
use tpu_sdk_cloud_tpu::CloudTpuTarget;
use tpu_sdk_core::import::onnx::{load, ImportOptions};
use tpu_sdk_test_support::{fresh_dir, onnxruntime, oracle, random_inputs, repo};

fn models() -> Vec<PathBuf> {
    let dir = repo().join("core/tests/data/rnn");
    let mut v: Vec<PathBuf> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).filter(|p| p.extension().is_some_and(|e| e == "onnx")).collect();
    v.sort();
    assert!(v.len() >= 8, "expected the models of make_rnn_models.py in {}", dir.display());
    v
}

fn check(py: &Path, plugin: &Path, libtpu: Option<&tpu_sdk_cloud_tpu::pjrt::Plugin>, tmp: &Path, path: &Path) -> Result<(), String> {
    let stem = path.file_stem().unwrap().to_string_lossy().to_string();
    let mut g = load(path, &ImportOptions::default()).map_err(|e| format!("{stem}: load: {e}"))?;
    tpu_sdk_core::passes::optimize(&mut g).map_err(|e| format!("{stem}: optimize: {e}"))?;
    let inputs = random_inputs(&g, 11);
    let t0 = std::time::Instant::now();
    let exe = CloudTpuTarget::with_plugin(plugin).compile_graph(g.clone()).map_err(|e| format!("{stem}: compile: {e}"))?;
    let compile_s = t0.elapsed().as_secs_f64();
    let ours = exe.execute(&inputs).map_err(|e| format!("{stem}: run: {e}"))?;
    let worst = onnxruntime::worst_vs_onnxruntime(py, path, &g, inputs, &ours, tmp, 1e-4)?;
    let mut aot = String::new();
    if let Some(tpu) = libtpu {
        let mlir = tpu_sdk_cloud_tpu::lower::lower(&g).map_err(|e| format!("{stem}: lower: {e}"))?;
        let topo = vec![
            ("chip_config_name".to_string(), NamedValue::String("default".into())),
            ("chips_per_host_bounds".to_string(), NamedValue::Int64List(vec![2, 2, 1])),
            ("num_slices".to_string(), NamedValue::Int64(1)),
        ];
        let (platform, devices, bytes) = tpu
            .compile_for_topology("v5e:2x2", &topo, &mlir, &Default::default())
            .map_err(|e| format!("{stem}: libtpu rejects the lowering: {e}"))?;
        if platform != "tpu" || devices != 4 || bytes.is_empty() {
            return Err(format!("{stem}: libtpu compiled for {platform} with {devices} devices ({} bytes)", bytes.len()));
        }
        aot = format!(", AOT v5e:2x2 {} KiB", bytes.len() / 1024);
    }
    println!("{stem:<36} XLA compile {compile_s:.2} s, worst relative error vs onnxruntime {worst:.2e}{aot}");
    Ok(())
}

#[test]
fn recurrent_models_on_xla_match_onnxruntime() {
    let Some(plugin) = common::cpu_plugin() else { return };
    let Some(py) = oracle::python() else { return };
    let libtpu = common::libtpu();
    let tmp = fresh_dir("cloud-tpu-rnn-models");
    let failures: Vec<String> = models().iter().filter_map(|m| check(&py, &plugin, libtpu.as_ref(), &tmp, m).err()).collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
