//! `tpu-sdk compile MODEL --target T -o OUT`: turn a model into a deployable artifact for a target.
//!
//! The command only gathers options and data (calibration samples); what compiling means is the target's
//! business ([`tpu_sdk::Target::compile`]): StableHLO / a TPU executable for `cloud-tpu`, an int8 TFLite model
//! (and an Edge TPU model when `edgetpu_compiler` is present) for `edgetpu`, a float TFLite model (which LiteRT
//! runs on any CPU) for `tflite`.

use std::path::PathBuf;

use anyhow::{Context, Result};
use tpu_sdk::core::quant::RangeMethod;
use tpu_sdk::core::target::{CloudTpuOptions, CompileOptions, EdgeTpuOptions, Emit, IoDType, ShardSpec, TargetOptions, Topology};
use tpu_sdk::DType;

use super::image_input::ImageArgs;
use super::{one_of, parse_replicas, reject_other_targets_flags, ModelArgs, CLOUD_TPU, EDGETPU};

/// Arguments of `compile`.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    model: ModelArgs,
    /// Target to compile for: `cloud-tpu` (StableHLO / a TPU executable), `edgetpu` (an int8 TFLite model, and
    /// the Edge TPU model when edgetpu_compiler is installed), `tflite` (a float TFLite model LiteRT runs on a
    /// CPU: for machines without an Edge TPU and models whose ops have no int8 form).
    #[arg(long, value_parser = clap::builder::PossibleValuesParser::new(tpu_sdk::targets::names()))]
    target: String,
    /// Output file (`.tflite` for edgetpu and tflite; `.mlir` or an executable file for cloud-tpu).
    #[arg(short, long, value_name = "FILE")]
    output: PathBuf,
    /// cloud-tpu: compile ahead of time for a TPU topology, e.g. `v5e:2x2`, `v6e:1x1` (needs libtpu).
    #[arg(long)]
    topology: Option<Topology>,
    /// cloud-tpu: compute dtype: `f32` (default) or `bf16`.
    #[arg(long, value_parser = compute_dtype())]
    dtype: Option<DType>,
    /// cloud-tpu: what to write: `mlir` (StableHLO text) or `executable` (default: from the output's extension).
    #[arg(long, value_parser = one_of::<Emit>(Emit::NAMES))]
    emit: Option<Emit>,
    /// cloud-tpu: data-parallel replicas compiled into the program.
    #[arg(long, value_name = "N", value_parser = parse_replicas)]
    replicas: Option<usize>,
    /// cloud-tpu: tensor-parallel sharding annotation (repeatable).
    #[arg(long, value_name = "SPEC")]
    shard: Vec<ShardSpec>,
    /// cloud-tpu: the PJRT plugin library (default: search).
    #[arg(long, value_name = "PATH")]
    plugin: Option<PathBuf>,
    /// edgetpu: calibration samples: a .npy with N samples on its first axis, a folder of .npy files, or a
    /// folder of images (preprocessed with --mean/--std/--layout as in `run --image`).
    #[arg(long, value_name = "PATH")]
    calibration: Option<PathBuf>,
    /// edgetpu: how activation ranges come from calibration: `minmax`, `percentile:P` (e.g. 99.99) or `mse`.
    #[arg(long, value_name = "METHOD")]
    calibration_method: Option<RangeMethod>,
    /// edgetpu: samples to measure the quantized model's error on (default: the calibration samples).
    #[arg(long, value_name = "PATH")]
    eval: Option<PathBuf>,
    /// edgetpu: dtype of the model's inputs and outputs: `int8` (default; what the Edge TPU needs) or `float`
    /// (QUANTIZE/DEQUANTIZE at the edges).
    #[arg(long, value_parser = one_of::<IoDType>(IoDType::NAMES), default_value = "int8")]
    io_dtype: IoDType,
    /// edgetpu: the `edgetpu_compiler` to run (default: search PATH).
    #[arg(long, value_name = "PATH")]
    edgetpu_compiler: Option<PathBuf>,
    #[command(flatten)]
    image_args: ImageArgs,
    /// Also write the compile report (JSON) to this file.
    #[arg(long, value_name = "FILE")]
    report: Option<PathBuf>,
    /// Print the report as JSON instead of text.
    #[arg(long)]
    json: bool,
}

/// Runs `compile`.
pub fn main(a: Args) -> Result<()> {
    let out = compile(&a, super::progress_bar(a.json, "{prefix} [{bar:30}] {pos}/{len} {elapsed}"))?;
    if let Some(path) = &a.report {
        let text = out.report_json.clone().unwrap_or_else(|| "{}".into());
        write_atomically(path, text.as_bytes()).with_context(|| format!("cannot write report {}", path.display()))?;
    }
    if a.json {
        println!("{}", out.report_json.as_deref().unwrap_or("{}"));
    } else {
        if !out.summary.is_empty() {
            println!("{}", out.summary.trim_end());
        }
        for f in &out.files {
            println!("wrote {}", f.display());
        }
    }
    Ok(())
}

/// Compiles as `a` says, telling `progress` how far it got; writes the output files, not the report.
pub fn compile(a: &Args, progress: tpu_sdk::core::target::Progress) -> Result<tpu_sdk::core::target::CompileOutput> {
    let mut target_options = a.target_options()?;
    let model = a.model.load_for_samples(a.calibration.as_deref())?;
    let target = tpu_sdk::targets::by_name(&a.target)?;
    let g = model.graph();
    if let TargetOptions::EdgeTpu(o) = &mut target_options {
        let samples = |p: &Option<PathBuf>, what: &str| match p {
            Some(p) => super::samples::load(p, g, &a.image_args).with_context(|| format!("cannot read {what} samples {}", p.display())),
            None => Ok(Vec::new()),
        };
        o.calibration = samples(&a.calibration, "calibration")?;
        o.eval = samples(&a.eval, "evaluation")?;
    }
    let opts = CompileOptions { output: a.output.clone(), source: Some(a.model.model.clone()), progress, target: target_options };
    Ok(target.compile(g.clone(), &opts)?)
}

/// `compile`'s arguments from its command line without the command's name (`MODEL --target T -o OUT ...`), as
/// the Python package builds it from its keyword arguments; clap's error when they are not valid.
pub fn parse_args<I, T>(args: I) -> std::result::Result<Args, clap::Error>
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    #[derive(clap::Parser)]
    #[command(name = "compile")]
    struct Compile {
        #[command(flatten)]
        args: Args,
    }
    let argv = std::iter::once(std::ffi::OsString::from("compile")).chain(args.into_iter().map(Into::into));
    <Compile as clap::Parser>::try_parse_from(argv).map(|c| c.args)
}

impl Args {
    /// The options of `--target` from the flags (the samples are read later, once the model is loaded); a flag
    /// of another target is refused.
    fn target_options(&self) -> Result<TargetOptions> {
        reject_other_targets_flags(
            &self.target,
            &[
                ("--topology", CLOUD_TPU, self.topology.is_some()),
                ("--dtype", CLOUD_TPU, self.dtype.is_some()),
                ("--emit", CLOUD_TPU, self.emit.is_some()),
                ("--replicas", CLOUD_TPU, self.replicas.is_some()),
                ("--shard", CLOUD_TPU, !self.shard.is_empty()),
                ("--plugin", CLOUD_TPU, self.plugin.is_some()),
                ("--calibration", EDGETPU, self.calibration.is_some()),
                ("--calibration-method", EDGETPU, self.calibration_method.is_some()),
                ("--eval", EDGETPU, self.eval.is_some()),
                ("--io-dtype float", EDGETPU, self.io_dtype == IoDType::Float),
                ("--edgetpu-compiler", EDGETPU, self.edgetpu_compiler.is_some()),
            ],
        )?;
        Ok(match self.target.as_str() {
            CLOUD_TPU => CloudTpuOptions {
                topology: self.topology.clone(),
                dtype: self.dtype,
                emit: self.emit,
                replicas: self.replicas,
                shard: self.shard.clone(),
                plugin: self.plugin.clone(),
            }
            .into(),
            EDGETPU => {
                let defaults = EdgeTpuOptions::default();
                EdgeTpuOptions {
                    method: self.calibration_method.unwrap_or(defaults.method),
                    io_dtype: self.io_dtype,
                    edgetpu_compiler: self.edgetpu_compiler.clone(),
                    ..defaults
                }
                .into()
            }
            tpu_sdk::targets::TFLITE => TargetOptions::Tflite,
            _ => TargetOptions::Cpu,
        })
    }
}

/// `--dtype`: `f32` or `bf16`.
fn compute_dtype() -> impl clap::builder::TypedValueParser<Value = DType> {
    use clap::builder::TypedValueParser;
    clap::builder::PossibleValuesParser::new(["f32", "bf16"]).map(|s| if s == "bf16" { DType::BF16 } else { DType::F32 })
}

/// Writes `bytes` to `path` through a temporary file in the same folder and a rename, so that `path` is either
/// the old file or the complete new one.
pub fn write_atomically(path: &std::path::Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(std::path::Path::new("."));
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "out".into());
    let tmp = dir.join(format!(".{name}.tmp.{}", std::process::id()));
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, path).inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })
}
