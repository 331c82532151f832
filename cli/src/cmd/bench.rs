//! `tpu-sdk bench MODEL`: latency (min/median/p90/mean) and throughput over repeated runs.

use std::time::{Duration, Instant};

use anyhow::Result;
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::json;
use tpu_sdk::Tensor;

use super::{InputSpec, ModelArgs, TargetArgs};

/// Arguments of `bench`.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    model: ModelArgs,
    #[command(flatten)]
    target: TargetArgs,
    /// Timed runs.
    #[arg(long, default_value_t = 50)]
    iterations: usize,
    /// Untimed runs first.
    #[arg(long, default_value_t = 5)]
    warmup: usize,
    /// Input .npy files (default: deterministic random data of the model's input types).
    #[arg(long = "input", value_name = "[NAME=]FILE")]
    inputs: Vec<InputSpec>,
    /// Print the ten op kinds that take the most time (CPU target).
    #[arg(long)]
    profile: bool,
    /// Print a JSON document instead of text.
    #[arg(long)]
    json: bool,
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let i = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

/// Runs `bench`.
pub fn main(a: Args, threads: usize) -> Result<()> {
    if a.iterations == 0 {
        return Err(super::UsageError("--iterations must be at least 1".into()).into());
    }
    let given = super::read_inputs(&a.inputs)?;
    let model = super::load_for_inputs(&a.model, &given)?;
    let g = model.graph();
    let inputs: Vec<Tensor> = if given.is_empty() {
        g.inputs.iter().enumerate().map(|(k, &i)| super::random_tensor(g.value(i).dtype, &g.value(i).shape, k as u64 + 1)).collect()
    } else {
        super::order_inputs(&model, given)?
    };
    let batch = g.inputs.first().and_then(|&i| g.value(i).shape.first().copied()).unwrap_or(1).max(1);

    let mut profile_table: Vec<(String, Duration, usize)> = Vec::new();
    let times = if a.profile && a.target.target == "cpu" {
        let mut s = tpu_sdk::core::runtime::Session::new(g.clone())?;
        let times = time_runs(&a, &mut |x: &[Tensor], timed: bool| {
            if timed && s.profile().is_none() {
                s.set_profiling(true);
            }
            s.run(x).map(drop)
        }, &inputs)?;
        let mut by_op: std::collections::BTreeMap<String, (Duration, usize)> = Default::default();
        for (n, d) in g.nodes.iter().zip(s.profile().unwrap_or(&[])) {
            let e = by_op.entry(n.op.name()).or_default();
            e.0 += *d;
            e.1 += 1;
        }
        profile_table = by_op.into_iter().map(|(k, (d, c))| (k, d / a.iterations as u32, c)).collect();
        profile_table.sort_by(|x, y| y.1.cmp(&x.1));
        profile_table.truncate(10);
        times
    } else {
        let mut exe = a.target.build()?.prepare(model.graph().clone())?;
        time_runs(&a, &mut |x: &[Tensor], _| exe.run(x).map(drop), &inputs)?
    };
    report(&a, &times, batch, threads, &profile_table)
}

type RunFn<'a> = dyn FnMut(&[Tensor], bool) -> tpu_sdk::Result<()> + 'a;

fn time_runs(a: &Args, run: &mut RunFn, inputs: &[Tensor]) -> Result<Vec<Duration>> {
    let total = (a.warmup + a.iterations) as u64;
    let bar = if a.json { ProgressBar::hidden() } else { ProgressBar::new(total) };
    bar.set_style(ProgressStyle::with_template("{prefix} [{bar:30}] {pos}/{len} {elapsed}").expect("valid template").progress_chars("=> "));
    bar.set_prefix("bench");
    for _ in 0..a.warmup {
        run(inputs, false)?;
        bar.inc(1);
    }
    let mut times = Vec::with_capacity(a.iterations);
    for _ in 0..a.iterations {
        let t0 = Instant::now();
        run(inputs, true)?;
        times.push(t0.elapsed());
        bar.inc(1);
    }
    bar.finish_and_clear();
    Ok(times)
}

fn report(a: &Args, times: &[Duration], batch: usize, threads: usize, profile: &[(String, Duration, usize)]) -> Result<()> {
    let mut sorted = times.to_vec();
    sorted.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let mean = sorted.iter().sum::<Duration>() / sorted.len() as u32;
    let median = percentile(&sorted, 0.5);
    let p90 = percentile(&sorted, 0.9);
    let throughput = batch as f64 / median.as_secs_f64();
    if a.json {
        let doc = json!({
            "model": a.model.model.display().to_string(),
            "target": a.target.target,
            "threads": threads,
            "iterations": a.iterations,
            "warmup": a.warmup,
            "batch": batch,
            "latency_ms": {"min": ms(sorted[0]), "median": ms(median), "p90": ms(p90), "mean": ms(mean), "max": ms(*sorted.last().expect("at least one run"))},
            "throughput_per_s": throughput,
            "profile": profile.iter().map(|(op, d, n)| json!({"op": op, "nodes": n, "ms_per_run": ms(*d)})).collect::<Vec<_>>(),
        });
        println!("{}", serde_json::to_string_pretty(&doc)?);
        return Ok(());
    }
    println!(
        "{} on {} ({} threads, batch {batch}, {} runs after {} warm-up)",
        a.model.model.display(),
        a.target.target,
        threads,
        a.iterations,
        a.warmup
    );
    println!(
        "latency ms: min {:.3}  median {:.3}  p90 {:.3}  mean {:.3}",
        ms(sorted[0]),
        ms(median),
        ms(p90),
        ms(mean)
    );
    println!("throughput: {throughput:.1} inferences/s");
    if !profile.is_empty() {
        println!("time per run by op:");
        for (op, d, n) in profile {
            println!("  {op:<24} {:>9.3} ms  ({n} nodes)", ms(*d));
        }
    }
    Ok(())
}
