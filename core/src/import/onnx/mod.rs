//! ONNX import: a `.onnx` file (protobuf `ModelProto`) into the core [`Graph`].
//!
//! The importer decodes the model with hand-written prost messages ([`proto`]), inlines model-local
//! functions, checks (and if needed restores) the topological order of the nodes, turns initializers and
//! `Constant` nodes into constants, resolves the input shapes (declared sizes, `--dim` values for symbolic
//! dimensions, or whole `--input-shape` overrides) and maps every node of the default ONNX domain to a core
//! [`crate::ir::Op`], following the model's opset (attributes that moved to inputs, changed defaults, legacy
//! broadcasting, ...). Shapes are inferred node by node as the graph is built, then the graph is verified.
//!
//! Anything the SDK cannot represent faithfully (an unknown op or domain, an attribute value that changes the
//! semantics, an unsupported element type, control flow) is an [`Error::Unsupported`] naming the node; a
//! malformed file (truncated, inconsistent) is an [`Error::InvalidModel`]. Import never panics on bad input.
//!
//! ```no_run
//! use tpu_sdk_core::import::onnx::{load_with_notes, ImportOptions};
//! let mut opts = ImportOptions::default();
//! opts.dims.insert("batch".into(), 4);
//! let (graph, notes) = load_with_notes("model.onnx".as_ref(), &opts)?;
//! for n in notes {
//!     eprintln!("note: {n}");
//! }
//! # Ok::<(), tpu_sdk_core::Error>(())
//! ```

use std::collections::HashMap;
use std::path::Path;

use crate::ir::Graph;
use crate::{Error, Result};

mod attrs;
mod graph;
mod ops;
pub mod proto;
mod rank;
mod seq;
mod tensor;
#[cfg(test)]
mod tests;

pub use ops::SUPPORTED_OPS;

/// Options of the ONNX importer.
#[derive(Clone, Debug, Default)]
pub struct ImportOptions {
    /// Sizes for named symbolic dimensions (`dim_param`), e.g. `"batch" -> 8`.
    pub dims: HashMap<String, usize>,
    /// Full shapes for graph inputs by name; they override the declared shapes (the rank must match when the
    /// model declares one).
    pub input_shapes: HashMap<String, Vec<usize>>,
    /// Graph inputs bound to fixed values: each becomes a constant (and is no longer an input of the graph), so
    /// what depends only on it folds, and an `If` whose condition it decides keeps only the branch it takes
    /// (silero-vad's sample rate `sr`). A value of another numeric dtype than the input's is converted when
    /// that is exact.
    pub input_values: HashMap<String, crate::ir::Tensor>,
}

/// Loads an ONNX model file into a verified graph with inferred shapes.
///
/// External tensor data is read relative to the model's folder. Symbolic or unknown input dimensions that
/// `opts` does not set are taken as 1 (see [`load_with_notes`] to learn which).
pub fn load(path: &Path, opts: &ImportOptions) -> Result<Graph> {
    load_with_notes(path, opts).map(|(g, _)| g)
}

/// Like [`load`], also returning human-readable notes: which symbolic or unknown input dimensions were
/// assumed to be 1, and options that matched nothing.
pub fn load_with_notes(path: &Path, opts: &ImportOptions) -> Result<(Graph, Vec<String>)> {
    let bytes = std::fs::read(path).map_err(|source| Error::Io { path: path.display().to_string(), source })?;
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    load_bytes_with_notes(&bytes, Some(dir), opts).map_err(|e| match e {
        Error::InvalidModel(m) => Error::InvalidModel(format!("{}: {m}", path.display())),
        other => other,
    })
}

/// The graph inputs the file declares (initializers left out) and which of their dimensions are free; reads the
/// model without importing it.
pub fn declared_inputs(path: &Path) -> Result<Vec<super::DeclaredInput>> {
    use super::DeclaredDim;
    use proto::tensor_shape_proto::dimension::Value as Dim;
    let bytes = std::fs::read(path).map_err(|source| Error::Io { path: path.display().to_string(), source })?;
    let model = graph::decode(&bytes)?;
    let graph = model.graph.as_ref().ok_or_else(|| Error::InvalidModel(format!("{}: the model has no graph", path.display())))?;
    let inits: std::collections::HashSet<&str> = graph.initializer.iter().filter_map(|t| t.name.as_deref()).collect();
    Ok(graph
        .input
        .iter()
        .filter(|vi| !inits.contains(vi.name.as_deref().unwrap_or("")))
        .map(|vi| {
            let shape = match vi.r#type.as_ref().and_then(|t| t.value.as_ref()) {
                Some(proto::type_proto::Value::TensorType(tt)) => tt.shape.as_ref(),
                _ => None,
            };
            let dims = shape.map(|s| {
                s.dim
                    .iter()
                    .map(|d| match d.value {
                        Some(Dim::DimValue(v)) if v >= 0 => usize::try_from(v).map_or(DeclaredDim::Free, DeclaredDim::Fixed),
                        Some(Dim::DimParam(ref p)) if !p.is_empty() && p != "?" => DeclaredDim::Symbol(p.clone()),
                        _ => DeclaredDim::Free,
                    })
                    .collect()
            });
            super::DeclaredInput { name: vi.name.clone().unwrap_or_default(), dims }
        })
        .collect())
}

/// The graph inputs (initializers left out) that the condition of an `If` in the model's main graph depends on,
/// in declaration order: binding them to values ([`ImportOptions::input_values`]) folds those `If`s. Reads the
/// model without importing it.
pub fn if_condition_inputs(path: &Path) -> Result<Vec<String>> {
    let bytes = std::fs::read(path).map_err(|source| Error::Io { path: path.display().to_string(), source })?;
    let model = graph::decode(&bytes)?;
    let Some(graph) = model.graph.as_ref() else { return Ok(Vec::new()) };
    let producer: HashMap<&str, &proto::NodeProto> =
        graph.node.iter().flat_map(|n| n.output.iter().map(move |o| (o.as_str(), n))).collect();
    let mut seen: std::collections::HashSet<&str> = std::collections::HashSet::new();
    let mut todo: Vec<&str> = graph.node.iter().filter(|n| n.op_type.as_deref() == Some("If")).filter_map(|n| n.input.first()).map(|s| s.as_str()).collect();
    while let Some(v) = todo.pop() {
        if v.is_empty() || !seen.insert(v) {
            continue;
        }
        if let Some(n) = producer.get(v) {
            todo.extend(n.input.iter().map(|s| s.as_str()));
        }
    }
    let inits: std::collections::HashSet<&str> = graph.initializer.iter().filter_map(|t| t.name.as_deref()).collect();
    Ok(graph
        .input
        .iter()
        .filter_map(|vi| vi.name.as_deref())
        .filter(|n| seen.contains(n) && !inits.contains(n))
        .map(str::to_string)
        .collect())
}

/// Loads an ONNX model from memory. `base_dir` is the folder external tensor data is read from (`None`:
/// models with external data are rejected).
pub fn load_bytes(bytes: &[u8], base_dir: Option<&Path>, opts: &ImportOptions) -> Result<Graph> {
    load_bytes_with_notes(bytes, base_dir, opts).map(|(g, _)| g)
}

/// Like [`load_bytes`], also returning the notes of [`load_with_notes`].
pub fn load_bytes_with_notes(bytes: &[u8], base_dir: Option<&Path>, opts: &ImportOptions) -> Result<(Graph, Vec<String>)> {
    let model = graph::decode(bytes)?;
    let mut notes = Vec::new();
    let g = graph::import(&model, base_dir, opts, true, &mut notes).map_err(|e| with_assumed_dims(e, &notes))?;
    crate::ir::verify::verify(&g)?;
    Ok((g, notes))
}

/// A node error after some input dimensions were assumed to be 1 says so: the assumption is the likely cause
/// (a 1x1 image that a pooling window does not fit, a batch that does not match a reshape).
fn with_assumed_dims(e: Error, notes: &[String]) -> Error {
    let assumed: Vec<&str> = notes.iter().filter(|n| n.contains("assumed 1")).map(|n| n.as_str()).collect();
    match e {
        Error::Node { node, op, msg } if !assumed.is_empty() => {
            Error::Node { node, op, msg: format!("{msg} (the input shape was partly assumed: {})", assumed.join("; ")) }
        }
        e => e,
    }
}
