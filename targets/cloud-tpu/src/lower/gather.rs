//! Gather along one axis (embeddings, index selection) and GatherND as `stablehlo.gather`; ScatterND,
//! ScatterElements and TensorScatter as `stablehlo.scatter`.

use tpu_sdk_core::ir::{BinaryOp, DType, Node, Tensor};

use super::emit::{i64_array, list, ty, Cx, V};
use crate::error::Result;

/// out = data[:axis] + indices.shape + data[axis+1:], with ONNX's negative indices counting from the end.
pub(super) fn gather(cx: &mut Cx, node: &Node, axis: usize) -> Result<V> {
    let data = cx.input(node, 0)?;
    if axis >= data.rank() {
        return Err(cx.unsupported(node, format!("axis {axis} is out of range for rank {}", data.rank())));
    }
    let d = data.shape[axis] as i64;
    let idx = match cx.const_input(node, 1) {
        Some(t) => {
            // Constant indices: normalise and check them here.
            let mut v = t.to_i64_vec();
            for x in v.iter_mut() {
                if *x < -d || *x >= d {
                    return Err(cx.unsupported(node, format!("index {x} is out of range for axis {axis} of size {d}")));
                }
                if *x < 0 {
                    *x += d;
                }
            }
            cx.constant(&Tensor::from_i64(t.shape.clone(), v))
        }
        None => {
            let i = cx.input(node, 1)?;
            if !matches!(i.dtype, DType::I32 | DType::I64) {
                return Err(cx.unsupported(node, format!("indices of type {}", i.dtype)));
            }
            let zero = cx.splat_like(0.0, &i);
            let neg = cx.compare("LT", &i, &zero);
            let n = cx.splat_like(d as f64, &i);
            let wrapped = cx.add(&i, &n);
            cx.select(&neg, &wrapped, &i)
        }
    };
    Ok(cx.gather_axis(&data, axis, &idx))
}

/// Indices with negative entries wrapped: component `j` of the index vector (the last axis) counts from the end
/// of `dims[j]`. Indices are converted to i64.
fn wrap_index_vectors(cx: &mut Cx, node: &Node, dims: &[usize]) -> Result<V> {
    let i = cx.input(node, 1)?;
    if !matches!(i.dtype, DType::I32 | DType::I64) {
        return Err(cx.unsupported(node, format!("indices of type {}", i.dtype)));
    }
    let i = cx.convert(&i, DType::I64);
    let sizes = cx.constant(&Tensor::from_i64(vec![dims.len()], dims.iter().map(|&d| d as i64).collect()));
    let last = i.rank() - 1;
    let sizes = cx.broadcast_in_dim(&sizes, &[last], &i.shape.clone());
    let zero = cx.splat_like(0.0, &i);
    let neg = cx.compare("LT", &i, &zero);
    let wrapped = cx.add(&i, &sizes);
    Ok(cx.select(&neg, &wrapped, &i))
}

/// ONNX GatherND with `batch_dims` leading batch dims: `indices[..., :k]` address the first `k` dims after the
/// batch dims of `data`; out = indices.shape[:-1] + data.shape[batch_dims + k:].
pub(super) fn gather_nd(cx: &mut Cx, node: &Node, b: usize) -> Result<V> {
    let data = cx.input(node, 0)?;
    let iv = cx.input(node, 1)?;
    let (q, r) = (iv.rank(), data.rank());
    let k = iv.shape.last().copied().unwrap_or(0);
    if q == 0 || b >= q || b + k > r || k == 0 || iv.shape[..b] != data.shape[..b] {
        return Err(cx.unsupported(
            node,
            format!("indices {:?} do not address data {:?} with batch_dims {b}", iv.shape, data.shape),
        ));
    }
    let idx = wrap_index_vectors(cx, node, &data.shape[b..b + k])?;
    let mut shape = iv.shape[..q - 1].to_vec();
    shape.extend_from_slice(&data.shape[b + k..]);
    let offset_dims: Vec<usize> = (q - 1..q - 1 + (r - b - k)).collect();
    let collapsed: Vec<usize> = (b..b + k).collect();
    let batching: Vec<usize> = (0..b).collect();
    let slice_sizes: Vec<i64> = (0..r).map(|d| if d < b + k { 1 } else { data.shape[d] as i64 }).collect();
    let batch_attr = if b == 0 {
        String::new()
    } else {
        format!("operand_batching_dims = {}, start_indices_batching_dims = {}, ", list(&batching), list(&batching))
    };
    let out = ty(data.dtype, &shape);
    Ok(cx.emit(
        format!(
            "\"stablehlo.gather\"({}, {}) {{dimension_numbers = #stablehlo.gather<offset_dims = {}, collapsed_slice_dims = {}, {batch_attr}start_index_map = {}, index_vector_dim = {}>, slice_sizes = {}, indices_are_sorted = false}} : ({}, {}) -> {out}",
            data.name,
            idx.name,
            list(&offset_dims),
            list(&collapsed),
            list(&collapsed),
            q - 1,
            i64_array(&slice_sizes),
            data.ty(),
            idx.ty()
        ),
        data.dtype,
        shape,
    ))
}

/// The StableHLO op that combines an existing element with an update (`None`: the update replaces it).
fn combiner(cx: &Cx, node: &Node, reduction: Option<BinaryOp>, d: DType) -> Result<Option<&'static str>> {
    Ok(match (reduction, d == DType::Bool) {
        (None, _) => None,
        (Some(BinaryOp::Add), false) => Some("stablehlo.add"),
        (Some(BinaryOp::Mul), false) => Some("stablehlo.multiply"),
        (Some(BinaryOp::Add | BinaryOp::Max), true) => Some("stablehlo.or"),
        (Some(BinaryOp::Mul | BinaryOp::Min), true) => Some("stablehlo.and"),
        (Some(BinaryOp::Max), false) => Some("stablehlo.maximum"),
        (Some(BinaryOp::Min), false) => Some("stablehlo.minimum"),
        (Some(other), _) => return Err(cx.unsupported(node, format!("reduction {other:?}"))),
    })
}

/// ONNX ScatterND: `updates[i...]` is written to (or combined with) `data[indices[i...]]`, where the index vector
/// addresses the first `k` dims of `data`.
pub(super) fn scatter_nd(cx: &mut Cx, node: &Node, reduction: Option<BinaryOp>) -> Result<V> {
    let data = cx.input(node, 0)?;
    let iv = cx.input(node, 1)?;
    let upd = cx.input(node, 2)?;
    let (q, r) = (iv.rank(), data.rank());
    let k = iv.shape.last().copied().unwrap_or(0);
    let mut want = iv.shape[..q.saturating_sub(1)].to_vec();
    if q == 0 || k == 0 || k > r {
        return Err(cx.unsupported(node, format!("indices {:?} do not address data {:?}", iv.shape, data.shape)));
    }
    want.extend_from_slice(&data.shape[k..]);
    if upd.shape != want || upd.dtype != data.dtype {
        return Err(cx.unsupported(node, format!("updates {:?} should have shape {want:?} and the data's dtype", upd.shape)));
    }
    let combine = combiner(cx, node, reduction, data.dtype)?;
    let idx = wrap_index_vectors(cx, node, &data.shape[..k])?;
    let window: Vec<usize> = (q - 1..q - 1 + (r - k)).collect();
    let inserted: Vec<usize> = (0..k).collect();
    Ok(cx.scatter(&data, &idx, &upd, &window, &inserted, q - 1, combine))
}

/// ONNX ScatterElements: `updates[i]` goes to `data` at `i` with the `axis` coordinate replaced by `indices[i]`.
pub(super) fn scatter_elements(cx: &mut Cx, node: &Node, axis: usize, reduction: Option<BinaryOp>) -> Result<V> {
    let data = cx.input(node, 0)?;
    let iv = cx.input(node, 1)?;
    let upd = cx.input(node, 2)?;
    let r = data.rank();
    if axis >= r || iv.rank() != r || upd.shape != iv.shape || upd.dtype != data.dtype {
        return Err(cx.unsupported(
            node,
            format!("indices {:?} and updates {:?} must have one shape of the data's rank {r}, axis in range", iv.shape, upd.shape),
        ));
    }
    let combine = combiner(cx, node, reduction, data.dtype)?;
    if !matches!(iv.dtype, DType::I32 | DType::I64) {
        return Err(cx.unsupported(node, format!("indices of type {}", iv.dtype)));
    }
    let i = cx.convert(&iv, DType::I64);
    let i = wrap_negative(cx, &i, data.shape[axis] as f64);
    let coords = element_coordinates(cx, &i, axis, r);
    let all: Vec<usize> = (0..r).collect();
    Ok(cx.scatter(&data, &coords, &upd, &[], &all, r, combine))
}

/// TensorScatter: update element `(b, ..., i, ...)` goes to the cache at position `write_indices[b] + i` of
/// `axis` (modulo the positions when `circular`): one `stablehlo.scatter` of every update element at its full
/// coordinates. A linear write past the last position is dropped by the scatter (the CPU runtime refuses it).
pub(super) fn tensor_scatter(cx: &mut Cx, node: &Node, axis: usize, circular: bool) -> Result<V> {
    let cache = cx.input(node, 0)?;
    let upd = cx.input(node, 1)?;
    let idx = cx.opt_input(node, 2)?;
    let r = cache.rank();
    tpu_sdk_core::ir::ops::gather::tensor_scatter_check(&cache.shape, &upd.shape, idx.as_ref().map(|i| i.shape.as_slice()), axis)
        .map_err(|m| cx.unsupported(node, m))?;
    if upd.dtype != cache.dtype {
        return Err(cx.unsupported(node, format!("the update is {}, the cache {}", upd.dtype, cache.dtype)));
    }
    let us = upd.shape.clone();
    let mut pos = cx.iota(axis, DType::I64, &us);
    if let Some(w) = idx {
        let w = cx.convert(&w, DType::I64);
        let w = cx.broadcast_in_dim(&w, &[0], &us);
        pos = cx.add(&pos, &w);
    }
    if circular {
        let max = cache.shape[axis] as f64;
        let rem = cx.binary_scalar("remainder", &pos, max);
        pos = wrap_negative(cx, &rem, max);
    }
    let coords = element_coordinates(cx, &pos, axis, r);
    let all: Vec<usize> = (0..r).collect();
    Ok(cx.scatter(&cache, &coords, &upd, &[], &all, r, None))
}

/// ReverseSequence: `out[b, t] = x[b, len[b] - 1 - t]` for `t < len[b]`, else `x[b, t]`, as one `gather` whose
/// (batch, source time) index pairs are computed from iotas and the run-time lengths (clamped to [0, T], as the
/// CPU runtime rejects lengths outside it).
pub(super) fn reverse_sequence(cx: &mut Cx, node: &Node, batch_axis: usize, time_axis: usize) -> Result<V> {
    let x = cx.input(node, 0)?;
    let lens = cx.input(node, 1)?;
    let r = x.rank();
    if r < 2 || batch_axis >= 2 || time_axis >= 2 || batch_axis == time_axis {
        return Err(cx.unsupported(node, format!("batch_axis {batch_axis} and time_axis {time_axis} of a rank-{r} input")));
    }
    let (b, t) = (x.shape[batch_axis], x.shape[time_axis]);
    if lens.shape != [b] || !matches!(lens.dtype, DType::I32 | DType::I64) {
        return Err(cx.unsupported(node, format!("sequence_lens {} {:?} for batch {b}", lens.dtype, lens.shape)));
    }
    let bt = [b, t];
    let lens = cx.convert(&lens, DType::I64);
    let lens = cx.clamp(&lens, 0.0, t as f64);
    let l = cx.broadcast_in_dim(&lens, &[0], &bt);
    let tt = cx.iota(1, DType::I64, &bt);
    let bb = cx.iota(0, DType::I64, &bt);
    let inside = cx.compare("LT", &tt, &l);
    let last = cx.binary_scalar("subtract", &l, 1.0);
    let rev = cx.sub(&last, &tt);
    let src = cx.select(&inside, &rev, &tt);
    let bb = cx.reshape(&bb, &[b, t, 1]);
    let src = cx.reshape(&src, &[b, t, 1]);
    let idx = cx.concat(&[bb, src], 2);
    // Gathered as [b, t, rest...], then put back in the input's axis order.
    let order: Vec<usize> = [batch_axis, time_axis].into_iter().chain(2..r).collect();
    let mut shape = vec![b, t];
    shape.extend_from_slice(&x.shape[2..]);
    let slice_sizes: Vec<i64> = (0..r).map(|d| if d < 2 { 1 } else { x.shape[d] as i64 }).collect();
    let offset_dims: Vec<usize> = (2..r).collect();
    let out = ty(x.dtype, &shape);
    let g = cx.emit(
        format!(
            "\"stablehlo.gather\"({}, {}) {{dimension_numbers = #stablehlo.gather<offset_dims = {}, collapsed_slice_dims = [0, 1], start_index_map = [{batch_axis}, {time_axis}], index_vector_dim = 2>, slice_sizes = {}, indices_are_sorted = false}} : ({}, {}) -> {out}",
            x.name,
            idx.name,
            list(&offset_dims),
            i64_array(&slice_sizes),
            x.ty(),
            idx.ty()
        ),
        x.dtype,
        shape,
    );
    let perm: Vec<usize> = (0..r).map(|d| order.iter().position(|&o| o == d).unwrap_or(d)).collect();
    Ok(cx.transpose(&g, &perm))
}

/// ONNX's negative indices: `i + n` where `i < 0`, for i64 indices `i` into a dim of size `n`.
pub(super) fn wrap_negative(cx: &mut Cx, i: &V, n: f64) -> V {
    let zero = cx.splat_like(0.0, i);
    let neg = cx.compare("LT", i, &zero);
    let nv = cx.splat_like(n, i);
    let wrapped = cx.add(i, &nv);
    cx.select(&neg, &wrapped, i)
}

/// The full coordinates `[..., r]` of the elements of `i` (i64 indices along `axis` of a rank-`r` tensor): an
/// iota for every dim, the indices themselves for `axis`.
pub(super) fn element_coordinates(cx: &mut Cx, i: &V, axis: usize, r: usize) -> V {
    let mut cshape = i.shape.clone();
    cshape.push(1);
    let mut parts = Vec::new();
    for dim in 0..r {
        let c = if dim == axis { i.clone() } else { cx.iota(dim, DType::I64, &i.shape.clone()) };
        parts.push(cx.reshape(&c, &cshape));
    }
    cx.concat(&parts, r)
}
