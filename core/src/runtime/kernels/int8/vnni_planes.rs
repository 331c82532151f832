//! int8 convolutions with VNNI dot products over byte planes (AVX-512 VNNI + VBMI/VBMI2), in the NCHW layout
//! with no transposition: DEPTHWISE_CONV_2D ([`VnniDepthwise`]) and CONV_2D over a few input channels
//! ([`VnniDense`]: a network's stem on its RGB image).
//!
//! Each input plane is copied once as unsigned bytes (`x + 128`) into a buffer padded with the input zero
//! point's byte, `pw` wide ([`Planes`]). A vector holds 16 output pixels of one channel; for each kernel row and
//! each group of four taps of that row, one 64-byte load and one `vpermb` put the four input bytes of every
//! output pixel side by side (byte `4l + k` = input `s·l + k·d` of the window: a *window*), and one `vpdpbusd`
//! adds their products with the four weights (broadcast; 0 past the kernel's width). A 3×3 depthwise kernel is
//! three `vpdpbusd` per 16 outputs where the 16-bit kernels take nine `vpmaddwd`; the dense kernel gathers the
//! windows of every input channel once per 16 pixels and dots them with each output channel's weights.
//!
//! The unsigned bytes count `128 + zp` more than `x - zp`, so the bias takes `-(128 + zp)·Σw` once, and the
//! padding (the zero point's byte) adds exactly that for its taps: every sum is `bias + Σ (x - zp)·w` exactly,
//! and the output stage is [`super::conv`]'s per channel ([`super::requantize::x86::requant`]), so the results
//! are its bit for bit (tested against scalar loops).
//!
//! Output pixels are laid one of two ways, whichever fills more lanes: *rows* (each output row in vectors of
//! 16, the last one partly), or *flat* (equal strides `s` only): the pixel `(oy, ox)` at `j = oy·pw + ox` of a
//! plane `pw` wide, whose window starts at byte `s·j` of the padded input, so vectors run across rows and the
//! columns from `ow` on are computed and dropped (`vpcompressb` packs the others): what small planes want, a
//! 6×6 output padded to 8 wide fills 48 of 64 lanes in flat order, 36 of 96 in rows.
//!
//! x86-64 only; weights within i8 (int8 models; uint8 models whose weights minus their zero point leave i8
//! keep the 16-bit kernels), windows of 16 pixels that fit 64 bytes (`15·s + 3·d < 64`).

use std::cell::RefCell;

use crate::runtime::spin_pool;

use super::fixedpoint::Multiplier;
use super::gemm::Geom2;

/// Depthwise output planes from this many pixels take [`VnniDepthwise`] (measured on the int8 MobileNetV2
/// fixture, 1 thread, Zen 5: its 6×6 planes 1.2-1.6× faster than with the channel-lane kernel, its 3×3 ones 2×
/// slower, where a channel's fixed costs (its copy, constants, the output stage's latency) outweigh its nine
/// outputs).
pub(super) const MIN_PIXELS: usize = 16;

/// Multiply-adds from which an image's channels are split between threads: 16K, about a µs of one core
/// (64K, the channel-lane kernel's, left the 6×6 planes of 144 and 192 channels on one thread; see
/// [`super::team_parallel`] for the measurement).
const SPLIT_WORK: usize = 1 << 14;

/// The most windows (input channels × kernel rows × tap groups) of [`VnniDense`]: they stay in registers.
const DENSE_WINDOWS: usize = 12;

/// Whether the kernels run on this CPU (AVX-512 F/BW/VL, VNNI, VBMI and VBMI2; not under `TPU_SDK_NO_AVX512=1`
/// or `TPU_SDK_NO_VNNI_PLANES=1`, which compare them with the other kernels on one machine).
pub(super) fn available() -> bool {
    static OK: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *OK.get_or_init(|| {
        super::packed_gemm::has_vnni()
            && std::is_x86_feature_detected!("avx512vbmi")
            && std::is_x86_feature_detected!("avx512vbmi2")
            && super::requantize::available()
            && std::env::var("TPU_SDK_NO_VNNI_PLANES").map_or(true, |v| v != "1")
    })
}

/// The padded byte planes of a convolution's input and the order of its output vectors.
#[derive(Debug)]
struct Planes {
    geom: Geom2,
    /// The buffer's length, with the slack that the dropped lanes read.
    pad_len: usize,
    /// The padding byte (`zp + 128`).
    pad_byte: u8,
    /// Where the inside of the padded plane starts (row `pt`, column `pl`), and per 64-byte chunk from there
    /// on, its bytes that are input (the rest padding).
    fill_start: usize,
    fill: Vec<u64>,
    /// Per output vector (in either order): where its window starts in the padded plane.
    at: Vec<usize>,
    /// Per block of four output vectors: the bytes of their 64 lanes that are outputs (rows: the lanes before
    /// `ow`; flat: also the columns before `ow`), which `vpcompressb` packs: the outputs of consecutive vectors
    /// are consecutive in the output plane in both orders.
    keep: Vec<u64>,
    /// Per (kernel row, tap group): its offset in the padded plane from a window's first byte.
    offs: Vec<usize>,
    /// `vpermb` indices: byte `4l + k` = `s·l + k·dw`.
    idx: [u8; 64],
}

impl Planes {
    /// The planes of geometry `g` for input zero point `zp` (of the i8-shifted input, as [`super::conv`]'s);
    /// `None` where a window of 16 pixels does not fit 64 bytes.
    fn new(g: &Geom2, zp: i32) -> Option<Planes> {
        if g.kh * g.kw == 0 || g.oh == 0 || g.ow == 0 || !(-128..=127).contains(&zp) || 15 * g.sw + 3 * g.dw >= 64 {
            return None;
        }
        let groups = g.kw.div_ceil(4);
        let ph = ((g.oh - 1) * g.sh + (g.kh - 1) * g.dh + 1).max(g.pt + g.ih);
        let pw = ((g.ow - 1) * g.sw + (g.kw - 1) * g.dw + 1).max(g.pl + g.iw);
        // lanes filled: rows of ow in vectors of 16, or ow of every pw in flat order
        let (row_fill, flat_fill) = (g.ow as f64 / (g.ow.div_ceil(16) * 16) as f64, g.ow as f64 / pw as f64);
        let flat = g.sh == g.sw && flat_fill > row_fill;
        let s = g.sw;
        // per vector: its window's start and the lanes that are outputs
        let (at, lanes): (Vec<usize>, Vec<u16>) = if flat {
            (0..flat_len(g, pw) / 16)
                .map(|v| (s * 16 * v, (0..16).filter(|l| (16 * v + l) % pw < g.ow && 16 * v + l < g.oh * pw).fold(0u16, |m, l| m | 1 << l)))
                .unzip()
        } else {
            let per_row = g.ow.div_ceil(16);
            (0..g.oh * per_row)
                .map(|v| {
                    let (oy, ox0) = (v / per_row, v % per_row * 16);
                    (oy * g.sh * pw + s * ox0, (0..16).filter(|l| ox0 + l < g.ow).fold(0u16, |m, l| m | 1 << l))
                })
                .unzip()
        };
        let keep = lanes.chunks(4).map(|b| b.iter().enumerate().fold(0u64, |m, (i, &l)| m | (l as u64) << (16 * i))).collect();
        let offs: Vec<usize> = (0..g.kh).flat_map(|ky| (0..groups).map(move |q| ky * g.dh * pw + 4 * q * g.dw)).collect();
        // the last vector's window (a block of four repeats its last vector)
        let last_window = at.last().copied().unwrap_or(0);
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
        Some(Planes { geom: *g, pad_len, pad_byte: (zp + 128) as u8, fill_start, fill, at, keep, offs, idx })
    }

    /// One channel's `kh·kw` weights as [`Planes::offs`]'s four-tap groups, four i8 in one i32 (0 past the
    /// kernel's width).
    fn pack(&self, wc: &[i16]) -> Vec<i32> {
        let g = &self.geom;
        let groups = g.kw.div_ceil(4);
        let mut w = Vec::with_capacity(self.offs.len());
        for ky in 0..g.kh {
            for q in 0..groups {
                let b = |k: usize| if 4 * q + k < g.kw { wc[ky * g.kw + 4 * q + k] as i8 as u8 } else { 0 };
                w.push(i32::from_le_bytes([b(0), b(1), b(2), b(3)]));
            }
        }
        w
    }

    /// `count` padded planes with their padding written where [`x86::fill`] does not write it: the rows above
    /// the inside and the slack after its last 64-byte chunk (the chunks write the side columns themselves).
    fn reset(&self, pads: &mut Vec<u8>, count: usize) {
        pads.resize(count * self.pad_len, self.pad_byte);
        let end = self.fill_start + 64 * self.fill.len();
        for pad in pads.chunks_exact_mut(self.pad_len) {
            pad[..self.fill_start].fill(self.pad_byte);
            pad[end..].fill(self.pad_byte);
        }
    }
}

/// A prepared depthwise convolution (depth multiplier 1) for [`VnniDepthwise::run`].
#[derive(Debug)]
pub(super) struct VnniDepthwise {
    c: usize,
    planes: Planes,
    /// Per channel, per (kernel row, tap group): four i8 weights in one i32 ([`Planes::pack`]).
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
    /// This thread's padded planes: two for the depthwise kernel (the next channel's and this one's), the
    /// input channels for the dense one.
    static PADS: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

impl VnniDepthwise {
    /// The kernel for `c` channels of weights `w16` (`[C][kh·kw]`, minus their zero point), `bias`,
    /// multipliers `m`, input zero point `zp` (of the i8-shifted input, as [`super::conv`]'s), channels below
    /// `neon_end` rounding the NEON way; `None` where it does not apply (weights outside i8, a window wider
    /// than 64 bytes). The CPU must run it ([`available`]).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn new(g: &Geom2, c: usize, w16: &[i16], bias: &[i32], m: &[Multiplier], neon_end: usize, zp: i32, zp_out: i32, range: (i32, i32)) -> Option<VnniDepthwise> {
        let kk = g.kh * g.kw;
        if c == 0 || w16.len() != c * kk || bias.len() < c || m.len() < c || w16.iter().any(|&v| !(-128..=127).contains(&v)) {
            return None;
        }
        let planes = Planes::new(g, zp)?;
        let w = w16.chunks_exact(kk).flat_map(|wc| planes.pack(wc)).collect();
        let bias = (0..c).map(|ch| bias[ch] - (zp + 128) * w16[ch * kk..(ch + 1) * kk].iter().map(|&v| v as i32).sum::<i32>()).collect();
        Some(VnniDepthwise { c, planes, w, bias, m: m[..c].to_vec(), neon_end, zp_out, range })
    }

    /// Image after image: `x` is `[n][c][ih][iw]` (shifted to i8 as [`super::conv`]'s input) in the planned
    /// geometry, `out` the `[n][c][oh][ow]` output bytes; from [`SPLIT_WORK`] multiply-adds an image's channels
    /// are split between the threads.
    pub(super) fn run(&self, x: &[i8], n: usize, out: &mut [u8]) {
        per_image(&self.planes, x, n, self.c, self.c, 1, out, &|xs, c0, ys| self.channels(xs, c0, ys));
    }

    /// The output planes `ys` of the channels from `c0` (as many as `ys` holds) of one image `xs`.
    fn channels(&self, xs: &[i8], c0: usize, ys: &mut [u8]) {
        let pl = &self.planes;
        let g = &pl.geom;
        let (plane, p, len) = (g.ih * g.iw, g.oh * g.ow, pl.pad_len);
        PADS.with(|pads| {
            let pads = &mut *pads.borrow_mut();
            pl.reset(pads, 2);
            let count = ys.len() / p;
            let input = |i: usize| &xs[(c0 + i) * plane..(c0 + i + 1) * plane];
            // SAFETY (each call): `new` was reached only where `available()` (AVX-512 F/BW/VL, VNNI, VBMI,
            // VBMI2); an input plane holds ih·iw bytes, each of the two pads pad_len bytes (every window read,
            // see `Planes::new`), `y` oh·ow bytes. The next channel's plane is written before this one's sums
            // read theirs: the sums' 64-byte loads would wait for the stores of a plane just written to reach
            // the cache
            unsafe { x86::fill(pl, input(0), &mut pads[..len]) };
            for (i, y) in ys.chunks_mut(p).enumerate() {
                if i + 1 < count {
                    let next = (i + 1) % 2;
                    unsafe { x86::fill(pl, input(i + 1), &mut pads[next * len..(next + 1) * len]) };
                }
                let cur = i % 2;
                unsafe { x86::depthwise_plane(self, c0 + i, &pads[cur * len..(cur + 1) * len], y) };
            }
        });
    }
}

/// A prepared CONV_2D of one group over a few input channels (a stem on an RGB image) for [`VnniDense::run`].
#[derive(Debug)]
pub(super) struct VnniDense {
    cin: usize,
    cout: usize,
    planes: Planes,
    /// Per output channel, per input channel and (kernel row, tap group): four i8 weights in one i32.
    w: Vec<i32>,
    /// Per output channel: `bias - (zp + 128)·Σw`.
    bias: Vec<i32>,
    m: Vec<Multiplier>,
    zp_out: i32,
    range: (i32, i32),
}

impl VnniDense {
    /// The kernel for weights `w` (`[O][C·kh·kw]`, i8 with zero point 0), `bias` with the input zero point
    /// folded in (`b - zp·Σw`, as [`super::conv`] prepares it), multipliers `m` (which
    /// round the NEON way, as CONV_2D's GEMM output stage), input zero point `zp` (i8-shifted); `None` where it
    /// does not apply (more than [`DENSE_WINDOWS`] windows, a window wider than 64 bytes). The CPU must run it
    /// ([`available`]).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn new(g: &Geom2, cin: usize, w: &[i8], bias: &[i32], m: &[Multiplier], zp: i32, zp_out: i32, range: (i32, i32)) -> Option<VnniDense> {
        let kk = g.kh * g.kw;
        let cout = bias.len();
        // a kernel narrower than 3 taps leaves most of each dot product's four bytes empty: the GEMM's is better
        if cin == 0 || cout == 0 || w.len() != cout * cin * kk || m.len() < cout || g.kw < 3 {
            return None;
        }
        let planes = Planes::new(g, zp)?;
        if cin * planes.offs.len() > DENSE_WINDOWS {
            return None;
        }
        let wide: Vec<i16> = w.iter().map(|&v| v as i16).collect();
        let packed = wide.chunks_exact(kk).flat_map(|wc| planes.pack(wc)).collect();
        let bias = (0..cout).map(|o| bias[o] - 128 * w[o * cin * kk..(o + 1) * cin * kk].iter().map(|&v| v as i32).sum::<i32>()).collect();
        Some(VnniDense { cin, cout, planes, w: packed, bias, m: m[..cout].to_vec(), zp_out, range })
    }

    /// Image after image: `x` is `[n][cin][ih][iw]` (i8-shifted) in the planned geometry, `out` the
    /// `[n][cout][oh][ow]` output bytes; from [`SPLIT_WORK`] multiply-adds an image's output channels are split
    /// between the threads (each gathers the windows itself).
    pub(super) fn run(&self, x: &[i8], n: usize, out: &mut [u8]) {
        per_image(&self.planes, x, n, self.cin, self.cout, self.cin, out, &|xs, o0, ys| self.outputs(xs, o0, ys));
    }

    /// The output planes `ys` of the output channels from `o0` (as many as `ys` holds) of one image `xs`.
    fn outputs(&self, xs: &[i8], o0: usize, ys: &mut [u8]) {
        let pl = &self.planes;
        let g = &pl.geom;
        let (plane, len) = (g.ih * g.iw, pl.pad_len);
        PADS.with(|pads| {
            let pads = &mut *pads.borrow_mut();
            pl.reset(pads, self.cin);
            for ci in 0..self.cin {
                // SAFETY: as in VnniDepthwise::channels (each pad pad_len bytes, each input plane ih·iw)
                unsafe { x86::fill(pl, &xs[ci * plane..(ci + 1) * plane], &mut pads[ci * len..(ci + 1) * len]) };
            }
            // SAFETY: the CPU runs the kernel (`new` only where `available()`); pads holds cin padded planes,
            // ys whole output planes
            unsafe { x86::dense_planes(self, o0, pads, ys) };
        });
    }
}

/// Image after image of `x` (`[n][cin][ih][iw]`): `f(image, o0, planes)` for the output planes of `cout`
/// channels in `out`, from [`SPLIT_WORK`] multiply-adds (`depth` input channels per output) split between the
/// threads by runs of output channels (`o0` the run's first).
#[allow(clippy::too_many_arguments)]
fn per_image(pl: &Planes, x: &[i8], n: usize, cin: usize, cout: usize, depth: usize, out: &mut [u8], f: &(dyn Fn(&[i8], usize, &mut [u8]) + Sync)) {
    let g = &pl.geom;
    let (plane, p) = (g.ih * g.iw, g.oh * g.ow);
    assert!(x.len() >= n * cin * plane && out.len() >= n * cout * p, "convolution buffers shorter than their shapes");
    let threads = spin_pool::threads();
    let split = threads > 1 && cout > 1 && cout * depth * p * g.kh * g.kw >= spin_pool::min_work(SPLIT_WORK);
    for b in 0..n {
        let xs = &x[b * cin * plane..(b + 1) * cin * plane];
        let ys = &mut out[b * cout * p..(b + 1) * cout * p];
        if split {
            let per = cout.div_ceil(threads);
            spin_pool::for_each_chunk_mut(ys, per * p, &|i, part| f(xs, i * per, part));
        } else {
            f(xs, 0, ys);
        }
    }
}

/// The length of a flat output (`pw` per output row), rounded up to whole vectors of 16.
fn flat_len(g: &Geom2, pw: usize) -> usize {
    ((g.oh - 1) * pw + g.ow).div_ceil(16) * 16
}

mod x86 {
    use super::super::fixedpoint::Multiplier;
    use super::super::requantize::neon64::{pack4, ByteRange, Neon64};
    use super::super::requantize::x86::requant;
    use super::{Planes, VnniDense, VnniDepthwise};
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
    /// chunk's input positions ([`Planes::fill`]), the padding's byte in the others, so that a plane of short
    /// rows takes a few stores, not one per row.
    ///
    /// # Safety
    /// The CPU has AVX-512 F/BW and VBMI2; `x` holds ih·iw bytes, `pad` `d.pad_len`.
    #[target_feature(enable = "avx512f,avx512bw,avx512vbmi2,popcnt")]
    pub(super) unsafe fn fill(d: &Planes, x: &[i8], pad: &mut [u8]) {
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

    /// One channel's output stage: `clamp(zp + scale(acc), lo, hi)` as 16 bytes (NEON rounding in 64-bit lanes
    /// where [`Neon64`] takes the multiplier).
    #[derive(Clone, Copy)]
    struct Stage {
        fast: Option<Neon64>,
        left: __m128i,
        right: i32,
        double: bool,
        mult: __m512i,
        zp: __m512i,
        lo: __m512i,
        hi: __m512i,
        range: ByteRange,
    }

    impl Stage {
        #[inline]
        #[target_feature(enable = "avx512f,avx512bw,avx512vl")]
        fn new(m: Multiplier, double: bool, zp: i32, (lo, hi): (i32, i32)) -> Stage {
            Stage {
                fast: if double { None } else { Neon64::new(m, zp, lo, hi) },
                left: _mm_cvtsi32_si128(m.shift.max(0)),
                right: (-m.shift).max(0),
                double,
                mult: _mm512_set1_epi64(m.multiplier as i64),
                zp: _mm512_set1_epi32(zp),
                lo: _mm512_set1_epi32(lo),
                hi: _mm512_set1_epi32(hi),
                range: ByteRange::new(lo, hi),
            }
        }

        /// The output stage of four vectors as 64 bytes in order ([`pack4`]).
        ///
        /// # Safety
        /// The CPU has AVX-512 F/BW/VL.
        #[inline]
        #[target_feature(enable = "avx512f,avx512bw,avx512vl")]
        unsafe fn bytes4(&self, a: [__m512i; 4]) -> __m512i {
            match &self.fast {
                Some(st) => st.bytes4(a),
                None => pack4(std::array::from_fn(|i| requant(a[i], self.left, self.right, self.double, self.mult, self.zp, self.lo, self.hi)), &self.range),
            }
        }

        /// # Safety
        /// The CPU has AVX-512 F/BW/VL.
        #[inline]
        #[target_feature(enable = "avx512f,avx512bw,avx512vl")]
        unsafe fn bytes(&self, a: __m512i) -> __m128i {
            _mm512_cvtepi32_epi8(match &self.fast {
                Some(st) => st.apply(a),
                None => requant(a, self.left, self.right, self.double, self.mult, self.zp, self.lo, self.hi),
            })
        }
    }

    /// Stores the bytes `r` of output vector `v` (its lanes that are outputs, packed) at `out`.
    ///
    /// # Safety
    /// The CPU has AVX-512 F/BW/VL and VBMI2; `out` has room for the vector's outputs.
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vbmi2,popcnt")]
    unsafe fn put(d: &Planes, v: usize, r: __m128i, out: *mut u8) -> usize {
        let m = (d.keep[v / 4] >> (16 * (v % 4))) as u16;
        let c = m.count_ones() as usize;
        _mm_mask_storeu_epi8(out as *mut i8, lanes(c), _mm_maskz_compress_epi8(m, r));
        c
    }

    /// Channel `ch`'s output plane `y` from its padded input plane `pad` ([`fill`]): vectors of 16 outputs,
    /// four at a time (four independent dot-product chains).
    ///
    /// # Safety
    /// The CPU has AVX-512 F/BW/VL, VNNI, VBMI and VBMI2; `pad` holds `pad_len` bytes, `y` oh·ow.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx512vbmi,avx512vbmi2,popcnt")]
    pub(super) unsafe fn depthwise_plane(d: &VnniDepthwise, ch: usize, pad: &[u8], y: &mut [u8]) {
        let pl = &d.planes;
        let g = &pl.geom;
        debug_assert!(pad.len() >= pl.pad_len && y.len() >= g.oh * g.ow);
        let nk = pl.offs.len();
        let w = &d.w[ch * nk..(ch + 1) * nk];
        let idx = _mm512_loadu_si512(pl.idx.as_ptr() as *const _);
        let bias = _mm512_set1_epi32(d.bias[ch]);
        let stage = Stage::new(d.m[ch], ch >= d.neon_end, d.zp_out, d.range);
        let (base, out) = (pad.as_ptr(), y.as_mut_ptr());
        let n = pl.at.len();
        let mut o = 0;
        for (b, &keep) in pl.keep.iter().enumerate() {
            let (v, k) = (4 * b, (n - 4 * b).min(4));
            let acc = sums(k, base, &pl.offs, w, idx, bias, std::array::from_fn(|i| pl.at[v + i.min(k - 1)]));
            // the four vectors' outputs are consecutive in the plane: packed together, one store
            let bytes = stage.bytes4(acc);
            if keep == !0 {
                _mm512_storeu_si512(out.add(o) as *mut _, bytes);
                o += 64;
                continue;
            }
            let c = keep.count_ones() as usize;
            _mm512_mask_storeu_epi8(out.add(o) as *mut i8, (1u64 << c) - 1, _mm512_maskz_compress_epi8(keep, bytes));
            o += c;
        }
    }

    /// The output planes `ys` of output channels `o0..` of [`VnniDense`] `d` from its padded input planes `pads`
    /// (`cin` of `pad_len` bytes).
    ///
    /// # Safety
    /// The CPU has AVX-512 F/BW/VL, VNNI, VBMI and VBMI2; `pads` holds `cin·pad_len` bytes, `ys` whole output
    /// planes of channels from `o0` below `cout`.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx512vbmi,avx512vbmi2,popcnt")]
    pub(super) unsafe fn dense_planes(d: &VnniDense, o0: usize, pads: &[u8], ys: &mut [u8]) {
        match d.cin * d.planes.offs.len() {
            1 => dense::<1>(d, o0, pads, ys),
            2 => dense::<2>(d, o0, pads, ys),
            3 => dense::<3>(d, o0, pads, ys),
            4 => dense::<4>(d, o0, pads, ys),
            5 => dense::<5>(d, o0, pads, ys),
            6 => dense::<6>(d, o0, pads, ys),
            7 => dense::<7>(d, o0, pads, ys),
            8 => dense::<8>(d, o0, pads, ys),
            9 => dense::<9>(d, o0, pads, ys),
            10 => dense::<10>(d, o0, pads, ys),
            11 => dense::<11>(d, o0, pads, ys),
            12 => dense::<12>(d, o0, pads, ys),
            nw => unreachable!("{nw} windows: VnniDense::new takes at most {}", super::DENSE_WINDOWS),
        }
    }

    /// [`dense_planes`] with its `NW` windows (input channels × kernel rows × tap groups) in registers.
    ///
    /// # Safety
    /// As [`dense_planes`]'s, with `NW` its windows.
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx512vbmi,avx512vbmi2,popcnt")]
    unsafe fn dense<const NW: usize>(d: &VnniDense, o0: usize, pads: &[u8], ys: &mut [u8]) {
        let pl = &d.planes;
        let g = &pl.geom;
        let (p, nk) = (g.oh * g.ow, pl.offs.len());
        let outs = ys.len() / p;
        debug_assert!(NW == d.cin * nk && pads.len() >= d.cin * pl.pad_len && o0 + outs <= d.cout);
        let idx = _mm512_loadu_si512(pl.idx.as_ptr() as *const _);
        // the input planes' offsets of every window from a vector's first byte
        let offs: [usize; NW] = std::array::from_fn(|q| q / nk * pl.pad_len + pl.offs[q % nk]);
        let stages: Vec<Stage> = (o0..o0 + outs).map(|oc| Stage::new(d.m[oc], false, d.zp_out, d.range)).collect();
        let (base, out) = (pads.as_ptr(), ys.as_mut_ptr());
        let mut o = 0;
        for (v, &at) in pl.at.iter().enumerate() {
            let win: [__m512i; NW] = std::array::from_fn(|q| _mm512_permutexvar_epi8(idx, _mm512_loadu_si512(base.add(at + offs[q]) as *const _)));
            let mut c = 0;
            for (i, stage) in stages.iter().enumerate() {
                let oc = o0 + i;
                let w = &d.w[oc * NW..(oc + 1) * NW];
                let mut acc = _mm512_set1_epi32(d.bias[oc]);
                for q in 0..NW {
                    acc = _mm512_dpbusd_epi32(acc, win[q], _mm512_set1_epi32(w[q]));
                }
                c = put(pl, v, stage.bytes(acc), out.add(i * p + o));
            }
            o += c;
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

#[cfg(test)]
mod tests {
    use super::super::fixedpoint::{mul_neon_rshl, quantize_multiplier};
    use super::*;

    /// [`VnniDense`] against a scalar convolution with the scalar NEON output stage: strides 1-3, dilation,
    /// asymmetric padding, kernels of 3 to 5 taps a row, 1 to 4 input channels, output channel counts that
    /// split unevenly between threads, i8 and u8 ranges, both output orders; on 1 and 2 threads.
    #[test]
    fn dense_planes_equal_a_scalar_convolution() {
        if !available() {
            return;
        }
        let mut s = 5u64;
        let mut rnd = move || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s
        };
        let cases = [
            // ih, iw, kh, kw, sh, sw, dh, dw, pt, pl, pb, pr, cin, cout
            [96, 96, 3, 3, 2, 2, 1, 1, 0, 0, 1, 1, 3, 16],
            [17, 23, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 3, 7],
            [6, 6, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 4, 5],
            [12, 15, 3, 5, 3, 3, 1, 2, 2, 1, 0, 2, 2, 9],
            [9, 40, 4, 4, 2, 1, 2, 1, 1, 2, 2, 1, 1, 33],
        ];
        for (ci, [ih, iw, kh, kw, sh, sw, dh, dw, pt, pl, pb, pr, cin, cout]) in cases.into_iter().enumerate() {
            let oh = (ih + pt + pb - (kh - 1) * dh - 1) / sh + 1;
            let ow = (iw + pl + pr - (kw - 1) * dw - 1) / sw + 1;
            let g = Geom2 { ih, iw, oh, ow, kh, kw, sh, sw, dh, dw, pt, pl };
            let (n, kk) = (2, cin * kh * kw);
            let x: Vec<i8> = (0..n * cin * ih * iw).map(|_| rnd() as i8).collect();
            let w: Vec<i8> = (0..cout * kk).map(|_| rnd() as i8).collect();
            let zp = rnd() as i8 as i32;
            let raw: Vec<i32> = (0..cout).map(|_| (rnd() % 200_001) as i32 - 100_000).collect();
            // the bias as conv.rs prepares it: the input zero point folded in
            let bias: Vec<i32> = (0..cout).map(|o| raw[o] - zp * w[o * kk..(o + 1) * kk].iter().map(|&v| v as i32).sum::<i32>()).collect();
            let scales = [1e-5, 3.1e-4, 0.0021, 0.047, 0.125, 0.77, 1.9];
            let m: Vec<Multiplier> = (0..cout).map(|_| quantize_multiplier(scales[(rnd() % scales.len() as u64) as usize])).collect();
            let (zp_out, range) = if ci % 2 == 0 { (rnd() as i8 as i32, (-128, 120)) } else { ((rnd() % 256) as i32, (3, 255)) };
            let d = VnniDense::new(&g, cin, &w, &bias, &m, zp, zp_out, range).expect("the case fits the kernel");
            for threads in [1, 2] {
                let mut got = vec![0u8; n * cout * oh * ow];
                rayon::ThreadPoolBuilder::new().num_threads(threads).build().expect("a thread pool").install(|| d.run(&x, n, &mut got));
                for b in 0..n {
                    for o in 0..cout {
                        for oy in 0..oh {
                            for ox in 0..ow {
                                let mut acc = raw[o];
                                for c in 0..cin {
                                    for ky in 0..kh {
                                        for kx in 0..kw {
                                            let iy = (oy * sh + ky * dh) as isize - pt as isize;
                                            let ix = (ox * sw + kx * dw) as isize - pl as isize;
                                            if iy >= 0 && (iy as usize) < ih && ix >= 0 && (ix as usize) < iw {
                                                let xv = x[((b * cin + c) * ih + iy as usize) * iw + ix as usize] as i32;
                                                acc += (xv - zp) * w[o * kk + (c * kh + ky) * kw + kx] as i32;
                                            }
                                        }
                                    }
                                }
                                let want = (mul_neon_rshl(acc, m[o]) + zp_out).clamp(range.0, range.1);
                                let at = ((b * cout + o) * oh + oy) * ow + ox;
                                let got = if range.0 < 0 { got[at] as i8 as i32 } else { got[at] as i32 };
                                assert_eq!(got, want, "case {ci} threads {threads} b{b} o{o} y{oy} x{ox}");
                            }
                        }
                    }
                }
            }
        }
    }
}
