//! f32 GEMM `C ← alpha·A·B + beta·C` on x86-64 CPUs with AVX2 and FMA: a 6×16 register-blocked microkernel
//! (12 accumulators of 8 lanes, one FMA per accumulator and k step) over packed operands — on CPUs with
//! AVX-512 a 6×32 one over two adjacent 16-wide panels (12 accumulators of 16 lanes: twice the work per
//! instruction, the same packing, the same summation order, so the same bits), and for a column tile of one
//! panel a 12×16 one over two row panels ([`x86::tile_rows`]) — in the usual
//! three-level blocking: k in chunks of [`KC`], B's columns in chunks of [`NC`] packed into 16-wide panels,
//! A's rows in chunks of [`MC`] packed into 6-high panels. The packing buffers are per thread and kept, so
//! steady-state calls allocate nothing. Edge tiles are computed whole on zero-padded panels and only their
//! valid part is written. Other CPUs (and f64) use the matrixmultiply crate; [`sgemm`] picks at run time.
//!
//! Summation order per output element is k ascending within each KC chunk, chunks in order, as one FMA
//! chain: results differ from matrixmultiply's by rounding only.

/// Rows of the microkernel tile.
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
const MR: usize = 6;
/// Columns of the microkernel tile (two 8-lane vectors).
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
const NR: usize = 16;
/// Depth of one packed block (A panel 6·256·4 = 6 KiB, B panel 16·256·4 = 16 KiB: both stay in L1).
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
const KC: usize = 256;
/// Rows of one packed A block (12 panels, 72 KiB at full KC: L2).
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
const MC: usize = 72;
/// Columns of one packed B block (512 KiB at full KC: L2).
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
const NC: usize = 512;

/// `C ← alpha·A·B + beta·C` with matrixmultiply's argument convention (element (i, j) of A at
/// `a + i·rsa + j·csa`, and so on; with beta 0, C is not read).
///
/// # Safety
/// As for matrixmultiply's `sgemm`: every addressed element of A and B is readable, every addressed element of C
/// is writable and accessed by nothing else during the call.
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn sgemm(
    m: usize,
    k: usize,
    n: usize,
    alpha: f32,
    a: *const f32,
    rsa: isize,
    csa: isize,
    b: *const f32,
    rsb: isize,
    csb: isize,
    beta: f32,
    c: *mut f32,
    rsc: isize,
    csc: isize,
) {
    #[cfg(target_arch = "x86_64")]
    if super::vector::avx2_fma() {
        // SAFETY: the CPU has AVX2 and FMA; the rest is this function's contract.
        unsafe { x86::gemm(m, k, n, alpha, a, rsa, csa, b, rsb, csb, beta, c, rsc, csc) };
        return;
    }
    // SAFETY: forwarded from this function's contract.
    unsafe { matrixmultiply::sgemm(m, k, n, alpha, a, rsa, csa, b, rsb, csb, beta, c, rsc, csc) }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;
    use std::cell::RefCell;

    use super::{A_STREAM_BYTES, B_REUSE_BYTES, GEMV_PANELS, KC, MC, MR, NC, NR};

    thread_local! {
        /// Packed A block and packed B block of this thread.
        static PACKS: RefCell<(Vec<f32>, Vec<f32>)> = const { RefCell::new((Vec::new(), Vec::new())) };
    }

    /// What a convolution's write-back adds to each finished output: `min(max(v + bias[i], lo), hi)` for C's row
    /// `i` (each part only when given), applied by the microkernel to the tile's registers at the last depth
    /// block instead of as another pass over the output (which, for an expansion layer's few-megabyte output,
    /// went to memory and back). The same operations as the separate pass, so the same values.
    #[derive(Clone, Copy, Debug)]
    pub(crate) struct Epi {
        /// Per row of C from the call's first row, or null.
        bias: *const f32,
        lo: f32,
        hi: f32,
        clamp: bool,
    }

    impl Epi {
        /// Nothing added.
        pub(crate) const NONE: Epi = Epi { bias: std::ptr::null(), lo: 0.0, hi: 0.0, clamp: false };

        /// The bias per row (from the call's first row) and the clamp bounds.
        pub(crate) fn new(bias: Option<&[f32]>, clamp: Option<(f32, f32)>) -> Epi {
            let (lo, hi) = clamp.unwrap_or((0.0, 0.0));
            Epi { bias: bias.map_or(std::ptr::null(), |b| b.as_ptr()), lo, hi, clamp: clamp.is_some() }
        }

        fn is_none(&self) -> bool {
            self.bias.is_null() && !self.clamp
        }

        #[cfg(test)]
        pub(super) fn bias_is_null(&self) -> bool {
            self.bias.is_null()
        }

        /// The same from row `i` on.
        pub(super) fn at_row(self, i: usize) -> Epi {
            Epi { bias: if self.bias.is_null() { self.bias } else { self.bias.wrapping_add(i) }, ..self }
        }

        /// One value of row `i`.
        ///
        /// # Safety
        /// With a bias, it holds row i's value.
        #[inline(always)]
        unsafe fn scalar(&self, i: usize, mut v: f32) -> f32 {
            if !self.bias.is_null() {
                // SAFETY: contract.
                v += unsafe { *self.bias.add(i) };
            }
            if self.clamp {
                v = v.max(self.lo).min(self.hi);
            }
            v
        }
    }

    /// The blocked driver (see the module documentation).
    ///
    /// # Safety
    /// As for [`super::sgemm`], and the CPU has AVX2 and FMA.
    #[allow(clippy::too_many_arguments)]
    pub(super) unsafe fn gemm(
        m: usize,
        k: usize,
        n: usize,
        alpha: f32,
        a: *const f32,
        rsa: isize,
        csa: isize,
        b: *const f32,
        rsb: isize,
        csb: isize,
        beta: f32,
        c: *mut f32,
        rsc: isize,
        csc: isize,
    ) {
        if m == 0 || n == 0 {
            return;
        }
        if k == 0 || alpha == 0.0 {
            for i in 0..m {
                for j in 0..n {
                    // SAFETY: C's elements are writable (contract).
                    unsafe {
                        let p = c.offset(i as isize * rsc + j as isize * csc);
                        *p = if beta == 0.0 { 0.0 } else { beta * *p };
                    }
                }
            }
            return;
        }
        PACKS.with(|packs| {
            let mut packs = packs.borrow_mut();
            let (pa, pb) = &mut *packs;
            let kc_max = KC.min(k);
            let a_len = MC.min(m).div_ceil(MR) * MR * kc_max;
            let b_len = NC.min(n).div_ceil(NR) * NR * kc_max;
            if pa.len() < a_len {
                pa.resize(a_len, 0.0);
            }
            if pb.len() < b_len {
                pb.resize(b_len, 0.0);
            }
            for jc in (0..n).step_by(NC) {
                let nc = NC.min(n - jc);
                for pc in (0..k).step_by(KC) {
                    let kc = KC.min(k - pc);
                    // SAFETY: the B block lies inside B (contract); pb holds ceil(nc/NR)·NR·kc elements.
                    unsafe { pack_b(kc, nc, b.offset(pc as isize * rsb + jc as isize * csb), rsb, csb, pb) };
                    let beta_k = if pc == 0 { beta } else { 1.0 };
                    for ic in (0..m).step_by(MC) {
                        let mc = MC.min(m - ic);
                        // SAFETY: the A block lies inside A (contract); pa holds ceil(mc/MR)·MR·kc elements.
                        unsafe { pack_a(mc, kc, a.offset(ic as isize * rsa + pc as isize * csa), rsa, csa, pa) };
                        let cols = tile_cols();
                        for jr in (0..nc).step_by(cols) {
                            for ir in (0..mc).step_by(2 * MR) {
                                let cp = (ic + ir) as isize * rsc + (jc + jr) as isize * csc;
                                // SAFETY: the panels hold kc·MR and kc·NR elements (the next panel too when
                                // the tile is wider than NR, the next row panel when more than MR rows are
                                // left); the tile's valid part lies inside C (contract); the CPU has AVX2 and FMA.
                                unsafe {
                                    tile_rows::<0>(
                                        (2 * MR).min(mc - ir),
                                        kc,
                                        pa.as_ptr().add(ir * kc),
                                        MR * kc,
                                        0,
                                        pb.as_ptr().add(jr * kc),
                                        0,
                                        NR * kc,
                                        alpha,
                                        beta_k,
                                        c.offset(cp),
                                        rsc,
                                        csc,
                                        cols.min(nc - jr),
                                        Epi::NONE,
                                    )
                                };
                            }
                        }
                    }
                }
            }
        });
    }

    /// Packs the `mc × kc` block of A at `a` into panels of MR rows: panel `ip` holds, for each k step `p`,
    /// the MR values `A[ip·MR + i, p]` (0 past row mc) at `dst[ip·MR·kc + p·MR + i]`.
    ///
    /// # Safety
    /// Every `a + i·rsa + p·csa` for `i < mc`, `p < kc` is readable; `dst` holds ceil(mc/MR)·MR·kc elements.
    unsafe fn pack_a(mc: usize, kc: usize, a: *const f32, rsa: isize, csa: isize, dst: &mut [f32]) {
        for (ip, panel) in dst.chunks_exact_mut(MR * kc).take(mc.div_ceil(MR)).enumerate() {
            let rows = MR.min(mc - ip * MR);
            if csa == 1 && rows == MR {
                // row-major weights: read each row once, contiguously
                for i in 0..MR {
                    // SAFETY: row ip·MR + i < mc, its kc elements are readable (contract).
                    let src = unsafe { std::slice::from_raw_parts(a.offset((ip * MR + i) as isize * rsa), kc) };
                    for (d, &v) in panel[i..].iter_mut().step_by(MR).zip(src) {
                        *d = v;
                    }
                }
                continue;
            }
            for (p, col) in panel.chunks_exact_mut(MR).enumerate() {
                for (i, d) in col.iter_mut().enumerate() {
                    // SAFETY: row ip·MR + i < mc and p < kc: readable (contract).
                    *d = if i < rows { unsafe { *a.offset((ip * MR + i) as isize * rsa + p as isize * csa) } } else { 0.0 };
                }
            }
        }
    }

    /// Packs the `kc × nc` block of B at `b` into panels of NR columns: panel `jp` holds, for each k step `p`,
    /// the NR values `B[p, jp·NR + j]` (0 past column nc) at `dst[jp·NR·kc + p·NR + j]`.
    ///
    /// # Safety
    /// Every `b + p·rsb + j·csb` for `p < kc`, `j < nc` is readable; `dst` holds ceil(nc/NR)·NR·kc elements.
    unsafe fn pack_b(kc: usize, nc: usize, b: *const f32, rsb: isize, csb: isize, dst: &mut [f32]) {
        for (jp, panel) in dst.chunks_exact_mut(NR * kc).take(nc.div_ceil(NR)).enumerate() {
            let cols = NR.min(nc - jp * NR);
            let j0 = (jp * NR) as isize * csb;
            for (p, row) in panel.chunks_exact_mut(NR).enumerate() {
                let src = p as isize * rsb + j0;
                if csb == 1 && cols == NR {
                    // SAFETY: the NR elements of row p from column jp·NR are readable (contract).
                    row.copy_from_slice(unsafe { std::slice::from_raw_parts(b.offset(src), NR) });
                } else {
                    for (j, d) in row.iter_mut().enumerate() {
                        // SAFETY: column jp·NR + j < nc and p < kc: readable (contract).
                        *d = if j < cols { unsafe { *b.offset(src + j as isize * csb) } } else { 0.0 };
                    }
                }
            }
        }
    }

    /// Packs the `k × nc` matrix at `b` (element (p, j) at `b + p·rsb + j`, `nc ≤ NR`) into one panel of the
    /// packed-B layout over the whole depth (`dst[p·NR + j]`, 0 past column nc), as [`gemm_packed_a_panels`] reads
    /// it: the panels of a product's columns packed once, by the tasks that share them.
    ///
    /// # Safety
    /// Every `b + p·rsb + j` for `p < k`, `j < nc` is readable; `dst` holds NR·k values.
    pub(crate) unsafe fn pack_panel(k: usize, nc: usize, b: *const f32, rsb: isize, dst: &mut [f32]) {
        debug_assert!(nc <= NR && dst.len() >= NR * k);
        // SAFETY: forwarded (one panel of kc = k steps).
        unsafe { pack_b(k, nc, b, rsb, 1, dst) }
    }

    /// Columns one tile covers: two panels where the CPU has AVX-512 ([`tile`] then runs the 16-lane kernel),
    /// one otherwise.
    pub(crate) fn tile_cols() -> usize {
        if super::super::vector::avx512() {
            2 * NR
        } else {
            NR
        }
    }

    /// One `mr × nr` tile (`mr ≤ MR`, `nr ≤` [`tile_cols`]) through the kernel compiled for exactly `mr` rows, so a
    /// GEMM of few rows (a decode step's matrix-vector product) does no multiply-adds for padding rows. Columns
    /// past NR come from the next panel, `panel_stride` values after `b`.
    ///
    /// # Safety
    /// As for [`kernel`]; with `nr > NR` also for [`kernel_wide`] (the next panel holds kc·NR readable values, the
    /// CPU has AVX-512).
    #[allow(clippy::too_many_arguments)]
    #[cfg(test)]
    pub(super) unsafe fn tile(mr: usize, kc: usize, a: *const f32, b: *const f32, panel_stride: usize, alpha: f32, beta: f32, c: *mut f32, rsc: isize, csc: isize, nr: usize) {
        // SAFETY: forwarded.
        unsafe { tile_epi(mr, kc, a, b, panel_stride, alpha, beta, c, rsc, csc, nr, Epi::NONE) }
    }

    /// [`tile`] with the epilogue `epi` applied to the tile's values before they are stored.
    ///
    /// # Safety
    /// As for [`tile`]; with a bias, `epi` holds the tile's `mr` rows' values.
    #[allow(clippy::too_many_arguments)]
    #[cfg(test)]
    pub(super) unsafe fn tile_epi(mr: usize, kc: usize, a: *const f32, b: *const f32, panel_stride: usize, alpha: f32, beta: f32, c: *mut f32, rsc: isize, csc: isize, nr: usize, epi: Epi) {
        // SAFETY: forwarded.
        unsafe { tile_epi_pf::<0>(mr, kc, a, 0, b, 0, panel_stride, alpha, beta, c, rsc, csc, nr, epi) }
    }

    /// [`tile_epi`], the AVX-512 kernel prefetching per the flags `PF` ([`PF_A`], [`PF_B`]) at `pfa` values from
    /// A's panel and `pfb` from B's (a prefetch address need not be valid).
    ///
    /// # Safety
    /// As for [`tile_epi`].
    #[allow(clippy::too_many_arguments)]
    unsafe fn tile_epi_pf<const PF: u8>(mr: usize, kc: usize, a: *const f32, pfa: isize, b: *const f32, pfb: isize, panel_stride: usize, alpha: f32, beta: f32, c: *mut f32, rsc: isize, csc: isize, nr: usize, epi: Epi) {
        if nr > NR {
            let b1 = b.wrapping_add(panel_stride);
            // SAFETY: forwarded; nr > NR only from tile_cols on a CPU with AVX-512 (caller).
            unsafe {
                match mr {
                    6 => kernel_wide::<6, PF>(kc, a, pfa, b, b1, pfb, alpha, beta, c, rsc, csc, nr, epi),
                    5 => kernel_wide::<5, PF>(kc, a, pfa, b, b1, pfb, alpha, beta, c, rsc, csc, nr, epi),
                    4 => kernel_wide::<4, PF>(kc, a, pfa, b, b1, pfb, alpha, beta, c, rsc, csc, nr, epi),
                    3 => kernel_wide::<3, PF>(kc, a, pfa, b, b1, pfb, alpha, beta, c, rsc, csc, nr, epi),
                    2 => kernel_wide::<2, PF>(kc, a, pfa, b, b1, pfb, alpha, beta, c, rsc, csc, nr, epi),
                    _ => kernel_wide::<1, PF>(kc, a, pfa, b, b1, pfb, alpha, beta, c, rsc, csc, nr, epi),
                }
            }
            return;
        }
        // SAFETY: forwarded; the CPU has AVX2 and FMA (caller).
        unsafe {
            match mr {
                6 => kernel::<6>(kc, a, b, alpha, beta, c, rsc, csc, nr, epi),
                5 => kernel::<5>(kc, a, b, alpha, beta, c, rsc, csc, nr, epi),
                4 => kernel::<4>(kc, a, b, alpha, beta, c, rsc, csc, nr, epi),
                3 => kernel::<3>(kc, a, b, alpha, beta, c, rsc, csc, nr, epi),
                2 => kernel::<2>(kc, a, b, alpha, beta, c, rsc, csc, nr, epi),
                _ => kernel::<1>(kc, a, b, alpha, beta, c, rsc, csc, nr, epi),
            }
        }
    }

    /// One R×NR tile: `C[..R, ..nr] ← alpha·(Apanel · Bpanel) + beta·C` (C not read when beta is 0). The A panel
    /// is MR values per k step (rows past R unread).
    ///
    /// # Safety
    /// `a` holds kc·MR and `b` kc·NR readable elements; the tile's `R × nr` part of C is writable and ours;
    /// the CPU has AVX2 and FMA.
    #[target_feature(enable = "avx2,fma")]
    #[allow(clippy::too_many_arguments)]
    unsafe fn kernel<const R: usize>(kc: usize, a: *const f32, b: *const f32, alpha: f32, beta: f32, c: *mut f32, rsc: isize, csc: isize, nr: usize, epi: Epi) {
        // SAFETY (whole body): the loads read the panels within kc·MR / kc·NR elements; the stores write the
        // valid tile part of C (contract).
        unsafe {
            let mut acc = [[_mm256_setzero_ps(); 2]; R];
            let (mut ap, mut bp) = (a, b);
            for _ in 0..kc {
                let b0 = _mm256_loadu_ps(bp);
                let b1 = _mm256_loadu_ps(bp.add(8));
                for (i, row) in acc.iter_mut().enumerate() {
                    let av = _mm256_broadcast_ss(&*ap.add(i));
                    row[0] = _mm256_fmadd_ps(av, b0, row[0]);
                    row[1] = _mm256_fmadd_ps(av, b1, row[1]);
                }
                ap = ap.add(MR);
                bp = bp.add(NR);
            }
            let va = _mm256_set1_ps(alpha);
            if nr == NR && csc == 1 {
                let vb = _mm256_set1_ps(beta);
                for (i, row) in acc.iter().enumerate() {
                    let cp = c.offset(i as isize * rsc);
                    for (h, v) in row.iter().enumerate() {
                        let mut r = _mm256_mul_ps(va, *v);
                        if beta != 0.0 {
                            r = _mm256_fmadd_ps(vb, _mm256_loadu_ps(cp.add(8 * h)), r);
                        }
                        if !epi.bias.is_null() {
                            r = _mm256_add_ps(r, _mm256_set1_ps(*epi.bias.add(i)));
                        }
                        if epi.clamp {
                            r = _mm256_min_ps(_mm256_max_ps(r, _mm256_set1_ps(epi.lo)), _mm256_set1_ps(epi.hi));
                        }
                        _mm256_storeu_ps(cp.add(8 * h), r);
                    }
                }
            } else {
                let mut tile = [[0f32; NR]; R];
                for (t, row) in tile.iter_mut().zip(&acc) {
                    _mm256_storeu_ps(t.as_mut_ptr(), _mm256_mul_ps(va, row[0]));
                    _mm256_storeu_ps(t.as_mut_ptr().add(8), _mm256_mul_ps(va, row[1]));
                }
                for (i, t) in tile.iter().enumerate() {
                    for (j, &v) in t.iter().enumerate().take(nr) {
                        let p = c.offset(i as isize * rsc + j as isize * csc);
                        let v = if beta == 0.0 { v } else { beta.mul_add(*p, v) };
                        *p = if epi.is_none() { v } else { epi.scalar(i, v) };
                    }
                }
            }
        }
    }

    /// One R×nr tile over two panels (`NR < nr ≤ 2·NR`): `C[..R, ..nr] ← alpha·(Apanel · [B0 B1]) + beta·C`, as
    /// [`kernel`] with 16-lane vectors (each lane the same FMA chain, so the same results).
    ///
    /// # Safety
    /// `a` holds kc·MR, `b0` and `b1` kc·NR readable elements each; the tile's `R × nr` part of C is writable
    /// and ours; the CPU has AVX-512F.
    #[target_feature(enable = "avx512f")]
    #[allow(clippy::too_many_arguments)]
    unsafe fn kernel_wide<const R: usize, const PF: u8>(kc: usize, a: *const f32, pfa: isize, b0: *const f32, b1: *const f32, pfb: isize, alpha: f32, beta: f32, c: *mut f32, rsc: isize, csc: isize, nr: usize, epi: Epi) {
        // SAFETY (whole body): the loads read the panels within kc·MR / kc·NR elements; the stores write the
        // valid tile part of C (contract).
        unsafe {
            let mut acc = [[_mm512_setzero_ps(); 2]; R];
            let (mut ap, mut p0, mut p1) = (a, b0, b1);
            for _ in 0..kc {
                if PF & PF_A != 0 {
                    _mm_prefetch::<_MM_HINT_T0>(ap.wrapping_offset(pfa) as *const i8);
                }
                if PF & PF_B != 0 {
                    _mm_prefetch::<_MM_HINT_T0>(p0.wrapping_offset(pfb) as *const i8);
                    _mm_prefetch::<_MM_HINT_T0>(p1.wrapping_offset(pfb) as *const i8);
                }
                let v0 = _mm512_loadu_ps(p0);
                let v1 = _mm512_loadu_ps(p1);
                for (i, row) in acc.iter_mut().enumerate() {
                    let av = _mm512_set1_ps(*ap.add(i));
                    row[0] = _mm512_fmadd_ps(av, v0, row[0]);
                    row[1] = _mm512_fmadd_ps(av, v1, row[1]);
                }
                ap = ap.add(MR);
                p0 = p0.add(NR);
                p1 = p1.add(NR);
            }
            let va = _mm512_set1_ps(alpha);
            if nr == 2 * NR && csc == 1 {
                let vb = _mm512_set1_ps(beta);
                for (i, row) in acc.iter().enumerate() {
                    let cp = c.offset(i as isize * rsc);
                    for (h, v) in row.iter().enumerate() {
                        let mut r = _mm512_mul_ps(va, *v);
                        if beta != 0.0 {
                            r = _mm512_fmadd_ps(vb, _mm512_loadu_ps(cp.add(NR * h)), r);
                        }
                        if !epi.bias.is_null() {
                            r = _mm512_add_ps(r, _mm512_set1_ps(*epi.bias.add(i)));
                        }
                        if epi.clamp {
                            r = _mm512_min_ps(_mm512_max_ps(r, _mm512_set1_ps(epi.lo)), _mm512_set1_ps(epi.hi));
                        }
                        _mm512_storeu_ps(cp.add(NR * h), r);
                    }
                }
            } else {
                let mut tile = [[0f32; 2 * NR]; R];
                for (t, row) in tile.iter_mut().zip(&acc) {
                    _mm512_storeu_ps(t.as_mut_ptr(), _mm512_mul_ps(va, row[0]));
                    _mm512_storeu_ps(t.as_mut_ptr().add(NR), _mm512_mul_ps(va, row[1]));
                }
                for (i, t) in tile.iter().enumerate() {
                    for (j, &v) in t.iter().enumerate().take(nr) {
                        let p = c.offset(i as isize * rsc + j as isize * csc);
                        let v = if beta == 0.0 { v } else { beta.mul_add(*p, v) };
                        *p = if epi.is_none() { v } else { epi.scalar(i, v) };
                    }
                }
            }
        }
    }

    /// Up to two panels of rows (`rows ≤ 2·MR`: A's panels at `a` and `a + a_stride`, C's rows from `c`) times
    /// one column tile (`nr ≤` [`tile_cols`] columns at `b`, the next B panel `panel_stride` after it), with
    /// `epi` (its rows from the first panel's first). A tile of one B panel on an AVX-512 CPU runs both row
    /// panels through [`kernel_tall`] (12 accumulators of 16 lanes, where a panel alone would run 12 of 8
    /// lanes through the AVX2 kernel: a GEMM of 16 or fewer columns, a Winograd product over few tiles); other
    /// tiles run [`tile_epi`] per row panel. The same FMA chain per output element either way. With AVX-512 the
    /// kernels prefetch per `PF`, `pfa` and `pfb` (as in [`tile_epi_pf`]; `pfa` from each row panel).
    ///
    /// # Safety
    /// As for [`tile_epi`] on each row panel; `a + a_stride` holds the second panel's kc·MR values when
    /// `rows > MR`.
    #[allow(clippy::too_many_arguments)]
    pub(super) unsafe fn tile_rows<const PF: u8>(rows: usize, kc: usize, a: *const f32, a_stride: usize, pfa: isize, b: *const f32, pfb: isize, panel_stride: usize, alpha: f32, beta: f32, c: *mut f32, rsc: isize, csc: isize, nr: usize, epi: Epi) {
        debug_assert!((1..=2 * MR).contains(&rows) && nr >= 1);
        let a1 = a.wrapping_add(a_stride);
        if nr <= NR && super::super::vector::avx512() {
            // SAFETY: forwarded; the CPU has AVX-512 (checked), the second panel is read only for rows > MR.
            unsafe {
                match rows {
                    12 => kernel_tall::<12, PF>(kc, a, a1, pfa, b, pfb, alpha, beta, c, rsc, csc, nr, epi),
                    11 => kernel_tall::<11, PF>(kc, a, a1, pfa, b, pfb, alpha, beta, c, rsc, csc, nr, epi),
                    10 => kernel_tall::<10, PF>(kc, a, a1, pfa, b, pfb, alpha, beta, c, rsc, csc, nr, epi),
                    9 => kernel_tall::<9, PF>(kc, a, a1, pfa, b, pfb, alpha, beta, c, rsc, csc, nr, epi),
                    8 => kernel_tall::<8, PF>(kc, a, a1, pfa, b, pfb, alpha, beta, c, rsc, csc, nr, epi),
                    7 => kernel_tall::<7, PF>(kc, a, a1, pfa, b, pfb, alpha, beta, c, rsc, csc, nr, epi),
                    6 => kernel_tall::<6, PF>(kc, a, a1, pfa, b, pfb, alpha, beta, c, rsc, csc, nr, epi),
                    5 => kernel_tall::<5, PF>(kc, a, a1, pfa, b, pfb, alpha, beta, c, rsc, csc, nr, epi),
                    4 => kernel_tall::<4, PF>(kc, a, a1, pfa, b, pfb, alpha, beta, c, rsc, csc, nr, epi),
                    3 => kernel_tall::<3, PF>(kc, a, a1, pfa, b, pfb, alpha, beta, c, rsc, csc, nr, epi),
                    2 => kernel_tall::<2, PF>(kc, a, a1, pfa, b, pfb, alpha, beta, c, rsc, csc, nr, epi),
                    _ => kernel_tall::<1, PF>(kc, a, a1, pfa, b, pfb, alpha, beta, c, rsc, csc, nr, epi),
                }
            }
            return;
        }
        // SAFETY: forwarded, one row panel at a time.
        unsafe {
            tile_epi_pf::<PF>(MR.min(rows), kc, a, pfa, b, pfb, panel_stride, alpha, beta, c, rsc, csc, nr, epi);
            if rows > MR {
                tile_epi_pf::<PF>(rows - MR, kc, a1, pfa, b, pfb, panel_stride, alpha, beta, c.offset(MR as isize * rsc), rsc, csc, nr, epi.at_row(MR));
            }
        }
    }

    /// One R×nr tile (`R ≤ 2·MR`, `nr ≤ NR`) over two row panels and one B panel, 16-lane vectors: rows below MR
    /// from the panel at `a0`, the rest from `a1`. Each output element is [`kernel`]'s FMA chain.
    ///
    /// # Safety
    /// `a0` (and `a1` when R > MR) hold kc·MR readable values, `b` kc·NR; the tile's `R × nr` part of C is writable
    /// and ours; the CPU has AVX-512F.
    #[target_feature(enable = "avx512f")]
    #[allow(clippy::too_many_arguments)]
    unsafe fn kernel_tall<const R: usize, const PF: u8>(kc: usize, a0: *const f32, a1: *const f32, pfa: isize, b: *const f32, pfb: isize, alpha: f32, beta: f32, c: *mut f32, rsc: isize, csc: isize, nr: usize, epi: Epi) {
        // SAFETY (whole body): the loads read the panels within kc·MR / kc·NR elements; the stores write the
        // valid tile part of C (contract).
        unsafe {
            let mut acc = [_mm512_setzero_ps(); R];
            let (mut p0, mut p1, mut bp) = (a0, a1, b);
            for _ in 0..kc {
                if PF & PF_A != 0 {
                    _mm_prefetch::<_MM_HINT_T0>(p0.wrapping_offset(pfa) as *const i8);
                    if R > MR {
                        _mm_prefetch::<_MM_HINT_T0>(p1.wrapping_offset(pfa) as *const i8);
                    }
                }
                if PF & PF_B != 0 {
                    _mm_prefetch::<_MM_HINT_T0>(bp.wrapping_offset(pfb) as *const i8);
                }
                let v = _mm512_loadu_ps(bp);
                for (i, row) in acc.iter_mut().enumerate() {
                    let av = if i < MR { _mm512_set1_ps(*p0.add(i)) } else { _mm512_set1_ps(*p1.add(i - MR)) };
                    *row = _mm512_fmadd_ps(av, v, *row);
                }
                p0 = p0.add(MR);
                if R > MR {
                    p1 = p1.add(MR);
                }
                bp = bp.add(NR);
            }
            let va = _mm512_set1_ps(alpha);
            if nr == NR && csc == 1 {
                let vb = _mm512_set1_ps(beta);
                for (i, v) in acc.iter().enumerate() {
                    let cp = c.offset(i as isize * rsc);
                    let mut r = _mm512_mul_ps(va, *v);
                    if beta != 0.0 {
                        r = _mm512_fmadd_ps(vb, _mm512_loadu_ps(cp), r);
                    }
                    if !epi.bias.is_null() {
                        r = _mm512_add_ps(r, _mm512_set1_ps(*epi.bias.add(i)));
                    }
                    if epi.clamp {
                        r = _mm512_min_ps(_mm512_max_ps(r, _mm512_set1_ps(epi.lo)), _mm512_set1_ps(epi.hi));
                    }
                    _mm512_storeu_ps(cp, r);
                }
            } else {
                let mut tile = [[0f32; NR]; R];
                for (t, v) in tile.iter_mut().zip(&acc) {
                    _mm512_storeu_ps(t.as_mut_ptr(), _mm512_mul_ps(va, *v));
                }
                for (i, t) in tile.iter().enumerate() {
                    for (j, &v) in t.iter().enumerate().take(nr) {
                        let p = c.offset(i as isize * rsc + j as isize * csc);
                        let v = if beta == 0.0 { v } else { beta.mul_add(*p, v) };
                        *p = if epi.is_none() { v } else { epi.scalar(i, v) };
                    }
                }
            }
        }
    }

    /// The widest column tail [`narrow_cols`] takes: its kernel does one 8-lane FMA per row panel, k step and
    /// column, where a 16-column tile does six 16-lane ones per row panel and k step whatever its width.
    pub(super) const NARROW_MAX: usize = 4;

    /// Row panels one pass of [`kernel_narrow`] covers: 8 independent FMA chains hide the FMA latency.
    const NARROW_PANELS: usize = 8;

    /// `nc` columns as `(main, tail)`: the columns the tile kernels take (`main`, a multiple of NR unless it is
    /// all of them) and the last `tail` ≤ [`NARROW_MAX`] that [`narrow_cols`] takes. A plane of 7×7 pixels (49
    /// columns: two 16-lane kernels' tiles and one column) ran its last column through a 16-column tile, a
    /// quarter of the layer's time.
    fn split_tail(nc: usize) -> (usize, usize) {
        let t = nc % NR;
        if t <= NARROW_MAX {
            (nc - t, t)
        } else {
            (nc, 0)
        }
    }

    /// `C[..rows, ..t] ← alpha·A·B + beta·C` (C not read when beta is 0) for the row panels of A from `a` (one
    /// depth block of kc steps each, panel stride `a_stride`) and `t ≤` [`NARROW_MAX`] columns of one packed B
    /// panel (column j of k step p at `b + p·NR + j`), each value then through `epi` (its rows from the first):
    /// [`kernel_narrow`] per column over up to [`NARROW_PANELS`] panels at a time. Each output element is the
    /// tile kernels' FMA chain and write-back, so the same bits.
    ///
    /// # Safety
    /// The `ceil(rows / MR)` panels hold kc·MR readable values each, with 2 more readable after the last (a
    /// [`PackedA`]'s padding: the kernel loads 8 lanes); `b + p·NR + j` is readable for p < kc, j < t; C's
    /// `rows × t` elements (row stride rsc) are writable and ours; with a bias, `epi` holds `rows` values.
    #[allow(clippy::too_many_arguments)]
    unsafe fn narrow_cols(rows: usize, kc: usize, a: *const f32, a_stride: usize, b: *const f32, t: usize, alpha: f32, beta: f32, c: *mut f32, rsc: isize, epi: Epi) {
        debug_assert!(t <= NARROW_MAX);
        let mut ir = 0;
        while ir < rows {
            let panels = (rows - ir).div_ceil(MR).min(NARROW_PANELS);
            let rs = (rows - ir).min(panels * MR);
            let ap = a.wrapping_add(ir / MR * a_stride);
            for j in 0..t {
                let (bj, cj, e) = (b.wrapping_add(j), c.wrapping_offset(ir as isize * rsc + j as isize), epi.at_row(ir));
                // SAFETY: forwarded (contract): panels ir/MR.. of A, column j of B, rows ir.. of C's column j.
                unsafe {
                    match panels {
                        8 => kernel_narrow::<8>(kc, ap, a_stride, bj, alpha, beta, cj, rsc, rs, e),
                        7 => kernel_narrow::<7>(kc, ap, a_stride, bj, alpha, beta, cj, rsc, rs, e),
                        6 => kernel_narrow::<6>(kc, ap, a_stride, bj, alpha, beta, cj, rsc, rs, e),
                        5 => kernel_narrow::<5>(kc, ap, a_stride, bj, alpha, beta, cj, rsc, rs, e),
                        4 => kernel_narrow::<4>(kc, ap, a_stride, bj, alpha, beta, cj, rsc, rs, e),
                        3 => kernel_narrow::<3>(kc, ap, a_stride, bj, alpha, beta, cj, rsc, rs, e),
                        2 => kernel_narrow::<2>(kc, ap, a_stride, bj, alpha, beta, cj, rsc, rs, e),
                        _ => kernel_narrow::<1>(kc, ap, a_stride, bj, alpha, beta, cj, rsc, rs, e),
                    }
                }
            }
            ir += rs;
        }
    }

    /// One column of P row panels: the panel's MR rows (and two lanes past them, ignored) of each k step in one
    /// 8-lane vector, times the column's value; `rows ≤ P·MR` of C's column written (stride rsc).
    ///
    /// # Safety
    /// As for [`narrow_cols`] with P panels and one column; the CPU has AVX2 and FMA.
    #[target_feature(enable = "avx2,fma")]
    #[allow(clippy::too_many_arguments)]
    unsafe fn kernel_narrow<const P: usize>(kc: usize, a: *const f32, a_stride: usize, b: *const f32, alpha: f32, beta: f32, c: *mut f32, rsc: isize, rows: usize, epi: Epi) {
        // SAFETY (whole body): the loads read the panels' kc·MR values (the last 8-lane load 2 past a panel's
        // block: the next block's values or the padding), B's column; the stores C's rows (contract).
        unsafe {
            let mut acc = [_mm256_setzero_ps(); P];
            for p in 0..kc {
                let bv = _mm256_broadcast_ss(&*b.add(p * NR));
                for (q, s) in acc.iter_mut().enumerate() {
                    *s = _mm256_fmadd_ps(bv, _mm256_loadu_ps(a.add(q * a_stride + p * MR)), *s);
                }
            }
            let va = _mm256_set1_ps(alpha);
            let mut lanes = [[0f32; 8]; P];
            for (l, v) in lanes.iter_mut().zip(&acc) {
                _mm256_storeu_ps(l.as_mut_ptr(), _mm256_mul_ps(va, *v));
            }
            for i in 0..rows {
                let v = lanes[i / MR][i % MR];
                let p = c.offset(i as isize * rsc);
                let v = if beta == 0.0 { v } else { beta.mul_add(*p, v) };
                *p = if epi.is_none() { v } else { epi.scalar(i, v) };
            }
        }
    }

    /// Where in a [`PackedA`]'s data (depth `k`) the depth block from step `pc` of the row panel holding row
    /// `i0 + ir` starts (`i0 + ir` a multiple of MR): a tile's A, and the next tile's for the prefetch.
    #[inline]
    fn a_block(i0: usize, ir: usize, pc: usize, k: usize) -> usize {
        (i0 + ir) / MR * MR * k + pc * MR
    }

    /// The AVX-512 kernels' `PF` flag: prefetch A at the given offset `pfa` from the panels they read (the next
    /// tile's depth block, which the caller knows), one line per depth step.
    pub(super) const PF_A: u8 = 1;
    /// The AVX-512 kernels' `PF` flag: prefetch B at the offset `pfb` from the panels they read.
    pub(super) const PF_B: u8 = 2;
    /// How far ahead (in values) a B panel streamed from memory is prefetched within itself.
    const PREFETCH_B: usize = 1024;

    /// B (`k × n`) packed once for [`gemm_packed`]: panels of NR columns over the whole depth, panel `jp`
    /// holding `B[p, jp·NR + j]` at `data[jp·NR·k + p·NR + j]` (0 past column n). A block of KC depth steps of a
    /// panel is then the contiguous run the kernel streams, so a product with a packed B packs only A.
    #[derive(Clone, Debug)]
    pub(crate) struct PackedB {
        k: usize,
        n: usize,
        data: Vec<f32>,
    }

    impl PackedB {
        /// The panels, for handing to [`gemm_packed_a_panels`] in tests.
        #[cfg(test)]
        pub(super) fn data_ptr(&self) -> *const f32 {
            self.data.as_ptr()
        }
    }

    impl PackedB {
        /// Packs the `k × n` matrix whose element (p, j) is `b[p·rsb + j·csb]`; `None` when `b` is too short or
        /// the CPU lacks AVX2/FMA (the kernels [`gemm_packed`] runs).
        pub(crate) fn new(b: &[f32], k: usize, n: usize, rsb: usize, csb: usize) -> Option<PackedB> {
            if !super::super::vector::avx2_fma() || k == 0 || n == 0 {
                return None;
            }
            let last = (k - 1).checked_mul(rsb)?.checked_add((n - 1).checked_mul(csb)?)?;
            if last >= b.len() {
                return None;
            }
            let panels = n.div_ceil(NR);
            let mut data = vec![0f32; panels * NR * k];
            for (jp, panel) in data.chunks_exact_mut(NR * k).enumerate() {
                let cols = NR.min(n - jp * NR);
                for (p, row) in panel.chunks_exact_mut(NR).enumerate() {
                    for (j, d) in row.iter_mut().enumerate().take(cols) {
                        *d = b[p * rsb + (jp * NR + j) * csb];
                    }
                }
            }
            Some(PackedB { k, n, data })
        }

        /// True when this is the packing of the `k × n` matrix whose element (p, j) is `b[p·rsb + j·csb]`
        /// (bit for bit).
        pub(crate) fn holds(&self, b: &[f32], k: usize, n: usize, rsb: usize, csb: usize) -> bool {
            if (k, n) != (self.k, self.n) {
                return false;
            }
            for (jp, panel) in self.data.chunks_exact(NR * k).enumerate() {
                let cols = NR.min(n - jp * NR);
                for (p, row) in panel.chunks_exact(NR).enumerate() {
                    for (j, d) in row.iter().enumerate().take(cols) {
                        match b.get(p * rsb + (jp * NR + j) * csb) {
                            Some(v) if v.to_bits() == d.to_bits() => {}
                            _ => return false,
                        }
                    }
                }
            }
            true
        }

        /// Rows (depth).
        pub(crate) fn k(&self) -> usize {
            self.k
        }

        /// Columns.
        pub(crate) fn n(&self) -> usize {
            self.n
        }
    }

    /// A (`m × k`, a convolution's weights) packed once for [`gemm_packed_a`]: panels of MR rows over the whole
    /// depth, panel `ip` holding `A[ip·MR + i, p]` at `data[ip·MR·k + p·MR + i]` (0 past row m).
    #[derive(Clone, Debug)]
    pub(crate) struct PackedA {
        m: usize,
        k: usize,
        data: Vec<f32>,
    }

    impl PackedA {
        /// Packs the row-major `m × k` matrix `a`; `None` when `a` is too short or the CPU lacks AVX2/FMA.
        pub(crate) fn new(a: &[f32], m: usize, k: usize) -> Option<PackedA> {
            PackedA::new_in(a, m, k, Vec::new())
        }

        /// [`PackedA::new`] in the storage of `buf` (a run's activations packed in a kept workspace; get it
        /// back with [`PackedA::into_buffer`]).
        pub(crate) fn new_in(a: &[f32], m: usize, k: usize, buf: Vec<f32>) -> Option<PackedA> {
            if !super::super::vector::avx2_fma() || m == 0 || k == 0 || a.len() < m.checked_mul(k)? {
                return None;
            }
            // two more zeros: the matrix-vector kernel loads 8 lanes at the last depth step of the last panel
            let mut data = buf;
            data.clear();
            data.resize(m.div_ceil(MR) * MR * k + 2, 0.0);
            for (ip, panel) in data.chunks_exact_mut(MR * k).enumerate() {
                for i in 0..MR.min(m - ip * MR) {
                    let row = &a[(ip * MR + i) * k..][..k];
                    for (d, &v) in panel[i..].iter_mut().step_by(MR).zip(row) {
                        *d = v;
                    }
                }
            }
            Some(PackedA { m, k, data })
        }

        /// Packs the `m × k` matrix whose element (i, p) is `a[p·lda + i]` (the transpose of a row-major `k × lda`
        /// matrix's first m columns: an im2col column matrix read with the pixels as rows) in the storage of
        /// `buf`; `None` when `a` is too short, `lda < m` or the CPU lacks AVX2/FMA.
        pub(crate) fn new_transposed_in(a: &[f32], m: usize, k: usize, lda: usize, buf: Vec<f32>) -> Option<PackedA> {
            if !super::super::vector::avx2_fma() || m == 0 || k == 0 || lda < m || a.len() < (k - 1).checked_mul(lda)?.checked_add(m)? {
                return None;
            }
            // every element is written below, so a kept buffer is not cleared first (zeroing it was a pass of its own)
            let total = m.div_ceil(MR) * MR * k + 2;
            let mut data = buf;
            data.resize(total, 0.0);
            let (panels, tail) = data.split_at_mut(total - 2);
            tail.fill(0.0);
            // row by row of the source (read once, in order), its runs of MR values to the panels' depth step p
            // as fixed-size copies the compiler inlines (a slice copy of 6 values was a libc memmove call per depth
            // step: a third of a pointwise layer's time)
            let full = m / MR;
            for p in 0..k {
                let src = &a[p * lda..][..m];
                for (ip, run) in src.chunks_exact(MR).enumerate() {
                    let d: &mut [f32; MR] = (&mut panels[ip * MR * k + p * MR..][..MR]).try_into().expect("MR values");
                    *d = std::array::from_fn(|i| run[i]);
                }
                if full * MR < m {
                    let d = &mut panels[full * MR * k + p * MR..][..MR];
                    for (i, v) in d.iter_mut().enumerate() {
                        *v = src.get(full * MR + i).copied().unwrap_or(0.0);
                    }
                }
            }
            Some(PackedA { m, k, data })
        }

        /// Rows.
        pub(crate) fn m(&self) -> usize {
            self.m
        }

        /// The storage, for reuse.
        pub(crate) fn into_buffer(self) -> Vec<f32> {
            self.data
        }

        /// Columns (depth).
        pub(crate) fn k(&self) -> usize {
            self.k
        }
    }

    /// `C[i0..i0 + rows, ..n] ← A[i0..i0 + rows, ..] · B` for a packed A and the `k × n` matrix B (element (p, j)
    /// at `b + p·rsb + j·csb`), C's element (i, j) at `c + (i - i0)·rsc + j`, each finished through `epi` (its bias
    /// indexed from row i0). `i0` is a multiple of the panel height. C is written, not read.
    ///
    /// # Safety
    /// Every addressed element of B is readable; C's `rows × n` elements are writable and accessed by nothing else
    /// during the call; `i0 + rows ≤ a.m()`; `epi`'s bias, if any, holds `rows` values; the CPU has AVX2 and FMA
    /// (true for any [`PackedA`]).
    #[allow(clippy::too_many_arguments)]
    pub(crate) unsafe fn gemm_packed_a(a: &PackedA, i0: usize, rows: usize, n: usize, b: *const f32, rsb: isize, csb: isize, c: *mut f32, rsc: isize, epi: Epi) {
        debug_assert!(i0.is_multiple_of(MR) && i0 + rows <= a.m);
        let k = a.k;
        if rows == 0 || n == 0 {
            return;
        }
        if n == 1 {
            // a 1×1 output (a squeeze-and-excitation block's convolutions): rows · k multiply-adds, not 16 times that
            // SAFETY: forwarded (B's k elements, C's rows elements with stride rsc, panels inside data).
            unsafe { gemv_packed_a(a, i0, rows, b, rsb, c, rsc) };
            if !epi.is_none() {
                for i in 0..rows {
                    // SAFETY: C's row i (written above) and the bias's value i (contract).
                    unsafe { *c.offset(i as isize * rsc) = epi.scalar(i, *c.offset(i as isize * rsc)) };
                }
            }
            return;
        }
        PACKS.with(|packs| {
            let mut packs = packs.borrow_mut();
            let pb = &mut packs.1;
            let b_len = NC.min(n).div_ceil(NR) * NR * KC.min(k);
            if pb.len() < b_len {
                pb.resize(b_len, 0.0);
            }
            for jc in (0..n).step_by(NC) {
                let nc = NC.min(n - jc);
                for pc in (0..k).step_by(KC) {
                    let kc = KC.min(k - pc);
                    let beta = if pc == 0 { 0.0 } else { 1.0 };
                    // SAFETY: the B block lies inside B (contract); pb holds ceil(nc/NR)·NR·kc elements.
                    unsafe { pack_b(kc, nc, b.offset(pc as isize * rsb + jc as isize * csb), rsb, csb, pb) };
                    let cols = tile_cols();
                    let last = pc + kc == k;
                    let (main, tail) = split_tail(nc);
                    for ir in (0..rows).step_by(2 * MR) {
                        let e = if last { epi.at_row(ir) } else { Epi::NONE };
                        let here = a_block(i0, ir, pc, k);
                        // the weights' next depth block, prefetched while this one is used (in a whole model a
                        // layer's weights come from memory: a 512→256 1×1 layer over 8×8 took 0.15 ms that way
                        // without, 0.073 ms with them in L2)
                        let next = if ir + 2 * MR < rows { a_block(i0, ir + 2 * MR, pc, k) } else if pc + kc < k { a_block(i0, 0, pc + kc, k) } else { here };
                        for jr in (0..main).step_by(cols) {
                            // SAFETY: the A panels' blocks hold kc·MR elements inside data (the next panel exists
                            // when more than MR rows are left), the B panels kc·NR each; the tile's valid part
                            // lies inside C, its rows' bias values inside epi's (contract); PackedA exists only
                            // with AVX2/FMA. A prefetch address needs no validity.
                            unsafe {
                                tile_rows::<PF_A>(
                                    (2 * MR).min(rows - ir),
                                    kc,
                                    a.data.as_ptr().add(here),
                                    MR * k,
                                    next as isize - here as isize,
                                    pb.as_ptr().add(jr * kc),
                                    0,
                                    NR * kc,
                                    1.0,
                                    beta,
                                    c.offset(ir as isize * rsc + (jc + jr) as isize),
                                    rsc,
                                    1,
                                    cols.min(main - jr),
                                    e,
                                )
                            };
                        }
                    }
                    if tail > 0 {
                        let e = if last { epi } else { Epi::NONE };
                        // SAFETY: the row panels from i0 hold kc·MR values each from the depth block (and 2 more
                        // after the last panel for the 8-lane loads); the tail's columns lie in the packed panel
                        // from column main (pb holds ceil(nc/NR) panels); C's rows × tail part from column jc + main
                        // is ours (contract).
                        unsafe { narrow_cols(rows, kc, a.data.as_ptr().add(a_block(i0, 0, pc, k)), MR * k, pb.as_ptr().add(main * kc), tail, 1.0, beta, c.add(jc + main), rsc, e) };
                    }
                }
            }
        });
    }

    /// `c[i·rsc] ← Σ_p A[i0 + i, p] · b[p·rsb]` for `i < rows`: a packed A times one column, each panel's MR
    /// rows in the lanes of one vector, four partial sums over the depth.
    ///
    /// # Safety
    /// As for [`gemm_packed_a`] with n = 1.
    #[target_feature(enable = "avx2,fma")]
    unsafe fn gemv_packed_a(a: &PackedA, i0: usize, rows: usize, b: *const f32, rsb: isize, c: *mut f32, rsc: isize) {
        let k = a.k;
        for ir in (0..rows).step_by(MR) {
            let panel = (i0 + ir) / MR;
            // SAFETY: the panel's k·MR values lie in data, with 2 zeros after the last panel for the 8-lane loads;
            // B's k values are readable and C's rows are ours (contract).
            unsafe {
                let ap = a.data.as_ptr().add(panel * MR * k);
                let mut acc = [_mm256_setzero_ps(); 4];
                let mut p = 0;
                while p + 4 <= k {
                    for (q, s) in acc.iter_mut().enumerate() {
                        let x = _mm256_set1_ps(*b.offset((p + q) as isize * rsb));
                        *s = _mm256_fmadd_ps(_mm256_loadu_ps(ap.add((p + q) * MR)), x, *s);
                    }
                    p += 4;
                }
                while p < k {
                    let x = _mm256_set1_ps(*b.offset(p as isize * rsb));
                    acc[0] = _mm256_fmadd_ps(_mm256_loadu_ps(ap.add(p * MR)), x, acc[0]);
                    p += 1;
                }
                let sum = _mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3]));
                let mut lanes = [0f32; 8];
                _mm256_storeu_ps(lanes.as_mut_ptr(), sum);
                for (i, &v) in lanes.iter().enumerate().take(MR.min(rows - ir)) {
                    *c.offset((ir + i) as isize * rsc) = v;
                }
            }
        }
    }

    /// `C[.., j0..j0 + nc] ← alpha·A·B[.., j0..j0 + nc]` for the `m × k` matrix A (element (i, p) at
    /// `a + i·rsa + p·csa`) and a packed B; C's element (i, j) at `c + i·rsc + (j - j0)`. `j0` is a multiple of
    /// NR ([`NR_PACKED`]). C is written, not read.
    ///
    /// # Safety
    /// Every addressed element of A is readable; C's `m × nc` elements are writable and accessed by nothing else
    /// during the call; `j0 + nc ≤ b.n()`; the CPU has AVX2 and FMA (true for any [`PackedB`]).
    #[allow(clippy::too_many_arguments)]
    pub(crate) unsafe fn gemm_packed(m: usize, a: *const f32, rsa: isize, csa: isize, b: &PackedB, j0: usize, nc: usize, alpha: f32, c: *mut f32, rsc: isize) {
        debug_assert!(j0.is_multiple_of(NR) && j0 + nc <= b.n);
        let k = b.k;
        if m == 0 || nc == 0 {
            return;
        }
        if m == 1 {
            // SAFETY: forwarded (A's row of k elements, C's nc elements, the panels inside data).
            unsafe { gemv_packed(a, csa, b, j0, nc, alpha, c) };
            return;
        }
        PACKS.with(|packs| {
            let mut packs = packs.borrow_mut();
            let pa = &mut packs.0;
            let a_len = MC.min(m).div_ceil(MR) * MR * KC.min(k);
            if pa.len() < a_len {
                pa.resize(a_len, 0.0);
            }
            for pc in (0..k).step_by(KC) {
                let kc = KC.min(k - pc);
                let beta = if pc == 0 { 0.0 } else { 1.0 };
                for ic in (0..m).step_by(MC) {
                    let mc = MC.min(m - ic);
                    // SAFETY: the A block lies inside A (contract); pa holds ceil(mc/MR)·MR·kc elements.
                    unsafe { pack_a(mc, kc, a.offset(ic as isize * rsa + pc as isize * csa), rsa, csa, pa) };
                    let cols = tile_cols();
                    for jr in (0..nc).step_by(cols) {
                        let panel = (j0 + jr) / NR;
                        for ir in (0..mc).step_by(2 * MR) {
                            // SAFETY: the A panels hold kc·MR elements (the next one exists when more than MR rows
                            // are left), the B panels' blocks kc·NR each (inside data: a tile wider than NR has
                            // its columns in the next panel, j0 + nc ≤ n); the tile's valid part lies inside C
                            // (contract); PackedB exists only with AVX2/FMA.
                            unsafe {
                                tile_rows::<0>(
                                    (2 * MR).min(mc - ir),
                                    kc,
                                    pa.as_ptr().add(ir * kc),
                                    MR * kc,
                                    0,
                                    b.data.as_ptr().add(panel * NR * k + pc * NR),
                                    0,
                                    NR * k,
                                    alpha,
                                    beta,
                                    c.offset((ic + ir) as isize * rsc + jr as isize),
                                    rsc,
                                    1,
                                    cols.min(nc - jr),
                                    Epi::NONE,
                                )
                            };
                        }
                    }
                }
            }
        });
    }

    /// `C[i0..i0 + rows, j0..j0 + nc] ← alpha · A · B` with both operands packed (a product's activations packed
    /// once and shared by the tasks that split its columns, instead of each task packing them again); C's element
    /// (i, j) at `c + (i - i0)·rsc + (j - j0)`. `i0` is a multiple of MR ([`MR_PACKED`]), `j0` of NR. The same
    /// tiles and summation order as [`gemm_packed`]. C is written, not read.
    ///
    /// # Safety
    /// C's `rows × nc` elements are writable and accessed by nothing else during the call; `i0 + rows ≤ a.m()`,
    /// `j0 + nc ≤ b.n()`, `a.k() == b.k()`; the CPU has AVX2 and FMA (true for any packing).
    #[allow(clippy::too_many_arguments)]
    pub(crate) unsafe fn gemm_packed_ab(a: &PackedA, i0: usize, rows: usize, b: &PackedB, j0: usize, nc: usize, alpha: f32, c: *mut f32, rsc: isize) {
        debug_assert!(j0.is_multiple_of(NR) && j0 + nc <= b.n && a.k == b.k);
        // SAFETY: the panels from j0 / NR on lie inside b's data (j0 + nc ≤ n, a panel holds NR·k values); the rest
        // is forwarded (contract).
        unsafe { gemm_packed_a_panels(a, i0, rows, b.data.as_ptr().add(j0 / NR * NR * b.k), nc, alpha, c, rsc, Epi::NONE) }
    }

    /// `C[i0..i0 + rows, ..nc] ← alpha · A · B` for a packed A and a B the caller wrote in the packed layout
    /// ([`PackedB`]'s: panel `jp` of NR columns holds `B[p, jp·NR + j]` at `b[jp·NR·k + p·NR + j]`, k = a.k()):
    /// a producer that computes B (Winograd's input transform, im2col's panels) writes it there directly instead of
    /// into a matrix that a GEMM would pack again. Same tiles and summation order as [`gemm_packed_ab`]; each
    /// finished value goes through `epi` (its bias indexed from row i0), as in [`gemm_packed_a`].
    ///
    /// # Safety
    /// `b` holds ceil(nc / NR) panels of NR·k readable values; C's `rows × nc` elements (element (i, j) at
    /// `c + (i - i0)·rsc + j`) are writable and accessed by nothing else during the call; `i0` is a multiple of MR
    /// and `i0 + rows ≤ a.m()`; the CPU has AVX2 and FMA (true for any [`PackedA`]).
    #[allow(clippy::too_many_arguments)]
    pub(crate) unsafe fn gemm_packed_a_panels(a: &PackedA, i0: usize, rows: usize, b: *const f32, nc: usize, alpha: f32, c: *mut f32, rsc: isize, epi: Epi) {
        debug_assert!(i0.is_multiple_of(MR) && i0 + rows <= a.m);
        let k = a.k;
        let cols = tile_cols();
        let b_bytes = nc.div_ceil(NR) * NR * k * 4;
        let (a_big, b_big) = (rows * k * 4 > A_STREAM_BYTES, b_bytes > B_REUSE_BYTES);
        // A (the weights) is always prefetched, each tile the next depth block of A the loops below take: in a
        // whole model a layer's weights come from memory, not from the caches an isolated benchmark leaves them in
        // (YOLO C2f 8.78 → 8.04 ms, ResNet-18 7.12 → 6.75, MobileNetV2 4.72 → 4.40 at 1 thread; forty 128-channel
        // 3×3 layers over 8×8 in one model, 6.23 → 3.98 ms; one such layer alone, its weights in L2, 3% slower).
        // B only where it streams too: prefetching it from L2 cost more than it gained.
        let pfb = b_big;
        let at = |ir: usize, pc: usize| a_block(i0, ir, pc, k);
        let (main, tail) = split_tail(nc);
        let tile = |ir: usize, pc: usize, jr: usize, next: usize| {
            let kc = KC.min(k - pc);
            let beta = if pc == 0 { 0.0 } else { 1.0 };
            let e = if pc + kc == k { epi.at_row(ir) } else { Epi::NONE };
            // SAFETY: the A panels' depth blocks hold kc·MR values inside a's data (the next panel exists when more
            // than MR rows are left), the B panels' kc·NR each inside b (a tile wider than NR has its columns in
            // the next panel, which exists when nc - jr > NR); the tile's valid part lies inside C (contract).
            unsafe {
                let pfa = next as isize - at(ir, pc) as isize;
                let (ap, bp, cp) = (a.data.as_ptr().add(at(ir, pc)), b.add(jr / NR * NR * k + pc * NR), c.offset(ir as isize * rsc + jr as isize));
                let (rs, nr) = ((2 * MR).min(rows - ir), cols.min(main - jr));
                if pfb {
                    tile_rows::<{ PF_A | PF_B }>(rs, kc, ap, MR * k, pfa, bp, PREFETCH_B as isize, NR * k, alpha, beta, cp, rsc, 1, nr, e)
                } else {
                    tile_rows::<PF_A>(rs, kc, ap, MR * k, pfa, bp, 0, NR * k, alpha, beta, cp, rsc, 1, nr, e)
                }
            }
        };
        // the last few columns past a multiple of NR, over `rs` rows from row ir
        let narrow = |ir: usize, rs: usize, pc: usize| {
            let kc = KC.min(k - pc);
            let beta = if pc == 0 { 0.0 } else { 1.0 };
            let e = if pc + kc == k { epi.at_row(ir) } else { Epi::NONE };
            // SAFETY: as for `tile`: the row panels from ir hold kc·MR values each from the depth block (2 more
            // after the last panel), the tail's columns lie in the panel from column main, C's part is ours.
            unsafe { narrow_cols(rs, kc, a.data.as_ptr().add(at(ir, pc)), MR * k, b.add(main * k + pc * NR), tail, alpha, beta, c.offset(ir as isize * rsc + main as isize), rsc, e) };
        };
        if a_big && !b_big {
            // A (a layer's weights, megabytes) streamed once, two panels at a time, each panel's whole depth in
            // order; B, small, is read again from L2 for each pair of row panels
            for ir in (0..rows).step_by(2 * MR) {
                for pc in (0..k).step_by(KC) {
                    let next = if pc + KC < k { at(ir, pc + KC) } else if ir + 2 * MR < rows { at(ir + 2 * MR, 0) } else { at(ir, pc) };
                    for jr in (0..main).step_by(cols) {
                        tile(ir, pc, jr, next);
                    }
                    if tail > 0 {
                        narrow(ir, (2 * MR).min(rows - ir), pc);
                    }
                }
            }
        } else {
            // B read once, each depth block of A's panels kept in L2 across B's column tiles
            for pc in (0..k).step_by(KC) {
                for jr in (0..main).step_by(cols) {
                    for ir in (0..rows).step_by(2 * MR) {
                        let next = if ir + 2 * MR < rows {
                            at(ir + 2 * MR, pc)
                        } else if jr + cols < main {
                            at(0, pc)
                        } else if pc + KC < k {
                            at(0, pc + KC)
                        } else {
                            at(ir, pc)
                        };
                        tile(ir, pc, jr, next);
                    }
                }
                if tail > 0 {
                    narrow(0, rows, pc);
                }
            }
        }
    }

    /// `c[..nc] ← alpha · a · B[.., j0..j0 + nc]` for one row `a` (element p at `a + p·csa`): the decode step's
    /// matrix-vector product, streaming [`GEMV_PANELS`] panels at a time over the whole depth, each output
    /// element one FMA chain in k order.
    ///
    /// # Safety
    /// As for [`gemm_packed`] with m = 1.
    unsafe fn gemv_packed(a: *const f32, csa: isize, b: &PackedB, j0: usize, nc: usize, alpha: f32, c: *mut f32) {
        let panels = nc.div_ceil(NR);
        let first = j0 / NR;
        let mut q = 0;
        while q < panels {
            let take = GEMV_PANELS.min(panels - q);
            let cols = (nc - q * NR).min(take * NR);
            // SAFETY: panels first + q .. first + q + take lie inside data (j0 + nc ≤ n); the columns q·NR ..
            // q·NR + cols of C are writable (contract); A's k elements are readable.
            unsafe {
                let bp = b.data.as_ptr().add((first + q) * NR * b.k);
                let cp = c.add(q * NR);
                match take {
                    4 => row_kernel::<4>(b.k, a, csa, bp, alpha, cp, cols),
                    3 => row_kernel::<3>(b.k, a, csa, bp, alpha, cp, cols),
                    2 => row_kernel::<2>(b.k, a, csa, bp, alpha, cp, cols),
                    _ => row_kernel::<1>(b.k, a, csa, bp, alpha, cp, cols),
                }
            }
            q += take;
        }
    }

    /// P consecutive panels (each k·NR values, panel stride k·NR) times one row: `c[..cols] ← alpha · Σ_p a[p]·B[p, ..]`.
    ///
    /// # Safety
    /// `a + p·csa` readable for p < k, `b` holds P·k·NR readable values, `c` has `cols ≤ P·NR` writable values;
    /// the CPU has AVX2 and FMA.
    #[target_feature(enable = "avx2,fma")]
    unsafe fn row_kernel<const P: usize>(k: usize, a: *const f32, csa: isize, b: *const f32, alpha: f32, c: *mut f32, cols: usize) {
        // SAFETY (whole body): loads within the P panels and A's row, stores within c's cols values (contract).
        unsafe {
            let mut acc = [[_mm256_setzero_ps(); 2]; P];
            let stride = k * NR;
            for p in 0..k {
                let av = _mm256_broadcast_ss(&*a.offset(p as isize * csa));
                for (q, pair) in acc.iter_mut().enumerate() {
                    let bp = b.add(q * stride + p * NR);
                    pair[0] = _mm256_fmadd_ps(av, _mm256_loadu_ps(bp), pair[0]);
                    pair[1] = _mm256_fmadd_ps(av, _mm256_loadu_ps(bp.add(8)), pair[1]);
                }
            }
            let va = _mm256_set1_ps(alpha);
            if cols == P * NR {
                for (q, pair) in acc.iter().enumerate() {
                    _mm256_storeu_ps(c.add(q * NR), _mm256_mul_ps(va, pair[0]));
                    _mm256_storeu_ps(c.add(q * NR + 8), _mm256_mul_ps(va, pair[1]));
                }
            } else {
                let mut tmp = [[0f32; NR]; P];
                for (t, pair) in tmp.iter_mut().zip(&acc) {
                    _mm256_storeu_ps(t.as_mut_ptr(), _mm256_mul_ps(va, pair[0]));
                    _mm256_storeu_ps(t.as_mut_ptr().add(8), _mm256_mul_ps(va, pair[1]));
                }
                for (j, &v) in tmp.iter().flatten().enumerate().take(cols) {
                    *c.add(j) = v;
                }
            }
        }
    }
}

/// From this size of A (bytes), [`x86::gemm_packed_a_panels`] streams A once, panel pair by panel pair, instead
/// of a depth block of every panel at a time: a 256-channel 8×8 ResNet layer (2.4 MB of weights, read from
/// memory in a whole model) took 0.74 ms with the weights read in 6 KiB runs 55 KiB apart, 0.64 ms in order.
#[cfg(target_arch = "x86_64")]
const A_STREAM_BYTES: usize = 1 << 20;

/// The largest B that [`x86::gemm_packed_a_panels`] reads again for each pair of A's row panels (it stays in L2);
/// a larger one (a ResNet's last stage with the weights as B: 9 MB) is read once.
#[cfg(target_arch = "x86_64")]
const B_REUSE_BYTES: usize = 768 << 10;

/// Panels one pass of the matrix-vector kernel covers: 8 independent FMA chains hide the FMA latency that a single
/// panel's two chains would expose.
#[cfg(target_arch = "x86_64")]
const GEMV_PANELS: usize = 4;

/// Columns per panel of a packed B: a split of a product's columns between tasks starts at a multiple of this.
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
pub(crate) const NR_PACKED: usize = NR;

/// Rows per panel of a packed A: a split of a product's rows between tasks that share one packing starts at a
/// multiple of this.
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
pub(crate) const MR_PACKED: usize = MR;

#[cfg(target_arch = "x86_64")]
pub(crate) use x86::{gemm_packed, gemm_packed_a, gemm_packed_a_panels, gemm_packed_ab, pack_panel, tile_cols, Epi, PackedA, PackedB};

#[cfg(test)]
mod tests {
    use super::*;

    /// The AVX-512 tile over two panels gives the same bits as the AVX2 tile on each panel (each output element
    /// is the same FMA chain), for full and partial widths and every row count.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn the_wide_tile_equals_two_narrow_ones_bit_for_bit() {
        if !super::super::vector::avx512() {
            eprintln!("note: no AVX-512 here; the wide tile is not run");
            return;
        }
        let kc = 37;
        let val = |i: usize| ((i * 7919 % 1000) as f32 - 500.0) / 97.0;
        let a: Vec<f32> = (0..kc * MR).map(val).collect();
        let b: Vec<f32> = (0..2 * kc * NR).map(|i| val(i + 13)).collect();
        for mr in 1..=MR {
            for nr in [NR + 1, 2 * NR - 3, 2 * NR] {
                for beta in [0.0f32, 0.5] {
                    let ldc = 2 * NR + 1;
                    let c0: Vec<f32> = (0..MR * ldc).map(|i| val(i + 99)).collect();
                    let (mut wide, mut narrow) = (c0.clone(), c0.clone());
                    // SAFETY: the panels hold kc·MR and 2·kc·NR values; C holds MR rows of ldc ≥ nr; AVX-512 checked.
                    unsafe {
                        x86::tile(mr, kc, a.as_ptr(), b.as_ptr(), kc * NR, 0.75, beta, wide.as_mut_ptr(), ldc as isize, 1, nr);
                        x86::tile(mr, kc, a.as_ptr(), b.as_ptr(), kc * NR, 0.75, beta, narrow.as_mut_ptr(), ldc as isize, 1, NR);
                        x86::tile(mr, kc, a.as_ptr(), b.as_ptr().add(kc * NR), kc * NR, 0.75, beta, narrow.as_mut_ptr().add(NR), ldc as isize, 1, nr - NR);
                    }
                    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                    assert_eq!(bits(&wide), bits(&narrow), "mr {mr} nr {nr} beta {beta}");
                }
            }
        }
    }

    /// Two row panels through the AVX-512 tall tile ([`x86::tile_rows`] on one B panel) give the bits of the
    /// AVX2 tile on each panel: every row count up to two panels, full and partial widths, with and without beta
    /// and the bias-and-clamp epilogue.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn the_tall_tile_equals_two_narrow_ones_bit_for_bit() {
        if !super::super::vector::avx512() {
            eprintln!("note: no AVX-512 here; the tall tile is not run");
            return;
        }
        let kc = 41;
        let val = |i: usize| ((i * 7919 % 1000) as f32 - 500.0) / 97.0;
        let a: Vec<f32> = (0..2 * kc * MR).map(val).collect();
        let b: Vec<f32> = (0..kc * NR).map(|i| val(i + 13)).collect();
        let bias: Vec<f32> = (0..2 * MR).map(|i| val(i + 5)).collect();
        for rows in 1..=2 * MR {
            for nr in [1, 7, NR] {
                for beta in [0.0f32, 0.5] {
                    for epi in [x86::Epi::NONE, x86::Epi::new(Some(&bias), Some((-3.0, 2.5)))] {
                        let ldc = NR + 3;
                        let c0: Vec<f32> = (0..2 * MR * ldc).map(|i| val(i + 99)).collect();
                        let (mut tall, mut narrow) = (c0.clone(), c0.clone());
                        // SAFETY: A holds two panels of kc·MR, B one of kc·NR; C holds 2·MR rows of ldc ≥ nr; the
                        // bias 2·MR values; AVX-512 checked.
                        unsafe {
                            if rows % 2 == 0 {
                                x86::tile_rows::<{ x86::PF_A | x86::PF_B }>(rows, kc, a.as_ptr(), kc * MR, 768, b.as_ptr(), 1024, kc * NR, 0.75, beta, tall.as_mut_ptr(), ldc as isize, 1, nr, epi);
                            } else {
                                x86::tile_rows::<0>(rows, kc, a.as_ptr(), kc * MR, 0, b.as_ptr(), 0, kc * NR, 0.75, beta, tall.as_mut_ptr(), ldc as isize, 1, nr, epi);
                            }
                            x86::tile_epi(rows.min(MR), kc, a.as_ptr(), b.as_ptr(), kc * NR, 0.75, beta, narrow.as_mut_ptr(), ldc as isize, 1, nr, epi);
                            if rows > MR {
                                let c1 = narrow.as_mut_ptr().add(MR * ldc);
                                x86::tile_epi(rows - MR, kc, a.as_ptr().add(kc * MR), b.as_ptr(), kc * NR, 0.75, beta, c1, ldc as isize, 1, nr, epi.at_row(MR));
                            }
                        }
                        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                        assert_eq!(bits(&tall), bits(&narrow), "rows {rows} nr {nr} beta {beta} epi {epi:?}");
                    }
                }
            }
        }
    }

    /// Both operands packed ([`x86::gemm_packed_ab`], the tasks of a split product sharing one packing of A) give
    /// the bits of [`x86::gemm_packed`] (A packed per call), for row and column blocks at panel boundaries.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn a_shared_packing_of_a_gives_the_same_bits() {
        let val = |i: usize| ((i * 7919 % 1000) as f32 - 500.0) / 97.0;
        for &(m, k, n) in &[(2, 5, 16), (32, 300, 100), (13, 513, 70)] {
            let a: Vec<f32> = (0..m * k).map(val).collect();
            let bm: Vec<f32> = (0..k * n).map(|i| val(i + 7)).collect();
            let pa = x86::PackedA::new(&a, m, k).expect("AVX2 CPU");
            let pb = x86::PackedB::new(&bm, k, n, n, 1).expect("AVX2 CPU");
            for (i0, j0) in [(0, 0), (MR, NR), (0, 2 * NR)] {
                if i0 >= m || j0 >= n {
                    continue;
                }
                let (rows, cols) = (m - i0, n - j0);
                let (mut x, mut y) = (vec![0f32; rows * cols], vec![0f32; rows * cols]);
                // SAFETY: A's rows from i0 and C's rows × cols elements are in bounds; i0, j0 at panel boundaries.
                unsafe {
                    x86::gemm_packed_ab(&pa, i0, rows, &pb, j0, cols, 0.5, x.as_mut_ptr(), cols as isize);
                    x86::gemm_packed(rows, a.as_ptr().add(i0 * k), k as isize, 1, &pb, j0, cols, 0.5, y.as_mut_ptr(), cols as isize);
                }
                let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                assert_eq!(bits(&x), bits(&y), "{m}x{k}x{n} from ({i0}, {j0})");
            }
        }
    }

    /// The last 1-4 columns past a multiple of NR (computed by the narrow kernel, one 8-lane FMA per row panel)
    /// give the bits of the same columns inside a full-width product (the tile kernels), through both packed-A
    /// drivers: row counts over one to several groups of eight panels with partial last panels, from a panel
    /// boundary, depths over one and two KC blocks, A streamed (over 1 MiB) or not, with and without the
    /// epilogue; and within rounding of an f64 product.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn the_narrow_tail_gives_the_tile_kernels_bits() {
        let val = |i: usize| ((i * 7919 % 1000) as f32 - 500.0) / 97.0;
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        for &(m, k) in &[(1, 3), (7, 40), (13, 300), (64, 384), (61, 17), (200, 1400)] {
            let a: Vec<f32> = (0..m * k).map(val).collect();
            let bias: Vec<f32> = (0..m).map(|i| val(i * 31) / 10.0).collect();
            let pa = x86::PackedA::new(&a, m, k).expect("AVX2 CPU");
            let wide = 2 * NR;
            let bw: Vec<f32> = (0..k * wide).map(|i| val(i + 3) / 50.0).collect();
            let pbw = x86::PackedB::new(&bw, k, wide, wide, 1).expect("AVX2 CPU");
            for t in 1..=x86::NARROW_MAX {
                for n in [t, NR + t] {
                    // the first n columns of the wide B, as their own matrix
                    let bn: Vec<f32> = (0..k * n).map(|e| bw[e / n * wide + e % n]).collect();
                    let pbn = x86::PackedB::new(&bn, k, n, n, 1).expect("AVX2 CPU");
                    for epi in [x86::Epi::NONE, x86::Epi::new(Some(&bias), Some((-3.0, 2.5)))] {
                        for i0 in [0, MR] {
                            if i0 >= m {
                                continue;
                            }
                            let rows = m - i0;
                            let e = if epi.bias_is_null() { epi } else { x86::Epi::new(Some(&bias[i0..]), Some((-3.0, 2.5))) };
                            let (mut full, mut got, mut panels, mut full_panels) = (vec![f32::NAN; rows * wide], vec![f32::NAN; rows * n], vec![f32::NAN; rows * n], vec![f32::NAN; rows * wide]);
                            // SAFETY: B's k × n and k × wide row-major matrices, C's rows × n (× wide) values, the
                            // packed panels of both widths and the bias from i0 are in bounds; i0 at a panel boundary.
                            unsafe {
                                x86::gemm_packed_a(&pa, i0, rows, wide, bw.as_ptr(), wide as isize, 1, full.as_mut_ptr(), wide as isize, e);
                                x86::gemm_packed_a(&pa, i0, rows, n, bn.as_ptr(), n as isize, 1, got.as_mut_ptr(), n as isize, e);
                                x86::gemm_packed_a_panels(&pa, i0, rows, pbn.data_ptr(), n, 1.0, panels.as_mut_ptr(), n as isize, e);
                                x86::gemm_packed_a_panels(&pa, i0, rows, pbw.data_ptr(), wide, 1.0, full_panels.as_mut_ptr(), wide as isize, e);
                            }
                            let want: Vec<f32> = full.chunks(wide).flat_map(|r| r[..n].to_vec()).collect();
                            let want_panels: Vec<f32> = full_panels.chunks(wide).flat_map(|r| r[..n].to_vec()).collect();
                            if n > 1 {
                                // (one column takes gemm_packed_a's matrix-vector kernel, another summation order)
                                assert_eq!(bits(&got), bits(&want), "gemm_packed_a {m}x{k}x{n} from row {i0}, epi {epi:?}");
                            }
                            assert_eq!(bits(&panels), bits(&want_panels), "gemm_packed_a_panels {m}x{k}x{n} from row {i0}, epi {epi:?}");
                            if epi.bias_is_null() {
                                for (i, row) in got.chunks(n).enumerate() {
                                    for (j, &g) in row.iter().enumerate() {
                                        let s: f64 = (0..k).map(|p| a[(i0 + i) * k + p] as f64 * bn[p * n + j] as f64).sum();
                                        assert!((g as f64 - s).abs() <= 1e-5 * (1.0 + k as f64).sqrt() * (1.0 + s.abs()), "{m}x{k}x{n}: C[{i},{j}] {g} vs {s}");
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }

    /// The write-back epilogue (bias per row, then a clamp) gives the bits of the same bias and clamp applied to
    /// the finished product afterwards: full and partial tiles, a depth over two KC blocks (applied at the last
    /// only), one column (the matrix-vector path), rows from a panel boundary.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn the_epilogue_equals_a_pass_after_the_product() {
        let val = |i: usize| ((i * 7919 % 1000) as f32 - 500.0) / 97.0;
        for &(m, k, n) in &[(13, 7, 40), (6, 300, 33), (20, 520, 70), (9, 17, 1), (1, 5, 3)] {
            let a: Vec<f32> = (0..m * k).map(val).collect();
            let bm: Vec<f32> = (0..k * n).map(|i| val(i + 3) / 50.0).collect();
            let bias: Vec<f32> = (0..m).map(|i| val(i * 31) / 10.0).collect();
            let pa = x86::PackedA::new(&a, m, k).expect("AVX2 CPU");
            for clamp in [None, Some((0.0, 6.0)), Some((-1.0, f32::INFINITY))] {
                for i0 in [0, MR] {
                    if i0 >= m {
                        continue;
                    }
                    let rows = m - i0;
                    let (mut got, mut want) = (vec![f32::NAN; rows * n], vec![f32::NAN; rows * n]);
                    // SAFETY: B is k × n row-major, C rows × n, the bias holds the rows' values; i0 at a panel boundary.
                    unsafe {
                        x86::gemm_packed_a(&pa, i0, rows, n, bm.as_ptr(), n as isize, 1, got.as_mut_ptr(), n as isize, x86::Epi::new(Some(&bias[i0..]), clamp));
                        x86::gemm_packed_a(&pa, i0, rows, n, bm.as_ptr(), n as isize, 1, want.as_mut_ptr(), n as isize, x86::Epi::NONE);
                    }
                    for (i, row) in want.chunks_mut(n).enumerate() {
                        for v in row {
                            *v += bias[i0 + i];
                            if let Some((lo, hi)) = clamp {
                                *v = v.max(lo).min(hi);
                            }
                        }
                    }
                    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                    assert_eq!(bits(&got), bits(&want), "{m}x{k}x{n} from row {i0}, clamp {clamp:?}");
                }
            }
        }
    }

    /// A packing of the transposed matrix ([`x86::PackedA::new_transposed_in`]: element (i, p) at `a[p·lda + i]`)
    /// equals the packing of the same matrix written out row-major, also in a kept buffer that holds another
    /// matrix's values (nothing of them may survive: partial panels are zero-filled), for row counts around MR.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn a_transposed_packing_equals_the_row_major_one() {
        let val = |i: usize| ((i * 7919 % 1000) as f32 - 500.0) / 97.0;
        let mut buf = vec![f32::NAN; 5000];
        for &(m, k, lda) in &[(1, 3, 1), (6, 4, 9), (7, 5, 7), (16, 33, 20), (49, 64, 49), (5, 1, 5)] {
            let t: Vec<f32> = (0..k * lda).map(val).collect();
            let rows: Vec<f32> = (0..m * k).map(|e| t[(e % k) * lda + e / k]).collect();
            let want = x86::PackedA::new(&rows, m, k).expect("AVX2 CPU");
            let got = x86::PackedA::new_transposed_in(&t, m, k, lda, buf).expect("AVX2 CPU");
            let bits = |p: x86::PackedA| p.into_buffer().iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            let got_bits = bits(got.clone());
            assert_eq!(got_bits, bits(want), "{m}x{k}, lda {lda}");
            buf = got.into_buffer();
            buf.iter_mut().for_each(|v| *v = f32::NAN);
            buf.resize(5000, f32::NAN);
        }
    }

    /// Against a plain triple loop (f64 sums) over edge sizes of every blocking level, strided and transposed
    /// operands, and beta 0 (C holding NaN, which must not leak), 1 and 0.5.
    #[test]
    fn matches_a_naive_product() {
        let rnd = |n: usize, seed: u64| -> Vec<f32> {
            let mut s = seed.wrapping_mul(0x9E3779B97F4A7C15) | 1;
            (0..n)
                .map(|_| {
                    s ^= s << 13;
                    s ^= s >> 7;
                    s ^= s << 17;
                    ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
                })
                .collect()
        };
        for &(m, k, n) in &[(1, 1, 1), (6, 1, 16), (7, 3, 17), (5, 257, 33), (73, 300, 515), (12, 513, 40), (150, 20, 1030)] {
            for (ta, tb) in [(false, false), (true, false), (false, true), (true, true)] {
                for beta in [0.0f32, 1.0, 0.5] {
                    let a = rnd(m * k, 1);
                    let b = rnd(k * n, 2);
                    // C with a row stride wider than n (a view into a bigger matrix)
                    let ldc = n + 3;
                    let c0: Vec<f32> = rnd(m * ldc, 3);
                    let mut c = if beta == 0.0 { vec![f32::NAN; m * ldc] } else { c0.clone() };
                    let (rsa, csa) = if ta { (1, m as isize) } else { (k as isize, 1) };
                    let (rsb, csb) = if tb { (1, k as isize) } else { (n as isize, 1) };
                    // SAFETY: the strides address exactly the m·k, k·n and m·ldc elements of the vectors.
                    unsafe { sgemm(m, k, n, 0.75, a.as_ptr(), rsa, csa, b.as_ptr(), rsb, csb, beta, c.as_mut_ptr(), ldc as isize, 1) };
                    for i in 0..m {
                        for j in 0..n {
                            let mut s = 0f64;
                            for p in 0..k {
                                let av = a[(i as isize * rsa + p as isize * csa) as usize];
                                let bv = b[(p as isize * rsb + j as isize * csb) as usize];
                                s += av as f64 * bv as f64;
                            }
                            let want = 0.75 * s + if beta == 0.0 { 0.0 } else { beta as f64 * c0[i * ldc + j] as f64 };
                            let got = c[i * ldc + j] as f64;
                            assert!((got - want).abs() <= 1e-5 * (1.0 + k as f64).sqrt() * (1.0 + want.abs()), "{m}x{k}x{n} ta {ta} tb {tb} beta {beta}: C[{i},{j}] {got} vs {want}");
                        }
                        for j in n..ldc {
                            let want = if beta == 0.0 { f32::NAN.to_bits() } else { c0[i * ldc + j].to_bits() };
                            assert_eq!(c[i * ldc + j].to_bits(), want, "padding column {j} touched");
                        }
                    }
                }
            }
        }
    }
}
