//! Driver for Coral's `edgetpu_compiler`: finds it, runs it on a fully int8 `.tflite`, and turns its
//! output into a [`MappingReport`].
//!
//! The compiler is a closed-source x86-64 Linux binary from Coral's apt repository (package
//! `edgetpu-compiler`). It writes `<stem>_edgetpu.tflite` and `<stem>_edgetpu.log` into the output
//! directory and, with `-s`, prints its operation table:
//!
//! ```text
//! Number of operations that will run on Edge TPU: 139
//! Number of operations that will run on CPU: 4
//!
//! Operator                       Count      Status
//!
//! CONV_2D                        32         Mapped to Edge TPU
//! CONCATENATION                  1          More than one subgraph is not supported
//! ```

use std::path::{Path, PathBuf};
use std::process::Command;

use tpu_sdk_core::format::tflite::schema;

use crate::report::{status, MappingReport, OpMapping, OpSummary, Placement, ReportSource};

/// Environment variable naming the compiler binary (overrides the `PATH` search).
pub const COMPILER_ENV: &str = "TPU_SDK_EDGETPU_COMPILER";

/// Name of the compiler binary.
pub const COMPILER_NAME: &str = "edgetpu_compiler";

/// How to install the compiler, for error messages.
pub const INSTALL_HINT: &str = "edgetpu_compiler runs only on x86-64 Debian-family Linux. Install it from Coral's apt repository:
  curl -fsSL https://packages.cloud.google.com/apt/doc/apt-key.gpg | sudo gpg --dearmor -o /usr/share/keyrings/coral-edgetpu.gpg
  echo \"deb [signed-by=/usr/share/keyrings/coral-edgetpu.gpg] https://packages.cloud.google.com/apt coral-edgetpu-stable main\" | sudo tee /etc/apt/sources.list.d/coral-edgetpu.list
  sudo apt-get update && sudo apt-get install edgetpu-compiler
or point TPU_SDK_EDGETPU_COMPILER at the binary. Without it, the rules analyzer still predicts the mapping.";

/// Errors of the compiler driver.
#[derive(Debug, thiserror::Error)]
pub enum CompilerError {
    /// No compiler was found.
    #[error("{what}\n{INSTALL_HINT}{host}")]
    NotFound {
        /// where we looked
        what: String,
        /// a remark about this host when it cannot run the compiler
        host: String,
    },
    /// The compiler ran and failed.
    #[error("edgetpu_compiler failed ({status}):\n{output}")]
    Failed {
        /// exit status
        status: String,
        /// its stdout and stderr
        output: String,
    },
    /// The compiler reported success but its output model is missing or unreadable.
    #[error("edgetpu_compiler did not produce a readable {path}: {why}")]
    BadOutput {
        /// the expected output
        path: String,
        /// what is wrong
        why: String,
    },
    /// Starting the compiler or handling files failed.
    #[error("{path}: {source}")]
    Io {
        /// file or program involved
        path: String,
        /// underlying error
        source: std::io::Error,
    },
}

fn host_remark() -> String {
    if cfg!(all(target_os = "linux", target_arch = "x86_64")) {
        String::new()
    } else {
        format!("\n(this host is {}-{}, where edgetpu_compiler does not run: compile on an x86-64 Linux machine)", std::env::consts::ARCH, std::env::consts::OS)
    }
}

/// Options of a compilation.
#[derive(Clone, Debug, Default)]
pub struct CompileOptions {
    /// `-m`: the lowest Edge TPU runtime version the model must run on.
    pub min_runtime_version: Option<u32>,
    /// `-t`: compilation timeout in seconds.
    pub timeout_s: Option<u32>,
    /// `-i`: tensors after which compilation stops (the rest stays on the CPU).
    pub intermediate_tensors: Vec<String>,
}

/// What a compilation produced.
#[derive(Clone, Debug)]
pub struct CompileOutput {
    /// The compiled model (`<stem>_edgetpu.tflite`).
    pub model: PathBuf,
    /// The compiler's operation log, when it wrote one.
    pub log: Option<PathBuf>,
    /// What the compiler printed (stdout then stderr).
    pub output: String,
    /// The op mapping the compiler reported.
    pub report: MappingReport,
    /// Number of `edgetpu-custom-op` ops in the compiled model.
    pub edgetpu_subgraphs: usize,
}

/// A located `edgetpu_compiler`.
#[derive(Clone, Debug)]
pub struct EdgeTpuCompiler {
    /// Path of the binary.
    pub path: PathBuf,
}

impl EdgeTpuCompiler {
    /// Finds the compiler: `$TPU_SDK_EDGETPU_COMPILER`, else `edgetpu_compiler` on `PATH`.
    pub fn find() -> Result<EdgeTpuCompiler, CompilerError> {
        if let Some(p) = std::env::var_os(COMPILER_ENV).filter(|p| !p.is_empty()) {
            return EdgeTpuCompiler::at(PathBuf::from(p));
        }
        let path = std::env::var_os("PATH").unwrap_or_default();
        for dir in std::env::split_paths(&path) {
            let c = dir.join(COMPILER_NAME);
            if is_executable(&c) {
                return Ok(EdgeTpuCompiler { path: c });
            }
        }
        Err(CompilerError::NotFound { what: format!("{COMPILER_NAME} was not found on PATH."), host: host_remark() })
    }

    /// Uses the compiler at `path`.
    pub fn at(path: impl Into<PathBuf>) -> Result<EdgeTpuCompiler, CompilerError> {
        let path = path.into();
        if !is_executable(&path) {
            return Err(CompilerError::NotFound { what: format!("{} is not an executable file.", path.display()), host: host_remark() });
        }
        Ok(EdgeTpuCompiler { path })
    }

    /// The compiler's version string (`edgetpu_compiler --version`).
    pub fn version(&self) -> Result<String, CompilerError> {
        let out = Command::new(&self.path).arg("--version").output().map_err(|e| CompilerError::Io { path: self.path.display().to_string(), source: e })?;
        let text = String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
        Ok(parse_version(&text).unwrap_or_else(|| text.trim().to_string()))
    }

    /// Compiles `model` into `out_dir` (`edgetpu_compiler -s -o OUT_DIR model.tflite`).
    pub fn compile(&self, model: &Path, out_dir: &Path, opts: &CompileOptions) -> Result<CompileOutput, CompilerError> {
        std::fs::create_dir_all(out_dir).map_err(|e| CompilerError::Io { path: out_dir.display().to_string(), source: e })?;
        let mut cmd = Command::new(&self.path);
        cmd.arg("-s").arg("-o").arg(out_dir);
        if let Some(m) = opts.min_runtime_version {
            cmd.arg("-m").arg(m.to_string());
        }
        if let Some(t) = opts.timeout_s {
            cmd.arg("-t").arg(t.to_string());
        }
        if !opts.intermediate_tensors.is_empty() {
            cmd.arg("-i").arg(opts.intermediate_tensors.join(","));
        }
        cmd.arg(model);
        let out = cmd.output().map_err(|e| CompilerError::Io { path: self.path.display().to_string(), source: e })?;
        let text = String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
        if !out.status.success() {
            return Err(CompilerError::Failed { status: out.status.to_string(), output: text });
        }
        let stem = model.file_stem().and_then(|s| s.to_str()).unwrap_or("model");
        let compiled = out_dir.join(format!("{stem}_edgetpu.tflite"));
        let log = out_dir.join(format!("{stem}_edgetpu.log"));
        let log = log.is_file().then_some(log);
        let bytes = std::fs::read(&compiled).map_err(|e| CompilerError::BadOutput { path: compiled.display().to_string(), why: e.to_string() })?;
        let edgetpu_subgraphs = count_custom_ops(&bytes).map_err(|why| CompilerError::BadOutput { path: compiled.display().to_string(), why })?;
        // The table is on stdout with -s; older versions put it only in the log.
        let mut report = parse_report(&text);
        if report.summary.is_empty() {
            if let Some(l) = &log {
                if let Ok(s) = std::fs::read_to_string(l) {
                    let from_log = parse_report(&s);
                    if !from_log.summary.is_empty() {
                        report.summary = from_log.summary;
                        report.tpu_ops = from_log.tpu_ops;
                        report.cpu_ops = from_log.cpu_ops;
                    }
                }
            }
        }
        if let Some(v) = parse_version(&text) {
            report.source = ReportSource::EdgetpuCompiler { version: v };
        }
        if edgetpu_subgraphs == 0 {
            report.notes.push("the compiled model contains no edgetpu-custom-op: nothing runs on the Edge TPU".into());
        }
        Ok(CompileOutput { model: compiled, log, output: text, report, edgetpu_subgraphs })
    }
}

fn is_executable(p: &Path) -> bool {
    let Ok(m) = std::fs::metadata(p) else { return false };
    if !m.is_file() {
        return false;
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        m.permissions().mode() & 0o111 != 0
    }
    #[cfg(not(unix))]
    {
        true
    }
}

/// The version in "Edge TPU Compiler version 16.0.384591198".
pub fn parse_version(text: &str) -> Option<String> {
    text.lines().find_map(|l| l.trim().strip_prefix("Edge TPU Compiler version ").map(|v| v.trim().to_string()))
}

/// Parses the compiler's printed summary (counts and operation table) into a report.
///
/// Per-op entries are unknown (the compiler prints counts per op kind and status), so `ops` is empty.
pub fn parse_report(text: &str) -> MappingReport {
    let mut summary = Vec::new();
    let mut notes = Vec::new();
    let (mut tpu, mut cpu) = (None, None);
    let mut in_table = false;
    for line in text.lines() {
        let l = line.trim();
        if let Some(n) = l.strip_prefix("Number of operations that will run on Edge TPU:") {
            tpu = n.trim().parse::<usize>().ok();
        } else if let Some(n) = l.strip_prefix("Number of operations that will run on CPU:") {
            cpu = n.trim().parse::<usize>().ok();
        } else if l.starts_with("Operator") && l.contains("Count") && l.contains("Status") {
            in_table = true;
        } else if in_table && !l.is_empty() {
            let mut parts = l.split_whitespace();
            let (Some(op), Some(count)) = (parts.next(), parts.next()) else { continue };
            let Ok(count) = count.parse::<usize>() else {
                in_table = false;
                continue;
            };
            let st: String = parts.collect::<Vec<_>>().join(" ");
            let placement = if st == status::MAPPED { Placement::Tpu } else { Placement::Cpu };
            summary.push(OpSummary { op: op.to_string(), count, placement, status: st });
        } else if l.starts_with("Model successfully compiled but not all operations") {
            notes.push("not all operations are supported by the Edge TPU: part of the model runs on the CPU".into());
        } else if l.starts_with("Number of Edge TPU subgraphs:") || l.starts_with("On-chip memory") || l.starts_with("Off-chip memory") {
            notes.push(l.to_string());
        }
    }
    let sum_tpu: usize = summary.iter().filter(|s| s.placement == Placement::Tpu).map(|s| s.count).sum();
    let sum_cpu: usize = summary.iter().filter(|s| s.placement == Placement::Cpu).map(|s| s.count).sum();
    MappingReport {
        source: ReportSource::EdgetpuCompiler { version: parse_version(text).unwrap_or_else(|| "unknown".into()) },
        ops: Vec::<OpMapping>::new(),
        summary,
        tpu_ops: tpu.unwrap_or(sum_tpu),
        cpu_ops: cpu.unwrap_or(sum_cpu),
        notes,
    }
}

/// Counts `edgetpu-custom-op` operators in a compiled model.
pub fn count_custom_ops(bytes: &[u8]) -> Result<usize, String> {
    let m = schema::parse_model(bytes).map_err(|e| e.to_string())?;
    let codes = m.operator_codes();
    let mut n = 0;
    for sg in m.subgraphs().into_iter().flatten() {
        for op in sg.operators().into_iter().flatten() {
            if schema::get(codes, op.opcode_index() as usize).and_then(|c| c.custom_code()) == Some("edgetpu-custom-op") {
                n += 1;
            }
        }
    }
    Ok(n)
}
