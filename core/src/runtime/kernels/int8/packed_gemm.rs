//! The packed int8 GEMM under CONV_2D (1x1 and im2col): weights packed once when the session is planned,
//! activations packed per run, and an AVX-512 VNNI (`vpdpbusd`) microkernel picked at run time, whose
//! output stage requantizes in registers.
//!
//! `vpdpbusd` multiplies unsigned by signed bytes, four at a time into an i32 lane. The activations are made
//! unsigned by adding 128 (`x ^ 0x80`), and `128 · Σ_k w[r][k]` is subtracted back from each row's
//! accumulator (precomputed here, [`PackedWeights::corr`]): exact in i32, so the sums are those of the
//! plain i8 × i8 product and the results stay bit-equal with LiteRT.
//!
//! Layouts (`P` output pixels, `K` = input channels × taps, `K4 = ⌈K/4⌉`):
//! * weights `[O/4 blocks][K4][4 rows][4 taps]` i8, zero-padded in K and in the last block's rows;
//! * activations `[K4][P][4 taps]` u8 ([`pack_cols`]), padded taps 128 (a zero activation);
//! * output rows of `P` pixels, either the i32 sums ([`Out::Acc`]) or requantized bytes ([`Out::Quant`]).
//!
//! Without VNNI (or off x86-64) the portable [`super::gemm::gemm_rows`] runs on the plain weights kept for
//! it; the two agree exactly (integer sums).

use super::fixedpoint::Multiplier;

/// Output rows per weight block (the microkernel's register rows).
pub const RB: usize = 4;

/// Weights packed for the GEMM, with what the fallback needs.
#[derive(Debug)]
pub struct PackedWeights {
    rows: usize,
    k: usize,
    k4: usize,
    /// `[⌈rows/RB⌉][k4][RB][4]` (VNNI), empty otherwise.
    data: Vec<i8>,
    /// `-128 · Σ_k w[r][k]` per row (padded to whole blocks), the correction for the `+128` of the activations.
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    corr: Vec<i32>,
    /// Plain `[rows][K]` weights for the portable kernel (empty when the VNNI kernel runs).
    plain: Vec<i8>,
}

/// Whether the VNNI kernel runs on this machine.
pub fn has_vnni() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::is_x86_feature_detected!("avx512f") && std::is_x86_feature_detected!("avx512bw")
            && std::is_x86_feature_detected!("avx512vl")
            && std::is_x86_feature_detected!("avx512vnni")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

impl PackedWeights {
    /// Packs `w` laid `[rows][k]`.
    pub fn new(w: &[i8], rows: usize, k: usize) -> PackedWeights {
        Self::with_kernel(w, rows, k, has_vnni())
    }

    /// Packs for the VNNI kernel (`vnni`) or the portable one.
    pub fn with_kernel(w: &[i8], rows: usize, k: usize, vnni: bool) -> PackedWeights {
        assert_eq!(w.len(), rows * k, "weights are [rows][k]");
        let k4 = k.div_ceil(4);
        if !vnni {
            return PackedWeights { rows, k, k4, data: Vec::new(), corr: Vec::new(), plain: w.to_vec() };
        }
        let blocks = rows.div_ceil(RB);
        let mut data = vec![0i8; blocks * k4 * RB * 4];
        let mut corr = vec![0i32; blocks * RB];
        for r in 0..rows {
            let (b, rr) = (r / RB, r % RB);
            let row = &w[r * k..(r + 1) * k];
            corr[r] = -128 * row.iter().map(|&v| v as i32).sum::<i32>();
            for (t, &v) in row.iter().enumerate() {
                data[((b * k4 + t / 4) * RB + rr) * 4 + t % 4] = v;
            }
        }
        PackedWeights { rows, k, k4, data, corr, plain: Vec::new() }
    }

    /// Bytes [`pack_cols`] needs for `p` pixels.
    pub fn packed_len(&self, p: usize) -> usize {
        if self.data.is_empty() {
            self.k * p
        } else {
            self.k4 * p * 4
        }
    }
}

/// Prepares the activations `col` (`[K][P]` i8, as im2col lays them or a 1x1 convolution's input is) for
/// [`gemm`] with `w`: `[K4][P][4]` u8 for the VNNI kernel, a plain copy otherwise. `out` is resized.
pub fn pack_cols(w: &PackedWeights, col: &[i8], p: usize, out: &mut Vec<u8>) {
    let k = w.k;
    if w.data.is_empty() {
        out.clear();
        out.extend(col[..k * p].iter().map(|&v| v as u8));
        return;
    }
    // every byte is written below: no clearing
    out.resize(w.k4 * p * 4, 0x80);
    for g in 0..w.k4 {
        let dst = &mut out[g * p * 4..(g + 1) * p * 4];
        let row = |t: usize| if 4 * g + t < k { Some(&col[(4 * g + t) * p..(4 * g + t + 1) * p]) } else { None };
        interleave4([row(0), row(1), row(2), row(3)], p, dst);
    }
}

/// `dst[4j + t] = rows[t][j] ^ 0x80` (128 for a missing row).
fn interleave4(rows: [Option<&[i8]>; 4], p: usize, dst: &mut [u8]) {
    #[cfg_attr(not(target_arch = "x86_64"), allow(unused_mut))]
    let mut j = 0;
    #[cfg(target_arch = "x86_64")]
    if let [Some(a), Some(b), Some(c), Some(d)] = rows {
        // SAFETY: SSE2 is part of x86-64; every load reads 16 of the `p` bytes of a row and every store
        // writes 64 of the `4p` bytes of `dst` (bounds checked by the loop condition)
        unsafe {
            use std::arch::x86_64::*;
            let flip = _mm_set1_epi8(-128);
            while j + 16 <= p {
                let ld = |r: &[i8]| _mm_xor_si128(_mm_loadu_si128(r.as_ptr().add(j) as *const __m128i), flip);
                let (va, vb, vc, vd) = (ld(a), ld(b), ld(c), ld(d));
                let ab_lo = _mm_unpacklo_epi8(va, vb);
                let ab_hi = _mm_unpackhi_epi8(va, vb);
                let cd_lo = _mm_unpacklo_epi8(vc, vd);
                let cd_hi = _mm_unpackhi_epi8(vc, vd);
                let o = dst.as_mut_ptr().add(4 * j) as *mut __m128i;
                _mm_storeu_si128(o, _mm_unpacklo_epi16(ab_lo, cd_lo));
                _mm_storeu_si128(o.add(1), _mm_unpackhi_epi16(ab_lo, cd_lo));
                _mm_storeu_si128(o.add(2), _mm_unpacklo_epi16(ab_hi, cd_hi));
                _mm_storeu_si128(o.add(3), _mm_unpackhi_epi16(ab_hi, cd_hi));
                j += 16;
            }
        }
    }
    for j in j..p {
        for (t, r) in rows.iter().enumerate() {
            dst[4 * j + t] = r.map_or(0x80, |r| r[j] as u8 ^ 0x80);
        }
    }
}

/// The requantization of one output row, as CONV_2D's GEMM output stage computes it on LiteRT's x86-64
/// build: `clamp(zp + mul_neon_rshl(acc + bias, m), lo, hi)` (see [`super::fixedpoint::mul_neon_rshl`]).
#[derive(Clone, Copy, Debug)]
pub struct RowQuant {
    pub bias: i32,
    pub m: Multiplier,
    pub zp: i32,
    pub lo: i32,
    pub hi: i32,
}

/// Where [`gemm`] writes rows `r0..r0 + n` (`n` = the slice's rows), each `p` long.
pub enum Out<'a> {
    /// The exact sums `Σ_k w[r][k] · x[k][j]`, `[n][p]` (what the legacy uint8 convolutions with weight zero
    /// points would need; only the tests use it yet).
    #[cfg_attr(not(test), allow(dead_code))]
    Acc(&'a mut [i32]),
    /// Requantized bytes `[n][p]` (i8 or u8 data; the range in each [`RowQuant`]), with one [`RowQuant`]
    /// per row of the whole weight matrix.
    Quant(&'a mut [u8], &'a [RowQuant]),
}

/// Rows `r0..` of the product of `w` with the activations `xp` ([`pack_cols`]) over `p` pixels, `r0` a
/// multiple of [`RB`]; the number of rows is the output slice's length over `p`.
pub fn gemm(w: &PackedWeights, r0: usize, xp: &[u8], p: usize, out: Out) {
    assert_eq!(r0 % RB, 0, "row blocks start at multiples of RB");
    assert!(xp.len() >= w.packed_len(p), "packed activations too short");
    let n = match &out {
        Out::Acc(a) => a.len() / p.max(1),
        Out::Quant(q, rq) => {
            assert!(rq.len() >= r0 + q.len() / p.max(1), "one RowQuant per row");
            q.len() / p.max(1)
        }
    };
    assert!(r0 + n <= w.rows, "rows out of range");
    if p == 0 || n == 0 {
        return;
    }
    #[cfg(target_arch = "x86_64")]
    if !w.data.is_empty() {
        // SAFETY: weights are packed for VNNI only when the CPU has AVX-512 F/BW/VNNI (`has_vnni`); the
        // layouts and lengths are checked above
        unsafe { vnni::gemm(w, r0, n, xp, p, out) };
        return;
    }
    // the portable kernel on plain weights (VNNI-packed weights never reach it: packing checked the CPU)
    let wr = &w.plain[r0 * w.k..(r0 + n) * w.k];
    let col = as_i8_slice(&xp[..w.k * p]);
    match out {
        Out::Acc(a) => super::gemm::gemm_rows(wr, n, col, a),
        Out::Quant(q, rq) => {
            let mut acc = vec![0i32; n * p];
            super::gemm::gemm_rows(wr, n, col, &mut acc);
            for (r, (orow, arow)) in q.chunks_mut(p).zip(acc.chunks(p)).enumerate() {
                let RowQuant { bias, m, zp, lo, hi } = rq[r0 + r];
                for (o, &a) in orow.iter_mut().zip(arow) {
                    *o = (super::fixedpoint::mul_neon_rshl(a + bias, m) + zp).clamp(lo, hi) as u8;
                }
            }
        }
    }
}

/// Bytes as i8.
fn as_i8_slice(x: &[u8]) -> &[i8] {
    // SAFETY: u8 and i8 have the same size and alignment, and every bit pattern is valid for both
    unsafe { std::slice::from_raw_parts(x.as_ptr() as *const i8, x.len()) }
}

#[cfg(target_arch = "x86_64")]
mod vnni {
    use super::super::requantize::x86::requant;
    use super::{Out, PackedWeights, RowQuant, RB};
    use std::arch::x86_64::*;

    /// Pixels per register.
    const L: usize = 16;
    /// Registers of pixels per tile (`RB × NV` accumulators).
    const NV: usize = 6;

    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni")]
    pub(super) unsafe fn gemm(w: &PackedWeights, r0: usize, n: usize, xp: &[u8], p: usize, mut out: Out) {
        let k4 = w.k4;
        for b in 0..n.div_ceil(RB) {
            let rows = (n - b * RB).min(RB);
            let blk = r0 / RB + b;
            let wb = w.data.as_ptr().add(blk * k4 * RB * 4);
            let init: [i32; RB] = std::array::from_fn(|r| {
                let c = w.corr[blk * RB + r];
                match &out {
                    Out::Quant(_, rq) if r < rows => c.wrapping_add(rq[blk * RB + r].bias),
                    _ => c,
                }
            });
            let mut j = 0;
            while j + NV * L <= p {
                tile::<NV>(wb, k4, xp.as_ptr(), p, j, !0, init, rows, b * RB, &mut out, blk * RB);
                j += NV * L;
            }
            let rem = p - j;
            if rem > 0 {
                // 1 to NV registers, the last one under a mask
                let nv = rem.div_ceil(L);
                let last: __mmask16 = if rem.is_multiple_of(L) { !0 } else { (1u16 << (rem % L)) - 1 };
                match nv {
                    1 => tile::<1>(wb, k4, xp.as_ptr(), p, j, last, init, rows, b * RB, &mut out, blk * RB),
                    2 => tile::<2>(wb, k4, xp.as_ptr(), p, j, last, init, rows, b * RB, &mut out, blk * RB),
                    3 => tile::<3>(wb, k4, xp.as_ptr(), p, j, last, init, rows, b * RB, &mut out, blk * RB),
                    4 => tile::<4>(wb, k4, xp.as_ptr(), p, j, last, init, rows, b * RB, &mut out, blk * RB),
                    5 => tile::<5>(wb, k4, xp.as_ptr(), p, j, last, init, rows, b * RB, &mut out, blk * RB),
                    _ => tile::<NV>(wb, k4, xp.as_ptr(), p, j, last, init, rows, b * RB, &mut out, blk * RB),
                }
            }
        }
    }

    /// One tile: `RB` rows × `V` registers of pixels from pixel `j`, the last register under `last`.
    /// `orow` is the tile's first row within the output slice, `grow` within the weight matrix.
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni")]
    #[allow(clippy::too_many_arguments)]
    unsafe fn tile<const V: usize>(
        wb: *const i8,
        k4: usize,
        xp: *const u8,
        p: usize,
        j: usize,
        last: __mmask16,
        init: [i32; RB],
        rows: usize,
        orow: usize,
        out: &mut Out,
        grow: usize,
    ) {
        let mask = |v: usize| if v + 1 == V { last } else { !0 };
        let mut c: [[__m512i; V]; RB] = [[_mm512_setzero_si512(); V]; RB];
        for (cr, &i) in c.iter_mut().zip(&init) {
            cr.fill(_mm512_set1_epi32(i));
        }
        let mut x = xp.add(4 * j);
        let mut wp = wb as *const i32;
        for _ in 0..k4 {
            let mut xs = [_mm512_setzero_si512(); V];
            for (v, xv) in xs.iter_mut().enumerate() {
                *xv = _mm512_maskz_loadu_epi32(mask(v), x.add(v * 4 * L) as *const i32);
            }
            for cr in c.iter_mut() {
                let wv = _mm512_set1_epi32(wp.read_unaligned());
                wp = wp.add(1);
                for v in 0..V {
                    cr[v] = _mm512_dpbusd_epi32(cr[v], xs[v], wv);
                }
            }
            x = x.add(4 * p);
        }
        match out {
            Out::Acc(a) => {
                for (r, cr) in c.iter().enumerate().take(rows) {
                    let dst = a.as_mut_ptr().add((orow + r) * p + j);
                    for (v, &cv) in cr.iter().enumerate() {
                        _mm512_mask_storeu_epi32(dst.add(v * L), mask(v), cv);
                    }
                }
            }
            Out::Quant(q, rq) => {
                for (r, cr) in c.iter().enumerate().take(rows) {
                    let dst = q.as_mut_ptr().add((orow + r) * p + j);
                    let RowQuant { m, zp, lo, hi, .. } = rq[grow + r];
                    let left = _mm_cvtsi32_si128(m.shift.max(0));
                    let right = (-m.shift).max(0);
                    let mult = _mm512_set1_epi64(m.multiplier as i64);
                    let (zp, lo, hi) = (_mm512_set1_epi32(zp), _mm512_set1_epi32(lo), _mm512_set1_epi32(hi));
                    for (v, &cv) in cr.iter().enumerate() {
                        let y = requant(cv, left, right, false, mult, zp, lo, hi);
                        _mm_mask_storeu_epi8(dst.add(v * L) as *mut i8, mask(v), _mm512_cvtepi32_epi8(y));
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::kernels::int8::fixedpoint::{mul_neon_rshl, quantize_multiplier};

    fn rng(seed: u64) -> impl FnMut() -> u64 {
        let mut s = seed;
        move || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s
        }
    }

    /// Both kernels (the VNNI one where the CPU has it) against a scalar loop, over row counts and pixel
    /// counts around the block and register widths, K not a multiple of 4, and extreme values.
    #[test]
    fn packed_gemm_matches_a_scalar_loop() {
        let mut rnd = rng(3);
        for &(rows, k, p) in &[(1, 1, 1), (3, 5, 17), (4, 4, 16), (5, 27, 97), (9, 48, 2304 / 8), (8, 3, 200), (13, 131, 9), (16, 192, 36), (6, 18, 190), (3, 7, 96 + 95)] {
            let w: Vec<i8> = (0..rows * k).map(|i| if i % 7 == 0 { -128 } else { rnd() as i8 }).collect();
            let col: Vec<i8> = (0..k * p).map(|i| if i % 5 == 0 { -128 } else { rnd() as i8 }).collect();
            let want: Vec<i32> = (0..rows * p).map(|i| (0..k).map(|t| w[i / p * k + t] as i32 * col[t * p + i % p] as i32).sum()).collect();
            let rq: Vec<RowQuant> = (0..rows)
                .map(|r| RowQuant { bias: rnd() as i32 >> 12, m: quantize_multiplier([0.0007, 0.02, 0.3, 1.7][r % 4]), zp: (rnd() % 21) as i32 - 10, lo: -128, hi: 127 - r as i32 })
                .collect();
            for vnni in [false, has_vnni()] {
                let pw = PackedWeights::with_kernel(&w, rows, k, vnni);
                let mut xp = Vec::new();
                pack_cols(&pw, &col, p, &mut xp);
                let mut acc = vec![0i32; rows * p];
                gemm(&pw, 0, &xp, p, Out::Acc(&mut acc));
                assert_eq!(acc, want, "rows {rows} k {k} p {p} vnni {vnni}");
                // from the second block on
                if rows > RB {
                    let mut acc = vec![0i32; (rows - RB) * p];
                    gemm(&pw, RB, &xp, p, Out::Acc(&mut acc));
                    assert_eq!(acc, want[RB * p..], "rows {rows} k {k} p {p} from RB");
                }
                let mut q = vec![0u8; rows * p];
                gemm(&pw, 0, &xp, p, Out::Quant(&mut q, &rq));
                for (i, &g) in q.iter().enumerate() {
                    let RowQuant { bias, m, zp, lo, hi } = rq[i / p];
                    assert_eq!(g as i8 as i32, (mul_neon_rshl(want[i] + bias, m) + zp).clamp(lo, hi), "quant rows {rows} k {k} p {p} at {i}");
                }
            }
        }
    }
}
