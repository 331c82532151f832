//! `tpu-sdk cache stats|clear [--json]`: the cloud-tpu compilation cache.
//!
//! The command line caches compiled executables by default, in `$TPU_SDK_COMPILE_CACHE`, else
//! `$XDG_CACHE_HOME/tpu-sdk/xla`, else `~/.cache/tpu-sdk/xla`; `TPU_SDK_COMPILE_CACHE=off` turns it off and
//! `TPU_SDK_COMPILE_CACHE_MAX_MB` sets its size limit (default 2048; least recently used entries go first).

use std::path::PathBuf;

use anyhow::Result;

/// Arguments of `cache`.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(subcommand)]
    action: Action,
    /// The cache folder (default: $TPU_SDK_COMPILE_CACHE, else $XDG_CACHE_HOME/tpu-sdk/xla or ~/.cache/tpu-sdk/xla).
    #[arg(long, global = true, value_name = "DIR")]
    dir: Option<PathBuf>,
    /// Print a JSON document instead of text.
    #[arg(long, global = true)]
    json: bool,
}

/// What to do with the cache.
#[derive(clap::Subcommand, Debug)]
enum Action {
    /// Entries, size, hits and misses, and the measured speedup of a hit over compiling.
    Stats,
    /// Remove every entry.
    Clear,
}

/// Runs `cache`.
#[cfg(feature = "cloud-tpu")]
pub fn main(a: Args) -> Result<()> {
    use serde_json::json;
    use tpu_sdk_cloud_tpu::cache::{default_dir, CompileCache};

    let Some(dir) = a.dir.clone().or_else(default_dir) else {
        if a.json {
            println!("{}", json!({"enabled": false}));
        } else {
            println!("the compile cache is off (TPU_SDK_COMPILE_CACHE={})", std::env::var("TPU_SDK_COMPILE_CACHE").unwrap_or_default());
        }
        return Ok(());
    };
    let cache = CompileCache::new(&dir);
    match a.action {
        Action::Stats => {
            let s = cache.stats();
            let mean = |total: f64, n: u64| if n == 0 { None } else { Some(total / n as f64 * 1e3) };
            let (compile_ms, load_ms) = (mean(s.compile_seconds, s.misses), mean(s.load_seconds, s.hits));
            if a.json {
                let doc = json!({
                    "enabled": true, "dir": dir.display().to_string(), "entries": s.entries, "bytes": s.bytes,
                    "max_bytes": s.max_bytes, "hits": s.hits, "misses": s.misses, "corrupt": s.corrupt,
                    "evictions": s.evictions, "mean_compile_ms": compile_ms, "mean_load_ms": load_ms,
                    "hit_speedup": s.speedup(),
                });
                println!("{}", serde_json::to_string_pretty(&doc)?);
                return Ok(());
            }
            let mib = |b: u64| b as f64 / (1u64 << 20) as f64;
            println!("compile cache {}", dir.display());
            println!("entries    {} ({:.1} MiB of a {:.0} MiB limit)", s.entries, mib(s.bytes), mib(s.max_bytes));
            let lookups = s.hits + s.misses;
            let rate = if lookups == 0 { String::new() } else { format!(" ({:.0}% hits)", 100.0 * s.hits as f64 / lookups as f64) };
            println!("lookups    {} hits, {} misses{rate}; {} corrupt entries recompiled, {} evicted", s.hits, s.misses, s.corrupt, s.evictions);
            match (compile_ms, load_ms, s.speedup()) {
                (Some(c), Some(l), Some(x)) => {
                    println!("speedup    a hit loads in {l:.1} ms on average, a miss compiles in {c:.1} ms: {x:.0}x faster")
                }
                _ => println!("speedup    not measured yet (needs at least one hit and one miss)"),
            }
        }
        Action::Clear => {
            let (n, bytes) = cache.clear().map_err(|e| anyhow::anyhow!("cannot clear {}: {e}", dir.display()))?;
            if a.json {
                println!("{}", json!({"dir": dir.display().to_string(), "removed_entries": n, "freed_bytes": bytes}));
            } else {
                println!("removed {n} entries ({bytes} bytes) from {}", dir.display());
            }
        }
    }
    Ok(())
}

/// Runs `cache` (this build has no cloud-tpu target, hence no compilation cache).
#[cfg(not(feature = "cloud-tpu"))]
pub fn main(a: Args) -> Result<()> {
    let _ = (a.action, a.dir, a.json);
    Err(super::UsageError("the compilation cache belongs to the cloud-tpu target, which this build does not include".into()).into())
}
