//! Owning handles of executables: compiled (serializable) and loaded (executable on the client's devices).

use super::*;

/// An owned `PJRT_Executable` (the compiled, not-loaded view).
pub(crate) struct ExecutableHandle {
    pub(super) api: Arc<Api>,
    pub(super) raw: *mut PJRT_Executable,
}

destroy_on_drop!(ExecutableHandle, PJRT_Executable_Destroy, PJRT_Executable_Destroy_Args.executable, api);

impl ExecutableHandle {
    pub(crate) fn name(&self) -> Result<String> {
        let a = query!(&self.api, PJRT_Executable_Name, PJRT_Executable_Name_Args { executable: self.raw })?;
        // SAFETY: owned by the executable, alive while `self` is.
        Ok(unsafe { copy_str(a.executable_name, a.executable_name_size) })
    }

    pub(crate) fn num_outputs(&self) -> Result<usize> {
        let a = query!(&self.api, PJRT_Executable_NumOutputs, PJRT_Executable_NumOutputs_Args {
            executable: self.raw,
        })?;
        Ok(a.num_outputs)
    }

    pub(crate) fn fingerprint(&self) -> Result<String> {
        let a = query!(&self.api, PJRT_Executable_Fingerprint, PJRT_Executable_Fingerprint_Args {
            executable: self.raw,
        })?;
        // SAFETY: owned by the executable, alive while `self` is.
        Ok(unsafe { copy_str(a.executable_fingerprint, a.executable_fingerprint_size) })
    }

    /// `PJRT_Executable_Serialize`: the platform-specific serialization (copied; the plugin's copy is freed).
    pub(crate) fn serialize(&self) -> Result<Vec<u8>> {
        let a = query!(&self.api, PJRT_Executable_Serialize, PJRT_Executable_Serialize_Args { executable: self.raw })?;
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
    pub(super) client: Arc<ClientHandle>,
    pub(super) raw: *mut PJRT_LoadedExecutable,
    pub(super) num_outputs: usize,
}

// SAFETY: PjRtLoadedExecutable is thread-safe (concurrent Execute calls are allowed); the pointer is owned and the
// client it needs is kept alive by the handle.
unsafe impl Send for LoadedExecutableHandle {}
// SAFETY: as above.
unsafe impl Sync for LoadedExecutableHandle {}

destroy_on_drop!(LoadedExecutableHandle, PJRT_LoadedExecutable_Destroy, PJRT_LoadedExecutable_Destroy_Args.executable, client.api);

impl LoadedExecutableHandle {
    pub(super) fn wrap(client: &Arc<ClientHandle>, raw: *mut PJRT_LoadedExecutable) -> Result<LoadedExecutableHandle> {
        non_null(raw, "the plugin reported success but returned no executable")?;
        let mut h = LoadedExecutableHandle { client: client.clone(), raw, num_outputs: 0 };
        h.num_outputs = h.executable()?.num_outputs()?;
        Ok(h)
    }

    /// The compiled executable behind this loaded one (a new object, destroyed with the returned handle).
    pub(crate) fn executable(&self) -> Result<ExecutableHandle> {
        let a = query!(&self.client.api, PJRT_LoadedExecutable_GetExecutable, PJRT_LoadedExecutable_GetExecutable_Args {
            loaded_executable: self.raw,
        })?;
        non_null(a.executable, "PJRT_LoadedExecutable_GetExecutable returned no executable")?;
        Ok(ExecutableHandle { api: self.client.api.clone(), raw: a.executable })
    }

    pub(crate) fn num_outputs(&self) -> usize {
        self.num_outputs
    }

    pub(crate) fn addressable_devices(&self) -> Result<Vec<DeviceHandle>> {
        let a = query!(&self.client.api, PJRT_LoadedExecutable_AddressableDevices, PJRT_LoadedExecutable_AddressableDevices_Args {
            executable: self.raw,
        })?;
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
        query!(&self.client.api, PJRT_LoadedExecutable_Execute, PJRT_LoadedExecutable_Execute_Args {
            executable: self.raw,
            options: &mut options,
            argument_lists: arg_lists.as_ptr(),
            num_devices: num_devices,
            num_args: num_args,
            output_lists: out_lists.as_ptr(),
            device_complete_events: events.as_mut_ptr(),
            execute_device: device.map_or(ptr::null_mut(), |d| d.raw),
        })?;
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
