//! The remaining ops with a static lowering: Shape/Size/ConstantOfShape/EyeLike (constants of the static
//! shapes), CumSum, OneHot, Hardmax, TopK, Lrn, GatherElements, DequantizeLinear/QuantizeLinear.

use tpu_sdk_core::ir::{DType, Node, QuantRounding, Tensor, TensorData};

use super::emit::{highest, list, lowest, ty, Combine, Cx, V};
use super::gather::{element_coordinates, wrap_negative};
use crate::error::Result;

/// Shape (sliced by start/end): a constant of the static shape.
pub(super) fn shape_of(cx: &mut Cx, node: &Node, start: i64, end: Option<i64>) -> Result<V> {
    let x = cx.input(node, 0)?;
    let r = x.rank() as i64;
    let norm = |v: i64| (if v < 0 { v + r } else { v }).clamp(0, r) as usize;
    let s = norm(start);
    let e = norm(end.unwrap_or(r)).max(s);
    let dims: Vec<i64> = x.shape[s..e].iter().map(|&d| d as i64).collect();
    Ok(cx.constant(&Tensor::from_i64(vec![dims.len()], dims)))
}

/// Size: a constant of the static element count.
pub(super) fn size(cx: &mut Cx, node: &Node) -> Result<V> {
    let x = cx.input(node, 0)?;
    Ok(cx.constant(&Tensor::from_i64(vec![], vec![x.shape.iter().product::<usize>() as i64])))
}

/// ConstantOfShape: a splat of `value` in the (static) output shape.
pub(super) fn constant_of_shape(cx: &mut Cx, node: &Node, value: &Tensor) -> Result<V> {
    let (odt, oshape) = cx.out(node, 0);
    let v = value.to_f64_vec().first().copied().unwrap_or(0.0);
    Ok(cx.splat(v, odt, &oshape))
}

/// EyeLike: a constant diagonal (offset `k`) converted to the output dtype.
pub(super) fn eye_like(cx: &mut Cx, node: &Node, k: i64) -> Result<V> {
    let (odt, oshape) = cx.out(node, 0);
    if oshape.len() != 2 {
        return Err(cx.unsupported(node, "EyeLike needs a 2-D input"));
    }
    let (m, n) = (oshape[0], oshape[1]);
    let mask: Vec<bool> = (0..m * n).map(|i| (i % n) as i64 - (i / n) as i64 == k).collect();
    let c = cx.constant(&Tensor { shape: vec![m, n], data: TensorData::Bool(mask) });
    Ok(cx.convert(&c, odt))
}

/// CumSum along a constant axis as a `reduce_window` (reversed and shifted for `reverse` and `exclusive`).
pub(super) fn cum_sum(cx: &mut Cx, node: &Node, exclusive: bool, reverse: bool) -> Result<V> {
    let x = cx.input(node, 0)?;
    let axis = const_axis(cx, node, 1, x.rank())?;
    let n = x.shape[axis];
    let v = if reverse { cx.reverse(&x, &[axis]) } else { x.clone() };
    let mut window = vec![1; x.rank()];
    window[axis] = n.max(1);
    let mut pad = vec![(0usize, 0usize); x.rank()];
    pad[axis] = (n.saturating_sub(1), 0);
    let mut s = cx.reduce_window(&v, Combine::Add, &window, &vec![1; x.rank()], &vec![1; x.rank()], &pad, &v.shape.clone());
    if exclusive {
        // Shift by one along the axis: a zero first, the last sum dropped.
        let mut low = vec![0i64; x.rank()];
        let mut high = vec![0i64; x.rank()];
        low[axis] = 1;
        high[axis] = -1;
        let zero = cx.scalar(0.0, s.dtype);
        s = cx.pad(&s, &zero, &low, &high, &vec![0; x.rank()]);
    }
    Ok(if reverse { cx.reverse(&s, &[axis]) } else { s })
}

/// OneHot with a constant depth: the indices compared against an iota along `axis`.
pub(super) fn one_hot(cx: &mut Cx, node: &Node, axis: i64) -> Result<V> {
    let (_, oshape) = cx.out(node, 0);
    let idx = cx.input(node, 0)?;
    let depth = cx
        .const_input(node, 1)
        .and_then(|t| t.to_f64_vec().first().copied())
        .ok_or_else(|| cx.unsupported(node, "depth must be a constant"))? as i64;
    let values = cx.input(node, 2)?;
    let r = oshape.len() as i64;
    let ax = if axis < 0 { axis + r } else { axis };
    if ax < 0 || ax >= r || values.shape.iter().product::<usize>() != 2 {
        return Err(cx.unsupported(node, format!("axis {axis} for output rank {r}, or values not of 2 elements")));
    }
    let ax = ax as usize;
    let idx = cx.convert(&idx, DType::I64);
    let idx = wrap_negative(cx, &idx, depth as f64);
    let dims: Vec<usize> = (0..oshape.len()).filter(|&i| i != ax).collect();
    let ib = cx.broadcast_in_dim(&idx, &dims, &oshape);
    let io = cx.iota(ax, DType::I64, &oshape);
    let hit = cx.compare("EQ", &ib, &io);
    let values = cx.reshape(&values, &[2]);
    let off = cx.slice_axis(&values, 0, 0, 1);
    let on = cx.slice_axis(&values, 0, 1, 2);
    let off = cx.reshape(&off, &[]);
    let on = cx.reshape(&on, &[]);
    let off = cx.broadcast_in_dim(&off, &[], &oshape);
    let on = cx.broadcast_in_dim(&on, &[], &oshape);
    Ok(cx.select(&hit, &on, &off))
}

/// Hardmax: 1 at the (first) maximum along `axis`, 0 elsewhere.
pub(super) fn hardmax(cx: &mut Cx, node: &Node, axis: usize) -> Result<V> {
    let x = cx.input(node, 0)?;
    if axis >= x.rank() {
        return Err(cx.unsupported(node, format!("axis {axis} for rank {}", x.rank())));
    }
    let am = cx.arg_reduce(&x, axis, true, false);
    let dims: Vec<usize> = (0..x.rank()).filter(|&i| i != axis).collect();
    let ab = cx.broadcast_in_dim(&am, &dims, &x.shape);
    let io = cx.iota(axis, DType::I64, &x.shape);
    let hit = cx.compare("EQ", &ab, &io);
    Ok(cx.convert(&hit, x.dtype))
}

/// TopK along `axis` (values and i64 indices) via `chlo.top_k` on the last dim.
pub(super) fn top_k(cx: &mut Cx, node: &Node, axis: usize, largest: bool) -> Result<Vec<V>> {
    let (_, oshape) = cx.out(node, 0);
    let x = cx.input(node, 0)?;
    if axis >= x.rank() || !x.dtype.is_float() {
        return Err(cx.unsupported(node, format!("TopK over axis {axis} of a rank-{} {} tensor", x.rank(), x.dtype)));
    }
    let k = oshape[axis];
    // chlo.top_k works on the last dim and returns the largest first; move the axis last, negate for
    // smallest.
    let last = x.rank() - 1;
    let mut perm: Vec<usize> = (0..x.rank()).filter(|&d| d != axis).collect();
    perm.push(axis);
    let xt = cx.transpose(&x, &perm);
    let xt = if largest { xt } else { cx.unary("negate", &xt) };
    let mut rshape = xt.shape.clone();
    rshape[last] = k;
    let (vals, idx) = cx.top_k(&xt, k, &rshape);
    let vals = if largest { vals } else { cx.unary("negate", &vals) };
    let idx = cx.convert(&idx, DType::I64);
    let mut inv = vec![0; x.rank()];
    for (i, &p) in perm.iter().enumerate() {
        inv[p] = i;
    }
    let v = cx.transpose(&vals, &inv);
    let i = cx.transpose(&idx, &inv);
    Ok(vec![v, i])
}

/// Local response normalization across channels: a `reduce_window` of squares over dim 1.
pub(super) fn lrn(cx: &mut Cx, node: &Node, alpha: f32, beta: f32, bias: f32, size: usize) -> Result<V> {
    let x = cx.input(node, 0)?;
    if x.rank() < 3 || size == 0 || !x.dtype.is_float() {
        return Err(cx.unsupported(node, format!("LRN of size {size} on {:?} {}", x.shape, x.dtype)));
    }
    let sq = cx.mul(&x, &x);
    let mut window = vec![1; x.rank()];
    window[1] = size;
    let mut pad = vec![(0usize, 0usize); x.rank()];
    pad[1] = ((size - 1) / 2, size - 1 - (size - 1) / 2);
    let s = cx.reduce_window(&sq, Combine::Add, &window, &vec![1; x.rank()], &vec![1; x.rank()], &pad, &x.shape.clone());
    let s = cx.binary_scalar("multiply", &s, (alpha / size as f32) as f64);
    let s = cx.binary_scalar("add", &s, bias as f64);
    let s = cx.binary_scalar("power", &s, beta as f64);
    Ok(cx.div(&x, &s))
}

/// GatherElements along `axis` as a `gather` with full coordinates.
pub(super) fn gather_elements(cx: &mut Cx, node: &Node, axis: usize) -> Result<V> {
    let data = cx.input(node, 0)?;
    let idx = cx.input(node, 1)?;
    if axis >= data.rank() || idx.rank() != data.rank() {
        return Err(cx.unsupported(node, "indices must have the rank of the data, and axis be in range"));
    }
    let idx = cx.convert(&idx, DType::I64);
    let idx = wrap_negative(cx, &idx, data.shape[axis] as f64);
    let r = data.rank();
    let coords = element_coordinates(cx, &idx, axis, r);
    let all: Vec<usize> = (0..r).collect();
    let out = ty(data.dtype, &idx.shape);
    let ones: Vec<String> = vec!["1".to_string(); r];
    Ok(cx.emit(
        format!(
            "\"stablehlo.gather\"({}, {}) {{dimension_numbers = #stablehlo.gather<collapsed_slice_dims = {}, start_index_map = {}, index_vector_dim = {r}>, slice_sizes = array<i64: {}>, indices_are_sorted = false}} : ({}, {}) -> {out}",
            data.name,
            coords.name,
            list(&all),
            list(&all),
            ones.join(", "),
            data.ty(),
            coords.ty()
        ),
        data.dtype,
        idx.shape.clone(),
    ))
}

/// DequantizeLinear: `(x - zero_point) * scale`, scalar or per-axis parameters.
pub(super) fn dequantize_linear(cx: &mut Cx, node: &Node, axis: i64) -> Result<V> {
    let x = cx.input(node, 0)?;
    let scale = cx.input(node, 1)?;
    let xf = cx.convert(&x, scale.dtype);
    let xf = match cx.opt_input(node, 2)? {
        Some(zp) => {
            let zp = cx.convert(&zp, scale.dtype);
            let zp = per_axis(cx, node, &zp, axis, &x.shape)?;
            cx.sub(&xf, &zp)
        }
        None => xf,
    };
    let s = per_axis(cx, node, &scale, axis, &x.shape)?;
    Ok(cx.mul(&xf, &s))
}

/// QuantizeLinear (ONNX rounding, float input): `clamp(round(x / scale) + zero_point)`.
pub(super) fn quantize_linear(cx: &mut Cx, node: &Node, axis: i64, rounding: QuantRounding) -> Result<V> {
    let (odt, _) = cx.out(node, 0);
    if rounding != QuantRounding::HalfToEven {
        return Err(cx.unsupported(node, "TFLite-rounded QUANTIZE (int8 TFLite models run on the cpu and edgetpu targets)"));
    }
    let x = cx.input(node, 0)?;
    if matches!(x.dtype, DType::I8 | DType::U8 | DType::I32) {
        return Err(cx.unsupported(node, "requantizing an integer tensor (int8 TFLite models run on the cpu and edgetpu targets)"));
    }
    let scale = cx.input(node, 1)?;
    let s = cx.convert(&scale, x.dtype);
    let s = per_axis(cx, node, &s, axis, &x.shape)?;
    let q = cx.div(&x, &s);
    let mut q = cx.unary("round_nearest_even", &q);
    if let Some(zp) = cx.opt_input(node, 2)? {
        let zp = cx.convert(&zp, x.dtype);
        let zp = per_axis(cx, node, &zp, axis, &x.shape)?;
        q = cx.add(&q, &zp);
    }
    let q = cx.clamp(&q, lowest(odt), highest(odt));
    Ok(cx.convert(&q, odt))
}

/// A scalar or per-axis (1-D along `axis`) quantization parameter broadcast to `shape`.
fn per_axis(cx: &mut Cx, node: &Node, p: &V, axis: i64, shape: &[usize]) -> Result<V> {
    let n: usize = p.shape.iter().product();
    if n == 1 {
        let s = cx.reshape(p, &[]);
        return Ok(cx.broadcast_in_dim(&s, &[], shape));
    }
    let r = shape.len() as i64;
    let a = if axis < 0 { axis + r } else { axis };
    if a < 0 || a >= r || shape[a as usize] != n {
        return Err(cx.unsupported(node, format!("quantization parameter of {n} values along axis {axis} of {shape:?}")));
    }
    let p = cx.reshape(p, &[n]);
    Ok(cx.broadcast_along(&p, a as usize, shape))
}

/// A constant axis from input `i` (negative counts from the end).
fn const_axis(cx: &Cx, node: &Node, i: usize, rank: usize) -> Result<usize> {
    let a = cx
        .const_ints(node, i, "axis")?
        .and_then(|v| v.first().copied())
        .ok_or_else(|| cx.unsupported(node, "missing axis"))?;
    let r = rank as i64;
    let n = if a < 0 { a + r } else { a };
    if n < 0 || n >= r {
        return Err(cx.unsupported(node, format!("axis {a} is out of range for rank {rank}")));
    }
    Ok(n as usize)
}
