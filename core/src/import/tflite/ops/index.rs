//! Indexing and selection: GATHER_ND, SCATTER_ND, SELECT/SELECT_V2, ONE_HOT, CUMSUM and TOPK_V2.

use super::{ImportFn, ImportManyFn, OpIn};
use crate::format::tflite::schema::{self, builtin_operator as bo};
use crate::import::tflite::importer::Importer;
use crate::ir::{BinaryOp, DType, Op, Tensor, TensorData, ValueId};
use crate::Result;

/// The ops of this family.
pub(super) const OPS: &[(i32, ImportFn)] = &[
    (bo::GATHER_ND, gather_nd),
    (bo::SCATTER_ND, scatter_nd),
    (bo::SELECT, select), (bo::SELECT_V2, select),
    (bo::ONE_HOT, one_hot),
    (bo::CUMSUM, cumsum),
];

/// The ops of this family with several outputs.
pub(super) const MULTI_OUTPUT_OPS: &[(i32, ImportManyFn)] = &[(bo::TOPK_V2, top_k)];

/// TOPK_V2: inputs (x, k); the k largest along the last axis, sorted, and their indices (cast to the
/// declared index type).
fn top_k(imp: &mut Importer, o: &OpIn) -> Result<Vec<ValueId>> {
    let base = &o.base;
    let x = imp.value(imp.req(o, 0)?)?;
    let k = imp.const_ints(imp.req(o, 1)?, "k")?;
    let k = match k[..] {
        [k] if k >= 0 => k,
        _ => return Err(imp.invalid(format!("k must be one non-negative value, got {k:?}"))),
    };
    let axis = imp.shape(x).len().checked_sub(1).ok_or_else(|| imp.invalid("TOPK_V2 of a scalar"))?;
    let kv = imp.const_i64(format!("{base}/k"), vec![k]);
    let outs = imp.node_n(Op::TopK { axis, largest: true, sorted: true }, vec![Some(x), Some(kv)], format!("{base}/topk"), 2)?;
    let to = match o.outs.get(1) {
        Some(&t) => imp.declared(t)?.0,
        None => DType::I32,
    };
    let idx = if imp.dtype(outs[1]) == to { outs[1] } else { imp.op1(Op::Cast { to }, &[outs[1]], format!("{base}/indices"))? };
    Ok(vec![outs[0], idx])
}

fn gather_nd(imp: &mut Importer, o: &OpIn) -> Result<ValueId> {
    let x = imp.value(imp.req(o, 0)?)?;
    let idx = imp.value(imp.req(o, 1)?)?;
    imp.op1(Op::GatherNd { batch_dims: 0 }, &[x, idx], o.base.clone())
}

/// SCATTER_ND: inputs (indices, updates, shape): the updates added into zeros of the shape (TensorFlow sums
/// updates to the same index).
fn scatter_nd(imp: &mut Importer, o: &OpIn) -> Result<ValueId> {
    let base = &o.base;
    let idx = imp.value(imp.req(o, 0)?)?;
    let upd = imp.value(imp.req(o, 1)?)?;
    let shape = imp.value(imp.req(o, 2)?)?;
    let shape = match imp.dtype(shape) {
        DType::I64 => shape,
        d if d.is_int() => imp.op1(Op::Cast { to: DType::I64 }, &[shape], format!("{base}/shape_i64"))?,
        d => return Err(imp.invalid(format!("the shape has type {d}, expected an integer type"))),
    };
    let zero = Tensor::new(vec![1], TensorData::zeros(imp.dtype(upd), 1)).expect("one element");
    let data = imp.op1(Op::ConstantOfShape { value: zero }, &[shape], format!("{base}/zeros"))?;
    imp.op1(Op::ScatterNd { reduction: Some(BinaryOp::Add) }, &[data, idx, upd], base.clone())
}

/// SELECT_V2 (broadcasting) and SELECT, whose rank-1 condition may pick whole rows of higher-rank operands.
fn select(imp: &mut Importer, o: &OpIn) -> Result<ValueId> {
    let base = &o.base;
    let mut c = imp.value(imp.req(o, 0)?)?;
    let x = imp.value(imp.req(o, 1)?)?;
    let y = imp.value(imp.req(o, 2)?)?;
    let (cs, xs) = (imp.shape(c), imp.shape(x));
    if o.code == bo::SELECT && cs != xs {
        if cs.len() != 1 || xs.first() != cs.first() || imp.shape(y) != xs {
            return Err(imp.invalid(format!(
                "SELECT needs a condition of the operands' shape or a vector over their first dimension, got {cs:?} for {xs:?} and {:?}",
                imp.shape(y)
            )));
        }
        let mut s = vec![cs[0] as i64];
        s.resize(xs.len(), 1);
        c = imp.op_with_i64(Op::Reshape { allowzero: false }, c, format!("{base}/rows_shape"), s, format!("{base}/rows"))?;
    }
    imp.op1(Op::Where, &[c, x, y], base.clone())
}

/// ONE_HOT: inputs (indices, depth, on_value, off_value). TensorFlow gives all-off rows for negative indices
/// where the IR's OneHot counts them from the back: they are moved out of range first.
fn one_hot(imp: &mut Importer, o: &OpIn) -> Result<ValueId> {
    let base = &o.base;
    let axis = o.op.options::<schema::OneHotOptions>().map(|p| p.axis()).unwrap_or(-1) as i64;
    let idx = imp.value(imp.req(o, 0)?)?;
    let depth_t = imp.req(o, 1)?;
    let depth = imp.const_ints(depth_t, "the depth")?;
    let depth = match depth[..] {
        [d] if d >= 0 => d,
        _ => return Err(imp.invalid(format!("the depth must be one non-negative value, got {depth:?}"))),
    };
    let depth_v = imp.value(depth_t)?;
    let on = imp.value(imp.req(o, 2)?)?;
    let off = imp.value(imp.req(o, 3)?)?;
    for v in [on, off] {
        if imp.shape(v).iter().product::<usize>() != 1 {
            return Err(imp.invalid(format!("on_value and off_value must be scalars, got shape {:?}", imp.shape(v))));
        }
    }
    let it = imp.dtype(idx);
    if !matches!(it, DType::I32 | DType::I64) {
        return Err(imp.invalid(format!("the indices have type {it}, expected INT32 or INT64")));
    }
    let zero = imp.g.add_constant(format!("{base}/zero"), Tensor::new(vec![], TensorData::zeros(it, 1)).expect("one element"));
    let beyond = imp.g.add_constant(
        format!("{base}/depth_index"),
        match it {
            DType::I32 => Tensor::scalar(depth as i32),
            _ => Tensor::scalar(depth),
        },
    );
    let neg = imp.op1(Op::Binary(BinaryOp::Less, None), &[idx, zero], format!("{base}/negative"))?;
    let idx = imp.op1(Op::Where, &[neg, beyond, idx], format!("{base}/indices"))?;
    let mut values = Vec::new();
    for (v, tag) in [(off, "off"), (on, "on")] {
        values.push(imp.op_with_i64(Op::Reshape { allowzero: false }, v, format!("{base}/{tag}_shape"), vec![1], format!("{base}/{tag}"))?);
    }
    let values = imp.op1(Op::Concat { axis: 0 }, &values, format!("{base}/values"))?;
    imp.op1(Op::OneHot { axis }, &[idx, depth_v, values], base.clone())
}

/// CUMSUM: inputs (x, axis), exclusive and reverse from the options.
fn cumsum(imp: &mut Importer, o: &OpIn) -> Result<ValueId> {
    let base = &o.base;
    let x = imp.value(imp.req(o, 0)?)?;
    let rank = imp.shape(x).len();
    let a = imp.const_ints(imp.req(o, 1)?, "the axis")?;
    let axis = match a[..] {
        [a] => imp.axis(a, rank)?,
        _ => return Err(imp.invalid(format!("the axis must have one value, got {a:?}"))),
    };
    let (exclusive, reverse) = o.op.options::<schema::CumsumOptions>().map(|p| (p.exclusive(), p.reverse())).unwrap_or_default();
    let axis = imp.g.add_constant(format!("{base}/axis"), Tensor::from_i64(vec![], vec![axis as i64]));
    imp.op1(Op::CumSum { exclusive, reverse }, &[x, axis], base.clone())
}
