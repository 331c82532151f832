//! MaxPool (with optional indices), AveragePool, LpPool and the global pools, over 1 to 3 spatial dims.
//!
//! Window geometry is Conv's ([`crate::ir::ops::conv::window_geom`]: auto_pad, pads, dilations, ceil_mode). Each
//! axis gets a table of the valid tap range of every output position, so the window loops run without
//! bounds tests; planes (N·C) run in parallel. Padding never takes part in a max; AveragePool divides by
//! the valid cells, or with count_include_pad by the cells inside the padded input (window parts past the
//! end padding, possible with ceil_mode, are not counted); LpPool treats padding as zeros. Averages and Lp
//! norms accumulate in f64. On f32/f64 over 1-D/2-D (and for MaxPool without the indices output), the
//! common case, a vectorised path runs instead: planes copied into bordered scratch planes, one pass per
//! kernel tap (see [`pool_fast`]).

use crate::runtime::spin_pool;

use super::numeric::{vector::avx2_copy, Real};
use super::{input, Scratch};
use crate::ir::ops::conv::Geom;
use crate::ir::ops::pool::{check_dtype, geom_of, global_shape, out_shape};
use crate::ir::{DType, Element, PoolAttrs, Tensor};
use half::{bf16, f16};

/// Work (window taps) below which a pool runs on the calling thread.
const PAR_MIN: usize = 1 << 15;

/// Runs MaxPool (with the optional indices output).
pub(super) fn run_max_pool(a: &PoolAttrs, inputs: &[Option<&Tensor>], outputs: &mut [Tensor], scratch: &mut Scratch) -> Result<(), String> {
    let x = input(inputs, 0)?;
    check_dtype("MaxPool", true, x.dtype())?;
    let g = geom_of(&x.shape, a, "MaxPool")?;
    let shape = out_shape(&x.shape, &g);
    let (y, rest) = outputs.split_first_mut().ok_or("missing output")?;
    let idx = rest.first_mut();
    // f32/f64 1-D/2-D without indices: the vectorised padded-plane path (which needs a non-empty plane)
    let flat2d = g.inp[0] == 1 && g.k[0] == 1 && g.pb[0] == 0 && idx.is_none() && g.in_size() > 0;
    match x.dtype() {
        DType::F32 if flat2d => return pool_fast::<f32>(x.view().ok_or("data")?, &g, &shape, Fast::Max, y.reset(&shape), &mut scratch.f32),
        DType::F64 if flat2d => return pool_fast::<f64>(x.view().ok_or("data")?, &g, &shape, Fast::Max, y.reset(&shape), &mut scratch.f64),
        _ => {}
    }
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

/// Runs AveragePool (`lp` None) or LpPool (`lp` its p); `name` is the op's.
pub(super) fn window_pool(name: &str, a: &PoolAttrs, lp: Option<u32>, inputs: &[Option<&Tensor>], outputs: &mut [Tensor], scratch: &mut Scratch) -> Result<(), String> {
    let x = input(inputs, 0)?;
    check_dtype(name, false, x.dtype())?;
    let g = geom_of(&x.shape, a, name)?;
    let shape = out_shape(&x.shape, &g);
    let kind = match lp {
        Some(0) => return Err("LpPool p must be at least 1".into()),
        Some(p) => Kind::Lp(p),
        None => Kind::Avg(a.count_include_pad),
    };
    let y = outputs.first_mut().ok_or("missing output")?;
    if g.inp[0] == 1 && g.k[0] == 1 && g.pb[0] == 0 && g.in_size() > 0 {
        let fast = match kind {
            Kind::Avg(include_pad) => Fast::Avg(include_pad),
            Kind::Lp(p) => Fast::Lp(p),
        };
        match x.dtype() {
            DType::F32 => return pool_fast::<f32>(x.view().ok_or("data")?, &g, &shape, fast, y.reset(&shape), &mut scratch.f32),
            DType::F64 => return pool_fast::<f64>(x.view().ok_or("data")?, &g, &shape, fast, y.reset(&shape), &mut scratch.f64),
            _ => {}
        }
    }
    float_dispatch(x, |t| sum_pool_typed(t, &g, &shape, kind, y))
}

/// Runs GlobalMaxPool (`max`) or GlobalAveragePool.
pub(super) fn global_pool(max: bool, inputs: &[Option<&Tensor>], outputs: &mut [Tensor]) -> Result<(), String> {
    let name = if max { "GlobalMaxPool" } else { "GlobalAveragePool" };
    let x = input(inputs, 0)?;
    check_dtype(name, false, x.dtype())?;
    let shape = global_shape(&x.shape, name)?;
    let y = outputs.first_mut().ok_or("missing output")?;
    float_dispatch(x, |t| global_typed(t, &shape, max, y))
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
    if spin_pool::threads() > 1 && work >= PAR_MIN {
        spin_pool::for_each_piece_mut(y, plane, || (), |_, i, p| f(i, p));
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

/// What the vectorised path computes.
#[derive(Clone, Copy, Debug)]
enum Fast {
    Max,
    Avg(bool),
    Lp(u32),
}

/// Pooling of f32/f64 planes over 1-D/2-D windows (MaxPool without indices, AveragePool, LpPool): each
/// plane is copied into a bordered plane in a per-thread scratch slice (`-inf` borders for max, zeros
/// otherwise; `|x|^p` for Lp), then every output row accumulates the kernel taps one contiguous (or
/// stride-2) pass per tap, which vectorises; averages and Lp roots are applied per output at the end.
/// `max` drops NaN like the ONNX reference.
fn pool_fast<T: Real>(x: &[T], g: &Geom, shape: &[usize], kind: Fast, y: &mut [T], scratch: &mut Vec<T>) -> Result<(), String> {
    let (pin, pout) = (g.in_size(), g.out_size());
    let planes = shape[0] * shape[1];
    if x.len() != planes * pin {
        return Err("pool input holds fewer elements than its shape says".into());
    }
    if y.is_empty() {
        return Ok(());
    }
    let (h, wd) = (g.inp[1], g.inp[2]);
    let (oh, ow) = (g.out[1], g.out[2]);
    let ([_, kh, kw], [_, sh, sw], [_, dh, dw], [_, pt, pl]) = (g.k, g.s, g.d, g.pb);
    if dh == 1 && dw == 1 && !matches!(kind, Fast::Lp(_)) && oh * ow * 16 <= kh * kw {
        pool_wide_windows(x, g, planes, kind, y);
        return Ok(());
    }
    if matches!(kind, Fast::Max) && sh == 1 && sw == 1 {
        max_separable(x, g, planes, y, scratch);
        return Ok(());
    }
    // padded plane: begin pads, room for the last window, and 2 spare columns so that a stride-2 pass
    // can read its values in pairs
    let hp = (h + pt).max((oh - 1) * sh + (kh - 1) * dh + 1);
    let wp = (wd + pl).max((ow - 1) * sw + (kw - 1) * dw + 1) + 2;
    // horizontal stride 2 (undilated): the padded plane's even and odd columns as two planes side by side in
    // each row, so every tap is a contiguous pass (a 3×3 stride-2 MaxPool spent most of its time picking every
    // other value)
    let halves = sw == 2 && dw == 1;
    let wq = wp.div_ceil(2);
    let row_len = if halves { 2 * wq } else { wp };
    let border = if matches!(kind, Fast::Max) { T::from_f64(f64::NEG_INFINITY) } else { T::ZERO };
    let tabs = spans(g);
    let plane = FastPlane { kind, wd, ow, kh, kw, sh, sw, dh, dw, pt, pl, row_len, halves, wq, border, tabs: &tabs };
    plane_lanes(y, planes, pout, planes * pout * g.k_size(), hp * row_len, scratch, &|first, ys, buf| {
        buf.fill(border);
        for (k, yp) in ys.chunks_mut(pout).enumerate() {
            fast_plane(&x[(first + k) * pin..][..pin], yp, buf, &plane);
        }
    });
    Ok(())
}

/// Calls `lane(first, ys, buf)` for runs of whole output planes (`pout` values each) of `y`: one run on the
/// calling thread, or one per thread from [`PAR_MIN`] window taps (`work`); `first` is the run's first plane,
/// `buf` its own `buf_len` values of `scratch` (grown as needed).
#[allow(clippy::too_many_arguments)]
fn plane_lanes<T: Real>(y: &mut [T], planes: usize, pout: usize, work: usize, buf_len: usize, scratch: &mut Vec<T>, lane: &(dyn Fn(usize, &mut [T], &mut [T]) + Sync)) {
    let lanes = if spin_pool::threads() > 1 && work >= PAR_MIN { spin_pool::threads().min(planes) } else { 1 };
    let per_lane = planes.div_ceil(lanes);
    if scratch.len() < lanes * buf_len {
        scratch.resize(lanes * buf_len, T::ZERO);
    }
    let bufs = &mut scratch[..lanes * buf_len];
    if lanes == 1 {
        lane(0, y, bufs);
    } else {
        spin_pool::for_each_chunk_mut2(y, per_lane * pout, bufs, buf_len, &|l, ys, buf| lane(l * per_lane, ys, buf));
    }
}

/// The padded planes of [`max_separable`]: `hp × wp` values each, the input at row `pt`, column `pl`.
struct SeparablePlanes {
    h: usize,
    wd: usize,
    oh: usize,
    ow: usize,
    kh: usize,
    kw: usize,
    dh: usize,
    dw: usize,
    pt: usize,
    pl: usize,
    hp: usize,
    wp: usize,
}

/// MaxPool with unit strides, separably: the windows' row maxima, then the maxima of `kh` of those, each
/// tap one pass over a whole run of padded planes laid end to end (values past a row's outputs are computed
/// and dropped). A tap pass per output row and window tap, as [`pool_fast`] makes, is a pass over `ow`
/// values: YOLOv8's SPPF (5×5 over 8×8 planes) took 0.09 ms a pool that way, 200 passes of 8 values per plane.
/// The maximum of a window is the same whatever the order (NaN propagates through [`Real::max_`]).
fn max_separable<T: Real>(x: &[T], g: &Geom, planes: usize, y: &mut [T], scratch: &mut Vec<T>) {
    let ([_, h, wd], [_, oh, ow]) = (g.inp, g.out);
    let ([_, kh, kw], [_, dh, dw], [_, pt, pl]) = (g.k, g.d, g.pb);
    let hp = (h + pt).max((oh - 1) + (kh - 1) * dh + 1);
    let wp = (wd + pl).max((ow - 1) + (kw - 1) * dw + 1);
    let sp = SeparablePlanes { h, wd, oh, ow, kh, kw, dh, dw, pt, pl, hp, wp };
    let (pin, pout, ps) = (h * wd, oh * ow, hp * wp);
    // planes per run: about 16K values in each of the run's two buffers
    let run = ((1 << 14) / ps).clamp(1, planes);
    plane_lanes(y, planes, pout, planes * pout * kh * kw, 2 * run * ps, scratch, &|first, ys, buf| {
        for (r, yr) in ys.chunks_mut(run * pout).enumerate() {
            let p0 = first + r * run;
            let np = yr.len() / pout;
            separable_run(&x[p0 * pin..(p0 + np) * pin], yr, buf, &sp);
        }
    });
}

avx2_copy!(
    /// One run of [`max_separable`]'s planes: `x` their inputs, `y` their outputs, `buf` two run buffers.
    fn separable_run<T: Real>(x: &[T], y: &mut [T], buf: &mut [T], p: &SeparablePlanes) => separable_run_body);

#[inline(always)]
fn separable_run_body<T: Real>(x: &[T], y: &mut [T], buf: &mut [T], p: &SeparablePlanes) {
    let (pin, pout, ps) = (p.h * p.wd, p.oh * p.ow, p.hp * p.wp);
    let np = y.len() / pout;
    let n = np * ps;
    let (a, rest) = buf.split_at_mut(n);
    let b = &mut rest[..n];
    a.fill(T::from_f64(f64::NEG_INFINITY));
    for (k, xp) in x.chunks_exact(pin).enumerate() {
        for (iy, xr) in xp.chunks_exact(p.wd).enumerate() {
            a[k * ps + (iy + p.pt) * p.wp + p.pl..][..p.wd].copy_from_slice(xr);
        }
    }
    let max_into = |d: &mut [T], s: &[T]| d.iter_mut().zip(s).for_each(|(d, &v)| *d = d.max_(v));
    // b[i]: the maximum of a[i + kx·dw] over the window's columns; then a[i]: of b[i + ky·dh·wp] over its rows
    let m = n - (p.kw - 1) * p.dw;
    b[..m].copy_from_slice(&a[..m]);
    for kx in 1..p.kw {
        max_into(&mut b[..m], &a[kx * p.dw..][..m]);
    }
    let m2 = m - (p.kh - 1) * p.dh * p.wp;
    a[..m2].copy_from_slice(&b[..m2]);
    for ky in 1..p.kh {
        max_into(&mut a[..m2], &b[ky * p.dh * p.wp..][..m2]);
    }
    for (k, yp) in y.chunks_exact_mut(pout).enumerate() {
        for (oy, yr) in yp.chunks_exact_mut(p.ow).enumerate() {
            yr.copy_from_slice(&a[k * ps + oy * p.wp..][..p.ow]);
        }
    }
}

/// Max or average pooling where the windows are large and the outputs few (a window the size of the plane: an
/// average over the whole feature map that a converter wrote as AveragePool): each output reduces the valid
/// part of each of its window rows as one contiguous slice, straight from the input. The tap-by-tap passes of
/// [`pool_fast`] would make `kh·kw` passes over a one-element output row (MediaPipe's selfie segmenter: 2 ms for
/// a 16×128×128 average).
fn pool_wide_windows<T: Real>(x: &[T], g: &Geom, planes: usize, kind: Fast, y: &mut [T]) {
    let (pin, pout) = (g.in_size(), g.out_size());
    let wd = g.inp[2];
    let tabs = spans(g);
    for_planes(y, pout, planes * pin, |pi, yp| {
        let xp = &x[pi * pin..][..pin];
        let mut o = 0;
        for sy in &tabs[1] {
            for sx in &tabs[2] {
                let (c0, c1) = ((sx.start + sx.lo as isize) as usize, (sx.start + sx.hi as isize) as usize);
                let rows = (sy.lo..sy.hi).map(|ky| {
                    let r = (sy.start + ky as isize) as usize;
                    &xp[r * wd + c0..r * wd + c1.max(c0)]
                });
                yp[o] = match kind {
                    Fast::Max => rows.fold(T::NEG_INFINITY, |m, r| m.max_(row_max(r))),
                    Fast::Avg(include_pad) => {
                        let n = if include_pad { sy.padded * sx.padded } else { (sy.hi - sy.lo) * (sx.hi - sx.lo) };
                        T::from_f64(rows.map(|r| row_sum(r).to_f64()).sum::<f64>() / n as f64)
                    }
                    Fast::Lp(_) => unreachable!("LpPool takes the tap passes"),
                };
                o += 1;
            }
        }
    });
}

/// `f` folded over a row from `init` in eight interleaved partial results (which vectorise), combined at the
/// end: a sum or a maximum (NaN dropped, as [`Real::max_`]).
#[inline(always)]
fn row_fold<T: Real>(r: &[T], init: T, f: impl Fn(T, T) -> T) -> T {
    let mut acc = [init; 8];
    let chunks = r.chunks_exact(8);
    let tail = chunks.remainder();
    for c in chunks {
        for (a, &v) in acc.iter_mut().zip(c) {
            *a = f(*a, v);
        }
    }
    acc.iter().chain(tail).fold(init, |m, &v| f(m, v))
}

fn row_sum<T: Real>(r: &[T]) -> T {
    row_fold(r, T::ZERO, |a, b| a + b)
}

fn row_max<T: Real>(r: &[T]) -> T {
    row_fold(r, T::NEG_INFINITY, |a, b| a.max_(b))
}

/// The geometry and kind of [`pool_fast`]'s planes.
struct FastPlane<'a, T> {
    kind: Fast,
    wd: usize,
    ow: usize,
    kh: usize,
    kw: usize,
    sh: usize,
    sw: usize,
    dh: usize,
    dw: usize,
    pt: usize,
    pl: usize,
    /// Values per padded row in the scratch plane; with `halves`, the even columns then (from `wq`) the odd ones.
    row_len: usize,
    halves: bool,
    wq: usize,
    border: T,
    tabs: &'a [Vec<Span>; 3],
}

avx2_copy!(
    /// One plane `xp` of [`pool_fast`] into `yp`, through the bordered scratch plane `buf` (its borders already
    /// hold `p.border`).
    fn fast_plane<T: Real>(xp: &[T], yp: &mut [T], buf: &mut [T], p: &FastPlane<'_, T>) => fast_plane_body);

#[inline(always)]
fn fast_plane_body<T: Real>(xp: &[T], yp: &mut [T], buf: &mut [T], p: &FastPlane<'_, T>) {
    let count = |sp: &Span, include_pad: bool| if include_pad { sp.padded } else { sp.hi - sp.lo } as f64;
    for (iy, xr) in xp.chunks_exact(p.wd).enumerate() {
        let row = &mut buf[(iy + p.pt) * p.row_len..][..p.row_len];
        if p.halves {
            // padded column pl + ix goes to half (pl + ix) % 2, column (pl + ix) / 2
            let (even, odd) = row.split_at_mut(p.wq);
            let (first, second) = if p.pl.is_multiple_of(2) { (even, odd) } else { (odd, even) };
            let (c0, c1) = (p.pl / 2, p.pl.div_ceil(2));
            let (first, second) = (&mut first[c0..], &mut second[c1..]);
            for (i, pair) in xr.chunks(2).enumerate() {
                first[i] = lp_or(p.kind, pair[0]);
                if let Some(&v) = pair.get(1) {
                    second[i] = lp_or(p.kind, v);
                }
            }
        } else {
            let dst = &mut row[p.pl..][..p.wd];
            match p.kind {
                Fast::Lp(_) => dst.iter_mut().zip(xr).for_each(|(d, &v)| *d = lp_or(p.kind, v)),
                _ => dst.copy_from_slice(xr),
            }
        }
    }
    for (oy, yrow) in yp.chunks_exact_mut(p.ow).enumerate() {
        yrow.fill(p.border);
        for ky in 0..p.kh {
            let row = &buf[(oy * p.sh + ky * p.dh) * p.row_len..][..p.row_len];
            for kx in 0..p.kw {
                let (xs, s) = if p.halves { (&row[kx % 2 * p.wq + kx / 2..], 1) } else { (&row[kx * p.dw..], p.sw) };
                match p.kind {
                    Fast::Max => tap_pass(yrow, xs, s, |o, v| o.max_(v)),
                    _ => tap_pass(yrow, xs, s, |o, v| o + v),
                }
            }
        }
        match p.kind {
            Fast::Max => {}
            Fast::Avg(include_pad) => {
                let cy = count(&p.tabs[1][oy], include_pad);
                for (o, sx) in yrow.iter_mut().zip(&p.tabs[2]) {
                    *o = T::from_f64(o.to_f64() / (cy * count(sx, include_pad)));
                }
            }
            Fast::Lp(pw) => yrow.iter_mut().for_each(|o| {
                let v = o.to_f64();
                *o = T::from_f64(match pw {
                    1 => v,
                    2 => v.sqrt(),
                    _ => v.powf(1.0 / pw as f64),
                })
            }),
        }
    }
}

/// The value a scratch plane holds for input `v`: `|v|^p` for LpPool, `v` itself otherwise.
#[inline(always)]
fn lp_or<T: Real>(kind: Fast, v: T) -> T {
    match kind {
        Fast::Lp(p) => T::from_f64(v.to_f64().abs().powi(p as i32)),
        _ => v,
    }
}

/// `yrow[j] = f(yrow[j], xs[j·s])`.
#[inline(always)]
fn tap_pass<T: Real>(yrow: &mut [T], xs: &[T], s: usize, f: impl Fn(T, T) -> T) {
    match s {
        1 => yrow.iter_mut().zip(xs).for_each(|(o, &v)| *o = f(*o, v)),
        // pairs through chunks_exact: this form vectorises (step_by does not)
        2 => yrow.iter_mut().zip(xs.chunks_exact(2)).for_each(|(o, v)| *o = f(*o, v[0])),
        _ => yrow.iter_mut().zip(xs.iter().step_by(s)).for_each(|(o, &v)| *o = f(*o, v)),
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
    let par = spin_pool::threads() > 1 && work >= PAR_MIN;
    match idx {
        None => for_planes(yv, pout, work, |pi, yp| max_plane(&x[pi * pin..][..pin], g, &tabs, yp, None)),
        Some(it) => {
            // Indices are flat into the whole input (storage_order 0), so they include the plane offset.
            let iv = it.reset::<i64>(shape);
            if pout == 0 {
                return Ok(());
            }
            let run = |pi: usize, yp: &mut [T], ip: &mut [i64]| {
                max_plane(&x[pi * pin..][..pin], g, &tabs, yp, Some((ip, (pi * pin) as i64)));
            };
            if par {
                spin_pool::for_each_chunk_mut2(yv, pout, iv, pout, &run);
            } else {
                yv.chunks_mut(pout).zip(iv.chunks_mut(pout)).enumerate().for_each(|(pi, (yp, ip))| run(pi, yp, ip));
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
    if spin_pool::threads() > 1 && x.len() >= PAR_MIN && plane > 0 {
        spin_pool::for_each_piece_mut(y, 1, || (), |_, i, o| f((&x[i * plane..][..plane], &mut o[0])));
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
    use crate::ir::ops::{infer, TypeInfo};
    use crate::ir::Op;
    use crate::runtime::kernels::eval;
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

    /// The vectorised f32 path against the window-table path, for every kind and several geometries.
    #[test]
    fn fast_path_matches_table_path() {
        type Cfg<'a> = (&'a [usize], &'a [usize], &'a [usize], &'a [usize], &'a [usize], bool);
        let cfgs: [Cfg; 14] = [
            // large windows, few outputs (pool_wide_windows): the whole plane, padded and overhanging, 1-D
            (&[2, 3, 16, 13], &[16, 13], &[1, 1], &[0, 0, 0, 0], &[], false),
            (&[1, 2, 21, 20], &[12, 12], &[9, 8], &[2, 3, 2, 3], &[], true),
            (&[1, 2, 45], &[40], &[8], &[3, 2], &[], false),
            (&[1, 1, 9, 9], &[9, 9], &[9, 9], &[4, 4, 4, 4], &[], false),
            (&[2, 3, 13, 11], &[3, 3], &[2, 2], &[1, 1, 1, 1], &[], false),
            (&[1, 2, 12, 12], &[3, 3], &[2, 2], &[0, 0, 1, 1], &[], true),
            (&[1, 2, 9, 20], &[2, 3], &[1, 3], &[1, 0, 0, 2], &[2, 1], false),
            (&[1, 70, 8, 8], &[3, 3], &[1, 1], &[1, 1, 1, 1], &[], false),
            (&[1, 3, 17], &[4], &[2], &[1, 2], &[2], true),
            (&[1, 64, 40, 40], &[3, 3], &[2, 2], &[1, 1, 1, 1], &[], false),
            (&[1, 2, 7, 7], &[3, 3], &[3, 3], &[1, 1, 1, 1], &[], true),
            // unit strides (max_separable): YOLOv8's SPPF, dilated and asymmetric pads, several runs of planes
            (&[1, 5, 8, 8], &[5, 5], &[1, 1], &[2, 2, 2, 2], &[], false),
            (&[2, 3, 10, 9], &[3, 2], &[1, 1], &[1, 0, 2, 1], &[2, 3], true),
            (&[1, 9, 60, 50], &[3, 3], &[1, 1], &[0, 1, 2, 0], &[], false),
        ];
        for (ci, (xs, k, st, p, d, ceil)) in cfgs.into_iter().enumerate() {
            let n: usize = xs.iter().product();
            let xv: Vec<f32> = (0..n).map(|i| ((i * 7919 + ci * 13) % 1009) as f32 / 100.0 - 5.0).collect();
            let x = Tensor::from_f32(xs.to_vec(), xv.clone());
            let mut a = attrs(k, st, p);
            a.dilations = d.to_vec();
            a.ceil_mode = ceil;
            // max: op without indices (fast) against op with indices (table)
            let fast = &run(&Op::MaxPool(a.clone()), &x, 1)[0];
            let table = &run(&Op::MaxPool(a.clone()), &x, 2)[0];
            assert_eq!(fast, table, "max case {ci}");
            // averages and Lp: pool_fast against sum_pool directly
            let g = geom_of(xs, &a, "test").unwrap();
            let shape = out_shape(xs, &g);
            let m: usize = shape.iter().product();
            for (fk, kind) in [(Fast::Avg(false), Kind::Avg(false)), (Fast::Avg(true), Kind::Avg(true)), (Fast::Lp(1), Kind::Lp(1)), (Fast::Lp(2), Kind::Lp(2)), (Fast::Lp(3), Kind::Lp(3))] {
                let (mut yf, mut yt) = (vec![0f32; m], vec![0f32; m]);
                pool_fast(&xv, &g, &shape, fk, &mut yf, &mut Vec::new()).unwrap();
                sum_pool(&xv, &g, &shape, kind, &mut yt).unwrap();
                for (i, (a, b)) in yf.iter().zip(&yt).enumerate() {
                    assert!((a - b).abs() <= 1e-4 * (1.0 + b.abs()), "case {ci} {kind:?} element {i}: {a} vs {b}");
                }
            }
        }
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
