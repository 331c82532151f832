//! Recurrent layers in the TFLite export: an LSTM exports as UNIDIRECTIONAL_SEQUENCE_LSTM and a simple RNN as
//! UNIDIRECTIONAL_SEQUENCE_RNN (tests/lstm_export.rs); a GRU has no TFLite export and no Edge TPU placement: the
//! export refuses it with an error that names the node and says to run the model on the cpu or cloud-tpu target.

use tpu_sdk_core::import::onnx::{load, ImportOptions};
use tpu_sdk_edgetpu::export::{export, ExportOptions};

#[test]
fn gru_layers_are_refused_naming_the_node() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../core/tests/data/rnn");
    let mut g = load(&root.join("gru_bi2_batch_first.onnx"), &ImportOptions::default()).unwrap();
    tpu_sdk_core::passes::optimize(&mut g).unwrap();
    let e = export(&g, &ExportOptions::default()).unwrap_err().to_string();
    assert!(e.contains("'/rnn/GRU'") && e.contains("GRU") && e.contains("not supported on edgetpu") && e.contains("--target cloud-tpu"), "{e}");
}

#[test]
fn lstms_and_rnns_export() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../core/tests/data/rnn");
    for model in ["crnn", "rnn_tanh2"] {
        let mut g = load(&root.join(format!("{model}.onnx")), &ImportOptions::default()).unwrap();
        tpu_sdk_core::passes::optimize(&mut g).unwrap();
        export(&g, &ExportOptions::default()).unwrap();
    }
}
