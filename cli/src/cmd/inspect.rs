//! `tpu-sdk inspect MODEL`: the graph in text form (or `--json`).

use anyhow::Result;
use serde_json::json;
use tpu_sdk::core::ir::display::{summary, type_string};

use super::ModelArgs;

/// Arguments of `inspect`.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    model: ModelArgs,
    /// Print a JSON document instead of text.
    #[arg(long)]
    json: bool,
}

/// Runs `inspect`.
pub fn main(a: Args) -> Result<()> {
    let model = a.model.load()?;
    let g = model.graph();
    // Image-like (rank-4) inputs keep the file's layout: NHWC in TFLite files (the importer transposes to the IR's
    // NCHW inside the graph), NCHW in ONNX files.
    let tflite = a.model.model.extension().is_some_and(|e| e.eq_ignore_ascii_case("tflite"));
    let layout = |v: &tpu_sdk::core::ir::Value| (v.shape.len() == 4).then_some(if tflite { "NHWC" } else { "NCHW" });
    if !a.json {
        println!("{g}");
        for &i in &g.inputs {
            let v = g.value(i);
            if let Some(l) = layout(v) {
                let q = v.quant.as_ref().map(|q| format!(", int8 scale {} zero point {}", q.scale[0], q.zero_point[0])).unwrap_or_default();
                println!("input '{}': layout {l}{q}", v.name);
            }
        }
        return Ok(());
    }
    let doc = json_doc(&model, tflite);
    println!("{}", serde_json::to_string_pretty(&doc)?);
    Ok(())
}

/// The `--json` document of a loaded model (`tflite`: it came from a .tflite file, whose image inputs are NHWC).
pub fn json_doc(model: &tpu_sdk::Model, tflite: bool) -> serde_json::Value {
    let g = model.graph();
    let layout = |v: &tpu_sdk::core::ir::Value| (v.shape.len() == 4).then_some(if tflite { "NHWC" } else { "NCHW" });
    let s = summary(g);
    let io = |ids: &[tpu_sdk::core::ir::ValueId]| -> Vec<serde_json::Value> {
        ids.iter()
            .map(|&i| {
                let v = g.value(i);
                json!({"name": v.name, "dtype": v.dtype.name(), "shape": v.shape, "dynamic": v.dynamic, "layout": layout(v),
                       "scale": v.quant.as_ref().map(|q| q.scale.clone()), "zero_point": v.quant.as_ref().map(|q| q.zero_point.clone())})
            })
            .collect()
    };
    let nodes: Vec<serde_json::Value> = g
        .nodes
        .iter()
        .enumerate()
        .map(|(i, n)| {
            json!({
                "name": n.name,
                "op": n.op.name(),
                "inputs": n.inputs.iter().map(|x| x.map(|v| g.value(v).name.clone())).collect::<Vec<_>>(),
                "outputs": n.outputs.iter().map(|&o| json!({"name": g.value(o).name, "type": type_string(g.value(o))})).collect::<Vec<_>>(),
                "macs": tpu_sdk::core::ir::display::node_macs(g, i),
            })
        })
        .collect();
    json!({
        "name": g.name,
        "inputs": io(&g.inputs),
        "outputs": io(&g.outputs),
        "nodes": s.nodes,
        "ops": s.ops,
        "parameters": s.parameters,
        "macs": s.macs,
        "graph": nodes,
    })
}
