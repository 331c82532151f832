//! [`Arith`]: element arithmetic in the storage type (f16/bf16 rounded per operation), which the reductions
//! and scans fold with. It differs from [`super::Num`], whose kernels widen to a compute type once.

use half::{bf16, f16};

use crate::ir::Element;

/// Element arithmetic in the storage type, for the reductions and the scans of every element type. Integers wrap; f16/bf16 go
/// through f32 per operation (rounding each result, like numpy); bool uses or/and.
pub(in crate::runtime::kernels) trait Arith: Element {
    /// 0 (false).
    const ZERO: Self;
    /// 1 (true).
    const ONE: Self;
    /// Identity of max: -inf or the integer minimum.
    const LOWEST: Self;
    /// Identity of min: +inf or the integer maximum.
    const HIGHEST: Self;
    /// `self + o`.
    fn add(self, o: Self) -> Self;
    /// `self - o`.
    fn sub(self, o: Self) -> Self;
    /// `self · o`.
    fn mul(self, o: Self) -> Self;
    /// |self|.
    fn abs(self) -> Self;
    /// √self.
    fn sqrt(self) -> Self;
    /// ln self.
    fn ln(self) -> Self;
    /// e^self.
    fn exp(self) -> Self;
    /// `self / n`; integers truncate toward zero, and a zero count gives 0.
    fn div_count(self, n: usize) -> Self;
    /// Not infinite or NaN.
    fn finite(self) -> bool;
    /// Maximum propagating NaN (numpy `maximum`).
    #[inline]
    fn max_(self, o: Self) -> Self {
        #[allow(clippy::eq_op)]
        if self >= o || self != self {
            self
        } else {
            o
        }
    }
    /// Minimum propagating NaN (numpy `minimum`).
    #[inline]
    fn min_(self, o: Self) -> Self {
        #[allow(clippy::eq_op)]
        if self <= o || self != self {
            self
        } else {
            o
        }
    }
}

macro_rules! num_float {
    ($t:ty) => {
        impl Arith for $t {
            const ZERO: Self = 0.0;
            const ONE: Self = 1.0;
            const LOWEST: Self = <$t>::NEG_INFINITY;
            const HIGHEST: Self = <$t>::INFINITY;
            #[inline]
            fn add(self, o: Self) -> Self {
                self + o
            }
            #[inline]
            fn sub(self, o: Self) -> Self {
                self - o
            }
            #[inline]
            fn mul(self, o: Self) -> Self {
                self * o
            }
            #[inline]
            fn abs(self) -> Self {
                <$t>::abs(self)
            }
            #[inline]
            fn sqrt(self) -> Self {
                <$t>::sqrt(self)
            }
            #[inline]
            fn ln(self) -> Self {
                <$t>::ln(self)
            }
            #[inline]
            fn exp(self) -> Self {
                <$t>::exp(self)
            }
            #[inline]
            fn div_count(self, n: usize) -> Self {
                self / n as $t
            }
            #[inline]
            fn finite(self) -> bool {
                self.is_finite()
            }
        }
    };
}
num_float!(f32);
num_float!(f64);

macro_rules! num_half {
    ($t:ty) => {
        impl Arith for $t {
            const ZERO: Self = <$t>::ZERO;
            const ONE: Self = <$t>::ONE;
            const LOWEST: Self = <$t>::NEG_INFINITY;
            const HIGHEST: Self = <$t>::INFINITY;
            #[inline]
            fn add(self, o: Self) -> Self {
                <$t>::from_f32(self.to_f32() + o.to_f32())
            }
            #[inline]
            fn sub(self, o: Self) -> Self {
                <$t>::from_f32(self.to_f32() - o.to_f32())
            }
            #[inline]
            fn mul(self, o: Self) -> Self {
                <$t>::from_f32(self.to_f32() * o.to_f32())
            }
            #[inline]
            fn abs(self) -> Self {
                <$t>::from_f32(self.to_f32().abs())
            }
            #[inline]
            fn sqrt(self) -> Self {
                <$t>::from_f32(self.to_f32().sqrt())
            }
            #[inline]
            fn ln(self) -> Self {
                <$t>::from_f32(self.to_f32().ln())
            }
            #[inline]
            fn exp(self) -> Self {
                <$t>::from_f32(self.to_f32().exp())
            }
            #[inline]
            fn div_count(self, n: usize) -> Self {
                <$t>::from_f32(self.to_f32() / n as f32)
            }
            #[inline]
            fn finite(self) -> bool {
                self.is_finite()
            }
        }
    };
}
num_half!(f16);
num_half!(bf16);

macro_rules! num_int {
    ($t:ty, $abs:expr) => {
        impl Arith for $t {
            const ZERO: Self = 0;
            const ONE: Self = 1;
            const LOWEST: Self = <$t>::MIN;
            const HIGHEST: Self = <$t>::MAX;
            #[inline]
            fn add(self, o: Self) -> Self {
                self.wrapping_add(o)
            }
            #[inline]
            fn sub(self, o: Self) -> Self {
                self.wrapping_sub(o)
            }
            #[inline]
            fn mul(self, o: Self) -> Self {
                self.wrapping_mul(o)
            }
            #[inline]
            fn abs(self) -> Self {
                let f: fn($t) -> $t = $abs;
                f(self)
            }
            fn sqrt(self) -> Self {
                (self as f64).sqrt() as $t
            }
            fn ln(self) -> Self {
                (self as f64).ln() as $t
            }
            fn exp(self) -> Self {
                (self as f64).exp() as $t
            }
            fn div_count(self, n: usize) -> Self {
                if n == 0 {
                    0
                } else {
                    (self as i128 / n as i128) as $t
                }
            }
            #[inline]
            fn finite(self) -> bool {
                true
            }
        }
    };
}
num_int!(i8, |x| x.wrapping_abs());
num_int!(i16, |x| x.wrapping_abs());
num_int!(i32, |x| x.wrapping_abs());
num_int!(i64, |x| x.wrapping_abs());
num_int!(u8, |x| x);

impl Arith for bool {
    const ZERO: Self = false;
    const ONE: Self = true;
    const LOWEST: Self = false;
    const HIGHEST: Self = true;
    fn add(self, o: Self) -> Self {
        self | o
    }
    fn sub(self, o: Self) -> Self {
        self & !o
    }
    fn mul(self, o: Self) -> Self {
        self & o
    }
    fn abs(self) -> Self {
        self
    }
    fn sqrt(self) -> Self {
        self
    }
    fn ln(self) -> Self {
        self
    }
    fn exp(self) -> Self {
        true
    }
    fn div_count(self, _n: usize) -> Self {
        self
    }
    fn finite(self) -> bool {
        true
    }
}
