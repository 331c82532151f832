//! ADD, SUB, MUL and PRELU on int8 with numpy broadcasting, as TFLite computes them.
//!
//! ADD/SUB (`add.cc`, `sub.cc`): both inputs are shifted left by 20 bits and rescaled to twice the larger
//! input scale (`MultiplyByQuantizedMultiplierSmallerThanOneExp`), added or subtracted, and the sum rescaled
//! to the output. MUL: `MultiplyByQuantizedMultiplier((a - zp_a)·(b - zp_b), s_a·s_b/s_out)`. Both add the
//! output zero point and clamp to the fused activation's range. PRELU (`reference_ops::BroadcastPrelu4DSlow`,
//! which LiteRT runs for int8): `x - zp_x` rescaled by `s_x/s_out` where it is ≥ 0, else
//! `(x - zp_x)·(alpha - zp_alpha)` rescaled by `s_x·s_alpha/s_out`; plus the output zero point, clamped.

use super::fixedpoint::{mul_double_round, mul_smaller_than_one, quantize_multiplier, srdhm, Multiplier};
use super::{activation_range, arg, out0, write_out, Bytes, Ctx, Int8Kernel, Qp};
use crate::ir::{Activation, BinaryOp, DType, Tensor};
use crate::runtime::kernels::util::{broadcast_shape, broadcast_strides};
use crate::runtime::kernels::Scratch;

#[derive(Debug)]
enum Kind {
    AddSub { sub: bool, m1: Multiplier, m2: Multiplier, mo: Multiplier },
    Mul { m: Multiplier },
    PRelu { positive: Multiplier, negative: Multiplier },
}

#[derive(Debug)]
struct Binary {
    kind: Kind,
    a: Qp,
    b: Qp,
    y: Qp,
    act: (i32, i32),
    dtype: DType,
}

const LEFT_SHIFT: i32 = 20;

pub(crate) fn prepare(cx: &Ctx, op: BinaryOp, act: Option<Activation>) -> Result<Box<dyn Int8Kernel>, String> {
    let (a, b, y) = (cx.qp(0, false)?, cx.qp(1, false)?, cx.qp(0, true)?);
    let kind = match op {
        BinaryOp::Add | BinaryOp::Sub => {
            let twice_max = 2.0 * a.scale.max(b.scale) as f64;
            Kind::AddSub {
                sub: op == BinaryOp::Sub,
                m1: quantize_multiplier(a.scale as f64 / twice_max),
                m2: quantize_multiplier(b.scale as f64 / twice_max),
                mo: quantize_multiplier(twice_max / ((1i64 << LEFT_SHIFT) as f64 * y.scale as f64)),
            }
        }
        BinaryOp::Mul => Kind::Mul { m: quantize_multiplier(a.scale as f64 * b.scale as f64 / y.scale as f64) },
        BinaryOp::PRelu => Kind::PRelu {
            positive: quantize_multiplier(a.scale as f64 / y.scale as f64),
            negative: quantize_multiplier(a.scale as f64 * b.scale as f64 / y.scale as f64),
        },
        other => return Err(format!("{other:?} on quantized values is not supported (Add, Sub, Mul, PRelu are)")),
    };
    let dtype = cx.output(0)?.dtype;
    Ok(Box::new(Binary { kind, a, b, y, act: activation_range(act, y, super::dtype_range(dtype)), dtype }))
}

impl Binary {
    #[inline(always)]
    fn f(&self, x1: i32, x2: i32) -> i32 {
        let raw = match self.kind {
            Kind::AddSub { sub, m1, m2, mo } => {
                let s1 = mul_smaller_than_one((x1 - self.a.zp) << LEFT_SHIFT, m1);
                let s2 = mul_smaller_than_one((x2 - self.b.zp) << LEFT_SHIFT, m2);
                mul_smaller_than_one(if sub { s1 - s2 } else { s1 + s2 }, mo)
            }
            Kind::Mul { m } => mul_double_round((x1 - self.a.zp) * (x2 - self.b.zp), m),
            Kind::PRelu { positive, negative } => match x1 - self.a.zp {
                x if x >= 0 => mul_double_round(x, positive),
                x => mul_double_round(x * (x2 - self.b.zp), negative),
            },
        };
        (raw + self.y.zp).clamp(self.act.0, self.act.1)
    }

    /// ADD's NEON loop in optimized_integer_ops::AddScalarBroadcast (through NEON_2_SSE): each input is
    /// `vqrdmulh(x << 20, m)` then `vshlq` by its (negative) shift, an arithmetic shift that floors; the sum
    /// is rescaled as in the scalar code.
    #[inline(always)]
    fn add_neon_scalar_broadcast(&self, x1: i32, x2: i32, m1: Multiplier, m2: Multiplier, mo: Multiplier) -> i32 {
        let s1 = srdhm((x1 - self.a.zp) << LEFT_SHIFT, m1.multiplier) >> -m1.shift;
        let s2 = srdhm((x2 - self.b.zp) << LEFT_SHIFT, m2.multiplier) >> -m2.shift;
        (mul_smaller_than_one(s1 + s2, mo) + self.y.zp).clamp(self.act.0, self.act.1)
    }
}

impl Binary {
    /// ADD's NEON loop in optimized_integer_ops::AddElementwiseInt8 (through NEON_2_SSE): each input is shifted
    /// by `20 + its shift` (a left shift, or an arithmetic right shift that floors) *before* `vqrdmulh`, so it
    /// is rounded once where the scalar code rounds twice; the sum is rescaled as in the scalar code.
    #[inline(always)]
    fn add_neon_elementwise(&self, x1: i32, x2: i32, m1: Multiplier, m2: Multiplier, mo: Multiplier) -> i32 {
        let pre = |x: i32, m: Multiplier| {
            let ls = LEFT_SHIFT + m.shift;
            srdhm(if ls >= 0 { x << ls } else { x >> -ls }, m.multiplier)
        };
        let s = pre(x1 - self.a.zp, m1) + pre(x2 - self.b.zp, m2);
        (mul_smaller_than_one(s, mo) + self.y.zp).clamp(self.act.0, self.act.1)
    }
}

impl Int8Kernel for Binary {
    fn run(&self, inputs: &[Option<&Tensor>], outputs: &mut [Tensor], _scratch: &mut Scratch) -> Result<(), String> {
        let (at, bt) = (arg(inputs, 0)?, arg(inputs, 1)?);
        let (a, b) = (Bytes::of(at, "input 0")?, Bytes::of(bt, "input 1")?);
        let shape = broadcast_shape(&at.shape, &bt.shape)?;
        let out = out0(outputs)?;
        if at.shape == bt.shape {
            if let (Kind::AddSub { sub: false, m1, m2, mo }, DType::I8) = (&self.kind, self.dtype) {
                // optimized_integer_ops::AddElementwiseInt8: the NEON loop covers whole blocks of 16, the tail
                // runs the reference arithmetic
                let vec_end = a.count() / 16 * 16;
                if let (Bytes::I8(a), Bytes::I8(b)) = (&a, &b) {
                    // the same on slices, without the per-element dispatch of `Bytes::get`
                    let o = out.reset::<i8>(&shape);
                    for ((o, a), b) in o[..vec_end].iter_mut().zip(&a[..vec_end]).zip(&b[..vec_end]) {
                        *o = self.add_neon_elementwise(*a as i32, *b as i32, *m1, *m2, *mo) as i8;
                    }
                    for ((o, a), b) in o[vec_end..].iter_mut().zip(&a[vec_end..]).zip(&b[vec_end..]) {
                        *o = self.f(*a as i32, *b as i32) as i8;
                    }
                    return Ok(());
                }
                write_out(out, self.dtype, &shape, |i| if i < vec_end { self.add_neon_elementwise(a.get(i), b.get(i), *m1, *m2, *mo) } else { self.f(a.get(i), b.get(i)) });
                return Ok(());
            }
            write_out(out, self.dtype, &shape, |i| self.f(a.get(i), b.get(i)));
            return Ok(());
        }
        let n: usize = shape.iter().product();
        if let Kind::AddSub { sub: false, m1, m2, mo } = self.kind {
            if (a.count() == 1 || b.count() == 1) && m1.shift <= 0 && m2.shift <= 0 {
                // optimized_integer_ops::BroadcastAddDispatch, scalar broadcast -> AddScalarBroadcast: the NEON
                // loop covers whole blocks of 8, the tail runs the reference arithmetic
                let vec_end = n / 8 * 8;
                let (ia, ib) = (a.count() != 1, b.count() != 1);
                write_out(out, self.dtype, &shape, |i| {
                    let (x1, x2) = (a.get(if ia { i } else { 0 }), b.get(if ib { i } else { 0 }));
                    if i < vec_end { self.add_neon_scalar_broadcast(x1, x2, m1, m2, mo) } else { self.f(x1, x2) }
                });
                return Ok(());
            }
        }
        let (sa, sb) = (broadcast_strides(&at.shape, &shape), broadcast_strides(&bt.shape, &shape));
        let dims = shape.clone();
        let offset = |mut i: usize, st: &[usize]| {
            let mut off = 0;
            for d in (0..dims.len()).rev() {
                off += (i % dims[d]) * st[d];
                i /= dims[d];
            }
            off
        };
        write_out(out, self.dtype, &shape, |i| self.f(a.get(offset(i, &sa)), b.get(offset(i, &sb))));
        Ok(())
    }
}
