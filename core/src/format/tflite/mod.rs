//! The TFLite flatbuffer (schema v3): [`schema`] reads a file (verified, zero-copy), [`builder`] writes one,
//! and the helpers here are the format's conventions: its tensor types as IR dtypes and back, its buffer data
//! as tensor data, and how it turns SAME/VALID padding into explicit pads.
//!
//! The TFLite importer (`import::tflite`), the Edge TPU export and compiler, and the passes use this module.

pub mod builder;
pub(crate) mod flexbuffer;
pub mod schema;
pub(crate) mod sparsity;
#[cfg(test)]
pub(crate) mod tests;

use crate::ir::{DType, TensorData};
use schema::{padding, tensor_type as tt};

/// The IR dtype of a TFLite tensor type.
pub fn dtype_of(t: i8) -> Option<DType> {
    Some(match t {
        tt::FLOAT32 => DType::F32,
        tt::FLOAT16 => DType::F16,
        tt::BFLOAT16 => DType::BF16,
        tt::FLOAT64 => DType::F64,
        tt::INT8 => DType::I8,
        tt::UINT8 => DType::U8,
        tt::INT16 => DType::I16,
        tt::INT32 => DType::I32,
        tt::INT64 => DType::I64,
        tt::BOOL => DType::Bool,
        _ => return None,
    })
}

/// The TFLite tensor type of an IR dtype.
pub fn tensor_type_of(d: DType) -> i8 {
    match d {
        DType::F32 => tt::FLOAT32,
        DType::F16 => tt::FLOAT16,
        DType::BF16 => tt::BFLOAT16,
        DType::F64 => tt::FLOAT64,
        DType::I8 => tt::INT8,
        DType::U8 => tt::UINT8,
        DType::I16 => tt::INT16,
        DType::I32 => tt::INT32,
        DType::I64 => tt::INT64,
        DType::Bool => tt::BOOL,
    }
}

/// Decodes the little-endian bytes of a buffer holding `n` elements of `dtype`.
pub fn decode_data(dtype: DType, bytes: &[u8], n: usize) -> std::result::Result<TensorData, String> {
    let size = dtype.size_bytes();
    if n.checked_mul(size) != Some(bytes.len()) {
        let need = n.checked_mul(size).map_or_else(|| "more than 2^64".to_string(), |b| b.to_string());
        return Err(format!("has {} bytes of data, its shape needs {need} ({n} × {size})", bytes.len()));
    }
    Ok(crate::format::decode_le(dtype, bytes))
}

/// How TFLite computes explicit padding for SAME/VALID: (output size, pad before, pad after).
pub fn tflite_padding(pad: i8, input: usize, kernel: usize, stride: usize, dilation: usize) -> (usize, usize, usize) {
    let eff = (kernel.saturating_sub(1)) * dilation + 1;
    let out = if pad == padding::VALID { (input + stride).saturating_sub(eff) / stride } else { input.div_ceil(stride) };
    let total = ((out.saturating_sub(1)) * stride + eff).saturating_sub(input);
    (out, total / 2, total - total / 2)
}
