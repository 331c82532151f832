//! MatMul and Gemm whose B operand is a constant f32 matrix (a layer's weights): B is packed once, when the
//! session is planned, into the panels the AVX2/FMA GEMM kernel streams ([`PackedB`]), so a run packs only the
//! activations. A product of few rows (a language model's decode step, `[1, k] · [k, n]`) then reads each weight
//! once, sequentially, with no multiply-adds spent on padding rows; a product of many rows (a prefill, a batch)
//! no longer re-packs its weights on every call.
//!
//! Sessions of the same model share one packed copy of each weight matrix (found by value), and a session drops
//! its graph's copy of the weights it holds packed, so a generator's per-bucket programs cost one set of weights.
//!
//! Only on x86-64 CPUs with AVX2 and FMA; elsewhere (and for other dtypes, batched B, run-time B) the node runs
//! the ordinary kernel of `matmul.rs`. Results differ from that kernel's by rounding only: the summation order
//! per output element is the same KC-chunked FMA chain.

use super::PreparedKernel;
use crate::ir::Graph;

/// The prepared kernel of node `n`, when it is a MatMul / Gemm with a constant 2-D f32 B on a CPU with the kernels.
pub(super) fn prepare(g: &Graph, n: usize) -> Option<Box<dyn PreparedKernel>> {
    #[cfg(target_arch = "x86_64")]
    {
        x86::prepare(g, n)
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (g, n);
        None
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::super::input;
    use super::super::matmul::{for_each_task, task_blocks, threads, BlockOut, GemmEpilogue, PAR_MIN_MACS};
    use super::super::numeric::{gemm_packed, gemm_packed_ab, PackedA, PackedB, MR_PACKED, NR_PACKED};
    use super::super::{PreparedKernel, Scratch};
    use crate::ir::ops::matmul::{gemm_dims, matmul_dims};
    use crate::ir::{Activation, DType, Graph, Op, Tensor};
    use std::sync::{Arc, Mutex, Weak};

    /// Which op the packed product computes.
    #[derive(Debug)]
    enum Kind {
        /// numpy MatMul of `A [..., m, k]` (or `[k]`) by the 2-D B: the batch rows stack into one product.
        MatMul,
        /// `alpha·A'·B' + beta·C`, then the activation.
        Gemm { alpha: f32, beta: f32, trans_a: bool, trans_b: bool, activation: Option<Activation> },
    }

    #[derive(Debug)]
    struct PackedMatMul {
        kind: Kind,
        /// B's shape as the op sees it (before Gemm's `trans_b`).
        b_shape: Vec<usize>,
        b: Arc<PackedB>,
    }

    pub(super) fn prepare(g: &Graph, n: usize) -> Option<Box<dyn PreparedKernel>> {
        let node = &g.nodes[n];
        let (kind, trans_b) = match node.op {
            Op::MatMul => (Kind::MatMul, false),
            Op::Gemm { alpha, beta, trans_a, trans_b, activation } => (Kind::Gemm { alpha, beta, trans_a, trans_b, activation }, trans_b),
            _ => return None,
        };
        let a = g.values.get(node.inputs.first().copied().flatten()?.0)?;
        let bv = g.values.get(node.inputs.get(1).copied().flatten()?.0)?;
        let b = bv.constant.as_ref()?;
        if a.dtype != DType::F32 || a.quant.is_some() || bv.quant.is_some() || b.shape.len() != 2 || node.outputs.iter().any(|o| g.values[o.0].dynamic) {
            return None;
        }
        let w = b.as_f32()?;
        let (r, c) = (b.shape[0], b.shape[1]);
        // B' = B (k × n, row-major) or Bᵀ (B is n × k)
        let (k, n, rsb, csb) = if trans_b { (c, r, 1, c) } else { (r, c, c, 1) };
        let packed = shared(w, k, n, rsb, csb)?;
        Some(Box::new(PackedMatMul { kind, b_shape: b.shape.clone(), b: packed }))
    }

    /// Packed weights alive in some session, by a hash of their values and layout: sessions of the same model
    /// (a generator's programs, one per bucket; sessions per thread) share one packed copy.
    static SHARED: Mutex<Vec<(u64, Weak<PackedB>)>> = Mutex::new(Vec::new());

    /// The packed `k × n` matrix B (element (p, j) at `w[p·rsb + j·csb]`): one already packed with the same values,
    /// else packed now and registered.
    fn shared(w: &[f32], k: usize, n: usize, rsb: usize, csb: usize) -> Option<Arc<PackedB>> {
        let mut h = (k as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ (n as u64) ^ ((rsb as u64) << 40);
        for x in w {
            h = (h.rotate_left(5) ^ x.to_bits() as u64).wrapping_mul(0x517C_C1B7_2722_0A95);
        }
        let mut reg = SHARED.lock().unwrap_or_else(|e| e.into_inner());
        reg.retain(|(_, p)| p.strong_count() > 0);
        // a hash match is checked value by value: equal packed data, never a collision's
        if let Some(p) = reg.iter().filter(|(hh, _)| *hh == h).filter_map(|(_, p)| p.upgrade()).find(|p| p.holds(w, k, n, rsb, csb)) {
            return Some(p);
        }
        let p = Arc::new(PackedB::new(w, k, n, rsb, csb)?);
        reg.push((h, Arc::downgrade(&p)));
        Some(p)
    }

    impl PreparedKernel for PackedMatMul {
        fn run(&self, inputs: &[Option<&Tensor>], outputs: &mut [Tensor], scratch: &mut Scratch) -> Result<(), String> {
            let a = input(inputs, 0)?;
            let av = a.as_f32().ok_or_else(|| format!("the packed product takes f32 activations, got {}", a.dtype()))?;
            let out = outputs.first_mut().ok_or("missing output")?;
            let (k, n) = (self.b.k(), self.b.n());
            match self.kind {
                Kind::MatMul => {
                    let d = matmul_dims(&a.shape, &self.b_shape)?;
                    if d.n != n || d.k != k {
                        return Err(format!("MatMul of {:?} by the packed {:?}", a.shape, self.b_shape));
                    }
                    let rows = av.len() / k.max(1);
                    let y = out.reset::<f32>(&d.out);
                    product(rows, av, k as isize, 1, &self.b, 1.0, y, &mut scratch.f32, |_, _, _| {})
                }
                Kind::Gemm { alpha, beta, trans_a, trans_b, activation } => {
                    let c = inputs.get(2).copied().flatten();
                    let (m, gn, gk) = gemm_dims(&a.shape, &self.b_shape, trans_a, trans_b, a.dtype(), DType::F32, c.map(|c| (c.dtype(), &c.shape[..])))?;
                    if gn != n || gk != k {
                        return Err(format!("Gemm of {:?} by the packed {:?}", a.shape, self.b_shape));
                    }
                    let cv = match c {
                        Some(c) => Some((c.as_f32().ok_or("Gemm C must be f32 like A")?, &c.shape[..])),
                        None => None,
                    };
                    let epi = GemmEpilogue::new(beta, cv, activation)?;
                    let (rsa, csa) = if trans_a { (1, m as isize) } else { (k as isize, 1) };
                    let y = out.reset::<f32>(&[m, n]);
                    product(m, av, rsa, csa, &self.b, alpha, y, &mut scratch.f32, |i, j0, row| epi.apply(i, j0, row))
                }
            }
        }

        fn holds_input(&self, k: usize) -> bool {
            k == 1
        }
    }

    /// `y[m, n] = alpha · A · B` with A's element (i, p) at `a[i·rsa + p·csa]`, then `epi(i, j0, row)` on each
    /// finished row segment. Parallel over row and panel-aligned column blocks when large; then a row-major A is
    /// packed once (in `workspace`) for all the tasks, not once per task: a prefill's `[32, k]` activations split
    /// over 8 column blocks were packed 8 times, which cost a third of each task's time.
    #[allow(clippy::too_many_arguments)]
    fn product(
        m: usize,
        a: &[f32],
        rsa: isize,
        csa: isize,
        b: &PackedB,
        alpha: f32,
        y: &mut [f32],
        workspace: &mut Vec<f32>,
        epi: impl Fn(usize, usize, &mut [f32]) + Sync,
    ) -> Result<(), String> {
        let (k, n) = (b.k(), b.n());
        if y.len() != m * n {
            return Err(format!("product output holds {} elements, {} expected", y.len(), m * n));
        }
        if m == 0 || n == 0 {
            return Ok(());
        }
        let last = (m as isize - 1) * rsa + (k as isize - 1) * csa;
        if rsa < 0 || csa < 0 || last as usize >= a.len() {
            return Err(format!("A holds {} elements, too few for {m} × {k}", a.len()));
        }
        let threads = threads();
        let par = threads > 1 && m * n * k >= crate::runtime::spin_pool::min_work(PAR_MIN_MACS);
        let (mut mb, nb) = task_blocks(1, m, n, if par { 4 * threads } else { 1 }, NR_PACKED);
        let shared_a = if par && m > 1 && nb < n && rsa == k as isize && csa == 1 { PackedA::new_in(&a[..m * k], m, k, std::mem::take(workspace)) } else { None };
        if shared_a.is_some() {
            mb = mb.next_multiple_of(MR_PACKED); // tasks start on a panel of the shared packing
        }
        let (mblocks, nblocks) = (m.div_ceil(mb), n.div_ceil(nb));
        let out = BlockOut::new(y);
        for_each_task(mblocks * nblocks, par, |t| {
            let (i0, j0) = (t / nblocks * mb, t % nblocks * nb);
            let (rows, cols) = (mb.min(m - i0), nb.min(n - j0));
            let off = i0 * n + j0;
            let c = out.block_ptr(off, (rows - 1) * n + cols);
            // SAFETY: A's rows i0..i0 + rows are in bounds (checked above); C's block lies in y (block_ptr
            // checks) and tasks are distinct (row block, column block) pairs, so blocks are disjoint; j0 is a
            // multiple of the panel width and j0 + cols ≤ n.
            // With the shared packing: i0 is a multiple of its panel height and i0 + rows ≤ m.
            unsafe {
                match &shared_a {
                    Some(pa) => gemm_packed_ab(pa, i0, rows, b, j0, cols, alpha, c, n as isize),
                    None => gemm_packed(rows, a.as_ptr().offset(i0 as isize * rsa), rsa, csa, b, j0, cols, alpha, c, n as isize),
                }
            };
            for i in 0..rows {
                // SAFETY: the row segment is inside this task's block, written above, and read by no one else.
                let row = unsafe { out.row(off + i * n, cols) };
                epi(i0 + i, j0, row);
            }
        });
        if let Some(pa) = shared_a {
            *workspace = pa.into_buffer();
        }
        Ok(())
    }

    #[cfg(test)]
    #[test]
    fn equal_weights_are_packed_once() {
        let w: Vec<f32> = (0..40 * 24).map(|i| (i as f32).sin()).collect();
        let a = shared(&w, 40, 24, 24, 1).expect("AVX2 CPU");
        let b = shared(&w.clone(), 40, 24, 24, 1).unwrap();
        assert!(Arc::ptr_eq(&a, &b), "equal values share one packing");
        let mut w2 = w.clone();
        w2[7] = -0.0 * w2[7].signum(); // another value, maybe the same hash bucket
        let c = shared(&w2, 40, 24, 24, 1).unwrap();
        assert!(!Arc::ptr_eq(&a, &c));
        let t = shared(&w, 24, 40, 1, 24).unwrap(); // the same data read transposed
        assert!(!Arc::ptr_eq(&a, &t));
        drop((a, b));
        let again = shared(&w, 40, 24, 24, 1).unwrap();
        assert_eq!(Arc::strong_count(&again), 1, "a packing no session holds is not kept");
    }
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use super::super::matmul::tests::rnd;
    use super::super::{eval, Scratch};
    use crate::ir::infer::infer_graph;
    use crate::ir::{Activation, DType, Graph, Op};
    use crate::runtime::CpuEval;

    /// The packed kernel against the ordinary one (matrixmultiply-style driver) on the same node, over shapes
    /// that cross the panel width, KC and MC, batched A, rank-1 A, and Gemm with transposes, C and an activation.
    #[test]
    fn packed_products_equal_the_ordinary_kernel() {
        // (op, A shape, B shape, C shape)
        type Case = (Op, Vec<usize>, Vec<usize>, Option<Vec<usize>>);
        let cases: Vec<Case> = vec![
            (Op::MatMul, vec![1, 1, 64], vec![64, 40], None),
            (Op::MatMul, vec![3, 7, 300], vec![300, 33], None),
            (Op::MatMul, vec![1, 80, 513], vec![513, 1030], None),
            (Op::MatMul, vec![17], vec![17, 16], None),
            (Op::MatMul, vec![2, 5, 9], vec![9, 1], None),
            (Op::Gemm { alpha: 0.5, beta: 2.0, trans_a: false, trans_b: true, activation: Some(Activation::Relu) }, vec![5, 70], vec![45, 70], Some(vec![45])),
            (Op::Gemm { alpha: 1.0, beta: 1.0, trans_a: true, trans_b: false, activation: None }, vec![300, 9], vec![300, 20], Some(vec![9, 20])),
            (Op::Gemm { alpha: 1.0, beta: 0.0, trans_a: false, trans_b: false, activation: None }, vec![1, 257], vec![257, 100], None),
        ];
        for (seed, (op, ash, bsh, csh)) in cases.into_iter().enumerate() {
            let mut g = Graph::new("p");
            let x = g.add_input("x", DType::F32, ash.clone());
            let b = g.add_constant("b", crate::ir::Tensor::from_f32(bsh.clone(), rnd(bsh.iter().product(), seed as u64 + 10)));
            let mut ins = vec![Some(x), Some(b)];
            if let Some(cs) = &csh {
                ins.push(Some(g.add_constant("c", crate::ir::Tensor::from_f32(cs.clone(), rnd(cs.iter().product(), 99)))));
            }
            let y = g.add_value("y", DType::F32, vec![]);
            g.add_node("n", op.clone(), ins.clone(), vec![y]);
            g.outputs.push(y);
            infer_graph(&mut g, &CpuEval).unwrap();
            let k = super::prepare(&g, 0).expect("f32 product with constant B is packed on this CPU");
            let xt = crate::ir::Tensor::from_f32(ash.clone(), rnd(ash.iter().product(), seed as u64));
            let tensors: Vec<Option<&crate::ir::Tensor>> =
                ins.iter().map(|i| i.map(|v| g.values[v.0].constant.as_ref().unwrap_or(&xt))).collect();
            let mut want = vec![crate::ir::Tensor::default()];
            eval(&op, &tensors, &mut want, &mut Scratch::default()).unwrap();
            // the packed kernel never reads B: give it none
            let mut given = tensors.clone();
            given[1] = None;
            let mut got = vec![crate::ir::Tensor::from_f32(vec![3], vec![f32::NAN; 3])];
            k.run(&given, &mut got, &mut Scratch::default()).unwrap();
            assert_eq!(got[0].shape, want[0].shape, "{op:?} {ash:?}×{bsh:?}");
            let (g0, w0) = (got[0].as_f32().unwrap(), want[0].as_f32().unwrap());
            for (i, (p, q)) in g0.iter().zip(w0).enumerate() {
                assert!((p - q).abs() <= 1e-5 * (1.0 + q.abs()) * (bsh[0] as f32).sqrt(), "{op:?} {ash:?}×{bsh:?}: element {i}: {p} vs {q}");
            }
        }
    }
}
