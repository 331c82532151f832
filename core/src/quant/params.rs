//! Quantization parameters per the TFLite int8 specification
//! (<https://ai.google.dev/edge/litert/models/quantization_spec>): activations are asymmetric per-tensor
//! int8 in [-128, 127] whose range always contains 0; weights are symmetric int8 in [-127, 127] with zero
//! point 0, per output channel for convolutions; biases are int32 with scale `input_scale * weight_scale`
//! and zero point 0.

use crate::ir::QuantParams;

/// Smallest int8 activation value.
pub const QMIN: i64 = -128;
/// Largest int8 value.
pub const QMAX: i64 = 127;

/// Rounds half away from zero (TFLite's `std::round`).
pub fn round_away(x: f64) -> f64 {
    x.round()
}

/// Asymmetric per-tensor int8 parameters covering `[min, max]` (the range is first widened to contain 0, as
/// the spec requires, so that 0 is exactly representable). Returns (scale, zero_point).
pub fn asymmetric(min: f32, max: f32) -> (f32, i64) {
    let lo = (min.min(0.0)) as f64;
    let hi = (max.max(0.0)) as f64;
    if !(hi - lo).is_finite() || hi - lo <= 0.0 {
        // A tensor that is always 0: any scale represents it; 1/255 keeps later rescales well-conditioned.
        return ((1.0f64 / 255.0) as f32, 0);
    }
    let scale = (hi - lo) / (QMAX - QMIN) as f64;
    // Nudged zero point: the integer closest to where real 0 falls.
    let zp = round_away(QMIN as f64 - lo / scale).clamp(QMIN as f64, QMAX as f64) as i64;
    (scale as f32, zp)
}

/// Per-tensor activation parameters for `[min, max]`.
pub fn activation_params(min: f32, max: f32) -> QuantParams {
    let (s, z) = asymmetric(min, max);
    QuantParams { scale: vec![s], zero_point: vec![z], axis: None }
}

/// Symmetric int8 scale for values whose largest magnitude is `absmax` (weights: [-127, 127], zero point 0).
pub fn symmetric_scale(absmax: f32) -> f32 {
    if absmax > 0.0 && absmax.is_finite() {
        absmax / 127.0
    } else {
        // An all-zero channel: any positive scale is exact; TFLite's quantizer uses 1.
        1.0
    }
}

/// Quantizes one value with (scale, zero point) into int8 [qmin, 127], rounding half away from zero.
pub fn quantize_one(x: f32, scale: f32, zp: i64, qmin: i64) -> i8 {
    (round_away(x as f64 / scale as f64) as i64 + zp).clamp(qmin, QMAX) as i8
}

/// Signal-to-quantization-noise ratio in dB of `got` against `want`: 10·log10(Σwant² / Σ(want−got)²).
/// `f64::INFINITY` when they are equal.
pub fn sqnr_db(want: &[f64], got: &[f64]) -> f64 {
    let signal: f64 = want.iter().map(|x| x * x).sum();
    let noise: f64 = want.iter().zip(got).map(|(a, b)| (a - b) * (a - b)).sum();
    if noise == 0.0 {
        f64::INFINITY
    } else if signal == 0.0 {
        f64::NEG_INFINITY
    } else {
        10.0 * (signal / noise).log10()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn range_contains_zero_and_zero_is_exact() {
        let (s, z) = asymmetric(0.5, 6.0);
        assert!((s - 6.0 / 255.0).abs() < 1e-7);
        assert_eq!(z, -128);
        let (s, z) = asymmetric(-1.0, 1.0);
        assert!((s - 2.0 / 255.0).abs() < 1e-7);
        // real 0 -> q = z, and both ends stay inside [-128, 127]
        assert!((-1.0 / s as f64 + z as f64).round() >= -128.0);
        assert!((1.0 / s as f64 + z as f64).round() <= 127.0);
        assert_eq!(asymmetric(-3.0, -1.0).1, 127);
    }

    #[test]
    fn rounding_is_half_away_from_zero() {
        assert_eq!(quantize_one(0.5, 1.0, 0, -127), 1);
        assert_eq!(quantize_one(-0.5, 1.0, 0, -127), -1);
        assert_eq!(quantize_one(2.5, 1.0, 0, -127), 3);
        assert_eq!(quantize_one(-1000.0, 1.0, 0, -127), -127);
    }
}
