//! The key/value cache of a generation, kept on the host: per layer a key and a value tensor
//! `[batch, kv_heads, capacity, head_dim]` of which the first `len` positions hold the tokens seen so far. A step's
//! new positions are copied in from the model's `present` outputs (only those positions: the rest of the
//! cache is not copied), and the cache grows to the next bucket's capacity when it is full.

use crate::{DType, Error, Result, Tensor};
use tpu_sdk_core::ir::TensorData;

/// A host key/value cache.
#[derive(Clone, Debug)]
pub struct KvCache {
    /// key, value, key, value, ... (layer order), each `[batch, heads, capacity, head_dim]`.
    pub tensors: Vec<Tensor>,
    /// Positions filled.
    pub len: usize,
}

impl KvCache {
    /// An empty cache of `layers` layers for `batch` sequences.
    pub fn new(dtype: DType, batch: usize, layers: usize, heads: usize, head_dim: usize, capacity: usize) -> KvCache {
        let t = Tensor::zeros(dtype, vec![batch, heads, capacity, head_dim]);
        KvCache { tensors: vec![t; 2 * layers], len: 0 }
    }

    /// Positions it can hold.
    pub fn capacity(&self) -> usize {
        self.tensors.first().map_or(0, |t| t.shape[2])
    }

    /// Moves the filled positions into tensors of `capacity` positions (no-op when it has that capacity).
    pub fn resize(&mut self, capacity: usize) -> Result<()> {
        if capacity == self.capacity() {
            return Ok(());
        }
        if capacity < self.len {
            return Err(Error::InputMismatch(format!("a cache of {capacity} positions cannot hold {} tokens", self.len)));
        }
        for t in &mut self.tensors {
            let mut shape = t.shape.clone();
            shape[2] = capacity;
            let mut bigger = Tensor::zeros(t.dtype(), shape);
            copy_positions(&mut bigger, 0, t, 0, self.len)?;
            *t = bigger;
        }
        Ok(())
    }

    /// Appends positions `[from, from + count)` of each `present` tensor (key, value per layer, in cache order)
    /// at the end of the cache.
    pub fn append(&mut self, present: &[&Tensor], from: usize, count: usize) -> Result<()> {
        if present.len() != self.tensors.len() {
            return Err(Error::InvalidModel(format!("{} present tensors for a cache of {}", present.len(), self.tensors.len())));
        }
        if self.len + count > self.capacity() {
            return Err(Error::InputMismatch(format!("cache overflow: {} + {count} positions in {}", self.len, self.capacity())));
        }
        for (dst, src) in self.tensors.iter_mut().zip(present) {
            copy_positions(dst, self.len, src, from, count)?;
        }
        self.len += count;
        Ok(())
    }
}

/// Copies positions `[src_at, src_at + count)` of `src` to `[dst_at, dst_at + count)` of `dst`, both
/// `[batch, heads, positions, head_dim]` with equal batch, heads and head_dim.
pub fn copy_positions(dst: &mut Tensor, dst_at: usize, src: &Tensor, src_at: usize, count: usize) -> Result<()> {
    let (ds, ss) = (dst.shape.clone(), &src.shape);
    if ds.len() != 4 || ss.len() != 4 || ds[0] != ss[0] || ds[1] != ss[1] || ds[3] != ss[3] {
        return Err(Error::InvalidModel(format!("cache tensors {ds:?} and {ss:?} do not match ([batch, heads, positions, head_dim])")));
    }
    if dst_at + count > ds[2] || src_at + count > ss[2] {
        return Err(Error::InvalidModel(format!("positions out of range: {dst_at}+{count} of {}, {src_at}+{count} of {}", ds[2], ss[2])));
    }
    fn go<T: Copy>(d: &mut [T], s: &[T], ds: &[usize], ss: &[usize], dst_at: usize, src_at: usize, count: usize) {
        let hd = ds[3];
        for bh in 0..ds[0] * ds[1] {
            let dofs = (bh * ds[2] + dst_at) * hd;
            let sofs = (bh * ss[2] + src_at) * hd;
            d[dofs..dofs + count * hd].copy_from_slice(&s[sofs..sofs + count * hd]);
        }
    }
    macro_rules! pairs {
        ($($v:ident),*) => {
            match (&mut dst.data, &src.data) {
                $((TensorData::$v(d), TensorData::$v(s)) => go(d, s, &ds, ss, dst_at, src_at, count),)*
                (d, s) => return Err(Error::InvalidModel(format!("the model returns a {} cache for a {} one", s.dtype(), d.dtype()))),
            }
        };
    }
    pairs!(F32, F64, F16, BF16, I8, U8, I16, I32, I64, Bool);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seq(shape: Vec<usize>, start: f32) -> Tensor {
        let n: usize = shape.iter().product();
        Tensor::from_f32(shape, (0..n).map(|i| start + i as f32).collect())
    }

    #[test]
    fn appends_only_the_new_positions_and_grows() {
        let mut c = KvCache::new(DType::F32, 1, 1, 2, 3, 4);
        // present: [1, 2, 5, 3]: positions 0..4 the (padded) past, 4 the new token
        let pk = seq(vec![1, 2, 5, 3], 0.0);
        let pv = seq(vec![1, 2, 5, 3], 100.0);
        c.append(&[&pk, &pv], 4, 1).unwrap();
        c.append(&[&pk, &pv], 1, 2).unwrap();
        assert_eq!(c.len, 3);
        let k = c.tensors[0].as_f32().unwrap();
        // head 0: slot 0 = present position 4 (12..15), slots 1, 2 = positions 1, 2 (3..9)
        assert_eq!(&k[..12], &[12.0, 13.0, 14.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 0.0, 0.0, 0.0]);
        // head 1 starts at 15 in present
        assert_eq!(&k[12..15], &[27.0, 28.0, 29.0]);
        c.resize(8).unwrap();
        assert_eq!(c.tensors[1].shape, vec![1, 2, 8, 3]);
        let v = c.tensors[1].as_f32().unwrap();
        assert_eq!(&v[..3], &[112.0, 113.0, 114.0]);
        assert_eq!(&v[24..27], &[127.0, 128.0, 129.0]);
        assert!(c.resize(2).is_err());
        let e = c.append(&[&pk, &pv], 0, 6).unwrap_err().to_string();
        assert!(e.contains("out of range") || e.contains("overflow"), "{e}");
        let half = Tensor::zeros(DType::F16, vec![1, 2, 5, 3]);
        assert!(c.append(&[&half, &half], 0, 1).unwrap_err().to_string().contains("f16"));
    }
}
