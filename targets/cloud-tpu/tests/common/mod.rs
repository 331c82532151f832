//! Shared helpers of the integration tests: finding the XLA CPU PJRT plugin (the real peer these tests run
//! against) and the ONNX reference implementation (the independent oracle for expected values).
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::Command;

use tpu_sdk_core::ir::Tensor;
use tpu_sdk_core::npy;

fn required() -> bool {
    std::env::var("TPU_SDK_REQUIRE_ORACLES").is_ok_and(|v| v == "1")
}

fn skip(what: &str) {
    assert!(!required(), "TPU_SDK_REQUIRE_ORACLES=1 but {what}");
    eprintln!("note: {what}; skipping (set TPU_SDK_REQUIRE_ORACLES=1 to make this a failure)");
}

/// The Python interpreter with numpy/onnx (`$TPU_SDK_PYTHON`, else `python3`).
pub fn python() -> String {
    std::env::var("TPU_SDK_PYTHON").ok().filter(|s| !s.is_empty()).unwrap_or_else(|| "python3".into())
}

/// The XLA CPU plugin: `$TPU_SDK_PJRT_CPU_PLUGIN`, else the `fastatomstruct-xla-cpu` package of `$TPU_SDK_PYTHON`,
/// else the crate's own search. `None` (with a note) when absent and not required.
pub fn cpu_plugin() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("TPU_SDK_PJRT_CPU_PLUGIN").filter(|v| !v.is_empty()) {
        return Some(PathBuf::from(p));
    }
    let out = Command::new(python())
        .args(["-c", "import fastatomstruct_xla_cpu as m; print(m.library_path())"])
        .output();
    if let Ok(o) = out {
        if o.status.success() {
            let p = PathBuf::from(String::from_utf8_lossy(&o.stdout).trim());
            if p.is_file() {
                return Some(p);
            }
        }
    }
    if let Some(p) = tpu_sdk_cloud_tpu::discover::find_cpu_plugin() {
        return Some(p);
    }
    skip("the XLA CPU PJRT plugin was not found (pip install fastatomstruct-xla-cpu, or set TPU_SDK_PJRT_CPU_PLUGIN)");
    None
}

/// One ONNX node to evaluate: a `helper.make_node(...)` expression whose inputs are named `i0, i1, ...` (an empty
/// name for an absent optional input) and outputs `o0, o1, ...`, its inputs, and how many outputs it has. With
/// `ort`, onnxruntime evaluates it instead of `onnx.reference` (for the few cases the reference gets wrong).
pub struct RefCase<'a> {
    /// The node expression.
    pub node: String,
    /// Inputs (None: absent).
    pub inputs: Vec<Option<&'a Tensor>>,
    /// Number of outputs.
    pub n_out: usize,
    /// Use onnxruntime.
    pub ort: bool,
}

/// Evaluates ONNX nodes with the ONNX reference implementation (`onnx.reference.ReferenceEvaluator`) or
/// onnxruntime, all in one Python process. Returns `None` (with a note) when Python/onnx are unavailable.
pub fn onnx_reference(cases: &[RefCase]) -> Option<Vec<Vec<Tensor>>> {
    let dir = std::env::temp_dir().join(format!(
        "tpu-sdk-oracle-{}-{}",
        std::process::id(),
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos()
    ));
    for (j, c) in cases.iter().enumerate() {
        let d = dir.join(format!("case{j}"));
        std::fs::create_dir_all(&d).unwrap();
        for (i, t) in c.inputs.iter().enumerate() {
            if let Some(t) = t {
                npy::write(&d.join(format!("in{i}.npy")), t).unwrap();
            }
        }
        std::fs::write(d.join("node.py"), &c.node).unwrap();
        std::fs::write(d.join("meta"), format!("{} {} {}", c.inputs.len(), c.n_out, c.ort as u8)).unwrap();
    }
    let script = r#"
import sys, os, numpy as np
from onnx import helper
from onnx.reference import ReferenceEvaluator
root, n = sys.argv[1], int(sys.argv[2])
for j in range(n):
    d = os.path.join(root, f"case{j}")
    n_in, n_out, ort = map(int, open(os.path.join(d, "meta")).read().split())
    feeds = {}
    for i in range(n_in):
        p = os.path.join(d, f"in{i}.npy")
        if os.path.exists(p):
            feeds[f"i{i}"] = np.load(p)
    node = eval(open(os.path.join(d, "node.py")).read())
    ins = [helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape) for k, v in feeds.items()]
    if ort:
        import onnxruntime
        t0 = helper.np_dtype_to_tensor_dtype(feeds["i0"].dtype)
        outs = [helper.make_tensor_value_info(f"o{i}", t0, None) for i in range(n_out)]
    else:
        outs = [helper.make_empty_tensor_value_info(f"o{i}") for i in range(n_out)]
    g = helper.make_graph([node], "g", ins, outs)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)])
    try:
        if ort:
            m.ir_version = 10
            sess = onnxruntime.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
            res = sess.run(None, feeds)
        else:
            res = ReferenceEvaluator(m).run(None, feeds)
    except Exception as e:
        raise RuntimeError(f"case {j}: {open(os.path.join(d, 'node.py')).read()}") from e
    for i, r in enumerate(res):
        np.save(os.path.join(d, f"out{i}.npy"), np.ascontiguousarray(r))
"#;
    let out = Command::new(python()).args(["-c", script, dir.to_str().unwrap(), &cases.len().to_string()]).output();
    let result = match out {
        Ok(o) if o.status.success() => Some(
            cases
                .iter()
                .enumerate()
                .map(|(j, c)| (0..c.n_out).map(|i| npy::read(&dir.join(format!("case{j}/out{i}.npy"))).unwrap()).collect())
                .collect(),
        ),
        Ok(o) => {
            let err = String::from_utf8_lossy(&o.stderr).to_string();
            if err.contains("No module named") {
                skip(&format!("the ONNX reference is not available ({})", err.lines().last().unwrap_or("")));
                None
            } else {
                panic!("the ONNX reference failed:\n{err}");
            }
        }
        Err(e) => {
            skip(&format!("cannot run {}: {e}", python()));
            None
        }
    };
    let _ = std::fs::remove_dir_all(&dir);
    result
}

/// Asserts `got` matches `want` elementwise within `rtol` relative (plus `atol` absolute), same shape and dtype.
pub fn assert_close(got: &Tensor, want: &Tensor, rtol: f64, atol: f64, what: &str) {
    assert_eq!(got.shape, want.shape, "{what}: shape");
    assert_eq!(got.dtype(), want.dtype(), "{what}: dtype");
    let (g, w) = (got.to_f64_vec(), want.to_f64_vec());
    let mut worst = (0.0f64, 0usize);
    for (i, (a, b)) in g.iter().zip(&w).enumerate() {
        if a.is_nan() && b.is_nan() || a == b {
            continue;
        }
        let err = (a - b).abs() / (atol + rtol * b.abs());
        if err.is_nan() || err > worst.0 {
            worst = (if err.is_nan() { f64::INFINITY } else { err }, i);
        }
    }
    assert!(worst.0 <= 1.0, "{what}: element {} is {} but expected {} (tolerance exceeded {:.2}x)", worst.1, g[worst.1], w[worst.1], worst.0);
}

/// A deterministic pseudo-random f32 tensor in [-1, 1).
pub fn rand_f32(shape: &[usize], seed: u64) -> Tensor {
    let n: usize = shape.iter().product();
    let mut s = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    let data = (0..n)
        .map(|_| {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect();
    Tensor::from_f32(shape.to_vec(), data)
}

/// libtpu from `$TPU_SDK_LIBTPU`, loaded (off a TPU VM, with the environment that keeps it local), when set.
pub fn libtpu() -> Option<tpu_sdk_cloud_tpu::pjrt::Plugin> {
    let path = std::env::var_os("TPU_SDK_LIBTPU").filter(|v| !v.is_empty())?;
    Some(tpu_sdk_cloud_tpu::pjrt::Plugin::load(path).expect("TPU_SDK_LIBTPU names a loadable libtpu"))
}
