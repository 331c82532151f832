//! The i8 × i8 → i32 GEMM kernels under convolution and FULLY_CONNECTED, and im2col.
//!
//! FULLY_CONNECTED: both operands are rows of contiguous bytes (weights `[O][K]`, activations `[P][K]`), so
//! the inner loop is a plain widening multiply-accumulate that LLVM vectorises on x86-64 and aarch64 alike;
//! four weight rows share each load of the activation row. Convolution: patches laid `[K][P]` (a 1x1
//! convolution's NCHW input already is), accumulated over contiguous pixels, four output channels per load of a
//! block of patches ([`gemm_rows`], with an AVX2 variant picked at run time). Integer sums are exact, so
//! the order of accumulation does not matter for bit-exactness.

/// Dot product of two equally long i8 rows, in i32.
#[inline]
pub fn dot(a: &[i8], b: &[i8]) -> i32 {
    let n = a.len().min(b.len());
    let (a, b) = (&a[..n], &b[..n]);
    let mut acc = [0i32; 16];
    let chunks = n / 16;
    for c in 0..chunks {
        let (x, y) = (&a[c * 16..c * 16 + 16], &b[c * 16..c * 16 + 16]);
        for j in 0..16 {
            acc[j] += x[j] as i32 * y[j] as i32;
        }
    }
    let mut s: i32 = acc.iter().sum();
    for j in chunks * 16..n {
        s += a[j] as i32 * b[j] as i32;
    }
    s
}

/// Four dot products of the weight rows `w0..w3` with the activation row `x`.
#[inline]
pub fn dot4(w: [&[i8]; 4], x: &[i8]) -> [i32; 4] {
    let n = x.len();
    let w = w.map(|r| &r[..n]);
    let mut acc = [[0i32; 8]; 4];
    let chunks = n / 8;
    for c in 0..chunks {
        let xs = &x[c * 8..c * 8 + 8];
        for r in 0..4 {
            let ws = &w[r][c * 8..c * 8 + 8];
            for j in 0..8 {
                acc[r][j] += ws[j] as i32 * xs[j] as i32;
            }
        }
    }
    let mut out = [0i32; 4];
    for r in 0..4 {
        let mut s: i32 = acc[r].iter().sum();
        for j in chunks * 8..n {
            s += w[r][j] as i32 * x[j] as i32;
        }
        out[r] = s;
    }
    out
}

/// 2-D convolution geometry (NCHW, one group's slice of channels).
#[derive(Clone, Copy, Debug)]
pub struct Geom2 {
    /// Input height and width.
    pub ih: usize,
    pub iw: usize,
    /// Output height and width.
    pub oh: usize,
    pub ow: usize,
    /// Kernel height and width.
    pub kh: usize,
    pub kw: usize,
    /// Strides.
    pub sh: usize,
    pub sw: usize,
    /// Dilations.
    pub dh: usize,
    pub dw: usize,
    /// Begin pads.
    pub pt: usize,
    pub pl: usize,
}

/// im2col of `c` channels of one image (`x`: `[c][ih][iw]`) into `col`: `[c·kh·kw][oh·ow]` (one row per
/// filter tap, contiguous over output pixels, as [`gemm_rows`] reads it), with `pad` (the input zero point)
/// where a tap falls in the padding.
pub fn im2col(x: &[i8], c: usize, g: &Geom2, pad: i8, col: &mut [i8]) {
    let p = g.oh * g.ow;
    for ch in 0..c {
        let plane = &x[ch * g.ih * g.iw..(ch + 1) * g.ih * g.iw];
        for ky in 0..g.kh {
            for kx in 0..g.kw {
                let row = &mut col[((ch * g.kh + ky) * g.kw + kx) * p..][..p];
                for oy in 0..g.oh {
                    let iy = (oy * g.sh + ky * g.dh) as isize - g.pt as isize;
                    let orow = &mut row[oy * g.ow..(oy + 1) * g.ow];
                    if iy < 0 || iy as usize >= g.ih {
                        orow.fill(pad);
                        continue;
                    }
                    let src = &plane[iy as usize * g.iw..][..g.iw];
                    // output columns lo..hi read the input (ix = ox·sw + ix0), the others the padding
                    let ix0 = (kx * g.dw) as isize - g.pl as isize;
                    let lo = if ix0 >= 0 { 0 } else { ((-ix0) as usize).div_ceil(g.sw) }.min(g.ow);
                    let hi = if ix0 >= g.iw as isize { 0 } else { ((g.iw as isize - ix0) as usize).div_ceil(g.sw) }.clamp(lo, g.ow);
                    orow[..lo].fill(pad);
                    orow[hi..].fill(pad);
                    if hi > lo {
                        let first = (lo * g.sw) as isize + ix0;
                        let src = &src[first as usize..];
                        if g.sw == 1 {
                            orow[lo..hi].copy_from_slice(&src[..hi - lo]);
                        } else {
                            orow[lo..hi].iter_mut().zip(src.iter().step_by(g.sw)).for_each(|(o, &v)| *o = v);
                        }
                    }
                }
            }
        }
    }
}

/// Output rows of a GEMM: `acc[r][j] = Σ_k w[r][k] · col[k][j]` with `w` laid `[rows][K]`, `col` `[K][P]`
/// and `acc` `[rows][P]` (`P = acc.len() / rows`, `rows ≥ 1`). The inner loop runs over contiguous pixels with a
/// broadcast weight, which LLVM vectorises (widening multiply-add into i32 lanes); pixels go in blocks so that
/// each block of `col` is read once for all rows while the rows' accumulators stay in L1. Zero weights are
/// skipped. Compiled a second time for AVX2 on x86-64 and picked at run time (the same integer sums).
#[inline]
pub fn gemm_rows(w: &[i8], rows: usize, col: &[i8], acc: &mut [i32]) {
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU supports AVX2 (checked above)
        return unsafe { gemm_rows_avx2(w, rows, col, acc) };
    }
    gemm_rows_generic(w, rows, col, acc)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn gemm_rows_avx2(w: &[i8], rows: usize, col: &[i8], acc: &mut [i32]) {
    gemm_rows_generic(w, rows, col, acc)
}

#[inline(always)]
fn gemm_rows_generic(w: &[i8], rows: usize, col: &[i8], acc: &mut [i32]) {
    const BLOCK: usize = 256;
    acc.fill(0);
    let rows = rows.max(1);
    let (p, kk) = (acc.len() / rows, w.len() / rows);
    for j0 in (0..p).step_by(BLOCK) {
        let j1 = (j0 + BLOCK).min(p);
        for k in 0..kk {
            let xr = &col[k * p + j0..k * p + j1];
            for r in 0..rows {
                let wv = w[r * kk + k];
                if wv == 0 {
                    continue;
                }
                let wv = wv as i32;
                for (a, &x) in acc[r * p + j0..r * p + j1].iter_mut().zip(xr) {
                    *a += wv * x as i32;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dots_match_a_scalar_loop() {
        let a: Vec<i8> = (0..37).map(|i| (i * 37 % 256) as u8 as i8).collect();
        let b: Vec<i8> = (0..37).map(|i| (i * 91 % 256) as u8 as i8).collect();
        let want: i32 = a.iter().zip(&b).map(|(&x, &y)| x as i32 * y as i32).sum();
        assert_eq!(dot(&a, &b), want);
        assert_eq!(dot4([&a, &b, &a, &b], &b)[1], b.iter().map(|&x| x as i32 * x as i32).sum::<i32>());
        assert_eq!(dot4([&a, &b, &a, &b], &b)[0], want);
        // gemm_rows: col [2][3], one row and two
        let mut acc = [0i32; 3];
        gemm_rows(&[2, -3], 1, &[1, 2, 3, -4, 5, 127], &mut acc);
        assert_eq!(acc, [2 + 12, 4 - 15, 6 - 381]);
        let mut acc = [0i32; 6];
        gemm_rows(&[2, -3, 0, 5], 2, &[1, 2, 3, -4, 5, 127], &mut acc);
        assert_eq!(acc, [2 + 12, 4 - 15, 6 - 381, -20, 25, 635]);
        // blocks of pixels: a long row against a scalar loop
        let (k, p) = (5, 700);
        let col: Vec<i8> = (0..k * p).map(|i| (i * 31 % 256) as u8 as i8).collect();
        let w: Vec<i8> = (0..3 * k).map(|i| (i * 77 % 256) as u8 as i8).collect();
        let mut acc = vec![0i32; 3 * p];
        gemm_rows(&w, 3, &col, &mut acc);
        for r in 0..3 {
            for j in 0..p {
                assert_eq!(acc[r * p + j], (0..k).map(|t| w[r * k + t] as i32 * col[t * p + j] as i32).sum::<i32>());
            }
        }
    }
}
