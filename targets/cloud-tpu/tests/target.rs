//! The `cloud-tpu` target end to end on the XLA CPU plugin: prepare/run through the `Target` trait, resident
//! weights, the compilation cache, input validation, device listing, and a missing plugin.

mod common;

use common::{assert_close, rand_f32};
use tpu_sdk_test_support::fresh_dir;
use tpu_sdk_cloud_tpu::cache::{CacheOutcome, CompileCache};
use tpu_sdk_cloud_tpu::CloudTpuTarget;
use tpu_sdk_core::ir::*;
use tpu_sdk_core::target::{CloudTpuOptions, CompileOptions, EdgeTpuOptions, Target};

/// y = softmax(relu(x @ w1 + b1) @ w2), with w1 large enough to be passed as a resident argument.
fn mlp(batch: usize) -> (Graph, Tensor, Tensor, Tensor) {
    let (din, dh, dout) = (48, 40, 5);
    let w1 = rand_f32(&[din, dh], 1);
    let b1 = rand_f32(&[dh], 2);
    let w2 = rand_f32(&[dh, dout], 3);
    let mut g = Graph::new("mlp");
    let x = g.add_input("x", DType::F32, vec![batch, din]);
    let w1v = g.add_constant("w1", w1.clone());
    let b1v = g.add_constant("b1", b1.clone());
    let w2v = g.add_constant("w2", w2.clone());
    let h = g.add_value("h", DType::F32, vec![batch, dh]);
    g.add_node("fc1", Op::Gemm { alpha: 1.0, beta: 1.0, trans_a: false, trans_b: false, activation: Some(Activation::Relu) }, vec![Some(x), Some(w1v), Some(b1v)], vec![h]);
    let l = g.add_value("l", DType::F32, vec![batch, dout]);
    g.add_node("fc2", Op::MatMul, vec![Some(h), Some(w2v)], vec![l]);
    let y = g.add_value("y", DType::F32, vec![batch, dout]);
    g.add_node("sm", Op::Softmax { axis: 1 }, vec![Some(l)], vec![y]);
    g.outputs.push(y);
    (g, w1, b1, w2)
}

/// The same MLP in plain Rust (f64 accumulation).
fn mlp_reference(x: &Tensor, w1: &Tensor, b1: &Tensor, w2: &Tensor) -> Tensor {
    let (x, w1, b1, w2) = (x.as_f32().unwrap(), w1.as_f32().unwrap(), b1.as_f32().unwrap(), w2.as_f32().unwrap());
    let (din, dh, dout) = (48, 40, 5);
    let batch = x.len() / din;
    let mut out = Vec::new();
    for b in 0..batch {
        let h: Vec<f64> = (0..dh)
            .map(|j| ((0..din).map(|k| x[b * din + k] as f64 * w1[k * dh + j] as f64).sum::<f64>() + b1[j] as f64).max(0.0))
            .collect();
        let l: Vec<f64> = (0..dout).map(|j| (0..dh).map(|k| h[k] * w2[k * dout + j] as f64).sum()).collect();
        let m = l.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        let s: f64 = l.iter().map(|v| (v - m).exp()).sum();
        out.extend(l.iter().map(|v| ((v - m).exp() / s) as f32));
    }
    Tensor::from_f32(vec![batch, dout], out)
}

#[test]
fn runs_a_model_through_the_target_trait_with_resident_weights() {
    let Some(plugin) = common::cpu_plugin() else { return };
    let (g, w1, b1, w2) = mlp(3);
    let target = CloudTpuTarget::with_plugin(&plugin);
    assert_eq!(target.name(), "cloud-tpu");
    let typed = target.compile_graph(g.clone()).unwrap();
    assert_eq!(typed.resident_weights(), 1, "w1 (1920 elements) is an argument, the small ones are embedded");
    let mut exe = target.prepare(g).unwrap();
    for seed in [10, 11] {
        let x = rand_f32(&[3, 48], seed);
        let y = exe.run(std::slice::from_ref(&x)).unwrap();
        assert_close(&y[0], &mlp_reference(&x, &w1, &b1, &w2), 1e-5, 1e-6, "mlp");
    }
    // A fully embedded program computes the same.
    let mut inline = CloudTpuTarget::with_plugin(&plugin);
    inline.lower.max_inline_constant = None;
    let x = rand_f32(&[3, 48], 12);
    let a = inline.compile_graph(mlp(3).0).unwrap();
    assert_eq!(a.resident_weights(), 0);
    assert_close(&a.execute(std::slice::from_ref(&x)).unwrap()[0], &mlp_reference(&x, &w1, &b1, &w2), 1e-5, 1e-6, "inline");
}

#[test]
fn the_compilation_cache_stores_then_loads_executables() {
    let Some(plugin) = common::cpu_plugin() else { return };
    let dir = std::env::temp_dir().join(format!("tpu-sdk-cache-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut t = CloudTpuTarget::with_plugin(&plugin);
    t.cache_dir = Some(dir.clone());
    let x = rand_f32(&[2, 48], 20);
    let first = t.compile_graph(mlp(2).0).unwrap();
    assert_eq!(first.cache_outcome(), Some(CacheOutcome::Miss));
    // In the same process the executable is still loaded: no plugin call at all.
    let second = t.compile_graph(mlp(2).0).unwrap();
    assert_eq!(second.cache_outcome(), Some(CacheOutcome::MemoryHit));
    eprintln!("{}", second.cache_report().unwrap().describe());
    // Without the in-memory layer it is read from the folder.
    CompileCache::new(&dir).forget_in_memory();
    let from_disk = t.compile_graph(mlp(2).0).unwrap();
    assert_eq!(from_disk.cache_outcome(), Some(CacheOutcome::Hit));
    assert_eq!(first.execute(std::slice::from_ref(&x)).unwrap(), second.execute(std::slice::from_ref(&x)).unwrap());
    assert_eq!(first.execute(std::slice::from_ref(&x)).unwrap(), from_disk.execute(&[x]).unwrap());
    // A different program is a different entry.
    let third = t.compile_graph(mlp(4).0).unwrap();
    assert_eq!(third.cache_outcome(), Some(CacheOutcome::Miss));
    assert_eq!(entries(&dir).len(), 2);
    // A corrupt entry is recompiled and replaced.
    for e in entries(&dir) {
        std::fs::write(e, b"garbage").unwrap();
    }
    CompileCache::new(&dir).forget_in_memory();
    assert_eq!(t.compile_graph(mlp(2).0).unwrap().cache_outcome(), Some(CacheOutcome::Miss));
    CompileCache::new(&dir).forget_in_memory();
    assert_eq!(t.compile_graph(mlp(2).0).unwrap().cache_outcome(), Some(CacheOutcome::Hit));
    let _ = std::fs::remove_dir_all(&dir);
}

fn entries(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).filter(|p| p.extension().is_some_and(|x| x == "pjrt")).collect()
}

#[test]
fn inputs_that_do_not_match_are_rejected_with_expected_and_given() {
    let Some(plugin) = common::cpu_plugin() else { return };
    let mut exe = CloudTpuTarget::with_plugin(&plugin).prepare(mlp(2).0).unwrap();
    let e = exe.run(&[rand_f32(&[3, 48], 1)]).unwrap_err();
    assert!(matches!(e, tpu_sdk_core::Error::InputMismatch(_)), "{e:?}");
    assert!(e.to_string().contains("'x' f32[2, 48]") && e.to_string().contains("f32[3, 48]"), "{e}");
    let e = exe.run(&[]).unwrap_err();
    assert!(e.to_string().contains("takes 1 input(s)"), "{e}");
}

#[test]
fn lists_the_platform_and_devices() {
    let Some(plugin) = common::cpu_plugin() else { return };
    let info = tpu_sdk_cloud_tpu::devices(Some(&plugin)).unwrap();
    assert_eq!(info.platform, "cpu");
    assert_eq!(info.devices.len(), 4);
    assert_eq!(info.api_version.0, 0);
    assert_eq!(info.header_version, tpu_sdk_cloud_tpu::pjrt::HEADER_VERSION);
    assert!(info.attributes.iter().any(|(k, _)| k == "stablehlo_current_version"));
}

#[test]
fn a_missing_plugin_says_what_to_install() {
    let e = CloudTpuTarget::with_plugin("/nonexistent/libtpu.so").prepare(mlp(1).0).err().expect("no plugin").to_string();
    assert!(e.contains("/nonexistent/libtpu.so") && e.contains("pip install"), "{e}");
}

#[test]
fn replicated_execution_runs_one_batch_per_device() {
    let Some(plugin) = common::cpu_plugin() else { return };
    let (g, w1, b1, w2) = mlp(2);
    let mut t = CloudTpuTarget::with_plugin(&plugin);
    t.device = 1;
    let exe = t.compile_replicated(g, 3).unwrap();
    assert_eq!(exe.devices().iter().map(|d| d.id()).collect::<Vec<_>>(), vec![1, 2, 3]);
    let batches: Vec<Vec<Tensor>> = (0..3).map(|r| vec![rand_f32(&[2, 48], 30 + r)]).collect();
    let outs = exe.execute(&batches).unwrap();
    assert_eq!(outs.len(), 3);
    for (b, o) in batches.iter().zip(&outs) {
        assert_close(&o[0], &mlp_reference(&b[0], &w1, &b1, &w2), 1e-5, 1e-6, "replica");
    }
    assert!(exe.execute(&batches[..2]).unwrap_err().to_string().contains("3 replicas"));
    t.device = 2;
    let e = t.compile_replicated(mlp(2).0, 3).unwrap_err().to_string();
    assert!(e.contains("4 addressable device"), "{e}");
}

/// The MLP for `batch` rows with its weights (w1, b1, w2), an input from `seed`, and its outputs on one device
/// of the plugin (the baseline the parallel runs must equal).
fn mlp_on_one_device(plugin: &std::path::Path, batch: usize, seed: u64) -> (Graph, (Tensor, Tensor, Tensor), Tensor, Vec<Tensor>) {
    let (g, w1, b1, w2) = mlp(batch);
    let x = rand_f32(&[batch, 48], seed);
    let single = CloudTpuTarget::with_plugin(plugin).compile_graph(g.clone()).unwrap().execute(std::slice::from_ref(&x)).unwrap();
    (g, (w1, b1, w2), x, single)
}

/// The CPU plugin and an empty folder `tpu-sdk-{name}-{pid}`; `None` (after a note) without the plugin.
fn plugin_and_fresh_dir(name: &str) -> Option<(std::path::PathBuf, std::path::PathBuf)> {
    Some((common::cpu_plugin()?, fresh_dir(name)))
}

/// `g` on `x` through the Target trait with `replicas` and `shard`; the target too, for more runs.
fn run_parallel(plugin: &std::path::Path, replicas: usize, shard: &[&str], g: &Graph, x: &Tensor) -> (CloudTpuTarget, Vec<Tensor>) {
    let mut t = CloudTpuTarget::with_plugin(plugin);
    t.replicas = replicas;
    t.shard = shard.iter().map(|s| s.to_string()).collect();
    let y = t.prepare(g.clone()).unwrap().run(std::slice::from_ref(x)).unwrap();
    (t, y)
}

/// Asserts that a parallel run's output `y` equals the single-device run and the plain-Rust reference.
fn assert_equals_one_device_and_reference(y: &Tensor, single: &Tensor, x: &Tensor, (w1, b1, w2): &(Tensor, Tensor, Tensor), what: &str) {
    assert_close(y, single, 1e-5, 1e-7, &format!("{what} vs 1 device"));
    assert_close(y, &mlp_reference(x, w1, b1, w2), 1e-5, 1e-6, &format!("{what} vs reference"));
}

#[test]
fn data_parallel_replicas_split_the_batch_and_equal_the_single_device_run() {
    let Some(plugin) = common::cpu_plugin() else { return };
    let (g, w, x, single) = mlp_on_one_device(&plugin, 8, 40);
    let (mut t, y) = run_parallel(&plugin, 4, &[], &g, &x);
    assert_equals_one_device_and_reference(&y[0], &single[0], &x, &w, "4 replicas");
    let dp = t.compile_data_parallel(g.clone(), 4).unwrap();
    assert_eq!(dp.replicated().devices().len(), 4);
    t.replicas = 3;
    let e = t.prepare(g).err().expect("8 does not split into 3").to_string();
    assert!(e.contains("--replicas 3") && e.contains("multiple of 3"), "{e}");
}

#[test]
fn tensor_parallel_shards_equal_the_single_device_run() {
    let Some(plugin) = common::cpu_plugin() else { return };
    let (g, _, x, single) = mlp_on_one_device(&plugin, 4, 41);
    for specs in [vec!["auto".to_string()], vec!["w1=1".to_string()], vec!["w2=0".to_string(), "parts=2".to_string()]] {
        let exe = CloudTpuTarget::with_plugin(&plugin).compile_sharded(g.clone(), &specs).unwrap();
        let parts = if specs.len() == 2 { 2 } else { 4 };
        assert_eq!(exe.plan().parts, parts, "{specs:?}");
        assert_eq!(exe.devices().len(), parts);
        let y = exe.execute(std::slice::from_ref(&x)).unwrap();
        assert_close(&y[0], &single[0], 1e-5, 1e-7, &format!("{specs:?} vs 1 device"));
    }
    // The same through the Target trait.
    let mut t = CloudTpuTarget::with_plugin(&plugin);
    t.shard = vec!["auto".into()];
    let y = t.prepare(g.clone()).unwrap().run(std::slice::from_ref(&x)).unwrap();
    assert_close(&y[0], &single[0], 1e-5, 1e-7, "prepare with --shard auto");
    let plan = tpu_sdk_cloud_tpu::shard::plan(&g, &["auto".into(), "partitioner=gspmd".into()], 4).unwrap().unwrap();
    let mlir = tpu_sdk_cloud_tpu::lower::lower_program_sharded(&g, &Default::default(), &plan, true).unwrap().mlir;
    assert!(mlir.contains(r#"mhlo.sharding = "{devices=[1,4]0,1,2,3}""#) && mlir.contains(r#"{devices=[4,1]0,1,2,3}"#), "{mlir}");
    assert!(mlir.contains("mhlo.num_partitions = 4"));
    // GSPMD (partitioner=gspmd; Shardy is the default) gives the same results.
    for specs in [vec!["auto", "partitioner=gspmd"], vec!["w2=0", "parts=2", "partitioner=gspmd"]] {
        let specs: Vec<String> = specs.into_iter().map(String::from).collect();
        let exe = CloudTpuTarget::with_plugin(&plugin).compile_sharded(g.clone(), &specs).unwrap();
        assert_eq!(exe.plan().partitioner, tpu_sdk_cloud_tpu::shard::Partitioner::Gspmd);
        let y = exe.execute(std::slice::from_ref(&x)).unwrap();
        assert_close(&y[0], &single[0], 1e-5, 1e-7, &format!("{specs:?} vs 1 device"));
    }
    // Shardy: the sdy dialect (a mesh, per-dimension shardings), compiled with use_shardy_partitioner.
    let specs: Vec<String> = vec!["auto".into()];
    let plan = tpu_sdk_cloud_tpu::shard::plan(&g, &specs, 4).unwrap().unwrap();
    let mlir = tpu_sdk_cloud_tpu::lower::lower_program_sharded(&g, &Default::default(), &plan, true).unwrap().mlir;
    assert!(mlir.contains(r#"sdy.mesh @mesh = <["x"=4]>"#), "{mlir}");
    assert!(mlir.contains(r#"sdy.sharding = #sdy.sharding<@mesh, [{}, {"x"}]>"#) && !mlir.contains("mhlo.sharding"), "{mlir}");
    // Embedded weights (self-contained artifacts) sit under sdy.sharding_constraint; the artifact runs.
    let mlir = tpu_sdk_cloud_tpu::lower::lower_program_sharded(&g, &Default::default(), &plan, false).unwrap().mlir;
    assert!(mlir.contains("sdy.sharding_constraint"), "{mlir}");
    let e = tpu_sdk_cloud_tpu::shard::plan(&g, &["auto".into(), "partitioner=mpmd".into()], 4).unwrap_err().to_string();
    assert!(e.contains("unknown partitioner 'mpmd'"), "{e}");
}

#[test]
fn data_and_tensor_parallel_together_equal_the_single_device_run() {
    let Some(plugin) = common::cpu_plugin() else { return };
    let (g, w, x, single) = mlp_on_one_device(&plugin, 6, 42);
    // 2 replicas (3 rows each) × 2 partitions (w1 split on its columns) on the 4 CPU devices, through the trait.
    let (mut t, y) = run_parallel(&plugin, 2, &["w1=1"], &g, &x);
    assert_equals_one_device_and_reference(&y[0], &single[0], &x, &w, "2 replicas x 2 partitions");
    let dp = t.compile_data_and_tensor_parallel(g.clone(), 2, &["auto".into()]).unwrap();
    assert_eq!((dp.replicas(), dp.plan().unwrap().parts, dp.replicated().devices().len()), (2, 2, 4));
    let y = dp.execute(std::slice::from_ref(&x)).unwrap();
    assert_close(&y[0], &single[0], 1e-5, 1e-7, "2 x 2 auto");
    // 3 replicas × 2 partitions need 6 devices: a clear error naming the count.
    t.replicas = 3;
    t.shard = vec!["w1=1".into(), "parts=2".into()];
    let e = t.prepare(g.clone()).err().expect("6 devices are not there").to_string();
    assert!(e.contains("4 addressable device"), "{e}");
    // The artifact: one executable for 2 × 2 devices; replica r's partitions take its half of the batch.
    let dir = fresh_dir("compile-dp-tp");
    let o = CompileOptions { target: CloudTpuOptions { replicas: Some(2), shard: vec!["w2=0".parse().unwrap()], ..Default::default() }.into(), ..opts(&dir.join("rs.pjrt")) };
    let out = CloudTpuTarget::with_plugin(&plugin).compile(g.clone(), &o).unwrap();
    assert!(out.summary.contains("2 replica(s), 2 partitions"), "{}", out.summary);
    let p = tpu_sdk_cloud_tpu::pjrt::Plugin::load(&plugin).unwrap();
    let client = p.shared_client().unwrap();
    let exe = client.load_serialized(&std::fs::read(dir.join("rs.pjrt")).unwrap()).unwrap();
    let devs = client.addressable_devices().unwrap();
    let (x0, x1) = (rand_f32(&[6, 48], 43), rand_f32(&[6, 48], 44));
    let bufs: Vec<_> = devs.iter().enumerate().map(|(k, d)| client.upload(if k < 2 { &x0 } else { &x1 }, d).unwrap()).collect();
    let outs = exe.execute_replicated(&bufs.iter().map(|b| vec![b]).collect::<Vec<_>>()).unwrap();
    for (k, o) in outs.iter().enumerate() {
        let xin = if k < 2 { &x0 } else { &x1 };
        assert_close(&o[0].to_tensor().unwrap(), &mlp_reference(xin, &w.0, &w.1, &w.2), 1e-5, 1e-6, &format!("artifact device {k}"));
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn lists_devices_through_the_target_trait() {
    let Some(plugin) = common::cpu_plugin() else { return };
    let d = CloudTpuTarget::with_plugin(&plugin).devices().unwrap();
    assert_eq!(d.len(), 4);
    assert_eq!(d.iter().map(|d| d.id.as_str()).collect::<Vec<_>>(), ["0", "1", "2", "3"]);
    let detail = |k: &str| d[0].details.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
    assert_eq!(detail("platform").as_deref(), Some("cpu"));
    assert!(detail("pjrt_api").is_some_and(|v| v.starts_with("0.")));
    assert_eq!((d[0].target.as_str(), d[0].state.as_str(), d[0].kind.as_str()), ("cloud-tpu", "ready", "cpu"));
    assert!(d[0].location.ends_with(".so"));
    let e = CloudTpuTarget::with_plugin("/nonexistent/libpjrt.so").devices().unwrap_err().to_string();
    assert!(e.contains("pip install"), "{e}");
}

fn opts(out: &std::path::Path) -> CompileOptions {
    CompileOptions { output: out.to_path_buf(), target: CloudTpuOptions::default().into(), ..CompileOptions::default() }
}

#[test]
fn compile_writes_stablehlo_and_executables_that_run() {
    let Some((plugin, dir)) = plugin_and_fresh_dir("compile") else { return };
    let (g, w1, b1, w2) = mlp(2);
    let t = CloudTpuTarget::with_plugin(&plugin);
    // StableHLO text, chosen by the extension.
    let out = t.compile(g.clone(), &opts(&dir.join("m.mlir"))).unwrap();
    let text = std::fs::read_to_string(dir.join("m.mlir")).unwrap();
    assert!(text.contains("func.func @main") && !text.contains("%arg1"), "weights are embedded");
    assert!(out.report_json.unwrap().contains(r#""emit": "mlir""#));
    // A bf16 executable for the local plugin: load it and run it.
    let o = CompileOptions { target: CloudTpuOptions { dtype: Some(DType::BF16), ..Default::default() }.into(), ..opts(&dir.join("m.pjrt")) };
    let out = t.compile(g.clone(), &o).unwrap();
    assert!(out.summary.contains("dtype bf16"), "{}", out.summary);
    let p = tpu_sdk_cloud_tpu::pjrt::Plugin::load(&plugin).unwrap();
    let client = p.shared_client().unwrap();
    let exe = client.load_serialized(&std::fs::read(dir.join("m.pjrt")).unwrap()).unwrap();
    let dev = client.addressable_devices().unwrap()[0].clone();
    let x = rand_f32(&[2, 48], 50);
    let y = exe.execute(&[&client.upload(&x, &dev).unwrap()], None).unwrap()[0].to_tensor().unwrap();
    assert_eq!(y.dtype(), DType::F32, "the f32 interface is kept");
    assert_close(&y, &mlp_reference(&x, &w1, &b1, &w2), 0.05, 0.02, "bf16 executable");
    let mlir = t.compile(g.clone(), &CompileOptions { target: CloudTpuOptions { dtype: Some(DType::BF16), ..Default::default() }.into(), ..opts(&dir.join("b.mlir")) }).map(|_| std::fs::read_to_string(dir.join("b.mlir")).unwrap()).unwrap();
    assert!(mlir.contains("bf16"));
    // A sharded executable (weights embedded under sharding constraints) on 4 devices equals one device, with
    // either partitioner.
    let single = t.compile_graph(g.clone()).unwrap().execute(std::slice::from_ref(&x)).unwrap();
    for extra in [None, Some("partitioner=gspmd")] {
        let mut shard = vec!["auto".to_string()];
        shard.extend(extra.map(String::from));
        let o = CompileOptions { target: CloudTpuOptions { shard: shard.iter().map(|s| s.parse().unwrap()).collect(), ..Default::default() }.into(), ..opts(&dir.join("s.pjrt")) };
        let out = t.compile(g.clone(), &o).unwrap();
        assert!(out.summary.contains("4 partitions"), "{}", out.summary);
        let exe = client.load_serialized(&std::fs::read(dir.join("s.pjrt")).unwrap()).unwrap();
        let devs = client.addressable_devices().unwrap();
        let bufs: Vec<_> = devs.iter().map(|d| client.upload(&x, d).unwrap()).collect();
        let outs = exe.execute_replicated(&bufs.iter().map(|b| vec![b]).collect::<Vec<_>>()).unwrap();
        for o in &outs {
            assert_close(&o[0].to_tensor().unwrap(), &single[0], 1e-5, 1e-7, &format!("sharded artifact {extra:?}"));
        }
    }
    // Replicas compile for as many devices.
    let o = CompileOptions { target: CloudTpuOptions { replicas: Some(2), ..Default::default() }.into(), ..opts(&dir.join("r.pjrt")) };
    assert!(t.compile(g.clone(), &o).unwrap().summary.contains("2 replica(s)"));
    assert_eq!(std::fs::read_dir(&dir).unwrap().filter(|e| e.as_ref().unwrap().file_name().to_string_lossy().ends_with(".tmp")).count(), 0);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn compile_rejects_options_it_cannot_honour() {
    let dir = fresh_dir("compile-errors");
    let (g, ..) = mlp(2);
    let t = CloudTpuTarget::with_plugin("/nonexistent/libtpu.so");
    let cases: Vec<(CompileOptions, &str)> = vec![
        // Edge TPU flags (`--calibration-method`, `--io-dtype float`) are refused by the CLI (cli/tests/cli.rs); their
        // options reaching this target are the caller's mistake.
        (CompileOptions { target: EdgeTpuOptions::default().into(), ..opts(&dir.join("a.pjrt")) }, "--target edgetpu"),
        (CompileOptions { target: CloudTpuOptions { dtype: Some(DType::I8), ..Default::default() }.into(), ..opts(&dir.join("a.pjrt")) }, "f32 or bf16"),
        (CompileOptions { target: CloudTpuOptions { replicas: Some(0), ..Default::default() }.into(), ..opts(&dir.join("a.pjrt")) }, "at least 1"),
        (CompileOptions { target: CloudTpuOptions { topology: Some("v5e:2x2".parse().unwrap()), ..Default::default() }.into(), ..opts(&dir.join("a.mlir")) }, "--emit mlir"),
        (CompileOptions { target: CloudTpuOptions { topology: Some("v5e:2x2".parse().unwrap()), ..Default::default() }.into(), ..opts(&dir.join("a.pjrt")) }, "pip install libtpu"),
        (CompileOptions { target: CloudTpuOptions { shard: vec!["auto".parse().unwrap()], ..Default::default() }.into(), ..opts(&dir.join("a.mlir")) }, "parts=N"),
        (CompileOptions { target: CloudTpuOptions { shard: vec!["nope=1".parse().unwrap(), "parts=2".parse().unwrap()], ..Default::default() }.into(), ..opts(&dir.join("a.mlir")) }, "not a constant operand"),
    ];
    for (o, want) in cases {
        let e = t.compile(g.clone(), &o).unwrap_err().to_string();
        assert!(e.contains(want), "{want}: {e}");
    }
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0, "nothing is written on errors");
    // With parts=N the sharded StableHLO needs no plugin at all.
    let o = CompileOptions { target: CloudTpuOptions { shard: vec!["w1=1".parse().unwrap(), "parts=2".parse().unwrap()], ..Default::default() }.into(), ..opts(&dir.join("s.mlir")) };
    t.compile(g.clone(), &o).unwrap();
    assert!(std::fs::read_to_string(dir.join("s.mlir")).unwrap().contains(r#"sdy.mesh @mesh = <["x"=2]>"#));
    let shard = ["w1=1", "parts=2", "partitioner=gspmd"].iter().map(|s| s.parse().unwrap()).collect();
    let o = CompileOptions { target: CloudTpuOptions { shard, ..Default::default() }.into(), ..opts(&dir.join("g.mlir")) };
    t.compile(g, &o).unwrap();
    assert!(std::fs::read_to_string(dir.join("g.mlir")).unwrap().contains("{devices=[1,2]0,1}"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn parallel_compilations_of_one_program_compile_once_and_report_the_speedup() {
    let Some((plugin, dir)) = plugin_and_fresh_dir("cache-parallel") else { return };
    let handles: Vec<_> = (0..2)
        .map(|_| {
            let (plugin, dir) = (plugin.clone(), dir.clone());
            std::thread::spawn(move || {
                let mut t = CloudTpuTarget::with_plugin(&plugin);
                t.cache_dir = Some(dir);
                t.compile_graph(mlp(3).0).unwrap().cache_report().cloned().unwrap()
            })
        })
        .collect();
    let reports: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    assert_eq!(reports.iter().filter(|r| r.outcome == CacheOutcome::Miss).count(), 1, "{reports:?}");
    let hit = reports.iter().find(|r| r.outcome == CacheOutcome::Hit).unwrap();
    let s = tpu_sdk_cloud_tpu::cache::CompileCache::new(&dir).stats();
    assert_eq!((s.entries, s.hits, s.misses), (1, 1, 1));
    eprintln!("{} | cache stats speedup {:?}", hit.describe(), s.speedup());
    assert!(hit.describe().contains("faster"));
    let _ = std::fs::remove_dir_all(&dir);
}

/// The child of `two_processes_sharing_a_cache_folder_compile_a_program_once` (run by it with
/// `TPU_SDK_CACHE_CHILD_DIR` set; does nothing otherwise).
#[test]
#[ignore = "helper process of two_processes_sharing_a_cache_folder_compile_a_program_once"]
fn cache_child_process() {
    let Some(dir) = std::env::var_os("TPU_SDK_CACHE_CHILD_DIR") else { return };
    let Some(plugin) = common::cpu_plugin() else { return };
    let mut t = CloudTpuTarget::with_plugin(&plugin);
    t.cache_dir = Some(dir.into());
    let exe = t.compile_graph(mlp(5).0).unwrap();
    println!("OUTCOME={:?}", exe.cache_outcome().unwrap());
}

#[test]
fn two_processes_sharing_a_cache_folder_compile_a_program_once() {
    let Some((plugin, dir)) = plugin_and_fresh_dir("cache-processes") else { return };
    let children: Vec<_> = (0..2)
        .map(|_| {
            std::process::Command::new(std::env::current_exe().unwrap())
                .args(["--ignored", "--exact", "cache_child_process", "--nocapture"])
                .env("TPU_SDK_CACHE_CHILD_DIR", &dir)
                .env("TPU_SDK_PJRT_CPU_PLUGIN", &plugin)
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    let outcomes: Vec<String> = children
        .into_iter()
        .map(|c| {
            let out = c.wait_with_output().unwrap();
            assert!(out.status.success());
            let text = String::from_utf8_lossy(&out.stdout).to_string();
            text.lines().find_map(|l| l.strip_prefix("OUTCOME=").map(String::from)).unwrap_or_else(|| panic!("no outcome in {text}"))
        })
        .collect();
    let mut sorted = outcomes.clone();
    sorted.sort();
    assert_eq!(sorted, ["Hit", "Miss"], "one process compiles, the other loads its entry");
    let s = tpu_sdk_cloud_tpu::cache::CompileCache::new(&dir).stats();
    assert_eq!((s.entries, s.hits, s.misses), (1, 1, 1));
    let _ = std::fs::remove_dir_all(&dir);
}
