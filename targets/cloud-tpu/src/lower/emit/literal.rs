//! MLIR literals and attribute text: element and tensor types, lists and arrays, exact scalar and `dense<...>`
//! literals, the range of each dtype, and the combiner of reductions.

use std::fmt::Write;

use half::{bf16, f16};
use tpu_sdk_core::ir::{DType, Tensor, TensorData};

/// MLIR element type of a dtype.
fn elem(d: DType) -> &'static str {
    match d {
        DType::F32 => "f32",
        DType::F64 => "f64",
        DType::F16 => "f16",
        DType::BF16 => "bf16",
        DType::I8 => "i8",
        DType::U8 => "ui8",
        DType::I16 => "i16",
        DType::I32 => "i32",
        DType::I64 => "i64",
        DType::Bool => "i1",
    }
}

/// `tensor<2x3xf32>`, `tensor<f32>` for scalars.
pub(crate) fn ty(d: DType, shape: &[usize]) -> String {
    let mut s = String::from("tensor<");
    for x in shape {
        let _ = write!(s, "{x}x");
    }
    s.push_str(elem(d));
    s.push('>');
    s
}

/// `[1, 2, 3]`.
pub(crate) fn list<T: std::fmt::Display>(v: &[T]) -> String {
    let items: Vec<String> = v.iter().map(|x| x.to_string()).collect();
    format!("[{}]", items.join(", "))
}

/// `array<i64: 1, 2>` (a DenseI64ArrayAttr in generic syntax).
pub(crate) fn i64_array(v: &[i64]) -> String {
    if v.is_empty() {
        return "array<i64>".into();
    }
    let items: Vec<String> = v.iter().map(|x| x.to_string()).collect();
    format!("array<i64: {}>", items.join(", "))
}

/// The literal of one element of type `d` with value `x`: floats as their exact bit pattern (`0x3F800000`), so
/// that infinities, NaN and every rounding survive; integers in decimal; booleans as `true`/`false`.
pub(crate) fn scalar_literal(x: f64, d: DType) -> String {
    match d {
        DType::F32 => format!("0x{:08X}", (x as f32).to_bits()),
        DType::F64 => format!("0x{:016X}", x.to_bits()),
        DType::F16 => format!("0x{:04X}", f16::from_f64(x).to_bits()),
        DType::BF16 => format!("0x{:04X}", bf16::from_f64(x).to_bits()),
        DType::Bool => (if x != 0.0 { "true" } else { "false" }).into(),
        DType::U8 => (x.clamp(0.0, u8::MAX as f64) as u8).to_string(),
        DType::I8 => (x.clamp(i8::MIN as f64, i8::MAX as f64) as i8).to_string(),
        DType::I16 => (x.clamp(i16::MIN as f64, i16::MAX as f64) as i16).to_string(),
        DType::I32 => (x.clamp(i32::MIN as f64, i32::MAX as f64) as i32).to_string(),
        DType::I64 => (x as i64).to_string(),
    }
}

/// The `dense<...>` attribute of a tensor: a splat when all elements are equal, the raw little-endian bytes in
/// hex (`dense<"0x...">`) otherwise (exact and compact for large weights), nested lists for booleans.
pub(crate) fn dense(t: &Tensor) -> String {
    fn splat<T: PartialEq + Copy>(v: &[T]) -> Option<T> {
        let first = *v.first()?;
        v.iter().all(|x| *x == first).then_some(first)
    }
    fn hex<T: Copy>(v: &[T], bytes: impl Fn(T) -> Vec<u8>) -> String {
        let mut s = String::with_capacity(std::mem::size_of_val(v) * 2 + 10);
        s.push_str("dense<\"0x");
        for &x in v {
            for b in bytes(x) {
                let _ = write!(s, "{b:02X}");
            }
        }
        s.push_str("\">");
        s
    }
    if t.is_empty() {
        return "dense<>".into();
    }
    let d = t.dtype();
    // Splats compare bit patterns for floats (so -0.0 and NaN payloads are kept).
    let splat_value: Option<String> = match &t.data {
        TensorData::F32(v) => splat(&v.iter().map(|x| x.to_bits()).collect::<Vec<_>>()).map(|b| format!("0x{b:08X}")),
        TensorData::F64(v) => splat(&v.iter().map(|x| x.to_bits()).collect::<Vec<_>>()).map(|b| format!("0x{b:016X}")),
        TensorData::F16(v) => splat(&v.iter().map(|x| x.to_bits()).collect::<Vec<_>>()).map(|b| format!("0x{b:04X}")),
        TensorData::BF16(v) => splat(&v.iter().map(|x| x.to_bits()).collect::<Vec<_>>()).map(|b| format!("0x{b:04X}")),
        TensorData::I8(v) => splat(v).map(|x| x.to_string()),
        TensorData::U8(v) => splat(v).map(|x| x.to_string()),
        TensorData::I16(v) => splat(v).map(|x| x.to_string()),
        TensorData::I32(v) => splat(v).map(|x| x.to_string()),
        TensorData::I64(v) => splat(v).map(|x| x.to_string()),
        TensorData::Bool(v) => splat(v).map(|x| x.to_string()),
    };
    if let Some(s) = splat_value {
        return format!("dense<{s}>");
    }
    let _ = d;
    match &t.data {
        TensorData::F32(v) => hex(v, |x| x.to_le_bytes().to_vec()),
        TensorData::F64(v) => hex(v, |x| x.to_le_bytes().to_vec()),
        TensorData::F16(v) => hex(v, |x| x.to_le_bytes().to_vec()),
        TensorData::BF16(v) => hex(v, |x| x.to_le_bytes().to_vec()),
        TensorData::I8(v) => hex(v, |x| x.to_le_bytes().to_vec()),
        TensorData::U8(v) => hex(v, |x| vec![x]),
        TensorData::I16(v) => hex(v, |x| x.to_le_bytes().to_vec()),
        TensorData::I32(v) => hex(v, |x| x.to_le_bytes().to_vec()),
        TensorData::I64(v) => hex(v, |x| x.to_le_bytes().to_vec()),
        TensorData::Bool(v) => format!("dense<{}>", nested(v, &t.shape)),
    }
}

/// Nested-list literal `[[true, false], [false, true]]` of a row-major array.
fn nested(v: &[bool], shape: &[usize]) -> String {
    if shape.is_empty() {
        return v.first().copied().unwrap_or(false).to_string();
    }
    let inner: usize = shape[1..].iter().product();
    let parts: Vec<String> = (0..shape[0]).map(|i| nested(&v[i * inner..(i + 1) * inner], &shape[1..])).collect();
    format!("[{}]", parts.join(", "))
}

/// The body of a reduction: which binary op combines elements.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Combine {
    Add,
    Mul,
    Max,
    Min,
}

impl Combine {
    pub(super) fn op(self) -> &'static str {
        match self {
            Combine::Add => "stablehlo.add",
            Combine::Mul => "stablehlo.multiply",
            Combine::Max => "stablehlo.maximum",
            Combine::Min => "stablehlo.minimum",
        }
    }
    /// The identity element for `d`.
    pub(super) fn init(self, d: DType) -> f64 {
        match self {
            Combine::Add => 0.0,
            Combine::Mul => 1.0,
            Combine::Max => lowest(d),
            Combine::Min => highest(d),
        }
    }
}

/// The attribute dictionary of a `reduce_window`: window dimensions, strides, dilations and (low, high) padding.
pub(super) fn window_attrs(window: &[usize], strides: &[usize], dilations: &[usize], padding: &[(usize, usize)]) -> String {
    let arr = |v: &[usize]| i64_array(&v.iter().map(|&x| x as i64).collect::<Vec<i64>>());
    let pads: Vec<String> = padding.iter().map(|(l, h)| format!("[{l}, {h}]")).collect();
    format!(
        "{{window_dimensions = {}, window_strides = {}, window_dilations = {}, padding = dense<[{}]> : tensor<{}x2xi64>}}",
        arr(window),
        arr(strides),
        arr(dilations),
        pads.join(", "),
        padding.len()
    )
}

/// The `compare_type` of `stablehlo.compare` for an element type.
pub(super) fn compare_type(d: DType) -> &'static str {
    match d {
        DType::F32 | DType::F64 | DType::F16 | DType::BF16 => "FLOAT",
        DType::U8 | DType::Bool => "UNSIGNED",
        _ => "SIGNED",
    }
}

/// The smallest value of a dtype (-inf for floats).
pub(crate) fn lowest(d: DType) -> f64 {
    match d {
        DType::F32 | DType::F64 | DType::F16 | DType::BF16 => f64::NEG_INFINITY,
        DType::I8 => i8::MIN as f64,
        DType::U8 | DType::Bool => 0.0,
        DType::I16 => i16::MIN as f64,
        DType::I32 => i32::MIN as f64,
        DType::I64 => i64::MIN as f64,
    }
}

/// The largest value of a dtype (+inf for floats).
pub(crate) fn highest(d: DType) -> f64 {
    match d {
        DType::F32 | DType::F64 | DType::F16 | DType::BF16 => f64::INFINITY,
        DType::I8 => i8::MAX as f64,
        DType::U8 => u8::MAX as f64,
        DType::Bool => 1.0,
        DType::I16 => i16::MAX as f64,
        DType::I32 => i32::MAX as f64,
        DType::I64 => i64::MAX as f64,
    }
}
