//! A safe binding of the PJRT C API: load a plugin, create a client, compile StableHLO, move tensors to and from
//! devices and execute.
//!
//! All `unsafe` code lives in the private `ffi` module; this module and its children are safe wrappers around
//! its handles.
//!
//! ```no_run
//! use tpu_sdk_cloud_tpu::pjrt::{CompileOptions, Plugin};
//! use tpu_sdk_core::ir::Tensor;
//! let plugin = Plugin::load("/path/to/libpjrt_cpu.so")?;
//! let client = plugin.client()?;
//! let exe = client.compile(
//!     "func.func @main(%a: tensor<2xf32>) -> tensor<2xf32> {\n  %0 = stablehlo.add %a, %a : tensor<2xf32>\n  return %0 : tensor<2xf32>\n}",
//!     &CompileOptions::default(),
//! )?;
//! let device = &client.addressable_devices()?[0];
//! let x = client.upload(&Tensor::from_f32(vec![2], vec![1.0, 2.0]), device)?;
//! let y = exe.execute(&[&x], None)?;
//! assert_eq!(y[0].to_tensor()?.as_f32(), Some(&[2.0, 4.0][..]));
//! # Ok::<(), tpu_sdk_cloud_tpu::Error>(())
//! ```

mod buffer;
mod client;
mod executable;
pub(crate) mod ffi;
mod options;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

pub use buffer::Buffer;
pub use client::{Client, Device, DeviceInfo};
pub use executable::LoadedExecutable;
pub use ffi::NamedValue;
pub use options::{CompileOptions, CompileOptionsProto, ComputationDevice, DeviceAssignmentProto, ExecutableBuildOptionsProto};

use crate::error::Result;

/// Version of the PJRT C API header this crate was written against (major, minor).
pub const HEADER_VERSION: (i32, i32) = (ffi::HEADER_MAJOR, ffi::HEADER_MINOR);

/// A loaded PJRT plugin (a shared library exporting `GetPjrtApi`). Loading is done once per file and process;
/// the library stays loaded until the process exits.
#[derive(Clone)]
pub struct Plugin {
    api: Arc<ffi::Api>,
}

impl std::fmt::Debug for Plugin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (major, minor) = self.api_version();
        write!(f, "Plugin({}, API {major}.{minor})", self.path().display())
    }
}

/// The StableHLO versions a plugin accepts (from its `stablehlo_current_version` and `stablehlo_minimum_version`
/// attributes), each as [major, minor, patch].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StablehloVersions {
    /// The newest StableHLO version the plugin's compiler understands.
    pub current: Option<Vec<i64>>,
    /// The oldest serialized version it still reads.
    pub minimum: Option<Vec<i64>>,
}

impl Plugin {
    /// Loads the plugin at `path`, checks its API version and initialises it. A file that looks like libtpu is
    /// loaded after [`crate::discover::prepare_libtpu_env`] has made it safe to load off a TPU VM.
    pub fn load(path: impl AsRef<Path>) -> Result<Plugin> {
        let path = path.as_ref();
        if crate::discover::looks_like_libtpu(path) {
            crate::discover::prepare_libtpu_env();
        }
        Ok(Plugin { api: ffi::Api::load(path)? })
    }

    /// The plugin file (canonical path).
    pub fn path(&self) -> &Path {
        self.api.path()
    }

    /// The PJRT C API version the plugin implements (major, minor).
    pub fn api_version(&self) -> (i32, i32) {
        self.api.version()
    }

    /// The plugin's attributes (`PJRT_Plugin_Attributes`), for example `xla_version` and the StableHLO versions.
    pub fn attributes(&self) -> Result<Vec<(String, NamedValue)>> {
        self.api.attributes()
    }

    /// The StableHLO versions from [`Plugin::attributes`], when the plugin reports them.
    pub fn stablehlo_versions(&self) -> Result<StablehloVersions> {
        let mut v = StablehloVersions::default();
        for (k, val) in self.attributes()? {
            if let NamedValue::Int64List(l) = val {
                match k.as_str() {
                    "stablehlo_current_version" => v.current = Some(l),
                    "stablehlo_minimum_version" => v.minimum = Some(l),
                    _ => {}
                }
            }
        }
        Ok(v)
    }

    /// The process-wide client of this plugin (created on first use with no options, then shared). Use this rather
    /// than [`Plugin::client`] for devices that one process can open only once, such as TPUs.
    pub fn shared_client(&self) -> Result<Client> {
        static CLIENTS: OnceLock<Mutex<HashMap<PathBuf, Client>>> = OnceLock::new();
        let mut clients = CLIENTS.get_or_init(|| Mutex::new(HashMap::new())).lock().unwrap_or_else(|p| p.into_inner());
        if let Some(c) = clients.get(self.path()) {
            return Ok(c.clone());
        }
        let c = self.client()?;
        clients.insert(self.path().to_path_buf(), c.clone());
        Ok(c)
    }

    /// Creates a new client with no options.
    pub fn client(&self) -> Result<Client> {
        self.client_with_options(&[])
    }

    /// Creates a client with platform-specific options (for example `cpu_device_count` for the CPU plugin).
    pub fn client_with_options(&self, options: &[(String, NamedValue)]) -> Result<Client> {
        Ok(Client::new(ffi::ClientHandle::create(&self.api, options)?))
    }

    /// Compiles `mlir` ahead of time for a named topology (libtpu: for example `"v5e:2x2"`) without needing its
    /// devices: returns (platform name, number of devices in the topology, serialized executable). The bytes can
    /// be loaded later on matching hardware with [`Client::load_serialized`].
    pub fn compile_for_topology(
        &self,
        topology: &str,
        topology_options: &[(String, NamedValue)],
        mlir: &str,
        options: &CompileOptions,
    ) -> Result<(String, usize, Vec<u8>)> {
        self.api.compile_for_topology(topology, topology_options, mlir.as_bytes(), "mlir", &options.encode())
    }
}
