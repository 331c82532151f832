//! ADD, SUB, MUL and PRELU on int8 with numpy broadcasting, as TFLite computes them.
//!
//! ADD/SUB (`add.cc`, `sub.cc`): both inputs are shifted left by 20 bits and rescaled to twice the larger
//! input scale (`MultiplyByQuantizedMultiplierSmallerThanOneExp`), added or subtracted, and the sum rescaled
//! to the output. MUL: `MultiplyByQuantizedMultiplier((a - zp_a)·(b - zp_b), s_a·s_b/s_out)`. Both add the
//! output zero point and clamp to the fused activation's range. PRELU (`reference_ops::BroadcastPrelu4DSlow`,
//! which LiteRT runs for int8): `x - zp_x` rescaled by `s_x/s_out` where it is ≥ 0, else
//! `(x - zp_x)·(alpha - zp_alpha)` rescaled by `s_x·s_alpha/s_out`; plus the output zero point, clamped.

use super::fixedpoint::{mul_double_round, mul_smaller_than_one, quantize_multiplier, srdhm, Multiplier};
use super::{activation_range, arg, out0, write_out, Bytes, Ctx, PreparedKernel, Qp};
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

pub(crate) fn prepare(cx: &Ctx, op: BinaryOp, act: Option<Activation>) -> Result<Box<dyn PreparedKernel>, String> {
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

#[cfg(target_arch = "x86_64")]
impl Binary {
    /// [`Binary::add_neon_elementwise`] on 16 lanes at a time (whole blocks of 16), bit-exact: the same
    /// shifts, [`super::requantize::x86::high_mul`] for `vqrdmulh`, and the output stage of
    /// [`super::requantize::x86::requant`] with its half-away-from-zero shift (`mo.shift ≤ 0`).
    #[target_feature(enable = "avx512f,avx512bw,avx512vl")]
    unsafe fn add_neon_elementwise_avx512(&self, a: &[i8], b: &[i8], o: &mut [i8], m1: Multiplier, m2: Multiplier, mo: Multiplier) {
        use super::requantize::x86::{high_mul, requant};
        use std::arch::x86_64::*;
        let pre = |x: __m512i, m: Multiplier| {
            let ls = LEFT_SHIFT + m.shift;
            let x = if ls >= 0 { _mm512_sll_epi32(x, _mm_cvtsi32_si128(ls)) } else { _mm512_sra_epi32(x, _mm_cvtsi32_si128(-ls)) };
            high_mul(x, _mm512_set1_epi64(m.multiplier as i64))
        };
        let (za, zb) = (_mm512_set1_epi32(self.a.zp), _mm512_set1_epi32(self.b.zp));
        let mult = _mm512_set1_epi64(mo.multiplier as i64);
        let (zy, lo, hi) = (_mm512_set1_epi32(self.y.zp), _mm512_set1_epi32(self.act.0), _mm512_set1_epi32(self.act.1));
        let n = a.len().min(b.len()).min(o.len()) / 16 * 16;
        for j in (0..n).step_by(16) {
            let x1 = _mm512_sub_epi32(_mm512_cvtepi8_epi32(_mm_loadu_si128(a.as_ptr().add(j) as *const __m128i)), za);
            let x2 = _mm512_sub_epi32(_mm512_cvtepi8_epi32(_mm_loadu_si128(b.as_ptr().add(j) as *const __m128i)), zb);
            let s = _mm512_add_epi32(pre(x1, m1), pre(x2, m2));
            let y = requant(s, _mm_cvtsi32_si128(0), -mo.shift, true, mult, zy, lo, hi);
            _mm_storeu_si128(o.as_mut_ptr().add(j) as *mut __m128i, _mm512_cvtepi32_epi8(y));
        }
    }
}

#[cfg(target_arch = "x86_64")]
impl Binary {
    /// [`Binary::add_neon_elementwise_avx512`] on 8 lanes (AVX2, whole blocks of 8), bit-exact the same way.
    #[target_feature(enable = "avx2")]
    unsafe fn add_neon_elementwise_avx2(&self, a: &[i8], b: &[i8], o: &mut [i8], m1: Multiplier, m2: Multiplier, mo: Multiplier) {
        use super::requantize::avx2::{high_mul, requant, store_bytes};
        use std::arch::x86_64::*;
        let pre = |x: __m256i, m: Multiplier| {
            let ls = LEFT_SHIFT + m.shift;
            let x = if ls >= 0 { _mm256_sll_epi32(x, _mm_cvtsi32_si128(ls)) } else { _mm256_sra_epi32(x, _mm_cvtsi32_si128(-ls)) };
            high_mul(x, _mm256_set1_epi64x(m.multiplier as i64))
        };
        let (za, zb) = (_mm256_set1_epi32(self.a.zp), _mm256_set1_epi32(self.b.zp));
        let mult = _mm256_set1_epi64x(mo.multiplier as i64);
        let (zy, lo, hi) = (_mm256_set1_epi32(self.y.zp), _mm256_set1_epi32(self.act.0), _mm256_set1_epi32(self.act.1));
        let n = a.len().min(b.len()).min(o.len()) / 8 * 8;
        for j in (0..n).step_by(8) {
            let x1 = _mm256_sub_epi32(_mm256_cvtepi8_epi32(_mm_loadl_epi64(a.as_ptr().add(j) as *const __m128i)), za);
            let x2 = _mm256_sub_epi32(_mm256_cvtepi8_epi32(_mm_loadl_epi64(b.as_ptr().add(j) as *const __m128i)), zb);
            let s = _mm256_add_epi32(pre(x1, m1), pre(x2, m2));
            let y = requant(s, _mm_cvtsi32_si128(0), -mo.shift, true, mult, zy, lo, hi);
            store_bytes(y, o.as_mut_ptr().add(j) as *mut u8, 8);
        }
    }
}

impl PreparedKernel for Binary {
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
                    #[cfg(target_arch = "x86_64")]
                    if super::requantize::available() && mo.shift <= 0 && m1.multiplier >= 0 && m2.multiplier >= 0 && mo.multiplier >= 0 {
                        // SAFETY: the CPU has AVX-512 F/BW/VL (checked above); the three slices have `vec_end`
                        // elements or more
                        unsafe { self.add_neon_elementwise_avx512(&a[..vec_end], &b[..vec_end], &mut o[..vec_end], *m1, *m2, *mo) };
                    } else if super::packed_gemm::has_avx2() && mo.shift <= 0 && m1.multiplier >= 0 && m2.multiplier >= 0 && mo.multiplier >= 0 {
                        // SAFETY: the CPU has AVX2 (checked above); the three slices have `vec_end` elements or more
                        unsafe { self.add_neon_elementwise_avx2(&a[..vec_end], &b[..vec_end], &mut o[..vec_end], *m1, *m2, *mo) };
                    } else {
                        for ((o, a), b) in o[..vec_end].iter_mut().zip(&a[..vec_end]).zip(&b[..vec_end]) {
                            *o = self.add_neon_elementwise(*a as i32, *b as i32, *m1, *m2, *mo) as i8;
                        }
                    }
                    #[cfg(not(target_arch = "x86_64"))]
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The AVX-512 and AVX2 ADDs (those the CPU runs) against the scalar `add_neon_elementwise` over scale
    /// ratios both ways, zero points and activation ranges, on every pair of int8 values.
    #[test]
    fn vector_add_matches_the_scalar_arithmetic() {
        #[cfg(target_arch = "x86_64")]
        for avx512 in [true, false] {
            if (avx512 && !super::super::requantize::available()) || (!avx512 && !super::super::packed_gemm::has_avx2()) {
                continue;
            }
            let a: Vec<i8> = (0..256 * 256).map(|i| (i / 256) as u8 as i8).collect();
            let b: Vec<i8> = (0..256 * 256).map(|i| (i % 256) as u8 as i8).collect();
            for &(sa, sb, sy, za, zb, zy, act) in &[
                (0.02f32, 0.03f32, 0.05f32, -3, 7, -1, (-128, 127)),
                (0.5, 0.01, 0.3, 0, 0, 0, (-128, 127)),
                (0.001, 0.004, 0.0011, 127, -128, 5, (-20, 100)),
                (0.1, 0.1, 0.01, 10, -10, -128, (-128, 127)),
            ] {
                let twice_max = 2.0 * sa.max(sb) as f64;
                let (m1, m2) = (quantize_multiplier(sa as f64 / twice_max), quantize_multiplier(sb as f64 / twice_max));
                let mo = quantize_multiplier(twice_max / ((1i64 << LEFT_SHIFT) as f64 * sy as f64));
                let k = Binary {
                    kind: Kind::AddSub { sub: false, m1, m2, mo },
                    a: Qp { scale: sa, zp: za },
                    b: Qp { scale: sb, zp: zb },
                    y: Qp { scale: sy, zp: zy },
                    act,
                    dtype: DType::I8,
                };
                let mut got = vec![0i8; a.len()];
                // SAFETY: the CPU has the kernel's features (checked above); equal lengths
                unsafe {
                    if avx512 {
                        k.add_neon_elementwise_avx512(&a, &b, &mut got, m1, m2, mo)
                    } else {
                        k.add_neon_elementwise_avx2(&a, &b, &mut got, m1, m2, mo)
                    }
                };
                for i in 0..a.len() {
                    assert_eq!(got[i] as i32, k.add_neon_elementwise(a[i] as i32, b[i] as i32, m1, m2, mo), "{} + {} scales {sa} {sb} {sy} avx512 {avx512}", a[i], b[i]);
                }
            }
        }
    }
}
