//! Gather along one axis (embeddings, index selection) as `stablehlo.gather`.

use tpu_sdk_core::ir::{DType, Node, Tensor};

use super::emit::{Cx, V};
use crate::error::Result;

/// out = data[:axis] + indices.shape + data[axis+1:], with ONNX's negative indices counting from the end.
pub(super) fn gather(cx: &mut Cx, node: &Node, axis: usize) -> Result<V> {
    let data = cx.input(node, 0)?;
    if axis >= data.rank() {
        return Err(cx.unsupported(node, format!("axis {axis} is out of range for rank {}", data.rank())));
    }
    let d = data.shape[axis] as i64;
    let idx = match cx.const_input(node, 1) {
        Some(t) => {
            // Constant indices: normalise and check them here.
            let mut v = t.to_i64_vec();
            for x in v.iter_mut() {
                if *x < -d || *x >= d {
                    return Err(cx.unsupported(node, format!("index {x} is out of range for axis {axis} of size {d}")));
                }
                if *x < 0 {
                    *x += d;
                }
            }
            cx.constant(&Tensor::from_i64(t.shape.clone(), v))
        }
        None => {
            let i = cx.input(node, 1)?;
            if !matches!(i.dtype, DType::I32 | DType::I64) {
                return Err(cx.unsupported(node, format!("indices of type {}", i.dtype)));
            }
            let zero = cx.splat_like(0.0, &i);
            let neg = cx.compare("LT", &i, &zero);
            let n = cx.splat_like(d as f64, &i);
            let wrapped = cx.add(&i, &n);
            cx.select(&neg, &wrapped, &i)
        }
    };
    Ok(cx.gather_axis(&data, axis, &idx))
}
