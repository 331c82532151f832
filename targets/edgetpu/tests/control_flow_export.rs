//! Control flow in the float TFLite export: the IR's `If` becomes TFLite `IF` and `Loop` becomes `WHILE`, their
//! regions further subgraphs of the file. Models from `scripts/make_control_flow_models.py` (onnx.helper): a
//! nested If with captures two scopes up, a while loop, a loop with a constant trip count, and a Loop whose trip
//! count is an input with an If in its body, a Loop whose carried values trade places (a WHILE body output that is
//! another slot's input: LiteRT copies outputs to inputs one by one) then an If with a constant branch; and torch.onnx's export of a TorchScript loop and if
//! (`cli/tests/data/torchscript_loop_if.onnx`). Each is exported and run by LiteRT's builtin kernels (reference
//! and optimized resolvers) against onnxruntime on several random inputs (so conditions go both ways); the
//! exported file read back by our own TFLite importer runs equal to onnxruntime too; the Edge TPU rules report
//! IF/WHILE as control flow that runs on the CPU; a Scan of static length (the opset-8 batched form too) and a Loop
//! with scan outputs and a trip count known before running export unrolled (LiteRT equal to onnxruntime and to
//! the node suite's outputs; in int8, plain dataflow equal to LiteRT); a Loop with scan outputs that cannot unroll
//! (a condition that may stop it early, too many iterations) is refused with the reason. Python lists built in
//! loops (sequences a Loop appends to, imported as its scan outputs) export the same way, float and int8. In int8 the control flow
//! stays float between DEQUANTIZE and QUANTIZE, and our int8 runtime equals LiteRT exactly.
//! Needs `$TPU_SDK_PYTHON`; without it the tests say so and pass, unless `TPU_SDK_REQUIRE_ORACLES=1`.

mod int8_support;

use std::path::{Path, PathBuf};

use tpu_sdk_core::import::onnx::{load, ImportOptions};
use tpu_sdk_core::ir::{DType, Graph, Tensor};
use tpu_sdk_core::runtime::Session;
use tpu_sdk_edgetpu::export::{export, ExportOptions, Exported};
use tpu_sdk_edgetpu::report::Placement;
use tpu_sdk_edgetpu::rules::{analyze_bytes, RulesOptions};
use tpu_sdk_test_support::{fresh_dir, litert, onnxruntime, oracle, random_inputs, relative_to_mean};

/// The models, written into a folder of the test's own (`name`).
fn models(py: &Path, name: &str) -> PathBuf {
    let dir = fresh_dir(name);
    oracle::run_script(py, "scripts/make_control_flow_models.py", &[&dir]);
    dir
}

fn loaded(path: &Path) -> Graph {
    loaded_opts(path, &ImportOptions::default())
}

/// A model loaded with its symbolic `batch` dim bound to 3.
fn loaded_with_batch(path: &Path) -> Graph {
    loaded_opts(path, &ImportOptions { dims: [("batch".to_string(), 3)].into(), ..Default::default() })
}

fn loaded_opts(path: &Path, opts: &ImportOptions) -> Graph {
    let mut g = load(path, opts).unwrap();
    tpu_sdk_core::passes::optimize(&mut g).unwrap();
    g
}

/// The TFLite op names of subgraph `sg` of a model, in order, and the number of subgraphs.
fn ops_of(bytes: &[u8], sg: usize) -> (Vec<String>, usize) {
    use tpu_sdk_core::format::tflite::schema;
    let m = schema::parse_model(bytes).unwrap();
    let sgs = m.subgraphs().unwrap();
    let codes = m.operator_codes().unwrap();
    (sgs.get(sg).operators().unwrap().iter().map(|o| codes.get(o.opcode_index() as usize).name()).collect(), sgs.len())
}

fn compare(what: &str, ours: &[Tensor], theirs: &[Tensor]) -> f64 {
    assert_eq!(ours.len(), theirs.len(), "{what}: outputs");
    let mut worst = 0.0f64;
    for (k, (a, b)) in ours.iter().zip(theirs).enumerate() {
        assert_eq!(a.shape, b.shape, "{what}: output {k}");
        worst = worst.max(relative_to_mean(what, k, a, b, "onnxruntime", 1e-4).unwrap_or_else(|e| panic!("{e}")));
    }
    worst
}

/// `ex`, the export of `g` (loaded from `path`), run by LiteRT (reference and optimized kernels) on `seeds`
/// random inputs against onnxruntime on `path`; returns the worst relative error.
fn litert_like_onnxruntime(py: &Path, dir: &Path, name: &str, path: &Path, g: &Graph, ex: &Exported, seeds: u64) -> f64 {
    let mut worst = 0.0f64;
    for seed in 1..=seeds {
        let inputs = random_inputs(g, seed * 7);
        let named: Vec<(String, Tensor)> = g.inputs.iter().zip(&inputs).map(|(&i, t)| (g.value(i).name.clone(), t.clone())).collect();
        let ort = onnxruntime::run_model(py, path, &named, &dir.join(format!("{name}_{seed}")));
        let file_inputs: Vec<Tensor> = inputs.iter().zip(&ex.inputs).map(|(t, i)| t.permuted(&i.perm)).collect();
        for resolver in [litert::REFERENCE, litert::OPTIMIZED] {
            let lite = litert::run_bytes(py, &ex.bytes, resolver, std::slice::from_ref(&file_inputs)).unwrap_or_else(|e| panic!("{name}: LiteRT: {e}")).remove(0);
            worst = worst.max(compare(&format!("{name} seed {seed} LiteRT {resolver}"), &lite, &ort));
        }
    }
    worst
}

#[test]
fn if_and_loop_export_as_if_and_while_that_litert_runs_like_onnxruntime() {
    let Some(py) = oracle::python() else { return };
    let dir = models(&py, "cf_export_litert");
    // (model, the op the main subgraph must hold, subgraphs in the file)
    // (and torch.onnx's export of a TorchScript `for` over a run-time count followed by a data-dependent `if`)
    let torch = tpu_sdk_test_support::repo().join("cli/tests/data/torchscript_loop_if.onnx");
    for (name, op, subgraphs) in
        [("if_nested", "IF", 5), ("loop_while", "WHILE", 3), ("loop_plain", "WHILE", 3), ("loop_if", "WHILE", 5), ("loop_swap", "WHILE", 5), ("torchscript_loop_if", "WHILE", 5)]
    {
        let path = if name.starts_with("torchscript") { torch.clone() } else { dir.join(format!("{name}.onnx")) };
        let g = loaded(&path);
        let ex = export(&g, &ExportOptions::default()).unwrap_or_else(|e| panic!("{name}: export refused: {e}"));
        let (ops, n_sg) = ops_of(&ex.bytes, 0);
        assert!(ops.iter().any(|o| o == op) && n_sg == subgraphs, "{name}: main ops {ops:?}, {n_sg} subgraphs");
        // the file read back by our TFLite importer
        let back = tpu_sdk_core::import::tflite::load_bytes(&ex.bytes, &Default::default()).unwrap_or_else(|e| panic!("{name}: import of the export: {e}"));
        let mut back = Session::new(back).unwrap();
        let mut worst = [0.0f64; 3];
        for seed in 1..=6 {
            let inputs = random_inputs(&g, seed * 10);
            let inputs: Vec<Tensor> = inputs
                .into_iter()
                .map(|t| match t.as_f32() {
                    // a wider spread than [-1, 1): loop_if's If goes both ways and its loop stops early
                    Some(v) => Tensor::from_f32(t.shape.clone(), v.iter().map(|x| x * 4.0).collect()),
                    None => t,
                })
                .collect();
            let named: Vec<(String, Tensor)> = g.inputs.iter().zip(&inputs).map(|(&i, t)| (g.value(i).name.clone(), t.clone())).collect();
            let ort = onnxruntime::run_model(&py, &path, &named, &dir.join(format!("{name}_{seed}")));
            let file_inputs: Vec<Tensor> = inputs.iter().zip(&ex.inputs).map(|(t, i)| t.permuted(&i.perm)).collect();
            for (k, resolver) in [litert::REFERENCE, litert::OPTIMIZED].into_iter().enumerate() {
                let lite = litert::run_bytes(&py, &ex.bytes, resolver, std::slice::from_ref(&file_inputs)).unwrap_or_else(|e| panic!("{name}: LiteRT: {e}")).remove(0);
                worst[k] = worst[k].max(compare(&format!("{name} seed {seed} LiteRT {resolver}"), &lite, &ort));
            }
            let ours = back.run(&file_inputs).unwrap_or_else(|e| panic!("{name}: run of the import: {e}"));
            worst[2] = worst[2].max(compare(&format!("{name} seed {seed} re-imported"), &ours, &ort));
        }
        println!(
            "{name:<12} {n_sg} subgraphs; worst relative error vs onnxruntime: LiteRT reference {:.1e}, optimized {:.1e}, re-imported {:.1e}",
            worst[0], worst[1], worst[2]
        );
    }
}

#[test]
fn the_rules_report_control_flow_as_cpu_ops() {
    let Some(py) = oracle::python() else { return };
    let dir = models(&py, "cf_export_rules");
    for (name, op) in [("if_nested", "IF"), ("loop_if", "WHILE")] {
        let ex = export(&loaded(&dir.join(format!("{name}.onnx"))), &ExportOptions::default()).unwrap();
        let r = analyze_bytes(&ex.bytes, &RulesOptions::default()).unwrap();
        let m = r.ops.iter().find(|m| m.op == op).unwrap_or_else(|| panic!("{name}: no {op} in {:?}", r.ops));
        assert!(m.placement == Placement::Cpu && m.reason.contains("control flow, which the Edge TPU does not run"), "{name}: {m:?}");
    }
}

/// A Scan of static length has no TFLite form of its own (TFLite's WHILE cannot stack outputs in static shapes):
/// the export unrolls it (`quant::prepare`: one copy of the body per step, GATHER for the slices, CONCATENATION
/// for the stacked outputs), and LiteRT's kernels run the file like onnxruntime runs the Scan: `scan_axes`
/// (reversed input over axis 1, output stacked on axis 1 reversed) on random inputs, and the node suite's
/// `scan9_sum` / `scan_sum` (opset 9 and the opset-8 batched form, unrolled per batch row) on their
/// own inputs against their expected outputs.
#[test]
fn a_static_scan_exports_unrolled_and_litert_runs_it_like_onnxruntime() {
    let Some(py) = oracle::python() else { return };
    let dir = models(&py, "cf_export_scan");
    let path = dir.join("scan_axes.onnx");
    let g = loaded(&path);
    let ex = export(&g, &ExportOptions::default()).unwrap_or_else(|e| panic!("scan_axes: export refused: {e}"));
    let (ops, n_sg) = ops_of(&ex.bytes, 0);
    assert!(n_sg == 1 && !ops.iter().any(|o| o == "WHILE") && ops.iter().any(|o| o == "GATHER") && ops.iter().any(|o| o == "CONCATENATION"), "scan_axes: {ops:?}, {n_sg} subgraphs");
    let worst = litert_like_onnxruntime(&py, &dir, "scan_axes", &path, &g, &ex, 4);
    println!("scan_axes: {ops:?}, worst relative error vs onnxruntime {worst:.1e}");
    // the node suite's cases (onnx's reference outputs), when the suite is there
    let Some(suite) = tpu_sdk_test_support::conformance::Suite::from_env() else { return };
    for case in ["test_scan9_sum", "test_scan_sum"] {
        let c = tpu_sdk_test_support::conformance::load_case(&suite.dir.join(case)).unwrap_or_else(|e| panic!("{case}: {e}"));
        let ex = export(&c.graph, &ExportOptions::default()).unwrap_or_else(|e| panic!("{case}: export refused: {e}"));
        let file_inputs: Vec<Tensor> = c.inputs.iter().zip(&ex.inputs).map(|(t, i)| t.permuted(&i.perm)).collect();
        let lite = litert::run_bytes(&py, &ex.bytes, litert::REFERENCE, std::slice::from_ref(&file_inputs)).unwrap_or_else(|e| panic!("{case}: LiteRT: {e}")).remove(0);
        let worst = compare(&format!("{case} LiteRT"), &lite, &c.outputs);
        println!("{case}: {:?}; worst relative error vs onnx's expected outputs {worst:.1e}", ops_of(&ex.bytes, 0).0);
    }
}

/// A Loop with scan outputs and a trip count known before running (`loop_stack`: constant M, a constant true
/// condition the body passes through, two carried values, two scan outputs, one scaled by the iteration
/// number) and the opset-8 batched Scan (`scan8`, one unrolled scan per batch row) export unrolled into one
/// subgraph of plain ops, which LiteRT runs like onnxruntime runs the models. (`loop_symbolic`, a Loop whose scan
/// output is the carried value's shape, exports too once its batch dim is bound: that output folds to a
/// constant, which the file holds as int32, so it is not compared with onnxruntime's int64.)
#[test]
fn loops_with_scan_outputs_and_the_batched_scan_export_unrolled_like_onnxruntime() {
    let Some(py) = oracle::python() else { return };
    let dir = models(&py, "cf_export_unrolled");
    let symbolic = export(&loaded_with_batch(&dir.join("loop_symbolic.onnx")), &ExportOptions::default());
    assert!(symbolic.is_ok_and(|ex| ops_of(&ex.bytes, 0).1 == 1), "loop_symbolic: not exported unrolled");
    for name in ["loop_stack", "scan8"] {
        let path = dir.join(format!("{name}.onnx"));
        let g = loaded(&path);
        let ex = export(&g, &ExportOptions::default()).unwrap_or_else(|e| panic!("{name}: export refused: {e}"));
        let (ops, n_sg) = ops_of(&ex.bytes, 0);
        assert!(n_sg == 1 && !ops.iter().any(|o| o == "WHILE"), "{name}: {ops:?}, {n_sg} subgraphs");
        let worst = litert_like_onnxruntime(&py, &dir, name, &path, &g, &ex, 4);
        println!("{name:<13} {} ops ({} CONCATENATION); worst relative error vs onnxruntime {worst:.1e}", ops.len(), ops.iter().filter(|o| *o == "CONCATENATION").count());
    }
}

/// `ours` (a TFLite file's outputs) against onnxruntime's `theirs`, with the integer outputs the file holds as
/// int32 (TFLite's int64 outputs of folded shape arithmetic: a sequence's length) compared by value.
fn compare_file_outputs(what: &str, ours: &[Tensor], theirs: &[Tensor]) -> f64 {
    assert_eq!(ours.len(), theirs.len(), "{what}: outputs");
    let mut worst = 0.0f64;
    for (k, (a, b)) in ours.iter().zip(theirs).enumerate() {
        if a.dtype() == DType::I32 && b.dtype() == DType::I64 {
            assert!(a.shape == b.shape && a.to_i64_vec() == b.to_i64_vec(), "{what} output {k}: {a:?} vs onnxruntime {b:?}");
            continue;
        }
        worst = worst.max(compare(&format!("{what} output {k}"), std::slice::from_ref(a), std::slice::from_ref(b)));
    }
    worst
}

/// Python lists built in loops (`core/tests/data/sequence`: torch.onnx.export of TorchScript `for` loops that
/// append to lists or read a list made before the loop, and onnx.helper Loops appending to sequences, a
/// non-empty initial sequence and a second loop reading the first one's list included) import as Loops with
/// scan outputs; with a trip count known before running they export
/// unrolled, LiteRT runs the float file like onnxruntime runs the model, and in int8 (calibrated on random
/// samples) our runtime equals LiteRT exactly, its first output within a sanity bound of the float graph.
#[test]
fn list_loops_export_unrolled_like_onnxruntime_and_int8_equal_to_litert() {
    let Some(py) = oracle::python() else { return };
    let dir = fresh_dir("cf_export_list_loops");
    let data = tpu_sdk_test_support::repo().join("core/tests/data/sequence");
    for name in ["torch_loop_stack", "torch_loop_two_lists", "loop_initial", "loop_append_outer", "torch_list_loop", "loop_reads_loop"] {
        let path = data.join(format!("{name}.onnx"));
        // torch_loop_stack's trip count is x's symbolic dim 0 (and it reads out[1]): 3 rows
        let shapes = if name == "torch_loop_stack" { [("x".to_string(), vec![3, 4, 5])].into() } else { Default::default() };
        let g = loaded_opts(&path, &ImportOptions { input_shapes: shapes, ..Default::default() });
        let ex = export(&g, &ExportOptions::default()).unwrap_or_else(|e| panic!("{name}: export refused: {e}"));
        let (ops, n_sg) = ops_of(&ex.bytes, 0);
        assert!(n_sg == 1 && !ops.iter().any(|o| o == "WHILE"), "{name}: {ops:?}, {n_sg} subgraphs");
        let mut worst = 0.0f64;
        for seed in 1..=3u64 {
            let inputs = random_inputs(&g, seed * 7);
            let named: Vec<(String, Tensor)> = g.inputs.iter().zip(&inputs).map(|(&i, t)| (g.value(i).name.clone(), t.clone())).collect();
            let ort = onnxruntime::run_model(&py, &path, &named, &dir.join(format!("{name}_{seed}")));
            let file_inputs: Vec<Tensor> = inputs.iter().zip(&ex.inputs).map(|(t, i)| t.permuted(&i.perm)).collect();
            for resolver in [litert::REFERENCE, litert::OPTIMIZED] {
                let lite = litert::run_bytes(&py, &ex.bytes, resolver, std::slice::from_ref(&file_inputs)).unwrap_or_else(|e| panic!("{name}: LiteRT: {e}")).remove(0);
                worst = worst.max(compare_file_outputs(&format!("{name} seed {seed} LiteRT {resolver}"), &lite, &ort));
            }
        }
        // int8: the float outputs (a length is a folded int64 constant, which the int8 helpers do not compare)
        let mut prepared = g.clone();
        prepared.outputs.retain(|&o| g.value(o).dtype == DType::F32);
        tpu_sdk_core::quant::prepare(&mut prepared);
        let q = int8_support::quantized(&prepared, -1.0, 1.0, false);
        let qex = export(&q, &ExportOptions::default()).unwrap_or_else(|e| panic!("{name}: int8 export refused: {e}"));
        let qops = ops_of(&qex.bytes, 0).0;
        assert!(!qops.iter().any(|o| o == "WHILE"), "{name} int8: {qops:?}");
        // (evaluated inside the calibrated range: loop_append_outer's 2-element input calibrates on 16 values)
        let eval = tpu_sdk_test_support::f32_samples(&int8_support::input_shapes(&prepared), 4, 79, -0.8, 0.8);
        let ours = int8_support::ours_equal_litert(&format!("{name} int8"), &q, &qex, &eval);
        assert_eq!(ours.len(), eval.len(), "{name} int8: LiteRT did not run");
        let sqnr = int8_support::sqnr(&prepared, &q, &eval, &ours, 0);
        // (a sanity bound on the first output against the float graph, which equals onnxruntime above)
        assert!(sqnr > 25.0, "{name} int8: SQNR {sqnr:.1} dB against the float graph");
        println!(
            "{name:<21} float: {} ops, worst relative error vs onnxruntime {worst:.1e}; int8: {} ops, equal to LiteRT, SQNR {sqnr:.1} dB",
            ops.len(),
            qops.len()
        );
    }
}

/// The unrolled Scans and Loop in int8: their slices, bodies and stacking quantize like any other ops (no float
/// island: unrolled, they are plain dataflow), LiteRT loads the files, our int8 runtime equals LiteRT exactly, and
/// the Edge TPU rules report every op of the file by itself (none is control flow that must run on the CPU).
#[test]
fn unrolled_scans_and_loops_quantize_to_int8_equal_to_litert() {
    let Some(py) = oracle::python() else { return };
    let dir = models(&py, "cf_export_scan_int8");
    for name in ["scan_axes", "scan8", "loop_stack"] {
        let mut g = loaded(&dir.join(format!("{name}.onnx")));
        // the edgetpu pipeline's float rewrites, which unroll the Scan or Loop, come before calibration
        tpu_sdk_core::quant::prepare(&mut g);
        let eval = tpu_sdk_test_support::f32_samples(&int8_support::input_shapes(&g), 6, 78, -3.0, 3.0);
        let q = int8_support::quantized(&g, -3.0, 3.0, false);
        let ex = export(&q, &ExportOptions::default()).unwrap_or_else(|e| panic!("{name}: int8 export refused: {e}"));
        let (ops, n_sg) = ops_of(&ex.bytes, 0);
        assert!(n_sg == 1 && ops.iter().any(|o| o == "CONCATENATION") && !ops.iter().any(|o| o == "WHILE" || o == "DEQUANTIZE"), "{name} int8: {ops:?}");
        // (accuracy: for scan_axes `tpu-sdk compile --target edgetpu` reports 43.6 / 41.5 dB SQNR for the two
        // outputs against the float model on 8 calibration samples; this test checks the file and the bit-equality)
        let ours = int8_support::ours_equal_litert(&format!("{name} int8"), &q, &ex, &eval);
        assert_eq!(ours.len(), eval.len(), "{name} int8: LiteRT did not run");
        let r = analyze_bytes(&ex.bytes, &RulesOptions::default()).unwrap();
        assert!(r.ops.len() == ops.len() && r.ops.iter().all(|m| !m.reason.contains("control flow") && (m.placement == Placement::Tpu || !m.reason.is_empty())), "{name}: {:?}", r.ops);
        let first_cpu = r.ops.iter().find(|m| m.placement == Placement::Cpu).map(|m| format!("{} ({})", m.op, m.reason)).unwrap_or_default();
        println!("{name} int8: {} ops, equal to LiteRT; the rules map {} to the Edge TPU and {} to the CPU, the first {first_cpu}", ops.len(), r.tpu_ops, r.cpu_ops);
    }
}

/// A Loop with scan outputs that cannot unroll exports as a WHILE that grows each scan output by a row per
/// iteration (CONCATENATION onto an accumulator that starts with 0 rows): `loop_scan` and `loop_stop_scan`
/// (a condition computed in the body that stops them early), `loop_count_scan` (its trip count an int64 input,
/// 0 to 19 trips: 0 included), `loop_long` (5000 iterations, too many to unroll). LiteRT runs the files equal to
/// onnxruntime.
#[test]
fn loops_with_scan_outputs_that_cannot_unroll_export_as_a_growing_while_like_onnxruntime() {
    let Some(py) = oracle::python() else { return };
    let dir = models(&py, "cf_export_rows");
    for name in ["loop_scan", "loop_stop_scan", "loop_count_scan", "loop_long"] {
        let path = dir.join(format!("{name}.onnx"));
        let g = loaded(&path);
        let ex = export(&g, &ExportOptions::default()).unwrap_or_else(|e| panic!("{name}: export refused: {e}"));
        let (ops, n_sg) = ops_of(&ex.bytes, 0);
        let (body_ops, _) = ops_of(&ex.bytes, 2);
        assert!(ops.iter().any(|o| o == "WHILE") && n_sg == 3 && body_ops.iter().any(|o| o == "CONCATENATION"), "{name}: main ops {ops:?}, body {body_ops:?}");
        let seeds = if name == "loop_long" { 1 } else { 6 };
        let worst = litert_like_onnxruntime(&py, &dir, name, &path, &g, &ex, seeds);
        println!("{name:<16} WHILE growing its scan outputs; LiteRT worst relative error vs onnxruntime {worst:.1e}");
    }
}

/// In int8 (the edgetpu target's quantization), `If` and `Loop` and the comparisons feeding them stay float: a
/// DEQUANTIZE before their int8 inputs, a QUANTIZE after their outputs (with calibrated parameters), the regions
/// float subgraphs. LiteRT runs the file; our int8 runtime equals it exactly, on the graph and on the file read back.
#[test]
fn int8_models_keep_control_flow_float_between_quantize_ops_equal_to_litert() {
    let Some(py) = oracle::python() else { return };
    let dir = models(&py, "cf_export_int8");
    for (name, op) in [("if_nested", "IF"), ("loop_plain", "WHILE"), ("loop_swap", "WHILE"), ("loop_stop_scan", "WHILE")] {
        let g = loaded(&dir.join(format!("{name}.onnx")));
        let eval = tpu_sdk_test_support::f32_samples(&int8_support::input_shapes(&g), 6, 77, -3.0, 3.0);
        for float_io in [false, true] {
            let q = int8_support::quantized(&g, -3.0, 3.0, float_io);
            let ex = export(&q, &ExportOptions::default()).unwrap_or_else(|e| panic!("{name}: int8 export refused: {e}"));
            let (ops, _) = ops_of(&ex.bytes, 0);
            assert!(ops.iter().any(|o| o == op) && ops.iter().any(|o| o == "DEQUANTIZE") && ops.iter().any(|o| o == "QUANTIZE"), "{name}: {ops:?}");
            let label = format!("{name} int8 float_io={float_io}");
            let ours = int8_support::ours_equal_litert(&label, &q, &ex, &eval);
            let sqnr = int8_support::sqnr(&g, &q, &eval, &ours, 0);
            // (a condition computed from int8 values near its threshold may take the other branch than the float
            // graph does: a sanity bound, not an accuracy claim)
            assert!(sqnr > 15.0, "{label}: SQNR {sqnr:.1} dB against the float graph");
            println!("{label:<34} ops {ops:?}; SQNR {sqnr:.1} dB vs float; equal to LiteRT");
        }
    }
}
