//! MaxPool, AveragePool, LpPool and the global pools: attributes, arity and shape rules. The window
//! geometry is Conv's ([`super::conv::window_geom`]).

use super::conv::{window_geom, AutoPad, Geom, Window};
use super::{info, Arity, InferError, Inferred, TypeInfo};
use crate::ir::DType;

/// Pooling attributes.
#[derive(Clone, Debug, PartialEq)]
pub struct PoolAttrs {
    /// Kernel spatial shape.
    pub kernel_shape: Vec<usize>,
    /// Strides (empty: all 1).
    pub strides: Vec<usize>,
    /// Dilations (empty: all 1).
    pub dilations: Vec<usize>,
    /// Begin pads then end pads.
    pub pads: Vec<usize>,
    /// Padding mode.
    pub auto_pad: AutoPad,
    /// Use ceil instead of floor for the output size.
    pub ceil_mode: bool,
    /// AveragePool: whether padded cells count in the divisor.
    pub count_include_pad: bool,
}

/// The window geometry of a pool over input shape `x`.
pub fn geom_of(x: &[usize], a: &PoolAttrs, op: &str) -> Result<Geom, String> {
    if x.len() < 3 {
        return Err(format!("{op} input must have rank >= 3 (N, C, spatial...), got shape {x:?}"));
    }
    if a.kernel_shape.is_empty() {
        return Err(format!("{op} needs kernel_shape"));
    }
    let w = Window { kernel: &a.kernel_shape, strides: &a.strides, dilations: &a.dilations, pads: &a.pads, auto_pad: a.auto_pad, ceil_mode: a.ceil_mode };
    window_geom(&x[2..], &w, op)
}

/// [N, C, out...].
pub fn out_shape(x: &[usize], g: &Geom) -> Vec<usize> {
    let mut s = x[..2].to_vec();
    s.extend_from_slice(g.out_dims());
    s
}

/// Output shape of a global pool.
pub fn global_shape(x: &[usize], op: &str) -> Result<Vec<usize>, String> {
    if x.len() < 2 {
        return Err(format!("{op} input must have rank >= 2 (N, C, spatial...), got shape {x:?}"));
    }
    let mut s = x[..2].to_vec();
    s.resize(x.len(), 1);
    Ok(s)
}

/// MaxPool takes any non-bool type, the other pools float types.
pub fn check_dtype(name: &str, max: bool, d: DType) -> Result<(), String> {
    let ok = if max { d != DType::Bool } else { d.is_float() };
    if ok {
        Ok(())
    } else {
        Err(format!("{name} does not support {d}"))
    }
}

/// Shape rule of MaxPool: the pooled values and the (optional) i64 indices output, always both reported.
pub fn infer_max(a: &PoolAttrs, inputs: &[Option<TypeInfo>]) -> Result<Inferred, InferError> {
    let x = info(inputs, 0)?;
    check_dtype("MaxPool", true, x.dtype)?;
    let s = out_shape(x.shape, &geom_of(x.shape, a, "MaxPool")?);
    Ok(vec![(x.dtype, s.clone()), (DType::I64, s)])
}

/// Shape rule of AveragePool and LpPool (`name` says which).
pub fn infer_window(name: &str, a: &PoolAttrs, inputs: &[Option<TypeInfo>]) -> Result<Inferred, InferError> {
    let x = info(inputs, 0)?;
    check_dtype(name, false, x.dtype)?;
    Ok(vec![(x.dtype, out_shape(x.shape, &geom_of(x.shape, a, name)?))])
}

/// Shape rule of GlobalAveragePool and GlobalMaxPool (`name` says which): spatial dims become 1.
pub fn infer_global(name: &str, inputs: &[Option<TypeInfo>]) -> Result<Inferred, InferError> {
    let x = info(inputs, 0)?;
    check_dtype(name, false, x.dtype)?;
    Ok(vec![(x.dtype, global_shape(x.shape, name)?)])
}

/// Arity of MaxPool: x; values and optional indices.
pub const MAX_POOL_ARITY: Arity = (1, 1, 1, 2);
/// Arity of the other pools: x; one output.
pub const ARITY: Arity = (1, 1, 1, 1);
