//! Execution of the control-flow ops (`If`, `Loop`, `Scan`): each region runs in a nested [`Session`],
//! planned once when the outer session is planned, so a Loop body's buffers are reused across iterations
//! (the carried state lives in two sets of tensors swapped after each iteration; scan outputs grow in place).
//!
//! Limits: regions nest at most [`MAX_REGION_DEPTH`] deep, and one Loop/Scan run stops with an error after
//! [`limits::max_loop_iterations`] iterations (a trip count of 2^62 without a condition that ends it does not
//! hang). Accumulated scan outputs are checked against the memory budget as they grow.

use super::Session;
use crate::ir::ops::control_flow::{IfAttrs, LoopAttrs, ScanAttrs, MAX_REGION_DEPTH};
use crate::ir::ops::control_flow::{check_signature, regions};
use crate::ir::{DType, Element, Op, Tensor, TensorData};
use crate::{limits, with_data};

/// The prepared regions of one control-flow node, and the tensors its iterations reuse.
pub(crate) struct Regions {
    sessions: Vec<Session>,
    /// Carried state / scan state (current values).
    state: Vec<Tensor>,
    /// Outputs of the body (next state, condition, scan slices).
    outs: Vec<Tensor>,
    /// Slices of the scan inputs for one iteration.
    slices: Vec<Tensor>,
    /// The iteration number and condition fed to a Loop body.
    iter: Tensor,
    cond: Tensor,
}

impl Regions {
    /// Plans a session per region of `op` (`None` for ops without regions); `depth` is the nesting depth of the
    /// graph holding `op`.
    pub(crate) fn prepare(op: &Op, depth: usize) -> crate::Result<Option<Box<Regions>>> {
        let rs = regions(op);
        if rs.is_empty() {
            return Ok(None);
        }
        if depth + 1 > MAX_REGION_DEPTH {
            return Err(crate::Error::InvalidModel(format!(
                "control flow is nested more than {MAX_REGION_DEPTH} deep (If/Loop/Scan bodies inside each other)"
            )));
        }
        let sessions = rs
            .into_iter()
            .map(|g| Session::new_at(g.clone(), depth + 1).map_err(|e| in_region(e, &g.name)))
            .collect::<crate::Result<Vec<_>>>()?;
        Ok(Some(Box::new(Regions {
            sessions,
            state: Vec::new(),
            outs: Vec::new(),
            slices: Vec::new(),
            iter: Tensor::scalar(0i64),
            cond: Tensor::scalar(true),
        })))
    }

    /// Runs the node.
    pub(crate) fn run(&mut self, op: &Op, inputs: &[Option<&Tensor>], outputs: &mut [Tensor]) -> Result<(), String> {
        // a graph that skipped the verifier (constant folding) must not index past the regions' signatures
        check_signature(op, inputs.len(), outputs.len())?;
        match op {
            Op::If(a) => {
                let cond = truth(inputs.first().copied().flatten(), "the condition")?;
                if let (_, Some(why)) = a.branch(cond) {
                    return Err(IfAttrs::unrunnable_error(cond, why));
                }
                let caps = present(&inputs[1..], "captured value")?;
                let (k, name) = if cond { (0, "then_branch") } else { (1, "else_branch") };
                self.sessions[k].run_into(&caps, outputs).map_err(|e| format!("in {name}: {e}"))
            }
            Op::Loop(a) => self.run_loop(a, inputs, outputs),
            Op::Scan(a) if a.batched => self.run_scan_batched(a, inputs, outputs),
            Op::Scan(a) => self.run_scan(a, inputs, outputs),
            other => Err(format!("{} has no regions", other.name())),
        }
    }

    fn run_loop(&mut self, a: &LoopAttrs, inputs: &[Option<&Tensor>], outputs: &mut [Tensor]) -> Result<(), String> {
        let n = a.num_carried;
        let trips = match inputs.first().copied().flatten() {
            Some(t) if t.len() == 1 && matches!(t.dtype(), DType::I64 | DType::I32) => Some(t.to_i64_vec()[0].max(0) as u64),
            Some(t) => return Err(format!("the trip count must be one int64, it is {}{:?}", t.dtype(), t.shape)),
            None => None,
        };
        let mut cond = match inputs.get(1).copied().flatten() {
            Some(c) => truth(Some(c), "the condition")?,
            None => true,
        };
        let init = present(inputs.get(2..2 + n).ok_or("missing carried values")?, "carried value")?;
        let caps = present(&inputs[2 + n..], "captured value")?;
        let body_outs = a.body.outputs.len();
        let k = body_outs - 1 - n;
        let Regions { sessions, state, outs, iter, cond: cond_t, .. } = self;
        state.resize_with(n, Tensor::default);
        for (s, t) in state.iter_mut().zip(&init) {
            s.assign(t);
        }
        outs.resize_with(body_outs, Tensor::default);
        // scan outputs are stacked straight into the node's outputs
        let mut scan_slice: Vec<Option<Vec<usize>>> = vec![None; k];
        for o in outputs[n..].iter_mut() {
            o.reset_dtype(DType::F32, &[0]);
        }
        let max = limits::max_loop_iterations();
        let mut it: u64 = 0;
        while cond && trips.is_none_or(|m| it < m) {
            if it >= max {
                return Err(limits::loop_limit_message(it));
            }
            iter.reset::<i64>(&[])[0] = it as i64;
            cond_t.reset::<bool>(&[])[0] = cond;
            let mut ins: Vec<&Tensor> = Vec::with_capacity(2 + n + caps.len());
            ins.push(iter);
            ins.push(cond_t);
            ins.extend(state.iter());
            ins.extend(caps.iter().copied());
            sessions[0].run_into(&ins, outs).map_err(|e| format!("in the body (iteration {it}): {e}"))?;
            drop(ins);
            cond = truth(Some(&outs[0]), "the body's condition output")?;
            for i in 0..n {
                std::mem::swap(&mut state[i], &mut outs[1 + i]);
            }
            for j in 0..k {
                let slice = &outs[1 + n + j];
                append_slice(&mut outputs[n + j], slice, &mut scan_slice[j], it == 0, j)?;
            }
            it += 1;
        }
        for i in 0..n {
            outputs[i].assign(&state[i]);
        }
        for j in 0..k {
            if it == 0 {
                // no iteration: an empty stack of the body's declared slice type
                let v = a.body.value(a.body.outputs[1 + n + j]);
                let mut shape = vec![0];
                if !v.dynamic {
                    shape.extend_from_slice(&v.shape);
                }
                outputs[n + j].reset_dtype(v.dtype, &shape);
            }
        }
        Ok(())
    }

    fn run_scan(&mut self, a: &ScanAttrs, inputs: &[Option<&Tensor>], outputs: &mut [Tensor]) -> Result<(), String> {
        let all = present(inputs, "input")?;
        self.scan_once(a, &all, outputs)
    }

    /// Opset 8 Scan: every input and output has a leading batch axis; one scan per batch entry.
    fn run_scan_batched(&mut self, a: &ScanAttrs, inputs: &[Option<&Tensor>], outputs: &mut [Tensor]) -> Result<(), String> {
        let all = present(inputs, "input")?;
        let (n, m) = (a.num_state, a.num_scan_inputs);
        let batch = all.first().and_then(|t| t.shape.first().copied()).ok_or("inputs need a batch axis")?;
        let mut per: Vec<Vec<Tensor>> = vec![Vec::new(); outputs.len()];
        for b in 0..batch {
            let mut entry: Vec<Tensor> = Vec::with_capacity(all.len());
            for (i, t) in all.iter().enumerate() {
                if i < n + m {
                    if t.shape.first() != Some(&batch) {
                        return Err(format!("input {i} has shape {:?}, its batch axis must be {batch}", t.shape));
                    }
                    let mut e = t.slice_axis0(b, b + 1);
                    e.shape.remove(0);
                    entry.push(e);
                } else {
                    entry.push((*t).clone());
                }
            }
            let refs: Vec<&Tensor> = entry.iter().collect();
            let mut outs = vec![Tensor::default(); outputs.len()];
            self.scan_once(a, &refs, &mut outs)?;
            for (p, o) in per.iter_mut().zip(outs) {
                p.push(o);
            }
        }
        for (o, parts) in outputs.iter_mut().zip(per) {
            let mut slice = None;
            o.reset_dtype(DType::F32, &[0]);
            for (i, p) in parts.iter().enumerate() {
                append_slice(o, p, &mut slice, i == 0, 0)?;
            }
        }
        Ok(())
    }

    /// One Scan over `inputs` (state, scan inputs, captures), opset 9 semantics.
    fn scan_once(&mut self, a: &ScanAttrs, inputs: &[&Tensor], outputs: &mut [Tensor]) -> Result<(), String> {
        let (n, m) = (a.num_state, a.num_scan_inputs);
        let caps = &inputs[n + m..];
        let k = outputs.len() - n;
        let mut len = None;
        for (j, t) in inputs[n..n + m].iter().enumerate() {
            let axis = a.input_axes[j];
            let l = *t.shape.get(axis).ok_or_else(|| format!("scan input {j} has shape {:?}, no axis {axis}", t.shape))?;
            match len {
                None => len = Some(l),
                Some(prev) if prev != l => return Err(format!("scan inputs have different lengths ({prev} and {l})")),
                _ => {}
            }
        }
        let len = len.unwrap_or(0);
        if len as u64 > limits::max_loop_iterations() {
            return Err(limits::loop_limit_message(limits::max_loop_iterations()));
        }
        let Regions { sessions, state, outs, slices, .. } = self;
        state.resize_with(n, Tensor::default);
        for (s, t) in state.iter_mut().zip(&inputs[..n]) {
            s.assign(t);
        }
        outs.resize_with(n + k, Tensor::default);
        slices.resize_with(m, Tensor::default);
        let mut stacked: Vec<Tensor> = vec![Tensor::default(); k];
        let mut scan_slice: Vec<Option<Vec<usize>>> = vec![None; k];
        for t in 0..len {
            for j in 0..m {
                let idx = if a.input_reverse[j] { len - 1 - t } else { t };
                take_slice(inputs[n + j], a.input_axes[j], idx, &mut slices[j]);
            }
            let mut ins: Vec<&Tensor> = Vec::with_capacity(inputs.len());
            ins.extend(state.iter());
            ins.extend(slices.iter());
            ins.extend(caps.iter().copied());
            sessions[0].run_into(&ins, outs).map_err(|e| format!("in the body (iteration {t}): {e}"))?;
            drop(ins);
            for i in 0..n {
                std::mem::swap(&mut state[i], &mut outs[i]);
            }
            for j in 0..k {
                append_slice(&mut stacked[j], &outs[n + j], &mut scan_slice[j], t == 0, j)?;
            }
        }
        for i in 0..n {
            outputs[i].assign(&state[i]);
        }
        for j in 0..k {
            let mut s = std::mem::take(&mut stacked[j]);
            if len == 0 {
                let v = a.body.value(a.body.outputs[n + j]);
                let mut shape = vec![0];
                shape.extend_from_slice(&v.shape);
                s.reset_dtype(v.dtype, &shape);
            }
            if a.output_reverse[j] {
                s = reverse_axis0(&s);
            }
            let axis = a.output_axes[j];
            if axis != 0 {
                let r = s.shape.len();
                if axis >= r {
                    return Err(format!("scan output {j} axis {axis} is out of range for rank {r}"));
                }
                // the stacked axis 0 moves to `axis`
                let mut perm: Vec<usize> = (1..r).collect();
                perm.insert(axis, 0);
                s = s.permuted(&perm);
            }
            outputs[n + j] = s;
        }
        Ok(())
    }
}

/// `e` with the region it comes from named (the caller adds the node).
pub(crate) fn in_region(e: crate::Error, region: &str) -> crate::Error {
    use crate::Error;
    match e {
        Error::ResourceLimit(m) => Error::ResourceLimit(format!("in region '{region}': {m}")),
        Error::InvalidModel(m) => Error::InvalidModel(format!("in region '{region}': {m}")),
        Error::Unsupported(m) => Error::Unsupported(format!("in region '{region}': {m}")),
        Error::Node { node, op, msg } => Error::Node { node, op, msg: format!("{msg} (in region '{region}')") },
        other => other,
    }
}

/// Runs a control-flow node once with freshly planned regions (constant folding).
pub(crate) fn eval(op: &Op, inputs: &[Option<&Tensor>], outputs: &mut [Tensor]) -> Result<(), String> {
    let mut r = Regions::prepare(op, 0).map_err(|e| e.to_string())?.ok_or_else(|| format!("{} has no regions", op.name()))?;
    r.run(op, inputs, outputs)
}

/// The inputs, all present.
fn present<'a>(inputs: &[Option<&'a Tensor>], what: &str) -> Result<Vec<&'a Tensor>, String> {
    inputs.iter().enumerate().map(|(i, t)| t.ok_or_else(|| format!("{what} {i} is absent"))).collect()
}

/// The value of a one-element condition.
fn truth(t: Option<&Tensor>, what: &str) -> Result<bool, String> {
    let t = t.ok_or_else(|| format!("{what} is absent"))?;
    if t.len() != 1 {
        return Err(format!("{what} must hold one element, it has shape {:?}", t.shape));
    }
    Ok(t.to_f64_vec()[0] != 0.0)
}

/// Appends `slice` as the next entry of the stack `dst` (axis 0); every slice must have the first one's shape.
fn append_slice(dst: &mut Tensor, slice: &Tensor, shape: &mut Option<Vec<usize>>, first: bool, j: usize) -> Result<(), String> {
    if first {
        *shape = Some(slice.shape.clone());
        let mut s = vec![0];
        s.extend_from_slice(&slice.shape);
        dst.reset_dtype(slice.dtype(), &s);
    } else if shape.as_deref() != Some(&slice.shape[..]) || dst.dtype() != slice.dtype() {
        return Err(format!(
            "scan output {j} changes shape between iterations ({:?} then {}{:?}); scan outputs are stacked and must keep one shape",
            shape.as_deref().unwrap_or(&[]),
            slice.dtype(),
            slice.shape
        ));
    }
    let mut s = dst.shape.clone();
    s[0] += 1;
    limits::check_tensor(&format!("scan output {j}"), slice.dtype(), &s).map_err(|e| e.to_string())?;
    fn ext<T: Element>(dst: &mut TensorData, v: &[T]) {
        if let Some(d) = T::vec_mut(dst) {
            d.extend_from_slice(v);
        }
    }
    with_data!(&slice.data, v => ext(&mut dst.data, v));
    dst.shape = s;
    Ok(())
}

/// Writes index `idx` of `axis` of `src` into `dst` (that axis removed), reusing `dst`'s storage.
fn take_slice(src: &Tensor, axis: usize, idx: usize, dst: &mut Tensor) {
    let outer: usize = src.shape[..axis].iter().product();
    let l = src.shape[axis];
    let inner: usize = src.shape[axis + 1..].iter().product();
    let mut shape = src.shape.clone();
    shape.remove(axis);
    fn go<T: Element>(v: &[T], dst: &mut Tensor, shape: &[usize], outer: usize, l: usize, inner: usize, idx: usize) {
        let d = dst.reset::<T>(shape);
        for o in 0..outer {
            let s = (o * l + idx) * inner;
            d[o * inner..(o + 1) * inner].copy_from_slice(&v[s..s + inner]);
        }
    }
    with_data!(&src.data, v => go(v, dst, &shape, outer, l, inner, idx));
}

/// The tensor with the order of its axis-0 entries reversed.
fn reverse_axis0(t: &Tensor) -> Tensor {
    let l = t.shape.first().copied().unwrap_or(0);
    let mut out = t.clone();
    if l == 0 {
        return out;
    }
    let inner = t.len() / l;
    fn go<T: Element>(v: &[T], out: &mut Tensor, l: usize, inner: usize) {
        let shape = out.shape.clone();
        let d = out.reset::<T>(&shape);
        for i in 0..l {
            d[i * inner..(i + 1) * inner].copy_from_slice(&v[(l - 1 - i) * inner..(l - i) * inner]);
        }
    }
    with_data!(&t.data, v => go(v, &mut out, l, inner));
    out
}
