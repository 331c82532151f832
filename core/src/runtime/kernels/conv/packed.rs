//! f32 Conv with constant weights, prepared once when the session is planned: each group's weights `[mg, K]` are
//! packed into the GEMM kernel's row panels ([`PackedA`]), so a run packs only the input columns. Before, every
//! GEMM call re-packed the weights, which dominated the late layers of a CNN (few output pixels, large K: a
//! ResNet's last stage multiplies 512 × 4608 weights by 16 or 49 pixels).
//!
//! The pointwise and im2col paths are the same as the unprepared kernel's (the im2col tiling is shared through
//! [`im2col::run_with`]); depthwise convolutions keep their direct kernel and are not prepared. x86-64 with
//! AVX2/FMA only (elsewhere `prepare` declines and the node runs the ordinary kernel).
//!
//! **Very few output pixels** (2×2 planes): the GEMM tile is 6 rows by 32 columns (AVX-512; 16 with AVX2; 12 by
//! 16 for a tile of one panel), and with the weights as rows the pixels fill the columns, so 4 pixels compute 16.
//! There the roles swap: the weights are
//! packed transposed ([`PackedB`], `K × M`, output channels in the vector lanes) and the image's column matrix,
//! read with the pixels as rows, is the packed A; the `pixels × M` product is transposed into the NCHW output
//! with the bias and activation. [`swap_pays`] picks the layout from the tile counts of the two, when the session
//! is planned (one packing is kept, not both); either layout runs any input size.

use crate::ir::Graph;
use crate::runtime::kernels::PreparedKernel;

/// The prepared kernel of Conv node `n`, when it is an f32 convolution with constant weights that is not
/// depthwise, on a CPU with the kernels.
pub(in crate::runtime::kernels) fn prepare(g: &Graph, n: usize) -> Option<Box<dyn PreparedKernel>> {
    #[cfg(target_arch = "x86_64")]
    {
        x86::prepare(g, n)
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (g, n);
        None
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::cell::RefCell;

    use super::super::super::matmul::{bias_act, for_each_task, threads, BlockOut, MatRef};
    use super::super::super::numeric::{gemm_packed_a, gemm_packed_a_panels, gemm_packed_ab, pack_panel, tile_cols, Epi, PackedA, PackedB, MR_PACKED, NR_PACKED};
    use super::super::super::{PreparedKernel, Scratch};
    use super::super::{constant_f32_conv, im2col, im2col_panels, is_depthwise, is_pointwise, prepared_operands};
    use crate::ir::ops::conv::ConvPlan;
    use crate::ir::{Activation, ConvAttrs, Graph, Tensor};

    /// Each group's `mg × K` weights, packed for one of the two GEMM layouts (module documentation).
    #[derive(Debug)]
    enum Weights {
        /// As the GEMM's A: output channels are rows, pixels columns.
        Rows(Vec<PackedA>),
        /// Transposed, as the GEMM's B: pixels are rows, output channels columns.
        Cols(Vec<PackedB>),
    }

    #[derive(Debug)]
    struct PackedConv {
        attrs: ConvAttrs,
        w_shape: Vec<usize>,
        weights: Weights,
    }

    thread_local! {
        /// The packed column matrix of the swapped layout, kept between runs.
        static PIXEL_ROWS: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
    }

    /// Whether the swapped layout (pixels as rows) needs under half the GEMM tiles of the usual one for `mg`
    /// output channels over `pix` pixels. A tile is MR rows by the widest kernel's columns (an AVX2-only CPU's
    /// narrower tiles change both counts alike). One pixel keeps the matrix-vector kernel of the usual layout.
    ///
    /// It was 7/8 of the tiles; since the usual layout prefetches its weights and runs 16-column tiles through
    /// the 12×16 kernel, it measured faster where the swap saved ~16% of the tiles (Zen 5, 1 thread: ResNet-18,
    /// whose 512-channel 7×7 layers took the swap, 6.91 → 6.24 ms; MobileNetV2 224 4.36 → 4.28).
    pub(super) fn swap_pays(mg: usize, kk: usize, pix: usize) -> bool {
        let cols = 2 * NR_PACKED;
        let usual = mg.div_ceil(MR_PACKED) * pix.div_ceil(cols);
        let swapped = pix.div_ceil(MR_PACKED) * mg.div_ceil(cols);
        pix > 1 && kk >= MIN_DEPTH && 2 * swapped < usual
    }

    /// The shallowest products worth the swapped layout's transposition (a pass over the output): below it, the
    /// GEMM's work per output value is too small for the saved tiles to pay for it.
    const MIN_DEPTH: usize = 256;

    pub(super) fn prepare(g: &Graph, n: usize) -> Option<Box<dyn PreparedKernel>> {
        let (attrs, p, wd, w_shape) = constant_f32_conv(g, n)?;
        if is_depthwise(&p) || p.n * p.c * p.geom.in_size() == 0 {
            return None;
        }
        let (mg, kk) = (p.mg(), p.cg() * p.geom.k_size());
        let group_w = |grp: usize| wd.get(grp * mg * kk..(grp + 1) * mg * kk);
        let weights = if swap_pays(mg, kk, p.geom.out_size()) && std::env::var_os("TPU_SDK_NO_PIXEL_ROWS").is_none() {
            Weights::Cols((0..p.group).map(|grp| PackedB::new(group_w(grp)?, kk, mg, 1, kk)).collect::<Option<Vec<_>>>()?)
        } else {
            Weights::Rows((0..p.group).map(|grp| PackedA::new(group_w(grp)?, mg, kk)).collect::<Option<Vec<_>>>()?)
        };
        Some(Box::new(PackedConv { attrs: attrs.clone(), w_shape: w_shape.to_vec(), weights }))
    }

    impl PreparedKernel for PackedConv {
        fn run(&self, inputs: &[Option<&Tensor>], outputs: &mut [Tensor], scratch: &mut Scratch) -> Result<(), String> {
            let fits = |p: &ConvPlan| {
                let (mg, kk) = (p.mg(), p.cg() * p.geom.k_size());
                let fit = match &self.weights {
                    Weights::Rows(w) => w.len() == p.group && w.iter().all(|a| a.m() == mg && a.k() == kk),
                    Weights::Cols(w) => w.len() == p.group && w.iter().all(|b| b.n() == mg && b.k() == kk),
                };
                fit && !is_depthwise(p)
            };
            let Some((p, xv, bv, y)) = prepared_operands(inputs, outputs, &self.w_shape, &self.attrs, fits)? else { return Ok(()) };
            if xv.is_empty() {
                return Err("Conv input is empty".into());
            }
            let mg = p.mg();
            let act = self.attrs.activation;
            let groups = match &self.weights {
                Weights::Rows(w) => w,
                Weights::Cols(w) => return pixel_rows_run(&p, xv, w, bv, act, y, &mut scratch.f32),
            };
            let g = &p.geom;
            let pix = g.out_size();
            let pointwise = is_pointwise(g);
            if pointwise {
                pointwise_run(&p, xv, groups, bv, act, y, &mut scratch.f32);
                return Ok(());
            }
            // 1-D and 2-D windows write their tiles straight in the GEMM's column panels (im2col_panels' module
            // documentation), 3-D ones the plain column matrix that the GEMM packs
            let panels = im2col_panels::takes(g);
            // output channels in blocks of whole panel pairs, for the threads to share one column tile: a plane
            // of one tile (ResNet-18's 4×4 stage: 16 pixels) is one im2col task, which ran on one thread; where
            // im2col runs its tiles in parallel, a tile's product is not split (inside a task it would run its
            // blocks one after another, each sweeping the tile's columns again)
            let kk = p.cg() * g.k_size();
            let worth = threads() > 1 && p.n * p.m * pix * kk >= crate::runtime::spin_pool::min_work(1 << 16);
            let rows_per = if worth { pair_blocks(mg) } else { mg };
            let gemm = |out: &BlockOut<f32>, grp: usize, bm: MatRef<f32>, cols: usize, off: usize, bias: Option<&[f32]>, act: Option<Activation>| {
                let (per, split) = if rows_per < mg && !crate::runtime::spin_pool::in_task() { (rows_per, true) } else { (mg, false) };
                for_each_task(mg.div_ceil(per), split, |rb| {
                    let i0 = rb * per;
                    let rows = per.min(mg - i0);
                    let off = off + i0 * pix;
                    let c = out.block_ptr(off, (rows - 1) * pix + cols);
                    let (epi, rest) = epilogue(bias.map(|b| &b[i0..][..rows]), act);
                    // SAFETY: the tile holds the kk × cols column matrix from bm.off (im2col built it), or with
                    // `panels` its panels (fill_panels wrote them, panels_len long); C's block lies in y (block_ptr
                    // checks its span), im2col gives each call a block of its own and the row blocks split it; i0
                    // is a multiple of the panel height; the bias holds the group's mg values.
                    unsafe {
                        let b = bm.data.as_ptr().add(bm.off);
                        if panels {
                            gemm_packed_a_panels(&groups[grp], i0, rows, b, cols, 1.0, c, pix as isize, epi)
                        } else {
                            gemm_packed_a(&groups[grp], i0, rows, cols, b, bm.rs as isize, bm.cs as isize, c, pix as isize, epi)
                        }
                    };
                    if rest.is_some() {
                        act_rows(out, off, rows, pix, cols, rest);
                    }
                });
            };
            if !panels {
                im2col::run_with(&p, xv, &gemm, bv, act, y, &mut scratch.f32);
                return Ok(());
            }
            let columns = im2col::Columns { fill: &im2col_panels::fill_panels, len: im2col_panels::panels_len };
            im2col::run_layout(&p, xv, &columns, &gemm, bv, act, y, &mut scratch.f32);
            Ok(())
        }

        fn holds_input(&self, k: usize) -> bool {
            k == 1
        }
    }

    /// The swapped layout: per image and group, the column matrix (`K × P`: the input itself for a pointwise
    /// convolution, else im2col's) packed with the pixels as rows, times the transposed weights into a `P × mg`
    /// block, transposed into the output rows with the bias and activation. Tasks split the output channels.
    #[allow(clippy::too_many_arguments)]
    fn pixel_rows_run(p: &ConvPlan, x: &[f32], groups: &[PackedB], b: Option<&[f32]>, act: Option<Activation>, y: &mut [f32], scratch: &mut Vec<f32>) -> Result<(), String> {
        let g = &p.geom;
        let (cg, mg, group) = (p.cg(), p.mg(), p.group);
        let (kk, pix, plane_in) = (cg * g.k_size(), g.out_size(), g.in_size());
        let pointwise = is_pointwise(g);
        let threads = threads();
        // channel chunks of whole wide tiles, at least two per thread when the work is worth splitting
        let wide = 2 * NR_PACKED;
        let par = threads > 1 && pix * mg * kk >= 1 << 18;
        let chunk = if par { mg.div_ceil(2 * threads).div_ceil(wide).max(1) * wide } else { mg };
        let chunks = mg.div_ceil(chunk);
        let col_len = if pointwise { 0 } else { kk * pix };
        if scratch.len() < col_len + pix * mg {
            scratch.resize(col_len + pix * mg, 0.0);
        }
        let (col, prod) = scratch.split_at_mut(col_len);
        let prod = &mut prod[..pix * mg];
        let out = BlockOut::new(y);
        PIXEL_ROWS.with(|buf| {
            let mut buf = buf.borrow_mut();
            for n in 0..p.n {
                for grp in 0..group {
                    let xg = &x[(n * p.c + grp * cg) * plane_in..][..cg * plane_in];
                    let cols: &[f32] = if pointwise {
                        xg
                    } else {
                        im2col::fill_columns(xg, g, cg, 0, pix, col);
                        col
                    };
                    // the caller checked the sizes, so packing fails only on a CPU without the kernels, which
                    // never prepares this kernel
                    let Some(a) = PackedA::new_transposed_in(cols, pix, kk, pix, std::mem::take(&mut *buf)) else {
                        return Err("Conv: the input columns could not be packed (no AVX2/FMA?)".to_string());
                    };
                    let w = &groups[grp];
                    let prod_out = BlockOut::new(&mut *prod);
                    for_each_task(chunks, par, |t| {
                        let j0 = t * chunk;
                        let nc = chunk.min(mg - j0);
                        let c = prod_out.block_ptr(j0, (pix - 1) * mg + nc);
                        // SAFETY: A is pix × kk and W kk × mg (checked by the caller); the block of columns
                        // j0..j0 + nc of the pix × mg product lies in prod (block_ptr) and chunks are disjoint.
                        unsafe { gemm_packed_ab(&a, 0, pix, w, j0, nc, 1.0, c, mg as isize) };
                        // transposed eight channels at a time: each product row gives 8 adjacent values, each
                        // output row is written in order (one channel at a time read the product down a column,
                        // a cache line per value, as slow as the GEMM itself for pointwise layers)
                        for jb in (0..nc).step_by(8) {
                            let w = 8.min(nc - jb);
                            let ch0 = grp * mg + j0 + jb;
                            // SAFETY: output rows (n, ch0..ch0 + w) belong to this chunk's channels only.
                            let mut rows: [&mut [f32]; 8] = std::array::from_fn(|q| if q < w { unsafe { out.row((n * p.m + ch0 + q) * pix, pix) } } else { &mut [] });
                            for i in 0..pix {
                                // SAFETY: elements (i, j0 + jb..j0 + jb + w) of the product, inside this chunk's
                                // block, written above by this task only.
                                let src = unsafe { std::slice::from_raw_parts(c.add(i * mg + jb), w) };
                                for (row, &v) in rows.iter_mut().zip(src) {
                                    row[i] = v;
                                }
                            }
                            for (q, row) in rows.iter_mut().take(w).enumerate() {
                                bias_act(row, b.map(|b| b[ch0 + q]), act);
                            }
                        }
                    });
                    *buf = a.into_buffer();
                }
            }
            Ok(())
        })
    }

    /// The activation `act` over a block's `rows` rows of `cols` values (row `i` at `off + i·stride`): one call over
    /// the whole block where its rows are adjacent (a tile of the whole plane), so that a small plane's short rows
    /// do not each run the vector loop's remainder path.
    fn act_rows(out: &BlockOut<f32>, off: usize, rows: usize, stride: usize, cols: usize, act: Option<Activation>) {
        if cols == stride {
            // SAFETY: the block's rows, adjacent, written by this task only (the caller's block).
            bias_act(unsafe { out.row(off, rows * cols) }, None, act);
            return;
        }
        for i in 0..rows {
            // SAFETY: a row of the caller's block, written by this task only.
            bias_act(unsafe { out.row(off + i * stride, cols) }, None, act);
        }
    }

    /// The bias and activation as the GEMM's write-back applies them, and the activation left for a pass over the
    /// finished rows (SiLU, which is not a clamp).
    fn epilogue(bias: Option<&[f32]>, act: Option<Activation>) -> (Epi, Option<Activation>) {
        match act.map(|a| (a, a.clamp_bounds())) {
            Some((a, None)) => (Epi::new(bias, None), Some(a)),
            Some((_, clamp)) => (Epi::new(bias, clamp), None),
            None => (Epi::new(bias, None), None),
        }
    }

    /// `Y[n, grp] (mg × P) = W[grp] · X[n, grp] (cg × P)` straight on the NCHW input, tasks over images, groups
    /// and column tiles of whole kernel tiles (each task packs its own columns: no column is packed twice);
    /// where those are too few to give every thread two tasks (a CNN's 7×7 and 8×8 stages: one or two kernel
    /// tiles wide), [`shared_columns_run`] instead.
    ///
    /// Tiles of whole kernel tiles: a split at 98 of a 14×14 plane's 196 columns left each half a 2-column
    /// remainder through a 16-column kernel, and splitting the output channels as well made every task pack its
    /// columns again (four times the packing at 2 threads: MobileNetV2's 14×14 projections ran 1.2× faster on 2
    /// threads than on 1).
    #[allow(clippy::too_many_arguments)]
    fn pointwise_run(p: &ConvPlan, x: &[f32], groups: &[PackedA], b: Option<&[f32]>, act: Option<Activation>, y: &mut [f32], scratch: &mut Vec<f32>) {
        let (cg, mg, hw, group) = (p.cg(), p.mg(), p.geom.in_size(), p.group);
        let images = p.n * group;
        let threads = threads();
        let par = threads > 1 && p.n * p.m * hw * cg >= crate::runtime::spin_pool::min_work(1 << 16);
        let unit = tile_cols();
        if par && images * (hw / unit) < 2 * threads && mg >= 4 * MR_PACKED {
            shared_columns_run(p, x, groups, b, act, y, scratch);
            return;
        }
        let want = if par { (4 * threads).div_ceil(images) } else { 1 };
        let tile = hw.div_ceil(want).next_multiple_of(unit).min(1024).min(hw).max(1);
        let tiles = hw.div_ceil(tile);
        let out = BlockOut::new(y);
        for_each_task(images * tiles, par, |t| {
            let (img, ti) = (t / tiles, t % tiles);
            let (n, grp) = (img / group, img % group);
            let j0 = ti * tile;
            let cols = tile.min(hw - j0);
            let off = (n * p.m + grp * mg) * hw + j0;
            let xo = (n * p.c + grp * cg) * hw + j0;
            let c = out.block_ptr(off, (mg - 1) * hw + cols);
            let (epi, rest) = epilogue(b.map(|b| &b[grp * mg..][..mg]), act);
            // SAFETY: X's rows xo + r·hw, r < cg, hold cols elements each (x has n·c·hw elements, checked by the
            // caller); C's block lies in y (block_ptr) and tasks are distinct (image, group, tile) triples; the
            // bias holds the group's mg values.
            unsafe { gemm_packed_a(&groups[grp], 0, mg, cols, x.as_ptr().add(xo), hw as isize, 1, c, hw as isize, epi) };
            if rest.is_some() {
                act_rows(&out, off, mg, hw, cols, rest);
            }
        });
    }

    /// The rows of each block when `mg` output channels are split between the threads: whole pairs of row panels
    /// (the 12-row tiles the kernels take), about four blocks per thread.
    fn pair_blocks(mg: usize) -> usize {
        let pair = 2 * MR_PACKED;
        let pairs = mg.div_ceil(pair);
        pairs.div_ceil((4 * threads()).min(pairs).max(1)) * pair
    }

    /// A pointwise layer over few columns (one or two kernel tiles: 7×7 and 8×8 planes) on several threads: per
    /// image and group, the tasks first pack the input's column panels once (a panel each), then split the output
    /// channels in blocks of whole row-panel pairs, every block multiplying the shared panels
    /// ([`gemm_packed_a_panels`]). So each thread reads only its share of the weights (a 960 → 160 layer's 600 KB
    /// come from memory in a whole model) and no column is packed twice.
    #[allow(clippy::too_many_arguments)]
    fn shared_columns_run(p: &ConvPlan, x: &[f32], groups: &[PackedA], b: Option<&[f32]>, act: Option<Activation>, y: &mut [f32], scratch: &mut Vec<f32>) {
        let (cg, mg, hw, group) = (p.cg(), p.mg(), p.geom.in_size(), p.group);
        let panel = NR_PACKED * cg;
        let len = hw.div_ceil(NR_PACKED) * panel;
        if scratch.len() < len {
            scratch.resize(len, 0.0);
        }
        let buf = &mut scratch[..len];
        let rows_per = pair_blocks(mg);
        let blocks = mg.div_ceil(rows_per);
        let out = BlockOut::new(y);
        for img in 0..p.n * group {
            let (n, grp) = (img / group, img % group);
            let xo = (n * p.c + grp * cg) * hw;
            crate::runtime::spin_pool::for_each_chunk_mut(buf, panel, &|jp, dst| {
                let j0 = jp * NR_PACKED;
                // SAFETY: X's rows xo + r·hw, r < cg, hold hw elements each (checked by the caller), of which
                // columns j0..j0 + nc; dst is one panel of NR·cg values.
                unsafe { pack_panel(cg, NR_PACKED.min(hw - j0), x.as_ptr().add(xo + j0), hw as isize, dst) };
            });
            let packed: &[f32] = buf;
            for_each_task(blocks, true, |rb| {
                let i0 = rb * rows_per;
                let rows = rows_per.min(mg - i0);
                let off = (n * p.m + grp * mg + i0) * hw;
                let c = out.block_ptr(off, rows * hw);
                let (epi, rest) = epilogue(b.map(|b| &b[grp * mg + i0..][..rows]), act);
                // SAFETY: packed holds ceil(hw / NR) panels of NR·cg values (written above); C's rows i0..i0 +
                // rows of this image and group lie in y (block_ptr) and blocks are disjoint; i0 is a multiple of
                // the panel height; the bias holds the block's rows values.
                unsafe { gemm_packed_a_panels(&groups[grp], i0, rows, packed.as_ptr(), hw, 1.0, c, hw as isize, epi) };
                if rest.is_some() {
                    act_rows(&out, off, rows, hw, hw, rest);
                }
            });
        }
    }
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use super::super::tests::{prepared_and_ordinary, rnd};
    use crate::ir::infer::infer_graph;
    use crate::ir::{Activation, AutoPad, ConvAttrs, DType, Graph, Op, Tensor};
    use crate::runtime::CpuEval;

    /// The prepared kernel against the ordinary one on the same node: pointwise, im2col with stride, padding,
    /// dilation and groups, 1-D and 3-D, a batch of 2, odd channel counts across the panel height, with and
    /// without bias and activation; depthwise is declined.
    #[test]
    fn prepared_convolutions_equal_the_ordinary_kernel() {
        let attrs = |k: usize, s: usize, d: usize, pad: usize, group: usize, act| ConvAttrs {
            kernel_shape: vec![],
            strides: vec![s; k],
            dilations: vec![d; k],
            pads: vec![pad; 2 * k],
            auto_pad: AutoPad::NotSet,
            group,
            activation: act,
        };
        // (x shape, w shape, attrs, bias)
        let cases = vec![
            (vec![1, 8, 9, 9], vec![13, 8, 1, 1], attrs(2, 1, 1, 0, 1, None), true),
            (vec![2, 6, 10, 7], vec![7, 6, 3, 3], attrs(2, 1, 1, 1, 1, Some(Activation::Relu)), true),
            (vec![1, 5, 17, 17], vec![20, 5, 3, 3], attrs(2, 2, 1, 1, 1, None), false),
            (vec![1, 8, 12, 12], vec![12, 4, 3, 3], attrs(2, 1, 2, 2, 2, None), true),
            (vec![1, 6, 8, 8], vec![9, 2, 1, 1], attrs(2, 1, 1, 0, 3, None), true),
            (vec![1, 300, 4, 4], vec![70, 300, 3, 3], attrs(2, 1, 1, 1, 1, None), true),
            (vec![1, 3, 40], vec![8, 3, 5], attrs(1, 2, 1, 2, 1, None), true),
            (vec![1, 2, 5, 6, 6], vec![4, 2, 3, 3, 3], attrs(3, 1, 1, 1, 1, None), true),
            // one output pixel (squeeze-and-excitation convolutions; im2col of a whole window): the matrix-vector kernel
            (vec![1, 40, 1, 1], vec![13, 40, 1, 1], attrs(2, 1, 1, 0, 1, Some(Activation::Relu)), true),
            (vec![2, 5, 3, 3], vec![7, 5, 3, 3], attrs(2, 1, 1, 0, 1, None), false),
            (vec![1, 9, 1, 1], vec![3, 9, 1, 1], attrs(2, 1, 1, 0, 1, None), true),
        ];
        for (seed, (xs, ws, a, with_bias)) in cases.into_iter().enumerate() {
            let (got, want) = prepared_and_ordinary(&xs, &ws, &a, with_bias, seed as u64, super::prepare, 1);
            for (i, (p, q)) in got.as_f32().unwrap().iter().zip(want.as_f32().unwrap()).enumerate() {
                assert!((p - q).abs() <= 1e-5 * (1.0 + q.abs()) * 30.0, "case {seed}: element {i}: {p} vs {q}");
            }
        }
        // few output pixels over many channels: the swapped layout (pixels as rows, channels in the lanes), on one
        // and two threads: 3×3 with stride and padding, pointwise, groups, a batch of 2, a partial last tile of
        // channels and of pixels
        let swapped = vec![
            (vec![1, 64, 2, 2], vec![96, 64, 3, 3], attrs(2, 1, 1, 1, 1, Some(Activation::Relu)), true),
            (vec![2, 300, 4, 3], vec![200, 300, 1, 1], attrs(2, 2, 1, 0, 1, None), true),
            (vec![1, 260, 2, 2], vec![200, 260, 1, 1], attrs(2, 1, 1, 0, 1, Some(Activation::Silu)), false),
            (vec![1, 64, 2, 3], vec![64, 32, 3, 3], attrs(2, 1, 1, 1, 2, None), true),
            (vec![2, 130, 3, 3], vec![300, 130, 3, 3], attrs(2, 2, 1, 1, 1, Some(Activation::Relu6)), true),
        ];
        for (seed, (xs, ws, a, with_bias)) in swapped.into_iter().enumerate() {
            let pix = (xs[2] + 2 * a.pads[0] - ws[2]) / a.strides[0] + 1;
            let pix = pix * ((xs[3] + 2 * a.pads[1] - ws[3]) / a.strides[1] + 1);
            assert!(super::x86::swap_pays(ws[0] / a.group, ws[1] * ws[2] * ws[3], pix), "case {seed} does not take the swapped layout");
            for threads in [1, 2] {
                let (got, want) = prepared_and_ordinary(&xs, &ws, &a, with_bias, 50 + seed as u64, super::prepare, threads);
                for (i, (p, q)) in got.as_f32().unwrap().iter().zip(want.as_f32().unwrap()).enumerate() {
                    assert!((p - q).abs() <= 1e-5 * (1.0 + q.abs()) * 30.0, "swapped case {seed}, {threads} threads: element {i}: {p} vs {q}");
                }
            }
        }
        // pointwise and im2col in the usual layout on one and two threads, the same bits on both: over few pixels
        // (one or two kernel tiles) two threads pack the input's column panels once and split the output channels
        // in blocks of panel pairs (a partial last block, a SiLU pass after the GEMM, groups and a batch); over
        // more they split the columns in whole kernel tiles (14×14: six tiles and a 4-column remainder)
        let channel_blocks = vec![
            (vec![1, 160, 7, 7], vec![970, 160, 1, 1], attrs(2, 1, 1, 0, 1, Some(Activation::Silu)), true),
            (vec![2, 64, 6, 6], vec![120, 32, 1, 1], attrs(2, 1, 1, 0, 2, Some(Activation::Relu)), true),
            (vec![1, 96, 8, 8], vec![100, 96, 1, 1], attrs(2, 1, 1, 0, 1, None), false),
            (vec![1, 384, 14, 14], vec![64, 384, 1, 1], attrs(2, 1, 1, 0, 1, None), true),
            (vec![1, 40, 28, 28], vec![48, 40, 1, 1], attrs(2, 1, 1, 0, 1, Some(Activation::Relu6)), true),
            // an output large enough for its buffer's zero-fill to be split between the threads
            (vec![1, 16, 64, 64], vec![40, 16, 1, 1], attrs(2, 1, 1, 0, 1, None), true),
            // im2col over one column tile (4×4 outputs, stride 1 and 2): the threads split its output channels
            (vec![1, 64, 4, 4], vec![100, 64, 3, 3], attrs(2, 1, 1, 1, 1, Some(Activation::Relu)), true),
            (vec![1, 48, 7, 7], vec![70, 48, 3, 3], attrs(2, 2, 1, 1, 1, Some(Activation::Silu)), true),
        ];
        for (seed, (xs, ws, a, with_bias)) in channel_blocks.into_iter().enumerate() {
            let pix = (xs[2] + 2 * a.pads[0] - ws[2]) / a.strides[0] + 1;
            let pix = pix * ((xs[3] + 2 * a.pads[1] - ws[3]) / a.strides[1] + 1);
            assert!(!super::x86::swap_pays(ws[0] / a.group, ws[1] * ws[2] * ws[3], pix), "case {seed} takes the swapped layout");
            let mut on_one = None;
            for threads in [1, 2] {
                let (got, want) = prepared_and_ordinary(&xs, &ws, &a, with_bias, 80 + seed as u64, super::prepare, threads);
                for (i, (p, q)) in got.as_f32().unwrap().iter().zip(want.as_f32().unwrap()).enumerate() {
                    assert!((p - q).abs() <= 1e-5 * (1.0 + q.abs()) * 30.0, "channel-block case {seed}, {threads} threads: element {i}: {p} vs {q}");
                }
                let bits: Vec<u32> = got.as_f32().unwrap().iter().map(|v| v.to_bits()).collect();
                match &on_one {
                    None => on_one = Some(bits),
                    Some(one) => assert!(one == &bits, "channel-block case {seed}: 2 threads differ from 1"),
                }
            }
        }
        // depthwise stays with its direct kernel
        let mut g = Graph::new("dw");
        let x = g.add_input("x", DType::F32, vec![1, 4, 6, 6]);
        let w = g.add_constant("w", Tensor::from_f32(vec![4, 1, 3, 3], rnd(36, 5)));
        let y = g.add_value("y", DType::F32, vec![]);
        g.add_node("conv", Op::Conv(attrs(2, 1, 1, 1, 4, None)), vec![Some(x), Some(w), None], vec![y]);
        g.outputs.push(y);
        infer_graph(&mut g, &CpuEval).unwrap();
        assert!(super::prepare(&g, 0).is_none());
    }
}
