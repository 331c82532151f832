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
    /// Feed output OUTPUT back into input INPUT on the next call (repeatable): the model's state is kept between
    /// the chunks of --chunk. A state input not given with --input starts as zeros.
    #[arg(long = "state-from", value_name = "OUTPUT=INPUT", conflicts_with_all = ["image", "random_input", "top_k"])]
    state_from: Vec<StatePair>,
    /// Cut an input along its last axis into pieces of N values and run once per piece, in order: the first
    /// --input, or the one named NAME (a .npy, or a .wav read as [channels, frames]). The last piece is padded
    /// with zeros. Outputs are stacked along a new first axis (one row per piece); --state-from outputs are
    /// written as their final value.
    #[arg(long, value_name = "[NAME=]N", conflicts_with_all = ["image", "random_input", "top_k"])]
    chunk: Option<ChunkSpec>,
    /// With --chunk: each piece also carries the C values before it (zeros before the start), so the model sees
    /// C + N values per step (silero-vad at 16 kHz: --chunk 512 --context 64).
    #[arg(long, value_name = "C", default_value_t = 0, requires = "chunk")]
    context: usize,
}

/// `OUTPUT=INPUT` of `--state-from`.
#[derive(Clone, Debug)]
pub struct StatePair(String, String);

impl std::str::FromStr for StatePair {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.split_once('=') {
            Some((o, i)) if !o.is_empty() && !i.is_empty() => Ok(StatePair(o.into(), i.into())),
            _ => Err(format!("'{s}' is not OUTPUT=INPUT (an output name, '=', an input name)")),
        }
    }
}

/// `[NAME=]N` of `--chunk`.
#[derive(Clone, Debug)]
pub struct ChunkSpec {
    name: Option<String>,
    size: usize,
}

impl std::str::FromStr for ChunkSpec {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let (name, n) = match s.rsplit_once('=') {
            Some((name, n)) => (Some(name.to_string()), n),
            None => (None, s),
        };
        match n.parse::<usize>() {
            Ok(size) if size > 0 => Ok(ChunkSpec { name, size }),
            _ => Err(format!("'{n}' is not a chunk size (a whole number of values, at least 1)")),
        }
    }
}

/// Runs `run`.
pub fn main(a: Args) -> Result<()> {
    let mut a = a;
    let given = super::read_inputs(&a.inputs)?;
    let state_inputs: Vec<String> = a.state_from.iter().map(|StatePair(_, i)| i.clone()).collect();
    let given = super::bind_condition_inputs(&mut a.on.model, given, &state_inputs)?;
    if a.chunk.is_some() || !a.state_from.is_empty() {
        return stream(a, given);
    }
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
    let files = write_outputs(a.output_dir.as_deref(), &outputs)?;
    let top = match a.top_k {
        Some(k) => Some(top_k(&outputs, k, a.labels.as_deref())?),
        None => None,
    };
    if a.json {
        let outs: Vec<serde_json::Value> = outputs.iter().enumerate().map(|(i, t)| output_doc(g, i, t, files.get(i))).collect();
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
        let dest = files.get(i).map(|p| format!(" -> {}", p.display())).unwrap_or_default();
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

/// `run --chunk/--state-from`: one step per chunk with the state carried between steps.
fn stream(a: Args, mut given: Vec<(Option<String>, Tensor)>) -> Result<()> {
    use tpu_sdk::core::stream::{chunks, stack, state_links, Stream};
    // the input to cut, swapped for its first piece so that the model is opened with the shape of one step
    let mut whole = None;
    if let Some(c) = &a.chunk {
        let at = match &c.name {
            Some(n) => given
                .iter()
                .position(|(g, _)| g.as_deref() == Some(n.as_str()))
                .ok_or_else(|| UsageError(format!("--chunk {n}={}: no --input {n}=FILE was given", c.size)))?,
            None if given.is_empty() => return Err(UsageError("--chunk needs an --input to cut into pieces".into()).into()),
            None => 0,
        };
        let first = chunks(&given[at].1, c.size, a.context)?.0.next().expect("chunks() yields at least one piece");
        whole = Some((at, std::mem::replace(&mut given[at].1, first)));
    }
    let Opened { target, model, .. } = a.on.open(&given)?;
    let g = model.graph();
    let pairs: Vec<(String, String)> = a.state_from.iter().map(|StatePair(o, i)| (o.clone(), i.clone())).collect();
    let links = state_links(g, &pairs)?;
    let (mut slots, placed) = super::place_inputs(&model, given)?;
    let chunk_slot = whole.as_ref().map(|(at, _)| placed[*at]);
    if let Some(l) = links.iter().find(|l| Some(l.input) == chunk_slot) {
        let name = &g.value(g.inputs[l.input]).name;
        return Err(UsageError(format!("input '{name}' cannot be both cut by --chunk and fed by --state-from")).into());
    }
    let initial: Vec<Option<Tensor>> = links.iter().map(|l| slots[l.input].take()).collect();
    let is_state = |i: usize| links.iter().any(|l| l.input == i);
    let mut fed = Vec::new();
    for (i, t) in slots.into_iter().enumerate().filter(|(i, _)| !is_state(*i)) {
        fed.push(t.ok_or_else(|| {
            tpu_sdk::Error::InputMismatch(format!(
                "input '{}' is missing: give it with --input, or feed it from an output with --state-from",
                g.value(g.inputs[i]).name
            ))
        })?);
    }
    let chunk_pos = chunk_slot.map(|s| (0..s).filter(|&i| !is_state(i)).count());
    let state_outputs: Vec<usize> = links.iter().map(|l| l.output).collect();
    let mut stream = Stream::new(target.prepare(g.clone())?, g, links, initial)?;

    // (the pieces, the padding of the last one, the number of steps: one without --chunk)
    let (pieces, padding, total): (Box<dyn Iterator<Item = Tensor>>, usize, usize) = match &whole {
        Some((_, t)) => {
            let (it, pad) = chunks(t, a.chunk.as_ref().expect("whole implies --chunk").size, a.context)?;
            let n = it.len();
            (Box::new(it), pad, n)
        }
        None => (Box::new(std::iter::empty()), 0, 1),
    };
    let progress = super::progress_bar(a.json || total < 2, "{prefix} [{bar:30}] {pos}/{len} {elapsed}");
    let mut per_step: Vec<Vec<Tensor>> = vec![Vec::new(); g.outputs.len()];
    let mut last = Vec::new();
    let t0 = Instant::now();
    let mut step = |inputs: &[Tensor], k: usize| -> Result<()> {
        let outs = stream.step(inputs).with_context(|| format!("step {k} of {total}"))?;
        for (o, t) in outs.iter().enumerate() {
            if !state_outputs.contains(&o) {
                per_step[o].push(t.clone());
            }
        }
        last = outs;
        progress.report("chunks", k as u64 + 1, total as u64);
        Ok(())
    };
    match chunk_pos {
        Some(pos) => {
            for (k, piece) in pieces.enumerate() {
                fed[pos] = piece;
                step(&fed, k)?;
            }
        }
        None => step(&fed, 0)?,
    }
    let latency = t0.elapsed();
    let outputs: Vec<Tensor> = (0..g.outputs.len())
        .map(|o| if state_outputs.contains(&o) { Ok(last[o].clone()) } else { stack(&per_step[o]) })
        .collect::<tpu_sdk::Result<_>>()?;

    let files = write_outputs(a.output_dir.as_deref(), &outputs)?;
    let ms = latency.as_secs_f64() * 1e3;
    let size = a.chunk.as_ref().map(|c| c.size);
    if a.json {
        let outs: Vec<serde_json::Value> = outputs
            .iter()
            .enumerate()
            .map(|(i, t)| {
                let mut doc = output_doc(g, i, t, files.get(i));
                doc["state"] = json!(state_outputs.contains(&i));
                doc
            })
            .collect();
        let doc = json!({"target": a.on.target.target, "chunks": total, "chunk_size": size, "padding": padding,
                         "latency_ms": ms, "latency_ms_per_chunk": ms / total as f64, "outputs": outs});
        println!("{}", serde_json::to_string_pretty(&doc)?);
        return Ok(());
    }
    let pad = if padding > 0 { format!(", the last padded with {padding} zeros") } else { String::new() };
    match size {
        Some(n) => println!(
            "ran {} on {}: {total} chunks of {n}{pad} in {ms:.2} ms ({:.3} ms per chunk)",
            a.on.model.model.display(),
            a.on.target.target,
            ms / total as f64
        ),
        None => println!("ran {} on {} in {ms:.2} ms", a.on.model.model.display(), a.on.target.target),
    }
    for (i, t) in outputs.iter().enumerate() {
        let v = t.to_f64_vec();
        let (lo, hi) = v.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), &x| (l.min(x), h.max(x)));
        let what = if state_outputs.contains(&i) { " (final state)" } else { "" };
        let dest = files.get(i).map(|p| format!(" -> {}", p.display())).unwrap_or_default();
        println!("output {i} '{}'{what}: {}{:?} min {lo:.6} max {hi:.6}{dest}", g.value(g.outputs[i]).name, t.dtype(), t.shape);
    }
    Ok(())
}

/// Writes `DIR/output_<i>.npy` for every output (nothing without a directory); returns the files in order.
fn write_outputs(dir: Option<&std::path::Path>, outputs: &[Tensor]) -> Result<Vec<PathBuf>> {
    let Some(dir) = dir else { return Ok(Vec::new()) };
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let mut files = Vec::with_capacity(outputs.len());
    for (i, t) in outputs.iter().enumerate() {
        let p = dir.join(format!("output_{i}.npy"));
        tpu_sdk::core::npy::write(&p, t)?;
        files.push(p);
    }
    Ok(files)
}

/// Output `i` (`t`) of `g` as `--json` describes it.
fn output_doc(g: &tpu_sdk::Graph, i: usize, t: &Tensor, file: Option<&PathBuf>) -> serde_json::Value {
    json!({
        "name": g.value(g.outputs[i]).name,
        "dtype": t.dtype().name(),
        "shape": t.shape,
        "file": file.map(|p| p.display().to_string()),
    })
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
