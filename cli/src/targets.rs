//! The registry of targets compiled into this build, and the typed settings a target is built with for `run`,
//! `bench` and `devices` ([`RunSettings`]; what `compile` takes is
//! [`TargetOptions`](tpu_sdk_core::target::TargetOptions) in core).

use std::path::PathBuf;

use tpu_sdk_core::target::{ShardSpec, Target};
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

/// How a target is set up to run models: one variant per target, each holding only its own settings (the
/// command line refuses another target's flags before building one).
#[derive(Clone, Debug, Default)]
pub enum RunSettings {
    /// The CPU runtime (nothing to set).
    #[default]
    Cpu,
    /// `--target cloud-tpu`.
    CloudTpu(CloudTpuSettings),
    /// `--target edgetpu`.
    EdgeTpu(EdgeTpuSettings),
}

/// The cloud-tpu settings of `run`/`bench`.
#[derive(Clone, Debug, Default)]
pub struct CloudTpuSettings {
    /// The PJRT plugin (`--plugin`); `None` searches.
    pub plugin: Option<PathBuf>,
    /// The first device to run on (`--device N`, an index among the addressable devices); `None` is 0.
    pub device: Option<usize>,
    /// Data-parallel replicas (`--replicas`): the batch is split across them.
    pub replicas: Option<usize>,
    /// Tensor-parallel annotations (`--shard`).
    pub shard: Vec<ShardSpec>,
}

/// The edgetpu settings of `run`/`bench`.
#[derive(Clone, Debug, Default)]
pub struct EdgeTpuSettings {
    /// Which device (`--device usb:0`, `pci:0`); `None` takes the first one found.
    pub device: Option<String>,
    /// The model file the graph was loaded from (the Edge TPU runs a compiled `.tflite`'s own program).
    pub model_file: Option<PathBuf>,
}

impl RunSettings {
    /// The default settings of the target called `name`.
    pub fn default_for(name: &str) -> Result<RunSettings> {
        match name {
            "cpu" => Ok(RunSettings::Cpu),
            #[cfg(feature = "cloud-tpu")]
            "cloud-tpu" => Ok(RunSettings::CloudTpu(CloudTpuSettings::default())),
            #[cfg(feature = "edgetpu")]
            "edgetpu" => Ok(RunSettings::EdgeTpu(EdgeTpuSettings::default())),
            other => Err(not_in_build(other)),
        }
    }

    /// Picks the device (`--device`), written as the target names its devices (`tpu-sdk devices` lists them);
    /// the CPU has one and ignores it.
    pub fn set_device(&mut self, id: &str) -> Result<()> {
        match self {
            RunSettings::Cpu => {}
            RunSettings::CloudTpu(s) => {
                let n = id.parse().map_err(|_| {
                    Error::Unsupported(format!("--device '{id}': cloud-tpu devices are numbered 0, 1, ... (see `tpu-sdk devices`)"))
                })?;
                s.device = Some(n);
            }
            RunSettings::EdgeTpu(s) => s.device = Some(id.to_string()),
        }
        Ok(())
    }

    /// The target, built with these settings.
    pub fn build(&self) -> Result<Box<dyn Target>> {
        match self {
            RunSettings::Cpu => Ok(Box::new(tpu_sdk_core::runtime::CpuTarget)),
            RunSettings::CloudTpu(s) => cloud_tpu(s),
            RunSettings::EdgeTpu(s) => edgetpu(s),
        }
    }
}

/// The error for a target this build does not have.
fn not_in_build(name: &str) -> Error {
    Error::Unsupported(format!("unknown target '{name}' (this build has: {}; enable others with cargo features)", names().join(", ")))
}

/// The target called `name` with default settings.
pub fn by_name(name: &str) -> Result<Box<dyn Target>> {
    RunSettings::default_for(name)?.build()
}

/// The cloud-tpu target. The command line turns the compilation cache on by default (see
/// `tpu_sdk_cloud_tpu::cache::default_dir`; `TPU_SDK_COMPILE_CACHE=off` disables it).
#[cfg(feature = "cloud-tpu")]
fn cloud_tpu(s: &CloudTpuSettings) -> Result<Box<dyn Target>> {
    let mut t = tpu_sdk_cloud_tpu::CloudTpuTarget::new();
    t.cache_dir = tpu_sdk_cloud_tpu::cache::default_dir();
    if let Some(p) = &s.plugin {
        t.plugin = Some(p.clone());
    }
    if let Some(d) = s.device {
        t.device = d;
    }
    if let Some(n) = s.replicas {
        t.replicas = n;
    }
    t.shard = s.shard.iter().map(|s| s.to_string()).collect();
    Ok(Box::new(t))
}

#[cfg(not(feature = "cloud-tpu"))]
fn cloud_tpu(_: &CloudTpuSettings) -> Result<Box<dyn Target>> {
    Err(not_in_build("cloud-tpu"))
}

#[cfg(feature = "edgetpu")]
fn edgetpu(s: &EdgeTpuSettings) -> Result<Box<dyn Target>> {
    // libedgetpu delegate options, e.g. TPU_SDK_EDGETPU_OPTIONS=Performance=High,Usb.AlwaysDfu=False.
    let options = match std::env::var("TPU_SDK_EDGETPU_OPTIONS") {
        Ok(s) => tpu_sdk_edgetpu::runtime::parse_options(&s)?,
        Err(_) => Vec::new(),
    };
    Ok(Box::new(tpu_sdk_edgetpu::EdgeTpuTarget { device: s.device.clone(), model_file: s.model_file.clone(), options }))
}

#[cfg(not(feature = "edgetpu"))]
fn edgetpu(_: &EdgeTpuSettings) -> Result<Box<dyn Target>> {
    Err(not_in_build("edgetpu"))
}
