//! Shape and layout: reshaping, transposing, joining and splitting, slicing, tiling, padding, depth/space
//! rearrangement, and the ops that make tensors from shapes (Shape, ConstantOfShape, EyeLike, Range).

use super::{aux, axis_of, base, choice, dtype_attr, input_or_attr, pass, scalar_const, scalar_of, single, trimmed, MapFn};
use crate::import::onnx::graph::{Cx, NodeIn};
use crate::import::onnx::tensor::to_tensor;
use crate::ir::{BinaryOp, DType, Op, PadMode, Tensor};
use crate::Result;

/// The ops of this family.
pub(super) const OPS: &[(&str, MapFn)] = &[
    ("Concat", concat),
    ("DepthToSpace", depth_space),
    ("Expand", |cx, n| pass(cx, n, Op::Expand)),
    ("Flatten", flatten),
    ("Identity", |cx, n| pass(cx, n, Op::Identity)),
    ("Reshape", reshape),
    ("ReverseSequence", |cx, n| {
        let a = &n.attrs;
        pass(cx, n, Op::ReverseSequence { batch_axis: a.usize_or("batch_axis", 1)?, time_axis: a.usize_or("time_axis", 0)? })
    }),
    ("Slice", slice),
    ("SpaceToDepth", depth_space),
    ("Split", split),
    ("Squeeze", squeeze),
    ("Tile", tile),
    ("Transpose", transpose),
    ("Trilu", |cx, n| pass(cx, n, Op::Trilu { upper: n.attrs.bool_or("upper", true)? })),
    ("Unsqueeze", squeeze),
    ("CenterCropPad", center_crop_pad),
    ("Pad", pad),
    ("ConstantOfShape", constant_of_shape),
    ("EyeLike", eye_like),
    ("Range", |cx, n| {
        // stash_type (opset 27) only sets the accumulation precision of f16/bf16 ranges
        n.attrs.ignore(&["stash_type"]);
        pass(cx, n, Op::Range)
    }),
    ("Shape", |cx, n| {
        let a = &n.attrs;
        let start = a.int_or("start", 0)?;
        let end = a.int("end")?;
        single(cx, n, Op::Shape { start, end }, vec![Some(n.req(0)?)])
    }),
    ("Size", |cx, n| pass(cx, n, Op::Size)),
];

/// Reshape: the shape from an attribute before opset 5, from input 1 after.
fn reshape(cx: &mut Cx, n: &NodeIn) -> Result<()> {
    let a = &n.attrs;
    let x = n.req(0)?;
    let shape = input_or_attr(cx, n, 5, "shape", |a| a.ints("shape"))?;
    single(cx, n, Op::Reshape { allowzero: a.bool_or("allowzero", false)? }, vec![Some(x), Some(shape)])
}

fn flatten(cx: &mut Cx, n: &NodeIn) -> Result<()> {
    let x = n.req(0)?;
    let axis = axis_of(cx, n, x, n.attrs.int_or("axis", 1)?, "axis", true)?;
    single(cx, n, Op::Flatten { axis }, vec![Some(x)])
}

/// Squeeze and Unsqueeze: axes from an attribute before opset 13, from input 1 after.
fn squeeze(cx: &mut Cx, n: &NodeIn) -> Result<()> {
    let x = n.req(0)?;
    let (axes, inputs) = if n.opset < 13 {
        let axes = n.attrs.ints("axes")?;
        if n.op_type == "Unsqueeze" && axes.is_none() {
            return Err(n.invalid("attribute 'axes' is required"));
        }
        (axes, vec![Some(x)])
    } else {
        (None, trimmed(&n.inputs))
    };
    let op = if n.op_type == "Squeeze" { Op::Squeeze { axes } } else { Op::Unsqueeze { axes } };
    single(cx, n, op, inputs)
}

fn transpose(cx: &mut Cx, n: &NodeIn) -> Result<()> {
    let x = n.req(0)?;
    let perm = n.attrs.ints("perm")?.unwrap_or_default();
    let perm = perm.iter().map(|&p| axis_of(cx, n, x, p, "perm entry", false)).collect::<Result<Vec<_>>>()?;
    single(cx, n, Op::Transpose { perm }, vec![Some(x)])
}

fn concat(cx: &mut Cx, n: &NodeIn) -> Result<()> {
    if n.inputs.is_empty() || n.inputs.iter().any(|i| i.is_none()) {
        return Err(n.invalid("needs one or more inputs, none of them empty"));
    }
    let axis = match n.attrs.int("axis")? {
        Some(ax) => ax,
        None if n.opset < 4 => 1,
        None => return Err(n.invalid("attribute 'axis' is required")),
    };
    // any input with a known rank resolves a negative axis
    let known = n.inputs.iter().flatten().copied().find(|&i| cx.rank(i).is_some());
    let axis = axis_of(cx, n, known.unwrap_or(n.req(0)?), axis, "axis", false)?;
    single(cx, n, Op::Concat { axis }, n.inputs.clone())
}

/// Slice: starts, ends and axes from attributes before opset 10, from inputs after.
fn slice(cx: &mut Cx, n: &NodeIn) -> Result<()> {
    if n.opset >= 10 {
        return pass(cx, n, Op::Slice);
    }
    let a = &n.attrs;
    let x = n.req(0)?;
    let starts = a.ints("starts")?.ok_or_else(|| n.invalid("attribute 'starts' is required"))?;
    let ends = a.ints("ends")?.ok_or_else(|| n.invalid("attribute 'ends' is required"))?;
    let b = base(cx, n);
    let mut ins = vec![Some(x), Some(cx.const_i64(&format!("{b}:starts"), starts)), Some(cx.const_i64(&format!("{b}:ends"), ends))];
    if let Some(axes) = a.ints("axes")? {
        ins.push(Some(cx.const_i64(&format!("{b}:axes"), axes)));
    }
    single(cx, n, Op::Slice, ins)
}

fn tile(cx: &mut Cx, n: &NodeIn) -> Result<()> {
    if n.opset < 6 {
        return Err(n.unsupported("Tile-1 (tiles and axis inputs) is not supported; use opset 6 or later"));
    }
    pass(cx, n, Op::Tile)
}

/// DepthToSpace and SpaceToDepth (DCR or CRD mode).
fn depth_space(cx: &mut Cx, n: &NodeIn) -> Result<()> {
    let a = &n.attrs;
    let blocksize = a.usize_or("blocksize", 0)?;
    if blocksize == 0 {
        return Err(n.invalid("attribute 'blocksize' is required and must be positive"));
    }
    let crd = match a.string_or("mode", "DCR")?.as_str() {
        "DCR" => false,
        "CRD" => true,
        s => return Err(a.invalid("mode", format!("has unknown value '{s}' (expected DCR or CRD)"))),
    };
    let op = match (n.op_type, crd) {
        ("SpaceToDepth", true) => return space_to_depth_crd(cx, n, blocksize),
        ("SpaceToDepth", false) => Op::SpaceToDepth { blocksize },
        _ => Op::DepthToSpace { blocksize, crd },
    };
    single(cx, n, op, vec![Some(n.req(0)?)])
}

fn constant_of_shape(cx: &mut Cx, n: &NodeIn) -> Result<()> {
    let a = &n.attrs;
    let value = match a.tensor("value")? {
        Some(t) => {
            let t = to_tensor(t, None, &format!("{}: attribute 'value'", n.desc))?;
            if t.len() != 1 {
                return Err(a.invalid("value", format!("must hold one element, found {}", t.len())));
            }
            Tensor { shape: vec![1], data: t.data }
        }
        None => Tensor::from_f32(vec![1], vec![0.0]),
    };
    single(cx, n, Op::ConstantOfShape { value }, vec![Some(n.req(0)?)])
}

fn eye_like(cx: &mut Cx, n: &NodeIn) -> Result<()> {
    let a = &n.attrs;
    let dtype = match a.int("dtype")? {
        Some(c) => Some(dtype_attr(n, "dtype", c)?),
        None => None,
    };
    single(cx, n, Op::EyeLike { dtype, k: a.int_or("k", 0)? }, vec![Some(n.req(0)?)])
}

/// Split: sizes from the `split` attribute (before 13) or input; otherwise equal parts (the last one smaller
/// with `num_outputs` from opset 18).
fn split(cx: &mut Cx, n: &NodeIn) -> Result<()> {
    let a = &n.attrs;
    let x = n.req(0)?;
    let axis = axis_of(cx, n, x, a.int_or("axis", 0)?, "axis", false)?;
    let count = n.outputs.len();
    if count == 0 {
        return Err(n.invalid("has no outputs"));
    }
    if let Some(k) = a.int("num_outputs")? {
        if k != count as i64 {
            return Err(a.invalid("num_outputs", format!("is {k} but the node has {count} outputs")));
        }
    }
    let split = if n.opset < 13 { a.ints("split")? } else { None };
    let (split, inputs) = match split {
        Some(s) if !s.is_empty() => {
            if s.len() != count {
                return Err(a.invalid("split", format!("has {} sizes but the node has {count} outputs", s.len())));
            }
            let s = s
                .iter()
                .map(|&x| usize::try_from(x).map_err(|_| a.invalid("split", format!("has a negative size {x}"))))
                .collect::<Result<Vec<_>>>()?;
            (Some(s), vec![Some(x)])
        }
        _ => (None, trimmed(&n.inputs)),
    };
    cx.emit(n.name.clone(), Op::Split { axis, split, num_outputs: count }, inputs, n.outputs.clone())
}

/// Pad: pads and value from attributes before opset 11, inputs after.
fn pad(cx: &mut Cx, n: &NodeIn) -> Result<()> {
    let a = &n.attrs;
    let x = n.req(0)?;
    let modes = [("constant", PadMode::Constant), ("reflect", PadMode::Reflect), ("edge", PadMode::Edge), ("wrap", PadMode::Wrap)];
    let mode = choice(n, "mode", "constant", &modes)?;
    if n.opset >= 11 {
        return pass(cx, n, Op::Pad { mode });
    }
    let key = if n.opset < 2 { "paddings" } else { "pads" };
    let pads = a.ints(key)?.ok_or_else(|| n.invalid(format!("attribute '{key}' is required")))?;
    let value = a.float_or("value", 0.0)?;
    let b = base(cx, n);
    let mut ins = vec![Some(x), Some(cx.const_i64(&format!("{b}:pads"), pads))];
    if mode == PadMode::Constant && value != 0.0 {
        let dt = cx.need_dtype(n, x, "Pad with a 'value'")?;
        ins.push(Some(cx.constant_value(&format!("{b}:value"), scalar_of(dt, value as f64))));
    }
    single(cx, n, Op::Pad { mode }, ins)
}

/// SpaceToDepth with mode CRD (opset 28), as Reshape → Transpose → Reshape on a static shape.
fn space_to_depth_crd(cx: &mut Cx, n: &NodeIn, b: usize) -> Result<()> {
    let x = n.req(0)?;
    let s = cx.shape(x).map(|s| s.to_vec()).ok_or_else(|| n.unsupported("SpaceToDepth mode CRD needs a static input shape"))?;
    let [bn, c, h, w] = s[..] else {
        return Err(n.invalid(format!("SpaceToDepth needs a rank-4 input, found rank {}", s.len())));
    };
    if h % b != 0 || w % b != 0 {
        return Err(n.invalid(format!("input {h}x{w} is not divisible by blocksize {b}")));
    }
    let base_name = base(cx, n);
    let to6 = cx.const_i64(&format!("{base_name}:shape6"), [bn, c, h / b, b, w / b, b].iter().map(|&d| d as i64).collect());
    let r6 = aux(cx, n, "reshape6", Op::Reshape { allowzero: true }, vec![Some(x), Some(to6)])?;
    let t = aux(cx, n, "transpose", Op::Transpose { perm: vec![0, 1, 3, 5, 2, 4] }, vec![Some(r6)])?;
    let to4 = cx.const_i64(&format!("{base_name}:shape4"), [bn, c * b * b, h / b, w / b].iter().map(|&d| d as i64).collect());
    single(cx, n, Op::Reshape { allowzero: true }, vec![Some(t), Some(to4)])
}

/// CenterCropPad, as its ONNX function body: pad each listed axis up to the target (the odd pixel at the end),
/// then slice a centred window of the target size. With a static input and a constant target the
/// shape arithmetic folds to constants.
fn center_crop_pad(cx: &mut Cx, n: &NodeIn) -> Result<()> {
    let x = n.req(0)?;
    let target = n.req(1)?;
    let axes = match n.attrs.ints("axes")? {
        Some(a) => a.iter().map(|&ax| axis_of(cx, n, x, ax, "axes entry", false).map(|a| a as i64)).collect::<Result<Vec<_>>>()?,
        None => (0..cx.need_rank(n, x, "CenterCropPad")? as i64).collect(),
    };
    let b = base(cx, n);
    let axes_v = cx.const_i64(&format!("{b}:axes"), axes);
    let two = scalar_const(cx, n, "two", DType::I64, 2.0);
    let bin = |op| Op::Binary(op, None);
    let target = match cx.dtype(target) {
        Some(DType::I64) => target,
        _ => aux(cx, n, "target_i64", Op::Cast { to: DType::I64 }, vec![Some(target)])?,
    };
    let all = aux(cx, n, "in_shape", Op::Shape { start: 0, end: None }, vec![Some(x)])?;
    let cur = aux(cx, n, "in_dims", Op::Gather { axis: 0 }, vec![Some(all), Some(axes_v)])?;
    let padded = aux(cx, n, "padded_dims", bin(BinaryOp::Max), vec![Some(target), Some(cur)])?;
    let amount = aux(cx, n, "pad_amount", bin(BinaryOp::Sub), vec![Some(padded), Some(cur)])?;
    let left = aux(cx, n, "pad_left", bin(BinaryOp::Div), vec![Some(amount), Some(two)])?;
    let right = aux(cx, n, "pad_right", bin(BinaryOp::Sub), vec![Some(amount), Some(left)])?;
    let pads = aux(cx, n, "pads", Op::Concat { axis: 0 }, vec![Some(left), Some(right)])?;
    let y = aux(cx, n, "padded", Op::Pad { mode: PadMode::Constant }, vec![Some(x), Some(pads), None, Some(axes_v)])?;
    let diff = aux(cx, n, "excess", bin(BinaryOp::Sub), vec![Some(padded), Some(target)])?;
    let starts = aux(cx, n, "starts", bin(BinaryOp::Div), vec![Some(diff), Some(two)])?;
    let ends = aux(cx, n, "ends", bin(BinaryOp::Add), vec![Some(starts), Some(target)])?;
    single(cx, n, Op::Slice, vec![Some(y), Some(starts), Some(ends), Some(axes_v)])
}
