//! The Edge TPU compile pipeline: calibrate and quantize a float graph to int8, export it as a TFLite model,
//! check it against the Edge TPU's rules, and run `edgetpu_compiler` when it is installed.
//!
//! It takes the [`EdgeTpuOptions`](tpu_sdk_core::target::EdgeTpuOptions) variant of the options:
//!
//! 1. calibration ([`tpu_sdk_core::quant::calibrate()`]) on `EdgeTpuOptions::calibration` with the chosen range
//!    method (`minmax` by default);
//! 2. quantization ([`tpu_sdk_core::quant::quantize()`]): int8 inputs/outputs, or float ones with `io_dtype`
//!    float;
//! 3. int8 TFLite export ([`crate::export`]), written to a temporary file and renamed to `-o`;
//! 4. the rules analyzer ([`crate::rules`]) predicts which ops run on the TPU and why the others do not;
//! 5. `edgetpu_compiler` (when found) writes `<stem>_edgetpu.tflite`; its own mapping replaces the prediction;
//! 6. the int8 model's error against the float model on the evaluation samples (default: the calibration
//!    samples): SQNR and max abs error per output.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde_json::json;
use tpu_sdk_core::ir::Graph;
use tpu_sdk_core::quant::{self, compare::Comparison, QuantizeOptions, RangeMethod};
use tpu_sdk_core::target::{CompileOptions, CompileOutput, IoDType};
use tpu_sdk_core::{Error, Result};

use crate::compiler::{self, CompilerError, EdgeTpuCompiler};
use crate::export::{export, ExportOptions};
use crate::rules::{self, RulesOptions};

/// How to pass calibration data, for the error when there is none.
pub const CALIBRATION_HINT: &str = "compiling for the Edge TPU quantizes the model to int8, which needs calibration data: \
pass --calibration PATH with a .npy holding N samples on its first axis (N×input shape), a folder of .npy files \
(one sample each; for several inputs, files named after the inputs inside one folder per sample), or a folder of \
images (preprocessed with --mean/--std/--layout as in `run --image`); 100-500 representative samples are typical";

/// Compiles `graph` for the Edge TPU (see the module docs).
pub fn compile(graph: Graph, opts: &CompileOptions) -> Result<CompileOutput> {
    let o = opts.target.edge_tpu("edgetpu")?;
    if o.calibration.is_empty() {
        return Err(Error::InputMismatch(CALIBRATION_HINT.into()));
    }
    let method = o.method;
    let float_io = o.io_dtype == IoDType::Float;
    // An explicitly named compiler must exist before the long steps run.
    let compiler = match &o.edgetpu_compiler {
        Some(p) => Some(EdgeTpuCompiler::at(p).map_err(|e| Error::Device(e.to_string()))?),
        None => match EdgeTpuCompiler::find() {
            Ok(c) => Some(c),
            Err(CompilerError::NotFound { .. }) => None,
            Err(e) => return Err(Error::Device(e.to_string())),
        },
    };

    tpu_sdk_core::limits::check_graph(&graph)?;
    let mut graph = graph;
    quant::prepare(&mut graph);
    let cal = quant::calibrate(&graph, &o.calibration, method, &opts.progress)?;
    let q = quant::quantize(&graph, &cal, &QuantizeOptions { method, float_io }).map_err(|e| float_tflite_hint(e, &graph))?;
    let source = opts.source.as_ref().map(|p| p.display().to_string()).unwrap_or_else(|| graph.name.clone());
    let ex = export(&q, &ExportOptions { description: format!("int8 model of {source}, quantized by tpu-sdk ({method} calibration, {} samples)", cal.samples), ..Default::default() })
        .map_err(|e| float_tflite_hint(e, &graph))?;
    write_atomically(&opts.output, &ex.bytes)?;
    let mut files = vec![opts.output.clone()];

    let predicted = rules::analyze_bytes(&ex.bytes, &RulesOptions::default()).map_err(|e| Error::InvalidModel(format!("the exported model does not read back: {e}")))?;
    let mut notes = Vec::new();
    let mut compiled_json = serde_json::Value::Null;
    let mapping = match &compiler {
        Some(c) => {
            let dir = opts.output.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new(".")).to_path_buf();
            opts.progress.report("edgetpu_compiler", 0, 1);
            let out = c.compile(&opts.output, &dir, &compiler::CompileOptions::default()).map_err(|e| Error::Device(e.to_string()))?;
            opts.progress.report("edgetpu_compiler", 1, 1);
            files.push(out.model.clone());
            if let Some(l) = &out.log {
                files.push(l.clone());
            }
            compiled_json = json!({ "model": out.model, "log": out.log, "edgetpu_subgraphs": out.edgetpu_subgraphs });
            out.report
        }
        None => {
            notes.push(format!(
                "edgetpu_compiler was not found, so no *_edgetpu.tflite was made; the int8 model above runs with LiteRT on a CPU, and \
                 the mapping is the rules analyzer's prediction. {}",
                compiler::INSTALL_HINT
            ));
            predicted.clone()
        }
    };

    let eval = if o.eval.is_empty() { &o.calibration } else { &o.eval };
    let cmp = quant::compare::compare(&graph, &q, eval, &opts.progress)?;

    let summary = summary_text(&opts.output, &ex, &q, &mapping, &cmp, method, cal.samples, o.eval.is_empty(), &notes);
    let inputs: Vec<_> = ex
        .inputs
        .iter()
        .zip(&q.inputs)
        .map(|(e, &i)| {
            let v = q.value(i);
            json!({ "name": e.name, "shape": e.shape, "dtype": v.dtype.name(), "layout_perm": e.perm,
                    "scale": v.quant.as_ref().map(|p| p.scale[0]), "zero_point": v.quant.as_ref().map(|p| p.zero_point[0]) })
        })
        .collect();
    let outputs: Vec<_> = q
        .outputs
        .iter()
        .map(|&o| {
            let v = q.value(o);
            json!({ "name": v.name, "shape": v.shape, "dtype": v.dtype.name(),
                    "scale": v.quant.as_ref().map(|p| p.scale[0]), "zero_point": v.quant.as_ref().map(|p| p.zero_point[0]) })
        })
        .collect();
    let metrics: Vec<_> = cmp
        .outputs
        .iter()
        .map(|o| json!({ "output": o.name, "sqnr_db": finite(o.sqnr_db), "max_abs_error": o.max_abs_error }))
        .collect();
    let report = json!({
        "target": "edgetpu",
        "model": opts.output,
        "files": files,
        "calibration": { "method": method.to_string(), "samples": cal.samples },
        "io_dtype": o.io_dtype.name(),
        "inputs": inputs,
        "outputs": outputs,
        "mapping": serde_json::from_str::<serde_json::Value>(&mapping.to_json()).unwrap_or_default(),
        "predicted_mapping": if compiler.is_some() { serde_json::from_str::<serde_json::Value>(&predicted.to_json()).unwrap_or_default() } else { serde_json::Value::Null },
        "edgetpu_compiler": compiled_json,
        "error": { "samples": cmp.samples, "evaluated_with": cmp.evaluated_with, "on_calibration_samples": o.eval.is_empty(), "outputs": metrics },
        "notes": notes,
    });
    Ok(CompileOutput { files, summary, report_json: Some(serde_json::to_string_pretty(&report).expect("serialisable")) })
}

/// An op the int8 path refuses (no int8 form, no int8 TFLite writer): when the float graph exports as TFLite,
/// the error also says that `--target tflite` writes that float model, which LiteRT runs on the CPU (`float`:
/// the prepared float graph, which exports as the tflite target's would).
fn float_tflite_hint(e: Error, float: &Graph) -> Error {
    match e {
        Error::Unsupported(m) if export(float, &ExportOptions::default()).is_ok() => Error::Unsupported(format!(
            "{m}. This model has no int8 Edge TPU form, but `compile --target tflite -o model.tflite` writes it as a float \
             TFLite model that LiteRT runs on the CPU (a Raspberry Pi, say)"
        )),
        other => other,
    }
}

/// JSON has no infinity: an exact output's SQNR is written as null.
fn finite(x: f64) -> Option<f64> {
    x.is_finite().then_some(x)
}

#[allow(clippy::too_many_arguments)]
fn summary_text(
    output: &Path,
    ex: &crate::export::Exported,
    q: &Graph,
    mapping: &crate::MappingReport,
    cmp: &Comparison,
    method: RangeMethod,
    samples: usize,
    on_calibration: bool,
    notes: &[String],
) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "int8 TFLite model: {} ({} bytes; {method} calibration on {samples} samples)", output.display(), ex.bytes.len());
    for (e, &i) in ex.inputs.iter().zip(&q.inputs) {
        let v = q.value(i);
        let qp = v.quant.as_ref().map(|p| format!(", scale {} zero point {}", p.scale[0], p.zero_point[0])).unwrap_or_default();
        let layout = if e.perm == [0, 2, 3, 1] { " (NHWC)" } else { "" };
        let _ = writeln!(s, "  input  {} {:?}{layout} {}{qp}", e.name, e.shape, v.dtype);
    }
    for &o in &q.outputs {
        let v = q.value(o);
        let qp = v.quant.as_ref().map(|p| format!(", scale {} zero point {}", p.scale[0], p.zero_point[0])).unwrap_or_default();
        let _ = writeln!(s, "  output {} {:?} {}{qp}", v.name, v.shape, v.dtype);
    }
    s.push('\n');
    s.push_str(&mapping.to_text());
    s.push('\n');
    let on = if on_calibration { "the calibration samples" } else { "the evaluation samples" };
    let _ = writeln!(s, "int8 vs float model on {} of {on} ({}):", cmp.samples, cmp.evaluated_with);
    for o in &cmp.outputs {
        let sq = if o.sqnr_db.is_finite() { format!("{:.1} dB", o.sqnr_db) } else { "exact".into() };
        let _ = writeln!(s, "  {}: SQNR {sq}, max abs error {:.4e}", o.name, o.max_abs_error);
    }
    for n in notes {
        let _ = writeln!(s, "note: {n}");
    }
    s
}

/// Writes `bytes` to `path` through a temporary file in the same folder and a rename.
pub(crate) fn write_atomically(path: &Path, bytes: &[u8]) -> Result<()> {
    let io = |e: std::io::Error| Error::Io { path: path.display().to_string(), source: e };
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).map(Path::to_path_buf).unwrap_or_else(|| PathBuf::from("."));
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "model.tflite".into());
    let tmp = dir.join(format!(".{name}.tmp.{}", std::process::id()));
    std::fs::write(&tmp, bytes).map_err(io)?;
    std::fs::rename(&tmp, path).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        io(e)
    })
}
