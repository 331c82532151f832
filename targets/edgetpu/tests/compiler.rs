//! The edgetpu_compiler driver against fake compilers that print what the real one prints.

#![cfg(unix)]

mod common;

use common::{compiler_log, fake_compiler};
use tpu_sdk_edgetpu::compiler::{parse_report, CompileOptions, CompilerError, EdgeTpuCompiler};
use tpu_sdk_edgetpu::{Placement, ReportSource};

/// What the compiler prints (and writes to its log) for the test model.
fn log() -> String {
    compiler_log(
        "Edge TPU Compiler version 16.0.384591198
Started a compilation timeout timer of 180 seconds.

Model compiled successfully in 1354 ms.

Input model: MODEL.tflite
Input size: 5.10MiB
Output model: OUT/MODEL_edgetpu.tflite
Output size: 6.28MiB
On-chip memory used for caching model parameters: 6.03MiB
On-chip memory remaining for caching model parameters: 1.21MiB
Off-chip memory used for streaming uncached model parameters: 0.00B
Number of Edge TPU subgraphs: 1
Total number of operations: 143
Operation log: OUT/MODEL_edgetpu.log

Model successfully compiled but not all operations are supported by the Edge TPU. A percentage of the model will instead run on the CPU, which is slower. If possible, consider updating your model to use only operations supported by the Edge TPU. For details, visit g.co/coral/model-reqs.
Number of operations that will run on Edge TPU: 139
Number of operations that will run on CPU: 4
",
        &[
            ("CONV_2D", 32, "Mapped to Edge TPU"),
            ("DEPTHWISE_CONV_2D", 80, "Mapped to Edge TPU"),
            ("ADD", 27, "Mapped to Edge TPU"),
            ("LOGISTIC", 1, "Operation is otherwise supported, but not mapped due to some unspecified limitation"),
            ("CONCATENATION", 1, "More than one subgraph is not supported"),
            ("DEQUANTIZE", 2, "Operation is working on an unsupported data type"),
        ],
    )
}

#[test]
fn runs_the_compiler_and_parses_its_report() {
    let dir = tempfile::tempdir().unwrap();
    let compiler = EdgeTpuCompiler::at(fake_compiler(dir.path(), &log(), &log(), 0)).unwrap();
    assert_eq!(compiler.version().unwrap(), "16.0.384591198");
    let model = dir.path().join("mobilenet.tflite");
    std::fs::write(&model, b"input model bytes").unwrap();
    let out_dir = dir.path().join("out");
    let opts = CompileOptions { min_runtime_version: Some(13), ..Default::default() };
    let out = compiler.compile(&model, &out_dir, &opts).unwrap();
    assert_eq!(out.model, out_dir.join("mobilenet_edgetpu.tflite"));
    assert!(out.model.is_file());
    assert_eq!(out.log.as_deref(), Some(out_dir.join("mobilenet_edgetpu.log").as_path()));
    assert_eq!(out.edgetpu_subgraphs, 1);
    assert_eq!(std::fs::read_to_string(dir.path().join("args.txt")).unwrap().trim(), "-m 13");

    let r = &out.report;
    assert_eq!(r.source, ReportSource::EdgetpuCompiler { version: "16.0.384591198".into() });
    assert_eq!((r.tpu_ops, r.cpu_ops), (139, 4));
    let rows: Vec<(&str, usize, Placement)> = r.summary.iter().map(|s| (s.op.as_str(), s.count, s.placement)).collect();
    assert_eq!(
        rows,
        [
            ("CONV_2D", 32, Placement::Tpu),
            ("DEPTHWISE_CONV_2D", 80, Placement::Tpu),
            ("ADD", 27, Placement::Tpu),
            ("LOGISTIC", 1, Placement::Cpu),
            ("CONCATENATION", 1, Placement::Cpu),
            ("DEQUANTIZE", 2, Placement::Cpu),
        ]
    );
    assert_eq!(r.summary[5].status, "Operation is working on an unsupported data type");
    let text = r.to_text();
    assert!(text.contains("edgetpu_compiler 16.0.384591198") && text.contains("DEQUANTIZE") && text.contains("Number of operations that will run on CPU: 4"), "{text}");
    assert!(r.notes.iter().any(|n| n.contains("Number of Edge TPU subgraphs: 1")));
}

#[test]
fn reads_the_table_from_the_log_when_stdout_lacks_it() {
    let dir = tempfile::tempdir().unwrap();
    // Older compilers print "See the operation log file..." and keep the table in the log only.
    let short = log().split("Operator   ").next().unwrap().to_string() + "See the operation log file for individual operation details.\n";
    let compiler = EdgeTpuCompiler::at(fake_compiler(dir.path(), &short, &log(), 0)).unwrap();
    let model = dir.path().join("m.tflite");
    std::fs::write(&model, b"x").unwrap();
    let out = compiler.compile(&model, &dir.path().join("o"), &CompileOptions::default()).unwrap();
    assert_eq!(out.report.summary.len(), 6);
    assert_eq!((out.report.tpu_ops, out.report.cpu_ops), (139, 4));
    assert_eq!(parse_report(&short).summary.len(), 0);
}

#[test]
fn a_failing_compiler_reports_its_output() {
    let dir = tempfile::tempdir().unwrap();
    let compiler = EdgeTpuCompiler::at(fake_compiler(dir.path(), "Edge TPU Compiler version 16.0.384591198\nERROR: Didn't find op for builtin opcode 'FULLY_CONNECTED' version '12'\n", "", 1)).unwrap();
    let model = dir.path().join("m.tflite");
    std::fs::write(&model, b"x").unwrap();
    let e = compiler.compile(&model, &dir.path().join("o"), &CompileOptions::default()).unwrap_err();
    assert!(matches!(e, CompilerError::Failed { .. }));
    let msg = e.to_string();
    assert!(msg.contains("Didn't find op for builtin opcode") && msg.contains("Internal compiler error"), "{msg}");
}

#[test]
fn a_missing_compiler_explains_how_to_install_it() {
    let dir = tempfile::tempdir().unwrap();
    let e = EdgeTpuCompiler::at(dir.path().join("nope")).unwrap_err().to_string();
    assert!(e.contains("apt-get install edgetpu-compiler") && e.contains("coral-edgetpu-stable") && e.contains("x86-64"), "{e}");
    // A non-executable file is not a compiler.
    let f = dir.path().join("edgetpu_compiler");
    std::fs::write(&f, "#!/bin/sh\n").unwrap();
    assert!(matches!(EdgeTpuCompiler::at(&f), Err(CompilerError::NotFound { .. })));
}
