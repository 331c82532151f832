//! The operator set of the core IR. Attributes are typed fields, never string maps.
//!
//! Semantics follow ONNX (opset 13+) unless a doc comment says otherwise; layouts are NCHW.
//! Inputs are positional; an optional input that is absent is `None` in [`super::Node::inputs`].

use super::dtype::DType;

/// Activation fused into a producing op by the fusion pass.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Activation {
    /// max(x, 0)
    Relu,
    /// min(max(x, 0), 6)
    Relu6,
    /// min(max(x, lo), hi)
    Clip {
        /// lower bound
        min: f32,
        /// upper bound
        max: f32,
    },
}

impl Activation {
    /// Applies the activation to one value.
    #[inline]
    pub fn apply(self, x: f32) -> f32 {
        match self {
            Activation::Relu => x.max(0.0),
            Activation::Relu6 => x.clamp(0.0, 6.0),
            Activation::Clip { min, max } => x.max(min).min(max),
        }
    }
}

/// How convolution/pooling padding is chosen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AutoPad {
    /// Use the explicit `pads`.
    NotSet,
    /// Output = ceil(input / stride); extra padding at the end.
    SameUpper,
    /// Output = ceil(input / stride); extra padding at the start.
    SameLower,
    /// No padding.
    Valid,
}

/// Attributes shared by convolution-like ops over N spatial dimensions.
#[derive(Clone, Debug, PartialEq)]
pub struct ConvAttrs {
    /// Kernel spatial shape (empty: taken from the weight).
    pub kernel_shape: Vec<usize>,
    /// Strides per spatial dim (empty: all 1).
    pub strides: Vec<usize>,
    /// Dilations per spatial dim (empty: all 1).
    pub dilations: Vec<usize>,
    /// Begin pads for all spatial dims, then end pads (ONNX order). Empty: zeros.
    pub pads: Vec<usize>,
    /// Padding mode.
    pub auto_pad: AutoPad,
    /// Number of groups (depthwise when equal to input channels).
    pub group: usize,
    /// Fused activation (set by the fusion pass).
    pub activation: Option<Activation>,
}

/// ConvTranspose-specific attributes.
#[derive(Clone, Debug, PartialEq)]
pub struct ConvTransposeAttrs {
    /// Common convolution attributes.
    pub conv: ConvAttrs,
    /// Extra size added to one side of each output spatial dim.
    pub output_padding: Vec<usize>,
    /// Explicit output spatial shape (empty: computed).
    pub output_shape: Vec<usize>,
}

/// Pooling attributes.
#[derive(Clone, Debug, PartialEq)]
pub struct PoolAttrs {
    /// Kernel spatial shape.
    pub kernel_shape: Vec<usize>,
    /// Strides (empty: all 1).
    pub strides: Vec<usize>,
    /// Dilations (empty: all 1).
    pub dilations: Vec<usize>,
    /// Begin pads then end pads.
    pub pads: Vec<usize>,
    /// Padding mode.
    pub auto_pad: AutoPad,
    /// Use ceil instead of floor for the output size.
    pub ceil_mode: bool,
    /// AveragePool: whether padded cells count in the divisor.
    pub count_include_pad: bool,
}

/// Binary elementwise operations with numpy broadcasting.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(missing_docs)]
pub enum BinaryOp {
    Add,
    Sub,
    Mul,
    Div,
    Pow,
    Max,
    Min,
    /// Integer/float remainder with the sign of the divisor (ONNX Mod fmod=0).
    Mod,
    /// C fmod: sign of the dividend (ONNX Mod fmod=1).
    Fmod,
    Equal,
    Less,
    LessOrEqual,
    Greater,
    GreaterOrEqual,
    And,
    Or,
    Xor,
    BitAnd,
    BitOr,
    BitXor,
    /// PRelu: x if x >= 0 else slope * x.
    PRelu,
}

impl BinaryOp {
    /// True for comparison ops (output is bool).
    pub fn is_comparison(self) -> bool {
        use BinaryOp::*;
        matches!(self, Equal | Less | LessOrEqual | Greater | GreaterOrEqual)
    }
    /// True for logical ops on bools.
    pub fn is_logical(self) -> bool {
        matches!(self, BinaryOp::And | BinaryOp::Or | BinaryOp::Xor)
    }
}

/// Unary elementwise operations.
#[derive(Clone, Copy, Debug, PartialEq)]
#[allow(missing_docs)]
pub enum UnaryOp {
    Neg,
    Abs,
    Sqrt,
    Exp,
    Log,
    Reciprocal,
    Floor,
    Ceil,
    /// Round half to even.
    Round,
    Sign,
    Relu,
    Sigmoid,
    Tanh,
    Sin,
    Cos,
    Tan,
    Asin,
    Acos,
    Atan,
    Sinh,
    Cosh,
    Asinh,
    Acosh,
    Atanh,
    Erf,
    Not,
    BitNot,
    Softplus,
    Softsign,
    IsNaN,
    /// IsInf with the two detection flags.
    IsInf { detect_positive: bool, detect_negative: bool },
    LeakyRelu { alpha: f32 },
    Elu { alpha: f32 },
    Selu { alpha: f32, gamma: f32 },
    Celu { alpha: f32 },
    ThresholdedRelu { alpha: f32 },
    HardSigmoid { alpha: f32, beta: f32 },
    HardSwish,
    Mish,
    /// Gelu; `tanh` selects the tanh approximation.
    Gelu { tanh: bool },
    /// Clip with constant bounds (absent bounds are +/- infinity).
    Clip { min: f32, max: f32 },
}

/// Reductions over a set of axes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(missing_docs)]
pub enum ReduceOp {
    Sum,
    Mean,
    Max,
    Min,
    Prod,
    L1,
    L2,
    LogSum,
    LogSumExp,
    SumSquare,
}

/// Resize interpolation mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(missing_docs)]
pub enum ResizeMode {
    Nearest,
    Linear,
    Cubic,
}

/// How output coordinates map to input coordinates in Resize.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(missing_docs)]
pub enum CoordTransform {
    HalfPixel,
    HalfPixelSymmetric,
    PytorchHalfPixel,
    AlignCorners,
    Asymmetric,
    TfCropAndResize,
}

/// Rounding of the nearest-neighbour source index.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(missing_docs)]
pub enum NearestMode {
    RoundPreferFloor,
    RoundPreferCeil,
    Floor,
    Ceil,
}

/// Resize attributes. Inputs: x, roi?, scales?, sizes?.
#[derive(Clone, Debug, PartialEq)]
pub struct ResizeAttrs {
    /// Interpolation mode.
    pub mode: ResizeMode,
    /// Coordinate transformation.
    pub coord: CoordTransform,
    /// Nearest rounding.
    pub nearest: NearestMode,
    /// Cubic coefficient `a`.
    pub cubic_coeff_a: f32,
    /// Exclude outside pixels from cubic weights.
    pub exclude_outside: bool,
    /// Value for out-of-range samples in tf_crop_and_resize.
    pub extrapolation_value: f32,
}

/// Pad modes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(missing_docs)]
pub enum PadMode {
    Constant,
    Reflect,
    Edge,
    Wrap,
}

/// Rounding of `QuantizeLinear` (float input).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum QuantRounding {
    /// ONNX: `x / scale` in the input's type, rounded half to even.
    #[default]
    HalfToEven,
    /// TFLite QUANTIZE: `x / scale` in f64, rounded half away from zero (`TfLiteRound`).
    TfLite,
}

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
        value: super::tensor::Tensor,
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
            _ => None,
        }
    }
}
