//! Binding to the TensorFlow Lite C API (`libtensorflowlite_c.so`), loaded at run time with `libloading`.
//! Nothing is linked at build time. Signatures follow `tensorflow/lite/core/c/c_api.h` and `c_api_types.h`.
//!
//! Safety argument, for every `unsafe` block in this file:
//! * each symbol is looked up by its published name and cast to the signature of the published header; a
//!   library that lacks a symbol is rejected at load time ([`TfLiteC::load`] fails), so no call goes through
//!   a missing or mistyped pointer unless a library exports a same-named symbol with another signature, which
//!   the C API's stability promise rules out;
//! * the function pointers are only used while the [`libloading::Library`] that owns them is alive (they are
//!   stored in the same struct, which the callers keep in an `Arc` for as long as any interpreter exists);
//! * the raw object pointers (model, options, interpreter, tensors) are owned by [`super::Interpreter`],
//!   created and freed there in the documented order (delegate outlives interpreter, interpreter outlives its
//!   tensors) and never shared between threads at the same time (`Interpreter` is `Send`, not `Sync`);
//! * buffers passed with a length are Rust slices of exactly that length.

use std::ffi::{c_char, c_void, CStr};
use std::path::Path;
use std::sync::Arc;

use tpu_sdk_core::{Error, Result};

use super::edgetpu_ffi::Delegate;

/// Declares opaque C types, only ever handled through pointers.
macro_rules! opaque {
    ($($(#[$doc:meta])* $name:ident;)*) => {
        $(
            $(#[$doc])*
            #[repr(C)]
            pub struct $name {
                _p: [u8; 0],
            }
        )*
    };
}

opaque! {
    /// Opaque `TfLiteModel`.
    TfLiteModel;
    /// Opaque `TfLiteInterpreterOptions`.
    TfLiteInterpreterOptions;
    /// Opaque `TfLiteInterpreter`.
    TfLiteInterpreter;
    /// Opaque `TfLiteTensor`.
    TfLiteTensor;
    /// Opaque `TfLiteDelegate` (as libedgetpu returns it).
    TfLiteDelegate;
}

/// `TfLiteStatus`: 0 is `kTfLiteOk`.
pub type Status = i32;

/// The C API's functions, resolved from one loaded library.
pub struct TfLiteC {
    _lib: libloading::Library,
    model_create: unsafe extern "C" fn(*const c_void, usize) -> *mut TfLiteModel,
    model_delete: unsafe extern "C" fn(*mut TfLiteModel),
    options_create: unsafe extern "C" fn() -> *mut TfLiteInterpreterOptions,
    options_delete: unsafe extern "C" fn(*mut TfLiteInterpreterOptions),
    options_add_delegate: unsafe extern "C" fn(*mut TfLiteInterpreterOptions, *mut TfLiteDelegate),
    interpreter_create: unsafe extern "C" fn(*const TfLiteModel, *const TfLiteInterpreterOptions) -> *mut TfLiteInterpreter,
    interpreter_delete: unsafe extern "C" fn(*mut TfLiteInterpreter),
    allocate_tensors: unsafe extern "C" fn(*mut TfLiteInterpreter) -> Status,
    input_count: unsafe extern "C" fn(*const TfLiteInterpreter) -> i32,
    input_tensor: unsafe extern "C" fn(*const TfLiteInterpreter, i32) -> *mut TfLiteTensor,
    output_count: unsafe extern "C" fn(*const TfLiteInterpreter) -> i32,
    output_tensor: unsafe extern "C" fn(*const TfLiteInterpreter, i32) -> *const TfLiteTensor,
    invoke: unsafe extern "C" fn(*mut TfLiteInterpreter) -> Status,
    tensor_type: unsafe extern "C" fn(*const TfLiteTensor) -> i32,
    tensor_num_dims: unsafe extern "C" fn(*const TfLiteTensor) -> i32,
    tensor_dim: unsafe extern "C" fn(*const TfLiteTensor, i32) -> i32,
    tensor_byte_size: unsafe extern "C" fn(*const TfLiteTensor) -> usize,
    tensor_name: unsafe extern "C" fn(*const TfLiteTensor) -> *const c_char,
    copy_from_buffer: unsafe extern "C" fn(*mut TfLiteTensor, *const c_void, usize) -> Status,
    copy_to_buffer: unsafe extern "C" fn(*const TfLiteTensor, *mut c_void, usize) -> Status,
    version: unsafe extern "C" fn() -> *const c_char,
}

impl TfLiteC {
    /// Loads the library at `path` (a file path, or a bare name searched by the dynamic loader).
    pub fn load(path: &Path) -> Result<TfLiteC> {
        // SAFETY: loading a shared library runs its initialisers; the TensorFlow Lite C library's are plain C++
        // static constructors without preconditions on the caller.
        let lib = unsafe { libloading::Library::new(path) }.map_err(|e| Error::Device(format!("{}\n  ({e})", super::TFLITE_INSTALL_HINT)))?;
        let missing = |name: &str| {
            Error::Device(format!(
                "{} has no symbol {name}: it is not the TensorFlow Lite C library (or too old); install libtensorflowlite_c.so from TensorFlow Lite 2.5 or newer",
                path.display()
            ))
        };
        Ok(TfLiteC {
            model_create: sym!(lib, "TfLiteModelCreate", missing),
            model_delete: sym!(lib, "TfLiteModelDelete", missing),
            options_create: sym!(lib, "TfLiteInterpreterOptionsCreate", missing),
            options_delete: sym!(lib, "TfLiteInterpreterOptionsDelete", missing),
            options_add_delegate: sym!(lib, "TfLiteInterpreterOptionsAddDelegate", missing),
            interpreter_create: sym!(lib, "TfLiteInterpreterCreate", missing),
            interpreter_delete: sym!(lib, "TfLiteInterpreterDelete", missing),
            allocate_tensors: sym!(lib, "TfLiteInterpreterAllocateTensors", missing),
            input_count: sym!(lib, "TfLiteInterpreterGetInputTensorCount", missing),
            input_tensor: sym!(lib, "TfLiteInterpreterGetInputTensor", missing),
            output_count: sym!(lib, "TfLiteInterpreterGetOutputTensorCount", missing),
            output_tensor: sym!(lib, "TfLiteInterpreterGetOutputTensor", missing),
            invoke: sym!(lib, "TfLiteInterpreterInvoke", missing),
            tensor_type: sym!(lib, "TfLiteTensorType", missing),
            tensor_num_dims: sym!(lib, "TfLiteTensorNumDims", missing),
            tensor_dim: sym!(lib, "TfLiteTensorDim", missing),
            tensor_byte_size: sym!(lib, "TfLiteTensorByteSize", missing),
            tensor_name: sym!(lib, "TfLiteTensorName", missing),
            copy_from_buffer: sym!(lib, "TfLiteTensorCopyFromBuffer", missing),
            copy_to_buffer: sym!(lib, "TfLiteTensorCopyToBuffer", missing),
            version: sym!(lib, "TfLiteVersion", missing),
            _lib: lib,
        })
    }

    /// The library's version string.
    pub fn version(&self) -> String {
        version_string(self.version)
    }
}

/// Why [`Interp::new`] failed.
#[derive(Debug, PartialEq)]
pub enum BuildError {
    /// `TfLiteModelCreate` returned null: not a valid model.
    Model,
    /// `TfLiteInterpreterCreate` returned null.
    Interpreter,
}

/// One interpreter and every C object behind it (model, options, the delegate it uses), freed in the order
/// the C API requires: interpreter, then its delegate, then options and model. All pointers stay inside;
/// the methods take tensor indices, checked against the counts.
pub struct Interp {
    lib: Arc<TfLiteC>,
    model: *mut TfLiteModel,
    options: *mut TfLiteInterpreterOptions,
    interpreter: *mut TfLiteInterpreter,
    delegate: Option<Delegate>,
    _bytes: Vec<u8>,
}

// SAFETY: the objects are used by one thread at a time (`Interp` is not `Sync` and every call that touches
// the interpreter takes `&mut self` or happens before it is shared); the TFLite C API allows an interpreter to
// move between threads.
unsafe impl Send for Interp {}

impl Interp {
    /// `TfLiteModelCreate` over `bytes` (kept alive inside), options with `delegate`, `TfLiteInterpreterCreate`.
    pub fn new(lib: &Arc<TfLiteC>, bytes: Vec<u8>, delegate: Delegate) -> std::result::Result<Interp, BuildError> {
        let n = std::ptr::null_mut();
        let mut it = Interp { lib: lib.clone(), model: n, options: std::ptr::null_mut(), interpreter: std::ptr::null_mut(), delegate: None, _bytes: bytes };
        // SAFETY: pointer and length of the Vec owned by `it`, which outlives the model.
        it.model = unsafe { (lib.model_create)(it._bytes.as_ptr().cast(), it._bytes.len()) };
        let d = delegate.as_ptr();
        it.delegate = Some(delegate);
        if it.model.is_null() {
            return Err(BuildError::Model);
        }
        // SAFETY: no arguments; then a live options object and a live delegate (owned by `it`, freed after the
        // interpreter).
        unsafe {
            it.options = (lib.options_create)();
            (lib.options_add_delegate)(it.options, d);
            it.interpreter = (lib.interpreter_create)(it.model, it.options);
        }
        if it.interpreter.is_null() {
            return Err(BuildError::Interpreter);
        }
        Ok(it)
    }

    /// `TfLiteInterpreterAllocateTensors`; true on success.
    pub fn allocate(&mut self) -> bool {
        // SAFETY: live interpreter.
        unsafe { (self.lib.allocate_tensors)(self.interpreter) == 0 }
    }

    /// `TfLiteInterpreterInvoke`; true on success.
    pub fn invoke(&mut self) -> bool {
        // SAFETY: live interpreter.
        unsafe { (self.lib.invoke)(self.interpreter) == 0 }
    }

    /// Numbers of inputs and outputs.
    pub fn counts(&self) -> (usize, usize) {
        // SAFETY: live interpreter.
        unsafe { ((self.lib.input_count)(self.interpreter).max(0) as usize, (self.lib.output_count)(self.interpreter).max(0) as usize) }
    }

    fn input(&self, k: usize) -> *mut TfLiteTensor {
        if k >= self.counts().0 {
            return std::ptr::null_mut();
        }
        // SAFETY: live interpreter, index in range.
        unsafe { (self.lib.input_tensor)(self.interpreter, k as i32) }
    }

    fn output(&self, k: usize) -> *const TfLiteTensor {
        if k >= self.counts().1 {
            return std::ptr::null();
        }
        // SAFETY: live interpreter, index in range.
        unsafe { (self.lib.output_tensor)(self.interpreter, k as i32) }
    }

    fn info(&self, t: *const TfLiteTensor) -> Option<TensorInfo> {
        if t.is_null() {
            return None;
        }
        // SAFETY: `t` is a non-null tensor of this live interpreter; dims are queried within 0..num_dims; the
        // name is a NUL-terminated string owned by the interpreter, copied at once.
        unsafe {
            let n = (self.lib.tensor_num_dims)(t).max(0);
            let shape = (0..n).map(|k| (self.lib.tensor_dim)(t, k).max(0) as usize).collect();
            Some(TensorInfo { ty: (self.lib.tensor_type)(t), shape, bytes: (self.lib.tensor_byte_size)(t), name: cstr((self.lib.tensor_name)(t)) })
        }
    }

    /// Input `k`'s type, shape, size and name (`None` out of range).
    pub fn input_info(&self, k: usize) -> Option<TensorInfo> {
        self.info(self.input(k))
    }

    /// Output `k`'s type, shape, size and name (`None` out of range).
    pub fn output_info(&self, k: usize) -> Option<TensorInfo> {
        self.info(self.output(k))
    }

    /// Copies `bytes` into input `k`; false when out of range or the size differs.
    pub fn copy_in(&mut self, k: usize, bytes: &[u8]) -> bool {
        let t = self.input(k);
        // SAFETY: non-null tensor of this live interpreter; pointer and length of a live slice.
        !t.is_null() && unsafe { (self.lib.copy_from_buffer)(t, bytes.as_ptr().cast(), bytes.len()) == 0 }
    }

    /// Copies output `k` into `out`; false when out of range or the size differs.
    pub fn copy_out(&self, k: usize, out: &mut [u8]) -> bool {
        let t = self.output(k);
        // SAFETY: non-null tensor of this live interpreter; pointer and length of a live, writable slice.
        !t.is_null() && unsafe { (self.lib.copy_to_buffer)(t, out.as_mut_ptr().cast(), out.len()) == 0 }
    }
}

impl Drop for Interp {
    fn drop(&mut self) {
        // SAFETY: each object was created here and is freed once, interpreter before its delegate.
        unsafe {
            if !self.interpreter.is_null() {
                (self.lib.interpreter_delete)(self.interpreter);
            }
            drop(self.delegate.take());
            if !self.options.is_null() {
                (self.lib.options_delete)(self.options);
            }
            if !self.model.is_null() {
                (self.lib.model_delete)(self.model);
            }
        }
    }
}

/// A tensor's `TfLiteType`, shape, byte size and name.
#[derive(Clone, Debug, PartialEq)]
pub struct TensorInfo {
    /// `TfLiteType` value.
    pub ty: i32,
    /// Dimensions.
    pub shape: Vec<usize>,
    /// Size in bytes.
    pub bytes: usize,
    /// Name.
    pub name: String,
}

/// Copies a C string (null gives "").
///
/// # Safety
/// `p` is null or points to a NUL-terminated string.
pub unsafe fn cstr(p: *const c_char) -> String {
    if p.is_null() {
        String::new()
    } else {
        // SAFETY: guaranteed by the caller.
        unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
    }
}

/// The string a library's version function returns (`TfLiteVersion`, `edgetpu_version`).
pub(super) fn version_string(f: unsafe extern "C" fn() -> *const c_char) -> String {
    // SAFETY: both C APIs document the function as taking nothing and returning a static NUL-terminated string.
    unsafe { cstr(f()) }
}
