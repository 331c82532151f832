//! Recurrent layers in the TFLite export: an LSTM exports as UNIDIRECTIONAL_SEQUENCE_LSTM (tests/lstm_export.rs);
//! GRU and RNN layers have no TFLite export and no Edge TPU placement: the export refuses them with an error that
//! names the node and says to run the model on the cpu or cloud-tpu target.

use tpu_sdk_core::import::onnx::{load, ImportOptions};
use tpu_sdk_edgetpu::export::{export, ExportOptions};

#[test]
fn gru_and_rnn_layers_are_refused_naming_the_node() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../core/tests/data/rnn");
    for (model, node, op) in [("gru_bi2_batch_first", "/rnn/GRU", "GRU"), ("rnn_tanh2", "/rnn/RNN", "RNN")] {
        let mut g = load(&root.join(format!("{model}.onnx")), &ImportOptions::default()).unwrap();
        tpu_sdk_core::passes::optimize(&mut g).unwrap();
        let e = export(&g, &ExportOptions::default()).unwrap_err().to_string();
        assert!(e.contains(&format!("'{node}")) && e.contains(op) && e.contains("not supported on edgetpu") && e.contains("--target cloud-tpu"), "{model}: {e}");
    }
}

#[test]
fn an_lstm_exports() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../core/tests/data/rnn");
    let mut g = load(&root.join("crnn.onnx"), &ImportOptions::default()).unwrap();
    tpu_sdk_core::passes::optimize(&mut g).unwrap();
    export(&g, &ExportOptions::default()).unwrap();
}
