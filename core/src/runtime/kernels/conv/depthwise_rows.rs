//! f32 depthwise 3×3 and 5×5 convolutions, stride 1 or 2, straight on the NCHW planes with 16-lane AVX-512
//! vectors along each output row. The portable kernel ([`super::depthwise`]) first copies each input plane into
//! a zero-bordered plane (its parity sub-planes for stride 2), computes 8-lane rows into a scratch row of the
//! padded pitch, copies them into the output and runs the activation as another pass: four passes over each
//! plane around the arithmetic, which left MobileNetV2's large depthwise layers at half onnxruntime's speed.
//!
//! Here every load is a masked load of the input row itself: the lanes whose columns fall in the padding are
//! not read and count as 0, rows in the padding are skipped, and each 16-pixel block of an output row sums its
//! taps from the bias in (ky, kx) order, clamps (ReLU, ReLU6, Clip) and is stored once (masked at the row's
//! end). Stride 2 loads two vectors per tap column pair and splits them into the even and odd columns with one
//! permute each. The loads' column offsets and lane masks depend only on the block and the tap, so they are
//! computed when the session is planned.
//!
//! Same FMA chain per output as the portable kernel (bias, then the taps in order; a padded tap adds 0·w
//! exactly), so the same results. x86-64 with AVX-512F, 2-D, dilation 1, output rows of at least
//! [`MIN_WIDTH`] pixels; narrower planes (a MobileNet's 3×3 to 6×6 last stages) fill too few of the 16 lanes and
//! go to [`super::depthwise_lanes`] (channels in the lanes; measured: 12×12 and 7×7 at stride 2 are faster here,
//! 7×7 at stride 1 even, 6×6 and 3×3 faster there).

use super::super::matmul::bias_act;
use super::super::numeric::vector::avx512;
use super::super::{PreparedKernel, Scratch};
use super::depthwise_lanes::window;
use super::pixel_taps::Window2;
use super::{constant_f32_conv, is_depthwise, prepared_operands};
use crate::ir::ops::conv::ConvPlan;
use crate::ir::{ConvAttrs, Graph, Tensor};
use crate::runtime::spin_pool;

/// Output values per vector.
pub(super) const LANES: usize = 16;

/// The narrowest output rows this kernel takes.
pub(super) const MIN_WIDTH: usize = 7;

/// Work (multiply-adds) from which the planes are split between threads.
const PAR_MIN_MACS: usize = 1 << 17;

/// A prepared depthwise convolution.
#[derive(Debug)]
struct DepthwiseRows {
    attrs: ConvAttrs,
    w_shape: Vec<usize>,
    /// Kernel size (square) and stride (both axes).
    k: usize,
    s: usize,
    /// `[output channel][k·k]` weights.
    w: Vec<f32>,
    /// The planned plane's geometry.
    window: Window2,
    /// Per 16-pixel block of an output row, per load ([`loads_per_block`]): the input column of its first lane
    /// (negative in the left padding) and the mask of its lanes that fall inside the row.
    loads: Vec<(isize, u16)>,
}

/// The loads of one block of output pixels: one per tap column at stride 1, two per pair of tap columns at
/// stride 2.
pub(super) fn loads_per_block(k: usize, s: usize) -> usize {
    if s == 1 {
        k
    } else {
        2 * k.div_ceil(2)
    }
}

/// The lanes `i < 16` with `0 ≤ col + i < width`.
fn lane_mask(col: isize, width: usize) -> u16 {
    let lo = (-col).clamp(0, LANES as isize);
    let hi = (width as isize - col).clamp(0, LANES as isize);
    if hi <= lo {
        return 0;
    }
    let upto = |n: isize| if n >= LANES as isize { u16::MAX } else { (1u16 << n) - 1 };
    upto(hi) & !upto(lo)
}

/// The loads of every 16-pixel block of an output row of `window` (kernel `k`, stride `s`), as
/// [`DepthwiseRows::loads`] holds them.
pub(super) fn row_loads(window: &Window2, k: usize, s: usize) -> Vec<(isize, u16)> {
    let per = loads_per_block(k, s);
    let mut loads = Vec::with_capacity(window.ow.div_ceil(LANES) * per);
    for ox0 in (0..window.ow).step_by(LANES) {
        let first = (ox0 * s) as isize - window.pad.1 as isize;
        for j in 0..per {
            // stride 1: tap column j; stride 2: the pair of tap columns j / 2, its first or second 16 columns
            let col = if s == 1 { first + j as isize } else { first + 2 * (j / 2) as isize + (LANES * (j % 2)) as isize };
            loads.push((col, lane_mask(col, window.iw)));
        }
    }
    loads
}

/// The prepared kernel of Conv node `n` when it is a 2-D f32 depthwise 3×3 or 5×5 convolution with stride 1 or
/// 2, no dilation and constant weights, on a CPU with AVX-512 (`TPU_SDK_NO_DW_ROWS=1` declines, to compare).
pub(in crate::runtime::kernels) fn prepare(g: &Graph, n: usize) -> Option<Box<dyn PreparedKernel>> {
    let (attrs, p, w, w_shape) = constant_f32_conv(g, n)?;
    let geo = &p.geom;
    if !is_depthwise(&p) || geo.rank != 2 || w_shape.len() != 4 || !avx512() || std::env::var_os("TPU_SDK_NO_DW_ROWS").is_some() {
        return None;
    }
    let (k, s) = (geo.k[1], geo.s[1]);
    if geo.k[2] != k || !(k == 3 || k == 5) || geo.s[2] != s || !(s == 1 || s == 2) || geo.d[1..3] != [1, 1] || geo.out[2] < MIN_WIDTH || geo.out_size() == 0 {
        return None;
    }
    let window = window(geo);
    let loads = row_loads(&window, k, s);
    let w = w.get(..p.m * k * k)?.to_vec();
    Some(Box::new(DepthwiseRows { attrs: attrs.clone(), w_shape: w_shape.to_vec(), k, s, w, window, loads }))
}

impl PreparedKernel for DepthwiseRows {
    fn run(&self, inputs: &[Option<&Tensor>], outputs: &mut [Tensor], _scratch: &mut Scratch) -> Result<(), String> {
        let fits = |p: &ConvPlan| p.geom.rank == 2 && is_depthwise(p) && window(&p.geom) == self.window && p.m * self.k * self.k == self.w.len();
        let Some((p, xv, bv, y)) = prepared_operands(inputs, outputs, &self.w_shape, &self.attrs, fits)? else { return Ok(()) };
        let (plane_in, pix) = (p.geom.in_size(), p.geom.out_size());
        let act = self.attrs.activation;
        let clamp = act.and_then(|a| a.clamp_bounds());
        let (m, mg, kk) = (p.m, p.mg(), self.k * self.k);
        let planes = p.n * m;
        let threads = spin_pool::threads();
        let per_task = if threads > 1 && planes * pix * kk >= spin_pool::min_work(PAR_MIN_MACS) { planes.div_ceil(2 * threads) } else { planes };
        let win = &self.window;
        spin_pool::for_each_chunk_mut(y, per_task * pix, &|t, ys| {
            for (j, yp) in ys.chunks_exact_mut(pix).enumerate() {
                let idx = t * per_task + j;
                let (img, mo) = (idx / m, idx % m);
                let xin = &xv[(img * p.c + mo / mg) * plane_in..][..plane_in];
                let bias = bv.map_or(0.0, |b| b[mo]);
                let wk = &self.w[mo * kk..][..kk];
                // SAFETY: the CPU has AVX-512F (prepare checked); xin is one ih × iw input plane and yp one oh × ow
                // output plane of this geometry (checked above against the planned window), and the loads were
                // computed for this window: every lane a mask enables reads a column inside its row.
                unsafe {
                    match (self.k, self.s) {
                        (3, 1) => x86::plane::<3, 1>(xin, win, wk, bias, &self.loads, yp, clamp),
                        (3, 2) => x86::plane::<3, 2>(xin, win, wk, bias, &self.loads, yp, clamp),
                        (5, 1) => x86::plane::<5, 1>(xin, win, wk, bias, &self.loads, yp, clamp),
                        _ => x86::plane::<5, 2>(xin, win, wk, bias, &self.loads, yp, clamp),
                    }
                }
                if clamp.is_none() && act.is_some() {
                    bias_act(yp, None, act);
                }
            }
        });
        Ok(())
    }

    fn holds_input(&self, k: usize) -> bool {
        k == 1
    }
}

pub(super) mod x86 {
    use std::arch::x86_64::*;

    use super::{loads_per_block, Window2, LANES};

    /// The even (0, 2, .., 30) or odd (1, 3, .., 31) columns of the 32 held by `a` then `b`.
    #[inline(always)]
    pub(in super::super) unsafe fn columns<const ODD: bool>(a: __m512, b: __m512) -> __m512 {
        // SAFETY: callers enable AVX-512F.
        unsafe {
            let idx = if ODD {
                _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31)
            } else {
                _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30)
            };
            _mm512_permutex2var_ps(a, idx, b)
        }
    }

    /// Loads the `K` taps of one input row for a 16-pixel block (`ld`: the block's prepared (offset, mask) per
    /// tap) and runs `$body` with each as `$v` and its column as `$kx`: a masked load per tap for stride 1; for
    /// stride 2 two loads per pair of taps, split into their even and odd columns. Both rows kernels use it
    /// (a macro: its intrinsics inline into the caller's AVX-512 code).
    macro_rules! row_taps {
        ($k:expr, $s:expr, $row:expr, $ld:expr, |$v:ident, $kx:ident| $body:block) => {{
            if $s == 1 {
                for $kx in 0..$k {
                    let (c, m) = *$ld.add($kx);
                    let $v = _mm512_maskz_loadu_ps(m, $row.wrapping_offset(c));
                    $body
                }
            } else {
                for q in 0..$k.div_ceil(2) {
                    let (c0, m0) = *$ld.add(2 * q);
                    let (c1, m1) = *$ld.add(2 * q + 1);
                    let a = _mm512_maskz_loadu_ps(m0, $row.wrapping_offset(c0));
                    let b = _mm512_maskz_loadu_ps(m1, $row.wrapping_offset(c1));
                    {
                        let ($v, $kx) = (columns::<false>(a, b), 2 * q);
                        $body
                    }
                    if 2 * q + 1 < $k {
                        let ($v, $kx) = (columns::<true>(a, b), 2 * q + 1);
                        $body
                    }
                }
            }
        }};
    }
    pub(in super::super) use row_taps;

    /// One output plane: `y[oy, ox] = bias + Σ w[ky, kx] · x[oy·S + ky − pt, ox·S + kx − pl]` over the taps
    /// inside the input, then clamped when `clamp` is given.
    ///
    /// # Safety
    /// The CPU has AVX-512F; `x` holds `ih·iw` and `y` `oh·ow` values of `win`, `w` K·K weights; `loads` are the
    /// prepared loads of `win` for K and S (each enabled lane's column inside its row).
    #[target_feature(enable = "avx512f")]
    #[allow(clippy::needless_range_loop)]
    pub(super) unsafe fn plane<const K: usize, const S: usize>(x: &[f32], win: &Window2, w: &[f32], bias: f32, loads: &[(isize, u16)], y: &mut [f32], clamp: Option<(f32, f32)>) {
        let (ih, iw, oh, ow) = (win.ih, win.iw, win.oh, win.ow);
        debug_assert!(x.len() >= ih * iw && y.len() >= oh * ow && w.len() >= K * K);
        let per = loads_per_block(K, S);
        let blocks = ow.div_ceil(LANES);
        debug_assert!(loads.len() >= blocks * per);
        // SAFETY (whole body): rows iy are read only for 0 ≤ iy < ih, and within a row only the lanes a prepared
        // mask enables (columns inside the row; masked-off lanes are not accessed); each store writes the lanes
        // of one block inside its output row.
        unsafe {
            let wv: [[__m512; K]; K] = std::array::from_fn(|ky| std::array::from_fn(|kx| _mm512_set1_ps(*w.get_unchecked(ky * K + kx))));
            let vb = _mm512_set1_ps(bias);
            let (lo, hi) = clamp.unwrap_or((f32::NEG_INFINITY, f32::INFINITY));
            let (vlo, vhi) = (_mm512_set1_ps(lo), _mm512_set1_ps(hi));
            let xp = x.as_ptr();
            for oy in 0..oh {
                let iy0 = (oy * S) as isize - win.pad.0 as isize;
                let ky0 = (-iy0).max(0) as usize;
                let ky1 = (ih as isize - iy0).clamp(0, K as isize) as usize;
                let yrow = y.as_mut_ptr().add(oy * ow);
                for bi in 0..blocks {
                    let ld = loads.as_ptr().add(bi * per);
                    let mut acc = vb;
                    for ky in ky0..ky1 {
                        let row = xp.offset((iy0 + ky as isize) * iw as isize);
                        row_taps!(K, S, row, ld, |v, kx| {
                            acc = _mm512_fmadd_ps(v, wv[ky][kx], acc);
                        });
                    }
                    if clamp.is_some() {
                        acc = _mm512_min_ps(_mm512_max_ps(acc, vlo), vhi);
                    }
                    let n = LANES.min(ow - bi * LANES);
                    let store = if n == LANES { u16::MAX } else { (1u16 << n) - 1 };
                    _mm512_mask_storeu_ps(yrow.add(bi * LANES), store, acc);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{is_prepared, prepared_and_ordinary};
    use crate::ir::{Activation, AutoPad, ConvAttrs};

    #[test]
    fn lane_masks() {
        assert_eq!(super::lane_mask(0, 40), u16::MAX);
        assert_eq!(super::lane_mask(-1, 40), 0xFFFE);
        assert_eq!(super::lane_mask(-2, 40), 0xFFFC);
        assert_eq!(super::lane_mask(30, 40), 0x03FF);
        assert_eq!(super::lane_mask(-1, 7), 0x00FE);
        assert_eq!(super::lane_mask(40, 40), 0);
        assert_eq!(super::lane_mask(-20, 40), 0);
        assert_eq!(super::lane_mask(-16, 40), 0);
        assert_eq!(super::lane_mask(-15, 40), 0x8000);
    }

    /// The row kernel against the portable direct kernel on the same node (the same FMA chain per output, so
    /// equal values): 3×3 and 5×5, stride 1 and 2, symmetric, asymmetric (TensorFlow's SAME at stride 2) and no
    /// padding, widths below, at and across the 16 lanes, a depth multiplier of 2, a batch of 2, with and without
    /// bias, clamping and non-clamping activations, on 1 and 2 threads.
    #[test]
    fn rows_equal_the_direct_kernel() {
        if !crate::runtime::kernels::numeric::vector::avx512() {
            return;
        }
        let attrs = |k: usize, s: usize, pads: [usize; 4], group: usize, act| ConvAttrs {
            kernel_shape: vec![k, k],
            strides: vec![s; 2],
            dilations: vec![1; 2],
            pads: pads.to_vec(),
            auto_pad: AutoPad::NotSet,
            group,
            activation: act,
        };
        // (x shape, w shape, attrs, bias)
        let cases = vec![
            (vec![1, 4, 20, 20], vec![4, 1, 3, 3], attrs(3, 1, [1, 1, 1, 1], 4, Some(Activation::Relu6)), true),
            (vec![1, 5, 23, 37], vec![5, 1, 3, 3], attrs(3, 2, [1, 1, 1, 1], 5, Some(Activation::Relu)), true),
            (vec![1, 3, 24, 24], vec![3, 1, 3, 3], attrs(3, 2, [0, 0, 1, 1], 3, Some(Activation::Clip { min: -0.5, max: 0.5 })), false),
            (vec![2, 3, 17, 16], vec![3, 1, 5, 5], attrs(5, 1, [2, 2, 2, 2], 3, None), true),
            (vec![1, 4, 21, 34], vec![4, 1, 5, 5], attrs(5, 2, [2, 1, 2, 3], 4, Some(Activation::Silu)), true),
            (vec![1, 2, 13, 50], vec![2, 1, 5, 5], attrs(5, 2, [1, 2, 2, 1], 2, None), true),
            (vec![1, 3, 9, 33], vec![6, 1, 3, 3], attrs(3, 1, [0, 0, 0, 0], 3, None), true),
            (vec![1, 2, 6, 5], vec![2, 1, 3, 3], attrs(3, 1, [2, 2, 2, 2], 2, Some(Activation::Relu)), true),
            (vec![1, 2, 5, 5], vec![2, 1, 3, 3], attrs(3, 1, [2, 2, 2, 2], 2, None), true),
            (vec![1, 64, 30, 30], vec![64, 1, 3, 3], attrs(3, 1, [1, 1, 1, 1], 64, Some(Activation::Relu6)), true),
            (vec![2, 48, 33, 33], vec![48, 1, 3, 3], attrs(3, 2, [1, 1, 1, 1], 48, Some(Activation::Relu6)), false),
        ];
        for (seed, (xs, ws, a, with_bias)) in cases.into_iter().enumerate() {
            for threads in [1, 2] {
                let (got, want) = prepared_and_ordinary(&xs, &ws, &a, with_bias, seed as u64, super::prepare, threads);
                for (i, (p, q)) in got.as_f32().unwrap().iter().zip(want.as_f32().unwrap()).enumerate() {
                    assert!(p.to_bits() == q.to_bits(), "case {seed}, {threads} threads: element {i}: {p} vs {q}");
                }
            }
        }
        // declined: rows under MIN_WIDTH (to the channel-lane kernel), a dilation, a 7×7 kernel
        for (xs, a) in [
            (vec![1, 8, 6, 6], attrs(3, 1, [1, 1, 1, 1], 8, None)),
            (vec![1, 8, 20, 20], ConvAttrs { dilations: vec![2, 2], ..attrs(3, 1, [2, 2, 2, 2], 8, None) }),
            (vec![1, 8, 20, 20], ConvAttrs { kernel_shape: vec![7, 7], ..attrs(7, 1, [3, 3, 3, 3], 8, None) }),
        ] {
            let ws = [xs[1], 1, a.kernel_shape[0], a.kernel_shape[1]];
            assert!(!is_prepared(&xs, &ws, &a, super::prepare), "{xs:?} {a:?}");
        }
    }
}
