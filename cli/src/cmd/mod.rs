//! The subcommands, one file each, and what they share: model loading options and input files; [`main`] is the
//! whole command line (the `tpu-sdk` binary and `python -m tpu_sdk` both call it).
//!
//! Exit codes: 0 success; 1 a failure while running (I/O, a kernel error); 2 bad usage or inputs that do not
//! match the model (count, shape, dtype); 3 the model cannot be loaded (malformed, or uses something
//! unsupported, or would need more memory than the budget: `--max-memory`); 4 a device or accelerator runtime is missing or failed.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use tpu_sdk::core::target::ShardSpec;
use tpu_sdk::targets::ConfiguredTarget;
use tpu_sdk::{LoadOptions, Model, Tensor};

pub mod bench;
pub mod cache;
pub mod compile;
pub mod deploy;
pub mod devices;
pub mod generate;
pub mod image_input;
pub mod inspect;
pub mod run;
pub mod samples;

/// Run neural networks on TPUs and on the CPU.
#[derive(Parser)]
#[command(name = "tpu-sdk", version, about)]
struct Cli {
    /// Worker threads for the CPU runtime (default: all cores).
    #[arg(long, global = true)]
    threads: Option<usize>,
    /// Most memory a model may make tpu-sdk allocate (2G, 512M, bytes); a model that needs more is refused with
    /// what it would allocate (default: 75% of physical memory, or TPU_SDK_MAX_MEMORY).
    #[arg(long, global = true, value_name = "SIZE", value_parser = tpu_sdk::core::limits::parse_size)]
    max_memory: Option<u64>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Print a model's graph: ops, shapes, dtypes, parameter count, MACs.
    Inspect(inspect::Args),
    /// Run a model on inputs (.npy files or an image) and write its outputs as .npy files.
    Run(run::Args),
    /// Measure a model's latency and throughput.
    Bench(bench::Args),
    /// Compile a model for a target: an int8 TFLite model for the Edge TPU, StableHLO or a TPU executable.
    Compile(compile::Args),
    /// List the devices of every target in this build (Coral USB/PCIe Edge TPUs, PJRT devices, the CPU).
    Devices(devices::Args),
    /// Compile, upload a model to a device over SSH and optionally run it there.
    Deploy(deploy::Args),
    /// Inspect or clear the cloud-tpu compilation cache.
    Cache(cache::Args),
    /// Generate text with a decoder language model (prefill, then token by token with a key/value cache).
    Generate(generate::Args),
}

/// The exit code for an error (see the module's documentation).
pub fn exit_code(e: &anyhow::Error) -> u8 {
    for cause in e.chain() {
        if let Some(core) = cause.downcast_ref::<tpu_sdk::Error>() {
            return match core {
                tpu_sdk::Error::InputMismatch(_) => 2,
                tpu_sdk::Error::InvalidModel(_) | tpu_sdk::Error::Unsupported(_) | tpu_sdk::Error::ResourceLimit(_) => 3,
                tpu_sdk::Error::Device(_) => 4,
                _ => 1,
            };
        }
        if cause.downcast_ref::<UsageError>().is_some() {
            return 2;
        }
    }
    1
}

/// Runs the command line `args` (the program's name first) and returns its exit code; errors are printed to
/// stderr as `error: ...`, clap's usage errors and `--help` as clap prints them.
pub fn main<I, T>(args: I) -> u8
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let cli = match Cli::try_parse_from(args) {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            return u8::try_from(e.exit_code()).unwrap_or(2);
        }
    };
    if cli.max_memory.is_some() {
        tpu_sdk::core::limits::set_memory_budget(cli.max_memory);
    }
    let threads = cli.threads.unwrap_or_else(|| std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1));
    // The CPU runtime's GEMM driver spreads every GEMM over the rayon pool itself; with matrixmultiply
    // single-threaded it also need not cut its calls small to keep matrixmultiply from threading them
    // (small calls re-pack the operands: that made 2 threads slower than 1 on conv-heavy models).
    if std::env::var_os("MATMUL_NUM_THREADS").is_none() {
        std::env::set_var("MATMUL_NUM_THREADS", "1");
    }
    // The command runs inside a pool of `threads` workers, so a model's serial parts run on one of them: run from
    // outside the pool, the calling thread plus `threads` workers spinning between parallel regions would share
    // `threads` cores (on 2 cores that made 2 threads slower than 1).
    let command = cli.command;
    let dispatch = move || match command {
        Command::Inspect(a) => inspect::main(a),
        Command::Run(a) => run::main(a),
        Command::Bench(a) => bench::main(a, threads),
        Command::Compile(a) => compile::main(a),
        Command::Devices(a) => devices::main(a),
        Command::Deploy(a) => deploy::main(a),
        Command::Cache(a) => cache::main(a),
        Command::Generate(a) => generate::main(a),
    };
    // its workers compute with subnormals flushed to zero, as CPU sessions do (tpu_sdk::core::runtime::fp_env)
    let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).start_handler(|_| tpu_sdk::core::runtime::fp_env::flush_denormals());
    let r = match pool.build() {
        Ok(pool) => pool.install(dispatch),
        Err(e) => {
            if cli.threads.is_some() {
                eprintln!("warning: could not make a pool of {threads} threads: {e}");
            }
            dispatch()
        }
    };
    match r {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("error: {e:#}");
            exit_code(&e)
        }
    }
}

/// A mistake in the command line that clap cannot see (exit code 2).
#[derive(Debug)]
pub struct UsageError(pub String);

impl std::fmt::Display for UsageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}
impl std::error::Error for UsageError {}

/// Options for loading a model, shared by the subcommands.
#[derive(clap::Args, Debug, Clone)]
pub struct ModelArgs {
    /// The model file (.onnx).
    pub model: PathBuf,
    /// Size of a named symbolic dimension, e.g. `--dim batch=8` (repeatable).
    #[arg(long = "dim", value_name = "NAME=SIZE")]
    pub dims: Vec<String>,
    /// Full shape of an input, e.g. `--input-shape x=1,3,224,224` (repeatable).
    #[arg(long = "input-shape", value_name = "NAME=D0,D1,...")]
    pub input_shapes: Vec<String>,
    /// Keep the graph exactly as imported (no optimisation passes).
    #[arg(long)]
    pub no_optimize: bool,
    /// Bind an input to a fixed value, e.g. `--bind sr=16000` (repeatable; ONNX): it becomes a constant and is
    /// no longer an input, so an If it decides folds to the branch it takes (needed by cloud-tpu when the other
    /// branch does not fit the shapes). `run` binds a one-value input that decides an If by itself.
    #[arg(long = "bind", value_name = "NAME=VALUE")]
    pub bind: Vec<String>,
    /// Inputs `run` bound to the values it was given (see [`bind_condition_inputs`]).
    #[arg(skip)]
    pub bound: Vec<(String, Tensor)>,
}

impl ModelArgs {
    /// The load options these flags describe.
    pub fn options(&self) -> Result<LoadOptions> {
        let mut o = LoadOptions { no_optimize: self.no_optimize, ..Default::default() };
        for d in &self.dims {
            let (k, v) = d.split_once('=').ok_or_else(|| UsageError(format!("--dim '{d}': expected NAME=SIZE")))?;
            let v: usize = v.parse().map_err(|_| UsageError(format!("--dim '{d}': '{v}' is not a size")))?;
            o.dims.insert(k.to_string(), v);
        }
        for b in &self.bind {
            let (k, v) = b.split_once('=').ok_or_else(|| UsageError(format!("--bind '{b}': expected NAME=VALUE")))?;
            o.input_values.insert(k.to_string(), parse_value(v).ok_or_else(|| UsageError(format!("--bind '{b}': '{v}' is not a number or true/false")))?);
        }
        for (k, t) in &self.bound {
            o.input_values.insert(k.clone(), t.clone());
        }
        for s in &self.input_shapes {
            let (k, v) = s.split_once('=').ok_or_else(|| UsageError(format!("--input-shape '{s}': expected NAME=D0,D1,...")))?;
            let dims = parse_list::<usize>(v).map_err(|e| UsageError(format!("--input-shape '{s}': {e}")))?;
            o.input_shapes.insert(k.to_string(), dims);
        }
        Ok(o)
    }

    /// Loads the model with these options.
    pub fn load(&self) -> Result<Model> {
        self.load_with(self.options()?)
    }

    /// Loads the model to be compiled with the samples at `samples` (calibration data): input dimensions that
    /// the file leaves free and no flag sets are taken from the first sample (see
    /// [`samples::free_input_shapes`]), so a model with a free batch or image size needs no `--input-shape`.
    pub fn load_for_samples(&self, samples: Option<&Path>) -> Result<Model> {
        let mut o = self.options()?;
        if let Some(p) = samples {
            let declared = Model::declared_inputs(&self.model).with_context(|| format!("cannot load {}", self.model.display()))?;
            let shapes = samples::free_input_shapes(p, &declared, &o).with_context(|| format!("cannot read samples {}", p.display()))?;
            for (name, shape) in shapes {
                eprintln!("note: input '{name}' has free dimensions; using {shape:?} from the samples in {}", p.display());
                o.input_shapes.insert(name, shape);
            }
        }
        self.load_with(o)
    }

    /// Loads the model with explicit options.
    pub fn load_with(&self, o: LoadOptions) -> Result<Model> {
        Model::load_with(&self.model, &o).with_context(|| format!("cannot load {}", self.model.display()))
    }
}

/// Which target to use and how to set it up (shared by `run`, `bench`).
#[derive(clap::Args, Debug, Clone)]
pub struct TargetArgs {
    /// Target to run on.
    #[arg(long, default_value = "cpu", value_parser = clap::builder::PossibleValuesParser::new(tpu_sdk::targets::names()))]
    pub target: String,
    /// cloud-tpu: the PJRT plugin library to load (default: search; see `tpu-sdk devices --target cloud-tpu`).
    #[arg(long, value_name = "PATH")]
    pub plugin: Option<PathBuf>,
    /// The device to run on: `usb:0`, `pci:0` (edgetpu), a device index (cloud-tpu); see `tpu-sdk devices`.
    #[arg(long)]
    pub device: Option<String>,
    /// cloud-tpu: split the batch across N devices (data parallelism).
    #[arg(long, value_name = "N", value_parser = parse_replicas)]
    pub replicas: Option<usize>,
    /// cloud-tpu: tensor parallelism: split a weight across devices, `WEIGHT=AXIS` (repeatable), `auto` (every
    /// MatMul/Gemm weight on its output axis) and optionally `parts=N` (default: all devices).
    #[arg(long, value_name = "SPEC")]
    pub shard: Vec<ShardSpec>,
}

impl TargetArgs {
    /// The target these flags describe, for a model loaded from `model_file` (if any); a flag of another target
    /// than `--target` is refused.
    #[cfg_attr(not(feature = "edgetpu"), allow(unused_variables))]
    pub fn configure(&self, model_file: Option<&Path>) -> Result<ConfiguredTarget> {
        reject_other_targets_flags(
            &self.target,
            &[
                ("--plugin", CLOUD_TPU, self.plugin.is_some()),
                ("--replicas", CLOUD_TPU, self.replicas.is_some()),
                ("--shard", CLOUD_TPU, !self.shard.is_empty()),
            ],
        )?;
        let mut t = ConfiguredTarget::default_for(&self.target)?;
        match &mut t {
            ConfiguredTarget::Cpu(_) => {}
            #[cfg(feature = "cloud-tpu")]
            ConfiguredTarget::CloudTpu(c) => {
                if let Some(p) = &self.plugin {
                    c.plugin = Some(p.clone());
                }
                if let Some(n) = self.replicas {
                    c.replicas = n;
                }
                c.shard = self.shard.iter().map(|s| s.to_string()).collect();
            }
            #[cfg(feature = "edgetpu")]
            ConfiguredTarget::EdgeTpu(e) => e.model_file = model_file.map(Path::to_path_buf),
            #[cfg(feature = "edgetpu")]
            ConfiguredTarget::Tflite(_) => {}
        }
        if let Some(d) = &self.device {
            t.set_device(d)?;
        }
        Ok(t)
    }
}

/// A model and the target to run it on (what `run` and `bench` start from).
#[derive(clap::Args, Debug, Clone)]
pub struct ModelOnTarget {
    #[command(flatten)]
    pub model: ModelArgs,
    #[command(flatten)]
    pub target: TargetArgs,
}

/// What [`ModelOnTarget::open`] gives: the configured target, the target built from it and the model loaded
/// for it.
pub struct Opened {
    pub configured: ConfiguredTarget,
    pub target: Box<dyn tpu_sdk::Target>,
    pub model: Model,
}

impl ModelOnTarget {
    /// Builds the target and loads the model for it with the shapes of the `given` inputs.
    pub fn open(&self, given: &[(Option<String>, Tensor)]) -> Result<Opened> {
        let configured = self.target.configure(Some(&self.model.model))?;
        let target = configured.build();
        let model = load_for_target(&self.model, given, target.as_ref())?;
        Ok(Opened { configured, target, model })
    }
}

/// The target that owns the cloud-tpu flags.
pub const CLOUD_TPU: &str = "cloud-tpu";
/// The target that owns the edgetpu flags.
pub const EDGETPU: &str = "edgetpu";

/// Refuses a flag that belongs to another target than `target` — the one place that says whose flag is whose
/// (`compile` and `run`/`bench` list their flags here as (flag, the target it belongs to, whether it was
/// given)). The error names the flag and its target (exit code 3, as for anything a target cannot do).
pub fn reject_other_targets_flags(target: &str, flags: &[(&str, &str, bool)]) -> tpu_sdk::Result<()> {
    match flags.iter().find(|(_, owner, given)| *given && *owner != target) {
        Some((flag, owner, _)) => Err(tpu_sdk::Error::Unsupported(format!("{flag} applies to --target {owner} only, not to --target {target}"))),
        None => Ok(()),
    }
}

/// A clap parser of one of `names` into `T`: `--help` lists the names and another value is clap's usage error,
/// as with a plain list of strings, but the flag holds the typed value.
pub fn one_of<T>(names: &'static [&'static str]) -> impl clap::builder::TypedValueParser<Value = T>
where
    T: std::str::FromStr + Clone + Send + Sync + 'static,
    T::Err: Into<Box<dyn std::error::Error + Send + Sync + 'static>>,
{
    use clap::builder::TypedValueParser;
    clap::builder::PossibleValuesParser::new(names.iter().copied()).try_map(|s| s.parse::<T>())
}

/// `--replicas N`: a count of at least 1.
pub fn parse_replicas(s: &str) -> Result<usize, String> {
    match s.trim().parse::<usize>() {
        Ok(0) => Err("--replicas must be at least 1".into()),
        Ok(n) => Ok(n),
        Err(_) => Err(format!("'{s}' is not a count")),
    }
}

/// Parses `a,b,c`.
pub fn parse_list<T: std::str::FromStr>(s: &str) -> Result<Vec<T>, String> {
    s.split(',')
        .filter(|p| !p.trim().is_empty())
        .map(|p| p.trim().parse::<T>().map_err(|_| format!("'{p}' is not a valid number")))
        .collect()
}

/// `--input A.npy` or `--input NAME=A.npy`.
#[derive(Debug, Clone)]
pub struct InputSpec {
    /// Input name, when given.
    pub name: Option<String>,
    /// The .npy file.
    pub path: PathBuf,
}

impl std::str::FromStr for InputSpec {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.split_once('=') {
            Some((n, p)) if !n.is_empty() && !Path::new(s).exists() => Ok(InputSpec { name: Some(n.into()), path: p.into() }),
            _ => Ok(InputSpec { name: None, path: s.into() }),
        }
    }
}

/// Reads the input files: `.npy` arrays, or `.wav` audio as f32 `[channels, frames]` in [-1, 1].
pub fn read_inputs(specs: &[InputSpec]) -> Result<Vec<(Option<String>, Tensor)>> {
    specs
        .iter()
        .map(|s| {
            let t = if s.path.extension().is_some_and(|e| e.eq_ignore_ascii_case("wav")) {
                tpu_sdk::core::wav::read(&s.path)?.samples
            } else {
                tpu_sdk::core::npy::read(&s.path).with_context(|| format!("cannot read input {}", s.path.display()))?
            };
            Ok((s.name.clone(), t))
        })
        .collect()
}

/// Puts named and positional inputs into the model's input order; errors are input mismatches (exit 2).
pub fn order_inputs(model: &Model, given: Vec<(Option<String>, Tensor)>) -> Result<Vec<Tensor>> {
    if given.iter().all(|(n, _)| n.is_none()) {
        return Ok(given.into_iter().map(|(_, t)| t).collect());
    }
    let g = model.graph();
    place_inputs(model, given)?
        .0
        .into_iter()
        .enumerate()
        .map(|(k, t)| t.ok_or_else(|| tpu_sdk::Error::InputMismatch(format!("input '{}' is missing", g.value(g.inputs[k]).name)).into()))
        .collect()
}

/// Puts named and positional inputs into the slots of the model's inputs (positional ones fill the free slots in
/// order); slots nobody gave stay `None`. Also returns the slot each given input went to.
pub fn place_inputs(model: &Model, given: Vec<(Option<String>, Tensor)>) -> Result<(Vec<Option<Tensor>>, Vec<usize>)> {
    let g = model.graph();
    let names: Vec<&str> = g.inputs.iter().map(|&i| g.value(i).name.as_str()).collect();
    let mut slots: Vec<Option<Tensor>> = vec![None; names.len()];
    let mut next = 0;
    let mut placed = Vec::with_capacity(given.len());
    for (n, t) in given {
        let k = match n {
            Some(n) => names.iter().position(|x| *x == n).ok_or_else(|| {
                tpu_sdk::Error::InputMismatch(format!("the model has no input '{n}' (inputs: {})", names.join(", ")))
            })?,
            None => {
                while next < slots.len() && slots[next].is_some() {
                    next += 1;
                }
                next
            }
        };
        if k >= slots.len() {
            return Err(tpu_sdk::Error::InputMismatch(format!("too many inputs: the model takes {}", names.len())).into());
        }
        if slots[k].is_some() {
            return Err(tpu_sdk::Error::InputMismatch(format!("input '{}' given twice", names[k])).into());
        }
        slots[k] = Some(t);
        placed.push(k);
    }
    Ok((slots, placed))
}

/// The names of an ONNX model's graph inputs (initializers excluded), read from the file without importing it;
/// `None` when the file is not an ONNX model that can be read (the import then reports why).
fn onnx_input_names(path: &Path) -> Option<Vec<String>> {
    use tpu_sdk::core::import::onnx::proto::ModelProto;
    if path.extension().and_then(|e| e.to_str()).is_some_and(|e| !e.eq_ignore_ascii_case("onnx")) {
        return None;
    }
    let bytes = std::fs::read(path).ok()?;
    let m = <ModelProto as prost::Message>::decode(bytes.as_slice()).ok()?;
    let g = m.graph?;
    let inits: std::collections::HashSet<&str> = g.initializer.iter().filter_map(|t| t.name.as_deref()).collect();
    Some(g.input.iter().filter_map(|v| v.name.clone()).filter(|n| !inits.contains(n.as_str())).collect())
}

/// The one-value tensor `--bind NAME=VALUE` writes: an integer (i64), a float (f64) or a bool.
fn parse_value(v: &str) -> Option<Tensor> {
    let v = v.trim();
    if let Ok(i) = v.parse::<i64>() {
        return Some(Tensor::scalar(i));
    }
    if let Ok(b) = v.parse::<bool>() {
        return Some(Tensor::scalar(b));
    }
    v.parse::<f64>().ok().filter(|x| x.is_finite()).map(Tensor::scalar)
}

/// Binds the given inputs of `run` that decide an `If` (an ONNX model's `If` condition depends on them, see
/// `if_condition_inputs`) and hold one value, except `keep` (state inputs): the model is loaded specialised to
/// those values, so the `If` folds to the branch they take — the other branch may not fit the shapes given
/// (silero-vad's 8 kHz branch with a 16 kHz chunk), and cloud-tpu needs both branches of an `If` it lowers.
/// Inputs also bound with `--bind` are dropped when they agree with it. Returns the inputs still to feed,
/// named when any was taken out (so that positional ones keep their slots).
pub fn bind_condition_inputs(args: &mut ModelArgs, given: Vec<(Option<String>, Tensor)>, keep: &[String]) -> Result<Vec<(Option<String>, Tensor)>> {
    let explicit = args.options()?.input_values;
    // (reading the file is only worth it when there is something to bind)
    if explicit.is_empty() && given.iter().all(|(_, t)| t.len() != 1) {
        return Ok(given);
    }
    let Some(names) = onnx_input_names(&args.model) else { return Ok(given) };
    let conds = tpu_sdk::core::import::onnx::if_condition_inputs(&args.model).unwrap_or_default();
    if conds.is_empty() && explicit.is_empty() {
        return Ok(given);
    }
    // the name each given input fills: named ones their own, positional ones the free slots in order
    let mut taken: Vec<bool> = names.iter().map(|n| given.iter().any(|(g, _)| g.as_deref() == Some(n.as_str()))).collect();
    let mut next = 0;
    let resolved: Vec<Option<String>> = given
        .iter()
        .map(|(n, _)| match n {
            Some(n) => Some(n.clone()),
            None => {
                while next < taken.len() && taken[next] {
                    next += 1;
                }
                let r = names.get(next).cloned();
                if next < taken.len() {
                    taken[next] = true;
                }
                r
            }
        })
        .collect();
    let mut rest = Vec::with_capacity(given.len());
    let mut dropped = false;
    for ((orig, t), name) in given.into_iter().zip(resolved) {
        if let Some(name) = &name {
            if let Some(b) = explicit.get(name) {
                if b.to_f64_vec() != t.to_f64_vec() {
                    return Err(UsageError(format!("input '{name}' is given as {:?} but bound with --bind to {:?}", t.to_f64_vec(), b.to_f64_vec())).into());
                }
                dropped = true;
                continue;
            }
            if t.len() == 1 && conds.contains(name) && !keep.contains(name) {
                eprintln!("note: input '{name}' decides an If: the model is loaded with it bound to the value given, {}", t.to_f64_vec()[0]);
                args.bound.push((name.clone(), t));
                dropped = true;
                continue;
            }
        }
        rest.push((orig, name, t));
    }
    // when some were taken out, the rest go by name (positional ones would shift); else they stay as given
    Ok(rest.into_iter().map(|(orig, name, t)| (if dropped { name.or(orig) } else { orig }, t)).collect())
}

/// Loads the model for `target`: a file the target runs as it is (a compiled Edge TPU model) by its interface,
/// anything else through the importers as [`load_for_inputs`] does.
pub fn load_for_target(args: &ModelArgs, given: &[(Option<String>, Tensor)], target: &dyn tpu_sdk::Target) -> Result<Model> {
    match target.interface_of(&args.model)? {
        Some(interface) => Ok(Model::from_interface(interface, &args.model)),
        None => load_for_inputs(args, given),
    }
}

/// Loads the model with the shapes of the given input tensors, so that symbolic dims take the given sizes
/// (a shape from `--input-shape` wins over a file's shape).
pub fn load_for_inputs(args: &ModelArgs, given: &[(Option<String>, Tensor)]) -> Result<Model> {
    let mut opts = args.options()?;
    if !given.is_empty() {
        if let Some(names) = onnx_input_names(&args.model) {
            let mut next = 0;
            for (n, t) in given {
                let name = match n {
                    Some(n) => Some(n.clone()),
                    None => {
                        next += 1;
                        names.get(next - 1).cloned()
                    }
                };
                if let Some(n) = n.as_ref().filter(|n| !names.contains(n)) {
                    let e = format!("the model has no input '{n}' (inputs: {})", names.join(", "));
                    return Err(tpu_sdk::Error::InputMismatch(e).into());
                }
                if let Some(name) = name {
                    opts.input_shapes.entry(name).or_insert_with(|| t.shape.clone());
                }
            }
        }
    }
    args.load_with(opts)
}

/// A deterministic pseudo-random tensor for inputs the user did not give (benchmarks).
pub fn random_tensor(dtype: tpu_sdk::DType, shape: &[usize], seed: u64) -> Tensor {
    use tpu_sdk::DType::*;
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut next = move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        (s >> 11) as f64 / (1u64 << 53) as f64
    };
    let mut t = Tensor::zeros(dtype, shape.to_vec());
    match dtype {
        F32 => t.view_mut::<f32>().unwrap().iter_mut().for_each(|x| *x = next() as f32 * 2.0 - 1.0),
        F64 => t.view_mut::<f64>().unwrap().iter_mut().for_each(|x| *x = next() * 2.0 - 1.0),
        I64 => t.view_mut::<i64>().unwrap().iter_mut().for_each(|x| *x = (next() * 4.0) as i64),
        I32 => t.view_mut::<i32>().unwrap().iter_mut().for_each(|x| *x = (next() * 4.0) as i32),
        U8 => t.view_mut::<u8>().unwrap().iter_mut().for_each(|x| *x = (next() * 255.0) as u8),
        I8 => t.view_mut::<i8>().unwrap().iter_mut().for_each(|x| *x = (next() * 255.0 - 128.0) as i8),
        _ => {}
    }
    t
}

/// A [`Progress`](tpu_sdk::core::target::Progress) that drives an indicatif bar drawn with `template` (one bar,
/// re-labelled for each stage it is told about; nothing when `hidden`, e.g. with `--json`).
pub fn progress_bar(hidden: bool, template: &str) -> tpu_sdk::core::target::Progress {
    use tpu_sdk::core::target::Progress;
    if hidden {
        return Progress::default();
    }
    let bar = indicatif::ProgressBar::new(0);
    bar.set_style(indicatif::ProgressStyle::with_template(template).expect("valid template").progress_chars("=> "));
    let bar = std::sync::Arc::new(bar);
    Progress(Some(std::sync::Arc::new(move |what: &str, done: u64, total: u64| {
        bar.set_prefix(what.to_string());
        bar.set_length(total);
        bar.set_position(done);
        if done >= total {
            bar.finish_and_clear();
        }
    })))
}
