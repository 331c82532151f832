//! QuantizeLinear and DequantizeLinear, per tensor (one scale) or per axis (a 1-D scale along `axis`).
//!
//! Quantize: `y = saturate(round_half_even(x / scale) + zero_point)`, the output type being the zero
//! point's, else the op's `to` (u8, i8 or i16). Dequantize: `y = (x - zero_point) * scale` in the scale's
//! type. With `rounding: TfLite`, Quantize is TFLite's QUANTIZE: per tensor LiteRT's optimized
//! `AffineQuantize` (`x * (1/scale)` in f32 rounded half to even in blocks of 8, then
//! `round_half_away(x / scale)` in f64 for the tail), per axis the reference's f64 division.
//! Blocked quantization (a scale of rank > 1) is not supported.

use super::broadcast::{data, par_chunks, CHUNK, PAR_MIN};
use super::dispatch::with_float;
use super::numeric::{Float, Real};
use super::input;
use crate::ir::ops::quantize::{dequant_dtype, layout, quant_dtype};
use crate::ir::{DType, Element, QuantRounding, Tensor};

/// How scale and zero point apply: row `r` of `inner` elements uses parameter `r % channels`.
#[derive(Debug)]
struct Layout {
    channels: usize,
    inner: usize,
}

/// Runs QuantizeLinear (`quant`: its output type when the zero point is absent, and its rounding) or
/// DequantizeLinear (`quant` is `None`), with per-axis parameters along `axis`.
pub(super) fn eval(quant: Option<(DType, QuantRounding)>, axis: i64, inputs: &[Option<&Tensor>], outputs: &mut [Tensor]) -> Result<(), String> {
    let name = if quant.is_some() { "QuantizeLinear" } else { "DequantizeLinear" };
    let (x, s) = (input(inputs, 0)?, input(inputs, 1)?);
    let zp = inputs.get(2).copied().flatten();
    let out = outputs.first_mut().ok_or_else(|| format!("{name} needs an output"))?;
    let lay = match layout(name, &x.shape, &s.shape, zp.map(|z| z.shape.as_slice()), axis)? {
        // per tensor: any partition of the data into rows works
        None => Layout { channels: 1, inner: CHUNK },
        Some((channels, inner)) => Layout { channels, inner },
    };
    // the parameters are small (one per channel): read them as f64 once
    let scale = s.to_f64_vec();
    let zero = zp.map(|z| z.to_f64_vec()).unwrap_or_else(|| vec![0.0]);
    if scale.len() < lay.channels || (zp.is_some() && zero.len() < lay.channels) {
        return Err(format!("{name} parameters hold fewer elements than their shapes say"));
    }
    let zero_at = |c: usize| if zero.len() == 1 { zero[0] } else { zero[c] };
    let params: Vec<(f64, f64)> = (0..lay.channels).map(|c| (scale[c], zero_at(c))).collect();
    match quant {
        Some((to, rounding)) => {
            let dt = quant_dtype(x.dtype(), s.dtype(), zp.map(|z| z.dtype()), to)?;
            if rounding == QuantRounding::TfLite {
                let a = x.to_f64_vec();
                match dt {
                    DType::U8 => quantize_tflite::<u8>(&a, out.reset::<u8>(&x.shape), &lay, &params, 0.0, 255.0),
                    DType::I8 => quantize_tflite::<i8>(&a, out.reset::<i8>(&x.shape), &lay, &params, -128.0, 127.0),
                    _ => quantize_tflite::<i16>(&a, out.reset::<i16>(&x.shape), &lay, &params, -32768.0, 32767.0),
                }
                return Ok(());
            }
            with_float!(x.dtype(), X => {
                let a = data::<X>(x, "input")?;
                match dt {
                    DType::U8 => quantize::<X, u8>(a, out.reset::<u8>(&x.shape), &lay, &params, 0.0, 255.0),
                    DType::I8 => quantize::<X, i8>(a, out.reset::<i8>(&x.shape), &lay, &params, -128.0, 127.0),
                    _ => quantize::<X, i16>(a, out.reset::<i16>(&x.shape), &lay, &params, -32768.0, 32767.0),
                }
                Ok(())
            }, Err(format!("QuantizeLinear of {} is not supported", x.dtype())))
        }
        None => {
            let dt = dequant_dtype(x.dtype(), s.dtype(), zp.map(|z| z.dtype()))?;
            macro_rules! deq {
                ($X:ty) => {{
                    let a = data::<$X>(x, "input")?;
                    with_float!(dt, T => {
                        dequantize::<$X, T>(a, out.reset::<T>(&x.shape), &lay, &params);
                        Ok(())
                    }, Err(format!("DequantizeLinear to {dt} is not supported")))
                }};
            }
            match x.dtype() {
                DType::U8 => deq!(u8),
                DType::I8 => deq!(i8),
                DType::I16 => deq!(i16),
                _ => deq!(i32),
            }
        }
    }
}

/// Calls `f(channel, x_row, out_row)` for each row of `lay.inner` elements, over the thread team when large.
fn for_rows<A: Sync, O: Send>(a: &[A], o: &mut [O], lay: &Layout, f: impl Fn(usize, &[A], &mut [O]) + Sync) {
    let inner = lay.inner;
    let run = |r0: usize, a: &[A], o: &mut [O]| {
        for (r, (or, ar)) in o.chunks_mut(inner).zip(a.chunks(inner)).enumerate() {
            f((r0 + r) % lay.channels, ar, or);
        }
    };
    if o.len() >= PAR_MIN {
        let per = (CHUNK / inner).max(1);
        par_chunks(o, per * inner, &|i, oc| run(i * per, &a[i * per * inner..], oc));
    } else {
        run(0, a, o);
    }
}

fn quantize<X: Float, Q: Element>(a: &[X], o: &mut [Q], lay: &Layout, params: &[(f64, f64)], lo: f64, hi: f64) {
    let c = <X::C as Element>::from_f64;
    let (lo, hi) = (c(lo), c(hi));
    for_rows(a, o, lay, |ch, ar, or| {
        let (s, z) = (c(params[ch].0), c(params[ch].1));
        for (o, v) in or.iter_mut().zip(ar) {
            // x / scale in the input's compute type, like the ONNX reference (not x * (1 / scale))
            let q = (v.load() / s).round_even() + z;
            let q = if q < lo { lo } else if q > hi { hi } else { q };
            *o = Q::from_f64(q.to_f64());
        }
    });
}

/// TFLite QUANTIZE (`AffineQuantize`): `TfLiteRound(x / (double)scale) + zero_point`, saturated; `x` is
/// the f32 input widened to f64 (exact).
fn quantize_tflite<Q: Element>(a: &[f64], o: &mut [Q], lay: &Layout, params: &[(f64, f64)], lo: f64, hi: f64) {
    if lay.channels == 1 {
        // per tensor: LiteRT's optimized_ops::AffineQuantize (NEON path through NEON_2_SSE): whole blocks of
        // 8 are `x * (float)(1.0 / (double)scale)` in f32, rounded by RoundToNearest; the tail as below
        let (s, z) = (params[0].0 as f32 as f64, params[0].1);
        let recip = (1.0 / s) as f32;
        let vec_end = a.len() / 8 * 8;
        for (i, (o, &v)) in o.iter_mut().zip(a).enumerate() {
            let r = if i < vec_end { round_to_nearest_neon(v as f32 * recip) } else { (v / s).round() as i32 };
            *o = Q::from_f64((r as f64 + z).clamp(lo, hi));
        }
        return;
    }
    for_rows(a, o, lay, |ch, ar, or| {
        let (s, z) = (params[ch].0 as f32 as f64, params[ch].1);
        for (o, &v) in or.iter_mut().zip(ar) {
            // `as i32` truncates like static_cast<int32>; round() is half away from zero like std::round
            let q = ((v / s).round() as i32) as f64 + z;
            *o = Q::from_f64(q.clamp(lo, hi));
        }
    });
}

/// optimized_ops::RoundToNearest with __SSSE3__: `vcvtnq_s32_f32` (NEON_2_SSE `_mm_cvtps_epi32`), ties to even.
#[inline]
fn round_to_nearest_neon(x: f32) -> i32 {
    x.round_ties_even() as i32
}

fn dequantize<X: Element, T: Float>(a: &[X], o: &mut [T], lay: &Layout, params: &[(f64, f64)]) {
    let wide = X::DTYPE == DType::I32;
    for_rows(a, o, lay, |ch, ar, or| {
        let (s, z) = params[ch];
        let sc = <T::C as Element>::from_f64(s);
        let zf = z as f32;
        for (o, v) in or.iter_mut().zip(ar) {
            *o = T::store(if wide {
                // the reference subtracts an i32 zero point from x as f32, which numpy does in f64
                <T::C as Element>::from_f64(((v.to_f64() as f32) as f64 - z) * s)
            } else {
                // exact in f32 for 8/16-bit values, then times the scale in the output's compute type
                <T::C as Element>::from_f64((v.to_f64() as f32 - zf) as f64) * sc
            });
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::Op;
    use crate::runtime::kernels::{eval, Scratch};
    use crate::ir::ops::{infer, TypeInfo};

    fn run(op: Op, ins: &[Option<&Tensor>]) -> Result<Tensor, String> {
        let mut outs = vec![Tensor::default()];
        eval(&op, ins, &mut outs, &mut Scratch::default())?;
        let infos: Vec<Option<TypeInfo>> = ins.iter().map(|t| t.map(|t| TypeInfo { dtype: t.dtype(), shape: &t.shape, value: None })).collect();
        assert_eq!(infer(&op, &infos).unwrap(), vec![(outs[0].dtype(), outs[0].shape.clone())]);
        Ok(outs.remove(0))
    }

    #[test]
    fn quantize_per_tensor_rounds_half_to_even_and_saturates() {
        // ONNX QuantizeLinear example: x = [0, 2, 3, 1000, -254, -1000], scale 2, zp 128
        let x = Tensor::from_f32(vec![6], vec![0.0, 2.0, 3.0, 1000.0, -254.0, -1000.0]);
        let s = Tensor::scalar(2.0f32);
        let z = Tensor::scalar(128u8);
        let y = run(Op::QuantizeLinear { axis: 1, to: DType::U8, rounding: QuantRounding::HalfToEven }, &[Some(&x), Some(&s), Some(&z)]).unwrap();
        assert_eq!((y.dtype(), y.to_i64_vec()), (DType::U8, vec![128, 129, 130, 255, 1, 0]));
        // no zero point: `to` decides; 2.5 -> 2, -2.5 -> -2 (half to even)
        let x = Tensor::from_f32(vec![4], vec![2.5, -2.5, 3.5, 1000.0]);
        let y = run(Op::QuantizeLinear { axis: 1, to: DType::I8, rounding: QuantRounding::HalfToEven }, &[Some(&x), Some(&Tensor::scalar(1.0f32)), None]).unwrap();
        assert_eq!((y.dtype(), y.to_i64_vec()), (DType::I8, vec![2, -2, 4, 127]));
    }

    #[test]
    fn per_axis_quantize_and_dequantize() {
        // ONNX test_quantizelinear_axis: x [1, 3, 3, 2], per-channel scale and zero point on axis 1
        let x = Tensor::from_f32(
            vec![1, 3, 3, 2],
            vec![-162.0, 10.0, -100.0, 232.0, -20.0, -50.0, -76.0, 0.0, 0.0, 252.0, 32.0, -44.0, 245.0, -485.0, -960.0, -270.0, -375.0, -470.0],
        );
        let s = Tensor::from_f32(vec![3], vec![2.0, 4.0, 5.0]);
        let z = Tensor::from_vec(vec![3], vec![84u8, 24, 196]).unwrap();
        let y = run(Op::QuantizeLinear { axis: 1, to: DType::U8, rounding: QuantRounding::HalfToEven }, &[Some(&x), Some(&s), Some(&z)]).unwrap();
        assert_eq!(y.to_i64_vec(), vec![3, 89, 34, 200, 74, 59, 5, 24, 24, 87, 32, 13, 245, 99, 4, 142, 121, 102]);
        // ONNX test_dequantizelinear_axis: x [1, 3, 2, 2] u8, scale [1, 2, 4], zp [0, 0, 0]
        let x = Tensor::from_vec(vec![1, 3, 2, 2], vec![3u8, 89, 34, 200, 74, 59, 5, 24, 24, 87, 32, 13]).unwrap();
        let s = Tensor::from_f32(vec![3], vec![1.0, 2.0, 4.0]);
        let z = Tensor::from_vec(vec![3], vec![0u8, 0, 0]).unwrap();
        let y = run(Op::DequantizeLinear { axis: -3 }, &[Some(&x), Some(&s), Some(&z)]).unwrap();
        assert_eq!(y.as_f32().unwrap(), &[3.0, 89.0, 34.0, 200.0, 148.0, 118.0, 10.0, 48.0, 96.0, 348.0, 128.0, 52.0]);
        // per-tensor dequantize into f16 (the scale's type)
        let x = Tensor::from_vec(vec![3], vec![0i8, -128, 127]).unwrap();
        let s = Tensor::scalar(half::f16::from_f32(0.5));
        let y = run(Op::DequantizeLinear { axis: 1 }, &[Some(&x), Some(&s), Some(&Tensor::scalar(-1i8))]).unwrap();
        assert_eq!((y.dtype(), y.to_f64_vec()), (DType::F16, vec![0.5, -63.5, 64.0]));
        // blocked and mismatched parameters are errors, not panics
        let x = Tensor::from_f32(vec![2, 4], vec![0.0; 8]);
        let blocked = Tensor::from_f32(vec![2, 2], vec![1.0; 4]);
        assert!(run(Op::QuantizeLinear { axis: 1, to: DType::U8, rounding: QuantRounding::HalfToEven }, &[Some(&x), Some(&blocked), None]).unwrap_err().contains("blocked"));
        let wrong = Tensor::from_f32(vec![3], vec![1.0; 3]);
        assert!(run(Op::QuantizeLinear { axis: 1, to: DType::U8, rounding: QuantRounding::HalfToEven }, &[Some(&x), Some(&wrong), None]).is_err());
        assert!(run(Op::QuantizeLinear { axis: 1, to: DType::I32, rounding: QuantRounding::HalfToEven }, &[Some(&x), Some(&Tensor::scalar(1.0f32)), None]).is_err());
    }

    #[test]
    fn large_per_axis_runs_in_parallel() {
        let (c, inner) = (4usize, 30000usize);
        let x: Vec<f32> = (0..c * inner).map(|i| (i % 200) as f32 - 100.0).collect();
        let s = Tensor::from_f32(vec![c], vec![1.0, 2.0, 4.0, 8.0]);
        let y = run(Op::QuantizeLinear { axis: 0, to: DType::I8, rounding: QuantRounding::HalfToEven }, &[Some(&Tensor::from_f32(vec![c, inner], x.clone())), Some(&s), None]).unwrap();
        let y = y.to_i64_vec();
        for i in (0..c * inner).step_by(997) {
            let sc = [1.0f32, 2.0, 4.0, 8.0][i / inner];
            assert_eq!(y[i], (x[i] / sc).round_ties_even().clamp(-128.0, 127.0) as i64);
        }
    }
}
