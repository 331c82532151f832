//! `tpu-sdk compile MODEL --target T -o OUT`: turn a model into a deployable artifact for a target.
//!
//! The command only gathers options and data (calibration samples); what compiling means is the target's
//! business ([`tpu_sdk::Target::compile`]): StableHLO / a TPU executable for `cloud-tpu`, an int8 TFLite model
//! (and an Edge TPU model when `edgetpu_compiler` is present) for `edgetpu`.

use std::path::PathBuf;

use anyhow::{Context, Result};
use tpu_sdk::core::target::CompileOptions;

use super::image_input::ImageArgs;
use super::{ModelArgs, UsageError};

/// Arguments of `compile`.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    model: ModelArgs,
    /// Target to compile for.
    #[arg(long, value_parser = clap::builder::PossibleValuesParser::new(tpu_sdk::targets::names()))]
    target: String,
    /// Output file (`.tflite` for edgetpu; `.mlir` or an executable file for cloud-tpu).
    #[arg(short, long, value_name = "FILE")]
    output: PathBuf,
    /// cloud-tpu: compile ahead of time for a TPU topology, e.g. `v5e:2x2`, `v6e:1x1` (needs libtpu).
    #[arg(long)]
    topology: Option<String>,
    /// cloud-tpu: compute dtype: `f32` (default) or `bf16`.
    #[arg(long, value_parser = ["f32", "bf16"])]
    dtype: Option<String>,
    /// cloud-tpu: what to write: `mlir` (StableHLO text) or `executable` (default: from the output's extension).
    #[arg(long, value_parser = ["mlir", "executable"])]
    emit: Option<String>,
    /// cloud-tpu: data-parallel replicas compiled into the program.
    #[arg(long, value_name = "N")]
    replicas: Option<usize>,
    /// cloud-tpu: tensor-parallel sharding annotation (repeatable).
    #[arg(long, value_name = "SPEC")]
    shard: Vec<String>,
    /// cloud-tpu: the PJRT plugin library (default: search).
    #[arg(long, value_name = "PATH")]
    plugin: Option<PathBuf>,
    /// edgetpu: calibration samples: a .npy with N samples on its first axis, a folder of .npy files, or a
    /// folder of images (preprocessed with --mean/--std/--layout as in `run --image`).
    #[arg(long, value_name = "PATH")]
    calibration: Option<PathBuf>,
    /// edgetpu: how activation ranges come from calibration: `minmax`, `percentile:P` (e.g. 99.99) or `mse`.
    #[arg(long, value_name = "METHOD")]
    calibration_method: Option<String>,
    /// edgetpu: samples to measure the quantized model's error on (default: the calibration samples).
    #[arg(long, value_name = "PATH")]
    eval: Option<PathBuf>,
    /// edgetpu: dtype of the model's inputs and outputs: `int8` (default; what the Edge TPU needs) or `float`
    /// (QUANTIZE/DEQUANTIZE at the edges).
    #[arg(long, value_parser = ["int8", "float"], default_value = "int8")]
    io_dtype: String,
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
    if let Some(m) = &a.calibration_method {
        tpu_sdk::core::quant::RangeMethod::parse(m).map_err(|e| UsageError(format!("--calibration-method: {e}")))?;
    }
    let model = a.model.load()?;
    let target = tpu_sdk::targets::by_name(&a.target)?;
    let g = model.graph();
    let calibration = match &a.calibration {
        Some(p) => super::samples::load(p, g, &a.image_args).with_context(|| format!("cannot read calibration samples {}", p.display()))?,
        None => Vec::new(),
    };
    let eval = match &a.eval {
        Some(p) => super::samples::load(p, g, &a.image_args).with_context(|| format!("cannot read evaluation samples {}", p.display()))?,
        None => Vec::new(),
    };
    if a.replicas == Some(0) {
        return Err(UsageError("--replicas must be at least 1".into()).into());
    }
    let dtype = match a.dtype.as_deref() {
        Some("bf16") => Some(tpu_sdk::DType::BF16),
        Some("f32") => Some(tpu_sdk::DType::F32),
        _ => None,
    };
    let opts = CompileOptions {
        output: a.output.clone(),
        source: Some(a.model.model.clone()),
        topology: a.topology.clone(),
        dtype,
        emit: a.emit.clone(),
        replicas: a.replicas,
        shard: a.shard.clone(),
        plugin: a.plugin.clone(),
        calibration,
        calibration_method: a.calibration_method.clone(),
        eval,
        float_io: a.io_dtype == "float",
        edgetpu_compiler: a.edgetpu_compiler.clone(),
        progress: super::progress_bar(a.json, "{prefix} [{bar:30}] {pos}/{len} {elapsed}"),
    };
    let out = target.compile(g.clone(), &opts)?;
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
