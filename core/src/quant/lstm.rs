//! Int8 quantization of LSTMs as LiteRT's integer "8x8_16" LSTM (see `runtime::kernels::int8::recurrent`):
//! int8 input and output (the hidden state's parameters, shared by Y and Y_h, calibrated like any
//! activation), int8 weights W and R symmetric per tensor, one int32 bias per gate at `s_x · s_w` (ONNX's input
//! and recurrent biases summed), and an int16 cell state whose power-of-two scale covers the largest |c| the
//! float LSTM reaches on the calibration samples (TF's `GetPowerOfTwoScale`, at most 2^6 as LiteRT's tanh
//! allows). The cell range is not a graph value, so calibration replays each LSTM's float recurrence on the
//! input it observed ([`cell_absmax`]). The gate pre-activations need no calibration: without layer
//! normalization LiteRT fixes them at Q3.12.

use crate::ir::ops::recurrent::{input, rnn_dims, RnnActivation, RnnAttrs, RnnCell};
use crate::ir::{DType, Graph, Node, QuantParams, Tensor};
use crate::{Error, Result};

use super::calibrate::Calibration;
use super::params::{quantize_one, symmetric_scale};

/// Why node `n` (an LSTM, GRU or RNN) has no integer form, if it has none.
pub(super) fn refusal(g: &Graph, n: &Node, a: &RnnAttrs) -> Option<String> {
    if a.cell != RnnCell::Lstm {
        return Some(format!(
            "{} (a recurrent layer) has no int8 kernel (only LSTM quantizes) and is not supported on edgetpu: run the model with --target cpu or --target cloud-tpu",
            a.cell.onnx_name()
        ));
    }
    let konst = |i: usize| n.input(i).is_none_or(|v| g.value(v).constant.is_some());
    if !(konst(input::W) && konst(input::R) && konst(input::B) && n.input(input::W).is_some() && n.input(input::R).is_some()) {
        return Some("the LSTM's weights and bias must be constants".into());
    }
    let dirs = a.direction.count();
    if (0..dirs).any(|d| a.activations_of(d) != [RnnActivation::Sigmoid, RnnActivation::Tanh, RnnActivation::Tanh]) {
        return Some("the integer LSTM has sigmoid gates and tanh cell activations only".into());
    }
    if a.clip.is_some() || a.input_forget || n.input(input::P).is_some() {
        return Some("the integer LSTM has no gate clip, input_forget or peepholes".into());
    }
    for i in [input::INITIAL_H, input::INITIAL_C] {
        if let Some(v) = n.input(i) {
            let zero = g.value(v).constant.as_ref().is_some_and(|c| c.to_f64_vec().iter().all(|&x| x == 0.0));
            if !zero {
                return Some(format!("initial state '{}' is not a constant zero state", g.value(v).name));
            }
        }
    }
    if let Some(l) = n.input(input::SEQ_LENS) {
        let seq = g.value(n.inputs[0].expect("X")).shape[if a.batch_major { 1 } else { 0 }] as i64;
        if !g.value(l).constant.as_ref().is_some_and(|c| c.to_i64_vec().iter().all(|&s| s == seq)) {
            return Some("sequence_lens must be a constant equal to the sequence length".into());
        }
    }
    None
}

fn sigmoid(x: f32) -> f32 {
    1.0 / (1.0 + (-x).exp())
}

/// The largest |cell state| an LSTM (default activations, zero initial states) reaches on input `x`, by its
/// float recurrence.
pub(super) fn cell_absmax(g: &Graph, n: &Node, a: &RnnAttrs, x: &Tensor) -> Result<f32> {
    let shapes: Vec<Option<&[usize]>> = (0..8).map(|i| n.input(i).map(|v| g.value(v).shape.as_slice())).collect();
    let d = rnn_dims(a, &shapes).map_err(Error::InvalidModel)?;
    let f32s = |i: usize| -> Option<Vec<f32>> { n.input(i).and_then(|v| g.value(v).constant.as_ref()).map(|c| c.to_f64_vec().iter().map(|&v| v as f32).collect()) };
    let (Some(w), Some(r)) = (f32s(input::W), f32s(input::R)) else { return Err(Error::InvalidModel("LSTM weights are not constant".into())) };
    let b = f32s(input::B).unwrap_or_else(|| vec![0.0; d.dirs * 8 * d.hidden]);
    let xs: Vec<f32> = x.to_f64_vec().iter().map(|&v| v as f32).collect();
    let (h, ni) = (d.hidden, d.input);
    let mut absmax = 0.0f32;
    for k in 0..d.dirs {
        for bi in 0..d.batch {
            let (mut hs, mut cs) = (vec![0f32; h], vec![0f32; h]);
            for s in 0..d.seq {
                let t = if a.direction.reversed(k) { d.seq - 1 - s } else { s };
                let at = if a.batch_major { (bi * d.seq + t) * ni } else { (t * d.batch + bi) * ni };
                let xt = &xs[at..at + ni];
                // gates i, o, f, c (ONNX order)
                let pre = |gi: usize, j: usize| -> f32 {
                    let row = (k * 4 + gi) * h + j;
                    let wx: f32 = w[row * ni..][..ni].iter().zip(xt).map(|(a, b)| a * b).sum();
                    let rh: f32 = r[row * h..][..h].iter().zip(&hs).map(|(a, b)| a * b).sum();
                    wx + rh + b[k * 8 * h + gi * h + j] + b[k * 8 * h + (4 + gi) * h + j]
                };
                let gates: Vec<[f32; 4]> = (0..h).map(|j| [sigmoid(pre(0, j)), sigmoid(pre(1, j)), sigmoid(pre(2, j)), pre(3, j).tanh()]).collect();
                for (j, [i, o, f, c]) in gates.into_iter().enumerate() {
                    let mut cv = f * cs[j] + i * c;
                    if let Some(clip) = a.cell_clip {
                        cv = cv.clamp(-clip, clip);
                    }
                    cs[j] = cv;
                    hs[j] = o * cv.tanh();
                    absmax = absmax.max(cv.abs());
                }
            }
        }
    }
    Ok(absmax)
}

/// The power-of-two scale of a cell state reaching `absmax` (TF's `GetPowerOfTwoScale`: the smallest
/// `2^p ≥ absmax`, `p` in 0..=6 here as LiteRT's integer tanh takes at most 6 integer bits), as `2^p / 2^15`.
pub fn cell_scale(absmax: f32) -> f32 {
    let mut p = 0;
    while p < 6 && 2f32.powi(p) < absmax {
        p += 1;
    }
    2f32.powi(p - 15)
}

/// Quantizes LSTM node `k` of `q` (a copy of `g` whose activations already have their parameters): int8
/// weights, int32 biases, an int16 zero initial cell state carrying the cell scale, Y_c int16.
pub(super) fn quantize_weights(g: &Graph, q: &mut Graph, k: usize, n: &Node, a: &RnnAttrs, cal: &Calibration) -> Result<()> {
    let x = n.input(input::X).expect("verified");
    let s_x = q.value(x).quant.as_ref().expect("quantized input").scale[0];
    let y = n.outputs[0];
    let yq = q.value(y).quant.clone().expect("quantized output");
    let weights = |i: usize, q: &mut Graph| -> (crate::ir::ValueId, f32) {
        let v = n.input(i).expect("verified");
        let c = g.value(v).constant.as_ref().expect("verified");
        let f: Vec<f32> = c.to_f64_vec().iter().map(|&v| v as f32).collect();
        let s = symmetric_scale(f.iter().fold(0.0f32, |m, x| m.max(x.abs())));
        let data: Vec<i8> = f.iter().map(|&v| quantize_one(v, s, 0, -127)).collect();
        let id = q.add_constant(format!("{}/quantized_for_{}", g.value(v).name, n.name), Tensor::from_vec(c.shape.clone(), data).expect("same length"));
        q.value_mut(id).quant = Some(QuantParams { scale: vec![s], zero_point: vec![0], axis: None });
        (id, s)
    };
    let (w, s_w) = weights(input::W, q);
    let (r, _) = weights(input::R, q);
    q.nodes[k].inputs[input::W] = Some(w);
    q.nodes[k].inputs[input::R] = Some(r);
    let (dirs, hidden) = (g.value(n.input(input::W).expect("W")).shape[0], g.value(n.input(input::R).expect("R")).shape[2]);
    // One bias per gate at s_x · s_w: the input and recurrent halves summed into the first.
    let s_b = s_x * s_w;
    let fb: Vec<f64> = n.input(input::B).and_then(|v| g.value(v).constant.as_ref()).map(|c| c.to_f64_vec()).unwrap_or_else(|| vec![0.0; dirs * 8 * hidden]);
    let mut bias = vec![0i32; dirs * 8 * hidden];
    for d in 0..dirs {
        for j in 0..4 * hidden {
            let v = fb[d * 8 * hidden + j] + fb[d * 8 * hidden + 4 * hidden + j];
            bias[d * 8 * hidden + j] = (v / s_b as f64).round().clamp(i32::MIN as f64, i32::MAX as f64) as i32;
        }
    }
    let b = q.add_constant(format!("{}/bias", n.name), Tensor::from_vec(vec![dirs, 8 * hidden], bias).expect("bias size"));
    q.value_mut(b).quant = Some(QuantParams { scale: vec![s_b], zero_point: vec![0], axis: None });
    set_input(q, k, input::B, b);
    // The states: initial_h at the output's zero point, initial_c int16 zeros with the cell scale.
    let xs = &g.value(x).shape;
    let state_shape = if a.batch_major { vec![xs[0], dirs, hidden] } else { vec![dirs, xs[1], hidden] };
    let numel: usize = state_shape.iter().product();
    if n.input(input::INITIAL_H).is_some() {
        let h0 = q.add_constant(format!("{}/initial_h", n.name), Tensor::from_vec(state_shape.clone(), vec![yq.zero_point[0] as i8; numel]).expect("state size"));
        q.value_mut(h0).quant = Some(yq.clone());
        set_input(q, k, input::INITIAL_H, h0);
    }
    let absmax = cal.cell_absmax.get(&y).copied().unwrap_or(0.0);
    let cq = QuantParams { scale: vec![cell_scale(absmax)], zero_point: vec![0], axis: None };
    let c0 = q.add_constant(format!("{}/initial_c", n.name), Tensor::from_vec(state_shape, vec![0i16; numel]).expect("state size"));
    q.value_mut(c0).quant = Some(cq.clone());
    set_input(q, k, input::INITIAL_C, c0);
    if let Some(&yc) = n.outputs.get(2) {
        let v = q.value_mut(yc);
        v.dtype = DType::I16;
        v.quant = Some(cq);
    }
    Ok(())
}

fn set_input(q: &mut Graph, k: usize, i: usize, v: crate::ir::ValueId) {
    let ins = &mut q.nodes[k].inputs;
    if ins.len() <= i {
        ins.resize(i + 1, None);
    }
    ins[i] = Some(v);
}

#[cfg(test)]
mod tests {
    use super::cell_scale;

    #[test]
    fn the_cell_scale_is_the_smallest_power_of_two_range_covering_the_cell_state() {
        assert_eq!(cell_scale(0.0), 2f32.powi(-15));
        assert_eq!(cell_scale(0.2), 2f32.powi(-15));
        assert_eq!(cell_scale(1.0), 2f32.powi(-15));
        assert_eq!(cell_scale(1.5), 2f32.powi(-14));
        assert_eq!(cell_scale(10.0), 2f32.powi(-11));
        // LiteRT's integer tanh takes at most 6 integer bits: larger cell states saturate.
        assert_eq!(cell_scale(1000.0), 2f32.powi(-9));
    }
}
