//! File formats as bytes: readers and writers of model files shared by the importers, the exporters and the
//! passes (today the TFLite flatbuffer, which the TFLite importer reads and the Edge TPU export writes).

pub mod tflite;

use crate::ir::{DType, TensorData};

/// Decodes dense little-endian element data, as `.npy` files and TFLite buffers store it. `bytes` must hold
/// a whole number of elements; a trailing partial element is ignored.
pub fn decode_le(dtype: DType, bytes: &[u8]) -> TensorData {
    macro_rules! le {
        ($t:ty, $w:literal) => {
            bytes.chunks_exact($w).map(|c| <$t>::from_le_bytes(c.try_into().expect("chunk size"))).collect()
        };
    }
    match dtype {
        DType::F32 => TensorData::F32(le!(f32, 4)),
        DType::F64 => TensorData::F64(le!(f64, 8)),
        DType::F16 => TensorData::F16(bytes.chunks_exact(2).map(|c| half::f16::from_le_bytes([c[0], c[1]])).collect()),
        DType::BF16 => TensorData::BF16(bytes.chunks_exact(2).map(|c| half::bf16::from_le_bytes([c[0], c[1]])).collect()),
        DType::I8 => TensorData::I8(bytes.iter().map(|&b| b as i8).collect()),
        DType::U8 => TensorData::U8(bytes.to_vec()),
        DType::I16 => TensorData::I16(le!(i16, 2)),
        DType::I32 => TensorData::I32(le!(i32, 4)),
        DType::I64 => TensorData::I64(le!(i64, 8)),
        DType::Bool => TensorData::Bool(bytes.iter().map(|&b| b != 0).collect()),
    }
}
