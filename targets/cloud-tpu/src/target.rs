//! The `cloud-tpu` target: lower to StableHLO, compile with the plugin, run on one of its devices.

use std::path::PathBuf;

use tpu_sdk_core::ir::{DType, Graph, Tensor};
use tpu_sdk_core::target::{Executable, Target};

use crate::discover::{find_plugin, FoundPlugin};
use crate::error::{Error, Result};
use crate::cache::{CacheOutcome, CompileCache};
use crate::lower::{lower_program, LowerOptions};
use crate::pjrt::{Buffer, Client, CompileOptions, Device, LoadedExecutable, Plugin};

/// The Cloud TPU target (`cloud-tpu`). Runs on libtpu on a Cloud TPU VM, and on any other PJRT plugin (for
/// example the XLA CPU plugin) elsewhere; see [`crate::discover`] for how the plugin is chosen.
#[derive(Clone, Debug, Default)]
pub struct CloudTpuTarget {
    /// An explicit plugin (`--plugin PATH`); `None` searches (see [`crate::discover::find_plugin`]).
    pub plugin: Option<PathBuf>,
    /// Lowering options (matmul/conv precision).
    pub lower: LowerOptions,
    /// Which addressable device runs the model (index into the client's addressable devices; default 0).
    pub device: usize,
    /// Folder of the on-disk compilation cache; `None` compiles every time. [`CloudTpuTarget::new`] takes it from
    /// `$TPU_SDK_COMPILE_CACHE`.
    pub cache_dir: Option<PathBuf>,
}

impl CloudTpuTarget {
    /// A target that searches for a plugin and runs on its first device, with the compilation cache in
    /// `$TPU_SDK_COMPILE_CACHE` when that is set.
    pub fn new() -> CloudTpuTarget {
        let cache_dir = std::env::var_os("TPU_SDK_COMPILE_CACHE").filter(|v| !v.is_empty()).map(PathBuf::from);
        CloudTpuTarget { cache_dir, ..CloudTpuTarget::default() }
    }

    /// A target using the plugin at `path`.
    pub fn with_plugin(path: impl Into<PathBuf>) -> CloudTpuTarget {
        CloudTpuTarget { plugin: Some(path.into()), ..CloudTpuTarget::default() }
    }

    /// The plugin this target would use, and where it was found.
    pub fn find_plugin(&self) -> Result<FoundPlugin> {
        find_plugin(self.plugin.as_deref())
    }

    /// Lowers and compiles `graph` (the typed version of [`Target::prepare`]).
    pub fn compile(&self, graph: Graph) -> Result<CloudTpuExecutable> {
        let program = lower_program(&graph, &self.lower)?;
        let found = self.find_plugin()?;
        let plugin = Plugin::load(&found.path)?;
        let client = plugin.shared_client()?;
        let devices = client.addressable_devices()?;
        let device = devices.get(self.device).cloned().ok_or_else(|| {
            Error::Invalid(format!("device {} requested but the plugin has {} addressable device(s)", self.device, devices.len()))
        })?;
        let options = CompileOptions::on_device(device.id());
        let (exe, cache) = match &self.cache_dir {
            Some(dir) => {
                let (exe, outcome) = CompileCache::new(dir).compile(&plugin, &client, &program.mlir, &options)?;
                (exe, Some(outcome))
            }
            None => (client.compile(&program.mlir, &options)?, None),
        };
        // Weights passed as arguments are uploaded once and stay on the device.
        let params = program
            .params
            .iter()
            .map(|&p| {
                let t = graph.value(p).constant.as_ref().ok_or_else(|| Error::Invalid("a parameter has no constant data".into()))?;
                client.upload(t, &device)
            })
            .collect::<Result<Vec<_>>>()?;
        let sig = |ids: &[tpu_sdk_core::ir::ValueId]| -> Vec<(String, DType, Vec<usize>)> {
            ids.iter().map(|&i| (graph.value(i).name.clone(), graph.value(i).dtype, graph.value(i).shape.clone())).collect()
        };
        Ok(CloudTpuExecutable { inputs: sig(&graph.inputs), outputs: sig(&graph.outputs), client, exe, device, params, cache })
    }
}

impl Target for CloudTpuTarget {
    fn name(&self) -> &str {
        "cloud-tpu"
    }
    fn prepare(&self, graph: Graph) -> tpu_sdk_core::Result<Box<dyn Executable>> {
        Ok(Box::new(self.compile(graph)?))
    }
}

/// A model compiled for one device of a PJRT plugin.
pub struct CloudTpuExecutable {
    inputs: Vec<(String, DType, Vec<usize>)>,
    outputs: Vec<(String, DType, Vec<usize>)>,
    client: Client,
    exe: LoadedExecutable,
    device: Device,
    params: Vec<Buffer>,
    cache: Option<CacheOutcome>,
}

impl std::fmt::Debug for CloudTpuExecutable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CloudTpuExecutable({} inputs, {} outputs on {:?})", self.inputs.len(), self.outputs.len(), self.device)
    }
}

fn describe(name: &str, dtype: DType, shape: &[usize]) -> String {
    let dims: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
    if name.is_empty() {
        format!("{dtype}[{}]", dims.join(", "))
    } else {
        format!("'{name}' {dtype}[{}]", dims.join(", "))
    }
}

impl CloudTpuExecutable {
    /// The device the model runs on.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// Whether the executable came from the compilation cache (`None`: no cache configured).
    pub fn cache_outcome(&self) -> Option<CacheOutcome> {
        self.cache
    }

    /// Number of weights held on the device as arguments of the program.
    pub fn resident_weights(&self) -> usize {
        self.params.len()
    }

    /// Runs on `inputs` (graph input order); returns the outputs in graph output order.
    pub fn execute(&self, inputs: &[Tensor]) -> Result<Vec<Tensor>> {
        if inputs.len() != self.inputs.len() {
            let names: Vec<String> = self.inputs.iter().map(|(n, d, s)| describe(n, *d, s)).collect();
            return Err(Error::InputMismatch(format!(
                "the model takes {} input(s) [{}], {} given",
                self.inputs.len(),
                names.join(", "),
                inputs.len()
            )));
        }
        for (k, (t, (name, dtype, shape))) in inputs.iter().zip(&self.inputs).enumerate() {
            if t.dtype() != *dtype || t.shape != *shape {
                return Err(Error::InputMismatch(format!(
                    "input {k}: expected {}, given {}",
                    describe(name, *dtype, shape),
                    describe("", t.dtype(), &t.shape)
                )));
            }
        }
        let bufs = inputs.iter().map(|t| self.client.upload(t, &self.device)).collect::<Result<Vec<_>>>()?;
        let refs: Vec<&Buffer> = bufs.iter().chain(&self.params).collect();
        let outs = self.exe.execute(&refs, None)?;
        if outs.len() != self.outputs.len() {
            return Err(Error::Invalid(format!("the program returned {} outputs, the model has {}", outs.len(), self.outputs.len())));
        }
        outs.iter().map(|b| b.to_tensor()).collect()
    }
}

impl Executable for CloudTpuExecutable {
    fn run(&mut self, inputs: &[Tensor]) -> tpu_sdk_core::Result<Vec<Tensor>> {
        Ok(self.execute(inputs)?)
    }
}

/// What `tpu-sdk devices --target cloud-tpu` prints: the plugin, its API version, platform and devices.
#[derive(Clone, Debug)]
pub struct PlatformInfo {
    /// The plugin file and how it was found.
    pub plugin: FoundPlugin,
    /// PJRT C API version of the plugin (major, minor).
    pub api_version: (i32, i32),
    /// PJRT C API version this crate was written against.
    pub header_version: (i32, i32),
    /// Plugin attributes (xla_version, stablehlo versions, ...).
    pub attributes: Vec<(String, crate::pjrt::NamedValue)>,
    /// Platform name ("cpu", "tpu").
    pub platform: String,
    /// Platform version (for example the libtpu build).
    pub platform_version: String,
    /// All devices.
    pub devices: Vec<crate::pjrt::DeviceInfo>,
}

/// Loads the plugin (explicit path or found) and describes its platform and devices.
pub fn devices(plugin: Option<&std::path::Path>) -> Result<PlatformInfo> {
    let found = find_plugin(plugin)?;
    let p = Plugin::load(&found.path)?;
    let client = p.shared_client()?;
    Ok(PlatformInfo {
        api_version: p.api_version(),
        header_version: crate::pjrt::HEADER_VERSION,
        attributes: p.attributes()?,
        platform: client.platform_name()?,
        platform_version: client.platform_version()?,
        devices: client.devices()?.iter().map(|d| d.info().clone()).collect(),
        plugin: found,
    })
}
