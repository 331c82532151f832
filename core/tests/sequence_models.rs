//! ONNX sequence ops resolved at import time, on the CPU runtime against onnxruntime: every output within
//! 1e-5 relative (per element: |ours - ort| <= 1e-5 · (|ort| + mean |ort|)), sequences a Loop appends to (Python
//! lists built in a loop) as the Loop's scan outputs, outer sequences read inside Loop/If bodies (passed in as
//! the stack of their elements), and the models the importer must refuse (a run-time position into a sequence
//! known when importing, an out-of-range position, a sequence graph output, a carried sequence the body reads,
//! inserts into at a position or erases from, an outer sequence of elements of two shapes read in a body)
//! refused with the reason.
//!
//! The models are `core/tests/data/sequence/*.onnx`, written by `scripts/make_sequence_models.py` (onnx.helper)
//! and `scripts/make_sequence_torch.py` (torch.onnx.export of TorchScript list code). onnxruntime runs through
//! `scripts/ort_run.py` with the Python in `TPU_SDK_PYTHON`; without it the comparison says so and passes,
//! unless `TPU_SDK_REQUIRE_ORACLES=1`.

use std::path::{Path, PathBuf};

use tpu_sdk_core::import::onnx::{load, ImportOptions};
use tpu_sdk_core::ir::{Graph, Op, Tensor};
use tpu_sdk_core::runtime::Session;
use tpu_sdk_core::Error;
use tpu_sdk_test_support::{fresh_dir, onnxruntime, oracle, rand_f32, random_inputs, repo};

/// The models with a Loop appending to a sequence or a body reading an outer one, compared with onnxruntime on
/// random inputs (int64 inputs in [0, 20): run-time trip counts and positions).
const LOOP_MODELS: [&str; 8] = [
    "loop_append_outer",
    "loop_readers",
    "loop_initial",
    "torch_loop_two_lists",
    "torch_loop_count",
    "torch_list_loop",
    "if_capture",
    "loop_reads_loop",
];

fn model(name: &str) -> PathBuf {
    repo().join("core/tests/data/sequence").join(format!("{name}.onnx"))
}

fn count(g: &Graph, f: fn(&Op) -> bool) -> usize {
    g.nodes.iter().filter(|n| f(&n.op)).count()
}

#[test]
fn sequence_models_import_to_tensor_ops() {
    for (name, splits, concats) in [("construct_insert_at", 0, 0), ("split_concat", 4, 4), ("empty_insert", 0, 1), ("torch_list_ops", 2, 3)] {
        let g = load(&model(name), &ImportOptions::default()).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(count(&g, |o| matches!(o, Op::Split { .. })), splits, "{name}: Split nodes");
        assert_eq!(count(&g, |o| matches!(o, Op::Concat { .. })), concats, "{name}: Concat nodes");
    }
}

#[test]
fn sequence_models_match_onnxruntime() {
    let Some(py) = oracle::python() else { return };
    let tmp = fresh_dir("sequence-models");
    let mut failures = Vec::new();
    for name in ["construct_insert_at", "split_concat", "empty_insert", "torch_list_ops"].into_iter().chain(LOOP_MODELS) {
        let path = model(name);
        let g = load(&path, &ImportOptions::default()).unwrap_or_else(|e| panic!("{name}: {e}"));
        for seed in [1, 2, 3] {
            let inputs = random_inputs(&g, seed);
            let ours = Session::new(g.clone()).and_then(|mut s| s.run(&inputs)).unwrap_or_else(|e| panic!("{name}: {e}"));
            match onnxruntime::worst_vs_onnxruntime(&py, &path, &g, inputs, &ours, &tmp, 1e-5) {
                Ok(w) => println!("{name:<22} seed {seed}: {} outputs, worst relative error {w:.2e}", ours.len()),
                Err(e) => failures.push(e),
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Each sequence a Loop appends to leaves its carried values and comes out as one more scan output: (model,
/// per Loop: carried tensors, scan outputs).
#[test]
fn appended_sequences_become_scan_outputs() {
    let cases: [(&str, &[(usize, usize)]); 8] = [
        ("torch_list_loop", &[(0, 1)]),
        ("loop_reads_loop", &[(0, 1), (1, 1)]),
        ("loop_append_outer", &[(0, 1)]),
        ("loop_readers", &[(1, 3)]),
        ("loop_initial", &[(0, 1), (0, 1)]),
        ("torch_loop_stack", &[(0, 1)]),
        ("torch_loop_two_lists", &[(1, 2)]),
        ("torch_loop_count", &[(0, 1)]),
    ];
    for (name, want) in cases {
        // torch_loop_stack reads out[1]: its x (whose dim 0 is the trip count) needs 2 rows or more
        let mut opts = ImportOptions::default();
        opts.input_shapes.insert("x".into(), vec![3, 4, 5]);
        let opts = if name == "torch_loop_stack" { opts } else { ImportOptions::default() };
        let g = load(&model(name), &opts).unwrap_or_else(|e| panic!("{name}: {e}"));
        let loops: Vec<(usize, usize)> = g
            .nodes
            .iter()
            .filter_map(|n| match &n.op {
                Op::Loop(a) => Some((a.num_carried, a.body.outputs.len() - 1 - a.num_carried)),
                _ => None,
            })
            .collect();
        assert_eq!(loops, want, "{name}: (carried, scan outputs) per Loop");
    }
}

/// Runs `path` loaded with `opts` on `inputs` (all of the graph's, in order) and compares with onnxruntime.
fn vs_onnxruntime(py: &Path, path: &Path, opts: &ImportOptions, inputs: Vec<Tensor>, tmp: &Path, what: &str) -> Result<f64, String> {
    let g = load(path, opts).map_err(|e| format!("{what}: {e}"))?;
    let ours = Session::new(g.clone()).and_then(|mut s| s.run(&inputs)).map_err(|e| format!("{what}: {e}"))?;
    onnxruntime::worst_vs_onnxruntime(py, path, &g, inputs, &ours, tmp, 1e-5).map_err(|e| format!("{what}: {e}"))
}

/// torch's `for i in range(x.size(0))`: the trip count is x's symbolic dim 0, fixed by the shape it is loaded
/// with; onnxruntime takes the same input.
#[test]
fn list_loop_over_an_input_dim_matches_onnxruntime() {
    let Some(py) = oracle::python() else { return };
    let tmp = fresh_dir("sequence-loop-dims");
    let path = model("torch_loop_stack");
    let mut failures = Vec::new();
    for n in [2usize, 3, 7] {
        let mut opts = ImportOptions::default();
        opts.input_shapes.insert("x".into(), vec![n, 4, 5]);
        let x = rand_f32(&[n, 4, 5], n as u64);
        match vs_onnxruntime(&py, &path, &opts, vec![x], &tmp, &format!("torch_loop_stack x [{n}, 4, 5]")) {
            Ok(w) => println!("torch_loop_stack x [{n}, 4, 5]: worst relative error {w:.2e}"),
            Err(e) => failures.push(e),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Trip counts given at run time, zero included: SequenceLength of an empty appended sequence is 0, the carried
/// tensor stays its initial value, and a list starting with one tensor concatenates to just that tensor
/// (ConcatFromSequence of an empty sequence is an error in onnxruntime, so loop_concat_trips runs 1 and 4).
#[test]
fn list_loops_with_run_time_trip_counts_match_onnxruntime() {
    let Some(py) = oracle::python() else { return };
    let tmp = fresh_dir("sequence-loop-trips");
    let mut failures = Vec::new();
    for m in [0i64, 1, 4] {
        let trips = Tensor::from_i64(vec![], vec![m]);
        let mut runs = vec![
            ("loop_zero_trips", vec![rand_f32(&[2], 5), trips.clone()]),
            ("torch_loop_count", vec![rand_f32(&[2, 3], 6), trips.clone()]),
        ];
        if m > 0 {
            runs.push(("loop_concat_trips", vec![rand_f32(&[2, 3], 7), trips]));
        }
        for (name, inputs) in runs {
            match vs_onnxruntime(&py, &model(name), &ImportOptions::default(), inputs, &tmp, &format!("{name} with {m} trips")) {
                Ok(w) => println!("{name:<18} {m} trips: worst relative error {w:.2e}"),
                Err(e) => failures.push(e),
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// After a Loop that ran no iteration, ConcatFromSequence of its appended sequence gives a tensor with 0 along
/// the concatenation axis; onnxruntime fails there instead (it refuses an empty sequence), so this is checked
/// for its shape alone: the shape the spec's rule gives for the element shape [2, 3].
#[test]
fn concatenating_an_empty_appended_sequence_gives_an_empty_tensor() {
    let g = load(&model("loop_concat_trips"), &ImportOptions::default()).unwrap();
    let inputs = [rand_f32(&[2, 3], 1), Tensor::from_i64(vec![], vec![0])];
    let ours = Session::new(g).and_then(|mut s| s.run(&inputs)).unwrap();
    assert_eq!(ours[0].shape, [2, 0, 3], "new_axis at 1 over no elements");
    assert_eq!(ours[1].shape, [2, 0], "concatenation along axis 1 of no elements");
}

/// Each bad model: the error kind and pieces of its message.
#[test]
fn non_static_sequences_are_refused_with_the_reason() {
    let cases: [(&str, bool, &[&str]); 10] = [
        ("bad_position_range", false, &["at_two", "position 2 is out of range for a sequence of 2 tensors"]),
        ("bad_runtime_position", true, &["at_pos", "sequence position is computed at run time; only constant positions are supported"]),
        ("bad_sequence_output", true, &["graph output 's' is a tensor sequence"]),
        ("bad_loop_sequence", true, &["loop", "carried sequence 0 ('seq_in' in the body)", "node 'length' (SequenceLength) reads it"]),
        ("bad_loop_insert_at", true, &["loop", "node 'insert_front' (SequenceInsert) inserts at a position"]),
        ("bad_loop_erase", true, &["loop", "its next value comes from the body's node 'erase_last' (SequenceErase)"]),
        ("bad_loop_seq_output", true, &["graph output 's' is a tensor sequence"]),
        ("bad_erase_after_loop", true, &["erase", "'s' is a sequence a Loop appended to (its length is known only at run time) and this node erases from it"]),
        ("bad_if_capture", true, &["branch", "uses the tensor sequence 's', whose elements differ in shape"]),
        // loaded with its symbolic dim taken as 1, the loop runs once and out[1] is past the end
        ("torch_loop_stack", false, &["/SequenceAt_1", "position 1 is out of range for a sequence of 1 tensors (accepted: [-1, 0])"]),
    ];
    for (name, unsupported, pieces) in cases {
        let e = load(&model(name), &ImportOptions::default()).expect_err(name);
        assert_eq!(matches!(e, Error::Unsupported(_)), unsupported, "{name}: {e:?}");
        let msg = e.to_string();
        for p in pieces {
            assert!(msg.contains(p), "{name}: '{msg}' should say '{p}'");
        }
        println!("{name}: {msg}");
    }
}
