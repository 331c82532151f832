//! `tpu-sdk compile --target cloud-tpu`: the [`Target::compile`](tpu_sdk_core::target::Target::compile) of
//! [`CloudTpuTarget`]. Writes StableHLO text (`emit=mlir`, or an `.mlir` output) or a serialized PJRT executable:
//! ahead of time for a TPU topology through libtpu (`topology`), or for the local plugin's devices. It takes the
//! [`CloudTpuOptions`] variant of the options; every one of them is either honoured or rejected.

use std::path::{Path, PathBuf};

use tpu_sdk_core::ir::{DType, Graph};
use tpu_sdk_core::target::{CloudTpuOptions, CompileOptions as Opts, CompileOutput, Emit};

use crate::cache::{write_atomically, CacheReport, CompileCache};
use crate::discover::looks_like_libtpu;
use crate::error::Error;
use crate::lower::{lower_program, lower_program_sharded, LowerOptions, Program};
use crate::pjrt::{CompileOptions, Plugin};
use crate::CloudTpuTarget;

type CoreResult<T> = tpu_sdk_core::Result<T>;

fn unsupported(msg: impl Into<String>) -> tpu_sdk_core::Error {
    tpu_sdk_core::Error::Unsupported(msg.into())
}

fn io_error(path: &Path, e: std::io::Error) -> tpu_sdk_core::Error {
    tpu_sdk_core::Error::Io { path: path.display().to_string(), source: e }
}

/// The plugin that compiles for a topology: the one given (`--plugin`, then the target's), else
/// `$TPU_SDK_LIBTPU`, else the usual search.
fn topology_plugin(t: &CloudTpuTarget, o: &CloudTpuOptions) -> Option<PathBuf> {
    o.plugin
        .clone()
        .or_else(|| t.plugin.clone())
        .or_else(|| std::env::var_os("TPU_SDK_LIBTPU").filter(|v| !v.is_empty()).map(PathBuf::from))
}

/// Compiles `graph` as `o` asks (see the module docs).
pub(crate) fn compile(t: &CloudTpuTarget, graph: Graph, opts: &Opts) -> CoreResult<CompileOutput> {
    let o = opts.target.cloud_tpu("cloud-tpu")?;
    let emit = o.emit.unwrap_or_else(|| Emit::for_output(&opts.output));
    if opts.output.as_os_str().is_empty() {
        return Err(unsupported("cloud-tpu compile needs an output file (-o model.mlir or -o model.pjrt)"));
    }
    let graph = match o.dtype {
        None | Some(DType::F32) => graph,
        Some(DType::BF16) => crate::bf16::to_bf16(&graph),
        Some(d) => return Err(unsupported(format!("--dtype {d}: cloud-tpu computes in f32 or bf16"))),
    };
    let replicas = o.replicas.unwrap_or(1);
    if replicas == 0 {
        return Err(unsupported("--replicas must be at least 1"));
    }
    if emit == Emit::Mlir && o.topology.is_some() {
        return Err(unsupported("--topology compiles an executable; it cannot be combined with --emit mlir / an .mlir output"));
    }
    let topology = o.topology.as_ref().map(|t| t.to_string());
    let mut target = t.clone();
    if topology.is_some() {
        target.plugin = topology_plugin(t, o);
    } else if let Some(p) = &o.plugin {
        target.plugin = Some(p.clone());
    }
    // Partitions: `parts=N`, else (locally) the devices available per replica; a topology needs parts=N.
    let plan = if o.shard.is_empty() {
        None
    } else {
        let default_parts = match (&topology, o.parts()) {
            (_, Some(n)) => n,
            (Some(_), None) => return Err(unsupported("--shard with --topology needs the partition count: add --shard parts=N")),
            (None, None) if emit == Emit::Mlir => 0,
            (None, None) => available_devices(&target)? / replicas,
        };
        if default_parts == 0 {
            return Err(unsupported("--shard with --emit mlir needs the partition count: add --shard parts=N"));
        }
        let specs: Vec<String> = o.shard.iter().map(|s| s.to_string()).collect();
        crate::shard::plan(&graph, &specs, default_parts)?.map(|mut p| {
            p.replicas = replicas;
            p
        })
    };
    // A deployable program is self-contained: every weight is embedded.
    let lower = LowerOptions { max_inline_constant: None, ..t.lower };
    let program: Program = match &plan {
        Some(p) => lower_program_sharded(&graph, &lower, p, false)?,
        None => lower_program(&graph, &lower)?,
    };
    let parts = plan.as_ref().map_or(1, |p| p.parts);
    let sharded: Vec<(String, usize)> =
        plan.as_ref().map(|p| p.weights.iter().map(|(v, a)| (graph.value(*v).name.clone(), *a)).collect()).unwrap_or_default();

    let mut facts: Vec<(&str, String)> = vec![
        ("target", json_str("cloud-tpu")),
        ("source", opts.source.as_ref().map_or("null".into(), |s| json_str(&s.display().to_string()))),
        ("output", json_str(&opts.output.display().to_string())),
        ("emit", json_str(emit.name())),
        ("dtype", json_str(if o.dtype == Some(DType::BF16) { "bf16" } else { "f32" })),
        ("replicas", replicas.to_string()),
        ("partitions", parts.to_string()),
        (
            "sharded_weights",
            format!("[{}]", sharded.iter().map(|(n, a)| format!("{{\"name\": {}, \"axis\": {a}}}", json_str(n))).collect::<Vec<_>>().join(", ")),
        ),
    ];
    let mut summary = Vec::new();
    let shard_line = if sharded.is_empty() {
        String::new()
    } else {
        format!(
            ", {parts} partitions ({})",
            sharded.iter().map(|(n, a)| format!("{n} split on axis {a}")).collect::<Vec<_>>().join(", ")
        )
    };

    let bytes: Vec<u8> = if emit == Emit::Mlir {
        summary.push(format!(
            "StableHLO for cloud-tpu: {} lines, dtype {}{}",
            program.mlir.lines().count(),
            if o.dtype == Some(DType::BF16) { "bf16" } else { "f32" },
            shard_line
        ));
        program.mlir.clone().into_bytes()
    } else {
        let options = CompileOptions {
            num_replicas: replicas,
            num_partitions: parts,
            use_spmd_partitioning: parts > 1,
            use_shardy_partitioner: plan.as_ref().is_some_and(|p| p.partitioner == crate::shard::Partitioner::Shardy),
            ..CompileOptions::default()
        };
        opts.progress.report("compiling", 0, 1);
        let (bytes, platform, cache) = match &topology {
            Some(topo) => compile_aot(&target, &program, topo, options, replicas * parts)?,
            None => compile_local(&target, &program, options, replicas * parts)?,
        };
        opts.progress.report("compiling", 1, 1);
        facts.push(("platform", json_str(&platform)));
        facts.push(("topology", topology.as_deref().map_or("null".into(), json_str)));
        facts.push(("executable_bytes", bytes.len().to_string()));
        summary.push(format!(
            "{} executable for {}: {} bytes, {replicas} replica(s){}, dtype {}",
            platform,
            topology.as_deref().unwrap_or("the local devices"),
            bytes.len(),
            shard_line,
            if o.dtype == Some(DType::BF16) { "bf16" } else { "f32" }
        ));
        if let Some(c) = &cache {
            summary.push(c.describe());
            facts.push((
                "cache",
                format!(
                    "{{\"outcome\": {}, \"seconds\": {}, \"compile_seconds\": {}, \"speedup\": {}}}",
                    json_str(c.outcome.name()),
                    c.seconds,
                    c.compile_seconds.map_or("null".into(), |s| s.to_string()),
                    c.speedup().map_or("null".into(), |s| format!("{s:.1}"))
                ),
            ));
        }
        bytes
    };
    write_atomically(&opts.output, &bytes).map_err(|e| io_error(&opts.output, e))?;
    let report = format!("{{{}}}", facts.iter().map(|(k, v)| format!("{}: {v}", json_str(k))).collect::<Vec<_>>().join(", "));
    Ok(CompileOutput { files: vec![opts.output.clone()], summary: summary.join("\n"), report_json: Some(report) })
}

fn available_devices(t: &CloudTpuTarget) -> CoreResult<usize> {
    let found = t.find_plugin()?;
    let plugin = Plugin::load(&found.path)?;
    Ok(plugin.shared_client()?.addressable_devices()?.len().saturating_sub(t.device))
}

/// Compiles for the local plugin's devices from `t.device` on (through the cache when configured).
fn compile_local(
    t: &CloudTpuTarget,
    program: &Program,
    mut options: CompileOptions,
    n_devices: usize,
) -> CoreResult<(Vec<u8>, String, Option<CacheReport>)> {
    let found = t.find_plugin()?;
    let plugin = Plugin::load(&found.path)?;
    let client = plugin.shared_client()?;
    let all = client.addressable_devices()?;
    if t.device + n_devices > all.len() {
        return Err(Error::Invalid(format!(
            "{n_devices} device(s) from device {} needed, but the plugin has {} addressable device(s)",
            t.device,
            all.len()
        ))
        .into());
    }
    let parts = options.num_partitions.max(1);
    options.device_assignment =
        Some(all[t.device..t.device + n_devices].chunks(parts).map(|r| r.iter().map(|d| d.id() as i64).collect()).collect());
    let platform = client.platform_name()?;
    let (bytes, cache) = match &t.cache_dir {
        Some(dir) => {
            let key = CompileCache::key(&plugin, &client, &program.mlir, &options)?;
            let (bytes, report) = CompileCache::new(dir).get_or_compile(
                &key,
                |b| client.load_serialized(b).ok().map(|_| b.to_vec()),
                || {
                    let b = client.compile(&program.mlir, &options)?.serialize()?;
                    Ok((b.clone(), Some(b)))
                },
            )?;
            (bytes, Some(report))
        }
        None => (client.compile(&program.mlir, &options)?.serialize()?, None),
    };
    Ok((bytes, platform, cache))
}

/// Compiles ahead of time for `topology` through libtpu (cached by topology when configured).
fn compile_aot(
    t: &CloudTpuTarget,
    program: &Program,
    topology: &str,
    options: CompileOptions,
    n_devices: usize,
) -> CoreResult<(Vec<u8>, String, Option<CacheReport>)> {
    let found = t.find_plugin().map_err(|e| {
        unsupported(format!(
            "--topology {topology} compiles with libtpu: `pip install libtpu`, then pass --plugin .../libtpu/libtpu.so or set TPU_SDK_LIBTPU ({e})"
        ))
    })?;
    if !looks_like_libtpu(&found.path) {
        return Err(unsupported(format!(
            "--topology {topology} compiles with libtpu, but the plugin is {}: `pip install libtpu`, then pass --plugin .../libtpu/libtpu.so or set TPU_SDK_LIBTPU",
            found.path.display()
        )));
    }
    let plugin = Plugin::load(&found.path)?;
    let run = || -> crate::Result<(Vec<u8>, String)> {
        let a = t.compile_program_for_topology(program, topology, &options)?;
        if n_devices > a.devices {
            return Err(Error::Invalid(format!("{n_devices} devices needed but topology {topology} has {}", a.devices)));
        }
        Ok((a.executable, a.platform))
    };
    match &t.cache_dir {
        Some(dir) => {
            let key = CompileCache::key_for(&plugin, "tpu", "aot", Some(topology), &program.mlir, &options)?;
            let (bytes, report) = CompileCache::new(dir).get_or_compile(&key, |b| Some(b.to_vec()), || {
                let (b, _) = run()?;
                Ok((b.clone(), Some(b)))
            })?;
            Ok((bytes, "tpu".into(), Some(report)))
        }
        None => {
            let (bytes, platform) = run()?;
            Ok((bytes, platform, None))
        }
    }
}

/// A JSON string literal.
pub(crate) fn json_str(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}
