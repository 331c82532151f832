//! The PJRT C API boundary: the only module of this crate with `unsafe` code.
//!
//! It holds (1) `#[repr(C)]` transcriptions of the structs of `xla/pjrt/c/pjrt_c_api.h` that this crate uses,
//! (2) the function table `PJRT_Api`, and (3) small owning handles (client, device, executable, buffer) whose
//! safe methods each make one or two C calls. Everything above this module (`super::*`) is safe Rust.
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

// ------------------------------------------------------------------------------------------------------------
// Opaque types

macro_rules! opaque {
    ($($name:ident),* $(,)?) => {
        $(
            /// An opaque PJRT object, only ever handled through a pointer.
            #[repr(C)]
            pub(crate) struct $name {
                _data: [u8; 0],
                _marker: PhantomData<(*mut u8, PhantomPinned)>,
            }
        )*
    };
}

opaque!(
    PJRT_Extension_Base,
    PJRT_Error,
    PJRT_Event,
    PJRT_Client,
    PJRT_Device,
    PJRT_DeviceDescription,
    PJRT_Memory,
    PJRT_Executable,
    PJRT_LoadedExecutable,
    PJRT_Buffer,
    PJRT_TopologyDescription,
    PJRT_ExecuteContext,
    PJRT_SerializedExecutable,
    PJRT_MultiSlice_Config,
);

// C enums are `int`-sized on every platform PJRT plugins exist for (x86-64 and aarch64 Linux, System V ABI).
type CEnum = c_int;

/// `PJRT_NamedValue_Type`.
pub(crate) const NAMED_STRING: CEnum = 0;
pub(crate) const NAMED_INT64: CEnum = 1;
pub(crate) const NAMED_INT64_LIST: CEnum = 2;
pub(crate) const NAMED_FLOAT: CEnum = 3;
pub(crate) const NAMED_BOOL: CEnum = 4;

/// `PJRT_HostBufferSemantics_kImmutableUntilTransferCompletes`.
const HOST_BUFFER_IMMUTABLE_UNTIL_TRANSFER_COMPLETES: CEnum = 1;
/// `PJRT_Buffer_MemoryLayout_Type_Tiled`.
const LAYOUT_TILED: CEnum = 0;

// ------------------------------------------------------------------------------------------------------------
// Args structs

/// Defines an args struct: `struct_size` and `extension_start` first, then the fields, the last one given
/// separately so that `STRUCT_SIZE` is computed exactly like the header's `PJRT_STRUCT_SIZE(type, last_field)`
/// (which, unlike `size_of`, excludes the tail padding).
macro_rules! args {
    ($name:ident { $($f:ident : $t:ty),* $(,)? } last $lf:ident : $lt:ty) => {
        #[repr(C)]
        pub(crate) struct $name {
            pub(crate) struct_size: usize,
            pub(crate) extension_start: *mut PJRT_Extension_Base,
            $(pub(crate) $f: $t,)*
            pub(crate) $lf: $lt,
        }
        impl $name {
            /// `PJRT_STRUCT_SIZE` of this struct in our header version.
            pub(crate) const STRUCT_SIZE: usize = offset_of!($name, $lf) + size_of::<$lt>();
            /// All fields zero (null pointers, zero counts, `false`, absent callbacks), `struct_size` set.
            pub(crate) fn new() -> Self {
                // SAFETY: every field of an args struct is a raw pointer, an integer, a `bool`, a C enum (`c_int`),
                // an `Option` of a function pointer, or a nested struct/union of those; the all-zero bit pattern is
                // a valid value of each (null, 0, false, None).
                let mut a: Self = unsafe { std::mem::zeroed() };
                a.struct_size = Self::STRUCT_SIZE;
                a
            }
        }
    };
}

args!(PJRT_Error_Destroy_Args {} last error: *mut PJRT_Error);
args!(PJRT_Error_Message_Args { error: *const PJRT_Error, message: *const c_char } last message_size: usize);
args!(PJRT_Error_GetCode_Args { error: *const PJRT_Error } last code: CEnum);

/// The value of a `PJRT_NamedValue` (`union` in the header).
#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) union PJRT_NamedValue_Value {
    pub(crate) string_value: *const c_char,
    pub(crate) int64_value: i64,
    pub(crate) int64_array_value: *const i64,
    pub(crate) float_value: f32,
    pub(crate) bool_value: bool,
}

args!(PJRT_NamedValue {
    name: *const c_char,
    name_size: usize,
    type_: CEnum,
    value: PJRT_NamedValue_Value,
} last value_size: usize);

args!(PJRT_Plugin_Initialize_Args {} last _none: [u8; 0]);
args!(PJRT_Plugin_Attributes_Args { attributes: *const PJRT_NamedValue } last num_attributes: usize);

args!(PJRT_Event_Destroy_Args {} last event: *mut PJRT_Event);
args!(PJRT_Event_Await_Args {} last event: *mut PJRT_Event);

args!(PJRT_Client_Create_Args {
    create_options: *const PJRT_NamedValue,
    num_options: usize,
    kv_get_callback: *mut c_void,
    kv_get_user_arg: *mut c_void,
    kv_put_callback: *mut c_void,
    kv_put_user_arg: *mut c_void,
    client: *mut PJRT_Client,
    kv_try_get_callback: *mut c_void,
} last kv_try_get_user_arg: *mut c_void);
args!(PJRT_Client_Destroy_Args {} last client: *mut PJRT_Client);
args!(PJRT_Client_PlatformName_Args { client: *mut PJRT_Client, platform_name: *const c_char } last platform_name_size: usize);
args!(PJRT_Client_ProcessIndex_Args { client: *mut PJRT_Client } last process_index: c_int);
args!(PJRT_Client_PlatformVersion_Args { client: *mut PJRT_Client, platform_version: *const c_char } last platform_version_size: usize);
args!(PJRT_Client_Devices_Args { client: *mut PJRT_Client, devices: *const *mut PJRT_Device } last num_devices: usize);
args!(PJRT_Client_AddressableDevices_Args {
    client: *mut PJRT_Client,
    addressable_devices: *const *mut PJRT_Device,
} last num_addressable_devices: usize);

args!(PJRT_Program { code: *mut c_char, code_size: usize, format: *const c_char } last format_size: usize);
args!(PJRT_Client_Compile_Args {
    client: *mut PJRT_Client,
    program: *const PJRT_Program,
    compile_options: *const c_char,
    compile_options_size: usize,
} last executable: *mut PJRT_LoadedExecutable);

/// `PJRT_Buffer_MemoryLayout_Tiled`.
#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct PJRT_Buffer_MemoryLayout_Tiled {
    pub(crate) struct_size: usize,
    pub(crate) extension_start: *mut PJRT_Extension_Base,
    pub(crate) minor_to_major: *const i64,
    pub(crate) minor_to_major_size: usize,
    pub(crate) tile_dims: *const i64,
    pub(crate) tile_dim_sizes: *const usize,
    pub(crate) num_tiles: usize,
}

/// `PJRT_Buffer_MemoryLayout_Strides`.
#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct PJRT_Buffer_MemoryLayout_Strides {
    pub(crate) struct_size: usize,
    pub(crate) extension_start: *mut PJRT_Extension_Base,
    pub(crate) byte_strides: *const i64,
    pub(crate) num_byte_strides: usize,
}

/// The anonymous union of `PJRT_Buffer_MemoryLayout`.
#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) union PJRT_Buffer_MemoryLayout_Value {
    pub(crate) tiled: PJRT_Buffer_MemoryLayout_Tiled,
    pub(crate) strides: PJRT_Buffer_MemoryLayout_Strides,
}

args!(PJRT_Buffer_MemoryLayout { value: PJRT_Buffer_MemoryLayout_Value } last type_: CEnum);

args!(PJRT_Client_BufferFromHostBuffer_Args {
    client: *mut PJRT_Client,
    data: *const c_void,
    type_: CEnum,
    dims: *const i64,
    num_dims: usize,
    byte_strides: *const i64,
    num_byte_strides: usize,
    host_buffer_semantics: CEnum,
    device: *mut PJRT_Device,
    memory: *mut PJRT_Memory,
    device_layout: *mut PJRT_Buffer_MemoryLayout,
    done_with_host_buffer: *mut PJRT_Event,
} last buffer: *mut PJRT_Buffer);

args!(PJRT_DeviceDescription_Id_Args { device_description: *mut PJRT_DeviceDescription } last id: c_int);
args!(PJRT_DeviceDescription_ProcessIndex_Args { device_description: *mut PJRT_DeviceDescription } last process_index: c_int);
args!(PJRT_DeviceDescription_Attributes_Args {
    device_description: *mut PJRT_DeviceDescription,
    num_attributes: usize,
} last attributes: *const PJRT_NamedValue);
args!(PJRT_DeviceDescription_Kind_Args {
    device_description: *mut PJRT_DeviceDescription,
    device_kind: *const c_char,
} last device_kind_size: usize);
args!(PJRT_DeviceDescription_DebugString_Args {
    device_description: *mut PJRT_DeviceDescription,
    debug_string: *const c_char,
} last debug_string_size: usize);
args!(PJRT_DeviceDescription_ToString_Args {
    device_description: *mut PJRT_DeviceDescription,
    to_string: *const c_char,
} last to_string_size: usize);
args!(PJRT_Device_GetDescription_Args { device: *mut PJRT_Device } last device_description: *mut PJRT_DeviceDescription);
args!(PJRT_Device_IsAddressable_Args { device: *mut PJRT_Device } last is_addressable: bool);
args!(PJRT_Device_LocalHardwareId_Args { device: *mut PJRT_Device } last local_hardware_id: c_int);

args!(PJRT_Executable_Destroy_Args {} last executable: *mut PJRT_Executable);
args!(PJRT_LoadedExecutable_Destroy_Args {} last executable: *mut PJRT_LoadedExecutable);
args!(PJRT_LoadedExecutable_GetExecutable_Args {
    loaded_executable: *mut PJRT_LoadedExecutable,
} last executable: *mut PJRT_Executable);
args!(PJRT_Executable_Name_Args { executable: *mut PJRT_Executable, executable_name: *const c_char } last executable_name_size: usize);
args!(PJRT_Executable_NumOutputs_Args { executable: *mut PJRT_Executable } last num_outputs: usize);
args!(PJRT_Executable_Fingerprint_Args {
    executable: *mut PJRT_Executable,
    executable_fingerprint: *const c_char,
} last executable_fingerprint_size: usize);
args!(PJRT_Executable_Serialize_Args {
    executable: *const PJRT_Executable,
    serialized_bytes: *const c_char,
    serialized_bytes_size: usize,
    serialized_executable: *mut PJRT_SerializedExecutable,
} last serialized_executable_deleter: Option<unsafe extern "C" fn(*mut PJRT_SerializedExecutable)>);
/// `PJRT_LoadOptions` (has no `extension_start`; we always pass null for it).
#[repr(C)]
pub(crate) struct PJRT_LoadOptions {
    _struct_size: usize,
}
args!(PJRT_Executable_DeserializeAndLoad_Args {
    client: *mut PJRT_Client,
    serialized_executable: *const c_char,
    serialized_executable_size: usize,
    loaded_executable: *mut PJRT_LoadedExecutable,
    overridden_serialized_compile_options: *const c_char,
    overridden_serialized_compile_options_size: usize,
} last load_options: *mut PJRT_LoadOptions);
args!(PJRT_LoadedExecutable_AddressableDevices_Args {
    executable: *mut PJRT_LoadedExecutable,
    addressable_devices: *const *mut PJRT_Device,
} last num_addressable_devices: usize);

args!(PJRT_ExecuteOptions {
    send_callbacks: *mut *mut c_void,
    recv_callbacks: *mut *mut c_void,
    num_send_ops: usize,
    num_recv_ops: usize,
    launch_id: c_int,
    non_donatable_input_indices: *const i64,
    num_non_donatable_input_indices: usize,
    context: *mut PJRT_ExecuteContext,
    call_location: *const c_char,
    num_tasks: usize,
    task_ids: *mut c_int,
    incarnation_ids: *mut i64,
    multi_slice_config: *mut PJRT_MultiSlice_Config,
    use_major_to_minor_data_layout_for_callbacks: bool,
    hlo_output_callbacks: *mut c_void,
} last num_hlo_output_callbacks: usize);
args!(PJRT_LoadedExecutable_Execute_Args {
    executable: *mut PJRT_LoadedExecutable,
    options: *mut PJRT_ExecuteOptions,
    argument_lists: *const *const *mut PJRT_Buffer,
    num_devices: usize,
    num_args: usize,
    output_lists: *const *mut *mut PJRT_Buffer,
    device_complete_events: *mut *mut PJRT_Event,
} last execute_device: *mut PJRT_Device);

args!(PJRT_Buffer_Destroy_Args {} last buffer: *mut PJRT_Buffer);
args!(PJRT_Buffer_ElementType_Args { buffer: *mut PJRT_Buffer } last type_: CEnum);
args!(PJRT_Buffer_Dimensions_Args { buffer: *mut PJRT_Buffer, dims: *const i64 } last num_dims: usize);
args!(PJRT_Buffer_ToHostBuffer_Args {
    src: *mut PJRT_Buffer,
    host_layout: *mut PJRT_Buffer_MemoryLayout,
    dst: *mut c_void,
    dst_size: usize,
} last event: *mut PJRT_Event);

args!(PJRT_TopologyDescription_Create_Args {
    topology_name: *const c_char,
    topology_name_size: usize,
    create_options: *const PJRT_NamedValue,
    num_options: usize,
} last topology: *mut PJRT_TopologyDescription);
args!(PJRT_TopologyDescription_Destroy_Args {} last topology: *mut PJRT_TopologyDescription);
args!(PJRT_TopologyDescription_PlatformName_Args {
    topology: *const PJRT_TopologyDescription,
    platform_name: *const c_char,
} last platform_name_size: usize);
args!(PJRT_TopologyDescription_GetDeviceDescriptions_Args {
    topology: *const PJRT_TopologyDescription,
    descriptions: *const *mut PJRT_DeviceDescription,
} last num_descriptions: usize);
args!(PJRT_Compile_Args {
    topology: *const PJRT_TopologyDescription,
    program: *const PJRT_Program,
    compile_options: *const c_char,
    compile_options_size: usize,
    client: *mut PJRT_Client,
} last executable: *mut PJRT_Executable);

// ------------------------------------------------------------------------------------------------------------
// The function table

/// `PJRT_Api_Version`.
#[repr(C)]
pub(crate) struct PJRT_Api_Version {
    struct_size: usize,
    extension_start: *mut PJRT_Extension_Base,
    major_version: c_int,
    minor_version: c_int,
}

type F<A> = Option<unsafe extern "C" fn(*mut A) -> *mut PJRT_Error>;
type FVoid<A> = Option<unsafe extern "C" fn(*mut A)>;
/// A slot this crate does not call (kept so that the offsets of the later slots are right).
type Slot = Option<unsafe extern "C" fn()>;

/// `PJRT_Api`, slot for slot in header order. Never read as a whole: a plugin's table may be shorter than ours,
/// so each slot is read through [`Api::slot`] after checking it lies inside the plugin's `struct_size`.
#[repr(C)]
pub(crate) struct PJRT_Api {
    struct_size: usize,
    extension_start: *mut PJRT_Extension_Base,
    pjrt_api_version: PJRT_Api_Version,

    PJRT_Error_Destroy: FVoid<PJRT_Error_Destroy_Args>,
    PJRT_Error_Message: FVoid<PJRT_Error_Message_Args>,
    PJRT_Error_GetCode: F<PJRT_Error_GetCode_Args>,

    PJRT_Plugin_Initialize: F<PJRT_Plugin_Initialize_Args>,
    PJRT_Plugin_Attributes: F<PJRT_Plugin_Attributes_Args>,

    PJRT_Event_Destroy: F<PJRT_Event_Destroy_Args>,
    PJRT_Event_IsReady: Slot,
    PJRT_Event_Error: Slot,
    PJRT_Event_Await: F<PJRT_Event_Await_Args>,
    PJRT_Event_OnReady: Slot,

    PJRT_Client_Create: F<PJRT_Client_Create_Args>,
    PJRT_Client_Destroy: F<PJRT_Client_Destroy_Args>,
    PJRT_Client_PlatformName: F<PJRT_Client_PlatformName_Args>,
    PJRT_Client_ProcessIndex: F<PJRT_Client_ProcessIndex_Args>,
    PJRT_Client_PlatformVersion: F<PJRT_Client_PlatformVersion_Args>,
    PJRT_Client_Devices: F<PJRT_Client_Devices_Args>,
    PJRT_Client_AddressableDevices: F<PJRT_Client_AddressableDevices_Args>,
    PJRT_Client_LookupDevice: Slot,
    PJRT_Client_LookupAddressableDevice: Slot,
    PJRT_Client_AddressableMemories: Slot,
    PJRT_Client_Compile: F<PJRT_Client_Compile_Args>,
    PJRT_Client_DefaultDeviceAssignment: Slot,
    PJRT_Client_BufferFromHostBuffer: F<PJRT_Client_BufferFromHostBuffer_Args>,

    PJRT_DeviceDescription_Id: F<PJRT_DeviceDescription_Id_Args>,
    PJRT_DeviceDescription_ProcessIndex: F<PJRT_DeviceDescription_ProcessIndex_Args>,
    PJRT_DeviceDescription_Attributes: F<PJRT_DeviceDescription_Attributes_Args>,
    PJRT_DeviceDescription_Kind: F<PJRT_DeviceDescription_Kind_Args>,
    PJRT_DeviceDescription_DebugString: F<PJRT_DeviceDescription_DebugString_Args>,
    PJRT_DeviceDescription_ToString: F<PJRT_DeviceDescription_ToString_Args>,

    PJRT_Device_GetDescription: F<PJRT_Device_GetDescription_Args>,
    PJRT_Device_IsAddressable: F<PJRT_Device_IsAddressable_Args>,
    PJRT_Device_LocalHardwareId: F<PJRT_Device_LocalHardwareId_Args>,
    PJRT_Device_AddressableMemories: Slot,
    PJRT_Device_DefaultMemory: Slot,
    PJRT_Device_MemoryStats: Slot,

    PJRT_Memory_Id: Slot,
    PJRT_Memory_Kind: Slot,
    PJRT_Memory_DebugString: Slot,
    PJRT_Memory_ToString: Slot,
    PJRT_Memory_AddressableByDevices: Slot,

    PJRT_Executable_Destroy: F<PJRT_Executable_Destroy_Args>,
    PJRT_Executable_Name: F<PJRT_Executable_Name_Args>,
    PJRT_Executable_NumReplicas: Slot,
    PJRT_Executable_NumPartitions: Slot,
    PJRT_Executable_NumOutputs: F<PJRT_Executable_NumOutputs_Args>,
    PJRT_Executable_SizeOfGeneratedCodeInBytes: Slot,
    PJRT_Executable_GetCostAnalysis: Slot,
    PJRT_Executable_OutputMemoryKinds: Slot,
    PJRT_Executable_OptimizedProgram: Slot,
    PJRT_Executable_Serialize: F<PJRT_Executable_Serialize_Args>,

    PJRT_LoadedExecutable_Destroy: F<PJRT_LoadedExecutable_Destroy_Args>,
    PJRT_LoadedExecutable_GetExecutable: F<PJRT_LoadedExecutable_GetExecutable_Args>,
    PJRT_LoadedExecutable_AddressableDevices: F<PJRT_LoadedExecutable_AddressableDevices_Args>,
    PJRT_LoadedExecutable_Delete: Slot,
    PJRT_LoadedExecutable_IsDeleted: Slot,
    PJRT_LoadedExecutable_Execute: F<PJRT_LoadedExecutable_Execute_Args>,
    PJRT_Executable_DeserializeAndLoad: F<PJRT_Executable_DeserializeAndLoad_Args>,
    PJRT_LoadedExecutable_Fingerprint: Slot,

    PJRT_Buffer_Destroy: F<PJRT_Buffer_Destroy_Args>,
    PJRT_Buffer_ElementType: F<PJRT_Buffer_ElementType_Args>,
    PJRT_Buffer_Dimensions: F<PJRT_Buffer_Dimensions_Args>,
    PJRT_Buffer_UnpaddedDimensions: Slot,
    PJRT_Buffer_DynamicDimensionIndices: Slot,
    PJRT_Buffer_GetMemoryLayout: Slot,
    PJRT_Buffer_OnDeviceSizeInBytes: Slot,
    PJRT_Buffer_Device: Slot,
    PJRT_Buffer_Memory: Slot,
    PJRT_Buffer_Delete: Slot,
    PJRT_Buffer_IsDeleted: Slot,
    PJRT_Buffer_CopyToDevice: Slot,
    PJRT_Buffer_ToHostBuffer: F<PJRT_Buffer_ToHostBuffer_Args>,
    PJRT_Buffer_IsOnCpu: Slot,
    PJRT_Buffer_ReadyEvent: Slot,
    PJRT_Buffer_UnsafePointer: Slot,
    PJRT_Buffer_IncreaseExternalReferenceCount: Slot,
    PJRT_Buffer_DecreaseExternalReferenceCount: Slot,
    PJRT_Buffer_OpaqueDeviceMemoryDataPointer: Slot,

    PJRT_CopyToDeviceStream_Destroy: Slot,
    PJRT_CopyToDeviceStream_AddChunk: Slot,
    PJRT_CopyToDeviceStream_TotalBytes: Slot,
    PJRT_CopyToDeviceStream_GranuleSize: Slot,
    PJRT_CopyToDeviceStream_CurrentBytes: Slot,

    PJRT_TopologyDescription_Create: F<PJRT_TopologyDescription_Create_Args>,
    PJRT_TopologyDescription_Destroy: F<PJRT_TopologyDescription_Destroy_Args>,
    PJRT_TopologyDescription_PlatformName: F<PJRT_TopologyDescription_PlatformName_Args>,
    PJRT_TopologyDescription_PlatformVersion: Slot,
    PJRT_TopologyDescription_GetDeviceDescriptions: F<PJRT_TopologyDescription_GetDeviceDescriptions_Args>,
    PJRT_TopologyDescription_Serialize: Slot,
    PJRT_TopologyDescription_Attributes: Slot,

    PJRT_Compile: F<PJRT_Compile_Args>,

    PJRT_Executable_OutputElementTypes: Slot,
    PJRT_Executable_OutputDimensions: Slot,
    PJRT_Buffer_CopyToMemory: Slot,
    PJRT_Client_CreateViewOfDeviceBuffer: Slot,
    PJRT_Executable_Fingerprint: F<PJRT_Executable_Fingerprint_Args>,
    // Later slots (PJRT_Client_TopologyDescription ... PJRT_TopologyDescription_GetMemorySpaceKindIds) are not
    // used by this crate; the table may be longer than this prefix, which is fine because we never read past
    // the slots declared here.
}

/// The error codes of `PJRT_Error_Code` (abseil status codes).
pub(crate) fn error_code_name(code: i32) -> &'static str {
    match code {
        0 => "OK",
        1 => "CANCELLED",
        2 => "UNKNOWN",
        3 => "INVALID_ARGUMENT",
        4 => "DEADLINE_EXCEEDED",
        5 => "NOT_FOUND",
        6 => "ALREADY_EXISTS",
        7 => "PERMISSION_DENIED",
        8 => "RESOURCE_EXHAUSTED",
        9 => "FAILED_PRECONDITION",
        10 => "ABORTED",
        11 => "OUT_OF_RANGE",
        12 => "UNIMPLEMENTED",
        13 => "INTERNAL",
        14 => "UNAVAILABLE",
        15 => "DATA_LOSS",
        16 => "UNAUTHENTICATED",
        _ => "UNKNOWN_CODE",
    }
}

// ------------------------------------------------------------------------------------------------------------
// Loading

/// A loaded plugin: its function table and version. Lives for the rest of the process (see the module docs).
pub(crate) struct Api {
    raw: *const PJRT_Api,
    /// The plugin's `PJRT_Api.struct_size`.
    table_size: usize,
    path: PathBuf,
    major: i32,
    minor: i32,
    /// The library (kept loaded; `None` only for the in-memory tables of the unit tests).
    _lib: Option<libloading::Library>,
}

// SAFETY: `raw` points to the plugin's immutable, process-lifetime table of function pointers; PJRT functions
// may be called from any thread (the C API's objects are thread-safe, as PJRT's C++ clients are).
unsafe impl Send for Api {}
// SAFETY: as above; `Api` has no interior mutability.
unsafe impl Sync for Api {}

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

/// Refuses a plugin whose major API version differs from the header's.
fn check_version(path: &Path, major: i32, minor: i32) -> Result<()> {
    if major != HEADER_MAJOR {
        return Err(Error::Version(format!(
            "{} implements PJRT C API {major}.{minor}; this build speaks {HEADER_MAJOR}.{HEADER_MINOR} and cannot use a \
             different major version",
            path.display()
        )));
    }
    Ok(())
}

fn registry() -> &'static Mutex<HashMap<PathBuf, Arc<Api>>> {
    static PLUGINS: OnceLock<Mutex<HashMap<PathBuf, Arc<Api>>>> = OnceLock::new();
    PLUGINS.get_or_init(|| Mutex::new(HashMap::new()))
}

impl Api {
    /// Loads the plugin at `path` (once per process; later calls return the same table), checks its version and
    /// calls `PJRT_Plugin_Initialize`.
    pub(crate) fn load(path: &Path) -> Result<Arc<Api>> {
        let canonical = path.canonicalize().map_err(|e| Error::PluginLoad {
            path: path.display().to_string(),
            msg: format!("cannot open the file: {e}"),
        })?;
        let mut plugins = registry().lock().unwrap_or_else(|p| p.into_inner());
        if let Some(api) = plugins.get(&canonical) {
            return Ok(api.clone());
        }
        let load_err = |msg: String| Error::PluginLoad { path: canonical.display().to_string(), msg };
        // SAFETY: loading a shared library runs its initialisers. A PJRT plugin is a self-contained library built
        // for this purpose (JAX, TensorFlow and PyTorch/XLA load them the same way); the path was chosen by the
        // user (flag or environment) or found in a package that ships a PJRT plugin.
        let lib = unsafe { libloading::Library::new(&canonical) }.map_err(|e| load_err(e.to_string()))?;
        type GetPjrtApi = unsafe extern "C" fn() -> *const PJRT_Api;
        // SAFETY: `GetPjrtApi` is the one entry point every PJRT plugin exports, with the C signature
        // `const PJRT_Api* GetPjrtApi(void)`; the symbol is only used while `lib` is alive (it never unloads).
        let get: libloading::Symbol<GetPjrtApi> = unsafe { lib.get(b"GetPjrtApi\0") }
            .map_err(|e| load_err(format!("not a PJRT plugin (no GetPjrtApi symbol): {e}")))?;
        // SAFETY: calling the entry point with no arguments, as documented; it returns a pointer to a static table.
        let raw = unsafe { get() };
        if raw.is_null() {
            return Err(load_err("GetPjrtApi returned null".into()));
        }
        // SAFETY: `raw` is non-null and points to the plugin's table, which starts with `struct_size`, a field
        // present in every version of the header.
        let table_size = unsafe { ptr::addr_of!((*raw).struct_size).read() };
        let version_end = offset_of!(PJRT_Api, pjrt_api_version) + size_of::<PJRT_Api_Version>();
        if table_size < version_end {
            return Err(load_err(format!("PJRT_Api.struct_size {table_size} is too small to hold pjrt_api_version")));
        }
        // SAFETY: the version struct lies inside the declared table size (checked just above).
        let (major, minor) = unsafe {
            let v = ptr::addr_of!((*raw).pjrt_api_version);
            (ptr::addr_of!((*v).major_version).read(), ptr::addr_of!((*v).minor_version).read())
        };
        check_version(&canonical, major, minor)?;
        let api = Api { raw, table_size, path: canonical.clone(), major, minor, _lib: Some(lib) };
        let mut init = PJRT_Plugin_Initialize_Args::new();
        call!(&api, PJRT_Plugin_Initialize, &mut init)?;
        let api = Arc::new(api);
        plugins.insert(canonical, api.clone());
        Ok(api)
    }

    /// (major, minor) of the plugin's API.
    pub(crate) fn version(&self) -> (i32, i32) {
        (self.major, self.minor)
    }

    /// The plugin file.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    fn missing(&self, function: &'static str) -> Error {
        Error::MissingFunction { function, plugin: self.path.display().to_string(), major: self.major, minor: self.minor }
    }

    /// Converts a returned `PJRT_Error*` (null: success) into a `Result`, destroying the error.
    fn check(&self, err: *mut PJRT_Error, function: &'static str) -> Result<()> {
        if err.is_null() {
            return Ok(());
        }
        let (code, message) = self.take_error(err);
        Err(Error::Pjrt { function, code, message })
    }

    /// Reads message and code of `err` and destroys it.
    fn take_error(&self, err: *mut PJRT_Error) -> (i32, String) {
        let mut message = String::from("(no message)");
        let mut code = 2;
        if let Ok(f) = slot!(self, PJRT_Error_Message) {
            let mut a = PJRT_Error_Message_Args::new();
            a.error = err;
            // SAFETY: `err` is a live error returned by this plugin; the message it returns lives as long as `err`,
            // and we copy it out before destroying `err` below.
            unsafe { f(&mut a) };
            // SAFETY: as above: (pointer, size) describe the error's message bytes while `err` is alive.
            message = unsafe { copy_str(a.message, a.message_size) };
        }
        if let Ok(f) = slot!(self, PJRT_Error_GetCode) {
            let mut a = PJRT_Error_GetCode_Args::new();
            a.error = err;
            // SAFETY: `err` is live; GetCode writes `code`. It may itself return an error, which we destroy.
            let e2 = unsafe { f(&mut a) };
            if e2.is_null() {
                code = a.code;
            } else {
                self.destroy_error(e2);
            }
        }
        self.destroy_error(err);
        (code, message)
    }

    fn destroy_error(&self, err: *mut PJRT_Error) {
        if let Ok(f) = slot!(self, PJRT_Error_Destroy) {
            let mut a = PJRT_Error_Destroy_Args::new();
            a.error = err;
            // SAFETY: `err` is a live error owned by us, destroyed exactly once here.
            unsafe { f(&mut a) };
        }
    }

    /// `PJRT_Plugin_Attributes`: the plugin's key-value attributes (empty if the plugin lacks the function).
    pub(crate) fn attributes(&self) -> Result<Vec<(String, NamedValue)>> {
        if slot!(self, PJRT_Plugin_Attributes).is_err() {
            return Ok(Vec::new());
        }
        let mut a = PJRT_Plugin_Attributes_Args::new();
        call!(self, PJRT_Plugin_Attributes, &mut a)?;
        // SAFETY: the attributes array has process lifetime (header) and `num_attributes` entries.
        Ok(unsafe { read_named_values(a.attributes, a.num_attributes) })
    }

    /// `PJRT_TopologyDescription_Create` + `PJRT_Compile`: compiles ahead of time for a named topology
    /// (libtpu: for example "v5e:2x2") without the devices; returns the serialized executable.
    pub(crate) fn compile_for_topology(
        self: &Arc<Self>,
        topology: &str,
        options: &[(String, NamedValue)],
        code: &[u8],
        format: &str,
        compile_options: &[u8],
    ) -> Result<(String, usize, Vec<u8>)> {
        let opts = NamedValues::new(options);
        let mut t = PJRT_TopologyDescription_Create_Args::new();
        t.topology_name = topology.as_ptr().cast();
        t.topology_name_size = topology.len();
        t.create_options = opts.ptr();
        t.num_options = options.len();
        call!(self, PJRT_TopologyDescription_Create, &mut t)?;
        if t.topology.is_null() {
            return Err(Error::Invalid("PJRT_TopologyDescription_Create succeeded but returned no topology".into()));
        }
        let topo = TopologyHandle { api: self.clone(), raw: t.topology };
        let platform = {
            let mut a = PJRT_TopologyDescription_PlatformName_Args::new();
            a.topology = topo.raw;
            call!(self, PJRT_TopologyDescription_PlatformName, &mut a)?;
            // SAFETY: owned by the topology, alive while `topo` is.
            unsafe { copy_str(a.platform_name, a.platform_name_size) }
        };
        let num_devices = {
            let mut a = PJRT_TopologyDescription_GetDeviceDescriptions_Args::new();
            a.topology = topo.raw;
            call!(self, PJRT_TopologyDescription_GetDeviceDescriptions, &mut a)?;
            a.num_descriptions
        };
        let mut program = PJRT_Program::new();
        program.code = code.as_ptr() as *mut c_char;
        program.code_size = code.len();
        program.format = format.as_ptr().cast();
        program.format_size = format.len();
        let mut a = PJRT_Compile_Args::new();
        a.topology = topo.raw;
        a.program = &program;
        a.compile_options = compile_options.as_ptr().cast();
        a.compile_options_size = compile_options.len();
        call!(self, PJRT_Compile, &mut a)?;
        if a.executable.is_null() {
            return Err(Error::Invalid("PJRT_Compile succeeded but returned no executable".into()));
        }
        let exe = ExecutableHandle { api: self.clone(), raw: a.executable };
        Ok((platform, num_devices, exe.serialize()?))
    }

    /// Awaits `event`, then destroys it; returns the event's error, if any.
    fn await_event(&self, event: *mut PJRT_Event, function: &'static str) -> Result<()> {
        if event.is_null() {
            return Ok(());
        }
        let mut a = PJRT_Event_Await_Args::new();
        a.event = event;
        let r = call!(self, PJRT_Event_Await, &mut a).map_err(|e| e.in_function(function));
        self.destroy_event(event);
        r
    }

    fn destroy_event(&self, event: *mut PJRT_Event) {
        let mut a = PJRT_Event_Destroy_Args::new();
        a.event = event;
        let _ = call!(self, PJRT_Event_Destroy, &mut a);
    }
}

/// Copies a (pointer, length) string owned by the plugin.
///
/// # Safety
/// `p` must be null or point to `n` readable bytes.
unsafe fn copy_str(p: *const c_char, n: usize) -> String {
    if p.is_null() || n == 0 {
        return String::new();
    }
    // SAFETY: guaranteed by the caller.
    String::from_utf8_lossy(unsafe { std::slice::from_raw_parts(p.cast::<u8>(), n) }).into_owned()
}

/// A copied `PJRT_NamedValue`.
#[derive(Clone, Debug, PartialEq)]
pub enum NamedValue {
    /// A string.
    String(String),
    /// An integer.
    Int64(i64),
    /// A list of integers.
    Int64List(Vec<i64>),
    /// A float.
    Float(f32),
    /// A boolean.
    Bool(bool),
}

/// Copies `n` named values.
///
/// # Safety
/// `p` must be null or point to `n` valid `PJRT_NamedValue`s whose strings and arrays are readable.
unsafe fn read_named_values(p: *const PJRT_NamedValue, n: usize) -> Vec<(String, NamedValue)> {
    if p.is_null() {
        return Vec::new();
    }
    // SAFETY: guaranteed by the caller.
    let items = unsafe { std::slice::from_raw_parts(p, n) };
    items
        .iter()
        .map(|nv| {
            // SAFETY: per the caller's guarantee, the name and the union member selected by `type_` are valid.
            unsafe {
                let name = copy_str(nv.name, nv.name_size);
                let value = match nv.type_ {
                    NAMED_STRING => NamedValue::String(copy_str(nv.value.string_value, nv.value_size)),
                    NAMED_INT64 => NamedValue::Int64(nv.value.int64_value),
                    NAMED_INT64_LIST => {
                        let a = nv.value.int64_array_value;
                        NamedValue::Int64List(if a.is_null() {
                            Vec::new()
                        } else {
                            std::slice::from_raw_parts(a, nv.value_size).to_vec()
                        })
                    }
                    NAMED_FLOAT => NamedValue::Float(nv.value.float_value),
                    NAMED_BOOL => NamedValue::Bool(ptr::addr_of!(nv.value).cast::<u8>().read() != 0),
                    other => NamedValue::String(format!("<unknown PJRT_NamedValue type {other}>")),
                };
                (name, value)
            }
        })
        .collect()
}

/// Named values laid out for the C API; keeps the strings and arrays they point to alive.
pub(crate) struct NamedValues {
    raw: Vec<PJRT_NamedValue>,
    _names: Vec<Vec<u8>>,
    _strings: Vec<Vec<u8>>,
    _lists: Vec<Vec<i64>>,
}

impl NamedValues {
    pub(crate) fn new(items: &[(String, NamedValue)]) -> NamedValues {
        let mut names = Vec::new();
        let mut strings = Vec::new();
        let mut lists = Vec::new();
        let mut raw = Vec::new();
        for (name, value) in items {
            let mut nv = PJRT_NamedValue::new();
            let n = name.as_bytes().to_vec();
            nv.name = n.as_ptr().cast();
            nv.name_size = n.len();
            names.push(n);
            nv.value_size = 1;
            match value {
                NamedValue::String(s) => {
                    let b = s.as_bytes().to_vec();
                    nv.type_ = NAMED_STRING;
                    nv.value.string_value = b.as_ptr().cast();
                    nv.value_size = b.len();
                    strings.push(b);
                }
                NamedValue::Int64(i) => {
                    nv.type_ = NAMED_INT64;
                    nv.value.int64_value = *i;
                }
                NamedValue::Int64List(l) => {
                    let l = l.clone();
                    nv.type_ = NAMED_INT64_LIST;
                    nv.value.int64_array_value = l.as_ptr();
                    nv.value_size = l.len();
                    lists.push(l);
                }
                NamedValue::Float(f) => {
                    nv.type_ = NAMED_FLOAT;
                    nv.value.float_value = *f;
                }
                NamedValue::Bool(b) => {
                    nv.type_ = NAMED_BOOL;
                    nv.value.bool_value = *b;
                }
            }
            raw.push(nv);
        }
        // The Vec<u8>/Vec<i64> heap blocks do not move when the outer vectors grow, so the pointers stay valid.
        NamedValues { raw, _names: names, _strings: strings, _lists: lists }
    }
    fn ptr(&self) -> *const PJRT_NamedValue {
        if self.raw.is_empty() {
            ptr::null()
        } else {
            self.raw.as_ptr()
        }
    }
}

// ------------------------------------------------------------------------------------------------------------
// Client and devices

/// An owned `PJRT_Client`.
pub(crate) struct ClientHandle {
    api: Arc<Api>,
    raw: *mut PJRT_Client,
}

// SAFETY: PJRT clients are thread-safe (PjRtClient's methods may be called concurrently); the pointer is owned.
unsafe impl Send for ClientHandle {}
// SAFETY: as above.
unsafe impl Sync for ClientHandle {}

impl Drop for ClientHandle {
    fn drop(&mut self) {
        let mut a = PJRT_Client_Destroy_Args::new();
        a.client = self.raw;
        let _ = call!(&self.api, PJRT_Client_Destroy, &mut a);
    }
}

impl ClientHandle {
    /// `PJRT_Client_Create` with the given options (no key-value store).
    pub(crate) fn create(api: &Arc<Api>, options: &[(String, NamedValue)]) -> Result<Arc<ClientHandle>> {
        let opts = NamedValues::new(options);
        let mut a = PJRT_Client_Create_Args::new();
        a.create_options = opts.ptr();
        a.num_options = options.len();
        call!(api, PJRT_Client_Create, &mut a)?;
        if a.client.is_null() {
            return Err(Error::Invalid("PJRT_Client_Create succeeded but returned no client".into()));
        }
        Ok(Arc::new(ClientHandle { api: api.clone(), raw: a.client }))
    }

    pub(crate) fn platform_name(&self) -> Result<String> {
        let mut a = PJRT_Client_PlatformName_Args::new();
        a.client = self.raw;
        call!(&self.api, PJRT_Client_PlatformName, &mut a)?;
        // SAFETY: the name is owned by the client, alive while `self` is.
        Ok(unsafe { copy_str(a.platform_name, a.platform_name_size) })
    }

    pub(crate) fn platform_version(&self) -> Result<String> {
        let mut a = PJRT_Client_PlatformVersion_Args::new();
        a.client = self.raw;
        call!(&self.api, PJRT_Client_PlatformVersion, &mut a)?;
        // SAFETY: the version string is owned by the client, alive while `self` is.
        Ok(unsafe { copy_str(a.platform_version, a.platform_version_size) })
    }

    pub(crate) fn process_index(&self) -> Result<i32> {
        let mut a = PJRT_Client_ProcessIndex_Args::new();
        a.client = self.raw;
        call!(&self.api, PJRT_Client_ProcessIndex, &mut a)?;
        Ok(a.process_index)
    }

    /// All devices (`addressable == false`) or the addressable ones.
    pub(crate) fn devices(self: &Arc<Self>, addressable: bool) -> Result<Vec<DeviceHandle>> {
        let (p, n) = if addressable {
            let mut a = PJRT_Client_AddressableDevices_Args::new();
            a.client = self.raw;
            call!(&self.api, PJRT_Client_AddressableDevices, &mut a)?;
            (a.addressable_devices, a.num_addressable_devices)
        } else {
            let mut a = PJRT_Client_Devices_Args::new();
            a.client = self.raw;
            call!(&self.api, PJRT_Client_Devices, &mut a)?;
            (a.devices, a.num_devices)
        };
        // SAFETY: the array of `n` device pointers is owned by the client and alive while it is.
        let raw = unsafe { ptr_slice(p, n) };
        Ok(raw.iter().map(|&d| DeviceHandle { client: self.clone(), raw: d }).collect())
    }

    /// `PJRT_Client_Compile`: compiles `code` in `format` ("mlir", "hlo") with serialized `CompileOptionsProto`.
    pub(crate) fn compile(self: &Arc<Self>, code: &[u8], format: &str, options: &[u8]) -> Result<LoadedExecutableHandle> {
        let mut program = PJRT_Program::new();
        // The plugin only reads `code` during the call (the header's `char*` is for an unrelated out-use).
        program.code = code.as_ptr() as *mut c_char;
        program.code_size = code.len();
        program.format = format.as_ptr().cast();
        program.format_size = format.len();
        let mut a = PJRT_Client_Compile_Args::new();
        a.client = self.raw;
        a.program = &program;
        a.compile_options = options.as_ptr().cast();
        a.compile_options_size = options.len();
        call!(&self.api, PJRT_Client_Compile, &mut a)?;
        LoadedExecutableHandle::wrap(self, a.executable)
    }

    /// `PJRT_Executable_DeserializeAndLoad`: loads an executable serialized by [`ExecutableHandle::serialize`].
    pub(crate) fn deserialize_and_load(self: &Arc<Self>, bytes: &[u8]) -> Result<LoadedExecutableHandle> {
        let mut a = PJRT_Executable_DeserializeAndLoad_Args::new();
        a.client = self.raw;
        a.serialized_executable = bytes.as_ptr().cast();
        a.serialized_executable_size = bytes.len();
        call!(&self.api, PJRT_Executable_DeserializeAndLoad, &mut a)?;
        LoadedExecutableHandle::wrap(self, a.loaded_executable)
    }

    /// `PJRT_Client_BufferFromHostBuffer`: copies dense row-major `data` to `device`; returns once the plugin is
    /// done with `data`.
    pub(crate) fn buffer_from_host(
        self: &Arc<Self>,
        data: &[u8],
        element_type: i32,
        dims: &[i64],
        device: &DeviceHandle,
    ) -> Result<BufferHandle> {
        if !Arc::ptr_eq(&device.client, self) {
            return Err(Error::Invalid("the device belongs to another client".into()));
        }
        let mut a = PJRT_Client_BufferFromHostBuffer_Args::new();
        a.client = self.raw;
        a.data = data.as_ptr().cast();
        a.type_ = element_type;
        a.dims = dims.as_ptr();
        a.num_dims = dims.len();
        a.host_buffer_semantics = HOST_BUFFER_IMMUTABLE_UNTIL_TRANSFER_COMPLETES;
        a.device = device.raw;
        call!(&self.api, PJRT_Client_BufferFromHostBuffer, &mut a)?;
        // Own the buffer first so that it is destroyed even if waiting for the transfer fails.
        let buffer = BufferHandle::wrap(self, a.buffer)?;
        // `data` is borrowed until this function returns; waiting here ends the plugin's use of it.
        self.api.await_event(a.done_with_host_buffer, "PJRT_Client_BufferFromHostBuffer")?;
        Ok(buffer)
    }
}

struct TopologyHandle {
    api: Arc<Api>,
    raw: *mut PJRT_TopologyDescription,
}

impl Drop for TopologyHandle {
    fn drop(&mut self) {
        let mut a = PJRT_TopologyDescription_Destroy_Args::new();
        a.topology = self.raw;
        let _ = call!(&self.api, PJRT_TopologyDescription_Destroy, &mut a);
    }
}

/// Copies a plugin-owned array of pointers.
///
/// # Safety
/// `p` must be null or point to `n` readable pointers.
unsafe fn ptr_slice<T>(p: *const *mut T, n: usize) -> Vec<*mut T> {
    if p.is_null() || n == 0 {
        return Vec::new();
    }
    // SAFETY: guaranteed by the caller.
    unsafe { std::slice::from_raw_parts(p, n) }.to_vec()
}

/// A device of a client (owned by the client, which this handle keeps alive).
#[derive(Clone)]
pub(crate) struct DeviceHandle {
    client: Arc<ClientHandle>,
    raw: *mut PJRT_Device,
}

// SAFETY: devices are immutable descriptions owned by a thread-safe client, which the handle keeps alive.
unsafe impl Send for DeviceHandle {}
// SAFETY: as above.
unsafe impl Sync for DeviceHandle {}

impl PartialEq for DeviceHandle {
    fn eq(&self, other: &Self) -> bool {
        self.raw == other.raw
    }
}

impl DeviceHandle {
    fn description(&self) -> Result<*mut PJRT_DeviceDescription> {
        let mut a = PJRT_Device_GetDescription_Args::new();
        a.device = self.raw;
        call!(&self.client.api, PJRT_Device_GetDescription, &mut a)?;
        Ok(a.device_description)
    }

    /// Description of the device: (id, process index, kind, debug string, to-string, attributes).
    pub(crate) fn describe(&self) -> Result<DeviceDescription> {
        let d = self.description()?;
        describe(&self.client.api, d)
    }

    pub(crate) fn is_addressable(&self) -> Result<bool> {
        let mut a = PJRT_Device_IsAddressable_Args::new();
        a.device = self.raw;
        call!(&self.client.api, PJRT_Device_IsAddressable, &mut a)?;
        Ok(a.is_addressable)
    }

    pub(crate) fn local_hardware_id(&self) -> Result<i32> {
        let mut a = PJRT_Device_LocalHardwareId_Args::new();
        a.device = self.raw;
        call!(&self.client.api, PJRT_Device_LocalHardwareId, &mut a)?;
        Ok(a.local_hardware_id)
    }
}

/// What `PJRT_DeviceDescription_*` report about a device.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct DeviceDescription {
    pub(crate) id: i32,
    pub(crate) process_index: i32,
    pub(crate) kind: String,
    pub(crate) debug_string: String,
    pub(crate) to_string: String,
    pub(crate) attributes: Vec<(String, NamedValue)>,
}

fn describe(api: &Api, d: *mut PJRT_DeviceDescription) -> Result<DeviceDescription> {
    let mut id = PJRT_DeviceDescription_Id_Args::new();
    id.device_description = d;
    call!(api, PJRT_DeviceDescription_Id, &mut id)?;
    let mut pi = PJRT_DeviceDescription_ProcessIndex_Args::new();
    pi.device_description = d;
    call!(api, PJRT_DeviceDescription_ProcessIndex, &mut pi)?;
    let mut kind = PJRT_DeviceDescription_Kind_Args::new();
    kind.device_description = d;
    call!(api, PJRT_DeviceDescription_Kind, &mut kind)?;
    let mut dbg = PJRT_DeviceDescription_DebugString_Args::new();
    dbg.device_description = d;
    call!(api, PJRT_DeviceDescription_DebugString, &mut dbg)?;
    let mut ts = PJRT_DeviceDescription_ToString_Args::new();
    ts.device_description = d;
    call!(api, PJRT_DeviceDescription_ToString, &mut ts)?;
    let mut at = PJRT_DeviceDescription_Attributes_Args::new();
    at.device_description = d;
    call!(api, PJRT_DeviceDescription_Attributes, &mut at)?;
    // SAFETY: all strings and the attribute array are owned by the description, which lives as long as the
    // device's client (alive: the caller holds a handle); we copy them out here.
    unsafe {
        Ok(DeviceDescription {
            id: id.id,
            process_index: pi.process_index,
            kind: copy_str(kind.device_kind, kind.device_kind_size),
            debug_string: copy_str(dbg.debug_string, dbg.debug_string_size),
            to_string: copy_str(ts.to_string, ts.to_string_size),
            attributes: read_named_values(at.attributes, at.num_attributes),
        })
    }
}

// ------------------------------------------------------------------------------------------------------------
// Executables

/// An owned `PJRT_Executable` (the compiled, not-loaded view).
pub(crate) struct ExecutableHandle {
    api: Arc<Api>,
    raw: *mut PJRT_Executable,
}

impl Drop for ExecutableHandle {
    fn drop(&mut self) {
        let mut a = PJRT_Executable_Destroy_Args::new();
        a.executable = self.raw;
        let _ = call!(&self.api, PJRT_Executable_Destroy, &mut a);
    }
}

impl ExecutableHandle {
    pub(crate) fn name(&self) -> Result<String> {
        let mut a = PJRT_Executable_Name_Args::new();
        a.executable = self.raw;
        call!(&self.api, PJRT_Executable_Name, &mut a)?;
        // SAFETY: owned by the executable, alive while `self` is.
        Ok(unsafe { copy_str(a.executable_name, a.executable_name_size) })
    }

    pub(crate) fn num_outputs(&self) -> Result<usize> {
        let mut a = PJRT_Executable_NumOutputs_Args::new();
        a.executable = self.raw;
        call!(&self.api, PJRT_Executable_NumOutputs, &mut a)?;
        Ok(a.num_outputs)
    }

    pub(crate) fn fingerprint(&self) -> Result<String> {
        let mut a = PJRT_Executable_Fingerprint_Args::new();
        a.executable = self.raw;
        call!(&self.api, PJRT_Executable_Fingerprint, &mut a)?;
        // SAFETY: owned by the executable, alive while `self` is.
        Ok(unsafe { copy_str(a.executable_fingerprint, a.executable_fingerprint_size) })
    }

    /// `PJRT_Executable_Serialize`: the platform-specific serialization (copied; the plugin's copy is freed).
    pub(crate) fn serialize(&self) -> Result<Vec<u8>> {
        let mut a = PJRT_Executable_Serialize_Args::new();
        a.executable = self.raw;
        call!(&self.api, PJRT_Executable_Serialize, &mut a)?;
        let bytes = if a.serialized_bytes.is_null() {
            Vec::new()
        } else {
            // SAFETY: (serialized_bytes, size) are valid while `serialized_executable` is alive, until the deleter.
            unsafe { std::slice::from_raw_parts(a.serialized_bytes.cast::<u8>(), a.serialized_bytes_size) }.to_vec()
        };
        if let Some(deleter) = a.serialized_executable_deleter {
            // SAFETY: the header requires calling the deleter exactly once on `serialized_executable`.
            unsafe { deleter(a.serialized_executable) };
        }
        Ok(bytes)
    }
}

/// An owned `PJRT_LoadedExecutable`, with its number of outputs per device.
pub(crate) struct LoadedExecutableHandle {
    client: Arc<ClientHandle>,
    raw: *mut PJRT_LoadedExecutable,
    num_outputs: usize,
}

// SAFETY: PjRtLoadedExecutable is thread-safe (concurrent Execute calls are allowed); the pointer is owned and the
// client it needs is kept alive by the handle.
unsafe impl Send for LoadedExecutableHandle {}
// SAFETY: as above.
unsafe impl Sync for LoadedExecutableHandle {}

impl Drop for LoadedExecutableHandle {
    fn drop(&mut self) {
        let mut a = PJRT_LoadedExecutable_Destroy_Args::new();
        a.executable = self.raw;
        let _ = call!(&self.client.api, PJRT_LoadedExecutable_Destroy, &mut a);
    }
}

impl LoadedExecutableHandle {
    fn wrap(client: &Arc<ClientHandle>, raw: *mut PJRT_LoadedExecutable) -> Result<LoadedExecutableHandle> {
        if raw.is_null() {
            return Err(Error::Invalid("the plugin reported success but returned no executable".into()));
        }
        let mut h = LoadedExecutableHandle { client: client.clone(), raw, num_outputs: 0 };
        h.num_outputs = h.executable()?.num_outputs()?;
        Ok(h)
    }

    /// The compiled executable behind this loaded one (a new object, destroyed with the returned handle).
    pub(crate) fn executable(&self) -> Result<ExecutableHandle> {
        let mut a = PJRT_LoadedExecutable_GetExecutable_Args::new();
        a.loaded_executable = self.raw;
        call!(&self.client.api, PJRT_LoadedExecutable_GetExecutable, &mut a)?;
        if a.executable.is_null() {
            return Err(Error::Invalid("PJRT_LoadedExecutable_GetExecutable returned no executable".into()));
        }
        Ok(ExecutableHandle { api: self.client.api.clone(), raw: a.executable })
    }

    pub(crate) fn num_outputs(&self) -> usize {
        self.num_outputs
    }

    pub(crate) fn addressable_devices(&self) -> Result<Vec<DeviceHandle>> {
        let mut a = PJRT_LoadedExecutable_AddressableDevices_Args::new();
        a.executable = self.raw;
        call!(&self.client.api, PJRT_LoadedExecutable_AddressableDevices, &mut a)?;
        // SAFETY: the array is owned by the executable and alive while `self` is; we copy the pointers, which are
        // devices owned by the client.
        let raw = unsafe { ptr_slice(a.addressable_devices, a.num_addressable_devices) };
        Ok(raw.into_iter().map(|d| DeviceHandle { client: self.client.clone(), raw: d }).collect())
    }

    /// `PJRT_LoadedExecutable_Execute` on `args.len()` devices (`args[d]` are the arguments for the d-th device of
    /// the executable's device assignment), or on `device` alone. Waits for completion; returns the outputs.
    pub(crate) fn execute(&self, args: &[Vec<&BufferHandle>], device: Option<&DeviceHandle>) -> Result<Vec<Vec<BufferHandle>>> {
        let num_devices = args.len();
        let num_args = args.first().map_or(0, |a| a.len());
        if num_devices == 0 || args.iter().any(|a| a.len() != num_args) {
            return Err(Error::Invalid("execute needs the same number of arguments for each of at least one device".into()));
        }
        if device.is_some() && num_devices != 1 {
            return Err(Error::Invalid("execute on one device takes one argument list".into()));
        }
        for b in args.iter().flatten() {
            if !Arc::ptr_eq(&b.client, &self.client) {
                return Err(Error::Invalid("an argument buffer belongs to another client".into()));
            }
        }
        let arg_ptrs: Vec<Vec<*mut PJRT_Buffer>> = args.iter().map(|l| l.iter().map(|b| b.raw).collect()).collect();
        let arg_lists: Vec<*const *mut PJRT_Buffer> = arg_ptrs.iter().map(|l| l.as_ptr()).collect();
        let mut outs: Vec<Vec<*mut PJRT_Buffer>> = vec![vec![ptr::null_mut(); self.num_outputs]; num_devices];
        let out_lists: Vec<*mut *mut PJRT_Buffer> = outs.iter_mut().map(|l| l.as_mut_ptr()).collect();
        let mut events: Vec<*mut PJRT_Event> = vec![ptr::null_mut(); num_devices];
        let mut options = PJRT_ExecuteOptions::new();
        let mut a = PJRT_LoadedExecutable_Execute_Args::new();
        a.executable = self.raw;
        a.options = &mut options;
        a.argument_lists = arg_lists.as_ptr();
        a.num_devices = num_devices;
        a.num_args = num_args;
        a.output_lists = out_lists.as_ptr();
        a.device_complete_events = events.as_mut_ptr();
        a.execute_device = device.map_or(ptr::null_mut(), |d| d.raw);
        call!(&self.client.api, PJRT_LoadedExecutable_Execute, &mut a)?;
        // The plugin wrote the output pointers through `out_lists` into `outs` (and the events into `events`).
        drop(out_lists);
        // Take ownership of every output and event before anything can fail.
        let mut result = Vec::with_capacity(num_devices);
        let mut missing = false;
        for list in outs {
            let mut v = Vec::with_capacity(list.len());
            for b in list {
                if b.is_null() {
                    missing = true;
                } else {
                    v.push(BufferHandle { client: self.client.clone(), raw: b });
                }
            }
            result.push(v);
        }
        let mut first_err = Ok(());
        for e in events {
            let r = self.client.api.await_event(e, "PJRT_LoadedExecutable_Execute");
            if first_err.is_ok() {
                first_err = r;
            }
        }
        first_err?;
        if missing {
            return Err(Error::Invalid("the plugin returned fewer outputs than the executable declares".into()));
        }
        Ok(result)
    }
}

// ------------------------------------------------------------------------------------------------------------
// Buffers

/// An owned device buffer.
pub(crate) struct BufferHandle {
    client: Arc<ClientHandle>,
    raw: *mut PJRT_Buffer,
}

// SAFETY: PjRtBuffer is thread-safe; the pointer is owned and its client kept alive by the handle.
unsafe impl Send for BufferHandle {}
// SAFETY: as above.
unsafe impl Sync for BufferHandle {}

impl Drop for BufferHandle {
    fn drop(&mut self) {
        let mut a = PJRT_Buffer_Destroy_Args::new();
        a.buffer = self.raw;
        let _ = call!(&self.client.api, PJRT_Buffer_Destroy, &mut a);
    }
}

impl BufferHandle {
    fn wrap(client: &Arc<ClientHandle>, raw: *mut PJRT_Buffer) -> Result<BufferHandle> {
        if raw.is_null() {
            return Err(Error::Invalid("the plugin reported success but returned no buffer".into()));
        }
        Ok(BufferHandle { client: client.clone(), raw })
    }

    /// `PJRT_Buffer_Type` of the elements.
    pub(crate) fn element_type(&self) -> Result<i32> {
        let mut a = PJRT_Buffer_ElementType_Args::new();
        a.buffer = self.raw;
        call!(&self.client.api, PJRT_Buffer_ElementType, &mut a)?;
        Ok(a.type_)
    }

    pub(crate) fn dims(&self) -> Result<Vec<i64>> {
        let mut a = PJRT_Buffer_Dimensions_Args::new();
        a.buffer = self.raw;
        call!(&self.client.api, PJRT_Buffer_Dimensions, &mut a)?;
        if a.dims.is_null() || a.num_dims == 0 {
            return Ok(Vec::new());
        }
        // SAFETY: the dims array is owned by the buffer (alive: `self`) and has `num_dims` entries.
        Ok(unsafe { std::slice::from_raw_parts(a.dims, a.num_dims) }.to_vec())
    }

    /// `PJRT_Buffer_ToHostBuffer` into `dst` with a dense row-major host layout; waits for the copy.
    pub(crate) fn to_host(&self, dst: &mut [u8]) -> Result<()> {
        let rank = self.dims()?.len();
        let minor_to_major: Vec<i64> = (0..rank as i64).rev().collect();
        let mut layout = PJRT_Buffer_MemoryLayout::new();
        layout.type_ = LAYOUT_TILED;
        layout.value.tiled = PJRT_Buffer_MemoryLayout_Tiled {
            struct_size: offset_of!(PJRT_Buffer_MemoryLayout_Tiled, num_tiles) + size_of::<usize>(),
            extension_start: ptr::null_mut(),
            minor_to_major: minor_to_major.as_ptr(),
            minor_to_major_size: rank,
            tile_dims: ptr::null(),
            tile_dim_sizes: ptr::null(),
            num_tiles: 0,
        };
        // First ask for the size the host copy needs.
        let mut q = PJRT_Buffer_ToHostBuffer_Args::new();
        q.src = self.raw;
        q.host_layout = &mut layout;
        call!(&self.client.api, PJRT_Buffer_ToHostBuffer, &mut q)?;
        if !q.event.is_null() {
            self.client.api.destroy_event(q.event);
        }
        if q.dst_size != dst.len() {
            return Err(Error::Invalid(format!(
                "the device buffer holds {} bytes but the host tensor has {}",
                q.dst_size,
                dst.len()
            )));
        }
        let mut a = PJRT_Buffer_ToHostBuffer_Args::new();
        a.src = self.raw;
        a.host_layout = &mut layout;
        a.dst = dst.as_mut_ptr().cast();
        a.dst_size = dst.len();
        call!(&self.client.api, PJRT_Buffer_ToHostBuffer, &mut a)?;
        // `dst` stays borrowed until the copy has finished.
        self.client.api.await_event(a.event, "PJRT_Buffer_ToHostBuffer")
    }
}

// ------------------------------------------------------------------------------------------------------------
// Byte views of host data

/// Element types whose values are plain bytes: every bit pattern is a valid value and there is no padding.
///
/// # Safety
/// Implementors must be `Copy` types without padding for which every bit pattern is valid.
pub(crate) unsafe trait Plain: Copy {}
// SAFETY: primitive integers and IEEE floats: no padding, all bit patterns valid.
unsafe impl Plain for u8 {}
// SAFETY: as above.
unsafe impl Plain for i8 {}
// SAFETY: as above.
unsafe impl Plain for i16 {}
// SAFETY: as above.
unsafe impl Plain for i32 {}
// SAFETY: as above.
unsafe impl Plain for i64 {}
// SAFETY: as above.
unsafe impl Plain for f32 {}
// SAFETY: as above.
unsafe impl Plain for f64 {}
// SAFETY: `half::f16` is `repr(transparent)` over `u16`.
unsafe impl Plain for half::f16 {}
// SAFETY: `half::bf16` is `repr(transparent)` over `u16`.
unsafe impl Plain for half::bf16 {}

/// The bytes of `v`.
pub(crate) fn bytes_of<T: Plain>(v: &[T]) -> &[u8] {
    // SAFETY: `T: Plain` has no padding, so all `size_of_val(v)` bytes are initialised; u8 has alignment 1.
    unsafe { std::slice::from_raw_parts(v.as_ptr().cast::<u8>(), std::mem::size_of_val(v)) }
}

/// The bytes of `v`, writable.
pub(crate) fn bytes_of_mut<T: Plain>(v: &mut [T]) -> &mut [u8] {
    // SAFETY: as in `bytes_of`, and any bytes written form valid `T`s because every bit pattern is valid.
    unsafe { std::slice::from_raw_parts_mut(v.as_mut_ptr().cast::<u8>(), std::mem::size_of_val(v)) }
}

/// The bytes of a bool slice (Rust `bool` is one byte, 0 or 1, like PJRT's PRED).
pub(crate) fn bytes_of_bools(v: &[bool]) -> &[u8] {
    // SAFETY: `bool` is one initialised byte with value 0 or 1; reading it as `u8` is always valid.
    unsafe { std::slice::from_raw_parts(v.as_ptr().cast::<u8>(), v.len()) }
}

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
}
