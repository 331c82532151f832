//! Control flow: If, Loop and Scan (opset 8 and 9+). Their subgraphs become regions
//! ([`crate::ir::ops::control_flow`]): the outer values a subgraph uses by name are resolved here into
//! explicit captured inputs (outer constants are copied in), and each region is imported with the types the
//! node passes (so sizes chosen for symbolic dims flow into the bodies). An `If` whose condition is already a
//! constant is inlined: only the taken branch is imported.

use super::MapFn;
use crate::import::onnx::graph::{free_names, Cx, Formal, NodeIn};
use crate::import::onnx::proto::GraphProto;
use crate::ir::ops::control_flow::{unrunnable_branch, IfAttrs, LoopAttrs, ScanAttrs};
use crate::ir::{DType, Graph, Op, ValueId};
use crate::passes::inline_if::inline_region;
use crate::{Error, Result};

/// The ops of this family.
pub(super) const OPS: &[(&str, MapFn)] = &[("If", if_op), ("Loop", loop_op), ("Scan", scan_op)];

/// The graph attribute `name`.
fn graph_attr<'a>(n: &NodeIn<'a>, name: &str) -> Result<&'a GraphProto> {
    n.attrs.get(name).and_then(|a| a.g.as_ref()).ok_or_else(|| n.invalid(format!("has no graph attribute '{name}'")))
}

/// The outer values the subgraphs use, resolved in this graph (a sequence as the tensor stacking its elements).
fn outer_values(cx: &mut Cx, n: &NodeIn, graphs: &[&GraphProto]) -> Result<Vec<(String, ValueId)>> {
    let mut out: Vec<(String, ValueId)> = Vec::new();
    for g in graphs {
        for name in free_names(g) {
            if out.iter().any(|(o, _)| *o == name) {
                continue;
            }
            let v = cx.resolve(&name, &n.desc)?;
            // a sequence goes in as the stack of its elements, which the region reads as that sequence
            let v = super::sequence_stacked::captured(cx, n, v)?;
            out.push((name, v));
        }
    }
    Ok(out)
}

/// The outer values passed as captured inputs (constants are copied into the regions instead).
fn captures(cx: &Cx, outer: &[(String, ValueId)]) -> Vec<Option<ValueId>> {
    outer.iter().filter(|(_, v)| cx.constant(*v).is_none()).map(|(_, v)| Some(*v)).collect()
}

/// A formal parameter typed like outer value `v`.
fn formal_like(cx: &Cx, v: ValueId) -> Formal {
    let val = cx.g.value(v);
    Formal { dtype: val.dtype, shape: val.shape.clone(), dynamic: val.dynamic || cx.shape(v).is_none(), rank: cx.rank(v) }
}

fn if_op(cx: &mut Cx, n: &NodeIn) -> Result<()> {
    let cond = n.req(0)?;
    let then_g = graph_attr(n, "then_branch")?;
    let else_g = graph_attr(n, "else_branch")?;
    if then_g.output.len() != else_g.output.len() {
        return Err(n.invalid(format!(
            "then_branch has {} outputs but else_branch has {}; both branches must produce the same number",
            then_g.output.len(),
            else_g.output.len()
        )));
    }
    if then_g.output.len() != n.outputs.len() {
        return Err(n.invalid(format!("has {} outputs but its branches produce {}", n.outputs.len(), then_g.output.len())));
    }
    let outer = outer_values(cx, n, &[then_g, else_g])?;
    let caps = captures(cx, &outer);
    if let Some(c) = cx.constant(cond) {
        // a constant condition: only the taken branch exists
        let v = c.to_f64_vec();
        if v.len() != 1 {
            return Err(n.invalid(format!("the condition must hold one element, it has shape {:?}", c.shape)));
        }
        let branch_g = if v[0] != 0.0 { then_g } else { else_g };
        let branch = cx.import_region(branch_g, &[], &outer, n.opset).map_err(|e| in_region(n, branch_g, e))?;
        return inline(cx, n, &branch, &caps);
    }
    let then_r = cx.import_region_ranked(then_g, &[], &outer, n.opset).map_err(|e| in_region(n, then_g, e));
    let else_r = cx.import_region_ranked(else_g, &[], &outer, n.opset).map_err(|e| in_region(n, else_g, e));
    // Only the branch the condition takes has to fit the shapes the model is loaded with (onnxruntime looks
    // at no other): a branch whose shapes do not work out is kept as an error raised if it is ever taken.
    let stub = |g: &GraphProto, other: &Graph| unrunnable_branch(g.name.as_deref().unwrap_or(""), other);
    let (then_branch, else_branch, unrunnable, ranks) = match (then_r, else_r) {
        (Ok((t, tr)), Ok((e, er))) => {
            let ranks = branch_ranks(&tr, &er);
            (t, e, [None, None], ranks)
        }
        (Err(te), Ok((e, er))) if runs_only_if_taken(&te) => (stub(then_g, &e), e, [Some(reason(n, te)), None], er),
        (Ok((t, tr)), Err(ee)) if runs_only_if_taken(&ee) => {
            let e = stub(else_g, &t);
            (t, e, [None, Some(reason(n, ee))], tr)
        }
        (Err(e), _) | (_, Err(e)) => return Err(e),
    };
    for (k, (t, e)) in then_branch.outputs.iter().zip(&else_branch.outputs).enumerate() {
        let (dt, de) = (then_branch.value(*t).dtype, else_branch.value(*e).dtype);
        if dt != de {
            return Err(n.invalid(format!("output {k} is {dt} in then_branch but {de} in else_branch")));
        }
    }
    let mut inputs = vec![Some(cond)];
    inputs.extend(caps);
    let op = Op::If(IfAttrs { then_branch: Box::new(then_branch), else_branch: Box::new(else_branch), unrunnable });
    cx.emit(n.name.clone(), op, inputs, n.outputs.clone())?;
    set_run_time_ranks(cx, &n.outputs, ranks);
    Ok(())
}

/// The rank of each If output from its branches' (`then_ranks`, `else_ranks`). Where they differ (onnxruntime
/// runs such models: ONNX's own function expansions give a scalar in one branch and a 1-element vector in the
/// other) the rank is left unknown, so an op that needs it refuses naming its node.
fn branch_ranks(then_ranks: &[Option<usize>], else_ranks: &[Option<usize>]) -> Vec<Option<usize>> {
    then_ranks
        .iter()
        .zip(else_ranks)
        .map(|(&t, &e)| match (t, e) {
            (Some(t), Some(e)) if t != e => None,
            _ => t.or(e),
        })
        .collect()
}

/// Adds the nodes of `region` (whose inputs are `caps`) in place of node `n`.
fn inline(cx: &mut Cx, n: &NodeIn, region: &Graph, caps: &[Option<ValueId>]) -> Result<()> {
    let prefix = if n.name.is_empty() { cx.fresh_name("If") } else { n.name.clone() };
    let nodes = inline_region(&mut cx.g, region, caps, &n.outputs, &prefix);
    for node in nodes {
        cx.emit(node.name, node.op, node.inputs, node.outputs)?;
    }
    Ok(())
}

/// Whether a branch that failed to import with error `e` may still be loaded as "an error if taken": its shapes
/// or values do not work out with the types given (shape inference, constant folding). An unsupported op, a
/// nesting limit or a resource limit is an error of the model whichever branch runs.
fn runs_only_if_taken(e: &Error) -> bool {
    matches!(e, Error::InvalidModel(m) if !m.starts_with("control flow is nested"))
}

/// The message of an import error inside a region of `n` (without the error kind's prefix and `n`'s name).
fn reason(n: &NodeIn, e: Error) -> String {
    match e {
        Error::InvalidModel(m) => m.strip_prefix(&format!("{}, ", n.desc)).map(str::to_string).unwrap_or(m),
        other => other.to_string(),
    }
}

/// An import error inside a region, with the node it belongs to.
fn in_region(n: &NodeIn, g: &GraphProto, e: Error) -> Error {
    let region = g.name.as_deref().unwrap_or("");
    match e {
        // already names the region where the limit was hit; one line, not one prefix per level
        Error::InvalidModel(m) if m.starts_with("control flow is nested") => Error::InvalidModel(m),
        Error::InvalidModel(m) => Error::InvalidModel(format!("{}, region '{region}': {m}", n.desc)),
        Error::Unsupported(m) => Error::Unsupported(format!("{}, region '{region}': {m}", n.desc)),
        Error::Node { node, op, msg } => Error::InvalidModel(format!("{}, region '{region}': node '{node}' ({op}): {msg}", n.desc)),
        other => other,
    }
}

/// Imports `body` with `formals` whose state entries (`state`: indices into `formals`, with the body output
/// giving the next value of each) are marked dynamic when the body changes their shape, until the types settle.
/// Returns the body and the rank of each of its outputs where known.
fn import_body(
    cx: &Cx,
    n: &NodeIn,
    body_g: &GraphProto,
    mut formals: Vec<Formal>,
    state: &[(usize, usize)],
    outer: &[(String, ValueId)],
) -> Result<(Graph, Vec<Option<usize>>)> {
    for _ in 0..=state.len() {
        let (body, ranks) = cx.import_region_ranked(body_g, &formals, outer, n.opset).map_err(|e| in_region(n, body_g, e))?;
        let mut changed = false;
        for &(fi, oi) in state {
            let f = &formals[fi];
            let o = body.value(body.outputs[oi]);
            if o.dtype != f.dtype {
                let name = body_g.input.get(fi).and_then(|v| v.name.as_deref()).unwrap_or("");
                return Err(n.invalid(format!(
                    "the body's input '{name}' is {} but the body gives back {} for it (output {oi}); a state value keeps its type",
                    f.dtype, o.dtype
                )));
            }
            if !f.dynamic && (o.dynamic || o.shape != f.shape) {
                // the state keeps its rank when the body gives back a value of the same rank
                let keeps_rank = ranks[oi] == Some(f.shape.len());
                formals[fi].rank = keeps_rank.then_some(f.shape.len());
                formals[fi].dynamic = true;
                changed = true;
            }
        }
        if !changed {
            return Ok((body, ranks));
        }
    }
    Err(n.invalid("the body's state types do not settle"))
}

fn loop_op(cx: &mut Cx, n: &NodeIn) -> Result<()> {
    let body_g = graph_attr(n, "body")?;
    let m = n.opt(0);
    let cond = n.opt(1);
    let carried: Vec<ValueId> = (2..n.inputs.len()).map(|i| n.req(i)).collect::<Result<_>>()?;
    let nc = carried.len();
    if body_g.input.len() != 2 + nc {
        return Err(n.invalid(format!(
            "the body takes {} inputs, but a Loop with {nc} carried values passes {} (iteration number, condition, {nc} carried); the body signature does not match",
            body_g.input.len(),
            2 + nc
        )));
    }
    if body_g.output.len() < 1 + nc {
        return Err(n.invalid(format!(
            "the body has {} outputs, but a Loop with {nc} carried values needs at least {} (condition, {nc} carried)",
            body_g.output.len(),
            1 + nc
        )));
    }
    let k = body_g.output.len() - 1 - nc;
    if n.outputs.len() != nc + k {
        return Err(n.invalid(format!("has {} outputs, the body gives {nc} carried and {k} scan outputs", n.outputs.len())));
    }
    if let Some(m) = m {
        let d = cx.need_dtype(n, m, "the trip count")?;
        if d != DType::I64 {
            return Err(n.invalid(format!("the trip count M is {d}, it must be int64")));
        }
    }
    if let Some(c) = cond {
        let d = cx.need_dtype(n, c, "the condition")?;
        if d != DType::Bool {
            return Err(n.invalid(format!("the condition is {d}, it must be bool")));
        }
    }
    if carried.iter().any(|&v| cx.seq(v).is_some()) {
        return super::sequence_loop::loop_with_sequences(cx, n, body_g, &carried);
    }
    emit_loop(cx, n, body_g, carried, n.outputs.clone())
}

/// Imports `body_g` as the body of Loop `n` (with its trip count and condition) over the tensor values
/// `carried`, and emits the Loop with `outputs` (carried, then scan outputs, as many as the body gives).
pub(super) fn emit_loop(cx: &mut Cx, n: &NodeIn, body_g: &GraphProto, carried: Vec<ValueId>, outputs: Vec<ValueId>) -> Result<()> {
    let nc = carried.len();
    let outer = outer_values(cx, n, &[body_g])?;
    let mut formals = vec![
        Formal { dtype: DType::I64, shape: vec![], dynamic: false, rank: Some(0) },
        Formal { dtype: DType::Bool, shape: vec![], dynamic: false, rank: Some(0) },
    ];
    formals.extend(carried.iter().map(|&v| formal_like(cx, v)));
    let state: Vec<(usize, usize)> = (0..nc).map(|i| (2 + i, 1 + i)).collect();
    let (body, body_ranks) = import_body(cx, n, body_g, formals, &state, &outer)?;
    // a carried value keeps its rank, a scan output has one more than its slices
    let ranks: Vec<Option<usize>> =
        carried.iter().map(|&v| cx.rank(v)).chain(body_ranks[1 + nc..].iter().map(|r| r.map(|r| r + 1))).collect();
    let mut inputs = vec![n.opt(0), n.opt(1)];
    inputs.extend(carried.into_iter().map(Some));
    inputs.extend(captures(cx, &outer));
    cx.emit(n.name.clone(), Op::Loop(LoopAttrs { body: Box::new(body), num_carried: nc }), inputs, outputs.clone())?;
    set_run_time_ranks(cx, &outputs, ranks);
    Ok(())
}

/// Normalises possibly negative axes against `rank`.
fn axes(n: &NodeIn, name: &str, v: Option<Vec<i64>>, count: usize, rank: impl Fn(usize) -> Option<usize>) -> Result<Vec<usize>> {
    let v = v.unwrap_or_else(|| vec![0; count]);
    if v.len() != count {
        return Err(n.invalid(format!("'{name}' has {} entries for {count} values", v.len())));
    }
    v.iter()
        .enumerate()
        .map(|(i, &a)| {
            if a >= 0 {
                return Ok(a as usize);
            }
            let r = rank(i).ok_or_else(|| n.unsupported(format!("negative '{name}' {a} needs the rank of value {i}")))? as i64;
            if a + r < 0 {
                return Err(n.invalid(format!("'{name}' {a} is out of range for rank {r}")));
            }
            Ok((a + r) as usize)
        })
        .collect()
}

fn directions(n: &NodeIn, name: &str, count: usize) -> Result<Vec<bool>> {
    let v = n.attrs.ints(name)?.unwrap_or_else(|| vec![0; count]);
    if v.len() != count {
        return Err(n.invalid(format!("'{name}' has {} entries for {count} values", v.len())));
    }
    Ok(v.iter().map(|&d| d != 0).collect())
}

fn scan_op(cx: &mut Cx, n: &NodeIn) -> Result<()> {
    let body_g = graph_attr(n, "body")?;
    let m = n.attrs.int("num_scan_inputs")?.ok_or_else(|| n.invalid("has no 'num_scan_inputs'"))?;
    let batched = n.opset < 9;
    // opset 8: the first input is the optional sequence_lens
    let first = usize::from(batched);
    if batched && n.opt(0).is_some() {
        return Err(n.unsupported("an opset 8 Scan with 'sequence_lens' is not supported (only full-length sequences)"));
    }
    let data: Vec<ValueId> = (first..n.inputs.len()).map(|i| n.req(i)).collect::<Result<_>>()?;
    let m = usize::try_from(m).ok().filter(|&m| m <= data.len()).ok_or_else(|| n.invalid(format!("num_scan_inputs {m} does not fit {} inputs", data.len())))?;
    let ns = data.len() - m;
    if body_g.input.len() != ns + m {
        return Err(n.invalid(format!(
            "the body takes {} inputs, but this Scan passes {} ({ns} state, {m} scan slices); the body signature does not match",
            body_g.input.len(),
            ns + m
        )));
    }
    if body_g.output.len() < ns || n.outputs.len() != body_g.output.len() {
        return Err(n.invalid(format!("has {} outputs, its body gives {}", n.outputs.len(), body_g.output.len())));
    }
    let k = body_g.output.len() - ns;
    let b = usize::from(batched);
    let (input_axes, input_reverse, raw_output_axes, output_reverse) = if batched {
        (vec![0; m], directions(n, "directions", m)?, Some(vec![0; k]), vec![false; k])
    } else {
        let ranks: Vec<Option<usize>> = data[ns..].iter().map(|&v| cx.rank(v)).collect();
        let ia = axes(n, "scan_input_axes", n.attrs.ints("scan_input_axes")?, m, |i| ranks[i])?;
        (ia, directions(n, "scan_input_directions", m)?, n.attrs.ints("scan_output_axes")?, directions(n, "scan_output_directions", k)?)
    };
    let mut formals: Vec<Formal> = Vec::with_capacity(ns + m);
    for (i, &v) in data.iter().enumerate() {
        let mut f = formal_like(cx, v);
        if !f.dynamic {
            if f.shape.len() < b {
                return Err(n.invalid("an opset 8 Scan's inputs need a batch axis"));
            }
            f.shape.drain(..b);
            if i >= ns {
                let axis = input_axes[i - ns];
                if axis >= f.shape.len() {
                    return Err(n.invalid(format!("scan input {} has rank {}, no scan axis {axis}", i - ns, f.shape.len())));
                }
                f.shape.remove(axis);
            }
            f.rank = Some(f.shape.len());
        } else {
            // a slice drops the batch axis (opset 8) and, for scan inputs, the scan axis
            f.rank = f.rank.and_then(|r| r.checked_sub(b + usize::from(i >= ns)));
        }
        formals.push(f);
    }
    let outer = outer_values(cx, n, &[body_g])?;
    let state: Vec<(usize, usize)> = (0..ns).map(|i| (i, i)).collect();
    let (body, body_ranks) = import_body(cx, n, body_g, formals, &state, &outer)?;
    // output axes are against the stacked rank (slice rank + 1)
    let ranks: Vec<Option<usize>> = body_ranks[ns..].iter().map(|r| r.map(|r| r + 1)).collect();
    let output_axes = axes(n, "scan_output_axes", raw_output_axes, k, |j| ranks[j])?;
    // a state output keeps the state's rank; a scan output has the slices' rank + 1 (+ the batch axis in opset 8)
    let out_ranks: Vec<Option<usize>> =
        data[..ns].iter().map(|&v| cx.rank(v)).chain(ranks.iter().map(|r| r.map(|r| r + b))).collect();
    let mut inputs: Vec<Option<ValueId>> = data.into_iter().map(Some).collect();
    inputs.extend(captures(cx, &outer));
    let attrs = ScanAttrs { body: Box::new(body), num_state: ns, num_scan_inputs: m, input_axes, input_reverse, output_axes, output_reverse, batched };
    cx.emit(n.name.clone(), Op::Scan(attrs), inputs, n.outputs.clone())?;
    set_run_time_ranks(cx, &n.outputs, out_ranks);
    Ok(())
}

/// Records `ranks` for those of `outputs` whose shape is known only at run time (the op's own rule: rank.rs
/// knows only ops without regions).
fn set_run_time_ranks(cx: &mut Cx, outputs: &[ValueId], ranks: Vec<Option<usize>>) {
    for (&o, r) in outputs.iter().zip(ranks) {
        if let (None, Some(r)) = (cx.shape(o), r) {
            cx.set_rank(o, r);
        }
    }
}
