//! The ONNX backend node test suite, run through the importer, the optimisation passes and the CPU runtime.
//!
//! Cases are regenerated from the `onnx` Python package by `conformance/generate.py` into
//! `conformance/cases/<case>/{model.onnx,input_<i>.npy,output_<i>.npy}` (or the folder in
//! `TPU_SDK_CONFORMANCE_CASES`). Expected outputs come from onnx's own reference implementation, compared with
//! its backend tolerances (rtol 1e-3, atol 1e-7).
//!
//! Prints passed/failed per op. Fails when a case listed in `conformance/expected_pass.txt` no longer
//! passes, or when any case panics. With `TPU_SDK_UPDATE_EXPECTED=1` it rewrites the list from this run.
//! Without the cases folder it says so and passes, unless `TPU_SDK_REQUIRE_CONFORMANCE=1` (set by CI).
//! The runner is `tpu_sdk_test_support::conformance`, shared with the other targets.

use tpu_sdk_core::runtime::CpuTarget;
use tpu_sdk_test_support::conformance::{Reference, RunOptions, Suite};
use tpu_sdk_test_support::{repo, Tolerance};

#[test]
fn onnx_backend_node_suite() {
    let Some(suite) = Suite::from_env() else { return };
    let cases = suite.all_cases();
    let opts = RunOptions {
        target: &CpuTarget,
        reference: Reference::ExpectedOutputs,
        tolerance: Tolerance::ONNX_BACKEND,
        not_run: |_| false,
        retry: None,
    };
    let report = suite.run(&cases, &opts);
    report.print_per_op(false);
    let passed = report.passed();
    let non_expanded = |n: &&String| !n.contains("_expanded");
    println!(
        "passed {} of {} cases ({} of {} non-expanded)",
        passed.len(),
        cases.len(),
        passed.iter().filter(non_expanded).count(),
        cases.iter().filter(non_expanded).count()
    );
    report.write_failures(&repo().join("conformance/last_failures.txt"));
    report.check(&repo().join("conformance/expected_pass.txt"), "", &suite.filter);
}
