//! Fixed-point arithmetic of TFLite's integer kernels, bit for bit: `QuantizeMultiplier`,
//! gemmlowp's `SaturatingRoundingDoublingHighMul` and `RoundingDivideByPOT`, and the ways LiteRT applies a
//! quantized multiplier to an i32 accumulator:
//!
//! * [`mul_double_round`]: `MultiplyByQuantizedMultiplier` of TFLite's `common.h` (the default build, without
//!   `TFLITE_SINGLE_ROUNDING`): a rounding doubling high multiply, then a rounding right shift, half away
//!   from zero. Used by the element-wise kernels, depthwise convolution, requantization and scalar tails.
//! * [`mul_neon_rshl`]: the same high multiply, then a right shift rounding half *up* (NEON's `vrshl`).
//!   LiteRT's x86-64 build compiles its NEON code paths through NEON_2_SSE, so this is what CONV_2D's and
//!   FULLY_CONNECTED's GEMM output stage and the vectorised part of MEAN compute there.
//! * [`mul_single_round`]: ruy's reference `MultiplyByQuantizedMultiplier` (`(x·m + 2^(n-1)) >> n`), kept for
//!   comparison; LiteRT's x86-64 build was found not to use it.

/// A real multiplier as TFLite stores it: `real ≈ multiplier · 2^(shift - 31)`, `multiplier` in [2^30, 2^31).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Multiplier {
    /// Q31 significand.
    pub multiplier: i32,
    /// Power-of-two exponent (positive: left shift).
    pub shift: i32,
}

/// TFLite's `QuantizeMultiplier(double, int32*, int*)`: frexp, round the significand to Q31 (half away from
/// zero), renormalise a significand that rounded up to 2^31, and flush multipliers below 2^-31 to zero.
pub fn quantize_multiplier(m: f64) -> Multiplier {
    if m == 0.0 {
        return Multiplier { multiplier: 0, shift: 0 };
    }
    let (q, mut shift) = frexp(m);
    let mut q_fixed = (q * (1i64 << 31) as f64).round() as i64;
    if q_fixed == 1i64 << 31 {
        q_fixed /= 2;
        shift += 1;
    }
    if shift < -31 {
        shift = 0;
        q_fixed = 0;
    }
    Multiplier { multiplier: q_fixed as i32, shift }
}

/// `frexp`: `m = q · 2^e` with `|q|` in [0.5, 1).
fn frexp(m: f64) -> (f64, i32) {
    if m == 0.0 || !m.is_finite() {
        return (m, 0);
    }
    let bits = m.to_bits();
    let exp = ((bits >> 52) & 0x7ff) as i32;
    if exp == 0 {
        // subnormal: scale up first
        let (q, e) = frexp(m * (1u64 << 54) as f64);
        return (q, e - 54);
    }
    let e = exp - 1022;
    let q = f64::from_bits((bits & !(0x7ffu64 << 52)) | (1022u64 << 52));
    (q, e)
}

/// gemmlowp `SaturatingRoundingDoublingHighMul` for i32.
#[inline(always)]
pub fn srdhm(a: i32, b: i32) -> i32 {
    if a == b && a == i32::MIN {
        return i32::MAX;
    }
    let ab = a as i64 * b as i64;
    let nudge = if ab >= 0 { 1i64 << 30 } else { 1 - (1i64 << 30) };
    // C++ integer division truncates toward zero, as Rust's does
    ((ab + nudge) / (1i64 << 31)) as i32
}

/// gemmlowp `RoundingDivideByPOT` for i32: divide by 2^exponent rounding half away from zero.
#[inline(always)]
pub fn rounding_divide_by_pot(x: i32, exponent: i32) -> i32 {
    let mask = ((1i64 << exponent) - 1) as i32;
    let remainder = x & mask;
    let threshold = (mask >> 1) + i32::from(x < 0);
    (x >> exponent) + i32::from(remainder > threshold)
}

/// TFLite `MultiplyByQuantizedMultiplier` (double rounding, the default build).
#[inline(always)]
pub fn mul_double_round(x: i32, m: Multiplier) -> i32 {
    let left = m.shift.max(0);
    let right = (-m.shift).max(0);
    rounding_divide_by_pot(srdhm(x.wrapping_mul(1 << left), m.multiplier), right)
}

/// The NEON form `vrshlq_s32(vqrdmulhq_s32(x << left, m), -right)` (`MultiplyByQuantizedMultiplier4Rows`):
/// the rounding doubling high multiply, then a rounding right shift that rounds half *up* (`vrshl` adds
/// `2^(n-1)` before shifting), unlike `RoundingDivideByPOT`. LiteRT's x86-64 build runs such NEON code
/// through NEON_2_SSE, so its results depend on which elements a kernel's vector loop covers.
#[inline(always)]
pub fn mul_neon_rshl(x: i32, m: Multiplier) -> i32 {
    let left = m.shift.max(0);
    let right = (-m.shift).max(0);
    let h = srdhm(x.wrapping_mul(1 << left), m.multiplier);
    if right == 0 {
        h
    } else {
        ((h as i64 + (1i64 << (right - 1))) >> right) as i32
    }
}

/// ruy's `MultiplyByQuantizedMultiplier` (single rounding).
#[inline(always)]
pub fn mul_single_round(x: i32, m: Multiplier) -> i32 {
    let total_shift = 31 - m.shift;
    let round = 1i64 << (total_shift - 1);
    ((x as i64 * m.multiplier as i64 + round) >> total_shift) as i32
}

/// TFLite `MultiplyByQuantizedMultiplierSmallerThanOneExp` (the shift is ≤ 0).
#[inline(always)]
pub fn mul_smaller_than_one(x: i32, m: Multiplier) -> i32 {
    rounding_divide_by_pot(srdhm(x, m.multiplier), -m.shift)
}

/// TFLite `GetInvSqrtQuantizedMultiplierExp(input, kReverseShift)` (`common.h`): `1/sqrt(input)` as a Q31
/// multiplier and a (left) shift, by five Newton-Raphson steps in gemmlowp's 3-integer-bit fixed point.
/// Inputs 0 and 1 give `(i32::MAX, 0)`.
pub fn inv_sqrt_multiplier(input: i32) -> Multiplier {
    if input <= 1 {
        return Multiplier { multiplier: i32::MAX, shift: 0 };
    }
    let mut input = input;
    let mut shift = 11;
    while input >= 1 << 29 {
        input /= 4;
        shift += 1;
    }
    let max_left_shift_bits = (input as u32).leading_zeros() as i32 - 1;
    let left_shift_bit_pairs = max_left_shift_bits / 2 - 1;
    shift -= left_shift_bit_pairs;
    input <<= 2 * left_shift_bit_pairs;
    // F3 values: raw / 2^28. Products of F3 and F3 are F6 (raw srdhm), Rescale<3> from F6 is a saturating
    // left shift by 3, from F9 by 6.
    let sat_shl = |x: i32, e: u32| -> i32 {
        let threshold = (1i32 << (31 - e)) - 1;
        if x > threshold {
            i32::MAX
        } else if x < -threshold {
            i32::MIN
        } else {
            x << e
        }
    };
    let fixed_input = input >> 1;
    let half_input = rounding_divide_by_pot(fixed_input, 1);
    let half_three = (1 << 28) + (1 << 27);
    let mut x = 1i32 << 28;
    for _ in 0..5 {
        let x3 = sat_shl(srdhm(srdhm(x, x), x), 6);
        x = sat_shl(srdhm(half_three, x).wrapping_sub(srdhm(half_input, x3)), 3);
    }
    let mut m = srdhm(x, 1518500250);
    if shift < 0 {
        m = m.wrapping_shl((-shift) as u32);
        shift = 0;
    }
    Multiplier { multiplier: m, shift: -shift }
}

/// [`mul_double_round`] for any shift: left shifts of 31 or more wrap as LiteRT's x86-64 build computes
/// them, right shifts of 31 or more give the sign's rounding (0 or -1 → 0).
#[inline(always)]
pub fn mul_double_round_wide(x: i32, m: Multiplier) -> i32 {
    let left = m.shift.max(0) as u32;
    let right = (-m.shift).max(0);
    let h = srdhm(x.wrapping_mul(1i32.wrapping_shl(left.min(31))), m.multiplier);
    if right >= 31 {
        0
    } else {
        rounding_divide_by_pot(h, right)
    }
}

/// i16 versions of the gemmlowp primitives, for HARD_SWISH, and gemmlowp's 16-bit `logistic` and `tanh`
/// (the gate activations of LiteRT's integer LSTM).
pub mod i16x {
    /// gemmlowp `SaturatingRoundingDoublingHighMul` for i16.
    #[inline(always)]
    pub fn srdhm(a: i16, b: i16) -> i16 {
        if a == b && a == i16::MIN {
            return i16::MAX;
        }
        let ab = a as i32 * b as i32;
        let nudge = if ab >= 0 { 1 << 14 } else { 1 - (1 << 14) };
        ((ab + nudge) / (1 << 15)) as i16
    }
    /// TFLite `SaturatingDoublingHighMul` for i16 (truncating).
    #[inline(always)]
    pub fn sdhm(a: i16, b: i16) -> i16 {
        if a == b && a == i16::MIN {
            return i16::MAX;
        }
        ((a as i32 * b as i32) / (1 << 15)) as i16
    }
    /// gemmlowp `RoundingDivideByPOT` for i16.
    #[inline(always)]
    pub fn rounding_divide_by_pot(x: i16, exponent: i32) -> i16 {
        let mask = ((1i32 << exponent) - 1) as i16;
        let remainder = x & mask;
        let threshold = (mask >> 1) + i16::from(x < 0);
        (x >> exponent) + i16::from(remainder > threshold)
    }
    /// TFLite `SaturatingLeftShift` for i16.
    #[inline(always)]
    pub fn saturating_left_shift(x: i16, amount: i32) -> i16 {
        (x as i64 * (1i64 << amount)).clamp(i16::MIN as i64, i16::MAX as i64) as i16
    }
    /// gemmlowp's `SaturatingRoundingMultiplyByPOT` (`exponent` > 0: a saturating left shift) and
    /// `Rescale` between integer-bit counts.
    #[inline(always)]
    pub fn saturating_rounding_mul_by_pot(x: i16, exponent: i32) -> i16 {
        match exponent {
            0 => x,
            e if e > 0 => saturating_left_shift(x, e),
            e => rounding_divide_by_pot(x, -e),
        }
    }
    /// A gemmlowp fixed-point constant given as a Q0.31 raw value, rescaled to 16 bits
    /// (`RescaleConstantInitializer`).
    #[inline(always)]
    fn constant(raw32: i32) -> i16 {
        super::rounding_divide_by_pot(raw32, 16) as i16
    }
    /// gemmlowp's `RoundingHalfSum` for i16.
    #[inline(always)]
    fn rounding_half_sum(a: i16, b: i16) -> i16 {
        let sum = a as i32 + b as i32;
        let sign = if sum >= 0 { 1 } else { -1 };
        ((sum + sign) / 2) as i16
    }
    /// gemmlowp `exp_on_interval_between_negative_one_quarter_and_0_excl` (Q0.15 in, Q0.15 out).
    fn exp_on_quarter_interval(a: i16) -> i16 {
        let constant_term = constant(1895147668);
        let one_third = constant(715827883);
        let x = a.wrapping_add(1 << 12);
        let x2 = srdhm(x, x);
        let x3 = srdhm(x2, x);
        let x4 = srdhm(x2, x2);
        let x4_over_4 = saturating_rounding_mul_by_pot(x4, -2);
        let poly = saturating_rounding_mul_by_pot(srdhm(x4_over_4.wrapping_add(x3), one_third).wrapping_add(x2), -1);
        let sum = constant_term as i32 + srdhm(constant_term, x.wrapping_add(poly)) as i32;
        sum.clamp(i16::MIN as i32, i16::MAX as i32) as i16
    }
    /// gemmlowp `exp_on_negative_values` of a raw i16 with `integer_bits` integer bits (Q0.15 out).
    pub fn exp_on_negative_values(a: i16, integer_bits: i32) -> i16 {
        let frac = 15 - integer_bits;
        let quarter: i16 = 1 << (frac - 2);
        let mask = quarter - 1;
        let a_mod_quarter_minus_quarter = (a & mask).wrapping_sub(quarter);
        let mut result = exp_on_quarter_interval(saturating_rounding_mul_by_pot(a_mod_quarter_minus_quarter, integer_bits));
        let remainder = a_mod_quarter_minus_quarter.wrapping_sub(a);
        for (exponent, multiplier) in [(-2, 1672461947), (-1, 1302514674), (0, 790015084), (1, 290630308), (2, 39332535), (3, 720401), (4, 242)] {
            if integer_bits > exponent && (remainder as i32) & (1 << (frac + exponent)) != 0 {
                result = srdhm(result, constant(multiplier));
            }
        }
        if integer_bits > 5 && a < constant(-(1 << (36 - integer_bits))) {
            result = 0;
        }
        if a == 0 {
            result = i16::MAX;
        }
        result
    }
    /// The Newton-Raphson reciprocal of gemmlowp's `one_over_one_plus_x_for_x_in_0_1` and
    /// `one_minus_x_over_one_plus_x_for_x_in_0_1`: `1 / (1 + a)` in Q2.13.
    fn reciprocal_one_plus(a: i16) -> i16 {
        let half_denominator = rounding_half_sum(a, i16::MAX);
        let c48_17 = constant(1515870810);
        let c_neg32_17 = constant(-1010580540);
        let one_q2: i16 = 1 << 13;
        let mut x = c48_17.wrapping_add(srdhm(half_denominator, c_neg32_17));
        for _ in 0..3 {
            let half_denominator_times_x = srdhm(half_denominator, x);
            let one_minus = one_q2.wrapping_sub(half_denominator_times_x);
            x = x.wrapping_add(saturating_rounding_mul_by_pot(srdhm(x, one_minus), 2));
        }
        x
    }
    /// gemmlowp `logistic` of a raw i16 with `integer_bits` integer bits, in Q0.15.
    pub fn logistic(a: i16, integer_bits: i32) -> i16 {
        if a == 0 {
            return constant(1 << 30);
        }
        let abs = if a > 0 { a } else { a.wrapping_neg() };
        // one_over_one_plus_x: Rescale<0>(ExactMulByPot<-1>(x)), a Q1.14 reading of the Q2.13 result.
        let positive = saturating_rounding_mul_by_pot(reciprocal_one_plus(exp_on_negative_values(abs.wrapping_neg(), integer_bits)), 1);
        if a > 0 {
            positive
        } else {
            i16::MAX.wrapping_sub(positive)
        }
    }
    /// gemmlowp `tanh` of a raw i16 with `integer_bits` integer bits, in Q0.15.
    pub fn tanh(a: i16, integer_bits: i32) -> i16 {
        if a == 0 {
            return 0;
        }
        let negative = a < 0;
        let n = if negative { a } else { a.wrapping_neg() };
        // exp(2n): the same raw value read with one more integer bit; (1 - e) / (1 + e) = 1/(1+e)·2 - 1.
        let e = exp_on_negative_values(n, integer_bits + 1);
        let t = saturating_rounding_mul_by_pot(reciprocal_one_plus(e).wrapping_sub(1 << 13), 2);
        if negative {
            t.wrapping_neg()
        } else {
            t
        }
    }
    /// TFLite `DownScaleInt32ToInt16Multiplier`.
    pub fn downscale_multiplier(m: i32) -> i16 {
        const ROUND: i32 = 1 << 15;
        if m >= i32::MAX - ROUND {
            return i16::MAX;
        }
        ((m + ROUND) >> 16) as i16
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantize_multiplier_normalises_and_flushes() {
        assert_eq!(quantize_multiplier(0.5), Multiplier { multiplier: 1 << 30, shift: 0 });
        assert_eq!(quantize_multiplier(1.0), Multiplier { multiplier: 1 << 30, shift: 1 });
        assert_eq!(quantize_multiplier(0.0), Multiplier::default());
        assert_eq!(quantize_multiplier(1e-12).multiplier, 0);
        // a significand that rounds to 2^31 renormalises
        let m = quantize_multiplier(1.0 - 1e-12);
        assert_eq!((m.multiplier, m.shift), (1 << 30, 1));
    }

    #[test]
    fn roundings_agree_with_their_definitions() {
        // 0.5 · x with both roundings, on exact halves: double rounding is symmetric (away from zero),
        // single rounding rounds half up
        let half = quantize_multiplier(0.25);
        assert_eq!(mul_double_round(6, half), 2); // 1.5 -> 2
        assert_eq!(mul_double_round(-6, half), -2); // -1.5 -> -2
        assert_eq!(mul_single_round(6, half), 2);
        assert_eq!(mul_single_round(-6, half), -1); // -1.5 -> -1
        assert_eq!(rounding_divide_by_pot(-5, 1), -3);
        assert_eq!(rounding_divide_by_pot(5, 1), 3);
        assert_eq!(srdhm(i32::MIN, i32::MIN), i32::MAX);
        assert_eq!(i16x::srdhm(i16::MIN, i16::MIN), i16::MAX);
        assert_eq!(i16x::saturating_left_shift(20000, 1), i16::MAX);
    }

    #[test]
    fn gemmlowp_16_bit_logistic_and_tanh_follow_the_functions() {
        // Q3.12 in (the integer LSTM's gates), and 0..=6 integer bits for tanh (its cell state): within a few
        // Q0.15 steps of the real functions, odd/symmetric as gemmlowp's, exact at 0.
        for bits in [0, 3, 4, 6] {
            for raw in (i16::MIN..=i16::MAX).step_by(97) {
                let x = raw as f64 / (1 << (15 - bits)) as f64;
                let t = i16x::tanh(raw, bits) as f64 / 32768.0;
                assert!((t - x.tanh()).abs() < 4e-4, "tanh({x}) with {bits} integer bits: {t}");
                if bits == 3 {
                    let l = i16x::logistic(raw, 3) as f64 / 32768.0;
                    assert!((l - 1.0 / (1.0 + (-x).exp())).abs() < 4e-4, "logistic({x}): {l}");
                }
            }
        }
        assert_eq!((i16x::tanh(0, 3), i16x::logistic(0, 3)), (0, 1 << 14));
        assert_eq!(i16x::tanh(1234, 3), -i16x::tanh(-1234, 3));
    }
}
