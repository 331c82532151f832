//! LSTM / GRU / RNN import: malformed nodes are refused with an error that names the node and says what is wrong.

use super::*;

/// An LSTM node "LSTM_node" over x [2, 1, 3] with zero weights W of `w` and R of `r`.
fn lstm(w: &[i64], r: &[i64], attrs: Vec<AttributeProto>) -> crate::Result<Graph> {
    let zeros = |dims: &[i64]| vec![0.0; dims.iter().product::<i64>() as usize];
    let m = model(
        14,
        vec![node("LSTM", &["x", "w", "r"], &["y", "y_h"], attrs)],
        vec![fin("x", &[2, 1, 3])],
        &["y", "y_h"],
        vec![tf32("w", w, &zeros(w)), tf32("r", r, &zeros(r))],
    );
    load_bytes(&m.encode_to_vec(), None, &ImportOptions::default())
}

fn err(r: crate::Result<Graph>) -> String {
    r.err().map(|e| e.to_string()).unwrap_or_else(|| "imported".into())
}

fn strings(name: &str, v: &[&str]) -> AttributeProto {
    AttributeProto { strings: v.iter().map(|s| s.as_bytes().to_vec()).collect(), ..attr(name, at::STRINGS) }
}

#[test]
fn a_well_formed_lstm_imports_with_its_shapes() {
    let g = lstm(&[1, 16, 3], &[1, 16, 4], vec![ai("hidden_size", 4)]).unwrap();
    let n = g.nodes.iter().find(|n| matches!(n.op, Op::Rnn(_))).unwrap();
    assert_eq!(g.value(n.outputs[0]).shape, vec![2, 1, 1, 4]);
    assert_eq!(g.value(n.outputs[1]).shape, vec![1, 1, 4]);
    // hidden_size may be left out: R's shape gives it.
    lstm(&[1, 16, 3], &[1, 16, 4], vec![]).unwrap();
}

#[test]
fn malformed_recurrent_nodes_are_refused_naming_the_node() {
    let e = err(lstm(&[1, 16, 5], &[1, 16, 4], vec![ai("hidden_size", 4)]));
    assert!(e.contains("LSTM_node") && e.contains("input W has shape [1, 16, 5], expected [1, 16, 3]"), "{e}");
    let e = err(lstm(&[1, 16, 3], &[1, 16, 4], vec![ai("hidden_size", 5)]));
    assert!(e.contains("LSTM_node") && e.contains("hidden_size") && e.contains("[1, 16, 4]"), "{e}");
    let e = err(lstm(&[1, 16, 3], &[1, 16, 4], vec![ai("hidden_size", 4), strings("activations", &["Sigmoid", "Gelu", "Tanh"])]));
    assert!(e.contains("LSTM_node") && e.contains("'Gelu'") && e.contains("not a recurrent activation"), "{e}");
    let bi = astr("direction", "bidirectional");
    let e = err(lstm(&[2, 16, 3], &[2, 16, 4], vec![bi.clone(), strings("activations", &["Sigmoid", "Tanh", "Tanh"])]));
    assert!(e.contains("LSTM_node") && e.contains("3 per direction (6 in all)"), "{e}");
    let e = err(lstm(&[1, 16, 3], &[1, 16, 4], vec![bi]));
    assert!(e.contains("LSTM_node") && e.contains("expected [2, 16, 3]"), "{e}");
    let e = err(lstm(&[1, 16, 3], &[1, 16, 4], vec![ai("layout", 2)]));
    assert!(e.contains("LSTM_node") && e.contains("'layout' must be 0 or 1"), "{e}");
    let e = err(lstm(&[1, 16, 3], &[1, 16, 4], vec![astr("direction", "sideways")]));
    assert!(e.contains("LSTM_node") && e.contains("sideways"), "{e}");
}
