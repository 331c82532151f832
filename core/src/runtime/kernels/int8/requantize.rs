//! The output stage of the convolutions on 16 lanes at a time (AVX-512), or 8 (AVX2): `clamp(zp + scale(acc +
//! bias), lo, hi)` with either of LiteRT's two roundings ([`super::fixedpoint::mul_neon_rshl`],
//! [`super::fixedpoint::mul_double_round`]), bit-exact, for the packed GEMM's registers ([`x86::requant`],
//! [`avx2::requant`]) and for rows of i32 sums ([`row`]).

use super::fixedpoint::Multiplier;

/// Whether [`row`] runs here (AVX-512 F/BW/VL).
pub fn available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::is_x86_feature_detected!("avx512f")
            && std::is_x86_feature_detected!("avx512bw")
            && std::is_x86_feature_detected!("avx512vl")
            && std::env::var("TPU_SDK_NO_AVX512").map_or(true, |v| v != "1")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// Whether [`row`] runs here (AVX-512 F/BW/VL, or AVX2).
pub fn row_available() -> bool {
    available() || super::packed_gemm::has_avx2()
}

/// `out[j] = clamp(zp + scale(acc[j] + bias, m), lo, hi)` as bytes (i8 or u8 data: the range says which),
/// `neon` choosing [`super::fixedpoint::mul_neon_rshl`] over [`super::fixedpoint::mul_double_round`].
/// Only where [`row_available`] says so (it panics elsewhere).
#[allow(clippy::too_many_arguments)]
pub fn row(acc: &[i32], bias: i32, m: Multiplier, neon: bool, zp: i32, (lo, hi): (i32, i32), out: &mut [u8]) {
    assert!(row_available(), "the vector requantization needs AVX-512 or AVX2");
    assert!(out.len() >= acc.len());
    #[cfg(target_arch = "x86_64")]
    // SAFETY: the CPU has AVX-512 F/BW/VL or AVX2 (checked); lengths checked above
    unsafe {
        if available() {
            x86::row(acc, bias, m, neon, zp, lo, hi, out)
        } else {
            avx2::row(acc, bias, m, neon, zp, lo, hi, out)
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    unreachable!("AVX-512 on {:?}", (acc.len(), bias, m, neon, zp, lo, hi, out.len()))
}

/// `vpmuldq`: the signed products of the low 32-bit halves of each 64-bit lane, as one instruction.
///
/// `_mm512_mul_epi32` is written in `std::arch` as a 64-bit multiply of sign-extended halves, which LLVM turns
/// back into `vpmuldq` only when it sees the sign extension in the same basic block: with the multiplier
/// hoisted out of a loop it does not, and without AVX-512 DQ it then emulates a full 64×64 multiply (three
/// `vpmuludq`, shifts and adds per call, measured in the depthwise planes kernel). The inline assembly pins
/// the one instruction.
#[cfg(target_arch = "x86_64")]
pub(crate) mod mul32 {
    use std::arch::x86_64::*;

    /// `_mm512_mul_epi32(a, b)`.
    ///
    /// # Safety
    /// The CPU has AVX-512 F.
    #[inline]
    #[target_feature(enable = "avx512f")]
    pub(crate) unsafe fn mul512(a: __m512i, b: __m512i) -> __m512i {
        let r: __m512i;
        // SAFETY: a register-only instruction (no memory, stack or flags), which the caller's CPU has
        std::arch::asm!("vpmuldq {r}, {a}, {b}", r = lateout(zmm_reg) r, a = in(zmm_reg) a, b = in(zmm_reg) b, options(pure, nomem, nostack, preserves_flags));
        r
    }

    /// `_mm256_mul_epi32(a, b)`.
    ///
    /// # Safety
    /// The CPU has AVX2.
    #[inline]
    #[target_feature(enable = "avx2")]
    pub(crate) unsafe fn mul256(a: __m256i, b: __m256i) -> __m256i {
        let r: __m256i;
        // SAFETY: a register-only instruction (no memory, stack or flags), which the caller's CPU has
        std::arch::asm!("vpmuldq {r}, {a}, {b}", r = lateout(ymm_reg) r, a = in(ymm_reg) a, b = in(ymm_reg) b, options(pure, nomem, nostack, preserves_flags));
        r
    }
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
        let even = _mm512_add_epi64(super::mul32::mul512(x, mult), round);
        let odd = _mm512_add_epi64(super::mul32::mul512(_mm512_srli_epi64::<32>(x), mult), round);
        // bits 31..62 of each 64-bit product: in the low half of the even lanes, the high half of the odd
        _mm512_mask_blend_epi32(0xAAAA, _mm512_srli_epi64::<31>(even), _mm512_slli_epi64::<1>(odd))
    }

    /// [`high_mul`] with a multiplier per lane (`mult`'s 16 lanes, each ≥ 0); `round` is `2^30` in each 64-bit
    /// lane.
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl")]
    pub(crate) unsafe fn high_mul_lanes(x: __m512i, mult: __m512i, round: __m512i) -> __m512i {
        // the even lanes' products from the low halves, the odd lanes' after moving them down
        let even = _mm512_add_epi64(super::mul32::mul512(x, mult), round);
        let odd = _mm512_add_epi64(super::mul32::mul512(_mm512_srli_epi64::<32>(x), _mm512_srli_epi64::<32>(mult)), round);
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

/// [`x86::requant`]'s NEON rounding (`vqrdmulh` + `vrshl`) with one rounding in 64-bit lanes: the rounding
/// doubling high multiply `h = ⌊(x·m + 2^30) / 2^31⌋`, the rounding right shift `⌊(h + 2^(n-1)) / 2^n⌋` and the
/// zero point added after are together `⌊(x·m + 2^30 + 2^(30+n) + zp·2^(31+n)) / 2^(31+n)⌋` (`⌊(⌊y/a⌋ + b)/c⌋ =
/// ⌊(y + a·b)/(a·c)⌋` for integers `b` and `a, c > 0`): one multiply, one add and one arithmetic shift per
/// 64-bit lane, where the 32-bit form takes nine more operations. Exact while the sum fits 63 bits: `|x·m| <
/// 2^62` and the constant below `2^61` for `n ≤` [`Neon64::MAX_RIGHT`] and `|zp| ≤ 255`.
#[cfg(target_arch = "x86_64")]
pub(crate) mod neon64 {
    use super::Multiplier;
    use std::arch::x86_64::*;

    /// A channel's constants.
    #[derive(Clone, Copy)]
    pub(crate) struct Neon64 {
        left: __m128i,
        mult: __m512i,
        /// `2^30 + 2^(30+n) + zp·2^(31+n)` (no `2^(30+n)` for `n = 0`).
        c: __m512i,
        /// `31 + n` for the even lanes; for the odd lanes `n - 1` (their result wanted in the high half), or
        /// `None` for `n = 0` (a left shift by one).
        even: __m128i,
        odd: Option<__m128i>,
        lo: __m512i,
        hi: __m512i,
        range: ByteRange,
    }

    /// An output range as bytes, for [`pack4`].
    #[derive(Clone, Copy)]
    pub(crate) struct ByteRange {
        /// u8 data (the range above 127; else i8).
        unsigned: bool,
        lo: __m512i,
        hi: __m512i,
    }

    impl ByteRange {
        /// The range `[lo, hi]` of i8 data (`hi ≤ 127`) or u8 data (`lo ≥ 0`).
        #[inline]
        #[target_feature(enable = "avx512f,avx512bw,avx512vl")]
        pub(crate) fn new(lo: i32, hi: i32) -> ByteRange {
            ByteRange { unsigned: hi > 127, lo: _mm512_set1_epi8(lo as i8), hi: _mm512_set1_epi8(hi as i8) }
        }
    }

    /// Four vectors of 32-bit results (`zp + scale(acc)`) as 64 bytes in order, clamped to `range`: packed
    /// with saturation, which keeps every value of the range (i8 data clamps to at most [-128, 127], u8 data to
    /// at least [0, 255]), then clamped as bytes; two packs and a permutation where four `vpmovdb` and eight
    /// 32-bit clamps would be.
    ///
    /// # Safety
    /// The CPU has AVX-512 F/BW/VL.
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl")]
    pub(crate) unsafe fn pack4(r: [__m512i; 4], range: &ByteRange) -> __m512i {
        // per 128-bit lane l: the 32-bit lanes 4l..4l+3 of r[0], r[1], r[2], r[3]
        let (ab, cd) = (_mm512_packs_epi32(r[0], r[1]), _mm512_packs_epi32(r[2], r[3]));
        let order = _mm512_set_epi32(15, 11, 7, 3, 14, 10, 6, 2, 13, 9, 5, 1, 12, 8, 4, 0);
        if range.unsigned {
            let b = _mm512_permutexvar_epi32(order, _mm512_packus_epi16(ab, cd));
            _mm512_min_epu8(_mm512_max_epu8(b, range.lo), range.hi)
        } else {
            let b = _mm512_permutexvar_epi32(order, _mm512_packs_epi16(ab, cd));
            _mm512_min_epi8(_mm512_max_epi8(b, range.lo), range.hi)
        }
    }

    impl Neon64 {
        /// The largest right shift taken (multipliers below `2^-22` keep [`super::x86::requant`]).
        pub(crate) const MAX_RIGHT: i32 = 22;

        /// The constants of multiplier `m`, output zero point `zp` (`|zp| ≤ 255`) and range; `None` where the
        /// right shift is over [`Neon64::MAX_RIGHT`] or `zp` out of range.
        #[inline]
        #[target_feature(enable = "avx512f,avx512bw,avx512vl")]
        pub(crate) fn new(m: Multiplier, zp: i32, lo: i32, hi: i32) -> Option<Neon64> {
            let n = (-m.shift).max(0);
            if n > Self::MAX_RIGHT || !(-255..=255).contains(&zp) {
                return None;
            }
            let c = (1i64 << 30) + if n > 0 { 1i64 << (30 + n) } else { 0 } + ((zp as i64) << (31 + n));
            Some(Neon64 {
                left: _mm_cvtsi32_si128(m.shift.max(0)),
                mult: _mm512_set1_epi64(m.multiplier as i64),
                c: _mm512_set1_epi64(c),
                even: _mm_cvtsi32_si128(31 + n),
                odd: (n > 0).then(|| _mm_cvtsi32_si128(n - 1)),
                lo: _mm512_set1_epi32(lo),
                hi: _mm512_set1_epi32(hi),
                range: ByteRange::new(lo, hi),
            })
        }

        /// `clamp(zp + scale(a), lo, hi)` on 16 lanes, bit-exact with [`super::x86::requant`] (NEON rounding).
        ///
        /// # Safety
        /// The CPU has AVX-512 F/BW/VL.
        #[inline]
        #[target_feature(enable = "avx512f,avx512bw,avx512vl")]
        pub(crate) unsafe fn apply(&self, a: __m512i) -> __m512i {
            _mm512_min_epi32(_mm512_max_epi32(self.unclamped(a), self.lo), self.hi)
        }

        /// [`Neon64::apply`] of four vectors as 64 bytes in order ([`pack4`]).
        ///
        /// # Safety
        /// The CPU has AVX-512 F/BW/VL.
        #[inline]
        #[target_feature(enable = "avx512f,avx512bw,avx512vl")]
        pub(crate) unsafe fn bytes4(&self, a: [__m512i; 4]) -> __m512i {
            pack4(std::array::from_fn(|i| self.unclamped(a[i])), &self.range)
        }

        /// [`Neon64::apply`] before the clamp: `zp + scale(a)` (wrapping to 32 bits).
        ///
        /// # Safety
        /// The CPU has AVX-512 F/BW/VL.
        #[inline]
        #[target_feature(enable = "avx512f,avx512bw,avx512vl")]
        pub(crate) unsafe fn unclamped(&self, a: __m512i) -> __m512i {
            let a = _mm512_sll_epi32(a, self.left);
            let even = _mm512_sra_epi64(_mm512_add_epi64(super::mul32::mul512(a, self.mult), self.c), self.even);
            let odd = _mm512_add_epi64(super::mul32::mul512(_mm512_srli_epi64::<32>(a), self.mult), self.c);
            // the odd lanes' results in the high halves of their 64-bit lanes
            let odd = match self.odd {
                Some(n1) => _mm512_sra_epi64(odd, n1),
                None => _mm512_slli_epi64::<1>(odd),
            };
            _mm512_mask_blend_epi32(0xAAAA, even, odd)
        }
    }
}

/// The output stage on 8 lanes (AVX2, for CPUs without AVX-512: AMD Zen 2/3, Intel before Ice Lake).
#[cfg(target_arch = "x86_64")]
pub(crate) mod avx2 {
    use super::Multiplier;
    use std::arch::x86_64::*;

    /// [`super::x86::requant`] on 8 lanes, bit-exact (the same derivation): `clamp(zp + scale(a, m), lo, hi)`,
    /// `left`/`right` the multiplier's shifts, `mult` the multiplier (≥ 0) in each 64-bit lane, `double` the
    /// half-away-from-zero rounding of `RoundingDivideByPOT` instead of `vrshl`'s half up.
    #[inline]
    #[target_feature(enable = "avx2")]
    #[allow(clippy::too_many_arguments)]
    pub(crate) unsafe fn requant(a: __m256i, left: __m128i, right: i32, double: bool, mult: __m256i, zp: __m256i, lo: __m256i, hi: __m256i) -> __m256i {
        let h = high_mul(_mm256_sll_epi32(a, left), mult);
        let one = _mm256_set1_epi32(1);
        let r = if double {
            let mask = _mm256_set1_epi32(((1i64 << right) - 1) as i32);
            let s = _mm256_sra_epi32(h, _mm_cvtsi32_si128(right));
            let threshold = _mm256_add_epi32(_mm256_srli_epi32::<1>(mask), _mm256_srli_epi32::<31>(h));
            // -1 where the remainder exceeds the threshold
            let up = _mm256_cmpgt_epi32(_mm256_and_si256(h, mask), threshold);
            _mm256_sub_epi32(s, up)
        } else if right > 0 {
            let s = _mm256_sra_epi32(h, _mm_cvtsi32_si128(right));
            let bit = _mm256_and_si256(_mm256_sra_epi32(h, _mm_cvtsi32_si128(right - 1)), one);
            _mm256_add_epi32(s, bit)
        } else {
            h
        };
        _mm256_min_epi32(_mm256_max_epi32(_mm256_add_epi32(r, zp), lo), hi)
    }

    /// [`super::x86::high_mul`] on 8 lanes: `(x·m + 2^30) >> 31` for a multiplier `m` ≥ 0 in each 64-bit lane
    /// of `mult`.
    #[inline]
    #[target_feature(enable = "avx2")]
    pub(crate) unsafe fn high_mul(x: __m256i, mult: __m256i) -> __m256i {
        let round = _mm256_set1_epi64x(1 << 30);
        let even = _mm256_add_epi64(super::mul32::mul256(x, mult), round);
        let odd = _mm256_add_epi64(super::mul32::mul256(_mm256_srli_epi64::<32>(x), mult), round);
        // bits 31..62 of each 64-bit product: in the low half of the even lanes, the high half of the odd
        _mm256_blend_epi32::<0b1010_1010>(_mm256_srli_epi64::<31>(even), _mm256_slli_epi64::<1>(odd))
    }

    /// Stores the low byte of each of `y`'s first `count` (≤ 8) lanes at `dst`.
    #[inline]
    #[target_feature(enable = "avx2")]
    pub(crate) unsafe fn store_bytes(y: __m256i, dst: *mut u8, count: usize) {
        let low = _mm256_setr_epi8(0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1);
        let b = _mm256_shuffle_epi8(y, low);
        let bytes = _mm_unpacklo_epi32(_mm256_castsi256_si128(b), _mm256_extracti128_si256::<1>(b));
        if count >= 8 {
            _mm_storel_epi64(dst as *mut __m128i, bytes);
        } else {
            let mut tmp = [0u8; 16];
            _mm_storeu_si128(tmp.as_mut_ptr() as *mut __m128i, bytes);
            std::ptr::copy_nonoverlapping(tmp.as_ptr(), dst, count);
        }
    }

    /// The lane mask of the first `n` (≤ 8) lanes.
    #[inline]
    #[target_feature(enable = "avx2")]
    pub(crate) unsafe fn first(n: usize) -> __m256i {
        _mm256_cmpgt_epi32(_mm256_set1_epi32(n.min(8) as i32), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7))
    }

    /// [`super::row`] on 8 lanes.
    #[target_feature(enable = "avx2")]
    #[allow(clippy::too_many_arguments)]
    pub(super) unsafe fn row(acc: &[i32], bias: i32, m: Multiplier, neon: bool, zp: i32, lo: i32, hi: i32, out: &mut [u8]) {
        let left = _mm_cvtsi32_si128(m.shift.max(0));
        let right = (-m.shift).max(0);
        let mult = _mm256_set1_epi64x(m.multiplier as i64);
        let (zp, lo, hi, b) = (_mm256_set1_epi32(zp), _mm256_set1_epi32(lo), _mm256_set1_epi32(hi), _mm256_set1_epi32(bias));
        let n = acc.len();
        let mut j = 0;
        while j < n {
            let count = (n - j).min(8);
            let a = if count == 8 { _mm256_loadu_si256(acc.as_ptr().add(j) as *const __m256i) } else { _mm256_maskload_epi32(acc.as_ptr().add(j), first(count)) };
            let y = requant(_mm256_add_epi32(a, b), left, right, !neon, mult, zp, lo, hi);
            store_bytes(y, out.as_mut_ptr().add(j), count);
            j += 8;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::kernels::int8::fixedpoint::{mul_double_round, mul_neon_rshl, quantize_multiplier};

    /// [`row`] (and the AVX2 kernel where AVX-512 is present too) against the scalar functions over shifts both
    /// ways, both roundings, row lengths around the vector widths and extreme sums.
    #[test]
    fn vector_requantization_is_bit_exact() {
        if !row_available() {
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
        for real in [1e-9, 3e-7, 2.4e-7, 2.3e-5, 0.00049, 0.0078125, 0.25, 0.5, 0.5000001, 0.999, 1.0, 1.25, 2.0, 7.5, 100.0] {
            let m = quantize_multiplier(real);
            for &(zp, lo, hi) in &[(0, -128, 127), (-5, -128, 127), (3, 0, 255), (-128, -128, 0), (255, 0, 255), (127, -128, 127)] {
                for neon in [false, true] {
                    for len in [acc.len(), 1, 15, 16, 17, 33] {
                        let a = &acc[acc.len() - len..];
                        let mut got = vec![0u8; len];
                        row(a, 9, m, neon, zp, (lo, hi), &mut got);
                        // the AVX2 kernel as well where AVX-512 hides it from `row`
                        #[cfg(target_arch = "x86_64")]
                        if available() && crate::runtime::kernels::int8::packed_gemm::has_avx2() {
                            let mut got2 = vec![0u8; len];
                            // SAFETY: the CPU has AVX2 (checked); got2 holds the row
                            unsafe { avx2::row(a, 9, m, neon, zp, lo, hi, &mut got2) };
                            assert_eq!(got, got2, "AVX2 vs AVX-512, real {real} zp {zp} neon {neon} len {len}");
                        }
                        // the 64-bit NEON stage where it takes the multiplier
                        #[cfg(target_arch = "x86_64")]
                        if neon && available() {
                            // SAFETY: the CPU has AVX-512 F/BW/VL (checked); the loads and stores stay in a and got3
                            unsafe {
                                use std::arch::x86_64::*;
                                if let Some(st) = neon64::Neon64::new(m, zp, lo, hi) {
                                    let mut got3 = vec![0u8; len];
                                    for j in (0..len).step_by(16) {
                                        let k: __mmask16 = if len - j >= 16 { !0 } else { (1u16 << (len - j)) - 1 };
                                        let v = _mm512_add_epi32(_mm512_maskz_loadu_epi32(k, a.as_ptr().add(j)), _mm512_set1_epi32(9));
                                        _mm_mask_storeu_epi8(got3.as_mut_ptr().add(j) as *mut i8, k, _mm512_cvtepi32_epi8(st.apply(v)));
                                    }
                                    assert_eq!(got, got3, "64-bit NEON stage, real {real} zp {zp} len {len}");
                                }
                            }
                        }
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
