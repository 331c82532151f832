//! The registry of targets compiled into this build, each set up with its own typed settings for `run`, `bench`
//! and `devices` ([`ConfiguredTarget`]; what `compile` takes is
//! [`TargetOptions`](tpu_sdk_core::target::TargetOptions) in core).

use tpu_sdk_core::target::Target;
use tpu_sdk_core::{Error, Result};

/// The float TFLite target's name (`compile --target tflite`; built with the edgetpu feature, whose exporter it
/// uses).
pub const TFLITE: &str = "tflite";

/// Names of the targets in this build, the default first.
pub fn names() -> Vec<&'static str> {
    #[allow(unused_mut)]
    let mut v = vec!["cpu"];
    #[cfg(feature = "cloud-tpu")]
    v.push("cloud-tpu");
    #[cfg(feature = "edgetpu")]
    v.extend(["edgetpu", TFLITE]);
    v
}

/// A target of this build with its settings: one variant per target, holding the target's own struct, whose
/// fields are its settings (the command line refuses another target's flags before setting any).
#[derive(Clone, Debug)]
pub enum ConfiguredTarget {
    /// The CPU runtime (nothing to set).
    Cpu(tpu_sdk_core::runtime::CpuTarget),
    /// `--target cloud-tpu` (plugin, device, replicas, shards).
    #[cfg(feature = "cloud-tpu")]
    CloudTpu(tpu_sdk_cloud_tpu::CloudTpuTarget),
    /// `--target edgetpu` (device, the model file).
    #[cfg(feature = "edgetpu")]
    EdgeTpu(tpu_sdk_edgetpu::EdgeTpuTarget),
    /// `--target tflite` (a float TFLite file; nothing to set).
    #[cfg(feature = "edgetpu")]
    Tflite(tpu_sdk_edgetpu::TfliteTarget),
}

impl ConfiguredTarget {
    /// The target called `name` with default settings. The command line turns the cloud-tpu compilation cache
    /// on by default (see `tpu_sdk_cloud_tpu::cache::default_dir`; `TPU_SDK_COMPILE_CACHE=off` disables it);
    /// the Edge TPU takes libedgetpu delegate options from `TPU_SDK_EDGETPU_OPTIONS`, e.g.
    /// `Performance=High,Usb.AlwaysDfu=False`.
    pub fn default_for(name: &str) -> Result<ConfiguredTarget> {
        match name {
            "cpu" => Ok(ConfiguredTarget::Cpu(tpu_sdk_core::runtime::CpuTarget)),
            #[cfg(feature = "cloud-tpu")]
            "cloud-tpu" => {
                let mut t = tpu_sdk_cloud_tpu::CloudTpuTarget::new();
                t.cache_dir = tpu_sdk_cloud_tpu::cache::default_dir();
                Ok(ConfiguredTarget::CloudTpu(t))
            }
            #[cfg(feature = "edgetpu")]
            "edgetpu" => {
                let options = match std::env::var("TPU_SDK_EDGETPU_OPTIONS") {
                    Ok(s) => tpu_sdk_edgetpu::runtime::parse_options(&s)?,
                    Err(_) => Vec::new(),
                };
                Ok(ConfiguredTarget::EdgeTpu(tpu_sdk_edgetpu::EdgeTpuTarget { options, ..Default::default() }))
            }
            #[cfg(feature = "edgetpu")]
            TFLITE => Ok(ConfiguredTarget::Tflite(tpu_sdk_edgetpu::TfliteTarget)),
            other => Err(Error::Unsupported(format!(
                "unknown target '{other}' (this build has: {}; enable others with cargo features)",
                names().join(", ")
            ))),
        }
    }

    /// Picks the device (`--device`), written as the target names its devices (`tpu-sdk devices` lists them);
    /// the CPU has one and ignores it; the tflite target has none.
    #[cfg_attr(not(any(feature = "cloud-tpu", feature = "edgetpu")), allow(unused_variables))]
    pub fn set_device(&mut self, id: &str) -> Result<()> {
        match self {
            ConfiguredTarget::Cpu(_) => {}
            #[cfg(feature = "cloud-tpu")]
            ConfiguredTarget::CloudTpu(t) => {
                t.device = id.parse().map_err(|_| {
                    Error::Unsupported(format!("--device '{id}': cloud-tpu devices are numbered 0, 1, ... (see `tpu-sdk devices`)"))
                })?;
            }
            #[cfg(feature = "edgetpu")]
            ConfiguredTarget::EdgeTpu(t) => t.device = Some(id.to_string()),
            #[cfg(feature = "edgetpu")]
            ConfiguredTarget::Tflite(_) => {
                return Err(Error::Unsupported(format!("--device '{id}': the tflite target has no devices (it only writes a .tflite file)")))
            }
        }
        Ok(())
    }

    /// The target, ready to use.
    pub fn build(&self) -> Box<dyn Target> {
        match self {
            ConfiguredTarget::Cpu(t) => Box::new(*t),
            #[cfg(feature = "cloud-tpu")]
            ConfiguredTarget::CloudTpu(t) => Box::new(t.clone()),
            #[cfg(feature = "edgetpu")]
            ConfiguredTarget::EdgeTpu(t) => Box::new(t.clone()),
            #[cfg(feature = "edgetpu")]
            ConfiguredTarget::Tflite(t) => Box::new(*t),
        }
    }
}

/// The target called `name` with default settings.
pub fn by_name(name: &str) -> Result<Box<dyn Target>> {
    Ok(ConfiguredTarget::default_for(name)?.build())
}
