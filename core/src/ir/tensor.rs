//! Dense host tensors: the constant data of the IR and the values the CPU runtime computes.

use super::dtype::DType;
use half::{bf16, f16};

/// Typed element storage of a [`Tensor`].
#[derive(Clone, Debug, PartialEq)]
#[allow(missing_docs)]
pub enum TensorData {
    F32(Vec<f32>),
    F64(Vec<f64>),
    F16(Vec<f16>),
    BF16(Vec<bf16>),
    I8(Vec<i8>),
    U8(Vec<u8>),
    I16(Vec<i16>),
    I32(Vec<i32>),
    I64(Vec<i64>),
    Bool(Vec<bool>),
}

/// Calls `$body` with `$v` bound to the inner `Vec` of any [`TensorData`] variant.
#[macro_export]
macro_rules! with_data {
    ($data:expr, $v:ident => $body:expr) => {
        match $data {
            $crate::ir::TensorData::F32($v) => $body,
            $crate::ir::TensorData::F64($v) => $body,
            $crate::ir::TensorData::F16($v) => $body,
            $crate::ir::TensorData::BF16($v) => $body,
            $crate::ir::TensorData::I8($v) => $body,
            $crate::ir::TensorData::U8($v) => $body,
            $crate::ir::TensorData::I16($v) => $body,
            $crate::ir::TensorData::I32($v) => $body,
            $crate::ir::TensorData::I64($v) => $body,
            $crate::ir::TensorData::Bool($v) => $body,
        }
    };
}

/// Maps a [`TensorData`] to a new one of the same variant, applying `$body` to the inner `Vec`.
#[macro_export]
macro_rules! map_data {
    ($data:expr, $v:ident => $body:expr) => {
        match $data {
            $crate::ir::TensorData::F32($v) => $crate::ir::TensorData::F32($body),
            $crate::ir::TensorData::F64($v) => $crate::ir::TensorData::F64($body),
            $crate::ir::TensorData::F16($v) => $crate::ir::TensorData::F16($body),
            $crate::ir::TensorData::BF16($v) => $crate::ir::TensorData::BF16($body),
            $crate::ir::TensorData::I8($v) => $crate::ir::TensorData::I8($body),
            $crate::ir::TensorData::U8($v) => $crate::ir::TensorData::U8($body),
            $crate::ir::TensorData::I16($v) => $crate::ir::TensorData::I16($body),
            $crate::ir::TensorData::I32($v) => $crate::ir::TensorData::I32($body),
            $crate::ir::TensorData::I64($v) => $crate::ir::TensorData::I64($body),
            $crate::ir::TensorData::Bool($v) => $crate::ir::TensorData::Bool($body),
        }
    };
}

impl TensorData {
    /// Element type of this storage.
    pub fn dtype(&self) -> DType {
        match self {
            TensorData::F32(_) => DType::F32,
            TensorData::F64(_) => DType::F64,
            TensorData::F16(_) => DType::F16,
            TensorData::BF16(_) => DType::BF16,
            TensorData::I8(_) => DType::I8,
            TensorData::U8(_) => DType::U8,
            TensorData::I16(_) => DType::I16,
            TensorData::I32(_) => DType::I32,
            TensorData::I64(_) => DType::I64,
            TensorData::Bool(_) => DType::Bool,
        }
    }
    /// Number of elements.
    pub fn len(&self) -> usize {
        with_data!(self, v => v.len())
    }
    /// True when there are no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Zero-filled storage of `dtype` with `n` elements.
    pub fn zeros(dtype: DType, n: usize) -> TensorData {
        match dtype {
            DType::F32 => TensorData::F32(vec![0.0; n]),
            DType::F64 => TensorData::F64(vec![0.0; n]),
            DType::F16 => TensorData::F16(vec![f16::ZERO; n]),
            DType::BF16 => TensorData::BF16(vec![bf16::ZERO; n]),
            DType::I8 => TensorData::I8(vec![0; n]),
            DType::U8 => TensorData::U8(vec![0; n]),
            DType::I16 => TensorData::I16(vec![0; n]),
            DType::I32 => TensorData::I32(vec![0; n]),
            DType::I64 => TensorData::I64(vec![0; n]),
            DType::Bool => TensorData::Bool(vec![false; n]),
        }
    }
}

/// A dense, row-major host tensor.
#[derive(Clone, Debug, PartialEq)]
pub struct Tensor {
    /// Dimensions, outermost first. An empty shape is a scalar.
    pub shape: Vec<usize>,
    /// Elements in row-major order; `data.len()` equals the product of `shape`.
    pub data: TensorData,
}

impl Default for Tensor {
    /// An empty f32 tensor of shape `[0]`.
    fn default() -> Tensor {
        Tensor { shape: vec![0], data: TensorData::F32(Vec::new()) }
    }
}

impl Tensor {
    /// Builds a tensor; returns `None` when the element count does not match the shape.
    pub fn new(shape: Vec<usize>, data: TensorData) -> Option<Tensor> {
        (shape.iter().product::<usize>() == data.len()).then_some(Tensor { shape, data })
    }
    /// An f32 tensor. Panics if `data.len()` is not the product of `shape` (a programming error).
    pub fn from_f32(shape: Vec<usize>, data: Vec<f32>) -> Tensor {
        Tensor::new(shape, TensorData::F32(data)).expect("element count must match shape")
    }
    /// An i64 tensor. Panics if `data.len()` is not the product of `shape`.
    pub fn from_i64(shape: Vec<usize>, data: Vec<i64>) -> Tensor {
        Tensor::new(shape, TensorData::I64(data)).expect("element count must match shape")
    }
    /// A zero-filled tensor.
    pub fn zeros(dtype: DType, shape: Vec<usize>) -> Tensor {
        let n = shape.iter().product();
        Tensor { shape, data: TensorData::zeros(dtype, n) }
    }
    /// Element type.
    pub fn dtype(&self) -> DType {
        self.data.dtype()
    }
    /// Number of elements.
    pub fn len(&self) -> usize {
        self.data.len()
    }
    /// True when the tensor holds no elements.
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }
    /// The f32 elements, if this is an f32 tensor.
    pub fn as_f32(&self) -> Option<&[f32]> {
        match &self.data {
            TensorData::F32(v) => Some(v),
            _ => None,
        }
    }
    /// Elements converted to i64 (integers and bools exactly; floats truncated). Used for shape-like inputs.
    pub fn to_i64_vec(&self) -> Vec<i64> {
        match &self.data {
            TensorData::F32(v) => v.iter().map(|&x| x as i64).collect(),
            TensorData::F64(v) => v.iter().map(|&x| x as i64).collect(),
            TensorData::F16(v) => v.iter().map(|&x| x.to_f32() as i64).collect(),
            TensorData::BF16(v) => v.iter().map(|&x| x.to_f32() as i64).collect(),
            TensorData::I8(v) => v.iter().map(|&x| x as i64).collect(),
            TensorData::U8(v) => v.iter().map(|&x| x as i64).collect(),
            TensorData::I16(v) => v.iter().map(|&x| x as i64).collect(),
            TensorData::I32(v) => v.iter().map(|&x| x as i64).collect(),
            TensorData::I64(v) => v.clone(),
            TensorData::Bool(v) => v.iter().map(|&x| x as i64).collect(),
        }
    }
    /// Elements converted to f64 (for comparisons and reports).
    pub fn to_f64_vec(&self) -> Vec<f64> {
        match &self.data {
            TensorData::F32(v) => v.iter().map(|&x| x as f64).collect(),
            TensorData::F64(v) => v.clone(),
            TensorData::F16(v) => v.iter().map(|&x| x.to_f64()).collect(),
            TensorData::BF16(v) => v.iter().map(|&x| x.to_f64()).collect(),
            TensorData::I8(v) => v.iter().map(|&x| x as f64).collect(),
            TensorData::U8(v) => v.iter().map(|&x| x as f64).collect(),
            TensorData::I16(v) => v.iter().map(|&x| x as f64).collect(),
            TensorData::I32(v) => v.iter().map(|&x| x as f64).collect(),
            TensorData::I64(v) => v.iter().map(|&x| x as f64).collect(),
            TensorData::Bool(v) => v.iter().map(|&x| x as u8 as f64).collect(),
        }
    }
}

/// A Rust element type that a [`Tensor`] can hold; lets kernels be generic over dtypes.
pub trait Element: Copy + Default + PartialOrd + Send + Sync + std::fmt::Debug + 'static {
    /// The IR dtype of this element type.
    const DTYPE: DType;
    /// The elements of `d` if it holds this type.
    fn slice(d: &TensorData) -> Option<&[Self]>;
    /// The storage of `d` if it holds this type.
    fn vec_mut(d: &mut TensorData) -> Option<&mut Vec<Self>>;
    /// Wraps a vector into storage.
    fn wrap(v: Vec<Self>) -> TensorData;
    /// Converts to f64 (bools as 0/1).
    fn to_f64(self) -> f64;
    /// Converts from f64 (saturating `as` casts for integers; non-zero is true for bools).
    fn from_f64(x: f64) -> Self;
}

macro_rules! element {
    ($t:ty, $variant:ident, $to:expr, $from:expr) => {
        impl Element for $t {
            const DTYPE: DType = DType::$variant;
            fn slice(d: &TensorData) -> Option<&[Self]> {
                match d {
                    TensorData::$variant(v) => Some(v),
                    _ => None,
                }
            }
            fn vec_mut(d: &mut TensorData) -> Option<&mut Vec<Self>> {
                match d {
                    TensorData::$variant(v) => Some(v),
                    _ => None,
                }
            }
            fn wrap(v: Vec<Self>) -> TensorData {
                TensorData::$variant(v)
            }
            #[inline]
            fn to_f64(self) -> f64 {
                let f: fn($t) -> f64 = $to;
                f(self)
            }
            #[inline]
            fn from_f64(x: f64) -> Self {
                let f: fn(f64) -> $t = $from;
                f(x)
            }
        }
    };
}

element!(f32, F32, |x| x as f64, |x| x as f32);
element!(f64, F64, |x| x, |x| x);
element!(f16, F16, |x| x.to_f64(), f16::from_f64);
element!(bf16, BF16, |x| x.to_f64(), bf16::from_f64);
element!(i8, I8, |x| x as f64, |x| x as i8);
element!(u8, U8, |x| x as f64, |x| x as u8);
element!(i16, I16, |x| x as f64, |x| x as i16);
element!(i32, I32, |x| x as f64, |x| x as i32);
element!(i64, I64, |x| x as f64, |x| x as i64);
element!(bool, Bool, |x| x as u8 as f64, |x| x != 0.0);

impl Tensor {
    /// The elements as `&[T]`, if the tensor holds `T`.
    pub fn view<T: Element>(&self) -> Option<&[T]> {
        T::slice(&self.data)
    }
    /// The elements as `&mut [T]`, if the tensor holds `T`.
    pub fn view_mut<T: Element>(&mut self) -> Option<&mut [T]> {
        T::vec_mut(&mut self.data).map(|v| v.as_mut_slice())
    }
    /// A tensor from a vector; `None` when the length does not match the shape.
    pub fn from_vec<T: Element>(shape: Vec<usize>, v: Vec<T>) -> Option<Tensor> {
        Tensor::new(shape, T::wrap(v))
    }
    /// A scalar (rank-0) tensor.
    pub fn scalar<T: Element>(x: T) -> Tensor {
        Tensor { shape: vec![], data: T::wrap(vec![x]) }
    }
    /// Re-shapes this tensor to `shape` holding `T`, reusing its storage when it already holds `T`
    /// (no allocation once the capacity suffices), and returns the elements to fill.
    ///
    /// The returned contents are unspecified (stale values from an earlier use); kernels overwrite every
    /// element or call `fill` first.
    pub fn reset<T: Element>(&mut self, shape: &[usize]) -> &mut [T] {
        let n: usize = shape.iter().product();
        self.shape.clear();
        self.shape.extend_from_slice(shape);
        if T::vec_mut(&mut self.data).is_none() {
            self.data = T::wrap(Vec::with_capacity(n));
        }
        let v = T::vec_mut(&mut self.data).expect("storage holds T after the replacement above");
        if v.len() > n {
            v.truncate(n);
        } else {
            v.resize(n, T::default());
        }
        v.as_mut_slice()
    }
    /// Like [`Tensor::reset`] with the dtype chosen at run time (contents unspecified).
    pub fn reset_dtype(&mut self, dtype: DType, shape: &[usize]) {
        match dtype {
            DType::F32 => drop(self.reset::<f32>(shape)),
            DType::F64 => drop(self.reset::<f64>(shape)),
            DType::F16 => drop(self.reset::<f16>(shape)),
            DType::BF16 => drop(self.reset::<bf16>(shape)),
            DType::I8 => drop(self.reset::<i8>(shape)),
            DType::U8 => drop(self.reset::<u8>(shape)),
            DType::I16 => drop(self.reset::<i16>(shape)),
            DType::I32 => drop(self.reset::<i32>(shape)),
            DType::I64 => drop(self.reset::<i64>(shape)),
            DType::Bool => drop(self.reset::<bool>(shape)),
        }
    }
    /// Copies `src` into this tensor, reusing storage where possible.
    pub fn assign(&mut self, src: &Tensor) {
        let shape = src.shape.clone();
        with_data!(&src.data, v => {
            let dst = self.reset(&shape);
            dst.copy_from_slice(v);
        })
    }
}

impl Tensor {
    /// The tensor with its dimensions permuted: `out.shape[i] = shape[perm[i]]`, the data moved to match
    /// (as a Transpose computes it).
    pub fn permuted(&self, perm: &[usize]) -> Tensor {
        fn go<T: Copy>(v: &[T], shape: &[usize], perm: &[usize]) -> Vec<T> {
            let rank = shape.len();
            let mut in_strides = vec![1usize; rank];
            for i in (0..rank.saturating_sub(1)).rev() {
                in_strides[i] = in_strides[i + 1] * shape[i + 1];
            }
            let out_shape: Vec<usize> = perm.iter().map(|&p| shape[p]).collect();
            let strides: Vec<usize> = perm.iter().map(|&p| in_strides[p]).collect();
            let n = v.len();
            let mut out = Vec::with_capacity(n);
            if n == 0 {
                return out;
            }
            let mut idx = vec![0usize; rank];
            let mut off = 0usize;
            for _ in 0..n {
                out.push(v[off]);
                super::ops::dims::step_index(&mut idx, &out_shape, &strides, &mut off);
            }
            out
        }
        let shape: Vec<usize> = perm.iter().map(|&p| self.shape[p]).collect();
        Tensor { data: map_data!(&self.data, v => go(v, &self.shape, perm)), shape }
    }

    /// Indices `[start, end)` of the first dimension (a block of output channels of OIHW weights, of a bias).
    /// Panics on a scalar or a range outside the dimension, like slice indexing.
    pub fn slice_axis0(&self, start: usize, end: usize) -> Tensor {
        let per: usize = self.shape[1..].iter().product();
        let mut shape = self.shape.clone();
        shape[0] = end - start;
        Tensor { data: map_data!(&self.data, v => v[start * per..end * per].to_vec()), shape }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reset_reuses_storage_and_switches_dtype() {
        let mut t = Tensor::zeros(DType::F32, vec![4]);
        let ptr = t.view::<f32>().unwrap().as_ptr();
        t.reset::<f32>(&[2, 2]).fill(1.0);
        assert_eq!(t.view::<f32>().unwrap().as_ptr(), ptr);
        assert_eq!(t.shape, vec![2, 2]);
        t.reset::<i64>(&[3]).copy_from_slice(&[1, 2, 3]);
        assert_eq!(t.dtype(), DType::I64);
        assert_eq!(t.to_i64_vec(), vec![1, 2, 3]);
        let mut u = Tensor::scalar(0u8);
        u.assign(&t);
        assert_eq!(u, t);
    }
}
