//! The graph verifier: rejects ill-formed graphs with an error naming the node.
//!
//! Checks, in order: every referenced value exists; nodes are in topological order (each input is a graph
//! input, a constant or the output of an earlier node); no value is produced twice, and graph inputs and
//! constants are never produced by a node; each op has an input and output count it allows; graph outputs
//! are defined; and the stored dtypes and shapes agree with what inference computes (so a pass that rewrites
//! the graph and forgets to update a shape is caught).

use super::ops::quantize::{infer_quantized, is_quantized_node};
use super::ops::{self, arity, InferError, TypeInfo};
use super::Graph;
use crate::{Error, Result};

/// Verifies `g`; the error names the first offending node.
pub fn verify(g: &Graph) -> Result<()> {
    verify_at(g, 0)
}

/// Verifies `g`, a region nested `depth` deep (0: the model's graph); regions of its nodes are verified too.
fn verify_at(g: &Graph, depth: usize) -> Result<()> {
    if depth > ops::control_flow::MAX_REGION_DEPTH {
        return Err(Error::InvalidModel(format!(
            "control flow is nested more than {} deep (If/Loop/Scan bodies inside each other)",
            ops::control_flow::MAX_REGION_DEPTH
        )));
    }
    let nv = g.values.len();
    let mut defined = vec![false; nv];
    let mut is_input = vec![false; nv];
    for &i in &g.inputs {
        if i.0 >= nv {
            return Err(Error::InvalidModel(format!("graph input refers to value #{} which does not exist", i.0)));
        }
        let v = &g.values[i.0];
        if v.constant.is_some() {
            return Err(Error::InvalidModel(format!("graph input '{}' also has constant data", v.name)));
        }
        defined[i.0] = true;
        is_input[i.0] = true;
    }
    for (i, v) in g.values.iter().enumerate() {
        if let Some(c) = &v.constant {
            if c.dtype() != v.dtype || c.shape != v.shape {
                return Err(Error::InvalidModel(format!(
                    "value '{}' is declared {}{:?} but its constant data is {}{:?}",
                    v.name,
                    v.dtype,
                    v.shape,
                    c.dtype(),
                    c.shape
                )));
            }
            defined[i] = true;
        }
    }
    let mut produced = vec![false; nv];
    for (idx, n) in g.nodes.iter().enumerate() {
        let (lo, hi, olo, ohi) = arity(&n.op);
        if n.inputs.len() < lo || n.inputs.len() > hi {
            let want = if hi == usize::MAX { format!("at least {lo}") } else if lo == hi { lo.to_string() } else { format!("{lo} to {hi}") };
            return Err(Error::node(n, idx, format!("has {} inputs, the op takes {want}", n.inputs.len())));
        }
        if n.outputs.len() < olo || n.outputs.len() > ohi {
            return Err(Error::node(n, idx, format!("has {} outputs, the op produces {olo} to {ohi}", n.outputs.len())));
        }
        ops::control_flow::check_signature(&n.op, n.inputs.len(), n.outputs.len()).map_err(|m| Error::node(n, idx, m))?;
        for r in ops::control_flow::regions(&n.op) {
            match verify_at(r, depth + 1) {
                Err(Error::Node { node, op, msg }) => {
                    return Err(Error::node(n, idx, format!("in region '{}': node '{node}' ({op}): {msg}", r.name)))
                }
                Err(e) => return Err(e),
                Ok(()) => {}
            }
        }
        for (k, i) in n.inputs.iter().enumerate() {
            match i {
                Some(v) if v.0 >= nv => return Err(Error::node(n, idx, format!("input {k} refers to value #{} which does not exist", v.0))),
                Some(v) if !defined[v.0] => {
                    return Err(Error::node(
                        n,
                        idx,
                        format!("input {k} '{}' is used before it is produced (nodes are not in topological order, or it is never produced)", g.values[v.0].name),
                    ))
                }
                None if k < lo => return Err(Error::node(n, idx, format!("required input {k} is absent"))),
                _ => {}
            }
        }
        for o in &n.outputs {
            if o.0 >= nv {
                return Err(Error::node(n, idx, format!("output refers to value #{} which does not exist", o.0)));
            }
            let name = &g.values[o.0].name;
            if is_input[o.0] {
                return Err(Error::node(n, idx, format!("produces graph input '{name}'")));
            }
            if produced[o.0] {
                return Err(Error::node(n, idx, format!("produces '{name}', which another node already produces")));
            }
            produced[o.0] = true;
        }
        check_types(g, idx)?;
        for o in &n.outputs {
            defined[o.0] = true;
        }
    }
    for &o in &g.outputs {
        if o.0 >= nv || !defined[o.0] {
            return Err(Error::InvalidModel(format!("graph output #{} is never produced", o.0)));
        }
    }
    Ok(())
}

/// Compares the stored output types of node `idx` with what inference computes.
fn check_types(g: &Graph, idx: usize) -> Result<()> {
    let n = &g.nodes[idx];
    if n.inputs.iter().flatten().any(|v| g.values[v.0].dynamic) {
        return Ok(());
    }
    let infos: Vec<Option<TypeInfo>> = n
        .inputs
        .iter()
        .map(|i| i.map(|v| TypeInfo { dtype: g.values[v.0].dtype, shape: &g.values[v.0].shape, value: g.values[v.0].constant.as_ref() }))
        .collect();
    let inferred = if is_quantized_node(g, idx) { infer_quantized(&n.op, &infos) } else { ops::infer(&n.op, &infos) };
    match inferred {
        Ok(out) => {
            for (o, (d, s)) in n.outputs.iter().zip(out) {
                let v = &g.values[o.0];
                if v.dynamic {
                    continue;
                }
                if v.dtype != d || v.shape != s {
                    return Err(Error::node(
                        n,
                        idx,
                        format!("output '{}' is declared {}{:?} but the op computes {}{:?}", v.name, v.dtype, v.shape, d, s),
                    ));
                }
            }
            Ok(())
        }
        Err(InferError::Dynamic) => Ok(()),
        Err(InferError::Invalid(m)) => Err(Error::node(n, idx, m)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::infer::{infer_graph, NoFold};
    use crate::ir::{BinaryOp, DType, Op};


    fn small() -> Graph {
        let mut g = Graph::new("t");
        let x = g.add_input("x", DType::F32, vec![2, 3]);
        let y = g.add_value("y", DType::F32, vec![]);
        g.add_node("add", Op::Binary(BinaryOp::Add, None), vec![Some(x), Some(x)], vec![y]);
        g.outputs.push(y);
        infer_graph(&mut g, &NoFold).unwrap();
        g
    }

    #[test]
    fn accepts_a_good_graph_and_names_the_bad_node() {
        let g = small();
        verify(&g).unwrap();

        let mut wrong_shape = g.clone();
        wrong_shape.values[1].shape = vec![3, 2];
        let e = verify(&wrong_shape).unwrap_err().to_string();
        assert!(e.contains("'add'") && e.contains("declared"), "{e}");

        let mut unordered = g.clone();
        let z = unordered.add_value("z", DType::F32, vec![2, 3]);
        unordered.nodes[0].inputs[1] = Some(z);
        let e = verify(&unordered).unwrap_err().to_string();
        assert!(e.contains("before it is produced"), "{e}");

        let mut arity = g.clone();
        arity.nodes[0].inputs.pop();
        let e = verify(&arity).unwrap_err().to_string();
        assert!(e.contains("has 1 inputs"), "{e}");

        let mut twice = g;
        let y = twice.nodes[0].outputs[0];
        twice.add_node("again", Op::Unary(crate::ir::UnaryOp::Relu), vec![Some(y)], vec![y]);
        assert!(verify(&twice).unwrap_err().to_string().contains("already produces"));
    }
}
