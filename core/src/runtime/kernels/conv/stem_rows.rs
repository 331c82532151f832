//! f32 convolutions of few input channels (a CNN's first layer over an RGB image: 3 → 16..64 channels, 3×3 to
//! 7×7, mostly stride 2), straight on the NCHW rows with vectors of output pixels (16 lanes with AVX-512, 8 with
//! AVX2 + FMA: [`super::row_vec`]). Through im2col such a layer
//! built a `27 × pixels` column matrix (three passes over a megabyte: the gather, the GEMM's packing, the
//! product) for a product of depth 27, and ran at about half onnxruntime's speed (3 → 32 channels at 224×224:
//! 0.47 vs 0.29 ms in MobileNetV2).
//!
//! Here each block of output pixels (one vector) of an output row loads every tap of every input channel once, as in
//! [`super::depthwise_rows`] (masked loads of the input rows, padding lanes and rows contributing nothing,
//! stride 2 split into even and odd columns by permutes), and multiplies it into the accumulators of
//! [`CB`] output channels at a time (weights laid out `[channel block][input channel][ky][kx][CB]` when the
//! session is planned). Each output is one FMA chain from 0 over (input channel, ky, kx) in order, then the bias
//! is added and the clamp (ReLU, ReLU6, Clip) applied in registers: the im2col GEMM's order and epilogue, so the
//! same values (a float model's calibration for int8 export must not move with the kernel: a shifted range
//! exposed an int8 Mul rounding difference from LiteRT); SiLU runs as a pass over each task's rows just after it
//! wrote them. Tasks split the channel blocks and bands of output rows.
//!
//! x86-64 with AVX-512F or AVX2 + FMA; 2-D, one group, at most [`MAX_CIN`] input channels, square kernels of 3, 5 or 7,
//! stride 1 or 2 on both axes, no dilation, output rows of at least [`super::depthwise_rows::MIN_WIDTH`] pixels.

use super::super::matmul::{bias_act, BlockOut};
use super::super::{PreparedKernel, Scratch};
use super::depthwise_lanes::window;
use super::depthwise_rows::{row_loads, row_vector, MIN_WIDTH};
use super::pixel_taps::Window2;
use super::{constant_f32_conv, prepared_operands};
use crate::ir::ops::conv::ConvPlan;
use crate::ir::{ConvAttrs, Graph, Tensor};
use crate::runtime::spin_pool;

/// Output channels per accumulator block.
const CB: usize = 8;

/// The most input channels this kernel takes (beyond a few, the im2col GEMM's depth makes it efficient).
const MAX_CIN: usize = 4;

/// Work (multiply-adds) per task when the layer is split between threads.
const TASK_MACS: usize = 1 << 17;

/// Output rows `oy0..oy1` of one channel block for a K×K, stride-S kernel and one instruction set
/// ([`kernel::band`]).
type BandFn = unsafe fn(&Band, usize, usize);

/// One task's operands for [`kernel::band`]: a channel block of one image.
struct Band<'a> {
    /// The image's `cin` input planes of `win`.
    x: &'a [f32],
    cin: usize,
    win: &'a Window2,
    /// The block's `cin·K·K·CB` weights and `CB` biases.
    w: &'a [f32],
    bias: [f32; CB],
    /// The prepared loads of `win` for K, S and the vector's lanes.
    loads: &'a [(isize, u16)],
    /// The block's `chans ≤ CB` output planes of `oh·ow` values.
    y: *mut f32,
    chans: usize,
    clamp: Option<(f32, f32)>,
}

/// A prepared few-input-channel convolution.
#[derive(Debug)]
struct StemRows {
    attrs: ConvAttrs,
    w_shape: Vec<usize>,
    /// Kernel size (square), input and output channels.
    k: usize,
    cin: usize,
    m: usize,
    /// `[m.div_ceil(CB)][cin][k][k][CB]` weights, 0 past channel m.
    w: Vec<f32>,
    window: Window2,
    /// Per block of an output row (one vector of pixels), its loads (as [`super::depthwise_rows`] prepares them).
    loads: Vec<(isize, u16)>,
    /// The band kernel for this kernel size, stride and the CPU's vector.
    band: BandFn,
}

/// The prepared kernel of Conv node `n` when it fits this kernel (module documentation); `TPU_SDK_NO_STEM_ROWS=1`
/// declines, to compare.
pub(in crate::runtime::kernels) fn prepare(g: &Graph, n: usize) -> Option<Box<dyn PreparedKernel>> {
    prepare_for(g, n, row_vector())
}

/// [`prepare`] with the vector `(lanes, AVX-512)` (the tests also run the AVX2 kernel on an AVX-512 CPU).
fn prepare_for(g: &Graph, n: usize, vector: Option<(usize, bool)>) -> Option<Box<dyn PreparedKernel>> {
    let (attrs, p, w, w_shape) = constant_f32_conv(g, n)?;
    let geo = &p.geom;
    if p.group != 1 || p.c > MAX_CIN || geo.rank != 2 || w_shape.len() != 4 || std::env::var_os("TPU_SDK_NO_STEM_ROWS").is_some() {
        return None;
    }
    let (lanes, wide) = vector?;
    let (k, s) = (geo.k[1], geo.s[1]);
    if geo.k[2] != k || !matches!(k, 3 | 5 | 7) || geo.s[2] != s || !(s == 1 || s == 2) || geo.d[1..3] != [1, 1] || geo.out[2] < MIN_WIDTH || geo.out_size() == 0 {
        return None;
    }
    let band: BandFn = match (wide, k, s) {
        (true, 3, 1) => kernel::band_avx512::<3, 1>,
        (true, 3, 2) => kernel::band_avx512::<3, 2>,
        (true, 5, 1) => kernel::band_avx512::<5, 1>,
        (true, 5, 2) => kernel::band_avx512::<5, 2>,
        (true, 7, 1) => kernel::band_avx512::<7, 1>,
        (true, _, _) => kernel::band_avx512::<7, 2>,
        (false, 3, 1) => kernel::band_avx2::<3, 1>,
        (false, 3, 2) => kernel::band_avx2::<3, 2>,
        (false, 5, 1) => kernel::band_avx2::<5, 1>,
        (false, 5, 2) => kernel::band_avx2::<5, 2>,
        (false, 7, 1) => kernel::band_avx2::<7, 1>,
        (false, _, _) => kernel::band_avx2::<7, 2>,
    };
    let (cin, m, kk) = (p.c, p.m, k * k);
    let w = w.get(..m * cin * kk)?;
    let blocks = m.div_ceil(CB);
    let mut wl = vec![0f32; blocks * cin * kk * CB];
    for co in 0..m {
        for ci in 0..cin {
            for t in 0..kk {
                wl[(((co / CB) * cin + ci) * kk + t) * CB + co % CB] = w[(co * cin + ci) * kk + t];
            }
        }
    }
    let window = window(geo);
    let loads = row_loads(&window, k, s, lanes);
    Some(Box::new(StemRows { attrs: attrs.clone(), w_shape: w_shape.to_vec(), k, cin, m, w: wl, window, loads, band }))
}

impl PreparedKernel for StemRows {
    fn run(&self, inputs: &[Option<&Tensor>], outputs: &mut [Tensor], _scratch: &mut Scratch) -> Result<(), String> {
        let fits = |p: &ConvPlan| p.geom.rank == 2 && p.group == 1 && p.c == self.cin && p.m == self.m && window(&p.geom) == self.window;
        let Some((p, xv, bv, y)) = prepared_operands(inputs, outputs, &self.w_shape, &self.attrs, fits)? else { return Ok(()) };
        let (plane_in, pix) = (p.geom.in_size(), p.geom.out_size());
        let act = self.attrs.activation;
        let clamp = act.and_then(|a| a.clamp_bounds());
        let (k, cin, m, oh) = (self.k, self.cin, self.m, self.window.oh);
        let blocks = m.div_ceil(CB);
        // tasks: (image, channel block, band of output rows), bands as tall as TASK_MACS allows when splitting
        let threads = spin_pool::threads();
        let row_macs = CB * self.window.ow * cin * k * k;
        let band = if threads > 1 { (TASK_MACS / row_macs.max(1)).clamp(1, oh) } else { oh };
        let bands = oh.div_ceil(band);
        let tasks = p.n * blocks * bands;
        let block_w = cin * k * k * CB;
        let out = BlockOut::new(&mut *y);
        let task = |t: usize| {
            let (img, rest) = (t / (blocks * bands), t % (blocks * bands));
            let (cb, bi) = (rest / bands, rest % bands);
            let (oy0, oy1) = (bi * band, ((bi + 1) * band).min(oh));
            let ch0 = cb * CB;
            let chans = CB.min(m - ch0);
            let mut bias = [0f32; CB];
            if let Some(b) = bv {
                bias[..chans].copy_from_slice(&b[ch0..ch0 + chans]);
            }
            let xs = &xv[img * cin * plane_in..][..cin * plane_in];
            let w = &self.w[cb * block_w..][..block_w];
            // the rows oy0..oy1 of the block's channels: disjoint between tasks (distinct image, block, band)
            let base = (img * m + ch0) * pix;
            let yb = out.block_ptr(base, (chans - 1) * pix + pix);
            // SAFETY: `band` was picked for this CPU's vector (prepare checked its instruction set); xs holds the
            // image's cin planes of this window, w the block's weights, yb the block's chans output planes
            // (block_ptr checked the span), of which this task writes only rows oy0..oy1; the loads were prepared
            // for this window and vector.
            let b = Band { x: xs, cin, win: &self.window, w, bias, loads: &self.loads, y: yb, chans, clamp };
            unsafe { (self.band)(&b, oy0, oy1) };
            if clamp.is_none() && act.is_some() {
                // an activation the kernel does not apply in registers (SiLU) on the band's rows just written, while
                // they are in the cache and on this task's thread (a pass over the whole output after the tasks
                // read it back from memory, on one thread)
                let ow = self.window.ow;
                for c in 0..chans {
                    // SAFETY: rows oy0..oy1 of output channel ch0 + c: this task's block (see above), written above
                    // and accessed by nothing else.
                    let rows = unsafe { out.row(base + c * pix + oy0 * ow, (oy1 - oy0) * ow) };
                    bias_act(rows, None, act);
                }
            }
        };
        if tasks > 1 && threads > 1 {
            spin_pool::run(tasks, &task);
        } else {
            (0..tasks).for_each(task);
        }
        Ok(())
    }

    fn holds_input(&self, k: usize) -> bool {
        k == 1
    }
}

mod kernel {
    use super::super::depthwise_rows::{kernel::store_mask, kernel::tap, loads_per_block};
    use super::super::row_vec::{Avx2, Avx512, RowVec};
    use super::{Band, CB};

    /// Output rows `oy0..oy1` of `b`: its `chans ≤ CB` channels (planes of `oh·ow` values from `y`): each output sums the
    /// taps inside the input, input channel by input channel, then adds its bias and is clamped when `clamp` is
    /// given.
    ///
    /// # Safety
    /// The CPU has `V`'s instruction set; in `b`, `x` holds `cin` planes of `ih·iw` values of `win`; `w` holds
    /// `cin·K·K·CB` weights; `y` addresses `chans` writable planes of `oh·ow` values whose rows oy0..oy1 nothing
    /// else accesses during the call; `loads` are the prepared loads of `win` for K, S and `V::LANES`.
    #[inline(always)]
    #[allow(clippy::needless_range_loop)]
    unsafe fn band<V: RowVec, const K: usize, const S: usize>(b: &Band, oy0: usize, oy1: usize) {
        let Band { x, cin, win, w, ref bias, loads, y, chans, clamp } = *b;
        let (ih, iw, oh, ow) = (win.ih, win.iw, win.oh, win.ow);
        let plane = ih * iw;
        debug_assert!(x.len() >= cin * plane && w.len() >= cin * K * K * CB && oy1 <= oh);
        let per = loads_per_block(K, S);
        let blocks = ow.div_ceil(V::LANES);
        debug_assert!(loads.len() >= blocks * per);
        // SAFETY (whole body): input rows are read only for 0 ≤ iy < ih, within a row only the lanes a prepared
        // mask enables; weights within w; each store writes the lanes of one block inside an output row of a
        // channel < chans and a row in oy0..oy1 (contract).
        unsafe {
            let (lo, hi) = clamp.unwrap_or((f32::NEG_INFINITY, f32::INFINITY));
            let (vlo, vhi) = (V::splat(lo), V::splat(hi));
            let vb: [V; CB] = std::array::from_fn(|c| V::splat(bias[c]));
            let zero = [V::zero(); CB];
            let (xp, wp) = (x.as_ptr(), w.as_ptr());
            for oy in oy0..oy1 {
                let iy0 = (oy * S) as isize - win.pad.0 as isize;
                let ky0 = (-iy0).max(0) as usize;
                let ky1 = (ih as isize - iy0).clamp(0, K as isize) as usize;
                // two blocks of pixels at a time: each weight broadcast serves two FMAs (one block at a time, the
                // loads outnumbered the FMAs), the odd last block alone
                let mut bi = 0;
                while bi < blocks {
                    let nb = if bi + 1 < blocks { 2 } else { 1 };
                    let ld = loads.as_ptr().add(bi * per);
                    let mut acc = [zero; 2];
                    for ci in 0..cin {
                        for ky in ky0..ky1 {
                            let row = xp.add(ci * plane).offset((iy0 + ky as isize) * iw as isize);
                            let wr = wp.add((ci * K + ky) * K * CB);
                            for kx in 0..K {
                                let v0 = tap::<V, S, false>(row, ld, kx);
                                // the second block's tap only when there is one (the odd last block reuses v0 unread)
                                let v1 = if nb == 2 { tap::<V, S, false>(row, ld.add(per), kx) } else { v0 };
                                for c in 0..CB {
                                    let wv = V::splat(*wr.add(kx * CB + c));
                                    acc[0][c] = V::fmadd(v0, wv, acc[0][c]);
                                    if nb == 2 {
                                        acc[1][c] = V::fmadd(v1, wv, acc[1][c]);
                                    }
                                }
                            }
                        }
                    }
                    for (h, acc) in acc.iter().enumerate().take(nb) {
                        let ox0 = (bi + h) * V::LANES;
                        let store = store_mask::<V>(ox0, ow);
                        for c in 0..chans {
                            let mut v = V::add(acc[c], vb[c]);
                            if clamp.is_some() {
                                v = V::clamp(v, vlo, vhi);
                            }
                            V::store(store, y.add(c * oh * ow + oy * ow + ox0), v);
                        }
                    }
                    bi += nb;
                }
            }
        }
    }

    /// [`band`] with AVX-512 vectors.
    ///
    /// # Safety
    /// As [`band`], on a CPU with AVX-512F.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn band_avx512<const K: usize, const S: usize>(b: &Band, oy0: usize, oy1: usize) {
        // SAFETY: the contract.
        unsafe { band::<Avx512, K, S>(b, oy0, oy1) }
    }

    /// [`band`] with AVX2 vectors.
    ///
    /// # Safety
    /// As [`band`], on a CPU with AVX2 and FMA.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn band_avx2<const K: usize, const S: usize>(b: &Band, oy0: usize, oy1: usize) {
        // SAFETY: the contract.
        unsafe { band::<Avx2, K, S>(b, oy0, oy1) }
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{is_prepared, prepared_and_ordinary};
    use crate::ir::{Activation, AutoPad, ConvAttrs};

    /// The row kernel against the im2col kernel on the same node (the same FMA chain and epilogue: equal
    /// values): 3×3, 5×5 and 7×7, stride 1 and 2, symmetric, asymmetric and no padding, 1 to 4 input channels,
    /// output channels around the block of 8, widths below, at and across the 16 lanes, a batch of 2, with and
    /// without bias, clamping and non-clamping activations, on 1 and 2 threads.
    #[test]
    fn rows_equal_the_im2col_kernel() {
        // the CPU's vector, and AVX2's where that is AVX-512
        let avx2 = |g: &crate::ir::Graph, n: usize| super::prepare_for(g, n, crate::runtime::kernels::numeric::vector::avx2_fma().then_some((8, false)));
        let kernels: Vec<fn(&crate::ir::Graph, usize) -> Option<Box<dyn crate::runtime::kernels::PreparedKernel>>> = match super::row_vector() {
            None => return,
            Some((_, true)) => vec![super::prepare, avx2],
            Some(_) => vec![super::prepare],
        };
        let attrs = |k: usize, s: usize, pads: [usize; 4], act| ConvAttrs {
            kernel_shape: vec![k, k],
            strides: vec![s; 2],
            dilations: vec![1; 2],
            pads: pads.to_vec(),
            auto_pad: AutoPad::NotSet,
            group: 1,
            activation: act,
        };
        // (x shape, w shape, attrs, bias)
        let cases = vec![
            (vec![1, 3, 40, 40], vec![32, 3, 3, 3], attrs(3, 2, [1, 1, 1, 1], Some(Activation::Relu6)), true),
            (vec![1, 3, 33, 47], vec![13, 3, 3, 3], attrs(3, 2, [0, 0, 1, 1], Some(Activation::Relu)), true),
            (vec![2, 1, 20, 18], vec![8, 1, 3, 3], attrs(3, 1, [1, 1, 1, 1], None), false),
            (vec![1, 4, 25, 30], vec![9, 4, 5, 5], attrs(5, 2, [2, 1, 2, 3], Some(Activation::Silu)), true),
            (vec![1, 2, 17, 21], vec![5, 2, 5, 5], attrs(5, 1, [2, 2, 2, 2], Some(Activation::Clip { min: -0.5, max: 0.5 })), true),
            (vec![1, 3, 36, 36], vec![16, 3, 7, 7], attrs(7, 2, [3, 3, 3, 3], Some(Activation::Relu)), true),
            (vec![1, 3, 15, 23], vec![7, 3, 7, 7], attrs(7, 1, [3, 3, 3, 3], None), true),
            (vec![1, 3, 12, 40], vec![24, 3, 3, 3], attrs(3, 1, [0, 0, 0, 0], None), true),
        ];
        for (seed, (xs, ws, a, with_bias)) in cases.into_iter().enumerate() {
            for (threads, &prepare) in [1, 2].into_iter().flat_map(|t| kernels.iter().map(move |k| (t, k))) {
                let (got, want) = prepared_and_ordinary(&xs, &ws, &a, with_bias, 200 + seed as u64, prepare, threads);
                for (i, (p, q)) in got.as_f32().unwrap().iter().zip(want.as_f32().unwrap()).enumerate() {
                    assert!(p.to_bits() == q.to_bits() || (*p == 0.0 && *q == 0.0), "case {seed}, {threads} threads: element {i}: {p} vs {q}");
                }
            }
        }
        // declined: five input channels, two groups, a dilation, rows under MIN_WIDTH, a 1×1 kernel
        for (xs, ws, a) in [
            (vec![1, 5, 20, 20], vec![8, 5, 3, 3], attrs(3, 1, [1, 1, 1, 1], None)),
            (vec![1, 4, 20, 20], vec![8, 2, 3, 3], ConvAttrs { group: 2, ..attrs(3, 1, [1, 1, 1, 1], None) }),
            (vec![1, 3, 20, 20], vec![8, 3, 3, 3], ConvAttrs { dilations: vec![2, 2], ..attrs(3, 1, [2, 2, 2, 2], None) }),
            (vec![1, 3, 10, 10], vec![8, 3, 3, 3], attrs(3, 2, [1, 1, 1, 1], None)),
            (vec![1, 3, 20, 20], vec![8, 3, 1, 1], attrs(1, 1, [0, 0, 0, 0], None)),
        ] {
            assert!(!is_prepared(&xs, &ws, &a, super::prepare), "{xs:?} {ws:?} {a:?}");
        }
    }
}
