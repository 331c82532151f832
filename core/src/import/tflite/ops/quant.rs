//! Quantization: QUANTIZE (from float, or requantizing), DEQUANTIZE (f16 weights folded into f32
//! constants) and DENSIFY (sparse constants are expanded when read).

use super::{OpIn, ImportFn};
use crate::format::tflite::schema::builtin_operator as bo;
use crate::import::tflite::importer::Importer;
use crate::ir::{DType, Op, QuantParams, Tensor, TensorData, ValueId};
use crate::Result;

/// The ops of this family.
pub(super) const OPS: &[(i32, ImportFn)] = &[(bo::QUANTIZE, quantize), (bo::DEQUANTIZE, dequantize), (bo::DENSIFY, densify)];

fn quantize(imp: &mut Importer, o: &OpIn) -> Result<ValueId> {
    let base = &o.base;
    let x = imp.value(imp.req(o, 0)?)?;
    let (to, _) = imp.declared(o.outs[0])?;
    let q = imp.quant(o.outs[0])?.ok_or_else(|| imp.invalid("the output has no quantization parameters"))?;
    if !imp.dtype(x).is_float() && (imp.g.value(x).quant.is_none() || q.scale.len() != 1) {
        return Err(imp.unsupported("re-quantization (QUANTIZE of an integer tensor) needs per-tensor parameters on both sides"));
    }
    let (s, z, axis) = imp.qparams(&q, to, &base)?;
    let rounding = crate::ir::QuantRounding::TfLite;
    imp.node(Op::QuantizeLinear { axis, to, rounding }, vec![Some(x), Some(s), Some(z)], base.clone())
}

fn dequantize(imp: &mut Importer, o: &OpIn) -> Result<ValueId> {
    let base = &o.base;
    let xt = imp.req(o, 0)?;
    let x = imp.value(xt)?;
    let dt = imp.dtype(x);
    if dt.is_float() {
        // f16 weights: fold into an f32 constant.
        if let Some(c) = imp.g.constant(x) {
            let f = Tensor::from_f32(c.shape.clone(), c.to_f64_vec().into_iter().map(|v| v as f32).collect());
            Ok(imp.g.add_constant(base.clone(), f))
        } else {
            imp.op1(Op::Cast { to: DType::F32 }, &[x], base.clone())
        }
    } else {
        let q = imp.quant(xt)?.ok_or_else(|| imp.invalid("the input has no quantization parameters"))?;
        let (s, z, axis) = imp.qparams(&q, dt, &base)?;
        imp.node(Op::DequantizeLinear { axis }, vec![Some(x), Some(s), Some(z)], base.clone())
    }
}

fn densify(imp: &mut Importer, o: &OpIn) -> Result<ValueId> {
    // Its input is a sparse constant, already expanded when read: the output is that constant.
    let x = imp.value(imp.req(o, 0)?)?;
    if imp.g.constant(x).is_none() {
        return Err(imp.unsupported("DENSIFY of a tensor computed at run time"));
    }
    Ok(x)
}

impl Importer<'_> {
    /// Scale and zero-point constants of a (de)quantization, and its axis.
    fn qparams(&mut self, q: &QuantParams, qtype: DType, base: &str) -> Result<(ValueId, ValueId, i64)> {
        if !matches!(qtype, DType::I8 | DType::U8 | DType::I16) {
            return Err(self.unsupported(format!("quantization to {qtype}")));
        }
        let shape = if q.axis.is_some() { vec![q.scale.len()] } else { vec![] };
        let s = self.g.add_constant(format!("{base}/scale"), Tensor::from_f32(shape.clone(), q.scale.clone()));
        let zd = match qtype {
            DType::I8 => TensorData::I8(q.zero_point.iter().map(|&z| z as i8).collect()),
            DType::U8 => TensorData::U8(q.zero_point.iter().map(|&z| z as u8).collect()),
            _ => TensorData::I16(q.zero_point.iter().map(|&z| z as i16).collect()),
        };
        let z = self.g.add_constant(format!("{base}/zero_point"), Tensor::new(shape, zd).expect("zero points match scales"));
        Ok((s, z, q.axis.unwrap_or(0) as i64))
    }
}
