//! Layouts: the permutation each exported tensor holds its IR value in, and the tensors of a value in
//! another layout (permuted constants, TRANSPOSE or RESHAPE copies).

use tpu_sdk_core::format::tflite::builder::*;
use tpu_sdk_core::format::tflite::schema::builtin_operator as bo;
use tpu_sdk_core::ir::{Op, Tensor, ValueId};
use tpu_sdk_core::{Error, Result};

use super::tensors::i32s;
use super::Ex;

pub(super) const NHWC: [usize; 4] = [0, 2, 3, 1];

pub(super) fn ident(r: usize) -> Vec<usize> {
    (0..r).collect()
}

pub(super) fn permuted(shape: &[usize], perm: &[usize]) -> Vec<usize> {
    perm.iter().map(|&p| shape[p]).collect()
}

pub(super) fn inverse(perm: &[usize]) -> Vec<usize> {
    let mut inv = vec![0; perm.len()];
    for (i, &p) in perm.iter().enumerate() {
        inv[p] = i;
    }
    inv
}

/// What the export of an op asks of the layout of its input 0.
enum InputLayout {
    /// NHWC: the layout-sensitive ops (convolutions, pooling, resize).
    Nhwc,
    /// The op exports in its input's layout, so its output's consumers decide (QUANTIZE, DEQUANTIZE).
    Passed,
    /// No preference (the op follows its input or needs the IR layout).
    Any,
}

/// The input layout each op asks for. Every op is named: a new op must say whether it is layout-sensitive.
fn input_layout(op: &Op) -> InputLayout {
    match op {
        Op::Conv(_) | Op::ConvTranspose(_) | Op::MaxPool(_) | Op::AveragePool(_) | Op::GlobalAveragePool | Op::GlobalMaxPool | Op::Resize(_) => {
            InputLayout::Nhwc
        }
        Op::DepthToSpace { .. } => InputLayout::Nhwc,
        Op::QuantizeLinear { .. } | Op::DequantizeLinear { .. } => InputLayout::Passed,
        Op::LpPool(..) | Op::Gemm { .. } | Op::MatMul | Op::Binary(..) | Op::Unary(_) | Op::ClipDynamic
        | Op::Variadic(_) | Op::VariadicMean | Op::Where | Op::BatchNorm { .. } | Op::InstanceNorm { .. } | Op::LayerNorm { .. }
        | Op::GroupNorm { .. } | Op::Lrn { .. } | Op::LpNorm { .. } | Op::Softmax { .. } | Op::LogSoftmax { .. }
        | Op::Hardmax { .. } | Op::Reduce { .. } | Op::ArgReduce { .. } | Op::CumSum { .. } | Op::Reshape { .. }
        | Op::Flatten { .. } | Op::Squeeze { .. } | Op::Unsqueeze { .. } | Op::Transpose { .. } | Op::Concat { .. }
        | Op::Split { .. } | Op::Slice | Op::Gather { .. } | Op::GatherElements { .. } | Op::GatherNd { .. }
        | Op::ScatterElements { .. } | Op::ScatterNd { .. } | Op::Pad { .. } | Op::Expand | Op::Tile | Op::Shape { .. }
        | Op::Size | Op::ConstantOfShape { .. } | Op::Range | Op::Cast { .. } | Op::Identity | Op::Trilu { .. }
        | Op::OneHot { .. } | Op::EyeLike { .. } | Op::SpaceToDepth { .. } | Op::TopK { .. }
        | Op::NonZero | Op::ReverseSequence { .. } | Op::TensorScatter { .. } => InputLayout::Any,
        Op::If(_) | Op::Loop(_) | Op::Scan(_) => InputLayout::Any,
        Op::Rnn(_) => InputLayout::Any,
    }
}

impl Ex<'_> {
    /// The rank of IR value `v`.
    pub(super) fn rank(&self, v: ValueId) -> usize {
        self.g.value(v).shape.len()
    }

    /// Whether `v` feeds a layout-sensitive op, directly or through QUANTIZE/DEQUANTIZE (which export in
    /// their input's layout: a float-I/O int8 model's image input is NHWC too).
    pub(super) fn wants_nhwc(&self, v: ValueId) -> bool {
        self.g.nodes.iter().any(|n| {
            n.input(0) == Some(v)
                && match input_layout(&n.op) {
                    InputLayout::Nhwc => true,
                    InputLayout::Passed => self.wants_nhwc(n.outputs[0]),
                    InputLayout::Any => false,
                }
        })
    }

    /// Tensor of IR value `v` in layout `perm`: the value itself, a permuted constant or a TRANSPOSE.
    pub(super) fn get(&mut self, v: ValueId, perm: &[usize]) -> Result<i32> {
        if let Some((t, p)) = self.layouts.get(&v) {
            if p == perm {
                return Ok(*t);
            }
        }
        if let Some(&t) = self.copies.get(&(v, perm.to_vec())) {
            return Ok(t);
        }
        let val = self.g.value(v);
        let name = if perm == ident(perm.len()).as_slice() { val.name.clone() } else { format!("{}/p{}", val.name, perm.iter().map(|p| p.to_string()).collect::<String>()) };
        let t = if let Some(c) = &val.constant {
            let pc = c.permuted(perm);
            let t = self.constant(&name, &pc)?;
            self.set_quant(t, v, perm);
            t
        } else {
            let (src, p) = self.layouts.get(&v).cloned().ok_or_else(|| Error::InvalidModel(format!("value '{}' is used before it is exported", val.name)))?;
            // tensor dim j = IR dim perm[j] = src dim inv(p)[perm[j]].
            let inv = inverse(&p);
            let r: Vec<usize> = perm.iter().map(|&d| inv[d]).collect();
            let t = self.tensor(&name, &permuted(&val.shape, perm), val.dtype)?;
            self.set_quant(t, v, perm);
            // When only size-1 dims move ([N,1,1,C] ↔ [N,C,1,1]) the element order is unchanged: a RESHAPE
            // does it, which every runtime (and the Edge TPU) handles, unlike TRANSPOSE.
            let moved: Vec<usize> = r.iter().copied().filter(|&d| val.shape[p[d]] != 1).collect();
            if moved.windows(2).all(|w| w[0] < w[1]) {
                let shape = i32s(permuted(&val.shape, perm));
                let st = self.const_i32(&format!("{name}/shape"), shape.clone())?;
                self.op(bo::RESHAPE, 1, vec![src, st], vec![t], Some(OptionsT::reshape(shape)));
            } else {
                let pt = self.const_i32(&format!("{name}/perm"), i32s(r))?;
                self.op(bo::TRANSPOSE, 1, vec![src, pt], vec![t], None);
            }
            t
        };
        self.copies.insert((v, perm.to_vec()), t);
        Ok(t)
    }

    /// The layout of a value (identity for constants and unknown values).
    pub(super) fn layout(&self, v: ValueId) -> Vec<usize> {
        self.layouts.get(&v).map(|(_, p)| p.clone()).unwrap_or_else(|| ident(self.g.value(v).shape.len()))
    }

    /// Creates the output tensor of IR value `v` in layout `perm`.
    pub(super) fn out(&mut self, v: ValueId, perm: Vec<usize>) -> Result<i32> {
        let val = self.g.value(v);
        let t = self.tensor(&val.name, &permuted(&val.shape, &perm), val.dtype)?;
        self.set_quant(t, v, &perm);
        if self.cur == 0 && self.rows.contains(&v) {
            // rows a WHILE stacks: as many as it runs iterations
            let mut sig = i32s(val.shape.iter().copied());
            sig[0] = -1;
            self.sg().tensors[t as usize].shape_signature = Some(sig);
        }
        self.layouts.insert(v, (t, perm));
        Ok(t)
    }

    /// A constant operand broadcast against a rank-`r` value in layout `perm`: numpy-aligned to rank r,
    /// then permuted (a scalar or 1-element constant stays as it is).
    pub(super) fn broadcast_const(&mut self, v: ValueId, r: usize, perm: &[usize]) -> Result<i32> {
        let c = self.g.value(v).constant.clone().expect("constant");
        // an arithmetic operand keeps its type: TFLite's binary kernels want both inputs of one type
        if c.len() == 1 || c.shape.len() > r {
            let t = self.constant_as(&self.g.value(v).name.clone(), &c, false)?;
            self.set_quant(t, v, &ident(c.shape.len()));
            return Ok(t);
        }
        let mut shape = vec![1; r - c.shape.len()];
        shape.extend_from_slice(&c.shape);
        let aligned = Tensor { shape, data: c.data.clone() };
        let pc = aligned.permuted(perm);
        let name = format!("{}/bcast", self.g.value(v).name);
        let t = self.constant_as(&name, &pc, false)?;
        self.set_quant(t, v, perm);
        Ok(t)
    }
}
