//! The `tflite` target: `compile --target tflite -o m.tflite` writes the model as a float TFLite file
//! ([`crate::export`] without quantization), for the machines without an Edge TPU and the models the Edge TPU
//! will not take (an op with no int8 form): LiteRT runs the file on any CPU (a Raspberry Pi, a phone).
//! Nothing is calibrated or quantized: the graph gets the quantizer's float rewrites (`quant::prepare`, which
//! compute the same function with ops TFLite has writers for, as the edgetpu pipeline's graph does, so an
//! edgetpu compile that fails on an op with no int8 form can tell whether this target takes the model) and is
//! exported; the file is written atomically (a temporary file renamed to `-o`), and
//! only after LiteRT's `Prepare` checks pass on it. An op with no TFLite writer is refused with an error naming
//! the node. `run`/`bench` have nothing to run on this target: the written file runs on `--target cpu`.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde_json::json;
use tpu_sdk_core::format::tflite::schema;
use tpu_sdk_core::ir::Graph;
use tpu_sdk_core::target::{CompileOptions, CompileOutput, Executable, Target};
use tpu_sdk_core::{Error, Result};

use crate::export::{export, ExportOptions};

/// The float TFLite target (`tflite`).
#[derive(Clone, Copy, Debug, Default)]
pub struct TfliteTarget;

impl Target for TfliteTarget {
    fn name(&self) -> &str {
        "tflite"
    }

    fn prepare(&self, _graph: Graph) -> Result<Box<dyn Executable>> {
        Err(Error::Unsupported(
            "the tflite target only writes files: `tpu-sdk compile MODEL --target tflite -o m.tflite`, then run m.tflite with \
             `tpu-sdk run m.tflite` (the CPU target) or with LiteRT"
                .into(),
        ))
    }

    fn compile(&self, graph: Graph, opts: &CompileOptions) -> Result<CompileOutput> {
        compile(graph, opts)
    }
}

/// Exports `graph` as a TFLite model to `opts.output` (see the module docs).
pub fn compile(graph: Graph, opts: &CompileOptions) -> Result<CompileOutput> {
    match &opts.target {
        tpu_sdk_core::target::TargetOptions::Tflite => {}
        other => {
            return Err(Error::Unsupported(format!("the tflite target was given the compile options of --target {}", other.target_name())))
        }
    }
    let mut graph = graph;
    tpu_sdk_core::quant::prepare(&mut graph);
    let source = opts.source.as_ref().map(|p| p.display().to_string()).unwrap_or_else(|| graph.name.clone());
    let quantized = graph.values.iter().any(|v| v.quant.is_some());
    let kind = if quantized { "quantized" } else { "float" };
    let ex = export(&graph, &ExportOptions { description: format!("{kind} model of {source}, exported by tpu-sdk"), ..Default::default() })?;
    crate::pipeline::write_atomically(&opts.output, &ex.bytes)?;

    let operators = operator_counts(&ex.bytes)?;
    let mut summary = String::new();
    let _ = writeln!(summary, "{kind} TFLite model: {} ({} bytes); LiteRT runs it on a CPU", opts.output.display(), ex.bytes.len());
    for (e, &i) in ex.inputs.iter().zip(&graph.inputs) {
        let layout = if e.perm == [0, 2, 3, 1] { " (NHWC)" } else { "" };
        let _ = writeln!(summary, "  input  {} {:?}{layout} {}", e.name, e.shape, graph.value(i).dtype);
    }
    for &o in &graph.outputs {
        let v = graph.value(o);
        let _ = writeln!(summary, "  output {} {:?} {}", v.name, v.shape, v.dtype);
    }
    let ops: Vec<String> = operators.iter().map(|(k, n)| format!("{k} ×{n}")).collect();
    let _ = writeln!(summary, "  operators: {}", ops.join(", "));

    let inputs: Vec<_> = ex
        .inputs
        .iter()
        .zip(&graph.inputs)
        .map(|(e, &i)| json!({ "name": e.name, "shape": e.shape, "dtype": graph.value(i).dtype.name(), "layout_perm": e.perm }))
        .collect();
    let outputs: Vec<_> = graph
        .outputs
        .iter()
        .map(|&o| {
            let v = graph.value(o);
            json!({ "name": v.name, "shape": v.shape, "dtype": v.dtype.name() })
        })
        .collect();
    let report = json!({
        "target": "tflite",
        "model": opts.output,
        "files": [opts.output],
        "bytes": ex.bytes.len(),
        "quantized": quantized,
        "inputs": inputs,
        "outputs": outputs,
        "operators": operators,
    });
    Ok(CompileOutput { files: vec![opts.output.clone()], summary, report_json: Some(serde_json::to_string_pretty(&report).expect("serialisable")) })
}

/// How many operators of each kind the written file holds (read back from its bytes).
fn operator_counts(bytes: &[u8]) -> Result<BTreeMap<String, usize>> {
    let m = schema::parse_model(bytes).map_err(|e| Error::InvalidModel(format!("the exported model does not read back: {e}")))?;
    let codes = m.operator_codes();
    let mut counts = BTreeMap::new();
    for sg in m.subgraphs().iter().flat_map(|v| v.iter()) {
        for op in sg.operators().iter().flat_map(|v| v.iter()) {
            let name = schema::get(codes, op.opcode_index() as usize).map(|c| c.name()).unwrap_or_else(|| "?".into());
            *counts.entry(name).or_insert(0) += 1;
        }
    }
    Ok(counts)
}
