//! Recurrent layers: UNIDIRECTIONAL_SEQUENCE_LSTM (what TensorFlow's converter fuses a Keras 2 `LSTM` into; a
//! `Bidirectional` one becomes two of them around REVERSE_V2) → one forward [`Op::Rnn`] LSTM;
//! BIDIRECTIONAL_SEQUENCE_LSTM → one bidirectional LSTM (its outputs merged on the last axis or split per
//! direction); UNIDIRECTIONAL_SEQUENCE_RNN → one forward simple RNN. LiteRT has builtin kernels for the last two,
//! which TF's converter does not emit for Keras layers.
//!
//! TFLite's 24 inputs: x; input weights i, f, c, o; recurrent weights i, f, c, o; peepholes i, f, o; biases
//! i, f, c, o; projection weights and bias; output state; cell state; four layer-norm coefficient vectors. The
//! gate blocks are reordered to ONNX's i, o, f, c (peepholes i, o, f) into constant W [1, 4H, input],
//! R [1, 4H, H], B [1, 8H] (recurrent biases zero) and P [1, 3H]. The two state inputs are TFLite variable
//! tensors: their data (zeros in converted models) is the initial state, as on a fresh LiteRT interpreter (LiteRT
//! then keeps the final state in them for the next invoke; the IR is stateless). Not expressible here, and
//! refused by name: CIFG (no input gate: TFLite couples i = 1 - f, ONNX only f = 1 - i), projection, layer
//! normalization, diagonal recurrent weights, quantized weights. TFLite's `cell_clip` (10 in converted Keras
//! models) clamps the cell state after each update: [`RnnAttrs::cell_clip`].

use super::{ImportFn, ImportManyFn, OpIn};
use crate::format::tflite::schema::{self, activation, builtin_operator as bo};
use crate::import::tflite::importer::Importer;
use crate::ir::ops::recurrent::{RnnActivation, RnnAttrs, RnnCell, RnnDirection};
use crate::ir::{DType, Op, QuantParams, Tensor, ValueId};
use crate::Result;

/// The ops of this family.
pub(super) const OPS: &[(i32, ImportFn)] = &[
    (bo::UNIDIRECTIONAL_SEQUENCE_LSTM, unidirectional_sequence_lstm),
    (bo::UNIDIRECTIONAL_SEQUENCE_RNN, unidirectional_sequence_rnn),
];

/// The ops of this family with several outputs.
pub(super) const MULTI_OUTPUT_OPS: &[(i32, ImportManyFn)] = &[(bo::BIDIRECTIONAL_SEQUENCE_LSTM, bidirectional_sequence_lstm)];

/// The f32 data of constant input `k` of `o` with `len` elements.
fn weights(imp: &mut Importer, o: &OpIn, k: usize, what: &str, len: usize) -> Result<Vec<f32>> {
    let t = imp.req(o, k)?;
    let v = imp.value(t)?;
    let c = imp.g.constant(v).filter(|c| c.dtype() == DType::F32 && imp.g.value(v).quant.is_none());
    match c.and_then(|c| c.as_f32()) {
        Some(d) if d.len() == len => Ok(d.to_vec()),
        Some(d) => Err(imp.invalid(format!("{what} (input {k}) has {} elements, {len} expected", d.len()))),
        None => Err(imp.unsupported(format!("{what} (input {k}) must be a constant f32 tensor (quantized or computed LSTM weights are not supported)"))),
    }
}

fn time_major_of(opt: &schema::UnidirectionalSequenceLSTMOptions) -> bool {
    opt.time_major()
}

/// The int8 data and scale of constant per-tensor quantized input `k` of `o` with `len` elements.
fn int8_weights(imp: &mut Importer, o: &OpIn, k: usize, what: &str, len: usize) -> Result<(Vec<i8>, f32)> {
    let t = imp.req(o, k)?;
    let q = imp.quant(t)?.filter(|q| q.scale.len() == 1 && q.zero_point[0] == 0);
    let v = imp.value(t)?;
    let c = imp.g.constant(v).filter(|c| c.dtype() == DType::I8).and_then(|c| c.view::<i8>()).map(|d| d.to_vec());
    match (c, q) {
        (Some(d), Some(q)) if d.len() == len => Ok((d, q.scale[0])),
        (Some(d), Some(_)) => Err(imp.invalid(format!("{what} (input {k}) has {} elements, {len} expected", d.len()))),
        _ => Err(imp.unsupported(format!("{what} (input {k}) of an int8 LSTM must be a constant int8 tensor quantized symmetrically per tensor"))),
    }
}

/// LiteRT's integer "8x8_16" LSTM (int8 input, output and weights, int16 cell state; no layer normalization,
/// projection, CIFG or peepholes, which are refused above or here): one forward quantized [`Op::Rnn`] with
/// per-gate weight scales (per axis 1 of W and R), the biases (int32) in B's first half, the output state's
/// zero point as initial_h and the int16 cell state (its power-of-two scale) as initial_c. The hidden
/// state's parameters (intermediate 4) must be the output's, which the IR's Y carries.
fn integer_lstm(imp: &mut Importer, o: &OpIn, x: ValueId, time_major: bool, cell_clip: Option<f32>, act: RnnActivation) -> Result<ValueId> {
    let base = &o.base;
    if act != RnnActivation::Tanh {
        return Err(imp.unsupported("an integer LSTM whose cell activation is not tanh"));
    }
    if [9, 10, 11].iter().any(|&k| o.input(k).is_some()) {
        return Err(imp.unsupported("an integer LSTM with peepholes"));
    }
    let (seq, batch, input) = sequence_dims(imp, x, time_major)?;
    let hid = imp.declared(imp.req(o, 6)?)?.1.first().copied().unwrap_or(0);
    check_weight_sizes(hid, input)?;
    let out_t = o.outs[0];
    let out_q = imp.quant(out_t)?.ok_or_else(|| imp.invalid("the int8 LSTM's output has no quantization parameters"))?;
    let inter: Vec<i32> = o.op.intermediates().map(|v| schema::to_vec(Some(v))).unwrap_or_default();
    if inter.len() != 5 {
        return Err(imp.invalid(format!("an integer LSTM has {} intermediate tensors, LiteRT requires 5", inter.len())));
    }
    let hidden_q = imp.quant(inter[4])?.ok_or_else(|| imp.invalid("the hidden intermediate has no quantization parameters"))?;
    if hidden_q.scale != out_q.scale || hidden_q.zero_point != out_q.zero_point {
        return Err(imp.unsupported("an integer LSTM whose hidden state's parameters differ from its output's"));
    }
    // TFLite order i, f, c, o → ONNX i, o, f, c.
    let order = [0, 3, 1, 2];
    let (mut w, mut r, mut ws, mut rs) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut b = vec![0i32; 8 * hid];
    let mut bs = vec![1f32; 8 * hid];
    for (slot, &g) in order.iter().enumerate() {
        let (wd, s) = int8_weights(imp, o, 1 + g, "input weights", hid * input)?;
        w.extend(wd);
        ws.extend(std::iter::repeat_n(s, hid));
        let (rd, s) = int8_weights(imp, o, 5 + g, "recurrent weights", hid * hid)?;
        r.extend(rd);
        rs.extend(std::iter::repeat_n(s, hid));
        let bt = imp.req(o, 12 + g)?;
        let bv = imp.value(bt)?;
        let bd = imp.g.constant(bv).and_then(|c| c.view::<i32>()).map(|d| d.to_vec()).filter(|d| d.len() == hid);
        let bd = bd.ok_or_else(|| imp.unsupported(format!("gate bias (input {}) of an int8 LSTM must be a constant int32 tensor of {hid} elements", 12 + g)))?;
        b[slot * hid..(slot + 1) * hid].copy_from_slice(&bd);
        let scale = imp.quant(bt)?.map(|q| q.scale[0]).unwrap_or(1.0);
        bs[slot * hid..(slot + 1) * hid].fill(scale);
        bs[(4 + slot) * hid..(5 + slot) * hid].fill(scale);
    }
    let per_gate = |s: Vec<f32>| QuantParams { zero_point: vec![0; s.len()], scale: s, axis: Some(1) };
    let constant = |imp: &mut Importer, name: &str, t: Tensor, q: QuantParams| {
        let v = imp.g.add_constant(format!("{base}/{name}"), t);
        imp.g.value_mut(v).quant = Some(q);
        v
    };
    let wv = constant(imp, "W", Tensor::from_vec(vec![1, 4 * hid, input], w).expect("W size"), per_gate(ws));
    let rv = constant(imp, "R", Tensor::from_vec(vec![1, 4 * hid, hid], r).expect("R size"), per_gate(rs));
    let bv = constant(imp, "B", Tensor::from_vec(vec![1, 8 * hid], b).expect("B size"), per_gate(bs));
    let state_shape = if time_major { vec![1, batch, hid] } else { vec![batch, 1, hid] };
    let hq = imp.quant(imp.req(o, 18)?)?.ok_or_else(|| imp.invalid("the output state has no quantization parameters"))?;
    let cq = imp.quant(imp.req(o, 19)?)?.ok_or_else(|| imp.invalid("the cell state has no quantization parameters"))?;
    if imp.declared(imp.req(o, 19)?)?.0 != DType::I16 {
        return Err(imp.unsupported("an integer LSTM whose cell state is not int16"));
    }
    // Variable tensors start at the zero point (int8) or zero (int16), as LiteRT resets them.
    let n = state_len(batch, hid, "states")?;
    let h0 = Tensor::from_vec(state_shape.clone(), vec![hq.zero_point[0] as i8; n]).expect("state size");
    let h0 = constant(imp, "output state", h0, hq);
    let c0 = constant(imp, "cell state", Tensor::from_vec(state_shape, vec![0i16; n]).expect("state size"), cq);
    let attrs = RnnAttrs {
        cell: RnnCell::Lstm,
        direction: RnnDirection::Forward,
        hidden_size: hid,
        activations: vec![RnnActivation::Sigmoid, RnnActivation::Tanh, RnnActivation::Tanh],
        clip: None,
        batch_major: !time_major,
        linear_before_reset: false,
        input_forget: false,
        cell_clip,
    };
    let ins = vec![Some(x), Some(wv), Some(rv), Some(bv), None, Some(h0), Some(c0)];
    let y = imp.node(Op::Rnn(attrs), ins, format!("{base}/lstm"))?;
    imp.g.value_mut(y).quant = Some(out_q);
    let out: Vec<i64> = if time_major { vec![seq as i64, batch as i64, hid as i64] } else { vec![batch as i64, seq as i64, hid as i64] };
    imp.op_with_i64(Op::Reshape { allowzero: false }, y, format!("{base}/shape"), out, base.clone())
}

fn unidirectional_sequence_lstm(imp: &mut Importer, o: &OpIn) -> Result<ValueId> {
    let base = &o.base;
    let opt = opts!(imp, o, schema::UnidirectionalSequenceLSTMOptions);
    if o.input(1).is_none() || o.input(5).is_none() {
        return Err(imp.unsupported("CIFG (no input gate: TFLite couples i = 1 - f, which ONNX's input_forget does not express)"));
    }
    for (k, what) in [(16, "projection weights"), (17, "projection bias"), (20, "layer normalization"), (21, "layer normalization"), (22, "layer normalization"), (23, "layer normalization")] {
        if o.input(k).is_some() {
            return Err(imp.unsupported(format!("an LSTM with {what} (input {k})")));
        }
    }
    // proj_clip applies to the projection, which is refused above.
    let c = opt.cell_clip();
    let cell_clip = if c > 0.0 && c.is_finite() {
        Some(c)
    } else if c == 0.0 {
        None
    } else {
        return Err(imp.invalid(format!("cell_clip {c}")));
    };
    if opt.diagonal_recurrent_tensors() {
        return Err(imp.unsupported("diagonal recurrent weights"));
    }
    let act = match opt.fused_activation_function() {
        activation::TANH => RnnActivation::Tanh,
        activation::RELU => RnnActivation::Relu,
        activation::NONE => RnnActivation::Affine { alpha: 1.0, beta: 0.0 },
        other => return Err(imp.unsupported(format!("LSTM cell activation {}", activation::name(other)))),
    };
    let x = imp.value(imp.req(o, 0)?)?;
    if imp.dtype(x) == DType::I8 {
        return integer_lstm(imp, o, x, time_major_of(&opt), cell_clip, act);
    }
    let time_major = opt.time_major();
    let (seq, batch, input) = sequence_dims(imp, x, time_major)?;
    let rw = imp.declared(imp.req(o, 6)?)?.1;
    if rw.len() != 2 {
        return Err(imp.invalid(format!("recurrent weights must be 2-D [cells, outputs], got {rw:?}")));
    }
    let hid = rw[0];
    check_weight_sizes(hid, input)?;
    if rw[1] != hid {
        return Err(imp.unsupported(format!("{} outputs for {hid} cells (a projection)", rw[1])));
    }
    // TFLite order i, f, c, o → ONNX i, o, f, c.
    let order = [0, 3, 1, 2];
    let mut w = Vec::with_capacity(4 * hid * input);
    let mut r = Vec::with_capacity(4 * hid * hid);
    let mut b = vec![0f32; 8 * hid];
    for (slot, &g) in order.iter().enumerate() {
        w.extend(weights(imp, o, 1 + g, "input weights", hid * input)?);
        r.extend(weights(imp, o, 5 + g, "recurrent weights", hid * hid)?);
        b[slot * hid..(slot + 1) * hid].copy_from_slice(&weights(imp, o, 12 + g, "gate bias", hid)?);
    }
    let peepholes = [9, 10, 11].iter().filter(|&&k| o.input(k).is_some()).count();
    let p = match peepholes {
        0 => None,
        3 => {
            let mut p = Vec::with_capacity(3 * hid);
            for k in [9, 11, 10] {
                p.extend(weights(imp, o, k, "peephole weights", hid)?);
            }
            Some(p)
        }
        n => return Err(imp.invalid(format!("has {n} of the 3 peephole weight vectors"))),
    };
    let constant = |imp: &mut Importer, name: &str, shape: Vec<usize>, data: Vec<f32>| imp.g.add_constant(format!("{base}/{name}"), Tensor::from_f32(shape, data));
    let wv = constant(imp, "W", vec![1, 4 * hid, input], w);
    let rv = constant(imp, "R", vec![1, 4 * hid, hid], r);
    let bv = constant(imp, "B", vec![1, 8 * hid], b);
    let pv = p.map(|p| constant(imp, "P", vec![1, 3 * hid], p));
    // The states: [batch, hidden] data as [1, batch, hidden] (time-major) or [batch, 1, hidden].
    let state_shape = if time_major { vec![1, batch, hid] } else { vec![batch, 1, hid] };
    let mut states = Vec::new();
    for (k, what) in [(18, "output state"), (19, "cell state")] {
        // A variable tensor without data starts at zero (LiteRT zero-fills it on allocation).
        let t = imp.req(o, k)?;
        let tensor = imp.tensor(t)?;
        let empty = schema::buffer_data(&imp.model, imp.file, tensor.buffer()).map(|d| d.is_empty()).unwrap_or(false);
        let n = state_len(batch, hid, what)?;
        let s = if empty && tensor.is_variable() { vec![0f32; n] } else { weights(imp, o, k, what, n)? };
        states.push(constant(imp, what, state_shape.clone(), s));
    }
    let attrs = RnnAttrs {
        cell: RnnCell::Lstm,
        direction: RnnDirection::Forward,
        hidden_size: hid,
        activations: vec![RnnActivation::Sigmoid, act, act],
        clip: None,
        batch_major: !time_major,
        linear_before_reset: false,
        input_forget: false,
        cell_clip,
    };
    let ins = vec![Some(x), Some(wv), Some(rv), Some(bv), None, Some(states[0]), Some(states[1]), pv];
    let y = imp.node(Op::Rnn(attrs), ins, format!("{base}/lstm"))?;
    let out: Vec<i64> = if time_major { vec![seq as i64, batch as i64, hid as i64] } else { vec![batch as i64, seq as i64, hid as i64] };
    imp.op_with_i64(Op::Reshape { allowzero: false }, y, format!("{base}/shape"), out, base.clone())
}

/// The initial state of variable tensor input `k` (`[batch, hidden]` data): zeros when it holds no data (as on a
/// fresh LiteRT interpreter), else its constant data.
/// The sizes the declared shapes give the weights (gates × hidden × max(input, hidden), 8 gate vectors at most),
/// checked against the memory budget before any is reserved: shapes come from the file, the data may be short.
fn check_weight_sizes(hid: usize, input: usize) -> Result<()> {
    crate::limits::check_tensor("the recurrent weights", DType::F32, &[8, hid, input.max(hid).max(1)])
}

/// (sequence length, batch, features) of a recurrent op's 3-D input, time-major or batch-major.
fn sequence_dims(imp: &Importer, x: ValueId, time_major: bool) -> Result<(usize, usize, usize)> {
    let xs = imp.shape(x);
    if xs.len() != 3 {
        return Err(imp.invalid(format!("expects a 3-D input, got {xs:?}")));
    }
    Ok(if time_major { (xs[0], xs[1], xs[2]) } else { (xs[1], xs[0], xs[2]) })
}

/// The batch × hidden elements of a recurrent state, checked against the memory budget before anything is
/// allocated: the batch comes from the input's declared shape, which a file may set to anything.
fn state_len(batch: usize, hid: usize, what: &str) -> Result<usize> {
    crate::limits::check_tensor(&format!("the recurrent {what}"), DType::F32, &[batch, hid])?;
    Ok(batch * hid)
}

fn initial_state(imp: &mut Importer, o: &OpIn, k: usize, what: &str, len: usize) -> Result<Vec<f32>> {
    let t = imp.req(o, k)?;
    let tensor = imp.tensor(t)?;
    let empty = schema::buffer_data(&imp.model, imp.file, tensor.buffer()).map(|d| d.is_empty()).unwrap_or(false);
    if empty && tensor.is_variable() {
        Ok(vec![0f32; len])
    } else {
        weights(imp, o, k, what, len)
    }
}

/// The cell activation of a fused activation code (tanh, relu or none: what the recurrent kernels apply).
fn cell_activation(imp: &Importer, code: i8) -> Result<RnnActivation> {
    match code {
        activation::TANH => Ok(RnnActivation::Tanh),
        activation::RELU => Ok(RnnActivation::Relu),
        activation::NONE => Ok(RnnActivation::Affine { alpha: 1.0, beta: 0.0 }),
        other => Err(imp.unsupported(format!("recurrent cell activation {}", activation::name(other)))),
    }
}

/// UNIDIRECTIONAL_SEQUENCE_RNN (an Elman RNN: `h = act(W x + R h + b)`): inputs x, weights [H, input], recurrent
/// weights [H, H], bias [H], hidden state (variable) [batch, H] → one forward ONNX-semantics RNN.
fn unidirectional_sequence_rnn(imp: &mut Importer, o: &OpIn) -> Result<ValueId> {
    let base = &o.base;
    let opt = opts!(imp, o, schema::SequenceRNNOptions);
    let act = cell_activation(imp, opt.fused_activation_function())?;
    let x = imp.value(imp.req(o, 0)?)?;
    if imp.dtype(x) != DType::F32 {
        return Err(imp.unsupported(format!("a {} RNN (float RNNs only)", imp.dtype(x))));
    }
    let time_major = opt.time_major();
    let (seq, batch, input) = sequence_dims(imp, x, time_major)?;
    let rw = imp.declared(imp.req(o, 2)?)?.1;
    if rw.len() != 2 || rw[0] != rw[1] {
        return Err(imp.invalid(format!("recurrent weights must be [units, units], got {rw:?}")));
    }
    let hid = rw[0];
    check_weight_sizes(hid, input)?;
    let w = weights(imp, o, 1, "input weights", hid * input)?;
    let r = weights(imp, o, 2, "recurrent weights", hid * hid)?;
    let mut b = weights(imp, o, 3, "bias", hid)?;
    b.resize(2 * hid, 0.0);
    let h0 = initial_state(imp, o, 4, "hidden state", state_len(batch, hid, "hidden state")?)?;
    let constant = |imp: &mut Importer, name: &str, shape: Vec<usize>, data: Vec<f32>| imp.g.add_constant(format!("{base}/{name}"), Tensor::from_f32(shape, data));
    let wv = constant(imp, "W", vec![1, hid, input], w);
    let rv = constant(imp, "R", vec![1, hid, hid], r);
    let bv = constant(imp, "B", vec![1, 2 * hid], b);
    let hv = constant(imp, "initial_h", if time_major { vec![1, batch, hid] } else { vec![batch, 1, hid] }, h0);
    let attrs = RnnAttrs {
        cell: RnnCell::Simple,
        direction: RnnDirection::Forward,
        hidden_size: hid,
        activations: vec![act],
        clip: None,
        batch_major: !time_major,
        linear_before_reset: false,
        input_forget: false,
        cell_clip: None,
    };
    let y = imp.node(Op::Rnn(attrs), vec![Some(x), Some(wv), Some(rv), Some(bv), None, Some(hv)], format!("{base}/rnn"))?;
    let out: Vec<i64> = if time_major { vec![seq as i64, batch as i64, hid as i64] } else { vec![batch as i64, seq as i64, hid as i64] };
    imp.op_with_i64(Op::Reshape { allowzero: false }, y, format!("{base}/shape"), out, base.clone())
}

/// BIDIRECTIONAL_SEQUENCE_LSTM → one bidirectional ONNX-semantics LSTM. Inputs (48): x; forward input weights
/// i, f, c, o (1-4), recurrent weights (5-8), peepholes i, f, o (9-11), biases (12-15), projection (16, 17); the
/// same for backward (18-34); forward output and cell state (35, 36), backward (37, 38); an auxiliary input and
/// its weights (39-47). Outputs: with `merge_outputs`, one `[.., 2H]` sequence (forward then backward on the last
/// axis); else the forward and the backward sequences. Refused by name: CIFG, projection, auxiliary inputs,
/// quantized weights.
fn bidirectional_sequence_lstm(imp: &mut Importer, o: &OpIn) -> Result<Vec<ValueId>> {
    let base = o.base.clone();
    let opt = opts!(imp, o, schema::BidirectionalSequenceLSTMOptions);
    for (k, what) in [(1, "forward input gate (CIFG)"), (5, "forward input gate (CIFG)"), (18, "backward input gate (CIFG)"), (22, "backward input gate (CIFG)")] {
        if o.input(k).is_none() {
            return Err(imp.unsupported(format!("an LSTM without {what}: TFLite couples i = 1 - f, which ONNX's input_forget does not express")));
        }
    }
    for (k, what) in [(16, "projection weights"), (17, "projection bias"), (33, "projection weights"), (34, "projection bias"), (39, "an auxiliary input")] {
        if o.input(k).is_some() {
            return Err(imp.unsupported(format!("an LSTM with {what} (input {k})")));
        }
    }
    let c = opt.cell_clip();
    let cell_clip = if c > 0.0 && c.is_finite() {
        Some(c)
    } else if c == 0.0 {
        None
    } else {
        return Err(imp.invalid(format!("cell_clip {c}")));
    };
    let act = cell_activation(imp, opt.fused_activation_function())?;
    let x = imp.value(imp.req(o, 0)?)?;
    if imp.dtype(x) != DType::F32 {
        return Err(imp.unsupported(format!("a {} bidirectional LSTM (float only)", imp.dtype(x))));
    }
    let time_major = opt.time_major();
    let (seq, batch, input) = sequence_dims(imp, x, time_major)?;
    let rw = imp.declared(imp.req(o, 5)?)?.1;
    if rw.len() != 2 || rw[0] != rw[1] {
        return Err(imp.unsupported(format!("recurrent weights {rw:?} (not [cells, cells]: a projection)")));
    }
    let hid = rw[0];
    check_weight_sizes(hid, input)?;
    // per direction, the first input of each group: input weights, recurrent weights, peepholes, biases
    let groups = [(1, 5, 9, 12), (18, 22, 26, 29)];
    let order = [0, 3, 1, 2]; // TFLite i, f, c, o → ONNX i, o, f, c
    let (mut w, mut r, mut b) = (Vec::new(), Vec::new(), vec![0f32; 2 * 8 * hid]);
    let mut p: Vec<f32> = Vec::new();
    let mut peepholes = Vec::new();
    for (d, &(wi, ri, pi, bi)) in groups.iter().enumerate() {
        for (slot, &g) in order.iter().enumerate() {
            w.extend(weights(imp, o, wi + g, "input weights", hid * input)?);
            r.extend(weights(imp, o, ri + g, "recurrent weights", hid * hid)?);
            let at = d * 8 * hid + slot * hid;
            b[at..at + hid].copy_from_slice(&weights(imp, o, bi + g, "gate bias", hid)?);
        }
        let n = (pi..pi + 3).filter(|&k| o.input(k).is_some()).count();
        peepholes.push(n);
        if n == 3 {
            for k in [pi, pi + 2, pi + 1] {
                p.extend(weights(imp, o, k, "peephole weights", hid)?);
            }
        } else if n != 0 {
            return Err(imp.invalid(format!("has {n} of the 3 peephole weight vectors of a direction")));
        }
    }
    let p = match peepholes[..] {
        [0, 0] => None,
        [3, 3] => Some(p),
        _ => return Err(imp.unsupported("peepholes in one direction only")),
    };
    let state_shape = if time_major { vec![2, batch, hid] } else { vec![batch, 2, hid] };
    let mut h0 = Vec::new();
    let mut c0 = Vec::new();
    for (hk, ck) in [(35, 36), (37, 38)] {
        h0.push(initial_state(imp, o, hk, "output state", state_len(batch, hid, "output state")?)?);
        c0.push(initial_state(imp, o, ck, "cell state", state_len(batch, hid, "cell state")?)?);
    }
    // [2, batch, H] (time-major) or [batch, 2, H]
    let stack = |s: &[Vec<f32>]| -> Vec<f32> {
        if time_major {
            s.concat()
        } else {
            (0..batch).flat_map(|bt| (0..2).flat_map(move |d| s[d][bt * hid..(bt + 1) * hid].to_vec())).collect()
        }
    };
    let (h0, c0) = (stack(&h0), stack(&c0));
    let constant = |imp: &mut Importer, name: &str, shape: Vec<usize>, data: Vec<f32>| imp.g.add_constant(format!("{base}/{name}"), Tensor::from_f32(shape, data));
    let wv = constant(imp, "W", vec![2, 4 * hid, input], w);
    let rv = constant(imp, "R", vec![2, 4 * hid, hid], r);
    let bv = constant(imp, "B", vec![2, 8 * hid], b);
    let pv = p.map(|p| constant(imp, "P", vec![2, 3 * hid], p));
    let hv = constant(imp, "initial_h", state_shape.clone(), h0);
    let cv = constant(imp, "initial_c", state_shape, c0);
    let attrs = RnnAttrs {
        cell: RnnCell::Lstm,
        direction: RnnDirection::Bidirectional,
        hidden_size: hid,
        activations: vec![RnnActivation::Sigmoid, act, act, RnnActivation::Sigmoid, act, act],
        clip: None,
        batch_major: !time_major,
        linear_before_reset: false,
        input_forget: false,
        cell_clip,
    };
    let ins = vec![Some(x), Some(wv), Some(rv), Some(bv), None, Some(hv), Some(cv), pv];
    let y = imp.node(Op::Rnn(attrs), ins, format!("{base}/lstm"))?;
    // Y: [seq, 2, batch, H] (time-major) or [batch, seq, 2, H]; TFLite's outputs have the direction next to H
    let y = if time_major { imp.transpose(y, &[0, 2, 1, 3], format!("{base}/dirs_last"))? } else { y };
    let (a, bsz) = if time_major { (seq, batch) } else { (batch, seq) };
    if opt.merge_outputs() {
        let out = vec![a as i64, bsz as i64, 2 * hid as i64];
        return Ok(vec![imp.op_with_i64(Op::Reshape { allowzero: false }, y, format!("{base}/shape"), out, base.clone())?]);
    }
    let parts = imp.node_n(Op::Split { axis: 2, split: None, num_outputs: 2 }, vec![Some(y)], format!("{base}/directions"), 2)?;
    let mut outs = Vec::new();
    for (d, v) in parts.into_iter().enumerate() {
        let out = vec![a as i64, bsz as i64, hid as i64];
        outs.push(imp.op_with_i64(Op::Reshape { allowzero: false }, v, format!("{base}/shape{d}"), out, format!("{base}/out{d}"))?);
    }
    Ok(outs)
}
