//! Input arrays that a session reads in place: `Session.input_array(name)` returns a numpy array whose memory
//! is a runtime [`Tensor`], held by an [`InputBuffer`] object (the array's `base`). A run given that array (or
//! a full, C-ordered view of it) borrows the tensor instead of copying the array, so the CPU runtime's kernels
//! read the caller's memory directly; any other array is copied once (counted by [`note_copy`], which the
//! tests read through `_native._input_bytes_copied`).
//!
//! This is the one module of the extension with `unsafe`; the safety argument is beside each use.

use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicU64, Ordering};

use numpy::ndarray::{ArrayViewMutD, IxDyn};
use numpy::{PyArrayDescrMethods, PyArrayDyn, PyUntypedArray, PyUntypedArrayMethods};
use pyo3::prelude::*;
use tpu_sdk::core::ir::TensorData;
use tpu_sdk::{DType, Tensor};

/// Bytes copied from numpy arrays into runtime tensors since the module was loaded.
static INPUT_BYTES_COPIED: AtomicU64 = AtomicU64::new(0);

/// Counts `bytes` copied from an array into a tensor.
pub(crate) fn note_copy(bytes: usize) {
    INPUT_BYTES_COPIED.fetch_add(bytes as u64, Ordering::Relaxed);
}

/// Bytes copied from numpy arrays into runtime tensors since the module was loaded (arrays from
/// `Session.input_array` are not copied and do not count).
#[pyfunction]
pub(crate) fn _input_bytes_copied() -> u64 {
    INPUT_BYTES_COPIED.load(Ordering::Relaxed)
}

/// The tensor behind numpy arrays made by `input_array`.
///
/// Safety argument for the `unsafe` below:
/// - Rust never writes the tensor and never resizes its storage after [`InputBuffer::array`] made it, so
///   its element pointer stays valid and fixed for the object's life; every numpy array over it holds the object
///   as its `base` (a reference), so the memory outlives every array that views it.
/// - Python writes the elements only through those arrays, whose pointer was taken from a unique (`&mut`)
///   borrow when the tensor was made; Rust reads them through `&Tensor` only during a run.
/// - A run reads the buffer with the GIL released. Writing the same array from another Python thread during
///   that run is a data race, as with any numpy array handed to native code that releases the GIL
///   (onnxruntime's, PyTorch's `from_numpy`): `Session.input_array`'s documentation says so. A thread that
///   runs and then writes, or writes and then runs, is ordered by the GIL.
#[pyclass(module = "tpu_sdk._native", frozen)]
pub(crate) struct InputBuffer {
    tensor: Shared,
}

struct Shared(UnsafeCell<Tensor>);

// SAFETY: see InputBuffer: shared access from Rust is read-only, and writes from Python are ordered with runs
// by the GIL under the documented contract.
unsafe impl Sync for Shared {}

impl InputBuffer {
    /// A zeroed tensor of `dtype` and `shape` and a writable numpy array over it. `None` for a dtype numpy
    /// has no type for (bf16: the caller gives a float32 array, converted on each run).
    pub(crate) fn array<'py>(py: Python<'py>, dtype: DType, shape: &[usize]) -> PyResult<Option<Bound<'py, PyAny>>> {
        macro_rules! view {
            ($t:ty, $variant:ident) => {{
                let owner = Bound::new(py, InputBuffer { tensor: Shared(UnsafeCell::new(Tensor::zeros(dtype, shape.to_vec()))) })?;
                // SAFETY: the object was just made and nothing else refers to its tensor yet: this `&mut` is
                // the only borrow, and the view's pointer keeps its write permission (see InputBuffer).
                let t: &mut Tensor = unsafe { &mut *owner.get().tensor.0.get() };
                let TensorData::$variant(v) = &mut t.data else { unreachable!("Tensor::zeros makes {}", stringify!($variant)) };
                let view = ArrayViewMutD::from_shape(IxDyn(shape), v.as_mut_slice()).expect("element count is the shape's product");
                // SAFETY: `owner` becomes the array's base and keeps the storage alive; the storage is never
                // reallocated (see InputBuffer).
                let arr = unsafe { PyArrayDyn::<$t>::borrow_from_array(&view, owner.into_any()) };
                Some(arr.into_any())
            }};
        }
        Ok(match dtype {
            DType::F32 => view!(f32, F32),
            DType::F64 => view!(f64, F64),
            DType::F16 => view!(half::f16, F16),
            DType::I8 => view!(i8, I8),
            DType::U8 => view!(u8, U8),
            DType::I16 => view!(i16, I16),
            DType::I32 => view!(i32, I32),
            DType::I64 => view!(i64, I64),
            DType::Bool => view!(bool, Bool),
            DType::BF16 => None,
        })
    }

    /// The tensor, for a run to read.
    pub(crate) fn tensor(&self) -> &Tensor {
        // SAFETY: Rust only reads it after creation (see InputBuffer).
        unsafe { &*self.tensor.0.get() }
    }

    /// The buffer whose tensor `arr` is exactly: an array made by `input_array` (or a view of the whole of
    /// it, in C order, with the same shape and dtype). `None` for any other array (it is then copied).
    pub(crate) fn behind<'py>(arr: &Bound<'py, PyUntypedArray>) -> Option<Bound<'py, InputBuffer>> {
        if !arr.is_c_contiguous() {
            return None;
        }
        // numpy collapses chains of views to the array that owns the memory, whose base is the buffer; a
        // few steps are followed in case another library wraps the array.
        let mut base = arr.getattr("base").ok()?;
        let mut buf = None;
        for _ in 0..8 {
            if base.is_none() {
                return None;
            }
            if let Ok(b) = base.downcast::<InputBuffer>() {
                buf = Some(b.clone());
                break;
            }
            base = base.getattr("base").ok()?;
        }
        let buf = buf?;
        let t = buf.get().tensor();
        let same_dtype = arr.dtype().is_equiv_to(&crate::numpy_dtype(arr.py(), t.dtype())) && t.dtype() != DType::BF16;
        let data = {
            // SAFETY: reads the `data` field of a live array object (the pointer numpy's own `ndarray.ctypes.data` gives).
            unsafe { (*arr.as_array_ptr()).data as *const u8 }
        };
        let same_memory = data == tpu_sdk::core::with_data!(&t.data, v => v.as_ptr() as *const u8);
        (same_dtype && same_memory && arr.shape() == t.shape.as_slice()).then_some(buf)
    }
}
