//! Splitting host tensors along an axis and joining them again: the batch of a data-parallel run is split
//! across devices (axis 0) and the outputs joined; a tensor-parallel weight is split into per-device shards.

use tpu_sdk_core::ir::{Tensor, TensorData};

/// `t[..., start..start + len, ...]` along `axis` (a copy).
pub(crate) fn slice_axis(t: &Tensor, axis: usize, start: usize, len: usize) -> Tensor {
    let outer: usize = t.shape[..axis].iter().product();
    let d = t.shape[axis];
    let inner: usize = t.shape[axis + 1..].iter().product();
    let data = tpu_sdk_core::map_data!(&t.data, v => {
        let mut out = Vec::with_capacity(outer * len * inner);
        for o in 0..outer {
            out.extend_from_slice(&v[(o * d + start) * inner..(o * d + start + len) * inner]);
        }
        out
    });
    let mut shape = t.shape.clone();
    shape[axis] = len;
    Tensor::new(shape, data).expect("a slice has the element count of its shape")
}

/// `parts` equal pieces of `t` along `axis` (the caller checks divisibility).
pub(crate) fn split(t: &Tensor, axis: usize, parts: usize) -> Vec<Tensor> {
    let len = t.shape[axis] / parts;
    (0..parts).map(|p| slice_axis(t, axis, p * len, len)).collect()
}

/// The pieces joined along axis 0; `None` when they differ in dtype or trailing dims.
pub(crate) fn concat0(parts: &[Tensor]) -> Option<Tensor> {
    let first = parts.first()?;
    if first.shape.is_empty() || parts.iter().any(|p| p.shape.len() != first.shape.len() || p.shape[1..] != first.shape[1..]) {
        return None;
    }
    let mut data = first.data.clone();
    for p in &parts[1..] {
        macro_rules! join {
            ($($v:ident),*) => {
                match (&mut data, &p.data) {
                    $((TensorData::$v(a), TensorData::$v(b)) => a.extend_from_slice(b),)*
                    _ => return None,
                }
            };
        }
        join!(F32, F64, F16, BF16, I8, U8, I16, I32, I64, Bool);
    }
    let mut shape = first.shape.clone();
    shape[0] = parts.iter().map(|p| p.shape[0]).sum();
    Tensor::new(shape, data)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_then_concat_round_trips_and_slices_inner_axes() {
        let t = Tensor::from_i64(vec![4, 3], (0..12).collect());
        let rows = split(&t, 0, 2);
        assert_eq!(rows[1].to_i64_vec(), vec![6, 7, 8, 9, 10, 11]);
        assert_eq!(concat0(&rows).unwrap(), t);
        let t = Tensor::from_i64(vec![2, 4], (0..8).collect());
        let cols = split(&t, 1, 2);
        assert_eq!(cols[0].to_i64_vec(), vec![0, 1, 4, 5]);
        assert_eq!(cols[1].shape, vec![2, 2]);
        assert!(concat0(&[t.clone(), Tensor::from_f32(vec![2, 4], vec![0.0; 8])]).is_none());
    }
}
