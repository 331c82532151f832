//! Resize (nearest, linear, cubic), separable per axis.
//!
//! For each resized axis the 1-D interpolation is computed here, following the ONNX reference
//! (`onnx/reference/ops/op_resize.py`): each output coordinate maps to a source coordinate (coordinate
//! transformation mode), which selects `n` neighbouring source indices (clamped to the edges) with weights
//! (nearest: one-hot by the rounding mode; linear: 2 taps; cubic: 4 taps with `cubic_coeff_a`, optionally
//! excluding outside taps). Nearest becomes a `gather` with the chosen indices (exact); linear and cubic a
//! matrix product with the [out, in] weight matrix at full precision.

use tpu_sdk_core::ir::{CoordTransform, NearestMode, Node, ResizeAttrs, ResizeMode, Tensor};

use super::emit::{Cx, V};
use super::Precision;
use crate::error::Result;

pub(super) fn resize(cx: &mut Cx, node: &Node, a: &ResizeAttrs) -> Result<V> {
    let x = cx.input(node, 0)?;
    let (_, out_shape) = cx.out(node, 0);
    if out_shape.len() != x.rank() {
        return Err(cx.unsupported(node, "output rank differs from input rank"));
    }
    let rank = x.rank();
    // tf_crop_and_resize: the region of interest (starts then ends, normalised), constant in a static program.
    let roi: Option<Vec<f64>> = if a.coord == CoordTransform::TfCropAndResize {
        match cx.const_input(node, 1) {
            Some(t) if t.dtype().is_float() && t.len() == 2 * rank => Some(t.to_f64_vec()),
            _ => return Err(cx.unsupported(node, format!("tf_crop_and_resize needs a roi of {} floats that must be a constant", 2 * rank))),
        }
    } else {
        None
    };
    if a.mode != ResizeMode::Nearest && !x.dtype.is_float() {
        return Err(cx.unsupported(node, format!("{:?} interpolation of {}", a.mode, x.dtype)));
    }
    let scales: Option<Vec<f64>> = match cx.const_input(node, 2) {
        Some(t) if !t.is_empty() => Some(t.to_f64_vec()),
        _ => None,
    };
    if scales.is_none() && node.input(3).is_some() && cx.const_input(node, 3).is_none() {
        return Err(cx.unsupported(node, "sizes must be a constant for a static TPU program"));
    }
    if let Some(s) = &scales {
        if s.len() != x.rank() {
            return Err(cx.unsupported(node, format!("{} scales for rank {}", s.len(), x.rank())));
        }
    }
    let mut v = x.clone();
    for axis in 0..x.rank() {
        let (n_in, n_out) = (x.shape[axis], out_shape[axis]);
        let scale = match &scales {
            Some(s) => s[axis],
            None => n_out as f64 / n_in.max(1) as f64,
        };
        let roi_a = roi.as_ref().map_or((0.0, 1.0), |r| (r[axis], r[rank + axis]));
        if n_in == n_out && scale == 1.0 && roi_a == (0.0, 1.0) {
            continue;
        }
        if n_in == 0 || n_out == 0 || scale <= 0.0 {
            return Err(cx.unsupported(node, format!("resizing axis {axis} from {n_in} to {n_out} (scale {scale})")));
        }
        let (taps, outside) = weights_1d(a, n_in, n_out, scale, roi_a);
        let extrapolate = outside.iter().any(|&o| o);
        if extrapolate && !v.dtype.is_float() {
            return Err(cx.unsupported(node, format!("tf_crop_and_resize extrapolation of {}", v.dtype)));
        }
        v = if a.mode == ResizeMode::Nearest && !extrapolate {
            let idx: Vec<i64> = taps
                .iter()
                .map(|t| t.iter().find(|(_, w)| *w != 0.0).map_or(0, |(i, _)| *i as i64))
                .collect();
            let iv = cx.constant(&Tensor::from_i64(vec![n_out], idx));
            cx.gather_axis(&v, axis, &iv)
        } else {
            let mut w = vec![0f32; n_out * n_in];
            for (o, t) in taps.iter().enumerate() {
                for &(i, c) in t {
                    w[o * n_in + i] += c as f32;
                }
            }
            let wm = cx.constant(&Tensor::from_f32(vec![n_out, n_in], w));
            let wm = cx.convert(&wm, v.dtype);
            // [.., in, ..] x [out, in] -> [.. (without axis), out], then move `out` back into place.
            let r = cx.dot_general_with(&v, &wm, (&[], &[]), (&[axis], &[1]), Precision::Highest);
            let rank = v.rank();
            let perm: Vec<usize> = (0..rank).map(|d| if d < axis { d } else if d == axis { rank - 1 } else { d - 1 }).collect();
            let r = cx.transpose(&r, &perm);
            if extrapolate {
                // Positions outside the input take the extrapolation value (their weight rows are zero).
                let e = a.extrapolation_value;
                let fill = Tensor::from_f32(vec![n_out], outside.iter().map(|&o| if o { e } else { 0.0 }).collect());
                let fill = cx.constant(&fill);
                let fill = cx.convert(&fill, r.dtype);
                let fill = cx.broadcast_in_dim(&fill, &[axis], &r.shape.clone());
                cx.add(&r, &fill)
            } else {
                r
            }
        };
    }
    Ok(v)
}

/// For each output index along one axis: (source index, weight) pairs, and whether the position lies outside the
/// input (tf_crop_and_resize only: it takes the extrapolation value, its weights are zero).
fn weights_1d(a: &ResizeAttrs, n_in: usize, n_out: usize, scale: f64, roi: (f64, f64)) -> (Vec<Vec<(usize, f64)>>, Vec<bool>) {
    let in_w = n_in as f64;
    let out_w = scale * in_w;
    let mut outside = vec![false; n_out];
    let taps = (0..n_out)
        .map(|o| {
            let x = o as f64;
            let x_ori = match a.coord {
                CoordTransform::AlignCorners => {
                    if out_w == 1.0 {
                        0.0
                    } else {
                        x * (in_w - 1.0) / (out_w - 1.0)
                    }
                }
                CoordTransform::Asymmetric => x / scale,
                CoordTransform::PytorchHalfPixel => {
                    if out_w == 1.0 {
                        -0.5
                    } else {
                        (x + 0.5) / scale - 0.5
                    }
                }
                CoordTransform::HalfPixel => (x + 0.5) / scale - 0.5,
                CoordTransform::HalfPixelSymmetric => {
                    let adjustment = n_out as f64 / out_w;
                    let center = in_w / 2.0;
                    center * (1.0 - adjustment) + (x + 0.5) / scale - 0.5
                }
                CoordTransform::TfCropAndResize => {
                    let v = if out_w == 1.0 {
                        (roi.1 - roi.0) * (in_w - 1.0) / 2.0
                    } else {
                        x * (roi.1 - roi.0) * (in_w - 1.0) / (out_w - 1.0)
                    };
                    v + roi.0 * (in_w - 1.0)
                }
            };
            if a.coord == CoordTransform::TfCropAndResize && !(x_ori >= 0.0 && x_ori <= in_w - 1.0) {
                outside[o] = true;
                return Vec::new();
            }
            let integer = x_ori.fract() == 0.0;
            let ratio = if integer { 1.0 } else { x_ori - x_ori.floor() };
            let coeffs: Vec<f64> = match a.mode {
                ResizeMode::Nearest => {
                    if integer {
                        vec![0.0, 1.0]
                    } else {
                        let second = match a.nearest {
                            NearestMode::RoundPreferFloor => ratio > 0.5,
                            NearestMode::RoundPreferCeil => ratio >= 0.5,
                            NearestMode::Floor => false,
                            NearestMode::Ceil => true,
                        };
                        if second {
                            vec![0.0, 1.0]
                        } else {
                            vec![1.0, 0.0]
                        }
                    }
                }
                ResizeMode::Linear => vec![1.0 - ratio, ratio],
                ResizeMode::Cubic => {
                    let aa = a.cubic_coeff_a as f64;
                    let r = ratio;
                    vec![
                        ((aa * (r + 1.0) - 5.0 * aa) * (r + 1.0) + 8.0 * aa) * (r + 1.0) - 4.0 * aa,
                        ((aa + 2.0) * r - (aa + 3.0)) * r * r + 1.0,
                        ((aa + 2.0) * (1.0 - r) - (aa + 3.0)) * (1.0 - r) * (1.0 - r) + 1.0,
                        ((aa * ((1.0 - r) + 1.0) - 5.0 * aa) * ((1.0 - r) + 1.0) + 8.0 * aa) * ((1.0 - r) + 1.0) - 4.0 * aa,
                    ]
                }
            };
            let n = coeffs.len() as i64;
            // The n source positions around x_ori, the left one preferred (ratio in (0, 1]).
            let base = if integer { x_ori as i64 - 1 } else { x_ori.floor() as i64 };
            let first = base - (n / 2 - 1);
            let mut taps: Vec<(i64, f64)> = (0..n).map(|k| (first + k, coeffs[k as usize])).collect();
            if a.exclude_outside {
                let mut sum = 0.0;
                for t in taps.iter_mut() {
                    if t.0 < 0 || t.0 >= n_in as i64 {
                        t.1 = 0.0;
                    }
                    sum += t.1;
                }
                if sum != 0.0 {
                    for t in taps.iter_mut() {
                        t.1 /= sum;
                    }
                }
            }
            // Edge padding: positions outside the input read the border element.
            taps.into_iter().map(|(i, w)| (i.clamp(0, n_in as i64 - 1) as usize, w)).collect()
        })
        .collect();
    (taps, outside)
}
