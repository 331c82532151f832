//! Lowering of the core IR to StableHLO (MLIR text), one file per op family.
//!
//! The result is a module with one function, `@main`, whose arguments are the graph inputs (in order) and whose
//! results are the graph outputs. Shapes are static: every value's shape is the one shape inference recorded in
//! the graph, and each lowered node is checked against it. Weights become `stablehlo.constant`s (large ones as
//! hex blobs). A node whose outputs were folded to constants is not lowered at all.
//!
//! ```
//! use tpu_sdk_core::ir::{DType, Graph, Op, UnaryOp};
//! let mut g = Graph::new("relu");
//! let x = g.add_input("x", DType::F32, vec![2, 3]);
//! let y = g.add_value("y", DType::F32, vec![2, 3]);
//! g.add_node("r", Op::Unary(UnaryOp::Relu), vec![Some(x)], vec![y]);
//! g.outputs.push(y);
//! let mlir = tpu_sdk_cloud_tpu::lower::lower(&g).unwrap();
//! assert!(mlir.contains("func.func @main(%arg0: tensor<2x3xf32>) -> (tensor<2x3xf32>)"));
//! assert!(mlir.contains("stablehlo.maximum"));
//! assert!(mlir.contains(r#"loc("r")"#)); // ops carry their node's name
//! ```

mod control_flow;
mod conv;
mod elementwise;
pub(crate) mod emit;
mod gather;
mod matmul;
mod misc;
mod norm;
mod pool;
mod recurrent;
mod reduce;
mod resize;
mod shape;

use std::fmt::Write;

use tpu_sdk_core::ir::{DType, Graph, Node, Op, ValueId};

use crate::error::{Error, Result};
use emit::{Cx, V};

/// How precisely f32 matrix products and convolutions are computed on the device.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Precision {
    /// The platform's fastest mode (on TPU: one bfloat16 pass, about 3 significant digits).
    Default,
    /// Three bfloat16 passes on TPU (about f32 accuracy for most models).
    High,
    /// Full f32 (six bfloat16 passes on TPU): results match the CPU reference to ~1e-6. The default.
    #[default]
    Highest,
}

impl Precision {
    fn name(self) -> Option<&'static str> {
        match self {
            Precision::Default => None,
            Precision::High => Some("HIGH"),
            Precision::Highest => Some("HIGHEST"),
        }
    }
    /// `, precision = [X, X]` for `dot_general` on floats ("" for the default).
    pub(crate) fn attr_dot(self, d: DType) -> String {
        match self.name() {
            Some(p) if d.is_float() => format!(", precision = [{p}, {p}]"),
            _ => String::new(),
        }
    }
    /// `, precision_config = [...]` for `convolution` on floats ("" for the default).
    pub(crate) fn attr_conv(self, d: DType) -> String {
        match self.name() {
            Some(p) if d.is_float() => {
                format!(", precision_config = [#stablehlo<precision {p}>, #stablehlo<precision {p}>]")
            }
            _ => String::new(),
        }
    }
}

/// Options of the lowering.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LowerOptions {
    /// Precision of f32 matrix products and convolutions.
    pub precision: Precision,
    /// Constants with more elements than this become function arguments ([`Program::params`]) instead of being
    /// embedded in the module; `None` embeds every constant. Passing weights as arguments keeps programs small
    /// and compile times short (XLA does not constant-fold through them), and lets the runtime upload them once.
    pub max_inline_constant: Option<usize>,
}

impl Default for LowerOptions {
    /// Highest precision; constants above 1024 elements as arguments.
    fn default() -> LowerOptions {
        LowerOptions { precision: Precision::Highest, max_inline_constant: Some(1024) }
    }
}

/// A lowered graph: the module, and the constants that it takes as arguments after the graph inputs.
#[derive(Clone, Debug, PartialEq)]
pub struct Program {
    /// The StableHLO module (MLIR text); `@main` takes the graph inputs, then one argument per entry of `params`.
    pub mlir: String,
    /// Graph values (constants) passed as trailing arguments of `@main`, in order.
    pub params: Vec<ValueId>,
}

/// The MLIR tensor type of a dtype and shape (`tensor<2x3xf32>`, `tensor<i1>`).
pub fn tensor_type(dtype: DType, shape: &[usize]) -> String {
    emit::ty(dtype, shape)
}

/// Lowers `graph` to a self-contained StableHLO module (MLIR text): `@main` takes exactly the graph inputs and
/// every constant is embedded.
pub fn lower(graph: &Graph) -> Result<String> {
    let opts = LowerOptions { max_inline_constant: None, ..LowerOptions::default() };
    Ok(lower_program(graph, &opts)?.mlir)
}

/// Lowers `graph` to a StableHLO module with the given options (large constants may become arguments).
pub fn lower_program(graph: &Graph, opts: &LowerOptions) -> Result<Program> {
    lower_with(graph, opts, None, false, &[])
}

/// Like [`lower_program`], with input/output aliasing: each `(output, input)` pair (graph indices) marks the
/// input's buffer as reusable for that output (`tf.aliasing_output`), so a runtime that donates the input gets
/// the output written in place (a generation's key/value cache). The two must have the same type.
pub fn lower_program_aliased(graph: &Graph, opts: &LowerOptions, aliases: &[(usize, usize)]) -> Result<Program> {
    check_aliases(graph, aliases)?;
    lower_with(graph, opts, None, false, aliases)
}

/// Each `(output, input)` alias names an output and an input of the same type.
fn check_aliases(graph: &Graph, aliases: &[(usize, usize)]) -> Result<()> {
    for &(o, i) in aliases {
        let (Some(&ov), Some(&iv)) = (graph.outputs.get(o), graph.inputs.get(i)) else {
            return Err(Error::Invalid(format!("alias of output {o} to input {i}: no such output or input")));
        };
        let (ov, iv) = (graph.value(ov), graph.value(iv));
        if ov.dtype != iv.dtype || ov.shape != iv.shape {
            return Err(Error::Invalid(format!(
                "output '{}' {}{:?} cannot reuse input '{}' {}{:?}: types differ",
                ov.name, ov.dtype, ov.shape, iv.name, iv.dtype, iv.shape
            )));
        }
    }
    Ok(())
}

/// Lowers `graph` for SPMD tensor parallelism with `plan`: every argument and result carries an `mhlo.sharding`
/// annotation (results and unsplit values replicated) and the module says how many partitions it has. With
/// `weights_as_args`, each sharded weight is an argument (in [`Program::params`]) that the runtime feeds with
/// one shard per device; otherwise it stays an embedded constant under a sharding constraint (a self-contained
/// program, for artifacts).
pub fn lower_program_sharded(
    graph: &Graph,
    opts: &LowerOptions,
    plan: &crate::shard::ShardPlan,
    weights_as_args: bool,
) -> Result<Program> {
    lower_with(graph, opts, Some(plan), weights_as_args, &[])
}

/// [`lower_program_sharded`] (weights as arguments) with input/output aliasing as in [`lower_program_aliased`]:
/// the aliased inputs and outputs are replicated, so each device of the plan updates its own copy in place.
pub fn lower_program_sharded_aliased(
    graph: &Graph,
    opts: &LowerOptions,
    plan: &crate::shard::ShardPlan,
    aliases: &[(usize, usize)],
) -> Result<Program> {
    check_aliases(graph, aliases)?;
    lower_with(graph, opts, Some(plan), true, aliases)
}

fn lower_with(
    graph: &Graph,
    opts: &LowerOptions,
    plan: Option<&crate::shard::ShardPlan>,
    weights_as_args: bool,
    aliases: &[(usize, usize)],
) -> Result<Program> {
    // A value larger than this process may allocate is refused before any constant is materialised as text.
    tpu_sdk_core::limits::check_graph(graph).map_err(|e| match e {
        tpu_sdk_core::Error::ResourceLimit(m) => Error::ResourceLimit(m),
        other => Error::Invalid(other.to_string()),
    })?;
    let mut cx = Cx::new(graph, *opts);
    cx.shard = plan.cloned();
    cx.shard_args = weights_as_args;
    let ann = |v: Option<ValueId>, rank: usize| match plan {
        Some(p) => format!(" {{{}}}", p.attribute(v, rank)),
        None => String::new(),
    };
    let mut args = Vec::new();
    for (i, &id) in graph.inputs.iter().enumerate() {
        let v = graph.value(id);
        if v.dynamic {
            return Err(Error::Invalid(format!(
                "graph input '{}' has a dynamic shape; give it a static one (--input-shape / --dim)",
                v.name
            )));
        }
        // one attribute dictionary: the sharding (with a plan) and the alias
        let mut attrs: Vec<String> = plan.map(|p| p.attribute(None, v.shape.len())).into_iter().collect();
        if let Some((output, _)) = aliases.iter().find(|&&(_, input)| input == i) {
            attrs.push(format!("tf.aliasing_output = {output} : i32"));
        }
        let attrs = if attrs.is_empty() { String::new() } else { format!(" {{{}}}", attrs.join(", ")) };
        args.push(format!("%arg{i}: {}{attrs}", emit::ty(v.dtype, &v.shape)));
        cx.bind(id, format!("%arg{i}"));
    }
    lower_nodes(&mut cx, graph)?;
    cx.set_loc("");
    let mut rets = Vec::new();
    for &o in &graph.outputs {
        rets.push(cx.value(o)?);
    }
    for (k, &p) in cx.params.iter().enumerate() {
        let v = graph.value(p);
        args.push(format!("%arg{}: {}{}", graph.inputs.len() + k, emit::ty(v.dtype, &v.shape), ann(Some(p), v.shape.len())));
    }
    if let Some(plan) = plan {
        if let Some((w, _)) = plan.weights.iter().find(|(w, _)| weights_as_args && !cx.params.contains(w)) {
            return Err(Error::Invalid(format!(
                "--shard: weight '{}' is not used by the lowered program (it was folded away)",
                graph.value(*w).name
            )));
        }
    }
    let mut s = String::new();
    match plan {
        Some(p) => {
            let _ = writeln!(
                s,
                "module @{} attributes {{mhlo.num_partitions = {} : i32, mhlo.num_replicas = {} : i32}} {{",
                module_name(&graph.name),
                p.parts,
                p.replicas.max(1)
            );
            if let Some(decls) = p.module_decls() {
                let _ = writeln!(s, "  {decls}");
            }
        }
        None => {
            let _ = writeln!(s, "module @{} {{", module_name(&graph.name));
        }
    }
    let ret_tys: Vec<String> = rets.iter().map(V::ty).collect();
    let ret_decl: Vec<String> = rets.iter().map(|v| format!("{}{}", v.ty(), ann(None, v.rank()))).collect();
    let _ = writeln!(s, "  func.func @main({}) -> ({}) {{", args.join(", "), ret_decl.join(", "));
    s.push_str(cx.body());
    let names: Vec<&str> = rets.iter().map(|v| v.name.as_str()).collect();
    if rets.is_empty() {
        let _ = writeln!(s, "    return");
    } else {
        let _ = writeln!(s, "    return {} : {}", names.join(", "), ret_tys.join(", "));
    }
    s.push_str("  }\n}\n");
    Ok(Program { mlir: s, params: cx.params })
}

/// Lowers every node of `graph` (the model's graph, or a region's) into `cx`, binding their outputs.
pub(crate) fn lower_nodes(cx: &mut Cx, graph: &Graph) -> Result<()> {
    let uses = graph.use_counts();
    for (idx, node) in graph.nodes.iter().enumerate() {
        cx.node_index = idx;
        cx.set_loc(&node.name);
        if node.outputs.iter().all(|o| graph.value(*o).constant.is_some()) {
            continue; // folded: its outputs are emitted as constants where they are used
        }
        if node.outputs.iter().chain(node.inputs.iter().flatten()).any(|o| graph.value(*o).dynamic) {
            return Err(cx.unsupported(node, "its shapes depend on run-time values; TPU programs need static shapes"));
        }
        // Integer arithmetic on quantized values (a full-integer TFLite model) has TFLite's fixed-point
        // semantics, which the float lowering does not express; Quantize/Dequantize nodes themselves lower.
        if tpu_sdk_core::ir::ops::quantize::is_quantized_node(graph, idx)
            && !matches!(node.op, Op::QuantizeLinear { .. } | Op::DequantizeLinear { .. })
        {
            return Err(cx.unsupported(
                node,
                "it computes on quantized int8 values (a full-integer model); cloud-tpu lowers float graphs: \
                 compile the float model, or run this one with --target cpu or --target edgetpu",
            ));
        }
        // Inconsistencies found while lowering (shapes that do not broadcast, ...) name the node.
        let outs = lower_node(cx, node).map_err(|e| match e {
            Error::Invalid(msg) => cx.unsupported(node, msg),
            other => other,
        })?;
        for (k, &o) in node.outputs.iter().enumerate() {
            let want = graph.value(o);
            match outs.get(k) {
                Some(v) => {
                    if v.dtype != want.dtype || v.shape != want.shape {
                        return Err(Error::Invalid(format!(
                            "lowering node '{}' ({}) produced {} {:?} for output {k}, but the graph records {} {:?}",
                            node.name,
                            node.op.name(),
                            v.dtype,
                            v.shape,
                            want.dtype,
                            want.shape
                        )));
                    }
                    cx.bind(o, v.name.clone());
                }
                None if uses[o.0] == 0 => {}
                None => return Err(cx.unsupported(node, format!("output {k} is used but cannot be lowered"))),
            }
        }
    }
    Ok(())
}

/// A valid MLIR symbol name from the graph's name.
fn module_name(name: &str) -> String {
    let mut s: String = name.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' { c } else { '_' }).collect();
    if s.is_empty() || s.starts_with(|c: char| c.is_ascii_digit()) {
        s.insert(0, 'm');
    }
    s
}

/// Lowers one node; returns its outputs in order (fewer when trailing outputs are not supported and unused).
///
/// Every op is named here, with no fallback arm: a new op is a compile error until the lowering decides.
fn lower_node(cx: &mut Cx, node: &Node) -> Result<Vec<V>> {
    let one = |v: V| vec![v];
    match &node.op {
        Op::Conv(a) => conv::conv(cx, node, a).map(one),
        Op::ConvTranspose(a) => conv::conv_transpose(cx, node, a).map(one),
        Op::Gemm { alpha, beta, trans_a, trans_b, activation } => {
            matmul::gemm(cx, node, *alpha, *beta, *trans_a, *trans_b, *activation).map(one)
        }
        Op::MatMul => matmul::matmul(cx, node).map(one),
        Op::Binary(b, act) => elementwise::binary_op(cx, node, *b, *act).map(one),
        Op::Unary(u) => elementwise::unary_op(cx, node, *u).map(one),
        Op::ClipDynamic => elementwise::clip_dynamic(cx, node).map(one),
        Op::Variadic(b) => elementwise::variadic(cx, node, *b).map(one),
        Op::VariadicMean => elementwise::variadic_mean(cx, node).map(one),
        Op::Where => elementwise::where_(cx, node).map(one),
        Op::Cast { to } => elementwise::cast(cx, node, *to).map(one),
        Op::Identity => elementwise::identity(cx, node).map(one),
        Op::MaxPool(a) => pool::max_pool(cx, node, a),
        Op::AveragePool(a) => pool::average_pool(cx, node, a).map(one),
        Op::LpPool(a, p) => pool::lp_pool(cx, node, a, *p).map(one),
        Op::GlobalAveragePool => pool::global_pool(cx, node, false).map(one),
        Op::GlobalMaxPool => pool::global_pool(cx, node, true).map(one),
        Op::Reduce { op, axes, keepdims: _, noop_with_empty_axes } => {
            reduce::reduce_op(cx, node, *op, axes, *noop_with_empty_axes).map(one)
        }
        Op::ArgReduce { max, axis, keepdims: _, select_last_index } => {
            reduce::arg_reduce(cx, node, *max, *axis, *select_last_index).map(one)
        }
        Op::Softmax { axis } => reduce::softmax_op(cx, node, *axis, false).map(one),
        Op::LogSoftmax { axis } => reduce::softmax_op(cx, node, *axis, true).map(one),
        Op::BatchNorm { epsilon } => norm::batch_norm(cx, node, *epsilon).map(one),
        Op::InstanceNorm { epsilon } => norm::instance_norm(cx, node, *epsilon).map(one),
        Op::GroupNorm { num_groups, epsilon } => norm::group_norm(cx, node, *num_groups, *epsilon).map(one),
        Op::LpNorm { axis, p } => norm::lp_norm(cx, node, *axis, *p).map(one),
        Op::LayerNorm { axis, epsilon } => norm::layer_norm(cx, node, *axis, *epsilon),
        // The output shape is the one shape inference computed from the (constant) shape operands.
        Op::Reshape { allowzero: _ } | Op::Flatten { axis: _ } | Op::Squeeze { axes: _ } | Op::Unsqueeze { axes: _ } => {
            shape::reshape(cx, node).map(one)
        }
        Op::Transpose { perm } => shape::transpose(cx, node, perm).map(one),
        Op::Concat { axis } => shape::concat(cx, node, *axis).map(one),
        Op::Slice => shape::slice_op(cx, node).map(one),
        Op::Pad { mode } => shape::pad_op(cx, node, *mode).map(one),
        Op::Expand => shape::expand(cx, node).map(one),
        Op::Tile => shape::tile(cx, node).map(one),
        Op::DepthToSpace { blocksize, crd } => shape::depth_to_space(cx, node, *blocksize, *crd).map(one),
        Op::SpaceToDepth { blocksize } => shape::space_to_depth(cx, node, *blocksize).map(one),
        Op::Trilu { upper } => shape::trilu(cx, node, *upper).map(one),
        Op::Split { axis, split: _, num_outputs: _ } => shape::split(cx, node, *axis),
        Op::Gather { axis } => gather::gather(cx, node, *axis).map(one),
        Op::GatherNd { batch_dims } => gather::gather_nd(cx, node, *batch_dims).map(one),
        Op::ScatterNd { reduction } => gather::scatter_nd(cx, node, *reduction).map(one),
        Op::ScatterElements { axis, reduction } => gather::scatter_elements(cx, node, *axis, *reduction).map(one),
        Op::TensorScatter { axis, circular } => gather::tensor_scatter(cx, node, *axis, *circular).map(one),
        Op::ReverseSequence { batch_axis, time_axis } => {
            gather::reverse_sequence(cx, node, *batch_axis, *time_axis).map(one)
        }
        Op::Resize(a) => resize::resize(cx, node, a).map(one),
        Op::Shape { start, end } => misc::shape_of(cx, node, *start, *end).map(one),
        Op::Size => misc::size(cx, node).map(one),
        Op::ConstantOfShape { value } => misc::constant_of_shape(cx, node, value).map(one),
        Op::EyeLike { dtype: _, k } => misc::eye_like(cx, node, *k).map(one),
        Op::CumSum { exclusive, reverse } => misc::cum_sum(cx, node, *exclusive, *reverse).map(one),
        Op::OneHot { axis } => misc::one_hot(cx, node, *axis).map(one),
        Op::Hardmax { axis } => misc::hardmax(cx, node, *axis).map(one),
        Op::TopK { axis, largest, sorted: _ } => misc::top_k(cx, node, *axis, *largest),
        Op::Lrn { alpha, beta, bias, size } => misc::lrn(cx, node, *alpha, *beta, *bias, *size).map(one),
        Op::GatherElements { axis } => misc::gather_elements(cx, node, *axis).map(one),
        Op::DequantizeLinear { axis } => misc::dequantize_linear(cx, node, *axis).map(one),
        Op::QuantizeLinear { axis, to: _, rounding } => misc::quantize_linear(cx, node, *axis, *rounding).map(one),
        // Data-dependent output shapes: no static TPU program computes them.
        Op::Range | Op::NonZero => Err(cx.unsupported(node, format!("{} has no StableHLO lowering yet", node.op.name()))),
        Op::If(a) => control_flow::if_op(cx, node, a),
        Op::Loop(a) => control_flow::loop_op(cx, node, a),
        Op::Scan(a) => control_flow::scan_op(cx, node, a),
        Op::Rnn(a) => recurrent::rnn(cx, node, a),
    }
}
