//! Resize (and Upsample): attributes, arity and shape rule.

use super::{info, Arity, InferError, Inferred, TypeInfo};
use crate::ir::{DType, Tensor};

/// Resize interpolation mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(missing_docs)]
pub enum ResizeMode {
    Nearest,
    Linear,
    Cubic,
}

/// How output coordinates map to input coordinates in Resize.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(missing_docs)]
pub enum CoordTransform {
    HalfPixel,
    HalfPixelSymmetric,
    PytorchHalfPixel,
    AlignCorners,
    Asymmetric,
    TfCropAndResize,
}

/// Rounding of the nearest-neighbour source index.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(missing_docs)]
pub enum NearestMode {
    RoundPreferFloor,
    RoundPreferCeil,
    Floor,
    Ceil,
}

/// Resize attributes. Inputs: x, roi?, scales?, sizes?.
#[derive(Clone, Debug, PartialEq)]
pub struct ResizeAttrs {
    /// Interpolation mode.
    pub mode: ResizeMode,
    /// Coordinate transformation.
    pub coord: CoordTransform,
    /// Nearest rounding.
    pub nearest: NearestMode,
    /// Cubic coefficient `a`.
    pub cubic_coeff_a: f32,
    /// Exclude outside pixels from cubic weights.
    pub exclude_outside: bool,
    /// Value for out-of-range samples in tf_crop_and_resize.
    pub extrapolation_value: f32,
}

/// Shape inference for Resize: the output shape needs constant `scales` or `sizes`.
pub fn infer(attrs: &ResizeAttrs, inputs: &[Option<TypeInfo>]) -> Result<Inferred, InferError> {
    let x = info(inputs, 0)?;
    let present = |i: usize| inputs.get(i).copied().flatten().filter(|t| t.shape.iter().product::<usize>() != 0);
    if attrs.coord == CoordTransform::TfCropAndResize && present(1).is_none() {
        return Err(InferError::Invalid("tf_crop_and_resize needs a roi input".into()));
    }
    let (scales, sizes) = (present(2), present(3));
    let shape = match (scales, sizes) {
        (Some(_), Some(_)) => return Err(InferError::Invalid("Resize takes scales or sizes, not both".into())),
        (None, None) => return Err(InferError::Invalid("Resize needs non-empty scales or sizes".into())),
        (Some(s), None) => match s.value {
            Some(t) => plan(x.shape, Some(t), None)?.0,
            None => return Err(InferError::Dynamic),
        },
        (None, Some(z)) => match z.value {
            Some(t) => plan(x.shape, None, Some(t))?.0,
            None => return Err(InferError::Dynamic),
        },
    };
    if attrs.mode != ResizeMode::Nearest && x.dtype == DType::Bool {
        return Err(InferError::Invalid("linear/cubic Resize does not take bool tensors".into()));
    }
    Ok(vec![(x.dtype, shape)])
}


/// Output shape and per-axis scale from `scales` (output = floor(in * scale)) or `sizes` (scale = out / in).
pub fn plan(shape: &[usize], scales: Option<&Tensor>, sizes: Option<&Tensor>) -> Result<(Vec<usize>, Vec<f64>), String> {
    let rank = shape.len();
    if let Some(s) = scales {
        if !s.dtype().is_float() || s.len() != rank {
            return Err(format!("scales must hold {rank} floats, got {}{:?}", s.dtype(), s.shape));
        }
        let sv = s.to_f64_vec();
        let mut out = Vec::with_capacity(rank);
        for (&d, &k) in shape.iter().zip(&sv) {
            if !(k > 0.0 && k.is_finite()) {
                return Err(format!("Resize scale {k} is not a positive number"));
            }
            let o = (d as f64 * k).floor();
            if o > (1u64 << 40) as f64 {
                return Err(format!("Resize scale {k} gives an output dimension of {o}"));
            }
            out.push(o as usize);
        }
        return Ok((out, sv));
    }
    let z = sizes.ok_or("Resize needs scales or sizes")?;
    if !matches!(z.dtype(), DType::I64 | DType::I32) || z.len() != rank {
        return Err(format!("sizes must hold {rank} i64 values, got {}{:?}", z.dtype(), z.shape));
    }
    let mut out = Vec::with_capacity(rank);
    let mut scale = Vec::with_capacity(rank);
    for (&d, &o) in shape.iter().zip(&z.to_i64_vec()) {
        if o < 0 {
            return Err(format!("Resize size {o} is negative"));
        }
        out.push(o as usize);
        scale.push(if d == 0 { 1.0 } else { o as f64 / d as f64 });
    }
    Ok((out, scale))
}

/// Taps of one axis: for output coordinate `o`, input indices `idx[o*taps..][..taps]` with weights `w`;

/// Arity: x, roi?, scales?, sizes?.
pub const ARITY: Arity = (1, 4, 1, 1);
