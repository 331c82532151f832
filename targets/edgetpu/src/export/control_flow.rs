//! Control flow: the IR's `If` → TFLite `IF`, `Loop` → `WHILE`, their regions written as further subgraphs of
//! the file (LiteRT runs them with its builtin kernels on the CPU; the Edge TPU takes neither, which the
//! rules report per op). Every value crossing a subgraph boundary is in the IR layout.
//!
//! - `If(cond, captures...)`: `IF(cond, captures...)`, each branch a subgraph taking the captures.
//! - `Loop(M?, cond?, carried..., captures...)`, body `(i, cond, carried..., captures...) → (cond', carried'...)`:
//!   `WHILE` over the variables `(i, M, cond, carried..., captures...)` (`i` from 0, `M` the int64 maximum when
//!   absent, `cond` true when absent). Its condition subgraph is `i < M && cond`; its body subgraph is the
//!   region followed by `i + 1`, with `M` and the captures passed through.
//! - A Loop with scan outputs: `quant::prepare` unrolls it when its iteration count is known before running
//!   (`quant::unroll` says how, and why); one that cannot unroll (a condition that may stop it early, a trip
//!   count known only at run time, too many nodes) is a WHILE with one more loop variable per scan output, an
//!   accumulator growing by a row per iteration, written after the captures (`loop_rows.rs`).

use tpu_sdk_core::format::tflite::builder::*;
use tpu_sdk_core::format::tflite::schema::{activation as act, builtin_operator as bo, builtin_options};
use tpu_sdk_core::format::tflite::tensor_type_of;
use tpu_sdk_core::ir::ops::control_flow::{IfAttrs, LoopAttrs};
use tpu_sdk_core::ir::{DType, Graph, Node, Op, Tensor, ValueId};
use tpu_sdk_core::quant::unroll::loop_iterations;
use tpu_sdk_core::{Error, Result};

use super::layout::ident;
use super::tensors::i32s;
use super::Ex;

/// Why Loop `n` with `k` scan outputs has no TFLite form: it did not unroll, and a WHILE cannot grow them (a
/// scan output whose slices are known only at run time, or a Loop inside another region).
fn scan_outputs_refusal(g: &Graph, n: &Node, k: usize) -> String {
    let why = loop_iterations(g, n).err().unwrap_or_else(|| "its body's iteration number or condition is not a scalar int64 / bool".into());
    let s = if k == 1 { "" } else { "s" };
    format!(
        "the Loop has {k} scan output{s}, which a TFLite WHILE grows only in the main graph and with slices of a shape known before running; such a Loop exports unrolled when its iteration count is known before running, and this one cannot unroll: {why}; the CPU and cloud-tpu targets run it"
    )
}

/// The refusal of value `v` of `g`, whose shape is dynamic: the Loop's reason when it is a scan output of one.
pub(super) fn dynamic_value(g: &Graph, v: ValueId) -> Error {
    if let Some(n) = g.nodes.iter().find(|n| n.outputs.contains(&v)) {
        if let Op::Loop(a) = &n.op {
            let k = a.body.outputs.len().saturating_sub(1 + a.num_carried);
            if k > 0 {
                let node = if n.name.is_empty() { format!("node writing '{}'", g.value(v).name) } else { format!("node '{}'", n.name) };
                return Error::Unsupported(format!("TFLite export of {node} (Loop): {}", scan_outputs_refusal(g, n, k)));
            }
        }
    }
    Error::Unsupported(format!("TFLite export: value '{}' has a dynamic shape", g.value(v).name))
}

/// What [`Ex::enter`] saves of the enclosing subgraph.
struct Saved<'g> {
    g: &'g Graph,
    cur: usize,
    layouts: std::collections::HashMap<ValueId, (i32, Vec<usize>)>,
    copies: std::collections::HashMap<(ValueId, Vec<usize>), i32>,
}

impl<'g> Ex<'g> {
    /// Starts writing a new subgraph named `name` for the values of region `r`; returns its index and what
    /// [`Ex::leave`] restores.
    fn enter(&mut self, r: &'g Graph, name: &str) -> Result<(i32, Saved<'g>)> {
        if let Some(v) = r.values.iter().find(|v| v.dynamic) {
            return Err(Error::Unsupported(format!("TFLite export: value '{}' of region '{}' has a dynamic shape", v.name, r.name)));
        }
        self.m.subgraphs.push(SubGraphT { name: Some(name.to_string()), ..Default::default() });
        let saved = Saved {
            g: std::mem::replace(&mut self.g, r),
            cur: std::mem::replace(&mut self.cur, self.m.subgraphs.len() - 1),
            layouts: std::mem::take(&mut self.layouts),
            copies: std::mem::take(&mut self.copies),
        };
        Ok((self.cur as i32, saved))
    }

    fn leave(&mut self, s: Saved<'g>) {
        self.g = s.g;
        self.cur = s.cur;
        self.layouts = s.layouts;
        self.copies = s.copies;
    }

    /// A subgraph input tensor holding region value `v` (IR layout).
    fn region_input(&mut self, v: ValueId) -> Result<i32> {
        let t = self.out(v, ident(self.rank(v)))?;
        self.sg().inputs.push(t);
        Ok(t)
    }

    /// Tensor `t` of the current subgraph as a one-element tensor of shape `[]` (a RESHAPE when it has another).
    fn scalar(&mut self, t: i32, name: &str) -> Result<i32> {
        let x = self.sg_ref().tensors[t as usize].clone();
        if x.shape.is_empty() {
            return Ok(t);
        }
        if x.shape.iter().product::<i32>() != 1 {
            return Err(Error::Unsupported(format!("'{}' has shape {:?}; a loop count or condition holds one value", x.name, x.shape)));
        }
        let s = self.tensor_like(name, &[], t)?;
        let shape = self.const_i32(&format!("{name}/shape"), vec![])?;
        self.op(bo::RESHAPE, 1, vec![t, shape], vec![s], Some(OptionsT::reshape(vec![])));
        Ok(s)
    }

    /// The tensor of IR value `v` of the current graph in the IR layout; a node input that must be present.
    fn ir_input(&mut self, n: &Node, k: usize) -> Result<i32> {
        let v = n.input(k).ok_or_else(|| Error::InvalidModel(format!("node '{}' lacks input {k}", n.name)))?;
        self.get(v, &ident(self.rank(v)))
    }

    /// A new (non-constant) tensor of the current subgraph with the type, shape and quantization of `t`.
    fn like(&mut self, t: &TensorT, name: &str) -> i32 {
        let x = TensorT { name: name.to_string(), buffer: 0, ..t.clone() };
        self.sg().tensors.push(x);
        self.sg_ref().tensors.len() as i32 - 1
    }

    /// A copy of tensor `t` of the current subgraph into a new tensor (an `ADD` of zero, a `LOGICAL_OR` with false
    /// for bools: ops that write their own output).
    fn copy_of(&mut self, t: i32, name: &str) -> Result<i32> {
        let x = self.sg_ref().tensors[t as usize].clone();
        let y = self.like(&x, name);
        let zero = match x.type_ {
            ty if ty == tensor_type_of(DType::Bool) => Tensor::scalar(false),
            ty if ty == tensor_type_of(DType::F32) => Tensor::scalar(0f32),
            ty if ty == tensor_type_of(DType::I32) => Tensor::scalar(0i32),
            ty if ty == tensor_type_of(DType::I64) => Tensor::scalar(0i64),
            _ => return Err(self.unsupported(format!("a loop variable '{}' of this type passed on to another", x.name))),
        };
        let z = self.constant_as(&format!("{name}/zero"), &zero, false)?;
        if zero.dtype() == DType::Bool {
            self.op(bo::LOGICAL_OR, 1, vec![t, z], vec![y], None);
        } else {
            let version = if zero.dtype() == DType::I64 { 4 } else { 1 };
            self.op(bo::ADD, version, vec![t, z], vec![y], Some(OptionsT::arithmetic(bo::ADD, 0)));
        }
        Ok(y)
    }

    /// `If` → `IF` with a subgraph per branch.
    pub(super) fn if_op(&mut self, n: &Node, a: &'g IfAttrs) -> Result<()> {
        for (label, why) in ["then_branch", "else_branch"].iter().zip(&a.unrunnable) {
            if let Some(why) = why {
                return Err(self.unsupported(format!("{label} cannot run with the shapes the model was loaded with ({why}); bind the inputs that decide the condition (`--bind NAME=VALUE`) so that the If folds")));
            }
        }
        let c = n.input(0).ok_or_else(|| Error::InvalidModel(format!("node '{}' lacks its condition", n.name)))?;
        if self.g.value(c).dtype != DType::Bool {
            return Err(self.unsupported(format!("the condition is {}; TFLite's IF takes a bool", self.g.value(c).dtype)));
        }
        let ct = self.ir_input(n, 0)?;
        let ct = self.scalar(ct, &format!("{}/cond", n.name))?;
        let mut ins = vec![ct];
        for k in 1..n.inputs.len() {
            ins.push(self.ir_input(n, k)?);
        }
        let mut index = [0i32; 2];
        for (k, (label, r)) in [("then", &a.then_branch), ("else", &a.else_branch)].into_iter().enumerate() {
            let (i, saved) = self.enter(r, &format!("{}/{label}", n.name))?;
            let written = (|| {
                for &v in &r.inputs {
                    self.region_input(v)?;
                }
                self.nodes()?;
                for &o in &r.outputs {
                    let t = self.get(o, &ident(self.rank(o)))?;
                    self.sg().outputs.push(t);
                }
                Ok(())
            })();
            self.leave(saved);
            written?;
            index[k] = i;
        }
        let outs = n.outputs.iter().map(|&o| self.out(o, ident(self.rank(o)))).collect::<Result<Vec<_>>>()?;
        let opts = OptionsT::new(builtin_options::IF).with(0, FieldT::I32(index[0])).with(1, FieldT::I32(index[1]));
        self.op(bo::IF, 1, ins, outs, Some(opts));
        Ok(())
    }

    /// `Loop` → `WHILE` over `(i, M, cond, carried..., captures...)`.
    pub(super) fn loop_op(&mut self, n: &Node, a: &'g LoopAttrs) -> Result<()> {
        let nc = a.num_carried;
        let body = &*a.body;
        // scan outputs: accumulators the WHILE grows (`loop_rows.rs`); they must be the stacked values
        let n_scan = body.outputs.len().saturating_sub(1 + nc);
        if n.outputs.iter().skip(nc).any(|o| self.cur != 0 || !self.rows.contains(o)) {
            return Err(self.unsupported(scan_outputs_refusal(self.g, n, n_scan)));
        }
        let n_caps = n.inputs.len().saturating_sub(2 + nc);
        let name = n.name.clone();
        // the loop variables in the enclosing subgraph
        let i0 = self.constant_as(&format!("{name}/i0"), &Tensor::scalar(0i64), false)?;
        let m0 = match n.input(0) {
            Some(m) if self.g.value(m).constant.is_some() => {
                let v = self.g.value(m).constant.as_ref().expect("constant").to_i64_vec();
                self.constant_as(&format!("{name}/M"), &Tensor::scalar(v.first().copied().unwrap_or(0)), false)?
            }
            Some(_) => {
                let t = self.ir_input(n, 0)?;
                self.scalar(t, &format!("{name}/M"))?
            }
            None => self.constant_as(&format!("{name}/M"), &Tensor::scalar(i64::MAX), false)?,
        };
        let c0 = match n.input(1) {
            Some(_) => {
                let t = self.ir_input(n, 1)?;
                self.scalar(t, &format!("{name}/cond0"))?
            }
            None => self.constant_as(&format!("{name}/cond0"), &Tensor::scalar(true), false)?,
        };
        let mut vars = vec![i0, m0, c0];
        for k in 2..n.inputs.len() {
            vars.push(self.ir_input(n, k)?);
        }
        // each scan output's accumulator starts with one row of zeros that a SLICE drops after the loop (LiteRT's
        // WHILE fails to invoke with a loop variable of 0 rows)
        let mut acc_outs = Vec::with_capacity(n_scan);
        for j in 0..n_scan {
            let o = n.outputs[nc + j];
            let t = self.out(o, ident(self.rank(o)))?;
            let v = self.g.value(o);
            let mut shape = v.shape.clone();
            if let Some(rows) = shape.first_mut() {
                *rows = 1;
            }
            let first = self.constant_as(&format!("{name}/rows{j}/first"), &Tensor::zeros(v.dtype, shape), false)?;
            self.sg().tensors[first as usize].shape_signature = self.sg_ref().tensors[t as usize].shape_signature.clone();
            vars.push(first);
            acc_outs.push(t);
        }
        let var_types: Vec<TensorT> = vars.iter().map(|&t| self.sg_ref().tensors[t as usize].clone()).collect();
        for (k, t) in var_types.iter().enumerate().skip(3).take(nc + n_caps) {
            let want = &body.value(body.inputs[k - 1]).shape;
            if t.shape != i32s(want.iter().copied()) {
                return Err(self.unsupported(format!("loop variable '{}' has shape {:?} but the body takes {want:?}", t.name, t.shape)));
            }
        }

        // the condition: i < M && cond
        let (cond_index, saved) = self.enter(body, &format!("{name}/cond"))?;
        let written = (|| {
            let ins = var_types.iter().enumerate().map(|(k, t)| self.like(t, &format!("{name}/cond/var{k}"))).collect::<Vec<_>>();
            self.sg().inputs = ins.clone();
            let lt = self.tensor(&format!("{name}/cond/i<M"), &[], DType::Bool)?;
            self.op(bo::LESS, 1, vec![ins[0], ins[1]], vec![lt], None);
            let go = self.tensor(&format!("{name}/cond/go"), &[], DType::Bool)?;
            self.op(bo::LOGICAL_AND, 1, vec![lt, ins[2]], vec![go], None);
            self.sg().outputs.push(go);
            Ok::<(), Error>(())
        })();
        self.leave(saved);
        written?;

        // the body: the region, then i + 1; M and the captures pass through
        let (body_index, saved) = self.enter(body, &format!("{name}/body"))?;
        let written = (|| {
            let ti = self.out(body.inputs[0], ident(self.rank(body.inputs[0])))?;
            let tm = self.like(&var_types[1], &format!("{name}/body/M"));
            let tc = self.out(body.inputs[1], ident(self.rank(body.inputs[1])))?;
            let mut ins = vec![ti, tm, tc];
            for &v in &body.inputs[2..] {
                ins.push(self.out(v, ident(self.rank(v)))?);
            }
            let accs: Vec<i32> = (0..n_scan).map(|j| self.like(&var_types[3 + nc + n_caps + j], &format!("{name}/body/rows{j}"))).collect();
            for (k, (&t, want)) in ins.iter().zip(&var_types).enumerate() {
                let got = &self.sg_ref().tensors[t as usize];
                if got.shape != want.shape || got.type_ != want.type_ {
                    return Err(self.unsupported(format!("the body's input {k} has shape {:?} but the loop passes {:?}", got.shape, want.shape)));
                }
            }
            self.sg().inputs = ins.iter().chain(&accs).copied().collect();
            self.nodes()?;
            let c1 = self.get(body.outputs[0], &ident(self.rank(body.outputs[0])))?;
            let c1 = self.scalar(c1, &format!("{name}/body/cond"))?;
            let one = self.constant_as(&format!("{name}/body/one"), &Tensor::scalar(1i64), false)?;
            let i1 = self.tensor(&format!("{name}/body/i+1"), &[], DType::I64)?;
            self.op(bo::ADD, 4, vec![ti, one], vec![i1], Some(OptionsT::arithmetic(bo::ADD, 0)));
            let mut outs = vec![i1, tm, c1];
            for k in 0..nc {
                let o = body.outputs[1 + k];
                outs.push(self.get(o, &ident(self.rank(o)))?);
            }
            outs.extend_from_slice(&ins[3 + nc..]);
            // each scan output's slice, as one more row of its accumulator
            for (j, &acc) in accs.iter().enumerate() {
                let o = body.outputs[1 + nc + j];
                let slice = self.get(o, &ident(self.rank(o)))?;
                let mut row_shape = vec![1];
                row_shape.extend_from_slice(&body.value(o).shape);
                let row = self.tensor_like(&format!("{name}/body/row{j}"), &row_shape, slice)?;
                let shape = self.const_i32(&format!("{name}/body/row{j}/shape"), i32s(row_shape.iter().copied()))?;
                self.op(bo::RESHAPE, 1, vec![slice, shape], vec![row], Some(OptionsT::reshape(i32s(row_shape.iter().copied()))));
                let grown = self.like(&var_types[3 + nc + n_caps + j], &format!("{name}/body/rows{j}+1"));
                self.op(bo::CONCATENATION, 1, vec![acc, row], vec![grown], Some(OptionsT::concatenation(0, act::NONE)));
                outs.push(grown);
            }
            // LiteRT copies the body's outputs into its inputs one by one: an output that is another slot's input
            // (a carried value passed on to another, a swap) would read a slot already overwritten, so it gets a
            // tensor of its own
            for (k, out) in outs.iter_mut().enumerate() {
                if ins.iter().chain(&accs).enumerate().any(|(j, &t)| t == *out && j != k) {
                    *out = self.copy_of(*out, &format!("{name}/body/out{k}"))?;
                }
            }
            self.sg().outputs = outs;
            Ok::<(), Error>(())
        })();
        self.leave(saved);
        written?;

        let mut outs = Vec::with_capacity(vars.len());
        for (k, t) in var_types.iter().enumerate() {
            outs.push(match k.checked_sub(3) {
                Some(j) if j < nc => self.out(n.outputs[j], ident(self.rank(n.outputs[j])))?,
                Some(j) if j >= nc + n_caps => self.like(t, &format!("{name}/rows{}/stacked", j - nc - n_caps)),
                _ => self.like(t, &format!("{name}/var{k}")),
            });
        }
        let stacked: Vec<i32> = outs[3 + nc + n_caps..].to_vec();
        let opts = OptionsT::new(builtin_options::WHILE).with(0, FieldT::I32(cond_index)).with(1, FieldT::I32(body_index));
        self.op(bo::WHILE, 1, vars, outs, Some(opts));
        // the scan outputs: the rows after the first
        for (j, (&all, &o)) in stacked.iter().zip(&acc_outs).enumerate() {
            let shape = self.sg_ref().tensors[o as usize].shape.clone();
            let Some((_, slice_shape)) = shape.split_first() else {
                return Err(self.unsupported(format!("scan output {j} is a scalar; the rows of a scan output have rank 1 or more")));
            };
            let begin: Vec<i32> = std::iter::once(1).chain(slice_shape.iter().map(|_| 0)).collect();
            let size: Vec<i32> = std::iter::once(-1).chain(slice_shape.iter().copied()).collect();
            let begin = self.const_i32(&format!("{name}/rows{j}/begin"), begin)?;
            let size = self.const_i32(&format!("{name}/rows{j}/size"), size)?;
            self.op(bo::SLICE, 1, vec![all, begin, size], vec![o], None);
        }
        Ok(())
    }
}
