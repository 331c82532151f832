//! Sequence ops resolved at import time: the tensor ops they become, their values on the CPU runtime for
//! small hand-checked cases, and the clear errors for what is not static (onnxruntime comparisons are in
//! `core/tests/sequence_models.rs`).

use super::*;

/// Imports (fully) a model with float inputs `x` [2, 3] and `y` [1, 3], the int64 initializers `inits`
/// (name, dims, values) and `nodes`, with output `out`.
fn seq_model(nodes: Vec<NodeProto>, inits: &[(&str, &[i64], &[i64])], out: &str) -> crate::Result<Graph> {
    let inits = inits.iter().map(|(n, d, v)| ti64(n, d, v)).collect();
    let m = model(17, nodes, vec![fin("x", &[2, 3]), fin("y", &[1, 3])], &[out], inits);
    super::load_bytes(&m.encode_to_vec(), None, &ImportOptions::default())
}

fn err(r: crate::Result<Graph>) -> String {
    r.map(|_| ()).expect_err("should be refused").to_string()
}

fn run(g: Graph) -> Vec<Tensor> {
    let x = Tensor::from_f32(vec![2, 3], vec![1., 2., 3., 4., 5., 6.]);
    let y = Tensor::from_f32(vec![1, 3], vec![7., 8., 9.]);
    crate::runtime::Session::new(g).unwrap().run(&[x, y]).unwrap()
}

#[test]
fn insert_erase_at_and_length_pick_the_elements() {
    let nodes = vec![
        node("SequenceConstruct", &["x", "y"], &["s"], vec![]),
        node("SequenceInsert", &["s", "y", "zero"], &["s2"], vec![]), // [y, x, y]
        node("SequenceErase", &["s2", "minus2"], &["s3"], vec![]),    // [y, y]
        node("Identity", &["s3"], &["s3i"], vec![]),                  // the same sequence
        node("SequenceInsert", &["s3i", "x"], &["s4"], vec![]),       // [y, y, x]
        node("SequenceAt", &["s4", "minus1"], &["z"], vec![]),
    ];
    let inits: &[(&str, &[i64], &[i64])] = &[("zero", &[], &[0]), ("minus2", &[], &[-2]), ("minus1", &[], &[-1])];
    let g = seq_model(nodes.clone(), inits, "z").unwrap();
    assert!(ops(&g).iter().all(|o| matches!(o, Op::Identity)), "{:?}", ops(&g));
    assert_eq!(run(g)[0].as_f32().unwrap(), &[1., 2., 3., 4., 5., 6.]);
    let mut nodes = nodes;
    nodes.push(node("SequenceLength", &["s4"], &["n"], vec![]));
    let g = seq_model(nodes, inits, "n").unwrap();
    assert_eq!(run(g)[0].to_i64_vec(), [3]);
}

#[test]
fn split_and_concat_become_split_squeeze_unsqueeze_concat() {
    let nodes = vec![
        node("SplitToSequence", &["x"], &["s"], vec![ai("axis", 1), ai("keepdims", 0)]),
        node("ConcatFromSequence", &["s"], &["z"], vec![ai("axis", -2), ai("new_axis", 1)]),
    ];
    let g = seq_model(nodes, &[], "z").unwrap();
    let names: Vec<String> = ops(&g).iter().map(|o| o.name()).collect();
    assert_eq!(names.iter().filter(|n| *n == "Squeeze").count(), 3, "{names:?}");
    assert_eq!(names.iter().filter(|n| *n == "Unsqueeze").count(), 3, "{names:?}");
    let z = &run(g)[0];
    assert_eq!(z.shape, [3, 2]);
    assert_eq!(z.as_f32().unwrap(), &[1., 4., 2., 5., 3., 6.]);
}

#[test]
fn positions_out_of_range_and_empty_sequences_are_refused() {
    let at = |pos: i64| {
        let nodes = vec![node("SequenceConstruct", &["x", "x"], &["s"], vec![]), node("SequenceInsert", &["s", "x", "p"], &["z"], vec![])];
        let p = [pos];
        err(seq_model(nodes, &[("p", &[], &p)], "z"))
    };
    // SequenceInsert accepts [-n, n]
    assert!(at(-3).contains("position -3 is out of range for a sequence of 2 tensors (accepted: [-2, 2])"), "{}", at(-3));
    assert!(at(2).contains("graph output 'z' is a tensor sequence"), "{}", at(2));
    let e = err(seq_model(vec![node("SequenceEmpty", &[], &["s"], vec![]), node("SequenceErase", &["s"], &["z"], vec![])], &[], "z"));
    assert!(e.contains("cannot erase from an empty sequence"), "{e}");
    let nodes = vec![node("SequenceEmpty", &[], &["s"], vec![]), node("ConcatFromSequence", &["s"], &["z"], vec![ai("axis", 0)])];
    assert!(err(seq_model(nodes, &[], "z")).contains("the sequence is empty"));
    let nodes = vec![node("SequenceConstruct", &["x"], &["s"], vec![]), node("ConcatFromSequence", &["s"], &["z"], vec![ai("axis", 3), ai("new_axis", 1)])];
    assert!(err(seq_model(nodes, &[], "z")).contains("axis 3 is out of range for new_axis over tensors of rank 2 (accepted: [-3, 2])"));
}

#[test]
fn element_types_and_run_time_values_are_checked() {
    let nodes = vec![node("SequenceEmpty", &[], &["s"], vec![ai("dtype", dt::INT64 as i64)]), node("SequenceInsert", &["s", "x"], &["z"], vec![])];
    assert!(err(seq_model(nodes, &[], "z")).contains("tensor 'x' has element type F32, the sequence holds I64"));
    let nodes = vec![node("SplitToSequence", &["x", "sp"], &["s"], vec![ai("axis", 1)]), node("SequenceAt", &["s", "zero"], &["z"], vec![])];
    let e = err(seq_model(nodes, &[("sp", &[2], &[1, 1]), ("zero", &[], &[0])], "z"));
    assert!(e.contains("split [1, 1] does not sum to the size 3 of the split axis"), "{e}");
    // a sequence read by a tensor op
    let nodes = vec![node("SequenceConstruct", &["x"], &["s"], vec![]), node("Relu", &["s"], &["z"], vec![])];
    let e = err(seq_model(nodes, &[], "z"));
    assert!(e.starts_with("unsupported: node 'Relu_node' (Relu): input 's' is a tensor sequence"), "{e}");
}

#[test]
fn a_split_into_too_many_parts_is_refused() {
    let nodes = vec![node("SplitToSequence", &["x"], &["s"], vec![]), node("ConcatFromSequence", &["s"], &["y"], vec![ai("axis", 0)])];
    let m = model(17, nodes, vec![fin("x", &[100_000, 1])], &["y"], vec![]);
    let e = err(super::load_bytes(&m.encode_to_vec(), None, &ImportOptions::default()));
    assert!(e.contains("the sequence would hold 100000 tensors; at most 65536"), "{e}");
}
