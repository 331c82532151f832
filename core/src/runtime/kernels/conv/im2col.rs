//! General convolution: im2col into a column tile, then a GEMM with the bias/activation epilogue.
//!
//! The output pixels of each (image, group) are cut into tiles; a task builds the `K × tile` column
//! matrix (K = input channels per group × kernel size) in its own slice of the scratch buffer, small
//! enough to stay in L2 unless that would make it narrower than [`MIN_COLS`], and multiplies the group's weights `[Mg × K]` by it into the output columns of
//! the tile. Tasks are spread over the thread team's "lanes", one scratch slice per lane, so the buffer is reused across
//! calls and nothing is allocated in steady state.

use crate::runtime::spin_pool;

use super::super::matmul::{bias_act, threads, BlockOut, MatRef};
use super::super::numeric::{vector::avx2_copy, Real};
use super::{ConvPlan, Geom};
use crate::ir::Activation;

/// Column tile budget in elements (256 KiB of f32).
const COL_ELEMS: usize = 1 << 16;
/// The narrowest column tile the budget may ask for: each GEMM call packs the group's weights once, so
/// narrower tiles would spend more time packing than multiplying (with K = 2304, the budget alone gives 28).
const MIN_COLS: usize = 256;

/// Computes a task's block: `gemm(out, grp, cols_matrix, cols, off, bias, act)` multiplies group `grp`'s weights
/// (`mg × K`) by the column tile (`K × cols`) into the `mg × cols` block of C at element `off` (row stride: the
/// output plane), each row `i` finished with `bias[i]` (the group's `mg` values) and the activation.
/// [`run_with`] calls it with disjoint blocks only.
pub(super) type GroupGemm<'g, T> = dyn Fn(&BlockOut<T>, usize, MatRef<T>, usize, usize, Option<&[T]>, Option<Activation>) + Sync + 'g;

/// Runs the im2col path with the weights `w` (`[M, K]` row-major); sizes were checked by the caller.
pub(super) fn run<T: Real>(p: &ConvPlan, x: &[T], w: &[T], b: Option<&[T]>, act: Option<Activation>, y: &mut [T], scratch: &mut Vec<T>) {
    let (mg, kk, pix) = (p.mg(), p.cg() * p.geom.k_size(), p.geom.out_size());
    let gemm = |out: &BlockOut<T>, grp: usize, bm: MatRef<T>, cols: usize, off: usize, bias: Option<&[T]>, act: Option<Activation>| {
        let a = MatRef::rows(w, grp * mg * kk, kk);
        // SAFETY: `run_with` gives each call a block of its own (disjoint (image, group, tile) triples).
        unsafe { out.gemm_block(mg, cols, kk, T::ONE, a, bm, off, pix, false, &mut |i: usize, row: &mut [T]| bias_act(row, bias.map(|b| b[i]), act)) };
    };
    run_with(p, x, &gemm, b, act, y, scratch);
}

/// `fill(x, geom, cg, p0, cols, dst)`: see [`Columns`].
pub(super) type FillTile<T> = dyn Fn(&[T], &Geom, usize, usize, usize, &mut [T]) + Sync;

/// How a task lays out its column tile: `fill(x, geom, cg, p0, cols, dst)` writes the tile of output pixels
/// `p0..p0 + cols` of one image and group (`x`: its `cg` input planes) into `dst`, which holds `len(K, cols)`
/// elements. [`Columns::PLAIN`] is the row-major `K × cols` matrix of [`fill_columns`].
pub(super) struct Columns<'f, T> {
    pub(super) fill: &'f FillTile<T>,
    pub(super) len: fn(usize, usize) -> usize,
}

impl<T: Real> Columns<'static, T> {
    pub(super) const PLAIN: Columns<'static, T> = Columns { fill: &fill_columns::<T>, len: |kk, cols| kk * cols };
}

/// Runs the im2col path, multiplying by the weights through `gemm`; sizes were checked by the caller.
pub(super) fn run_with<T: Real>(p: &ConvPlan, x: &[T], gemm: &GroupGemm<'_, T>, b: Option<&[T]>, act: Option<Activation>, y: &mut [T], scratch: &mut Vec<T>) {
    run_layout(p, x, &Columns::PLAIN, gemm, b, act, y, scratch)
}

/// [`run_with`] with the column tiles laid out by `columns` (the `MatRef` handed to `gemm` then views the tile's
/// buffer with `cols` as its row stride, whatever its layout).
#[allow(clippy::too_many_arguments)]
pub(super) fn run_layout<T: Real>(p: &ConvPlan, x: &[T], columns: &Columns<'_, T>, gemm: &GroupGemm<'_, T>, b: Option<&[T]>, act: Option<Activation>, y: &mut [T], scratch: &mut Vec<T>) {
    let g = &p.geom;
    let (cg, mg, group) = (p.cg(), p.mg(), p.group);
    let kk = cg * g.k_size();
    let pix = g.out_size();
    let plane_in = g.in_size();
    let macs = p.n * p.m * pix * kk;
    let threads = threads();
    let par = threads > 1 && macs >= spin_pool::min_work(1 << 16);
    // Tile width: the column budget, then narrower while there are too few tasks to balance.
    let mut nb = (COL_ELEMS / kk.max(1)).clamp(MIN_COLS, pix.max(MIN_COLS)).min(pix);
    let images = p.n * group;
    if par {
        while images * pix.div_ceil(nb) < 4 * threads && nb >= 64 {
            nb = nb.div_ceil(2);
        }
    }
    let tiles = pix.div_ceil(nb);
    let tasks = images * tiles;
    let lane_len = (columns.len)(kk, nb);
    let lanes = if par && lane_len > 0 { threads.min(tasks) } else { 1 };
    if scratch.len() < lanes * lane_len {
        scratch.resize(lanes * lane_len, T::ZERO);
    }
    let out = BlockOut::new(y);
    let lane = |l: usize, col: &mut [T]| {
        for t in (l..tasks).step_by(lanes) {
            let (img, tile) = (t / tiles, t % tiles);
            let (n, grp) = (img / group, img % group);
            let p0 = tile * nb;
            let cols = nb.min(pix - p0);
            let col = &mut col[..(columns.len)(kk, cols)];
            let xg = &x[(n * p.c + grp * cg) * plane_in..][..cg * plane_in];
            (columns.fill)(xg, g, cg, p0, cols, col);
            let bm = MatRef::rows(&*col, 0, cols);
            let off = (n * p.m + grp * mg) * pix + p0;
            // Each task owns the output columns p0..p0 + cols of its (image, group) rows; tasks are distinct
            // (image, group, tile) triples, so the blocks are disjoint (gemm's contract).
            gemm(&out, grp, bm, cols, off, b.map(|b| &b[grp * mg..][..mg]), act);
        }
    };
    if lanes > 1 {
        spin_pool::for_each_chunk_mut(&mut scratch[..lanes * lane_len], lane_len, &lane);
    } else {
        lane(0, &mut scratch[..lane_len]);
    }
}

avx2_copy!(
    /// Builds the column matrix `col[K × cols]` for output pixels `p0..p0 + cols` of one image and group:
    /// row `((c·kd + kz)·kh + ky)·kw + kx` holds the input value under that tap for each pixel (0 in padding).
    pub(super) fn fill_columns<T: Real>(x: &[T], g: &Geom, cg: usize, p0: usize, cols: usize, col: &mut [T]) => fill_columns_body);

#[inline(always)]
fn fill_columns_body<T: Real>(x: &[T], g: &Geom, cg: usize, p0: usize, cols: usize, col: &mut [T]) {
    let [id, ih, iw] = g.inp;
    let [_, oh, ow] = g.out;
    let [kd, kh, kw] = g.k;
    let plane = id * ih * iw;
    let mut r = 0;
    for c in 0..cg {
        let xc = &x[c * plane..][..plane];
        for kz in 0..kd {
            for ky in 0..kh {
                for kx in 0..kw {
                    let dst = &mut col[r * cols..][..cols];
                    r += 1;
                    let off_x = (kx * g.d[2]) as isize - g.pb[2] as isize;
                    // the first pixel's coordinates once per row, then stepped (a division per segment cost more
                    // than the copies on narrow outputs)
                    let (mut ox0, mut oy, mut oz) = (p0 % ow, (p0 / ow) % oh, p0 / (ow * oh));
                    let mut pos = 0;
                    while pos < cols {
                        let seg = (ow - ox0).min(cols - pos);
                        let iz = (oz * g.s[0] + kz * g.d[0]) as isize - g.pb[0] as isize;
                        let iy = (oy * g.s[1] + ky * g.d[1]) as isize - g.pb[1] as isize;
                        let d = &mut dst[pos..pos + seg];
                        if iz < 0 || iz >= id as isize || iy < 0 || iy >= ih as isize {
                            d.fill(T::ZERO);
                        } else {
                            let xr = &xc[(iz as usize * ih + iy as usize) * iw..][..iw];
                            gather_row(d, xr, ox0, g.s[2], off_x);
                        }
                        pos += seg;
                        ox0 = 0;
                        oy += 1;
                        if oy == oh {
                            oy = 0;
                            oz += 1;
                        }
                    }
                }
            }
        }
    }
}

/// Zeroes `d`, without a library call when it holds at most two values.
#[inline(always)]
fn zero_short<T: Real>(d: &mut [T]) {
    match d {
        [] => {}
        [a] => *a = T::ZERO,
        [a, b] => (*a, *b) = (T::ZERO, T::ZERO),
        _ => d.fill(T::ZERO),
    }
}

/// `d[t] = xr[(ox0 + t)·s + off]`, 0 where that index is outside the row.
#[inline(always)]
fn gather_row<T: Real>(d: &mut [T], xr: &[T], ox0: usize, s: usize, off: isize) {
    let w = xr.len() as isize;
    let si = s as isize;
    // valid ox: 0 <= ox·s + off < w
    let lo = if off >= 0 { 0 } else { (-off + si - 1) / si } as usize;
    let hi = if w - off <= 0 { 0 } else { ((w - off + si - 1) / si) as usize };
    let n = d.len();
    let a = lo.clamp(ox0, ox0 + n) - ox0;
    let bnd = hi.clamp(ox0, ox0 + n) - ox0;
    let bnd = bnd.max(a);
    // the pads are mostly 0 or 1 values: a memset call per row segment cost 11% of a stride-2 stem convolution
    zero_short(&mut d[..a]);
    zero_short(&mut d[bnd..]);
    if bnd > a {
        let start = ((ox0 + a) as isize * si + off) as usize;
        let cnt = bnd - a;
        if s == 1 {
            d[a..bnd].copy_from_slice(&xr[start..start + cnt]);
        } else if s == 2 {
            // pairs through chunks_exact: this form vectorises (step_by does not)
            let src = &xr[start..start + 2 * (cnt - 1) + 1];
            for (o, pair) in d[a..bnd - 1].iter_mut().zip(src.chunks_exact(2)) {
                *o = pair[0];
            }
            d[bnd - 1] = src[2 * (cnt - 1)];
        } else {
            for (o, &v) in d[a..bnd].iter_mut().zip(xr[start..].iter().step_by(s)) {
                *o = v;
            }
        }
    }
}
