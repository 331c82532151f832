//! `#[repr(C)]` transcriptions of the header's opaque types, enums and args structs (one `args!` line per
//! struct, grouped by API area: errors, named values, plugin, events, client, devices, executables, buffers,
//! topologies).

use super::*;

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
pub(super) type CEnum = c_int;

/// `PJRT_NamedValue_Type`.
pub(crate) const NAMED_STRING: CEnum = 0;
pub(crate) const NAMED_INT64: CEnum = 1;
pub(crate) const NAMED_INT64_LIST: CEnum = 2;
pub(crate) const NAMED_FLOAT: CEnum = 3;
pub(crate) const NAMED_BOOL: CEnum = 4;

/// `PJRT_HostBufferSemantics_kImmutableUntilTransferCompletes`.
pub(super) const HOST_BUFFER_IMMUTABLE_UNTIL_TRANSFER_COMPLETES: CEnum = 1;
/// `PJRT_Buffer_MemoryLayout_Type_Tiled`.
pub(super) const LAYOUT_TILED: CEnum = 0;

// Args structs

/// Defines an args struct: `struct_size` and `extension_start` first, then the fields, the last one given
/// separately so that `STRUCT_SIZE` is computed exactly like the header's `PJRT_STRUCT_SIZE(type, last_field)`
/// (which, unlike `size_of`, excludes the tail padding).
macro_rules! args {
    ($(#[$attr:meta])* $name:ident { $($f:ident : $t:ty),* $(,)? } last $lf:ident : $lt:ty) => {
        #[repr(C)]
        $(#[$attr])*
        pub(crate) struct $name {
            pub(crate) struct_size: usize,
            pub(crate) extension_start: *mut PJRT_Extension_Base,
            $(pub(crate) $f: $t,)*
            pub(crate) $lf: $lt,
        }
        #[allow(dead_code)] // not every struct is built by `new` (some are only read)
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
impl PJRT_Program {
    /// The program `code` in `format` ("mlir", "hlo"), pointing into both (which must outlive its use).
    pub(crate) fn of(code: &[u8], format: &str) -> PJRT_Program {
        let mut program = PJRT_Program::new();
        // The plugin only reads `code` during the call (the header's `char*` is for an unrelated out-use).
        program.code = code.as_ptr() as *mut c_char;
        program.code_size = code.len();
        program.format = format.as_ptr().cast();
        program.format_size = format.len();
        program
    }
}
args!(PJRT_Client_Compile_Args {
    client: *mut PJRT_Client,
    program: *const PJRT_Program,
    compile_options: *const c_char,
    compile_options_size: usize,
} last executable: *mut PJRT_LoadedExecutable);

args!(
    /// `PJRT_Buffer_MemoryLayout_Tiled`.
    #[derive(Clone, Copy)]
    PJRT_Buffer_MemoryLayout_Tiled {
        minor_to_major: *const i64,
        minor_to_major_size: usize,
        tile_dims: *const i64,
        tile_dim_sizes: *const usize,
    } last num_tiles: usize
);
args!(
    /// `PJRT_Buffer_MemoryLayout_Strides`.
    #[derive(Clone, Copy)]
    PJRT_Buffer_MemoryLayout_Strides { byte_strides: *const i64 } last num_byte_strides: usize
);

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
    pub(super) _struct_size: usize,
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
args!(PJRT_Buffer_UnsafePointer_Args { buffer: *mut PJRT_Buffer } last buffer_pointer: usize);
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
