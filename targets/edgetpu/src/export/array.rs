//! Export of the data-movement ops: Identity, Reshape and its kin, Transpose, Concat, Split, Pad, Slice, Gather,
//! Tile and DepthToSpace.

use tpu_sdk_core::format::tflite::builder::*;
use tpu_sdk_core::format::tflite::schema::{activation as act, builtin_operator as bo, builtin_options};
use tpu_sdk_core::ir::{Node, PadMode, Tensor};
use tpu_sdk_core::Result;

use super::layout::{ident, inverse, NHWC};
use super::node::required;
use super::tensors::i32s;
use super::Ex;

/// The `SplitVOptions` discriminant of the `BuiltinOptions` union (not in the schema's table).
const SPLIT_V_OPTIONS: u8 = 79;

impl Ex<'_> {
    /// Identity: the same tensor, in the same layout.
    pub(super) fn identity(&mut self, n: &Node) -> Result<()> {
        let y = n.outputs[0];
        let x = required(n, 0)?;
        let p = self.layout(x);
        let t = self.get(x, &p)?;
        self.layouts.insert(y, (t, p));
        Ok(())
    }

    /// Reshape, Flatten, Squeeze, Unsqueeze: a RESHAPE in the IR layout.
    pub(super) fn reshape(&mut self, n: &Node) -> Result<()> {
        let g = self.g;
        let y = n.outputs[0];
        let x = required(n, 0)?;
        let xt = self.get(x, &ident(self.rank(x)))?;
        let shape = i32s(g.value(y).shape.iter().copied());
        let st = self.const_i32(&format!("{}/shape", n.name), shape.clone())?;
        let yt = self.out(y, ident(self.rank(y)))?;
        self.op(bo::RESHAPE, 1, vec![xt, st], vec![yt], Some(OptionsT::reshape(shape)));
        Ok(())
    }

    /// Transpose: a change of layout, not an op (see the comment).
    pub(super) fn transpose(&mut self, n: &Node, q: &[usize]) -> Result<()> {
        let y = n.outputs[0];
        // A relabelling, not a data movement: y's dim j is x's dim q[j], so the tensor holding x in
        // layout p holds y in layout p' with p'[i] = inverse(q)[p[i]]. Consumers transpose only if
        // they need another layout (NCHW↔NHWC pairs around convolutions vanish).
        let x = required(n, 0)?;
        let r = self.rank(x);
        let q = if q.is_empty() { (0..r).rev().collect() } else { q.to_vec() };
        let p = self.layout(x);
        let xt = self.get(x, &p)?;
        let inv_q = inverse(&q);
        let p2: Vec<usize> = p.iter().map(|&d| inv_q[d]).collect();
        self.layouts.insert(y, (xt, p2));
        Ok(())
    }

    /// Concat: a CONCATENATION in the layout of the first non-constant input.
    pub(super) fn concat(&mut self, n: &Node, axis: usize) -> Result<()> {
        let g = self.g;
        let y = n.outputs[0];
        let r = self.rank(y);
        let first = n.inputs.iter().flatten().find(|&&v| g.value(v).constant.is_none()).copied();
        let perm = first.map(|v| self.layout(v)).unwrap_or_else(|| ident(r));
        let mut ins = Vec::new();
        for v in n.inputs.iter().flatten() {
            ins.push(self.get(*v, &perm)?);
        }
        let ax = inverse(&perm)[axis];
        let yt = self.out(y, perm)?;
        self.op(bo::CONCATENATION, 1, ins, vec![yt], Some(OptionsT::concatenation(ax as i32, act::NONE)));
        Ok(())
    }

    /// Split: SPLIT into equal parts, SPLIT_V into unequal ones, in the input's layout (the parts share the
    /// input's quantization, as the int8 spec requires).
    pub(super) fn split(&mut self, n: &Node, axis: usize) -> Result<()> {
        let g = self.g;
        let x = required(n, 0)?;
        let sizes: Vec<usize> = n.outputs.iter().map(|&o| g.value(o).shape[axis]).collect();
        if sizes.contains(&0) {
            return Err(self.unsupported(format!("split into an empty part (sizes {sizes:?})")));
        }
        let p = self.layout(x);
        let xt = self.get(x, &p)?;
        let ax = inverse(&p)[axis] as i32;
        let at = self.constant(&format!("{}/axis", n.name), &Tensor::scalar(ax))?;
        let mut outs = Vec::new();
        for &o in &n.outputs {
            outs.push(self.out(o, p.clone())?);
        }
        let parts = FieldT::I32(sizes.len() as i32);
        if sizes.iter().all(|&s| s == sizes[0]) {
            self.op(bo::SPLIT, 1, vec![at, xt], outs, Some(OptionsT::new(builtin_options::SPLIT).with(0, parts)));
        } else {
            let st = self.const_i32(&format!("{}/size_splits", n.name), i32s(sizes))?;
            self.op(bo::SPLIT_V, 1, vec![xt, st, at], outs, Some(OptionsT::new(SPLIT_V_OPTIONS).with(0, parts)));
        }
        Ok(())
    }

    /// Pad with constant pads: PAD, PADV2 (non-zero constant) or MIRROR_PAD (reflect).
    pub(super) fn pad(&mut self, n: &Node, mode: PadMode) -> Result<()> {
        let g = self.g;
        let y = n.outputs[0];
        let x = required(n, 0)?;
        let r = self.rank(x);
        let pads = n.input(1).and_then(|p| g.value(p).constant.clone()).ok_or_else(|| self.unsupported("non-constant pads"))?.to_i64_vec();
        let axes: Vec<usize> = match n.input(3).and_then(|a| g.value(a).constant.clone()) {
            Some(a) => a.to_i64_vec().iter().map(|&a| if a < 0 { (a + r as i64) as usize } else { a as usize }).collect(),
            None => (0..r).collect(),
        };
        let mut per_axis = vec![(0i64, 0i64); r];
        for (i, &a) in axes.iter().enumerate() {
            per_axis[a] = (pads[i], pads[i + axes.len()]);
        }
        if per_axis.iter().any(|&(b, e)| b < 0 || e < 0) {
            return Err(self.unsupported("negative padding"));
        }
        let p = self.layout(x);
        let xt = self.get(x, &p)?;
        let flat: Vec<i32> = p.iter().flat_map(|&d| [per_axis[d].0 as i32, per_axis[d].1 as i32]).collect();
        let pt = self.constant(&format!("{}/paddings", n.name), &Tensor::from_vec(vec![r, 2], flat).expect("r x 2"))?;
        // The fill's real value (an int8 fill carries its parameters: PAD fills with the data's zero point).
        let value = n.input(2).map_or(0.0, |c| {
            let v = g.value(c);
            let raw = v.constant.as_ref().and_then(|t| t.to_f64_vec().first().copied()).unwrap_or(0.0);
            v.quant.as_ref().map_or(raw, |q| (raw - q.zero_point[0] as f64) * q.scale[0] as f64)
        });
        let yt = self.out(y, p)?;
        match mode {
            PadMode::Constant if value == 0.0 => self.op(bo::PAD, 1, vec![xt, pt], vec![yt], None),
            PadMode::Constant if g.value(x).quant.is_some() => return Err(self.unsupported("int8 padding with a non-zero constant")),
            PadMode::Constant => {
                let v = self.const_f32(&format!("{}/value", n.name), vec![], vec![value as f32])?;
                self.op(bo::PADV2, 1, vec![xt, pt, v], vec![yt], None)
            }
            PadMode::Reflect => self.op(bo::MIRROR_PAD, 1, vec![xt, pt], vec![yt], Some(OptionsT::new(77).with(0, FieldT::I8(0)))),
            other => return Err(self.unsupported(format!("pad mode {other:?}"))),
        }
        Ok(())
    }

    /// Slice with constant bounds: a STRIDED_SLICE in the input's layout.
    pub(super) fn slice(&mut self, n: &Node) -> Result<()> {
        let g = self.g;
        let y = n.outputs[0];
        let x = required(n, 0)?;
        let xs = g.value(x).shape.clone();
        let r = xs.len();
        let ints = |i: usize| n.input(i).and_then(|v| g.value(v).constant.as_ref().map(|c| c.to_i64_vec()));
        let (Some(starts), Some(ends)) = (ints(1), ints(2)) else { return Err(self.unsupported("non-constant slice bounds")) };
        let axes: Vec<usize> = ints(3)
            .map(|a| a.iter().map(|&a| if a < 0 { (a + r as i64) as usize } else { a as usize }).collect())
            .unwrap_or_else(|| (0..starts.len()).collect());
        let steps = ints(4).unwrap_or_else(|| vec![1; starts.len()]);
        let (mut b, mut e, mut st) = (vec![0i64; r], xs.iter().map(|&d| d as i64).collect::<Vec<_>>(), vec![1i64; r]);
        let mut to_front = vec![false; r];
        for (k, &a) in axes.iter().enumerate() {
            let d = xs[a] as i64;
            let s = steps[k];
            if s == 0 {
                return Err(self.unsupported("slice step 0"));
            }
            let wrap = |v: i64| if v < 0 { v.saturating_add(d) } else { v };
            // ONNX clamping; a negative step ending before index 0 becomes an end mask.
            let (start, end) = if s > 0 { (wrap(starts[k]).clamp(0, d), wrap(ends[k]).clamp(0, d)) } else { (wrap(starts[k]).clamp(0, d - 1), wrap(ends[k]).clamp(-1, d - 1)) };
            b[a] = start;
            e[a] = end;
            st[a] = s;
            to_front[a] = s < 0 && end < 0;
        }
        let p = self.layout(x);
        let xt = self.get(x, &p)?;
        let mut end_mask = 0i32;
        for (i, &d) in p.iter().enumerate() {
            if to_front[d] {
                end_mask |= 1 << i;
            }
        }
        let pick = |v: &[i64]| p.iter().map(|&d| v[d].clamp(i32::MIN as i64, i32::MAX as i64) as i32).collect::<Vec<i32>>();
        let bt = self.const_i32(&format!("{}/begin", n.name), pick(&b))?;
        let et = self.const_i32(&format!("{}/end", n.name), pick(&e))?;
        let stt = self.const_i32(&format!("{}/strides", n.name), pick(&st))?;
        let yt = self.out(y, p)?;
        self.op(bo::STRIDED_SLICE, 1, vec![xt, bt, et, stt], vec![yt], Some(OptionsT::strided_slice(0, end_mask, 0)));
        Ok(())
    }

    /// Gather: a GATHER in the IR layout. Constant negative indices (ONNX counts them from the back) are
    /// written wrapped: TFLite's GATHER takes none (LiteRT fails with "gather index out of bounds").
    pub(super) fn gather(&mut self, n: &Node, axis: usize) -> Result<()> {
        let g = self.g;
        let y = n.outputs[0];
        let x = required(n, 0)?;
        let idx = required(n, 1)?;
        let xt = self.get(x, &ident(self.rank(x)))?;
        let negative = g.value(idx).constant.as_ref().filter(|c| c.to_i64_vec().iter().any(|&i| i < 0));
        let it = match (negative, g.value(x).shape.get(axis)) {
            (Some(c), Some(&dim)) if !g.value(x).dynamic => {
                let wrapped: Vec<i64> = c.to_i64_vec().iter().map(|&i| if i < 0 { i + dim as i64 } else { i }).collect();
                self.constant(&format!("{}/indices", n.name), &Tensor::from_i64(c.shape.clone(), wrapped))?
            }
            _ => self.get(idx, &ident(self.rank(idx)))?,
        };
        let yt = self.out(y, ident(self.rank(y)))?;
        self.op(bo::GATHER, 1, vec![xt, it], vec![yt], Some(OptionsT::gather(axis as i32)));
        Ok(())
    }

    /// Tile with constant repeats: a TILE in the input's layout (the multiples permuted with it; int8 data
    /// keeps its parameters).
    pub(super) fn tile(&mut self, n: &Node) -> Result<()> {
        let g = self.g;
        let y = n.outputs[0];
        let x = required(n, 0)?;
        let reps = n.input(1).and_then(|r| g.value(r).constant.as_ref().map(|c| c.to_i64_vec())).ok_or_else(|| self.unsupported("non-constant repeats"))?;
        let p = self.layout(x);
        if reps.len() != p.len() || reps.iter().any(|&r| r < 1 || r > i32::MAX as i64) {
            return Err(self.unsupported(format!("repeats {reps:?} for a rank-{} input (TILE takes one positive multiple per dimension)", p.len())));
        }
        let xt = self.get(x, &p)?;
        let mt = self.const_i32(&format!("{}/multiples", n.name), p.iter().map(|&d| reps[d] as i32).collect())?;
        let yt = self.out(y, p)?;
        self.op(bo::TILE, 1, vec![xt, mt], vec![yt], None);
        Ok(())
    }

    /// DepthToSpace: TFLite's DEPTH_TO_SPACE on NHWC, whose channel order is ONNX's DCR mode (channel
    /// `(i·b + j)·C' + c` goes to offset `(i, j)` of channel `c`); CRD (PyTorch's PixelShuffle) is refused.
    pub(super) fn depth_to_space(&mut self, n: &Node, blocksize: usize, crd: bool) -> Result<()> {
        let g = self.g;
        let y = n.outputs[0];
        let x = required(n, 0)?;
        if crd {
            return Err(self.unsupported("DepthToSpace in CRD mode: TFLite's DEPTH_TO_SPACE is DCR only; run the model on the CPU target (`--target cpu`)"));
        }
        if g.value(x).shape.len() != 4 {
            return Err(self.unsupported(format!("DepthToSpace of a rank-{} input (DEPTH_TO_SPACE is 4-D)", g.value(x).shape.len())));
        }
        let xt = self.get(x, &NHWC)?;
        let yt = self.out(y, NHWC.to_vec())?;
        let opts = OptionsT::new(builtin_options::DEPTH_TO_SPACE).with(0, FieldT::I32(blocksize as i32));
        self.op(bo::DEPTH_TO_SPACE, 1, vec![xt], vec![yt], Some(opts));
        Ok(())
    }
}
