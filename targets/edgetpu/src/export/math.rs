//! Export of the arithmetic ops: Gemm and MatMul, binary and unary elementwise ops, clips, Softmax,
//! reductions; and the TFLite form of fused activations.

use tpu_sdk_core::format::tflite::builder::*;
use tpu_sdk_core::format::tflite::schema::{activation as act, builtin_operator as bo, builtin_options};
use tpu_sdk_core::ir::{Activation, BinaryOp, DType, Node, ReduceOp, Tensor, UnaryOp, ValueId};
use tpu_sdk_core::Result;

use super::layout::{ident, inverse, permuted, NHWC};
use super::node::required;
use super::tensors::i32s;
use super::Ex;

impl Ex<'_> {
    /// Gemm: FULLY_CONNECTED (weights transposed and scaled at export), then an ADD for a full C matrix.
    pub(super) fn gemm(&mut self, n: &Node, alpha: f32, beta: f32, trans_a: bool, trans_b: bool, activation: Option<Activation>) -> Result<()> {
        let g = self.g;
        let y = n.outputs[0];
        let a = required(n, 0)?;
        let b = required(n, 1)?;
        let at = if trans_a { self.get(a, &[1, 0])? } else { self.get(a, &[0, 1])? };
        let bs = g.value(b).shape.clone();
        let n_out = if trans_b { bs[0] } else { bs[1] };
        let wt = match &g.value(b).constant {
            Some(c) => {
                let mut w = if trans_b { c.clone() } else { c.permuted(&[1, 0]) };
                if alpha != 1.0 {
                    w = scale(&w, alpha).ok_or_else(|| self.unsupported("alpha on non-f32 weights"))?;
                }
                let wt = self.constant(&format!("{}/weights", g.value(b).name), &w)?;
                self.set_quant(wt, b, if trans_b { &[0, 1] } else { &[1, 0] });
                wt
            }
            None if alpha == 1.0 => self.get(b, if trans_b { &[0, 1] } else { &[1, 0] })?,
            None => return Err(self.unsupported("alpha with non-constant weights")),
        };
        let mut post_add = None;
        let bias = match n.input(2) {
            None => None,
            Some(c) => match &g.value(c).constant {
                Some(cv) if cv.dtype() == DType::I32 && cv.len() == n_out => {
                    let t = self.constant(&format!("{}/bias", n.name), cv)?;
                    self.set_quant(t, c, &[0]);
                    Some(t)
                }
                Some(cv) if cv.len() == n_out || cv.len() == 1 => {
                    let v: Vec<f32> = cv.to_f64_vec().iter().map(|&x| (x * beta as f64) as f32).collect();
                    let v = if v.len() == 1 { vec![v[0]; n_out] } else { v };
                    Some(self.const_f32(&format!("{}/bias", n.name), vec![n_out], v)?)
                }
                _ if beta == 1.0 => {
                    post_add = Some(c);
                    None
                }
                _ => return Err(self.unsupported("beta with a full C matrix")),
            },
        };
        let ys = g.value(y).shape.clone();
        let yname = g.value(y).name.clone();
        match post_add {
            None => {
                let yt = self.out(y, vec![0, 1])?;
                let (fa, clip) = split_activation(activation);
                let clip = self.clip_left(y, clip);
                let fc_out = if clip.is_some() { self.tensor_like(&format!("{yname}/fc"), &ys, yt)? } else { yt };
                self.op(bo::FULLY_CONNECTED, 1, vec![at, wt, bias.unwrap_or(-1)], vec![fc_out], Some(OptionsT::fully_connected(fa, false)));
                if let Some((lo, hi)) = clip {
                    self.clip_into(fc_out, yt, &yname, &ys, lo, hi)?;
                }
            }
            Some(c) => {
                let ct = self.get(c, &ident(self.rank(c)))?;
                let fc_out = self.tensor(&format!("{yname}/fc"), &ys, DType::F32)?;
                self.op(bo::FULLY_CONNECTED, 1, vec![at, wt, -1], vec![fc_out], Some(OptionsT::fully_connected(act::NONE, false)));
                let yt = self.out(y, vec![0, 1])?;
                let (fa, clip) = split_activation(activation);
                let add_out = if clip.is_some() { self.tensor(&format!("{yname}/sum"), &ys, DType::F32)? } else { yt };
                self.op(bo::ADD, 1, vec![fc_out, ct], vec![add_out], Some(OptionsT::arithmetic(bo::ADD, fa)));
                if let Some((lo, hi)) = clip {
                    self.clip_into(add_out, yt, &yname, &ys, lo, hi)?;
                }
            }
        }
        Ok(())
    }

    /// MatMul: FULLY_CONNECTED for constant 2-D weights, BATCH_MATMUL otherwise.
    pub(super) fn matmul(&mut self, n: &Node) -> Result<()> {
        let g = self.g;
        let y = n.outputs[0];
        let a = required(n, 0)?;
        let b = required(n, 1)?;
        let (ra, rb) = (self.rank(a), self.rank(b));
        if ra < 2 || rb < 2 {
            return Err(self.unsupported("MatMul of a 1-D operand"));
        }
        let at = self.get(a, &ident(ra))?;
        if let (Some(c), 2) = (&g.value(b).constant, rb) {
            let w = c.permuted(&[1, 0]);
            let wt = self.constant(&format!("{}/weights", g.value(b).name), &w)?;
            self.set_quant(wt, b, &[1, 0]);
            let yt = self.out(y, ident(self.rank(y)))?;
            let version = if ra > 2 { 5 } else { 1 };
            self.op(bo::FULLY_CONNECTED, version, vec![at, wt, -1], vec![yt], Some(OptionsT::fully_connected(act::NONE, ra > 2)));
        } else {
            let bt = self.get(b, &ident(rb))?;
            let yt = self.out(y, ident(self.rank(y)))?;
            self.op(bo::BATCH_MATMUL, 1, vec![at, bt], vec![yt], Some(OptionsT::batch_matmul(false, false)));
        }
        Ok(())
    }

    /// Broadcasting binary ops with their fused activation (or a clip after).
    pub(super) fn binary(&mut self, n: &Node, bop: BinaryOp, activation: Option<Activation>) -> Result<()> {
        let g = self.g;
        let y = n.outputs[0];
        let code = match bop {
            BinaryOp::Add => Some(bo::ADD),
            BinaryOp::Sub => Some(bo::SUB),
            BinaryOp::Mul => Some(bo::MUL),
            BinaryOp::Div => Some(bo::DIV),
            BinaryOp::Max => Some(bo::MAXIMUM),
            BinaryOp::Min => Some(bo::MINIMUM),
            BinaryOp::Pow => Some(bo::POW),
            BinaryOp::PRelu => Some(bo::PRELU),
            // comparisons and logic (bool outputs: conditions of IF/WHILE)
            BinaryOp::Equal => Some(bo::EQUAL),
            BinaryOp::Less => Some(bo::LESS),
            BinaryOp::LessOrEqual => Some(bo::LESS_EQUAL),
            BinaryOp::Greater => Some(bo::GREATER),
            BinaryOp::GreaterOrEqual => Some(bo::GREATER_EQUAL),
            BinaryOp::And => Some(bo::LOGICAL_AND),
            BinaryOp::Or => Some(bo::LOGICAL_OR),
            // Not exported (each named, so that a new binary op must decide here too).
            BinaryOp::Mod | BinaryOp::Fmod | BinaryOp::Xor => None,
            BinaryOp::BitAnd | BinaryOp::BitOr | BinaryOp::BitXor => None,
        };
        let code = code.ok_or_else(|| self.unsupported(format!("binary op {bop:?}")))?;
        let (a, b) = (required(n, 0)?, required(n, 1)?);
        let r = self.rank(y);
        // The layout of the first full-rank non-constant operand; others follow it.
        let perm = [a, b]
            .into_iter()
            .find(|&v| g.value(v).constant.is_none() && self.rank(v) == r)
            .map(|v| self.layout(v))
            .unwrap_or_else(|| ident(r));
        let mut ins = Vec::new();
        for v in [a, b] {
            let t = if g.value(v).constant.is_some() {
                self.broadcast_const(v, r, &perm)?
            } else if self.rank(v) == r {
                self.get(v, &perm)?
            } else if perm == ident(r) {
                self.get(v, &ident(self.rank(v)))?
            } else {
                return Err(self.unsupported("broadcasting a lower-rank non-constant operand against a transposed one"));
            };
            ins.push(t);
        }
        let with_act = matches!(code, bo::ADD | bo::SUB | bo::MUL | bo::DIV);
        let yname = g.value(y).name.clone();
        let ys = permuted(&g.value(y).shape, &perm);
        let yt = self.out(y, perm)?;
        let (fa, clip) = if with_act { split_activation(activation) } else { (act::NONE, activation.map(clip_bounds)) };
        let clip = self.clip_left(y, clip);
        let opts = if with_act { Some(OptionsT::arithmetic(code, fa)) } else { None };
        let op_out = if clip.is_some() { self.tensor_like(&format!("{yname}/pre"), &ys, yt)? } else { yt };
        self.op(code, 1, ins, vec![op_out], opts);
        if let Some((lo, hi)) = clip {
            self.clip_into(op_out, yt, &yname, &ys, lo, hi)?;
        }
        Ok(())
    }

    /// Unary ops TFLite has a builtin for (Clip as the cheapest clip, Reciprocal as a DIV).
    pub(super) fn unary(&mut self, n: &Node, u: UnaryOp) -> Result<()> {
        let y = n.outputs[0];
        let x = required(n, 0)?;
        let perm = self.layout(x);
        let xt = self.get(x, &perm)?;
        let simple = |c: i32| Some((c, None::<OptionsT>));
        let m = match u {
            UnaryOp::Relu => simple(bo::RELU),
            UnaryOp::Sigmoid => simple(bo::LOGISTIC),
            UnaryOp::Tanh => simple(bo::TANH),
            UnaryOp::HardSwish => simple(bo::HARD_SWISH),
            UnaryOp::Exp => simple(bo::EXP),
            UnaryOp::Log => simple(bo::LOG),
            UnaryOp::Sqrt => simple(bo::SQRT),
            UnaryOp::Rsqrt => simple(bo::RSQRT),
            UnaryOp::Abs => simple(bo::ABS),
            UnaryOp::Neg => simple(bo::NEG),
            UnaryOp::Floor => simple(bo::FLOOR),
            UnaryOp::Ceil => simple(bo::CEIL),
            UnaryOp::Sin => simple(bo::SIN),
            UnaryOp::Cos => simple(bo::COS),
            UnaryOp::Elu { alpha: 1.0 } => simple(bo::ELU),
            UnaryOp::LeakyRelu { alpha } => Some((bo::LEAKY_RELU, Some(OptionsT::new(builtin_options::LEAKY_RELU).with(0, FieldT::F32(alpha))))),
            UnaryOp::Gelu { tanh } => Some((bo::GELU, Some(OptionsT::new(builtin_options::GELU).with(0, FieldT::Bool(tanh))))),
            UnaryOp::Clip { min, max } => {
                return self.clip(xt, y, perm, min, max);
            }
            UnaryOp::Reciprocal => {
                let one = self.const_f32(&format!("{}/one", n.name), vec![], vec![1.0])?;
                let yt = self.out(y, perm)?;
                self.op(bo::DIV, 1, vec![one, xt], vec![yt], Some(OptionsT::arithmetic(bo::DIV, act::NONE)));
                return Ok(());
            }
            // No TFLite builtin (each named, so that a new unary op must decide here too).
            UnaryOp::Elu { .. } | UnaryOp::Round | UnaryOp::Sign | UnaryOp::Tan | UnaryOp::Asin | UnaryOp::Acos => None,
            UnaryOp::Atan | UnaryOp::Sinh | UnaryOp::Cosh | UnaryOp::Asinh | UnaryOp::Acosh | UnaryOp::Atanh => None,
            UnaryOp::Erf | UnaryOp::Not | UnaryOp::BitNot | UnaryOp::Softplus | UnaryOp::Softsign | UnaryOp::Mish => None,
            UnaryOp::IsNaN | UnaryOp::IsInf { .. } | UnaryOp::Selu { .. } | UnaryOp::Celu { .. } => None,
            UnaryOp::ThresholdedRelu { .. } | UnaryOp::HardSigmoid { .. } => None,
        };
        let (code, opts) = m.ok_or_else(|| self.unsupported(format!("unary op {u:?}")))?;
        let yt = self.out(y, perm)?;
        self.op(code, 1, vec![xt], vec![yt], opts);
        Ok(())
    }

    /// Cast: TFLite CAST between the types both have (the output tensor's type says the target), in the input's
    /// layout.
    pub(super) fn cast(&mut self, n: &Node) -> Result<()> {
        let (x, y) = (required(n, 0)?, n.outputs[0]);
        let (from, to) = (self.g.value(x).dtype, self.g.value(y).dtype);
        let supported = |d: DType| matches!(d, DType::F32 | DType::F16 | DType::I8 | DType::U8 | DType::I16 | DType::I32 | DType::I64 | DType::Bool | DType::F64);
        if !supported(from) || !supported(to) || self.g.value(x).quant.is_some() {
            return Err(self.unsupported(format!("Cast from {from} to {to}")));
        }
        let perm = self.layout(x);
        let xt = self.get(x, &perm)?;
        let yt = self.out(y, perm)?;
        self.op(bo::CAST, 1, vec![xt], vec![yt], None);
        Ok(())
    }

    /// Softmax or LogSoftmax (`log`) over the last dim of a layout that puts `axis` last.
    pub(super) fn softmax(&mut self, n: &Node, axis: usize, log: bool) -> Result<()> {
        let y = n.outputs[0];
        let x = required(n, 0)?;
        let r = self.rank(x);
        let mut perm = self.layout(x);
        if inverse(&perm)[axis] != r - 1 {
            perm = ident(r);
            if axis != r - 1 {
                // Move the axis last.
                perm = (0..r).filter(|&d| d != axis).chain([axis]).collect();
            }
        }
        let xt = self.get(x, &perm)?;
        let yt = self.out(y, perm)?;
        if !log {
            self.op(bo::SOFTMAX, 1, vec![xt], vec![yt], Some(OptionsT::softmax(1.0)));
        } else {
            self.op(bo::LOG_SOFTMAX, 1, vec![xt], vec![yt], None);
        }
        Ok(())
    }

    /// Reduce (Mean, Sum, Max, Min, Prod) over constant axes.
    pub(super) fn reduce(&mut self, n: &Node, op: ReduceOp, axes: &Option<Vec<usize>>, keepdims: bool) -> Result<()> {
        let g = self.g;
        let y = n.outputs[0];
        let x = required(n, 0)?;
        let r = self.rank(x);
        let axes: Vec<usize> = match axes {
            Some(a) if a.is_empty() => return Err(self.unsupported("reduction with empty axes")),
            Some(a) => a.clone(),
            None => match n.input(1).and_then(|a| g.value(a).constant.clone()) {
                Some(c) => c.to_i64_vec().iter().map(|&a| if a < 0 { (a + r as i64) as usize } else { a as usize }).collect(),
                None => (0..r).collect(),
            },
        };
        let code = match op {
            ReduceOp::Mean => bo::MEAN,
            ReduceOp::Sum => bo::SUM,
            ReduceOp::Max => bo::REDUCE_MAX,
            ReduceOp::Min => bo::REDUCE_MIN,
            ReduceOp::Prod => bo::REDUCE_PROD,
            other => return Err(self.unsupported(format!("reduction {other:?}"))),
        };
        // LiteRT's int8 MEAN of a 4-D tensor kept to rank 4 has an optimized kernel only for axes {1, 2},
        // which rounds differently from its general one: the IR's spatial mean (axes [2, 3]) is written on
        // NHWC data (axes [1, 2]), any other two-axis mean on the IR's own layout, so that the int8 runtime
        // knows from the IR axes which kernel LiteRT runs.
        let p = match axes.as_slice() {
            [2, 3] if op == ReduceOp::Mean && r == 4 && keepdims => NHWC.to_vec(),
            [_, _] if op == ReduceOp::Mean && r == 4 && keepdims && !axes.contains(&0) => ident(4),
            _ => self.layout(x),
        };
        let xt = self.get(x, &p)?;
        let inv = inverse(&p);
        let mut taxes: Vec<usize> = axes.iter().map(|&a| inv[a]).collect();
        taxes.sort_unstable();
        let at = self.const_i32(&format!("{}/axes", n.name), i32s(taxes))?;
        // Output layout: the kept dims in the order the tensor has them.
        let out_perm = if keepdims {
            p.clone()
        } else {
            let kept: Vec<usize> = p.iter().copied().filter(|d| !axes.contains(d)).collect();
            let mut sorted = kept.clone();
            sorted.sort_unstable();
            kept.iter().map(|d| sorted.iter().position(|s| s == d).expect("kept")).collect()
        };
        let yt = self.out(y, out_perm)?;
        self.op(code, 1, vec![xt, at], vec![yt], Some(OptionsT::reducer(keepdims)));
        Ok(())
    }

    /// What remains of the clip `[min, max]` applied to IR value `y`: on an int8 value, a bound that maps to
    /// (or beyond) the end of the int8 range is already applied by saturation, as TFLite's
    /// `CalculateActivationRangeQuantized` would compute it, so no op is needed for it. A clip fused into an
    /// int8 op (e.g. hard-sigmoid's `clip(x, 0, 1)`, whose output range is at most [0, 1]) usually vanishes.
    pub(super) fn clip_left(&self, y: ValueId, clip: Option<(f32, f32)>) -> Option<(f32, f32)> {
        let (min, max) = clip?;
        let v = self.g.value(y);
        let Some(p) = v.quant.as_ref().filter(|p| v.dtype == DType::I8 && p.scale.len() == 1) else { return Some((min, max)) };
        let q = |x: f32| p.zero_point[0] as f64 + (x as f64 / p.scale[0] as f64).round();
        let min = if min.is_finite() && q(min) > -128.0 { min } else { f32::NEG_INFINITY };
        let max = if max.is_finite() && q(max) < 127.0 { max } else { f32::INFINITY };
        (min > f32::NEG_INFINITY || max < f32::INFINITY).then_some((min, max))
    }

    /// min(max(x, lo), hi) from tensor `xt` into a new output tensor of IR value `y` in layout `perm`.
    pub(super) fn clip(&mut self, xt: i32, y: ValueId, perm: Vec<usize>, min: f32, max: f32) -> Result<()> {
        let name = self.g.value(y).name.clone();
        let shape = permuted(&self.g.value(y).shape, &perm);
        let yt = self.out(y, perm)?;
        self.clip_into(xt, yt, &name, &shape, min, max)
    }

    /// min(max(src, lo), hi) into the existing tensor `dst`, with the cheapest ops.
    pub(super) fn clip_into(&mut self, src: i32, dst: i32, name: &str, shape: &[usize], min: f32, max: f32) -> Result<()> {
        let code = if min == 0.0 && max == 6.0 {
            Some(bo::RELU6)
        } else if min == -1.0 && max == 1.0 {
            Some(bo::RELU_N1_TO_1)
        } else if min == 0.0 && max == f32::INFINITY {
            Some(bo::RELU)
        } else {
            None
        };
        if let Some(c) = code {
            self.op(c, 1, vec![src], vec![dst], None);
            return Ok(());
        }
        match (min > f32::NEG_INFINITY, max < f32::INFINITY) {
            (true, true) => {
                let lo = self.bound(&format!("{name}/min"), min, dst)?;
                let hi = self.bound(&format!("{name}/max"), max, dst)?;
                let t = self.tensor_like(&format!("{name}/lower"), shape, dst)?;
                self.op(bo::MAXIMUM, 1, vec![src, lo], vec![t], None);
                self.op(bo::MINIMUM, 1, vec![t, hi], vec![dst], None);
            }
            (true, false) => {
                let lo = self.bound(&format!("{name}/min"), min, dst)?;
                self.op(bo::MAXIMUM, 1, vec![src, lo], vec![dst], None);
            }
            (false, true) => {
                let hi = self.bound(&format!("{name}/max"), max, dst)?;
                self.op(bo::MINIMUM, 1, vec![src, hi], vec![dst], None);
            }
            (false, false) => {
                let sh = self.const_i32(&format!("{name}/shape"), i32s(shape.iter().copied()))?;
                self.op(bo::RESHAPE, 1, vec![src, sh], vec![dst], Some(OptionsT::reshape(i32s(shape.iter().copied()))));
            }
        }
        Ok(())
    }
}

/// The bounds of an activation as a clip (a fused SiLU, which is no clip, is refused before any node is
/// written: [`Ex::node`]; it would get no bounds here).
pub(super) fn clip_bounds(a: Activation) -> (f32, f32) {
    a.clamp_bounds().unwrap_or((f32::NEG_INFINITY, f32::INFINITY))
}

/// An activation as a TFLite fused activation code, or NONE plus the clip to apply after the op.
pub(super) fn split_activation(a: Option<Activation>) -> (i8, Option<(f32, f32)>) {
    match fused_code(a) {
        Some(c) => (c, None),
        None => (act::NONE, a.map(clip_bounds)),
    }
}

/// The fused activation code of an IR activation, if TFLite has one.
pub(super) fn fused_code(a: Option<Activation>) -> Option<i8> {
    match a {
        None => Some(act::NONE),
        Some(Activation::Relu) => Some(act::RELU),
        Some(Activation::Relu6) => Some(act::RELU6),
        Some(Activation::Clip { min, max }) if min == 0.0 && max == 6.0 => Some(act::RELU6),
        Some(Activation::Clip { min, max }) if min == -1.0 && max == 1.0 => Some(act::RELU_N1_TO_1),
        Some(Activation::Clip { min, max }) if min == 0.0 && max == f32::INFINITY => Some(act::RELU),
        Some(Activation::Clip { .. } | Activation::Silu) => None,
    }
}

/// `t * s` for f32 tensors.
pub(super) fn scale(t: &Tensor, s: f32) -> Option<Tensor> {
    let v = t.as_f32()?;
    Some(Tensor::from_f32(t.shape.clone(), v.iter().map(|x| x * s).collect()))
}
