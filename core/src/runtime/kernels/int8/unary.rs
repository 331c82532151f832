//! Element-wise int8 ops with one input: requantization (QUANTIZE int8 → int8), RELU / RELU6 /
//! RELU_N1_TO_1, LEAKY_RELU, HARD_SWISH, and LOGISTIC / TANH through a 256-entry lookup table; and
//! CONCATENATION, which requantizes inputs whose parameters differ from the output's.
//!
//! The arithmetic is TFLite's: `Requantize` and `ReluX` rescale `x - zp_in` with
//! `MultiplyByQuantizedMultiplier`; LEAKY_RELU picks the identity or the alpha multiplier by the sign of
//! `x - zp_in`; HARD_SWISH is `reference_ops::HardSwish`'s 16-bit fixed-point computation; LOGISTIC and TANH
//! are LiteRT's optimized lookup table (`LUTPopulate`: dequantize, apply `1/(1+expf(-x))` or `tanhf` in f32,
//! round half away from zero), not the reference kernel's fixed-point polynomial. GELU is a lookup table
//! too (`activations.cc` `GeluPrepare`); RSQRT (`elementwise.cc` `RsqrtEvalQuantizedInt8`) is a Newton
//! iteration in fixed point per element, an input at the zero point giving the largest output.

use super::fixedpoint::{i16x, inv_sqrt_multiplier, mul_double_round, mul_double_round_wide, quantize_multiplier, Multiplier};
use super::{activation_range, arg, out0, relu_like, write_out, Bytes, Ctx, PreparedKernel, Qp, Q8};
use crate::ir::{DType, Op, Tensor, UnaryOp};
use crate::runtime::kernels::Scratch;

#[derive(Debug)]
enum Kind {
    /// `clamp(zp_out + mul(x - zp_in), lo, hi)`: requantize and the RELU family.
    Rescale { m: Multiplier, lo: i32, hi: i32 },
    /// LEAKY_RELU.
    Leaky { identity: Multiplier, alpha: Multiplier },
    /// HARD_SWISH parameters.
    HardSwish { out_m: i16, out_e: i32, relu_m: i16, relu_e: i32 },
    /// A lookup table indexed by `x - min` of the dtype.
    Lut(Box<[u8; 256]>),
    /// RSQRT: `1/sqrt(x - zp_in)` by [`inv_sqrt_multiplier`], rescaled by `1/(sqrt(s_in)·s_out)`.
    Rsqrt { m: Multiplier },
}

#[derive(Debug)]
struct Unary {
    kind: Kind,
    x: Qp,
    y: Qp,
    dtype: DType,
}

/// A quantized Unary (`unary`), or a requantizing QuantizeLinear (`None`).
pub(crate) fn prepare(cx: &Ctx, unary: Option<UnaryOp>) -> Result<Box<dyn PreparedKernel>, String> {
    let x = cx.qp(0, false)?;
    let dtype = cx.output(0)?.dtype;
    let range = super::dtype_range(dtype);
    let y = match unary {
        None => requant_params(cx)?,
        Some(_) => cx.qp(0, true)?,
    };
    let kind = match unary {
        None => {
            Kind::Rescale { m: quantize_multiplier(x.scale as f64 / y.scale as f64), lo: range.0, hi: range.1 }
        }
        Some(u) => match u {
            _ if relu_like(&u).is_some() => {
                let (lo, hi) = activation_range(relu_like(&u), y, range);
                Kind::Rescale { m: quantize_multiplier((x.scale / y.scale) as f64), lo, hi }
            }
            UnaryOp::LeakyRelu { alpha } => Kind::Leaky {
                identity: quantize_multiplier((x.scale / y.scale) as f64),
                alpha: quantize_multiplier((x.scale * alpha / y.scale) as f64),
            },
            UnaryOp::HardSwish => {
                let hires = (1.0f32 / 128.0) * x.scale;
                let om = quantize_multiplier((hires / y.scale) as f64);
                let rm = quantize_multiplier((hires / (3.0f32 / 32768.0)) as f64);
                if om.shift > 0 {
                    return Err("HardSwish with an output scale below input scale / 128 is not supported".into());
                }
                Kind::HardSwish { out_m: i16x::downscale_multiplier(om.multiplier), out_e: om.shift, relu_m: i16x::downscale_multiplier(rm.multiplier), relu_e: rm.shift }
            }
            UnaryOp::Sigmoid => lut(x, y, range, |v| 1.0 / (1.0 + (-v).exp())),
            UnaryOp::Tanh => lut(x, y, range, f32::tanh),
            UnaryOp::Gelu { tanh: false } => lut(x, y, range, gelu_erfc),
            UnaryOp::Gelu { tanh: true } => lut(x, y, range, gelu_tanh),
            UnaryOp::Rsqrt if dtype == DType::I8 => Kind::Rsqrt { m: quantize_multiplier(1.0 / ((x.scale as f64).sqrt() * y.scale as f64)) },
            other => return Err(format!("{other:?} on quantized values is not supported")),
        },
    };
    Ok(Box::new(Unary { kind, x, y, dtype }))
}

/// Output parameters of a requantizing QuantizeLinear: its (constant, per-tensor) scale and zero point.
fn requant_params(cx: &Ctx) -> Result<Qp, String> {
    let s = cx.constant(1)?.to_f64_vec();
    let z = if cx.has_input(2) { cx.constant(2)?.to_i64_vec() } else { vec![0] };
    if s.len() != 1 || z.len() != 1 {
        return Err("requantization supports per-tensor parameters only".into());
    }
    Ok(Qp { scale: s[0] as f32, zp: z[0] as i32 })
}

/// `reference_ops::GeluTransform`: `0.5·x·erfc(-x/√2)` in f32 (erfc from the f64 error function, rounded).
fn gelu_erfc(x: f32) -> f32 {
    let z = (x * -std::f32::consts::FRAC_1_SQRT_2) as f64;
    let erfc = (1.0 - crate::runtime::kernels::numeric::erf(z)) as f32;
    0.5 * x * erfc
}

/// `reference_ops::GeluTransformApproximate`: `0.5·x·(1 + tanh(√(2/π)·x·(1 + 0.044715·x²)))` in f32.
fn gelu_tanh(x: f32) -> f32 {
    let k = (std::f64::consts::FRAC_2_SQRT_PI * std::f64::consts::FRAC_1_SQRT_2) as f32;
    0.5 * x * (1.0 + (k * x * (1.0 + 0.044715 * x * x)).tanh())
}

/// TFLite `LUTPopulate` for 8-bit types.
fn lut(x: Qp, y: Qp, range: (i32, i32), f: impl Fn(f32) -> f32) -> Kind {
    let inv = 1.0f32 / y.scale;
    let mut t = Box::new([0u8; 256]);
    for v in range.0..=range.1 {
        let deq = x.scale * (v - x.zp) as f32;
        let q = ((f(deq) * inv).round() + y.zp as f32) as i32;
        t[(v - range.0) as usize] = q.clamp(range.0, range.1) as u8;
    }
    Kind::Lut(t)
}

impl Unary {
    #[inline(always)]
    fn f(&self, v: i32, range: (i32, i32)) -> i32 {
        match &self.kind {
            Kind::Rescale { m, lo, hi } => (self.y.zp + mul_double_round(v - self.x.zp, *m)).clamp(*lo, *hi),
            Kind::Leaky { identity, alpha } => {
                let d = v - self.x.zp;
                (self.y.zp + mul_double_round(d, if d >= 0 { *identity } else { *alpha })).clamp(range.0, range.1)
            }
            Kind::HardSwish { out_m, out_e, relu_m, relu_e } => {
                let input = (v - self.x.zp) as i16;
                let hires = input.wrapping_mul(1 << 7);
                let preshift_out = i16x::srdhm(hires, *out_m);
                let mut reluish = hires;
                if *relu_e > 0 {
                    reluish = i16x::saturating_left_shift(reluish, relu_e - 1);
                }
                reluish = i16x::srdhm(reluish, *relu_m);
                if *relu_e > 0 {
                    reluish = i16x::saturating_left_shift(reluish, 1);
                }
                if *relu_e < 0 {
                    reluish = i16x::rounding_divide_by_pot(reluish, -relu_e);
                }
                let reluish = ((reluish as i32 + (1 << 15)) >> 1) as i16;
                let pre = i16x::sdhm(reluish, preshift_out);
                let out = i16x::rounding_divide_by_pot(pre, -out_e) as i32 + self.y.zp;
                out.clamp(range.0, range.1)
            }
            Kind::Lut(t) => t[(v - range.0) as usize] as i8 as i32,
            Kind::Rsqrt { m } => {
                const SHIFT: i32 = 20;
                let value = v - self.x.zp;
                if value == 0 {
                    return range.1;
                }
                let inv = inv_sqrt_multiplier(value);
                let data = mul_double_round_wide(1, Multiplier { multiplier: inv.multiplier, shift: inv.shift + SHIFT });
                (mul_double_round_wide(data, Multiplier { multiplier: m.multiplier, shift: m.shift - SHIFT }) + self.y.zp).clamp(range.0, range.1)
            }
        }
    }
}

impl PreparedKernel for Unary {
    fn run(&self, inputs: &[Option<&Tensor>], outputs: &mut [Tensor], _scratch: &mut Scratch) -> Result<(), String> {
        let xt = arg(inputs, 0)?;
        let x = Bytes::of(xt, "the input")?;
        let range = super::dtype_range(self.dtype);
        let shape = xt.shape.clone();
        if let (Kind::Lut(t), DType::U8) = (&self.kind, self.dtype) {
            let t = t.clone();
            write_out(out0(outputs)?, self.dtype, &shape, move |i| t[x.get(i) as usize] as i32);
            return Ok(());
        }
        write_out(out0(outputs)?, self.dtype, &shape, |i| self.f(x.get(i), range));
        Ok(())
    }
}

/// CONCATENATION: a copy per input, requantized (TFLite `Requantize`) when its parameters are not the output's.
#[derive(Debug)]
struct Concat {
    axis: usize,
    /// Per input: `None` to copy, or (input zero point, multiplier) for int8, or (scale, bias) in f32 for
    /// uint8 (`reference_ops::ConcatenationWithScaling`: `round(q·scale + bias) + zp_out`, `scale =
    /// s_in · (1/s_out)`, `bias = -zp_in · scale`).
    rescale: Vec<Option<(i32, Multiplier)>>,
    rescale_f: Vec<(f32, f32)>,
    y: Qp,
    dtype: DType,
}

pub(crate) fn prepare_concat(cx: &Ctx, axis: usize) -> Result<Box<dyn PreparedKernel>, String> {
    let y = cx.qp(0, true)?;
    let dtype = cx.output(0)?.dtype;
    let n = cx.g.nodes[cx.n].inputs.len();
    let (mut rescale, mut rescale_f) = (Vec::with_capacity(n), Vec::with_capacity(n));
    for k in 0..n {
        let x = cx.qp(k, false)?;
        if cx.input(k)?.dtype != dtype {
            return Err(format!("int8 Concat needs inputs of the output's dtype {dtype}, input {k} is {}", cx.input(k)?.dtype));
        }
        rescale.push((x != y).then(|| (x.zp, quantize_multiplier(x.scale as f64 / y.scale as f64))));
        let sc = x.scale * (1.0 / y.scale);
        rescale_f.push((sc, -(x.zp as f32) * sc));
    }
    Ok(Box::new(Concat { axis, rescale, rescale_f, y, dtype }))
}

impl PreparedKernel for Concat {
    fn run(&self, inputs: &[Option<&Tensor>], outputs: &mut [Tensor], _scratch: &mut Scratch) -> Result<(), String> {
        let ins: Vec<&Tensor> = (0..self.rescale.len()).map(|k| arg(inputs, k)).collect::<Result<_, _>>()?;
        match self.dtype {
            DType::U8 => self.run_into::<u8>(&ins, out0(outputs)?),
            _ => self.run_into::<i8>(&ins, out0(outputs)?),
        }
    }
}

impl Concat {
    fn run_into<T: Q8 + Into<i32>>(&self, ins: &[&Tensor], out: &mut Tensor) -> Result<(), String> {
        let first = &ins[0].shape;
        let mut shape = first.clone();
        shape[self.axis] = ins.iter().map(|t| t.shape[self.axis]).sum();
        let outer: usize = first[..self.axis].iter().product();
        let out = out.reset::<T>(&shape);
        let row: usize = shape[self.axis..].iter().product();
        let (lo, hi) = super::dtype_range(self.dtype);
        let mut off = 0;
        let u8_float = self.dtype == DType::U8;
        for ((t, r), &(sc, bias)) in ins.iter().zip(&self.rescale).zip(&self.rescale_f) {
            let x = t.view::<T>().ok_or_else(|| format!("Concat input is {}, expected {}", t.dtype(), self.dtype))?;
            let inner: usize = t.shape[self.axis..].iter().product();
            for o in 0..outer {
                let src = &x[o * inner..(o + 1) * inner];
                let dst = &mut out[o * row + off..o * row + off + inner];
                match r {
                    None => dst.copy_from_slice(src),
                    Some(_) if u8_float => {
                        for (d, &s) in dst.iter_mut().zip(src) {
                            *d = T::from_i32(((s.into() as f32 * sc + bias).round() as i32 + self.y.zp).clamp(lo, hi));
                        }
                    }
                    Some((zp, m)) => {
                        for (d, &s) in dst.iter_mut().zip(src) {
                            *d = T::from_i32((self.y.zp + mul_double_round(s.into() - zp, *m)).clamp(lo, hi));
                        }
                    }
                }
            }
            off += inner;
        }
        Ok(())
    }
}

/// DEQUANTIZE of a quantized (per-tensor) i8 / u8 value to f32, as LiteRT's `optimized_ops::Dequantize`
/// computes it through NEON_2_SSE: whole blocks of 8 are `(float)q * scale + (float)(-zp * (double)scale)`
/// in f32 (no FMA), the tail `(float)((double)scale * (q - zp))`.
#[derive(Debug)]
struct Dequantize {
    scale: f32,
    zp: i32,
}

/// The DEQUANTIZE kernel for a `DequantizeLinear` node whose input is a quantized per-tensor i8 / u8 value
/// with constant parameters and whose output is f32; `None` for every other node (the ordinary kernel).
pub(crate) fn prepare_dequantize(cx: &Ctx) -> Option<Box<dyn PreparedKernel>> {
    if !matches!(cx.op(), Op::DequantizeLinear { .. }) || cx.output(0).ok()?.dtype != DType::F32 {
        return None;
    }
    let x = cx.qp(0, false).ok()?;
    let s = cx.constant(1).ok()?.to_f64_vec();
    let z = if cx.has_input(2) { cx.constant(2).ok()?.to_i64_vec() } else { vec![0] };
    if s.len() != 1 || z.len() != 1 || s[0] as f32 != x.scale || z[0] as i32 != x.zp {
        return None;
    }
    Some(Box::new(Dequantize { scale: x.scale, zp: x.zp }))
}

impl PreparedKernel for Dequantize {
    fn run(&self, inputs: &[Option<&Tensor>], outputs: &mut [Tensor], _scratch: &mut Scratch) -> Result<(), String> {
        let xt = arg(inputs, 0)?;
        let x = Bytes::of(xt, "input")?;
        let n: usize = xt.shape.iter().product();
        let o = out0(outputs)?.reset::<f32>(&xt.shape);
        let scale = self.scale as f64;
        // optimized_ops::Dequantize (int8/uint8): ScaleWithNewZeroPoint without __ARM_FEATURE_FMA
        let zero_times_scale = (-(self.zp as f64) * scale) as f32;
        let vec_end = n / 8 * 8;
        for (i, o) in o.iter_mut().enumerate() {
            let q = x.get(i);
            *o = if i < vec_end { q as f32 * self.scale + zero_times_scale } else { (scale * (q - self.zp) as f64) as f32 };
        }
        Ok(())
    }
}
