//! The tensor-making and index ops: Shape, Size, ConstantOfShape, Range, Trilu, OneHot, EyeLike, NonZero and
//! ReverseSequence (shape rules: [`crate::ir::ops::tensor_ops`]).

use super::layout::{rparam, x_out};
use super::util::strides;
use super::input;
use crate::ir::ops::dims::{int_scalar, ints};
use crate::ir::ops::tensor_ops::{
    const_of_shape, count_nonzero, nonzero_shape, onehot_shape, range_params, reverse_sequence_check, shape_range, RangeParams,
};
use crate::ir::{DType, Element, Tensor};
use crate::with_data;

/// Runs Shape.
pub(super) fn run_shape(start: i64, end: Option<i64>, inputs: &[Option<&Tensor>], outputs: &mut [Tensor]) -> Result<(), String> {
    let (x, out) = x_out(inputs, outputs)?;
    let (s, e) = shape_range(x.shape.len(), start, end);
    for (o, &d) in out.reset::<i64>(&[e - s]).iter_mut().zip(&x.shape[s..e]) {
        *o = d as i64;
    }
    Ok(())
}

/// Runs Size.
pub(super) fn run_size(inputs: &[Option<&Tensor>], outputs: &mut [Tensor]) -> Result<(), String> {
    let (x, out) = x_out(inputs, outputs)?;
    out.reset::<i64>(&[])[0] = x.len() as i64;
    Ok(())
}

/// Runs ConstantOfShape.
pub(super) fn run_constant_of_shape(value: &Tensor, inputs: &[Option<&Tensor>], outputs: &mut [Tensor]) -> Result<(), String> {
    let (x, out) = x_out(inputs, outputs)?;
    let shape = const_of_shape(x, value)?;
    with_data!(&value.data, v => out.reset(&shape).fill(v[0]));
    Ok(())
}

/// Runs Range(start, limit, delta).
pub(super) fn run_range(inputs: &[Option<&Tensor>], outputs: &mut [Tensor]) -> Result<(), String> {
    let (x, out) = x_out(inputs, outputs)?;
    let p = range_params(x, input(inputs, 1)?, input(inputs, 2)?)?;
    eval_range(&p, x.dtype(), out);
    Ok(())
}

/// Runs Trilu (inputs x, k?).
pub(super) fn run_trilu(upper: bool, inputs: &[Option<&Tensor>], outputs: &mut [Tensor]) -> Result<(), String> {
    let (x, out) = x_out(inputs, outputs)?;
    let k = rparam(inputs, 1).map(|t| int_scalar(t, "k")).transpose()?.unwrap_or(0);
    let r = x.shape.len();
    if r < 2 {
        return Err(format!("input must have rank >= 2, it has shape {:?}", x.shape));
    }
    let (n, m) = (x.shape[r - 2], x.shape[r - 1]);
    with_data!(&x.data, v => trilu(v, n, m, k, upper, out.reset(&x.shape)));
    Ok(())
}

/// Runs OneHot (inputs indices, depth, values).
pub(super) fn run_onehot(axis: i64, inputs: &[Option<&Tensor>], outputs: &mut [Tensor]) -> Result<(), String> {
    let (x, out) = x_out(inputs, outputs)?;
    let values = input(inputs, 2)?;
    if values.len() != 2 {
        return Err(format!("values must hold [off, on], it has {} elements", values.len()));
    }
    let (shape, a, depth) = onehot_shape(&x.shape, input(inputs, 1)?, axis)?;
    let inner: usize = x.shape[a..].iter().product();
    with_data!(&x.data, idx => with_data!(&values.data, val => {
        onehot(idx, inner, depth, val[0], val[1], out.reset(&shape))
    }));
    Ok(())
}

/// Runs EyeLike.
pub(super) fn run_eye_like(dtype: Option<DType>, k: i64, inputs: &[Option<&Tensor>], outputs: &mut [Tensor]) -> Result<(), String> {
    let (x, out) = x_out(inputs, outputs)?;
    let &[n, m] = x.shape.as_slice() else {
        return Err(format!("input must be 2-D, it has shape {:?}", x.shape));
    };
    out.reset_dtype(dtype.unwrap_or(x.dtype()), &[n, m]);
    with_data!(&mut out.data, v => eye(v, n, m, k));
    Ok(())
}

/// Runs NonZero.
pub(super) fn run_nonzero(inputs: &[Option<&Tensor>], outputs: &mut [Tensor]) -> Result<(), String> {
    let (x, out) = x_out(inputs, outputs)?;
    let shape = nonzero_shape(&x.shape, count_nonzero(x));
    let o = out.reset::<i64>(&shape);
    with_data!(&x.data, v => nonzero(v, &x.shape, o));
    Ok(())
}

/// Runs ReverseSequence (inputs x, sequence_lens).
pub(super) fn run_reverse_sequence(batch_axis: usize, time_axis: usize, inputs: &[Option<&Tensor>], outputs: &mut [Tensor]) -> Result<(), String> {
    let (x, out) = x_out(inputs, outputs)?;
    let lens = input(inputs, 1)?;
    reverse_sequence_check(&x.shape, &lens.shape, batch_axis, time_axis)?;
    let lens = ints(lens, "sequence_lens")?;
    let t = x.shape[time_axis];
    if let Some(l) = lens.iter().find(|&&l| l < 0 || l as u64 > t as u64) {
        return Err(format!("sequence length {l} is out of range for a time axis of size {t}"));
    }
    with_data!(&x.data, v => reverse_sequence(v, &x.shape, &lens, batch_axis, time_axis, out.reset(&x.shape)));
    Ok(())
}

fn eval_range(p: &RangeParams, dtype: DType, out: &mut Tensor) {
    macro_rules! ints_to {
        ($t:ty, $s:expr, $d:expr, $n:expr) => {
            for (k, o) in out.reset::<$t>(&[$n]).iter_mut().enumerate() {
                *o = ($s as i128 + k as i128 * $d as i128) as $t;
            }
        };
    }
    match *p {
        RangeParams::Int(s, d, n) => match dtype {
            DType::I8 => ints_to!(i8, s, d, n),
            DType::U8 => ints_to!(u8, s, d, n),
            DType::I16 => ints_to!(i16, s, d, n),
            DType::I32 => ints_to!(i32, s, d, n),
            _ => ints_to!(i64, s, d, n),
        },
        RangeParams::Float(s, d, n) => {
            out.reset_dtype(dtype, &[n]);
            fn fill<T: Element>(v: &mut [T], s: f64, d: f64) {
                for (k, o) in v.iter_mut().enumerate() {
                    *o = T::from_f64(s + k as f64 * d);
                }
            }
            with_data!(&mut out.data, v => fill(v, s, d));
        }
    }
}

fn trilu<T: Element>(x: &[T], n: usize, m: usize, k: i64, upper: bool, out: &mut [T]) {
    if n == 0 || m == 0 {
        return;
    }
    let zero = T::default();
    for (xm, om) in x.chunks(n * m).zip(out.chunks_mut(n * m)) {
        for i in 0..n {
            let (xr, or) = (&xm[i * m..(i + 1) * m], &mut om[i * m..(i + 1) * m]);
            let diag = (i as i64).saturating_add(k);
            let (lo, hi) = if upper {
                (diag.clamp(0, m as i64) as usize, m)
            } else {
                (0, diag.saturating_add(1).clamp(0, m as i64) as usize)
            };
            or[..lo].fill(zero);
            or[lo..hi].copy_from_slice(&xr[lo..hi]);
            or[hi..].fill(zero);
        }
    }
}

fn onehot<I: Element, T: Element>(idx: &[I], inner: usize, depth: usize, off: T, on: T, out: &mut [T]) {
    out.fill(off);
    if inner == 0 {
        return;
    }
    for (j, &i) in idx.iter().enumerate() {
        let mut v = i.to_f64() as i64;
        if v < 0 {
            v += depth as i64;
        }
        if v >= 0 && (v as usize) < depth {
            let (o, p) = (j / inner, j % inner);
            out[(o * depth + v as usize) * inner + p] = on;
        }
    }
}

fn eye<T: Element>(v: &mut [T], n: usize, m: usize, k: i64) {
    v.fill(T::default());
    let one = T::from_f64(1.0);
    for i in 0..n {
        let j = i as i64 + k;
        if j >= 0 && (j as usize) < m {
            v[i * m + j as usize] = one;
        }
    }
}

fn nonzero<T: Element>(v: &[T], shape: &[usize], out: &mut [i64]) {
    let zero = T::default();
    let n = out.len() / shape.len().max(1);
    let st = strides(shape);
    let mut c = 0;
    for (flat, x) in v.iter().enumerate() {
        if *x != zero {
            let mut rem = flat;
            for (d, &s) in st.iter().enumerate() {
                out[d * n + c] = (rem / s) as i64;
                rem %= s;
            }
            if shape.is_empty() {
                out[c] = 0;
            }
            c += 1;
        }
    }
}

fn reverse_sequence<T: Element>(x: &[T], shape: &[usize], lens: &[i64], batch: usize, time: usize, out: &mut [T]) {
    out.copy_from_slice(x);
    let st = strides(shape);
    let inner: usize = shape[2..].iter().product();
    for (b, &l) in lens.iter().enumerate() {
        let l = l as usize;
        for t in 0..l {
            let o = b * st[batch] + t * st[time];
            let i = b * st[batch] + (l - 1 - t) * st[time];
            out[o..o + inner].copy_from_slice(&x[i..i + inner]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::layout::tests::{f, i, iota, run};
    use crate::ir::{DType, Op, Tensor};

    #[test]
    fn generators() {
        let y = &run(Op::Range, &[&Tensor::scalar(10i32), &Tensor::scalar(4i32), &Tensor::scalar(-3i32)]).unwrap()[0];
        assert_eq!(y.view::<i32>().unwrap(), &[10, 7]);
        let y =
            &run(Op::Range, &[&Tensor::scalar(3.0f32), &Tensor::scalar(9.0f32), &Tensor::scalar(3.0f32)]).unwrap()[0];
        assert_eq!(y.as_f32().unwrap(), &[3., 6.]);
        let y =
            &run(Op::Range, &[&Tensor::scalar(1.0f64), &Tensor::scalar(0.0f64), &Tensor::scalar(1.0f64)]).unwrap()[0];
        assert_eq!(y.shape, vec![0]);
        let y = &run(Op::ConstantOfShape { value: Tensor::scalar(7i32) }, &[&i(&[2, 1])]).unwrap()[0];
        assert_eq!(y.view::<i32>().unwrap(), &[7, 7]);
        let y = &run(Op::EyeLike { dtype: Some(DType::Bool), k: 1 }, &[&iota(&[2, 3])]).unwrap()[0];
        assert_eq!(y.view::<bool>().unwrap(), &[false, true, false, false, false, true]);
        let x = iota(&[2, 3, 4]);
        let s = &run(Op::Shape { start: -2, end: None }, &[&x]).unwrap()[0];
        assert_eq!(s.view::<i64>().unwrap(), &[3, 4]);
        assert_eq!(run(Op::Size, &[&x]).unwrap()[0].view::<i64>().unwrap(), &[24]);
    }

    #[test]
    fn trilu_onehot_nonzero_reverse() {
        let x = f(&[3, 3], &[1., 2., 3., 4., 5., 6., 7., 8., 9.]);
        let y = &run(Op::Trilu { upper: true }, &[&x, &Tensor::scalar(1i64)]).unwrap()[0];
        assert_eq!(y.as_f32().unwrap(), &[0., 2., 3., 0., 0., 6., 0., 0., 0.]);
        let y = &run(Op::Trilu { upper: false }, &[&x, &Tensor::scalar(-1i64)]).unwrap()[0];
        assert_eq!(y.as_f32().unwrap(), &[0., 0., 0., 4., 0., 0., 7., 8., 0.]);
        // indices [0, -1, 5] with depth 3: -1 wraps to 2, 5 is out of range (all off)
        let idx = Tensor::from_vec(vec![3], vec![0i64, -1, 5]).unwrap();
        let vals = f(&[2], &[0., 1.]);
        let y = &run(Op::OneHot { axis: -1 }, &[&idx, &Tensor::scalar(3i64), &vals]).unwrap()[0];
        assert_eq!(y.as_f32().unwrap(), &[1., 0., 0., 0., 0., 1., 0., 0., 0.]);
        let y = &run(Op::OneHot { axis: 0 }, &[&idx, &Tensor::scalar(3.0f32), &vals]).unwrap()[0];
        assert_eq!(y.as_f32().unwrap(), &[1., 0., 0., 0., 0., 0., 0., 1., 0.]);
        // ONNX NonZero example: [[1, 0], [1, 1]] → [[0, 1, 1], [0, 0, 1]]
        let b = Tensor::from_vec(vec![2, 2], vec![true, false, true, true]).unwrap();
        let y = &run(Op::NonZero, &[&b]).unwrap()[0];
        assert_eq!((y.shape.as_slice(), y.view::<i64>().unwrap()), (&[2, 3][..], &[0, 1, 1, 0, 0, 1][..]));
        // ONNX ReverseSequence example (time_axis 0, batch_axis 1)
        let x = f(&[4, 4], &[0., 4., 8., 12., 1., 5., 9., 13., 2., 6., 10., 14., 3., 7., 11., 15.]);
        let y = &run(Op::ReverseSequence { batch_axis: 1, time_axis: 0 }, &[&x, &i(&[4, 3, 2, 1])]).unwrap()[0];
        assert_eq!(y.as_f32().unwrap(), &[3., 6., 9., 12., 2., 5., 8., 13., 1., 4., 10., 14., 0., 7., 11., 15.]);
    }
}
