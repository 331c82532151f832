//! Softmax, LogSoftmax and Hardmax along one axis: arity and shape rule.

use super::{info, Arity, InferError, Inferred, TypeInfo};
use crate::ir::DType;

/// Checks dtype and axis; returns (outer, n, inner): the slices along `axis` are `n` long with stride `inner`.
pub fn geometry(name: &str, dt: DType, shape: &[usize], axis: usize) -> Result<(usize, usize, usize), String> {
    if !dt.is_float() {
        return Err(format!("{name} is not defined for {dt}"));
    }
    if shape.is_empty() {
        // a scalar is one slice of one element
        return if axis == 0 { Ok((1, 1, 1)) } else { Err(format!("axis {axis} is out of range for rank 0")) };
    }
    if axis >= shape.len() {
        return Err(format!("axis {axis} is out of range for rank {}", shape.len()));
    }
    Ok((shape[..axis].iter().product(), shape[axis], shape[axis + 1..].iter().product()))
}

/// Shape rule of Softmax, LogSoftmax and Hardmax (`name` says which): the input's dtype and shape.
pub fn infer(name: &str, axis: usize, inputs: &[Option<TypeInfo>]) -> Result<Inferred, InferError> {
    let x = info(inputs, 0)?;
    geometry(name, x.dtype, x.shape, axis)?;
    Ok(vec![(x.dtype, x.shape.to_vec())])
}

/// Arity: x.
pub const ARITY: Arity = (1, 1, 1, 1);
