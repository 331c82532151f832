//! Export of the spatial (NHWC) ops: Conv, ConvTranspose, pooling, Resize, and the TFLite padding of their
//! windows.

use tpu_sdk_core::format::tflite::builder::*;
use tpu_sdk_core::format::tflite::schema::{activation as act, builtin_operator as bo, builtin_options, padding};
use tpu_sdk_core::format::tflite::tflite_padding;
use tpu_sdk_core::ir::ops::conv::transpose_plan;
use tpu_sdk_core::ir::{
    Activation, AutoPad, ConvAttrs, ConvTransposeAttrs, CoordTransform, DType, NearestMode, Node, Op, PoolAttrs, QuantParams, ResizeAttrs, ResizeMode, Tensor, UnaryOp,
    ValueId,
};
use tpu_sdk_core::Result;

use super::layout::{permuted, NHWC};
use super::math::{clip_bounds, split_activation};
use super::node::required;
use super::Ex;

impl Ex<'_> {
    /// Conv (2-D, plain or depthwise): CONV_2D or DEPTHWISE_CONV_2D in NHWC, with the activation fused or clipped after.
    pub(super) fn conv(&mut self, n: &Node, a: &ConvAttrs) -> Result<()> {
        let g = self.g;
        let y = n.outputs[0];
        let x = required(n, 0)?;
        let w = required(n, 1)?;
        let ws = g.value(w).shape.clone();
        let xs = g.value(x).shape.clone();
        if xs.len() != 4 || ws.len() != 4 {
            return Err(self.unsupported("only 2-D convolutions export"));
        }
        let wc = g.value(w).constant.clone().ok_or_else(|| self.unsupported("non-constant weights"))?;
        let (c_in, c_out) = (xs[1], ws[0]);
        let depthwise = a.group > 1 && a.group == c_in && ws[1] == 1;
        let grouped = a.group > 1 && !depthwise;
        if grouped && (c_in % a.group != 0 || c_out % a.group != 0 || ws[1] * a.group != c_in) {
            return Err(self.unsupported(format!("grouped convolution (group {}) of {c_in} input and {c_out} output channels with weights {ws:?}", a.group)));
        }
        let (kh, kw) = (ws[2], ws[3]);
        let strides = if a.strides.is_empty() { vec![1, 1] } else { a.strides.clone() };
        let dil = if a.dilations.is_empty() { vec![1, 1] } else { a.dilations.clone() };
        let (pad, xin) = self.spatial_padding(x, &a.pads, a.auto_pad, [kh, kw], &strides, &dil, 0.0, &n.name)?;
        if grouped {
            return self.grouped_conv(n, a, xin, pad, &strides, &dil);
        }
        let wperm: &[usize] = if depthwise { &[1, 2, 3, 0] } else { &[0, 2, 3, 1] };
        let wt = wc.permuted(wperm);
        let wname = format!("{}/filter", g.value(w).name);
        let wi = self.constant(&wname, &wt)?;
        self.set_quant(wi, w, wperm);
        let bi = match n.input(2) {
            Some(b) => {
                let bc = g.value(b).constant.clone().ok_or_else(|| self.unsupported("non-constant bias"))?;
                let bi = self.constant(&g.value(b).name.clone(), &bc)?;
                self.set_quant(bi, b, &[0]);
                bi
            }
            None => self.const_f32(&format!("{}/bias", n.name), vec![c_out], vec![0.0; c_out])?,
        };
        let ConvOut { fa, clip, yname, ys, yt, conv_out } = self.conv_out(y, a.activation)?;
        let (code, opts, version) = if depthwise {
            let v = if dil != [1, 1] { 2 } else { 1 };
            (bo::DEPTHWISE_CONV_2D, OptionsT::depthwise_conv2d(pad, strides[1] as i32, strides[0] as i32, (c_out / c_in) as i32, fa, dil[1] as i32, dil[0] as i32), v)
        } else {
            (bo::CONV_2D, OptionsT::conv2d(pad, strides[1] as i32, strides[0] as i32, fa, dil[1] as i32, dil[0] as i32), 1)
        };
        self.op(code, version, vec![xin, wi, bi], vec![conv_out], Some(opts));
        if let Some((lo, hi)) = clip {
            self.clip_into(conv_out, yt, &yname, &ys, lo, hi)?;
        }
        Ok(())
    }

    /// The output side of a convolution with activation `act` into IR value `y`: the fused TFLite activation,
    /// and when a clip TFLite cannot fuse remains, the intermediate tensor the convolution writes before it.
    fn conv_out(&mut self, y: ValueId, act: Option<Activation>) -> Result<ConvOut> {
        let (fa, clip) = split_activation(act);
        let clip = self.clip_left(y, clip);
        let yname = self.g.value(y).name.clone();
        let ys = permuted(&self.g.value(y).shape, &NHWC);
        let yt = self.out(y, NHWC.to_vec())?;
        let conv_out = if clip.is_some() { self.tensor_like(&format!("{yname}/conv"), &ys, yt)? } else { yt };
        Ok(ConvOut { fa, clip, yname, ys, yt, conv_out })
    }

    /// A grouped convolution (neither plain nor depthwise): neither the Edge TPU nor LiteRT's optimized int8
    /// CONV_2D takes groups, so it is a SPLIT of the (padded) NHWC input into `group` channel blocks, one
    /// CONV_2D per block with its block of filters, biases and per-channel scales, and a CONCATENATION of the
    /// results along channels. Every block shares the input's (and the output's) parameters, so the int8
    /// arithmetic is the grouped convolution's, channel by channel.
    fn grouped_conv(&mut self, n: &Node, a: &ConvAttrs, xin: i32, pad: i8, strides: &[usize], dil: &[usize]) -> Result<()> {
        let g = self.g;
        let y = n.outputs[0];
        let w = required(n, 1)?;
        let wc = g.value(w).constant.clone().ok_or_else(|| self.unsupported("non-constant weights"))?;
        let groups = a.group;
        let (c_out, ci) = (wc.shape[0], wc.shape[1]);
        let co = c_out / groups;
        let xs: Vec<usize> = self.sg_ref().tensors[xin as usize].shape.iter().map(|&d| d as usize).collect();
        let mut parts = Vec::with_capacity(groups);
        for k in 0..groups {
            parts.push(self.tensor_like(&format!("{}/group{k}/input", n.name), &[xs[0], xs[1], xs[2], ci], xin)?);
        }
        let at = self.constant(&format!("{}/split_axis", n.name), &Tensor::scalar(3i32))?;
        self.op(bo::SPLIT, 1, vec![at, xin], parts.clone(), Some(OptionsT::new(builtin_options::SPLIT).with(0, FieldT::I32(groups as i32))));
        let ConvOut { fa, clip, yname, ys, yt, conv_out } = self.conv_out(y, a.activation)?;
        let wq = g.value(w).quant.clone();
        let bias = match n.input(2) {
            Some(b) => Some((g.value(b).constant.clone().ok_or_else(|| self.unsupported("non-constant bias"))?, g.value(b).quant.clone())),
            None => None,
        };
        // Channels [k·co, (k+1)·co) of a per-channel quantization (per-tensor ones are shared).
        let block = |q: &Option<QuantParams>, k: usize| {
            q.as_ref().map(|q| {
                let pick = |v: &[f32]| if v.len() == c_out { v[k * co..(k + 1) * co].to_vec() } else { v.to_vec() };
                let zp = if q.zero_point.len() == c_out { q.zero_point[k * co..(k + 1) * co].to_vec() } else { q.zero_point.clone() };
                QuantizationT { scale: pick(&q.scale), zero_point: zp, quantized_dimension: 0, ..Default::default() }
            })
        };
        let mut outs = Vec::with_capacity(groups);
        for (k, &part) in parts.iter().enumerate() {
            let wk = wc.slice_axis0(k * co, (k + 1) * co).permuted(&[0, 2, 3, 1]);
            let wi = self.constant(&format!("{}/filter/group{k}", g.value(w).name), &wk)?;
            self.sg().tensors[wi as usize].quantization = block(&wq, k);
            let bi = match &bias {
                Some((bc, bq)) => {
                    let bi = self.constant(&format!("{}/group{k}", g.value(n.input(2).expect("bias")).name), &bc.slice_axis0(k * co, (k + 1) * co))?;
                    self.sg().tensors[bi as usize].quantization = block(bq, k);
                    bi
                }
                None => self.const_f32(&format!("{}/bias/group{k}", n.name), vec![co], vec![0.0; co])?,
            };
            let ok = self.tensor_like(&format!("{yname}/group{k}"), &[ys[0], ys[1], ys[2], co], conv_out)?;
            let opts = OptionsT::conv2d(pad, strides[1] as i32, strides[0] as i32, fa, dil[1] as i32, dil[0] as i32);
            self.op(bo::CONV_2D, 1, vec![part, wi, bi], vec![ok], Some(opts));
            outs.push(ok);
        }
        self.op(bo::CONCATENATION, 1, outs, vec![conv_out], Some(OptionsT::concatenation(3, act::NONE)));
        if let Some((lo, hi)) = clip {
            self.clip_into(conv_out, yt, &yname, &ys, lo, hi)?;
        }
        Ok(())
    }

    /// ConvTranspose (2-D, one group, no dilation): TRANSPOSE_CONV in NHWC (inputs: the output shape, OHWI
    /// weights, the input, and the bias when there is one), SAME or VALID padding, whichever reproduces the
    /// node's output size and begin pads (TFLite derives both from the output shape), else VALID and a
    /// STRIDED_SLICE that cuts the node's output out of the full one. The activation is a
    /// RELU/RELU6/clip op after it: a fused one needs TRANSPOSE_CONV version 4 (TFLite 2.13), which Edge TPU
    /// compilers do not read.
    pub(super) fn conv_transpose(&mut self, n: &Node, a: &ConvTransposeAttrs) -> Result<()> {
        let g = self.g;
        let y = n.outputs[0];
        let (x, w) = (required(n, 0)?, required(n, 1)?);
        let (xs, ws) = (g.value(x).shape.clone(), g.value(w).shape.clone());
        let cpu = "TFLite's TRANSPOSE_CONV cannot express it; run the model on the CPU target (`--target cpu`)";
        if xs.len() != 4 || ws.len() != 4 {
            return Err(self.unsupported(format!("a ConvTranspose with input {xs:?}: TRANSPOSE_CONV is 2-D only; {cpu}")));
        }
        let b = n.input(2);
        let bs = b.map(|b| g.value(b).shape.clone());
        let p = transpose_plan(&xs, &ws, bs.as_deref(), a).map_err(|e| self.unsupported(e))?;
        if p.group != 1 {
            return Err(self.unsupported(format!("a grouped ConvTranspose (group {}): {cpu}", p.group)));
        }
        if p.d[1..] != [1, 1] {
            return Err(self.unsupported(format!("a dilated ConvTranspose (dilations {:?}): {cpu}", &p.d[1..])));
        }
        // TFLite computes the padding from the output size as a forward convolution's; it must give back the
        // input size and the begin pads. Otherwise (PyTorch's k=3, s=2, p=1, output_padding=1 among them) the
        // full VALID output is computed and the node's window cut out of it.
        let fits = |pad: i8, i: usize| {
            let (input, before, _) = tflite_padding(pad, p.out[i], p.k[i], p.s[i], 1);
            input == p.inp[i] && before as isize == p.pb[i]
        };
        let full = |i: usize| (p.inp[i] - 1) * p.s[i] + p.k[i];
        let (pad, crop) = match [padding::SAME, padding::VALID].into_iter().find(|&pad| fits(pad, 1) && fits(pad, 2)) {
            Some(pad) => (pad, None),
            None if (1..3).all(|i| p.pb[i] >= 0 && p.pb[i] as usize + p.out[i] <= full(i)) => (padding::VALID, Some([p.pb[1] as usize, p.pb[2] as usize])),
            None => {
                return Err(self.unsupported(format!(
                    "pads {:?} with output_padding {:?} give a {}x{} output reaching outside the {}x{} the kernel covers: {cpu}",
                    a.conv.pads, a.output_padding, p.out[1], p.out[2], full(1), full(2)
                )))
            }
        };
        let wc = g.value(w).constant.clone().ok_or_else(|| self.unsupported("non-constant weights"))?;
        // [C_in, C_out, kh, kw] → OHWI.
        let wperm = [1, 2, 3, 0];
        let wi = self.constant(&format!("{}/filter", g.value(w).name), &wc.permuted(&wperm))?;
        self.set_quant(wi, w, &wperm);
        let bi = match b {
            Some(b) => {
                let bc = g.value(b).constant.clone().ok_or_else(|| self.unsupported("non-constant bias"))?;
                let bi = self.constant(&g.value(b).name.clone(), &bc)?;
                self.set_quant(bi, b, &[0]);
                Some(bi)
            }
            None => None,
        };
        let xin = self.get(x, &NHWC)?;
        let ys = permuted(&g.value(y).shape, &NHWC);
        let conv_shape = if crop.is_some() { vec![ys[0], full(1), full(2), ys[3]] } else { ys.clone() };
        let shape = self.const_i32(&format!("{}/output_shape", n.name), conv_shape.iter().map(|&d| d as i32).collect())?;
        let clip = self.clip_left(y, a.conv.activation.map(clip_bounds));
        let yname = g.value(y).name.clone();
        let yt = self.out(y, NHWC.to_vec())?;
        let pre_clip = if clip.is_some() { self.tensor_like(&format!("{yname}/transpose_conv"), &ys, yt)? } else { yt };
        let conv_out = if crop.is_some() { self.tensor_like(&format!("{yname}/transpose_conv_full"), &conv_shape, yt)? } else { pre_clip };
        let int8 = g.value(y).quant.is_some();
        // op_version.cc: 3 with a bias, 2 for int8, 1 for float.
        let version = if bi.is_some() { 3 } else if int8 { 2 } else { 1 };
        let opts = OptionsT::new(builtin_options::TRANSPOSE_CONV)
            .with(0, FieldT::I8(pad))
            .with(1, FieldT::I32(p.s[2] as i32))
            .with(2, FieldT::I32(p.s[1] as i32))
            .with(3, FieldT::I8(act::NONE));
        let mut ins = vec![shape, wi, xin];
        ins.extend(bi);
        self.op(bo::TRANSPOSE_CONV, version, ins, vec![conv_out], Some(opts));
        if let Some([top, left]) = crop {
            let begin = self.const_i32(&format!("{}/crop_begin", n.name), vec![0, top as i32, left as i32, 0])?;
            let end = self.const_i32(&format!("{}/crop_end", n.name), vec![ys[0] as i32, (top + ys[1]) as i32, (left + ys[2]) as i32, ys[3] as i32])?;
            let strides = self.const_i32(&format!("{}/crop_strides", n.name), vec![1; 4])?;
            self.op(bo::STRIDED_SLICE, 1, vec![conv_out, begin, end, strides], vec![pre_clip], Some(OptionsT::strided_slice(0, 0, 0)));
        }
        if let Some((lo, hi)) = clip {
            self.clip_into(pre_clip, yt, &yname, &ys, lo, hi)?;
        }
        Ok(())
    }

    /// MaxPool (`max`) or AveragePool (2-D): MAX_POOL_2D or AVERAGE_POOL_2D in NHWC.
    pub(super) fn pool(&mut self, n: &Node, a: &PoolAttrs, max: bool) -> Result<()> {
        let g = self.g;
        let y = n.outputs[0];
        let x = required(n, 0)?;
        if g.value(x).shape.len() != 4 || a.kernel_shape.len() != 2 {
            return Err(self.unsupported("only 2-D pooling exports"));
        }
        if a.dilations.iter().any(|&d| d != 1) {
            return Err(self.unsupported("dilated pooling"));
        }
        let strides = if a.strides.is_empty() { vec![1, 1] } else { a.strides.clone() };
                if !max && a.count_include_pad && a.pads.iter().any(|&p| p != 0) {
            return Err(self.unsupported("average pooling that counts padding"));
        }
        // A max pool over values that are never negative pads exactly with 0 (every window holds a real
        // element), so pads that TFLite's SAME cannot express become a PAD before a VALID pool (the ResNet
        // stem: ReLU → MaxPool 3×3, stride 2, pads 1).
        let fill = if max && self.never_negative(x) { 0.0 } else { f32::NAN };
        let (pad, xin) = self.spatial_padding(x, &a.pads, a.auto_pad, [a.kernel_shape[0], a.kernel_shape[1]], &strides, &[1, 1], fill, &n.name)?;
        let ys = g.value(y).shape.clone();
        let xs = g.value(x).shape.clone();
        let pad_same = if pad == padding::SAME { padding::SAME } else { padding::VALID };
        // A VALID pool of explicit pads runs on the PAD's output.
        let p = |i: usize| if pad == padding::VALID && a.auto_pad == AutoPad::NotSet { a.pads.get(i).copied().unwrap_or(0) } else { 0 };
        let (oh, _, _) = tflite_padding(pad_same, xs[2] + p(0) + p(2), a.kernel_shape[0], strides[0], 1);
        let (ow, _, _) = tflite_padding(pad_same, xs[3] + p(1) + p(3), a.kernel_shape[1], strides[1], 1);
        if (oh, ow) != (ys[2], ys[3]) {
            return Err(self.unsupported(format!("pooling output {}x{} that TFLite padding cannot produce (ceil_mode?)", ys[2], ys[3])));
        }
        let yt = self.out(y, NHWC.to_vec())?;
        let opts = OptionsT::pool2d(pad, strides[1] as i32, strides[0] as i32, a.kernel_shape[1] as i32, a.kernel_shape[0] as i32, act::NONE);
        self.op(if max { bo::MAX_POOL_2D } else { bo::AVERAGE_POOL_2D }, 1, vec![xin], vec![yt], Some(opts));
        Ok(())
    }

    /// Whether value `x` is never negative: int8 (uint8) with zero point -128 (0), so its lowest level is the
    /// real 0, or the output of a ReLU-like activation (also int8, whose activation clamps at the zero point:
    /// DenseNet's stem ReLU shares its parameters with a Concat whose range reaches below 0).
    fn never_negative(&self, x: ValueId) -> bool {
        let g = self.g;
        let v = g.value(x);
        if let Some(q) = &v.quant {
            let lowest_is_zero = match v.dtype {
                DType::I8 => q.zero_point.iter().all(|&z| z == -128),
                DType::U8 => q.zero_point.iter().all(|&z| z == 0),
                _ => false,
            };
            if lowest_is_zero {
                return true;
            }
        }
        let clamps = |a: Option<Activation>| matches!(a, Some(Activation::Relu | Activation::Relu6)) || matches!(a, Some(Activation::Clip { min, .. }) if min >= 0.0);
        g.nodes.iter().find(|n| n.outputs.contains(&x)).is_some_and(|n| match &n.op {
            Op::Unary(UnaryOp::Relu) => true,
            Op::Unary(UnaryOp::Clip { min, .. }) => *min >= 0.0,
            op => clamps(op.activation()),
        })
    }

    /// GlobalAveragePool or GlobalMaxPool (`max`): MEAN or REDUCE_MAX over H and W, kept.
    pub(super) fn global_pool(&mut self, n: &Node, max: bool) -> Result<()> {
        let y = n.outputs[0];
        let x = required(n, 0)?;
        if self.rank(x) != 4 {
            return Err(self.unsupported("global pooling of a non-4-D tensor"));
        }
        let xt = self.get(x, &NHWC)?;
        let axes = self.const_i32(&format!("{}/axes", n.name), vec![1, 2])?;
        let yt = self.out(y, NHWC.to_vec())?;
        let code = if max { bo::REDUCE_MAX } else { bo::MEAN };
        self.op(code, 1, vec![xt, axes], vec![yt], Some(OptionsT::reducer(true)));
        Ok(())
    }

    /// Resize of H and W: RESIZE_BILINEAR or RESIZE_NEAREST_NEIGHBOR for the modes TFLite has.
    pub(super) fn resize(&mut self, n: &Node, a: &ResizeAttrs) -> Result<()> {
        let g = self.g;
        let y = n.outputs[0];
        let x = required(n, 0)?;
        if self.rank(x) != 4 {
            return Err(self.unsupported("resize of a non-4-D tensor"));
        }
        let ys = g.value(y).shape.clone();
        let xs = g.value(x).shape.clone();
        if ys[0] != xs[0] || ys[1] != xs[1] {
            return Err(self.unsupported("resize of the batch or channel dimension"));
        }
        let (code, align, half, version) = match (a.mode, a.coord, a.nearest) {
            (ResizeMode::Linear, CoordTransform::AlignCorners, _) => (bo::RESIZE_BILINEAR, true, false, 1),
            (ResizeMode::Linear, CoordTransform::HalfPixel, _) => (bo::RESIZE_BILINEAR, false, true, 3),
            (ResizeMode::Linear, CoordTransform::Asymmetric, _) => (bo::RESIZE_BILINEAR, false, false, 1),
            (ResizeMode::Nearest, CoordTransform::Asymmetric, NearestMode::Floor) => (bo::RESIZE_NEAREST_NEIGHBOR, false, false, 1),
            (ResizeMode::Nearest, CoordTransform::AlignCorners, NearestMode::RoundPreferCeil) => (bo::RESIZE_NEAREST_NEIGHBOR, true, false, 1),
            (ResizeMode::Nearest, CoordTransform::HalfPixel, NearestMode::RoundPreferCeil) => (bo::RESIZE_NEAREST_NEIGHBOR, false, true, 3),
            (m, c, nm) => return Err(self.unsupported(format!("resize {m:?} with {c:?}/{nm:?}"))),
        };
        let xt = self.get(x, &NHWC)?;
        let st = self.const_i32(&format!("{}/size", n.name), vec![ys[2] as i32, ys[3] as i32])?;
        let yt = self.out(y, NHWC.to_vec())?;
        let opts = if code == bo::RESIZE_BILINEAR { OptionsT::resize_bilinear(align, half) } else { OptionsT::resize_nearest(align, half) };
        self.op(code, version, vec![xt, st], vec![yt], Some(opts));
        Ok(())
    }

    /// TFLite padding for explicit IR pads: SAME or VALID when they match, else an explicit PAD before a
    /// VALID op (only for zero-padding ops: convolutions). Returns (padding, input tensor in NHWC).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn spatial_padding(&mut self, x: ValueId, pads: &[usize], auto: AutoPad, k: [usize; 2], strides: &[usize], dil: &[usize], fill: f32, name: &str) -> Result<(i8, i32)> {
        let xs = self.g.value(x).shape.clone();
        let xt = self.get(x, &NHWC)?;
        let (ph, pw) = (xs[2], xs[3]);
        let same = [tflite_padding(padding::SAME, ph, k[0], strides[0], dil[0]), tflite_padding(padding::SAME, pw, k[1], strides[1], dil[1])];
        let explicit: [usize; 4] = match auto {
            AutoPad::Valid => [0; 4],
            AutoPad::SameUpper => return Ok((padding::SAME, xt)),
            AutoPad::SameLower => {
                let t = |p: (usize, usize, usize)| p.1 + p.2;
                let (th, tw) = (t(same[0]), t(same[1]));
                [th - th / 2, tw - tw / 2, th / 2, tw / 2]
            }
            AutoPad::NotSet => {
                let mut p = [0usize; 4];
                for (i, v) in pads.iter().take(4).enumerate() {
                    p[i] = *v;
                }
                p
            }
        };
        if explicit == [0; 4] {
            return Ok((padding::VALID, xt));
        }
        if explicit == [same[0].1, same[1].1, same[0].2, same[1].2] {
            return Ok((padding::SAME, xt));
        }
        if fill.is_nan() {
            return Err(self.unsupported(format!("pooling with explicit pads {explicit:?} that are not TFLite's SAME padding")));
        }
        let flat = vec![0, 0, explicit[0] as i32, explicit[2] as i32, explicit[1] as i32, explicit[3] as i32, 0, 0];
        let pt = self.constant(&format!("{name}/paddings"), &Tensor::from_vec(vec![4, 2], flat).expect("4x2"))?;
        let padded = [xs[0], xs[2] + explicit[0] + explicit[2], xs[3] + explicit[1] + explicit[3], xs[1]];
        let t = self.tensor_like(&format!("{name}/padded"), &padded, xt)?;
        self.op(bo::PAD, 1, vec![xt, pt], vec![t], None);
        Ok((padding::VALID, t))
    }
}

/// What [`Ex::conv_out`] set up: the fused activation code, the clip still to apply, and the tensors.
struct ConvOut {
    fa: i8,
    clip: Option<(f32, f32)>,
    yname: String,
    ys: Vec<usize>,
    yt: i32,
    conv_out: i32,
}
