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

mod broadcast;
mod cast;
mod conv;
mod dispatch;
mod elementwise;
mod gather;
pub mod int8;
mod matmul;
mod normalize;
mod numeric;
mod packed_matmul;
mod pool;
mod quantize;
mod recurrent;
mod reduce;
mod layout;
mod resize;
mod softmax;
mod tensor_ops;

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
    /// u8 workspace (int8 activations packed for the VNNI GEMM).
    pub u8: Vec<u8>,
}

impl Scratch {
    /// Computes in f32 for a narrow float type (f16/bf16): widens `v` into the f32 workspace, runs
    /// `f(input, output)` with a zeroed output of `out_shape`'s size, and narrows that into `out`.
    pub(crate) fn via_f32<T: crate::ir::Element>(
        &mut self,
        v: &[T],
        out_shape: &[usize],
        out: &mut Tensor,
        f: impl FnOnce(&[f32], &mut [f32]),
    ) {
        let n = v.len();
        let no: usize = out_shape.iter().product();
        let buf = &mut self.f32;
        buf.clear();
        buf.resize(n + no, 0.0);
        let (xs, os) = buf.split_at_mut(n);
        for (d, &s) in xs.iter_mut().zip(v) {
            *d = s.to_f64() as f32;
        }
        f(xs, os);
        for (d, &s) in out.reset::<T>(out_shape).iter_mut().zip(os.iter()) {
            *d = T::from_f64(s as f64);
        }
    }
}

/// The input whose buffer `op` can update in place to make its output 0 (same type and shape), if any.
pub fn updates_in_place(op: &Op) -> Option<usize> {
    matches!(op, Op::TensorScatter { .. }).then_some(0)
}

/// Runs an op of [`updates_in_place`] with `out` already holding that input's data (its input slot is not read).
pub fn run_in_place(op: &Op, inputs: &[Option<&Tensor>], out: &mut Tensor) -> Result<(), String> {
    match op {
        Op::TensorScatter { axis, circular } => gather::tensor_scatter_into(*axis, *circular, out, inputs),
        other => Err(format!("{} does not run in place", other.name())),
    }
}

/// A kernel prepared once for one node when a session is planned (what does not depend on the input data:
/// re-laid weights, multipliers, tables), run instead of [`eval`]. Integer kernels ([`int8::prepare`]) and
/// float products with constant weights ([`prepare_float`]) are the two kinds.
pub trait PreparedKernel: Send + Sync + std::fmt::Debug {
    /// Runs the node: `inputs` as in [`eval`], one tensor per node output.
    fn run(&self, inputs: &[Option<&Tensor>], outputs: &mut [Tensor], scratch: &mut Scratch) -> Result<(), String>;
    /// True when the kernel holds input `k` itself (re-laid at preparation) and never reads the tensor given.
    fn holds_input(&self, _k: usize) -> bool {
        false
    }
}

/// The prepared float kernel of node `n` of `g`, if it has one: MatMul and Gemm whose B is a constant f32
/// matrix get it packed once ([`packed_matmul`]), and so do f32 convolutions with constant weights (but depthwise).
pub fn prepare_float(g: &crate::ir::Graph, n: usize) -> Option<Box<dyn PreparedKernel>> {
    packed_matmul::prepare(g, n).or_else(|| conv::prepare_packed(g, n))
}

/// Fetches input `i` or fails with a message.
pub fn input<'a>(inputs: &[Option<&'a Tensor>], i: usize) -> Result<&'a Tensor, String> {
    inputs.get(i).copied().flatten().ok_or_else(|| format!("missing required input {i}"))
}

/// The first output of a node, or an error naming the op.
fn first<'o>(outputs: &'o mut [Tensor], op: &Op) -> Result<&'o mut Tensor, String> {
    outputs.first_mut().ok_or_else(|| format!("{} needs an output", op.name()))
}

/// Runs any op: every variant names its kernel, so a new op does not compile until it has one.
pub fn eval(op: &Op, inputs: &[Option<&Tensor>], outputs: &mut [Tensor], scratch: &mut Scratch) -> Result<(), String> {
    use Op::*;
    match op {
        Conv(a) => conv::conv(a, inputs, outputs, scratch),
        ConvTranspose(a) => conv::conv_transpose(a, inputs, outputs, scratch),
        &Gemm { alpha, beta, trans_a, trans_b, activation } => matmul::gemm(alpha, beta, trans_a, trans_b, activation, inputs, outputs),
        MatMul => matmul::matmul(inputs, outputs),
        Binary(b, act) => elementwise::binary(*b, *act, input(inputs, 0)?, input(inputs, 1)?, first(outputs, op)?),
        Unary(u) => elementwise::unary(*u, input(inputs, 0)?, first(outputs, op)?),
        ClipDynamic => elementwise::clip_dynamic(inputs, first(outputs, op)?),
        Variadic(b) => elementwise::variadic(Some(*b), inputs, first(outputs, op)?),
        VariadicMean => elementwise::variadic(None, inputs, first(outputs, op)?),
        Where => elementwise::where_op(input(inputs, 0)?, input(inputs, 1)?, input(inputs, 2)?, first(outputs, op)?),
        Cast { to } => cast::cast(input(inputs, 0)?, *to, first(outputs, op)?),
        MaxPool(a) => pool::run_max_pool(a, inputs, outputs, scratch),
        AveragePool(a) => pool::window_pool("AveragePool", a, None, inputs, outputs, scratch),
        LpPool(a, p) => pool::window_pool("LpPool", a, Some(*p), inputs, outputs, scratch),
        GlobalAveragePool => pool::global_pool(false, inputs, outputs),
        GlobalMaxPool => pool::global_pool(true, inputs, outputs),
        BatchNorm { epsilon } => normalize::batch_norm(*epsilon, inputs, outputs, scratch),
        InstanceNorm { epsilon } => normalize::instance_norm(*epsilon, inputs, outputs, scratch),
        GroupNorm { num_groups, epsilon } => normalize::group_norm(*num_groups, *epsilon, inputs, outputs, scratch),
        LayerNorm { axis, epsilon } => normalize::layer_norm_op(*axis, *epsilon, inputs, outputs, scratch),
        &Lrn { alpha, beta, bias, size } => normalize::lrn(alpha, beta, bias, size, inputs, outputs, scratch),
        LpNorm { axis, p } => normalize::lp_norm_op(*axis, *p, inputs, outputs, scratch),
        Softmax { axis } => softmax::eval(softmax::Kind::Soft, *axis, inputs, outputs),
        LogSoftmax { axis } => softmax::eval(softmax::Kind::Log, *axis, inputs, outputs),
        Hardmax { axis } => softmax::eval(softmax::Kind::Hard, *axis, inputs, outputs),
        Reduce { op, axes, keepdims, noop_with_empty_axes } => {
            reduce::reduce(*op, axes.as_deref(), *keepdims, *noop_with_empty_axes, inputs, outputs, scratch)
        }
        &ArgReduce { max, axis, keepdims, select_last_index } => reduce::arg_reduce_op(max, axis, keepdims, select_last_index, inputs, outputs),
        CumSum { exclusive, reverse } => reduce::cumsum_op(*exclusive, *reverse, inputs, outputs),
        TopK { axis, largest, .. } => reduce::topk(*axis, *largest, inputs, outputs),
        Reshape { allowzero } => layout::run_reshape(*allowzero, inputs, outputs),
        Flatten { axis } => layout::run_flatten(*axis, inputs, outputs),
        Squeeze { axes } => layout::run_squeeze(axes.as_deref(), inputs, outputs),
        Unsqueeze { axes } => layout::run_unsqueeze(axes.as_deref(), inputs, outputs),
        Transpose { perm } => layout::run_transpose(perm, inputs, outputs),
        Concat { axis } => layout::run_concat(*axis, inputs, outputs),
        Split { axis, split, num_outputs } => {
            layout::eval_split(input(inputs, 0)?, *axis, split.as_deref(), inputs.get(1).copied().flatten(), *num_outputs, outputs)
        }
        Slice => layout::run_slice(inputs, outputs),
        Pad { mode } => layout::run_pad(*mode, inputs, outputs),
        Expand => layout::run_expand(inputs, outputs),
        Tile => layout::run_tile(inputs, outputs),
        Identity => layout::run_identity(inputs, outputs),
        DepthToSpace { blocksize, crd } => layout::run_depth_to_space(*blocksize, *crd, inputs, outputs),
        SpaceToDepth { blocksize } => layout::run_space_to_depth(*blocksize, inputs, outputs),
        Shape { start, end } => tensor_ops::run_shape(*start, *end, inputs, outputs),
        Size => tensor_ops::run_size(inputs, outputs),
        ConstantOfShape { value } => tensor_ops::run_constant_of_shape(value, inputs, outputs),
        Range => tensor_ops::run_range(inputs, outputs),
        Trilu { upper } => tensor_ops::run_trilu(*upper, inputs, outputs),
        OneHot { axis } => tensor_ops::run_onehot(*axis, inputs, outputs),
        EyeLike { dtype, k } => tensor_ops::run_eye_like(*dtype, *k, inputs, outputs),
        NonZero => tensor_ops::run_nonzero(inputs, outputs),
        ReverseSequence { batch_axis, time_axis } => tensor_ops::run_reverse_sequence(*batch_axis, *time_axis, inputs, outputs),
        Gather { axis } => gather::gather_op(*axis, inputs, outputs),
        GatherElements { axis } => gather::gather_elements_op(*axis, inputs, outputs),
        GatherNd { batch_dims } => gather::gather_nd_op(*batch_dims, inputs, outputs),
        ScatterElements { axis, reduction } => gather::scatter_elements_op(*axis, *reduction, inputs, outputs),
        ScatterNd { reduction } => gather::scatter_nd_op(*reduction, inputs, outputs),
        TensorScatter { axis, circular } => gather::tensor_scatter_op(*axis, *circular, inputs, outputs),
        Resize(a) => resize::eval(a, inputs, outputs, scratch),
        DequantizeLinear { axis } => quantize::eval(None, *axis, inputs, outputs),
        &QuantizeLinear { axis, to, rounding } => quantize::eval(Some((to, rounding)), axis, inputs, outputs),
        If(_) | Loop(_) | Scan(_) => super::control_flow::eval(op, inputs, outputs),
        Rnn(a) => recurrent::rnn(a, inputs, outputs),
    }
}

/// Helpers of the kernel tests.
#[cfg(test)]
pub(crate) mod test_util {
    use super::{eval, Scratch};
    use crate::ir::{Op, Tensor};

    /// Runs `op` into `n_out` fresh outputs, panicking on an error.
    pub(crate) fn run(op: Op, inputs: &[Option<&Tensor>], n_out: usize) -> Vec<Tensor> {
        let mut outs = vec![Tensor::default(); n_out];
        eval(&op, inputs, &mut outs, &mut Scratch::default()).unwrap();
        outs
    }
}
