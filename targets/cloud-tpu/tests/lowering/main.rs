//! Every lowered op family run through XLA (the CPU PJRT plugin) and compared with the ONNX reference
//! implementation (`onnx.reference`, run by `$TPU_SDK_PYTHON`) on the same inputs.
//!
//! Each case is one ONNX node: the Python side builds and evaluates it; the Rust side builds the equivalent
//! core-IR node (output types taken from the reference result), lowers it, compiles and runs it.//!
//! This file holds the harness (`Cases`: the reference side and the lowered side of each case); the tests are
//! grouped by op family: `nn` (convolutions, matrix products, pooling, normalizations, resize), `elementwise`
//! (binary, unary, variadic ops and reductions), `data` (shape, gather/scatter and the remaining ops) and
//! `errors` (what the lowering refuses, and constants of every dtype).

#[path = "../common/mod.rs"]
mod common;

mod data;
mod elementwise;
mod errors;
mod nn;

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
    let (strides, dilations, pads) = (vec![], vec![], vec![]);
    PoolAttrs { kernel_shape: k.to_vec(), strides, dilations, pads, auto_pad: AutoPad::NotSet, ceil_mode: false, count_include_pad: false }
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

fn xi(shape: &[usize], v: &[i64]) -> In {
    In::X(Tensor::from_i64(shape.to_vec(), v.to_vec()))
}

