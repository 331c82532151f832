//! Tensor parallelism: which MatMul/Gemm weights are split across how many devices (`--shard`).
//!
//! Syntax (each `--shard` value one of):
//! - `WEIGHT=AXIS`: split the constant named `WEIGHT` (an operand of a MatMul or Gemm) along `AXIS` (0-based;
//!   negative counts from the end) into one shard per partition;
//! - `auto`: Megatron-style: the constant right-hand operands of consecutive MatMul/Gemm nodes are split
//!   alternately by columns (output features) and by rows (input features), so that a column-split layer feeds
//!   a row-split one; weights whose dim does not divide are left whole;
//! - `parts=N`: the number of partitions (default: the addressable devices from `--device` on);
//! - `partitioner=shardy` (the default, as in JAX) or `partitioner=gspmd`: which XLA partitioner, and so which
//!   sharding dialect the program is written in (GSPMD is deprecated upstream; kept for older plugins).
//!
//! With GSPMD the plan is written into the program as `mhlo.sharding` annotations; with Shardy as a
//! `sdy.mesh @mesh = <["x"=N]>` and `#sdy.sharding<@mesh, [...]>` annotations (`sdy.sharding_constraint` for
//! embedded weights), and the compile options ask for Shardy (`use_shardy_partitioner`). Either way the program
//! is compiled with `num_partitions = N` and the SPMD partitioner, which inserts the collectives; results are
//! replicated, so every device returns the whole output.

use std::collections::HashMap;

use tpu_sdk_core::ir::{Graph, Op, ValueId};

use crate::error::{Error, Result};

/// XLA's partitioner, which fixes the dialect of the sharding annotations.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Partitioner {
    /// GSPMD: `mhlo.sharding = "{devices=[...]...}"` strings.
    Gspmd,
    /// Shardy: the `sdy` dialect (a mesh with one axis "x" of `parts` devices).
    #[default]
    Shardy,
}

/// Weights split across partitions.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ShardPlan {
    /// The partitioner (and annotation dialect).
    pub partitioner: Partitioner,
    /// Number of partitions (devices per replica).
    pub parts: usize,
    /// Number of data-parallel replicas of the partitioned program (1: tensor parallelism alone); the program runs
    /// on `replicas × parts` devices.
    pub replicas: usize,
    /// (weight, axis it is split along), in graph order.
    pub weights: Vec<(ValueId, usize)>,
}

impl ShardPlan {
    /// The split axis of `v`, if it is sharded.
    pub fn axis_of(&self, v: ValueId) -> Option<usize> {
        self.weights.iter().find(|w| w.0 == v).map(|w| w.1)
    }

    /// The `mhlo.sharding` text of a value of rank `rank`: tiled along its axis, or `{replicated}`.
    pub fn annotation(&self, v: Option<ValueId>, rank: usize) -> String {
        match v.and_then(|v| self.axis_of(v)) {
            Some(axis) => tiled(axis, rank, self.parts),
            None => "{replicated}".to_string(),
        }
    }

    /// The argument/result attribute of a value of rank `rank` (`v`: `None` for results and unsplit values), in
    /// the partitioner's dialect.
    pub fn attribute(&self, v: Option<ValueId>, rank: usize) -> String {
        match self.partitioner {
            Partitioner::Gspmd => format!("mhlo.sharding = \"{}\"", self.annotation(v, rank)),
            Partitioner::Shardy => format!("sdy.sharding = #sdy.sharding<@mesh, {}>", sdy_dims(v.and_then(|v| self.axis_of(v)), rank)),
        }
    }

    /// Module-level declarations the annotations refer to (Shardy's mesh), if any.
    pub fn module_decls(&self) -> Option<String> {
        match self.partitioner {
            Partitioner::Gspmd => None,
            Partitioner::Shardy => Some(format!("sdy.mesh @mesh = <[\"x\"={}]>", self.parts)),
        }
    }
}

/// Shardy's per-dimension shardings of a rank-`rank` value split along `axis` over mesh axis "x": `[{}, {"x"}]`.
pub fn sdy_dims(axis: Option<usize>, rank: usize) -> String {
    let dims: Vec<&str> = (0..rank).map(|d| if Some(d) == axis { "{\"x\"}" } else { "{}" }).collect();
    format!("[{}]", dims.join(", "))
}

/// `{devices=[1,N]0,1,...,N-1}`: split along `axis` of a rank-`rank` array into `parts` tiles, tile p on
/// partition p.
pub fn tiled(axis: usize, rank: usize, parts: usize) -> String {
    let dims: Vec<String> = (0..rank).map(|d| if d == axis { parts.to_string() } else { "1".into() }).collect();
    let ids: Vec<String> = (0..parts).map(|p| p.to_string()).collect();
    format!("{{devices=[{}]{}}}", dims.join(","), ids.join(","))
}

/// The `parts=N` value among `specs`, if any.
pub fn requested_parts(specs: &[String]) -> Result<Option<usize>> {
    let mut parts = None;
    for s in specs {
        if let Some(n) = s.trim().strip_prefix("parts=") {
            let n: usize = n.trim().parse().ok().filter(|&n| n >= 1).ok_or_else(|| bad(s, "parts=N needs a count of at least 1"))?;
            parts = Some(n);
        }
    }
    Ok(parts)
}

/// The `partitioner=...` value among `specs` (default Shardy).
pub fn requested_partitioner(specs: &[String]) -> Result<Partitioner> {
    let mut p = Partitioner::default();
    for s in specs {
        if let Some(v) = s.trim().strip_prefix("partitioner=") {
            p = match v.trim() {
                "gspmd" => Partitioner::Gspmd,
                "shardy" | "sdy" => Partitioner::Shardy,
                other => return Err(bad(s, format!("unknown partitioner '{other}' (gspmd or shardy)"))),
            };
        }
    }
    Ok(p)
}

fn bad(spec: &str, why: impl std::fmt::Display) -> Error {
    Error::Invalid(format!("--shard '{spec}': {why} (syntax: WEIGHT=AXIS, auto, parts=N, partitioner=gspmd|shardy)"))
}

/// Builds the plan of `specs` for `graph` with `parts` partitions (after `parts=N`, which wins). `Ok(None)`
/// when `specs` is empty.
pub fn plan(graph: &Graph, specs: &[String], parts: usize) -> Result<Option<ShardPlan>> {
    if specs.is_empty() {
        return Ok(None);
    }
    let parts = requested_parts(specs)?.unwrap_or(parts);
    let partitioner = requested_partitioner(specs)?;
    if parts < 2 {
        return Err(Error::Invalid(format!(
            "--shard needs at least 2 partitions, but {parts} device(s) are available (set parts=N or pick a plugin with more devices)"
        )));
    }
    // Constants that are operands of a MatMul/Gemm, with the node and operand index.
    let mut operands: HashMap<ValueId, (usize, usize)> = HashMap::new();
    for (n, node) in graph.nodes.iter().enumerate() {
        if split_operands(&node.op).is_some() {
            for (k, v) in node.inputs.iter().enumerate() {
                if let Some(v) = v.filter(|v| graph.value(*v).constant.is_some()) {
                    operands.entry(v).or_insert((n, k));
                }
            }
        }
    }
    let mut weights: Vec<(ValueId, usize)> = Vec::new();
    for s in specs.iter().map(|s| s.trim()) {
        if s.starts_with("parts=") || s.starts_with("partitioner=") {
            continue;
        }
        if s == "auto" {
            for w in auto(graph, parts) {
                if !weights.iter().any(|x| x.0 == w.0) {
                    weights.push(w);
                }
            }
            continue;
        }
        let (name, axis) = s.split_once('=').ok_or_else(|| bad(s, "expected WEIGHT=AXIS"))?;
        let axis: i64 = axis.trim().parse().map_err(|_| bad(s, format!("'{axis}' is not an axis")))?;
        let ids: Vec<ValueId> = (0..graph.values.len()).map(ValueId).filter(|v| graph.value(*v).name == name.trim()).collect();
        let Some(&id) = ids.iter().find(|v| operands.contains_key(v)) else {
            let mut known: Vec<&str> = operands.keys().map(|v| graph.value(*v).name.as_str()).collect();
            known.sort();
            return Err(bad(
                s,
                format!("'{name}' is not a constant operand of a MatMul or Gemm (these are: {})", if known.is_empty() { "none".into() } else { known.join(", ") }),
            ));
        };
        let shape = &graph.value(id).shape;
        let rank = shape.len() as i64;
        let a = if axis < 0 { axis + rank } else { axis };
        if a < 0 || a >= rank {
            return Err(bad(s, format!("axis {axis} is out of range for '{name}' of shape {shape:?}")));
        }
        let a = a as usize;
        if shape[a] % parts != 0 {
            return Err(bad(s, format!("dim {a} of '{name}' (shape {shape:?}) is not divisible by {parts} partitions")));
        }
        weights.retain(|w| w.0 != id);
        weights.push((id, a));
    }
    if weights.is_empty() {
        return Err(Error::Invalid(format!(
            "--shard: no MatMul/Gemm weight with a dim divisible by {parts} was found to split; name one with WEIGHT=AXIS"
        )));
    }
    Ok(Some(ShardPlan { partitioner, parts, replicas: 1, weights }))
}

/// For the matrix products, whose constant operands a plan may split: whether the right-hand operand is
/// transposed (`[N, K]`). `None` for every other op (each is named, so that a new op must decide).
fn split_operands(op: &Op) -> Option<bool> {
    match op {
        Op::MatMul => Some(false),
        Op::Gemm { trans_b, .. } => Some(*trans_b),
        Op::Conv(_) | Op::ConvTranspose(_) | Op::Binary(..) | Op::Unary(_) | Op::ClipDynamic | Op::Variadic(_) => None,
        Op::VariadicMean | Op::Where | Op::Identity | Op::Cast { .. } | Op::QuantizeLinear { .. } => None,
        Op::DequantizeLinear { .. } | Op::MaxPool(_) | Op::AveragePool(_) | Op::LpPool(..) | Op::GlobalAveragePool => None,
        Op::GlobalMaxPool | Op::BatchNorm { .. } | Op::InstanceNorm { .. } | Op::LayerNorm { .. } => None,
        Op::GroupNorm { .. } | Op::Lrn { .. } | Op::LpNorm { .. } | Op::Softmax { .. } | Op::LogSoftmax { .. } => None,
        Op::Hardmax { .. } | Op::TopK { .. } | Op::Reduce { .. } | Op::ArgReduce { .. } | Op::CumSum { .. } => None,
        Op::Range | Op::NonZero | Op::OneHot { .. } | Op::EyeLike { .. } | Op::ConstantOfShape { .. } => None,
        Op::Reshape { .. } | Op::Flatten { .. } | Op::Squeeze { .. } | Op::Unsqueeze { .. } => None,
        Op::Transpose { .. } | Op::Concat { .. } | Op::Split { .. } | Op::Slice | Op::Pad { .. } | Op::Expand => None,
        Op::Tile | Op::Trilu { .. } | Op::Gather { .. } | Op::GatherElements { .. } | Op::GatherNd { .. } => None,
        Op::ScatterElements { .. } | Op::ScatterNd { .. } | Op::TensorScatter { .. } | Op::ReverseSequence { .. } | Op::Resize(_) => None,
        Op::DepthToSpace { .. } | Op::SpaceToDepth { .. } | Op::Shape { .. } | Op::Size => None,
        Op::If(_) | Op::Loop(_) | Op::Scan(_) => None,
        Op::Rnn(_) => None,
    }
}

/// Megatron-style choice: alternate column and row splits over the constant 2-D right-hand operands.
fn auto(graph: &Graph, parts: usize) -> Vec<(ValueId, usize)> {
    let mut out = Vec::new();
    let mut column = true;
    for node in &graph.nodes {
        let Some(trans_b) = split_operands(&node.op) else { continue };
        let Some(w) = node.input(1).filter(|w| graph.value(*w).constant.is_some()) else { continue };
        let shape = &graph.value(w).shape;
        if shape.len() != 2 {
            continue;
        }
        // [K, N] (or [N, K] with trans_b): columns are the output features N, rows the input features K.
        let (row_axis, col_axis) = if trans_b { (1, 0) } else { (0, 1) };
        let axis = if column { col_axis } else { row_axis };
        if shape[axis] % parts == 0 && !out.iter().any(|x: &(ValueId, usize)| x.0 == w) {
            out.push((w, axis));
            column = !column;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use tpu_sdk_core::ir::{DType, Tensor};

    fn two_layers() -> Graph {
        let mut g = Graph::new("t");
        let x = g.add_input("x", DType::F32, vec![2, 8]);
        let w1 = g.add_constant("w1", Tensor::from_f32(vec![8, 12], vec![0.0; 96]));
        let w2 = g.add_constant("w2", Tensor::from_f32(vec![12, 6], vec![0.0; 72]));
        let h = g.add_value("h", DType::F32, vec![2, 12]);
        g.add_node("a", Op::MatMul, vec![Some(x), Some(w1)], vec![h]);
        let y = g.add_value("y", DType::F32, vec![2, 6]);
        g.add_node("b", Op::MatMul, vec![Some(h), Some(w2)], vec![y]);
        g.outputs.push(y);
        g
    }

    #[test]
    fn parses_names_axes_auto_and_parts_with_clear_errors() {
        let g = two_layers();
        let p = plan(&g, &["w1=-1".into()], 4).unwrap().unwrap();
        assert_eq!((p.parts, p.weights.clone()), (4, vec![(ValueId(1), 1)]));
        assert_eq!(p.annotation(Some(ValueId(1)), 2), "{devices=[1,4]0,1,2,3}");
        assert_eq!(p.annotation(Some(ValueId(0)), 2), "{replicated}");
        let p = plan(&g, &["auto".into(), "parts=2".into()], 4).unwrap().unwrap();
        assert_eq!((p.parts, p.weights), (2, vec![(ValueId(1), 1), (ValueId(2), 0)]));
        assert!(plan(&g, &[], 4).unwrap().is_none());
        for (spec, want) in [("w3=0", "w1, w2"), ("w1=2", "out of range"), ("w2=1", "not divisible"), ("w1", "WEIGHT=AXIS"), ("parts=0", "at least 1")] {
            let e = plan(&g, &[spec.into()], 4).unwrap_err().to_string();
            assert!(e.contains(want) && e.contains(spec), "{spec}: {e}");
        }
        assert!(plan(&g, &["w1=1".into()], 1).unwrap_err().to_string().contains("at least 2 partitions"));
    }
}
