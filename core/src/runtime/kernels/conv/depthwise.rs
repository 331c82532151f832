//! Depthwise convolution (one input channel per group, any channel multiplier) over 1-D/2-D inputs.
//!
//! A direct loop per output plane. When the conv pads, each input plane is first copied into a
//! zero-bordered plane in a per-thread scratch slice (borders zeroed once per call), so every output
//! pixel is an interior pixel: no bounds tests at all in the loops. 3×3 and 5×5 kernels (the
//! MobileNet/EfficientNet cases) then run a fused loop over all taps, on x86-64 compiled a second time for
//! AVX2+FMA and picked at run time:
//! * stride 1: per output row, or for narrow planes over the whole plane as one row (see [`plane`]);
//! * stride 2: the copy splits the padded plane into its four row/column parity sub-planes, after which
//!   every tap reads a contiguous run of one sub-plane (polyphase form), again over the whole plane.
//!
//! Other kernels accumulate one tap at a time. Planes are split into one contiguous range per thread.

use crate::runtime::spin_pool;

use super::super::matmul::{bias_act, threads};
use super::super::numeric::Real;
use super::ConvPlan;
use crate::ir::Activation;

/// Work (multiply-adds) below which the conv runs on the calling thread.
const PAR_MIN_MACS: usize = 1 << 15;

/// Runs a depthwise conv; sizes were checked by the caller (`x`: [N, C, H, W], `w`: [M, 1, kh, kw]).
pub(super) fn run<T: Real>(p: &ConvPlan, x: &[T], w: &[T], b: Option<&[T]>, act: Option<Activation>, y: &mut [T], scratch: &mut Vec<T>) {
    let g = &p.geom;
    let (h, wd) = (g.inp[1], g.inp[2]);
    let (oh, ow) = (g.out[1], g.out[2]);
    let (pt, pl) = (g.pb[1], g.pb[2]);
    // Padded plane: begin pads, then room for the last window (never smaller than the input).
    let hp = (h + pt).max((oh - 1) * g.s[1] + (g.k[1] - 1) * g.d[1] + 1);
    let wp = (wd + pl).max((ow - 1) * g.s[2] + (g.k[2] - 1) * g.d[2] + 1);
    let (kh, kw) = (g.k[1], g.k[2]);
    let poly = g.s[1] == 2 && g.s[2] == 2 && g.d[1] == 1 && g.d[2] == 1 && kh == kw && (kh == 3 || kh == 5);
    let direct = !poly && pt == 0 && pl == 0 && hp == h && wp == wd;
    // Polyphase sub-plane size.
    let (hq, wq) = (hp.div_ceil(2), wp.div_ceil(2));
    let (plane_in, plane_out, ks) = (g.in_size(), g.out_size(), g.k_size());
    let planes = p.n * p.m;
    let lanes = if threads() > 1 && planes * plane_out * ks >= spin_pool::min_work(PAR_MIN_MACS) { threads().min(planes) } else { 1 };
    let per_lane = planes.div_ceil(lanes);
    // Per-lane scratch: the padded plane (unless the input is used in place), then the flat output rows.
    let pad_len = if poly { 4 * hq * wq } else if direct { 0 } else { hp * wp };
    let buf_len = pad_len + oh * wp.max(2 * wq);
    if scratch.len() < lanes * buf_len {
        scratch.resize(lanes * buf_len, T::ZERO);
    }
    let bufs = &mut scratch[..lanes * buf_len];
    let fma = fma_available();
    let lane = |l: usize, ys: &mut [T], buf: &mut [T]| {
        let (pad, flat) = buf.split_at_mut(pad_len);
        pad.fill(T::ZERO);
        for (k, yp) in ys.chunks_mut(plane_out).enumerate() {
            let idx = l * per_lane + k;
            let mo = idx % p.m;
            let xin = &x[(idx / p.m * p.c + mo / p.mg()) * plane_in..][..plane_in];
            let (wk, bias) = (&w[mo * ks..][..ks], b.map_or(T::ZERO, |b| b[mo]));
            if poly {
                polyphase_copy(xin, wd, pt, pl, hq, wq, pad);
                poly_plane(pad, hq, wq, wk, bias, g, act, yp, flat, fma);
                continue;
            }
            let src = if direct {
                xin
            } else {
                for (iy, xr) in xin.chunks_exact(wd).enumerate() {
                    pad[(iy + pt) * wp + pl..][..wd].copy_from_slice(xr);
                }
                &*pad
            };
            plane(src, wp, wk, bias, g, act, yp, flat, fma);
        }
    };
    if lanes == 1 {
        lane(0, y, bufs);
    } else {
        spin_pool::for_each_chunk_mut2(y, per_lane * plane_out, bufs, buf_len, &lane);
    }
}

/// One output plane of a stride-2 conv from the parity sub-planes (`hq × wq` each) of the padded input.
///
/// Output (oy, ox) is flat index `j = oy·wq + ox`; tap (ky, kx) reads sub-plane `2·(ky % 2) + kx % 2` at
/// `j + (ky / 2)·wq + kx / 2`, a contiguous run for every tap. The `wq − ow` values per row past the output
/// width are computed into `flat` and dropped.
#[allow(clippy::too_many_arguments)]
fn poly_plane<T: Real>(sub: &[T], hq: usize, wq: usize, w: &[T], bias: T, g: &super::Geom, act: Option<Activation>, y: &mut [T], flat: &mut [T], fma: bool) {
    let (oh, ow, k) = (g.out[1], g.out[2], g.k[1]);
    let n = (oh - 1) * wq + ow;
    let out = &mut flat[..n];
    let tap = |ky: usize, kx: usize| &sub[((ky & 1) * 2 + (kx & 1)) * hq * wq + (ky >> 1) * wq + (kx >> 1)..];
    if k == 3 {
        taps::<T, 9>(std::array::from_fn(|t| tap(t / 3, t % 3)), w, bias, out, fma);
    } else {
        taps::<T, 25>(std::array::from_fn(|t| tap(t / 5, t % 5)), w, bias, out, fma);
    }
    for (yrow, frow) in y.chunks_exact_mut(ow).zip(flat.chunks(wq)) {
        yrow.copy_from_slice(&frow[..ow]);
    }
    bias_act(y, None, act);
}

/// One output plane from a (padded) input plane `src` of row length `wp` in which every window fits.
///
/// Narrow stride-1 planes are computed "flat": the plane as one long row of pitch `wp` (output pixel
/// (oy, ox) is flat index `oy·wp + ox`, reading `src[oy·wp + ox + ky·wp + kx]`), which gives the vector
/// loop long runs at the cost of `wp − ow` discarded values per row, written to `flat`.
#[allow(clippy::too_many_arguments)]
fn plane<T: Real>(src: &[T], wp: usize, w: &[T], bias: T, g: &super::Geom, act: Option<Activation>, y: &mut [T], flat: &mut [T], fma: bool) {
    let (oh, ow, kh, kw) = (g.out[1], g.out[2], g.k[1], g.k[2]);
    let (sh, sw, dh, dw) = (g.s[1], g.s[2], g.d[1], g.d[2]);
    let row = |r: usize| &src[r * wp..][..wp];
    if sh == 1 && sw == 1 && ow < 64 && dh == 1 && dw == 1 && kh == kw && (kh == 3 || kh == 5) {
        let n = (oh - 1) * wp + ow;
        let out = &mut flat[..n];
        let from = |ky: usize| &src[ky * wp..];
        if kh == 3 {
            fused::<T, 3, 1>(std::array::from_fn(from), w, bias, out, fma);
        } else {
            fused::<T, 5, 1>(std::array::from_fn(from), w, bias, out, fma);
        }
        for (yrow, frow) in y.chunks_exact_mut(ow).zip(flat.chunks(wp)) {
            yrow.copy_from_slice(&frow[..ow]);
        }
        bias_act(y, None, act);
        return;
    }
    for (oy, yrow) in y.chunks_exact_mut(ow).enumerate() {
        let r0 = oy * sh;
        match (kh, kw, dh, dw, sw) {
            (3, 3, 1, 1, 1) => fused::<T, 3, 1>([row(r0), row(r0 + 1), row(r0 + 2)], w, bias, yrow, fma),
            (3, 3, 1, 1, 2) => fused::<T, 3, 2>([row(r0), row(r0 + 1), row(r0 + 2)], w, bias, yrow, fma),
            (5, 5, 1, 1, 1) => fused::<T, 5, 1>(std::array::from_fn(|i| row(r0 + i)), w, bias, yrow, fma),
            (5, 5, 1, 1, 2) => fused::<T, 5, 2>(std::array::from_fn(|i| row(r0 + i)), w, bias, yrow, fma),
            _ => {
                yrow.fill(bias);
                for ky in 0..kh {
                    let xr = row(r0 + ky * dh);
                    for kx in 0..kw {
                        let wv = w[ky * kw + kx];
                        let xs = &xr[kx * dw..];
                        if sw == 1 {
                            for (o, &v) in yrow.iter_mut().zip(xs) {
                                *o = *o + wv * v;
                            }
                        } else {
                            for (o, &v) in yrow.iter_mut().zip(xs.iter().step_by(sw)) {
                                *o = *o + wv * v;
                            }
                        }
                    }
                }
            }
        }
        bias_act(yrow, None, act);
    }
}

/// Copies a plane into its four parity sub-planes of the zero-padded plane (begin pads `pt`, `pl`):
/// padded pixel (r, c) goes to sub-plane `2·(r % 2) + c % 2` at (r / 2, c / 2), each sub-plane `hq × wq`.
#[allow(clippy::too_many_arguments)]
fn polyphase_copy<T: Real>(xin: &[T], wd: usize, pt: usize, pl: usize, hq: usize, wq: usize, pad: &mut [T]) {
    let sub = hq * wq;
    // input column 2t goes to column parity pl % 2, index t + pl / 2; column 2t + 1 to the other parity
    let (pe, ce) = (pl & 1, pl / 2);
    let (po, co) = ((pl + 1) & 1, pl.div_ceil(2));
    let (evens, odds) = (wd.div_ceil(2), wd / 2);
    for (iy, xr) in xin.chunks_exact(wd).enumerate() {
        let r = iy + pt;
        let base = (r & 1) * 2 * sub + (r >> 1) * wq;
        // the two destinations lie in different sub-planes, so they are disjoint
        let (ea, oa) = (base + pe * sub + ce, base + po * sub + co);
        let (de, dodd) = if ea < oa {
            let (lo, hi) = pad.split_at_mut(oa);
            (&mut lo[ea..ea + evens], &mut hi[..odds])
        } else {
            let (lo, hi) = pad.split_at_mut(ea);
            (&mut hi[..evens], &mut lo[oa..oa + odds])
        };
        // pairs through chunks_exact: this form vectorises (step_by does not)
        for ((e, o), pair) in de.iter_mut().zip(dodd.iter_mut()).zip(xr.chunks_exact(2)) {
            *e = pair[0];
            *o = pair[1];
        }
        if evens > odds {
            de[evens - 1] = xr[wd - 1];
        }
    }
}

/// `out[j] = bias + Σ_t w[t] · src[t][j]`: taps given as shifted runs.
#[inline]
fn taps<T: Real, const N: usize>(src: [&[T]; N], w: &[T], bias: T, out: &mut [T], fma: bool) {
    #[cfg(target_arch = "x86_64")]
    if fma {
        // SAFETY: `fma` is true only when the CPU supports AVX2 and FMA (fma_available), which is all that
        // taps_avx2 requires beyond the safe body it inlines.
        return unsafe { taps_avx2::<T, N>(src, w, bias, out) };
    }
    let _ = fma;
    taps_body::<T, N, { cfg!(target_arch = "aarch64") }>(src, w, bias, out)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn taps_avx2<T: Real, const N: usize>(src: [&[T]; N], w: &[T], bias: T, out: &mut [T]) {
    taps_body::<T, N, true>(src, w, bias, out)
}

#[inline(always)]
fn taps_body<T: Real, const N: usize, const FMA: bool>(src: [&[T]; N], w: &[T], bias: T, out: &mut [T]) {
    let n = out.len();
    let src: [&[T]; N] = std::array::from_fn(|t| &src[t][..n]);
    let w: [T; N] = std::array::from_fn(|t| w[t]);
    for (j, o) in out.iter_mut().enumerate() {
        let mut acc = bias;
        for t in 0..N {
            acc = if FMA { w[t].mul_add_(src[t][j], acc) } else { acc + w[t] * src[t][j] };
        }
        *o = acc;
    }
}

/// Whether the AVX2+FMA build of the fused loop can run here.
fn fma_available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// `out[j] = bias + Σ w[ky·K + kx] · rows[ky][j·S + kx]` for every output column `j`.
#[inline]
fn fused<T: Real, const K: usize, const S: usize>(rows: [&[T]; K], w: &[T], bias: T, out: &mut [T], fma: bool) {
    #[cfg(target_arch = "x86_64")]
    if fma {
        // SAFETY: `fma` is true only when the CPU supports AVX2 and FMA (fma_available), which is all that
        // fused_avx2 requires beyond the safe body it inlines.
        return unsafe { fused_avx2::<T, K, S>(rows, w, bias, out) };
    }
    let _ = fma;
    // aarch64 always has fused multiply-add (NEON).
    fused_body::<T, K, S, { cfg!(target_arch = "aarch64") }>(rows, w, bias, out)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn fused_avx2<T: Real, const K: usize, const S: usize>(rows: [&[T]; K], w: &[T], bias: T, out: &mut [T]) {
    fused_body::<T, K, S, true>(rows, w, bias, out)
}

#[inline(always)]
fn fused_body<T: Real, const K: usize, const S: usize, const FMA: bool>(rows: [&[T]; K], w: &[T], bias: T, out: &mut [T]) {
    let n = out.len();
    if n == 0 {
        return;
    }
    let need = (n - 1) * S + K;
    let rows: [&[T]; K] = std::array::from_fn(|i| &rows[i][..need]);
    let w: [[T; K]; K] = std::array::from_fn(|ky| std::array::from_fn(|kx| w[ky * K + kx]));
    for (j, o) in out.iter_mut().enumerate() {
        let mut acc = bias;
        for ky in 0..K {
            let r = rows[ky];
            for kx in 0..K {
                acc = if FMA { w[ky][kx].mul_add_(r[j * S + kx], acc) } else { acc + w[ky][kx] * r[j * S + kx] };
            }
        }
        *o = acc;
    }
}
