//! The normalisations: BatchNorm, InstanceNorm, GroupNorm, LayerNorm, LRN and LpNormalization: arity and
//! shape rules.

use super::dims::broadcast_shape;
use super::{info, Arity, InferError, Inferred, TypeInfo};
use crate::ir::DType;

/// Input 0, which must be a float tensor.
fn float_input<'a>(name: &str, inputs: &[Option<TypeInfo<'a>>]) -> Result<TypeInfo<'a>, InferError> {
    let x = info(inputs, 0)?;
    if !x.dtype.is_float() {
        return Err(InferError::Invalid(format!("{name} takes float tensors, not {}", x.dtype)));
    }
    Ok(x)
}

/// Shape rule of the per-channel normalisations: BatchNorm (`n_params` 5: x, scale, bias, mean, var),
/// InstanceNorm and GroupNorm (3: x, scale, bias; `groups` is GroupNorm's group count, whose parameters may
/// also have one value per group).
pub fn infer_channel_norm(name: &str, n_params: usize, groups: Option<usize>, inputs: &[Option<TypeInfo>]) -> Result<Inferred, InferError> {
    let x = float_input(name, inputs)?;
    if x.shape.len() < 2 {
        return Err(InferError::Invalid(format!("{name} needs an input of rank >= 2, got {:?}", x.shape)));
    }
    let c = x.shape[1];
    for i in 1..n_params {
        let p = info(inputs, i)?;
        let len: usize = p.shape.iter().product();
        let ok = len == c || groups == Some(len);
        if !ok || !p.dtype.is_float() {
            return Err(InferError::Invalid(format!("{name} input {i} is {}{:?}; expected a float tensor of {c} elements", p.dtype, p.shape)));
        }
    }
    if let Some(num_groups) = groups {
        if num_groups == 0 || c % num_groups != 0 {
            return Err(InferError::Invalid(format!("{c} channels do not split into {num_groups} groups")));
        }
    }
    Ok(vec![(x.dtype, x.shape.to_vec())])
}

/// Shape rule of LayerNorm over axes [axis, rank): y, and the f32 mean and inverse std-dev outputs.
pub fn infer_layer_norm(axis: usize, inputs: &[Option<TypeInfo>]) -> Result<Inferred, InferError> {
    let x = float_input("LayerNorm", inputs)?;
    let rank = x.shape.len();
    if axis >= rank {
        return Err(InferError::Invalid(format!("axis {axis} is out of range for rank {rank}")));
    }
    let norm = &x.shape[axis..];
    for i in 1..3 {
        if let Some(p) = inputs.get(i).copied().flatten() {
            if broadcast_shape(p.shape, norm).ok().as_deref() != Some(norm) {
                return Err(InferError::Invalid(format!(
                    "LayerNorm input {i} of shape {:?} does not broadcast to the normalised shape {norm:?}",
                    p.shape
                )));
            }
        }
    }
    let mut stat = x.shape[..axis].to_vec();
    stat.resize(rank, 1);
    Ok(vec![(x.dtype, x.shape.to_vec()), (DType::F32, stat.clone()), (DType::F32, stat)])
}

/// Shape rule of LRN: the input's shape.
pub fn infer_lrn(size: usize, inputs: &[Option<TypeInfo>]) -> Result<Inferred, InferError> {
    let x = float_input("Lrn", inputs)?;
    if x.shape.len() < 2 || size == 0 {
        return Err(InferError::Invalid(format!("LRN needs rank >= 2 and size >= 1, got {:?}, size {size}", x.shape)));
    }
    Ok(vec![(x.dtype, x.shape.to_vec())])
}

/// Shape rule of LpNormalization: the input's shape.
pub fn infer_lp_norm(axis: usize, p: u32, inputs: &[Option<TypeInfo>]) -> Result<Inferred, InferError> {
    let x = float_input("LpNorm", inputs)?;
    if axis >= x.shape.len().max(1) || !(p == 1 || p == 2) {
        return Err(InferError::Invalid(format!("LpNormalization with axis {axis} (rank {}) and p = {p}", x.shape.len())));
    }
    Ok(vec![(x.dtype, x.shape.to_vec())])
}

/// Arity of BatchNorm: x, scale, bias, mean, var.
pub const BATCH_NORM_ARITY: Arity = (5, 5, 1, 1);
/// Arity of InstanceNorm and GroupNorm: x, scale, bias.
pub const CHANNEL_NORM_ARITY: Arity = (3, 3, 1, 1);
/// Arity of LayerNorm: x, scale, bias?; y, mean?, inv_std_dev?.
pub const LAYER_NORM_ARITY: Arity = (2, 3, 1, 3);
/// Arity of LRN and LpNormalization.
pub const ARITY: Arity = (1, 1, 1, 1);
