//! Gemm and MatMul as `dot_general`.

use tpu_sdk_core::ir::{Activation, Node};

use super::emit::{Cx, V};
use crate::error::Result;

/// alpha * A' * B' + beta * C, then the fused activation.
pub(super) fn gemm(
    cx: &mut Cx,
    node: &Node,
    alpha: f32,
    beta: f32,
    trans_a: bool,
    trans_b: bool,
    act: Option<Activation>,
) -> Result<V> {
    let a = cx.input(node, 0)?;
    let b = cx.input(node, 1)?;
    if a.rank() != 2 || b.rank() != 2 || a.dtype != b.dtype {
        return Err(cx.unsupported(node, format!("Gemm needs two 2-D operands of one dtype, got {:?} and {:?}", a.shape, b.shape)));
    }
    let ka = if trans_a { 0 } else { 1 };
    let kb = if trans_b { 1 } else { 0 };
    let mut y = cx.dot_general(&a, &b, (&[], &[]), (&[ka], &[kb]));
    if alpha != 1.0 {
        y = cx.binary_scalar("multiply", &y, alpha as f64);
    }
    if let Some(c) = cx.opt_input(node, 2)? {
        if beta != 0.0 {
            let c = cx.convert(&c, y.dtype);
            let mut c = cx.broadcast_to(&c, &y.shape.clone())?;
            if beta != 1.0 {
                c = cx.binary_scalar("multiply", &c, beta as f64);
            }
            y = cx.add(&y, &c);
        }
    }
    Ok(cx.activation(y, act))
}

/// Numpy matmul: 1-D operands are promoted and the added dim removed; batch dims broadcast.
pub(super) fn matmul(cx: &mut Cx, node: &Node) -> Result<V> {
    let a = cx.input(node, 0)?;
    let b = cx.input(node, 1)?;
    let (_, out_shape) = cx.out(node, 0);
    if a.dtype != b.dtype || a.rank() == 0 || b.rank() == 0 {
        return Err(cx.unsupported(node, "MatMul needs two operands of rank >= 1 and one dtype"));
    }
    let a2 = if a.rank() == 1 { cx.reshape(&a, &[1, a.shape[0]]) } else { a };
    let b2 = if b.rank() == 1 { cx.reshape(&b, &[b.shape[0], 1]) } else { b };
    let (ra, rb) = (a2.rank(), b2.rank());
    let y = if rb == 2 {
        // [..., M, K] x [K, N] -> [..., M, N] without broadcasting the weight.
        cx.dot_general(&a2, &b2, (&[], &[]), (&[ra - 1], &[0]))
    } else {
        let ba = &a2.shape[..ra - 2];
        let bb = &b2.shape[..rb - 2];
        let nb = ba.len().max(bb.len());
        let mut batch = vec![0; nb];
        for i in 0..nb {
            let da = if i + ba.len() >= nb { ba[i + ba.len() - nb] } else { 1 };
            let db = if i + bb.len() >= nb { bb[i + bb.len() - nb] } else { 1 };
            if da != db && da != 1 && db != 1 {
                return Err(cx.unsupported(node, format!("batch dims {ba:?} and {bb:?} do not broadcast")));
            }
            batch[i] = da.max(db);
        }
        let mut sa = batch.clone();
        sa.extend_from_slice(&a2.shape[ra - 2..]);
        let mut sb = batch.clone();
        sb.extend_from_slice(&b2.shape[rb - 2..]);
        let a3 = cx.broadcast_to(&a2, &sa)?;
        let b3 = cx.broadcast_to(&b2, &sb)?;
        let bd: Vec<usize> = (0..nb).collect();
        cx.dot_general(&a3, &b3, (&bd, &bd), (&[nb + 1], &[nb]))
    };
    Ok(cx.reshape(&y, &out_shape))
}
