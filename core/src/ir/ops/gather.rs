//! Gather, GatherElements, GatherND, ScatterElements, ScatterND and TensorScatter: arity and shape rules.

use super::elementwise::BinaryOp;
use super::{info, Arity, InferError, Inferred, TypeInfo};
use crate::ir::DType;

/// Indices are i32 or i64.
pub fn check_index_dtype(d: DType) -> Result<(), String> {
    match d {
        DType::I32 | DType::I64 => Ok(()),
        _ => Err(format!("indices must be int32 or int64, not {d}")),
    }
}

// ---------------------------------------------------------------------------------------------------------
// Shape rules
// ---------------------------------------------------------------------------------------------------------

/// Output shape of Gather.
pub fn gather_shape(data: &[usize], idx: &[usize], axis: usize) -> Result<Vec<usize>, String> {
    if axis >= data.len() {
        return Err(format!("axis {axis} is out of range for rank {}", data.len()));
    }
    Ok(data[..axis].iter().chain(idx).chain(&data[axis + 1..]).copied().collect())
}

/// Checks an indices shape against the data shape for the *Elements ops.
pub fn elements_check(data: &[usize], idx: &[usize], axis: usize) -> Result<(), String> {
    if axis >= data.len() {
        return Err(format!("axis {axis} is out of range for rank {}", data.len()));
    }
    if idx.len() != data.len() || idx.iter().zip(data).enumerate().any(|(d, (&i, &n))| d != axis && i > n) {
        return Err(format!("indices shape {idx:?} does not fit data shape {data:?} on axis {axis}"));
    }
    Ok(())
}

/// Output shape of GatherND.
pub fn gather_nd_shape(data: &[usize], idx: &[usize], b: usize) -> Result<Vec<usize>, String> {
    let (r, q) = (data.len(), idx.len());
    if q == 0 || r == 0 {
        return Err("data and indices must have rank >= 1".into());
    }
    if b >= q.min(r) {
        return Err(format!("batch_dims {b} must be less than the ranks of data ({r}) and indices ({q})"));
    }
    if data[..b] != idx[..b] {
        return Err(format!("batch dims of data {data:?} and indices {idx:?} differ"));
    }
    let m = idx[q - 1];
    if m < 1 || b + m > r {
        return Err(format!("the last indices dim {m} must be in 1..={}", r - b));
    }
    Ok(idx[..q - 1].iter().chain(&data[b + m..]).copied().collect())
}

/// Checks ScatterND's updates shape.
pub fn scatter_nd_check(data: &[usize], idx: &[usize], upd: &[usize]) -> Result<(), String> {
    let q = idx.len();
    let m = *idx.last().ok_or("indices must have rank >= 1")?;
    if m > data.len() {
        return Err(format!("the last indices dim {m} exceeds the data rank {}", data.len()));
    }
    let want: Vec<usize> = idx[..q - 1].iter().chain(&data[m..]).copied().collect();
    if upd != want.as_slice() {
        return Err(format!("updates shape {upd:?} should be {want:?}"));
    }
    Ok(())
}

/// Checks TensorScatter's shapes: `cache` and `update` of one rank, equal but on `axis` (≥ 1: dim 0 is the
/// batch), where the update has at most the cache's positions; `write_indices`, when given, is `[batch]`.
pub fn tensor_scatter_check(cache: &[usize], update: &[usize], indices: Option<&[usize]>, axis: usize) -> Result<(), String> {
    let r = cache.len();
    if axis == 0 || axis >= r {
        return Err(format!("axis {axis} must be a sequence axis after the batch axis of a rank-{r} cache"));
    }
    let fits = update.len() == r && (0..r).all(|d| if d == axis { update[d] <= cache[d] } else { update[d] == cache[d] });
    if !fits {
        return Err(format!("update {update:?} does not fit cache {cache:?} (equal dims, at most as many positions on axis {axis})"));
    }
    match indices {
        Some(i) if i != [cache[0]] => Err(format!("write_indices {i:?} should be [{}] (one per batch row)", cache[0])),
        _ => Ok(()),
    }
}

/// Shape rule of TensorScatter: the cache's shape.
pub fn infer_tensor_scatter(axis: usize, inputs: &[Option<TypeInfo>]) -> Result<Inferred, InferError> {
    let cache = info(inputs, 0)?;
    let update = info(inputs, 1)?;
    if update.dtype != cache.dtype {
        return Err(InferError::Invalid(format!("the update is {}, the cache {}", update.dtype, cache.dtype)));
    }
    let idx = inputs.get(2).copied().flatten();
    if let Some(i) = idx {
        if i.dtype != DType::I64 {
            return Err(InferError::Invalid(format!("write_indices must be int64, not {}", i.dtype)));
        }
    }
    tensor_scatter_check(cache.shape, update.shape, idx.map(|i| i.shape), axis)?;
    Ok(vec![(cache.dtype, cache.shape.to_vec())])
}

/// The scatter reductions: none, add, mul, max, min.
pub fn reduction_ok(r: Option<BinaryOp>) -> Result<(), String> {
    match r {
        None | Some(BinaryOp::Add | BinaryOp::Mul | BinaryOp::Max | BinaryOp::Min) => Ok(()),
        Some(o) => Err(format!("reduction {o:?} is not one of none/add/mul/max/min")),
    }
}


/// The data and (checked) indices inputs.
fn data_and_indices<'a>(inputs: &[Option<TypeInfo<'a>>]) -> Result<(TypeInfo<'a>, TypeInfo<'a>), InferError> {
    let data = info(inputs, 0)?;
    let idx = info(inputs, 1)?;
    check_index_dtype(idx.dtype)?;
    Ok((data, idx))
}

/// Shape rule of Gather along `axis`.
pub fn infer_gather(axis: usize, inputs: &[Option<TypeInfo>]) -> Result<Inferred, InferError> {
    let (data, idx) = data_and_indices(inputs)?;
    Ok(vec![(data.dtype, gather_shape(data.shape, idx.shape, axis)?)])
}

/// Shape rule of GatherElements along `axis`: the indices' shape.
pub fn infer_gather_elements(axis: usize, inputs: &[Option<TypeInfo>]) -> Result<Inferred, InferError> {
    let (data, idx) = data_and_indices(inputs)?;
    elements_check(data.shape, idx.shape, axis)?;
    Ok(vec![(data.dtype, idx.shape.to_vec())])
}

/// Shape rule of GatherND.
pub fn infer_gather_nd(batch_dims: usize, inputs: &[Option<TypeInfo>]) -> Result<Inferred, InferError> {
    let (data, idx) = data_and_indices(inputs)?;
    Ok(vec![(data.dtype, gather_nd_shape(data.shape, idx.shape, batch_dims)?)])
}

/// The data, indices and updates of a scatter, checked for types and reduction.
fn scatter_inputs<'a>(reduction: Option<BinaryOp>, inputs: &[Option<TypeInfo<'a>>]) -> Result<[TypeInfo<'a>; 3], InferError> {
    let (data, idx) = data_and_indices(inputs)?;
    reduction_ok(reduction)?;
    let upd = info(inputs, 2)?;
    if upd.dtype != data.dtype {
        return Err(InferError::Invalid(format!("updates are {}, data is {}", upd.dtype, data.dtype)));
    }
    Ok([data, idx, upd])
}

/// Shape rule of ScatterElements along `axis`: the data's shape.
pub fn infer_scatter_elements(axis: usize, reduction: Option<BinaryOp>, inputs: &[Option<TypeInfo>]) -> Result<Inferred, InferError> {
    let [data, idx, upd] = scatter_inputs(reduction, inputs)?;
    elements_check(data.shape, idx.shape, axis)?;
    if upd.shape != idx.shape {
        return Err(InferError::Invalid(format!("updates shape {:?} differs from indices shape {:?}", upd.shape, idx.shape)));
    }
    Ok(vec![(data.dtype, data.shape.to_vec())])
}

/// Shape rule of ScatterND: the data's shape.
pub fn infer_scatter_nd(reduction: Option<BinaryOp>, inputs: &[Option<TypeInfo>]) -> Result<Inferred, InferError> {
    let [data, idx, upd] = scatter_inputs(reduction, inputs)?;
    scatter_nd_check(data.shape, idx.shape, upd.shape)?;
    Ok(vec![(data.dtype, data.shape.to_vec())])
}

/// Arity of the gathers: data, indices.
pub const GATHER_ARITY: Arity = (2, 2, 1, 1);
/// Arity of the scatters: data, indices, updates.
pub const SCATTER_ARITY: Arity = (3, 3, 1, 1);
/// Arity of TensorScatter: cache, update, write_indices?.
pub const TENSOR_SCATTER_ARITY: Arity = (2, 3, 1, 1);
