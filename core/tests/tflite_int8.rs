//! The int8 CPU runtime against LiteRT, bit for bit: every full-int8 TFLite model in `tests/data/int8`
//! (made by TensorFlow's converter, `targets/edgetpu/scripts/make_int8_fixtures.py`; the legacy uint8 models
//! `*_uint8*.tflite` by its v1 converter, `make_uint8_fixtures.py`) is imported, run on
//! random inputs by our runtime and by LiteRT (`tpu_sdk_test_support::litert`, Python from `TPU_SDK_PYTHON`), and the
//! number of differing output values must be 0 against LiteRT's builtin optimized kernels
//! (`BUILTIN_WITHOUT_DEFAULT_DELEGATES`, what users run without XNNPACK; one thread). The counts against the
//! reference kernels (`BUILTIN_REF`) are printed too, for information: LiteRT's reference kernels round the
//! GEMM output stage differently from its optimized ones (see `runtime::kernels::int8::conv`), so they may
//! differ by one step in a few values.

use std::path::{Path, PathBuf};

use tpu_sdk_core::import::tflite::{load, ImportOptions};
use tpu_sdk_core::ir::{DType, Tensor};
use tpu_sdk_core::passes;
use tpu_sdk_core::runtime::Session;
use tpu_sdk_test_support::{differing, litert, oracle, Rng};

/// Random input sets per model.
const CASES: usize = 16;

fn data_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/int8")
}

/// Random inputs: int8/uint8 over their whole range; floats spread over a few units, with exact halves of
/// small grids among them.
fn random_input(dtype: DType, shape: &[usize], rng: &mut Rng) -> Tensor {
    match dtype {
        DType::I8 | DType::U8 => rng.tensor(dtype, shape),
        _ => {
            let n: usize = shape.iter().product();
            Tensor::from_f32(shape.to_vec(), (0..n).map(|_| (rng.below(4001) as f32 - 2000.0) / 500.0).collect())
        }
    }
}

/// Runs one model through both; returns (values compared, differing vs optimized, differing vs reference,
/// `None` when the reference resolver cannot run the model).
fn compare(py: &Path, model: &Path, optimize: bool) -> (usize, usize, Option<usize>) {
    let name = model.file_stem().unwrap().to_string_lossy().to_string();
    let mut g = load(model, &ImportOptions::default()).unwrap_or_else(|e| panic!("{name}: {e}"));
    if optimize {
        passes::optimize(&mut g).unwrap_or_else(|e| panic!("{name}: {e}"));
    }
    let mut rng = Rng::new(0x5EED ^ name.len() as u64);
    let inputs: Vec<Vec<Tensor>> =
        (0..CASES).map(|_| g.inputs.iter().map(|&v| random_input(g.value(v).dtype, &g.value(v).shape, &mut rng)).collect()).collect();
    let optimized = litert::run_file(py, model, litert::OPTIMIZED, &inputs).unwrap_or_else(|e| panic!("LiteRT's optimized kernels must run {name}: {e}"));
    let reference = match litert::run_file(py, model, litert::REFERENCE, &inputs) {
        Ok(r) => Some(r),
        Err(e) => {
            println!("  {} cannot run {e}", litert::REFERENCE);
            None
        }
    };
    let mut s = Session::new(g).unwrap_or_else(|e| panic!("{name}: {e}"));
    let (mut total, mut diff) = (0, [0usize; 2]);
    for (i, case) in inputs.iter().enumerate() {
        let ours = s.run(case).unwrap_or_else(|e| panic!("{name}: {e}"));
        for (k, o) in ours.iter().enumerate() {
            total += o.to_i64_vec().len();
            for (j, r) in [Some(&optimized), reference.as_ref()].into_iter().enumerate() {
                let Some(r) = r else { continue };
                let want = &r[i][k];
                let d = differing(o, want);
                if d > 0 && j == 0 && std::env::var_os("TPU_SDK_INT8_DEBUG").is_some() {
                    eprintln!("{name} case {i} output {k}:\n ours   {:?}\n litert {:?}", o.to_i64_vec(), want.to_i64_vec());
                }
                diff[j] += d;
            }
        }
    }
    (total, diff[0], reference.is_some().then_some(diff[1]))
}

#[test]
fn int8_models_match_litert_exactly() {
    let Some(py) = oracle::python() else { return };
    let mut models: Vec<PathBuf> = std::fs::read_dir(data_dir()).unwrap().map(|e| e.unwrap().path()).filter(|p| p.extension().is_some_and(|e| e == "tflite")).collect();
    models.sort();
    // TPU_SDK_INT8_ONLY=substring restricts the run to matching fixtures (while working on a kernel)
    if let Ok(only) = std::env::var("TPU_SDK_INT8_ONLY") {
        models.retain(|m| m.file_name().is_some_and(|n| n.to_string_lossy().contains(&only)));
    }
    assert!(!models.is_empty(), "no fixtures in {}", data_dir().display());
    let mut failures = Vec::new();
    for m in &models {
        for optimize in [false, true] {
            let (n, d_opt, d_ref) = compare(&py, m, optimize);
            let name = m.file_stem().unwrap().to_string_lossy();
            let d_ref = d_ref.map(|d| d.to_string()).unwrap_or_else(|| "n/a".into());
            println!("{name:<20} optimize={optimize:<5} values {n:>6}  differing: optimized {d_opt:>5}  reference {d_ref:>5}");
            if d_opt > 0 {
                failures.push(format!("{name} (optimize={optimize}): {d_opt} of {n} values differ from LiteRT's optimized kernels"));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
