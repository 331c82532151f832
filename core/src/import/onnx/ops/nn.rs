//! Neural-network layers: convolutions, Gemm/MatMul, pooling, and Dropout at inference.

use super::{aux, aux_name, base, choice, pass, scalar_const, scalar_of, single, MapFn};
use crate::import::onnx::graph::{Cx, NodeIn};
use crate::ir::{AutoPad, BinaryOp, ConvAttrs, ConvTransposeAttrs, DType, Op, PoolAttrs, Tensor, TensorData, ValueId};
use crate::Result;

/// The ops of this family.
pub(super) const OPS: &[(&str, MapFn)] = &[
    ("Conv", |cx, n| pass(cx, n, Op::Conv(conv_attrs(n)?))),
    ("ConvTranspose", conv_transpose),
    ("Gemm", gemm),
    ("MatMul", |cx, n| pass(cx, n, Op::MatMul)),
    ("AveragePool", |cx, n| single(cx, n, Op::AveragePool(pool_attrs(n, true)?), vec![Some(n.req(0)?)])),
    ("GlobalAveragePool", |cx, n| single(cx, n, Op::GlobalAveragePool, vec![Some(n.req(0)?)])),
    ("GlobalLpPool", global_lp_pool),
    ("GlobalMaxPool", |cx, n| single(cx, n, Op::GlobalMaxPool, vec![Some(n.req(0)?)])),
    ("LpPool", |cx, n| {
        let pa = pool_attrs(n, true)?;
        single(cx, n, Op::LpPool(pa, lp_p(n)?), vec![Some(n.req(0)?)])
    }),
    ("MaxPool", max_pool),
    ("Dropout", dropout),
];

fn conv_transpose(cx: &mut Cx, n: &NodeIn) -> Result<()> {
    let a = &n.attrs;
    let conv = conv_attrs(n)?;
    let output_padding = a.usizes("output_padding")?;
    let output_shape = a.usizes("output_shape")?;
    pass(cx, n, Op::ConvTranspose(ConvTransposeAttrs { conv, output_padding, output_shape }))
}

fn gemm(cx: &mut Cx, n: &NodeIn) -> Result<()> {
    let a = &n.attrs;
    if n.opset < 7 {
        // Legacy: broadcast=0 requires C to have the output shape, which numpy broadcasting also accepts.
        a.ignore(&["broadcast"]);
    }
    let op = Op::Gemm {
        alpha: a.float_or("alpha", 1.0)?,
        beta: a.float_or("beta", 1.0)?,
        trans_a: a.bool_or("transA", false)?,
        trans_b: a.bool_or("transB", false)?,
        activation: None,
    };
    pass(cx, n, op)
}

fn max_pool(cx: &mut Cx, n: &NodeIn) -> Result<()> {
    let a = &n.attrs;
    let p = pool_attrs(n, true)?;
    let outs = n.outs(1, 2)?;
    if outs.len() == 2 && a.int_or("storage_order", 0)? != 0 {
        return maxpool_column_major(cx, n, p, outs);
    }
    a.ignore(&["storage_order"]);
    cx.emit(n.name.clone(), Op::MaxPool(p), vec![Some(n.req(0)?)], outs)
}

/// GlobalLpPool, as an LpPool whose window is the whole (static) spatial shape.
fn global_lp_pool(cx: &mut Cx, n: &NodeIn) -> Result<()> {
    let x = n.req(0)?;
    let p = lp_p(n)?;
    let shape = cx.shape(x).ok_or_else(|| n.unsupported("GlobalLpPool needs the input's spatial shape before run time"))?;
    if shape.len() < 3 {
        return Err(n.invalid(format!("input has rank {}, GlobalLpPool needs N, C and spatial dims", shape.len())));
    }
    let pa = PoolAttrs {
        kernel_shape: shape[2..].to_vec(),
        strides: vec![],
        dilations: vec![],
        pads: vec![],
        auto_pad: AutoPad::NotSet,
        ceil_mode: false,
        count_include_pad: false,
    };
    single(cx, n, Op::LpPool(pa, p), vec![Some(x)])
}

fn auto_pad(n: &NodeIn) -> Result<AutoPad> {
    use AutoPad::*;
    choice(n, "auto_pad", "NOTSET", &[("NOTSET", NotSet), ("", NotSet), ("SAME_UPPER", SameUpper), ("SAME_LOWER", SameLower), ("VALID", Valid)])
}

pub(super) fn conv_attrs(n: &NodeIn) -> Result<ConvAttrs> {
    let a = &n.attrs;
    let group = a.usize_or("group", 1)?;
    if group == 0 {
        return Err(a.invalid("group", "must be at least 1"));
    }
    Ok(ConvAttrs {
        kernel_shape: a.usizes("kernel_shape")?,
        strides: a.usizes("strides")?,
        dilations: a.usizes("dilations")?,
        pads: a.usizes("pads")?,
        auto_pad: auto_pad(n)?,
        group,
        activation: None,
    })
}

fn pool_attrs(n: &NodeIn, kernel_required: bool) -> Result<PoolAttrs> {
    let a = &n.attrs;
    let kernel_shape = a.usizes("kernel_shape")?;
    if kernel_required && kernel_shape.is_empty() {
        return Err(n.invalid("attribute 'kernel_shape' is required"));
    }
    Ok(PoolAttrs {
        kernel_shape,
        strides: a.usizes("strides")?,
        dilations: a.usizes("dilations")?,
        pads: a.usizes("pads")?,
        auto_pad: auto_pad(n)?,
        ceil_mode: a.bool_or("ceil_mode", false)?,
        count_include_pad: a.bool_or("count_include_pad", false)?,
    })
}

/// The `p` of LpPool / GlobalLpPool (a float attribute in opset 1, an int later).
fn lp_p(n: &NodeIn) -> Result<u32> {
    let a = &n.attrs;
    let p = match a.get("p").map(crate::import::onnx::attrs::kind) {
        None => 2,
        Some(crate::import::onnx::proto::attr_type::FLOAT) => {
            let f = a.float("p")?.unwrap_or(2.0);
            if f.fract() != 0.0 || f < 1.0 {
                return Err(a.unsupported("p", format!("= {f}: only integer p >= 1 is supported")));
            }
            f as i64
        }
        Some(_) => a.int_or("p", 2)?,
    };
    u32::try_from(p).ok().filter(|&p| p >= 1).ok_or_else(|| a.invalid("p", format!("must be at least 1, found {p}")))
}

/// MaxPool with `storage_order = 1`: the kernel's row-major indices `((n*C + c)*H + h)*W + w` of a 2-D pool are
/// rewritten as column-major `((n*C + c)*W + w)*H + h`, which needs the input's spatial size.
fn maxpool_column_major(cx: &mut Cx, n: &NodeIn, p: PoolAttrs, outs: Vec<ValueId>) -> Result<()> {
    let x = n.req(0)?;
    let (h, w) = match cx.shape(x) {
        Some(&[_, _, h, w]) => (h as f64, w as f64),
        _ => return Err(n.attrs.unsupported("storage_order", "= 1 needs a 2-D pool over an input of static shape")),
    };
    let idx = {
        let b = base(cx, n);
        cx.tmp(&format!("{b}:row_major"))
    };
    cx.emit(n.name.clone(), Op::MaxPool(p), vec![Some(x)], vec![outs[0], idx])?;
    let hw = scalar_const(cx, n, "hw", DType::I64, h * w);
    let wc = scalar_const(cx, n, "w", DType::I64, w);
    let hc = scalar_const(cx, n, "h", DType::I64, h);
    let bin = |op| Op::Binary(op, None);
    let within = aux(cx, n, "within", bin(BinaryOp::Mod), vec![Some(idx), Some(hw)])?;
    let plane = aux(cx, n, "plane", bin(BinaryOp::Sub), vec![Some(idx), Some(within)])?;
    let row = aux(cx, n, "row", bin(BinaryOp::Div), vec![Some(within), Some(wc)])?;
    let col = aux(cx, n, "col", bin(BinaryOp::Mod), vec![Some(within), Some(wc)])?;
    let col_h = aux(cx, n, "col_h", bin(BinaryOp::Mul), vec![Some(col), Some(hc)])?;
    let t = aux(cx, n, "col_h_row", bin(BinaryOp::Add), vec![Some(col_h), Some(row)])?;
    cx.emit(aux_name(n, "indices"), bin(BinaryOp::Add), vec![Some(plane), Some(t)], vec![outs[1]])
}

/// Dropout at inference: the identity; a requested mask is all true (nothing dropped).
fn dropout(cx: &mut Cx, n: &NodeIn) -> Result<()> {
    let a = &n.attrs;
    let x = n.req(0)?;
    a.ignore(&["ratio", "is_test", "seed"]);
    if let Some(tm) = n.opt(2) {
        match cx.constant(tm) {
            Some(t) if t.to_f64_vec().iter().all(|&v| v == 0.0) => {}
            Some(_) => return Err(n.unsupported("training_mode = true is not supported (inference only)")),
            None => return Err(n.unsupported("training_mode must be a constant false")),
        }
    }
    let outs = n.outs(1, 2)?;
    cx.emit(n.name.clone(), Op::Identity, vec![Some(x)], vec![outs[0]])?;
    if let Some(&mask) = outs.get(1) {
        let value = if n.opset >= 10 {
            Tensor { shape: vec![1], data: TensorData::Bool(vec![true]) }
        } else {
            let dt = cx.need_dtype(n, x, "Dropout's mask output")?;
            let mut t = scalar_of(dt, 1.0);
            t.shape = vec![1];
            t
        };
        let b = base(cx, n);
        let shape = cx.tmp(&format!("{b}:shape"));
        cx.emit(aux_name(n, "shape"), Op::Shape { start: 0, end: None }, vec![Some(x)], vec![shape])?;
        cx.emit(aux_name(n, "mask"), Op::ConstantOfShape { value }, vec![Some(shape)], vec![mask])?;
    }
    Ok(())
}
