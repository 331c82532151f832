//! The int8 CPU runtime against LiteRT, bit for bit: every full-int8 TFLite model in `tests/data/int8`
//! (made by TensorFlow's converter, `targets/edgetpu/scripts/make_int8_fixtures.py`; the legacy uint8 models
//! `*_uint8*.tflite` by its v1 converter, `make_uint8_fixtures.py`) is imported, run on
//! random inputs by our runtime and by LiteRT (`litert_oracle.py`, Python from `TPU_SDK_PYTHON`), and the
//! number of differing output values must be 0 against LiteRT's builtin optimized kernels
//! (`BUILTIN_WITHOUT_DEFAULT_DELEGATES`, what users run without XNNPACK; one thread). The counts against the
//! reference kernels (`BUILTIN_REF`) are printed too, for information: LiteRT's reference kernels round the
//! GEMM output stage differently from its optimized ones (see `runtime::kernels::int8::conv`), so they may
//! differ by one step in a few values.

use std::path::{Path, PathBuf};
use std::process::Command;

use tpu_sdk_core::import::tflite::{load, ImportOptions};
use tpu_sdk_core::ir::{DType, Tensor};
use tpu_sdk_core::runtime::Session;
use tpu_sdk_core::{npy, passes};

/// Random input sets per model.
const CASES: usize = 16;

fn data_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/int8")
}

fn python() -> Option<String> {
    match std::env::var("TPU_SDK_PYTHON") {
        Ok(p) => Some(p),
        Err(_) => {
            assert!(std::env::var("TPU_SDK_REQUIRE_ORACLES").as_deref() != Ok("1"), "TPU_SDK_REQUIRE_ORACLES=1 but TPU_SDK_PYTHON is not set");
            eprintln!("note: TPU_SDK_PYTHON is not set; skipping the LiteRT int8 comparison");
            None
        }
    }
}

/// A small deterministic generator (splitmix64).
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

fn random_input(dtype: DType, shape: &[usize], rng: &mut Rng) -> Tensor {
    let n: usize = shape.iter().product();
    match dtype {
        DType::I8 => Tensor::from_vec(shape.to_vec(), (0..n).map(|_| rng.next() as u8 as i8).collect::<Vec<i8>>()).unwrap(),
        DType::U8 => Tensor::from_vec(shape.to_vec(), (0..n).map(|_| rng.next() as u8).collect::<Vec<u8>>()).unwrap(),
        // floats spread over a few units, with exact halves of small grids among them
        _ => Tensor::from_f32(shape.to_vec(), (0..n).map(|_| ((rng.next() % 4001) as f32 - 2000.0) / 500.0).collect()),
    }
}

/// Number of output values that differ (bitwise for floats).
fn differing(a: &Tensor, b: &Tensor) -> usize {
    assert_eq!(a.shape, b.shape, "shapes differ");
    assert_eq!(a.dtype(), b.dtype(), "dtypes differ");
    if let (Some(x), Some(y)) = (a.as_f32(), b.as_f32()) {
        return x.iter().zip(y).filter(|(p, q)| p.to_bits() != q.to_bits()).count();
    }
    a.to_i64_vec().iter().zip(b.to_i64_vec()).filter(|(p, q)| **p != *q).count()
}

/// Runs LiteRT with `resolver`; `Err` says why that resolver could not run the model (exit status 3: it
/// lacks an op version; or LiteRT crashed, as the reference kernels abort on some models).
fn oracle(py: &str, model: &Path, resolver: &str, dir: &Path) -> Result<(), String> {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/litert_oracle.py");
    let out = Command::new(py).arg(&script).arg(model).arg(resolver).arg(dir).arg(CASES.to_string()).output().expect("runs the oracle");
    if out.status.success() {
        return Ok(());
    }
    Err(format!("{} ({}): {}{}", model.display(), out.status, String::from_utf8_lossy(&out.stdout).trim(), String::from_utf8_lossy(&out.stderr).trim()))
}

/// Runs one model through both; returns (values compared, differing vs optimized, differing vs reference,
/// `None` when the reference resolver cannot run the model).
fn compare(py: &str, model: &Path, optimize: bool) -> (usize, usize, Option<usize>) {
    let name = model.file_stem().unwrap().to_string_lossy().to_string();
    let mut g = load(model, &ImportOptions::default()).unwrap_or_else(|e| panic!("{name}: {e}"));
    if optimize {
        passes::optimize(&mut g).unwrap_or_else(|e| panic!("{name}: {e}"));
    }
    let dir = std::env::temp_dir().join(format!("tpu_sdk_int8_{}_{name}_{optimize}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut rng = Rng(0x5EED ^ name.len() as u64);
    let mut inputs = Vec::new();
    for i in 0..CASES {
        let case: Vec<Tensor> = g.inputs.iter().map(|&v| random_input(g.value(v).dtype, &g.value(v).shape, &mut rng)).collect();
        for (k, t) in case.iter().enumerate() {
            npy::write(&dir.join(format!("case{i}.input_{k}.npy")), t).unwrap();
        }
        inputs.push(case);
    }
    let resolvers = ["BUILTIN_WITHOUT_DEFAULT_DELEGATES", "BUILTIN_REF"];
    if let Err(e) = oracle(py, model, resolvers[0], &dir) {
        panic!("LiteRT's optimized kernels must run {name}: {e}");
    }
    let have_ref = match oracle(py, model, resolvers[1], &dir) {
        Ok(()) => true,
        Err(e) => {
            println!("  {} cannot run {e}", resolvers[1]);
            false
        }
    };
    let mut s = Session::new(g).unwrap_or_else(|e| panic!("{name}: {e}"));
    let (mut total, mut diff) = (0, [0usize; 2]);
    for (i, case) in inputs.iter().enumerate() {
        let ours = s.run(case).unwrap_or_else(|e| panic!("{name}: {e}"));
        for (k, o) in ours.iter().enumerate() {
            total += o.to_i64_vec().len();
            for (j, r) in resolvers.iter().enumerate().take(if have_ref { 2 } else { 1 }) {
                let want = npy::read(&dir.join(format!("case{i}.{r}.output_{k}.npy"))).unwrap();
                let d = differing(o, &want);
                if d > 0 && j == 0 && std::env::var_os("TPU_SDK_INT8_DEBUG").is_some() {
                    eprintln!("{name} case {i} output {k}:\n ours   {:?}\n litert {:?}", o.to_i64_vec(), want.to_i64_vec());
                }
                diff[j] += d;
            }
        }
    }
    std::fs::remove_dir_all(&dir).ok();
    (total, diff[0], have_ref.then_some(diff[1]))
}

#[test]
fn int8_models_match_litert_exactly() {
    let Some(py) = python() else { return };
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
