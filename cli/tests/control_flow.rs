//! Control flow (If, Loop, Scan) on the CPU target against onnxruntime, and bad control-flow models refused
//! with clear errors (no panic, no hang).
//!
//! The models come from `scripts/make_control_flow_models.py` (onnx.helper): nested If with captures two scopes
//! up, Loop with a data-dependent early exit and a scan output, a while loop without trip count, a Loop over an
//! input with a symbolic dim (`--dim batch=3` flows into the body), Scan with reversed axes, and the opset 8
//! Scan. Without `TPU_SDK_PYTHON` the tests say so and pass, unless `TPU_SDK_REQUIRE_ORACLES=1`.

use std::path::Path;

use tpu_sdk::{LoadOptions, Model};
use tpu_sdk_test_support::cli::{self, expect};
use tpu_sdk_test_support::{onnxruntime, oracle, random_inputs, relative_to_mean};

fn tpu_sdk(args: &[&str]) -> std::process::Output {
    cli::run(env!("CARGO_BIN_EXE_tpu-sdk"), args)
}

fn models(py: &Path, dir: &Path) -> std::path::PathBuf {
    let out = dir.join("models");
    oracle::run_script(py, "scripts/make_control_flow_models.py", &[&out]);
    out
}

/// Runs `name` on the CPU with random inputs (several seeds, so conditions go both ways) and compares every
/// output with onnxruntime's.
fn check(py: &Path, tmp: &Path, dir: &Path, name: &str, dims: &[(&str, usize)], expect_op: &str) -> Result<(), String> {
    let path = dir.join(format!("{name}.onnx"));
    let mut opts = LoadOptions::default();
    for (d, s) in dims {
        opts.dims.insert(d.to_string(), *s);
    }
    let model = Model::load_with(&path, &opts).map_err(|e| format!("{name}: load: {e}"))?;
    let g = model.graph();
    let text = g.to_string();
    if !text.contains(expect_op) {
        return Err(format!("{name}: the loaded graph has no {expect_op}:\n{text}"));
    }
    let mut worst = 0.0f64;
    for seed in [1, 2, 3, 4] {
        let inputs = random_inputs(g, seed);
        let ours = model.prepare("cpu").and_then(|mut e| e.run(&inputs)).map_err(|e| format!("{name}: run: {e}"))?;
        let named: Vec<(String, _)> = g.inputs.iter().zip(inputs).map(|(&i, t)| (g.value(i).name.clone(), t)).collect();
        let theirs = onnxruntime::run_model(py, &path, &named, &tmp.join(format!("{name}_{seed}")));
        if theirs.len() != ours.len() {
            return Err(format!("{name}: {} outputs, onnxruntime gives {}", ours.len(), theirs.len()));
        }
        for (k, (t, want)) in ours.iter().zip(&theirs).enumerate() {
            if t.shape != want.shape {
                return Err(format!("{name}: output {k} has shape {:?}, onnxruntime {:?}", t.shape, want.shape));
            }
            worst = worst.max(relative_to_mean(name, k, t, want, "onnxruntime", 1e-5)?);
        }
    }
    println!("{name:<16} {} nodes, worst relative error {worst:.2e}", g.nodes.len());
    Ok(())
}

#[test]
fn control_flow_models_match_onnxruntime() {
    let Some(py) = oracle::python() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let dir = models(&py, tmp.path());
    let mut failures = Vec::new();
    let cases: &[(&str, &[(&str, usize)], &str)] = &[
        ("if_nested", &[], "= If("),
        ("loop_scan", &[], "= Loop("),
        ("loop_while", &[], "= Loop("),
        ("loop_symbolic", &[("batch", 3)], "= Loop("),
        ("loop_plain", &[], "= Loop("),
        ("loop_grow", &[], "= Loop("),
        ("loop_stack", &[], "= Loop("),
        ("scan_axes", &[], "= Scan("),
        ("scan8", &[], "= Scan("),
    ];
    for (name, dims, op) in cases {
        if let Err(e) = check(&py, tmp.path(), &dir, name, dims, op) {
            failures.push(e);
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn symbolic_dims_flow_into_a_loop_body() {
    let Some(py) = oracle::python() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let dir = models(&py, tmp.path());
    let mut opts = LoadOptions::default();
    opts.dims.insert("batch".into(), 5);
    let m = Model::load_with(&dir.join("loop_symbolic.onnx"), &opts).unwrap();
    let g = m.graph();
    // the body's carried input takes the size chosen for 'batch', not the 1 assumed for symbolic dims
    let text = g.to_string();
    assert!(text.contains("input  %acc_in: f32[5,4]"), "{text}");
    let ys = m.prepare("cpu").unwrap().run(&random_inputs(g, 1)).unwrap();
    assert_eq!(ys[0].shape, vec![5, 4]);
    assert_eq!(ys[1].to_i64_vec(), vec![5, 4, 5, 4, 5, 4]);
}

/// A TorchScript module (`for` over a run-time count, a data-dependent `if`) exported by torch.onnx:
/// `cli/tests/data/torchscript_loop_if.onnx` (`scripts/make_torchscript_control_flow.py` regenerates it),
/// against onnxruntime for trip counts 0, 1 and 5.
#[test]
fn a_torchscript_export_matches_onnxruntime() {
    let Some(py) = oracle::python() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let path = tpu_sdk_test_support::repo().join("cli/tests/data/torchscript_loop_if.onnx");
    let model = Model::load_with(&path, &LoadOptions::default()).unwrap();
    let mut exe = model.prepare("cpu").unwrap();
    for (seed, n) in [(1u64, 0i64), (2, 1), (3, 5)] {
        let x = tpu_sdk_test_support::rand_f32(&[2, 3], seed);
        let inputs = vec![x.clone(), tpu_sdk::Tensor::scalar(n)];
        let ours = exe.run(&inputs).unwrap();
        let named = vec![("x".to_string(), x), ("n".to_string(), tpu_sdk::Tensor::scalar(n))];
        let theirs = onnxruntime::run_model(&py, &path, &named, &tmp.path().join(format!("n{n}")));
        let err = relative_to_mean("torchscript_loop_if", 0, &ours[0], &theirs[0], "onnxruntime", 1e-5).unwrap();
        println!("torchscript_loop_if n={n}: worst relative error {err:.2e}");
    }
}

/// torch.onnx.export of TorchScript appending to two lists in a `for` loop (`core/tests/data/sequence/
/// torch_loop_two_lists.onnx`: the lists become the Loop's scan outputs) compiles for `--target tflite` and,
/// with calibration, `--target edgetpu` unrolled (no WHILE); LiteRT runs the float file like onnxruntime runs
/// the model, and the int8 file loads in LiteRT.
#[test]
fn a_torchscript_list_loop_compiles_for_tflite_and_edgetpu_unrolled() {
    let Some(py) = oracle::python() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let path = tpu_sdk_test_support::repo().join("core/tests/data/sequence/torch_loop_two_lists.onnx");
    let cal = tmp.path().join("cal");
    let samples = tpu_sdk_test_support::f32_samples(&[vec![3, 4, 5]], 5, 31, -1.0, 1.0);
    for (k, s) in samples.iter().enumerate() {
        std::fs::create_dir_all(cal.join(format!("{k}"))).unwrap();
        tpu_sdk::core::npy::write(&cal.join(format!("{k}/x.npy")), &s[0]).unwrap();
    }
    let f = tmp.path().join("lists.tflite");
    let out = cli::ok(tpu_sdk(&["compile", path.to_str().unwrap(), "--target", "tflite", "-o", f.to_str().unwrap()]));
    assert!(out.contains("CONCATENATION") && !out.contains("WHILE"), "tflite: {out}");
    let q = tmp.path().join("lists_edgetpu.tflite");
    let out = cli::ok(tpu_sdk(&["compile", path.to_str().unwrap(), "--target", "edgetpu", "-o", q.to_str().unwrap(), "--calibration", cal.to_str().unwrap()]));
    assert!(q.exists() && out.contains("SQNR") && !out.contains("WHILE"), "edgetpu: {out}");
    let x = tpu_sdk_test_support::rand_f32(&[3, 4, 5], 9);
    let theirs = onnxruntime::run_model(&py, &path, &[("x".to_string(), x.clone())], &tmp.path().join("ort"));
    let lite = tpu_sdk_test_support::litert::run_bytes(&py, &std::fs::read(&f).unwrap(), tpu_sdk_test_support::litert::REFERENCE, &[vec![x.clone()]]).unwrap().remove(0);
    assert_eq!(lite.len(), theirs.len());
    for (k, (a, b)) in lite.iter().zip(&theirs).enumerate() {
        let err = relative_to_mean("torch_loop_two_lists LiteRT", k, a, b, "onnxruntime", 1e-4).unwrap();
        println!("torch_loop_two_lists tflite output {k}: worst relative error vs onnxruntime {err:.2e}");
    }
    let int8 = tpu_sdk_test_support::litert::run_bytes(&py, &std::fs::read(&q).unwrap(), tpu_sdk_test_support::litert::REFERENCE, &[]);
    assert!(int8.is_ok(), "the int8 file does not load in LiteRT: {int8:?}");
}

/// Writes `x` as an f32 npy of shape [2].
fn x2(dir: &Path) -> String {
    let p = dir.join("x.npy");
    tpu_sdk::core::npy::write(&p, &tpu_sdk::Tensor::from_f32(vec![2], vec![0.5, -0.25])).unwrap();
    p.to_str().unwrap().to_string()
}

#[test]
fn bad_control_flow_is_refused_clearly() {
    let Some(py) = oracle::python() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let dir = models(&py, tmp.path());
    let x = x2(tmp.path());
    let m = |n: &str| dir.join(format!("{n}.onnx")).to_str().unwrap().to_string();

    let (_, err) = expect(tpu_sdk(&["run", &m("bad_loop_body"), "--input", &x]), 3);
    assert!(err.contains("bad_loop") && err.contains("the body signature does not match") && err.contains("takes 2 inputs"), "{err}");

    let (_, err) = expect(tpu_sdk(&["run", &m("bad_if_outputs"), "--input", &x]), 3);
    assert!(err.contains("bad_if") && err.contains("then_branch has 1 outputs but else_branch has 2"), "{err}");

    let (_, err) = expect(tpu_sdk(&["run", &m("bad_deep_nesting"), "--input", &x]), 3);
    assert!(err.contains("nested more than 16 deep"), "{err}");

    // a 4 TB tensor inside a branch: refused by the memory budget on the CPU and on cloud-tpu, before allocating
    let (_, err) = expect(tpu_sdk(&["run", &m("bad_region_bomb"), "--input", &x]), 3);
    assert!(err.contains("resource limit") && err.contains("'bomb_if' (If)") && err.contains("region 'then'") && err.contains("ConstantOfShape") && err.contains("TB"), "{err}");
    let bomb_mlir = tmp.path().join("bomb.mlir");
    let (_, err) = expect(tpu_sdk(&["compile", &m("bad_region_bomb"), "--target", "cloud-tpu", "-o", bomb_mlir.to_str().unwrap()]), 3);
    assert!(err.contains("'bomb_if' (If)") && err.contains("region 'then'") && err.contains("ConstantOfShape") && err.contains("TB"), "{err}");

    // 2^62 iterations with a condition that stays true: stops at the iteration limit, quickly
    let t0 = std::time::Instant::now();
    let o = cli::command(env!("CARGO_BIN_EXE_tpu-sdk"))
        .env("TPU_SDK_MAX_LOOP_ITERATIONS", "1000")
        .args(["--threads", "2", "run", &m("bad_loop_2_62"), "--input", &x])
        .output()
        .unwrap();
    let (_, err) = expect(o, 1);
    assert!(err.contains("long_loop") && err.contains("stopped after 1000 iterations") && err.contains("TPU_SDK_MAX_LOOP_ITERATIONS"), "{err}");
    // and with the default limit it still ends (2^20 iterations), with the same message
    let o = tpu_sdk(&["run", &m("bad_loop_2_62"), "--input", &x]);
    let (_, err) = expect(o, 1);
    assert!(err.contains("stopped after 1048576 iterations"), "{err}");
    assert!(t0.elapsed().as_secs() < 120, "the loop limit took {:?}", t0.elapsed());

    // what the accelerator paths cannot express is refused by name, never a panic: on cloud-tpu a scan output
    // whose length a data-dependent condition decides. The TFLite export writes control flow as IF/WHILE
    // subgraphs, float or (edgetpu) int8 around a float WHILE, which the mapping reports on the CPU
    // (targets/edgetpu/tests/control_flow_export.rs).
    let out = tmp.path().join("o.mlir");
    let (_, err) = expect(tpu_sdk(&["compile", &m("loop_scan"), "--target", "cloud-tpu", "-o", out.to_str().unwrap()]), 3);
    assert!(err.contains("Loop") && err.contains("static shapes"), "{err}");
    let cal = tmp.path().join("cal.npy");
    tpu_sdk::core::npy::write(&cal, &tpu_sdk::Tensor::from_f32(vec![2, 4], vec![0.5, -1.0, 2.0, 0.25, 1.0, 1.5, -0.5, 3.0])).unwrap();
    let loop_plain = m("loop_plain");
    let q = tmp.path().join("m_edgetpu.tflite");
    let out = cli::ok(tpu_sdk(&["compile", loop_plain.as_str(), "--target", "edgetpu", "-o", q.to_str().unwrap(), "--calibration", cal.to_str().unwrap()]));
    assert!(q.exists() && out.contains("WHILE is control flow, which the Edge TPU does not run"), "edgetpu: {out}");
    let q = tmp.path().join("m_tflite.tflite");
    cli::ok(tpu_sdk(&["compile", loop_plain.as_str(), "--target", "tflite", "-o", q.to_str().unwrap()]));
    assert!(q.exists());

    // a Loop with scan outputs and a constant trip count compiles for the Edge TPU unrolled: the mapping names
    // each op of the plain dataflow (no WHILE); one whose condition may stop it early is refused with the reason
    let cal = tmp.path().join("cal_stack");
    for k in 0..4 {
        let s = cal.join(format!("{k}"));
        std::fs::create_dir_all(&s).unwrap();
        let v = |n: usize| (0..n).map(|i| ((i * 7 + k * 3) % 11) as f32 / 4.0 - 1.2).collect::<Vec<_>>();
        tpu_sdk::core::npy::write(&s.join("x.npy"), &tpu_sdk::Tensor::from_f32(vec![2, 3], v(6))).unwrap();
        tpu_sdk::core::npy::write(&s.join("h0.npy"), &tpu_sdk::Tensor::from_f32(vec![3], v(3))).unwrap();
    }
    let q = tmp.path().join("stack_edgetpu.tflite");
    let out = cli::ok(tpu_sdk(&["compile", &m("loop_stack"), "--target", "edgetpu", "-o", q.to_str().unwrap(), "--calibration", cal.to_str().unwrap()]));
    assert!(q.exists() && out.contains("CONCATENATION") && !out.contains("WHILE"), "edgetpu loop_stack: {out}");
    // a Loop with scan outputs whose condition may stop it early compiles for TFLite as a WHILE growing them
    // (LiteRT runs it: a_loop_with_run_time_scan_outputs_compiles_for_tflite_and_edgetpu_as_a_while)
    let q = tmp.path().join("scan.tflite");
    let out = cli::ok(tpu_sdk(&["compile", &m("loop_scan"), "--target", "tflite", "-o", q.to_str().unwrap()]));
    assert!(q.exists() && out.contains("WHILE"), "tflite loop_scan: {out}");
    // a use of such a scan output other than as a graph output is refused naming the node and why
    let q = tmp.path().join("scan_used.tflite");
    let (_, err) = expect(tpu_sdk(&["compile", &m("loop_scan_used"), "--target", "tflite", "-o", q.to_str().unwrap()]), 3);
    assert!(err.contains("'total' (Reduce") && err.contains("is the scan output of a Loop whose length is known only at run time"), "tflite loop_scan_used: {err}");
}

/// `compile --target tflite` of Loops with scan outputs that cannot unroll (`loop_count_scan`: its trip count
/// an int64 input, 0 included; `loop_stop_scan`: a condition computed in the body stops it early): a WHILE growing
/// each scan output; LiteRT runs the file within 1e-5 of onnxruntime on inputs that give scan outputs of
/// different lengths. `--target edgetpu` with calibration keeps the WHILE float between DEQUANTIZE and QUANTIZE,
/// and LiteRT runs the int8 file.
#[test]
fn a_loop_with_run_time_scan_outputs_compiles_for_tflite_and_edgetpu_as_a_while() {
    let Some(py) = oracle::python() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let dir = models(&py, tmp.path());
    let litert = |f: &Path, inputs: Vec<tpu_sdk::Tensor>| {
        tpu_sdk_test_support::litert::run_bytes(&py, &std::fs::read(f).unwrap(), tpu_sdk_test_support::litert::REFERENCE, &[inputs]).unwrap_or_else(|e| panic!("LiteRT: {e}")).remove(0)
    };
    let x23 = tpu_sdk_test_support::rand_f32(&[2, 3], 5);
    let count_cases: Vec<Vec<(String, tpu_sdk::Tensor)>> =
        [0i64, 1, 5].iter().map(|&m| vec![("x".to_string(), x23.clone()), ("m".to_string(), tpu_sdk::Tensor::scalar(m))]).collect();
    let stop_cases: Vec<Vec<(String, tpu_sdk::Tensor)>> =
        [-1.0f32, 0.2, 0.6, 3.0].iter().map(|&c| vec![("x".to_string(), tpu_sdk::Tensor::from_f32(vec![3], vec![c, c * 0.5, c]))]).collect();
    for (name, cases) in [("loop_count_scan", count_cases), ("loop_stop_scan", stop_cases)] {
        let path = dir.join(format!("{name}.onnx"));
        let f = tmp.path().join(format!("{name}.tflite"));
        let out = cli::ok(tpu_sdk(&["compile", path.to_str().unwrap(), "--target", "tflite", "-o", f.to_str().unwrap()]));
        assert!(out.contains("WHILE"), "{name}: {out}");
        let mut lengths = Vec::new();
        for (k, named) in cases.iter().enumerate() {
            let theirs = onnxruntime::run_model(&py, &path, named, &tmp.path().join(format!("ort_{name}_{k}")));
            let lite = litert(&f, named.iter().map(|(_, t)| t.clone()).collect());
            assert_eq!(lite.len(), theirs.len(), "{name}: outputs");
            for (j, (a, b)) in lite.iter().zip(&theirs).enumerate() {
                assert_eq!(a.shape, b.shape, "{name} case {k} output {j}");
                relative_to_mean(name, j, a, b, "onnxruntime", 1e-5).unwrap();
            }
            lengths.push(theirs[1].shape[0]);
        }
        println!("{name}: LiteRT equal to onnxruntime within 1e-5, scan outputs of {lengths:?} rows");
        lengths.dedup();
        assert!(lengths.len() > 2, "{name}: the cases should give scan outputs of several lengths: {lengths:?}");
    }
    // int8: calibration samples for loop_stop_scan's x
    let cal = tmp.path().join("cal");
    for (k, s) in tpu_sdk_test_support::f32_samples(&[vec![3]], 6, 13, -2.0, 2.0).iter().enumerate() {
        std::fs::create_dir_all(cal.join(format!("{k}"))).unwrap();
        tpu_sdk::core::npy::write(&cal.join(format!("{k}/x.npy")), &s[0]).unwrap();
    }
    let q = tmp.path().join("stop_edgetpu.tflite");
    let path = dir.join("loop_stop_scan.onnx");
    let out = cli::ok(tpu_sdk(&["compile", path.to_str().unwrap(), "--target", "edgetpu", "-o", q.to_str().unwrap(), "--calibration", cal.to_str().unwrap()]));
    assert!(q.exists() && out.contains("WHILE is control flow, which the Edge TPU does not run"), "edgetpu: {out}");
    let int8 = tpu_sdk_test_support::litert::run_bytes(&py, &std::fs::read(&q).unwrap(), tpu_sdk_test_support::litert::REFERENCE, &[]);
    assert!(int8.is_ok(), "the int8 file does not load in LiteRT: {int8:?}");
}
