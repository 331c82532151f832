//! Elementwise slice loops compiled twice, for the baseline instruction set and for AVX2 + FMA, with the copy
//! picked at run time (std caches the CPU feature test). The loop body is the caller's closure, inlined into
//! each copy, so branch-free element functions (such as [`super::exp_f32`] and [`super::sigmoid_f32`])
//! vectorise 8 lanes wide where the CPU allows and 4 wide (SSE2) where it does not. Other architectures use
//! the baseline copy (on aarch64 that is NEON).

#[inline(always)]
fn map_loop<A: Copy, O, F: Fn(A) -> O>(a: &[A], o: &mut [O], f: &F) {
    for (o, &x) in o.iter_mut().zip(a) {
        *o = f(x);
    }
}

#[inline(always)]
fn update_loop<O: Copy, F: Fn(O) -> O>(o: &mut [O], f: &F) {
    for v in o.iter_mut() {
        *v = f(*v);
    }
}

/// Whether this CPU runs the AVX2 + FMA copies.
#[inline]
pub(crate) fn avx2_fma() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// Whether this CPU runs the AVX-512 kernels (the f32 GEMM's wide tile): AVX2 + FMA and AVX-512F, unless
/// `TPU_SDK_NO_AVX512=1` (to compare the two kernels on one machine; read once).
#[inline]
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
pub(crate) fn avx512() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        *ON.get_or_init(|| {
            avx2_fma() && std::arch::is_x86_feature_detected!("avx512f") && std::env::var("TPU_SDK_NO_AVX512").map_or(true, |v| v != "1")
        })
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn map_avx2<A: Copy, O, F: Fn(A) -> O>(a: &[A], o: &mut [O], f: &F) {
    map_loop(a, o, f)
}

/// The 16-lane copy: element functions such as sigmoid are arithmetic-bound when their data is in cache (a
/// convolution's fused SiLU), so twice the lanes nearly halves their time; the same operations, so the same bits.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn map_avx512<A: Copy, O, F: Fn(A) -> O>(a: &[A], o: &mut [O], f: &F) {
    map_loop(a, o, f)
}

/// See [`map_avx512`].
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn update_avx512<O: Copy, F: Fn(O) -> O>(o: &mut [O], f: &F) {
    update_loop(o, f)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn update_avx2<O: Copy, F: Fn(O) -> O>(o: &mut [O], f: &F) {
    update_loop(o, f)
}

/// `o[i] = f(a[i])` over the common length.
#[inline]
pub(crate) fn map<A: Copy, O, F: Fn(A) -> O>(a: &[A], o: &mut [O], f: &F) {
    #[cfg(target_arch = "x86_64")]
    if avx512() {
        // SAFETY: the CPU has AVX-512F, AVX2 and FMA (checked just above).
        return unsafe { map_avx512(a, o, f) };
    }
    #[cfg(target_arch = "x86_64")]
    if avx2_fma() {
        // SAFETY: the CPU has AVX2 and FMA (checked just above).
        return unsafe { map_avx2(a, o, f) };
    }
    map_loop(a, o, f)
}

/// `o[i] = f(o[i])`.
#[inline]
pub(crate) fn update<O: Copy, F: Fn(O) -> O>(o: &mut [O], f: &F) {
    #[cfg(target_arch = "x86_64")]
    if avx512() {
        // SAFETY: the CPU has AVX-512F, AVX2 and FMA (checked just above).
        return unsafe { update_avx512(o, f) };
    }
    #[cfg(target_arch = "x86_64")]
    if avx2_fma() {
        // SAFETY: the CPU has AVX2 and FMA (checked just above).
        return unsafe { update_avx2(o, f) };
    }
    update_loop(o, f)
}

/// `fn $name(args) { $body(args) }` where `$body` is an `#[inline(always)]` function, compiled twice — for the
/// baseline and, on x86-64, for AVX2 + FMA — with the copy picked at run time: loops in the body vectorise 8
/// lanes wide where the CPU allows (the crate itself is built for baseline x86-64, where they are 4 wide). LLVM
/// does not contract a·b + c into an FMA, so both copies give the same bits.
macro_rules! avx2_copy {
    ($(#[$m:meta])* $vis:vis fn $name:ident $(<$t:ident: $bound:path>)? ($($arg:ident: $ty:ty),* $(,)?) => $body:ident) => {
        $(#[$m])*
        $vis fn $name $(<$t: $bound>)? ($($arg: $ty),*) {
            #[cfg(target_arch = "x86_64")]
            {
                #[target_feature(enable = "avx2,fma")]
                #[allow(clippy::too_many_arguments)]
                unsafe fn avx2 $(<$t: $bound>)? ($($arg: $ty),*) {
                    $body($($arg),*)
                }
                if $crate::runtime::kernels::numeric::vector::avx2_fma() {
                    // SAFETY: the CPU has AVX2 and FMA (checked just above).
                    return unsafe { avx2($($arg),*) };
                }
            }
            $body($($arg),*)
        }
    };
}
pub(crate) use avx2_copy;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::kernels::numeric::{exp_f32, sigmoid_f32, tanh_f32};

    /// The AVX-512 (where the CPU has it) or AVX2 copy and the baseline copy give the same bits (no FMA contraction: the element functions round
    /// the same way in both), over values that cover every branch of exp, tanh and sigmoid.
    #[test]
    fn the_avx2_copy_equals_the_baseline_copy() {
        let mut xs: Vec<f32> = (-2000..2000).map(|i| i as f32 * 0.061).collect();
        xs.extend([0.0, -0.0, 88.7, 89.0, -103.9, -104.0, 1e-30, -1e-30, f32::MAX, f32::MIN, f32::INFINITY, f32::NEG_INFINITY, f32::NAN]);
        let funcs: [fn(f32) -> f32; 3] = [exp_f32, sigmoid_f32, tanh_f32];
        for f in funcs {
            let mut fast = vec![0f32; xs.len()];
            map(&xs, &mut fast, &f);
            let mut base = vec![0f32; xs.len()];
            map_loop(&xs, &mut base, &f);
            for (k, (a, b)) in fast.iter().zip(&base).enumerate() {
                assert!(a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan()), "x = {}: {a} vs {b}", xs[k]);
            }
            let mut inplace = xs.clone();
            update(&mut inplace, &f);
            assert!(inplace.iter().zip(&base).all(|(a, b)| a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())));
        }
    }
}
