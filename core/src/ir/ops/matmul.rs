//! Gemm and MatMul: arity and shape rules (the CPU kernels compute from [`gemm_dims`] and [`matmul_dims`]).

use super::dims::{broadcast_shape, broadcast_strides};
use super::{info, Arity, InferError, Inferred, TypeInfo};
use crate::ir::DType;

/// Gemm takes float types.
pub fn check_gemm_dtype(d: DType) -> Result<(), InferError> {
    if d.is_float() {
        Ok(())
    } else {
        Err(InferError::Invalid(format!("Gemm does not support {d}")))
    }
}

/// MatMul takes any non-bool type.
pub fn check_matmul_dtype(d: DType) -> Result<(), InferError> {
    if d == DType::Bool {
        Err(InferError::Invalid("MatMul does not support bool".into()))
    } else {
        Ok(())
    }
}

/// (M, N, K) of a Gemm, checking ranks, inner sizes, dtypes and C's broadcast.
pub fn gemm_dims(
    a: &[usize],
    b: &[usize],
    trans_a: bool,
    trans_b: bool,
    ta: DType,
    tb: DType,
    c: Option<(DType, &[usize])>,
) -> Result<(usize, usize, usize), String> {
    if a.len() != 2 || b.len() != 2 {
        return Err(format!("Gemm needs 2-D A and B, got shapes {a:?} and {b:?}"));
    }
    if ta != tb {
        return Err(format!("Gemm inputs have different types {ta} and {tb}"));
    }
    let (m, ka) = if trans_a { (a[1], a[0]) } else { (a[0], a[1]) };
    let (kb, n) = if trans_b { (b[1], b[0]) } else { (b[0], b[1]) };
    if ka != kb {
        return Err(format!("Gemm inner sizes differ: A{a:?} (trans_a={trans_a}) and B{b:?} (trans_b={trans_b})"));
    }
    if let Some((tc, cs)) = c {
        if tc != ta {
            return Err(format!("Gemm C has type {tc}, A has {ta}"));
        }
        let ok = cs.len() <= 2 && cs.iter().rev().zip([n, m]).all(|(&d, want)| d == 1 || d == want);
        if !ok {
            return Err(format!("Gemm C of shape {cs:?} does not broadcast to [{m}, {n}]"));
        }
    }
    Ok((m, n, ka))
}


/// Shapes of a numpy matmul.
#[derive(Debug)]
pub struct MatMulDims {
    /// Broadcast batch shape.
    pub batch: Vec<usize>,
    /// Per batch dim, the stride of A in elements (0 on broadcast dims).
    pub a_bstrides: Vec<usize>,
    /// Per batch dim, the stride of B in elements (0 on broadcast dims).
    pub b_bstrides: Vec<usize>,
    /// Rows of A.
    pub m: usize,
    /// Inner size.
    pub k: usize,
    /// Columns of B.
    pub n: usize,
    /// Output shape.
    pub out: Vec<usize>,
}

/// Checks the shapes of a numpy matmul and computes its batch geometry.
pub fn matmul_dims(a: &[usize], b: &[usize]) -> Result<MatMulDims, String> {
    if a.is_empty() || b.is_empty() {
        return Err(format!("MatMul needs inputs of rank >= 1, got shapes {a:?} and {b:?}"));
    }
    let (m, ka, abatch) = if a.len() == 1 { (1, a[0], &a[..0]) } else { (a[a.len() - 2], a[a.len() - 1], &a[..a.len() - 2]) };
    let (kb, n, bbatch) = if b.len() == 1 { (b[0], 1, &b[..0]) } else { (b[b.len() - 2], b[b.len() - 1], &b[..b.len() - 2]) };
    if ka != kb {
        return Err(format!("MatMul inner sizes differ: shapes {a:?} and {b:?}"));
    }
    let batch = broadcast_shape(abatch, bbatch).map_err(|_| format!("MatMul batch dims of {a:?} and {b:?} do not broadcast"))?;
    // Strides of each batch index into A and B, in matrices (0 on broadcast dims).
    let mat_strides = |bs: &[usize], mat: usize| -> Vec<usize> {
        let st = broadcast_strides(bs, &batch);
        st.iter().map(|s| s * mat).collect()
    };
    let a_bstrides = mat_strides(abatch, m * ka);
    let b_bstrides = mat_strides(bbatch, ka * n);
    let mut out = batch.clone();
    if a.len() > 1 {
        out.push(m);
    }
    if b.len() > 1 {
        out.push(n);
    }
    Ok(MatMulDims { batch, a_bstrides, b_bstrides, m, k: ka, n, out })
}

impl MatMulDims {
    /// Element offsets of batch `bi` into A and B.
    pub fn offsets(&self, bi: usize) -> (usize, usize) {
        let (mut ao, mut bo, mut r) = (0, 0, bi);
        for d in (0..self.batch.len()).rev() {
            let i = r % self.batch[d];
            r /= self.batch[d];
            ao += i * self.a_bstrides[d];
            bo += i * self.b_bstrides[d];
        }
        (ao, bo)
    }
}

/// Shape rule of Gemm (inputs a, b, c?).
pub fn infer_gemm(trans_a: bool, trans_b: bool, inputs: &[Option<TypeInfo>]) -> Result<Inferred, InferError> {
    let (a, b) = (info(inputs, 0)?, info(inputs, 1)?);
    let c = inputs.get(2).copied().flatten();
    let (m, n, _) = gemm_dims(a.shape, b.shape, trans_a, trans_b, a.dtype, b.dtype, c.map(|c| (c.dtype, c.shape)))?;
    check_gemm_dtype(a.dtype)?;
    Ok(vec![(a.dtype, vec![m, n])])
}

/// Shape rule of MatMul (numpy semantics with batch broadcasting).
pub fn infer_matmul(inputs: &[Option<TypeInfo>]) -> Result<Inferred, InferError> {
    let (a, b) = (info(inputs, 0)?, info(inputs, 1)?);
    if a.dtype != b.dtype {
        return Err(InferError::Invalid(format!("MatMul inputs have different types {} and {}", a.dtype, b.dtype)));
    }
    check_matmul_dtype(a.dtype)?;
    let d = matmul_dims(a.shape, b.shape)?;
    Ok(vec![(a.dtype, d.out)])
}

/// Arity of Gemm: a, b, c?.
pub const GEMM_ARITY: Arity = (2, 3, 1, 1);
/// Arity of MatMul: a, b.
pub const MATMUL_ARITY: Arity = (2, 2, 1, 1);
