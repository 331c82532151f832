//! `tpu-sdk run MODEL --input A.npy ... --output-dir DIR`: one inference, outputs written as .npy.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context, Result};
use serde_json::json;
use tpu_sdk::Tensor;

use super::image_input::{self, ImageArgs};
use super::{InputSpec, ModelOnTarget, Opened, UsageError};

/// Arguments of `run`.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    on: ModelOnTarget,
    /// An input .npy file, in the model's input order, or NAME=FILE (repeatable).
    #[arg(long = "input", value_name = "[NAME=]FILE")]
    inputs: Vec<InputSpec>,
    /// An image for a single-image model (decoded, resized to the input's H×W, normalised).
    #[arg(long, conflicts_with = "inputs")]
    image: Option<PathBuf>,
    #[command(flatten)]
    image_args: ImageArgs,
    /// Run on pseudo-random inputs of the model's input shapes and dtypes (a smoke test, used by `deploy --run`).
    #[arg(long, conflicts_with_all = ["inputs", "image"])]
    random_input: bool,
    /// Write outputs to DIR/output_0.npy, DIR/output_1.npy, ... in the model's output order.
    #[arg(long, value_name = "DIR")]
    output_dir: Option<PathBuf>,
    /// Print the K highest scores of output 0.
    #[arg(long, value_name = "K")]
    top_k: Option<usize>,
    /// Class names for --top-k, one per line.
    #[arg(long, requires = "top_k")]
    labels: Option<PathBuf>,
    /// Print a JSON document instead of text.
    #[arg(long)]
    json: bool,
}

/// Runs `run`.
pub fn main(a: Args) -> Result<()> {
    let given = super::read_inputs(&a.inputs)?;
    let Opened { target, model, .. } = a.on.open(&given)?;
    let inputs: Vec<Tensor> = match &a.image {
        Some(path) => {
            let g = model.graph();
            if g.inputs.len() != 1 {
                return Err(tpu_sdk::Error::InputMismatch(format!("--image needs a model with one input; this one has {}", g.inputs.len())).into());
            }
            let v = g.value(g.inputs[0]);
            vec![image_input::load_value(path, v, &a.image_args)?]
        }
        None if a.random_input => {
            let g = model.graph();
            g.inputs.iter().enumerate().map(|(k, &i)| super::random_tensor(g.value(i).dtype, &g.value(i).shape, k as u64 + 1)).collect()
        }
        None => super::order_inputs(&model, given)?,
    };
    let mut exe = target.prepare(model.graph().clone())?;
    let t0 = Instant::now();
    let outputs = exe.run(&inputs)?;
    let latency = t0.elapsed();

    let g = model.graph();
    let mut files = Vec::new();
    if let Some(dir) = &a.output_dir {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        for (i, t) in outputs.iter().enumerate() {
            let p = dir.join(format!("output_{i}.npy"));
            tpu_sdk::core::npy::write(&p, t)?;
            files.push(Some(p));
        }
    }
    let top = match a.top_k {
        Some(k) => Some(top_k(&outputs, k, a.labels.as_deref())?),
        None => None,
    };
    if a.json {
        let outs: Vec<serde_json::Value> = outputs
            .iter()
            .enumerate()
            .map(|(i, t)| {
                json!({
                    "name": g.value(g.outputs[i]).name,
                    "dtype": t.dtype().name(),
                    "shape": t.shape,
                    "file": files.get(i).cloned().flatten().map(|p| p.display().to_string()),
                })
            })
            .collect();
        let top_json = top.as_ref().map(|t| t.iter().map(|(i, s, l)| json!({"index": i, "score": s, "label": l})).collect::<Vec<_>>());
        let doc = json!({"target": a.on.target.target, "latency_ms": latency.as_secs_f64() * 1e3, "outputs": outs, "top_k": top_json});
        println!("{}", serde_json::to_string_pretty(&doc)?);
        return Ok(());
    }
    println!("ran {} on {} in {:.2} ms", a.on.model.model.display(), a.on.target.target, latency.as_secs_f64() * 1e3);
    for (i, t) in outputs.iter().enumerate() {
        let v = t.to_f64_vec();
        let (lo, hi) = v.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), &x| (l.min(x), h.max(x)));
        let mean = if v.is_empty() { 0.0 } else { v.iter().sum::<f64>() / v.len() as f64 };
        let dest = files.get(i).cloned().flatten().map(|p| format!(" -> {}", p.display())).unwrap_or_default();
        println!(
            "output {i} '{}': {}{:?} min {lo:.6} max {hi:.6} mean {mean:.6}{dest}",
            g.value(g.outputs[i]).name,
            t.dtype(),
            t.shape
        );
    }
    if let Some(top) = top {
        for (rank, (i, s, l)) in top.iter().enumerate() {
            println!("{:>3}. {:<30} {s:.6}  (class {i})", rank + 1, l.clone().unwrap_or_else(|| format!("class {i}")));
        }
    }
    Ok(())
}

/// The `k` largest scores of output 0 as (index, score, label).
fn top_k(outputs: &[Tensor], k: usize, labels: Option<&std::path::Path>) -> Result<Vec<(usize, f64, Option<String>)>> {
    let first = outputs.first().ok_or_else(|| UsageError("--top-k: the model has no outputs".into()))?;
    let scores = first.to_f64_vec();
    let names: Option<Vec<String>> = match labels {
        Some(p) => Some(
            std::fs::read_to_string(p)
                .with_context(|| format!("cannot read labels {}", p.display()))?
                .lines()
                .map(|l| l.trim().to_string())
                .collect(),
        ),
        None => None,
    };
    let mut idx: Vec<usize> = (0..scores.len()).collect();
    idx.sort_by(|&a, &b| scores[b].total_cmp(&scores[a]).then(a.cmp(&b)));
    Ok(idx
        .into_iter()
        .take(k)
        .map(|i| (i, scores[i], names.as_ref().and_then(|n| n.get(i).cloned())))
        .collect())
}
