//! Shape arithmetic shared by the shape rules and the CPU kernels: strides, broadcasting, axis
//! normalisation, and reading integer parameter inputs (shape, axes, pads, ...).

use super::{InferError, TypeInfo};
use crate::ir::Tensor;

/// Row-major strides of `shape` (in elements).
pub fn strides(shape: &[usize]) -> Vec<usize> {
    let mut s = vec![1; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * shape[i + 1];
    }
    s
}

/// Numpy broadcast of two shapes, or an error naming both.
pub fn broadcast_shape(a: &[usize], b: &[usize]) -> Result<Vec<usize>, String> {
    let rank = a.len().max(b.len());
    let mut out = vec![0; rank];
    for i in 0..rank {
        let da = if i + a.len() >= rank { a[i + a.len() - rank] } else { 1 };
        let db = if i + b.len() >= rank { b[i + b.len() - rank] } else { 1 };
        out[i] = if da == db {
            da
        } else if da == 1 {
            db
        } else if db == 1 {
            da
        } else {
            return Err(format!("shapes {a:?} and {b:?} do not broadcast"));
        };
    }
    Ok(out)
}

/// Broadcast of many shapes.
pub fn broadcast_shapes<'a>(shapes: impl IntoIterator<Item = &'a [usize]>) -> Result<Vec<usize>, String> {
    let mut out: Vec<usize> = Vec::new();
    for s in shapes {
        out = broadcast_shape(&out, s)?;
    }
    Ok(out)
}

/// Strides to read an input of shape `shape` as if it had the broadcast shape `out` (0 on broadcast dims).
pub fn broadcast_strides(shape: &[usize], out: &[usize]) -> Vec<usize> {
    let s = strides(shape);
    let off = out.len() - shape.len();
    (0..out.len())
        .map(|i| if i < off || shape[i - off] == 1 { 0 } else { s[i - off] })
        .collect()
}

/// Normalises a possibly negative axis against `rank`.
pub fn norm_axis(axis: i64, rank: usize) -> Result<usize, String> {
    let r = rank as i64;
    if axis < -r || axis >= r.max(1) {
        return Err(format!("axis {axis} is out of range for rank {rank}"));
    }
    Ok(if axis < 0 { (axis + r) as usize } else { axis as usize })
}


/// The values of an integer parameter tensor (shape, axes, pads, ...).
pub fn ints(t: &Tensor, what: &str) -> Result<Vec<i64>, String> {
    if !t.dtype().is_int() {
        return Err(format!("{what} must be an integer tensor, not {}", t.dtype()));
    }
    Ok(t.to_i64_vec())
}

/// One integer from a scalar or one-element parameter tensor.
pub fn int_scalar(t: &Tensor, what: &str) -> Result<i64, String> {
    let v = ints(t, what)?;
    match v.as_slice() {
        [x] => Ok(*x),
        _ => Err(format!("{what} must hold exactly one value, it has {}", v.len())),
    }
}

/// Parameter input `i` for shape inference: `None` when absent, its value when constant, and
/// [`InferError::Dynamic`] when it is present but only known at run time.
pub fn cparam<'a>(inputs: &[Option<TypeInfo<'a>>], i: usize) -> Result<Option<&'a Tensor>, InferError> {
    match inputs.get(i).copied().flatten() {
        None => Ok(None),
        Some(t) => t.value.map(Some).ok_or(InferError::Dynamic),
    }
}


/// A required parameter input.
pub fn required<'a>(t: Option<&'a Tensor>, what: &str) -> Result<&'a Tensor, String> {
    t.ok_or_else(|| format!("missing required input {what}"))
}

/// Product of dims, or an error on overflow.
pub fn numel(shape: &[usize]) -> Result<usize, String> {
    shape
        .iter()
        .try_fold(1usize, |a, &d| a.checked_mul(d))
        .ok_or_else(|| format!("shape {shape:?} has too many elements"))
}

/// A non-negative dim from an i64, or an error naming it.
pub fn dim_of(v: i64, what: &str) -> Result<usize, String> {
    usize::try_from(v).map_err(|_| format!("{what} {v} is negative"))
}

/// Normalises axes against `rank` (each in [-rank, rank)), rejecting duplicates.
pub fn norm_axes(axes: &[i64], rank: usize) -> Result<Vec<usize>, String> {
    let mut out = Vec::with_capacity(axes.len());
    for &a in axes {
        let r = rank as i64;
        if a < -r || a >= r {
            return Err(format!("axis {a} is out of range for rank {rank}"));
        }
        let a = if a < 0 { a + r } else { a } as usize;
        if out.contains(&a) {
            return Err(format!("axis {a} appears twice in axes {axes:?}"));
        }
        out.push(a);
    }
    Ok(out)
}

/// Advances the row-major multi-index `idx` (over `dims[..idx.len()]`, last dim fastest) by one element and
/// moves the offset `off` along with it by `strides`; after the last element both wrap back to the start.
#[inline(always)]
pub fn step_index(idx: &mut [usize], dims: &[usize], strides: &[usize], off: &mut usize) {
    for d in (0..idx.len()).rev() {
        idx[d] += 1;
        *off += strides[d];
        if idx[d] < dims[d] {
            break;
        }
        *off -= strides[d] * dims[d];
        idx[d] = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn broadcasting_and_axes() {
        assert_eq!(broadcast_shape(&[2, 1, 3], &[4, 1]).unwrap(), vec![2, 4, 3]);
        assert!(broadcast_shape(&[2], &[3]).is_err());
        assert_eq!(broadcast_strides(&[3], &[2, 3]), vec![0, 1]);
        assert_eq!(broadcast_strides(&[2, 1], &[2, 3]), vec![1, 0]);
        assert_eq!(norm_axis(-1, 3).unwrap(), 2);
        assert!(norm_axis(3, 3).is_err());
        let (mut idx, mut off) = (vec![0, 2], 2);
        step_index(&mut idx, &[2, 3], &[10, 1], &mut off);
        assert_eq!((idx.as_slice(), off), (&[1, 0][..], 10));
        step_index(&mut idx, &[2, 3], &[10, 1], &mut off);
        step_index(&mut idx, &[2, 3], &[10, 1], &mut off);
        step_index(&mut idx, &[2, 3], &[10, 1], &mut off);
        assert_eq!((idx.as_slice(), off), (&[0, 0][..], 0));
    }
}
