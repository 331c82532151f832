//! The registry of targets compiled into this build.

use tpu_sdk_core::target::Target;
use tpu_sdk_core::{Error, Result};

/// Names of the targets in this build, the default first.
pub fn names() -> Vec<&'static str> {
    #[allow(unused_mut)]
    let mut v = vec!["cpu"];
    #[cfg(feature = "cloud-tpu")]
    v.push("cloud-tpu");
    #[cfg(feature = "edgetpu")]
    v.push("edgetpu");
    v
}

/// The target called `name`.
pub fn by_name(name: &str) -> Result<Box<dyn Target>> {
    match name {
        "cpu" => Ok(Box::new(tpu_sdk_core::runtime::CpuTarget)),
        #[cfg(feature = "cloud-tpu")]
        "cloud-tpu" => Ok(Box::new(tpu_sdk_cloud_tpu::CloudTpuTarget::new())),
        other if names().contains(&other) => Err(Error::Unsupported(format!(
            "target '{other}' is built in but cannot run models yet (see the README's status section)"
        ))),
        other => Err(Error::Unsupported(format!(
            "unknown target '{other}' (this build has: {}; enable others with cargo features)",
            names().join(", ")
        ))),
    }
}
