//! TRANSPOSE_CONV on int8 (2-D ConvTranspose, one group), as LiteRT's builtin kernels compute it: every
//! input pixel minus the input zero point, times the weights, scattered into an i32 accumulator per output
//! element (`reference_integer_ops::TransposeConv`; the optimized `TransposeConvV2` sums the same products
//! through a GEMM and `Col2im`, so the accumulators are equal), plus the bias, then scaled per output channel
//! by `in_s·w_s[c]/out_s`, plus the output zero point, clamped to the fused activation's range.
//!
//! The scaling is `optimized_ops::Quantize`'s split, as in DEPTHWISE_CONV_2D: channels in whole blocks of 8
//! round the NEON way ([`mul_neon_rshl`]: LiteRT's x86-64 build runs its NEON code through NEON_2_SSE), the
//! remaining channels with `MultiplyByQuantizedMultiplier` ([`mul_double_round`]), which is what the
//! reference kernel does for every channel. With fewer than 8 output channels the two kernels agree.
//!
//! Weights are the IR's `[C_in, C_out, kh, kw]`, symmetric, per output channel along axis 1 (TFLite's OHWI
//! axis 0) or per tensor.

use crate::runtime::spin_pool;

use super::fixedpoint::{mul_double_round, mul_neon_rshl, quantize_multiplier, Multiplier};
use super::{activation_range, arg, dtype_range, out0, Ctx, PreparedKernel, Qp};
use crate::ir::ops::conv::transpose_plan;
use crate::ir::{ConvTransposeAttrs, DType, Tensor};
use crate::runtime::kernels::Scratch;

/// A prepared int8 transposed convolution.
#[derive(Debug)]
struct TransposeConv {
    /// Weights `[C_in][C_out][kh·kw]`.
    w: Vec<i8>,
    bias: Vec<i32>,
    m: Vec<Multiplier>,
    /// Output channels below this index round the NEON way (whole blocks of 8).
    neon_end: usize,
    x: Qp,
    y: Qp,
    act: (i32, i32),
    /// (C_in, C_out), input (h, w), output (h, w), kernel (h, w), strides, dilations, begin pads.
    c: (usize, usize),
    inp: (usize, usize),
    out: (usize, usize),
    k: (usize, usize),
    s: (usize, usize),
    d: (usize, usize),
    pb: (isize, isize),
}

pub(crate) fn prepare(cx: &Ctx, a: &ConvTransposeAttrs) -> Result<Box<dyn PreparedKernel>, String> {
    let (xv, wv, yv) = (cx.input(0)?, cx.input(1)?, cx.output(0)?);
    if xv.shape.len() != 4 || wv.shape.len() != 4 {
        return Err(format!("int8 ConvTranspose needs an NCHW input and 4-D weights, got {:?} and {:?}", xv.shape, wv.shape));
    }
    if xv.dtype != DType::I8 || yv.dtype != DType::I8 || wv.dtype != DType::I8 {
        return Err(format!("int8 ConvTranspose needs i8 input, weights and output, got {}, {} and {}", xv.dtype, wv.dtype, yv.dtype));
    }
    let b_shape = if cx.has_input(2) { Some(cx.input(2)?.shape.as_slice()) } else { None };
    let p = transpose_plan(&xv.shape, &wv.shape, b_shape, a)?;
    if p.group != 1 {
        return Err(format!("int8 ConvTranspose with {} groups is not supported (TFLite's TRANSPOSE_CONV has none)", p.group));
    }
    let (x, y) = (cx.qp(0, false)?, cx.qp(0, true)?);
    let co = p.mg;
    let t = cx.constant(1)?;
    let w = t.view::<i8>().ok_or_else(|| format!("the weights are {}, expected i8", t.dtype()))?.to_vec();
    let q = wv.quant.as_ref().ok_or_else(|| format!("weights '{}' have no quantization parameters", wv.name))?;
    let n = q.scale.len();
    if !(n == 1 || n == co && q.axis == Some(1)) || q.zero_point.iter().any(|&z| z != 0) {
        return Err(format!("weights '{}' must be symmetric with 1 scale or {co} on axis 1, got {n} on axis {:?}", wv.name, q.axis));
    }
    let bias = if cx.has_input(2) {
        let bt = cx.constant(2)?;
        bt.view::<i32>().ok_or_else(|| format!("the bias is {}, expected i32", bt.dtype()))?.to_vec()
    } else {
        vec![0; co]
    };
    // PopulateConvolutionQuantizationParams: in_s · w_s[c] / out_s in f64.
    let m = (0..co).map(|c| quantize_multiplier(x.scale as f64 * q.scale[if n == 1 { 0 } else { c }] as f64 / y.scale as f64)).collect();
    Ok(Box::new(TransposeConv {
        w,
        bias,
        m,
        neon_end: co / 8 * 8,
        x,
        y,
        act: activation_range(a.conv.activation, y, dtype_range(yv.dtype)),
        c: (p.c, co),
        inp: (p.inp[1], p.inp[2]),
        out: (p.out[1], p.out[2]),
        k: (p.k[1], p.k[2]),
        s: (p.s[1], p.s[2]),
        d: (p.d[1], p.d[2]),
        pb: (p.pb[1], p.pb[2]),
    }))
}

impl PreparedKernel for TransposeConv {
    fn run(&self, inputs: &[Option<&Tensor>], outputs: &mut [Tensor], _scratch: &mut Scratch) -> Result<(), String> {
        let xt = arg(inputs, 0)?;
        let x = xt.view::<i8>().ok_or_else(|| format!("the input is {}, expected i8", xt.dtype()))?;
        let ((ci, co), (ih, iw), (oh, ow)) = (self.c, self.inp, self.out);
        let nb = xt.shape.first().copied().unwrap_or(0);
        if xt.shape.len() != 4 || x.len() != nb * ci * ih * iw || xt.shape[1] != ci {
            return Err(format!("input shape {:?} does not match the planned transposed convolution", xt.shape));
        }
        let (kh, kw) = self.k;
        let (plane, kk) = (oh * ow, kh * kw);
        let (lo, hi) = self.act;
        let out = out0(outputs)?.reset::<i8>(&[nb, co, oh, ow]);
        let body = |acc: &mut Vec<i32>, bm: usize, orow: &mut [i8]| {
                let (b, m) = (bm / co, bm % co);
                acc.fill(0);
                for c in 0..ci {
                    let xs = &x[(b * ci + c) * ih * iw..(b * ci + c + 1) * ih * iw];
                    let ws = &self.w[(c * co + m) * kk..(c * co + m + 1) * kk];
                    self.scatter(xs, ws, acc);
                }
                let (mult, neon) = (self.m[m], m < self.neon_end);
                for (o, &a) in orow.iter_mut().zip(acc.iter()) {
                    let v = a.wrapping_add(self.bias[m]);
                    let r = if neon { mul_neon_rshl(v, mult) } else { mul_double_round(v, mult) };
                    *o = (r + self.y.zp).clamp(lo, hi) as i8;
                }
        };
        if plane == 0 {
            return Ok(());
        }
        if super::team_parallel(nb * co * ci * ih * iw * kk) {
            spin_pool::for_each_piece_mut(out, plane, || vec![0i32; plane], body);
        } else {
            let mut acc = vec![0i32; plane];
            out.chunks_mut(plane).enumerate().for_each(|(bm, orow)| body(&mut acc, bm, orow));
        }
        Ok(())
    }
}

impl TransposeConv {
    /// Adds one input channel's plane `xs` (minus the zero point) times its kernel `ws` into `acc`.
    fn scatter(&self, xs: &[i8], ws: &[i8], acc: &mut [i32]) {
        let ((ih, iw), (oh, ow), (kh, kw), (sh, sw), (dh, dw), (ph, pw)) = (self.inp, self.out, self.k, self.s, self.d, self.pb);
        for iy in 0..ih {
            for ky in 0..kh {
                let oy = (iy * sh + ky * dh) as isize - ph;
                if oy < 0 || oy >= oh as isize {
                    continue;
                }
                let orow = &mut acc[oy as usize * ow..(oy as usize + 1) * ow];
                let xrow = &xs[iy * iw..(iy + 1) * iw];
                for kx in 0..kw {
                    let wv = ws[ky * kw + kx] as i32;
                    if wv == 0 {
                        continue;
                    }
                    // the columns ix whose ox = ix·sw + kx·dw - pw falls in [0, ow)
                    let off = (kx * dw) as isize - pw;
                    let lo = if off >= 0 { 0 } else { ((-off) as usize).div_ceil(sw) };
                    let hi = if off >= ow as isize { 0 } else { ((ow as isize - 1 - off) as usize / sw + 1).min(iw) };
                    for (ix, &xv) in xrow.iter().enumerate().take(hi).skip(lo) {
                        let ox = (ix * sw) as isize + off;
                        let v = xv as i32 - self.x.zp;
                        orow[ox as usize] = orow[ox as usize].wrapping_add(v.wrapping_mul(wv));
                    }
                }
            }
        }
    }
}
