//! Recurrent layers in the TFLite export: an LSTM exports as UNIDIRECTIONAL_SEQUENCE_LSTM and a simple RNN as
//! UNIDIRECTIONAL_SEQUENCE_RNN (tests/lstm_export.rs); a GRU, which TFLite has no op for, exports unrolled into
//! the cell's arithmetic (`quant::decompose::unrolled_gru`: GATHER, FULLY_CONNECTED, SPLIT, LOGISTIC, TANH,
//! MUL, ADD, SUB, CONCATENATION), as TensorFlow's converter unrolls a Keras GRU. The unrolled file runs in
//! LiteRT's builtin kernels equal to onnxruntime (onnx's reference evaluator for the batch-major layout, which
//! onnxruntime does not implement) on the torch-exported 2-layer bidirectional GRU and on single-node GRUs with
//! every attribute the unrolling handles (`scripts/make_unrolled_rnn_models.py`); in int8 it quantizes like any
//! other ops and our int8 runtime equals LiteRT exactly. The same for an LSTM that unrolls because it starts from
//! a given cell state (and no hidden state) and its final cell state is read. A GRU it cannot unroll (a ScaledTanh activation) is refused
//! naming the node. Needs `$TPU_SDK_PYTHON`; without it the oracle tests say so and pass, unless
//! `TPU_SDK_REQUIRE_ORACLES=1`.

mod int8_support;

use std::path::{Path, PathBuf};

use tpu_sdk_core::import::onnx::{load, ImportOptions};
use tpu_sdk_core::ir::{Graph, Tensor};
use tpu_sdk_edgetpu::export::{export, ExportOptions};
use tpu_sdk_test_support::{fresh_dir, litert, onnxruntime, oracle, random_inputs, relative_to_mean};

fn rnn_data() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../core/tests/data/rnn")
}

fn loaded(path: &Path) -> Graph {
    let mut g = load(path, &ImportOptions::default()).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    tpu_sdk_core::passes::optimize(&mut g).unwrap();
    g
}

#[test]
fn a_gru_it_cannot_unroll_is_refused_naming_the_node() {
    let g = loaded(&rnn_data().join("gru_reverse_scaled_tanh.onnx"));
    let e = export(&g, &ExportOptions::default()).unwrap_err().to_string();
    assert!(e.contains("GRU") && e.contains("not supported on edgetpu") && e.contains("--target cloud-tpu"), "{e}");
}

#[test]
fn a_gru_longer_than_the_unrolling_takes_is_refused_saying_so() {
    let Some(py) = oracle::python() else { return };
    let dir = fresh_dir("gru_too_long");
    oracle::run_script(&py, "scripts/make_unrolled_rnn_models.py", &[&dir]);
    let g = loaded(&dir.join("gru_too_long.onnx"));
    let e = export(&g, &ExportOptions::default()).unwrap_err().to_string();
    let limit = format!("at most {} steps", tpu_sdk_core::quant::MAX_UNROLLED_GRU_STEPS);
    assert!(e.contains("'/gru_too_long/GRU'") && e.contains(&limit), "{e}");
}

#[test]
fn lstms_and_rnns_export() {
    for model in ["crnn", "rnn_tanh2"] {
        export(&loaded(&rnn_data().join(format!("{model}.onnx"))), &ExportOptions::default()).unwrap();
    }
}

/// The models: the torch export and the single-node GRUs, each with whether onnxruntime runs it.
fn gru_models(py: &Path, dir: &Path) -> Vec<(PathBuf, bool)> {
    oracle::run_script(py, "scripts/make_unrolled_rnn_models.py", &[dir]);
    let mut m = vec![(rnn_data().join("gru_bi2_batch_first.onnx"), true)];
    for (name, ort) in [("gru_reset_before_h0", true), ("gru_bi_batch_major", false), ("gru_reverse_no_bias", true), ("gru_one_step", true), ("lstm_c0_only", true)] {
        m.push((dir.join(format!("{name}.onnx")), ort));
    }
    m
}

fn stem(p: &Path) -> String {
    p.file_stem().unwrap().to_string_lossy().into_owned()
}

#[test]
fn grus_export_unrolled_and_litert_runs_them_like_onnxruntime() {
    let Some(py) = oracle::python() else { return };
    let dir = fresh_dir("gru_export");
    for (path, ort) in gru_models(&py, &dir) {
        let name = stem(&path);
        let g = loaded(&path);
        let ex = export(&g, &ExportOptions::default()).unwrap_or_else(|e| panic!("{name}: export refused: {e}"));
        let ops = int8_support::ops_of(&ex.bytes);
        assert!(
            ops.iter().any(|o| o == "FULLY_CONNECTED") && ops.iter().any(|o| o == "LOGISTIC") && ops.iter().any(|o| o == "TANH") && !ops.iter().any(|o| o.contains("RNN") || o.contains("LSTM") || o == "WHILE"),
            "{name}: {ops:?}"
        );
        for seed in 1..=3 {
            let inputs = random_inputs(&g, seed * 11);
            let named: Vec<(String, Tensor)> = g.inputs.iter().zip(&inputs).map(|(&i, t)| (g.value(i).name.clone(), t.clone())).collect();
            let scratch = dir.join(format!("{name}_{seed}"));
            let (peer, theirs) = if ort {
                ("onnxruntime", onnxruntime::run_model(&py, &path, &named, &scratch))
            } else {
                ("onnx reference", onnxruntime::run_model_reference(&py, &path, &named, &scratch))
            };
            let file_inputs: Vec<Tensor> = inputs.iter().zip(&ex.inputs).map(|(t, i)| t.permuted(&i.perm)).collect();
            let lite = litert::run_bytes(&py, &ex.bytes, litert::OPTIMIZED, std::slice::from_ref(&file_inputs)).unwrap_or_else(|e| panic!("{name}: LiteRT: {e}")).remove(0);
            assert_eq!(lite.len(), theirs.len(), "{name}: outputs");
            let mut worst = 0.0f64;
            for (k, (a, b)) in lite.iter().zip(&theirs).enumerate() {
                assert_eq!(a.shape, b.shape, "{name}: output {k}");
                worst = worst.max(relative_to_mean(&format!("{name} seed {seed} LiteRT"), k, a, b, peer, 1e-4).unwrap_or_else(|e| panic!("{e}")));
            }
            println!("{name} seed {seed}: {} ops; LiteRT vs {peer}: worst relative error {worst:.1e}", ops.len());
        }
    }
}

/// The unrolled GRU in int8: every op quantizes (no float island, no DEQUANTIZE inside), LiteRT loads the file,
/// and our int8 runtime equals LiteRT exactly; the int8 outputs track the float graph (a sanity bound).
#[test]
fn an_unrolled_gru_quantizes_to_int8_equal_to_litert() {
    let Some(py) = oracle::python() else { return };
    let dir = fresh_dir("gru_export_int8");
    for (path, _) in gru_models(&py, &dir) {
        let name = stem(&path);
        let mut g = loaded(&path);
        // the edgetpu pipeline's float rewrites, which unroll the GRU, come before calibration
        tpu_sdk_core::quant::prepare(&mut g);
        let eval = tpu_sdk_test_support::f32_samples(&int8_support::input_shapes(&g), 5, 79, -2.0, 2.0);
        let q = int8_support::quantized(&g, -2.0, 2.0, false);
        let ex = export(&q, &ExportOptions::default()).unwrap_or_else(|e| panic!("{name}: int8 export refused: {e}"));
        let ops = int8_support::ops_of(&ex.bytes);
        assert!(ops.iter().any(|o| o == "FULLY_CONNECTED") && !ops.iter().any(|o| o == "DEQUANTIZE"), "{name} int8: {ops:?}");
        let ours = int8_support::ours_equal_litert(&format!("{name} int8"), &q, &ex, &eval);
        assert_eq!(ours.len(), eval.len(), "{name} int8: LiteRT did not run");
        for k in 0..g.outputs.len() {
            let sqnr = int8_support::sqnr(&g, &q, &eval, &ours, k);
            assert!(sqnr > 12.0, "{name} int8 output {k}: SQNR {sqnr:.1} dB against the float graph");
            println!("{name} int8 output {k}: SQNR {sqnr:.1} dB vs float; equal to LiteRT");
        }
    }
}
