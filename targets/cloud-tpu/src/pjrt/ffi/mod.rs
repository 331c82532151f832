//! The PJRT C API boundary: the only module of this crate with `unsafe` code.
//!
//! It holds (1) `#[repr(C)]` transcriptions of the structs of `xla/pjrt/c/pjrt_c_api.h` that this crate uses,
//! (2) the function table `PJRT_Api`, and (3) small owning handles (client, device, executable, buffer) whose
//! safe methods each make one or two C calls. Everything above this module (`super::*`) is safe Rust.
//!
//! Files: `types` holds (1), `table` holds (2); `load` loads a plugin and makes the plugin-level calls, `error`
//! turns `PJRT_Error`s and `PJRT_Event`s into results; `client`, `executable` and `buffer` hold (3); `named` and
//! `bytes` carry strings, named values and host data across the boundary. The macros `slot!`, `call!`, `query!`
//! and `destroy_on_drop!` below hold the unsafe slot read and call that every C call goes through.
//!
//! **Versioning.** The header is versioned through struct sizes: every args struct starts with `struct_size`,
//! which we set to the size the struct has in *our* transcription ([`HEADER_MINOR`]); a plugin built against an
//! older header reads only the prefix it knows, a newer plugin sees that we know fewer fields. The function table
//! `PJRT_Api` grows at the end: before reading any slot we check that it lies inside the plugin's
//! `PJRT_Api.struct_size`, and we refuse a plugin whose major version differs from ours.
//!
//! **Lifetimes.** A loaded plugin is never unloaded (XLA and libtpu keep process-wide state and do not support
//! `dlclose`); its `PJRT_Api` table is therefore valid for the rest of the process. Every handle that a PJRT
//! object owns keeps its owner alive through an `Arc` (buffers and executables keep the client), and every
//! object we own is destroyed exactly once in `Drop`, including `PJRT_Error`s and `PJRT_Event`s.
#![allow(non_camel_case_types, non_snake_case, clippy::upper_case_acronyms)]

use std::collections::HashMap;
use std::ffi::{c_char, c_int, c_void};
use std::marker::{PhantomData, PhantomPinned};
use std::mem::{offset_of, size_of};
use std::path::{Path, PathBuf};
use std::ptr;
use std::sync::{Arc, Mutex, OnceLock};

use crate::error::{Error, Result};

/// Major version of the header transcribed here (`PJRT_API_MAJOR`).
pub const HEADER_MAJOR: i32 = 0;
/// Minor version of the header transcribed here (`PJRT_API_MINOR`, openxla/xla `pjrt_c_api.h`).
pub const HEADER_MINOR: i32 = 113;

/// Reads slot `$slot` of the plugin's table: checks that it lies inside the plugin's table and is non-null.
macro_rules! slot {
    ($api:expr, $slot:ident) => {{
        let api: &Api = $api;
        let end = offset_of!(PJRT_Api, $slot) + size_of::<usize>();
        if end > api.table_size {
            Err(api.missing(stringify!($slot)))
        } else {
            // SAFETY: `api.raw` is the plugin's table, valid for the process lifetime, and the slot lies inside the
            // `struct_size` bytes the plugin declares; we read the slot alone, never the whole (possibly shorter)
            // struct. Every slot is a nullable function pointer, so any value read is a valid `Option<fn>`.
            let f = unsafe { ptr::addr_of!((*api.raw).$slot).read() };
            f.ok_or_else(|| api.missing(stringify!($slot)))
        }
    }};
}

/// Calls function `$slot` with `&mut $args` and turns a returned `PJRT_Error` into `Err`.
macro_rules! call {
    ($api:expr, $slot:ident, $args:expr) => {{
        let api: &Api = $api;
        match slot!(api, $slot) {
            Ok(f) => {
                // SAFETY: `f` is the plugin's implementation of `$slot`, whose C signature is `PJRT_Error* f(Args*)`
                // with the args type declared for the slot in `PJRT_Api`. `$args` is a live, exclusively borrowed
                // args struct whose `struct_size` is set, whose input pointers point to memory that outlives the
                // call (locals of the caller), and whose object handles come from handles that keep those objects
                // alive.
                let err = unsafe { f($args) };
                api.check(err, stringify!($slot))
            }
            Err(e) => Err(e),
        }
    }};
}

/// Builds args struct `$args` with the given fields (the rest zero), calls `$slot` with it and returns the
/// struct, whose out-fields the call filled, or the call's error.
macro_rules! query {
    ($api:expr, $slot:ident, $args:ident { $($field:ident : $value:expr),* $(,)? }) => {{
        let mut a = $args::new();
        $(a.$field = $value;)*
        call!($api, $slot, &mut a).map(|()| a)
    }};
}

/// Implements `Drop` for an owning handle: `$slot` destroys the object in `self.raw` (passed as field `$field`
/// of `$args`), through the API at `self.$api...`; an error while destroying is ignored (there is no caller).
macro_rules! destroy_on_drop {
    ($handle:ty, $slot:ident, $args:ident . $field:ident, $($api:ident).+) => {
        impl Drop for $handle {
            fn drop(&mut self) {
                let _ = query!(&self.$($api).+, $slot, $args { $field: self.raw });
            }
        }
    };
}

mod buffer;
mod bytes;
mod client;
mod error;
mod executable;
mod load;
mod named;
mod table;
mod types;

pub(crate) use buffer::*;
pub(crate) use bytes::*;
pub(crate) use client::*;
pub(crate) use executable::*;
use error::non_null;
pub(crate) use load::*;
pub use named::NamedValue;
pub(crate) use named::*;
pub(crate) use table::*;
pub(crate) use types::*;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_different_major_version_is_refused() {
        assert!(check_version(Path::new("p.so"), 0, 7).is_ok());
        let e = check_version(Path::new("p.so"), 1, 0).unwrap_err().to_string();
        assert!(e.contains("p.so") && e.contains("1.0") && e.contains("major"), "{e}");
    }

    /// A plugin whose table ends before a slot (an older plugin) yields a clear error naming the function
    /// instead of reading past the table; an empty slot inside the table is reported the same way.
    #[test]
    fn slots_beyond_the_plugins_table_are_refused() {
        // SAFETY: all-zero is a valid `PJRT_Api` (sizes 0, null pointers, absent functions).
        let mut table: Box<PJRT_Api> = Box::new(unsafe { std::mem::zeroed() });
        let short = offset_of!(PJRT_Api, PJRT_Client_Create);
        table.struct_size = short;
        let api = Api { raw: &*table, table_size: short, path: "old.so".into(), major: 0, minor: 1, _lib: None };
        let e = ClientHandle::create(&Arc::new(api), &[]).err().expect("refused").to_string();
        assert!(e.contains("PJRT_Client_Create") && e.contains("old.so") && e.contains("0.1"), "{e}");
        // Inside the table but null.
        let full = size_of::<PJRT_Api>();
        let api = Api { raw: &*table, table_size: full, path: "gap.so".into(), major: 0, minor: 99, _lib: None };
        let e = ClientHandle::create(&Arc::new(api), &[]).err().expect("refused").to_string();
        assert!(e.contains("PJRT_Client_Create") && e.contains("gap.so"), "{e}");
        drop(table);
    }

    /// Struct sizes and offsets the header fixes (x86-64/aarch64 LP64), computed by hand from the header.
    #[test]
    fn struct_sizes_match_the_header() {
        assert_eq!(PJRT_Error_Destroy_Args::STRUCT_SIZE, 24);
        assert_eq!(PJRT_Event_Await_Args::STRUCT_SIZE, 24);
        // size, ext, 4 pointer-sized fields... client (7th field) then two try-get fields.
        assert_eq!(PJRT_Client_Create_Args::STRUCT_SIZE, 8 * 11);
        // bool as last field: no tail padding in PJRT_STRUCT_SIZE.
        assert_eq!(PJRT_Device_IsAddressable_Args::STRUCT_SIZE, 25);
        // type_ (int) is followed by padding before `dims`.
        assert_eq!(offset_of!(PJRT_Client_BufferFromHostBuffer_Args, dims), 40);
        assert_eq!(PJRT_Client_BufferFromHostBuffer_Args::STRUCT_SIZE, 8 * 15);
        assert_eq!(PJRT_NamedValue::STRUCT_SIZE, 56);
        assert_eq!(offset_of!(PJRT_Api, PJRT_Error_Destroy), 40);
        // Slot 22 after the header fields: PJRT_Client_BufferFromHostBuffer.
        assert_eq!(offset_of!(PJRT_Api, PJRT_Client_BufferFromHostBuffer), 40 + 22 * 8);
        assert_eq!(offset_of!(PJRT_Api, PJRT_LoadedExecutable_Execute), 40 + 55 * 8);
        assert_eq!(offset_of!(PJRT_Api, PJRT_Buffer_ToHostBuffer), 40 + 70 * 8);
        assert_eq!(offset_of!(PJRT_Api, PJRT_Compile), 40 + 89 * 8);
        assert_eq!(offset_of!(PJRT_Api, PJRT_Executable_Fingerprint), 40 + 94 * 8);
        assert_eq!(PJRT_Buffer_MemoryLayout::STRUCT_SIZE, 16 + 56 + 4);
    }

    /// The fault-injecting plugin of `tests/faults.rs` (C, `tests/stubs/pjrt_fault.c`) patches table slots by
    /// index; its `SLOT_<name> = <index>` lines must agree with this crate's declaration of the table.
    #[test]
    fn fault_stub_slots_match_the_table() {
        let c = include_str!("../../../tests/stubs/pjrt_fault.c");
        let offsets: &[(&str, usize)] = &[
            ("Error_Destroy", offset_of!(PJRT_Api, PJRT_Error_Destroy)),
            ("Error_Message", offset_of!(PJRT_Api, PJRT_Error_Message)),
            ("Error_GetCode", offset_of!(PJRT_Api, PJRT_Error_GetCode)),
            ("Plugin_Initialize", offset_of!(PJRT_Api, PJRT_Plugin_Initialize)),
            ("Client_Create", offset_of!(PJRT_Api, PJRT_Client_Create)),
            ("Client_Compile", offset_of!(PJRT_Api, PJRT_Client_Compile)),
            ("Client_BufferFromHostBuffer", offset_of!(PJRT_Api, PJRT_Client_BufferFromHostBuffer)),
            ("LoadedExecutable_Execute", offset_of!(PJRT_Api, PJRT_LoadedExecutable_Execute)),
            ("Executable_DeserializeAndLoad", offset_of!(PJRT_Api, PJRT_Executable_DeserializeAndLoad)),
            ("Buffer_ToHostBuffer", offset_of!(PJRT_Api, PJRT_Buffer_ToHostBuffer)),
            ("TopologyDescription_Create", offset_of!(PJRT_Api, PJRT_TopologyDescription_Create)),
            ("Compile", offset_of!(PJRT_Api, PJRT_Compile)),
        ];
        let mut seen = 0;
        for line in c.lines() {
            let Some((name, index)) = line.trim().strip_prefix("SLOT_").and_then(|l| l.split_once(" = ")) else { continue };
            let index: usize = index.trim_end_matches(',').parse().expect("a slot index");
            let (_, offset) = offsets.iter().find(|(n, _)| *n == name).unwrap_or_else(|| panic!("SLOT_{name} is not checked here"));
            assert_eq!(40 + 8 * index, *offset, "SLOT_{name} = {index} in pjrt_fault.c");
            seen += 1;
        }
        assert_eq!(seen, offsets.len(), "every slot the stub patches is checked");
    }
}
