//! The target abstraction: a backend that turns a graph into something runnable.
//!
//! Core defines the trait and implements it for the CPU ([`crate::runtime::CpuTarget`]); the Cloud TPU and
//! Edge TPU crates implement it for their hardware. Core depends on none of them; it knows their names only in
//! [`TargetOptions`], the typed compile options each target takes (see [`options`] for why they live here). The
//! command line drives every target through this trait only: `run`/`bench` call [`Target::prepare`], `compile`
//! calls [`Target::compile`], `devices` calls [`Target::devices`].

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::ir::{Graph, Tensor};
use crate::{Error, Result};

pub mod options;
pub mod resident;

pub use resident::{ResidentExecutable, ResidentLink, ResidentState, Transfers};
pub use options::{CloudTpuOptions, EdgeTpuOptions, Emit, IoDType, OptionError, Partitioner, ShardSpec, TargetOptions, Topology};

/// A compiled model that can be run repeatedly.
pub trait Executable: Send {
    /// Runs on `inputs` (graph input order) and returns outputs in graph output order.
    fn run(&mut self, inputs: &[Tensor]) -> Result<Vec<Tensor>>;

    /// [`Executable::run`] on borrowed inputs, for callers that hold tensors they cannot give away (the Python
    /// package's arrays). The default copies them; an executable that reads inputs in place (the CPU
    /// runtime) overrides it to copy nothing.
    fn run_refs(&mut self, inputs: &[&Tensor]) -> Result<Vec<Tensor>> {
        let owned: Vec<Tensor> = inputs.iter().map(|t| (*t).clone()).collect();
        self.run(&owned)
    }

    /// [`Executable::run`] on inputs given away, for callers that do not need them back: an executable that can
    /// update an input where it is (the CPU runtime's in-place key/value cache, see
    /// [`crate::runtime::Session::run_owned`]) overrides it to copy nothing.
    fn run_owned(&mut self, inputs: Vec<Tensor>) -> Result<Vec<Tensor>> {
        self.run(&inputs)
    }
}

impl Executable for Box<dyn Executable> {
    fn run(&mut self, inputs: &[Tensor]) -> Result<Vec<Tensor>> {
        (**self).run(inputs)
    }
    fn run_refs(&mut self, inputs: &[&Tensor]) -> Result<Vec<Tensor>> {
        (**self).run_refs(inputs)
    }
    fn run_owned(&mut self, inputs: Vec<Tensor>) -> Result<Vec<Tensor>> {
        (**self).run_owned(inputs)
    }
}

/// A device a target found on this machine.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DeviceInfo {
    /// The target it belongs to (`cpu`, `cloud-tpu`, `edgetpu`).
    pub target: String,
    /// How `--device` names it (`usb:0`, `pci:0`, `0`).
    pub id: String,
    /// What it is (`Coral USB Accelerator`, `TPU v5 lite`, `cpu`).
    pub kind: String,
    /// Whether it can be used now, and if not why (`ready`, `boot mode: firmware is loaded on first use`,
    /// `no permission on /dev/apex_0: add the udev rule`).
    pub state: String,
    /// Where it is (USB bus path, device node, plugin file).
    pub location: String,
    /// Further facts as name/value pairs (API version, core count, serial number...).
    pub details: Vec<(String, String)>,
}

/// Progress of a long step: called with (what, done, total).
#[derive(Clone, Default)]
pub struct Progress(pub Option<Arc<dyn Fn(&str, u64, u64) + Send + Sync>>);

impl Progress {
    /// Reports that `done` of `total` units of `what` are finished.
    pub fn report(&self, what: &str, done: u64, total: u64) {
        if let Some(f) = &self.0 {
            f(what, done, total)
        }
    }
}

impl fmt::Debug for Progress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.0.is_some() { "Progress(callback)" } else { "Progress(none)" })
    }
}

/// What `compile` is asked to do: where to write, and the options of the one target it is for. A target takes
/// its own variant of [`TargetOptions`] ([`TargetOptions::cloud_tpu`], [`TargetOptions::edge_tpu`]); the
/// command line has already rejected every flag of another target, so another variant reaching a target is a
/// caller's mistake, answered with one [`Error::Unsupported`].
#[derive(Clone, Debug, Default)]
pub struct CompileOptions {
    /// Where to write the main artifact (`-o`).
    pub output: PathBuf,
    /// The model file the graph came from, if any (for messages and reports).
    pub source: Option<PathBuf>,
    /// Progress callback for long steps (calibration, compilation).
    pub progress: Progress,
    /// The target's own options.
    pub target: TargetOptions,
}

/// What `compile` produced.
#[derive(Clone, Debug, Default)]
pub struct CompileOutput {
    /// Files written, the main artifact first.
    pub files: Vec<PathBuf>,
    /// A human-readable summary (mapping table, error metrics, cache outcome...), printed by the CLI.
    pub summary: String,
    /// The same facts as a JSON document (text), for `--json` and `--report`.
    pub report_json: Option<String>,
}

/// A backend.
pub trait Target: Send + Sync {
    /// Short name used on the command line (`cpu`, `cloud-tpu`, `edgetpu`).
    fn name(&self) -> &str;

    /// Prepares `graph` for execution on this target.
    fn prepare(&self, graph: Graph) -> Result<Box<dyn Executable>>;

    /// The devices of this target present on this machine. No device is a normal answer (an empty list);
    /// an error means the search itself failed.
    fn devices(&self) -> Result<Vec<DeviceInfo>> {
        Ok(Vec::new())
    }

    /// The `--device` values of every device this target can run a model on now (`bench --all-devices`).
    /// By default the [`Target::devices`] that have an id (`-` marks one that cannot be used).
    fn runnable_devices(&self) -> Result<Vec<String>> {
        Ok(self.devices()?.into_iter().map(|d| d.id).filter(|id| id != "-").collect())
    }

    /// Prepares `graph` with its `links` outputs kept on the target between calls (see [`ResidentExecutable`]).
    /// `None` (the default): the target keeps nothing between calls, and the caller carries such values itself
    /// (the CPU, whose memory is the host's).
    ///
    /// `batched` says, per graph input, whether its axis 0 is the batch. A target with a
    /// [`Target::batch_multiple`] of N > 1 runs N data-parallel replicas of `graph`, which is then one replica's
    /// program: the executable takes and returns N times its batch on the batched inputs and on every output
    /// (the caller builds the graph at the replica's batch: a model whose shapes were folded for one batch cannot
    /// be re-batched afterwards), and gives every replica the other inputs whole.
    fn prepare_resident(&self, graph: &Graph, links: &[ResidentLink], batched: &[bool]) -> Result<Option<Box<dyn ResidentExecutable>>> {
        let _ = (graph, links, batched);
        Ok(None)
    }

    /// Whether [`Target::prepare_resident`] can give an executable at all (so a caller need not build the graph
    /// it would take when it cannot).
    fn keeps_resident_values(&self) -> bool {
        false
    }

    /// The batch (axis 0 of the inputs) of a prepared program must be a multiple of this: a target that splits
    /// each batch across data-parallel replicas (cloud-tpu's `--replicas N`) says N. 1 by default.
    fn batch_multiple(&self) -> usize {
        1
    }

    /// For a model file this target runs as it is — a compiled program the core IR cannot hold, such as an
    /// Edge TPU `*_edgetpu.tflite` — its interface: a graph with the inputs and outputs and no nodes, which
    /// [`Target::prepare`] accepts together with the file. `None` (the default): import the file as usual.
    fn interface_of(&self, model_file: &Path) -> Result<Option<Graph>> {
        let _ = model_file;
        Ok(None)
    }

    /// Compiles `graph` into a deployable artifact at `opts.output`.
    fn compile(&self, graph: Graph, opts: &CompileOptions) -> Result<CompileOutput> {
        let _ = (graph, opts);
        Err(Error::Unsupported(format!("target '{}' has no compile step: it runs models directly (use `run`)", self.name())))
    }
}
