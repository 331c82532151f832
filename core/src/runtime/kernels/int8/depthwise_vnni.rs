//! int8 DEPTHWISE_CONV_2D with VNNI dot products over byte planes (AVX-512 VNNI + VBMI), channel by channel
//! in the NCHW layout, with no transposition.
//!
//! Each input plane is copied once as unsigned bytes (`x + 128`) into a buffer padded with the input zero
//! point's byte, `pw` wide. A vector holds 16 output pixels of one channel; for each kernel row and each group
//! of four taps of that row, one 64-byte load and one `vpermb` put the four input bytes of every output pixel
//! side by side (byte `4l + k` = input `s·l + k·d` of the window), and one `vpdpbusd` adds their products with
//! the four weights (broadcast; 0 past the kernel's width). A 3×3 kernel is three `vpdpbusd` per 16 outputs
//! where the 16-bit kernels take nine `vpmaddwd`.
//!
//! The unsigned bytes count `128 + zp` more than `x - zp`, so the bias takes `-(128 + zp)·Σw` once, and the
//! padding (the zero point's byte) adds exactly that for its taps: every sum is `bias + Σ (x - zp)·w` exactly,
//! and the output stage is the plane kernel's per channel ([`super::requantize::x86::requant`]), so the results
//! are [`super::conv`]'s bit for bit (tested against a scalar loop).
//!
//! Output pixels are laid one of two ways, whichever fills more lanes: *rows* (each output row in vectors of
//! 16, the last one partly), or *flat* (equal strides `s` only): the pixel `(oy, ox)` at `j = oy·pw + ox` of a
//! plane `pw` wide, whose window starts at byte `s·j` of the padded input, so vectors run across rows and the
//! columns from `ow` on are computed and dropped (what small planes want: a 6×6 output padded to 8 wide fills
//! 48 of 64 lanes in flat order, 36 of 96 in rows).
//!
//! x86-64 only, depth multiplier 1, weights within i8 (int8 models; uint8 models whose weights minus their
//! zero point leave i8 keep the 16-bit kernels), windows of 16 pixels that fit 64 bytes (`15·s + 3·d < 64`).

use std::cell::RefCell;

use crate::runtime::spin_pool;

use super::fixedpoint::Multiplier;
use super::gemm::Geom2;

/// Output planes from this many pixels take this kernel (measured on the int8 MobileNetV2 fixture, 1 thread, Zen 5:
/// its 6×6 planes 1.2-1.6× faster than with the channel-lane kernel, its 3×3 ones 2× slower, where a channel's
/// fixed costs (its copy, constants, the output stage's latency) outweigh its nine outputs).
pub(super) const MIN_PIXELS: usize = 16;

/// Multiply-adds from which an image's channels are split between threads (as the channel-lane kernel's).
const SPLIT_WORK: usize = 1 << 16;

/// Whether the kernel runs on this CPU (AVX-512 F/BW/VL, VNNI, VBMI and VBMI2; not under `TPU_SDK_NO_AVX512=1` or
/// `TPU_SDK_NO_DW_VNNI=1`, which compare it with the 16-bit kernels on one machine).
pub(super) fn available() -> bool {
    static OK: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *OK.get_or_init(|| {
        super::packed_gemm::has_vnni()
            && std::is_x86_feature_detected!("avx512vbmi")
            && std::is_x86_feature_detected!("avx512vbmi2")
            && super::requantize::available()
            && std::env::var("TPU_SDK_NO_DW_VNNI").map_or(true, |v| v != "1")
    })
}

/// A prepared depthwise convolution for [`VnniDepthwise::run`].
#[derive(Debug)]
pub(super) struct VnniDepthwise {
    c: usize,
    geom: Geom2,
    /// The padded input plane: its width, and the buffer's length with the slack that the dropped lanes read.
    pw: usize,
    pad_len: usize,
    /// The padding byte (`zp + 128`).
    pad_byte: u8,
    /// Where the inside of the padded plane starts (row `pt`, column `pl`), and per 64-byte chunk from there
    /// on, its bytes that are input (the rest padding).
    fill_start: usize,
    fill: Vec<u64>,
    /// Flat output order (else rows): per vector of 16 flat outputs, the lanes that are outputs (columns
    /// before `ow`), which `vpcompressb` packs; empty in rows.
    flat: Vec<u16>,
    /// The stride between a vector's lanes in the input.
    s: usize,
    /// Per (kernel row, tap group): its offset in the padded plane from a window's first byte.
    offs: Vec<usize>,
    /// `vpermb` indices: byte `4l + k` = `s·l + k·dw`.
    idx: [u8; 64],
    /// Per channel, per (kernel row, tap group): four i8 weights in one i32 (0 past the kernel's width).
    w: Vec<i32>,
    /// Per channel: `bias - (zp + 128)·Σw`.
    bias: Vec<i32>,
    m: Vec<Multiplier>,
    /// Channels below this round the NEON way, the rest half away from zero.
    neon_end: usize,
    zp_out: i32,
    range: (i32, i32),
}

thread_local! {
    /// This thread's two padded planes.
    static PADS: RefCell<[Vec<u8>; 2]> = const { RefCell::new([Vec::new(), Vec::new()]) };
}

impl VnniDepthwise {
    /// The kernel for `c` channels of weights `w16` (`[C][kh·kw]`, minus their zero point), `bias`,
    /// multipliers `m`, input zero point `zp` (of the i8-shifted input, as [`super::conv`]'s), channels below
    /// `neon_end` rounding the NEON way; `None` where it does not apply (weights outside i8, a window wider
    /// than 64 bytes). The CPU must run it ([`available`]).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn new(g: &Geom2, c: usize, w16: &[i16], bias: &[i32], m: &[Multiplier], neon_end: usize, zp: i32, zp_out: i32, range: (i32, i32)) -> Option<VnniDepthwise> {
        let kk = g.kh * g.kw;
        if c == 0 || kk == 0 || g.oh == 0 || g.ow == 0 || w16.len() != c * kk || bias.len() < c || m.len() < c || !(-128..=127).contains(&zp) {
            return None;
        }
        if w16.iter().any(|&v| !(-128..=127).contains(&v)) || 15 * g.sw + 3 * g.dw >= 64 {
            return None;
        }
        let groups = g.kw.div_ceil(4);
        let ph = ((g.oh - 1) * g.sh + (g.kh - 1) * g.dh + 1).max(g.pt + g.ih);
        let pw = ((g.ow - 1) * g.sw + (g.kw - 1) * g.dw + 1).max(g.pl + g.iw);
        // lanes filled: rows of ow in vectors of 16, or ow of every pw in flat order
        let (row_fill, flat_fill) = (g.ow as f64 / (g.ow.div_ceil(16) * 16) as f64, g.ow as f64 / pw as f64);
        let flat = if g.sh == g.sw && flat_fill > row_fill {
            (0..flat_len(g, pw) / 16).map(|v| (0..16).filter(|l| (16 * v + l) % pw < g.ow && 16 * v + l < g.oh * pw).fold(0u16, |m, l| m | 1 << l)).collect()
        } else {
            Vec::new()
        };
        let s = g.sw;
        let offs: Vec<usize> = (0..g.kh).flat_map(|ky| (0..groups).map(move |q| ky * g.dh * pw + 4 * q * g.dw)).collect();
        // the last vector's window (a block of four repeats its last vector)
        let last_window = if !flat.is_empty() { s * (flat_len(g, pw) - 16) } else { (g.oh - 1) * g.sh * pw + s * (g.ow.div_ceil(16) * 16 - 16) };
        let fill_start = g.pt * pw + g.pl;
        let inside = |at: usize| at / pw >= g.pt && at / pw < g.pt + g.ih && at % pw >= g.pl && at % pw < g.pl + g.iw;
        let fill: Vec<u64> = (0..(g.ih * pw).div_ceil(64))
            .map(|q| (0..64).filter(|&b| inside(fill_start + 64 * q + b)).fold(0u64, |m, b| m | 1 << b))
            .collect();
        let pad_len = (ph * pw).max(last_window + offs.iter().max().copied().unwrap_or(0) + 64).max(fill_start + 64 * fill.len());
        let mut idx = [0u8; 64];
        for (i, v) in idx.iter_mut().enumerate() {
            *v = (s * (i / 4) + (i % 4) * g.dw) as u8;
        }
        let mut w = Vec::with_capacity(c * offs.len());
        let mut bias_c = Vec::with_capacity(c);
        for ch in 0..c {
            let wc = &w16[ch * kk..(ch + 1) * kk];
            for ky in 0..g.kh {
                for q in 0..groups {
                    let b = |k: usize| if 4 * q + k < g.kw { wc[ky * g.kw + 4 * q + k] as i8 as u8 } else { 0 };
                    w.push(i32::from_le_bytes([b(0), b(1), b(2), b(3)]));
                }
            }
            let sum: i32 = wc.iter().map(|&v| v as i32).sum();
            bias_c.push(bias[ch] - (zp + 128) * sum);
        }
        Some(VnniDepthwise {
            c,
            geom: *g,
            pw,
            pad_len,
            pad_byte: (zp + 128) as u8,
            fill_start,
            fill,
            flat,
            s,
            offs,
            idx,
            w,
            bias: bias_c,
            m: m[..c].to_vec(),
            neon_end,
            zp_out,
            range,
        })
    }

    /// Image after image: `x` is `[n][c][ih][iw]` (shifted to i8 as [`super::conv`]'s input) in the planned
    /// geometry, `out` the `[n][c][oh][ow]` output bytes; from [`SPLIT_WORK`] multiply-adds an image's channels
    /// are split between the threads.
    pub(super) fn run(&self, x: &[i8], n: usize, out: &mut [u8]) {
        let g = &self.geom;
        let (plane, p, c) = (g.ih * g.iw, g.oh * g.ow, self.c);
        assert!(x.len() >= n * c * plane && out.len() >= n * c * p, "depthwise buffers shorter than their shapes");
        let threads = spin_pool::threads();
        let split = threads > 1 && c > 1 && c * p * g.kh * g.kw >= spin_pool::min_work(SPLIT_WORK);
        for b in 0..n {
            let xs = &x[b * c * plane..(b + 1) * c * plane];
            let ys = &mut out[b * c * p..(b + 1) * c * p];
            if split {
                let per = c.div_ceil(threads);
                spin_pool::for_each_chunk_mut(ys, per * p, &|i, part| self.channels(xs, i * per, part));
            } else {
                self.channels(xs, 0, ys);
            }
        }
    }

    /// The output planes `ys` of the channels from `c0` (as many as `ys` holds) of one image `xs`.
    fn channels(&self, xs: &[i8], c0: usize, ys: &mut [u8]) {
        let g = &self.geom;
        let (plane, p) = (g.ih * g.iw, g.oh * g.ow);
        PADS.with(|pads| {
            let pads = &mut *pads.borrow_mut();
            // the padding: the same bytes for every channel, which write only the inside
            for pad in pads.iter_mut() {
                pad.clear();
                pad.resize(self.pad_len, self.pad_byte);
            }
            let count = ys.len() / p;
            let input = |i: usize| &xs[(c0 + i) * plane..(c0 + i + 1) * plane];
            // SAFETY (both calls): `new` was reached only where `available()` (AVX-512 F/BW/VL, VNNI, VBMI,
            // VBMI2); an input plane holds ih·iw bytes, each pad pad_len bytes (every window read, see `new`),
            // `y` oh·ow bytes. The next channel's plane is written before this one's sums read theirs: the
            // sums' 64-byte loads would wait for the stores of a plane just written to reach the cache
            unsafe { x86::fill(self, input(0), &mut pads[0]) };
            for (i, y) in ys.chunks_mut(p).enumerate() {
                if i + 1 < count {
                    unsafe { x86::fill(self, input(i + 1), &mut pads[(i + 1) % 2]) };
                }
                unsafe { x86::plane(self, c0 + i, &pads[i % 2], y) };
            }
        });
    }
}

/// The length of a flat output (`pw` per output row), rounded up to whole vectors of 16.
fn flat_len(g: &Geom2, pw: usize) -> usize {
    ((g.oh - 1) * pw + g.ow).div_ceil(16) * 16
}

mod x86 {
    use super::super::requantize::x86::requant;
    use super::VnniDepthwise;
    use std::arch::x86_64::*;

    /// The first `n` (≤ 16) lanes.
    #[inline(always)]
    fn lanes(n: usize) -> __mmask16 {
        if n >= 16 {
            !0
        } else {
            ((1u32 << n) - 1) as u16
        }
    }

    /// The input plane `x` as unsigned bytes into the inside of `pad` (whose padding is the zero point's byte),
    /// 64 padded bytes at a time from the first input byte: `vpexpandb` spreads the next input bytes over the
    /// chunk's input positions ([`VnniDepthwise::fill`]), the padding's byte in the others, so that a plane of
    /// short rows takes a few stores, not one per row.
    ///
    /// # Safety
    /// The CPU has AVX-512 F/BW and VBMI2; `x` holds ih·iw bytes, `pad` `d.pad_len`.
    #[target_feature(enable = "avx512f,avx512bw,avx512vbmi2,popcnt")]
    pub(super) unsafe fn fill(d: &VnniDepthwise, x: &[i8], pad: &mut [u8]) {
        let g = &d.geom;
        debug_assert!(x.len() >= g.ih * g.iw && pad.len() >= d.pad_len);
        let flip = _mm512_set1_epi8(-128);
        let padv = _mm512_set1_epi8(d.pad_byte as i8);
        let (dst, mut src, end) = (pad.as_mut_ptr().add(d.fill_start), x.as_ptr(), x.as_ptr().add(g.ih * g.iw));
        for (i, &m) in d.fill.iter().enumerate() {
            let left = end.offset_from(src) as usize;
            let take: __mmask64 = if left >= 64 { !0 } else { (1u64 << left) - 1 };
            let v = _mm512_xor_si512(_mm512_maskz_loadu_epi8(take, src), flip);
            _mm512_storeu_si512(dst.add(64 * i) as *mut _, _mm512_mask_expand_epi8(padv, m, v));
            src = src.add(m.count_ones() as usize);
        }
    }

    /// Channel `ch`'s output plane `y` from its padded input plane `pad` ([`fill`]): vectors of 16 outputs,
    /// four at a time (four independent dot-product chains), stored by row, or packed from flat order.
    ///
    /// # Safety
    /// The CPU has AVX-512 F/BW/VL, VNNI, VBMI and VBMI2; `pad` holds `d.pad_len` bytes, `y` oh·ow.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx512vbmi,avx512vbmi2,popcnt")]
    pub(super) unsafe fn plane(d: &VnniDepthwise, ch: usize, pad: &[u8], y: &mut [u8]) {
        let g = &d.geom;
        debug_assert!(pad.len() >= d.pad_len && y.len() >= g.oh * g.ow);
        let nk = d.offs.len();
        let w = &d.w[ch * nk..(ch + 1) * nk];
        let idx = _mm512_loadu_si512(d.idx.as_ptr() as *const _);
        let bias = _mm512_set1_epi32(d.bias[ch]);
        let m = d.m[ch];
        let (left, right, double) = (_mm_cvtsi32_si128(m.shift.max(0)), (-m.shift).max(0), ch >= d.neon_end);
        let mult = _mm512_set1_epi64(m.multiplier as i64);
        let (zp, lo, hi) = (_mm512_set1_epi32(d.zp_out), _mm512_set1_epi32(d.range.0), _mm512_set1_epi32(d.range.1));
        let base = pad.as_ptr();
        let out_stage = |a: __m512i| _mm512_cvtepi32_epi8(requant(a, left, right, double, mult, zp, lo, hi));
        let s = d.s;
        let out = y.as_mut_ptr();
        if !d.flat.is_empty() {
            // flat: the outputs of each vector packed by its mask, one after the other
            let n = d.flat.len();
            let (mut v, mut o) = (0, 0);
            while v < n {
                let k = (n - v).min(4);
                let acc = sums(k, base, &d.offs, w, idx, bias, std::array::from_fn(|i| s * 16 * (v + i)));
                for (i, a) in acc.iter().enumerate().take(k) {
                    let m = d.flat[v + i];
                    let c = m.count_ones() as usize;
                    _mm_mask_storeu_epi8(out.add(o) as *mut i8, lanes(c), _mm_maskz_compress_epi8(m, out_stage(*a)));
                    o += c;
                }
                v += k;
            }
            return;
        }
        // rows: the vectors (oy, ox0) in order, four at a time
        let per_row = g.ow.div_ceil(16);
        let n = g.oh * per_row;
        let mut v = 0;
        while v < n {
            let k = (n - v).min(4);
            let pos = |i: usize| ((v + i) / per_row, (v + i) % per_row * 16);
            let acc = sums(k, base, &d.offs, w, idx, bias, std::array::from_fn(|i| {
                let (oy, ox0) = pos(i.min(k - 1));
                oy * g.sh * d.pw + s * ox0
            }));
            for (i, a) in acc.iter().enumerate().take(k) {
                let (oy, ox0) = pos(i);
                _mm_mask_storeu_epi8(out.add(oy * g.ow + ox0) as *mut i8, lanes(g.ow - ox0), out_stage(*a));
            }
            v += k;
        }
    }

    /// [`sums_n`] of the first `k` (1 to 4) windows of `at`, the rest of the result `bias`.
    ///
    /// # Safety
    /// As [`sums_n`]'s.
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx512vbmi")]
    unsafe fn sums(k: usize, base: *const u8, offs: &[usize], w: &[i32], idx: __m512i, bias: __m512i, at: [usize; 4]) -> [__m512i; 4] {
        let mut acc = [bias; 4];
        match k {
            4 => acc = sums_n::<4>(base, offs, w, idx, bias, at),
            3 => acc[..3].copy_from_slice(&sums_n::<3>(base, offs, w, idx, bias, [at[0], at[1], at[2]])),
            2 => acc[..2].copy_from_slice(&sums_n::<2>(base, offs, w, idx, bias, [at[0], at[1]])),
            _ => acc[0] = sums_n::<1>(base, offs, w, idx, bias, [at[0]])[0],
        }
        acc
    }

    /// The sums of `N` vectors of outputs whose windows start at `at` in the padded plane `base`: `bias`
    /// plus, per (kernel row, tap group) `(offs[q], w[q])`, the window's bytes gathered by `idx` dotted with
    /// the four weights.
    ///
    /// # Safety
    /// As [`plane`]'s; every `at[i] + offs[q] + 64` within the padded plane.
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx512vbmi")]
    unsafe fn sums_n<const N: usize>(base: *const u8, offs: &[usize], w: &[i32], idx: __m512i, bias: __m512i, at: [usize; N]) -> [__m512i; N] {
        let mut acc = [bias; N];
        for (&o, &wq) in offs.iter().zip(w) {
            let wv = _mm512_set1_epi32(wq);
            for i in 0..N {
                let v = _mm512_permutexvar_epi8(idx, _mm512_loadu_si512(base.add(at[i] + o) as *const _));
                acc[i] = _mm512_dpbusd_epi32(acc[i], v, wv);
            }
        }
        acc
    }
}
