//! TFLite export of f32 core graphs: the NCHW core IR into an NHWC TFLite flatbuffer.
//!
//! Every IR value is written as one TFLite tensor in some *layout*: a permutation `p` of its dimensions
//! (the tensor's dimension `i` is the IR value's dimension `p[i]`). Layout-sensitive ops (convolutions,
//! pooling, resize) produce and consume NHWC (`p = [0, 2, 3, 1]`); elementwise ops keep the layout of their
//! inputs; ops whose meaning depends on element order (reshape, flatten, gather...) need the IR layout, and
//! a `TRANSPOSE` is inserted only where a value is needed in a layout it does not have. Constants are
//! permuted at export time (weights OIHW → OHWI, depthwise C1HW → 1HWC, broadcast operands), so a CNN
//! exports with transposes only where the model itself reshapes a feature map. A 4-D graph input that
//! feeds a layout-sensitive op becomes an NHWC input tensor; graph outputs keep the IR layout.
//!
//! Quantized graphs (from `tpu_sdk_core::quant`: I8 values with [`QuantParams`](tpu_sdk_core::ir::QuantParams), I8 weights, I32 biases)
//! export as int8 TFLite models: every tensor carries its quantization (per-axis parameters get the
//! `quantized_dimension` of the TFLite layout: OHWI filters axis 0, 1HWC depthwise filters axis 3), ops get
//! the versions TFLite gives their int8 kernels, `QuantizeLinear`/`DequantizeLinear` become
//! `QUANTIZE`/`DEQUANTIZE`, and the model records its `min_runtime_version` as TFLite's converter does.
//!
//! The export is split by concern: [`export`] walks the graph; `node` names every op (exported by an op-family
//! writer: `nn`, `math`, `array`, `quant`, `recurrent`, or refused); `layout` tracks the permutation each tensor holds its
//! value in; `tensors` writes tensors and buffers; `operators` writes operator codes and versions; `checks`
//! makes LiteRT's `Prepare` checks on the finished model, so that no int8 file LiteRT refuses is written.

mod array;
mod checks;
mod control_flow;
mod layout;
mod loop_rows;
mod math;
mod nn;
mod node;
mod operators;
mod quant;
mod recurrent;
mod tensors;

use std::collections::HashMap;

use tpu_sdk_core::format::tflite::builder::*;
use tpu_sdk_core::ir::{Graph, ValueId};
use tpu_sdk_core::{Error, Result};

use layout::{ident, permuted, NHWC};

/// Options of [`export`].
#[derive(Clone, Debug)]
pub struct ExportOptions {
    /// Write 4-D inputs that feed convolutions/pooling/resize as NHWC tensors (default); otherwise inputs
    /// keep the IR (NCHW) layout and a `TRANSPOSE` follows them.
    pub nhwc_inputs: bool,
    /// Model description written into the file.
    pub description: String,
}

impl Default for ExportOptions {
    fn default() -> Self {
        ExportOptions { nhwc_inputs: true, description: "exported by tpu-sdk".into() }
    }
}

/// A graph input as written: its name and TFLite shape, and the permutation from the IR shape
/// (`tflite_shape[i] = ir_shape[perm[i]]`).
#[derive(Clone, Debug, PartialEq)]
pub struct ExportedInput {
    /// Tensor name.
    pub name: String,
    /// Shape in the file.
    pub shape: Vec<usize>,
    /// Permutation from the IR layout.
    pub perm: Vec<usize>,
}

/// An exported model.
#[derive(Clone, Debug)]
pub struct Exported {
    /// The `.tflite` bytes.
    pub bytes: Vec<u8>,
    /// Inputs in order, with their layouts (outputs always keep the IR layout).
    pub inputs: Vec<ExportedInput>,
}

/// Exports an f32 graph (static shapes) to a TFLite flatbuffer.
pub fn export(g: &Graph, opts: &ExportOptions) -> Result<Exported> {
    // TFLite has no hard sigmoid, batch norm, erf, LayerNorm or InstanceNorm (and no int8 DIV): the same
    // rewrites quantization applies (Mul and Add, with a clip for the hard sigmoid; GELU, MEAN/RSQRT
    // decompositions, multiplication by the reciprocal) make float graphs exportable too.
    let prepared;
    let g = if tpu_sdk_core::quant::prepare::needed(g) {
        let mut c = g.clone();
        tpu_sdk_core::quant::prepare(&mut c);
        prepared = c;
        &prepared
    } else {
        g
    };
    // a Loop's scan outputs stacked by a WHILE (their length known only at run time): shape [0, ...slice]
    let shaped;
    let (g, rows) = match loop_rows::with_row_shapes(g)? {
        Some((c, rows)) => {
            shaped = c;
            (&shaped, rows)
        }
        None => (g, Default::default()),
    };
    let mut ex = Ex { g, m: ModelT::default(), codes: HashMap::new(), layouts: HashMap::new(), copies: HashMap::new(), cur: 0, rows };
    ex.m.version = 3;
    ex.m.description = Some(opts.description.clone());
    ex.m.buffers.push(BufferT::default());
    ex.m.subgraphs.push(SubGraphT { name: Some("main".into()), ..Default::default() });
    if let Some(v) = (0..g.values.len()).find(|&v| g.values[v].dynamic && !ex.rows.contains(&ValueId(v))) {
        return Err(control_flow::dynamic_value(g, ValueId(v)));
    }
    let mut inputs = Vec::new();
    for &i in &g.inputs {
        let v = g.value(i);
        let perm = if opts.nhwc_inputs && v.shape.len() == 4 && ex.wants_nhwc(i) { NHWC.to_vec() } else { ident(v.shape.len()) };
        let shape = permuted(&v.shape, &perm);
        let t = ex.tensor(&v.name, &shape, v.dtype)?;
        ex.set_quant(t, i, &perm);
        ex.sg().inputs.push(t);
        ex.layouts.insert(i, (t, perm.clone()));
        inputs.push(ExportedInput { name: v.name.clone(), shape, perm });
    }
    ex.nodes()?;
    for &o in &g.outputs {
        let r = g.value(o).shape.len();
        let t = ex.get(o, &ident(r))?;
        ex.name_output(t, &g.value(o).name);
        ex.sg().outputs.push(t);
    }
    let sig = SignatureDefT {
        inputs: ex.sg_ref().inputs.iter().map(|&t| (ex.sg_ref().tensors[t as usize].name.clone(), t as u32)).collect(),
        outputs: ex.sg_ref().outputs.iter().map(|&t| (ex.sg_ref().tensors[t as usize].name.clone(), t as u32)).collect(),
        signature_key: "serving_default".into(),
        subgraph_index: 0,
    };
    ex.m.signature_defs.push(sig);
    ex.min_runtime_version();
    checks::check(&ex.m)?;
    Ok(Exported { bytes: ex.m.to_bytes(), inputs })
}

/// The export state: the graph, the model being written, and where each IR value's tensors are.
struct Ex<'g> {
    g: &'g Graph,
    m: ModelT,
    codes: HashMap<i32, (u32, i32)>,
    /// IR value → (tensor, layout).
    layouts: HashMap<ValueId, (i32, Vec<usize>)>,
    /// (IR value, layout) → tensor, for transposed copies and permuted constants.
    copies: HashMap<(ValueId, Vec<usize>), i32>,
    /// The subgraph being written: 0, or that of a control-flow region (`g` is then the region's graph).
    cur: usize,
    /// Values of the main graph whose rows a WHILE stacks at run time (`loop_rows.rs`): shape `[0, ...]` in
    /// the IR, signature `[-1, ...]` in the file.
    rows: std::collections::HashSet<ValueId>,
}

impl<'g> Ex<'g> {
    fn sg(&mut self) -> &mut SubGraphT {
        &mut self.m.subgraphs[self.cur]
    }
    fn sg_ref(&self) -> &SubGraphT {
        &self.m.subgraphs[self.cur]
    }

    /// Writes the nodes of `g` (those not folded to constants) in order.
    fn nodes(&mut self) -> Result<()> {
        let g = self.g;
        for (k, n) in g.nodes.iter().enumerate() {
            if n.outputs.iter().all(|o| g.value(*o).constant.is_some()) {
                continue; // folded at import
            }
            self.node(k).map_err(|e| match e {
                Error::Unsupported(m) if m.starts_with("TFLite export of node") => Error::Unsupported(m),
                Error::Unsupported(m) => Error::Unsupported(format!("TFLite export of node '{}' ({}): {m}", n.name, n.op.name())),
                other => other,
            })?;
        }
        Ok(())
    }

    fn unsupported(&self, what: impl std::fmt::Display) -> Error {
        Error::Unsupported(what.to_string())
    }
}
