//! Owning handles of a client and its devices (and of a topology description, for ahead-of-time compilation).

use super::*;

/// An owned `PJRT_Client`.
pub(crate) struct ClientHandle {
    pub(super) api: Arc<Api>,
    pub(super) raw: *mut PJRT_Client,
}

// SAFETY: PJRT clients are thread-safe (PjRtClient's methods may be called concurrently); the pointer is owned.
unsafe impl Send for ClientHandle {}
// SAFETY: as above.
unsafe impl Sync for ClientHandle {}

destroy_on_drop!(ClientHandle, PJRT_Client_Destroy, PJRT_Client_Destroy_Args.client, api);

impl ClientHandle {
    /// `PJRT_Client_Create` with the given options (no key-value store).
    pub(crate) fn create(api: &Arc<Api>, options: &[(String, NamedValue)]) -> Result<Arc<ClientHandle>> {
        let opts = NamedValues::new(options);
        let a = query!(api, PJRT_Client_Create, PJRT_Client_Create_Args {
            create_options: opts.ptr(),
            num_options: options.len(),
        })?;
        non_null(a.client, "PJRT_Client_Create succeeded but returned no client")?;
        Ok(Arc::new(ClientHandle { api: api.clone(), raw: a.client }))
    }

    pub(crate) fn platform_name(&self) -> Result<String> {
        let a = query!(&self.api, PJRT_Client_PlatformName, PJRT_Client_PlatformName_Args { client: self.raw })?;
        // SAFETY: the name is owned by the client, alive while `self` is.
        Ok(unsafe { copy_str(a.platform_name, a.platform_name_size) })
    }

    pub(crate) fn platform_version(&self) -> Result<String> {
        let a = query!(&self.api, PJRT_Client_PlatformVersion, PJRT_Client_PlatformVersion_Args { client: self.raw })?;
        // SAFETY: the version string is owned by the client, alive while `self` is.
        Ok(unsafe { copy_str(a.platform_version, a.platform_version_size) })
    }

    pub(crate) fn process_index(&self) -> Result<i32> {
        let a = query!(&self.api, PJRT_Client_ProcessIndex, PJRT_Client_ProcessIndex_Args { client: self.raw })?;
        Ok(a.process_index)
    }

    /// All devices (`addressable == false`) or the addressable ones.
    pub(crate) fn devices(self: &Arc<Self>, addressable: bool) -> Result<Vec<DeviceHandle>> {
        let (p, n) = if addressable {
            let a = query!(&self.api, PJRT_Client_AddressableDevices, PJRT_Client_AddressableDevices_Args {
                client: self.raw,
            })?;
            (a.addressable_devices, a.num_addressable_devices)
        } else {
            let a = query!(&self.api, PJRT_Client_Devices, PJRT_Client_Devices_Args { client: self.raw })?;
            (a.devices, a.num_devices)
        };
        // SAFETY: the array of `n` device pointers is owned by the client and alive while it is.
        let raw = unsafe { ptr_slice(p, n) };
        Ok(raw.iter().map(|&d| DeviceHandle { client: self.clone(), raw: d }).collect())
    }

    /// `PJRT_Client_Compile`: compiles `code` in `format` ("mlir", "hlo") with serialized `CompileOptionsProto`.
    pub(crate) fn compile(self: &Arc<Self>, code: &[u8], format: &str, options: &[u8]) -> Result<LoadedExecutableHandle> {
        let program = PJRT_Program::of(code, format);
        let a = query!(&self.api, PJRT_Client_Compile, PJRT_Client_Compile_Args {
            client: self.raw,
            program: &program,
            compile_options: options.as_ptr().cast(),
            compile_options_size: options.len(),
        })?;
        LoadedExecutableHandle::wrap(self, a.executable)
    }

    /// `PJRT_Executable_DeserializeAndLoad`: loads an executable serialized by [`ExecutableHandle::serialize`].
    pub(crate) fn deserialize_and_load(self: &Arc<Self>, bytes: &[u8]) -> Result<LoadedExecutableHandle> {
        let a = query!(&self.api, PJRT_Executable_DeserializeAndLoad, PJRT_Executable_DeserializeAndLoad_Args {
            client: self.raw,
            serialized_executable: bytes.as_ptr().cast(),
            serialized_executable_size: bytes.len(),
        })?;
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
        let a = query!(&self.api, PJRT_Client_BufferFromHostBuffer, PJRT_Client_BufferFromHostBuffer_Args {
            client: self.raw,
            data: data.as_ptr().cast(),
            type_: element_type,
            dims: dims.as_ptr(),
            num_dims: dims.len(),
            host_buffer_semantics: HOST_BUFFER_IMMUTABLE_UNTIL_TRANSFER_COMPLETES,
            device: device.raw,
        })?;
        // Own the buffer first so that it is destroyed even if waiting for the transfer fails.
        let buffer = BufferHandle::wrap(self, a.buffer)?;
        // `data` is borrowed until this function returns; waiting here ends the plugin's use of it.
        self.api.await_event(a.done_with_host_buffer, "PJRT_Client_BufferFromHostBuffer")?;
        Ok(buffer)
    }
}

pub(super) struct TopologyHandle {
    pub(super) api: Arc<Api>,
    pub(super) raw: *mut PJRT_TopologyDescription,
}

destroy_on_drop!(TopologyHandle, PJRT_TopologyDescription_Destroy, PJRT_TopologyDescription_Destroy_Args.topology, api);

/// Copies a plugin-owned array of pointers.
///
/// # Safety
/// `p` must be null or point to `n` readable pointers.
pub(super) unsafe fn ptr_slice<T>(p: *const *mut T, n: usize) -> Vec<*mut T> {
    if p.is_null() || n == 0 {
        return Vec::new();
    }
    // SAFETY: guaranteed by the caller.
    unsafe { std::slice::from_raw_parts(p, n) }.to_vec()
}

/// A device of a client (owned by the client, which this handle keeps alive).
#[derive(Clone)]
pub(crate) struct DeviceHandle {
    pub(super) client: Arc<ClientHandle>,
    pub(super) raw: *mut PJRT_Device,
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
    pub(super) fn description(&self) -> Result<*mut PJRT_DeviceDescription> {
        let a = query!(&self.client.api, PJRT_Device_GetDescription, PJRT_Device_GetDescription_Args {
            device: self.raw,
        })?;
        Ok(a.device_description)
    }

    /// Description of the device: (id, process index, kind, debug string, to-string, attributes).
    pub(crate) fn describe(&self) -> Result<DeviceDescription> {
        let d = self.description()?;
        describe(&self.client.api, d)
    }

    pub(crate) fn is_addressable(&self) -> Result<bool> {
        let a = query!(&self.client.api, PJRT_Device_IsAddressable, PJRT_Device_IsAddressable_Args {
            device: self.raw,
        })?;
        Ok(a.is_addressable)
    }

    pub(crate) fn local_hardware_id(&self) -> Result<i32> {
        let a = query!(&self.client.api, PJRT_Device_LocalHardwareId, PJRT_Device_LocalHardwareId_Args {
            device: self.raw,
        })?;
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

pub(super) fn describe(api: &Api, d: *mut PJRT_DeviceDescription) -> Result<DeviceDescription> {
    let id = query!(api, PJRT_DeviceDescription_Id, PJRT_DeviceDescription_Id_Args { device_description: d })?;
    let pi = query!(api, PJRT_DeviceDescription_ProcessIndex, PJRT_DeviceDescription_ProcessIndex_Args {
        device_description: d,
    })?;
    let kind = query!(api, PJRT_DeviceDescription_Kind, PJRT_DeviceDescription_Kind_Args { device_description: d })?;
    let dbg = query!(api, PJRT_DeviceDescription_DebugString, PJRT_DeviceDescription_DebugString_Args {
        device_description: d,
    })?;
    let ts = query!(api, PJRT_DeviceDescription_ToString, PJRT_DeviceDescription_ToString_Args {
        device_description: d,
    })?;
    let at = query!(api, PJRT_DeviceDescription_Attributes, PJRT_DeviceDescription_Attributes_Args {
        device_description: d,
    })?;
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
