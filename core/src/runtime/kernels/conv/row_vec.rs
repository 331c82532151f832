//! The f32 vector the row kernels ([`super::depthwise_rows`], [`super::stem_rows`]) compute with: one register
//! of output pixels along a row — 16 lanes with AVX-512F, 8 with AVX2 + FMA. The kernels' loops are written once,
//! generic over [`RowVec`], `#[inline(always)]`, and compiled into one entry point per instruction set (a
//! `#[target_feature]` function that instantiates them), picked when the session is planned.
//!
//! Loads and stores take a lane mask (bit `i`: lane `i`), the padding lanes of a row being neither read nor
//! written: AVX-512 masks its loads natively; AVX2 `vmaskmovps` does not access masked-off elements either (no
//! fault on a page past the row), its mask vector made from the bits by one variable shift; its masked stores go
//! lane by lane (`vmaskmovps` to memory is slow on AMD). The
//! arithmetic is one rounding per operation on both (`vfmadd`, `vaddps`, `vminps`/`vmaxps`), so the same values.

use std::arch::x86_64::*;

/// One register of f32 lanes and the operations the row kernels need.
///
/// # Safety
/// Every method requires the CPU to have the vector's instruction set (AVX-512F for [`Avx512`], AVX2 and FMA for
/// [`Avx2`]); callers reach them only through entry points compiled with those features.
pub(super) trait RowVec: Copy {
    /// Lanes per register.
    const LANES: usize;
    /// The mask of all lanes.
    const FULL: u16;
    unsafe fn splat(x: f32) -> Self;
    unsafe fn zero() -> Self;
    /// The lanes of `mask` from `p + i`, 0 in the others (which are not accessed).
    unsafe fn load(mask: u16, p: *const f32) -> Self;
    /// All lanes from `p + i`.
    unsafe fn load_full(p: *const f32) -> Self;
    /// Writes the lanes of `mask` to `p + i` (the others are not accessed).
    unsafe fn store(mask: u16, p: *mut f32, v: Self);
    /// `a · b + c`, one rounding.
    unsafe fn fmadd(a: Self, b: Self, c: Self) -> Self;
    unsafe fn add(a: Self, b: Self) -> Self;
    /// `min(max(v, lo), hi)`.
    unsafe fn clamp(v: Self, lo: Self, hi: Self) -> Self;
    /// The even (`ODD` false) or odd columns of the `2·LANES` held by `a` then `b`.
    unsafe fn columns<const ODD: bool>(a: Self, b: Self) -> Self;
}

/// 16 lanes, AVX-512F.
#[derive(Clone, Copy)]
pub(super) struct Avx512(__m512);

/// 8 lanes, AVX2 + FMA.
#[derive(Clone, Copy)]
pub(super) struct Avx2(__m256);

// SAFETY (every method below): the trait's contract — the caller runs on a CPU with the instruction set, and
// pointers address the lanes the mask enables.
impl RowVec for Avx512 {
    const LANES: usize = 16;
    const FULL: u16 = u16::MAX;
    #[inline(always)]
    unsafe fn splat(x: f32) -> Self {
        unsafe { Avx512(_mm512_set1_ps(x)) }
    }
    #[inline(always)]
    unsafe fn zero() -> Self {
        unsafe { Avx512(_mm512_setzero_ps()) }
    }
    #[inline(always)]
    unsafe fn load(mask: u16, p: *const f32) -> Self {
        unsafe { Avx512(_mm512_maskz_loadu_ps(mask, p)) }
    }
    #[inline(always)]
    unsafe fn load_full(p: *const f32) -> Self {
        unsafe { Avx512(_mm512_loadu_ps(p)) }
    }
    #[inline(always)]
    unsafe fn store(mask: u16, p: *mut f32, v: Self) {
        unsafe { _mm512_mask_storeu_ps(p, mask, v.0) }
    }
    #[inline(always)]
    unsafe fn fmadd(a: Self, b: Self, c: Self) -> Self {
        unsafe { Avx512(_mm512_fmadd_ps(a.0, b.0, c.0)) }
    }
    #[inline(always)]
    unsafe fn add(a: Self, b: Self) -> Self {
        unsafe { Avx512(_mm512_add_ps(a.0, b.0)) }
    }
    #[inline(always)]
    unsafe fn clamp(v: Self, lo: Self, hi: Self) -> Self {
        unsafe { Avx512(_mm512_min_ps(_mm512_max_ps(v.0, lo.0), hi.0)) }
    }
    #[inline(always)]
    unsafe fn columns<const ODD: bool>(a: Self, b: Self) -> Self {
        unsafe {
            let idx = if ODD {
                _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31)
            } else {
                _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30)
            };
            Avx512(_mm512_permutex2var_ps(a.0, idx, b.0))
        }
    }
}

impl Avx2 {
    /// The `vmaskmovps` mask of the low 8 bits of `mask`: lane `i`'s sign bit is bit `i`.
    #[inline(always)]
    unsafe fn mask_vector(mask: u16) -> __m256i {
        unsafe { _mm256_sllv_epi32(_mm256_set1_epi32(mask as i32), _mm256_setr_epi32(31, 30, 29, 28, 27, 26, 25, 24)) }
    }
}

impl RowVec for Avx2 {
    const LANES: usize = 8;
    const FULL: u16 = 0xFF;
    #[inline(always)]
    unsafe fn splat(x: f32) -> Self {
        unsafe { Avx2(_mm256_set1_ps(x)) }
    }
    #[inline(always)]
    unsafe fn zero() -> Self {
        unsafe { Avx2(_mm256_setzero_ps()) }
    }
    #[inline(always)]
    unsafe fn load(mask: u16, p: *const f32) -> Self {
        // no test for a full mask: the kernels' masked blocks are the row ends, where most loads are partial, and
        // a branch per load kept their loops from unrolling
        unsafe { Avx2(_mm256_maskload_ps(p, Self::mask_vector(mask))) }
    }
    #[inline(always)]
    unsafe fn load_full(p: *const f32) -> Self {
        unsafe { Avx2(_mm256_loadu_ps(p)) }
    }
    #[inline(always)]
    unsafe fn store(mask: u16, p: *mut f32, v: Self) {
        unsafe {
            if mask & 0xFF == 0xFF {
                _mm256_storeu_ps(p, v.0)
            } else {
                // lane by lane: `vmaskmovps` to memory costs ~20 cycles on AMD Zen 3 (measured: 7-8 ns a store)
                let mut lanes = [0f32; 8];
                _mm256_storeu_ps(lanes.as_mut_ptr(), v.0);
                for (i, &x) in lanes.iter().enumerate() {
                    if mask >> i & 1 == 1 {
                        *p.add(i) = x;
                    }
                }
            }
        }
    }
    #[inline(always)]
    unsafe fn fmadd(a: Self, b: Self, c: Self) -> Self {
        unsafe { Avx2(_mm256_fmadd_ps(a.0, b.0, c.0)) }
    }
    #[inline(always)]
    unsafe fn add(a: Self, b: Self) -> Self {
        unsafe { Avx2(_mm256_add_ps(a.0, b.0)) }
    }
    #[inline(always)]
    unsafe fn clamp(v: Self, lo: Self, hi: Self) -> Self {
        unsafe { Avx2(_mm256_min_ps(_mm256_max_ps(v.0, lo.0), hi.0)) }
    }
    #[inline(always)]
    unsafe fn columns<const ODD: bool>(a: Self, b: Self) -> Self {
        unsafe {
            // per 128-bit half: a's two even (odd) columns, then b's; then the 64-bit pairs reordered a, a, b, b
            let s = if ODD { _mm256_shuffle_ps::<0b11_01_11_01>(a.0, b.0) } else { _mm256_shuffle_ps::<0b10_00_10_00>(a.0, b.0) };
            Avx2(_mm256_castpd_ps(_mm256_permute4x64_pd::<0b11_01_10_00>(_mm256_castps_pd(s))))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Avx2, Avx512, RowVec};

    /// Lane `i` of `v` (stored through a full mask).
    #[inline(always)]
    unsafe fn lanes<V: RowVec>(v: V) -> Vec<f32> {
        let mut out = vec![0f32; V::LANES];
        unsafe { V::store(V::FULL, out.as_mut_ptr(), v) };
        out
    }

    #[inline(always)]
    unsafe fn check<V: RowVec>() {
        let n = V::LANES;
        let src: Vec<f32> = (0..2 * n).map(|i| i as f32 + 0.5).collect();
        unsafe {
            let (a, b) = (V::load(V::FULL, src.as_ptr()), V::load(V::FULL, src.as_ptr().add(n)));
            let even: Vec<f32> = (0..n).map(|i| src[2 * i]).collect();
            let odd: Vec<f32> = (0..n).map(|i| src[2 * i + 1]).collect();
            assert_eq!(lanes(V::columns::<false>(a, b)), even);
            assert_eq!(lanes(V::columns::<true>(a, b)), odd);
            // masked load: lanes off read as 0; masked store leaves the others
            for mask in [0u16, 1, 0b1010_0110, V::FULL >> 1, V::FULL & !1, V::FULL] {
                let got = lanes(V::load(mask, src.as_ptr()));
                let want: Vec<f32> = (0..n).map(|i| if mask >> i & 1 == 1 { src[i] } else { 0.0 }).collect();
                assert_eq!(got, want, "load mask {mask:#x}");
                let mut dst = vec![-1f32; n];
                V::store(mask, dst.as_mut_ptr(), a);
                let want: Vec<f32> = (0..n).map(|i| if mask >> i & 1 == 1 { src[i] } else { -1.0 }).collect();
                assert_eq!(dst, want, "store mask {mask:#x}");
            }
            let c = V::clamp(V::fmadd(a, V::splat(2.0), V::splat(-10.0)), V::splat(-4.0), V::splat(7.0));
            let want: Vec<f32> = (0..n).map(|i| (src[i] * 2.0 - 10.0).clamp(-4.0, 7.0)).collect();
            assert_eq!(lanes(c), want);
            assert_eq!(lanes(V::add(V::zero(), V::splat(3.0))), vec![3.0; n]);
            assert_eq!(lanes(V::load_full(src.as_ptr().add(1))), src[1..=n].to_vec());
        }
    }

    #[target_feature(enable = "avx2,fma")]
    unsafe fn check_avx2() {
        unsafe { check::<Avx2>() }
    }

    #[target_feature(enable = "avx512f")]
    unsafe fn check_avx512() {
        unsafe { check::<Avx512>() }
    }

    /// Each vector the CPU has: even/odd column split, masked loads and stores, the arithmetic.
    #[test]
    fn vectors_split_columns_and_mask_lanes() {
        if crate::runtime::kernels::numeric::vector::avx2_fma() {
            // SAFETY: the CPU has AVX2 and FMA.
            unsafe { check_avx2() }
        }
        if crate::runtime::kernels::numeric::vector::avx512() {
            // SAFETY: the CPU has AVX-512F.
            unsafe { check_avx512() }
        }
    }
}
