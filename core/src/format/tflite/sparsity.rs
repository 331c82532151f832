//! Sparse constants: TFLite's `SparsityParameters` (what the converter's weight sparsification writes, read by
//! `DENSIFY`; MediaPipe's face and pose detectors use it), expanded into dense data at import.
//!
//! The format, from the TFLite schema: a tensor of dense shape `[d0 .. dn-1]` may be split into blocks along
//! some dims (`block_map[i]` is the dim block dim `n + i` splits, its block size `dim_metadata[n + i].dense_size`).
//! The `n + k` dims (original dims counted in blocks, then the block dims) are traversed in `traversal_order`;
//! each traversed dim is DENSE (all `dense_size` coordinates) or SPARSE_CSR (for the position `p` reached in the
//! levels above, the coordinates `array_indices[array_segments[p] .. array_segments[p + 1]]`). The stored values
//! are the leaves of that traversal, in order. A CSR level passes the index of the entry it took to the level
//! below; a dense level passes `p · dense_size + coordinate`.

use super::schema::{self, dimension_type, sparse_index_vector, DimensionMetadata, Int32Vector, SparsityParameters, Uint16Vector, Uint8Vector};

/// One traversed dim.
enum Level {
    Dense(usize),
    Csr { segments: Vec<usize>, indices: Vec<usize> },
}

struct Plan<'s> {
    shape: &'s [usize],
    strides: Vec<usize>,
    traversal: Vec<usize>,
    block_map: Vec<usize>,
    block_size: Vec<usize>,
    levels: Vec<Level>,
    elem: usize,
    values: &'s [u8],
}

/// The dense bytes of a sparse tensor of dense `shape` whose elements are `elem` bytes wide; `values` are the
/// stored (non-zero) elements in traversal order. Every index is checked: a malformed description is an error.
pub(crate) fn densify(sp: &SparsityParameters, shape: &[usize], elem: usize, values: &[u8]) -> Result<Vec<u8>, String> {
    let n = shape.len();
    let as_usize = |v: i32, what: &str| usize::try_from(v).map_err(|_| format!("{what} {v} is negative"));
    let traversal: Vec<usize> = schema::to_vec(sp.traversal_order()).into_iter().map(|v| as_usize(v, "traversal_order entry")).collect::<Result<_, _>>()?;
    let block_map: Vec<usize> = schema::to_vec(sp.block_map()).into_iter().map(|v| as_usize(v, "block_map entry")).collect::<Result<_, _>>()?;
    let levels_n = n + block_map.len();
    if traversal.len() != levels_n {
        return Err(format!("traversal_order has {} entries for {n} dims and {} block dims", traversal.len(), block_map.len()));
    }
    // The original dims come first (in any order), then the block dims in order (as TFLite's converter assumes).
    let mut seen = vec![false; levels_n];
    for (i, &t) in traversal.iter().enumerate() {
        let ok = if i < n { t < n } else { t == i };
        if !ok || std::mem::replace(&mut seen[t], true) {
            return Err(format!("traversal_order {traversal:?} is not the original dims followed by the block dims"));
        }
    }
    let metas: Vec<DimensionMetadata> = sp.dim_metadata().map(|v| v.iter().collect()).unwrap_or_default();
    if metas.len() != levels_n {
        return Err(format!("{} dim_metadata entries for {levels_n} traversed dims", metas.len()));
    }
    let mut block_size = Vec::with_capacity(block_map.len());
    for (i, &d) in block_map.iter().enumerate() {
        let bs = as_usize(metas[n + i].dense_size(), "block size")?;
        if d >= n || bs == 0 || shape[d] % bs != 0 {
            return Err(format!("block dim {i} splits dim {d} of {shape:?} into blocks of {bs}"));
        }
        block_size.push(bs);
    }
    // The size of each expanded dim: original dims counted in blocks, then the block sizes.
    let expanded = |t: usize| -> usize {
        if t < n {
            block_map.iter().position(|&d| d == t).map_or(shape[t], |b| shape[t] / block_size[b])
        } else {
            block_size[t - n]
        }
    };
    let mut levels = Vec::with_capacity(levels_n);
    for (l, m) in metas.iter().enumerate() {
        let size = expanded(traversal[l]);
        levels.push(match m.format() {
            dimension_type::DENSE => {
                let ds = as_usize(m.dense_size(), "dense_size")?;
                if ds != size {
                    return Err(format!("level {l} is dense with {ds} entries, its dim has {size}"));
                }
                Level::Dense(ds)
            }
            dimension_type::SPARSE_CSR => {
                let segments = index_vector(m.array_segments_type(), m.array_segments()).ok_or_else(|| format!("level {l}: no array_segments"))?;
                let indices = index_vector(m.array_indices_type(), m.array_indices()).ok_or_else(|| format!("level {l}: no array_indices"))?;
                if segments.windows(2).any(|w| w[0] > w[1]) || segments.last().is_some_and(|&e| e > indices.len()) {
                    return Err(format!("level {l}: array_segments are not increasing offsets into {} indices", indices.len()));
                }
                if let Some(&bad) = indices.iter().find(|&&i| i >= size) {
                    return Err(format!("level {l}: index {bad} is outside its dim of {size}"));
                }
                Level::Csr { segments, indices }
            }
            f => return Err(format!("level {l}: unknown dimension format {f}")),
        });
    }
    let total = shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d)).ok_or("the dense shape overflows")?;
    let mut strides = vec![1; n];
    for d in (0..n.saturating_sub(1)).rev() {
        strides[d] = strides[d + 1] * shape[d + 1];
    }
    if elem == 0 || values.len() % elem != 0 {
        return Err(format!("{} bytes of values are not whole {elem}-byte elements", values.len()));
    }
    let plan = Plan { shape, strides, traversal, block_map, block_size, levels, elem, values };
    let mut out = vec![0u8; total * elem];
    let mut idx = vec![0usize; levels_n];
    let mut src = 0;
    plan.walk(0, 0, &mut idx, &mut src, &mut out)?;
    if src * elem != values.len() {
        return Err(format!("the traversal reaches {src} elements, the buffer holds {}", values.len() / elem));
    }
    Ok(out)
}

/// The values of a `SparseIndexVector` union member.
fn index_vector(kind: u8, tab: Option<flatbuffers::Table<'_>>) -> Option<Vec<usize>> {
    let tab = tab?;
    Some(match kind {
        sparse_index_vector::INT32 => schema::to_vec(Int32Vector { tab }.values()).into_iter().map(|v| v.max(0) as usize).collect(),
        sparse_index_vector::UINT16 => schema::to_vec(Uint16Vector { tab }.values()).into_iter().map(usize::from).collect(),
        sparse_index_vector::UINT8 => schema::to_vec(Uint8Vector { tab }.values()).into_iter().map(usize::from).collect(),
        _ => return None,
    })
}

impl Plan<'_> {
    fn walk(&self, level: usize, prev: usize, idx: &mut [usize], src: &mut usize, out: &mut [u8]) -> Result<(), String> {
        if level == self.levels.len() {
            let n = self.shape.len();
            let mut orig = vec![0usize; n];
            for i in 0..n {
                orig[self.traversal[i]] = idx[i];
            }
            for i in n..idx.len() {
                let b = self.traversal[i] - n;
                let d = self.block_map[b];
                orig[d] = orig[d] * self.block_size[b] + idx[i];
            }
            let mut flat = 0;
            for d in 0..n {
                if orig[d] >= self.shape[d] {
                    return Err(format!("coordinate {orig:?} is outside {:?}", self.shape));
                }
                flat += orig[d] * self.strides[d];
            }
            let from = *src * self.elem;
            let value = self.values.get(from..from + self.elem).ok_or("the traversal reaches more elements than the buffer holds")?;
            out[flat * self.elem..(flat + 1) * self.elem].copy_from_slice(value);
            *src += 1;
            return Ok(());
        }
        match &self.levels[level] {
            Level::Dense(size) => {
                for i in 0..*size {
                    idx[level] = i;
                    self.walk(level + 1, prev * size + i, idx, src, out)?;
                }
            }
            Level::Csr { segments, indices } => {
                if prev + 1 < segments.len() {
                    for j in segments[prev]..segments[prev + 1] {
                        idx[level] = indices[j];
                        self.walk(level + 1, j, idx, src, out)?;
                    }
                } else {
                    return Err(format!("level {level}: position {prev} has no array_segments entry"));
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::tflite::schema::voffset;
    use flatbuffers::FlatBufferBuilder;

    /// A `SparsityParameters` table: (format, dense_size, CSR (segments, indices) as Int32Vector) per level.
    fn params(traversal: &[i32], block_map: &[i32], dims: &[(i8, i32, Option<(&[i32], &[i32])>)]) -> Vec<u8> {
        let mut b = FlatBufferBuilder::new();
        let mut metas = Vec::new();
        for (fmt, ds, csr) in dims {
            let mut vecs = Vec::new();
            for v in csr.iter().flat_map(|(s, i)| [*s, *i]) {
                let data = b.create_vector(v);
                let t = b.start_table();
                b.push_slot_always(voffset(0), data);
                vecs.push(b.end_table(t));
            }
            let t = b.start_table();
            b.push_slot::<i8>(voffset(0), *fmt, 0);
            b.push_slot::<i32>(voffset(1), *ds, 0);
            if let [seg, idx] = vecs[..] {
                b.push_slot::<u8>(voffset(2), sparse_index_vector::INT32, 0);
                b.push_slot_always(voffset(3), seg);
                b.push_slot::<u8>(voffset(4), sparse_index_vector::INT32, 0);
                b.push_slot_always(voffset(5), idx);
            }
            metas.push(b.end_table(t));
        }
        let (tv, bv, mv) = (b.create_vector(traversal), b.create_vector(block_map), b.create_vector(&metas));
        let t = b.start_table();
        b.push_slot_always(voffset(0), tv);
        b.push_slot_always(voffset(1), bv);
        b.push_slot_always(voffset(2), mv);
        let root = b.end_table(t);
        b.finish_minimal(root);
        b.finished_data().to_vec()
    }

    fn run(buf: &[u8], shape: &[usize], values: &[f32]) -> Result<Vec<f32>, String> {
        let sp = flatbuffers::root::<SparsityParameters>(buf).expect("a valid table");
        let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        let out = densify(&sp, shape, 4, &bytes)?;
        Ok(out.chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect())
    }

    const D: i8 = dimension_type::DENSE;
    const S: i8 = dimension_type::SPARSE_CSR;

    #[test]
    fn csr_rows_expand_as_the_schema_describes() {
        // [[1, 0, 2, 0], [0, 0, 0, 0], [0, 3, 0, 4]]: rows dense, columns CSR.
        let p = params(&[0, 1], &[], &[(D, 3, None), (S, 0, Some((&[0, 2, 2, 4], &[0, 2, 1, 3])))]);
        let got = run(&p, &[3, 4], &[1.0, 2.0, 3.0, 4.0]).unwrap();
        assert_eq!(got, [1.0, 0.0, 2.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 3.0, 0.0, 4.0]);
    }

    #[test]
    fn two_by_two_blocks_expand_into_place() {
        // 4x4 in 2x2 blocks: row-block 0 holds column-block 1, row-block 1 holds column-block 0.
        let p = params(&[0, 1, 2, 3], &[0, 1], &[(D, 2, None), (S, 0, Some((&[0, 1, 2], &[1, 0]))), (D, 2, None), (D, 2, None)]);
        let got = run(&p, &[4, 4], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]).unwrap();
        let want = [0.0, 0.0, 1.0, 2.0, 0.0, 0.0, 3.0, 4.0, 5.0, 6.0, 0.0, 0.0, 7.0, 8.0, 0.0, 0.0];
        assert_eq!(got, want);
    }

    #[test]
    fn malformed_descriptions_are_errors() {
        let csr = |seg: &'static [i32], idx: &'static [i32]| params(&[0, 1], &[], &[(D, 3, None), (S, 0, Some((seg, idx)))]);
        let cases: Vec<(Vec<u8>, usize, &str)> = vec![
            (csr(&[0, 2, 2, 4], &[0, 2, 1, 9]), 4, "outside its dim"),
            (csr(&[0, 3, 2, 4], &[0, 2, 1, 3]), 4, "not increasing"),
            (csr(&[0, 2, 2, 4], &[0, 2, 1, 3]), 3, "more elements than the buffer"),
            (csr(&[0, 2, 2, 4], &[0, 2, 1, 3]), 5, "the buffer holds 5"),
            (csr(&[0, 2], &[0, 2]), 2, "no array_segments entry"),
            (params(&[1, 1], &[], &[(D, 3, None), (D, 4, None)]), 12, "traversal_order"),
            (params(&[0, 1], &[], &[(D, 3, None), (D, 5, None)]), 15, "dense with 5 entries"),
            (params(&[0, 1, 2], &[0], &[(D, 1, None), (D, 4, None), (D, 2, None)]), 12, "blocks of 2"),
        ];
        for (p, n, want) in cases {
            let e = run(&p, &[3, 4], &vec![1.0; n]).unwrap_err();
            assert!(e.contains(want), "{want}: {e}");
        }
    }
}
