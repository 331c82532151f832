//! f32 3×3 stride-1 convolutions by Winograd's minimal filtering F(2×2, 3×3) (Lavin & Gray, "Fast Algorithms for
//! Convolutional Neural Networks", 2016): each 2×2 block of output pixels of an output channel is
//! `Aᵀ [ Σ_c (G g G ᵀ) ⊙ (Bᵀ d B) ] A` over the 4×4 input tiles `d` that overlap it, so the 36 multiplications of
//! a direct 2×2 block become 16, and the sum over input channels becomes 16 independent GEMMs
//! `M_ξ (out channels × tiles) = U_ξ (out × in channels) · V_ξ (in channels × tiles)`, one per position ξ of the
//! 4×4 transformed tile: 2.25× fewer multiply-adds than the im2col GEMM, and no im2col matrix nine times the
//! input's size. The transformed weights `U_ξ = (G g Gᵀ)_ξ` are computed and packed into the GEMM kernel's panels
//! once, when the session is planned.
//!
//! ```text
//! Bᵀ = [1  0 -1  0]    G = [1    0    0 ]    Aᵀ = [1  1  1  0]
//!      [0  1  1  0]        [1/2  1/2  1/2]         [0  1 -1 -1]
//!      [0 -1  1  0]        [1/2 -1/2  1/2]
//!      [0  1  0 -1]        [0    0    1 ]
//! ```
//!
//! A run works on blocks of whole tile rows (tasks over images, blocks and, when those are too few for the
//! threads, blocks of output channels): the input transform reads each
//! padded input row split into its even and odd columns, so every tile's four columns are plain slices and the
//! transforms are element-wise loops over a row of tiles that LLVM vectorises; then the 16 GEMMs; then the
//! output transform, bias and fused activation, written straight into the output rows. Rounding differs from the
//! direct sum (the transforms add before multiplying): within a few ulps of the sums' magnitude, checked against
//! the direct kernel in the tests.
//!
//! Used where it wins, measured with `tpu-sdk bench` at 1 thread against the packed im2col path on single
//! convolutions (AMD EPYC Zen 4; ms, Winograd / im2col): 64→64 ch 32×32 0.54 / 0.95 (onnxruntime 0.67),
//! 16→32 ch 128×128 1.41 / 2.09, 512→512 ch 7×7 3.14 / 3.83, 64→64 ch 6×6 0.046 / 0.067, 8→16 ch 64×64
//! 0.151 / 0.165; it loses at 4→16 ch 64×64 (0.111 / 0.087) and 256→256 ch 4×4 (0.37 / 0.26). After the im2col
//! path's AVX-512 tile and panels (AMD EPYC Zen 5, 1 thread, with SiLU): 64→64 ch 32×32 0.36 / 0.40 and 128→128
//! ch 16×16 0.30 / 0.37 still win, but 16→16 ch 64×64 0.20 / 0.16, 32→32 ch 64×64 0.49 / 0.47, 32→32 ch 32×32
//! 0.134 / 0.121, 8→16 ch 64×64 0.139 / 0.088, 64→64 ch 16×16 0.106 / 0.101, 64→64 ch 8×8 0.041 / 0.029 and
//! 128→128 ch 8×8 0.100 / 0.098 lose (the transforms cost per channel and pixel, the saved multiply-adds per
//! channel pair and pixel: few channels do not repay them). Hence at least [`MIN_CHANNELS`] input and output
//! channels and output pixels times the smaller channel count of at least [`MIN_CHANNEL_PIXELS`]. The transformed
//! weights are 16/9 the size of the weights: in a whole network the late layers' (512→512 ch: 16.8 MB) push the
//! next layers' weights out of the 32 MB L3, and in ResNet-18 at 128×128 the 512-channel convolution after a
//! Winograd layer went from 1.7 to 2.9 ms. So weights over [`SMALL_WEIGHTS_BYTES`] transformed take Winograd only
//! from [`MIN_PIXELS_LARGE_WEIGHTS`] output pixels, where each weight serves many tiles. Other 3×3 convolutions
//! take the packed im2col path (`TPU_SDK_NO_WINOGRAD=1` sends them all there, for comparisons).
//! x86-64 with AVX2/FMA only (the packed GEMM's CPUs).

use std::cell::RefCell;

use super::super::matmul::{bias_act, for_each_task, row_blocks, threads, BlockOut};
use super::super::numeric::{gemm_packed_a_panels, vector::avx2_copy, Epi, PackedA, MR_PACKED as MR, NR_PACKED as NR};
use super::super::{PreparedKernel, Scratch};
use crate::ir::ops::conv::ConvPlan;
use crate::ir::{Activation, ConvAttrs, Graph, Tensor};

/// Fewest input and output channels for which the transforms pay off.
pub(super) const MIN_CHANNELS: usize = 64;
/// Fewest output pixels (per image) times the smaller channel count for which the transforms pay off.
pub(super) const MIN_CHANNEL_PIXELS: usize = 1 << 15;
/// Transformed weights up to this size (bytes) are used at [`MIN_PIXELS`]; larger ones only from
/// [`MIN_PIXELS_LARGE_WEIGHTS`] output pixels.
pub(super) const SMALL_WEIGHTS_BYTES: usize = 1 << 20;
/// Fewest output pixels for layers whose transformed weights exceed [`SMALL_WEIGHTS_BYTES`].
pub(super) const MIN_PIXELS_LARGE_WEIGHTS: usize = 256;

/// Fewest multiply-adds of the direct convolution for which a run splits its blocks between threads.
const PAR_MIN_MACS: usize = 1 << 22;

/// A prepared F(2×2, 3×3) convolution.
#[derive(Debug)]
struct Winograd {
    attrs: ConvAttrs,
    w_shape: Vec<usize>,
    /// `U_ξ`, ξ = 4·i + j of the 4×4 transformed tile: `m × c`, packed.
    u: Vec<PackedA>,
}

/// A thread's buffers, kept between runs: the transformed input block (16 matrices `V_ξ`, `c × tiles`, in the GEMM's
/// packed-B panels), the 16 GEMMs' results, and the input transform's row buffers.
#[derive(Default)]
struct Bufs {
    v: Vec<f32>,
    m: Vec<f32>,
    rows: RowBufs,
}

/// The input transform's working rows (see [`input_transform`]).
#[derive(Default)]
struct RowBufs {
    ev: Vec<f32>,
    od: Vec<f32>,
    padded: Vec<f32>,
    t: Vec<f32>,
}

thread_local! {
    static BUFS: RefCell<Bufs> = RefCell::new(Bufs::default());
}

/// The prepared kernel of Conv node `n` when it is a 3×3, stride 1, dilation 1, ungrouped f32 2-D convolution
/// with constant weights, large enough to gain (see the module documentation).
pub(in crate::runtime::kernels) fn prepare(g: &Graph, n: usize) -> Option<Box<dyn PreparedKernel>> {
    build(g, n, true)
}

/// [`prepare`], with the size rule (`gains`) or without it (the tests' small convolutions).
fn build(g: &Graph, n: usize, gains: bool) -> Option<Box<dyn PreparedKernel>> {
    let (attrs, p, w, w_shape) = super::constant_f32_conv(g, n)?;
    if w_shape.len() != 4 {
        return None;
    }
    let geo = &p.geom;
    if p.group != 1 || geo.rank != 2 || geo.k[1..] != [3, 3] || geo.s[1..] != [1, 1] || geo.d[1..] != [1, 1] {
        return None;
    }
    if gains && (p.c.min(p.m) < MIN_CHANNELS || geo.out_size() * p.c.min(p.m) < MIN_CHANNEL_PIXELS) {
        return None;
    }
    // 16/9 of the weights' bytes: where few pixels reuse them, the larger weights cost more memory traffic than the
    // saved multiply-adds (and crowd the other layers' weights out of the cache)
    if gains && geo.out_size() < MIN_PIXELS_LARGE_WEIGHTS && 16 * p.m * p.c * 4 > SMALL_WEIGHTS_BYTES {
        return None;
    }
    let u = transformed_weights(w, p.m, p.c)?;
    Some(Box::new(Winograd { attrs: attrs.clone(), w_shape: w_shape.to_vec(), u }))
}

/// `U = G g Gᵀ` for every (out, in) channel pair of the `[m, c, 3, 3]` weights, as 16 packed `m × c` matrices.
fn transformed_weights(w: &[f32], m: usize, c: usize) -> Option<Vec<PackedA>> {
    const G: [[f32; 3]; 4] = [[1.0, 0.0, 0.0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0.0, 0.0, 1.0]];
    let mut u = vec![vec![0f32; m * c]; 16];
    for oc in 0..m {
        for ic in 0..c {
            let g = w.get((oc * c + ic) * 9..(oc * c + ic + 1) * 9)?;
            // G·g (4×3), then (G·g)·Gᵀ (4×4)
            let mut gg = [[0f32; 3]; 4];
            for (i, row) in gg.iter_mut().enumerate() {
                for (b, v) in row.iter_mut().enumerate() {
                    *v = (0..3).map(|a| G[i][a] * g[a * 3 + b]).sum();
                }
            }
            for i in 0..4 {
                for j in 0..4 {
                    u[i * 4 + j][oc * c + ic] = (0..3).map(|b| gg[i][b] * G[j][b]).sum();
                }
            }
        }
    }
    u.iter().map(|ux| PackedA::new(ux, m, c)).collect()
}

impl PreparedKernel for Winograd {
    fn run(&self, inputs: &[Option<&Tensor>], outputs: &mut [Tensor], _scratch: &mut Scratch) -> Result<(), String> {
        let fits = |p: &ConvPlan| self.u[0].m() == p.m && self.u[0].k() == p.c && p.group == 1 && p.geom.rank == 2;
        let Some((p, xv, bv, y)) = super::prepared_operands(inputs, outputs, &self.w_shape, &self.attrs, fits)? else { return Ok(()) };
        let geo = &p.geom;
        let (ih, iw, oh, ow) = (geo.inp[1], geo.inp[2], geo.out[1], geo.out[2]);
        let s = Shape { c: p.c, m: p.m, ih, iw, oh, ow, pt: geo.pb[1], pl: geo.pb[2], th: oh.div_ceil(2), tw: ow.div_ceil(2) };
        // blocks of tile rows: the transformed block and the GEMM results about 384 KiB each (L2), then smaller
        // until there are two tasks per thread
        // below PAR_MIN_MACS direct multiply-adds the fork-join and the smaller blocks' GEMMs cost more than a
        // second thread saves (PP-OCRv4's 96 → 24 channel 8×8 convolutions: 0.10 ms at 1 thread, 0.21 at 2)
        let threads = if p.n * p.m * p.c * 9 * geo.out_size() >= crate::runtime::spin_pool::min_work(PAR_MIN_MACS) { threads() } else { 1 };
        let per_block = (6144 / p.c.max(p.m)).max(16);
        let mut rows = (per_block / s.tw).clamp(1, s.th);
        // halved while there are under two tasks per thread, but not below one GEMM panel of tiles: narrower
        // blocks computed mostly padding in the kernel's columns and streamed the whole transformed weights once
        // per block (YOLO's 128-channel 8×8 convolutions took 0.27 ms at 1 thread and 0.45 ms at 2)
        while threads > 1 && rows > 1 && p.n * s.th.div_ceil(rows) < 2 * threads && rows.div_ceil(2) * s.tw >= NR {
            rows = rows.div_ceil(2);
        }
        let blocks = s.th.div_ceil(rows);
        let par = threads > 1;
        // then blocks of output channels, one per thread: each such task repeats its tile block's input transform
        // (with four parts per thread, YOLO's 128-channel 8×8 convolution took 0.58 ms at 2 threads, 0.29 at 1)
        let (parts, per_part) = row_blocks(par, p.n * blocks, threads, s.m, MR);
        let par = par && p.n * blocks * parts > 1;
        let out = BlockOut::new(y);
        for_each_task(p.n * blocks * parts, par, |t| {
            let (part, t) = (t % parts, t / parts);
            let (img, blk) = (t / blocks, t % blocks);
            let ty0 = blk * rows;
            let ty1 = (ty0 + rows).min(s.th);
            let (oc0, mr) = (part * per_part, per_part.min(s.m - part * per_part));
            let xs = &xv[img * p.c * ih * iw..(img + 1) * p.c * ih * iw];
            BUFS.with(|bufs| {
                let Bufs { v, m: mb, rows: rb } = &mut *bufs.borrow_mut();
                let tc = (ty1 - ty0) * s.tw;
                let panels = tc.div_ceil(NR);
                v.resize(16 * s.c * panels * NR, 0.0);
                mb.resize(16 * mr * tc, 0.0);
                input_transform(&s, xs, ty0, ty1, v, rb);
                for (xi, u) in self.u.iter().enumerate() {
                    // SAFETY: V_ξ's panels (ceil(tc / NR) of NR·c values) start at v[ξ·c·panels·NR], M_ξ's rows
                    // oc0..oc0 + mr (mr × tc) at mb[ξ·mr·tc]; both inside their buffers (sized above) and this
                    // thread's own; oc0 is a multiple of the panel height (row_blocks).
                    unsafe { gemm_packed_a_panels(u, oc0, mr, v.as_ptr().add(xi * s.c * panels * NR), tc, 1.0, mb.as_mut_ptr().add(xi * mr * tc), tc as isize, Epi::NONE) };
                }
                output_transform(&s, mb, img, ty0, ty1, (oc0, oc0 + mr), bv, self.attrs.activation, &out);
            });
        });
        Ok(())
    }

    fn holds_input(&self, k: usize) -> bool {
        k == 1
    }
}

/// The sizes a run works with: channels, input and output planes, the top and left pads, tile rows and columns.
#[derive(Clone, Copy, Debug)]
struct Shape {
    c: usize,
    m: usize,
    ih: usize,
    iw: usize,
    oh: usize,
    ow: usize,
    pt: usize,
    pl: usize,
    th: usize,
    tw: usize,
}

avx2_copy!(
    /// `V_ξ[ch][t] = (Bᵀ d B)_ξ` for every input channel and tile `t` of tile rows `ty0..ty1` (t counted from the
    /// block's first tile), into `v` in the GEMM's packed-B layout: per ξ, panels of NR tiles, element (ch, t) at
    /// `ξ·c·panels·NR + (t / NR)·NR·c + ch·NR + t % NR`, so the GEMMs read it without packing it again. Each padded
    /// row of a channel is split once into its even columns `ev` and odd columns `od` (`tw + 1` each, zero outside
    /// the input), so tile `tx`'s columns are `ev[tx]`, `od[tx]`, `ev[tx + 1]`, `od[tx + 1]`: slices, and the
    /// transforms vectorise over a row of tiles.
    fn input_transform(s: &Shape, x: &[f32], ty0: usize, ty1: usize, v: &mut [f32], b: &mut RowBufs) => input_transform_body);

#[inline(always)]
fn input_transform_body(s: &Shape, x: &[f32], ty0: usize, ty1: usize, v: &mut [f32], b: &mut RowBufs) {
    let (tw, tc) = (s.tw, (ty1 - ty0) * s.tw);
    let per_xi = s.c * tc.div_ceil(NR) * NR;
    let w2 = tw + 1;
    // the block's padded rows 2·ty0 .. 2·ty1 + 2 of one channel, split into even and odd columns
    let nrows = 2 * (ty1 - ty0) + 2;
    for buf in [&mut b.ev, &mut b.od] {
        buf.clear();
        buf.resize(nrows * w2, 0.0);
    }
    b.padded.clear();
    b.padded.resize(2 * w2, 0.0);
    // per tile row: the column transform of each of the 4 rows, [4][4][tw]
    b.t.resize(16 * tw, 0.0);
    let RowBufs { ev, od, padded, t } = b;
    let n = s.iw.min((2 * w2).saturating_sub(s.pl));
    for ch in 0..s.c {
        let plane = &x[ch * s.ih * s.iw..(ch + 1) * s.ih * s.iw];
        for rr in 0..nrows {
            let r = 2 * ty0 + rr;
            let (e, o) = (&mut ev[rr * w2..(rr + 1) * w2], &mut od[rr * w2..(rr + 1) * w2]);
            if r < s.pt || r - s.pt >= s.ih {
                e.fill(0.0);
                o.fill(0.0);
                continue;
            }
            // only the pads and the part past the input stay zero from the fill
            padded[..s.pl].fill(0.0);
            padded[s.pl + n..].fill(0.0);
            padded[s.pl..s.pl + n].copy_from_slice(&plane[(r - s.pt) * s.iw..][..n]);
            for ((pair, e), o) in padded.chunks_exact(2).zip(e.iter_mut()).zip(o.iter_mut()) {
                *e = pair[0];
                *o = pair[1];
            }
        }
        for ty in ty0..ty1 {
            // d B: per row i, [d0 − d2, d1 + d2, d2 − d1, d1 − d3]
            for i in 0..4 {
                let rr = 2 * (ty - ty0) + i;
                let (e, o) = (&ev[rr * w2..(rr + 1) * w2], &od[rr * w2..(rr + 1) * w2]);
                let (t0, rest) = t[i * 4 * tw..(i + 1) * 4 * tw].split_at_mut(tw);
                let (t1, rest) = rest.split_at_mut(tw);
                let (t2, t3) = rest.split_at_mut(tw);
                let (e0, e1, o0, o1) = (&e[..tw], &e[1..], &o[..tw], &o[1..]);
                for tx in 0..tw {
                    t0[tx] = e0[tx] - e1[tx];
                    t1[tx] = o0[tx] + e1[tx];
                    t2[tx] = e1[tx] - o0[tx];
                    t3[tx] = o0[tx] - o1[tx];
                }
            }
            // Bᵀ (d B): per column j, [r0 − r2, r1 + r2, r2 − r1, r1 − r3] over rows, written in runs that stay
            // inside one panel
            let base = (ty - ty0) * tw;
            let mut tx = 0;
            while tx < tw {
                let tile = base + tx;
                let len = (NR - tile % NR).min(tw - tx);
                let at = (tile / NR) * NR * s.c + ch * NR + tile % NR;
                for j in 0..4 {
                    let row = |i: usize| &t[(i * 4 + j) * tw + tx..][..len];
                    let (r0, r1, r2, r3) = (row(0), row(1), row(2), row(3));
                    let d = |f: usize| (f * 4 + j) * per_xi + at;
                    v[d(0)..d(0) + len].iter_mut().zip(r0).zip(r2).for_each(|((d, a), b)| *d = a - b);
                    v[d(1)..d(1) + len].iter_mut().zip(r1).zip(r2).for_each(|((d, a), b)| *d = a + b);
                    v[d(2)..d(2) + len].iter_mut().zip(r2).zip(r1).for_each(|((d, a), b)| *d = a - b);
                    v[d(3)..d(3) + len].iter_mut().zip(r1).zip(r3).for_each(|((d, a), b)| *d = a - b);
                }
                tx += len;
            }
        }
    }
}

avx2_copy!(
    /// `Y = Aᵀ M A` of every tile of tile rows `ty0..ty1` and output channel in `ocs` (M holds those channels'
    /// rows only), plus the bias, through the activation, into image `img`'s output rows `2·ty0..2·ty1` (those
    /// inside the output).
    #[allow(clippy::too_many_arguments)] fn output_transform(s: &Shape, mb: &[f32], img: usize, ty0: usize, ty1: usize, ocs: (usize, usize), bias: Option<&[f32]>, act: Option<Activation>, out: &BlockOut<f32>) => output_transform_body);

#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn output_transform_body(s: &Shape, mb: &[f32], img: usize, ty0: usize, ty1: usize, ocs: (usize, usize), bias: Option<&[f32]>, act: Option<Activation>, out: &BlockOut<f32>) {
    let (tw, tc) = (s.tw, (ty1 - ty0) * s.tw);
    let (oc0, mr) = (ocs.0, ocs.1 - ocs.0);
    let mut sr = vec![0f32; 8 * tw]; // Aᵀ M: [2][4][tw]
    let mut rows = vec![0f32; 4 * tw]; // two output rows of 2·tw columns
    for oc in ocs.0..ocs.1 {
        for ty in ty0..ty1 {
            let base = (ty - ty0) * tw;
            let m = |xi: usize| &mb[(xi * mr + oc - oc0) * tc + base..][..tw];
            for j in 0..4 {
                let (m0, m1, m2, m3) = (m(j), m(4 + j), m(8 + j), m(12 + j));
                let (s0, s1) = sr.split_at_mut(4 * tw);
                let (s0, s1) = (&mut s0[j * tw..(j + 1) * tw], &mut s1[j * tw..(j + 1) * tw]);
                for tx in 0..tw {
                    s0[tx] = m0[tx] + m1[tx] + m2[tx];
                    s1[tx] = m1[tx] - m2[tx] - m3[tx];
                }
            }
            for p in 0..2 {
                let sp = |j: usize| &sr[(p * 4 + j) * tw..(p * 4 + j + 1) * tw];
                let (a0, a1, a2, a3) = (sp(0), sp(1), sp(2), sp(3));
                let row = &mut rows[p * 2 * tw..(p + 1) * 2 * tw];
                for tx in 0..tw {
                    row[2 * tx] = a0[tx] + a1[tx] + a2[tx];
                    row[2 * tx + 1] = a1[tx] - a2[tx] - a3[tx];
                }
            }
            for p in 0..2 {
                let oy = 2 * ty + p;
                if oy >= s.oh {
                    break;
                }
                let row = &rows[p * 2 * tw..p * 2 * tw + s.ow];
                // SAFETY: output row oy of channel oc of image img: this task's tile rows, written by no other task.
                let dst = unsafe { out.row(((img * s.m + oc) * s.oh + oy) * s.ow, s.ow) };
                dst.copy_from_slice(row);
            }
        }
        // the bias and activation over the channel's rows of this task at once (they are adjacent): per output row,
        // a small plane's 8 values a call ran the vector loop's remainder path (SiLU on 128 channels of 8×8 took
        // a fifth of the convolution)
        if bias.is_some() || act.is_some() {
            let (oy0, oy1) = (2 * ty0, (2 * ty1).min(s.oh));
            // SAFETY: output rows oy0..oy1 of channel oc of image img: this task's, written just above.
            let dst = unsafe { out.row(((img * s.m + oc) * s.oh + oy0) * s.ow, (oy1 - oy0) * s.ow) };
            bias_act(dst, bias.map(|b| b[oc]), act);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{prepared_and_ordinary, rnd};
    use crate::ir::infer::infer_graph;
    use crate::ir::{Activation, AutoPad, ConvAttrs, DType, Graph, Op, Tensor};
    use crate::runtime::CpuEval;

    /// The Winograd kernel against the direct (im2col) kernel on the same node, on 1 and 2 threads: even and odd
    /// output sizes, pads 0, 1 and asymmetric, a batch of 2, channel counts across the GEMM panel height, bias and
    /// activations, a plane of one tile block split by output channels; smaller convolutions are declined.
    #[test]
    fn winograd_equals_the_direct_convolution() {
        let attrs = |pads: [usize; 4], act| ConvAttrs {
            kernel_shape: vec![3, 3],
            strides: vec![1, 1],
            dilations: vec![1, 1],
            pads: pads.to_vec(),
            auto_pad: AutoPad::NotSet,
            group: 1,
            activation: act,
        };
        let cases = vec![
            (vec![1, 16, 8, 8], 16, attrs([1, 1, 1, 1], None), true),
            (vec![2, 19, 11, 9], 23, attrs([1, 1, 1, 1], Some(Activation::Relu)), true),
            (vec![1, 32, 12, 13], 17, attrs([0, 0, 0, 0], None), false),
            (vec![1, 16, 10, 10], 40, attrs([0, 1, 2, 1], Some(Activation::Clip { min: 0.0, max: 6.0 })), true),
            (vec![1, 64, 32, 32], 64, attrs([1, 1, 1, 1], Some(Activation::Silu)), true),
            // one block of tiles (8×8 outputs) split into output-channel parts on two threads, a partial last part
            (vec![1, 120, 8, 8], 121, attrs([1, 1, 1, 1], Some(Activation::Relu)), true),
            (vec![2, 96, 6, 6], 100, attrs([1, 1, 1, 1], None), false),
        ];
        for (seed, (xs, m, a, with_bias)) in cases.into_iter().enumerate() {
            for threads in [1, 2] {
                let (got, want) = prepared_and_ordinary(&xs, &[m, xs[1], 3, 3], &a, with_bias, seed as u64, |g, n| super::build(g, n, false), threads);
                let scale = want.as_f32().unwrap().iter().fold(0f32, |s, v| s.max(v.abs()));
                for (i, (p, q)) in got.as_f32().unwrap().iter().zip(want.as_f32().unwrap()).enumerate() {
                    assert!((p - q).abs() <= 1e-5 * scale.max(1.0), "case {seed}, {threads} threads: element {i}: {p} vs {q}");
                }
            }
        }
        // too few channels or pixels (32 → 32 over 32×32, 64 → 64 over 16×16), a stride or a group: declined
        // (and large weights over few pixels: 256 → 256 channels over 8×8 outputs); taken: 64 → 64 over 32×32,
        // 128 → 128 over 16×16
        let sizes = [
            (vec![1, 4, 16, 16], 16, 1, 1, false),
            (vec![1, 32, 34, 34], 32, 1, 1, false),
            (vec![1, 64, 18, 18], 64, 1, 1, false),
            (vec![1, 16, 16, 16], 16, 2, 1, false),
            (vec![1, 32, 16, 16], 32, 1, 2, false),
            (vec![1, 256, 10, 10], 256, 1, 1, false),
            (vec![1, 64, 34, 34], 64, 1, 1, true),
            (vec![1, 128, 18, 18], 128, 1, 1, true),
        ];
        for (xs, m, strides, group, taken) in sizes {
            let mut g = Graph::new("c");
            let x = g.add_input("x", DType::F32, xs.clone());
            let w = g.add_constant("w", Tensor::from_f32(vec![m, xs[1] / group, 3, 3], rnd(m * xs[1] / group * 9, 3)));
            let y = g.add_value("y", DType::F32, vec![]);
            let mut a = attrs([0, 0, 0, 0], None);
            a.strides = vec![strides; 2];
            a.group = group;
            g.add_node("conv", Op::Conv(a), vec![Some(x), Some(w), None], vec![y]);
            g.outputs.push(y);
            infer_graph(&mut g, &CpuEval).unwrap();
            assert_eq!(super::prepare(&g, 0).is_some(), taken, "{xs:?} stride {strides} group {group}");
        }
    }
}
