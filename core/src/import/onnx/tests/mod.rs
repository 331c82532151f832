//! Tests of the ONNX importer on models built in Rust (no Python, no fixtures). Most check the op mapping
//! before shape inference ([`super::graph::import_unchecked`]), so they do not depend on the kernels.
//!
//! `ops` checks how each op family maps, `graph` the graph-level import (constants, inputs, order, functions,
//! malformed files), `results` runs a few imported old-opset models on the CPU runtime.

mod graph;
mod ops;
mod recurrent;
mod results;
mod sequence;

use prost::Message;

use super::graph::import_unchecked;
use super::proto::{
    attr_type as at, data_type as dt,
    tensor_shape_proto::{dimension::Value as Dim, Dimension},
    type_proto, AttributeProto, FunctionProto, GraphProto, ModelProto, NodeProto, OperatorSetIdProto, TensorProto, TensorShapeProto,
    TypeProto, ValueInfoProto,
};
use super::{load_bytes, load_bytes_with_notes, ImportOptions, SUPPORTED_OPS};
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
