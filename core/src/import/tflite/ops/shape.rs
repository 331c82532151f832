//! Shapes and the ops converters emit around them: SHAPE (folded to a constant when the input's shape is
//! static, as every `tf.shape` of a converted Keras model is once the batch is fixed), PACK/UNPACK,
//! SPLIT/SPLIT_V, FILL, BROADCAST_TO, ZEROS_LIKE, REVERSE_V2, RANGE, RANK, and UNSORTED_SEGMENT_PROD of
//! constants (TF's dynamic-shape arithmetic, computed at import).

use super::{ImportFn, ImportManyFn, OpIn};
use crate::format::tflite::schema::{self, builtin_operator as bo};
use crate::format::tflite::dtype_of;
use crate::import::tflite::importer::Importer;
use crate::ir::{DType, Element, Op, Tensor, TensorData, ValueId};
use crate::{map_data, Result};

/// The single-output ops of this family.
pub(super) const OPS: &[(i32, ImportFn)] = &[
    (bo::SHAPE, shape),
    (bo::PACK, pack),
    (bo::FILL, fill),
    (bo::BROADCAST_TO, broadcast_to),
    (bo::ZEROS_LIKE, zeros_like),
    (bo::REVERSE_V2, reverse_v2),
    (bo::UNSORTED_SEGMENT_PROD, unsorted_segment_prod),
    (bo::RANGE, range),
    (bo::RANK, rank),
];

/// The ops of this family with several outputs.
pub(super) const MULTI_OUTPUT_OPS: &[(i32, ImportManyFn)] = &[(bo::UNPACK, unpack), (bo::SPLIT, split), (bo::SPLIT_V, split_v)];

/// SHAPE: the IR's Shape (i64; a constant once inferred when the input shape is static), cast to out_type.
fn shape(imp: &mut Importer, o: &OpIn) -> Result<ValueId> {
    let base = &o.base;
    let x = imp.value(imp.req(o, 0)?)?;
    let to = match o.op.options::<schema::ShapeOptions>() {
        Some(p) => dtype_of(p.out_type()).filter(|d| matches!(d, DType::I32 | DType::I64)),
        None => Some(DType::I32),
    }
    .ok_or_else(|| imp.invalid("SHAPE's out_type must be INT32 or INT64"))?;
    let s = imp.op1(Op::Shape { start: 0, end: None }, &[x], if to == DType::I64 { base.clone() } else { format!("{base}/i64") })?;
    if to == DType::I64 {
        return Ok(s);
    }
    imp.op1(Op::Cast { to }, &[s], base.clone())
}

/// PACK: each input unsqueezed at the axis, then concatenated.
fn pack(imp: &mut Importer, o: &OpIn) -> Result<ValueId> {
    let base = &o.base;
    let opt = opts!(imp, o, schema::PackOptions);
    let vals = o.ins.iter().filter(|&&t| t >= 0).map(|&t| imp.value(t)).collect::<Result<Vec<_>>>()?;
    if vals.is_empty() || opt.values_count() as usize != vals.len() {
        return Err(imp.invalid(format!("values_count is {} but the operator has {} inputs", opt.values_count(), vals.len())));
    }
    let first = imp.shape(vals[0]);
    if let Some(&v) = vals.iter().find(|&&v| imp.shape(v) != first) {
        return Err(imp.invalid(format!("PACK inputs must have one shape, got {first:?} and {:?}", imp.shape(v))));
    }
    let axis = imp.axis(opt.axis() as i64, first.len() + 1)?;
    let mut parts = Vec::new();
    for (k, v) in vals.into_iter().enumerate() {
        parts.push(imp.op_with_i64(Op::Unsqueeze { axes: None }, v, format!("{base}/axes_{k}"), vec![axis as i64], format!("{base}/part_{k}"))?);
    }
    imp.op1(Op::Concat { axis }, &parts, base.clone())
}

/// UNPACK: a Split into `num` parts along the axis, each squeezed.
fn unpack(imp: &mut Importer, o: &OpIn) -> Result<Vec<ValueId>> {
    let base = &o.base;
    let opt = opts!(imp, o, schema::UnpackOptions);
    let x = imp.value(imp.req(o, 0)?)?;
    let xs = imp.shape(x);
    let axis = imp.dim_axis(opt.axis() as i64, xs.len())?;
    if opt.num() < 1 || xs[axis] != opt.num() as usize {
        return Err(imp.invalid(format!("UNPACK of {} values along axis {axis} of a {xs:?} input", opt.num())));
    }
    let n = xs[axis];
    let parts = imp.node_n(Op::Split { axis, split: Some(vec![1; n]), num_outputs: n }, vec![Some(x)], format!("{base}/split"), n)?;
    let mut outs = Vec::new();
    for (k, p) in parts.into_iter().enumerate() {
        outs.push(imp.op_with_i64(Op::Squeeze { axes: None }, p, format!("{base}/axes_{k}"), vec![axis as i64], format!("{base}/squeeze_{k}"))?);
    }
    Ok(outs)
}

/// SPLIT: inputs (axis, x); `num_splits` equal parts.
fn split(imp: &mut Importer, o: &OpIn) -> Result<Vec<ValueId>> {
    let n = opts!(imp, o, schema::SplitOptions).num_splits();
    let x = imp.value(imp.req(o, 1)?)?;
    let xs = imp.shape(x);
    let axis = scalar_axis(imp, imp.req(o, 0)?, xs.len())?;
    let n = usize::try_from(n).ok().filter(|&n| n > 0).ok_or_else(|| imp.invalid(format!("num_splits must be positive, got {n}")))?;
    if xs[axis] % n != 0 {
        return Err(imp.invalid(format!("SPLIT into {n} equal parts of dimension {axis} of size {} (input {xs:?}), which {n} does not divide", xs[axis])));
    }
    split_node(imp, o, x, axis, vec![xs[axis] / n; n])
}

/// SPLIT_V: inputs (x, size_splits, axis); at most one size is -1 (the rest of the dimension).
fn split_v(imp: &mut Importer, o: &OpIn) -> Result<Vec<ValueId>> {
    let n = opts!(imp, o, schema::SplitVOptions).num_splits();
    let x = imp.value(imp.req(o, 0)?)?;
    let xs = imp.shape(x);
    let sizes = imp.const_ints(imp.req(o, 1)?, "size_splits")?;
    let axis = scalar_axis(imp, imp.req(o, 2)?, xs.len())?;
    let dim = xs[axis] as i64;
    if sizes.len() as i64 != n as i64 {
        return Err(imp.invalid(format!("num_splits is {n} but size_splits {sizes:?} has {} values", sizes.len())));
    }
    let free: Vec<usize> = sizes.iter().enumerate().filter(|(_, &s)| s == -1).map(|(i, _)| i).collect();
    let known: i64 = sizes.iter().filter(|&&s| s != -1).sum();
    let bad = |what: &str| {
        imp.invalid(format!(
            "size_splits {sizes:?} {what} dimension {axis} of the input {xs:?} (size {dim}); the sizes must add up to it, one of them may be -1"
        ))
    };
    if sizes.iter().any(|&s| s < -1) || free.len() > 1 {
        return Err(bad("cannot split"));
    }
    let mut resolved = sizes.clone();
    match free.first() {
        Some(&i) if known <= dim => resolved[i] = dim - known,
        None if known == dim => {}
        _ => return Err(bad("do not add up to")),
    }
    split_node(imp, o, x, axis, resolved.into_iter().map(|s| s as usize).collect())
}

fn split_node(imp: &mut Importer, o: &OpIn, x: ValueId, axis: usize, sizes: Vec<usize>) -> Result<Vec<ValueId>> {
    let n = sizes.len();
    imp.node_n(Op::Split { axis, split: Some(sizes), num_outputs: n }, vec![Some(x)], o.base.clone(), n)
}

/// A constant scalar (or one-element) axis tensor of an op that splits that dimension, normalised against `rank`.
fn scalar_axis(imp: &mut Importer, t: i32, rank: usize) -> Result<usize> {
    let a = imp.const_ints(t, "the axis")?;
    match a[..] {
        [a] => imp.dim_axis(a, rank),
        _ => Err(imp.invalid(format!("the axis must have one value, got {a:?}"))),
    }
}

/// `v` as i64 (shape inputs of Expand and ConstantOfShape), cast when it is another integer type.
fn as_i64(imp: &mut Importer, v: ValueId, name: String) -> Result<ValueId> {
    match imp.dtype(v) {
        DType::I64 => Ok(v),
        d if d.is_int() => imp.op1(Op::Cast { to: DType::I64 }, &[v], name),
        d => Err(imp.invalid(format!("the shape has type {d}, expected an integer type"))),
    }
}

/// FILL: inputs (dims, value): the scalar value expanded to the shape.
fn fill(imp: &mut Importer, o: &OpIn) -> Result<ValueId> {
    let base = &o.base;
    let dims = imp.value(imp.req(o, 0)?)?;
    let value = imp.value(imp.req(o, 1)?)?;
    if imp.shape(value).iter().product::<usize>() != 1 || imp.shape(dims).len() != 1 {
        return Err(imp.invalid(format!("FILL needs 1-D dims and a scalar value, got {:?} and {:?}", imp.shape(dims), imp.shape(value))));
    }
    let dims = as_i64(imp, dims, format!("{base}/dims_i64"))?;
    imp.op1(Op::Expand, &[value, dims], base.clone())
}

/// BROADCAST_TO: Expand (the target shape contains the input's, as TensorFlow requires).
fn broadcast_to(imp: &mut Importer, o: &OpIn) -> Result<ValueId> {
    let base = &o.base;
    let x = imp.value(imp.req(o, 0)?)?;
    let s = imp.value(imp.req(o, 1)?)?;
    let s = as_i64(imp, s, format!("{base}/shape_i64"))?;
    imp.op1(Op::Expand, &[x, s], base.clone())
}

/// ZEROS_LIKE: zeros of the input's type and shape (not `x * 0`, which keeps NaNs).
fn zeros_like(imp: &mut Importer, o: &OpIn) -> Result<ValueId> {
    let base = &o.base;
    let x = imp.value(imp.req(o, 0)?)?;
    let zero = Tensor::new(vec![1], TensorData::zeros(imp.dtype(x), 1)).expect("one element");
    let s = imp.op1(Op::Shape { start: 0, end: None }, &[x], format!("{base}/shape"))?;
    imp.op1(Op::ConstantOfShape { value: zero }, &[s], base.clone())
}

/// REVERSE_V2: a Slice with step -1 over each listed axis.
fn reverse_v2(imp: &mut Importer, o: &OpIn) -> Result<ValueId> {
    let base = &o.base;
    let x = imp.value(imp.req(o, 0)?)?;
    let rank = imp.shape(x).len();
    let mut axes = Vec::new();
    for a in imp.const_ints(imp.req(o, 1)?, "the axes")? {
        let a = imp.axis(a, rank)? as i64;
        if axes.contains(&a) {
            return Err(imp.invalid(format!("axis {a} is listed twice")));
        }
        axes.push(a);
    }
    if axes.is_empty() {
        return imp.op1(Op::Identity, &[x], base.clone());
    }
    let n = axes.len();
    // From the last element (-1) to before the first (i64::MIN: the ONNX spelling of "past the front").
    let mut inputs = vec![x];
    for (what, values) in [("starts", vec![-1; n]), ("ends", vec![i64::MIN; n]), ("axes", axes), ("steps", vec![-1; n])] {
        inputs.push(imp.const_i64(format!("{base}/{what}"), values));
    }
    imp.op1(Op::Slice, &inputs, base.clone())
}

/// RANGE: inputs (start, limit, delta), scalars.
fn range(imp: &mut Importer, o: &OpIn) -> Result<ValueId> {
    let vals = (0..3).map(|k| imp.req(o, k).and_then(|t| imp.value(t))).collect::<Result<Vec<_>>>()?;
    imp.op1(Op::Range, &vals, o.base.clone())
}

/// RANK: the input's rank, an int32 scalar constant.
fn rank(imp: &mut Importer, o: &OpIn) -> Result<ValueId> {
    let x = imp.value(imp.req(o, 0)?)?;
    let r = imp.shape(x).len() as i32;
    Ok(imp.g.add_constant(o.base.clone(), Tensor::scalar(r)))
}

/// UNSORTED_SEGMENT_PROD of constants (TensorFlow's shape arithmetic for a dynamic reshape, a constant once
/// SHAPE folds): computed here; on run-time data it is refused.
fn unsorted_segment_prod(imp: &mut Importer, o: &OpIn) -> Result<ValueId> {
    let data = imp.value(imp.req(o, 0)?)?;
    let Some(d) = imp.g.constant(data).cloned() else {
        return Err(imp.unsupported("UNSORTED_SEGMENT_PROD of a tensor computed at run time (only constant inputs, as in shape arithmetic, are folded)"));
    };
    let ids = imp.const_ints(imp.req(o, 1)?, "the segment ids")?;
    let n = imp.const_ints(imp.req(o, 2)?, "num_segments")?;
    let n = match n[..] {
        [n] if n >= 0 => n as usize,
        _ => return Err(imp.invalid(format!("num_segments must be one non-negative value, got {n:?}"))),
    };
    let ids_v = imp.value(imp.req(o, 1)?)?;
    let ids_shape = imp.shape(ids_v);
    if !d.shape.starts_with(&ids_shape) {
        return Err(imp.invalid(format!("segment ids of shape {ids_shape:?} do not prefix the data shape {:?}", d.shape)));
    }
    let inner: usize = d.shape[ids_shape.len()..].iter().product();
    let mut shape = vec![n];
    shape.extend_from_slice(&d.shape[ids_shape.len()..]);
    let out = map_data!(&d.data, v => segment_prod(v, &ids, n, inner));
    let t = Tensor::new(shape, out).expect("sized by the segments");
    Ok(imp.g.add_constant(o.base.clone(), t))
}

/// Products of the rows of `v` (each `inner` long) by segment id; ids out of range are dropped, as TF does.
fn segment_prod<T: Element>(v: &[T], ids: &[i64], n: usize, inner: usize) -> Vec<T> {
    let mut out = vec![1.0f64; n * inner];
    for (row, &id) in v.chunks(inner.max(1)).zip(ids) {
        if let Ok(s) = usize::try_from(id) {
            if s < n {
                for (o, x) in out[s * inner..(s + 1) * inner].iter_mut().zip(row) {
                    *o *= x.to_f64();
                }
            }
        }
    }
    out.into_iter().map(T::from_f64).collect()
}
