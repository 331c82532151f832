//! The output stage of the convolutions on 16 lanes at a time (AVX-512): `clamp(zp + scale(acc + bias),
//! lo, hi)` with either of LiteRT's two roundings ([`super::fixedpoint::mul_neon_rshl`],
//! [`super::fixedpoint::mul_double_round`]), bit-exact, for the packed GEMM's registers ([`x86::requant`])
//! and for rows of i32 sums ([`row`]).

use super::fixedpoint::Multiplier;

/// Whether [`row`] runs here (AVX-512 F/BW/VL).
pub fn available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::is_x86_feature_detected!("avx512f") && std::is_x86_feature_detected!("avx512bw") && std::is_x86_feature_detected!("avx512vl")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// `out[j] = clamp(zp + scale(acc[j] + bias, m), lo, hi)` as bytes (i8 or u8 data: the range says which),
/// `neon` choosing [`super::fixedpoint::mul_neon_rshl`] over [`super::fixedpoint::mul_double_round`].
/// Only where [`available`] says so (it panics elsewhere).
#[allow(clippy::too_many_arguments)]
pub fn row(acc: &[i32], bias: i32, m: Multiplier, neon: bool, zp: i32, (lo, hi): (i32, i32), out: &mut [u8]) {
    assert!(available(), "the vector requantization needs AVX-512");
    assert!(out.len() >= acc.len());
    #[cfg(target_arch = "x86_64")]
    // SAFETY: the CPU has AVX-512 F/BW/VL (checked above); lengths checked above
    unsafe {
        x86::row(acc, bias, m, neon, zp, lo, hi, out)
    }
    #[cfg(not(target_arch = "x86_64"))]
    unreachable!("AVX-512 on {:?}", (acc.len(), bias, m, neon, zp, lo, hi, out.len()))
}

#[cfg(target_arch = "x86_64")]
pub(crate) mod x86 {
    use super::Multiplier;
    use std::arch::x86_64::*;

    #[target_feature(enable = "avx512f,avx512bw,avx512vl")]
    #[allow(clippy::too_many_arguments)]
    pub(super) unsafe fn row(acc: &[i32], bias: i32, m: Multiplier, neon: bool, zp: i32, lo: i32, hi: i32, out: &mut [u8]) {
        let left = _mm_cvtsi32_si128(m.shift.max(0));
        let right = (-m.shift).max(0);
        let mult = _mm512_set1_epi64(m.multiplier as i64);
        let (zp, lo, hi, b) = (_mm512_set1_epi32(zp), _mm512_set1_epi32(lo), _mm512_set1_epi32(hi), _mm512_set1_epi32(bias));
        let n = acc.len();
        let mut j = 0;
        while j < n {
            let mask: __mmask16 = if n - j >= 16 { !0 } else { (1u16 << (n - j)) - 1 };
            let a = _mm512_add_epi32(_mm512_maskz_loadu_epi32(mask, acc.as_ptr().add(j)), b);
            let y = requant(a, left, right, !neon, mult, zp, lo, hi);
            _mm_mask_storeu_epi8(out.as_mut_ptr().add(j) as *mut i8, mask, _mm512_cvtepi32_epi8(y));
            j += 16;
        }
    }

    /// gemmlowp's `SaturatingRoundingDoublingHighMul(x, m)` on 16 lanes for a multiplier `m` ≥ 0 (in both
    /// halves of each 64-bit lane of `mult`), which is `(x·m + 2^30) >> 31`: for a negative product the
    /// nudge `1 - 2^30` and the division truncating toward zero add up to the same floor.
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl")]
    pub(crate) unsafe fn high_mul(x: __m512i, mult: __m512i) -> __m512i {
        let round = _mm512_set1_epi64(1 << 30);
        let even = _mm512_add_epi64(_mm512_mul_epi32(x, mult), round);
        let odd = _mm512_add_epi64(_mm512_mul_epi32(_mm512_srli_epi64::<32>(x), mult), round);
        // bits 31..62 of each 64-bit product: in the low half of the even lanes, the high half of the odd
        _mm512_mask_blend_epi32(0xAAAA, _mm512_srli_epi64::<31>(even), _mm512_slli_epi64::<1>(odd))
    }

    /// [`high_mul`] with a multiplier per lane (`mult`'s 16 lanes, each ≥ 0); `round` is `2^30` in each 64-bit
    /// lane.
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl")]
    pub(crate) unsafe fn high_mul_lanes(x: __m512i, mult: __m512i, round: __m512i) -> __m512i {
        // the even lanes' products from the low halves, the odd lanes' after moving them down
        let even = _mm512_add_epi64(_mm512_mul_epi32(x, mult), round);
        let odd = _mm512_add_epi64(_mm512_mul_epi32(_mm512_srli_epi64::<32>(x), _mm512_srli_epi64::<32>(mult)), round);
        _mm512_mask_blend_epi32(0xAAAA, _mm512_srli_epi64::<31>(even), _mm512_slli_epi64::<1>(odd))
    }

    /// `clamp(zp + scale(a, m), lo, hi)` on 16 lanes, bit-exact, `left`/`right` the multiplier's shifts.
    /// The rounding doubling high multiply is `(a·m + 2^30) >> 31`: the nudge and the truncating division
    /// of gemmlowp's `SaturatingRoundingDoublingHighMul` fold into that for a multiplier ≥ 0 (TFLite's
    /// never is negative, nor the saturating `i32::MIN`). The right shift rounds half up (`vrshl`:
    /// `(h >> n) + ((h >> (n - 1)) & 1)`, which cannot overflow) or, `double`, half away from zero
    /// (`RoundingDivideByPOT`).
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl")]
    #[allow(clippy::too_many_arguments)]
    pub(crate) unsafe fn requant(a: __m512i, left: __m128i, right: i32, double: bool, mult: __m512i, zp: __m512i, lo: __m512i, hi: __m512i) -> __m512i {
        let h = high_mul(_mm512_sll_epi32(a, left), mult);
        let one = _mm512_set1_epi32(1);
        let r = if double {
            let mask = _mm512_set1_epi32(((1i64 << right) - 1) as i32);
            let s = _mm512_sra_epi32(h, _mm_cvtsi32_si128(right));
            let threshold = _mm512_add_epi32(_mm512_srli_epi32::<1>(mask), _mm512_srli_epi32::<31>(h));
            let up = _mm512_cmpgt_epi32_mask(_mm512_and_si512(h, mask), threshold);
            _mm512_mask_add_epi32(s, up, s, one)
        } else if right > 0 {
            let s = _mm512_sra_epi32(h, _mm_cvtsi32_si128(right));
            let bit = _mm512_and_si512(_mm512_sra_epi32(h, _mm_cvtsi32_si128(right - 1)), one);
            _mm512_add_epi32(s, bit)
        } else {
            h
        };
        _mm512_min_epi32(_mm512_max_epi32(_mm512_add_epi32(r, zp), lo), hi)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::kernels::int8::fixedpoint::{mul_double_round, mul_neon_rshl, quantize_multiplier};

    /// [`row`] against the scalar functions over shifts both ways, both roundings, row lengths around the
    /// vector width and extreme sums.
    #[test]
    fn vector_requantization_is_bit_exact() {
        if !available() {
            return;
        }
        let mut s = 9u64;
        let mut rnd = move || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s
        };
        let mut acc: Vec<i32> = (0..4093).map(|_| (rnd() as i32) >> (rnd() % 28)).collect();
        acc.extend([i32::MAX - 9, i32::MIN + 9, 0, 1, -1, 2, -2, 3, -3, 1 << 30, -(1 << 30)]);
        for real in [1e-9, 2.3e-5, 0.00049, 0.0078125, 0.25, 0.5, 0.5000001, 0.999, 1.0, 1.25, 2.0, 7.5, 100.0] {
            let m = quantize_multiplier(real);
            for &(zp, lo, hi) in &[(0, -128, 127), (-5, -128, 127), (3, 0, 255), (-128, -128, 0)] {
                for neon in [false, true] {
                    for len in [acc.len(), 1, 15, 16, 17, 33] {
                        let a = &acc[acc.len() - len..];
                        let mut got = vec![0u8; len];
                        row(a, 9, m, neon, zp, (lo, hi), &mut got);
                        for (&a, &g) in a.iter().zip(&got) {
                            let x = a.wrapping_add(9);
                            let want = if neon { mul_neon_rshl(x, m) } else { mul_double_round(x, m) };
                            let want = want.wrapping_add(zp).clamp(lo, hi);
                            let g = if lo < 0 { g as i8 as i32 } else { g as i32 };
                            assert_eq!(g, want, "acc {a} real {real} zp {zp} neon {neon}");
                        }
                    }
                }
            }
        }
    }
}
