//! SOFTMAX on int8 as LiteRT's optimized kernel computes it on x86-64 (`optimized_ops::Softmax` with the
//! f32 table of `PopulateSoftmaxLookupTable`; the reference kernel's fixed-point exp differs):
//! `table[255 - d] = expf(-s_in·β·d)`, per row `sum = Σ table[max - x]` in f32 in order,
//! `p = table · (1 / (sum · s_out))`, rounded half away from zero, plus the output zero point.

use super::{arg, out0, Ctx, PreparedKernel, Qp, Q8};
use crate::ir::{DType, Tensor};
use crate::runtime::kernels::Scratch;

#[derive(Debug)]
struct Softmax {
    /// `exp(-s_in·β·d)` for `d = max - x` in 0..=255.
    table: Vec<f32>,
    y: Qp,
    dtype: DType,
}

pub(crate) fn prepare(cx: &Ctx, axis: usize) -> Result<Box<dyn PreparedKernel>, String> {
    let xv = cx.input(0)?;
    let dtype = xv.dtype;
    if axis + 1 != xv.shape.len() || !matches!(dtype, DType::I8 | DType::U8) || cx.output(0)?.dtype != dtype {
        return Err("int8 Softmax supports i8 or u8 (the same in and out) over the last axis only".into());
    }
    let (x, y) = (cx.qp(0, false)?, cx.qp(0, true)?);
    // TFLite: scale = -input_scale * beta (beta is folded into the scale by the importer: β = 1 here)
    let scale = -x.scale;
    let table = (0..=255).map(|d: i32| (scale * d as f32).exp()).collect();
    Ok(Box::new(Softmax { table, y, dtype }))
}

impl PreparedKernel for Softmax {
    fn run(&self, inputs: &[Option<&Tensor>], outputs: &mut [Tensor], _scratch: &mut Scratch) -> Result<(), String> {
        let xt = arg(inputs, 0)?;
        let out = out0(outputs)?;
        match self.dtype {
            DType::U8 => self.run_into(xt.view::<u8>().ok_or("the input is not u8")?, out.reset::<u8>(&xt.shape), *xt.shape.last().unwrap_or(&1)),
            _ => self.run_into(xt.view::<i8>().ok_or("the input is not i8")?, out.reset::<i8>(&xt.shape), *xt.shape.last().unwrap_or(&1)),
        }
        Ok(())
    }
}

impl Softmax {
    fn run_into<T: Q8 + Into<i32>>(&self, x: &[T], o: &mut [T], last: usize) {
        let (lo, hi) = super::dtype_range(self.dtype);
        for (xr, or) in x.chunks(last.max(1)).zip(o.chunks_mut(last.max(1))) {
            let max = xr.iter().map(|&v| v.into()).max().unwrap_or(0);
            let mut sum = 0.0f32;
            for &v in xr {
                sum += self.table[(max - v.into()) as usize];
            }
            let inv = 1.0f32 / (sum * self.y.scale);
            for (o, &v) in or.iter_mut().zip(xr) {
                let p = self.table[(max - v.into()) as usize] * inv;
                *o = T::from_i32((p.round() as i32 + self.y.zp).clamp(lo, hi));
            }
        }
    }
}
