//! The op dispatch of the export: every op is named, exported by its family's writer or refused, so that a
//! new op is a compile error until the export decides.

use tpu_sdk_core::ir::{Node, Op, ValueId};
use tpu_sdk_core::{Error, Result};

use super::Ex;

/// Input `i` of `n`, which the op needs.
pub(super) fn required(n: &Node, i: usize) -> Result<ValueId> {
    n.input(i).ok_or_else(|| Error::InvalidModel(format!("node '{}' lacks input {i}", n.name)))
}

impl Ex<'_> {
    /// Writes node `k` of the graph.
    pub(super) fn node(&mut self, k: usize) -> Result<()> {
        let g = self.g;
        let n = &g.nodes[k];
        if n.op.activation().is_some_and(|a| a.clamp_bounds().is_none()) {
            // SiLU is fused only by the CPU runtime's own planning; a graph that holds it did not come from
            // the optimisation passes the export runs after
            return Err(Error::Unsupported(format!("node '{}': a fused {:?} activation has no TFLite form", n.name, n.op.activation())));
        }
        match &n.op {
            Op::Identity => self.identity(n),
            Op::Conv(a) => self.conv(n, a),
            Op::ConvTranspose(a) => self.conv_transpose(n, a),
            Op::MaxPool(a) => self.pool(n, a, true),
            Op::AveragePool(a) => self.pool(n, a, false),
            Op::GlobalAveragePool => self.global_pool(n, false),
            Op::GlobalMaxPool => self.global_pool(n, true),
            Op::Gemm { alpha, beta, trans_a, trans_b, activation } => self.gemm(n, *alpha, *beta, *trans_a, *trans_b, *activation),
            Op::MatMul => self.matmul(n),
            Op::Binary(bop, activation) => self.binary(n, *bop, *activation),
            Op::Unary(u) => self.unary(n, *u),
            Op::Softmax { axis } => self.softmax(n, *axis, false),
            Op::LogSoftmax { axis } => self.softmax(n, *axis, true),
            Op::Reshape { allowzero: _ } | Op::Flatten { axis: _ } | Op::Squeeze { axes: _ } | Op::Unsqueeze { axes: _ } => self.reshape(n),
            Op::Transpose { perm } => self.transpose(n, perm),
            Op::Concat { axis } => self.concat(n, *axis),
            Op::Split { axis, split: _, num_outputs: _ } => self.split(n, *axis),
            Op::Reduce { op, axes, keepdims, noop_with_empty_axes: _ } => self.reduce(n, *op, axes, *keepdims),
            Op::Pad { mode } => self.pad(n, *mode),
            Op::Resize(a) => self.resize(n, a),
            Op::Slice => self.slice(n),
            Op::Gather { axis } => self.gather(n, *axis),
            Op::Tile => self.tile(n),
            Op::DepthToSpace { blocksize, crd } => self.depth_to_space(n, *blocksize, *crd),
            Op::QuantizeLinear { axis: _, to: _, rounding: _ } => self.quantize(n, true),
            Op::DequantizeLinear { axis: _ } => self.quantize(n, false),
            // No TFLite writer yet.
            Op::ClipDynamic | Op::Variadic(_) | Op::VariadicMean | Op::Where | Op::LpPool(..)
            | Op::BatchNorm { .. } | Op::InstanceNorm { .. } | Op::LayerNorm { .. } | Op::GroupNorm { .. }
            | Op::Lrn { .. } | Op::LpNorm { .. } | Op::Hardmax { .. } | Op::ArgReduce { .. } | Op::CumSum { .. }
            | Op::GatherElements { .. } | Op::GatherNd { .. } | Op::ScatterElements { .. }
            | Op::ScatterNd { .. } | Op::Expand | Op::Shape { .. } | Op::Size | Op::ConstantOfShape { .. }
            | Op::Range | Op::Trilu { .. } | Op::OneHot { .. } | Op::EyeLike { .. }
            | Op::SpaceToDepth { .. } | Op::TopK { .. } | Op::NonZero
            | Op::ReverseSequence { .. } | Op::TensorScatter { .. } => Err(self.unsupported(format!("op {} has no TFLite export yet", n.op.name()))),
            // Control flow: TFLite's IF and WHILE with their regions as subgraphs (LiteRT runs them on the CPU;
            // the Edge TPU runs neither). Scan and a Loop's scan outputs have no TFLite form: `quant::prepare`
            // unrolls those it can (`quant::unroll`).
            Op::If(a) => self.if_op(n, a),
            Op::Loop(a) => self.loop_op(n, a),
            Op::Scan(_) => Err(self.unsupported(format!(
                "op Scan (control flow) has no TFLite export (TFLite's WHILE cannot stack scan outputs in static shapes) and this one could not be unrolled (no scan inputs, a dynamic length, or more than {} nodes unrolled); the CPU and cloud-tpu targets run it",
                tpu_sdk_core::quant::unroll::MAX_UNROLLED_NODES
            ))),
            Op::Rnn(a) => self.rnn(n, a),
            Op::Cast { .. } => self.cast(n),
        }
    }
}
