//! Operators and their versions: operator codes (one per builtin, at the highest version used), the versions
//! int8 kernels need, and the `min_runtime_version` metadata.

use tpu_sdk_core::format::tflite::builder::*;
use tpu_sdk_core::format::tflite::schema::builtin_operator as bo;
use tpu_sdk_core::format::tflite::tensor_type_of;
use tpu_sdk_core::ir::DType;

use super::Ex;

impl Ex<'_> {
    pub(super) fn op(&mut self, code: i32, version: i32, ins: Vec<i32>, outs: Vec<i32>, opts: Option<OptionsT>) {
        let int8 = ins.iter().chain(&outs).any(|&t| t >= 0 && self.sg_ref().tensors[t as usize].type_ == tensor_type_of(DType::I8));
        let version = if int8 { int8_version(code, version) } else { version };
        let n = self.m.operator_codes.len() as u32;
        let e = self.codes.entry(code).or_insert((n, version));
        e.1 = e.1.max(version);
        let idx = e.0;
        if idx == n {
            self.m.operator_codes.push(OperatorCodeT::builtin(code, version));
        } else {
            self.m.operator_codes[idx as usize].version = e.1;
        }
        self.sg().operators.push(OperatorT { opcode_index: idx, inputs: ins, outputs: outs, builtin_options: opts, custom_options: None, intermediates: Vec::new() });
    }

    /// Adds the `min_runtime_version` metadata entry TFLite's converter writes: the highest runtime version
    /// any (op, version) pair of the model needs, as a 16-byte zero-padded string.
    pub(super) fn min_runtime_version(&mut self) {
        let mut best: Option<(Vec<u32>, &'static str)> = None;
        for c in &self.m.operator_codes {
            if let Some(v) = runtime_version(c.builtin_code, c.version) {
                let key: Vec<u32> = v.split('.').map(|p| p.parse().unwrap_or(0)).collect();
                if best.as_ref().is_none_or(|(b, _)| key > *b) {
                    best = Some((key, v));
                }
            }
        }
        let Some((_, v)) = best else { return };
        let mut data = v.as_bytes().to_vec();
        data.resize(16, 0);
        self.m.buffers.push(BufferT { data });
        let buffer = self.m.buffers.len() as u32 - 1;
        self.m.metadata.push(MetadataT { name: "min_runtime_version".into(), buffer });
    }
}

/// The version of an op whose tensors are int8 (TFLite's `op_version.cc`: the int8 kernels arrived as these
/// versions), given the version its attributes alone need.
pub(super) fn int8_version(code: i32, version: i32) -> i32 {
    let v = match code {
        bo::CONV_2D | bo::DEPTHWISE_CONV_2D => 3,
        bo::FULLY_CONNECTED => 4,
        bo::ADD | bo::SUB | bo::MUL | bo::AVERAGE_POOL_2D | bo::MAX_POOL_2D | bo::SOFTMAX | bo::LOGISTIC | bo::TANH => 2,
        bo::CONCATENATION | bo::MEAN | bo::SUM | bo::REDUCE_MAX | bo::REDUCE_MIN | bo::PAD | bo::PADV2 | bo::TRANSPOSE => 2,
        bo::STRIDED_SLICE | bo::GATHER | bo::RELU | bo::RELU6 | bo::MAXIMUM | bo::MINIMUM | bo::LOG_SOFTMAX => 2,
        bo::RESIZE_BILINEAR | bo::RESIZE_NEAREST_NEIGHBOR | bo::DEQUANTIZE | bo::SPACE_TO_DEPTH | bo::SPLIT | bo::SPLIT_V => 2,
        bo::DEPTH_TO_SPACE => 2,
        bo::TILE | bo::REVERSE_V2 => 3,
        _ => version,
    };
    v.max(version)
}

/// The TFLite runtime version an (op, version) pair needs (TFLite's `runtime_version.cc`, the ops this
/// exporter writes); `None` for pairs not listed there.
pub(super) fn runtime_version(code: i32, version: i32) -> Option<&'static str> {
    Some(match (code, version) {
        (bo::CONV_2D, 1) | (bo::DEPTHWISE_CONV_2D, 1) | (bo::ADD, 1) | (bo::AVERAGE_POOL_2D, 1) | (bo::MAX_POOL_2D, 1) => "1.5.0",
        (bo::CONCATENATION, 1) | (bo::FULLY_CONNECTED, 1) | (bo::MUL, 1) | (bo::PAD, 1) | (bo::RESHAPE, 1) | (bo::SOFTMAX, 1) => "1.5.0",
        (bo::RELU, 1) | (bo::RELU6, 1) | (bo::RELU_N1_TO_1, 1) | (bo::SPLIT, 1) => "1.5.0",
        (bo::SUB, 1) | (bo::MEAN, 1) | (bo::TRANSPOSE, 1) | (bo::STRIDED_SLICE, 1) | (bo::GATHER, 1) => "1.6.0",
        (bo::RESIZE_BILINEAR, 1) => "1.7.0",
        (bo::TRANSPOSE_CONV, 1) => "1.9.0",
        (bo::TRANSPOSE_CONV, 2) => "2.2.0",
        (bo::TRANSPOSE_CONV, 3) => "2.3.0",
        (bo::DEPTHWISE_CONV_2D, 2) => "1.12.0",
        (bo::RESIZE_NEAREST_NEIGHBOR, 1) | (bo::DEQUANTIZE, 1) | (bo::SPLIT_V, 1) => "1.13.1",
        (bo::REDUCE_MAX, 1) | (bo::REDUCE_MIN, 1) => "1.11.0",
        (bo::SUM, 1) => "1.10.0",
        (bo::CONV_2D, 2 | 3) | (bo::DEPTHWISE_CONV_2D, 3) | (bo::ADD, 2) | (bo::SUB, 2) | (bo::MUL, 2) => "1.14.0",
        (bo::AVERAGE_POOL_2D, 2) | (bo::MAX_POOL_2D, 2) | (bo::CONCATENATION, 2) | (bo::FULLY_CONNECTED, 3 | 4) => "1.14.0",
        (bo::SOFTMAX, 2) | (bo::LOGISTIC, 1 | 2) | (bo::TANH, 1 | 2) | (bo::MEAN, 2) | (bo::PAD, 2) | (bo::PADV2, 2) => "1.14.0",
        (bo::TRANSPOSE, 2) | (bo::STRIDED_SLICE, 2) | (bo::GATHER, 2) | (bo::MAXIMUM, 1 | 2) | (bo::MINIMUM, 1 | 2) => "1.14.0",
        (bo::RESIZE_BILINEAR, 2) | (bo::RESIZE_NEAREST_NEIGHBOR, 2) | (bo::REDUCE_MAX, 2) | (bo::REDUCE_MIN, 2) => "1.14.0",
        (bo::QUANTIZE, 1) | (bo::DEQUANTIZE, 2) | (bo::RELU6, 2) | (bo::LOG_SOFTMAX, 1 | 2) | (bo::SPACE_TO_DEPTH, 2) => "1.14.0",
        (bo::SPLIT, 2) => "1.14.0",
        (bo::SUM, 2) | (bo::HARD_SWISH, 1) => "1.15.0",
        (bo::FULLY_CONNECTED, 5) => "2.0.0",
        (bo::RELU, 2) => "2.1.0",
        (bo::RESIZE_BILINEAR, 3) => "2.2.0",
        (bo::RESIZE_NEAREST_NEIGHBOR, 3) | (bo::BATCH_MATMUL, 1) | (bo::SPLIT_V, 2) => "2.3.0",
        (bo::GELU, 1) => "2.9.0",
        (bo::TILE, 1) => "1.10.1",
        (bo::DEPTH_TO_SPACE, 1) => "2.1.0",
        (bo::DEPTH_TO_SPACE, 2) => "2.5.0",
        (bo::TILE, 3) => "2.8.0",
        (bo::UNIDIRECTIONAL_SEQUENCE_LSTM, 1) => "1.13.1",
        (bo::UNIDIRECTIONAL_SEQUENCE_RNN, 1) => "1.14.0",
        (bo::REVERSE_V2, 1) => "1.14.0",
        (bo::REVERSE_V2, 3) => "2.5.0",
        _ => return None,
    })
}
