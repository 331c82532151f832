//! MediaPipe's custom ops of the attention face mesh (`face_landmark_with_attention.tflite`), version 2 of
//! each (`mediapipe/util/tflite/operations/`): `Landmarks2TransformMatrix`, `TransformTensorBilinear` and
//! `TransformLandmarks`, expanded into core IR ops (Gather, Mul/Add/Sub/Div, Sqrt, Floor, Cast, Min/Max,
//! comparisons, reductions, Concat, Reshape), so every target runs them without a kernel of its own. The
//! nodes of an expansion are marked [`keep_float`](crate::ir::Node::keep_float): the int8 quantizer leaves
//! the coordinate math float (a transform matrix in int8 would be useless).
//!
//! What MediaPipe's CPU kernels compute (`float` math, batch 1):
//! - `Landmarks2TransformMatrix` ([1, N, 3] landmarks → [1, 4, 4]; flexbuffer options `left_rotation_idx`,
//!   `right_rotation_idx`, `subset_idxs`, `output_width`/`_height`, `scale_x`/`_y`,
//!   `target_rotation_radians`): the rotation `r = target − atan2(yR − yL, xR − xL)`; the subset's x,y
//!   rotated by `R(r)` give a box (min/max), whose centre rotated back by `R(−r)` is `(cx, cy)`; the matrix is
//!   `shift(cx, cy) · R(−r) · scale(sx, sy) · shift(−w/2, −h/2)` with `sx = scale_x · box_w / w` (and y).
//!   Here `cos r`, `sin r` come from the vector between the two landmarks (`(dx, dy)/|d|`, the angle of a
//!   zero vector being 0 as `atan2(0, 0)` is), combined with the constant target angle: no trigonometry.
//! - `TransformTensorBilinear` ([1, H, W, C] + matrix → [1, h, w, C]): output pixel `(x, y)` samples the
//!   input at `M₀₀x + M₀₁y + M₀₃'` (and row 1), where `M·₃' = M·₃ + 0.5·M·₀ + 0.5·M·₁ − 0.5` (pixel centres);
//!   a sample outside `[0, W−1] × [0, H−1]` is 0, inside it is bilinear between the four neighbours.
//! - `TransformLandmarks` ([1, N, 2 or 3] + matrix → same shape): `(x, y) ↦ (M₀₀x + M₀₁y + M₀₃, M₁₀x +
//!   M₁₁y + M₁₃)`, a third coordinate passes through.

use super::OpIn;
use crate::format::tflite::flexbuffer::{self, FlexValue};
use crate::format::tflite::schema;
use crate::import::tflite::importer::Importer;
use crate::ir::{BinaryOp, DType, Op, ReduceOp, Tensor, UnaryOp, ValueId};
use crate::Result;

/// Landmarks2TransformMatrix (v2).
pub(super) fn landmarks_to_transform_matrix(imp: &mut Importer, o: &OpIn) -> Result<ValueId> {
    float_island(imp, |imp| {
        check_version(imp, o, "Landmarks2TransformMatrix")?;
        let opts = Options::read(imp, o, &[
            "left_rotation_idx", "right_rotation_idx", "output_height", "output_width", "scale_x", "scale_y", "subset_idxs",
            "target_rotation_radians",
        ])?;
        let [l] = inputs::<1>(imp, o, "Landmarks2TransformMatrix takes 1 input (landmarks)")?;
        let s = imp.shape(l);
        if s.len() != 3 || s[0] != 1 || s[2] != 3 {
            return Err(imp.invalid(format!("expects landmarks [1, N, 3] (MediaPipe reads x, y, z triples of one batch), got {s:?}")));
        }
        let n = s[1] as i64;
        let index = |imp: &Importer, key: &str, v: i64| -> Result<i64> {
            if (0..n).contains(&v) {
                Ok(v)
            } else {
                Err(imp.invalid(format!("{key} {v} is not a landmark index (the input has {n})")))
            }
        };
        let left = index(imp, "left_rotation_idx", opts.int(imp, "left_rotation_idx")?)?;
        let right = index(imp, "right_rotation_idx", opts.int(imp, "right_rotation_idx")?)?;
        let subset = opts.ints(imp, "subset_idxs")?;
        if subset.is_empty() {
            return Err(imp.invalid("subset_idxs is empty (MediaPipe's kernel needs at least one landmark for the box)"));
        }
        for &i in &subset {
            index(imp, "subset_idxs entry", i)?;
        }
        let (out_h, out_w) = (opts.int(imp, "output_height")?, opts.int(imp, "output_width")?);
        let (scale_x, scale_y) = (opts.float(imp, "scale_x")?, opts.float(imp, "scale_y")?);
        if out_h <= 0 || out_w <= 0 || !(scale_x > 0.0 && scale_y > 0.0) {
            return Err(imp.invalid(format!(
                "output size {out_w}x{out_h} and scales {scale_x}, {scale_y} must be positive (MediaPipe's kernel refuses them)"
            )));
        }
        // a missing key reads as 0 in MediaPipe's parser
        let target = opts.get("target_rotation_radians").map(|_| opts.float(imp, "target_rotation_radians")).transpose()?.unwrap_or(0.0);
        let b = &o.base;
        let mut e = Emit { imp, base: b.clone() };
        let xy = e.pick(l, 2, &[0, 1], "xy")?;
        let lr = e.pick(xy, 1, &[left, right], "rotation_landmarks")?;
        let (pl, pr) = (e.pick(lr, 1, &[0], "left")?, e.pick(lr, 1, &[1], "right")?);
        let d = e.bin(BinaryOp::Sub, pr, pl, "direction")?;
        let (dx, dy) = (e.pick(d, 2, &[0], "dx")?, e.pick(d, 2, &[1], "dy")?);
        let dx2 = e.bin(BinaryOp::Mul, dx, dx, "dx2")?;
        let dy2 = e.bin(BinaryOp::Mul, dy, dy, "dy2")?;
        let len2 = e.bin(BinaryOp::Add, dx2, dy2, "length2")?;
        let len = e.unary(UnaryOp::Sqrt, len2, "length")?;
        // (cos θ, sin θ) of the direction; a zero vector has angle 0 (atan2(0, 0) = 0): z = [len == 0]
        let zero = e.scalar(0.0, "zero")?;
        let is_zero = e.bin(BinaryOp::Equal, len, zero, "is_zero")?;
        let z = e.cast(is_zero, "is_zero_f")?;
        let den = e.bin(BinaryOp::Add, len, z, "denominator")?;
        let dxz = e.bin(BinaryOp::Add, dx, z, "dx_or_one")?;
        let cos_t = e.bin(BinaryOp::Div, dxz, den, "cos_theta")?;
        let sin_t = e.bin(BinaryOp::Div, dy, den, "sin_theta")?;
        // r = target − θ
        let (c, s) = if target == 0.0 {
            let m1 = e.scalar(-1.0, "minus_one")?;
            (cos_t, e.bin(BinaryOp::Mul, sin_t, m1, "sin_r")?)
        } else {
            let (ct, st) = ((target as f64).cos() as f32, (target as f64).sin() as f32);
            let (ct, st) = (e.scalar(ct, "cos_target")?, e.scalar(st, "sin_target")?);
            let a = e.bin(BinaryOp::Mul, ct, cos_t, "cos_r_a")?;
            let bb = e.bin(BinaryOp::Mul, st, sin_t, "cos_r_b")?;
            let c = e.bin(BinaryOp::Add, a, bb, "cos_r")?;
            let a = e.bin(BinaryOp::Mul, st, cos_t, "sin_r_a")?;
            let bb = e.bin(BinaryOp::Mul, ct, sin_t, "sin_r_b")?;
            (c, e.bin(BinaryOp::Sub, a, bb, "sin_r")?)
        };
        // the subset rotated by R(r): x' = c·x − s·y, y' = s·x + c·y; its box
        let p = e.pick(xy, 1, &subset, "subset")?;
        let (px, py) = (e.pick(p, 2, &[0], "subset_x")?, e.pick(p, 2, &[1], "subset_y")?);
        let (cpx, spy) = (e.bin(BinaryOp::Mul, c, px, "c_x")?, e.bin(BinaryOp::Mul, s, py, "s_y")?);
        let rx = e.bin(BinaryOp::Sub, cpx, spy, "rotated_x")?;
        let (spx, cpy) = (e.bin(BinaryOp::Mul, s, px, "s_x")?, e.bin(BinaryOp::Mul, c, py, "c_y")?);
        let ry = e.bin(BinaryOp::Add, spx, cpy, "rotated_y")?;
        let (max_x, min_x) = (e.reduce(ReduceOp::Max, rx, 1, "max_x")?, e.reduce(ReduceOp::Min, rx, 1, "min_x")?);
        let (max_y, min_y) = (e.reduce(ReduceOp::Max, ry, 1, "max_y")?, e.reduce(ReduceOp::Min, ry, 1, "min_y")?);
        let box_w = e.bin(BinaryOp::Sub, max_x, min_x, "box_width")?;
        let box_h = e.bin(BinaryOp::Sub, max_y, min_y, "box_height")?;
        let half = e.scalar(0.5, "half")?;
        let sx_ = e.bin(BinaryOp::Add, min_x, max_x, "box_x2")?;
        let mx = e.bin(BinaryOp::Mul, sx_, half, "box_x")?;
        let sy_ = e.bin(BinaryOp::Add, min_y, max_y, "box_y2")?;
        let my = e.bin(BinaryOp::Mul, sy_, half, "box_y")?;
        // the centre rotated back by R(−r): cx = c·mx + s·my, cy = c·my − s·mx
        let (a, bb) = (e.bin(BinaryOp::Mul, c, mx, "c_mx")?, e.bin(BinaryOp::Mul, s, my, "s_my")?);
        let cx = e.bin(BinaryOp::Add, a, bb, "center_x")?;
        let (a, bb) = (e.bin(BinaryOp::Mul, c, my, "c_my")?, e.bin(BinaryOp::Mul, s, mx, "s_mx")?);
        let cy = e.bin(BinaryOp::Sub, a, bb, "center_y")?;
        // scales: scale_x · box_w / w
        let (k_sx, k_w) = (e.scalar(scale_x, "scale_x")?, e.scalar(out_w as f32, "output_width")?);
        let t = e.bin(BinaryOp::Mul, k_sx, box_w, "scaled_width")?;
        let sx = e.bin(BinaryOp::Div, t, k_w, "sx")?;
        let (k_sy, k_h) = (e.scalar(scale_y, "scale_y")?, e.scalar(out_h as f32, "output_height")?);
        let t = e.bin(BinaryOp::Mul, k_sy, box_h, "scaled_height")?;
        let sy = e.bin(BinaryOp::Div, t, k_h, "sy")?;
        // shift · R(−r) · scale: rows (c·sx, s·sy, 0, cx) and (−s·sx, c·sy, 0, cy); then · shift(−w/2, −h/2)
        let m1 = e.scalar(-1.0, "minus_one_b")?;
        let neg_s = e.bin(BinaryOp::Mul, s, m1, "minus_sin_r")?;
        let a00 = e.bin(BinaryOp::Mul, c, sx, "m00")?;
        let a01 = e.bin(BinaryOp::Mul, s, sy, "m01")?;
        let a10 = e.bin(BinaryOp::Mul, neg_s, sx, "m10")?;
        let a11 = e.bin(BinaryOp::Mul, c, sy, "m11")?;
        let shx = e.scalar(-((out_w as f64) / 2.0) as f32, "shift_x")?;
        let shy = e.scalar(-((out_h as f64) / 2.0) as f32, "shift_y")?;
        let row = |e: &mut Emit, r: usize, a: ValueId, b: ValueId, centre: ValueId| -> Result<ValueId> {
            let ta = e.bin(BinaryOp::Mul, a, shx, &format!("m{r}3_a"))?;
            let tb = e.bin(BinaryOp::Mul, b, shy, &format!("m{r}3_b"))?;
            let t = e.bin(BinaryOp::Add, ta, tb, &format!("m{r}3_ab"))?;
            let t = e.bin(BinaryOp::Add, t, centre, &format!("m{r}3"))?;
            let z = e.constant(Tensor::from_f32(vec![1, 1, 1], vec![0.0]), &format!("m{r}2"));
            e.concat(&[a, b, z, t], 2, &format!("row{r}"))
        };
        let r0 = row(&mut e, 0, a00, a01, cx)?;
        let r1 = row(&mut e, 1, a10, a11, cy)?;
        let rest = e.constant(Tensor::from_f32(vec![1, 2, 4], vec![0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0]), "rows23");
        let m = e.concat(&[r0, r1, rest], 1, "")?;
        Ok(m)
    })
}

/// TransformTensorBilinear (v2).
pub(super) fn transform_tensor_bilinear(imp: &mut Importer, o: &OpIn) -> Result<ValueId> {
    float_island(imp, |imp| {
        check_version(imp, o, "TransformTensorBilinear")?;
        let opts = Options::read(imp, o, &["output_height", "output_width"])?;
        let [x, m] = inputs::<2>(imp, o, "TransformTensorBilinear takes 2 inputs (data, transform matrix)")?;
        let (xs, ms) = (imp.shape(x), imp.shape(m));
        check_matrix(imp, &ms)?;
        if xs.len() != 4 || xs[0] != 1 || xs[1] == 0 || xs[2] == 0 {
            return Err(imp.invalid(format!("expects data [1, H, W, C] (one batch, NHWC), got {xs:?}")));
        }
        let (h, w, ch) = (xs[1], xs[2], xs[3]);
        if h * w >= 1 << 24 {
            return Err(imp.unsupported(format!("a {h}x{w} input: pixel indices are computed in float32, exact below 2^24 pixels")));
        }
        let (oh, ow) = (opts.int(imp, "output_height")?, opts.int(imp, "output_width")?);
        if oh <= 0 || ow <= 0 || oh.saturating_mul(ow) > 1 << 24 {
            return Err(imp.invalid(format!("output size {ow}x{oh} must be positive (and below 2^24 pixels)")));
        }
        let (oh, ow) = (oh as usize, ow as usize);
        let np = oh * ow;
        crate::limits::check_tensor("TransformTensorBilinear's grid of sample positions", DType::F32, &[2, np])?;
        let mut e = Emit { imp, base: o.base.clone() };
        let [c0, c1, c3] = e.matrix_columns(m)?;
        // M·₃' = M·₃ + (0.5·M·₀ + 0.5·M·₁ − 0.5): sampling between pixel centres
        let half = e.scalar(0.5, "half")?;
        let a = e.bin(BinaryOp::Mul, c0, half, "half_m0")?;
        let b = e.bin(BinaryOp::Mul, c1, half, "half_m1")?;
        let ab = e.bin(BinaryOp::Add, a, b, "half_m01")?;
        let ab = e.bin(BinaryOp::Sub, ab, half, "centre_shift")?;
        let t = e.bin(BinaryOp::Add, c3, ab, "m3")?;
        // the sample position of every output pixel: x·M·₀ + y·M·₁ + M·₃'
        let gx: Vec<f32> = (0..np).map(|p| (p % ow) as f32).collect();
        let gy: Vec<f32> = (0..np).map(|p| (p / ow) as f32).collect();
        let gx = e.constant(Tensor::from_f32(vec![1, np, 1], gx), "grid_x");
        let gy = e.constant(Tensor::from_f32(vec![1, np, 1], gy), "grid_y");
        let a = e.bin(BinaryOp::Mul, gx, c0, "x_m0")?;
        let b = e.bin(BinaryOp::Mul, gy, c1, "y_m1")?;
        let ab = e.bin(BinaryOp::Add, a, b, "xy_m01")?;
        let tc = e.bin(BinaryOp::Add, ab, t, "sample")?;
        // inside [0, W−1] × [0, H−1] (else the sample is 0)
        let zero = e.constant(Tensor::from_f32(vec![1, 1, 1], vec![0.0]), "zero");
        let lim = e.constant(Tensor::from_f32(vec![1, 1, 2], vec![(w - 1) as f32, (h - 1) as f32]), "last_pixel");
        let ge = e.bin(BinaryOp::GreaterOrEqual, tc, zero, "above_first")?;
        let le = e.bin(BinaryOp::LessOrEqual, tc, lim, "below_last")?;
        let inside = e.bin(BinaryOp::And, ge, le, "inside_xy")?;
        let inside = e.cast(inside, "inside_xy_f")?;
        let inside = e.reduce(ReduceOp::Min, inside, 2, "inside")?;
        // the four neighbours (clamped: a neighbour past the edge has weight 0 inside) and the weights
        let f0 = e.unary(UnaryOp::Floor, tc, "floor")?;
        let frac = e.bin(BinaryOp::Sub, tc, f0, "fraction")?;
        let one = e.constant(Tensor::from_f32(vec![1, 1, 1], vec![1.0]), "one");
        let f1 = e.bin(BinaryOp::Add, f0, one, "ceil")?;
        let clamp = |e: &mut Emit, v: ValueId, what: &str| -> Result<ValueId> {
            let v = e.bin(BinaryOp::Max, v, zero, &format!("{what}_min0"))?;
            e.bin(BinaryOp::Min, v, lim, what)
        };
        let lo = clamp(&mut e, f0, "low")?;
        let hi = clamp(&mut e, f1, "high")?;
        let (lx, ly) = (e.pick(lo, 2, &[0], "low_x")?, e.pick(lo, 2, &[1], "low_y")?);
        let (hx, hy) = (e.pick(hi, 2, &[0], "high_x")?, e.pick(hi, 2, &[1], "high_y")?);
        let width = e.constant(Tensor::from_f32(vec![1, 1, 1], vec![w as f32]), "width");
        let row_ly = e.bin(BinaryOp::Mul, ly, width, "row_low")?;
        let row_hy = e.bin(BinaryOp::Mul, hy, width, "row_high")?;
        let flat = e.op(Op::Reshape { allowzero: false }, &[x], "pixels", Some(vec![1, (h * w) as i64, ch as i64]))?;
        let sample = |e: &mut Emit, row: ValueId, col: ValueId, what: &str| -> Result<ValueId> {
            let i = e.bin(BinaryOp::Add, row, col, &format!("{what}_index_f"))?;
            let i = e.op(Op::Cast { to: DType::I32 }, &[i], &format!("{what}_index_i"), None)?;
            let i = e.op(Op::Reshape { allowzero: false }, &[i], &format!("{what}_index"), Some(vec![np as i64]))?;
            e.op(Op::Gather { axis: 1 }, &[flat, i], what, None)
        };
        let q11 = sample(&mut e, row_ly, lx, "q11")?;
        let q21 = sample(&mut e, row_ly, hx, "q21")?;
        let q12 = sample(&mut e, row_hy, lx, "q12")?;
        let q22 = sample(&mut e, row_hy, hx, "q22")?;
        let (fx, fy) = (e.pick(frac, 2, &[0], "right")?, e.pick(frac, 2, &[1], "lower")?);
        let ofx = e.bin(BinaryOp::Sub, one, fx, "left")?;
        let ofy = e.bin(BinaryOp::Sub, one, fy, "upper")?;
        let lerp = |e: &mut Emit, wa: ValueId, a: ValueId, wb: ValueId, b: ValueId, what: &str| -> Result<ValueId> {
            let a = e.bin(BinaryOp::Mul, wa, a, &format!("{what}_a"))?;
            let b = e.bin(BinaryOp::Mul, wb, b, &format!("{what}_b"))?;
            e.bin(BinaryOp::Add, a, b, what)
        };
        let upper = lerp(&mut e, ofx, q11, fx, q21, "upper_row")?;
        let lower = lerp(&mut e, ofx, q12, fx, q22, "lower_row")?;
        let r = lerp(&mut e, fy, lower, ofy, upper, "bilinear")?;
        let r = e.bin(BinaryOp::Mul, r, inside, "masked")?;
        e.op(Op::Reshape { allowzero: false }, &[r], "", Some(vec![1, oh as i64, ow as i64, ch as i64]))
    })
}

/// TransformLandmarks (v2).
pub(super) fn transform_landmarks(imp: &mut Importer, o: &OpIn) -> Result<ValueId> {
    float_island(imp, |imp| {
        check_version(imp, o, "TransformLandmarks")?;
        Options::read(imp, o, &[])?;
        let [l, m] = inputs::<2>(imp, o, "TransformLandmarks takes 2 inputs (landmarks, transform matrix)")?;
        let (ls, ms) = (imp.shape(l), imp.shape(m));
        check_matrix(imp, &ms)?;
        if ls.len() != 3 || ls[0] != 1 || !matches!(ls[2], 2 | 3) {
            return Err(imp.invalid(format!("expects landmarks [1, N, 2 or 3], got {ls:?}")));
        }
        let mut e = Emit { imp, base: o.base.clone() };
        let [c0, c1, c3] = e.matrix_columns(m)?;
        let (x, y) = (e.pick(l, 2, &[0], "x")?, e.pick(l, 2, &[1], "y")?);
        let a = e.bin(BinaryOp::Mul, x, c0, "x_m0")?;
        let b = e.bin(BinaryOp::Mul, y, c1, "y_m1")?;
        let ab = e.bin(BinaryOp::Add, a, b, "xy_m01")?;
        if ls[2] == 2 {
            return e.bin(BinaryOp::Add, ab, c3, "");
        }
        let xy = e.bin(BinaryOp::Add, ab, c3, "xy")?;
        let z = e.pick(l, 2, &[2], "z")?;
        e.concat(&[xy, z], 2, "")
    })
}

/// Runs `f` with the importer marking every node it adds as [`keep_float`](crate::ir::Node::keep_float).
fn float_island<T>(imp: &mut Importer, f: impl FnOnce(&mut Importer) -> Result<T>) -> Result<T> {
    imp.keep_float = true;
    let r = f(imp);
    imp.keep_float = false;
    r
}

/// Refuses an op code version other than 2 (version 1 of each op is a different kernel).
fn check_version(imp: &Importer, o: &OpIn, op: &str) -> Result<()> {
    let version = schema::get(imp.model.operator_codes(), o.op.opcode_index() as usize).map(|c| c.version()).unwrap_or(1);
    if version != 2 {
        return Err(imp.unsupported(format!("{op} version {version}: only version 2 (MediaPipe's current kernel) is supported")));
    }
    Ok(())
}

/// The op's `N` inputs as float32 values.
fn inputs<const N: usize>(imp: &mut Importer, o: &OpIn, what: &str) -> Result<[ValueId; N]> {
    if o.ins.len() != N || o.outs.len() != 1 {
        return Err(imp.invalid(format!("has {} inputs and {} outputs; {what} and has 1 output", o.ins.len(), o.outs.len())));
    }
    let mut vs = [ValueId(0); N];
    for (k, v) in vs.iter_mut().enumerate() {
        *v = imp.value(imp.req(o, k)?)?;
        if imp.dtype(*v) != DType::F32 || imp.g.value(*v).quant.is_some() {
            return Err(imp.unsupported(format!("input {k} is {}: MediaPipe's kernel is float32 only", imp.dtype(*v))));
        }
    }
    Ok(vs)
}

fn check_matrix(imp: &Importer, s: &[usize]) -> Result<()> {
    if s != [1, 4, 4] {
        return Err(imp.invalid(format!("expects a [1, 4, 4] transform matrix, got {s:?}")));
    }
    Ok(())
}

/// The custom options: a flexbuffer map whose keys are all among those the op reads.
struct Options(Vec<(String, FlexValue)>);

impl Options {
    fn read(imp: &Importer, o: &OpIn, known: &[&str]) -> Result<Options> {
        let bytes = schema::to_vec(o.op.custom_options());
        if bytes.is_empty() {
            return Ok(Options(Vec::new()));
        }
        let map = flexbuffer::read_map(&bytes).map_err(|m| imp.invalid(format!("custom options are not a flexbuffer map: {m}")))?;
        if let Some((k, _)) = map.iter().find(|(k, _)| !known.contains(&k.as_str())) {
            return Err(imp.unsupported(format!("custom option '{k}' (the options this op has: {})", if known.is_empty() { "none".to_string() } else { known.join(", ") })));
        }
        Ok(Options(map))
    }
    fn get(&self, key: &str) -> Option<&FlexValue> {
        self.0.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }
    fn required(&self, imp: &Importer, key: &str) -> Result<&FlexValue> {
        self.get(key).ok_or_else(|| imp.invalid(format!("custom option '{key}' is missing")))
    }
    fn int(&self, imp: &Importer, key: &str) -> Result<i64> {
        let v = self.required(imp, key)?;
        v.as_i64().filter(|i| i32::try_from(*i).is_ok()).ok_or_else(|| imp.invalid(format!("custom option '{key}' is {v:?}, not an int32")))
    }
    fn float(&self, imp: &Importer, key: &str) -> Result<f32> {
        let v = self.required(imp, key)?;
        v.as_f64().map(|f| f as f32).filter(|f| f.is_finite()).ok_or_else(|| imp.invalid(format!("custom option '{key}' is {v:?}, not a finite number")))
    }
    fn ints(&self, imp: &Importer, key: &str) -> Result<Vec<i64>> {
        let v = self.required(imp, key)?;
        v.as_i64s().ok_or_else(|| imp.invalid(format!("custom option '{key}' is {v:?}, not a vector of integers")))
    }
}

/// Adds the nodes of one expansion, named `{base}/{what}` (the last one, `what` empty, is the op's output).
struct Emit<'i, 'a> {
    imp: &'i mut Importer<'a>,
    base: String,
}

impl Emit<'_, '_> {
    fn name(&self, what: &str) -> String {
        if what.is_empty() {
            self.base.clone()
        } else {
            format!("{}/{what}", self.base)
        }
    }
    fn constant(&mut self, t: Tensor, what: &str) -> ValueId {
        let name = self.name(what);
        self.imp.g.add_constant(name, t)
    }
    fn scalar(&mut self, v: f32, what: &str) -> Result<ValueId> {
        Ok(self.constant(Tensor::from_f32(vec![1, 1, 1], vec![v]), what))
    }
    /// `op` on `inputs`, with a constant i64 vector `extra` as a further input.
    fn op(&mut self, op: Op, inputs: &[ValueId], what: &str, extra: Option<Vec<i64>>) -> Result<ValueId> {
        let mut ins = inputs.to_vec();
        if let Some(v) = extra {
            let name = self.name(&format!("{what}_shape"));
            ins.push(self.imp.const_i64(name, v));
        }
        let name = self.name(what);
        self.imp.op1(op, &ins, name)
    }
    fn bin(&mut self, b: BinaryOp, x: ValueId, y: ValueId, what: &str) -> Result<ValueId> {
        self.op(Op::Binary(b, None), &[x, y], what, None)
    }
    fn unary(&mut self, u: UnaryOp, x: ValueId, what: &str) -> Result<ValueId> {
        self.op(Op::Unary(u), &[x], what, None)
    }
    fn cast(&mut self, x: ValueId, what: &str) -> Result<ValueId> {
        self.op(Op::Cast { to: DType::F32 }, &[x], what, None)
    }
    /// Elements `idx` of `x` along `axis` (rank kept).
    fn pick(&mut self, x: ValueId, axis: usize, idx: &[i64], what: &str) -> Result<ValueId> {
        let name = self.name(&format!("{what}_indices"));
        let i = self.imp.const_i64(name, idx.to_vec());
        let name = self.name(what);
        self.imp.op1(Op::Gather { axis }, &[x, i], name)
    }
    /// The max or min over `axis`, kept.
    fn reduce(&mut self, r: ReduceOp, x: ValueId, axis: usize, what: &str) -> Result<ValueId> {
        let name = self.name(what);
        self.imp.op1(Op::Reduce { op: r, axes: Some(vec![axis]), keepdims: true, noop_with_empty_axes: false }, &[x], name)
    }
    fn concat(&mut self, xs: &[ValueId], axis: usize, what: &str) -> Result<ValueId> {
        let name = self.name(what);
        self.imp.op1(Op::Concat { axis }, xs, name)
    }
    /// Columns 0, 1 and 3 of the first two rows of a [1, 4, 4] matrix, each as [1, 1, 2] (row 0, row 1).
    fn matrix_columns(&mut self, m: ValueId) -> Result<[ValueId; 3]> {
        let rows = self.pick(m, 1, &[0, 1], "matrix_rows")?;
        let mut out = [ValueId(0); 3];
        for (o, j) in out.iter_mut().zip([0i64, 1, 3]) {
            let c = self.pick(rows, 2, &[j], &format!("matrix_column{j}"))?;
            *o = self.op(Op::Transpose { perm: vec![0, 2, 1] }, &[c], &format!("matrix_m{j}"), None)?;
        }
        Ok(out)
    }
}
