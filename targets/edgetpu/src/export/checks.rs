//! The checks LiteRT's int8 kernels make in `Prepare`, made on the model before its bytes are written, so that
//! the exporter never writes an int8 file that LiteRT (or the Edge TPU compiler, which reads it the same way)
//! refuses or aborts on. A violation is an [`Error::InvalidModel`] naming the operator, its output tensor, the
//! tensor at fault and the rule.
//!
//! The rules (TFLite's `kernel_util.cc` and the kernels' `Prepare`):
//! * every quantized tensor: as many zero points as scales, every scale finite and > 0, a per-axis tensor one
//!   scale per element of its quantized dimension, int8 zero points in [-128, 127] (the interpreter's
//!   `ParseQuantization` and the kernels' multipliers);
//! * CONV_2D, DEPTHWISE_CONV_2D, FULLY_CONNECTED: an int8 symmetric filter (zero points 0) whose per-channel
//!   scales lie on the output-channel dimension; an int32 bias of zero point 0 and scale `input × filter`
//!   (within 1%, and `GetQuantizedConvolutionMultipler`'s 2% of the output scale); every effective
//!   multiplier `input × filter / output` finite and below 2^30 (`QuantizeMultiplier`'s shift at most 30);
//! * every fused activation: its bounds quantize to int32 on the output scale (`CalculateActivationRangeQuantized`,
//!   `no_integer_overflow_from_quantization`: a RELU6 on an output scale below ~2.8e-9 fails);
//! * ADD, SUB: `2·max(input scales) / (2^20 · output scale) < 1` (`QuantizeMultiplierSmallerThanOneExp`, a
//!   CHECK that aborts the process);
//! * SOFTMAX, LOGISTIC: output (1/256, −128); TANH: (1/128, 0); LOG_SOFTMAX: (16/256, 127);
//! * MUL, BATCH_MATMUL: `input1 × input2 / output` finite and below 2^30; any other op on int8 values: its
//!   input-to-output rescale `input / output` likewise.

use tpu_sdk_core::format::tflite::builder::*;
use tpu_sdk_core::format::tflite::schema::{activation as act, builtin_operator as bo, builtin_options as opt, tensor_type as tt};
use tpu_sdk_core::runtime::kernels::int8::fixedpoint::quantize_multiplier;
use tpu_sdk_core::{Error, Result};

/// Checks every operator and quantized tensor of `m`'s first subgraph (see the module docs).
pub(super) fn check(m: &ModelT) -> Result<()> {
    for sg in &m.subgraphs {
        check_subgraph(m, sg)?;
    }
    Ok(())
}

/// [`check`] of one subgraph (the main one, or the body of an IF or WHILE).
fn check_subgraph(m: &ModelT, sg: &SubGraphT) -> Result<()> {
    for (i, t) in sg.tensors.iter().enumerate() {
        check_tensor(sg, i).map_err(|why| Error::InvalidModel(format!("int8 TFLite export: tensor '{}': {why}", t.name)))?;
    }
    for o in &sg.operators {
        let code = m.operator_codes[o.opcode_index as usize].builtin_code;
        Op { sg, o, code }.check().map_err(|why| {
            let out = o.outputs.first().and_then(|&t| sg.tensors.get(t as usize)).map(|t| t.name.as_str()).unwrap_or("?");
            Error::InvalidModel(format!(
                "int8 TFLite export: LiteRT would refuse {} (output '{out}'): {why}; the file was not written. \
                 A calibration range or weight channel that is (almost) zero is the usual cause: calibrate on \
                 representative samples, or report the model",
                bo::name(code)
            ))
        })?;
    }
    Ok(())
}

fn is_8bit(t: &TensorT) -> bool {
    matches!(t.type_, tt::INT8 | tt::UINT8)
}

fn check_tensor(sg: &SubGraphT, i: usize) -> std::result::Result<(), String> {
    let t = &sg.tensors[i];
    let Some(q) = t.quantization.as_ref().filter(|q| !q.scale.is_empty()) else {
        // An int8 tensor an op reads or writes needs parameters (`TF_LITE_ENSURE_EQ(quantization.type,
        // kTfLiteAffineQuantization)`).
        let used = sg.operators.iter().any(|o| o.inputs.contains(&(i as i32)) || o.outputs.contains(&(i as i32)));
        return if is_8bit(t) && used { Err("8-bit tensor without quantization parameters".into()) } else { Ok(()) };
    };
    if q.zero_point.len() != q.scale.len() {
        return Err(format!("{} scales but {} zero points (must be as many)", q.scale.len(), q.zero_point.len()));
    }
    if let Some((c, s)) = q.scale.iter().enumerate().find(|(_, s)| !(s.is_finite() && **s > 0.0)) {
        return Err(format!("scale[{c}] = {s:e}: every scale must be finite and > 0"));
    }
    if q.scale.len() > 1 {
        let d = q.quantized_dimension;
        let n = usize::try_from(d).ok().and_then(|d| t.shape.get(d)).copied();
        if n != Some(q.scale.len() as i32) {
            return Err(format!("{} per-axis scales on quantized dimension {d} of shape {:?}", q.scale.len(), t.shape));
        }
    }
    let (lo, hi) = if t.type_ == tt::UINT8 { (0, 255) } else { (-128, 127) };
    if is_8bit(t) {
        if let Some(z) = q.zero_point.iter().find(|&&z| z < lo || z > hi) {
            return Err(format!("zero point {z} outside [{lo}, {hi}]"));
        }
    }
    Ok(())
}

/// One operator being checked.
struct Op<'a> {
    sg: &'a SubGraphT,
    o: &'a OperatorT,
    code: i32,
}

/// (scale, zero point) of a per-tensor quantized tensor.
type Qp = (f32, i64);

impl<'a> Op<'a> {
    fn tensor(&self, k: i32) -> Option<&'a TensorT> {
        (k >= 0).then(|| self.sg.tensors.get(k as usize)).flatten()
    }
    fn input(&self, i: usize) -> Option<&'a TensorT> {
        self.o.inputs.get(i).and_then(|&k| self.tensor(k))
    }
    fn output(&self, i: usize) -> Option<&'a TensorT> {
        self.o.outputs.get(i).and_then(|&k| self.tensor(k))
    }
    /// Per-tensor parameters of an 8-bit tensor (the first, for per-axis ones).
    fn qp(t: Option<&TensorT>) -> Option<Qp> {
        let t = t.filter(|t| is_8bit(t))?;
        let q = t.quantization.as_ref()?;
        Some((*q.scale.first()?, *q.zero_point.first()?))
    }

    fn check(&self) -> std::result::Result<(), String> {
        let (Some(x), Some(y)) = (Self::qp(self.input(0)), Self::qp(self.output(0))) else {
            // Float ops, QUANTIZE from float and DEQUANTIZE to float: nothing to check.
            return Ok(());
        };
        let y_name = &self.output(0).expect("checked").name;
        if let Some(a) = self.o.builtin_options.as_ref().and_then(fused_activation) {
            activation_range(a, y)?;
        }
        match self.code {
            bo::CONV_2D | bo::DEPTHWISE_CONV_2D | bo::FULLY_CONNECTED => self.conv(x, y),
            bo::ADD | bo::SUB => {
                let b = Self::qp(self.input(1)).ok_or("the second input is not an int8 tensor with parameters")?;
                let m = 2.0 * x.0.max(b.0) as f64 / ((1u64 << 20) as f64 * y.0 as f64);
                if m < 1.0 {
                    Ok(())
                } else {
                    Err(format!(
                        "output '{y_name}' scale {:e} is too small for input scales {:e} and {:e}: the output multiplier 2·max(inputs)/(2^20·output) = {m:e} must be < 1 (LiteRT aborts otherwise)",
                        y.0, x.0, b.0
                    ))
                }
            }
            bo::MUL | bo::BATCH_MATMUL => {
                let b = Self::qp(self.input(1)).ok_or("the second input is not an int8 tensor with parameters")?;
                rescale(x.0 as f64 * b.0 as f64 / y.0 as f64, &format!("output '{y_name}'"))
            }
            bo::SOFTMAX | bo::LOGISTIC => fixed(y, y_name, 1.0 / 256.0, -128),
            bo::TANH => fixed(y, y_name, 1.0 / 128.0, 0),
            bo::LOG_SOFTMAX => fixed(y, y_name, 16.0 / 256.0, 127),
            _ => rescale(x.0 as f64 / y.0 as f64, y_name),
        }
    }

    /// CONV_2D, DEPTHWISE_CONV_2D, FULLY_CONNECTED: filter, bias and the per-channel multipliers.
    fn conv(&self, x: Qp, y: Qp) -> std::result::Result<(), String> {
        let w = self.input(1).ok_or("no filter")?;
        let wq = w.quantization.as_ref().filter(|_| w.type_ == tt::INT8).ok_or_else(|| format!("filter '{}' is not int8 with parameters", w.name))?;
        if wq.zero_point.iter().any(|&z| z != 0) {
            return Err(format!("filter '{}' has a non-zero zero point (int8 weights are symmetric)", w.name));
        }
        // Output channels: CONV_2D OHWI dim 0, DEPTHWISE_CONV_2D 1HWC dim 3, FULLY_CONNECTED [out, in] dim 0.
        let cdim = if self.code == bo::DEPTHWISE_CONV_2D { 3 } else { 0 };
        let channels = w.shape.get(cdim).copied().unwrap_or(0).max(0) as usize;
        if wq.scale.len() > 1 && (wq.quantized_dimension != cdim as i32 || wq.scale.len() != channels) {
            return Err(format!("filter '{}' has {} scales on dimension {}; per-channel scales go on the output-channel dimension {cdim} ({channels})", w.name, wq.scale.len(), wq.quantized_dimension));
        }
        let w_scale = |c: usize| wq.scale[if wq.scale.len() == 1 { 0 } else { c }];
        let bias = self.input(2);
        if let Some(b) = bias {
            let bq = b.quantization.as_ref().filter(|_| b.type_ == tt::INT32).ok_or_else(|| format!("bias '{}' is not int32 with parameters", b.name))?;
            if bq.zero_point.iter().any(|&z| z != 0) {
                return Err(format!("bias '{}' has a non-zero zero point", b.name));
            }
            if bq.scale.len() != 1 && bq.scale.len() != wq.scale.len() {
                return Err(format!("bias '{}' has {} scales, the filter {}", b.name, bq.scale.len(), wq.scale.len()));
            }
            for c in 0..bq.scale.len().max(wq.scale.len()) {
                let want = x.0 as f64 * w_scale(c) as f64;
                let got = bq.scale[if bq.scale.len() == 1 { 0 } else { c }] as f64;
                // LiteRT's own tolerance is loose (2% of the output scale); a bias at another scale than the
                // products' is read at theirs, so the int8 spec's equality is held to 1%.
                if (want - got).abs() / y.0 as f64 > 0.02 || (want - got).abs() > 0.01 * want {
                    return Err(format!(
                        "bias '{}' scale[{c}] = {got:e} is not input scale × filter scale = {want:e} (within 1%, and LiteRT's 2% of the output scale {:e})",
                        b.name, y.0
                    ));
                }
            }
        }
        for c in 0..wq.scale.len() {
            let m = x.0 as f64 * w_scale(c) as f64 / y.0 as f64;
            rescale(m, &format!("channel {c} (filter '{}' scale {:e})", w.name, w_scale(c))).map_err(|e| format!("{e}; input scale {:e}, output scale {:e}", x.0, y.0))?;
        }
        Ok(())
    }
}

/// A real multiplier TFLite's `QuantizeMultiplier` represents: finite, ≥ 0, shift at most 30.
fn rescale(m: f64, what: &str) -> std::result::Result<(), String> {
    if !m.is_finite() || m < 0.0 || quantize_multiplier(m).shift > 30 {
        return Err(format!("the effective multiplier {m:e} of {what} cannot be represented (finite, below 2^30)"));
    }
    Ok(())
}

/// The output parameters an op fixes.
fn fixed(y: Qp, name: &str, scale: f32, zp: i64) -> std::result::Result<(), String> {
    if (y.0 - scale).abs() > 0.001 * scale || y.1 != zp {
        return Err(format!("output '{name}' must have scale {scale} and zero point {zp}, has ({:e}, {})", y.0, y.1));
    }
    Ok(())
}

/// TFLite's `CalculateActivationRangeQuantized`: each bound of the fused activation `a`, divided by the output
/// scale and rounded in f32, must fit int32.
fn activation_range(a: i8, y: Qp) -> std::result::Result<(), String> {
    let bounds: &[f32] = match a {
        act::RELU => &[0.0],
        act::RELU6 => &[0.0, 6.0],
        act::RELU_N1_TO_1 => &[-1.0, 1.0],
        _ => &[],
    };
    for &f in bounds {
        let tmp = (f / y.0).round();
        if !(tmp >= i32::MIN as f32 && tmp <= i32::MAX as f32) {
            return Err(format!(
                "the fused activation bound {f} on output scale {:e} overflows int32 (no_integer_overflow_from_quantization); the output's range is narrower than TF's minimum of 1e-6",
                y.0
            ));
        }
    }
    Ok(())
}

/// The fused activation of an options table, for the option tables that have one.
fn fused_activation(o: &OptionsT) -> Option<i8> {
    let slot = match o.union_type {
        opt::CONV_2D => 3,
        opt::DEPTHWISE_CONV_2D => 4,
        opt::POOL_2D => 5,
        opt::FULLY_CONNECTED | opt::ADD | opt::SUB | opt::MUL | opt::DIV => 0,
        opt::CONCATENATION => 1,
        _ => return None,
    };
    o.fields.iter().find(|(s, _)| *s == slot).and_then(|(_, v)| if let FieldT::I8(a) = v { Some(*a) } else { None })
}
