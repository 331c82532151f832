//! The layout ops, which move data: Reshape, Flatten, Squeeze, Unsqueeze, Transpose, Concat, Split, Slice,
//! Pad, Expand, Tile, Identity, DepthToSpace and SpaceToDepth (the tensor-making ops: [`super::tensor_ops`]).
//!
//! Every kernel is generic over the element type (dispatched once per call) and moves contiguous runs with
//! `copy_from_slice`. Transpose, Slice, Expand, Tile, DepthToSpace and SpaceToDepth are all one strided copy
//! ([`strided_copy`]): the output is a row-major walk over input offsets `base + Σ i_d * stride_d`, which is
//! simplified (size-1 dims dropped, mergeable dims merged) and then run as contiguous row copies, fills,
//! a cache-blocked 2-D transpose or a strided gather, in parallel over the outermost dim when large.

use crate::runtime::spin_pool;

use super::numeric::deinterleave;
use super::util::strides;
use super::input;
use crate::ir::ops::dims::{ints, numel};
use crate::ir::ops::layout::{
    concat_shape, depth_to_space_shape, expand_shape, flatten_shape, pad_plan, reshape_shape, slice_plan, space_to_depth_shape, split_sizes,
    squeeze_shape, tile_repeats, tile_shape, transpose_perm, unsqueeze_shape,
};
use crate::ir::{Element, PadMode, Tensor};
use crate::with_data;

/// Outputs with fewer elements than this are computed on one thread.
pub(super) const PAR_MIN: usize = 1 << 16;

/// Side of the square tiles of the blocked transpose.
const TILE: usize = 32;

// ---------------------------------------------------------------------------------------------------------
// Evaluation
// ---------------------------------------------------------------------------------------------------------

/// Parameter input `i` for evaluation (`None` when absent).
pub(super) fn rparam<'a>(inputs: &[Option<&'a Tensor>], i: usize) -> Option<&'a Tensor> {
    inputs.get(i).copied().flatten()
}

/// Input 0 and the first output.
pub(super) fn x_out<'a, 'o>(inputs: &[Option<&'a Tensor>], outputs: &'o mut [Tensor]) -> Result<(&'a Tensor, &'o mut Tensor), String> {
    Ok((input(inputs, 0)?, outputs.first_mut().ok_or("the node has no output")?))
}

/// Runs Reshape (inputs data, shape).
pub(super) fn run_reshape(allowzero: bool, inputs: &[Option<&Tensor>], outputs: &mut [Tensor]) -> Result<(), String> {
    let (x, out) = x_out(inputs, outputs)?;
    let s = ints(input(inputs, 1)?, "shape")?;
    let shape = reshape_shape(&x.shape, &s, allowzero)?;
    copy_as(x, &shape, out)
}

/// Runs Flatten.
pub(super) fn run_flatten(axis: usize, inputs: &[Option<&Tensor>], outputs: &mut [Tensor]) -> Result<(), String> {
    let (x, out) = x_out(inputs, outputs)?;
    copy_as(x, &flatten_shape(&x.shape, axis)?, out)
}

/// Runs Squeeze (axes from the attribute, else input 1).
pub(super) fn run_squeeze(axes: Option<&[i64]>, inputs: &[Option<&Tensor>], outputs: &mut [Tensor]) -> Result<(), String> {
    let (x, out) = x_out(inputs, outputs)?;
    let axes = match axes {
        Some(a) => Some(a.to_vec()),
        None => rparam(inputs, 1).map(|t| ints(t, "axes")).transpose()?,
    };
    copy_as(x, &squeeze_shape(&x.shape, axes.as_deref())?, out)
}

/// Runs Unsqueeze (axes from the attribute, else input 1).
pub(super) fn run_unsqueeze(axes: Option<&[i64]>, inputs: &[Option<&Tensor>], outputs: &mut [Tensor]) -> Result<(), String> {
    let (x, out) = x_out(inputs, outputs)?;
    let axes = match axes {
        Some(a) => a.to_vec(),
        None => ints(input(inputs, 1)?, "axes")?,
    };
    copy_as(x, &unsqueeze_shape(&x.shape, &axes)?, out)
}

/// Runs Identity.
pub(super) fn run_identity(inputs: &[Option<&Tensor>], outputs: &mut [Tensor]) -> Result<(), String> {
    let (x, out) = x_out(inputs, outputs)?;
    out.assign(x);
    Ok(())
}

/// Runs Transpose.
pub(super) fn run_transpose(perm: &[usize], inputs: &[Option<&Tensor>], outputs: &mut [Tensor]) -> Result<(), String> {
    let (x, out) = x_out(inputs, outputs)?;
    let p = transpose_perm(x.shape.len(), perm)?;
    let st = strides(&x.shape);
    let dims: Vec<Dim> = p.iter().map(|&i| (x.shape[i], st[i] as isize)).collect();
    let shape: Vec<usize> = p.iter().map(|&i| x.shape[i]).collect();
    copy_strided(x, 0, &dims, &shape, out)
}

/// Runs Concat.
pub(super) fn run_concat(axis: usize, inputs: &[Option<&Tensor>], outputs: &mut [Tensor]) -> Result<(), String> {
    let (_, out) = x_out(inputs, outputs)?;
    eval_concat(inputs, axis, out)
}

/// Runs Slice (inputs data, starts, ends, axes?, steps?).
pub(super) fn run_slice(inputs: &[Option<&Tensor>], outputs: &mut [Tensor]) -> Result<(), String> {
    let (x, out) = x_out(inputs, outputs)?;
    let plan =
        slice_plan(&x.shape, input(inputs, 1)?, input(inputs, 2)?, rparam(inputs, 3), rparam(inputs, 4))?;
    let st = strides(&x.shape);
    let base: i64 = plan.iter().zip(&st).map(|(p, &s)| if p.2 == 0 { 0 } else { p.0 * s as i64 }).sum();
    let dims: Vec<Dim> =
        plan.iter().zip(&st).map(|(p, &s)| (p.2, (p.1 as isize).wrapping_mul(s as isize))).collect();
    let shape: Vec<usize> = plan.iter().map(|p| p.2).collect();
    copy_strided(x, base as usize, &dims, &shape, out)
}

/// Runs Pad (inputs data, pads, constant_value?, axes?).
pub(super) fn run_pad(mode: PadMode, inputs: &[Option<&Tensor>], outputs: &mut [Tensor]) -> Result<(), String> {
    let (x, out) = x_out(inputs, outputs)?;
    let (plan, shape) = pad_plan(&x.shape, input(inputs, 1)?, rparam(inputs, 3))?;
    let cval = rparam(inputs, 2);
    with_data!(&x.data, v => pad(v, &x.shape, &plan, mode, cval, &shape, out))
}

/// Runs Expand.
pub(super) fn run_expand(inputs: &[Option<&Tensor>], outputs: &mut [Tensor]) -> Result<(), String> {
    let (x, out) = x_out(inputs, outputs)?;
    let shape = expand_shape(&x.shape, input(inputs, 1)?)?;
    let bs = super::util::broadcast_strides(&x.shape, &shape);
    let dims: Vec<Dim> = shape.iter().zip(&bs).map(|(&d, &s)| (d, s as isize)).collect();
    copy_strided(x, 0, &dims, &shape, out)
}

/// Runs Tile.
pub(super) fn run_tile(inputs: &[Option<&Tensor>], outputs: &mut [Tensor]) -> Result<(), String> {
    let (x, out) = x_out(inputs, outputs)?;
    let r = tile_repeats(&x.shape, input(inputs, 1)?)?;
    let st = strides(&x.shape);
    let mut dims: Vec<Dim> = Vec::with_capacity(2 * r.len());
    for i in 0..r.len() {
        dims.push((r[i], 0));
        dims.push((x.shape[i], st[i] as isize));
    }
    let shape = tile_shape(&x.shape, &r)?;
    copy_strided(x, 0, &dims, &shape, out)
}

/// Runs DepthToSpace (CRD or DCR order).
pub(super) fn run_depth_to_space(blocksize: usize, crd: bool, inputs: &[Option<&Tensor>], outputs: &mut [Tensor]) -> Result<(), String> {
    let (x, out) = x_out(inputs, outputs)?;
    let shape = depth_to_space_shape(&x.shape, blocksize)?;
    let (b, [n, c, h, w]) = (blocksize, [x.shape[0], x.shape[1], x.shape[2], x.shape[3]]);
    let c2 = c / (b * b);
    let s = |v: usize| v as isize;
    let (sn, sh, sw) = (s(c * h * w), s(w), 1);
    let dims: [Dim; 6] = if crd {
        // input viewed as [n, c2, b1, b2, h, w]
        [(n, sn), (c2, s(b * b * h * w)), (h, sh), (b, s(b * h * w)), (w, sw), (b, s(h * w))]
    } else {
        // input viewed as [n, b1, b2, c2, h, w]
        [(n, sn), (c2, s(h * w)), (h, sh), (b, s(b * c2 * h * w)), (w, sw), (b, s(c2 * h * w))]
    };
    copy_strided(x, 0, &dims, &shape, out)
}

/// Runs SpaceToDepth.
pub(super) fn run_space_to_depth(blocksize: usize, inputs: &[Option<&Tensor>], outputs: &mut [Tensor]) -> Result<(), String> {
    let (x, out) = x_out(inputs, outputs)?;
    let shape = space_to_depth_shape(&x.shape, blocksize)?;
    let (b, [n, c, h, w]) = (blocksize, [x.shape[0], x.shape[1], x.shape[2], x.shape[3]]);
    let s = |v: usize| v as isize;
    // input viewed as [n, c, h/b, b1, w/b, b2], output [n, b1, b2, c, h/b, w/b]
    let dims: [Dim; 6] =
        [(n, s(c * h * w)), (b, s(w)), (b, 1), (c, s(h * w)), (h / b, s(b * w)), (w / b, s(b))];
    copy_strided(x, 0, &dims, &shape, out)
}

/// Copies `x`'s elements into `out` with a new shape of the same element count.
fn copy_as(x: &Tensor, shape: &[usize], out: &mut Tensor) -> Result<(), String> {
    if numel(shape)? != x.len() {
        return Err(format!("cannot view {:?} as {shape:?}", x.shape));
    }
    with_data!(&x.data, v => out.reset(shape).copy_from_slice(v));
    Ok(())
}

fn copy_strided(x: &Tensor, base: usize, dims: &[Dim], shape: &[usize], out: &mut Tensor) -> Result<(), String> {
    with_data!(&x.data, v => strided_copy(v.as_slice(), base, dims, out.reset(shape)));
    Ok(())
}

// ---------------------------------------------------------------------------------------------------------
// Strided copy (Transpose, Slice, Expand, Tile, DepthToSpace, SpaceToDepth)
// ---------------------------------------------------------------------------------------------------------

/// One output dim of a strided read: its length and the input stride in elements (0 broadcasts, negative
/// walks backwards).
pub(super) type Dim = (usize, isize);

/// Runs `f(first_row, rows)` over `out` cut into groups of whole rows of `row` elements, in parallel when
/// `out` is large.
pub(super) fn for_rows<T: Send>(out: &mut [T], row: usize, f: impl Fn(usize, &mut [T]) + Sync + Send) {
    if row == 0 || out.is_empty() {
        return;
    }
    let rows = out.len() / row;
    if out.len() < PAR_MIN || rows < 2 {
        f(0, out);
        return;
    }
    let per = rows.div_ceil(spin_pool::threads() * 4).max(1);
    spin_pool::for_each_chunk_mut(out, per * row, &|t, c| f(t * per, c));
}

/// Fills the row-major `out` (of shape `dims[..].0`) with `inp[base + Σ i_d * dims[d].1]`.
///
/// The caller guarantees every such offset is inside `inp` (it is for a valid view of the input).
pub(super) fn strided_copy<T: Element>(inp: &[T], base: usize, dims: &[Dim], out: &mut [T]) {
    if out.is_empty() {
        return;
    }
    // Drop size-1 dims and merge an outer dim into the next when they walk the input as one.
    let mut d: Vec<Dim> = Vec::with_capacity(dims.len() + 1);
    for &(n, s) in dims {
        if n == 1 {
            continue;
        }
        if let Some(last) = d.last_mut() {
            if last.1 == s.wrapping_mul(n as isize) {
                *last = (last.0 * n, s);
                continue;
            }
        }
        d.push((n, s));
    }
    if d.is_empty() {
        out[0] = inp[base];
        return;
    }
    if d.len() == 1 {
        d.insert(0, (1, 0));
    }
    let r = d.len();
    let ostr = {
        let shape: Vec<usize> = d.iter().map(|x| x.0).collect();
        strides(&shape)
    };
    let (n_last, s_last) = d[r - 1];
    // The output dim that reads the input contiguously, for the blocked transpose.
    let tiled = if s_last == 1 || s_last == 0 { None } else { (0..r - 1).rev().find(|&k| d[k].1 == 1) };
    let base = base as isize;

    let run = |lo: usize, hi: usize, out: &mut [T]| {
        // Outer dims: (lo, hi, out stride, in stride); dim 0 is restricted to [lo, hi).
        let mut outer: Vec<(usize, usize, usize, isize)> = Vec::with_capacity(r);
        for k in 0..r - 1 {
            if Some(k) == tiled {
                continue;
            }
            let (a, b) = if k == 0 { (lo, hi) } else { (0, d[k].0) };
            outer.push((a, b, ostr[k], d[k].1));
        }
        match tiled {
            None if s_last == 1 => walk(&outer, 0, base, &mut |o, i| {
                let i = i as usize;
                out[o..o + n_last].copy_from_slice(&inp[i..i + n_last]);
            }),
            None if s_last == 0 => walk(&outer, 0, base, &mut |o, i| out[o..o + n_last].fill(inp[i as usize])),
            None => walk(&outer, 0, base, &mut |o, i| {
                let mut i = i;
                for v in &mut out[o..o + n_last] {
                    *v = inp[i as usize];
                    i += s_last;
                }
            }),
            Some(k) => {
                let (xlo, xhi) = if k == 0 { (lo, hi) } else { (0, d[k].0) };
                let osk = ostr[k];
                if xhi - xlo <= 4 && s_last > 0 {
                    // a few contiguous input values per step (NHWC with 3 channels to NCHW): one strided pass per
                    // output row reads the same cache lines; tiles of TILE² would loop over a few values each
                    walk(&outer, 0, base, &mut |o, i| {
                        // all of each record's values (xlo..xhi is 0..s_last): sixteen records per step
                        if xlo == 0 && xhi == s_last as usize && deinterleave(&inp[i as usize..], xhi, n_last, &mut out[o..], osk) {
                            return;
                        }
                        for x in xlo..xhi {
                            let orow = o + (x - xlo) * osk;
                            let src = inp[(i + x as isize) as usize..].iter().step_by(s_last as usize);
                            for (v, &s) in out[orow..orow + n_last].iter_mut().zip(src) {
                                *v = s;
                            }
                        }
                    });
                    return;
                }
                walk(&outer, 0, base, &mut |o, i| {
                    for x0 in (xlo..xhi).step_by(TILE) {
                        let x1 = (x0 + TILE).min(xhi);
                        for y0 in (0..n_last).step_by(TILE) {
                            let y1 = (y0 + TILE).min(n_last);
                            for x in x0..x1 {
                                let orow = o + (x - xlo) * osk;
                                let mut ii = i + x as isize + y0 as isize * s_last;
                                for v in &mut out[orow + y0..orow + y1] {
                                    *v = inp[ii as usize];
                                    ii += s_last;
                                }
                            }
                        }
                    }
                })
            }
        }
    };

    let n0 = d[0].0;
    if out.len() < PAR_MIN || n0 < 2 {
        run(0, n0, out);
        return;
    }
    let mut per = n0.div_ceil(spin_pool::threads() * 4);
    if tiled == Some(0) {
        per = per.max(TILE / 2);
    }
    spin_pool::for_each_chunk_mut(out, per * ostr[0], &|t, c| {
        let lo = t * per;
        run(lo, (lo + per).min(n0), c)
    });
}

/// Calls `f(out_offset, in_offset)` for every index of the outer dims `(lo, hi, out stride, in stride)`;
/// out offsets count from `lo`.
fn walk(dims: &[(usize, usize, usize, isize)], o: usize, i: isize, f: &mut impl FnMut(usize, isize)) {
    match dims.split_first() {
        None => f(o, i),
        Some((&(lo, hi, os, is), rest)) => {
            for x in lo..hi {
                walk(rest, o + (x - lo) * os, i + x as isize * is, f);
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------------------
// Concat / Split
// ---------------------------------------------------------------------------------------------------------

fn eval_concat(inputs: &[Option<&Tensor>], axis: usize, out: &mut Tensor) -> Result<(), String> {
    let ts: Vec<&Tensor> = (0..inputs.len()).map(|i| input(inputs, i)).collect::<Result<_, _>>()?;
    let shape = concat_shape(ts.iter().map(|t| t.shape.as_slice()), axis)?;
    with_data!(&ts[0].data, v => concat(v.as_slice(), &ts, axis, &shape, out))
}

fn concat<T: Element>(
    _first: &[T],
    ts: &[&Tensor],
    axis: usize,
    shape: &[usize],
    out: &mut Tensor,
) -> Result<(), String> {
    let views: Vec<&[T]> = ts
        .iter()
        .enumerate()
        .map(|(k, t)| t.view::<T>().ok_or_else(|| format!("input {k} is {}, input 0 is {}", t.dtype(), T::DTYPE)))
        .collect::<Result<_, _>>()?;
    let inner: usize = shape[axis + 1..].iter().product();
    let chunks: Vec<usize> = ts.iter().map(|t| t.shape[axis] * inner).collect();
    let row: usize = chunks.iter().sum();
    let out = out.reset::<T>(shape);
    for_rows(out, row, |first, c| {
        for (k, dst) in c.chunks_mut(row).enumerate() {
            let o = first + k;
            let mut off = 0;
            for (src, &n) in views.iter().zip(&chunks) {
                dst[off..off + n].copy_from_slice(&src[o * n..(o + 1) * n]);
                off += n;
            }
        }
    });
    Ok(())
}

/// Runs Split: one output per size.
pub(super) fn eval_split(
    x: &Tensor,
    axis: usize,
    attr: Option<&[usize]>,
    split: Option<&Tensor>,
    n: usize,
    outputs: &mut [Tensor],
) -> Result<(), String> {
    let sizes = split_sizes(&x.shape, axis, attr, split, n)?;
    if sizes.len() != outputs.len() {
        return Err(format!("split makes {} outputs but the node has {}", sizes.len(), outputs.len()));
    }
    let outer: usize = x.shape[..axis].iter().product();
    let inner: usize = x.shape[axis + 1..].iter().product();
    let dim = x.shape[axis];
    let mut off = 0;
    for (out, &s) in outputs.iter_mut().zip(&sizes) {
        let mut shape = x.shape.clone();
        shape[axis] = s;
        let (row, start) = (s * inner, off * inner);
        with_data!(&x.data, v => {
            let o = out.reset(&shape);
            debug_assert_eq!(o.len(), outer * row);
            for_rows(o, row, |first, c| {
                for (k, dst) in c.chunks_mut(row).enumerate() {
                    let src = (first + k) * dim * inner + start;
                    dst.copy_from_slice(&v[src..src + row]);
                }
            })
        });
        off += s;
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------------------
// Pad
// ---------------------------------------------------------------------------------------------------------

/// Input index of each output position along one dim (`usize::MAX`: the constant value).
fn pad_map(n: usize, begin: i64, end: i64, out_len: usize, mode: PadMode, axis: usize) -> Result<Vec<usize>, String> {
    let cb = (-begin).max(0) as i128;
    let ce = (-end).max(0) as i128;
    let m = n as i128 - cb - ce;
    let pb = begin.max(0) as i128;
    let pe = end.max(0) as i128;
    if m < 0 && mode != PadMode::Constant {
        return Err(format!("pads crop more than the {n} elements of axis {axis}"));
    }
    if (pb > 0 || pe > 0) && mode != PadMode::Constant && m == 0 {
        return Err(format!("cannot pad axis {axis} in {mode:?} mode: it is empty after cropping"));
    }
    Ok((0..out_len)
        .map(|o| {
            let j = o as i128 - pb;
            let j = if (0..m).contains(&j) {
                j
            } else {
                match mode {
                    PadMode::Constant => return usize::MAX,
                    PadMode::Edge => j.clamp(0, m - 1),
                    PadMode::Wrap => j.rem_euclid(m),
                    PadMode::Reflect if m == 1 => 0,
                    PadMode::Reflect => {
                        // numpy's reflection, repeated for pads longer than the axis
                        let p = 2 * (m - 1);
                        let jj = j.rem_euclid(p);
                        if jj >= m {
                            p - jj
                        } else {
                            jj
                        }
                    }
                }
            };
            (j + cb) as usize
        })
        .collect())
}

fn pad<T: Element>(
    x: &[T],
    shape: &[usize],
    plan: &[(i64, i64)],
    mode: PadMode,
    cval: Option<&Tensor>,
    out_shape: &[usize],
    out: &mut Tensor,
) -> Result<(), String> {
    let c = match cval {
        None => T::default(),
        Some(t) => match t.view::<T>() {
            Some(v) => v.first().copied().unwrap_or_default(),
            None => return Err(format!("constant_value is {}, data is {}", t.dtype(), T::DTYPE)),
        },
    };
    let r = shape.len();
    // Trailing dims with no padding are one contiguous run per row: merged into one dim, a channel padding of
    // [n, c, h, w] copies rows of h·w elements, not of w.
    if let Some(k) = plan.iter().rposition(|&p| p != (0, 0)).filter(|&k| k + 2 < r) {
        let inner: usize = shape[k + 1..].iter().product();
        let merged = |s: &[usize]| s[..=k].iter().copied().chain([inner]).collect::<Vec<usize>>();
        let plan: Vec<(i64, i64)> = plan[..=k].iter().copied().chain([(0, 0)]).collect();
        return pad(x, &merged(shape), &plan, mode, cval, &merged(out_shape), out).map(|()| out.shape = out_shape.to_vec());
    }
    let maps: Vec<Vec<usize>> =
        (0..r).map(|d| pad_map(shape[d], plan[d].0, plan[d].1, out_shape[d], mode, d)).collect::<Result<_, _>>()?;
    let o = out.reset::<T>(out_shape);
    if r == 0 {
        o.copy_from_slice(x);
        return Ok(());
    }
    let ist = strides(shape);
    let last = &maps[r - 1];
    let row = out_shape[r - 1];
    // The run of the last dim copied straight from the input: output [lo, hi) reads input [cb, ..).
    let (b, e) = plan[r - 1];
    let (pb, cb) = (b.max(0) as usize, (-b).max(0) as usize);
    let m = shape[r - 1] as i128 - cb as i128 - (-e).max(0) as i128;
    let (lo, hi) = if m > 0 { (pb.min(row), (pb + m as usize).min(row)) } else { (0, 0) };
    for_rows(o, row, |first, c_rows| {
        for (k, dst) in c_rows.chunks_mut(row).enumerate() {
            let mut ri = first + k;
            let mut off = 0usize;
            let mut constant = false;
            for d in (0..r - 1).rev() {
                let idx = ri % out_shape[d];
                ri /= out_shape[d];
                let m = maps[d][idx];
                if m == usize::MAX {
                    constant = true;
                    break;
                }
                off += m * ist[d];
            }
            if constant {
                dst.fill(c);
                continue;
            }
            let src = &x[off..off + shape[r - 1]];
            dst[lo..hi].copy_from_slice(&src[cb..cb + (hi - lo)]);
            for j in (0..lo).chain(hi..row) {
                dst[j] = if last[j] == usize::MAX { c } else { src[last[j]] };
            }
        }
    });
    Ok(())
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::ir::DType;
    use crate::ir::Op;
    use crate::runtime::kernels::{eval, Scratch};
    use crate::ir::ops::{infer, InferError, TypeInfo};

    pub(in crate::runtime::kernels) fn run(op: Op, inputs: &[&Tensor]) -> Result<Vec<Tensor>, String> {
        let ins: Vec<Option<&Tensor>> = inputs.iter().map(|t| Some(*t)).collect();
        let infos: Vec<Option<TypeInfo>> =
            inputs.iter().map(|t| Some(TypeInfo { dtype: t.dtype(), shape: &t.shape, value: Some(t) })).collect();
        let inferred = infer(&op, &infos).map_err(|e| format!("{e:?}"))?;
        let mut outs = vec![Tensor::default(); inferred.len()];
        eval(&op, &ins, &mut outs, &mut Scratch::default())?;
        for (o, (d, s)) in outs.iter().zip(&inferred) {
            assert_eq!((o.dtype(), &o.shape), (*d, s), "infer and eval disagree for {op:?}");
        }
        Ok(outs)
    }

    pub(in crate::runtime::kernels) fn f(shape: &[usize], v: &[f32]) -> Tensor {
        Tensor::from_f32(shape.to_vec(), v.to_vec())
    }
    pub(in crate::runtime::kernels) fn i(v: &[i64]) -> Tensor {
        Tensor::from_i64(vec![v.len()], v.to_vec())
    }
    pub(in crate::runtime::kernels) fn iota(shape: &[usize]) -> Tensor {
        let n = shape.iter().product::<usize>();
        f(shape, &(0..n).map(|x| x as f32).collect::<Vec<_>>())
    }

    /// A channel padding of `[n, c, h, w]` (the trailing dims merged into rows of h·w) against numpy's rule
    /// element by element: constant and reflect modes, and a crop (negative pad) on the channels.
    #[test]
    fn padding_leading_dims_copies_whole_planes() {
        let x = iota(&[2, 3, 2, 4]);
        for (mode, pads, cval) in [(PadMode::Constant, [0i64, 1, 0, 0, 0, 2, 0, 0], 7.0f32), (PadMode::Reflect, [1, 1, 0, 0, 0, 1, 0, 0], 0.0), (PadMode::Constant, [0, -1, 0, 0, 0, 1, 0, 0], 0.0)] {
            let out = &run(Op::Pad { mode }, &[&x, &i(&pads), &f(&[], &[cval])]).unwrap()[0];
            let (b0, b1) = (pads[0], pads[1]);
            let (n, c) = (2 + pads[0] + pads[4], 3 + pads[1] + pads[5]);
            assert_eq!(out.shape, vec![n as usize, c as usize, 2, 4], "{mode:?}");
            let reflect = |j: i64, len: i64| if j < 0 { -j } else if j >= len { 2 * (len - 1) - j } else { j };
            let o = out.as_f32().unwrap();
            for (k, &got) in o.iter().enumerate() {
                let (ni, ci, rest) = (k as i64 / (c * 8), k as i64 / 8 % c, k as i64 % 8);
                let (sn, sc) = (ni - b0, ci - b1);
                let want = match mode {
                    PadMode::Reflect => ((reflect(sn, 2) * 3 + reflect(sc, 3)) * 8 + rest) as f32,
                    _ if (0..2).contains(&sn) && (0..3).contains(&sc) => ((sn * 3 + sc) * 8 + rest) as f32,
                    _ => cval,
                };
                assert_eq!(got, want, "{mode:?} {pads:?} element {k}");
            }
        }
    }

    #[test]
    fn reshape_rules() {
        let x = iota(&[2, 3, 4]);
        assert_eq!(run(Op::Reshape { allowzero: false }, &[&x, &i(&[0, -1])]).unwrap()[0].shape, vec![2, 12]);
        assert_eq!(run(Op::Reshape { allowzero: false }, &[&x, &i(&[-1, 2, 2])]).unwrap()[0].shape, vec![6, 2, 2]);
        assert!(run(Op::Reshape { allowzero: false }, &[&x, &i(&[5, -1])]).is_err());
        assert!(run(Op::Reshape { allowzero: false }, &[&x, &i(&[-1, -1])]).is_err());
        let e = Tensor::zeros(DType::F32, vec![0, 3]);
        assert_eq!(run(Op::Reshape { allowzero: true }, &[&e, &i(&[3, 0])]).unwrap()[0].shape, vec![3, 0]);
        // A shape input only known at run time makes the output dynamic.
        let infos = [
            Some(TypeInfo { dtype: DType::F32, shape: &[2, 3, 4], value: None }),
            Some(TypeInfo { dtype: DType::I64, shape: &[2], value: None }),
        ];
        assert_eq!(infer(&Op::Reshape { allowzero: false }, &infos), Err(InferError::Dynamic));
    }

    #[test]
    fn squeeze_unsqueeze_flatten() {
        let x = iota(&[1, 3, 1, 2]);
        assert_eq!(run(Op::Squeeze { axes: None }, &[&x]).unwrap()[0].shape, vec![3, 2]);
        assert_eq!(run(Op::Squeeze { axes: None }, &[&x, &i(&[-2])]).unwrap()[0].shape, vec![1, 3, 2]);
        assert!(run(Op::Squeeze { axes: Some(vec![1]) }, &[&x]).is_err());
        let y = iota(&[3, 4, 5]);
        assert_eq!(run(Op::Unsqueeze { axes: None }, &[&y, &i(&[2, 0])]).unwrap()[0].shape, vec![1, 3, 1, 4, 5]);
        assert_eq!(run(Op::Unsqueeze { axes: Some(vec![-1]) }, &[&y]).unwrap()[0].shape, vec![3, 4, 5, 1]);
        assert_eq!(run(Op::Flatten { axis: 0 }, &[&y]).unwrap()[0].shape, vec![1, 60]);
        assert_eq!(run(Op::Flatten { axis: 3 }, &[&y]).unwrap()[0].shape, vec![60, 1]);
        // a scalar has no axis 0 to squeeze (an error, not a panic)
        assert!(run(Op::Squeeze { axes: Some(vec![0]) }, &[&Tensor::scalar(1.0f32)]).is_err());
    }

    /// Transpose against a naive index computation, over shapes that hit every strided-copy path
    /// (row copies, the blocked transpose with and without parallelism, strided gathers).
    #[test]
    fn transpose_matches_naive() {
        let cases: &[(&[usize], &[usize])] = &[
            (&[2, 3], &[]),
            (&[2, 3, 4], &[0, 2, 1]),
            (&[2, 3, 4], &[2, 0, 1]),
            (&[1, 37, 19, 23], &[0, 2, 3, 1]),
            (&[1, 64, 40, 40], &[0, 2, 3, 1]),
            (&[1, 40, 40, 64], &[0, 3, 1, 2]),
            (&[3, 5, 7, 2], &[3, 1, 0, 2]),
            (&[2, 1, 3, 1], &[3, 2, 1, 0]),
            // a few channels last to first (the short strided rows), batched, and large enough to split
            (&[1, 96, 96, 3], &[0, 3, 1, 2]),
            (&[2, 9, 7, 4], &[0, 3, 1, 2]),
            (&[1, 300, 300, 2], &[0, 3, 1, 2]),
        ];
        for &(shape, perm) in cases {
            let x = iota(shape);
            let y = &run(Op::Transpose { perm: perm.to_vec() }, &[&x]).unwrap()[0];
            let p: Vec<usize> = if perm.is_empty() { (0..shape.len()).rev().collect() } else { perm.to_vec() };
            let ist = strides(shape);
            let ost = strides(&y.shape);
            let yv = y.as_f32().unwrap();
            for (flat, &got) in yv.iter().enumerate() {
                let mut src = 0;
                for d in 0..p.len() {
                    src += (flat / ost[d]) % y.shape[d] * ist[p[d]];
                }
                assert_eq!(got, src as f32, "{shape:?} perm {perm:?} at {flat}");
            }
        }
        // every dtype goes through the same generic path
        let b = Tensor::from_vec(vec![2, 2], vec![true, false, false, false]).unwrap();
        assert_eq!(
            run(Op::Transpose { perm: vec![] }, &[&b]).unwrap()[0].view::<bool>().unwrap(),
            &[true, false, false, false]
        );
        let h = Tensor::from_vec(vec![1, 2], vec![half::f16::ONE, half::f16::ZERO]).unwrap();
        assert_eq!(run(Op::Transpose { perm: vec![] }, &[&h]).unwrap()[0].shape, vec![2, 1]);
    }

    #[test]
    fn concat_and_split() {
        let a = f(&[2, 1], &[1., 2.]);
        let b = f(&[2, 2], &[3., 4., 5., 6.]);
        let y = &run(Op::Concat { axis: 1 }, &[&a, &b]).unwrap()[0];
        assert_eq!(y.as_f32().unwrap(), &[1., 3., 4., 2., 5., 6.]);
        assert!(run(Op::Concat { axis: 0 }, &[&a, &b]).is_err());
        // ONNX 18: 7 elements into 3 outputs → 3, 3, 1
        let x = iota(&[7]);
        let outs = run(Op::Split { axis: 0, split: None, num_outputs: 3 }, &[&x]).unwrap();
        assert_eq!(outs.iter().map(|t| t.shape[0]).collect::<Vec<_>>(), vec![3, 3, 1]);
        assert_eq!(outs[2].as_f32().unwrap(), &[6.]);
        let outs = run(Op::Split { axis: 1, split: None, num_outputs: 2 }, &[&b, &i(&[1, 1])]).unwrap();
        assert_eq!(outs[0].as_f32().unwrap(), &[3., 5.]);
        assert_eq!(outs[1].as_f32().unwrap(), &[4., 6.]);
    }

    #[test]
    fn slice_clamping_and_negative_steps() {
        // ONNX spec example: data [[1,2,3,4],[5,6,7,8]], starts [1,0], ends [2,3], steps [1,2] → [[5,7]]
        let x = f(&[2, 4], &[1., 2., 3., 4., 5., 6., 7., 8.]);
        let y = &run(Op::Slice, &[&x, &i(&[1, 0]), &i(&[2, 3]), &i(&[0, 1]), &i(&[1, 2])]).unwrap()[0];
        assert_eq!((y.shape.as_slice(), y.as_f32().unwrap()), (&[1, 2][..], &[5., 7.][..]));
        // starts [0,1], ends [-1,1000] → [[2,3,4]]
        let y = &run(Op::Slice, &[&x, &i(&[0, 1]), &i(&[-1, 1000])]).unwrap()[0];
        assert_eq!(y.as_f32().unwrap(), &[2., 3., 4.]);
        // reverse with INT_MIN end sentinel
        let y = &run(Op::Slice, &[&x, &i(&[-1]), &i(&[i64::MIN]), &i(&[1]), &i(&[-1])]).unwrap()[0];
        assert_eq!(y.as_f32().unwrap(), &[4., 3., 2., 1., 8., 7., 6., 5.]);
        let y = &run(Op::Slice, &[&x, &i(&[3]), &i(&[0]), &i(&[-1]), &i(&[-2])]).unwrap()[0];
        assert_eq!(y.as_f32().unwrap(), &[4., 2., 8., 6.]);
        let y = &run(Op::Slice, &[&x, &i(&[5]), &i(&[i64::MAX]), &i(&[1])]).unwrap()[0];
        assert_eq!(y.shape, vec![2, 0]);
        assert!(run(Op::Slice, &[&x, &i(&[0]), &i(&[1]), &i(&[0]), &i(&[0])]).is_err());
    }

    #[test]
    fn pad_modes() {
        // ONNX spec examples on [[1.0, 1.2], [2.3, 3.4], [4.5, 5.7]] with pads [0, 2, 0, 0]
        let x = f(&[3, 2], &[1.0, 1.2, 2.3, 3.4, 4.5, 5.7]);
        let p = i(&[0, 2, 0, 0]);
        let y = run(Op::Pad { mode: PadMode::Reflect }, &[&x, &p]).unwrap();
        assert_eq!(y[0].as_f32().unwrap(), &[1.0, 1.2, 1.0, 1.2, 2.3, 3.4, 2.3, 3.4, 4.5, 5.7, 4.5, 5.7]);
        let y = run(Op::Pad { mode: PadMode::Edge }, &[&x, &p]).unwrap();
        assert_eq!(y[0].as_f32().unwrap(), &[1.0, 1.0, 1.0, 1.2, 2.3, 2.3, 2.3, 3.4, 4.5, 4.5, 4.5, 5.7]);
        let y = run(Op::Pad { mode: PadMode::Constant }, &[&x, &p]).unwrap();
        assert_eq!(y[0].as_f32().unwrap(), &[0.0, 0.0, 1.0, 1.2, 0.0, 0.0, 2.3, 3.4, 0.0, 0.0, 4.5, 5.7]);
        // wrap: [1,2,3] padded (2, 1) → [2,3,1,2,3,1]
        let w = f(&[3], &[1., 2., 3.]);
        let y = run(Op::Pad { mode: PadMode::Wrap }, &[&w, &i(&[2, 1])]).unwrap();
        assert_eq!(y[0].as_f32().unwrap(), &[2., 3., 1., 2., 3., 1.]);
        // negative pads crop; constant value and axes inputs
        let y =
            run(Op::Pad { mode: PadMode::Constant }, &[&x, &i(&[-1, 1]), &Tensor::scalar(9.0f32), &i(&[0])]).unwrap();
        assert_eq!((y[0].shape.as_slice(), y[0].as_f32().unwrap()), (&[3, 2][..], &[2.3, 3.4, 4.5, 5.7, 9., 9.][..]));
        let y = run(Op::Pad { mode: PadMode::Constant }, &[&x, &i(&[1, -1, 0, 0])]).unwrap();
        assert_eq!((y[0].shape.as_slice(), y[0].as_f32().unwrap()), (&[4, 1][..], &[0., 1.2, 3.4, 5.7][..]));
    }

    #[test]
    fn expand_tile_and_space_depth() {
        let x = f(&[3, 1], &[1., 2., 3.]);
        let y = &run(Op::Expand, &[&x, &i(&[2, 1, 2])]).unwrap()[0];
        assert_eq!(
            (y.shape.as_slice(), y.as_f32().unwrap()),
            (&[2, 3, 2][..], &[1., 1., 2., 2., 3., 3., 1., 1., 2., 2., 3., 3.][..])
        );
        let t = f(&[2, 2], &[0., 1., 2., 3.]);
        let y = &run(Op::Tile, &[&t, &i(&[2, 2])]).unwrap()[0];
        assert_eq!(y.as_f32().unwrap(), &[0., 1., 0., 1., 2., 3., 2., 3., 0., 1., 0., 1., 2., 3., 2., 3.]);
        // ONNX DepthToSpace example (DCR and CRD) on x = arange(48) reshaped [1, 8, 2, 3], blocksize 2
        let x = iota(&[1, 8, 2, 3]);
        let dcr = &run(Op::DepthToSpace { blocksize: 2, crd: false }, &[&x]).unwrap()[0];
        assert_eq!(dcr.shape, vec![1, 2, 4, 6]);
        let want_dcr = [
            0., 12., 1., 13., 2., 14., 24., 36., 25., 37., 26., 38., 3., 15., 4., 16., 5., 17., 27., 39., 28., 40.,
            29., 41.,
        ];
        assert_eq!(&dcr.as_f32().unwrap()[..24], &want_dcr);
        let crd = &run(Op::DepthToSpace { blocksize: 2, crd: true }, &[&x]).unwrap()[0];
        let want_crd = [
            0., 6., 1., 7., 2., 8., 12., 18., 13., 19., 14., 20., 3., 9., 4., 10., 5., 11., 15., 21., 16., 22., 17.,
            23.,
        ];
        assert_eq!(&crd.as_f32().unwrap()[..24], &want_crd);
        // SpaceToDepth inverts DCR DepthToSpace
        let back = &run(Op::SpaceToDepth { blocksize: 2 }, &[dcr]).unwrap()[0];
        assert_eq!(back, &x);
    }
}
