//! Recurrent models (LSTM, GRU, RNN) on the CPU runtime against onnxruntime: every output within 1e-4
//! relative (per element: |ours - ort| <= 1e-4 · (|ort| + mean |ort|)).
//!
//! The models are `core/tests/data/rnn/*.onnx`, written by `core/tests/data/make_rnn_models.py`: torch exports
//! (2-layer bidirectional batch-first LSTM and GRU, a 2-layer tanh RNN, a CRNN text recognizer with a
//! bidirectional LSTM) and single nodes with the attributes exporters rarely write (peepholes, clip,
//! input_forget, alpha/beta activations, sequence_lens with a zero length, linear_before_reset). onnxruntime runs through `scripts/ort_run.py` with the Python in
//! `TPU_SDK_PYTHON`; without it the comparison says so and passes, unless `TPU_SDK_REQUIRE_ORACLES=1`.

use std::path::{Path, PathBuf};

use tpu_sdk_core::import::onnx::{load, ImportOptions};
use tpu_sdk_core::runtime::Session;
use tpu_sdk_test_support::{fresh_dir, onnxruntime, oracle, random_inputs, relative_to_mean, repo};

/// The committed recurrent models.
fn models() -> Vec<PathBuf> {
    let dir = repo().join("core/tests/data/rnn");
    let mut v: Vec<PathBuf> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).filter(|p| p.extension().is_some_and(|e| e == "onnx")).collect();
    v.sort();
    assert!(v.len() >= 8, "expected the models of make_rnn_models.py in {}", dir.display());
    v
}

fn check(py: &Path, tmp: &Path, path: &Path) -> Result<f64, String> {
    let stem = path.file_stem().unwrap().to_string_lossy().to_string();
    let mut g = load(path, &ImportOptions::default()).map_err(|e| format!("{stem}: load: {e}"))?;
    tpu_sdk_core::passes::optimize(&mut g).map_err(|e| format!("{stem}: optimize: {e}"))?;
    let inputs = random_inputs(&g, 11);
    let ours = Session::new(g.clone()).and_then(|mut s| s.run(&inputs)).map_err(|e| format!("{stem}: run: {e}"))?;
    let worst = onnxruntime::worst_vs_onnxruntime(py, path, &g, inputs, &ours, tmp, 1e-4)?;
    let rnn_nodes = g.nodes.iter().filter(|n| matches!(n.op, tpu_sdk_core::ir::Op::Rnn(_))).count();
    println!("{stem:<36} {rnn_nodes} recurrent nodes, {} outputs, worst relative error {worst:.2e}", ours.len());
    Ok(worst)
}

#[test]
fn recurrent_models_match_onnxruntime() {
    let Some(py) = oracle::python() else { return };
    let tmp = fresh_dir("rnn-models");
    let failures: Vec<String> = models().iter().filter_map(|m| check(&py, &tmp, m).err()).collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// A Keras 2 LSTM stack (LSTM, Bidirectional LSTM, LSTM returning its last step) converted by TensorFlow's
/// converter into UNIDIRECTIONAL_SEQUENCE_LSTM ops (`core/tests/data/make_rnn_tflite.py`): the TFLite import
/// run by the CPU runtime, against LiteRT's builtin kernels on the same file and inputs (1e-4 relative).
#[test]
fn keras_lstm_tflite_matches_litert() {
    use tpu_sdk_core::import::tflite;
    use tpu_sdk_test_support::litert;
    let Some(py) = oracle::python() else { return };
    let path = repo().join("core/tests/data/rnn/keras_lstm.tflite");
    let mut g = tflite::load(&path, &tflite::ImportOptions::default()).unwrap();
    let lstms = g.nodes.iter().filter(|n| matches!(n.op, tpu_sdk_core::ir::Op::Rnn(_))).count();
    assert_eq!(lstms, 4, "the four UNIDIRECTIONAL_SEQUENCE_LSTM ops import as recurrent nodes");
    tpu_sdk_core::passes::optimize(&mut g).unwrap();
    let inputs = random_inputs(&g, 5);
    let theirs = litert::run_file(&py, &path, litert::OPTIMIZED, std::slice::from_ref(&inputs)).unwrap().remove(0);
    let ours = Session::new(g).and_then(|mut s| s.run(&inputs)).unwrap();
    assert_eq!(ours.len(), theirs.len());
    for (k, (a, b)) in ours.iter().zip(&theirs).enumerate() {
        assert_eq!(a.shape, b.shape, "output {k}");
        let worst = relative_to_mean("keras_lstm.tflite", k, a, b, "LiteRT", 1e-4).unwrap_or_else(|e| panic!("{e}"));
        println!("keras_lstm.tflite output {k} {:?}: worst relative error vs LiteRT {worst:.2e}", a.shape);
    }
}

/// TFLite control flow (`core/tests/data/make_control_flow_tflite.py`, TensorFlow's converter): Keras 3 GRU, LSTM
/// and SimpleRNN layers as WHILE loops over TensorArray reads and writes, and a tf.function with tf.cond (IF) and
/// a tf.while_loop whose trip count depends on the data (WHILE), imported as the IR's Loop and If and run by the
/// CPU runtime against LiteRT's builtin kernels on the same inputs (1e-4 relative; several seeds, so the IF takes
/// both branches and the WHILE different trip counts).
#[test]
fn tflite_while_and_if_match_litert() {
    use tpu_sdk_core::import::tflite;
    use tpu_sdk_core::ir::{Op, Tensor};
    use tpu_sdk_test_support::litert;
    let Some(py) = oracle::python() else { return };
    for (file, loops, ifs) in [("keras3_recurrent.tflite", 3, 0), ("tf_cond_while.tflite", 1, 1)] {
        let path = repo().join("core/tests/data/rnn").join(file);
        let mut g = tflite::load(&path, &tflite::ImportOptions::default()).unwrap_or_else(|e| panic!("{file}: {e}"));
        let count = |g: &tpu_sdk_core::ir::Graph, f: fn(&Op) -> bool| g.nodes.iter().filter(|n| f(&n.op)).count();
        assert_eq!(count(&g, |o| matches!(o, Op::Loop(_))), loops, "{file}: WHILE → Loop");
        assert_eq!(count(&g, |o| matches!(o, Op::If(_))), ifs, "{file}: IF → If");
        tpu_sdk_core::passes::optimize(&mut g).unwrap();
        let mut steps = std::collections::BTreeSet::new();
        for seed in 1..=6u64 {
            // inputs of both signs and several magnitudes: the IF's branch and the WHILE's trip count vary
            let inputs: Vec<Tensor> = random_inputs(&g, seed)
                .into_iter()
                .map(|t| {
                    let s = if seed % 2 == 0 { -1.0 } else { 1.0 } * (1.0 + seed as f32);
                    Tensor::from_f32(t.shape.clone(), t.as_f32().unwrap().iter().map(|v| v.abs() * s).collect())
                })
                .collect();
            let theirs = litert::run_file(&py, &path, litert::OPTIMIZED, std::slice::from_ref(&inputs)).unwrap().remove(0);
            let ours = Session::new(g.clone()).and_then(|mut s| s.run(&inputs)).unwrap_or_else(|e| panic!("{file}: {e}"));
            assert_eq!(ours.len(), theirs.len(), "{file}");
            for (k, (a, b)) in ours.iter().zip(&theirs).enumerate() {
                assert_eq!(a.shape, b.shape, "{file} output {k}");
                if a.dtype().is_int() {
                    assert_eq!(a.to_i64_vec(), b.to_i64_vec(), "{file} output {k} (seed {seed})");
                    steps.insert(a.to_i64_vec()[0]);
                } else {
                    relative_to_mean(file, k, a, b, "LiteRT", 1e-4).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
                }
            }
        }
        if ifs > 0 {
            assert!(steps.len() >= 2, "{file}: the WHILE ran {steps:?} times for every input; the seeds should vary it");
        }
        println!("{file}: {loops} WHILE, {ifs} IF, equal to LiteRT on 6 inputs (trip counts {steps:?})");
    }
}

/// Keras LSTMs fully quantized by TensorFlow's converter (`core/tests/data/make_rnn_int8_tflite.py`): the stack
/// above (four integer "8x8_16" UNIDIRECTIONAL_SEQUENCE_LSTMs with int8 weights per gate and an int16 cell state,
/// REVERSE_V2, CONCATENATION, STRIDED_SLICE; its last LSTM has a cell scale of 2^-17, outside what LiteRT's
/// integer tanh handles) and one LSTM. Imported and run by the CPU runtime, every value equals what LiteRT's
/// optimized and reference kernels compute.
#[test]
fn keras_int8_lstm_tflite_is_bit_equal_with_litert() {
    for (file, lstms) in [("keras_lstm_int8.tflite", 4), ("keras_lstm1_int8.tflite", 1)] {
        int8_file_is_bit_equal_with_litert(file, lstms);
    }
}

fn int8_file_is_bit_equal_with_litert(file: &str, want_lstms: usize) {
    use tpu_sdk_core::import::tflite;
    use tpu_sdk_test_support::{differing, litert};
    let Some(py) = oracle::python() else { return };
    let path = repo().join("core/tests/data/rnn").join(file);
    let g = tflite::load(&path, &tflite::ImportOptions::default()).unwrap();
    let lstms = g.nodes.iter().filter(|n| matches!(n.op, tpu_sdk_core::ir::Op::Rnn(_))).count();
    assert_eq!(lstms, want_lstms, "{file}: the integer LSTMs import as recurrent nodes");
    let sets: Vec<Vec<tpu_sdk_core::ir::Tensor>> = (0..3).map(|s| random_inputs(&g, 20 + s)).collect();
    let mut session = Session::new(g).unwrap();
    for resolver in [litert::OPTIMIZED, litert::REFERENCE] {
        let theirs = litert::run_file(&py, &path, resolver, &sets).unwrap();
        for (i, (set, want)) in sets.iter().zip(&theirs).enumerate() {
            let ours = session.run(set).unwrap();
            assert_eq!(ours.len(), want.len());
            for (k, (a, b)) in ours.iter().zip(want).enumerate() {
                assert_eq!(a.shape, b.shape);
                assert_eq!(differing(a, b), 0, "{file} {resolver}: sample {i} output {k}: ours {:?} LiteRT {:?}", a.to_f64_vec(), b.to_f64_vec());
            }
        }
        println!("{file}: 0 values differ from LiteRT ({resolver}) on {} samples", sets.len());
    }
}
