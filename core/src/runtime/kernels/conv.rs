//! Conv and ConvTranspose over 1 to 3 spatial dims (shapes and window geometry: [`crate::ir::ops::conv`]).
//!
//! Conv picks one of three f32/f64 paths (f16/bf16 are computed in f32):
//! * depthwise (one input channel per group, 1-D/2-D): a direct loop per output plane over a
//!   zero-bordered copy of the input plane, fused over the kernel taps for 3×3 and 5×5 ([`depthwise`]);
//! * pointwise (1×1 kernel, stride 1, no padding): `Y[M, HW] = W[M, C] · X[C, HW]` per image and group, as
//!   a GEMM straight on the NCHW input (no copies);
//! * everything else: im2col into a per-thread column tile taken from [`Scratch`], then a GEMM
//!   ([`im2col`]).
//!
//! Bias and the fused activation are applied in the GEMM epilogue (or the depthwise row loop) while the
//! output block is in cache. Threading follows [`super::matmul`]: one parallel region per op on the thread team; matrixmultiply
//! calls are sized to stay single-threaded.

use super::matmul::{from_f32, to_f32, Batched, MatRef};
use super::numeric::Real;
use super::{input, Scratch};
use crate::ir::ops::conv::{check_dtypes, conv_plan, transpose_plan, ConvPlan, Geom, TPlan};
use crate::ir::{Activation, ConvAttrs, ConvTransposeAttrs, DType, Tensor};

mod depthwise;
#[cfg(target_arch = "x86_64")]
mod depthwise_lanes;
#[cfg(target_arch = "x86_64")]
mod depthwise_rows;
#[cfg(target_arch = "x86_64")]
mod stem_rows;
#[cfg(target_arch = "x86_64")]
mod row_vec;
mod im2col;
#[cfg(target_arch = "x86_64")]
mod im2col_panels;
mod packed;
#[cfg(target_arch = "x86_64")]
pub(super) mod pixel_taps;
mod transpose;
#[cfg(target_arch = "x86_64")]
mod winograd;

/// The prepared kernel of an f32 Conv with constant weights: depthwise 3×3 and 5×5 convolutions along the
/// output rows with AVX-512 or AVX2 ([`depthwise_rows`]), other depthwise convolutions with small output planes with the
/// channels in the vector lanes ([`depthwise_lanes`]), convolutions of up to 4 input channels (an RGB stem) along
/// the output rows ([`stem_rows`]), Winograd F(2×2, 3×3) for the 3×3 stride-1
/// convolutions where it gains ([`winograd`]), else the weights packed for the im2col GEMM ([`packed`]).
pub(super) fn prepare_packed(g: &crate::ir::Graph, n: usize) -> Option<Box<dyn super::PreparedKernel>> {
    #[cfg(target_arch = "x86_64")]
    if let Some(k) = depthwise_rows::prepare(g, n) {
        return Some(k);
    }
    #[cfg(target_arch = "x86_64")]
    if let Some(k) = depthwise_lanes::prepare(g, n) {
        return Some(k);
    }
    #[cfg(target_arch = "x86_64")]
    if let Some(k) = stem_rows::prepare(g, n) {
        return Some(k);
    }
    #[cfg(target_arch = "x86_64")]
    if std::env::var_os("TPU_SDK_NO_WINOGRAD").is_none() {
        if let Some(k) = winograd::prepare(g, n) {
            return Some(k);
        }
    }
    packed::prepare(g, n)
}

/// Conv node `n` when it is an f32 convolution with constant weights and static shapes (what the prepared
/// kernels take): its attributes, plan and weights.
#[cfg(target_arch = "x86_64")]
fn constant_f32_conv(g: &crate::ir::Graph, n: usize) -> Option<(&ConvAttrs, ConvPlan, &[f32], &[usize])> {
    let node = &g.nodes[n];
    let crate::ir::Op::Conv(attrs) = &node.op else { return None };
    let x = g.values.get(node.inputs.first().copied().flatten()?.0)?;
    let wv = g.values.get(node.inputs.get(1).copied().flatten()?.0)?;
    let w = wv.constant.as_ref()?;
    let bias = node.inputs.get(2).copied().flatten().map(|b| &g.values[b.0]);
    if x.dtype != DType::F32 || w.dtype() != DType::F32 || x.quant.is_some() || wv.quant.is_some() || x.dynamic {
        return None;
    }
    if bias.is_some_and(|b| b.dtype != DType::F32) || node.outputs.iter().any(|o| g.values[o.0].dynamic) {
        return None;
    }
    let p = conv_plan(&x.shape, &w.shape, bias.map(|b| &b.shape[..]), attrs).ok()?;
    Some((attrs, p, w.as_f32()?, &w.shape))
}

/// A prepared f32 Conv's run-time operands, checked: the plan for input `x`, the input, the bias and the output
/// reset to the plan's shape; `Ok(None)` when the output is empty (nothing to compute). `fits` says whether the
/// plan is one the kernel was prepared for.
#[cfg(target_arch = "x86_64")]
#[allow(clippy::type_complexity)]
fn prepared_operands<'a, 'o>(
    inputs: &[Option<&'a Tensor>],
    outputs: &'o mut [Tensor],
    w_shape: &[usize],
    attrs: &ConvAttrs,
    fits: impl FnOnce(&ConvPlan) -> bool,
) -> Result<Option<(ConvPlan, &'a [f32], Option<&'a [f32]>, &'o mut [f32])>, String> {
    let x = input(inputs, 0)?;
    let b = inputs.get(2).copied().flatten();
    let p = conv_plan(&x.shape, w_shape, b.map(|b| &b.shape[..]), attrs)?;
    let xv = x.as_f32().ok_or_else(|| format!("the prepared Conv takes f32 input, got {}", x.dtype()))?;
    let bv = match b {
        Some(b) => Some(b.as_f32().ok_or("Conv bias must be f32 like its input")?),
        None => None,
    };
    if !fits(&p) {
        return Err(format!("Conv input {:?} does not fit the prepared weights {:?}", x.shape, w_shape));
    }
    if xv.len() != p.n * p.c * p.geom.in_size() || bv.is_some_and(|b| b.len() != p.m) {
        return Err("Conv tensors hold fewer elements than their shapes say".into());
    }
    let y = reset_shared(outputs.first_mut().ok_or("missing output")?, &p.out_shape());
    Ok((!y.is_empty()).then_some((p, xv, bv, y)))
}

/// Fewest elements a growing output buffer's zero-fill splits between threads for.
const PAR_FILL: usize = 1 << 16;

/// `t` reset to an f32 tensor of `shape` ([`Tensor::reset`]), the zero-fill of a large grown part split between
/// the threads. A session's pooled buffer holds values of many sizes in turn, so every run grows it again
/// (MobileNetV2 224: 17 MB of zeros per run over four buffers, 4% of a 1-thread run, serial at 2 threads).
fn reset_shared<'o>(t: &'o mut Tensor, shape: &[usize]) -> &'o mut [f32] {
    let n: usize = shape.iter().product();
    if let crate::ir::TensorData::F32(v) = &mut t.data {
        let old = v.len();
        if n > old && n - old >= PAR_FILL && crate::runtime::spin_pool::threads() > 1 {
            v.reserve(n - old);
            let spare = &mut v.spare_capacity_mut()[..n - old];
            let chunk = spare.len().div_ceil(2 * crate::runtime::spin_pool::threads());
            crate::runtime::spin_pool::for_each_chunk_mut(spare, chunk, &|_, part| {
                part.fill(std::mem::MaybeUninit::new(0.0));
            });
            // SAFETY: the elements old..n (the spare capacity's first n - old) were all written above.
            unsafe { v.set_len(n) };
        }
    }
    t.reset::<f32>(shape)
}

/// A 1×1 convolution with unit strides and no padding: its column matrix is the input itself.
fn is_pointwise(g: &crate::ir::ops::conv::Geom) -> bool {
    g.k == [1; 3] && g.s == [1; 3] && g.pb == [0; 3] && g.pe == [0; 3]
}

/// True when the plan runs the direct depthwise kernel (one input channel per group, 1-D/2-D).
fn is_depthwise(p: &ConvPlan) -> bool {
    let g = &p.geom;
    p.cg() == 1 && g.inp[0] == 1 && g.k[0] == 1 && g.pb[0] == 0 && g.pe[0] == 0
}

/// Runs Conv.
pub(super) fn conv(a: &ConvAttrs, inputs: &[Option<&Tensor>], outputs: &mut [Tensor], scratch: &mut Scratch) -> Result<(), String> {
    let (x, w) = (input(inputs, 0)?, input(inputs, 1)?);
    let b = inputs.get(2).copied().flatten();
    check_dtypes("Conv", x.dtype(), w.dtype(), b.map(|b| b.dtype()))?;
    let out = outputs.first_mut().ok_or("missing output")?;
    let p = conv_plan(&x.shape, &w.shape, b.map(|b| &b.shape[..]), a)?;
    run_float(&Forward(&p, a.activation), [x, w], b, &p.out_shape(), out, scratch)
}

/// Runs ConvTranspose.
pub(super) fn conv_transpose(a: &ConvTransposeAttrs, inputs: &[Option<&Tensor>], outputs: &mut [Tensor], scratch: &mut Scratch) -> Result<(), String> {
    let (x, w) = (input(inputs, 0)?, input(inputs, 1)?);
    let b = inputs.get(2).copied().flatten();
    check_dtypes("ConvTranspose", x.dtype(), w.dtype(), b.map(|b| b.dtype()))?;
    let out = outputs.first_mut().ok_or("missing output")?;
    let p = transpose_plan(&x.shape, &w.shape, b.map(|b| &b.shape[..]), a)?;
    run_float(&Transposed(&p, a.conv.activation), [x, w], b, &p.out_shape(), out, scratch)
}

/// A planned convolution, runnable in f32 or f64.
trait RealConv {
    /// Computes `y` from the input, weights and bias.
    fn run<T: Real>(&self, x: &[T], w: &[T], b: Option<&[T]>, y: &mut [T], scratch: &mut Vec<T>) -> Result<(), String>;
}

/// Conv with its fused activation.
struct Forward<'a>(&'a ConvPlan, Option<Activation>);
/// ConvTranspose with its fused activation.
struct Transposed<'a>(&'a TPlan, Option<Activation>);

impl RealConv for Forward<'_> {
    fn run<T: Real>(&self, x: &[T], w: &[T], b: Option<&[T]>, y: &mut [T], scratch: &mut Vec<T>) -> Result<(), String> {
        conv_real(self.0, x, w, b, self.1, y, scratch)
    }
}

impl RealConv for Transposed<'_> {
    fn run<T: Real>(&self, x: &[T], w: &[T], b: Option<&[T]>, y: &mut [T], scratch: &mut Vec<T>) -> Result<(), String> {
        transpose::run(self.0, x, w, b, self.1, y, scratch)
    }
}

/// Runs `k` in the inputs' float type: f32 and f64 directly, f16/bf16 through f32.
fn run_float(k: &impl RealConv, [x, w]: [&Tensor; 2], b: Option<&Tensor>, shape: &[usize], out: &mut Tensor, scratch: &mut Scratch) -> Result<(), String> {
    match x.dtype() {
        DType::F32 => {
            let (xv, wv, bv) = views::<f32>(x, w, b)?;
            k.run(xv, wv, bv, out.reset(shape), &mut scratch.f32)
        }
        DType::F64 => {
            let (xv, wv, bv) = views::<f64>(x, w, b)?;
            k.run(xv, wv, bv, out.reset(shape), &mut scratch.f64)
        }
        _ => {
            let (xv, wv, bv) = (to_f32(x)?, to_f32(w)?, b.map(to_f32).transpose()?);
            let mut y = vec![0f32; shape.iter().product()];
            k.run(&xv, &wv, bv.as_deref(), &mut y, &mut scratch.f32)?;
            from_f32(&y, x.dtype(), shape, out);
            Ok(())
        }
    }
}

type Views<'a, T> = (&'a [T], &'a [T], Option<&'a [T]>);

fn views<'a, T: Real>(x: &'a Tensor, w: &'a Tensor, b: Option<&'a Tensor>) -> Result<Views<'a, T>, String> {
    let msg = || format!("expected {} data", T::DTYPE);
    Ok((
        x.view::<T>().ok_or_else(msg)?,
        w.view::<T>().ok_or_else(msg)?,
        b.map(|b| b.view::<T>().ok_or_else(msg)).transpose()?,
    ))
}

/// Conv in f32 or f64: checks the buffer sizes and dispatches to the depthwise, pointwise or im2col path.
fn conv_real<T: Real>(p: &ConvPlan, x: &[T], w: &[T], b: Option<&[T]>, act: Option<Activation>, y: &mut [T], scratch: &mut Vec<T>) -> Result<(), String> {
    let g = &p.geom;
    if x.len() != p.n * p.c * g.in_size() || w.len() != p.m * p.cg() * g.k_size() || b.is_some_and(|b| b.len() != p.m) || b.is_some() != p.has_bias {
        return Err("Conv tensors hold fewer elements than their shapes say".into());
    }
    if y.is_empty() {
        return Ok(());
    }
    if x.is_empty() {
        // An empty input (a zero-size spatial or channel axis) under padding: every window reads only padding,
        // so each output is its channel's bias through the activation. The kernels below assume a non-empty plane.
        y.fill(T::ZERO);
        for (k, plane) in y.chunks_mut(g.out_size().max(1)).enumerate() {
            super::matmul::bias_act(plane, b.map(|b| b[k % p.m]), act);
        }
        return Ok(());
    }
    if is_depthwise(p) {
        depthwise::run(p, x, w, b, act, y, scratch);
        return Ok(());
    }
    let pointwise = is_pointwise(g);
    if pointwise {
        // Y[n, grp] (mg × P) = W[grp] (mg × cg) · X[n, grp] (cg × P), straight on NCHW.
        let (cg, mg, hw, group) = (p.cg(), p.mg(), g.in_size(), p.group);
        let job = Batched {
            batches: p.n * group,
            m: mg,
            n: hw,
            k: cg,
            alpha: T::ONE,
            a: |bi| MatRef::rows(w, (bi % group) * mg * cg, cg),
            b: |bi| MatRef::rows(x, (bi / group * p.c + bi % group * cg) * hw, hw),
            _p: std::marker::PhantomData,
        };
        return job.run(y, |bi, i, _, row| super::matmul::bias_act(row, b.map(|b| b[(bi % group) * mg + i]), act));
    }
    im2col::run(p, x, w, b, act, y, scratch);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::ops::{infer, TypeInfo};
    use crate::ir::{AutoPad, Op};
    use crate::runtime::kernels::eval;
    use half::f16;

    pub(crate) fn rnd(n: usize, seed: u64) -> Vec<f32> {
        let mut s = seed.wrapping_mul(0x9E3779B97F4A7C15).wrapping_add(12345);
        (0..n)
            .map(|_| {
                s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
            })
            .collect()
    }

    /// One Conv node (input `xs`, seeded constant weights `ws`, a seeded bias when `with_bias`) prepared by
    /// `prepare`: (the prepared kernel's output on a pool of `threads` threads, the ordinary kernel's output).
    /// Panics when `prepare` declines the node.
    #[cfg(target_arch = "x86_64")]
    pub(crate) fn prepared_and_ordinary(
        xs: &[usize],
        ws: &[usize],
        a: &ConvAttrs,
        with_bias: bool,
        seed: u64,
        prepare: fn(&crate::ir::Graph, usize) -> Option<Box<dyn crate::runtime::kernels::PreparedKernel>>,
        threads: usize,
    ) -> (Tensor, Tensor) {
        use crate::ir::infer::infer_graph;
        use crate::runtime::CpuEval;
        let mut g = crate::ir::Graph::new("conv");
        let x = g.add_input("x", DType::F32, xs.to_vec());
        let w = g.add_constant("w", Tensor::from_f32(ws.to_vec(), rnd(ws.iter().product(), seed + 1)));
        let b = with_bias.then(|| g.add_constant("b", Tensor::from_f32(vec![ws[0]], rnd(ws[0], 77))));
        let y = g.add_value("y", DType::F32, vec![]);
        g.add_node("conv", Op::Conv(a.clone()), vec![Some(x), Some(w), b], vec![y]);
        g.outputs.push(y);
        infer_graph(&mut g, &CpuEval).unwrap();
        let k = prepare(&g, 0).unwrap_or_else(|| panic!("case {seed}: not prepared"));
        let xt = Tensor::from_f32(xs.to_vec(), rnd(xs.iter().product(), seed + 100));
        let tensors: Vec<Option<&Tensor>> = g.nodes[0].inputs.iter().map(|i| i.map(|v| g.values[v.0].constant.as_ref().unwrap_or(&xt))).collect();
        let mut want = vec![Tensor::default()];
        eval(&g.nodes[0].op, &tensors, &mut want, &mut Scratch::default()).unwrap();
        let mut given = tensors.clone();
        given[1] = None; // the prepared kernel holds the weights
        let mut got = vec![Tensor::default()];
        let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
        pool.install(|| k.run(&given, &mut got, &mut Scratch::default())).unwrap();
        assert_eq!(got[0].shape, want[0].shape, "case {seed}");
        (got.swap_remove(0), want.swap_remove(0))
    }

    /// Whether `prepare` takes a one-Conv graph (input `xs`, seeded constant weights `ws`, no bias).
    #[cfg(target_arch = "x86_64")]
    pub(crate) fn is_prepared(xs: &[usize], ws: &[usize], a: &ConvAttrs, prepare: fn(&crate::ir::Graph, usize) -> Option<Box<dyn crate::runtime::kernels::PreparedKernel>>) -> bool {
        use crate::ir::infer::infer_graph;
        use crate::runtime::CpuEval;
        let mut g = crate::ir::Graph::new("conv");
        let x = g.add_input("x", DType::F32, xs.to_vec());
        let w = g.add_constant("w", Tensor::from_f32(ws.to_vec(), rnd(ws.iter().product(), 3)));
        let y = g.add_value("y", DType::F32, vec![]);
        g.add_node("conv", Op::Conv(a.clone()), vec![Some(x), Some(w), None], vec![y]);
        g.outputs.push(y);
        infer_graph(&mut g, &CpuEval).unwrap();
        prepare(&g, 0).is_some()
    }

    /// Deliberately simple direct convolution over explicit begin pads (N-D via index vectors).
    #[allow(clippy::too_many_arguments)]
    fn naive_conv(
        x: &[f32],
        xs: &[usize],
        w: &[f32],
        ws: &[usize],
        b: Option<&[f32]>,
        group: usize,
        strides: &[usize],
        dil: &[usize],
        pads_begin: &[usize],
        out_sp: &[usize],
    ) -> Vec<f32> {
        let r = xs.len() - 2;
        let (n, c, m) = (xs[0], xs[1], ws[0]);
        let (cg, mg) = (c / group, m / group);
        let osize: usize = out_sp.iter().product();
        let ksize: usize = ws[2..].iter().product();
        let mut y = vec![0f32; n * m * osize];
        let unflat = |mut i: usize, dims: &[usize]| -> Vec<usize> {
            let mut v = vec![0; dims.len()];
            for d in (0..dims.len()).rev() {
                v[d] = i % dims[d];
                i /= dims[d];
            }
            v
        };
        for ni in 0..n {
            for mi in 0..m {
                let grp = mi / mg;
                for o in 0..osize {
                    let oi = unflat(o, out_sp);
                    let mut s = b.map_or(0.0, |b| b[mi]);
                    for ci in 0..cg {
                        for kk in 0..ksize {
                            let ki = unflat(kk, &ws[2..]);
                            let mut xi = 0usize;
                            let mut inside = true;
                            for d in 0..r {
                                let pos = (oi[d] * strides[d] + ki[d] * dil[d]) as isize - pads_begin[d] as isize;
                                if pos < 0 || pos >= xs[2 + d] as isize {
                                    inside = false;
                                }
                                xi = xi * xs[2 + d] + pos.max(0) as usize;
                            }
                            if inside {
                                let xoff = (ni * c + grp * cg + ci) * x.len() / (n * c);
                                s += x[xoff + xi] * w[(mi * cg + ci) * ksize + kk];
                            }
                        }
                    }
                    y[(ni * m + mi) * osize + o] = s;
                }
            }
        }
        y
    }

    pub(crate) fn close(got: &[f32], want: &[f32], what: &str) {
        assert_eq!(got.len(), want.len(), "{what}: length");
        for (i, (a, b)) in got.iter().zip(want).enumerate() {
            assert!((a - b).abs() <= 1e-4 * (1.0 + b.abs()), "{what}: element {i}: {a} vs {b}");
        }
    }

    fn run_op(op: &Op, ins: &[Option<&Tensor>]) -> Result<Tensor, String> {
        let mut out = vec![Tensor::default()];
        let infos: Vec<Option<TypeInfo>> = ins.iter().map(|t| t.map(|t| TypeInfo { dtype: t.dtype(), shape: &t.shape, value: None })).collect();
        eval(op, ins, &mut out, &mut Scratch::default())?;
        let inferred = infer(op, &infos).map_err(|e| format!("{e:?}"))?;
        assert_eq!(inferred[0], (out[0].dtype(), out[0].shape.clone()), "infer must predict eval");
        Ok(out.pop().unwrap())
    }

    fn attrs(group: usize, strides: &[usize], dil: &[usize], pads: &[usize]) -> ConvAttrs {
        ConvAttrs { kernel_shape: vec![], strides: strides.to_vec(), dilations: dil.to_vec(), pads: pads.to_vec(), auto_pad: AutoPad::NotSet, group, activation: None }
    }

    /// An empty input plane under padding (a slice emptied the width): every window reads only padding, so each
    /// output is its channel's bias (through the activation) — depthwise and grouped alike. Found by the
    /// `graph_build` fuzzer (the depthwise kernel split an empty plane into rows of width 0 and panicked).
    #[test]
    fn an_empty_input_under_padding_gives_the_bias() {
        let x = Tensor::from_f32(vec![1, 2, 3, 0], vec![]);
        let b = Tensor::from_f32(vec![2], vec![0.5, -2.0]);
        for (w, group) in [(Tensor::from_f32(vec![2, 1, 1, 1], vec![1.0, 1.0]), 2), (Tensor::from_f32(vec![2, 2, 1, 1], vec![1.0; 4]), 1)] {
            let mut a = attrs(group, &[], &[], &[0, 1, 0, 1]);
            a.activation = Some(Activation::Relu);
            let y = run_op(&Op::Conv(a), &[Some(&x), Some(&w), Some(&b)]).unwrap();
            assert_eq!(y.shape, vec![1, 2, 3, 2]);
            assert_eq!(y.as_f32().unwrap(), &[0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0], "group {group}");
        }
    }

    /// The ONNX Conv spec example: 5×5 input 0..24, 3×3 ones kernel, with and without padding.
    #[test]
    fn onnx_spec_example() {
        let x = Tensor::from_f32(vec![1, 1, 5, 5], (0..25).map(|v| v as f32).collect());
        let w = Tensor::from_f32(vec![1, 1, 3, 3], vec![1.0; 9]);
        let y = run_op(&Op::Conv(attrs(1, &[], &[], &[1, 1, 1, 1])), &[Some(&x), Some(&w)]).unwrap();
        #[rustfmt::skip]
        let want = [12., 21., 27., 33., 24., 33., 54., 63., 72., 51., 63., 99., 108., 117., 81., 93., 144., 153., 162., 111., 72., 111., 117., 123., 84.];
        assert_eq!(y.as_f32().unwrap(), &want);
        let y = run_op(&Op::Conv(attrs(1, &[], &[], &[])), &[Some(&x), Some(&w)]).unwrap();
        assert_eq!(y.as_f32().unwrap(), &[54., 63., 72., 99., 108., 117., 144., 153., 162.]);
        // strides 2, pads 1 1 1 1 (conv_with_strides_padding)
        let y = run_op(&Op::Conv(attrs(1, &[2, 2], &[], &[1, 1, 1, 1])), &[Some(&x), Some(&w)]).unwrap();
        assert_eq!(y.shape, vec![1, 1, 3, 3]);
        assert_eq!(y.as_f32().unwrap(), &[12., 27., 24., 63., 108., 81., 72., 117., 84.]);
    }

    /// Every path (depthwise, pointwise, im2col; 1-D/2-D/3-D) against the naive loop.
    #[test]
    fn paths_match_naive_conv() {
        struct Case {
            xs: Vec<usize>,
            ws: Vec<usize>,
            group: usize,
            s: Vec<usize>,
            d: Vec<usize>,
            p: Vec<usize>,
        }
        let c = |xs: &[usize], ws: &[usize], group, s: &[usize], d: &[usize], p: &[usize]| Case {
            xs: xs.to_vec(),
            ws: ws.to_vec(),
            group,
            s: s.to_vec(),
            d: d.to_vec(),
            p: p.to_vec(),
        };
        let cases = vec![
            // depthwise 3×3 stride 1 / 2, padded (the MobileNet hot cases), odd sizes, multiplier 2
            c(&[2, 8, 13, 17], &[8, 1, 3, 3], 8, &[1, 1], &[1, 1], &[1, 1, 1, 1]),
            c(&[1, 8, 14, 15], &[8, 1, 3, 3], 8, &[2, 2], &[1, 1], &[1, 1, 1, 1]),
            c(&[1, 8, 14, 15], &[8, 1, 3, 3], 8, &[2, 2], &[1, 1], &[0, 0, 1, 1]),
            c(&[1, 4, 9, 40], &[8, 1, 3, 5], 4, &[1, 3], &[2, 1], &[2, 0, 1, 3]),
            c(&[1, 3, 4, 4], &[3, 1, 5, 5], 3, &[1, 1], &[1, 1], &[2, 2, 2, 2]),
            c(&[1, 3, 20], &[3, 1, 4], 3, &[2], &[2], &[3, 1]),
            c(&[1, 6, 17, 16], &[6, 1, 5, 5], 6, &[2, 2], &[1, 1], &[2, 2, 2, 2]),
            c(&[2, 4, 9, 10], &[4, 1, 3, 3], 4, &[2, 2], &[1, 1], &[0, 1, 2, 0]),
            c(&[1, 4, 70, 90], &[4, 1, 3, 3], 4, &[2, 2], &[1, 1], &[1, 1, 1, 1]),
            c(&[1, 4, 3, 2], &[4, 1, 3, 3], 4, &[1, 2], &[1, 1], &[1, 1, 1, 1]),
            // pointwise, grouped pointwise, batch 2
            c(&[2, 16, 7, 9], &[24, 16, 1, 1], 1, &[], &[], &[]),
            c(&[1, 8, 5, 5], &[6, 4, 1, 1], 2, &[], &[], &[]),
            c(&[1, 300, 3, 3], &[70, 300, 1, 1], 1, &[], &[], &[]),
            // general im2col: strides, dilations, asymmetric pads, groups, 1-D and 3-D, 1×1 stride 2
            c(&[1, 3, 23, 21], &[16, 3, 3, 3], 1, &[2, 2], &[1, 1], &[1, 1, 1, 1]),
            c(&[2, 6, 11, 10], &[4, 3, 3, 2], 2, &[1, 2], &[2, 1], &[0, 1, 2, 0]),
            c(&[1, 4, 30], &[5, 4, 3], 1, &[1], &[3], &[2, 4]),
            c(&[1, 2, 5, 6, 7], &[3, 2, 3, 2, 3], 1, &[2, 1, 2], &[1, 2, 1], &[1, 0, 1, 1, 2, 0]),
            c(&[1, 8, 9, 9], &[5, 8, 1, 1], 1, &[2, 2], &[1, 1], &[]),
            c(&[1, 64, 12, 12], &[40, 64, 3, 3], 1, &[1, 1], &[1, 1], &[1, 1, 1, 1]),
            c(&[1, 2, 70, 90], &[3, 2, 3, 3], 1, &[1, 1], &[1, 1], &[1, 1, 1, 1]),
        ];
        for (ci, cs) in cases.iter().enumerate() {
            let x = rnd(cs.xs.iter().product(), ci as u64);
            let w = rnd(cs.ws.iter().product(), 100 + ci as u64);
            let b = rnd(cs.ws[0], 200 + ci as u64);
            let r = cs.xs.len() - 2;
            let ones = vec![1; r];
            let s = if cs.s.is_empty() { &ones } else { &cs.s };
            let d = if cs.d.is_empty() { &ones } else { &cs.d };
            let zeros = vec![0; 2 * r];
            let p = if cs.p.is_empty() { &zeros } else { &cs.p };
            let out_sp: Vec<usize> = (0..r).map(|i| (cs.xs[2 + i] + p[i] + p[r + i] - (cs.ws[2 + i] - 1) * d[i] - 1) / s[i] + 1).collect();
            let want = naive_conv(&x, &cs.xs, &w, &cs.ws, Some(&b), cs.group, s, d, &p[..r], &out_sp);
            let xt = Tensor::from_f32(cs.xs.clone(), x);
            let wt = Tensor::from_f32(cs.ws.clone(), w);
            let bt = Tensor::from_f32(vec![cs.ws[0]], b);
            for act in [None, Some(Activation::Relu6), Some(Activation::Silu)] {
                let mut a = attrs(cs.group, &cs.s, &cs.d, &cs.p);
                a.activation = act;
                let y = run_op(&Op::Conv(a), &[Some(&xt), Some(&wt), Some(&bt)]).unwrap();
                let mut want_sh = vec![cs.xs[0], cs.ws[0]];
                want_sh.extend(&out_sp);
                assert_eq!(y.shape, want_sh, "case {ci}");
                let want_act: Vec<f32> = want.iter().map(|&v| act.map_or(v, |a| a.apply(v))).collect();
                close(y.as_f32().unwrap(), &want_act, &format!("case {ci} act {act:?}"));
            }
        }
    }

    #[test]
    fn auto_pad_and_other_dtypes() {
        // SAME_UPPER / SAME_LOWER on a 5×5 input with stride 2: output 3×3, pads 1/1 (kernel 3, total 2).
        let x = Tensor::from_f32(vec![1, 1, 5, 5], (0..25).map(|v| v as f32).collect());
        let w = Tensor::from_f32(vec![1, 1, 3, 3], vec![1.0; 9]);
        let mut a = attrs(1, &[2, 2], &[], &[]);
        a.auto_pad = AutoPad::SameUpper;
        let y = run_op(&Op::Conv(a.clone()), &[Some(&x), Some(&w)]).unwrap();
        assert_eq!(y.as_f32().unwrap(), &[12., 27., 24., 63., 108., 81., 72., 117., 84.]);
        // kernel 2, stride 1, 4×4 input: total pad 1; upper pads the end, lower the start.
        let x4 = Tensor::from_f32(vec![1, 1, 4, 4], (0..16).map(|v| v as f32).collect());
        let w2 = Tensor::from_f32(vec![1, 1, 2, 2], vec![1.0; 4]);
        a.strides = vec![];
        let y = run_op(&Op::Conv(a.clone()), &[Some(&x4), Some(&w2)]).unwrap();
        assert_eq!(&y.as_f32().unwrap()[..4], &[10., 14., 18., 10.]);
        a.auto_pad = AutoPad::SameLower;
        let y = run_op(&Op::Conv(a.clone()), &[Some(&x4), Some(&w2)]).unwrap();
        assert_eq!(&y.as_f32().unwrap()[..4], &[0., 1., 3., 5.]);
        a.auto_pad = AutoPad::Valid;
        assert_eq!(run_op(&Op::Conv(a.clone()), &[Some(&x4), Some(&w2)]).unwrap().shape, vec![1, 1, 3, 3]);
        // f64 and f16 give the f32 answer
        let x64 = Tensor::from_vec(vec![1, 1, 5, 5], (0..25).map(|v| v as f64).collect()).unwrap();
        let w64 = Tensor::from_vec(vec![1, 1, 3, 3], vec![1.0f64; 9]).unwrap();
        let y = run_op(&Op::Conv(attrs(1, &[], &[], &[])), &[Some(&x64), Some(&w64)]).unwrap();
        assert_eq!(y.view::<f64>().unwrap(), &[54., 63., 72., 99., 108., 117., 144., 153., 162.]);
        let x16 = Tensor::from_vec(vec![1, 1, 5, 5], (0..25).map(|v| f16::from_f32(v as f32)).collect()).unwrap();
        let w16 = Tensor::from_vec(vec![1, 1, 3, 3], vec![f16::ONE; 9]).unwrap();
        let y = run_op(&Op::Conv(attrs(1, &[], &[], &[])), &[Some(&x16), Some(&w16)]).unwrap();
        assert_eq!(y.view::<f16>().unwrap()[0], f16::from_f32(54.0));
        // errors, not panics
        let xi = Tensor::from_vec(vec![1, 1, 5, 5], vec![0i32; 25]).unwrap();
        assert!(run_op(&Op::Conv(attrs(1, &[], &[], &[])), &[Some(&xi), Some(&w)]).unwrap_err().contains("does not support i32"));
        let wbad = Tensor::from_f32(vec![1, 2, 3, 3], vec![1.0; 18]);
        assert!(run_op(&Op::Conv(attrs(1, &[], &[], &[])), &[Some(&x), Some(&wbad)]).is_err());
        let wbig = Tensor::from_f32(vec![1, 1, 7, 7], vec![1.0; 49]);
        assert!(run_op(&Op::Conv(attrs(1, &[], &[], &[])), &[Some(&x), Some(&wbig)]).unwrap_err().contains("larger than the padded input"));
    }

    /// Naive ConvTranspose: scatter every input pixel times the kernel into the output.
    #[allow(clippy::too_many_arguments)]
    fn naive_convt(x: &[f32], xs: &[usize], w: &[f32], ws: &[usize], b: &[f32], group: usize, s: &[usize], d: &[usize], pb: &[isize], out_sp: &[usize]) -> Vec<f32> {
        let r = xs.len() - 2;
        let (n, c) = (xs[0], xs[1]);
        let (cg, mg) = (c / group, ws[1]);
        let m = mg * group;
        let isz: usize = xs[2..].iter().product();
        let osz: usize = out_sp.iter().product();
        let ksz: usize = ws[2..].iter().product();
        let mut y = vec![0f32; n * m * osz];
        for ni in 0..n {
            for mi in 0..m {
                for o in 0..osz {
                    y[(ni * m + mi) * osz + o] = b[mi];
                }
            }
        }
        let unflat = |mut i: usize, dims: &[usize]| -> Vec<usize> {
            let mut v = vec![0; dims.len()];
            for dd in (0..dims.len()).rev() {
                v[dd] = i % dims[dd];
                i /= dims[dd];
            }
            v
        };
        for ni in 0..n {
            for ci in 0..c {
                let grp = ci / cg;
                for ii in 0..isz {
                    let iv = unflat(ii, &xs[2..]);
                    for mo in 0..mg {
                        for kk in 0..ksz {
                            let kv = unflat(kk, &ws[2..]);
                            let mut oi = 0usize;
                            let mut inside = true;
                            for dd in 0..r {
                                let pos = (iv[dd] * s[dd] + kv[dd] * d[dd]) as isize - pb[dd];
                                if pos < 0 || pos >= out_sp[dd] as isize {
                                    inside = false;
                                }
                                oi = oi * out_sp[dd] + pos.max(0) as usize;
                            }
                            if inside {
                                let mi = grp * mg + mo;
                                y[(ni * m + mi) * osz + oi] += x[(ni * c + ci) * isz + ii] * w[(ci * mg + mo) * ksz + kk];
                            }
                        }
                    }
                }
            }
        }
        y
    }

    #[test]
    fn conv_transpose_matches_naive_and_spec() {
        let tattrs = |group, s: &[usize], d: &[usize], p: &[usize], op: &[usize], os: &[usize], ap| ConvTransposeAttrs {
            conv: ConvAttrs { kernel_shape: vec![], strides: s.to_vec(), dilations: d.to_vec(), pads: p.to_vec(), auto_pad: ap, group, activation: None },
            output_padding: op.to_vec(),
            output_shape: os.to_vec(),
        };
        // ONNX spec: convtranspose_pads: x 3×3 (0..8), W ones [1, 2, 3, 3], strides [3, 2], pads [1, 2, 1, 2].
        let x = Tensor::from_f32(vec![1, 1, 3, 3], (0..9).map(|v| v as f32).collect());
        let w = Tensor::from_f32(vec![1, 2, 3, 3], vec![1.0; 18]);
        let y = run_op(&Op::ConvTranspose(tattrs(1, &[3, 2], &[], &[1, 2, 1, 2], &[], &[], AutoPad::NotSet)), &[Some(&x), Some(&w)]).unwrap();
        assert_eq!(y.shape, vec![1, 2, 7, 3]);
        #[rustfmt::skip]
        let plane = [1., 1., 3., 1., 1., 3., 7., 4., 9., 7., 4., 9., 7., 4., 9., 13., 7., 15., 13., 7., 15.];
        assert_eq!(&y.as_f32().unwrap()[..21], &plane);
        // output_shape [10, 8] with strides [3, 2] (convtranspose_output_shape): shape and total value.
        let y = run_op(&Op::ConvTranspose(tattrs(1, &[3, 2], &[], &[], &[], &[10, 8], AutoPad::NotSet)), &[Some(&x), Some(&w)]).unwrap();
        assert_eq!(y.shape, vec![1, 2, 10, 8]);
        let y2 = run_op(&Op::ConvTranspose(tattrs(1, &[3, 2], &[], &[], &[1, 1], &[], AutoPad::NotSet)), &[Some(&x), Some(&w)]).unwrap();
        assert_eq!(y2.shape, vec![1, 2, 10, 8]);
        assert_eq!(y.as_f32().unwrap(), y2.as_f32().unwrap());

        // random cases against the naive scatter
        struct Case(Vec<usize>, Vec<usize>, usize, Vec<usize>, Vec<usize>, Vec<usize>, Vec<usize>);
        let cases = vec![
            Case(vec![1, 3, 5, 6], vec![3, 2, 3, 3], 1, vec![2, 2], vec![1, 1], vec![1, 1, 1, 1], vec![1, 1]),
            Case(vec![2, 4, 4, 3], vec![4, 3, 2, 3], 2, vec![1, 3], vec![2, 1], vec![0, 2, 1, 0], vec![0, 2]),
            Case(vec![1, 2, 7], vec![2, 3, 4], 1, vec![3], vec![2], vec![2, 1], vec![]),
            Case(vec![1, 2, 3, 4, 3], vec![2, 2, 2, 3, 2], 2, vec![2, 1, 2], vec![1, 1, 2], vec![0, 1, 0, 1, 0, 1], vec![]),
            Case(vec![1, 6, 4, 4], vec![6, 1, 3, 3], 6, vec![2, 2], vec![1, 1], vec![1, 1, 1, 1], vec![]),
        ];
        for (ci, Case(xs, ws, group, s, d, p, op)) in cases.into_iter().enumerate() {
            let r = xs.len() - 2;
            let xv = rnd(xs.iter().product(), 300 + ci as u64);
            let wv = rnd(ws.iter().product(), 400 + ci as u64);
            let m = ws[1] * group;
            let bv = rnd(m, 500 + ci as u64);
            let opd = if op.is_empty() { vec![0; r] } else { op.clone() };
            let out_sp: Vec<usize> = (0..r).map(|i| s[i] * (xs[2 + i] - 1) + opd[i] + (ws[2 + i] - 1) * d[i] + 1 - p[i] - p[r + i]).collect();
            let pb: Vec<isize> = p[..r].iter().map(|&v| v as isize).collect();
            let want = naive_convt(&xv, &xs, &wv, &ws, &bv, group, &s, &d, &pb, &out_sp);
            let (xt, wt, bt) = (Tensor::from_f32(xs.clone(), xv), Tensor::from_f32(ws.clone(), wv), Tensor::from_f32(vec![m], bv));
            let y = run_op(&Op::ConvTranspose(tattrs(group, &s, &d, &p, &op, &[], AutoPad::NotSet)), &[Some(&xt), Some(&wt), Some(&bt)]).unwrap();
            assert_eq!(&y.shape[2..], &out_sp[..], "case {ci}");
            close(y.as_f32().unwrap(), &want, &format!("convtranspose case {ci}"));
        }

        // SAME_UPPER without output_shape: output = input · stride; total padding split by the ONNX rule.
        let xs = vec![1, 1, 3, 3];
        let xv = rnd(9, 7);
        let wv = rnd(2 * 9, 8);
        let xt = Tensor::from_f32(xs.clone(), xv.clone());
        let wt = Tensor::from_f32(vec![1, 2, 3, 3], wv.clone());
        for ap in [AutoPad::SameUpper, AutoPad::SameLower] {
            let y = run_op(&Op::ConvTranspose(tattrs(1, &[2, 2], &[], &[], &[], &[], ap)), &[Some(&xt), Some(&wt)]).unwrap();
            assert_eq!(y.shape, vec![1, 2, 6, 6]);
            // total = 2·2 + 3 - 6 = 1: upper pads 0 at the start, lower 1.
            let pb = if ap == AutoPad::SameUpper { 0 } else { 1 };
            let want = naive_convt(&xv, &xs, &wv, &[1, 2, 3, 3], &[0.0, 0.0], 1, &[2, 2], &[1, 1], &[pb, pb], &[6, 6]);
            close(y.as_f32().unwrap(), &want, "same pads");
        }
    }
}

/// Timings of MobileNetV2's convolutions (run with
/// `cargo test --release -p tpu-sdk-core --lib mobilenet_v2_layer_timings -- --ignored --nocapture`;
/// RAYON_NUM_THREADS sets the threads).
#[cfg(test)]
mod bench {
    use super::*;
    use crate::ir::{AutoPad, Op};
    use std::time::Instant;

    fn time_op(op: &Op, ins: &[Option<&Tensor>], out: &mut [Tensor], scratch: &mut Scratch) -> f64 {
        // minimum over the runs: robust against other load on the machine
        let mut best = f64::INFINITY;
        for _ in 0..40 {
            let t0 = Instant::now();
            super::super::eval(op, ins, out, scratch).unwrap();
            best = best.min(t0.elapsed().as_secs_f64() * 1e6);
        }
        best
    }

    #[test]
    #[ignore]
    fn mobilenet_v2_layer_timings() {
        let act = Some(Activation::Relu6);
        // (cin, cout, k, stride, group, spatial in, activation)
        // two reference layers first (not in MobileNetV2 itself), then the network's 52 convolutions
        let mut layers = vec![(32, 192, 1, 1, 1, 112, act), (192, 192, 3, 1, 192, 112, act), (3, 32, 3, 2, 1, 224, act)];
        let (mut cin, mut hw) = (32usize, 112usize);
        for (t, c, n, s) in [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)] {
            for i in 0..n {
                let stride = if i == 0 { s } else { 1 };
                let hidden = cin * t;
                if t != 1 {
                    layers.push((cin, hidden, 1, 1, 1, hw, act));
                }
                layers.push((hidden, hidden, 3, stride, hidden, hw, act));
                hw = hw.div_ceil(stride);
                layers.push((hidden, c, 1, 1, 1, hw, None));
                cin = c;
            }
        }
        layers.push((cin, 1280, 1, 1, 1, hw, act));
        let mut scratch = Scratch::default();
        let mut out = vec![Tensor::default()];
        let (mut total, mut dw_total, mut pw_total) = (0.0, 0.0, 0.0);
        for (li, &(ci, co, k, s, g, hw, act)) in layers.iter().enumerate() {
            let x = Tensor::from_f32(vec![1, ci, hw, hw], tests::rnd(ci * hw * hw, 1));
            let w = Tensor::from_f32(vec![co, ci / g, k, k], tests::rnd(co * ci / g * k * k, 2));
            let b = Tensor::from_f32(vec![co], tests::rnd(co, 3));
            let p = k / 2;
            let a = ConvAttrs { kernel_shape: vec![], strides: vec![s, s], dilations: vec![], pads: vec![p; 4], auto_pad: AutoPad::NotSet, group: g, activation: act };
            let us = time_op(&Op::Conv(a), &[Some(&x), Some(&w), Some(&b)], &mut out, &mut scratch);
            let macs = (co * ci / g * k * k * (hw / s) * (hw / s)) as f64;
            println!("conv {ci:>4}->{co:<4} k{k} s{s} g{g:<4} {hw:>3}x{hw:<3}: {us:8.1} us  {:6.1} GMAC/s", macs / us / 1e3);
            if li < 2 {
                continue; // the reference layers are not part of the network's total
            }
            total += us;
            if g > 1 {
                dw_total += us;
            } else if k == 1 {
                pw_total += us;
            }
        }
        let x = Tensor::from_f32(vec![1, 1280], tests::rnd(1280, 4));
        let w = Tensor::from_f32(vec![1000, 1280], tests::rnd(1280 * 1000, 5));
        let b = Tensor::from_f32(vec![1000], tests::rnd(1000, 6));
        let gemm = Op::Gemm { alpha: 1.0, beta: 1.0, trans_a: false, trans_b: true, activation: None };
        let us = time_op(&gemm, &[Some(&x), Some(&w), Some(&b)], &mut out, &mut scratch);
        println!("gemm 1x1280 · 1280x1000ᵀ: {us:8.1} us");
        total += us;
        // ResNet's stem pool, for reference (not part of MobileNetV2)
        let x = Tensor::from_f32(vec![1, 64, 112, 112], tests::rnd(64 * 112 * 112, 7));
        let pa = crate::ir::PoolAttrs { kernel_shape: vec![3, 3], strides: vec![2, 2], dilations: vec![], pads: vec![1; 4], auto_pad: AutoPad::NotSet, ceil_mode: false, count_include_pad: false };
        let us = time_op(&Op::MaxPool(pa), &[Some(&x)], &mut out, &mut scratch);
        println!("(maxpool 64x112x112 k3 s2: {us:8.1} us)");
        println!("total {:.2} ms (depthwise {:.2} ms, pointwise {:.2} ms), threads {}", total / 1e3, dw_total / 1e3, pw_total / 1e3, rayon::current_num_threads());
    }
}
