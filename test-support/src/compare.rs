//! Tolerances and comparisons of tensors: `allclose` (numpy's, NaN equal to NaN), a worst-element assertion,
//! the peer comparison relative to the output's mean magnitude, and the count of differing values that the
//! int8 tests hold at zero.

use tpu_sdk_core::ir::{DType, Tensor, TensorData};

/// How close a float result must be: `|got - want| <= atol + rtol * |want|`, with a looser pair for f16/bf16
/// results. Integers and booleans are compared exactly; NaN equals NaN and infinities must be equal.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Tolerance {
    /// Relative tolerance for f32/f64.
    pub rtol: f64,
    /// Absolute tolerance for f32/f64.
    pub atol: f64,
    /// Relative tolerance for f16/bf16.
    pub half_rtol: f64,
    /// Absolute tolerance for f16/bf16.
    pub half_atol: f64,
}

impl Tolerance {
    /// The ONNX backend test suite's defaults (`numpy.testing.assert_allclose` with rtol 1e-3, atol 1e-7), and
    /// 1e-2 / 1e-3 for half precision: the CPU runtime against the suite's expected outputs.
    pub const ONNX_BACKEND: Tolerance = Tolerance { rtol: 1e-3, atol: 1e-7, half_rtol: 1e-2, half_atol: 1e-3 };
    /// Another target against the CPU runtime: 1e-4 relative plus 1e-6 absolute; for half precision a few units
    /// in the last place (XLA computes f16 ops in f32 and rounds once).
    pub const CPU_RUNTIME: Tolerance = Tolerance { rtol: 1e-4, atol: 1e-6, half_rtol: 2e-3, half_atol: 1e-3 };
}

/// Whether `got` equals `want` within `tol` (same dtype and shape); `Err` names the first element that differs.
pub fn allclose(got: &Tensor, want: &Tensor, tol: &Tolerance) -> Result<(), String> {
    if got.dtype() != want.dtype() || got.shape != want.shape {
        return Err(format!("{} {:?} instead of {} {:?}", got.dtype(), got.shape, want.dtype(), want.shape));
    }
    if let (TensorData::Bool(a), TensorData::Bool(b)) = (&got.data, &want.data) {
        return if a == b { Ok(()) } else { Err("bool values differ".into()) };
    }
    let exact = !want.dtype().is_float();
    let (rtol, atol) = match want.dtype() {
        DType::F16 | DType::BF16 => (tol.half_rtol, tol.half_atol),
        _ => (tol.rtol, tol.atol),
    };
    for (i, (x, y)) in got.to_f64_vec().into_iter().zip(want.to_f64_vec()).enumerate() {
        let ok = if exact {
            x == y
        } else if y.is_nan() {
            x.is_nan()
        } else if y.is_infinite() {
            x == y
        } else {
            (x - y).abs() <= atol + rtol * y.abs()
        };
        if !ok {
            return Err(format!("element {i}: {x} instead of {y}"));
        }
    }
    Ok(())
}

/// Asserts `got` matches `want` elementwise within `rtol` relative (plus `atol` absolute), same shape and
/// dtype; the message names the worst element and by how much the tolerance is exceeded.
pub fn assert_close(got: &Tensor, want: &Tensor, rtol: f64, atol: f64, what: &str) {
    assert_eq!(got.shape, want.shape, "{what}: shape");
    assert_eq!(got.dtype(), want.dtype(), "{what}: dtype");
    let (g, w) = (got.to_f64_vec(), want.to_f64_vec());
    let mut worst = (0.0f64, 0usize);
    for (i, (a, b)) in g.iter().zip(&w).enumerate() {
        if a.is_nan() && b.is_nan() || a == b {
            continue;
        }
        let err = (a - b).abs() / (atol + rtol * b.abs());
        if err.is_nan() || err > worst.0 {
            worst = (if err.is_nan() { f64::INFINITY } else { err }, i);
        }
    }
    assert!(worst.0 <= 1.0, "{what}: element {} is {} but expected {} (tolerance exceeded {:.2}x)", worst.1, g[worst.1], w[worst.1], worst.0);
}

/// A whole model's output against a peer's: every element within `rtol` of `|theirs| + mean |theirs|`
/// (deep networks on random inputs have outputs near zero whose relative error means nothing). Returns the
/// worst relative error; `Err` names the model (`what`), the output `k`, the element and both values, the
/// peer by `peer`.
pub fn relative_to_mean(what: &str, k: usize, ours: &Tensor, theirs: &Tensor, peer: &str, rtol: f64) -> Result<f64, String> {
    if ours.shape != theirs.shape || ours.dtype() != theirs.dtype() {
        return Err(format!("{what} output {k}: {}{:?} vs {peer} {}{:?}", ours.dtype(), ours.shape, theirs.dtype(), theirs.shape));
    }
    let (a, b) = (ours.to_f64_vec(), theirs.to_f64_vec());
    let mean_abs = b.iter().map(|x| x.abs()).sum::<f64>() / b.len().max(1) as f64;
    let mut worst = 0.0f64;
    for (i, (&x, &y)) in a.iter().zip(&b).enumerate() {
        let rel = (x - y).abs() / (y.abs() + mean_abs).max(f64::MIN_POSITIVE);
        if !(rel <= rtol) {
            return Err(format!("{what} output {k} element {i}: ours {x}, {peer} {y} (relative error {rel:.2e})"));
        }
        worst = worst.max(rel);
    }
    Ok(worst)
}

/// Number of values of `a` and `b` that differ (bitwise for f32); panics when shapes or dtypes differ.
pub fn differing(a: &Tensor, b: &Tensor) -> usize {
    assert_eq!(a.shape, b.shape, "shapes differ");
    assert_eq!(a.dtype(), b.dtype(), "dtypes differ");
    if let (Some(x), Some(y)) = (a.as_f32(), b.as_f32()) {
        return x.iter().zip(y).filter(|(p, q)| p.to_bits() != q.to_bits()).count();
    }
    a.to_i64_vec().iter().zip(b.to_i64_vec()).filter(|(p, q)| **p != *q).count()
}
