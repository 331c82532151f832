//! Elementwise kernels: binary ops with numpy broadcasting (with an optional fused clamp activation), unary
//! math, Clip with run-time bounds, variadic Sum/Max/Min/Mean, Where and Cast.
//!
//! The dtype is dispatched once per call; the loops are generic over the element type, with the op's
//! arithmetic inlined as a closure. Half-precision types compute in f32 and round once per result.
//! Loops run over contiguous slices: the same-shape and scalar cases are a single zipped loop, general
//! broadcasting walks the output as rows whose inputs are either contiguous or one repeated value (dims are
//! merged first so rows are as long as possible). Large outputs are split over rayon.

use std::ops::{Add, Div, Mul, Neg, Range, Rem, Sub};

use half::{bf16, f16};
use rayon::prelude::*;

use super::util::{broadcast_shapes, broadcast_strides};
use super::input;
use crate::ir::ops::elementwise::{binary_dtype, binary_shape, check_activation, clip_bound_check, unary_dtype, variadic_dtype, where_check};
use crate::ir::{Activation, BinaryOp, DType, Element, Op, Tensor, UnaryOp};

/// Outputs with at least this many elements are computed in parallel.
pub(super) const PAR_MIN: usize = 1 << 16;
/// Elements per parallel task.
pub(super) const CHUNK: usize = 1 << 14;

// ------------------------------------------------------------------------------------------------------
// Dtype dispatch
// ------------------------------------------------------------------------------------------------------

/// Runs `$body` with the type alias `$T` bound to the float element type of `$dt`, else evaluates `$else`.
macro_rules! with_float {
    ($dt:expr, $T:ident => $body:expr, $else:expr) => {
        match $dt {
            $crate::ir::DType::F32 => {
                type $T = f32;
                $body
            }
            $crate::ir::DType::F64 => {
                type $T = f64;
                $body
            }
            $crate::ir::DType::F16 => {
                type $T = half::f16;
                $body
            }
            $crate::ir::DType::BF16 => {
                type $T = half::bf16;
                $body
            }
            _ => $else,
        }
    };
}
pub(super) use with_float;

/// Runs `$body` with `$T` bound to the integer element type of `$dt`, else evaluates `$else`.
macro_rules! with_int {
    ($dt:expr, $T:ident => $body:expr, $else:expr) => {
        match $dt {
            $crate::ir::DType::I8 => {
                type $T = i8;
                $body
            }
            $crate::ir::DType::U8 => {
                type $T = u8;
                $body
            }
            $crate::ir::DType::I16 => {
                type $T = i16;
                $body
            }
            $crate::ir::DType::I32 => {
                type $T = i32;
                $body
            }
            $crate::ir::DType::I64 => {
                type $T = i64;
                $body
            }
            _ => $else,
        }
    };
}

/// Runs `$body` with `$T` bound to the element type of `$dt` (any dtype).
macro_rules! with_any {
    ($dt:expr, $T:ident => $body:expr) => {
        match $dt {
            $crate::ir::DType::Bool => {
                type $T = bool;
                $body
            }
            other => with_float!(other, $T => $body, with_int!(other, $T => $body, unreachable!("every dtype is bool, float or int"))),
        }
    };
}

// ------------------------------------------------------------------------------------------------------
// Numeric traits
// ------------------------------------------------------------------------------------------------------

/// A float type kernels compute in (f32 or f64).
pub(super) trait Real:
    Copy
    + Send
    + Sync
    + PartialOrd
    + Add<Output = Self>
    + Sub<Output = Self>
    + Mul<Output = Self>
    + Div<Output = Self>
    + Rem<Output = Self>
    + Neg<Output = Self>
    + 'static
{
    /// 0
    const ZERO: Self;
    /// 1
    const ONE: Self;
    /// +inf
    const INFINITY: Self;
    /// -inf
    const NEG_INFINITY: Self;
    /// Conversion from f64 (rounding).
    fn from_f64(x: f64) -> Self;
    /// Conversion to f64 (exact).
    fn to_f64(self) -> f64;
    /// e^x
    fn exp(self) -> Self;
    /// e^x - 1
    fn exp_m1(self) -> Self;
    /// ln x
    fn ln(self) -> Self;
    /// ln(1 + x)
    fn ln_1p(self) -> Self;
    /// square root
    fn sqrt(self) -> Self;
    /// x^y
    fn powf(self, y: Self) -> Self;
    /// |x|
    fn abs(self) -> Self;
    /// round down
    fn floor(self) -> Self;
    /// round up
    fn ceil(self) -> Self;
    /// round half to even
    fn round_even(self) -> Self;
    /// NaN test
    fn is_nan(self) -> bool;
    /// infinity test
    fn is_infinite(self) -> bool;
    /// magnitude of `self` with the sign of `s`
    fn copysign(self, s: Self) -> Self;
    /// `self` with the low half of its mantissa bits cleared (for extra-precise products in erf).
    fn split_hi(self) -> Self;
    /// sine
    fn sin(self) -> Self;
    /// cosine
    fn cos(self) -> Self;
    /// tangent
    fn tan(self) -> Self;
    /// arc sine
    fn asin(self) -> Self;
    /// arc cosine
    fn acos(self) -> Self;
    /// arc tangent
    fn atan(self) -> Self;
    /// hyperbolic sine
    fn sinh(self) -> Self;
    /// hyperbolic cosine
    fn cosh(self) -> Self;
    /// hyperbolic tangent
    fn tanh(self) -> Self;
    /// inverse hyperbolic sine
    fn asinh(self) -> Self;
    /// inverse hyperbolic cosine
    fn acosh(self) -> Self;
    /// inverse hyperbolic tangent
    fn atanh(self) -> Self;
    /// The error function (see [`erf`]).
    #[inline]
    fn erf(self) -> Self {
        erf(self)
    }
}

macro_rules! real_impl {
    ($t:ident, $mask:expr, $exp:path, $tanh:path) => {
        impl Real for $t {
            const ZERO: Self = 0.0;
            const ONE: Self = 1.0;
            const INFINITY: Self = $t::INFINITY;
            const NEG_INFINITY: Self = $t::NEG_INFINITY;
            #[inline(always)]
            fn from_f64(x: f64) -> Self {
                x as $t
            }
            #[inline(always)]
            fn to_f64(self) -> f64 {
                self as f64
            }
            #[inline(always)]
            fn exp(self) -> Self {
                $exp(self)
            }
            #[inline(always)]
            fn exp_m1(self) -> Self {
                $t::exp_m1(self)
            }
            #[inline(always)]
            fn ln(self) -> Self {
                $t::ln(self)
            }
            #[inline(always)]
            fn ln_1p(self) -> Self {
                $t::ln_1p(self)
            }
            #[inline(always)]
            fn sqrt(self) -> Self {
                $t::sqrt(self)
            }
            #[inline(always)]
            fn powf(self, y: Self) -> Self {
                $t::powf(self, y)
            }
            #[inline(always)]
            fn abs(self) -> Self {
                $t::abs(self)
            }
            #[inline(always)]
            fn floor(self) -> Self {
                $t::floor(self)
            }
            #[inline(always)]
            fn ceil(self) -> Self {
                $t::ceil(self)
            }
            #[inline(always)]
            fn round_even(self) -> Self {
                $t::round_ties_even(self)
            }
            #[inline(always)]
            fn is_nan(self) -> bool {
                $t::is_nan(self)
            }
            #[inline(always)]
            fn is_infinite(self) -> bool {
                $t::is_infinite(self)
            }
            #[inline(always)]
            fn copysign(self, s: Self) -> Self {
                $t::copysign(self, s)
            }
            #[inline(always)]
            fn split_hi(self) -> Self {
                $t::from_bits(self.to_bits() & $mask)
            }
            #[inline(always)]
            fn sin(self) -> Self {
                $t::sin(self)
            }
            #[inline(always)]
            fn cos(self) -> Self {
                $t::cos(self)
            }
            #[inline(always)]
            fn tan(self) -> Self {
                $t::tan(self)
            }
            #[inline(always)]
            fn asin(self) -> Self {
                $t::asin(self)
            }
            #[inline(always)]
            fn acos(self) -> Self {
                $t::acos(self)
            }
            #[inline(always)]
            fn atan(self) -> Self {
                $t::atan(self)
            }
            #[inline(always)]
            fn sinh(self) -> Self {
                $t::sinh(self)
            }
            #[inline(always)]
            fn cosh(self) -> Self {
                $t::cosh(self)
            }
            #[inline(always)]
            fn tanh(self) -> Self {
                $tanh(self)
            }
            #[inline(always)]
            fn asinh(self) -> Self {
                $t::asinh(self)
            }
            #[inline(always)]
            fn acosh(self) -> Self {
                $t::acosh(self)
            }
            #[inline(always)]
            fn atanh(self) -> Self {
                $t::atanh(self)
            }
        }
    };
}
real_impl!(f32, 0xffff_f000, exp_f32, tanh_f32);
real_impl!(f64, 0xffff_ffff_0000_0000, f64::exp, f64::tanh);

/// e^x in f32 without branches, so that loops calling it vectorise (libm's `expf` does not).
///
/// x = n ln2 + r with |r| <= ln2/2 (Cody-Waite split of ln2), e^r from a degree-7 minimax polynomial
/// (Cephes `expf` coefficients), then scaled by 2^n in two steps so that overflow to infinity and gradual
/// underflow come out right. Relative error below 2 ulp; NaN stays NaN.
#[inline(always)]
#[allow(clippy::excessive_precision)]
pub(super) fn exp_f32(x: f32) -> f32 {
    const LOG2E: f32 = std::f32::consts::LOG2_E;
    const LN2_HI: f32 = 0.693_359_4;
    const LN2_LO: f32 = -2.121_944_4e-4;
    const ROUND: f32 = 12_582_912.0; // 1.5 * 2^23: adding it rounds to an integer
    // beyond these bounds e^x is inf / 0 in f32; clamping keeps 2^n representable in two factors
    let x = x.clamp(-104.0, 89.0);
    let n = (x * LOG2E + ROUND) - ROUND;
    let r = x - n * LN2_HI - n * LN2_LO;
    let p = 1.987_569_1e-4;
    let p = p * r + 1.398_199_9e-3;
    let p = p * r + 8.333_452e-3;
    let p = p * r + 4.166_579_6e-2;
    let p = p * r + 1.666_666_5e-1;
    let p = p * r + 5.000_000_1e-1;
    let y = p * r * r + r + 1.0;
    let n = n as i32;
    let n1 = n >> 1;
    let n2 = n - n1;
    y * f32::from_bits(((n1 + 127) as u32) << 23) * f32::from_bits(((n2 + 127) as u32) << 23)
}

/// tanh in f32 without branches (both forms are computed and one selected, so loops vectorise).
///
/// |x| < 0.625: x + x^3 P(x^2) (Cephes `tanhf` coefficients); otherwise 1 - 2 / (e^{2|x|} + 1) with the
/// sign of x. Relative error of a few ulp.
#[inline(always)]
#[allow(clippy::excessive_precision)]
pub(super) fn tanh_f32(x: f32) -> f32 {
    let z = x * x;
    let p = -5.704_988_7e-3;
    let p = p * z + 2.063_908_9e-2;
    let p = p * z - 5.373_971_6e-2;
    let p = p * z + 1.333_144_2e-1;
    let p = p * z - 3.333_328_2e-1;
    let small = p * z * x + x;
    let a = x.abs();
    let large = (1.0 - 2.0 / (exp_f32(a + a) + 1.0)).copysign(x);
    if a < 0.625 {
        small
    } else {
        large
    }
}

/// An element type with its compute type: floats compute in [`Real`] (f16/bf16 in f32), integers in
/// themselves.
pub(super) trait Num: Element {
    /// The type arithmetic happens in.
    type C: Copy + PartialOrd + Send + Sync;
    /// Widens to the compute type.
    fn load(self) -> Self::C;
    /// Narrows from the compute type (rounding to nearest even for half types).
    fn store(c: Self::C) -> Self;
    /// A clamp bound in the compute type (saturating for integers; infinities become the type's limits).
    fn bound(x: f32) -> Self::C;
}

/// Float element types (f32, f64, f16, bf16).
pub(super) trait Float: Num<C: Real> {}

macro_rules! float_num {
    ($t:ty, $c:ty, $load:expr, $store:expr) => {
        impl Num for $t {
            type C = $c;
            #[inline(always)]
            fn load(self) -> $c {
                let f: fn($t) -> $c = $load;
                f(self)
            }
            #[inline(always)]
            fn store(c: $c) -> $t {
                let f: fn($c) -> $t = $store;
                f(c)
            }
            #[inline(always)]
            fn bound(x: f32) -> $c {
                x as $c
            }
        }
        impl Float for $t {}
    };
}
float_num!(f32, f32, |x| x, |x| x);
float_num!(f64, f64, |x| x, |x| x);
float_num!(f16, f32, |x| x.to_f32(), f16::from_f32);
float_num!(bf16, f32, |x| x.to_f32(), bf16::from_f32);

/// Integer element types, with numpy's wrapping arithmetic.
pub(super) trait Int: Num<C = Self> + Ord {
    /// Smallest value.
    const MIN: Self;
    /// Largest value.
    const MAX: Self;
    /// 0
    const ZERO: Self;
    /// wrapping +
    fn wadd(self, o: Self) -> Self;
    /// wrapping -
    fn wsub(self, o: Self) -> Self;
    /// wrapping *
    fn wmul(self, o: Self) -> Self;
    /// Division truncating toward zero; 0 when dividing by 0.
    fn div_t(self, o: Self) -> Self;
    /// Remainder with the sign of the divisor (numpy `mod`); 0 when dividing by 0.
    fn rem_floor(self, o: Self) -> Self;
    /// Remainder with the sign of the dividend (C `fmod`); 0 when dividing by 0.
    fn rem_t(self, o: Self) -> Self;
    /// bitwise and
    fn band(self, o: Self) -> Self;
    /// bitwise or
    fn bor(self, o: Self) -> Self;
    /// bitwise xor
    fn bxor(self, o: Self) -> Self;
    /// bitwise not
    fn bnot(self) -> Self;
    /// wrapping negation
    fn wneg(self) -> Self;
    /// wrapping absolute value
    fn wabs(self) -> Self;
    /// -1, 0 or 1
    fn sign(self) -> Self;
    /// Integer power with wrapping; negative exponents give the truncated result (0 unless |self| is 1).
    fn pow_i(self, e: i64) -> Self;
    /// Widening to i64 (wrapping for nothing: all our integer types fit).
    fn as_i64(self) -> i64;
}

macro_rules! int_impl {
    ($t:ident) => {
        impl Num for $t {
            type C = $t;
            #[inline(always)]
            fn load(self) -> $t {
                self
            }
            #[inline(always)]
            fn store(c: $t) -> $t {
                c
            }
            #[inline(always)]
            fn bound(x: f32) -> $t {
                x as $t
            }
        }
        impl Int for $t {
            const MIN: Self = $t::MIN;
            const MAX: Self = $t::MAX;
            const ZERO: Self = 0;
            #[inline(always)]
            fn wadd(self, o: Self) -> Self {
                self.wrapping_add(o)
            }
            #[inline(always)]
            fn wsub(self, o: Self) -> Self {
                self.wrapping_sub(o)
            }
            #[inline(always)]
            fn wmul(self, o: Self) -> Self {
                self.wrapping_mul(o)
            }
            #[inline(always)]
            fn div_t(self, o: Self) -> Self {
                if o == 0 {
                    0
                } else {
                    self.wrapping_div(o)
                }
            }
            #[inline(always)]
            #[allow(unused_comparisons)]
            fn rem_floor(self, o: Self) -> Self {
                if o == 0 {
                    return 0;
                }
                let r = self.wrapping_rem(o);
                if r != 0 && ((r < 0) != (o < 0)) {
                    r.wrapping_add(o)
                } else {
                    r
                }
            }
            #[inline(always)]
            fn rem_t(self, o: Self) -> Self {
                if o == 0 {
                    0
                } else {
                    self.wrapping_rem(o)
                }
            }
            #[inline(always)]
            fn band(self, o: Self) -> Self {
                self & o
            }
            #[inline(always)]
            fn bor(self, o: Self) -> Self {
                self | o
            }
            #[inline(always)]
            fn bxor(self, o: Self) -> Self {
                self ^ o
            }
            #[inline(always)]
            fn bnot(self) -> Self {
                !self
            }
            #[inline(always)]
            fn wneg(self) -> Self {
                self.wrapping_neg()
            }
            #[inline(always)]
            #[allow(unused_comparisons)]
            fn wabs(self) -> Self {
                if self < 0 {
                    self.wrapping_neg()
                } else {
                    self
                }
            }
            #[inline(always)]
            #[allow(unused_comparisons)]
            fn sign(self) -> Self {
                if self > 0 {
                    1
                } else if self < 0 {
                    (0 as $t).wrapping_sub(1)
                } else {
                    0
                }
            }
            #[allow(unused_comparisons)]
            fn pow_i(self, e: i64) -> Self {
                if e < 0 {
                    let minus_one = (0 as $t).wrapping_sub(1);
                    return if self == 1 {
                        1
                    } else if $t::MIN < 0 && self == minus_one {
                        if e % 2 == 0 {
                            1
                        } else {
                            minus_one
                        }
                    } else {
                        0
                    };
                }
                let (mut base, mut e, mut acc) = (self, e as u64, 1 as $t);
                while e > 0 {
                    if e & 1 == 1 {
                        acc = acc.wrapping_mul(base);
                    }
                    base = base.wrapping_mul(base);
                    e >>= 1;
                }
                acc
            }
            #[inline(always)]
            fn as_i64(self) -> i64 {
                self as i64
            }
        }
    };
}
int_impl!(i8);
int_impl!(u8);
int_impl!(i16);
int_impl!(i32);
int_impl!(i64);

/// `min(max(v, lo), hi)` that keeps NaN (numpy `clip`); gives `hi` when `lo > hi`.
#[inline(always)]
pub(super) fn clamp<C: PartialOrd>(v: C, lo: C, hi: C) -> C {
    let v = if v < lo { lo } else { v };
    if v > hi {
        hi
    } else {
        v
    }
}

/// The error function, accurate to about one ulp in f32 and f64.
///
/// Rational approximations on [0, 0.84375), [0.84375, 1.25), and of erfc on [1.25, 1/0.35) and
/// [1/0.35, 6) (the method and coefficients of Sun's fdlibm `s_erf.c`); |x| ≥ 6 gives ±1.
#[allow(clippy::excessive_precision)]
pub(super) fn erf<C: Real>(x: C) -> C {
    let k = C::from_f64;
    if x.is_nan() {
        return x;
    }
    let ax = x.abs();
    if ax < k(0.84375) {
        if ax < k(3.725290298461914e-9) {
            // |x| < 2^-28: erf(x) = 2x/sqrt(pi) to within rounding
            return x + k(1.28379167095512586316e-01) * x;
        }
        let z = x * x;
        let r = k(1.28379167095512558561e-01)
            + z * (k(-3.25042107247001499370e-01)
                + z * (k(-2.84817495755985104766e-02) + z * (k(-5.77027029648944159157e-03) + z * k(-2.37630166566501626084e-05))));
        let s = C::ONE
            + z * (k(3.97917223959155352819e-01)
                + z * (k(6.50222499887672944485e-02)
                    + z * (k(5.08130628187576562776e-03) + z * (k(1.32494738004321644526e-04) + z * k(-3.96022827877536812320e-06)))));
        return x + x * (r / s);
    }
    if ax < k(1.25) {
        let s = ax - C::ONE;
        let p = k(-2.36211856075265944077e-03)
            + s * (k(4.14856118683748331666e-01)
                + s * (k(-3.72207876035701323847e-01)
                    + s * (k(3.18346619901161753674e-01)
                        + s * (k(-1.10894694282396677476e-01) + s * (k(3.54783043256182359371e-02) + s * k(-2.16637559486879084300e-03))))));
        let q = C::ONE
            + s * (k(1.06420880400844228286e-01)
                + s * (k(5.40397917702171048937e-01)
                    + s * (k(7.18286544141962662868e-02)
                        + s * (k(1.26171219808761642112e-01) + s * (k(1.36370839120290507362e-02) + s * k(1.19844998467991074170e-02))))));
        // erx = erf(1) rounded to 24 bits
        return (k(8.45062911510467529297e-01) + p / q).copysign(x);
    }
    if ax >= k(6.0) {
        return C::ONE.copysign(x);
    }
    let s = C::ONE / (ax * ax);
    let (r, q) = if ax < k(2.857142857142857) {
        let r = k(-9.86494403484714822705e-03)
            + s * (k(-6.93858572707181764372e-01)
                + s * (k(-1.05586262253232909814e+01)
                    + s * (k(-6.23753324503260060396e+01)
                        + s * (k(-1.62396669462573470355e+02)
                            + s * (k(-1.84605092906711035994e+02) + s * (k(-8.12874355063065934246e+01) + s * k(-9.81432934416914548592e+00)))))));
        let q = C::ONE
            + s * (k(1.96512716674392571292e+01)
                + s * (k(1.37657754143519042600e+02)
                    + s * (k(4.34565877475229228821e+02)
                        + s * (k(6.45387271733267880336e+02)
                            + s * (k(4.29008140027567833386e+02)
                                + s * (k(1.08635005541779435134e+02) + s * (k(6.57024977031928170135e+00) + s * k(-6.04244152148580987438e-02))))))));
        (r, q)
    } else {
        let r = k(-9.86494292470009928597e-03)
            + s * (k(-7.99283237680523006574e-01)
                + s * (k(-1.77579549177547519889e+01)
                    + s * (k(-1.60636384855821916062e+02)
                        + s * (k(-6.37566443368389627722e+02) + s * (k(-1.02509513161107724954e+03) + s * k(-4.83519191608651397019e+02))))));
        let q = C::ONE
            + s * (k(3.03380607434824582924e+01)
                + s * (k(3.25792512996573918826e+02)
                    + s * (k(1.53672958608443695994e+03)
                        + s * (k(3.19985821950859553908e+03)
                            + s * (k(2.55305040643316442583e+03) + s * (k(4.74528541206955367215e+02) + s * k(-2.24409524465858183362e+01)))))));
        (r, q)
    };
    // erfc(x) = exp(-x^2 - 0.5625 + r/q) / x, with -x^2 split as -z^2 + (z - x)(z + x) for accuracy
    let z = ax.split_hi();
    let e = (-z * z - k(0.5625)).exp() * ((z - ax) * (z + ax) + r / q).exp();
    (C::ONE - e / ax).copysign(x)
}

// ------------------------------------------------------------------------------------------------------
// Broadcast iteration
// ------------------------------------------------------------------------------------------------------

/// The output of a broadcast elementwise op seen as `rows` contiguous rows of `inner` elements, in which
/// each of the `K` inputs is either contiguous (row stride 1) or a single repeated value (stride 0).
///
/// Adjacent dims are merged when every input treats them alike, so rows are as long as possible.
#[derive(Debug)]
pub(super) struct RowPlan<const K: usize> {
    outer: Vec<usize>,
    outer_strides: [Vec<usize>; K],
    /// Length of each row.
    pub inner: usize,
    /// Per input, its element step along a row (0 or 1).
    pub inner_strides: [usize; K],
}

impl<const K: usize> RowPlan<K> {
    /// Plans the iteration; every input shape must broadcast to `out` (checked by the caller).
    pub fn new(out: &[usize], inputs: [&[usize]; K]) -> RowPlan<K> {
        let st: [Vec<usize>; K] = std::array::from_fn(|k| broadcast_strides(inputs[k], out));
        let mut dims: Vec<(usize, [usize; K])> = Vec::with_capacity(out.len());
        for (d, &n) in out.iter().enumerate() {
            if n == 1 {
                continue;
            }
            let s: [usize; K] = std::array::from_fn(|k| st[k][d]);
            if let Some(last) = dims.last_mut() {
                if (0..K).all(|k| last.1[k] == s[k] * n) {
                    last.0 *= n;
                    last.1 = s;
                    continue;
                }
            }
            dims.push((n, s));
        }
        let (inner, inner_strides) = dims.pop().unwrap_or((1, [0; K]));
        let outer = dims.iter().map(|d| d.0).collect();
        let outer_strides = std::array::from_fn(|k| dims.iter().map(|d| d.1[k]).collect());
        RowPlan { outer, outer_strides, inner, inner_strides }
    }

    /// Number of rows.
    pub fn rows(&self) -> usize {
        self.outer.iter().product()
    }

    /// Calls `f(row, offsets)` for each row in `rows`, where `offsets[k]` is where input `k`'s data for the
    /// row starts.
    pub fn for_rows(&self, rows: Range<usize>, mut f: impl FnMut(usize, [usize; K])) {
        if rows.is_empty() {
            return;
        }
        let r = self.outer.len();
        let mut idx = vec![0usize; r];
        let mut offs = [0usize; K];
        let mut rem = rows.start;
        for d in (0..r).rev() {
            idx[d] = rem % self.outer[d];
            rem /= self.outer[d];
            for (o, st) in offs.iter_mut().zip(&self.outer_strides) {
                *o += idx[d] * st[d];
            }
        }
        for row in rows {
            f(row, offs);
            let mut d = r;
            while d > 0 {
                d -= 1;
                idx[d] += 1;
                for (o, st) in offs.iter_mut().zip(&self.outer_strides) {
                    *o += st[d];
                }
                if idx[d] < self.outer[d] {
                    break;
                }
                for (o, st) in offs.iter_mut().zip(&self.outer_strides) {
                    *o -= st[d] * self.outer[d];
                }
                idx[d] = 0;
            }
        }
    }
}

/// Calls `f(i, chunk)` for the `chunk`-sized pieces of `o` in parallel.
///
/// `f` is a trait object so that the rayon machinery is compiled once per element type rather than once
/// per op; the dynamic call happens once per chunk.
pub(super) fn par_chunks<O: Send>(o: &mut [O], chunk: usize, f: &(dyn Fn(usize, &mut [O]) + Sync)) {
    o.par_chunks_mut(chunk.max(1)).enumerate().for_each(|(i, oc)| f(i, oc));
}

/// Splits `o` (rows of `inner` elements) over rayon when large and calls `run(first_row, chunk)`.
fn par_rows<O: Send>(o: &mut [O], inner: usize, rows: usize, run: &(dyn Fn(usize, &mut [O]) + Sync)) {
    if o.len() >= PAR_MIN && rows > 1 {
        let per = (CHUNK / inner.max(1)).max(1);
        par_chunks(o, per * inner, &|i, oc| run(i * per, oc));
    } else {
        run(0, o)
    }
}

/// Element step of an input of `len` elements over an output of `n`: 1 when it has one element per output
/// element, 0 when it is a single value, `None` when it broadcasts in a more general way.
#[inline]
fn flat_step(len: usize, n: usize) -> Option<usize> {
    if len == n {
        Some(1)
    } else if len == 1 {
        Some(0)
    } else {
        None
    }
}

/// One row of a binary op; `sa`/`sb` are 1 (contiguous) or 0 (repeat element 0).
#[inline(always)]
fn row2<A: Copy, B: Copy, O>(a: &[A], sa: usize, b: &[B], sb: usize, o: &mut [O], f: &impl Fn(A, B) -> O) {
    let n = o.len();
    match (sa, sb) {
        (1, 1) => {
            for ((o, &x), &y) in o.iter_mut().zip(&a[..n]).zip(&b[..n]) {
                *o = f(x, y);
            }
        }
        (1, _) => {
            let y = b[0];
            for (o, &x) in o.iter_mut().zip(&a[..n]) {
                *o = f(x, y);
            }
        }
        (_, 1) => {
            let x = a[0];
            for (o, &y) in o.iter_mut().zip(&b[..n]) {
                *o = f(x, y);
            }
        }
        _ => {
            let (x, y) = (a[0], b[0]);
            for o in o.iter_mut() {
                *o = f(x, y);
            }
        }
    }
}

/// `o = f(a, b)` with `a` and `b` broadcast to `osh` (their shapes must broadcast to it).
pub(super) fn bin<A, B, O, F>(a: &[A], ash: &[usize], b: &[B], bsh: &[usize], o: &mut [O], osh: &[usize], f: F)
where
    A: Copy + Sync,
    B: Copy + Sync,
    O: Send,
    F: Fn(A, B) -> O + Sync,
{
    let n = o.len();
    if n == 0 {
        return;
    }
    if let (Some(sa), Some(sb)) = (flat_step(a.len(), n), flat_step(b.len(), n)) {
        if n >= PAR_MIN {
            par_chunks(o, CHUNK, &|i, oc| {
                let s = i * CHUNK;
                row2(&a[s * sa..], sa, &b[s * sb..], sb, oc, &f)
            });
        } else {
            row2(a, sa, b, sb, o, &f);
        }
        return;
    }
    let plan = RowPlan::new(osh, [ash, bsh]);
    let inner = plan.inner;
    let [ia, ib] = plan.inner_strides;
    par_rows(o, inner, plan.rows(), &|r0, oc| {
        plan.for_rows(r0..r0 + oc.len() / inner, |r, [pa, pb]| {
            let s = (r - r0) * inner;
            row2(&a[pa..], ia, &b[pb..], ib, &mut oc[s..s + inner], &f)
        })
    });
}

/// `o = f(o, b)` with `b` broadcast to `o`'s shape `osh`.
fn acc<B, O, F>(o: &mut [O], osh: &[usize], b: &[B], bsh: &[usize], f: F)
where
    B: Copy + Sync,
    O: Copy + Send,
    F: Fn(O, B) -> O + Sync,
{
    let n = o.len();
    if n == 0 {
        return;
    }
    let row = |o: &mut [O], b: &[B], sb: usize| {
        if sb == 1 {
            let m = o.len();
            for (o, &y) in o.iter_mut().zip(&b[..m]) {
                *o = f(*o, y);
            }
        } else {
            let y = b[0];
            for o in o.iter_mut() {
                *o = f(*o, y);
            }
        }
    };
    if let Some(sb) = flat_step(b.len(), n) {
        if n >= PAR_MIN {
            par_chunks(o, CHUNK, &|i, oc| row(oc, &b[i * CHUNK * sb..], sb));
        } else {
            row(o, b, sb);
        }
        return;
    }
    let plan = RowPlan::new(osh, [bsh]);
    let inner = plan.inner;
    let [ib] = plan.inner_strides;
    par_rows(o, inner, plan.rows(), &|r0, oc| {
        plan.for_rows(r0..r0 + oc.len() / inner, |r, [pb]| {
            let s = (r - r0) * inner;
            row(&mut oc[s..s + inner], &b[pb..], ib)
        })
    });
}

/// `o = f(a, b, c)` with the three inputs broadcast to `osh`.
#[allow(clippy::too_many_arguments)]
fn tern<A, B, C, O, F>(a: &[A], ash: &[usize], b: &[B], bsh: &[usize], c: &[C], csh: &[usize], o: &mut [O], osh: &[usize], f: F)
where
    A: Copy + Sync,
    B: Copy + Sync,
    C: Copy + Sync,
    O: Send,
    F: Fn(A, B, C) -> O + Sync,
{
    let n = o.len();
    if n == 0 {
        return;
    }
    let row = |a: &[A], sa: usize, b: &[B], sb: usize, c: &[C], sc: usize, o: &mut [O]| {
        let m = o.len();
        if sa == 1 && sb == 1 && sc == 1 {
            for (((o, &x), &y), &z) in o.iter_mut().zip(&a[..m]).zip(&b[..m]).zip(&c[..m]) {
                *o = f(x, y, z);
            }
        } else {
            for (i, o) in o.iter_mut().enumerate() {
                *o = f(a[i * sa], b[i * sb], c[i * sc]);
            }
        }
    };
    if let (Some(sa), Some(sb), Some(sc)) = (flat_step(a.len(), n), flat_step(b.len(), n), flat_step(c.len(), n)) {
        if n >= PAR_MIN {
            par_chunks(o, CHUNK, &|i, oc| {
                let s = i * CHUNK;
                row(&a[s * sa..], sa, &b[s * sb..], sb, &c[s * sc..], sc, oc)
            });
        } else {
            row(a, sa, b, sb, c, sc, o);
        }
        return;
    }
    let plan = RowPlan::new(osh, [ash, bsh, csh]);
    let inner = plan.inner;
    let [ia, ib, ic] = plan.inner_strides;
    par_rows(o, inner, plan.rows(), &|r0, oc| {
        plan.for_rows(r0..r0 + oc.len() / inner, |r, [pa, pb, pc]| {
            let s = (r - r0) * inner;
            row(&a[pa..], ia, &b[pb..], ib, &c[pc..], ic, &mut oc[s..s + inner])
        })
    });
}

/// `o[i] = f(a[i])`, in parallel when large.
pub(super) fn map<A: Copy + Sync, O: Send>(a: &[A], o: &mut [O], f: impl Fn(A) -> O + Sync) {
    let row = |a: &[A], o: &mut [O]| {
        for (o, &x) in o.iter_mut().zip(a) {
            *o = f(x);
        }
    };
    if o.len() >= PAR_MIN {
        par_chunks(o, CHUNK, &|i, oc| row(&a[i * CHUNK..], oc));
    } else {
        row(a, o);
    }
}

/// `o[i] = f(o[i])`, in parallel when large.
fn map_inplace<O: Copy + Send>(o: &mut [O], f: impl Fn(O) -> O + Sync) {
    let row = |o: &mut [O]| {
        for v in o.iter_mut() {
            *v = f(*v);
        }
    };
    if o.len() >= PAR_MIN {
        par_chunks(o, CHUNK, &|_, oc| row(oc));
    } else {
        row(o);
    }
}

/// The elements of `t` as `T`, checking the dtype and that the data matches the shape.
pub(super) fn data<'a, T: Element>(t: &'a Tensor, what: &str) -> Result<&'a [T], String> {
    let v = t.view::<T>().ok_or_else(|| format!("{what} is {}, expected {}", t.dtype(), T::DTYPE))?;
    if v.len() != t.shape.iter().product::<usize>() {
        return Err(format!("{what} holds {} elements but its shape {:?} says otherwise", v.len(), t.shape));
    }
    Ok(v)
}

// ------------------------------------------------------------------------------------------------------
// Eval
// ------------------------------------------------------------------------------------------------------

/// Receives the arithmetic of a binary op as a closure over compute values.
trait Visit<C> {
    fn visit<F: Fn(C, C) -> C + Copy + Send + Sync>(self, f: F);
}

/// `o = f(a, b)` with broadcasting.
struct BinRun<'a, T> {
    a: &'a [T],
    ash: &'a [usize],
    b: &'a [T],
    bsh: &'a [usize],
    o: &'a mut [T],
    osh: &'a [usize],
}

impl<T: Num> Visit<T::C> for BinRun<'_, T> {
    fn visit<F: Fn(T::C, T::C) -> T::C + Copy + Send + Sync>(self, f: F) {
        bin(self.a, self.ash, self.b, self.bsh, self.o, self.osh, move |p: T, q: T| T::store(f(p.load(), q.load())))
    }
}

/// `o = clamp(f(a, b), lo, hi)` on f32 with broadcasting: a fused activation in the same pass. (Other
/// dtypes clamp in a second pass, which keeps the number of compiled loop variants down.)
struct ClampRun<'a> {
    run: BinRun<'a, f32>,
    lo: f32,
    hi: f32,
}

impl Visit<f32> for ClampRun<'_> {
    fn visit<F: Fn(f32, f32) -> f32 + Copy + Send + Sync>(self, f: F) {
        let (lo, hi, r) = (self.lo, self.hi, self.run);
        bin(r.a, r.ash, r.b, r.bsh, r.o, r.osh, move |p: f32, q: f32| clamp(f(p, q), lo, hi))
    }
}

/// Clamps `out` (already computed) to `bounds`, for fused activations on dtypes other than f32.
fn post_clamp(out: &mut Tensor, bounds: Option<(f32, f32)>) -> Result<(), String> {
    let Some((lo, hi)) = bounds else { return Ok(()) };
    fn run<T: Num>(t: &mut Tensor, lo: f32, hi: f32) {
        let (lo, hi) = (T::bound(lo), T::bound(hi));
        if let Some(o) = t.view_mut::<T>() {
            map_inplace(o, move |v: T| T::store(clamp(v.load(), lo, hi)));
        }
    }
    let dt = out.dtype();
    with_float!(dt, T => run::<T>(out, lo, hi), with_int!(dt, T => run::<T>(out, lo, hi), return Err(format!("cannot clamp {dt} values"))));
    Ok(())
}

/// `o = f(o, b)` with `b` broadcast to `o`.
struct AccRun<'a, T> {
    o: &'a mut [T],
    osh: &'a [usize],
    b: &'a [T],
    bsh: &'a [usize],
}

impl<T: Num> Visit<T::C> for AccRun<'_, T> {
    fn visit<F: Fn(T::C, T::C) -> T::C + Copy + Send + Sync>(self, f: F) {
        acc(self.o, self.osh, self.b, self.bsh, move |p: T, q: T| T::store(f(p.load(), q.load())))
    }
}

/// numpy `mod` on floats: the remainder takes the divisor's sign (npy_divmod).
#[inline(always)]
fn py_mod<C: Real>(a: C, b: C) -> C {
    let m = a % b;
    if b == C::ZERO {
        return m;
    }
    if m != C::ZERO {
        if (b < C::ZERO) != (m < C::ZERO) {
            m + b
        } else {
            m
        }
    } else {
        C::ZERO.copysign(b)
    }
}

/// Hands the float arithmetic of `op` to `v`.
fn float_op<C: Real, V: Visit<C>>(op: BinaryOp, v: V) -> Result<(), String> {
    use BinaryOp::*;
    match op {
        Add => v.visit(|p: C, q: C| p + q),
        Sub => v.visit(|p: C, q: C| p - q),
        Mul => v.visit(|p: C, q: C| p * q),
        Div => v.visit(|p: C, q: C| p / q),
        Max => v.visit(|p: C, q: C| if p >= q || p.is_nan() { p } else { q }),
        Min => v.visit(|p: C, q: C| if p <= q || p.is_nan() { p } else { q }),
        Mod => v.visit(py_mod::<C>),
        Fmod => v.visit(|p: C, q: C| p % q),
        Pow => v.visit(|p: C, q: C| p.powf(q)),
        PRelu => v.visit(|x: C, s: C| if x > C::ZERO { x } else { x * s }),
        _ => return Err(format!("{op:?} is not defined for floats")),
    }
    Ok(())
}

/// Hands the integer arithmetic of `op` to `v`.
fn int_op<I: Int, V: Visit<I>>(op: BinaryOp, v: V) -> Result<(), String> {
    use BinaryOp::*;
    match op {
        Add => v.visit(|p: I, q: I| p.wadd(q)),
        Sub => v.visit(|p: I, q: I| p.wsub(q)),
        Mul => v.visit(|p: I, q: I| p.wmul(q)),
        Div => v.visit(|p: I, q: I| p.div_t(q)),
        Max => v.visit(|p: I, q: I| p.max(q)),
        Min => v.visit(|p: I, q: I| p.min(q)),
        Mod => v.visit(|p: I, q: I| p.rem_floor(q)),
        Fmod => v.visit(|p: I, q: I| p.rem_t(q)),
        BitAnd => v.visit(|p: I, q: I| p.band(q)),
        BitOr => v.visit(|p: I, q: I| p.bor(q)),
        BitXor => v.visit(|p: I, q: I| p.bxor(q)),
        Pow => v.visit(|p: I, q: I| p.pow_i(q.as_i64())),
        PRelu => v.visit(|x: I, s: I| if x > I::ZERO { x } else { x.wmul(s) }),
        _ => return Err(format!("{op:?} is not defined for integers")),
    }
    Ok(())
}

/// Hands the logical arithmetic of `op` on bools to `v`.
fn bool_op<V: Visit<bool>>(op: BinaryOp, v: V) -> Result<(), String> {
    use BinaryOp::*;
    match op {
        And => v.visit(|p: bool, q: bool| p & q),
        Or => v.visit(|p: bool, q: bool| p | q),
        Xor => v.visit(|p: bool, q: bool| p ^ q),
        _ => return Err(format!("{op:?} is not defined for bool")),
    }
    Ok(())
}

impl Num for bool {
    type C = bool;
    #[inline(always)]
    fn load(self) -> bool {
        self
    }
    #[inline(always)]
    fn store(c: bool) -> bool {
        c
    }
    #[inline(always)]
    fn bound(x: f32) -> bool {
        x != 0.0
    }
}

/// Clamp bounds of a fused activation.
fn act_bounds(act: Activation) -> (f32, f32) {
    match act {
        Activation::Relu => (0.0, f32::INFINITY),
        Activation::Relu6 => (0.0, 6.0),
        Activation::Clip { min, max } => (min, max),
    }
}

/// Runs a binary op with broadcasting and the fused activation.
pub(super) fn binary(op: BinaryOp, act: Option<Activation>, x: &Tensor, y: &Tensor, out: &mut Tensor) -> Result<(), String> {
    use BinaryOp::*;
    let dt = binary_dtype(op, x.dtype(), y.dtype())?;
    check_activation(op, act, dt)?;
    let osh = binary_shape(op, &x.shape, &y.shape)?;
    let clamp = act.map(act_bounds);
    match op {
        Equal | Less | LessOrEqual | Greater | GreaterOrEqual => with_any!(x.dtype(), T => compare::<T>(op, x, y, out, &osh)),
        Pow if x.dtype() != y.dtype() => pow_mixed(x, y, out, &osh, clamp),
        _ => {
            macro_rules! run {
                ($T:ty, $f:ident) => {{
                    let (a, b) = (data::<$T>(x, "input 0")?, data::<$T>(y, "input 1")?);
                    let o = out.reset::<$T>(&osh);
                    $f(op, BinRun { a, ash: &x.shape, b, bsh: &y.shape, o, osh: &osh })
                }};
            }
            if let (Some((lo, hi)), DType::F32) = (clamp, dt) {
                let (a, b) = (data::<f32>(x, "input 0")?, data::<f32>(y, "input 1")?);
                let o = out.reset::<f32>(&osh);
                return float_op(op, ClampRun { run: BinRun { a, ash: &x.shape, b, bsh: &y.shape, o, osh: &osh }, lo, hi });
            }
            with_float!(dt, T => run!(T, float_op), with_int!(dt, T => run!(T, int_op), run!(bool, bool_op)))?;
            post_clamp(out, clamp)
        }
    }
}

fn compare<T: Element>(op: BinaryOp, x: &Tensor, y: &Tensor, out: &mut Tensor, osh: &[usize]) -> Result<(), String> {
    use BinaryOp::*;
    let (a, b) = (data::<T>(x, "input 0")?, data::<T>(y, "input 1")?);
    let o = out.reset::<bool>(osh);
    let (ash, bsh) = (&x.shape[..], &y.shape[..]);
    match op {
        Equal => bin(a, ash, b, bsh, o, osh, |p: T, q: T| p == q),
        Less => bin(a, ash, b, bsh, o, osh, |p: T, q: T| p < q),
        LessOrEqual => bin(a, ash, b, bsh, o, osh, |p: T, q: T| p <= q),
        Greater => bin(a, ash, b, bsh, o, osh, |p: T, q: T| p > q),
        GreaterOrEqual => bin(a, ash, b, bsh, o, osh, |p: T, q: T| p >= q),
        _ => return Err(format!("{op:?} is not a comparison")),
    }
    Ok(())
}

/// Pow whose exponent type differs from the base type: computed from the exponent as f64 (the output keeps
/// the base's type; integer bases with float exponents truncate the float result like numpy `astype`).
fn pow_mixed(x: &Tensor, y: &Tensor, out: &mut Tensor, osh: &[usize], bounds: Option<(f32, f32)>) -> Result<(), String> {
    let e = y.to_f64_vec();
    if e.len() != y.shape.iter().product::<usize>() {
        return Err("input 1 holds fewer elements than its shape says".into());
    }
    let int_exp = !y.dtype().is_float();
    with_float!(x.dtype(), T => {
        let a = data::<T>(x, "input 0")?;
        let o = out.reset::<T>(osh);
        bin(a, &x.shape, &e, &y.shape, o, osh, |p: T, q: f64| {
            T::store(p.load().powf(<<T as Num>::C as Real>::from_f64(q)))
        });
        Ok(())
    }, with_int!(x.dtype(), T => {
        let a = data::<T>(x, "input 0")?;
        let o = out.reset::<T>(osh);
        if int_exp {
            bin(a, &x.shape, &e, &y.shape, o, osh, |p: T, q: f64| p.pow_i(q as i64));
        } else {
            bin(a, &x.shape, &e, &y.shape, o, osh, |p: T, q: f64| T::from_f64(p.to_f64().powf(q)));
        }
        Ok(())
    }, Err(format!("Pow is not defined for {}", x.dtype()))))?;
    post_clamp(out, bounds)
}

/// Runs a unary op.
pub(super) fn unary(u: UnaryOp, x: &Tensor, out: &mut Tensor) -> Result<(), String> {
    unary_dtype(u, x.dtype())?;
    with_float!(x.dtype(), T => unary_float::<T>(u, x, out), with_int!(x.dtype(), T => unary_int::<T>(u, x, out), {
        let a = data::<bool>(x, "input")?;
        map(a, out.reset::<bool>(&x.shape), |v: bool| !v);
        Ok(())
    }))
}

fn unary_float<T: Float>(u: UnaryOp, x: &Tensor, out: &mut Tensor) -> Result<(), String> {
    use UnaryOp::*;
    let a = data::<T>(x, "input")?;
    if let IsNaN | IsInf { .. } = u {
        let o = out.reset::<bool>(&x.shape);
        match u {
            IsInf { detect_positive: pos, detect_negative: neg } => map(a, o, move |v: T| {
                let v = v.load();
                v.is_infinite() && (if v > <<T as Num>::C as Real>::ZERO { pos } else { neg })
            }),
            _ => map(a, o, |v: T| v.load().is_nan()),
        }
        return Ok(());
    }
    let o = out.reset::<T>(&x.shape);
    let k = |v: f64| <<T as Num>::C as Real>::from_f64(v);
    let (zero, one) = (k(0.0), k(1.0));
    macro_rules! run {
        ($f:expr) => {{
            let f = $f;
            map(a, o, move |v: T| T::store(f(v.load())))
        }};
    }
    let softplus = move |v: T::C| if v > zero { v + (-v).exp().ln_1p() } else { v.exp().ln_1p() };
    match u {
        Neg => run!(|v: T::C| -v),
        Abs => run!(|v: T::C| v.abs()),
        Sqrt => run!(|v: T::C| v.sqrt()),
        Exp => run!(|v: T::C| v.exp()),
        Log => run!(|v: T::C| v.ln()),
        Reciprocal => run!(move |v: T::C| one / v),
        Floor => run!(|v: T::C| v.floor()),
        Ceil => run!(|v: T::C| v.ceil()),
        Round => run!(|v: T::C| v.round_even()),
        Sign => run!(move |v: T::C| if v > zero {
            one
        } else if v < zero {
            -one
        } else {
            v
        }),
        Relu => run!(move |v: T::C| if v < zero { zero } else { v }),
        Sigmoid => run!(move |v: T::C| one / (one + (-v).exp())),
        Tanh => run!(|v: T::C| v.tanh()),
        Sin => run!(|v: T::C| v.sin()),
        Cos => run!(|v: T::C| v.cos()),
        Tan => run!(|v: T::C| v.tan()),
        Asin => run!(|v: T::C| v.asin()),
        Acos => run!(|v: T::C| v.acos()),
        Atan => run!(|v: T::C| v.atan()),
        Sinh => run!(|v: T::C| v.sinh()),
        Cosh => run!(|v: T::C| v.cosh()),
        Asinh => run!(|v: T::C| v.asinh()),
        Acosh => run!(|v: T::C| v.acosh()),
        Atanh => run!(|v: T::C| v.atanh()),
        Erf => run!(|v: T::C| v.erf()),
        Softplus => run!(softplus),
        Softsign => run!(move |v: T::C| v / (one + v.abs())),
        LeakyRelu { alpha } => {
            let alpha = k(alpha as f64);
            run!(move |v: T::C| if v < zero { alpha * v } else { v })
        }
        Elu { alpha } => {
            let alpha = k(alpha as f64);
            run!(move |v: T::C| if v < zero { alpha * v.exp_m1() } else { v })
        }
        Selu { alpha, gamma } => {
            let (alpha, gamma) = (k(alpha as f64), k(gamma as f64));
            run!(move |v: T::C| gamma * if v > zero { v } else { alpha * v.exp_m1() })
        }
        Celu { alpha } => {
            let alpha = k(alpha as f64);
            run!(move |v: T::C| if v > zero { v } else { alpha * (v / alpha).exp_m1() })
        }
        ThresholdedRelu { alpha } => {
            let alpha = k(alpha as f64);
            run!(move |v: T::C| if v > alpha { v } else { zero })
        }
        HardSigmoid { alpha, beta } => {
            let (alpha, beta) = (k(alpha as f64), k(beta as f64));
            run!(move |v: T::C| clamp(alpha * v + beta, zero, one))
        }
        HardSwish => {
            let (alpha, beta) = (k((1.0f32 / 6.0) as f64), k(0.5));
            run!(move |v: T::C| v * clamp(alpha * v + beta, zero, one))
        }
        Mish => run!(move |v: T::C| v * softplus(v).tanh()),
        Gelu { tanh: false } => {
            let (half, r2) = (k(0.5), k(std::f64::consts::FRAC_1_SQRT_2));
            run!(move |v: T::C| half * v * (one + (v * r2).erf()))
        }
        Gelu { tanh: true } => {
            let (half, c, b) = (k(0.5), k((2.0 / std::f64::consts::PI).sqrt()), k(0.044715));
            run!(move |v: T::C| half * v * (one + (c * (v + b * v * v * v)).tanh()))
        }
        Clip { min, max } => {
            let (lo, hi) = (T::bound(min), T::bound(max));
            run!(move |v: T::C| clamp(v, lo, hi))
        }
        Not | BitNot | IsNaN | IsInf { .. } => return Err(format!("{} is not defined for floats", Op::Unary(u).name())),
    }
    Ok(())
}

fn unary_int<T: Int>(u: UnaryOp, x: &Tensor, out: &mut Tensor) -> Result<(), String> {
    use UnaryOp::*;
    let a = data::<T>(x, "input")?;
    let o = out.reset::<T>(&x.shape);
    match u {
        Neg => map(a, o, |v: T| v.wneg()),
        Abs => map(a, o, |v: T| v.wabs()),
        Sign => map(a, o, |v: T| v.sign()),
        Relu => map(a, o, |v: T| v.max(T::ZERO)),
        BitNot => map(a, o, |v: T| v.bnot()),
        Clip { min, max } => {
            let (lo, hi) = (T::bound(min), T::bound(max));
            map(a, o, move |v: T| clamp(v, lo, hi))
        }
        _ => return Err(format!("{} is not defined for integers", Op::Unary(u).name())),
    }
    Ok(())
}

/// Runs Clip with bound inputs (x, min?, max?).
pub(super) fn clip_dynamic(inputs: &[Option<&Tensor>], out: &mut Tensor) -> Result<(), String> {
    let x = input(inputs, 0)?;
    let dt = x.dtype();
    let mut bounds: [Option<&Tensor>; 2] = [None, None];
    for (i, b) in bounds.iter_mut().enumerate() {
        if let Some(t) = inputs.get(i + 1).copied().flatten() {
            clip_bound_check(i + 1, t.dtype(), &t.shape, dt)?;
            if t.is_empty() {
                return Err("Clip bound holds no element".into());
            }
            *b = Some(t);
        }
    }
    fn first<T: Element>(t: Option<&Tensor>) -> Option<T> {
        t.and_then(|t| t.view::<T>()).and_then(|v| v.first().copied())
    }
    with_float!(dt, T => {
        let a = data::<T>(x, "input")?;
        let lo = first::<T>(bounds[0]).map(T::load).unwrap_or(<<T as Num>::C as Real>::NEG_INFINITY);
        let hi = first::<T>(bounds[1]).map(T::load).unwrap_or(<<T as Num>::C as Real>::INFINITY);
        map(a, out.reset::<T>(&x.shape), move |v: T| T::store(clamp(v.load(), lo, hi)));
        Ok(())
    }, with_int!(dt, T => {
        let a = data::<T>(x, "input")?;
        let lo = first::<T>(bounds[0]).unwrap_or(<T as Int>::MIN);
        let hi = first::<T>(bounds[1]).unwrap_or(<T as Int>::MAX);
        map(a, out.reset::<T>(&x.shape), move |v: T| clamp(v, lo, hi));
        Ok(())
    }, Err(format!("Clip is not defined for {dt}"))))
}

/// Sum/Max/Min/... (Some(op)) or Mean (None) of all inputs with multi-way broadcasting.
pub(super) fn variadic(op: Option<BinaryOp>, inputs: &[Option<&Tensor>], out: &mut Tensor) -> Result<(), String> {
    let x0 = input(inputs, 0)?;
    let dt = x0.dtype();
    variadic_dtype(op, dt)?;
    for i in 1..inputs.len() {
        let t = input(inputs, i)?;
        if t.dtype() != dt {
            return Err(format!("input {i} is {}, input 0 is {dt}", t.dtype()));
        }
    }
    let osh = broadcast_shapes(inputs.iter().flatten().map(|t| t.shape.as_slice()))?;
    let bop = op.unwrap_or(BinaryOp::Add);
    macro_rules! run {
        ($T:ty, $f:ident) => {{
            let o = out.reset::<$T>(&osh);
            let a = data::<$T>(x0, "input 0")?;
            if let Some(x1) = inputs.get(1).copied().flatten() {
                let b = data::<$T>(x1, "input 1")?;
                $f(bop, BinRun { a, ash: &x0.shape, b, bsh: &x1.shape, o: &mut *o, osh: &osh })?;
                for (i, t) in inputs.iter().enumerate().skip(2) {
                    let t = t.ok_or_else(|| format!("missing required input {i}"))?;
                    let b = data::<$T>(t, "input")?;
                    $f(bop, AccRun { o: &mut *o, osh: &osh, b, bsh: &t.shape })?;
                }
            } else {
                // one input: broadcasting to its own shape is a copy
                o.copy_from_slice(a);
            }
            o
        }};
    }
    with_float!(dt, T => {
        let o = run!(T, float_op);
        if op.is_none() {
            let n = <<T as Num>::C as Real>::from_f64(inputs.len() as f64);
            map_inplace(o, move |v: T| T::store(v.load() / n));
        }
        Ok(())
    }, with_int!(dt, T => {
        run!(T, int_op);
        Ok(())
    }, {
        run!(bool, bool_op);
        Ok(())
    }))
}

/// Runs Where(cond, x, y) with broadcasting.
pub(super) fn where_op(c: &Tensor, x: &Tensor, y: &Tensor, out: &mut Tensor) -> Result<(), String> {
    where_check(c.dtype(), x.dtype(), y.dtype())?;
    let osh = broadcast_shapes([&c.shape[..], &x.shape[..], &y.shape[..]])?;
    let cv = data::<bool>(c, "condition")?;
    with_any!(x.dtype(), T => {
        let (a, b) = (data::<T>(x, "input 1")?, data::<T>(y, "input 2")?);
        let o = out.reset::<T>(&osh);
        tern(cv, &c.shape, a, &x.shape, b, &y.shape, o, &osh, |c: bool, p: T, q: T| if c { p } else { q });
        Ok(())
    })
}

// ------------------------------------------------------------------------------------------------------
// Cast
// ------------------------------------------------------------------------------------------------------

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::kernels::{eval, Scratch};
    use crate::ir::ops::{infer, TypeInfo};

    fn run(op: Op, ins: &[&Tensor]) -> Result<Tensor, String> {
        let inputs: Vec<Option<&Tensor>> = ins.iter().map(|t| Some(*t)).collect();
        let infos: Vec<Option<TypeInfo>> = ins.iter().map(|t| Some(TypeInfo { dtype: t.dtype(), shape: &t.shape, value: None })).collect();
        let inferred = infer(&op, &infos);
        let mut outs = vec![Tensor::default()];
        eval(&op, &inputs, &mut outs, &mut Scratch::default())?;
        let (dt, shape) = inferred.map_err(|e| format!("{e:?}"))?.remove(0);
        assert_eq!((dt, &shape), (outs[0].dtype(), &outs[0].shape), "infer disagrees with eval for {op:?}");
        Ok(outs.remove(0))
    }
    fn f32s(shape: &[usize], v: &[f32]) -> Tensor {
        Tensor::from_f32(shape.to_vec(), v.to_vec())
    }
    fn t<T: Element>(shape: &[usize], v: &[T]) -> Tensor {
        Tensor::from_vec(shape.to_vec(), v.to_vec()).unwrap()
    }
    fn close(a: &[f32], b: &[f32], tol: f32) {
        assert_eq!(a.len(), b.len());
        for (i, (x, y)) in a.iter().zip(b).enumerate() {
            assert!((x - y).abs() <= tol * (1.0 + y.abs()) || (x.is_nan() && y.is_nan()), "element {i}: {x} vs {y}");
        }
    }

    #[test]
    fn broadcasting_add_with_fused_relu_matches_naive() {
        // [2,1,3] + [4,1] -> [2,4,3]; expected by direct index arithmetic
        let a: Vec<f32> = (0..6).map(|i| i as f32 - 3.0).collect();
        let b: Vec<f32> = (0..4).map(|i| i as f32 * 0.5 - 1.0).collect();
        let y = run(Op::Binary(BinaryOp::Add, Some(Activation::Relu)), &[&f32s(&[2, 1, 3], &a), &f32s(&[4, 1], &b)]).unwrap();
        assert_eq!(y.shape, vec![2, 4, 3]);
        let mut want = vec![];
        for i in 0..2 {
            for &bj in &b {
                for k in 0..3 {
                    want.push((a[i * 3 + k] + bj).max(0.0));
                }
            }
        }
        assert_eq!(y.as_f32().unwrap(), &want[..]);
        // large, parallel, broadcast of a row vector over rows
        let n = 300;
        let big: Vec<f32> = (0..n * n).map(|i| i as f32).collect();
        let row: Vec<f32> = (0..n).map(|i| -(i as f32)).collect();
        let y = run(Op::Binary(BinaryOp::Sub, None), &[&f32s(&[n, n], &big), &f32s(&[n], &row)]).unwrap();
        let v = y.as_f32().unwrap();
        assert!((0..n * n).all(|i| v[i] == big[i] + (i % n) as f32));
        let y = run(Op::Binary(BinaryOp::Mul, None), &[&f32s(&[n, 1], &row), &f32s(&[n, n], &big)]).unwrap();
        let v = y.as_f32().unwrap();
        assert!((0..n * n).all(|i| v[i] == big[i] * row[i / n]));
        assert!(run(Op::Binary(BinaryOp::Add, None), &[&f32s(&[2], &[1.0, 2.0]), &f32s(&[3], &[1.0; 3])]).is_err());
    }

    #[test]
    fn integer_division_and_remainders() {
        // ONNX test_div_int32_trunc, test_mod_mixed_sign_int32, fmod on ints
        let x = t::<i32>(&[4], &[-3, 3, -3, 3]);
        let y = t::<i32>(&[4], &[2, 2, -2, -2]);
        assert_eq!(run(Op::Binary(BinaryOp::Div, None), &[&x, &y]).unwrap().to_i64_vec(), vec![-1, 1, 1, -1]);
        let x = t::<i32>(&[6], &[-4, 7, 5, 4, -7, 8]);
        let y = t::<i32>(&[6], &[2, -3, 8, -2, 3, 5]);
        assert_eq!(run(Op::Binary(BinaryOp::Mod, None), &[&x, &y]).unwrap().to_i64_vec(), vec![0, -2, 5, 0, 2, 3]);
        assert_eq!(run(Op::Binary(BinaryOp::Fmod, None), &[&x, &y]).unwrap().to_i64_vec(), vec![0, 1, 5, 0, -1, 3]);
        // division by zero does not panic
        let z = t::<i32>(&[1], &[0]);
        assert_eq!(run(Op::Binary(BinaryOp::Div, None), &[&x, &z]).unwrap().to_i64_vec(), vec![0; 6]);
        assert_eq!(run(Op::Binary(BinaryOp::Mod, None), &[&x, &z]).unwrap().to_i64_vec(), vec![0; 6]);
        // a fused activation on integers clamps in a second pass
        let r = run(Op::Binary(BinaryOp::Add, Some(Activation::Relu6)), &[&x, &t::<i32>(&[], &[1])]).unwrap();
        assert_eq!(r.to_i64_vec(), vec![0, 6, 6, 5, 0, 6]);
    }

    #[test]
    fn float_mod_follows_numpy() {
        // values from numpy.mod / numpy.fmod (ONNX test_mod_* cases)
        let x = t::<f64>(&[6], &[-4.3, 7.2, 5.0, 4.3, -7.2, 8.0]);
        let y = t::<f64>(&[6], &[2.1, -3.4, 8.0, -2.1, 3.4, 5.0]);
        let m = run(Op::Binary(BinaryOp::Mod, None), &[&x, &y]).unwrap().to_f64_vec();
        for (g, w) in m.iter().zip([2.0, -3.0, 5.0, -2.0, 3.0, 3.0]) {
            assert!((g - w).abs() < 1e-9, "{m:?}");
        }
        let f = run(Op::Binary(BinaryOp::Fmod, None), &[&x, &y]).unwrap().to_f64_vec();
        for (g, w) in f.iter().zip([-0.1, 0.4, 5.0, 0.1, -0.4, 3.0]) {
            assert!((g - w).abs() < 1e-9, "{f:?}");
        }
        let x = f32s(&[6], &[0.0, -0.0, -3.0, 3.0, 1.0, f32::INFINITY]);
        let y = f32s(&[6], &[-2.0, 2.0, f32::INFINITY, f32::INFINITY, -f32::INFINITY, 2.0]);
        let m = run(Op::Binary(BinaryOp::Mod, None), &[&x, &y]).unwrap();
        let m = m.as_f32().unwrap();
        assert!(m[0] == 0.0 && m[0].is_sign_negative() && m[1] == 0.0 && m[1].is_sign_positive());
        assert_eq!(&m[2..5], &[f32::INFINITY, 3.0, -f32::INFINITY]);
        assert!(m[5].is_nan());
    }

    #[test]
    fn pow_mixed_types_comparisons_logic_bits() {
        // ONNX test_pow_types_*: the output has the base's type
        let y = run(Op::Binary(BinaryOp::Pow, None), &[&f32s(&[3], &[1.0, 2.0, 3.0]), &t::<i64>(&[3], &[4, 5, 6])]).unwrap();
        assert_eq!(y.as_f32().unwrap(), &[1.0, 32.0, 729.0]);
        let y = run(Op::Binary(BinaryOp::Pow, None), &[&t::<i32>(&[3], &[1, 2, 3]), &f32s(&[3], &[4.0, 5.0, 6.0])]).unwrap();
        assert_eq!((y.dtype(), y.to_i64_vec()), (DType::I32, vec![1, 32, 729]));
        let y = run(Op::Binary(BinaryOp::Pow, None), &[&t::<i64>(&[4], &[1, 2, 3, -1]), &t::<i64>(&[4], &[4, 5, 6, -3])]).unwrap();
        assert_eq!(y.to_i64_vec(), vec![1, 32, 729, -1]);
        let y = run(Op::Binary(BinaryOp::Pow, None), &[&f32s(&[2], &[3.0, -2.0]), &f32s(&[], &[2.0])]).unwrap();
        assert_eq!(y.as_f32().unwrap(), &[9.0, 4.0]);

        let a = f32s(&[3], &[1.0, f32::NAN, 3.0]);
        let b = f32s(&[1], &[1.0]);
        let lt = run(Op::Binary(BinaryOp::GreaterOrEqual, None), &[&a, &b]).unwrap();
        assert_eq!(lt.view::<bool>().unwrap(), &[true, false, true]);
        let eq = run(Op::Binary(BinaryOp::Equal, None), &[&t(&[2], &[true, false]), &t(&[1], &[false])]).unwrap();
        assert_eq!(eq.view::<bool>().unwrap(), &[false, true]);
        let x = run(Op::Binary(BinaryOp::Xor, None), &[&t(&[2, 1], &[true, false]), &t(&[2], &[true, false])]).unwrap();
        assert_eq!(x.view::<bool>().unwrap(), &[false, true, true, false]);
        let b = run(Op::Binary(BinaryOp::BitXor, None), &[&t::<u8>(&[2], &[0b1100, 0xff]), &t::<u8>(&[2], &[0b1010, 0x0f])]).unwrap();
        assert_eq!(b.to_i64_vec(), vec![0b0110, 0xf0]);
        let m = run(Op::Binary(BinaryOp::Max, None), &[&a, &f32s(&[], &[2.0])]).unwrap();
        let m = m.as_f32().unwrap();
        assert!(m[0] == 2.0 && m[1].is_nan() && m[2] == 3.0);
        // PRelu: slope broadcasts into x, never the other way round
        let p = run(Op::Binary(BinaryOp::PRelu, None), &[&f32s(&[2, 2], &[-1.0, 2.0, -3.0, 4.0]), &f32s(&[2], &[0.5, 0.25])]).unwrap();
        assert_eq!(p.as_f32().unwrap(), &[-0.5, 2.0, -1.5, 4.0]);
        assert!(run(Op::Binary(BinaryOp::PRelu, None), &[&f32s(&[2], &[1.0, 2.0]), &f32s(&[2, 2], &[0.0; 4])]).is_err());
        assert!(run(Op::Binary(BinaryOp::And, None), &[&f32s(&[1], &[1.0]), &f32s(&[1], &[1.0])]).is_err());
    }

    #[test]
    fn erf_is_accurate() {
        // math.erf values
        let want = [
            (1e-10, 1.1283791670955126e-10),
            (0.1, 0.1124629160182849),
            (0.5, 0.5204998778130465),
            (0.84375, 0.7672256612323416),
            (1.0, 0.8427007929497149),
            (1.2, 0.9103139782296353),
            (1.5, 0.9661051464753108),
            (2.5, 0.999593047982555),
            (2.9, 0.9999589021219005),
            (3.5, 0.9999992569016276),
            (5.0, 0.9999999999984626),
            (-0.7, -0.6778011938374184),
        ];
        for (x, e) in want {
            let d = erf(x);
            assert!((d - e).abs() <= 1e-15 * e.abs(), "erf({x}) = {d}, want {e}");
            let f = erf(x as f32) as f64;
            let ef = erf((x as f32) as f64);
            assert!((f - ef).abs() <= 1e-6 * ef.abs(), "erf_f32({x}) = {f}, want {ef}");
        }
        // dense sweep of the f32 version against the f64 one
        let mut worst = 0.0f64;
        for i in -60000..60000 {
            let x = i as f32 * 1e-4;
            let e = erf(x as f64);
            if e != 0.0 {
                worst = worst.max(((erf(x) as f64 - e) / e).abs());
            }
        }
        assert!(worst < 1e-6, "worst relative error {worst}");
        assert!(erf(f32::NAN).is_nan() && erf(f32::INFINITY) == 1.0 && erf(-f64::INFINITY) == -1.0);
    }

    #[test]
    fn fast_exp_is_accurate() {
        let mut worst = 0.0f64;
        for i in -1_040_000..890_000 {
            let x = i as f32 * 1e-4;
            let (got, want) = (exp_f32(x) as f64, (x as f64).exp());
            if want > f32::MIN_POSITIVE as f64 && want < f32::MAX as f64 {
                worst = worst.max(((got - want) / want).abs());
            }
        }
        assert!(worst < 2.5e-7, "worst relative error {worst}");
        assert_eq!(exp_f32(0.0), 1.0);
        assert_eq!(exp_f32(89.0), f32::INFINITY);
        assert_eq!(exp_f32(f32::INFINITY), f32::INFINITY);
        assert_eq!(exp_f32(-f32::INFINITY), 0.0);
        assert_eq!(exp_f32(-104.0), 0.0);
        assert!(exp_f32(f32::NAN).is_nan());
        let mut worst = 0.0f64;
        for i in -200_000..200_000 {
            let x = i as f32 * 1e-4;
            let (got, want) = (tanh_f32(x) as f64, (x as f64).tanh());
            if want != 0.0 {
                worst = worst.max(((got - want) / want).abs());
            }
        }
        assert!(worst < 4e-7, "tanh: worst relative error {worst}");
        assert!(tanh_f32(f32::NAN).is_nan() && tanh_f32(100.0) == 1.0 && tanh_f32(-f32::INFINITY) == -1.0);
        // gradual underflow: e^-100 is subnormal, within one subnormal step of the rounded true value
        let want = (-100f64).exp() as f32;
        assert!((exp_f32(-100.0) - want).abs() <= f32::from_bits(1), "{} vs {want}", exp_f32(-100.0));
    }

    #[test]
    fn unary_ops_follow_onnx_definitions() {
        let x = f32s(&[7], &[0.5, 1.5, 2.5, -0.5, -1.5, -2.7, 0.0]);
        let r = run(Op::Unary(UnaryOp::Round), &[&x]).unwrap();
        assert_eq!(r.as_f32().unwrap(), &[0.0, 2.0, 2.0, -0.0, -2.0, -3.0, 0.0]);
        let s = run(Op::Unary(UnaryOp::Sign), &[&x]).unwrap();
        assert_eq!(s.as_f32().unwrap(), &[1.0, 1.0, 1.0, -1.0, -1.0, -1.0, 0.0]);
        // Softplus stays finite where exp overflows; HardSwish / HardSigmoid / Selu spec values
        let sp = run(Op::Unary(UnaryOp::Softplus), &[&f32s(&[3], &[100.0, -100.0, 0.0])]).unwrap();
        close(sp.as_f32().unwrap(), &[100.0, 3.72e-44, std::f32::consts::LN_2], 1e-6);
        let hs = run(Op::Unary(UnaryOp::HardSwish), &[&f32s(&[3], &[-4.0, 1.0, 4.0])]).unwrap();
        close(hs.as_f32().unwrap(), &[0.0, 1.0 * (1.0 / 6.0 + 0.5), 4.0], 1e-6);
        let sel = run(Op::Unary(UnaryOp::Selu { alpha: 2.0, gamma: 3.0 }), &[&f32s(&[3], &[-1.0, 0.0, 1.0])]).unwrap();
        close(sel.as_f32().unwrap(), &[-3.7927232, 0.0, 3.0], 1e-6);
        let g = run(Op::Unary(UnaryOp::Gelu { tanh: false }), &[&f32s(&[3], &[-1.0, 0.0, 1.0])]).unwrap();
        close(g.as_f32().unwrap(), &[-0.15865526, 0.0, 0.8413447], 1e-6);
        let g = run(Op::Unary(UnaryOp::Gelu { tanh: true }), &[&f32s(&[3], &[-1.0, 0.0, 1.0])]).unwrap();
        close(g.as_f32().unwrap(), &[-0.15880801, 0.0, 0.841192], 1e-6);
        let m = run(Op::Unary(UnaryOp::Mish), &[&f32s(&[2], &[1.0, -1.0])]).unwrap();
        close(m.as_f32().unwrap(), &[0.86509836, -0.30340144], 1e-6);
        let inf = f32s(&[4], &[f32::INFINITY, -f32::INFINITY, f32::NAN, 1.0]);
        let pos = run(Op::Unary(UnaryOp::IsInf { detect_positive: true, detect_negative: false }), &[&inf]).unwrap();
        assert_eq!(pos.view::<bool>().unwrap(), &[true, false, false, false]);
        let nan = run(Op::Unary(UnaryOp::IsNaN), &[&inf]).unwrap();
        assert_eq!(nan.view::<bool>().unwrap(), &[false, false, true, false]);
        // half types compute in f32
        let h = t::<f16>(&[2], &[f16::from_f32(-2.0), f16::from_f32(0.25)]);
        let a = run(Op::Unary(UnaryOp::Abs), &[&h]).unwrap();
        assert_eq!(a.to_f64_vec(), vec![2.0, 0.25]);
        // integers
        let i = t::<i8>(&[3], &[-128, -5, 7]);
        assert_eq!(run(Op::Unary(UnaryOp::Abs), &[&i]).unwrap().to_i64_vec(), vec![-128, 5, 7]);
        assert_eq!(run(Op::Unary(UnaryOp::BitNot), &[&i]).unwrap().to_i64_vec(), vec![127, 4, -8]);
        assert!(run(Op::Unary(UnaryOp::Sqrt), &[&i]).is_err());
        assert_eq!(run(Op::Unary(UnaryOp::Not), &[&t(&[2], &[true, false])]).unwrap().view::<bool>().unwrap(), &[false, true]);
    }

    #[test]
    fn clip_variadic_where() {
        // ONNX test_clip_min_greater_than_max: every value becomes max
        let x = f32s(&[3], &[-2.0, 0.0, 2.0]);
        let y = run(Op::ClipDynamic, &[&x, &f32s(&[], &[1.0]), &f32s(&[], &[0.0])]).unwrap();
        assert_eq!(y.as_f32().unwrap(), &[0.0, 0.0, 0.0]);
        let i = t::<i8>(&[3], &[-100, 0, 100]);
        let mut outs = vec![Tensor::default()];
        eval(&Op::ClipDynamic, &[Some(&i), None, Some(&t::<i8>(&[], &[50]))], &mut outs, &mut Scratch::default()).unwrap();
        assert_eq!(outs[0].to_i64_vec(), vec![-100, 0, 50]);
        // Sum / Max / Mean of three inputs broadcast together ([3], [1], [2,1]) -> [2,3]
        let a = f32s(&[3], &[1.0, 2.0, 3.0]);
        let b = f32s(&[1], &[10.0]);
        let c = f32s(&[2, 1], &[100.0, 200.0]);
        let s = run(Op::Variadic(BinaryOp::Add), &[&a, &b, &c]).unwrap();
        assert_eq!((s.shape.clone(), s.as_f32().unwrap().to_vec()), (vec![2, 3], vec![111.0, 112.0, 113.0, 211.0, 212.0, 213.0]));
        let m = run(Op::VariadicMean, &[&a, &b, &c]).unwrap();
        close(m.as_f32().unwrap(), &[37.0, 37.333332, 37.666668, 70.333336, 70.666664, 71.0], 1e-6);
        let mx = run(Op::Variadic(BinaryOp::Max), &[&a]).unwrap();
        assert_eq!(mx.as_f32().unwrap(), &[1.0, 2.0, 3.0]);
        assert!(run(Op::VariadicMean, &[&t::<i32>(&[1], &[1])]).is_err());
        // Where with a [2,1] condition over [3] branches
        let w = run(Op::Where, &[&t(&[2, 1], &[true, false]), &a, &f32s(&[], &[-1.0])]).unwrap();
        assert_eq!(w.as_f32().unwrap(), &[1.0, 2.0, 3.0, -1.0, -1.0, -1.0]);
    }

    #[test]
    fn cast_rules() {
        let x = f32s(&[6], &[1.5, -2.7, 300.0, -1e10, f32::NAN, 0.0]);
        let y = run(Op::Cast { to: DType::I8 }, &[&x]).unwrap();
        assert_eq!(y.to_i64_vec(), vec![1, -2, 127, -128, 0, 0]);
        let b = run(Op::Cast { to: DType::Bool }, &[&x]).unwrap();
        assert_eq!(b.view::<bool>().unwrap(), &[true, true, true, true, true, false]);
        let f = run(Op::Cast { to: DType::F32 }, &[&b]).unwrap();
        assert_eq!(f.as_f32().unwrap(), &[1.0, 1.0, 1.0, 1.0, 1.0, 0.0]);
        // i64 -> u8 wraps like numpy astype
        let w = run(Op::Cast { to: DType::U8 }, &[&t::<i64>(&[2], &[257, -1])]).unwrap();
        assert_eq!(w.to_i64_vec(), vec![1, 255]);
        // f32 -> f16 rounds to nearest even: 1 + 2^-11 is a tie between 1 and 1 + 2^-10
        let h = run(Op::Cast { to: DType::F16 }, &[&f32s(&[2], &[1.0 + 2f32.powi(-11), 1.0 + 3.0 * 2f32.powi(-11)])]).unwrap();
        assert_eq!(h.to_f64_vec(), vec![1.0, 1.0 + 2f64.powi(-9)]);
        // f64 -> f16 is correctly rounded even when only the low bits break the tie
        let d = t::<f64>(&[1], &[1.0 + 2f64.powi(-11) + 2f64.powi(-40)]);
        assert_eq!(run(Op::Cast { to: DType::F16 }, &[&d]).unwrap().to_f64_vec(), vec![1.0 + 2f64.powi(-10)]);
        let same = run(Op::Cast { to: DType::F32 }, &[&x]).unwrap();
        assert_eq!(same.as_f32().unwrap()[..4], x.as_f32().unwrap()[..4]);
    }
}
