//! Binding to Coral's delegate library (`libedgetpu.so.1`, header `edgetpu_c.h`), loaded at run time with
//! `libloading`; nothing is linked at build time.
//!
//! Safety argument, for every `unsafe` block in this file:
//! * symbols are looked up by the names in `edgetpu_c.h` and cast to its signatures; a library missing one
//!   is rejected by [`EdgeTpuC::load`];
//! * the function pointers live in the same struct as the [`libloading::Library`], kept in an `Arc` by every
//!   user, so they are never called after the library is unloaded;
//! * `edgetpu_list_devices` returns an array of `num_devices` structs (or null) that is copied into owned
//!   Rust values and freed with `edgetpu_free_devices` before [`EdgeTpuC::list_devices`] returns;
//! * the option strings handed to `edgetpu_create_delegate` are `CString`s alive for the duration of the call
//!   (the library copies what it keeps); the returned delegate is freed once with `edgetpu_free_delegate`,
//!   after the interpreter that uses it (owner: `super::Interpreter`).

use std::ffi::{c_char, CString};
use std::path::Path;
use std::sync::Arc;

use tpu_sdk_core::{Error, Result};

use super::tflite_ffi::{cstr, version_string, TfLiteDelegate};

/// `enum edgetpu_device_type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C)]
pub enum DeviceType {
    /// `EDGETPU_APEX_PCI` (0).
    Pci = 0,
    /// `EDGETPU_APEX_USB` (1).
    Usb = 1,
}

#[repr(C)]
struct RawDevice {
    kind: i32,
    path: *const c_char,
}

#[repr(C)]
struct RawOption {
    name: *const c_char,
    value: *const c_char,
}

/// A device as libedgetpu enumerates it.
#[derive(Clone, Debug, PartialEq)]
pub struct Device {
    /// PCI or USB.
    pub kind: DeviceType,
    /// The library's path for it (`/dev/apex_0`, `/sys/bus/usb/devices/2-1`).
    pub path: String,
}

/// libedgetpu's functions.
pub struct EdgeTpuC {
    _lib: libloading::Library,
    list_devices: unsafe extern "C" fn(*mut usize) -> *mut RawDevice,
    free_devices: unsafe extern "C" fn(*mut RawDevice),
    create_delegate: unsafe extern "C" fn(i32, *const c_char, *const RawOption, usize) -> *mut TfLiteDelegate,
    free_delegate: unsafe extern "C" fn(*mut TfLiteDelegate),
    version: unsafe extern "C" fn() -> *const c_char,
}

impl EdgeTpuC {
    /// Loads the library at `path` (a file path, or a bare name searched by the dynamic loader).
    pub fn load(path: &Path) -> Result<EdgeTpuC> {
        // SAFETY: loading runs the library's static initialisers, which have no preconditions.
        let lib = unsafe { libloading::Library::new(path) }.map_err(|e| Error::Device(format!("{}\n  ({e})", super::EDGETPU_INSTALL_HINT)))?;
        let missing = |name: &str| {
            Error::Device(format!("{} has no symbol {name}: it is not Coral's libedgetpu; {}", path.display(), super::EDGETPU_INSTALL_HINT))
        };
        Ok(EdgeTpuC {
            list_devices: sym!(lib, "edgetpu_list_devices", missing),
            free_devices: sym!(lib, "edgetpu_free_devices", missing),
            create_delegate: sym!(lib, "edgetpu_create_delegate", missing),
            free_delegate: sym!(lib, "edgetpu_free_delegate", missing),
            version: sym!(lib, "edgetpu_version", missing),
            _lib: lib,
        })
    }

    /// `edgetpu_version()`, e.g. `BuildLabel(COMPILER=...), RuntimeVersion(14)`.
    pub fn version(&self) -> String {
        version_string(self.version)
    }

    /// The Edge TPUs the library finds.
    pub fn list_devices(&self) -> Vec<Device> {
        let mut n = 0usize;
        // SAFETY: `n` is a valid out-pointer.
        let p = unsafe { (self.list_devices)(&mut n) };
        if p.is_null() {
            return Vec::new();
        }
        let out = (0..n)
            .map(|k| {
                // SAFETY: `p` points to `n` structs (edgetpu_c.h); each path is null or NUL-terminated.
                let d = unsafe { &*p.add(k) };
                Device { kind: if d.kind == 0 { DeviceType::Pci } else { DeviceType::Usb }, path: unsafe { cstr(d.path) } }
            })
            .collect();
        // SAFETY: `p` came from edgetpu_list_devices and is freed once.
        unsafe { (self.free_devices)(p) };
        out
    }

    /// `edgetpu_create_delegate(kind, name, options)`; `None` when the device cannot be opened.
    pub fn create_delegate(self: &Arc<Self>, kind: DeviceType, name: &str, options: &[(String, String)]) -> Result<Option<Delegate>> {
        let c = |s: &str| CString::new(s).map_err(|_| Error::Device(format!("'{s}' contains a NUL byte")));
        let name = c(name)?;
        let strings: Vec<(CString, CString)> = options.iter().map(|(k, v)| Ok((c(k)?, c(v)?))).collect::<Result<_>>()?;
        let raw: Vec<RawOption> = strings.iter().map(|(k, v)| RawOption { name: k.as_ptr(), value: v.as_ptr() }).collect();
        let opts = if raw.is_empty() { std::ptr::null() } else { raw.as_ptr() };
        // SAFETY: all strings outlive the call; `opts` points to `raw.len()` structs or is null with 0.
        let p = unsafe { (self.create_delegate)(kind as i32, name.as_ptr(), opts, raw.len()) };
        Ok(std::ptr::NonNull::new(p).map(|ptr| Delegate { lib: self.clone(), ptr }))
    }
}

/// An Edge TPU delegate; freed with `edgetpu_free_delegate` when dropped (after the interpreter using it:
/// [`super::tflite_ffi::Interp`] holds it and drops it after deleting the interpreter).
pub struct Delegate {
    lib: Arc<EdgeTpuC>,
    ptr: std::ptr::NonNull<TfLiteDelegate>,
}

impl Delegate {
    /// The C pointer, for `TfLiteInterpreterOptionsAddDelegate`.
    pub fn as_ptr(&self) -> *mut TfLiteDelegate {
        self.ptr.as_ptr()
    }
}

// SAFETY: the delegate is only touched through the interpreter that owns it, one thread at a time.
unsafe impl Send for Delegate {}

impl Drop for Delegate {
    fn drop(&mut self) {
        // SAFETY: the pointer came from edgetpu_create_delegate and is freed once.
        unsafe { (self.lib.free_delegate)(self.ptr.as_ptr()) }
    }
}
