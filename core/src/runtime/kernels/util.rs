//! Index arithmetic shared by kernels: broadcasting, strides, axis normalisation (the shape arithmetic is
//! [`crate::ir::ops::dims`]'s, re-exported here) and the broadcast walk.

pub use crate::ir::ops::dims::{broadcast_shape, broadcast_shapes, broadcast_strides, norm_axis, strides};

/// Calls `f(out_index, offsets)` for every element of the broadcast shape `out`, where `offsets[k]` is the
/// element offset into input `k` read with `in_strides[k]` (see [`broadcast_strides`]). Iterates the
/// innermost dimension in a tight loop.
pub fn for_each_broadcast<const K: usize>(out: &[usize], in_strides: [&[usize]; K], mut f: impl FnMut(usize, [usize; K])) {
    let n: usize = out.iter().product();
    if n == 0 {
        return;
    }
    let rank = out.len();
    if rank == 0 {
        f(0, [0; K]);
        return;
    }
    let inner = out[rank - 1];
    let inner_st: [usize; K] = std::array::from_fn(|k| in_strides[k][rank - 1]);
    let mut idx = vec![0usize; rank];
    let mut base = [0usize; K];
    let mut o = 0;
    loop {
        let mut offs = base;
        for _ in 0..inner {
            f(o, offs);
            o += 1;
            for k in 0..K {
                offs[k] += inner_st[k];
            }
        }
        // advance the outer index
        let mut d = rank - 1;
        loop {
            if d == 0 {
                return;
            }
            d -= 1;
            idx[d] += 1;
            for k in 0..K {
                base[k] += in_strides[k][d];
            }
            if idx[d] < out[d] {
                break;
            }
            for k in 0..K {
                base[k] -= in_strides[k][d] * out[d];
            }
            idx[d] = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn broadcasting() {
        // broadcast_shape and norm_axis are tested where they live, in ir::ops::dims.
        let out = [2, 3];
        let a = broadcast_strides(&[3], &out);
        let b = broadcast_strides(&[2, 1], &out);
        let mut seen = vec![];
        for_each_broadcast(&out, [&a, &b], |o, [i, j]| seen.push((o, i, j)));
        assert_eq!(seen, vec![(0, 0, 0), (1, 1, 0), (2, 2, 0), (3, 0, 1), (4, 1, 1), (5, 2, 1)]);
    }
}
