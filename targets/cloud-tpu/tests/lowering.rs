//! Every lowered op family run through XLA (the CPU PJRT plugin) and compared with the ONNX reference
//! implementation (`onnx.reference`, run by `$TPU_SDK_PYTHON`) on the same inputs.
//!
//! Each case is one ONNX node: the Python side builds and evaluates it; the Rust side builds the equivalent
//! core-IR node (output types taken from the reference result), lowers it, compiles and runs it.

mod common;

use common::{assert_close, rand_f32};
use tpu_sdk_cloud_tpu::CloudTpuTarget;
use tpu_sdk_core::ir::*;

/// One input of a case: a graph input fed at run time, a constant of the graph, or absent.
enum In {
    X(Tensor),
    C(Tensor),
    Absent,
}

fn conv_attrs() -> ConvAttrs {
    ConvAttrs {
        kernel_shape: vec![],
        strides: vec![],
        dilations: vec![],
        pads: vec![],
        auto_pad: AutoPad::NotSet,
        group: 1,
        activation: None,
    }
}

fn pool_attrs(k: &[usize]) -> PoolAttrs {
    PoolAttrs {
        kernel_shape: k.to_vec(),
        strides: vec![],
        dilations: vec![],
        pads: vec![],
        auto_pad: AutoPad::NotSet,
        ceil_mode: false,
        count_include_pad: false,
    }
}

/// A batch of cases: each an ONNX node (a `helper.make_node(...)` expression over inputs i0.. and outputs o0..)
/// evaluated by the reference, and the equivalent core-IR op run through the cloud-tpu target.
#[derive(Default)]
struct Cases {
    cases: Vec<(String, Op, Vec<In>, usize, bool)>,
}

impl Cases {
    fn check(&mut self, onnx: &str, op: Op, ins: Vec<In>, n_out: usize) {
        self.cases.push((onnx.to_string(), op, ins, n_out, false));
    }

    /// Like `check`, with onnxruntime as the oracle.
    fn check_ort(&mut self, onnx: &str, op: Op, ins: Vec<In>, n_out: usize) {
        self.cases.push((onnx.to_string(), op, ins, n_out, true));
    }

    fn run(self) {
        let Some(plugin) = common::cpu_plugin() else { return };
        let refs: Vec<common::RefCase> = self
            .cases
            .iter()
            .map(|(node, _, ins, n_out, ort)| common::RefCase {
                node: node.clone(),
                inputs: ins
                    .iter()
                    .map(|i| match i {
                        In::X(t) | In::C(t) => Some(t),
                        In::Absent => None,
                    })
                    .collect(),
                n_out: *n_out,
                ort: *ort,
            })
            .collect();
        let Some(wants) = common::onnx_reference(&refs) else { return };
        let libtpu = common::libtpu();
        for ((onnx, op, ins, _, _), want) in self.cases.into_iter().zip(wants) {
            let mut g = Graph::new("case");
            let mut feeds = Vec::new();
            let mut inputs = Vec::new();
            for (i, x) in ins.iter().enumerate() {
                inputs.push(match x {
                    In::X(t) => {
                        feeds.push(t.clone());
                        Some(g.add_input(format!("i{i}"), t.dtype(), t.shape.clone()))
                    }
                    In::C(t) => Some(g.add_constant(format!("i{i}"), t.clone())),
                    In::Absent => None,
                });
            }
            let outs: Vec<ValueId> =
                want.iter().enumerate().map(|(k, t)| g.add_value(format!("o{k}"), t.dtype(), t.shape.clone())).collect();
            g.add_node("node", op, inputs, outs.clone());
            g.outputs = outs;
            let exe = CloudTpuTarget::with_plugin(&plugin)
                .compile_graph(g.clone())
                .unwrap_or_else(|e| panic!("{onnx}: {e}\n{}", tpu_sdk_cloud_tpu::lower::lower(&g).unwrap_or_default()));
            let got = exe.execute(&feeds).unwrap_or_else(|e| panic!("{onnx}: {e}"));
            if let Some(tpu) = &libtpu {
                // The TPU compiler accepts the same program (compiled ahead of time for a v5e chip).
                let mlir = tpu_sdk_cloud_tpu::lower::lower(&g).unwrap();
                tpu.compile_for_topology("v5e:1x1", &[], &mlir, &tpu_sdk_cloud_tpu::pjrt::CompileOptions::default())
                    .unwrap_or_else(|e| panic!("{onnx}: libtpu rejects the lowering: {e}"));
            }
            for (k, (a, b)) in got.iter().zip(&want).enumerate() {
                assert_close(a, b, 1e-4, 1e-5, &format!("{onnx} output {k}"));
            }
        }
    }
}

fn x(shape: &[usize], seed: u64) -> In {
    In::X(rand_f32(shape, seed))
}
fn c(shape: &[usize], seed: u64) -> In {
    In::C(rand_f32(shape, seed))
}
fn ci(v: &[i64]) -> In {
    In::C(Tensor::from_i64(vec![v.len()], v.to_vec()))
}
fn roi_clone(i: &In) -> In {
    match i {
        In::X(t) => In::X(t.clone()),
        In::C(t) => In::C(t.clone()),
        In::Absent => In::Absent,
    }
}
fn positive(shape: &[usize], seed: u64) -> In {
    let t = rand_f32(shape, seed);
    In::X(Tensor::from_f32(t.shape.clone(), t.as_f32().unwrap().iter().map(|v| v.abs() + 0.1).collect()))
}

#[test]
fn conv_2d_strides_pads_dilations_groups_bias_and_auto_pad() {
    let mut cs = Cases::default();
    let mut a = conv_attrs();
    a.strides = vec![2, 2];
    a.pads = vec![1, 1, 1, 1];
    cs.check(
        r#"helper.make_node("Conv", ["i0", "i1", "i2"], ["o0"], strides=[2, 2], pads=[1, 1, 1, 1])"#,
        Op::Conv(a),
        vec![x(&[2, 3, 9, 8], 1), c(&[4, 3, 3, 3], 2), c(&[4], 3)],
        1,
    );
    let mut a = conv_attrs();
    a.group = 4;
    a.dilations = vec![2, 1];
    a.pads = vec![2, 0, 1, 1];
    cs.check(
        r#"helper.make_node("Conv", ["i0", "i1"], ["o0"], group=4, dilations=[2, 1], pads=[2, 0, 1, 1])"#,
        Op::Conv(a),
        vec![x(&[1, 8, 7, 7], 4), c(&[8, 2, 3, 3], 5)],
        1,
    );
    // Depthwise with SAME_UPPER and stride 2 (MobileNet), odd input.
    let mut a = conv_attrs();
    a.group = 6;
    a.strides = vec![2, 2];
    a.auto_pad = AutoPad::SameUpper;
    cs.check(
        r#"helper.make_node("Conv", ["i0", "i1", "i2"], ["o0"], group=6, strides=[2, 2], auto_pad="SAME_UPPER")"#,
        Op::Conv(a),
        vec![x(&[1, 6, 11, 10], 6), c(&[6, 1, 5, 5], 7), c(&[6], 8)],
        1,
    );
    let mut a = conv_attrs();
    a.auto_pad = AutoPad::SameLower;
    cs.check(
        r#"helper.make_node("Conv", ["i0", "i1"], ["o0"], auto_pad="SAME_LOWER")"#,
        Op::Conv(a),
        vec![x(&[1, 2, 6, 6], 9), c(&[3, 2, 2, 2], 10)],
        1,
    );
    cs.run();
}

#[test]
fn conv_1d_and_3d_and_a_fused_activation() {
    let mut cs = Cases::default();
    let mut a = conv_attrs();
    a.pads = vec![1, 2];
    a.strides = vec![3];
    cs.check(
        r#"helper.make_node("Conv", ["i0", "i1"], ["o0"], pads=[1, 2], strides=[3])"#,
        Op::Conv(a),
        vec![x(&[2, 3, 20], 11), c(&[5, 3, 4], 12)],
        1,
    );
    cs.check(
        r#"helper.make_node("Conv", ["i0", "i1"], ["o0"], pads=[1, 1, 1, 1, 1, 1])"#,
        Op::Conv(ConvAttrs { pads: vec![1; 6], ..conv_attrs() }),
        vec![x(&[1, 2, 4, 5, 6], 13), c(&[3, 2, 3, 3, 3], 14)],
        1,
    );
    cs.run();
    // Conv with a fused Relu6 (as the fusion pass leaves it), against a hand-computed result: a 1x1 kernel of 10.
    let a = ConvAttrs { activation: Some(Activation::Relu6), ..conv_attrs() };
    let w = Tensor::from_f32(vec![1, 1, 1, 1], vec![10.0]);
    let xin = rand_f32(&[1, 1, 3, 3], 15);
    let Some(plugin) = common::cpu_plugin() else { return };
    let mut g = Graph::new("fused");
    let xi = g.add_input("x", DType::F32, vec![1, 1, 3, 3]);
    let wi = g.add_constant("w", w);
    let y = g.add_value("y", DType::F32, vec![1, 1, 3, 3]);
    g.add_node("c", Op::Conv(a), vec![Some(xi), Some(wi)], vec![y]);
    g.outputs.push(y);
    let got = CloudTpuTarget::with_plugin(&plugin).compile_graph(g).unwrap().execute(std::slice::from_ref(&xin)).unwrap();
    let want: Vec<f32> = xin.as_f32().unwrap().iter().map(|v| (v * 10.0).clamp(0.0, 6.0)).collect();
    assert_close(&got[0], &Tensor::from_f32(vec![1, 1, 3, 3], want), 1e-6, 1e-6, "conv+relu6");
}

#[test]
fn conv_transpose_strides_pads_output_padding_groups() {
    let mut cs = Cases::default();
    let a = ConvTransposeAttrs {
        conv: ConvAttrs { strides: vec![2, 2], pads: vec![1, 0, 1, 1], ..conv_attrs() },
        output_padding: vec![1, 0],
        output_shape: vec![],
    };
    cs.check(
        r#"helper.make_node("ConvTranspose", ["i0", "i1", "i2"], ["o0"], strides=[2, 2], pads=[1, 0, 1, 1], output_padding=[1, 0])"#,
        Op::ConvTranspose(a),
        vec![x(&[2, 3, 5, 4], 21), c(&[3, 4, 3, 3], 22), c(&[4], 23)],
        1,
    );
    let grouped = ConvTransposeAttrs {
        conv: ConvAttrs { strides: vec![2, 2], group: 2, dilations: vec![1, 2], ..conv_attrs() },
        output_padding: vec![],
        output_shape: vec![],
    };
    // output_shape larger than the full output (the given pads hold at the start), and SAME_UPPER/SAME_LOWER with
    // an output_shape whose total padding is negative (the window starts before the first tap).
    let a = ConvTransposeAttrs {
        conv: ConvAttrs { strides: vec![3, 2], ..conv_attrs() },
        output_padding: vec![],
        output_shape: vec![10, 8],
    };
    cs.check(
        r#"helper.make_node("ConvTranspose", ["i0", "i1"], ["o0"], strides=[3, 2], output_shape=[10, 8])"#,
        Op::ConvTranspose(a),
        vec![x(&[1, 1, 3, 3], 26), c(&[1, 2, 3, 3], 27)],
        1,
    );
    for (mode, auto_pad) in [("SAME_UPPER", AutoPad::SameUpper), ("SAME_LOWER", AutoPad::SameLower)] {
        let a = ConvTransposeAttrs {
            conv: ConvAttrs { strides: vec![2, 2], auto_pad, ..conv_attrs() },
            output_padding: vec![],
            output_shape: vec![9, 6],
        };
        cs.check(
            &format!(r#"helper.make_node("ConvTranspose", ["i0", "i1", "i2"], ["o0"], strides=[2, 2], auto_pad="{mode}", output_shape=[9, 6])"#),
            Op::ConvTranspose(a),
            vec![x(&[2, 2, 3, 3], 28), c(&[2, 3, 3, 3], 29), c(&[3], 30)],
            1,
        );
    }
    // onnx.reference does not implement grouped ConvTranspose; onnxruntime does.
    cs.check_ort(
        r#"helper.make_node("ConvTranspose", ["i0", "i1"], ["o0"], strides=[2, 2], group=2, dilations=[1, 2])"#,
        Op::ConvTranspose(grouped),
        vec![x(&[1, 4, 3, 3], 24), c(&[4, 3, 2, 2], 25)],
        1,
    );
    cs.run();
}

#[test]
fn gemm_and_matmul() {
    let mut cs = Cases::default();
    let gemm = |alpha: f32, beta: f32, ta: bool, tb: bool| Op::Gemm { alpha, beta, trans_a: ta, trans_b: tb, activation: None };
    cs.check(
        r#"helper.make_node("Gemm", ["i0", "i1", "i2"], ["o0"], transB=1)"#,
        gemm(1.0, 1.0, false, true),
        vec![x(&[3, 5], 31), c(&[4, 5], 32), c(&[4], 33)],
        1,
    );
    cs.check(
        r#"helper.make_node("Gemm", ["i0", "i1", "i2"], ["o0"], transA=1, alpha=0.5, beta=2.0)"#,
        gemm(0.5, 2.0, true, false),
        vec![x(&[5, 3], 34), x(&[5, 4], 35), c(&[3, 1], 36)],
        1,
    );
    cs.check(r#"helper.make_node("MatMul", ["i0", "i1"], ["o0"])"#, Op::MatMul, vec![x(&[2, 3, 7, 5], 37), c(&[5, 6], 38)], 1);
    cs.check(r#"helper.make_node("MatMul", ["i0", "i1"], ["o0"])"#, Op::MatMul, vec![x(&[2, 1, 4, 5], 39), x(&[3, 5, 2], 40)], 1);
    cs.check(r#"helper.make_node("MatMul", ["i0", "i1"], ["o0"])"#, Op::MatMul, vec![x(&[5], 41), x(&[2, 5, 3], 42)], 1);
    cs.check(r#"helper.make_node("MatMul", ["i0", "i1"], ["o0"])"#, Op::MatMul, vec![x(&[2, 4, 5], 43), x(&[5], 44)], 1);
    cs.run();
}

#[test]
fn binary_ops_with_broadcasting() {
    let mut cs = Cases::default();
    let cases: &[(&str, BinaryOp)] = &[
        ("Add", BinaryOp::Add),
        ("Sub", BinaryOp::Sub),
        ("Mul", BinaryOp::Mul),
        ("Div", BinaryOp::Div),
        ("Max", BinaryOp::Max),
        ("Min", BinaryOp::Min),
        ("PRelu", BinaryOp::PRelu),
    ];
    for (i, (name, op)) in cases.iter().enumerate() {
        let rhs = if *name == "PRelu" { c(&[3, 1, 1], 50 + i as u64) } else { x(&[3, 1, 5], 50 + i as u64) };
        cs.check(
            &format!(r#"helper.make_node("{name}", ["i0", "i1"], ["o0"])"#),
            Op::Binary(*op, None),
            vec![x(&[2, 3, 4, 5], 60 + i as u64), rhs],
            1,
        );
    }
    cs.check(r#"helper.make_node("Pow", ["i0", "i1"], ["o0"])"#, Op::Binary(BinaryOp::Pow, None), vec![positive(&[2, 3], 70), x(&[3], 71)], 1);
    for (name, op) in [("Greater", BinaryOp::Greater), ("LessOrEqual", BinaryOp::LessOrEqual), ("Equal", BinaryOp::Equal)] {
        let a = rand_f32(&[4, 3], 72);
        let mut b = rand_f32(&[3], 73);
        if let TensorData::F32(v) = &mut b.data {
            v[1] = a.as_f32().unwrap()[4]; // one exact tie
        }
        cs.check(&format!(r#"helper.make_node("{name}", ["i0", "i1"], ["o0"])"#), Op::Binary(op, None), vec![In::X(a), In::X(b)], 1);
    }
    let ints = |v: Vec<i64>| In::X(Tensor::from_i64(vec![v.len()], v));
    cs.check(
        r#"helper.make_node("Mod", ["i0", "i1"], ["o0"])"#,
        Op::Binary(BinaryOp::Mod, None),
        vec![ints(vec![7, -7, 7, -7, 0, 5]), ints(vec![3, 3, -3, -3, 2, 5])],
        1,
    );
    cs.check(
        r#"helper.make_node("Mod", ["i0", "i1"], ["o0"], fmod=1)"#,
        Op::Binary(BinaryOp::Fmod, None),
        vec![x(&[6], 74), In::X(Tensor::from_f32(vec![6], vec![0.3, -0.3, 0.25, -0.7, 0.1, 0.9]))],
        1,
    );
    let bools = |v: Vec<bool>| In::X(Tensor::new(vec![v.len()], TensorData::Bool(v)).unwrap());
    cs.check(
        r#"helper.make_node("Xor", ["i0", "i1"], ["o0"])"#,
        Op::Binary(BinaryOp::Xor, None),
        vec![bools(vec![true, true, false, false]), bools(vec![true, false, true, false])],
        1,
    );
    cs.run();
}

#[test]
fn unary_functions_and_activations() {
    let mut cs = Cases::default();
    let cases: Vec<(&str, UnaryOp)> = vec![
        (r#""Relu""#, UnaryOp::Relu),
        (r#""Sigmoid""#, UnaryOp::Sigmoid),
        (r#""Tanh""#, UnaryOp::Tanh),
        (r#""Exp""#, UnaryOp::Exp),
        (r#""Neg""#, UnaryOp::Neg),
        (r#""Abs""#, UnaryOp::Abs),
        (r#""Floor""#, UnaryOp::Floor),
        (r#""Ceil""#, UnaryOp::Ceil),
        (r#""Sign""#, UnaryOp::Sign),
        (r#""Reciprocal""#, UnaryOp::Reciprocal),
        (r#""Sin""#, UnaryOp::Sin),
        (r#""Cos""#, UnaryOp::Cos),
        (r#""Tan""#, UnaryOp::Tan),
        (r#""Asin""#, UnaryOp::Asin),
        (r#""Acos""#, UnaryOp::Acos),
        (r#""Atan""#, UnaryOp::Atan),
        (r#""Sinh""#, UnaryOp::Sinh),
        (r#""Cosh""#, UnaryOp::Cosh),
        (r#""Asinh""#, UnaryOp::Asinh),
        (r#""Atanh""#, UnaryOp::Atanh),
        (r#""Erf""#, UnaryOp::Erf),
        (r#""Softplus""#, UnaryOp::Softplus),
        (r#""Softsign""#, UnaryOp::Softsign),
        (r#""HardSwish""#, UnaryOp::HardSwish),
        (r#""Mish""#, UnaryOp::Mish),
        (r#""HardSigmoid", alpha=0.3, beta=0.4"#, UnaryOp::HardSigmoid { alpha: 0.3, beta: 0.4 }),
        (r#""LeakyRelu", alpha=0.1"#, UnaryOp::LeakyRelu { alpha: 0.1 }),
        (r#""Elu", alpha=0.7"#, UnaryOp::Elu { alpha: 0.7 }),
        (r#""Selu""#, UnaryOp::Selu { alpha: 1.673_263_2, gamma: 1.050_701 }),
        (r#""Celu", alpha=0.8"#, UnaryOp::Celu { alpha: 0.8 }),
        (r#""ThresholdedRelu", alpha=0.2"#, UnaryOp::ThresholdedRelu { alpha: 0.2 }),
        (r#""Gelu""#, UnaryOp::Gelu { tanh: false }),
        (r#""Gelu", approximate="tanh""#, UnaryOp::Gelu { tanh: true }),
    ];
    for (i, (spec, op)) in cases.into_iter().enumerate() {
        let (name, attrs) = spec.split_once(',').map_or((spec, ""), |(n, a)| (n, a));
        let attrs = if attrs.is_empty() { String::new() } else { format!(",{attrs}") };
        // Scale inputs to [-3, 3) to exercise both sides of every activation.
        let t = rand_f32(&[3, 17], 100 + i as u64);
        let t = Tensor::from_f32(t.shape.clone(), t.as_f32().unwrap().iter().map(|v| v * 3.0).collect());
        let t = if matches!(op, UnaryOp::Asin | UnaryOp::Acos | UnaryOp::Atanh) {
            Tensor::from_f32(t.shape.clone(), t.as_f32().unwrap().iter().map(|v| v / 3.3).collect())
        } else {
            t
        };
        cs.check(&format!(r#"helper.make_node({name}, ["i0"], ["o0"]{attrs})"#), Op::Unary(op), vec![In::X(t)], 1);
    }
    cs.check(r#"helper.make_node("Log", ["i0"], ["o0"])"#, Op::Unary(UnaryOp::Log), vec![positive(&[10], 140)], 1);
    cs.check(r#"helper.make_node("Sqrt", ["i0"], ["o0"])"#, Op::Unary(UnaryOp::Sqrt), vec![positive(&[10], 141)], 1);
    cs.check(
        r#"helper.make_node("Round", ["i0"], ["o0"])"#,
        Op::Unary(UnaryOp::Round),
        vec![In::X(Tensor::from_f32(vec![6], vec![0.5, 1.5, 2.5, -0.5, -1.5, 2.4]))],
        1,
    );
    cs.check(
        r#"helper.make_node("Clip", ["i0", "i1", "i2"], ["o0"])"#,
        Op::Unary(UnaryOp::Clip { min: -0.25, max: 0.5 }),
        vec![x(&[4, 5], 142), In::C(Tensor::from_f32(vec![], vec![-0.25])), In::C(Tensor::from_f32(vec![], vec![0.5]))],
        1,
    );
    cs.check(
        r#"helper.make_node("Clip", ["i0", "i1", ""], ["o0"])"#,
        Op::ClipDynamic,
        vec![x(&[4, 5], 143), In::X(Tensor::from_f32(vec![], vec![-0.25])), In::Absent],
        1,
    );
    let special = Tensor::from_f32(vec![5], vec![f32::NAN, f32::INFINITY, f32::NEG_INFINITY, 1.0, -0.0]);
    cs.check(r#"helper.make_node("IsNaN", ["i0"], ["o0"])"#, Op::Unary(UnaryOp::IsNaN), vec![In::X(special.clone())], 1);
    cs.check(
        r#"helper.make_node("IsInf", ["i0"], ["o0"], detect_negative=0)"#,
        Op::Unary(UnaryOp::IsInf { detect_positive: true, detect_negative: false }),
        vec![In::X(special)],
        1,
    );
    cs.run();
}

#[test]
fn where_cast_identity_and_variadic_ops() {
    let mut cs = Cases::default();
    let cond = Tensor::new(vec![3, 1], TensorData::Bool(vec![true, false, true])).unwrap();
    cs.check(r#"helper.make_node("Where", ["i0", "i1", "i2"], ["o0"])"#, Op::Where, vec![In::X(cond), x(&[3, 4], 150), x(&[4], 151)], 1);
    let t = Tensor::from_f32(vec![5], vec![-2.7, -0.5, 0.0, 1.9, 300.0]);
    cs.check(r#"helper.make_node("Cast", ["i0"], ["o0"], to=6)"#, Op::Cast { to: DType::I32 }, vec![In::X(t.clone())], 1);
    cs.check(r#"helper.make_node("Cast", ["i0"], ["o0"], to=9)"#, Op::Cast { to: DType::Bool }, vec![In::X(t.clone())], 1);
    cs.check(r#"helper.make_node("Cast", ["i0"], ["o0"], to=10)"#, Op::Cast { to: DType::F16 }, vec![In::X(t)], 1);
    cs.check(
        r#"helper.make_node("Cast", ["i0"], ["o0"], to=1)"#,
        Op::Cast { to: DType::F32 },
        vec![In::X(Tensor::from_i64(vec![3], vec![-5, 0, 1 << 40]))],
        1,
    );
    cs.check(r#"helper.make_node("Identity", ["i0"], ["o0"])"#, Op::Identity, vec![x(&[2, 2], 152)], 1);
    cs.check(
        r#"helper.make_node("Sum", ["i0", "i1", "i2"], ["o0"])"#,
        Op::Variadic(BinaryOp::Add),
        vec![x(&[2, 3], 153), x(&[3], 154), x(&[2, 1], 155)],
        1,
    );
    cs.check(r#"helper.make_node("Max", ["i0", "i1"], ["o0"])"#, Op::Variadic(BinaryOp::Max), vec![x(&[2, 3], 156), x(&[2, 3], 157)], 1);
    cs.check(r#"helper.make_node("Mean", ["i0", "i1", "i2"], ["o0"])"#, Op::VariadicMean, vec![x(&[4], 158), x(&[4], 159), x(&[1], 160)], 1);
    cs.run();
}

#[test]
fn pooling() {
    let mut cs = Cases::default();
    let mut a = pool_attrs(&[3, 3]);
    a.strides = vec![2, 2];
    a.pads = vec![1, 1, 1, 1];
    cs.check(
        r#"helper.make_node("MaxPool", ["i0"], ["o0"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])"#,
        Op::MaxPool(a.clone()),
        vec![x(&[2, 3, 9, 10], 200)],
        1,
    );
    let mut m = a.clone();
    m.ceil_mode = true;
    m.pads = vec![0, 0, 0, 0];
    m.dilations = vec![1, 2];
    cs.check(
        r#"helper.make_node("MaxPool", ["i0"], ["o0"], kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1, dilations=[1, 2])"#,
        Op::MaxPool(m),
        vec![x(&[1, 2, 10, 11], 201)],
        1,
    );
    // The second output: flat indices of the maxima (padding and ceil_mode cells never win).
    cs.check(
        r#"helper.make_node("MaxPool", ["i0"], ["o0", "o1"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])"#,
        Op::MaxPool(a.clone()),
        vec![x(&[2, 3, 9, 10], 209)],
        2,
    );
    let mut mc = pool_attrs(&[2, 3]);
    mc.strides = vec![2, 2];
    mc.ceil_mode = true;
    cs.check(
        r#"helper.make_node("MaxPool", ["i0"], ["o0", "o1"], kernel_shape=[2, 3], strides=[2, 2], ceil_mode=1)"#,
        Op::MaxPool(mc),
        vec![x(&[1, 2, 7, 8], 210)],
        2,
    );
    cs.check(
        r#"helper.make_node("AveragePool", ["i0"], ["o0"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])"#,
        Op::AveragePool(a.clone()),
        vec![x(&[1, 3, 9, 10], 202)],
        1,
    );
    let mut inc = a.clone();
    inc.count_include_pad = true;
    cs.check(
        r#"helper.make_node("AveragePool", ["i0"], ["o0"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], count_include_pad=1)"#,
        Op::AveragePool(inc),
        vec![x(&[1, 3, 9, 10], 203)],
        1,
    );
    let mut ceil = pool_attrs(&[2, 2]);
    ceil.strides = vec![2, 2];
    ceil.ceil_mode = true;
    cs.check(
        r#"helper.make_node("AveragePool", ["i0"], ["o0"], kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1)"#,
        Op::AveragePool(ceil),
        vec![x(&[1, 2, 5, 7], 204)],
        1,
    );
    let mut same = pool_attrs(&[3]);
    same.auto_pad = AutoPad::SameUpper;
    same.strides = vec![2];
    cs.check(
        r#"helper.make_node("MaxPool", ["i0"], ["o0"], kernel_shape=[3], strides=[2], auto_pad="SAME_UPPER")"#,
        Op::MaxPool(same),
        vec![x(&[2, 3, 10], 205)],
        1,
    );
    cs.check(
        r#"helper.make_node("LpPool", ["i0"], ["o0"], kernel_shape=[2, 2], p=2)"#,
        Op::LpPool(pool_attrs(&[2, 2]), 2),
        vec![x(&[1, 2, 4, 5], 206)],
        1,
    );
    cs.check(r#"helper.make_node("GlobalAveragePool", ["i0"], ["o0"])"#, Op::GlobalAveragePool, vec![x(&[2, 5, 6, 7], 207)], 1);
    cs.check(r#"helper.make_node("GlobalMaxPool", ["i0"], ["o0"])"#, Op::GlobalMaxPool, vec![x(&[2, 5, 6, 7], 208)], 1);
    cs.run();
}

#[test]
fn reductions_argmax_and_softmax() {
    let mut cs = Cases::default();
    let red = |op: ReduceOp, keepdims: bool| Op::Reduce { op, axes: None, keepdims, noop_with_empty_axes: false };
    for (i, (name, op)) in [
        ("ReduceSum", ReduceOp::Sum),
        ("ReduceMean", ReduceOp::Mean),
        ("ReduceMax", ReduceOp::Max),
        ("ReduceMin", ReduceOp::Min),
        ("ReduceProd", ReduceOp::Prod),
        ("ReduceL1", ReduceOp::L1),
        ("ReduceL2", ReduceOp::L2),
        ("ReduceSumSquare", ReduceOp::SumSquare),
        ("ReduceLogSumExp", ReduceOp::LogSumExp),
    ]
    .into_iter()
    .enumerate()
    {
        cs.check(
            &format!(r#"helper.make_node("{name}", ["i0", "i1"], ["o0"], keepdims={})"#, i % 2),
            red(op, i % 2 == 1),
            vec![x(&[3, 4, 5], 300 + i as u64), ci(&[-1, 0])],
            1,
        );
    }
    cs.check(
        r#"helper.make_node("ReduceLogSum", ["i0"], ["o0"], keepdims=0)"#,
        Op::Reduce { op: ReduceOp::LogSum, axes: None, keepdims: false, noop_with_empty_axes: false },
        vec![positive(&[3, 4], 320)],
        1,
    );
    cs.check(
        r#"helper.make_node("ReduceMean", ["i0"], ["o0"], axes=[1], keepdims=1)"#,
        Op::Reduce { op: ReduceOp::Mean, axes: Some(vec![1]), keepdims: true, noop_with_empty_axes: false },
        vec![x(&[2, 6, 3], 321)],
        1,
    );
    let ties = Tensor::from_f32(vec![2, 4], vec![1.0, 3.0, 3.0, 0.0, -1.0, -1.0, -2.0, -1.0]);
    cs.check(
        r#"helper.make_node("ArgMax", ["i0"], ["o0"], axis=1, keepdims=0)"#,
        Op::ArgReduce { max: true, axis: 1, keepdims: false, select_last_index: false },
        vec![In::X(ties.clone())],
        1,
    );
    cs.check(
        r#"helper.make_node("ArgMax", ["i0"], ["o0"], axis=1, keepdims=1, select_last_index=1)"#,
        Op::ArgReduce { max: true, axis: 1, keepdims: true, select_last_index: true },
        vec![In::X(ties.clone())],
        1,
    );
    cs.check(
        r#"helper.make_node("ArgMin", ["i0"], ["o0"], axis=0)"#,
        Op::ArgReduce { max: false, axis: 0, keepdims: true, select_last_index: false },
        vec![In::X(ties)],
        1,
    );
    cs.check(r#"helper.make_node("Softmax", ["i0"], ["o0"], axis=-1)"#, Op::Softmax { axis: 2 }, vec![x(&[2, 3, 7], 330)], 1);
    cs.check(r#"helper.make_node("Softmax", ["i0"], ["o0"], axis=1)"#, Op::Softmax { axis: 1 }, vec![x(&[2, 3, 7], 331)], 1);
    cs.check(r#"helper.make_node("LogSoftmax", ["i0"], ["o0"], axis=-1)"#, Op::LogSoftmax { axis: 1 }, vec![x(&[4, 9], 332)], 1);
    cs.run();
}

#[test]
fn normalizations() {
    let mut cs = Cases::default();
    cs.check(
        r#"helper.make_node("BatchNormalization", ["i0", "i1", "i2", "i3", "i4"], ["o0"], epsilon=1e-3)"#,
        Op::BatchNorm { epsilon: 1e-3 },
        vec![x(&[2, 3, 4, 5], 400), c(&[3], 401), c(&[3], 402), c(&[3], 403), In::C(Tensor::from_f32(vec![3], vec![0.5, 1.0, 2.0]))],
        1,
    );
    cs.check(
        r#"helper.make_node("InstanceNormalization", ["i0", "i1", "i2"], ["o0"], epsilon=1e-5)"#,
        Op::InstanceNorm { epsilon: 1e-5 },
        vec![x(&[2, 3, 4, 5], 404), c(&[3], 405), c(&[3], 406)],
        1,
    );
    cs.check(
        r#"helper.make_node("LayerNormalization", ["i0", "i1", "i2"], ["o0", "o1", "o2"], axis=-1, epsilon=1e-5)"#,
        Op::LayerNorm { axis: 2, epsilon: 1e-5 },
        vec![x(&[2, 3, 8], 407), c(&[8], 408), c(&[8], 409)],
        3,
    );
    cs.check(
        r#"helper.make_node("LayerNormalization", ["i0", "i1"], ["o0"], axis=1)"#,
        Op::LayerNorm { axis: 1, epsilon: 1e-5 },
        vec![x(&[2, 3, 4], 410), c(&[3, 4], 411)],
        1,
    );
    cs.check(
        r#"helper.make_node("GroupNormalization", ["i0", "i1", "i2"], ["o0"], num_groups=2, epsilon=1e-5)"#,
        Op::GroupNorm { num_groups: 2, epsilon: 1e-5 },
        vec![x(&[2, 4, 3, 3], 412), c(&[4], 413), c(&[4], 414)],
        1,
    );
    cs.check(
        r#"helper.make_node("LpNormalization", ["i0"], ["o0"], axis=1, p=2)"#,
        Op::LpNorm { axis: 1, p: 2 },
        vec![x(&[3, 5], 415)],
        1,
    );
    cs.run();
}

#[test]
fn shape_and_data_movement_ops() {
    let mut cs = Cases::default();
    cs.check(r#"helper.make_node("Reshape", ["i0", "i1"], ["o0"])"#, Op::Reshape { allowzero: false }, vec![x(&[2, 3, 4], 500), ci(&[4, -1])], 1);
    cs.check(r#"helper.make_node("Flatten", ["i0"], ["o0"], axis=2)"#, Op::Flatten { axis: 2 }, vec![x(&[2, 3, 4, 5], 501)], 1);
    cs.check(r#"helper.make_node("Squeeze", ["i0", "i1"], ["o0"])"#, Op::Squeeze { axes: None }, vec![x(&[2, 1, 4, 1], 502), ci(&[1])], 1);
    cs.check(r#"helper.make_node("Unsqueeze", ["i0", "i1"], ["o0"])"#, Op::Unsqueeze { axes: None }, vec![x(&[2, 4], 503), ci(&[0, 3])], 1);
    cs.check(r#"helper.make_node("Transpose", ["i0"], ["o0"], perm=[2, 0, 1])"#, Op::Transpose { perm: vec![2, 0, 1] }, vec![x(&[2, 3, 4], 504)], 1);
    cs.check(r#"helper.make_node("Transpose", ["i0"], ["o0"])"#, Op::Transpose { perm: vec![] }, vec![x(&[2, 3, 4], 505)], 1);
    cs.check(
        r#"helper.make_node("Concat", ["i0", "i1", "i2"], ["o0"], axis=1)"#,
        Op::Concat { axis: 1 },
        vec![x(&[2, 3, 2], 506), c(&[2, 1, 2], 507), x(&[2, 0, 2], 508)],
        1,
    );
    cs.check(
        r#"helper.make_node("Slice", ["i0", "i1", "i2", "i3", "i4"], ["o0"])"#,
        Op::Slice,
        vec![x(&[5, 6, 7], 509), ci(&[1, -1, 0]), ci(&[100, 0, -2]), ci(&[0, 1, 2]), ci(&[2, -2, 3])],
        1,
    );
    cs.check(
        r#"helper.make_node("Slice", ["i0", "i1", "i2"], ["o0"])"#,
        Op::Slice,
        vec![x(&[5, 6], 510), ci(&[-3, 2]), ci(&[-1, 4])],
        1,
    );
    cs.check(
        r#"helper.make_node("Split", ["i0", "i1"], ["o0", "o1", "o2"], axis=1)"#,
        Op::Split { axis: 1, split: None, num_outputs: 3 },
        vec![x(&[2, 7, 3], 511), ci(&[2, 4, 1])],
        3,
    );
    cs.check(
        r#"helper.make_node("Split", ["i0"], ["o0", "o1"], axis=0, num_outputs=2)"#,
        Op::Split { axis: 0, split: None, num_outputs: 2 },
        vec![x(&[5, 2], 512)],
        2,
    );
    for (mode, pm) in [("constant", PadMode::Constant), ("reflect", PadMode::Reflect), ("edge", PadMode::Edge), ("wrap", PadMode::Wrap)] {
        cs.check(
            &format!(r#"helper.make_node("Pad", ["i0", "i1", "i2"], ["o0"], mode="{mode}")"#),
            Op::Pad { mode: pm },
            vec![x(&[1, 2, 4, 5], 513), ci(&[0, 0, 2, 1, 0, 1, 1, 3]), In::C(Tensor::from_f32(vec![], vec![0.5]))],
            1,
        );
    }
    // Negative pads crop (onnx.reference rejects them; onnxruntime implements them).
    cs.check_ort(
        r#"helper.make_node("Pad", ["i0", "i1", "i2"], ["o0"], mode="constant")"#,
        Op::Pad { mode: PadMode::Constant },
        vec![x(&[1, 2, 4, 5], 521), ci(&[0, 0, 2, -1, 0, 1, -1, 3]), In::C(Tensor::from_f32(vec![], vec![0.5]))],
        1,
    );
    cs.check_ort(
        r#"helper.make_node("Pad", ["i0", "i1"], ["o0"], mode="reflect")"#,
        Op::Pad { mode: PadMode::Reflect },
        vec![x(&[3, 5], 522), ci(&[-1, 2, 1, -2])],
        1,
    );
    cs.check(r#"helper.make_node("Expand", ["i0", "i1"], ["o0"])"#, Op::Expand, vec![x(&[3, 1], 514), ci(&[2, 3, 4])], 1);
    cs.check(r#"helper.make_node("Tile", ["i0", "i1"], ["o0"])"#, Op::Tile, vec![x(&[2, 3], 515), ci(&[3, 2])], 1);
    cs.check(
        r#"helper.make_node("DepthToSpace", ["i0"], ["o0"], blocksize=2, mode="DCR")"#,
        Op::DepthToSpace { blocksize: 2, crd: false },
        vec![x(&[1, 8, 2, 3], 516)],
        1,
    );
    cs.check(
        r#"helper.make_node("DepthToSpace", ["i0"], ["o0"], blocksize=2, mode="CRD")"#,
        Op::DepthToSpace { blocksize: 2, crd: true },
        vec![x(&[1, 8, 2, 3], 517)],
        1,
    );
    cs.check(r#"helper.make_node("SpaceToDepth", ["i0"], ["o0"], blocksize=2)"#, Op::SpaceToDepth { blocksize: 2 }, vec![x(&[1, 2, 4, 6], 518)], 1);
    cs.check(r#"helper.make_node("Trilu", ["i0", "i1"], ["o0"], upper=1)"#, Op::Trilu { upper: true }, vec![x(&[2, 4, 5], 519), In::C(Tensor::from_i64(vec![], vec![1]))], 1);
    cs.check(r#"helper.make_node("Trilu", ["i0"], ["o0"], upper=0)"#, Op::Trilu { upper: false }, vec![x(&[4, 3], 520)], 1);
    cs.run();
}

#[test]
fn gather_embeddings_and_axes() {
    let mut cs = Cases::default();
    let idx = Tensor::from_i64(vec![2, 3], vec![0, 4, -1, 2, 2, -5]);
    cs.check(r#"helper.make_node("Gather", ["i0", "i1"], ["o0"], axis=0)"#, Op::Gather { axis: 0 }, vec![c(&[5, 4], 600), In::X(idx.clone())], 1);
    cs.check(r#"helper.make_node("Gather", ["i0", "i1"], ["o0"], axis=0)"#, Op::Gather { axis: 0 }, vec![x(&[5, 4], 601), In::C(idx)], 1);
    cs.check(
        r#"helper.make_node("Gather", ["i0", "i1"], ["o0"], axis=1)"#,
        Op::Gather { axis: 1 },
        vec![x(&[2, 3, 4], 602), In::X(Tensor::new(vec![2], TensorData::I32(vec![2, 0])).unwrap())],
        1,
    );
    cs.check(
        r#"helper.make_node("Gather", ["i0", "i1"], ["o0"], axis=2)"#,
        Op::Gather { axis: 2 },
        vec![x(&[2, 3, 4], 603), In::C(Tensor::from_i64(vec![], vec![3]))],
        1,
    );
    cs.run();
}

fn xi(shape: &[usize], v: &[i64]) -> In {
    In::X(Tensor::from_i64(shape.to_vec(), v.to_vec()))
}

#[test]
fn gather_nd_scatter_nd_and_scatter_elements() {
    let mut cs = Cases::default();
    let gnd = |b: usize| format!(r#"helper.make_node("GatherND", ["i0", "i1"], ["o0"], batch_dims={b})"#);
    cs.check(&gnd(0), Op::GatherNd { batch_dims: 0 }, vec![x(&[3, 4, 5], 700), xi(&[2, 2], &[0, 1, -1, 3])], 1);
    cs.check(&gnd(0), Op::GatherNd { batch_dims: 0 }, vec![x(&[3, 4], 701), xi(&[2, 1, 2], &[2, 3, 0, -4])], 1);
    cs.check(&gnd(0), Op::GatherNd { batch_dims: 0 }, vec![c(&[4, 3], 702), xi(&[3, 1], &[3, 0, 1])], 1);
    cs.check(&gnd(1), Op::GatherNd { batch_dims: 1 }, vec![x(&[2, 3, 4], 703), xi(&[2, 1], &[2, -3])], 1);
    cs.check(&gnd(1), Op::GatherNd { batch_dims: 1 }, vec![x(&[2, 3, 4], 704), xi(&[2, 2, 2], &[0, 1, 2, 3, 1, 0, -1, -1])], 1);
    let snd = |r: &str| format!(r#"helper.make_node("ScatterND", ["i0", "i1", "i2"], ["o0"], reduction="{r}")"#);
    cs.check(&snd("none"), Op::ScatterNd { reduction: None }, vec![x(&[4, 3], 710), xi(&[2, 1], &[1, -1]), x(&[2, 3], 711)], 1);
    cs.check(&snd("add"), Op::ScatterNd { reduction: Some(BinaryOp::Add) }, vec![x(&[3, 4], 712), xi(&[3, 2], &[0, 1, 2, 3, 0, 1]), x(&[3], 713)], 1);
    cs.check(&snd("mul"), Op::ScatterNd { reduction: Some(BinaryOp::Mul) }, vec![x(&[2, 2, 3], 714), xi(&[1, 2], &[1, 0]), x(&[1, 3], 715)], 1);
    cs.check(&snd("max"), Op::ScatterNd { reduction: Some(BinaryOp::Max) }, vec![x(&[5], 716), xi(&[3, 1], &[4, 0, 4]), x(&[3], 717)], 1);
    let se = |a: i64, r: &str| format!(r#"helper.make_node("ScatterElements", ["i0", "i1", "i2"], ["o0"], axis={a}, reduction="{r}")"#);
    cs.check(&se(1, "none"), Op::ScatterElements { axis: 1, reduction: None }, vec![x(&[3, 4], 720), xi(&[3, 2], &[1, 3, 0, -1, 2, 0]), x(&[3, 2], 721)], 1);
    cs.check(&se(0, "add"), Op::ScatterElements { axis: 0, reduction: Some(BinaryOp::Add) }, vec![x(&[3, 2], 722), xi(&[2, 2], &[0, 2, 0, 2]), x(&[2, 2], 723)], 1);
    cs.check(&se(0, "min"), Op::ScatterElements { axis: 0, reduction: Some(BinaryOp::Min) }, vec![x(&[4], 724), xi(&[3], &[3, -1, 1]), x(&[3], 725)], 1);
    cs.run();
}

#[test]
fn unsupported_ops_name_the_node_and_op() {
    let mut g = Graph::new("u");
    let xi = g.add_input("x", DType::F32, vec![]);
    let y = g.add_value("y", DType::F32, vec![4]);
    g.add_node("my_range", Op::Range, vec![Some(xi), Some(xi), Some(xi)], vec![y]);
    g.outputs.push(y);
    let e = tpu_sdk_cloud_tpu::lower::lower(&g).unwrap_err().to_string();
    assert!(e.contains("my_range") && e.contains("Range"), "{e}");
    let core: tpu_sdk_core::Error = tpu_sdk_cloud_tpu::lower::lower(&g).unwrap_err().into();
    assert!(matches!(core, tpu_sdk_core::Error::Unsupported(_)), "{core:?}");
}

#[test]
fn resize_nearest_linear_cubic_with_coordinate_modes() {
    let mut cs = Cases::default();
    let attrs = |mode: ResizeMode, coord: CoordTransform, nearest: NearestMode| ResizeAttrs {
        mode,
        coord,
        nearest,
        cubic_coeff_a: -0.75,
        exclude_outside: false,
        extrapolation_value: 0.0,
    };
    let scales = |v: &[f32]| In::C(Tensor::from_f32(vec![v.len()], v.to_vec()));
    cs.check(
        r#"helper.make_node("Resize", ["i0", "", "i2"], ["o0"], mode="nearest", coordinate_transformation_mode="asymmetric", nearest_mode="floor")"#,
        Op::Resize(attrs(ResizeMode::Nearest, CoordTransform::Asymmetric, NearestMode::Floor)),
        vec![x(&[1, 2, 3, 4], 700), In::Absent, scales(&[1.0, 1.0, 2.0, 2.0])],
        1,
    );
    cs.check(
        r#"helper.make_node("Resize", ["i0", "", "i2"], ["o0"], mode="nearest")"#,
        Op::Resize(attrs(ResizeMode::Nearest, CoordTransform::HalfPixel, NearestMode::RoundPreferFloor)),
        vec![x(&[1, 2, 5, 7], 701), In::Absent, scales(&[1.0, 1.0, 0.6, 1.5])],
        1,
    );
    cs.check(
        r#"helper.make_node("Resize", ["i0", "", "i2"], ["o0"], mode="linear")"#,
        Op::Resize(attrs(ResizeMode::Linear, CoordTransform::HalfPixel, NearestMode::RoundPreferFloor)),
        vec![x(&[2, 3, 4, 5], 702), In::Absent, scales(&[1.0, 1.0, 2.0, 1.5])],
        1,
    );
    cs.check(
        r#"helper.make_node("Resize", ["i0", "", "", "i3"], ["o0"], mode="linear", coordinate_transformation_mode="align_corners")"#,
        Op::Resize(attrs(ResizeMode::Linear, CoordTransform::AlignCorners, NearestMode::RoundPreferFloor)),
        vec![x(&[1, 1, 4, 4], 703), In::Absent, In::Absent, ci(&[1, 1, 7, 3])],
        1,
    );
    cs.check(
        r#"helper.make_node("Resize", ["i0", "", "i2"], ["o0"], mode="linear", coordinate_transformation_mode="pytorch_half_pixel")"#,
        Op::Resize(attrs(ResizeMode::Linear, CoordTransform::PytorchHalfPixel, NearestMode::RoundPreferFloor)),
        vec![x(&[1, 2, 6, 4], 704), In::Absent, scales(&[1.0, 1.0, 0.5, 2.0])],
        1,
    );
    // tf_crop_and_resize: a region of interest partly outside the input; outside samples take extrapolation_value.
    let roi = In::C(Tensor::from_f32(vec![8], vec![0.0, 0.0, 0.25, -0.2, 1.0, 1.0, 1.35, 0.95]));
    for (mode, m) in [("linear", ResizeMode::Linear), ("nearest", ResizeMode::Nearest), ("cubic", ResizeMode::Cubic)] {
        let mut t = attrs(m, CoordTransform::TfCropAndResize, NearestMode::RoundPreferFloor);
        t.extrapolation_value = 7.5;
        cs.check(
            &format!(r#"helper.make_node("Resize", ["i0", "i1", "", "i3"], ["o0"], mode="{mode}", coordinate_transformation_mode="tf_crop_and_resize", extrapolation_value=7.5)"#),
            Op::Resize(t),
            vec![x(&[1, 2, 5, 6], 706), roi_clone(&roi), In::Absent, ci(&[1, 2, 7, 4])],
            1,
        );
    }
    let mut cubic = attrs(ResizeMode::Cubic, CoordTransform::HalfPixel, NearestMode::RoundPreferFloor);
    cubic.exclude_outside = true;
    cubic.cubic_coeff_a = -0.5;
    cs.check(
        r#"helper.make_node("Resize", ["i0", "", "i2"], ["o0"], mode="cubic", exclude_outside=1, cubic_coeff_a=-0.5)"#,
        Op::Resize(cubic),
        vec![x(&[1, 1, 5, 6], 705), In::Absent, scales(&[1.0, 1.0, 1.6, 0.5])],
        1,
    );
    cs.run();
}

#[test]
fn reverse_sequence_with_run_time_lengths() {
    let mut cs = Cases::default();
    let lens = |v: &[i64]| In::X(Tensor::from_i64(vec![v.len()], v.to_vec()));
    cs.check(
        r#"helper.make_node("ReverseSequence", ["i0", "i1"], ["o0"], batch_axis=0, time_axis=1)"#,
        Op::ReverseSequence { batch_axis: 0, time_axis: 1 },
        vec![x(&[4, 5, 3], 760), lens(&[1, 5, 3, 0])],
        1,
    );
    cs.check(
        r#"helper.make_node("ReverseSequence", ["i0", "i1"], ["o0"], batch_axis=1, time_axis=0)"#,
        Op::ReverseSequence { batch_axis: 1, time_axis: 0 },
        vec![x(&[6, 3, 2, 2], 761), lens(&[6, 2, 4])],
        1,
    );
    cs.run();
}

#[test]
fn cumsum_onehot_hardmax_topk_lrn_gather_elements_and_quantization() {
    let mut cs = Cases::default();
    let axis = |a: i64| In::C(Tensor::from_i64(vec![], vec![a]));
    for (ex, rev) in [(false, false), (true, false), (false, true), (true, true)] {
        cs.check(
            &format!(r#"helper.make_node("CumSum", ["i0", "i1"], ["o0"], exclusive={}, reverse={})"#, ex as u8, rev as u8),
            Op::CumSum { exclusive: ex, reverse: rev },
            vec![x(&[3, 5], 800), axis(-1)],
            1,
        );
    }
    cs.check(
        r#"helper.make_node("OneHot", ["i0", "i1", "i2"], ["o0"], axis=1)"#,
        Op::OneHot { axis: 1 },
        vec![
            In::X(Tensor::from_i64(vec![2, 2], vec![0, 3, -1, 2])),
            In::C(Tensor::from_i64(vec![], vec![4])),
            In::C(Tensor::from_f32(vec![2], vec![-1.0, 5.0])),
        ],
        1,
    );
    cs.check(r#"helper.make_node("Hardmax", ["i0"], ["o0"], axis=1)"#, Op::Hardmax { axis: 1 }, vec![x(&[3, 6], 801)], 1);
    let k = In::C(Tensor::from_i64(vec![1], vec![3]));
    cs.check(
        r#"helper.make_node("TopK", ["i0", "i1"], ["o0", "o1"], axis=1)"#,
        Op::TopK { axis: 1, largest: true, sorted: true },
        vec![x(&[2, 7, 3], 802), k],
        2,
    );
    cs.check(
        r#"helper.make_node("TopK", ["i0", "i1"], ["o0", "o1"], axis=-1, largest=0)"#,
        Op::TopK { axis: 1, largest: false, sorted: true },
        vec![x(&[4, 9], 803), In::C(Tensor::from_i64(vec![1], vec![2]))],
        2,
    );
    // onnx.reference's LRN loops over the batch instead of the channels; onnxruntime is right.
    cs.check_ort(
        r#"helper.make_node("LRN", ["i0"], ["o0"], alpha=1e-3, beta=0.75, bias=2.0, size=3)"#,
        Op::Lrn { alpha: 1e-3, beta: 0.75, bias: 2.0, size: 3 },
        vec![x(&[1, 5, 3, 3], 804)],
        1,
    );
    cs.check(
        r#"helper.make_node("GatherElements", ["i0", "i1"], ["o0"], axis=1)"#,
        Op::GatherElements { axis: 1 },
        vec![x(&[3, 4], 805), In::X(Tensor::from_i64(vec![3, 2], vec![0, 3, -1, 1, 2, 2]))],
        1,
    );
    let q = Tensor::new(vec![2, 3], TensorData::U8(vec![0, 128, 255, 7, 100, 200])).unwrap();
    cs.check(
        r#"helper.make_node("DequantizeLinear", ["i0", "i1", "i2"], ["o0"], axis=1)"#,
        Op::DequantizeLinear { axis: 1 },
        vec![
            In::X(q),
            In::C(Tensor::from_f32(vec![3], vec![0.1, 0.02, 0.5])),
            In::C(Tensor::new(vec![3], TensorData::U8(vec![128, 0, 10])).unwrap()),
        ],
        1,
    );
    cs.check(
        r#"helper.make_node("QuantizeLinear", ["i0", "i1", "i2"], ["o0"])"#,
        Op::QuantizeLinear { axis: 1, to: DType::I8, rounding: Default::default() },
        vec![
            In::X(Tensor::from_f32(vec![6], vec![-3.0, -0.05, 0.05, 0.15, 1.0, 9.0])),
            In::C(Tensor::from_f32(vec![], vec![0.1])),
            In::C(Tensor::new(vec![], TensorData::I8(vec![-2])).unwrap()),
        ],
        1,
    );
    cs.run();
}

#[test]
fn malformed_nodes_are_errors_naming_the_node_not_panics() {
    let mut g = Graph::new("bad");
    let a = g.add_input("a", DType::F32, vec![2]);
    let b = g.add_input("b", DType::F32, vec![3]);
    let y = g.add_value("y", DType::F32, vec![3]);
    g.add_node("bad_add", Op::Binary(BinaryOp::Add, None), vec![Some(a), Some(b)], vec![y]);
    g.outputs.push(y);
    let e = tpu_sdk_cloud_tpu::lower::lower(&g).unwrap_err().to_string();
    assert!(e.contains("bad_add") && e.contains("broadcast"), "{e}");

    let mut g = Graph::new("bad_conv");
    let x = g.add_input("x", DType::F32, vec![1, 1, 4, 4]);
    let w = g.add_constant("w", Tensor::zeros(DType::F32, vec![1, 1, 2, 2]));
    let y = g.add_value("y", DType::F32, vec![1, 1, 3, 3]);
    let attrs = ConvAttrs { strides: vec![0, 1], ..conv_attrs() };
    g.add_node("zero_stride", Op::Conv(attrs), vec![Some(x), Some(w)], vec![y]);
    g.outputs.push(y);
    let e = tpu_sdk_cloud_tpu::lower::lower(&g).unwrap_err().to_string();
    assert!(e.contains("zero_stride") && e.contains("strides"), "{e}");

    // A node whose recorded output shape disagrees with what it computes.
    let mut g = Graph::new("wrong_shape");
    let x = g.add_input("x", DType::F32, vec![2, 3]);
    let y = g.add_value("y", DType::F32, vec![3, 2]);
    g.add_node("relu", Op::Unary(UnaryOp::Relu), vec![Some(x)], vec![y]);
    g.outputs.push(y);
    let e = tpu_sdk_cloud_tpu::lower::lower(&g).unwrap_err().to_string();
    assert!(e.contains("relu") && e.contains("[2, 3]") && e.contains("[3, 2]"), "{e}");
}

#[test]
fn constants_of_every_dtype_survive_the_mlir_text_exactly() {
    let Some(plugin) = common::cpu_plugin() else { return };
    let consts = vec![
        Tensor::from_f32(vec![2, 2], vec![1.5, -0.0, f32::INFINITY, f32::MIN_POSITIVE]),
        Tensor::from_f32(vec![3], vec![0.1; 3]),
        Tensor::new(vec![2], TensorData::F64(vec![std::f64::consts::PI, -1e-300])).unwrap(),
        Tensor::new(vec![2], TensorData::F16(vec![half::f16::from_f32(0.333), half::f16::from_f32(-2.0)])).unwrap(),
        Tensor::new(vec![2], TensorData::BF16(vec![half::bf16::from_f32(0.333), half::bf16::from_f32(-2.0)])).unwrap(),
        Tensor::new(vec![3], TensorData::I8(vec![-128, 0, 127])).unwrap(),
        Tensor::new(vec![2], TensorData::U8(vec![0, 255])).unwrap(),
        Tensor::new(vec![2], TensorData::I16(vec![-32768, 5])).unwrap(),
        Tensor::new(vec![2], TensorData::I32(vec![i32::MIN, 1 << 20])).unwrap(),
        Tensor::from_i64(vec![2, 1], vec![i64::MIN, i64::MAX]),
        Tensor::new(vec![2, 3], TensorData::Bool(vec![true, false, false, true, true, false])).unwrap(),
        Tensor::new(vec![2], TensorData::Bool(vec![true, true])).unwrap(),
        Tensor::from_f32(vec![], vec![-7.25]),
        Tensor::from_f32(vec![0, 2], vec![]),
    ];
    let mut g = Graph::new("consts");
    // One input so that the program has an argument; the outputs are the constants themselves.
    g.add_input("unused", DType::F32, vec![1]);
    for (i, t) in consts.iter().enumerate() {
        let v = g.add_constant(format!("c{i}"), t.clone());
        g.outputs.push(v);
    }
    let exe = CloudTpuTarget::with_plugin(&plugin).compile_graph(g).unwrap();
    let got = exe.execute(&[Tensor::from_f32(vec![1], vec![0.0])]).unwrap();
    assert_eq!(got, consts);
}
