//! Neural-network layers: convolutions and pooling (run in NCHW between layout transposes), fully connected
//! layers, batched matrix products and the softmax family.

use super::{OpIn, ImportFn};
use crate::format::tflite::schema::{self, builtin_operator as bo};
use crate::format::tflite::tflite_padding;
use crate::import::tflite::importer::{Fused, Importer};
use crate::ir::{AutoPad, BinaryOp, ConvAttrs, Op, PoolAttrs, Tensor, ValueId};
use crate::Result;

/// The ops of this family.
pub(super) const OPS: &[(i32, ImportFn)] = &[
    (bo::CONV_2D, conv), (bo::DEPTHWISE_CONV_2D, conv),
    (bo::AVERAGE_POOL_2D, pool), (bo::MAX_POOL_2D, pool),
    (bo::FULLY_CONNECTED, fully_connected),
    (bo::BATCH_MATMUL, batch_matmul),
    (bo::SOFTMAX, softmax), (bo::LOG_SOFTMAX, softmax),
];

/// CONV_2D and DEPTHWISE_CONV_2D: the NHWC input transposed to NCHW, the filter permuted to OIHW (depthwise
/// 1HWC to C1HW), TFLite's SAME/VALID padding made explicit.
fn conv(imp: &mut Importer, o: &OpIn) -> Result<ValueId> {
    let base = &o.base;
    let x = imp.value(imp.req(o, 0)?)?;
    let w = imp.value(imp.req(o, 1)?)?;
    let b = o.input(2).map(|t| imp.value(t)).transpose()?;
    let depthwise = o.code == bo::DEPTHWISE_CONV_2D;
    let (pad, sw, sh, dw, dh, act) = if depthwise {
        let opt = opts!(imp, o, schema::DepthwiseConv2DOptions);
        (opt.padding(), opt.stride_w(), opt.stride_h(), opt.dilation_w_factor(), opt.dilation_h_factor(), opt.fused_activation_function())
    } else {
        let opt = opts!(imp, o, schema::Conv2DOptions);
        (opt.padding(), opt.stride_w(), opt.stride_h(), opt.dilation_w_factor(), opt.dilation_h_factor(), opt.fused_activation_function())
    };
    let [sw, sh, dw, dh] = imp.positive([sw, sh, dw, dh], "strides and dilations")?;
    let xs = imp.shape(x);
    let ws = imp.shape(w);
    if xs.len() != 4 || ws.len() != 4 {
        return Err(imp.invalid(format!("expects 4-D input and filter, got {xs:?} and {ws:?}")));
    }
    let (kh, kw) = (ws[1], ws[2]);
    let group = if depthwise {
        xs[3]
    } else {
        if ws[3] == 0 || xs[3] % ws[3] != 0 {
            return Err(imp.invalid(format!("input channels {} are not a multiple of filter channels {}", xs[3], ws[3])));
        }
        xs[3] / ws[3]
    };
    let (_, pt, pb) = tflite_padding(pad, xs[1], kh, sh, dh);
    let (_, pl, pr) = tflite_padding(pad, xs[2], kw, sw, dw);
    let fused = imp.fused(act)?;
    let xn = imp.nhwc_to_nchw(x, &base)?;
    let perm = if depthwise { [3, 0, 1, 2] } else { [0, 3, 1, 2] };
    let wn = imp.permute(w, &perm, format!("{base}/filter_oihw"))?;
    let attrs = ConvAttrs {
        kernel_shape: vec![kh, kw],
        strides: vec![sh, sw],
        dilations: vec![dh, dw],
        pads: vec![pt, pl, pb, pr],
        auto_pad: AutoPad::NotSet,
        group,
        activation: match fused {
            Fused::Act(a) => Some(a),
            _ => None,
        },
    };
    let y = imp.node(Op::Conv(attrs), vec![Some(xn), Some(wn), b], format!("{base}/nchw"))?;
    let y = if fused == Fused::Tanh { imp.apply_fused(y, fused, format!("{base}/tanh"))? } else { y };
    imp.nchw_to_nhwc(y, base.clone())
}

/// AVERAGE_POOL_2D and MAX_POOL_2D, in NCHW.
fn pool(imp: &mut Importer, o: &OpIn) -> Result<ValueId> {
    let base = &o.base;
    let x = imp.value(imp.req(o, 0)?)?;
    let opt = opts!(imp, o, schema::Pool2DOptions);
    let [sw, sh, fw, fh] = imp.positive([opt.stride_w(), opt.stride_h(), opt.filter_width(), opt.filter_height()], "strides and filter sizes")?;
    let xs = imp.shape(x);
    if xs.len() != 4 {
        return Err(imp.invalid(format!("expects a 4-D input, got {xs:?}")));
    }
    let (_, pt, pb) = tflite_padding(opt.padding(), xs[1], fh, sh, 1);
    let (_, pl, pr) = tflite_padding(opt.padding(), xs[2], fw, sw, 1);
    let fused = imp.fused(opt.fused_activation_function())?;
    let attrs = PoolAttrs {
        kernel_shape: vec![fh, fw],
        strides: vec![sh, sw],
        dilations: vec![],
        pads: vec![pt, pl, pb, pr],
        auto_pad: AutoPad::NotSet,
        ceil_mode: false,
        count_include_pad: false,
    };
    let xn = imp.nhwc_to_nchw(x, &base)?;
    let pop = if o.code == bo::MAX_POOL_2D { Op::MaxPool(attrs) } else { Op::AveragePool(attrs) };
    let y = imp.op1(pop, &[xn], format!("{base}/nchw"))?;
    let y = imp.apply_fused(y, fused, format!("{base}/activation"))?;
    imp.nchw_to_nhwc(y, base.clone())
}

/// FULLY_CONNECTED as a Gemm on the input flattened to [batch, depth] (reshaped back with keep_num_dims).
fn fully_connected(imp: &mut Importer, o: &OpIn) -> Result<ValueId> {
    let base = &o.base;
    let opt = opts!(imp, o, schema::FullyConnectedOptions);
    if opt.weights_format() != 0 {
        return Err(imp.unsupported("shuffled FULLY_CONNECTED weights"));
    }
    let x = imp.value(imp.req(o, 0)?)?;
    let w = imp.value(imp.req(o, 1)?)?;
    let b = o.input(2).map(|t| imp.value(t)).transpose()?;
    let xs = imp.shape(x);
    let ws = imp.shape(w);
    if ws.len() != 2 || ws[1] == 0 {
        return Err(imp.invalid(format!("expects a 2-D filter [units, depth], got {ws:?}")));
    }
    let (n_out, k) = (ws[0], ws[1]);
    let numel: usize = xs.iter().product();
    if numel % k != 0 {
        return Err(imp.invalid(format!("input of {numel} elements is not a multiple of the filter depth {k}")));
    }
    let batch = numel / k;
    let x2 = if xs == [batch, k] {
        x
    } else {
        imp.op_with_i64(Op::Reshape { allowzero: false }, x, format!("{base}/flat_shape"), vec![batch as i64, k as i64], format!("{base}/flatten"))?
    };
    let fused = imp.fused(opt.fused_activation_function())?;
    let gemm = Op::Gemm {
        alpha: 1.0,
        beta: 1.0,
        trans_a: false,
        trans_b: true,
        activation: match fused {
            Fused::Act(a) => Some(a),
            _ => None,
        },
    };
    let keep = opt.keep_num_dims() && xs.len() > 2;
    let y = imp.node(gemm, vec![Some(x2), Some(w), b], if keep || fused == Fused::Tanh { format!("{base}/gemm") } else { base.clone() })?;
    let y = if fused == Fused::Tanh { imp.apply_fused(y, fused, format!("{base}/tanh"))? } else { y };
    if keep {
        let mut s: Vec<i64> = xs[..xs.len() - 1].iter().map(|&d| d as i64).collect();
        s.push(n_out as i64);
        imp.op_with_i64(Op::Reshape { allowzero: false }, y, format!("{base}/out_shape"), s, base.clone())
    } else {
        Ok(y)
    }
}

/// BATCH_MATMUL, with adj_x / adj_y as transposes of the last two dims.
fn batch_matmul(imp: &mut Importer, o: &OpIn) -> Result<ValueId> {
    let base = &o.base;
    let opt = opts!(imp, o, schema::BatchMatMulOptions);
    let mut a = imp.value(imp.req(o, 0)?)?;
    let mut b = imp.value(imp.req(o, 1)?)?;
    for (v, adj, tag) in [(&mut a, opt.adj_x(), "adj_x"), (&mut b, opt.adj_y(), "adj_y")] {
        if adj {
            let r = imp.shape(*v).len();
            if r < 2 {
                return Err(imp.invalid("adjoint of a rank-1 operand"));
            }
            let mut perm: Vec<usize> = (0..r).collect();
            perm.swap(r - 2, r - 1);
            *v = imp.permute(*v, &perm, format!("{base}/{tag}"))?;
        }
    }
    imp.op1(Op::MatMul, &[a, b], base.clone())
}

/// SOFTMAX (with beta as a scaling of the input) and LOG_SOFTMAX, over the last axis.
fn softmax(imp: &mut Importer, o: &OpIn) -> Result<ValueId> {
    let base = &o.base;
    let x = imp.value(imp.req(o, 0)?)?;
    let axis = imp.shape(x).len().saturating_sub(1);
    let beta = if o.code == bo::SOFTMAX { opts!(imp, o, schema::SoftmaxOptions).beta() } else { 1.0 };
    if beta != 1.0 && imp.g.value(x).quant.is_some() {
        return Err(imp.unsupported(format!("quantized SOFTMAX with beta {beta}")));
    }
    let x = if beta != 1.0 {
        let b = imp.g.add_constant(format!("{base}/beta"), Tensor::from_f32(vec![], vec![beta]));
        imp.op1(Op::Binary(BinaryOp::Mul, None), &[x, b], format!("{base}/scaled"))?
    } else {
        x
    };
    let sop = if o.code == bo::SOFTMAX { Op::Softmax { axis } } else { Op::LogSoftmax { axis } };
    imp.op1(sop, &[x], base.clone())
}
