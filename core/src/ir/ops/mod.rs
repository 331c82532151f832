//! The operator set of the core IR: the [`Op`] enum, and per op family its attributes, arity and shape/type
//! rule. Attributes are typed fields, never string maps.
//!
//! Semantics follow ONNX (opset 13+) unless a doc comment says otherwise; layouts are NCHW.
//! Inputs are positional; an optional input that is absent is `None` in [`super::Node::inputs`].
//!
//! One file per family holds what the IR knows about its ops; this module holds the enum and the
//! exhaustive dispatch over it ([`arity`], [`infer`], [`fallback_dtypes`]): every `match` lists every
//! variant, so a new op does not compile until each of them decides. The CPU kernels
//! (`runtime::kernels`) compute from the same shape plans, and [`super::infer`] uses [`infer`] for the
//! shapes of a graph.
//!
//! A shape rule reads what is known about the inputs ([`TypeInfo`]: dtype, static shape, the value when
//! it is a constant) and returns the dtype and shape of every output, or [`InferError::Dynamic`] when an
//! output shape depends on a value only known at run time.

pub mod control_flow;
pub mod conv;
pub mod dims;
pub mod elementwise;
pub mod gather;
pub mod layout;
pub mod matmul;
pub mod normalize;
pub mod pool;
pub mod quantize;
pub mod recurrent;
pub mod reduce;
pub mod resize;
pub mod softmax;
pub mod tensor_ops;

pub use control_flow::{IfAttrs, LoopAttrs, ScanAttrs};
pub use conv::{AutoPad, ConvAttrs, ConvTransposeAttrs};
pub use elementwise::{Activation, BinaryOp, UnaryOp};
pub use layout::PadMode;
pub use pool::PoolAttrs;
pub use quantize::QuantRounding;
pub use recurrent::{RnnActivation, RnnAttrs, RnnCell, RnnDirection};
pub use reduce::ReduceOp;
pub use resize::{CoordTransform, NearestMode, ResizeAttrs, ResizeMode};

use super::dtype::DType;
use super::tensor::Tensor;

/// An operator with its typed attributes.
///
/// Tensor-valued parameters that ONNX passes as inputs (Reshape's shape, Slice's starts, ...) stay inputs
/// here; the shape inference reads them when they are constant.
#[derive(Clone, Debug, PartialEq)]
pub enum Op {
    /// Convolution. Inputs: x [N,C,spatial...], w [M,C/group,k...], bias? [M].
    Conv(ConvAttrs),
    /// Transposed convolution. Inputs: x, w [C, M/group, k...], bias?.
    ConvTranspose(ConvTransposeAttrs),
    /// General matrix multiply: alpha * A' * B' + beta * C. Inputs: a, b, c?.
    Gemm {
        /// scale of the product
        alpha: f32,
        /// scale of C
        beta: f32,
        /// transpose A
        trans_a: bool,
        /// transpose B
        trans_b: bool,
        /// fused activation
        activation: Option<Activation>,
    },
    /// Numpy matmul with batch broadcasting.
    MatMul,
    /// Elementwise binary op with broadcasting; `activation` may be fused into Add.
    Binary(BinaryOp, Option<Activation>),
    /// Elementwise unary op.
    Unary(UnaryOp),
    /// Clip with bounds given as optional inputs (x, min?, max?) when they are not constant.
    ClipDynamic,
    /// Variadic elementwise ops over all inputs with broadcasting.
    Variadic(BinaryOp),
    /// Mean of all inputs with broadcasting.
    VariadicMean,
    /// Where(cond, x, y).
    Where,
    /// Max pooling.
    MaxPool(PoolAttrs),
    /// Average pooling.
    AveragePool(PoolAttrs),
    /// Lp pooling.
    LpPool(PoolAttrs, u32),
    /// Global average pooling over all spatial dims.
    GlobalAveragePool,
    /// Global max pooling.
    GlobalMaxPool,
    /// Inference batch norm. Inputs: x, scale, bias, mean, var.
    BatchNorm {
        /// variance epsilon
        epsilon: f32,
    },
    /// Instance normalization. Inputs: x, scale, bias.
    InstanceNorm {
        /// epsilon
        epsilon: f32,
    },
    /// Layer normalization over axes [axis, rank). Inputs: x, scale, bias?.
    LayerNorm {
        /// first normalized axis (normalised, non-negative)
        axis: usize,
        /// epsilon
        epsilon: f32,
    },
    /// Group normalization. Inputs: x, scale[C], bias[C].
    GroupNorm {
        /// number of groups
        num_groups: usize,
        /// epsilon
        epsilon: f32,
    },
    /// Local response normalization across channels.
    Lrn {
        /// alpha
        alpha: f32,
        /// beta
        beta: f32,
        /// bias
        bias: f32,
        /// window size
        size: usize,
    },
    /// Lp normalization along an axis.
    LpNorm {
        /// axis (non-negative)
        axis: usize,
        /// 1 or 2
        p: u32,
    },
    /// Softmax along one axis (opset 13 semantics).
    Softmax {
        /// axis (non-negative)
        axis: usize,
    },
    /// LogSoftmax along one axis.
    LogSoftmax {
        /// axis (non-negative)
        axis: usize,
    },
    /// Hardmax along one axis.
    Hardmax {
        /// axis (non-negative)
        axis: usize,
    },
    /// Reduction. Inputs: x, axes? (when not an attribute).
    Reduce {
        /// which reduction
        op: ReduceOp,
        /// reduced axes (non-negative, sorted); `None` means from input 1 or all axes
        axes: Option<Vec<usize>>,
        /// keep reduced dims as size 1
        keepdims: bool,
        /// with no axes: reduce nothing instead of everything
        noop_with_empty_axes: bool,
    },
    /// ArgMax / ArgMin.
    ArgReduce {
        /// true: ArgMax, false: ArgMin
        max: bool,
        /// axis (non-negative)
        axis: usize,
        /// keep reduced dim
        keepdims: bool,
        /// pick the last index among ties
        select_last_index: bool,
    },
    /// Cumulative sum along the axis given by input 1.
    CumSum {
        /// exclusive scan
        exclusive: bool,
        /// scan backwards
        reverse: bool,
    },
    /// Reshape. Inputs: data, shape (i64).
    Reshape {
        /// a 0 in the shape means 0, not "copy"
        allowzero: bool,
    },
    /// Flatten into 2-D at `axis`.
    Flatten {
        /// split axis (non-negative)
        axis: usize,
    },
    /// Remove size-1 dims. Inputs: data, axes? .
    Squeeze {
        /// axes from the attribute (older opsets)
        axes: Option<Vec<i64>>,
    },
    /// Insert size-1 dims. Inputs: data, axes?.
    Unsqueeze {
        /// axes from the attribute (older opsets)
        axes: Option<Vec<i64>>,
    },
    /// Permute dims.
    Transpose {
        /// permutation (empty: reverse)
        perm: Vec<usize>,
    },
    /// Concatenate along an axis (non-negative).
    Concat {
        /// axis
        axis: usize,
    },
    /// Split along an axis. Inputs: data, split? .
    Split {
        /// axis (non-negative)
        axis: usize,
        /// sizes from the attribute
        split: Option<Vec<usize>>,
        /// number of outputs
        num_outputs: usize,
    },
    /// Slice. Inputs: data, starts, ends, axes?, steps?.
    Slice,
    /// Gather along an axis. Inputs: data, indices.
    Gather {
        /// axis (non-negative)
        axis: usize,
    },
    /// GatherElements along an axis.
    GatherElements {
        /// axis (non-negative)
        axis: usize,
    },
    /// GatherND.
    GatherNd {
        /// batch dims
        batch_dims: usize,
    },
    /// ScatterElements (reduction none/add/mul/max/min).
    ScatterElements {
        /// axis (non-negative)
        axis: usize,
        /// reduction: None means replace
        reduction: Option<BinaryOp>,
    },
    /// ScatterND.
    ScatterNd {
        /// reduction: None means replace
        reduction: Option<BinaryOp>,
    },
    /// TensorScatter: a key/value cache update. Inputs: cache, update, write_indices? (i64 `[batch]`); the output
    /// is the cache with each batch row's update written along `axis` from that row's index (see
    /// [`gather::tensor_scatter_check`]). The CPU runtime writes into the cache's buffer when nothing else reads it.
    TensorScatter {
        /// the sequence axis (non-negative, after the batch axis 0)
        axis: usize,
        /// positions wrap around the axis (`mode="circular"`) instead of running past its end
        circular: bool,
    },
    /// Pad. Inputs: data, pads (i64), constant_value?, axes?.
    Pad {
        /// padding mode
        mode: PadMode,
    },
    /// Resize / Upsample.
    Resize(ResizeAttrs),
    /// Broadcast to a shape. Inputs: data, shape.
    Expand,
    /// Repeat along each axis. Inputs: data, repeats.
    Tile,
    /// Shape of the input, optionally sliced.
    Shape {
        /// start (may be negative)
        start: i64,
        /// end (may be negative); None means rank
        end: Option<i64>,
    },
    /// Number of elements as an i64 scalar.
    Size,
    /// A constant-filled tensor of the shape given by input 0.
    ConstantOfShape {
        /// the fill value (one element)
        value: Tensor,
    },
    /// Range(start, limit, delta).
    Range,
    /// Cast to a dtype.
    Cast {
        /// target type
        to: DType,
    },
    /// Copy.
    Identity,
    /// Upper (or lower) triangle. Inputs: x, k?.
    Trilu {
        /// true: upper
        upper: bool,
    },
    /// One-hot. Inputs: indices, depth, values.
    OneHot {
        /// axis (may be negative; normalised at run time against the output rank)
        axis: i64,
    },
    /// Eye-like identity matrix.
    EyeLike {
        /// output type (None: the input's)
        dtype: Option<DType>,
        /// diagonal offset
        k: i64,
    },
    /// Rearrange depth into blocks.
    DepthToSpace {
        /// block size
        blocksize: usize,
        /// CRD (true) or DCR (false) ordering
        crd: bool,
    },
    /// Rearrange blocks into depth.
    SpaceToDepth {
        /// block size
        blocksize: usize,
    },
    /// Top-k values and indices. Inputs: x, k.
    TopK {
        /// axis (non-negative)
        axis: usize,
        /// largest (true) or smallest
        largest: bool,
        /// sorted output
        sorted: bool,
    },
    /// Non-zero element indices [rank, n].
    NonZero,
    /// Reverse sequences. Inputs: x, lengths.
    ReverseSequence {
        /// batch axis
        batch_axis: usize,
        /// time axis
        time_axis: usize,
    },
    /// Element-wise dequantize: (x - zero_point) * scale. Inputs: x, scale, zero_point?.
    DequantizeLinear {
        /// axis for per-axis parameters (non-negative, against the input rank)
        axis: i64,
    },
    /// Element-wise quantize. Inputs: x, scale, zero_point?.
    ///
    /// With an integer quantized input (a value with `quant`), it requantizes to the given scale and zero
    /// point (TFLite's QUANTIZE int8 → int8; see `runtime::kernels::int8`).
    QuantizeLinear {
        /// axis for per-axis parameters
        axis: i64,
        /// output dtype when zero_point is absent
        to: DType,
        /// how x / scale is computed and rounded
        rounding: QuantRounding,
    },
    // Control flow: ops that own nested graphs (regions); see `control_flow`.
    /// If(cond, captures...): runs then_branch or else_branch.
    If(IfAttrs),
    /// Loop(max_trip_count?, cond?, carried..., captures...).
    Loop(LoopAttrs),
    /// Scan(state..., scan inputs..., captures...).
    Scan(ScanAttrs),
    /// Recurrent layer: LSTM, GRU or RNN (see [`recurrent`]). Inputs: x, w, r, b?, sequence_lens?,
    /// initial_h?, initial_c?, p?; outputs y, y_h?, y_c?.
    Rnn(RnnAttrs),
}

impl Op {
    /// A short name of the op kind, as printed by `inspect`.
    pub fn name(&self) -> String {
        match self {
            Op::Conv(_) => "Conv".into(),
            Op::ConvTranspose(_) => "ConvTranspose".into(),
            Op::Gemm { .. } => "Gemm".into(),
            Op::MatMul => "MatMul".into(),
            Op::Binary(b, _) => format!("{b:?}"),
            Op::Unary(u) => {
                let s = format!("{u:?}");
                s.split(|c: char| c == ' ' || c == '{').next().unwrap_or("").to_string()
            }
            Op::Variadic(b) => format!("{b:?}N"),
            Op::If(_) => "If".into(),
            Op::Loop(_) => "Loop".into(),
            Op::Scan(_) => "Scan".into(),
            Op::Rnn(a) => a.cell.onnx_name().into(),
            other => {
                let s = format!("{other:?}");
                s.split(|c: char| c == '(' || c == ' ' || c == '{').next().unwrap_or("").to_string()
            }
        }
    }
    /// The fused activation, if any.
    pub fn activation(&self) -> Option<Activation> {
        match self {
            Op::Conv(a) => a.activation,
            Op::ConvTranspose(a) => a.conv.activation,
            Op::Gemm { activation, .. } => *activation,
            Op::Binary(_, a) => *a,
            Op::MatMul | Op::Unary(_) | Op::ClipDynamic | Op::Variadic(_) | Op::VariadicMean | Op::Where => None,
            Op::MaxPool(_) | Op::AveragePool(_) | Op::LpPool(..) | Op::GlobalAveragePool | Op::GlobalMaxPool => None,
            Op::BatchNorm { .. } | Op::InstanceNorm { .. } | Op::LayerNorm { .. } | Op::GroupNorm { .. } => None,
            Op::Lrn { .. } | Op::LpNorm { .. } | Op::Softmax { .. } | Op::LogSoftmax { .. } | Op::Hardmax { .. } => None,
            Op::Reduce { .. } | Op::ArgReduce { .. } | Op::CumSum { .. } | Op::TopK { .. } => None,
            Op::Reshape { .. } | Op::Flatten { .. } | Op::Squeeze { .. } | Op::Unsqueeze { .. } | Op::Transpose { .. } => None,
            Op::Concat { .. } | Op::Split { .. } | Op::Slice | Op::Pad { .. } | Op::Expand | Op::Tile | Op::Identity => None,
            Op::DepthToSpace { .. } | Op::SpaceToDepth { .. } => None,
            Op::Gather { .. } | Op::GatherElements { .. } | Op::GatherNd { .. } => None,
            Op::ScatterElements { .. } | Op::ScatterNd { .. } | Op::TensorScatter { .. } | Op::Resize(_) => None,
            Op::Shape { .. } | Op::Size | Op::ConstantOfShape { .. } | Op::Range | Op::Cast { .. } => None,
            Op::Trilu { .. } | Op::OneHot { .. } | Op::EyeLike { .. } | Op::NonZero | Op::ReverseSequence { .. } => None,
            Op::DequantizeLinear { .. } | Op::QuantizeLinear { .. } => None,
            Op::If(_) | Op::Loop(_) | Op::Scan(_) => None,
            Op::Rnn(_) => None,
        }
    }
}

/// What shape inference knows about one input.
#[derive(Clone, Copy, Debug)]
pub struct TypeInfo<'a> {
    /// Element type.
    pub dtype: DType,
    /// Static shape.
    pub shape: &'a [usize],
    /// The value, when it is a constant.
    pub value: Option<&'a Tensor>,
}

/// Why shape inference produced no static shape.
#[derive(Clone, Debug, PartialEq)]
pub enum InferError {
    /// The output shape depends on a value only known at run time.
    Dynamic,
    /// The node is ill-formed; the message says why.
    Invalid(String),
}

impl From<String> for InferError {
    fn from(s: String) -> Self {
        InferError::Invalid(s)
    }
}

/// Output (dtype, shape) pairs, one per node output.
pub type Inferred = Vec<(DType, Vec<usize>)>;

/// (minimum inputs, maximum inputs, minimum outputs, maximum outputs); `usize::MAX` means unbounded.
pub type Arity = (usize, usize, usize, usize);

/// Fetches input `i` of shape inference or fails with a message.
pub fn info<'a>(inputs: &[Option<TypeInfo<'a>>], i: usize) -> Result<TypeInfo<'a>, InferError> {
    inputs.get(i).copied().flatten().ok_or_else(|| InferError::Invalid(format!("missing required input {i}")))
}

/// The input and output counts `op` allows.
pub fn arity(op: &Op) -> Arity {
    use Op::*;
    match op {
        Conv(_) | ConvTranspose(_) => conv::ARITY,
        Gemm { .. } => matmul::GEMM_ARITY,
        MatMul => matmul::MATMUL_ARITY,
        Binary(..) => elementwise::BINARY_ARITY,
        Unary(_) | Cast { .. } => elementwise::UNARY_ARITY,
        ClipDynamic => elementwise::CLIP_DYNAMIC_ARITY,
        Variadic(_) | VariadicMean => elementwise::VARIADIC_ARITY,
        Where => elementwise::WHERE_ARITY,
        MaxPool(_) => pool::MAX_POOL_ARITY,
        AveragePool(_) | LpPool(..) | GlobalAveragePool | GlobalMaxPool => pool::ARITY,
        BatchNorm { .. } => normalize::BATCH_NORM_ARITY,
        InstanceNorm { .. } | GroupNorm { .. } => normalize::CHANNEL_NORM_ARITY,
        LayerNorm { .. } => normalize::LAYER_NORM_ARITY,
        Lrn { .. } | LpNorm { .. } => normalize::ARITY,
        Softmax { .. } | LogSoftmax { .. } | Hardmax { .. } => softmax::ARITY,
        Reduce { .. } => reduce::REDUCE_ARITY,
        ArgReduce { .. } => reduce::ARG_REDUCE_ARITY,
        CumSum { .. } => reduce::CUMSUM_ARITY,
        TopK { .. } => reduce::TOPK_ARITY,
        Flatten { .. } | Transpose { .. } | Identity | DepthToSpace { .. } | SpaceToDepth { .. } => layout::UNARY_ARITY,
        Reshape { .. } | Expand | Tile => layout::WITH_SHAPE_ARITY,
        Squeeze { .. } | Unsqueeze { .. } => layout::SQUEEZE_ARITY,
        Concat { .. } => layout::CONCAT_ARITY,
        Split { .. } => layout::SPLIT_ARITY,
        Slice => layout::SLICE_ARITY,
        Pad { .. } => layout::PAD_ARITY,
        Shape { .. } | Size | ConstantOfShape { .. } | EyeLike { .. } | NonZero => tensor_ops::UNARY_ARITY,
        Range | OneHot { .. } => tensor_ops::TERNARY_ARITY,
        Trilu { .. } => tensor_ops::TRILU_ARITY,
        ReverseSequence { .. } => tensor_ops::REVERSE_SEQUENCE_ARITY,
        Gather { .. } | GatherElements { .. } | GatherNd { .. } => gather::GATHER_ARITY,
        ScatterElements { .. } | ScatterNd { .. } => gather::SCATTER_ARITY,
        TensorScatter { .. } => gather::TENSOR_SCATTER_ARITY,
        Resize(_) => resize::ARITY,
        DequantizeLinear { .. } | QuantizeLinear { .. } => quantize::ARITY,
        If(_) => control_flow::IF_ARITY,
        Loop(_) => control_flow::LOOP_ARITY,
        Scan(_) => control_flow::SCAN_ARITY,
        Rnn(a) => recurrent::arity(a),
    }
}

/// Output dtypes and shapes of `op` from what is known about its inputs (the float rule; quantized nodes
/// use [`quantize::infer_quantized`]).
pub fn infer(op: &Op, inputs: &[Option<TypeInfo>]) -> Result<Inferred, InferError> {
    use Op::*;
    match op {
        Conv(a) => conv::infer(a, inputs),
        ConvTranspose(a) => conv::infer_transpose(a, inputs),
        Gemm { trans_a, trans_b, .. } => matmul::infer_gemm(*trans_a, *trans_b, inputs),
        MatMul => matmul::infer_matmul(inputs),
        Binary(b, act) => elementwise::infer_binary(*b, *act, inputs),
        Unary(u) => elementwise::infer_unary(*u, inputs),
        ClipDynamic => elementwise::infer_clip_dynamic(inputs),
        Variadic(b) => elementwise::infer_variadic(Some(*b), inputs),
        VariadicMean => elementwise::infer_variadic(None, inputs),
        Where => elementwise::infer_where(inputs),
        Cast { to } => elementwise::infer_cast(*to, inputs),
        MaxPool(a) => pool::infer_max(a, inputs),
        AveragePool(a) => pool::infer_window("AveragePool", a, inputs),
        LpPool(a, _) => pool::infer_window("LpPool", a, inputs),
        GlobalAveragePool => pool::infer_global("GlobalAveragePool", inputs),
        GlobalMaxPool => pool::infer_global("GlobalMaxPool", inputs),
        BatchNorm { .. } => normalize::infer_channel_norm("BatchNorm", 5, None, inputs),
        InstanceNorm { .. } => normalize::infer_channel_norm("InstanceNorm", 3, None, inputs),
        GroupNorm { num_groups, .. } => normalize::infer_channel_norm("GroupNorm", 3, Some(*num_groups), inputs),
        LayerNorm { axis, .. } => normalize::infer_layer_norm(*axis, inputs),
        Lrn { size, .. } => normalize::infer_lrn(*size, inputs),
        LpNorm { axis, p } => normalize::infer_lp_norm(*axis, *p, inputs),
        Softmax { axis } => softmax::infer("Softmax", *axis, inputs),
        LogSoftmax { axis } => softmax::infer("LogSoftmax", *axis, inputs),
        Hardmax { axis } => softmax::infer("Hardmax", *axis, inputs),
        Reduce { op, axes, keepdims, noop_with_empty_axes } => {
            reduce::infer_reduce(*op, axes.as_deref(), *keepdims, *noop_with_empty_axes, inputs)
        }
        ArgReduce { axis, keepdims, .. } => reduce::infer_arg_reduce(*axis, *keepdims, inputs),
        CumSum { .. } => reduce::infer_cumsum(inputs),
        TopK { axis, .. } => reduce::infer_topk(*axis, inputs),
        Reshape { allowzero } => layout::infer_reshape(*allowzero, inputs),
        Flatten { axis } => layout::infer_flatten(*axis, inputs),
        Squeeze { axes } => layout::infer_squeeze(axes.as_deref(), inputs),
        Unsqueeze { axes } => layout::infer_unsqueeze(axes.as_deref(), inputs),
        Transpose { perm } => layout::infer_transpose(perm, inputs),
        Concat { axis } => layout::infer_concat(*axis, inputs),
        Split { axis, split, num_outputs } => layout::infer_split(*axis, split.as_deref(), *num_outputs, inputs),
        Slice => layout::infer_slice(inputs),
        Pad { .. } => layout::infer_pad(inputs),
        Expand => layout::infer_expand(inputs),
        Tile => layout::infer_tile(inputs),
        Identity => layout::infer_identity(inputs),
        DepthToSpace { blocksize, .. } => layout::infer_depth_to_space(*blocksize, inputs),
        SpaceToDepth { blocksize } => layout::infer_space_to_depth(*blocksize, inputs),
        Shape { start, end } => tensor_ops::infer_shape(*start, *end, inputs),
        Size => tensor_ops::infer_size(inputs),
        ConstantOfShape { value } => tensor_ops::infer_constant_of_shape(value, inputs),
        Range => tensor_ops::infer_range(inputs),
        Trilu { .. } => tensor_ops::infer_trilu(inputs),
        OneHot { axis } => tensor_ops::infer_onehot(*axis, inputs),
        EyeLike { dtype, .. } => tensor_ops::infer_eye_like(*dtype, inputs),
        NonZero => tensor_ops::infer_nonzero(inputs),
        ReverseSequence { batch_axis, time_axis } => tensor_ops::infer_reverse_sequence(*batch_axis, *time_axis, inputs),
        Gather { axis } => gather::infer_gather(*axis, inputs),
        GatherElements { axis } => gather::infer_gather_elements(*axis, inputs),
        GatherNd { batch_dims } => gather::infer_gather_nd(*batch_dims, inputs),
        ScatterElements { axis, reduction } => gather::infer_scatter_elements(*axis, *reduction, inputs),
        ScatterNd { reduction } => gather::infer_scatter_nd(*reduction, inputs),
        TensorScatter { axis, .. } => gather::infer_tensor_scatter(*axis, inputs),
        Resize(a) => resize::infer(a, inputs),
        DequantizeLinear { axis } => quantize::infer_dequantize(*axis, inputs),
        QuantizeLinear { axis, to, .. } => quantize::infer_quantize(*axis, *to, inputs),
        If(_) | Loop(_) | Scan(_) => control_flow::infer(op, inputs),
        Rnn(a) => recurrent::infer_rnn(a, inputs),
    }
}

/// Output dtypes when shapes cannot be inferred: what each op produces given its input dtypes.
pub fn fallback_dtypes(op: &Op, inputs: &[Option<TypeInfo>], n_out: usize) -> Vec<DType> {
    use Op::*;
    let input_dtype = |i: usize| inputs.get(i).copied().flatten().map(|t| t.dtype);
    let first = inputs.iter().flatten().next().map(|i| i.dtype).unwrap_or(DType::F32);
    let mut second = None;
    let d = match op {
        If(_) | Loop(_) | Scan(_) => return control_flow::fallback_dtypes(op, n_out),
        Shape { .. } | Size | NonZero | ArgReduce { .. } => DType::I64,
        Cast { to } => *to,
        ConstantOfShape { value } => value.dtype(),
        Binary(b, _) if b.is_comparison() || b.is_logical() => DType::Bool,
        Unary(UnaryOp::IsNaN | UnaryOp::IsInf { .. }) => DType::Bool,
        Where => input_dtype(1).unwrap_or(first),
        OneHot { .. } => input_dtype(2).unwrap_or(first),
        EyeLike { dtype: Some(d), .. } => *d,
        DequantizeLinear { .. } => input_dtype(1).unwrap_or(DType::F32),
        QuantizeLinear { to, .. } => input_dtype(2).unwrap_or(*to),
        TopK { .. } | MaxPool(_) => {
            second = Some(DType::I64);
            first
        }
        EyeLike { dtype: None, .. } | Binary(..) | Unary(_) => first,
        Conv(_) | ConvTranspose(_) | Gemm { .. } | MatMul | ClipDynamic | Variadic(_) | VariadicMean => first,
        AveragePool(_) | LpPool(..) | GlobalAveragePool | GlobalMaxPool => first,
        BatchNorm { .. } | InstanceNorm { .. } | LayerNorm { .. } | GroupNorm { .. } | Lrn { .. } | LpNorm { .. } => first,
        Softmax { .. } | LogSoftmax { .. } | Hardmax { .. } | Reduce { .. } | CumSum { .. } => first,
        Reshape { .. } | Flatten { .. } | Squeeze { .. } | Unsqueeze { .. } | Transpose { .. } | Concat { .. } => first,
        Split { .. } | Slice | Pad { .. } | Expand | Tile | Identity | DepthToSpace { .. } | SpaceToDepth { .. } => first,
        Range | Trilu { .. } | ReverseSequence { .. } | Resize(_) => first,
        Gather { .. } | GatherElements { .. } | GatherNd { .. } | ScatterElements { .. } | ScatterNd { .. } | TensorScatter { .. } => first,
        Rnn(_) => first,
    };
    let mut v = vec![d; n_out];
    if let (Some(s), true) = (second, n_out > 1) {
        v[1] = s;
    }
    v
}
