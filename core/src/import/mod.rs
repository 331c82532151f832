//! Model importers: files in other formats into the core [`crate::ir::Graph`].

pub mod onnx;
pub mod tflite;

/// A graph input as the model file declares it, before any shape is resolved: what a caller needs to learn
/// which dimensions the file leaves free (to take them from sample data, say).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeclaredInput {
    /// The input's name.
    pub name: String,
    /// Its dimensions; `None` when the file declares no shape at all.
    pub dims: Option<Vec<DeclaredDim>>,
}

/// One dimension of a [`DeclaredInput`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DeclaredDim {
    /// A fixed size.
    Fixed(usize),
    /// A named symbolic size (ONNX `dim_param`), which `--dim NAME=SIZE` can set.
    Symbol(String),
    /// Unknown (ONNX without a value or name, TFLite -1).
    Free,
}
