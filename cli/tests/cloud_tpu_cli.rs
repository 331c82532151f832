//! The cloud-tpu commands end to end on the XLA CPU plugin: `devices`, `run --replicas`, `compile` through the
//! compilation cache, `cache stats|clear`. Needs `$TPU_SDK_PYTHON` with the `fastatomstruct-xla-cpu` package;
//! without it the tests say so and pass, unless `TPU_SDK_REQUIRE_ORACLES=1`.
#![cfg(feature = "cloud-tpu")]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const MODEL: &str = "examples/models/text_direction_cls.onnx";

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The XLA CPU plugin of `$TPU_SDK_PYTHON`'s `fastatomstruct-xla-cpu` package.
fn plugin() -> Option<String> {
    let required = std::env::var("TPU_SDK_REQUIRE_ORACLES").is_ok_and(|v| v == "1");
    let python = std::env::var("TPU_SDK_PYTHON").ok().filter(|s| !s.is_empty());
    let found = python.and_then(|py| {
        let o = Command::new(py).args(["-c", "import fastatomstruct_xla_cpu as m; print(m.library_path())"]).output().ok()?;
        o.status.success().then(|| String::from_utf8_lossy(&o.stdout).trim().to_string())
    });
    if found.is_none() {
        assert!(!required, "TPU_SDK_REQUIRE_ORACLES=1 but the XLA CPU plugin was not found through TPU_SDK_PYTHON");
        eprintln!("note: the XLA CPU plugin was not found (set TPU_SDK_PYTHON); skipping");
    }
    found
}

fn tpu_sdk(args: &[&str], cache: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tpu-sdk"))
        .current_dir(repo())
        .env("TPU_SDK_COMPILE_CACHE", cache)
        .args(args)
        .output()
        .unwrap()
}

fn ok(o: Output) -> String {
    let (out, err) = (String::from_utf8_lossy(&o.stdout).into_owned(), String::from_utf8_lossy(&o.stderr).into_owned());
    assert!(o.status.success() && !err.contains("panicked"), "stdout:\n{out}\nstderr:\n{err}");
    out
}

#[test]
fn devices_run_with_replicas_compile_and_the_cache_commands() {
    let Some(p) = plugin() else { return };
    let dir = std::env::temp_dir().join(format!("tpu-sdk-cli-cloud-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let cache = dir.join("cache");

    let doc: serde_json::Value = serde_json::from_str(&ok(tpu_sdk(&["devices", "--target", "cloud-tpu", "--plugin", &p, "--json"], &cache))).unwrap();
    assert_eq!(doc["devices"].as_array().unwrap().len(), 4, "{doc}");
    assert_eq!(doc["devices"][0]["details"]["platform"], "cpu");

    // A batch of 4 on 4 replicas equals the CPU runtime.
    let x = dir.join("x.npy");
    let data: Vec<f32> = (0..4 * 3 * 48 * 192).map(|i| ((i * 7919) % 1000) as f32 / 500.0 - 1.0).collect();
    tpu_sdk::core::npy::write(&x, &tpu_sdk::Tensor::from_f32(vec![4, 3, 48, 192], data)).unwrap();
    let (r4, rc) = (dir.join("r4"), dir.join("rc"));
    let xs = x.to_str().unwrap();
    ok(tpu_sdk(&["run", MODEL, "--input", xs, "--target", "cloud-tpu", "--plugin", &p, "--replicas", "4", "--output-dir", r4.to_str().unwrap()], &cache));
    ok(tpu_sdk(&["run", MODEL, "--input", xs, "--target", "cpu", "--output-dir", rc.to_str().unwrap()], &cache));
    let (a, b) = (tpu_sdk::core::npy::read(&r4.join("output_0.npy")).unwrap(), tpu_sdk::core::npy::read(&rc.join("output_0.npy")).unwrap());
    assert_eq!(a.shape, vec![4, 2]);
    for (u, v) in a.to_f64_vec().iter().zip(b.to_f64_vec()) {
        assert!((u - v).abs() <= 1e-5 * v.abs() + 1e-6, "{u} vs {v}");
    }
    let o = tpu_sdk(&["run", MODEL, "--input", xs, "--target", "cloud-tpu", "--plugin", &p, "--replicas", "3"], &cache);
    assert!(!o.status.success() && String::from_utf8_lossy(&o.stderr).contains("multiple of 3"));

    // compile twice: a miss, then a hit with its measured speedup; then the cache commands.
    ok(tpu_sdk(&["cache", "clear"], &cache));
    let exe = dir.join("m.pjrt");
    let args = ["compile", MODEL, "--input-shape", "x=1,3,48,192", "--target", "cloud-tpu", "--plugin", &p, "-o", exe.to_str().unwrap()];
    assert!(ok(tpu_sdk(&args, &cache)).contains("compile cache miss"));
    let second = ok(tpu_sdk(&args, &cache));
    assert!(second.contains("compile cache hit") && second.contains("faster"), "{second}");
    let s: serde_json::Value = serde_json::from_str(&ok(tpu_sdk(&["cache", "stats", "--json"], &cache))).unwrap();
    assert_eq!((s["entries"].as_u64(), s["hits"].as_u64(), s["misses"].as_u64()), (Some(1), Some(1), Some(1)), "{s}");
    assert!(s["hit_speedup"].as_f64().is_some(), "the speedup is measured: {s}");
    assert!(ok(tpu_sdk(&["cache", "stats"], &cache)).contains("faster"));
    assert!(ok(tpu_sdk(&["cache", "clear"], &cache)).contains("removed 1 entries"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn run_and_bench_with_tensor_parallelism() {
    let Some(p) = plugin() else { return };
    let dir = std::env::temp_dir().join(format!("tpu-sdk-cli-shard-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let cache = dir.join("cache");
    let x = dir.join("x.npy");
    let data: Vec<f32> = (0..2 * 3 * 48 * 192).map(|i| ((i * 4099) % 1000) as f32 / 500.0 - 1.0).collect();
    tpu_sdk::core::npy::write(&x, &tpu_sdk::Tensor::from_f32(vec![2, 3, 48, 192], data)).unwrap();
    let (rs, rc) = (dir.join("rs"), dir.join("rc"));
    let xs = x.to_str().unwrap();
    // Every MatMul/Gemm weight split over 2 devices (SPMD) gives the CPU runtime's result.
    let run = ["run", MODEL, "--input", xs, "--target", "cloud-tpu", "--plugin", &p, "--shard", "auto", "--shard", "parts=2"];
    ok(tpu_sdk(&[&run[..], &["--output-dir", rs.to_str().unwrap()]].concat(), &cache));
    ok(tpu_sdk(&["run", MODEL, "--input", xs, "--target", "cpu", "--output-dir", rc.to_str().unwrap()], &cache));
    let (a, b) = (tpu_sdk::core::npy::read(&rs.join("output_0.npy")).unwrap(), tpu_sdk::core::npy::read(&rc.join("output_0.npy")).unwrap());
    assert_eq!(a.shape, b.shape);
    for (u, v) in a.to_f64_vec().iter().zip(b.to_f64_vec()) {
        assert!((u - v).abs() <= 1e-5 * v.abs() + 1e-6, "{u} vs {v}");
    }
    // Data and tensor parallelism at once: the batch of 2 over 2 replicas, each split over 2 partitions.
    let rr = dir.join("rr");
    ok(tpu_sdk(&[&run[..], &["--replicas", "2", "--output-dir", rr.to_str().unwrap()]].concat(), &cache));
    let c = tpu_sdk::core::npy::read(&rr.join("output_0.npy")).unwrap();
    assert_eq!(c.shape, b.shape);
    for (u, v) in c.to_f64_vec().iter().zip(b.to_f64_vec()) {
        assert!((u - v).abs() <= 1e-5 * v.abs() + 1e-6, "2x2: {u} vs {v}");
    }
    let out = ok(tpu_sdk(&["bench", MODEL, "--input", xs, "--target", "cloud-tpu", "--plugin", &p, "--shard", "auto", "--shard", "parts=2", "--iterations", "3"], &cache));
    assert!(out.contains("latency ms"), "{out}");
    // The flag belongs to cloud-tpu.
    let o = tpu_sdk(&["run", MODEL, "--input", xs, "--shard", "auto"], &cache);
    assert_eq!(o.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--shard applies to --target cloud-tpu only"));
    let _ = std::fs::remove_dir_all(&dir);
}
