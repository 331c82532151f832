//! A [`Session`] runs one graph many times on the CPU with memory planned once.
//!
//! Planning (in [`Session::new`]) verifies the graph, skips nodes that inference folded to constants, and
//! assigns every computed value a buffer from a pool: when a value's last reader has run, its buffer goes back
//! to the pool and a later value of the same dtype reuses it (best fit by size). Buffers keep their capacity
//! between runs, so after the first run a steady-state run allocates no tensor memory but the outputs it
//! returns: their buffers are handed to the caller, not copied, and allocated again by the next run (a graph
//! output has a buffer of its own, not one from the pool, so no other value loses its memory with it).
//!
//! Threads: a `Session` is `Send + Sync`. [`Session::run`] takes `&mut self` because it writes the planned
//! buffers, so one session serves one run at a time: share it across threads behind a `Mutex`, or give each
//! thread its own `Session` (a clone of the graph) to run in parallel. Kernels parallelise inside a run.
//!
//! Nodes that compute on quantized (int8) values get a prepared integer kernel here
//! ([`kernels::int8::prepare`]: multipliers, re-laid weights and lookup tables built once), which runs
//! instead of the float kernel; f32 MatMul/Gemm and Conv (but depthwise) with constant weights get their
//! weights packed once ([`kernels::prepare_float`]). A constant that a prepared kernel holds re-laid and nothing else reads is
//! dropped from the session's graph (its value keeps its type and shape, with empty data), so weights are in
//! memory once.

use std::time::{Duration, Instant};

use super::kernels::{self, Scratch};
use crate::ir::ops::{self, TypeInfo};
use crate::ir::{verify, DType, Graph, Tensor};
use crate::limits;
use crate::{Error, Result};

/// Where a value's tensor lives during a run.
#[derive(Clone, Copy, Debug)]
enum Src {
    /// Constant data in the graph.
    Const(usize),
    /// The caller's k-th input.
    Input(usize),
    /// A planned buffer.
    Buf(usize),
}

/// One node to execute.
struct Step {
    node: usize,
    /// The kernel prepared for this node at planning (integer kernels, packed float weights), if any.
    prepared: Option<Box<dyn kernels::PreparedKernel>>,
    /// Nested sessions of an If/Loop/Scan node.
    regions: Option<Box<super::control_flow::Regions>>,
    inputs: Vec<Option<Src>>,
    outputs: Vec<usize>,
    /// Some output's shape is known only at run time: checked against the memory budget before the kernel.
    dynamic: bool,
    /// Output 0 is written into input 0's buffer, which nothing reads afterwards ([`kernels::run_in_place`]).
    in_place: bool,
}

/// A graph prepared for repeated execution on the CPU.
pub struct Session {
    graph: Graph,
    steps: Vec<Step>,
    srcs: Vec<Option<Src>>,
    bufs: Vec<Tensor>,
    /// Graph inputs that an in-place step writes into: (input index, the buffer they are put in before a run).
    input_bufs: Vec<(usize, usize)>,
    outs_tmp: Vec<Tensor>,
    scratch: Scratch,
    profile: Option<Vec<Duration>>,
}

impl Session {
    /// Verifies `graph` and plans its execution.
    pub fn new(graph: Graph) -> Result<Session> {
        verify::verify(&graph)?;
        Session::new_at(graph, 0)
    }

    /// Plans `graph`, a region nested `depth` deep (0: the model's graph; the caller verified it). The CPU
    /// runtime's own fusions run first ([`crate::passes::fuse_silu`]), so [`Session::graph`] may hold fewer
    /// nodes than the graph given.
    pub(crate) fn new_at(mut graph: Graph, depth: usize) -> Result<Session> {
        crate::passes::fuse_silu::run(&mut graph);
        let nv = graph.values.len();
        let mut srcs: Vec<Option<Src>> = vec![None; nv];
        for (i, v) in graph.values.iter().enumerate() {
            if v.constant.is_some() {
                srcs[i] = Some(Src::Const(i));
            }
        }
        for (k, &i) in graph.inputs.iter().enumerate() {
            srcs[i.0] = Some(Src::Input(k));
        }
        // Nodes whose outputs are all folded constants do not run.
        let live_nodes: Vec<usize> = (0..graph.nodes.len())
            .filter(|&i| graph.nodes[i].outputs.iter().any(|o| graph.values[o.0].constant.is_none()))
            .collect();
        // Last step reading each value; graph outputs live to the end.
        let mut last_use = vec![None::<usize>; nv];
        for (s, &n) in live_nodes.iter().enumerate() {
            for i in graph.nodes[n].inputs.iter().flatten() {
                last_use[i.0] = Some(s);
            }
        }
        for o in &graph.outputs {
            last_use[o.0] = Some(usize::MAX);
        }
        let readers = readers(&graph);
        // Buffer pool: (dtype, planned bytes) per buffer, and the free list.
        let mut buf_info: Vec<(DType, usize)> = Vec::new();
        let mut free: Vec<usize> = Vec::new();
        let mut steps = Vec::with_capacity(live_nodes.len());
        let mut owner: Vec<Option<usize>> = vec![None; nv]; // value -> buffer
        let mut input_bufs: Vec<(usize, usize)> = Vec::new();
        let budget = limits::memory_budget();
        let mut biggest: Option<((usize, usize), usize)> = None; // ((node, value), bytes)
        for (s, &n) in live_nodes.iter().enumerate() {
            let node = &graph.nodes[n];
            // An op that can update its input where it is gets that input's buffer as its output when no one
            // reads the input after it (a graph input read only here gets a buffer of its own to be put in).
            let in_place = in_place_input(&graph, n, &readers).map(|v| match srcs[v.0] {
                Some(Src::Input(k)) => {
                    buf_info.push((graph.values[v.0].dtype, 0));
                    let b = buf_info.len() - 1;
                    input_bufs.push((k, b));
                    srcs[v.0] = Some(Src::Buf(b));
                    b
                }
                _ => owner[v.0].take().expect("in_place_input: a computed value has its buffer"),
            });
            let inputs = node.inputs.iter().map(|i| i.map(|v| srcs[v.0].expect("verified: inputs are defined"))).collect();
            let mut outputs = Vec::with_capacity(node.outputs.len());
            for o in &node.outputs {
                let v = &graph.values[o.0];
                let need = if v.dynamic {
                    0
                } else {
                    match limits::tensor_bytes(v.dtype, &v.shape) {
                        Some(b) if b <= budget => b as usize,
                        b => return Err(limits::over_budget(&output_text(node, n, v), b)),
                    }
                };
                // best fit among free buffers of the same dtype; never for a graph output: its buffer goes to the
                // caller after each run, and a pooled one would leave the value that shares it to allocate (and
                // fault in) its memory again on every run
                let graph_output = graph.outputs.contains(o);
                let pick = free
                    .iter()
                    .filter(|_| !graph_output)
                    .enumerate()
                    .filter(|(_, &b)| buf_info[b].0 == v.dtype)
                    .min_by_key(|(_, &b)| {
                        let have = buf_info[b].1;
                        if have >= need {
                            (0, have - need)
                        } else {
                            (1, need - have)
                        }
                    })
                    .map(|(pos, _)| pos);
                let b = match (pick, in_place) {
                    (_, Some(b)) if outputs.is_empty() => b,
                    (Some(pos), _) => free.swap_remove(pos),
                    (None, _) => {
                        buf_info.push((v.dtype, 0));
                        buf_info.len() - 1
                    }
                };
                buf_info[b].1 = buf_info[b].1.max(need);
                if biggest.map_or(true, |(_, size)| need > size) {
                    biggest = Some(((n, o.0), need));
                }
                outputs.push(b);
                if v.constant.is_none() {
                    srcs[o.0] = Some(Src::Buf(b));
                    owner[o.0] = Some(b);
                }
            }
            // Release buffers whose values are not read after this step (including unused outputs and the
            // buffers of outputs that are constants anyway).
            for (k, o) in node.outputs.iter().enumerate() {
                if owner[o.0].is_none() || last_use[o.0].is_none() {
                    free.push(outputs[k]);
                    owner[o.0] = None;
                }
            }
            for i in node.inputs.iter().flatten() {
                if last_use[i.0] == Some(s) {
                    if let Some(b) = owner[i.0].take() {
                        if !free.contains(&b) {
                            free.push(b);
                        }
                    }
                }
            }
            let int8 = kernels::int8::prepare(&graph, n).map_err(|m| match Error::node(node, n, m) {
                Error::Node { node, op, msg } => Error::Unsupported(format!("node '{node}' ({op}): {msg}")),
                other => other,
            })?;
            let prepared = int8.or_else(|| kernels::prepare_float(&graph, n));
            let dynamic = node.outputs.iter().any(|o| graph.values[o.0].dynamic);
            let regions = super::control_flow::Regions::prepare(&node.op, depth).map_err(|e| match e {
                Error::ResourceLimit(m) => Error::ResourceLimit(format!("{}: {m}", output_text_node(node, n))),
                Error::InvalidModel(m) => Error::InvalidModel(format!("{}: {m}", output_text_node(node, n))),
                Error::Unsupported(m) => Error::Unsupported(format!("{}: {m}", output_text_node(node, n))),
                other => other,
            })?;
            let in_place = in_place.is_some();
            debug_assert!(!(in_place && prepared.is_some()), "ops updated in place have no prepared kernel");
            steps.push(Step { node: n, prepared, regions, inputs, outputs, dynamic, in_place });
            release_held_constants(&mut graph, steps.last_mut().expect("pushed"), &readers);
        }
        for o in &graph.outputs {
            if srcs[o.0].is_none() {
                return Err(Error::InvalidModel(format!("graph output '{}' is never computed", graph.values[o.0].name)));
            }
        }
        // Buffers keep their size between runs: their sum is the plan's peak.
        let peak = buf_info.iter().try_fold(0u64, |acc, &(_, b)| acc.checked_add(b as u64));
        if peak.map_or(true, |p| p > budget) {
            let (k, _) = biggest.expect("a plan over budget has a buffer");
            let node = &graph.nodes[k.0];
            let v = &graph.values[k.1];
            return Err(limits::over_budget(
                &format!("the model's planned activations (largest: {})", output_text(node, k.0, v)),
                peak,
            ));
        }
        let bufs = buf_info.iter().map(|_| Tensor::default()).collect();
        Ok(Session { graph, steps, srcs, bufs, input_bufs, outs_tmp: Vec::new(), scratch: Scratch::default(), profile: None })
    }

    /// This session as a [`Stream`](crate::stream::Stream): each `(output, input)` name pair feeds that output back
    /// into that input on the next step (zeros on the first), so a caller gives only the new data per step.
    ///
    /// ```no_run
    /// # fn main() -> tpu_sdk_core::Result<()> {
    /// use tpu_sdk_core::{import::onnx, runtime::Session};
    /// let g = onnx::load("silero_vad.onnx".as_ref(), &Default::default())?;
    /// let mut vad = Session::new(g)?.into_stream(&[("stateN", "state")])?;
    /// # let (chunk, sr) = (tpu_sdk_core::ir::Tensor::zeros(tpu_sdk_core::ir::DType::F32, vec![1, 512]), tpu_sdk_core::ir::Tensor::from_i64(vec![], vec![16000]));
    /// let speech_probability = &vad.step(&[chunk, sr])?[0];
    /// # Ok(()) }
    /// ```
    pub fn into_stream(self, pairs: &[(&str, &str)]) -> Result<crate::stream::Stream<Session>> {
        let pairs: Vec<(String, String)> = pairs.iter().map(|(o, i)| (o.to_string(), i.to_string())).collect();
        let links = crate::stream::state_links(&self.graph, &pairs)?;
        let first = crate::stream::initial_state(&self.graph, &links, vec![None; links.len()])?;
        let n_inputs = self.graph.inputs.len();
        Ok(crate::stream::Stream::from_parts(self, n_inputs, links, first))
    }

    /// The graph this session runs.
    pub fn graph(&self) -> &Graph {
        &self.graph
    }

    /// Number of planned buffers (fewer than computed values when memory is reused).
    pub fn buffer_count(&self) -> usize {
        self.bufs.len()
    }

    /// Turns per-node timing on or off; see [`Session::profile`].
    pub fn set_profiling(&mut self, on: bool) {
        self.profile = on.then(|| vec![Duration::ZERO; self.graph.nodes.len()]);
    }

    /// Accumulated time per node (indexed like `graph().nodes`) since profiling was turned on.
    pub fn profile(&self) -> Option<&[Duration]> {
        self.profile.as_deref()
    }

    /// Checks the caller's inputs against the graph inputs: count, dtype and shape.
    pub fn check_inputs(&self, inputs: &[Tensor]) -> Result<()> {
        let refs: Vec<&Tensor> = inputs.iter().collect();
        self.check_input_refs(&refs)
    }

    fn check_input_refs(&self, inputs: &[&Tensor]) -> Result<()> {
        let g = &self.graph;
        if inputs.len() != g.inputs.len() {
            let names: Vec<String> = g.inputs.iter().map(|&i| describe(&g.values[i.0].name, g.values[i.0].dtype, &g.values[i.0].shape)).collect();
            return Err(Error::InputMismatch(format!(
                "the model takes {} input(s) [{}], {} given",
                g.inputs.len(),
                names.join(", "),
                inputs.len()
            )));
        }
        for (k, (t, &id)) in inputs.iter().zip(&g.inputs).enumerate() {
            let v = &g.values[id.0];
            if t.dtype() != v.dtype || (!v.dynamic && t.shape != v.shape) {
                return Err(Error::InputMismatch(format!(
                    "input {k}: expected {}, given {}",
                    describe(&v.name, v.dtype, &v.shape),
                    describe("", t.dtype(), &t.shape)
                )));
            }
        }
        Ok(())
    }

    /// Runs the graph on `inputs` (in graph input order) and returns the outputs in graph output order.
    pub fn run(&mut self, inputs: &[Tensor]) -> Result<Vec<Tensor>> {
        let refs: Vec<&Tensor> = inputs.iter().collect();
        self.run_refs(&refs)
    }

    /// [`Session::run`] on borrowed inputs: nothing is copied in (kernels read the caller's tensors), and
    /// nothing is copied out: each output's planned buffer is handed over (the next run allocates it again).
    /// Only an output that is a constant, an input, or listed twice is a copy.
    pub fn run_refs(&mut self, inputs: &[&Tensor]) -> Result<Vec<Tensor>> {
        self.check_input_refs(inputs)?;
        self.copy_in_place_inputs(inputs);
        self.execute(inputs)?;
        Ok(self.hand_out_outputs(inputs))
    }

    /// [`Session::run`] on inputs given away: an input that an op updates in place (a key/value cache written
    /// by `TensorScatter`) is not copied but becomes that op's output, so a cache passed in comes back as an
    /// output in the same memory with only the new positions written.
    pub fn run_owned(&mut self, mut inputs: Vec<Tensor>) -> Result<Vec<Tensor>> {
        self.check_inputs(&inputs)?;
        for &(k, b) in &self.input_bufs {
            self.bufs[b] = std::mem::take(&mut inputs[k]);
        }
        let refs: Vec<&Tensor> = inputs.iter().collect();
        self.execute(&refs)?;
        Ok(self.hand_out_outputs(&refs))
    }

    /// Puts copies of the inputs that a step updates in place into their buffers.
    fn copy_in_place_inputs(&mut self, inputs: &[&Tensor]) {
        for &(k, b) in &self.input_bufs {
            self.bufs[b].assign(inputs[k]);
        }
    }

    /// The outputs after a run: each planned buffer handed over, copies of constants, inputs and repeats.
    fn hand_out_outputs(&mut self, inputs: &[&Tensor]) -> Vec<Tensor> {
        let Session { graph, srcs, bufs, .. } = self;
        let mut handed = vec![false; bufs.len()];
        graph
            .outputs
            .iter()
            .map(|o| match srcs[o.0].expect("planned: outputs are computed") {
                Src::Buf(b) if !handed[b] => {
                    handed[b] = true;
                    std::mem::take(&mut bufs[b])
                }
                s => resolve(graph, inputs, bufs, s).clone(),
            })
            .collect()
    }

    /// Runs the graph on borrowed inputs and copies the outputs into `outputs` (one per graph output), reusing
    /// their storage: what a region runs each iteration.
    pub(crate) fn run_into(&mut self, inputs: &[&Tensor], outputs: &mut [Tensor]) -> Result<()> {
        self.check_input_refs(inputs)?;
        self.copy_in_place_inputs(inputs);
        self.execute(inputs)?;
        let Session { graph, srcs, bufs, .. } = self;
        for (o, t) in graph.outputs.iter().zip(outputs.iter_mut()) {
            t.assign(resolve(graph, inputs, bufs, srcs[o.0].expect("planned: outputs are computed")));
        }
        Ok(())
    }

    fn execute(&mut self, inputs: &[&Tensor]) -> Result<()> {
        // subnormals flushed on this thread for the run (see fp_env)
        let _flush = super::fp_env::FlushDenormals::new();
        let Session { graph, steps, bufs, outs_tmp, scratch, profile, .. } = self;
        for step in steps.iter_mut() {
            let node = &graph.nodes[step.node];
            let t0 = profile.is_some().then(Instant::now);
            if step.dynamic {
                check_dynamic_outputs(graph, inputs, bufs, step)?;
            }
            outs_tmp.clear();
            outs_tmp.extend(step.outputs.iter().map(|&b| std::mem::take(&mut bufs[b])));
            let ins: Vec<Option<&Tensor>> = step.inputs.iter().map(|s| s.map(|s| resolve(graph, inputs, bufs, s))).collect();
            let r = match (&step.prepared, step.regions.as_mut()) {
                _ if step.in_place => kernels::run_in_place(&node.op, &ins, &mut outs_tmp[0]),
                (Some(k), _) => k.run(&ins, outs_tmp, scratch),
                (None, Some(r)) => r.run(&node.op, &ins, outs_tmp),
                (None, None) => kernels::eval(&node.op, &ins, outs_tmp, scratch),
            };
            drop(ins);
            for (&b, t) in step.outputs.iter().zip(outs_tmp.drain(..)) {
                bufs[b] = t;
            }
            r.map_err(|m| Error::node(node, step.node, m))?;
            if let (Some(t0), Some(p)) = (t0, profile.as_mut()) {
                p[step.node] += t0.elapsed();
            }
        }
        Ok(())
    }
}

/// `node 'x' (If)`
fn output_text_node(node: &crate::ir::Node, index: usize) -> String {
    let name = if node.name.is_empty() { format!("#{index}") } else { node.name.clone() };
    format!("node '{name}' ({})", node.op.name())
}

/// `node 'x' (Expand) output 'y'`
fn output_text(node: &crate::ir::Node, index: usize, v: &crate::ir::Value) -> String {
    let name = if node.name.is_empty() { format!("#{index}") } else { node.name.clone() };
    format!("node '{name}' ({}) output '{}' {}", node.op.name(), v.name, limits::describe(v.dtype, &v.shape))
}

/// Before a node whose output shapes depend on run-time values runs: its shape rule on the actual inputs, and
/// each output's size against the memory budget (an `Expand` to a shape read from an input must not reach the
/// allocator). Outputs whose rule cannot say (data-dependent, like `NonZero`) are bounded by their inputs.
fn check_dynamic_outputs(g: &Graph, inputs: &[&Tensor], bufs: &[Tensor], step: &Step) -> Result<()> {
    if step.prepared.is_some() {
        return Ok(()); // prepared nodes have static shapes
    }
    let node = &g.nodes[step.node];
    let infos: Vec<Option<TypeInfo>> = step
        .inputs
        .iter()
        .map(|s| s.map(|s| resolve(g, inputs, bufs, s)).map(|t| TypeInfo { dtype: t.dtype(), shape: &t.shape, value: Some(t) }))
        .collect();
    let Ok(outs) = ops::infer(&node.op, &infos) else { return Ok(()) };
    for (k, (dtype, shape)) in outs.iter().enumerate() {
        if let Err(e) = limits::check_tensor(&format!("node '{}' ({}) output {k}", node.name, node.op.name()), *dtype, shape) {
            return Err(e);
        }
    }
    Ok(())
}

/// The input of node `n` whose buffer its output 0 may take ([`kernels::updates_in_place`]): a computed value or
/// graph input that nothing else reads, of the output's static type.
fn in_place_input(g: &Graph, n: usize, readers: &[usize]) -> Option<crate::ir::ValueId> {
    let node = &g.nodes[n];
    let v = node.inputs.get(kernels::updates_in_place(&node.op)?).copied().flatten()?;
    let o = *node.outputs.first()?;
    let (iv, ov) = (&g.values[v.0], &g.values[o.0]);
    let same = iv.dtype == ov.dtype && iv.shape == ov.shape && !iv.dynamic && !ov.dynamic;
    (same && readers[v.0] == 1 && iv.constant.is_none() && ov.constant.is_none()).then_some(v)
}

/// How many node inputs and graph outputs read each value.
fn readers(g: &Graph) -> Vec<usize> {
    let mut readers = vec![0usize; g.values.len()];
    for i in g.nodes.iter().flat_map(|n| n.inputs.iter().flatten()) {
        readers[i.0] += 1;
    }
    for o in &g.outputs {
        readers[o.0] += 1;
    }
    readers
}

/// Drops the graph's copy of constants that the step's prepared kernel holds re-laid (packed weights) and
/// nothing else reads, right after preparing it (so the two copies never all coexist): the step no longer gets
/// that input, and the session's graph keeps the value with empty data.
fn release_held_constants(g: &mut Graph, step: &mut Step, readers: &[usize]) {
    let Some(p) = &step.prepared else { return };
    for (k, i) in g.nodes[step.node].inputs.iter().enumerate() {
        let Some(v) = *i else { continue };
        if p.holds_input(k) && readers[v.0] == 1 && g.values[v.0].constant.is_some() {
            let dtype = g.values[v.0].dtype;
            g.values[v.0].constant = Some(Tensor::zeros(dtype, vec![0]));
            step.inputs[k] = None;
        }
    }
}

fn resolve<'a>(g: &'a Graph, inputs: &[&'a Tensor], bufs: &'a [Tensor], s: Src) -> &'a Tensor {
    match s {
        Src::Const(v) => g.values[v].constant.as_ref().expect("Src::Const only for constants"),
        Src::Input(k) => inputs[k],
        Src::Buf(b) => &bufs[b],
    }
}

/// `name: f32[1, 3, 224, 224]`
pub(crate) fn describe(name: &str, dtype: DType, shape: &[usize]) -> String {
    let dims: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
    if name.is_empty() {
        format!("{dtype}[{}]", dims.join(", "))
    } else {
        format!("'{name}' {dtype}[{}]", dims.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{infer::infer_graph, BinaryOp, Op, UnaryOp};
    use super::super::CpuEval;

    /// A run computes with subnormals flushed to zero (see `fp_env`): 1e-30 · 1e-10 is 0, not 1e-40; the calling
    /// thread's setting is what it was afterwards.
    #[test]
    fn runs_flush_subnormal_results_to_zero() {
        let mut g = Graph::new("tiny");
        let x = g.add_input("x", DType::F32, vec![2]);
        let y = g.add_input("y", DType::F32, vec![2]);
        let o = g.add_value("o", DType::F32, vec![]);
        g.add_node("mul", Op::Binary(BinaryOp::Mul, None), vec![Some(x), Some(y)], vec![o]);
        g.outputs.push(o);
        infer_graph(&mut g, &CpuEval).unwrap();
        let mut s = Session::new(g).unwrap();
        let before = super::super::fp_env::denormals_flushed();
        let out = s.run(&[Tensor::from_f32(vec![2], vec![1e-30, 2.0]), Tensor::from_f32(vec![2], vec![1e-10, 3.0])]).unwrap();
        assert_eq!(out[0].as_f32().unwrap()[1], 6.0);
        if cfg!(any(target_arch = "x86_64", target_arch = "aarch64")) {
            assert_eq!(out[0].as_f32().unwrap()[0], 0.0, "a subnormal product is flushed");
        }
        assert_eq!(super::super::fp_env::denormals_flushed(), before);
    }

    /// cache [2, 1, 4, 2] (a graph input) or neg(cache) (a computed value) ← TensorScatter of update [2, 1, 1, 2]
    /// at write_indices [2] along axis 2; the output is the cache.
    fn cache_update(computed: bool) -> Graph {
        let mut g = Graph::new("cache");
        let cache = g.add_input("cache", DType::F32, vec![2, 1, 4, 2]);
        let upd = g.add_input("update", DType::F32, vec![2, 1, 1, 2]);
        let idx = g.add_input("write_indices", DType::I64, vec![2]);
        let src = if computed {
            let n = g.add_value("neg", DType::F32, vec![]);
            g.add_node("neg", Op::Unary(UnaryOp::Neg), vec![Some(cache)], vec![n]);
            n
        } else {
            cache
        };
        let o = g.add_value("present", DType::F32, vec![]);
        g.add_node("scatter", Op::TensorScatter { axis: 2, circular: false }, vec![Some(src), Some(upd), Some(idx)], vec![o]);
        g.outputs.push(o);
        infer_graph(&mut g, &CpuEval).unwrap();
        g
    }

    /// A cache given away to [`Session::run_owned`] comes back as the output in the same memory with only the new
    /// positions written; [`Session::run`] leaves the caller's cache as it was; a computed cache shares its
    /// buffer with the update's output.
    #[test]
    fn tensor_scatter_updates_the_cache_in_its_own_buffer() {
        let cache = Tensor::from_f32(vec![2, 1, 4, 2], (0..16).map(|i| i as f32).collect());
        let upd = Tensor::from_f32(vec![2, 1, 1, 2], vec![-1., -2., -3., -4.]);
        let idx = Tensor::from_i64(vec![2], vec![1, 3]);
        let want = [0., 1., -1., -2., 4., 5., 6., 7., 8., 9., 10., 11., 12., 13., -3., -4.];
        let mut s = Session::new(cache_update(false)).unwrap();
        let out = s.run(&[cache.clone(), upd.clone(), idx.clone()]).unwrap();
        assert_eq!(out[0].as_f32().unwrap(), &want);
        let at = cache.as_f32().unwrap().as_ptr();
        let out = s.run_owned(vec![cache, upd.clone(), idx.clone()]).unwrap();
        assert_eq!(out[0].as_f32().unwrap(), &want);
        assert_eq!(out[0].as_f32().unwrap().as_ptr(), at, "the cache was not copied");
        // the returned cache goes in again: position 2 of row 0, position 0 of row 1
        let out = s.run_owned(vec![out.into_iter().next().unwrap(), upd.clone(), Tensor::from_i64(vec![2], vec![2, 0])]).unwrap();
        assert_eq!(&out[0].as_f32().unwrap()[..8], &[0., 1., -1., -2., -1., -2., 6., 7.]);
        assert_eq!(&out[0].as_f32().unwrap()[8..10], &[-3., -4.]);
        assert!(s.run(&[out[0].clone(), upd.clone(), Tensor::from_i64(vec![2], vec![4, 0])]).unwrap_err().to_string().contains("does not fit"));

        let mut s = Session::new(cache_update(true)).unwrap();
        assert_eq!(s.buffer_count(), 1, "the scatter writes into neg's buffer");
        let c = Tensor::from_f32(vec![2, 1, 4, 2], vec![1.; 16]);
        let out = s.run(&[c, upd, idx]).unwrap();
        assert_eq!(&out[0].as_f32().unwrap()[..6], &[-1., -1., -1., -2., -1., -1.]);
    }

    /// x -> neg -> a; a + x -> b; neg(b) -> c; c * x -> out. Four values computed, at most three live at once.
    fn chain() -> Graph {
        let mut g = Graph::new("chain");
        let x = g.add_input("x", DType::F32, vec![4]);
        let a = g.add_value("a", DType::F32, vec![]);
        let b = g.add_value("b", DType::F32, vec![]);
        let c = g.add_value("c", DType::F32, vec![]);
        let o = g.add_value("o", DType::F32, vec![]);
        g.add_node("n0", Op::Unary(UnaryOp::Neg), vec![Some(x)], vec![a]);
        g.add_node("n1", Op::Binary(BinaryOp::Add, None), vec![Some(a), Some(x)], vec![b]);
        g.add_node("n2", Op::Unary(UnaryOp::Neg), vec![Some(b)], vec![c]);
        g.add_node("n3", Op::Binary(BinaryOp::Mul, None), vec![Some(c), Some(x)], vec![o]);
        g.outputs.push(o);
        infer_graph(&mut g, &CpuEval).unwrap();
        g
    }

    #[test]
    fn a_session_moves_and_is_shared_across_threads() {
        fn send_sync<T: Send + Sync>() {}
        send_sync::<Session>();
        let s = std::sync::Arc::new(std::sync::Mutex::new(Session::new(chain()).unwrap()));
        let x = Tensor::from_f32(vec![4], vec![1.0, 2.0, 3.0, 4.0]);
        let outs: Vec<Vec<Tensor>> = std::thread::scope(|sc| {
            let hs: Vec<_> = (0..4).map(|_| sc.spawn(|| s.lock().unwrap().run(std::slice::from_ref(&x)).unwrap())).collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        // out = -(-x + x) * x = 0 for every run
        for o in outs {
            assert_eq!(o[0].view::<f32>().unwrap(), &[0.0; 4]);
        }
    }

    /// A graph output never takes a pooled buffer: it is handed to the caller after each run, and the big
    /// intermediate that shared it would then allocate (and page-fault in) its memory again on every run (what
    /// a face detector's channel paddings did, 290 page faults a run). The intermediates' buffers stay where
    /// they are from one run to the next.
    #[test]
    fn outputs_do_not_take_the_intermediates_buffers() {
        let mut g = Graph::new("big-then-small");
        let x = g.add_input("x", DType::F32, vec![64, 64]);
        let a = g.add_value("a", DType::F32, vec![]);
        let b = g.add_value("b", DType::F32, vec![]);
        let o = g.add_value("o", DType::F32, vec![]);
        g.add_node("n0", Op::Unary(UnaryOp::Neg), vec![Some(x)], vec![a]);
        g.add_node("n1", Op::Unary(UnaryOp::Neg), vec![Some(a)], vec![b]);
        g.add_node("n2", Op::Reduce { op: crate::ir::ops::reduce::ReduceOp::Sum, axes: Some(vec![0, 1]), keepdims: true, noop_with_empty_axes: false }, vec![Some(b)], vec![o]);
        g.outputs.push(o);
        infer_graph(&mut g, &CpuEval).unwrap();
        let mut s = Session::new(g).unwrap();
        let x = Tensor::from_f32(vec![64, 64], vec![1.0; 4096]);
        let places = |s: &Session| s.bufs.iter().map(|t| t.as_f32().map(|v| (v.as_ptr(), v.len()))).collect::<Vec<_>>();
        assert_eq!(s.run(&[x.clone()]).unwrap()[0].as_f32().unwrap(), &[4096.0]);
        let first = places(&s);
        for _ in 0..3 {
            s.run(&[x.clone()]).unwrap();
            assert_eq!(places(&s), first, "a buffer moved between runs");
        }
        assert!(first.iter().flatten().filter(|(_, n)| *n == 4096).count() >= 2, "{first:?}");
    }

    #[test]
    fn plans_buffer_reuse_and_checks_inputs() {
        let s = Session::new(chain()).unwrap();
        assert!(s.buffer_count() < 4, "buffers: {}", s.buffer_count());
        let e = s.check_inputs(&[Tensor::from_f32(vec![3], vec![0.0; 3])]).unwrap_err().to_string();
        assert!(e.contains("expected 'x' f32[4]") && e.contains("given f32[3]"), "{e}");
        let e = s.check_inputs(&[]).unwrap_err().to_string();
        assert!(e.contains("takes 1 input"), "{e}");
    }
}
