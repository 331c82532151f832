//! The MLIR text emitter: SSA values with their tensor types, constants, and one helper per StableHLO op that
//! the op-family lowerings use. Ops are written in StableHLO's pretty syntax, except the region ops
//! (`reduce_window`, multi-operand `reduce`) and `gather`, which use the generic form.

use std::collections::HashMap;
use std::fmt::Write;

use half::{bf16, f16};
use tpu_sdk_core::ir::{Activation, DType, Graph, Node, Tensor, TensorData, ValueId};

use super::LowerOptions;
use crate::error::{Error, Result};

/// An SSA value of the function being written, with its element type and shape.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct V {
    /// `%v12`, `%arg0`, ...
    pub name: String,
    /// Element type.
    pub dtype: DType,
    /// Static shape.
    pub shape: Vec<usize>,
}

impl V {
    /// `tensor<...>` type of the value.
    pub fn ty(&self) -> String {
        ty(self.dtype, &self.shape)
    }
    /// Rank.
    pub fn rank(&self) -> usize {
        self.shape.len()
    }
}

/// MLIR element type of a dtype.
pub(crate) fn elem(d: DType) -> &'static str {
    match d {
        DType::F32 => "f32",
        DType::F64 => "f64",
        DType::F16 => "f16",
        DType::BF16 => "bf16",
        DType::I8 => "i8",
        DType::U8 => "ui8",
        DType::I16 => "i16",
        DType::I32 => "i32",
        DType::I64 => "i64",
        DType::Bool => "i1",
    }
}

/// `tensor<2x3xf32>`, `tensor<f32>` for scalars.
pub(crate) fn ty(d: DType, shape: &[usize]) -> String {
    let mut s = String::from("tensor<");
    for x in shape {
        let _ = write!(s, "{x}x");
    }
    s.push_str(elem(d));
    s.push('>');
    s
}

/// `[1, 2, 3]`.
pub(crate) fn list<T: std::fmt::Display>(v: &[T]) -> String {
    let items: Vec<String> = v.iter().map(|x| x.to_string()).collect();
    format!("[{}]", items.join(", "))
}

/// `array<i64: 1, 2>` (a DenseI64ArrayAttr in generic syntax).
pub(crate) fn i64_array(v: &[i64]) -> String {
    if v.is_empty() {
        return "array<i64>".into();
    }
    let items: Vec<String> = v.iter().map(|x| x.to_string()).collect();
    format!("array<i64: {}>", items.join(", "))
}

/// The literal of one element of type `d` with value `x`: floats as their exact bit pattern (`0x3F800000`), so
/// that infinities, NaN and every rounding survive; integers in decimal; booleans as `true`/`false`.
pub(crate) fn scalar_literal(x: f64, d: DType) -> String {
    match d {
        DType::F32 => format!("0x{:08X}", (x as f32).to_bits()),
        DType::F64 => format!("0x{:016X}", x.to_bits()),
        DType::F16 => format!("0x{:04X}", f16::from_f64(x).to_bits()),
        DType::BF16 => format!("0x{:04X}", bf16::from_f64(x).to_bits()),
        DType::Bool => (if x != 0.0 { "true" } else { "false" }).into(),
        DType::U8 => (x.clamp(0.0, u8::MAX as f64) as u8).to_string(),
        DType::I8 => (x.clamp(i8::MIN as f64, i8::MAX as f64) as i8).to_string(),
        DType::I16 => (x.clamp(i16::MIN as f64, i16::MAX as f64) as i16).to_string(),
        DType::I32 => (x.clamp(i32::MIN as f64, i32::MAX as f64) as i32).to_string(),
        DType::I64 => (x as i64).to_string(),
    }
}

/// The `dense<...>` attribute of a tensor: a splat when all elements are equal, the raw little-endian bytes in
/// hex (`dense<"0x...">`) otherwise (exact and compact for large weights), nested lists for booleans.
pub(crate) fn dense(t: &Tensor) -> String {
    fn splat<T: PartialEq + Copy>(v: &[T]) -> Option<T> {
        let first = *v.first()?;
        v.iter().all(|x| *x == first).then_some(first)
    }
    fn hex<T: Copy>(v: &[T], bytes: impl Fn(T) -> Vec<u8>) -> String {
        let mut s = String::with_capacity(std::mem::size_of_val(v) * 2 + 10);
        s.push_str("dense<\"0x");
        for &x in v {
            for b in bytes(x) {
                let _ = write!(s, "{b:02X}");
            }
        }
        s.push_str("\">");
        s
    }
    if t.is_empty() {
        return "dense<>".into();
    }
    let d = t.dtype();
    // Splats compare bit patterns for floats (so -0.0 and NaN payloads are kept).
    let splat_value: Option<String> = match &t.data {
        TensorData::F32(v) => splat(&v.iter().map(|x| x.to_bits()).collect::<Vec<_>>()).map(|b| format!("0x{b:08X}")),
        TensorData::F64(v) => splat(&v.iter().map(|x| x.to_bits()).collect::<Vec<_>>()).map(|b| format!("0x{b:016X}")),
        TensorData::F16(v) => splat(&v.iter().map(|x| x.to_bits()).collect::<Vec<_>>()).map(|b| format!("0x{b:04X}")),
        TensorData::BF16(v) => splat(&v.iter().map(|x| x.to_bits()).collect::<Vec<_>>()).map(|b| format!("0x{b:04X}")),
        TensorData::I8(v) => splat(v).map(|x| x.to_string()),
        TensorData::U8(v) => splat(v).map(|x| x.to_string()),
        TensorData::I16(v) => splat(v).map(|x| x.to_string()),
        TensorData::I32(v) => splat(v).map(|x| x.to_string()),
        TensorData::I64(v) => splat(v).map(|x| x.to_string()),
        TensorData::Bool(v) => splat(v).map(|x| x.to_string()),
    };
    if let Some(s) = splat_value {
        return format!("dense<{s}>");
    }
    let _ = d;
    match &t.data {
        TensorData::F32(v) => hex(v, |x| x.to_le_bytes().to_vec()),
        TensorData::F64(v) => hex(v, |x| x.to_le_bytes().to_vec()),
        TensorData::F16(v) => hex(v, |x| x.to_le_bytes().to_vec()),
        TensorData::BF16(v) => hex(v, |x| x.to_le_bytes().to_vec()),
        TensorData::I8(v) => hex(v, |x| x.to_le_bytes().to_vec()),
        TensorData::U8(v) => hex(v, |x| vec![x]),
        TensorData::I16(v) => hex(v, |x| x.to_le_bytes().to_vec()),
        TensorData::I32(v) => hex(v, |x| x.to_le_bytes().to_vec()),
        TensorData::I64(v) => hex(v, |x| x.to_le_bytes().to_vec()),
        TensorData::Bool(v) => format!("dense<{}>", nested(v, &t.shape)),
    }
}

/// Nested-list literal `[[true, false], [false, true]]` of a row-major array.
fn nested(v: &[bool], shape: &[usize]) -> String {
    if shape.is_empty() {
        return v.first().copied().unwrap_or(false).to_string();
    }
    let inner: usize = shape[1..].iter().product();
    let parts: Vec<String> = (0..shape[0]).map(|i| nested(&v[i * inner..(i + 1) * inner], &shape[1..])).collect();
    format!("[{}]", parts.join(", "))
}

/// The body of a reduction: which binary op combines elements.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Combine {
    Add,
    Mul,
    Max,
    Min,
}

impl Combine {
    fn op(self) -> &'static str {
        match self {
            Combine::Add => "stablehlo.add",
            Combine::Mul => "stablehlo.multiply",
            Combine::Max => "stablehlo.maximum",
            Combine::Min => "stablehlo.minimum",
        }
    }
    /// The identity element for `d`.
    fn init(self, d: DType) -> f64 {
        match self {
            Combine::Add => 0.0,
            Combine::Mul => 1.0,
            Combine::Max => lowest(d),
            Combine::Min => highest(d),
        }
    }
}

/// The smallest value of a dtype (-inf for floats).
/// The attribute dictionary of a `reduce_window`: window dimensions, strides, dilations and (low, high) padding.
fn window_attrs(window: &[usize], strides: &[usize], dilations: &[usize], padding: &[(usize, usize)]) -> String {
    let arr = |v: &[usize]| i64_array(&v.iter().map(|&x| x as i64).collect::<Vec<i64>>());
    let pads: Vec<String> = padding.iter().map(|(l, h)| format!("[{l}, {h}]")).collect();
    format!(
        "{{window_dimensions = {}, window_strides = {}, window_dilations = {}, padding = dense<[{}]> : tensor<{}x2xi64>}}",
        arr(window),
        arr(strides),
        arr(dilations),
        pads.join(", "),
        padding.len()
    )
}

/// The `compare_type` of `stablehlo.compare` for an element type.
fn compare_type(d: DType) -> &'static str {
    match d {
        DType::F32 | DType::F64 | DType::F16 | DType::BF16 => "FLOAT",
        DType::U8 | DType::Bool => "UNSIGNED",
        _ => "SIGNED",
    }
}

pub(crate) fn lowest(d: DType) -> f64 {
    match d {
        DType::F32 | DType::F64 | DType::F16 | DType::BF16 => f64::NEG_INFINITY,
        DType::I8 => i8::MIN as f64,
        DType::U8 | DType::Bool => 0.0,
        DType::I16 => i16::MIN as f64,
        DType::I32 => i32::MIN as f64,
        DType::I64 => i64::MIN as f64,
    }
}

/// The largest value of a dtype (+inf for floats).
pub(crate) fn highest(d: DType) -> f64 {
    match d {
        DType::F32 | DType::F64 | DType::F16 | DType::BF16 => f64::INFINITY,
        DType::I8 => i8::MAX as f64,
        DType::U8 => u8::MAX as f64,
        DType::Bool => 1.0,
        DType::I16 => i16::MAX as f64,
        DType::I32 => i32::MAX as f64,
        DType::I64 => i64::MAX as f64,
    }
}

/// The emission state: the graph being lowered, the SSA names of its values, and the function body so far.
pub(crate) struct Cx<'g> {
    pub g: &'g Graph,
    pub opts: LowerOptions,
    body: String,
    next: usize,
    names: Vec<Option<String>>,
    splats: HashMap<(String, String), String>,
    /// Index of the node being lowered (for error messages).
    pub node_index: usize,
    /// Constants passed as function arguments (after the graph inputs), in argument order.
    pub params: Vec<ValueId>,
    first_param: usize,
    /// ` loc("node")` appended to each op of the node being lowered.
    loc: String,
    /// Tensor-parallel plan: sharded weights get `mhlo.sharding` annotations.
    pub shard: Option<crate::shard::ShardPlan>,
    /// With a plan: sharded weights become arguments (each device is fed its shard) instead of constants
    /// wrapped in a sharding constraint.
    pub shard_args: bool,
}

impl<'g> Cx<'g> {
    pub fn new(g: &'g Graph, opts: LowerOptions) -> Cx<'g> {
        Cx {
            g,
            opts,
            body: String::new(),
            next: 0,
            names: vec![None; g.values.len()],
            splats: HashMap::new(),
            node_index: 0,
            params: Vec::new(),
            first_param: g.inputs.len(),
            loc: String::new(),
            shard: None,
            shard_args: false,
        }
    }

    /// The function body written so far.
    pub fn body(&self) -> &str {
        &self.body
    }

    /// Binds a graph value to an SSA name (function arguments, node results).
    pub fn bind(&mut self, id: ValueId, name: String) {
        self.names[id.0] = Some(name);
    }

    /// The SSA value of graph value `id`, emitting its constant on first use.
    pub fn value(&mut self, id: ValueId) -> Result<V> {
        let val = &self.g.values[id.0];
        if let Some(n) = &self.names[id.0] {
            return Ok(V { name: n.clone(), dtype: val.dtype, shape: val.shape.clone() });
        }
        if let Some(t) = &val.constant {
            let axis = self.shard.as_ref().and_then(|p| p.axis_of(id));
            let as_param =
                (axis.is_some() && self.shard_args) || self.opts.max_inline_constant.is_some_and(|max| t.len() > max);
            let v = if as_param {
                // A large weight becomes a function argument, fed from a device buffer that stays resident.
                let name = format!("%arg{}", self.first_param + self.params.len());
                self.params.push(id);
                V { name, dtype: val.dtype, shape: val.shape.clone() }
            } else {
                let c = self.constant(t);
                match (axis, &self.shard) {
                    (Some(a), Some(plan)) => {
                        let plan = plan.clone();
                        self.sharding_constraint(&c, &plan, a)
                    }
                    _ => c,
                }
            };
            self.names[id.0] = Some(v.name.clone());
            return Ok(v);
        }
        Err(Error::Invalid(format!("value '{}' is used before it is defined", val.name)))
    }

    // ----- node-facing helpers ------------------------------------------------------------------------------

    /// An error naming the node: the lowering does not support what it asks for.
    pub fn unsupported(&self, node: &Node, msg: impl Into<String>) -> Error {
        let name = if node.name.is_empty() { format!("#{}", self.node_index) } else { node.name.clone() };
        Error::Unsupported { node: name, op: node.op.name(), msg: msg.into() }
    }

    /// Required input `i` of `node`.
    pub fn input(&mut self, node: &Node, i: usize) -> Result<V> {
        match node.input(i) {
            Some(id) => self.value(id),
            None => Err(self.unsupported(node, format!("missing required input {i}"))),
        }
    }

    /// Optional input `i` of `node`.
    pub fn opt_input(&mut self, node: &Node, i: usize) -> Result<Option<V>> {
        node.input(i).map(|id| self.value(id)).transpose()
    }

    /// The constant value of input `i`, if it is a constant.
    pub fn const_input(&self, node: &Node, i: usize) -> Option<&'g Tensor> {
        node.input(i).and_then(|id| self.g.values[id.0].constant.as_ref())
    }

    /// The constant value of input `i` as integers, or an error saying that it must be constant.
    pub fn const_ints(&self, node: &Node, i: usize, what: &str) -> Result<Option<Vec<i64>>> {
        match node.input(i) {
            None => Ok(None),
            Some(id) => match &self.g.values[id.0].constant {
                Some(t) => Ok(Some(t.to_i64_vec())),
                None => Err(self.unsupported(node, format!("{what} (input {i}) must be a constant for a static TPU program"))),
            },
        }
    }

    /// (dtype, shape) of output `k` as the graph records it.
    pub fn out(&self, node: &Node, k: usize) -> (DType, Vec<usize>) {
        let v = &self.g.values[node.outputs[k].0];
        (v.dtype, v.shape.clone())
    }

    // ----- emission -----------------------------------------------------------------------------------------

    /// Writes `%vN = rhs` and returns the new value.
    pub fn emit(&mut self, rhs: impl std::fmt::Display, dtype: DType, shape: Vec<usize>) -> V {
        let name = format!("%v{}", self.next);
        self.next += 1;
        let _ = writeln!(self.body, "    {name} = {rhs}{}", self.loc);
        V { name, dtype, shape }
    }

    /// Attaches the following ops to a source location named after the node, so that compiler messages and
    /// XLA profiles name the model's nodes.
    pub fn set_loc(&mut self, node_name: &str) {
        self.loc = if node_name.is_empty() {
            String::new()
        } else {
            let clean: String =
                node_name.chars().map(|c| if (c.is_ascii_graphic() && c != '"' && c != '\\') || c == ' ' { c } else { '_' }).collect();
            format!(" loc(\"{clean}\")")
        };
    }

    /// Writes a line as is (region bodies).
    fn line(&mut self, s: impl std::fmt::Display) {
        let _ = writeln!(self.body, "{s}");
    }

    /// Tells the partitioner that `a` is split along `axis` across the plan's partitions: `custom_call @Sharding`
    /// for GSPMD, `sdy.sharding_constraint` for Shardy.
    pub fn sharding_constraint(&mut self, a: &V, plan: &crate::shard::ShardPlan, axis: usize) -> V {
        let t = a.ty();
        let rhs = match plan.partitioner {
            crate::shard::Partitioner::Gspmd => {
                let sharding = crate::shard::tiled(axis, a.rank(), plan.parts);
                format!("stablehlo.custom_call @Sharding({}) {{mhlo.sharding = \"{sharding}\"}} : ({t}) -> {t}", a.name)
            }
            crate::shard::Partitioner::Shardy => {
                format!("sdy.sharding_constraint {} <@mesh, {}> : {t}", a.name, crate::shard::sdy_dims(Some(axis), a.rank()))
            }
        };
        self.emit(rhs, a.dtype, a.shape.clone())
    }

    /// A constant tensor.
    pub fn constant(&mut self, t: &Tensor) -> V {
        let ty = ty(t.dtype(), &t.shape);
        self.emit(format!("stablehlo.constant {} : {ty}", dense(t)), t.dtype(), t.shape.clone())
    }

    /// A constant of `shape` with every element `x` (deduplicated).
    pub fn splat(&mut self, x: f64, dtype: DType, shape: &[usize]) -> V {
        let lit = scalar_literal(x, dtype);
        let t = ty(dtype, shape);
        if let Some(n) = self.splats.get(&(lit.clone(), t.clone())) {
            return V { name: n.clone(), dtype, shape: shape.to_vec() };
        }
        let v = self.emit(format!("stablehlo.constant dense<{lit}> : {t}"), dtype, shape.to_vec());
        self.splats.insert((lit, t), v.name.clone());
        v
    }

    /// A scalar constant.
    pub fn scalar(&mut self, x: f64, dtype: DType) -> V {
        self.splat(x, dtype, &[])
    }

    /// A splat constant shaped and typed like `like`.
    pub fn splat_like(&mut self, x: f64, like: &V) -> V {
        self.splat(x, like.dtype, &like.shape.clone())
    }

    /// `stablehlo.<op>` of one operand (same type out).
    pub fn unary(&mut self, op: &str, a: &V) -> V {
        let t = a.ty();
        self.emit(format!("stablehlo.{op} {} : {t}", a.name), a.dtype, a.shape.clone())
    }

    /// `chlo.<op>` of one operand (same type out).
    pub fn chlo_unary(&mut self, op: &str, a: &V) -> V {
        let t = a.ty();
        self.emit(format!("chlo.{op} {} : {t} -> {t}", a.name), a.dtype, a.shape.clone())
    }

    /// `stablehlo.<op>` of two operands of the same type.
    pub fn binary(&mut self, op: &str, a: &V, b: &V) -> V {
        debug_assert_eq!((a.dtype, &a.shape), (b.dtype, &b.shape), "{op} operands");
        let t = a.ty();
        self.emit(format!("stablehlo.{op} {}, {} : {t}", a.name, b.name), a.dtype, a.shape.clone())
    }

    /// Binary op with a scalar constant right operand.
    pub fn binary_scalar(&mut self, op: &str, a: &V, x: f64) -> V {
        let c = self.splat_like(x, a);
        self.binary(op, a, &c)
    }

    /// `a + b`, `a - b`, `a * b`, `a / b` for equal types.
    pub fn add(&mut self, a: &V, b: &V) -> V {
        self.binary("add", a, b)
    }
    /// `a - b`.
    pub fn sub(&mut self, a: &V, b: &V) -> V {
        self.binary("subtract", a, b)
    }
    /// `a * b`.
    pub fn mul(&mut self, a: &V, b: &V) -> V {
        self.binary("multiply", a, b)
    }
    /// `a / b`.
    pub fn div(&mut self, a: &V, b: &V) -> V {
        self.binary("divide", a, b)
    }

    /// Element type conversion (no-op for the same type).
    pub fn convert(&mut self, a: &V, dtype: DType) -> V {
        if a.dtype == dtype {
            return a.clone();
        }
        if dtype == DType::Bool {
            let zero = self.splat_like(0.0, a);
            return self.compare("NE", a, &zero);
        }
        let out = ty(dtype, &a.shape);
        self.emit(format!("stablehlo.convert {} : ({}) -> {out}", a.name, a.ty()), dtype, a.shape.clone())
    }

    /// `stablehlo.compare` (direction EQ, NE, LT, LE, GT, GE) of two equal-typed operands → i1.
    pub fn compare(&mut self, dir: &str, a: &V, b: &V) -> V {
        let kind = compare_type(a.dtype);
        let out = ty(DType::Bool, &a.shape);
        self.emit(
            format!("stablehlo.compare {dir}, {}, {}, {kind} : ({}, {}) -> {out}", a.name, b.name, a.ty(), b.ty()),
            DType::Bool,
            a.shape.clone(),
        )
    }

    /// `cond ? a : b` for equal shapes.
    pub fn select(&mut self, cond: &V, a: &V, b: &V) -> V {
        self.emit(format!("stablehlo.select {}, {}, {} : {}, {}", cond.name, a.name, b.name, cond.ty(), a.ty()), a.dtype, a.shape.clone())
    }

    /// `clamp(lo, x, hi)` with scalar bounds.
    pub fn clamp(&mut self, x: &V, lo: f64, hi: f64) -> V {
        let l = self.scalar(lo, x.dtype);
        let h = self.scalar(hi, x.dtype);
        let t = x.ty();
        self.emit(
            format!("stablehlo.clamp {}, {}, {} : ({}, {t}, {}) -> {t}", l.name, x.name, h.name, l.ty(), h.ty()),
            x.dtype,
            x.shape.clone(),
        )
    }

    /// `max(x, 0)`.
    pub fn relu(&mut self, x: &V) -> V {
        self.binary_scalar("maximum", x, 0.0)
    }

    /// Applies a fused activation.
    pub fn activation(&mut self, x: V, act: Option<Activation>) -> V {
        match act {
            None => x,
            Some(Activation::Relu) => self.relu(&x),
            Some(Activation::Relu6) => self.clamp(&x, 0.0, 6.0),
            Some(Activation::Clip { min, max }) => self.clamp(&x, min as f64, max as f64),
        }
    }

    /// `broadcast_in_dim`: operand dim i becomes result dim `dims[i]`.
    pub fn broadcast_in_dim(&mut self, a: &V, dims: &[usize], shape: &[usize]) -> V {
        if a.shape == shape && dims.iter().enumerate().all(|(i, &d)| i == d) {
            return a.clone();
        }
        let out = ty(a.dtype, shape);
        self.emit(
            format!("stablehlo.broadcast_in_dim {}, dims = {} : ({}) -> {out}", a.name, list(dims), a.ty()),
            a.dtype,
            shape.to_vec(),
        )
    }

    /// Numpy-style broadcast of `a` to `shape` (trailing dims aligned). The caller guarantees compatibility.
    pub fn broadcast_to(&mut self, a: &V, shape: &[usize]) -> Result<V> {
        let mut a = a.clone();
        // Leading size-1 dims beyond the target rank carry nothing: drop them.
        if a.rank() > shape.len() && a.shape[..a.rank() - shape.len()].iter().all(|&d| d == 1) {
            let keep = a.shape[a.rank() - shape.len()..].to_vec();
            a = self.reshape(&a, &keep);
        }
        let r = a.rank();
        if r > shape.len() || a.shape.iter().zip(&shape[shape.len() - r..]).any(|(&s, &t)| s != t && s != 1) {
            return Err(Error::Invalid(format!("cannot broadcast {:?} to {shape:?}", a.shape)));
        }
        // broadcast_in_dim expands size-1 operand dims to any size.
        let dims: Vec<usize> = (shape.len() - r..shape.len()).collect();
        Ok(self.broadcast_in_dim(&a, &dims, shape))
    }

    /// Broadcasts a 1-D per-channel vector (length `shape[axis]`) along `axis` of `shape`.
    pub fn broadcast_along(&mut self, a: &V, axis: usize, shape: &[usize]) -> V {
        self.broadcast_in_dim(a, &[axis], shape)
    }

    /// Reshape (no-op for the same shape).
    pub fn reshape(&mut self, a: &V, shape: &[usize]) -> V {
        if a.shape == shape {
            return a.clone();
        }
        let out = ty(a.dtype, shape);
        self.emit(format!("stablehlo.reshape {} : ({}) -> {out}", a.name, a.ty()), a.dtype, shape.to_vec())
    }

    /// Transpose: result dim i is operand dim `perm[i]`.
    pub fn transpose(&mut self, a: &V, perm: &[usize]) -> V {
        if perm.iter().enumerate().all(|(i, &p)| i == p) {
            return a.clone();
        }
        let shape: Vec<usize> = perm.iter().map(|&p| a.shape[p]).collect();
        let out = ty(a.dtype, &shape);
        self.emit(format!("stablehlo.transpose {}, dims = {} : ({}) -> {out}", a.name, list(perm), a.ty()), a.dtype, shape)
    }

    /// Static slice with positive strides.
    pub fn slice(&mut self, a: &V, start: &[usize], limit: &[usize], stride: &[usize]) -> V {
        let shape: Vec<usize> = (0..a.rank())
            .map(|i| if limit[i] > start[i] { (limit[i] - start[i]).div_ceil(stride[i]) } else { 0 })
            .collect();
        if shape == a.shape {
            return a.clone();
        }
        let ranges: Vec<String> = (0..a.rank()).map(|i| format!("{}:{}:{}", start[i], limit[i].max(start[i]), stride[i])).collect();
        let out = ty(a.dtype, &shape);
        self.emit(format!("stablehlo.slice {} [{}] : ({}) -> {out}", a.name, ranges.join(", "), a.ty()), a.dtype, shape)
    }

    /// `a[start..limit]` along one axis.
    pub fn slice_axis(&mut self, a: &V, axis: usize, start: usize, limit: usize) -> V {
        let mut s = vec![0; a.rank()];
        let mut l = a.shape.clone();
        s[axis] = start;
        l[axis] = limit;
        self.slice(a, &s, &l, &vec![1; a.rank()])
    }

    /// Reverses the given dims.
    pub fn reverse(&mut self, a: &V, dims: &[usize]) -> V {
        if dims.is_empty() {
            return a.clone();
        }
        self.emit(format!("stablehlo.reverse {}, dims = {} : {}", a.name, list(dims), a.ty()), a.dtype, a.shape.clone())
    }

    /// Concatenation along `axis` of values of one dtype.
    pub fn concat(&mut self, vs: &[V], axis: usize) -> V {
        if vs.len() == 1 {
            return vs[0].clone();
        }
        let mut shape = vs[0].shape.clone();
        shape[axis] = vs.iter().map(|v| v.shape[axis]).sum();
        let names: Vec<&str> = vs.iter().map(|v| v.name.as_str()).collect();
        let tys: Vec<String> = vs.iter().map(|v| v.ty()).collect();
        let out = ty(vs[0].dtype, &shape);
        self.emit(
            format!("stablehlo.concatenate {}, dim = {axis} : ({}) -> {out}", names.join(", "), tys.join(", ")),
            vs[0].dtype,
            shape,
        )
    }

    /// `stablehlo.pad` with a scalar padding value (negative amounts crop).
    pub fn pad(&mut self, a: &V, value: &V, low: &[i64], high: &[i64], interior: &[i64]) -> V {
        if low.iter().chain(high).chain(interior).all(|&p| p == 0) {
            return a.clone();
        }
        let shape: Vec<usize> = (0..a.rank())
            .map(|i| {
                let n = a.shape[i] as i64;
                let inner = if n > 0 { n + (n - 1) * interior[i] } else { 0 };
                (inner + low[i] + high[i]).max(0) as usize
            })
            .collect();
        let out = ty(a.dtype, &shape);
        self.emit(
            format!(
                "stablehlo.pad {}, {}, low = {}, high = {}, interior = {} : ({}, {}) -> {out}",
                a.name,
                value.name,
                list(low),
                list(high),
                list(interior),
                a.ty(),
                value.ty()
            ),
            a.dtype,
            shape,
        )
    }

    /// `iota` along `dim` of a tensor of `shape`.
    pub fn iota(&mut self, dim: usize, dtype: DType, shape: &[usize]) -> V {
        let out = ty(dtype, shape);
        self.emit(format!("stablehlo.iota dim = {dim} : {out}"), dtype, shape.to_vec())
    }

    /// Reduction over `dims` (removed from the shape).
    pub fn reduce(&mut self, a: &V, dims: &[usize], combine: Combine) -> V {
        if dims.is_empty() {
            return a.clone();
        }
        let init = self.scalar(combine.init(a.dtype), a.dtype);
        let shape: Vec<usize> = (0..a.rank()).filter(|d| !dims.contains(d)).map(|d| a.shape[d]).collect();
        let out = ty(a.dtype, &shape);
        self.emit(
            format!(
                "stablehlo.reduce({} init: {}) applies {} across dimensions = {} : ({}, {}) -> {out}",
                a.name,
                init.name,
                combine.op(),
                list(dims),
                a.ty(),
                init.ty()
            ),
            a.dtype,
            shape,
        )
    }

    /// Reduction over `dims` keeping them as size-1 dims.
    pub fn reduce_keep(&mut self, a: &V, dims: &[usize], combine: Combine) -> V {
        let r = self.reduce(a, dims, combine);
        let kept: Vec<usize> = (0..a.rank()).map(|d| if dims.contains(&d) { 1 } else { a.shape[d] }).collect();
        self.reshape(&r, &kept)
    }

    /// `reduce_window` with padding value = the combine's identity.
    #[allow(clippy::too_many_arguments)]
    pub fn reduce_window(
        &mut self,
        a: &V,
        combine: Combine,
        window: &[usize],
        strides: &[usize],
        dilations: &[usize],
        padding: &[(usize, usize)],
        out_shape: &[usize],
    ) -> V {
        let init = self.scalar(combine.init(a.dtype), a.dtype);
        let st = ty(a.dtype, &[]);
        let name = format!("%v{}", self.next);
        self.next += 1;
        let out = ty(a.dtype, out_shape);
        let loc = self.loc.clone();
        self.line(format_args!("    {name} = \"stablehlo.reduce_window\"({}, {}) ({{", a.name, init.name));
        self.line(format_args!("    ^bb0(%ra: {st}, %rb: {st}):"));
        self.line(format_args!("      %rc = {} %ra, %rb : {st}", combine.op()));
        self.line(format_args!("      stablehlo.return %rc : {st}"));
        let attrs = window_attrs(window, strides, dilations, padding);
        self.line(format_args!("    }}) {attrs} : ({}, {st}) -> {out}{loc}", a.ty()));
        V { name, dtype: a.dtype, shape: out_shape.to_vec() }
    }

    /// Max `reduce_window` that also gives, per window, the flat (row-major) input index of its maximum; ties go to
    /// the smallest index, padding cells never win. A two-operand `reduce_window` over (value, iota).
    #[allow(clippy::too_many_arguments)]
    pub fn reduce_window_argmax(
        &mut self,
        a: &V,
        window: &[usize],
        strides: &[usize],
        dilations: &[usize],
        padding: &[(usize, usize)],
        out_shape: &[usize],
    ) -> (V, V) {
        let total: usize = a.shape.iter().product();
        let flat = self.iota(0, DType::I64, &[total]);
        let idx = self.reshape(&flat, &a.shape.clone());
        let init_v = self.scalar(lowest(a.dtype), a.dtype);
        let init_i = self.scalar(i64::MAX as f64, DType::I64);
        let st = ty(a.dtype, &[]);
        let it = ty(DType::I64, &[]);
        let name = format!("%v{}", self.next);
        self.next += 1;
        let loc = self.loc.clone();
        self.line(format_args!("    {name}:2 = \"stablehlo.reduce_window\"({}, {}, {}, {}) ({{", a.name, idx.name, init_v.name, init_i.name));
        self.arg_select_region(a.dtype, "GT", "LT");
        let attrs = window_attrs(window, strides, dilations, padding);
        self.line(format_args!(
            "    }}) {attrs} : ({}, {}, {st}, {it}) -> ({}, {}){loc}",
            a.ty(),
            idx.ty(),
            ty(a.dtype, out_shape),
            ty(DType::I64, out_shape)
        ));
        (
            V { name: format!("{name}#0"), dtype: a.dtype, shape: out_shape.to_vec() },
            V { name: format!("{name}#1"), dtype: DType::I64, shape: out_shape.to_vec() },
        )
    }

    /// `dot_general` with batch and contracting dims; the result is [batch..., lhs free..., rhs free...].
    pub fn dot_general(&mut self, a: &V, b: &V, batch: (&[usize], &[usize]), contract: (&[usize], &[usize])) -> V {
        let p = self.opts.precision;
        self.dot_general_with(a, b, batch, contract, p)
    }

    /// `dot_general` with an explicit precision.
    pub fn dot_general_with(
        &mut self,
        a: &V,
        b: &V,
        batch: (&[usize], &[usize]),
        contract: (&[usize], &[usize]),
        precision: super::Precision,
    ) -> V {
        let mut shape: Vec<usize> = batch.0.iter().map(|&d| a.shape[d]).collect();
        shape.extend((0..a.rank()).filter(|d| !batch.0.contains(d) && !contract.0.contains(d)).map(|d| a.shape[d]));
        shape.extend((0..b.rank()).filter(|d| !batch.1.contains(d) && !contract.1.contains(d)).map(|d| b.shape[d]));
        let out = ty(a.dtype, &shape);
        let batching = if batch.0.is_empty() { String::new() } else { format!("batching_dims = {} x {}, ", list(batch.0), list(batch.1)) };
        let precision = precision.attr_dot(a.dtype);
        self.emit(
            format!(
                "stablehlo.dot_general {}, {}, {batching}contracting_dims = {} x {}{precision} : ({}, {}) -> {out}",
                a.name,
                b.name,
                list(contract.0),
                list(contract.1),
                a.ty(),
                b.ty()
            ),
            a.dtype,
            shape,
        )
    }

    /// `is_finite` (i1 result).
    pub fn is_finite(&mut self, a: &V) -> V {
        let out = ty(DType::Bool, &a.shape);
        self.emit(format!("stablehlo.is_finite {} : ({}) -> {out}", a.name, a.ty()), DType::Bool, a.shape.clone())
    }

    /// The region of a two-operand (value, i64 index) reduction that keeps the pair whose value compares `better`
    /// (GT: maximum, LT: minimum), on equal values the one whose index compares `tie` (LT: first, GT: last).
    fn arg_select_region(&mut self, dtype: DType, better: &str, tie: &str) {
        let st = ty(dtype, &[]);
        let it = ty(DType::I64, &[]);
        let kind = compare_type(dtype);
        self.line(format_args!("    ^bb0(%ra: {st}, %ri: {it}, %rb: {st}, %rj: {it}):"));
        self.line(format_args!("      %b1 = stablehlo.compare {better}, %ra, %rb, {kind} : ({st}, {st}) -> tensor<i1>"));
        self.line(format_args!("      %b2 = stablehlo.compare EQ, %ra, %rb, {kind} : ({st}, {st}) -> tensor<i1>"));
        self.line(format_args!("      %b3 = stablehlo.compare {tie}, %ri, %rj, SIGNED : ({it}, {it}) -> tensor<i1>"));
        self.line(format_args!("      %b4 = stablehlo.and %b2, %b3 : tensor<i1>"));
        self.line(format_args!("      %b5 = stablehlo.or %b1, %b4 : tensor<i1>"));
        self.line(format_args!("      %b6 = stablehlo.select %b5, %ra, %rb : tensor<i1>, {st}"));
        self.line(format_args!("      %b7 = stablehlo.select %b5, %ri, %rj : tensor<i1>, {it}"));
        self.line(format_args!("      stablehlo.return %b6, %b7 : {st}, {it}"));
    }

    /// Index (i64) of the largest (`max`) or smallest element along `axis`; ties go to the first index, or the
    /// last with `last`. A two-operand `reduce` over (value, iota).
    pub fn arg_reduce(&mut self, x: &V, axis: usize, max: bool, last: bool) -> V {
        let idx = self.iota(axis, DType::I64, &x.shape.clone());
        let init_v = self.scalar(if max { lowest(x.dtype) } else { highest(x.dtype) }, x.dtype);
        let init_i = self.scalar(0.0, DType::I64);
        let shape: Vec<usize> = (0..x.rank()).filter(|&d| d != axis).map(|d| x.shape[d]).collect();
        let st = ty(x.dtype, &[]);
        let it = ty(DType::I64, &[]);
        let name = format!("%v{}", self.next);
        self.next += 1;
        let better = if max { "GT" } else { "LT" };
        let tie = if last { "GT" } else { "LT" };
        let loc = self.loc.clone();
        self.line(format_args!("    {name}:2 = \"stablehlo.reduce\"({}, {}, {}, {}) ({{", x.name, idx.name, init_v.name, init_i.name));
        self.arg_select_region(x.dtype, better, tie);
        self.line(format_args!(
            "    }}) {{dimensions = {}}} : ({}, {}, {st}, {it}) -> ({}, {}){}",
            i64_array(&[axis as i64]),
            x.ty(),
            idx.ty(),
            ty(x.dtype, &shape),
            ty(DType::I64, &shape),
            loc
        ));
        V { name: format!("{name}#1"), dtype: DType::I64, shape }
    }

    /// `x[..., indices, ...]` along `axis` (indices already in range) as a `gather`; the axis is replaced by the
    /// dims of `indices`.
    pub fn gather_axis(&mut self, x: &V, axis: usize, indices: &V) -> V {
        let ri = indices.rank();
        let rd = x.rank();
        let mut shape: Vec<usize> = x.shape[..axis].to_vec();
        shape.extend_from_slice(&indices.shape);
        shape.extend_from_slice(&x.shape[axis + 1..]);
        let offset_dims: Vec<usize> = (0..axis).chain(axis + ri..axis + ri + (rd - axis - 1)).collect();
        let slice_sizes: Vec<i64> = (0..rd).map(|i| if i == axis { 1 } else { x.shape[i] as i64 }).collect();
        let out = ty(x.dtype, &shape);
        self.emit(
            format!(
                "\"stablehlo.gather\"({}, {}) {{dimension_numbers = #stablehlo.gather<offset_dims = {}, collapsed_slice_dims = [{axis}], start_index_map = [{axis}], index_vector_dim = {ri}>, slice_sizes = {}, indices_are_sorted = false}} : ({}, {}) -> {out}",
                x.name,
                indices.name,
                list(&offset_dims),
                i64_array(&slice_sizes),
                x.ty(),
                indices.ty()
            ),
            x.dtype,
            shape,
        )
    }

    /// `scatter` of `updates` into `data` at `indices` (index vectors along `index_vector_dim`, addressing the
    /// `inserted` dims in order); `combine` merges the old element with the update (`None`: replace).
    #[allow(clippy::too_many_arguments)]
    pub fn scatter(
        &mut self,
        data: &V,
        indices: &V,
        updates: &V,
        update_window_dims: &[usize],
        inserted: &[usize],
        index_vector_dim: usize,
        combine: Option<&str>,
    ) -> V {
        let st = ty(data.dtype, &[]);
        let name = format!("%v{}", self.next);
        self.next += 1;
        let loc = self.loc.clone();
        self.line(format_args!("    {name} = \"stablehlo.scatter\"({}, {}, {}) ({{", data.name, indices.name, updates.name));
        self.line(format_args!("    ^bb0(%ra: {st}, %rb: {st}):"));
        match combine {
            None => self.line(format_args!("      stablehlo.return %rb : {st}")),
            Some(op) => {
                self.line(format_args!("      %rc = {op} %ra, %rb : {st}"));
                self.line(format_args!("      stablehlo.return %rc : {st}"));
            }
        }
        self.line(format_args!(
            "    }}) {{scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = {}, inserted_window_dims = {}, scatter_dims_to_operand_dims = {}, index_vector_dim = {index_vector_dim}>, indices_are_sorted = false, unique_indices = false}} : ({}, {}, {}) -> {}{loc}",
            list(update_window_dims),
            list(inserted),
            list(inserted),
            data.ty(),
            indices.ty(),
            updates.ty(),
            data.ty()
        ));
        V { name, dtype: data.dtype, shape: data.shape.clone() }
    }

    /// `chlo.top_k` along the last dim: (values, i32 indices), largest first.
    pub fn top_k(&mut self, x: &V, k: usize, shape: &[usize]) -> (V, V) {
        let name = format!("%v{}", self.next);
        self.next += 1;
        let vt = ty(x.dtype, shape);
        let it = ty(DType::I32, shape);
        let loc = self.loc.clone();
        self.line(format_args!("    {name}:2 = chlo.top_k({}, k = {k}) : {} -> ({vt}, {it}){loc}", x.name, x.ty()));
        (
            V { name: format!("{name}#0"), dtype: x.dtype, shape: shape.to_vec() },
            V { name: format!("{name}#1"), dtype: DType::I32, shape: shape.to_vec() },
        )
    }
}
