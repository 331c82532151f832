//! SUM on int8 (and uint8), bit-exact with LiteRT's `reduce.cc` `EvalSum` as its builtin resolver registers
//! it (`Register_SUM_OPT`, LiteRT's `tflite/kernels/internal/optimized/reduce.h`).
//!
//! * Different parameters in and out (`need_rescale`): `optimized_ops::QuantizedMeanOrSum` with
//!   `compute_sum`: the exact int32 sum `Σq` of each output, then, in f32,
//!   `round_half_away(Σq · s + b) + zp_out` with `s = s_in / s_out` and `b = -zp_in · s · n` (`n` the number
//!   of elements summed into each output), clamped to the 8-bit range. (TensorFlow's older copy of the kernel
//!   cast without clamping.)
//! * Same parameters in and out: `EvalGeneric<kSum>` on the raw 8-bit values, each addition wrapping in the
//!   8-bit type (`optimized_ops::ReduceGeneric` with `SumOp<int8_t>`).

use super::{arg, out0, Bytes, Ctx, PreparedKernel};
use crate::ir::{DType, Tensor};
use crate::runtime::kernels::Scratch;

#[derive(Debug)]
pub(crate) struct Sum {
    /// Reduced axes of the input (sorted, distinct).
    mask: Vec<bool>,
    /// `s_in / s_out` and `-zp_in · s · n` in f32; `None` with equal parameters in and out (raw wrapping sum).
    rescale: Option<(f32, f32)>,
    zp_out: i32,
    final_shape: Vec<usize>,
    dtype: DType,
}

pub(crate) fn prepare(cx: &Ctx, axes: &[usize]) -> Result<Box<dyn PreparedKernel>, String> {
    let (xv, yv) = (cx.input(0)?, cx.output(0)?);
    if !matches!(xv.dtype, DType::I8 | DType::U8) || yv.dtype != xv.dtype {
        return Err(format!("int8 Sum needs i8 or u8 input and output of the same dtype, got {} and {}", xv.dtype, yv.dtype));
    }
    let (x, y) = (cx.qp(0, false)?, cx.qp(0, true)?);
    let rank = xv.shape.len();
    if let Some(a) = axes.iter().find(|&&a| a >= rank) {
        return Err(format!("int8 Sum over axis {a} of a rank-{rank} input"));
    }
    let mut sorted = axes.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let mask: Vec<bool> = (0..rank).map(|d| sorted.contains(&d)).collect();
    let rescale = (x != y).then(|| {
        let s = x.scale / y.scale;
        let bias = (-x.zp) as f32 * s * sorted.iter().map(|&a| xv.shape[a]).product::<usize>() as f32;
        (s, bias)
    });
    Ok(Box::new(Sum { mask, rescale, zp_out: y.zp, final_shape: yv.shape.clone(), dtype: xv.dtype }))
}

impl PreparedKernel for Sum {
    fn run(&self, inputs: &[Option<&Tensor>], outputs: &mut [Tensor], _scratch: &mut Scratch) -> Result<(), String> {
        let xt = arg(inputs, 0)?;
        let x = Bytes::of(xt, "the input")?;
        let shape = &xt.shape;
        if shape.len() != self.mask.len() {
            return Err(format!("input shape {shape:?} does not match the planned Sum"));
        }
        // Output strides over the input's index (0 on reduced axes), row-major over the kept axes.
        let rank = shape.len();
        let mut ost = vec![0usize; rank];
        let mut s = 1;
        for d in (0..rank).rev() {
            if !self.mask[d] {
                ost[d] = s;
                s *= shape[d];
            }
        }
        let nout = s;
        let wrap = |v: i32| if self.dtype == DType::U8 { v as u8 as i32 } else { v as i8 as i32 };
        let mut acc = vec![0i32; nout];
        let mut idx = vec![0usize; rank];
        for i in 0..x.count() {
            let o: usize = idx.iter().zip(&ost).map(|(i, s)| i * s).sum();
            acc[o] = match self.rescale {
                Some(_) => acc[o] + x.get(i),
                None => wrap(acc[o] + x.get(i)),
            };
            for d in (0..rank).rev() {
                idx[d] += 1;
                if idx[d] < shape[d] {
                    break;
                }
                idx[d] = 0;
            }
        }
        let res: Vec<i32> = match self.rescale {
            Some((scale, bias)) => {
                let (lo, hi) = super::dtype_range(self.dtype);
                acc.iter().map(|&q| ((q as f32 * scale + bias).round() as i32).saturating_add(self.zp_out).clamp(lo, hi)).collect()
            }
            None => acc,
        };
        let out = out0(outputs)?;
        match self.dtype {
            DType::U8 => out.reset::<u8>(&self.final_shape).iter_mut().zip(&res).for_each(|(o, &v)| *o = v as u8),
            _ => out.reset::<i8>(&self.final_shape).iter_mut().zip(&res).for_each(|(o, &v)| *o = v as i8),
        }
        Ok(())
    }
}
