//! AVERAGE_POOL_2D, MAX_POOL_2D and MEAN on int8 (inputs and outputs share parameters for the pools, as
//! TFLite requires), RESIZE_NEAREST_NEIGHBOR (a pure copy, run by the float kernel on widened values) and
//! RESIZE_BILINEAR (TFLite's 10-bit fixed-point interpolation).
//!
//! AVERAGE_POOL_2D divides the sum of the valid taps by their count rounding half away from zero
//! (`(acc ± count/2) / count`), then clamps to the fused activation's range. MEAN over H and W of a 4-D
//! tensor with the same parameters in and out is `MultiplyByQuantizedMultiplier(Σx, s_in/(n·s_out))` plus a
//! bias (`reference_ops::Mean`, used by `optimized_integer_ops::Mean`); other MEANs run TFLite's
//! `QuantizedMeanOrSum` in f32.

use crate::runtime::spin_pool;

use super::fixedpoint::{mul_double_round, mul_neon_rshl, quantize_multiplier, Multiplier};
use super::{arg, out0, write_out, Bytes, Ctx, PreparedKernel, Qp, Q8};
use crate::ir::{CoordTransform, DType, Op, PoolAttrs, ReduceOp, ResizeAttrs, Tensor};
use crate::ir::ops::conv::{window_geom, Geom, Window};
use crate::runtime::kernels::Scratch;

#[derive(Debug)]
struct Pool {
    max: bool,
    geom: Geom,
    act: (i32, i32),
    dtype: DType,
}

/// Which pooling a quantized node asks for.
pub(crate) enum Pooling<'a> {
    /// MaxPool (`max`) or AveragePool.
    Window { attrs: &'a PoolAttrs, max: bool },
    /// GlobalAveragePool.
    GlobalMean,
    /// A reduction (only ReduceMean with attribute axes is supported).
    Reduce { op: ReduceOp, axes: Option<&'a [usize]>, keepdims: bool },
    /// GlobalMaxPool (not supported).
    GlobalMax,
}

pub(crate) fn prepare(cx: &Ctx, pooling: Pooling) -> Result<Box<dyn PreparedKernel>, String> {
    let xv = cx.input(0)?;
    let dtype = xv.dtype;
    if !matches!(dtype, DType::I8 | DType::U8) || cx.output(0)?.dtype != dtype {
        return Err(format!("int8 pooling needs i8 or u8 input and output of the same dtype, got {} and {}", dtype, cx.output(0)?.dtype));
    }
    let (x, y) = (cx.qp(0, false)?, cx.qp(0, true)?);
    match pooling {
        Pooling::Window { attrs: a, max } => {
            if xv.shape.len() != 4 || (!max && a.count_include_pad) || a.ceil_mode {
                return Err("int8 pooling supports 2-D windows without ceil_mode or count_include_pad".into());
            }
            if x != y {
                return Err("int8 pooling needs the same quantization parameters on input and output".into());
            }
            let w = Window { kernel: &a.kernel_shape, strides: &a.strides, dilations: &a.dilations, pads: &a.pads, auto_pad: a.auto_pad, ceil_mode: false };
            let geom = window_geom(&xv.shape[2..], &w, "pool")?;
            Ok(Box::new(Pool { max, geom, act: super::dtype_range(dtype), dtype }))
        }
        Pooling::GlobalMean => {
            if xv.shape.len() != 4 {
                return Err("int8 GlobalAveragePool supports 4-D inputs".into());
            }
            let n = xv.shape[2] * xv.shape[3];
            Ok(Box::new(Mean::new(x, y, n, MeanKind::Optimized { channel_axis: 1 }, vec![2, 3], &xv.shape, cx.output(0)?.shape.clone(), dtype)))
        }
        Pooling::Reduce { op: ReduceOp::Mean, axes: Some(axes), keepdims } => {
            if axes.iter().any(|&a| a >= xv.shape.len()) {
                return Err(format!("int8 Mean over axes {axes:?} of a rank-{} input", xv.shape.len()));
            }
            let n: usize = axes.iter().map(|&a| xv.shape[a]).product();
            // TFLite's optimized kernel: a 4-D input reduced over H and W with keep_dims; the exporter writes an
            // IR (NCHW) mean over [2, 3] on NHWC data as axes [1, 2], and a mean over [1, 2] (an NHWC graph read
            // from a file) as it is
            let spatial = xv.shape.len() == 4 && keepdims && matches!(axes, [2, 3] | [1, 2]);
            let kind = if spatial {
                MeanKind::Optimized { channel_axis: (1..4).find(|a| !axes.contains(a)).unwrap_or(3) }
            } else if x == y {
                MeanKind::SameParams
            } else {
                MeanKind::IntegerDivided
            };
            Ok(Box::new(Mean::new(x, y, n, kind, axes.to_vec(), &xv.shape, cx.output(0)?.shape.clone(), dtype)))
        }
        Pooling::Reduce { .. } | Pooling::GlobalMax => Err(format!("{} on quantized values is not supported", cx.op().name())),
    }
}

impl PreparedKernel for Pool {
    fn run(&self, inputs: &[Option<&Tensor>], outputs: &mut [Tensor], _scratch: &mut Scratch) -> Result<(), String> {
        let xt = arg(inputs, 0)?;
        let g = &self.geom;
        let shape = [xt.shape[0], xt.shape[1], g.out[1], g.out[2]];
        let out = out0(outputs)?;
        match self.dtype {
            DType::U8 => self.run_into(xt.view::<u8>().ok_or("the input is not u8")?, out.reset::<u8>(&shape)),
            _ => self.run_into(xt.view::<i8>().ok_or("the input is not i8")?, out.reset::<i8>(&shape)),
        }
        Ok(())
    }
}

impl Pool {
    fn run_into<T: Q8 + Into<i32>>(&self, x: &[T], out: &mut [T]) {
        let g = &self.geom;
        let (ih, iw, oh, ow) = (g.inp[1], g.inp[2], g.out[1], g.out[2]);
        let (lo, hi) = self.act;
        let work = out.len() * g.k[1] * g.k[2];
        for_each_plane(out, oh * ow, work, &|pl, o| {
            let xp = &x[pl * ih * iw..(pl + 1) * ih * iw];
            for oy in 0..oh {
                let y0 = (oy * g.s[1]) as isize - g.pb[1] as isize;
                let (ky0, ky1) = ((-y0).max(0) as usize, (ih as isize - y0).min(g.k[1] as isize).max(0) as usize);
                for ox in 0..ow {
                    let x0 = (ox * g.s[2]) as isize - g.pb[2] as isize;
                    let (kx0, kx1) = ((-x0).max(0) as usize, (iw as isize - x0).min(g.k[2] as isize).max(0) as usize);
                    let mut acc: i32 = if self.max { lo } else { 0 };
                    for ky in ky0..ky1 {
                        let row = &xp[(y0 + ky as isize) as usize * iw..][..iw];
                        for kx in kx0..kx1 {
                            let v: i32 = row[(x0 + kx as isize) as usize].into();
                            if self.max {
                                acc = acc.max(v);
                            } else {
                                acc += v;
                            }
                        }
                    }
                    let r = if self.max {
                        acc
                    } else {
                        // half away from zero (u8 sums are never negative: half up)
                        let cnt = ((ky1 - ky0.min(ky1)) * (kx1 - kx0.min(kx1))).max(1) as i32;
                        if acc > 0 {
                            (acc + cnt / 2) / cnt
                        } else {
                            (acc - cnt / 2) / cnt
                        }
                    };
                    o[oy * ow + ox] = T::from_i32(r.clamp(lo, hi));
                }
            }
        });
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum MeanKind {
    /// `optimized_integer_ops::Mean` (4-D input, two spatial axes, keep_dims; also GlobalAveragePool, which
    /// the exporter writes as such a MEAN): integer sum, multiplier `s_in/(n·s_out)` and bias
    /// `zp_out - round_away(zp_in·s_in/s_out)`. LiteRT's x86-64 build compiles this kernel's NEON path through
    /// NEON_2_SSE: channels in whole blocks of 16 are scaled with `vqrdmulh` then `vrshl` (the final shift
    /// rounds half up), the remaining channels with `MultiplyByQuantizedMultiplier` (half away from zero).
    /// LiteRT splits channels across threads for wide tensors; this is its one-thread split.
    Optimized { channel_axis: usize },
    /// `reference_ops::Mean` when input and output share parameters: the sum divided by the count,
    /// truncating toward zero.
    SameParams,
    /// `reference_ops::QuantizedMeanOrSum` with a multiplier: `s_in/s_out` divided into the multiplier by
    /// the element count, applied to `Σx - n·zp_in`.
    IntegerDivided,
}

#[derive(Debug)]
struct Mean {
    kind: MeanKind,
    axes: Vec<usize>,
    n: usize,
    m: Multiplier,
    bias: i32,
    x: Qp,
    y: Qp,
    out_shape: Vec<usize>,
    final_shape: Vec<usize>,
    dtype: DType,
}

impl Mean {
    #[allow(clippy::too_many_arguments)]
    fn new(x: Qp, y: Qp, n: usize, kind: MeanKind, axes: Vec<usize>, in_shape: &[usize], final_shape: Vec<usize>, dtype: DType) -> Mean {
        let mut temp = x.zp as f32 * x.scale / y.scale;
        temp = if temp > 0.0 { temp + 0.5 } else { temp - 0.5 };
        let bias = y.zp - temp as i32;
        if let MeanKind::Optimized { .. } = kind {
            // optimized_integer_ops::Mean: bias = zp_out - (int)(zp_in·s_in/s_out ± 0.5f), rounded half away
            let m = quantize_multiplier((x.scale / (n as f32 * y.scale)) as f64);
            let out_shape = in_shape.iter().enumerate().map(|(i, &d)| if axes.contains(&i) { 1 } else { d }).collect();
            return Mean { kind, axes, n, m, bias, x, y, out_shape, final_shape, dtype };
        }
        let m = if kind == MeanKind::IntegerDivided {
            let base = quantize_multiplier(x.scale as f64 / y.scale as f64);
            let mut shift = 63 - (n as u64).leading_zeros() as i32;
            shift = shift.min(32).min(31 + base.shift);
            let mult = ((base.multiplier as i64) << shift) / n as i64;
            Multiplier { multiplier: mult as i32, shift: base.shift - shift }
        } else {
            quantize_multiplier((x.scale / (n as f32 * y.scale)) as f64)
        };
        let out_shape = in_shape.iter().enumerate().map(|(i, &d)| if axes.contains(&i) { 1 } else { d }).collect();
        Mean { kind, axes, n, m, bias, x, y, out_shape, final_shape, dtype }
    }
}

impl Mean {
    /// MEAN over trailing axes (NCHW's H and W: each output sums a contiguous run of the input) without the
    /// general loop's index arithmetic: run sums, then rows requantized at once (the optimized kernel's
    /// channels as rows with their rounding: NEON for the channels of whole 16-channel blocks). `None` where
    /// the reduction is not of that form.
    fn contiguous_runs(&self, x: &Bytes, shape: &[usize], outputs: &mut [Tensor]) -> Result<Option<()>, String> {
        let rank = shape.len();
        let first = rank - self.axes.len().min(rank);
        if self.axes.is_empty() || !(first..rank).all(|d| self.axes.contains(&d)) || self.m.shift < -31 {
            return Ok(None);
        }
        let (red, nout): (usize, usize) = (shape[first..].iter().product(), shape[..first].iter().product());
        // per outer block: runs of ch_stride outputs share a channel, NEON rounding for channels [0, neon_end)
        let (ch_stride, chans) = match self.kind {
            MeanKind::Optimized { channel_axis } if channel_axis < first => (shape[channel_axis + 1..first].iter().product(), shape[channel_axis]),
            MeanKind::Optimized { .. } => return Ok(None),
            _ => (1, 1),
        };
        if red == 0 || nout == 0 || chans == 0 || ch_stride == 0 {
            return Ok(None);
        }
        let mut sums = vec![0i32; nout];
        run_sums(x, red, &mut sums);
        fn rows<T: Q8>(mean: &Mean, sums: &[i32], (ch_stride, chans): (usize, usize), out: &mut [T]) {
            let range = super::dtype_range(mean.dtype);
            match mean.kind {
                MeanKind::Optimized { .. } => {
                    let split = chans / 16 * 16 * ch_stride;
                    for (s, o) in sums.chunks(ch_stride * chans).zip(out.chunks_mut(ch_stride * chans)) {
                        let split = split.min(s.len());
                        super::conv::requantize_row(&s[..split], 0, mean.m, true, mean.bias, range, &mut o[..split]);
                        super::conv::requantize_row(&s[split..], 0, mean.m, false, mean.bias, range, &mut o[split..]);
                    }
                }
                MeanKind::SameParams => {
                    let n = mean.n.max(1) as i32;
                    out.iter_mut().zip(sums).for_each(|(o, &s)| *o = T::from_i32((s / n).clamp(range.0, range.1)));
                }
                MeanKind::IntegerDivided => {
                    super::conv::requantize_row(sums, -mean.x.zp * mean.n as i32, mean.m, false, mean.y.zp, range, out)
                }
            }
        }
        let out = out0(outputs)?;
        match self.dtype {
            DType::U8 => rows(self, &sums, (ch_stride, chans), out.reset::<u8>(&self.final_shape)),
            _ => rows(self, &sums, (ch_stride, chans), out.reset::<i8>(&self.final_shape)),
        }
        Ok(Some(()))
    }
}

/// `sums[o]` = the sum of the `o`-th `red`-long run of `x`.
fn run_sums(x: &Bytes, red: usize, sums: &mut [i32]) {
    match x {
        Bytes::I8(v) => sums.iter_mut().zip(v.chunks_exact(red)).for_each(|(s, r)| *s = r.iter().map(|&b| b as i32).sum()),
        Bytes::U8(v) => sums.iter_mut().zip(v.chunks_exact(red)).for_each(|(s, r)| *s = r.iter().map(|&b| b as i32).sum()),
    }
}

impl PreparedKernel for Mean {
    fn run(&self, inputs: &[Option<&Tensor>], outputs: &mut [Tensor], _scratch: &mut Scratch) -> Result<(), String> {
        let xt = arg(inputs, 0)?;
        let x = Bytes::of(xt, "the input")?;
        let shape = &xt.shape;
        let rank = shape.len();
        if let Some(done) = self.contiguous_runs(&x, shape, outputs)? {
            return Ok(done);
        }
        // sums over the reduced axes, in the kept-dims output order
        let nout: usize = self.out_shape.iter().product();
        let mut sums = vec![0i32; nout];
        let mut ost = vec![0usize; rank];
        let mut s = 1;
        for d in (0..rank).rev() {
            ost[d] = if self.axes.contains(&d) { 0 } else { s };
            s *= self.out_shape[d];
        }
        // reduced axes that are one block of consecutive axes (a global pool over NCHW's H and W, or NHWC's):
        // the input is [outer][red][inner] and the sums [outer][inner]
        let reduced: Vec<usize> = (0..rank).filter(|d| self.axes.contains(d)).collect();
        let block = !reduced.is_empty() && reduced.iter().copied().eq(reduced[0]..reduced[0] + reduced.len());
        let mut idx = vec![0usize; rank];
        let mut general = x.count();
        if block {
            let (a, b) = (reduced[0], reduced[0] + reduced.len());
            let (red, inner): (usize, usize) = (shape[a..b].iter().product(), shape[b..].iter().product());
            if red * inner > 0 && x.count() == nout * red {
                general = 0;
                if inner == 1 {
                    // NCHW's H and W: each output sums a contiguous run
                    run_sums(&x, red, &mut sums);
                }
                for (o, srow) in sums.chunks_mut(inner).enumerate().filter(|_| inner > 1) {
                    for r in 0..red {
                        let at = (o * red + r) * inner;
                        match x {
                            Bytes::I8(v) => srow.iter_mut().zip(&v[at..at + inner]).for_each(|(s, &b)| *s += b as i32),
                            Bytes::U8(v) => srow.iter_mut().zip(&v[at..at + inner]).for_each(|(s, &b)| *s += b as i32),
                        }
                    }
                }
            }
        }
        for i in 0..general {
            let o: usize = idx.iter().zip(&ost).map(|(i, s)| i * s).sum();
            sums[o] += x.get(i);
            for d in (0..rank).rev() {
                idx[d] += 1;
                if idx[d] < shape[d] {
                    break;
                }
                idx[d] = 0;
            }
        }
        // the node's output shape (keepdims or not) has the same element order
        let (lo, hi) = super::dtype_range(self.dtype);
        let mut res = vec![0i32; nout];
        // channel index and count of each output for the optimized kernel's NEON/scalar split
        let (ch_stride, chans) = match self.kind {
            MeanKind::Optimized { channel_axis } => (self.out_shape[channel_axis + 1..].iter().product::<usize>(), self.out_shape[channel_axis]),
            _ => (1, 1),
        };
        let neon_end = chans / 16 * 16;
        for (i, (o, &s)) in res.iter_mut().zip(&sums).enumerate() {
            *o = match self.kind {
                MeanKind::Optimized { .. } => {
                    let d = (i / ch_stride.max(1)) % chans.max(1);
                    let scaled = if d < neon_end { mul_neon_rshl(s, self.m) } else { mul_double_round(s, self.m) };
                    (scaled + self.bias).clamp(lo, hi)
                }
                MeanKind::SameParams => (s / self.n.max(1) as i32).clamp(lo, hi),
                MeanKind::IntegerDivided => (mul_double_round(s - self.x.zp * self.n as i32, self.m) + self.y.zp).clamp(lo, hi),
            };
        }
        write_out(out0(outputs)?, self.dtype, &self.final_shape, |i| res[i]);
        Ok(())
    }
}

pub(crate) fn prepare_resize(cx: &Ctx, a: &ResizeAttrs) -> Result<Box<dyn PreparedKernel>, String> {
    if cx.qp(0, false)? != cx.qp(0, true)? {
        return Err("int8 Resize needs the same quantization parameters on input and output".into());
    }
    if a.mode == crate::ir::ResizeMode::Nearest {
        return Ok(Box::new(Nearest { op: cx.op().clone() }));
    }
    let (xv, yv) = (cx.input(0)?, cx.output(0)?);
    let coord = a.coord;
    if a.mode != crate::ir::ResizeMode::Linear || !matches!(coord, CoordTransform::AlignCorners | CoordTransform::HalfPixel | CoordTransform::Asymmetric) {
        return Err(format!(
            "int8 Resize supports nearest, and linear with align_corners, half_pixel or asymmetric coordinates (TFLite's RESIZE_BILINEAR), not {:?} with {coord:?}",
            a.mode
        ));
    }
    if xv.dtype != DType::I8 || yv.dtype != DType::I8 || xv.shape.len() != 4 || yv.shape.len() != 4 || xv.shape[..2] != yv.shape[..2] {
        return Err(format!("int8 linear Resize needs i8 NCHW input and output resized over H and W, got {} {:?} to {:?}", xv.dtype, xv.shape, yv.shape));
    }
    let (ih, iw, oh, ow) = (xv.shape[2], xv.shape[3], yv.shape[2], yv.shape[3]);
    let align = coord == CoordTransform::AlignCorners;
    let half = coord == CoordTransform::HalfPixel;
    Ok(Box::new(Bilinear { ys: taps(ih, oh, align, half), xs: taps(iw, ow, align, half), ih, iw, out_shape: yv.shape.clone() }))
}

/// Source rows (or columns) of one output row: `(lower, upper, 10-bit fraction)`, as TFLite's
/// `ComputeInterpolationValuesInteger` computes them from the 10-bit scale (`((in << 10) + out/2) / out`, or
/// `(((in-1) << 10) + (out-1)/2) / (out-1)` with align_corners). The fraction may be negative at a
/// half-pixel border, where both indices are 0.
fn taps(input: usize, output: usize, align: bool, half: bool) -> Vec<(usize, usize, i64)> {
    let (i, o) = (input as i64, output as i64);
    let scale = if align && o > 1 { ((i - 1) * 1024 + (o - 1) / 2) / (o - 1) } else { (i * 1024 + o / 2) / o };
    (0..o)
        .map(|v| {
            let scaled = if half { v * scale + scale / 2 - 512 } else { v * scale };
            let lo = (scaled / 1024).max(0);
            let hi = ((scaled + 1023) / 1024).min(i - 1);
            (lo as usize, hi as usize, scaled - 1024 * lo)
        })
        .collect()
}

/// RESIZE_BILINEAR on int8 (`reference_ops::ResizeBilinearInteger`, which LiteRT's optimized kernel calls for
/// int8): the four neighbours weighted by products of 10-bit fractions in i64, divided by 2^20 rounding half
/// away from zero. No requantization: input and output share parameters.
#[derive(Debug)]
struct Bilinear {
    ys: Vec<(usize, usize, i64)>,
    xs: Vec<(usize, usize, i64)>,
    ih: usize,
    iw: usize,
    out_shape: Vec<usize>,
}

impl PreparedKernel for Bilinear {
    fn run(&self, inputs: &[Option<&Tensor>], outputs: &mut [Tensor], _scratch: &mut Scratch) -> Result<(), String> {
        let xt = arg(inputs, 0)?;
        let x = xt.view::<i8>().ok_or("the input is not i8")?;
        let (ih, iw) = (self.ih, self.iw);
        let planes = self.out_shape[0] * self.out_shape[1];
        if xt.shape.len() != 4 || x.len() != planes * ih * iw {
            return Err(format!("input shape {:?} does not match the planned resize", xt.shape));
        }
        let (oh, ow) = (self.ys.len(), self.xs.len());
        let out = out0(outputs)?.reset::<i8>(&self.out_shape);
        for_each_plane(out, oh * ow, out.len() * 4, &|pl, o| {
            let xp = &x[pl * ih * iw..(pl + 1) * ih * iw];
            for (oy, &(y0, y1, dy)) in self.ys.iter().enumerate() {
                for (ox, &(x0, x1, dx)) in self.xs.iter().enumerate() {
                    let at = |y: usize, xx: usize| xp[y * iw + xx] as i64;
                    let v = at(y0, x0) * (1024 - dy) * (1024 - dx)
                        + at(y1, x0) * dy * (1024 - dx)
                        + at(y0, x1) * (1024 - dy) * dx
                        + at(y1, x1) * dy * dx;
                    let round = if v > 0 { 1 << 19 } else { -(1 << 19) };
                    o[oy * ow + ox] = ((v + round) / (1 << 20)) as i8;
                }
            }
        });
        Ok(())
    }
}

/// RESIZE_NEAREST_NEIGHBOR on int8: the float kernel on widened values (a copy, so exact).
#[derive(Debug)]
struct Nearest {
    op: Op,
}

impl PreparedKernel for Nearest {
    fn run(&self, inputs: &[Option<&Tensor>], outputs: &mut [Tensor], scratch: &mut Scratch) -> Result<(), String> {
        let xt = arg(inputs, 0)?;
        let x = Bytes::of(xt, "the input")?;
        let dtype = xt.dtype();
        let xf = Tensor::from_f32(xt.shape.clone(), (0..x.count()).map(|i| x.get(i) as f32).collect());
        let mut ins: Vec<Option<&Tensor>> = inputs.to_vec();
        ins[0] = Some(&xf);
        let mut tmp = [Tensor::default()];
        crate::runtime::kernels::eval(&self.op, &ins, &mut tmp, scratch)?;
        let y = tmp[0].as_f32().ok_or("resize produced no f32")?;
        write_out(out0(outputs)?, dtype, &tmp[0].shape, |i| y[i] as i32);
        Ok(())
    }
}

/// Calls `f(plane_index, plane)` for each `plane`-long output plane, split over the thread team when `work`
/// (values touched) pays for it.
fn for_each_plane<T: Send>(out: &mut [T], plane: usize, work: usize, f: &(dyn Fn(usize, &mut [T]) + Sync)) {
    if plane == 0 {
        return;
    }
    if super::team_parallel(work) {
        spin_pool::for_each_piece_mut(out, plane, || (), |_, i, p| f(i, p));
    } else {
        out.chunks_mut(plane).enumerate().for_each(|(i, p)| f(i, p));
    }
}


#[cfg(test)]
mod tests {
    use super::*;

    /// The contiguous-run MEAN (NCHW, reduced H and W trailing) equals the general loop over the same data
    /// laid NHWC (reduced axes in the middle), for each of the three kinds, i8 and u8, channel counts around
    /// the 16-channel NEON blocks and ranges that clamp. The general loop is the one the LiteRT corpus checks
    /// (`tests/tflite_int8.rs`: global average pools of MobileNetV2 and `gap_int8`).
    #[test]
    fn contiguous_runs_equal_the_general_loop() {
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let mut tried = 0;
        for &(c, h, w) in &[(20usize, 3usize, 3usize), (16, 2, 5), (35, 6, 6), (3, 1, 7), (48, 4, 4)] {
            for dtype in [DType::I8, DType::U8] {
                let n = h * w;
                let x = Qp { scale: 0.02 + (next() % 100) as f32 * 1e-3, zp: (next() % 40) as i32 - 20 + if dtype == DType::U8 { 128 } else { 0 } };
                let same = Qp { scale: x.scale, zp: x.zp };
                let other = Qp { scale: x.scale * (0.3 + (next() % 100) as f32 * 0.01), zp: (next() % 30) as i32 - 15 + if dtype == DType::U8 { 128 } else { 0 } };
                let nchw: Vec<u8> = (0..c * n).map(|_| next() as u8).collect();
                // [1][h][w][c]
                let nhwc: Vec<u8> = (0..c * n).map(|i| nchw[(i % c) * n + i / c]).collect();
                let tensor = |shape: Vec<usize>, v: &[u8]| match dtype {
                    DType::U8 => Tensor::from_vec(shape, v.to_vec()).unwrap(),
                    _ => Tensor::from_vec(shape, v.iter().map(|&b| b as i8).collect::<Vec<i8>>()).unwrap(),
                };
                let cases = [
                    (MeanKind::Optimized { channel_axis: 1 }, MeanKind::Optimized { channel_axis: 3 }, x, other),
                    (MeanKind::SameParams, MeanKind::SameParams, x, same),
                    (MeanKind::IntegerDivided, MeanKind::IntegerDivided, x, other),
                ];
                for (kind_nchw, kind_nhwc, qx, qy) in cases {
                    let run = |kind, axes: Vec<usize>, shape: Vec<usize>, data: &[u8]| {
                        let mean = Mean::new(Qp { scale: qx.scale, zp: qx.zp }, Qp { scale: qy.scale, zp: qy.zp }, n, kind, axes, &shape, vec![1, c], dtype);
                        let input = tensor(shape, data);
                        let mut out = [Tensor::default()];
                        mean.run(&[Some(&input)], &mut out, &mut Scratch::default()).unwrap();
                        match dtype {
                            DType::U8 => out[0].view::<u8>().unwrap().to_vec(),
                            _ => out[0].view::<i8>().unwrap().iter().map(|&v| v as u8).collect(),
                        }
                    };
                    let fast = run(kind_nchw, vec![2, 3], vec![1, c, h, w], &nchw);
                    let general = run(kind_nhwc, vec![1, 2], vec![1, h, w, c], &nhwc);
                    assert_eq!(fast, general, "{kind_nchw:?} {dtype:?} c {c} h {h} w {w}");
                    tried += 1;
                }
            }
        }
        assert_eq!(tried, 30);
    }
}
