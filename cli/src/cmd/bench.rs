//! `tpu-sdk bench MODEL`: latency (min/median/p90/mean), the process's CPU time per run and peak resident
//! memory, and throughput over repeated runs; with
//! `--all-devices`, one copy of the model per device of the target, all running at once.

use std::time::{Duration, Instant};

use anyhow::Result;
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::json;
use tpu_sdk::Tensor;

use super::{InputSpec, ModelOnTarget, Opened};

/// Arguments of `bench`.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    on: ModelOnTarget,
    /// Timed runs.
    #[arg(long, default_value_t = 50)]
    iterations: usize,
    /// Untimed runs first.
    #[arg(long, default_value_t = 5)]
    warmup: usize,
    /// Input .npy files (default: deterministic random data of the model's input types).
    #[arg(long = "input", value_name = "[NAME=]FILE")]
    inputs: Vec<InputSpec>,
    /// Print the ten op kinds and the ten nodes that take the most time (CPU target).
    #[arg(long)]
    profile: bool,
    /// Run one copy of the model on every device of the target at once (edgetpu: every Edge TPU libedgetpu
    /// sees; cloud-tpu: every PJRT device) and report each device and the total throughput.
    #[arg(long, conflicts_with_all = ["profile", "device"])]
    all_devices: bool,
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
    let mut a = a;
    let given = super::read_inputs(&a.inputs)?;
    let given = super::bind_condition_inputs(&mut a.on.model, given, &[])?;
    let Opened { configured, target, model } = a.on.open(&given)?;
    let g = model.graph();
    let inputs: Vec<Tensor> = if given.is_empty() {
        let mut made = Vec::with_capacity(g.inputs.len());
        for (k, &i) in g.inputs.iter().enumerate() {
            let v = g.value(i);
            tpu_sdk::core::limits::check_tensor(&format!("bench's random input '{}'", v.name), v.dtype, &v.shape)?;
            made.push(super::random_tensor(v.dtype, &v.shape, k as u64 + 1));
        }
        made
    } else {
        super::order_inputs(&model, given)?
    };
    let batch = g.inputs.first().and_then(|&i| g.value(i).shape.first().copied()).unwrap_or(1).max(1);
    if a.all_devices {
        return all_devices(&a, target.as_ref(), &configured, &model, &inputs, batch);
    }

    let mut profile_table: Vec<(String, Duration, usize)> = Vec::new();
    let mut slowest: Vec<(usize, String, Duration)> = Vec::new();
    let (times, cpu) = if a.profile && a.on.target.target == "cpu" {
        let mut s = tpu_sdk::core::runtime::Session::new(g.clone())?;
        let timed = time_runs(&a, &mut |x: &[Tensor], timed: bool| {
            if timed && s.profile().is_none() {
                s.set_profiling(true);
            }
            s.run(x).map(drop)
        }, &inputs)?;
        let mut by_op: std::collections::BTreeMap<String, (Duration, usize)> = Default::default();
        // the session's graph: the CPU runtime fuses some nodes when it plans
        for (n, d) in s.graph().nodes.iter().zip(s.profile().unwrap_or(&[])) {
            let e = by_op.entry(n.op.name()).or_default();
            e.0 += *d;
            e.1 += 1;
        }
        profile_table = by_op.into_iter().map(|(k, (d, c))| (k, d / a.iterations as u32, c)).collect();
        profile_table.sort_by(|x, y| y.1.cmp(&x.1));
        profile_table.truncate(10);
        let sg = s.graph();
        slowest = sg
            .nodes
            .iter()
            .zip(s.profile().unwrap_or(&[]))
            .enumerate()
            .map(|(i, (n, d))| {
                let out = n.outputs.first().map(|&o| sg.value(o)).map_or(String::new(), |v| format!(" -> {}{:?}", v.dtype, v.shape));
                // TFLite names join every fused op's name with ';': the first says which layer it is
                let name: String = n.name.split(';').next().unwrap_or("").chars().take(72).collect();
                (i, format!("{} '{name}'{out}", n.op.name()), *d / a.iterations as u32)
            })
            .collect();
        slowest.sort_by(|x, y| y.2.cmp(&x.2));
        if !a.json {
            // the text report shows the ten slowest; `--json` lists every node (scripts compare them with a peer's)
            slowest.truncate(10);
        }
        timed
    } else {
        let mut exe = target.prepare(model.graph().clone())?;
        time_runs(&a, &mut |x: &[Tensor], _| exe.run(x).map(drop), &inputs)?
    };
    let cpu_per_run = cpu.map(|c| c / a.iterations as u32);
    report(&a, &times, cpu_per_run, batch, threads, &profile_table, &slowest)
}

type RunFn<'a> = dyn FnMut(&[Tensor], bool) -> tpu_sdk::Result<()> + 'a;

fn progress_bar(a: &Args, total: u64) -> ProgressBar {
    let bar = if a.json { ProgressBar::hidden() } else { ProgressBar::new(total) };
    bar.set_style(ProgressStyle::with_template("{prefix} [{bar:30}] {pos}/{len} {elapsed}").expect("valid template").progress_chars("=> "));
    bar.set_prefix("bench");
    bar
}

/// The latencies of the timed runs, and the process's CPU time over them (all threads; None where unknown).
fn time_runs(a: &Args, run: &mut RunFn, inputs: &[Tensor]) -> Result<(Vec<Duration>, Option<Duration>)> {
    let bar = progress_bar(a, (a.warmup + a.iterations) as u64);
    let (times, .., cpu) = timed_loop(a, run, inputs, &bar, None)?;
    bar.finish_and_clear();
    Ok((times, cpu))
}

/// Warm-up runs, then the timed ones (after `start`, when given, lets every device through at once); returns
/// the times, when the timed runs began and ended, and the process's CPU time over them.
fn timed_loop(
    a: &Args,
    run: &mut RunFn,
    inputs: &[Tensor],
    bar: &ProgressBar,
    start: Option<&std::sync::Barrier>,
) -> Result<(Vec<Duration>, Instant, Instant, Option<Duration>)> {
    for _ in 0..a.warmup {
        run(inputs, false)?;
        bar.inc(1);
    }
    if let Some(b) = start {
        b.wait();
    }
    let began = Instant::now();
    let cpu0 = process_cpu_time();
    let mut times = Vec::with_capacity(a.iterations);
    for _ in 0..a.iterations {
        let t0 = Instant::now();
        run(inputs, true)?;
        times.push(t0.elapsed());
        bar.inc(1);
    }
    let cpu = cpu0.zip(process_cpu_time()).map(|(t0, t1)| t1.saturating_sub(t0));
    Ok((times, began, Instant::now(), cpu))
}

/// `--all-devices`: prepares one copy of the model per device, runs them all at once (one thread each) and
/// reports each device's latency and the combined throughput.
fn all_devices(
    a: &Args,
    target: &dyn tpu_sdk::Target,
    configured: &tpu_sdk::targets::ConfiguredTarget,
    model: &tpu_sdk::Model,
    inputs: &[Tensor],
    batch: usize,
) -> Result<()> {
    let ids = target.runnable_devices()?;
    if ids.is_empty() {
        return Err(tpu_sdk::Error::Device(format!(
            "--all-devices: no {} device to run on (see `tpu-sdk devices --target {}`)",
            a.on.target.target, a.on.target.target
        ))
        .into());
    }
    let mut exes = Vec::with_capacity(ids.len());
    for id in &ids {
        let mut c = configured.clone();
        c.set_device(id)?;
        let t = c.build();
        exes.push(t.prepare(model.graph().clone()).map_err(|e| anyhow::Error::new(e).context(format!("device {id}")))?);
    }
    let bar = progress_bar(a, ((a.warmup + a.iterations) * ids.len()) as u64);
    let start = std::sync::Barrier::new(ids.len());
    let results: Vec<Result<(Vec<Duration>, Instant, Instant, Option<Duration>)>> = std::thread::scope(|s| {
        let handles: Vec<_> = exes
            .into_iter()
            .map(|mut exe| {
                let (bar, start) = (&bar, &start);
                s.spawn(move || timed_loop(a, &mut |x: &[Tensor], _| exe.run(x).map(drop), inputs, bar, Some(start)))
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap_or_else(|_| Err(anyhow::anyhow!("a benchmark thread panicked")))).collect()
    });
    bar.finish_and_clear();
    let mut per_device = Vec::with_capacity(ids.len());
    for (id, r) in ids.iter().zip(results) {
        let (times, began, ended, _) = r.map_err(|e| e.context(format!("device {id}")))?;
        per_device.push((id.clone(), Stats::of(&times, batch), began, ended));
    }
    let began = per_device.iter().map(|d| d.2).min().expect("at least one device");
    let ended = per_device.iter().map(|d| d.3).max().expect("at least one device");
    let total = (batch * a.iterations * ids.len()) as f64 / (ended - began).as_secs_f64().max(1e-9);
    if a.json {
        let devices: Vec<_> = per_device
            .iter()
            .map(|(id, st, _, _)| json!({"device": id, "latency_ms": st.json(), "throughput_per_s": st.throughput}))
            .collect();
        let doc = json_doc(a, batch, json!({"all_devices": true, "devices": devices, "throughput_per_s": total}));
        println!("{}", serde_json::to_string_pretty(&doc)?);
        return Ok(());
    }
    println!(
        "{} on {} devices of {} at once (batch {batch}, {} runs each after {} warm-up)",
        a.on.model.model.display(),
        ids.len(),
        a.on.target.target,
        a.iterations,
        a.warmup
    );
    for (id, st, _, _) in &per_device {
        println!("  {id:<10} {}  throughput {:.1}/s", st.line(), st.throughput);
    }
    println!("total throughput: {total:.1} inferences/s");
    Ok(())
}

/// Latency statistics of one series of runs.
pub struct Stats {
    min: Duration,
    median: Duration,
    p90: Duration,
    mean: Duration,
    max: Duration,
    /// Inferences per second at the median latency (batch / median).
    pub throughput: f64,
}

impl Stats {
    /// The statistics of `times`, runs of `batch` inferences each.
    pub fn of(times: &[Duration], batch: usize) -> Stats {
        let mut sorted = times.to_vec();
        sorted.sort();
        let median = percentile(&sorted, 0.5);
        Stats {
            min: sorted.first().copied().unwrap_or_default(),
            median,
            p90: percentile(&sorted, 0.9),
            mean: sorted.iter().sum::<Duration>() / sorted.len().max(1) as u32,
            max: sorted.last().copied().unwrap_or_default(),
            throughput: batch as f64 / median.as_secs_f64().max(1e-12),
        }
    }

    /// The `latency_ms` object of `--json`.
    pub fn json(&self) -> serde_json::Value {
        json!({"min": ms(self.min), "median": ms(self.median), "p90": ms(self.p90), "mean": ms(self.mean), "max": ms(self.max)})
    }

    fn line(&self) -> String {
        format!("latency ms: min {:.3}  median {:.3}  p90 {:.3}  mean {:.3}", ms(self.min), ms(self.median), ms(self.p90), ms(self.mean))
    }
}

/// CPU time the process has used so far, all threads together (`CLOCK_PROCESS_CPUTIME_ID`; None where that
/// clock is not read: off 64-bit Linux). Unlike wall time it barely moves when other processes share the cores.
pub fn process_cpu_time() -> Option<Duration> {
    #[cfg(all(target_os = "linux", target_pointer_width = "64"))]
    {
        #[repr(C)]
        struct Timespec {
            sec: i64,
            nsec: i64,
        }
        extern "C" {
            fn clock_gettime(clock: i32, tp: *mut Timespec) -> i32;
        }
        const CLOCK_PROCESS_CPUTIME_ID: i32 = 2;
        let mut t = Timespec { sec: 0, nsec: 0 };
        // SAFETY: clock_gettime writes one timespec (two i64 on 64-bit Linux) through the valid pointer.
        let rc = unsafe { clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &mut t) };
        (rc == 0).then(|| Duration::new(t.sec as u64, t.nsec as u32))
    }
    #[cfg(not(all(target_os = "linux", target_pointer_width = "64")))]
    {
        None
    }
}

/// The process's peak resident memory so far in bytes (`VmHWM` of /proc/self/status; None where there is no
/// such file, as off Linux).
pub fn peak_resident_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find_map(|l| l.strip_prefix("VmHWM:"))?;
    let kib: u64 = line.trim().strip_suffix("kB")?.trim().parse().ok()?;
    Some(kib * 1024)
}

/// A `--json` document: the model, target, run counts and batch, the process's peak resident memory (null
/// where unknown), and the fields of `more`.
fn json_doc(a: &Args, batch: usize, more: serde_json::Value) -> serde_json::Value {
    let mut doc = json!({
        "model": a.on.model.model.display().to_string(),
        "target": a.on.target.target,
        "iterations": a.iterations,
        "warmup": a.warmup,
        "batch": batch,
        "peak_resident_bytes": peak_resident_bytes(),
    });
    if let (Some(d), serde_json::Value::Object(more)) = (doc.as_object_mut(), more) {
        d.extend(more);
    }
    doc
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// Prints the report; `profile` is time per op kind, `slowest` the slowest nodes (their position in the session's
/// graph, `Op 'name' -> f32[..]`, time per run).
fn report(
    a: &Args,
    times: &[Duration],
    cpu_per_run: Option<Duration>,
    batch: usize,
    threads: usize,
    profile: &[(String, Duration, usize)],
    slowest: &[(usize, String, Duration)],
) -> Result<()> {
    let st = Stats::of(times, batch);
    if a.json {
        let profile: Vec<_> = profile.iter().map(|(op, d, n)| json!({"op": op, "nodes": n, "ms_per_run": ms(*d)})).collect();
        let slowest: Vec<_> = slowest.iter().map(|(i, node, d)| json!({"index": i, "node": node, "ms_per_run": ms(*d)})).collect();
        let doc = json_doc(
            a,
            batch,
            json!({"threads": threads, "latency_ms": st.json(), "cpu_ms_per_run": cpu_per_run.map(ms), "throughput_per_s": st.throughput, "profile": profile, "slowest_nodes": slowest}),
        );
        println!("{}", serde_json::to_string_pretty(&doc)?);
        return Ok(());
    }
    println!(
        "{} on {} ({} threads, batch {batch}, {} runs after {} warm-up)",
        a.on.model.model.display(),
        a.on.target.target,
        threads,
        a.iterations,
        a.warmup
    );
    println!("{}", st.line());
    if let Some(c) = cpu_per_run {
        println!("CPU time per run: {:.3} ms (all threads)", ms(c));
    }
    println!("throughput: {:.1} inferences/s", st.throughput);
    if let Some(b) = peak_resident_bytes() {
        println!("peak resident memory: {:.1} MiB", b as f64 / (1024.0 * 1024.0));
    }
    if !profile.is_empty() {
        println!("time per run by op:");
        for (op, d, n) in profile {
            println!("  {op:<24} {:>9.3} ms  ({n} nodes)", ms(*d));
        }
        println!("slowest nodes:");
        for (_, node, d) in slowest {
            println!("  {:>9.3} ms  {node}", ms(*d));
        }
    }
    Ok(())
}
