//! Control flow: `WHILE` and `IF`, whose bodies are other subgraphs of the file, become the IR's `Loop` and `If`
//! (ops owning regions, see `ir::ops::control_flow`). TensorFlow's converter writes them for Keras recurrent
//! layers it does not fuse (GRU, SimpleRNN, LSTMs with options the fused kernel lacks) and for `tf.cond` /
//! `tf.while_loop`.
//!
//! TFLite subgraphs capture nothing: every value a body reads is one of its inputs, so the regions take exactly
//! the operator's inputs.
//! - `IF(cond, args...)`: both branches take `args` and give the outputs: the IR's `If` with `args` as captures.
//! - `WHILE(vars...)`: `cond(vars) -> bool`, `body(vars) -> vars`. The IR's `Loop` tests its condition *before*
//!   each iteration from a value computed at the end of the previous one, so the condition subgraph is imported
//!   twice: once into the enclosing graph on the initial values (the first test), and once into the loop body
//!   after the body subgraph (the test for the next iteration).

use super::{ImportManyFn, OpIn};
use crate::format::tflite::schema::{self, builtin_operator as bo};
use crate::import::tflite::importer::Importer;
use crate::ir::ops::control_flow::{IfAttrs, LoopAttrs, MAX_REGION_DEPTH};
use crate::ir::{DType, Graph, Op, ValueId};
use crate::{Error, Result};

pub(super) const MULTI_OUTPUT_OPS: &[(i32, ImportManyFn)] = &[(bo::WHILE, while_loop), (bo::IF, if_else)];

impl<'a> Importer<'a> {
    /// Imports subgraph `index` into `g` with its inputs bound to `inputs` (values of `g`); returns the values
    /// of its outputs.
    fn import_subgraph(&self, index: i32, g: &mut Graph, inputs: &[ValueId]) -> Result<Vec<ValueId>> {
        if self.stack.len() >= MAX_REGION_DEPTH {
            return Err(Error::Unsupported(format!("{}: subgraphs nest more than {MAX_REGION_DEPTH} deep", self.ctx())));
        }
        let subgraphs = self.model.subgraphs();
        let at = usize::try_from(index).ok().filter(|&i| i > 0 && i < subgraphs.map_or(0, |s| s.len()));
        let at = at.ok_or_else(|| self.invalid(format!("subgraph index {index} is not a subgraph of this file (other than the main one)")))?;
        if self.stack.contains(&at) {
            return Err(self.invalid(format!("subgraph #{index} calls itself (through {:?}); TFLite control flow cannot recurse", self.stack)));
        }
        let sg = schema::get(subgraphs, at).ok_or_else(|| self.invalid(format!("subgraph #{index} is missing")))?;
        let declared = schema::to_vec(sg.inputs());
        if declared.len() != inputs.len() {
            return Err(self.invalid(format!("subgraph #{index} takes {} inputs, the operator passes {}", declared.len(), inputs.len())));
        }
        let n_tensors = sg.tensors().map(|t| t.len()).unwrap_or(0);
        let mut sub = Importer {
            model: self.model,
            file: self.file,
            sg,
            g: std::mem::replace(g, Graph::new("")),
            vals: vec![None; n_tensors],
            check_shapes: self.check_shapes,
            op_index: 0,
            op_name: String::new(),
            stack: self.stack.iter().copied().chain([at]).collect(),
            keep_float: false,
        };
        let result = (|| {
            for (&t, &v) in declared.iter().zip(inputs) {
                let slot = usize::try_from(t).ok().filter(|&i| i < n_tensors).ok_or_else(|| sub.invalid(format!("subgraph #{index}: input tensor {t}")))?;
                sub.vals[slot] = Some(v);
            }
            let ops = sg.operators();
            for i in 0..ops.map(|o| o.len()).unwrap_or(0) {
                let op = schema::get(ops, i).ok_or_else(|| Error::InvalidModel(format!("subgraph #{index}: operator #{i} is missing")))?;
                sub.import_op(i, op).map_err(|e| match e {
                    Error::Unsupported(m) => Error::Unsupported(format!("subgraph #{index}: {m}")),
                    Error::InvalidModel(m) => Error::InvalidModel(format!("subgraph #{index}: {m}")),
                    e => e,
                })?;
            }
            schema::to_vec(sg.outputs()).into_iter().map(|t| sub.value(t)).collect::<Result<Vec<_>>>()
        })();
        *g = sub.g;
        result
    }

    /// A fresh region graph whose inputs have the types of `like` (values of the current graph).
    fn region(&self, name: &str, like: &[ValueId]) -> Graph {
        let mut r = Graph::new(name);
        for (k, &v) in like.iter().enumerate() {
            let val = self.g.value(v);
            let i = r.add_input(format!("{name}/arg{k}"), val.dtype, val.shape.clone());
            r.value_mut(i).quant = val.quant.clone();
        }
        r
    }
}

/// Marks `outs` as the outputs of region `r`, copying a value that is already an input or an earlier output
/// (a region output must be a value of its own).
fn set_outputs(r: &mut Graph, outs: &[ValueId]) -> Result<()> {
    for (k, &v) in outs.iter().enumerate() {
        let v = if r.inputs.contains(&v) || r.outputs.contains(&v) {
            let val = r.value(v);
            let (dtype, shape, quant) = (val.dtype, val.shape.clone(), val.quant.clone());
            let o = r.add_value(format!("{}/out{k}", r.name), dtype, shape);
            r.value_mut(o).quant = quant;
            r.add_node(format!("{}/out{k}", r.name), Op::Identity, vec![Some(v)], vec![o]);
            o
        } else {
            v
        };
        r.outputs.push(v);
    }
    Ok(())
}

/// WHILE: the IR's Loop without a trip count, its first condition computed on the initial values.
fn while_loop(imp: &mut Importer, o: &OpIn) -> Result<Vec<ValueId>> {
    let opts = opts!(imp, o, schema::WhileOptions);
    let (cond_sg, body_sg) = (opts.cond_subgraph_index(), opts.body_subgraph_index());
    let vars = o.ins.iter().map(|&t| imp.value(t)).collect::<Result<Vec<_>>>()?;
    let base = o.base.clone();

    // the first test, on the initial values, in the enclosing graph
    let mut g = std::mem::replace(&mut imp.g, Graph::new(""));
    let first = imp.import_subgraph(cond_sg, &mut g, &vars);
    imp.g = g;
    let first = single_bool(imp, first?, "the condition subgraph")?;

    // the body: (iteration, condition, vars...) → (condition on the new values, new values...); a loop variable
    // the body gives back in another shape (an accumulator growing by a row per iteration) is known only at run
    // time in the body, which is imported again until the shapes settle
    let mut changing = vec![false; vars.len()];
    let (mut body, next) = loop {
        let mut body = imp.region(&format!("{base}/body"), &[]);
        body.add_input(format!("{base}/body/iteration"), DType::I64, vec![]);
        body.add_input(format!("{base}/body/cond"), DType::Bool, vec![]);
        for (k, &v) in vars.iter().enumerate() {
            let val = imp.g.value(v);
            let (dtype, shape, quant) = (val.dtype, val.shape.clone(), val.quant.clone());
            let i = body.add_input(format!("{base}/body/var{k}"), dtype, shape);
            body.value_mut(i).quant = quant;
            body.value_mut(i).dynamic = changing[k] || val.dynamic;
        }
        let args: Vec<ValueId> = body.inputs[2..].to_vec();
        let next = imp.import_subgraph(body_sg, &mut body, &args)?;
        if next.len() != vars.len() {
            return Err(imp.invalid(format!("the body subgraph gives {} values for {} loop variables", next.len(), vars.len())));
        }
        for (k, (&n, &v)) in next.iter().zip(&vars).enumerate() {
            if body.value(n).dtype != imp.g.value(v).dtype {
                return Err(imp.invalid(format!("loop variable {k} is {} but the body gives back {}", imp.g.value(v).dtype, body.value(n).dtype)));
            }
        }
        let mut changed = false;
        for (k, (&n, &a)) in next.iter().zip(&args).enumerate() {
            let (out, arg) = (body.value(n), body.value(a));
            if !arg.dynamic && (out.dynamic || out.shape != arg.shape) {
                changing[k] = true;
                changed = true;
            }
        }
        if !changed {
            break (body, next);
        }
    };
    let again = imp.import_subgraph(cond_sg, &mut body, &next)?;
    let again = match again[..] {
        [c] if body.value(c).dtype == DType::Bool => c,
        _ => return Err(imp.invalid("the condition subgraph must give one bool")),
    };
    let mut outs = vec![again];
    outs.extend_from_slice(&next);
    set_outputs(&mut body, &outs)?;

    let n = vars.len();
    let mut inputs = vec![None, Some(first)];
    inputs.extend(vars.iter().map(|&v| Some(v)));
    imp.node_n(Op::Loop(LoopAttrs { body: Box::new(body), num_carried: n }), inputs, base, n)
}

/// IF: the IR's If with the operator's inputs after the condition as captures of both branches.
fn if_else(imp: &mut Importer, o: &OpIn) -> Result<Vec<ValueId>> {
    let opts = opts!(imp, o, schema::IfOptions);
    let cond = imp.value(imp.req(o, 0)?)?;
    if imp.dtype(cond) != DType::Bool {
        return Err(imp.invalid(format!("the condition is {}, not bool", imp.dtype(cond))));
    }
    let args = o.ins[1..].iter().map(|&t| imp.value(t)).collect::<Result<Vec<_>>>()?;
    let base = o.base.clone();
    let mut branches = Vec::new();
    for (what, index) in [("then", opts.then_subgraph_index()), ("else", opts.else_subgraph_index())] {
        let mut r = imp.region(&format!("{base}/{what}"), &args);
        let ins = r.inputs.clone();
        let outs = imp.import_subgraph(index, &mut r, &ins)?;
        if outs.len() != o.outs.len() {
            return Err(imp.invalid(format!("the {what} subgraph gives {} values, the operator has {} outputs", outs.len(), o.outs.len())));
        }
        set_outputs(&mut r, &outs)?;
        branches.push(r);
    }
    let else_branch = branches.pop().expect("two branches");
    let then_branch = branches.pop().expect("two branches");
    let mut inputs = vec![Some(cond)];
    inputs.extend(args.iter().map(|&v| Some(v)));
    imp.node_n(Op::If(IfAttrs::new(then_branch, else_branch)), inputs, base, o.outs.len())
}

/// The one bool a condition subgraph gives.
fn single_bool(imp: &Importer, outs: Vec<ValueId>, what: &str) -> Result<ValueId> {
    match outs[..] {
        [c] if imp.g.value(c).dtype == DType::Bool => Ok(c),
        _ => Err(imp.invalid(format!("{what} must give one bool"))),
    }
}
