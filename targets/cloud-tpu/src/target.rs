//! The `cloud-tpu` target: lower to StableHLO, compile with the plugin, run on one of its devices.

use std::path::PathBuf;

use tpu_sdk_core::ir::{DType, Graph, Tensor, ValueId};
use tpu_sdk_core::target::{Executable, Target};

use crate::cache::{CacheOutcome, CacheReport, CompileCache};
use crate::discover::{find_plugin, FoundPlugin};
use crate::error::{Error, Result};
use crate::lower::{lower_program, lower_program_sharded, LowerOptions, Program};
use crate::pjrt::{Buffer, Client, CompileOptions, Device, LoadedExecutable, Plugin};
use crate::shard::ShardPlan;
use crate::tensor_split;

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
    /// Data-parallel replicas for [`Target::prepare`] and [`Target::prepare_resident`] (`--replicas`): the batch
    /// (axis 0 of the inputs) is split across this many devices and the outputs are joined; 0 and 1 mean one device.
    pub replicas: usize,
    /// Tensor-parallel annotations for [`Target::prepare`] and [`Target::prepare_resident`] (`--shard` values, see
    /// [`crate::shard`]).
    pub shard: Vec<String>,
    /// What [`Target::prepare`] and [`Target::prepare_resident`] compute in: `None` or f32, or bf16 (the graph
    /// rewritten by [`crate::bf16`]: f32 inputs and outputs cast at the interface, resident values stored in bf16).
    pub compute_dtype: Option<DType>,
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

    /// Lowers and compiles `graph` for one device (the typed version of [`Target::prepare`]).
    pub fn compile_graph(&self, graph: Graph) -> Result<CloudTpuExecutable> {
        let b = self.build(&graph, 1, None)?;
        let device = b.devices.into_iter().next().ok_or_else(|| Error::Invalid("no device was chosen".into()))?;
        let params = b.params.into_iter().next().unwrap_or_default();
        Ok(CloudTpuExecutable { sig: b.sig, client: b.client, exe: b.exe, device, params, cache: b.cache })
    }

    /// Compiles `graph` once for `replicas` devices (data parallelism): the addressable devices
    /// `device, device + 1, ...` each run the whole graph on their own inputs, in one launch. Weights passed as
    /// arguments are uploaded to every device.
    pub fn compile_replicated(&self, graph: Graph, replicas: usize) -> Result<ReplicatedExecutable> {
        self.build(&graph, replicas.max(1), None)
    }

    /// Compiles `graph` for data parallelism over `replicas` devices behind the single-batch interface: each
    /// input's axis 0 (the batch) is split evenly across the devices, one program with `num_replicas` runs on
    /// all of them, and the outputs are joined along axis 0. The batch must be a multiple of `replicas`, and the
    /// graph must re-infer at the smaller batch (it fails when a reshape has the batch baked in).
    pub fn compile_data_parallel(&self, graph: Graph, replicas: usize) -> Result<DataParallelExecutable> {
        self.data_parallel(graph, replicas, &[])
    }

    /// Data and tensor parallelism at once: the batch is split across `replicas` replicas as in
    /// [`CloudTpuTarget::compile_data_parallel`], and each replica is one SPMD program over `parts` devices with
    /// the weights split by the `--shard` values `specs` (as in [`CloudTpuTarget::compile_sharded`]): one
    /// executable with `num_replicas × num_partitions` devices, replica r on devices `r·parts .. (r+1)·parts`
    /// from [`CloudTpuTarget::device`] on. Without `parts=N`, the partitions are the available devices divided by
    /// the replicas.
    pub fn compile_data_and_tensor_parallel(&self, graph: Graph, replicas: usize, specs: &[String]) -> Result<DataParallelExecutable> {
        if specs.is_empty() {
            return Err(Error::Invalid("--shard: no annotation given".into()));
        }
        self.data_parallel(graph, replicas, specs)
    }

    fn data_parallel(&self, graph: Graph, replicas: usize, specs: &[String]) -> Result<DataParallelExecutable> {
        let n = replicas.max(1);
        let g = per_replica_graph(&graph, n)?;
        let full_sig = Signature::of(&graph);
        let plan = self.replica_plan(&g, n, specs)?;
        let exe = self.build(&g, n, plan.as_ref())?;
        Ok(DataParallelExecutable { exe, full_sig, plan })
    }

    /// The tensor-parallel plan of each of `n` replicas of `g` for the `--shard` values `specs` (`None` when there
    /// are none): without `parts=N`, the partitions are the available devices divided by the replicas.
    pub(crate) fn replica_plan(&self, g: &Graph, n: usize, specs: &[String]) -> Result<Option<ShardPlan>> {
        if specs.is_empty() {
            return Ok(None);
        }
        let found = self.find_plugin()?;
        let available = Plugin::load(&found.path)?.shared_client()?.addressable_devices()?.len().saturating_sub(self.device);
        let mut plan = crate::shard::plan(g, specs, available / n)?.ok_or_else(|| Error::Invalid("--shard: no annotation given".into()))?;
        plan.replicas = n;
        Ok(Some(plan))
    }

    /// Compiles `graph` for tensor parallelism with the `--shard` values `specs` (see [`crate::shard`]): one
    /// SPMD program over `parts` devices from [`CloudTpuTarget::device`] on, each holding its shard of the split
    /// weights; every device computes the whole (replicated) result.
    pub fn compile_sharded(&self, graph: Graph, specs: &[String]) -> Result<ShardedExecutable> {
        let plan = self.replica_plan(&graph, 1, specs)?.ok_or_else(|| Error::Invalid("--shard: no annotation given".into()))?;
        Ok(ShardedExecutable { inner: self.build(&graph, 1, Some(&plan))?, plan })
    }

    /// The `n` addressable devices from [`CloudTpuTarget::device`] on.
    fn pick_devices(&self, client: &Client, n: usize) -> Result<Vec<Device>> {
        let all = client.addressable_devices()?;
        if self.device + n > all.len() {
            return Err(Error::Invalid(format!(
                "devices {}..{} requested but the plugin has {} addressable device(s)",
                self.device,
                self.device + n,
                all.len()
            )));
        }
        Ok(all[self.device..self.device + n].to_vec())
    }

    /// Lowers, finds the plugin and devices (`replicas` of them, or one per partition of `plan`), compiles
    /// (through the cache when one is configured) and uploads the weights to each device: whole, or its shard
    /// of a split weight.
    fn build(&self, graph: &Graph, replicas: usize, plan: Option<&ShardPlan>) -> Result<ReplicatedExecutable> {
        self.build_aliased(graph, replicas, plan, &[])
    }

    /// [`CloudTpuTarget::build`] with input/output aliasing (`(output, input)` pairs; with a plan, the aliased
    /// values are replicated across its partitions).
    pub(crate) fn build_aliased(&self, graph: &Graph, replicas: usize, plan: Option<&ShardPlan>, aliases: &[(usize, usize)]) -> Result<ReplicatedExecutable> {
        let program = match plan {
            Some(p) if !aliases.is_empty() => crate::lower::lower_program_sharded_aliased(graph, &self.lower, p, aliases)?,
            Some(p) => lower_program_sharded(graph, &self.lower, p, true)?,
            None if !aliases.is_empty() => crate::lower::lower_program_aliased(graph, &self.lower, aliases)?,
            None => lower_program(graph, &self.lower)?,
        };
        let found = self.find_plugin()?;
        let plugin = Plugin::load(&found.path)?;
        let client = plugin.shared_client()?;
        let parts = plan.map_or(1, |p| p.parts);
        let devices = self.pick_devices(&client, replicas * parts)?;
        let options = CompileOptions {
            num_replicas: replicas,
            num_partitions: parts,
            use_spmd_partitioning: parts > 1,
            use_shardy_partitioner: plan.is_some_and(|p| p.partitioner == crate::shard::Partitioner::Shardy),
            device_assignment: Some(devices.chunks(parts).map(|r| r.iter().map(|d| d.id() as i64).collect()).collect()),
            ..CompileOptions::default()
        };
        let (exe, cache) = self.compile_cached(&plugin, &client, &program.mlir, &options)?;
        // Weights passed as arguments are uploaded once and stay on the devices: whole, or one shard per partition.
        let weights = program
            .params
            .iter()
            .map(|&p| {
                let t = graph.value(p).constant.as_ref().ok_or_else(|| Error::Invalid("a parameter has no constant data".into()))?;
                Ok((t, plan.and_then(|pl| pl.axis_of(p)).map(|axis| tensor_split::split(t, axis, parts))))
            })
            .collect::<Result<Vec<(&Tensor, Option<Vec<Tensor>>)>>>()?;
        let params = devices
            .iter()
            .enumerate()
            .map(|(k, d)| {
                weights
                    .iter()
                    .map(|(whole, shards)| client.upload(shards.as_ref().map_or(*whole, |s| &s[k % parts]), d))
                    .collect::<Result<Vec<_>>>()
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(ReplicatedExecutable { sig: Signature::of(graph), client, exe, devices, params, cache })
    }

    /// Compiles through the cache when [`CloudTpuTarget::cache_dir`] is set.
    fn compile_cached(
        &self,
        plugin: &Plugin,
        client: &Client,
        mlir: &str,
        options: &CompileOptions,
    ) -> Result<(LoadedExecutable, Option<CacheReport>)> {
        match &self.cache_dir {
            Some(dir) => {
                let (exe, report) = CompileCache::new(dir).compile_reported(plugin, client, mlir, options)?;
                Ok((exe, Some(report)))
            }
            None => Ok((client.compile(mlir, options)?, None)),
        }
    }
}

/// The graph one of `n` data-parallel replicas runs: every input's batch (axis 0) divided by `n`, shapes
/// re-inferred, and every output checked to carry the batch on axis 0 (so the replicas' outputs can be joined).
fn per_replica_graph(graph: &Graph, n: usize) -> Result<Graph> {
    let mut g = graph.clone();
    for &i in &graph.inputs {
        let v = graph.value(i);
        match v.shape.first() {
            Some(&b) if b % n == 0 && b > 0 => g.value_mut(i).shape[0] = b / n,
            _ => {
                return Err(Error::InputMismatch(format!(
                    "--replicas {n}: input '{}' has shape {:?}, whose batch (axis 0) cannot be split evenly across {n} devices; \
                     use a batch that is a multiple of {n} (--dim / --input-shape)",
                    v.name, v.shape
                )))
            }
        }
    }
    rebatch_reshapes(&mut g, graph, n);
    tpu_sdk_core::ir::infer::infer_graph(&mut g, &tpu_sdk_core::runtime::CpuEval)
        .map_err(|e| Error::Invalid(format!("--replicas {n}: the model cannot be run at 1/{n} of its batch: {e}")))?;
    for (&small, &full) in g.outputs.iter().zip(&graph.outputs) {
        let (s, f) = (&g.value(small).shape, &graph.value(full).shape);
        if s.is_empty() || s[0] * n != f[0] || s[1..] != f[1..] {
            return Err(Error::Invalid(format!(
                "--replicas {n}: output '{}' (shape {f:?}) does not carry the batch on axis 0 (at 1/{n} of the batch it has shape {s:?}), \
                 so the per-device outputs cannot be joined",
                graph.value(full).name
            )));
        }
    }
    Ok(g)
}

/// Importers fold `Shape → ... → Reshape` chains into constant target shapes, which bakes the batch into them
/// (`[8, 200]`). For the per-replica graph `g` (batch `B / n`), a Reshape whose data has the full batch `B` on axis
/// 0 in `full` and whose constant target shape starts with `B` gets a copy of that shape starting with `B / n`
/// (the "flatten, keep the batch" pattern). Anything else is left alone; shape inference then either agrees or
/// reports the node.
fn rebatch_reshapes(g: &mut Graph, full: &Graph, n: usize) {
    let Some(batch) = full.inputs.first().and_then(|&i| full.value(i).shape.first().copied()) else { return };
    for k in 0..g.nodes.len() {
        let node = &g.nodes[k];
        if !matches!(node.op, tpu_sdk_core::ir::Op::Reshape { .. }) {
            continue;
        }
        let (Some(data), Some(shape)) = (node.input(0), node.input(1)) else { continue };
        if full.value(data).shape.first() != Some(&batch) {
            continue;
        }
        let Some(t) = g.value(shape).constant.as_ref() else { continue };
        let mut dims = t.to_i64_vec();
        if dims.first() != Some(&(batch as i64)) {
            continue;
        }
        dims[0] = (batch / n) as i64;
        let name = format!("{}.per_replica", g.value(shape).name);
        let c = g.add_constant(name, Tensor::from_i64(vec![dims.len()], dims));
        g.nodes[k].inputs[1] = Some(c);
    }
}

/// Names, dtypes and shapes of a compiled graph's inputs and outputs.
#[derive(Clone, Debug)]
struct Signature {
    inputs: Vec<(String, DType, Vec<usize>)>,
    outputs: Vec<(String, DType, Vec<usize>)>,
}

impl Signature {
    fn of(graph: &Graph) -> Signature {
        let sig = |ids: &[ValueId]| -> Vec<(String, DType, Vec<usize>)> {
            ids.iter().map(|&i| (graph.value(i).name.clone(), graph.value(i).dtype, graph.value(i).shape.clone())).collect()
        };
        Signature { inputs: sig(&graph.inputs), outputs: sig(&graph.outputs) }
    }

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
        self.compile_program_for_topology(&program, topology, &CompileOptions::default())
    }

    /// Compiles a lowered, self-contained program ahead of time for `topology` with `options` (replicas,
    /// partitions).
    pub fn compile_program_for_topology(&self, program: &Program, topology: &str, options: &CompileOptions) -> Result<AotArtifact> {
        let found = self.find_plugin()?;
        let plugin = Plugin::load(&found.path)?;
        let (platform, devices, executable) = plugin.compile_for_topology(topology, &[], &program.mlir, options)?;
        Ok(AotArtifact { platform, topology: topology.to_string(), devices, executable })
    }
}

impl Target for CloudTpuTarget {
    fn name(&self) -> &str {
        "cloud-tpu"
    }
    fn prepare(&self, graph: Graph) -> tpu_sdk_core::Result<Box<dyn Executable>> {
        let graph = match self.compute_dtype {
            None | Some(DType::F32) => graph,
            Some(DType::BF16) => crate::bf16::to_bf16(&graph),
            Some(d) => return Err(tpu_sdk_core::Error::Unsupported(format!("cloud-tpu computes in f32 or bf16, not {d}"))),
        };
        let n = self.replicas.max(1);
        if !self.shard.is_empty() {
            if n > 1 {
                return Ok(Box::new(self.compile_data_and_tensor_parallel(graph, n, &self.shard)?));
            }
            return Ok(Box::new(self.compile_sharded(graph, &self.shard)?));
        }
        if n > 1 {
            return Ok(Box::new(self.compile_data_parallel(graph, n)?));
        }
        Ok(Box::new(self.compile_graph(graph)?))
    }

    fn keeps_resident_values(&self) -> bool {
        true
    }

    fn prepare_resident(
        &self,
        graph: &Graph,
        links: &[tpu_sdk_core::target::ResidentLink],
        batched: &[bool],
    ) -> tpu_sdk_core::Result<Option<Box<dyn tpu_sdk_core::target::ResidentExecutable>>> {
        Ok(Some(Box::new(crate::resident::CloudTpuResident::new(self, graph, links, batched)?)))
    }

    fn batch_multiple(&self) -> usize {
        self.replicas.max(1)
    }

    fn devices(&self) -> tpu_sdk_core::Result<Vec<tpu_sdk_core::target::DeviceInfo>> {
        Ok(device_list(self.plugin.as_deref())?)
    }

    fn compile(&self, graph: Graph, opts: &tpu_sdk_core::target::CompileOptions) -> tpu_sdk_core::Result<tpu_sdk_core::target::CompileOutput> {
        crate::artifact::compile(self, graph, opts)
    }
}

/// The devices of the plugin as `tpu-sdk devices` lists them: `id` is the index that `--device` takes (among
/// the addressable devices), details carry the platform, the global device id and the API version.
fn device_list(plugin: Option<&std::path::Path>) -> Result<Vec<tpu_sdk_core::target::DeviceInfo>> {
    let info = devices(plugin)?;
    let xla = info.attributes.iter().find(|(k, _)| k == "xla_version").map(|(_, v)| match v {
        crate::pjrt::NamedValue::String(s) => s.clone(),
        crate::pjrt::NamedValue::Int64(i) => i.to_string(),
        other => format!("{other:?}"),
    });
    let mut index = 0;
    Ok(info
        .devices
        .iter()
        .map(|d| {
            let id = if d.addressable {
                index += 1;
                (index - 1).to_string()
            } else {
                format!("remote:{}", d.id)
            };
            let mut details = vec![
                ("platform".to_string(), info.platform.clone()),
                ("platform_version".to_string(), info.platform_version.clone()),
                ("device_id".to_string(), d.id.to_string()),
                ("process".to_string(), d.process_index.to_string()),
                ("pjrt_api".to_string(), format!("{}.{}", info.api_version.0, info.api_version.1)),
                ("plugin_source".to_string(), format!("{:?}", info.plugin.source)),
            ];
            if let Some(x) = &xla {
                details.push(("xla_version".to_string(), x.clone()));
            }
            tpu_sdk_core::target::DeviceInfo {
                target: "cloud-tpu".into(),
                id,
                kind: d.kind.clone(),
                state: if d.addressable { "ready".into() } else { "not addressable from this process".into() },
                location: info.plugin.path.display().to_string(),
                details,
            }
        })
        .collect())
}

/// A model compiled for one device of a PJRT plugin.
pub struct CloudTpuExecutable {
    sig: Signature,
    client: Client,
    exe: LoadedExecutable,
    device: Device,
    params: Vec<Buffer>,
    cache: Option<CacheReport>,
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
        self.cache.as_ref().map(|r| r.outcome)
    }

    /// What the compilation cache did, with timings (`None`: no cache configured).
    pub fn cache_report(&self) -> Option<&CacheReport> {
        self.cache.as_ref()
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
    pub(crate) client: Client,
    pub(crate) exe: LoadedExecutable,
    pub(crate) devices: Vec<Device>,
    pub(crate) params: Vec<Vec<Buffer>>,
    cache: Option<CacheReport>,
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
        self.cache.as_ref().map(|r| r.outcome)
    }

    /// What the compilation cache did, with timings (`None`: no cache configured).
    pub fn cache_report(&self) -> Option<&CacheReport> {
        self.cache.as_ref()
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

/// Data parallelism behind the one-batch interface (see [`CloudTpuTarget::compile_data_parallel`]).
pub struct DataParallelExecutable {
    exe: ReplicatedExecutable,
    full_sig: Signature,
    /// With tensor parallelism inside each replica: the partition plan.
    plan: Option<ShardPlan>,
}

impl std::fmt::Debug for DataParallelExecutable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "DataParallelExecutable(on {:?})", self.exe.devices)
    }
}

impl DataParallelExecutable {
    /// The replicated program underneath.
    pub fn replicated(&self) -> &ReplicatedExecutable {
        &self.exe
    }

    /// The partition plan inside each replica, when combined with tensor parallelism.
    pub fn plan(&self) -> Option<&ShardPlan> {
        self.plan.as_ref()
    }

    /// The number of replicas the batch is split across.
    pub fn replicas(&self) -> usize {
        self.exe.devices.len() / self.parts()
    }

    fn parts(&self) -> usize {
        self.plan.as_ref().map_or(1, |p| p.parts.max(1))
    }

    /// Splits the batch across the replicas (every partition of a replica gets its replica's piece), runs all
    /// devices in one launch and joins the replicas' outputs (each replica's first partition holds its whole
    /// result).
    pub fn execute(&self, inputs: &[Tensor]) -> Result<Vec<Tensor>> {
        self.full_sig.check(inputs)?;
        let (n, parts) = (self.replicas(), self.parts());
        let pieces: Vec<Vec<Tensor>> = inputs.iter().map(|t| tensor_split::split(t, 0, n)).collect();
        let per_device: Vec<Vec<Tensor>> =
            (0..n * parts).map(|d| pieces.iter().map(|p| p[d / parts].clone()).collect()).collect();
        let outs = self.exe.execute(&per_device)?;
        (0..self.full_sig.outputs.len())
            .map(|k| {
                let parts: Vec<Tensor> = outs.iter().step_by(parts).map(|o| o[k].clone()).collect();
                tensor_split::concat0(&parts).ok_or_else(|| Error::Invalid(format!("the replicas' output {k} cannot be joined")))
            })
            .collect()
    }
}

/// Tensor parallelism (see [`CloudTpuTarget::compile_sharded`]).
pub struct ShardedExecutable {
    inner: ReplicatedExecutable,
    plan: ShardPlan,
}

impl std::fmt::Debug for ShardedExecutable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ShardedExecutable({} partitions on {:?})", self.plan.parts, self.inner.devices)
    }
}

impl ShardedExecutable {
    /// The plan: partitions and split weights.
    pub fn plan(&self) -> &ShardPlan {
        &self.plan
    }

    /// The devices, partition by partition.
    pub fn devices(&self) -> &[Device] {
        &self.inner.devices
    }

    /// Whether the executable came from the compilation cache (`None`: no cache configured).
    pub fn cache_outcome(&self) -> Option<CacheOutcome> {
        self.inner.cache_outcome()
    }

    /// Runs on every partition (each gets all inputs, replicated) and returns the first partition's outputs,
    /// which are the whole results.
    pub fn execute(&self, inputs: &[Tensor]) -> Result<Vec<Tensor>> {
        let lists = vec![inputs.to_vec(); self.inner.devices.len()];
        let mut outs = self.inner.execute(&lists)?;
        Ok(outs.swap_remove(0))
    }
}

/// [`Executable`] for executables whose typed `execute(&self, &[Tensor])` does the work.
macro_rules! executable_by_execute {
    ($($t:ty),*) => {$(
        impl Executable for $t {
            fn run(&mut self, inputs: &[Tensor]) -> tpu_sdk_core::Result<Vec<Tensor>> {
                Ok(self.execute(inputs)?)
            }
        }
    )*};
}

executable_by_execute!(CloudTpuExecutable, DataParallelExecutable, ShardedExecutable);

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
