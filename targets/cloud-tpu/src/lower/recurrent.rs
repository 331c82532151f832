//! LSTM, GRU and RNN.
//!
//! The input projection of the whole sequence is one `dot_general` per direction (X·Wᵀ + biases); then the
//! time steps: each a `dot_general` with R and the gate math, on static shapes.
//!
//! Sequences longer than [`UNROLL_MAX_STEPS`] run as a `stablehlo.while` over the time steps (the step reads its
//! row of the projection with `dynamic_slice` and writes its Y row with `dynamic_update_slice`); shorter ones are
//! unrolled. Chosen by measuring compile + run on the XLA CPU plugin for the 2-layer bidirectional LSTM of
//! bench/rnn_vs_onnxruntime.py (hidden 512, seq 100, batch 1; `tpu-sdk bench --target cloud-tpu`, shared 2-core
//! machine): unrolled, the 400 step bodies took 27.8 s to load, lower and compile, and ran in 78 ms (median);
//! as a while loop, 2.1 s in all and 101 ms per run. JAX's own forms of the same model agree
//! (bench/rnn_while_vs_unroll.py: `lax.scan` 1.6 s compile / 63 ms run, Python-unrolled 46 s / 49 ms). The
//! unrolled program only pays off after about a thousand runs, and its compile time grows with the length, so
//! the loop is the default; a few steps unroll (cheap to compile, and XLA fuses across them).
//!
//! `sequence_lens` (any value, run time): steps past a batch entry's length keep its state and write zero Y
//! rows (a select per step), and an entry of length 0 ends with zero states (as onnxruntime); a reverse direction reads its entry's steps `len - 1 .. 0`, which a one-hot
//! `dot_general` permutation of the projection (and back, for Y) expresses exactly.

use tpu_sdk_core::ir::ops::recurrent::{input as ix, rnn_dims, RnnActivation, RnnAttrs, RnnCell};
use tpu_sdk_core::ir::{DType, Node};

use super::emit::{Cx, V};
use crate::error::Result;

/// Sequences up to this long are unrolled, longer ones loop (see the module comment).
const UNROLL_MAX_STEPS: usize = 8;

/// `f(x)` for a recurrent activation.
fn activation(cx: &mut Cx, f: RnnActivation, x: &V) -> V {
    match f {
        RnnActivation::Relu => cx.relu(x),
        RnnActivation::Tanh => cx.unary("tanh", x),
        RnnActivation::Sigmoid => cx.unary("logistic", x),
        RnnActivation::Affine { alpha, beta } => {
            let m = cx.binary_scalar("multiply", x, alpha as f64);
            cx.binary_scalar("add", &m, beta as f64)
        }
        RnnActivation::LeakyRelu { alpha } => {
            let zero = cx.splat_like(0.0, x);
            let pos = cx.compare("GE", x, &zero);
            let neg = cx.binary_scalar("multiply", x, alpha as f64);
            cx.select(&pos, x, &neg)
        }
        RnnActivation::ThresholdedRelu { alpha } => {
            let th = cx.splat_like(alpha as f64, x);
            let above = cx.compare("GT", x, &th);
            let zero = cx.splat_like(0.0, x);
            cx.select(&above, x, &zero)
        }
        RnnActivation::ScaledTanh { alpha, beta } => {
            let s = cx.binary_scalar("multiply", x, beta as f64);
            let t = cx.unary("tanh", &s);
            cx.binary_scalar("multiply", &t, alpha as f64)
        }
        RnnActivation::HardSigmoid { alpha, beta } => {
            let m = cx.binary_scalar("multiply", x, alpha as f64);
            let a = cx.binary_scalar("add", &m, beta as f64);
            cx.clamp(&a, 0.0, 1.0)
        }
        RnnActivation::Elu { alpha } => {
            let zero = cx.splat_like(0.0, x);
            let pos = cx.compare("GE", x, &zero);
            let e = cx.unary("exponential_minus_one", x);
            let neg = cx.binary_scalar("multiply", &e, alpha as f64);
            cx.select(&pos, x, &neg)
        }
        RnnActivation::Softsign => {
            let a = cx.unary("abs", x);
            let d = cx.binary_scalar("add", &a, 1.0);
            cx.div(x, &d)
        }
        RnnActivation::Softplus => {
            let a = cx.unary("abs", x);
            let na = cx.unary("negate", &a);
            let e = cx.unary("exponential", &na);
            let l = cx.unary("log_plus_one", &e);
            let m = cx.relu(x);
            cx.add(&m, &l)
        }
    }
}

/// `f(clip(x))`.
fn gate(cx: &mut Cx, f: RnnActivation, clip: Option<f32>, x: &V) -> V {
    let x = match clip {
        Some(c) => cx.clamp(x, -(c as f64), c as f64),
        None => x.clone(),
    };
    activation(cx, f, &x)
}

/// Row `i` (of `n`) of a `[n, ...]` value, without the leading dim.
fn row(cx: &mut Cx, v: &V, i: usize) -> V {
    let s = cx.slice_axis(v, 0, i, i + 1);
    let shape = v.shape[1..].to_vec();
    cx.reshape(&s, &shape)
}

/// Columns `[from, to)` of a 2-D value.
fn cols(cx: &mut Cx, v: &V, from: usize, to: usize) -> V {
    cx.slice_axis(v, 1, from, to)
}

/// The weights one time step reads: R of the direction `[gates·hidden, hidden]`, the peepholes i, o, f and
/// GRU's Rbh (with `linear_before_reset`), each broadcast to `[batch, hidden]`.
struct StepWeights {
    rd: V,
    peep: Option<[V; 3]>,
    rbh: Option<V>,
}

/// One time step of a cell from its input projection `xp` `[batch, gates·hidden]` and the states: the new h and
/// (LSTM) c.
fn step(cx: &mut Cx, a: &RnnAttrs, acts: &[RnnActivation], xp: &V, h: &V, c: &V, wts: &StepWeights) -> (V, Option<V>) {
    let hid = a.hidden_size;
    let gh = a.cell.gates() * hid;
    let (rd, peep, rbh) = (&wts.rd, &wts.peep, &wts.rbh);
    match a.cell {
        RnnCell::Simple => {
            let rec = cx.dot_general(h, rd, (&[], &[]), (&[1], &[1]));
            let g = cx.add(xp, &rec);
            (gate(cx, acts[0], a.clip, &g), None)
        }
        RnnCell::Gru => {
            let xz = cols(cx, xp, 0, hid);
            let xr = cols(cx, xp, hid, 2 * hid);
            let xh = cols(cx, xp, 2 * hid, gh);
            let rzr = cx.slice_axis(rd, 0, 0, 2 * hid);
            let rh = cx.slice_axis(rd, 0, 2 * hid, gh);
            let rec = cx.dot_general(h, &rzr, (&[], &[]), (&[1], &[1]));
            let recz = cols(cx, &rec, 0, hid);
            let recr = cols(cx, &rec, hid, 2 * hid);
            let gz = cx.add(&xz, &recz);
            let z = gate(cx, acts[0], a.clip, &gz);
            let gr = cx.add(&xr, &recr);
            let rg = gate(cx, acts[0], a.clip, &gr);
            let hh_in = if a.linear_before_reset {
                let mut rech = cx.dot_general(h, &rh, (&[], &[]), (&[1], &[1]));
                if let Some(rbh) = rbh {
                    rech = cx.add(&rech, rbh);
                }
                let m = cx.mul(&rg, &rech);
                cx.add(&xh, &m)
            } else {
                let rhh = cx.mul(&rg, h);
                let rech = cx.dot_general(&rhh, &rh, (&[], &[]), (&[1], &[1]));
                cx.add(&xh, &rech)
            };
            let hh = gate(cx, acts[1], a.clip, &hh_in);
            // (1 - z) ⊙ h~ + z ⊙ h = h~ + z ⊙ (h - h~)
            let one = cx.splat_like(1.0, &z);
            let omz = cx.sub(&one, &z);
            let l = cx.mul(&omz, &hh);
            let rgt = cx.mul(&z, h);
            (cx.add(&l, &rgt), None)
        }
        RnnCell::Lstm => {
            let rec = cx.dot_general(h, rd, (&[], &[]), (&[1], &[1]));
            let g = cx.add(xp, &rec);
            let mut gi = cols(cx, &g, 0, hid);
            let mut go = cols(cx, &g, hid, 2 * hid);
            let mut gf = cols(cx, &g, 2 * hid, 3 * hid);
            let gc = cols(cx, &g, 3 * hid, gh);
            if let Some([pi, _, pf]) = peep {
                let a1 = cx.mul(pi, c);
                gi = cx.add(&gi, &a1);
                let a2 = cx.mul(pf, c);
                gf = cx.add(&gf, &a2);
            }
            let i = gate(cx, acts[0], a.clip, &gi);
            let f = if a.input_forget {
                let one = cx.splat_like(1.0, &i);
                cx.sub(&one, &i)
            } else {
                gate(cx, acts[0], a.clip, &gf)
            };
            let cc = gate(cx, acts[1], a.clip, &gc);
            let fc = cx.mul(&f, c);
            let ic = cx.mul(&i, &cc);
            let mut c_new = cx.add(&fc, &ic);
            if let Some(cc) = a.cell_clip {
                c_new = cx.clamp(&c_new, -(cc as f64), cc as f64);
            }
            if let Some([_, po, _]) = peep {
                let a3 = cx.mul(po, &c_new);
                go = cx.add(&go, &a3);
            }
            let o = gate(cx, acts[0], a.clip, &go);
            let hc = activation(cx, acts[2], &c_new);
            (cx.mul(&o, &hc), Some(c_new))
        }
    }
}

/// Lowers an LSTM / GRU / RNN node: Y, Y_h and (LSTM) Y_c, as many as the node has outputs.
pub(super) fn rnn(cx: &mut Cx, node: &Node, a: &RnnAttrs) -> Result<Vec<V>> {
    let shapes: Vec<Option<&[usize]>> = (0..node.inputs.len()).map(|i| node.input(i).map(|v| &cx.g.value(v).shape[..])).collect();
    let d = rnn_dims(a, &shapes).map_err(|m| cx.unsupported(node, m))?;
    let x = cx.input(node, ix::X)?;
    let dt = x.dtype;
    if !dt.is_float() {
        return Err(cx.unsupported(node, format!("{} takes float tensors, not {dt}", a.cell.onnx_name())));
    }
    let (seq, batch, hid, gh) = (d.seq, d.batch, d.hidden, d.gates * d.hidden);
    let x = if a.batch_major { cx.transpose(&x, &[1, 0, 2]) } else { x };
    let w = cx.input(node, ix::W)?;
    let r = cx.input(node, ix::R)?;
    let b = cx.opt_input(node, ix::B)?;
    let h0 = cx.opt_input(node, ix::INITIAL_H)?;
    let c0 = if a.cell == RnnCell::Lstm { cx.opt_input(node, ix::INITIAL_C)? } else { None };
    let p = if a.cell == RnnCell::Lstm { cx.opt_input(node, ix::P)? } else { None };
    // sequence_lens, unless it is a constant holding the full length everywhere.
    let full = cx.const_input(node, ix::SEQ_LENS).is_some_and(|t| t.to_i64_vec().iter().all(|&l| l == seq as i64));
    let lens = match cx.opt_input(node, ix::SEQ_LENS)? {
        Some(l) if !full => Some(cx.convert(&l, DType::I32)),
        _ => None,
    };
    let bh = [batch, hid];
    // Per step: the mask of the batch entries still running, broadcast to [batch, hidden].
    let lens_bh = lens.as_ref().map(|l| cx.broadcast_in_dim(l, &[0], &bh));
    // For a reverse direction with lengths: onehot[b, s, t] = (t == (s < len_b ? len_b - 1 - s : s)).
    let perm = match &lens {
        Some(l) if (0..d.dirs).any(|di| a.direction.reversed(di)) => {
            let s = cx.iota(1, DType::I32, &[batch, seq]);
            let lb = cx.broadcast_in_dim(l, &[0], &[batch, seq]);
            let inside = cx.compare("LT", &s, &lb);
            let last = cx.binary_scalar("subtract", &lb, 1.0);
            let back = cx.sub(&last, &s);
            let idx = cx.select(&inside, &back, &s);
            let idx3 = cx.broadcast_in_dim(&idx, &[0, 1], &[batch, seq, seq]);
            let t = cx.iota(2, DType::I32, &[batch, seq, seq]);
            let eq = cx.compare("EQ", &t, &idx3);
            let one = cx.splat(1.0, dt, &[batch, seq, seq]);
            let zero = cx.splat(0.0, dt, &[batch, seq, seq]);
            Some(cx.select(&eq, &one, &zero))
        }
        _ => None,
    };
    // [t, b, n] reordered per batch entry by the permutation (an involution, so it also undoes itself).
    let permute = |cx: &mut Cx, onehot: &V, v: &V| -> V {
        let bt = cx.dot_general(onehot, v, (&[0], &[1]), (&[2], &[0]));
        cx.transpose(&bt, &[1, 0, 2])
    };
    let state0 = |cx: &mut Cx, s: &Option<V>, di: usize| -> V {
        match s {
            Some(s) => {
                let axis = if a.batch_major { 1 } else { 0 };
                let sl = cx.slice_axis(s, axis, di, di + 1);
                cx.reshape(&sl, &bh)
            }
            None => cx.splat(0.0, dt, &bh),
        }
    };
    let mut ys = Vec::new();
    let mut hs = Vec::new();
    let mut cs = Vec::new();
    for di in 0..d.dirs {
        let acts = a.activations_of(di).to_vec();
        let reversed = a.direction.reversed(di);
        let wd = row(cx, &w, di);
        let rd = row(cx, &r, di);
        let mut proj = cx.dot_general(&x, &wd, (&[], &[]), (&[2], &[1]));
        // Biases: Wb + Rb, except GRU linear_before_reset's Rbh, which goes inside the reset product.
        let mut rbh = None;
        if let Some(b) = &b {
            let bd = row(cx, b, di);
            let wb = cx.slice_axis(&bd, 0, 0, gh);
            let rb = cx.slice_axis(&bd, 0, gh, 2 * gh);
            let bias = if a.cell == RnnCell::Gru && a.linear_before_reset {
                let rzr = cx.slice_axis(&rb, 0, 0, 2 * hid);
                let zeros = cx.splat(0.0, dt, &[hid]);
                let rb2 = cx.concat(&[rzr, zeros], 0);
                let rh = cx.slice_axis(&rb, 0, 2 * hid, gh);
                rbh = Some(cx.broadcast_in_dim(&rh, &[1], &bh));
                cx.add(&wb, &rb2)
            } else {
                cx.add(&wb, &rb)
            };
            let bias = cx.broadcast_in_dim(&bias, &[2], &[seq, batch, gh]);
            proj = cx.add(&proj, &bias);
        }
        let permuted = reversed && perm.is_some();
        if let (true, Some(onehot)) = (permuted, &perm) {
            proj = permute(cx, onehot, &proj);
        }
        let peep: Option<[V; 3]> = match &p {
            Some(p) => {
                let pd = row(cx, p, di);
                let mut g = |k: usize| {
                    let s = cx.slice_axis(&pd, 0, k * hid, (k + 1) * hid);
                    cx.broadcast_in_dim(&s, &[1], &bh)
                };
                Some([g(0), g(1), g(2)])
            }
            None => None,
        };
        let wts = StepWeights { rd, peep, rbh };
        let mut h = state0(cx, &h0, di);
        let mut c = state0(cx, &c0, di);
        let zero_bh = cx.splat(0.0, dt, &bh);
        // Without lengths a reverse direction simply walks t downwards; with them the projection was permuted.
        let walk_down = reversed && !permuted;
        let mut y = if seq <= UNROLL_MAX_STEPS {
            let mut y_steps: Vec<Option<V>> = vec![None; seq];
            for s in 0..seq {
                let t = if walk_down { seq - 1 - s } else { s };
                let xp = row(cx, &proj, t);
                let (h_new, c_new) = step(cx, a, &acts, &xp, &h, &c, &wts);
                match &lens_bh {
                    Some(lb) => {
                        let step = cx.splat(s as f64, DType::I32, &bh);
                        let running = cx.compare("LT", &step, lb);
                        h = cx.select(&running, &h_new, &h);
                        if let Some(cn) = c_new {
                            c = cx.select(&running, &cn, &c);
                        }
                        y_steps[t] = Some(cx.select(&running, &h_new, &zero_bh));
                    }
                    None => {
                        h = h_new;
                        if let Some(cn) = c_new {
                            c = cn;
                        }
                        y_steps[t] = Some(h.clone());
                    }
                }
            }
            let rows: Vec<V> = y_steps.into_iter().flatten().map(|v| cx.reshape(&v, &[1, batch, hid])).collect();
            if rows.is_empty() {
                cx.splat(0.0, dt, &[0, batch, hid])
            } else {
                cx.concat(&rows, 0)
            }
        } else {
            // Carried: h, c, Y, the projection, R, then the optional peepholes, Rbh and lengths (no implicit
            // captures in the loop body).
            let y0 = cx.splat(0.0, dt, &[seq, batch, hid]);
            let mut carried = vec![h.clone(), c.clone(), y0, proj.clone(), wts.rd.clone()];
            carried.extend(wts.peep.iter().flatten().cloned());
            carried.extend(wts.rbh.iter().cloned());
            carried.extend(lens_bh.iter().cloned());
            let (has_peep, has_rbh) = (wts.peep.is_some(), wts.rbh.is_some());
            let out = cx.counted_loop(seq, &carried, |cx, i, v| {
                let (h, c, y, proj) = (&v[0], &v[1], &v[2], &v[3]);
                let mut k = 5;
                let peep = has_peep.then(|| {
                    k += 3;
                    [v[k - 3].clone(), v[k - 2].clone(), v[k - 1].clone()]
                });
                let rbh = has_rbh.then(|| {
                    k += 1;
                    v[k - 1].clone()
                });
                let lb = v.get(k);
                let w = StepWeights { rd: v[4].clone(), peep, rbh };
                let t = if walk_down {
                    let last = cx.scalar((seq - 1) as f64, DType::I32);
                    cx.sub(&last, i)
                } else {
                    i.clone()
                };
                let zero = cx.scalar(0.0, DType::I32);
                let xp = cx.dynamic_slice(proj, &[t.clone(), zero.clone(), zero.clone()], &[1, batch, gh]);
                let xp = cx.reshape(&xp, &[batch, gh]);
                let (h_new, c_new) = step(cx, a, &acts, &xp, h, c, &w);
                let c_new = c_new.unwrap_or_else(|| c.clone());
                let (h_next, c_next, y_t) = match lb {
                    Some(lb) => {
                        let s = cx.broadcast_in_dim(i, &[], &bh);
                        let running = cx.compare("LT", &s, lb);
                        let zero_bh = cx.splat(0.0, dt, &bh);
                        let y_t = cx.select(&running, &h_new, &zero_bh);
                        (cx.select(&running, &h_new, h), cx.select(&running, &c_new, c), y_t)
                    }
                    None => (h_new.clone(), c_new, h_new),
                };
                let y_t = cx.reshape(&y_t, &[1, batch, hid]);
                let y_next = cx.dynamic_update_slice(y, &y_t, &[t, zero.clone(), zero]);
                let mut next = vec![h_next, c_next, y_next];
                next.extend_from_slice(&v[3..]);
                next
            });
            h = out[0].clone();
            c = out[1].clone();
            out[2].clone()
        };
        if let (true, Some(onehot)) = (permuted, &perm) {
            y = permute(cx, onehot, &y);
        }
        if let Some(lb) = &lens_bh {
            // An entry of length 0 ends with zero states, as in onnxruntime (and the CPU runtime).
            let zero = cx.splat(0.0, DType::I32, &bh);
            let ran = cx.compare("GT", lb, &zero);
            h = cx.select(&ran, &h, &zero_bh);
            c = cx.select(&ran, &c, &zero_bh);
        }
        ys.push(cx.reshape(&y, &[seq, 1, batch, hid]));
        hs.push(cx.reshape(&h, &[1, batch, hid]));
        cs.push(cx.reshape(&c, &[1, batch, hid]));
    }
    let y = cx.concat(&ys, 1);
    let yh = cx.concat(&hs, 0);
    let yc = cx.concat(&cs, 0);
    let mut outs = if a.batch_major {
        vec![cx.transpose(&y, &[2, 0, 1, 3]), cx.transpose(&yh, &[1, 0, 2]), cx.transpose(&yc, &[1, 0, 2])]
    } else {
        vec![y, yh, yc]
    };
    outs.truncate(node.outputs.len());
    Ok(outs)
}
