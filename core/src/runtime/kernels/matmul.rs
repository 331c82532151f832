//! Gemm and MatMul, and the blocked, parallel GEMM driver that the convolutions use too.
//!
//! # Threading scheme
//!
//! GEMMs go through [`matrixmultiply`], which can thread a call itself (env `MATMUL_NUM_THREADS`). Nesting
//! its threads inside the thread team's tasks would oversubscribe the cores, and running one big threaded call per
//! layer leaves the bias/activation epilogue as a separate, cache-cold pass. So this driver does the
//! parallelism itself: it cuts C into blocks, runs the blocks as tasks of the spinning thread team
//! ([`crate::runtime::spin_pool`], the one pool every kernel splits its work on), and in each task calls
//! matrixmultiply on sub-blocks small enough that matrixmultiply keeps them on the calling thread (it
//! threads a call only when `(m·k + k·n) / 16384 >= 2`, see [`CALL_BUDGET`]), then applies the epilogue
//! (bias, fused activation, Gemm's `beta·C`) to the block while it is still in cache. The result is one
//! parallel region per GEMM and exactly one computing thread per team thread, whatever
//! `MATMUL_NUM_THREADS` says. With `MATMUL_NUM_THREADS=1` matrixmultiply never threads, so the calls need
//! not be cut small (fewer, larger calls pack less): that is the best setting for callers that size the
//! thread count themselves (the team has as many threads as the current rayon pool), like the CLI.

use std::marker::PhantomData;

use half::{bf16, f16};
use crate::runtime::spin_pool;

use super::util::strides;
use super::input;
use crate::ir::ops::matmul::{gemm_dims, matmul_dims, MatMulDims};
use super::numeric::{vector, Real};
use crate::ir::{Activation, DType, Element, Tensor};

/// Largest `m·k + k·n` (in elements) of one matrixmultiply call when matrixmultiply may thread. It decides
/// the threads of a call as `min(MATMUL_NUM_THREADS, (m·k + k·n) / 16384)`, so calls below 2·16384 run on
/// the calling thread.
const CALL_BUDGET: usize = 2 * 16384 - 1;

/// The call size limit in force: none when `MATMUL_NUM_THREADS` makes matrixmultiply single-threaded
/// (it reads the variable once, the same way), else [`CALL_BUDGET`].
fn call_budget() -> usize {
    static BUDGET: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *BUDGET.get_or_init(|| match std::env::var("MATMUL_NUM_THREADS") {
        Ok(s) if !s.is_empty() => match s.parse::<usize>() {
            Ok(n) if n > 1 => CALL_BUDGET,
            _ => usize::MAX, // 0, 1 or unparsable: matrixmultiply uses one thread
        },
        _ => CALL_BUDGET, // unset: matrixmultiply uses every physical core
    })
}

/// Below this many multiply-adds a GEMM runs on the calling thread (handing out tasks costs more).
pub(super) const PAR_MIN_MACS: usize = 1 << 16;


/// `row[i] = act(row[i] + bias)`, with the activation chosen once outside the loop.
pub(super) fn bias_act<T: Real>(row: &mut [T], bias: Option<T>, act: Option<Activation>) {
    macro_rules! each {
        ($f:expr) => {
            match bias {
                Some(b) => vector::update(row, &|v: T| $f(v + b)),
                None => vector::update(row, &|v: T| $f(v)),
            }
        };
    }
    match act {
        None => {
            if let Some(b) = bias {
                vector::update(row, &|v: T| v + b);
            }
        }
        Some(Activation::Silu) => T::silu_rows(row, bias),
        Some(Activation::Relu) => each!(|x: T| x.relu()),
        Some(Activation::Relu6) => {
            let (lo, hi) = (T::ZERO, T::from_f32(6.0));
            each!(|x: T| x.clamp_to(lo, hi))
        }
        Some(Activation::Clip { min, max }) => {
            let (lo, hi) = (T::from_f32(min), T::from_f32(max));
            each!(|x: T| x.max_min(lo, hi))
        }
    }
}

/// A strided matrix operand: element (i, j) is `data[off + i·rs + j·cs]`.
#[derive(Clone, Copy, Debug)]
pub(super) struct MatRef<'a, T> {
    /// Backing storage.
    pub data: &'a [T],
    /// Offset of element (0, 0).
    pub off: usize,
    /// Row stride.
    pub rs: usize,
    /// Column stride.
    pub cs: usize,
}

impl<'a, T> MatRef<'a, T> {
    /// A row-major matrix with `cols` columns starting at `off`.
    pub fn rows(data: &'a [T], off: usize, cols: usize) -> Self {
        MatRef { data, off, rs: cols, cs: 1 }
    }
    /// The view starting at element (i, j).
    fn at(&self, i: usize, j: usize) -> Self {
        MatRef { off: self.off + i * self.rs + j * self.cs, ..*self }
    }
    /// True when every element of a `rows × cols` view is in bounds.
    fn fits(&self, rows: usize, cols: usize) -> bool {
        rows == 0 || cols == 0 || self.off + (rows - 1) * self.rs + (cols - 1) * self.cs < self.data.len()
    }
}

/// An output that parallel tasks fill in disjoint blocks (C of a GEMM).
pub(super) struct BlockOut<'a, T> {
    ptr: *mut T,
    len: usize,
    _borrow: PhantomData<&'a mut [T]>,
}

// SAFETY: a BlockOut is only a pointer to a `&mut [T]` borrowed for 'a; the methods that write through it
// are `unsafe` with the contract that concurrent calls touch disjoint elements, so sharing it across
// threads is sound when T itself is Send.
unsafe impl<T: Send> Send for BlockOut<'_, T> {}
// SAFETY: as above.
unsafe impl<T: Send> Sync for BlockOut<'_, T> {}

impl<'a, T: Real> BlockOut<'a, T> {
    /// Wraps `c` for block-wise writing.
    pub fn new(c: &'a mut [T]) -> Self {
        BlockOut { ptr: c.as_mut_ptr(), len: c.len(), _borrow: PhantomData }
    }

    /// Computes the `rows × cols` block of C at element offset `off` (row stride `rs`, column stride 1):
    /// `C ← alpha·A·B` (`+ C` when `accumulate`), then calls `epi(i, row)` on each of its rows.
    ///
    /// Splits the work into matrixmultiply calls within [`call_budget`], so it never spawns threads.
    ///
    /// # Safety
    /// No other call or reference may access the block's elements while this runs (concurrent calls must
    /// address disjoint blocks).
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn gemm_block(
        &self,
        rows: usize,
        cols: usize,
        k: usize,
        alpha: T,
        a: MatRef<T>,
        b: MatRef<T>,
        off: usize,
        rs: usize,
        accumulate: bool,
        mut epi: impl FnMut(usize, &mut [T]),
    ) {
        if rows == 0 || cols == 0 {
            return;
        }
        assert!(a.fits(rows, k) && b.fits(k, cols), "gemm operand out of bounds");
        assert!(cols <= rs || rows == 1, "gemm output rows overlap");
        assert!(off + (rows - 1) * rs + cols <= self.len, "gemm output out of bounds");
        if k == 0 {
            for i in 0..rows {
                // SAFETY: in bounds (asserted above) and exclusively ours (contract).
                let row = unsafe { std::slice::from_raw_parts_mut(self.ptr.add(off + i * rs), cols) };
                if !accumulate {
                    row.fill(T::ZERO);
                }
                epi(i, row);
            }
            return;
        }
        // Sub-blocks: k in chunks of at most 256, then rows and columns so that rb·kb + kb·cb fits.
        let budget = if T::gemm_may_thread() { call_budget() } else { usize::MAX };
        let kchunks = if budget == usize::MAX { 1 } else { k.div_ceil(256) };
        let kb = k.div_ceil(kchunks);
        let per = (budget / kb).max(2);
        let (rb, cb) = if rows.saturating_add(cols) <= per {
            (rows, cols)
        } else if cols <= per / 2 {
            (round_down(per - cols, 8).max(1).min(rows), cols)
        } else if rows <= per / 2 {
            (rows, round_down(per - rows, 16).max(1).min(cols))
        } else {
            (round_down(per / 2, 8).max(1).min(rows), round_down(per / 2, 16).max(1).min(cols))
        };
        for j0 in (0..cols).step_by(cb) {
            let cw = cb.min(cols - j0);
            for i0 in (0..rows).step_by(rb) {
                let rh = rb.min(rows - i0);
                for k0 in (0..k).step_by(kb) {
                    let kw = kb.min(k - k0);
                    let beta = if accumulate || k0 > 0 { T::ONE } else { T::ZERO };
                    let (aa, bb) = (a.at(i0, k0), b.at(k0, j0));
                    // SAFETY: the operands are in bounds (asserted for the whole block above, and the
                    // sub-block lies inside it); C's sub-block is in bounds and exclusively ours (contract).
                    // The sizes keep matrixmultiply single-threaded (CALL_BUDGET).
                    unsafe {
                        T::gemm_raw(
                            rh,
                            kw,
                            cw,
                            alpha,
                            aa.data.as_ptr().add(aa.off),
                            aa.rs as isize,
                            aa.cs as isize,
                            bb.data.as_ptr().add(bb.off),
                            bb.rs as isize,
                            bb.cs as isize,
                            beta,
                            self.ptr.add(off + i0 * rs + j0),
                            rs as isize,
                            1,
                        )
                    };
                }
            }
        }
        for i in 0..rows {
            // SAFETY: in bounds (asserted above) and exclusively ours (contract); the gemm calls are done.
            let row = unsafe { std::slice::from_raw_parts_mut(self.ptr.add(off + i * rs), cols) };
            epi(i, row);
        }
    }

    /// The pointer to element `off`, for a kernel that writes a block of `span` elements from there (checked to
    /// lie inside C); writing through it carries [`BlockOut::gemm_block`]'s disjointness contract. (Used by the
    /// x86-64 prepared kernels.)
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    pub fn block_ptr(&self, off: usize, span: usize) -> *mut T {
        assert!(off.checked_add(span).is_some_and(|e| e <= self.len), "output block out of bounds");
        // SAFETY: off ≤ len (asserted): inside the allocation or one past its end.
        unsafe { self.ptr.add(off) }
    }

    /// Row `i` of a block at `off` with row stride `rs`, columns `j0..j0 + cols`.
    ///
    /// # Safety
    /// As for [`BlockOut::gemm_block`]: nothing else may access these elements while the slice lives.
    #[allow(clippy::mut_from_ref)] // disjointness is the caller's contract, as for gemm_block
    pub unsafe fn row(&self, off: usize, len: usize) -> &mut [T] {
        assert!(off + len <= self.len, "output row out of bounds");
        // SAFETY: in bounds (asserted) and exclusively ours (contract).
        unsafe { std::slice::from_raw_parts_mut(self.ptr.add(off), len) }
    }
}

fn round_down(x: usize, m: usize) -> usize {
    x / m * m
}

/// Number of threads worth splitting over.
pub(super) fn threads() -> usize {
    spin_pool::threads()
}

/// The (rows, columns) of a GEMM's task blocks: rows up to 256, columns up to 1024 in multiples of `align`, then
/// smaller until `batches` products give at least `want` tasks (or blocks would get too thin).
pub(super) fn task_blocks(batches: usize, m: usize, n: usize, want: usize, align: usize) -> (usize, usize) {
    let mut mblocks = m.div_ceil(256);
    let mut nblocks = n.div_ceil(1024);
    while batches * mblocks * nblocks < want {
        if n / (nblocks + 1) >= 2 * align.max(16) {
            nblocks += 1;
        } else if m / (mblocks + 1) >= 16 {
            mblocks += 1;
        } else {
            break;
        }
    }
    (m.div_ceil(mblocks), n.div_ceil(nblocks).next_multiple_of(align).min(n.next_multiple_of(align)))
}

/// How many blocks of rows (each a whole number of the GEMM's `mr`-row panels) the `tasks` tasks of a split
/// GEMM with `m` rows are cut into, and the rows per block: enough for `target` tasks in all where the rows
/// allow, one block when the work is not split or the tasks already suffice. A CNN's late layers (7×7 or 8×8
/// pixels: one column tile) otherwise ran on one thread.
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
pub(super) fn row_blocks(par: bool, tasks: usize, target: usize, m: usize, mr: usize) -> (usize, usize) {
    if !par || tasks >= target || m == 0 {
        return (1, m.max(1));
    }
    let want = target.div_ceil(tasks.max(1));
    let panels = m.div_ceil(mr);
    // at least two panels per block: a one-panel block would spend more on packing its columns than on its rows
    let blocks = want.min(panels / 2).max(1);
    let rows_per = panels.div_ceil(blocks) * mr;
    (m.div_ceil(rows_per), rows_per)
}

/// Runs `f(0..n)` on the thread team when `par`, else sequentially.
pub(super) fn for_each_task(n: usize, par: bool, f: impl Fn(usize) + Sync + Send) {
    if par && n > 1 {
        spin_pool::run(n, &f);
    } else {
        (0..n).for_each(f);
    }
}

/// A batch of GEMMs `C[b] = alpha · A[b] · B[b]` of the same sizes, C contiguous `[batches, m, n]`.
pub(super) struct Batched<'a, T, FA, FB> {
    /// Number of products.
    pub batches: usize,
    /// Rows of A and C.
    pub m: usize,
    /// Columns of B and C.
    pub n: usize,
    /// Columns of A, rows of B.
    pub k: usize,
    /// Scale of the product.
    pub alpha: T,
    /// A of batch `b` (`m × k`).
    pub a: FA,
    /// B of batch `b` (`k × n`).
    pub b: FB,
    /// Phantom for the borrow.
    pub _p: PhantomData<&'a T>,
}

impl<'a, T, FA, FB> Batched<'a, T, FA, FB>
where
    T: Real,
    FA: Fn(usize) -> MatRef<'a, T> + Sync,
    FB: Fn(usize) -> MatRef<'a, T> + Sync,
{
    /// Computes all products into `c` (`[batches, m, n]`), calling `epi(b, i, j0, row)` on every output
    /// row segment `C[b][i][j0..j0 + row.len()]` once it is final. Parallel over blocks when large.
    pub fn run(&self, c: &mut [T], epi: impl Fn(usize, usize, usize, &mut [T]) + Sync) -> Result<(), String> {
        let (m, n, k, batches) = (self.m, self.n, self.k, self.batches);
        if c.len() != batches * m * n {
            return Err(format!("gemm output holds {} elements, {} expected", c.len(), batches * m * n));
        }
        for bi in 0..batches {
            if !(self.a)(bi).fits(m, k) || !(self.b)(bi).fits(k, n) {
                return Err("gemm operand is smaller than its shape".into());
            }
        }
        if c.is_empty() {
            return Ok(());
        }
        let macs = batches * m * n * k.max(1);
        let threads = threads();
        let par = threads > 1 && macs >= spin_pool::min_work(PAR_MIN_MACS);
        let out = BlockOut::new(c);
        if m == 1 || n == 1 {
            return self.run_gemv(&out, par, threads, &epi);
        }
        let (mb, nb) = task_blocks(batches, m, n, if par { 4 * threads } else { 1 }, 8);
        let (mblocks, nblocks) = (m.div_ceil(mb), n.div_ceil(nb));
        for_each_task(batches * mblocks * nblocks, par, |t| {
            let bi = t / (mblocks * nblocks);
            let (i0, j0) = ((t / nblocks) % mblocks * mb, t % nblocks * nb);
            let (rows, cols) = (mb.min(m - i0), nb.min(n - j0));
            let a = (self.a)(bi).at(i0, 0);
            let b = (self.b)(bi).at(0, j0);
            let off = (bi * m + i0) * n + j0;
            // SAFETY: tasks are distinct (b, i-block, j-block) triples, so their C blocks are disjoint.
            unsafe { out.gemm_block(rows, cols, k, self.alpha, a, b, off, n, false, |i, row| epi(bi, i0 + i, j0, row)) };
        });
        Ok(())
    }

    /// Matrix-vector products (m == 1 or n == 1), where packing for matrixmultiply would waste most work.
    fn run_gemv(&self, out: &BlockOut<T>, par: bool, threads: usize, epi: &(impl Fn(usize, usize, usize, &mut [T]) + Sync)) -> Result<(), String> {
        let (m, n, k, batches) = (self.m, self.n, self.k, self.batches);
        // y[j] = alpha · Σ_p x[p] · M[p][j] for j < len: for m == 1, x = A's row, M = B;
        // for n == 1, x = B's column, M = Aᵀ.
        let len = if m == 1 { n } else { m };
        let chunk = if par { len.div_ceil(2 * threads).next_multiple_of(64) } else { len.max(1) };
        let chunks = len.div_ceil(chunk);
        for_each_task(batches * chunks, par, |t| {
            let bi = t / chunks;
            let j0 = (t % chunks) * chunk;
            let cnt = chunk.min(len - j0);
            let (a, b) = ((self.a)(bi), (self.b)(bi));
            let (x, xs, mat) = if m == 1 {
                (a, a.cs, MatRef { off: b.off + j0 * b.cs, ..b })
            } else {
                (b, b.rs, MatRef { data: a.data, off: a.off + j0 * a.rs, rs: a.cs, cs: a.rs })
            };
            // SAFETY: C is [batches, len] here (m or n is 1) and tasks cover disjoint (b, j-range) pieces.
            let y = unsafe { out.row(bi * len + j0, cnt) };
            gemv(k, self.alpha, x.data, x.off, xs, mat, y);
            if m == 1 {
                epi(bi, 0, j0, y);
            } else {
                for (i, v) in y.iter_mut().enumerate() {
                    epi(bi, j0 + i, 0, std::slice::from_mut(v));
                }
            }
        });
        Ok(())
    }
}

/// `y[j] = alpha · Σ_p x[xo + p·xs] · M(p, j)` for `j < y.len()`, `p < k` (operands checked by the caller).
fn gemv<T: Real>(k: usize, alpha: T, x: &[T], xo: usize, xs: usize, mat: MatRef<T>, y: &mut [T]) {
    let len = y.len();
    if mat.cs == 1 {
        // Rows of M are contiguous: accumulate scaled rows (vectorises).
        y.fill(T::ZERO);
        for p in 0..k {
            let xv = x[xo + p * xs];
            let row = &mat.data[mat.off + p * mat.rs..][..len];
            for (o, &v) in y.iter_mut().zip(row) {
                *o = *o + xv * v;
            }
        }
    } else if mat.rs == 1 && xs == 1 {
        // Columns of M are contiguous: dot products with 8 partial sums.
        let xv = &x[xo..xo + k];
        for (j, o) in y.iter_mut().enumerate() {
            *o = dot8(xv, &mat.data[mat.off + j * mat.cs..][..k]);
        }
    } else {
        for (j, o) in y.iter_mut().enumerate() {
            let mut s = T::ZERO;
            for p in 0..k {
                s = s + x[xo + p * xs] * mat.data[mat.off + p * mat.rs + j * mat.cs];
            }
            *o = s;
        }
    }
    if alpha != T::ONE {
        y.iter_mut().for_each(|v| *v = alpha * *v);
    }
}

// ---------------------------------------------------------------------------------------------------
// Op rules

/// Runs Gemm: alpha · A' · B' + beta · C, then the fused activation.
pub(super) fn gemm(alpha: f32, beta: f32, trans_a: bool, trans_b: bool, activation: Option<Activation>, inputs: &[Option<&Tensor>], outputs: &mut [Tensor]) -> Result<(), String> {
    let out = outputs.first_mut().ok_or("missing output")?;
    let (a, b) = (input(inputs, 0)?, input(inputs, 1)?);
    let c = inputs.get(2).copied().flatten();
    let (m, n, k) = gemm_dims(&a.shape, &b.shape, trans_a, trans_b, a.dtype(), b.dtype(), c.map(|c| (c.dtype(), &c.shape[..])))?;
    let g = GemmArgs { m, n, k, alpha, beta, trans_a, trans_b, activation };
    match a.dtype() {
        DType::F32 => gemm_typed::<f32>(&g, a.view().ok_or("A")?, b.view().ok_or("B")?, c.map(|c| (c.view::<f32>().unwrap_or(&[]), &c.shape[..])), out.reset(&[m, n])),
        DType::F64 => gemm_typed::<f64>(&g, a.view().ok_or("A")?, b.view().ok_or("B")?, c.map(|c| (c.view::<f64>().unwrap_or(&[]), &c.shape[..])), out.reset(&[m, n])),
        DType::F16 | DType::BF16 => {
            let (av, bv) = (to_f32(a)?, to_f32(b)?);
            let cv = c.map(to_f32).transpose()?;
            let mut y = vec![0f32; m * n];
            gemm_typed::<f32>(&g, &av, &bv, cv.as_deref().zip(c.map(|c| &c.shape[..])), &mut y)?;
            from_f32(&y, a.dtype(), &[m, n], out);
            Ok(())
        }
        d => Err(format!("Gemm does not support {d}")),
    }
}

/// Runs MatMul (numpy semantics).
pub(super) fn matmul(inputs: &[Option<&Tensor>], outputs: &mut [Tensor]) -> Result<(), String> {
    let out = outputs.first_mut().ok_or("missing output")?;
    let (a, b) = (input(inputs, 0)?, input(inputs, 1)?);
    if a.dtype() != b.dtype() {
        return Err(format!("MatMul inputs have different types {} and {}", a.dtype(), b.dtype()));
    }
    let d = matmul_dims(&a.shape, &b.shape)?;
    match a.dtype() {
        DType::F32 => matmul_real::<f32>(&d, a.view().ok_or("A")?, b.view().ok_or("B")?, out.reset(&d.out)),
        DType::F64 => matmul_real::<f64>(&d, a.view().ok_or("A")?, b.view().ok_or("B")?, out.reset(&d.out)),
        DType::F16 | DType::BF16 => {
            let (av, bv) = (to_f32(a)?, to_f32(b)?);
            let mut y = vec![0f32; d.out.iter().product()];
            matmul_real::<f32>(&d, &av, &bv, &mut y)?;
            from_f32(&y, a.dtype(), &d.out, out);
            Ok(())
        }
        DType::I8 => matmul_int::<i8>(&d, a, b, out),
        DType::U8 => matmul_int::<u8>(&d, a, b, out),
        DType::I16 => matmul_int::<i16>(&d, a, b, out),
        DType::I32 => matmul_int::<i32>(&d, a, b, out),
        DType::I64 => matmul_int::<i64>(&d, a, b, out),
        DType::Bool => Err("MatMul does not support bool".into()),
    }
}

struct GemmArgs {
    m: usize,
    n: usize,
    k: usize,
    alpha: f32,
    beta: f32,
    trans_a: bool,
    trans_b: bool,
    activation: Option<Activation>,
}

/// Gemm's epilogue on a finished output row segment: `+ beta·C` (C broadcast to `[m, n]`), then the fused
/// activation.
pub(super) struct GemmEpilogue<'c, T> {
    /// C's data, its element (i, j) at `i·ci + j·cj` (0 strides on broadcast dims), and beta.
    cterm: Option<(&'c [T], usize, usize, T)>,
    act: Option<Activation>,
}

impl<'c, T: Real> GemmEpilogue<'c, T> {
    /// The epilogue for `beta`, C (data and shape, rank ≤ 2, broadcast to the output) and `act`.
    pub(super) fn new(beta: f32, c: Option<(&'c [T], &[usize])>, act: Option<Activation>) -> Result<Self, String> {
        let cterm = match c {
            Some((cv, cs)) if beta != 0.0 => {
                let full = [vec![1; 2 - cs.len()], cs.to_vec()].concat();
                if cv.len() != full[0] * full[1] {
                    return Err("Gemm C holds the wrong number of elements".into());
                }
                let ci = if full[0] == 1 { 0 } else { full[1] };
                let cj = if full[1] == 1 { 0 } else { 1 };
                Some((cv, ci, cj, T::from_f32(beta)))
            }
            _ => None,
        };
        Ok(GemmEpilogue { cterm, act })
    }

    /// Applies the epilogue to `row` = output row `i`, columns `j0..j0 + row.len()`.
    pub(super) fn apply(&self, i: usize, j0: usize, row: &mut [T]) {
        if let Some((cv, ci, cj, beta)) = self.cterm {
            let base = i * ci + j0 * cj;
            if cj == 0 {
                let v = beta * cv[base];
                row.iter_mut().for_each(|x| *x = *x + v);
            } else {
                for (x, &cval) in row.iter_mut().zip(&cv[base..]) {
                    *x = *x + beta * cval;
                }
            }
        }
        bias_act(row, None, self.act);
    }
}

fn gemm_typed<T: Real>(g: &GemmArgs, a: &[T], b: &[T], c: Option<(&[T], &[usize])>, y: &mut [T]) -> Result<(), String> {
    let (m, n, k) = (g.m, g.n, g.k);
    let am = if g.trans_a { MatRef { data: a, off: 0, rs: 1, cs: m } } else { MatRef::rows(a, 0, k) };
    let bm = if g.trans_b { MatRef { data: b, off: 0, rs: 1, cs: k } } else { MatRef::rows(b, 0, n) };
    let epi = GemmEpilogue::new(g.beta, c, g.activation)?;
    let job = Batched { batches: 1, m, n, k, alpha: T::from_f32(g.alpha), a: |_| am, b: |_| bm, _p: PhantomData };
    job.run(y, |_, i, j0, row| epi.apply(i, j0, row))
}

fn matmul_real<T: Real>(d: &MatMulDims, a: &[T], b: &[T], y: &mut [T]) -> Result<(), String> {
    let (m, k, n) = (d.m, d.k, d.n);
    let batches: usize = d.batch.iter().product();
    // (Batched::run checks every operand against its data, so malformed tensors give an error.)
    // B shared by every batch and A contiguous: one GEMM with the batches stacked into M.
    if batches > 1 && d.b_bstrides.iter().all(|&s| s == 0) && d.a_bstrides == strides_of(&d.batch, m * k) {
        let job = Batched { batches: 1, m: batches * m, n, k, alpha: T::ONE, a: |_| MatRef::rows(a, 0, k), b: |_| MatRef::rows(b, 0, n), _p: PhantomData };
        return job.run(y, |_, _, _, _| {});
    }
    let job = Batched {
        batches,
        m,
        n,
        k,
        alpha: T::ONE,
        a: |bi| MatRef::rows(a, d.offsets(bi).0, k),
        b: |bi| MatRef::rows(b, d.offsets(bi).1, n),
        _p: PhantomData,
    };
    job.run(y, |_, _, _, _| {})
}

/// Row-major matrix strides of a batch shape, in units of `mat` elements.
fn strides_of(batch: &[usize], mat: usize) -> Vec<usize> {
    strides(batch).iter().map(|s| s * mat).collect()
}

/// Integer arithmetic for MatMul on integer tensors (wrapping, like numpy).
trait IntMac: Element {
    fn mac(self, a: Self, b: Self) -> Self;
}
macro_rules! int_mac {
    ($($t:ty),*) => {$(
        impl IntMac for $t {
            #[inline]
            fn mac(self, a: Self, b: Self) -> Self {
                self.wrapping_add(a.wrapping_mul(b))
            }
        }
    )*};
}
int_mac!(i8, u8, i16, i32, i64);

fn matmul_int<T: IntMac>(d: &MatMulDims, a: &Tensor, b: &Tensor, out: &mut Tensor) -> Result<(), String> {
    let (av, bv) = (a.view::<T>().ok_or("A")?, b.view::<T>().ok_or("B")?);
    let (m, k, n) = (d.m, d.k, d.n);
    let batches: usize = d.batch.iter().product();
    let y = out.reset::<T>(&d.out);
    if y.is_empty() {
        return Ok(());
    }
    let par = threads() > 1 && batches * m * n * k >= spin_pool::min_work(PAR_MIN_MACS);
    let body = |idx: usize, yrow: &mut [T]| {
        let (bi, i) = (idx / m, idx % m);
        let (ao, bo) = d.offsets(bi);
        let arow = &av[ao + i * k..][..k];
        yrow.fill(T::default());
        for (p, &x) in arow.iter().enumerate() {
            let brow = &bv[bo + p * n..][..n];
            for (o, &w) in yrow.iter_mut().zip(brow) {
                *o = o.mac(x, w);
            }
        }
    };
    if par {
        spin_pool::for_each_piece_mut(y, n, || (), |_, idx, yrow| body(idx, yrow));
    } else {
        y.chunks_mut(n).enumerate().for_each(|(idx, yrow)| body(idx, yrow));
    }
    Ok(())
}

/// Elements of an f16/bf16 tensor as f32.
pub(super) fn to_f32(t: &Tensor) -> Result<Vec<f32>, String> {
    match t.dtype() {
        DType::F16 => Ok(t.view::<f16>().ok_or("f16")?.iter().map(|v| v.to_f32()).collect()),
        DType::BF16 => Ok(t.view::<bf16>().ok_or("bf16")?.iter().map(|v| v.to_f32()).collect()),
        DType::F32 => Ok(t.view::<f32>().ok_or("f32")?.to_vec()),
        d => Err(format!("cannot convert {d} to f32")),
    }
}

/// Writes f32 results into `out` as `dtype` (f16 or bf16).
pub(super) fn from_f32(y: &[f32], dtype: DType, shape: &[usize], out: &mut Tensor) {
    match dtype {
        DType::BF16 => out.reset::<bf16>(shape).iter_mut().zip(y).for_each(|(o, &v)| *o = bf16::from_f32(v)),
        _ => out.reset::<f16>(shape).iter_mut().zip(y).for_each(|(o, &v)| *o = f16::from_f32(v)),
    }
}

/// The dot product of two equally long rows with 8 partial sums (vectorisable), the remainder summed first.
pub(super) fn dot8<T: Real>(a: &[T], b: &[T]) -> T {
    let mut acc = [T::ZERO; 8];
    let (ac, bc) = (a.chunks_exact(8), b.chunks_exact(8));
    let (ar, br) = (ac.remainder(), bc.remainder());
    for (x, y) in ac.zip(bc) {
        for l in 0..8 {
            acc[l] = acc[l] + x[l] * y[l];
        }
    }
    let mut s = T::ZERO;
    for (x, y) in ar.iter().zip(br) {
        s = s + *x * *y;
    }
    acc.iter().fold(s, |s, &v| s + v)
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::ir::Op;
    use crate::runtime::kernels::{eval, Scratch};
    use crate::ir::ops::{infer, TypeInfo};

    /// Deterministic pseudo-random values in [-1, 1).
    pub(crate) fn rnd(n: usize, seed: u64) -> Vec<f32> {
        let mut s = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (0..n)
            .map(|_| {
                s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
            })
            .collect()
    }

    fn run(op: &Op, ins: &[Option<&Tensor>]) -> Tensor {
        let mut out = vec![Tensor::default()];
        eval(op, ins, &mut out, &mut Scratch::default()).unwrap();
        let infos: Vec<Option<TypeInfo>> = ins.iter().map(|t| t.map(|t| TypeInfo { dtype: t.dtype(), shape: &t.shape, value: None })).collect();
        let inferred = infer(op, &infos).unwrap();
        assert_eq!(inferred[0], (out[0].dtype(), out[0].shape.clone()), "infer must predict eval's output");
        out.pop().unwrap()
    }

    fn close(a: &[f32], b: &[f32]) {
        assert_eq!(a.len(), b.len());
        for (i, (x, y)) in a.iter().zip(b).enumerate() {
            assert!((x - y).abs() <= 1e-4 + 1e-4 * y.abs(), "element {i}: {x} vs {y}");
        }
    }

    #[test]
    fn gemm_matches_naive_over_shapes_and_flags() {
        let gemm = |alpha, beta, ta, tb, act| Op::Gemm { alpha, beta, trans_a: ta, trans_b: tb, activation: act };
        for &(m, k, n) in &[(1, 1, 1), (3, 4, 5), (1, 300, 70), (70, 300, 1), (33, 513, 65), (130, 40, 1100)] {
            for (ci, cshape) in [vec![], vec![n], vec![m, 1], vec![m, n], vec![1, 1]].into_iter().enumerate() {
                let ta = ci % 2 == 1;
                let tb = ci >= 2;
                let a = rnd(m * k, 1);
                let b = rnd(k * n, 2);
                let c = rnd(cshape.iter().product(), 3);
                let at = Tensor::from_f32(if ta { vec![k, m] } else { vec![m, k] }, a.clone());
                let bt = Tensor::from_f32(if tb { vec![n, k] } else { vec![k, n] }, b.clone());
                let ct = Tensor::from_f32(cshape.clone(), c.clone());
                let act = [None, Some(Activation::Silu), None, Some(Activation::Relu6)][ci % 4];
                let op = gemm(0.5, 2.0, ta, tb, act);
                let ins = if cshape.is_empty() { vec![Some(&at), Some(&bt)] } else { vec![Some(&at), Some(&bt), Some(&ct)] };
                let y = run(&op, &ins);
                let mut want = vec![0f32; m * n];
                for i in 0..m {
                    for j in 0..n {
                        let mut s = 0f32;
                        for p in 0..k {
                            let av = if ta { a[p * m + i] } else { a[i * k + p] };
                            let bv = if tb { b[j * k + p] } else { b[p * n + j] };
                            s += av * bv;
                        }
                        let cv = match cshape.len() {
                            0 => 0.0,
                            1 => c[j],
                            _ => c[(if cshape[0] == 1 { 0 } else { i }) * cshape[1] + if cshape[1] == 1 { 0 } else { j }],
                        };
                        let v = 0.5 * s + 2.0 * cv;
                        want[i * n + j] = act.map_or(v, |a| a.apply(v));
                    }
                }
                close(y.as_f32().unwrap(), &want);
            }
        }
    }

    #[test]
    fn gemm_rejects_bad_shapes() {
        let op = Op::Gemm { alpha: 1.0, beta: 1.0, trans_a: false, trans_b: false, activation: None };
        let a = Tensor::from_f32(vec![2, 3], vec![0.0; 6]);
        let b = Tensor::from_f32(vec![4, 2], vec![0.0; 8]);
        let mut out = vec![Tensor::default()];
        let e = eval(&op, &[Some(&a), Some(&b)], &mut out, &mut Scratch::default()).unwrap_err();
        assert!(e.contains("inner sizes"), "{e}");
        let b = Tensor::from_f32(vec![3, 2], vec![0.0; 6]);
        let c = Tensor::from_f32(vec![3], vec![0.0; 3]);
        assert!(eval(&op, &[Some(&a), Some(&b), Some(&c)], &mut out, &mut Scratch::default()).is_err());
    }

    /// numpy matmul: 1-D promotion and batch broadcasting, against a naive loop.
    #[test]
    fn matmul_numpy_semantics() {
        let cases: Vec<(Vec<usize>, Vec<usize>, Vec<usize>)> = vec![
            (vec![4], vec![4], vec![]),
            (vec![4], vec![4, 3], vec![3]),
            (vec![2, 4], vec![4], vec![2]),
            (vec![2, 3, 4], vec![4, 5], vec![2, 3, 5]),
            (vec![2, 1, 3, 4], vec![3, 4, 5], vec![2, 3, 3, 5]),
            (vec![3, 4], vec![2, 4, 70], vec![2, 3, 70]),
            (vec![5, 40, 64], vec![5, 64, 40], vec![5, 40, 40]),
        ];
        for (sa, sb, so) in cases {
            let a = rnd(sa.iter().product(), 4);
            let b = rnd(sb.iter().product(), 5);
            let at = Tensor::from_f32(sa.clone(), a.clone());
            let bt = Tensor::from_f32(sb.clone(), b.clone());
            let y = run(&Op::MatMul, &[Some(&at), Some(&bt)]);
            assert_eq!(y.shape, so);
            // naive: promote, broadcast by explicit index arithmetic
            let pa = if sa.len() == 1 { vec![1, sa[0]] } else { sa.clone() };
            let pb = if sb.len() == 1 { vec![sb[0], 1] } else { sb.clone() };
            let (m, k, n) = (pa[pa.len() - 2], pa[pa.len() - 1], pb[pb.len() - 1]);
            let ba = &pa[..pa.len() - 2];
            let bb = &pb[..pb.len() - 2];
            let rank = ba.len().max(bb.len());
            let dim = |s: &[usize], i: usize| if i + s.len() >= rank { s[i + s.len() - rank] } else { 1 };
            let batch: Vec<usize> = (0..rank).map(|i| dim(ba, i).max(dim(bb, i))).collect();
            let nb: usize = batch.iter().product();
            let mut want = vec![];
            for bi in 0..nb {
                let mut idx = vec![0; rank];
                let mut r = bi;
                for d in (0..rank).rev() {
                    idx[d] = r % batch[d];
                    r /= batch[d];
                }
                let lin = |s: &[usize]| {
                    let mut o = 0;
                    for (d, &sz) in s.iter().enumerate() {
                        let i = idx[d + rank - s.len()];
                        o = o * sz + if sz == 1 { 0 } else { i };
                    }
                    o
                };
                let (oa, ob) = (lin(ba) * m * k, lin(bb) * k * n);
                for i in 0..m {
                    for j in 0..n {
                        want.push((0..k).map(|p| a[oa + i * k + p] * b[ob + p * n + j]).sum::<f32>());
                    }
                }
            }
            close(y.as_f32().unwrap(), &want);
        }
    }

    #[test]
    fn matmul_integers_and_f64() {
        let a = Tensor::from_vec(vec![2, 2], vec![1i32, 2, 3, 4]).unwrap();
        let b = Tensor::from_vec(vec![2, 2], vec![5i32, 6, 7, 8]).unwrap();
        let y = run(&Op::MatMul, &[Some(&a), Some(&b)]);
        assert_eq!(y.view::<i32>().unwrap(), &[19, 22, 43, 50]);
        let a = Tensor::from_vec(vec![2, 2], vec![1f64, 2., 3., 4.]).unwrap();
        let b = Tensor::from_vec(vec![2], vec![1f64, 1e-12]).unwrap();
        let y = run(&Op::MatMul, &[Some(&a), Some(&b)]);
        assert_eq!(y.view::<f64>().unwrap(), &[1.0 + 2e-12, 3.0 + 4e-12]);
        let e = Tensor::from_vec(vec![2], vec![true, false]).unwrap();
        assert!(eval(&Op::MatMul, &[Some(&e), Some(&e)], &mut [Tensor::default()], &mut Scratch::default()).is_err());
    }

    #[test]
    fn gemm_f16_and_empty() {
        let op = Op::Gemm { alpha: 1.0, beta: 1.0, trans_a: false, trans_b: false, activation: None };
        let a = Tensor::from_vec(vec![1, 2], vec![f16::from_f32(1.0), f16::from_f32(2.0)]).unwrap();
        let b = Tensor::from_vec(vec![2, 1], vec![f16::from_f32(3.0), f16::from_f32(4.0)]).unwrap();
        let y = run(&op, &[Some(&a), Some(&b)]);
        assert_eq!(y.view::<f16>().unwrap(), &[f16::from_f32(11.0)]);
        let a = Tensor::from_f32(vec![0, 3], vec![]);
        let b = Tensor::from_f32(vec![3, 2], vec![1.0; 6]);
        assert_eq!(run(&op, &[Some(&a), Some(&b)]).shape, vec![0, 2]);
        let a = Tensor::from_f32(vec![2, 0], vec![]);
        let b = Tensor::from_f32(vec![0, 2], vec![]);
        assert_eq!(run(&op, &[Some(&a), Some(&b)]).as_f32().unwrap(), &[0.0; 4]);
    }
}
