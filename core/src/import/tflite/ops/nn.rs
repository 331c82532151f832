//! Neural-network layers: convolutions, transposed convolutions and pooling (run in NCHW between layout
//! transposes), fully connected layers, batched matrix products, the softmax family and the L2 / local
//! response normalizations.

use super::{OpIn, ImportFn};
use crate::format::tflite::schema::{self, builtin_operator as bo};
use crate::format::tflite::tflite_padding;
use crate::import::tflite::importer::{Fused, Importer};
use crate::ir::{AutoPad, BinaryOp, ConvAttrs, ConvTransposeAttrs, Op, PoolAttrs, ReduceOp, Tensor, UnaryOp, ValueId};
use crate::Result;

/// The ops of this family.
pub(super) const OPS: &[(i32, ImportFn)] = &[
    (bo::CONV_2D, conv), (bo::DEPTHWISE_CONV_2D, conv),
    (bo::TRANSPOSE_CONV, transpose_conv),
    (bo::AVERAGE_POOL_2D, pool), (bo::MAX_POOL_2D, pool),
    (bo::FULLY_CONNECTED, fully_connected),
    (bo::BATCH_MATMUL, batch_matmul),
    (bo::SOFTMAX, softmax), (bo::LOG_SOFTMAX, softmax),
    (bo::L2_NORMALIZATION, l2_normalization),
    (bo::LOCAL_RESPONSE_NORMALIZATION, local_response_normalization),
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

/// TRANSPOSE_CONV: inputs (output_shape, weights OHWI, input NHWC, bias?). In NCHW as a ConvTranspose with the
/// weights permuted to IOHW. TFLite places the output as a forward convolution of the output would be
/// padded (SAME/VALID computed from the output size): the leading pad is that padding's, the trailing one
/// (or an output padding, when the kernel is smaller than the stride) makes the declared output size.
fn transpose_conv(imp: &mut Importer, o: &OpIn) -> Result<ValueId> {
    let base = &o.base;
    let out_shape = imp.const_ints(imp.req(o, 0)?, "the output shape")?;
    let w = imp.value(imp.req(o, 1)?)?;
    let x = imp.value(imp.req(o, 2)?)?;
    let b = o.input(3).map(|t| imp.value(t)).transpose()?;
    let opt = opts!(imp, o, schema::TransposeConvOptions);
    let [sw, sh] = imp.positive([opt.stride_w(), opt.stride_h()], "strides")?;
    let (xs, ws) = (imp.shape(x), imp.shape(w));
    if xs.len() != 4 || ws.len() != 4 || out_shape.len() != 4 {
        return Err(imp.invalid(format!("expects 4-D input, filter and output shape, got {xs:?}, {ws:?} and {out_shape:?}")));
    }
    if ws[3] != xs[3] || out_shape[3] != ws[0] as i64 || out_shape[0] != xs[0] as i64 {
        return Err(imp.invalid(format!(
            "filter {ws:?} (OHWI) does not fit the input {xs:?} and the output shape {out_shape:?}"
        )));
    }
    let [oh, ow] = imp.positive([out_shape[1] as i32, out_shape[2] as i32], "output sizes")?;
    let (kh, kw) = (ws[1], ws[2]);
    let mut pads = [0usize; 4];
    let mut output_padding = vec![0usize; 2];
    for (i, (inp, out, k, s)) in [(xs[1], oh, kh, sh), (xs[2], ow, kw, sw)].into_iter().enumerate() {
        let (_, before, _) = tflite_padding(opt.padding(), out, k, s, 1);
        let full = (inp.max(1) - 1) * s + k;
        let after = full as i64 - before as i64 - out as i64;
        if after < 0 {
            output_padding[i] = (-after) as usize;
        }
        pads[i] = before;
        pads[2 + i] = after.max(0) as usize;
        if full + output_padding[i] <= before {
            return Err(imp.invalid(format!("output size {out} does not fit input size {inp}, kernel {k} and stride {s}")));
        }
    }
    let fused = imp.fused(opt.fused_activation_function())?;
    conv_transpose_nhwc(imp, base, [x, w], b, [sh, sw], pads, output_padding, fused)
}

/// A transposed convolution of an NHWC input `x` with OHWI weights `w` (and an optional bias), in NCHW as a
/// ConvTranspose with the weights permuted to IOHW: `pads` are [top, left, bottom, right] crops of the full
/// output, `output_padding` the rows / columns added at its end; the result is transposed back to NHWC.
#[allow(clippy::too_many_arguments)]
pub(super) fn conv_transpose_nhwc(
    imp: &mut Importer,
    base: &str,
    [x, w]: [ValueId; 2],
    b: Option<ValueId>,
    [sh, sw]: [usize; 2],
    pads: [usize; 4],
    output_padding: Vec<usize>,
    fused: Fused,
) -> Result<ValueId> {
    let ws = imp.shape(w);
    let (kh, kw) = (ws[1], ws[2]);
    let xn = imp.nhwc_to_nchw(x, base)?;
    let wn = imp.permute(w, &[3, 0, 1, 2], format!("{base}/filter_iohw"))?;
    let attrs = ConvTransposeAttrs {
        conv: ConvAttrs {
            kernel_shape: vec![kh, kw],
            strides: vec![sh, sw],
            dilations: vec![1, 1],
            pads: pads.to_vec(),
            auto_pad: AutoPad::NotSet,
            group: 1,
            activation: match fused {
                Fused::Act(a) => Some(a),
                _ => None,
            },
        },
        output_padding,
        output_shape: vec![],
    };
    let y = imp.node(Op::ConvTranspose(attrs), vec![Some(xn), Some(wn), b], format!("{base}/nchw"))?;
    let y = if fused == Fused::Tanh { imp.apply_fused(y, fused, format!("{base}/tanh"))? } else { y };
    imp.nchw_to_nhwc(y, base.to_string())
}

/// L2_NORMALIZATION over the last axis, as TFLite's kernel: x / max(sqrt(sum x²), 1e-6).
fn l2_normalization(imp: &mut Importer, o: &OpIn) -> Result<ValueId> {
    let base = &o.base;
    let x = imp.value(imp.req(o, 0)?)?;
    if imp.g.value(x).quant.is_some() {
        return Err(imp.unsupported("quantized L2_NORMALIZATION"));
    }
    let last = imp.shape(x).len().checked_sub(1).ok_or_else(|| imp.invalid("L2_NORMALIZATION of a scalar"))?;
    let fused = imp.fused(o.op.options::<schema::L2NormOptions>().map(|p| p.fused_activation_function()).unwrap_or(0))?;
    let sq = imp.op1(Op::Binary(BinaryOp::Mul, None), &[x, x], format!("{base}/square"))?;
    let sum = Op::Reduce { op: ReduceOp::Sum, axes: Some(vec![last]), keepdims: true, noop_with_empty_axes: false };
    let sum = imp.op1(sum, &[sq], format!("{base}/sum"))?;
    let norm = imp.op1(Op::Unary(UnaryOp::Sqrt), &[sum], format!("{base}/norm"))?;
    let eps = imp.g.add_constant(format!("{base}/epsilon"), Tensor::from_f32(vec![], vec![1e-6]));
    let norm = imp.op1(Op::Binary(BinaryOp::Max, None), &[norm, eps], format!("{base}/norm_eps"))?;
    let y = imp.op1(Op::Binary(BinaryOp::Div, None), &[x, norm], if fused == Fused::None { base.clone() } else { format!("{base}/div") })?;
    imp.apply_fused(y, fused, base.clone())
}

/// LOCAL_RESPONSE_NORMALIZATION over the channels of a 4-D NHWC input: x / (bias + alpha · Σ x²)^beta over
/// the window [c - radius, c + radius]; the IR's Lrn (ONNX) divides alpha by the window size.
fn local_response_normalization(imp: &mut Importer, o: &OpIn) -> Result<ValueId> {
    let base = &o.base;
    let x = imp.value(imp.req(o, 0)?)?;
    let opt = opts!(imp, o, schema::LocalResponseNormalizationOptions);
    let radius = usize::try_from(opt.radius()).map_err(|_| imp.invalid(format!("radius {} is negative", opt.radius())))?;
    let size = 2 * radius + 1;
    let xn = imp.nhwc_to_nchw(x, base)?;
    let lrn = Op::Lrn { alpha: opt.alpha() * size as f32, beta: opt.beta(), bias: opt.bias(), size };
    let y = imp.op1(lrn, &[xn], format!("{base}/nchw"))?;
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
