//! The cloud-tpu commands end to end on the XLA CPU plugin: `devices`, `run --replicas`, `compile` through the
//! compilation cache, `cache stats|clear`. Needs `$TPU_SDK_PYTHON` with the `fastatomstruct-xla-cpu` package;
//! without it the tests say so and pass, unless `TPU_SDK_REQUIRE_ORACLES=1`.
#![cfg(feature = "cloud-tpu")]

use std::path::Path;
use std::process::Output;

use tpu_sdk::core::npy;
use tpu_sdk::Tensor;
use tpu_sdk_test_support::cli::{self, ok};
use tpu_sdk_test_support::{assert_close, fresh_dir, oracle};

const MODEL: &str = "examples/models/text_direction_cls.onnx";

/// The XLA CPU plugin of `$TPU_SDK_PYTHON`'s `fastatomstruct-xla-cpu` package.
fn plugin() -> Option<String> {
    let found = oracle::xla_cpu_plugin_of_python().map(|p| p.display().to_string());
    if found.is_none() {
        oracle::skip("the XLA CPU plugin was not found through TPU_SDK_PYTHON");
    }
    found
}

fn tpu_sdk(args: &[&str], cache: &Path) -> Output {
    cli::command(env!("CARGO_BIN_EXE_tpu-sdk")).env("TPU_SDK_COMPILE_CACHE", cache).args(args).output().unwrap()
}

/// The first output of a run in `dir`.
fn output_0(dir: &Path) -> Tensor {
    npy::read(&dir.join("output_0.npy")).unwrap()
}

#[test]
fn devices_run_with_replicas_compile_and_the_cache_commands() {
    let Some(p) = plugin() else { return };
    let dir = fresh_dir("cli-cloud");
    let cache = dir.join("cache");

    let doc: serde_json::Value = serde_json::from_str(&ok(tpu_sdk(&["devices", "--target", "cloud-tpu", "--plugin", &p, "--json"], &cache))).unwrap();
    assert_eq!(doc["devices"].as_array().unwrap().len(), 4, "{doc}");
    assert_eq!(doc["devices"][0]["details"]["platform"], "cpu");

    // A batch of 4 on 4 replicas equals the CPU runtime.
    let x = dir.join("x.npy");
    let data: Vec<f32> = (0..4 * 3 * 48 * 192).map(|i| ((i * 7919) % 1000) as f32 / 500.0 - 1.0).collect();
    npy::write(&x, &Tensor::from_f32(vec![4, 3, 48, 192], data)).unwrap();
    let (r4, rc) = (dir.join("r4"), dir.join("rc"));
    let xs = x.to_str().unwrap();
    ok(tpu_sdk(&["run", MODEL, "--input", xs, "--target", "cloud-tpu", "--plugin", &p, "--replicas", "4", "--output-dir", r4.to_str().unwrap()], &cache));
    ok(tpu_sdk(&["run", MODEL, "--input", xs, "--target", "cpu", "--output-dir", rc.to_str().unwrap()], &cache));
    let (a, b) = (output_0(&r4), output_0(&rc));
    assert_eq!(a.shape, vec![4, 2]);
    assert_close(&a, &b, 1e-5, 1e-6, "4 replicas vs cpu");
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
    let dir = fresh_dir("cli-shard");
    let cache = dir.join("cache");
    let x = dir.join("x.npy");
    let data: Vec<f32> = (0..2 * 3 * 48 * 192).map(|i| ((i * 4099) % 1000) as f32 / 500.0 - 1.0).collect();
    npy::write(&x, &Tensor::from_f32(vec![2, 3, 48, 192], data)).unwrap();
    let (rs, rc) = (dir.join("rs"), dir.join("rc"));
    let xs = x.to_str().unwrap();
    // Every MatMul/Gemm weight split over 2 devices (SPMD) gives the CPU runtime's result.
    let run = ["run", MODEL, "--input", xs, "--target", "cloud-tpu", "--plugin", &p, "--shard", "auto", "--shard", "parts=2"];
    ok(tpu_sdk(&[&run[..], &["--output-dir", rs.to_str().unwrap()]].concat(), &cache));
    ok(tpu_sdk(&["run", MODEL, "--input", xs, "--target", "cpu", "--output-dir", rc.to_str().unwrap()], &cache));
    let (a, b) = (output_0(&rs), output_0(&rc));
    assert_close(&a, &b, 1e-5, 1e-6, "2 partitions vs cpu");
    // Data and tensor parallelism at once: the batch of 2 over 2 replicas, each split over 2 partitions.
    let rr = dir.join("rr");
    ok(tpu_sdk(&[&run[..], &["--replicas", "2", "--output-dir", rr.to_str().unwrap()]].concat(), &cache));
    assert_close(&output_0(&rr), &b, 1e-5, 1e-6, "2x2 vs cpu");
    let out = ok(tpu_sdk(&["bench", MODEL, "--input", xs, "--target", "cloud-tpu", "--plugin", &p, "--shard", "auto", "--shard", "parts=2", "--iterations", "3"], &cache));
    assert!(out.contains("latency ms"), "{out}");
    // The flag belongs to cloud-tpu.
    let o = tpu_sdk(&["run", MODEL, "--input", xs, "--shard", "auto"], &cache);
    assert_eq!(o.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--shard applies to --target cloud-tpu only"));
    let _ = std::fs::remove_dir_all(&dir);
}

/// A plugin whose compile fails (the fault-injecting plugin of targets/cloud-tpu/tests/stubs/pjrt_fault.c, over
/// the real XLA CPU plugin): `run` and `compile` exit with status 4 (a device error) and name the failing PJRT
/// function.
#[test]
fn a_failing_plugin_gives_an_exit_code_and_names_the_call() {
    let Some(p) = plugin() else { return };
    let Some(shim) = tpu_sdk_test_support::pjrt_fault::build(Path::new(&p), "Client_Compile@1+") else { return };
    let dir = fresh_dir("cli-cloud-fault");
    let shim = shim.to_str().unwrap();
    let out = dir.join("m.pjrt");
    for args in [
        vec!["run", MODEL, "--target", "cloud-tpu", "--plugin", shim, "--input-shape", "x=1,3,48,192", "--random-input"],
        vec!["compile", MODEL, "--target", "cloud-tpu", "--plugin", shim, "--input-shape", "x=1,3,48,192", "-o", out.to_str().unwrap()],
    ] {
        let o = tpu_sdk(&args, Path::new("off"));
        let err = String::from_utf8_lossy(&o.stderr).to_string();
        assert_eq!(o.status.code(), Some(4), "{args:?}: {err}");
        tpu_sdk_test_support::pjrt_fault::assert_injected(&err, "Client_Compile");
        assert!(!err.contains("panicked"), "{err}");
    }
    assert!(!out.exists(), "a failed compile leaves no output file");
}
