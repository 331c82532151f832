//! CPU kernels of every op, one file per op family (the shape rules are the IR's: [`crate::ir::ops`]).
//!
//! Each family module exposes the kernels of the ops it owns:
//!
//! * `eval(op, inputs, outputs, scratch) -> Result<(), String>`: computes the outputs. `outputs` has one
//!   tensor per node output, holding whatever that slot held last time (stale data, maybe another dtype);
//!   the kernel calls [`Tensor::reset`] on each output with the output shape, which reuses the storage, so a
//!   steady-state run allocates nothing. Errors are plain messages; the caller adds the node name.
//!
//! Absent optional inputs are `None`. Kernels never panic on bad input: they return an error message.

use crate::ir::{Op, Tensor};

pub mod util;

mod conv;
mod elementwise;
mod gather;
pub mod int8;
mod matmul;
mod normalize;
mod pool;
mod quantize;
mod reduce;
mod resize;
mod shape;
mod softmax;

/// Reusable scratch memory for kernels (im2col buffers and the like), kept by the session between runs.
#[derive(Debug, Default)]
pub struct Scratch {
    /// f32 workspace; kernels resize it as needed.
    pub f32: Vec<f32>,
    /// f64 workspace (f64 convolutions); kernels resize it as needed.
    pub f64: Vec<f64>,
    /// i8 workspace (int8 im2col); kernels resize it as needed.
    pub i8: Vec<i8>,
    /// A second i8 workspace (uint8 inputs shifted to int8).
    pub i8b: Vec<i8>,
}

/// Fetches input `i` or fails with a message.
pub fn input<'a>(inputs: &[Option<&'a Tensor>], i: usize) -> Result<&'a Tensor, String> {
    inputs.get(i).copied().flatten().ok_or_else(|| format!("missing required input {i}"))
}

/// Runs any op.
pub fn eval(op: &Op, inputs: &[Option<&Tensor>], outputs: &mut [Tensor], scratch: &mut Scratch) -> Result<(), String> {
    use Op::*;
    match op {
        Conv(_) | ConvTranspose(_) => conv::eval(op, inputs, outputs, scratch),
        Gemm { .. } | MatMul => matmul::eval(op, inputs, outputs, scratch),
        MaxPool(_) | AveragePool(_) | LpPool(..) | GlobalAveragePool | GlobalMaxPool => {
            pool::eval(op, inputs, outputs, scratch)
        }
        Binary(..) | Unary(_) | ClipDynamic | Variadic(_) | VariadicMean | Where | Cast { .. } => {
            elementwise::eval(op, inputs, outputs, scratch)
        }
        Reduce { .. } | ArgReduce { .. } | CumSum { .. } | TopK { .. } => reduce::eval(op, inputs, outputs, scratch),
        Softmax { .. } | LogSoftmax { .. } | Hardmax { .. } => softmax::eval(op, inputs, outputs, scratch),
        BatchNorm { .. } | InstanceNorm { .. } | LayerNorm { .. } | GroupNorm { .. } | Lrn { .. } | LpNorm { .. } => {
            normalize::eval(op, inputs, outputs, scratch)
        }
        DequantizeLinear { .. } | QuantizeLinear { .. } => quantize::eval(op, inputs, outputs, scratch),
        Gather { .. } | GatherElements { .. } | GatherNd { .. } | ScatterElements { .. } | ScatterNd { .. } => {
            gather::eval(op, inputs, outputs, scratch)
        }
        Resize(_) => resize::eval(op, inputs, outputs, scratch),
        _ => shape::eval(op, inputs, outputs, scratch),
    }
}
