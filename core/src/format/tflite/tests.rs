//! Tests of the flatbuffer reader and writer: what [`super::builder`] writes, [`super::schema`] reads back.
//! The model helpers are shared with the importer's tests.

use super::builder::*;
use super::schema::{self, builtin_operator as bo, tensor_type as tt};
use super::*;

pub(crate) fn tensor(name: &str, shape: &[i32], type_: i8, buffer: u32) -> TensorT {
    TensorT { shape: shape.to_vec(), type_, buffer, name: name.into(), ..Default::default() }
}

pub(crate) fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// x [1,4,4,2] → CONV_2D (SAME, stride 2, 3x3, relu) with constant OHWI weights → y [1,2,2,3].
pub(crate) fn conv_model(code: i32) -> ModelT {
    let w: Vec<f32> = (0..3 * 3 * 3 * 2).map(|i| (i as f32 * 0.37).sin()).collect();
    ModelT {
        version: 3,
        operator_codes: vec![OperatorCodeT::builtin(code, 1)],
        subgraphs: vec![SubGraphT {
            tensors: vec![
                tensor("x", &[1, 4, 4, 2], tt::FLOAT32, 0),
                tensor("w", &[3, 3, 3, 2], tt::FLOAT32, 1),
                tensor("b", &[3], tt::FLOAT32, 2),
                tensor("y", &[1, 2, 2, 3], tt::FLOAT32, 0),
            ],
            inputs: vec![0],
            outputs: vec![3],
            operators: vec![OperatorT {
                opcode_index: 0,
                inputs: vec![0, 1, 2],
                outputs: vec![3],
                builtin_options: Some(OptionsT::conv2d(schema::padding::SAME, 2, 2, schema::activation::RELU, 1, 1)),
                custom_options: None,
                intermediates: Vec::new(),
            }],
            name: Some("main".into()),
        }],
        description: Some("test".into()),
        buffers: vec![BufferT::default(), BufferT { data: f32_bytes(&w) }, BufferT { data: f32_bytes(&[0.1, -0.2, 0.3]) }],
        ..Default::default()
    }
}

#[test]
fn writes_the_identifier_at_bytes_4_to_8_and_reads_back_what_it_wrote() {
    let bytes = conv_model(bo::CONV_2D).to_bytes();
    assert_eq!(&bytes[4..8], b"TFL3");
    let m = schema::parse_model(&bytes).unwrap();
    assert_eq!(m.version(), 3);
    assert_eq!(m.description(), Some("test"));
    let sg = m.subgraphs().unwrap().get(0);
    assert_eq!(sg.name(), Some("main"));
    let t = sg.tensors().unwrap();
    assert_eq!(t.len(), 4);
    assert_eq!(t.get(1).name(), Some("w"));
    assert_eq!(schema::to_vec(t.get(1).shape()), vec![3, 3, 3, 2]);
    assert_eq!(t.get(1).buffer(), 1);
    let data = schema::buffer_data(&m, &bytes, 2).unwrap();
    assert_eq!(data, &f32_bytes(&[0.1, -0.2, 0.3])[..]);
    // Buffer.data has force_align: 16.
    for i in 1..3 {
        let d = schema::buffer_data(&m, &bytes, i).unwrap();
        assert_eq!((d.as_ptr() as usize - bytes.as_ptr() as usize) % 16, 0, "buffer {i} is not 16-byte aligned in the file");
    }
    let op = sg.operators().unwrap().get(0);
    let o = op.options::<schema::Conv2DOptions>().unwrap();
    assert_eq!((o.padding(), o.stride_w(), o.stride_h(), o.fused_activation_function()), (0, 2, 2, 1));
    assert_eq!((o.dilation_w_factor(), o.dilation_h_factor()), (1, 1));
    assert!(op.options::<schema::Pool2DOptions>().is_none());
}

#[test]
fn operator_codes_follow_the_deprecated_builtin_code_rule() {
    // Writing: deprecated = min(code, 127); reading: max(deprecated, builtin_code).
    let mut m = conv_model(bo::CONV_2D);
    m.operator_codes = vec![OperatorCodeT::builtin(bo::GELU, 1), OperatorCodeT::builtin(bo::CONV_2D, 2)];
    let bytes = m.to_bytes();
    let p = schema::parse_model(&bytes).unwrap();
    let codes = p.operator_codes().unwrap();
    assert_eq!((codes.get(0).deprecated_builtin_code(), codes.get(0).builtin_code(), codes.get(0).code()), (127, 150, 150));
    assert_eq!(codes.get(0).name(), "GELU");
    assert_eq!((codes.get(1).deprecated_builtin_code(), codes.get(1).builtin_code(), codes.get(1).code()), (3, 3, 3));
    assert_eq!(codes.get(1).version(), 2);

    // An old file with only the deprecated byte (builtin_code absent → 0).
    let mut fbb = flatbuffers::FlatBufferBuilder::new();
    let t = fbb.start_table();
    fbb.push_slot::<i8>(schema::voffset(0), 4, 0);
    let code = fbb.end_table(t);
    let codes = fbb.create_vector(&[code]);
    let t = fbb.start_table();
    fbb.push_slot_always(schema::voffset(1), codes);
    let root = fbb.end_table(t);
    fbb.finish(root, Some("TFL3"));
    let p = schema::parse_model(fbb.finished_data()).unwrap();
    let c = p.operator_codes().unwrap().get(0);
    assert_eq!((c.builtin_code(), c.code(), c.name().as_str()), (0, 4, "DEPTHWISE_CONV_2D"));
}

#[test]
fn builtin_operator_names_match_the_named_codes() {
    for (name, code) in [
        ("ADD", bo::ADD),
        ("CONV_2D", bo::CONV_2D),
        ("FULLY_CONNECTED", bo::FULLY_CONNECTED),
        ("RESIZE_NEAREST_NEIGHBOR", bo::RESIZE_NEAREST_NEIGHBOR),
        ("QUANTIZE", bo::QUANTIZE),
        ("HARD_SWISH", bo::HARD_SWISH),
        ("BATCH_MATMUL", bo::BATCH_MATMUL),
        ("PLACEHOLDER_FOR_GREATER_OP_CODES", bo::PLACEHOLDER_FOR_GREATER_OP_CODES),
        ("GELU", bo::GELU),
        ("COS", bo::COS),
        ("ARG_MIN", bo::ARG_MIN),
    ] {
        assert_eq!(bo::name(code), name);
        assert_eq!(bo::code(name), Some(code));
    }
    assert_eq!(bo::name(207), "COMPLEX");
    assert_eq!(bo::name(999), "BUILTIN_999");
}

#[test]
fn padding_is_computed_as_tflite_does() {
    // SAME: out = ceil(in / stride); the odd pixel of padding goes at the end.
    assert_eq!(tflite_padding(schema::padding::SAME, 4, 3, 2, 1), (2, 0, 1));
    assert_eq!(tflite_padding(schema::padding::SAME, 5, 3, 2, 1), (3, 1, 1));
    assert_eq!(tflite_padding(schema::padding::SAME, 8, 3, 1, 2), (8, 2, 2));
    assert_eq!(tflite_padding(schema::padding::SAME, 7, 1, 2, 1), (4, 0, 0));
    // VALID: out = ceil((in - effective_kernel + 1) / stride), no padding.
    assert_eq!(tflite_padding(schema::padding::VALID, 5, 3, 2, 1), (2, 0, 0));
    assert_eq!(tflite_padding(schema::padding::VALID, 8, 3, 1, 2), (4, 0, 0));
}
