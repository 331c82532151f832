//! The quantize pass: a float graph plus calibration into a full-integer int8 graph.
//!
//! Representation (shared with the int8 runtime and the TFLite importer/exporter): quantized ops are the
//! ordinary [`Op`]s applied to values of dtype I8 whose [`Value::quant`](crate::ir::Value) is set, exactly like
//! TFLite, in the IR's NCHW layout. Convolution weights are constant I8 `[O, I/g, kh, kw]` quantized
//! symmetrically per output channel (axis 0, also for depthwise weights `[C·m, 1, kh, kw]`; ConvTranspose
//! weights `[I, O, kh, kw]` along axis 1); Gemm weights are constant I8 `[N, K]` (`trans_b`) symmetric per
//! output unit (axis 0), MatMul weights per tensor; biases are constant I32 with scale
//! `input_scale × weight_scale[c]` and zero point 0. Fused activations stay in the op attributes. Values whose
//! parameters the spec ties together (pooling, reshapes, transposes, concatenation, splitting, padding, slicing,
//! max/min: inputs and outputs share scale and zero point) get one range, the union of what calibration saw;
//! softmax/logistic outputs are fixed at (1/256, −128), tanh at (1/128, 0), log-softmax at (16/256, 127).
//! LSTMs become LiteRT's integer LSTM (`quant::lstm`: int8 weights, int32 biases, an int16 cell state).
//!
//! With `float_io` the graph keeps float inputs and outputs: a `QuantizeLinear` follows each input and a
//! `DequantizeLinear` precedes each output. Otherwise inputs and outputs are int8 with the parameters given in
//! their values. An op the int8 spec (or the exporters) cannot handle is an [`Error::Unsupported`] naming the
//! node: this pass never leaves part of a model in float, except control flow (`If`, `Loop`): those nodes and
//! their regions stay float between a dequantize of their int8 inputs and a quantize of their outputs (LiteRT
//! runs `IF`/`WHILE` on the CPU; the Edge TPU takes neither); and the nodes an importer marked
//! [`Node::keep_float`] (MediaPipe's coordinate math), with the nodes between them, likewise (values only such
//! islands read stay float).

use std::collections::HashMap;

use super::calibrate::Calibration;
use super::params::{activation_params, quantize_one, scale_for_bias, symmetric_scale};
use super::range::RangeMethod;
use crate::ir::{BinaryOp, DType, Graph, Node, Op, PadMode, QuantParams, ReduceOp, Tensor, UnaryOp, ValueId};
use crate::{Error, Result};

/// Options of [`quantize`].
#[derive(Clone, Debug)]
pub struct QuantizeOptions {
    /// How activation ranges come from the calibration observations.
    pub method: RangeMethod,
    /// Keep float inputs and outputs (quantize/dequantize at the edges).
    pub float_io: bool,
}

impl Default for QuantizeOptions {
    fn default() -> Self {
        QuantizeOptions { method: RangeMethod::MinMax, float_io: false }
    }
}

/// Fixed output parameters of an op, if the spec fixes them.
fn fixed_output(op: &Op) -> Option<(f32, i64)> {
    match op {
        Op::Softmax { .. } | Op::Unary(UnaryOp::Sigmoid) => Some((1.0 / 256.0, -128)),
        Op::Unary(UnaryOp::Tanh) => Some((1.0 / 128.0, 0)),
        Op::LogSoftmax { .. } => Some((16.0 / 256.0, 127)),
        _ => None,
    }
}

/// How the pass treats an op: `Ok(true)` when its float data inputs and outputs must share parameters,
/// `Ok(false)` when they are independent, `Err(why)` when int8 cannot express it.
fn classify(op: &Op) -> std::result::Result<bool, String> {
    use Op::*;
    match op {
        Conv(a) => {
            if a.kernel_shape.len() > 2 {
                Err("only 1-D/2-D convolutions quantize".into())
            } else {
                Ok(false)
            }
        }
        ConvTranspose(a) => conv_transpose_int8(a),
        Gemm { .. } | MatMul | GlobalAveragePool => Ok(false),
        Binary(b, _) => match b {
            BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul | BinaryOp::PRelu => Ok(false),
            BinaryOp::Max | BinaryOp::Min => Ok(true),
            BinaryOp::Pow => Err("Pow has no int8 TFLite kernel (only x^2, which becomes MUL(x, x), quantizes): rewrite the model without it".into()),
            BinaryOp::Div => Err("Div by a non-constant has no int8 TFLite kernel (division by a constant or by a square root is rewritten): rewrite the model to multiply instead".into()),
            other => Err(format!("binary op {other:?} has no int8 TFLite kernel")),
        },
        Unary(u) => match u {
            UnaryOp::Relu | UnaryOp::Sigmoid | UnaryOp::Tanh | UnaryOp::HardSwish | UnaryOp::LeakyRelu { .. } => Ok(false),
            // RSQRT: fixed-point Newton iteration; GELU: a lookup table (LiteRT's int8 kernels).
            UnaryOp::Rsqrt | UnaryOp::Gelu { .. } => Ok(false),
            // Non-standard clips become MAXIMUM/MINIMUM, whose operands share parameters.
            UnaryOp::Clip { min, max } => Ok(!((*min == 0.0 && (*max == 6.0 || *max == f32::INFINITY)) || (*min == -1.0 && *max == 1.0))),
            UnaryOp::Erf => Err("Erf has no int8 TFLite kernel; it quantizes only inside GELU, 0.5·x·(1 + erf(x/√2)), which becomes TFLite GELU: export GELU in that form (or as ONNX Gelu)".into()),
            UnaryOp::Sqrt | UnaryOp::Reciprocal => {
                Err(format!("{u:?} has no int8 TFLite kernel; 1/sqrt(v) and a/sqrt(v) (normalizations) become RSQRT when nothing else reads the square root"))
            }
            other => Err(format!("unary op {other:?} has no int8 TFLite kernel")),
        },
        Softmax { .. } | LogSoftmax { .. } => Ok(false),
        // quant::prepare decomposes them into MEAN, SUB, MUL, RSQRT and ADD unless it could not.
        InstanceNorm { .. } | LayerNorm { .. } | GroupNorm { .. } => Err(format!(
            "{} quantizes only as its decomposition into MEAN/SUB/MUL/RSQRT/ADD, which needs a static f32 input, constant per-channel \
             scale and bias (InstanceNorm, GroupNorm) and unused mean / inv-std-dev outputs: run quant::prepare first, or fold the parameters to constants",
            op.name()
        )),
        Reduce { op: ReduceOp::Mean | ReduceOp::Sum, .. } => Ok(false),
        Reduce { op: ReduceOp::Max | ReduceOp::Min, .. } => Ok(true),
        MaxPool(_) | AveragePool(_) | GlobalMaxPool => Ok(true),
        Reshape { .. } | Flatten { .. } | Squeeze { .. } | Unsqueeze { .. } | Transpose { .. } | Identity => Ok(true),
        Concat { .. } | Split { .. } | Pad { .. } | Slice | Gather { .. } | Resize(_) => Ok(true),
        // TFLite's int8 TILE and DEPTH_TO_SPACE move data: the output keeps the input's parameters.
        Tile | DepthToSpace { .. } => Ok(true),
        Reduce { op: ReduceOp::Prod | ReduceOp::L1 | ReduceOp::L2 | ReduceOp::LogSum | ReduceOp::LogSumExp | ReduceOp::SumSquare, .. }
        | ClipDynamic
        | Variadic(_)
        | VariadicMean
        | Where
        | LpPool(..)
        | BatchNorm { .. }
        | Lrn { .. }
        | LpNorm { .. }
        | Hardmax { .. }
        | ArgReduce { .. }
        | CumSum { .. }
        | GatherElements { .. }
        | GatherNd { .. }
        | ScatterElements { .. }
        | ScatterNd { .. }
        | TensorScatter { .. }
        | Expand
        | Shape { .. }
        | Size
        | ConstantOfShape { .. }
        | Range
        | Cast { .. }
        | Trilu { .. }
        | OneHot { .. }
        | EyeLike { .. }
        | SpaceToDepth { .. }
        | TopK { .. }
        | NonZero
        | ReverseSequence { .. }
        | DequantizeLinear { .. }
        | QuantizeLinear { .. } => Err(format!("{} has no int8 quantization here", op.name())),
        // float islands: see `float_islands`
        If(_) | Loop(_) => Ok(false),
        Scan(_) => Err("Scan (control flow) is not supported by int8 quantization (it has no TFLite form)".into()),
        // Checked by `lstm::refusal` (GRU and RNN have no integer kernel).
        Rnn(_) => Ok(false),
    }
}

struct UnionFind(Vec<usize>);

impl UnionFind {
    fn find(&mut self, x: usize) -> usize {
        let mut r = x;
        while self.0[r] != r {
            r = self.0[r];
        }
        let mut y = x;
        while self.0[y] != r {
            let next = self.0[y];
            self.0[y] = r;
            y = next;
        }
        r
    }
    fn union(&mut self, a: usize, b: usize) {
        let (ra, rb) = (self.find(a), self.find(b));
        if ra != rb {
            self.0[rb] = ra;
        }
    }
}

/// Quantizes the float graph `g` with the observations in `cal` (see the module docs).
pub fn quantize(g: &Graph, cal: &Calibration, opts: &QuantizeOptions) -> Result<Graph> {
    let live: Vec<usize> = (0..g.nodes.len()).filter(|&k| g.nodes[k].outputs.iter().any(|o| g.value(*o).constant.is_none())).collect();
    let island = island_nodes(g, &live);
    let mut acts = Activations::mark(g, &live, &island)?;
    let mut groups = Groups::collect(g, cal, opts, &mut acts)?;
    groups.fit_add_outputs(g, &live, &mut acts);
    let mut q = g.clone();
    for &k in &live {
        q.nodes[k].keep_float |= island[k] && !is_float_island_op(&g.nodes[k].op);
    }
    for v in 0..g.values.len() {
        if acts.is_act[v] {
            let p = groups.params(v, &mut acts.uf);
            let val = &mut q.values[v];
            val.dtype = DType::I8;
            val.quant = Some(p);
        }
    }
    // Constants: weights and biases of Conv/Gemm/MatMul, other float operands per tensor. New values each
    // time, since one float constant may be quantized differently for different users.
    for &k in &live {
        let n = g.nodes[k].clone();
        if island[k] {
            continue; // keeps its float constants
        }
        match &n.op {
            Op::Conv(_) => quantize_conv_weights(g, &mut q, k, &n)?,
            Op::ConvTranspose(_) => quantize_conv_transpose_weights(g, &mut q, k, &n)?,
            Op::Gemm { alpha, beta, trans_a, trans_b, activation } => quantize_gemm_weights(g, &mut q, k, &n, (*alpha, *beta, *trans_b), (*trans_a, *activation))?,
            Op::MatMul => quantize_matmul_weights(g, &mut q, k, &n),
            Op::Rnn(a) => super::lstm::quantize_weights(g, &mut q, k, &n, a, cal)?,
            Op::Pad { mode: PadMode::Constant } if n.input(2).is_none_or(|c| g.value(c).constant.is_some()) => {
                quantize_pad_fill(g, &mut q, k, &n, &groups, &mut acts.uf)
            }
            _ => quantize_float_operands(g, &mut q, k, &n, &groups, &mut acts.uf),
        }
    }
    add_requantizations(g, &mut q, &acts.requant);
    float_islands(&mut q);
    if opts.float_io {
        add_float_edges(&mut q);
    }
    Ok(q)
}

/// A requantization (QuantizeLinear int8 → int8, TFLite's QUANTIZE) before each (node, input) of `edges`
/// whose input's parameters differ from the node's output's (which the op requires its inputs to share).
fn add_requantizations(g: &Graph, q: &mut Graph, edges: &[(usize, usize)]) {
    if edges.is_empty() {
        return;
    }
    let mut before: HashMap<usize, Vec<Node>> = HashMap::new();
    for &(k, i) in edges {
        let x = q.nodes[k].input(i).expect("tied input");
        let p = q.value(q.nodes[k].outputs[0]).quant.clone().expect("quantized output");
        if q.value(x).quant.as_ref() == Some(&p) {
            continue;
        }
        let name = format!("{}/requantized_for_{}", g.value(x).name, q.nodes[k].name);
        let shape = q.value(x).shape.clone();
        let r = q.add_value(name.clone(), DType::I8, shape);
        q.value_mut(r).quant = Some(p.clone());
        quantize_node(q, x, r, &p, &name);
        before.entry(k).or_default().push(q.nodes.pop().expect("just added"));
        q.nodes[k].inputs[i] = Some(r);
    }
    let nodes = std::mem::take(&mut q.nodes);
    for (k, n) in nodes.into_iter().enumerate() {
        q.nodes.extend(before.remove(&k).unwrap_or_default());
        q.nodes.push(n);
    }
}

/// Whether `op` stays a float island in an int8 graph: `If` and `Loop` (their regions are not quantized; LiteRT
/// runs `IF`/`WHILE` on the CPU whatever their tensors hold, and the Edge TPU runs neither).
/// Comparisons (bool outputs, as conditions of `If`/`Loop`) stay float too: a dequantize before them.
fn is_float_island_op(op: &Op) -> bool {
    use BinaryOp::*;
    matches!(op, Op::If(_) | Op::Loop(_) | Op::Binary(Equal | Less | LessOrEqual | Greater | GreaterOrEqual, _))
}

/// Whether node `n` stays float in an int8 graph: its op is an island (above), or an importer marked it
/// ([`Node::keep_float`]).
fn is_float_island(n: &Node) -> bool {
    n.keep_float || is_float_island_op(&n.op)
}

/// The float islands among the nodes of `g`: [`is_float_island`], and every live node between marked
/// ([`Node::keep_float`]) ones: a node whose computed inputs all come from marked nodes and whose outputs only
/// marked nodes read (a MUL of MediaPipe's transform matrix by a constant, between the two custom ops) joins
/// them, so that their values never pass through int8.
fn island_nodes(g: &Graph, live: &[usize]) -> Vec<bool> {
    let mut island: Vec<bool> = g.nodes.iter().map(is_float_island).collect();
    let producers = g.producers();
    let mut readers: Vec<Vec<usize>> = vec![Vec::new(); g.values.len()];
    for (k, n) in g.nodes.iter().enumerate() {
        for v in n.inputs.iter().flatten() {
            readers[v.0].push(k);
        }
    }
    let marked = |island: &[bool], k: usize| island[k] && !is_float_island_op(&g.nodes[k].op);
    loop {
        let mut changed = false;
        for &k in live {
            if island[k] {
                continue;
            }
            let n = &g.nodes[k];
            let computed: Vec<ValueId> = n.inputs.iter().flatten().copied().filter(|v| g.value(*v).constant.is_none()).collect();
            let from_islands = !computed.is_empty() && computed.iter().all(|v| producers[v.0].is_some_and(|p| marked(&island, p)));
            let to_islands = n.outputs.iter().all(|o| {
                !g.outputs.contains(o) && !readers[o.0].is_empty() && readers[o.0].iter().all(|&r| marked(&island, r))
            });
            if from_islands && to_islands {
                island[k] = true;
                changed = true;
            }
        }
        if !changed {
            return island;
        }
    }
}

/// Makes every float island of `q` (quantized around it) take float values: a `DequantizeLinear` before each of
/// its int8 inputs, a `QuantizeLinear` after each of its int8 outputs (with the parameters calibration gave
/// that output), so its regions run in float.
fn float_islands(q: &mut Graph) {
    let islands: Vec<usize> = (0..q.nodes.len()).filter(|&k| is_float_island(&q.nodes[k])).collect();
    if islands.is_empty() {
        return;
    }
    let mut before: HashMap<usize, Vec<Node>> = HashMap::new();
    let mut after: HashMap<usize, Vec<Node>> = HashMap::new();
    for k in islands {
        let name = q.nodes[k].name.clone();
        for i in 0..q.nodes[k].inputs.len() {
            let Some(x) = q.nodes[k].inputs[i] else { continue };
            let Some(p) = q.value(x).quant.clone().filter(|_| q.value(x).dtype == DType::I8) else { continue };
            let vname = format!("{}/float_for_{name}", q.value(x).name);
            let f = q.add_value(vname.clone(), DType::F32, q.value(x).shape.clone());
            dequantize_node(q, x, f, &p, &vname);
            before.entry(k).or_default().push(q.nodes.pop().expect("just added"));
            q.nodes[k].inputs[i] = Some(f);
        }
        for j in 0..q.nodes[k].outputs.len() {
            let y = q.nodes[k].outputs[j];
            let Some(p) = q.value(y).quant.clone().filter(|_| q.value(y).dtype == DType::I8) else { continue };
            let vname = format!("{}/float", q.value(y).name);
            let f = q.add_value(vname.clone(), DType::F32, q.value(y).shape.clone());
            q.value_mut(f).dynamic = q.value(y).dynamic;
            q.nodes[k].outputs[j] = f;
            quantize_node(q, f, y, &p, &format!("{}/quantize", q.value(y).name));
            after.entry(k).or_default().push(q.nodes.pop().expect("just added"));
        }
    }
    let nodes = std::mem::take(&mut q.nodes);
    for (k, n) in nodes.into_iter().enumerate() {
        q.nodes.extend(before.remove(&k).unwrap_or_default());
        q.nodes.push(n);
        q.nodes.extend(after.remove(&k).unwrap_or_default());
    }
}

/// Which values become int8 activations, and which must share parameters (union-find over value ids).
struct Activations {
    /// Float values that are graph inputs or computed.
    is_act: Vec<bool>,
    /// Values tied to share one set of parameters.
    uf: UnionFind,
    /// Outputs whose parameters the op fixes (Softmax, Logistic, Tanh).
    fixed: HashMap<usize, (f32, i64)>,
    /// (node, input) pairs not tied to the node's output because the input's parameters are fixed (a
    /// Logistic's output concatenated with box coordinates): a requantization to the output's parameters
    /// goes before the node, as TF's converter inserts one.
    requant: Vec<(usize, usize)>,
}

impl Activations {
    /// Whether `v`'s group holds a value whose parameters its op fixes.
    fn has_fixed(&mut self, v: usize) -> bool {
        let r = self.uf.find(v);
        let fixed: Vec<usize> = self.fixed.keys().copied().collect();
        fixed.into_iter().any(|f| self.uf.find(f) == r)
    }

    /// Checks that every live node quantizes and marks its activations and ties.
    fn mark(g: &Graph, live: &[usize], island: &[bool]) -> Result<Activations> {
        let nv = g.values.len();
        let mut is_act = vec![false; nv];
        for &i in &g.inputs {
            let v = g.value(i);
            if v.dtype != DType::F32 {
                return Err(Error::Unsupported(format!("int8 quantization: graph input '{}' is {}, only f32 inputs quantize", v.name, v.dtype)));
            }
            is_act[i.0] = true;
        }
        let mut a = Activations { is_act, uf: UnionFind((0..nv).collect()), fixed: HashMap::new(), requant: Vec::new() };
        let mut readers: Vec<Vec<usize>> = vec![Vec::new(); nv];
        for (k, n) in g.nodes.iter().enumerate() {
            for v in n.inputs.iter().flatten() {
                readers[v.0].push(k);
            }
        }
        for &k in live {
            a.mark_node(g, k, island, &readers)?;
        }
        Ok(a)
    }

    fn mark_node(&mut self, g: &Graph, k: usize, island: &[bool], readers: &[Vec<usize>]) -> Result<()> {
        let n = &g.nodes[k];
        let what = |why: String| Error::Unsupported(format!("int8 quantization of node '{}' ({}): {why}", n.name, n.op.name()));
        if island[k] {
            // its float outputs that leave the island are int8 activations of their own (each quantized after
            // the node); those only other islands read stay float
            for &o in &n.outputs {
                let leaves = g.outputs.contains(&o) || readers[o.0].iter().any(|&r| !island[r]);
                if leaves && g.value(o).dtype == DType::F32 && g.value(o).constant.is_none() {
                    self.is_act[o.0] = true;
                }
            }
            return Ok(());
        }
        let tie = classify(&n.op).map_err(what)?;
        if let Op::Rnn(a) = &n.op {
            if let Some(why) = super::lstm::refusal(g, n, a) {
                return Err(what(why));
            }
        }
        if let Op::Gemm { .. } = n.op {
            if n.input(2).is_some_and(|c| g.value(c).constant.is_none()) {
                return Err(what("a non-constant C input (bias) is not supported".into()));
            }
        }
        if let Op::Conv(_) | Op::ConvTranspose(_) | Op::Gemm { .. } = n.op {
            if g.value(n.input(1).expect("verified")).constant.is_none() {
                return Err(what("non-constant weights are not supported".into()));
            }
        }
        let y = n.outputs[0];
        if g.value(y).dtype != DType::F32 {
            return Err(what(format!("its output is {}, only f32 values quantize", g.value(y).dtype)));
        }
        self.is_act[y.0] = true;
        if let Some(f) = fixed_output(&n.op) {
            self.fixed.insert(y.0, f);
        }
        if tie {
            // Float data inputs (Gather's indices, Reshape's shape... are not float) share y's parameters.
            // An input whose group has parameters fixed by its producer would force them onto the output
            // (and every other input): a Logistic's [0, 1) on the box coordinates it is concatenated with.
            // It keeps its own and is requantized instead.
            let data_inputs: Vec<(usize, ValueId)> = match n.op {
                Op::Concat { .. } | Op::Binary(..) => n.inputs.iter().enumerate().filter_map(|(i, v)| v.map(|v| (i, v))).collect(),
                _ => n.input(0).map(|v| (0, v)).into_iter().collect(),
            };
            let data_inputs: Vec<(usize, ValueId, bool)> =
                data_inputs.into_iter().filter(|(_, v)| g.value(*v).dtype == DType::F32).map(|(i, v)| (i, v, self.is_act[v.0] && self.has_fixed(v.0))).collect();
            // Inputs that are all fixed (two Logistics concatenated) share them as before.
            let mixed = data_inputs.iter().any(|d| d.2) && data_inputs.iter().any(|d| !d.2);
            for (i, v, fixed) in data_inputs {
                if mixed && fixed {
                    self.requant.push((k, i));
                } else {
                    self.uf.union(y.0, v.0);
                }
            }
        }
        // Further outputs share the first's parameters (an LSTM's Y_h; its int16 Y_c has the cell state's).
        let shared = if matches!(n.op, Op::Rnn(_)) { &n.outputs[1..n.outputs.len().min(2)] } else { &n.outputs[1..] };
        for &o in shared {
            if g.value(o).dtype == DType::F32 && g.value(o).constant.is_none() {
                self.is_act[o.0] = true;
                self.uf.union(y.0, o.0);
            }
        }
        Ok(())
    }
}

/// Per group of tied values (keyed by its union-find root): the union of every member's range, or the
/// parameters an op fixes.
struct Groups {
    range: HashMap<usize, (f32, f32)>,
    fixed: HashMap<usize, (f32, i64)>,
    /// Factors by which a group's scale is widened (see [`Groups::fit_add_outputs`]).
    widen: HashMap<usize, f64>,
}

impl Groups {
    /// Group ranges: the union of every member's chosen range (constants in a group contribute theirs).
    fn collect(g: &Graph, cal: &Calibration, opts: &QuantizeOptions, acts: &mut Activations) -> Result<Groups> {
        let mut groups = Groups { range: HashMap::new(), fixed: HashMap::new(), widen: HashMap::new() };
        for v in 0..g.values.len() {
            let val = &g.values[v];
            let range = if acts.is_act[v] {
                match cal.observed.get(&ValueId(v)) {
                    Some(o) => Some(o.range(opts.method)),
                    None => return Err(Error::Unsupported(format!("int8 quantization: calibration recorded no range for '{}'", val.name))),
                }
            } else if val.dtype == DType::F32 && acts.uf.0[v] != v {
                // A constant operand tied to a group (Concat's constant part, Max's bound).
                val.constant.as_ref().map(const_range)
            } else {
                None
            };
            let r = acts.uf.find(v);
            if let Some((lo, hi)) = range {
                let e = groups.range.entry(r).or_insert((lo, hi));
                e.0 = e.0.min(lo);
                e.1 = e.1.max(hi);
            }
            if let Some(&f) = acts.fixed.get(&v) {
                groups.fixed.insert(r, f);
            }
        }
        Ok(groups)
    }

    /// The parameters of value `v`: its group's.
    fn params(&self, v: usize, uf: &mut UnionFind) -> QuantParams {
        let r = uf.find(v);
        if let Some(&(s, z)) = self.fixed.get(&r) {
            return QuantParams { scale: vec![s], zero_point: vec![z], axis: None };
        }
        let (lo, hi) = self.range.get(&r).copied().unwrap_or((0.0, 0.0));
        let p = activation_params(lo, hi);
        match self.widen.get(&r) {
            Some(&f) => QuantParams { scale: vec![(p.scale[0] as f64 * f) as f32], ..p },
            None => p,
        }
    }

    /// LiteRT's int8 ADD and SUB abort (a CHECK in `QuantizeMultiplierSmallerThanOneExp`) unless
    /// `2·max(input scales) / (2^20 · output scale) < 1`: an output whose range is ~10^6 times narrower than
    /// its inputs' (they almost cancel) gets its group's scale widened to the smallest that satisfies it.
    fn fit_add_outputs(&mut self, g: &Graph, live: &[usize], acts: &mut Activations) {
        for &k in live {
            let n = &g.nodes[k];
            if !matches!(n.op, Op::Binary(BinaryOp::Add | BinaryOp::Sub, _)) {
                continue;
            }
            let mut scale = |v: Option<ValueId>| v.filter(|v| acts.is_act[v.0]).map(|v| self.params(v.0, &mut acts.uf).scale[0] as f64);
            let (Some(a), Some(b), Some(y)) = (scale(n.input(0)), scale(n.input(1)), scale(Some(n.outputs[0]))) else { continue };
            let need = 2.0 * a.max(b) / (1u64 << 20) as f64;
            let r = acts.uf.find(n.outputs[0].0);
            if y <= need && !self.fixed.contains_key(&r) {
                *self.widen.entry(r).or_insert(1.0) *= need * 1.01 / y;
            }
        }
    }
}

/// The scale of node `n`'s (already quantized) input `i` in `q`; an error when that input has no int8 form (a
/// constant data operand, which constant folding leaves only when a rewrite made it after folding ran).
fn input_scale(q: &Graph, n: &Node, i: usize) -> Result<f32> {
    let v = n.input(i).ok_or_else(|| Error::InvalidModel(format!("node '{}' ({}) has no input {i}", n.name, n.op.name())))?;
    match q.value(v).quant.as_ref().and_then(|p| p.scale.first()) {
        Some(&s) => Ok(s),
        None => Err(Error::Unsupported(format!(
            "int8 quantization of node '{}' ({}): its input '{}' is not a quantized activation (a constant where int8 needs a computed value)",
            n.name,
            n.op.name(),
            q.value(v).name
        ))),
    }
}

/// Conv: per-channel int8 weights and an int32 bias (added when absent) for node `k`.
fn quantize_conv_weights(g: &Graph, q: &mut Graph, k: usize, n: &Node) -> Result<()> {
    let name = &n.name;
    let w = n.input(1).expect("verified");
    let wt = g.value(w).constant.as_ref().expect("checked").clone();
    let (mut wq, mut scales) = weights_per_channel(&wt)?;
    let s_in = input_scale(q, n, 0)?;
    let c_out = wt.shape[0];
    let bias = match n.input(2) {
        Some(b) => g.value(b).constant.as_ref().ok_or_else(|| Error::Unsupported(format!("int8 quantization of node '{name}': non-constant bias")))?.to_f64_vec(),
        None => vec![0.0; c_out],
    };
    widen_for_bias(&wt, &mut wq, &mut scales, &bias, s_in);
    let wname = format!("{}_int8", g.value(w).name);
    let wid = add_quant_const(q, wname, wq, QuantParams { scale: scales.clone(), zero_point: vec![0; scales.len()], axis: Some(0) });
    q.nodes[k].inputs[1] = Some(wid);
    let bid = add_bias(q, format!("{name}/bias_int32"), &bias, s_in, &scales, true);
    if q.nodes[k].inputs.len() < 3 {
        q.nodes[k].inputs.resize(3, None);
    }
    q.nodes[k].inputs[2] = Some(bid);
    Ok(())
}

/// What TFLite's TRANSPOSE_CONV cannot express (the rest of its geometry is checked by the exporter, which
/// knows the shapes): `Ok(false)`, or why not.
fn conv_transpose_int8(a: &crate::ir::ConvTransposeAttrs) -> std::result::Result<bool, String> {
    let instead = "TFLite's TRANSPOSE_CONV cannot express it, so it cannot be int8 on the Edge TPU (`--io-dtype float` does not help); \
                   run the model on the CPU target (`--target cpu`), or rebuild the layer with group 1 and no dilation";
    if a.conv.group > 1 {
        Err(format!("a grouped ConvTranspose (group {}): {instead}", a.conv.group))
    } else if a.conv.dilations.iter().any(|&d| d != 1) {
        Err(format!("a dilated ConvTranspose (dilations {:?}): {instead}", a.conv.dilations))
    } else if a.conv.kernel_shape.len() > 2 {
        Err(format!("a {}-D ConvTranspose: TRANSPOSE_CONV is 2-D only; run the model on the CPU target (`--target cpu`)", a.conv.kernel_shape.len()))
    } else {
        Ok(false)
    }
}

/// ConvTranspose: int8 weights `[C_in, C_out, kh, kw]` symmetric per output channel (axis 1, TFLite's OHWI
/// axis 0) and an int32 bias (added when absent) of scale `input_scale × weight_scale[c]`.
fn quantize_conv_transpose_weights(g: &Graph, q: &mut Graph, k: usize, n: &Node) -> Result<()> {
    let what = |why: String| Error::Unsupported(format!("int8 quantization of node '{}' (ConvTranspose): {why}", n.name));
    let w = n.input(1).expect("verified");
    let wt = g.value(w).constant.as_ref().expect("checked");
    if wt.shape.len() != 4 {
        return Err(what(format!("weights of shape {:?}: TRANSPOSE_CONV is 2-D only; run the model on the CPU target (`--target cpu`)", wt.shape)));
    }
    // Per output channel: quantize [C_out, C_in, kh, kw] along axis 0, then lay it back.
    let (wq, scales) = weights_per_channel(&wt.permuted(&[1, 0, 2, 3]))?;
    let wid = add_quant_const(q, format!("{}_int8", g.value(w).name), wq.permuted(&[1, 0, 2, 3]), QuantParams { scale: scales.clone(), zero_point: vec![0; scales.len()], axis: Some(1) });
    q.nodes[k].inputs[1] = Some(wid);
    let bias = match n.input(2) {
        Some(b) => g.value(b).constant.as_ref().ok_or_else(|| what("non-constant bias".into()))?.to_f64_vec(),
        None => vec![0.0; scales.len()],
    };
    let bid = add_bias(q, format!("{}/bias_int32", n.name), &bias, input_scale(q, n, 0)?, &scales, true);
    q.nodes[k].inputs.resize(3, None);
    q.nodes[k].inputs[2] = Some(bid);
    Ok(())
}

/// Gemm: int8 weights laid `[N, K]` (`trans_b`, transposed here when the model has `[K, N]`) with alpha folded
/// in, symmetric per output unit (axis 0: TFLite's per-channel FULLY_CONNECTED, what TF's converter writes for
/// dense layers; one scale for the whole matrix loses the small rows of a head whose outputs differ in range,
/// e.g. landmark coordinates next to their depths); beta · C into an int32 bias of scale
/// `input_scale × weight_scale[n]`. The node becomes `Gemm { alpha: 1, beta: 1, trans_b: true }`.
fn quantize_gemm_weights(g: &Graph, q: &mut Graph, k: usize, n: &Node, (alpha, beta, trans_b): (f32, f32, bool), (trans_a, activation): (bool, Option<crate::ir::Activation>)) -> Result<()> {
    let name = &n.name;
    let b = n.input(1).expect("verified");
    let bt = g.value(b).constant.as_ref().expect("checked");
    if bt.shape.len() != 2 {
        return Err(Error::Unsupported(format!("int8 quantization of node '{name}' (Gemm): weights of shape {:?}, expected 2-D", bt.shape)));
    }
    let laid = if trans_b { bt.clone() } else { bt.permuted(&[1, 0]) };
    let w = Tensor::from_f32(laid.shape.clone(), laid.to_f64_vec().iter().map(|&x| (x * alpha as f64) as f32).collect());
    let n_out = w.shape[0];
    let bias: Vec<f64> = match n.input(2).and_then(|c| g.value(c).constant.as_ref()) {
        Some(c) if c.len() == n_out => c.to_f64_vec().iter().map(|x| x * beta as f64).collect(),
        Some(c) if c.len() == 1 => vec![c.to_f64_vec()[0] * beta as f64; n_out],
        Some(_) => return Err(Error::Unsupported(format!("int8 quantization of node '{name}': Gemm C is a full matrix, not a bias"))),
        None => vec![0.0; n_out],
    };
    let s_in = input_scale(q, n, 0)?;
    let (mut wq, mut scales) = weights_per_channel(&w)?;
    widen_for_bias(&w, &mut wq, &mut scales, &bias, s_in);
    let wid = add_quant_const(q, format!("{}_int8", g.value(b).name), wq, QuantParams { zero_point: vec![0; scales.len()], scale: scales.clone(), axis: Some(0) });
    let bid = add_bias(q, format!("{name}/bias_int32"), &bias, s_in, &scales, true);
    q.nodes[k].op = Op::Gemm { alpha: 1.0, beta: 1.0, trans_a, trans_b: true, activation };
    q.nodes[k].inputs = vec![n.input(0), Some(wid), Some(bid)];
    Ok(())
}

/// MatMul with constant weights: per-tensor int8 weights.
fn quantize_matmul_weights(g: &Graph, q: &mut Graph, k: usize, n: &Node) {
    let b = n.input(1).expect("verified");
    if let Some(bt) = g.value(b).constant.as_ref() {
        let mut wv: Vec<f32> = bt.to_f64_vec().iter().map(|&x| x as f32).collect();
        let (wq, s) = weights_per_tensor(&mut wv, &bt.shape);
        let wid = add_quant_const(q, format!("{}_int8", g.value(b).name), wq, QuantParams { scale: vec![s], zero_point: vec![0], axis: None });
        q.nodes[k].inputs[1] = Some(wid);
    }
}

/// Constant-mode Pad: the fill value quantized with the data's parameters (which the output shares), added
/// when the node has none (ONNX's default 0). The int8 kernel copies the fill as it is, so a fill quantized
/// with parameters of its own, or a missing one read as the integer 0, would pad with another real value
/// than TFLite's PAD, which fills with the data's zero point.
fn quantize_pad_fill(g: &Graph, q: &mut Graph, k: usize, n: &Node, groups: &Groups, uf: &mut UnionFind) {
    let p = groups.params(n.outputs[0].0, uf);
    let fill = n.input(2).and_then(|c| g.value(c).constant.as_ref()).map_or(0.0, |c| c.to_f64_vec().first().copied().unwrap_or(0.0));
    let t = Tensor::from_vec(vec![], vec![quantize_one(fill as f32, p.scale[0], p.zero_point[0], -128)]).expect("one element");
    let id = add_quant_const(q, format!("{}/fill_int8", n.name), t, p);
    let inputs = &mut q.nodes[k].inputs;
    if inputs.len() < 3 {
        inputs.resize(3, None);
    }
    inputs[2] = Some(id);
}

/// Float constant operands (Add's addend, Concat's constant part, PRelu's slope...): their group's parameters
/// when tied, their own range's otherwise.
fn quantize_float_operands(g: &Graph, q: &mut Graph, k: usize, n: &Node, groups: &Groups, uf: &mut UnionFind) {
    for (i, inp) in n.inputs.iter().enumerate() {
        let Some(v) = *inp else { continue };
        let val = g.value(v);
        let Some(c) = val.constant.as_ref() else { continue };
        if val.dtype != DType::F32 || !takes_float_data(&n.op, i) {
            continue;
        }
        let p = if uf.0[v.0] != v.0 {
            groups.params(v.0, uf)
        } else {
            let (lo, hi) = const_range(c);
            activation_params(lo, hi)
        };
        let data: Vec<i8> = c.to_f64_vec().iter().map(|&x| quantize_one(x as f32, p.scale[0], p.zero_point[0], -128)).collect();
        let t = Tensor::from_vec(c.shape.clone(), data).expect("same length");
        let id = add_quant_const(q, format!("{}_int8", val.name), t, p);
        q.nodes[k].inputs[i] = Some(id);
    }
}

/// Whether input `i` of `op` is float data (not a shape, axes, pads or indices operand).
fn takes_float_data(op: &Op, i: usize) -> bool {
    match op {
        Op::Binary(..) | Op::Concat { .. } => true,
        Op::Pad { .. } => i == 0 || i == 2,
        _ => i == 0,
    }
}

/// min/max of a constant (for a constant operand's own parameters).
fn const_range(c: &Tensor) -> (f32, f32) {
    let v = c.to_f64_vec();
    let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if lo > hi {
        (0.0, 0.0)
    } else {
        (lo as f32, hi as f32)
    }
}

fn add_quant_const(q: &mut Graph, name: String, t: Tensor, p: QuantParams) -> ValueId {
    let id = q.add_constant(name, t);
    q.value_mut(id).quant = Some(p);
    id
}

/// Symmetric per-output-channel int8 weights (axis 0) and their scales.
fn weights_per_channel(w: &Tensor) -> Result<(Tensor, Vec<f32>)> {
    let v = w.to_f64_vec();
    let c = w.shape[0];
    let per = v.len().checked_div(c).unwrap_or(0);
    let mut scales = Vec::with_capacity(c);
    let mut out = Vec::with_capacity(v.len());
    for ch in 0..c {
        let sl = &v[ch * per..(ch + 1) * per];
        let absmax = sl.iter().fold(0.0f64, |m, x| m.max(x.abs())) as f32;
        let s = symmetric_scale(absmax);
        scales.push(s);
        out.extend(sl.iter().map(|&x| quantize_one(x as f32, s, 0, -127)));
    }
    Ok((Tensor::from_vec(w.shape.clone(), out).expect("same length"), scales))
}

/// Widens the weight scale of every output channel whose int32 bias would not fit at `s_in × scale` (TF's
/// `AdjustWeightsForBiasScale`: a dead or tiny channel with a bias), requantizing that channel's weights.
fn widen_for_bias(w: &Tensor, wq: &mut Tensor, scales: &mut [f32], bias: &[f64], s_in: f32) {
    let c = scales.len();
    let per = w.len().checked_div(c).unwrap_or(0);
    let mut fixed: Option<Vec<i8>> = None;
    for ch in 0..c.min(bias.len()) {
        let s = scale_for_bias(scales[ch], bias[ch], s_in);
        if s == scales[ch] {
            continue;
        }
        scales[ch] = s;
        let v = w.to_f64_vec();
        let out = fixed.get_or_insert_with(|| wq.view::<i8>().expect("int8 weights").to_vec());
        for (o, &x) in out[ch * per..(ch + 1) * per].iter_mut().zip(&v[ch * per..(ch + 1) * per]) {
            *o = quantize_one(x as f32, s, 0, -127);
        }
    }
    if let Some(out) = fixed {
        *wq = Tensor::from_vec(w.shape.clone(), out).expect("same length");
    }
}

/// Symmetric per-tensor int8 weights and their scale.
fn weights_per_tensor(v: &mut [f32], shape: &[usize]) -> (Tensor, f32) {
    let absmax = v.iter().fold(0.0f32, |m, x| m.max(x.abs()));
    let s = symmetric_scale(absmax);
    let out: Vec<i8> = v.iter().map(|&x| quantize_one(x, s, 0, -127)).collect();
    (Tensor::from_vec(shape.to_vec(), out).expect("same length"), s)
}

/// An int32 bias with scale `s_in × s_w[c]` (per channel when `per_channel`).
fn add_bias(q: &mut Graph, name: String, bias: &[f64], s_in: f32, s_w: &[f32], per_channel: bool) -> ValueId {
    let scales: Vec<f32> = (0..bias.len()).map(|c| s_in * s_w[if s_w.len() == 1 { 0 } else { c }]).collect();
    let data: Vec<i32> = bias.iter().zip(&scales).map(|(&b, &s)| (b / s as f64).round().clamp(i32::MIN as f64, i32::MAX as f64) as i32).collect();
    let t = Tensor::from_vec(vec![bias.len()], data).expect("1-D");
    let p = if per_channel {
        QuantParams { zero_point: vec![0; scales.len()], scale: scales, axis: Some(0) }
    } else {
        QuantParams { scale: vec![scales.first().copied().unwrap_or(s_in)], zero_point: vec![0], axis: None }
    };
    add_quant_const(q, name, t, p)
}

/// A `QuantizeLinear` node (float → int8 with `p`, TFLite rounding).
pub fn quantize_node(q: &mut Graph, x: ValueId, y: ValueId, p: &QuantParams, name: &str) {
    let s = q.add_constant(format!("{name}/scale"), Tensor::scalar(p.scale[0]));
    let z = q.add_constant(format!("{name}/zero_point"), Tensor::scalar(p.zero_point[0] as i8));
    q.add_node(name, Op::QuantizeLinear { axis: 1, to: DType::I8, rounding: crate::ir::QuantRounding::TfLite }, vec![Some(x), Some(s), Some(z)], vec![y]);
}

/// A `DequantizeLinear` node (int8 with `p` → float).
pub fn dequantize_node(q: &mut Graph, x: ValueId, y: ValueId, p: &QuantParams, name: &str) {
    let s = q.add_constant(format!("{name}/scale"), Tensor::scalar(p.scale[0]));
    let z = q.add_constant(format!("{name}/zero_point"), Tensor::scalar(p.zero_point[0] as i8));
    q.add_node(name, Op::DequantizeLinear { axis: 1 }, vec![Some(x), Some(s), Some(z)], vec![y]);
}

/// Float inputs and outputs around the int8 graph: each input `x` becomes a float input of the same name
/// followed by a QuantizeLinear into `x_int8`; each output `y` is renamed `y_int8` and a DequantizeLinear
/// produces the float output `y`.
fn add_float_edges(q: &mut Graph) {
    let body = std::mem::take(&mut q.nodes);
    for k in 0..q.inputs.len() {
        let i = q.inputs[k];
        let v = q.value(i).clone();
        let p = v.quant.clone().expect("quantized input");
        let f = q.add_value(v.name.clone(), DType::F32, v.shape.clone());
        q.value_mut(i).name = format!("{}_int8", v.name);
        q.inputs[k] = f;
        quantize_node(q, f, i, &p, &format!("{}/quantize", v.name));
    }
    q.nodes.extend(body);
    for k in 0..q.outputs.len() {
        let o = q.outputs[k];
        let v = q.value(o).clone();
        let Some(p) = v.quant.clone() else { continue };
        let f = q.add_value(v.name.clone(), DType::F32, v.shape.clone());
        q.value_mut(o).name = format!("{}_int8", v.name);
        q.outputs[k] = f;
        dequantize_node(q, o, f, &p, &format!("{}/dequantize", v.name));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::builder::GraphBuilder;
    use crate::ir::{AutoPad, ConvAttrs, PoolAttrs};
    use crate::quant::calibrate;
    use crate::target::Progress;

    /// Conv(bias-free) → MaxPool → Reshape → Softmax, calibrated on one ramp input.
    fn quantized(float_io: bool) -> (Graph, Graph) {
        let mut b = GraphBuilder::with_eval("t", &crate::runtime::CpuEval);
        let x = b.input("x", DType::F32, &[1, 2, 4, 4]);
        // Channel 0 weights reach ±0.5, channel 1 ±2.0.
        let w: Vec<f32> = (0..3 * 2 * 9).map(|i| if i < 18 { 0.5 - (i as f32) / 18.0 } else { 2.0 - 4.0 * ((i - 18) % 18) as f32 / 17.0 }).collect();
        let w = b.constant("w", Tensor::from_f32(vec![3, 2, 3, 3], w));
        let conv = ConvAttrs { kernel_shape: vec![3, 3], strides: vec![], dilations: vec![], pads: vec![1, 1, 1, 1], auto_pad: AutoPad::NotSet, group: 1, activation: None };
        let c = b.op(Op::Conv(conv), &[x, w]).unwrap();
        let pool = PoolAttrs { kernel_shape: vec![2, 2], strides: vec![2, 2], dilations: vec![], pads: vec![0; 4], auto_pad: AutoPad::NotSet, ceil_mode: false, count_include_pad: false };
        let p = b.node(Op::MaxPool(pool), &[Some(c)], 1).unwrap()[0];
        let r = b.reshape(p, &[1, 12]).unwrap();
        let s = b.softmax(r).unwrap();
        b.output(s);
        let g = b.finish().unwrap();
        let sample = vec![Tensor::from_f32(vec![1, 2, 4, 4], (0..32).map(|i| i as f32 / 31.0 - 0.25).collect())];
        let cal = calibrate(&g, &[sample], RangeMethod::MinMax, &Progress::default()).unwrap();
        let q = quantize(&g, &cal, &QuantizeOptions { method: RangeMethod::MinMax, float_io }).unwrap();
        (g, q)
    }

    /// ReLU then a channel Pad (BlazeFace's residual blocks): the ReLU output's zero point is -128, so the
    /// int8 fill must be -128 (real 0), with or without an explicit fill operand.
    #[test]
    fn pad_fills_with_the_real_zero() {
        for explicit_fill in [false, true] {
            let mut b = GraphBuilder::with_eval("t", &crate::runtime::CpuEval);
            let x = b.input("x", DType::F32, &[1, 2, 2, 2]);
            let r = b.op(Op::Unary(UnaryOp::Relu), &[x]).unwrap();
            let pads = b.constant("pads", Tensor::from_vec(vec![8], vec![0i64, 0, 0, 0, 0, 2, 0, 0]).unwrap());
            let fill = explicit_fill.then(|| b.constant("fill", Tensor::scalar(0.0f32)));
            let p = b.node(Op::Pad { mode: PadMode::Constant }, &[Some(r), Some(pads), fill], 1).unwrap()[0];
            b.output(p);
            let g = b.finish().unwrap();
            let sample = vec![Tensor::from_f32(vec![1, 2, 2, 2], (0..8).map(|i| i as f32 - 2.0).collect())];
            let cal = calibrate(&g, std::slice::from_ref(&sample), RangeMethod::MinMax, &Progress::default()).unwrap();
            let q = quantize(&g, &cal, &QuantizeOptions { method: RangeMethod::MinMax, float_io: true }).unwrap();
            let out = &crate::runtime::Session::new(q).unwrap().run(&sample).unwrap()[0];
            let v = out.to_f64_vec();
            assert_eq!(out.shape, vec![1, 4, 2, 2]);
            // Channels 2 and 3 are padding: exactly 0, not 128 steps above the zero point.
            assert!(v[8..].iter().all(|&x| x == 0.0), "explicit fill {explicit_fill}: {v:?}");
            assert!(v[..8].iter().zip([0.0, 0.0, 0.0, 1.0, 2.0, 3.0, 4.0, 5.0]).all(|(a, b)| (a - b).abs() < 0.02), "{v:?}");
        }
    }

    fn by_name<'a>(g: &'a Graph, name: &str) -> &'a crate::ir::Value {
        g.values.iter().find(|v| v.name == name).unwrap_or_else(|| panic!("no value {name}"))
    }

    #[test]
    fn follows_the_tflite_int8_spec() {
        let (g, q) = quantized(false);
        let conv = q.nodes.iter().find(|n| matches!(n.op, Op::Conv(_))).unwrap();
        let w = q.value(conv.input(1).unwrap());
        let wp = w.quant.as_ref().unwrap();
        // Weights: int8, symmetric per output channel on axis 0, scale = max|w| / 127, values in [-127, 127].
        assert_eq!((w.dtype, wp.axis, wp.zero_point.clone()), (DType::I8, Some(0), vec![0, 0, 0]));
        assert!((wp.scale[0] - 0.5 / 127.0).abs() < 1e-7 && (wp.scale[1] - 2.0 / 127.0).abs() < 1e-7, "{:?}", wp.scale);
        assert!(w.constant.as_ref().unwrap().view::<i8>().unwrap().iter().all(|&v| v >= -127));
        // A bias was added: int32, scale input_scale × weight_scale per channel, zero point 0.
        let bias = q.value(conv.input(2).unwrap());
        let bp = bias.quant.as_ref().unwrap();
        let s_in = q.value(q.inputs[0]).quant.as_ref().unwrap().scale[0];
        assert_eq!(bias.dtype, DType::I32);
        for c in 0..3 {
            assert!((bp.scale[c] - s_in * wp.scale[c]).abs() < 1e-9);
        }
        // Input range [-0.25, 0.75]: asymmetric, zero exactly representable.
        let ip = q.value(q.inputs[0]).quant.as_ref().unwrap();
        assert!((ip.scale[0] - 1.0 / 255.0).abs() < 1e-6);
        assert_eq!(ip.zero_point[0], -128 + 64);
        // MaxPool and Reshape share their input's parameters; Softmax's output is fixed at (1/256, -128).
        let c = conv.outputs[0];
        let pool = q.nodes.iter().find(|n| matches!(n.op, Op::MaxPool(_))).unwrap();
        let reshape = q.nodes.iter().find(|n| matches!(n.op, Op::Reshape { .. })).unwrap();
        assert_eq!(q.value(pool.outputs[0]).quant, q.value(c).quant);
        assert_eq!(q.value(reshape.outputs[0]).quant, q.value(c).quant);
        let out = q.value(q.outputs[0]);
        assert_eq!((out.dtype, out.quant.clone().unwrap().scale, out.quant.clone().unwrap().zero_point), (DType::I8, vec![1.0 / 256.0], vec![-128]));
        // The float graph is untouched, names are kept.
        assert_eq!(g.value(g.outputs[0]).dtype, DType::F32);
        assert_eq!(out.name, g.value(g.outputs[0]).name);
    }

    #[test]
    fn float_io_puts_quantize_and_dequantize_at_the_edges() {
        let (g, q) = quantized(true);
        assert_eq!(q.value(q.inputs[0]).dtype, DType::F32);
        assert_eq!(q.value(q.outputs[0]).dtype, DType::F32);
        assert_eq!(q.value(q.inputs[0]).name, g.value(g.inputs[0]).name);
        assert!(matches!(q.nodes.first().unwrap().op, Op::QuantizeLinear { .. }));
        assert!(matches!(q.nodes.last().unwrap().op, Op::DequantizeLinear { .. }));
        assert_eq!(by_name(&q, &format!("{}_int8", g.value(g.inputs[0]).name)).dtype, DType::I8);
    }

    #[test]
    fn an_add_whose_inputs_almost_cancel_gets_an_output_scale_litert_accepts() {
        // y = x·(1 + 1e-7) − x: inputs of scale ~1/127, an output range ~1e-7 wide.
        let mut b = GraphBuilder::with_eval("t", &crate::runtime::CpuEval);
        let x = b.input("x", DType::F32, &[1, 8]);
        let c = b.constant("c", Tensor::from_f32(vec![1], vec![1.0 + 1e-7]));
        let m = b.op(Op::Binary(BinaryOp::Mul, None), &[x, c]).unwrap();
        let y = b.op(Op::Binary(BinaryOp::Sub, None), &[m, x]).unwrap();
        b.output(y);
        let g = b.finish().unwrap();
        let sample = vec![Tensor::from_f32(vec![1, 8], (0..8).map(|i| i as f32 / 7.0 - 0.5).collect())];
        let cal = calibrate(&g, &[sample], RangeMethod::MinMax, &Progress::default()).unwrap();
        let q = quantize(&g, &cal, &QuantizeOptions::default()).unwrap();
        let s = |v: ValueId| q.value(v).quant.as_ref().unwrap().scale[0] as f64;
        let need = 2.0 * s(m).max(s(x)) / (1u64 << 20) as f64;
        assert!(s(y) > need, "output scale {:e} must exceed {need:e}", s(y));
        assert!(s(y) < need * 1.1, "widened no more than needed: {:e} vs {need:e}", s(y));
    }

    #[test]
    fn an_op_without_int8_kernel_is_named() {
        let mut b = GraphBuilder::with_eval("t", &crate::runtime::CpuEval);
        let x = b.input("x", DType::F32, &[4]);
        let y = b.op(Op::Unary(UnaryOp::Erf), &[x]).unwrap();
        b.output(y);
        let g = b.finish().unwrap();
        let cal = calibrate(&g, &[vec![Tensor::from_f32(vec![4], vec![0.0, 1.0, 2.0, 3.0])]], RangeMethod::MinMax, &Progress::default()).unwrap();
        let e = quantize(&g, &cal, &QuantizeOptions::default()).unwrap_err().to_string();
        assert!(e.contains("Erf") && e.contains("int8"), "{e}");
    }
    /// Relu → [Sqrt → Mul by a constant → Floor] → Relu, Sqrt and Floor marked `keep_float`: the three stay one
    /// float island (the unmarked Mul between them joins it), a dequantize before and a quantize after it.
    #[test]
    fn marked_nodes_and_the_nodes_between_them_stay_float() {
        for mark in [true, false] {
            let mut b = GraphBuilder::with_eval("t", &crate::runtime::CpuEval);
            let x = b.input("x", DType::F32, &[1, 8]);
            let r = b.op(Op::Unary(UnaryOp::Relu), &[x]).unwrap();
            let s = b.op(Op::Unary(UnaryOp::Sqrt), &[r]).unwrap();
            let c = b.constant("c", Tensor::from_f32(vec![1], vec![3.0]));
            let m = b.op(Op::Binary(BinaryOp::Mul, None), &[s, c]).unwrap();
            let f = b.op(Op::Unary(UnaryOp::Floor), &[m]).unwrap();
            let y = b.op(Op::Unary(UnaryOp::Relu), &[f]).unwrap();
            b.output(y);
            let mut g = b.finish().unwrap();
            for n in g.nodes.iter_mut() {
                n.keep_float = mark && matches!(n.op, Op::Unary(UnaryOp::Sqrt | UnaryOp::Floor));
            }
            // 3·√x halfway between integers (and one negative x), so the input's int8 rounding leaves the floor
            let xs: Vec<f32> = [-1.0].into_iter().chain((0..7).map(|k| ((k as f32 + 0.5) / 3.0).powi(2))).collect();
            let sample = vec![Tensor::from_f32(vec![1, 8], xs.clone())];
            let cal = calibrate(&g, std::slice::from_ref(&sample), RangeMethod::MinMax, &Progress::default()).unwrap();
            let q = quantize(&g, &cal, &QuantizeOptions { method: RangeMethod::MinMax, float_io: true });
            if !mark {
                assert!(q.unwrap_err().to_string().contains("Sqrt"));
                continue;
            }
            let q = q.unwrap();
            for (op, dtype) in [(Op::Unary(UnaryOp::Sqrt), DType::F32), (Op::Binary(BinaryOp::Mul, None), DType::F32), (Op::Unary(UnaryOp::Floor), DType::F32)] {
                let n = q.nodes.iter().find(|n| n.op == op).unwrap();
                assert!(n.keep_float, "{op:?}");
                assert_eq!(q.value(n.outputs[0]).dtype, dtype, "{op:?}");
            }
            let count = |f: fn(&Op) -> bool| q.nodes.iter().filter(|n| f(&n.op)).count();
            // float I/O adds one quantize (input) and one dequantize (output); the island one of each
            assert_eq!(count(|o| matches!(o, Op::DequantizeLinear { .. })), 2);
            assert_eq!(count(|o| matches!(o, Op::QuantizeLinear { .. })), 2);
            let out = crate::runtime::Session::new(q).unwrap().run(&sample).unwrap().remove(0).to_f64_vec();
            let want: Vec<f64> = xs.iter().map(|&x| ((x as f64).max(0.0).sqrt() * 3.0).floor()).collect();
            assert!(out.iter().zip(&want).all(|(a, b)| (a - b).abs() < 0.05), "{out:?} vs {want:?}");
        }
    }
}
