//! Binary and unary elementwise ops, Where/Cast/Identity, variadic ops, reductions and softmax.

use super::*;

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
