//! The tensor-making and index ops: Shape, Size, ConstantOfShape, Range, Trilu, OneHot, EyeLike, NonZero and
//! ReverseSequence: arity and shape rules.

use super::dims::{cparam, dim_of, ints, norm_axis, numel, required};
use super::{info, Arity, InferError, Inferred, TypeInfo};
use crate::ir::{DType, Element, Tensor};
use crate::with_data;

/// The dims [start, end) that Shape reports.
pub fn shape_range(rank: usize, start: i64, end: Option<i64>) -> (usize, usize) {
    let r = rank as i64;
    let clamp = |v: i64| (if v < 0 { v.saturating_add(r) } else { v }).clamp(0, r) as usize;
    let s = clamp(start);
    let e = clamp(end.unwrap_or(r));
    (s, e.max(s))
}

/// Output shape of ConstantOfShape.
pub fn const_of_shape(shape: &Tensor, value: &Tensor) -> Result<Vec<usize>, String> {
    if value.len() != 1 {
        return Err(format!("value must hold one element, it has {}", value.len()));
    }
    if shape.shape.len() > 1 {
        return Err(format!("the shape input must be 1-D, it has shape {:?}", shape.shape));
    }
    let s = ints(shape, "shape")?.into_iter().map(|v| dim_of(v, "shape value")).collect::<Result<Vec<_>, _>>()?;
    numel(&s)?;
    Ok(s)
}

/// Range parameters as exact integers or as f64.
pub enum RangeParams {
    /// start, delta, length
    Int(i64, i64, usize),
    /// start, delta, length
    Float(f64, f64, usize),
}

/// Checks Range's scalars and computes its parameters.
pub fn range_params(start: &Tensor, limit: &Tensor, delta: &Tensor) -> Result<RangeParams, String> {
    for (t, what) in [(start, "start"), (limit, "limit"), (delta, "delta")] {
        if t.len() != 1 {
            return Err(format!("{what} must be a scalar, it has shape {:?}", t.shape));
        }
        if t.dtype() == DType::Bool {
            return Err(format!("{what} must be numeric, not bool"));
        }
    }
    if start.dtype().is_int() {
        let (s, l, d) = (start.to_i64_vec()[0], limit.to_i64_vec()[0], delta.to_i64_vec()[0]);
        if d == 0 {
            return Err("delta is 0".into());
        }
        let (diff, d128) = (l as i128 - s as i128, d as i128);
        let mut q = diff / d128;
        if diff % d128 != 0 && ((diff > 0) == (d128 > 0)) {
            q += 1;
        }
        let n = usize::try_from(q.max(0)).map_err(|_| format!("Range({s}, {l}, {d}) is too long"))?;
        Ok(RangeParams::Int(s, d, n))
    } else {
        let (s, l, d) = (start.to_f64_vec()[0], limit.to_f64_vec()[0], delta.to_f64_vec()[0]);
        if d == 0.0 {
            return Err("delta is 0".into());
        }
        let n = ((l - s) / d).ceil();
        if !n.is_finite() {
            return Err(format!("Range({s}, {l}, {d}) has no finite length"));
        }
        let n = n.max(0.0);
        if n > (1u64 << 40) as f64 {
            return Err(format!("Range({s}, {l}, {d}) is too long"));
        }
        // numpy's arange steps by the rounded difference of its first two values.
        Ok(RangeParams::Float(s, (s + d) - s, n as usize))
    }
}

/// Length of a Range.
pub fn range_len(p: &RangeParams) -> usize {
    match *p {
        RangeParams::Int(_, _, n) | RangeParams::Float(_, _, n) => n,
    }
}

/// Output shape of OneHot, the normalised axis and the depth.
pub fn onehot_shape(shape: &[usize], depth: &Tensor, axis: i64) -> Result<(Vec<usize>, usize, usize), String> {
    if depth.len() != 1 {
        return Err(format!("depth must hold one value, it has shape {:?}", depth.shape));
    }
    let d = depth.to_f64_vec()[0];
    if d.is_nan() || d < 1.0 || d > i64::MAX as f64 {
        return Err(format!("depth {d} must be a positive number"));
    }
    let depth = d as usize;
    let a = norm_axis(axis, shape.len() + 1)?;
    let mut out = shape.to_vec();
    out.insert(a, depth);
    numel(&out)?;
    Ok((out, a, depth))
}


/// Number of non-zero elements.
pub fn count_nonzero(t: &Tensor) -> usize {
    fn count<T: Element>(v: &[T]) -> usize {
        let zero = T::default();
        v.iter().filter(|&&x| x != zero).count()
    }
    with_data!(&t.data, v => count(v))
}

/// Output shape of NonZero: [rank, count].
pub fn nonzero_shape(shape: &[usize], count: usize) -> Vec<usize> {
    vec![shape.len().max(1), count]
}

// ---------------------------------------------------------------------------------------------------------
// Inference
// ---------------------------------------------------------------------------------------------------------


/// Checks ReverseSequence's axes and lengths shape.
pub fn reverse_sequence_check(shape: &[usize], lengths: &[usize], batch: usize, time: usize) -> Result<(), String> {
    if shape.len() < 2 {
        return Err(format!("input must have rank >= 2, it has shape {shape:?}"));
    }
    if batch > 1 || time > 1 || batch == time {
        return Err(format!("batch_axis {batch} and time_axis {time} must be 0 and 1 in some order"));
    }
    if lengths != [shape[batch]] {
        return Err(format!("sequence_lens has shape {lengths:?}, expected [{}]", shape[batch]));
    }
    Ok(())
}


/// Shape rule of Shape: a 1-D i64 of `end - start` dims.
pub fn infer_shape(start: i64, end: Option<i64>, inputs: &[Option<TypeInfo>]) -> Result<Inferred, InferError> {
    let x = info(inputs, 0)?;
    let (s, e) = shape_range(x.shape.len(), start, end);
    Ok(vec![(DType::I64, vec![e - s])])
}

/// Shape rule of Size: an i64 scalar.
pub fn infer_size(inputs: &[Option<TypeInfo>]) -> Result<Inferred, InferError> {
    info(inputs, 0)?;
    Ok(vec![(DType::I64, vec![])])
}

/// Shape rule of ConstantOfShape: needs the shape input's value.
pub fn infer_constant_of_shape(value: &Tensor, inputs: &[Option<TypeInfo>]) -> Result<Inferred, InferError> {
    info(inputs, 0)?;
    let s = cparam(inputs, 0)?.ok_or(InferError::Dynamic)?;
    Ok(vec![(value.dtype(), const_of_shape(s, value)?)])
}

/// Shape rule of Range(start, limit, delta): needs the three values.
pub fn infer_range(inputs: &[Option<TypeInfo>]) -> Result<Inferred, InferError> {
    let x = info(inputs, 0)?;
    let p = range_params(
        required(cparam(inputs, 0)?, "start")?,
        required(cparam(inputs, 1)?, "limit")?,
        required(cparam(inputs, 2)?, "delta")?,
    )?;
    Ok(vec![(x.dtype, vec![range_len(&p)])])
}

/// Shape rule of Trilu: the input's shape (rank >= 2).
pub fn infer_trilu(inputs: &[Option<TypeInfo>]) -> Result<Inferred, InferError> {
    let x = info(inputs, 0)?;
    if x.shape.len() < 2 {
        return Err(InferError::Invalid(format!("input must have rank >= 2, it has shape {:?}", x.shape)));
    }
    Ok(vec![(x.dtype, x.shape.to_vec())])
}

/// Shape rule of OneHot (inputs indices, constant depth, values).
pub fn infer_onehot(axis: i64, inputs: &[Option<TypeInfo>]) -> Result<Inferred, InferError> {
    let x = info(inputs, 0)?;
    let values = info(inputs, 2)?;
    let (out, _, _) = onehot_shape(x.shape, required(cparam(inputs, 1)?, "depth")?, axis)?;
    Ok(vec![(values.dtype, out)])
}

/// Shape rule of EyeLike: the 2-D input's shape.
pub fn infer_eye_like(dtype: Option<DType>, inputs: &[Option<TypeInfo>]) -> Result<Inferred, InferError> {
    let x = info(inputs, 0)?;
    if x.shape.len() != 2 {
        return Err(InferError::Invalid(format!("input must be 2-D, it has shape {:?}", x.shape)));
    }
    Ok(vec![(dtype.unwrap_or(x.dtype), x.shape.to_vec())])
}

/// Shape rule of NonZero: needs the input's value.
pub fn infer_nonzero(inputs: &[Option<TypeInfo>]) -> Result<Inferred, InferError> {
    let x = info(inputs, 0)?;
    let v = x.value.ok_or(InferError::Dynamic)?;
    Ok(vec![(DType::I64, nonzero_shape(x.shape, count_nonzero(v)))])
}

/// Shape rule of ReverseSequence (inputs x, sequence_lens).
pub fn infer_reverse_sequence(batch_axis: usize, time_axis: usize, inputs: &[Option<TypeInfo>]) -> Result<Inferred, InferError> {
    let x = info(inputs, 0)?;
    let l = info(inputs, 1)?;
    reverse_sequence_check(x.shape, l.shape, batch_axis, time_axis)?;
    Ok(vec![(x.dtype, x.shape.to_vec())])
}

/// Arity of Shape, Size, ConstantOfShape, EyeLike and NonZero: one input.
pub const UNARY_ARITY: Arity = (1, 1, 1, 1);
/// Arity of Range (start, limit, delta) and OneHot (indices, depth, values).
pub const TERNARY_ARITY: Arity = (3, 3, 1, 1);
/// Arity of Trilu: x, k?.
pub const TRILU_ARITY: Arity = (1, 2, 1, 1);
/// Arity of ReverseSequence: x, sequence_lens.
pub const REVERSE_SEQUENCE_ARITY: Arity = (2, 2, 1, 1);
