//! int8 DEPTHWISE_CONV_2D with the channels in the vector lanes, for the small output planes of a network's
//! late layers. [`super::conv`]'s plane kernel vectorises over the pixels of one channel: a 3×3 or 6×6 output
//! fills one 16-lane vector partly, and the per-channel work (copying the padded plane, the kernel call) costs
//! more than the arithmetic. Here an image's input is transposed once to `[pixel][channel]` (i16, minus the
//! input zero point), each output pixel sums its taps over 16 channels per vector (`vpmaddwd` against the
//! weight in the low half of each 32-bit lane: exact), and the output stage runs per lane with each channel's
//! own multiplier, shifts and rounding; the `[pixel][channel]` bytes are then transposed back to NCHW.
//! Taps over the padding are skipped (their `x - zp` is 0). Integer sums in any order are equal, and the output
//! stage is the plane kernel's per channel, so the results are the plane kernel's bit for bit (tested).
//!
//! x86-64 only (the module is compiled there alone), depth multiplier 1, with AVX-512 F/BW/VL (16 channels per
//! vector) or AVX2 (8 per vector, the same layout and arithmetic; the per-lane roundings chosen with a blend
//! mask); other cases keep the plane kernel.

use std::cell::RefCell;
use std::ops::Range;

use crate::runtime::spin_pool;

use super::super::conv::pixel_taps::{PixelTaps, Window2};
use super::fixedpoint::Multiplier;
use super::gemm::Geom2;

/// Output planes up to this many pixels take the channel-lane kernel (measured on the 96×96 int8 MobileNetV2s,
/// 1 thread: up to 24×24 it wins, 0.67 → 0.55 ms for the whole model; with 48×48 planes too, 0.61).
const MAX_PIXELS: usize = 576;

/// Multiply-adds from which an image is split between threads (measured on the int8 MobileNetV2 fixture at 2
/// threads, Zen 3: its 96-channel 12×12 layers, 124K, 0.039 → 0.019 ms split; at 32K the 144- and 192-channel
/// 6×6 layers gained nothing).
const SPLIT_WORK: usize = 1 << 16;

/// [`MAX_PIXELS`], or `TPU_SDK_DW_LANES_MAX_PIXELS` (0: never) to compare the two kernels on one machine.
pub(super) fn max_pixels() -> usize {
    static MAX: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *MAX.get_or_init(|| std::env::var("TPU_SDK_DW_LANES_MAX_PIXELS").ok().and_then(|v| v.parse().ok()).unwrap_or(MAX_PIXELS))
}

/// The AVX2 kernel's weight vectors (see `NhwcDepthwise::wpairs`): in each 128-bit half `h` of a vector, the
/// four channel pairs `h·8 + half·4 + i` (i < 4), each as (weight of the first tap, of the second), exactly as
/// `vpunpck{l,h}wd` (`half` 0, 1) interleave the inputs of two taps.
fn pair_lanes(c: usize, cp: usize, kk: usize, w16: &[i16]) -> Vec<i16> {
    let wt = |t: Option<usize>, ch: usize| match t {
        Some(t) if ch < c => w16[ch * kk + t],
        _ => 0,
    };
    let combos: Vec<(usize, Option<usize>)> =
        (0..kk.div_ceil(2)).map(|q| (2 * q, (2 * q + 1 < kk).then_some(2 * q + 1))).chain((0..kk).map(|t| (t, None))).collect();
    let mut out = Vec::with_capacity(cp / 16 * combos.len() * 32);
    for b in 0..cp / 16 {
        for &(ta, tb) in &combos {
            for half in 0..2 {
                for e in 0..16 {
                    let ch = b * 16 + e / 8 * 8 + half * 4 + e % 8 / 2;
                    out.push(if e % 2 == 0 { wt(Some(ta), ch) } else { wt(tb, ch) });
                }
            }
        }
    }
    out
}

/// Whether the channel-lane kernels run on this CPU (AVX-512 F/BW/VL or AVX2).
pub(super) fn available() -> bool {
    super::requantize::row_available()
}

/// The per-channel constants of a depthwise convolution laid out by 16-channel block.
#[derive(Debug)]
pub(super) struct NhwcDepthwise {
    /// Channels, and channels rounded up to the 16 lanes.
    c: usize,
    cp: usize,
    /// `[tap][channel]`: the weight in the low 16 bits of each 32-bit lane, 0 above.
    w: Vec<i32>,
    bias: Vec<i32>,
    /// Per channel: the Q31 multiplier, the left and right shifts.
    mult: Vec<i32>,
    left: Vec<i32>,
    right: Vec<i32>,
    /// Per 16-channel block: the lanes that round half away from zero (`MultiplyByQuantizedMultiplier`);
    /// the others round the NEON way (`vrshl`).
    double: Vec<u16>,
    /// The same per channel as a vector mask (-1: half away from zero), for AVX2's blends.
    away: Vec<i32>,
    /// Whether the AVX-512 kernels run (else AVX2).
    avx512: bool,
    /// AVX2: per 16-channel block, the weights of tap pairs (0, 1), (2, 3), ... (`kk.div_ceil(2)` pairs, the
    /// last with partner 0 where `kk` is odd), then of each tap alone (partner 0), each as two vectors of 16
    /// i16 in [`avx2::pixels`]'s interleaved order ([`pair_lanes`]).
    wpairs: Vec<i16>,
    zp_out: i32,
    range: (i32, i32),
    /// The planned geometry, and each output pixel's taps inside the input.
    geom: Geom2,
    taps: PixelTaps,
}

thread_local! {
    /// The transposed input `[pixel][cp]` and output `[pixel][cp]` of this thread.
    static BUFS: RefCell<(Vec<i16>, Vec<u8>)> = const { RefCell::new((Vec::new(), Vec::new())) };
}

impl NhwcDepthwise {
    /// The constants of `c` channels with weights `w16` (`[C][kh·kw]`, minus their zero point), `bias`,
    /// multipliers `m`; channels below `neon_end` round the NEON way, the rest half away from zero (as the plane
    /// kernel's output stage does).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn new(g: &Geom2, c: usize, w16: &[i16], bias: &[i32], m: &[Multiplier], neon_end: usize, zp_out: i32, range: (i32, i32)) -> NhwcDepthwise {
        Self::for_kernel(g, c, w16, bias, m, neon_end, zp_out, range, super::requantize::available())
    }

    /// [`NhwcDepthwise::new`] for the AVX-512 kernels, or (`avx512` false) the AVX2 ones; the CPU must run the
    /// ones asked for ([`available`]).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn for_kernel(g: &Geom2, c: usize, w16: &[i16], bias: &[i32], m: &[Multiplier], neon_end: usize, zp_out: i32, range: (i32, i32), avx512: bool) -> NhwcDepthwise {
        let kk = g.kh * g.kw;
        let cp = c.div_ceil(16) * 16;
        let mut w = vec![0i32; kk * cp];
        for ch in 0..c {
            for t in 0..kk {
                w[t * cp + ch] = w16[ch * kk + t] as u16 as i32;
            }
        }
        let per = |f: &dyn Fn(usize) -> i32| (0..cp).map(|ch| if ch < c { f(ch) } else { 0 }).collect::<Vec<i32>>();
        let double = (0..cp / 16)
            .map(|b| (0..16).filter(|&l| b * 16 + l >= neon_end).fold(0u16, |mask, l| mask | 1 << l))
            .collect();
        NhwcDepthwise {
            c,
            cp,
            w,
            bias: per(&|ch| bias[ch]),
            mult: per(&|ch| m[ch].multiplier),
            left: per(&|ch| m[ch].shift.max(0)),
            right: per(&|ch| (-m[ch].shift).max(0)),
            double,
            away: per(&|ch| if ch >= neon_end { -1 } else { 0 }),
            avx512,
            wpairs: if avx512 { Vec::new() } else { pair_lanes(c, cp, kk, w16) },
            zp_out,
            range,
            geom: *g,
            taps: PixelTaps::new(
                &Window2 { ih: g.ih, iw: g.iw, oh: g.oh, ow: g.ow, k: (g.kh, g.kw), s: (g.sh, g.sw), d: (g.dh, g.dw), pad: (g.pt, g.pl) },
                cp,
            ),
        }
    }

    /// Image after image: `x` is `[n][c][ih][iw]` (shifted to i8 as the plane kernel's input) in the planned
    /// geometry, `zp` the input zero point, `out` the `[n][c][oh][ow]` output bytes. From [`SPLIT_WORK`]
    /// multiply-adds each of the three steps is split between the threads: the transposition in by runs of 16
    /// input pixels, the sums by output pixels, the transposition out by 16-channel blocks.
    pub(super) fn run(&self, x: &[i8], n: usize, zp: i32, out: &mut [u8]) {
        let g = &self.geom;
        let (plane, p, c, cp) = (g.ih * g.iw, g.oh * g.ow, self.c, self.cp);
        assert!(x.len() >= n * c * plane && out.len() >= n * c * p, "depthwise buffers shorter than their shapes");
        let steps = if self.avx512 { Steps::AVX512 } else { Steps::AVX2 };
        let threads = spin_pool::threads();
        let split = threads > 1 && c * p * g.kh * g.kw >= spin_pool::min_work(SPLIT_WORK);
        BUFS.with(|bufs| {
            let (xt, yt) = &mut *bufs.borrow_mut();
            xt.resize(plane * cp, 0);
            yt.resize(p * cp, 0);
            for b in 0..n {
                let xs = &x[b * c * plane..(b + 1) * c * plane];
                let ys = &mut out[b * c * p..(b + 1) * c * p];
                // SAFETY (each call below): the CPU has AVX-512 F/BW/VL where `avx512`, else AVX2 (the caller built
                // this only where `available()`); xs holds c·plane and ys c·p elements, xt plane·cp and yt p·cp
                // (resized above), and each part of xt, yt and ys is as long as its range of pixels or channels
                if !split {
                    unsafe {
                        (steps.to_lanes)(xs, c, plane, zp, xt, cp, 0..plane);
                        (steps.pixels)(self, xt, yt, 0..p);
                        (steps.from_lanes)(yt, cp, ys, p, 0..c);
                    }
                    continue;
                }
                let per = plane.div_ceil(16).div_ceil(threads) * 16;
                spin_pool::for_each_chunk_mut(xt, per * cp, &|i, part| unsafe { (steps.to_lanes)(xs, c, plane, zp, part, cp, i * per..((i + 1) * per).min(plane)) });
                let xt: &[i16] = xt;
                let per = p.div_ceil(threads);
                spin_pool::for_each_chunk_mut(yt, per * cp, &|i, part| unsafe { (steps.pixels)(self, xt, part, i * per..((i + 1) * per).min(p)) });
                let yt: &[u8] = yt;
                let per = c.div_ceil(16).div_ceil(threads) * 16;
                spin_pool::for_each_chunk_mut(ys, per * p, &|i, part| unsafe { (steps.from_lanes)(yt, cp, part, p, i * per..((i + 1) * per).min(c)) });
            }
        });
    }
}

/// `to_lanes(x, c, p, zp, xt, cp, pixels)`.
type ToLanes = unsafe fn(&[i8], usize, usize, i32, &mut [i16], usize, Range<usize>);

/// One kernel family's three steps, each over a range of pixels or channels (see the kernels' safety notes).
#[derive(Clone, Copy)]
struct Steps {
    to_lanes: ToLanes,
    pixels: unsafe fn(&NhwcDepthwise, &[i16], &mut [u8], Range<usize>),
    from_lanes: unsafe fn(&[u8], usize, &mut [u8], usize, Range<usize>),
}

impl Steps {
    const AVX512: Steps = Steps { to_lanes: x86::to_lanes, pixels: x86::pixels, from_lanes: x86::from_lanes };
    const AVX2: Steps = Steps { to_lanes: avx2::to_lanes, pixels: avx2::pixels, from_lanes: avx2::from_lanes };
}

mod x86 {
    use super::super::requantize::x86::high_mul_lanes;
    use super::NhwcDepthwise;
    use std::arch::x86_64::*;
    use std::ops::Range;

    /// Transposes 16 rows of 16 i16 (row `i` lane `j`) into 16 rows (row `j` lane `i`): unpacks of 16-, 32- and
    /// 64-bit elements transpose the 8×8 blocks within each 128-bit half, then the halves are exchanged.
    #[inline]
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn transpose16(r: &[__m256i; 16]) -> [__m256i; 16] {
        // rows 8·h .. 8·h + 7 → v[k] = [column k | column k + 8] of those rows
        let half = |h: usize| {
            let a = |i: usize| r[8 * h + i];
            let t = [
                _mm256_unpacklo_epi16(a(0), a(1)),
                _mm256_unpackhi_epi16(a(0), a(1)),
                _mm256_unpacklo_epi16(a(2), a(3)),
                _mm256_unpackhi_epi16(a(2), a(3)),
                _mm256_unpacklo_epi16(a(4), a(5)),
                _mm256_unpackhi_epi16(a(4), a(5)),
                _mm256_unpacklo_epi16(a(6), a(7)),
                _mm256_unpackhi_epi16(a(6), a(7)),
            ];
            let u = [
                _mm256_unpacklo_epi32(t[0], t[2]),
                _mm256_unpackhi_epi32(t[0], t[2]),
                _mm256_unpacklo_epi32(t[1], t[3]),
                _mm256_unpackhi_epi32(t[1], t[3]),
                _mm256_unpacklo_epi32(t[4], t[6]),
                _mm256_unpackhi_epi32(t[4], t[6]),
                _mm256_unpacklo_epi32(t[5], t[7]),
                _mm256_unpackhi_epi32(t[5], t[7]),
            ];
            [
                _mm256_unpacklo_epi64(u[0], u[4]),
                _mm256_unpackhi_epi64(u[0], u[4]),
                _mm256_unpacklo_epi64(u[1], u[5]),
                _mm256_unpackhi_epi64(u[1], u[5]),
                _mm256_unpacklo_epi64(u[2], u[6]),
                _mm256_unpackhi_epi64(u[2], u[6]),
                _mm256_unpacklo_epi64(u[3], u[7]),
                _mm256_unpackhi_epi64(u[3], u[7]),
            ]
        };
        let (v, w) = (half(0), half(1));
        let mut out = [_mm256_setzero_si256(); 16];
        for k in 0..8 {
            out[k] = _mm256_permute2x128_si256::<0x20>(v[k], w[k]);
            out[k + 8] = _mm256_permute2x128_si256::<0x31>(v[k], w[k]);
        }
        out
    }

    /// The first `n` (≤ 16) lanes.
    #[inline]
    fn lanes(n: usize) -> u16 {
        if n >= 16 {
            !0
        } else {
            ((1u32 << n) - 1) as u16
        }
    }

    /// `xt[(pix - px.start)·cp + ch] = x[ch·p + pix] - zp` for the pixels `pix` in `px` (`x` is `[c][p]`), 16
    /// channels × 16 pixels at a time; channels from `c` to `cp` get 0.
    ///
    /// # Safety
    /// The CPU has AVX-512 F/BW/VL; `x` holds `c·p` and `xt` `px.len()·cp` elements (pixels `px` of the `p`), `cp` a
    /// multiple of 16 ≥ `c`.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl")]
    pub(super) unsafe fn to_lanes(x: &[i8], c: usize, p: usize, zp: i32, xt: &mut [i16], cp: usize, px: Range<usize>) {
        debug_assert!(x.len() >= c * p && xt.len() >= px.len() * cp && cp.is_multiple_of(16) && cp >= c && px.end <= p);
        let zpv = _mm256_set1_epi16(zp as i16);
        for c0 in (0..cp).step_by(16) {
            for p0 in px.clone().step_by(16) {
                let m = lanes(px.end - p0);
                let mut rows = [_mm256_setzero_si256(); 16];
                for (i, row) in rows.iter_mut().enumerate().take(c.saturating_sub(c0).min(16)) {
                    let v = _mm_maskz_loadu_epi8(m, x.as_ptr().add((c0 + i) * p + p0));
                    *row = _mm256_sub_epi16(_mm256_cvtepi8_epi16(v), zpv);
                }
                let cols = transpose16(&rows);
                for (j, col) in cols.iter().enumerate().take((px.end - p0).min(16)) {
                    _mm256_storeu_si256(xt.as_mut_ptr().add((p0 - px.start + j) * cp + c0) as *mut __m256i, *col);
                }
            }
        }
    }

    /// `y[(ch - chans.start)·p + pix] = yt[pix·cp + ch]` for the channels `ch` in `chans`, 16 × 16 at a time.
    ///
    /// # Safety
    /// The CPU has AVX-512 F/BW/VL; `yt` holds `p·cp` and `y` `chans.len()·p` elements (channels `chans`, starting at a
    /// multiple of 16), `cp` a multiple of 16 ≥ `chans.end`.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl")]
    pub(super) unsafe fn from_lanes(yt: &[u8], cp: usize, y: &mut [u8], p: usize, chans: Range<usize>) {
        debug_assert!(yt.len() >= p * cp && y.len() >= chans.len() * p && cp.is_multiple_of(16) && cp >= chans.end && chans.start.is_multiple_of(16));
        for c0 in chans.clone().step_by(16) {
            for p0 in (0..p).step_by(16) {
                let mut rows = [_mm256_setzero_si256(); 16];
                for (i, row) in rows.iter_mut().enumerate().take((p - p0).min(16)) {
                    *row = _mm256_cvtepu8_epi16(_mm_loadu_si128(yt.as_ptr().add((p0 + i) * cp + c0) as *const __m128i));
                }
                let m = lanes(p - p0);
                let per_channel = transpose16(&rows);
                for (j, v) in per_channel.iter().enumerate().take((chans.end - c0).min(16)) {
                    _mm_mask_storeu_epi8(y.as_mut_ptr().add((c0 - chans.start + j) * p + p0) as *mut i8, m, _mm256_cvtepi16_epi8(*v));
                }
            }
        }
    }

    /// The output pixels `px` of one image: `yt[pix - px.start][ch] = clamp(zp + scale(bias + Σ_taps w·(x -
    /// zp)))`, channel block by channel block (its constants stay in registers), pixel by pixel within.
    ///
    /// # Safety
    /// The CPU has AVX-512 F/BW/VL; `xt` holds `ih·iw·cp` and `yt` `px.len()·cp` elements of `d`'s geometry (output
    /// pixels `px`).
    #[target_feature(enable = "avx512f,avx512bw,avx512vl")]
    pub(super) unsafe fn pixels(d: &NhwcDepthwise, xt: &[i16], yt: &mut [u8], px: Range<usize>) {
        let cp = d.cp;
        let (taps, ends) = (&d.taps.taps, &d.taps.ends);
        let (zp, lo, hi) = (_mm512_set1_epi32(d.zp_out), _mm512_set1_epi32(d.range.0), _mm512_set1_epi32(d.range.1));
        let one = _mm512_set1_epi32(1);
        let round = _mm512_set1_epi64(1 << 30);
        for cb in 0..cp / 16 {
            let c0 = cb * 16;
            let bias = _mm512_loadu_si512(d.bias.as_ptr().add(c0) as *const _);
            let left = _mm512_loadu_si512(d.left.as_ptr().add(c0) as *const _);
            let right = _mm512_loadu_si512(d.right.as_ptr().add(c0) as *const _);
            let mult = _mm512_loadu_si512(d.mult.as_ptr().add(c0) as *const _);
            let double = d.double[cb];
            // half away from zero: the remainder mask; half up: which lanes shift right at all
            let mask = _mm512_sub_epi32(_mm512_sllv_epi32(one, right), one);
            let shifted = _mm512_cmpgt_epi32_mask(right, _mm512_setzero_si512());
            let right1 = _mm512_sub_epi32(right, one);
            let (xb, wb) = (xt.as_ptr().add(c0), d.w.as_ptr().add(c0));
            let mut start = if px.start == 0 { 0 } else { ends[px.start - 1] };
            for (pix, &end) in ends.iter().enumerate().take(px.end).skip(px.start) {
                let mut acc = bias;
                for &(xo, wo) in &taps[start..end] {
                    let xv = _mm512_cvtepi16_epi32(_mm256_loadu_si256(xb.add(xo) as *const _));
                    acc = _mm512_add_epi32(acc, _mm512_madd_epi16(xv, _mm512_loadu_si512(wb.add(wo) as *const _)));
                }
                start = end;
                let h = high_mul_lanes(_mm512_sllv_epi32(acc, left), mult, round);
                let s = _mm512_srav_epi32(h, right);
                let away = || {
                    let threshold = _mm512_add_epi32(_mm512_srli_epi32::<1>(mask), _mm512_srli_epi32::<31>(h));
                    let up = _mm512_cmpgt_epi32_mask(_mm512_and_si512(h, mask), threshold);
                    _mm512_mask_add_epi32(s, up, s, one)
                };
                let half_up = || {
                    let bit = _mm512_and_si512(_mm512_srav_epi32(h, right1), one);
                    _mm512_mask_add_epi32(h, shifted, s, bit)
                };
                let r = match double {
                    0xffff => away(),
                    0 => half_up(),
                    lanes => _mm512_mask_blend_epi32(lanes, half_up(), away()),
                };
                let y = _mm512_min_epi32(_mm512_max_epi32(_mm512_add_epi32(r, zp), lo), hi);
                _mm_storeu_si128(yt.as_mut_ptr().add((pix - px.start) * cp + c0) as *mut _, _mm512_cvtepi32_epi8(y));
            }
        }
    }
}

/// The kernels on 8 lanes (AVX2): the same layout (channels padded to 16, transposed 16 × 16), loads and stores
/// of partial blocks through a small buffer instead of masks, the output stage per lane with variable shifts.
mod avx2 {
    use super::x86::transpose16;
    use super::NhwcDepthwise;
    use std::arch::x86_64::*;
    use std::ops::Range;

    /// [`super::x86::to_lanes`] with AVX2.
    ///
    /// # Safety
    /// As [`super::x86::to_lanes`]'s, with AVX2 for AVX-512.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn to_lanes(x: &[i8], c: usize, p: usize, zp: i32, xt: &mut [i16], cp: usize, px: Range<usize>) {
        debug_assert!(x.len() >= c * p && xt.len() >= px.len() * cp && cp.is_multiple_of(16) && cp >= c && px.end <= p);
        let zpv = _mm256_set1_epi16(zp as i16);
        for c0 in (0..cp).step_by(16) {
            for p0 in px.clone().step_by(16) {
                let count = (px.end - p0).min(16);
                let mut rows = [_mm256_setzero_si256(); 16];
                for (i, row) in rows.iter_mut().enumerate().take(c.saturating_sub(c0).min(16)) {
                    let src = x.as_ptr().add((c0 + i) * p + p0);
                    let v = if count == 16 {
                        _mm_loadu_si128(src as *const __m128i)
                    } else {
                        let mut tmp = [0i8; 16];
                        std::ptr::copy_nonoverlapping(src, tmp.as_mut_ptr(), count);
                        _mm_loadu_si128(tmp.as_ptr() as *const __m128i)
                    };
                    *row = _mm256_sub_epi16(_mm256_cvtepi8_epi16(v), zpv);
                }
                let cols = transpose16(&rows);
                for (j, col) in cols.iter().enumerate().take(count) {
                    _mm256_storeu_si256(xt.as_mut_ptr().add((p0 - px.start + j) * cp + c0) as *mut __m256i, *col);
                }
            }
        }
    }

    /// [`super::x86::from_lanes`] with AVX2.
    ///
    /// # Safety
    /// As [`super::x86::from_lanes`]'s, with AVX2 for AVX-512.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn from_lanes(yt: &[u8], cp: usize, y: &mut [u8], p: usize, chans: Range<usize>) {
        debug_assert!(yt.len() >= p * cp && y.len() >= chans.len() * p && cp.is_multiple_of(16) && cp >= chans.end && chans.start.is_multiple_of(16));
        for c0 in chans.clone().step_by(16) {
            for p0 in (0..p).step_by(16) {
                let count = (p - p0).min(16);
                let mut rows = [_mm256_setzero_si256(); 16];
                for (i, row) in rows.iter_mut().enumerate().take(count) {
                    *row = _mm256_cvtepu8_epi16(_mm_loadu_si128(yt.as_ptr().add((p0 + i) * cp + c0) as *const __m128i));
                }
                let per_channel = transpose16(&rows);
                for (j, v) in per_channel.iter().enumerate().take((chans.end - c0).min(16)) {
                    // the lanes hold 0..=255: the unsigned saturating pack keeps them
                    let bytes = _mm_packus_epi16(_mm256_castsi256_si128(*v), _mm256_extracti128_si256::<1>(*v));
                    let dst = y.as_mut_ptr().add((c0 - chans.start + j) * p + p0);
                    if count == 16 {
                        _mm_storeu_si128(dst as *mut __m128i, bytes);
                    } else {
                        let mut tmp = [0u8; 16];
                        _mm_storeu_si128(tmp.as_mut_ptr() as *mut __m128i, bytes);
                        std::ptr::copy_nonoverlapping(tmp.as_ptr(), dst, count);
                    }
                }
            }
        }
    }

    /// [`super::x86::pixels`] on 16 channels per step with two taps per `vpmaddwd`: the inputs of two taps
    /// interleaved per channel (`vpunpck{l,h}wd`) against their two weights interleaved the same way, so the
    /// sums land in two vectors holding channels 0-3, 8-11 and 4-7, 12-15 (the unpacks work within 128-bit
    /// halves); the per-channel constants are loaded in that order, and the saturating packs of the two results
    /// put the channels back in order. A pixel with every tap inside the input pairs taps (0, 1), (2, 3), ...;
    /// a pixel at the border takes its taps one at a time (partner 0); both weight layouts are made when the
    /// session is planned (`NhwcDepthwise::wpairs`). Each lane: the multiplier per lane, shifts per lane (`vpsllvd`/`vpsravd`), both roundings
    /// computed and blended by the channels' mask where a block mixes them.
    ///
    /// # Safety
    /// As [`super::x86::pixels`]'s, with AVX2 for AVX-512.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn pixels(d: &NhwcDepthwise, xt: &[i16], yt: &mut [u8], px: Range<usize>) {
        let (cp, kk) = (d.cp, d.geom.kh * d.geom.kw);
        let npairs = kk.div_ceil(2);
        // per block: the pairs' vectors, then the single taps', two vectors of 16 i16 each
        let per_block = (npairs + kk) * 32;
        debug_assert_eq!(d.wpairs.len(), cp / 16 * per_block);
        let (taps, ends) = (&d.taps.taps, &d.taps.ends);
        let (zp, lo, hi) = (_mm256_set1_epi32(d.zp_out), _mm256_set1_epi32(d.range.0), _mm256_set1_epi32(d.range.1));
        let unsigned = d.range.1 > 127;
        let one = _mm256_set1_epi32(1);
        let zero = _mm256_setzero_si256();
        let round = _mm256_set1_epi64x(1 << 30);
        // channels c0 + [0, 1, 2, 3, 8, 9, 10, 11] (`half` 0) or c0 + [4, 5, 6, 7, 12, 13, 14, 15] (`half` 1)
        let split = |v: &[i32], c0: usize, half: usize| {
            let at = |c: usize| _mm_loadu_si128(v.as_ptr().add(c) as *const __m128i);
            _mm256_inserti128_si256::<1>(_mm256_castsi128_si256(at(c0 + 4 * half)), at(c0 + 8 + 4 * half))
        };
        for c0 in (0..cp).step_by(16) {
            let wb = d.wpairs.as_ptr().add(c0 / 16 * per_block);
            // weight vector `half` of pair q (q < npairs) or of single tap t (q = npairs + t)
            let wv = |q: usize, half: usize| _mm256_loadu_si256(wb.add((2 * q + half) * 16) as *const __m256i);
            let consts = |half: usize| {
                let right = split(&d.right, c0, half);
                let away = split(&d.away, c0, half);
                let mult = split(&d.mult, c0, half);
                (split(&d.bias, c0, half), split(&d.left, c0, half), right, mult, _mm256_srli_epi64::<32>(mult), away)
            };
            let k = [consts(0), consts(1)];
            // per half: whether all its lanes round half away from zero, or none does
            let mixed: [(bool, bool); 2] = std::array::from_fn(|half| {
                let away = |i: usize| d.away[c0 + i / 4 * 8 + 4 * half + i % 4] != 0;
                ((0..8).all(away), !(0..8).any(away))
            });
            let xb = xt.as_ptr().add(c0);
            let mut start = if px.start == 0 { 0 } else { ends[px.start - 1] };
            for (pix, &end) in ends.iter().enumerate().take(px.end).skip(px.start) {
                let mut acc = [k[0].0, k[1].0];
                let ld = |xo: usize| _mm256_loadu_si256(xb.add(xo) as *const __m256i);
                if end - start == kk {
                    let pt = &taps[start..end];
                    for q in 0..kk / 2 {
                        let (a, b) = (ld(pt[2 * q].0), ld(pt[2 * q + 1].0));
                        acc[0] = _mm256_add_epi32(acc[0], _mm256_madd_epi16(_mm256_unpacklo_epi16(a, b), wv(q, 0)));
                        acc[1] = _mm256_add_epi32(acc[1], _mm256_madd_epi16(_mm256_unpackhi_epi16(a, b), wv(q, 1)));
                    }
                    if kk % 2 == 1 {
                        let (a, q) = (ld(pt[kk - 1].0), kk / 2);
                        acc[0] = _mm256_add_epi32(acc[0], _mm256_madd_epi16(_mm256_unpacklo_epi16(a, zero), wv(q, 0)));
                        acc[1] = _mm256_add_epi32(acc[1], _mm256_madd_epi16(_mm256_unpackhi_epi16(a, zero), wv(q, 1)));
                    }
                } else {
                    for &(xo, wo) in &taps[start..end] {
                        let (a, q) = (ld(xo), npairs + wo / cp);
                        acc[0] = _mm256_add_epi32(acc[0], _mm256_madd_epi16(_mm256_unpacklo_epi16(a, zero), wv(q, 0)));
                        acc[1] = _mm256_add_epi32(acc[1], _mm256_madd_epi16(_mm256_unpackhi_epi16(a, zero), wv(q, 1)));
                    }
                }
                start = end;
                let r: [__m256i; 2] = std::array::from_fn(|half| {
                    let (_, left, right, mult, mult_odd, away) = k[half];
                    let a = _mm256_sllv_epi32(acc[half], left);
                    let even = _mm256_add_epi64(crate::runtime::kernels::int8::requantize::mul32::mul256(a, mult), round);
                    let odd = _mm256_add_epi64(crate::runtime::kernels::int8::requantize::mul32::mul256(_mm256_srli_epi64::<32>(a), mult_odd), round);
                    let h = _mm256_blend_epi32::<0b1010_1010>(_mm256_srli_epi64::<31>(even), _mm256_slli_epi64::<1>(odd));
                    let s = _mm256_srav_epi32(h, right);
                    let away_r = || {
                        let mask = _mm256_sub_epi32(_mm256_sllv_epi32(one, right), one);
                        let threshold = _mm256_add_epi32(_mm256_srli_epi32::<1>(mask), _mm256_srli_epi32::<31>(h));
                        _mm256_sub_epi32(s, _mm256_cmpgt_epi32(_mm256_and_si256(h, mask), threshold))
                    };
                    let half_up = || {
                        let bit = _mm256_and_si256(_mm256_srav_epi32(h, _mm256_sub_epi32(right, one)), one);
                        _mm256_add_epi32(s, _mm256_and_si256(bit, _mm256_cmpgt_epi32(right, zero)))
                    };
                    let r = match mixed[half] {
                        (true, _) => away_r(),
                        (_, true) => half_up(),
                        _ => _mm256_blendv_epi8(half_up(), away_r(), away),
                    };
                    _mm256_min_epi32(_mm256_max_epi32(_mm256_add_epi32(r, zp), lo), hi)
                });
                // i16 in channel order within each half: 0-7 | 8-15
                let v = _mm256_packs_epi32(r[0], r[1]);
                let bytes = if unsigned { _mm256_packus_epi16(v, v) } else { _mm256_packs_epi16(v, v) };
                let out = _mm256_castsi256_si128(_mm256_permute4x64_epi64::<0b00_00_10_00>(bytes));
                _mm_storeu_si128(yt.as_mut_ptr().add((pix - px.start) * cp + c0) as *mut __m128i, out);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::fixedpoint::{mul_double_round, mul_neon_rshl, quantize_multiplier};
    use super::*;

    /// The channel-lane kernels and the VNNI byte-plane kernel ([`super::super::vnni_planes`]) against a
    /// scalar loop with the scalar output stages: strides, dilations, asymmetric paddings, channel counts
    /// around the 16 lanes and the NEON blocks of 8, multipliers that shift left and right, both output ranges,
    /// batches of 2; each kernel the CPU has, on 1 and 2 threads.
    #[test]
    fn depthwise_kernels_equal_a_scalar_loop() {
        use super::super::vnni_planes::{self, VnniDepthwise};
        // each kernel this CPU runs: the channel-lane ones (AVX-512 or AVX2), then the VNNI one (None)
        let kernels: Vec<Option<bool>> = [Some(true), Some(false), None]
            .into_iter()
            .filter(|&k| match k {
                Some(true) => super::super::requantize::available(),
                Some(false) => super::super::packed_gemm::has_avx2(),
                None => vnni_planes::available(),
            })
            .collect();
        let mut s = 11u64;
        let mut rnd = move || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s
        };
        let cases = [
            // ih, iw, kh, kw, sh, sw, dh, dw, pt, pl, pb, pr, c
            [3, 3, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 336],
            [6, 6, 3, 3, 2, 2, 1, 1, 0, 0, 1, 1, 96],
            [12, 12, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 20],
            [7, 9, 3, 5, 2, 1, 2, 1, 2, 1, 0, 3, 17],
            [5, 5, 5, 5, 1, 1, 1, 1, 2, 2, 2, 2, 8],
            [4, 6, 1, 1, 1, 2, 1, 1, 0, 0, 0, 0, 1],
            [2, 2, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 33],
            // enough work to split between two threads: partial 16-channel blocks, an input plane not a
            // multiple of 16 pixels
            [24, 24, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 40],
            [47, 47, 3, 3, 2, 2, 1, 1, 0, 0, 1, 1, 36],
            // the VNNI kernel's two orders and tap groups: rows (wide outputs, unequal strides), flat (small
            // planes), kernels wider than four taps, dilation, stride 3
            [40, 37, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 5],
            [9, 30, 3, 3, 2, 1, 1, 1, 1, 1, 1, 1, 18],
            [11, 11, 5, 7, 1, 1, 1, 2, 2, 6, 2, 6, 19],
            [13, 14, 3, 3, 3, 3, 2, 2, 2, 2, 0, 1, 7],
            [1, 1, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 24],
        ];
        for (ci, [ih, iw, kh, kw, sh, sw, dh, dw, pt, pl, pb, pr, c]) in cases.into_iter().enumerate() {
            let oh = (ih + pt + pb - (kh - 1) * dh - 1) / sh + 1;
            let ow = (iw + pl + pr - (kw - 1) * dw - 1) / sw + 1;
            let g = Geom2 { ih, iw, oh, ow, kh, kw, sh, sw, dh, dw, pt, pl };
            let (n, kk) = (2, kh * kw);
            let x: Vec<i8> = (0..n * c * ih * iw).map(|_| rnd() as i8).collect();
            let w16: Vec<i16> = (0..c * kk).map(|_| (rnd() % 255) as i16 - 127).collect();
            let bias: Vec<i32> = (0..c).map(|_| (rnd() % 200_001) as i32 - 100_000).collect();
            // powers of two shift right by one or two bits: ties, where the two roundings differ, are common
            let scales = [1e-5, 3.1e-4, 0.0021, 0.047, 0.125, 0.25, 0.5, 0.77, 1.0, 1.9, 6.3];
            let m: Vec<Multiplier> = (0..c).map(|_| quantize_multiplier(scales[(rnd() % scales.len() as u64) as usize])).collect();
            let zp = rnd() as i8 as i32;
            // int8 data, int8 with a fused activation's narrower range, uint8 data
            let (zp_out, range) = match ci / 3 % 3 {
                0 => (rnd() as i8 as i32, (-128, 127)),
                1 => (-128 + (rnd() % 20) as i32, (-128 + 3, 120)),
                _ => ((rnd() % 256) as i32, (0, 255)),
            };
            // the plane kernel's split (whole blocks of 8), none, or one inside a block of 8 lanes
            let neon_end = [0, c / 8 * 8, c / 3][ci % 3];
            for (kernel, threads) in kernels.iter().flat_map(|&k| [(k, 1), (k, 2)]) {
                let mut got = vec![0u8; n * c * oh * ow];
                let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().expect("a thread pool");
                match kernel {
                    Some(avx512) => {
                        let d = NhwcDepthwise::for_kernel(&g, c, &w16, &bias, &m, neon_end, zp_out, range, avx512);
                        pool.install(|| d.run(&x, n, zp, &mut got))
                    }
                    None => {
                        let d = VnniDepthwise::new(&g, c, &w16, &bias, &m, neon_end, zp, zp_out, range).expect("the case fits the VNNI kernel");
                        pool.install(|| d.run(&x, n, &mut got))
                    }
                }
                for b in 0..n {
                    for ch in 0..c {
                        for oy in 0..oh {
                            for ox in 0..ow {
                                let mut acc = bias[ch];
                                for ky in 0..kh {
                                    for kx in 0..kw {
                                        let iy = (oy * sh + ky * dh) as isize - pt as isize;
                                        let ix = (ox * sw + kx * dw) as isize - pl as isize;
                                        if iy >= 0 && (iy as usize) < ih && ix >= 0 && (ix as usize) < iw {
                                            let xv = x[((b * c + ch) * ih + iy as usize) * iw + ix as usize] as i32;
                                            acc += (xv - zp) * w16[ch * kk + ky * kw + kx] as i32;
                                        }
                                    }
                                }
                                let scaled = if ch < neon_end { mul_neon_rshl(acc, m[ch]) } else { mul_double_round(acc, m[ch]) };
                                let want = (scaled + zp_out).clamp(range.0, range.1);
                                let at = ((b * c + ch) * oh + oy) * ow + ox;
                                assert_eq!(got[at] as i8 as i32, want as i8 as i32, "kernel {kernel:?} threads {threads} case {ci} b{b} c{ch} y{oy} x{ox}: acc {acc}, {:?}", m[ch]);
                            }
                        }
                    }
                }
            }
        }
    }
}
