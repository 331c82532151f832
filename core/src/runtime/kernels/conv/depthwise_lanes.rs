//! f32 depthwise convolutions with small output planes, the channels in the vector lanes. The direct kernel
//! ([`super::depthwise`]) vectorises over one channel's output pixels: a MobileNet's late layers (3×3 to 12×12
//! outputs, hundreds of channels) then spend more on each channel's setup (copying its padded plane, the calls)
//! than on the arithmetic. Here an image's input is transposed once to `[pixel][channel]` (8×8 blocks of
//! unpacks and shuffles), each output pixel sums its taps over 8 channels per vector with FMA (taps over the
//! padding skipped: their products are 0), and the result is transposed back to NCHW, clamped as it is stored
//! (ReLU, ReLU6, Clip) or with another activation (SiLU) run on each channel's row. The weights
//! `[tap][channel]` are laid out once, when the session is planned.
//!
//! x86-64 with AVX2 + FMA, 2-D, depth multiplier 1, output planes up to [`max_pixels`] pixels; others keep the
//! direct kernel. Sums in tap order from the bias, one rounding per FMA: within a few ulps of the direct
//! kernel (tested against a naive loop).

use std::cell::RefCell;

use super::super::matmul::bias_act;
use super::super::{PreparedKernel, Scratch};
use super::pixel_taps::{PixelTaps, Window2};
use super::{constant_f32_conv, is_depthwise, prepared_operands};
use crate::ir::ops::conv::ConvPlan;
use crate::ir::{ConvAttrs, Graph, Tensor};
use crate::runtime::spin_pool;

/// Output planes up to this many pixels take this kernel.
const MAX_PIXELS: usize = 144;

/// Fewest multiply-adds for which a run splits its channels between threads (a MobileNetV2's 960-channel 7×7
/// layers, 420K, took as long at 2 threads as at 1 when it did not).
const PAR_MIN_MACS: usize = 1 << 16;

/// [`MAX_PIXELS`], or `TPU_SDK_DW_LANES_MAX_PIXELS` (0: never) to compare the kernels on one machine (the same
/// variable as the int8 kernel's).
fn max_pixels() -> usize {
    static MAX: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *MAX.get_or_init(|| std::env::var("TPU_SDK_DW_LANES_MAX_PIXELS").ok().and_then(|v| v.parse().ok()).map_or(MAX_PIXELS, |v: usize| v.min(MAX_PIXELS * 4)))
}

/// A prepared depthwise convolution.
#[derive(Debug)]
struct DepthwiseLanes {
    attrs: ConvAttrs,
    w_shape: Vec<usize>,
    /// Channels, and rounded up to the 8 lanes.
    c: usize,
    cp: usize,
    /// `[tap][cp]` weights (0 past `c`).
    w: Vec<f32>,
    /// The planned plane's geometry, and its output pixels' taps inside the input.
    window: Window2,
    taps: PixelTaps,
}

thread_local! {
    /// The transposed input and output `[pixel][cp]` of this thread.
    static BUFS: RefCell<(Vec<f32>, Vec<f32>)> = const { RefCell::new((Vec::new(), Vec::new())) };
}

/// The prepared kernel of Conv node `n` when it is a 2-D f32 depthwise convolution (multiplier 1) with constant
/// weights and a small output plane, on a CPU with AVX2 and FMA.
pub(in crate::runtime::kernels) fn prepare(g: &Graph, n: usize) -> Option<Box<dyn PreparedKernel>> {
    let (attrs, p, w, w_shape) = constant_f32_conv(g, n)?;
    if w_shape.len() != 4 || !takes(&p) {
        return None;
    }
    let geo = &p.geom;
    let (c, kk) = (p.c, geo.k_size());
    let cp = c.div_ceil(8) * 8;
    let mut wl = vec![0f32; kk * cp];
    for ch in 0..c {
        for t in 0..kk {
            wl[t * cp + ch] = *w.get(ch * kk + t)?;
        }
    }
    let window = window(&p.geom);
    Some(Box::new(DepthwiseLanes { attrs: attrs.clone(), w_shape: w_shape.to_vec(), c, cp, w: wl, window, taps: PixelTaps::new(&window, cp) }))
}

/// Whether this kernel takes the plan (the weights aside): a 2-D depthwise convolution with depth multiplier 1
/// and an output plane of 1 to [`max_pixels`] pixels, on a CPU with AVX2 and FMA.
pub(super) fn takes(p: &ConvPlan) -> bool {
    let geo = &p.geom;
    is_depthwise(p) && p.m == p.c && p.group == p.c && geo.rank == 2 && super::super::numeric::vector::avx2_fma() && (1..=max_pixels()).contains(&geo.out_size())
}

/// The 2-D window of a plan's geometry.
pub(super) fn window(g: &crate::ir::ops::conv::Geom) -> Window2 {
    Window2 { ih: g.inp[1], iw: g.inp[2], oh: g.out[1], ow: g.out[2], k: (g.k[1], g.k[2]), s: (g.s[1], g.s[2]), d: (g.d[1], g.d[2]), pad: (g.pb[1], g.pb[2]) }
}

impl PreparedKernel for DepthwiseLanes {
    fn run(&self, inputs: &[Option<&Tensor>], outputs: &mut [Tensor], _scratch: &mut Scratch) -> Result<(), String> {
        let fits = |p: &ConvPlan| p.c == self.c && p.m == self.c && p.geom.rank == 2 && is_depthwise(p) && window(&p.geom) == self.window;
        let Some((p, xv, bv, y)) = prepared_operands(inputs, outputs, &self.w_shape, &self.attrs, fits)? else { return Ok(()) };
        let (plane, pix) = (p.geom.in_size(), p.geom.out_size());
        let cp = self.cp;
        let mut bias = vec![0f32; cp];
        if let Some(b) = bv {
            bias[..self.c].copy_from_slice(b);
        }
        let blocks = cp / 8;
        let threads = spin_pool::threads();
        let wide = super::super::numeric::vector::avx512();
        // tasks of whole groups of the accumulators `pixels` keeps (four vectors: 32 channels, 64 with AVX-512),
        // two per thread
        let group = if wide { 8 } else { 4 };
        let per = if threads > 1 && self.c * self.taps.taps.len() >= spin_pool::min_work(PAR_MIN_MACS) {
            blocks.div_ceil(2 * threads).div_ceil(group).max(1) * group
        } else {
            blocks
        };
        // a clamp (ReLU, ReLU6, Clip) is applied to the transposed vectors as they are stored, as the row kernel
        // clamps in registers (a pass over each channel's short row after the transposition took 5-10% here)
        let clamp = self.attrs.activation.and_then(|a| a.clamp_bounds());
        for b in 0..p.n {
            let xs = &xv[b * self.c * plane..(b + 1) * self.c * plane];
            let ys = &mut y[b * self.c * pix..(b + 1) * self.c * pix];
            spin_pool::for_each_chunk_mut(ys, per * 8 * pix, &|t, yc| {
                let (b0, c_lo) = (t * per, t * per * 8);
                let c_hi = c_lo + yc.len() / pix;
                let b1 = c_hi.div_ceil(8);
                BUFS.with(|bufs| {
                    let (xt, yt) = &mut *bufs.borrow_mut();
                    xt.resize(plane * cp, 0.0);
                    yt.resize(pix * cp, 0.0);
                    // SAFETY: the CPU has AVX2 and FMA (prepare checked); xs holds c·plane elements and yc the
                    // channels c_lo..c_hi (≤ c) of pix each (checked above), xt plane·cp and yt pix·cp (resized
                    // above), every tap offset + cp ≤ their lengths; the channel range lies in 0..cp
                    unsafe {
                        x86::to_lanes(xs, self.c, plane, xt, cp, (c_lo, b1 * 8));
                        if wide {
                            x86::pixels_512(&self.w, &bias, &self.taps, xt, yt, cp, (b0, b1));
                        } else {
                            x86::pixels(&self.w, &bias, &self.taps, xt, yt, cp, (b0, b1));
                        }
                        x86::from_lanes(yt, cp, yc, (c_lo, c_hi), pix, clamp);
                    }
                });
                if clamp.is_none() && self.attrs.activation.is_some() {
                    for row in yc.chunks_exact_mut(pix) {
                        bias_act(row, None, self.attrs.activation);
                    }
                }
            });
        }
        Ok(())
    }

    fn holds_input(&self, k: usize) -> bool {
        k == 1
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    /// The 8×8 transpose of 8 rows of 8 floats (unpacks, shuffles, then the 128-bit halves exchanged).
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn transpose8(r: &[__m256; 8]) -> [__m256; 8] {
        let t = [
            _mm256_unpacklo_ps(r[0], r[1]),
            _mm256_unpackhi_ps(r[0], r[1]),
            _mm256_unpacklo_ps(r[2], r[3]),
            _mm256_unpackhi_ps(r[2], r[3]),
            _mm256_unpacklo_ps(r[4], r[5]),
            _mm256_unpackhi_ps(r[4], r[5]),
            _mm256_unpacklo_ps(r[6], r[7]),
            _mm256_unpackhi_ps(r[6], r[7]),
        ];
        let s = [
            _mm256_shuffle_ps::<0x44>(t[0], t[2]),
            _mm256_shuffle_ps::<0xEE>(t[0], t[2]),
            _mm256_shuffle_ps::<0x44>(t[1], t[3]),
            _mm256_shuffle_ps::<0xEE>(t[1], t[3]),
            _mm256_shuffle_ps::<0x44>(t[4], t[6]),
            _mm256_shuffle_ps::<0xEE>(t[4], t[6]),
            _mm256_shuffle_ps::<0x44>(t[5], t[7]),
            _mm256_shuffle_ps::<0xEE>(t[5], t[7]),
        ];
        [
            _mm256_permute2f128_ps::<0x20>(s[0], s[4]),
            _mm256_permute2f128_ps::<0x20>(s[1], s[5]),
            _mm256_permute2f128_ps::<0x20>(s[2], s[6]),
            _mm256_permute2f128_ps::<0x20>(s[3], s[7]),
            _mm256_permute2f128_ps::<0x31>(s[0], s[4]),
            _mm256_permute2f128_ps::<0x31>(s[1], s[5]),
            _mm256_permute2f128_ps::<0x31>(s[2], s[6]),
            _mm256_permute2f128_ps::<0x31>(s[3], s[7]),
        ]
    }

    /// The mask of the first `n` (≤ 8) lanes for `maskload`/`maskstore`.
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn first(n: usize) -> __m256i {
        _mm256_cmpgt_epi32(_mm256_set1_epi32(n.min(8) as i32), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7))
    }

    /// `xt[pix·cp + ch] = x[ch·p + pix]` (`x` is `[c][p]`) for the channels `ch` in `chans`; those from `c` on get 0.
    ///
    /// # Safety
    /// AVX2 + FMA; `x` holds `c·p`, `xt` `p·cp` elements; `cp` is a multiple of 8, at least `c`; `chans` lies in
    /// `0..cp` and starts at a multiple of 8.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn to_lanes(x: &[f32], c: usize, p: usize, xt: &mut [f32], cp: usize, chans: (usize, usize)) {
        debug_assert!(x.len() >= c * p && xt.len() >= p * cp && cp.is_multiple_of(8) && cp >= c && chans.1 <= cp);
        for c0 in (chans.0..chans.1).step_by(8) {
            for p0 in (0..p).step_by(8) {
                let m = first(p - p0);
                let mut rows = [_mm256_setzero_ps(); 8];
                for (i, row) in rows.iter_mut().enumerate().take(c.saturating_sub(c0).min(8)) {
                    *row = _mm256_maskload_ps(x.as_ptr().add((c0 + i) * p + p0), m);
                }
                let cols = transpose8(&rows);
                for (j, col) in cols.iter().enumerate().take((p - p0).min(8)) {
                    _mm256_storeu_ps(xt.as_mut_ptr().add((p0 + j) * cp + c0), *col);
                }
            }
        }
    }

    /// `y[(ch − chans.0)·p + pix] = yt[pix·cp + ch]` for the channels `ch` in `chans` (`y` holds those rows), each
    /// value then `min(max(v, lo), hi)` with `clamp` (the row kernel's clamp: a NaN becomes lo).
    ///
    /// # Safety
    /// AVX2 + FMA; `yt` holds `p·cp` elements, `y` `p` per channel of `chans`; `cp` is a multiple of 8, `chans`
    /// lies in `0..cp` and starts at a multiple of 8.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn from_lanes(yt: &[f32], cp: usize, y: &mut [f32], chans: (usize, usize), p: usize, clamp: Option<(f32, f32)>) {
        let bounds = clamp.map(|(lo, hi)| (_mm256_set1_ps(lo), _mm256_set1_ps(hi)));
        let (lo, c) = chans;
        debug_assert!(yt.len() >= p * cp && y.len() >= (c - lo) * p && cp.is_multiple_of(8) && cp >= c);
        for c0 in (lo..c).step_by(8) {
            for p0 in (0..p).step_by(8) {
                let mut rows = [_mm256_setzero_ps(); 8];
                for (i, row) in rows.iter_mut().enumerate().take((p - p0).min(8)) {
                    *row = _mm256_loadu_ps(yt.as_ptr().add((p0 + i) * cp + c0));
                }
                let n = (p - p0).min(8);
                let mut chans = transpose8(&rows);
                if let Some((lo, hi)) = bounds {
                    for ch in chans.iter_mut() {
                        *ch = _mm256_min_ps(_mm256_max_ps(*ch, lo), hi);
                    }
                }
                for (j, ch) in chans.iter().enumerate().take((c - c0).min(8)) {
                    let dst = y.as_mut_ptr().add((c0 - lo + j) * p + p0);
                    if n == 8 {
                        _mm256_storeu_ps(dst, *ch);
                    } else {
                        // not `vmaskmovps` to memory: ~20 cycles a store on AMD Zen 3
                        let mut lanes = [0f32; 8];
                        _mm256_storeu_ps(lanes.as_mut_ptr(), *ch);
                        std::ptr::copy_nonoverlapping(lanes.as_ptr(), dst, n);
                    }
                }
            }
        }
    }

    /// `yt[pix][ch] = bias[ch] + Σ_taps w[tap][ch] · xt[in][ch]` for the 8-channel blocks in `blocks`, 8 channels
    /// per vector, four blocks at a time (independent FMA chains), over each pixel's taps inside the input.
    ///
    /// # Safety
    /// AVX2 + FMA; every tap's offsets plus `cp` lie inside `xt` and `w`, `yt` holds (pixels)·`cp`, `bias` `cp`
    /// elements; `cp` is a multiple of 8 and `blocks` lies in `0..cp / 8`.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn pixels(w: &[f32], bias: &[f32], pt: &super::PixelTaps, xt: &[f32], yt: &mut [f32], cp: usize, blocks: (usize, usize)) {
        let (taps, ends) = (&pt.taps, &pt.ends);
        debug_assert!(blocks.1 <= cp / 8);
        let (mut cb, blocks) = blocks;
        while cb < blocks {
            let nb = (blocks - cb).min(4);
            let c0 = cb * 8;
            let (xb, wb) = (xt.as_ptr().add(c0), w.as_ptr().add(c0));
            let mut start = 0;
            for (pix, &end) in ends.iter().enumerate() {
                let mut acc = [_mm256_setzero_ps(); 4];
                for (k, a) in acc.iter_mut().enumerate().take(nb) {
                    *a = _mm256_loadu_ps(bias.as_ptr().add(c0 + 8 * k));
                }
                for &(xo, wo) in &taps[start..end] {
                    for (k, a) in acc.iter_mut().enumerate().take(nb) {
                        *a = _mm256_fmadd_ps(_mm256_loadu_ps(xb.add(xo + 8 * k)), _mm256_loadu_ps(wb.add(wo + 8 * k)), *a);
                    }
                }
                start = end;
                for (k, a) in acc.iter().enumerate().take(nb) {
                    _mm256_storeu_ps(yt.as_mut_ptr().add(pix * cp + c0 + 8 * k), *a);
                }
            }
            cb += nb;
        }
    }

    /// [`pixels`] with 16-lane vectors: four of them (64 channels) per pass, the last pass's partial vectors
    /// masked (the channel range is whole 8-channel blocks). Each output is the same FMA chain in tap order from
    /// the bias, so the same bits as [`pixels`].
    ///
    /// # Safety
    /// As for [`pixels`], and the CPU has AVX-512F.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn pixels_512(w: &[f32], bias: &[f32], pt: &super::PixelTaps, xt: &[f32], yt: &mut [f32], cp: usize, blocks: (usize, usize)) {
        debug_assert!(blocks.1 <= cp / 8);
        let (mut c0, c_end) = (blocks.0 * 8, blocks.1 * 8);
        while c0 < c_end {
            let n = (c_end - c0).min(64);
            if n == 64 {
                // SAFETY: forwarded; 64 channels from c0 lie inside each row of cp.
                unsafe { pixels_512_pass::<false>(w, bias, pt, xt, yt, cp, c0, [u16::MAX; 4]) };
            } else {
                let masks = std::array::from_fn(|k| ((1u32 << n.saturating_sub(16 * k).min(16)) - 1) as u16);
                // SAFETY: forwarded; the masks cover the n channels from c0 only, inside each row of cp.
                unsafe { pixels_512_pass::<true>(w, bias, pt, xt, yt, cp, c0, masks) };
            }
            c0 += n;
        }
    }

    /// One pass of [`pixels_512`] over the channels from `c0` in `masks` (16 lanes each; all four full when not
    /// `MASKED`).
    ///
    /// # Safety
    /// As for [`pixels_512`]; the masked lanes lie inside each row of `cp` values from `c0`.
    #[inline]
    #[target_feature(enable = "avx512f")]
    #[allow(clippy::too_many_arguments)]
    unsafe fn pixels_512_pass<const MASKED: bool>(w: &[f32], bias: &[f32], pt: &super::PixelTaps, xt: &[f32], yt: &mut [f32], cp: usize, c0: usize, masks: [u16; 4]) {
        let (taps, ends) = (&pt.taps, &pt.ends);
        let nv = if MASKED { masks.iter().filter(|&&m| m != 0).count() } else { 4 };
        // SAFETY (loads and stores): the lanes read and written lie in the rows of cp values from c0 (contract).
        let load = |p: *const f32, k: usize| unsafe { if MASKED { _mm512_maskz_loadu_ps(masks[k], p) } else { _mm512_loadu_ps(p) } };
        let (xb, wb) = (xt.as_ptr().add(c0), w.as_ptr().add(c0));
        let mut start = 0;
        for (pix, &end) in ends.iter().enumerate() {
            let mut acc = [_mm512_setzero_ps(); 4];
            for (k, a) in acc.iter_mut().enumerate().take(nv) {
                *a = load(bias.as_ptr().add(c0 + 16 * k), k);
            }
            for &(xo, wo) in &taps[start..end] {
                for (k, a) in acc.iter_mut().enumerate().take(nv) {
                    *a = _mm512_fmadd_ps(load(xb.add(xo + 16 * k), k), load(wb.add(wo + 16 * k), k), *a);
                }
            }
            start = end;
            for (k, a) in acc.iter().enumerate().take(nv) {
                let dst = yt.as_mut_ptr().add(pix * cp + c0 + 16 * k);
                if MASKED {
                    _mm512_mask_storeu_ps(dst, masks[k], *a);
                } else {
                    _mm512_storeu_ps(dst, *a);
                }
            }
        }
    }
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use super::super::tests::{prepared_and_ordinary, rnd};
    use crate::ir::infer::infer_graph;
    use crate::ir::{Activation, AutoPad, ConvAttrs, DType, Graph, Op, Tensor};
    use crate::runtime::CpuEval;

    /// The channel-lane kernel against the direct kernel on the same node, on 1 and 2 threads: channel counts
    /// around the 8 lanes and the 4-block groups, channels split between threads, strides, dilations,
    /// asymmetric pads, 5×5 and 1×3 kernels, a batch of 2, with and without bias and activations; a depth
    /// multiplier and large planes are declined.
    #[test]
    fn channel_lanes_equal_the_direct_kernel() {
        if !crate::runtime::kernels::numeric::vector::avx2_fma() {
            return;
        }
        let attrs = |k: [usize; 2], s: usize, d: usize, pads: [usize; 4], group: usize, act| ConvAttrs {
            kernel_shape: k.to_vec(),
            strides: vec![s; 2],
            dilations: vec![d; 2],
            pads: pads.to_vec(),
            auto_pad: AutoPad::NotSet,
            group,
            activation: act,
        };
        let cases = vec![
            (vec![1, 336, 3, 3], attrs([3, 3], 1, 1, [1, 1, 1, 1], 336, Some(Activation::Relu6)), true),
            (vec![1, 96, 12, 12], attrs([3, 3], 2, 1, [0, 0, 1, 1], 96, Some(Activation::Clip { min: 0.0, max: 6.0 })), true),
            (vec![2, 13, 7, 9], attrs([5, 5], 1, 1, [2, 2, 2, 2], 13, None), false),
            (vec![1, 40, 8, 8], attrs([3, 3], 1, 2, [2, 1, 0, 2], 40, Some(Activation::Silu)), true),
            (vec![1, 3, 5, 11], attrs([1, 3], 1, 1, [0, 1, 0, 1], 3, Some(Activation::Relu)), true),
            (vec![1, 72, 1, 1], attrs([3, 3], 1, 1, [1, 1, 1, 1], 72, None), true),
            // enough work to split the channels between two threads: 32-channel groups, a partial last group
            (vec![1, 970, 7, 7], attrs([3, 3], 1, 1, [1, 1, 1, 1], 970, Some(Activation::Relu6)), true),
            (vec![2, 100, 9, 9], attrs([3, 3], 1, 1, [1, 1, 1, 1], 100, Some(Activation::Silu)), false),
        ];
        for (seed, (xs, a, with_bias)) in cases.into_iter().enumerate() {
            let ws = [xs[1], 1, a.kernel_shape[0], a.kernel_shape[1]];
            for threads in [1, 2] {
                let (got, want) = prepared_and_ordinary(&xs, &ws, &a, with_bias, seed as u64, super::prepare, threads);
                for (i, (p, q)) in got.as_f32().unwrap().iter().zip(want.as_f32().unwrap()).enumerate() {
                    assert!((p - q).abs() <= 1e-5 * (1.0 + q.abs()), "case {seed}, {threads} threads: element {i}: {p} vs {q}");
                }
            }
        }
        // a depth multiplier of 2, and a plane over the limit: declined
        for (xs, ws, group) in [(vec![1, 8, 6, 6], vec![16, 1, 3, 3], 8), (vec![1, 8, 48, 48], vec![8, 1, 3, 3], 8)] {
            let mut g = Graph::new("dw");
            let x = g.add_input("x", DType::F32, xs);
            let w = g.add_constant("w", Tensor::from_f32(ws.clone(), rnd(ws.iter().product(), 3)));
            let y = g.add_value("y", DType::F32, vec![]);
            g.add_node("conv", Op::Conv(attrs([3, 3], 1, 1, [1, 1, 1, 1], group, None)), vec![Some(x), Some(w), None], vec![y]);
            g.outputs.push(y);
            infer_graph(&mut g, &CpuEval).unwrap();
            assert!(super::prepare(&g, 0).is_none());
        }
    }
}
