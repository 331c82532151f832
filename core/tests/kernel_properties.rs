//! Property tests of the reference CPU kernels (the oracle of every other target) against naive loops
//! written here: convolution (strides, dilations, groups including depthwise, pads, 1-D and 2-D),
//! broadcasting binary ops (random ranks and broadcastable shapes), reductions (random axes, keepdims) and
//! the int8 fully-connected and convolution kernels with their output stages (TFLite's integer arithmetic).
//!
//! Every graph is built with the public IR API, inferred, and run by a [`Session`] in [`run_node`].

use proptest::prelude::*;
use tpu_sdk_core::ir::infer::infer_graph;
use tpu_sdk_core::ir::{Activation, AutoPad, BinaryOp, ConvAttrs, DType, Graph, Op, QuantParams, ReduceOp, Tensor};
use tpu_sdk_core::runtime::Session;

/// A node input: a graph input fed at run time, or a constant; either may carry quantization parameters.
enum Arg {
    Input(Tensor, Option<QuantParams>),
    Const(Tensor, Option<QuantParams>),
}

/// Builds a one-node graph of `op` on `args` (absent optional inputs are `None`), infers its output's dtype
/// and shape, and runs it on the CPU runtime. `out_quant` sets the output's quantization parameters.
fn run_node(op: Op, args: Vec<Option<Arg>>, out_quant: Option<QuantParams>) -> Tensor {
    let mut g = Graph::new("property");
    let mut feeds = Vec::new();
    let mut inputs = Vec::new();
    for (k, a) in args.into_iter().enumerate() {
        let id = a.map(|a| {
            let (id, q) = match a {
                Arg::Input(t, q) => {
                    let id = g.add_input(format!("x{k}"), t.dtype(), t.shape.clone());
                    feeds.push(t);
                    (id, q)
                }
                Arg::Const(t, q) => (g.add_constant(format!("c{k}"), t), q),
            };
            g.value_mut(id).quant = q;
            id
        });
        inputs.push(id);
    }
    let y = g.add_value("y", DType::F32, vec![]);
    g.value_mut(y).quant = out_quant;
    g.add_node("node", op, inputs, vec![y]);
    g.outputs.push(y);
    infer_graph(&mut g, &tpu_sdk_core::runtime::CpuEval).expect("shape inference");
    let mut out = Session::new(g).expect("session").run(&feeds).expect("run");
    out.remove(0)
}

/// 64 cases per property, small shapes; failures are not persisted to files.
fn config() -> ProptestConfig {
    ProptestConfig { cases: 64, failure_persistence: None, ..ProptestConfig::default() }
}

/// Row-major strides of `shape`.
fn strides(shape: &[usize]) -> Vec<usize> {
    let mut s = vec![1; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * shape[i + 1];
    }
    s
}

/// The multi-index of flat position `i` in `shape`.
fn unravel(mut i: usize, shape: &[usize]) -> Vec<usize> {
    let mut idx = vec![0; shape.len()];
    for d in (0..shape.len()).rev() {
        idx[d] = i % shape[d];
        i /= shape[d];
    }
    idx
}

fn f32s(n: usize, lo: f32, hi: f32) -> impl Strategy<Value = Vec<f32>> {
    prop::collection::vec(lo..hi, n)
}

fn close(got: &[f32], want: &[f64], rtol: f64, atol: f64) -> Result<(), TestCaseError> {
    prop_assert_eq!(got.len(), want.len());
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        prop_assert!((g as f64 - w).abs() <= atol + rtol * w.abs(), "element {}: {} instead of {}", i, g, w);
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------------------
// Convolution

/// A convolution problem: NC(spatial) input, groups, per-dim kernel/stride/dilation/pads, optional bias.
#[derive(Clone, Debug)]
struct ConvCase {
    n: usize,
    group: usize,
    c_per_group: usize,
    m_per_group: usize,
    spatial: Vec<usize>,
    kernel: Vec<usize>,
    stride: Vec<usize>,
    dilation: Vec<usize>,
    pads: Vec<usize>,
    bias: bool,
}

impl ConvCase {
    fn out_spatial(&self) -> Vec<usize> {
        let r = self.spatial.len();
        (0..r)
            .map(|d| (self.spatial[d] + self.pads[d] + self.pads[r + d] - self.dilation[d] * (self.kernel[d] - 1) - 1) / self.stride[d] + 1)
            .collect()
    }
}

fn conv_case() -> impl Strategy<Value = ConvCase> {
    let dims = 1usize..=2;
    dims.prop_flat_map(|r| {
        (
            1usize..=2,
            prop_oneof![Just(1usize), Just(2), Just(3)],
            1usize..=3,
            1usize..=3,
            prop::collection::vec(1usize..=3, r),
            prop::collection::vec(1usize..=3, r),
            prop::collection::vec(1usize..=2, r),
            prop::collection::vec(0usize..=2, 2 * r),
            any::<bool>(),
            any::<bool>(),
            prop::collection::vec(0usize..=5, r),
        )
    })
    .prop_map(|(n, group, cpg, mpg, kernel, stride, dilation, pads, bias, depthwise, extra)| {
        // Inputs just large enough for the dilated kernel, plus a few.
        let spatial: Vec<usize> = (0..kernel.len()).map(|d| (dilation[d] * (kernel[d] - 1) + 1 + extra[d]).max(1)).collect();
        let (group, c_per_group) = if depthwise { (group * cpg, 1) } else { (group, cpg) };
        ConvCase { n, group, c_per_group, m_per_group: mpg, spatial, kernel, stride, dilation, pads, bias }
    })
}

/// The convolution as its definition: for every output, the sum over the group's input channels and the
/// kernel taps that fall inside the (unpadded) input.
fn naive_conv(c: &ConvCase, x: &[f32], w: &[f32], b: Option<&[f32]>) -> Vec<f64> {
    let r = c.spatial.len();
    let (cin, m) = (c.group * c.c_per_group, c.group * c.m_per_group);
    let out_sp = c.out_spatial();
    let out_shape: Vec<usize> = [c.n, m].into_iter().chain(out_sp.iter().copied()).collect();
    let x_shape: Vec<usize> = [c.n, cin].into_iter().chain(c.spatial.iter().copied()).collect();
    let w_shape: Vec<usize> = [m, c.c_per_group].into_iter().chain(c.kernel.iter().copied()).collect();
    let (xs, ws) = (strides(&x_shape), strides(&w_shape));
    let taps: usize = c.kernel.iter().product();
    let total: usize = out_shape.iter().product();
    (0..total)
        .map(|i| {
            let o = unravel(i, &out_shape);
            let (batch, oc) = (o[0], o[1]);
            let gi = oc / c.m_per_group;
            let mut acc = b.map_or(0.0, |b| b[oc] as f64);
            for ic in 0..c.c_per_group {
                for t in 0..taps {
                    let k = unravel(t, &c.kernel);
                    let mut xi = batch * xs[0] + (gi * c.c_per_group + ic) * xs[1];
                    let mut inside = true;
                    for d in 0..r {
                        let p = (o[2 + d] * c.stride[d] + k[d] * c.dilation[d]) as isize - c.pads[d] as isize;
                        inside &= p >= 0 && (p as usize) < c.spatial[d];
                        xi += p.max(0) as usize * xs[2 + d];
                    }
                    if inside {
                        let wi = oc * ws[0] + ic * ws[1] + k.iter().zip(&ws[2..]).map(|(a, s)| a * s).sum::<usize>();
                        acc += x[xi] as f64 * w[wi] as f64;
                    }
                }
            }
            acc
        })
        .collect()
}

fn conv_with_data() -> impl Strategy<Value = (ConvCase, Vec<f32>, Vec<f32>, Vec<f32>)> {
    conv_case().prop_flat_map(|c| {
        let cin = c.group * c.c_per_group;
        let m = c.group * c.m_per_group;
        let nx = c.n * cin * c.spatial.iter().product::<usize>();
        let nw = m * c.c_per_group * c.kernel.iter().product::<usize>();
        (Just(c), f32s(nx, -1.0, 1.0), f32s(nw, -1.0, 1.0), f32s(m, -1.0, 1.0))
    })
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn conv_equals_the_naive_loop((c, x, w, b) in conv_with_data()) {
        let r = c.spatial.len();
        let (cin, m) = (c.group * c.c_per_group, c.group * c.m_per_group);
        let x_shape: Vec<usize> = [c.n, cin].into_iter().chain(c.spatial.iter().copied()).collect();
        let w_shape: Vec<usize> = [m, c.c_per_group].into_iter().chain(c.kernel.iter().copied()).collect();
        let attrs = ConvAttrs {
            kernel_shape: c.kernel.clone(),
            strides: c.stride.clone(),
            dilations: c.dilation.clone(),
            pads: c.pads.clone(),
            auto_pad: AutoPad::NotSet,
            group: c.group,
            activation: None,
        };
        let mut args = vec![
            Some(Arg::Input(Tensor::from_f32(x_shape, x.clone()), None)),
            Some(Arg::Const(Tensor::from_f32(w_shape, w.clone()), None)),
        ];
        if c.bias {
            args.push(Some(Arg::Const(Tensor::from_f32(vec![m], b.clone()), None)));
        }
        let y = run_node(Op::Conv(attrs), args, None);
        let want_shape: Vec<usize> = [c.n, m].into_iter().chain(c.out_spatial()).collect();
        prop_assert_eq!(&y.shape, &want_shape);
        prop_assert_eq!(r + 2, y.shape.len());
        let want = naive_conv(&c, &x, &w, c.bias.then_some(&b[..]));
        close(y.as_f32().unwrap(), &want, 1e-4, 1e-5)?;
    }
}

// ---------------------------------------------------------------------------------------------------------
// Broadcasting binary ops

/// The numpy broadcast of two shapes that are compatible (trailing dims align, a missing dim counts as 1).
fn broadcast(a: &[usize], b: &[usize]) -> Vec<usize> {
    let r = a.len().max(b.len());
    let dim = |s: &[usize], d: usize| if d + s.len() >= r { s[d + s.len() - r] } else { 1 };
    (0..r).map(|d| dim(a, d).max(dim(b, d))).collect()
}

/// Two broadcastable input shapes and their broadcast: each input takes a random number of trailing dims of
/// a random full shape, some of them replaced by 1.
fn broadcast_shapes() -> impl Strategy<Value = (Vec<usize>, Vec<usize>, Vec<usize>)> {
    prop::collection::vec(1usize..=4, 0..=4).prop_flat_map(|full| {
        let r = full.len();
        let side = move |full: Vec<usize>| {
            (0..=r, prop::collection::vec(any::<bool>(), r)).prop_map(move |(rank, ones)| {
                full[r - rank..].iter().zip(&ones[r - rank..]).map(|(&d, &one)| if one { 1 } else { d }).collect::<Vec<usize>>()
            })
        };
        (side(full.clone()), side(full)).prop_map(|(a, b)| (broadcast(&a, &b), a, b))
    })
}

/// The flat index into an input of `shape` for the output multi-index `o` (broadcast dims read index 0).
fn broadcast_index(o: &[usize], shape: &[usize]) -> usize {
    let off = o.len() - shape.len();
    let s = strides(shape);
    shape.iter().enumerate().map(|(d, &n)| if n == 1 { 0 } else { o[off + d] * s[d] }).sum()
}

/// `op` on two run-time inputs.
fn run_binary(op: BinaryOp, a: Tensor, b: Tensor) -> Tensor {
    run_node(Op::Binary(op, None), vec![Some(Arg::Input(a, None)), Some(Arg::Input(b, None))], None)
}

fn binary_f32(op: BinaryOp, a: f32, b: f32) -> f32 {
    match op {
        BinaryOp::Add => a + b,
        BinaryOp::Sub => a - b,
        BinaryOp::Mul => a * b,
        BinaryOp::Div => a / b,
        BinaryOp::Max => a.max(b),
        BinaryOp::Min => a.min(b),
        other => unreachable!("not generated: {other:?}"),
    }
}

fn binary_case() -> impl Strategy<Value = (BinaryOp, Vec<usize>, Vec<usize>, Vec<usize>, Vec<f32>, Vec<f32>)> {
    let ops = prop::sample::select(vec![BinaryOp::Add, BinaryOp::Sub, BinaryOp::Mul, BinaryOp::Div, BinaryOp::Max, BinaryOp::Min]);
    (ops, broadcast_shapes()).prop_flat_map(|(op, (out, a, b))| {
        let (na, nb) = (a.iter().product::<usize>(), b.iter().product::<usize>());
        // Divisors kept away from zero: the property is about broadcasting, not division by ~0.
        let b_vals = f32s(nb, 0.5, 2.0).prop_flat_map(|v| (Just(v.clone()), prop::collection::vec(any::<bool>(), v.len())))
            .prop_map(|(v, neg)| v.iter().zip(neg).map(|(&x, n)| if n { -x } else { x }).collect::<Vec<f32>>());
        (Just(op), Just(out), Just(a), Just(b), f32s(na, -3.0, 3.0), b_vals)
    })
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn broadcasting_binary_ops_equal_the_naive_loop((op, out, sa, sb, a, b) in binary_case()) {
        let y = run_binary(op, Tensor::from_f32(sa.clone(), a.clone()), Tensor::from_f32(sb.clone(), b.clone()));
        prop_assert_eq!(&y.shape, &out);
        let got = y.as_f32().unwrap();
        for (i, &g) in got.iter().enumerate() {
            let o = unravel(i, &out);
            let want = binary_f32(op, a[broadcast_index(&o, &sa)], b[broadcast_index(&o, &sb)]);
            prop_assert_eq!(g.to_bits(), want.to_bits(), "{:?} element {}: {} instead of {}", op, i, g, want);
        }
    }

    #[test]
    fn broadcasting_integer_add_and_mul_equal_the_naive_loop(
        (mul, (out, sa, sb)) in (any::<bool>(), broadcast_shapes()),
        seed in any::<u64>(),
    ) {
        let (na, nb) = (sa.iter().product::<usize>(), sb.iter().product::<usize>());
        let mut s = seed | 1;
        let mut next = move || { s ^= s << 13; s ^= s >> 7; s ^= s << 17; (s % 201) as i64 - 100 };
        let a: Vec<i64> = (0..na).map(|_| next()).collect();
        let b: Vec<i64> = (0..nb).map(|_| next()).collect();
        let op = if mul { BinaryOp::Mul } else { BinaryOp::Add };
        let y = run_binary(op, Tensor::from_i64(sa.clone(), a.clone()), Tensor::from_i64(sb.clone(), b.clone()));
        prop_assert_eq!(&y.shape, &out);
        for (i, g) in y.to_i64_vec().into_iter().enumerate() {
            let o = unravel(i, &out);
            let (x, z) = (a[broadcast_index(&o, &sa)], b[broadcast_index(&o, &sb)]);
            prop_assert_eq!(g, if mul { x * z } else { x + z });
        }
    }
}

// ---------------------------------------------------------------------------------------------------------
// Reductions

fn reduce_naive(op: ReduceOp, v: &[f64]) -> f64 {
    match op {
        ReduceOp::Sum => v.iter().sum(),
        ReduceOp::Mean => v.iter().sum::<f64>() / v.len() as f64,
        ReduceOp::Max => v.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        ReduceOp::Min => v.iter().copied().fold(f64::INFINITY, f64::min),
        ReduceOp::Prod => v.iter().product(),
        ReduceOp::L1 => v.iter().map(|x| x.abs()).sum(),
        ReduceOp::L2 => v.iter().map(|x| x * x).sum::<f64>().sqrt(),
        ReduceOp::LogSum => v.iter().sum::<f64>().ln(),
        ReduceOp::LogSumExp => v.iter().map(|x| x.exp()).sum::<f64>().ln(),
        ReduceOp::SumSquare => v.iter().map(|x| x * x).sum(),
    }
}

fn reduce_case() -> impl Strategy<Value = (ReduceOp, Vec<usize>, Vec<bool>, bool, Vec<f32>)> {
    use ReduceOp::*;
    let ops = prop::sample::select(vec![Sum, Mean, Max, Min, Prod, L1, L2, LogSum, LogSumExp, SumSquare]);
    (ops, prop::collection::vec(1usize..=4, 1..=4)).prop_flat_map(|(op, shape)| {
        let n = shape.iter().product::<usize>();
        // LogSum needs a positive sum: positive data for it.
        let lo = if op == ReduceOp::LogSum { 0.1 } else { -2.0 };
        (Just(op), Just(shape.clone()), prop::collection::vec(any::<bool>(), shape.len()), any::<bool>(), f32s(n, lo, 2.0))
    })
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn reductions_over_random_axes_equal_the_naive_loop((op, shape, reduced, keepdims, x) in reduce_case()) {
        let axes: Vec<usize> = (0..shape.len()).filter(|&d| reduced[d]).collect();
        // No axes: every axis (noop_with_empty_axes off).
        let all = axes.is_empty();
        let is_reduced = |d: usize| all || reduced[d];
        let attrs_axes = if all { None } else { Some(axes.clone()) };
        let y = run_node(
            Op::Reduce { op, axes: attrs_axes, keepdims, noop_with_empty_axes: false },
            vec![Some(Arg::Input(Tensor::from_f32(shape.clone(), x.clone()), None))],
            None,
        );
        let kept: Vec<usize> = (0..shape.len()).map(|d| if is_reduced(d) { 1 } else { shape[d] }).collect();
        let want_shape: Vec<usize> = if keepdims { kept.clone() } else { (0..shape.len()).filter(|&d| !is_reduced(d)).map(|d| shape[d]).collect() };
        prop_assert_eq!(&y.shape, &want_shape);
        let mut groups = vec![Vec::new(); kept.iter().product()];
        let ks = strides(&kept);
        for (i, &v) in x.iter().enumerate() {
            let idx = unravel(i, &shape);
            let o: usize = (0..shape.len()).map(|d| if is_reduced(d) { 0 } else { idx[d] * ks[d] }).sum();
            groups[o].push(v as f64);
        }
        let want: Vec<f64> = groups.iter().map(|g| reduce_naive(op, g)).collect();
        close(y.as_f32().unwrap(), &want, 1e-5, 1e-5)?;
    }
}

// ---------------------------------------------------------------------------------------------------------
// int8 fully-connected (Gemm with trans_b on quantized values), TFLite's integer arithmetic

/// TFLite `QuantizeMultiplier`: `m = q · 2^shift` with `q` in [2^30, 2^31) (frexp, significand rounded half
/// away from zero, renormalised when it rounds up to 2^31; below 2^-31 flushed to zero).
fn quantize_multiplier(m: f64) -> (i32, i32) {
    if m == 0.0 {
        return (0, 0);
    }
    let mut shift = m.abs().log2().floor() as i32 + 1;
    let mut frac = m / 2f64.powi(shift);
    // log2 may be off by one at exact powers of two: renormalise into [0.5, 1).
    while frac.abs() >= 1.0 {
        frac /= 2.0;
        shift += 1;
    }
    while frac.abs() < 0.5 {
        frac *= 2.0;
        shift -= 1;
    }
    let mut q = (frac * (1i64 << 31) as f64).round() as i64;
    if q == 1i64 << 31 {
        q /= 2;
        shift += 1;
    }
    if shift < -31 {
        return (0, 0);
    }
    (q as i32, shift)
}

/// gemmlowp `SaturatingRoundingDoublingHighMul`.
fn srdhm(a: i32, b: i32) -> i32 {
    if a == i32::MIN && b == i32::MIN {
        return i32::MAX;
    }
    let ab = a as i64 * b as i64;
    let nudge = if ab >= 0 { 1i64 << 30 } else { 1 - (1i64 << 30) };
    ((ab + nudge) / (1i64 << 31)) as i32
}

/// The GEMM output stage of LiteRT's x86-64 optimized kernels (what the CPU runtime is bit-exact with):
/// `x · 2^left`, the rounding doubling high multiply, then a right shift rounding half up.
fn multiply_by_quantized_multiplier(x: i32, (q, shift): (i32, i32)) -> i32 {
    let (left, right) = (shift.max(0), (-shift).max(0));
    let h = srdhm(x.wrapping_mul(1 << left), q);
    if right == 0 {
        h
    } else {
        ((h as i64 + (1i64 << (right - 1))) >> right) as i32
    }
}

/// TFLite `CalculateActivationRangeQuantized` for the fused activation.
fn activation_range(act: Option<Activation>, scale: f32, zp: i32, (lo, hi): (i32, i32)) -> (i32, i32) {
    let q = |f: f32| zp + (f / scale).round() as i32;
    match act {
        None => (lo, hi),
        Some(Activation::Relu) => (lo.max(q(0.0)), hi),
        Some(Activation::Relu6) => (lo.max(q(0.0)), hi.min(q(6.0))),
        Some(Activation::Clip { min, max }) => (lo.max(q(min)), hi.min(q(max))),
        // TFLite has no fused SiLU; the CPU runtime fuses it into float convolutions only
        Some(Activation::Silu) => (lo, hi),
    }
}

#[derive(Clone, Debug)]
struct FcCase {
    uint8: bool,
    rows: usize,
    k: usize,
    n: usize,
    x: Vec<i32>,
    w: Vec<i32>,
    bias: Vec<i32>,
    x_q: (f32, i32),
    w_q: (f32, i32),
    y_q: (f32, i32),
    act: Option<Activation>,
}

/// A quantization scale: any in [1e-3, 0.1), or a power of two, whose products make exact multipliers and so
/// frequent rounding ties in the output stage.
fn scale() -> impl Strategy<Value = f32> {
    prop_oneof![1e-3f32..0.1, (1i32..=8).prop_map(|e| 2f32.powi(-e))]
}

fn fc_case() -> impl Strategy<Value = FcCase> {
    let act = prop_oneof![Just(None), Just(Some(Activation::Relu)), Just(Some(Activation::Relu6)), Just(Some(Activation::Clip { min: -1.0, max: 1.0 }))];
    (any::<bool>(), 1usize..=4, 1usize..=40, 1usize..=10, act).prop_flat_map(|(uint8, rows, k, n, act)| {
        let (lo, hi) = if uint8 { (0, 255) } else { (-128, 127) };
        (
            prop::collection::vec(lo..=hi, rows * k),
            prop::collection::vec(lo..=hi, n * k),
            prop::collection::vec(-20000i32..=20000, n),
            (scale(), lo..=hi),
            // int8 weights are symmetric (zero point 0); legacy uint8 ones have any zero point.
            (scale(), if uint8 { (0i32..=255).boxed() } else { Just(0i32).boxed() }),
            (scale(), lo..=hi),
        )
            .prop_map(move |(x, w, bias, x_q, w_q, y_q)| FcCase { uint8, rows, k, n, x, w, bias, x_q, w_q, y_q, act })
    })
}

/// The naive reference: `acc = Σ (x - zx)(w - zw) + bias`, scaled by `sx·sw/sy` in TFLite's fixed point,
/// plus the output zero point, clamped to the activation's quantized range.
fn naive_fc(c: &FcCase) -> Vec<i32> {
    let m = quantize_multiplier(c.x_q.0 as f64 * c.w_q.0 as f64 / c.y_q.0 as f64);
    let range = activation_range(c.act, c.y_q.0, c.y_q.1, if c.uint8 { (0, 255) } else { (-128, 127) });
    let mut out = Vec::new();
    for r in 0..c.rows {
        for j in 0..c.n {
            let acc: i32 = (0..c.k).map(|i| (c.x[r * c.k + i] - c.x_q.1) * (c.w[j * c.k + i] - c.w_q.1)).sum::<i32>() + c.bias[j];
            out.push((multiply_by_quantized_multiplier(acc, m) + c.y_q.1).clamp(range.0, range.1));
        }
    }
    out
}

fn quant(scale: f32, zp: i32) -> Option<QuantParams> {
    Some(QuantParams { scale: vec![scale], zero_point: vec![zp as i64], axis: None })
}

fn q8(uint8: bool, shape: Vec<usize>, v: &[i32]) -> Tensor {
    if uint8 {
        Tensor::from_vec(shape, v.iter().map(|&x| x as u8).collect::<Vec<u8>>()).unwrap()
    } else {
        Tensor::from_vec(shape, v.iter().map(|&x| x as i8).collect::<Vec<i8>>()).unwrap()
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn int8_fully_connected_equals_tflite_integer_arithmetic(c in fc_case()) {
        let op = Op::Gemm { alpha: 1.0, beta: 1.0, trans_a: false, trans_b: true, activation: c.act };
        let args = vec![
            Some(Arg::Input(q8(c.uint8, vec![c.rows, c.k], &c.x), quant(c.x_q.0, c.x_q.1))),
            Some(Arg::Const(q8(c.uint8, vec![c.n, c.k], &c.w), quant(c.w_q.0, c.w_q.1))),
            Some(Arg::Const(Tensor::from_vec(vec![c.n], c.bias.clone()).unwrap(), quant(c.x_q.0 * c.w_q.0, 0))),
        ];
        let y = run_node(op, args, quant(c.y_q.0, c.y_q.1));
        prop_assert_eq!(y.dtype(), if c.uint8 { DType::U8 } else { DType::I8 });
        prop_assert_eq!(&y.shape, &vec![c.rows, c.n]);
        let got: Vec<i32> = y.to_i64_vec().into_iter().map(|v| v as i32).collect();
        prop_assert_eq!(got, naive_fc(&c));
    }
}

/// The fully-connected runs one case's rows through.
fn run_fc(c: &FcCase) -> Vec<i32> {
    let op = Op::Gemm { alpha: 1.0, beta: 1.0, trans_a: false, trans_b: true, activation: c.act };
    let args = vec![
        Some(Arg::Input(q8(c.uint8, vec![c.rows, c.k], &c.x), quant(c.x_q.0, c.x_q.1))),
        Some(Arg::Const(q8(c.uint8, vec![c.n, c.k], &c.w), quant(c.w_q.0, c.w_q.1))),
        Some(Arg::Const(Tensor::from_vec(vec![c.n], c.bias.clone()).unwrap(), quant(c.x_q.0 * c.w_q.0, 0))),
    ];
    run_node(op, args, quant(c.y_q.0, c.y_q.1)).to_i64_vec().into_iter().map(|v| v as i32).collect()
}

/// Layers large enough to split between threads (a classifier's batch-1 row split by outputs, a batch split by
/// rows; 301 outputs: the last part is not a whole group of four), at 1 and 2 threads, against the naive loop.
#[test]
fn int8_fully_connected_split_between_threads() {
    let mut s = 9u64;
    let mut rnd = move |lo: i32, hi: i32| {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        lo + (s % (hi - lo + 1) as u64) as i32
    };
    for &(uint8, rows) in &[(false, 1), (true, 1), (false, 3)] {
        let (k, n) = (600, 301);
        let (lo, hi) = if uint8 { (0, 255) } else { (-128, 127) };
        let c = FcCase {
            uint8,
            rows,
            k,
            n,
            x: (0..rows * k).map(|_| rnd(lo, hi)).collect(),
            w: (0..n * k).map(|_| rnd(lo, hi)).collect(),
            bias: (0..n).map(|_| rnd(-20000, 20000)).collect(),
            x_q: (0.02, if uint8 { 131 } else { -3 }),
            w_q: (0.004, if uint8 { 120 } else { 0 }),
            y_q: (0.5, if uint8 { 128 } else { 5 }),
            act: None,
        };
        let want = naive_fc(&c);
        for threads in [1, 2] {
            let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().expect("a thread pool");
            assert_eq!(pool.install(|| run_fc(&c)), want, "uint8 {uint8} rows {rows} threads {threads}");
        }
    }
}

// int8 CONV_2D and DEPTHWISE_CONV_2D (Conv on quantized values, per-channel symmetric weights), TFLite's
// integer arithmetic: the packed VNNI GEMM and the vectorised depthwise kernel against a naive loop over odd
// shapes (channels not a multiple of the vector widths, strides, dilations, asymmetric pads, groups).

#[derive(Clone, Debug)]
struct QConvCase {
    n: usize,
    groups: usize,
    cg: usize,
    og: usize,
    ih: usize,
    iw: usize,
    kh: usize,
    kw: usize,
    stride: [usize; 2],
    dilation: [usize; 2],
    pads: [usize; 4],
    x: Vec<i32>,
    w: Vec<i32>,
    bias: Vec<i32>,
    w_scales: Vec<f32>,
    x_q: (f32, i32),
    y_q: (f32, i32),
    act: Option<Activation>,
}

impl QConvCase {
    fn c(&self) -> usize {
        self.groups * self.cg
    }
    fn o(&self) -> usize {
        self.groups * self.og
    }
    fn out_hw(&self) -> (usize, usize) {
        let [pt, pl, pb, pr] = self.pads;
        let oh = (self.ih + pt + pb - (self.kh - 1) * self.dilation[0] - 1) / self.stride[0] + 1;
        let ow = (self.iw + pl + pr - (self.kw - 1) * self.dilation[1] - 1) / self.stride[1] + 1;
        (oh, ow)
    }
}

fn qconv_case() -> impl Strategy<Value = QConvCase> {
    let act = prop_oneof![Just(None), Just(Some(Activation::Relu)), Just(Some(Activation::Relu6))];
    // (groups, channels per group, outputs per group): depthwise (one input channel per group, a depth
    // multiplier of 1 or 2), or up to 3 groups with channel counts around the vector widths
    let layout = prop_oneof![
        (1usize..=37, 1usize..=2).prop_map(|(c, mult)| (c, 1, mult)),
        (1usize..=3, 1usize..=21, 1usize..=19),
    ];
    (layout, 1usize..=2, 1usize..=3, 1usize..=3, 1usize..=2, 1usize..=2, 1usize..=2, act).prop_flat_map(|((groups, cg, og), n, kh, kw, sh, sw, dh, act)| {
        let dw = if kw > 1 { 1usize..=2 } else { 1usize..=1 };
        (Just((groups, cg, og, n, kh, kw, sh, sw, dh, act)), dw, 0usize..=2, 0usize..=2, 0usize..=2, 0usize..=2, 1usize..=12, 1usize..=19)
    })
    .prop_filter("the window fits the padded input", |&((_, _, _, _, kh, kw, _, _, dh, _), dw, pt, pl, pb, pr, ih, iw)| {
        ih + pt + pb > (kh - 1) * dh && iw + pl + pr > (kw - 1) * dw
    })
    .prop_flat_map(|((groups, cg, og, n, kh, kw, sh, sw, dh, act), dw, pt, pl, pb, pr, ih, iw)| {
        let (c, o) = (groups * cg, groups * og);
        (
            prop::collection::vec(-128i32..=127, n * c * ih * iw),
            prop::collection::vec(-127i32..=127, o * cg * kh * kw),
            prop::collection::vec(-30000i32..=30000, o),
            prop::collection::vec(scale(), o),
            (scale(), -128i32..=127),
            (scale(), -128i32..=127),
        )
            .prop_map(move |(x, w, bias, w_scales, x_q, y_q)| QConvCase {
                n,
                groups,
                cg,
                og,
                ih,
                iw,
                kh,
                kw,
                stride: [sh, sw],
                dilation: [dh, dw],
                pads: [pt, pl, pb, pr],
                x,
                w,
                bias,
                w_scales,
                x_q,
                y_q,
                act,
            })
    })
}

/// gemmlowp `RoundingDivideByPOT` after the high multiply: TFLite's `MultiplyByQuantizedMultiplier` (half
/// away from zero), what DEPTHWISE_CONV_2D's scalar channels compute.
fn multiply_by_quantized_multiplier_double(x: i32, (q, shift): (i32, i32)) -> i32 {
    let (left, right) = (shift.max(0), (-shift).max(0));
    let h = srdhm(x.wrapping_mul(1 << left), q);
    let mask = ((1i64 << right) - 1) as i32;
    let threshold = (mask >> 1) + (h < 0) as i32;
    (h >> right) + ((h & mask) > threshold) as i32
}

/// The naive reference: per output, `Σ (x - zx)·w + bias` over the taps inside the input (padding is the
/// zero point, contributing 0), scaled by `sx·sw[c]/sy`: CONV_2D's output stage everywhere, DEPTHWISE_CONV_2D's
/// in whole blocks of 8 channels and `MultiplyByQuantizedMultiplier` in the rest; plus the output zero
/// point, clamped to the activation's range.
fn naive_qconv(c: &QConvCase) -> Vec<i32> {
    let (cin, o) = (c.c(), c.o());
    let (oh, ow) = c.out_hw();
    let range = activation_range(c.act, c.y_q.0, c.y_q.1, (-128, 127));
    // the runtime's depthwise kernel runs one input channel per group (as DEPTHWISE_CONV_2D), whatever the
    // strategy meant
    let depthwise = c.cg == 1 && c.groups > 1;
    let neon_end = if depthwise { o / 8 * 8 } else { o };
    let mut out = Vec::with_capacity(c.n * o * oh * ow);
    for b in 0..c.n {
        for oc in 0..o {
            let gi = oc / c.og;
            let m = quantize_multiplier(c.x_q.0 as f64 * c.w_scales[oc] as f64 / c.y_q.0 as f64);
            for oy in 0..oh {
                for ox in 0..ow {
                    let mut acc = c.bias[oc];
                    for ic in 0..c.cg {
                        for ky in 0..c.kh {
                            for kx in 0..c.kw {
                                let iy = (oy * c.stride[0] + ky * c.dilation[0]) as isize - c.pads[0] as isize;
                                let ix = (ox * c.stride[1] + kx * c.dilation[1]) as isize - c.pads[1] as isize;
                                if iy < 0 || ix < 0 || iy as usize >= c.ih || ix as usize >= c.iw {
                                    continue;
                                }
                                let xv = c.x[((b * cin + gi * c.cg + ic) * c.ih + iy as usize) * c.iw + ix as usize];
                                acc += (xv - c.x_q.1) * c.w[((oc * c.cg + ic) * c.kh + ky) * c.kw + kx];
                            }
                        }
                    }
                    let scaled = if oc < neon_end { multiply_by_quantized_multiplier(acc, m) } else { multiply_by_quantized_multiplier_double(acc, m) };
                    out.push((scaled + c.y_q.1).clamp(range.0, range.1));
                }
            }
        }
    }
    out
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn int8_conv_equals_tflite_integer_arithmetic(c in qconv_case()) {
        let (cin, o) = (c.c(), c.o());
        let attrs = ConvAttrs {
            kernel_shape: vec![c.kh, c.kw],
            strides: c.stride.to_vec(),
            dilations: c.dilation.to_vec(),
            pads: c.pads.to_vec(),
            auto_pad: AutoPad::NotSet,
            group: c.groups,
            activation: c.act,
        };
        let per_channel = |scales: Vec<f32>| Some(QuantParams { zero_point: vec![0; scales.len()], scale: scales, axis: Some(0) });
        let args = vec![
            Some(Arg::Input(q8(false, vec![c.n, cin, c.ih, c.iw], &c.x), quant(c.x_q.0, c.x_q.1))),
            Some(Arg::Const(q8(false, vec![o, c.cg, c.kh, c.kw], &c.w), per_channel(c.w_scales.clone()))),
            Some(Arg::Const(Tensor::from_vec(vec![o], c.bias.clone()).unwrap(), per_channel(c.w_scales.iter().map(|&s| s * c.x_q.0).collect()))),
        ];
        let y = run_node(Op::Conv(attrs), args, quant(c.y_q.0, c.y_q.1));
        let (oh, ow) = c.out_hw();
        prop_assert_eq!(&y.shape, &vec![c.n, o, oh, ow]);
        let got: Vec<i32> = y.to_i64_vec().into_iter().map(|v| v as i32).collect();
        prop_assert_eq!(got, naive_qconv(&c));
    }
}
