//! Shared helpers of the integration tests: finding the XLA CPU PJRT plugin (the real peer these tests run
//! against) and libtpu; the oracles, tolerances and random tensors come from `tpu_sdk_test_support`.
#![allow(dead_code, unused_imports)]

use std::path::PathBuf;

pub use tpu_sdk_test_support::onnxruntime::{onnx_reference, RefCase};
pub use tpu_sdk_test_support::{assert_close, rand_f32};

/// The XLA CPU plugin: `$TPU_SDK_PJRT_CPU_PLUGIN`, else the `fastatomstruct-xla-cpu` package of `$TPU_SDK_PYTHON`,
/// else the crate's own search. `None` (with a note) when absent and not required.
pub fn cpu_plugin() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("TPU_SDK_PJRT_CPU_PLUGIN").filter(|v| !v.is_empty()) {
        return Some(PathBuf::from(p));
    }
    if let Some(p) = tpu_sdk_test_support::oracle::xla_cpu_plugin_of_python().or_else(tpu_sdk_cloud_tpu::discover::find_cpu_plugin) {
        return Some(p);
    }
    tpu_sdk_test_support::oracle::skip("the XLA CPU PJRT plugin was not found (pip install fastatomstruct-xla-cpu, or set TPU_SDK_PJRT_CPU_PLUGIN)");
    None
}

/// libtpu from `$TPU_SDK_LIBTPU`, loaded (off a TPU VM, with the environment that keeps it local), when set.
pub fn libtpu() -> Option<tpu_sdk_cloud_tpu::pjrt::Plugin> {
    let path = std::env::var_os("TPU_SDK_LIBTPU").filter(|v| !v.is_empty())?;
    Some(tpu_sdk_cloud_tpu::pjrt::Plugin::load(path).expect("TPU_SDK_LIBTPU names a loadable libtpu"))
}
