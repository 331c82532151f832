//! Graph-level import: constants, initializers and inputs, input shapes and notes, node order, model-local
//! functions, malformed files.

use super::*;

#[test]
fn constants_initializers_and_inputs() {
    let mut t = tf32("", &[2], &[1.0, 2.0]);
    t.name = None;
    let m = model(
        13,
        vec![
            node("Constant", &[], &["c"], vec![at_("value", t)]),
            node("Constant", &[], &["k"], vec![ais("value_ints", &[3, 4])]),
            node("Constant", &[], &["f"], vec![af("value_float", 0.5)]),
            node("Add", &["x", "c"], &["y"], vec![]),
        ],
        // "w" is both an input and an initializer: a constant
        vec![fin("x", &[2]), fin("w", &[2])],
        &["y", "k", "f", "w"],
        vec![tf32("w", &[2], &[3.0, 4.0])],
    );
    let g = import(&m).unwrap();
    assert_eq!(g.inputs.len(), 1);
    assert_eq!(g.nodes.len(), 1);
    let out = |i: usize| g.constant(g.outputs[i]).unwrap().clone();
    assert_eq!(out(1), Tensor::from_i64(vec![2], vec![3, 4]));
    assert_eq!(out(2), Tensor::scalar(0.5f32));
    assert_eq!(out(3), Tensor::from_f32(vec![2], vec![3.0, 4.0]));
    assert_eq!(g.constant(g.nodes[0].inputs[1].unwrap()).unwrap().as_f32().unwrap(), &[1.0, 2.0]);

    let m = model(13, vec![node("Constant", &[], &["s"], vec![astr("value_string", "hi")])], vec![], &["s"], vec![]);
    assert!(matches!(import(&m), Err(Error::Unsupported(m)) if m.contains("value_string")));
}

#[test]
fn input_shapes_from_dims_options_and_notes() {
    let m = model(
        13,
        vec![node("Relu", &["x"], &["y"], vec![])],
        vec![vi("x", dt::FLOAT, Some(vec![D::P("N"), D::V(3), D::U, D::V(-1)]))],
        &["y"],
        vec![],
    );
    let bytes = m.encode_to_vec();
    let (g, notes) = import_unchecked(&bytes, &ImportOptions::default()).unwrap();
    assert_eq!(g.value(g.inputs[0]).shape, vec![1, 3, 1, 1]);
    assert_eq!(notes.len(), 3, "{notes:?}");
    assert!(notes[0].contains("'N'") && notes[0].contains("--dim N=SIZE"), "{notes:?}");
    assert!(notes[1].contains("dim 2") && notes[1].contains("--input-shape x="), "{notes:?}");

    let mut opts = ImportOptions::default();
    opts.dims.insert("N".into(), 8);
    opts.dims.insert("unused".into(), 2);
    let (g, notes) = import_unchecked(&bytes, &opts).unwrap();
    assert_eq!(g.value(g.inputs[0]).shape, vec![8, 3, 1, 1]);
    assert!(notes.iter().any(|n| n.contains("--dim unused")), "{notes:?}");

    let mut opts = ImportOptions::default();
    opts.input_shapes.insert("x".into(), vec![2, 3, 4, 5]);
    let (g, notes) = import_unchecked(&bytes, &opts).unwrap();
    assert_eq!((g.value(g.inputs[0]).shape.clone(), notes.len()), (vec![2, 3, 4, 5], 0));
    opts.input_shapes.insert("x".into(), vec![2, 3]);
    let e = import_unchecked(&bytes, &opts).unwrap_err();
    assert!(matches!(e, Error::InputMismatch(ref m) if m.contains("rank 2")), "{e}");
    let mut opts = ImportOptions::default();
    opts.input_shapes.insert("nope".into(), vec![1]);
    assert!(import_unchecked(&bytes, &opts).unwrap_err().to_string().contains("'nope'"));

    let m = model(13, vec![node("Relu", &["x"], &["y"], vec![])], vec![vi("x", dt::STRING, Some(vec![]))], &["y"], vec![]);
    assert!(matches!(import(&m), Err(Error::Unsupported(m)) if m.contains("input 'x'") && m.contains("STRING")));
}

#[test]
fn sorts_nodes_and_reports_graph_errors() {
    let m =
        model(13, vec![node("Relu", &["h"], &["y"], vec![]), node("Neg", &["x"], &["h"], vec![])], vec![fin("x", &[2])], &["y"], vec![]);
    assert_eq!(ops(&import(&m).unwrap()), vec![Op::Unary(UnaryOp::Neg), Op::Unary(UnaryOp::Relu)]);
    let cyc = model(13, vec![node("Relu", &["h"], &["y"], vec![]), node("Neg", &["y"], &["h"], vec![])], vec![], &["y"], vec![]);
    assert!(import(&cyc).unwrap_err().to_string().contains("cycle"));
    let missing = model(13, vec![node("Relu", &["nope"], &["y"], vec![])], vec![], &["y"], vec![]);
    assert!(import(&missing).unwrap_err().to_string().contains("'nope'"));
    let twice =
        model(13, vec![node("Relu", &["x"], &["y"], vec![]), node("Neg", &["x"], &["y"], vec![])], vec![fin("x", &[1])], &["y"], vec![]);
    assert!(import(&twice).unwrap_err().to_string().contains("more than one"));

    // unknown op / domain / attribute / attribute type
    let e = one(13, "Frobnicate", &[1], vec![]).unwrap_err();
    assert_eq!(e.to_string(), "unsupported: op 'Frobnicate' (node 'Frobnicate_node', domain '', opset 13) is not supported");
    let mut m = model(13, vec![node("Relu", &["x"], &["y"], vec![])], vec![fin("x", &[1])], &["y"], vec![]);
    m.graph.as_mut().unwrap().node[0].domain = Some("com.microsoft".into());
    assert!(import(&m).unwrap_err().to_string().contains("domain 'com.microsoft'"));
    let e = one(13, "Relu", &[1], vec![ai("alpha", 1)]).unwrap_err();
    assert!(matches!(e, Error::Unsupported(ref m) if m.contains("'alpha'") && m.contains("Relu_node")), "{e}");
    let e = one(13, "LeakyRelu", &[1], vec![ai("alpha", 1)]).unwrap_err();
    assert!(matches!(e, Error::InvalidModel(ref m) if m.contains("'alpha'") && m.contains("must be a float")), "{e}");
    let mut sub = attr("then_branch", at::GRAPH);
    sub.g = Some(GraphProto::default());
    let e = one(13, "If", &[1], vec![sub.clone()]).unwrap_err();
    assert!(matches!(e, Error::InvalidModel(ref m) if m.contains("If_node") && m.contains("no graph attribute 'else_branch'")), "{e}");
    // ops other than If/Loop/Scan with a subgraph attribute (SequenceMap, ...) are refused by name
    let mut body = attr("body", at::GRAPH);
    body.g = Some(GraphProto::default());
    let e = one(17, "SequenceMap", &[1], vec![body]).unwrap_err();
    assert!(matches!(e, Error::Unsupported(ref m) if m.contains("'SequenceMap'") && m.contains("subgraph")), "{e}");
    assert!(matches!(one(12, "Einsum", &[1], vec![astr("equation", "i->i")]), Err(Error::Unsupported(_))));

    // an empty output name still gets a value
    let m = model(13, vec![node("TopK", &["x", "k"], &["", "i"], vec![])], vec![fin("x", &[4])], &["i"], vec![ti64("k", &[1], &[2])]);
    let g = import(&m).unwrap();
    assert_eq!(g.nodes[0].outputs.len(), 2);
    assert_eq!(g.outputs[0], g.nodes[0].outputs[1]);
}

#[test]
fn inlines_model_local_functions() {
    // function Scaled(x) -> y: y = LeakyRelu<alpha = @a>(x) + x
    let mut alpha = af("alpha", 0.0);
    alpha.ref_attr_name = Some("a".into());
    alpha.r#type = Some(at::FLOAT);
    alpha.f = None;
    let f = FunctionProto {
        name: Some("Scaled".into()),
        domain: Some("local".into()),
        input: vec!["x".into()],
        output: vec!["y".into()],
        attribute: vec!["a".into()],
        node: vec![node("LeakyRelu", &["x"], &["t"], vec![alpha]), node("Add", &["t", "x"], &["y"], vec![])],
        opset_import: vec![OperatorSetIdProto { domain: Some(String::new()), version: Some(14) }],
        ..Default::default()
    };
    let mut call = node("Scaled", &["in"], &["out"], vec![af("a", 0.25)]);
    call.domain = Some("local".into());
    let mut m = model(14, vec![call.clone(), node("Neg", &["out"], &["z"], vec![])], vec![fin("in", &[2])], &["z"], vec![]);
    m.functions = vec![f];
    m.opset_import.push(OperatorSetIdProto { domain: Some("local".into()), version: Some(1) });
    let g = import(&m).unwrap();
    assert_eq!(ops(&g), vec![Op::Unary(UnaryOp::LeakyRelu { alpha: 0.25 }), Op::Binary(BinaryOp::Add, None), Op::Unary(UnaryOp::Neg)]);
    assert_eq!(g.nodes[1].inputs[1], Some(g.inputs[0]));

    // a function that calls itself, and calls that multiply at every level, are errors, not hangs
    let mut rec = FunctionProto {
        name: Some("F".into()),
        domain: Some("local".into()),
        input: vec!["x".into()],
        output: vec!["y".into()],
        ..Default::default()
    };
    let mut inner = node("F", &["x"], &["y"], vec![]);
    inner.domain = Some("local".into());
    rec.node = vec![inner.clone(); 40];
    let mut call = node("F", &["in"], &["out"], vec![]);
    call.domain = Some("local".into());
    let mut m = model(14, vec![call], vec![fin("in", &[2])], &["out"], vec![]);
    m.functions = vec![rec];
    assert!(import(&m).is_err());
}

#[test]
fn rejects_garbage_without_panicking() {
    assert!(matches!(super::load_bytes(&[], None, &ImportOptions::default()), Err(Error::InvalidModel(_))));
    assert!(super::load_bytes(b"not a model at all", None, &ImportOptions::default()).is_err());
    // a model whose graph is missing
    let m = ModelProto { ir_version: Some(8), ..Default::default() };
    assert!(super::load_bytes(&m.encode_to_vec(), None, &ImportOptions::default()).unwrap_err().to_string().contains("no graph"));
    // every prefix of a small model, and pseudo-random bytes
    let m = model(
        13,
        vec![node("Conv", &["x", "w"], &["y"], vec![ais("kernel_shape", &[1, 1])])],
        vec![fin("x", &[1, 1, 2, 2])],
        &["y"],
        vec![tf32("w", &[1, 1, 1, 1], &[2.0])],
    );
    let bytes = m.encode_to_vec();
    for len in 0..bytes.len() {
        let _ = import_unchecked(&bytes[..len], &ImportOptions::default());
        let _ = super::load_bytes(&bytes[..len], None, &ImportOptions::default());
    }
    let mut state = 0x2545_f491_4f6c_dd1du64;
    for _ in 0..2000 {
        let len = (state % 300) as usize;
        let buf: Vec<u8> = (0..len)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                state as u8
            })
            .collect();
        let _ = super::load_bytes(&buf, None, &ImportOptions::default());
    }
}

#[test]
fn full_import_of_a_graph_without_ops() {
    // Needs no kernel: constants (one unused, dropped) and a passthrough input.
    let m = model(
        13,
        vec![
            node("Constant", &[], &["c"], vec![ais("value_ints", &[1, 2])]),
            node("Constant", &[], &["unused"], vec![af("value_float", 1.0)]),
        ],
        vec![fin("x", &[2]), vi("n", dt::INT64, Some(vec![D::P("batch")]))],
        &["x", "c", "w"],
        vec![tf32("w", &[1], &[5.0])],
    );
    let mut opts = ImportOptions::default();
    opts.dims.insert("batch".into(), 3);
    let (g, notes) = super::load_bytes_with_notes(&m.encode_to_vec(), None, &opts).unwrap();
    assert!(notes.is_empty(), "{notes:?}");
    assert_eq!(g.values.len(), 4);
    assert_eq!(g.inputs.len(), 2);
    assert_eq!(g.value(g.inputs[1]).shape, vec![3]);
    assert_eq!(g.outputs[0], g.inputs[0]);
    assert_eq!(g.constant(g.outputs[1]).unwrap().to_i64_vec(), vec![1, 2]);
}


/// Imports the models in `TPU_SDK_ONNX_DEV` (comma-separated files, or a folder of `<case>/model.onnx`)
/// without inference and prints what they map to: a development aid, a no-op without the variable.
#[test]
fn dev_unchecked_file() {
    let Ok(p) = std::env::var("TPU_SDK_ONNX_DEV") else { return };
    let mut files: Vec<String> = p.split(',').map(String::from).collect();
    if std::path::Path::new(&p).is_dir() {
        files = std::fs::read_dir(&p).unwrap().flatten().map(|e| e.path().join("model.onnx").display().to_string()).collect();
        files.sort();
    }
    for p in &files {
        let Ok(bytes) = std::fs::read(p) else { continue };
        match import_unchecked(&bytes, &ImportOptions::default()) {
            Ok((g, notes)) => {
                let mut counts = std::collections::BTreeMap::new();
                for n in &g.nodes {
                    *counts.entry(n.op.name()).or_insert(0) += 1;
                }
                eprintln!("OK {p}: {} nodes {counts:?} notes {notes:?}", g.nodes.len());
            }
            Err(e) => eprintln!("ERR {p}: {e}"),
        }
    }
}
