//! What the int8 LiteRT tests share: deterministic weights, calibration and quantization, the exact-match
//! harness against LiteRT's builtin kernels, SQNR against the float graph, and the operators of a file.
#![allow(dead_code)]

use tpu_sdk_core::format::tflite::schema;
use tpu_sdk_core::ir::{Activation, AutoPad, ConvAttrs, Graph, Op, Tensor};
use tpu_sdk_core::quant::compare::{dequantized, to_graph_input};
use tpu_sdk_core::quant::params::sqnr_db;
use tpu_sdk_core::quant::{calibrate, quantize, QuantizeOptions, RangeMethod};
use tpu_sdk_core::runtime::Session;
use tpu_sdk_core::target::Progress;
use tpu_sdk_edgetpu::export::Exported;
use tpu_sdk_test_support::{differing, f32_samples, litert, oracle};

pub fn conv(k: usize, pad: usize, group: usize, activation: Option<Activation>) -> Op {
    Op::Conv(ConvAttrs { kernel_shape: vec![k, k], strides: vec![], dilations: vec![], pads: vec![pad; 4], auto_pad: AutoPad::NotSet, group, activation })
}

/// Deterministic values in [-a, a).
pub fn weights(shape: &[usize], seed: u64, a: f32) -> Tensor {
    f32_samples(&[shape.to_vec()], 1, seed, -a, a).remove(0).remove(0)
}

pub fn input_shapes(g: &Graph) -> Vec<Vec<usize>> {
    g.inputs.iter().map(|&i| g.value(i).shape.clone()).collect()
}

/// Calibrates `g` on 8 samples in [lo, hi) and quantizes it.
pub fn quantized(g: &Graph, lo: f32, hi: f32, float_io: bool) -> Graph {
    let cal = f32_samples(&input_shapes(g), 8, 41, lo, hi);
    let c = calibrate(g, &cal, RangeMethod::MinMax, &Progress::default()).unwrap();
    quantize(g, &c, &QuantizeOptions { method: RangeMethod::MinMax, float_io }).unwrap()
}

/// Runs the exported file in LiteRT's builtin (optimized) kernels and the quantized graph `q` in our CPU
/// runtime on the same held-out inputs; asserts LiteRT loads the file and every output value is equal.
/// Returns our outputs per sample (empty without the oracle).
pub fn ours_equal_litert(name: &str, q: &Graph, ex: &Exported, eval: &[Vec<Tensor>]) -> Vec<Vec<Tensor>> {
    let Some(py) = oracle::python() else { return Vec::new() };
    let ours_in: Vec<Vec<Tensor>> = eval.iter().map(|s| s.iter().enumerate().map(|(k, t)| to_graph_input(t, q, q.inputs[k]).unwrap()).collect()).collect();
    let file_in: Vec<Vec<Tensor>> = ours_in.iter().map(|s| s.iter().enumerate().map(|(k, t)| t.permuted(&ex.inputs[k].perm)).collect()).collect();
    let want = litert::run_bytes(&py, &ex.bytes, litert::OPTIMIZED, &file_in).unwrap_or_else(|e| panic!("{name}: LiteRT refuses our int8 file: {e}"));
    let mut s = Session::new(q.clone()).unwrap_or_else(|e| panic!("{name}: our runtime cannot run the quantized graph: {e}"));
    let mut all = Vec::new();
    for (i, (x, w)) in ours_in.iter().zip(&want).enumerate() {
        let got = s.run(x).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(got.len(), w.len(), "{name}: number of outputs");
        for (k, (o, w)) in got.iter().zip(w).enumerate() {
            let (ov, wv) = (o.to_f64_vec(), w.to_f64_vec());
            let first = ov.iter().zip(&wv).position(|(a, b)| a != b).unwrap_or(0);
            let near = first.saturating_sub(2)..(first + 3).min(ov.len()).min(wv.len());
            assert_eq!(differing(o, w), 0, "{name}: sample {i} output {k}: first difference at {first} of {:?}: ours {:?} LiteRT {:?}", o.shape, &ov[near.clone()], &wv[near]);
        }
        all.push(got);
    }
    // The file read back by our TFLite importer runs the same.
    let mut back = Session::new(tpu_sdk_core::import::tflite::load_bytes(&ex.bytes, &Default::default()).unwrap_or_else(|e| panic!("{name}: our importer cannot read the file: {e}")))
        .unwrap_or_else(|e| panic!("{name}: our runtime cannot run the file: {e}"));
    for (i, (x, w)) in file_in.iter().zip(&want).enumerate() {
        for (k, (o, w)) in back.run(x).unwrap_or_else(|e| panic!("{name}: {e}")).iter().zip(w).enumerate() {
            assert_eq!(differing(o, w), 0, "{name}: the file read back, sample {i} output {k}");
        }
    }
    eprintln!("{name}: LiteRT loads the int8 file; our int8 runtime equals LiteRT on {} samples, on the graph and on the file read back", eval.len());
    all
}

/// SQNR (dB) of output `k` of our int8 runs against the float graph on `eval`.
pub fn sqnr(g: &Graph, q: &Graph, eval: &[Vec<Tensor>], ours: &[Vec<Tensor>], k: usize) -> f64 {
    let mut fs = Session::new(g.clone()).unwrap();
    let (mut want, mut have) = (Vec::new(), Vec::new());
    for (x, o) in eval.iter().zip(ours) {
        want.extend(fs.run(x).unwrap()[k].to_f64_vec());
        have.extend(dequantized(&o[k], q.value(q.outputs[k]).quant.as_ref()));
    }
    sqnr_db(&want, &have)
}

/// The builtin operator names of the file's main subgraph, in order.
pub fn ops_of(bytes: &[u8]) -> Vec<String> {
    let m = schema::parse_model(bytes).unwrap();
    let codes = m.operator_codes().unwrap();
    m.subgraphs().unwrap().get(0).operators().unwrap().iter().map(|o| codes.get(o.opcode_index() as usize).name()).collect()
}
