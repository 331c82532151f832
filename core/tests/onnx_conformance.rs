//! The ONNX backend node test suite, run through the importer, the optimisation passes and the CPU runtime.
//!
//! Cases are regenerated from the `onnx` Python package by `conformance/generate.py` into
//! `conformance/cases/<case>/{model.onnx,input_<i>.npy,output_<i>.npy}` (or the folder in
//! `TPU_SDK_CONFORMANCE_CASES`). Expected outputs come from onnx's own reference implementation.
//!
//! Prints passed/failed per op. Fails when a case listed in `conformance/expected_pass.txt` no longer
//! passes, or when any case panics. With `TPU_SDK_UPDATE_EXPECTED=1` it rewrites the list from this run.
//! Without the cases folder it says so and passes, unless `TPU_SDK_REQUIRE_CONFORMANCE=1` (set by CI).

use std::collections::{BTreeMap, BTreeSet};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};

use tpu_sdk_core::import::onnx::{load, ImportOptions};
use tpu_sdk_core::ir::{Tensor, TensorData};
use tpu_sdk_core::runtime::Session;
use tpu_sdk_core::{npy, passes};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The op(s) a case exercises: the node op types that generate.py wrote to `op.txt`, else the first word of
/// the case name (`test_conv_with_strides_padding` → `conv`).
fn op_of(dir: &Path, case: &str) -> String {
    if case.contains("_expanded") {
        return format!("(expanded) {}", case.trim_start_matches("test_").split('_').next().unwrap_or(case));
    }
    if let Ok(s) = std::fs::read_to_string(dir.join("op.txt")) {
        let s = s.trim();
        if !s.is_empty() {
            return s.to_string();
        }
    }
    let s = case.trim_start_matches("test_");
    s.split('_').next().unwrap_or(s).to_string()
}

/// numpy.testing.assert_allclose with onnx's backend defaults (rtol 1e-3, atol 1e-7), NaN equal to NaN.
fn compare(got: &Tensor, want: &Tensor) -> Result<(), String> {
    if got.dtype() != want.dtype() {
        return Err(format!("dtype {} instead of {}", got.dtype(), want.dtype()));
    }
    if got.shape != want.shape {
        return Err(format!("shape {:?} instead of {:?}", got.shape, want.shape));
    }
    let exact = !want.dtype().is_float();
    match (&got.data, &want.data) {
        (TensorData::Bool(a), TensorData::Bool(b)) if a != b => return Err("bool values differ".into()),
        _ => {}
    }
    let (a, b) = (got.to_f64_vec(), want.to_f64_vec());
    let (rtol, atol) = match want.dtype() {
        tpu_sdk_core::ir::DType::F16 | tpu_sdk_core::ir::DType::BF16 => (1e-2, 1e-3),
        _ => (1e-3, 1e-7),
    };
    for (i, (&x, &y)) in a.iter().zip(&b).enumerate() {
        let ok = if exact {
            x == y
        } else if y.is_nan() {
            x.is_nan()
        } else if y.is_infinite() {
            x == y
        } else {
            (x - y).abs() <= atol + rtol * y.abs()
        };
        if !ok {
            return Err(format!("element {i}: {x} instead of {y}"));
        }
    }
    Ok(())
}

fn run_case(dir: &Path) -> Result<(), String> {
    if let Ok(why) = std::fs::read_to_string(dir.join("unrepresentable.txt")) {
        return Err(format!("not run: the case's data cannot be stored as .npy ({})", why.trim()));
    }
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
    let mut s = Session::new(g).map_err(|e| format!("plan: {e}"))?;
    let outs = s.run(&inputs).map_err(|e| format!("run: {e}"))?;
    for (i, got) in outs.iter().enumerate() {
        let p = dir.join(format!("output_{i}.npy"));
        if !p.exists() {
            return Err(format!("the model produced {} outputs, the case has fewer", outs.len()));
        }
        let want = npy::read(&p).map_err(|e| format!("reading {}: {e}", p.display()))?;
        compare(got, &want).map_err(|e| format!("output {i}: {e}"))?;
    }
    Ok(())
}

#[test]
fn onnx_backend_node_suite() {
    let cases_dir = std::env::var_os("TPU_SDK_CONFORMANCE_CASES").map(PathBuf::from).unwrap_or_else(|| repo().join("conformance/cases"));
    let required = std::env::var("TPU_SDK_REQUIRE_CONFORMANCE").is_ok_and(|v| v == "1");
    let Ok(entries) = std::fs::read_dir(&cases_dir) else {
        assert!(!required, "TPU_SDK_REQUIRE_CONFORMANCE=1 but {} does not exist", cases_dir.display());
        eprintln!("note: {} is absent; run `python conformance/generate.py conformance/cases` to get the ONNX node suite", cases_dir.display());
        return;
    };
    let mut cases: Vec<PathBuf> = entries.flatten().map(|e| e.path()).filter(|p| p.join("model.onnx").exists()).collect();
    cases.sort();
    let filter = std::env::var("TPU_SDK_CONFORMANCE_FILTER").unwrap_or_default();

    let mut passed = BTreeSet::new();
    let mut per_op: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    let mut panics = Vec::new();
    let mut failures = Vec::new();
    let verbose = std::env::var("TPU_SDK_CONFORMANCE_VERBOSE").is_ok();
    for dir in &cases {
        let name = dir.file_name().unwrap().to_string_lossy().to_string();
        if !name.contains(&filter) {
            continue;
        }
        let r = catch_unwind(AssertUnwindSafe(|| run_case(dir)));
        let e = per_op.entry(op_of(dir, &name)).or_default();
        match r {
            Ok(Ok(())) => {
                e.0 += 1;
                passed.insert(name);
            }
            Ok(Err(m)) => {
                e.1 += 1;
                if verbose {
                    eprintln!("FAIL {name}: {m}");
                }
                failures.push((name, m));
            }
            Err(_) => {
                e.1 += 1;
                panics.push(name);
            }
        }
    }
    println!("{:<40} {:>6} {:>6}", "op", "passed", "failed");
    for (op, (p, f)) in &per_op {
        println!("{op:<40} {p:>6} {f:>6}");
    }
    let non_expanded = |n: &&String| !n.contains("_expanded");
    let total_ne = cases.iter().filter(|p| !p.to_string_lossy().contains("_expanded")).count();
    println!(
        "passed {} of {} cases ({} of {} non-expanded)",
        passed.len(),
        cases.len(),
        passed.iter().filter(non_expanded).count(),
        total_ne
    );
    let out_file = repo().join("conformance/last_failures.txt");
    let text: String = failures.iter().map(|(n, m)| format!("{n}: {m}\n")).collect();
    let _ = std::fs::write(&out_file, text);

    let expected_path = repo().join("conformance/expected_pass.txt");
    if std::env::var("TPU_SDK_UPDATE_EXPECTED").is_ok_and(|v| v == "1") && filter.is_empty() {
        let body: String = passed.iter().map(|n| format!("{n}\n")).collect();
        std::fs::write(&expected_path, body).expect("write expected_pass.txt");
        println!("wrote {} passes to {}", passed.len(), expected_path.display());
    }
    let expected: BTreeSet<String> = std::fs::read_to_string(&expected_path)
        .unwrap_or_default()
        .lines()
        .map(|l| l.trim().to_string())
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .filter(|l| l.contains(&filter))
        .collect();
    let regressed: Vec<&String> = expected.iter().filter(|n| !passed.contains(*n)).collect();
    let new: Vec<&String> = passed.iter().filter(|n| !expected.contains(*n)).collect();
    if !new.is_empty() {
        println!("{} cases pass that are not in expected_pass.txt; TPU_SDK_UPDATE_EXPECTED=1 records them", new.len());
    }
    assert!(panics.is_empty(), "cases that panicked (a panic is always a bug): {panics:?}");
    let reasons: Vec<String> = regressed
        .iter()
        .map(|n| format!("{n}: {}", failures.iter().find(|(f, _)| f == *n).map(|(_, m)| m.as_str()).unwrap_or("missing case")))
        .collect();
    assert!(regressed.is_empty(), "{} regressions against expected_pass.txt:\n{}", regressed.len(), reasons.join("\n"));
}
