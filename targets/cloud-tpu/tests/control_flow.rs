//! Control flow lowered to StableHLO (`If` → `stablehlo.if`, `Loop`/`Scan` → `stablehlo.while`) and run by XLA
//! (the CPU PJRT plugin), against the reference CPU runtime (itself checked against onnxruntime in
//! `cli/tests/control_flow.rs`): every output within 1e-5 relative. With `$TPU_SDK_LIBTPU` set, each lowered
//! model is also compiled ahead of time for a v5e:2x2 slice. The models come from
//! `scripts/make_control_flow_models.py`; the one a static TPU program cannot express (a scan output whose length
//! a data-dependent condition decides) is refused by name.

mod common;

use std::path::Path;

use tpu_sdk_cloud_tpu::CloudTpuTarget;
use tpu_sdk_core::import::onnx::{load, ImportOptions};
use tpu_sdk_core::runtime::Session;
use tpu_sdk_test_support::{oracle, random_inputs, relative_to_mean};

fn check(plugin: &Path, path: &Path, dims: &[(&str, usize)]) -> Result<String, String> {
    let stem = path.file_stem().unwrap().to_string_lossy().to_string();
    let mut opts = ImportOptions::default();
    for (d, s) in dims {
        opts.dims.insert(d.to_string(), *s);
    }
    let mut g = load(path, &opts).map_err(|e| format!("{stem}: load: {e}"))?;
    tpu_sdk_core::passes::optimize(&mut g).map_err(|e| format!("{stem}: optimize: {e}"))?;
    let mlir = tpu_sdk_cloud_tpu::lower::lower(&g).map_err(|e| format!("{stem}: lower: {e}"))?;
    let exe = CloudTpuTarget::with_plugin(plugin).compile_graph(g.clone()).map_err(|e| format!("{stem}: compile: {e}\n{mlir}"))?;
    let mut worst = 0.0f64;
    for seed in [1, 2, 3] {
        let inputs = random_inputs(&g, seed);
        let cpu = Session::new(g.clone()).and_then(|mut s| s.run(&inputs)).map_err(|e| format!("{stem}: cpu: {e}"))?;
        let ours = exe.execute(&inputs).map_err(|e| format!("{stem}: run: {e}"))?;
        for (k, (a, b)) in ours.iter().zip(&cpu).enumerate() {
            worst = worst.max(relative_to_mean(&stem, k, a, b, "cpu", 1e-5)?);
        }
    }
    // `--dtype bf16`: the regions compute in bf16 too (their inputs arrive as bf16); within bf16 rounding
    let b = tpu_sdk_cloud_tpu::bf16::to_bf16(&g);
    let exe16 = CloudTpuTarget::with_plugin(plugin).compile_graph(b).map_err(|e| format!("{stem}: bf16 compile: {e}"))?;
    let inputs = random_inputs(&g, 9);
    let cpu = Session::new(g.clone()).and_then(|mut s| s.run(&inputs)).map_err(|e| format!("{stem}: cpu: {e}"))?;
    let ours = exe16.execute(&inputs).map_err(|e| format!("{stem}: bf16 run: {e}"))?;
    for (k, (a, b)) in ours.iter().zip(&cpu).enumerate() {
        relative_to_mean(&format!("{stem} (bf16)"), k, a, b, "cpu", 0.1)?;
    }
    if let Some(libtpu) = oracle::libtpu_path() {
        let a = CloudTpuTarget::with_plugin(libtpu).compile_for_topology(&g, "v5e:2x2").map_err(|e| format!("{stem}: libtpu v5e:2x2: {e}"))?;
        if a.platform != "tpu" || a.executable.len() < 1000 {
            return Err(format!("{stem}: libtpu gave {} ({} bytes)", a.platform, a.executable.len()));
        }
    }
    let aot = match oracle::libtpu_path() {
        Some(_) => ", AOT-compiled for v5e:2x2",
        None => "",
    };
    Ok(format!("{stem:<14} worst relative error vs cpu {worst:.2e}{aot}"))
}

#[test]
fn control_flow_runs_on_xla_like_the_cpu_runtime() {
    let Some(plugin) = common::cpu_plugin() else { return };
    let Some(py) = oracle::python() else { return };
    let dir = std::env::temp_dir().join(format!("tpu_sdk_control_flow_{}", std::process::id()));
    oracle::run_script(&py, "scripts/make_control_flow_models.py", &[&dir]);
    let mut failures = Vec::new();
    for (name, dims) in [("if_nested", &[][..]), ("loop_while", &[]), ("loop_plain", &[]), ("loop_symbolic", &[("batch", 3)]), ("scan_axes", &[]), ("scan8", &[])] {
        match check(&plugin, &dir.join(format!("{name}.onnx")), dims) {
            Ok(line) => println!("{line}"),
            Err(e) => failures.push(e),
        }
    }
    // a scan output whose length a data-dependent condition decides: refused by name
    for (name, want) in [("loop_scan", "static shapes")] {
        let mut g = load(&dir.join(format!("{name}.onnx")), &ImportOptions::default()).unwrap();
        tpu_sdk_core::passes::optimize(&mut g).unwrap();
        match tpu_sdk_cloud_tpu::lower::lower(&g) {
            Ok(_) => failures.push(format!("{name}: lowered, but it should be refused")),
            Err(e) if e.to_string().contains(want) => println!("{name:<14} refused: {e}"),
            Err(e) => failures.push(format!("{name}: refused with an unclear message: {e}")),
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
