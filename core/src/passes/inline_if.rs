//! Inlining of `If` nodes whose condition is a constant: the taken branch's nodes replace the `If` (its
//! captured inputs become the outer values passed to the node, its outputs feed `Identity` nodes that keep
//! the `If`'s output values), so the rest of the pipeline sees plain dataflow. The importer does the same as
//! it reads the model; this pass catches conditions that only folding made constant.

use crate::ir::ops::control_flow::IfAttrs;
use crate::ir::{infer, Graph, Node, Op, ValueId};
use crate::runtime::CpuEval;
use crate::Result;

/// The nodes that compute `region` inside `g`: the region's values are copied into `g` (renamed
/// `prefix/name`), its inputs stand for `inputs`, and one `Identity` per region output writes `outputs`.
/// The returned nodes are not yet in `g`; the caller places them where the control-flow node was.
pub fn inline_region(g: &mut Graph, region: &Graph, inputs: &[Option<ValueId>], outputs: &[ValueId], prefix: &str) -> Vec<Node> {
    let mut map: Vec<Option<ValueId>> = vec![None; region.values.len()];
    for (k, &i) in region.inputs.iter().enumerate() {
        map[i.0] = inputs.get(k).copied().flatten();
    }
    let mut id = |g: &mut Graph, v: ValueId| -> ValueId {
        if let Some(m) = map[v.0] {
            return m;
        }
        let mut val = region.values[v.0].clone();
        val.name = format!("{prefix}/{}", val.name);
        g.values.push(val);
        let new = ValueId(g.values.len() - 1);
        map[v.0] = Some(new);
        new
    };
    let mut nodes = Vec::with_capacity(region.nodes.len() + outputs.len());
    for n in &region.nodes {
        let ins = n.inputs.iter().map(|i| i.map(|v| id(g, v))).collect();
        let outs = n.outputs.iter().map(|&o| id(g, o)).collect();
        let name = if n.name.is_empty() { String::new() } else { format!("{prefix}/{}", n.name) };
        nodes.push(Node { name, op: n.op.clone(), inputs: ins, outputs: outs, keep_float: n.keep_float });
    }
    for (k, (&ro, &o)) in region.outputs.iter().zip(outputs).enumerate() {
        let src = id(g, ro);
        nodes.push(Node { name: format!("{prefix}/output{k}"), op: Op::Identity, inputs: vec![Some(src)], outputs: vec![o], keep_float: false });
    }
    nodes
}

/// The branch an `If` with a constant condition takes, if its condition is constant.
/// `Err` when the branch it takes cannot run (see [`IfAttrs::unrunnable`]).
pub fn taken_branch<'a>(g: &Graph, n: &'a Node) -> Option<std::result::Result<&'a Graph, String>> {
    let Op::If(a) = &n.op else { return None };
    let c = g.constant(n.input(0)?)?;
    let v = c.to_f64_vec();
    if v.len() != 1 {
        return None;
    }
    Some(match a.branch(v[0] != 0.0) {
        (b, None) => Ok(b),
        (_, Some(why)) => Err(IfAttrs::unrunnable_error(v[0] != 0.0, why)),
    })
}

/// Inlines every `If` whose condition is constant; returns how many. Shapes are inferred again afterwards.
pub fn run(g: &mut Graph) -> Result<usize> {
    let mut count = 0;
    let mut i = 0;
    while i < g.nodes.len() {
        let branch = match taken_branch(g, &g.nodes[i]) {
            None => {
                i += 1;
                continue;
            }
            Some(Ok(b)) => b.clone(),
            Some(Err(m)) => return Err(crate::Error::node(&g.nodes[i], i, m)),
        };
        let n = g.nodes[i].clone();
        let prefix = if n.name.is_empty() { format!("if{i}") } else { n.name.clone() };
        let nodes = inline_region(g, &branch, &n.inputs[1..], &n.outputs, &prefix);
        let added = nodes.len();
        g.nodes.splice(i..=i, nodes);
        i += added;
        count += 1;
    }
    if count > 0 {
        infer::infer_graph(g, &CpuEval)?;
    }
    Ok(count)
}
