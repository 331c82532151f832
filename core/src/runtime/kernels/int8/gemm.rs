//! The i8 × i8 → i32 GEMM kernels under convolution and FULLY_CONNECTED, and im2col.
//!
//! FULLY_CONNECTED: both operands are rows of contiguous bytes (weights `[O][K]`, activations `[P][K]`), so
//! the inner loop is a plain widening multiply-accumulate that LLVM vectorises on x86-64 and aarch64 alike;
//! four weight rows share each load of the activation row. Convolution: patches laid `[K][P]` (a 1x1
//! convolution's NCHW input already is), accumulated over contiguous pixels ([`gemm_rows`]). Integer sums are exact, so
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
                    for (ox, o) in orow.iter_mut().enumerate() {
                        let ix = (ox * g.sw + kx * g.dw) as isize - g.pl as isize;
                        *o = if ix >= 0 && (ix as usize) < g.iw { src[ix as usize] } else { pad };
                    }
                }
            }
        }
    }
}

/// One output row of a GEMM: `acc[j] = Σ_k w[k] · col[k][j]` with `col` laid `[K][P]` (`P = acc.len()`).
/// The inner loop runs over contiguous pixels with a broadcast weight, which LLVM vectorises (widening
/// multiply-add into i32 lanes); zero weights are skipped.
#[inline]
pub fn gemm_rows(w: &[i8], col: &[i8], acc: &mut [i32]) {
    let p = acc.len();
    acc.fill(0);
    for (k, &wv) in w.iter().enumerate() {
        if wv == 0 {
            continue;
        }
        let wv = wv as i32;
        let xr = &col[k * p..(k + 1) * p];
        for (a, &x) in acc.iter_mut().zip(xr) {
            *a += wv * x as i32;
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
        // gemm_rows: col [2][3]
        let mut acc = [0i32; 3];
        gemm_rows(&[2, -3], &[1, 2, 3, -4, 5, 127], &mut acc);
        assert_eq!(acc, [2 + 12, 4 - 15, 6 - 381]);
    }
}
