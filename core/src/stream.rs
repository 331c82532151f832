//! Stateful streaming: a model run call after call with some outputs fed back as inputs of the next call.
//!
//! Voice-activity detectors, keyword spotters and recurrent models exported for streaming take their recurrent
//! state as inputs and return the next state as outputs (silero-vad: `state` → `stateN`). A [`Stream`] keeps that
//! state between calls, on any target ([`Executable`]), so a caller feeds only the new data: one chunk of audio
//! per [`Stream::step`]. [`chunks`] cuts a long signal into the pieces a model takes.

use crate::ir::{Graph, Tensor, TensorData};
use crate::target::Executable;
use crate::{Error, Result};

/// Output `output` of one call becomes input `input` of the next (graph output / input positions).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StateLink {
    /// Position among the graph's outputs.
    pub output: usize,
    /// Position among the graph's inputs.
    pub input: usize,
}

/// Resolves `OUTPUT=INPUT` name pairs against `graph`: both must exist, agree in dtype and shape, and no input may
/// be fed twice. Errors are [`Error::InputMismatch`] naming what is wrong.
pub fn state_links(graph: &Graph, pairs: &[(String, String)]) -> Result<Vec<StateLink>> {
    let names = |ids: &[crate::ir::ValueId]| ids.iter().map(|&v| graph.value(v).name.clone()).collect::<Vec<_>>();
    let (outs, ins) = (names(&graph.outputs), names(&graph.inputs));
    let mut links: Vec<StateLink> = Vec::new();
    for (o, i) in pairs {
        let output = outs.iter().position(|n| n == o).ok_or_else(|| {
            Error::InputMismatch(format!("state: the model has no output '{o}' (outputs: {})", outs.join(", ")))
        })?;
        let input = ins.iter().position(|n| n == i).ok_or_else(|| {
            Error::InputMismatch(format!("state: the model has no input '{i}' (inputs: {})", ins.join(", ")))
        })?;
        let (ov, iv) = (graph.value(graph.outputs[output]), graph.value(graph.inputs[input]));
        if ov.dtype != iv.dtype || (!ov.dynamic && ov.shape != iv.shape) {
            return Err(Error::InputMismatch(format!(
                "state: output '{o}' is {}{:?} but input '{i}' is {}{:?}; a state output must have its input's dtype and shape",
                ov.dtype, ov.shape, iv.dtype, iv.shape
            )));
        }
        if links.iter().any(|l| l.input == input) {
            return Err(Error::InputMismatch(format!("state: input '{i}' is fed by two outputs")));
        }
        links.push(StateLink { output, input });
    }
    Ok(links)
}

/// The first state of each link: `initial[k]` when given (checked against the input), else zeros of the input's
/// declared shape.
pub fn initial_state(graph: &Graph, links: &[StateLink], initial: Vec<Option<Tensor>>) -> Result<Vec<Tensor>> {
    if initial.len() != links.len() {
        return Err(Error::InputMismatch(format!("{} initial states for {} state links", initial.len(), links.len())));
    }
    let mut first = Vec::with_capacity(links.len());
    for (l, init) in links.iter().zip(initial) {
        let v = graph.value(graph.inputs[l.input]);
        first.push(match init {
            Some(t) if t.dtype() != v.dtype || (!v.dynamic && t.shape != v.shape) => {
                return Err(Error::InputMismatch(format!(
                    "initial state for input '{}' is {}{:?}; the model takes {}{:?}",
                    v.name,
                    t.dtype(),
                    t.shape,
                    v.dtype,
                    v.shape
                )))
            }
            Some(t) => t,
            None if v.dynamic => {
                return Err(Error::InputMismatch(format!(
                    "state input '{}' has no fixed shape: give its initial value",
                    v.name
                )))
            }
            None => {
                crate::limits::check_tensor(&format!("state input '{}'", v.name), v.dtype, &v.shape)?;
                Tensor::zeros(v.dtype, v.shape.clone())
            }
        });
    }
    Ok(first)
}

/// A model run step by step with its state carried between steps.
pub struct Stream<E> {
    exe: E,
    links: Vec<StateLink>,
    /// Graph input count: the state inputs are spliced into the caller's inputs at their positions.
    n_inputs: usize,
    initial: Vec<Tensor>,
    state: Vec<Tensor>,
    steps: u64,
}

impl<E: Executable> Stream<E> {
    /// Wraps `exe`, which runs a graph of `n_inputs` inputs, starting from `first` (see [`initial_state`]).
    pub fn from_parts(exe: E, n_inputs: usize, links: Vec<StateLink>, first: Vec<Tensor>) -> Self {
        Stream { exe, links, n_inputs, state: first.clone(), initial: first, steps: 0 }
    }

    /// Wraps `exe` (built from `graph`). `initial[k]` is the state fed to `links[k].input` on the first step; `None`
    /// means zeros of the input's declared shape.
    pub fn new(exe: E, graph: &Graph, links: Vec<StateLink>, initial: Vec<Option<Tensor>>) -> Result<Self> {
        let first = initial_state(graph, &links, initial)?;
        Ok(Stream::from_parts(exe, graph.inputs.len(), links, first))
    }

    /// Which graph inputs the caller gives to [`Stream::step`], in order (every input that is not state).
    pub fn fed_inputs(&self) -> Vec<usize> {
        (0..self.n_inputs).filter(|i| !self.links.iter().any(|l| l.input == *i)).collect()
    }

    /// Runs once on `inputs` (the non-state inputs, in graph order) plus the carried state, keeps the new state
    /// and returns every output.
    pub fn step(&mut self, inputs: &[Tensor]) -> Result<Vec<Tensor>> {
        let fed = self.fed_inputs();
        if inputs.len() != fed.len() {
            return Err(Error::InputMismatch(format!(
                "a stream step takes {} inputs (the model's {} less {} state inputs), got {}",
                fed.len(),
                self.n_inputs,
                self.links.len(),
                inputs.len()
            )));
        }
        let mut all: Vec<Tensor> = Vec::with_capacity(self.n_inputs);
        let mut given = inputs.iter();
        for i in 0..self.n_inputs {
            match self.links.iter().position(|l| l.input == i) {
                Some(k) => all.push(std::mem::replace(&mut self.state[k], Tensor::scalar(0u8))),
                None => all.push(given.next().expect("counted above").clone()),
            }
        }
        let result = self.exe.run(&all);
        // the state goes back whether or not the run worked, so a failed step leaves the stream as it was
        for (k, l) in self.links.iter().enumerate() {
            self.state[k] = std::mem::replace(&mut all[l.input], Tensor::scalar(0u8));
        }
        let outputs = result?;
        for (k, l) in self.links.iter().enumerate() {
            let t = outputs.get(l.output).ok_or_else(|| Error::InvalidModel(format!("the model returned no output {}", l.output)))?;
            if t.dtype() != self.state[k].dtype() || t.shape != self.state[k].shape {
                return Err(Error::InvalidModel(format!(
                    "state output {} came back as {}{:?}, the state is {}{:?}",
                    l.output,
                    t.dtype(),
                    t.shape,
                    self.state[k].dtype(),
                    self.state[k].shape
                )));
            }
        }
        for (k, l) in self.links.iter().enumerate() {
            self.state[k].assign(&outputs[l.output]);
        }
        self.steps += 1;
        Ok(outputs)
    }

    /// The state the next step will be fed, one tensor per link.
    pub fn state(&self) -> &[Tensor] {
        &self.state
    }

    /// Steps run since creation or the last [`Stream::reset`].
    pub fn steps(&self) -> u64 {
        self.steps
    }

    /// Starts over from the initial state (a new utterance, a new file).
    pub fn reset(&mut self) {
        self.state.clone_from(&self.initial);
        self.steps = 0;
    }

    /// The wrapped model.
    pub fn into_inner(self) -> E {
        self.exe
    }
}

/// Pieces of `n` values along the last axis of `t`, in order, each preceded by the `context` values before it
/// (zeros before the start: streaming models such as silero-vad look back a few samples); the last piece is padded
/// with zeros to `n`. Every piece has `context + n` values. Returns the pieces and how many padding values the last
/// one got.
pub fn chunks(t: &Tensor, n: usize, context: usize) -> Result<(Chunks<'_>, usize)> {
    let len = *t.shape.last().ok_or_else(|| Error::InputMismatch("cannot cut a scalar into chunks".into()))?;
    if n == 0 {
        return Err(Error::InputMismatch("the chunk size must be at least 1".into()));
    }
    if len == 0 {
        return Err(Error::InputMismatch("the input to cut into chunks is empty".into()));
    }
    let count = len.div_ceil(n);
    Ok((Chunks { t, n, context, len, next: 0, count }, count * n - len))
}

/// Iterator returned by [`chunks`]: one tensor per piece, made when asked for.
pub struct Chunks<'a> {
    t: &'a Tensor,
    n: usize,
    context: usize,
    len: usize,
    next: usize,
    count: usize,
}

impl Iterator for Chunks<'_> {
    type Item = Tensor;

    fn next(&mut self) -> Option<Tensor> {
        if self.next == self.count {
            return None;
        }
        let (c, len) = (self.context, self.len);
        let width = c + self.n;
        // the piece covers [start - c, start + n) of each row; what lies outside the row is zero
        let start = self.next * self.n;
        self.next += 1;
        let rows = self.t.len() / len;
        let mut shape = self.t.shape.clone();
        *shape.last_mut().expect("checked in chunks()") = width;
        let (lead, from, to) = (c.saturating_sub(start), start.saturating_sub(c), (start + self.n).min(len));
        let data = crate::map_data!(&self.t.data, v => {
            let mut out = Vec::with_capacity(rows * width);
            for r in 0..rows {
                let row = &v[r * len..(r + 1) * len];
                out.resize(r * width + lead, Default::default());
                out.extend_from_slice(&row[from..to]);
                out.resize((r + 1) * width, Default::default());
            }
            out
        });
        Some(Tensor { shape, data })
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = self.count - self.next;
        (left, Some(left))
    }
}

impl ExactSizeIterator for Chunks<'_> {}

/// The outputs of successive steps as one tensor with a new leading axis (`[steps, ...]`). Every step must have
/// the same dtype and shape; the result is checked against the memory budget before it is made.
pub fn stack(steps: &[Tensor]) -> Result<Tensor> {
    let first = steps.first().ok_or_else(|| Error::InputMismatch("nothing to stack: no steps ran".into()))?;
    if let Some((k, t)) = steps.iter().enumerate().find(|(_, t)| t.dtype() != first.dtype() || t.shape != first.shape) {
        return Err(Error::InputMismatch(format!(
            "step {k} gave {}{:?} where step 0 gave {}{:?}: outputs that change shape between steps cannot be stacked",
            t.dtype(),
            t.shape,
            first.dtype(),
            first.shape
        )));
    }
    let mut shape = vec![steps.len()];
    shape.extend_from_slice(&first.shape);
    crate::limits::check_tensor("stacked stream outputs", first.dtype(), &shape)?;
    let mut data = first.data.clone();
    macro_rules! append {
        ($($v:ident),*) => {
            for t in &steps[1..] {
                match (&mut data, &t.data) {
                    $((TensorData::$v(out), TensorData::$v(more)) => out.extend_from_slice(more),)*
                    _ => unreachable!("dtypes checked above"),
                }
            }
        };
    }
    append!(F32, F64, F16, BF16, I8, U8, I16, I32, I64, Bool);
    Ok(Tensor { shape, data })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::DType;
    use crate::runtime::Session;

    /// y = x + s, s' = s + sum(x): the state output feeds input `s` (graph built by hand).
    fn accumulator() -> Graph {
        use crate::ir::builder::GraphBuilder;
        use crate::ir::ops::{Op, ReduceOp};
        let mut b = GraphBuilder::new("accumulator");
        let x = b.input("x", DType::F32, &[1, 3]);
        let s = b.input("s", DType::F32, &[1, 1]);
        let y = b.add(x, s).unwrap();
        let total = b.op(Op::Reduce { op: ReduceOp::Sum, axes: Some(vec![1]), keepdims: true, noop_with_empty_axes: false }, &[x]).unwrap();
        let s2 = b.add(s, total).unwrap();
        b.output(y);
        b.output(s2);
        let mut g = b.finish().unwrap();
        g.value_mut(y).name = "y".into();
        g.value_mut(s2).name = "s_next".into();
        g
    }

    #[test]
    fn the_state_output_feeds_the_next_step_and_reset_starts_over() {
        let g = accumulator();
        let links = state_links(&g, &[("s_next".into(), "s".into())]).unwrap();
        assert_eq!(links, vec![StateLink { output: 1, input: 1 }]);
        let mut s = Stream::new(Session::new(g.clone()).unwrap(), &g, links, vec![None]).unwrap();
        assert_eq!(s.fed_inputs(), vec![0]);
        let x = Tensor::from_f32(vec![1, 3], vec![1.0, 2.0, 3.0]);
        let y1 = s.step(std::slice::from_ref(&x)).unwrap();
        assert_eq!(y1[0].as_f32().unwrap(), &[1.0, 2.0, 3.0]);
        let y2 = s.step(std::slice::from_ref(&x)).unwrap();
        assert_eq!(y2[0].as_f32().unwrap(), &[7.0, 8.0, 9.0]);
        assert_eq!(s.state()[0].as_f32().unwrap(), &[12.0]);
        assert_eq!(s.steps(), 2);
        s.reset();
        assert_eq!(s.step(&[x]).unwrap()[0].as_f32().unwrap(), &[1.0, 2.0, 3.0]);
    }

    #[test]
    fn wrong_names_shapes_and_counts_are_clear_errors() {
        let g = accumulator();
        let e = state_links(&g, &[("nope".into(), "s".into())]).unwrap_err().to_string();
        assert!(e.contains("no output 'nope'") && e.contains("s_next"), "{e}");
        let e = state_links(&g, &[("s_next".into(), "zz".into())]).unwrap_err().to_string();
        assert!(e.contains("no input 'zz'"), "{e}");
        let e = state_links(&g, &[("y".into(), "s".into())]).unwrap_err().to_string();
        assert!(e.contains("dtype and shape"), "{e}");
        let links = state_links(&g, &[("s_next".into(), "s".into())]).unwrap();
        let bad = Some(Tensor::zeros(DType::F32, vec![2]));
        let e = Stream::new(Session::new(g.clone()).unwrap(), &g, links.clone(), vec![bad]).err().unwrap().to_string();
        assert!(e.contains("initial state for input 's'"), "{e}");
        let mut s = Stream::new(Session::new(g.clone()).unwrap(), &g, links, vec![None]).unwrap();
        let e = s.step(&[]).unwrap_err().to_string();
        assert!(e.contains("takes 1 inputs"), "{e}");
        // a failed step (wrong input shape) keeps the state usable
        assert!(s.step(&[Tensor::zeros(DType::F32, vec![1, 4])]).is_err());
        assert_eq!(s.step(&[Tensor::from_f32(vec![1, 3], vec![1.0; 3])]).unwrap()[1].as_f32().unwrap(), &[3.0]);
    }

    #[test]
    fn stack_adds_a_leading_step_axis_and_refuses_shape_changes() {
        let a = Tensor::from_f32(vec![1, 2], vec![1.0, 2.0]);
        let b = Tensor::from_f32(vec![1, 2], vec![3.0, 4.0]);
        let s = stack(&[a.clone(), b]).unwrap();
        assert_eq!(s.shape, vec![2, 1, 2]);
        assert_eq!(s.as_f32().unwrap(), &[1.0, 2.0, 3.0, 4.0]);
        let e = stack(&[a, Tensor::from_f32(vec![2], vec![0.0; 2])]).unwrap_err().to_string();
        assert!(e.contains("step 1") && e.contains("cannot be stacked"), "{e}");
        assert!(stack(&[]).is_err());
    }

    #[test]
    fn chunks_cut_the_last_axis_and_pad_the_tail_with_zeros() {
        let t = Tensor::from_f32(vec![2, 5], (0..10).map(|v| v as f32).collect());
        let (it, pad) = chunks(&t, 2, 0).unwrap();
        assert_eq!(pad, 1);
        let got: Vec<Vec<f32>> = it.map(|c| {
            assert_eq!(c.shape, vec![2, 2]);
            c.as_f32().unwrap().to_vec()
        }).collect();
        assert_eq!(got, vec![vec![0.0, 1.0, 5.0, 6.0], vec![2.0, 3.0, 7.0, 8.0], vec![4.0, 0.0, 9.0, 0.0]]);
        assert!(chunks(&Tensor::scalar(1.0f32), 2, 0).is_err());
        assert!(chunks(&t, 0, 0).is_err());
        assert!(chunks(&Tensor::zeros(DType::F32, vec![1, 0]), 4, 0).is_err());
        // with 3 values of context before each piece of 2 (zeros before the start)
        let got: Vec<Vec<f32>> = chunks(&t, 2, 3).unwrap().0.map(|c| c.as_f32().unwrap().to_vec()).collect();
        assert_eq!(got[0], vec![0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 5.0, 6.0]);
        assert_eq!(got[1], vec![0.0, 0.0, 1.0, 2.0, 3.0, 0.0, 5.0, 6.0, 7.0, 8.0]);
        assert_eq!(got[2], vec![1.0, 2.0, 3.0, 4.0, 0.0, 6.0, 7.0, 8.0, 9.0, 0.0]);
    }
}
