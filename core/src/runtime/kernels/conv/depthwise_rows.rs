//! f32 depthwise 3×3 and 5×5 convolutions, stride 1 or 2, straight on the NCHW planes with vectors along each
//! output row (16 lanes with AVX-512, 8 with AVX2 + FMA: [`super::row_vec`]). The portable kernel
//! ([`super::depthwise`]) first copies each input plane into a zero-bordered plane (its parity sub-planes for
//! stride 2), computes 8-lane rows into a scratch row of the padded pitch, copies them into the output and runs the
//! activation as another pass: four passes over each plane around the arithmetic, which left MobileNetV2's large
//! depthwise layers at half onnxruntime's speed.
//!
//! Here the loads read the input rows themselves: plain loads for the blocks between a row's first and last
//! vector, masked loads at the row's ends (the lanes whose columns fall in the padding are not read and count as
//! 0); rows in the padding are skipped. Each block of output pixels (one vector) sums its taps from the bias in
//! (ky, kx) order, clamps (ReLU, ReLU6, Clip) and is stored once (masked at the row's end); four output rows go
//! together, each input vector loaded once for all of them ([`kernel`]). Stride 2 loads two vectors per tap
//! column pair and splits them into the even and odd columns with permutes. The masked loads' column offsets and
//! lane masks depend only on the block and the tap, so they are computed when the session is planned.
//!
//! Same FMA chain per output as the portable kernel (bias, then the taps in order; a padded tap adds 0·w
//! exactly), so the same results. x86-64 with AVX-512F or AVX2 + FMA, 2-D, dilation 1, output rows of at least
//! [`MIN_WIDTH`] pixels; narrower planes (a MobileNet's 3×3 to 6×6 last stages) fill too few lanes and
//! go to [`super::depthwise_lanes`] (channels in the lanes; measured with AVX-512: 12×12 and 7×7 at stride 2 are
//! faster here, 7×7 at stride 1 even, 6×6 and 3×3 faster there).

use super::super::matmul::bias_act;
use super::super::numeric::vector::{avx2_fma, avx512};
use super::super::{PreparedKernel, Scratch};
use super::depthwise_lanes::window;
use super::pixel_taps::Window2;
use super::row_vec::{Avx2, Avx512, RowVec};
use super::{constant_f32_conv, is_depthwise, prepared_operands};
use crate::ir::ops::conv::ConvPlan;
use crate::ir::{ConvAttrs, Graph, Tensor};
use crate::runtime::spin_pool;

/// The narrowest output rows this kernel takes.
pub(super) const MIN_WIDTH: usize = 7;

/// With 16-lane vectors, the narrowest output rows this kernel takes from the channel-lane kernel
/// ([`super::depthwise_lanes`]) where that one takes the plane: rows of 8 fill half a vector, and the channel
/// lanes measured faster there (Zen 5, 1 thread: 240 channels 8×8 3×3 0.0124 → 0.0085 ms, 5×5 0.036 → 0.022;
/// 192 channels 7×7 0.0085 → 0.0064; 96 channels 16×16 → 8×8 5×5 stride 2 0.017 → 0.010) while 12-pixel rows
/// kept this kernel ahead (144 channels 12×12 3×3 0.0091 against 0.0119).
const MIN_WIDTH_512: usize = 9;

/// Work (multiply-adds) from which the planes are split between threads.
const PAR_MIN_MACS: usize = 1 << 17;

/// One output plane of a K×K, stride-S kernel for one instruction set ([`kernel::plane`]).
type PlaneFn = unsafe fn(&[f32], &Window2, &[f32], f32, &[(isize, u16)], &mut [f32], Option<(f32, f32)>);

/// A prepared depthwise convolution.
#[derive(Debug)]
struct DepthwiseRows {
    attrs: ConvAttrs,
    w_shape: Vec<usize>,
    /// Kernel size (square).
    k: usize,
    /// `[output channel][k·k]` weights.
    w: Vec<f32>,
    /// The planned plane's geometry.
    window: Window2,
    /// Per block of an output row (one vector of pixels), per load ([`loads_per_block`]): the input column of its
    /// first lane (negative in the left padding) and the mask of its lanes that fall inside the row.
    loads: Vec<(isize, u16)>,
    /// The plane kernel for this kernel size, stride and the CPU's vector.
    plane: PlaneFn,
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

/// The lanes `i < lanes` (at most 16) with `0 ≤ col + i < width`.
fn lane_mask(col: isize, width: usize, lanes: usize) -> u16 {
    let lo = (-col).clamp(0, lanes as isize);
    let hi = (width as isize - col).clamp(0, lanes as isize);
    if hi <= lo {
        return 0;
    }
    let upto = |n: isize| if n >= 16 { u16::MAX } else { (1u16 << n) - 1 };
    upto(hi) & !upto(lo)
}

/// The loads of every `lanes`-pixel block of an output row of `window` (kernel `k`, stride `s`), as
/// [`DepthwiseRows::loads`] holds them.
pub(super) fn row_loads(window: &Window2, k: usize, s: usize, lanes: usize) -> Vec<(isize, u16)> {
    let per = loads_per_block(k, s);
    let mut loads = Vec::with_capacity(window.ow.div_ceil(lanes) * per);
    for ox0 in (0..window.ow).step_by(lanes) {
        let first = (ox0 * s) as isize - window.pad.1 as isize;
        for j in 0..per {
            // stride 1: tap column j; stride 2: the pair of tap columns j / 2, its first or second `lanes` columns
            let col = if s == 1 { first + j as isize } else { first + 2 * (j / 2) as isize + (lanes * (j % 2)) as isize };
            loads.push((col, lane_mask(col, window.iw, lanes)));
        }
    }
    loads
}

/// The vector the row kernels use on this CPU: its lanes, and whether it is AVX-512 (else AVX2); `None` without
/// AVX2 + FMA.
pub(super) fn row_vector() -> Option<(usize, bool)> {
    if avx512() {
        Some((Avx512::LANES, true))
    } else if avx2_fma() {
        Some((Avx2::LANES, false))
    } else {
        None
    }
}

/// The prepared kernel of Conv node `n` when it is a 2-D f32 depthwise 3×3 or 5×5 convolution with stride 1 or
/// 2, no dilation and constant weights, on a CPU with AVX-512 or AVX2 + FMA (`TPU_SDK_NO_DW_ROWS=1` declines, to
/// compare).
pub(in crate::runtime::kernels) fn prepare(g: &Graph, n: usize) -> Option<Box<dyn PreparedKernel>> {
    prepare_for(g, n, row_vector())
}

/// [`prepare`] with the vector `(lanes, AVX-512)` (the tests also run the AVX2 kernel on an AVX-512 CPU).
fn prepare_for(g: &Graph, n: usize, vector: Option<(usize, bool)>) -> Option<Box<dyn PreparedKernel>> {
    let (attrs, p, w, w_shape) = constant_f32_conv(g, n)?;
    let geo = &p.geom;
    if !is_depthwise(&p) || geo.rank != 2 || w_shape.len() != 4 || std::env::var_os("TPU_SDK_NO_DW_ROWS").is_some() {
        return None;
    }
    let (lanes, wide) = vector?;
    if wide && geo.out[2] < MIN_WIDTH_512 && super::depthwise_lanes::takes(&p) {
        return None;
    }
    let (k, s) = (geo.k[1], geo.s[1]);
    if geo.k[2] != k || !(k == 3 || k == 5) || geo.s[2] != s || !(s == 1 || s == 2) || geo.d[1..3] != [1, 1] || geo.out[2] < MIN_WIDTH || geo.out_size() == 0 {
        return None;
    }
    let plane: PlaneFn = match (wide, k, s) {
        (true, 3, 1) => kernel::plane_avx512::<3, 1>,
        (true, 3, 2) => kernel::plane_avx512::<3, 2>,
        (true, 5, 1) => kernel::plane_avx512::<5, 1>,
        (true, _, _) => kernel::plane_avx512::<5, 2>,
        (false, 3, 1) => kernel::plane_avx2::<3, 1>,
        (false, 3, 2) => kernel::plane_avx2::<3, 2>,
        (false, 5, 1) => kernel::plane_avx2::<5, 1>,
        (false, _, _) => kernel::plane_avx2::<5, 2>,
    };
    let window = window(geo);
    let loads = row_loads(&window, k, s, lanes);
    let w = w.get(..p.m * k * k)?.to_vec();
    Some(Box::new(DepthwiseRows { attrs: attrs.clone(), w_shape: w_shape.to_vec(), k, w, window, loads, plane }))
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
                // SAFETY: `plane` was picked for this CPU's vector (prepare checked its instruction set); xin is one
                // ih × iw input plane and yp one oh × ow output plane of this geometry (checked above against the
                // planned window), and the loads were computed for this window and vector: every lane a mask
                // enables reads a column inside its row.
                unsafe { (self.plane)(xin, win, wk, bias, &self.loads, yp, clamp) };
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

pub(super) mod kernel {
    use super::super::row_vec::{Avx2, Avx512, RowVec};
    use super::{loads_per_block, Window2};

    /// The store mask of the block of output pixels starting at column `ox0` of a row of `ow`.
    #[inline(always)]
    pub(in super::super) fn store_mask<V: RowVec>(ox0: usize, ow: usize) -> u16 {
        let n = V::LANES.min(ow - ox0);
        if n == V::LANES {
            V::FULL
        } else {
            (1u16 << n) - 1
        }
    }

    /// The input values under tap column `kx` for a block of output pixels, from input row `row`: one load at
    /// stride 1, a pair split into its even or odd columns at stride 2. `FULL`: `row` points at the block's first
    /// input column and the loads are plain ones at fixed offsets (`ld` unused); else the block's prepared
    /// (masked) loads at `ld`. Both row kernels use it.
    ///
    /// # Safety
    /// The CPU has `V`'s instruction set; the loads read only columns inside the row (`FULL`: all the lanes;
    /// else the lanes the prepared masks enable).
    #[inline(always)]
    pub(in super::super) unsafe fn tap<V: RowVec, const S: usize, const FULL: bool>(row: *const f32, ld: *const (isize, u16), kx: usize) -> V {
        // SAFETY: the contract.
        unsafe {
            if S == 1 {
                tap_load::<V, S, FULL>(row, ld, kx)
            } else {
                let (a, b) = (tap_load::<V, S, FULL>(row, ld, kx / 2 * 2), tap_load::<V, S, FULL>(row, ld, kx / 2 * 2 + 1));
                if kx.is_multiple_of(2) {
                    V::columns::<false>(a, b)
                } else {
                    V::columns::<true>(a, b)
                }
            }
        }
    }

    /// Load `j` of a block for [`tap`].
    ///
    /// # Safety
    /// As [`tap`].
    #[inline(always)]
    unsafe fn tap_load<V: RowVec, const S: usize, const FULL: bool>(row: *const f32, ld: *const (isize, u16), j: usize) -> V {
        // SAFETY: the contract.
        unsafe {
            if FULL {
                V::load_full(row.add(if S == 1 { j } else { 2 * (j / 2) + V::LANES * (j % 2) }))
            } else {
                let (c, m) = *ld.add(j);
                V::load(m, row.wrapping_offset(c))
            }
        }
    }

    /// One output plane: `y[oy, ox] = bias + Σ w[ky, kx] · x[oy·S + ky − pt, ox·S + kx − pl]` over the taps
    /// inside the input, then clamped when `clamp` is given. The output rows whose windows lie inside the input
    /// go in groups ([`rows`]: 4, then the rest one at a time), the rows at the top and bottom one by one
    /// ([`border_row`]).
    ///
    /// # Safety
    /// The CPU has `V`'s instruction set; `x` holds `ih·iw` and `y` `oh·ow` values of `win`, `w` K·K weights;
    /// `loads` are the prepared loads of `win` for K, S and `V::LANES` (each enabled lane's column inside its row).
    #[inline(always)]
    unsafe fn plane<V: RowVec, const K: usize, const S: usize>(x: &[f32], win: &Window2, w: &[f32], bias: f32, loads: &[(isize, u16)], y: &mut [f32], clamp: Option<(f32, f32)>) {
        let (ih, iw, oh, ow) = (win.ih, win.iw, win.oh, win.ow);
        assert!(x.len() >= ih * iw && y.len() >= oh * ow && w.len() >= K * K);
        assert!(loads.len() >= ow.div_ceil(V::LANES) * loads_per_block(K, S));
        // full blocks where the masked blocks at the row's two ends cover the columns outside them
        let full = full_columns(win, K, S, V::LANES).filter(|&(a, b)| a <= V::LANES && b >= (ow - 1) / V::LANES * V::LANES);
        // SAFETY: the lengths were checked above; the rest is the contract.
        unsafe {
            let (lo, hi) = clamp.unwrap_or((f32::NEG_INFINITY, f32::INFINITY));
            let p = Plane::<V, K> {
                x: x.as_ptr(),
                y: y.as_mut_ptr(),
                win,
                loads: loads.as_ptr(),
                full,
                wv: std::array::from_fn(|ky| std::array::from_fn(|kx| V::splat(*w.get_unchecked(ky * K + kx)))),
                vb: V::splat(bias),
                ends: clamp.map(|_| (V::splat(lo), V::splat(hi))),
            };
            // the output rows whose K input rows all lie inside the plane: in0..in1
            let pt = win.pad.0;
            let in0 = pt.div_ceil(S).min(oh);
            let in1 = if ih + pt >= K { ((ih + pt - K) / S + 1).min(oh).max(in0) } else { in0 };
            for oy in (0..in0).chain(in1..oh) {
                border_row::<V, K, S>(&p, oy);
            }
            let mut oy = in0;
            while oy + 4 <= in1 {
                rows::<V, K, S, 4>(&p, oy);
                oy += 4;
            }
            while oy < in1 {
                rows::<V, K, S, 1>(&p, oy);
                oy += 1;
            }
        }
    }

    /// One plane's operands, as [`plane`] prepared them.
    struct Plane<'a, V, const K: usize> {
        x: *const f32,
        y: *mut f32,
        win: &'a Window2,
        /// The prepared masked loads, per block of the row.
        loads: *const (isize, u16),
        /// The output columns `a..b` that blocks of full loads cover ([`full_columns`]), when at least a vector wide
        /// and the masked blocks at the row's ends cover the rest.
        full: Option<(usize, usize)>,
        /// The weights, bias and clamp bounds, broadcast.
        wv: [[V; K]; K],
        vb: V,
        ends: Option<(V, V)>,
    }

    impl<V: RowVec, const K: usize> Plane<'_, V, K> {
        /// Stores R output rows from `oy0` of the block at column `ox0` (lanes `mask`), clamped.
        ///
        /// # Safety
        /// The CPU has `V`'s instruction set; the rows and the masked lanes are inside the output plane.
        #[inline(always)]
        unsafe fn put<const R: usize>(&self, acc: [V; R], oy0: usize, ox0: usize, mask: u16) {
            let ow = self.win.ow;
            for (r, &a) in acc.iter().enumerate() {
                let v = match self.ends {
                    Some((lo, hi)) => unsafe { V::clamp(a, lo, hi) },
                    None => a,
                };
                // SAFETY: the contract.
                unsafe { V::store(mask, self.y.add((oy0 + r) * ow + ox0), v) };
            }
        }
    }

    /// The output columns `a..b` of `win` whose blocks (K×K, stride S, `lanes` pixels) load only columns inside
    /// the input row: from the first column whose window starts inside the row to the last block start whose
    /// loads end inside it (stride 2 loads `2·lanes` columns per pair of taps). `None` when narrower than a vector.
    pub(in super::super) fn full_columns(win: &Window2, k: usize, s: usize, lanes: usize) -> Option<(usize, usize)> {
        let pl = win.pad.1;
        let a = pl.div_ceil(s);
        // columns a block starting at output column ox reads: from ox·s − pl to ox·s − pl + extent
        let extent = if s == 1 { k - 1 + lanes - 1 } else { 2 * (k.div_ceil(2) - 1) + 2 * lanes - 1 };
        let last_start = (win.iw + pl).checked_sub(1 + extent)? / s;
        let b = (last_start + lanes).min(win.ow);
        (b >= a + lanes).then_some((a, b))
    }

    /// Output rows `oy0..oy0 + R`, whose windows lie inside the input rows, block by block: R independent FMA chains
    /// per block (one chain per output, 9 or 25 long, would leave the FMA units waiting on its latency), each
    /// input vector loaded once for the R rows ([`block`]). Where the plane is wide
    /// enough ([`Plane::full`]), blocks of plain loads cover the columns between the row's first and last vector
    /// (all of it when no border column needs a mask; the last block overlapping its neighbour, the same sums
    /// written twice) and the first and last blocks of the row grid, with their prepared masked loads, the
    /// columns at the ends; else every block follows the prepared masked loads. Each output sums bias, then its
    /// taps in (ky, kx) order, a column in the padding adding 0·w.
    ///
    /// # Safety
    /// As [`plane`], with input rows `oy0·S − pt .. (oy0 + R − 1)·S − pt + K` inside the plane.
    #[inline(always)]
    unsafe fn rows<V: RowVec, const K: usize, const S: usize, const R: usize>(p: &Plane<V, K>, oy0: usize) {
        let (iw, ow) = (p.win.iw, p.win.ow);
        let l = V::LANES;
        let last = (ow - 1) / l;
        let per = loads_per_block(K, S);
        // SAFETY (whole body): the rows read are inside the plane (contract), within a row only columns inside it
        // (full blocks: full_columns; masked blocks: the lanes a prepared mask enables, masked-off lanes are not
        // accessed); each store writes the lanes of one block inside an output row oy0 + r < oh.
        unsafe {
            let row0 = p.x.add((oy0 * S - p.win.pad.0) * iw);
            let Some((a, b)) = p.full else {
                for bi in 0..=last {
                    let acc = block::<V, K, S, R, false>(row0, p.loads.add(bi * per), iw, p);
                    p.put(acc, oy0, bi * l, store_mask::<V>(bi * l, ow));
                }
                return;
            };
            // masked blocks at the ends where a border column needs one; full blocks cover the columns between
            let (left, right) = (a > 0, b < ow);
            let (a, b) = (if left { l } else { 0 }, if right { last * l } else { ow });
            let pl = p.win.pad.1;
            let mut ox = a;
            while ox < b {
                let o = ox.min(b - l);
                let acc = block::<V, K, S, R, true>(row0.add(o * S - pl), std::ptr::null(), iw, p);
                p.put(acc, oy0, o, V::FULL);
                ox += l;
            }
            if left {
                p.put(block::<V, K, S, R, false>(row0, p.loads, iw, p), oy0, 0, V::FULL);
            }
            if right {
                p.put(block::<V, K, S, R, false>(row0, p.loads.add(last * per), iw, p), oy0, last * l, store_mask::<V>(last * l, ow));
            }
        }
    }

    /// The sums of one block of output pixels in R output rows (see [`rows`]) from `x`, the group's first input row
    /// (`FULL`: at the block's first input column; else at column 0, with the block's prepared loads at `ld`).
    /// Input row by input row: each tap vector is loaded once and multiplied into every output row whose window
    /// holds it (loads, not FMAs, bound this loop with AVX2 on Zen 3: unaligned loads that cross cache lines).
    ///
    /// # Safety
    /// As [`rows`].
    #[inline(always)]
    unsafe fn block<V: RowVec, const K: usize, const S: usize, const R: usize, const FULL: bool>(x: *const f32, ld: *const (isize, u16), iw: usize, p: &Plane<V, K>) -> [V; R] {
        let mut acc = [p.vb; R];
        for t in 0..(R - 1) * S + K {
            for kx in 0..K {
                // SAFETY: the contract.
                let v = unsafe { tap::<V, S, FULL>(x.wrapping_add(t * iw), ld, kx) };
                for (r, a) in acc.iter_mut().enumerate() {
                    // input row t is tap row ky = t − r·S of output row r
                    if t >= r * S && t - r * S < K {
                        *a = unsafe { V::fmadd(v, p.wv[t - r * S][kx], *a) };
                    }
                }
            }
        }
        acc
    }

    /// Output row `oy` whose window reaches into the top or bottom padding: the taps of its rows inside the
    /// input, block by block through the prepared masked loads.
    ///
    /// # Safety
    /// As [`plane`], with `oy < oh`.
    #[inline(always)]
    unsafe fn border_row<V: RowVec, const K: usize, const S: usize>(p: &Plane<V, K>, oy: usize) {
        let win = p.win;
        let (ih, iw, ow) = (win.ih as isize, win.iw as isize, win.ow);
        let per = loads_per_block(K, S);
        let iy0 = (oy * S) as isize - win.pad.0 as isize;
        let ky0 = (-iy0).max(0) as usize;
        let ky1 = (ih - iy0).clamp(0, K as isize) as usize;
        // SAFETY: rows iy0 + ky for ky in ky0..ky1 are inside the plane; the masked loads read only columns inside
        // the row; the stores write the lanes of one block inside output row oy.
        unsafe {
            for bi in 0..ow.div_ceil(V::LANES) {
                let ld = p.loads.add(bi * per);
                let mut acc = p.vb;
                for ky in ky0..ky1 {
                    let row = p.x.offset((iy0 + ky as isize) * iw);
                    for kx in 0..K {
                        acc = V::fmadd(tap::<V, S, false>(row, ld, kx), p.wv[ky][kx], acc);
                    }
                }
                p.put([acc], oy, bi * V::LANES, store_mask::<V>(bi * V::LANES, ow));
            }
        }
    }

    /// [`plane`] with AVX-512 vectors.
    ///
    /// # Safety
    /// As [`plane`], on a CPU with AVX-512F.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn plane_avx512<const K: usize, const S: usize>(x: &[f32], win: &Window2, w: &[f32], bias: f32, loads: &[(isize, u16)], y: &mut [f32], clamp: Option<(f32, f32)>) {
        // SAFETY: the contract.
        unsafe { plane::<Avx512, K, S>(x, win, w, bias, loads, y, clamp) }
    }

    /// [`plane`] with AVX2 vectors.
    ///
    /// # Safety
    /// As [`plane`], on a CPU with AVX2 and FMA.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn plane_avx2<const K: usize, const S: usize>(x: &[f32], win: &Window2, w: &[f32], bias: f32, loads: &[(isize, u16)], y: &mut [f32], clamp: Option<(f32, f32)>) {
        // SAFETY: the contract.
        unsafe { plane::<Avx2, K, S>(x, win, w, bias, loads, y, clamp) }
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{is_prepared, prepared_and_ordinary};
    use crate::ir::{Activation, AutoPad, ConvAttrs};

    #[test]
    fn lane_masks() {
        assert_eq!(super::lane_mask(0, 40, 16), u16::MAX);
        assert_eq!(super::lane_mask(-1, 40, 16), 0xFFFE);
        assert_eq!(super::lane_mask(-2, 40, 16), 0xFFFC);
        assert_eq!(super::lane_mask(30, 40, 16), 0x03FF);
        assert_eq!(super::lane_mask(-1, 7, 16), 0x00FE);
        assert_eq!(super::lane_mask(40, 40, 16), 0);
        assert_eq!(super::lane_mask(-20, 40, 16), 0);
        assert_eq!(super::lane_mask(-16, 40, 16), 0);
        assert_eq!(super::lane_mask(-15, 40, 16), 0x8000);
        // 8 lanes
        assert_eq!(super::lane_mask(0, 40, 8), 0xFF);
        assert_eq!(super::lane_mask(-1, 40, 8), 0xFE);
        assert_eq!(super::lane_mask(35, 40, 8), 0x1F);
        assert_eq!(super::lane_mask(-1, 5, 8), 0x3E);
        assert_eq!(super::lane_mask(-8, 40, 8), 0);
        assert_eq!(super::lane_mask(-7, 40, 8), 0x80);
    }

    /// The row kernel against the portable direct kernel on the same node (the same FMA chain per output, so
    /// equal values): 3×3 and 5×5, stride 1 and 2, symmetric, asymmetric (TensorFlow's SAME at stride 2) and no
    /// padding, widths below, at and across the 16 lanes, a depth multiplier of 2, a batch of 2, with and without
    /// bias, clamping and non-clamping activations, on 1 and 2 threads.
    #[test]
    fn rows_equal_the_direct_kernel() {
        // the CPU's vector, and AVX2's where that is AVX-512
        let avx2 = |g: &crate::ir::Graph, n: usize| super::prepare_for(g, n, crate::runtime::kernels::numeric::vector::avx2_fma().then_some((8, false)));
        let kernels: Vec<fn(&crate::ir::Graph, usize) -> Option<Box<dyn crate::runtime::kernels::PreparedKernel>>> = match super::row_vector() {
            None => return,
            Some((_, true)) => vec![super::prepare, avx2],
            Some(_) => vec![super::prepare],
        };
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
            // rows of 7 over planes the channel-lane kernel declines (over 144 pixels: with AVX-512 it takes
            // smaller planes with rows under MIN_WIDTH_512)
            (vec![1, 2, 40, 5], vec![2, 1, 3, 3], attrs(3, 1, [2, 2, 2, 2], 2, Some(Activation::Relu)), true),
            (vec![1, 2, 30, 5], vec![2, 1, 3, 3], attrs(3, 1, [2, 2, 2, 2], 2, None), true),
            (vec![1, 64, 30, 30], vec![64, 1, 3, 3], attrs(3, 1, [1, 1, 1, 1], 64, Some(Activation::Relu6)), true),
            (vec![2, 48, 33, 33], vec![48, 1, 3, 3], attrs(3, 2, [1, 1, 1, 1], 48, Some(Activation::Relu6)), false),
        ];
        for (seed, (xs, ws, a, with_bias)) in cases.into_iter().enumerate() {
            for (threads, &prepare) in [1, 2].into_iter().flat_map(|t| kernels.iter().map(move |k| (t, k))) {
                let (got, want) = prepared_and_ordinary(&xs, &ws, &a, with_bias, seed as u64, prepare, threads);
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
        // with 16 lanes, rows of 8 over a plane the channel-lane kernel takes go to that kernel; with 8 lanes not
        let (xs, a) = (vec![1, 240, 8, 8], attrs(3, 1, [1, 1, 1, 1], 240, None));
        let ws = [240, 1, 3, 3];
        let wide = |g: &crate::ir::Graph, n: usize| super::prepare_for(g, n, Some((16, true)));
        assert!(!is_prepared(&xs, &ws, &a, wide));
        if crate::runtime::kernels::numeric::vector::avx2_fma() {
            assert!(is_prepared(&xs, &ws, &a, avx2));
        }
    }
}
