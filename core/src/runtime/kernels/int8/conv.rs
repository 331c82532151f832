//! CONV_2D, DEPTHWISE_CONV_2D and FULLY_CONNECTED on int8, as LiteRT's optimized kernels compute them:
//! `acc = Σ (x - zp_in)·w + bias` in i32, then `MultiplyByQuantizedMultiplier(acc, in_s·w_s[c]/out_s)`,
//! plus the output zero point, clamped to the fused activation's range.
//!
//! The input zero point folds into the bias (`bias - zp_in·Σw`, the weights' row sums computed here once),
//! with padding filled by the zero point, so the GEMM is a plain i8 dot product ([`super::gemm`]).
//! CONV_2D and FULLY_CONNECTED scale the accumulator as LiteRT's x86-64 GEMM output stage does: the rounding
//! doubling high multiply, then a right shift rounding half up ([`super::fixedpoint::mul_neon_rshl`]);
//! DEPTHWISE_CONV_2D, which has its own loops, with `optimized_ops::Quantize`'s split: channels in whole
//! blocks of 8 the same NEON way, the rest with TFLite's `MultiplyByQuantizedMultiplier` (half away from
//! zero). Both established against LiteRT on random inputs (`tests/tflite_int8.rs`).
//!
//! The depthwise loop is vectorised over whole output planes ([`Conv::depthwise_into`]): i16 inputs minus the
//! zero point, a flat i32 accumulator per output plane, plain Rust that LLVM vectorises, compiled again for
//! AVX-512 and AVX2 on x86-64 and picked at run time. CONV_2D and FULLY_CONNECTED run the packed VNNI or
//! AVX2 kernels ([`super::packed_gemm`], [`super::packed_dot`]) where the CPU has them.


use super::fixedpoint::{mul_double_round, mul_neon_rshl, mul_single_round, quantize_multiplier, Multiplier};
use super::gemm::{dot, dot4, gemm_rows, im2col, Geom2};
#[cfg(target_arch = "x86_64")]
use super::depthwise_nhwc::{self, NhwcDepthwise};
#[cfg(target_arch = "x86_64")]
use super::vnni_planes::{self, VnniDense, VnniDepthwise};
use super::packed_dot::PackedDot;
use super::packed_gemm::{gemm, pack_cols, Out, PackedWeights, RowQuant, RB};
use super::{activation_range, arg, as_i8, out0, team_parallel, Ctx, PreparedKernel, Qp, Q8};
use crate::runtime::spin_pool;
use crate::ir::{Activation, ConvAttrs, DType, Tensor};
use crate::ir::ops::conv::{window_geom, Window};
use crate::runtime::kernels::Scratch;

/// How the i32 accumulator is scaled back (see [`super::fixedpoint`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Rounding {
    /// TFLite `MultiplyByQuantizedMultiplier`.
    Double,
    /// ruy's single-rounding multiplier (not what LiteRT's x86-64 build computes; kept for reference).
    #[allow(dead_code)]
    Single,
    /// The rounding doubling high multiply, then a right shift rounding half up (`vqrdmulh` + `vrshl`):
    /// what LiteRT's x86-64 build computes for CONV_2D's and FULLY_CONNECTED's GEMM output stage.
    Neon,
}

#[inline(always)]
fn scale(acc: i32, m: Multiplier, r: Rounding) -> i32 {
    match r {
        Rounding::Double => mul_double_round(acc, m),
        Rounding::Single => mul_single_round(acc, m),
        Rounding::Neon => mul_neon_rshl(acc, m),
    }
}

/// Weights as i8 (u8 weights shifted by -128, see [`super::as_i8`]), with per-row zero points (shifted the
/// same way) and scales: per tensor, or per output channel along axis 0.
struct Weights {
    w: Vec<i8>,
    zp: Vec<i32>,
    scales: Vec<f32>,
}

fn weights(cx: &Ctx, k: usize, rows: usize) -> Result<Weights, String> {
    let v = cx.input(k)?;
    let t = cx.constant(k)?;
    let (w, shift) = if let Some(w) = t.view::<i8>() {
        (w.to_vec(), 0)
    } else if let Some(w) = t.view::<u8>() {
        (w.iter().map(|&b| (b ^ 0x80) as i8).collect(), 128)
    } else {
        return Err(format!("weights '{}' are {}, expected i8 or u8", v.name, t.dtype()));
    };
    let q = v.quant.as_ref().ok_or_else(|| format!("weights '{}' have no quantization parameters", v.name))?;
    let n = q.scale.len();
    if !(n == 1 || n == rows && q.axis == Some(0)) || q.zero_point.len() != n {
        return Err(format!("weights '{}' have {n} scales on axis {:?}, expected 1 or {rows} on axis 0", v.name, q.axis));
    }
    let per_row = |i: usize| if n == 1 { 0 } else { i };
    let mut zp = Vec::with_capacity(rows);
    for i in 0..rows {
        let z = q.zero_point[per_row(i)] - shift as i64;
        if !(-128..=127).contains(&z) {
            return Err(format!("weights '{}' have zero point {} outside the {} range", v.name, z + shift as i64, t.dtype()));
        }
        zp.push(z as i32);
    }
    Ok(Weights { w, zp, scales: (0..rows).map(|i| q.scale[per_row(i)]).collect() })
}

/// The (shifted, see [`super::as_i8`]) parameters of 8-bit input 0 and the parameters, dtype and fused
/// activation range of output 0.
fn io_params(cx: &Ctx, act: Option<crate::ir::Activation>, what: &str) -> Result<(Qp, Qp, DType, (i32, i32)), String> {
    let (xv, yv) = (cx.input(0)?, cx.output(0)?);
    if !matches!(xv.dtype, DType::I8 | DType::U8) || !matches!(yv.dtype, DType::I8 | DType::U8) {
        return Err(format!("int8 {what} needs 8-bit input and output, got {} and {}", xv.dtype, yv.dtype));
    }
    let (mut x, y) = (cx.qp(0, false)?, cx.qp(0, true)?);
    x.zp -= super::shift_of(xv.dtype);
    Ok((x, y, yv.dtype, activation_range(act, y, super::dtype_range(yv.dtype))))
}

/// Bias as i32 (zeros when absent).
fn bias(cx: &Ctx, k: usize, rows: usize) -> Result<Vec<i32>, String> {
    if !cx.has_input(k) {
        return Ok(vec![0; rows]);
    }
    let t = cx.constant(k)?;
    let b = t.view::<i32>().ok_or_else(|| format!("the bias is {}, expected i32", t.dtype()))?;
    if b.len() != rows {
        return Err(format!("the bias has {} elements for {rows} output channels", b.len()));
    }
    Ok(b.to_vec())
}

/// Multipliers `in_s · w_s[c] / out_s` in f64 (TFLite's `PopulateConvolutionQuantizationParams`).
fn multipliers(x: Qp, w: &[f32], y: Qp) -> Vec<Multiplier> {
    w.iter().map(|&ws| quantize_multiplier(x.scale as f64 * ws as f64 / y.scale as f64)).collect()
}

/// A prepared convolution.
#[derive(Debug)]
struct Conv {
    /// Weights `[O][I/g·kh·kw]` (im2col path).
    w: Vec<i8>,
    /// Weights minus their zero point, `[O][kh·kw]` (depthwise path).
    w16: Vec<i16>,
    /// Weight zero point per output channel (shifted as the weights; zero for TFLite's int8 models).
    wzp: Vec<i32>,
    /// Whether some weight zero point is not 0 (the legacy uint8 models): the im2col path then subtracts
    /// `wzp · Σ patch` per pixel.
    asym: bool,
    /// `bias - zp_in·Σw + K·zp_in·wzp` per output channel (im2col path) or the bias (depthwise path).
    bias: Vec<i32>,
    m: Vec<Multiplier>,
    /// Input parameters, the zero point shifted as the data (see [`super::as_i8`]).
    x: Qp,
    y: Qp,
    /// Output dtype (i8, or u8 for the legacy uint8 models).
    ydt: DType,
    act: (i32, i32),
    group: usize,
    geom: Geom2,
    depthwise: bool,
    rounding: Rounding,
    /// int8 DEPTHWISE_CONV_2D: whole blocks of 8 channels round the NEON way (see `run_into`).
    dw_neon_blocks: bool,
    /// The weights of each group packed for [`gemm`] (the im2col path with symmetric weights; empty for
    /// depthwise and for the legacy uint8 models with weight zero points, which run [`gemm_rows`] on `w`).
    packed: Vec<PackedWeights>,
    /// Each output channel's output stage for [`gemm`] (`bias`, multiplier, zero point, activation range).
    rq: Vec<RowQuant>,
    /// A depthwise convolution with a small output plane: its channel-lane kernel ([`super::depthwise_nhwc`]).
    #[cfg(target_arch = "x86_64")]
    nhwc: Option<NhwcDepthwise>,
    /// A depthwise convolution on a CPU with AVX-512 VNNI and VBMI: its byte-plane kernel
    /// ([`super::vnni_planes`]), which takes precedence.
    #[cfg(target_arch = "x86_64")]
    vnni: Option<VnniDepthwise>,
    /// A convolution over a few input channels (a stem) on such a CPU: the byte-plane kernel instead of
    /// im2col and the GEMM.
    #[cfg(target_arch = "x86_64")]
    dense: Option<VnniDense>,
}

pub(crate) fn prepare_conv(cx: &Ctx, a: &ConvAttrs) -> Result<Box<dyn PreparedKernel>, String> {
    let (xv, wv) = (cx.input(0)?, cx.input(1)?);
    if xv.shape.len() != 4 || wv.shape.len() != 4 {
        return Err(format!("int8 Conv needs an NCHW input and 4-D weights, got {:?} and {:?}", xv.shape, wv.shape));
    }
    let (x, y, ydt, act) = io_params(cx, a.activation, "Conv")?;
    let o = wv.shape[0];
    let Weights { w, zp: wzp, scales: ws } = weights(cx, 1, o)?;
    let b = bias(cx, 2, o)?;
    let win = Window { kernel: &wv.shape[2..], strides: &a.strides, dilations: &a.dilations, pads: &a.pads, auto_pad: a.auto_pad, ceil_mode: false };
    let g = window_geom(&xv.shape[2..], &win, "Conv")?;
    let geom = Geom2 { ih: g.inp[1], iw: g.inp[2], oh: g.out[1], ow: g.out[2], kh: g.k[1], kw: g.k[2], sh: g.s[1], sw: g.s[2], dh: g.d[1], dw: g.d[2], pt: g.pb[1], pl: g.pb[2] };
    let group = a.group.max(1);
    let c = xv.shape[1];
    if c % group != 0 || o % group != 0 || wv.shape[1] * group != c {
        return Err(format!("Conv with {c} input channels, {o} outputs and {group} groups does not fit weights {:?}", wv.shape));
    }
    let depthwise = wv.shape[1] == 1 && group == c && group > 1;
    let kk = wv.shape[1] * geom.kh * geom.kw;
    let (bias, w16) = if depthwise {
        let w16 = w.iter().enumerate().map(|(i, &v)| (v as i32 - wzp[i / kk]) as i16).collect();
        (b, w16)
    } else {
        let bias = b
            .iter()
            .enumerate()
            .map(|(r, &b)| b - x.zp * w[r * kk..(r + 1) * kk].iter().map(|&v| v as i32).sum::<i32>() + kk as i32 * x.zp * wzp[r])
            .collect();
        (bias, Vec::new())
    };
    // CONV_2D's GEMM output stage rounds the NEON way; int8 DEPTHWISE_CONV_2D picks per channel in `run`;
    // uint8 DEPTHWISE_CONV_2D (optimized_ops::DepthwiseConv, rounding kAwayFromZero) rounds half away from
    // zero in its vector and scalar code alike
    let rounding = if depthwise { Rounding::Double } else { Rounding::Neon };
    let dw_neon_blocks = depthwise && xv.dtype == DType::I8;
    let asym = wzp.iter().any(|&z| z != 0);
    let m = multipliers(x, &ws, y);
    let (packed, rq) = if depthwise || asym {
        (Vec::new(), Vec::new())
    } else {
        let og = o / group;
        let packed = (0..group).map(|gi| PackedWeights::new(&w[gi * og * kk..(gi + 1) * og * kk], og, kk)).collect();
        (packed, (0..o).map(|r| RowQuant { bias: bias[r], m: m[r], zp: y.zp, lo: act.0, hi: act.1 }).collect())
    };
    #[cfg(target_arch = "x86_64")]
    let dense = (!depthwise && !asym && group == 1 && vnni_planes::available()).then(|| VnniDense::new(&geom, c, &w, &bias, &m, x.zp, y.zp, act)).flatten();
    // the packed weights replace the plain ones
    let w = if packed.is_empty() { w } else { Vec::new() };
    #[cfg(target_arch = "x86_64")]
    let vnni = (depthwise && o == c && geom.oh * geom.ow >= vnni_planes::MIN_PIXELS && vnni_planes::available())
        .then(|| VnniDepthwise::new(&geom, c, &w16, &bias, &m, if dw_neon_blocks { o / 8 * 8 } else { 0 }, x.zp, y.zp, act))
        .flatten();
    #[cfg(target_arch = "x86_64")]
    let nhwc = (vnni.is_none() && depthwise && o == c && geom.oh * geom.ow <= depthwise_nhwc::max_pixels() && depthwise_nhwc::available())
        .then(|| NhwcDepthwise::new(&geom, c, &w16, &bias, &m, if dw_neon_blocks { o / 8 * 8 } else { 0 }, y.zp, act));
    Ok(Box::new(Conv {
        w,
        w16,
        wzp,
        asym,
        bias,
        m,
        x,
        y,
        ydt,
        act,
        group,
        geom,
        depthwise,
        rounding,
        dw_neon_blocks,
        packed,
        rq,
        #[cfg(target_arch = "x86_64")]
        nhwc,
        #[cfg(target_arch = "x86_64")]
        vnni,
        #[cfg(target_arch = "x86_64")]
        dense,
    }))
}

impl PreparedKernel for Conv {
    fn run(&self, inputs: &[Option<&Tensor>], outputs: &mut [Tensor], scratch: &mut Scratch) -> Result<(), String> {
        let xt = arg(inputs, 0)?;
        let Scratch { i8: col, i8b: xbuf, u8: xp, .. } = scratch;
        let x = as_i8(xt, xbuf, "the input")?;
        let (n, c) = (xt.shape[0], xt.shape[1]);
        let g = &self.geom;
        if x.len() != n * c * g.ih * g.iw {
            return Err(format!("input shape {:?} does not match the planned convolution", xt.shape));
        }
        let shape = [n, self.bias.len(), g.oh, g.ow];
        let out = out0(outputs)?;
        match self.ydt {
            DType::U8 => self.run_into(x, n, c, out.reset::<u8>(&shape), col, xp),
            _ => self.run_into(x, n, c, out.reset::<i8>(&shape), col, xp),
        }
        Ok(())
    }
}

impl Conv {
    fn run_into<T: Q8>(&self, x: &[i8], n: usize, c: usize, out: &mut [T], col: &mut Vec<i8>, xp: &mut Vec<u8>) {
        let g = &self.geom;
        let o = self.bias.len();
        let (p, plane) = (g.oh * g.ow, g.ih * g.iw);
        if p == 0 || out.is_empty() {
            return;
        }
        let (lo, hi) = self.act;
        let zp_out = self.y.zp;
        // DEPTHWISE_CONV_2D's output stage, optimized_ops::Quantize (per channel): channels in whole blocks
        // of 8 through NEON (`vqrdmulh` + `vrshl`, half up), the rest with `MultiplyByQuantizedMultiplier`
        let neon_end = if self.dw_neon_blocks { o / 8 * 8 } else { 0 };
        #[cfg(target_arch = "x86_64")]
        if let Some(d) = &self.vnni {
            d.run(x, n, bytes_mut(out));
            return;
        }
        #[cfg(target_arch = "x86_64")]
        if let Some(d) = &self.dense {
            d.run(x, n, bytes_mut(out));
            return;
        }
        #[cfg(target_arch = "x86_64")]
        if let Some(d) = &self.nhwc {
            d.run(x, n, self.x.zp, bytes_mut(out));
            return;
        }
        if self.depthwise {
            let kk = g.kh * g.kw;
            #[cfg(target_arch = "x86_64")]
            if super::requantize::row_available() {
                // the output stage in the plane kernel's registers (AVX-512, else AVX2)
                let avx512 = super::requantize::available();
                let plane = |pad: &[i16], offs: &[usize], oc: usize, _: &mut [i32], dst: &mut [T]| {
                    let q = RowQuant { bias: self.bias[oc], m: self.m[oc], zp: zp_out, lo, hi };
                    let (w, dst) = (&self.w16[oc * kk..(oc + 1) * kk], bytes_mut(dst));
                    // SAFETY: the CPU has AVX-512 F/BW/VL where `avx512`, else AVX2 (`row_available`)
                    unsafe {
                        if avx512 {
                            dw_plane_quant_avx512(dst, pad, offs, w, q, oc < neon_end)
                        } else {
                            dw_plane_quant_avx2(dst, pad, offs, w, q, oc < neon_end)
                        }
                    }
                };
                self.depthwise_into(x, n, c, out, plane);
                return;
            }
            let plane = |pad: &[i16], offs: &[usize], oc: usize, acc: &mut [i32], dst: &mut [T]| {
                dw_plane(acc, pad, offs, &self.w16[oc * kk..(oc + 1) * kk], self.bias[oc]);
                requantize_row(acc, 0, self.m[oc], oc < neon_end, zp_out, (lo, hi), dst);
            };
            self.depthwise_into(x, n, c, out, plane);
            return;
        }
        let (cg, og) = (c / self.group, o / self.group);
        let kk = cg * g.kh * g.kw;
        let pointwise = g.kh == 1 && g.kw == 1 && g.sh == 1 && g.sw == 1 && g.pt == 0 && g.pl == 0 && g.oh == g.ih && g.ow == g.iw;
        if !pointwise {
            col.resize(p * kk, 0);
        }
        if !self.packed.is_empty() {
            for b in 0..n {
                for (gi, pw) in self.packed.iter().enumerate() {
                    let xs = &x[(b * c + gi * cg) * plane..(b * c + (gi + 1) * cg) * plane];
                    let cols: &[i8] = if pointwise {
                        xs
                    } else {
                        im2col(xs, cg, g, self.x.zp as i8, col);
                        &col[..p * kk]
                    };
                    pack_cols(pw, cols, p, xp);
                    let xp = &xp[..];
                    let ob = bytes_mut(&mut out[(b * o + gi * og) * p..(b * o + (gi + 1) * og) * p]);
                    let rq = &self.rq[gi * og..(gi + 1) * og];
                    if team_parallel(og * kk * p) && og > RB {
                        // whole blocks of rows, about two tasks per thread, on the spinning team
                        let per = og.div_ceil(RB).div_ceil(2 * spin_pool::threads()).max(1) * RB;
                        spin_pool::for_each_chunk_mut(ob, per * p, &|i, ch| gemm(pw, i * per, xp, p, Out::Quant(ch, rq)));
                    } else {
                        gemm(pw, 0, xp, p, Out::Quant(ob, rq));
                    }
                }
            }
            return;
        }
        let mut colsum = vec![0i32; if self.asym { p } else { 0 }];
        for b in 0..n {
            for gi in 0..self.group {
                let xs = &x[(b * c + gi * cg) * plane..(b * c + (gi + 1) * cg) * plane];
                // a 1x1 convolution's patches are the input itself, laid [c][p]
                let cols: &[i8] = if pointwise {
                    xs
                } else {
                    im2col(xs, cg, g, self.x.zp as i8, col);
                    &col[..p * kk]
                };
                if self.asym {
                    // Σ (x - zx)(w - zw) = Σ x·w - zw·Σx - zx·Σw + K·zx·zw: the last two are in the bias
                    colsum.fill(0);
                    for r in cols.chunks_exact(p) {
                        colsum.iter_mut().zip(r).for_each(|(s, &v)| *s += v as i32);
                    }
                }
                let colsum = &colsum;
                // output channels in groups of 4 that share each load of the patches
                const ROWS: usize = 4;
                let ob = &mut out[(b * o + gi * og) * p..(b * o + (gi + 1) * og) * p];
                let body = |acc: &mut Vec<i32>, blk: usize, oblock: &mut [T]| {
                        let (oc0, rows) = (gi * og + blk * ROWS, oblock.len() / p);
                        let acc = &mut acc[..rows * p];
                        gemm_rows(&self.w[oc0 * kk..(oc0 + rows) * kk], rows, cols, acc);
                        for (r, (orow, acc)) in oblock.chunks_mut(p).zip(acc.chunks_mut(p)).enumerate() {
                            let oc = oc0 + r;
                            if self.asym {
                                let z = self.wzp[oc];
                                acc.iter_mut().zip(colsum).for_each(|(a, &s)| *a -= z * s);
                            }
                            requantize_row(acc, self.bias[oc], self.m[oc], self.rounding == Rounding::Neon, zp_out, (lo, hi), orow);
                        }
                };
                if p == 0 {
                    continue;
                }
                if team_parallel(og * kk * p) {
                    spin_pool::for_each_piece_mut(ob, ROWS * p, || vec![0i32; ROWS * p], body);
                } else {
                    let mut acc = vec![0i32; ROWS * p];
                    ob.chunks_mut(ROWS * p).enumerate().for_each(|(blk, oblock)| body(&mut acc, blk, oblock));
                }
            }
        }
    }
}

/// 8-bit output data as bytes.
fn bytes_mut<T: Q8>(s: &mut [T]) -> &mut [u8] {
    assert_eq!(std::mem::size_of::<T>(), 1);
    // SAFETY: T is i8 or u8 (one byte, any bit pattern valid); the slice is borrowed for the result's life
    unsafe { std::slice::from_raw_parts_mut(s.as_mut_ptr() as *mut u8, s.len()) }
}

/// `clamp(zp + scale(acc[j] + bias), lo, hi)` over a row, with [`mul_neon_rshl`] (`neon`) or
/// [`mul_double_round`]: the same arithmetic written without branches so that LLVM vectorises it (64-bit
/// lanes for the high multiply), compiled a second time for AVX2 on x86-64 and picked at run time. Exact for
/// TFLite's multipliers, which are never negative (the saturating case of the high multiply, both operands
/// `i32::MIN`, cannot occur).
#[inline]
pub(super) fn requantize_row<T: Q8>(acc: &[i32], bias: i32, m: Multiplier, neon: bool, zp: i32, range: (i32, i32), out: &mut [T]) {
    if super::requantize::row_available() {
        return super::requantize::row(acc, bias, m, neon, zp, range, bytes_mut(out));
    }
    requantize_row_generic(acc, bias, m, neon, zp, range, out)
}

#[inline(always)]
fn requantize_row_generic<T: Q8>(acc: &[i32], bias: i32, m: Multiplier, neon: bool, zp: i32, (lo, hi): (i32, i32), out: &mut [T]) {
    let (left, right) = (m.shift.max(0), (-m.shift).max(0));
    let mult = m.multiplier as i64;
    let mask = ((1i64 << right) - 1) as i32;
    let half = (1i64 << right) >> 1;
    for (y, &a) in out.iter_mut().zip(acc) {
        let x = (a + bias).wrapping_mul(1 << left) as i64 * mult;
        // the rounding doubling high multiply: (x + nudge) / 2^31, truncating toward zero
        let s = x + if x >= 0 { 1 << 30 } else { 1 - (1 << 30) };
        let h = ((s + ((s >> 63) & ((1i64 << 31) - 1))) >> 31) as i32;
        let r = if neon {
            ((h as i64 + half) >> right) as i32
        } else {
            let threshold = (mask >> 1) + (h < 0) as i32;
            (h >> right) + ((h & mask) > threshold) as i32
        };
        *y = T::from_i32((r + zp).clamp(lo, hi));
    }
}

/// Depthwise geometry over a zero-padded input plane split by phase modulo the strides (see
/// [`Conv::depthwise_into`]), so that every tap of every output pixel is one constant offset away in a flat
/// array: output pixel `(oy, ox)` sits at `oy·pw + ox` of a plane `pw` wide (columns from `ow` on are
/// computed and dropped), and its tap `t` reads the padded plane at that index plus `offs[t]`.
struct DwPlan {
    /// Padded plane width (the columns the output reads).
    pw: usize,
    /// Start of column phase `r` (columns `r, r + sw, ...`) within a padded row.
    phase_off: Vec<usize>,
    /// Per tap `ky·kw + kx`: its offset in the flat padded plane.
    offs: Vec<usize>,
    /// Length of the flat output (`oh · pw`).
    len: usize,
    /// Length of the padded plane with the slack that the dropped columns of the last row read.
    pad_len: usize,
    /// Per padded row: its row in the plane split by row phase (padded rows `r, r + sh, ...` one after the
    /// other for each phase `r`).
    dst_row: Vec<usize>,
}

impl DwPlan {
    fn new(g: &Geom2) -> DwPlan {
        let ph = (g.oh - 1) * g.sh + (g.kh - 1) * g.dh + 1;
        let pw = (g.ow - 1) * g.sw + (g.kw - 1) * g.dw + 1;
        let split = |n: usize, s: usize| {
            let mut starts = Vec::with_capacity(s);
            let mut off = 0;
            for r in 0..s {
                starts.push(off);
                off += if r < n { (n - r).div_ceil(s) } else { 0 };
            }
            starts
        };
        let (phase_off, row_start) = (split(pw, g.sw), split(ph, g.sh));
        // column ox·sw + kx·dw is element ox + (kx·dw)/sw of column phase (kx·dw) % sw, and row oy·sh + ky·dh
        // row oy + (ky·dh)/sh of row phase (ky·dh) % sh
        let mut offs = Vec::with_capacity(g.kh * g.kw);
        for ky in 0..g.kh {
            for kx in 0..g.kw {
                let row = row_start[ky * g.dh % g.sh] + ky * g.dh / g.sh;
                offs.push(row * pw + phase_off[kx * g.dw % g.sw] + kx * g.dw / g.sw);
            }
        }
        let len = g.oh * pw;
        let pad_len = (ph * pw).max(offs.iter().max().copied().unwrap_or(0) + len);
        let dst_row = (0..ph).map(|pr| row_start[pr % g.sh] + pr / g.sh).collect();
        DwPlan { pw, phase_off, offs, len, pad_len, dst_row }
    }

    /// Writes `x - zp` of one input plane into `pad`, split by row and column phase. Only the positions of
    /// input values are written: the padding stays as the buffer was made, zero (a buffer serves one
    /// geometry, and every plane writes the same positions).
    fn fill(&self, g: &Geom2, xp: &[i8], zp: i32, pad: &mut [i16]) {
        if g.iw == 0 {
            return;
        }
        for (iy, src) in xp.chunks_exact(g.iw).take(g.ih).enumerate() {
            let Some(&dst) = self.dst_row.get(iy + g.pt) else { break };
            let row = &mut pad[dst * self.pw..(dst + 1) * self.pw];
            let widen = |d: &mut i16, &s: &i8| *d = (s as i32 - zp) as i16;
            if g.sw == 1 {
                let l = g.pl.min(self.pw);
                let v = g.iw.min(self.pw - l);
                row[l..l + v].iter_mut().zip(&src[..v]).for_each(|(d, s)| widen(d, s));
                continue;
            }
            if g.sw == 2 {
                // data column ix is padded column pc = pl + ix: element pc / 2 of phase pc % 2; in pairs
                // from the first even pc, the two phases side by side
                let put = |row: &mut [i16], ix: usize| {
                    let pc = g.pl + ix;
                    if pc < self.pw {
                        widen(&mut row[self.phase_off[pc % 2] + pc / 2], &src[ix]);
                    }
                };
                let e = (g.pl % 2).min(g.iw);
                for ix in 0..e {
                    put(row, ix);
                }
                let j0 = (g.pl + e) / 2;
                let (p0, p1) = row.split_at_mut(self.phase_off[1]);
                let pairs = ((g.iw - e) / 2).min(p0.len().saturating_sub(j0)).min(p1.len().saturating_sub(j0));
                if pairs > 0 {
                    for ((a, b), c) in p0[j0..j0 + pairs].iter_mut().zip(&mut p1[j0..j0 + pairs]).zip(src[e..e + 2 * pairs].chunks_exact(2)) {
                        widen(a, &c[0]);
                        widen(b, &c[1]);
                    }
                }
                for ix in e + 2 * pairs..g.iw {
                    put(row, ix);
                }
                continue;
            }
            for (r, &off) in self.phase_off.iter().enumerate() {
                // phase r holds padded columns r + j·sw, j < count; those from pl to pl + iw - 1 are data
                let count = if r < self.pw { (self.pw - r).div_ceil(g.sw) } else { 0 };
                let dst = &mut row[off..off + count];
                let j0 = g.pl.saturating_sub(r).div_ceil(g.sw).min(count);
                let j1 = (g.pl + g.iw).saturating_sub(r).div_ceil(g.sw).clamp(j0, count);
                if j1 > j0 {
                    let first = r + j0 * g.sw - g.pl;
                    dst[j0..j1].iter_mut().zip(src[first..].iter().step_by(g.sw)).for_each(|(d, s)| widen(d, s));
                }
            }
        }
    }
}

/// `acc[j] += w · x[j]` over a row: i16 × i16 → i32, which LLVM vectorises.
#[inline(always)]
fn mac_row(acc: &mut [i32], x: &[i16], w: i16) {
    let w = w as i32;
    for (a, &v) in acc.iter_mut().zip(x) {
        *a += w * v as i32;
    }
}

/// A depthwise output plane, flat (see [`DwPlan`]): `acc = bias + Σ_t w[t] · pad[offs[t]..]`.
#[inline(always)]
fn dw_plane_generic(acc: &mut [i32], pad: &[i16], offs: &[usize], w: &[i16], bias: i32) {
    acc.fill(bias);
    let n = acc.len();
    for (&off, &wt) in offs.iter().zip(w) {
        mac_row(acc, &pad[off..off + n], wt);
    }
}

/// The lanes of 16-lane block `v` (of a 64-output block) that hold outputs when `rem` outputs are left.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn tail_mask(rem: usize, v: usize) -> std::arch::x86_64::__mmask16 {
    let r = rem.saturating_sub(16 * v);
    if r >= 16 {
        !0
    } else {
        ((1u32 << r) - 1) as u16
    }
}

/// Depthwise sums of the 64 outputs from `at` (`rem` of them real, the rest masked) over every tap, starting
/// from `b`: each tap a sign-extending load and a `vpmaddwd` against the weight in the low half of each lane
/// (exact). What both AVX-512 plane kernels accumulate.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
#[inline]
unsafe fn dw_block64(
    pad: &[i16],
    offs: &[usize],
    w: &[i16],
    at: usize,
    rem: usize,
    b: std::arch::x86_64::__m512i,
) -> [std::arch::x86_64::__m512i; 4] {
    use std::arch::x86_64::*;
    let mut a = [b; 4];
    // only the vectors that hold outputs (small planes fill one or two)
    let nv = rem.div_ceil(16).min(4);
    for (&off, &wt) in offs.iter().zip(w) {
        let wv = _mm512_set1_epi32(wt as u16 as i32);
        let src = pad.as_ptr().add(off + at);
        for (v, av) in a.iter_mut().enumerate().take(nv) {
            let x = _mm512_cvtepi16_epi32(_mm256_maskz_loadu_epi16(tail_mask(rem, v), src.add(16 * v)));
            *av = _mm512_add_epi32(*av, _mm512_madd_epi16(x, wv));
        }
    }
    a
}

/// [`dw_plane_generic`] with AVX-512 intrinsics: 64 outputs in four registers through all taps (each tap a
/// sign-extending load and a `vpmaddwd` against the weight in the low half of each lane, exact), the last
/// block under masks.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
unsafe fn dw_plane_avx512(acc: &mut [i32], pad: &[i16], offs: &[usize], w: &[i16], bias: i32) {
    use std::arch::x86_64::*;
    let n = acc.len();
    assert!(offs.iter().all(|&o| o + n <= pad.len()) && w.len() >= offs.len(), "the plane reads outside the padded input");
    let b = _mm512_set1_epi32(bias);
    let mut q = 0;
    while q < n {
        let rem = n - q;
        let mask = |v: usize| tail_mask(rem, v);
        let a = dw_block64(pad, offs, w, q, rem, b);
        for (v, &av) in a.iter().enumerate() {
            _mm512_mask_storeu_epi32(acc.as_mut_ptr().add(q + 16 * v), mask(v), av);
        }
        q += 64;
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn dw_plane_avx2(acc: &mut [i32], pad: &[i16], offs: &[usize], w: &[i16], bias: i32) {
    dw_plane_generic(acc, pad, offs, w, bias)
}

/// [`dw_plane_quant_avx512`] on AVX2: 32 outputs in four 8-lane registers through all taps (a sign-extending
/// load and a `vpmaddwd` against the weight in the low half of each lane per tap: exact), then the output
/// stage in registers ([`super::requantize::avx2::requant`]).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn dw_plane_quant_avx2(out: &mut [u8], pad: &[i16], offs: &[usize], w: &[i16], q: RowQuant, neon: bool) {
    use super::requantize::avx2::{requant, store_bytes};
    use std::arch::x86_64::*;
    let n = out.len();
    assert!(offs.iter().all(|&o| o + n <= pad.len()) && w.len() >= offs.len(), "the plane reads outside the padded input");
    let b = _mm256_set1_epi32(q.bias);
    let left = _mm_cvtsi32_si128(q.m.shift.max(0));
    let right = (-q.m.shift).max(0);
    let mult = _mm256_set1_epi64x(q.m.multiplier as i64);
    let (zp, lo, hi) = (_mm256_set1_epi32(q.zp), _mm256_set1_epi32(q.lo), _mm256_set1_epi32(q.hi));
    let mut j = 0;
    // whole registers while 8 values can be read from every tap's offset
    let full = offs.iter().map(|&o| pad.len() - o).min().unwrap_or(0).min(n) / 8 * 8;
    while j < full {
        let nv = ((full - j) / 8).min(4);
        let mut a = [b; 4];
        for (&off, &wt) in offs.iter().zip(w) {
            let wv = _mm256_set1_epi32(wt as u16 as i32);
            let src = pad.as_ptr().add(off + j);
            for (v, av) in a.iter_mut().enumerate().take(nv) {
                let x = _mm256_cvtepi16_epi32(_mm_loadu_si128(src.add(8 * v) as *const __m128i));
                *av = _mm256_add_epi32(*av, _mm256_madd_epi16(x, wv));
            }
        }
        for (v, &av) in a.iter().enumerate().take(nv) {
            store_bytes(requant(av, left, right, !neon, mult, zp, lo, hi), out.as_mut_ptr().add(j + 8 * v), 8);
        }
        j += 8 * nv;
    }
    // the last values one at a time into a register
    if j < n {
        let mut a = [q.bias; 8];
        for (&off, &wt) in offs.iter().zip(w) {
            for (t, av) in a.iter_mut().enumerate().take(n - j) {
                // wrapping, as the vector lanes add
                *av = av.wrapping_add(wt as i32 * pad[off + j + t] as i32);
            }
        }
        let y = requant(_mm256_loadu_si256(a.as_ptr() as *const __m256i), left, right, !neon, mult, zp, lo, hi);
        store_bytes(y, out.as_mut_ptr().add(j), n - j);
    }
}

/// [`dw_plane_avx512`] with the output stage in registers ([`super::requantize::x86::requant`]): `out`
/// gets `clamp(zp + scale(acc + bias), lo, hi)` as bytes, rounding as [`requantize_row`] does (`neon`).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
unsafe fn dw_plane_quant_avx512(out: &mut [u8], pad: &[i16], offs: &[usize], w: &[i16], q: RowQuant, neon: bool) {
    use super::requantize::x86::requant;
    use std::arch::x86_64::*;
    let n = out.len();
    assert!(offs.iter().all(|&o| o + n <= pad.len()) && w.len() >= offs.len(), "the plane reads outside the padded input");
    let b = _mm512_set1_epi32(q.bias);
    let left = _mm_cvtsi32_si128(q.m.shift.max(0));
    let right = (-q.m.shift).max(0);
    let mult = _mm512_set1_epi64(q.m.multiplier as i64);
    let (zp, lo, hi) = (_mm512_set1_epi32(q.zp), _mm512_set1_epi32(q.lo), _mm512_set1_epi32(q.hi));
    let mut j = 0;
    while j < n {
        let rem = n - j;
        let mask = |v: usize| tail_mask(rem, v);
        let a = dw_block64(pad, offs, w, j, rem, b);
        for (v, &av) in a.iter().enumerate() {
            if mask(v) != 0 {
                let y = requant(av, left, right, !neon, mult, zp, lo, hi);
                _mm_mask_storeu_epi8(out.as_mut_ptr().add(j + 16 * v) as *mut i8, mask(v), _mm512_cvtepi32_epi8(y));
            }
        }
        j += 64;
    }
}

/// [`dw_plane_generic`], compiled for AVX-512 and AVX2 as well on x86-64 and picked at run time (the same
/// integer sums).
#[inline]
fn dw_plane(acc: &mut [i32], pad: &[i16], offs: &[usize], w: &[i16], bias: i32) {
    #[cfg(target_arch = "x86_64")]
    if super::requantize::available() {
        // SAFETY: the CPU supports AVX-512 F/BW/VL (checked above)
        return unsafe { dw_plane_avx512(acc, pad, offs, w, bias) };
    }
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU supports AVX2 (checked above)
        return unsafe { dw_plane_avx2(acc, pad, offs, w, bias) };
    }
    dw_plane_generic(acc, pad, offs, w, bias)
}

impl Conv {
    /// DEPTHWISE_CONV_2D, vectorised over whole output planes: per input channel, the plane is copied once
    /// as `x - zp` (i16) with its zero padding, split by row and column phase modulo the strides, so that
    /// every tap is one offset into it ([`DwPlan`]); the flat i32 accumulator of the output plane then takes
    /// `kh·kw` multiply-adds of whole planes. Integer sums are exact, so the result is the scalar loop's.
    ///
    /// `plane(pad, offs, oc, acc, dst)` computes output channel `oc`'s flat plane into `dst` (`acc` is its
    /// scratch), [`dw_plane`] then the output stage.
    fn depthwise_into<T: Copy + Send + Default>(&self, x: &[i8], n: usize, c: usize, out: &mut [T], plane_fn: impl Fn(&[i16], &[usize], usize, &mut [i32], &mut [T]) + Sync) {
        let g = &self.geom;
        let o = self.bias.len();
        let (mult, kk, p, plane) = (o / c, g.kh * g.kw, g.oh * g.ow, g.ih * g.iw);
        let plan = DwPlan::new(g);
        let zp = self.x.zp;
        let init = || (vec![0i16; plan.pad_len], vec![0i32; plan.len], vec![T::default(); plan.len]);
        let per_channel = |(pad, acc, flat): &mut (Vec<i16>, Vec<i32>, Vec<T>), (i, planes): (usize, &mut [T])| {
            let ch = i % c;
            plan.fill(g, &x[i * plane..(i + 1) * plane], zp, pad);
            for (m, oplane) in planes.chunks_mut(p).enumerate() {
                let oc = ch * mult + m;
                // the whole flat plane in one call, then its columns before `ow`
                if plan.pw == g.ow {
                    plane_fn(pad, &plan.offs, oc, acc, oplane);
                    continue;
                }
                plane_fn(pad, &plan.offs, oc, acc, flat);
                for (oy, orow) in oplane.chunks_mut(g.ow).enumerate() {
                    orow.copy_from_slice(&flat[oy * plan.pw..oy * plan.pw + g.ow]);
                }
            }
        };
        let out = &mut out[..n * o * p];
        let channels = n * c;
        // each channel also costs its padded copy and the calls, about as much as 4K multiply-adds: by the
        // multiply-adds alone, MobileNetV2's 336-channel 3x3 planes (27K) never split, at 56 us a layer on AVX2
        if team_parallel(n * o * (p * kk + DW_CHANNEL_WORK)) && channels > 1 {
            // runs of whole channels on the spinning team, each run with its own buffers
            spin_pool::for_each_piece_mut(out, mult * p, init, |bufs, i, planes| per_channel(bufs, (i, planes)));
        } else {
            let mut bufs = init();
            out.chunks_mut(mult * p).enumerate().for_each(|ip| per_channel(&mut bufs, ip));
        }
    }
}

/// What a depthwise channel costs besides its multiply-adds (its padded copy, the plane calls), in
/// multiply-adds, for the decision to split channels between threads.
const DW_CHANNEL_WORK: usize = 4096;

/// A prepared FULLY_CONNECTED (Gemm with constant `[N, K]` weights, or MatMul with constant `[K, N]`).
#[derive(Debug)]
struct Fc {
    /// Weights `[N][K]` (u8 weights shifted as in [`Conv`]).
    w: Vec<i8>,
    /// Weight zero point per output unit, and whether one is not 0 (then `wzp · Σx` is subtracted per row).
    wzp: Vec<i32>,
    asym: bool,
    /// `bias - zp_in·Σw + K·zp_in·wzp` per output unit.
    bias: Vec<i32>,
    /// Per output unit (per-channel weights) or the same for all.
    m: Vec<Multiplier>,
    y: Qp,
    ydt: DType,
    act: (i32, i32),
    k: usize,
    rounding: Rounding,
    /// The weights packed for the SIMD dot products (VNNI or AVX2), where the CPU has them.
    dot: Option<PackedDot>,
}

/// Gemm's attributes (MatMul: no transposes, no activation, alpha = beta = 1).
#[derive(Clone, Copy, Debug)]
pub(crate) struct FcAttrs {
    pub trans_a: bool,
    pub trans_b: bool,
    pub activation: Option<Activation>,
    pub alpha: f32,
    pub beta: f32,
}

impl FcAttrs {
    /// MatMul's.
    pub const MATMUL: FcAttrs = FcAttrs { trans_a: false, trans_b: false, activation: None, alpha: 1.0, beta: 1.0 };
}

pub(crate) fn prepare_fc(cx: &Ctx, fc: FcAttrs) -> Result<Box<dyn PreparedKernel>, String> {
    let FcAttrs { trans_a, trans_b, activation: act, alpha, beta } = fc;
    if trans_a || alpha != 1.0 || beta != 1.0 {
        return Err("int8 Gemm supports only alpha = beta = 1 without trans_a".into());
    }
    let (xv, wv) = (cx.input(0)?, cx.input(1)?);
    if wv.shape.len() != 2 || xv.shape.is_empty() {
        return Err(format!("int8 fully-connected needs a non-scalar input and 2-D constant weights, got {:?} and {:?}", xv.shape, wv.shape));
    }
    let (nn, k) = if trans_b { (wv.shape[0], wv.shape[1]) } else { (wv.shape[1], wv.shape[0]) };
    if *xv.shape.last().expect("rank checked") != k {
        return Err(format!("input {:?} does not match weights {:?}", xv.shape, wv.shape));
    }
    let (x, y, ydt, act) = io_params(cx, act, "fully-connected")?;
    let Weights { w: w0, zp, scales: ws } = weights(cx, 1, if trans_b { nn } else { 1 })?;
    let w: Vec<i8> = if trans_b { w0 } else { (0..nn).flat_map(|j| (0..k).map(move |i| (i, j))).map(|(i, j)| w0[i * nn + j]).collect() };
    let wzp = if zp.len() == nn { zp } else { vec![zp[0]; nn] };
    let b = bias(cx, 2, nn)?;
    let bias = b
        .iter()
        .enumerate()
        .map(|(r, &b)| b - x.zp * w[r * k..(r + 1) * k].iter().map(|&v| v as i32).sum::<i32>() + k as i32 * x.zp * wzp[r])
        .collect();
    // Per-tensor weights: LiteRT's `GetQuantizedConvolutionMultipler` multiplies the two scales in f32 (per
    // channel, as for CONV_2D, in f64); the last bits of the multiplier flip ties (ViT-B/16's MLP).
    let per_tensor = cx.input(1)?.quant.as_ref().is_some_and(|q| q.scale.len() == 1);
    let m = if per_tensor { vec![quantize_multiplier((x.scale * ws[0]) as f64 / y.scale as f64); nn] } else { multipliers(x, &ws, y) };
    let asym = wzp.iter().any(|&z| z != 0);
    let dot = PackedDot::new(&w, nn, k);
    Ok(Box::new(Fc { w, wzp, asym, bias, m, y, ydt, act, k, rounding: Rounding::Neon, dot }))
}

impl PreparedKernel for Fc {
    fn run(&self, inputs: &[Option<&Tensor>], outputs: &mut [Tensor], scratch: &mut Scratch) -> Result<(), String> {
        let xt = arg(inputs, 0)?;
        let x = as_i8(xt, &mut scratch.i8b, "the input")?;
        let mut shape = xt.shape.clone();
        *shape.last_mut().expect("rank >= 1") = self.bias.len();
        let out = out0(outputs)?;
        match (self.ydt, &self.dot) {
            (DType::U8, Some(d)) => self.run_packed(d, x, out.reset::<u8>(&shape), &mut scratch.u8),
            (_, Some(d)) => self.run_packed(d, x, out.reset::<i8>(&shape), &mut scratch.u8),
            (DType::U8, None) => self.run_into(x, out.reset::<u8>(&shape)),
            _ => self.run_into(x, out.reset::<i8>(&shape)),
        }
        Ok(())
    }
}

impl Fc {
    /// The rows through the packed dot products: whole rows per task when there are at least as many rows as
    /// threads, otherwise each row's outputs split between the threads (a batch-1 classifier's one row).
    fn run_packed<T: Q8>(&self, d: &PackedDot, x: &[i8], out: &mut [T], buf: &mut Vec<u8>) {
        let (k, nn) = (self.k, self.bias.len());
        let (lo, hi) = self.act;
        let finish = |xr: &[i8], acc: &[i32], orow: &mut [T]| {
            let xsum: i32 = if self.asym { xr.iter().map(|&v| v as i32).sum() } else { 0 };
            for (j, (o, &a)) in orow.iter_mut().zip(acc).enumerate() {
                *o = T::from_i32((scale(a - self.wzp[j] * xsum + self.bias[j], self.m[j], self.rounding) + self.y.zp).clamp(lo, hi));
            }
        };
        let rows = x.len() / k.max(1);
        let threads = spin_pool::threads();
        if rows >= threads && team_parallel(rows * nn * k) {
            // runs of whole rows on the spinning team, each run with its own buffers
            spin_pool::for_each_piece_mut(out, nn, || (Vec::new(), Vec::new()), |(b, acc): &mut (Vec<u8>, Vec<i32>), r, o| {
                let xr = &x[r * k..(r + 1) * k];
                acc.resize(nn, 0);
                d.prepare(xr, b);
                d.dots_at(b, 0, acc);
                finish(xr, acc, o);
            });
            return;
        }
        let split = team_parallel(nn * k);
        // whole 4-row groups of the dot kernel per thread
        let chunk = nn.div_ceil(threads).next_multiple_of(4);
        let mut acc = vec![0i32; nn];
        for (r, o) in out.chunks_mut(nn).enumerate() {
            let xr = &x[r * k..(r + 1) * k];
            d.prepare(xr, buf);
            if split {
                let xb: &[u8] = buf;
                spin_pool::for_each_chunk_mut(&mut acc, chunk, &|i, part| d.dots_at(xb, i * chunk, part));
            } else {
                d.dots_at(buf, 0, &mut acc);
            }
            finish(xr, &acc, o);
        }
    }

    fn run_into<T: Q8>(&self, x: &[i8], out: &mut [T]) {
        let k = self.k;
        let nn = self.bias.len();
        let rows = x.len() / k;
        let (lo, hi) = self.act;
        let fin = |a: i32, j: usize| T::from_i32((scale(a + self.bias[j], self.m[j], self.rounding) + self.y.zp).clamp(lo, hi));
        let run_row = |r: usize, orow: &mut [T]| {
            let xr = &x[r * k..(r + 1) * k];
            let xsum: i32 = if self.asym { xr.iter().map(|&v| v as i32).sum() } else { 0 };
            let mut j = 0;
            while j + 4 <= nn {
                let acc = dot4([&self.w[j * k..][..k], &self.w[(j + 1) * k..][..k], &self.w[(j + 2) * k..][..k], &self.w[(j + 3) * k..][..k]], xr);
                for (t, a) in acc.iter().enumerate() {
                    orow[j + t] = fin(a - self.wzp[j + t] * xsum, j + t);
                }
                j += 4;
            }
            for (j, o) in orow.iter_mut().enumerate().take(nn).skip(j) {
                *o = fin(dot(&self.w[j * k..][..k], xr) - self.wzp[j] * xsum, j);
            }
        };
        if rows * nn * k >= 1 << 16 && rows > 1 && spin_pool::threads() > 1 {
            spin_pool::for_each_piece_mut(out, nn, || (), |_, r, o| run_row(r, o));
        } else {
            out.chunks_mut(nn).enumerate().for_each(|(r, o)| run_row(r, o));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The branch-free row requantization against the scalar fixed-point functions, both roundings, over
    /// multipliers with left and right shifts and accumulators at the extremes.
    #[test]
    fn requantize_row_matches_the_scalar_functions() {
        let mut s = 11u64;
        let mut rnd = move || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s
        };
        let mut acc: Vec<i32> = (0..997).map(|_| (rnd() as i32) >> (rnd() % 24)).collect();
        acc.extend([i32::MAX - 5, i32::MIN + 5, 0, 1, -1, 6, -6, 1 << 20, -(1 << 20)]);
        for real in [1e-6, 3.7e-4, 0.002, 0.0625, 0.25, 0.49, 0.75, 1.0, 1.5, 3.0] {
            let m = quantize_multiplier(real);
            for neon in [false, true] {
                let mut got = vec![0i8; acc.len()];
                requantize_row(&acc, 3, m, neon, -7, (-128, 127), &mut got);
                for (&a, &g) in acc.iter().zip(&got) {
                    let r = if neon { mul_neon_rshl(a + 3, m) } else { mul_double_round(a + 3, m) };
                    assert_eq!(g as i32, (r - 7).clamp(-128, 127), "acc {a} multiplier {real} neon {neon}");
                }
            }
        }
    }

    /// The vectorised depthwise loop against a direct scalar loop, over strides, dilations, asymmetric
    /// paddings and depth multipliers the LiteRT corpus does not all reach.
    #[test]
    fn depthwise_matches_a_scalar_loop() {
        let mut s = 7u64;
        let mut rnd = move || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s
        };
        let cases = [
            // ih, iw, kh, kw, sh, sw, dh, dw, pt, pl, pb, pr, c, mult
            [7, 9, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 3, 1],
            [8, 8, 3, 3, 2, 2, 1, 1, 0, 0, 1, 1, 2, 2],
            [9, 11, 3, 5, 3, 2, 2, 1, 2, 1, 0, 3, 4, 1],
            [5, 6, 1, 1, 1, 3, 1, 1, 0, 0, 0, 0, 2, 3],
            [10, 7, 2, 3, 2, 1, 3, 2, 1, 0, 2, 2, 1, 1],
            [4, 40, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 9, 1],
        ];
        for [ih, iw, kh, kw, sh, sw, dh, dw, pt, pl, pb, pr, c, mult] in cases {
            let oh = (ih + pt + pb - (kh - 1) * dh - 1) / sh + 1;
            let ow = (iw + pl + pr - (kw - 1) * dw - 1) / sw + 1;
            let geom = Geom2 { ih, iw, oh, ow, kh, kw, sh, sw, dh, dw, pt, pl };
            let (n, o) = (2, c * mult);
            let x: Vec<i8> = (0..n * c * ih * iw).map(|_| rnd() as i8).collect();
            let w16: Vec<i16> = (0..o * kh * kw).map(|_| (rnd() % 511) as i16 - 255).collect();
            let bias: Vec<i32> = (0..o).map(|_| (rnd() % 2001) as i32 - 1000).collect();
            let zp = rnd() as i8 as i32;
            let conv = Conv {
                w: vec![],
                w16: w16.clone(),
                wzp: vec![0; o],
                asym: false,
                bias: bias.clone(),
                m: vec![Multiplier::default(); o],
                x: Qp { scale: 1.0, zp },
                y: Qp { scale: 1.0, zp: 0 },
                ydt: DType::I8,
                act: (-128, 127),
                group: c,
                geom,
                depthwise: true,
                rounding: Rounding::Double,
                dw_neon_blocks: false,
                packed: Vec::new(),
                rq: Vec::new(),
                #[cfg(target_arch = "x86_64")]
                nhwc: None,
                #[cfg(target_arch = "x86_64")]
                vnni: None,
                #[cfg(target_arch = "x86_64")]
                dense: None,
            };
            let mut got = vec![0i32; n * o * oh * ow];
            conv.depthwise_into(&x, n, c, &mut got, |pad, offs, oc, acc, dst| {
                dw_plane(acc, pad, offs, &w16[oc * kh * kw..(oc + 1) * kh * kw], bias[oc]);
                dst.copy_from_slice(acc);
            });
            for b in 0..n {
                for oc in 0..o {
                    for oy in 0..oh {
                        for ox in 0..ow {
                            let mut acc = bias[oc];
                            for ky in 0..kh {
                                for kx in 0..kw {
                                    let iy = (oy * sh + ky * dh) as isize - pt as isize;
                                    let ix = (ox * sw + kx * dw) as isize - pl as isize;
                                    if iy >= 0 && (iy as usize) < ih && ix >= 0 && (ix as usize) < iw {
                                        let xv = x[((b * c + oc / mult) * ih + iy as usize) * iw + ix as usize] as i32;
                                        acc += (xv - zp) * w16[(oc * kh + ky) * kw + kx] as i32;
                                    }
                                }
                            }
                            assert_eq!(got[((b * o + oc) * oh + oy) * ow + ox], acc, "case {:?} at b{b} c{oc} y{oy} x{ox}", [ih, iw, kh, kw, sh, sw, dh, dw]);
                        }
                    }
                }
            }
            // the plane kernels with the output stage in registers (those the CPU runs) against the sums above
            // through the scalar output stage, both roundings
            #[cfg(target_arch = "x86_64")]
            for avx512 in [true, false] {
                if (avx512 && !super::super::requantize::available()) || (!avx512 && !super::super::packed_gemm::has_avx2()) {
                    continue;
                }
                let m = crate::runtime::kernels::int8::fixedpoint::quantize_multiplier(0.0123);
                for neon in [false, true] {
                    let mut q = vec![0i8; got.len()];
                    conv.depthwise_into(&x, n, c, &mut q, |pad, offs, oc, _, dst| {
                        let rq = RowQuant { bias: bias[oc], m, zp: -3, lo: -128, hi: 100 };
                        let (w, dst) = (&w16[oc * kh * kw..(oc + 1) * kh * kw], bytes_mut(dst));
                        // SAFETY: the CPU has the kernel's features (checked above)
                        unsafe {
                            if avx512 {
                                dw_plane_quant_avx512(dst, pad, offs, w, rq, neon)
                            } else {
                                dw_plane_quant_avx2(dst, pad, offs, w, rq, neon)
                            }
                        }
                    });
                    let mut want = vec![0i8; got.len()];
                    requantize_row_generic(&got, 0, m, neon, -3, (-128, 100), &mut want);
                    assert_eq!(q, want, "quantized planes, case {:?}, avx512 {avx512} neon {neon}", [ih, iw, kh, kw, sh, sw, dh, dw]);
                }
            }
        }
    }
}
