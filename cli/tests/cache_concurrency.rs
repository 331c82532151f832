//! The cloud-tpu compilation cache under concurrent processes (issue 16): many `tpu-sdk run --target cloud-tpu`
//! processes share one cache folder, compiling and loading the same and different programs at once, while one
//! more is killed (SIGKILL) at a random moment of its compile or store. Afterwards: every surviving process got
//! the CPU runtime's answer, no corrupt entry was ever served (the cache's checksum counter stays 0), each
//! program was compiled once, and the next round — the killed program included — succeeds with nothing left
//! locked. Needs the XLA CPU plugin (`$TPU_SDK_PYTHON`), like `cloud_tpu_cli.rs`.
#![cfg(feature = "cloud-tpu")]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use tpu_sdk::core::npy;
use tpu_sdk::Tensor;
use tpu_sdk_test_support::cli::{self, ok};
use tpu_sdk_test_support::{assert_close, fresh_dir, oracle};

const MODEL: &str = "examples/models/text_direction_cls.onnx";

/// Input shapes: each is its own program (cache key).
const SHAPES: [[usize; 4]; 4] = [[1, 3, 48, 192], [2, 3, 48, 192], [1, 3, 48, 96], [3, 3, 48, 192]];

fn shape_arg(s: &[usize; 4]) -> String {
    format!("x={},{},{},{}", s[0], s[1], s[2], s[3])
}

fn input(dir: &Path, k: usize) -> PathBuf {
    let s = SHAPES[k];
    let n: usize = s.iter().product();
    let p = dir.join(format!("x{k}.npy"));
    let data: Vec<f32> = (0..n).map(|i| ((i * 7919 + k) % 1000) as f32 / 500.0 - 1.0).collect();
    npy::write(&p, &Tensor::from_f32(s.to_vec(), data)).unwrap();
    p
}

fn cloud_run(plugin: &str, cache: &Path, dir: &Path, k: usize, out: &Path) -> Child {
    cli::command(env!("CARGO_BIN_EXE_tpu-sdk"))
        .env("TPU_SDK_COMPILE_CACHE", cache)
        .args(["run", MODEL, "--input-shape", &shape_arg(&SHAPES[k]), "--input", input(dir, k).to_str().unwrap()])
        .args(["--target", "cloud-tpu", "--plugin", plugin, "--output-dir", out.to_str().unwrap()])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn expected(dir: &Path, k: usize) -> Tensor {
    let out = dir.join(format!("cpu{k}"));
    ok(cli::run(
        env!("CARGO_BIN_EXE_tpu-sdk"),
        &["run", MODEL, "--input-shape", &shape_arg(&SHAPES[k]), "--input", input(dir, k).to_str().unwrap(), "--output-dir", out.to_str().unwrap()],
    ));
    npy::read(&out.join("output_0.npy")).unwrap()
}

fn stats(cache: &Path) -> serde_json::Value {
    let o = Command::new(env!("CARGO_BIN_EXE_tpu-sdk")).env("TPU_SDK_COMPILE_CACHE", cache).args(["cache", "stats", "--json"]).output().unwrap();
    serde_json::from_str(&ok(o)).unwrap()
}

/// Waits for `children` (each tagged with its program), checks each surviving run against the CPU's output.
fn finish(children: Vec<(usize, PathBuf, Child)>, want: &[Tensor]) {
    for (k, out, c) in children {
        let o = c.wait_with_output().unwrap();
        assert!(o.status.success(), "program {k}: {}", String::from_utf8_lossy(&o.stderr));
        let got = npy::read(&out.join("output_0.npy")).unwrap();
        assert_close(&got, &want[k], 1e-4, 1e-5, &format!("program {k} vs the CPU runtime"));
    }
}

#[test]
fn processes_sharing_a_cache_with_one_killed_mid_write_never_see_a_corrupt_entry() {
    let Some(plugin) = oracle::xla_cpu_plugin_of_python().map(|p| p.display().to_string()) else {
        oracle::skip("the XLA CPU plugin was not found through TPU_SDK_PYTHON");
        return;
    };
    let dir = fresh_dir("cache-concurrency");
    let cache = dir.join("cache");
    let want: Vec<Tensor> = (0..SHAPES.len()).map(|k| expected(&dir, k)).collect();

    // Round 1: programs 0-2, three processes each, all at once; program 3 in one more process that is killed.
    let mut children = Vec::new();
    for rep in 0..3 {
        for k in 0..3 {
            let out = dir.join(format!("r1-{k}-{rep}"));
            children.push((k, out.clone(), cloud_run(&plugin, &cache, &dir, k, &out)));
        }
    }
    // Five processes of program 3, killed one after another at spread-out moments (import, compile, the store's
    // temporary file and rename, the statistics update), with a per-run jitter.
    let seed = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().subsec_nanos() as u64;
    let mut victims: Vec<(Duration, Child)> = [250u64, 700, 1200, 1800, 2600]
        .iter()
        .enumerate()
        .map(|(i, ms)| (Duration::from_millis(ms + (seed >> (i * 6)) % 300), cloud_run(&plugin, &cache, &dir, 3, &dir.join(format!("victim{i}")))))
        .collect();
    let t0 = Instant::now();
    let mut killed = Vec::new();
    for (delay, v) in victims.iter_mut() {
        while t0.elapsed() < *delay && v.try_wait().unwrap().is_none() {
            std::thread::sleep(Duration::from_millis(5));
        }
        if v.try_wait().unwrap().is_none() {
            killed.push(delay.as_millis());
        }
        let _ = v.kill();
        let _ = v.wait();
    }
    eprintln!("program 3 processes killed at {killed:?} ms");
    finish(children, &want);

    let s = stats(&cache);
    assert_eq!(s["corrupt"].as_u64(), Some(0), "{s}");
    let misses = s["misses"].as_u64().unwrap();
    assert!((3..=4).contains(&misses), "programs 0-2 compile once each (and program 3 at most once): {s}");
    assert!(s["hits"].as_u64().unwrap() >= 6, "the other six processes load the entries: {s}");

    // Round 2: every program again, the killed one twice; its lock (a dead process's) is taken over.
    let mut children = Vec::new();
    for (i, k) in [0, 1, 2, 3, 3].into_iter().enumerate() {
        let out = dir.join(format!("r2-{k}-{i}"));
        children.push((k, out.clone(), cloud_run(&plugin, &cache, &dir, k, &out)));
    }
    finish(children, &want);
    let s = stats(&cache);
    assert_eq!(s["corrupt"].as_u64(), Some(0), "{s}");
    assert_eq!(s["entries"].as_u64(), Some(SHAPES.len() as u64), "one entry per program: {s}");
    assert!(s["misses"].as_u64().unwrap() <= 4, "program 3 is compiled once at most after the kill: {s}");
    let leftovers: Vec<String> = std::fs::read_dir(&cache)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".lock") && n != "stats.lock")
        .collect();
    assert!(leftovers.is_empty(), "locks left behind: {leftovers:?}");
    let _ = std::fs::remove_dir_all(&dir);
}
