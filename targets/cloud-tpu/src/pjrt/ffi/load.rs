//! Loading a plugin: the process-wide registry of loaded libraries, the version check, and the plugin-level
//! calls (attributes, ahead-of-time compilation for a topology).

use super::*;

/// A loaded plugin: its function table and version. Lives for the rest of the process (see the module docs).
pub(crate) struct Api {
    pub(super) raw: *const PJRT_Api,
    /// The plugin's `PJRT_Api.struct_size`.
    pub(super) table_size: usize,
    pub(super) path: PathBuf,
    pub(super) major: i32,
    pub(super) minor: i32,
    /// The library (kept loaded; `None` only for the in-memory tables of the unit tests).
    pub(super) _lib: Option<libloading::Library>,
}

// SAFETY: `raw` points to the plugin's immutable, process-lifetime table of function pointers; PJRT functions
// may be called from any thread (the C API's objects are thread-safe, as PJRT's C++ clients are).
unsafe impl Send for Api {}
// SAFETY: as above; `Api` has no interior mutability.
unsafe impl Sync for Api {}

/// Refuses a plugin whose major API version differs from the header's.
pub(super) fn check_version(path: &Path, major: i32, minor: i32) -> Result<()> {
    if major != HEADER_MAJOR {
        return Err(Error::Version(format!(
            "{} implements PJRT C API {major}.{minor}; this build speaks {HEADER_MAJOR}.{HEADER_MINOR} and cannot use a \
             different major version",
            path.display()
        )));
    }
    Ok(())
}

pub(super) fn registry() -> &'static Mutex<HashMap<PathBuf, Arc<Api>>> {
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
        query!(&api, PJRT_Plugin_Initialize, PJRT_Plugin_Initialize_Args {})?;
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

    /// `PJRT_Plugin_Attributes`: the plugin's key-value attributes (empty if the plugin lacks the function).
    pub(crate) fn attributes(&self) -> Result<Vec<(String, NamedValue)>> {
        if slot!(self, PJRT_Plugin_Attributes).is_err() {
            return Ok(Vec::new());
        }
        let a = query!(self, PJRT_Plugin_Attributes, PJRT_Plugin_Attributes_Args {  })?;
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
        let t = query!(self, PJRT_TopologyDescription_Create, PJRT_TopologyDescription_Create_Args {
            topology_name: topology.as_ptr().cast(),
            topology_name_size: topology.len(),
            create_options: opts.ptr(),
            num_options: options.len(),
        })?;
        non_null(t.topology, "PJRT_TopologyDescription_Create succeeded but returned no topology")?;
        let topo = TopologyHandle { api: self.clone(), raw: t.topology };
        let platform = {
            let a = query!(self, PJRT_TopologyDescription_PlatformName, PJRT_TopologyDescription_PlatformName_Args {
                topology: topo.raw,
            })?;
            // SAFETY: owned by the topology, alive while `topo` is.
            unsafe { copy_str(a.platform_name, a.platform_name_size) }
        };
        let num_devices = {
            let a = query!(self, PJRT_TopologyDescription_GetDeviceDescriptions, PJRT_TopologyDescription_GetDeviceDescriptions_Args {
                topology: topo.raw,
            })?;
            a.num_descriptions
        };
        let program = PJRT_Program::of(code, format);
        let a = query!(self, PJRT_Compile, PJRT_Compile_Args {
            topology: topo.raw,
            program: &program,
            compile_options: compile_options.as_ptr().cast(),
            compile_options_size: compile_options.len(),
        })?;
        non_null(a.executable, "PJRT_Compile succeeded but returned no executable")?;
        let exe = ExecutableHandle { api: self.clone(), raw: a.executable };
        Ok((platform, num_devices, exe.serialize()?))
    }
}
