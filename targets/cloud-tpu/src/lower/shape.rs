//! Data movement: Reshape/Flatten/Squeeze/Unsqueeze, Transpose, Concat, Slice, Split, Pad, Expand, Tile,
//! DepthToSpace/SpaceToDepth, Trilu.

use tpu_sdk_core::ir::{Node, PadMode, Tensor, TensorData};

use super::emit::{Cx, V};
use crate::error::Result;

/// Reshape, Flatten, Squeeze, Unsqueeze: a reshape to the output shape that shape inference computed from the
/// (constant) shape operands.
pub(super) fn reshape(cx: &mut Cx, node: &Node) -> Result<V> {
    let x = cx.input(node, 0)?;
    let (_, out_shape) = cx.out(node, 0);
    Ok(cx.reshape(&x, &out_shape))
}

/// Transpose by `perm` (empty: reversed dims).
pub(super) fn transpose(cx: &mut Cx, node: &Node, perm: &[usize]) -> Result<V> {
    let x = cx.input(node, 0)?;
    let perm: Vec<usize> = if perm.is_empty() { (0..x.rank()).rev().collect() } else { perm.to_vec() };
    let mut seen = vec![false; x.rank()];
    if perm.len() != x.rank() || perm.iter().any(|&p| p >= x.rank() || std::mem::replace(&mut seen[p], true)) {
        return Err(cx.unsupported(node, format!("perm {perm:?} is not a permutation of rank {}", x.rank())));
    }
    Ok(cx.transpose(&x, &perm))
}

/// Concat of all inputs along `axis`.
pub(super) fn concat(cx: &mut Cx, node: &Node, axis: usize) -> Result<V> {
    let x = cx.input(node, 0)?;
    let mut vs = Vec::new();
    for i in 0..node.inputs.len() {
        let v = cx.input(node, i)?;
        if v.dtype != x.dtype || v.rank() != x.rank() || axis >= x.rank() {
            return Err(cx.unsupported(node, "inputs of different dtypes or ranks, or axis out of range"));
        }
        vs.push(v);
    }
    Ok(cx.concat(&vs, axis))
}

/// ONNX Slice with constant operands.
pub(super) fn slice_op(cx: &mut Cx, node: &Node) -> Result<V> {
    let x = cx.input(node, 0)?;
    slice(cx, node, &x)
}

/// Pad with constant pads.
pub(super) fn pad_op(cx: &mut Cx, node: &Node, mode: PadMode) -> Result<V> {
    let x = cx.input(node, 0)?;
    pad(cx, node, &x, mode)
}

/// Expand: a broadcast to the output shape.
pub(super) fn expand(cx: &mut Cx, node: &Node) -> Result<V> {
    let x = cx.input(node, 0)?;
    let (_, out_shape) = cx.out(node, 0);
    cx.broadcast_to(&x, &out_shape)
}

/// Tile with constant repeats: a broadcast into interleaved (repeat, dim) axes, then a reshape.
pub(super) fn tile(cx: &mut Cx, node: &Node) -> Result<V> {
    let x = cx.input(node, 0)?;
    let (_, out_shape) = cx.out(node, 0);
    let reps = cx.const_ints(node, 1, "repeats")?.unwrap_or_default();
    if reps.len() != x.rank() || reps.iter().any(|&r| r < 0) {
        return Err(cx.unsupported(node, format!("repeats {reps:?} do not fit rank {}", x.rank())));
    }
    let mut wide = Vec::new();
    for (d, &r) in x.shape.iter().zip(&reps) {
        wide.push(r as usize);
        wide.push(*d);
    }
    let dims: Vec<usize> = (0..x.rank()).map(|i| 2 * i + 1).collect();
    let b = cx.broadcast_in_dim(&x, &dims, &wide);
    Ok(cx.reshape(&b, &out_shape))
}

/// DepthToSpace (CRD or DCR order) as reshape, transpose, reshape.
pub(super) fn depth_to_space(cx: &mut Cx, node: &Node, b: usize, crd: bool) -> Result<V> {
    let x = cx.input(node, 0)?;
    if x.rank() != 4 || b == 0 || x.shape[1] % (b * b) != 0 {
        return Err(cx.unsupported(node, format!("blocksize {b} for input {:?}", x.shape)));
    }
    let (n, c, h, w) = (x.shape[0], x.shape[1], x.shape[2], x.shape[3]);
    let c2 = c / (b * b);
    let (split, perm) = if crd {
        (vec![n, c2, b, b, h, w], vec![0, 1, 4, 2, 5, 3])
    } else {
        (vec![n, b, b, c2, h, w], vec![0, 3, 4, 1, 5, 2])
    };
    let r = cx.reshape(&x, &split);
    let t = cx.transpose(&r, &perm);
    Ok(cx.reshape(&t, &[n, c2, h * b, w * b]))
}

/// SpaceToDepth as reshape, transpose, reshape.
pub(super) fn space_to_depth(cx: &mut Cx, node: &Node, b: usize) -> Result<V> {
    let x = cx.input(node, 0)?;
    if x.rank() != 4 || b == 0 || x.shape[2] % b != 0 || x.shape[3] % b != 0 {
        return Err(cx.unsupported(node, format!("blocksize {b} for input {:?}", x.shape)));
    }
    let (n, c, h, w) = (x.shape[0], x.shape[1], x.shape[2], x.shape[3]);
    let r = cx.reshape(&x, &[n, c, h / b, b, w / b, b]);
    let t = cx.transpose(&r, &[0, 3, 5, 1, 2, 4]);
    Ok(cx.reshape(&t, &[n, c * b * b, h / b, w / b]))
}

/// Trilu with a constant k: a select against a constant triangle mask.
pub(super) fn trilu(cx: &mut Cx, node: &Node, upper: bool) -> Result<V> {
    let x = cx.input(node, 0)?;
    if x.rank() < 2 {
        return Err(cx.unsupported(node, "Trilu needs rank >= 2"));
    }
    let k = cx.const_ints(node, 1, "k")?.and_then(|v| v.first().copied()).unwrap_or(0);
    let (m, n) = (x.shape[x.rank() - 2], x.shape[x.rank() - 1]);
    let mask: Vec<bool> = (0..m * n)
        .map(|idx| {
            let (i, j) = ((idx / n) as i64, (idx % n) as i64);
            if upper {
                j - i >= k
            } else {
                j - i <= k
            }
        })
        .collect();
    let mt = cx.constant(&Tensor { shape: vec![m, n], data: TensorData::Bool(mask) });
    let mb = cx.broadcast_in_dim(&mt, &[x.rank() - 2, x.rank() - 1], &x.shape);
    let zero = cx.splat_like(0.0, &x);
    Ok(cx.select(&mb, &x, &zero))
}

/// ONNX Slice with constant starts/ends/axes/steps (negative steps reverse the axis first).
fn slice(cx: &mut Cx, node: &Node, x: &V) -> Result<V> {
    let rank = x.rank() as i64;
    let starts = cx.const_ints(node, 1, "starts")?.unwrap_or_default();
    let ends = cx.const_ints(node, 2, "ends")?.unwrap_or_default();
    let axes = cx.const_ints(node, 3, "axes")?.unwrap_or_else(|| (0..starts.len() as i64).collect());
    let steps = cx.const_ints(node, 4, "steps")?.unwrap_or_else(|| vec![1; starts.len()]);
    if ends.len() != starts.len() || axes.len() != starts.len() || steps.len() != starts.len() {
        return Err(cx.unsupported(node, "starts, ends, axes and steps have different lengths"));
    }
    let mut start = vec![0usize; x.rank()];
    let mut limit = x.shape.clone();
    let mut stride = vec![1usize; x.rank()];
    let mut rev = Vec::new();
    for i in 0..starts.len() {
        let a = if axes[i] < 0 { axes[i] + rank } else { axes[i] };
        if a < 0 || a >= rank {
            return Err(cx.unsupported(node, format!("axis {} is out of range for rank {rank}", axes[i])));
        }
        let a = a as usize;
        let d = x.shape[a] as i64;
        let s = steps[i];
        if s == 0 {
            return Err(cx.unsupported(node, "a step is 0"));
        }
        let norm = |v: i64| if v < 0 { v.saturating_add(d) } else { v };
        if s > 0 {
            let b = norm(starts[i]).clamp(0, d);
            let e = norm(ends[i]).clamp(0, d);
            start[a] = b as usize;
            limit[a] = e.max(b) as usize;
            stride[a] = s as usize;
        } else {
            // Elements b, b+s, ... > e; on the reversed axis (r = d-1-i) that is d-1-b, ... < d-1-e.
            let b = norm(starts[i]).clamp(0, (d - 1).max(0));
            let e = norm(ends[i]).clamp(-1, (d - 1).max(-1));
            rev.push(a);
            let rb = d - 1 - b;
            let re = d - 1 - e;
            start[a] = rb.max(0) as usize;
            limit[a] = re.max(rb).max(0) as usize;
            stride[a] = s.unsigned_abs() as usize;
        }
    }
    let r = cx.reverse(x, &rev);
    Ok(cx.slice(&r, &start, &limit, &stride))
}

/// Pad (constant, edge, reflect, wrap) with constant pads.
fn pad(cx: &mut Cx, node: &Node, x: &V, mode: PadMode) -> Result<V> {
    let rank = x.rank();
    let pads = cx.const_ints(node, 1, "pads")?.unwrap_or_default();
    let axes: Vec<usize> = match cx.const_ints(node, 3, "axes")? {
        Some(a) => a.iter().map(|&v| if v < 0 { (v + rank as i64) as usize } else { v as usize }).collect(),
        None => (0..rank).collect(),
    };
    if pads.len() != 2 * axes.len() || axes.iter().any(|&a| a >= rank) {
        return Err(cx.unsupported(node, format!("pads {pads:?} do not fit axes {axes:?} of rank {rank}")));
    }
    let mut low = vec![0i64; rank];
    let mut high = vec![0i64; rank];
    for (i, &a) in axes.iter().enumerate() {
        low[a] = pads[i];
        high[a] = pads[i + axes.len()];
    }
    if mode == PadMode::Constant {
        let value = match cx.opt_input(node, 2)? {
            Some(v) if v.shape.iter().product::<usize>() == 1 => {
                let v = cx.convert(&v, x.dtype);
                cx.reshape(&v, &[])
            }
            Some(v) => return Err(cx.unsupported(node, format!("constant_value has shape {:?}, expected one element", v.shape))),
            None => cx.scalar(0.0, x.dtype),
        };
        return Ok(cx.pad(x, &value, &low, &high, &vec![0; rank]));
    }
    let mut v = x.clone();
    for a in 0..rank {
        // Negative pads crop.
        let d = v.shape[a] as i64;
        let cb = (-low[a]).max(0);
        let ce = (-high[a]).max(0);
        if cb + ce > 0 {
            v = cx.slice_axis(&v, a, cb.min(d) as usize, (d - ce).max(cb.min(d)) as usize);
        }
        let d = v.shape[a];
        let (pb, pe) = (low[a].max(0) as usize, high[a].max(0) as usize);
        if pb == 0 && pe == 0 {
            continue;
        }
        let ok = match mode {
            PadMode::Reflect => d > pb && d > pe,
            PadMode::Wrap => d >= pb && d >= pe,
            _ => d > 0,
        };
        if !ok {
            return Err(cx.unsupported(node, format!("{mode:?} padding of {pb}/{pe} on an axis of size {d}")));
        }
        let edge = |cx: &mut Cx, v: &V, at: usize, n: usize| -> V {
            let s = cx.slice_axis(v, a, at, at + 1);
            let mut shape = v.shape.clone();
            shape[a] = n;
            let dims: Vec<usize> = (0..v.rank()).collect();
            cx.broadcast_in_dim(&s, &dims, &shape)
        };
        let mut parts = Vec::new();
        if pb > 0 {
            parts.push(match mode {
                PadMode::Reflect => {
                    let s = cx.slice_axis(&v, a, 1, pb + 1);
                    cx.reverse(&s, &[a])
                }
                PadMode::Wrap => cx.slice_axis(&v, a, d - pb, d),
                _ => edge(cx, &v, 0, pb),
            });
        }
        parts.push(v.clone());
        if pe > 0 {
            parts.push(match mode {
                PadMode::Reflect => {
                    let s = cx.slice_axis(&v, a, d - 1 - pe, d - 1);
                    cx.reverse(&s, &[a])
                }
                PadMode::Wrap => cx.slice_axis(&v, a, 0, pe),
                _ => edge(cx, &v, d - 1, pe),
            });
        }
        v = cx.concat(&parts, a);
    }
    Ok(v)
}

/// Split: consecutive slices along `axis` with the sizes of the node's outputs.
pub(super) fn split(cx: &mut Cx, node: &Node, axis: usize) -> Result<Vec<V>> {
    let x = cx.input(node, 0)?;
    if axis >= x.rank() {
        return Err(cx.unsupported(node, format!("axis {axis} is out of range for rank {}", x.rank())));
    }
    let mut at = 0;
    let mut outs = Vec::new();
    for k in 0..node.outputs.len() {
        let (_, shape) = cx.out(node, k);
        let n = shape.get(axis).copied().unwrap_or(0);
        if at + n > x.shape[axis] {
            return Err(cx.unsupported(node, "output sizes exceed the input along the split axis"));
        }
        outs.push(cx.slice_axis(&x, axis, at, at + n));
        at += n;
    }
    Ok(outs)
}
