//! f32 Conv with constant weights, prepared once when the session is planned: each group's weights `[mg, K]` are
//! packed into the GEMM kernel's row panels ([`PackedA`]), so a run packs only the input columns. Before, every
//! GEMM call re-packed the weights, which dominated the late layers of a CNN (few output pixels, large K: a
//! ResNet's last stage multiplies 512 × 4608 weights by 16 or 49 pixels).
//!
//! The pointwise and im2col paths are the same as the unprepared kernel's (the im2col tiling is shared through
//! [`im2col::run_with`]); depthwise convolutions keep their direct kernel and are not prepared. x86-64 with
//! AVX2/FMA only (elsewhere `prepare` declines and the node runs the ordinary kernel).

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
    use super::super::super::matmul::{bias_act, for_each_task, threads, BlockOut, MatRef};
    use super::super::super::numeric::{gemm_packed_a, PackedA};
    use super::super::super::{input, PreparedKernel, Scratch};
    use super::super::{constant_f32_conv, f32_operands, im2col, is_depthwise};
    use crate::ir::ops::conv::ConvPlan;
    use crate::ir::{ConvAttrs, Graph, Tensor};

    #[derive(Debug)]
    struct PackedConv {
        attrs: ConvAttrs,
        w_shape: Vec<usize>,
        /// Per group: its `mg × K` weights.
        groups: Vec<PackedA>,
    }

    pub(super) fn prepare(g: &Graph, n: usize) -> Option<Box<dyn PreparedKernel>> {
        let (attrs, p, wd, w_shape) = constant_f32_conv(g, n)?;
        if is_depthwise(&p) || p.n * p.c * p.geom.in_size() == 0 {
            return None;
        }
        let (mg, kk) = (p.mg(), p.cg() * p.geom.k_size());
        let groups = (0..p.group).map(|grp| PackedA::new(wd.get(grp * mg * kk..(grp + 1) * mg * kk)?, mg, kk)).collect::<Option<Vec<_>>>()?;
        Some(Box::new(PackedConv { attrs: attrs.clone(), w_shape: w_shape.to_vec(), groups }))
    }

    impl PreparedKernel for PackedConv {
        fn run(&self, inputs: &[Option<&Tensor>], outputs: &mut [Tensor], scratch: &mut Scratch) -> Result<(), String> {
            let (p, xv, bv) = f32_operands(inputs, &self.w_shape, &self.attrs)?;
            let x = input(inputs, 0)?;
            let (mg, kk) = (p.mg(), p.cg() * p.geom.k_size());
            if p.group != self.groups.len() || self.groups.iter().any(|a| a.m() != mg || a.k() != kk) || is_depthwise(&p) {
                return Err(format!("Conv input {:?} does not fit the prepared weights {:?}", x.shape, self.w_shape));
            }
            if xv.len() != p.n * p.c * p.geom.in_size() || xv.is_empty() || bv.is_some_and(|b| b.len() != p.m) {
                return Err("Conv tensors hold fewer elements than their shapes say".into());
            }
            let out = outputs.first_mut().ok_or("missing output")?;
            let y = out.reset::<f32>(&p.out_shape());
            if y.is_empty() {
                return Ok(());
            }
            let act = self.attrs.activation;
            let g = &p.geom;
            let pix = g.out_size();
            let pointwise = g.k == [1; 3] && g.s == [1; 3] && g.pb == [0; 3] && g.pe == [0; 3];
            if pointwise {
                pointwise_run(&p, xv, &self.groups, bv, act, y);
                return Ok(());
            }
            let gemm = |out: &BlockOut<f32>, grp: usize, bm: MatRef<f32>, cols: usize, off: usize, epi: &mut dyn FnMut(usize, &mut [f32])| {
                let c = out.block_ptr(off, (mg - 1) * pix + cols);
                // SAFETY: the column tile holds kk × cols elements from bm.off (im2col built it); C's block lies in y
                // (block_ptr checks its span) and im2col gives each call a block of its own.
                unsafe { gemm_packed_a(&self.groups[grp], 0, mg, cols, bm.data.as_ptr().add(bm.off), bm.rs as isize, bm.cs as isize, c, pix as isize) };
                for i in 0..mg {
                    // SAFETY: a row of this call's block, written above, touched by no one else.
                    epi(i, unsafe { out.row(off + i * pix, cols) });
                }
            };
            im2col::run_with(&p, xv, &gemm, bv, act, y, &mut scratch.f32);
            Ok(())
        }

        fn holds_input(&self, k: usize) -> bool {
            k == 1
        }
    }

    /// `Y[n, grp] (mg × P) = W[grp] · X[n, grp] (cg × P)` straight on the NCHW input, tasks over images, groups
    /// and column tiles.
    fn pointwise_run(p: &ConvPlan, x: &[f32], groups: &[PackedA], b: Option<&[f32]>, act: Option<crate::ir::Activation>, y: &mut [f32]) {
        let (cg, mg, hw, group) = (p.cg(), p.mg(), p.geom.in_size(), p.group);
        let images = p.n * group;
        let threads = threads();
        let par = threads > 1 && p.n * p.m * hw * cg >= 1 << 16;
        let mut tile = hw.clamp(1, 1024);
        while par && images * hw.div_ceil(tile) < 4 * threads && tile >= 128 {
            tile = tile.div_ceil(2);
        }
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
            // SAFETY: X's rows xo + r·hw, r < cg, hold cols elements each (x has n·c·hw elements, checked by the
            // caller); C's block lies in y (block_ptr) and tasks are distinct (image, group, tile) triples.
            unsafe { gemm_packed_a(&groups[grp], 0, mg, cols, x.as_ptr().add(xo), hw as isize, 1, c, hw as isize) };
            for i in 0..mg {
                // SAFETY: a row of this task's block, written above.
                let row = unsafe { out.row(off + i * hw, cols) };
                bias_act(row, b.map(|b| b[grp * mg + i]), act);
            }
        });
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
