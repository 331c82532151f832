//! The numeric traits every kernel family computes with: [`Real`] (f32/f64 math, GEMM entry points),
//! [`Num`] (an element type with its compute type), [`Float`], [`Int`], and [`Arith`] (arithmetic in the
//! storage type, for reductions and scans).

use std::ops::{Add, Div, Mul, Neg, Rem, Sub};

use half::{bf16, f16};

use crate::ir::Element;

mod arith;
mod interleave;
pub(super) mod logistic;
pub(super) use interleave::deinterleave;
mod sgemm;
#[cfg(target_arch = "x86_64")]
pub(super) use sgemm::{gemm_packed, gemm_packed_a, gemm_packed_a_panels, gemm_packed_ab, pack_panel, tile_cols, Epi, PackedA, PackedB, MR_PACKED, NR_PACKED};
pub(super) mod vector;
pub(super) use arith::Arith;

/// A float type kernels compute in (f32 or f64).
pub(super) trait Real:
    Element
    + Add<Output = Self>
    + Sub<Output = Self>
    + Mul<Output = Self>
    + Div<Output = Self>
    + Rem<Output = Self>
    + Neg<Output = Self>
{
    /// 0
    const ZERO: Self;
    /// 1
    const ONE: Self;
    /// +inf
    const INFINITY: Self;
    /// -inf
    const NEG_INFINITY: Self;
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
    /// The logistic function 1 / (1 + e^-x).
    fn sigmoid(self) -> Self;
    /// `row[i] ← silu(row[i] + bias)`, SiLU being `x · sigmoid(x)` (no addition without a bias).
    fn silu_rows(row: &mut [Self], bias: Option<Self>);
    /// The error function (see [`erf`]).
    /// Conversion from an f32 attribute (alpha, clip bounds).
    fn from_f32(x: f32) -> Self;
    /// `C ← alpha·A·B + beta·C` on strided matrices (single-threaded for sizes within `CALL_BUDGET` in `matmul`).
    ///
    /// # Safety
    /// Every element addressed through `a`, `b` (`i·rs + j·cs` for `i < rows`, `j < cols`) must be in bounds
    /// of one live allocation, and the addressed elements of `c` must be in bounds and not accessed by
    /// anything else during the call.
    #[allow(clippy::too_many_arguments)]
    unsafe fn gemm_raw(
        m: usize,
        k: usize,
        n: usize,
        alpha: Self,
        a: *const Self,
        rsa: isize,
        csa: isize,
        b: *const Self,
        rsb: isize,
        csb: isize,
        beta: Self,
        c: *mut Self,
        rsc: isize,
        csc: isize,
    );
    /// True when [`Real::gemm_raw`] may spawn threads of its own (matrixmultiply does, by `MATMUL_NUM_THREADS`; the
    /// AVX2 f32 kernel never does), so callers inside the team's tasks keep its calls small.
    fn gemm_may_thread() -> bool;
    /// `self · a + b`, rounded once (only fast where the target has FMA instructions).
    fn mul_add_(self, a: Self, b: Self) -> Self;
    /// The larger of two values; NaN loses to a number.
    fn max_(self, other: Self) -> Self;
    /// `max(x, 0)` with the NaN behaviour of `Activation::apply`.
    fn relu(self) -> Self;
    /// `clamp(x, lo, hi)` with the NaN behaviour of `Activation::apply` for Relu6.
    fn clamp_to(self, lo: Self, hi: Self) -> Self;
    /// `max(x, lo).min(hi)` with the NaN behaviour of `Activation::apply` for Clip.
    fn max_min(self, lo: Self, hi: Self) -> Self;
    #[inline]
    fn erf(self) -> Self {
        erf(self)
    }
}

macro_rules! real_impl {
    ($t:ident, $mask:expr, $exp:path, $tanh:path, $sigmoid:path, $silu_rows:path, $gemm:path, $may_thread:expr) => {
        impl Real for $t {
            #[inline]
            fn silu_rows(row: &mut [Self], bias: Option<Self>) {
                $silu_rows(row, bias)
            }
            fn gemm_may_thread() -> bool {
                $may_thread
            }
            #[inline(always)]
            fn sigmoid(self) -> Self {
                $sigmoid(self)
            }
            const ZERO: Self = 0.0;
            const ONE: Self = 1.0;
            const INFINITY: Self = $t::INFINITY;
            const NEG_INFINITY: Self = $t::NEG_INFINITY;
            #[inline]
            fn from_f32(x: f32) -> Self {
                x as $t
            }
            unsafe fn gemm_raw(
                m: usize,
                k: usize,
                n: usize,
                alpha: Self,
                a: *const Self,
                rsa: isize,
                csa: isize,
                b: *const Self,
                rsb: isize,
                csb: isize,
                beta: Self,
                c: *mut Self,
                rsc: isize,
                csc: isize,
            ) {
                // SAFETY: forwarded from this function's contract.
                unsafe { $gemm(m, k, n, alpha, a, rsa, csa, b, rsb, csb, beta, c, rsc, csc) }
            }
            #[inline(always)]
            fn mul_add_(self, a: Self, b: Self) -> Self {
                self.mul_add(a, b)
            }
            #[inline(always)]
            fn max_(self, other: Self) -> Self {
                self.max(other)
            }
            #[inline]
            fn relu(self) -> Self {
                self.max(0.0)
            }
            #[inline]
            fn clamp_to(self, lo: Self, hi: Self) -> Self {
                self.clamp(lo, hi)
            }
            #[inline]
            fn max_min(self, lo: Self, hi: Self) -> Self {
                self.max(lo).min(hi)
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
real_impl!(f32, 0xffff_f000, exp_f32, tanh_f32, sigmoid_f32, logistic::silu_in_place, sgemm::sgemm, !vector::avx2_fma());
real_impl!(f64, 0xffff_ffff_0000_0000, f64::exp, f64::tanh, sigmoid_f64, silu_rows_f64, matrixmultiply::dgemm, true);

/// SiLU over f64 rows (the f32 kernel's [`logistic::silu_in_place`] in f64).
fn silu_rows_f64(row: &mut [f64], bias: Option<f64>) {
    let b = bias.unwrap_or(0.0);
    match bias {
        Some(_) => vector::update(row, &|v: f64| (v + b) * sigmoid_f64(v + b)),
        None => vector::update(row, &|v: f64| v * sigmoid_f64(v)),
    }
}

/// The logistic function in f64, in the form of [`sigmoid_f32`].
#[inline]
fn sigmoid_f64(x: f64) -> f64 {
    let e = (-x.abs()).exp();
    let num = if x >= 0.0 { 1.0 } else { e };
    num / (1.0 + e)
}

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
    let t = x * LOG2E + ROUND;
    let n = t - ROUND;
    let r = x - n * LN2_HI - n * LN2_LO;
    let p = 1.987_569_1e-4;
    let p = p * r + 1.398_199_9e-3;
    let p = p * r + 8.333_452e-3;
    let p = p * r + 4.166_579_6e-2;
    let p = p * r + 1.666_666_5e-1;
    let p = p * r + 5.000_000_1e-1;
    let y = p * r * r + r + 1.0;
    // t = 1.5·2^23 + n exactly, so n is the difference of the bit patterns (an integer subtraction, where
    // `n as i32` would be a saturating conversion that keeps the loop from vectorising)
    let n = (t.to_bits() as i32).wrapping_sub(ROUND.to_bits() as i32);
    let n1 = n >> 1;
    let n2 = n.wrapping_sub(n1);
    y * f32::from_bits((n1.wrapping_add(127) as u32) << 23) * f32::from_bits((n2.wrapping_add(127) as u32) << 23)
}

/// The logistic function 1 / (1 + e^-x) in f32 without branches: with e = e^-|x|, 1 / (1 + e) for x >= 0 and
/// e / (1 + e) below, so that it underflows gradually towards -inf like the exact value instead of reaching 0
/// where e^-x overflows. Within 2 ulp of the correctly rounded value where that is a normal number.
#[inline(always)]
pub(super) fn sigmoid_f32(x: f32) -> f32 {
    let e = exp_f32(-x.abs());
    let num = if x >= 0.0 { 1.0 } else { e };
    // NaN fails `x >= 0`: e is NaN, and so is the quotient
    num / (1.0 + e)
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
