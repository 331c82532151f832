//! Splitting records of 2-4 values (4-byte elements, or bytes with VBMI) into planes of one value each with
//! AVX-512 permutes: a converter's
//! NHWC→NCHW transpose of an RGB image (`[1, 96, 96, 3]` → `[1, 3, 96, 96]`), which the generic strided copy
//! walks one value at a time (20 µs for 96×96 on this project's machine: 3% of a Keras MobileNetV2's run).
//!
//! Sixteen records at a time: their `s·16` values are loaded as `s` vectors, and output plane `c` takes lanes
//! `c, c + s, c + 2s, ...` of that concatenation with two `vpermt2ps` (any 4-byte element: values are moved,
//! never computed, so every bit pattern passes unchanged). With AVX2 only (Zen 2/3), three-value records
//! (RGB), eight at a time: the lanes `c + 3j` of the three vectors fall on eight different lane positions (3 and
//! 8 are coprime), so two blends put them in one vector and `vpermps` orders them.

/// `dst[c·plane + p] = src[p·s + c]` for `c < s`, `p < n`, with `s` in 2..=4 and 4-byte elements; false (and
/// nothing written) where this CPU or `s` has no such kernel. The caller passes `src` of at least `n·s` values
/// and `dst` of at least `(s - 1)·plane + n` with `plane ≥ n`.
pub(crate) fn deinterleave<T: Copy>(src: &[T], s: usize, n: usize, dst: &mut [T], plane: usize) -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        if std::mem::size_of::<T>() == 4 && (2..=4).contains(&s) && plane >= n && src.len() >= n * s && dst.len() >= (s - 1) * plane + n && super::vector::avx512() {
            // SAFETY: AVX-512F is present (checked); the sizes are checked above and T is a 4-byte Copy value,
            // moved as 32 bits.
            unsafe { x86::deinterleave(src.as_ptr() as *const f32, s, n, dst.as_mut_ptr() as *mut f32, plane) };
            return true;
        }
        if std::mem::size_of::<T>() == 1 && (2..=4).contains(&s) && plane >= n && src.len() >= n * s && dst.len() >= (s - 1) * plane + n && bytes_available() {
            // SAFETY: AVX-512 F/BW and VBMI are present (checked); sizes checked above, 1-byte Copy values moved
            // as bytes.
            unsafe { x86::deinterleave_bytes(src.as_ptr() as *const u8, s, n, dst.as_mut_ptr() as *mut u8, plane) };
            return true;
        }
        if std::mem::size_of::<T>() == 4 && s == 3 && plane >= n && src.len() >= n * s && dst.len() >= (s - 1) * plane + n && std::is_x86_feature_detected!("avx2") {
            // SAFETY: AVX2 is present (checked); sizes checked as above, 4-byte Copy values moved as 32 bits.
            unsafe { x86::deinterleave3_avx2(src.as_ptr() as *const f32, n, dst.as_mut_ptr() as *mut f32, plane) };
            return true;
        }
    }
    let _ = (src, s, n, dst, plane);
    false
}

/// Whether the byte kernel runs (AVX-512 F/BW and VBMI, not under `TPU_SDK_NO_AVX512=1`).
#[cfg(target_arch = "x86_64")]
fn bytes_available() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| super::vector::avx512() && std::arch::is_x86_feature_detected!("avx512bw") && std::arch::is_x86_feature_detected!("avx512vbmi"))
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    /// Lane indices: `first[c]` gathers `c + s·j` from vectors 0-1 (lanes where it is below 32), `second[c]`
    /// keeps those lanes and takes the rest from vector 2 (s = 3) or vectors 2-3 (s = 4, as `c + s·j - 32`).
    fn indices(s: usize, c: usize) -> ([i32; 16], [i32; 16]) {
        let (mut first, mut second) = ([0i32; 16], [0i32; 16]);
        for j in 0..16 {
            let e = (c + s * j) as i32;
            first[j] = e & 31;
            second[j] = if e < 32 { j as i32 } else { 16 + (e - 32) };
        }
        (first, second)
    }

    /// # Safety
    /// AVX-512F; `src` holds `n·s` values and `dst` `(s - 1)·plane + n`; s in 2..=4.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn deinterleave(src: *const f32, s: usize, n: usize, dst: *mut f32, plane: usize) {
        let mut idx = [[_mm512_setzero_si512(); 2]; 4];
        for (c, ix) in idx.iter_mut().enumerate().take(s) {
            let (a, b) = indices(s, c);
            *ix = [_mm512_loadu_si512(a.as_ptr() as *const _), _mm512_loadu_si512(b.as_ptr() as *const _)];
        }
        let full = n / 16 * 16;
        let mut p = 0;
        while p < full {
            let at = src.add(p * s);
            let v0 = _mm512_loadu_ps(at);
            let v1 = _mm512_loadu_ps(at.add(16));
            match s {
                2 => {
                    for (c, ix) in idx.iter().enumerate().take(2) {
                        _mm512_storeu_ps(dst.add(c * plane + p), _mm512_permutex2var_ps(v0, ix[0], v1));
                    }
                }
                3 => {
                    let v2 = _mm512_loadu_ps(at.add(32));
                    for (c, ix) in idx.iter().enumerate().take(3) {
                        let t = _mm512_permutex2var_ps(v0, ix[0], v1);
                        _mm512_storeu_ps(dst.add(c * plane + p), _mm512_permutex2var_ps(t, ix[1], v2));
                    }
                }
                _ => {
                    // s = 4: lanes 0-7 come from vectors 0-1, lanes 8-15 from vectors 2-3
                    let (v2, v3) = (_mm512_loadu_ps(at.add(32)), _mm512_loadu_ps(at.add(48)));
                    for (c, ix) in idx.iter().enumerate().take(4) {
                        let lo = _mm512_permutex2var_ps(v0, ix[0], v1);
                        let hi = _mm512_permutex2var_ps(v2, ix[0], v3);
                        _mm512_storeu_ps(dst.add(c * plane + p), _mm512_mask_blend_ps(0xFF00, lo, hi));
                    }
                }
            }
            p += 16;
        }
        for p in full..n {
            for c in 0..s {
                *dst.add(c * plane + p) = *src.add(p * s + c);
            }
        }
    }

    /// [`deinterleave`] of bytes (an int8 image), 64 records at a time: plane `c` takes bytes `c + s·j` of the
    /// `s` loaded vectors, with `vpermt2b` over vectors 0-1 (indices below 128), then for `s` > 2 over that and
    /// vector 2 (s = 3), or vectors 2-3 for the upper lanes (s = 4).
    ///
    /// # Safety
    /// AVX-512 F/BW and VBMI; `src` holds `n·s` bytes and `dst` `(s - 1)·plane + n`; s in 2..=4.
    #[target_feature(enable = "avx512f,avx512bw,avx512vbmi")]
    pub(super) unsafe fn deinterleave_bytes(src: *const u8, s: usize, n: usize, dst: *mut u8, plane: usize) {
        let mut idx = [[_mm512_setzero_si512(); 2]; 4];
        for (c, ix) in idx.iter_mut().enumerate().take(s) {
            let (mut first, mut second) = ([0u8; 64], [0u8; 64]);
            for j in 0..64 {
                let e = c + s * j;
                first[j] = (e & 127) as u8;
                second[j] = if s == 4 { (e & 127) as u8 } else if e < 128 { j as u8 } else { (64 + e - 128) as u8 };
            }
            *ix = [_mm512_loadu_si512(first.as_ptr() as *const _), _mm512_loadu_si512(second.as_ptr() as *const _)];
        }
        let full = n / 64 * 64;
        let mut p = 0;
        while p < full {
            let at = src.add(p * s);
            let ld = |k: usize| _mm512_loadu_si512(at.add(64 * k) as *const _);
            let (v0, v1) = (ld(0), ld(1));
            for (c, ix) in idx.iter().enumerate().take(s) {
                let lo = _mm512_permutex2var_epi8(v0, ix[0], v1);
                let out = match s {
                    2 => lo,
                    3 => _mm512_permutex2var_epi8(lo, ix[1], ld(2)),
                    // s = 4: lanes 0-31 come from vectors 0-1, lanes 32-63 from vectors 2-3
                    _ => _mm512_mask_blend_epi8(0xFFFF_FFFF_0000_0000, lo, _mm512_permutex2var_epi8(ld(2), ix[1], ld(3))),
                };
                _mm512_storeu_si512(dst.add(c * plane + p) as *mut _, out);
            }
            p += 64;
        }
        for p in full..n {
            for c in 0..s {
                *dst.add(c * plane + p) = *src.add(p * s + c);
            }
        }
    }

    /// [`deinterleave`] for `s` = 3 with AVX2, eight records at a time.
    ///
    /// # Safety
    /// AVX2; `src` holds `n·3` values and `dst` `2·plane + n`.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn deinterleave3_avx2(src: *const f32, n: usize, dst: *mut f32, plane: usize) {
        // per plane c: which of the three vectors holds lane i's element (-1 masks), and the permutation
        let mut sel = [[[0i32; 8]; 2]; 3];
        let mut perm = [[0i32; 8]; 3];
        for (c, (sel, perm)) in sel.iter_mut().zip(perm.iter_mut()).enumerate() {
            for (j, p) in perm.iter_mut().enumerate() {
                let e = c + 3 * j;
                let (v, lane) = (e / 8, e % 8);
                *p = lane as i32;
                sel[0][lane] = if v >= 1 { -1 } else { 0 };
                sel[1][lane] = if v == 2 { -1 } else { 0 };
            }
        }
        let ld = |a: &[i32; 8]| _mm256_loadu_si256(a.as_ptr() as *const __m256i);
        let masks: [[__m256; 2]; 3] = std::array::from_fn(|c| [_mm256_castsi256_ps(ld(&sel[c][0])), _mm256_castsi256_ps(ld(&sel[c][1]))]);
        let perms: [__m256i; 3] = std::array::from_fn(|c| ld(&perm[c]));
        let full = n / 8 * 8;
        let mut p = 0;
        while p < full {
            let at = src.add(p * 3);
            let (v0, v1, v2) = (_mm256_loadu_ps(at), _mm256_loadu_ps(at.add(8)), _mm256_loadu_ps(at.add(16)));
            for c in 0..3 {
                let t = _mm256_blendv_ps(_mm256_blendv_ps(v0, v1, masks[c][0]), v2, masks[c][1]);
                _mm256_storeu_ps(dst.add(c * plane + p), _mm256_permutevar8x32_ps(t, perms[c]));
            }
            p += 8;
        }
        for p in full..n {
            for c in 0..3 {
                *dst.add(c * plane + p) = *src.add(p * 3 + c);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn planes_hold_every_records_values() {
        for s in 2..=4 {
            for n in [0, 1, 15, 16, 17, 47, 96 * 96] {
                let src: Vec<u32> = (0..n * s).map(|i| (i as u32).wrapping_mul(2654435761)).collect();
                let plane = n + 5;
                let mut dst = vec![u32::MAX; (s - 1) * plane + n];
                if !deinterleave(&src, s, n, &mut dst, plane) {
                    return; // no AVX-512 here: the caller's generic copy runs instead
                }
                for c in 0..s {
                    for p in 0..n {
                        assert_eq!(dst[c * plane + p], src[p * s + c], "s {s} n {n} c {c} p {p}");
                    }
                    if c + 1 < s {
                        assert!(dst[c * plane + n..(c + 1) * plane].iter().all(|&v| v == u32::MAX), "gap untouched");
                    }
                }
            }
        }
    }

    /// The byte kernel (an int8 image), around its 64 records per step.
    #[test]
    fn byte_planes_hold_every_records_values() {
        for s in 2..=4 {
            for n in [0, 1, 63, 64, 65, 130, 96 * 96] {
                let src: Vec<u8> = (0..n * s).map(|i| (i as u32).wrapping_mul(2654435761) as u8 ^ (i >> 8) as u8).collect();
                let plane = n + 5;
                let mut dst = vec![0xA5u8; (s - 1) * plane + n];
                if !deinterleave(&src, s, n, &mut dst, plane) {
                    return; // no AVX-512 VBMI here: the caller's generic copy runs instead
                }
                for c in 0..s {
                    for p in 0..n {
                        assert_eq!(dst[c * plane + p], src[p * s + c], "s {s} n {n} c {c} p {p}");
                    }
                    if c + 1 < s {
                        assert!(dst[c * plane + n..(c + 1) * plane].iter().all(|&v| v == 0xA5), "gap untouched");
                    }
                }
            }
        }
    }

    /// The AVX2 kernel for RGB records, wherever the CPU has AVX2 (the AVX-512 one takes them where it runs).
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn rgb_records_with_avx2() {
        if !std::is_x86_feature_detected!("avx2") {
            return;
        }
        for n in [0, 1, 7, 8, 9, 23, 96 * 96] {
            let src: Vec<u32> = (0..n * 3).map(|i| (i as u32).wrapping_mul(2654435761)).collect();
            let plane = n + 3;
            let mut dst = vec![u32::MAX; 2 * plane + n];
            // SAFETY: AVX2 checked; src holds 3n values, dst 2·plane + n
            unsafe { x86::deinterleave3_avx2(src.as_ptr() as *const f32, n, dst.as_mut_ptr() as *mut f32, plane) };
            for c in 0..3 {
                for p in 0..n {
                    assert_eq!(dst[c * plane + p], src[p * 3 + c], "n {n} c {c} p {p}");
                }
                if c < 2 {
                    assert!(dst[c * plane + n..(c + 1) * plane].iter().all(|&v| v == u32::MAX), "gap untouched");
                }
            }
        }
    }

    #[test]
    fn unsupported_shapes_decline() {
        let src = [0f32; 20];
        let mut dst = [0f32; 20];
        assert!(!deinterleave(&src, 5, 4, &mut dst, 4));
        assert!(!deinterleave(&src, 1, 4, &mut dst, 4));
        assert!(!deinterleave(&[0u16; 8], 2, 4, &mut [0u16; 8], 4));
    }
}
