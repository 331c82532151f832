//! BATCH_MATMUL of two int8 activations (attention's `Q·Kᵀ` and `P·V`), as LiteRT computes it
//! (`batch_matmul.cc` `EvalInt8Int8` → `reference_ops::BatchMatMul`): per output element the exact sum
//! `Σ (a - zp_a)·(b - zp_b)` over the shared dim, `MultiplyByQuantizedMultiplier` by `s_a·s_b/s_y`, plus the
//! output zero point, clamped to the dtype. The multiplier is `GetQuantizedConvolutionMultipler`'s: the
//! product of the input scales in f32, then divided by the output scale in f64 (a multiplier from the f64
//! product differs in its last bits and flipped ties in ViT-B/16's attention). Leading (batch) dims broadcast
//! as numpy's matmul does.

use super::fixedpoint::{mul_double_round, quantize_multiplier, Multiplier};
use super::{arg, out0, Ctx, PreparedKernel, Qp};
use crate::ir::{DType, Tensor};
use crate::runtime::kernels::util::{broadcast_shape, broadcast_strides};
use crate::runtime::kernels::Scratch;

#[derive(Debug)]
struct BatchMatMul {
    a: Qp,
    b: Qp,
    y: Qp,
    m: Multiplier,
}

pub(crate) fn prepare(cx: &Ctx) -> Result<Box<dyn PreparedKernel>, String> {
    let (a, b, y) = (cx.qp(0, false)?, cx.qp(1, false)?, cx.qp(0, true)?);
    for (k, v) in [(0, cx.input(0)?), (1, cx.input(1)?)] {
        if v.dtype != DType::I8 || v.shape.len() < 2 {
            return Err(format!("int8 batch matmul needs i8 operands of rank ≥ 2, input {k} is {} {:?}", v.dtype, v.shape));
        }
    }
    if cx.output(0)?.dtype != DType::I8 {
        return Err("int8 batch matmul needs an i8 output".into());
    }
    let m = quantize_multiplier((a.scale * b.scale) as f64 / y.scale as f64);
    Ok(Box::new(BatchMatMul { a, b, y, m }))
}

impl PreparedKernel for BatchMatMul {
    fn run(&self, inputs: &[Option<&Tensor>], outputs: &mut [Tensor], _scratch: &mut Scratch) -> Result<(), String> {
        let (at, bt) = (arg(inputs, 0)?, arg(inputs, 1)?);
        let (av, bv) = (at.view::<i8>().ok_or("input 0 is not i8")?, bt.view::<i8>().ok_or("input 1 is not i8")?);
        let (ra, rb) = (at.shape.len(), bt.shape.len());
        let (m, k, k2, n) = (at.shape[ra - 2], at.shape[ra - 1], bt.shape[rb - 2], bt.shape[rb - 1]);
        if k != k2 {
            return Err(format!("batch matmul of {:?} and {:?}: inner dims differ", at.shape, bt.shape));
        }
        let batch = broadcast_shape(&at.shape[..ra - 2], &bt.shape[..rb - 2])?;
        let (sa, sb) = (broadcast_strides(&at.shape[..ra - 2], &batch), broadcast_strides(&bt.shape[..rb - 2], &batch));
        let nb: usize = batch.iter().product();
        let mut shape = batch.clone();
        shape.extend([m, n]);
        let out = out0(outputs)?.reset::<i8>(&shape);
        let (za, zb) = (self.a.zp, self.b.zp);
        for bi in 0..nb {
            // Offsets of this batch in a and b, in units of whole matrices.
            let (mut oa, mut ob, mut rest) = (0, 0, bi);
            for d in (0..batch.len()).rev() {
                let i = rest % batch[d];
                rest /= batch[d];
                oa += i * sa[d];
                ob += i * sb[d];
            }
            let a = &av[oa * m * k..(oa + 1) * m * k];
            let b = &bv[ob * k * n..(ob + 1) * k * n];
            let o = &mut out[bi * m * n..(bi + 1) * m * n];
            for i in 0..m {
                for j in 0..n {
                    let mut acc = 0i32;
                    for t in 0..k {
                        acc += (a[i * k + t] as i32 - za) * (b[t * n + j] as i32 - zb);
                    }
                    o[i * n + j] = (mul_double_round(acc, self.m) + self.y.zp).clamp(-128, 127) as i8;
                }
            }
        }
        Ok(())
    }
}
