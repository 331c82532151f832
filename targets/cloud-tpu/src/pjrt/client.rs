//! PJRT clients and their devices.

use std::sync::Arc;

use tpu_sdk_core::ir::Tensor;

use super::buffer::{self, Buffer};
use super::executable::LoadedExecutable;
use super::ffi::{ClientHandle, DeviceHandle, NamedValue};
use super::options::CompileOptions;
use crate::error::{Error, Result};

/// A PJRT client: the runtime of one platform (cpu, tpu, ...) in this process.
#[derive(Clone)]
pub struct Client {
    h: Arc<ClientHandle>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Client({})", self.platform_name().unwrap_or_default())
    }
}

/// What a device says about itself.
#[derive(Clone, Debug, PartialEq)]
pub struct DeviceInfo {
    /// Global device id (unique among the platform's devices).
    pub id: i32,
    /// Index of the process the device is attached to.
    pub process_index: i32,
    /// Vendor-specific kind, for example "cpu" or "TPU v5 lite".
    pub kind: String,
    /// Terse description, for example "CpuDevice(id=0)".
    pub description: String,
    /// Verbose description for logs.
    pub debug_string: String,
    /// Whether this process can issue work to the device.
    pub addressable: bool,
    /// Hardware id local to the host (-1 when undefined).
    pub local_hardware_id: i32,
    /// Platform-specific attributes (TPU: coords, core_on_chip, ...).
    pub attributes: Vec<(String, NamedValue)>,
}

/// A device of a [`Client`].
#[derive(Clone)]
pub struct Device {
    pub(crate) h: DeviceHandle,
    info: DeviceInfo,
}

impl std::fmt::Debug for Device {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.info.description)
    }
}

impl PartialEq for Device {
    fn eq(&self, other: &Device) -> bool {
        self.h == other.h
    }
}

impl Device {
    pub(crate) fn from_handle(h: DeviceHandle) -> Result<Device> {
        let d = h.describe()?;
        let info = DeviceInfo {
            id: d.id,
            process_index: d.process_index,
            kind: d.kind,
            description: d.to_string,
            debug_string: d.debug_string,
            addressable: h.is_addressable()?,
            local_hardware_id: h.local_hardware_id()?,
            attributes: d.attributes,
        };
        Ok(Device { h, info })
    }

    /// The device's description.
    pub fn info(&self) -> &DeviceInfo {
        &self.info
    }

    /// Global device id.
    pub fn id(&self) -> i32 {
        self.info.id
    }
}

impl Client {
    /// An identity of this client, equal for its clones and distinct from every other live client.
    pub(crate) fn id(&self) -> usize {
        Arc::as_ptr(&self.h) as usize
    }

    pub(crate) fn new(h: Arc<ClientHandle>) -> Client {
        Client { h }
    }

    /// The platform, for example "cpu" or "tpu".
    pub fn platform_name(&self) -> Result<String> {
        self.h.platform_name()
    }

    /// Platform-specific version information (for example the libtpu version).
    pub fn platform_version(&self) -> Result<String> {
        self.h.platform_version()
    }

    /// Index of this process among the processes of a multi-host platform (0 on one host).
    pub fn process_index(&self) -> Result<i32> {
        self.h.process_index()
    }

    /// Every device of the platform, addressable or not.
    pub fn devices(&self) -> Result<Vec<Device>> {
        self.h.devices(false)?.into_iter().map(Device::from_handle).collect()
    }

    /// The devices this process can use.
    pub fn addressable_devices(&self) -> Result<Vec<Device>> {
        self.h.devices(true)?.into_iter().map(Device::from_handle).collect()
    }

    /// Compiles a StableHLO module given as MLIR text (or bytecode).
    pub fn compile(&self, mlir: &str, options: &CompileOptions) -> Result<LoadedExecutable> {
        self.compile_program(mlir.as_bytes(), "mlir", options)
    }

    /// Compiles a program in a PJRT format ("mlir": StableHLO text or bytecode, "hlo": serialized HloModuleProto).
    pub fn compile_program(&self, code: &[u8], format: &str, options: &CompileOptions) -> Result<LoadedExecutable> {
        Ok(LoadedExecutable::new(self.h.compile(code, format, &options.encode())?))
    }

    /// Loads an executable serialized by [`LoadedExecutable::serialize`] (same plugin and version only).
    pub fn load_serialized(&self, bytes: &[u8]) -> Result<LoadedExecutable> {
        Ok(LoadedExecutable::new(self.h.deserialize_and_load(bytes)?))
    }

    /// Copies a host tensor to `device`.
    pub fn upload(&self, t: &Tensor, device: &Device) -> Result<Buffer> {
        let ty = buffer::pjrt_type(t.dtype());
        let dims: Vec<i64> = t.shape.iter().map(|&d| d as i64).collect();
        let h = buffer::with_bytes(t, |bytes| self.h.buffer_from_host(bytes, ty, &dims, &device.h))?;
        Ok(Buffer::new(h))
    }
}

impl Client {
    /// Checks that `devices` are addressable devices of this client (a helper for callers that pick devices).
    pub fn check_addressable(&self, devices: &[Device]) -> Result<()> {
        for d in devices {
            if !d.info.addressable {
                return Err(Error::Invalid(format!("device {} is not addressable from this process", d.info.description)));
            }
        }
        Ok(())
    }
}
