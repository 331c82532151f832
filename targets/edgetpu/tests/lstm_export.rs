//! LSTM export as TFLite `UNIDIRECTIONAL_SEQUENCE_LSTM` (and simple RNNs as `UNIDIRECTIONAL_SEQUENCE_RNN`), float: ONNX LSTMs (torch exports and single nodes,
//! `tests/data/make_lstm_models.py`; the CRNN text recognizer of core's recurrent tests) are imported, exported,
//! and run by LiteRT's builtin kernels; every output must equal onnxruntime's (ONNX's reference implementation
//! for batch-major `layout` 1, which onnxruntime does not run) within 1e-4 relative (per element:
//! |LiteRT - ort| <= 1e-4 · (|ort| + mean |ort|)). What TFLite's op cannot express is refused naming the node.

use std::path::{Path, PathBuf};

use tpu_sdk_core::import::onnx::{load, ImportOptions};
use tpu_sdk_core::ir::Tensor;
use tpu_sdk_edgetpu::export::{export, ExportOptions};
use tpu_sdk_test_support::{fresh_dir, litert, onnxruntime, oracle, random_inputs, relative_to_mean, repo};

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/lstm").join(format!("{name}.onnx"))
}

/// The TFLite op names of a model, in order.
fn ops_of(bytes: &[u8]) -> Vec<String> {
    use tpu_sdk_core::format::tflite::schema;
    let m = schema::parse_model(bytes).unwrap();
    let sg = m.subgraphs().unwrap().get(0);
    let codes = m.operator_codes().unwrap();
    sg.operators().unwrap().iter().map(|o| codes.get(o.opcode_index() as usize).name()).collect()
}

/// Exports `path`, runs it on LiteRT and onnxruntime with the same inputs; the exported op names.
fn check(py: &Path, tmp: &Path, path: &Path) -> Vec<String> {
    let stem = path.file_stem().unwrap().to_string_lossy().to_string();
    let mut g = load(path, &ImportOptions::default()).unwrap();
    tpu_sdk_core::passes::optimize(&mut g).unwrap();
    let inputs = random_inputs(&g, 7);
    let ex = export(&g, &ExportOptions::default()).unwrap_or_else(|e| panic!("{stem}: export refused: {e}"));
    let ops = ops_of(&ex.bytes);
    let file_inputs: Vec<Tensor> = inputs.iter().zip(&ex.inputs).map(|(t, i)| t.permuted(&i.perm)).collect();
    let theirs = litert::run_bytes(py, &ex.bytes, litert::REFERENCE, &[file_inputs]).unwrap_or_else(|e| panic!("{stem}: LiteRT: {e}")).remove(0);
    let named: Vec<(String, Tensor)> = g.inputs.iter().zip(&inputs).map(|(&i, t)| (g.value(i).name.clone(), t.clone())).collect();
    // onnxruntime has no batch-major (layout 1) recurrent kernel: ONNX's reference implementation runs those.
    let batch_major = stem.contains("layout1");
    let (peer, ort) = if batch_major {
        ("ONNX reference", reference_model(py, path, &named, &tmp.join(&stem)))
    } else {
        ("onnxruntime", onnxruntime::run_model(py, path, &named, &tmp.join(&stem)))
    };
    assert_eq!(theirs.len(), ort.len(), "{stem}: outputs");
    for (k, (a, b)) in theirs.iter().zip(&ort).enumerate() {
        assert_eq!(a.shape, b.shape, "{stem}: output {k}");
        let worst = relative_to_mean(&stem, k, a, b, peer, 1e-4).unwrap_or_else(|e| panic!("{e}"));
        println!("{stem:<28} output {k} {:?}: LiteRT vs {peer} worst relative error {worst:.2e}; ops {ops:?}", a.shape);
    }
    ops
}

/// The ONNX model `path` evaluated by `onnx.reference.ReferenceEvaluator` on the named inputs.
fn reference_model(py: &Path, path: &Path, inputs: &[(String, Tensor)], dir: &Path) -> Vec<Tensor> {
    std::fs::create_dir_all(dir).unwrap();
    let mut args = vec![path.display().to_string(), dir.display().to_string()];
    for (k, (name, t)) in inputs.iter().enumerate() {
        let p = dir.join(format!("input_{k}.npy"));
        tpu_sdk_core::npy::write(&p, t).unwrap();
        args.push(format!("{name}={}", p.display()));
    }
    let script = r#"
import sys, os, numpy as np, onnx
from onnx.reference import ReferenceEvaluator
model, out = sys.argv[1], sys.argv[2]
feeds = {a.split("=", 1)[0]: np.load(a.split("=", 1)[1]) for a in sys.argv[3:]}
for k, r in enumerate(ReferenceEvaluator(onnx.load(model)).run(None, feeds)):
    np.save(os.path.join(out, f"output_{k}.npy"), np.ascontiguousarray(r))
"#;
    let st = std::process::Command::new(py).arg("-c").arg(script).args(&args).status().unwrap();
    assert!(st.success(), "onnx.reference failed on {}", path.display());
    (0..).map(|k| dir.join(format!("output_{k}.npy"))).take_while(|p| p.exists()).map(|p| tpu_sdk_core::npy::read(&p).unwrap()).collect()
}

fn count(ops: &[String], op: &str) -> usize {
    ops.iter().filter(|o| *o == op).count()
}

#[test]
fn forward_lstms_export_as_one_unidirectional_sequence_lstm() {
    let Some(py) = oracle::python() else { return };
    let tmp = fresh_dir("lstm-export-forward");
    for m in ["lstm_forward_batch_first", "lstm_relu"] {
        let ops = check(&py, &tmp, &data(m));
        assert_eq!(count(&ops, "UNIDIRECTIONAL_SEQUENCE_LSTM"), 1, "{m}: {ops:?}");
        assert_eq!(count(&ops, "REVERSE_V2"), 0, "{m}: {ops:?}");
    }
}

/// A forward LSTM whose initial states are graph inputs and whose final cell state is read (a streaming model's
/// cell, as in silero-vad): TFLite's LSTM starts from zero and has no cell-state output, so the export unrolls it
/// into the cell's arithmetic (FULLY_CONNECTED, SPLIT, LOGISTIC, TANH, MUL, ADD per step); all three outputs equal
/// onnxruntime's.
#[test]
fn an_lstm_with_state_inputs_exports_unrolled() {
    let Some(py) = oracle::python() else { return };
    let tmp = fresh_dir("lstm-export-state-inputs");
    let ops = check(&py, &tmp, &data("lstm_state_inputs"));
    assert_eq!(count(&ops, "UNIDIRECTIONAL_SEQUENCE_LSTM"), 0, "{ops:?}");
    assert_eq!(count(&ops, "FULLY_CONNECTED"), 6, "two per step of 3: {ops:?}");
    assert_eq!(count(&ops, "LOGISTIC"), 9, "{ops:?}");
}

#[test]
fn a_reverse_lstm_runs_between_two_reverses_and_its_final_state_is_the_last_step() {
    let Some(py) = oracle::python() else { return };
    let tmp = fresh_dir("lstm-export-reverse");
    let ops = check(&py, &tmp, &data("lstm_reverse_peepholes_yh"));
    assert_eq!(count(&ops, "UNIDIRECTIONAL_SEQUENCE_LSTM"), 1, "{ops:?}");
    assert_eq!(count(&ops, "REVERSE_V2"), 2, "{ops:?}");
}

#[test]
fn bidirectional_lstms_become_two_unidirectional_ones_and_a_concatenation() {
    let Some(py) = oracle::python() else { return };
    let tmp = fresh_dir("lstm-export-bidirectional");
    for (m, layers) in [("lstm_bi_layout1_yh", 1), ("lstm_bi2_time_major", 2)] {
        let ops = check(&py, &tmp, &data(m));
        assert_eq!(count(&ops, "UNIDIRECTIONAL_SEQUENCE_LSTM"), 2 * layers, "{m}: {ops:?}");
        assert_eq!(count(&ops, "REVERSE_V2"), 2 * layers, "{m}: {ops:?}");
        assert!(count(&ops, "CONCATENATION") >= layers, "{m}: {ops:?}");
    }
    // The CRNN text recognizer: convolutions, two bidirectional LSTM layers, a classifier per column.
    let ops = check(&py, &tmp, &repo().join("core/tests/data/rnn/crnn.onnx"));
    assert_eq!(count(&ops, "UNIDIRECTIONAL_SEQUENCE_LSTM"), 4, "crnn: {ops:?}");
}

/// Simple (Elman) RNNs export as UNIDIRECTIONAL_SEQUENCE_RNN the same way: a bidirectional tanh RNN with Y_h, a
/// reverse Relu RNN, a reverse batch-major tanh RNN, and torch's 2-layer tanh RNN returning its final states.
#[test]
fn simple_rnns_export_as_unidirectional_sequence_rnn() {
    let Some(py) = oracle::python() else { return };
    let tmp = fresh_dir("lstm-export-rnn");
    let models = [(data("rnn_bi_tanh_yh"), 2), (data("rnn_reverse_relu"), 1), (data("rnn_reverse_tanh_layout1"), 1), (repo().join("core/tests/data/rnn/rnn_tanh2.onnx"), 2)];
    for (path, ops_per_dir) in models {
        let ops = check(&py, &tmp, &path);
        assert_eq!(count(&ops, "UNIDIRECTIONAL_SEQUENCE_RNN"), ops_per_dir, "{}: {ops:?}", path.display());
    }
}

/// What TFLite's op cannot express is refused, naming the node and the reason.
#[test]
fn lstms_tflite_cannot_express_are_refused_naming_the_node_and_reason() {
    let root = repo().join("core/tests/data/rnn");
    for (model, node, why) in [
        ("lstm_bi2_batch_first", "/rnn/LSTM", "Y_c"),
        ("lstm_peephole_clip_forget_acts", "", "gate clip"),
        ("lstm_bi_lens_long", "", "sequence_lens"),
        ("rnn_bi_relu_leaky", "", "RNN export"),
    ] {
        let mut g = load(&root.join(format!("{model}.onnx")), &ImportOptions::default()).unwrap();
        tpu_sdk_core::passes::optimize(&mut g).unwrap();
        let e = export(&g, &ExportOptions::default()).unwrap_err().to_string();
        assert!(e.contains(&format!("'{node}")) && e.contains("UNIDIRECTIONAL_SEQUENCE") && e.contains(why), "{model}: {e}");
    }
}

/// A Keras LSTM stack converted by TensorFlow (core/tests/data/rnn/keras_lstm.tflite: cell_clip 10, a
/// Bidirectional LSTM between REVERSE_V2s) imported and exported again: LiteRT computes the same on both files.
#[test]
fn a_converted_keras_lstm_reexports() {
    use tpu_sdk_core::import::tflite;
    let Some(py) = oracle::python() else { return };
    let path = repo().join("core/tests/data/rnn/keras_lstm.tflite");
    let mut g = tflite::load(&path, &tflite::ImportOptions::default()).unwrap();
    tpu_sdk_core::passes::optimize(&mut g).unwrap();
    let inputs = random_inputs(&g, 3);
    let ex = export(&g, &ExportOptions::default()).unwrap();
    assert_eq!(count(&ops_of(&ex.bytes), "UNIDIRECTIONAL_SEQUENCE_LSTM"), 4);
    let theirs = litert::run_file(&py, &path, litert::REFERENCE, std::slice::from_ref(&inputs)).unwrap().remove(0);
    let ours = litert::run_bytes(&py, &ex.bytes, litert::REFERENCE, &[inputs]).unwrap().remove(0);
    let worst = relative_to_mean("keras_lstm re-exported", 0, &ours[0], &theirs[0], "the converted file", 1e-5).unwrap_or_else(|e| panic!("{e}"));
    println!("keras_lstm.tflite re-exported: worst relative error {worst:.2e} against the converted file, both on LiteRT");
}
