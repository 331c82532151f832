//! TFLite import: a `.tflite` flatbuffer (schema v3) into the core IR.
//!
//! TFLite is NHWC; the core IR is NCHW. Tensors keep their TFLite layout (graph inputs and outputs have the
//! file's shapes and names), and the layout-sensitive ops (convolutions, pooling, resize, depth/space) are
//! wrapped: the input goes through a `Transpose` to NCHW, the op runs in NCHW with its weights permuted
//! as constants (OHWI → OIHW, depthwise 1HWC → C1HW), and the result is transposed back. The optimisation
//! passes cancel back-to-back transposes.
//!
//! Every tensor the file declares is checked against what the IR computes for it, so a mis-translated op
//! fails at import with the tensor's name rather than producing wrong numbers (a dimension its shape
//! signature leaves free, -1, which the converter records as 1, fits any size).
//!
//! Models converted with a free batch dimension keep their `tf.shape` arithmetic (SHAPE → STRIDED_SLICE →
//! PACK → RESHAPE, RANGE, UNSORTED_SEGMENT_PROD...): the inputs take the file's shape (batch 1), each node
//! is inferred as it is added, and those chains fold to constants.
//!
//! Float models (f32, and f16 weights behind `DEQUANTIZE`, which are folded into f32 constants) import
//! fully. Quantized (int8) models import into the representation described in
//! `runtime::kernels::int8`: the ordinary ops on I8 values that carry their tensors' `QuantParams`, the
//! intermediate values an op creates (the NCHW result before the transpose back, the value before a fused
//! activation) carrying the output tensor's parameters. `QUANTIZE` of a float tensor is
//! `QuantizeLinear { rounding: TfLite }`, of an integer tensor a requantizing `QuantizeLinear`; `DEQUANTIZE`
//! is `DequantizeLinear`. Which quantized ops the CPU runtime runs is decided when a session is built.

mod importer;
mod ops;
#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::path::Path;

use crate::format::tflite::schema::{get, parse_model, to_vec};
use crate::ir::{verify, Graph};
use crate::{Error, Result};
use importer::Importer;

/// Options for [`load`].
#[derive(Clone, Debug, Default)]
pub struct ImportOptions {
    /// Full shapes for graph inputs, by tensor name; needed for inputs with unknown (-1) dimensions, and
    /// allowed for any input (the file's intermediate shapes are then not checked).
    pub input_shapes: HashMap<String, Vec<usize>>,
}

/// Loads a `.tflite` file.
pub fn load(path: impl AsRef<Path>, opts: &ImportOptions) -> Result<Graph> {
    let path = path.as_ref();
    let bytes = std::fs::read(path).map_err(|e| Error::Io { path: path.display().to_string(), source: e })?;
    load_bytes(&bytes, opts)
}

/// Imports a TFLite model from its bytes.
pub fn load_bytes(bytes: &[u8], opts: &ImportOptions) -> Result<Graph> {
    let model = parse_model(bytes).map_err(|e| Error::InvalidModel(e.to_string()))?;
    let subgraphs = model.subgraphs().ok_or_else(|| Error::InvalidModel("the model has no subgraphs".into()))?;
    if subgraphs.is_empty() {
        return Err(Error::InvalidModel("the model has no subgraphs".into()));
    }
    let sg = subgraphs.get(0);
    let n_tensors = sg.tensors().map(|t| t.len()).unwrap_or(0);
    let name = sg.name().filter(|s| !s.is_empty()).or(model.description()).unwrap_or("tflite").to_string();
    let mut imp = Importer {
        model,
        file: bytes,
        sg,
        g: Graph::new(name),
        vals: vec![None; n_tensors],
        check_shapes: true,
        op_index: 0,
        op_name: String::new(),
        stack: vec![0],
        keep_float: false,
    };
    imp.import_inputs(opts)?;
    let ops = sg.operators();
    for i in 0..ops.map(|o| o.len()).unwrap_or(0) {
        let op = get(ops, i).ok_or_else(|| Error::InvalidModel(format!("operator #{i} is missing")))?;
        imp.import_op(i, op)?;
    }
    for t in to_vec(sg.outputs()) {
        let v = imp.value(t)?;
        imp.g.outputs.push(v);
    }
    verify::verify(&imp.g)?;
    Ok(imp.g)
}

/// A TFLite file's interface as tflite_runtime's Interpreter reports it: the first subgraph's input and output
/// tensor numbers with their names (as the importer names the values), and the signature defs.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FileInterface {
    /// (tensor number, name) of each input of the first subgraph, in order.
    pub inputs: Vec<(u32, String)>,
    /// (tensor number, name) of each output of the first subgraph, in order.
    pub outputs: Vec<(u32, String)>,
    /// The signature defs, in file order.
    pub signatures: Vec<SignatureDef>,
}

/// One SavedModel signature of a TFLite file: names for tensors of a subgraph.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SignatureDef {
    /// `signature_key` (`serving_default` for TF's converter).
    pub key: String,
    /// The subgraph the tensor numbers belong to.
    pub subgraph_index: u32,
    /// (signature name, tensor number) of each input.
    pub inputs: Vec<(String, u32)>,
    /// (signature name, tensor number) of each output.
    pub outputs: Vec<(String, u32)>,
}

/// Reads a `.tflite` file's [`FileInterface`] without importing it (the file is verified first).
pub fn file_interface(bytes: &[u8]) -> Result<FileInterface> {
    let model = parse_model(bytes).map_err(|e| Error::InvalidModel(e.to_string()))?;
    let sg = model.subgraphs().filter(|s| !s.is_empty()).map(|s| s.get(0)).ok_or_else(|| Error::InvalidModel("the model has no subgraphs".into()))?;
    let tensors = sg.tensors();
    let named = |list: Vec<i32>, what: &str| -> Result<Vec<(u32, String)>> {
        list.into_iter()
            .map(|t| {
                let i = u32::try_from(t).map_err(|_| Error::InvalidModel(format!("{what} tensor #{t} does not exist")))?;
                let tensor = get(tensors, i as usize).ok_or_else(|| Error::InvalidModel(format!("{what} tensor #{t} does not exist")))?;
                Ok((i, tensor.name().filter(|s| !s.is_empty()).map(str::to_string).unwrap_or_else(|| format!("tensor_{t}"))))
            })
            .collect()
    };
    let maps = |v: Option<flatbuffers::Vector<'_, flatbuffers::ForwardsUOffset<crate::format::tflite::schema::TensorMap<'_>>>>| -> Vec<(String, u32)> {
        v.map(|v| v.iter().map(|m| (m.name().unwrap_or("").to_string(), m.tensor_index())).collect()).unwrap_or_default()
    };
    let signatures = model
        .signature_defs()
        .map(|v| {
            v.iter()
                .map(|d| SignatureDef {
                    key: d.signature_key().unwrap_or("").to_string(),
                    subgraph_index: d.subgraph_index(),
                    inputs: maps(d.inputs()),
                    outputs: maps(d.outputs()),
                })
                .collect()
        })
        .unwrap_or_default();
    Ok(FileInterface { inputs: named(to_vec(sg.inputs()), "input")?, outputs: named(to_vec(sg.outputs()), "output")?, signatures })
}

/// The first subgraph's inputs as the file declares them, -1 in `shape_signature` as a free dimension; reads
/// the model without importing it.
pub fn declared_inputs(path: &Path) -> Result<Vec<super::DeclaredInput>> {
    let bytes = std::fs::read(path).map_err(|e| Error::Io { path: path.display().to_string(), source: e })?;
    let model = parse_model(&bytes).map_err(|e| Error::InvalidModel(e.to_string()))?;
    let sg = model.subgraphs().filter(|s| !s.is_empty()).map(|s| s.get(0)).ok_or_else(|| Error::InvalidModel("the model has no subgraphs".into()))?;
    let tensors = sg.tensors();
    to_vec(sg.inputs())
        .into_iter()
        .map(|t| {
            let tensor = usize::try_from(t).ok().and_then(|i| get(tensors, i)).ok_or_else(|| Error::InvalidModel(format!("input tensor #{t} does not exist")))?;
            let shape = to_vec(tensor.shape());
            let signature = to_vec(tensor.shape_signature());
            let dims = (0..shape.len())
                .map(|k| match signature.get(k) {
                    Some(&s) if s < 0 => super::DeclaredDim::Free,
                    _ => usize::try_from(shape[k]).map_or(super::DeclaredDim::Free, super::DeclaredDim::Fixed),
                })
                .collect();
            // Named as the importer names it.
            let name = tensor.name().filter(|s| !s.is_empty()).map(str::to_string).unwrap_or_else(|| format!("tensor_{t}"));
            Ok(super::DeclaredInput { name, dims: Some(dims) })
        })
        .collect()
}
