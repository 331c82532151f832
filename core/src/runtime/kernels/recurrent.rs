//! LSTM, GRU and RNN: fused cells.
//!
//! One GEMM computes the input projection of the whole sequence for every direction (X·Wᵀ + the biases
//! that do not depend on the state), through the blocked parallel driver of [`super::matmul`]. Then each
//! direction steps through time: one recurrent product H·Rᵀ per step (dot products against R's rows for small
//! batches, a GEMM block otherwise; GRU without `linear_before_reset` needs a second, smaller one for its h
//! gate), followed by the gate math over whole rows. The two directions of a bidirectional layer run on
//! two threads of the team ([`crate::runtime::spin_pool::join`]).
//!
//! `sequence_lens`: batch entry b runs `len_b` steps (a reverse direction starts at `len_b - 1`); its Y rows
//! at t >= `len_b` are zero and its Y_h / Y_c hold the state after its last step (zero when `len_b` is 0,
//! as in onnxruntime). `clip` bounds the gate pre-activations (the inputs of f and g), as onnxruntime does.

use std::borrow::Cow;
use std::marker::PhantomData;

use super::input;
use super::matmul::{from_f32, threads, to_f32, Batched, BlockOut, MatRef};
use super::numeric::Real;
use crate::ir::ops::recurrent::{input as ix, rnn_dims, RnnActivation, RnnAttrs, RnnCell, RnnDims};
use crate::ir::{DType, Tensor};

/// The float types the cells compute in, with their recurrent matrix-vector product.
pub(super) trait RnnReal: Real + Send + Sync {
    /// `y[j] = Σ_k h[k] · r[j·h.len() + k]` for `j < y.len()`.
    fn dot_rows(h: &[Self], r: &[Self], y: &mut [Self]) {
        dot_rows_generic(h, r, y)
    }
}

impl RnnReal for f64 {}

impl RnnReal for f32 {
    fn dot_rows(h: &[f32], r: &[f32], y: &mut [f32]) {
        #[cfg(target_arch = "x86_64")]
        {
            if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma") {
                // SAFETY: the CPU has AVX2 and FMA (checked above).
                unsafe { dot_rows_avx2(h, r, y) };
                return;
            }
        }
        dot_rows_generic(h, r, y)
    }
}

fn dot_rows_generic<T: Real>(h: &[T], r: &[T], y: &mut [T]) {
    let k = h.len();
    for (j, o) in y.iter_mut().enumerate() {
        *o = super::matmul::dot8(h, &r[j * k..(j + 1) * k]);
    }
}

/// [`dot_rows_generic`] with AVX2/FMA: four 8-lane accumulators per row.
///
/// # Safety
/// The CPU must support AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn dot_rows_avx2(h: &[f32], r: &[f32], y: &mut [f32]) {
    use std::arch::x86_64::*;
    let k = h.len();
    let k32 = k / 32 * 32;
    assert!(r.len() >= y.len() * k, "recurrent weights shorter than their shape");
    for (j, o) in y.iter_mut().enumerate() {
        let row = &r[j * k..(j + 1) * k];
        // SAFETY: every load reads 8 floats at p + i with i + 8 <= k32 <= k, inside `h` and `row`.
        unsafe {
            let (hp, rp) = (h.as_ptr(), row.as_ptr());
            let mut a0 = _mm256_setzero_ps();
            let mut a1 = _mm256_setzero_ps();
            let mut a2 = _mm256_setzero_ps();
            let mut a3 = _mm256_setzero_ps();
            let mut i = 0;
            while i < k32 {
                a0 = _mm256_fmadd_ps(_mm256_loadu_ps(hp.add(i)), _mm256_loadu_ps(rp.add(i)), a0);
                a1 = _mm256_fmadd_ps(_mm256_loadu_ps(hp.add(i + 8)), _mm256_loadu_ps(rp.add(i + 8)), a1);
                a2 = _mm256_fmadd_ps(_mm256_loadu_ps(hp.add(i + 16)), _mm256_loadu_ps(rp.add(i + 16)), a2);
                a3 = _mm256_fmadd_ps(_mm256_loadu_ps(hp.add(i + 24)), _mm256_loadu_ps(rp.add(i + 24)), a3);
                i += 32;
            }
            let s = _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3));
            let lo = _mm256_castps256_ps128(s);
            let hi = _mm256_extractf128_ps(s, 1);
            let q = _mm_add_ps(lo, hi);
            let q = _mm_add_ps(q, _mm_movehl_ps(q, q));
            let q = _mm_add_ss(q, _mm_shuffle_ps(q, q, 1));
            let mut sum = _mm_cvtss_f32(q);
            for t in k32..k {
                sum += h[t] * row[t];
            }
            *o = sum;
        }
    }
}

/// Applies `f` to every element of `xs`, after clipping to ±`clip`.
fn activate<T: Real>(f: RnnActivation, clip: Option<T>, xs: &mut [T]) {
    if let Some(c) = clip {
        xs.iter_mut().for_each(|v| *v = v.max_min(-c, c));
    }
    let (zero, one) = (T::ZERO, T::ONE);
    macro_rules! each {
        ($g:expr) => {
            xs.iter_mut().for_each(|v| *v = $g(*v))
        };
    }
    match f {
        RnnActivation::Relu => each!(|x: T| x.relu()),
        RnnActivation::Tanh => each!(|x: T| x.tanh()),
        RnnActivation::Sigmoid => each!(|x: T| one / (one + (-x).exp())),
        RnnActivation::Affine { alpha, beta } => {
            let (a, b) = (T::from_f32(alpha), T::from_f32(beta));
            each!(|x: T| a * x + b)
        }
        RnnActivation::LeakyRelu { alpha } => {
            let a = T::from_f32(alpha);
            each!(|x: T| if x >= zero { x } else { a * x })
        }
        RnnActivation::ThresholdedRelu { alpha } => {
            let a = T::from_f32(alpha);
            each!(|x: T| if x > a { x } else { zero })
        }
        RnnActivation::ScaledTanh { alpha, beta } => {
            let (a, b) = (T::from_f32(alpha), T::from_f32(beta));
            each!(|x: T| a * (b * x).tanh())
        }
        RnnActivation::HardSigmoid { alpha, beta } => {
            let (a, b) = (T::from_f32(alpha), T::from_f32(beta));
            each!(|x: T| (a * x + b).max_min(zero, one))
        }
        RnnActivation::Elu { alpha } => {
            let a = T::from_f32(alpha);
            each!(|x: T| if x >= zero { x } else { a * x.exp_m1() })
        }
        RnnActivation::Softsign => each!(|x: T| x / (one + x.abs())),
        RnnActivation::Softplus => each!(|x: T| x.max_(zero) + (-x.abs()).exp().ln_1p()),
    }
}

/// The inputs of one layer as slices of the compute type.
struct Args<'a, T> {
    x: &'a [T],
    w: &'a [T],
    r: &'a [T],
    b: Option<&'a [T]>,
    h0: Option<&'a [T]>,
    c0: Option<&'a [T]>,
    p: Option<&'a [T]>,
}

/// What one direction produces: Y rows `[seq, batch, hidden]`, the final h and c `[batch, hidden]`.
struct DirOut<T> {
    y: Vec<T>,
    h: Vec<T>,
    c: Vec<T>,
}

/// Runs an LSTM / GRU / RNN layer.
pub(super) fn rnn(a: &RnnAttrs, inputs: &[Option<&Tensor>], outputs: &mut [Tensor]) -> Result<(), String> {
    let name = a.cell.onnx_name();
    let shapes: Vec<Option<&[usize]>> = inputs.iter().map(|t| t.map(|t| &t.shape[..])).collect();
    let d = rnn_dims(a, &shapes)?;
    let x = input(inputs, ix::X)?;
    let dtype = x.dtype();
    for (i, t) in inputs.iter().enumerate() {
        if let Some(t) = t {
            if i != ix::SEQ_LENS && t.dtype() != dtype {
                return Err(format!("{name} input {i} is {}, X is {dtype}", t.dtype()));
            }
        }
    }
    let lens = match inputs.get(ix::SEQ_LENS).copied().flatten() {
        None => vec![d.seq; d.batch],
        Some(t) if matches!(t.dtype(), DType::I32 | DType::I64) => {
            let v = t.to_i64_vec();
            if let Some(bad) = v.iter().find(|&&l| l < 0 || l as usize > d.seq) {
                return Err(format!("{name} sequence_lens holds {bad}, outside [0, {}]", d.seq));
            }
            v.into_iter().map(|l| l as usize).collect()
        }
        Some(t) => return Err(format!("{name} sequence_lens must be int32, not {}", t.dtype())),
    };
    if outputs.is_empty() || outputs.len() > if a.cell == RnnCell::Lstm { 3 } else { 2 } {
        return Err(format!("{name} has {} outputs", outputs.len()));
    }
    let opt = |i: usize| inputs.get(i).copied().flatten();
    match dtype {
        DType::F32 | DType::F16 | DType::BF16 => {
            // f32 inputs are read in place; f16/bf16 ones are widened.
            fn conv(t: Option<&Tensor>) -> Result<Option<Cow<'_, [f32]>>, String> {
                t.map(|t| match t.view::<f32>() {
                    Some(v) => Ok(Cow::Borrowed(v)),
                    None => to_f32(t).map(Cow::Owned),
                })
                .transpose()
            }
            let bufs = [conv(Some(x))?, conv(opt(ix::W))?, conv(opt(ix::R))?, conv(opt(ix::B))?, conv(opt(ix::INITIAL_H))?, conv(opt(ix::INITIAL_C))?, conv(opt(ix::P))?];
            let [xv, w, r, b, h0, c0, p] = bufs;
            let args = Args {
                x: xv.as_deref().unwrap_or(&[]),
                w: w.as_deref().unwrap_or(&[]),
                r: r.as_deref().unwrap_or(&[]),
                b: b.as_deref(),
                h0: h0.as_deref(),
                c0: c0.as_deref(),
                p: p.as_deref(),
            };
            let dirs = run::<f32>(a, &d, &args, &lens);
            write_outputs(a, &d, &dirs, outputs, |v, shape, out| {
                if dtype == DType::F32 {
                    out.reset::<f32>(shape).copy_from_slice(v);
                } else {
                    from_f32(v, dtype, shape, out);
                }
            });
            Ok(())
        }
        DType::F64 => {
            fn v(t: Option<&Tensor>) -> Result<Option<&[f64]>, String> {
                t.map(|t| t.view::<f64>().ok_or_else(|| "f64".to_string())).transpose()
            }
            let args = Args {
                x: v(Some(x))?.unwrap_or(&[]),
                w: v(opt(ix::W))?.unwrap_or(&[]),
                r: v(opt(ix::R))?.unwrap_or(&[]),
                b: v(opt(ix::B))?,
                h0: v(opt(ix::INITIAL_H))?,
                c0: v(opt(ix::INITIAL_C))?,
                p: v(opt(ix::P))?,
            };
            let dirs = run::<f64>(a, &d, &args, &lens);
            write_outputs(a, &d, &dirs, outputs, |v, shape, out| out.reset::<f64>(shape).copy_from_slice(v));
            Ok(())
        }
        other => Err(format!("{name} does not support {other}")),
    }
}

/// Scatters the directions' results into Y, Y_h, Y_c in the layer's layout.
fn write_outputs<T: Copy + Default>(a: &RnnAttrs, d: &RnnDims, dirs: &[DirOut<T>], outputs: &mut [Tensor], mut put: impl FnMut(&[T], &[usize], &mut Tensor)) {
    let (seq, batch, hid, nd) = (d.seq, d.batch, d.hidden, d.dirs);
    let mut buf = vec![T::default(); seq * nd * batch * hid];
    for (di, o) in dirs.iter().enumerate() {
        for t in 0..seq {
            for b in 0..batch {
                let dst = if a.batch_major { ((b * seq + t) * nd + di) * hid } else { ((t * nd + di) * batch + b) * hid };
                buf[dst..dst + hid].copy_from_slice(&o.y[(t * batch + b) * hid..][..hid]);
            }
        }
    }
    put(&buf, &d.y_shape(a.batch_major), &mut outputs[0]);
    let state = |pick: fn(&DirOut<T>) -> &[T]| -> Vec<T> {
        let mut s = vec![T::default(); nd * batch * hid];
        for (di, o) in dirs.iter().enumerate() {
            for b in 0..batch {
                let dst = if a.batch_major { (b * nd + di) * hid } else { (di * batch + b) * hid };
                s[dst..dst + hid].copy_from_slice(&pick(o)[b * hid..][..hid]);
            }
        }
        s
    };
    if outputs.len() > 1 {
        put(&state(|o| &o.h), &d.state_shape(a.batch_major), &mut outputs[1]);
    }
    if outputs.len() > 2 {
        put(&state(|o| &o.c), &d.state_shape(a.batch_major), &mut outputs[2]);
    }
}

/// Computes every direction.
fn run<T: RnnReal>(a: &RnnAttrs, d: &RnnDims, args: &Args<T>, lens: &[usize]) -> Vec<DirOut<T>> {
    let proj = project(a, d, args);
    let per_dir = d.seq * d.batch * d.gates * d.hidden;
    let one = |di: usize| direction(a, d, args, lens, di, &proj[di * per_dir..(di + 1) * per_dir]);
    if d.dirs == 2 && threads() > 1 {
        let (f, b) = crate::runtime::spin_pool::join(|| one(0), || one(1));
        vec![f, b]
    } else {
        (0..d.dirs).map(one).collect()
    }
}

/// The input projection of all time steps and directions, `[dirs, seq, batch, gates·hidden]` (rows in
/// time-major order whatever the layout): X·Wᵀ plus Wb + Rb (GRU with `linear_before_reset`: Wb only for
/// the h gate, whose Rb is added inside the reset product).
fn project<T: RnnReal>(a: &RnnAttrs, d: &RnnDims, args: &Args<T>) -> Vec<T> {
    let (gh, rows, k) = (d.gates * d.hidden, d.seq * d.batch, d.input);
    // X rows in time-major order: a batch-major X is reordered once.
    let reordered;
    let x: &[T] = if a.batch_major && d.batch > 1 && d.seq > 1 {
        let mut v = vec![T::ZERO; rows * k];
        for t in 0..d.seq {
            for b in 0..d.batch {
                v[(t * d.batch + b) * k..][..k].copy_from_slice(&args.x[(b * d.seq + t) * k..][..k]);
            }
        }
        reordered = v;
        &reordered
    } else {
        args.x
    };
    let mut bias = vec![T::ZERO; d.dirs * gh];
    if let Some(b) = args.b {
        for di in 0..d.dirs {
            let (wb, rb) = (&b[di * 2 * gh..][..gh], &b[di * 2 * gh + gh..][..gh]);
            for j in 0..gh {
                let in_h_gate = a.cell == RnnCell::Gru && j >= 2 * d.hidden;
                bias[di * gh + j] = if in_h_gate && a.linear_before_reset { wb[j] } else { wb[j] + rb[j] };
            }
        }
    }
    let mut out = vec![T::ZERO; d.dirs * rows * gh];
    let w = args.w;
    let g = Batched {
        batches: d.dirs,
        m: rows,
        n: gh,
        k,
        alpha: T::ONE,
        a: |_| MatRef::rows(x, 0, k),
        b: |bi| MatRef { data: w, off: bi * gh * k, rs: 1, cs: k },
        _p: PhantomData,
    };
    // Shapes were checked by rnn_dims, so the operands fit.
    let _ = g.run(&mut out, |bi, _i, j0, row| {
        for (v, &b) in row.iter_mut().zip(&bias[bi * gh + j0..]) {
            *v = *v + b;
        }
    });
    out
}

/// `rec[b] = h[b] · Rᵀ` over `rows` rows of R starting at `r`, for every batch row.
fn recurrent_product<T: RnnReal>(h: &[T], r: &[T], rows: usize, hidden: usize, batch: usize, rec: &mut [T]) {
    if batch < 4 {
        for b in 0..batch {
            T::dot_rows(&h[b * hidden..(b + 1) * hidden], r, &mut rec[b * rows..(b + 1) * rows]);
        }
    } else {
        let out = BlockOut::new(rec);
        let a = MatRef::rows(h, 0, hidden);
        let bm = MatRef { data: r, off: 0, rs: 1, cs: hidden };
        // SAFETY: `out` wraps `rec`, which nothing else touches during the call.
        unsafe { out.gemm_block(batch, rows, hidden, T::ONE, a, bm, 0, rows, false, |_, _| {}) };
    }
}

/// Steps one direction through the sequence.
fn direction<T: RnnReal>(a: &RnnAttrs, d: &RnnDims, args: &Args<T>, lens: &[usize], di: usize, proj: &[T]) -> DirOut<T> {
    let (hid, batch, seq) = (d.hidden, d.batch, d.seq);
    let gh = d.gates * hid;
    let reversed = a.direction.reversed(di);
    let acts = a.activations_of(di);
    let clip = a.clip.map(T::from_f32);
    let cell_clip = a.cell_clip.map(T::from_f32);
    // Initial states in [batch, hidden] for this direction.
    let state0 = |s: Option<&[T]>| -> Vec<T> {
        let mut v = vec![T::ZERO; batch * hid];
        if let Some(s) = s {
            for b in 0..batch {
                let src = if a.batch_major { (b * d.dirs + di) * hid } else { (di * batch + b) * hid };
                v[b * hid..][..hid].copy_from_slice(&s[src..][..hid]);
            }
        }
        v
    };
    let mut h = state0(args.h0);
    let mut c = if a.cell == RnnCell::Lstm { state0(args.c0) } else { Vec::new() };
    let mut y = vec![T::ZERO; seq * batch * hid];
    let r = &args.r[di * gh * hid..(di + 1) * gh * hid];
    let rb = args.b.map(|b| &b[di * 2 * gh + gh..][..gh]);
    let p = args.p.map(|p| &p[di * 3 * hid..][..3 * hid]);
    let mut rec = vec![T::ZERO; batch * gh];
    let mut gates = vec![T::ZERO; gh];
    let mut tmp = vec![T::ZERO; batch * hid];
    let max_len = lens.iter().copied().max().unwrap_or(0);
    for s in 0..max_len {
        // The recurrent product over all gates (GRU without linear_before_reset: z and r only).
        let rec_rows = if a.cell == RnnCell::Gru && !a.linear_before_reset { 2 * hid } else { gh };
        recurrent_product(&h, &r[..rec_rows * hid], rec_rows, hid, batch, &mut rec[..batch * rec_rows]);
        if a.cell == RnnCell::Gru && !a.linear_before_reset {
            // (r ⊙ h) · Rhᵀ needs r first: compute z and r for every batch row, then the second product.
            for b in 0..batch {
                if s >= lens[b] {
                    continue;
                }
                let t = if reversed { lens[b] - 1 - s } else { s };
                let pr = &proj[(t * batch + b) * gh..][..gh];
                let g = &mut gates[..2 * hid];
                for j in 0..2 * hid {
                    g[j] = pr[j] + rec[b * 2 * hid + j];
                }
                activate(acts[0], clip, g);
                // tmp[b] = r ⊙ h[b]; keep z in the z slot of rec for the update below.
                for j in 0..hid {
                    tmp[b * hid + j] = g[hid + j] * h[b * hid + j];
                    rec[b * 2 * hid + j] = g[j];
                }
            }
            let mut rec2 = vec![T::ZERO; batch * hid];
            recurrent_product(&tmp, &r[2 * hid * hid..3 * hid * hid], hid, hid, batch, &mut rec2);
            for b in 0..batch {
                if s >= lens[b] {
                    continue;
                }
                let t = if reversed { lens[b] - 1 - s } else { s };
                let pr = &proj[(t * batch + b) * gh + 2 * hid..][..hid];
                let hh = &mut gates[..hid];
                for j in 0..hid {
                    hh[j] = pr[j] + rec2[b * hid + j];
                }
                activate(acts[1], clip, hh);
                let hb = &mut h[b * hid..(b + 1) * hid];
                for j in 0..hid {
                    let z = rec[b * 2 * hid + j];
                    hb[j] = (T::ONE - z) * hh[j] + z * hb[j];
                }
                y[(t * batch + b) * hid..][..hid].copy_from_slice(hb);
            }
            continue;
        }
        for b in 0..batch {
            if s >= lens[b] {
                continue;
            }
            let t = if reversed { lens[b] - 1 - s } else { s };
            let pr = &proj[(t * batch + b) * gh..][..gh];
            let rc = &rec[b * gh..(b + 1) * gh];
            let g = &mut gates[..];
            for j in 0..gh {
                g[j] = pr[j] + rc[j];
            }
            let hb = &mut h[b * hid..(b + 1) * hid];
            match a.cell {
                RnnCell::Simple => {
                    activate(acts[0], clip, g);
                    hb.copy_from_slice(g);
                }
                RnnCell::Gru => {
                    // linear_before_reset: h~ = g(xWh + Wbh + r ⊙ (h·Rhᵀ + Rbh)).
                    let (zr, hg) = g.split_at_mut(2 * hid);
                    activate(acts[0], clip, zr);
                    let (pr_h, rc_h) = (&pr[2 * hid..], &rc[2 * hid..]);
                    for j in 0..hid {
                        let rbh = rb.map_or(T::ZERO, |rb| rb[2 * hid + j]);
                        hg[j] = pr_h[j] + zr[hid + j] * (rc_h[j] + rbh);
                    }
                    activate(acts[1], clip, hg);
                    for j in 0..hid {
                        let z = zr[j];
                        hb[j] = (T::ONE - z) * hg[j] + z * hb[j];
                    }
                }
                RnnCell::Lstm => {
                    // Gate blocks in ONNX order: i, o, f, c; peepholes: i, o, f.
                    let cb = &mut c[b * hid..(b + 1) * hid];
                    let (gi, rest) = g.split_at_mut(hid);
                    let (go, rest) = rest.split_at_mut(hid);
                    let (gf, gc) = rest.split_at_mut(hid);
                    if let Some(p) = p {
                        for j in 0..hid {
                            gi[j] = gi[j] + p[j] * cb[j];
                            gf[j] = gf[j] + p[2 * hid + j] * cb[j];
                        }
                    }
                    activate(acts[0], clip, gi);
                    if a.input_forget {
                        for j in 0..hid {
                            gf[j] = T::ONE - gi[j];
                        }
                    } else {
                        activate(acts[0], clip, gf);
                    }
                    activate(acts[1], clip, gc);
                    for j in 0..hid {
                        cb[j] = gf[j] * cb[j] + gi[j] * gc[j];
                    }
                    if let Some(cc) = cell_clip {
                        cb.iter_mut().for_each(|v| *v = v.max_min(-cc, cc));
                    }
                    if let Some(p) = p {
                        for j in 0..hid {
                            go[j] = go[j] + p[hid + j] * cb[j];
                        }
                    }
                    activate(acts[0], clip, go);
                    // h = o ⊙ h(C), computed in gc's slot.
                    gc.copy_from_slice(cb);
                    activate(acts[2], None, gc);
                    for j in 0..hid {
                        hb[j] = go[j] * gc[j];
                    }
                }
            }
            y[(t * batch + b) * hid..][..hid].copy_from_slice(hb);
        }
    }
    // An entry of length 0 ends with zero states, as in onnxruntime (not its initial state).
    for (b, _) in lens.iter().enumerate().filter(|(_, &l)| l == 0) {
        h[b * hid..(b + 1) * hid].fill(T::ZERO);
        if !c.is_empty() {
            c[b * hid..(b + 1) * hid].fill(T::ZERO);
        }
    }
    DirOut { y, h, c }
}

#[cfg(test)]
mod tests {
    use super::super::{eval, Scratch};
    use crate::ir::ops::recurrent::{RnnAttrs, RnnCell, RnnDirection};
    use crate::ir::{Op, Tensor};

    fn lstm() -> Op {
        Op::Rnn(RnnAttrs {
            cell: RnnCell::Lstm,
            direction: RnnDirection::Forward,
            hidden_size: 2,
            activations: RnnCell::Lstm.default_activations().to_vec(),
            clip: None,
            batch_major: false,
            linear_before_reset: false,
            input_forget: false,
            cell_clip: None,
        })
    }

    fn run(inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>, String> {
        let mut outs = vec![Tensor::default(); 2];
        eval(&lstm(), inputs, &mut outs, &mut Scratch::default()).map(|_| outs)
    }

    #[test]
    fn bad_inputs_are_errors_not_panics() {
        let x = Tensor::from_f32(vec![3, 1, 2], vec![0.5; 6]);
        let w = Tensor::from_f32(vec![1, 8, 2], vec![0.1; 16]);
        let r = Tensor::from_f32(vec![1, 8, 2], vec![0.1; 16]);
        let outs = run(&[Some(&x), Some(&w), Some(&r)]).unwrap();
        assert_eq!((outs[0].shape.clone(), outs[1].shape.clone()), (vec![3, 1, 1, 2], vec![1, 1, 2]));
        // A length beyond the sequence.
        let lens = Tensor { shape: vec![1], data: crate::ir::TensorData::I32(vec![4]) };
        let e = run(&[Some(&x), Some(&w), Some(&r), None, Some(&lens)]).unwrap_err();
        assert!(e.contains("sequence_lens holds 4, outside [0, 3]"), "{e}");
        // R of the wrong hidden size.
        let r3 = Tensor::from_f32(vec![1, 8, 3], vec![0.1; 24]);
        let e = run(&[Some(&x), Some(&w), Some(&r3)]).unwrap_err();
        assert!(e.contains("input R has shape [1, 8, 3], expected [1, 8, 2]"), "{e}");
        // Mixed float types.
        let w64 = Tensor { shape: vec![1, 8, 2], data: crate::ir::TensorData::F64(vec![0.1; 16]) };
        let e = run(&[Some(&x), Some(&w64), Some(&r)]).unwrap_err();
        assert!(e.contains("input 1 is f64"), "{e}");
    }
}
