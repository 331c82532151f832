//! Index arithmetic shared by kernels: broadcasting, strides, axis normalisation.

/// Row-major strides of `shape` (in elements).
pub fn strides(shape: &[usize]) -> Vec<usize> {
    let mut s = vec![1; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * shape[i + 1];
    }
    s
}

/// Numpy broadcast of two shapes, or an error naming both.
pub fn broadcast_shape(a: &[usize], b: &[usize]) -> Result<Vec<usize>, String> {
    let rank = a.len().max(b.len());
    let mut out = vec![0; rank];
    for i in 0..rank {
        let da = if i + a.len() >= rank { a[i + a.len() - rank] } else { 1 };
        let db = if i + b.len() >= rank { b[i + b.len() - rank] } else { 1 };
        out[i] = if da == db {
            da
        } else if da == 1 {
            db
        } else if db == 1 {
            da
        } else {
            return Err(format!("shapes {a:?} and {b:?} do not broadcast"));
        };
    }
    Ok(out)
}

/// Broadcast of many shapes.
pub fn broadcast_shapes<'a>(shapes: impl IntoIterator<Item = &'a [usize]>) -> Result<Vec<usize>, String> {
    let mut out: Vec<usize> = Vec::new();
    for s in shapes {
        out = broadcast_shape(&out, s)?;
    }
    Ok(out)
}

/// Strides to read an input of shape `shape` as if it had the broadcast shape `out` (0 on broadcast dims).
pub fn broadcast_strides(shape: &[usize], out: &[usize]) -> Vec<usize> {
    let s = strides(shape);
    let off = out.len() - shape.len();
    (0..out.len())
        .map(|i| if i < off || shape[i - off] == 1 { 0 } else { s[i - off] })
        .collect()
}

/// Normalises a possibly negative axis against `rank`.
pub fn norm_axis(axis: i64, rank: usize) -> Result<usize, String> {
    let r = rank as i64;
    if axis < -r || axis >= r.max(1) {
        return Err(format!("axis {axis} is out of range for rank {rank}"));
    }
    Ok(if axis < 0 { (axis + r) as usize } else { axis as usize })
}

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
        assert_eq!(broadcast_shape(&[2, 1, 3], &[4, 1]).unwrap(), vec![2, 4, 3]);
        assert!(broadcast_shape(&[2], &[3]).is_err());
        let out = [2, 3];
        let a = broadcast_strides(&[3], &out);
        let b = broadcast_strides(&[2, 1], &out);
        let mut seen = vec![];
        for_each_broadcast(&out, [&a, &b], |o, [i, j]| seen.push((o, i, j)));
        assert_eq!(seen, vec![(0, 0, 0), (1, 1, 0), (2, 2, 0), (3, 0, 1), (4, 1, 1), (5, 2, 1)]);
        assert_eq!(norm_axis(-1, 3).unwrap(), 2);
        assert!(norm_axis(3, 3).is_err());
    }
}
