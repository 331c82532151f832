//! The import state of a TFLite model and what every op uses: reading tensors (types, shapes, quantization,
//! constant data), adding nodes with inferred outputs, the NHWC/NCHW layout transposes, fused activations, and
//! binding an op's result to the tensor the file declares for it.

use super::ImportOptions;
use crate::format::tflite::schema::{self, activation, tensor_type as tt};
use crate::format::tflite::{decode_data, dtype_of, sparsity};
use crate::ir::{infer, Activation, BinaryOp, DType, Graph, Op, QuantParams, ResizeAttrs, ResizeMode, Tensor, UnaryOp, ValueId};
use crate::{Error, Result};

/// A fused activation of a TFLite op.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Fused {
    None,
    Act(Activation),
    Tanh,
}

pub(super) struct Importer<'a> {
    pub(super) model: schema::Model<'a>,
    pub(super) file: &'a [u8],
    pub(super) sg: schema::SubGraph<'a>,
    pub(super) g: Graph,
    /// TFLite tensor index → IR value.
    pub(super) vals: Vec<Option<ValueId>>,
    /// Compare computed shapes with the file's (off when the caller overrides input shapes).
    pub(super) check_shapes: bool,
    pub(super) op_index: usize,
    pub(super) op_name: String,
    /// The subgraphs being imported, outermost first (the main graph is 0): WHILE/IF bodies nest this deep, and
    /// a body that reaches one of them again is recursion, which TFLite does not allow.
    pub(super) stack: Vec<usize>,
    /// Marks the nodes added while set as [`Node::keep_float`](crate::ir::Node): an op's expansion whose values
    /// must stay float in an int8 graph (MediaPipe's coordinate math).
    pub(super) keep_float: bool,
}

/// Ops whose quantized output has the input's parameters: data movement, max pooling, nearest resize, and
/// the RELU family that stands for a fused activation (clamping on the same grid).
fn keeps_quant(op: &Op) -> bool {
    (crate::ir::ops::quantize::moves_data(op) && !matches!(op, Op::DequantizeLinear { .. } | Op::Shape { .. } | Op::Size))
        || matches!(op, Op::MaxPool(_) | Op::Resize(ResizeAttrs { mode: ResizeMode::Nearest, .. }))
}

impl<'a> Importer<'a> {
    // ----- errors -------------------------------------------------------------------------------------

    pub(super) fn ctx(&self) -> String {
        format!("operator #{} ({})", self.op_index, self.op_name)
    }
    pub(super) fn unsupported(&self, what: impl std::fmt::Display) -> Error {
        Error::Unsupported(format!("{}: {what}", self.ctx()))
    }
    pub(super) fn invalid(&self, what: impl std::fmt::Display) -> Error {
        Error::InvalidModel(format!("{}: {what}", self.ctx()))
    }

    // ----- tensors ------------------------------------------------------------------------------------

    pub(super) fn tensor(&self, t: i32) -> Result<schema::Tensor<'a>> {
        let n = self.vals.len();
        usize::try_from(t)
            .ok()
            .and_then(|i| schema::get(self.sg.tensors(), i))
            .ok_or_else(|| Error::InvalidModel(format!("tensor index {t} is out of range ({n} tensors)")))
    }

    pub(super) fn tensor_name(&self, t: i32) -> String {
        self.tensor(t).ok().and_then(|t| t.name().map(str::to_string)).filter(|s| !s.is_empty()).unwrap_or_else(|| format!("tensor_{t}"))
    }

    pub(super) fn declared(&self, t: i32) -> Result<(DType, Vec<usize>)> {
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

    pub(super) fn quant(&self, t: i32) -> Result<Option<QuantParams>> {
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
        // What LiteRT's Prepare requires of every quantized tensor: finite positive scales, zero points on the
        // integer grid of the tensor's type (a fuzzed zero point of 14745600 on a uint8 tensor reached the
        // kernels' clamps with min > max)
        let name = self.tensor_name(t);
        if let Some(s) = scale.iter().find(|s| !(s.is_finite() && **s > 0.0)) {
            return Err(Error::InvalidModel(format!("tensor '{name}' has quantization scale {s} (must be finite and positive)")));
        }
        let (lo, hi): (i64, i64) = match tensor.type_() {
            tt::INT8 => (-128, 127),
            tt::UINT8 => (0, 255),
            tt::INT16 => (-32768, 32767),
            _ => (i32::MIN as i64, i32::MAX as i64),
        };
        if let Some(z) = zero_point.iter().find(|z| !(lo..=hi).contains(*z)) {
            return Err(Error::InvalidModel(format!("tensor '{name}' has zero point {z}, outside [{lo}, {hi}] for its type")));
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
    pub(super) fn value(&mut self, t: i32) -> Result<ValueId> {
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
        let n = crate::limits::numel(&shape)
            .and_then(|n| usize::try_from(n).ok())
            .ok_or_else(|| Error::InvalidModel(format!("tensor '{name}' has shape {shape:?}, too many elements")))?;
        let dense;
        let data = match tensor.sparsity() {
            // A sparse constant (read by DENSIFY): expanded to its dense data here, so its dense size is checked
            // against the memory budget first (a few bytes of sparse data can claim any shape).
            Some(sp) => {
                crate::limits::check_tensor(&format!("sparse tensor '{name}' densified"), dtype, &shape)?;
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

    pub(super) fn import_inputs(&mut self, opts: &ImportOptions) -> Result<()> {
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

    pub(super) fn shape(&self, v: ValueId) -> Vec<usize> {
        self.g.value(v).shape.clone()
    }

    pub(super) fn dtype(&self, v: ValueId) -> DType {
        self.g.value(v).dtype
    }

    /// Adds a single-output node and infers its output.
    pub(super) fn node(&mut self, op: Op, inputs: Vec<Option<ValueId>>, name: String) -> Result<ValueId> {
        Ok(self.node_n(op, inputs, name, 1)?[0])
    }

    pub(super) fn node_n(&mut self, op: Op, inputs: Vec<Option<ValueId>>, name: String, n: usize) -> Result<Vec<ValueId>> {
        let outs: Vec<ValueId> = (0..n)
            .map(|k| {
                let nm = if n == 1 { name.clone() } else { format!("{name}:{k}") };
                self.g.add_value(nm, DType::F32, vec![])
            })
            .collect();
        self.g.add_node(name, op, inputs, outs.clone());
        let idx = self.g.nodes.len() - 1;
        self.g.nodes[idx].keep_float = self.keep_float;
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

    pub(super) fn op1(&mut self, op: Op, inputs: &[ValueId], name: String) -> Result<ValueId> {
        self.node(op, inputs.iter().map(|&v| Some(v)).collect(), name)
    }

    pub(super) fn const_i64(&mut self, name: String, v: Vec<i64>) -> ValueId {
        let n = v.len();
        self.g.add_constant(name, Tensor::from_i64(vec![n], v))
    }

    /// `op` on `v` and a new i64 vector constant `values` named `const_name` (a shape, the axes), as `name`.
    pub(super) fn op_with_i64(&mut self, op: Op, v: ValueId, const_name: String, values: Vec<i64>, name: String) -> Result<ValueId> {
        let c = self.const_i64(const_name, values);
        self.op1(op, &[v, c], name)
    }

    pub(super) fn transpose(&mut self, v: ValueId, perm: &[usize], name: String) -> Result<ValueId> {
        self.op1(Op::Transpose { perm: perm.to_vec() }, &[v], name)
    }

    /// Permutes a weight: the data itself when it is a constant, else a Transpose node.
    pub(super) fn permute(&mut self, v: ValueId, perm: &[usize], name: String) -> Result<ValueId> {
        if let Some(c) = self.g.constant(v) {
            let t = c.permuted(perm);
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

    pub(super) fn nhwc_to_nchw(&mut self, v: ValueId, base: &str) -> Result<ValueId> {
        if self.shape(v).len() != 4 {
            return Err(self.invalid(format!("expects a 4-D NHWC input, got shape {:?}", self.shape(v))));
        }
        self.transpose(v, &[0, 3, 1, 2], format!("{base}/to_nchw"))
    }

    pub(super) fn nchw_to_nhwc(&mut self, v: ValueId, name: String) -> Result<ValueId> {
        self.transpose(v, &[0, 2, 3, 1], name)
    }

    pub(super) fn apply_fused(&mut self, v: ValueId, f: Fused, name: String) -> Result<ValueId> {
        match f {
            Fused::None => Ok(v),
            Fused::Tanh => self.op1(Op::Unary(UnaryOp::Tanh), &[v], name),
            Fused::Act(Activation::Relu) => self.op1(Op::Unary(UnaryOp::Relu), &[v], name),
            Fused::Act(Activation::Relu6) => self.op1(Op::Unary(UnaryOp::Clip { min: 0.0, max: 6.0 }), &[v], name),
            Fused::Act(Activation::Clip { min, max }) => self.op1(Op::Unary(UnaryOp::Clip { min, max }), &[v], name),
            Fused::Act(Activation::Silu) => {
                let s = self.op1(Op::Unary(UnaryOp::Sigmoid), &[v], format!("{name}/sigmoid"))?;
                self.op1(Op::Binary(BinaryOp::Mul, None), &[v, s], name)
            }
        }
    }

    pub(super) fn fused(&self, a: i8) -> Result<Fused> {
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
    pub(super) fn bind(&mut self, t: i32, mut v: ValueId) -> Result<()> {
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
        // A dimension the signature leaves free (-1) is recorded as 1 in the shape: any size fits it.
        let signature = schema::to_vec(self.tensor(t)?.shape_signature());
        let fits = val.shape.len() == shape.len()
            && val.shape.iter().zip(&shape).enumerate().all(|(k, (&got, &want))| got == want || signature.get(k) == Some(&-1));
        if self.check_shapes && !val.dynamic && !fits {
            return Err(self.invalid(format!("tensor '{name}' is declared {shape:?} but the op computes {:?}", val.shape)));
        }
        let quant = self.quant(t)?;
        if let Some(q) = &quant {
            self.fill_quant_backwards(v, q);
        }
        let val = self.g.value_mut(v);
        if val.dynamic {
            // known only at run time; the file's shape is the better placeholder (it has the right rank, which
            // the ops reading it check)
            val.shape = shape;
        }
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
    pub(super) fn fill_quant_backwards(&mut self, v: ValueId, q: &QuantParams) {
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
    pub(super) fn const_ints(&mut self, t: i32, what: &str) -> Result<Vec<i64>> {
        let v = self.value(t)?;
        match self.g.constant(v) {
            Some(c) if c.dtype().is_int() => Ok(c.to_i64_vec()),
            Some(c) => Err(self.invalid(format!("{what} has type {}, expected an integer type", c.dtype()))),
            None => Err(self.unsupported(format!("{what} is not a constant"))),
        }
    }

    pub(super) fn positive<const N: usize>(&self, v: [i32; N], what: &str) -> Result<[usize; N]> {
        let mut out = [0usize; N];
        for (o, &x) in out.iter_mut().zip(&v) {
            *o = usize::try_from(x).ok().filter(|&x| x > 0).ok_or_else(|| self.invalid(format!("{what} must be positive, got {v:?}")))?;
        }
        Ok(out)
    }

    pub(super) fn axis(&self, a: i64, rank: usize) -> Result<usize> {
        let r = rank as i64;
        let n = if a < 0 { a + r } else { a };
        if n < 0 || n >= r.max(1) && !(rank == 0 && n == 0) {
            return Err(self.invalid(format!("axis {a} is out of range for rank {rank}")));
        }
        Ok(n as usize)
    }

    /// `axis` for an op that indexes a dimension of a rank-`rank` input (UNPACK, SPLIT, SPLIT_V): unlike
    /// [`Importer::axis`], a scalar input has no axis 0.
    pub(super) fn dim_axis(&self, a: i64, rank: usize) -> Result<usize> {
        if rank == 0 {
            return Err(self.invalid(format!("axis {a} of a scalar input: the op needs an input of rank 1 or more")));
        }
        self.axis(a, rank)
    }
}
