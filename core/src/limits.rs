//! Resource limits: how much memory a model may make the SDK allocate, and the checked size arithmetic that
//! decides it before anything is allocated.
//!
//! Models are untrusted input. A three-node ONNX file (`ConstantOfShape` of `[100000, 100000, 100]`) asks for
//! 4 TB; left alone, the allocator aborts the process (or, for tens of GB, the OOM killer ends it). Every
//! place that allocates from a shape a model chose checks it here first and refuses with an
//! [`Error::ResourceLimit`] naming what would be allocated:
//! - [`Session`](crate::runtime::Session) planning (the peak of its buffer plan) and, for values whose shape is
//!   known only at run time, each such node's output before its kernel runs;
//! - constant folding during shape inference (never materialises a huge constant to find out it is huge);
//! - importers, for tensors whose declared shape disagrees with their data or exceeds the budget;
//! - the accelerator compile paths, for any value of the graph.
//!
//! The budget is a process-wide setting: by default [`DEFAULT_FRACTION`] of physical memory; the
//! `TPU_SDK_MAX_MEMORY` environment variable (`512M`, `2G`, `1.5GiB`, a byte count) or [`set_memory_budget`]
//! (the CLI's `--max-memory`) replace it.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::ir::DType;
use crate::{Error, Result};

/// Share of physical memory a model may use when nothing else is said.
pub const DEFAULT_FRACTION: f64 = 0.75;

/// Budget used when physical memory cannot be read (not Linux, no /proc).
const FALLBACK_BUDGET: u64 = 4 << 30;

/// 0 = not set yet (computed on first use).
static BUDGET: AtomicU64 = AtomicU64::new(0);

/// Where the current budget came from, for the error message.
static SOURCE: AtomicU64 = AtomicU64::new(0);
const SRC_DEFAULT: u64 = 0;
const SRC_ENV: u64 = 1;
const SRC_SET: u64 = 2;

/// Sets the process-wide memory budget in bytes (`None`: back to the default from the environment and
/// physical memory).
pub fn set_memory_budget(bytes: Option<u64>) {
    match bytes {
        Some(b) => {
            SOURCE.store(SRC_SET, Ordering::Relaxed);
            BUDGET.store(b.max(1), Ordering::Relaxed);
        }
        None => BUDGET.store(0, Ordering::Relaxed),
    }
}

/// The memory budget in bytes.
pub fn memory_budget() -> u64 {
    let b = BUDGET.load(Ordering::Relaxed);
    if b != 0 {
        return b;
    }
    let (b, src) = match std::env::var("TPU_SDK_MAX_MEMORY").ok().and_then(|s| parse_size(&s).ok()) {
        Some(b) => (b.max(1), SRC_ENV),
        None => (physical_memory().map(|m| (m as f64 * DEFAULT_FRACTION) as u64).unwrap_or(FALLBACK_BUDGET), SRC_DEFAULT),
    };
    SOURCE.store(src, Ordering::Relaxed);
    BUDGET.store(b, Ordering::Relaxed);
    b
}

/// Total physical memory in bytes (Linux: `MemTotal` of /proc/meminfo).
pub fn physical_memory() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kb.checked_mul(1024)
}

/// Parses a size: a byte count, or a number with a unit `K`, `M`, `G`, `T` (powers of 1024; `KB`, `KiB`,
/// `MB`, ... are read the same way), case-insensitive.
pub fn parse_size(s: &str) -> std::result::Result<u64, String> {
    let t = s.trim();
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: f64 = num.parse().map_err(|_| format!("'{s}' is not a size (examples: 2G, 512M, 1073741824)"))?;
    let shift = match unit.trim().to_ascii_lowercase().trim_end_matches("ib").trim_end_matches('b') {
        "" => 0,
        "k" => 10,
        "m" => 20,
        "g" => 30,
        "t" => 40,
        _ => return Err(format!("'{s}': unknown unit '{unit}' (use K, M, G or T)")),
    };
    let bytes = n * (1u64 << shift) as f64;
    if !bytes.is_finite() || bytes < 1.0 || bytes > u64::MAX as f64 {
        return Err(format!("'{s}' is not a usable size"));
    }
    Ok(bytes as u64)
}

/// `shape`'s element count, `None` when it overflows `u64`.
pub fn numel(shape: &[usize]) -> Option<u64> {
    shape.iter().try_fold(1u64, |acc, &d| acc.checked_mul(d as u64))
}

/// Bytes of a `dtype` tensor of `shape`, `None` when it overflows `u64`.
pub fn tensor_bytes(dtype: DType, shape: &[usize]) -> Option<u64> {
    numel(shape)?.checked_mul(dtype.size_bytes() as u64)
}

/// `2.0 TB`, `512.0 MB`, `12 bytes`.
pub fn human(bytes: u64) -> String {
    const UNITS: [&str; 7] = ["bytes", "KB", "MB", "GB", "TB", "PB", "EB"];
    let mut v = bytes as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{bytes} bytes")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

fn budget_text(budget: u64) -> String {
    let why = match SOURCE.load(Ordering::Relaxed) {
        SRC_SET => "set by --max-memory".to_string(),
        SRC_ENV => "set by TPU_SDK_MAX_MEMORY".to_string(),
        _ => format!("{:.0}% of physical memory", DEFAULT_FRACTION * 100.0),
    };
    format!("the memory budget of {} ({why}; --max-memory or TPU_SDK_MAX_MEMORY raise it)", human(budget))
}

/// The error for `what` needing `bytes` (`None`: more than 2^64) above the budget.
pub fn over_budget(what: &str, bytes: Option<u64>) -> Error {
    let budget = memory_budget();
    let size = bytes.map(human).unwrap_or_else(|| "more than 2^64 bytes".into());
    Error::ResourceLimit(format!("{what} needs {size}, above {}", budget_text(budget)))
}

/// Checks that one tensor of `dtype` and `shape` fits the budget; `what` names it (`node 'x' (Expand) output
/// f32[...]` is filled in from `shape`).
pub fn check_tensor(what: &str, dtype: DType, shape: &[usize]) -> Result<()> {
    match tensor_bytes(dtype, shape) {
        Some(b) if b <= memory_budget() => Ok(()),
        b => Err(over_budget(&format!("{what} {}", describe(dtype, shape)), b)),
    }
}

/// Checks every value of `g` whose shape is static against the budget (for targets that compile the whole graph
/// ahead of time: no value a model declares may exceed what this process may allocate).
pub fn check_graph(g: &crate::ir::Graph) -> Result<()> {
    let budget = memory_budget();
    for (k, n) in g.nodes.iter().enumerate() {
        for o in &n.outputs {
            let v = g.value(*o);
            if v.dynamic {
                continue;
            }
            match tensor_bytes(v.dtype, &v.shape) {
                Some(b) if b <= budget => {}
                b => {
                    let name = if n.name.is_empty() { format!("#{k}") } else { n.name.clone() };
                    let what = format!("node '{name}' ({}) output '{}' {}", n.op.name(), v.name, describe(v.dtype, &v.shape));
                    return Err(over_budget(&what, b));
                }
            }
        }
        // values inside control-flow regions (If branches, Loop/Scan bodies) are allocated as well
        for r in crate::ir::ops::control_flow::regions(&n.op) {
            check_graph(r).map_err(|e| match e {
                Error::ResourceLimit(m) => {
                    let name = if n.name.is_empty() { format!("#{k}") } else { n.name.clone() };
                    Error::ResourceLimit(format!("node '{name}' ({}), region '{}': {m}", n.op.name(), r.name))
                }
                other => other,
            })?;
        }
    }
    for &i in &g.inputs {
        let v = g.value(i);
        if !v.dynamic {
            check_tensor(&format!("input '{}'", v.name), v.dtype, &v.shape)?;
        }
    }
    Ok(())
}

/// `f32[100000, 100000, 100]`
pub fn describe(dtype: DType, shape: &[usize]) -> String {
    let dims: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
    format!("{dtype}[{}]", dims.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_sizes() {
        assert_eq!(parse_size("1024"), Ok(1024));
        assert_eq!(parse_size("2G"), Ok(2 << 30));
        assert_eq!(parse_size("512m"), Ok(512 << 20));
        assert_eq!(parse_size("1.5GiB"), Ok(3 << 29));
        assert_eq!(parse_size("3 TB"), Ok(3 << 40));
        assert!(parse_size("lots").is_err());
        assert!(parse_size("2X").is_err());
        assert!(parse_size("0").is_err());
    }

    #[test]
    fn sizes_never_overflow() {
        assert_eq!(numel(&[100_000, 100_000, 100]), Some(1_000_000_000_000));
        assert_eq!(numel(&[usize::MAX, 2]), None);
        assert_eq!(tensor_bytes(DType::F32, &[1 << 62]), None);
        assert_eq!(tensor_bytes(DType::F32, &[]), Some(4));
        assert_eq!(human(4_000_000_000_000), "3.6 TB");
        assert_eq!(human(12), "12 bytes");
        assert_eq!(human(u64::MAX), "16.0 EB");
    }
}

/// Most iterations one `Loop` or `Scan` node runs per call when nothing else is said: a loop whose trip count
/// is huge (ONNX exporters write 2^63-1 with a condition that ends it) and whose condition never turns false
/// stops here with an error instead of running forever.
pub const DEFAULT_MAX_LOOP_ITERATIONS: u64 = 1 << 20;

/// 0 = not set yet (read from the environment on first use).
static MAX_LOOP_ITERATIONS: AtomicU64 = AtomicU64::new(0);

/// Sets the process-wide iteration limit of one Loop/Scan run (`None`: back to the default, or
/// `TPU_SDK_MAX_LOOP_ITERATIONS`).
pub fn set_max_loop_iterations(n: Option<u64>) {
    MAX_LOOP_ITERATIONS.store(n.map_or(0, |n| n.max(1)), Ordering::Relaxed);
}

/// The iteration limit of one Loop/Scan run: `TPU_SDK_MAX_LOOP_ITERATIONS` (a count) or
/// [`DEFAULT_MAX_LOOP_ITERATIONS`], unless [`set_max_loop_iterations`] set it.
pub fn max_loop_iterations() -> u64 {
    let n = MAX_LOOP_ITERATIONS.load(Ordering::Relaxed);
    if n != 0 {
        return n;
    }
    let n = std::env::var("TPU_SDK_MAX_LOOP_ITERATIONS").ok().and_then(|s| s.trim().parse::<u64>().ok()).unwrap_or(DEFAULT_MAX_LOOP_ITERATIONS).max(1);
    MAX_LOOP_ITERATIONS.store(n, Ordering::Relaxed);
    n
}

/// The error for a Loop/Scan that reached [`max_loop_iterations`].
pub fn loop_limit_message(done: u64) -> String {
    format!(
        "stopped after {done} iterations, the limit for one Loop/Scan run (TPU_SDK_MAX_LOOP_ITERATIONS raises it); the loop's trip count or condition does not end it sooner"
    )
}
