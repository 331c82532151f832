//! Conv and ConvTranspose: attributes, arity and shape rule, and the window geometry shared with pooling
//! (the CPU kernels in `runtime::kernels::conv` compute from the same plans).

use super::{info, Arity, InferError, Inferred, TypeInfo};
use crate::ir::Activation;
use crate::ir::DType;

/// How convolution/pooling padding is chosen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AutoPad {
    /// Use the explicit `pads`.
    NotSet,
    /// Output = ceil(input / stride); extra padding at the end.
    SameUpper,
    /// Output = ceil(input / stride); extra padding at the start.
    SameLower,
    /// No padding.
    Valid,
}

/// Attributes shared by convolution-like ops over N spatial dimensions.
#[derive(Clone, Debug, PartialEq)]
pub struct ConvAttrs {
    /// Kernel spatial shape (empty: taken from the weight).
    pub kernel_shape: Vec<usize>,
    /// Strides per spatial dim (empty: all 1).
    pub strides: Vec<usize>,
    /// Dilations per spatial dim (empty: all 1).
    pub dilations: Vec<usize>,
    /// Begin pads for all spatial dims, then end pads (ONNX order). Empty: zeros.
    pub pads: Vec<usize>,
    /// Padding mode.
    pub auto_pad: AutoPad,
    /// Number of groups (depthwise when equal to input channels).
    pub group: usize,
    /// Fused activation (set by the fusion pass).
    pub activation: Option<Activation>,
}

/// ConvTranspose-specific attributes.
#[derive(Clone, Debug, PartialEq)]
pub struct ConvTransposeAttrs {
    /// Common convolution attributes.
    pub conv: ConvAttrs,
    /// Extra size added to one side of each output spatial dim.
    pub output_padding: Vec<usize>,
    /// Explicit output spatial shape (empty: computed).
    pub output_shape: Vec<usize>,
}

/// Window geometry of a convolution or pooling with the spatial dims canonicalised to three (D, H, W):
/// 1-D and 2-D inputs get leading size-1 dims (kernel 1, stride 1, no padding).
#[derive(Clone, Debug, PartialEq)]
pub struct Geom {
    /// Number of spatial dims of the op (1 to 3).
    pub rank: usize,
    /// Input spatial sizes.
    pub inp: [usize; 3],
    /// Output spatial sizes.
    pub out: [usize; 3],
    /// Kernel sizes.
    pub k: [usize; 3],
    /// Strides.
    pub s: [usize; 3],
    /// Dilations.
    pub d: [usize; 3],
    /// Begin pads.
    pub pb: [usize; 3],
    /// End pads (as given or computed; with ceil_mode windows may reach past them).
    pub pe: [usize; 3],
}

impl Geom {
    /// Output spatial dims in the op's own rank.
    pub fn out_dims(&self) -> &[usize] {
        &self.out[3 - self.rank..]
    }
    /// Elements of one input plane.
    pub fn in_size(&self) -> usize {
        self.inp.iter().product()
    }
    /// Elements of one output plane.
    pub fn out_size(&self) -> usize {
        self.out.iter().product()
    }
    /// Kernel elements.
    pub fn k_size(&self) -> usize {
        self.k.iter().product()
    }
}

/// The window attributes common to Conv and the pools.
pub struct Window<'a> {
    /// Kernel spatial shape.
    pub kernel: &'a [usize],
    /// Strides (empty: ones).
    pub strides: &'a [usize],
    /// Dilations (empty: ones).
    pub dilations: &'a [usize],
    /// Begin then end pads (empty: zeros).
    pub pads: &'a [usize],
    /// Padding mode.
    pub auto_pad: AutoPad,
    /// Pooling's ceil_mode.
    pub ceil_mode: bool,
}

/// Canonical 3-D copy of per-dim values (`fill` for the leading dims and when `v` is empty).
fn canon(v: &[usize], rank: usize, fill: usize, what: &str, op: &str) -> Result<[usize; 3], String> {
    let mut out = [fill; 3];
    if v.is_empty() {
        return Ok(out);
    }
    if v.len() != rank {
        return Err(format!("{op} has {} {what} for {rank} spatial dims", v.len()));
    }
    out[3 - rank..].copy_from_slice(v);
    Ok(out)
}

/// Output geometry of a window op over the spatial input dims `spatial` (ONNX rules for auto_pad, pads,
/// dilations and ceil_mode, where the last window must start inside the input or its begin padding).
pub fn window_geom(spatial: &[usize], w: &Window, op: &str) -> Result<Geom, String> {
    let rank = spatial.len();
    if !(1..=3).contains(&rank) {
        return Err(format!("{op} supports 1 to 3 spatial dims, got {rank}"));
    }
    let inp = canon(spatial, rank, 1, "input dims", op)?;
    if w.kernel.len() != rank {
        return Err(format!("{op} kernel_shape {:?} does not match {rank} spatial dims", w.kernel));
    }
    let k = canon(w.kernel, rank, 1, "kernel dims", op)?;
    let s = canon(w.strides, rank, 1, "strides", op)?;
    let d = canon(w.dilations, rank, 1, "dilations", op)?;
    if k.iter().chain(&s).chain(&d).any(|&v| v == 0) {
        return Err(format!("{op} kernel, strides and dilations must be positive"));
    }
    let (mut pb, mut pe) = ([0; 3], [0; 3]);
    if !w.pads.is_empty() && w.auto_pad == AutoPad::NotSet {
        if w.pads.len() != 2 * rank {
            return Err(format!("{op} has {} pads for {rank} spatial dims", w.pads.len()));
        }
        pb[3 - rank..].copy_from_slice(&w.pads[..rank]);
        pe[3 - rank..].copy_from_slice(&w.pads[rank..]);
    }
    let mut out = [1; 3];
    for i in 3 - rank..3 {
        let span = (k[i] - 1).saturating_mul(d[i]).saturating_add(1);
        if span == usize::MAX || pb[i].max(pe[i]) >= usize::MAX / 4 {
            return Err(format!("{op} window or padding is absurdly large in spatial dim {}", i + rank - 3));
        }
        match w.auto_pad {
            AutoPad::SameUpper | AutoPad::SameLower => {
                out[i] = inp[i].div_ceil(s[i]);
                let total = ((out[i].max(1) - 1) * s[i] + span).saturating_sub(inp[i]);
                let small = total / 2;
                (pb[i], pe[i]) = if w.auto_pad == AutoPad::SameUpper { (small, total - small) } else { (total - small, small) };
            }
            AutoPad::NotSet | AutoPad::Valid => {
                let padded = inp[i].saturating_add(pb[i]).saturating_add(pe[i]);
                if padded < span {
                    return Err(format!(
                        "{op} window of {span} (kernel {}, dilation {}) is larger than the padded input {padded} in spatial dim {}",
                        k[i],
                        d[i],
                        i + rank - 3
                    ));
                }
                out[i] = if w.ceil_mode {
                    let mut o = (padded - span).div_ceil(s[i]) + 1;
                    if (o - 1) * s[i] >= inp[i] + pb[i] {
                        o -= 1;
                    }
                    o
                } else {
                    (padded - span) / s[i] + 1
                };
            }
        }
    }
    Ok(Geom { rank, inp, out, k, s, d, pb, pe })
}

/// Everything a Conv needs besides the data.
#[derive(Debug)]
pub struct ConvPlan {
    /// Batch size.
    pub n: usize,
    /// Input channels.
    pub c: usize,
    /// Output channels.
    pub m: usize,
    /// Groups (at least 1).
    pub group: usize,
    /// Window geometry.
    pub geom: Geom,
    /// Whether a bias is given.
    pub has_bias: bool,
}

impl ConvPlan {
    /// [N, M, out...].
    pub fn out_shape(&self) -> Vec<usize> {
        let mut s = vec![self.n, self.m];
        s.extend_from_slice(self.geom.out_dims());
        s
    }
    /// Input channels per group.
    pub fn cg(&self) -> usize {
        self.c / self.group
    }
    /// Output channels per group.
    pub fn mg(&self) -> usize {
        self.m / self.group
    }
}

/// Checks a Conv's shapes and attributes and computes its geometry.
pub fn conv_plan(x: &[usize], w: &[usize], b: Option<&[usize]>, a: &ConvAttrs) -> Result<ConvPlan, String> {
    if x.len() < 3 {
        return Err(format!("Conv input must have rank >= 3 (N, C, spatial...), got shape {x:?}"));
    }
    if w.len() != x.len() {
        return Err(format!("Conv weight of shape {w:?} does not match input of shape {x:?}"));
    }
    let group = a.group.max(1);
    let (n, c, m) = (x[0], x[1], w[0]);
    if c % group != 0 || m % group != 0 {
        return Err(format!("Conv group {group} does not divide input channels {c} and output channels {m}"));
    }
    if w[1] * group != c {
        return Err(format!("Conv weight {w:?} expects {} input channels, input has {c} (group {group})", w[1] * group));
    }
    if !a.kernel_shape.is_empty() && a.kernel_shape[..] != w[2..] {
        return Err(format!("Conv kernel_shape {:?} does not match weight shape {w:?}", a.kernel_shape));
    }
    if let Some(b) = b {
        if b != [m] {
            return Err(format!("Conv bias of shape {b:?} does not match {m} output channels"));
        }
    }
    let win = Window { kernel: &w[2..], strides: &a.strides, dilations: &a.dilations, pads: &a.pads, auto_pad: a.auto_pad, ceil_mode: false };
    let geom = window_geom(&x[2..], &win, "Conv")?;
    Ok(ConvPlan { n, c, m, group, geom, has_bias: b.is_some() })
}


/// Geometry of a ConvTranspose, spatial dims canonicalised to three.
#[derive(Debug)]
pub struct TPlan {
    /// Batch size.
    pub n: usize,
    /// Input channels.
    pub c: usize,
    /// Output channels per group.
    pub mg: usize,
    /// Groups (at least 1).
    pub group: usize,
    /// Number of spatial dims (1 to 3).
    pub rank: usize,
    /// Input spatial sizes.
    pub inp: [usize; 3],
    /// Output spatial sizes.
    pub out: [usize; 3],
    /// Kernel sizes.
    pub k: [usize; 3],
    /// Strides.
    pub s: [usize; 3],
    /// Dilations.
    pub d: [usize; 3],
    /// Begin pads (negative: the output starts before the first tap).
    pub pb: [isize; 3],
    /// Whether a bias is given.
    pub has_bias: bool,
}

impl TPlan {
    /// [N, M, out...].
    pub fn out_shape(&self) -> Vec<usize> {
        let mut s = vec![self.n, self.mg * self.group];
        s.extend_from_slice(&self.out[3 - self.rank..]);
        s
    }
}

/// Checks a ConvTranspose's shapes and attributes and computes its output geometry.
pub fn transpose_plan(x: &[usize], w: &[usize], b: Option<&[usize]>, a: &ConvTransposeAttrs) -> Result<TPlan, String> {
    if x.len() < 3 || x.len() > 5 {
        return Err(format!("ConvTranspose supports 1 to 3 spatial dims, got input shape {x:?}"));
    }
    if w.len() != x.len() {
        return Err(format!("ConvTranspose weight of shape {w:?} does not match input of shape {x:?}"));
    }
    let rank = x.len() - 2;
    let group = a.conv.group.max(1);
    let (n, c, mg) = (x[0], x[1], w[1]);
    if c % group != 0 || w[0] != c {
        return Err(format!("ConvTranspose weight {w:?} needs {} input channels divisible by group {group}, input has {c}", w[0]));
    }
    if !a.conv.kernel_shape.is_empty() && a.conv.kernel_shape[..] != w[2..] {
        return Err(format!("ConvTranspose kernel_shape {:?} does not match weight shape {w:?}", a.conv.kernel_shape));
    }
    if let Some(b) = b {
        if b != [mg * group] {
            return Err(format!("ConvTranspose bias of shape {b:?} does not match {} output channels", mg * group));
        }
    }
    let inp = canon(&x[2..], rank, 1, "input dims", "ConvTranspose")?;
    let k = canon(&w[2..], rank, 1, "kernel dims", "ConvTranspose")?;
    let s = canon(&a.conv.strides, rank, 1, "strides", "ConvTranspose")?;
    let d = canon(&a.conv.dilations, rank, 1, "dilations", "ConvTranspose")?;
    let op = canon(&a.output_padding, rank, 0, "output_padding values", "ConvTranspose")?;
    if k.iter().chain(&s).chain(&d).any(|&v| v == 0) {
        return Err("ConvTranspose kernel, strides and dilations must be positive".into());
    }
    // output_shape may be given as spatial dims or as the full [N, M, spatial...].
    let os = &a.output_shape;
    let os = if os.len() == rank + 2 { &os[2..] } else { &os[..] };
    let out_given = if os.is_empty() { None } else { Some(canon(os, rank, 1, "output_shape dims", "ConvTranspose")?) };
    let same = matches!(a.conv.auto_pad, AutoPad::SameUpper | AutoPad::SameLower);
    let mut pb = [0isize; 3];
    let mut out = [1usize; 3];
    if same && a.conv.pads.is_empty() {
        for i in 3 - rank..3 {
            out[i] = out_given.map_or(inp[i] * s[i], |o| o[i]);
            let total = (s[i] * (inp[i].max(1) - 1) + op[i] + (k[i] - 1) * d[i] + 1) as isize - out[i] as isize;
            pb[i] = if a.conv.auto_pad == AutoPad::SameUpper { total.div_euclid(2) } else { total - total.div_euclid(2) };
        }
    } else {
        let pads = &a.conv.pads;
        if !pads.is_empty() && pads.len() != 2 * rank {
            return Err(format!("ConvTranspose has {} pads for {rank} spatial dims", pads.len()));
        }
        let pad = |i: usize| if pads.is_empty() || a.conv.auto_pad == AutoPad::Valid { (0, 0) } else { (pads[i], pads[rank + i]) };
        for i in 3 - rank..3 {
            let (b0, e0) = pad(i - (3 - rank));
            pb[i] = b0 as isize;
            out[i] = match out_given {
                Some(o) => o[i],
                None => {
                    let full = s[i] * (inp[i].max(1) - 1) + op[i] + (k[i] - 1) * d[i] + 1;
                    if full <= b0 + e0 {
                        return Err(format!("ConvTranspose pads {pads:?} leave no output in spatial dim {}", i + rank - 3));
                    }
                    full - b0 - e0
                }
            };
        }
    }
    Ok(TPlan { n, c, mg, group, rank, inp, out, k, s, d, pb, has_bias: b.is_some() })
}

/// Checks that x, w and the bias are one float type.
pub fn check_dtypes(name: &str, x: DType, w: DType, b: Option<DType>) -> Result<(), String> {
    if !x.is_float() {
        return Err(format!("{name} does not support {x}"));
    }
    if w != x || b.is_some_and(|b| b != x) {
        return Err(format!("{name} inputs have different types ({x}, {w}{})", b.map(|b| format!(", {b}")).unwrap_or_default()));
    }
    Ok(())
}

/// Shape rule of Conv (inputs x, w, bias?).
pub fn infer(a: &ConvAttrs, inputs: &[Option<TypeInfo>]) -> Result<Inferred, InferError> {
    let (x, w) = (info(inputs, 0)?, info(inputs, 1)?);
    let b = inputs.get(2).copied().flatten();
    check_dtypes("Conv", x.dtype, w.dtype, b.map(|b| b.dtype))?;
    Ok(vec![(x.dtype, conv_plan(x.shape, w.shape, b.map(|b| b.shape), a)?.out_shape())])
}

/// Shape rule of ConvTranspose (inputs x, w, bias?).
pub fn infer_transpose(a: &ConvTransposeAttrs, inputs: &[Option<TypeInfo>]) -> Result<Inferred, InferError> {
    let (x, w) = (info(inputs, 0)?, info(inputs, 1)?);
    let b = inputs.get(2).copied().flatten();
    check_dtypes("ConvTranspose", x.dtype, w.dtype, b.map(|b| b.dtype))?;
    Ok(vec![(x.dtype, transpose_plan(x.shape, w.shape, b.map(|b| b.shape), a)?.out_shape())])
}

/// (min inputs, max inputs, min outputs, max outputs) of Conv and ConvTranspose: x, w, bias?.
pub const ARITY: Arity = (2, 3, 1, 1);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn absurd_pads_and_dilations_are_errors_not_overflows() {
        let huge = usize::MAX / 2;
        let w = |pads: &'static [usize], dilations: &'static [usize]| Window {
            kernel: &[3, 3],
            strides: &[],
            dilations,
            pads,
            auto_pad: AutoPad::NotSet,
            ceil_mode: false,
        };
        let pads: &'static [usize] = Box::leak(vec![huge, 0, huge, 0].into_boxed_slice());
        assert!(window_geom(&[8, 8], &w(pads, &[]), "Conv").is_err());
        let dil: &'static [usize] = Box::leak(vec![huge, 1].into_boxed_slice());
        assert!(window_geom(&[8, 8], &w(&[], dil), "Conv").is_err());
    }
}
