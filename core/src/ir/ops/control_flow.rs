//! Control flow: `If`, `Loop` and `Scan`, the ops that own nested graphs (regions).
//!
//! A region is an ordinary [`Graph`] held by the op's attributes. Its inputs are its formal parameters
//! followed by the *captured* outer values; the node passes those captured values as explicit trailing inputs
//! (the importer resolves outer-scope names into captures, and copies outer constants into the region), so
//! every pass that walks node inputs (DCE, use counts, memory planning) stays correct without knowing about
//! scopes. Region graphs are inferred when built, with the outer shapes (so sizes the user chose for symbolic
//! dims flow into them); this module reads their output types.
//!
//! | op | node inputs | region inputs | region outputs | node outputs |
//! |---|---|---|---|---|
//! | `If` | cond, captures | captures (both branches) | N | N |
//! | `Loop` | max_trip_count?, cond?, carried (N), captures | iteration (i64), cond (bool), carried, captures | cond, carried, scan slices (K) | carried, scans stacked on a new axis 0 |
//! | `Scan` | state (N), scan inputs (M), captures | state, one slice per scan input, captures | state, scan slices (K) | state, scans stacked on their axis |

use super::{info, Arity, InferError, Inferred, TypeInfo};
use crate::ir::{DType, Graph};

/// `If`: runs one of two regions on a boolean condition.
#[derive(Clone, Debug, PartialEq)]
pub struct IfAttrs {
    /// Runs when the condition is true.
    pub then_branch: Box<Graph>,
    /// Runs when the condition is false.
    pub else_branch: Box<Graph>,
    /// Why a branch cannot run with the types it was imported with (then, else), when it cannot: such a branch
    /// is a stub ([`unrunnable_branch`]) and taking it is a run-time error with this message. ONNX models pick a
    /// branch by an input (silero-vad's sample rate) and only the branch taken has to fit the shapes given; at
    /// most one branch is unrunnable (the import refuses an `If` whose branches both fail).
    pub unrunnable: [Option<String>; 2],
}

impl IfAttrs {
    /// An `If` whose two branches can run.
    pub fn new(then_branch: Graph, else_branch: Graph) -> IfAttrs {
        IfAttrs { then_branch: Box::new(then_branch), else_branch: Box::new(else_branch), unrunnable: [None, None] }
    }

    /// The branch the condition `cond` takes and why it cannot run (if it cannot).
    pub fn branch(&self, cond: bool) -> (&Graph, Option<&str>) {
        let k = usize::from(!cond);
        (if cond { &self.then_branch } else { &self.else_branch }, self.unrunnable[k].as_deref())
    }

    /// The error of taking an unrunnable branch (`then_branch` when `cond`): it names the branch and why.
    pub fn unrunnable_error(cond: bool, why: &str) -> String {
        let name = if cond { "then_branch" } else { "else_branch" };
        format!("the condition takes {name}, which cannot run with the input shapes the model was loaded with ({why}); load the model with shapes that fit this branch, or give the input that picks it a value that takes the other branch")
    }
}

/// A stub for a branch that cannot run, standing beside `other` (the branch that can): the same inputs, and one
/// empty constant per output of `other`'s dtype. It is never run (see [`IfAttrs::unrunnable`]).
pub fn unrunnable_branch(name: &str, other: &Graph) -> Graph {
    let mut g = Graph::new(name);
    for &i in &other.inputs {
        let v = other.value(i);
        let id = g.add_input(&v.name, v.dtype, v.shape.clone());
        g.value_mut(id).dynamic = v.dynamic;
    }
    for (k, &o) in other.outputs.iter().enumerate() {
        let c = g.add_constant(format!("unrunnable{k}"), crate::ir::Tensor::zeros(other.value(o).dtype, vec![0]));
        g.outputs.push(c);
    }
    g
}

/// `Loop`: runs its body while the trip count and the condition allow.
#[derive(Clone, Debug, PartialEq)]
pub struct LoopAttrs {
    /// The body: inputs (iteration, cond, carried..., captures...), outputs (cond, carried..., scan slices...).
    pub body: Box<Graph>,
    /// Number of loop-carried values (N).
    pub num_carried: usize,
}

/// `Scan` (opset 9+ semantics; the opset 8 form with a batch axis is `batched`).
#[derive(Clone, Debug, PartialEq)]
pub struct ScanAttrs {
    /// The body: inputs (state..., scan slices..., captures...), outputs (state..., scan output slices...).
    pub body: Box<Graph>,
    /// Number of state variables (N).
    pub num_state: usize,
    /// Number of scan inputs (M).
    pub num_scan_inputs: usize,
    /// Axis each scan input is iterated over (non-negative).
    pub input_axes: Vec<usize>,
    /// Whether each scan input is iterated backwards.
    pub input_reverse: Vec<bool>,
    /// Axis each scan output is stacked on (non-negative).
    pub output_axes: Vec<usize>,
    /// Whether each scan output is stacked backwards.
    pub output_reverse: Vec<bool>,
    /// Opset 8: every input and output has a leading batch axis, and the scan runs per batch entry (the scan
    /// axes above are then those of one entry).
    pub batched: bool,
}

/// If: cond, captures...
pub const IF_ARITY: Arity = (1, usize::MAX, 1, usize::MAX);
/// Loop: M?, cond?, carried..., captures...
pub const LOOP_ARITY: Arity = (0, usize::MAX, 0, usize::MAX); // M and cond may be absent; `check_signature` counts
/// Scan: state..., scan inputs..., captures...
pub const SCAN_ARITY: Arity = (1, usize::MAX, 1, usize::MAX);

/// Deepest nesting of regions a graph may have (imports and sessions refuse deeper ones).
pub const MAX_REGION_DEPTH: usize = 16;

/// The regions of a control-flow op (empty for other ops).
pub fn regions(op: &super::Op) -> Vec<&Graph> {
    match op {
        super::Op::If(a) => vec![&a.then_branch, &a.else_branch],
        super::Op::Loop(a) => vec![&a.body],
        super::Op::Scan(a) => vec![&a.body],
        _ => Vec::new(),
    }
}

/// Mutable access to the regions of a control-flow op.
pub fn regions_mut(op: &mut super::Op) -> Vec<&mut Graph> {
    match op {
        super::Op::If(a) => vec![&mut a.then_branch, &mut a.else_branch],
        super::Op::Loop(a) => vec![&mut a.body],
        super::Op::Scan(a) => vec![&mut a.body],
        _ => Vec::new(),
    }
}

/// Checks that the node's input and output counts fit its regions' signatures.
pub fn check_signature(op: &super::Op, n_inputs: usize, n_outputs: usize) -> Result<(), String> {
    match op {
        super::Op::If(a) => {
            for (name, b) in [("then_branch", &a.then_branch), ("else_branch", &a.else_branch)] {
                if b.outputs.len() != n_outputs {
                    return Err(format!("{name} has {} outputs but the If node has {n_outputs}; both branches must produce one value per If output", b.outputs.len()));
                }
                if b.inputs.len() != n_inputs - 1 {
                    return Err(format!("{name} takes {} inputs but the If node passes {} captured values", b.inputs.len(), n_inputs - 1));
                }
            }
            Ok(())
        }
        super::Op::Loop(a) => {
            let n = a.num_carried;
            if n_inputs < 2 + n {
                return Err(format!("has {n_inputs} inputs, fewer than the trip count, the condition and {n} carried values"));
            }
            let captures = n_inputs - 2 - n;
            if a.body.inputs.len() != 2 + n + captures {
                return Err(format!(
                    "the body takes {} inputs, but a Loop with {n} carried values passes 2 + {n} (iteration, condition, carried){}",
                    a.body.inputs.len(),
                    if captures > 0 { format!(" + {captures} captured") } else { String::new() }
                ));
            }
            if a.body.outputs.len() < 1 + n {
                return Err(format!("the body has {} outputs, fewer than the condition and {n} carried values", a.body.outputs.len()));
            }
            if n_outputs != a.body.outputs.len() - 1 {
                return Err(format!(
                    "has {n_outputs} outputs but the body gives {} carried and {} scan outputs",
                    n,
                    a.body.outputs.len() - 1 - n
                ));
            }
            Ok(())
        }
        super::Op::Scan(a) => {
            let (n, m) = (a.num_state, a.num_scan_inputs);
            if n_inputs < n + m {
                return Err(format!("has {n_inputs} inputs, fewer than {n} state and {m} scan inputs"));
            }
            if a.body.inputs.len() != n_inputs {
                return Err(format!("the body takes {} inputs, the Scan passes {n_inputs} (state, scan slices, captured)", a.body.inputs.len()));
            }
            if a.body.outputs.len() != n_outputs || n_outputs < n {
                return Err(format!("has {n_outputs} outputs but the body gives {}", a.body.outputs.len()));
            }
            if a.input_axes.len() != m || a.input_reverse.len() != m {
                return Err(format!("has {} scan input axes/directions for {m} scan inputs", a.input_axes.len()));
            }
            let k = n_outputs - n;
            if a.output_axes.len() != k || a.output_reverse.len() != k {
                return Err(format!("has {} scan output axes/directions for {k} scan outputs", a.output_axes.len()));
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

/// The dtype of a value and its shape (`None`: known only at run time).
pub type OutType = (DType, Option<Vec<usize>>);

/// The declared (dtype, shape, dynamic) of region output `i`.
fn region_out(g: &Graph, i: usize) -> OutType {
    let v = g.value(g.outputs[i]);
    (v.dtype, (!v.dynamic).then(|| v.shape.clone()))
}

/// Output dtypes and shapes (`None`: known only at run time) of a control-flow op.
pub fn infer_outputs(op: &super::Op, inputs: &[Option<TypeInfo>]) -> Result<Vec<OutType>, InferError> {
    match op {
        super::Op::If(a) => {
            let cond = info(inputs, 0)?;
            if cond.shape.iter().product::<usize>() != 1 {
                return Err(InferError::Invalid(format!("the condition must hold one element, it has shape {:?}", cond.shape)));
            }
            if let Some(c) = cond.value {
                let taken = c.to_f64_vec()[0] != 0.0;
                let (b, why) = a.branch(taken);
                if let Some(why) = why {
                    return Err(InferError::Invalid(IfAttrs::unrunnable_error(taken, why)));
                }
                return Ok((0..b.outputs.len()).map(|i| region_out(b, i)).collect());
            }
            // an unrunnable branch never produces values: the If has the types of the other one
            match &a.unrunnable {
                [Some(_), None] => return Ok((0..a.else_branch.outputs.len()).map(|i| region_out(&a.else_branch, i)).collect()),
                [None, Some(_)] => return Ok((0..a.then_branch.outputs.len()).map(|i| region_out(&a.then_branch, i)).collect()),
                _ => {}
            }
            let (t, e) = (&a.then_branch, &a.else_branch);
            if t.outputs.len() != e.outputs.len() {
                return Err(InferError::Invalid(format!(
                    "then_branch has {} outputs and else_branch {}; both branches must produce the same number",
                    t.outputs.len(),
                    e.outputs.len()
                )));
            }
            (0..t.outputs.len())
                .map(|i| {
                    let ((dt, st), (de, se)) = (region_out(t, i), region_out(e, i));
                    if dt != de {
                        return Err(InferError::Invalid(format!("output {i} is {dt} in then_branch but {de} in else_branch")));
                    }
                    Ok((dt, if st == se { st } else { None }))
                })
                .collect()
        }
        super::Op::Loop(a) => {
            let n = a.num_carried;
            let body = &a.body;
            if body.outputs.len() < 1 + n {
                return Err(InferError::Invalid(format!("the body has {} outputs, fewer than the condition and {n} carried values", body.outputs.len())));
            }
            let mut out = Vec::new();
            for i in 0..n {
                let (d, s) = region_out(body, 1 + i);
                let init = inputs.get(2 + i).copied().flatten();
                // the carried value keeps its shape only when the body gives back the shape it was given
                let same = init.is_some_and(|t| s.as_deref() == Some(t.shape));
                out.push((d, same.then_some(s).flatten()));
            }
            let trips = static_trip_count(body, inputs).ok();
            for i in 1 + n..body.outputs.len() {
                let (d, s) = region_out(body, i);
                out.push((d, s.zip(trips).map(|(mut s, t)| {
                    s.insert(0, t);
                    s
                })));
            }
            Ok(out)
        }
        super::Op::Scan(a) => {
            let (n, m) = (a.num_state, a.num_scan_inputs);
            if a.body.outputs.len() < n || a.output_axes.len() != a.body.outputs.len() - n || a.input_axes.len() != m {
                return Err(InferError::Invalid("the body's outputs do not match the state and scan axes".into()));
            }
            let mut out = Vec::new();
            for i in 0..n {
                out.push(region_out(&a.body, i));
            }
            // the scan length: the scan axis of the first scan input
            let first = inputs.get(n).copied().flatten();
            let len = first.and_then(|t| {
                let axis = a.input_axes.first().copied()? + a.batched as usize;
                t.shape.get(axis).copied()
            });
            if m > 0 && len.is_none() {
                return Err(InferError::Invalid(format!("scan input 0 has no axis {}", a.input_axes.first().copied().unwrap_or(0))));
            }
            let batch = if a.batched { first.and_then(|t| t.shape.first().copied()) } else { None };
            for (k, i) in (n..a.body.outputs.len()).enumerate() {
                let (d, s) = region_out(&a.body, i);
                let s = s.and_then(|mut s| {
                    let axis = a.output_axes[k];
                    if axis > s.len() {
                        return None;
                    }
                    s.insert(axis, len?);
                    if let Some(b) = batch {
                        s.insert(0, b);
                    }
                    Some(s)
                });
                out.push((d, s));
            }
            if a.batched {
                for o in out.iter_mut().take(n) {
                    if let (Some(s), Some(b)) = (o.1.as_mut(), batch) {
                        s.insert(0, b);
                    }
                }
            }
            Ok(out)
        }
        _ => Err(InferError::Invalid("not a control-flow op".into())),
    }
}

/// The number of iterations of a Loop when it is known before running: a constant trip count, and a
/// condition that cannot stop it early (absent or constant true, and a body whose condition output is a
/// constant true or the condition input passed through). `inputs` are the Loop's (`M`, `cond`, ...); `Err` says
/// why the count is known only at run time.
pub fn static_trip_count(body: &Graph, inputs: &[Option<TypeInfo>]) -> Result<usize, String> {
    let m = match inputs.first().copied().flatten() {
        None => return Err("it has no trip count M (a while loop)".into()),
        Some(m) => m.value.and_then(|v| v.to_i64_vec().first().copied()).ok_or("its trip count M is known only at run time")?,
    };
    let true_const = |v: &crate::ir::Tensor| v.to_f64_vec().first().is_some_and(|&x| x != 0.0);
    if inputs.get(1).copied().flatten().is_some_and(|c| !c.value.is_some_and(true_const)) {
        return Err("its initial condition is not a constant true".into());
    }
    let mut out = body.outputs.first().copied().ok_or("its body has no condition output")?;
    // through Identity copies (exporters write `cond_out = Identity(cond_in)`)
    while let Some(n) = body.nodes.iter().find(|n| n.outputs.first() == Some(&out) && matches!(n.op, super::Op::Identity)) {
        match n.input(0) {
            Some(i) if i != out => out = i,
            _ => break,
        }
    }
    if Some(out) != body.inputs.get(1).copied() && !body.constant(out).is_some_and(true_const) {
        return Err("its body computes the condition, which may stop it before M iterations".into());
    }
    usize::try_from(m.max(0)).map_err(|_| format!("its trip count {m} does not fit this machine"))
}

/// The rule for [`super::infer`]: every output static, or [`InferError::Dynamic`].
pub fn infer(op: &super::Op, inputs: &[Option<TypeInfo>]) -> Result<Inferred, InferError> {
    let outs = infer_outputs(op, inputs)?;
    outs.into_iter().map(|(d, s)| s.map(|s| (d, s)).ok_or(InferError::Dynamic)).collect()
}

/// Output dtypes when some shape is not static.
pub fn fallback_dtypes(op: &super::Op, n_out: usize) -> Vec<DType> {
    let (g, skip) = match op {
        super::Op::If(a) => (if a.unrunnable[0].is_some() { &*a.else_branch } else { &*a.then_branch }, 0),
        super::Op::Loop(a) => (&*a.body, 1),
        super::Op::Scan(a) => (&*a.body, 0),
        _ => return vec![DType::F32; n_out],
    };
    (0..n_out).map(|i| g.outputs.get(i + skip).map(|&o| g.value(o).dtype).unwrap_or(DType::F32)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::infer::infer_graph;
    use crate::ir::{verify::verify, BinaryOp, Op, Tensor, UnaryOp};
    use crate::runtime::{CpuEval, Session};

    /// A branch taking one captured f32[2] value and applying `op` to it.
    fn branch(name: &str, op: UnaryOp) -> Graph {
        let mut b = Graph::new(name);
        let x = b.add_input("x", DType::F32, vec![2]);
        let y = b.add_value("y", DType::F32, vec![2]);
        b.add_node("u", Op::Unary(op), vec![Some(x)], vec![y]);
        b.outputs.push(y);
        infer_graph(&mut b, &CpuEval).unwrap();
        b
    }

    /// `y = If(c, then: -x, else: |x|)`, with `c` an input or a constant.
    fn if_graph(cond: Option<bool>) -> Graph {
        let mut g = Graph::new("if");
        let c = match cond {
            None => g.add_input("c", DType::Bool, vec![]),
            Some(v) => g.add_constant("c", Tensor::scalar(v)),
        };
        let x = g.add_input("x", DType::F32, vec![2]);
        let y = g.add_value("y", DType::F32, vec![]);
        let attrs = IfAttrs::new(branch("then", UnaryOp::Neg), branch("else", UnaryOp::Abs));
        g.add_node("if", Op::If(attrs), vec![Some(c), Some(x)], vec![y]);
        g.outputs.push(y);
        infer_graph(&mut g, &CpuEval).unwrap();
        g
    }

    #[test]
    fn runs_the_branch_the_condition_picks_and_prints_both() {
        let g = if_graph(None);
        verify(&g).unwrap();
        assert_eq!(g.value(g.outputs[0]).shape, vec![2]);
        let text = g.to_string();
        assert!(text.contains("then 'then' {") && text.contains("else 'else' {") && text.contains("= Abs(%x)"), "{text}");
        let mut s = Session::new(g).unwrap();
        let x = Tensor::from_f32(vec![2], vec![1.5, -2.0]);
        let t = s.run(&[Tensor::scalar(true), x.clone()]).unwrap();
        assert_eq!(t[0].as_f32().unwrap(), &[-1.5, 2.0]);
        let e = s.run(&[Tensor::scalar(false), x]).unwrap();
        assert_eq!(e[0].as_f32().unwrap(), &[1.5, 2.0]);
    }

    #[test]
    fn a_constant_condition_inlines_its_branch() {
        let mut g = if_graph(Some(false));
        assert_eq!(crate::passes::inline_if::run(&mut g).unwrap(), 1);
        verify(&g).unwrap();
        let ops: Vec<String> = g.nodes.iter().map(|n| n.op.name()).collect();
        assert_eq!(ops, ["Abs", "Identity"]);
    }

    #[test]
    fn an_unrunnable_branch_is_an_error_only_when_taken() {
        let then_b = branch("then", UnaryOp::Neg);
        let stub = unrunnable_branch("else", &then_b);
        let mut g = Graph::new("if");
        let c = g.add_input("c", DType::Bool, vec![]);
        let x = g.add_input("x", DType::F32, vec![2]);
        let y = g.add_value("y", DType::F32, vec![]);
        let attrs = IfAttrs { then_branch: Box::new(then_b), else_branch: Box::new(stub), unrunnable: [None, Some("Reshape needs 3 values".into())] };
        g.add_node("if", Op::If(attrs), vec![Some(c), Some(x)], vec![y]);
        g.outputs.push(y);
        infer_graph(&mut g, &CpuEval).unwrap();
        verify(&g).unwrap();
        // the If has the types of the branch that runs
        assert_eq!(g.value(y).shape, vec![2]);
        assert!(g.to_string().contains("else 'else' cannot run with these shapes (an error if taken): Reshape needs 3 values"));
        let mut s = Session::new(g.clone()).unwrap();
        let x = Tensor::from_f32(vec![2], vec![1.5, -2.0]);
        assert_eq!(s.run(&[Tensor::scalar(true), x.clone()]).unwrap()[0].as_f32().unwrap(), &[-1.5, 2.0]);
        let e = s.run(&[Tensor::scalar(false), x.clone()]).unwrap_err().to_string();
        assert!(e.contains("'if'") && e.contains("takes else_branch, which cannot run") && e.contains("Reshape needs 3 values"), "{e}");
        // still usable after the error
        assert_eq!(s.run(&[Tensor::scalar(true), x]).unwrap()[0].as_f32().unwrap(), &[-1.5, 2.0]);
        // a constant condition that takes it: inlining says so
        let c2 = g.add_constant("c2", Tensor::scalar(false));
        g.nodes[0].inputs[0] = Some(c2);
        let e = crate::passes::inline_if::run(&mut g).unwrap_err().to_string();
        assert!(e.contains("takes else_branch, which cannot run"), "{e}");
    }

    #[test]
    fn the_verifier_names_a_branch_with_the_wrong_output_count() {
        let mut g = if_graph(None);
        let Op::If(a) = &mut g.nodes[0].op else { unreachable!() };
        let extra = a.else_branch.outputs[0];
        a.else_branch.outputs.push(extra);
        let e = verify(&g).unwrap_err().to_string();
        assert!(e.contains("'if'") && e.contains("else_branch has 2 outputs but the If node has 1"), "{e}");
    }

    #[test]
    fn a_loop_without_end_stops_at_the_iteration_limit() {
        // body: cond passes through, v -> v + 1
        let mut body = Graph::new("body");
        let _i = body.add_input("i", DType::I64, vec![]);
        let c = body.add_input("c", DType::Bool, vec![]);
        let v = body.add_input("v", DType::F32, vec![]);
        let one = body.add_constant("one", Tensor::scalar(1.0f32));
        let v2 = body.add_value("v2", DType::F32, vec![]);
        body.add_node("inc", Op::Binary(BinaryOp::Add, None), vec![Some(v), Some(one)], vec![v2]);
        body.outputs = vec![c, v2];
        infer_graph(&mut body, &CpuEval).unwrap();
        let mut g = Graph::new("loop");
        let m = g.add_constant("m", Tensor::scalar(1i64 << 62));
        let x = g.add_input("x", DType::F32, vec![]);
        let y = g.add_value("y", DType::F32, vec![]);
        g.add_node("endless", Op::Loop(LoopAttrs { body: Box::new(body), num_carried: 1 }), vec![Some(m), None, Some(x)], vec![y]);
        g.outputs.push(y);
        infer_graph(&mut g, &CpuEval).unwrap();
        let mut s = Session::new(g).unwrap();
        crate::limits::set_max_loop_iterations(Some(5000));
        let e = s.run(&[Tensor::scalar(0.0f32)]).unwrap_err().to_string();
        crate::limits::set_max_loop_iterations(None);
        assert!(e.contains("'endless'") && e.contains("stopped after 5000 iterations"), "{e}");
    }
}
