//! Tensors and buffers: new tensors (with their quantization), constants and their little-endian buffers,
//! and output names.

use tpu_sdk_core::format::tflite::builder::*;
use tpu_sdk_core::format::tflite::tensor_type_of;
use tpu_sdk_core::ir::{DType, QuantParams, Tensor, ValueId};
use tpu_sdk_core::{Error, Result};

use super::Ex;

pub(super) fn i32s(v: impl IntoIterator<Item = usize>) -> Vec<i32> {
    v.into_iter().map(|x| x as i32).collect()
}

pub(super) fn le_bytes(t: &Tensor) -> Vec<u8> {
    use tpu_sdk_core::ir::TensorData as D;
    match &t.data {
        D::F32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        D::F64(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        D::F16(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        D::BF16(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        D::I8(v) => v.iter().map(|&x| x as u8).collect(),
        D::U8(v) => v.clone(),
        D::I16(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        D::I32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        D::I64(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        D::Bool(v) => v.iter().map(|&x| x as u8).collect(),
    }
}

/// TFLite quantization of an IR value's parameters held in layout `perm` (the tensor's dimension `i` is the
/// value's dimension `perm[i]`, so the per-axis dimension moves to where `perm` puts it).
pub(super) fn quantization(p: Option<&QuantParams>, perm: &[usize]) -> Option<QuantizationT> {
    let p = p?;
    let quantized_dimension = match p.axis {
        Some(a) if p.scale.len() > 1 => perm.iter().position(|&d| d == a).unwrap_or(a) as i32,
        _ => 0,
    };
    Some(QuantizationT { scale: p.scale.clone(), zero_point: p.zero_point.clone(), quantized_dimension, ..Default::default() })
}

impl Ex<'_> {
    pub(super) fn tensor(&mut self, name: &str, shape: &[usize], dtype: DType) -> Result<i32> {
        if !matches!(dtype, DType::F32 | DType::I32 | DType::I64 | DType::Bool | DType::I8 | DType::U8 | DType::I16) {
            return Err(Error::Unsupported(format!("TFLite export of {dtype} tensor '{name}' (f32 and int8 graphs only)")));
        }
        let t = TensorT { shape: i32s(shape.iter().copied()), type_: tensor_type_of(dtype), name: name.to_string(), ..Default::default() };
        self.sg().tensors.push(t);
        Ok(self.sg_ref().tensors.len() as i32 - 1)
    }

    pub(super) fn constant(&mut self, name: &str, t: &Tensor) -> Result<i32> {
        self.constant_as(name, t, true)
    }

    /// A constant tensor; int64 data is narrowed to int32 when `narrow_i64` (index-like operands: shapes, axes,
    /// indices are int32 in TFLite) and kept otherwise (an operand of arithmetic with an int64 value).
    pub(super) fn constant_as(&mut self, name: &str, t: &Tensor, narrow_i64: bool) -> Result<i32> {
        let t = if narrow_i64 && t.dtype() == DType::I64 {
            let v: Vec<i32> = t.to_i64_vec().iter().map(|&x| x.clamp(i32::MIN as i64, i32::MAX as i64) as i32).collect();
            Tensor::from_vec(t.shape.clone(), v).expect("same length")
        } else {
            t.clone()
        };
        let idx = self.tensor(name, &t.shape, t.dtype())?;
        self.m.buffers.push(BufferT { data: le_bytes(&t) });
        let b = self.m.buffers.len() as u32 - 1;
        self.sg().tensors[idx as usize].buffer = b;
        Ok(idx)
    }

    pub(super) fn const_i32(&mut self, name: &str, v: Vec<i32>) -> Result<i32> {
        let n = v.len();
        self.constant(name, &Tensor::from_vec(vec![n], v).expect("1-D"))
    }

    pub(super) fn const_f32(&mut self, name: &str, shape: Vec<usize>, v: Vec<f32>) -> Result<i32> {
        self.constant(name, &Tensor::from_f32(shape, v))
    }

    pub(super) fn name_output(&mut self, t: i32, name: &str) {
        // The output tensor takes the IR name; other tensors holding it (NHWC copies) are renamed.
        for (i, x) in self.sg().tensors.iter_mut().enumerate() {
            if x.name == name && i != t as usize {
                x.name = format!("{name}/internal{i}");
            }
        }
        self.sg().tensors[t as usize].name = name.to_string();
    }

    /// Sets tensor `t`'s quantization from IR value `v` (held in layout `perm`), if `v` is quantized.
    pub(super) fn set_quant(&mut self, t: i32, v: ValueId, perm: &[usize]) {
        if let Some(q) = quantization(self.g.value(v).quant.as_ref(), perm) {
            self.sg().tensors[t as usize].quantization = Some(q);
        }
    }

    /// A new tensor with the type and quantization of tensor `like` and the given shape.
    pub(super) fn tensor_like(&mut self, name: &str, shape: &[usize], like: i32) -> Result<i32> {
        let l = self.sg_ref().tensors[like as usize].clone();
        let t = TensorT { shape: i32s(shape.iter().copied()), type_: l.type_, name: name.to_string(), quantization: l.quantization, ..Default::default() };
        self.sg().tensors.push(t);
        Ok(self.sg_ref().tensors.len() as i32 - 1)
    }

    /// A scalar clip bound for tensor `dst`: float, or int8 with `dst`'s parameters.
    pub(super) fn bound(&mut self, name: &str, x: f32, dst: i32) -> Result<i32> {
        let d = self.sg_ref().tensors[dst as usize].clone();
        match d.quantization {
            Some(q) if d.type_ == tensor_type_of(DType::I8) => {
                let (s, z) = (q.scale[0], q.zero_point[0]);
                let v = ((x as f64 / s as f64).round() as i64 + z).clamp(-128, 127) as i8;
                let t = self.constant(name, &Tensor::scalar(v))?;
                self.sg().tensors[t as usize].quantization = Some(QuantizationT { scale: vec![s], zero_point: vec![z], ..Default::default() });
                Ok(t)
            }
            _ => self.const_f32(name, vec![], vec![x]),
        }
    }
}
