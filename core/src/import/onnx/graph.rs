//! Building the core graph: function inlining, topological order, inputs, initializers, constants, and the
//! per-node import context that the op mapping ([`super::ops`]) writes into.

use std::borrow::Cow;
use std::collections::{BTreeSet, HashMap, HashSet};
use std::path::Path;

use prost::Message;

use super::attrs::Attrs;
use super::proto::{
    tensor_shape_proto::dimension::Value as Dim, type_proto, AttributeProto, FunctionProto, GraphProto, ModelProto, NodeProto, TensorProto,
    TypeProto,
};
use super::tensor::{dtype_for, to_tensor};
use super::ImportOptions;
use crate::ir::{infer, DType, Graph, Op, Tensor, ValueId};
use crate::{Error, Result};

/// Deepest nesting of model-local function calls that is inlined.
const MAX_FUNCTION_DEPTH: usize = 16;
/// Most nodes that inlining functions may produce (nested calls multiply; a hostile file must not make the
/// importer allocate without bound).
const MAX_INLINED_NODES: usize = 4_000_000;

/// Decodes a `ModelProto`.
pub fn decode(bytes: &[u8]) -> Result<ModelProto> {
    if bytes.is_empty() {
        return Err(Error::InvalidModel("the model is empty (0 bytes)".into()));
    }
    ModelProto::decode(bytes).map_err(|e| Error::InvalidModel(format!("not a valid ONNX protobuf: {e}")))
}

/// True for the default ONNX operator domain.
pub fn is_default_domain(d: &str) -> bool {
    d.is_empty() || d == "ai.onnx"
}

/// A node of the flattened graph (functions inlined) with the default-domain opset that applies to it.
struct Flat<'m> {
    node: Cow<'m, NodeProto>,
    opset: Option<i64>,
}

/// One ONNX node as the op mapping sees it.
pub struct NodeIn<'a> {
    /// Node name (may be empty).
    pub name: String,
    /// "node 'name' (OpType)" for messages.
    pub desc: String,
    /// The op type.
    pub op_type: &'a str,
    /// The node's domain (as written).
    pub domain: &'a str,
    /// Default-domain opset version in effect.
    pub opset: i64,
    /// Inputs; `None` for an absent (empty-named) optional input.
    pub inputs: Vec<Option<ValueId>>,
    /// One value per output name (empty names get a generated, unused value).
    pub outputs: Vec<ValueId>,
    /// Whether each output is consumed by a node or is a graph output.
    pub out_used: Vec<bool>,
    /// The node's attributes.
    pub attrs: Attrs<'a>,
}

impl NodeIn<'_> {
    /// Input `i`, which the op requires.
    pub fn req(&self, i: usize) -> Result<ValueId> {
        self.inputs.get(i).copied().flatten().ok_or_else(|| Error::InvalidModel(format!("{}: required input {i} is missing", self.desc)))
    }
    /// Input `i` if present.
    pub fn opt(&self, i: usize) -> Option<ValueId> {
        self.inputs.get(i).copied().flatten()
    }
    /// An `InvalidModel` error about this node.
    pub fn invalid(&self, msg: impl std::fmt::Display) -> Error {
        Error::InvalidModel(format!("{}: {msg}", self.desc))
    }
    /// An `Unsupported` error about this node.
    pub fn unsupported(&self, msg: impl std::fmt::Display) -> Error {
        Error::Unsupported(format!("{}: {msg}", self.desc))
    }
    /// The outputs the op produces: at least `min`, at most `max`, trailing unused optional outputs dropped.
    pub fn outs(&self, min: usize, max: usize) -> Result<Vec<ValueId>> {
        let mut n = self.outputs.len();
        while n > min && !self.out_used[n - 1] {
            n -= 1;
        }
        if self.outputs.len() < min {
            return Err(self.invalid(format!("has {} outputs, the op produces {min}", self.outputs.len())));
        }
        if n > max {
            return Err(self.invalid(format!("has {n} outputs, the op produces at most {max}")));
        }
        Ok(self.outputs[..n].to_vec())
    }
}

/// The import state: the graph being built and what is known about its values.
pub struct Cx<'m> {
    /// The graph so far.
    pub g: Graph,
    names: HashMap<String, ValueId>,
    inits: HashMap<&'m str, &'m TensorProto>,
    sparse_inits: HashSet<&'m str>,
    base_dir: Option<&'m Path>,
    /// Infer each node as it is added (off only in tests of the mapping itself).
    infer: bool,
    /// Values whose type is not known (outputs of nodes added without inference).
    unknown: HashSet<ValueId>,
    rank_hints: HashMap<String, usize>,
    /// Ranks of values whose shape is only known at run time, derived from the ops that produce them.
    dyn_ranks: HashMap<ValueId, usize>,
    fresh: usize,
    /// Every name the model defines (node outputs included), so generated names never collide with them.
    reserved: HashSet<String>,
    /// How errors from inference name the current node when it has no name.
    unnamed: Option<String>,
    /// Imported opset versions by domain (for messages about ops of other domains).
    domain_opsets: HashMap<String, i64>,
    /// The model-local functions (inlined where called, in regions too).
    functions: HashMap<(String, String, String), &'m FunctionProto>,
    /// How deep this graph is nested in control-flow regions (0: the model's graph).
    pub depth: usize,
    /// The values that are tensor sequences, with their elements ([`super::seq`]).
    pub(super) seqs: HashMap<ValueId, super::seq::Seq>,
}

impl<'m> Cx<'m> {
    /// An empty import state for the graph `name`, `depth` regions deep.
    fn new(
        name: String,
        base_dir: Option<&'m Path>,
        infer: bool,
        domain_opsets: HashMap<String, i64>,
        functions: HashMap<(String, String, String), &'m FunctionProto>,
        depth: usize,
    ) -> Cx<'m> {
        Cx {
            g: Graph::new(name),
            names: HashMap::new(),
            inits: HashMap::new(),
            sparse_inits: HashSet::new(),
            base_dir,
            infer,
            unknown: HashSet::new(),
            rank_hints: HashMap::new(),
            dyn_ranks: HashMap::new(),
            fresh: 0,
            reserved: HashSet::new(),
            unnamed: None,
            domain_opsets,
            functions,
            depth,
            seqs: HashMap::new(),
        }
    }

    /// Records `graph`'s initializers (dense and sparse) by name, and the rank its value_info and outputs (and,
    /// for a region, its formal inputs) declare for each value, before its nodes are imported.
    fn register_names(&mut self, graph: &'m GraphProto, with_inputs: bool) {
        for t in &graph.initializer {
            if let Some(name) = t.name.as_deref().filter(|n| !n.is_empty()) {
                self.inits.insert(name, t);
            }
        }
        for s in &graph.sparse_initializer {
            if let Some(name) = s.values.as_ref().and_then(|v| v.name.as_deref()).filter(|n| !n.is_empty()) {
                self.sparse_inits.insert(name);
            }
        }
        let inputs: &[_] = if with_inputs { &graph.input } else { &[] };
        for vi in graph.value_info.iter().chain(&graph.output).chain(inputs) {
            if let (Some(name), Ok((_, Some(dims)))) = (vi.name.as_deref(), tensor_type(vi.r#type.as_ref(), "")) {
                self.rank_hints.insert(name.to_string(), dims.len());
            }
        }
    }

    /// A name not used by any value yet, based on `base`.
    pub fn fresh_name(&mut self, base: &str) -> String {
        let base = if base.is_empty() { "v" } else { base };
        loop {
            self.fresh += 1;
            let name = format!("{base}:{}", self.fresh);
            if !self.names.contains_key(&name) && !self.inits.contains_key(name.as_str()) && !self.reserved.contains(&name) {
                return name;
            }
        }
    }

    /// A new intermediate value (type set by inference).
    pub fn tmp(&mut self, base: &str) -> ValueId {
        let name = self.fresh_name(base);
        let v = self.g.add_value(name.clone(), DType::F32, vec![]);
        self.names.insert(name, v);
        if !self.infer {
            self.unknown.insert(v);
        }
        v
    }

    /// A new constant value.
    pub fn constant_value(&mut self, base: &str, t: Tensor) -> ValueId {
        let name = self.fresh_name(base);
        let v = self.g.add_constant(name.clone(), t);
        self.names.insert(name, v);
        v
    }

    /// A 1-D i64 constant.
    pub fn const_i64(&mut self, base: &str, v: Vec<i64>) -> ValueId {
        self.constant_value(base, Tensor::from_i64(vec![v.len()], v))
    }

    /// Adds a node and infers its outputs.
    pub fn emit(&mut self, name: String, op: Op, inputs: Vec<Option<ValueId>>, outputs: Vec<ValueId>) -> Result<()> {
        let unnamed = name.is_empty();
        let idx = self.g.add_node(name, op, inputs, outputs.clone()).0;
        if self.infer {
            infer::infer_node(&mut self.g, idx, &crate::runtime::CpuEval).map_err(|e| match (e, &self.unnamed) {
                (Error::Node { op, msg, .. }, Some(label)) if unnamed => Error::Node { node: label.clone(), op, msg },
                (e, _) => e,
            })?;
            if outputs.iter().any(|o| self.g.values[o.0].dynamic) {
                for (o, r) in outputs.iter().zip(super::rank::dynamic_ranks(self, idx)) {
                    if let Some(r) = r {
                        self.dyn_ranks.insert(*o, r);
                    }
                }
            }
        } else {
            self.unknown.extend(outputs);
        }
        Ok(())
    }

    /// The constant data of `v`, if it is a constant (an initializer, a `Constant` or a folded value).
    pub fn constant(&self, v: ValueId) -> Option<&Tensor> {
        self.g.constant(v)
    }

    /// The dtype of `v` when known.
    pub fn dtype(&self, v: ValueId) -> Option<DType> {
        (!self.unknown.contains(&v)).then(|| self.g.value(v).dtype)
    }

    /// The static shape of `v` when known.
    pub fn shape(&self, v: ValueId) -> Option<&[usize]> {
        let val = self.g.value(v);
        (!self.unknown.contains(&v) && !val.dynamic).then_some(val.shape.as_slice())
    }

    /// The rank of `v`: from its static shape, or from the model's type annotations when the shape is only
    /// known at run time.
    pub fn rank(&self, v: ValueId) -> Option<usize> {
        self.shape(v)
            .map(|s| s.len())
            .or_else(|| self.dyn_ranks.get(&v).copied())
            .or_else(|| self.rank_hints.get(&self.g.value(v).name).copied())
    }

    /// The rank of `v`, or an error saying that `what` needs it.
    pub fn need_rank(&self, n: &NodeIn, v: ValueId, what: &str) -> Result<usize> {
        self.rank(v).ok_or_else(|| {
            n.unsupported(format!("{what} needs the rank of input '{}', which is not known before run time", self.g.value(v).name))
        })
    }

    /// The dtype of `v`, or an error saying that `what` needs it.
    pub fn need_dtype(&self, n: &NodeIn, v: ValueId, what: &str) -> Result<DType> {
        self.dtype(v).ok_or_else(|| n.unsupported(format!("{what} needs the element type of '{}'", self.g.value(v).name)))
    }

    /// The value called `name`: an existing one, or an initializer converted on first use.
    fn lookup(&mut self, name: &str, user: &str) -> Result<ValueId> {
        if let Some(&v) = self.names.get(name) {
            return Ok(v);
        }
        if let Some(t) = self.inits.get(name).copied() {
            let tensor = to_tensor(t, self.base_dir, &format!("initializer '{name}'"))?;
            let v = self.g.add_constant(name, tensor);
            self.names.insert(name.to_string(), v);
            return Ok(v);
        }
        if self.sparse_inits.contains(name) {
            return Err(Error::Unsupported(format!("sparse initializer '{name}' (used by {user})")));
        }
        Err(Error::InvalidModel(format!("{user} uses '{name}', which is not produced by any node and is not a graph input or initializer")))
    }

    /// Registers a value produced under `name`.
    fn define(&mut self, name: &str, v: ValueId) -> Result<()> {
        if self.names.insert(name.to_string(), v).is_some() || self.inits.contains_key(name) {
            return Err(Error::InvalidModel(format!("value '{name}' is defined more than once")));
        }
        Ok(())
    }
}

/// The default-domain opset of a list of imports.
fn default_opset(imports: &[super::proto::OperatorSetIdProto]) -> Option<i64> {
    imports.iter().filter(|o| is_default_domain(o.domain.as_deref().unwrap_or(""))).filter_map(|o| o.version).max()
}

pub(super) fn node_desc(n: &NodeProto, idx: usize) -> String {
    let op = n.op_type.as_deref().unwrap_or("");
    match n.name.as_deref() {
        Some(name) if !name.is_empty() => format!("node '{name}' ({op})"),
        _ => match n.output.first().filter(|o| !o.is_empty()) {
            Some(o) => format!("node #{idx} ({op}, output '{o}')"),
            None => format!("node #{idx} ({op})"),
        },
    }
}

fn fn_key(domain: &Option<String>, name: &Option<String>, overload: &Option<String>) -> (String, String, String) {
    (domain.clone().unwrap_or_default(), name.clone().unwrap_or_default(), overload.clone().unwrap_or_default())
}

/// Flattens the main graph's nodes, inlining calls to model-local functions.
fn flatten<'m>(
    nodes: &'m [NodeProto],
    functions: &HashMap<(String, String, String), &'m FunctionProto>,
    opset: Option<i64>,
    out: &mut Vec<Flat<'m>>,
) -> Result<()> {
    let mut counter = 0usize;
    for n in nodes {
        let key = fn_key(&n.domain, &n.op_type, &n.overload);
        if let Some(f) = functions.get(&key) {
            inline(n, f, functions, opset, 1, &mut counter, out)?;
        } else {
            out.push(Flat { node: Cow::Borrowed(n), opset });
        }
    }
    Ok(())
}

/// Inlines one call of function `f` (its nodes, with names made unique and attribute references resolved).
fn inline<'m>(
    call: &NodeProto,
    f: &'m FunctionProto,
    functions: &HashMap<(String, String, String), &'m FunctionProto>,
    outer_opset: Option<i64>,
    depth: usize,
    counter: &mut usize,
    out: &mut Vec<Flat<'m>>,
) -> Result<()> {
    let fname = f.name.as_deref().unwrap_or("");
    if depth > MAX_FUNCTION_DEPTH {
        return Err(Error::InvalidModel(format!(
            "model-local function '{fname}' calls functions nested more than {MAX_FUNCTION_DEPTH} deep (recursion?)"
        )));
    }
    *counter += 1;
    if out.len() + f.node.len() > MAX_INLINED_NODES {
        return Err(Error::InvalidModel(format!("inlining model-local function '{fname}' gives more than {MAX_INLINED_NODES} nodes")));
    }
    let prefix = format!("{fname}#{}/", *counter);
    let mut rename: HashMap<&str, String> = HashMap::new();
    for (i, formal) in f.input.iter().enumerate() {
        rename.insert(formal, call.input.get(i).cloned().unwrap_or_default());
    }
    for (i, formal) in f.output.iter().enumerate() {
        let actual = call.output.get(i).cloned().unwrap_or_default();
        let actual = if actual.is_empty() { format!("{prefix}{formal}") } else { actual };
        rename.insert(formal, actual);
    }
    let map_name = |s: &str| -> String {
        if s.is_empty() {
            String::new()
        } else if let Some(r) = rename.get(s) {
            r.clone()
        } else {
            format!("{prefix}{s}")
        }
    };
    let opset = default_opset(&f.opset_import).or(outer_opset);
    let call_attr = |name: &str| call.attribute.iter().find(|a| a.name.as_deref() == Some(name));
    let default_attr = |name: &str| f.attribute_proto.iter().find(|a| a.name.as_deref() == Some(name));
    for inner in &f.node {
        let mut n = inner.clone();
        n.input = n.input.iter().map(|s| map_name(s)).collect();
        n.output = n.output.iter().map(|s| map_name(s)).collect();
        n.name = Some(format!("{prefix}{}", n.name.as_deref().unwrap_or("")));
        let mut attrs: Vec<AttributeProto> = Vec::with_capacity(n.attribute.len());
        for a in n.attribute {
            match a.ref_attr_name.as_deref() {
                None | Some("") => attrs.push(a),
                Some(r) => {
                    if let Some(src) = call_attr(r).or_else(|| default_attr(r)) {
                        let mut c = src.clone();
                        c.name = a.name.clone();
                        c.ref_attr_name = None;
                        attrs.push(c);
                    }
                }
            }
        }
        n.attribute = attrs;
        let key = fn_key(&n.domain, &n.op_type, &n.overload);
        if let Some(g) = functions.get(&key) {
            inline(&n, g, functions, opset, depth + 1, counter, out)?;
        } else {
            out.push(Flat { node: Cow::Owned(n), opset });
        }
    }
    Ok(())
}

/// Orders `nodes` topologically (keeping the file order when it already is one).
fn topo_sort<'m>(nodes: Vec<Flat<'m>>, available: &HashSet<&str>) -> Result<Vec<Flat<'m>>> {
    let mut producer: HashMap<&str, usize> = HashMap::new();
    for (i, f) in nodes.iter().enumerate() {
        for o in f.node.output.iter().filter(|o| !o.is_empty()) {
            if available.contains(o.as_str()) {
                return Err(Error::InvalidModel(format!(
                    "{} produces '{o}', which is also a graph input or initializer",
                    node_desc(&f.node, i)
                )));
            }
            if producer.insert(o, i).is_some() {
                return Err(Error::InvalidModel(format!("value '{o}' is produced by more than one node")));
            }
        }
    }
    let mut deps: Vec<Vec<usize>> = Vec::with_capacity(nodes.len());
    let mut sorted = true;
    for (i, f) in nodes.iter().enumerate() {
        let mut d = Vec::new();
        for inp in f.node.input.iter().filter(|s| !s.is_empty()) {
            match producer.get(inp.as_str()) {
                Some(&p) => {
                    if p == i {
                        return Err(Error::InvalidModel(format!("{} uses its own output '{inp}'", node_desc(&f.node, i))));
                    }
                    sorted &= p < i;
                    d.push(p);
                }
                None if available.contains(inp.as_str()) => {}
                None => {
                    return Err(Error::InvalidModel(format!(
                        "{} uses '{inp}', which is not produced by any node and is not a graph input or initializer",
                        node_desc(&f.node, i)
                    )))
                }
            }
        }
        deps.push(d);
    }
    if sorted {
        return Ok(nodes);
    }
    // Kahn's algorithm, taking the earliest ready node first so the order stays close to the file's.
    let mut pending: Vec<usize> = deps.iter().map(|d| d.len()).collect();
    let mut users: Vec<Vec<usize>> = vec![Vec::new(); nodes.len()];
    for (i, d) in deps.iter().enumerate() {
        for &p in d {
            users[p].push(i);
        }
    }
    let mut ready: BTreeSet<usize> = (0..nodes.len()).filter(|&i| pending[i] == 0).collect();
    let mut order = Vec::with_capacity(nodes.len());
    while let Some(i) = ready.pop_first() {
        order.push(i);
        for &u in &users[i] {
            pending[u] -= 1;
            if pending[u] == 0 {
                ready.insert(u);
            }
        }
    }
    if order.len() != nodes.len() {
        let stuck = (0..nodes.len()).find(|&i| pending[i] > 0).unwrap_or(0);
        return Err(Error::InvalidModel(format!("the graph has a cycle through {}", node_desc(&nodes[stuck].node, stuck))));
    }
    let mut slots: Vec<Option<Flat<'m>>> = nodes.into_iter().map(Some).collect();
    Ok(order.into_iter().filter_map(|i| slots[i].take()).collect())
}

/// The declared tensor type of a value: (elem type, dims or `None` when the rank is unknown).
fn tensor_type<'a>(t: Option<&'a TypeProto>, what: &str) -> Result<(i32, Option<&'a [super::proto::tensor_shape_proto::Dimension]>)> {
    match t.and_then(|t| t.value.as_ref()) {
        Some(type_proto::Value::TensorType(tt)) => Ok((tt.elem_type.unwrap_or(0), tt.shape.as_ref().map(|s| s.dim.as_slice()))),
        Some(_) => {
            Err(Error::Unsupported(format!("{what} is not a tensor (sequences, maps, optionals and sparse tensors are not supported)")))
        }
        None => Err(Error::InvalidModel(format!("{what} has no type"))),
    }
}

/// The constant that graph input `name` (declared `dtype` with `dims`) is bound to: `t`, converted to `dtype`
/// when it holds another numeric type and every value converts exactly; its shape must fit the declared one.
fn bound_value(name: &str, t: &Tensor, dtype: DType, dims: Option<&[super::proto::tensor_shape_proto::Dimension]>) -> Result<Tensor> {
    let mut t = Cow::Borrowed(t);
    if let Some(d) = dims {
        // one value (`--bind sr=16000`) fits any shape of one element
        if t.len() == 1 && d.len() != t.shape.len() && d.iter().all(|d| !matches!(d.value, Some(Dim::DimValue(v)) if v != 1)) {
            let mut r = t.as_ref().clone();
            r.shape = vec![1; d.len()];
            t = Cow::Owned(r);
        }
        let fits = d.len() == t.shape.len()
            && d.iter().zip(&t.shape).all(|(d, &s)| !matches!(d.value, Some(Dim::DimValue(v)) if v >= 0 && v as u64 != s as u64));
        if !fits {
            let declared: Vec<String> = d
                .iter()
                .map(|d| match &d.value {
                    Some(Dim::DimValue(v)) => v.to_string(),
                    Some(Dim::DimParam(p)) => p.clone(),
                    None => "?".into(),
                })
                .collect();
            return Err(Error::InputMismatch(format!(
                "the value bound to input '{name}' has shape {:?}, the model declares [{}]",
                t.shape,
                declared.join(", ")
            )));
        }
    }
    if t.dtype() == dtype {
        return Ok(t.into_owned());
    }
    let v = t.to_f64_vec();
    let bad = || Error::InputMismatch(format!("the value bound to input '{name}' is {}, and not every value converts exactly to the input's {dtype}", t.dtype()));
    let ints = || v.iter().all(|x| x.fract() == 0.0);
    let shape = t.shape.clone();
    let out = match dtype {
        DType::F32 => Tensor::from_vec(shape, v.iter().map(|&x| x as f32).collect::<Vec<f32>>()).filter(|_| v.iter().all(|&x| (x as f32) as f64 == x)),
        DType::F64 => Tensor::from_vec(shape, v),
        DType::I64 if ints() && v.iter().all(|&x| x.abs() < 2f64.powi(53)) => Tensor::from_vec(shape, v.iter().map(|&x| x as i64).collect::<Vec<i64>>()),
        DType::I32 if ints() && v.iter().all(|&x| x >= i32::MIN as f64 && x <= i32::MAX as f64) => {
            Tensor::from_vec(shape, v.iter().map(|&x| x as i32).collect::<Vec<i32>>())
        }
        DType::Bool if v.iter().all(|&x| x == 0.0 || x == 1.0) => Tensor::from_vec(shape, v.iter().map(|&x| x != 0.0).collect::<Vec<bool>>()),
        _ => None,
    };
    out.ok_or_else(bad)
}

/// Resolves the shape of graph input `vi`.
fn input_shape(
    name: &str,
    dims: Option<&[super::proto::tensor_shape_proto::Dimension]>,
    opts: &ImportOptions,
    used_dims: &mut HashSet<String>,
    notes: &mut Vec<String>,
) -> Result<Vec<usize>> {
    if let Some(s) = opts.input_shapes.get(name) {
        if let Some(d) = dims {
            if d.len() != s.len() {
                return Err(Error::InputMismatch(format!(
                    "--input-shape for '{name}' has rank {} ({s:?}), but the model declares rank {}",
                    s.len(),
                    d.len()
                )));
            }
            let fixed: Vec<(usize, i64)> = d
                .iter()
                .enumerate()
                .filter_map(|(k, d)| match d.value {
                    Some(Dim::DimValue(v)) if v >= 0 && v as u64 != s[k] as u64 => Some((k, v)),
                    _ => None,
                })
                .collect();
            if let Some(&(k, v)) = fixed.first() {
                notes.push(format!("input '{name}' dim {k} is declared {v}; using {} from --input-shape", s[k]));
            }
        }
        return Ok(s.clone());
    }
    let Some(dims) = dims else {
        return Err(Error::InputMismatch(format!("input '{name}' has no declared shape; give it with --input-shape {name}=D0,D1,...")));
    };
    let mut shape = Vec::with_capacity(dims.len());
    for (k, d) in dims.iter().enumerate() {
        let size = match &d.value {
            Some(Dim::DimValue(v)) if *v >= 0 => {
                usize::try_from(*v).map_err(|_| Error::InvalidModel(format!("input '{name}' dim {k} is too large")))?
            }
            Some(Dim::DimParam(p)) if !p.is_empty() && p != "?" => {
                if let Some(&s) = opts.dims.get(p) {
                    used_dims.insert(p.clone());
                    s
                } else {
                    notes.push(format!(
                        "input '{name}' dim {k} '{p}' is symbolic; assumed 1 — set it with --dim {p}=SIZE or --input-shape {name}=..."
                    ));
                    1
                }
            }
            _ => {
                notes.push(format!("input '{name}' dim {k} is unknown; assumed 1 — set it with --input-shape {name}=..."));
                1
            }
        };
        shape.push(size);
    }
    Ok(shape)
}

/// Imports `model` into a graph. With `infer`, each node's outputs are inferred as it is added (the normal
/// path); without, the graph holds placeholder types (used to test the op mapping alone).
/// Notes for the user (assumed dimensions, unused options) are appended to `notes`, also when import fails.
pub fn import(model: &ModelProto, base_dir: Option<&Path>, opts: &ImportOptions, infer: bool, notes: &mut Vec<String>) -> Result<Graph> {
    let graph: &GraphProto = model.graph.as_ref().ok_or_else(|| Error::InvalidModel("the model has no graph".into()))?;
    let model_opset = default_opset(&model.opset_import).or_else(|| {
        // IR versions before 3 have no opset_import; their ops are opset 1.
        (model.opset_import.is_empty() && model.ir_version.unwrap_or(0) < 3).then_some(1)
    });
    let mut functions: HashMap<(String, String, String), &FunctionProto> = HashMap::new();
    for f in &model.functions {
        functions.insert(fn_key(&f.domain, &f.name, &f.overload), f);
    }

    let opsets = model.opset_import.iter().map(|o| (o.domain.clone().unwrap_or_default(), o.version.unwrap_or(0))).collect();
    let mut cx = Cx::new(graph.name.clone().unwrap_or_default(), base_dir, infer, opsets, functions, 0);
    cx.register_names(graph, false);

    // Graph inputs (those that are also initializers are constants).
    let mut used_dims = HashSet::new();
    let mut input_names = HashSet::new();
    for vi in &graph.input {
        let name = vi.name.as_deref().unwrap_or("");
        if name.is_empty() {
            return Err(Error::InvalidModel("a graph input has no name".into()));
        }
        if cx.inits.contains_key(name) {
            continue;
        }
        if !input_names.insert(name) {
            return Err(Error::InvalidModel(format!("graph input '{name}' is declared twice")));
        }
        let what = format!("input '{name}'");
        let (elem, dims) = tensor_type(vi.r#type.as_ref(), &what)?;
        let dtype = dtype_for(elem, &what)?;
        if let Some(t) = opts.input_values.get(name) {
            let v = cx.g.add_constant(name, bound_value(name, t, dtype, dims)?);
            cx.names.insert(name.to_string(), v);
            continue;
        }
        let shape = input_shape(name, dims, opts, &mut used_dims, notes)?;
        let bytes = shape.iter().try_fold(dtype.size_bytes(), |acc, &d| acc.checked_mul(d)).filter(|&b| b <= isize::MAX as usize);
        if bytes.is_none() {
            return Err(Error::InvalidModel(format!("input '{name}' has shape {shape:?}, too large to allocate")));
        }
        let v = cx.g.add_input(name, dtype, shape);
        cx.names.insert(name.to_string(), v);
    }
    let mut unknown_shapes: Vec<&String> = opts.input_shapes.keys().filter(|k| !input_names.contains(k.as_str())).collect();
    unknown_shapes.sort();
    if let Some(k) = unknown_shapes.first() {
        let mut all: Vec<&str> = input_names.iter().copied().collect();
        all.sort();
        return Err(Error::InputMismatch(format!(
            "--input-shape is given for '{k}', which is not a graph input (inputs: {})",
            all.join(", ")
        )));
    }
    let mut unknown_values: Vec<&String> = opts.input_values.keys().filter(|k| !input_names.contains(k.as_str())).collect();
    unknown_values.sort();
    if let Some(k) = unknown_values.first() {
        let mut all: Vec<&str> = input_names.iter().copied().collect();
        all.sort();
        return Err(Error::InputMismatch(format!("a value is bound to '{k}', which is not a graph input (inputs: {})", all.join(", "))));
    }
    let mut unused_dims: Vec<&String> = opts.dims.keys().filter(|k| !used_dims.contains(k.as_str())).collect();
    unused_dims.sort();
    for d in unused_dims {
        notes.push(format!("--dim {d} matches no symbolic dimension of the inputs"));
    }

    let available: HashSet<&str> =
        input_names.iter().copied().chain(cx.inits.keys().copied()).chain(cx.sparse_inits.iter().copied()).collect();
    import_nodes(&mut cx, graph, model_opset, &available)?;
    if cx.g.outputs.is_empty() {
        return Err(Error::InvalidModel("the graph has no outputs".into()));
    }
    let mut g = cx.g;
    if infer {
        // Drop values nothing refers to: unused initializers and Constants, unused optional outputs.
        crate::passes::dce::compact(&mut g);
    }
    Ok(g)
}

/// Imports the nodes of `graph` (functions inlined, in topological order) and its outputs into `cx`, whose
/// inputs are set up; `available` names the values defined before the nodes (inputs, initializers, and in a
/// region the outer values it uses).
fn import_nodes<'m>(cx: &mut Cx<'m>, graph: &'m GraphProto, opset: Option<i64>, available: &HashSet<&str>) -> Result<()> {
    let mut flat = Vec::with_capacity(graph.node.len());
    let functions = cx.functions.clone();
    flatten(&graph.node, &functions, opset, &mut flat)?;
    let flat = topo_sort(flat, available)?;
    cx.reserved = flat.iter().flat_map(|f| f.node.output.iter().cloned()).collect();
    let mut consumed: HashSet<String> = HashSet::new();
    for f in &flat {
        consumed.extend(node_uses(&f.node));
    }
    consumed.extend(graph.output.iter().filter_map(|o| o.name.clone()));

    for (idx, f) in flat.iter().enumerate() {
        import_node(cx, &f.node, f.opset, idx, &consumed)?;
    }

    for o in &graph.output {
        let name = o.name.as_deref().unwrap_or("");
        let v = cx.lookup(name, "the graph outputs")?;
        super::seq::refuse_seq_output(cx, v, (cx.depth > 0).then_some(cx.g.name.as_str()))?;
        cx.g.outputs.push(v);
    }
    Ok(())
}

/// The names a node reads: its inputs, and the outer values its subgraphs (control-flow regions) use.
pub(super) fn node_uses(n: &NodeProto) -> Vec<String> {
    let mut out: Vec<String> = n.input.iter().filter(|s| !s.is_empty()).cloned().collect();
    for a in &n.attribute {
        for g in a.g.iter().chain(&a.graphs) {
            out.extend(free_names(g));
        }
    }
    out
}

/// The names `g` (with its nested subgraphs) uses without defining them: the outer-scope values it captures,
/// in order of first use.
pub(super) fn free_names(g: &GraphProto) -> Vec<String> {
    let mut defined: HashSet<&str> = HashSet::new();
    defined.extend(g.input.iter().filter_map(|v| v.name.as_deref()));
    defined.extend(g.initializer.iter().filter_map(|t| t.name.as_deref()));
    defined.extend(g.sparse_initializer.iter().filter_map(|s| s.values.as_ref().and_then(|v| v.name.as_deref())));
    for n in &g.node {
        defined.extend(n.output.iter().map(|s| s.as_str()));
    }
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    let uses = g.node.iter().flat_map(node_uses).chain(g.output.iter().filter_map(|o| o.name.clone()));
    for u in uses {
        if !u.is_empty() && !defined.contains(u.as_str()) && seen.insert(u.clone()) {
            out.push(u);
        }
    }
    out
}

/// One formal input of a region: its type as the op passes it (`dynamic`: the shape may change at run time).
pub(super) struct Formal {
    /// Element type.
    pub dtype: DType,
    /// Shape (a placeholder when `dynamic`).
    pub shape: Vec<usize>,
    /// Known only at run time.
    pub dynamic: bool,
    /// The rank when `dynamic` and known (the value's rank does not change from one run to the next).
    pub rank: Option<usize>,
}

impl<'m> Cx<'m> {
    /// The value called `name` in this graph (for resolving a region's captures).
    pub(super) fn resolve(&mut self, name: &str, user: &str) -> Result<ValueId> {
        self.lookup(name, user)
    }

    /// Imports `graph`, a region of a node of this graph: its inputs are `formals` (one per declared input)
    /// followed by the non-constant values of `outer` (values of this graph the region uses, by name); outer
    /// constants are copied into the region. Returns the region graph, inferred and compacted.
    pub(super) fn import_region<'r>(&self, graph: &'r GraphProto, formals: &[Formal], outer: &[(String, ValueId)], opset: i64) -> Result<Graph>
    where
        'm: 'r,
    {
        self.import_region_ranked(graph, formals, outer, opset).map(|(g, _)| g)
    }

    /// [`Cx::import_region`], also returning the rank of each region output where it is known (for outputs
    /// whose shape is only known at run time, the rank the region's import derived).
    pub(super) fn import_region_ranked<'r>(
        &self,
        graph: &'r GraphProto,
        formals: &[Formal],
        outer: &[(String, ValueId)],
        opset: i64,
    ) -> Result<(Graph, Vec<Option<usize>>)>
    where
        'm: 'r,
    {
        let gname = graph.name.clone().unwrap_or_default();
        if self.depth + 1 > crate::ir::ops::control_flow::MAX_REGION_DEPTH {
            return Err(Error::InvalidModel(format!(
                "control flow is nested more than {} deep (If/Loop/Scan bodies inside each other) at region '{gname}'",
                crate::ir::ops::control_flow::MAX_REGION_DEPTH
            )));
        }
        if formals.len() != graph.input.len() {
            return Err(Error::InvalidModel(format!("region '{gname}' declares {} inputs, the op passes {}", graph.input.len(), formals.len())));
        }
        let mut cx: Cx<'r> = Cx::new(gname.clone(), self.base_dir, self.infer, self.domain_opsets.clone(), self.functions.clone(), self.depth + 1);
        cx.register_names(graph, true);
        let mut available: HashSet<&str> = cx.inits.keys().copied().chain(cx.sparse_inits.iter().copied()).collect();
        for (vi, f) in graph.input.iter().zip(formals) {
            let name = vi.name.as_deref().unwrap_or("");
            let v = cx.g.add_input(name, f.dtype, f.shape.clone());
            cx.g.values[v.0].dynamic = f.dynamic;
            if f.dynamic {
                if let Some(r) = f.rank.or_else(|| self.rank_hints.get(name).copied()).or_else(|| cx.rank_hints.get(name).copied()) {
                    cx.dyn_ranks.insert(v, r);
                }
            }
            if !name.is_empty() {
                cx.define(name, v)?;
                available.insert(name);
            }
        }
        for (name, ov) in outer {
            let val = self.g.value(*ov);
            let v = match &val.constant {
                Some(t) => cx.g.add_constant(name.as_str(), t.clone()),
                None => {
                    let v = cx.g.add_input(name.as_str(), val.dtype, val.shape.clone());
                    cx.g.values[v.0].dynamic = val.dynamic;
                    cx.g.values[v.0].quant = val.quant.clone();
                    if let Some(r) = self.rank(*ov) {
                        cx.dyn_ranks.insert(v, r);
                    }
                    if self.unknown.contains(ov) {
                        cx.unknown.insert(v);
                    }
                    v
                }
            };
            // an outer sequence is captured as the stack of its elements (`ops/sequence_stacked.rs`)
            if let Some(s) = self.seq(*ov).filter(|s| s.stack == Some(*ov)) {
                cx.set_seq(v, super::seq::Seq::stacked(v, s.dtype));
            }
            cx.names.insert(name.clone(), v);
            available.insert(name.as_str());
        }
        let avail_owned: HashSet<String> = available.iter().map(|s| s.to_string()).collect();
        let avail_ref: HashSet<&str> = avail_owned.iter().map(|s| s.as_str()).collect();
        import_nodes(&mut cx, graph, Some(opset), &avail_ref)?;
        if cx.g.outputs.is_empty() {
            return Err(Error::InvalidModel(format!("region '{gname}' has no outputs")));
        }
        let ranks = cx.g.outputs.iter().map(|&o| cx.rank(o)).collect();
        let mut g = cx.g;
        if self.infer {
            crate::passes::dce::run(&mut g);
        }
        Ok((g, ranks))
    }

    /// Records that `v`, whose shape is only known at run time, has rank `r`.
    pub(super) fn set_rank(&mut self, v: ValueId, r: usize) {
        self.dyn_ranks.insert(v, r);
    }
}

/// Imports one node: a `Constant` becomes a constant value, anything else goes through the op mapping.
fn import_node(cx: &mut Cx, n: &NodeProto, opset: Option<i64>, idx: usize, consumed: &HashSet<String>) -> Result<()> {
    let op_type = n.op_type.as_deref().unwrap_or("");
    let domain = n.domain.as_deref().unwrap_or("");
    let desc = node_desc(n, idx);
    if op_type.is_empty() {
        return Err(Error::InvalidModel(format!("{desc} has no op_type")));
    }
    let name = n.name.clone().unwrap_or_default();
    if !is_default_domain(domain) {
        let v = cx.domain_opsets.get(domain).copied();
        let opset_shown = v.map(|v| v.to_string()).unwrap_or_else(|| "none".into());
        return Err(Error::Unsupported(format!("op '{op_type}' (node '{name}', domain '{domain}', opset {opset_shown}) is not supported")));
    }
    let opset = opset.ok_or_else(|| {
        Error::InvalidModel(format!("{desc} is in the default ONNX domain, but the model does not import it (no opset_import)"))
    })?;
    let attrs = Attrs::new(desc.clone(), &n.attribute);
    if let Some(a) = n.attribute.iter().find(|a| a.ref_attr_name.as_deref().is_some_and(|r| !r.is_empty())) {
        return Err(Error::InvalidModel(format!(
            "{desc}: attribute '{}' refers to a function attribute outside a function",
            a.name.as_deref().unwrap_or("")
        )));
    }
    if op_type == "Constant" {
        if n.output.len() != 1 || n.output[0].is_empty() {
            return Err(Error::InvalidModel(format!("{desc} must have exactly one named output")));
        }
        let t = constant_node_value(&attrs, cx.base_dir)?;
        attrs.finish(op_type, opset)?;
        let out = &n.output[0];
        let v = cx.g.add_constant(out.as_str(), t);
        return cx.define(out, v);
    }
    // If, Loop and Scan import their subgraphs as regions (`ops/control_flow.rs`)
    if let Some(sub) = attrs.subgraph().filter(|_| !matches!(op_type, "If" | "Loop" | "Scan")) {
        return Err(Error::Unsupported(format!(
            "op '{op_type}' (node '{name}', domain '{domain}', opset {opset}) is not supported: attribute '{sub}' is a subgraph (control flow)"
        )));
    }
    let mut inputs = Vec::with_capacity(n.input.len());
    for i in &n.input {
        inputs.push(if i.is_empty() { None } else { Some(cx.lookup(i, &desc)?) });
    }
    let mut outputs = Vec::with_capacity(n.output.len());
    let mut out_used = Vec::with_capacity(n.output.len());
    for (k, o) in n.output.iter().enumerate() {
        if o.is_empty() {
            let base = if name.is_empty() { op_type.to_string() } else { name.clone() };
            let v = cx.tmp(&format!("{base}:unused{k}"));
            outputs.push(v);
            out_used.push(false);
        } else {
            let v = cx.g.add_value(o.as_str(), DType::F32, vec![]);
            if !cx.infer {
                cx.unknown.insert(v);
            }
            cx.define(o, v)?;
            outputs.push(v);
            out_used.push(consumed.contains(o));
        }
    }
    cx.unnamed = name.is_empty().then(|| match n.output.first().filter(|o| !o.is_empty()) {
        Some(o) => format!("#{idx}, output {o}"),
        None => format!("#{idx}"),
    });
    let node = NodeIn { name, desc, op_type, domain, opset, inputs, outputs, out_used, attrs };
    super::ops::map_node(cx, &node)?;
    node.attrs.finish(op_type, opset)
}

/// The tensor of a `Constant` node, from whichever value attribute it has.
fn constant_node_value(a: &Attrs, base_dir: Option<&Path>) -> Result<Tensor> {
    let mut found: Option<Tensor> = None;
    let mut set = |t: Tensor, name: &str| -> Result<()> {
        if found.is_some() {
            return Err(a.invalid(name, "is one of several value attributes; a Constant has exactly one"));
        }
        found = Some(t);
        Ok(())
    };
    if let Some(t) = a.tensor("value")? {
        set(to_tensor(t, base_dir, &format!("{}: attribute 'value'", a.desc()))?, "value")?;
    }
    if let Some(f) = a.float("value_float")? {
        set(Tensor::scalar(f), "value_float")?;
    }
    if let Some(v) = a.floats("value_floats")? {
        set(Tensor::from_f32(vec![v.len()], v), "value_floats")?;
    }
    if let Some(i) = a.int("value_int")? {
        set(Tensor::scalar(i), "value_int")?;
    }
    if let Some(v) = a.ints("value_ints")? {
        set(Tensor::from_i64(vec![v.len()], v), "value_ints")?;
    }
    for s in ["value_string", "value_strings"] {
        if a.get(s).is_some() {
            return Err(a.unsupported(s, "holds strings; string tensors are not supported"));
        }
    }
    if a.get("sparse_value").is_some() {
        return Err(a.unsupported("sparse_value", "holds a sparse tensor, which is not supported"));
    }
    found.ok_or_else(|| Error::InvalidModel(format!("{} has no value attribute", a.desc())))
}

/// Imports without inference or verification (tests of the op mapping).
#[cfg(test)]
pub fn import_unchecked(bytes: &[u8], opts: &ImportOptions) -> Result<(Graph, Vec<String>)> {
    let model = decode(bytes)?;
    let mut notes = Vec::new();
    let g = import(&model, None, opts, false, &mut notes)?;
    Ok((g, notes))
}
