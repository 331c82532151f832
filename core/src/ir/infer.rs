//! Shape and dtype inference over a graph, with constant folding of nodes whose inputs are all known.
//!
//! The per-op rules live in [`super::ops`] (one file per op family); the CPU kernels compute from the same
//! shape plans, so the shape a kernel produces and the shape inference predicts agree. This module walks the
//! graph: for each node it gathers what is known about the inputs, folds the node when every input is a
//! constant (so `Shape → Gather → Concat → Reshape` chains resolve to static shapes), and otherwise asks the
//! op's rule. Outputs whose shape depends on run-time data are marked [`Value::dynamic`](super::Value).
//!
//! Folding runs the op, which the IR cannot do itself: the caller passes a [`ConstEval`] (the CPU runtime's
//! is `runtime::CpuEval`).

use super::ops::quantize::{infer_quantized, is_quantized_node};
use super::ops::{self, fallback_dtypes, InferError, TypeInfo};
use super::{DType, Graph, Op, Tensor};
use crate::{Error, Result};

/// Evaluates one op on constant inputs, for constant folding.
pub trait ConstEval {
    /// Computes the outputs of `op` (one tensor per node output, which it overwrites); errors are plain
    /// messages (the caller adds the node name).
    fn eval(&self, op: &Op, inputs: &[Option<&Tensor>], outputs: &mut [Tensor]) -> std::result::Result<(), String>;
    /// Whether this evaluator folds at all; when `false`, nodes whose inputs are all constant get their
    /// types from the op's rule like any other node and are never passed to [`ConstEval::eval`].
    fn folds(&self) -> bool {
        true
    }
}

/// A [`ConstEval`] that folds nothing: constant nodes stay nodes and run with the rest of the graph.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoFold;

impl ConstEval for NoFold {
    fn eval(&self, op: &Op, _: &[Option<&Tensor>], _: &mut [Tensor]) -> std::result::Result<(), String> {
        Err(format!("constant folding is off, {} was not evaluated", op.name()))
    }
    fn folds(&self) -> bool {
        false
    }
}

/// Folding is skipped when a folded output would exceed this many elements (keeps models small and import fast;
/// such nodes simply run at run time).
const MAX_FOLD_ELEMENTS: usize = 1 << 22;

/// Infers every node of `g` in order (see [`infer_node`]).
pub fn infer_graph(g: &mut Graph, eval: &dyn ConstEval) -> Result<()> {
    for i in 0..g.nodes.len() {
        infer_node(g, i, eval)?;
    }
    Ok(())
}

/// Sets dtype, shape, `dynamic` and (when foldable, by running `eval`) constant data of the outputs of node
/// `node`.
///
/// Errors name the node and say what is inconsistent (for example shapes that do not broadcast).
pub fn infer_node(g: &mut Graph, node: usize, eval: &dyn ConstEval) -> Result<()> {
    let n = &g.nodes[node];
    for (k, i) in n.inputs.iter().enumerate() {
        if let Some(v) = i {
            if v.0 >= g.values.len() {
                return Err(Error::node(n, node, format!("input {k} refers to value #{} which does not exist", v.0)));
            }
        }
    }
    for o in &n.outputs {
        if o.0 >= g.values.len() {
            return Err(Error::node(n, node, format!("output refers to value #{} which does not exist", o.0)));
        }
    }
    let any_dynamic = n.inputs.iter().flatten().any(|v| g.values[v.0].dynamic);
    let quantized = is_quantized_node(g, node);
    let all_const = n.inputs.iter().flatten().all(|v| g.values[v.0].constant.is_some());
    let infos: Vec<Option<TypeInfo>> = n
        .inputs
        .iter()
        .map(|i| {
            i.map(|v| {
                let val = &g.values[v.0];
                TypeInfo { dtype: val.dtype, shape: &val.shape, value: val.constant.as_ref() }
            })
        })
        .collect();

    if any_dynamic {
        let inferred = if quantized { infer_quantized(&n.op, &infos) } else { ops::infer(&n.op, &infos) };
        let dtypes = match inferred {
            Ok(out) => out.into_iter().map(|(d, _)| d).collect(),
            Err(_) => fallback_dtypes(&n.op, &infos, n.outputs.len()),
        };
        let outs = n.outputs.clone();
        for (o, d) in outs.iter().zip(dtypes) {
            let v = &mut g.values[o.0];
            v.dtype = d;
            v.dynamic = true;
            v.constant = None;
        }
        return Ok(());
    }

    // Shape and Size read only the (static) shape of their input: their value is known now even when the
    // input's data is not, which is what lets `Shape → Slice → Concat → Reshape` chains fold to constants.
    if let (Op::Shape { .. } | Op::Size, Some(Some(x)), 1) = (&n.op, infos.first(), n.outputs.len()) {
        let value = match &n.op {
            Op::Shape { start, end } => {
                let r = x.shape.len() as i64;
                let clamp = |i: i64| if i < 0 { (i + r).clamp(0, r) } else { i.min(r) } as usize;
                let (s, e) = (clamp(*start), clamp(end.unwrap_or(r)));
                let dims: Vec<i64> = x.shape[s..e.max(s)].iter().map(|&d| d as i64).collect();
                Tensor::from_i64(vec![dims.len()], dims)
            }
            _ => Tensor::from_i64(vec![], vec![x.shape.iter().product::<usize>() as i64]),
        };
        let o = n.outputs[0];
        let v = &mut g.values[o.0];
        v.dtype = DType::I64;
        v.shape = value.shape.clone();
        v.dynamic = false;
        v.constant = Some(value);
        return Ok(());
    }
    // Quantized arithmetic runs integer kernels prepared by the session: it is inferred from the float rule on
    // the shapes and never folded here.
    let inferred = if quantized { infer_quantized(&n.op, &infos) } else { ops::infer(&n.op, &infos) };
    let foldable = eval.folds()
        && !quantized
        // a constant Loop or Scan may run long: it runs with the model instead of at import
        && !matches!(n.op, Op::Loop(_) | Op::Scan(_))
        && all_const
        && match &inferred {
            // checked: a shape a model chose may overflow usize, and a wrapped product would look small
            Ok(out) => out
                .iter()
                .try_fold(0u64, |acc, (_, s)| acc.checked_add(crate::limits::numel(s)?))
                .is_some_and(|n| n <= MAX_FOLD_ELEMENTS as u64),
            Err(InferError::Dynamic) => true,
            Err(InferError::Invalid(_)) => false,
        };
    if foldable {
        let inputs: Vec<Option<&Tensor>> = n.inputs.iter().map(|i| i.map(|v| g.values[v.0].constant.as_ref().expect("all inputs are constant"))).collect();
        let mut outputs: Vec<Tensor> = n.outputs.iter().map(|_| Tensor::default()).collect();
        eval.eval(&n.op, &inputs, &mut outputs).map_err(|m| Error::node(n, node, m))?;
        let outs = n.outputs.clone();
        for (o, t) in outs.iter().zip(outputs) {
            let v = &mut g.values[o.0];
            v.dtype = t.dtype();
            v.shape = t.shape.clone();
            v.dynamic = false;
            v.constant = Some(t);
        }
        return Ok(());
    }
    match inferred {
        Ok(out) => {
            if out.len() < n.outputs.len() {
                return Err(Error::node(n, node, format!("has {} outputs but the op defines {}", n.outputs.len(), out.len())));
            }
            let outs = n.outputs.clone();
            for (o, (d, s)) in outs.iter().zip(out) {
                let v = &mut g.values[o.0];
                v.dtype = d;
                v.shape = s;
                v.dynamic = false;
            }
            Ok(())
        }
        Err(InferError::Invalid(m)) => Err(Error::node(n, node, m)),
        Err(InferError::Dynamic) if !ops::control_flow::regions(&n.op).is_empty() => {
            // per output: a region op knows the shapes of some outputs (a Loop's carried values) even when
            // others (its scan outputs) depend on the iteration count
            let out = ops::control_flow::infer_outputs(&n.op, &infos).map_err(|e| match e {
                InferError::Invalid(m) => Error::node(n, node, m),
                InferError::Dynamic => Error::node(n, node, "no output types"),
            })?;
            let outs = n.outputs.clone();
            for (o, (d, s)) in outs.iter().zip(out) {
                let v = &mut g.values[o.0];
                v.dtype = d;
                v.dynamic = s.is_none();
                if let Some(s) = s {
                    v.shape = s;
                }
            }
            Ok(())
        }
        Err(InferError::Dynamic) => {
            let dtypes = fallback_dtypes(&n.op, &infos, n.outputs.len());
            let outs = n.outputs.clone();
            for (o, d) in outs.iter().zip(dtypes) {
                let v = &mut g.values[o.0];
                v.dtype = d;
                v.dynamic = true;
            }
            Ok(())
        }
    }
}

