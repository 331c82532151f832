//! The ONNX backend node suite through the cloud-tpu target on the real XLA CPU plugin: every case that the CPU
//! runtime passes (`conformance/expected_pass.txt`) is lowered to StableHLO, compiled and run by XLA, and its
//! outputs are compared with the CPU runtime's (1e-4 relative; integers and booleans exactly).
//!
//! Prints lowered / not lowered / mismatching counts per op. Cases that the target runs and matches are listed
//! in `conformance/expected_pass_cloud_tpu.txt`; a listed case that fails is a test failure, as is any panic
//! (`TPU_SDK_UPDATE_EXPECTED=1` rewrites the list). Needs `conformance/cases` (see `conformance/generate.py`)
//! and the plugin (`$TPU_SDK_PJRT_CPU_PLUGIN` or `$TPU_SDK_PYTHON`'s `fastatomstruct-xla-cpu`); without them it
//! says so and passes, unless `TPU_SDK_REQUIRE_CONFORMANCE=1` / `TPU_SDK_REQUIRE_ORACLES=1`. The runner is
//! `tpu_sdk_test_support::conformance`, shared with the CPU target.

mod common;

use tpu_sdk_cloud_tpu::CloudTpuTarget;
use tpu_sdk_core::ir::{DType, Graph, Tensor};
use tpu_sdk_core::passes;
use tpu_sdk_test_support::conformance::{read_list, Outcome, Reference, Retry, RunOptions, Suite};
use tpu_sdk_test_support::{repo, Tolerance};

/// Which small inputs a retry makes constants: attempt 1 the integer ones, 2 any but the first input too,
/// 3 all of them.
const ATTEMPTS: usize = 3;

/// The suite passes shape operands (axes, target shapes, pads, k, Resize scales, OneHot depth, Range bounds) as
/// graph inputs; a TPU program needs them static. Such small inputs are made constants of the case's values (as
/// they are in real models): first the integer ones, then any but the first input, then all.
fn make_shape_inputs_constant(attempt: usize, g: &mut Graph, inputs: &mut Vec<Tensor>) -> Result<(), String> {
    let mut keep = Vec::new();
    let ids = g.inputs.clone();
    for (k, (id, t)) in ids.into_iter().zip(std::mem::take(inputs)).enumerate() {
        let small = t.shape.iter().product::<usize>() <= 16;
        let int = matches!(t.dtype(), DType::I64 | DType::I32);
        let make_constant = small
            && match attempt {
                1 => int,
                2 => int || k > 0,
                _ => true,
            };
        if make_constant {
            g.value_mut(id).constant = Some(t);
            g.inputs.retain(|&i| i != id);
        } else {
            keep.push(t);
        }
    }
    *inputs = keep;
    passes::optimize(g).map_err(|e| format!("optimize: {e}"))
}

/// Ops or dtypes the lowering does not cover are reported, not failures.
fn not_lowered(m: &str) -> bool {
    m.to_ascii_lowercase().contains("unsupported") || m.contains("not supported") || m.contains("cannot lower")
}

/// A shape operand given at run time: worth a retry with it made constant.
fn needs_constant(m: &str) -> bool {
    m.contains("run-time values") || m.contains("must be a constant")
}

#[test]
fn onnx_node_suite_on_the_xla_cpu_plugin_equals_the_cpu_runtime() {
    let Some(suite) = Suite::from_env() else { return };
    let Some(plugin) = common::cpu_plugin() else { return };
    let target = CloudTpuTarget::with_plugin(&plugin);
    let cpu_passes = read_list(&repo().join("conformance/expected_pass.txt"));
    let opts = RunOptions {
        target: &target,
        reference: Reference::CpuRuntime,
        tolerance: Tolerance::CPU_RUNTIME,
        not_run: not_lowered,
        retry: Some(Retry { when: needs_constant, attempts: ATTEMPTS, change: &make_shape_inputs_constant }),
    };
    let report = suite.run(&cpu_passes, &opts);
    report.print_per_op(true);
    let matched_after = |attempts: std::ops::RangeInclusive<usize>| -> Vec<&String> {
        report.cases.iter().filter(|(_, (o, a, _))| *o == Outcome::Pass && attempts.contains(a)).map(|(n, _)| n).collect()
    };
    let (not_lowered, failed) = (report.not_run(), report.failed());
    println!(
        "cloud-tpu on the XLA CPU plugin: {} cases equal the CPU runtime ({} with their shape inputs made constants), {} not lowered, {} failed, of {} the CPU runtime passes",
        report.passed().len(),
        matched_after(1..=ATTEMPTS).len(),
        not_lowered.len(),
        failed.len(),
        cpu_passes.len()
    );
    // Every input constant: the graph folds away, nothing of the op is lowered; say so.
    println!("matched only with every input constant (folded, not lowered): {:?}", matched_after(ATTEMPTS..=ATTEMPTS));
    if suite.verbose {
        for (n, m) in &not_lowered {
            println!("NOT LOWERED {n}: {}", m.lines().next().unwrap_or(""));
        }
    }
    for (n, m) in failed.iter().take(40) {
        println!("FAILED {n}: {}", m.lines().next().unwrap_or(""));
    }
    let header = "# ONNX node-suite cases the cloud-tpu target runs on the XLA CPU plugin equal to the CPU runtime\n";
    report.check(&repo().join("conformance/expected_pass_cloud_tpu.txt"), header, &suite.filter);
}
