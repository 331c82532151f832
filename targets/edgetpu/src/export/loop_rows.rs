//! The scan outputs of a `Loop` that did not unroll (its trip count known only at run time, a condition that
//! may stop it early, too many iterations): TFLite's `WHILE` carries each as one more loop variable, an
//! accumulator that grows by a `CONCATENATION` of the iteration's slice (`RESHAPE`d to `[1, ...slice]`) every
//! iteration. LiteRT's WHILE lets a loop variable change shape from one iteration to the next (it resizes the
//! variable and re-prepares the body), so no trip count bound or preallocated buffer is needed. It fails to
//! invoke with a loop variable of 0 rows (ai-edge-litert 2.3), so the accumulator starts with one row of zeros
//! and a `SLICE` after the WHILE drops it (`control_flow.rs` writes these ops).
//!
//! In the IR such a scan output has a shape known only at run time. The export gives it the shape
//! `[0, ...slice]` with the signature `[-1, ...slice]` (and the same to a `QuantizeLinear`, `DequantizeLinear` or
//! `Identity` of it, which an int8 model puts after the float WHILE); any other use of it is refused with the
//! reason, as its length is only known when the file runs.

use std::collections::HashSet;

use tpu_sdk_core::ir::{Graph, Op, ValueId};
use tpu_sdk_core::{Error, Result};

/// `g` with the run-time-length scan outputs of its Loops (and their quantize/dequantize/identity copies)
/// given the shape `[0, ...slice]`, and the values a WHILE stacks (those, and the scan outputs of a known
/// length: a Loop too long to unroll); `None` when `g` has none.
pub(super) fn with_row_shapes(g: &Graph) -> Result<Option<(Graph, HashSet<ValueId>)>> {
    let mut rows: HashSet<ValueId> = HashSet::new();
    // those of them whose shape the IR knows only at run time
    let mut run_time: HashSet<ValueId> = HashSet::new();
    let mut c = g.clone();
    for n in &g.nodes {
        match &n.op {
            Op::Loop(a) => {
                let nc = a.num_carried;
                for (j, &o) in n.outputs.iter().enumerate().skip(nc) {
                    let Some(&slice) = a.body.outputs.get(1 + j) else { continue };
                    let s = a.body.value(slice);
                    if s.dynamic {
                        continue;
                    }
                    // (a trip count known before running that was too long to unroll leaves the shape known)
                    if c.value(o).dynamic {
                        let mut shape = vec![0];
                        shape.extend_from_slice(&s.shape);
                        c.values[o.0].shape = shape;
                        run_time.insert(o);
                    }
                    rows.insert(o);
                }
            }
            Op::QuantizeLinear { .. } | Op::DequantizeLinear { .. } | Op::Identity => {
                if let (Some(x), Some(&y)) = (n.input(0), n.outputs.first()) {
                    // (the quantizer's copies of a run-time value may not be marked dynamic themselves)
                    if run_time.contains(&x) {
                        c.values[y.0].shape = c.value(x).shape.clone();
                        c.values[y.0].dynamic = true;
                        run_time.insert(y);
                        rows.insert(y);
                    }
                }
            }
            _ => {}
        }
    }
    if rows.is_empty() {
        return Ok(None);
    }
    for n in &g.nodes {
        let passes = matches!(n.op, Op::QuantizeLinear { .. } | Op::DequantizeLinear { .. } | Op::Identity);
        if let Some(&v) = n.inputs.iter().flatten().find(|v| run_time.contains(v)) {
            if !passes || n.input(0) != Some(v) {
                return Err(Error::Unsupported(format!(
                    "TFLite export of node '{}' ({}): its input '{}' is the scan output of a Loop whose length is known only at run time (a WHILE stacks it); such a scan output may only be a graph output (quantized or not) in the TFLite export",
                    n.name,
                    n.op.name(),
                    g.value(v).name
                )));
            }
        }
    }
    Ok(Some((c, rows)))
}
