//! The rule every oracle follows: a test whose external oracle (a Python package, a plugin, a data folder) is
//! missing says so and passes, unless `TPU_SDK_REQUIRE_ORACLES=1` (set by `scripts/test.sh` and CI), which
//! makes the absence a failure.

use std::path::PathBuf;
use std::process::Command;

/// Whether `TPU_SDK_REQUIRE_ORACLES=1`.
pub fn required() -> bool {
    std::env::var("TPU_SDK_REQUIRE_ORACLES").is_ok_and(|v| v == "1")
}

/// Reports that an oracle is missing (`what`: the sentence saying which): a failure when oracles are required,
/// else a note on stderr (the caller then skips).
pub fn skip(what: &str) {
    assert!(!required(), "TPU_SDK_REQUIRE_ORACLES=1 but {what}");
    eprintln!("note: {what}; skipping (set TPU_SDK_REQUIRE_ORACLES=1 to make this a failure)");
}

/// The oracles' Python (`$TPU_SDK_PYTHON`, with numpy, onnx, onnxruntime, ai-edge-litert); `None` after
/// [`skip`] when it is not set.
pub fn python() -> Option<PathBuf> {
    match std::env::var_os("TPU_SDK_PYTHON").filter(|v| !v.is_empty()) {
        Some(p) => Some(PathBuf::from(p)),
        None => {
            skip("TPU_SDK_PYTHON is not set (scripts/test.sh sets it)");
            None
        }
    }
}

/// TensorFlow's Python (`$TPU_SDK_TF_PYTHON`, a venv with tensorflow: its converter is the peer quantizer);
/// `None` after a note when it is not set, a failure instead when `TPU_SDK_REQUIRE_TF=1`. `what` names the
/// test case skipped.
pub fn tf_python(what: &str) -> Option<PathBuf> {
    let p = std::env::var_os("TPU_SDK_TF_PYTHON").filter(|v| !v.is_empty()).map(PathBuf::from);
    if p.is_none() {
        assert!(std::env::var("TPU_SDK_REQUIRE_TF").as_deref() != Ok("1"), "TPU_SDK_REQUIRE_TF=1 but TPU_SDK_TF_PYTHON is not set");
        eprintln!("note: TPU_SDK_TF_PYTHON is not set (a Python with tensorflow); skipping {what}");
    }
    p
}

/// `$TPU_SDK_PYTHON` when set, else `python3` (for tests that find out later whether it has what they need).
pub fn python_or_default() -> PathBuf {
    std::env::var_os("TPU_SDK_PYTHON").filter(|v| !v.is_empty()).map(PathBuf::from).unwrap_or_else(|| "python3".into())
}

/// The XLA CPU PJRT plugin of the Python's `fastatomstruct-xla-cpu` package, if that package is installed
/// (no note when it is not: the caller may look elsewhere before skipping).
pub fn xla_cpu_plugin_of_python() -> Option<PathBuf> {
    let o = Command::new(python_or_default()).args(["-c", "import fastatomstruct_xla_cpu as m; print(m.library_path())"]).output().ok()?;
    let p = PathBuf::from(String::from_utf8_lossy(&o.stdout).trim());
    (o.status.success() && p.is_file()).then_some(p)
}

/// libtpu (`$TPU_SDK_LIBTPU`, e.g. `pip install libtpu`, then libtpu/libtpu.so) when set; `None` after a note otherwise (libtpu is optional even when oracles are
/// required: it is only there on machines that installed the `libtpu` package).
pub fn libtpu_path() -> Option<PathBuf> {
    let p = std::env::var_os("TPU_SDK_LIBTPU").filter(|v| !v.is_empty()).map(PathBuf::from);
    if p.is_none() {
        eprintln!("note: TPU_SDK_LIBTPU is not set; skipping");
    }
    p
}

/// Runs the repository's Python script `script` (a path from the repository root) with `py` and `args`;
/// panics with the script's stderr when it fails (for model generators such as
/// `targets/edgetpu/tests/make_unet_decoder.py`).
pub fn run_script(py: &std::path::Path, script: &str, args: &[&std::path::Path]) {
    let o = std::process::Command::new(py).arg(crate::repo().join(script)).args(args).output().unwrap_or_else(|e| panic!("cannot run {script}: {e}"));
    assert!(o.status.success(), "{script} failed: {}", String::from_utf8_lossy(&o.stderr));
}
