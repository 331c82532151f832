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
//! Quantized graphs (from `tpu_sdk_core::quant`: I8 values with [`QuantParams`], I8 weights, I32 biases)
//! export as int8 TFLite models: every tensor carries its quantization (per-axis parameters get the
//! `quantized_dimension` of the TFLite layout: OHWI filters axis 0, 1HWC depthwise filters axis 3), ops get
//! the versions TFLite gives their int8 kernels, `QuantizeLinear`/`DequantizeLinear` become
//! `QUANTIZE`/`DEQUANTIZE`, and the model records its `min_runtime_version` as TFLite's converter does.

use std::collections::HashMap;

use tpu_sdk_core::import::tflite::builder::*;
use tpu_sdk_core::import::tflite::schema::{activation as act, builtin_operator as bo, padding};
use tpu_sdk_core::import::tflite::{permute_tensor, tensor_type_of, tflite_padding};
use tpu_sdk_core::ir::{
    Activation, AutoPad, BinaryOp, CoordTransform, DType, Graph, NearestMode, Op, PadMode, ReduceOp, ResizeMode, Tensor,
    QuantParams, UnaryOp, ValueId,
};
use tpu_sdk_core::{Error, Result};

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
    // TFLite has no hard sigmoid (and no int8 DIV): the same rewrite quantization applies (Mul and Add with a
    // clip, multiplication by the reciprocal) makes float graphs exportable too.
    let prepared;
    let g = if g.nodes.iter().any(|n| matches!(n.op, Op::Unary(UnaryOp::HardSigmoid { .. }))) {
        let mut c = g.clone();
        tpu_sdk_core::quant::prepare(&mut c);
        prepared = c;
        &prepared
    } else {
        g
    };
    let mut ex = Ex { g, m: ModelT::default(), codes: HashMap::new(), layouts: HashMap::new(), copies: HashMap::new() };
    ex.m.version = 3;
    ex.m.description = Some(opts.description.clone());
    ex.m.buffers.push(BufferT::default());
    ex.m.subgraphs.push(SubGraphT { name: Some("main".into()), ..Default::default() });
    for v in &g.values {
        if v.dynamic {
            return Err(Error::Unsupported(format!("TFLite export: value '{}' has a dynamic shape", v.name)));
        }
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
    for (k, n) in g.nodes.iter().enumerate() {
        if n.outputs.iter().all(|o| g.value(*o).constant.is_some()) {
            continue; // folded at import
        }
        ex.node(k).map_err(|e| match e {
            Error::Unsupported(m) => Error::Unsupported(format!("TFLite export of node '{}' ({}): {m}", n.name, n.op.name())),
            other => other,
        })?;
    }
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
    Ok(Exported { bytes: ex.m.to_bytes(), inputs })
}

const NHWC: [usize; 4] = [0, 2, 3, 1];

fn ident(r: usize) -> Vec<usize> {
    (0..r).collect()
}

fn permuted(shape: &[usize], perm: &[usize]) -> Vec<usize> {
    perm.iter().map(|&p| shape[p]).collect()
}

fn inverse(perm: &[usize]) -> Vec<usize> {
    let mut inv = vec![0; perm.len()];
    for (i, &p) in perm.iter().enumerate() {
        inv[p] = i;
    }
    inv
}

fn i32s(v: impl IntoIterator<Item = usize>) -> Vec<i32> {
    v.into_iter().map(|x| x as i32).collect()
}

fn le_bytes(t: &Tensor) -> Vec<u8> {
    use tpu_sdk_core::ir::TensorData as D;
    match &t.data {
        D::F32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        D::F64(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        D::F16(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        D::BF16(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        D::I8(v) => v.iter().map(|&x| x as u8).collect(),
        D::U8(v) => v.clone(),
        D::I16(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        D::I32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        D::I64(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        D::Bool(v) => v.iter().map(|&x| x as u8).collect(),
    }
}

/// The bounds of an activation as a clip.
fn clip_bounds(a: Activation) -> (f32, f32) {
    match a {
        Activation::Relu => (0.0, f32::INFINITY),
        Activation::Relu6 => (0.0, 6.0),
        Activation::Clip { min, max } => (min, max),
    }
}

/// An activation as a TFLite fused activation code, or NONE plus the clip to apply after the op.
fn split_activation(a: Option<Activation>) -> (i8, Option<(f32, f32)>) {
    match fused_code(a) {
        Some(c) => (c, None),
        None => (act::NONE, a.map(clip_bounds)),
    }
}

/// The fused activation code of an IR activation, if TFLite has one.
fn fused_code(a: Option<Activation>) -> Option<i8> {
    match a {
        None => Some(act::NONE),
        Some(Activation::Relu) => Some(act::RELU),
        Some(Activation::Relu6) => Some(act::RELU6),
        Some(Activation::Clip { min, max }) if min == 0.0 && max == 6.0 => Some(act::RELU6),
        Some(Activation::Clip { min, max }) if min == -1.0 && max == 1.0 => Some(act::RELU_N1_TO_1),
        Some(Activation::Clip { min, max }) if min == 0.0 && max == f32::INFINITY => Some(act::RELU),
        Some(Activation::Clip { .. }) => None,
    }
}

struct Ex<'g> {
    g: &'g Graph,
    m: ModelT,
    codes: HashMap<i32, (u32, i32)>,
    /// IR value → (tensor, layout).
    layouts: HashMap<ValueId, (i32, Vec<usize>)>,
    /// (IR value, layout) → tensor, for transposed copies and permuted constants.
    copies: HashMap<(ValueId, Vec<usize>), i32>,
}

impl<'g> Ex<'g> {
    fn sg(&mut self) -> &mut SubGraphT {
        &mut self.m.subgraphs[0]
    }
    fn sg_ref(&self) -> &SubGraphT {
        &self.m.subgraphs[0]
    }

    /// Whether `v` feeds a layout-sensitive op, directly or through QUANTIZE/DEQUANTIZE (which export in
    /// their input's layout: a float-I/O int8 model's image input is NHWC too).
    fn wants_nhwc(&self, v: ValueId) -> bool {
        self.g.nodes.iter().any(|n| {
            n.input(0) == Some(v)
                && (matches!(n.op, Op::Conv(_) | Op::MaxPool(_) | Op::AveragePool(_) | Op::GlobalAveragePool | Op::GlobalMaxPool | Op::Resize(_))
                    || matches!(n.op, Op::QuantizeLinear { .. } | Op::DequantizeLinear { .. }) && self.wants_nhwc(n.outputs[0]))
        })
    }

    fn tensor(&mut self, name: &str, shape: &[usize], dtype: DType) -> Result<i32> {
        if !matches!(dtype, DType::F32 | DType::I32 | DType::I64 | DType::Bool | DType::I8 | DType::U8) {
            return Err(Error::Unsupported(format!("TFLite export of {dtype} tensor '{name}' (f32 and int8 graphs only)")));
        }
        let t = TensorT { shape: i32s(shape.iter().copied()), type_: tensor_type_of(dtype), name: name.to_string(), ..Default::default() };
        self.sg().tensors.push(t);
        Ok(self.sg_ref().tensors.len() as i32 - 1)
    }

    fn constant(&mut self, name: &str, t: &Tensor) -> Result<i32> {
        // Index-like constants are int32 in TFLite.
        let t = if t.dtype() == DType::I64 {
            let v: Vec<i32> = t.to_i64_vec().iter().map(|&x| x.clamp(i32::MIN as i64, i32::MAX as i64) as i32).collect();
            Tensor::from_vec(t.shape.clone(), v).expect("same length")
        } else {
            t.clone()
        };
        let idx = self.tensor(name, &t.shape, t.dtype())?;
        self.m.buffers.push(BufferT { data: le_bytes(&t) });
        let b = self.m.buffers.len() as u32 - 1;
        self.sg().tensors[idx as usize].buffer = b;
        Ok(idx)
    }

    fn const_i32(&mut self, name: &str, v: Vec<i32>) -> Result<i32> {
        let n = v.len();
        self.constant(name, &Tensor::from_vec(vec![n], v).expect("1-D"))
    }

    fn const_f32(&mut self, name: &str, shape: Vec<usize>, v: Vec<f32>) -> Result<i32> {
        self.constant(name, &Tensor::from_f32(shape, v))
    }

    fn op(&mut self, code: i32, version: i32, ins: Vec<i32>, outs: Vec<i32>, opts: Option<OptionsT>) {
        let int8 = ins.iter().chain(&outs).any(|&t| t >= 0 && self.sg_ref().tensors[t as usize].type_ == tensor_type_of(DType::I8));
        let version = if int8 { int8_version(code, version) } else { version };
        let n = self.m.operator_codes.len() as u32;
        let e = self.codes.entry(code).or_insert((n, version));
        e.1 = e.1.max(version);
        let idx = e.0;
        if idx == n {
            self.m.operator_codes.push(OperatorCodeT::builtin(code, version));
        } else {
            self.m.operator_codes[idx as usize].version = e.1;
        }
        self.sg().operators.push(OperatorT { opcode_index: idx, inputs: ins, outputs: outs, builtin_options: opts, custom_options: None });
    }

    fn name_output(&mut self, t: i32, name: &str) {
        // The output tensor takes the IR name; other tensors holding it (NHWC copies) are renamed.
        for (i, x) in self.sg().tensors.iter_mut().enumerate() {
            if x.name == name && i != t as usize {
                x.name = format!("{name}/internal{i}");
            }
        }
        self.sg().tensors[t as usize].name = name.to_string();
    }

    /// Tensor of IR value `v` in layout `perm`: the value itself, a permuted constant or a TRANSPOSE.
    fn get(&mut self, v: ValueId, perm: &[usize]) -> Result<i32> {
        if let Some((t, p)) = self.layouts.get(&v) {
            if p == perm {
                return Ok(*t);
            }
        }
        if let Some(&t) = self.copies.get(&(v, perm.to_vec())) {
            return Ok(t);
        }
        let val = self.g.value(v);
        let name = if perm == ident(perm.len()).as_slice() { val.name.clone() } else { format!("{}/p{}", val.name, perm.iter().map(|p| p.to_string()).collect::<String>()) };
        let t = if let Some(c) = &val.constant {
            let pc = permute_tensor(c, perm);
            let t = self.constant(&name, &pc)?;
            self.set_quant(t, v, perm);
            t
        } else {
            let (src, p) = self.layouts.get(&v).cloned().ok_or_else(|| Error::InvalidModel(format!("value '{}' is used before it is exported", val.name)))?;
            // tensor dim j = IR dim perm[j] = src dim inv(p)[perm[j]].
            let inv = inverse(&p);
            let r: Vec<usize> = perm.iter().map(|&d| inv[d]).collect();
            let t = self.tensor(&name, &permuted(&val.shape, perm), val.dtype)?;
            self.set_quant(t, v, perm);
            // When only size-1 dims move ([N,1,1,C] ↔ [N,C,1,1]) the element order is unchanged: a RESHAPE
            // does it, which every runtime (and the Edge TPU) handles, unlike TRANSPOSE.
            let moved: Vec<usize> = r.iter().copied().filter(|&d| val.shape[p[d]] != 1).collect();
            if moved.windows(2).all(|w| w[0] < w[1]) {
                let shape = i32s(permuted(&val.shape, perm));
                let st = self.const_i32(&format!("{name}/shape"), shape.clone())?;
                self.op(bo::RESHAPE, 1, vec![src, st], vec![t], Some(OptionsT::reshape(shape)));
            } else {
                let pt = self.const_i32(&format!("{name}/perm"), i32s(r))?;
                self.op(bo::TRANSPOSE, 1, vec![src, pt], vec![t], None);
            }
            t
        };
        self.copies.insert((v, perm.to_vec()), t);
        Ok(t)
    }

    /// The layout of a value (identity for constants and unknown values).
    fn layout(&self, v: ValueId) -> Vec<usize> {
        self.layouts.get(&v).map(|(_, p)| p.clone()).unwrap_or_else(|| ident(self.g.value(v).shape.len()))
    }

    /// Creates the output tensor of IR value `v` in layout `perm`.
    fn out(&mut self, v: ValueId, perm: Vec<usize>) -> Result<i32> {
        let val = self.g.value(v);
        let t = self.tensor(&val.name, &permuted(&val.shape, &perm), val.dtype)?;
        self.set_quant(t, v, &perm);
        self.layouts.insert(v, (t, perm));
        Ok(t)
    }

    /// A constant operand broadcast against a rank-`r` value in layout `perm`: numpy-aligned to rank r,
    /// then permuted (a scalar or 1-element constant stays as it is).
    fn broadcast_const(&mut self, v: ValueId, r: usize, perm: &[usize]) -> Result<i32> {
        let c = self.g.value(v).constant.clone().expect("constant");
        if c.len() == 1 || c.shape.len() > r {
            let t = self.constant(&self.g.value(v).name.clone(), &c)?;
            self.set_quant(t, v, &ident(c.shape.len()));
            return Ok(t);
        }
        let mut shape = vec![1; r - c.shape.len()];
        shape.extend_from_slice(&c.shape);
        let aligned = Tensor { shape, data: c.data.clone() };
        let pc = permute_tensor(&aligned, perm);
        let name = format!("{}/bcast", self.g.value(v).name);
        let t = self.constant(&name, &pc)?;
        self.set_quant(t, v, perm);
        Ok(t)
    }

    /// What remains of the clip `[min, max]` applied to IR value `y`: on an int8 value, a bound that maps to
    /// (or beyond) the end of the int8 range is already applied by saturation, as TFLite's
    /// `CalculateActivationRangeQuantized` would compute it, so no op is needed for it. A clip fused into an
    /// int8 op (e.g. hard-sigmoid's `clip(x, 0, 1)`, whose output range is at most [0, 1]) usually vanishes.
    fn clip_left(&self, y: ValueId, clip: Option<(f32, f32)>) -> Option<(f32, f32)> {
        let (min, max) = clip?;
        let v = self.g.value(y);
        let Some(p) = v.quant.as_ref().filter(|p| v.dtype == DType::I8 && p.scale.len() == 1) else { return Some((min, max)) };
        let q = |x: f32| p.zero_point[0] as f64 + (x as f64 / p.scale[0] as f64).round();
        let min = if min.is_finite() && q(min) > -128.0 { min } else { f32::NEG_INFINITY };
        let max = if max.is_finite() && q(max) < 127.0 { max } else { f32::INFINITY };
        (min > f32::NEG_INFINITY || max < f32::INFINITY).then_some((min, max))
    }

    /// Sets tensor `t`'s quantization from IR value `v` (held in layout `perm`), if `v` is quantized.
    fn set_quant(&mut self, t: i32, v: ValueId, perm: &[usize]) {
        if let Some(q) = quantization(self.g.value(v).quant.as_ref(), perm) {
            self.sg().tensors[t as usize].quantization = Some(q);
        }
    }

    /// A new tensor with the type and quantization of tensor `like` and the given shape.
    fn tensor_like(&mut self, name: &str, shape: &[usize], like: i32) -> Result<i32> {
        let l = self.sg_ref().tensors[like as usize].clone();
        let t = TensorT { shape: i32s(shape.iter().copied()), type_: l.type_, name: name.to_string(), quantization: l.quantization, ..Default::default() };
        self.sg().tensors.push(t);
        Ok(self.sg_ref().tensors.len() as i32 - 1)
    }

    /// A scalar clip bound for tensor `dst`: float, or int8 with `dst`'s parameters.
    fn bound(&mut self, name: &str, x: f32, dst: i32) -> Result<i32> {
        let d = self.sg_ref().tensors[dst as usize].clone();
        match d.quantization {
            Some(q) if d.type_ == tensor_type_of(DType::I8) => {
                let (s, z) = (q.scale[0], q.zero_point[0]);
                let v = ((x as f64 / s as f64).round() as i64 + z).clamp(-128, 127) as i8;
                let t = self.constant(name, &Tensor::scalar(v))?;
                self.sg().tensors[t as usize].quantization = Some(QuantizationT { scale: vec![s], zero_point: vec![z], ..Default::default() });
                Ok(t)
            }
            _ => self.const_f32(name, vec![], vec![x]),
        }
    }

    /// Adds the `min_runtime_version` metadata entry TFLite's converter writes: the highest runtime version
    /// any (op, version) pair of the model needs, as a 16-byte zero-padded string.
    fn min_runtime_version(&mut self) {
        let mut best: Option<(Vec<u32>, &'static str)> = None;
        for c in &self.m.operator_codes {
            if let Some(v) = runtime_version(c.builtin_code, c.version) {
                let key: Vec<u32> = v.split('.').map(|p| p.parse().unwrap_or(0)).collect();
                if best.as_ref().is_none_or(|(b, _)| key > *b) {
                    best = Some((key, v));
                }
            }
        }
        let Some((_, v)) = best else { return };
        let mut data = v.as_bytes().to_vec();
        data.resize(16, 0);
        self.m.buffers.push(BufferT { data });
        let buffer = self.m.buffers.len() as u32 - 1;
        self.m.metadata.push(MetadataT { name: "min_runtime_version".into(), buffer });
    }

    fn unsupported(&self, what: impl std::fmt::Display) -> Error {
        Error::Unsupported(what.to_string())
    }

    fn node(&mut self, k: usize) -> Result<()> {
        let g = self.g;
        let n = &g.nodes[k];
        let y = n.outputs[0];
        let rank = |v: ValueId| g.value(v).shape.len();
        let req = |i: usize| n.input(i).ok_or_else(|| Error::InvalidModel(format!("node '{}' lacks input {i}", n.name)));
        match &n.op {
            Op::Identity => {
                let x = req(0)?;
                let p = self.layout(x);
                let t = self.get(x, &p)?;
                self.layouts.insert(y, (t, p));
            }
            Op::Conv(a) => {
                let x = req(0)?;
                let w = req(1)?;
                let ws = g.value(w).shape.clone();
                let xs = g.value(x).shape.clone();
                if xs.len() != 4 || ws.len() != 4 {
                    return Err(self.unsupported("only 2-D convolutions export"));
                }
                let wc = g.value(w).constant.clone().ok_or_else(|| self.unsupported("non-constant weights"))?;
                let (c_in, c_out) = (xs[1], ws[0]);
                let depthwise = a.group > 1 && a.group == c_in && ws[1] == 1;
                if a.group != 1 && !depthwise {
                    return Err(self.unsupported(format!("grouped convolution (group {})", a.group)));
                }
                let (kh, kw) = (ws[2], ws[3]);
                let strides = if a.strides.is_empty() { vec![1, 1] } else { a.strides.clone() };
                let dil = if a.dilations.is_empty() { vec![1, 1] } else { a.dilations.clone() };
                let (pad, xin) = self.spatial_padding(x, &a.pads, a.auto_pad, [kh, kw], &strides, &dil, 0.0, &n.name)?;
                let wperm: &[usize] = if depthwise { &[1, 2, 3, 0] } else { &[0, 2, 3, 1] };
                let wt = permute_tensor(&wc, wperm);
                let wname = format!("{}/filter", g.value(w).name);
                let wi = self.constant(&wname, &wt)?;
                self.set_quant(wi, w, wperm);
                let bi = match n.input(2) {
                    Some(b) => {
                        let bc = g.value(b).constant.clone().ok_or_else(|| self.unsupported("non-constant bias"))?;
                        let bi = self.constant(&g.value(b).name.clone(), &bc)?;
                        self.set_quant(bi, b, &[0]);
                        bi
                    }
                    None => self.const_f32(&format!("{}/bias", n.name), vec![c_out], vec![0.0; c_out])?,
                };
                let (fa, clip) = split_activation(a.activation);
                let clip = self.clip_left(y, clip);
                let yname = g.value(y).name.clone();
                let ys = permuted(&g.value(y).shape, &NHWC);
                let yt = self.out(y, NHWC.to_vec())?;
                let conv_out = if clip.is_some() { self.tensor_like(&format!("{yname}/conv"), &ys, yt)? } else { yt };
                let (code, opts, version) = if depthwise {
                    let v = if dil != [1, 1] { 2 } else { 1 };
                    (bo::DEPTHWISE_CONV_2D, OptionsT::depthwise_conv2d(pad, strides[1] as i32, strides[0] as i32, (c_out / c_in) as i32, fa, dil[1] as i32, dil[0] as i32), v)
                } else {
                    (bo::CONV_2D, OptionsT::conv2d(pad, strides[1] as i32, strides[0] as i32, fa, dil[1] as i32, dil[0] as i32), 1)
                };
                self.op(code, version, vec![xin, wi, bi], vec![conv_out], Some(opts));
                if let Some((lo, hi)) = clip {
                    self.clip_into(conv_out, yt, &yname, &ys, lo, hi)?;
                }
            }
            Op::MaxPool(a) | Op::AveragePool(a) => {
                let x = req(0)?;
                if g.value(x).shape.len() != 4 || a.kernel_shape.len() != 2 {
                    return Err(self.unsupported("only 2-D pooling exports"));
                }
                if a.dilations.iter().any(|&d| d != 1) {
                    return Err(self.unsupported("dilated pooling"));
                }
                let strides = if a.strides.is_empty() { vec![1, 1] } else { a.strides.clone() };
                let max = matches!(n.op, Op::MaxPool(_));
                if !max && a.count_include_pad && a.pads.iter().any(|&p| p != 0) {
                    return Err(self.unsupported("average pooling that counts padding"));
                }
                let (pad, xin) = self.spatial_padding(x, &a.pads, a.auto_pad, [a.kernel_shape[0], a.kernel_shape[1]], &strides, &[1, 1], f32::NAN, &n.name)?;
                let ys = g.value(y).shape.clone();
                let xs = g.value(x).shape.clone();
                let pad_same = if pad == padding::SAME { padding::SAME } else { padding::VALID };
                let (oh, _, _) = tflite_padding(pad_same, xs[2], a.kernel_shape[0], strides[0], 1);
                let (ow, _, _) = tflite_padding(pad_same, xs[3], a.kernel_shape[1], strides[1], 1);
                if (oh, ow) != (ys[2], ys[3]) {
                    return Err(self.unsupported(format!("pooling output {}x{} that TFLite padding cannot produce (ceil_mode?)", ys[2], ys[3])));
                }
                let yt = self.out(y, NHWC.to_vec())?;
                let opts = OptionsT::pool2d(pad, strides[1] as i32, strides[0] as i32, a.kernel_shape[1] as i32, a.kernel_shape[0] as i32, act::NONE);
                self.op(if max { bo::MAX_POOL_2D } else { bo::AVERAGE_POOL_2D }, 1, vec![xin], vec![yt], Some(opts));
            }
            Op::GlobalAveragePool | Op::GlobalMaxPool => {
                let x = req(0)?;
                if rank(x) != 4 {
                    return Err(self.unsupported("global pooling of a non-4-D tensor"));
                }
                let xt = self.get(x, &NHWC)?;
                let axes = self.const_i32(&format!("{}/axes", n.name), vec![1, 2])?;
                let yt = self.out(y, NHWC.to_vec())?;
                let code = if matches!(n.op, Op::GlobalAveragePool) { bo::MEAN } else { bo::REDUCE_MAX };
                self.op(code, 1, vec![xt, axes], vec![yt], Some(OptionsT::reducer(true)));
            }
            Op::Gemm { alpha, beta, trans_a, trans_b, activation } => {
                let a = req(0)?;
                let b = req(1)?;
                let at = if *trans_a { self.get(a, &[1, 0])? } else { self.get(a, &[0, 1])? };
                let bs = g.value(b).shape.clone();
                let n_out = if *trans_b { bs[0] } else { bs[1] };
                let wt = match &g.value(b).constant {
                    Some(c) => {
                        let mut w = if *trans_b { c.clone() } else { permute_tensor(c, &[1, 0]) };
                        if *alpha != 1.0 {
                            w = scale(&w, *alpha).ok_or_else(|| self.unsupported("alpha on non-f32 weights"))?;
                        }
                        let wt = self.constant(&format!("{}/weights", g.value(b).name), &w)?;
                        self.set_quant(wt, b, if *trans_b { &[0, 1] } else { &[1, 0] });
                        wt
                    }
                    None if *alpha == 1.0 => self.get(b, if *trans_b { &[0, 1] } else { &[1, 0] })?,
                    None => return Err(self.unsupported("alpha with non-constant weights")),
                };
                let mut post_add = None;
                let bias = match n.input(2) {
                    None => None,
                    Some(c) => match &g.value(c).constant {
                        Some(cv) if cv.dtype() == DType::I32 && cv.len() == n_out => {
                            let t = self.constant(&format!("{}/bias", n.name), cv)?;
                            self.set_quant(t, c, &[0]);
                            Some(t)
                        }
                        Some(cv) if cv.len() == n_out || cv.len() == 1 => {
                            let v: Vec<f32> = cv.to_f64_vec().iter().map(|&x| (x * *beta as f64) as f32).collect();
                            let v = if v.len() == 1 { vec![v[0]; n_out] } else { v };
                            Some(self.const_f32(&format!("{}/bias", n.name), vec![n_out], v)?)
                        }
                        _ if *beta == 1.0 => {
                            post_add = Some(c);
                            None
                        }
                        _ => return Err(self.unsupported("beta with a full C matrix")),
                    },
                };
                let ys = g.value(y).shape.clone();
                let yname = g.value(y).name.clone();
                match post_add {
                    None => {
                        let yt = self.out(y, vec![0, 1])?;
                        let (fa, clip) = split_activation(*activation);
                        let clip = self.clip_left(y, clip);
                        let fc_out = if clip.is_some() { self.tensor_like(&format!("{yname}/fc"), &ys, yt)? } else { yt };
                        self.op(bo::FULLY_CONNECTED, 1, vec![at, wt, bias.unwrap_or(-1)], vec![fc_out], Some(OptionsT::fully_connected(fa, false)));
                        if let Some((lo, hi)) = clip {
                            self.clip_into(fc_out, yt, &yname, &ys, lo, hi)?;
                        }
                    }
                    Some(c) => {
                        let ct = self.get(c, &ident(rank(c)))?;
                        let fc_out = self.tensor(&format!("{yname}/fc"), &ys, DType::F32)?;
                        self.op(bo::FULLY_CONNECTED, 1, vec![at, wt, -1], vec![fc_out], Some(OptionsT::fully_connected(act::NONE, false)));
                        let yt = self.out(y, vec![0, 1])?;
                        let (fa, clip) = split_activation(*activation);
                        let add_out = if clip.is_some() { self.tensor(&format!("{yname}/sum"), &ys, DType::F32)? } else { yt };
                        self.op(bo::ADD, 1, vec![fc_out, ct], vec![add_out], Some(OptionsT::arithmetic(bo::ADD, fa)));
                        if let Some((lo, hi)) = clip {
                            self.clip_into(add_out, yt, &yname, &ys, lo, hi)?;
                        }
                    }
                }
            }
            Op::MatMul => {
                let a = req(0)?;
                let b = req(1)?;
                let (ra, rb) = (rank(a), rank(b));
                if ra < 2 || rb < 2 {
                    return Err(self.unsupported("MatMul of a 1-D operand"));
                }
                let at = self.get(a, &ident(ra))?;
                if let (Some(c), 2) = (&g.value(b).constant, rb) {
                    let w = permute_tensor(c, &[1, 0]);
                    let wt = self.constant(&format!("{}/weights", g.value(b).name), &w)?;
                    self.set_quant(wt, b, &[1, 0]);
                    let yt = self.out(y, ident(rank(y)))?;
                    let version = if ra > 2 { 5 } else { 1 };
                    self.op(bo::FULLY_CONNECTED, version, vec![at, wt, -1], vec![yt], Some(OptionsT::fully_connected(act::NONE, ra > 2)));
                } else {
                    let bt = self.get(b, &ident(rb))?;
                    let yt = self.out(y, ident(rank(y)))?;
                    self.op(bo::BATCH_MATMUL, 1, vec![at, bt], vec![yt], Some(OptionsT::batch_matmul(false, false)));
                }
            }
            Op::Binary(bop, activation) => {
                let code = match bop {
                    BinaryOp::Add => bo::ADD,
                    BinaryOp::Sub => bo::SUB,
                    BinaryOp::Mul => bo::MUL,
                    BinaryOp::Div => bo::DIV,
                    BinaryOp::Max => bo::MAXIMUM,
                    BinaryOp::Min => bo::MINIMUM,
                    BinaryOp::Pow => bo::POW,
                    BinaryOp::PRelu => bo::PRELU,
                    other => return Err(self.unsupported(format!("binary op {other:?}"))),
                };
                let (a, b) = (req(0)?, req(1)?);
                let r = rank(y);
                // The layout of the first full-rank non-constant operand; others follow it.
                let perm = [a, b]
                    .into_iter()
                    .find(|&v| g.value(v).constant.is_none() && rank(v) == r)
                    .map(|v| self.layout(v))
                    .unwrap_or_else(|| ident(r));
                let mut ins = Vec::new();
                for v in [a, b] {
                    let t = if g.value(v).constant.is_some() {
                        self.broadcast_const(v, r, &perm)?
                    } else if rank(v) == r {
                        self.get(v, &perm)?
                    } else if perm == ident(r) {
                        self.get(v, &ident(rank(v)))?
                    } else {
                        return Err(self.unsupported("broadcasting a lower-rank non-constant operand against a transposed one"));
                    };
                    ins.push(t);
                }
                let with_act = matches!(code, bo::ADD | bo::SUB | bo::MUL | bo::DIV);
                let yname = g.value(y).name.clone();
                let ys = permuted(&g.value(y).shape, &perm);
                let yt = self.out(y, perm)?;
                let (fa, clip) = if with_act { split_activation(*activation) } else { (act::NONE, activation.map(clip_bounds)) };
                let clip = self.clip_left(y, clip);
                let opts = if with_act { Some(OptionsT::arithmetic(code, fa)) } else { None };
                let op_out = if clip.is_some() { self.tensor_like(&format!("{yname}/pre"), &ys, yt)? } else { yt };
                self.op(code, 1, ins, vec![op_out], opts);
                if let Some((lo, hi)) = clip {
                    self.clip_into(op_out, yt, &yname, &ys, lo, hi)?;
                }
            }
            Op::Unary(u) => {
                let x = req(0)?;
                let perm = self.layout(x);
                let xt = self.get(x, &perm)?;
                let simple = |c: i32| Some((c, None::<OptionsT>));
                let m = match u {
                    UnaryOp::Relu => simple(bo::RELU),
                    UnaryOp::Sigmoid => simple(bo::LOGISTIC),
                    UnaryOp::Tanh => simple(bo::TANH),
                    UnaryOp::HardSwish => simple(bo::HARD_SWISH),
                    UnaryOp::Exp => simple(bo::EXP),
                    UnaryOp::Log => simple(bo::LOG),
                    UnaryOp::Sqrt => simple(bo::SQRT),
                    UnaryOp::Abs => simple(bo::ABS),
                    UnaryOp::Neg => simple(bo::NEG),
                    UnaryOp::Floor => simple(bo::FLOOR),
                    UnaryOp::Ceil => simple(bo::CEIL),
                    UnaryOp::Sin => simple(bo::SIN),
                    UnaryOp::Cos => simple(bo::COS),
                    UnaryOp::Elu { alpha } if *alpha == 1.0 => simple(bo::ELU),
                    UnaryOp::LeakyRelu { alpha } => Some((bo::LEAKY_RELU, Some(OptionsT::new(tpu_sdk_core::import::tflite::schema::builtin_options::LEAKY_RELU).with(0, FieldT::F32(*alpha))))),
                    UnaryOp::Gelu { tanh } => Some((bo::GELU, Some(OptionsT::new(tpu_sdk_core::import::tflite::schema::builtin_options::GELU).with(0, FieldT::Bool(*tanh))))),
                    UnaryOp::Clip { min, max } => {
                        return self.clip(xt, y, perm, *min, *max);
                    }
                    UnaryOp::Reciprocal => {
                        let one = self.const_f32(&format!("{}/one", n.name), vec![], vec![1.0])?;
                        let yt = self.out(y, perm)?;
                        self.op(bo::DIV, 1, vec![one, xt], vec![yt], Some(OptionsT::arithmetic(bo::DIV, act::NONE)));
                        return Ok(());
                    }
                    _ => None,
                };
                let (code, opts) = m.ok_or_else(|| self.unsupported(format!("unary op {u:?}")))?;
                let yt = self.out(y, perm)?;
                self.op(code, 1, vec![xt], vec![yt], opts);
            }
            Op::Softmax { axis } | Op::LogSoftmax { axis } => {
                let x = req(0)?;
                let r = rank(x);
                let mut perm = self.layout(x);
                if inverse(&perm)[*axis] != r - 1 {
                    perm = ident(r);
                    if *axis != r - 1 {
                        // Move the axis last.
                        perm = (0..r).filter(|&d| d != *axis).chain([*axis]).collect();
                    }
                }
                let xt = self.get(x, &perm)?;
                let yt = self.out(y, perm)?;
                if matches!(n.op, Op::Softmax { .. }) {
                    self.op(bo::SOFTMAX, 1, vec![xt], vec![yt], Some(OptionsT::softmax(1.0)));
                } else {
                    self.op(bo::LOG_SOFTMAX, 1, vec![xt], vec![yt], None);
                }
            }
            Op::Reshape { .. } | Op::Flatten { .. } | Op::Squeeze { .. } | Op::Unsqueeze { .. } => {
                let x = req(0)?;
                let xt = self.get(x, &ident(rank(x)))?;
                let shape = i32s(g.value(y).shape.iter().copied());
                let st = self.const_i32(&format!("{}/shape", n.name), shape.clone())?;
                let yt = self.out(y, ident(rank(y)))?;
                self.op(bo::RESHAPE, 1, vec![xt, st], vec![yt], Some(OptionsT::reshape(shape)));
            }
            Op::Transpose { perm: q } => {
                // A relabelling, not a data movement: y's dim j is x's dim q[j], so the tensor holding x in
                // layout p holds y in layout p' with p'[i] = inverse(q)[p[i]]. Consumers transpose only if
                // they need another layout (NCHW↔NHWC pairs around convolutions vanish).
                let x = req(0)?;
                let r = rank(x);
                let q = if q.is_empty() { (0..r).rev().collect() } else { q.clone() };
                let p = self.layout(x);
                let xt = self.get(x, &p)?;
                let inv_q = inverse(&q);
                let p2: Vec<usize> = p.iter().map(|&d| inv_q[d]).collect();
                self.layouts.insert(y, (xt, p2));
            }
            Op::Concat { axis } => {
                let r = rank(y);
                let first = n.inputs.iter().flatten().find(|&&v| g.value(v).constant.is_none()).copied();
                let perm = first.map(|v| self.layout(v)).unwrap_or_else(|| ident(r));
                let mut ins = Vec::new();
                for v in n.inputs.iter().flatten() {
                    ins.push(self.get(*v, &perm)?);
                }
                let ax = inverse(&perm)[*axis];
                let yt = self.out(y, perm)?;
                self.op(bo::CONCATENATION, 1, ins, vec![yt], Some(OptionsT::concatenation(ax as i32, act::NONE)));
            }
            Op::Reduce { op, axes, keepdims, .. } => {
                let x = req(0)?;
                let r = rank(x);
                let axes: Vec<usize> = match axes {
                    Some(a) if a.is_empty() => return Err(self.unsupported("reduction with empty axes")),
                    Some(a) => a.clone(),
                    None => match n.input(1).and_then(|a| g.value(a).constant.clone()) {
                        Some(c) => c.to_i64_vec().iter().map(|&a| if a < 0 { (a + r as i64) as usize } else { a as usize }).collect(),
                        None => (0..r).collect(),
                    },
                };
                let code = match op {
                    ReduceOp::Mean => bo::MEAN,
                    ReduceOp::Sum => bo::SUM,
                    ReduceOp::Max => bo::REDUCE_MAX,
                    ReduceOp::Min => bo::REDUCE_MIN,
                    ReduceOp::Prod => bo::REDUCE_PROD,
                    other => return Err(self.unsupported(format!("reduction {other:?}"))),
                };
                let p = self.layout(x);
                let xt = self.get(x, &p)?;
                let inv = inverse(&p);
                let mut taxes: Vec<usize> = axes.iter().map(|&a| inv[a]).collect();
                taxes.sort_unstable();
                let at = self.const_i32(&format!("{}/axes", n.name), i32s(taxes))?;
                // Output layout: the kept dims in the order the tensor has them.
                let out_perm = if *keepdims {
                    p.clone()
                } else {
                    let kept: Vec<usize> = p.iter().copied().filter(|d| !axes.contains(d)).collect();
                    let mut sorted = kept.clone();
                    sorted.sort_unstable();
                    kept.iter().map(|d| sorted.iter().position(|s| s == d).expect("kept")).collect()
                };
                let yt = self.out(y, out_perm)?;
                self.op(code, 1, vec![xt, at], vec![yt], Some(OptionsT::reducer(*keepdims)));
            }
            Op::Pad { mode } => {
                let x = req(0)?;
                let r = rank(x);
                let pads = n.input(1).and_then(|p| g.value(p).constant.clone()).ok_or_else(|| self.unsupported("non-constant pads"))?.to_i64_vec();
                let axes: Vec<usize> = match n.input(3).and_then(|a| g.value(a).constant.clone()) {
                    Some(a) => a.to_i64_vec().iter().map(|&a| if a < 0 { (a + r as i64) as usize } else { a as usize }).collect(),
                    None => (0..r).collect(),
                };
                let mut per_axis = vec![(0i64, 0i64); r];
                for (i, &a) in axes.iter().enumerate() {
                    per_axis[a] = (pads[i], pads[i + axes.len()]);
                }
                if per_axis.iter().any(|&(b, e)| b < 0 || e < 0) {
                    return Err(self.unsupported("negative padding"));
                }
                let p = self.layout(x);
                let xt = self.get(x, &p)?;
                let flat: Vec<i32> = p.iter().flat_map(|&d| [per_axis[d].0 as i32, per_axis[d].1 as i32]).collect();
                let pt = self.constant(&format!("{}/paddings", n.name), &Tensor::from_vec(vec![r, 2], flat).expect("r x 2"))?;
                let value = n.input(2).and_then(|c| g.value(c).constant.clone()).map(|c| c.to_f64_vec().first().copied().unwrap_or(0.0)).unwrap_or(0.0);
                let yt = self.out(y, p)?;
                match mode {
                    PadMode::Constant if value == 0.0 => self.op(bo::PAD, 1, vec![xt, pt], vec![yt], None),
                    PadMode::Constant if g.value(x).quant.is_some() => return Err(self.unsupported("int8 padding with a non-zero constant")),
                    PadMode::Constant => {
                        let v = self.const_f32(&format!("{}/value", n.name), vec![], vec![value as f32])?;
                        self.op(bo::PADV2, 1, vec![xt, pt, v], vec![yt], None)
                    }
                    PadMode::Reflect => self.op(bo::MIRROR_PAD, 1, vec![xt, pt], vec![yt], Some(OptionsT::new(77).with(0, FieldT::I8(0)))),
                    other => return Err(self.unsupported(format!("pad mode {other:?}"))),
                }
            }
            Op::Resize(a) => {
                let x = req(0)?;
                if rank(x) != 4 {
                    return Err(self.unsupported("resize of a non-4-D tensor"));
                }
                let ys = g.value(y).shape.clone();
                let xs = g.value(x).shape.clone();
                if ys[0] != xs[0] || ys[1] != xs[1] {
                    return Err(self.unsupported("resize of the batch or channel dimension"));
                }
                let (code, align, half, version) = match (a.mode, a.coord, a.nearest) {
                    (ResizeMode::Linear, CoordTransform::AlignCorners, _) => (bo::RESIZE_BILINEAR, true, false, 1),
                    (ResizeMode::Linear, CoordTransform::HalfPixel, _) => (bo::RESIZE_BILINEAR, false, true, 3),
                    (ResizeMode::Linear, CoordTransform::Asymmetric, _) => (bo::RESIZE_BILINEAR, false, false, 1),
                    (ResizeMode::Nearest, CoordTransform::Asymmetric, NearestMode::Floor) => (bo::RESIZE_NEAREST_NEIGHBOR, false, false, 1),
                    (ResizeMode::Nearest, CoordTransform::AlignCorners, NearestMode::RoundPreferCeil) => (bo::RESIZE_NEAREST_NEIGHBOR, true, false, 1),
                    (ResizeMode::Nearest, CoordTransform::HalfPixel, NearestMode::RoundPreferCeil) => (bo::RESIZE_NEAREST_NEIGHBOR, false, true, 3),
                    (m, c, nm) => return Err(self.unsupported(format!("resize {m:?} with {c:?}/{nm:?}"))),
                };
                let xt = self.get(x, &NHWC)?;
                let st = self.const_i32(&format!("{}/size", n.name), vec![ys[2] as i32, ys[3] as i32])?;
                let yt = self.out(y, NHWC.to_vec())?;
                let opts = if code == bo::RESIZE_BILINEAR { OptionsT::resize_bilinear(align, half) } else { OptionsT::resize_nearest(align, half) };
                self.op(code, version, vec![xt, st], vec![yt], Some(opts));
            }
            Op::Slice => {
                let x = req(0)?;
                let xs = g.value(x).shape.clone();
                let r = xs.len();
                let ints = |i: usize| n.input(i).and_then(|v| g.value(v).constant.as_ref().map(|c| c.to_i64_vec()));
                let (Some(starts), Some(ends)) = (ints(1), ints(2)) else { return Err(self.unsupported("non-constant slice bounds")) };
                let axes: Vec<usize> = ints(3)
                    .map(|a| a.iter().map(|&a| if a < 0 { (a + r as i64) as usize } else { a as usize }).collect())
                    .unwrap_or_else(|| (0..starts.len()).collect());
                let steps = ints(4).unwrap_or_else(|| vec![1; starts.len()]);
                let (mut b, mut e, mut st) = (vec![0i64; r], xs.iter().map(|&d| d as i64).collect::<Vec<_>>(), vec![1i64; r]);
                let mut to_front = vec![false; r];
                for (k, &a) in axes.iter().enumerate() {
                    let d = xs[a] as i64;
                    let s = steps[k];
                    if s == 0 {
                        return Err(self.unsupported("slice step 0"));
                    }
                    let wrap = |v: i64| if v < 0 { v.saturating_add(d) } else { v };
                    // ONNX clamping; a negative step ending before index 0 becomes an end mask.
                    let (start, end) = if s > 0 { (wrap(starts[k]).clamp(0, d), wrap(ends[k]).clamp(0, d)) } else { (wrap(starts[k]).clamp(0, d - 1), wrap(ends[k]).clamp(-1, d - 1)) };
                    b[a] = start;
                    e[a] = end;
                    st[a] = s;
                    to_front[a] = s < 0 && end < 0;
                }
                let p = self.layout(x);
                let xt = self.get(x, &p)?;
                let mut end_mask = 0i32;
                for (i, &d) in p.iter().enumerate() {
                    if to_front[d] {
                        end_mask |= 1 << i;
                    }
                }
                let pick = |v: &[i64]| p.iter().map(|&d| v[d].clamp(i32::MIN as i64, i32::MAX as i64) as i32).collect::<Vec<i32>>();
                let bt = self.const_i32(&format!("{}/begin", n.name), pick(&b))?;
                let et = self.const_i32(&format!("{}/end", n.name), pick(&e))?;
                let stt = self.const_i32(&format!("{}/strides", n.name), pick(&st))?;
                let yt = self.out(y, p)?;
                self.op(bo::STRIDED_SLICE, 1, vec![xt, bt, et, stt], vec![yt], Some(OptionsT::strided_slice(0, end_mask, 0)));
            }
            Op::Gather { axis } => {
                let x = req(0)?;
                let idx = req(1)?;
                let xt = self.get(x, &ident(rank(x)))?;
                let it = self.get(idx, &ident(rank(idx)))?;
                let yt = self.out(y, ident(rank(y)))?;
                self.op(bo::GATHER, 1, vec![xt, it], vec![yt], Some(OptionsT::gather(*axis as i32)));
            }
            Op::QuantizeLinear { .. } | Op::DequantizeLinear { .. } => {
                let x = req(0)?;
                if g.value(y).quant.is_none() && matches!(n.op, Op::QuantizeLinear { .. }) || g.value(x).quant.is_none() && matches!(n.op, Op::DequantizeLinear { .. }) {
                    return Err(self.unsupported("quantize/dequantize whose int8 side has no quantization parameters"));
                }
                let p = self.layout(x);
                let xt = self.get(x, &p)?;
                let yt = self.out(y, p)?;
                let code = if matches!(n.op, Op::QuantizeLinear { .. }) { bo::QUANTIZE } else { bo::DEQUANTIZE };
                self.op(code, 1, vec![xt], vec![yt], None);
            }
            other => return Err(self.unsupported(format!("op {} has no TFLite export yet", other.name()))),
        }
        Ok(())
    }

    /// min(max(x, lo), hi) from tensor `xt` into a new output tensor of IR value `y` in layout `perm`.
    fn clip(&mut self, xt: i32, y: ValueId, perm: Vec<usize>, min: f32, max: f32) -> Result<()> {
        let name = self.g.value(y).name.clone();
        let shape = permuted(&self.g.value(y).shape, &perm);
        let yt = self.out(y, perm)?;
        self.clip_into(xt, yt, &name, &shape, min, max)
    }

    /// min(max(src, lo), hi) into the existing tensor `dst`, with the cheapest ops.
    fn clip_into(&mut self, src: i32, dst: i32, name: &str, shape: &[usize], min: f32, max: f32) -> Result<()> {
        let code = if min == 0.0 && max == 6.0 {
            Some(bo::RELU6)
        } else if min == -1.0 && max == 1.0 {
            Some(bo::RELU_N1_TO_1)
        } else if min == 0.0 && max == f32::INFINITY {
            Some(bo::RELU)
        } else {
            None
        };
        if let Some(c) = code {
            self.op(c, 1, vec![src], vec![dst], None);
            return Ok(());
        }
        match (min > f32::NEG_INFINITY, max < f32::INFINITY) {
            (true, true) => {
                let lo = self.bound(&format!("{name}/min"), min, dst)?;
                let hi = self.bound(&format!("{name}/max"), max, dst)?;
                let t = self.tensor_like(&format!("{name}/lower"), shape, dst)?;
                self.op(bo::MAXIMUM, 1, vec![src, lo], vec![t], None);
                self.op(bo::MINIMUM, 1, vec![t, hi], vec![dst], None);
            }
            (true, false) => {
                let lo = self.bound(&format!("{name}/min"), min, dst)?;
                self.op(bo::MAXIMUM, 1, vec![src, lo], vec![dst], None);
            }
            (false, true) => {
                let hi = self.bound(&format!("{name}/max"), max, dst)?;
                self.op(bo::MINIMUM, 1, vec![src, hi], vec![dst], None);
            }
            (false, false) => {
                let sh = self.const_i32(&format!("{name}/shape"), i32s(shape.iter().copied()))?;
                self.op(bo::RESHAPE, 1, vec![src, sh], vec![dst], Some(OptionsT::reshape(i32s(shape.iter().copied()))));
            }
        }
        Ok(())
    }

    /// TFLite padding for explicit IR pads: SAME or VALID when they match, else an explicit PAD before a
    /// VALID op (only for zero-padding ops: convolutions). Returns (padding, input tensor in NHWC).
    #[allow(clippy::too_many_arguments)]
    fn spatial_padding(&mut self, x: ValueId, pads: &[usize], auto: AutoPad, k: [usize; 2], strides: &[usize], dil: &[usize], fill: f32, name: &str) -> Result<(i8, i32)> {
        let xs = self.g.value(x).shape.clone();
        let xt = self.get(x, &NHWC)?;
        let (ph, pw) = (xs[2], xs[3]);
        let same = [tflite_padding(padding::SAME, ph, k[0], strides[0], dil[0]), tflite_padding(padding::SAME, pw, k[1], strides[1], dil[1])];
        let explicit: [usize; 4] = match auto {
            AutoPad::Valid => [0; 4],
            AutoPad::SameUpper => return Ok((padding::SAME, xt)),
            AutoPad::SameLower => {
                let t = |p: (usize, usize, usize)| p.1 + p.2;
                let (th, tw) = (t(same[0]), t(same[1]));
                [th - th / 2, tw - tw / 2, th / 2, tw / 2]
            }
            AutoPad::NotSet => {
                let mut p = [0usize; 4];
                for (i, v) in pads.iter().take(4).enumerate() {
                    p[i] = *v;
                }
                p
            }
        };
        if explicit == [0; 4] {
            return Ok((padding::VALID, xt));
        }
        if explicit == [same[0].1, same[1].1, same[0].2, same[1].2] {
            return Ok((padding::SAME, xt));
        }
        if fill.is_nan() {
            return Err(self.unsupported(format!("pooling with explicit pads {explicit:?} that are not TFLite's SAME padding")));
        }
        let flat = vec![0, 0, explicit[0] as i32, explicit[2] as i32, explicit[1] as i32, explicit[3] as i32, 0, 0];
        let pt = self.constant(&format!("{name}/paddings"), &Tensor::from_vec(vec![4, 2], flat).expect("4x2"))?;
        let padded = [xs[0], xs[2] + explicit[0] + explicit[2], xs[3] + explicit[1] + explicit[3], xs[1]];
        let t = self.tensor_like(&format!("{name}/padded"), &padded, xt)?;
        self.op(bo::PAD, 1, vec![xt, pt], vec![t], None);
        Ok((padding::VALID, t))
    }
}

/// `t * s` for f32 tensors.
fn scale(t: &Tensor, s: f32) -> Option<Tensor> {
    let v = t.as_f32()?;
    Some(Tensor::from_f32(t.shape.clone(), v.iter().map(|x| x * s).collect()))
}


/// TFLite quantization of an IR value's parameters held in layout `perm` (the tensor's dimension `i` is the
/// value's dimension `perm[i]`, so the per-axis dimension moves to where `perm` puts it).
fn quantization(p: Option<&QuantParams>, perm: &[usize]) -> Option<QuantizationT> {
    let p = p?;
    let quantized_dimension = match p.axis {
        Some(a) if p.scale.len() > 1 => perm.iter().position(|&d| d == a).unwrap_or(a) as i32,
        _ => 0,
    };
    Some(QuantizationT { scale: p.scale.clone(), zero_point: p.zero_point.clone(), quantized_dimension, ..Default::default() })
}

/// The version of an op whose tensors are int8 (TFLite's `op_version.cc`: the int8 kernels arrived as these
/// versions), given the version its attributes alone need.
fn int8_version(code: i32, version: i32) -> i32 {
    let v = match code {
        bo::CONV_2D | bo::DEPTHWISE_CONV_2D => 3,
        bo::FULLY_CONNECTED => 4,
        bo::ADD | bo::SUB | bo::MUL | bo::AVERAGE_POOL_2D | bo::MAX_POOL_2D | bo::SOFTMAX | bo::LOGISTIC | bo::TANH => 2,
        bo::CONCATENATION | bo::MEAN | bo::SUM | bo::REDUCE_MAX | bo::REDUCE_MIN | bo::PAD | bo::PADV2 | bo::TRANSPOSE => 2,
        bo::STRIDED_SLICE | bo::GATHER | bo::RELU | bo::RELU6 | bo::MAXIMUM | bo::MINIMUM | bo::LOG_SOFTMAX => 2,
        bo::RESIZE_BILINEAR | bo::RESIZE_NEAREST_NEIGHBOR | bo::DEQUANTIZE | bo::SPACE_TO_DEPTH => 2,
        _ => version,
    };
    v.max(version)
}

/// The TFLite runtime version an (op, version) pair needs (TFLite's `runtime_version.cc`, the ops this
/// exporter writes); `None` for pairs not listed there.
fn runtime_version(code: i32, version: i32) -> Option<&'static str> {
    Some(match (code, version) {
        (bo::CONV_2D, 1) | (bo::DEPTHWISE_CONV_2D, 1) | (bo::ADD, 1) | (bo::AVERAGE_POOL_2D, 1) | (bo::MAX_POOL_2D, 1) => "1.5.0",
        (bo::CONCATENATION, 1) | (bo::FULLY_CONNECTED, 1) | (bo::MUL, 1) | (bo::PAD, 1) | (bo::RESHAPE, 1) | (bo::SOFTMAX, 1) => "1.5.0",
        (bo::RELU, 1) | (bo::RELU6, 1) | (bo::RELU_N1_TO_1, 1) => "1.5.0",
        (bo::SUB, 1) | (bo::MEAN, 1) | (bo::TRANSPOSE, 1) | (bo::STRIDED_SLICE, 1) | (bo::GATHER, 1) => "1.6.0",
        (bo::RESIZE_BILINEAR, 1) => "1.7.0",
        (bo::DEPTHWISE_CONV_2D, 2) => "1.12.0",
        (bo::RESIZE_NEAREST_NEIGHBOR, 1) | (bo::DEQUANTIZE, 1) => "1.13.1",
        (bo::REDUCE_MAX, 1) | (bo::REDUCE_MIN, 1) => "1.11.0",
        (bo::SUM, 1) => "1.10.0",
        (bo::CONV_2D, 2 | 3) | (bo::DEPTHWISE_CONV_2D, 3) | (bo::ADD, 2) | (bo::SUB, 2) | (bo::MUL, 2) => "1.14.0",
        (bo::AVERAGE_POOL_2D, 2) | (bo::MAX_POOL_2D, 2) | (bo::CONCATENATION, 2) | (bo::FULLY_CONNECTED, 3 | 4) => "1.14.0",
        (bo::SOFTMAX, 2) | (bo::LOGISTIC, 1 | 2) | (bo::TANH, 1 | 2) | (bo::MEAN, 2) | (bo::PAD, 2) | (bo::PADV2, 2) => "1.14.0",
        (bo::TRANSPOSE, 2) | (bo::STRIDED_SLICE, 2) | (bo::GATHER, 2) | (bo::MAXIMUM, 1 | 2) | (bo::MINIMUM, 1 | 2) => "1.14.0",
        (bo::RESIZE_BILINEAR, 2) | (bo::RESIZE_NEAREST_NEIGHBOR, 2) | (bo::REDUCE_MAX, 2) | (bo::REDUCE_MIN, 2) => "1.14.0",
        (bo::QUANTIZE, 1) | (bo::DEQUANTIZE, 2) | (bo::RELU6, 2) | (bo::LOG_SOFTMAX, 1 | 2) | (bo::SPACE_TO_DEPTH, 2) => "1.14.0",
        (bo::SUM, 2) | (bo::HARD_SWISH, 1) => "1.15.0",
        (bo::FULLY_CONNECTED, 5) => "2.0.0",
        (bo::RELU, 2) => "2.1.0",
        (bo::RESIZE_BILINEAR, 3) => "2.2.0",
        (bo::RESIZE_NEAREST_NEIGHBOR, 3) | (bo::BATCH_MATMUL, 1) => "2.3.0",
        (bo::GELU, 1) => "2.9.0",
        _ => return None,
    })
}
