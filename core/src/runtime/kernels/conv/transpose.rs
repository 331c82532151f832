//! ConvTranspose: per image and group, a GEMM `col[Mg·K, P_in] = W_gᵀ · X_g` and a col2im scatter-add
//! into the output planes (rayon over output channels), then bias and activation.
//!
//! Output size and padding follow the ONNX reference: with explicit pads (or none) and no `output_shape`,
//! `out = stride·(in − 1) + output_padding + (k − 1)·dilation + 1 − pad_begin − pad_end`; an `output_shape`
//! replaces that size while the pads stay as given; with SAME_UPPER/SAME_LOWER and no pads the output is
//! `output_shape` (default `in·stride`) and the total padding
//! `stride·(in − 1) + output_padding + (k − 1)·dilation + 1 − out` is split with the extra unit at the end
//! (SAME_UPPER) or the start (SAME_LOWER). Pads can then be negative (the output extends past the last
//! tap); such positions get the bias only.

use rayon::prelude::*;

use super::super::matmul::{bias_act, threads, Batched, MatRef, Real};
use crate::ir::{Activation, AutoPad, ConvTransposeAttrs};

/// Geometry of a ConvTranspose, spatial dims canonicalised to three.
#[derive(Debug)]
pub(super) struct TPlan {
    n: usize,
    c: usize,
    mg: usize,
    group: usize,
    rank: usize,
    inp: [usize; 3],
    out: [usize; 3],
    k: [usize; 3],
    s: [usize; 3],
    d: [usize; 3],
    /// Begin pads (negative: the output starts before the first tap).
    pb: [isize; 3],
    has_bias: bool,
}

impl TPlan {
    /// [N, M, out...].
    pub fn out_shape(&self) -> Vec<usize> {
        let mut s = vec![self.n, self.mg * self.group];
        s.extend_from_slice(&self.out[3 - self.rank..]);
        s
    }
}

fn canon(v: &[usize], rank: usize, fill: usize, what: &str) -> Result<[usize; 3], String> {
    let mut out = [fill; 3];
    if v.is_empty() {
        return Ok(out);
    }
    if v.len() != rank {
        return Err(format!("ConvTranspose has {} {what} for {rank} spatial dims", v.len()));
    }
    out[3 - rank..].copy_from_slice(v);
    Ok(out)
}

/// Checks shapes and attributes and computes the output geometry.
pub(super) fn plan(x: &[usize], w: &[usize], b: Option<&[usize]>, a: &ConvTransposeAttrs) -> Result<TPlan, String> {
    if x.len() < 3 || x.len() > 5 {
        return Err(format!("ConvTranspose supports 1 to 3 spatial dims, got input shape {x:?}"));
    }
    if w.len() != x.len() {
        return Err(format!("ConvTranspose weight of shape {w:?} does not match input of shape {x:?}"));
    }
    let rank = x.len() - 2;
    let group = a.conv.group.max(1);
    let (n, c, mg) = (x[0], x[1], w[1]);
    if c % group != 0 || w[0] != c {
        return Err(format!("ConvTranspose weight {w:?} needs {} input channels divisible by group {group}, input has {c}", w[0]));
    }
    if !a.conv.kernel_shape.is_empty() && a.conv.kernel_shape[..] != w[2..] {
        return Err(format!("ConvTranspose kernel_shape {:?} does not match weight shape {w:?}", a.conv.kernel_shape));
    }
    if let Some(b) = b {
        if b != [mg * group] {
            return Err(format!("ConvTranspose bias of shape {b:?} does not match {} output channels", mg * group));
        }
    }
    let inp = canon(&x[2..], rank, 1, "input dims")?;
    let k = canon(&w[2..], rank, 1, "kernel dims")?;
    let s = canon(&a.conv.strides, rank, 1, "strides")?;
    let d = canon(&a.conv.dilations, rank, 1, "dilations")?;
    let op = canon(&a.output_padding, rank, 0, "output_padding values")?;
    if k.iter().chain(&s).chain(&d).any(|&v| v == 0) {
        return Err("ConvTranspose kernel, strides and dilations must be positive".into());
    }
    // output_shape may be given as spatial dims or as the full [N, M, spatial...].
    let os = &a.output_shape;
    let os = if os.len() == rank + 2 { &os[2..] } else { &os[..] };
    let out_given = if os.is_empty() { None } else { Some(canon(os, rank, 1, "output_shape dims")?) };
    let same = matches!(a.conv.auto_pad, AutoPad::SameUpper | AutoPad::SameLower);
    let mut pb = [0isize; 3];
    let mut out = [1usize; 3];
    if same && a.conv.pads.is_empty() {
        for i in 3 - rank..3 {
            out[i] = out_given.map_or(inp[i] * s[i], |o| o[i]);
            let total = (s[i] * (inp[i].max(1) - 1) + op[i] + (k[i] - 1) * d[i] + 1) as isize - out[i] as isize;
            pb[i] = if a.conv.auto_pad == AutoPad::SameUpper { total.div_euclid(2) } else { total - total.div_euclid(2) };
        }
    } else {
        let pads = &a.conv.pads;
        if !pads.is_empty() && pads.len() != 2 * rank {
            return Err(format!("ConvTranspose has {} pads for {rank} spatial dims", pads.len()));
        }
        let pad = |i: usize| if pads.is_empty() || a.conv.auto_pad == AutoPad::Valid { (0, 0) } else { (pads[i], pads[rank + i]) };
        for i in 3 - rank..3 {
            let (b0, e0) = pad(i - (3 - rank));
            pb[i] = b0 as isize;
            out[i] = match out_given {
                Some(o) => o[i],
                None => {
                    let full = s[i] * (inp[i].max(1) - 1) + op[i] + (k[i] - 1) * d[i] + 1;
                    if full <= b0 + e0 {
                        return Err(format!("ConvTranspose pads {pads:?} leave no output in spatial dim {}", i + rank - 3));
                    }
                    full - b0 - e0
                }
            };
        }
    }
    Ok(TPlan { n, c, mg, group, rank, inp, out, k, s, d, pb, has_bias: b.is_some() })
}

/// Runs a ConvTranspose in f32 or f64.
pub(super) fn run<T: Real>(p: &TPlan, x: &[T], w: &[T], b: Option<&[T]>, act: Option<Activation>, y: &mut [T], scratch: &mut Vec<T>) -> Result<(), String> {
    let (cg, mg, group) = (p.c / p.group, p.mg, p.group);
    let m = mg * group;
    let pin: usize = p.inp.iter().product();
    let pout: usize = p.out.iter().product();
    let ks: usize = p.k.iter().product();
    if x.len() != p.n * p.c * pin || w.len() != p.c * mg * ks || b.is_some() != p.has_bias || y.len() != p.n * m * pout {
        return Err("ConvTranspose tensors hold fewer elements than their shapes say".into());
    }
    if y.is_empty() {
        return Ok(());
    }
    let rows = mg * ks;
    if scratch.len() < rows * pin {
        scratch.resize(rows * pin, T::ZERO);
    }
    let col = &mut scratch[..rows * pin];
    let par = threads() > 1 && rows * pin * cg >= 1 << 16;
    for n in 0..p.n {
        for grp in 0..group {
            // col[r, q] = Σ_c W[grp·cg + c, r] · X[n, grp·cg + c, q]: A = W_gᵀ (rows·cg, column-major in W).
            let job = Batched {
                batches: 1,
                m: rows,
                n: pin,
                k: cg,
                alpha: T::ONE,
                a: |_| MatRef { data: w, off: grp * cg * rows, rs: 1, cs: rows },
                b: |_| MatRef::rows(x, (n * p.c + grp * cg) * pin, pin),
                _p: std::marker::PhantomData,
            };
            job.run(col, |_, _, _, _| {})?;
            let col = &*col;
            let planes = &mut y[(n * m + grp * mg) * pout..][..mg * pout];
            let body = |(mo, plane): (usize, &mut [T])| {
                plane.fill(b.map_or(T::ZERO, |b| b[grp * mg + mo]));
                col2im(p, &col[mo * ks * pin..][..ks * pin], plane);
                bias_act(plane, None, act);
            };
            if par {
                planes.par_chunks_mut(pout).enumerate().for_each(body);
            } else {
                planes.chunks_mut(pout).enumerate().for_each(body);
            }
        }
    }
    Ok(())
}

/// Scatter-adds one output channel's columns (`[ks, P_in]`) into its output plane.
fn col2im<T: Real>(p: &TPlan, col: &[T], plane: &mut [T]) {
    let [id, ih, iw] = p.inp;
    let [od, oh, ow] = p.out;
    let [kd, kh, kw] = p.k;
    let pin = id * ih * iw;
    // Valid input range along one axis for tap t: out = i·s + t·d − pb in 0..o.
    let range = |t: usize, ax: usize, isz: usize, osz: usize| -> (usize, usize, isize) {
        let off = (t * p.d[ax]) as isize - p.pb[ax];
        let s = p.s[ax] as isize;
        let lo = if off >= 0 { 0 } else { ((-off + s - 1) / s) as usize };
        let hi = if osz as isize - off <= 0 { 0 } else { ((osz as isize - off + s - 1) / s) as usize };
        (lo.min(isz), hi.min(isz).max(lo.min(isz)), off)
    };
    let mut r = 0;
    for kz in 0..kd {
        let (z0, z1, zo) = range(kz, 0, id, od);
        for ky in 0..kh {
            let (y0, y1, yo) = range(ky, 1, ih, oh);
            for kx in 0..kw {
                let (x0, x1, xo) = range(kx, 2, iw, ow);
                let src = &col[r * pin..][..pin];
                r += 1;
                if x1 <= x0 {
                    continue;
                }
                for iz in z0..z1 {
                    let oz = (iz as isize * p.s[0] as isize + zo) as usize;
                    for iy in y0..y1 {
                        let oy = (iy as isize * p.s[1] as isize + yo) as usize;
                        let srow = &src[(iz * ih + iy) * iw..][x0..x1];
                        let orow = &mut plane[(oz * oh + oy) * ow..][..ow];
                        let start = (x0 as isize * p.s[2] as isize + xo) as usize;
                        if p.s[2] == 1 {
                            for (o, &v) in orow[start..start + srow.len()].iter_mut().zip(srow) {
                                *o = *o + v;
                            }
                        } else if let (2, Some((last, body))) = (p.s[2], srow.split_last()) {
                            // pairs through chunks_exact: this form vectorises (step_by does not)
                            let dst = &mut orow[start..start + 2 * body.len() + 1];
                            for (pair, &v) in dst.chunks_exact_mut(2).zip(body) {
                                pair[0] = pair[0] + v;
                            }
                            dst[2 * body.len()] = dst[2 * body.len()] + *last;
                        } else {
                            for (o, &v) in orow[start..].iter_mut().step_by(p.s[2]).zip(srow) {
                                *o = *o + v;
                            }
                        }
                    }
                }
            }
        }
    }
}
