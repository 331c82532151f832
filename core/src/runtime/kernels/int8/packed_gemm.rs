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
//! Without VNNI, on x86-64 with AVX2 (AMD Zen 2/3, Intel before Ice Lake), an AVX2 kernel on 16-bit values
//! ([`avx2`]): `vpmaddubsw` would multiply bytes directly but saturates its i16 pair sums (255 · 127 · 2 >
//! 32767), so, as XNNPACK's AVX2 kernels do, the operands are widened to i16 and `vpmaddwd` adds each pair of
//! taps into an i32 lane exactly. Layouts: weights `[O/4 blocks][K2][4 rows][2 taps]` i16, activations
//! `[K2][P][2 taps]` i16 (`K2 = ⌈K/2⌉`; the activations keep their sign: no correction term). The int8
//! MobileNetV2 of the suite ran 9× slower than XNNPACK on a Zen 3 through the portable loop.
//!
//! Elsewhere the portable [`super::gemm::gemm_rows`] runs on the plain weights kept for it. All kernels agree
//! exactly (integer sums; the same output stage).

use super::fixedpoint::Multiplier;

/// Output rows per weight block (the microkernel's register rows).
pub const RB: usize = 4;

/// Which microkernel a [`PackedWeights`] is laid out for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kernel {
    /// AVX-512 VNNI (`vpdpbusd`), bytes.
    Vnni,
    /// AVX2 (`vpmaddwd`), 16-bit values.
    Avx2,
    /// The portable loop over plain weights.
    Portable,
}

impl Kernel {
    /// The fastest kernel this CPU runs.
    pub fn best() -> Kernel {
        if has_vnni() {
            Kernel::Vnni
        } else if has_avx2() {
            Kernel::Avx2
        } else {
            Kernel::Portable
        }
    }
}

/// Whether the AVX2 kernel runs on this machine.
pub fn has_avx2() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::is_x86_feature_detected!("avx2")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// Weights packed for the GEMM, with what the fallback needs.
#[derive(Debug)]
pub struct PackedWeights {
    rows: usize,
    k: usize,
    k4: usize,
    kernel: Kernel,
    /// `[⌈rows/RB⌉][k4][RB][4]` (VNNI), empty otherwise.
    data: Vec<i8>,
    /// `[⌈rows/RB⌉][⌈k/2⌉][RB][2]` (AVX2), empty otherwise.
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    data16: Vec<i16>,
    /// `-128 · Σ_k w[r][k]` per row (padded to whole blocks), the correction for the `+128` of the activations.
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    corr: Vec<i32>,
    /// Plain `[rows][K]` weights for the portable kernel (empty otherwise).
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
        Self::with_kernel(w, rows, k, Kernel::best())
    }

    /// Packs for `kernel`, which the CPU must run (AVX2 for [`Kernel::Avx2`], [`has_vnni`] for [`Kernel::Vnni`]).
    pub fn with_kernel(w: &[i8], rows: usize, k: usize, kernel: Kernel) -> PackedWeights {
        assert_eq!(w.len(), rows * k, "weights are [rows][k]");
        let k4 = k.div_ceil(4);
        let blocks = rows.div_ceil(RB);
        let mut pw = PackedWeights { rows, k, k4, kernel, data: Vec::new(), data16: Vec::new(), corr: Vec::new(), plain: Vec::new() };
        match kernel {
            Kernel::Portable => pw.plain = w.to_vec(),
            Kernel::Avx2 => {
                let k2 = k.div_ceil(2);
                pw.data16 = vec![0i16; blocks * k2 * RB * 2];
                for r in 0..rows {
                    let (b, rr) = (r / RB, r % RB);
                    for (t, &v) in w[r * k..(r + 1) * k].iter().enumerate() {
                        pw.data16[((b * k2 + t / 2) * RB + rr) * 2 + t % 2] = v as i16;
                    }
                }
            }
            Kernel::Vnni => {
                pw.data = vec![0i8; blocks * k4 * RB * 4];
                pw.corr = vec![0i32; blocks * RB];
                for r in 0..rows {
                    let (b, rr) = (r / RB, r % RB);
                    let row = &w[r * k..(r + 1) * k];
                    pw.corr[r] = -128 * row.iter().map(|&v| v as i32).sum::<i32>();
                    for (t, &v) in row.iter().enumerate() {
                        pw.data[((b * k4 + t / 4) * RB + rr) * 4 + t % 4] = v;
                    }
                }
            }
        }
        pw
    }

    /// Bytes [`pack_cols`] needs for `p` pixels.
    pub fn packed_len(&self, p: usize) -> usize {
        match self.kernel {
            Kernel::Portable => self.k * p,
            Kernel::Avx2 => self.k.div_ceil(2) * p * 4,
            Kernel::Vnni => self.k4 * p * 4,
        }
    }
}

/// Prepares the activations `col` (`[K][P]` i8, as im2col lays them or a 1x1 convolution's input is) for
/// [`gemm`] with `w`: `[K4][P][4]` u8 for the VNNI kernel, `[K2][P][2]` i16 (as bytes) for the AVX2 one, a
/// plain copy otherwise. `out` is resized.
pub fn pack_cols(w: &PackedWeights, col: &[i8], p: usize, out: &mut Vec<u8>) {
    let k = w.k;
    match w.kernel {
        Kernel::Portable => {
            out.clear();
            out.extend(col[..k * p].iter().map(|&v| v as u8));
        }
        Kernel::Avx2 => {
            // every byte is written below: no clearing
            out.resize(w.packed_len(p), 0);
            for g in 0..k.div_ceil(2) {
                let dst = &mut out[g * p * 4..(g + 1) * p * 4];
                let row = |t: usize| if 2 * g + t < k { Some(&col[(2 * g + t) * p..(2 * g + t + 1) * p]) } else { None };
                interleave2_i16(row(0), row(1), p, dst);
            }
        }
        Kernel::Vnni => {
            // every byte is written below: no clearing
            out.resize(w.k4 * p * 4, 0x80);
            for g in 0..w.k4 {
                let dst = &mut out[g * p * 4..(g + 1) * p * 4];
                let row = |t: usize| if 4 * g + t < k { Some(&col[(4 * g + t) * p..(4 * g + t + 1) * p]) } else { None };
                interleave4([row(0), row(1), row(2), row(3)], p, dst);
            }
        }
    }
}

/// `dst` as i16 pairs: `(a[j], b[j])` for pixel `j`, 0 for a missing row (little-endian bytes).
fn interleave2_i16(a: Option<&[i8]>, b: Option<&[i8]>, p: usize, dst: &mut [u8]) {
    #[cfg_attr(not(target_arch = "x86_64"), allow(unused_mut))]
    let mut j = 0;
    #[cfg(target_arch = "x86_64")]
    if let (Some(a), Some(b)) = (a, b) {
        if has_avx2() {
            // SAFETY: AVX2 checked; the loop reads 16 of the p bytes of each row and writes 64 of the 4p bytes
            // of dst (bounds by the loop condition)
            j = unsafe { avx2::interleave2(a, b, p, dst) };
        }
    }
    for j in j..p {
        let (x, y) = (a.map_or(0, |r| r[j] as i16), b.map_or(0, |r| r[j] as i16));
        dst[4 * j..4 * j + 2].copy_from_slice(&x.to_le_bytes());
        dst[4 * j + 2..4 * j + 4].copy_from_slice(&y.to_le_bytes());
    }
}

/// `dst[4j + t] = rows[t][j] ^ 0x80` (128 for a missing row).
fn interleave4(rows: [Option<&[i8]>; 4], p: usize, dst: &mut [u8]) {
    #[cfg(target_arch = "x86_64")]
    if vbmi() {
        // SAFETY: AVX-512 F/BW and VBMI checked; the kernel reads p bytes of each present row and writes 4p of dst
        unsafe { vbmi_interleave4(rows, p, dst) };
        return;
    }
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

/// Whether [`vbmi_interleave4`] runs (AVX-512 F/BW/VL and VBMI, not under `TPU_SDK_NO_AVX512=1`).
#[cfg(target_arch = "x86_64")]
fn vbmi() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| super::requantize::available() && std::is_x86_feature_detected!("avx512vbmi"))
}

/// [`interleave4`] sixteen pixels per step: the four rows' 16 bytes side by side in one vector, one `vpermb`
/// into pixel order, the tail under masks (a missing row reads as the zero byte, 0x80 after the flip).
///
/// # Safety
/// The CPU has AVX-512 F/BW/VL and VBMI; each present row holds `p` bytes, `dst` `4p`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vbmi")]
unsafe fn vbmi_interleave4(rows: [Option<&[i8]>; 4], p: usize, dst: &mut [u8]) {
    use std::arch::x86_64::*;
    debug_assert!(dst.len() >= 4 * p && rows.iter().all(|r| r.is_none_or(|r| r.len() >= p)));
    // byte 4j + t of the result: pixel j of row t, at byte 16t + j of the concatenation
    let mut order = [0u8; 64];
    for (i, o) in order.iter_mut().enumerate() {
        *o = (16 * (i % 4) + i / 4) as u8;
    }
    let order = _mm512_loadu_si512(order.as_ptr() as *const _);
    let flip = _mm512_set1_epi8(-128);
    let mut j = 0;
    while j < p {
        let k: __mmask16 = if p - j >= 16 { !0 } else { (1u16 << (p - j)) - 1 };
        let ld = |t: usize| rows[t].map_or(_mm_setzero_si128(), |r| _mm_maskz_loadu_epi8(k, r.as_ptr().add(j)));
        let v = _mm512_inserti32x4::<3>(_mm512_inserti32x4::<2>(_mm512_inserti32x4::<1>(_mm512_castsi128_si512(ld(0)), ld(1)), ld(2)), ld(3));
        let m: __mmask64 = if p - j >= 16 { !0 } else { (1u64 << (4 * (p - j))) - 1 };
        _mm512_mask_storeu_epi8(dst.as_mut_ptr().add(4 * j) as *mut i8, m, _mm512_permutexvar_epi8(order, _mm512_xor_si512(v, flip)));
        j += 16;
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
    match w.kernel {
        Kernel::Vnni => {
            // SAFETY: weights are packed for VNNI only when the CPU has AVX-512 F/BW/VNNI (`has_vnni`); the
            // layouts and lengths are checked above
            unsafe { vnni::gemm(w, r0, n, xp, p, out) };
            return;
        }
        Kernel::Avx2 => {
            // SAFETY: packed for AVX2 only where the CPU has it (`Kernel::best`); layouts and lengths checked
            // above
            unsafe { avx2::gemm(w, r0, n, xp, p, out) };
            return;
        }
        Kernel::Portable => {}
    }
    // the portable kernel on plain weights (packed kernels never reach it)
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
    use super::super::requantize::neon64::Neon64;
    use super::super::requantize::x86::requant;
    use super::{Out, PackedWeights, RowQuant, RB};
    use std::arch::x86_64::*;

    /// Pixels per register.
    const L: usize = 16;
    /// Registers of pixels per tile (`RB × NV` accumulators).
    const NV: usize = 6;

    /// Short rows of pixels (small planes, fewer than `NV` registers) take `R` = 8 or 16 rows of weights per
    /// tile instead of `RB`: a tile of one register × 4 rows has four accumulators, whose `vpdpbusd` chains wait
    /// on each other's latency (the 3×3 planes' GEMMs, 1280 rows × 9 pixels at the end of a MobileNetV2).
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni")]
    pub(super) unsafe fn gemm(w: &PackedWeights, r0: usize, n: usize, xp: &[u8], p: usize, mut out: Out) {
        let k4 = w.k4;
        let nb = n.div_ceil(RB);
        let nv = p.div_ceil(L);
        let group = if p < NV * L {
            match nv {
                1 => 4,
                2 | 3 => 2,
                _ => 1,
            }
        } else {
            1
        };
        let mut b = 0;
        while b < nb {
            let blk = r0 / RB + b;
            let wb = w.data.as_ptr().add(blk * k4 * RB * 4);
            if group > 1 && nb - b >= group {
                let rows = (n - b * RB).min(group * RB);
                let last: __mmask16 = if p.is_multiple_of(L) { !0 } else { (1u16 << (p % L)) - 1 };
                match nv {
                    1 => tile::<1, 16>(wb, k4, xp.as_ptr(), p, 0, last, init(w, &out, blk, rows), rows, b * RB, &mut out, blk * RB),
                    2 => tile::<2, 8>(wb, k4, xp.as_ptr(), p, 0, last, init(w, &out, blk, rows), rows, b * RB, &mut out, blk * RB),
                    _ => tile::<3, 8>(wb, k4, xp.as_ptr(), p, 0, last, init(w, &out, blk, rows), rows, b * RB, &mut out, blk * RB),
                }
                b += group;
                continue;
            }
            let rows = (n - b * RB).min(RB);
            let init: [i32; RB] = init(w, &out, blk, rows);
            let mut j = 0;
            while j + NV * L <= p {
                tile::<NV, RB>(wb, k4, xp.as_ptr(), p, j, !0, init, rows, b * RB, &mut out, blk * RB);
                j += NV * L;
            }
            let rem = p - j;
            if rem > 0 {
                // 1 to NV registers, the last one under a mask
                let nv = rem.div_ceil(L);
                let last: __mmask16 = if rem.is_multiple_of(L) { !0 } else { (1u16 << (rem % L)) - 1 };
                match nv {
                    1 => tile::<1, RB>(wb, k4, xp.as_ptr(), p, j, last, init, rows, b * RB, &mut out, blk * RB),
                    2 => tile::<2, RB>(wb, k4, xp.as_ptr(), p, j, last, init, rows, b * RB, &mut out, blk * RB),
                    3 => tile::<3, RB>(wb, k4, xp.as_ptr(), p, j, last, init, rows, b * RB, &mut out, blk * RB),
                    4 => tile::<4, RB>(wb, k4, xp.as_ptr(), p, j, last, init, rows, b * RB, &mut out, blk * RB),
                    5 => tile::<5, RB>(wb, k4, xp.as_ptr(), p, j, last, init, rows, b * RB, &mut out, blk * RB),
                    _ => tile::<NV, RB>(wb, k4, xp.as_ptr(), p, j, last, init, rows, b * RB, &mut out, blk * RB),
                }
            }
            b += 1;
        }
    }

    /// The accumulators' start of the `R` rows from block `blk` (`rows` of them real): the packing's
    /// correction, plus the bias when requantizing.
    #[inline]
    fn init<const R: usize>(w: &PackedWeights, out: &Out, blk: usize, rows: usize) -> [i32; R] {
        std::array::from_fn(|r| {
            let c = w.corr.get(blk * RB + r).copied().unwrap_or(0);
            match out {
                Out::Quant(_, rq) if r < rows => c.wrapping_add(rq[blk * RB + r].bias),
                _ => c,
            }
        })
    }

    /// One tile: `R` rows (consecutive packed blocks of `RB`) × `V` registers of pixels from pixel `j`, the last
    /// register under `last`. `orow` is the tile's first row within the output slice, `grow` within the weight
    /// matrix.
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni")]
    #[allow(clippy::too_many_arguments)]
    unsafe fn tile<const V: usize, const R: usize>(
        wb: *const i8,
        k4: usize,
        xp: *const u8,
        p: usize,
        j: usize,
        last: __mmask16,
        init: [i32; R],
        rows: usize,
        orow: usize,
        out: &mut Out,
        grow: usize,
    ) {
        let mask = |v: usize| if v + 1 == V { last } else { !0 };
        let mut c: [[__m512i; V]; R] = [[_mm512_setzero_si512(); V]; R];
        for (cr, &i) in c.iter_mut().zip(&init) {
            cr.fill(_mm512_set1_epi32(i));
        }
        let mut x = xp.add(4 * j);
        // block b's weights of step k: RB values from wb + (b·k4 + k)·RB
        let mut wp = wb as *const i32;
        let block = k4 * RB;
        for _ in 0..k4 {
            let mut xs = [_mm512_setzero_si512(); V];
            for (v, xv) in xs.iter_mut().enumerate() {
                *xv = _mm512_maskz_loadu_epi32(mask(v), x.add(v * 4 * L) as *const i32);
            }
            for (r, cr) in c.iter_mut().enumerate() {
                let wv = _mm512_set1_epi32(wp.add(r / RB * block + r % RB).read_unaligned());
                for v in 0..V {
                    cr[v] = _mm512_dpbusd_epi32(cr[v], xs[v], wv);
                }
            }
            wp = wp.add(RB);
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
                    let fast = Neon64::new(m, zp, lo, hi);
                    if let Some(st) = &fast {
                        // four registers of the row at a time, as one masked store of their bytes
                        for v0 in (0..V).step_by(4) {
                            let k = (V - v0).min(4);
                            let keep = (0..k).fold(0u64, |b, i| b | (mask(v0 + i) as u64) << (16 * i));
                            let bytes = st.bytes4(std::array::from_fn(|i| cr[(v0 + i).min(V - 1)]));
                            _mm512_mask_storeu_epi8(dst.add(v0 * L) as *mut i8, keep, bytes);
                        }
                        continue;
                    }
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

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use super::super::requantize::avx2::{first, requant, store_bytes};
    use super::{Out, PackedWeights, RowQuant, RB};
    use std::arch::x86_64::*;

    /// Pixels per register (i32 lanes, each holding two 16-bit taps of one pixel).
    const L: usize = 8;
    /// Registers of pixels per tile (`RB × NV` accumulators, `NV` activation registers and one broadcast
    /// weight pair: the 16 registers of AVX2).
    const NV: usize = 3;

    /// [`super::interleave2_i16`] sixteen pixels at a time (sign-extended, unpacked, the 128-bit halves put
    /// back in order); returns how many pixels it wrote.
    ///
    /// # Safety
    /// AVX2; `a` and `b` hold `p` bytes, `dst` `4p`.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn interleave2(a: &[i8], b: &[i8], p: usize, dst: &mut [u8]) -> usize {
        debug_assert!(a.len() >= p && b.len() >= p && dst.len() >= 4 * p);
        let mut j = 0;
        while j + 16 <= p {
            let va = _mm256_cvtepi8_epi16(_mm_loadu_si128(a.as_ptr().add(j) as *const __m128i));
            let vb = _mm256_cvtepi8_epi16(_mm_loadu_si128(b.as_ptr().add(j) as *const __m128i));
            // per 128-bit half: pixels 0-3 | 8-11 and 4-7 | 12-15
            let lo = _mm256_unpacklo_epi16(va, vb);
            let hi = _mm256_unpackhi_epi16(va, vb);
            let o = dst.as_mut_ptr().add(4 * j) as *mut __m256i;
            _mm256_storeu_si256(o, _mm256_permute2x128_si256::<0x20>(lo, hi));
            _mm256_storeu_si256(o.add(1), _mm256_permute2x128_si256::<0x31>(lo, hi));
            j += 16;
        }
        j
    }

    /// [`super::gemm`] on the AVX2 layouts: tiles of `RB` rows by up to `NV` registers of pixels.
    ///
    /// # Safety
    /// AVX2; `w` packed for [`super::Kernel::Avx2`], `xp` by [`super::pack_cols`] for `p` pixels, rows
    /// `r0..r0 + n` inside the weights and `out` holding `n` rows of `p` (checked by the caller).
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn gemm(w: &PackedWeights, r0: usize, n: usize, xp: &[u8], p: usize, mut out: Out) {
        let k2 = w.k.div_ceil(2);
        for b in 0..n.div_ceil(RB) {
            let rows = (n - b * RB).min(RB);
            let blk = r0 / RB + b;
            let wb = w.data16.as_ptr().add(blk * k2 * RB * 2) as *const i32;
            let init: [i32; RB] = std::array::from_fn(|r| match &out {
                Out::Quant(_, rq) if r < rows => rq[blk * RB + r].bias,
                _ => 0,
            });
            let mut j = 0;
            while j + NV * L <= p {
                tile::<NV>(wb, k2, xp.as_ptr(), p, j, L, init, rows, b * RB, &mut out, blk * RB);
                j += NV * L;
            }
            let rem = p - j;
            if rem > 0 {
                // 1 to NV registers, the last one holding `last` pixels
                let nv = rem.div_ceil(L);
                let last = rem - (nv - 1) * L;
                match nv {
                    1 => tile::<1>(wb, k2, xp.as_ptr(), p, j, last, init, rows, b * RB, &mut out, blk * RB),
                    2 => tile::<2>(wb, k2, xp.as_ptr(), p, j, last, init, rows, b * RB, &mut out, blk * RB),
                    _ => tile::<NV>(wb, k2, xp.as_ptr(), p, j, last, init, rows, b * RB, &mut out, blk * RB),
                }
            }
        }
    }

    /// One tile: `RB` rows × `V` registers of pixels from pixel `j`, the last register holding `last` (1 to
    /// `L`) pixels. `orow` is the tile's first row within the output slice, `grow` within the weight matrix.
    #[inline]
    #[target_feature(enable = "avx2")]
    #[allow(clippy::too_many_arguments)]
    unsafe fn tile<const V: usize>(
        wb: *const i32,
        k2: usize,
        xp: *const u8,
        p: usize,
        j: usize,
        last: usize,
        init: [i32; RB],
        rows: usize,
        orow: usize,
        out: &mut Out,
        grow: usize,
    ) {
        let lastmask = first(last);
        let partial = last < L;
        let mut c: [[__m256i; V]; RB] = [[_mm256_setzero_si256(); V]; RB];
        for (cr, &i) in c.iter_mut().zip(&init) {
            cr.fill(_mm256_set1_epi32(i));
        }
        // one i32 (two i16 taps) per pixel and tap pair
        let mut x = (xp as *const i32).add(j);
        let mut wp = wb;
        for _ in 0..k2 {
            let mut xs = [_mm256_setzero_si256(); V];
            for (v, xv) in xs.iter_mut().enumerate() {
                *xv = if partial && v + 1 == V { _mm256_maskload_epi32(x.add(v * L), lastmask) } else { _mm256_loadu_si256(x.add(v * L) as *const __m256i) };
            }
            for cr in c.iter_mut() {
                let wv = _mm256_set1_epi32(wp.read_unaligned());
                wp = wp.add(1);
                for v in 0..V {
                    cr[v] = _mm256_add_epi32(cr[v], _mm256_madd_epi16(xs[v], wv));
                }
            }
            x = x.add(p);
        }
        let count = |v: usize| if v + 1 == V { last } else { L };
        match out {
            Out::Acc(a) => {
                for (r, cr) in c.iter().enumerate().take(rows) {
                    let dst = a.as_mut_ptr().add((orow + r) * p + j);
                    for (v, &cv) in cr.iter().enumerate() {
                        if count(v) == L {
                            _mm256_storeu_si256(dst.add(v * L) as *mut __m256i, cv);
                        } else {
                            // not `vpmaskmovd` to memory: ~20 cycles a store on AMD Zen 3
                            let mut lanes = [0i32; L];
                            _mm256_storeu_si256(lanes.as_mut_ptr() as *mut __m256i, cv);
                            std::ptr::copy_nonoverlapping(lanes.as_ptr(), dst.add(v * L), last);
                        }
                    }
                }
            }
            Out::Quant(q, rq) => {
                for (r, cr) in c.iter().enumerate().take(rows) {
                    let dst = q.as_mut_ptr().add((orow + r) * p + j);
                    let RowQuant { m, zp, lo, hi, .. } = rq[grow + r];
                    let left = _mm_cvtsi32_si128(m.shift.max(0));
                    let right = (-m.shift).max(0);
                    let mult = _mm256_set1_epi64x(m.multiplier as i64);
                    let (zp, lo, hi) = (_mm256_set1_epi32(zp), _mm256_set1_epi32(lo), _mm256_set1_epi32(hi));
                    for (v, &cv) in cr.iter().enumerate() {
                        let y = requant(cv, left, right, false, mult, zp, lo, hi);
                        // each lane's low byte (the value is inside the output type's range)
                        store_bytes(y, dst.add(v * L), count(v));
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

    /// Every kernel this CPU runs (portable, AVX2, VNNI) against a scalar loop, over row counts and pixel
    /// counts around the block and register widths, K not a multiple of 4, and extreme values.
    #[test]
    fn packed_gemm_matches_a_scalar_loop() {
        let mut rnd = rng(3);
        for &(rows, k, p) in &[(1, 1, 1), (3, 5, 17), (4, 4, 16), (5, 27, 97), (9, 48, 2304 / 8), (8, 3, 200), (13, 131, 9), (16, 192, 36), (6, 18, 190), (3, 7, 96 + 95), (21, 40, 30), (37, 9, 5), (40, 60, 48)] {
            let w: Vec<i8> = (0..rows * k).map(|i| if i % 7 == 0 { -128 } else { rnd() as i8 }).collect();
            let col: Vec<i8> = (0..k * p).map(|i| if i % 5 == 0 { -128 } else { rnd() as i8 }).collect();
            let want: Vec<i32> = (0..rows * p).map(|i| (0..k).map(|t| w[i / p * k + t] as i32 * col[t * p + i % p] as i32).sum()).collect();
            let rq: Vec<RowQuant> = (0..rows)
                .map(|r| {
                    let (lo, hi) = if r % 5 == 4 { (r as i32 % 3, 255) } else { (-128, 127 - r as i32) };
                    RowQuant { bias: rnd() as i32 >> 12, m: quantize_multiplier([0.0007, 0.02, 0.3, 1.7][r % 4]), zp: (rnd() % 21) as i32 - 10, lo, hi }
                })
                .collect();
            let kernels = [(Kernel::Portable, true), (Kernel::Avx2, has_avx2()), (Kernel::Vnni, has_vnni())];
            for kernel in kernels.into_iter().filter_map(|(k, runs)| runs.then_some(k)) {
                let pw = PackedWeights::with_kernel(&w, rows, k, kernel);
                let mut xp = Vec::new();
                pack_cols(&pw, &col, p, &mut xp);
                let mut acc = vec![0i32; rows * p];
                gemm(&pw, 0, &xp, p, Out::Acc(&mut acc));
                assert_eq!(acc, want, "rows {rows} k {k} p {p} kernel {kernel:?}");
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
                    let g = if lo < 0 { g as i8 as i32 } else { g as i32 };
                    assert_eq!(g, (mul_neon_rshl(want[i] + bias, m) + zp).clamp(lo, hi), "quant rows {rows} k {k} p {p} at {i}");
                }
            }
        }
    }
}
