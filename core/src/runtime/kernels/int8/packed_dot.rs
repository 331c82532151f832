//! FULLY_CONNECTED's dot products, one weight row per output, with the weights laid out once when the session is
//! planned (rows zero-padded to whole registers):
//! - AVX-512 VNNI (`vpdpbusd`): each activation row made unsigned (`x ^ 0x80`, that is `x + 128`) and
//!   `128 · Σ_k w[j][k]` subtracted back per output (precomputed), exact in i32 as in [`super::packed_gemm`];
//! - AVX2 (`vpmaddwd`): the activation row widened to i16 once, each 16 weights widened as they are loaded
//!   (`vpmovsxbw`), pair products of two i8 values summed in i32 — exact, with no correction.
//!
//! The caller first [`PackedDot::prepare`]s an activation row, then asks for any range of outputs
//! ([`PackedDot::dots_at`]), so one row's outputs can be split between threads. Where the CPU has neither,
//! [`PackedDot::new`] returns `None` and the caller keeps its portable loop.

use super::packed_gemm::Kernel;

/// Bytes per VNNI register.
const V: usize = 64;
/// Weights per AVX2 step (one `vpmovsxbw` of 16 bytes).
const V2: usize = 16;

/// Weight rows padded for [`PackedDot::dots_at`].
#[derive(Debug)]
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
pub struct PackedDot {
    n: usize,
    k: usize,
    /// `k` rounded up to a multiple of the kernel's step ([`V`] or [`V2`]).
    kp: usize,
    kernel: Kernel,
    /// `[n][kp]`, zero-padded.
    data: Vec<i8>,
    /// `-128 · Σ_k w[j][k]` (VNNI only).
    corr: Vec<i32>,
}

impl PackedDot {
    /// Packs `w` laid `[n][k]` for the best kernel this CPU has, or `None` without VNNI and AVX2.
    pub fn new(w: &[i8], n: usize, k: usize) -> Option<PackedDot> {
        Self::with_kernel(w, n, k, Kernel::best())
    }

    /// Packs for `kernel` (which the CPU must run), or `None` for [`Kernel::Portable`].
    pub fn with_kernel(w: &[i8], n: usize, k: usize, kernel: Kernel) -> Option<PackedDot> {
        let step = match kernel {
            Kernel::Vnni => V,
            Kernel::Avx2 => V2,
            Kernel::Portable => return None,
        };
        assert_eq!(w.len(), n * k, "weights are [n][k]");
        let kp = k.div_ceil(step).max(1) * step;
        let mut data = vec![0i8; n * kp];
        for (d, s) in data.chunks_mut(kp).zip(w.chunks(k.max(1))) {
            d[..k].copy_from_slice(&s[..k]);
        }
        let corr = if kernel == Kernel::Vnni { (0..n).map(|j| -128 * w[j * k..(j + 1) * k].iter().map(|&v| v as i32).sum::<i32>()).collect() } else { Vec::new() };
        Some(PackedDot { n, k, kp, kernel, data, corr })
    }

    /// Lays the activation row `x` (length `k`) out in `buf` for [`PackedDot::dots_at`].
    pub fn prepare(&self, x: &[i8], buf: &mut Vec<u8>) {
        assert_eq!(x.len(), self.k, "the activation row is as long as a weight row");
        buf.clear();
        match self.kernel {
            Kernel::Avx2 => {
                // i16, native (little-endian) byte order, zero-padded
                buf.extend(x.iter().flat_map(|&v| (v as i16).to_le_bytes()));
                buf.resize(2 * self.kp, 0);
            }
            _ => {
                buf.extend(x.iter().map(|&v| v as u8 ^ 0x80));
                buf.resize(self.kp, 0x80);
            }
        }
    }

    /// `out[i] = Σ_k w[j0 + i][k] · x[k]` for the row `x` that [`PackedDot::prepare`] laid out in `xb`.
    pub fn dots_at(&self, xb: &[u8], j0: usize, out: &mut [i32]) {
        let need = if self.kernel == Kernel::Avx2 { 2 * self.kp } else { self.kp };
        assert!(xb.len() == need && j0 + out.len() <= self.n, "a prepared row and outputs within the packed weights");
        #[cfg(target_arch = "x86_64")]
        // SAFETY: packed only for a kernel the CPU runs (`Kernel::best`, or the caller's promise in
        // `with_kernel`); the row's and the outputs' lengths are checked above.
        unsafe {
            match self.kernel {
                Kernel::Vnni => x86::dots_vnni(self, xb, j0, out),
                _ => x86::dots_avx2(self, xb, j0, out),
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        unreachable!("packed only on x86-64")
    }

    /// `out[j] = Σ_k w[j][k] · x[k]` for every output `j` (`x` of length `k`); `buf` is scratch.
    #[cfg(test)]
    pub fn dots(&self, x: &[i8], buf: &mut Vec<u8>, out: &mut [i32]) {
        assert_eq!(out.len(), self.n, "one output per weight row");
        self.prepare(x, buf);
        self.dots_at(buf, 0, out);
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::{PackedDot, V, V2};
    use std::arch::x86_64::*;

    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni")]
    pub(super) unsafe fn dots_vnni(w: &PackedDot, xu: &[u8], j0: usize, out: &mut [i32]) {
        let kp = w.kp;
        let x = xu.as_ptr();
        let row = |j: usize| w.data.as_ptr().add((j0 + j) * kp);
        let n = out.len();
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
                out[j + t] = _mm512_reduce_add_epi32(av).wrapping_add(w.corr[j0 + j + t]);
            }
            j += 4;
        }
        for (j, o) in out.iter_mut().enumerate().skip(j) {
            let mut a = _mm512_setzero_si512();
            let mut k = 0;
            while k < kp {
                a = _mm512_dpbusd_epi32(a, _mm512_loadu_si512(x.add(k) as *const _), _mm512_loadu_si512(row(j).add(k) as *const _));
                k += V;
            }
            *o = _mm512_reduce_add_epi32(a).wrapping_add(w.corr[j0 + j]);
        }
    }

    /// The sum of the eight lanes.
    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn hsum(v: __m256i) -> i32 {
        let s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256::<1>(v));
        let s = _mm_add_epi32(s, _mm_shuffle_epi32::<0b01_00_11_10>(s));
        _mm_cvtsi128_si32(_mm_add_epi32(s, _mm_shuffle_epi32::<0b10_11_00_01>(s)))
    }

    /// `xb`: the row as i16 (2·kp bytes).
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn dots_avx2(w: &PackedDot, xb: &[u8], j0: usize, out: &mut [i32]) {
        let kp = w.kp;
        let x = xb.as_ptr() as *const i16;
        let row = |j: usize| w.data.as_ptr().add((j0 + j) * kp);
        let wide = |p: *const i8| _mm256_cvtepi8_epi16(_mm_loadu_si128(p as *const __m128i));
        let n = out.len();
        let mut j = 0;
        while j + 4 <= n {
            let (r0, r1, r2, r3) = (row(j), row(j + 1), row(j + 2), row(j + 3));
            let mut a = [_mm256_setzero_si256(); 4];
            let mut k = 0;
            while k < kp {
                let xv = _mm256_loadu_si256(x.add(k) as *const __m256i);
                a[0] = _mm256_add_epi32(a[0], _mm256_madd_epi16(wide(r0.add(k)), xv));
                a[1] = _mm256_add_epi32(a[1], _mm256_madd_epi16(wide(r1.add(k)), xv));
                a[2] = _mm256_add_epi32(a[2], _mm256_madd_epi16(wide(r2.add(k)), xv));
                a[3] = _mm256_add_epi32(a[3], _mm256_madd_epi16(wide(r3.add(k)), xv));
                k += V2;
            }
            for (t, &av) in a.iter().enumerate() {
                out[j + t] = hsum(av);
            }
            j += 4;
        }
        for (j, o) in out.iter_mut().enumerate().skip(j) {
            let mut a = _mm256_setzero_si256();
            let mut k = 0;
            while k < kp {
                a = _mm256_add_epi32(a, _mm256_madd_epi16(wide(row(j).add(k)), _mm256_loadu_si256(x.add(k) as *const __m256i)));
                k += V2;
            }
            *o = hsum(a);
        }
    }
}
#[cfg(test)]
mod tests {
    use super::*;

    /// Every kernel this CPU runs, whole rows and output ranges, against the scalar sums; operands at -128
    /// (the widest products) and lengths around the register steps.
    #[test]
    fn dots_match_a_scalar_loop() {
        let mut s = 5u64;
        let mut rnd = move || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s as i8
        };
        let kernels: Vec<Kernel> = [Kernel::Vnni, Kernel::Avx2]
            .into_iter()
            .filter(|&k| if k == Kernel::Vnni { super::super::packed_gemm::has_vnni() } else { super::super::packed_gemm::has_avx2() })
            .collect();
        for &(n, k) in &[(1, 1), (3, 15), (5, 16), (3, 63), (4, 64), (7, 65), (9, 1280), (1001, 40)] {
            let w: Vec<i8> = (0..n * k).map(|i| if i % 3 == 0 { -128 } else { rnd() }).collect();
            let x: Vec<i8> = (0..k).map(|i| if i % 4 == 0 { -128 } else { rnd() }).collect();
            let want: Vec<i32> = (0..n).map(|j| (0..k).map(|t| w[j * k + t] as i32 * x[t] as i32).sum()).collect();
            for &kernel in &kernels {
                let p = PackedDot::with_kernel(&w, n, k, kernel).expect("a SIMD kernel");
                let mut out = vec![0; n];
                p.dots(&x, &mut Vec::new(), &mut out);
                assert_eq!(out, want, "{kernel:?} n {n} k {k}");
                // an output range starting inside the rows, as a split between threads asks for
                let mut buf = Vec::new();
                p.prepare(&x, &mut buf);
                let j0 = n / 3;
                let mut part = vec![0; n - j0];
                p.dots_at(&buf, j0, &mut part);
                assert_eq!(part, want[j0..], "{kernel:?} n {n} k {k} from {j0}");
            }
        }
    }
}
