//! LiteRT (`ai-edge-litert`, the reference TFLite runtime) as an oracle: runs a `.tflite` on input sets with a
//! chosen op resolver, through `test-support/litert_oracle.py` and the Python of [`crate::oracle::python`].

use std::path::{Path, PathBuf};
use std::process::Command;

use tpu_sdk_core::ir::Tensor;
use tpu_sdk_core::npy;

/// LiteRT's builtin optimized kernels without XNNPACK: what the int8 CPU runtime matches bit for bit.
pub const OPTIMIZED: &str = "BUILTIN_WITHOUT_DEFAULT_DELEGATES";
/// LiteRT's reference kernels.
pub const REFERENCE: &str = "BUILTIN_REF";

fn script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("litert_oracle.py")
}

/// Runs the model file `model` with `resolver` (an `OpResolverType` name, one thread) on each input set
/// (graph input order) with the Python `py`; returns the outputs of each set. `Err` says why LiteRT could
/// not: the resolver lacks an op version (exit status 3), or LiteRT failed or crashed.
pub fn run_file(py: &Path, model: &Path, resolver: &str, inputs: &[Vec<Tensor>]) -> Result<Vec<Vec<Tensor>>, String> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    for (i, set) in inputs.iter().enumerate() {
        for (k, t) in set.iter().enumerate() {
            npy::write(&dir.path().join(format!("case{i}.input_{k}.npy")), t).map_err(|e| e.to_string())?;
        }
    }
    let out = Command::new(py)
        .arg(script())
        .arg(model)
        .arg(resolver)
        .arg(dir.path())
        .arg(inputs.len().to_string())
        .output()
        .map_err(|e| format!("cannot run {}: {e}", py.display()))?;
    if !out.status.success() {
        let (o, e) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        return Err(format!("{} ({}): {}{}", model.display(), out.status, o.trim(), e.trim()));
    }
    let read_set = |i: usize| -> Result<Vec<Tensor>, String> {
        let mut outs = Vec::new();
        for k in 0.. {
            let p = dir.path().join(format!("case{i}.{resolver}.output_{k}.npy"));
            if !p.exists() {
                break;
            }
            outs.push(npy::read(&p).map_err(|e| format!("reading {}: {e}", p.display()))?);
        }
        Ok(outs)
    };
    (0..inputs.len()).map(read_set).collect()
}

/// [`run_file`] on a model held in memory.
pub fn run_bytes(py: &Path, model: &[u8], resolver: &str, inputs: &[Vec<Tensor>]) -> Result<Vec<Vec<Tensor>>, String> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let path = dir.path().join("model.tflite");
    std::fs::write(&path, model).map_err(|e| e.to_string())?;
    run_file(py, &path, resolver, inputs)
}

/// LiteRT with `resolver` on the model `model` for each input set; `None` (after a note) without the oracle's
/// Python. Panics when LiteRT fails: the model is ours and LiteRT must run it.
pub fn run(model: &[u8], resolver: &str, inputs: &[Vec<Tensor>]) -> Option<Vec<Vec<Tensor>>> {
    let py = crate::oracle::python()?;
    Some(run_bytes(&py, model, resolver, inputs).unwrap_or_else(|e| panic!("LiteRT failed: {e}")))
}
