//! FULLY_CONNECTED's dot products with AVX-512 VNNI (`vpdpbusd`): weight rows `[N][K]` padded to whole
//! 64-byte registers once when the session is planned; each activation row made unsigned (`x ^ 0x80`, that
//! is `x + 128`) and `128 · Σ_k w[j][k]` subtracted back per output (precomputed), exact in i32 as in
//! [`super::packed_gemm`]. Where the CPU lacks VNNI, [`PackedDot::new`] returns `None` and the caller keeps
//! its portable loop.

/// Bytes per register.
const V: usize = 64;

/// Weight rows padded for [`PackedDot::dots`].
#[derive(Debug)]
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
pub struct PackedDot {
    n: usize,
    k: usize,
    /// `k` rounded up to a multiple of [`V`].
    kp: usize,
    /// `[n][kp]`, zero-padded.
    data: Vec<i8>,
    /// `-128 · Σ_k w[j][k]`.
    corr: Vec<i32>,
}

impl PackedDot {
    /// Packs `w` laid `[n][k]`, or `None` without VNNI.
    pub fn new(w: &[i8], n: usize, k: usize) -> Option<PackedDot> {
        if !super::packed_gemm::has_vnni() {
            return None;
        }
        assert_eq!(w.len(), n * k, "weights are [n][k]");
        let kp = k.div_ceil(V) * V;
        let mut data = vec![0i8; n * kp];
        for (d, s) in data.chunks_mut(kp).zip(w.chunks(k.max(1))) {
            d[..k].copy_from_slice(&s[..k]);
        }
        let corr = (0..n).map(|j| -128 * w[j * k..(j + 1) * k].iter().map(|&v| v as i32).sum::<i32>()).collect();
        Some(PackedDot { n, k, kp, data, corr })
    }

    /// `out[j] = Σ_k w[j][k] · x[k]` for every output `j` (`x` of length `k`); `buf` is scratch.
    pub fn dots(&self, x: &[i8], buf: &mut Vec<u8>, out: &mut [i32]) {
        assert!(x.len() == self.k && out.len() == self.n, "lengths do not match the packed weights");
        buf.clear();
        buf.extend(x.iter().map(|&v| v as u8 ^ 0x80));
        buf.resize(self.kp, 0x80);
        #[cfg(target_arch = "x86_64")]
        // SAFETY: packed only where the CPU has AVX-512 F/BW/VL/VNNI (`new`); lengths checked above
        unsafe {
            x86::dots(self, buf, out)
        }
        #[cfg(not(target_arch = "x86_64"))]
        unreachable!("packed only with VNNI")
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::{PackedDot, V};
    use std::arch::x86_64::*;

    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni")]
    pub(super) unsafe fn dots(w: &PackedDot, xu: &[u8], out: &mut [i32]) {
        let (kp, n) = (w.kp, w.n);
        let x = xu.as_ptr();
        let row = |j: usize| w.data.as_ptr().add(j * kp);
        let mut j = 0;
        while j + 4 <= n {
            let (r0, r1, r2, r3) = (row(j), row(j + 1), row(j + 2), row(j + 3));
            let mut a = [_mm512_setzero_si512(); 4];
            let mut k = 0;
            while k < kp {
                let xv = _mm512_loadu_si512(x.add(k) as *const _);
                a[0] = _mm512_dpbusd_epi32(a[0], xv, _mm512_loadu_si512(r0.add(k) as *const _));
                a[1] = _mm512_dpbusd_epi32(a[1], xv, _mm512_loadu_si512(r1.add(k) as *const _));
                a[2] = _mm512_dpbusd_epi32(a[2], xv, _mm512_loadu_si512(r2.add(k) as *const _));
                a[3] = _mm512_dpbusd_epi32(a[3], xv, _mm512_loadu_si512(r3.add(k) as *const _));
                k += V;
            }
            for (t, &av) in a.iter().enumerate() {
                out[j + t] = _mm512_reduce_add_epi32(av).wrapping_add(w.corr[j + t]);
            }
            j += 4;
        }
        for (j, o) in out.iter_mut().enumerate().take(n).skip(j) {
            let mut a = _mm512_setzero_si512();
            let mut k = 0;
            while k < kp {
                a = _mm512_dpbusd_epi32(a, _mm512_loadu_si512(x.add(k) as *const _), _mm512_loadu_si512(row(j).add(k) as *const _));
                k += V;
            }
            *o = _mm512_reduce_add_epi32(a).wrapping_add(w.corr[j]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dots_match_a_scalar_loop() {
        let mut s = 5u64;
        let mut rnd = move || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s as i8
        };
        for &(n, k) in &[(1, 1), (3, 63), (4, 64), (7, 65), (9, 1280), (1001, 40)] {
            let w: Vec<i8> = (0..n * k).map(|i| if i % 3 == 0 { -128 } else { rnd() }).collect();
            let x: Vec<i8> = (0..k).map(|i| if i % 4 == 0 { -128 } else { rnd() }).collect();
            let Some(p) = PackedDot::new(&w, n, k) else { return };
            let mut out = vec![0; n];
            p.dots(&x, &mut Vec::new(), &mut out);
            for j in 0..n {
                assert_eq!(out[j], (0..k).map(|t| w[j * k + t] as i32 * x[t] as i32).sum::<i32>(), "n {n} k {k} j {j}");
            }
        }
    }
}
