//! The op-mapping report: which ops of a model run on the Edge TPU and which on the CPU, and why.
//!
//! Both the rules analyzer ([`crate::rules`]) and the `edgetpu_compiler` driver ([`crate::compiler`])
//! produce this report, so `tpu-sdk` prints the same table (or JSON, with `--json`) whichever answered.

use serde::Serialize;
use std::fmt::{self, Write as _};

/// Where an op runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Placement {
    /// On the Edge TPU (inside the `edgetpu-custom-op`).
    Tpu,
    /// On the host CPU (TFLite kernels).
    Cpu,
}

impl fmt::Display for Placement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Placement::Tpu => "TPU",
            Placement::Cpu => "CPU",
        })
    }
}

/// Status strings as `edgetpu_compiler` prints them in its operation table.
pub mod status {
    /// The op runs on the Edge TPU.
    pub const MAPPED: &str = "Mapped to Edge TPU";
    /// The op kind is not supported at all.
    pub const NOT_SUPPORTED: &str = "Operation not supported";
    /// A tensor of the op is not 8-bit quantized.
    pub const DATA_TYPE: &str = "Operation is working on an unsupported data type";
    /// The op comes after the first unsupported op (the compiler maps a single subgraph).
    pub const AFTER_UNSUPPORTED: &str = "More than one subgraph is not supported";
    /// The op kind is supported but this instance breaks a limit.
    pub const LIMITATION: &str = "Operation is otherwise supported, but not mapped due to some unspecified limitation";
    /// Dynamic shapes.
    pub const DYNAMIC: &str = "Attempting to use a delegate that only supports static-sized tensors with a graph that has dynamic-sized tensors";
    /// Tensor rank/shape out of the Edge TPU's reach.
    pub const TENSOR_SHAPE: &str = "Tensor has unsupported rank (up to 3 innermost dimensions mapped)";
    /// Already compiled.
    pub const COMPILED: &str = "Compiled for the Edge TPU";
}

/// One op of the model.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct OpMapping {
    /// Index of the op in execution order.
    pub index: usize,
    /// TFLite op name (`CONV_2D`, `CUSTOM(name)`).
    pub op: String,
    /// Name of the op's first output tensor.
    pub output: String,
    /// Where it runs.
    pub placement: Placement,
    /// The compiler-style status.
    pub status: String,
    /// Why, in specific terms (empty when mapped without remarks).
    pub reason: String,
}

/// Ops with the same kind and status, counted (the compiler's table).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct OpSummary {
    /// TFLite op name.
    pub op: String,
    /// Number of ops.
    pub count: usize,
    /// Where they run.
    pub placement: Placement,
    /// The compiler-style status.
    pub status: String,
}

/// Who produced a report.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ReportSource {
    /// tpu-sdk's rules analyzer (the published Edge TPU constraints).
    Rules,
    /// `edgetpu_compiler`, with its version.
    EdgetpuCompiler {
        /// The compiler's version string.
        version: String,
    },
}

/// The mapping of a model's ops.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MappingReport {
    /// Who produced it.
    pub source: ReportSource,
    /// Per op, in execution order (the compiler only reports counts: empty then, unless known otherwise).
    pub ops: Vec<OpMapping>,
    /// Counts per (op, status), in order of first appearance.
    pub summary: Vec<OpSummary>,
    /// Ops on the Edge TPU.
    pub tpu_ops: usize,
    /// Ops on the CPU.
    pub cpu_ops: usize,
    /// Remarks that apply to the whole model.
    pub notes: Vec<String>,
}

impl MappingReport {
    /// A report from per-op mappings (the summary and counts are derived).
    pub fn from_ops(source: ReportSource, ops: Vec<OpMapping>, notes: Vec<String>) -> MappingReport {
        let mut summary: Vec<OpSummary> = Vec::new();
        for o in &ops {
            match summary.iter_mut().find(|s| s.op == o.op && s.status == o.status && s.placement == o.placement) {
                Some(s) => s.count += 1,
                None => summary.push(OpSummary { op: o.op.clone(), count: 1, placement: o.placement, status: o.status.clone() }),
            }
        }
        let tpu_ops = ops.iter().filter(|o| o.placement == Placement::Tpu).count();
        let cpu_ops = ops.len() - tpu_ops;
        MappingReport { source, ops, summary, tpu_ops, cpu_ops, notes }
    }

    /// True when every op runs on the Edge TPU.
    pub fn all_on_tpu(&self) -> bool {
        self.cpu_ops == 0 && self.tpu_ops > 0
    }

    /// The report as pretty JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("the report serialises")
    }

    /// The report as a text table: per op when known, else the compiler's summary table.
    pub fn to_text(&self) -> String {
        let mut s = String::new();
        match &self.source {
            ReportSource::Rules => s.push_str("Edge TPU mapping (tpu-sdk rules analyzer)\n"),
            ReportSource::EdgetpuCompiler { version } => {
                let _ = writeln!(s, "Edge TPU mapping (edgetpu_compiler {version})");
            }
        }
        let _ = writeln!(s, "Number of operations that will run on Edge TPU: {}", self.tpu_ops);
        let _ = writeln!(s, "Number of operations that will run on CPU: {}", self.cpu_ops);
        s.push('\n');
        if !self.ops.is_empty() {
            let w = self.ops.iter().map(|o| o.op.len()).max().unwrap_or(8).max(8);
            let _ = writeln!(s, "{:>4}  {:<w$}  {:<5}  Status", "#", "Operator", "Where");
            for o in &self.ops {
                let detail = if o.reason.is_empty() { o.status.clone() } else { format!("{}: {}", o.status, o.reason) };
                let _ = writeln!(s, "{:>4}  {:<w$}  {:<5}  {}", o.index, o.op, o.placement.to_string(), detail);
            }
        } else {
            let w = self.summary.iter().map(|o| o.op.len()).max().unwrap_or(8).max(30);
            let _ = writeln!(s, "{:<w$} {:<10} Status", "Operator", "Count");
            for o in &self.summary {
                let _ = writeln!(s, "{:<w$} {:<10} {}", o.op, o.count, o.status);
            }
        }
        for n in &self.notes {
            let _ = writeln!(s, "note: {n}");
        }
        s
    }
}

impl fmt::Display for MappingReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_text())
    }
}
