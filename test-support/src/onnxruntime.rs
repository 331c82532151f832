//! onnxruntime and the ONNX reference implementation (`onnx.reference`) as oracles, through the Python of
//! [`crate::oracle`]: whole models with `scripts/ort_run.py`, and single nodes evaluated in one Python process.

use std::path::Path;
use std::process::Command;

use tpu_sdk_core::ir::Tensor;
use tpu_sdk_core::npy;

use crate::oracle::{python_or_default, skip};

/// Runs the ONNX model `model` on onnxruntime (CPU, one thread, graph optimisations off) with `inputs` as
/// (input name, tensor) pairs, using the Python `py` and the scratch folder `dir`; returns the outputs in
/// the model's order. Panics when onnxruntime fails.
pub fn run_model(py: &Path, model: &Path, inputs: &[(String, Tensor)], dir: &Path) -> Vec<Tensor> {
    run_model_on(py, model, inputs, dir, false)
}

/// [`run_model`] on onnx's reference evaluator (`onnx.reference.ReferenceEvaluator`) instead of onnxruntime:
/// for what onnxruntime does not implement (batch-major recurrent layers, `layout=1`).
pub fn run_model_reference(py: &Path, model: &Path, inputs: &[(String, Tensor)], dir: &Path) -> Vec<Tensor> {
    run_model_on(py, model, inputs, dir, true)
}

fn run_model_on(py: &Path, model: &Path, inputs: &[(String, Tensor)], dir: &Path, reference: bool) -> Vec<Tensor> {
    std::fs::create_dir_all(dir).unwrap();
    let mut args = Vec::new();
    for (k, (name, t)) in inputs.iter().enumerate() {
        let p = dir.join(format!("input_{k}.npy"));
        npy::write(&p, t).unwrap();
        args.push(format!("{name}={}", p.display()));
    }
    let out_dir = dir.join("ort");
    let flag: &[&str] = if reference { &["--reference"] } else { &[] };
    let st = Command::new(py).arg(crate::repo().join("scripts/ort_run.py")).args(flag).arg(model).arg(&out_dir).args(&args).status().unwrap();
    assert!(st.success(), "{} failed on {}", if reference { "onnx's reference evaluator" } else { "onnxruntime" }, model.display());
    let mut outs = Vec::new();
    for k in 0.. {
        let p = out_dir.join(format!("output_{k}.npy"));
        if !p.exists() {
            break;
        }
        outs.push(npy::read(&p).unwrap());
    }
    outs
}

/// Runs `model` on onnxruntime with `g`'s inputs named and compares `ours` (the outputs another runtime gave
/// for `inputs`) output by output with [`crate::relative_to_mean`] at tolerance `tol`; the worst relative error, or
/// a message naming the model (`stem`) and output. Scratch files go to `dir/stem`.
pub fn worst_vs_onnxruntime(
    py: &Path,
    model: &Path,
    g: &tpu_sdk_core::ir::Graph,
    inputs: Vec<Tensor>,
    ours: &[Tensor],
    dir: &Path,
    tol: f64,
) -> Result<f64, String> {
    let stem = model.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    let named: Vec<(String, Tensor)> = g.inputs.iter().zip(inputs).map(|(&i, t)| (g.value(i).name.clone(), t)).collect();
    let theirs = run_model(py, model, &named, &dir.join(&stem));
    if theirs.len() != ours.len() {
        return Err(format!("{stem}: {} outputs, onnxruntime gives {}", ours.len(), theirs.len()));
    }
    let mut worst = 0.0f64;
    for (k, (a, b)) in ours.iter().zip(&theirs).enumerate() {
        worst = worst.max(crate::relative_to_mean(&stem, k, a, b, "onnxruntime", tol)?);
    }
    Ok(worst)
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
    let out = Command::new(python_or_default()).args(["-c", script, dir.to_str().unwrap(), &cases.len().to_string()]).output();
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
            skip(&format!("cannot run {}: {e}", python_or_default().display()));
            None
        }
    };
    let _ = std::fs::remove_dir_all(&dir);
    result
}
