//! The ONNX backend node suite through the cloud-tpu target on the real XLA CPU plugin: every case that the CPU
//! runtime passes (`conformance/expected_pass.txt`) is lowered to StableHLO, compiled and run by XLA, and its
//! outputs are compared with the CPU runtime's (1e-4 relative; integers and booleans exactly).
//!
//! Prints lowered / not lowered / mismatching counts per op. Cases that the target runs and matches are listed
//! in `conformance/expected_pass_cloud_tpu.txt`; a listed case that fails is a test failure, as is any panic
//! (`TPU_SDK_UPDATE_EXPECTED=1` rewrites the list). Needs `conformance/cases` (see `conformance/generate.py`)
//! and the plugin (`$TPU_SDK_PJRT_CPU_PLUGIN` or `$TPU_SDK_PYTHON`'s `fastatomstruct-xla-cpu`); without them it
//! says so and passes, unless `TPU_SDK_REQUIRE_CONFORMANCE=1` / `TPU_SDK_REQUIRE_ORACLES=1`.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};

use tpu_sdk_cloud_tpu::CloudTpuTarget;
use tpu_sdk_core::import::onnx::{load, ImportOptions};
use tpu_sdk_core::ir::{Tensor, TensorData};
use tpu_sdk_core::runtime::Session;
use tpu_sdk_core::{npy, passes};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn read_list(p: &Path) -> BTreeSet<String> {
    std::fs::read_to_string(p)
        .unwrap_or_default()
        .lines()
        .map(|l| l.trim().to_string())
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect()
}

/// 1e-4 relative (plus 1e-6 absolute) for floats, NaN equal to NaN; exact for everything else.
fn close(got: &Tensor, want: &Tensor) -> Result<(), String> {
    if got.dtype() != want.dtype() || got.shape != want.shape {
        return Err(format!("{} {:?} instead of {} {:?}", got.dtype(), got.shape, want.dtype(), want.shape));
    }
    if let (TensorData::Bool(a), TensorData::Bool(b)) = (&got.data, &want.data) {
        return if a == b { Ok(()) } else { Err("bool values differ".into()) };
    }
    let exact = !want.dtype().is_float();
    for (i, (x, y)) in got.to_f64_vec().into_iter().zip(want.to_f64_vec()).enumerate() {
        let ok = if exact {
            x == y
        } else if y.is_nan() {
            x.is_nan()
        } else if y.is_infinite() {
            x == y
        } else if matches!(want.dtype(), tpu_sdk_core::ir::DType::F16 | tpu_sdk_core::ir::DType::BF16) {
            // Half precision: a few units in the last place (XLA computes f16 ops in f32 and rounds once).
            (x - y).abs() <= 1e-3 + 2e-3 * y.abs()
        } else {
            (x - y).abs() <= 1e-6 + 1e-4 * y.abs()
        };
        if !ok {
            return Err(format!("element {i}: {x} instead of {y} (CPU runtime)"));
        }
    }
    Ok(())
}

/// Which small inputs a retry makes constants (see `run_case`).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Bake {
    Nothing,
    Ints,
    AllButFirst,
    All,
}

enum Outcome {
    Match,
    NotLowered(String),
    Failed(String),
}

fn run_case(target: &CloudTpuTarget, dir: &Path, bake: Bake) -> Outcome {
    let inner = || -> Result<Outcome, String> {
        let mut g = load(&dir.join("model.onnx"), &ImportOptions::default()).map_err(|e| format!("import: {e}"))?;
        passes::optimize(&mut g).map_err(|e| format!("optimize: {e}"))?;
        let mut inputs = Vec::new();
        for i in 0.. {
            let p = dir.join(format!("input_{i}.npy"));
            if !p.exists() {
                break;
            }
            inputs.push(npy::read(&p).map_err(|e| format!("reading {}: {e}", p.display()))?);
        }
        let want = Session::new(g.clone()).and_then(|mut s| s.run(&inputs)).map_err(|e| format!("cpu runtime: {e}"))?;
        // The suite passes shape operands (axes, target shapes, pads, k, Resize scales, OneHot depth, Range bounds)
        // as graph inputs; a TPU program needs them static. Such small inputs are made constants of the case's
        // values (as they are in real models): first the integer ones, then any but the first input, then all.
        let mut inputs = inputs;
        if bake != Bake::Nothing {
            let mut keep = Vec::new();
            let ids = g.inputs.clone();
            for (k, (id, t)) in ids.into_iter().zip(inputs).enumerate() {
                let small = t.shape.iter().product::<usize>() <= 16;
                let int = matches!(t.dtype(), tpu_sdk_core::ir::DType::I64 | tpu_sdk_core::ir::DType::I32);
                let make_constant = small
                    && match bake {
                        Bake::Nothing => false,
                        Bake::Ints => int,
                        Bake::AllButFirst => int || k > 0,
                        Bake::All => true,
                    };
                if make_constant {
                    g.value_mut(id).constant = Some(t);
                    g.inputs.retain(|&i| i != id);
                } else {
                    keep.push(t);
                }
            }
            inputs = keep;
            passes::optimize(&mut g).map_err(|e| format!("optimize: {e}"))?;
        }
        let exe = match target.compile_graph(g) {
            Ok(e) => e,
            Err(e) => {
                let m = e.to_string();
                // Ops or dtypes the lowering does not cover are reported, not failures.
                return Ok(if m.to_ascii_lowercase().contains("unsupported") || m.contains("not supported") || m.contains("cannot lower") {
                    Outcome::NotLowered(m)
                } else {
                    Outcome::Failed(format!("compile: {m}"))
                });
            }
        };
        let got = exe.execute(&inputs).map_err(|e| format!("execute: {e}"))?;
        if got.len() != want.len() {
            return Err(format!("{} outputs instead of {}", got.len(), want.len()));
        }
        for (k, (a, b)) in got.iter().zip(&want).enumerate() {
            close(a, b).map_err(|e| format!("output {k}: {e}"))?;
        }
        Ok(Outcome::Match)
    };
    inner().unwrap_or_else(Outcome::Failed)
}

#[test]
fn onnx_node_suite_on_the_xla_cpu_plugin_equals_the_cpu_runtime() {
    let cases_dir = std::env::var_os("TPU_SDK_CONFORMANCE_CASES").map(PathBuf::from).unwrap_or_else(|| repo().join("conformance/cases"));
    if !cases_dir.is_dir() {
        let required = std::env::var("TPU_SDK_REQUIRE_CONFORMANCE").is_ok_and(|v| v == "1");
        assert!(!required, "TPU_SDK_REQUIRE_CONFORMANCE=1 but {} does not exist", cases_dir.display());
        eprintln!("note: {} is absent (python conformance/generate.py conformance/cases); skipping", cases_dir.display());
        return;
    }
    let Some(plugin) = common::cpu_plugin() else { return };
    let target = CloudTpuTarget::with_plugin(&plugin);
    let cpu_passes = read_list(&repo().join("conformance/expected_pass.txt"));
    let filter = std::env::var("TPU_SDK_CONFORMANCE_FILTER").unwrap_or_default();

    let (mut matched, mut not_lowered, mut failed, mut panics) = (BTreeSet::new(), Vec::new(), Vec::new(), Vec::new());
    let mut per_op: BTreeMap<String, [usize; 3]> = BTreeMap::new();
    let mut baked = 0;
    let mut all_constant = Vec::new();
    for name in cpu_passes.iter().filter(|n| n.contains(&filter)) {
        let dir = cases_dir.join(name);
        if !dir.join("model.onnx").exists() {
            continue;
        }
        let op = std::fs::read_to_string(dir.join("op.txt")).map(|s| s.trim().to_string()).unwrap_or_else(|_| name.clone());
        let op = if name.contains("_expanded") { "(expanded)".to_string() } else { op };
        let e = per_op.entry(op).or_default();
        let mut r = catch_unwind(AssertUnwindSafe(|| run_case(&target, &dir, Bake::Nothing)));
        for bake in [Bake::Ints, Bake::AllButFirst, Bake::All] {
            if !matches!(&r, Ok(Outcome::NotLowered(m)) if m.contains("run-time values") || m.contains("must be a constant")) {
                break;
            }
            r = catch_unwind(AssertUnwindSafe(|| run_case(&target, &dir, bake)));
            if matches!(r, Ok(Outcome::Match)) {
                baked += 1;
                if bake == Bake::All {
                    // Every input constant: the graph folds away, nothing of the op is lowered; say so.
                    all_constant.push(name.clone());
                }
            }
        }
        match r {
            Ok(Outcome::Match) => {
                e[0] += 1;
                matched.insert(name.clone());
            }
            Ok(Outcome::NotLowered(m)) => {
                e[1] += 1;
                not_lowered.push((name.clone(), m));
            }
            Ok(Outcome::Failed(m)) => {
                e[2] += 1;
                failed.push((name.clone(), m));
            }
            Err(_) => panics.push(name.clone()),
        }
    }
    println!("{:<40} {:>7} {:>11} {:>6}", "op", "matched", "not lowered", "failed");
    for (op, [m, n, f]) in &per_op {
        if *n + *f > 0 {
            println!("{op:<40} {m:>7} {n:>11} {f:>6}");
        }
    }
    println!(
        "cloud-tpu on the XLA CPU plugin: {} cases equal the CPU runtime ({} with their shape inputs made constants), {} not lowered, {} failed, of {} the CPU runtime passes",
        matched.len(),
        baked,
        not_lowered.len(),
        failed.len(),
        cpu_passes.len()
    );
    println!("matched only with every input constant (folded, not lowered): {all_constant:?}");
    if std::env::var_os("TPU_SDK_CONFORMANCE_VERBOSE").is_some() {
        for (n, m) in &not_lowered {
            println!("NOT LOWERED {n}: {}", m.lines().next().unwrap_or(""));
        }
    }
    for (n, m) in failed.iter().take(40) {
        println!("FAILED {n}: {}", m.lines().next().unwrap_or(""));
    }
    let list = repo().join("conformance/expected_pass_cloud_tpu.txt");
    if std::env::var("TPU_SDK_UPDATE_EXPECTED").is_ok_and(|v| v == "1") && filter.is_empty() {
        let body: String = matched.iter().map(|n| format!("{n}\n")).collect();
        std::fs::write(&list, format!("# ONNX node-suite cases the cloud-tpu target runs on the XLA CPU plugin equal to the CPU runtime\n{body}")).unwrap();
    }
    assert!(panics.is_empty(), "cases that panicked: {panics:?}");
    let regressed: Vec<String> = read_list(&list)
        .into_iter()
        .filter(|n| n.contains(&filter) && !matched.contains(n))
        .map(|n| {
            let why = failed.iter().chain(&not_lowered).find(|(f, _)| *f == n).map(|(_, m)| m.clone()).unwrap_or_else(|| "missing case".into());
            format!("{n}: {why}")
        })
        .collect();
    assert!(regressed.is_empty(), "{} regressions against expected_pass_cloud_tpu.txt:\n{}", regressed.len(), regressed.join("\n"));
}
