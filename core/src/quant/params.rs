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

/// TF's quantizer's `kNearZeroTolerance`: a range (activation or weight channel) narrower than this is widened
/// to it (`ExpandVerySmallRange` of TF's MLIR quantizer), so that no scale is so small that the numbers derived
/// from it (TFLite's `Quantize` of a fused RELU6 bound, effective multipliers, int32 biases) overflow.
pub const NEAR_ZERO: f64 = 1.0e-6;

/// TF's `ExpandVerySmallRange`: `[lo, hi]` as it is when wider than [`NEAR_ZERO`], else widened to contain
/// `[-NEAR_ZERO/2, NEAR_ZERO/2]`.
pub fn expand_very_small_range(lo: f64, hi: f64) -> (f64, f64) {
    if hi - lo > NEAR_ZERO {
        (lo, hi)
    } else {
        (lo.min(-NEAR_ZERO / 2.0), hi.max(NEAR_ZERO / 2.0))
    }
}

/// Asymmetric per-tensor int8 parameters covering `[min, max]` (the range is first widened to contain 0, as
/// the spec requires, so that 0 is exactly representable, then to at least [`NEAR_ZERO`] as TF's converter
/// does). Returns (scale, zero_point).
pub fn asymmetric(min: f32, max: f32) -> (f32, i64) {
    let lo = (min.min(0.0)) as f64;
    let hi = (max.max(0.0)) as f64;
    if !(hi - lo).is_finite() || hi - lo <= 0.0 {
        // A tensor that is always 0: any scale represents it; 1/255 keeps later rescales well-conditioned.
        return ((1.0f64 / 255.0) as f32, 0);
    }
    // A tensor that is almost always 0 (a dead channel's output): a scale of e.g. 1e-14 would make LiteRT
    // refuse a fused RELU6 (`6 / scale` overflows int32 in `CalculateActivationRangeQuantized`).
    let (lo, hi) = expand_very_small_range(lo, hi);
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
/// A channel whose weights are all zero or tiny (`2·absmax` within [`NEAR_ZERO`]) gets the scale of
/// `absmax = NEAR_ZERO / 2`, as TF's converter gives it (its weights then quantize to 0, which is what they
/// are to int8 precision).
pub fn symmetric_scale(absmax: f32) -> f32 {
    if !absmax.is_finite() {
        return 1.0;
    }
    if 2.0 * absmax as f64 > NEAR_ZERO {
        absmax / 127.0
    } else {
        (NEAR_ZERO / 2.0 / 127.0) as f32
    }
}

/// The smallest weight scale whose int32 bias `bias / (input_scale · weight_scale)` stays within half the
/// int32 range (TF's `AdjustWeightsForBiasScale`): `weight_scale` itself when it does, else
/// `2·|bias| / (i32::MAX · input_scale)`.
pub fn scale_for_bias(weight_scale: f32, bias: f64, input_scale: f32) -> f32 {
    let k = i32::MAX as f64;
    if bias.abs() >= 0.5 * input_scale as f64 * weight_scale as f64 * k {
        (2.0 * bias.abs() / k / input_scale as f64) as f32
    } else {
        weight_scale
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
    fn near_zero_ranges_are_widened_as_tf_does() {
        // A range of 1e-12 would give a scale of ~4e-15; TF widens it to 1e-6 (scale 1e-6/255).
        let (s, _) = asymmetric(0.0, 1e-12);
        assert!((s as f64 - 1e-6 / 255.0).abs() < 1e-12, "{s}");
        // LiteRT's RELU6 bound 6/scale then fits int32.
        assert!((6.0 / s as f64).round() <= i32::MAX as f64);
        // Wider ranges are untouched.
        assert_eq!(asymmetric(0.0, 1e-3).0, (1e-3f64 / 255.0) as f32);
        // Weight channels: all zero or 1e-9 get absmax 5e-7; larger ones max|w|/127.
        assert_eq!(symmetric_scale(0.0), (5e-7f64 / 127.0) as f32);
        assert_eq!(symmetric_scale(1e-9), (5e-7f64 / 127.0) as f32);
        assert_eq!(symmetric_scale(0.5), 0.5f32 / 127.0);
        // A bias that would overflow int32 at this weight scale widens it (TF's AdjustWeightsForBiasScale).
        let s = scale_for_bias(1e-11, 0.5, 0.02);
        assert!((0.5 / (0.02 * s as f64)).abs() <= 0.5 * i32::MAX as f64 + 1.0, "{s}");
        assert_eq!(scale_for_bias(0.01, 0.5, 0.02), 0.01);
    }

    #[test]
    fn rounding_is_half_away_from_zero() {
        assert_eq!(quantize_one(0.5, 1.0, 0, -127), 1);
        assert_eq!(quantize_one(-0.5, 1.0, 0, -127), -1);
        assert_eq!(quantize_one(2.5, 1.0, 0, -127), 3);
        assert_eq!(quantize_one(-1000.0, 1.0, 0, -127), -127);
    }
}
