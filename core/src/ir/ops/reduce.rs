//! Reductions, ArgMax/ArgMin, CumSum and TopK: attributes, arity and shape rules.

use super::dims::norm_axis;
use super::{info, Arity, InferError, Inferred, TypeInfo};
use crate::ir::{DType, Tensor};

/// Reductions over a set of axes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(missing_docs)]
pub enum ReduceOp {
    Sum,
    Mean,
    Max,
    Min,
    Prod,
    L1,
    L2,
    LogSum,
    LogSumExp,
    SumSquare,
}

/// `axis` if it is below `rank`.
pub fn check_axis(axis: usize, rank: usize) -> Result<usize, String> {
    if axis >= rank {
        return Err(format!("axis {axis} is out of range for rank {rank}"));
    }
    Ok(axis)
}


/// Bool tensors take only ReduceMax and ReduceMin.
pub fn check_reduce_dtype(op: ReduceOp, dtype: DType) -> Result<(), String> {
    if dtype == DType::Bool && !matches!(op, ReduceOp::Max | ReduceOp::Min) {
        return Err(format!("Reduce{op:?} does not take bool tensors"));
    }
    Ok(())
}

/// The reduction axes from an axes input.
pub fn axes_values(t: &Tensor) -> Result<Vec<i64>, String> {
    match t.dtype() {
        DType::I64 | DType::I32 => Ok(t.to_i64_vec()),
        d => Err(format!("reduction axes must be i64, not {d}")),
    }
}

/// Which input dims are reduced. `listed` is the axes list (None or empty: all axes, or none at all with
/// `noop`, which makes the reduction a per-element map).
pub fn reduce_mask(listed: Option<&[i64]>, rank: usize, noop: bool) -> Result<Vec<bool>, String> {
    match listed {
        Some(a) if !a.is_empty() => {
            let mut mask = vec![false; rank];
            for &ax in a {
                let r = rank as i64;
                if ax < -r || ax >= r {
                    return Err(format!("reduction axis {ax} is out of range for rank {rank}"));
                }
                mask[if ax < 0 { (ax + r) as usize } else { ax as usize }] = true;
            }
            Ok(mask)
        }
        _ => Ok(vec![!noop; rank]),
    }
}

/// The output shape of a reduction over the dims in `mask`.
pub fn reduced_shape(shape: &[usize], mask: &[bool], keepdims: bool) -> Vec<usize> {
    shape
        .iter()
        .zip(mask)
        .filter_map(|(&d, &m)| if !m { Some(d) } else if keepdims { Some(1) } else { None })
        .collect()
}

/// The (normalised) CumSum axis from its axis input.
pub fn cumsum_axis(t: &Tensor, rank: usize) -> Result<usize, String> {
    if !matches!(t.dtype(), DType::I64 | DType::I32) || t.len() != 1 {
        return Err(format!("the CumSum axis must be one i32/i64 value, got {}{:?}", t.dtype(), t.shape));
    }
    let a = t.to_i64_vec()[0];
    if rank == 0 {
        // numpy-style: a scalar scans along its only (implicit) element.
        return if a == 0 || a == -1 { Ok(0) } else { Err(format!("axis {a} is out of range for rank 0")) };
    }
    norm_axis(a, rank)
}

/// TopK's k from its k input, checked against the axis length.
pub fn topk_k(t: &Tensor, len: usize) -> Result<usize, String> {
    if !matches!(t.dtype(), DType::I64 | DType::I32) || t.len() != 1 {
        return Err(format!("TopK's k must be one i64 value, got {}{:?}", t.dtype(), t.shape));
    }
    let k = t.to_i64_vec()[0];
    if k < 0 || k as u64 > len as u64 {
        return Err(format!("k = {k} is out of range for an axis of size {len}"));
    }
    Ok(k as usize)
}


/// Shape rule of a reduction (inputs x, axes? when `axes` is not an attribute).
pub fn infer_reduce(rop: ReduceOp, axes: Option<&[usize]>, keepdims: bool, noop_with_empty_axes: bool, inputs: &[Option<TypeInfo>]) -> Result<Inferred, InferError> {
    let x = info(inputs, 0)?;
    check_reduce_dtype(rop, x.dtype)?;
    let listed: Option<Vec<i64>> = match axes {
        Some(a) => Some(a.iter().map(|&v| v as i64).collect()),
        None => match inputs.get(1).copied().flatten() {
            None => None,
            Some(a) if a.shape.iter().product::<usize>() == 0 => None,
            Some(a) => match a.value {
                Some(t) => Some(axes_values(t)?),
                None => return Err(InferError::Dynamic),
            },
        },
    };
    let mask = reduce_mask(listed.as_deref(), x.shape.len(), noop_with_empty_axes)?;
    Ok(vec![(x.dtype, reduced_shape(x.shape, &mask, keepdims))])
}

/// The output shape of ArgMax/ArgMin over `axis`.
pub fn arg_reduce_shape(shape: &[usize], axis: usize, keepdims: bool) -> Result<Vec<usize>, String> {
    let axis = check_axis(axis, shape.len())?;
    if shape[axis] == 0 {
        return Err(format!("cannot take the arg-extremum of an empty axis {axis}"));
    }
    let mut out = shape.to_vec();
    if keepdims {
        out[axis] = 1;
    } else {
        out.remove(axis);
    }
    Ok(out)
}

/// Shape rule of ArgMax/ArgMin: i64 indices.
pub fn infer_arg_reduce(axis: usize, keepdims: bool, inputs: &[Option<TypeInfo>]) -> Result<Inferred, InferError> {
    let x = info(inputs, 0)?;
    Ok(vec![(DType::I64, arg_reduce_shape(x.shape, axis, keepdims)?)])
}

/// Shape rule of CumSum (inputs x, axis).
pub fn infer_cumsum(inputs: &[Option<TypeInfo>]) -> Result<Inferred, InferError> {
    let x = info(inputs, 0)?;
    if x.dtype == DType::Bool {
        return Err(InferError::Invalid("CumSum does not take bool tensors".into()));
    }
    let a = info(inputs, 1)?;
    if let Some(t) = a.value {
        cumsum_axis(t, x.shape.len())?;
    }
    Ok(vec![(x.dtype, x.shape.to_vec())])
}

/// Shape rule of TopK (inputs x, k): values and i64 indices; `k` must be constant.
pub fn infer_topk(axis: usize, inputs: &[Option<TypeInfo>]) -> Result<Inferred, InferError> {
    let x = info(inputs, 0)?;
    let axis = check_axis(axis, x.shape.len())?;
    let kt = info(inputs, 1)?;
    let Some(t) = kt.value else { return Err(InferError::Dynamic) };
    let k = topk_k(t, x.shape[axis])?;
    let mut shape = x.shape.to_vec();
    shape[axis] = k;
    Ok(vec![(x.dtype, shape.clone()), (DType::I64, shape)])
}

/// Arity of a reduction: x, axes?.
pub const REDUCE_ARITY: Arity = (1, 2, 1, 1);
/// Arity of ArgMax/ArgMin.
pub const ARG_REDUCE_ARITY: Arity = (1, 1, 1, 1);
/// Arity of CumSum: x, axis.
pub const CUMSUM_ARITY: Arity = (2, 2, 1, 1);
/// Arity of TopK: x, k; values, indices.
pub const TOPK_ARITY: Arity = (2, 2, 2, 2);
