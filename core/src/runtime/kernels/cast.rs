//! Cast between every pair of dtypes (ONNX / numpy `astype` rules, with saturating float-to-int).

use half::{bf16, f16};

use super::broadcast::{data, map};
use super::dispatch::with_any;
use crate::ir::{DType, Element, Tensor};

/// f64 to f32 rounding to odd: a later rounding to a narrower float (f16, bf16) is then correctly rounded.
#[inline]
fn f64_to_f32_odd(x: f64) -> f32 {
    let t = x as f32;
    if !t.is_finite() || t as f64 == x {
        return t;
    }
    let mut b = t.to_bits();
    if (t as f64).abs() > x.abs() {
        b -= 1; // step toward zero: the truncated value
    }
    f32::from_bits(b | 1)
}

/// Conversions used by Cast (ONNX / numpy `astype` rules, with saturating float-to-int).
trait CastElem: Element {
    /// 0: integer or bool (read via `to_i64`), 1: float exactly representable in f32, 2: f64.
    const KIND: u8;
    /// The value as i64 (integers and bools).
    fn to_i64(self) -> i64 {
        0
    }
    /// The value as f32 (f32 and narrower floats).
    fn to_f32(self) -> f32 {
        0.0
    }
    /// From an integer (wrapping into narrower integers; nearest for floats; non-zero for bool).
    fn cast_i64(v: i64) -> Self;
    /// From a float (truncating toward zero and saturating for integers; non-zero, NaN included, for bool).
    fn cast_f32(v: f32) -> Self;
    /// From an f64 (as `cast_f32`, rounding once for floats).
    fn cast_f64(v: f64) -> Self;
}

macro_rules! cast_int {
    ($t:ty) => {
        impl CastElem for $t {
            const KIND: u8 = 0;
            #[inline(always)]
            fn to_i64(self) -> i64 {
                self as i64
            }
            #[inline(always)]
            fn cast_i64(v: i64) -> Self {
                v as $t
            }
            #[inline(always)]
            fn cast_f32(v: f32) -> Self {
                v as $t
            }
            #[inline(always)]
            fn cast_f64(v: f64) -> Self {
                v as $t
            }
        }
    };
}
cast_int!(i8);
cast_int!(u8);
cast_int!(i16);
cast_int!(i32);
cast_int!(i64);

impl CastElem for bool {
    const KIND: u8 = 0;
    #[inline(always)]
    fn to_i64(self) -> i64 {
        self as i64
    }
    #[inline(always)]
    fn cast_i64(v: i64) -> Self {
        v != 0
    }
    #[inline(always)]
    fn cast_f32(v: f32) -> Self {
        v != 0.0
    }
    #[inline(always)]
    fn cast_f64(v: f64) -> Self {
        v != 0.0
    }
}

impl CastElem for f32 {
    const KIND: u8 = 1;
    #[inline(always)]
    fn to_f32(self) -> f32 {
        self
    }
    #[inline(always)]
    fn cast_i64(v: i64) -> Self {
        v as f32
    }
    #[inline(always)]
    fn cast_f32(v: f32) -> Self {
        v
    }
    #[inline(always)]
    fn cast_f64(v: f64) -> Self {
        v as f32
    }
}

impl CastElem for f64 {
    const KIND: u8 = 2;
    #[inline(always)]
    fn cast_i64(v: i64) -> Self {
        v as f64
    }
    #[inline(always)]
    fn cast_f32(v: f32) -> Self {
        v as f64
    }
    #[inline(always)]
    fn cast_f64(v: f64) -> Self {
        v
    }
}

macro_rules! cast_half {
    ($t:ident) => {
        impl CastElem for $t {
            const KIND: u8 = 1;
            #[inline(always)]
            fn to_f32(self) -> f32 {
                $t::to_f32(self)
            }
            #[inline(always)]
            fn cast_i64(v: i64) -> Self {
                $t::from_f32(f64_to_f32_odd(v as f64))
            }
            #[inline(always)]
            fn cast_f32(v: f32) -> Self {
                $t::from_f32(v)
            }
            #[inline(always)]
            fn cast_f64(v: f64) -> Self {
                $t::from_f32(f64_to_f32_odd(v))
            }
        }
    };
}
cast_half!(f16);
cast_half!(bf16);

#[inline(always)]
fn cast_one<S: CastElem, D: CastElem>(s: S) -> D {
    match S::KIND {
        0 => D::cast_i64(s.to_i64()),
        1 => D::cast_f32(s.to_f32()),
        _ => D::cast_f64(s.to_f64()),
    }
}

/// Runs Cast to `to`.
pub(super) fn cast(x: &Tensor, to: DType, out: &mut Tensor) -> Result<(), String> {
    with_any!(x.dtype(), S => {
        let a = data::<S>(x, "input")?;
        with_any!(to, D => {
            let o = out.reset::<D>(&x.shape);
            if S::DTYPE == D::DTYPE {
                // same type: a copy (the view of `a` as D succeeds exactly then)
                if let Some(a) = x.view::<D>() {
                    o.copy_from_slice(a);
                }
            } else {
                map(a, o, cast_one::<S, D>);
            }
        });
        Ok(())
    })
}
