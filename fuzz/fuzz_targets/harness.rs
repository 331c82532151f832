//! What each fuzz target does with its input, in one place: the libFuzzer targets (`fuzz_targets/*.rs`) call
//! these, and `cli/tests/fuzz_regressions.rs` replays the inputs kept in `fuzz/regressions/<target>/` through
//! the same functions on the stable toolchain. Every function must return for any input: errors are expected,
//! panics, aborts and hangs are the bugs the fuzzer looks for.
#![allow(dead_code)]

use tpu_sdk_core::ir::{DType, Graph, Tensor, TensorData};
use tpu_sdk_core::runtime::Session;

/// Budget for what one input may make the SDK allocate (libFuzzer's RSS limit is 2 GB): a model asking for
/// more must be refused with an error, as on a user's machine.
pub const BUDGET: u64 = 64 << 20;

/// Inputs larger than this many elements are not made (the run is skipped).
const MAX_INPUT: u64 = 1 << 16;

fn init() {
    tpu_sdk_core::limits::set_memory_budget(Some(BUDGET));
}

/// The bytes as a TFLite model when they carry its file identifier, else as an ONNX model.
fn import(data: &[u8]) -> Option<Graph> {
    init();
    if data.len() >= 8 && &data[4..8] == b"TFL3" {
        return tpu_sdk_core::import::tflite::load_bytes(data, &Default::default()).ok();
    }
    tpu_sdk_core::import::onnx::load_bytes(data, None, &Default::default()).ok()
}

/// ONNX protobuf decoding, import (shape inference, constant folding), verification, optimisation passes.
pub fn onnx_import(data: &[u8]) {
    init();
    if let Ok(mut g) = tpu_sdk_core::import::onnx::load_bytes(data, None, &Default::default()) {
        let _ = tpu_sdk_core::ir::verify::verify(&g);
        let _ = tpu_sdk_core::passes::optimize(&mut g);
    }
}

/// TFLite flatbuffer reading and import (sparse tensors, quantization), optimisation passes.
pub fn tflite_import(data: &[u8]) {
    init();
    if let Ok(mut g) = tpu_sdk_core::import::tflite::load_bytes(data, &Default::default()) {
        let _ = tpu_sdk_core::passes::optimize(&mut g);
    }
}

/// The `.npy` reader; a tensor it reads round-trips through the writer.
pub fn npy_read(data: &[u8]) {
    init();
    if let Ok(t) = tpu_sdk_core::npy::from_bytes(data) {
        let bytes = tpu_sdk_core::npy::to_bytes(&t).expect("a tensor that was read can be written");
        let back = tpu_sdk_core::npy::from_bytes(&bytes).expect("what the writer writes, the reader reads");
        assert_eq!(back.shape, t.shape);
        assert_eq!(back.dtype(), t.dtype());
    }
}

/// The parser of `edgetpu_compiler`'s log.
pub fn compiler_log(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let _ = tpu_sdk_edgetpu::compiler::parse_version(&text);
    let _ = tpu_sdk_edgetpu::compiler::parse_report(&text);
}

/// StableHLO emission of whatever the importers accept; true when it wrote a module.
pub fn stablehlo_lower(data: &[u8]) -> bool {
    let Some(mut g) = import(data) else { return false };
    tpu_sdk_core::passes::optimize(&mut g).is_ok() && tpu_sdk_cloud_tpu::lower::lower(&g).is_ok()
}

fn input(dtype: DType, shape: &[usize], seed: u64) -> Option<Tensor> {
    let n = tpu_sdk_core::limits::numel(shape).filter(|&n| n <= MAX_INPUT)? as usize;
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut next = move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    };
    let data = match dtype {
        DType::F32 => TensorData::F32((0..n).map(|_| (next() % 2001) as f32 / 1000.0 - 1.0).collect()),
        DType::I64 => TensorData::I64((0..n).map(|_| (next() % 4) as i64).collect()),
        DType::I32 => TensorData::I32((0..n).map(|_| (next() % 4) as i32).collect()),
        DType::I8 => TensorData::I8((0..n).map(|_| next() as i8).collect()),
        DType::U8 => TensorData::U8((0..n).map(|_| next() as u8).collect()),
        DType::Bool => TensorData::Bool((0..n).map(|_| next() % 2 == 0).collect()),
        other => TensorData::zeros(other, n),
    };
    Some(Tensor { shape: shape.to_vec(), data })
}

/// The most multiply-accumulates `session_run` runs (a few tens of milliseconds in release).
const MAX_FUZZ_MACS: u64 = 50_000_000;

/// The CPU runtime on imported graphs: a `Session` run on deterministic inputs of the declared types (floats in
/// [-1, 1], integers in 0..4 so that index inputs are often valid) when they fit [`MAX_FUZZ_MACS`]; true when the
/// run succeeded.
pub fn session_run(data: &[u8]) -> bool {
    let Some(mut g) = import(data) else { return false };
    if tpu_sdk_core::passes::optimize(&mut g).is_err() {
        return false;
    }
    // A model that is valid but heavy (a 2-GMAC convolution takes seconds in release and past libFuzzer's 10 s
    // timeout under ASan) says nothing about robustness: run only what fits a small compute budget.
    let macs: u64 = (0..g.nodes.len()).map(|n| tpu_sdk_core::ir::display::node_macs(&g, n)).fold(0, u64::saturating_add);
    if macs > MAX_FUZZ_MACS {
        return false;
    }
    let mut inputs = Vec::new();
    for (k, &i) in g.inputs.iter().enumerate() {
        let v = g.value(i);
        if v.dynamic {
            return false;
        }
        match input(v.dtype, &v.shape, k as u64 + data.len() as u64) {
            Some(t) => inputs.push(t),
            None => return false,
        }
    }
    Session::new(g).is_ok_and(|mut s| s.run(&inputs).is_ok())
}

/// Structure-aware: the bytes are a recipe for a small graph (1-2 f32 inputs of rank 1-4, up to 10 ops chosen
/// among the common families with small attributes and constants), built through the IR builder so that shapes
/// are inferred as it goes (a choice the builder refuses is skipped: plain byte mutations of model files rarely
/// get past the parsers to these paths). The graph then runs on the CPU before and after the optimisation passes,
/// which must agree (the passes must not change what a graph computes), and the optimised graph is lowered to
/// StableHLO. True when both runs succeeded and were compared.
pub fn graph_build(data: &[u8]) -> bool {
    init();
    let mut u = arbitrary::Unstructured::new(data);
    let Ok(Some(g)) = recipe::build(&mut u) else { return false };
    let mut inputs = Vec::new();
    for (k, &i) in g.inputs.iter().enumerate() {
        let v = g.value(i);
        match input(v.dtype, &v.shape, k as u64 + 1) {
            Some(t) => inputs.push(t),
            None => return false,
        }
    }
    let plain = Session::new(g.clone()).and_then(|mut s| s.run(&inputs));
    let mut opt = g.clone();
    if tpu_sdk_core::passes::optimize(&mut opt).is_err() {
        return false;
    }
    let _ = tpu_sdk_cloud_tpu::lower::lower(&opt);
    let optimized = Session::new(opt).and_then(|mut s| s.run(&inputs));
    let (Ok(a), Ok(b)) = (plain, optimized) else { return false };
    assert_eq!(a.len(), b.len(), "the optimised graph has another number of outputs");
    for (k, (x, y)) in a.iter().zip(&b).enumerate() {
        assert_eq!((&x.shape, x.dtype()), (&y.shape, y.dtype()), "output {k}: the optimised graph's type differs\n{g:?}");
        let (xs, ys) = (x.to_f64_vec(), y.to_f64_vec());
        // ill-conditioned outputs (an overflow or a NaN anywhere) are not compared: fused arithmetic may move them
        if xs.iter().chain(&ys).any(|v| !v.is_finite() || v.abs() > 1e6) {
            continue;
        }
        let scale = xs.iter().fold(1.0f64, |m, v| m.max(v.abs()));
        for (i, (p, q)) in xs.iter().zip(&ys).enumerate() {
            assert!((p - q).abs() <= 1e-3 * scale, "output {k}[{i}]: {p} before the passes, {q} after\n{g:?}");
        }
    }
    true
}

/// The graph recipes of [`graph_build`].
mod recipe {
    use arbitrary::{Result, Unstructured};
    use tpu_sdk_core::ir::builder::GraphBuilder;
    use tpu_sdk_core::ir::*;
    use tpu_sdk_core::runtime::CpuEval;

    const UNARY: [UnaryOp; 12] = [
        UnaryOp::Relu,
        UnaryOp::Sigmoid,
        UnaryOp::Tanh,
        UnaryOp::Neg,
        UnaryOp::Abs,
        UnaryOp::Exp,
        UnaryOp::Sqrt,
        UnaryOp::HardSwish,
        UnaryOp::Erf,
        UnaryOp::Clip { min: 0.0, max: 6.0 },
        UnaryOp::LeakyRelu { alpha: 0.1 },
        UnaryOp::HardSigmoid { alpha: 0.2, beta: 0.5 },
    ];
    const BINARY: [BinaryOp; 7] = [BinaryOp::Add, BinaryOp::Sub, BinaryOp::Mul, BinaryOp::Div, BinaryOp::Max, BinaryOp::Min, BinaryOp::PRelu];
    const ACTIVATIONS: [Option<Activation>; 3] = [None, Some(Activation::Relu), Some(Activation::Relu6)];

    fn constant(b: &mut GraphBuilder, u: &mut Unstructured, shape: Vec<usize>) -> Result<ValueId> {
        let n: usize = shape.iter().product();
        let mut v = Vec::with_capacity(n);
        for _ in 0..n {
            v.push(u.int_in_range(-8i8..=8)? as f32 / 8.0);
        }
        let name = format!("c{}", b.graph().values.len());
        Ok(b.constant(&name, Tensor::from_f32(shape, v)))
    }

    fn ints(b: &mut GraphBuilder, v: Vec<i64>) -> ValueId {
        let name = format!("i{}", b.graph().values.len());
        b.constant(&name, Tensor::from_i64(vec![v.len()], v))
    }

    /// A graph from the recipe in `u`; `None` when it came out empty.
    pub fn build(u: &mut Unstructured) -> Result<Option<Graph>> {
        let mut b = GraphBuilder::with_eval("fuzz", &CpuEval);
        let mut vals = Vec::new();
        for i in 0..u.int_in_range(1..=2)? {
            let rank = u.int_in_range(1..=4)?;
            let mut shape = Vec::new();
            for _ in 0..rank {
                shape.push(u.int_in_range(1..=5)?);
            }
            vals.push(b.input(&format!("x{i}"), DType::F32, &shape));
        }
        let first_node = vals.len();
        for _ in 0..u.int_in_range(1..=10)? {
            let x = *u.choose(&vals)?;
            let other = *u.choose(&vals)?;
            let xs = b.graph().value(x).shape.clone();
            let rank = xs.len();
            let axis = u.int_in_range(0..=rank.saturating_sub(1))?;
            let (op, inputs, n_out): (Op, Vec<Option<ValueId>>, usize) = match u.int_in_range(0..=17)? {
                0 => (Op::Unary(*u.choose(&UNARY)?), vec![Some(x)], 1),
                1 => (Op::Binary(*u.choose(&BINARY)?, *u.choose(&ACTIVATIONS)?), vec![Some(x), Some(other)], 1),
                2 => {
                    // a constant operand: a scalar, per-channel (axis 1) or of x's shape
                    let shape = match u.int_in_range(0..=2)? {
                        0 => vec![],
                        1 if rank >= 2 => std::iter::once(xs[1]).chain(std::iter::repeat(1).take(rank - 2)).collect(),
                        _ => xs.clone(),
                    };
                    let c = constant(&mut b, u, shape)?;
                    (Op::Binary(*u.choose(&BINARY)?, *u.choose(&ACTIVATIONS)?), vec![Some(x), Some(c)], 1)
                }
                3 if rank == 4 && xs[1] > 0 => {
                    let c = xs[1];
                    let group = if u.arbitrary()? { c } else { 1 };
                    let out = if group == c && u.arbitrary()? { c } else { u.int_in_range(1..=4)? * group };
                    let k = u.int_in_range(1..=3)?;
                    let w = constant(&mut b, u, vec![out, c / group, k, k])?;
                    let bias = if u.arbitrary()? { Some(constant(&mut b, u, vec![out])?) } else { None };
                    let p = u.int_in_range(0..=1)?;
                    let s = u.int_in_range(1..=2)?;
                    let attrs = ConvAttrs {
                        kernel_shape: vec![k, k],
                        strides: vec![s, s],
                        dilations: vec![],
                        pads: vec![p; 4],
                        auto_pad: AutoPad::NotSet,
                        group,
                        activation: *u.choose(&ACTIVATIONS)?,
                    };
                    (Op::Conv(attrs), vec![Some(x), Some(w), bias], 1)
                }
                4 if rank == 4 => {
                    let k = u.int_in_range(1..=3)?;
                    let attrs = PoolAttrs {
                        kernel_shape: vec![k, k],
                        strides: vec![u.int_in_range(1..=2)?; 2],
                        dilations: vec![],
                        pads: vec![u.int_in_range(0..=1)?.min(k - 1); 4],
                        auto_pad: AutoPad::NotSet,
                        ceil_mode: u.arbitrary()?,
                        count_include_pad: u.arbitrary()?,
                    };
                    (if u.arbitrary()? { Op::MaxPool(attrs) } else { Op::AveragePool(attrs) }, vec![Some(x)], 1)
                }
                5 if rank >= 3 => (if u.arbitrary()? { Op::GlobalAveragePool } else { Op::GlobalMaxPool }, vec![Some(x)], 1),
                6 if rank >= 1 => {
                    let k = u.int_in_range(1..=4)?;
                    let w = constant(&mut b, u, vec![xs[rank - 1], k])?;
                    (Op::MatMul, vec![Some(x), Some(w)], 1)
                }
                7 if rank == 2 => {
                    let k = u.int_in_range(1..=4)?;
                    let w = constant(&mut b, u, vec![xs[1], k])?;
                    let c = constant(&mut b, u, vec![k])?;
                    let op = Op::Gemm { alpha: 1.0, beta: 1.0, trans_a: false, trans_b: false, activation: *u.choose(&ACTIVATIONS)? };
                    (op, vec![Some(x), Some(w), Some(c)], 1)
                }
                8 => {
                    let mut perm: Vec<usize> = (0..rank).collect();
                    for i in (1..rank).rev() {
                        perm.swap(i, u.int_in_range(0..=i)?);
                    }
                    (Op::Transpose { perm }, vec![Some(x)], 1)
                }
                9 => {
                    let shape = match u.int_in_range(0..=2)? {
                        0 => vec![-1],
                        1 => vec![1, -1],
                        _ => xs.iter().rev().map(|&d| d as i64).collect(),
                    };
                    let s = ints(&mut b, shape);
                    (Op::Reshape { allowzero: false }, vec![Some(x), Some(s)], 1)
                }
                10 => (Op::Concat { axis }, vec![Some(x), Some(other)], 1),
                11 => (Op::Softmax { axis }, vec![Some(x)], 1),
                12 => {
                    let rop = *u.choose(&[ReduceOp::Sum, ReduceOp::Mean, ReduceOp::Max, ReduceOp::Min, ReduceOp::L2])?;
                    (Op::Reduce { op: rop, axes: Some(vec![axis]), keepdims: u.arbitrary()?, noop_with_empty_axes: false }, vec![Some(x)], 1)
                }
                13 if rank >= 1 => {
                    let start = u.int_in_range(0..=xs[axis] as i64)?;
                    let end = u.int_in_range(start..=xs[axis] as i64 + 1)?;
                    let step = u.int_in_range(1..=2)?;
                    let (s, e, a, st) = (ints(&mut b, vec![start]), ints(&mut b, vec![end]), ints(&mut b, vec![axis as i64]), ints(&mut b, vec![step]));
                    (Op::Slice, vec![Some(x), Some(s), Some(e), Some(a), Some(st)], 1)
                }
                14 if rank >= 2 => {
                    let c = xs[1];
                    let (g, be, m) = (constant(&mut b, u, vec![c])?, constant(&mut b, u, vec![c])?, constant(&mut b, u, vec![c])?);
                    let var: Vec<f32> = (0..c).map(|i| 0.5 + i as f32 * 0.25).collect();
                    let v = b.constant(&format!("var{}", b.graph().values.len()), Tensor::from_f32(vec![c], var));
                    (Op::BatchNorm { epsilon: 1e-5 }, vec![Some(x), Some(g), Some(be), Some(m), Some(v)], 1)
                }
                15 => {
                    let mut pads = Vec::new();
                    for _ in 0..2 * rank {
                        pads.push(u.int_in_range(0..=2)?);
                    }
                    let p = ints(&mut b, pads);
                    (Op::Pad { mode: PadMode::Constant }, vec![Some(x), Some(p)], 1)
                }
                16 => {
                    let n = u.int_in_range(1..=3)?;
                    (Op::Split { axis, split: None, num_outputs: n }, vec![Some(x)], n)
                }
                17 if rank >= 2 => (Op::LayerNorm { axis: rank - 1, epsilon: 1e-5 }, vec![Some(x)], 1),
                _ => continue,
            };
            if let Ok(outs) = b.node(op, &inputs, n_out) {
                vals.extend(outs);
            }
        }
        if vals.len() == first_node {
            return Ok(None);
        }
        b.output(*vals.last().expect("a node output"));
        if vals.len() > first_node + 1 && u.arbitrary()? {
            b.output(vals[first_node]);
        }
        Ok(b.finish().ok())
    }
}
