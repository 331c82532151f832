//! The `cloud-tpu` target: lower to StableHLO, compile with the plugin, run on one of its devices.

use std::path::PathBuf;

use tpu_sdk_core::ir::{DType, Graph, Tensor, ValueId};
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
        let b = self.build(&graph, 1)?;
        let device = b.devices.into_iter().next().ok_or_else(|| Error::Invalid("no device was chosen".into()))?;
        let params = b.params.into_iter().next().unwrap_or_default();
        Ok(CloudTpuExecutable { sig: b.sig, client: b.client, exe: b.exe, device, params, cache: b.cache })
    }

    /// Compiles `graph` once for `replicas` devices (data parallelism): the addressable devices
    /// `device, device + 1, ...` each run the whole graph on their own inputs, in one launch. Weights passed as
    /// arguments are uploaded to every device.
    pub fn compile_replicated(&self, graph: Graph, replicas: usize) -> Result<ReplicatedExecutable> {
        let b = self.build(&graph, replicas.max(1))?;
        Ok(ReplicatedExecutable { sig: b.sig, client: b.client, exe: b.exe, devices: b.devices, params: b.params, cache: b.cache })
    }

    /// Lowers, finds the plugin and `n` devices, compiles one replica per device (through the cache when one is
    /// configured) and uploads the weights to each device.
    fn build(&self, graph: &Graph, n: usize) -> Result<Built> {
        let program = lower_program(graph, &self.lower)?;
        let found = self.find_plugin()?;
        let plugin = Plugin::load(&found.path)?;
        let client = plugin.shared_client()?;
        let all = client.addressable_devices()?;
        if self.device + n > all.len() {
            return Err(Error::Invalid(format!(
                "devices {}..{} requested but the plugin has {} addressable device(s)",
                self.device,
                self.device + n,
                all.len()
            )));
        }
        let devices: Vec<Device> = all[self.device..self.device + n].to_vec();
        let options = CompileOptions {
            num_replicas: n,
            device_assignment: Some(devices.iter().map(|d| vec![d.id() as i64]).collect()),
            ..CompileOptions::default()
        };
        let (exe, cache) = match &self.cache_dir {
            Some(dir) => {
                let (exe, outcome) = CompileCache::new(dir).compile(&plugin, &client, &program.mlir, &options)?;
                (exe, Some(outcome))
            }
            None => (client.compile(&program.mlir, &options)?, None),
        };
        // Weights passed as arguments are uploaded once and stay on the devices.
        let params = devices
            .iter()
            .map(|d| {
                program
                    .params
                    .iter()
                    .map(|&p| {
                        let t = graph
                            .value(p)
                            .constant
                            .as_ref()
                            .ok_or_else(|| Error::Invalid("a parameter has no constant data".into()))?;
                        client.upload(t, d)
                    })
                    .collect::<Result<Vec<_>>>()
            })
            .collect::<Result<Vec<_>>>()?;
        let sig = |ids: &[ValueId]| -> Vec<(String, DType, Vec<usize>)> {
            ids.iter().map(|&i| (graph.value(i).name.clone(), graph.value(i).dtype, graph.value(i).shape.clone())).collect()
        };
        Ok(Built { sig: Signature { inputs: sig(&graph.inputs), outputs: sig(&graph.outputs) }, client, exe, devices, params, cache })
    }
}

/// What [`CloudTpuTarget::build`] produces.
struct Built {
    sig: Signature,
    client: Client,
    exe: LoadedExecutable,
    devices: Vec<Device>,
    params: Vec<Vec<Buffer>>,
    cache: Option<CacheOutcome>,
}

/// Names, dtypes and shapes of a compiled graph's inputs and outputs.
#[derive(Clone, Debug)]
struct Signature {
    inputs: Vec<(String, DType, Vec<usize>)>,
    outputs: Vec<(String, DType, Vec<usize>)>,
}

impl Signature {
    /// Checks `inputs` against the graph inputs (count, dtype, shape).
    fn check(&self, inputs: &[Tensor]) -> Result<()> {
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
        Ok(())
    }

    fn check_outputs(&self, n: usize) -> Result<()> {
        if n != self.outputs.len() {
            return Err(Error::Invalid(format!("the program returned {n} outputs, the model has {}", self.outputs.len())));
        }
        Ok(())
    }
}

/// A model compiled ahead of time for a TPU topology (see [`CloudTpuTarget::compile_for_topology`]).
#[derive(Clone, Debug)]
pub struct AotArtifact {
    /// Platform of the compiler ("tpu").
    pub platform: String,
    /// The topology compiled for (for example "v5e:2x2").
    pub topology: String,
    /// Number of devices in the topology.
    pub devices: usize,
    /// The serialized executable; load it on matching hardware with [`crate::pjrt::Client::load_serialized`].
    /// Every weight is embedded, so it takes exactly the graph inputs.
    pub executable: Vec<u8>,
}

impl CloudTpuTarget {
    /// Compiles `graph` ahead of time for a named topology (libtpu: `v5e:2x2`, `v6e:2x4`, `v4:2x2x1`, ...)
    /// without needing its devices: off a TPU VM the plugin (libtpu) is loaded with the environment of
    /// [`crate::discover::prepare_libtpu_env`], so nothing is sent off the machine. The program is compiled for
    /// one replica on the topology's first device.
    pub fn compile_for_topology(&self, graph: &Graph, topology: &str) -> Result<AotArtifact> {
        let opts = LowerOptions { max_inline_constant: None, ..self.lower };
        let program = lower_program(graph, &opts)?;
        let found = self.find_plugin()?;
        let plugin = Plugin::load(&found.path)?;
        let (platform, devices, executable) =
            plugin.compile_for_topology(topology, &[], &program.mlir, &CompileOptions::default())?;
        Ok(AotArtifact { platform, topology: topology.to_string(), devices, executable })
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
    sig: Signature,
    client: Client,
    exe: LoadedExecutable,
    device: Device,
    params: Vec<Buffer>,
    cache: Option<CacheOutcome>,
}

impl std::fmt::Debug for CloudTpuExecutable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CloudTpuExecutable({} inputs, {} outputs on {:?})", self.sig.inputs.len(), self.sig.outputs.len(), self.device)
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
        self.sig.check(inputs)?;
        let bufs = inputs.iter().map(|t| self.client.upload(t, &self.device)).collect::<Result<Vec<_>>>()?;
        let refs: Vec<&Buffer> = bufs.iter().chain(&self.params).collect();
        let outs = self.exe.execute(&refs, None)?;
        self.sig.check_outputs(outs.len())?;
        outs.iter().map(|b| b.to_tensor()).collect()
    }
}

/// A model compiled for several devices at once, each running it on its own inputs (data parallelism).
pub struct ReplicatedExecutable {
    sig: Signature,
    client: Client,
    exe: LoadedExecutable,
    devices: Vec<Device>,
    params: Vec<Vec<Buffer>>,
    cache: Option<CacheOutcome>,
}

impl std::fmt::Debug for ReplicatedExecutable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ReplicatedExecutable(on {:?})", self.devices)
    }
}

impl ReplicatedExecutable {
    /// The devices, replica by replica.
    pub fn devices(&self) -> &[Device] {
        &self.devices
    }

    /// Whether the executable came from the compilation cache (`None`: no cache configured).
    pub fn cache_outcome(&self) -> Option<CacheOutcome> {
        self.cache
    }

    /// Runs replica `r` on `inputs[r]` (one input list per device, all in one launch); returns each replica's
    /// outputs.
    pub fn execute(&self, inputs: &[Vec<Tensor>]) -> Result<Vec<Vec<Tensor>>> {
        if inputs.len() != self.devices.len() {
            return Err(Error::InputMismatch(format!(
                "{} input lists given for {} replicas",
                inputs.len(),
                self.devices.len()
            )));
        }
        for i in inputs {
            self.sig.check(i)?;
        }
        let bufs = inputs
            .iter()
            .zip(&self.devices)
            .map(|(list, d)| list.iter().map(|t| self.client.upload(t, d)).collect::<Result<Vec<_>>>())
            .collect::<Result<Vec<_>>>()?;
        let lists: Vec<Vec<&Buffer>> = bufs.iter().zip(&self.params).map(|(b, p)| b.iter().chain(p).collect()).collect();
        let outs = self.exe.execute_replicated(&lists)?;
        outs.iter()
            .map(|o| {
                self.sig.check_outputs(o.len())?;
                o.iter().map(|b| b.to_tensor()).collect()
            })
            .collect()
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
