//! The ONNX backend node suite (`conformance/generate.py` writes `conformance/cases/<case>/{model.onnx,
//! input_<i>.npy,output_<i>.npy,op.txt}`) run on any [`Target`]: one runner for every target, each with its own
//! expected-pass list (`conformance/expected_pass*.txt`).
//!
//! Each case is imported, optimised with the passes, prepared by the target and run; its outputs are compared
//! with a [`Reference`] within a [`Tolerance`]. A target may say that it does not cover a case (a compile
//! error its [`RunOptions::not_run`] recognises) and may retry a case changed by a hook
//! ([`RunOptions::retry`]). [`Report::check`] fails on any panic and on every listed case that no longer passes.

use std::collections::{BTreeMap, BTreeSet};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};

use tpu_sdk_core::import::onnx::{load, ImportOptions};
use tpu_sdk_core::ir::{Graph, Tensor};
use tpu_sdk_core::runtime::Session;
use tpu_sdk_core::target::Target;
use tpu_sdk_core::{npy, passes};

use crate::compare::{allclose, Tolerance};

/// The suite's cases on this machine, and which of them this run takes.
pub struct Suite {
    /// The cases folder (`$TPU_SDK_CONFORMANCE_CASES`, else `conformance/cases`).
    pub dir: PathBuf,
    /// Only cases whose name contains this (`$TPU_SDK_CONFORMANCE_FILTER`).
    pub filter: String,
    /// Print every failure as it happens (`$TPU_SDK_CONFORMANCE_VERBOSE`).
    pub verbose: bool,
}

/// One case's inputs and expected outputs, read from its `.npy` files.
pub struct Case {
    /// The imported and optimised model.
    pub graph: Graph,
    /// `input_<i>.npy`, in order.
    pub inputs: Vec<Tensor>,
    /// `output_<i>.npy`, in order (onnx's reference implementation computed them).
    pub outputs: Vec<Tensor>,
}

/// What a case's outputs are compared with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reference {
    /// The case's `output_<i>.npy` (the model may produce fewer outputs, never more).
    ExpectedOutputs,
    /// The CPU runtime's outputs on the case (as many as the target's).
    CpuRuntime,
}

/// A retry of a case the target does not cover as it is: `change` (called with the attempt, 1, 2, ...)
/// alters the optimised graph and its inputs before the target prepares it.
pub struct Retry<'a> {
    /// Whether a "not run" message calls for the next attempt.
    pub when: fn(&str) -> bool,
    /// How many retries there are.
    pub attempts: usize,
    /// Changes the graph and the inputs for an attempt.
    pub change: &'a (dyn Fn(usize, &mut Graph, &mut Vec<Tensor>) -> Result<(), String> + Sync),
}

/// How the cases are run.
pub struct RunOptions<'a> {
    /// The target under test.
    pub target: &'a dyn Target,
    /// What its outputs are compared with.
    pub reference: Reference,
    /// How close they must be.
    pub tolerance: Tolerance,
    /// Which preparation errors mean "the target does not cover this case" (reported, not failures).
    pub not_run: fn(&str) -> bool,
    /// Retries of cases not run.
    pub retry: Option<Retry<'a>>,
}

/// What became of a case.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Its outputs equal the reference.
    Pass,
    /// The target does not cover it (the message says why).
    NotRun(String),
    /// It failed (the message says where and how).
    Fail(String),
    /// It panicked: always a bug.
    Panic,
}

/// Every case's outcome, the attempt that gave it (0: the case as it is) and the op(s) it exercises.
#[derive(Default)]
pub struct Report {
    /// Case name -> (outcome, attempt, op).
    pub cases: BTreeMap<String, (Outcome, usize, String)>,
}

impl Suite {
    /// The suite from the environment; `None` (after a note) when the cases folder is absent, a failure
    /// instead when `TPU_SDK_REQUIRE_CONFORMANCE=1` (set by CI).
    pub fn from_env() -> Option<Suite> {
        let dir = std::env::var_os("TPU_SDK_CONFORMANCE_CASES").map(PathBuf::from).unwrap_or_else(|| crate::repo().join("conformance/cases"));
        if !dir.is_dir() {
            let required = std::env::var("TPU_SDK_REQUIRE_CONFORMANCE").is_ok_and(|v| v == "1");
            assert!(!required, "TPU_SDK_REQUIRE_CONFORMANCE=1 but {} does not exist", dir.display());
            eprintln!("note: {} is absent; run `python conformance/generate.py conformance/cases` to get the ONNX node suite", dir.display());
            return None;
        }
        let filter = std::env::var("TPU_SDK_CONFORMANCE_FILTER").unwrap_or_default();
        Some(Suite { dir, filter, verbose: std::env::var_os("TPU_SDK_CONFORMANCE_VERBOSE").is_some() })
    }

    /// The names of every case in the folder (those with a `model.onnx`), sorted, unfiltered.
    pub fn all_cases(&self) -> Vec<String> {
        let entries = std::fs::read_dir(&self.dir).unwrap_or_else(|e| panic!("{}: {e}", self.dir.display()));
        let mut names: Vec<String> =
            entries.flatten().filter(|e| e.path().join("model.onnx").exists()).map(|e| e.file_name().to_string_lossy().to_string()).collect();
        names.sort();
        names
    }

    /// Runs the cases `names` that match the filter and exist, on rayon's threads (the cases are independent; the
    /// suite on a PJRT plugin compiles one program per case, which takes one core).
    pub fn run<'n>(&self, names: impl IntoIterator<Item = &'n String>, opts: &RunOptions) -> Report {
        use rayon::prelude::*;
        let names: Vec<&String> =
            names.into_iter().filter(|n| n.contains(&self.filter) && self.dir.join(n.as_str()).join("model.onnx").exists()).collect();
        let results: Vec<(String, (Outcome, usize, String))> = names.par_iter().map(|name| (name.to_string(), self.run_one(name, opts))).collect();
        let mut report = Report::default();
        report.cases.extend(results);
        report
    }

    /// One case, with its retries: (outcome, attempts made, op).
    fn run_one(&self, name: &str, opts: &RunOptions) -> (Outcome, usize, String) {
        let dir = self.dir.join(name);
        let mut attempt = 0;
        let mut outcome = run_guarded(&dir, opts, 0);
        if let Some(retry) = &opts.retry {
            while attempt < retry.attempts && matches!(&outcome, Outcome::NotRun(m) if (retry.when)(m)) {
                attempt += 1;
                outcome = run_guarded(&dir, opts, attempt);
            }
        }
        if self.verbose {
            if let Outcome::Fail(m) | Outcome::NotRun(m) = &outcome {
                eprintln!("{name}: {m}");
            }
        }
        (outcome, attempt, op_of(&dir, name))
    }
}

fn run_guarded(dir: &Path, opts: &RunOptions, attempt: usize) -> Outcome {
    match catch_unwind(AssertUnwindSafe(|| run_case(dir, opts, attempt))) {
        Ok(Ok(o)) => o,
        Ok(Err(m)) => Outcome::Fail(m),
        Err(_) => Outcome::Panic,
    }
}

/// Reads the case in `dir`: its model imported and optimised, its inputs and expected outputs. `Err` for a
/// case `conformance/generate.py` could not store (`unrepresentable.txt`: its data is not what `.npy` holds, or
/// its graph takes or gives a sequence) or that does not load.
pub fn load_case(dir: &Path) -> Result<Case, String> {
    if let Ok(why) = std::fs::read_to_string(dir.join("unrepresentable.txt")) {
        return Err(format!("not run: {}", why.trim()));
    }
    let mut graph = load(&dir.join("model.onnx"), &ImportOptions::default()).map_err(|e| format!("import: {e}"))?;
    passes::optimize(&mut graph).map_err(|e| format!("optimize: {e}"))?;
    let read_all = |prefix: &str| -> Result<Vec<Tensor>, String> {
        let mut ts = Vec::new();
        for i in 0.. {
            let p = dir.join(format!("{prefix}_{i}.npy"));
            if !p.exists() {
                break;
            }
            ts.push(npy::read(&p).map_err(|e| format!("reading {}: {e}", p.display()))?);
        }
        Ok(ts)
    };
    Ok(Case { graph, inputs: read_all("input")?, outputs: read_all("output")? })
}

fn run_case(dir: &Path, opts: &RunOptions, attempt: usize) -> Result<Outcome, String> {
    let Case { mut graph, mut inputs, outputs } = load_case(dir)?;
    let want = match opts.reference {
        Reference::ExpectedOutputs => outputs,
        Reference::CpuRuntime => Session::new(graph.clone()).and_then(|mut s| s.run(&inputs)).map_err(|e| format!("cpu runtime: {e}"))?,
    };
    if attempt > 0 {
        let retry = opts.retry.as_ref().expect("attempts only with a retry");
        (retry.change)(attempt, &mut graph, &mut inputs)?;
    }
    let mut exe = match opts.target.prepare(graph) {
        Ok(e) => e,
        Err(e) => {
            let m = e.to_string();
            return Ok(if (opts.not_run)(&m) { Outcome::NotRun(m) } else { Outcome::Fail(format!("prepare: {m}")) });
        }
    };
    let got = exe.run(&inputs).map_err(|e| format!("run: {e}"))?;
    match opts.reference {
        Reference::ExpectedOutputs if got.len() > want.len() => {
            return Err(format!("the model produced {} outputs, the case has fewer", got.len()));
        }
        Reference::CpuRuntime if got.len() != want.len() => return Err(format!("{} outputs instead of {}", got.len(), want.len())),
        _ => {}
    }
    for (k, (a, b)) in got.iter().zip(&want).enumerate() {
        allclose(a, b, &opts.tolerance).map_err(|e| format!("output {k}: {e}"))?;
    }
    Ok(Outcome::Pass)
}

/// The op(s) a case exercises: the node op types that generate.py wrote to `op.txt`, else the first word of
/// the case name (`test_conv_with_strides_padding` → `conv`); `(expanded) <op>` for the function-expanded cases.
pub fn op_of(dir: &Path, case: &str) -> String {
    let first_word = || case.trim_start_matches("test_").split('_').next().unwrap_or(case).to_string();
    if case.contains("_expanded") {
        return format!("(expanded) {}", first_word());
    }
    match std::fs::read_to_string(dir.join("op.txt")) {
        Ok(s) if !s.trim().is_empty() => s.trim().to_string(),
        _ => first_word(),
    }
}

/// A case list file: one name a line, `#` comments and blank lines skipped.
pub fn read_list(path: &Path) -> BTreeSet<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| l.trim().to_string())
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect()
}

impl Report {
    /// The cases that passed.
    pub fn passed(&self) -> BTreeSet<String> {
        self.cases.iter().filter(|(_, (o, ..))| *o == Outcome::Pass).map(|(n, _)| n.clone()).collect()
    }

    /// The cases whose outcome matches `f`, with their messages.
    pub fn with(&self, f: fn(&Outcome) -> Option<&String>) -> Vec<(&String, &String)> {
        self.cases.iter().filter_map(|(n, (o, ..))| f(o).map(|m| (n, m))).collect()
    }

    /// The failed cases with their messages.
    pub fn failed(&self) -> Vec<(&String, &String)> {
        self.with(|o| if let Outcome::Fail(m) = o { Some(m) } else { None })
    }

    /// The cases the target does not cover, with its messages.
    pub fn not_run(&self) -> Vec<(&String, &String)> {
        self.with(|o| if let Outcome::NotRun(m) = o { Some(m) } else { None })
    }

    /// Prints passed / not run / failed counts per op; with `only_incomplete`, only the ops with a case that
    /// did not pass.
    pub fn print_per_op(&self, only_incomplete: bool) {
        let mut per_op: BTreeMap<&str, [usize; 3]> = BTreeMap::new();
        for (o, _, op) in self.cases.values() {
            let col = match o {
                Outcome::Pass => 0,
                Outcome::NotRun(_) => 1,
                Outcome::Fail(_) | Outcome::Panic => 2,
            };
            per_op.entry(op).or_default()[col] += 1;
        }
        println!("{:<40} {:>6} {:>7} {:>6}", "op", "passed", "not run", "failed");
        for (op, [p, n, f]) in &per_op {
            if !only_incomplete || n + f > 0 {
                println!("{op:<40} {p:>6} {n:>7} {f:>6}");
            }
        }
    }

    /// Writes `name: message` for every failed case to `path` (for reading after a run).
    pub fn write_failures(&self, path: &Path) {
        let text: String = self.failed().iter().map(|(n, m)| format!("{n}: {m}\n")).collect();
        let _ = std::fs::write(path, text);
    }

    /// Asserts that no case panicked and that every case of the list `list` (those matching `filter`) passed.
    /// With `TPU_SDK_UPDATE_EXPECTED=1` and no filter, first rewrites the list from this run (`header`: comment
    /// lines put above the names). Prints how many passes the list lacks.
    pub fn check(&self, list: &Path, header: &str, filter: &str) {
        let passed = self.passed();
        let file = list.file_name().unwrap_or_default().to_string_lossy();
        if std::env::var("TPU_SDK_UPDATE_EXPECTED").is_ok_and(|v| v == "1") && filter.is_empty() {
            let body: String = passed.iter().map(|n| format!("{n}\n")).collect();
            std::fs::write(list, format!("{header}{body}")).unwrap_or_else(|e| panic!("write {}: {e}", list.display()));
            println!("wrote {} passes to {}", passed.len(), list.display());
        }
        let expected: BTreeSet<String> = read_list(list).into_iter().filter(|n| n.contains(filter)).collect();
        let new = passed.iter().filter(|n| !expected.contains(*n)).count();
        if new > 0 {
            println!("{new} cases pass that are not in {file}; TPU_SDK_UPDATE_EXPECTED=1 records them");
        }
        let panics: Vec<&String> = self.cases.iter().filter(|(_, (o, ..))| *o == Outcome::Panic).map(|(n, _)| n).collect();
        assert!(panics.is_empty(), "cases that panicked (a panic is always a bug): {panics:?}");
        let regressed: Vec<String> = expected
            .iter()
            .filter(|n| !passed.contains(*n))
            .map(|n| {
                let why = match self.cases.get(n) {
                    Some((Outcome::Fail(m) | Outcome::NotRun(m), ..)) => m.as_str(),
                    _ => "missing case",
                };
                format!("{n}: {why}")
            })
            .collect();
        assert!(regressed.is_empty(), "{} regressions against {file}:\n{}", regressed.len(), regressed.join("\n"));
    }
}
