//! Device buffers and the mapping between core dtypes and `PJRT_Buffer_Type`.

use half::{bf16, f16};
use tpu_sdk_core::ir::{DType, Tensor, TensorData};

use super::ffi::{self, BufferHandle};
use crate::error::{Error, Result};

/// `PJRT_Buffer_Type` values (header enum order).
mod ty {
    pub const PRED: i32 = 1;
    pub const S8: i32 = 2;
    pub const S16: i32 = 3;
    pub const S32: i32 = 4;
    pub const S64: i32 = 5;
    pub const U8: i32 = 6;
    pub const F16: i32 = 10;
    pub const F32: i32 = 11;
    pub const F64: i32 = 12;
    pub const BF16: i32 = 13;
}

/// The `PJRT_Buffer_Type` of a core dtype.
pub(crate) fn pjrt_type(d: DType) -> i32 {
    match d {
        DType::Bool => ty::PRED,
        DType::I8 => ty::S8,
        DType::I16 => ty::S16,
        DType::I32 => ty::S32,
        DType::I64 => ty::S64,
        DType::U8 => ty::U8,
        DType::F16 => ty::F16,
        DType::F32 => ty::F32,
        DType::F64 => ty::F64,
        DType::BF16 => ty::BF16,
    }
}

/// The core dtype of a `PJRT_Buffer_Type`, if core has one.
pub(crate) fn core_dtype(t: i32) -> Option<DType> {
    Some(match t {
        ty::PRED => DType::Bool,
        ty::S8 => DType::I8,
        ty::S16 => DType::I16,
        ty::S32 => DType::I32,
        ty::S64 => DType::I64,
        ty::U8 => DType::U8,
        ty::F16 => DType::F16,
        ty::F32 => DType::F32,
        ty::F64 => DType::F64,
        ty::BF16 => DType::BF16,
        _ => return None,
    })
}

/// Calls `f` with the raw bytes of the tensor's elements (row-major).
pub(crate) fn with_bytes<R>(t: &Tensor, f: impl FnOnce(&[u8]) -> R) -> R {
    match &t.data {
        TensorData::F32(v) => f(ffi::bytes_of(v)),
        TensorData::F64(v) => f(ffi::bytes_of(v)),
        TensorData::F16(v) => f(ffi::bytes_of(v)),
        TensorData::BF16(v) => f(ffi::bytes_of(v)),
        TensorData::I8(v) => f(ffi::bytes_of(v)),
        TensorData::U8(v) => f(ffi::bytes_of(v)),
        TensorData::I16(v) => f(ffi::bytes_of(v)),
        TensorData::I32(v) => f(ffi::bytes_of(v)),
        TensorData::I64(v) => f(ffi::bytes_of(v)),
        TensorData::Bool(v) => f(ffi::bytes_of_bools(v)),
    }
}

/// An array on a device.
pub struct Buffer {
    pub(crate) h: BufferHandle,
}

impl std::fmt::Debug for Buffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Buffer({:?} {:?})", self.dtype().ok(), self.dims().ok())
    }
}

impl Buffer {
    pub(crate) fn new(h: BufferHandle) -> Buffer {
        Buffer { h }
    }

    /// Element type.
    pub fn dtype(&self) -> Result<DType> {
        let t = self.h.element_type()?;
        core_dtype(t).ok_or_else(|| Error::Invalid(format!("device buffer has PJRT element type {t}, which tpu-sdk tensors cannot hold")))
    }

    /// Dimensions.
    pub fn dims(&self) -> Result<Vec<usize>> {
        Ok(self.h.dims()?.into_iter().map(|d| d.max(0) as usize).collect())
    }

    /// The device memory address the plugin reports (`PJRT_Buffer_UnsafePointer`): only for telling whether two
    /// buffers share memory (a donated input reused by an aliased output).
    pub fn device_address(&self) -> Result<usize> {
        self.h.device_address()
    }

    /// Copies the array to a host tensor (dense, row-major).
    pub fn to_tensor(&self) -> Result<Tensor> {
        let dtype = self.dtype()?;
        let shape = self.dims()?;
        let n: usize = shape.iter().product();
        fn read<T: ffi::Plain + Default>(b: &BufferHandle, n: usize) -> Result<Vec<T>> {
            let mut v = vec![T::default(); n];
            b.to_host(ffi::bytes_of_mut(&mut v))?;
            Ok(v)
        }
        let data = match dtype {
            DType::F32 => TensorData::F32(read::<f32>(&self.h, n)?),
            DType::F64 => TensorData::F64(read::<f64>(&self.h, n)?),
            DType::F16 => TensorData::F16(read::<f16>(&self.h, n)?),
            DType::BF16 => TensorData::BF16(read::<bf16>(&self.h, n)?),
            DType::I8 => TensorData::I8(read::<i8>(&self.h, n)?),
            DType::U8 => TensorData::U8(read::<u8>(&self.h, n)?),
            DType::I16 => TensorData::I16(read::<i16>(&self.h, n)?),
            DType::I32 => TensorData::I32(read::<i32>(&self.h, n)?),
            DType::I64 => TensorData::I64(read::<i64>(&self.h, n)?),
            DType::Bool => TensorData::Bool(read::<u8>(&self.h, n)?.into_iter().map(|b| b != 0).collect()),
        };
        Tensor::new(shape, data).ok_or_else(|| Error::Invalid("device buffer size does not match its dimensions".into()))
    }
}
