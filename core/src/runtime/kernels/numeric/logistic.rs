//! The logistic function and SiLU (`x · sigmoid(x)`, YOLO's activation after every convolution) over f32 slices,
//! written with AVX-512 and AVX2 + FMA intrinsics. The element functions of [`super::exp_f32`] and
//! [`super::sigmoid_f32`], vectorised through [`super::vector`], cost twice their instructions here: LLVM does
//! not contract `p·r + c` into an FMA without fast-math, so the degree-7 polynomial was 14 instructions where 7
//! FMAs do, and the two-step scaling by 2^n another 8 where AVX-512's `vscalefps` is one. A 32-channel SiLU pass
//! over 64×64 pixels took 40% of its 1×1 convolution's time.
//!
//! Same method as the scalar functions (Cody-Waite reduction, the Cephes polynomial, e = e^-|x| and 1 / (1 + e)
//! or e / (1 + e)), rounded differently (FMA), so within 2 ulp of the exact value like them but not bit-equal to
//! them. Elsewhere (no AVX2, other architectures) the scalar functions run.

use super::{sigmoid_f32, vector};

/// `row[i] ← silu(row[i] + bias)` (no addition without a bias).
pub(crate) fn silu_in_place(row: &mut [f32], bias: Option<f32>) {
    #[cfg(target_arch = "x86_64")]
    {
        if vector::avx512() {
            // SAFETY: the CPU has AVX-512F (checked).
            unsafe { x86::silu_512(row, bias) };
            return;
        }
        if vector::avx2_fma() {
            // SAFETY: the CPU has AVX2 and FMA (checked).
            unsafe { x86::silu_256(row, bias) };
            return;
        }
    }
    match bias {
        Some(b) => vector::update(row, &|v: f32| (v + b) * sigmoid_f32(v + b)),
        None => vector::update(row, &|v: f32| v * sigmoid_f32(v)),
    }
}

/// `out[i] ← sigmoid(x[i])` over the common length.
pub(crate) fn sigmoid_map(x: &[f32], out: &mut [f32]) {
    let n = x.len().min(out.len());
    let (x, out) = (&x[..n], &mut out[..n]);
    #[cfg(target_arch = "x86_64")]
    {
        if vector::avx512() {
            // SAFETY: the CPU has AVX-512F (checked); equal lengths.
            unsafe { x86::sigmoid_512(x, out) };
            return;
        }
        if vector::avx2_fma() {
            // SAFETY: the CPU has AVX2 and FMA (checked); equal lengths.
            unsafe { x86::sigmoid_256(x, out) };
            return;
        }
    }
    vector::map(x, out, &sigmoid_f32);
}

#[cfg(target_arch = "x86_64")]
pub(super) mod x86 {
    use std::arch::x86_64::*;

    const LOG2E: f32 = std::f32::consts::LOG2_E;
    const LN2_HI: f32 = 0.693_359_4;
    const LN2_LO: f32 = -2.121_944_4e-4;
    /// 1.5·2^23: adding it rounds to an integer.
    const ROUND: f32 = 12_582_912.0;
    /// Below this e^x is 0 in f32 (and 2^n stays representable in two factors for the AVX2 scaling).
    const LOWEST: f32 = -104.0;
    /// The polynomial of [`super::super::exp_f32`], highest degree first.
    #[allow(clippy::excessive_precision)]
    const POLY: [f32; 6] = [1.987_569_1e-4, 1.398_199_9e-3, 8.333_452e-3, 4.166_579_6e-2, 1.666_666_5e-1, 5.000_000_1e-1];

    /// e^z for z ≤ 0 (NaN stays NaN; below -104 it is 0), gradual underflow through `vscalefps`.
    #[inline]
    #[target_feature(enable = "avx512f")]
    fn exp_neg_512(z: __m512) -> __m512 {
        // max returns its second operand when either is NaN: a NaN z survives the clamp
        let z = _mm512_max_ps(_mm512_set1_ps(LOWEST), z);
        let t = _mm512_fmadd_ps(z, _mm512_set1_ps(LOG2E), _mm512_set1_ps(ROUND));
        let n = _mm512_sub_ps(t, _mm512_set1_ps(ROUND));
        let r = _mm512_fnmadd_ps(n, _mm512_set1_ps(LN2_HI), z);
        let r = _mm512_fnmadd_ps(n, _mm512_set1_ps(LN2_LO), r);
        let mut p = _mm512_set1_ps(POLY[0]);
        for c in &POLY[1..] {
            p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(*c));
        }
        let y = _mm512_add_ps(_mm512_fmadd_ps(p, _mm512_mul_ps(r, r), r), _mm512_set1_ps(1.0));
        _mm512_scalef_ps(y, n)
    }

    /// sigmoid(x): with e = e^-|x|, 1 / (1 + e) for x ≥ 0 and e / (1 + e) below (NaN: e / (1 + e), NaN).
    #[inline]
    #[target_feature(enable = "avx512f")]
    fn sigmoid_v512(x: __m512) -> __m512 {
        let e = exp_neg_512(_mm512_sub_ps(_mm512_setzero_ps(), _mm512_abs_ps(x)));
        let one = _mm512_set1_ps(1.0);
        let pos = _mm512_cmp_ps_mask::<_CMP_GE_OQ>(x, _mm512_setzero_ps());
        // (a 14-bit reciprocal with one Newton correction instead of the division measured no faster)
        _mm512_div_ps(_mm512_mask_blend_ps(pos, e, one), _mm512_add_ps(one, e))
    }

    /// [`super::silu_in_place`] with AVX-512 (the tail through masked loads and stores).
    ///
    /// # Safety
    /// The CPU has AVX-512F.
    #[target_feature(enable = "avx512f")]
    pub(in super::super) unsafe fn silu_512(row: &mut [f32], bias: Option<f32>) {
        let b = _mm512_set1_ps(bias.unwrap_or(0.0));
        let f = |v: __m512| {
            let x = if bias.is_some() { _mm512_add_ps(v, b) } else { v };
            _mm512_mul_ps(x, sigmoid_v512(x))
        };
        let mut chunks = row.chunks_exact_mut(16);
        for c in &mut chunks {
            // SAFETY: 16 values.
            unsafe { _mm512_storeu_ps(c.as_mut_ptr(), f(_mm512_loadu_ps(c.as_ptr()))) };
        }
        let rest = chunks.into_remainder();
        if !rest.is_empty() {
            let m: __mmask16 = (1u16 << rest.len()) - 1;
            // SAFETY: the mask covers the rest's len < 16 values only.
            unsafe { _mm512_mask_storeu_ps(rest.as_mut_ptr(), m, f(_mm512_maskz_loadu_ps(m, rest.as_ptr()))) };
        }
    }

    /// [`super::sigmoid_map`] with AVX-512.
    ///
    /// # Safety
    /// The CPU has AVX-512F; `x` and `out` have the same length.
    #[target_feature(enable = "avx512f")]
    pub(in super::super) unsafe fn sigmoid_512(x: &[f32], out: &mut [f32]) {
        debug_assert_eq!(x.len(), out.len());
        let full = x.len() / 16 * 16;
        let mut i = 0;
        while i < full {
            // SAFETY: 16 values from i in both (equal lengths).
            unsafe { _mm512_storeu_ps(out.as_mut_ptr().add(i), sigmoid_v512(_mm512_loadu_ps(x.as_ptr().add(i)))) };
            i += 16;
        }
        if full < x.len() {
            let m: __mmask16 = (1u16 << (x.len() - full)) - 1;
            // SAFETY: the mask covers the last len - full < 16 values of both.
            unsafe { _mm512_mask_storeu_ps(out.as_mut_ptr().add(full), m, sigmoid_v512(_mm512_maskz_loadu_ps(m, x.as_ptr().add(full)))) };
        }
    }

    /// e^z for z ≤ 0 with AVX2 + FMA: 2^n applied in two factors, each a normal number, so that the result
    /// underflows gradually.
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    fn exp_neg_256(z: __m256) -> __m256 {
        let z = _mm256_max_ps(_mm256_set1_ps(LOWEST), z);
        let t = _mm256_fmadd_ps(z, _mm256_set1_ps(LOG2E), _mm256_set1_ps(ROUND));
        let n = _mm256_sub_ps(t, _mm256_set1_ps(ROUND));
        let r = _mm256_fnmadd_ps(n, _mm256_set1_ps(LN2_HI), z);
        let r = _mm256_fnmadd_ps(n, _mm256_set1_ps(LN2_LO), r);
        let mut p = _mm256_set1_ps(POLY[0]);
        for c in &POLY[1..] {
            p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(*c));
        }
        let y = _mm256_add_ps(_mm256_fmadd_ps(p, _mm256_mul_ps(r, r), r), _mm256_set1_ps(1.0));
        // t = ROUND + n exactly: n is the difference of the bit patterns
        let ni = _mm256_sub_epi32(_mm256_castps_si256(t), _mm256_castps_si256(_mm256_set1_ps(ROUND)));
        let n1 = _mm256_srai_epi32::<1>(ni);
        let n2 = _mm256_sub_epi32(ni, n1);
        let pow = |k: __m256i| _mm256_castsi256_ps(_mm256_slli_epi32::<23>(_mm256_add_epi32(k, _mm256_set1_epi32(127))));
        _mm256_mul_ps(_mm256_mul_ps(y, pow(n1)), pow(n2))
    }

    /// sigmoid(x) with AVX2 + FMA, as [`sigmoid_v512`].
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    fn sigmoid_v256(x: __m256) -> __m256 {
        let ax = _mm256_andnot_ps(_mm256_set1_ps(-0.0), x);
        let e = exp_neg_256(_mm256_sub_ps(_mm256_setzero_ps(), ax));
        let one = _mm256_set1_ps(1.0);
        let pos = _mm256_cmp_ps::<_CMP_GE_OQ>(x, _mm256_setzero_ps());
        _mm256_div_ps(_mm256_blendv_ps(e, one, pos), _mm256_add_ps(one, e))
    }

    /// [`super::silu_in_place`] with AVX2 + FMA (the tail through an 8-value buffer).
    ///
    /// # Safety
    /// The CPU has AVX2 and FMA.
    #[target_feature(enable = "avx2,fma")]
    pub(in super::super) unsafe fn silu_256(row: &mut [f32], bias: Option<f32>) {
        let b = _mm256_set1_ps(bias.unwrap_or(0.0));
        let f = |v: __m256| {
            let x = if bias.is_some() { _mm256_add_ps(v, b) } else { v };
            _mm256_mul_ps(x, sigmoid_v256(x))
        };
        let mut chunks = row.chunks_exact_mut(8);
        for c in &mut chunks {
            // SAFETY: 8 values.
            unsafe { _mm256_storeu_ps(c.as_mut_ptr(), f(_mm256_loadu_ps(c.as_ptr()))) };
        }
        let rest = chunks.into_remainder();
        if !rest.is_empty() {
            let mut buf = [0f32; 8];
            buf[..rest.len()].copy_from_slice(rest);
            // SAFETY: 8 values in buf.
            unsafe { _mm256_storeu_ps(buf.as_mut_ptr(), f(_mm256_loadu_ps(buf.as_ptr()))) };
            rest.copy_from_slice(&buf[..rest.len()]);
        }
    }

    /// [`super::sigmoid_map`] with AVX2 + FMA.
    ///
    /// # Safety
    /// The CPU has AVX2 and FMA; `x` and `out` have the same length.
    #[target_feature(enable = "avx2,fma")]
    pub(in super::super) unsafe fn sigmoid_256(x: &[f32], out: &mut [f32]) {
        debug_assert_eq!(x.len(), out.len());
        for (o, c) in out.chunks_mut(8).zip(x.chunks(8)) {
            let mut buf = [0f32; 8];
            buf[..c.len()].copy_from_slice(c);
            // SAFETY: 8 values in buf.
            unsafe { _mm256_storeu_ps(buf.as_mut_ptr(), sigmoid_v256(_mm256_loadu_ps(buf.as_ptr()))) };
            o.copy_from_slice(&buf[..o.len()]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Distance in units in the last place between `got` and the f32 nearest to `want` (0 when both are NaN).
    fn ulps(got: f32, want: f64) -> u64 {
        let w = want as f32;
        if got.is_nan() || w.is_nan() {
            return if got.is_nan() && w.is_nan() { 0 } else { u64::MAX };
        }
        let key = |v: f32| if v.is_sign_negative() { -(v.abs().to_bits() as i64) } else { v.to_bits() as i64 };
        (key(got) - key(w)).unsigned_abs()
    }

    /// The inputs: the whole range in steps of 1e-3, every 2^-20 in [-1, 1], the edges.
    fn inputs() -> Vec<f32> {
        let mut xs: Vec<f32> = (-130_000..110_000).map(|i| i as f32 * 1e-3).chain((-1 << 20..1 << 20).map(|i| i as f32 / (1 << 20) as f32)).collect();
        xs.extend([0.0, -0.0, 88.7, 89.0, 120.0, -87.0, -95.0, -103.9, -104.0, -120.0, 1e-30, -1e-30, f32::MAX, f32::MIN, f32::INFINITY, f32::NEG_INFINITY, f32::NAN]);
        xs
    }

    /// Each available copy (AVX-512, AVX2 + FMA, the dispatching entry) over [`inputs`], against libm's f64
    /// values: sigmoid within 2 ulp wherever the value is a normal f32 and within one subnormal step below that;
    /// SiLU (with and without a bias) within 3 ulp (sigmoid's 2 and the product's rounding) where sigmoid is
    /// normal, within |x| subnormal steps of sigmoid where it is not; NaN stays NaN (SiLU(-inf) is NaN, as the
    /// graph's `x · sigmoid(x)` is); zeros keep their sign; the tail of every length equals the vector body.
    #[test]
    fn sigmoid_and_silu_are_within_2_ulp_of_libm() {
        let xs = inputs();
        let exact_sig = |x: f32| 1.0 / (1.0 + (-(x as f64)).exp());
        let exact_silu = |x: f32| if x == f32::INFINITY { f64::INFINITY } else { x as f64 * exact_sig(x) };
        let sub = f32::from_bits(1) as f64;
        let sig_ok = |x: f32, g: f32| {
            let w = exact_sig(x);
            if w < f32::MIN_POSITIVE as f64 { (g as f64 - w).abs() <= sub } else { ulps(g, w) <= 2 }
        };
        let silu_ok = |x: f32, g: f32| {
            let w = exact_silu(x);
            if x == f32::NEG_INFINITY {
                g.is_nan()
            } else if exact_sig(x) < f32::MIN_POSITIVE as f64 {
                (g as f64 - w).abs() <= (x as f64).abs() * sub
            } else {
                ulps(g, w) <= 3
            }
        };
        type Copy = (&'static str, fn(&[f32], &mut [f32]), fn(&mut [f32], Option<f32>));
        let mut copies: Vec<Copy> = vec![("dispatch", sigmoid_map, silu_in_place)];
        #[cfg(target_arch = "x86_64")]
        {
            // SAFETY (the closures): each copy runs only where the CPU has its instructions (checked here).
            if vector::avx512() {
                copies.push(("avx512", |x, o| unsafe { x86::sigmoid_512(x, o) }, |r, b| unsafe { x86::silu_512(r, b) }));
            }
            if vector::avx2_fma() {
                copies.push(("avx2", |x, o| unsafe { x86::sigmoid_256(x, o) }, |r, b| unsafe { x86::silu_256(r, b) }));
            }
        }
        for (name, sig, silu) in copies {
            let mut out = vec![0f32; xs.len()];
            sig(&xs, &mut out);
            for (&x, &g) in xs.iter().zip(&out) {
                assert!(sig_ok(x, g), "{name} sigmoid({x}) = {g}, want {}", exact_sig(x));
            }
            let mut row = xs.clone();
            silu(&mut row, None);
            for (&x, &g) in xs.iter().zip(&row) {
                assert!(silu_ok(x, g), "{name} silu({x}) = {g}, want {}", exact_silu(x));
            }
            // with a bias: the inputs are then x + bias in f32
            let mut row = xs.clone();
            silu(&mut row, Some(0.25));
            for (&x, &g) in xs.iter().zip(&row) {
                assert!(silu_ok(x + 0.25, g), "{name} silu({x} + 0.25) = {g}, want {}", exact_silu(x + 0.25));
            }
            let mut z = [0.0f32, -0.0];
            silu(&mut z, None);
            assert!(z[0].to_bits() == 0 && z[1].to_bits() == (-0.0f32).to_bits(), "{name}: silu(±0) = {z:?}");
            let mut e = [0f32; 5];
            sig(&[0.0, f32::INFINITY, f32::NEG_INFINITY, 120.0, -120.0], &mut e);
            assert_eq!(e, [0.5, 1.0, 0.0, 1.0, 0.0], "{name} sigmoid edges");
            let mut nan = [f32::NAN; 3];
            sig(&[f32::NAN; 3], &mut nan);
            silu(&mut nan[1..], Some(1.0));
            assert!(nan.iter().all(|v| v.is_nan()), "{name}: NaN in, NaN out");
            // every tail length: the masked or buffered tail gives the vector body's values
            for len in 0..40 {
                let part = &xs[1000..1000 + len];
                let mut o = vec![0f32; len];
                sig(part, &mut o);
                let mut whole = vec![0f32; 48];
                sig(&xs[1000..1048], &mut whole);
                assert_eq!(o[..], whole[..len], "{name} sigmoid tail {len}");
                let mut r = part.to_vec();
                silu(&mut r, Some(-1.5));
                let mut rw = xs[1000..1048].to_vec();
                silu(&mut rw, Some(-1.5));
                assert_eq!(r[..], rw[..len], "{name} silu tail {len}");
            }
        }
    }
}
