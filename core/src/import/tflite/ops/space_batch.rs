//! SPACE_TO_BATCH_ND and BATCH_TO_SPACE_ND (the halves of a dilated convolution the converter did not fuse),
//! as Pad/Slice, Reshape and Transpose over an input [batch, spatial × M, rest...].

use super::{ImportFn, OpIn};
use crate::format::tflite::schema::builtin_operator as bo;
use crate::import::tflite::importer::Importer;
use crate::ir::{Element, Op, PadMode, Tensor, TensorData, ValueId};
use crate::{map_data, Result};

/// The ops of this family.
pub(super) const OPS: &[(i32, ImportFn)] = &[(bo::SPACE_TO_BATCH_ND, space_to_batch), (bo::BATCH_TO_SPACE_ND, batch_to_space)];

/// The input, its shape, the block shape and the [M, 2] paddings or crops, checked against each other.
fn operands(imp: &mut Importer, o: &OpIn, what: &str) -> Result<(ValueId, Vec<usize>, Vec<usize>, Vec<[usize; 2]>)> {
    let x = imp.value(imp.req(o, 0)?)?;
    let xs = imp.shape(x);
    let block = imp.const_ints(imp.req(o, 1)?, "the block shape")?;
    let pc = imp.const_ints(imp.req(o, 2)?, what)?;
    let m = block.len();
    if m == 0 || xs.len() < m + 1 || pc.len() != 2 * m {
        return Err(imp.invalid(format!("block shape {block:?} and {what} {pc:?} do not fit the input shape {xs:?}")));
    }
    if block.iter().any(|&b| b < 1) || pc.iter().any(|&p| p < 0) {
        return Err(imp.invalid(format!("the block shape {block:?} must be positive and the {what} {pc:?} non-negative")));
    }
    let block = block.into_iter().map(|b| b as usize).collect();
    let pc = pc.chunks(2).map(|p| [p[0] as usize, p[1] as usize]).collect();
    Ok((x, xs, block, pc))
}

fn reshape(imp: &mut Importer, v: ValueId, shape: &[usize], name: String) -> Result<ValueId> {
    let s = shape.iter().map(|&d| d as i64).collect();
    imp.op_with_i64(Op::Reshape { allowzero: true }, v, format!("{name}_shape"), s, name)
}

/// Pads the spatial dims, splits each into (size / block, block), moves the blocks before the batch and
/// merges them into it: output batch index = block offset (row-major) × N + n.
fn space_to_batch(imp: &mut Importer, o: &OpIn) -> Result<ValueId> {
    let base = &o.base;
    let (x, xs, block, pads) = operands(imp, o, "the paddings")?;
    let (m, rank) = (block.len(), xs.len());
    let mut padded = xs.clone();
    for i in 0..m {
        padded[1 + i] += pads[i][0] + pads[i][1];
        if padded[1 + i] % block[i] != 0 {
            return Err(imp.invalid(format!(
                "padded dimension {} of size {} is not a multiple of the block size {} (input {xs:?}, paddings {pads:?})",
                1 + i,
                padded[1 + i],
                block[i]
            )));
        }
    }
    let x = if pads.iter().any(|p| p[0] + p[1] > 0) {
        let mut p = vec![0i64; 2 * rank];
        for i in 0..m {
            p[1 + i] = pads[i][0] as i64;
            p[rank + 1 + i] = pads[i][1] as i64;
        }
        let p = imp.const_i64(format!("{base}/pads"), p);
        // Quantized tensors pad with the zero point (the real value 0), as TFLite does.
        let zp = imp.g.value(x).quant.as_ref().map(|q| q.zero_point[0]).unwrap_or(0);
        let dt = imp.dtype(x);
        let fill = Tensor::new(vec![], map_data!(TensorData::zeros(dt, 1), v => v.into_iter().map(|_| Element::from_f64(zp as f64)).collect()))
            .expect("one element");
        let fill = imp.g.add_constant(format!("{base}/pad_value"), fill);
        imp.node(Op::Pad { mode: PadMode::Constant }, vec![Some(x), Some(p), Some(fill)], format!("{base}/padded"))?
    } else {
        x
    };
    let rest = &xs[1 + m..];
    let mut split = vec![xs[0]];
    for i in 0..m {
        split.extend([padded[1 + i] / block[i], block[i]]);
    }
    split.extend_from_slice(rest);
    let y = reshape(imp, x, &split, format!("{base}/blocks"))?;
    let mut perm: Vec<usize> = (0..m).map(|i| 2 + 2 * i).collect();
    perm.push(0);
    perm.extend((0..m).map(|i| 1 + 2 * i));
    perm.extend((0..rest.len()).map(|j| 1 + 2 * m + j));
    let y = imp.transpose(y, &perm, format!("{base}/blocks_first"))?;
    let mut out = vec![xs[0] * block.iter().product::<usize>()];
    out.extend((0..m).map(|i| padded[1 + i] / block[i]));
    out.extend_from_slice(rest);
    reshape(imp, y, &out, base.clone())
}

/// The inverse: the batch split into (blocks..., N), each block interleaved after its spatial dim, merged,
/// and the crops sliced off.
fn batch_to_space(imp: &mut Importer, o: &OpIn) -> Result<ValueId> {
    let base = &o.base;
    let (x, xs, block, crops) = operands(imp, o, "the crops")?;
    let m = block.len();
    let nb: usize = block.iter().product();
    if xs[0] % nb != 0 {
        return Err(imp.invalid(format!("batch {} of the input {xs:?} is not a multiple of the block shape's {block:?} product {nb}", xs[0])));
    }
    let n = xs[0] / nb;
    let rest = &xs[1 + m..];
    let mut split = block.clone();
    split.push(n);
    split.extend_from_slice(&xs[1..]);
    let y = reshape(imp, x, &split, format!("{base}/blocks"))?;
    let mut perm = vec![m];
    for i in 0..m {
        perm.extend([m + 1 + i, i]);
    }
    perm.extend((0..rest.len()).map(|j| 2 * m + 1 + j));
    let y = imp.transpose(y, &perm, format!("{base}/interleaved"))?;
    let mut full = vec![n];
    full.extend((0..m).map(|i| xs[1 + i] * block[i]));
    full.extend_from_slice(rest);
    let cropped = crops.iter().any(|c| c[0] + c[1] > 0);
    let y = reshape(imp, y, &full, if cropped { format!("{base}/uncropped") } else { base.clone() })?;
    if !cropped {
        return Ok(y);
    }
    let (mut starts, mut ends, mut axes) = (vec![], vec![], vec![]);
    for i in 0..m {
        let d = full[1 + i];
        if crops[i][0] + crops[i][1] >= d {
            return Err(imp.invalid(format!("crops {crops:?} leave nothing of dimension {} of size {d}", 1 + i)));
        }
        starts.push(crops[i][0] as i64);
        ends.push((d - crops[i][1]) as i64);
        axes.push(1 + i as i64);
    }
    let mut inputs = vec![y];
    for (what, values) in [("starts", starts), ("ends", ends), ("axes", axes)] {
        inputs.push(imp.const_i64(format!("{base}/{what}"), values));
    }
    imp.op1(Op::Slice, &inputs, base.clone())
}
