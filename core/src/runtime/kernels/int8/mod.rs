//! Integer kernels for quantized graphs, bit-exact with LiteRT's builtin optimized kernels (its x86-64 build,
//! no XNNPACK, one thread), checked value by value against LiteRT in `core/tests/tflite_int8.rs`. Where those
//! kernels round differently in their vector and scalar paths (see [`fixedpoint`]), the same split is made.
//!
//! # The quantized-graph representation
//!
//! Quantized ops are the ordinary [`Op`] variants applied to values of dtype `I8` (or `U8`) whose
//! [`Value::quant`](crate::ir::Value) is `Some(QuantParams)`, as in TFLite; layout is NCHW as everywhere
//! in the IR.
//!
//! * Conv weights: constant `I8 [O, I/g, kh, kw]`, symmetric (zero point 0), per channel along axis 0 (also
//!   depthwise, `[C·mult, 1, kh, kw]`) or per tensor; ConvTranspose weights `I8 [I, O, kh, kw]` per channel along
//!   axis 1 (TRANSPOSE_CONV, [`transpose_conv`]). Gemm (`trans_b`) / MatMul weights: constant `I8`,
//!   symmetric, per tensor. Bias: constant `I32` of scale `input_scale × weight_scale[c]`, zero point 0.
//!   A MatMul of two activations (attention) is TFLite's BATCH_MATMUL ([`batch_matmul`]).
//! * Legacy uint8 models (TF1 quantization-aware training, Coral's old `*_quant` models): `U8` activations
//!   with any zero point, and `U8` weights, per tensor, with a non-zero zero point. The convolution and
//!   fully-connected kernels shift u8 data to i8 (`q - 128`, zero point `- 128`, exact since only `q - zp`
//!   enters the arithmetic) and subtract the weight zero point's term (`zw · Σ patch`); the other kernels read
//!   and write u8 directly. Where LiteRT's uint8 kernels compute differently from its int8 ones (uint8
//!   DEPTHWISE_CONV_2D rounds half away from zero in every channel, uint8 CONCATENATION requantizes in f32),
//!   the uint8 arithmetic is used.
//! * Fused activations stay in the op attributes (`ConvAttrs::activation`, `Gemm::activation`,
//!   `Binary(_, act)`) and clamp to the output's quantized range (`CalculateActivationRangeQuantized`).
//!   A `Unary(Relu)` / `Unary(Clip{..})` on a quantized value is TFLite's RELU / RELU6 / RELU_N1_TO_1:
//!   rescale from the input's to the output's parameters, then clamp to the activation range.
//! * Float ↔ int8 at the edges: `QuantizeLinear` / `DequantizeLinear` with constant scale and zero point;
//!   `QuantizeLinear { rounding: QuantRounding::TfLite, .. }` is TFLite's QUANTIZE (`x / scale` in f64,
//!   rounded half away from zero), the default `HalfToEven` is ONNX's.
//! * Requantization (TFLite QUANTIZE int8 → int8): a `QuantizeLinear` whose input is a quantized integer
//!   value; its scale/zero-point inputs are the *output* parameters (the input's come from its `quant`).
//!   It runs TFLite's `Requantize`: `MultiplyByQuantizedMultiplier(x - zp_in, in_scale / out_scale) + zp_out`.
//! * An LSTM (`Op::Rnn`) on int8 X is LiteRT's integer "8x8_16" LSTM: int8 weights, int32 biases, an int16
//!   cell state whose power-of-two scale `initial_c` carries (`recurrent.rs`); Y_c is int16.
//! * Everything else on quantized values (Transpose, Reshape, Slice, Pad with the zero point as the fill
//!   value, Gather, Tile, ...) moves data only and keeps the input's parameters; such ops run the ordinary
//!   kernels, which work on any dtype.
//!
//! # Execution
//!
//! [`prepare`] builds, once per node at `Session::new`, a [`PreparedKernel`] holding everything that does not
//! depend on the input data: multipliers and shifts per channel ([`fixedpoint`]), weights re-laid for the
//! GEMM with their row sums (so the input zero point folds into the bias), lookup tables (LOGISTIC, TANH,
//! GELU, SOFTMAX's exp table). Shape inference (`ir::ops::quantize::infer_quantized`) uses the float rules with the
//! quantized dtypes.
//!
//! On x86-64, CONV_2D's weights are packed for the GEMM ([`packed_gemm`]) and FULLY_CONNECTED's for dot
//! products ([`packed_dot`]), both for AVX-512 VNNI (`vpdpbusd`) where the CPU has it and for AVX2
//! (`vpmaddwd`) otherwise; the output stages run 16 or 8 lanes at a time ([`requantize`]), bit-exact. Elsewhere the portable loops of [`gemm`] run: integer
//! sums in any order are the same, so both give LiteRT's values. Kernels split work across the thread team
//! only above [`team_parallel`]'s threshold.

pub mod fixedpoint;

mod batch_matmul;
mod binary;
mod conv;
#[cfg(target_arch = "x86_64")]
mod depthwise_nhwc;
#[cfg(target_arch = "x86_64")]
mod vnni_planes;
mod gemm;
mod packed_dot;
mod packed_gemm;
mod requantize;
mod pool;
mod recurrent;
mod reduce;
mod softmax;
mod transpose_conv;
mod unary;

pub use crate::ir::ops::quantize::{is_quantized_node, moves_data};
use crate::ir::{Activation, DType, Graph, Op, ReduceOp, Tensor, UnaryOp};

pub use super::PreparedKernel;

/// Per-tensor quantization of an activation: `real = scale · (q - zero_point)`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Qp {
    pub scale: f32,
    pub zp: i32,
}

/// The prepared integer kernel of node `n`, or `None` when the node does not compute on quantized values.
/// Errors say what is not supported (the caller adds the node name).
pub fn prepare(g: &Graph, n: usize) -> Result<Option<Box<dyn PreparedKernel>>, String> {
    if let Some(k) = unary::prepare_dequantize(&Ctx { g, n }) {
        return Ok(Some(k));
    }
    if !is_quantized_node(g, n) {
        return Ok(None);
    }
    let node = &g.nodes[n];
    let cx = Ctx { g, n };
    let unsupported = || format!("{} on quantized (int8) values is not supported by the CPU runtime", node.op.name());
    if let Some(a) = node.op.activation().filter(|a| a.clamp_bounds().is_none()) {
        return Err(format!("{} with a fused {a:?} activation on quantized (int8) values is not supported by the CPU runtime", node.op.name()));
    }
    let k: Box<dyn PreparedKernel> = match &node.op {
        Op::Conv(a) => conv::prepare_conv(&cx, a)?,
        Op::ConvTranspose(a) => transpose_conv::prepare(&cx, a)?,
        &Op::Gemm { alpha, beta, trans_a, trans_b, activation } => conv::prepare_fc(&cx, conv::FcAttrs { trans_a, trans_b, activation, alpha, beta })?,
        Op::MatMul if cx.input(1)?.constant.is_none() => batch_matmul::prepare(&cx)?,
        Op::MatMul => conv::prepare_fc(&cx, conv::FcAttrs::MATMUL)?,
        Op::Binary(b, act) => binary::prepare(&cx, *b, *act)?,
        Op::Unary(u) => unary::prepare(&cx, Some(*u))?,
        Op::QuantizeLinear { .. } => unary::prepare(&cx, None)?,
        Op::AveragePool(a) => pool::prepare(&cx, pool::Pooling::Window { attrs: a, max: false })?,
        Op::MaxPool(a) => pool::prepare(&cx, pool::Pooling::Window { attrs: a, max: true })?,
        Op::GlobalAveragePool => pool::prepare(&cx, pool::Pooling::GlobalMean)?,
        Op::GlobalMaxPool => pool::prepare(&cx, pool::Pooling::GlobalMax)?,
        Op::Reduce { op: ReduceOp::Sum, axes, noop_with_empty_axes, .. } => reduce::prepare(&cx, &reduced_axes(&cx, axes.as_deref(), *noop_with_empty_axes)?)?,
        Op::Reduce { op, axes, keepdims, noop_with_empty_axes } => {
            let axes = reduced_axes(&cx, axes.as_deref(), *noop_with_empty_axes)?;
            pool::prepare(&cx, pool::Pooling::Reduce { op: *op, axes: Some(&axes), keepdims: *keepdims })?
        }
        Op::Concat { axis } => unary::prepare_concat(&cx, *axis)?,
        Op::Softmax { axis } => softmax::prepare(&cx, *axis)?,
        Op::Resize(a) => pool::prepare_resize(&cx, a)?,
        Op::ClipDynamic | Op::Variadic(_) | Op::VariadicMean | Op::Where | Op::Cast { .. } => return Err(unsupported()),
        Op::LpPool(..) | Op::BatchNorm { .. } | Op::InstanceNorm { .. } | Op::LayerNorm { .. } | Op::GroupNorm { .. } => return Err(unsupported()),
        Op::Lrn { .. } | Op::LpNorm { .. } | Op::LogSoftmax { .. } | Op::Hardmax { .. } => return Err(unsupported()),
        Op::ArgReduce { .. } | Op::CumSum { .. } | Op::TopK { .. } | Op::Reshape { .. } | Op::Flatten { .. } => return Err(unsupported()),
        Op::Squeeze { .. } | Op::Unsqueeze { .. } | Op::Transpose { .. } | Op::Split { .. } | Op::Slice | Op::Pad { .. } => return Err(unsupported()),
        Op::Gather { .. } | Op::GatherElements { .. } | Op::GatherNd { .. } | Op::ScatterElements { .. } | Op::ScatterNd { .. } => return Err(unsupported()),
        Op::TensorScatter { .. } => return Err(unsupported()),
        Op::Expand | Op::Tile | Op::Shape { .. } | Op::Size | Op::ConstantOfShape { .. } | Op::Range | Op::Identity => return Err(unsupported()),
        Op::Trilu { .. } | Op::OneHot { .. } | Op::EyeLike { .. } | Op::DepthToSpace { .. } | Op::SpaceToDepth { .. } => return Err(unsupported()),
        Op::NonZero | Op::ReverseSequence { .. } | Op::DequantizeLinear { .. } => return Err(unsupported()),
        Op::If(_) | Op::Loop(_) | Op::Scan(_) => return Err(unsupported()),
        Op::Rnn(a) => recurrent::prepare(&cx, a)?,
    };
    Ok(Some(k))
}

/// What a kernel's `prepare` reads: the graph and the node index.
pub(crate) struct Ctx<'a> {
    pub g: &'a Graph,
    pub n: usize,
}

impl<'a> Ctx<'a> {
    pub fn op(&self) -> &'a Op {
        &self.g.nodes[self.n].op
    }
    fn value(&self, k: usize, output: bool) -> Result<&'a crate::ir::Value, String> {
        let node = &self.g.nodes[self.n];
        let id = if output { node.outputs.get(k).copied() } else { node.input(k) };
        let id = id.ok_or_else(|| format!("{} {k} is missing", if output { "output" } else { "input" }))?;
        Ok(&self.g.values[id.0])
    }
    pub fn input(&self, k: usize) -> Result<&'a crate::ir::Value, String> {
        self.value(k, false)
    }
    pub fn has_input(&self, k: usize) -> bool {
        self.g.nodes[self.n].input(k).is_some()
    }
    pub fn output(&self, k: usize) -> Result<&'a crate::ir::Value, String> {
        self.value(k, true)
    }
    /// Per-tensor parameters of input `k` (or output `k`).
    pub fn qp(&self, k: usize, output: bool) -> Result<Qp, String> {
        let v = self.value(k, output)?;
        let what = if output { "output" } else { "input" };
        let q = v.quant.as_ref().ok_or_else(|| format!("{what} {k} ('{}') has no quantization parameters", v.name))?;
        if q.scale.len() != 1 || q.zero_point.len() != 1 {
            return Err(format!("{what} {k} ('{}') is quantized per axis; only per-tensor parameters are supported here", v.name));
        }
        if !matches!(v.dtype, DType::I8 | DType::U8) {
            return Err(format!("{what} {k} ('{}') is {}, expected i8 or u8", v.name, v.dtype));
        }
        Ok(Qp { scale: q.scale[0], zp: q.zero_point[0] as i32 })
    }
    /// Constant data of input `k`.
    pub fn constant(&self, k: usize) -> Result<&'a Tensor, String> {
        let v = self.input(k)?;
        v.constant.as_ref().ok_or_else(|| format!("input {k} ('{}') must be a constant", v.name))
    }
}

/// The axes a Reduce node reduces: its attribute, else its constant axes input (input 1), else all axes (or
/// none with `noop_with_empty_axes`).
fn reduced_axes(cx: &Ctx, attr: Option<&[usize]>, noop: bool) -> Result<Vec<usize>, String> {
    use crate::ir::ops::reduce::{axes_values, reduce_mask};
    if let Some(a) = attr {
        return Ok(a.to_vec());
    }
    let rank = cx.input(0)?.shape.len();
    let listed = if cx.has_input(1) { Some(axes_values(cx.constant(1)?)?) } else { None };
    let listed = listed.filter(|l| !l.is_empty());
    let mask = reduce_mask(listed.as_deref(), rank, noop)?;
    Ok((0..rank).filter(|&d| mask[d]).collect())
}

/// Whether a kernel should split `work` (multiply-adds or elements touched) across the spinning team
/// ([`crate::runtime::spin_pool`]): with more than one thread and from 32K multiply-adds (a µs or two of one
/// core; 128K until the int8 kernels' VNNI rewrite: at 2 threads on Zen 5 the int8 MobileNetV2 fixture took
/// 0.128 ms with 128K for this and 64K for the planes kernels, 0.122 with 32K and 16K, alternated runs). Through rayon the least work worth a fork-join had been 2M (a futex wake-up per call, often a
/// core that another process holds on a shared machine: the 96x96 int8 MobileNetV2 ran 1.17 ms at 2 threads
/// against 0.77 ms at 1 with a threshold of 128K), so no convolution of that model split at all; the team's
/// workers spin between the operators of a run and take their tasks in well under a microsecond.
pub(crate) fn team_parallel(work: usize) -> bool {
    const TEAM_MIN: usize = 1 << 15;
    work >= crate::runtime::spin_pool::min_work(TEAM_MIN) && crate::runtime::spin_pool::threads() > 1
}

/// [min, max] of an 8-bit dtype.
pub(crate) fn dtype_range(d: DType) -> (i32, i32) {
    if d == DType::U8 {
        (0, 255)
    } else {
        (-128, 127)
    }
}

/// TFLite `CalculateActivationRangeQuantized`: the fused activation's bounds on the output's grid.
pub(crate) fn activation_range(act: Option<Activation>, out: Qp, range: (i32, i32)) -> (i32, i32) {
    let q = |f: f32| out.zp.saturating_add(round_away(f / out.scale) as i32);
    // TFLite clamps with max(·, min) then min(·, max): bounds that cross (a clip below the grid) give max
    // everywhere, which `(min(lo, hi), hi)` reproduces without `clamp`'s min ≤ max precondition
    let (lo, hi) = match act {
        None => range,
        Some(Activation::Relu) => (range.0.max(q(0.0)), range.1),
        Some(Activation::Relu6) => (range.0.max(q(0.0)), range.1.min(q(6.0))),
        Some(Activation::Clip { min, max }) => {
            let lo = if min.is_finite() { range.0.max(q(min)) } else { range.0 };
            let hi = if max.is_finite() { range.1.min(q(max)) } else { range.1 };
            (lo, hi)
        }
        // refused by `prepare`: a quantized node never carries it
        Some(Activation::Silu) => range,
    };
    (lo.min(hi), hi)
}

/// The activation a quantized `Unary` applies as TFLite's RELU family, if it is one.
pub(crate) fn relu_like(u: &UnaryOp) -> Option<Activation> {
    match *u {
        UnaryOp::Relu => Some(Activation::Relu),
        UnaryOp::Clip { min, max } => Some(Activation::Clip { min, max }),
        _ => None,
    }
}

/// `std::round` on f32: half away from zero.
#[inline]
pub(crate) fn round_away(x: f32) -> f32 {
    x.round()
}

/// Reads an 8-bit tensor as i8 or u8 data, widened on the fly by the callers.
pub(crate) enum Bytes<'a> {
    I8(&'a [i8]),
    U8(&'a [u8]),
}

impl<'a> Bytes<'a> {
    pub fn of(t: &'a Tensor, what: &str) -> Result<Bytes<'a>, String> {
        if let Some(v) = t.view::<i8>() {
            Ok(Bytes::I8(v))
        } else if let Some(v) = t.view::<u8>() {
            Ok(Bytes::U8(v))
        } else {
            Err(format!("{what} is {}, expected i8 or u8", t.dtype()))
        }
    }
    /// Number of elements.
    pub fn count(&self) -> usize {
        match self {
            Bytes::I8(v) => v.len(),
            Bytes::U8(v) => v.len(),
        }
    }
    #[inline(always)]
    pub fn get(&self, i: usize) -> i32 {
        match self {
            Bytes::I8(v) => v[i] as i32,
            Bytes::U8(v) => v[i] as i32,
        }
    }
}

/// An 8-bit quantized element type a kernel writes (i8, or u8 of the legacy uint8 models).
pub(crate) trait Q8: Copy + Send + Sync + crate::ir::Element {
    /// From a value already clamped to the type's range.
    fn from_i32(v: i32) -> Self;
}

impl Q8 for i8 {
    #[inline(always)]
    fn from_i32(v: i32) -> i8 {
        v as i8
    }
}

impl Q8 for u8 {
    #[inline(always)]
    fn from_i32(v: i32) -> u8 {
        v as u8
    }
}

/// An 8-bit input as i8 data: i8 as it is; u8 shifted by -128 into `buf` (exact: `q - zp` is unchanged when
/// the zero point is shifted too, see [`shift_of`]).
pub(crate) fn as_i8<'a>(t: &'a Tensor, buf: &'a mut Vec<i8>, what: &str) -> Result<&'a [i8], String> {
    if let Some(v) = t.view::<i8>() {
        return Ok(v);
    }
    let v = t.view::<u8>().ok_or_else(|| format!("{what} is {}, expected i8 or u8", t.dtype()))?;
    buf.clear();
    buf.extend(v.iter().map(|&b| (b ^ 0x80) as i8));
    Ok(buf)
}

/// What [`as_i8`] subtracts from values of `dtype`: 128 for u8, 0 for i8.
pub(crate) fn shift_of(dtype: DType) -> i32 {
    if dtype == DType::U8 {
        128
    } else {
        0
    }
}

/// Writes `f(i)` (already clamped to the dtype's range) into the output, reset to `shape` and `dtype`.
pub(crate) fn write_out(out: &mut Tensor, dtype: DType, shape: &[usize], f: impl Fn(usize) -> i32 + Sync) {
    use crate::runtime::spin_pool::for_each_chunk_mut;
    let n: usize = shape.iter().product();
    const CH: usize = 1 << 14;
    // one chunk (the whole output when small) per task
    let ch = if team_parallel(n) { CH } else { n };
    match dtype {
        DType::U8 => {
            let o = out.reset::<u8>(shape);
            for_each_chunk_mut(o, ch, &|c, oc| oc.iter_mut().enumerate().for_each(|(j, v)| *v = f(c * ch + j) as u8));
        }
        _ => {
            let o = out.reset::<i8>(shape);
            for_each_chunk_mut(o, ch, &|c, oc| oc.iter_mut().enumerate().for_each(|(j, v)| *v = f(c * ch + j) as i8));
        }
    }
}

/// Fetches input `k` at run time.
pub(crate) fn arg<'a>(inputs: &[Option<&'a Tensor>], k: usize) -> Result<&'a Tensor, String> {
    super::input(inputs, k)
}

/// The output tensor slot.
pub(crate) fn out0(outputs: &mut [Tensor]) -> Result<&mut Tensor, String> {
    outputs.first_mut().ok_or_else(|| "the node has no output".to_string())
}

#[cfg(test)]
mod activation_range_tests {
    use super::*;

    #[test]
    fn crossing_bounds_give_the_upper_one_as_tflite_does() {
        // RELU6 on an output whose grid starts above 6: TFLite's max(·, q(0)) then min(·, q(6)) gives q(6)
        let out = Qp { scale: 0.01, zp: -1000 };
        let (lo, hi) = activation_range(Some(Activation::Relu6), out, (-128, 127));
        assert!(lo <= hi, "{lo} {hi}");
        assert_eq!((lo, hi), (-400, -400));
        // a scale so small that q(6) overflows i32 saturates instead of wrapping
        let (lo, hi) = activation_range(Some(Activation::Relu6), Qp { scale: 1e-30, zp: 100 }, (-128, 127));
        assert_eq!((lo, hi), (100, 127));
    }
}
