//! The error type of the Cloud TPU target.

/// Everything that can go wrong between a graph and a PJRT device.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// No PJRT plugin could be found; the message says what to install or set.
    #[error("no PJRT plugin found: {0}")]
    PluginNotFound(String),
    /// The plugin file could not be loaded.
    #[error("cannot load PJRT plugin {path}: {msg}")]
    PluginLoad {
        /// the file
        path: String,
        /// why
        msg: String,
    },
    /// The plugin speaks an incompatible version of the PJRT C API.
    #[error("PJRT version mismatch: {0}")]
    Version(String),
    /// The plugin's function table ends before (or leaves empty) a function this crate needs.
    #[error("PJRT plugin {plugin} (C API {major}.{minor}) does not provide {function}")]
    MissingFunction {
        /// the PJRT function
        function: &'static str,
        /// the plugin file
        plugin: String,
        /// the plugin's API major version
        major: i32,
        /// the plugin's API minor version
        minor: i32,
    },
    /// A PJRT function returned an error.
    #[error("{function} failed ({}): {message}", crate::pjrt::ffi::error_code_name(*.code))]
    Pjrt {
        /// the PJRT function (or operation) that failed
        function: &'static str,
        /// the `PJRT_Error_Code` (abseil status code)
        code: i32,
        /// the plugin's message
        message: String,
    },
    /// A node the lowering to StableHLO does not support.
    #[error("cloud-tpu cannot lower node '{node}' ({op}): {msg}")]
    Unsupported {
        /// node name (or `#index`)
        node: String,
        /// op name
        op: String,
        /// what is not supported
        msg: String,
    },
    /// The caller's inputs do not match the compiled program.
    #[error("input mismatch: {0}")]
    InputMismatch(String),
    /// A value of the graph is larger than this process may allocate (see `tpu_sdk_core::limits`).
    #[error("resource limit: {0}")]
    ResourceLimit(String),
    /// Anything else that is inconsistent (a bug in the caller or an unexpected plugin answer).
    #[error("{0}")]
    Invalid(String),
}

impl Error {
    /// Renames the failing function of a PJRT error (an event's error belongs to the operation that made it).
    pub(crate) fn in_function(self, function: &'static str) -> Error {
        match self {
            Error::Pjrt { code, message, .. } => Error::Pjrt { function, code, message },
            other => other,
        }
    }
}

/// Result alias of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl From<Error> for tpu_sdk_core::Error {
    /// Maps onto core's error kinds so the CLI's exit codes hold: lowering gaps are "unsupported", input mismatches
    /// are input mismatches, and everything about the plugin and the device (no plugin found, a compile or run
    /// that failed) is a device error whose message says what to do.
    fn from(e: Error) -> tpu_sdk_core::Error {
        match e {
            Error::Unsupported { node, op, msg } => {
                tpu_sdk_core::Error::Unsupported(format!("cloud-tpu cannot lower node '{node}' ({op}): {msg}"))
            }
            Error::InputMismatch(m) => tpu_sdk_core::Error::InputMismatch(m),
            Error::ResourceLimit(m) => tpu_sdk_core::Error::ResourceLimit(m),
            other => tpu_sdk_core::Error::Device(other.to_string()),
        }
    }
}
