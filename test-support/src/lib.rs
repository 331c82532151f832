//! What the integration tests of every tpu-sdk crate share: deterministic random tensors of every IR dtype
//! ([`random`]), tolerances and comparisons ([`compare`]), the external oracles with their
//! skip-unless-available rule ([`oracle`], [`litert`], [`onnxruntime`]), the ONNX backend node-suite case loader
//! and the one conformance runner every target uses ([`conformance`]), and the command-line tests' helpers
//! ([`cli`]), the fault-injecting PJRT plugin ([`pjrt_fault`]) and leak checks under valgrind ([`valgrind`]).
//!
//! A dev-dependency of the integration tests only (`tests/*.rs`): it depends on `tpu-sdk-core`, so the unit
//! tests inside core cannot use it.
#![warn(missing_docs)]

pub mod cli;
pub mod compare;
pub mod conformance;
pub mod litert;
pub mod onnxruntime;
pub mod oracle;
pub mod pjrt_fault;
pub mod random;
pub mod valgrind;

use std::path::PathBuf;

pub use compare::{allclose, assert_close, differing, relative_to_mean, Tolerance};
pub use random::{f32_samples, rand_f32, random_inputs, random_tensor, Rng};

/// The workspace root (where `Cargo.lock`, `conformance/`, `examples/` and `scripts/` are).
pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// An empty folder `tpu-sdk-{name}-{pid}` in the system's temporary folder (emptied if it was there).
pub fn fresh_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("tpu-sdk-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap_or_else(|e| panic!("cannot create {}: {e}", d.display()));
    d
}
