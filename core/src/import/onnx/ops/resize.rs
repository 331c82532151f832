//! Resize (every opset's coordinate modes, `axes`, `keep_aspect_ratio_policy`) and the older Upsample.

use super::{aux, axis_of, base, choice, non_empty, single, trimmed, vec_of, MapFn};
use crate::import::onnx::graph::{Cx, NodeIn};
use crate::ir::{CoordTransform, DType, NearestMode, Op, ResizeAttrs, ResizeMode, Tensor, ValueId};
use crate::Result;

/// The ops of this family.
pub(super) const OPS: &[(&str, MapFn)] = &[("Resize", resize), ("Upsample", upsample)];

fn resize_mode(n: &NodeIn) -> Result<ResizeMode> {
    use ResizeMode::*;
    let modes = [("nearest", Nearest), ("linear", Linear), ("bilinear", Linear), ("trilinear", Linear), ("cubic", Cubic), ("bicubic", Cubic)];
    choice(n, "mode", "nearest", &modes)
}

/// Attributes of Upsample and Resize-10: asymmetric coordinates, floor for nearest.
fn legacy_resize_attrs(mode: ResizeMode) -> ResizeAttrs {
    ResizeAttrs {
        mode,
        coord: CoordTransform::Asymmetric,
        nearest: NearestMode::Floor,
        cubic_coeff_a: -0.75,
        exclude_outside: false,
        extrapolation_value: 0.0,
    }
}

/// Resize from opset 11: the attributes (see [`resize_attrs`]), `axes` (see [`full_rank`]) and
/// `keep_aspect_ratio_policy` (see [`aspect_scales`]).
fn resize(cx: &mut Cx, n: &NodeIn) -> Result<()> {
    let a = &n.attrs;
    let x = n.req(0)?;
    let mode = resize_mode(n)?;
    if n.opset < 11 {
        let scales = n.req(1)?;
        return single(cx, n, Op::Resize(legacy_resize_attrs(mode)), vec![Some(x), None, Some(scales), None]);
    }
    let (attrs, policy, not_larger) = resize_attrs(n, mode)?;
    let mut io = ResizeInputs { roi: non_empty(cx, n.opt(1)), scales: non_empty(cx, n.opt(2)), sizes: non_empty(cx, n.opt(3)) };
    let rank = cx.rank(x);
    let axes = match a.ints("axes")? {
        Some(axes) => {
            cx.need_rank(n, x, "Resize with 'axes'")?;
            axes.iter().map(|&ax| axis_of(cx, n, x, ax, "axes entry", false)).collect::<Result<Vec<_>>>()?
        }
        None => (0..rank.unwrap_or(0)).collect(),
    };
    if rank.is_some_and(|r| axes != (0..r).collect::<Vec<_>>()) {
        io = full_rank(cx, n, x, rank.unwrap_or(0), &axes, io)?;
    }
    if let Some(not_larger) = not_larger {
        io.scales = Some(aspect_scales(cx, n, x, &axes, io.sizes, not_larger, &policy)?);
        io.sizes = None;
    }
    single(cx, n, Op::Resize(attrs), trimmed(&[Some(x), io.roi, io.scales, io.sizes]))
}

/// The optional roi, scales and sizes inputs of a Resize.
struct ResizeInputs {
    roi: Option<ValueId>,
    scales: Option<ValueId>,
    sizes: Option<ValueId>,
}

/// The attributes of Resize from opset 11, the `keep_aspect_ratio_policy` and what it asks for (`None`:
/// stretch; `Some(true)`: not larger; `Some(false)`: not smaller).
fn resize_attrs(n: &NodeIn, mode: ResizeMode) -> Result<(ResizeAttrs, String, Option<bool>)> {
    let a = &n.attrs;
    if a.string_or("coordinate_transformation_mode", "half_pixel")? == "tf_half_pixel_for_nn" {
        return Err(a.unsupported("coordinate_transformation_mode", "= tf_half_pixel_for_nn is not supported"));
    }
    use CoordTransform::*;
    let coords = [
        ("half_pixel", HalfPixel),
        ("half_pixel_symmetric", HalfPixelSymmetric),
        ("pytorch_half_pixel", PytorchHalfPixel),
        ("align_corners", AlignCorners),
        ("asymmetric", Asymmetric),
        ("tf_crop_and_resize", TfCropAndResize),
    ];
    let coord = choice(n, "coordinate_transformation_mode", "half_pixel", &coords)?;
    let nearests = [
        ("round_prefer_floor", NearestMode::RoundPreferFloor),
        ("round_prefer_ceil", NearestMode::RoundPreferCeil),
        ("floor", NearestMode::Floor),
        ("ceil", NearestMode::Ceil),
    ];
    let nearest = choice(n, "nearest_mode", "round_prefer_floor", &nearests)?;
    if a.int_or("antialias", 0)? != 0 {
        return Err(a.unsupported("antialias", "= 1 is not supported"));
    }
    let policies = [("stretch", None), ("not_larger", Some(true)), ("not_smaller", Some(false))];
    let not_larger = choice(n, "keep_aspect_ratio_policy", "stretch", &policies)?;
    let policy = a.string_or("keep_aspect_ratio_policy", "stretch")?;
    let attrs = ResizeAttrs {
        mode,
        coord,
        nearest,
        cubic_coeff_a: a.float_or("cubic_coeff_a", -0.75)?,
        exclude_outside: a.bool_or("exclude_outside", false)?,
        extrapolation_value: a.float_or("extrapolation_value", 0.0)?,
    };
    Ok((attrs, policy, not_larger))
}

/// Scatters the per-axis roi, scales and sizes of a Resize with `axes` into full-rank vectors (folded to
/// constants when they are constant).
fn full_rank(cx: &mut Cx, n: &NodeIn, x: ValueId, r: usize, axes: &[usize], io: ResizeInputs) -> Result<ResizeInputs> {
    let ResizeInputs { mut roi, mut scales, mut sizes } = io;
    let b = base(cx, n);
    let scatter = |cx: &mut Cx, fill: Tensor, idx: Vec<i64>, v: ValueId, what: &str| -> Result<ValueId> {
        let data = cx.constant_value(&format!("{b}:{what}_fill"), fill);
        let ix = cx.const_i64(&format!("{b}:{what}_axes"), idx);
        aux(cx, n, &format!("{what}_full"), Op::ScatterElements { axis: 0, reduction: None }, vec![Some(data), Some(ix), Some(v)])
    };
    let ax: Vec<i64> = axes.iter().map(|&a| a as i64).collect();
    if let Some(v) = scales {
        let dt = cx.need_dtype(n, v, "Resize with 'axes'")?;
        scales = Some(scatter(cx, vec_of(dt, &vec![1.0; r]), ax.clone(), v, "scales")?);
    }
    if let Some(v) = roi {
        let dt = cx.need_dtype(n, v, "Resize with 'axes'")?;
        let fill: Vec<f64> = (0..2 * r).map(|i| if i < r { 0.0 } else { 1.0 }).collect();
        let idx = ax.iter().copied().chain(ax.iter().map(|&a| a + r as i64)).collect();
        roi = Some(scatter(cx, vec_of(dt, &fill), idx, v, "roi")?);
    }
    if let Some(v) = sizes {
        let shape = aux(cx, n, "in_shape", Op::Shape { start: 0, end: None }, vec![Some(x)])?;
        let ix = cx.const_i64(&format!("{b}:sizes_axes"), ax.clone());
        let v = match cx.dtype(v) {
            Some(DType::I64) => v,
            _ => aux(cx, n, "sizes_i64", Op::Cast { to: DType::I64 }, vec![Some(v)])?,
        };
        sizes = Some(aux(cx, n, "sizes_full", Op::ScatterElements { axis: 0, reduction: None }, vec![Some(shape), Some(ix), Some(v)])?);
    }
    Ok(ResizeInputs { roi, scales, sizes })
}

/// The constant `scales` of a `keep_aspect_ratio_policy` other than stretch: one scale for all `axes`, the
/// smallest (not_larger) or largest (not_smaller) of sizes / input size, output size round_half_up(scale *
/// input). Accepted when floor(input * scale) gives the same output sizes, which is what the kernel computes
/// from scales.
fn aspect_scales(
    cx: &mut Cx,
    n: &NodeIn,
    x: ValueId,
    axes: &[usize],
    sizes: Option<ValueId>,
    not_larger: bool,
    policy: &str,
) -> Result<ValueId> {
    let what = "keep_aspect_ratio_policy needs constant 'sizes' and a static input shape";
    let shape = cx.shape(x).map(|s| s.to_vec()).ok_or_else(|| n.unsupported(what))?;
    let want = sizes.and_then(|v| cx.constant(v)).map(|t| t.to_i64_vec()).ok_or_else(|| n.unsupported(what))?;
    if want.len() != shape.len() {
        return Err(n.invalid(format!("sizes has {} values for an input of rank {}", want.len(), shape.len())));
    }
    let ratios = axes.iter().map(|&i| want[i] as f64 / shape[i] as f64);
    let scale = if not_larger { ratios.fold(f64::INFINITY, f64::min) } else { ratios.fold(0.0, f64::max) };
    let s32 = scale as f32;
    let exact = axes.iter().all(|&i| ((shape[i] as f64) * s32 as f64).floor() == (scale * shape[i] as f64 + 0.5).floor());
    if !exact || !scale.is_finite() || scale <= 0.0 {
        return Err(n.attrs.unsupported("keep_aspect_ratio_policy", format!("= {policy}: the output size cannot be expressed with a scale")));
    }
    let full: Vec<f32> = (0..shape.len()).map(|i| if axes.contains(&i) { s32 } else { 1.0 }).collect();
    let b = base(cx, n);
    Ok(cx.constant_value(&format!("{b}:scales"), Tensor::from_f32(vec![full.len()], full)))
}

fn upsample(cx: &mut Cx, n: &NodeIn) -> Result<()> {
    let a = &n.attrs;
    let x = n.req(0)?;
    let mode = resize_mode(n)?;
    let scales = if n.opset < 7 {
        let h = a.float("height_scale")?.ok_or_else(|| n.invalid("attribute 'height_scale' is required"))?;
        let w = a.float("width_scale")?.ok_or_else(|| n.invalid("attribute 'width_scale' is required"))?;
        let b = base(cx, n);
        cx.constant_value(&format!("{b}:scales"), Tensor::from_f32(vec![4], vec![1.0, 1.0, h, w]))
    } else if n.opset < 9 {
        let s = a.floats("scales")?.ok_or_else(|| n.invalid("attribute 'scales' is required"))?;
        let b = base(cx, n);
        cx.constant_value(&format!("{b}:scales"), Tensor::from_f32(vec![s.len()], s))
    } else {
        n.req(1)?
    };
    single(cx, n, Op::Resize(legacy_resize_attrs(mode)), vec![Some(x), None, Some(scales), None])
}
