//! Recurrent layers: LSTM, GRU and RNN (every attribute of opsets 1-22) → [`Op::Rnn`].

use super::{choice, trimmed, MapFn};
use crate::import::onnx::graph::{Cx, NodeIn};
use crate::ir::ops::recurrent::{input as ix, RnnActivation, RnnAttrs, RnnCell, RnnDirection};
use crate::ir::Op;
use crate::Result;

/// The ops of this family.
pub(super) const OPS: &[(&str, MapFn)] = &[
    ("GRU", |cx, n| recurrent(cx, n, RnnCell::Gru)),
    ("LSTM", |cx, n| recurrent(cx, n, RnnCell::Lstm)),
    ("RNN", |cx, n| recurrent(cx, n, RnnCell::Simple)),
];

fn recurrent(cx: &mut Cx, n: &NodeIn, cell: RnnCell) -> Result<()> {
    let a = &n.attrs;
    // Opset 1 (LSTM/GRU/RNN) and 3 (GRU): Y was optional through this flag; computing it anyway is harmless.
    a.ignore(&["output_sequence"]);
    let direction = choice(
        n,
        "direction",
        "forward",
        &[("forward", RnnDirection::Forward), ("reverse", RnnDirection::Reverse), ("bidirectional", RnnDirection::Bidirectional)],
    )?;
    let dirs = direction.count();
    let r = n.req(ix::R)?;
    let r_hidden = cx.shape(r).filter(|s| s.len() == 3).map(|s| s[2]);
    let hidden_size = match (a.int("hidden_size")?, r_hidden) {
        (Some(h), Some(rh)) if h != rh as i64 => {
            return Err(a.invalid("hidden_size", format!("is {h}, but R has shape {:?} (hidden size {rh})", cx.shape(r).unwrap_or(&[]))))
        }
        (Some(h), _) if h <= 0 => return Err(a.invalid("hidden_size", format!("must be positive, found {h}"))),
        (Some(h), _) => h as usize,
        (None, Some(rh)) => rh,
        (None, None) => return Err(n.invalid("attribute 'hidden_size' is absent and R's shape is not known")),
    };
    let per_dir = cell.activations();
    let mut alphas = a.floats("activation_alpha")?.unwrap_or_default().into_iter();
    let mut betas = a.floats("activation_beta")?.unwrap_or_default().into_iter();
    let activations = match a.strings("activations")? {
        None => cell.default_activations().repeat(dirs),
        Some(names) => {
            let mut acts = Vec::with_capacity(names.len());
            for name in &names {
                let f = RnnActivation::parse(name, &mut alphas, &mut betas).ok_or_else(|| {
                    a.unsupported(
                        "activations",
                        format!(
                            "names '{name}', which is not a recurrent activation (Relu, Tanh, Sigmoid, Affine, LeakyRelu, ThresholdedRelu, \
                             ScaledTanh, HardSigmoid, Elu, Softsign, Softplus)"
                        ),
                    )
                })?;
                acts.push(f);
            }
            if acts.len() != per_dir * dirs {
                return Err(a.invalid(
                    "activations",
                    format!("has {} entries; {} {} takes {per_dir} per direction ({} in all)", acts.len(), direction_name(direction), cell.onnx_name(), per_dir * dirs),
                ));
            }
            acts
        }
    };
    let clip = match a.float("clip")? {
        Some(c) if c.is_nan() || c <= 0.0 => return Err(a.invalid("clip", format!("must be positive, found {c}"))),
        c => c,
    };
    let batch_major = match a.int_or("layout", 0)? {
        0 => false,
        1 => true,
        l => return Err(a.invalid("layout", format!("must be 0 or 1, found {l}"))),
    };
    let linear_before_reset = if cell == RnnCell::Gru { a.bool_or("linear_before_reset", false)? } else { false };
    let input_forget = if cell == RnnCell::Lstm { a.bool_or("input_forget", false)? } else { false };
    let attrs = RnnAttrs { cell, direction, hidden_size, activations, clip, batch_major, linear_before_reset, input_forget, cell_clip: None };
    let max_in = if cell == RnnCell::Lstm { 8 } else { 6 };
    if n.inputs.len() > max_in {
        return Err(n.invalid(format!("has {} inputs, {} takes at most {max_in}", n.inputs.len(), cell.onnx_name())));
    }
    let outs = n.outs(1, if cell == RnnCell::Lstm { 3 } else { 2 })?;
    cx.emit(n.name.clone(), Op::Rnn(attrs), trimmed(&n.inputs), outs)
}

fn direction_name(d: RnnDirection) -> &'static str {
    match d {
        RnnDirection::Forward => "a forward",
        RnnDirection::Reverse => "a reverse",
        RnnDirection::Bidirectional => "a bidirectional",
    }
}
