//! ConvTranspose: per image and group, a GEMM `col[Mg·K, P_in] = W_gᵀ · X_g` and a col2im scatter-add
//! into the output planes (split over output channels), then bias and activation.
//!
//! Output size and padding follow the ONNX reference: with explicit pads (or none) and no `output_shape`,
//! `out = stride·(in − 1) + output_padding + (k − 1)·dilation + 1 − pad_begin − pad_end`; an `output_shape`
//! replaces that size while the pads stay as given; with SAME_UPPER/SAME_LOWER and no pads the output is
//! `output_shape` (default `in·stride`) and the total padding
//! `stride·(in − 1) + output_padding + (k − 1)·dilation + 1 − out` is split with the extra unit at the end
//! (SAME_UPPER) or the start (SAME_LOWER). Pads can then be negative (the output extends past the last
//! tap); such positions get the bias only.

use crate::runtime::spin_pool;

use super::super::matmul::{bias_act, threads, Batched, MatRef};
use super::super::numeric::Real;
use crate::ir::ops::conv::TPlan;
use crate::ir::Activation;

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
            let body = |mo: usize, plane: &mut [T]| {
                plane.fill(b.map_or(T::ZERO, |b| b[grp * mg + mo]));
                col2im(p, &col[mo * ks * pin..][..ks * pin], plane);
                bias_act(plane, None, act);
            };
            if par {
                spin_pool::for_each_piece_mut(planes, pout, || (), |_, mo, plane| body(mo, plane));
            } else {
                planes.chunks_mut(pout).enumerate().for_each(|(mo, plane)| body(mo, plane));
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
