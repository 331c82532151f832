//! Elementwise kernels: binary ops with numpy broadcasting (with an optional fused clamp activation), unary
//! math, Clip with run-time bounds, variadic Sum/Max/Min/Mean and Where (Cast: [`super::cast`]; the
//! broadcast engine: [`super::broadcast`]; numeric traits: [`super::numeric`]).
//!
//! The dtype is dispatched once per call; the loops are generic over the element type, with the op's
//! arithmetic inlined as a closure. Half-precision types compute in f32 and round once per result.
//! Loops run over contiguous slices: the same-shape and scalar cases are a single zipped loop, general
//! broadcasting walks the output as rows whose inputs are either contiguous or one repeated value (dims are
//! merged first so rows are as long as possible). Large outputs are split over the thread team ([`crate::runtime::spin_pool`]).

use super::broadcast::{acc, bin, data, map, map_inplace, map_slices, tern};
use super::dispatch::{with_any, with_float, with_int};
use super::input;
use super::numeric::{clamp, logistic, Float, Int, Num, Real};
use super::util::broadcast_shapes;
use crate::ir::ops::elementwise::{binary_dtype, binary_shape, check_activation, clip_bound_check, unary_dtype, variadic_dtype, where_check};
use crate::ir::{Activation, BinaryOp, DType, Element, Op, Tensor, UnaryOp};


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

/// Runs a binary op with broadcasting and the fused activation.
pub(super) fn binary(op: BinaryOp, act: Option<Activation>, x: &Tensor, y: &Tensor, out: &mut Tensor) -> Result<(), String> {
    use BinaryOp::*;
    let dt = binary_dtype(op, x.dtype(), y.dtype())?;
    check_activation(op, act, dt)?;
    let osh = binary_shape(op, &x.shape, &y.shape)?;
    // check_activation admits clamps only
    let clamp = act.and_then(Activation::clamp_bounds);
    match op {
        Equal | Less | LessOrEqual | Greater | GreaterOrEqual => with_any!(x.dtype(), T => compare::<T>(op, x, y, out, &osh)),
        Pow if x.dtype() != y.dtype() => pow_mixed(x, y, out, &osh, clamp),
        // x² (RMSNorm, variance): one multiply instead of powf per element, the same correctly rounded value
        Pow if y.len() == 1 && y.shape.len() <= x.shape.len() && y.to_f64_vec().first() == Some(&2.0) && dt.is_float() => binary(Mul, act, x, x, out),
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
            T::store(p.load().powf(<<T as Num>::C as Element>::from_f64(q)))
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
    if matches!(u, UnaryOp::Sigmoid) && x.dtype() == DType::F32 {
        // the intrinsics kernel (FMA, vscalefps): the element function through `map` costs twice the instructions
        let a = data::<f32>(x, "input")?;
        map_slices(a, out.reset::<f32>(&x.shape), logistic::sigmoid_map);
        return Ok(());
    }
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
    let k = |v: f64| <<T as Num>::C as Element>::from_f64(v);
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
        Rsqrt => run!(move |v: T::C| one / v.sqrt()),
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
        Sigmoid => run!(|v: T::C| v.sigmoid()),
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
            let n = <<T as Num>::C as Element>::from_f64(inputs.len() as f64);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::kernels::numeric::{erf, exp_f32, sigmoid_f32, tanh_f32};
    use half::f16;
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

    /// Distance in units in the last place between `got` and the f32 nearest to `want` (same sign assumed).
    fn ulps(got: f32, want: f64) -> u32 {
        (got.to_bits() as i64 - (want as f32).to_bits() as i64).unsigned_abs() as u32
    }

    /// exp and sigmoid against libm's f64 results (rounded to f32) over their whole finite range in steps of
    /// about 1e-3 (and every f32 in [-1, 1] near 0's neighbourhood at 2^-20 spacing): within 2 ulp wherever
    /// the result is a normal f32; the edges exactly.
    #[test]
    fn fast_exp_and_sigmoid_are_within_2_ulp_of_libm() {
        let xs = (-1_040_000..890_000).map(|i| i as f32 * 1e-4).chain((-1 << 20..1 << 20).map(|i| i as f32 / (1 << 20) as f32));
        let (mut worst_exp, mut worst_sig) = ((0, 0.0f32), (0, 0.0f32));
        let worse = |w: &mut (u32, f32), u: u32, x: f32| {
            if u > w.0 {
                *w = (u, x);
            }
        };
        for x in xs {
            let e = (x as f64).exp();
            if e > f32::MIN_POSITIVE as f64 && e < f32::MAX as f64 {
                worse(&mut worst_exp, ulps(exp_f32(x), e), x);
            }
            let s = 1.0 / (1.0 + (-x as f64).exp());
            if s > f32::MIN_POSITIVE as f64 {
                worse(&mut worst_sig, ulps(sigmoid_f32(x), s), x);
            }
        }
        assert!(worst_exp.0 <= 2, "exp: {} ulp at {}", worst_exp.0, worst_exp.1);
        assert!(worst_sig.0 <= 2, "sigmoid: {} ulp at {}", worst_sig.0, worst_sig.1);
        assert_eq!((sigmoid_f32(0.0), sigmoid_f32(-0.0)), (0.5, 0.5));
        assert_eq!((sigmoid_f32(f32::INFINITY), sigmoid_f32(f32::NEG_INFINITY)), (1.0, 0.0));
        assert_eq!((sigmoid_f32(120.0), sigmoid_f32(-120.0)), (1.0, 0.0));
        assert!(sigmoid_f32(f32::NAN).is_nan());
        // below -87 the result is subnormal: it underflows gradually like the exact value
        let s = (1.0 / (1.0 + 95f64.exp())) as f32;
        assert!(s > 0.0 && (sigmoid_f32(-95.0) - s).abs() <= f32::from_bits(1), "{} vs {s}", sigmoid_f32(-95.0));
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
