//! The MLIR text emitter: SSA values with their tensor types, constants, and one helper per StableHLO op that
//! the op-family lowerings use. Ops are written in StableHLO's pretty syntax, except the region ops
//! (`reduce_window`, multi-operand `reduce`) and `gather`, which use the generic form.

mod literal;
mod ops;
mod regions;

use std::collections::HashMap;
use std::fmt::Write;

use tpu_sdk_core::ir::{DType, Graph, Node, Tensor, ValueId};

use super::LowerOptions;
use crate::error::{Error, Result};
use literal::compare_type;
pub(crate) use literal::{dense, highest, i64_array, list, lowest, scalar_literal, ty, Combine};

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
    pub(crate) fn line(&mut self, s: impl std::fmt::Display) {
        let _ = writeln!(self.body, "{s}");
    }

    // ----- control-flow regions -----------------------------------------------------------------------------

    /// A fresh SSA name (`%vN`) for an op written with [`Cx::line`].
    pub fn fresh(&mut self) -> String {
        let name = format!("%v{}", self.next);
        self.next += 1;
        name
    }

    /// Starts writing ops inside a region: constants deduplicated from now on stay local to it (the returned
    /// state goes back to [`Cx::end_region`]), those from before remain usable (regions see outer values).
    pub fn begin_region(&mut self) -> HashMap<(String, String), String> {
        self.splats.clone()
    }

    /// Ends a region started with [`Cx::begin_region`].
    pub fn end_region(&mut self, saved: HashMap<(String, String), String>) {
        self.splats = saved;
    }

    /// An emitter for region graph `g` written into this function (SSA numbers continue this one's, so names
    /// stay unique; every constant is embedded; `g`'s inputs are bound to `args`).
    pub fn nested<'r>(&self, g: &'r Graph, args: &[V]) -> Cx<'r> {
        let opts = LowerOptions { max_inline_constant: None, ..self.opts };
        let mut c = Cx::new(g, opts);
        c.next = self.next;
        c.splats = self.splats.clone();
        c.loc = self.loc.clone();
        for (&i, a) in g.inputs.iter().zip(args) {
            c.bind(i, a.name.clone());
        }
        c
    }

    /// Appends the ops of a finished nested emitter and takes over its SSA counter.
    pub fn absorb(&mut self, inner: Cx<'_>) {
        self.next = inner.next;
        self.body.push_str(&inner.body);
    }

    /// The ` loc(...)` of the node being lowered.
    pub fn loc(&self) -> String {
        self.loc.clone()
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
}
