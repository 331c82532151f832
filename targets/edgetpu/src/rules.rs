//! The Edge TPU rules analyzer: predicts, op by op, what `edgetpu_compiler` will map to the Edge TPU.
//!
//! It applies Coral's published model requirements (see `shared/reference/edge-tpu-facts.md` in the
//! project notes): the supported op list with each op's known limitations, 8-bit quantized tensors only,
//! static shapes, constant parameters, at most 3 non-unit innermost dimensions, and the single-partition
//! rule — the compiler maps one contiguous subgraph, so the first unsupported op and every op after it run
//! on the CPU. CPU-only ops at the very start of the model (typically the `QUANTIZE` of a float input) do
//! not end the partition, as the compiler leaves them on the CPU and maps from the first supported op.
//!
//! The analyzer works without the compiler (which only runs on x86-64 Linux) and explains each decision;
//! the compiler's own report ([`crate::compiler`]) is authoritative where the two differ (the compiler
//! also declines some ops for reasons it does not publish, such as precision or size).

use tpu_sdk_core::format::tflite::schema::{self, builtin_operator as bo, tensor_type as tt};

use crate::report::{status, MappingReport, OpMapping, Placement, ReportSource};

/// Options of the analysis.
#[derive(Clone, Debug, Default)]
pub struct RulesOptions {
    /// Treat the ops that only recent compiler/runtime versions map (TRANSPOSE, GATHER, RSQRT,
    /// SQUARED_DIFFERENCE, SUM, TRANSPOSE_CONV...) as supported. Off by default: such a model fails on an
    /// older libedgetpu.
    pub assume_recent_runtime: bool,
}

/// Ops of the original supported list.
const SUPPORTED: &[i32] = &[
    bo::ADD,
    bo::AVERAGE_POOL_2D,
    bo::CONCATENATION,
    bo::CONV_2D,
    bo::DEPTHWISE_CONV_2D,
    bo::EXPAND_DIMS,
    bo::FULLY_CONNECTED,
    bo::L2_NORMALIZATION,
    bo::LOGISTIC,
    bo::LSTM,
    bo::UNIDIRECTIONAL_SEQUENCE_LSTM,
    bo::MAXIMUM,
    bo::MINIMUM,
    bo::MAX_POOL_2D,
    bo::MEAN,
    bo::MUL,
    bo::PACK,
    bo::PAD,
    bo::PRELU,
    bo::QUANTIZE,
    bo::REDUCE_MAX,
    bo::REDUCE_MIN,
    bo::RELU,
    bo::RELU6,
    bo::RELU_N1_TO_1,
    bo::RESHAPE,
    bo::RESIZE_BILINEAR,
    bo::RESIZE_NEAREST_NEIGHBOR,
    bo::SLICE,
    bo::SOFTMAX,
    bo::SPACE_TO_DEPTH,
    bo::SPLIT,
    bo::SQUEEZE,
    bo::STRIDED_SLICE,
    bo::SUB,
    bo::TANH,
];

/// Ops that newer compiler and runtime versions added.
const RECENT: &[i32] = &[bo::TRANSPOSE, bo::TRANSPOSE_CONV, bo::GATHER, bo::RSQRT, bo::SQUARED_DIFFERENCE, bo::SUM, bo::HARD_SWISH];

/// Whether input `k` of an op is a parameter (weights, bias) that must be a compile-time constant.
fn is_parameter(code: i32, k: usize) -> bool {
    match code {
        bo::CONV_2D | bo::DEPTHWISE_CONV_2D | bo::FULLY_CONNECTED => k >= 1,
        bo::TRANSPOSE_CONV => k == 1 || k == 3,
        _ => false,
    }
}

/// Why an analysis could not run.
#[derive(Debug, thiserror::Error)]
pub enum RulesError {
    /// The bytes are not a readable TFLite model.
    #[error("{0}")]
    Parse(#[from] schema::ParseError),
    /// The model is readable but inconsistent.
    #[error("invalid model: {0}")]
    Invalid(String),
}

struct TensorInfo<'a> {
    name: String,
    type_: i8,
    shape: Vec<i32>,
    signature: Vec<i32>,
    quantized: bool,
    data: &'a [u8],
    zero_points: Vec<i64>,
    /// A variable tensor (a recurrent op's state).
    variable: bool,
}

impl TensorInfo<'_> {
    fn is_const(&self) -> bool {
        !self.data.is_empty()
    }
    fn is_8bit(&self) -> bool {
        matches!(self.type_, tt::INT8 | tt::UINT8)
    }
    fn dynamic(&self) -> bool {
        self.signature.iter().any(|&d| d < 0) || self.shape.iter().any(|&d| d < 0)
    }
    /// The constant's values as integers (int8/uint8/int32/int64 data).
    fn ints(&self) -> Option<Vec<i64>> {
        Some(match self.type_ {
            tt::INT32 => self.data.chunks_exact(4).map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]) as i64).collect(),
            tt::INT64 => self.data.chunks_exact(8).map(|c| i64::from_le_bytes(c.try_into().expect("8 bytes"))).collect(),
            tt::INT8 => self.data.iter().map(|&b| b as i8 as i64).collect(),
            tt::UINT8 => self.data.iter().map(|&b| b as i64).collect(),
            _ => return None,
        })
    }
}

/// Analyzes a TFLite model given as bytes.
pub fn analyze_bytes(bytes: &[u8], opts: &RulesOptions) -> Result<MappingReport, RulesError> {
    let model = schema::parse_model(bytes)?;
    analyze(&model, bytes, opts)
}

/// Analyzes a parsed TFLite model (`file` is the model's bytes, for constant data).
pub fn analyze(model: &schema::Model, file: &[u8], opts: &RulesOptions) -> Result<MappingReport, RulesError> {
    let subgraphs = model.subgraphs().ok_or_else(|| RulesError::Invalid("the model has no subgraphs".into()))?;
    if subgraphs.is_empty() {
        return Err(RulesError::Invalid("the model has no subgraphs".into()));
    }
    let sg = subgraphs.get(0);
    let mut notes = Vec::new();
    if subgraphs.len() > 1 {
        notes.push(format!("the model has {} subgraphs; only the first (main) one is analyzed", subgraphs.len()));
    }
    let n_tensors = sg.tensors().map(|t| t.len()).unwrap_or(0);
    let tensor = |t: i32| -> Result<TensorInfo, RulesError> {
        let i = usize::try_from(t).ok().filter(|&i| i < n_tensors).ok_or_else(|| RulesError::Invalid(format!("tensor index {t} is out of range ({n_tensors} tensors)")))?;
        let x = sg.tensors().expect("non-empty").get(i);
        let data = schema::buffer_data(model, file, x.buffer()).map_err(RulesError::Invalid)?;
        let q = x.quantization();
        let scales = q.map(|q| schema::to_vec(q.scale())).unwrap_or_default();
        Ok(TensorInfo {
            name: x.name().filter(|s| !s.is_empty()).map(str::to_string).unwrap_or_else(|| format!("tensor_{t}")),
            type_: x.type_(),
            shape: schema::to_vec(x.shape()),
            signature: schema::to_vec(x.shape_signature()),
            quantized: !scales.is_empty(),
            data,
            zero_points: q.map(|q| schema::to_vec(q.zero_point())).unwrap_or_default(),
            variable: x.is_variable(),
        })
    };

    let ops = sg.operators();
    let n_ops = ops.map(|o| o.len()).unwrap_or(0);
    let mut out = Vec::with_capacity(n_ops);
    #[derive(PartialEq)]
    enum State {
        BeforeTpu,
        InTpu,
        After(usize, String),
    }
    let mut state = State::BeforeTpu;
    let codes = model.operator_codes();
    let mut recent_used = false;
    for i in 0..n_ops {
        let op = schema::get(ops, i).expect("index in range");
        let code_t = schema::get(codes, op.opcode_index() as usize)
            .ok_or_else(|| RulesError::Invalid(format!("operator #{i}: opcode index {} is out of range", op.opcode_index())))?;
        let code = code_t.code();
        let name = code_t.name();
        let ins: Vec<TensorInfo> = schema::to_vec(op.inputs()).into_iter().filter(|&t| t >= 0).map(&tensor).collect::<Result<_, _>>()?;
        let outs: Vec<TensorInfo> = schema::to_vec(op.outputs()).into_iter().map(&tensor).collect::<Result<_, _>>()?;
        let output = outs.first().map(|t| t.name.clone()).unwrap_or_default();

        let verdict = if code == bo::CUSTOM && code_t.custom_code() == Some("edgetpu-custom-op") {
            Ok(())
        } else {
            check_op(code, &name, &op, &ins, &outs, opts, &mut recent_used)
        };
        let (placement, st, reason) = match (&state, verdict) {
            // control flow says why it stays on the CPU wherever it stands
            (State::After(..), Err((st, why))) if matches!(code, bo::IF | bo::WHILE) => (Placement::Cpu, st.to_string(), why),
            (State::After(k, kname), _) => (
                Placement::Cpu,
                status::AFTER_UNSUPPORTED.to_string(),
                format!("follows op #{k} ({kname}), the first op that cannot be mapped: the compiler maps a single subgraph"),
            ),
            (_, Ok(())) => {
                state = State::InTpu;
                let st = if code == bo::CUSTOM { status::COMPILED } else { status::MAPPED };
                (Placement::Tpu, st.to_string(), remark(code, opts))
            }
            (_, Err((st, why))) => {
                // A CPU op before anything is mapped (input QUANTIZE/DEQUANTIZE) does not end the partition.
                let boundary = state == State::BeforeTpu && matches!(code, bo::QUANTIZE | bo::DEQUANTIZE);
                if !boundary {
                    state = State::After(i, name.clone());
                }
                (Placement::Cpu, st.to_string(), why)
            }
        };
        out.push(OpMapping { index: i, op: name, output, placement, status: st, reason });
    }
    if recent_used {
        notes.push("ops marked 'recent runtime' map only with a recent edgetpu_compiler and libedgetpu; older runtimes reject the model".into());
    }
    Ok(MappingReport::from_ops(ReportSource::Rules, out, notes))
}

/// A remark on a mapped op that may still not map in practice.
fn remark(code: i32, opts: &RulesOptions) -> String {
    match code {
        bo::RESHAPE => "may stay on the CPU for large tensors".into(),
        bo::UNIDIRECTIONAL_SEQUENCE_LSTM => "unidirectional LSTM (a reverse or bidirectional one needs REVERSE_V2, which stays on the CPU)".into(),
        bo::RESIZE_BILINEAR | bo::RESIZE_NEAREST_NEIGHBOR => "the compiler may keep it on the CPU to avoid precision loss".into(),
        c if RECENT.contains(&c) && opts.assume_recent_runtime => "needs a recent Edge TPU runtime".into(),
        _ => String::new(),
    }
}

type Verdict = Result<(), (&'static str, String)>;

fn limit(why: impl Into<String>) -> Verdict {
    Err((status::LIMITATION, why.into()))
}

/// Number of dims outside the innermost 3 that are larger than 1.
fn outer_non_unit(shape: &[i32]) -> usize {
    shape.iter().rev().skip(3).filter(|&&d| d > 1).count()
}

fn non_unit(shape: &[i32]) -> usize {
    shape.iter().filter(|&&d| d > 1).count()
}

fn fused(o: Option<i8>) -> i8 {
    o.unwrap_or(0)
}

fn check_op(code: i32, name: &str, op: &schema::Operator, ins: &[TensorInfo], outs: &[TensorInfo], opts: &RulesOptions, recent_used: &mut bool) -> Verdict {
    // 1. The op kind (DEQUANTIZE is declined for its float output, as the compiler reports it).
    if matches!(code, bo::IF | bo::WHILE) {
        return Err((status::NOT_SUPPORTED, format!("{name} is control flow, which the Edge TPU does not run: the op and its subgraphs run on the CPU")));
    }
    if !SUPPORTED.contains(&code) && code != bo::DEQUANTIZE {
        if RECENT.contains(&code) {
            if !opts.assume_recent_runtime {
                return Err((status::NOT_SUPPORTED, format!("{name} maps only with a recent Edge TPU compiler and runtime (enable assume_recent_runtime)")));
            }
            *recent_used = true;
        } else {
            return Err((status::NOT_SUPPORTED, format!("{name} is not in the Edge TPU's supported op list")));
        }
    }
    // 2. Static shapes.
    if let Some(t) = ins.iter().chain(outs).find(|t| t.dynamic()) {
        return Err((status::DYNAMIC, format!("tensor '{}' has a dynamic shape {:?}", t.name, if t.signature.is_empty() { &t.shape } else { &t.signature })));
    }
    // 3. 8-bit tensors; parameters constant; int32 only for biases and shape-like constants.
    // An LSTM's weights and biases (every input but the sequence and the two variable states) are parameters;
    // its cell state is a 16-bit variable tensor, as in every integer LSTM.
    let lstm = code == bo::UNIDIRECTIONAL_SEQUENCE_LSTM;
    for (k, t) in ins.iter().enumerate() {
        if lstm && t.variable && t.type_ == tt::INT16 && t.quantized {
            continue;
        }
        let param = is_parameter(code, k) || lstm && k > 0 && !t.variable;
        if param && !t.is_const() {
            return Err((status::LIMITATION, format!("parameter '{}' is not a constant", t.name)));
        }
        let ok = if t.is_const() {
            t.is_8bit() || matches!(t.type_, tt::INT32 | tt::INT64)
        } else {
            t.is_8bit() && t.quantized
        };
        if !ok {
            return Err((status::DATA_TYPE, format!("input '{}' is {}{}, not 8-bit quantized", t.name, tt::name(t.type_), if t.is_8bit() { " without quantization parameters" } else { "" })));
        }
    }
    for t in outs {
        if !(t.is_8bit() && t.quantized) {
            return Err((status::DATA_TYPE, format!("output '{}' is {}, not 8-bit quantized", t.name, tt::name(t.type_))));
        }
    }
    // 4. At most the innermost 3 dims may exceed 1.
    for t in ins.iter().filter(|t| !t.is_const()).chain(outs) {
        if outer_non_unit(&t.shape) > 0 {
            return Err((status::TENSOR_SHAPE, format!("tensor '{}' has shape {:?}: only the innermost 3 dimensions may be larger than 1", t.name, t.shape)));
        }
    }
    // 5. Per-op limitations.
    op_limitations(code, op, ins, outs)
}

/// The published limitations of each supported op (the TFLite builtin `code`), on its options and tensors.
fn op_limitations(code: i32, op: &schema::Operator, ins: &[TensorInfo], outs: &[TensorInfo]) -> Verdict {
    let input = |k: usize| ins.get(k);
    match code {
        bo::AVERAGE_POOL_2D | bo::MAX_POOL_2D if fused(op.options::<schema::Pool2DOptions>().map(|o| o.fused_activation_function())) != 0 => {
            return limit("pooling with a fused activation");
        }
        bo::CONCATENATION => {
            if fused(op.options::<schema::ConcatenationOptions>().map(|o| o.fused_activation_function())) != 0 {
                return limit("concatenation with a fused activation");
            }
            if let Some(c) = ins.iter().find(|t| t.is_const()) {
                let zeros = c.ints().is_some_and(|v| {
                    let zp = c.zero_points.first().copied().unwrap_or(0);
                    v.iter().all(|&x| x == zp)
                });
                if ins.len() != 2 || !zeros {
                    return limit(format!("constant input '{}': allowed only as one of exactly 2 inputs and all zeros", c.name));
                }
            }
        }
        bo::CONV_2D | bo::DEPTHWISE_CONV_2D => {
            let dilations = if code == bo::CONV_2D {
                op.options::<schema::Conv2DOptions>().map(|o| (o.dilation_w_factor(), o.dilation_h_factor()))
            } else {
                op.options::<schema::DepthwiseConv2DOptions>().map(|o| (o.dilation_w_factor(), o.dilation_h_factor()))
            };
            if let Some((w, h)) = dilations.filter(|(w, h)| w != h) {
                return limit(format!("different dilations in x ({w}) and y ({h})"));
            }
        }
        bo::FULLY_CONNECTED => {
            if op.options::<schema::FullyConnectedOptions>().is_some_and(|o| o.weights_format() != 0) {
                return limit("non-default weights format");
            }
            if let Some(o) = outs.first() {
                if non_unit(&o.shape) > 1 {
                    return limit(format!("output shape {:?} is not one-dimensional", o.shape));
                }
            }
        }
        bo::MEAN | bo::REDUCE_MAX | bo::REDUCE_MIN | bo::SUM => {
            let (Some(x), Some(axes)) = (input(0), input(1).and_then(|a| a.ints())) else {
                return limit("reduction axes are not constant");
            };
            let rank = x.shape.len() as i64;
            let axes: Vec<i64> = axes.iter().map(|&a| if a < 0 { a + rank } else { a }).collect();
            if rank >= 4 && axes.contains(&0) {
                return limit("reduction over the batch dimension");
            }
            if code == bo::MEAN && axes.contains(&(rank - 1)) {
                let z = x.shape.last().copied().unwrap_or(1);
                if z % 4 != 0 {
                    return limit(format!("reduction over the channel dimension of size {z}, not a multiple of 4"));
                }
            }
        }
        bo::PACK if op.options::<schema::PackOptions>().map(|o| o.axis()).unwrap_or(0) == 0 => {
            return limit("packing along the batch dimension");
        }
        bo::PAD => {
            let Some(p) = input(1).and_then(|p| p.ints()) else { return limit("paddings are not constant") };
            let rank = input(0).map(|x| x.shape.len()).unwrap_or(0);
            if rank >= 4 && p.len() >= 2 && (p[0] != 0 || p[1] != 0) {
                return limit("padding in the batch dimension");
            }
        }
        bo::PRELU => {
            if let Some(a) = input(1) {
                if non_unit(&a.shape) > 1 {
                    return limit(format!("alpha of shape {:?} is not 1-D", a.shape));
                }
            }
        }
        bo::RESIZE_BILINEAR | bo::RESIZE_NEAREST_NEIGHBOR => {
            for t in ins.iter().take(1).chain(outs) {
                if t.shape.len() == 4 && t.shape[0] != 1 {
                    return limit(format!("tensor '{}' of shape {:?} is not 3-D (batch must be 1)", t.name, t.shape));
                }
            }
        }
        bo::SOFTMAX => {
            if let Some(x) = input(0) {
                let n: i64 = x.shape.iter().map(|&d| d as i64).product();
                if non_unit(&x.shape) > 1 {
                    return limit(format!("input of shape {:?} is not 1-D", x.shape));
                }
                if n > 16000 {
                    return limit(format!("input has {n} elements, more than 16000"));
                }
            }
        }
        bo::SQUEEZE => {
            if let (Some(x), Some(o)) = (input(0), outs.first()) {
                // Only leading 1-dims may go: the output must be a suffix of the input shape.
                if !x.shape.ends_with(&o.shape) {
                    return limit(format!("squeezing {:?} to {:?} removes non-leading dimensions", x.shape, o.shape));
                }
            }
        }
        bo::STRIDED_SLICE => {
            if let Some(o) = op.options::<schema::StridedSliceOptions>() {
                if o.ellipsis_mask() != 0 || o.new_axis_mask() != 0 {
                    return limit("ellipsis or new-axis mask");
                }
            }
            match input(3).and_then(|s| s.ints()) {
                Some(s) if s.iter().all(|&x| x == 1) => {}
                Some(s) => return limit(format!("strides {s:?} are not all 1")),
                None => return limit("strides are not constant"),
            }
        }
        bo::QUANTIZE => {
            // Only re-quantization between 8-bit types maps (checked above: the input is 8-bit).
        }
        _ => {}
    }
    Ok(())
}
