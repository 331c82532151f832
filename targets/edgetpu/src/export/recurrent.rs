//! Export of recurrent layers: an ONNX-semantics LSTM as TFLite's `UNIDIRECTIONAL_SEQUENCE_LSTM` and a simple
//! (Elman) RNN as `UNIDIRECTIONAL_SEQUENCE_RNN`, one op per direction. The reverse direction runs between two
//! `REVERSE_V2`s along the time axis; a bidirectional layer's two directions are joined by `CONCATENATION` on Y's
//! direction axis (Y `[seq, dirs, batch, hidden]`, or `[batch, seq, dirs, hidden]` with ONNX `layout` 1, which
//! exports as `time_major = false`), and Y_h is the last step of each direction's own output (`STRIDED_SLICE`).
//!
//! TFLite's LSTM takes the weights per gate in the order input, forget, cell, output (ONNX: i, o, f, c), one bias
//! per gate (ONNX's input and recurrent biases summed), peepholes i, f, o (ONNX: i, o, f), and its states as
//! variable tensors that start at zero on a fresh interpreter. So what TFLite cannot express is refused, naming
//! the reason: GRU cells that `quant::prepare` could not unroll (`quant::decompose::unrolled_gru`), gate `clip`, `input_forget`, activations other than sigmoid gates with one tanh or relu
//! cell activation (an RNN: tanh or relu), `sequence_lens` shorter than the sequence, non-zero initial states,
//! and a used final cell state Y_c (the op has no such output).
//!
//! Quantized LSTMs (I8 X and Y, I8 weights, I32 biases, an I16 cell state) export as LiteRT's integer "8x8_16"
//! LSTM: the same op with the five intermediate tensors LiteRT's kernel reads.

use tpu_sdk_core::format::tflite::builder::*;
use tpu_sdk_core::format::tflite::schema::{activation as act, builtin_operator as bo, builtin_options};
use tpu_sdk_core::ir::ops::recurrent::{input, RnnActivation, RnnAttrs, RnnCell};
use tpu_sdk_core::ir::{DType, Node, QuantParams, Tensor, TensorData, ValueId};
use tpu_sdk_core::{Error, Result};

use super::layout::ident;
use super::node::required;
use super::tensors::i32s;
use super::Ex;

/// For TFLite's gate `j` (input, forget, cell, output), the ONNX gate block (i, o, f, c).
const ONNX_GATE: [usize; 4] = [0, 2, 3, 1];
/// For TFLite's peephole `j` (input, forget, output), the ONNX peephole block (i, o, f).
const ONNX_PEEPHOLE: [usize; 3] = [0, 2, 1];

/// Elements `start..start + len` of a constant, as a 1-D tensor of the same type.
fn block(t: &Tensor, start: usize, len: usize) -> Tensor {
    let data = match &t.data {
        TensorData::F32(v) => TensorData::F32(v[start..start + len].to_vec()),
        TensorData::I8(v) => TensorData::I8(v[start..start + len].to_vec()),
        TensorData::I16(v) => TensorData::I16(v[start..start + len].to_vec()),
        TensorData::I32(v) => TensorData::I32(v[start..start + len].to_vec()),
        other => {
            let all = Tensor { shape: vec![other.len()], data: other.clone() };
            let f: Vec<f32> = all.to_f64_vec()[start..start + len].iter().map(|&x| x as f32).collect();
            TensorData::F32(f)
        }
    };
    Tensor { shape: vec![len], data }
}

/// The per-tensor parameters of a constant's block: per-axis parameters pick entry `channel`.
fn block_quant(q: Option<&QuantParams>, channel: usize) -> Option<QuantizationT> {
    let q = q?;
    let k = if q.scale.len() > 1 { channel.min(q.scale.len() - 1) } else { 0 };
    Some(QuantizationT { scale: vec![q.scale[k]], zero_point: vec![q.zero_point.get(k).copied().unwrap_or(0)], ..Default::default() })
}

/// The TFLite activation of an LSTM's cell input and output activations (ONNX g and h).
fn cell_activation(acts: &[RnnActivation]) -> Option<i8> {
    match acts {
        [RnnActivation::Sigmoid, g, h] if g == h => match g {
            RnnActivation::Tanh => Some(act::TANH),
            RnnActivation::Relu => Some(act::RELU),
            _ => None,
        },
        _ => None,
    }
}

/// The TFLite activation of a simple RNN (ONNX f).
fn rnn_activation(acts: &[RnnActivation]) -> Option<i8> {
    match acts {
        [RnnActivation::Tanh] => Some(act::TANH),
        [RnnActivation::Relu] => Some(act::RELU),
        _ => None,
    }
}

/// Whether the recurrent node's input X is int8.
fn quantized_x(g: &tpu_sdk_core::ir::Graph, n: &Node) -> bool {
    n.input(input::X).is_some_and(|x| g.value(x).dtype == DType::I8)
}

impl Ex<'_> {
    /// Whether constant `v` holds the zero state (float zeros, or every element at its zero point).
    fn zero_state(&self, v: ValueId) -> bool {
        let val = self.g.value(v);
        let Some(c) = &val.constant else { return false };
        let zp = val.quant.as_ref().and_then(|q| q.zero_point.first().copied()).unwrap_or(0) as f64;
        c.to_f64_vec().iter().all(|&x| x == zp)
    }

    /// An LSTM (one UNIDIRECTIONAL_SEQUENCE_LSTM per direction) or an RNN (UNIDIRECTIONAL_SEQUENCE_RNN); a GRU
    /// that `quant::prepare` could not unroll is refused.
    pub(super) fn rnn(&mut self, n: &Node, a: &RnnAttrs) -> Result<()> {
        let g = self.g;
        if a.cell == RnnCell::Gru {
            return Err(self.unsupported(format!(
                "op {} (a recurrent layer) cannot export to TFLite: TFLite has no GRU op, and a GRU exports unrolled only with sigmoid and tanh activations, no clip, constant weights, a static length (at most {} steps per direction) and full sequence_lens; it is not supported on edgetpu; run the model with --target cpu or --target cloud-tpu",
                a.cell.onnx_name(),
                tpu_sdk_core::quant::MAX_UNROLLED_GRU_STEPS
            )));
        }
        let lstm = a.cell == RnnCell::Lstm;
        let tflite_op = if lstm { "UNIDIRECTIONAL_SEQUENCE_LSTM" } else { "UNIDIRECTIONAL_SEQUENCE_RNN" };
        let refuse = |why: String| Error::Unsupported(format!("{} export as TFLite {tflite_op}: {why}", a.cell.onnx_name()));
        if let Some(c) = a.clip {
            return Err(refuse(format!("gate clip {c} (TFLite has no clip of the gate inputs)")));
        }
        if a.input_forget {
            return Err(refuse("input_forget (TFLite couples the input gate to the forget gate the other way)".into()));
        }
        let x = required(n, input::X)?;
        let xs = g.value(x).shape.clone();
        let (seq, batch) = if a.batch_major { (xs[1], xs[0]) } else { (xs[0], xs[1]) };
        let hid = a.hidden_size;
        let dirs = a.direction.count();
        let konst = |i: usize| n.input(i).is_some_and(|v| g.value(v).constant.is_some());
        if !(konst(input::W) && konst(input::R)) {
            return Err(refuse("the weights W and R must be constants".into()));
        }
        if n.input(input::B).is_some_and(|v| g.value(v).constant.is_none()) || n.input(input::P).is_some_and(|v| g.value(v).constant.is_none()) {
            return Err(refuse("the bias B and the peepholes P must be constants".into()));
        }
        if let Some(l) = n.input(input::SEQ_LENS) {
            let full = g.value(l).constant.as_ref().is_some_and(|c| c.to_i64_vec().iter().all(|&s| s == seq as i64));
            if !full {
                return Err(refuse(format!("sequence_lens '{}' is not a constant equal to the sequence length {seq}", g.value(l).name)));
            }
        }
        for (i, what) in [(input::INITIAL_H, "initial_h"), (input::INITIAL_C, "initial_c")] {
            if let Some(v) = n.input(i) {
                if !self.zero_state(v) {
                    return Err(refuse(format!("{what} '{}' is not a constant zero state (TFLite's states are variable tensors that start at zero)", g.value(v).name)));
                }
            }
        }
        let uses = g.use_counts();
        if let Some(&yc) = n.outputs.get(2) {
            if uses[yc.0] > 0 {
                return Err(refuse(format!("the final cell state Y_c '{}' is used (the op outputs only the hidden states)", g.value(yc).name)));
            }
        }
        let mut fused = Vec::new();
        for d in 0..dirs {
            let acts = a.activations_of(d);
            let f = if lstm { cell_activation(acts) } else { rnn_activation(acts) };
            let want = if lstm { "sigmoid gates, one tanh or relu cell activation" } else { "tanh or relu" };
            fused.push(f.ok_or_else(|| refuse(format!("activations {acts:?} (TFLite: {want})")))?);
        }
        if quantized_x(g, n) && !lstm {
            return Err(refuse("an int8 RNN (only LSTMs have an integer TFLite kernel here)".into()));
        }
        let y = n.outputs[0];
        let y_h = n.outputs.get(1).copied().filter(|v| uses[v.0] > 0);
        let time_axis = if a.batch_major { 1 } else { 0 };
        let seq_shape = if a.batch_major { vec![batch, seq, hid] } else { vec![seq, batch, hid] };
        let xt = self.get(x, &ident(3))?;
        let mut ys = Vec::new();
        let mut hs = Vec::new();
        for (d, &fused_act) in fused.iter().enumerate() {
            let name = if dirs == 1 { n.name.clone() } else { format!("{}/{}", n.name, if d == 0 { "forward" } else { "backward" }) };
            let reversed = a.direction.reversed(d);
            let xin = if reversed { self.reverse(xt, time_axis, &format!("{name}/reversed_input"))? } else { xt };
            let out = if lstm {
                self.lstm_op(n, a, d, &name, xin, fused_act, &seq_shape)?
            } else {
                self.simple_rnn_op(n, d, &name, xin, fused_act, &seq_shape, !a.batch_major)?
            };
            // The final hidden state: the last step the op computed.
            if y_h.is_some() {
                let mut begin = vec![0i32; 3];
                begin[time_axis] = seq as i32 - 1;
                let mut hshape = seq_shape.clone();
                hshape[time_axis] = 1;
                let bt = self.const_i32(&format!("{name}/last/begin"), begin)?;
                let et = self.const_i32(&format!("{name}/last/end"), i32s(seq_shape.iter().copied()))?;
                let st = self.const_i32(&format!("{name}/last/strides"), vec![1; 3])?;
                let ht = self.tensor_like(&format!("{name}/last"), &hshape, out)?;
                self.op(bo::STRIDED_SLICE, 1, vec![out, bt, et, st], vec![ht], Some(OptionsT::strided_slice(0, 0, 0)));
                hs.push(ht);
            }
            let out = if reversed && uses[y.0] > 0 { self.reverse(out, time_axis, &format!("{name}/output_reversed"))? } else { out };
            ys.push(out);
        }
        // Y: each direction's output with a direction axis of 1, concatenated.
        if uses[y.0] > 0 {
            let dir_axis = if a.batch_major { 2 } else { 1 };
            let mut one = seq_shape.clone();
            one.insert(dir_axis, 1);
            let yt = self.out(y, ident(4))?;
            if dirs == 1 {
                self.reshape_into(ys[0], yt, &one, &format!("{}/y_shape", n.name))?;
            } else {
                let mut parts = Vec::new();
                for (d, &t) in ys.iter().enumerate() {
                    let pt = self.tensor_like(&format!("{}/y{d}", n.name), &one, t)?;
                    self.reshape_into(t, pt, &one, &format!("{}/y{d}_shape", n.name))?;
                    parts.push(pt);
                }
                self.op(bo::CONCATENATION, 1, parts, vec![yt], Some(OptionsT::concatenation(dir_axis as i32, act::NONE)));
            }
        }
        // Y_h: [dirs, batch, hidden] (or [batch, dirs, hidden]); each part already has its direction axis.
        if let Some(h) = y_h {
            let ht = self.out(h, ident(3))?;
            if dirs == 1 {
                let shape = g.value(h).shape.clone();
                self.reshape_into(hs[0], ht, &shape, &format!("{}/y_h_shape", n.name))?;
            } else {
                let axis = if a.batch_major { 1 } else { 0 };
                self.op(bo::CONCATENATION, 1, hs, vec![ht], Some(OptionsT::concatenation(axis, act::NONE)));
            }
        }
        Ok(())
    }

    /// One direction `d` of an LSTM as UNIDIRECTIONAL_SEQUENCE_LSTM on tensor `xin` (float, or LiteRT's integer
    /// LSTM when X is int8): its output sequence tensor.
    #[allow(clippy::too_many_arguments)]
    fn lstm_op(&mut self, n: &Node, a: &RnnAttrs, d: usize, name: &str, xin: i32, fused_act: i8, seq_shape: &[usize]) -> Result<i32> {
        let g = self.g;
        let refuse = |why: String| Error::Unsupported(format!("LSTM export as TFLite UNIDIRECTIONAL_SEQUENCE_LSTM: {why}"));
        let konst = |i: usize| n.input(i).and_then(|v| g.value(v).constant.as_ref().map(|c| (v, c)));
        let (Some((wv, w)), Some((rv, r))) = (konst(input::W), konst(input::R)) else {
            return Err(refuse("the weights W and R must be constants".into()));
        };
        let b = konst(input::B);
        let (hid, ninput) = (a.hidden_size, w.shape[2]);
        let batch = if a.batch_major { seq_shape[0] } else { seq_shape[1] };
        let x = required(n, input::X)?;
        let y = n.outputs[0];
        let quantized = g.value(x).dtype == DType::I8;
        let mut ins = vec![xin];
        // Input weights (1-4), recurrent weights (5-8).
        for (m, (mv, mt), cols) in [(0, (wv, w), ninput), (1, (rv, r), hid)] {
            for (j, &k) in ONNX_GATE.iter().enumerate() {
                let start = (d * 4 + k) * hid * cols;
                let t = block(mt, start, hid * cols);
                let t = Tensor { shape: vec![hid, cols], data: t.data };
                let gate = ["input", "forget", "cell", "output"][j];
                let what = if m == 0 { "input_to" } else { "recurrent_to" };
                let id = self.constant(&format!("{name}/{what}_{gate}_weights"), &t)?;
                self.sg().tensors[id as usize].quantization = block_quant(g.value(mv).quant.as_ref(), (d * 4 + k) * hid);
                ins.push(id);
            }
        }
        // Peepholes (9-11).
        match n.input(input::P).and_then(|v| g.value(v).constant.as_ref().map(|c| (v, c))) {
            Some((pv, pt)) => {
                for (j, &k) in ONNX_PEEPHOLE.iter().enumerate() {
                    let t = block(pt, (d * 3 + k) * hid, hid);
                    let gate = ["input", "forget", "output"][j];
                    let id = self.constant(&format!("{name}/cell_to_{gate}_weights"), &t)?;
                    self.sg().tensors[id as usize].quantization = block_quant(g.value(pv).quant.as_ref(), (d * 3 + k) * hid);
                    ins.push(id);
                }
            }
            None => ins.extend([-1, -1, -1]),
        }
        // Gate biases (12-15): ONNX's input and recurrent biases summed.
        for (j, &k) in ONNX_GATE.iter().enumerate() {
            let gate = ["input", "forget", "cell", "output"][j];
            let t = match b {
                Some((bv, bt)) => {
                    let wb = block(bt, (d * 8 + k) * hid, hid);
                    let rb = block(bt, (d * 8 + 4 + k) * hid, hid);
                    let sum = match (&wb.data, &rb.data) {
                        (TensorData::F32(p), TensorData::F32(q)) => TensorData::F32(p.iter().zip(q).map(|(a, b)| a + b).collect()),
                        (TensorData::I32(p), TensorData::I32(q)) => TensorData::I32(p.iter().zip(q).map(|(a, b)| a.saturating_add(*b)).collect()),
                        _ => return Err(refuse(format!("bias '{}' of type {}", g.value(bv).name, bt.dtype()))),
                    };
                    Tensor { shape: vec![hid], data: sum }
                }
                None if quantized => Tensor::from_vec(vec![hid], vec![0i32; hid]).expect("1-D"),
                None => Tensor::from_f32(vec![hid], vec![0.0; hid]),
            };
            let id = self.constant(&format!("{name}/{gate}_gate_bias"), &t)?;
            if let Some((bv, _)) = b {
                self.sg().tensors[id as usize].quantization = block_quant(g.value(bv).quant.as_ref(), (d * 8 + k) * hid);
            }
            ins.push(id);
        }
        // No projection (16, 17).
        ins.extend([-1, -1]);
        // The states (18, 19): variable tensors.
        let (h_dtype, h_quant) = match n.input(input::INITIAL_H) {
            Some(v) => (g.value(v).dtype, g.value(v).quant.clone()),
            None => (g.value(y).dtype, g.value(y).quant.clone()),
        };
        let hst = self.tensor(&format!("{name}/output_state"), &[batch, hid], h_dtype)?;
        self.sg().tensors[hst as usize].quantization = block_quant(h_quant.as_ref(), 0);
        let (c_dtype, c_quant) = match n.input(input::INITIAL_C) {
            Some(v) => (g.value(v).dtype, g.value(v).quant.clone()),
            None => (if quantized { DType::I16 } else { DType::F32 }, None),
        };
        if quantized && (c_dtype != DType::I16 || c_quant.is_none()) {
            return Err(refuse("a quantized LSTM needs an int16 initial_c with quantization parameters (the cell state's scale)".into()));
        }
        let cst = self.tensor(&format!("{name}/cell_state"), &[batch, hid], c_dtype)?;
        self.sg().tensors[cst as usize].quantization = block_quant(c_quant.as_ref(), 0);
        for t in [hst, cst] {
            self.sg().tensors[t as usize].is_variable = true;
        }
        ins.extend([hst, cst]);
        // No layer normalization (20-23).
        ins.extend([-1, -1, -1, -1]);
        let out = self.tensor(&format!("{name}/output"), seq_shape, g.value(y).dtype)?;
        self.sg().tensors[out as usize].quantization = block_quant(g.value(y).quant.as_ref(), 0);
        let opts = OptionsT::new(builtin_options::UNIDIRECTIONAL_SEQUENCE_LSTM)
            .with(0, FieldT::I8(fused_act))
            .with(1, FieldT::F32(a.cell_clip.unwrap_or(0.0)))
            .with(2, FieldT::F32(0.0))
            .with(3, FieldT::Bool(!a.batch_major))
            .with(4, FieldT::Bool(false));
        self.op(bo::UNIDIRECTIONAL_SEQUENCE_LSTM, 1, ins, vec![out], Some(opts));
        if quantized {
            self.lstm_intermediates(name, y)?;
        }
        Ok(out)
    }

    /// One direction `d` of a simple RNN as UNIDIRECTIONAL_SEQUENCE_RNN on tensor `xin`: weights [H, input] and
    /// [H, H], one bias (ONNX's two summed), a zero variable hidden state; its output sequence tensor.
    #[allow(clippy::too_many_arguments)]
    fn simple_rnn_op(&mut self, n: &Node, d: usize, name: &str, xin: i32, fused_act: i8, seq_shape: &[usize], time_major: bool) -> Result<i32> {
        let g = self.g;
        let konst = |i: usize| n.input(i).and_then(|v| g.value(v).constant.as_ref()).expect("checked constant");
        let (w, r) = (konst(input::W), konst(input::R));
        let (hid, cols) = (w.shape[1], w.shape[2]);
        let batch = if time_major { seq_shape[1] } else { seq_shape[0] };
        let wt = Tensor { shape: vec![hid, cols], data: block(w, d * hid * cols, hid * cols).data };
        let rt = Tensor { shape: vec![hid, hid], data: block(r, d * hid * hid, hid * hid).data };
        let bias: Vec<f32> = match n.input(input::B).and_then(|v| g.value(v).constant.as_ref()) {
            Some(b) => {
                let v = b.to_f64_vec();
                (0..hid).map(|j| (v[d * 2 * hid + j] as f32) + (v[d * 2 * hid + hid + j] as f32)).collect()
            }
            None => vec![0.0; hid],
        };
        let wi = self.constant(&format!("{name}/input_weights"), &wt)?;
        let ri = self.constant(&format!("{name}/recurrent_weights"), &rt)?;
        let bi = self.const_f32(&format!("{name}/bias"), vec![hid], bias)?;
        let hst = self.tensor(&format!("{name}/hidden_state"), &[batch, hid], DType::F32)?;
        self.sg().tensors[hst as usize].is_variable = true;
        let out = self.tensor(&format!("{name}/output"), seq_shape, DType::F32)?;
        let opts = OptionsT::new(builtin_options::SEQUENCE_RNN).with(0, FieldT::Bool(time_major)).with(1, FieldT::I8(fused_act)).with(2, FieldT::Bool(false));
        self.op(bo::UNIDIRECTIONAL_SEQUENCE_RNN, 1, vec![xin, wi, ri, bi, hst], vec![out], Some(opts));
        Ok(out)
    }

    /// `REVERSE_V2` of tensor `t` along `axis`, into a new tensor like `t`.
    fn reverse(&mut self, t: i32, axis: usize, name: &str) -> Result<i32> {
        let shape: Vec<usize> = self.sg_ref().tensors[t as usize].shape.iter().map(|&d| d as usize).collect();
        let at = self.const_i32(&format!("{name}/axis"), vec![axis as i32])?;
        let rt = self.tensor_like(name, &shape, t)?;
        self.op(bo::REVERSE_V2, 1, vec![t, at], vec![rt], None);
        Ok(rt)
    }

    /// `RESHAPE` of tensor `src` into tensor `dst` of shape `shape`.
    fn reshape_into(&mut self, src: i32, dst: i32, shape: &[usize], name: &str) -> Result<()> {
        let s = i32s(shape.iter().copied());
        let st = self.const_i32(name, s.clone())?;
        self.op(bo::RESHAPE, 1, vec![src, st], vec![dst], Some(OptionsT::reshape(s)));
        Ok(())
    }

    /// The five intermediate tensors of the integer LSTM just written (LiteRT's `Prepare` requires them), as
    /// TF's converter writes them for an LSTM without layer normalization: the four gate inputs as empty float
    /// tensors without parameters (LiteRT then fixes them at Q3.12, so there is nothing to calibrate), and the
    /// hidden state with Y's parameters (the output is the hidden state).
    fn lstm_intermediates(&mut self, name: &str, y: ValueId) -> Result<()> {
        let mut ts = Vec::new();
        for gate in ["input", "forget", "cell", "output"] {
            ts.push(self.tensor(&format!("{name}/input_to_{gate}_intermediate"), &[0], DType::F32)?);
        }
        let t = self.tensor(&format!("{name}/effective_hidden_scale_intermediate"), &[0], DType::I8)?;
        self.sg().tensors[t as usize].quantization = block_quant(self.g.value(y).quant.as_ref(), 0);
        ts.push(t);
        self.sg().operators.last_mut().expect("the LSTM").intermediates = ts;
        Ok(())
    }
}
