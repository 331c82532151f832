//! Calibration: run the float graph on sample inputs and record what every float activation holds.
//!
//! The graph is run by the ordinary CPU [`Session`] on a copy whose outputs are every computed float value,
//! so the runtime needs no hooks. Histogram methods take a second pass over the samples (the first fixes
//! each value's [min, max], the second fills the histogram over it).

use std::collections::HashMap;

use super::range::{Observed, RangeMethod};
use crate::ir::{DType, Graph, Op, Tensor, ValueId};
use crate::runtime::Session;
use crate::target::Progress;
use crate::{Error, Result};

/// What calibration observed, per float value of the graph (graph inputs and computed values).
#[derive(Clone, Debug, Default)]
pub struct Calibration {
    /// Observations by value.
    pub observed: HashMap<ValueId, Observed>,
    /// Number of samples run.
    pub samples: usize,
    /// Per LSTM (keyed by its output Y): the largest |cell state| its float recurrence reached, for the
    /// int16 cell state's scale (not a graph value, so not in `observed`).
    pub cell_absmax: HashMap<ValueId, f32>,
}

/// Runs `g` on every sample (each a full set of graph inputs, in graph input order) and records the
/// values `method` needs. Progress is reported per sample as `calibrating`.
pub fn calibrate(g: &Graph, samples: &[Vec<Tensor>], method: RangeMethod, progress: &Progress) -> Result<Calibration> {
    if samples.is_empty() {
        return Err(Error::InputMismatch("calibration needs at least one sample".into()));
    }
    for (k, s) in samples.iter().enumerate() {
        if s.len() != g.inputs.len() {
            return Err(Error::InputMismatch(format!("calibration sample {k} has {} inputs, the model takes {}", s.len(), g.inputs.len())));
        }
        for (t, &i) in s.iter().zip(&g.inputs) {
            let v = g.value(i);
            if t.shape != v.shape && !v.dynamic {
                return Err(Error::InputMismatch(format!(
                    "calibration sample {k}: input '{}' has shape {:?}, the model expects {:?}",
                    v.name, t.shape, v.shape
                )));
            }
        }
    }
    // Every computed float value becomes an output of the copy.
    let mut tapped: Vec<ValueId> = Vec::new();
    for n in &g.nodes {
        for &o in &n.outputs {
            let v = g.value(o);
            if v.constant.is_none() && v.dtype == DType::F32 && !tapped.contains(&o) {
                tapped.push(o);
            }
        }
    }
    let mut copy = g.clone();
    copy.outputs = tapped.clone();
    let mut session = Session::new(copy)?;
    let passes = if method.needs_histogram() { 2 } else { 1 };
    let total = (samples.len() * passes) as u64;
    let mut observed: HashMap<ValueId, Observed> = HashMap::new();
    let mut cell_absmax: HashMap<ValueId, f32> = HashMap::new();
    let lstms: Vec<&crate::ir::Node> = g.nodes.iter().filter(|n| matches!(&n.op, crate::ir::Op::Rnn(a) if a.cell == crate::ir::ops::recurrent::RnnCell::Lstm)).collect();
    for pass in 0..passes {
        for (k, s) in samples.iter().enumerate() {
            let outs = session.run(s).map_err(|e| match e {
                Error::Unsupported(m) => Error::Unsupported(format!("calibration sample {k}: {m}")),
                other => other,
            })?;
            if pass == 0 {
                for n in &lstms {
                    let (Op::Rnn(a), Some(x)) = (&n.op, n.input(0)) else { continue };
                    let xt = g.inputs.iter().position(|&i| i == x).map(|i| &s[i]).or_else(|| tapped.iter().position(|&t| t == x).map(|i| &outs[i]));
                    if let Some(xt) = xt {
                        let m = super::lstm::cell_absmax(g, n, a, xt)?;
                        let e = cell_absmax.entry(n.outputs[0]).or_insert(0.0);
                        *e = e.max(m);
                    }
                }
            }
            let inputs = g.inputs.iter().zip(s.iter());
            let computed = tapped.iter().zip(outs.iter());
            for (&v, t) in inputs.chain(computed) {
                if g.value(v).dtype != DType::F32 {
                    continue;
                }
                let Some(data) = t.as_f32() else { continue };
                let o = observed.entry(v).or_default();
                if pass == 0 {
                    o.add_minmax(data);
                } else {
                    o.add_hist(data);
                }
            }
            progress.report("calibrating", (pass * samples.len() + k + 1) as u64, total);
        }
    }
    Ok(Calibration { observed, samples: samples.len(), cell_absmax })
}
