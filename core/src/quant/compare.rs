//! How far a quantized graph's outputs are from the float graph's: per output, the SQNR in dB and the
//! largest absolute error, over a set of samples.
//!
//! The int8 graph runs on the CPU [`Session`] (its int8 kernels). If the runtime cannot run it, the error is
//! measured on a *simulation* instead: the float graph with every int8 value replaced by its float
//! quantize→dequantize round trip and every weight by its dequantized value ("fake quantization"); the result
//! says which of the two was used.

use super::params::{quantize_one, sqnr_db};
use crate::ir::{DType, Graph, Op, QuantParams, Tensor, TensorData, ValueId};
use crate::runtime::Session;
use crate::target::Progress;
use crate::{Error, Result};

/// The error of one output.
#[derive(Clone, Debug, PartialEq)]
pub struct OutputError {
    /// Output name.
    pub name: String,
    /// Signal-to-quantization-noise ratio in dB (higher is better; ∞ when exact).
    pub sqnr_db: f64,
    /// Largest absolute difference from the float model.
    pub max_abs_error: f64,
}

/// The comparison of a quantized model with its float original.
#[derive(Clone, Debug, PartialEq)]
pub struct Comparison {
    /// Per output, in graph output order.
    pub outputs: Vec<OutputError>,
    /// Number of samples.
    pub samples: usize,
    /// `int8 runtime` or `simulated (...why...)`.
    pub evaluated_with: String,
}

/// Compares `int8` (from [`super::quantize`]) with `float` on `samples` (float inputs, graph input order).
/// Progress is reported per sample as `evaluating`.
pub fn compare(float: &Graph, int8: &Graph, samples: &[Vec<Tensor>], progress: &Progress) -> Result<Comparison> {
    let mut fs = Session::new(float.clone())?;
    let (mut qs, evaluated_with, simulated) = match Session::new(int8.clone()) {
        Ok(s) => (s, "int8 CPU runtime".to_string(), false),
        Err(e) => (Session::new(simulate(int8)?)?, format!("simulated int8 (quantize-dequantize on the float runtime; the int8 runtime said: {e})"), true),
    };
    let no = float.outputs.len();
    let mut want: Vec<Vec<f64>> = vec![Vec::new(); no];
    let mut got: Vec<Vec<f64>> = vec![Vec::new(); no];
    for (k, s) in samples.iter().enumerate() {
        let f = fs.run(s)?;
        let inputs: Vec<Tensor> = if simulated {
            s.clone()
        } else {
            s.iter().zip(&int8.inputs).map(|(t, &i)| to_graph_input(t, int8, i)).collect::<Result<_>>()?
        };
        let o = qs.run(&inputs)?;
        for j in 0..no {
            want[j].extend(f[j].to_f64_vec());
            got[j].extend(dequantized(&o[j], int8.value(int8.outputs[j]).quant.as_ref()));
        }
        progress.report("evaluating", (k + 1) as u64, samples.len() as u64);
    }
    let outputs = (0..no)
        .map(|j| OutputError {
            name: float.value(float.outputs[j]).name.clone(),
            sqnr_db: sqnr_db(&want[j], &got[j]),
            max_abs_error: want[j].iter().zip(&got[j]).map(|(a, b)| (a - b).abs()).fold(0.0, f64::max),
        })
        .collect();
    Ok(Comparison { outputs, samples: samples.len(), evaluated_with })
}

/// A float sample as the int8 graph's input `i` wants it (quantized when the input is int8).
pub fn to_graph_input(t: &Tensor, g: &Graph, i: ValueId) -> Result<Tensor> {
    let v = g.value(i);
    match (&v.quant, v.dtype) {
        (Some(p), DType::I8) => {
            let data: Vec<i8> = t.to_f64_vec().iter().map(|&x| quantize_one(x as f32, p.scale[0], p.zero_point[0], -128)).collect();
            Tensor::from_vec(t.shape.clone(), data).ok_or_else(|| Error::InvalidModel("sample size mismatch".into()))
        }
        _ => Ok(t.clone()),
    }
}

/// Real values of an output (dequantized when it is quantized).
pub fn dequantized(t: &Tensor, p: Option<&QuantParams>) -> Vec<f64> {
    match (p, t.dtype()) {
        (Some(p), DType::I8 | DType::U8 | DType::I32) => t.to_f64_vec().iter().map(|&q| (q - p.zero_point[0] as f64) * p.scale[0] as f64).collect(),
        _ => t.to_f64_vec(),
    }
}

/// The float simulation of an int8 graph (see the module docs): float inputs and outputs.
pub fn simulate(q: &Graph) -> Result<Graph> {
    let mut s = q.clone();
    // Constants: dequantize.
    for v in &mut s.values {
        if let (Some(c), Some(p)) = (&v.constant, &v.quant) {
            v.constant = Some(dequantize_tensor(c, p));
            v.dtype = DType::F32;
            v.quant = None;
        }
    }
    // Activations: float, with a quantize→dequantize round trip after each producer (and each input).
    let old_nodes = std::mem::take(&mut s.nodes);
    let acts: Vec<usize> = (0..s.values.len()).filter(|&v| s.values[v].constant.is_none() && s.values[v].quant.is_some() && s.values[v].dtype == DType::I8).collect();
    let mut params = std::collections::HashMap::new();
    for &v in &acts {
        params.insert(v, s.values[v].quant.take().expect("quantized"));
        s.values[v].dtype = DType::F32;
    }
    let mut new_nodes = Vec::new();
    let round_trip = |s: &mut Graph, nodes: &mut Vec<crate::ir::Node>, v: ValueId, p: &QuantParams| -> ValueId {
        let name = s.value(v).name.clone();
        let shape = s.value(v).shape.clone();
        let qv = s.add_value(format!("{name}/q"), DType::I8, shape.clone());
        let dv = s.add_value(format!("{name}/dq"), DType::F32, shape);
        let sc = s.add_constant(format!("{name}/scale"), Tensor::scalar(p.scale[0]));
        let zp = s.add_constant(format!("{name}/zp"), Tensor::scalar(p.zero_point[0] as i8));
        nodes.push(crate::ir::Node { name: format!("{name}/quantize"), op: Op::QuantizeLinear { axis: 1, to: DType::I8, rounding: crate::ir::QuantRounding::TfLite }, inputs: vec![Some(v), Some(sc), Some(zp)], outputs: vec![qv], keep_float: false });
        nodes.push(crate::ir::Node { name: format!("{name}/dequantize"), op: Op::DequantizeLinear { axis: 1 }, inputs: vec![Some(qv), Some(sc), Some(zp)], outputs: vec![dv], keep_float: false });
        dv
    };
    let mut replaced: std::collections::HashMap<ValueId, ValueId> = std::collections::HashMap::new();
    for &i in &s.inputs.clone() {
        if let Some(p) = params.get(&i.0) {
            let d = round_trip(&mut s, &mut new_nodes, i, p);
            replaced.insert(i, d);
        }
    }
    for mut n in old_nodes {
        // QuantizeLinear/DequantizeLinear at the edges (float_io) become identities: their neighbours are
        // already float.
        if matches!(n.op, Op::QuantizeLinear { .. } | Op::DequantizeLinear { .. }) {
            n.op = Op::Identity;
            n.inputs.truncate(1);
        }
        for i in n.inputs.iter_mut().flatten() {
            if let Some(r) = replaced.get(i) {
                *i = *r;
            }
        }
        let outs = n.outputs.clone();
        new_nodes.push(n);
        for o in outs {
            if let Some(p) = params.get(&o.0) {
                let d = round_trip(&mut s, &mut new_nodes, o, p);
                replaced.insert(o, d);
            }
        }
    }
    s.nodes = new_nodes;
    for o in s.outputs.iter_mut() {
        if let Some(r) = replaced.get(o) {
            *o = *r;
        }
    }
    // Graph outputs that were int8 are float now; callers dequantize with the int8 graph's parameters, so
    // leave the simulation's outputs as real values by clearing the parameters there.
    Ok(s)
}

fn dequantize_tensor(c: &Tensor, p: &QuantParams) -> Tensor {
    let v = c.to_f64_vec();
    let n = v.len();
    let per = match p.axis {
        Some(ax) if p.scale.len() > 1 => {
            let inner: usize = c.shape[ax + 1..].iter().product();
            Some((inner, p.scale.len()))
        }
        _ => None,
    };
    let out: Vec<f32> = (0..n)
        .map(|i| {
            let ch = per.map(|(inner, nc)| (i / inner.max(1)) % nc).unwrap_or(0);
            ((v[i] - p.zero_point[ch] as f64) * p.scale[ch] as f64) as f32
        })
        .collect();
    Tensor { shape: c.shape.clone(), data: TensorData::F32(out) }
}
