//! Shape and dtype inference over a graph, with constant folding of nodes whose inputs are all known.
//!
//! The per-op rules live beside the CPU kernels (`runtime::kernels`, one file per op family), so the shape a
//! kernel produces and the shape inference predicts are computed by the same code. This module walks the
//! graph: for each node it gathers what is known about the inputs, folds the node when every input is a
//! constant (so `Shape → Gather → Concat → Reshape` chains resolve to static shapes), and otherwise asks the
//! op's rule. Outputs whose shape depends on run-time data are marked [`Value::dynamic`](super::Value).

use super::{DType, Graph, Op, Tensor};
use crate::runtime::kernels::{self, InferError, Scratch, TypeInfo};
use crate::{Error, Result};

/// Folding is skipped when a folded output would exceed this many elements (keeps models small and import fast;
/// such nodes simply run at run time).
const MAX_FOLD_ELEMENTS: usize = 1 << 22;

/// Infers every node of `g` in order (see [`infer_node`]).
pub fn infer_graph(g: &mut Graph) -> Result<()> {
    for i in 0..g.nodes.len() {
        infer_node(g, i)?;
    }
    Ok(())
}

/// Sets dtype, shape, `dynamic` and (when foldable) constant data of the outputs of node `node`.
///
/// Errors name the node and say what is inconsistent (for example shapes that do not broadcast).
pub fn infer_node(g: &mut Graph, node: usize) -> Result<()> {
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
    let quantized = kernels::int8::is_quantized_node(g, node);
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
        let inferred = if quantized { kernels::int8::infer(&n.op, &infos) } else { kernels::infer(&n.op, &infos) };
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
    let inferred = if quantized { kernels::int8::infer(&n.op, &infos) } else { kernels::infer(&n.op, &infos) };
    let foldable = !quantized
        && all_const
        && match &inferred {
            Ok(out) => out.iter().map(|(_, s)| s.iter().product::<usize>()).sum::<usize>() <= MAX_FOLD_ELEMENTS,
            Err(InferError::Dynamic) => true,
            Err(InferError::Invalid(_)) => false,
        };
    if foldable {
        let inputs: Vec<Option<&Tensor>> = n.inputs.iter().map(|i| i.map(|v| g.values[v.0].constant.as_ref().expect("all inputs are constant"))).collect();
        let mut outputs: Vec<Tensor> = n.outputs.iter().map(|_| Tensor::default()).collect();
        kernels::eval(&n.op, &inputs, &mut outputs, &mut Scratch::default()).map_err(|m| Error::node(n, node, m))?;
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

/// Output dtypes when shapes cannot be inferred: what each op produces given its input dtypes.
fn fallback_dtypes(op: &Op, inputs: &[Option<TypeInfo>], n_out: usize) -> Vec<DType> {
    let first = inputs.iter().flatten().next().map(|i| i.dtype).unwrap_or(DType::F32);
    let d = match op {
        Op::Shape { .. } | Op::Size | Op::NonZero | Op::ArgReduce { .. } => DType::I64,
        Op::Cast { to } => *to,
        Op::ConstantOfShape { value } => value.dtype(),
        Op::Binary(b, _) if b.is_comparison() || b.is_logical() => DType::Bool,
        Op::Unary(crate::ir::UnaryOp::IsNaN | crate::ir::UnaryOp::IsInf { .. }) => DType::Bool,
        Op::Where | Op::OneHot { .. } => inputs.get(if matches!(op, Op::Where) { 1 } else { 2 }).copied().flatten().map(|i| i.dtype).unwrap_or(first),
        Op::EyeLike { dtype: Some(d), .. } => *d,
        Op::DequantizeLinear { .. } => inputs.get(1).copied().flatten().map(|i| i.dtype).unwrap_or(DType::F32),
        Op::QuantizeLinear { to, .. } => inputs.get(2).copied().flatten().map(|i| i.dtype).unwrap_or(*to),
        _ => first,
    };
    let mut v = vec![d; n_out];
    if matches!(op, Op::TopK { .. }) && n_out > 1 {
        v[1] = DType::I64;
    }
    if matches!(op, Op::MaxPool(_)) && n_out > 1 {
        v[1] = DType::I64;
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::BinaryOp;

    #[test]
    fn folds_constant_chains_and_propagates_dynamic() {
        let mut g = Graph::new("t");
        let x = g.add_input("x", DType::F32, vec![2, 3]);
        let c = g.add_constant("c", Tensor::from_f32(vec![3], vec![1.0, 2.0, 3.0]));
        let d = g.add_constant("d", Tensor::from_f32(vec![3], vec![1.0, 1.0, 1.0]));
        let cd = g.add_value("cd", DType::F32, vec![]);
        g.add_node("fold", Op::Binary(BinaryOp::Add, None), vec![Some(c), Some(d)], vec![cd]);
        let y = g.add_value("y", DType::F32, vec![]);
        g.add_node("add", Op::Binary(BinaryOp::Add, None), vec![Some(x), Some(cd)], vec![y]);
        g.outputs.push(y);
        infer_graph(&mut g).unwrap();
        assert_eq!(g.constant(cd).unwrap().as_f32().unwrap(), &[2.0, 3.0, 4.0]);
        assert_eq!(g.value(y).shape, vec![2, 3]);
        assert!(g.constant(y).is_none());

        let mut bad = Graph::new("bad");
        let a = bad.add_input("a", DType::F32, vec![2]);
        let b = bad.add_input("b", DType::F32, vec![3]);
        let o = bad.add_value("o", DType::F32, vec![]);
        bad.add_node("mismatch", Op::Binary(BinaryOp::Mul, None), vec![Some(a), Some(b)], vec![o]);
        let e = infer_graph(&mut bad).unwrap_err().to_string();
        assert!(e.contains("mismatch") && e.contains("broadcast"), "{e}");
    }
}
