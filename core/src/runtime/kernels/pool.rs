//! MaxPool (with optional indices), AveragePool, LpPool and the global pools, over 1 to 3 spatial dims.
//!
//! Window geometry is Conv's ([`super::conv::window_geom`]: auto_pad, pads, dilations, ceil_mode). Each
//! axis gets a table of the valid tap range of every output position, so the window loops run without
//! bounds tests; planes (N·C) run in parallel. Padding never takes part in a max; AveragePool divides by
//! the valid cells, or with count_include_pad by the cells inside the padded input (window parts past the
//! end padding, possible with ceil_mode, are not counted); LpPool treats padding as zeros. Averages and Lp
//! norms accumulate in f64.

use rayon::prelude::*;

use super::conv::{window_geom, Geom, Window};
use super::{input, InferError, Inferred, Scratch, TypeInfo};
use crate::ir::{DType, Element, Op, PoolAttrs, Tensor};
use half::{bf16, f16};

/// Work (window taps) below which a pool runs on the calling thread.
const PAR_MIN: usize = 1 << 15;

fn geom_of(x: &[usize], a: &PoolAttrs, op: &str) -> Result<Geom, String> {
    if x.len() < 3 {
        return Err(format!("{op} input must have rank >= 3 (N, C, spatial...), got shape {x:?}"));
    }
    if a.kernel_shape.is_empty() {
        return Err(format!("{op} needs kernel_shape"));
    }
    let w = Window { kernel: &a.kernel_shape, strides: &a.strides, dilations: &a.dilations, pads: &a.pads, auto_pad: a.auto_pad, ceil_mode: a.ceil_mode };
    window_geom(&x[2..], &w, op)
}

fn out_shape(x: &[usize], g: &Geom) -> Vec<usize> {
    let mut s = x[..2].to_vec();
    s.extend_from_slice(g.out_dims());
    s
}

fn global_shape(x: &[usize], op: &str) -> Result<Vec<usize>, String> {
    if x.len() < 2 {
        return Err(format!("{op} input must have rank >= 2 (N, C, spatial...), got shape {x:?}"));
    }
    let mut s = x[..2].to_vec();
    s.resize(x.len(), 1);
    Ok(s)
}

fn check_dtype(op: &Op, d: DType) -> Result<(), String> {
    let ok = match op {
        Op::MaxPool(_) => d != DType::Bool,
        _ => d.is_float(),
    };
    if ok {
        Ok(())
    } else {
        Err(format!("{} does not support {d}", op.name()))
    }
}

/// Shape inference for the pools. MaxPool always reports its optional indices output too.
pub fn infer(op: &Op, inputs: &[Option<TypeInfo>]) -> Result<Inferred, InferError> {
    let x = super::info(inputs, 0)?;
    check_dtype(op, x.dtype)?;
    Ok(match op {
        Op::MaxPool(a) => {
            let s = out_shape(x.shape, &geom_of(x.shape, a, "MaxPool")?);
            vec![(x.dtype, s.clone()), (DType::I64, s)]
        }
        Op::AveragePool(a) => vec![(x.dtype, out_shape(x.shape, &geom_of(x.shape, a, "AveragePool")?))],
        Op::LpPool(a, _) => vec![(x.dtype, out_shape(x.shape, &geom_of(x.shape, a, "LpPool")?))],
        Op::GlobalAveragePool | Op::GlobalMaxPool => vec![(x.dtype, global_shape(x.shape, &op.name())?)],
        _ => return Err(InferError::Invalid(format!("{} is not a pool", op.name()))),
    })
}

/// Runs a pool.
pub fn eval(op: &Op, inputs: &[Option<&Tensor>], outputs: &mut [Tensor], _scratch: &mut Scratch) -> Result<(), String> {
    let x = input(inputs, 0)?;
    check_dtype(op, x.dtype())?;
    match op {
        Op::MaxPool(a) => {
            let g = geom_of(&x.shape, a, "MaxPool")?;
            let shape = out_shape(&x.shape, &g);
            let (y, rest) = outputs.split_first_mut().ok_or("missing output")?;
            let idx = rest.first_mut();
            macro_rules! go {
                ($t:ty) => {
                    max_pool::<$t>(x.view().ok_or("data")?, &g, &shape, y, idx)
                };
            }
            match x.dtype() {
                DType::F32 => go!(f32),
                DType::F64 => go!(f64),
                DType::F16 => go!(f16),
                DType::BF16 => go!(bf16),
                DType::I8 => go!(i8),
                DType::U8 => go!(u8),
                DType::I16 => go!(i16),
                DType::I32 => go!(i32),
                DType::I64 => go!(i64),
                DType::Bool => Err("MaxPool does not support bool".into()),
            }
        }
        Op::AveragePool(a) | Op::LpPool(a, _) => {
            let name = op.name();
            let g = geom_of(&x.shape, a, &name)?;
            let shape = out_shape(&x.shape, &g);
            let kind = match op {
                Op::LpPool(_, p) if *p == 0 => return Err("LpPool p must be at least 1".into()),
                Op::LpPool(_, p) => Kind::Lp(*p),
                _ => Kind::Avg(a.count_include_pad),
            };
            let y = outputs.first_mut().ok_or("missing output")?;
            float_dispatch(x, |t| sum_pool_typed(t, &g, &shape, kind, y))
        }
        Op::GlobalAveragePool | Op::GlobalMaxPool => {
            let shape = global_shape(&x.shape, &op.name())?;
            let y = outputs.first_mut().ok_or("missing output")?;
            let max = matches!(op, Op::GlobalMaxPool);
            float_dispatch(x, |t| global_typed(t, &shape, max, y))
        }
        _ => Err(format!("{} is not a pool", op.name())),
    }
}

/// A float tensor, for dispatching generic code once per call.
enum FloatView<'a> {
    F32(&'a [f32]),
    F64(&'a [f64]),
    F16(&'a [f16]),
    BF16(&'a [bf16]),
}

fn float_dispatch(x: &Tensor, f: impl FnOnce(FloatView) -> Result<(), String>) -> Result<(), String> {
    let miss = || "data does not match its dtype".to_string();
    match x.dtype() {
        DType::F32 => f(FloatView::F32(x.view().ok_or_else(miss)?)),
        DType::F64 => f(FloatView::F64(x.view().ok_or_else(miss)?)),
        DType::F16 => f(FloatView::F16(x.view().ok_or_else(miss)?)),
        DType::BF16 => f(FloatView::BF16(x.view().ok_or_else(miss)?)),
        d => Err(format!("pooling does not support {d}")),
    }
}

fn sum_pool_typed(x: FloatView, g: &Geom, shape: &[usize], kind: Kind, y: &mut Tensor) -> Result<(), String> {
    match x {
        FloatView::F32(v) => sum_pool(v, g, shape, kind, y.reset(shape)),
        FloatView::F64(v) => sum_pool(v, g, shape, kind, y.reset(shape)),
        FloatView::F16(v) => sum_pool(v, g, shape, kind, y.reset(shape)),
        FloatView::BF16(v) => sum_pool(v, g, shape, kind, y.reset(shape)),
    }
}

fn global_typed(x: FloatView, shape: &[usize], max: bool, y: &mut Tensor) -> Result<(), String> {
    match x {
        FloatView::F32(v) => global(v, shape, max, y.reset(shape)),
        FloatView::F64(v) => global(v, shape, max, y.reset(shape)),
        FloatView::F16(v) => global(v, shape, max, y.reset(shape)),
        FloatView::BF16(v) => global(v, shape, max, y.reset(shape)),
    }
}

/// For one axis and output position: first input index of tap 0, valid taps `lo..hi`, and the taps inside
/// the padded input (count_include_pad's divisor).
#[derive(Clone, Copy, Debug)]
struct Span {
    start: isize,
    lo: usize,
    hi: usize,
    padded: usize,
}

/// Span table of each axis (outputs of axis 0, then 1, then 2).
fn spans(g: &Geom) -> [Vec<Span>; 3] {
    std::array::from_fn(|ax| {
        (0..g.out[ax])
            .map(|o| {
                let start = (o * g.s[ax]) as isize - g.pb[ax] as isize;
                let (k, d, n) = (g.k[ax], g.d[ax] as isize, g.inp[ax] as isize);
                let inside = |lo_b: isize, hi_b: isize| -> (usize, usize) {
                    // taps t with lo_b <= start + t·d < hi_b
                    let lo = if start >= lo_b { 0 } else { ((lo_b - start + d - 1) / d) as usize };
                    let hi = if start >= hi_b { 0 } else { (((hi_b - 1 - start) / d + 1) as usize).min(k) };
                    (lo.min(hi), hi)
                };
                let (lo, hi) = inside(0, n);
                let (plo, phi) = inside(-(g.pb[ax] as isize), n + g.pe[ax] as isize);
                Span { start, lo, hi, padded: phi - plo }
            })
            .collect()
    })
}

/// Calls `f(oi, plane_out)` for every (n, c) plane, in parallel when the work is large.
fn for_planes<T: Send>(y: &mut [T], plane: usize, work: usize, f: impl Fn(usize, &mut [T]) + Sync + Send) {
    if plane == 0 {
        return;
    }
    if rayon::current_num_threads() > 1 && work >= PAR_MIN {
        let min_len = (PAR_MIN / (work / (y.len() / plane).max(1)).max(1)).max(1);
        y.par_chunks_mut(plane).enumerate().with_min_len(min_len).for_each(|(i, p)| f(i, p));
    } else {
        y.chunks_mut(plane).enumerate().for_each(|(i, p)| f(i, p));
    }
}

/// Visits the valid input offsets (within a plane) of the window of output (oz, oy, ox).
#[inline]
fn window(g: &Geom, sz: &Span, sy: &Span, sx: &Span, mut f: impl FnMut(usize)) {
    let [_, ih, iw] = g.inp;
    for kz in sz.lo..sz.hi {
        let iz = (sz.start + (kz * g.d[0]) as isize) as usize;
        for ky in sy.lo..sy.hi {
            let iy = (sy.start + (ky * g.d[1]) as isize) as usize;
            let row = (iz * ih + iy) * iw;
            for kx in sx.lo..sx.hi {
                f(row + (sx.start + (kx * g.d[2]) as isize) as usize);
            }
        }
    }
}

fn max_pool<T: Element>(x: &[T], g: &Geom, shape: &[usize], y: &mut Tensor, idx: Option<&mut Tensor>) -> Result<(), String> {
    let (pin, pout) = (g.in_size(), g.out_size());
    let planes = shape[0] * shape[1];
    if x.len() != planes * pin {
        return Err("MaxPool input holds fewer elements than its shape says".into());
    }
    let tabs = spans(g);
    let work = planes * pout * g.k_size();
    let yv = y.reset::<T>(shape);
    let par = rayon::current_num_threads() > 1 && work >= PAR_MIN;
    match idx {
        None => for_planes(yv, pout, work, |pi, yp| max_plane(&x[pi * pin..][..pin], g, &tabs, yp, None)),
        Some(it) => {
            // Indices are flat into the whole input (storage_order 0), so they include the plane offset.
            let iv = it.reset::<i64>(shape);
            if pout == 0 {
                return Ok(());
            }
            let run = |(pi, (yp, ip)): (usize, (&mut [T], &mut [i64]))| {
                max_plane(&x[pi * pin..][..pin], g, &tabs, yp, Some((ip, (pi * pin) as i64)));
            };
            if par {
                yv.par_chunks_mut(pout).zip(iv.par_chunks_mut(pout)).enumerate().for_each(run);
            } else {
                yv.chunks_mut(pout).zip(iv.chunks_mut(pout)).enumerate().for_each(run);
            }
        }
    }
    Ok(())
}

/// Max over each window of one plane; with `idx`, also the flat input index of the max (`base` + offset
/// in the plane; -1 for a window that covers only padding, whose value is the type's lowest).
fn max_plane<T: Element>(xp: &[T], g: &Geom, tabs: &[Vec<Span>; 3], yp: &mut [T], mut idx: Option<(&mut [i64], i64)>) {
    let empty = T::from_f64(f64::NEG_INFINITY);
    let mut o = 0;
    for sz in &tabs[0] {
        for sy in &tabs[1] {
            for sx in &tabs[2] {
                let mut b: Option<(T, usize)> = None;
                window(g, sz, sy, sx, |i| {
                    let v = xp[i];
                    match b {
                        // NaN loses to any number (the ONNX reference drops NaNs)
                        #[allow(clippy::eq_op)]
                        Some((cur, _)) if !(v > cur || cur != cur) => {}
                        _ => b = Some((v, i)),
                    }
                });
                yp[o] = b.map_or(empty, |b| b.0);
                if let Some((ip, base)) = idx.as_mut() {
                    ip[o] = b.map_or(-1, |b| *base + b.1 as i64);
                }
                o += 1;
            }
        }
    }
}

#[derive(Clone, Copy, Debug)]
enum Kind {
    /// Average; `true`: count_include_pad.
    Avg(bool),
    /// Lp norm with this p.
    Lp(u32),
}

fn sum_pool<T: Element>(x: &[T], g: &Geom, shape: &[usize], kind: Kind, y: &mut [T]) -> Result<(), String> {
    let (pin, pout) = (g.in_size(), g.out_size());
    let planes = shape[0] * shape[1];
    if x.len() != planes * pin {
        return Err("pool input holds fewer elements than its shape says".into());
    }
    let tabs = spans(g);
    let work = planes * pout * g.k_size();
    for_planes(y, pout, work, |pi, yp| {
        let xp = &x[pi * pin..][..pin];
        let mut o = 0;
        for sz in &tabs[0] {
            for sy in &tabs[1] {
                for sx in &tabs[2] {
                    let v = match kind {
                        Kind::Avg(include_pad) => {
                            let mut s = 0f64;
                            window(g, sz, sy, sx, |i| s += xp[i].to_f64());
                            let n = if include_pad {
                                sz.padded * sy.padded * sx.padded
                            } else {
                                (sz.hi - sz.lo) * (sy.hi - sy.lo) * (sx.hi - sx.lo)
                            };
                            s / n as f64
                        }
                        Kind::Lp(p) => {
                            let mut s = 0f64;
                            window(g, sz, sy, sx, |i| s += xp[i].to_f64().abs().powi(p as i32));
                            match p {
                                1 => s,
                                2 => s.sqrt(),
                                _ => s.powf(1.0 / p as f64),
                            }
                        }
                    };
                    yp[o] = T::from_f64(v);
                    o += 1;
                }
            }
        }
    });
    Ok(())
}

fn global<T: Element>(x: &[T], shape: &[usize], max: bool, y: &mut [T]) -> Result<(), String> {
    let planes = shape[0] * shape[1];
    if planes == 0 {
        return Ok(());
    }
    if x.len() % planes != 0 {
        return Err("pool input holds fewer elements than its shape says".into());
    }
    let plane = x.len() / planes;
    let f = |(xp, o): (&[T], &mut T)| {
        *o = if max {
            #[allow(clippy::eq_op)]
            xp.iter().copied().fold(None, |b: Option<T>, v| match b {
                Some(cur) if !(v > cur || cur != cur) => Some(cur),
                _ => Some(v),
            })
            .unwrap_or(T::from_f64(f64::NEG_INFINITY))
        } else {
            T::from_f64(xp.iter().map(|v| v.to_f64()).sum::<f64>() / plane as f64)
        };
    };
    if rayon::current_num_threads() > 1 && x.len() >= PAR_MIN && plane > 0 {
        x.par_chunks(plane).zip(y.par_iter_mut()).for_each(f);
    } else if plane > 0 {
        x.chunks(plane).zip(y.iter_mut()).for_each(f);
    } else {
        y.fill(T::from_f64(if max { f64::NEG_INFINITY } else { f64::NAN }));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::AutoPad;

    fn attrs(k: &[usize], s: &[usize], p: &[usize]) -> PoolAttrs {
        PoolAttrs { kernel_shape: k.to_vec(), strides: s.to_vec(), dilations: vec![], pads: p.to_vec(), auto_pad: AutoPad::NotSet, ceil_mode: false, count_include_pad: false }
    }

    fn run(op: &Op, x: &Tensor, n_out: usize) -> Vec<Tensor> {
        let mut outs = vec![Tensor::default(); n_out];
        eval(op, &[Some(x)], &mut outs, &mut Scratch::default()).unwrap();
        let inferred = infer(op, &[Some(TypeInfo { dtype: x.dtype(), shape: &x.shape, value: None })]).unwrap();
        for (o, (d, s)) in outs.iter().zip(inferred) {
            assert_eq!((o.dtype(), &o.shape), (d, &s), "infer must predict eval");
        }
        outs
    }

    fn x5() -> Tensor {
        Tensor::from_f32(vec![1, 1, 5, 5], (1..=25).map(|v| v as f32).collect())
    }

    /// Values from the ONNX operator tests (maxpool/averagepool *_precomputed_*).
    #[test]
    fn onnx_precomputed_cases() {
        let y = &run(&Op::MaxPool(attrs(&[5, 5], &[], &[2, 2, 2, 2])), &x5(), 1)[0];
        #[rustfmt::skip]
        assert_eq!(y.as_f32().unwrap(), &[13., 14., 15., 15., 15., 18., 19., 20., 20., 20., 23., 24., 25., 25., 25., 23., 24., 25., 25., 25., 23., 24., 25., 25., 25.]);
        let y = &run(&Op::MaxPool(attrs(&[2, 2], &[2, 2], &[])), &x5(), 1)[0];
        assert_eq!(y.as_f32().unwrap(), &[7., 9., 17., 19.]);
        let mut a = attrs(&[3, 3], &[2, 2], &[]);
        a.auto_pad = AutoPad::SameUpper;
        let y = &run(&Op::MaxPool(a.clone()), &x5(), 1)[0];
        assert_eq!(y.as_f32().unwrap(), &[7., 9., 10., 17., 19., 20., 22., 24., 25.]);
        let y = &run(&Op::AveragePool(a), &x5(), 1)[0];
        assert_eq!(y.as_f32().unwrap(), &[4., 5.5, 7., 11.5, 13., 14.5, 19., 20.5, 22.]);
        let y = &run(&Op::AveragePool(attrs(&[5, 5], &[], &[2, 2, 2, 2])), &x5(), 1)[0];
        assert_eq!(&y.as_f32().unwrap()[..5], &[7., 7.5, 8., 8.5, 9.]);
        let mut a = attrs(&[5, 5], &[], &[2, 2, 2, 2]);
        a.count_include_pad = true;
        let y = &run(&Op::AveragePool(a), &x5(), 1)[0];
        let want = [2.52f32, 3.6, 4.8, 4.08, 3.24];
        for (g, w) in y.as_f32().unwrap().iter().zip(want) {
            assert!((g - w).abs() < 1e-5);
        }
    }

    #[test]
    fn ceil_mode_dilation_and_indices() {
        // averagepool_2d_ceil: 4×4, kernel 3, stride 2, ceil → 2×2 [6, 7.5, 12, 13.5]
        let x = Tensor::from_f32(vec![1, 1, 4, 4], (1..=16).map(|v| v as f32).collect());
        let mut a = attrs(&[3, 3], &[2, 2], &[]);
        a.ceil_mode = true;
        assert_eq!(run(&Op::AveragePool(a.clone()), &x, 1)[0].as_f32().unwrap(), &[6., 7.5, 12., 13.5]);
        assert_eq!(run(&Op::MaxPool(a), &x, 1)[0].as_f32().unwrap(), &[11., 12., 15., 16.]);
        // maxpool_2d_dilations: kernel 2, dilation 2 → [11, 12, 15, 16]
        let mut a = attrs(&[2, 2], &[1, 1], &[]);
        a.dilations = vec![2, 2];
        assert_eq!(run(&Op::MaxPool(a), &x, 1)[0].as_f32().unwrap(), &[11., 12., 15., 16.]);
        // last window must start inside the input or the begin padding: 2×2, k3 s3 pads 1, ceil → 1×1
        let x2 = Tensor::from_f32(vec![1, 1, 2, 2], vec![1., 2., 3., 4.]);
        let mut a = attrs(&[3, 3], &[3, 3], &[1, 1, 1, 1]);
        a.ceil_mode = true;
        assert_eq!(run(&Op::AveragePool(a), &x2, 1)[0].shape, vec![1, 1, 1, 1]);
        // maxpool_with_argmax_2d_precomputed_strides: indices flat over the input, batch/channel included
        let x = Tensor::from_f32(vec![1, 2, 5, 5], (1..=50).map(|v| v as f32).collect());
        let mut a = attrs(&[2, 2], &[2, 2], &[]);
        let outs = run(&Op::MaxPool(a.clone()), &x, 2);
        assert_eq!(outs[1].to_i64_vec(), vec![6, 8, 16, 18, 31, 33, 41, 43]);
        // with padding: indices point at real cells, never at padding
        a.pads = vec![1, 1, 1, 1];
        let x = Tensor::from_f32(vec![1, 1, 3, 3], vec![-1., -2., -3., -4., -5., -6., -7., -8., -9.]);
        let outs = run(&Op::MaxPool(a), &x, 2);
        assert_eq!(outs[0].as_f32().unwrap(), &[-1., -2., -4., -5.]);
        assert_eq!(outs[1].to_i64_vec(), vec![0, 1, 3, 4]);
    }

    #[test]
    fn lp_global_1d_3d_and_types() {
        let x = Tensor::from_f32(vec![1, 1, 4], vec![3., -4., 0., 1.]);
        let y = &run(&Op::LpPool(attrs(&[2], &[2], &[]), 2), &x, 1)[0];
        assert_eq!(y.as_f32().unwrap(), &[5., 1.]);
        let y = &run(&Op::LpPool(attrs(&[2], &[2], &[]), 1), &x, 1)[0];
        assert_eq!(y.as_f32().unwrap(), &[7., 1.]);
        let x = Tensor::from_f32(vec![2, 2, 2, 2], (0..16).map(|v| v as f32).collect());
        assert_eq!(run(&Op::GlobalAveragePool, &x, 1)[0].as_f32().unwrap(), &[1.5, 5.5, 9.5, 13.5]);
        let g = &run(&Op::GlobalMaxPool, &x, 1)[0];
        assert_eq!((g.shape.clone(), g.as_f32().unwrap().to_vec()), (vec![2, 2, 1, 1], vec![3., 7., 11., 15.]));
        let x = Tensor::from_f32(vec![1, 1, 3, 3, 3], (0..27).map(|v| v as f32).collect());
        let y = &run(&Op::MaxPool(attrs(&[2, 2, 2], &[], &[])), &x, 1)[0];
        assert_eq!(y.as_f32().unwrap(), &[13., 14., 16., 17., 22., 23., 25., 26.]);
        let xi = Tensor::from_vec(vec![1, 1, 3], vec![1u8, 7, 3]).unwrap();
        assert_eq!(run(&Op::MaxPool(attrs(&[2], &[], &[])), &xi, 1)[0].view::<u8>().unwrap(), &[7, 7]);
        let x64 = Tensor::from_vec(vec![1, 1, 3], vec![1f64, 2., 4.]).unwrap();
        assert_eq!(run(&Op::AveragePool(attrs(&[2], &[], &[])), &x64, 1)[0].view::<f64>().unwrap(), &[1.5, 3.0]);
        let mut outs = vec![Tensor::default()];
        assert!(eval(&Op::AveragePool(attrs(&[2], &[], &[])), &[Some(&xi)], &mut outs, &mut Scratch::default()).unwrap_err().contains("u8"));
        assert!(eval(&Op::MaxPool(attrs(&[4], &[], &[])), &[Some(&xi)], &mut outs, &mut Scratch::default()).is_err());
    }
}
