//! The recurrent layers LSTM, GRU and RNN (ONNX semantics, opsets 7-22): their attributes, arity and shape
//! rule, and the dimension plan ([`RnnDims`]) that the CPU kernel and the StableHLO lowering compute from.
//!
//! Inputs (ONNX order): X, W, R, B?, sequence_lens?, initial_h?, initial_c? (LSTM), P? (LSTM peepholes).
//! Outputs: Y?, Y_h?, Y_c? (LSTM). With `layout` 0 X is `[seq, batch, input]`, Y `[seq, dirs, batch, hidden]`
//! and the states `[dirs, batch, hidden]`; with `layout` 1 (`batch_major`) X is `[batch, seq, input]`, Y
//! `[batch, seq, dirs, hidden]` and the states `[batch, dirs, hidden]`.

use super::{info, Arity, InferError, Inferred, TypeInfo};
use crate::ir::DType;

/// Which recurrent cell.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RnnCell {
    /// LSTM: gates i, o, f, c (ONNX order), cell state, optional peepholes.
    Lstm,
    /// GRU: gates z, r, h.
    Gru,
    /// Elman RNN: one gate.
    Simple,
}

impl RnnCell {
    /// Number of gates (rows of W per direction are `gates · hidden`).
    pub fn gates(self) -> usize {
        match self {
            RnnCell::Lstm => 4,
            RnnCell::Gru => 3,
            RnnCell::Simple => 1,
        }
    }
    /// Number of activation functions per direction (f, g, h for LSTM; f, g for GRU; f for RNN).
    pub fn activations(self) -> usize {
        match self {
            RnnCell::Lstm => 3,
            RnnCell::Gru => 2,
            RnnCell::Simple => 1,
        }
    }
    /// The ONNX op type.
    pub fn onnx_name(self) -> &'static str {
        match self {
            RnnCell::Lstm => "LSTM",
            RnnCell::Gru => "GRU",
            RnnCell::Simple => "RNN",
        }
    }
    /// The activations ONNX uses when the attribute is absent (one direction).
    pub fn default_activations(self) -> &'static [RnnActivation] {
        match self {
            RnnCell::Lstm => &[RnnActivation::Sigmoid, RnnActivation::Tanh, RnnActivation::Tanh],
            RnnCell::Gru => &[RnnActivation::Sigmoid, RnnActivation::Tanh],
            RnnCell::Simple => &[RnnActivation::Tanh],
        }
    }
}

/// Direction(s) the sequence is processed in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RnnDirection {
    /// t = 0 .. seq
    Forward,
    /// t = seq - 1 .. 0
    Reverse,
    /// both, forward first
    Bidirectional,
}

impl RnnDirection {
    /// Number of directions (1 or 2).
    pub fn count(self) -> usize {
        if self == RnnDirection::Bidirectional {
            2
        } else {
            1
        }
    }
    /// Whether direction `d` (0 or 1) runs backwards in time.
    pub fn reversed(self, d: usize) -> bool {
        match self {
            RnnDirection::Forward => false,
            RnnDirection::Reverse => true,
            RnnDirection::Bidirectional => d == 1,
        }
    }
}

/// An activation function of a recurrent cell (ONNX's list, with its alpha/beta).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum RnnActivation {
    /// max(0, x)
    Relu,
    /// tanh(x)
    Tanh,
    /// 1 / (1 + e^-x)
    Sigmoid,
    /// alpha · x + beta
    Affine {
        /// slope
        alpha: f32,
        /// offset
        beta: f32,
    },
    /// x if x >= 0 else alpha · x
    LeakyRelu {
        /// negative slope
        alpha: f32,
    },
    /// x if x > alpha else 0
    ThresholdedRelu {
        /// threshold
        alpha: f32,
    },
    /// alpha · tanh(beta · x)
    ScaledTanh {
        /// output scale
        alpha: f32,
        /// input scale
        beta: f32,
    },
    /// max(0, min(1, alpha · x + beta))
    HardSigmoid {
        /// slope
        alpha: f32,
        /// offset
        beta: f32,
    },
    /// x if x >= 0 else alpha · (e^x - 1)
    Elu {
        /// negative scale
        alpha: f32,
    },
    /// x / (1 + |x|)
    Softsign,
    /// ln(1 + e^x)
    Softplus,
}

impl RnnActivation {
    /// The activation called `name` (case-insensitive, as onnxruntime reads it), taking its alpha and beta
    /// from the fronts of `alphas` and `betas` when it has them (defaults otherwise); `None` for an unknown
    /// name.
    pub fn parse(name: &str, alphas: &mut impl Iterator<Item = f32>, betas: &mut impl Iterator<Item = f32>) -> Option<RnnActivation> {
        use RnnActivation::*;
        let mut a = |d: f32| alphas.next().unwrap_or(d);
        Some(match name.to_ascii_lowercase().as_str() {
            "relu" => Relu,
            "tanh" => Tanh,
            "sigmoid" => Sigmoid,
            "affine" => {
                let alpha = a(1.0);
                Affine { alpha, beta: betas.next().unwrap_or(0.0) }
            }
            "leakyrelu" => LeakyRelu { alpha: a(0.01) },
            "thresholdedrelu" => ThresholdedRelu { alpha: a(1.0) },
            "scaledtanh" => {
                let alpha = a(1.0);
                ScaledTanh { alpha, beta: betas.next().unwrap_or(1.0) }
            }
            "hardsigmoid" => {
                let alpha = a(0.2);
                HardSigmoid { alpha, beta: betas.next().unwrap_or(0.5) }
            }
            "elu" => Elu { alpha: a(1.0) },
            "softsign" => Softsign,
            "softplus" => Softplus,
            _ => return None,
        })
    }
}

/// Attributes of an LSTM / GRU / RNN layer.
#[derive(Clone, Debug, PartialEq)]
pub struct RnnAttrs {
    /// Which cell.
    pub cell: RnnCell,
    /// Direction(s).
    pub direction: RnnDirection,
    /// Hidden size.
    pub hidden_size: usize,
    /// Activations, `cell.activations()` per direction, forward direction first (its length is
    /// `cell.activations() · direction.count()`).
    pub activations: Vec<RnnActivation>,
    /// Clip threshold applied to the gate pre-activations (the inputs of the activations).
    pub clip: Option<f32>,
    /// ONNX `layout` = 1: batch-major X, Y and states.
    pub batch_major: bool,
    /// GRU: apply the recurrent weights of the h gate before multiplying by r.
    pub linear_before_reset: bool,
    /// LSTM: couple the input and forget gates (f = 1 - i).
    pub input_forget: bool,
    /// LSTM: clamp the cell state to ±this after each update (TFLite's `cell_clip`; ONNX has none).
    pub cell_clip: Option<f32>,
}

impl RnnAttrs {
    /// The activations of direction `d`.
    pub fn activations_of(&self, d: usize) -> &[RnnActivation] {
        let k = self.cell.activations();
        &self.activations[d * k..(d + 1) * k]
    }
}

/// The sizes of a recurrent layer, checked against its inputs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RnnDims {
    /// Sequence length.
    pub seq: usize,
    /// Batch size.
    pub batch: usize,
    /// Input size.
    pub input: usize,
    /// Hidden size.
    pub hidden: usize,
    /// Number of directions.
    pub dirs: usize,
    /// Number of gates.
    pub gates: usize,
}

/// Input indices.
pub mod input {
    /// X
    pub const X: usize = 0;
    /// W
    pub const W: usize = 1;
    /// R
    pub const R: usize = 2;
    /// B
    pub const B: usize = 3;
    /// sequence_lens
    pub const SEQ_LENS: usize = 4;
    /// initial_h
    pub const INITIAL_H: usize = 5;
    /// initial_c
    pub const INITIAL_C: usize = 6;
    /// P
    pub const P: usize = 7;
}

/// Checks the shapes of a recurrent layer's inputs (`shapes[i]` is input i's shape, `None` when absent) and
/// returns its sizes. Messages name the input and the expected shape.
pub fn rnn_dims(a: &RnnAttrs, shapes: &[Option<&[usize]>]) -> Result<RnnDims, String> {
    let name = a.cell.onnx_name();
    let get = |i: usize| shapes.get(i).copied().flatten();
    let x = get(input::X).ok_or_else(|| format!("{name} needs input X"))?;
    if x.len() != 3 {
        return Err(format!("{name} input X must be 3-D ([seq, batch, input] or, with layout 1, [batch, seq, input]), it has shape {x:?}"));
    }
    let (seq, batch) = if a.batch_major { (x[1], x[0]) } else { (x[0], x[1]) };
    let (input, hidden, dirs, gates) = (x[2], a.hidden_size, a.direction.count(), a.cell.gates());
    if a.activations.len() != a.cell.activations() * dirs {
        return Err(format!("{name} has {} activations, {} expected ({} per direction)", a.activations.len(), a.cell.activations() * dirs, a.cell.activations()));
    }
    let expect = |i: usize, what: &str, want: &[usize], required: bool| -> Result<(), String> {
        match get(i) {
            Some(s) if s == want => Ok(()),
            Some(s) => Err(format!(
                "{name} input {what} has shape {s:?}, expected {want:?} (directions {dirs}, hidden_size {hidden}, input size {input}, batch {batch})"
            )),
            None if required => Err(format!("{name} needs input {what}")),
            None => Ok(()),
        }
    };
    expect(input::W, "W", &[dirs, gates * hidden, input], true)?;
    expect(input::R, "R", &[dirs, gates * hidden, hidden], true)?;
    expect(input::B, "B", &[dirs, 2 * gates * hidden], false)?;
    expect(input::SEQ_LENS, "sequence_lens", &[batch], false)?;
    let state: &[usize] = if a.batch_major { &[batch, dirs, hidden] } else { &[dirs, batch, hidden] };
    expect(input::INITIAL_H, "initial_h", state, false)?;
    if a.cell == RnnCell::Lstm {
        expect(input::INITIAL_C, "initial_c", state, false)?;
        expect(input::P, "P", &[dirs, 3 * hidden], false)?;
    } else if get(input::INITIAL_C).is_some() || get(input::P).is_some() {
        return Err(format!("{name} takes at most 6 inputs"));
    }
    Ok(RnnDims { seq, batch, input, hidden, dirs, gates })
}

impl RnnDims {
    /// Shape of Y.
    pub fn y_shape(&self, batch_major: bool) -> Vec<usize> {
        if batch_major {
            vec![self.batch, self.seq, self.dirs, self.hidden]
        } else {
            vec![self.seq, self.dirs, self.batch, self.hidden]
        }
    }
    /// Shape of Y_h and Y_c.
    pub fn state_shape(&self, batch_major: bool) -> Vec<usize> {
        if batch_major {
            vec![self.batch, self.dirs, self.hidden]
        } else {
            vec![self.dirs, self.batch, self.hidden]
        }
    }
}

/// Shape rule: Y, Y_h and (LSTM) Y_c.
pub fn infer_rnn(a: &RnnAttrs, inputs: &[Option<TypeInfo>]) -> Result<Inferred, InferError> {
    let name = a.cell.onnx_name();
    let x = info(inputs, input::X)?;
    if !x.dtype.is_float() {
        return Err(InferError::Invalid(format!("{name} takes float tensors, not {}", x.dtype)));
    }
    for (i, t) in inputs.iter().enumerate().skip(1) {
        if let Some(t) = t {
            let want_int = i == input::SEQ_LENS;
            if want_int && t.dtype != DType::I32 && t.dtype != DType::I64 {
                return Err(InferError::Invalid(format!("{name} input sequence_lens must be int32, not {}", t.dtype)));
            }
            if !want_int && t.dtype != x.dtype {
                return Err(InferError::Invalid(format!("{name} input {i} is {}, X is {}", t.dtype, x.dtype)));
            }
        }
    }
    let shapes: Vec<Option<&[usize]>> = inputs.iter().map(|t| t.map(|t| t.shape)).collect();
    let d = rnn_dims(a, &shapes)?;
    let mut out = vec![(x.dtype, d.y_shape(a.batch_major)), (x.dtype, d.state_shape(a.batch_major))];
    if a.cell == RnnCell::Lstm {
        out.push((x.dtype, d.state_shape(a.batch_major)));
    }
    Ok(out)
}

/// Arity: X, W, R, B?, sequence_lens?, initial_h?, initial_c?, P? (the last two LSTM only); Y?, Y_h?, Y_c?.
pub fn arity(a: &RnnAttrs) -> Arity {
    match a.cell {
        RnnCell::Lstm => (3, 8, 1, 3),
        RnnCell::Gru | RnnCell::Simple => (3, 6, 1, 2),
    }
}
