//! The function table `PJRT_Api`: the header's version struct and one nullable function pointer per slot, in
//! the header's order; and the names of the error codes.

use super::*;

/// `PJRT_Api_Version`.
#[repr(C)]
pub(crate) struct PJRT_Api_Version {
    pub(super) struct_size: usize,
    pub(super) extension_start: *mut PJRT_Extension_Base,
    pub(super) major_version: c_int,
    pub(super) minor_version: c_int,
}

pub(super) type F<A> = Option<unsafe extern "C" fn(*mut A) -> *mut PJRT_Error>;
pub(super) type FVoid<A> = Option<unsafe extern "C" fn(*mut A)>;
/// A slot this crate does not call (kept so that the offsets of the later slots are right).
pub(super) type Slot = Option<unsafe extern "C" fn()>;

/// `PJRT_Api`, slot for slot in header order. Never read as a whole: a plugin's table may be shorter than ours,
/// so each slot is read through [`Api::slot`] after checking it lies inside the plugin's `struct_size`.
#[repr(C)]
pub(crate) struct PJRT_Api {
    pub(super) struct_size: usize,
    pub(super) extension_start: *mut PJRT_Extension_Base,
    pub(super) pjrt_api_version: PJRT_Api_Version,

    pub(super) PJRT_Error_Destroy: FVoid<PJRT_Error_Destroy_Args>,
    pub(super) PJRT_Error_Message: FVoid<PJRT_Error_Message_Args>,
    pub(super) PJRT_Error_GetCode: F<PJRT_Error_GetCode_Args>,

    pub(super) PJRT_Plugin_Initialize: F<PJRT_Plugin_Initialize_Args>,
    pub(super) PJRT_Plugin_Attributes: F<PJRT_Plugin_Attributes_Args>,

    pub(super) PJRT_Event_Destroy: F<PJRT_Event_Destroy_Args>,
    pub(super) PJRT_Event_IsReady: Slot,
    pub(super) PJRT_Event_Error: Slot,
    pub(super) PJRT_Event_Await: F<PJRT_Event_Await_Args>,
    pub(super) PJRT_Event_OnReady: Slot,

    pub(super) PJRT_Client_Create: F<PJRT_Client_Create_Args>,
    pub(super) PJRT_Client_Destroy: F<PJRT_Client_Destroy_Args>,
    pub(super) PJRT_Client_PlatformName: F<PJRT_Client_PlatformName_Args>,
    pub(super) PJRT_Client_ProcessIndex: F<PJRT_Client_ProcessIndex_Args>,
    pub(super) PJRT_Client_PlatformVersion: F<PJRT_Client_PlatformVersion_Args>,
    pub(super) PJRT_Client_Devices: F<PJRT_Client_Devices_Args>,
    pub(super) PJRT_Client_AddressableDevices: F<PJRT_Client_AddressableDevices_Args>,
    pub(super) PJRT_Client_LookupDevice: Slot,
    pub(super) PJRT_Client_LookupAddressableDevice: Slot,
    pub(super) PJRT_Client_AddressableMemories: Slot,
    pub(super) PJRT_Client_Compile: F<PJRT_Client_Compile_Args>,
    pub(super) PJRT_Client_DefaultDeviceAssignment: Slot,
    pub(super) PJRT_Client_BufferFromHostBuffer: F<PJRT_Client_BufferFromHostBuffer_Args>,

    pub(super) PJRT_DeviceDescription_Id: F<PJRT_DeviceDescription_Id_Args>,
    pub(super) PJRT_DeviceDescription_ProcessIndex: F<PJRT_DeviceDescription_ProcessIndex_Args>,
    pub(super) PJRT_DeviceDescription_Attributes: F<PJRT_DeviceDescription_Attributes_Args>,
    pub(super) PJRT_DeviceDescription_Kind: F<PJRT_DeviceDescription_Kind_Args>,
    pub(super) PJRT_DeviceDescription_DebugString: F<PJRT_DeviceDescription_DebugString_Args>,
    pub(super) PJRT_DeviceDescription_ToString: F<PJRT_DeviceDescription_ToString_Args>,

    pub(super) PJRT_Device_GetDescription: F<PJRT_Device_GetDescription_Args>,
    pub(super) PJRT_Device_IsAddressable: F<PJRT_Device_IsAddressable_Args>,
    pub(super) PJRT_Device_LocalHardwareId: F<PJRT_Device_LocalHardwareId_Args>,
    pub(super) PJRT_Device_AddressableMemories: Slot,
    pub(super) PJRT_Device_DefaultMemory: Slot,
    pub(super) PJRT_Device_MemoryStats: Slot,

    pub(super) PJRT_Memory_Id: Slot,
    pub(super) PJRT_Memory_Kind: Slot,
    pub(super) PJRT_Memory_DebugString: Slot,
    pub(super) PJRT_Memory_ToString: Slot,
    pub(super) PJRT_Memory_AddressableByDevices: Slot,

    pub(super) PJRT_Executable_Destroy: F<PJRT_Executable_Destroy_Args>,
    pub(super) PJRT_Executable_Name: F<PJRT_Executable_Name_Args>,
    pub(super) PJRT_Executable_NumReplicas: Slot,
    pub(super) PJRT_Executable_NumPartitions: Slot,
    pub(super) PJRT_Executable_NumOutputs: F<PJRT_Executable_NumOutputs_Args>,
    pub(super) PJRT_Executable_SizeOfGeneratedCodeInBytes: Slot,
    pub(super) PJRT_Executable_GetCostAnalysis: Slot,
    pub(super) PJRT_Executable_OutputMemoryKinds: Slot,
    pub(super) PJRT_Executable_OptimizedProgram: Slot,
    pub(super) PJRT_Executable_Serialize: F<PJRT_Executable_Serialize_Args>,

    pub(super) PJRT_LoadedExecutable_Destroy: F<PJRT_LoadedExecutable_Destroy_Args>,
    pub(super) PJRT_LoadedExecutable_GetExecutable: F<PJRT_LoadedExecutable_GetExecutable_Args>,
    pub(super) PJRT_LoadedExecutable_AddressableDevices: F<PJRT_LoadedExecutable_AddressableDevices_Args>,
    pub(super) PJRT_LoadedExecutable_Delete: Slot,
    pub(super) PJRT_LoadedExecutable_IsDeleted: Slot,
    pub(super) PJRT_LoadedExecutable_Execute: F<PJRT_LoadedExecutable_Execute_Args>,
    pub(super) PJRT_Executable_DeserializeAndLoad: F<PJRT_Executable_DeserializeAndLoad_Args>,
    pub(super) PJRT_LoadedExecutable_Fingerprint: Slot,

    pub(super) PJRT_Buffer_Destroy: F<PJRT_Buffer_Destroy_Args>,
    pub(super) PJRT_Buffer_ElementType: F<PJRT_Buffer_ElementType_Args>,
    pub(super) PJRT_Buffer_Dimensions: F<PJRT_Buffer_Dimensions_Args>,
    pub(super) PJRT_Buffer_UnpaddedDimensions: Slot,
    pub(super) PJRT_Buffer_DynamicDimensionIndices: Slot,
    pub(super) PJRT_Buffer_GetMemoryLayout: Slot,
    pub(super) PJRT_Buffer_OnDeviceSizeInBytes: Slot,
    pub(super) PJRT_Buffer_Device: Slot,
    pub(super) PJRT_Buffer_Memory: Slot,
    pub(super) PJRT_Buffer_Delete: Slot,
    pub(super) PJRT_Buffer_IsDeleted: Slot,
    pub(super) PJRT_Buffer_CopyToDevice: Slot,
    pub(super) PJRT_Buffer_ToHostBuffer: F<PJRT_Buffer_ToHostBuffer_Args>,
    pub(super) PJRT_Buffer_IsOnCpu: Slot,
    pub(super) PJRT_Buffer_ReadyEvent: Slot,
    pub(super) PJRT_Buffer_UnsafePointer: F<PJRT_Buffer_UnsafePointer_Args>,
    pub(super) PJRT_Buffer_IncreaseExternalReferenceCount: Slot,
    pub(super) PJRT_Buffer_DecreaseExternalReferenceCount: Slot,
    pub(super) PJRT_Buffer_OpaqueDeviceMemoryDataPointer: Slot,

    pub(super) PJRT_CopyToDeviceStream_Destroy: Slot,
    pub(super) PJRT_CopyToDeviceStream_AddChunk: Slot,
    pub(super) PJRT_CopyToDeviceStream_TotalBytes: Slot,
    pub(super) PJRT_CopyToDeviceStream_GranuleSize: Slot,
    pub(super) PJRT_CopyToDeviceStream_CurrentBytes: Slot,

    pub(super) PJRT_TopologyDescription_Create: F<PJRT_TopologyDescription_Create_Args>,
    pub(super) PJRT_TopologyDescription_Destroy: F<PJRT_TopologyDescription_Destroy_Args>,
    pub(super) PJRT_TopologyDescription_PlatformName: F<PJRT_TopologyDescription_PlatformName_Args>,
    pub(super) PJRT_TopologyDescription_PlatformVersion: Slot,
    pub(super) PJRT_TopologyDescription_GetDeviceDescriptions: F<PJRT_TopologyDescription_GetDeviceDescriptions_Args>,
    pub(super) PJRT_TopologyDescription_Serialize: Slot,
    pub(super) PJRT_TopologyDescription_Attributes: Slot,

    pub(super) PJRT_Compile: F<PJRT_Compile_Args>,

    pub(super) PJRT_Executable_OutputElementTypes: Slot,
    pub(super) PJRT_Executable_OutputDimensions: Slot,
    pub(super) PJRT_Buffer_CopyToMemory: Slot,
    pub(super) PJRT_Client_CreateViewOfDeviceBuffer: Slot,
    pub(super) PJRT_Executable_Fingerprint: F<PJRT_Executable_Fingerprint_Args>,
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
