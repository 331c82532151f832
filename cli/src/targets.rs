//! The registry of targets compiled into this build, and the per-target settings the command line passes.

use std::path::PathBuf;

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

/// Settings that choose how a target is built (flags shared by `run`, `bench`, `compile`, `devices`).
#[derive(Clone, Debug, Default)]
pub struct TargetConfig {
    /// cloud-tpu: the PJRT plugin (`--plugin`); `None` searches.
    pub plugin: Option<PathBuf>,
    /// Which device to run on (`--device`): `usb:0`, `pci:0` for the Edge TPU, a device index for cloud-tpu.
    pub device: Option<String>,
    /// cloud-tpu: data-parallel replicas for `run`/`bench` (`--replicas`): the batch is split across them.
    pub replicas: Option<usize>,
    /// cloud-tpu: tensor-parallel annotations for `run`/`bench` (`--shard WEIGHT=AXIS`, `auto`, `parts=N`).
    pub shard: Vec<String>,
    /// The model file the graph was loaded from (edgetpu runs a compiled `.tflite`'s own program).
    pub model_file: Option<PathBuf>,
}

/// The target called `name` with default settings.
pub fn by_name(name: &str) -> Result<Box<dyn Target>> {
    by_name_with(name, &TargetConfig::default())
}

/// The target called `name`, built with `cfg`.
pub fn by_name_with(name: &str, cfg: &TargetConfig) -> Result<Box<dyn Target>> {
    match name {
        "cpu" => {
            cloud_only(cfg, "cpu")?;
            Ok(Box::new(tpu_sdk_core::runtime::CpuTarget))
        }
        #[cfg(feature = "cloud-tpu")]
        "cloud-tpu" => cloud_tpu(cfg),
        #[cfg(feature = "edgetpu")]
        "edgetpu" => edgetpu(cfg),
        other => Err(Error::Unsupported(format!(
            "unknown target '{other}' (this build has: {}; enable others with cargo features)",
            names().join(", ")
        ))),
    }
}

/// Rejects the cloud-tpu-only settings for another target.
fn cloud_only(cfg: &TargetConfig, target: &str) -> Result<()> {
    for (set, flag) in [(cfg.plugin.is_some(), "--plugin"), (cfg.replicas.is_some(), "--replicas"), (!cfg.shard.is_empty(), "--shard")] {
        if set {
            return Err(Error::Unsupported(format!("{flag} applies to --target cloud-tpu only, not to --target {target}")));
        }
    }
    Ok(())
}

/// The cloud-tpu target. The command line turns the compilation cache on by default (see
/// `tpu_sdk_cloud_tpu::cache::default_dir`; `TPU_SDK_COMPILE_CACHE=off` disables it).
#[cfg(feature = "cloud-tpu")]
fn cloud_tpu(cfg: &TargetConfig) -> Result<Box<dyn Target>> {
    let mut t = tpu_sdk_cloud_tpu::CloudTpuTarget::new();
    t.cache_dir = tpu_sdk_cloud_tpu::cache::default_dir();
    if let Some(p) = &cfg.plugin {
        t.plugin = Some(p.clone());
    }
    if let Some(d) = &cfg.device {
        t.device = d.parse().map_err(|_| Error::Unsupported(format!("--device '{d}': cloud-tpu devices are numbered 0, 1, ... (see `tpu-sdk devices`)")))?;
    }
    match cfg.replicas {
        Some(0) => return Err(Error::Unsupported("--replicas must be at least 1".into())),
        Some(n) => t.replicas = n,
        None => {}
    }
    t.shard = cfg.shard.clone();
    Ok(Box::new(t))
}

#[cfg(feature = "edgetpu")]
fn edgetpu(cfg: &TargetConfig) -> Result<Box<dyn Target>> {
    cloud_only(cfg, "edgetpu")?;
    // libedgetpu delegate options, e.g. TPU_SDK_EDGETPU_OPTIONS=Performance=High,Usb.AlwaysDfu=False.
    let options = match std::env::var("TPU_SDK_EDGETPU_OPTIONS") {
        Ok(s) => tpu_sdk_edgetpu::runtime::parse_options(&s)?,
        Err(_) => Vec::new(),
    };
    Ok(Box::new(tpu_sdk_edgetpu::EdgeTpuTarget { device: cfg.device.clone(), model_file: cfg.model_file.clone(), options }))
}
