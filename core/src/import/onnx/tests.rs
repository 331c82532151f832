//! Tests of the ONNX importer on models built in Rust (no Python, no fixtures). Most check the op mapping
//! before shape inference ([`super::graph::import_unchecked`]), so they do not depend on the kernels.

use prost::Message;

use super::graph::import_unchecked;
use super::proto::{
    attr_type as at, data_type as dt,
    tensor_shape_proto::{dimension::Value as Dim, Dimension},
    type_proto, AttributeProto, FunctionProto, GraphProto, ModelProto, NodeProto, OperatorSetIdProto, TensorProto, TensorShapeProto,
    TypeProto, ValueInfoProto,
};
use super::ImportOptions;
use crate::ir::{BinaryOp, DType, Graph, Op, ReduceOp, Tensor, UnaryOp};
use crate::Error;

pub(crate) enum D {
    V(i64),
    P(&'static str),
    U,
}

pub(crate) fn vi(name: &str, elem: i32, dims: Option<Vec<D>>) -> ValueInfoProto {
    let shape = dims.map(|d| TensorShapeProto {
        dim: d
            .into_iter()
            .map(|d| Dimension {
                value: match d {
                    D::V(v) => Some(Dim::DimValue(v)),
                    D::P(p) => Some(Dim::DimParam(p.into())),
                    D::U => None,
                },
                denotation: None,
            })
            .collect(),
    });
    ValueInfoProto {
        name: Some(name.into()),
        r#type: Some(TypeProto {
            value: Some(type_proto::Value::TensorType(type_proto::Tensor { elem_type: Some(elem), shape })),
            denotation: None,
        }),
        doc_string: None,
    }
}

pub(crate) fn fin(name: &str, dims: &[i64]) -> ValueInfoProto {
    vi(name, dt::FLOAT, Some(dims.iter().map(|&d| D::V(d)).collect()))
}

pub(crate) fn node(op: &str, ins: &[&str], outs: &[&str], attrs: Vec<AttributeProto>) -> NodeProto {
    NodeProto {
        input: ins.iter().map(|s| s.to_string()).collect(),
        output: outs.iter().map(|s| s.to_string()).collect(),
        name: Some(format!("{op}_node")),
        op_type: Some(op.into()),
        attribute: attrs,
        ..Default::default()
    }
}

fn attr(name: &str, ty: i32) -> AttributeProto {
    AttributeProto { name: Some(name.into()), r#type: Some(ty), ..Default::default() }
}
pub(crate) fn ai(name: &str, v: i64) -> AttributeProto {
    AttributeProto { i: Some(v), ..attr(name, at::INT) }
}
pub(crate) fn af(name: &str, v: f32) -> AttributeProto {
    AttributeProto { f: Some(v), ..attr(name, at::FLOAT) }
}
pub(crate) fn ais(name: &str, v: &[i64]) -> AttributeProto {
    AttributeProto { ints: v.to_vec(), ..attr(name, at::INTS) }
}
pub(crate) fn afs(name: &str, v: &[f32]) -> AttributeProto {
    AttributeProto { floats: v.to_vec(), ..attr(name, at::FLOATS) }
}
pub(crate) fn astr(name: &str, v: &str) -> AttributeProto {
    AttributeProto { s: Some(v.as_bytes().to_vec()), ..attr(name, at::STRING) }
}
pub(crate) fn at_(name: &str, t: TensorProto) -> AttributeProto {
    AttributeProto { t: Some(t), ..attr(name, at::TENSOR) }
}

pub(crate) fn tf32(name: &str, dims: &[i64], v: &[f32]) -> TensorProto {
    TensorProto { name: Some(name.into()), dims: dims.to_vec(), data_type: Some(dt::FLOAT), float_data: v.to_vec(), ..Default::default() }
}
pub(crate) fn ti64(name: &str, dims: &[i64], v: &[i64]) -> TensorProto {
    TensorProto { name: Some(name.into()), dims: dims.to_vec(), data_type: Some(dt::INT64), int64_data: v.to_vec(), ..Default::default() }
}

pub(crate) fn model(
    opset: i64,
    nodes: Vec<NodeProto>,
    inputs: Vec<ValueInfoProto>,
    outputs: &[&str],
    inits: Vec<TensorProto>,
) -> ModelProto {
    ModelProto {
        ir_version: Some(8),
        opset_import: vec![OperatorSetIdProto { domain: Some(String::new()), version: Some(opset) }],
        graph: Some(GraphProto {
            node: nodes,
            name: Some("g".into()),
            initializer: inits,
            input: inputs,
            output: outputs.iter().map(|o| ValueInfoProto { name: Some(o.to_string()), ..Default::default() }).collect(),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn import(m: &ModelProto) -> crate::Result<Graph> {
    import_unchecked(&m.encode_to_vec(), &ImportOptions::default()).map(|(g, _)| g)
}

/// Imports a one-node model with a float input `x` of `shape`; returns the graph.
fn one(opset: i64, op: &str, shape: &[i64], attrs: Vec<AttributeProto>) -> crate::Result<Graph> {
    import(&model(opset, vec![node(op, &["x"], &["y"], attrs)], vec![fin("x", shape)], &["y"], vec![]))
}

fn ops(g: &Graph) -> Vec<Op> {
    g.nodes.iter().map(|n| n.op.clone()).collect()
}

fn const_input(g: &Graph, node: usize, input: usize) -> Tensor {
    g.constant(g.nodes[node].inputs[input].expect("input present")).expect("constant input").clone()
}

#[test]
fn maps_unary_ops_with_defaults_per_opset() {
    assert_eq!(ops(&one(13, "Relu", &[2], vec![]).unwrap()), vec![Op::Unary(UnaryOp::Relu)]);
    assert_eq!(ops(&one(16, "LeakyRelu", &[2], vec![]).unwrap()), vec![Op::Unary(UnaryOp::LeakyRelu { alpha: 0.01 })]);
    let Op::Unary(UnaryOp::Selu { alpha, gamma }) = one(13, "Selu", &[2], vec![]).unwrap().nodes[0].op else { panic!() };
    assert_eq!((alpha, gamma), (1.673_263_2, 1.050_701));
    assert_eq!(ops(&one(13, "HardSigmoid", &[2], vec![]).unwrap()), vec![Op::Unary(UnaryOp::HardSigmoid { alpha: 0.2, beta: 0.5 })]);
    assert_eq!(ops(&one(20, "Gelu", &[2], vec![astr("approximate", "tanh")]).unwrap()), vec![Op::Unary(UnaryOp::Gelu { tanh: true })]);
    assert_eq!(
        ops(&one(20, "IsInf", &[2], vec![ai("detect_negative", 0)]).unwrap()),
        vec![Op::Unary(UnaryOp::IsInf { detect_positive: true, detect_negative: false })]
    );
    // opset 1 consumed_inputs is an optimisation hint and is accepted
    assert_eq!(ops(&one(1, "Relu", &[2], vec![ais("consumed_inputs", &[0])]).unwrap()), vec![Op::Unary(UnaryOp::Relu)]);
    // Clip before 11: attributes
    assert_eq!(
        ops(&one(6, "Clip", &[2], vec![af("min", 0.0), af("max", 6.0)]).unwrap()),
        vec![Op::Unary(UnaryOp::Clip { min: 0.0, max: 6.0 })]
    );
}

#[test]
fn clip_with_constant_bounds_is_unary_and_with_inputs_is_dynamic() {
    let m = model(13, vec![node("Clip", &["x", "", "hi"], &["y"], vec![])], vec![fin("x", &[2])], &["y"], vec![tf32("hi", &[], &[6.0])]);
    assert_eq!(ops(&import(&m).unwrap()), vec![Op::Unary(UnaryOp::Clip { min: f32::NEG_INFINITY, max: 6.0 })]);
    let m = model(13, vec![node("Clip", &["x", "lo"], &["y"], vec![])], vec![fin("x", &[2]), fin("lo", &[])], &["y"], vec![]);
    let g = import(&m).unwrap();
    assert_eq!(ops(&g), vec![Op::ClipDynamic]);
    assert_eq!(g.nodes[0].inputs.len(), 2);
}

#[test]
fn maps_binary_variadic_and_legacy_broadcast() {
    let two = |op: &str, opset: i64, n_in: usize| {
        let names = ["a", "b", "c"];
        let ins = &names[..n_in];
        import(&model(opset, vec![node(op, ins, &["y"], vec![])], ins.iter().map(|n| fin(n, &[2, 3])).collect(), &["y"], vec![]))
    };
    assert_eq!(ops(&two("Add", 14, 2).unwrap()), vec![Op::Binary(BinaryOp::Add, None)]);
    assert_eq!(ops(&two("Max", 13, 2).unwrap()), vec![Op::Binary(BinaryOp::Max, None)]);
    assert_eq!(ops(&two("Max", 13, 3).unwrap()), vec![Op::Variadic(BinaryOp::Max)]);
    assert_eq!(ops(&two("Sum", 13, 3).unwrap()), vec![Op::Variadic(BinaryOp::Add)]);
    assert_eq!(ops(&two("Mean", 13, 2).unwrap()), vec![Op::VariadicMean]);
    assert_eq!(ops(&two("BitwiseXor", 18, 2).unwrap()), vec![Op::Binary(BinaryOp::BitXor, None)]);
    assert_eq!(ops(&two("PRelu", 16, 2).unwrap()), vec![Op::Binary(BinaryOp::PRelu, None)]);
    let m = |fmod| {
        model(13, vec![node("Mod", &["a", "b"], &["y"], vec![ai("fmod", fmod)])], vec![fin("a", &[2]), fin("b", &[2])], &["y"], vec![])
    };
    assert_eq!(ops(&import(&m(1)).unwrap()), vec![Op::Binary(BinaryOp::Fmod, None)]);
    assert_eq!(ops(&import(&m(0)).unwrap()), vec![Op::Binary(BinaryOp::Mod, None)]);

    // opset 6: B [3] broadcast at axis 1 of A [2,3,4,5] → B unsqueezed to [3,1,1]
    let m = model(
        6,
        vec![node("Add", &["a", "b"], &["y"], vec![ai("broadcast", 1), ai("axis", 1)])],
        vec![fin("a", &[2, 3, 4, 5])],
        &["y"],
        vec![tf32("b", &[3], &[1.0, 2.0, 3.0])],
    );
    let g = import(&m).unwrap();
    assert_eq!(ops(&g), vec![Op::Unsqueeze { axes: Some(vec![1, 2]) }, Op::Binary(BinaryOp::Add, None)]);
    assert_eq!(g.nodes[1].inputs[1], Some(g.nodes[0].outputs[0]));
    // at opset 7 the legacy attributes no longer exist
    let m = model(7, vec![node("Add", &["a", "a"], &["y"], vec![ai("broadcast", 1)])], vec![fin("a", &[2])], &["y"], vec![]);
    assert!(matches!(import(&m), Err(Error::Unsupported(m)) if m.contains("'broadcast'")));
}

#[test]
fn maps_conv_pool_and_norm_attributes() {
    let g = import(&model(
        11,
        vec![node(
            "Conv",
            &["x", "w"],
            &["y"],
            vec![
                ais("kernel_shape", &[3, 3]),
                ais("pads", &[1, 1, 1, 1]),
                ais("strides", &[2, 2]),
                ai("group", 1),
                astr("auto_pad", "NOTSET"),
            ],
        )],
        vec![fin("x", &[1, 3, 8, 8])],
        &["y"],
        vec![tf32("w", &[4, 3, 3, 3], &[0.0; 108])],
    ))
    .unwrap();
    let Op::Conv(c) = &g.nodes[0].op else { panic!() };
    assert_eq!((c.kernel_shape.clone(), c.pads.clone(), c.strides.clone(), c.group), (vec![3, 3], vec![1, 1, 1, 1], vec![2, 2], 1));
    assert_eq!(c.auto_pad, crate::ir::AutoPad::NotSet);
    assert!(g.constant(g.nodes[0].inputs[1].unwrap()).is_some());

    let g =
        one(12, "MaxPool", &[1, 1, 4, 4], vec![ais("kernel_shape", &[2, 2]), ai("ceil_mode", 1), astr("auto_pad", "SAME_UPPER")]).unwrap();
    let Op::MaxPool(p) = &g.nodes[0].op else { panic!() };
    assert!(p.ceil_mode && p.auto_pad == crate::ir::AutoPad::SameUpper);
    let e = one(12, "MaxPool", &[1, 1, 4, 4], vec![]).unwrap_err();
    assert!(e.to_string().contains("kernel_shape"), "{e}");

    let g = one(17, "LayerNormalization", &[2, 3, 4], vec![]);
    // scale is required
    assert!(g.unwrap_err().to_string().contains("required input 1"));
    let m = model(
        17,
        vec![node("LayerNormalization", &["x", "s"], &["y"], vec![af("epsilon", 1e-3)])],
        vec![fin("x", &[2, 3, 4])],
        &["y"],
        vec![tf32("s", &[4], &[1.0; 4])],
    );
    assert_eq!(ops(&import(&m).unwrap()), vec![Op::LayerNorm { axis: 2, epsilon: 1e-3 }]);

    let bn = |attrs, outs: &[&str]| {
        let inits = ["s", "b", "m", "v"].iter().map(|n| tf32(n, &[3], &[1.0; 3])).collect();
        import(&model(
            15,
            vec![node("BatchNormalization", &["x", "s", "b", "m", "v"], outs, attrs)],
            vec![fin("x", &[1, 3, 2, 2])],
            &outs[..1],
            inits,
        ))
    };
    assert_eq!(ops(&bn(vec![af("epsilon", 1e-3), af("momentum", 0.9)], &["y"]).unwrap()), vec![Op::BatchNorm { epsilon: 1e-3 }]);
    assert!(matches!(bn(vec![ai("training_mode", 1)], &["y"]), Err(Error::Unsupported(m)) if m.contains("training_mode")));
    // unused training outputs are dropped
    assert_eq!(bn(vec![], &["y", "rm", "rv"]).unwrap().nodes[0].outputs.len(), 1);
}

#[test]
fn softmax_before_13_coerces_to_2d() {
    assert_eq!(ops(&one(11, "Softmax", &[2, 5], vec![]).unwrap()), vec![Op::Softmax { axis: 1 }]);
    assert_eq!(ops(&one(13, "Softmax", &[2, 3, 5], vec![]).unwrap()), vec![Op::Softmax { axis: 2 }]);
    assert_eq!(ops(&one(11, "LogSoftmax", &[2, 3, 5], vec![ai("axis", -1)]).unwrap()), vec![Op::LogSoftmax { axis: 2 }]);
    let g = one(11, "Softmax", &[2, 3, 5], vec![]).unwrap();
    assert_eq!(ops(&g), vec![Op::Flatten { axis: 1 }, Op::Softmax { axis: 1 }, Op::Reshape { allowzero: true }]);
    assert_eq!(const_input(&g, 2, 1).to_i64_vec(), vec![2, 3, 5]);
    assert_eq!(g.nodes[2].outputs[0], g.outputs[0]);
}

#[test]
fn maps_attributes_that_became_inputs() {
    // Reshape-1 shape attribute
    let g = one(1, "Reshape", &[2, 3], vec![ais("shape", &[3, 2])]).unwrap();
    assert_eq!(const_input(&g, 0, 1).to_i64_vec(), vec![3, 2]);
    // Slice-1
    let g = one(1, "Slice", &[4, 4], vec![ais("starts", &[1]), ais("ends", &[3]), ais("axes", &[1])]).unwrap();
    assert_eq!(g.nodes[0].inputs.len(), 4);
    assert_eq!(const_input(&g, 0, 3).to_i64_vec(), vec![1]);
    // Squeeze before and after 13
    assert_eq!(ops(&one(11, "Squeeze", &[1, 3], vec![ais("axes", &[0])]).unwrap()), vec![Op::Squeeze { axes: Some(vec![0]) }]);
    let m = model(13, vec![node("Unsqueeze", &["x", "ax"], &["y"], vec![])], vec![fin("x", &[3])], &["y"], vec![ti64("ax", &[1], &[0])]);
    let g = import(&m).unwrap();
    assert_eq!(ops(&g), vec![Op::Unsqueeze { axes: None }]);
    assert_eq!(g.nodes[0].inputs.len(), 2);
    // Pad-2 pads/value attributes; the value takes the input's dtype
    let g = one(2, "Pad", &[2, 2], vec![ais("pads", &[1, 1, 1, 1]), af("value", 1.5)]).unwrap();
    assert_eq!(const_input(&g, 0, 1).to_i64_vec(), vec![1, 1, 1, 1]);
    assert_eq!(const_input(&g, 0, 2), Tensor::scalar(1.5f32));
    // TopK-1 k attribute
    let m = model(1, vec![node("TopK", &["x"], &["v", "i"], vec![ai("k", 2)])], vec![fin("x", &[3, 4])], &["v", "i"], vec![]);
    let g = import(&m).unwrap();
    assert_eq!(ops(&g), vec![Op::TopK { axis: 1, largest: true, sorted: true }]);
    assert_eq!(const_input(&g, 0, 1).to_i64_vec(), vec![2]);
    // ReduceSum: axes attribute before 13 (normalised, sorted), input after
    assert_eq!(
        ops(&one(11, "ReduceSum", &[2, 3, 4], vec![ais("axes", &[-1, 0]), ai("keepdims", 0)]).unwrap()),
        vec![Op::Reduce { op: ReduceOp::Sum, axes: Some(vec![0, 2]), keepdims: false, noop_with_empty_axes: false }]
    );
    assert_eq!(
        ops(&one(13, "ReduceMean", &[2, 3], vec![ais("axes", &[1])]).unwrap()),
        vec![Op::Reduce { op: ReduceOp::Mean, axes: Some(vec![1]), keepdims: true, noop_with_empty_axes: false }]
    );
    let e = one(13, "ReduceSum", &[2, 3], vec![ais("axes", &[1])]).unwrap_err();
    assert!(matches!(e, Error::Unsupported(ref m) if m.contains("'axes'")), "{e}");
    assert_eq!(
        ops(&one(18, "ReduceMax", &[2, 3], vec![ai("noop_with_empty_axes", 1)]).unwrap()),
        vec![Op::Reduce { op: ReduceOp::Max, axes: None, keepdims: true, noop_with_empty_axes: true }]
    );
    // Split: attribute before 13, equal parts, num_outputs must match
    let split =
        |opset, attrs| import(&model(opset, vec![node("Split", &["x"], &["a", "b"], attrs)], vec![fin("x", &[4, 2])], &["a", "b"], vec![]));
    assert_eq!(ops(&split(11, vec![ais("split", &[1, 3])]).unwrap()), vec![Op::Split { axis: 0, split: Some(vec![1, 3]), num_outputs: 2 }]);
    assert_eq!(
        ops(&split(18, vec![ai("num_outputs", 2), ai("axis", -1)]).unwrap()),
        vec![Op::Split { axis: 1, split: None, num_outputs: 2 }]
    );
    assert!(split(18, vec![ai("num_outputs", 3)]).unwrap_err().to_string().contains("num_outputs"));
    // Cast to, also the opset-1 string form, and CastLike
    assert_eq!(ops(&one(13, "Cast", &[2], vec![ai("to", dt::INT64 as i64)]).unwrap()), vec![Op::Cast { to: DType::I64 }]);
    assert_eq!(ops(&one(1, "Cast", &[2], vec![astr("to", "FLOAT16")]).unwrap()), vec![Op::Cast { to: DType::F16 }]);
    assert!(matches!(one(13, "Cast", &[2], vec![ai("to", dt::STRING as i64)]), Err(Error::Unsupported(m)) if m.contains("STRING")));
    let m = model(15, vec![node("CastLike", &["x", "t"], &["y"], vec![])], vec![fin("x", &[2])], &["y"], vec![ti64("t", &[], &[0])]);
    assert_eq!(ops(&import(&m).unwrap()), vec![Op::Cast { to: DType::I64 }]);
}

#[test]
fn maps_resize_upsample_and_dropout() {
    let m = model(
        10,
        vec![node("Resize", &["x", "s"], &["y"], vec![astr("mode", "linear")])],
        vec![fin("x", &[1, 1, 2, 2])],
        &["y"],
        vec![tf32("s", &[4], &[1.0, 1.0, 2.0, 2.0])],
    );
    let g = import(&m).unwrap();
    let Op::Resize(r) = &g.nodes[0].op else { panic!() };
    assert_eq!((r.mode, r.coord), (crate::ir::ResizeMode::Linear, crate::ir::CoordTransform::Asymmetric));
    assert_eq!(g.nodes[0].inputs[1], None);
    assert!(g.nodes[0].inputs[2].is_some());

    // opset 11: empty roi/scales constants count as absent
    let m = model(
        11,
        vec![node(
            "Resize",
            &["x", "roi", "sc", "sz"],
            &["y"],
            vec![astr("coordinate_transformation_mode", "align_corners"), astr("nearest_mode", "floor")],
        )],
        vec![fin("x", &[1, 1, 2, 2])],
        &["y"],
        vec![tf32("roi", &[0], &[]), tf32("sc", &[0], &[]), ti64("sz", &[4], &[1, 1, 4, 4])],
    );
    let g = import(&m).unwrap();
    assert_eq!(&g.nodes[0].inputs[..3], &[g.nodes[0].inputs[0], None, None]);
    let Op::Resize(r) = &g.nodes[0].op else { panic!() };
    assert_eq!((r.coord, r.nearest), (crate::ir::CoordTransform::AlignCorners, crate::ir::NearestMode::Floor));
    // axes: scales expanded to every axis
    let m = model(
        18,
        vec![node("Resize", &["x", "", "sc"], &["y"], vec![ais("axes", &[3, 2])])],
        vec![fin("x", &[1, 1, 2, 2])],
        &["y"],
        vec![tf32("sc", &[2], &[3.0, 2.0])],
    );
    let g = import(&m).unwrap();
    assert_eq!(g.nodes[0].op, Op::ScatterElements { axis: 0, reduction: None });
    assert_eq!(const_input(&g, 0, 0).to_f64_vec(), vec![1.0; 4]);
    assert_eq!(const_input(&g, 0, 1).to_i64_vec(), vec![3, 2]);
    assert_eq!(g.nodes[1].inputs[2], Some(g.nodes[0].outputs[0]));
    let e = one(18, "Resize", &[1, 1, 2, 2], vec![ai("antialias", 1)]).unwrap_err();
    assert!(matches!(e, Error::Unsupported(ref m) if m.contains("antialias")), "{e}");

    let g = one(7, "Upsample", &[1, 1, 2, 2], vec![afs("scales", &[1.0, 1.0, 2.0, 2.0])]).unwrap();
    assert_eq!(const_input(&g, 0, 2).to_f64_vec(), vec![1.0, 1.0, 2.0, 2.0]);

    let m = model(13, vec![node("Dropout", &["x"], &["y", "mask"], vec![])], vec![fin("x", &[2, 2])], &["y", "mask"], vec![]);
    let g = import(&m).unwrap();
    assert_eq!(g.nodes.len(), 3);
    assert_eq!(g.nodes[0].op, Op::Identity);
    assert!(matches!(&g.nodes[2].op, Op::ConstantOfShape { value } if value.to_f64_vec() == vec![1.0] && value.dtype() == DType::Bool));
    let m = model(
        13,
        vec![node("Dropout", &["x", "", "t"], &["y"], vec![])],
        vec![fin("x", &[2])],
        &["y"],
        vec![TensorProto { data_type: Some(dt::BOOL), int32_data: vec![1], name: Some("t".into()), ..Default::default() }],
    );
    assert!(matches!(import(&m), Err(Error::Unsupported(m)) if m.contains("training_mode")));
}

#[test]
fn constants_initializers_and_inputs() {
    let mut t = tf32("", &[2], &[1.0, 2.0]);
    t.name = None;
    let m = model(
        13,
        vec![
            node("Constant", &[], &["c"], vec![at_("value", t)]),
            node("Constant", &[], &["k"], vec![ais("value_ints", &[3, 4])]),
            node("Constant", &[], &["f"], vec![af("value_float", 0.5)]),
            node("Add", &["x", "c"], &["y"], vec![]),
        ],
        // "w" is both an input and an initializer: a constant
        vec![fin("x", &[2]), fin("w", &[2])],
        &["y", "k", "f", "w"],
        vec![tf32("w", &[2], &[3.0, 4.0])],
    );
    let g = import(&m).unwrap();
    assert_eq!(g.inputs.len(), 1);
    assert_eq!(g.nodes.len(), 1);
    let out = |i: usize| g.constant(g.outputs[i]).unwrap().clone();
    assert_eq!(out(1), Tensor::from_i64(vec![2], vec![3, 4]));
    assert_eq!(out(2), Tensor::scalar(0.5f32));
    assert_eq!(out(3), Tensor::from_f32(vec![2], vec![3.0, 4.0]));
    assert_eq!(g.constant(g.nodes[0].inputs[1].unwrap()).unwrap().as_f32().unwrap(), &[1.0, 2.0]);

    let m = model(13, vec![node("Constant", &[], &["s"], vec![astr("value_string", "hi")])], vec![], &["s"], vec![]);
    assert!(matches!(import(&m), Err(Error::Unsupported(m)) if m.contains("value_string")));
}

#[test]
fn input_shapes_from_dims_options_and_notes() {
    let m = model(
        13,
        vec![node("Relu", &["x"], &["y"], vec![])],
        vec![vi("x", dt::FLOAT, Some(vec![D::P("N"), D::V(3), D::U, D::V(-1)]))],
        &["y"],
        vec![],
    );
    let bytes = m.encode_to_vec();
    let (g, notes) = import_unchecked(&bytes, &ImportOptions::default()).unwrap();
    assert_eq!(g.value(g.inputs[0]).shape, vec![1, 3, 1, 1]);
    assert_eq!(notes.len(), 3, "{notes:?}");
    assert!(notes[0].contains("'N'") && notes[0].contains("--dim N=SIZE"), "{notes:?}");
    assert!(notes[1].contains("dim 2") && notes[1].contains("--input-shape x="), "{notes:?}");

    let mut opts = ImportOptions::default();
    opts.dims.insert("N".into(), 8);
    opts.dims.insert("unused".into(), 2);
    let (g, notes) = import_unchecked(&bytes, &opts).unwrap();
    assert_eq!(g.value(g.inputs[0]).shape, vec![8, 3, 1, 1]);
    assert!(notes.iter().any(|n| n.contains("--dim unused")), "{notes:?}");

    let mut opts = ImportOptions::default();
    opts.input_shapes.insert("x".into(), vec![2, 3, 4, 5]);
    let (g, notes) = import_unchecked(&bytes, &opts).unwrap();
    assert_eq!((g.value(g.inputs[0]).shape.clone(), notes.len()), (vec![2, 3, 4, 5], 0));
    opts.input_shapes.insert("x".into(), vec![2, 3]);
    let e = import_unchecked(&bytes, &opts).unwrap_err();
    assert!(matches!(e, Error::InputMismatch(ref m) if m.contains("rank 2")), "{e}");
    let mut opts = ImportOptions::default();
    opts.input_shapes.insert("nope".into(), vec![1]);
    assert!(import_unchecked(&bytes, &opts).unwrap_err().to_string().contains("'nope'"));

    let m = model(13, vec![node("Relu", &["x"], &["y"], vec![])], vec![vi("x", dt::STRING, Some(vec![]))], &["y"], vec![]);
    assert!(matches!(import(&m), Err(Error::Unsupported(m)) if m.contains("input 'x'") && m.contains("STRING")));
}

#[test]
fn sorts_nodes_and_reports_graph_errors() {
    let m =
        model(13, vec![node("Relu", &["h"], &["y"], vec![]), node("Neg", &["x"], &["h"], vec![])], vec![fin("x", &[2])], &["y"], vec![]);
    assert_eq!(ops(&import(&m).unwrap()), vec![Op::Unary(UnaryOp::Neg), Op::Unary(UnaryOp::Relu)]);
    let cyc = model(13, vec![node("Relu", &["h"], &["y"], vec![]), node("Neg", &["y"], &["h"], vec![])], vec![], &["y"], vec![]);
    assert!(import(&cyc).unwrap_err().to_string().contains("cycle"));
    let missing = model(13, vec![node("Relu", &["nope"], &["y"], vec![])], vec![], &["y"], vec![]);
    assert!(import(&missing).unwrap_err().to_string().contains("'nope'"));
    let twice =
        model(13, vec![node("Relu", &["x"], &["y"], vec![]), node("Neg", &["x"], &["y"], vec![])], vec![fin("x", &[1])], &["y"], vec![]);
    assert!(import(&twice).unwrap_err().to_string().contains("more than one"));

    // unknown op / domain / attribute / attribute type
    let e = one(13, "Frobnicate", &[1], vec![]).unwrap_err();
    assert_eq!(e.to_string(), "unsupported: op 'Frobnicate' (node 'Frobnicate_node', domain '', opset 13) is not supported");
    let mut m = model(13, vec![node("Relu", &["x"], &["y"], vec![])], vec![fin("x", &[1])], &["y"], vec![]);
    m.graph.as_mut().unwrap().node[0].domain = Some("com.microsoft".into());
    assert!(import(&m).unwrap_err().to_string().contains("domain 'com.microsoft'"));
    let e = one(13, "Relu", &[1], vec![ai("alpha", 1)]).unwrap_err();
    assert!(matches!(e, Error::Unsupported(ref m) if m.contains("'alpha'") && m.contains("Relu_node")), "{e}");
    let e = one(13, "LeakyRelu", &[1], vec![ai("alpha", 1)]).unwrap_err();
    assert!(matches!(e, Error::InvalidModel(ref m) if m.contains("'alpha'") && m.contains("must be a float")), "{e}");
    let mut sub = attr("then_branch", at::GRAPH);
    sub.g = Some(GraphProto::default());
    let e = one(13, "If", &[1], vec![sub]).unwrap_err();
    assert!(matches!(e, Error::Unsupported(ref m) if m.contains("'If'") && m.contains("subgraph")), "{e}");
    assert!(matches!(one(12, "Einsum", &[1], vec![astr("equation", "i->i")]), Err(Error::Unsupported(_))));

    // an empty output name still gets a value
    let m = model(13, vec![node("TopK", &["x", "k"], &["", "i"], vec![])], vec![fin("x", &[4])], &["i"], vec![ti64("k", &[1], &[2])]);
    let g = import(&m).unwrap();
    assert_eq!(g.nodes[0].outputs.len(), 2);
    assert_eq!(g.outputs[0], g.nodes[0].outputs[1]);
}

#[test]
fn inlines_model_local_functions() {
    // function Scaled(x) -> y: y = LeakyRelu<alpha = @a>(x) + x
    let mut alpha = af("alpha", 0.0);
    alpha.ref_attr_name = Some("a".into());
    alpha.r#type = Some(at::FLOAT);
    alpha.f = None;
    let f = FunctionProto {
        name: Some("Scaled".into()),
        domain: Some("local".into()),
        input: vec!["x".into()],
        output: vec!["y".into()],
        attribute: vec!["a".into()],
        node: vec![node("LeakyRelu", &["x"], &["t"], vec![alpha]), node("Add", &["t", "x"], &["y"], vec![])],
        opset_import: vec![OperatorSetIdProto { domain: Some(String::new()), version: Some(14) }],
        ..Default::default()
    };
    let mut call = node("Scaled", &["in"], &["out"], vec![af("a", 0.25)]);
    call.domain = Some("local".into());
    let mut m = model(14, vec![call.clone(), node("Neg", &["out"], &["z"], vec![])], vec![fin("in", &[2])], &["z"], vec![]);
    m.functions = vec![f];
    m.opset_import.push(OperatorSetIdProto { domain: Some("local".into()), version: Some(1) });
    let g = import(&m).unwrap();
    assert_eq!(ops(&g), vec![Op::Unary(UnaryOp::LeakyRelu { alpha: 0.25 }), Op::Binary(BinaryOp::Add, None), Op::Unary(UnaryOp::Neg)]);
    assert_eq!(g.nodes[1].inputs[1], Some(g.inputs[0]));

    // a function that calls itself, and calls that multiply at every level, are errors, not hangs
    let mut rec = FunctionProto {
        name: Some("F".into()),
        domain: Some("local".into()),
        input: vec!["x".into()],
        output: vec!["y".into()],
        ..Default::default()
    };
    let mut inner = node("F", &["x"], &["y"], vec![]);
    inner.domain = Some("local".into());
    rec.node = vec![inner.clone(); 40];
    let mut call = node("F", &["in"], &["out"], vec![]);
    call.domain = Some("local".into());
    let mut m = model(14, vec![call], vec![fin("in", &[2])], &["out"], vec![]);
    m.functions = vec![rec];
    assert!(import(&m).is_err());
}

#[test]
fn rejects_garbage_without_panicking() {
    assert!(matches!(super::load_bytes(&[], None, &ImportOptions::default()), Err(Error::InvalidModel(_))));
    assert!(super::load_bytes(b"not a model at all", None, &ImportOptions::default()).is_err());
    // a model whose graph is missing
    let m = ModelProto { ir_version: Some(8), ..Default::default() };
    assert!(super::load_bytes(&m.encode_to_vec(), None, &ImportOptions::default()).unwrap_err().to_string().contains("no graph"));
    // every prefix of a small model, and pseudo-random bytes
    let m = model(
        13,
        vec![node("Conv", &["x", "w"], &["y"], vec![ais("kernel_shape", &[1, 1])])],
        vec![fin("x", &[1, 1, 2, 2])],
        &["y"],
        vec![tf32("w", &[1, 1, 1, 1], &[2.0])],
    );
    let bytes = m.encode_to_vec();
    for len in 0..bytes.len() {
        let _ = import_unchecked(&bytes[..len], &ImportOptions::default());
        let _ = super::load_bytes(&bytes[..len], None, &ImportOptions::default());
    }
    let mut state = 0x2545_f491_4f6c_dd1du64;
    for _ in 0..2000 {
        let len = (state % 300) as usize;
        let buf: Vec<u8> = (0..len)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                state as u8
            })
            .collect();
        let _ = super::load_bytes(&buf, None, &ImportOptions::default());
    }
}

#[test]
fn decomposes_ops_without_a_core_op() {
    let names = |g: &Graph| g.nodes.iter().map(|n| n.op.name()).collect::<Vec<_>>().join(",");
    assert_eq!(names(&one(24, "Swish", &[2], vec![]).unwrap()), "Sigmoid,Mul");
    assert_eq!(names(&one(24, "Swish", &[2], vec![af("alpha", 2.0)]).unwrap()), "Mul,Sigmoid,Mul");
    assert_eq!(names(&one(9, "Shrink", &[2], vec![af("lambd", 1.0)]).unwrap()), "Less,Greater,Add,Sub,Where,Where");
    let g = one(13, "MeanVarianceNormalization", &[1, 2, 3, 4], vec![]).unwrap();
    assert_eq!(names(&g), "Reduce,Mul,Mul,Reduce,Sub,Sqrt,Sub,Add,Div");
    assert!(matches!(&g.nodes[0].op, Op::Reduce { axes: Some(a), keepdims: true, .. } if a == &vec![0, 2, 3]));
    let m = model(
        23,
        vec![node("RMSNormalization", &["x", "s"], &["y"], vec![ai("axis", 1)])],
        vec![vi("x", dt::FLOAT16, Some(vec![D::V(2), D::V(3), D::V(4)]))],
        &["y"],
        vec![tf32("s", &[3, 4], &[1.0; 12])],
    );
    let g = import(&m).unwrap();
    assert_eq!(names(&g), "Cast,Mul,Reduce,Add,Sqrt,Reciprocal,Mul,Cast,Mul");
    assert!(matches!(&g.nodes[2].op, Op::Reduce { axes: Some(a), .. } if a == &vec![1, 2]));
    let g = one(28, "SpaceToDepth", &[1, 2, 4, 6], vec![ai("blocksize", 2), astr("mode", "CRD")]).unwrap();
    assert_eq!(names(&g), "Reshape,Transpose,Reshape");
    assert_eq!(const_input(&g, 2, 1).to_i64_vec(), vec![1, 8, 2, 3]);
    assert_eq!(ops(&one(28, "SpaceToDepth", &[1, 2, 4, 6], vec![ai("blocksize", 2)]).unwrap()), vec![Op::SpaceToDepth { blocksize: 2 }]);
    let g = one(2, "GlobalLpPool", &[1, 2, 5, 7], vec![ai("p", 1)]).unwrap();
    assert!(matches!(&g.nodes[0].op, Op::LpPool(p, 1) if p.kernel_shape == vec![5, 7]));

    // GroupNormalization-18 per-group scale/bias become per-channel
    let m = model(
        18,
        vec![node("GroupNormalization", &["x", "s", "b"], &["y"], vec![ai("num_groups", 2)])],
        vec![fin("x", &[1, 4, 3])],
        &["y"],
        vec![tf32("s", &[2], &[1.0, 2.0]), tf32("b", &[2], &[3.0, 4.0])],
    );
    let g = import(&m).unwrap();
    assert_eq!(const_input(&g, 0, 1).to_f64_vec(), vec![1.0, 1.0, 2.0, 2.0]);
    assert_eq!(const_input(&g, 0, 2).to_f64_vec(), vec![3.0, 3.0, 4.0, 4.0]);

    // QLinearConv: dequantize, Conv, quantize; the int32 bias is scaled by x_scale * w_scale
    let u8t = |name: &str, dims: &[i64], v: &[i32]| TensorProto {
        name: Some(name.into()),
        dims: dims.to_vec(),
        data_type: Some(dt::UINT8),
        int32_data: v.to_vec(),
        ..Default::default()
    };
    let m = model(
        10,
        vec![node("QLinearConv", &["x", "xs", "xz", "w", "ws", "wz", "ys", "yz", "b"], &["y"], vec![])],
        vec![vi("x", dt::UINT8, Some(vec![D::V(1), D::V(1), D::V(3), D::V(3)]))],
        &["y"],
        vec![
            tf32("xs", &[], &[0.5]),
            u8t("xz", &[], &[1]),
            u8t("w", &[2, 1, 1, 1], &[3, 4]),
            tf32("ws", &[2], &[0.1, 0.2]),
            u8t("wz", &[2], &[0, 0]),
            tf32("ys", &[], &[0.25]),
            u8t("yz", &[], &[5]),
            TensorProto { name: Some("b".into()), dims: vec![2], data_type: Some(dt::INT32), int32_data: vec![7, 8], ..Default::default() },
        ],
    );
    let g = import(&m).unwrap();
    // (without inference the multiplier's type is unknown, hence the Cast to f32 after Div)
    assert_eq!(names(&g), "Cast,Cast,Sub,Cast,Cast,Unsqueeze,Sub,Cast,Conv,Unsqueeze,Mul,Div,Cast,Mul,QuantizeLinear");
    assert_eq!(g.nodes[5].op, Op::Unsqueeze { axes: Some(vec![1, 2, 3]) });
    assert_eq!(g.nodes[9].op, Op::Unsqueeze { axes: Some(vec![1, 2]) });
    assert_eq!(g.nodes[14].op, Op::QuantizeLinear { axis: 0, to: DType::U8, rounding: Default::default() });

    // DequantizeLinear output_dtype adds a Cast; QuantizeLinear takes the zero point's type
    let m = model(
        23,
        vec![node("DequantizeLinear", &["x", "s"], &["y"], vec![ai("output_dtype", dt::FLOAT16 as i64)])],
        vec![vi("x", dt::INT8, Some(vec![D::V(2)]))],
        &["y"],
        vec![tf32("s", &[], &[0.5])],
    );
    assert_eq!(names(&import(&m).unwrap()), "DequantizeLinear,Cast");
    let m = model(
        13,
        vec![node("QuantizeLinear", &["x", "s", "z"], &["y"], vec![])],
        vec![fin("x", &[2])],
        &["y"],
        vec![
            tf32("s", &[], &[0.5]),
            TensorProto { name: Some("z".into()), data_type: Some(dt::INT8), int32_data: vec![-1], ..Default::default() },
        ],
    );
    assert_eq!(ops(&import(&m).unwrap()), vec![Op::QuantizeLinear { axis: 0, to: DType::I8, rounding: Default::default() }]);
}

#[test]
fn full_import_of_a_graph_without_ops() {
    // Needs no kernel: constants (one unused, dropped) and a passthrough input.
    let m = model(
        13,
        vec![
            node("Constant", &[], &["c"], vec![ais("value_ints", &[1, 2])]),
            node("Constant", &[], &["unused"], vec![af("value_float", 1.0)]),
        ],
        vec![fin("x", &[2]), vi("n", dt::INT64, Some(vec![D::P("batch")]))],
        &["x", "c", "w"],
        vec![tf32("w", &[1], &[5.0])],
    );
    let mut opts = ImportOptions::default();
    opts.dims.insert("batch".into(), 3);
    let (g, notes) = super::load_bytes_with_notes(&m.encode_to_vec(), None, &opts).unwrap();
    assert!(notes.is_empty(), "{notes:?}");
    assert_eq!(g.values.len(), 4);
    assert_eq!(g.inputs.len(), 2);
    assert_eq!(g.value(g.inputs[1]).shape, vec![3]);
    assert_eq!(g.outputs[0], g.inputs[0]);
    assert_eq!(g.constant(g.outputs[1]).unwrap().to_i64_vec(), vec![1, 2]);
}

#[test]
fn resolves_negative_axes_of_values_only_known_at_run_time() {
    // NonZero's output shape depends on the data, but its rank (2) does not; later ops keep track of it.
    let m = model(
        13,
        vec![
            node("NonZero", &["x"], &["nz"], vec![]),
            node("Cast", &["nz"], &["f"], vec![ai("to", dt::FLOAT as i64)]),
            node("Unsqueeze", &["f", "ax"], &["u"], vec![]),
            node("Concat", &["u", "u"], &["c"], vec![ai("axis", -1)]),
            node("Softmax", &["c"], &["y"], vec![]),
            node("ReduceSum", &["y"], &["s"], vec![ai("keepdims", 0)]),
        ],
        vec![fin("x", &[2, 3])],
        &["y", "s"],
        vec![ti64("ax", &[1], &[0])],
    );
    let g = super::load_bytes(&m.encode_to_vec(), None, &ImportOptions::default()).unwrap();
    let find = |name: &str| g.nodes.iter().find(|n| n.op.name() == name).map(|n| n.op.clone()).unwrap();
    assert_eq!(find("Concat"), Op::Concat { axis: 2 });
    assert_eq!(find("Softmax"), Op::Softmax { axis: 2 });
    assert!(g.value(g.outputs[0]).dynamic);
}

#[test]
fn every_listed_op_is_mapped() {
    for &op in super::SUPPORTED_OPS {
        let m = model(
            23,
            vec![node(op, &["a", "b", "c"], &["y"], vec![])],
            vec![fin("a", &[1, 2, 4, 4]), fin("b", &[1, 2, 4, 4]), fin("c", &[1, 2, 4, 4])],
            &["y"],
            vec![],
        );
        // attributes or inputs may be missing, but the op itself must be known
        if let Err(e) = import(&m) {
            assert!(!e.to_string().starts_with(&format!("unsupported: op '{op}'")), "{op}: {e}");
        }
    }
}

/// Imports `m` fully and runs it on `inputs`.
fn run(m: &ModelProto, inputs: &[Tensor]) -> Vec<Tensor> {
    let g = super::load_bytes(&m.encode_to_vec(), None, &ImportOptions::default()).unwrap();
    crate::runtime::Session::new(g).unwrap().run(inputs).unwrap()
}

fn close(a: &Tensor, b: &[f32]) -> bool {
    let a = a.to_f64_vec();
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| (x - *y as f64).abs() < 1e-5)
}

#[test]
fn old_opset_semantics_give_the_old_results() {
    // Softmax-11 axis=1 on [1, 2, 2]: one softmax over all four values (coerced to 2-D), not per column
    let x = Tensor::from_f32(vec![1, 2, 2], vec![0.0, 1.0, 2.0, 3.0]);
    let m = model(11, vec![node("Softmax", &["x"], &["y"], vec![ai("axis", 1)])], vec![fin("x", &[1, 2, 2])], &["y"], vec![]);
    let e: Vec<f32> = [0.0f32, 1.0, 2.0, 3.0].iter().map(|v| v.exp()).collect();
    let sum: f32 = e.iter().sum();
    let y = &run(&m, std::slice::from_ref(&x))[0];
    assert_eq!(y.shape, vec![1, 2, 2]);
    assert!(close(y, &e.iter().map(|v| v / sum).collect::<Vec<_>>()), "{y:?}");

    // Add-6 broadcast=1 axis=1: B [2] is aligned with dim 1 of A [1, 2, 2]
    let m = model(
        6,
        vec![node("Add", &["x", "b"], &["y"], vec![ai("broadcast", 1), ai("axis", 1)])],
        vec![fin("x", &[1, 2, 2])],
        &["y"],
        vec![tf32("b", &[2], &[10.0, 20.0])],
    );
    assert!(close(&run(&m, std::slice::from_ref(&x))[0], &[10.0, 11.0, 22.0, 23.0]));

    // Upsample-7 nearest [1, 1, 1, 2] by (1, 1, 2, 2): each value repeated in a 2x2 block
    let m = model(
        7,
        vec![node("Upsample", &["x"], &["y"], vec![afs("scales", &[1.0, 1.0, 2.0, 2.0])])],
        vec![fin("x", &[1, 1, 1, 2])],
        &["y"],
        vec![],
    );
    let y = &run(&m, &[Tensor::from_f32(vec![1, 1, 1, 2], vec![1.0, 2.0])])[0];
    assert_eq!(y.shape, vec![1, 1, 2, 4]);
    assert!(close(y, &[1.0, 1.0, 2.0, 2.0, 1.0, 1.0, 2.0, 2.0]));

    // Clip-6 with only min: max defaults to the largest float
    let m = model(6, vec![node("Clip", &["x"], &["y"], vec![af("min", 1.5)])], vec![fin("x", &[1, 2, 2])], &["y"], vec![]);
    assert!(close(&run(&m, std::slice::from_ref(&x))[0], &[1.5, 1.5, 2.0, 3.0]));

    // Slice-1 attributes; Pad-2 pads/value attributes
    let m = model(
        1,
        vec![node("Slice", &["x"], &["y"], vec![ais("starts", &[1]), ais("ends", &[2]), ais("axes", &[2])])],
        vec![fin("x", &[1, 2, 2])],
        &["y"],
        vec![],
    );
    assert!(close(&run(&m, std::slice::from_ref(&x))[0], &[1.0, 3.0]));
    let m = model(
        2,
        vec![node("Pad", &["x"], &["y"], vec![ais("pads", &[0, 0, 1, 0, 0, 0]), af("value", 9.0)])],
        vec![fin("x", &[1, 2, 2])],
        &["y"],
        vec![],
    );
    assert!(close(&run(&m, &[x])[0], &[9.0, 0.0, 1.0, 9.0, 2.0, 3.0]));
}

/// Imports the models in `TPU_SDK_ONNX_DEV` (comma-separated files, or a folder of `<case>/model.onnx`)
/// without inference and prints what they map to: a development aid, a no-op without the variable.
#[test]
fn dev_unchecked_file() {
    let Ok(p) = std::env::var("TPU_SDK_ONNX_DEV") else { return };
    let mut files: Vec<String> = p.split(',').map(String::from).collect();
    if std::path::Path::new(&p).is_dir() {
        files = std::fs::read_dir(&p).unwrap().flatten().map(|e| e.path().join("model.onnx").display().to_string()).collect();
        files.sort();
    }
    for p in &files {
        let Ok(bytes) = std::fs::read(p) else { continue };
        match import_unchecked(&bytes, &ImportOptions::default()) {
            Ok((g, notes)) => {
                let mut counts = std::collections::BTreeMap::new();
                for n in &g.nodes {
                    *counts.entry(n.op.name()).or_insert(0) += 1;
                }
                eprintln!("OK {p}: {} nodes {counts:?} notes {notes:?}", g.nodes.len());
            }
            Err(e) => eprintln!("ERR {p}: {e}"),
        }
    }
}
