//! im2col straight into the f32 GEMM's packed column panels, for the prepared convolution (`super::packed`).
//!
//! The plain im2col ([`super::im2col::fill_columns`]) writes the `K × cols` column matrix, and the GEMM then
//! copies it again into panels of [`NR`] columns; its row segments are one output row each, with bounds worked
//! out per segment and a stride-2 gather element by element. On a stride-2 stem (16 → 32 channels, 128×128) the
//! two passes took 51% of the convolution, on a 256-channel 8×8 layer 24%: more than onnxruntime's whole
//! convolution beside our GEMM. Here each input channel is first copied once into zero-padded *phase planes*
//! (for horizontal stride `s`, plane `φ` holds the padded columns `φ, φ + s, φ + 2s, ...`), so that every tap of
//! every output pixel is at a fixed offset in one of them: a tap's values for a run of pixels in one output row
//! are one contiguous copy, with no bounds test and no padding case. Those runs are written where the GEMM reads
//! them: panel `jp` of the tile holds, for tap row `r`, the 16 values of pixels `jp·16 ..` at `r·16`
//! ([`super::super::numeric::PackedB`]'s layout), so the GEMM packs nothing.
//!
//! 1-D and 2-D windows (a 3-D one keeps the plain im2col). The values are the plain im2col's, so the product is
//! the same bits (tested).

use super::super::numeric::NR_PACKED as NR;
use super::Geom;

/// Whether [`fill_panels`] takes this geometry (no depth window).
pub(super) fn takes(g: &Geom) -> bool {
    g.k[0] == 1 && g.inp[0] == 1 && g.out[0] == 1 && g.pb[0] == 0
}

/// Elements [`fill_panels`] writes for a tile of `cols` pixels and depth `kk`.
pub(super) fn panels_len(kk: usize, cols: usize) -> usize {
    cols.div_ceil(NR) * NR * kk
}

/// Writes the column panels of output pixels `p0..p0 + cols` of one image and group (`x`: its `cg` input
/// planes): `dst[jp·NR·K + r·NR + j]` is the input value under tap row `r = (c·kh + ky)·kw + kx` for pixel
/// `p0 + jp·NR + j` (0 over the padding and past `cols`).
///
/// Panics on a CPU without AVX2 (the prepared convolution, its only caller, needs it too).
pub(super) fn fill_panels(x: &[f32], g: &Geom, cg: usize, p0: usize, cols: usize, dst: &mut [f32]) {
    assert!(super::super::numeric::vector::avx2_fma(), "im2col panels need AVX2");
    SCRATCH.with(|s| {
        let (phases, taps) = &mut *s.borrow_mut();
        // SAFETY: the CPU has AVX2 (asserted).
        unsafe { fill_panels_avx2(x, g, cg, p0, cols, dst, phases, taps) }
    })
}

thread_local! {
    /// This thread's phase planes and tap offsets ([`fill_panels`]), kept between calls.
    static SCRATCH: std::cell::RefCell<(Vec<f32>, Vec<usize>)> = const { std::cell::RefCell::new((Vec::new(), Vec::new())) };
}

/// [`fill_panels`] compiled for AVX2, so that its small copies inline.
///
/// # Safety
/// The CPU has AVX2.
#[target_feature(enable = "avx2")]
#[allow(clippy::too_many_arguments)]
unsafe fn fill_panels_avx2(x: &[f32], g: &Geom, cg: usize, p0: usize, cols: usize, dst: &mut [f32], phases: &mut Vec<f32>, taps: &mut Vec<usize>) {
    let [_, ih, iw] = g.inp;
    let [_, oh, ow] = g.out;
    let [_, kh, kw] = g.k;
    let [_, sy, sx] = g.s;
    let [_, dy, dx] = g.d;
    let [_, pt, pl] = g.pb;
    let kk = cg * kh * kw;
    let panels = cols.div_ceil(NR);
    assert!(cols > 0 && p0 + cols <= oh * ow && dst.len() >= panels * NR * kk && x.len() >= cg * ih * iw, "im2col panels: buffers shorter than the geometry");
    // the padded rows this tile reads, and the width of a phase plane: output column ox of tap kx reads phase
    // (kx·dx) % sx at column ox + (kx·dx) / sx
    let (oy0, oy1) = (p0 / ow, (p0 + cols - 1) / ow);
    let (y0, rows) = (oy0 * sy, (oy1 - oy0) * sy + (kh - 1) * dy + 1);
    let qw = ow + (kw - 1) * dx / sx;
    let plane = rows * qw;
    if phases.len() < cg * sx * plane {
        phases.resize(cg * sx * plane, 0.0);
    }
    // every channel's phase planes first (plane (c, phase) at (c·sx + phase)·plane)
    for c in 0..cg {
        let xc = &x[c * ih * iw..][..ih * iw];
        for phase in 0..sx {
            let q = &mut phases[(c * sx + phase) * plane..][..plane];
            for (r, qrow) in q.chunks_exact_mut(qw).enumerate() {
                // padded row y0 + r is input row y0 + r - pt
                let iy = (y0 + r) as isize - pt as isize;
                if iy < 0 || iy >= ih as isize {
                    qrow.fill(0.0);
                    continue;
                }
                // columns u with 0 <= u·sx + phase - pl < iw hold input values, the rest padding
                let xr = &xc[iy as usize * iw..][..iw];
                let lo = (pl.saturating_sub(phase)).div_ceil(sx).min(qw);
                let hi = if iw + pl > phase { ((iw - 1 + pl - phase) / sx + 1).min(qw) } else { 0 }.max(lo);
                qrow[..lo].fill(0.0);
                qrow[hi..].fill(0.0);
                if hi == lo {
                    // no input column in this phase (an input narrower than the stride)
                    continue;
                }
                let start = lo * sx + phase - pl;
                let q = &mut qrow[lo..hi];
                match sx {
                    1 => q.copy_from_slice(&xr[start..start + hi - lo]),
                    // SAFETY: the CPU has AVX2 (this function's condition).
                    2 => unsafe { x86::every_other(q, &xr[start..]) },
                    _ => {
                        for (v, &s) in q.iter_mut().zip(xr[start..].iter().step_by(sx)) {
                            *v = s;
                        }
                    }
                }
            }
        }
    }
    // each tap row's offset in the phase planes: tap (c, ky, kx) of the pixel at padded row 0, column 0
    taps.clear();
    for c in 0..cg {
        for ky in 0..kh {
            for kx in 0..kw {
                taps.push((c * sx + kx * dx % sx) * plane + ky * dy * qw + kx * dx / sx);
            }
        }
    }
    let last_tap = taps.iter().max().copied().unwrap_or(0);
    // then panel by panel (its 16 · kk values written in order), run by run of pixels in one output row, tap by tap
    let (mut oy, mut ox) = (oy0, p0 % ow);
    for jp in 0..panels {
        let lanes = NR.min(cols - jp * NR);
        let panel = &mut dst[jp * NR * kk..][..NR * kk];
        if lanes < NR {
            panel.fill(0.0);
        }
        let mut lane = 0;
        while lane < lanes {
            let len = (lanes - lane).min(ow - ox);
            let base = (oy * sy - y0) * qw + ox;
            assert!(base + last_tap + len <= phases.len(), "im2col panels: a tap outside the phase planes");
            // SAFETY: every source run lies in `phases` (asserted for the farthest tap) and every destination run in
            // `panel` (lane + len <= NR, r < kk); the CPU has AVX2 (this function's condition).
            unsafe {
                let src = phases.as_ptr().add(base);
                let d = panel.as_mut_ptr().add(lane);
                if len == NR {
                    for (r, &t) in taps.iter().enumerate() {
                        x86::copy16(d.add(r * NR), src.add(t));
                    }
                } else {
                    for (r, &t) in taps.iter().enumerate() {
                        x86::copy_short(d.add(r * NR), src.add(t), len);
                    }
                }
            }
            lane += len;
            ox += len;
            if ox == ow {
                ox = 0;
                oy += 1;
            }
        }
    }
}

mod x86 {
    use std::arch::x86_64::*;

    /// `q[i] = x[2·i]` (`x` holds at least `2·q.len() - 1` values), eight at a time.
    ///
    /// # Safety
    /// The CPU has AVX2.
    #[inline]
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn every_other(q: &mut [f32], x: &[f32]) {
        let n = q.len();
        assert!(n == 0 || x.len() > 2 * (n - 1), "every_other: source too short");
        let mut i = 0;
        // SAFETY: each block reads x[2i .. 2i + 16] and writes q[i .. i + 8], both inside (the loop condition).
        unsafe {
            while i + 8 <= n && 2 * i + 16 <= x.len() {
                let a = _mm256_loadu_ps(x.as_ptr().add(2 * i));
                let b = _mm256_loadu_ps(x.as_ptr().add(2 * i + 8));
                // evens of a and b per 128-bit half: a0 a2 b0 b2 | a4 a6 b4 b6, then the 64-bit quarters in order
                let e = _mm256_shuffle_ps::<0b10_00_10_00>(a, b);
                let e = _mm256_castpd_ps(_mm256_permute4x64_pd::<0b11_01_10_00>(_mm256_castps_pd(e)));
                _mm256_storeu_ps(q.as_mut_ptr().add(i), e);
                i += 8;
            }
        }
        for (v, &s) in q[i..].iter_mut().zip(x[2 * i..].iter().step_by(2)) {
            *v = s;
        }
    }

    /// Copies 16 values from `s` to `d`.
    ///
    /// # Safety
    /// The CPU has AVX2; `s` holds 16 readable values, `d` 16 writable ones.
    #[inline]
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn copy16(d: *mut f32, s: *const f32) {
        // SAFETY: contract.
        unsafe {
            _mm256_storeu_ps(d, _mm256_loadu_ps(s));
            _mm256_storeu_ps(d.add(8), _mm256_loadu_ps(s.add(8)));
        }
    }

    /// Copies the `n` (< 16) values of one shorter run of pixels: whole vectors, overlapping at the end, instead
    /// of a library call per run.
    ///
    /// # Safety
    /// The CPU has AVX2; `s` holds `n` readable values, `d` `n` writable ones.
    #[inline]
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn copy_short(d: *mut f32, s: *const f32, n: usize) {
        // SAFETY: every load and store below lies inside the n values of s and d (contract).
        unsafe {
            if n >= 8 {
                _mm256_storeu_ps(d, _mm256_loadu_ps(s));
                _mm256_storeu_ps(d.add(n - 8), _mm256_loadu_ps(s.add(n - 8)));
            } else if n >= 4 {
                _mm_storeu_ps(d, _mm_loadu_ps(s));
                _mm_storeu_ps(d.add(n - 4), _mm_loadu_ps(s.add(n - 4)));
            } else {
                for i in 0..n {
                    *d.add(i) = *s.add(i);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::im2col::fill_columns;
    use super::*;

    /// The panels hold the plain im2col's column matrix, panel by panel, zeros past the tile: strides 1-3,
    /// dilation, asymmetric pads, 1-D, tiles starting mid-row and ending in a partial panel, planes narrower than
    /// a panel.
    #[test]
    fn the_panels_hold_the_plain_column_matrix() {
        // (inp h, w; k h, w; s h, w; d h, w; pads top, left, bottom, right)
        let cases: &[([usize; 2], [usize; 2], [usize; 2], [usize; 2], [usize; 4])] = &[
            ([8, 8], [3, 3], [1, 1], [1, 1], [1, 1, 1, 1]),
            ([17, 13], [3, 3], [2, 2], [1, 1], [1, 1, 1, 1]),
            ([16, 16], [3, 3], [2, 2], [1, 1], [0, 0, 1, 1]),
            ([11, 12], [5, 3], [1, 3], [2, 1], [2, 0, 1, 2]),
            ([4, 4], [3, 3], [1, 1], [1, 1], [1, 1, 1, 1]),
            ([1, 40], [1, 5], [1, 2], [1, 1], [0, 2, 0, 2]),
            ([9, 30], [1, 1], [2, 2], [1, 1], [0, 0, 0, 0]),
            // an input narrower than the stride: phases with no input column (kernel_properties found it)
            ([1, 1], [1, 1], [3, 3], [1, 1], [0, 0, 0, 0]),
            ([2, 2], [1, 1], [3, 3], [1, 1], [0, 0, 0, 0]),
        ];
        let cg = 3;
        for &([ih, iw], [kh, kw], [sy, sx], [dy, dx], [pt, pl, pbot, pr]) in cases {
            let oh = (ih + pt + pbot - ((kh - 1) * dy + 1)) / sy + 1;
            let ow = (iw + pl + pr - ((kw - 1) * dx + 1)) / sx + 1;
            let g = Geom { rank: 2, inp: [1, ih, iw], out: [1, oh, ow], k: [1, kh, kw], s: [1, sy, sx], d: [1, dy, dx], pb: [0, pt, pl], pe: [0, pbot, pr] };
            assert!(takes(&g));
            let x: Vec<f32> = (0..cg * ih * iw).map(|i| (i * 37 % 101) as f32 - 50.0).collect();
            let kk = cg * kh * kw;
            let pix = oh * ow;
            for (p0, cols) in [(0, pix), (pix / 3, pix - pix / 3), (1, (pix - 1).min(21))] {
                if cols == 0 {
                    continue;
                }
                let mut plain = vec![0f32; kk * cols];
                fill_columns(&x, &g, cg, p0, cols, &mut plain);
                let mut panels = vec![f32::NAN; panels_len(kk, cols)];
                fill_panels(&x, &g, cg, p0, cols, &mut panels);
                for r in 0..kk {
                    for j in 0..cols.div_ceil(NR) * NR {
                        let got = panels[j / NR * NR * kk + r * NR + j % NR];
                        let want = if j < cols { plain[r * cols + j] } else { 0.0 };
                        assert_eq!(got.to_bits(), want.to_bits(), "case {ih}x{iw} k{kh}x{kw} s{sy},{sx} tile {p0}+{cols}: row {r} pixel {j}");
                    }
                }
            }
        }
    }
}
