//! The layout ops, which move data without computing on it: Reshape, Flatten, Squeeze, Unsqueeze,
//! Transpose, Concat, Split, Slice, Pad, Expand, Tile, Identity, DepthToSpace and SpaceToDepth: attributes,
//! arity and shape rules (the CPU kernels compute from the same plans).

use super::dims::{broadcast_shape, cparam, dim_of, ints, norm_axes, numel, required};
use super::{info, Arity, InferError, Inferred, TypeInfo};
use crate::ir::Tensor;

/// Pad modes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(missing_docs)]
pub enum PadMode {
    Constant,
    Reflect,
    Edge,
    Wrap,
}

/// Output shape of Reshape to `spec` (with -1 and, unless `allowzero`, 0 meaning "copy").
pub fn reshape_shape(shape: &[usize], spec: &[i64], allowzero: bool) -> Result<Vec<usize>, String> {
    let total = numel(shape)?;
    let mut out = Vec::with_capacity(spec.len());
    let mut inferred = None;
    for (i, &d) in spec.iter().enumerate() {
        match d {
            -1 => {
                if inferred.is_some() {
                    return Err(format!("shape {spec:?} has more than one -1"));
                }
                inferred = Some(i);
                out.push(1);
            }
            0 if !allowzero => match shape.get(i) {
                Some(&s) => out.push(s),
                None => {
                    return Err(format!(
                        "shape {spec:?} copies dim {i} (0) but the input {shape:?} has rank {}",
                        shape.len()
                    ))
                }
            },
            d => out.push(dim_of(d, "shape value")?),
        }
    }
    if let Some(i) = inferred {
        if allowzero && spec.contains(&0) {
            return Err(format!("shape {spec:?} has both -1 and 0 with allowzero"));
        }
        let known = numel(&out)?;
        if known == 0 || total % known != 0 {
            return Err(format!("cannot reshape {shape:?} ({total} elements) to {spec:?}"));
        }
        out[i] = total / known;
    }
    if numel(&out)? != total {
        return Err(format!("cannot reshape {shape:?} ({total} elements) to {out:?}"));
    }
    Ok(out)
}

/// Output shape of Flatten at `axis`.
pub fn flatten_shape(shape: &[usize], axis: usize) -> Result<Vec<usize>, String> {
    if axis > shape.len() {
        return Err(format!("axis {axis} is out of range for rank {}", shape.len()));
    }
    Ok(vec![numel(&shape[..axis])?, numel(&shape[axis..])?])
}

/// Output shape of Squeeze (no axes: every size-1 dim).
pub fn squeeze_shape(shape: &[usize], axes: Option<&[i64]>) -> Result<Vec<usize>, String> {
    match axes {
        None | Some([]) => Ok(shape.iter().copied().filter(|&d| d != 1).collect()),
        Some(axes) => {
            let axes = norm_axes(axes, shape.len())?;
            for &a in &axes {
                if shape[a] != 1 {
                    return Err(format!("cannot squeeze axis {a} of size {}", shape[a]));
                }
            }
            Ok(shape.iter().enumerate().filter(|(i, _)| !axes.contains(i)).map(|(_, &d)| d).collect())
        }
    }
}

/// Output shape of Unsqueeze.
pub fn unsqueeze_shape(shape: &[usize], axes: &[i64]) -> Result<Vec<usize>, String> {
    let rank = shape.len() + axes.len();
    let axes = norm_axes(axes, rank)?;
    let mut rest = shape.iter();
    Ok((0..rank).map(|i| if axes.contains(&i) { 1 } else { rest.next().copied().unwrap_or(1) }).collect())
}

/// The permutation of Transpose (empty: reverse).
pub fn transpose_perm(rank: usize, perm: &[usize]) -> Result<Vec<usize>, String> {
    if perm.is_empty() {
        return Ok((0..rank).rev().collect());
    }
    let mut seen = vec![false; rank];
    if perm.len() != rank || perm.iter().any(|&p| p >= rank || std::mem::replace(&mut seen[p], true)) {
        return Err(format!("perm {perm:?} is not a permutation of the {rank} input dims"));
    }
    Ok(perm.to_vec())
}

/// Output shape of Concat along `axis`.
pub fn concat_shape<'a>(shapes: impl Iterator<Item = &'a [usize]>, axis: usize) -> Result<Vec<usize>, String> {
    let mut out: Option<Vec<usize>> = None;
    for (k, s) in shapes.enumerate() {
        match &mut out {
            None => {
                if axis >= s.len() {
                    return Err(format!("axis {axis} is out of range for rank {}", s.len()));
                }
                out = Some(s.to_vec());
            }
            Some(o) => {
                if s.len() != o.len() || s.iter().zip(o.iter()).enumerate().any(|(d, (a, b))| d != axis && a != b) {
                    return Err(format!(
                        "input {k} has shape {s:?}, which does not concatenate with {o:?} on axis {axis}"
                    ));
                }
                o[axis] += s[axis];
            }
        }
    }
    out.ok_or_else(|| "Concat needs at least one input".to_string())
}

/// The sizes of Split's outputs along `axis`.
pub fn split_sizes(
    shape: &[usize],
    axis: usize,
    attr: Option<&[usize]>,
    input: Option<&Tensor>,
    n: usize,
) -> Result<Vec<usize>, String> {
    let dim = *shape.get(axis).ok_or_else(|| format!("axis {axis} is out of range for rank {}", shape.len()))?;
    let sizes = match (attr, input) {
        (Some(s), _) if !s.is_empty() => s.to_vec(),
        (_, Some(t)) if !t.is_empty() => {
            ints(t, "split")?.into_iter().map(|v| dim_of(v, "split size")).collect::<Result<_, _>>()?
        }
        _ => {
            if n == 0 {
                return Err("Split needs split sizes or a number of outputs".into());
            }
            let chunk = dim.div_ceil(n);
            let last = dim
                .checked_sub(chunk * (n - 1))
                .ok_or_else(|| format!("cannot split a dim of {dim} into {n} outputs"))?;
            let mut v = vec![chunk; n];
            v[n - 1] = last;
            v
        }
    };
    if sizes.iter().sum::<usize>() != dim {
        return Err(format!("split sizes {sizes:?} do not add up to the dim {dim} of axis {axis}"));
    }
    Ok(sizes)
}

/// Per input dim: (first index, step, output length).
pub type SlicePlan = Vec<(i64, i64, usize)>;

/// Per input dim, where Slice starts, its step and the output length.
pub fn slice_plan(
    shape: &[usize],
    starts: &Tensor,
    ends: &Tensor,
    axes: Option<&Tensor>,
    steps: Option<&Tensor>,
) -> Result<SlicePlan, String> {
    let starts = ints(starts, "starts")?;
    let ends = ints(ends, "ends")?;
    let n = starts.len();
    if ends.len() != n {
        return Err(format!("starts has {n} values but ends has {}", ends.len()));
    }
    let axes = match axes {
        Some(a) => norm_axes(&ints(a, "axes")?, shape.len())?,
        None => {
            if n > shape.len() {
                return Err(format!("starts has {n} values but the input has rank {}", shape.len()));
            }
            (0..n).collect()
        }
    };
    if axes.len() != n {
        return Err(format!("axes has {} values but starts has {n}", axes.len()));
    }
    let steps = match steps {
        Some(s) => ints(s, "steps")?,
        None => vec![1; n],
    };
    if steps.len() != n {
        return Err(format!("steps has {} values but starts has {n}", steps.len()));
    }
    let mut plan: SlicePlan = shape.iter().map(|&d| (0, 1, d)).collect();
    for i in 0..n {
        let (a, step) = (axes[i], steps[i]);
        if step == 0 {
            return Err(format!("step of axis {a} is 0"));
        }
        let dim = shape[a] as i128;
        let (mut s, mut e) = (starts[i] as i128, ends[i] as i128);
        if s < 0 {
            s += dim;
        }
        if e < 0 {
            e += dim;
        }
        let st = step as i128;
        let len = if dim == 0 {
            s = 0;
            0
        } else if st > 0 {
            s = s.clamp(0, dim);
            e = e.clamp(0, dim);
            if e > s {
                (e - s - 1) / st + 1
            } else {
                0
            }
        } else {
            s = s.clamp(0, dim - 1);
            e = e.clamp(-1, dim - 1);
            if s > e {
                (s - e - 1) / -st + 1
            } else {
                0
            }
        };
        plan[a] = (s as i64, step, len as usize);
    }
    Ok(plan)
}

/// Per dim: (begin pad, end pad), negative values crop.
pub type PadPlan = Vec<(i64, i64)>;

/// The pads of every dim and the output shape.
pub fn pad_plan(shape: &[usize], pads: &Tensor, axes: Option<&Tensor>) -> Result<(PadPlan, Vec<usize>), String> {
    let rank = shape.len();
    let pads = ints(pads, "pads")?;
    let axes = match axes {
        Some(a) => norm_axes(&ints(a, "axes")?, rank)?,
        None => (0..rank).collect(),
    };
    if pads.len() != 2 * axes.len() {
        return Err(format!("pads has {} values, expected {} (2 per padded axis)", pads.len(), 2 * axes.len()));
    }
    let mut plan = vec![(0i64, 0i64); rank];
    for (i, &a) in axes.iter().enumerate() {
        plan[a] = (pads[i], pads[axes.len() + i]);
    }
    let out = shape
        .iter()
        .zip(&plan)
        .map(|(&d, &(b, e))| {
            let n = (d as i128) + b as i128 + e as i128;
            usize::try_from(n).map_err(|_| format!("pads {pads:?} make a negative dim from {shape:?}"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok((plan, out))
}

/// Output shape of Expand.
pub fn expand_shape(shape: &[usize], target: &Tensor) -> Result<Vec<usize>, String> {
    let t = ints(target, "shape")?.into_iter().map(|v| dim_of(v, "shape value")).collect::<Result<Vec<_>, _>>()?;
    broadcast_shape(shape, &t)
}

/// Tile's repeats, one per input dim.
pub fn tile_repeats(shape: &[usize], repeats: &Tensor) -> Result<Vec<usize>, String> {
    let r = ints(repeats, "repeats")?;
    if r.len() != shape.len() {
        return Err(format!("repeats has {} values but the input has rank {}", r.len(), shape.len()));
    }
    r.into_iter().map(|v| dim_of(v, "repeats value")).collect()
}

/// Output shape of Tile.
pub fn tile_shape(shape: &[usize], repeats: &[usize]) -> Result<Vec<usize>, String> {
    let out: Vec<usize> = shape
        .iter()
        .zip(repeats)
        .map(|(a, b)| a.checked_mul(*b))
        .collect::<Option<_>>()
        .ok_or_else(|| format!("tiling {shape:?} by {repeats:?} has too many elements"))?;
    numel(&out)?;
    Ok(out)
}

/// Output shape of DepthToSpace.
pub fn depth_to_space_shape(shape: &[usize], b: usize) -> Result<Vec<usize>, String> {
    match *shape {
        [n, c, h, w] if b > 0 && c % (b * b) == 0 => Ok(vec![n, c / (b * b), h * b, w * b]),
        [_, c, _, _] => Err(format!("channels {c} are not divisible by blocksize² ({b}²)")),
        _ => Err(format!("input must be 4-D (NCHW), it has shape {shape:?}")),
    }
}

/// Output shape of SpaceToDepth.
pub fn space_to_depth_shape(shape: &[usize], b: usize) -> Result<Vec<usize>, String> {
    match *shape {
        [n, c, h, w] if b > 0 && h % b == 0 && w % b == 0 => Ok(vec![n, c * b * b, h / b, w / b]),
        [_, _, h, w] => Err(format!("spatial dims {h}x{w} are not divisible by blocksize {b}")),
        _ => Err(format!("input must be 4-D (NCHW), it has shape {shape:?}")),
    }
}

/// `x`'s dtype with `shape`.
fn same(x: TypeInfo, shape: Vec<usize>) -> Result<Inferred, InferError> {
    Ok(vec![(x.dtype, shape)])
}

/// Shape rule of Reshape (inputs data, constant shape).
pub fn infer_reshape(allowzero: bool, inputs: &[Option<TypeInfo>]) -> Result<Inferred, InferError> {
    let x = info(inputs, 0)?;
    let s = ints(required(cparam(inputs, 1)?, "shape")?, "shape")?;
    same(x, reshape_shape(x.shape, &s, allowzero)?)
}

/// Shape rule of Flatten.
pub fn infer_flatten(axis: usize, inputs: &[Option<TypeInfo>]) -> Result<Inferred, InferError> {
    let x = info(inputs, 0)?;
    same(x, flatten_shape(x.shape, axis)?)
}

/// Shape rule of Squeeze (axes from the attribute or the constant input 1).
pub fn infer_squeeze(axes: Option<&[i64]>, inputs: &[Option<TypeInfo>]) -> Result<Inferred, InferError> {
    let x = info(inputs, 0)?;
    let axes = match axes {
        Some(a) => Some(a.to_vec()),
        None => cparam(inputs, 1)?.map(|t| ints(t, "axes")).transpose()?,
    };
    same(x, squeeze_shape(x.shape, axes.as_deref())?)
}

/// Shape rule of Unsqueeze (axes from the attribute or the constant input 1).
pub fn infer_unsqueeze(axes: Option<&[i64]>, inputs: &[Option<TypeInfo>]) -> Result<Inferred, InferError> {
    let x = info(inputs, 0)?;
    let axes = match axes {
        Some(a) => a.to_vec(),
        None => ints(required(cparam(inputs, 1)?, "axes")?, "axes")?,
    };
    same(x, unsqueeze_shape(x.shape, &axes)?)
}

/// Shape rule of Transpose.
pub fn infer_transpose(perm: &[usize], inputs: &[Option<TypeInfo>]) -> Result<Inferred, InferError> {
    let x = info(inputs, 0)?;
    let p = transpose_perm(x.shape.len(), perm)?;
    same(x, p.iter().map(|&i| x.shape[i]).collect())
}

/// Shape rule of Concat: inputs of one type.
pub fn infer_concat(axis: usize, inputs: &[Option<TypeInfo>]) -> Result<Inferred, InferError> {
    let x = info(inputs, 0)?;
    let all: Vec<TypeInfo> = (0..inputs.len()).map(|i| info(inputs, i)).collect::<Result<_, _>>()?;
    if let Some((k, t)) = all.iter().enumerate().find(|(_, t)| t.dtype != x.dtype) {
        return Err(InferError::Invalid(format!("input {k} is {}, input 0 is {}", t.dtype, x.dtype)));
    }
    same(x, concat_shape(all.iter().map(|t| t.shape), axis)?)
}

/// Shape rule of Split: one output per size.
pub fn infer_split(axis: usize, split: Option<&[usize]>, num_outputs: usize, inputs: &[Option<TypeInfo>]) -> Result<Inferred, InferError> {
    let x = info(inputs, 0)?;
    let sizes = split_sizes(x.shape, axis, split, cparam(inputs, 1)?, num_outputs)?;
    Ok(sizes
        .into_iter()
        .map(|s| {
            let mut sh = x.shape.to_vec();
            sh[axis] = s;
            (x.dtype, sh)
        })
        .collect())
}

/// Shape rule of Slice (inputs data, starts, ends, axes?, steps?, all constant).
pub fn infer_slice(inputs: &[Option<TypeInfo>]) -> Result<Inferred, InferError> {
    let x = info(inputs, 0)?;
    let plan = slice_plan(
        x.shape,
        required(cparam(inputs, 1)?, "starts")?,
        required(cparam(inputs, 2)?, "ends")?,
        cparam(inputs, 3)?,
        cparam(inputs, 4)?,
    )?;
    same(x, plan.iter().map(|p| p.2).collect())
}

/// Shape rule of Pad (inputs data, constant pads, constant_value?, constant axes?).
pub fn infer_pad(inputs: &[Option<TypeInfo>]) -> Result<Inferred, InferError> {
    let x = info(inputs, 0)?;
    if let Some(c) = inputs.get(2).copied().flatten() {
        if c.dtype != x.dtype {
            return Err(InferError::Invalid(format!("constant_value is {}, data is {}", c.dtype, x.dtype)));
        }
    }
    let (_, out) = pad_plan(x.shape, required(cparam(inputs, 1)?, "pads")?, cparam(inputs, 3)?)?;
    same(x, out)
}

/// Shape rule of Expand (inputs data, constant shape).
pub fn infer_expand(inputs: &[Option<TypeInfo>]) -> Result<Inferred, InferError> {
    let x = info(inputs, 0)?;
    same(x, expand_shape(x.shape, required(cparam(inputs, 1)?, "shape")?)?)
}

/// Shape rule of Tile (inputs data, constant repeats).
pub fn infer_tile(inputs: &[Option<TypeInfo>]) -> Result<Inferred, InferError> {
    let x = info(inputs, 0)?;
    let r = tile_repeats(x.shape, required(cparam(inputs, 1)?, "repeats")?)?;
    same(x, tile_shape(x.shape, &r)?)
}

/// Shape rule of Identity.
pub fn infer_identity(inputs: &[Option<TypeInfo>]) -> Result<Inferred, InferError> {
    let x = info(inputs, 0)?;
    same(x, x.shape.to_vec())
}

/// Shape rule of DepthToSpace.
pub fn infer_depth_to_space(blocksize: usize, inputs: &[Option<TypeInfo>]) -> Result<Inferred, InferError> {
    let x = info(inputs, 0)?;
    same(x, depth_to_space_shape(x.shape, blocksize)?)
}

/// Shape rule of SpaceToDepth.
pub fn infer_space_to_depth(blocksize: usize, inputs: &[Option<TypeInfo>]) -> Result<Inferred, InferError> {
    let x = info(inputs, 0)?;
    same(x, space_to_depth_shape(x.shape, blocksize)?)
}

/// Arity of the one-input layout ops (Flatten, Transpose, Identity, DepthToSpace, SpaceToDepth).
pub const UNARY_ARITY: Arity = (1, 1, 1, 1);
/// Arity of Reshape, Expand and Tile: data and a shape-like input.
pub const WITH_SHAPE_ARITY: Arity = (2, 2, 1, 1);
/// Arity of Squeeze and Unsqueeze: data, axes?.
pub const SQUEEZE_ARITY: Arity = (1, 2, 1, 1);
/// Arity of Concat: one or more inputs.
pub const CONCAT_ARITY: Arity = (1, usize::MAX, 1, 1);
/// Arity of Split: data, split?; one or more outputs.
pub const SPLIT_ARITY: Arity = (1, 2, 1, usize::MAX);
/// Arity of Slice: data, starts, ends, axes?, steps?.
pub const SLICE_ARITY: Arity = (3, 5, 1, 1);
/// Arity of Pad: data, pads, constant_value?, axes?.
pub const PAD_ARITY: Arity = (2, 4, 1, 1);
