//! Shape and layout: concatenation, reshapes, transposes, padding, resizing and depth/space (in NCHW),
//! tiling, gathers and slices.

use super::{OpIn, ImportFn};
use crate::format::tflite::schema::{self, builtin_operator as bo};
use crate::import::tflite::importer::{Fused, Importer};
use crate::ir::{BinaryOp, CoordTransform, DType, NearestMode, Op, PadMode, ResizeAttrs, ResizeMode, Tensor, TensorData, ValueId};
use crate::{map_data, Result};

/// The ops of this family.
pub(super) const OPS: &[(i32, ImportFn)] = &[
    (bo::CONCATENATION, concatenation),
    (bo::RESHAPE, reshape),
    (bo::SQUEEZE, squeeze),
    (bo::EXPAND_DIMS, expand_dims),
    (bo::TRANSPOSE, transpose),
    (bo::PAD, pad), (bo::PADV2, pad), (bo::MIRROR_PAD, pad),
    (bo::RESIZE_BILINEAR, resize), (bo::RESIZE_NEAREST_NEIGHBOR, resize),
    (bo::SPACE_TO_DEPTH, space_depth), (bo::DEPTH_TO_SPACE, space_depth),
    (bo::TILE, tile),
    (bo::GATHER, gather),
    (bo::STRIDED_SLICE, strided_slice),
    (bo::SLICE, slice),
];

fn concatenation(imp: &mut Importer, o: &OpIn) -> Result<ValueId> {
    let base = &o.base;
    let opt = opts!(imp, o, schema::ConcatenationOptions);
    let vals = o.ins.iter().filter(|&&t| t >= 0).map(|&t| imp.value(t)).collect::<Result<Vec<_>>>()?;
    let rank = vals.first().map(|&v| imp.shape(v).len()).unwrap_or(0);
    let axis = imp.axis(opt.axis() as i64, rank)?;
    let fused = imp.fused(opt.fused_activation_function())?;
    let y = imp.op1(Op::Concat { axis }, &vals, if fused == Fused::None { base.clone() } else { format!("{base}/concat") })?;
    imp.apply_fused(y, fused, base.clone())
}

/// RESHAPE, as TFLite: a 1-D shape input, else the options' new_shape; a shape computed at run time
/// falls back to the output's declared (static) shape.
fn reshape(imp: &mut Importer, o: &OpIn) -> Result<ValueId> {
    let base = &o.base;
    let x = imp.value(imp.req(o, 0)?)?;
    // As TFLite: a 1-D shape input, else the options' new_shape; a shape computed at run time
    // falls back to the output's declared (static) shape.
    let shape_input = match o.input(1) {
        Some(t) if imp.declared(t)?.1.len() == 1 => {
            let v = imp.value(t)?;
            imp.g.constant(v).map(|c| c.to_i64_vec())
        }
        _ => None,
    };
    let shape: Vec<i64> = match shape_input {
        Some(s) => s,
        None => match o.op.options::<schema::ReshapeOptions>().and_then(|p| p.new_shape()).filter(|s| !s.is_empty() || o.input(1).is_none()) {
            Some(s) => s.iter().map(|d| d as i64).collect(),
            None => declared_target(imp, o)?,
        },
    };
    imp.op_with_i64(Op::Reshape { allowzero: true }, x, format!("{base}/shape"), shape, base.clone())
}

/// The declared output shape as a Reshape target, for a shape computed at run time: a dimension the
/// signature leaves free (recorded as 1) becomes -1 (inferred); two free dimensions cannot be.
fn declared_target(imp: &mut Importer, o: &OpIn) -> Result<Vec<i64>> {
    let shape = imp.declared(o.outs[0])?.1;
    let signature = schema::to_vec(imp.tensor(o.outs[0])?.shape_signature());
    let target: Vec<i64> = shape.iter().enumerate().map(|(k, &d)| if signature.get(k) == Some(&-1) { -1 } else { d as i64 }).collect();
    if target.iter().filter(|&&d| d == -1).count() > 1 {
        return Err(imp.unsupported(format!(
            "RESHAPE to a shape computed at run time with several free dimensions (signature {signature:?}); give the input shapes"
        )));
    }
    Ok(target)
}

fn squeeze(imp: &mut Importer, o: &OpIn) -> Result<ValueId> {
    let base = &o.base;
    let x = imp.value(imp.req(o, 0)?)?;
    let xs = imp.shape(x);
    let dims = o.op.options::<schema::SqueezeOptions>().map(|p| schema::to_vec(p.squeeze_dims())).unwrap_or_default();
    let mut axes: Vec<i64> = Vec::new();
    if dims.is_empty() {
        axes = xs.iter().enumerate().filter(|(_, &d)| d == 1).map(|(i, _)| i as i64).collect();
    } else {
        for d in dims {
            axes.push(imp.axis(d as i64, xs.len())? as i64);
        }
    }
    imp.op_with_i64(Op::Squeeze { axes: None }, x, format!("{base}/axes"), axes, base.clone())
}

fn expand_dims(imp: &mut Importer, o: &OpIn) -> Result<ValueId> {
    let base = &o.base;
    let x = imp.value(imp.req(o, 0)?)?;
    let rank = imp.shape(x).len();
    let a = imp.const_ints(imp.req(o, 1)?, "the axis")?;
    let a = *a.first().ok_or_else(|| imp.invalid("the axis is empty"))?;
    let axis = imp.axis(a, rank + 1)?;
    imp.op_with_i64(Op::Unsqueeze { axes: None }, x, format!("{base}/axes"), vec![axis as i64], base.clone())
}

fn transpose(imp: &mut Importer, o: &OpIn) -> Result<ValueId> {
    let base = &o.base;
    let x = imp.value(imp.req(o, 0)?)?;
    let rank = imp.shape(x).len();
    let perm = imp.const_ints(imp.req(o, 1)?, "the permutation")?;
    let perm = perm.into_iter().map(|p| imp.axis(p, rank)).collect::<Result<Vec<_>>>()?;
    imp.transpose(x, &perm, base.clone())
}

/// PAD, PADV2 (with a fill value) and MIRROR_PAD (REFLECT).
fn pad(imp: &mut Importer, o: &OpIn) -> Result<ValueId> {
    let base = &o.base;
    let x = imp.value(imp.req(o, 0)?)?;
    let rank = imp.shape(x).len();
    let p = imp.const_ints(imp.req(o, 1)?, "the paddings")?;
    if p.len() != 2 * rank {
        return Err(imp.invalid(format!("paddings have {} values for a rank-{rank} input", p.len())));
    }
    let mut pads: Vec<i64> = (0..rank).map(|i| p[2 * i]).collect();
    pads.extend((0..rank).map(|i| p[2 * i + 1]));
    let pads = imp.const_i64(format!("{base}/pads"), pads);
    let mode = if o.code == bo::MIRROR_PAD {
        match o.op.options::<schema::MirrorPadOptions>().map(|p| p.mode()).unwrap_or(0) {
            0 => PadMode::Reflect,
            _ => return Err(imp.unsupported("MIRROR_PAD in SYMMETRIC mode")),
        }
    } else {
        PadMode::Constant
    };
    let fill = match (o.code, o.input(2)) {
        (bo::PADV2, Some(t)) => Some(imp.value(t)?),
        _ => {
            // Quantized tensors pad with the zero point (the real value 0).
            let zp = imp.g.value(x).quant.as_ref().map(|q| q.zero_point[0]).unwrap_or(0);
            let dt = imp.dtype(x);
            let c = Tensor::new(vec![], map_data!(TensorData::zeros(dt, 1), v => v.into_iter().map(|_| crate::ir::Element::from_f64(zp as f64)).collect()))
                .expect("one element");
            (mode == PadMode::Constant).then(|| imp.g.add_constant(format!("{base}/pad_value"), c))
        }
    };
    imp.node(Op::Pad { mode }, vec![Some(x), Some(pads), fill], base.clone())
}

/// RESIZE_BILINEAR and RESIZE_NEAREST_NEIGHBOR, in NCHW, with TFLite's align_corners / half_pixel_centers.
fn resize(imp: &mut Importer, o: &OpIn) -> Result<ValueId> {
    let base = &o.base;
    let x = imp.value(imp.req(o, 0)?)?;
    let size = imp.const_ints(imp.req(o, 1)?, "the output size")?;
    let xs = imp.shape(x);
    if xs.len() != 4 || size.len() != 2 {
        return Err(imp.invalid(format!("expects a 4-D input and 2 sizes, got {xs:?} and {size:?}")));
    }
    let (align, half) = if o.code == bo::RESIZE_BILINEAR {
        let opt = opts!(imp, o, schema::ResizeBilinearOptions);
        (opt.align_corners(), opt.half_pixel_centers())
    } else {
        let opt = opts!(imp, o, schema::ResizeNearestNeighborOptions);
        (opt.align_corners(), opt.half_pixel_centers())
    };
    let (mode, coord, nearest) = match (o.code == bo::RESIZE_BILINEAR, align, half) {
        (_, true, true) => return Err(imp.invalid("align_corners and half_pixel_centers are both set")),
        (true, true, false) => (ResizeMode::Linear, CoordTransform::AlignCorners, NearestMode::Floor),
        (true, false, true) => (ResizeMode::Linear, CoordTransform::HalfPixel, NearestMode::Floor),
        (true, false, false) => (ResizeMode::Linear, CoordTransform::Asymmetric, NearestMode::Floor),
        // TFLite rounds (x * scale) half away from zero; the values are never negative.
        (false, true, false) => (ResizeMode::Nearest, CoordTransform::AlignCorners, NearestMode::RoundPreferCeil),
        // floor((x + 0.5) * scale) == round_prefer_ceil((x + 0.5) * scale - 0.5).
        (false, false, true) => (ResizeMode::Nearest, CoordTransform::HalfPixel, NearestMode::RoundPreferCeil),
        (false, false, false) => (ResizeMode::Nearest, CoordTransform::Asymmetric, NearestMode::Floor),
    };
    let attrs = ResizeAttrs { mode, coord, nearest, cubic_coeff_a: -0.75, exclude_outside: false, extrapolation_value: 0.0 };
    let xn = imp.nhwc_to_nchw(x, &base)?;
    let sizes = imp.const_i64(format!("{base}/sizes"), vec![xs[0] as i64, xs[3] as i64, size[0], size[1]]);
    let y = imp.node(Op::Resize(attrs), vec![Some(xn), None, None, Some(sizes)], format!("{base}/nchw"))?;
    imp.nchw_to_nhwc(y, base.clone())
}

/// SPACE_TO_DEPTH and DEPTH_TO_SPACE, in NCHW.
fn space_depth(imp: &mut Importer, o: &OpIn) -> Result<ValueId> {
    let base = &o.base;
    let x = imp.value(imp.req(o, 0)?)?;
    let bs = if o.code == bo::SPACE_TO_DEPTH {
        opts!(imp, o, schema::SpaceToDepthOptions).block_size()
    } else {
        opts!(imp, o, schema::DepthToSpaceOptions).block_size()
    };
    let [bs] = imp.positive([bs], "block size")?;
    let xn = imp.nhwc_to_nchw(x, &base)?;
    let dop = if o.code == bo::SPACE_TO_DEPTH { Op::SpaceToDepth { blocksize: bs } } else { Op::DepthToSpace { blocksize: bs, crd: false } };
    let y = imp.op1(dop, &[xn], format!("{base}/nchw"))?;
    imp.nchw_to_nhwc(y, base.clone())
}

fn tile(imp: &mut Importer, o: &OpIn) -> Result<ValueId> {
    let base = &o.base;
    let x = imp.value(imp.req(o, 0)?)?;
    let reps = imp.const_ints(imp.req(o, 1)?, "the multiples")?;
    imp.op_with_i64(Op::Tile, x, format!("{base}/repeats"), reps, base.clone())
}

fn gather(imp: &mut Importer, o: &OpIn) -> Result<ValueId> {
    let base = &o.base;
    let opt = opts!(imp, o, schema::GatherOptions);
    if opt.batch_dims() != 0 {
        return Err(imp.unsupported(format!("GATHER with batch_dims {}", opt.batch_dims())));
    }
    let x = imp.value(imp.req(o, 0)?)?;
    let idx = imp.value(imp.req(o, 1)?)?;
    let axis = imp.axis(opt.axis() as i64, imp.shape(x).len())?;
    imp.op1(Op::Gather { axis }, &[x, idx], base.clone())
}

/// STRIDED_SLICE with constant begin/end/strides, begin/end/shrink masks (no ellipsis or new axes).
fn strided_slice(imp: &mut Importer, o: &OpIn) -> Result<ValueId> {
    let (xt, bt, et, st) = (imp.req(o, 0)?, imp.req(o, 1)?, imp.req(o, 2)?, imp.req(o, 3)?);
    let base = &o.base;
    let opt = o.op.options::<schema::StridedSliceOptions>();
    let (bm, em, ellipsis, newaxis, shrink, offset) = opt
        .map(|p| (p.begin_mask(), p.end_mask(), p.ellipsis_mask(), p.new_axis_mask(), p.shrink_axis_mask(), p.offset()))
        .unwrap_or_default();
    if ellipsis != 0 || newaxis != 0 || offset {
        return Err(imp.unsupported("STRIDED_SLICE with an ellipsis mask, a new-axis mask or offset=true"));
    }
    let x = imp.value(xt)?;
    let xs = imp.shape(x);
    let begin = imp.const_ints(bt, "the begin")?;
    let end = imp.const_ints(et, "the end")?;
    let strides = imp.const_ints(st, "the strides")?;
    let n = begin.len();
    if end.len() != n || strides.len() != n || n > xs.len() {
        return Err(imp.invalid(format!("begin {begin:?}, end {end:?}, strides {strides:?} do not fit the input shape {xs:?}")));
    }
    let (mut starts, mut ends, mut axes, mut steps, mut out_shape) = (vec![], vec![], vec![], vec![], vec![]);
    for (i, &dim) in xs.iter().enumerate() {
        if i >= n {
            out_shape.push(dim as i64);
            continue;
        }
        let d = dim as i64;
        let bit = |m: i32| m & (1 << i) != 0;
        let stride = strides[i];
        if stride == 0 {
            return Err(imp.invalid("a stride is 0"));
        }
        if bit(shrink) {
            let b = if begin[i] < 0 { begin[i] + d } else { begin[i] };
            if b < 0 || b >= d {
                return Err(imp.invalid(format!("shrink index {} is out of range for dimension {i} of size {d}", begin[i])));
            }
            starts.push(b);
            ends.push(b + 1);
            axes.push(i as i64);
            steps.push(1);
            continue;
        }
        // TensorFlow's canonicalisation: masks select the full range; others are wrapped then clamped.
        let (lo, hi) = if stride > 0 { (0, d) } else { (-1, d - 1) };
        let canon = |v: i64| {
            let v = if v < 0 { v + d } else { v };
            v.clamp(lo, hi)
        };
        let b = if bit(bm) { if stride > 0 { lo } else { hi } } else { canon(begin[i]) };
        let e = if bit(em) { if stride > 0 { hi } else { lo } } else { canon(end[i]) };
        let len = if stride > 0 { (e - b + stride - 1).max(0) / stride } else { (b - e - stride - 1).max(0) / -stride };
        if len == 0 {
            return Err(imp.unsupported(format!("STRIDED_SLICE producing an empty dimension {i}")));
        }
        // ONNX Slice reads a negative end as counting from the back: spell "before index 0" as i64::MIN.
        starts.push(b);
        ends.push(if e < 0 { i64::MIN } else { e });
        axes.push(i as i64);
        steps.push(stride);
        out_shape.push(len);
    }
    let name = if shrink != 0 { format!("{base}/slice") } else { base.to_string() };
    let sliced = slice_node(imp, x, base, [starts, ends, axes], Some(steps), name)?;
    if shrink == 0 {
        return Ok(sliced);
    }
    imp.op_with_i64(Op::Reshape { allowzero: true }, sliced, format!("{base}/shape"), out_shape, base.to_string())
}

fn slice(imp: &mut Importer, o: &OpIn) -> Result<ValueId> {
    let base = &o.base;
    let x = imp.value(imp.req(o, 0)?)?;
    let xs = imp.shape(x);
    let (bt, st) = (imp.req(o, 1)?, imp.req(o, 2)?);
    let (bv, sv) = (imp.value(bt)?, imp.value(st)?);
    if imp.g.constant(bv).is_none() || imp.g.constant(sv).is_none() {
        return dynamic_slice(imp, x, bv, sv, base);
    }
    let begin = imp.const_ints(bt, "the begin")?;
    let size = imp.const_ints(st, "the size")?;
    if begin.len() != xs.len() || size.len() != xs.len() {
        return Err(imp.invalid(format!("begin {begin:?} and size {size:?} do not match the input rank {}", xs.len())));
    }
    // size -1: to the end of the dimension, which for an input known only at run time (a WHILE's loop variable
    // that grows) is not its placeholder's
    let to_end = |d: usize| if imp.g.value(x).dynamic { i64::MAX } else { d as i64 };
    let ends: Vec<i64> = begin.iter().zip(&size).zip(&xs).map(|((&b, &s), &d)| if s < 0 { to_end(d) } else { b + s }).collect();
    let axes: Vec<i64> = (0..xs.len() as i64).collect();
    slice_node(imp, x, base, [begin, ends, axes], None, base.clone())
}

/// SLICE whose begin or size is computed at run time (a loop counter in a WHILE body, as TensorFlow's converter
/// writes a TensorArray write): ends = begin + size, or the whole dimension where size is -1.
fn dynamic_slice(imp: &mut Importer, x: ValueId, begin: ValueId, size: ValueId, base: &str) -> Result<ValueId> {
    let rank = imp.shape(x).len();
    for (v, what) in [(begin, "begin"), (size, "size")] {
        if !imp.dtype(v).is_int() || imp.shape(v) != [rank] {
            return Err(imp.invalid(format!("the {what} must be {rank} integers, it is {}{:?}", imp.dtype(v), imp.shape(v))));
        }
    }
    let to_i64 = |imp: &mut Importer, v: ValueId, what: &str| -> Result<ValueId> {
        if imp.dtype(v) == DType::I64 { Ok(v) } else { imp.op1(Op::Cast { to: DType::I64 }, &[v], format!("{base}/{what}_i64")) }
    };
    let (b, s) = (to_i64(imp, begin, "begin")?, to_i64(imp, size, "size")?);
    let minus_one = imp.const_i64(format!("{base}/minus_one"), vec![-1]);
    let whole = imp.const_i64(format!("{base}/to_end"), vec![i64::MAX]);
    let to_end = imp.op1(Op::Binary(BinaryOp::Equal, None), &[s, minus_one], format!("{base}/to_end_mask"))?;
    let sum = imp.op1(Op::Binary(BinaryOp::Add, None), &[b, s], format!("{base}/begin_plus_size"))?;
    let ends = imp.op1(Op::Where, &[to_end, whole, sum], format!("{base}/ends"))?;
    let axes = imp.const_i64(format!("{base}/axes"), (0..rank as i64).collect());
    imp.op1(Op::Slice, &[x, b, ends, axes], base.to_string())
}

/// A Slice node `name` on `x` with constant starts, ends, axes (and steps), named after `base`.
fn slice_node(
    imp: &mut Importer,
    x: ValueId,
    base: &str,
    [starts, ends, axes]: [Vec<i64>; 3],
    steps: Option<Vec<i64>>,
    name: String,
) -> Result<ValueId> {
    let mut inputs = vec![x];
    for (what, values) in [("starts", starts), ("ends", ends), ("axes", axes)].into_iter().chain(steps.map(|s| ("steps", s))) {
        inputs.push(imp.const_i64(format!("{base}/{what}"), values));
    }
    imp.op1(Op::Slice, &inputs, name)
}
