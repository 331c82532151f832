//! LiteRT's integer LSTM ("8x8_16": `UNIDIRECTIONAL_SEQUENCE_LSTM` with int8 input, output and weights and an
//! int16 cell state; `lstm_eval.cc` `EvalInteger8x8_16` with the portable tensor utilities LiteRT's x86-64
//! build calls), bit for bit, for an LSTM without layer normalization, projection, CIFG or peepholes.
//!
//! The quantized [`Op::Rnn`](crate::ir::Op) node: X int8 (per tensor); W `[dirs, 4H, input]` and R
//! `[dirs, 4H, H]` int8 constants, symmetric, per tensor or (one direction) per gate (per axis 1, one scale per
//! gate block); B `[dirs, 8H]` int32 at scale `s_x · s_w` (the input and recurrent halves are added, saturating, as the
//! TFLite export writes one bias per gate); initial_h int8 (its parameters are the output state's; absent: the
//! output's, starting at its zero point); initial_c int16 with a power-of-two scale `2^k` (the cell state's,
//! which LiteRT requires; see `run` for scales outside 2^-15 ..= 2^-9); Y and Y_h int8 with the hidden state's parameters (LiteRT's intermediate 4), Y_c
//! int16 with the cell state's.
//!
//! Per step and gate: `gate = sat16(M_in·(b + Σ w·(x - z_x))) + M_rec·(Σ r·(h - z_h))`, the gate inputs in
//! Q3.12 (LiteRT's fixed intermediate scale without layer normalization); sigmoid / tanh in gemmlowp's 16-bit
//! fixed point into Q0.15; `c = f·c >> 15 + i·g >> (30 + k)` (saturating, then the cell clip);
//! `h = sat8(M_hidden·(o · tanh(c)) + z_h)` with `M_hidden = 2^-30 / s_h`. The multipliers come from
//! f32 products as LiteRT's `Prepare` computes them.

use super::fixedpoint::{i16x, mul_double_round, quantize_multiplier, rounding_divide_by_pot, Multiplier};
use super::{Ctx, PreparedKernel};
use crate::ir::ops::recurrent::{input, rnn_dims, RnnActivation, RnnAttrs, RnnCell, RnnDims};
use crate::ir::{DType, QuantParams, Tensor};
use crate::runtime::kernels::Scratch;

/// ONNX gate blocks.
const I: usize = 0;
const O: usize = 1;
const F: usize = 2;
const C: usize = 3;

/// One direction's prepared weights.
#[derive(Debug)]
struct Direction {
    reversed: bool,
    /// Per gate (ONNX order): `[H, input]` and `[H, H]` rows.
    w: [Vec<i8>; 4],
    r: [Vec<i8>; 4],
    /// Per gate: `b - z_x · Σ w` and `-z_h · Σ r` (LiteRT's effective biases).
    in_bias: [Vec<i32>; 4],
    rec_bias: [Vec<i32>; 4],
    m_in: [Multiplier; 4],
    m_rec: [Multiplier; 4],
    h0: Vec<i8>,
    c0: Vec<i16>,
}

#[derive(Debug)]
struct Lstm {
    d: RnnDims,
    batch_major: bool,
    dirs: Vec<Direction>,
    /// log2 of the cell state's scale.
    cell_exp: i32,
    cell_clip: i16,
    hidden: Multiplier,
    hidden_zp: i32,
}

/// The scale of gate block `g` of a weight with parameters `q` (per tensor, or one per row of axis 1).
fn gate_scale(q: &QuantParams, g: usize, hidden: usize) -> f32 {
    if q.scale.len() == 1 {
        q.scale[0]
    } else {
        q.scale[(g * hidden).min(q.scale.len() - 1)]
    }
}

/// TFLite `CheckedLog2`: the exponent of a power-of-two scale.
fn checked_log2(x: f32) -> Option<i32> {
    let l = x.ln() * (1.0f32 / 2.0f32.ln());
    let r = l.round();
    ((l - r).abs() < 1e-3).then_some(r as i32)
}

pub(crate) fn prepare(cx: &Ctx, a: &RnnAttrs) -> Result<Box<dyn PreparedKernel>, String> {
    if a.cell != RnnCell::Lstm {
        return Err(format!("{} on int8 values is not supported (only LSTM has an integer kernel)", a.cell.onnx_name()));
    }
    let g = cx.g;
    let node = &g.nodes[cx.n];
    let shapes: Vec<Option<&[usize]>> = (0..8).map(|i| node.input(i).map(|v| g.value(v).shape.as_slice())).collect();
    let d = rnn_dims(a, &shapes)?;
    for k in 0..d.dirs {
        if a.activations_of(k) != [RnnActivation::Sigmoid, RnnActivation::Tanh, RnnActivation::Tanh] {
            return Err("the integer LSTM has sigmoid gates and tanh cell activations only".into());
        }
    }
    if a.clip.is_some() || a.input_forget || cx.has_input(input::P) {
        return Err("the integer LSTM has no gate clip, input_forget or peepholes".into());
    }
    if cx.has_input(input::SEQ_LENS) {
        let full = cx.constant(input::SEQ_LENS)?.to_i64_vec().iter().all(|&s| s == d.seq as i64);
        if !full {
            return Err("the integer LSTM runs whole sequences (sequence_lens must be a constant equal to the length)".into());
        }
    }
    let x = cx.qp(input::X, false)?;
    let y = cx.qp(0, true)?;
    let h_state = if cx.has_input(input::INITIAL_H) { cx.qp(input::INITIAL_H, false)? } else { y };
    let cv = cx.input(input::INITIAL_C).map_err(|_| "the integer LSTM needs an int16 initial_c carrying the cell state's scale".to_string())?;
    let cq = cv.quant.as_ref().filter(|_| cv.dtype == DType::I16).ok_or("initial_c must be int16 with quantization parameters")?;
    let cell_exp = checked_log2(cq.scale[0]).ok_or_else(|| format!("the cell state's scale {} is not a power of two", cq.scale[0]))?;
    if !(-30..=1).contains(&cell_exp) {
        return Err(format!("the cell state's scale 2^{cell_exp} is outside 2^-30 ..= 2^1"));
    }
    let weight = |k: usize, what: &str| -> Result<(&[i8], &QuantParams), String> {
        let v = cx.input(k)?;
        let t = cx.constant(k)?;
        let q = v.quant.as_ref().ok_or_else(|| format!("{what} has no quantization parameters"))?;
        if q.scale.len() > 1 && (d.dirs > 1 || q.axis != Some(1)) || q.zero_point.iter().any(|&z| z != 0) {
            return Err(format!("{what} must be symmetric, per tensor or per gate of one direction"));
        }
        Ok((t.view::<i8>().ok_or_else(|| format!("{what} is not int8"))?, q))
    };
    let (w, wq) = weight(input::W, "W")?;
    let (r, rq) = weight(input::R, "R")?;
    let b = if cx.has_input(input::B) { Some(cx.constant(input::B)?.view::<i32>().ok_or("B is not int32")?) } else { None };
    let h0 = if cx.has_input(input::INITIAL_H) { cx.constant(input::INITIAL_H)?.view::<i8>().ok_or("initial_h is not int8")?.to_vec() } else { vec![y.zp as i8; d.dirs * d.batch * d.hidden] };
    let c0 = cx.constant(input::INITIAL_C)?.view::<i16>().ok_or("initial_c is not int16")?.to_vec();
    let (h, n_in) = (d.hidden, d.input);
    // The states are [dirs, batch, H] (or [batch, dirs, H]): one direction's [batch, H].
    let state_of = |s: &[i8], k: usize| -> Vec<i8> { (0..d.batch).flat_map(|bi| s[state_at(a.batch_major, &d, k, bi)..][..h].to_vec()).collect() };
    let cstate_of = |s: &[i16], k: usize| -> Vec<i16> { (0..d.batch).flat_map(|bi| s[state_at(a.batch_major, &d, k, bi)..][..h].to_vec()).collect() };
    let q12 = 2f32.powi(-12);
    let mut dirs = Vec::new();
    for k in 0..d.dirs {
        let gates = |src: &[i8], cols: usize| -> [Vec<i8>; 4] { std::array::from_fn(|gi| src[(k * 4 + gi) * h * cols..][..h * cols].to_vec()) };
        let (wg, rg) = (gates(w, n_in), gates(r, h));
        let in_bias: [Vec<i32>; 4] = std::array::from_fn(|gi| {
            (0..h)
                .map(|row| {
                    let bias = b.map_or(0i32, |b| b[k * 8 * h + gi * h + row].saturating_add(b[k * 8 * h + (4 + gi) * h + row]));
                    let sum: i32 = wg[gi][row * n_in..][..n_in].iter().map(|&v| v as i32).sum();
                    bias.wrapping_add(sum.wrapping_mul(-x.zp))
                })
                .collect()
        });
        let rec_bias: [Vec<i32>; 4] = std::array::from_fn(|gi| (0..h).map(|row| rg[gi][row * h..][..h].iter().map(|&v| v as i32).sum::<i32>().wrapping_mul(-h_state.zp)).collect());
        let m_in = std::array::from_fn(|gi| quantize_multiplier((gate_scale(wq, gi, h) * x.scale / q12) as f64));
        let m_rec = std::array::from_fn(|gi| quantize_multiplier((gate_scale(rq, gi, h) * h_state.scale / q12) as f64));
        dirs.push(Direction { reversed: a.direction.reversed(k), w: wg, r: rg, in_bias, rec_bias, m_in, m_rec, h0: state_of(&h0, k), c0: cstate_of(&c0, k) });
    }
    let cell_clip = match a.cell_clip {
        Some(c) if c > 0.0 => (c / cq.scale[0]).clamp(-32768.0, 32767.0) as i16,
        _ => 0,
    };
    let hidden = quantize_multiplier((2f64.powi(-15) / y.scale as f64 * 2f64.powi(-15)) as f32 as f64);
    Ok(Box::new(Lstm { d, batch_major: a.batch_major, dirs, cell_exp, cell_clip, hidden, hidden_zp: y.zp }))
}

/// Offset of (direction `k`, batch `b`) in a state tensor.
fn state_at(batch_major: bool, d: &RnnDims, k: usize, b: usize) -> usize {
    if batch_major {
        (b * d.dirs + k) * d.hidden
    } else {
        (k * d.batch + b) * d.hidden
    }
}

/// LiteRT `MatrixBatchVectorMultiplyAccumulate` (int8 × int8 → int16): `gate += sat16(M·(bias + W·v))`.
fn gate_product(v: &[i8], w: &[i8], bias: &[i32], m: Multiplier, cols: usize, gate: &mut [i16]) {
    let rows = bias.len();
    for (vb, gb) in v.chunks(cols).zip(gate.chunks_mut(rows)) {
        for (row, g) in gb.iter_mut().enumerate() {
            let mut acc = bias[row];
            for (&a, &b) in vb.iter().zip(&w[row * cols..][..cols]) {
                acc = acc.wrapping_add(a as i32 * b as i32);
            }
            let acc = mul_double_round(acc, m) as i64 + *g as i64;
            *g = acc.clamp(i16::MIN as i64, i16::MAX as i64) as i16;
        }
    }
}

impl Lstm {
    /// One gate of one step: products of the input and the output state, then the activation.
    fn gate(&self, dir: &Direction, gi: usize, x: &[i8], h: &[i8], out: &mut [i16]) {
        out.fill(0);
        gate_product(x, &dir.w[gi], &dir.in_bias[gi], dir.m_in[gi], self.d.input, out);
        gate_product(h, &dir.r[gi], &dir.rec_bias[gi], dir.m_rec[gi], self.d.hidden, out);
        for v in out.iter_mut() {
            *v = if gi == C { i16x::tanh(*v, 3) } else { i16x::logistic(*v, 3) };
        }
    }

    fn x_at(&self, t: usize, b: usize) -> usize {
        let d = &self.d;
        if self.batch_major {
            (b * d.seq + t) * d.input
        } else {
            (t * d.batch + b) * d.input
        }
    }

    fn y_at(&self, t: usize, k: usize, b: usize) -> usize {
        let d = &self.d;
        if self.batch_major {
            ((b * d.seq + t) * d.dirs + k) * d.hidden
        } else {
            ((t * d.dirs + k) * d.batch + b) * d.hidden
        }
    }
}

impl PreparedKernel for Lstm {
    fn run(&self, inputs: &[Option<&Tensor>], outputs: &mut [Tensor], _scratch: &mut Scratch) -> Result<(), String> {
        let x = super::arg(inputs, 0)?.view::<i8>().ok_or("X is not int8")?;
        let d = self.d;
        let (n, hb) = (d.hidden, d.hidden * d.batch);
        let mut y = vec![0i8; d.seq * d.dirs * hb];
        let mut yh = vec![0i8; d.dirs * hb];
        let mut yc = vec![0i16; d.dirs * hb];
        let mut xt = vec![0i8; d.batch * d.input];
        let mut gates: [Vec<i16>; 4] = std::array::from_fn(|_| vec![0i16; hb]);
        let mut tanh_c = vec![0i16; hb];
        for (k, dir) in self.dirs.iter().enumerate() {
            let mut h = dir.h0.clone();
            let mut c = dir.c0.clone();
            for s in 0..d.seq {
                let t = if dir.reversed { d.seq - 1 - s } else { s };
                for b in 0..d.batch {
                    xt[b * d.input..][..d.input].copy_from_slice(&x[self.x_at(t, b)..][..d.input]);
                }
                for gi in [I, F, C] {
                    self.gate(dir, gi, &xt, &h, &mut gates[gi]);
                }
                // UpdateLstmCellInteger
                for j in 0..hb {
                    let fc = rounding_divide_by_pot(gates[F][j] as i32 * c[j] as i32, 15) as i16;
                    let ig = rounding_divide_by_pot(gates[I][j] as i32 * gates[C][j] as i32, 30 + self.cell_exp) as i16;
                    let mut v = (fc as i32 + ig as i32).clamp(i16::MIN as i32, i16::MAX as i32) as i16;
                    if self.cell_clip > 0 {
                        v = v.clamp(-self.cell_clip, self.cell_clip);
                    }
                    c[j] = v;
                }
                self.gate(dir, O, &xt, &h, &mut gates[O]);
                // CalculateLstmOutputInteger8x8_16. LiteRT's ApplyTanh handles 0..=6 integer bits and otherwise
                // returns without writing its output, the input gate's scratch buffer: with a cell scale outside
                // 2^-15 ..= 2^-9 (TF's converter writes 2^-17 for a cell state that stays below 1/4) the hidden
                // state is computed from the input gate instead of tanh(c), and so it is here.
                let bits = 15 + self.cell_exp;
                if (0..=6).contains(&bits) {
                    for (tc, &cv) in tanh_c.iter_mut().zip(&c) {
                        *tc = i16x::tanh(cv, bits);
                    }
                } else {
                    tanh_c.copy_from_slice(&gates[I]);
                }
                for j in 0..hb {
                    let v = mul_double_round(gates[O][j] as i32 * tanh_c[j] as i32, self.hidden) + self.hidden_zp;
                    h[j] = v.clamp(-128, 127) as i8;
                }
                for b in 0..d.batch {
                    let at = self.y_at(t, k, b);
                    y[at..at + n].copy_from_slice(&h[b * n..][..n]);
                }
            }
            for b in 0..d.batch {
                let at = state_at(self.batch_major, &d, k, b);
                yh[at..at + n].copy_from_slice(&h[b * n..][..n]);
                yc[at..at + n].copy_from_slice(&c[b * n..][..n]);
            }
        }
        let y_shape = d.y_shape(self.batch_major);
        let s_shape = d.state_shape(self.batch_major);
        if let Some(o) = outputs.get_mut(0) {
            *o = Tensor::from_vec(y_shape, y).expect("Y size");
        }
        if let Some(o) = outputs.get_mut(1) {
            *o = Tensor::from_vec(s_shape.clone(), yh).expect("Y_h size");
        }
        if let Some(o) = outputs.get_mut(2) {
            *o = Tensor::from_vec(s_shape, yc).expect("Y_c size");
        }
        Ok(())
    }
}
