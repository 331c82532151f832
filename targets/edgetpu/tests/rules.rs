//! The rules analyzer on TF-converted fixtures and on hand-built models that break one rule each.

use tpu_sdk_core::format::tflite::builder::*;
use tpu_sdk_core::format::tflite::schema::{activation, builtin_operator as bo, padding, tensor_type as tt};
use tpu_sdk_edgetpu::report::status;
use tpu_sdk_edgetpu::rules::{analyze_bytes, RulesOptions};
use tpu_sdk_edgetpu::Placement;

fn data(name: &str) -> Vec<u8> {
    std::fs::read(format!("{}/tests/data/{name}", env!("CARGO_MANIFEST_DIR"))).unwrap()
}

#[test]
fn a_fully_int8_convnet_maps_entirely() {
    let r = analyze_bytes(&data("convnet_int8.tflite"), &RulesOptions::default()).unwrap();
    let ops: Vec<&str> = r.ops.iter().map(|o| o.op.as_str()).collect();
    assert_eq!(
        ops,
        ["CONV_2D", "DEPTHWISE_CONV_2D", "MAX_POOL_2D", "CONV_2D", "TANH", "AVERAGE_POOL_2D", "CONV_2D", "RESHAPE", "FULLY_CONNECTED", "SOFTMAX"]
    );
    assert!(r.ops.iter().all(|o| o.placement == Placement::Tpu), "{}", r.to_text());
    assert!(r.all_on_tpu());
    let text = r.to_text();
    assert!(text.contains("Number of operations that will run on Edge TPU: 10") && text.contains("Number of operations that will run on CPU: 0"), "{text}");
    let json: serde_json::Value = serde_json::from_str(&r.to_json()).unwrap();
    assert_eq!(json["ops"][0]["placement"], "tpu");
    assert_eq!(json["summary"][0]["op"], "CONV_2D");
    assert_eq!(json["summary"][0]["count"], 3);
}

#[test]
fn a_float_model_stays_on_the_cpu_from_its_first_op() {
    let r = analyze_bytes(&data("convnet_f32.tflite"), &RulesOptions::default()).unwrap();
    assert_eq!(r.tpu_ops, 0);
    assert_eq!(r.ops[0].status, status::DATA_TYPE);
    assert!(r.ops[0].reason.contains("FLOAT32"), "{}", r.ops[0].reason);
    assert!(r.ops[1..].iter().all(|o| o.status == status::AFTER_UNSUPPORTED && o.reason.contains("#0 (CONV_2D)")));
}

// ---- hand-built int8 models ----------------------------------------------------------------------------

fn q(name: &str, shape: &[i32]) -> TensorT {
    TensorT {
        shape: shape.to_vec(),
        type_: tt::INT8,
        name: name.into(),
        quantization: Some(QuantizationT { scale: vec![0.05], zero_point: vec![-2], ..Default::default() }),
        ..Default::default()
    }
}

struct M {
    m: ModelT,
}

impl M {
    fn new() -> M {
        M { m: ModelT { version: 3, buffers: vec![BufferT::default()], subgraphs: vec![SubGraphT::default()], ..Default::default() } }
    }
    fn tensor(&mut self, t: TensorT) -> i32 {
        self.m.subgraphs[0].tensors.push(t);
        self.m.subgraphs[0].tensors.len() as i32 - 1
    }
    fn constant(&mut self, mut t: TensorT, bytes: Vec<u8>) -> i32 {
        self.m.buffers.push(BufferT { data: bytes });
        t.buffer = self.m.buffers.len() as u32 - 1;
        self.tensor(t)
    }
    fn op(&mut self, code: i32, ins: &[i32], outs: &[i32], opts: Option<OptionsT>) {
        let idx = match self.m.operator_codes.iter().position(|c| c.builtin_code == code) {
            Some(i) => i,
            None => {
                self.m.operator_codes.push(OperatorCodeT::builtin(code, 1));
                self.m.operator_codes.len() - 1
            }
        };
        self.m.subgraphs[0].operators.push(OperatorT {
            opcode_index: idx as u32,
            inputs: ins.to_vec(),
            outputs: outs.to_vec(),
            builtin_options: opts,
            custom_options: None,
            intermediates: Vec::new(),
        });
    }
    fn bytes(&self) -> Vec<u8> {
        self.m.to_bytes()
    }
}

fn i32_bytes(v: &[i32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// f32 input → QUANTIZE → CONV_2D (int8) → TRANSPOSE → ADD → DEQUANTIZE.
fn pipeline() -> M {
    let mut m = M::new();
    let x = m.tensor(TensorT { shape: vec![1, 8, 8, 4], type_: tt::FLOAT32, name: "x".into(), ..Default::default() });
    let xq = m.tensor(q("xq", &[1, 8, 8, 4]));
    m.op(bo::QUANTIZE, &[x], &[xq], None);
    let w = m.constant(q("w", &[4, 3, 3, 4]), vec![1u8; 4 * 3 * 3 * 4]);
    let b = m.constant(TensorT { shape: vec![4], type_: tt::INT32, name: "b".into(), ..Default::default() }, i32_bytes(&[0, 1, 2, 3]));
    let c = m.tensor(q("conv", &[1, 8, 8, 4]));
    m.op(bo::CONV_2D, &[xq, w, b], &[c], Some(OptionsT::conv2d(padding::SAME, 1, 1, activation::RELU, 1, 1)));
    let perm = m.constant(TensorT { shape: vec![4], type_: tt::INT32, name: "perm".into(), ..Default::default() }, i32_bytes(&[0, 2, 1, 3]));
    let t = m.tensor(q("transposed", &[1, 8, 8, 4]));
    m.op(bo::TRANSPOSE, &[c, perm], &[t], None);
    let s = m.tensor(q("sum", &[1, 8, 8, 4]));
    m.op(bo::ADD, &[t, c], &[s], Some(OptionsT::arithmetic(bo::ADD, activation::NONE)));
    let y = m.tensor(TensorT { shape: vec![1, 8, 8, 4], type_: tt::FLOAT32, name: "y".into(), ..Default::default() });
    m.op(bo::DEQUANTIZE, &[s], &[y], None);
    m.m.subgraphs[0].inputs = vec![x];
    m.m.subgraphs[0].outputs = vec![y];
    m
}

#[test]
fn the_first_unsupported_op_ends_the_tpu_partition() {
    let r = analyze_bytes(&pipeline().bytes(), &RulesOptions::default()).unwrap();
    let got: Vec<(&str, Placement, &str)> = r.ops.iter().map(|o| (o.op.as_str(), o.placement, o.status.as_str())).collect();
    assert_eq!(
        got,
        [
            // A leading CPU op (quantizing the float input) does not end the partition.
            ("QUANTIZE", Placement::Cpu, status::DATA_TYPE),
            ("CONV_2D", Placement::Tpu, status::MAPPED),
            ("TRANSPOSE", Placement::Cpu, status::NOT_SUPPORTED),
            ("ADD", Placement::Cpu, status::AFTER_UNSUPPORTED),
            ("DEQUANTIZE", Placement::Cpu, status::AFTER_UNSUPPORTED),
        ]
    );
    assert!(r.ops[2].reason.contains("recent"), "{}", r.ops[2].reason);
    assert_eq!((r.tpu_ops, r.cpu_ops), (1, 4));

    // With a recent runtime TRANSPOSE maps, and the trailing DEQUANTIZE is the first CPU op.
    let r = analyze_bytes(&pipeline().bytes(), &RulesOptions { assume_recent_runtime: true }).unwrap();
    let placements: Vec<Placement> = r.ops.iter().map(|o| o.placement).collect();
    assert_eq!(placements, [Placement::Cpu, Placement::Tpu, Placement::Tpu, Placement::Tpu, Placement::Cpu]);
    assert_eq!(r.ops[4].status, status::DATA_TYPE);
    assert!(r.notes.iter().any(|n| n.contains("recent")));
}

/// One int8 op on `x` → `y`; returns the placement, status and reason of that op.
fn single(code: i32, x_shape: &[i32], y_shape: &[i32], extra: impl FnOnce(&mut M, i32, i32) -> (Vec<i32>, Option<OptionsT>)) -> (Placement, String, String) {
    let mut m = M::new();
    let x = m.tensor(q("x", x_shape));
    let y = m.tensor(q("y", y_shape));
    let (ins, opts) = extra(&mut m, x, y);
    m.op(code, &ins, &[y], opts);
    m.m.subgraphs[0].inputs = vec![x];
    m.m.subgraphs[0].outputs = vec![y];
    let r = analyze_bytes(&m.bytes(), &RulesOptions::default()).unwrap();
    let o = &r.ops[0];
    (o.placement, o.status.clone(), o.reason.clone())
}

#[test]
fn per_op_limits_are_applied() {
    // More than 3 non-unit innermost dims.
    let (p, s, why) = single(bo::RELU, &[2, 2, 2, 2], &[2, 2, 2, 2], |_, x, _| (vec![x], None));
    assert_eq!((p, s.as_str()), (Placement::Cpu, status::TENSOR_SHAPE));
    assert!(why.contains("'x'"), "{why}");
    assert_eq!(single(bo::RELU, &[1, 2, 2, 2], &[1, 2, 2, 2], |_, x, _| (vec![x], None)).0, Placement::Tpu);

    // Pooling with a fused activation.
    let (p, s, _) = single(bo::AVERAGE_POOL_2D, &[1, 4, 4, 2], &[1, 2, 2, 2], |_, x, _| {
        (vec![x], Some(OptionsT::pool2d(padding::VALID, 2, 2, 2, 2, activation::RELU)))
    });
    assert_eq!((p, s.as_str()), (Placement::Cpu, status::LIMITATION));

    // Conv with different dilations in x and y.
    let (p, _, why) = single(bo::CONV_2D, &[1, 8, 8, 1], &[1, 8, 8, 1], |m, x, _| {
        let w = m.constant(q("w", &[1, 3, 3, 1]), vec![1; 9]);
        (vec![x, w], Some(OptionsT::conv2d(padding::SAME, 1, 1, activation::NONE, 1, 2)))
    });
    assert_eq!(p, Placement::Cpu);
    assert!(why.contains("dilations"), "{why}");

    // Softmax over a 2-D input.
    let (p, _, why) = single(bo::SOFTMAX, &[1, 4, 10], &[1, 4, 10], |_, x, _| (vec![x], Some(OptionsT::softmax(1.0))));
    assert_eq!(p, Placement::Cpu);
    assert!(why.contains("not 1-D"), "{why}");

    // Concatenation with a non-zero constant.
    let (p, _, why) = single(bo::CONCATENATION, &[1, 4], &[1, 8], |m, x, _| {
        let c = m.constant(q("c", &[1, 4]), vec![5; 4]);
        (vec![x, c], Some(OptionsT::concatenation(1, activation::NONE)))
    });
    assert_eq!(p, Placement::Cpu);
    assert!(why.contains("all zeros"), "{why}");
    // ... and with the zero point (real 0) it is zero padding, which maps.
    let zp = (-2i8) as u8;
    let (p, _, _) = single(bo::CONCATENATION, &[1, 4], &[1, 8], |m, x, _| {
        let c = m.constant(q("c", &[1, 4]), vec![zp; 4]);
        (vec![x, c], Some(OptionsT::concatenation(1, activation::NONE)))
    });
    assert_eq!(p, Placement::Tpu);

    // Strided slice with stride 2.
    let (p, _, why) = single(bo::STRIDED_SLICE, &[1, 8, 4], &[1, 4, 4], |m, x, _| {
        let i = |v: &[i32]| TensorT { shape: vec![v.len() as i32], type_: tt::INT32, name: "p".into(), ..Default::default() };
        let b = m.constant(i(&[0, 0, 0]), i32_bytes(&[0, 0, 0]));
        let e = m.constant(i(&[1, 8, 4]), i32_bytes(&[1, 8, 4]));
        let s = m.constant(i(&[1, 2, 1]), i32_bytes(&[1, 2, 1]));
        (vec![x, b, e, s], Some(OptionsT::strided_slice(0, 0, 0)))
    });
    assert_eq!(p, Placement::Cpu);
    assert!(why.contains("strides"), "{why}");

    // Dynamic shapes.
    let (p, s, _) = single(bo::RELU, &[1, 4], &[1, 4], |m, x, _| {
        m.m.subgraphs[0].tensors[x as usize].shape_signature = Some(vec![-1, 4]);
        (vec![x], None)
    });
    assert_eq!((p, s.as_str()), (Placement::Cpu, status::DYNAMIC));

    // Mean over the batch dimension; over channels that are not a multiple of 4.
    let mean = |axes: &'static [i32], c: i32| {
        single(bo::MEAN, &[1, 4, 4, c], &[1, 1, 1, c], move |m, x, _| {
            let a = m.constant(TensorT { shape: vec![axes.len() as i32], type_: tt::INT32, name: "axes".into(), ..Default::default() }, i32_bytes(axes));
            (vec![x, a], Some(OptionsT::reducer(true)))
        })
    };
    assert_eq!(mean(&[1, 2], 6).0, Placement::Tpu);
    assert!(mean(&[0, 1, 2], 8).2.contains("batch"));
    assert!(mean(&[3], 6).2.contains("multiple of 4"));
    assert_eq!(mean(&[3], 8).0, Placement::Tpu);

    // Unknown op.
    let (p, s, why) = single(bo::code("UNIQUE").unwrap(), &[4], &[4], |_, x, _| (vec![x], None));
    assert_eq!((p, s.as_str()), (Placement::Cpu, status::NOT_SUPPORTED));
    assert!(why.contains("UNIQUE"), "{why}");
}

#[test]
fn corrupt_models_give_errors() {
    let mut b = data("convnet_int8.tflite");
    b.truncate(b.len() / 2);
    let e = analyze_bytes(&b, &RulesOptions::default()).unwrap_err().to_string();
    assert!(e.contains("corrupt TFLite flatbuffer") || e.contains("out of range"), "{e}");
}
