//! TFLite import of the recurrent ops TensorFlow's converter does not emit for Keras layers, against LiteRT
//! running the same file (its builtin kernels, reference and optimized resolvers):
//! - `UNIDIRECTIONAL_SEQUENCE_RNN`: the files our exporter writes for ONNX simple RNNs (reverse and bidirectional
//!   ones around `REVERSE_V2`, time- and batch-major; `tests/data/lstm/rnn_*.onnx`).
//! - `BIDIRECTIONAL_SEQUENCE_LSTM`: files written here with the flatbuffer builder (random weights; time- and
//!   batch-major, with and without peepholes and merged outputs, a cell clip).
//!
//! Needs `$TPU_SDK_PYTHON`; without it the tests say so and pass, unless `TPU_SDK_REQUIRE_ORACLES=1`.

use std::path::{Path, PathBuf};

use tpu_sdk_core::format::tflite::builder::*;
use tpu_sdk_core::format::tflite::schema::{activation, builtin_operator as bo, builtin_options};
use tpu_sdk_core::format::tflite::tensor_type_of;
use tpu_sdk_core::import::onnx::{load, ImportOptions};
use tpu_sdk_core::ir::{DType, Tensor};
use tpu_sdk_core::runtime::Session;
use tpu_sdk_edgetpu::export::{export, ExportOptions};
use tpu_sdk_test_support::random::Rng;
use tpu_sdk_test_support::{litert, oracle, random_inputs, relative_to_mean};

/// Imports `bytes` with our TFLite importer, runs it on `inputs` and compares every output with LiteRT's (both
/// resolvers) on the same file; the worst relative error.
fn check(py: &Path, what: &str, bytes: &[u8], inputs: &[Tensor]) -> f64 {
    let g = tpu_sdk_core::import::tflite::load_bytes(bytes, &Default::default()).unwrap_or_else(|e| panic!("{what}: import: {e}"));
    let ours = Session::new(g).and_then(|mut s| s.run(inputs)).unwrap_or_else(|e| panic!("{what}: run: {e}"));
    let mut worst = 0.0f64;
    for resolver in [litert::REFERENCE, litert::OPTIMIZED] {
        let theirs = litert::run_bytes(py, bytes, resolver, &[inputs.to_vec()]).unwrap_or_else(|e| panic!("{what}: LiteRT: {e}")).remove(0);
        assert_eq!(ours.len(), theirs.len(), "{what}: outputs");
        for (k, (a, b)) in ours.iter().zip(&theirs).enumerate() {
            assert_eq!(a.shape, b.shape, "{what}: output {k}");
            worst = worst.max(relative_to_mean(what, k, a, b, &format!("LiteRT {resolver}"), 1e-4).unwrap_or_else(|e| panic!("{e}")));
        }
    }
    worst
}

/// The TFLite op names of the main subgraph.
fn ops_of(bytes: &[u8]) -> Vec<String> {
    use tpu_sdk_core::format::tflite::schema;
    let m = schema::parse_model(bytes).unwrap();
    let codes = m.operator_codes().unwrap();
    m.subgraphs().unwrap().get(0).operators().unwrap().iter().map(|o| codes.get(o.opcode_index() as usize).name()).collect()
}

fn onnx_model(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/lstm").join(format!("{name}.onnx"))
}

#[test]
fn unidirectional_sequence_rnn_imports_like_litert() {
    let Some(py) = oracle::python() else { return };
    for name in ["rnn_reverse_relu", "rnn_bi_tanh_yh", "rnn_reverse_tanh_layout1"] {
        let mut g = load(&onnx_model(name), &ImportOptions::default()).unwrap();
        tpu_sdk_core::passes::optimize(&mut g).unwrap();
        let ex = export(&g, &ExportOptions::default()).unwrap_or_else(|e| panic!("{name}: export: {e}"));
        assert!(ops_of(&ex.bytes).iter().any(|o| o == "UNIDIRECTIONAL_SEQUENCE_RNN"), "{name}: {:?}", ops_of(&ex.bytes));
        let inputs: Vec<Tensor> = random_inputs(&g, 5).iter().zip(&ex.inputs).map(|(t, i)| t.permuted(&i.perm)).collect();
        let worst = check(&py, name, &ex.bytes, &inputs);
        println!("{name:<26} UNIDIRECTIONAL_SEQUENCE_RNN: worst relative error vs LiteRT {worst:.1e}");
    }
}

/// A file with one BIDIRECTIONAL_SEQUENCE_LSTM on an input `[seq, batch, input]` (or `[batch, seq, input]`).
struct BiLstm {
    time_major: bool,
    peepholes: bool,
    merge_outputs: bool,
    cell_clip: f32,
    seq: usize,
    batch: usize,
    input: usize,
    hidden: usize,
}

impl BiLstm {
    fn input_shape(&self) -> Vec<usize> {
        if self.time_major {
            vec![self.seq, self.batch, self.input]
        } else {
            vec![self.batch, self.seq, self.input]
        }
    }

    fn bytes(&self, seed: u64) -> Vec<u8> {
        self.model(seed).to_bytes()
    }

    fn model(&self, seed: u64) -> ModelT {
        let mut rng = Rng::new(seed);
        let (h, n) = (self.hidden, self.input);
        let mut m = ModelT { version: 3, ..Default::default() };
        m.buffers.push(BufferT::default());
        m.operator_codes.push(OperatorCodeT::builtin(bo::BIDIRECTIONAL_SEQUENCE_LSTM, 1));
        let mut sg = SubGraphT { name: Some("main".into()), ..Default::default() };
        let tensor = |sg: &mut SubGraphT, m: &mut ModelT, name: &str, shape: &[usize], data: Option<Vec<f32>>, variable: bool| -> i32 {
            let buffer = match data {
                Some(d) => {
                    m.buffers.push(BufferT { data: d.iter().flat_map(|x| x.to_le_bytes()).collect() });
                    m.buffers.len() as u32 - 1
                }
                None => 0,
            };
            sg.tensors.push(TensorT {
                shape: shape.iter().map(|&d| d as i32).collect(),
                type_: tensor_type_of(DType::F32),
                buffer,
                name: name.into(),
                is_variable: variable,
                ..Default::default()
            });
            sg.tensors.len() as i32 - 1
        };
        let mut ins = vec![-1i32; 48];
        ins[0] = tensor(&mut sg, &mut m, "x", &self.input_shape(), None, false);
        let mut rand = |len: usize, scale: f32| -> Vec<f32> { (0..len).map(|_| rng.uniform(-scale, scale)).collect() };
        for (dir, first) in [("fw", 1usize), ("bw", 18)] {
            for g in 0..4 {
                ins[first + g] = tensor(&mut sg, &mut m, &format!("{dir}_w{g}"), &[h, n], Some(rand(h * n, 0.6)), false);
                ins[first + 4 + g] = tensor(&mut sg, &mut m, &format!("{dir}_r{g}"), &[h, h], Some(rand(h * h, 0.6)), false);
                ins[first + 11 + g] = tensor(&mut sg, &mut m, &format!("{dir}_b{g}"), &[h], Some(rand(h, 0.5)), false);
            }
            if self.peepholes {
                for p in 0..3 {
                    ins[first + 8 + p] = tensor(&mut sg, &mut m, &format!("{dir}_p{p}"), &[h], Some(rand(h, 0.5)), false);
                }
            }
        }
        for (k, name) in [(35, "fw_h"), (36, "fw_c"), (37, "bw_h"), (38, "bw_c")] {
            ins[k] = tensor(&mut sg, &mut m, name, &[self.batch, h], None, true);
        }
        let (a, b) = if self.time_major { (self.seq, self.batch) } else { (self.batch, self.seq) };
        let outs = if self.merge_outputs {
            vec![tensor(&mut sg, &mut m, "y", &[a, b, 2 * h], None, false)]
        } else {
            vec![tensor(&mut sg, &mut m, "y_fw", &[a, b, h], None, false), tensor(&mut sg, &mut m, "y_bw", &[a, b, h], None, false)]
        };
        sg.inputs = vec![ins[0]];
        sg.outputs = outs.clone();
        let opts = OptionsT::new(builtin_options::BIDIRECTIONAL_SEQUENCE_LSTM)
            .with(0, FieldT::I8(activation::TANH))
            .with(1, FieldT::F32(self.cell_clip))
            .with(3, FieldT::Bool(self.merge_outputs))
            .with(4, FieldT::Bool(self.time_major));
        sg.operators.push(OperatorT { opcode_index: 0, inputs: ins, outputs: outs, builtin_options: Some(opts), custom_options: None, intermediates: Vec::new() });
        m.subgraphs.push(sg);
        m
    }
}

#[test]
fn bidirectional_sequence_lstm_imports_like_litert() {
    let Some(py) = oracle::python() else { return };
    // (LiteRT is not a peer for batch-major models with merged outputs: with or without peepholes and a cell clip,
    // two fresh interpreters give different outputs on the same input — element 60 of a seq-7 batch-2 model read
    // -0.1162, -0.1165, -0.1205 and -0.1219 in four runs, ours -0.1191 every time — so it reads memory it did not
    // write. Those cases are left out; batch-major with two outputs and time-major merged are compared.)
    let cases = [
        ("time-major, merged", BiLstm { time_major: true, peepholes: false, merge_outputs: true, cell_clip: 0.0, seq: 6, batch: 2, input: 3, hidden: 4 }),
        ("time-major, two outputs, peepholes", BiLstm { time_major: true, peepholes: true, merge_outputs: false, cell_clip: 0.0, seq: 5, batch: 3, input: 4, hidden: 5 }),
        ("time-major, merged, peepholes, clip", BiLstm { time_major: true, peepholes: true, merge_outputs: true, cell_clip: 0.8, seq: 7, batch: 2, input: 3, hidden: 4 }),
        ("batch-major, two outputs", BiLstm { time_major: false, peepholes: false, merge_outputs: false, cell_clip: 0.0, seq: 4, batch: 3, input: 2, hidden: 6 }),
        ("batch-major, two outputs, peepholes, clip", BiLstm { time_major: false, peepholes: true, merge_outputs: false, cell_clip: 0.8, seq: 7, batch: 2, input: 3, hidden: 4 }),
    ];
    for (k, (what, c)) in cases.iter().enumerate() {
        let bytes = c.bytes(11 + k as u64);
        let x = Rng::new(100 + k as u64).f32_tensor(&c.input_shape(), -2.0, 2.0);
        let worst = check(&py, what, &bytes, &[x]);
        println!("{what:<38} BIDIRECTIONAL_SEQUENCE_LSTM: worst relative error vs LiteRT {worst:.1e}");
    }
}

#[test]
fn what_the_ir_cannot_express_is_refused_by_name() {
    let c = BiLstm { time_major: true, peepholes: false, merge_outputs: true, cell_clip: 0.0, seq: 3, batch: 1, input: 2, hidden: 3 };
    // (what is changed in the operator's inputs, what the error names)
    type Change = fn(&mut Vec<i32>);
    let cases: [(Change, &str); 3] = [
        (|ins| (ins[1], ins[5]) = (-1, -1), "an LSTM without forward input gate (CIFG)"),
        (|ins| ins[39] = 0, "an LSTM with an auxiliary input (input 39)"),
        (|ins| ins[16] = 1, "an LSTM with projection weights (input 16)"),
    ];
    for (change, want) in cases {
        let mut m = c.model(1);
        change(&mut m.subgraphs[0].operators[0].inputs);
        let e = tpu_sdk_core::import::tflite::load_bytes(&m.to_bytes(), &Default::default()).unwrap_err().to_string();
        assert!(e.contains(want), "{e}");
    }
}
