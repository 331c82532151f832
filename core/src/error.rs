//! The error type of tpu-sdk-core.

/// Everything that can go wrong in core, each variant saying what was wrong.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The model file is malformed (truncated, not a model, inconsistent).
    #[error("invalid model: {0}")]
    InvalidModel(String),
    /// An op, attribute or dtype the SDK does not support.
    #[error("unsupported: {0}")]
    Unsupported(String),
    /// A node is ill-formed or its inputs do not fit it.
    #[error("node '{node}' ({op}): {msg}")]
    Node {
        /// node name (or `#index`)
        node: String,
        /// op name
        op: String,
        /// what is wrong
        msg: String,
    },
    /// The caller's inputs do not match the model's inputs.
    #[error("input mismatch: {0}")]
    InputMismatch(String),
    /// An accelerator, its runtime library or its device failed or is missing (the message says what to
    /// install or check).
    #[error("device: {0}")]
    Device(String),
    /// The model would need more memory (or another resource) than this process may use; the message names
    /// what would be allocated, its size, and the limit (see [`crate::limits`]).
    #[error("resource limit: {0}")]
    ResourceLimit(String),
    /// Reading or writing a file failed.
    #[error("{path}: {source}")]
    Io {
        /// file involved
        path: String,
        /// underlying error
        source: std::io::Error,
    },
}

/// Result alias for core.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// A node error.
    pub fn node(node: &crate::ir::Node, index: usize, msg: impl Into<String>) -> Error {
        let name = if node.name.is_empty() { format!("#{index}") } else { node.name.clone() };
        Error::Node { node: name, op: node.op.name(), msg: msg.into() }
    }
}
