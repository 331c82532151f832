//! Ranks of values whose shape is only known at run time.
//!
//! Shape inference leaves such values ([`crate::ir::Value::dynamic`]) without a shape, but their rank almost
//! always follows from the op and the ranks of its inputs. The importer needs ranks to resolve negative axes
//! (Softmax's default -1, LayerNormalization, Concat, ...) of ops that consume such values.

use super::graph::Cx;
use crate::ir::Op;

/// The rank of each output of node `idx` of the graph being built, where it can be derived.
pub fn dynamic_ranks(cx: &Cx, idx: usize) -> Vec<Option<usize>> {
    let n = &cx.g.nodes[idx];
    let rank = |i: usize| n.inputs.get(i).copied().flatten().and_then(|v| cx.rank(v));
    // Length of a 1-D shape-like input: its static shape, or its constant value.
    let len_1d = |i: usize| {
        let v = n.inputs.get(i).copied().flatten()?;
        match cx.shape(v) {
            Some([k]) => Some(*k),
            _ => None,
        }
    };
    let const_len = |i: usize| {
        let v = n.inputs.get(i).copied().flatten()?;
        cx.constant(v).map(|t| t.len())
    };
    let max_rank = || n.inputs.iter().flatten().map(|&v| cx.rank(v)).try_fold(0usize, |m, r| r.map(|r| m.max(r)));
    let same = rank(0);
    let out = match &n.op {
        Op::Binary(..) | Op::Variadic(_) | Op::VariadicMean | Op::Where => max_rank(),
        Op::MatMul => match (rank(0), rank(1)) {
            (Some(1), Some(1)) => Some(0),
            (Some(1), Some(b)) => Some(b - 1),
            (Some(a), Some(1)) => Some(a - 1),
            (Some(a), Some(b)) => Some(a.max(b)),
            _ => None,
        },
        Op::Gemm { .. } | Op::Flatten { .. } | Op::NonZero | Op::EyeLike { .. } => Some(2),
        Op::Reduce { axes, keepdims, noop_with_empty_axes, .. } => {
            if *keepdims {
                same
            } else {
                // number of reduced axes; an empty list reduces all of them unless noop_with_empty_axes
                let listed = match axes {
                    Some(a) => Some(a.len()),
                    None if n.input(1).is_none() => Some(0),
                    None => const_len(1),
                };
                match listed {
                    Some(0) if *noop_with_empty_axes => same,
                    Some(0) => Some(0),
                    Some(k) => same.and_then(|r| r.checked_sub(k)),
                    None => None,
                }
            }
        }
        Op::ArgReduce { keepdims, .. } => {
            if *keepdims {
                same
            } else {
                same.and_then(|r| r.checked_sub(1))
            }
        }
        Op::Reshape { .. } | Op::ConstantOfShape { .. } => {
            len_1d(1).or_else(|| if matches!(n.op, Op::ConstantOfShape { .. }) { len_1d(0) } else { None })
        }
        Op::Expand => same.zip(len_1d(1)).map(|(a, b)| a.max(b)),
        Op::Squeeze { axes } => match axes {
            Some(a) => same.and_then(|r| r.checked_sub(a.len())),
            None => const_len(1).and_then(|k| same.and_then(|r| r.checked_sub(k))),
        },
        Op::Unsqueeze { axes } => match axes {
            Some(a) => same.map(|r| r + a.len()),
            None => const_len(1).and_then(|k| same.map(|r| r + k)),
        },
        Op::Gather { .. } => rank(0).zip(rank(1)).and_then(|(a, b)| (a + b).checked_sub(1)),
        Op::GatherElements { .. } => rank(1),
        Op::OneHot { .. } => rank(0).map(|r| r + 1),
        Op::Shape { .. } | Op::Range => Some(1),
        Op::Size => Some(0),
        Op::GatherNd { batch_dims } => {
            let last = n.input(1).and_then(|v| cx.shape(v)).and_then(|s| s.last().copied());
            match (rank(0), rank(1), last) {
                (Some(a), Some(b), Some(l)) => (a + b).checked_sub(l + 1 + batch_dims),
                _ => None,
            }
        }
        // control flow: the importer records its outputs' ranks from the regions (ops/control_flow.rs)
        Op::If(_) | Op::Loop(_) | Op::Scan(_) => None,
        // everything else keeps the rank of its first input
        _ => same,
    };
    n.outputs.iter().map(|_| out).collect()
}
