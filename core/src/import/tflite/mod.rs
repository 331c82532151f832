//! TFLite import: a `.tflite` flatbuffer (schema v3) into the core IR.
//!
//! TFLite is NHWC; the core IR is NCHW. Tensors keep their TFLite layout (graph inputs and outputs have the
//! file's shapes and names), and the layout-sensitive ops (convolutions, pooling, resize, depth/space) are
//! wrapped: the input goes through a `Transpose` to NCHW, the op runs in NCHW with its weights permuted
//! as constants (OHWI → OIHW, depthwise 1HWC → C1HW), and the result is transposed back. The optimisation
//! passes cancel back-to-back transposes.
//!
//! Every tensor the file declares is checked against what the IR computes for it, so a mis-translated op
//! fails at import with the tensor's name rather than producing wrong numbers.
//!
//! Float models (f32, and f16 weights behind `DEQUANTIZE`, which are folded into f32 constants) import
//! fully. Quantized (int8) models import into the representation described in
//! `runtime::kernels::int8`: the ordinary ops on I8 values that carry their tensors' `QuantParams`, the
//! intermediate values an op creates (the NCHW result before the transpose back, the value before a fused
//! activation) carrying the output tensor's parameters. `QUANTIZE` of a float tensor is
//! `QuantizeLinear { rounding: TfLite }`, of an integer tensor a requantizing `QuantizeLinear`; `DEQUANTIZE`
//! is `DequantizeLinear`. Which quantized ops the CPU runtime runs is decided when a session is built.

pub mod builder;
pub mod schema;
mod sparsity;
#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::path::Path;

use crate::ir::{
    infer, verify, Activation, AutoPad, BinaryOp, ConvAttrs, CoordTransform, DType, Graph, NearestMode, Op, PadMode,
    PoolAttrs, QuantParams, ReduceOp, ResizeAttrs, ResizeMode, Tensor, TensorData, UnaryOp, ValueId,
};
use crate::{map_data, Error, Result};
use schema::{activation, builtin_operator as bo, padding, tensor_type as tt};

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
    let model = schema::parse_model(bytes).map_err(|e| Error::InvalidModel(e.to_string()))?;
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
    };
    imp.import_inputs(opts)?;
    let ops = sg.operators();
    for i in 0..ops.map(|o| o.len()).unwrap_or(0) {
        let op = schema::get(ops, i).ok_or_else(|| Error::InvalidModel(format!("operator #{i} is missing")))?;
        imp.import_op(i, op)?;
    }
    for t in schema::to_vec(sg.outputs()) {
        let v = imp.value(t)?;
        imp.g.outputs.push(v);
    }
    verify::verify(&imp.g)?;
    Ok(imp.g)
}

/// The IR dtype of a TFLite tensor type.
pub fn dtype_of(t: i8) -> Option<DType> {
    Some(match t {
        tt::FLOAT32 => DType::F32,
        tt::FLOAT16 => DType::F16,
        tt::BFLOAT16 => DType::BF16,
        tt::FLOAT64 => DType::F64,
        tt::INT8 => DType::I8,
        tt::UINT8 => DType::U8,
        tt::INT16 => DType::I16,
        tt::INT32 => DType::I32,
        tt::INT64 => DType::I64,
        tt::BOOL => DType::Bool,
        _ => return None,
    })
}

/// The TFLite tensor type of an IR dtype.
pub fn tensor_type_of(d: DType) -> i8 {
    match d {
        DType::F32 => tt::FLOAT32,
        DType::F16 => tt::FLOAT16,
        DType::BF16 => tt::BFLOAT16,
        DType::F64 => tt::FLOAT64,
        DType::I8 => tt::INT8,
        DType::U8 => tt::UINT8,
        DType::I16 => tt::INT16,
        DType::I32 => tt::INT32,
        DType::I64 => tt::INT64,
        DType::Bool => tt::BOOL,
    }
}

/// Decodes little-endian tensor bytes.
pub fn decode_data(dtype: DType, bytes: &[u8], n: usize) -> std::result::Result<TensorData, String> {
    let size = dtype.size_bytes();
    if bytes.len() != n * size {
        return Err(format!("has {} bytes of data, its shape needs {} ({n} × {size})", bytes.len(), n * size));
    }
    macro_rules! le {
        ($t:ty, $w:literal) => {
            bytes.chunks_exact($w).map(|c| <$t>::from_le_bytes(c.try_into().expect("chunk size"))).collect()
        };
    }
    Ok(match dtype {
        DType::F32 => TensorData::F32(le!(f32, 4)),
        DType::F64 => TensorData::F64(le!(f64, 8)),
        DType::F16 => TensorData::F16(bytes.chunks_exact(2).map(|c| half::f16::from_le_bytes([c[0], c[1]])).collect()),
        DType::BF16 => TensorData::BF16(bytes.chunks_exact(2).map(|c| half::bf16::from_le_bytes([c[0], c[1]])).collect()),
        DType::I8 => TensorData::I8(bytes.iter().map(|&b| b as i8).collect()),
        DType::U8 => TensorData::U8(bytes.to_vec()),
        DType::I16 => TensorData::I16(le!(i16, 2)),
        DType::I32 => TensorData::I32(le!(i32, 4)),
        DType::I64 => TensorData::I64(le!(i64, 8)),
        DType::Bool => TensorData::Bool(bytes.iter().map(|&b| b != 0).collect()),
    })
}

/// Permutes the dimensions of a dense tensor (`out.shape[i] = shape[perm[i]]`).
pub fn permute_tensor(t: &Tensor, perm: &[usize]) -> Tensor {
    fn go<T: Copy>(v: &[T], shape: &[usize], perm: &[usize]) -> Vec<T> {
        let rank = shape.len();
        let mut in_strides = vec![1usize; rank];
        for i in (0..rank.saturating_sub(1)).rev() {
            in_strides[i] = in_strides[i + 1] * shape[i + 1];
        }
        let out_shape: Vec<usize> = perm.iter().map(|&p| shape[p]).collect();
        let strides: Vec<usize> = perm.iter().map(|&p| in_strides[p]).collect();
        let n = v.len();
        let mut out = Vec::with_capacity(n);
        if n == 0 {
            return out;
        }
        let mut idx = vec![0usize; rank];
        let mut off = 0usize;
        for _ in 0..n {
            out.push(v[off]);
            for d in (0..rank).rev() {
                idx[d] += 1;
                off += strides[d];
                if idx[d] < out_shape[d] {
                    break;
                }
                off -= strides[d] * out_shape[d];
                idx[d] = 0;
            }
        }
        out
    }
    let shape: Vec<usize> = perm.iter().map(|&p| t.shape[p]).collect();
    Tensor { data: map_data!(&t.data, v => go(v, &t.shape, perm)), shape }
}

/// How TFLite computes explicit padding for SAME/VALID: (output size, pad before, pad after).
pub fn tflite_padding(pad: i8, input: usize, kernel: usize, stride: usize, dilation: usize) -> (usize, usize, usize) {
    let eff = (kernel.saturating_sub(1)) * dilation + 1;
    let out = if pad == padding::VALID { (input + stride).saturating_sub(eff) / stride } else { input.div_ceil(stride) };
    let total = ((out.saturating_sub(1)) * stride + eff).saturating_sub(input);
    (out, total / 2, total - total / 2)
}

/// A fused activation of a TFLite op.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Fused {
    None,
    Act(Activation),
    Tanh,
}

struct Importer<'a> {
    model: schema::Model<'a>,
    file: &'a [u8],
    sg: schema::SubGraph<'a>,
    g: Graph,
    /// TFLite tensor index → IR value.
    vals: Vec<Option<ValueId>>,
    /// Compare computed shapes with the file's (off when the caller overrides input shapes).
    check_shapes: bool,
    op_index: usize,
    op_name: String,
}

/// Ops whose quantized output has the input's parameters: data movement, max pooling, nearest resize, and
/// the RELU family that stands for a fused activation (clamping on the same grid).
fn keeps_quant(op: &Op) -> bool {
    (crate::runtime::kernels::int8::moves_data(op) && !matches!(op, Op::DequantizeLinear { .. } | Op::Shape { .. } | Op::Size))
        || matches!(op, Op::MaxPool(_) | Op::Resize(ResizeAttrs { mode: ResizeMode::Nearest, .. }))
}

impl<'a> Importer<'a> {
    // ----- errors -------------------------------------------------------------------------------------

    fn ctx(&self) -> String {
        format!("operator #{} ({})", self.op_index, self.op_name)
    }
    fn unsupported(&self, what: impl std::fmt::Display) -> Error {
        Error::Unsupported(format!("{}: {what}", self.ctx()))
    }
    fn invalid(&self, what: impl std::fmt::Display) -> Error {
        Error::InvalidModel(format!("{}: {what}", self.ctx()))
    }

    // ----- tensors ------------------------------------------------------------------------------------

    fn tensor(&self, t: i32) -> Result<schema::Tensor<'a>> {
        let n = self.vals.len();
        usize::try_from(t)
            .ok()
            .and_then(|i| schema::get(self.sg.tensors(), i))
            .ok_or_else(|| Error::InvalidModel(format!("tensor index {t} is out of range ({n} tensors)")))
    }

    fn tensor_name(&self, t: i32) -> String {
        self.tensor(t).ok().and_then(|t| t.name().map(str::to_string)).filter(|s| !s.is_empty()).unwrap_or_else(|| format!("tensor_{t}"))
    }

    fn declared(&self, t: i32) -> Result<(DType, Vec<usize>)> {
        let tensor = self.tensor(t)?;
        let name = self.tensor_name(t);
        let dtype = dtype_of(tensor.type_())
            .ok_or_else(|| Error::Unsupported(format!("tensor '{name}' has type {}", tt::name(tensor.type_()))))?;
        let shape = schema::to_vec(tensor.shape())
            .into_iter()
            .map(|d| usize::try_from(d).map_err(|_| Error::InvalidModel(format!("tensor '{name}' has dimension {d}"))))
            .collect::<Result<Vec<usize>>>()?;
        Ok((dtype, shape))
    }

    fn quant(&self, t: i32) -> Result<Option<QuantParams>> {
        let tensor = self.tensor(t)?;
        let Some(q) = tensor.quantization() else { return Ok(None) };
        if q.details().is_some() {
            return Err(Error::Unsupported(format!("tensor '{}' uses custom quantization", self.tensor_name(t))));
        }
        let scale = schema::to_vec(q.scale());
        if scale.is_empty() {
            return Ok(None);
        }
        let mut zero_point = schema::to_vec(q.zero_point());
        if zero_point.is_empty() {
            zero_point = vec![0; scale.len()];
        }
        if zero_point.len() != scale.len() {
            return Err(Error::InvalidModel(format!(
                "tensor '{}' has {} scales but {} zero points",
                self.tensor_name(t),
                scale.len(),
                zero_point.len()
            )));
        }
        let axis = if scale.len() > 1 {
            let d = q.quantized_dimension();
            Some(usize::try_from(d).map_err(|_| Error::InvalidModel(format!("quantized_dimension {d}")))?)
        } else {
            None
        };
        Ok(Some(QuantParams { scale, zero_point, axis }))
    }

    /// The IR value of TFLite tensor `t`, creating constants on first use.
    fn value(&mut self, t: i32) -> Result<ValueId> {
        let tensor = self.tensor(t)?;
        let i = t as usize;
        if let Some(v) = self.vals[i] {
            return Ok(v);
        }
        let name = self.tensor_name(t);
        let data = schema::buffer_data(&self.model, self.file, tensor.buffer()).map_err(|m| Error::InvalidModel(format!("tensor '{name}': {m}")))?;
        if data.is_empty() {
            return Err(Error::InvalidModel(format!(
                "tensor '{name}' is read before any operator produces it (and it has no data)"
            )));
        }
        let (dtype, shape) = self.declared(t)?;
        let n = shape.iter().product();
        let dense;
        let data = match tensor.sparsity() {
            // A sparse constant (read by DENSIFY): expanded to its dense data here.
            Some(sp) => {
                dense = sparsity::densify(&sp, &shape, dtype.size_bytes(), data)
                    .map_err(|m| Error::InvalidModel(format!("sparse tensor '{name}': {m}")))?;
                &dense[..]
            }
            None => data,
        };
        let td = decode_data(dtype, data, n).map_err(|m| Error::InvalidModel(format!("tensor '{name}' {m}")))?;
        let v = self.g.add_constant(name, Tensor { shape, data: td });
        self.g.value_mut(v).quant = self.quant(t)?;
        self.vals[i] = Some(v);
        Ok(v)
    }

    fn import_inputs(&mut self, opts: &ImportOptions) -> Result<()> {
        for t in schema::to_vec(self.sg.inputs()) {
            let tensor = self.tensor(t)?;
            let name = self.tensor_name(t);
            let (dtype, mut shape) = self.declared(t)?;
            if tensor.is_variable() {
                return Err(Error::Unsupported(format!("input '{name}' is a variable tensor")));
            }
            let signature = schema::to_vec(tensor.shape_signature());
            if let Some(s) = opts.input_shapes.get(&name) {
                if s.len() != shape.len() {
                    return Err(Error::InputMismatch(format!("input '{name}' has rank {}, the given shape {s:?} has rank {}", shape.len(), s.len())));
                }
                for (k, (&given, &sig)) in s.iter().zip(signature.iter().chain(std::iter::repeat(&0))).enumerate() {
                    if sig > 0 && given as i64 != sig as i64 {
                        return Err(Error::InputMismatch(format!("input '{name}' has a fixed dimension {k} of {sig}, given {given}")));
                    }
                }
                if *s != shape {
                    self.check_shapes = false;
                    shape = s.clone();
                }
            }
            let v = self.g.add_input(name, dtype, shape);
            self.g.value_mut(v).quant = self.quant(t)?;
            self.vals[t as usize] = Some(v);
        }
        Ok(())
    }

    // ----- building -----------------------------------------------------------------------------------

    fn shape(&self, v: ValueId) -> Vec<usize> {
        self.g.value(v).shape.clone()
    }

    fn dtype(&self, v: ValueId) -> DType {
        self.g.value(v).dtype
    }

    /// Adds a single-output node and infers its output.
    fn node(&mut self, op: Op, inputs: Vec<Option<ValueId>>, name: String) -> Result<ValueId> {
        Ok(self.node_n(op, inputs, name, 1)?[0])
    }

    fn node_n(&mut self, op: Op, inputs: Vec<Option<ValueId>>, name: String, n: usize) -> Result<Vec<ValueId>> {
        let outs: Vec<ValueId> = (0..n)
            .map(|k| {
                let nm = if n == 1 { name.clone() } else { format!("{name}:{k}") };
                self.g.add_value(nm, DType::F32, vec![])
            })
            .collect();
        self.g.add_node(name, op, inputs, outs.clone());
        let idx = self.g.nodes.len() - 1;
        infer::infer_node(&mut self.g, idx, &crate::runtime::CpuEval).map_err(|e| match e {
            Error::Unsupported(m) => Error::Unsupported(format!("{}: {m}", self.ctx())),
            other => Error::InvalidModel(format!("{}: {other}", self.ctx())),
        })?;
        // Ops that move data (and max pooling, nearest resize) keep the input's quantization parameters.
        let node = &self.g.nodes[idx];
        let keeps = keeps_quant(&node.op);
        if let (true, Some(x)) = (keeps, node.input(0)) {
            if let Some(q) = self.g.value(x).quant.clone() {
                for &o in &outs {
                    if self.g.value(o).dtype == self.g.value(x).dtype && self.g.value(o).quant.is_none() {
                        self.g.value_mut(o).quant = Some(q.clone());
                    }
                }
            }
        }
        Ok(outs)
    }

    fn op1(&mut self, op: Op, inputs: &[ValueId], name: String) -> Result<ValueId> {
        self.node(op, inputs.iter().map(|&v| Some(v)).collect(), name)
    }

    fn const_i64(&mut self, name: String, v: Vec<i64>) -> ValueId {
        let n = v.len();
        self.g.add_constant(name, Tensor::from_i64(vec![n], v))
    }

    fn transpose(&mut self, v: ValueId, perm: &[usize], name: String) -> Result<ValueId> {
        self.op1(Op::Transpose { perm: perm.to_vec() }, &[v], name)
    }

    /// Permutes a weight: the data itself when it is a constant, else a Transpose node.
    fn permute(&mut self, v: ValueId, perm: &[usize], name: String) -> Result<ValueId> {
        if let Some(c) = self.g.constant(v) {
            let t = permute_tensor(c, perm);
            let q = self.g.value(v).quant.clone().map(|mut q| {
                q.axis = q.axis.and_then(|a| perm.iter().position(|&p| p == a));
                q
            });
            let nv = self.g.add_constant(name, t);
            self.g.value_mut(nv).quant = q;
            Ok(nv)
        } else {
            self.transpose(v, perm, name)
        }
    }

    fn nhwc_to_nchw(&mut self, v: ValueId, base: &str) -> Result<ValueId> {
        if self.shape(v).len() != 4 {
            return Err(self.invalid(format!("expects a 4-D NHWC input, got shape {:?}", self.shape(v))));
        }
        self.transpose(v, &[0, 3, 1, 2], format!("{base}/to_nchw"))
    }

    fn nchw_to_nhwc(&mut self, v: ValueId, name: String) -> Result<ValueId> {
        self.transpose(v, &[0, 2, 3, 1], name)
    }

    fn apply_fused(&mut self, v: ValueId, f: Fused, name: String) -> Result<ValueId> {
        match f {
            Fused::None => Ok(v),
            Fused::Tanh => self.op1(Op::Unary(UnaryOp::Tanh), &[v], name),
            Fused::Act(Activation::Relu) => self.op1(Op::Unary(UnaryOp::Relu), &[v], name),
            Fused::Act(Activation::Relu6) => self.op1(Op::Unary(UnaryOp::Clip { min: 0.0, max: 6.0 }), &[v], name),
            Fused::Act(Activation::Clip { min, max }) => self.op1(Op::Unary(UnaryOp::Clip { min, max }), &[v], name),
        }
    }

    fn fused(&self, a: i8) -> Result<Fused> {
        Ok(match a {
            activation::NONE => Fused::None,
            activation::RELU => Fused::Act(Activation::Relu),
            activation::RELU6 => Fused::Act(Activation::Relu6),
            activation::RELU_N1_TO_1 => Fused::Act(Activation::Clip { min: -1.0, max: 1.0 }),
            activation::TANH => Fused::Tanh,
            other => return Err(self.unsupported(format!("fused activation {}", activation::name(other)))),
        })
    }

    /// Binds the op's result `v` to TFLite tensor `t`: names it, attaches quantization, checks the shape.
    fn bind(&mut self, t: i32, mut v: ValueId) -> Result<()> {
        let i = usize::try_from(t).map_err(|_| self.invalid(format!("output tensor index {t}")))?;
        self.tensor(t)?;
        if self.vals[i].is_some() {
            return Err(self.invalid(format!("tensor '{}' is produced twice", self.tensor_name(t))));
        }
        let name = self.tensor_name(t);
        let reused = self.g.inputs.contains(&v) || self.vals.contains(&Some(v));
        if reused {
            v = self.op1(Op::Identity, &[v], name.clone())?;
        }
        let (dtype, shape) = self.declared(t)?;
        let val = self.g.value(v);
        if val.dtype != dtype {
            return Err(self.invalid(format!("tensor '{name}' is declared {dtype} but the op computes {}", val.dtype)));
        }
        if self.check_shapes && !val.dynamic && val.shape != shape {
            return Err(self.invalid(format!("tensor '{name}' is declared {shape:?} but the op computes {:?}", val.shape)));
        }
        let quant = self.quant(t)?;
        if let Some(q) = &quant {
            self.fill_quant_backwards(v, q);
        }
        let val = self.g.value_mut(v);
        val.name = name.clone();
        val.quant = quant;
        if let Some(n) = self.g.nodes.iter_mut().rev().find(|n| n.outputs.contains(&v)) {
            if n.outputs.len() == 1 {
                n.name = name;
            }
        }
        self.vals[i] = Some(v);
        Ok(())
    }

    /// The intermediate values an op created on the way to its output (the NCHW result before the transpose
    /// back, the product before a fused activation) carry the output tensor's parameters: walks back from `v`
    /// through parameter-preserving producers, filling values of the same dtype that have none.
    fn fill_quant_backwards(&mut self, v: ValueId, q: &QuantParams) {
        let dtype = self.g.value(v).dtype;
        if !matches!(dtype, DType::I8 | DType::U8) {
            return;
        }
        let mut cur = v;
        loop {
            let Some(node) = self.g.nodes.iter().rev().find(|n| n.outputs.contains(&cur)) else { return };
            let relu = matches!(node.op, Op::Unary(UnaryOp::Relu | UnaryOp::Clip { .. }));
            if !(keeps_quant(&node.op) || relu) {
                return;
            }
            let Some(x) = node.input(0) else { return };
            let xv = self.g.value(x);
            if xv.dtype != dtype || xv.quant.is_some() || xv.constant.is_some() {
                return;
            }
            self.g.value_mut(x).quant = Some(q.clone());
            cur = x;
        }
    }

    /// Constant integer contents of TFLite tensor `t` (shape inputs, axes, paddings...).
    fn const_ints(&mut self, t: i32, what: &str) -> Result<Vec<i64>> {
        let v = self.value(t)?;
        match self.g.constant(v) {
            Some(c) if c.dtype().is_int() => Ok(c.to_i64_vec()),
            Some(c) => Err(self.invalid(format!("{what} has type {}, expected an integer type", c.dtype()))),
            None => Err(self.unsupported(format!("{what} is not a constant"))),
        }
    }

    // ----- operators ----------------------------------------------------------------------------------

    fn import_op(&mut self, index: usize, op: schema::Operator<'a>) -> Result<()> {
        self.op_index = index;
        let codes = self.model.operator_codes();
        let n_codes = codes.map(|c| c.len()).unwrap_or(0);
        let code = schema::get(codes, op.opcode_index() as usize).ok_or_else(|| {
            Error::InvalidModel(format!("operator #{index}: opcode index {} is out of range ({n_codes} operator codes)", op.opcode_index()))
        })?;
        self.op_name = code.name();
        let code = code.code();
        let ins = schema::to_vec(op.inputs());
        let outs = schema::to_vec(op.outputs());
        if outs.is_empty() {
            return Err(self.invalid("has no outputs"));
        }

        let input = |k: usize| -> Option<i32> { ins.get(k).copied().filter(|&t| t >= 0) };
        let req = |s: &Self, k: usize| -> Result<i32> { input(k).ok_or_else(|| s.invalid(format!("input {k} is missing"))) };
        let out_name = self.tensor_name(outs[0]);
        let base = out_name.clone();

        macro_rules! opts {
            ($t:ty) => {
                op.options::<$t>().ok_or_else(|| self.invalid(concat!("missing ", stringify!($t))))?
            };
        }

        let result: ValueId = match code {
            bo::CONV_2D | bo::DEPTHWISE_CONV_2D => {
                let x = self.value(req(self, 0)?)?;
                let w = self.value(req(self, 1)?)?;
                let b = input(2).map(|t| self.value(t)).transpose()?;
                let depthwise = code == bo::DEPTHWISE_CONV_2D;
                let (pad, sw, sh, dw, dh, act) = if depthwise {
                    let o = opts!(schema::DepthwiseConv2DOptions);
                    (o.padding(), o.stride_w(), o.stride_h(), o.dilation_w_factor(), o.dilation_h_factor(), o.fused_activation_function())
                } else {
                    let o = opts!(schema::Conv2DOptions);
                    (o.padding(), o.stride_w(), o.stride_h(), o.dilation_w_factor(), o.dilation_h_factor(), o.fused_activation_function())
                };
                let [sw, sh, dw, dh] = self.positive([sw, sh, dw, dh], "strides and dilations")?;
                let xs = self.shape(x);
                let ws = self.shape(w);
                if xs.len() != 4 || ws.len() != 4 {
                    return Err(self.invalid(format!("expects 4-D input and filter, got {xs:?} and {ws:?}")));
                }
                let (kh, kw) = (ws[1], ws[2]);
                let group = if depthwise {
                    xs[3]
                } else {
                    if ws[3] == 0 || xs[3] % ws[3] != 0 {
                        return Err(self.invalid(format!("input channels {} are not a multiple of filter channels {}", xs[3], ws[3])));
                    }
                    xs[3] / ws[3]
                };
                let (_, pt, pb) = tflite_padding(pad, xs[1], kh, sh, dh);
                let (_, pl, pr) = tflite_padding(pad, xs[2], kw, sw, dw);
                let fused = self.fused(act)?;
                let xn = self.nhwc_to_nchw(x, &base)?;
                let perm = if depthwise { [3, 0, 1, 2] } else { [0, 3, 1, 2] };
                let wn = self.permute(w, &perm, format!("{base}/filter_oihw"))?;
                let attrs = ConvAttrs {
                    kernel_shape: vec![kh, kw],
                    strides: vec![sh, sw],
                    dilations: vec![dh, dw],
                    pads: vec![pt, pl, pb, pr],
                    auto_pad: AutoPad::NotSet,
                    group,
                    activation: match fused {
                        Fused::Act(a) => Some(a),
                        _ => None,
                    },
                };
                let y = self.node(Op::Conv(attrs), vec![Some(xn), Some(wn), b], format!("{base}/nchw"))?;
                let y = if fused == Fused::Tanh { self.apply_fused(y, fused, format!("{base}/tanh"))? } else { y };
                self.nchw_to_nhwc(y, base.clone())?
            }
            bo::AVERAGE_POOL_2D | bo::MAX_POOL_2D => {
                let x = self.value(req(self, 0)?)?;
                let o = opts!(schema::Pool2DOptions);
                let [sw, sh, fw, fh] = self.positive([o.stride_w(), o.stride_h(), o.filter_width(), o.filter_height()], "strides and filter sizes")?;
                let xs = self.shape(x);
                if xs.len() != 4 {
                    return Err(self.invalid(format!("expects a 4-D input, got {xs:?}")));
                }
                let (_, pt, pb) = tflite_padding(o.padding(), xs[1], fh, sh, 1);
                let (_, pl, pr) = tflite_padding(o.padding(), xs[2], fw, sw, 1);
                let fused = self.fused(o.fused_activation_function())?;
                let attrs = PoolAttrs {
                    kernel_shape: vec![fh, fw],
                    strides: vec![sh, sw],
                    dilations: vec![],
                    pads: vec![pt, pl, pb, pr],
                    auto_pad: AutoPad::NotSet,
                    ceil_mode: false,
                    count_include_pad: false,
                };
                let xn = self.nhwc_to_nchw(x, &base)?;
                let pop = if code == bo::MAX_POOL_2D { Op::MaxPool(attrs) } else { Op::AveragePool(attrs) };
                let y = self.op1(pop, &[xn], format!("{base}/nchw"))?;
                let y = self.apply_fused(y, fused, format!("{base}/activation"))?;
                self.nchw_to_nhwc(y, base.clone())?
            }
            bo::FULLY_CONNECTED => {
                let o = opts!(schema::FullyConnectedOptions);
                if o.weights_format() != 0 {
                    return Err(self.unsupported("shuffled FULLY_CONNECTED weights"));
                }
                let x = self.value(req(self, 0)?)?;
                let w = self.value(req(self, 1)?)?;
                let b = input(2).map(|t| self.value(t)).transpose()?;
                let xs = self.shape(x);
                let ws = self.shape(w);
                if ws.len() != 2 || ws[1] == 0 {
                    return Err(self.invalid(format!("expects a 2-D filter [units, depth], got {ws:?}")));
                }
                let (n_out, k) = (ws[0], ws[1]);
                let numel: usize = xs.iter().product();
                if numel % k != 0 {
                    return Err(self.invalid(format!("input of {numel} elements is not a multiple of the filter depth {k}")));
                }
                let batch = numel / k;
                let x2 = if xs == [batch, k] {
                    x
                } else {
                    let s = self.const_i64(format!("{base}/flat_shape"), vec![batch as i64, k as i64]);
                    self.op1(Op::Reshape { allowzero: false }, &[x, s], format!("{base}/flatten"))?
                };
                let fused = self.fused(o.fused_activation_function())?;
                let gemm = Op::Gemm {
                    alpha: 1.0,
                    beta: 1.0,
                    trans_a: false,
                    trans_b: true,
                    activation: match fused {
                        Fused::Act(a) => Some(a),
                        _ => None,
                    },
                };
                let keep = o.keep_num_dims() && xs.len() > 2;
                let y = self.node(gemm, vec![Some(x2), Some(w), b], if keep || fused == Fused::Tanh { format!("{base}/gemm") } else { base.clone() })?;
                let y = if fused == Fused::Tanh { self.apply_fused(y, fused, format!("{base}/tanh"))? } else { y };
                if keep {
                    let mut s: Vec<i64> = xs[..xs.len() - 1].iter().map(|&d| d as i64).collect();
                    s.push(n_out as i64);
                    let s = self.const_i64(format!("{base}/out_shape"), s);
                    self.op1(Op::Reshape { allowzero: false }, &[y, s], base.clone())?
                } else {
                    y
                }
            }
            bo::ADD | bo::SUB | bo::MUL | bo::DIV => {
                let a = self.value(req(self, 0)?)?;
                let b = self.value(req(self, 1)?)?;
                let (bin, act) = match code {
                    bo::ADD => (BinaryOp::Add, op.options::<schema::AddOptions>().map(|o| o.fused_activation_function())),
                    bo::SUB => (BinaryOp::Sub, op.options::<schema::SubOptions>().map(|o| o.fused_activation_function())),
                    bo::MUL => (BinaryOp::Mul, op.options::<schema::MulOptions>().map(|o| o.fused_activation_function())),
                    _ => (BinaryOp::Div, op.options::<schema::DivOptions>().map(|o| o.fused_activation_function())),
                };
                let fused = self.fused(act.unwrap_or(activation::NONE))?;
                let y = self.op1(Op::Binary(bin, None), &[a, b], if fused == Fused::None { base.clone() } else { format!("{base}/op") })?;
                self.apply_fused(y, fused, base.clone())?
            }
            bo::MAXIMUM | bo::MINIMUM | bo::POW | bo::LESS | bo::LESS_EQUAL | bo::GREATER | bo::GREATER_EQUAL | bo::EQUAL | bo::PRELU => {
                let a = self.value(req(self, 0)?)?;
                let b = self.value(req(self, 1)?)?;
                let bin = match code {
                    bo::MAXIMUM => BinaryOp::Max,
                    bo::MINIMUM => BinaryOp::Min,
                    bo::POW => BinaryOp::Pow,
                    bo::LESS => BinaryOp::Less,
                    bo::LESS_EQUAL => BinaryOp::LessOrEqual,
                    bo::GREATER => BinaryOp::Greater,
                    bo::GREATER_EQUAL => BinaryOp::GreaterOrEqual,
                    bo::EQUAL => BinaryOp::Equal,
                    _ => BinaryOp::PRelu,
                };
                self.op1(Op::Binary(bin, None), &[a, b], base.clone())?
            }
            bo::SQUARED_DIFFERENCE => {
                let a = self.value(req(self, 0)?)?;
                let b = self.value(req(self, 1)?)?;
                let d = self.op1(Op::Binary(BinaryOp::Sub, None), &[a, b], format!("{base}/diff"))?;
                self.op1(Op::Binary(BinaryOp::Mul, None), &[d, d], base.clone())?
            }
            bo::SQUARE => {
                let a = self.value(req(self, 0)?)?;
                self.op1(Op::Binary(BinaryOp::Mul, None), &[a, a], base.clone())?
            }
            bo::LOGISTIC | bo::TANH | bo::RELU | bo::RELU6 | bo::RELU_N1_TO_1 | bo::HARD_SWISH | bo::EXP | bo::LOG | bo::SQRT
            | bo::ABS | bo::NEG | bo::FLOOR | bo::CEIL | bo::SIN | bo::COS | bo::LEAKY_RELU | bo::ELU | bo::GELU => {
                let x = self.value(req(self, 0)?)?;
                let u = match code {
                    bo::LOGISTIC => UnaryOp::Sigmoid,
                    bo::TANH => UnaryOp::Tanh,
                    bo::RELU => UnaryOp::Relu,
                    bo::RELU6 => UnaryOp::Clip { min: 0.0, max: 6.0 },
                    bo::RELU_N1_TO_1 => UnaryOp::Clip { min: -1.0, max: 1.0 },
                    bo::HARD_SWISH => UnaryOp::HardSwish,
                    bo::EXP => UnaryOp::Exp,
                    bo::LOG => UnaryOp::Log,
                    bo::SQRT => UnaryOp::Sqrt,
                    bo::ABS => UnaryOp::Abs,
                    bo::NEG => UnaryOp::Neg,
                    bo::FLOOR => UnaryOp::Floor,
                    bo::CEIL => UnaryOp::Ceil,
                    bo::SIN => UnaryOp::Sin,
                    bo::COS => UnaryOp::Cos,
                    bo::LEAKY_RELU => UnaryOp::LeakyRelu { alpha: opts!(schema::LeakyReluOptions).alpha() },
                    bo::ELU => UnaryOp::Elu { alpha: 1.0 },
                    _ => UnaryOp::Gelu { tanh: op.options::<schema::GeluOptions>().map(|o| o.approximate()).unwrap_or(false) },
                };
                self.op1(Op::Unary(u), &[x], base.clone())?
            }
            bo::RSQRT => {
                let x = self.value(req(self, 0)?)?;
                let s = self.op1(Op::Unary(UnaryOp::Sqrt), &[x], format!("{base}/sqrt"))?;
                self.op1(Op::Unary(UnaryOp::Reciprocal), &[s], base.clone())?
            }
            bo::SOFTMAX | bo::LOG_SOFTMAX => {
                let x = self.value(req(self, 0)?)?;
                let axis = self.shape(x).len().saturating_sub(1);
                let beta = if code == bo::SOFTMAX { opts!(schema::SoftmaxOptions).beta() } else { 1.0 };
                if beta != 1.0 && self.g.value(x).quant.is_some() {
                    return Err(self.unsupported(format!("quantized SOFTMAX with beta {beta}")));
                }
                let x = if beta != 1.0 {
                    let b = self.g.add_constant(format!("{base}/beta"), Tensor::from_f32(vec![], vec![beta]));
                    self.op1(Op::Binary(BinaryOp::Mul, None), &[x, b], format!("{base}/scaled"))?
                } else {
                    x
                };
                let sop = if code == bo::SOFTMAX { Op::Softmax { axis } } else { Op::LogSoftmax { axis } };
                self.op1(sop, &[x], base.clone())?
            }
            bo::CONCATENATION => {
                let o = opts!(schema::ConcatenationOptions);
                let vals = ins.iter().filter(|&&t| t >= 0).map(|&t| self.value(t)).collect::<Result<Vec<_>>>()?;
                let rank = vals.first().map(|&v| self.shape(v).len()).unwrap_or(0);
                let axis = self.axis(o.axis() as i64, rank)?;
                let fused = self.fused(o.fused_activation_function())?;
                let y = self.op1(Op::Concat { axis }, &vals, if fused == Fused::None { base.clone() } else { format!("{base}/concat") })?;
                self.apply_fused(y, fused, base.clone())?
            }
            bo::MEAN | bo::SUM | bo::REDUCE_MAX | bo::REDUCE_MIN | bo::REDUCE_PROD => {
                let x = self.value(req(self, 0)?)?;
                let rank = self.shape(x).len();
                let mut axes = Vec::new();
                for a in self.const_ints(req(self, 1)?, "the reduction axes")? {
                    axes.push(self.axis(a, rank)?);
                }
                axes.sort_unstable();
                axes.dedup();
                let keepdims = op.options::<schema::ReducerOptions>().map(|o| o.keep_dims()).unwrap_or(false);
                let rop = match code {
                    bo::MEAN => ReduceOp::Mean,
                    bo::SUM => ReduceOp::Sum,
                    bo::REDUCE_MAX => ReduceOp::Max,
                    bo::REDUCE_MIN => ReduceOp::Min,
                    _ => ReduceOp::Prod,
                };
                self.op1(Op::Reduce { op: rop, axes: Some(axes), keepdims, noop_with_empty_axes: true }, &[x], base.clone())?
            }
            bo::RESHAPE => {
                let x = self.value(req(self, 0)?)?;
                // As TFLite: a 1-D shape input, else the options' new_shape; a shape computed at run time
                // falls back to the output's declared (static) shape.
                let shape_input = match input(1) {
                    Some(t) if self.declared(t)?.1.len() == 1 => {
                        let v = self.value(t)?;
                        self.g.constant(v).map(|c| c.to_i64_vec())
                    }
                    _ => None,
                };
                let shape: Vec<i64> = match shape_input {
                    Some(s) => s,
                    None => match op.options::<schema::ReshapeOptions>().and_then(|o| o.new_shape()).filter(|s| !s.is_empty() || input(1).is_none()) {
                        Some(s) => s.iter().map(|d| d as i64).collect(),
                        None => self.declared(outs[0])?.1.iter().map(|&d| d as i64).collect(),
                    },
                };
                let s = self.const_i64(format!("{base}/shape"), shape);
                self.op1(Op::Reshape { allowzero: true }, &[x, s], base.clone())?
            }
            bo::SQUEEZE => {
                let x = self.value(req(self, 0)?)?;
                let xs = self.shape(x);
                let dims = op.options::<schema::SqueezeOptions>().map(|o| schema::to_vec(o.squeeze_dims())).unwrap_or_default();
                let mut axes: Vec<i64> = Vec::new();
                if dims.is_empty() {
                    axes = xs.iter().enumerate().filter(|(_, &d)| d == 1).map(|(i, _)| i as i64).collect();
                } else {
                    for d in dims {
                        axes.push(self.axis(d as i64, xs.len())? as i64);
                    }
                }
                let s = self.const_i64(format!("{base}/axes"), axes);
                self.op1(Op::Squeeze { axes: None }, &[x, s], base.clone())?
            }
            bo::EXPAND_DIMS => {
                let x = self.value(req(self, 0)?)?;
                let rank = self.shape(x).len();
                let a = self.const_ints(req(self, 1)?, "the axis")?;
                let a = *a.first().ok_or_else(|| self.invalid("the axis is empty"))?;
                let axis = self.axis(a, rank + 1)?;
                let s = self.const_i64(format!("{base}/axes"), vec![axis as i64]);
                self.op1(Op::Unsqueeze { axes: None }, &[x, s], base.clone())?
            }
            bo::TRANSPOSE => {
                let x = self.value(req(self, 0)?)?;
                let rank = self.shape(x).len();
                let perm = self.const_ints(req(self, 1)?, "the permutation")?;
                let perm = perm.into_iter().map(|p| self.axis(p, rank)).collect::<Result<Vec<_>>>()?;
                self.transpose(x, &perm, base.clone())?
            }
            bo::PAD | bo::PADV2 | bo::MIRROR_PAD => {
                let x = self.value(req(self, 0)?)?;
                let rank = self.shape(x).len();
                let p = self.const_ints(req(self, 1)?, "the paddings")?;
                if p.len() != 2 * rank {
                    return Err(self.invalid(format!("paddings have {} values for a rank-{rank} input", p.len())));
                }
                let mut pads: Vec<i64> = (0..rank).map(|i| p[2 * i]).collect();
                pads.extend((0..rank).map(|i| p[2 * i + 1]));
                let pads = self.const_i64(format!("{base}/pads"), pads);
                let mode = if code == bo::MIRROR_PAD {
                    match op.options::<schema::MirrorPadOptions>().map(|o| o.mode()).unwrap_or(0) {
                        0 => PadMode::Reflect,
                        _ => return Err(self.unsupported("MIRROR_PAD in SYMMETRIC mode")),
                    }
                } else {
                    PadMode::Constant
                };
                let fill = match (code, input(2)) {
                    (bo::PADV2, Some(t)) => Some(self.value(t)?),
                    _ => {
                        // Quantized tensors pad with the zero point (the real value 0).
                        let zp = self.g.value(x).quant.as_ref().map(|q| q.zero_point[0]).unwrap_or(0);
                        let dt = self.dtype(x);
                        let c = Tensor::new(vec![], map_data!(TensorData::zeros(dt, 1), v => v.into_iter().map(|_| crate::ir::Element::from_f64(zp as f64)).collect()))
                            .expect("one element");
                        (mode == PadMode::Constant).then(|| self.g.add_constant(format!("{base}/pad_value"), c))
                    }
                };
                self.node(Op::Pad { mode }, vec![Some(x), Some(pads), fill], base.clone())?
            }
            bo::RESIZE_BILINEAR | bo::RESIZE_NEAREST_NEIGHBOR => {
                let x = self.value(req(self, 0)?)?;
                let size = self.const_ints(req(self, 1)?, "the output size")?;
                let xs = self.shape(x);
                if xs.len() != 4 || size.len() != 2 {
                    return Err(self.invalid(format!("expects a 4-D input and 2 sizes, got {xs:?} and {size:?}")));
                }
                let (align, half) = if code == bo::RESIZE_BILINEAR {
                    let o = opts!(schema::ResizeBilinearOptions);
                    (o.align_corners(), o.half_pixel_centers())
                } else {
                    let o = opts!(schema::ResizeNearestNeighborOptions);
                    (o.align_corners(), o.half_pixel_centers())
                };
                let (mode, coord, nearest) = match (code == bo::RESIZE_BILINEAR, align, half) {
                    (_, true, true) => return Err(self.invalid("align_corners and half_pixel_centers are both set")),
                    (true, true, false) => (ResizeMode::Linear, CoordTransform::AlignCorners, NearestMode::Floor),
                    (true, false, true) => (ResizeMode::Linear, CoordTransform::HalfPixel, NearestMode::Floor),
                    (true, false, false) => (ResizeMode::Linear, CoordTransform::Asymmetric, NearestMode::Floor),
                    // TFLite rounds (x * scale) half away from zero; the values are never negative.
                    (false, true, false) => (ResizeMode::Nearest, CoordTransform::AlignCorners, NearestMode::RoundPreferCeil),
                    // floor((x + 0.5) * scale) == round_prefer_ceil((x + 0.5) * scale - 0.5).
                    (false, false, true) => (ResizeMode::Nearest, CoordTransform::HalfPixel, NearestMode::RoundPreferCeil),
                    (false, false, false) => (ResizeMode::Nearest, CoordTransform::Asymmetric, NearestMode::Floor),
                };
                let attrs = ResizeAttrs { mode, coord, nearest, cubic_coeff_a: -0.75, exclude_outside: false, extrapolation_value: 0.0 };
                let xn = self.nhwc_to_nchw(x, &base)?;
                let sizes = self.const_i64(format!("{base}/sizes"), vec![xs[0] as i64, xs[3] as i64, size[0], size[1]]);
                let y = self.node(Op::Resize(attrs), vec![Some(xn), None, None, Some(sizes)], format!("{base}/nchw"))?;
                self.nchw_to_nhwc(y, base.clone())?
            }
            bo::SPACE_TO_DEPTH | bo::DEPTH_TO_SPACE => {
                let x = self.value(req(self, 0)?)?;
                let bs = if code == bo::SPACE_TO_DEPTH {
                    opts!(schema::SpaceToDepthOptions).block_size()
                } else {
                    opts!(schema::DepthToSpaceOptions).block_size()
                };
                let [bs] = self.positive([bs], "block size")?;
                let xn = self.nhwc_to_nchw(x, &base)?;
                let dop = if code == bo::SPACE_TO_DEPTH { Op::SpaceToDepth { blocksize: bs } } else { Op::DepthToSpace { blocksize: bs, crd: false } };
                let y = self.op1(dop, &[xn], format!("{base}/nchw"))?;
                self.nchw_to_nhwc(y, base.clone())?
            }
            bo::TILE => {
                let x = self.value(req(self, 0)?)?;
                let reps = self.const_ints(req(self, 1)?, "the multiples")?;
                let r = self.const_i64(format!("{base}/repeats"), reps);
                self.op1(Op::Tile, &[x, r], base.clone())?
            }
            bo::GATHER => {
                let o = opts!(schema::GatherOptions);
                if o.batch_dims() != 0 {
                    return Err(self.unsupported(format!("GATHER with batch_dims {}", o.batch_dims())));
                }
                let x = self.value(req(self, 0)?)?;
                let idx = self.value(req(self, 1)?)?;
                let axis = self.axis(o.axis() as i64, self.shape(x).len())?;
                self.op1(Op::Gather { axis }, &[x, idx], base.clone())?
            }
            bo::STRIDED_SLICE => self.strided_slice(&op, req(self, 0)?, req(self, 1)?, req(self, 2)?, req(self, 3)?, &base)?,
            bo::SLICE => {
                let x = self.value(req(self, 0)?)?;
                let xs = self.shape(x);
                let begin = self.const_ints(req(self, 1)?, "the begin")?;
                let size = self.const_ints(req(self, 2)?, "the size")?;
                if begin.len() != xs.len() || size.len() != xs.len() {
                    return Err(self.invalid(format!("begin {begin:?} and size {size:?} do not match the input rank {}", xs.len())));
                }
                let ends: Vec<i64> = begin.iter().zip(&size).zip(&xs).map(|((&b, &s), &d)| if s < 0 { d as i64 } else { b + s }).collect();
                let axes: Vec<i64> = (0..xs.len() as i64).collect();
                let st = self.const_i64(format!("{base}/starts"), begin);
                let en = self.const_i64(format!("{base}/ends"), ends);
                let ax = self.const_i64(format!("{base}/axes"), axes);
                self.op1(Op::Slice, &[x, st, en, ax], base.clone())?
            }
            bo::BATCH_MATMUL => {
                let o = opts!(schema::BatchMatMulOptions);
                let mut a = self.value(req(self, 0)?)?;
                let mut b = self.value(req(self, 1)?)?;
                for (v, adj, tag) in [(&mut a, o.adj_x(), "adj_x"), (&mut b, o.adj_y(), "adj_y")] {
                    if adj {
                        let r = self.shape(*v).len();
                        if r < 2 {
                            return Err(self.invalid("adjoint of a rank-1 operand"));
                        }
                        let mut perm: Vec<usize> = (0..r).collect();
                        perm.swap(r - 2, r - 1);
                        *v = self.permute(*v, &perm, format!("{base}/{tag}"))?;
                    }
                }
                self.op1(Op::MatMul, &[a, b], base.clone())?
            }
            bo::CAST => {
                let x = self.value(req(self, 0)?)?;
                let (to, _) = self.declared(outs[0])?;
                self.op1(Op::Cast { to }, &[x], base.clone())?
            }
            bo::ARG_MAX | bo::ARG_MIN => {
                let x = self.value(req(self, 0)?)?;
                let a = self.const_ints(req(self, 1)?, "the axis")?;
                let a = *a.first().ok_or_else(|| self.invalid("the axis is empty"))?;
                let axis = self.axis(a, self.shape(x).len())?;
                let (to, _) = self.declared(outs[0])?;
                let rop = Op::ArgReduce { max: code == bo::ARG_MAX, axis, keepdims: false, select_last_index: false };
                if to == DType::I64 {
                    self.op1(rop, &[x], base.clone())?
                } else {
                    let y = self.op1(rop, &[x], format!("{base}/i64"))?;
                    self.op1(Op::Cast { to }, &[y], base.clone())?
                }
            }
            bo::QUANTIZE => {
                let x = self.value(req(self, 0)?)?;
                let (to, _) = self.declared(outs[0])?;
                let q = self.quant(outs[0])?.ok_or_else(|| self.invalid("the output has no quantization parameters"))?;
                if !self.dtype(x).is_float() && (self.g.value(x).quant.is_none() || q.scale.len() != 1) {
                    return Err(self.unsupported("re-quantization (QUANTIZE of an integer tensor) needs per-tensor parameters on both sides"));
                }
                let (s, z, axis) = self.qparams(&q, to, &base)?;
                let rounding = crate::ir::QuantRounding::TfLite;
                self.node(Op::QuantizeLinear { axis, to, rounding }, vec![Some(x), Some(s), Some(z)], base.clone())?
            }
            bo::DENSIFY => {
                // Its input is a sparse constant, already expanded when read: the output is that constant.
                let x = self.value(req(self, 0)?)?;
                if self.g.constant(x).is_none() {
                    return Err(self.unsupported("DENSIFY of a tensor computed at run time"));
                }
                x
            }
            bo::DEQUANTIZE => {
                let xt = req(self, 0)?;
                let x = self.value(xt)?;
                let dt = self.dtype(x);
                if dt.is_float() {
                    // f16 weights: fold into an f32 constant.
                    if let Some(c) = self.g.constant(x) {
                        let f = Tensor::from_f32(c.shape.clone(), c.to_f64_vec().into_iter().map(|v| v as f32).collect());
                        self.g.add_constant(base.clone(), f)
                    } else {
                        self.op1(Op::Cast { to: DType::F32 }, &[x], base.clone())?
                    }
                } else {
                    let q = self.quant(xt)?.ok_or_else(|| self.invalid("the input has no quantization parameters"))?;
                    let (s, z, axis) = self.qparams(&q, dt, &base)?;
                    self.node(Op::DequantizeLinear { axis }, vec![Some(x), Some(s), Some(z)], base.clone())?
                }
            }
            _ => return Err(Error::Unsupported(format!("operator #{index}: {} is not supported by the TFLite importer", self.op_name))),
        };
        if outs.len() != 1 {
            return Err(self.invalid(format!("has {} outputs, expected 1", outs.len())));
        }
        self.bind(outs[0], result)
    }

    fn positive<const N: usize>(&self, v: [i32; N], what: &str) -> Result<[usize; N]> {
        let mut out = [0usize; N];
        for (o, &x) in out.iter_mut().zip(&v) {
            *o = usize::try_from(x).ok().filter(|&x| x > 0).ok_or_else(|| self.invalid(format!("{what} must be positive, got {v:?}")))?;
        }
        Ok(out)
    }

    fn axis(&self, a: i64, rank: usize) -> Result<usize> {
        let r = rank as i64;
        let n = if a < 0 { a + r } else { a };
        if n < 0 || n >= r.max(1) && !(rank == 0 && n == 0) {
            return Err(self.invalid(format!("axis {a} is out of range for rank {rank}")));
        }
        Ok(n as usize)
    }

    /// Scale and zero-point constants of a (de)quantization, and its axis.
    fn qparams(&mut self, q: &QuantParams, qtype: DType, base: &str) -> Result<(ValueId, ValueId, i64)> {
        if !matches!(qtype, DType::I8 | DType::U8 | DType::I16) {
            return Err(self.unsupported(format!("quantization to {qtype}")));
        }
        let shape = if q.axis.is_some() { vec![q.scale.len()] } else { vec![] };
        let s = self.g.add_constant(format!("{base}/scale"), Tensor::from_f32(shape.clone(), q.scale.clone()));
        let zd = match qtype {
            DType::I8 => TensorData::I8(q.zero_point.iter().map(|&z| z as i8).collect()),
            DType::U8 => TensorData::U8(q.zero_point.iter().map(|&z| z as u8).collect()),
            _ => TensorData::I16(q.zero_point.iter().map(|&z| z as i16).collect()),
        };
        let z = self.g.add_constant(format!("{base}/zero_point"), Tensor::new(shape, zd).expect("zero points match scales"));
        Ok((s, z, q.axis.unwrap_or(0) as i64))
    }

    /// STRIDED_SLICE with constant begin/end/strides, begin/end/shrink masks (no ellipsis or new axes).
    fn strided_slice(&mut self, op: &schema::Operator<'a>, xt: i32, bt: i32, et: i32, st: i32, base: &str) -> Result<ValueId> {
        let o = op.options::<schema::StridedSliceOptions>();
        let (bm, em, ellipsis, newaxis, shrink, offset) = o
            .map(|o| (o.begin_mask(), o.end_mask(), o.ellipsis_mask(), o.new_axis_mask(), o.shrink_axis_mask(), o.offset()))
            .unwrap_or_default();
        if ellipsis != 0 || newaxis != 0 || offset {
            return Err(self.unsupported("STRIDED_SLICE with an ellipsis mask, a new-axis mask or offset=true"));
        }
        let x = self.value(xt)?;
        let xs = self.shape(x);
        let begin = self.const_ints(bt, "the begin")?;
        let end = self.const_ints(et, "the end")?;
        let strides = self.const_ints(st, "the strides")?;
        let n = begin.len();
        if end.len() != n || strides.len() != n || n > xs.len() {
            return Err(self.invalid(format!("begin {begin:?}, end {end:?}, strides {strides:?} do not fit the input shape {xs:?}")));
        }
        let (mut starts, mut ends, mut axes, mut steps, mut out_shape) = (vec![], vec![], vec![], vec![], vec![]);
        for (i, &dim) in xs.iter().enumerate() {
            if i >= n {
                out_shape.push(dim as i64);
                continue;
            }
            let d = dim as i64;
            let bit = |m: i32| m & (1 << i) != 0;
            let stride = strides[i];
            if stride == 0 {
                return Err(self.invalid("a stride is 0"));
            }
            if bit(shrink) {
                let b = if begin[i] < 0 { begin[i] + d } else { begin[i] };
                if b < 0 || b >= d {
                    return Err(self.invalid(format!("shrink index {} is out of range for dimension {i} of size {d}", begin[i])));
                }
                starts.push(b);
                ends.push(b + 1);
                axes.push(i as i64);
                steps.push(1);
                continue;
            }
            // TensorFlow's canonicalisation: masks select the full range; others are wrapped then clamped.
            let (lo, hi) = if stride > 0 { (0, d) } else { (-1, d - 1) };
            let canon = |v: i64| {
                let v = if v < 0 { v + d } else { v };
                v.clamp(lo, hi)
            };
            let b = if bit(bm) { if stride > 0 { lo } else { hi } } else { canon(begin[i]) };
            let e = if bit(em) { if stride > 0 { hi } else { lo } } else { canon(end[i]) };
            let len = if stride > 0 { (e - b + stride - 1).max(0) / stride } else { (b - e - stride - 1).max(0) / -stride };
            if len == 0 {
                return Err(self.unsupported(format!("STRIDED_SLICE producing an empty dimension {i}")));
            }
            // ONNX Slice reads a negative end as counting from the back: spell "before index 0" as i64::MIN.
            starts.push(b);
            ends.push(if e < 0 { i64::MIN } else { e });
            axes.push(i as i64);
            steps.push(stride);
            out_shape.push(len);
        }
        let st = self.const_i64(format!("{base}/starts"), starts);
        let en = self.const_i64(format!("{base}/ends"), ends);
        let ax = self.const_i64(format!("{base}/axes"), axes);
        let sp = self.const_i64(format!("{base}/steps"), steps);
        let sliced = self.op1(Op::Slice, &[x, st, en, ax, sp], if shrink != 0 { format!("{base}/slice") } else { base.to_string() })?;
        if shrink == 0 {
            return Ok(sliced);
        }
        let shape = self.const_i64(format!("{base}/shape"), out_shape);
        self.op1(Op::Reshape { allowzero: true }, &[sliced, shape], base.to_string())
    }
}

