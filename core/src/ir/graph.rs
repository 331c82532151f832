//! The typed dataflow graph.

use super::{DType, Op, Tensor};

/// Index of a value in [`Graph::values`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ValueId(pub usize);

/// Index of a node in [`Graph::nodes`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodeId(pub usize);

/// Quantization parameters of a value: real = scale * (q - zero_point).
#[derive(Clone, Debug, PartialEq)]
pub struct QuantParams {
    /// One scale per tensor, or one per slice along `axis`.
    pub scale: Vec<f32>,
    /// Zero points, same length as `scale`.
    pub zero_point: Vec<i64>,
    /// Quantized axis for per-axis parameters; `None` for per-tensor.
    pub axis: Option<usize>,
}

/// A tensor-valued edge of the graph.
#[derive(Clone, Debug, PartialEq)]
pub struct Value {
    /// Name (from the model file, or generated).
    pub name: String,
    /// Element type.
    pub dtype: DType,
    /// Static shape.
    pub shape: Vec<usize>,
    /// Constant data, for weights and folded values.
    pub constant: Option<Tensor>,
    /// Quantization parameters, for quantized tensors.
    pub quant: Option<QuantParams>,
    /// True when the shape depends on data only known at run time (for example NonZero's output, or a
    /// Reshape whose target shape is a graph input). `shape` is then only a placeholder; the CPU runtime
    /// still runs such graphs, static targets reject them.
    pub dynamic: bool,
}

impl Value {
    /// Number of elements.
    pub fn numel(&self) -> usize {
        self.shape.iter().product()
    }
}

/// An operation applied to values.
#[derive(Clone, Debug, PartialEq)]
pub struct Node {
    /// Name from the model (may be empty).
    pub name: String,
    /// The operator and its attributes.
    pub op: Op,
    /// Positional inputs; `None` for an absent optional input.
    pub inputs: Vec<Option<ValueId>>,
    /// Outputs.
    pub outputs: Vec<ValueId>,
    /// Stays float in an int8 graph: the quantizer puts it on a float island (a `DequantizeLinear` before its
    /// int8 inputs, a `QuantizeLinear` after outputs that non-island nodes read; see `quant::quantize`). Set by
    /// importers on the nodes of an expansion whose values need float precision (the coordinate math of
    /// MediaPipe's custom ops); rewrites of the node keep it.
    pub keep_float: bool,
}

impl Node {
    /// The `i`-th input if present.
    pub fn input(&self, i: usize) -> Option<ValueId> {
        self.inputs.get(i).copied().flatten()
    }
}

/// A model: values, nodes in topological order, and named inputs and outputs.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Graph {
    /// Name of the model.
    pub name: String,
    /// All values.
    pub values: Vec<Value>,
    /// Nodes, in an order where each node comes after the producers of its inputs.
    pub nodes: Vec<Node>,
    /// Graph inputs (values without constant data that the caller feeds).
    pub inputs: Vec<ValueId>,
    /// Graph outputs.
    pub outputs: Vec<ValueId>,
}

impl Graph {
    /// An empty graph.
    pub fn new(name: impl Into<String>) -> Graph {
        Graph { name: name.into(), ..Default::default() }
    }
    /// Adds a value without data.
    pub fn add_value(&mut self, name: impl Into<String>, dtype: DType, shape: Vec<usize>) -> ValueId {
        self.values.push(Value { name: name.into(), dtype, shape, constant: None, quant: None, dynamic: false });
        ValueId(self.values.len() - 1)
    }
    /// Adds a constant value.
    pub fn add_constant(&mut self, name: impl Into<String>, t: Tensor) -> ValueId {
        self.values.push(Value {
            name: name.into(),
            dtype: t.dtype(),
            shape: t.shape.clone(),
            constant: Some(t),
            quant: None,
            dynamic: false,
        });
        ValueId(self.values.len() - 1)
    }
    /// Adds a graph input.
    pub fn add_input(&mut self, name: impl Into<String>, dtype: DType, shape: Vec<usize>) -> ValueId {
        let v = self.add_value(name, dtype, shape);
        self.inputs.push(v);
        v
    }
    /// Appends a node whose outputs are already created.
    pub fn add_node(&mut self, name: impl Into<String>, op: Op, inputs: Vec<Option<ValueId>>, outputs: Vec<ValueId>) -> NodeId {
        self.nodes.push(Node { name: name.into(), op, inputs, outputs, keep_float: false });
        NodeId(self.nodes.len() - 1)
    }
    /// The value behind an id.
    pub fn value(&self, id: ValueId) -> &Value {
        &self.values[id.0]
    }
    /// Mutable access to a value.
    pub fn value_mut(&mut self, id: ValueId) -> &mut Value {
        &mut self.values[id.0]
    }
    /// Constant data of a value, if it has any.
    pub fn constant(&self, id: ValueId) -> Option<&Tensor> {
        self.values[id.0].constant.as_ref()
    }
    /// For each value, the index of the node producing it (`None` for inputs and constants).
    pub fn producers(&self) -> Vec<Option<usize>> {
        let mut p = vec![None; self.values.len()];
        for (i, n) in self.nodes.iter().enumerate() {
            for o in &n.outputs {
                p[o.0] = Some(i);
            }
        }
        p
    }
    /// For each value, how many node inputs and graph outputs use it.
    pub fn use_counts(&self) -> Vec<usize> {
        let mut c = vec![0; self.values.len()];
        for n in &self.nodes {
            for i in n.inputs.iter().flatten() {
                c[i.0] += 1;
            }
        }
        for o in &self.outputs {
            c[o.0] += 1;
        }
        c
    }
    /// Replaces every use of `old` (node inputs and graph outputs) with `new`.
    pub fn replace_uses(&mut self, old: ValueId, new: ValueId) {
        for n in &mut self.nodes {
            for i in n.inputs.iter_mut().flatten() {
                if *i == old {
                    *i = new;
                }
            }
        }
        for o in &mut self.outputs {
            if *o == old {
                *o = new;
            }
        }
    }
    /// Number of parameters: elements of all constant values used by nodes.
    pub fn parameter_count(&self) -> usize {
        let mut used = vec![false; self.values.len()];
        for n in &self.nodes {
            for i in n.inputs.iter().flatten() {
                used[i.0] = true;
            }
        }
        self.values
            .iter()
            .enumerate()
            .filter(|(i, v)| used[*i] && v.constant.is_some() && v.dtype.is_float())
            .map(|(_, v)| v.numel())
            .sum()
    }
}
