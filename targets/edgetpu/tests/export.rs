//! TFLite export of f32 graphs: exported models re-import and run like the originals, and (with a Python
//! that has `ai-edge-litert`, named by `TPU_SDK_PYTHON`) LiteRT runs them to the same outputs.

use std::path::{Path, PathBuf};

use tpu_sdk_core::format::tflite::schema;
use tpu_sdk_core::import::tflite::{load, load_bytes, ImportOptions};
use tpu_sdk_core::ir::{Graph, Tensor};
use tpu_sdk_core::runtime::Session;
use tpu_sdk_core::{npy, passes};
use tpu_sdk_edgetpu::export::{export, ExportOptions};
use tpu_sdk_test_support::litert;

fn data(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data").join(name)
}

fn rel_err(a: &Tensor, b: &Tensor) -> f64 {
    assert_eq!(a.shape, b.shape, "shapes differ");
    a.to_f64_vec().iter().zip(b.to_f64_vec()).map(|(x, y)| (x - y).abs() / (1.0 + y.abs())).fold(0.0, f64::max)
}

fn run(g: Graph, inputs: &[Tensor]) -> Vec<Tensor> {
    Session::new(g).unwrap().run(inputs).unwrap()
}

/// The exported model's op names.
fn ops_of(bytes: &[u8]) -> Vec<String> {
    let m = schema::parse_model(bytes).unwrap();
    let codes = m.operator_codes().unwrap();
    m.subgraphs().unwrap().get(0).operators().unwrap().iter().map(|o| codes.get(o.opcode_index() as usize).name()).collect()
}

/// Runs `model` in LiteRT's reference kernels; `None` (after a note) when no oracle Python is configured.
fn litert(model: &[u8], inputs: &[Tensor]) -> Option<Vec<Tensor>> {
    litert::run(model, litert::REFERENCE, &[inputs.to_vec()]).map(|mut sets| sets.remove(0))
}

/// Imports a TF-made fixture, exports it, and checks the export against LiteRT's recorded outputs, both
/// re-imported on our CPU runtime and (when configured) run by LiteRT itself.
fn roundtrip(name: &str) -> Vec<String> {
    let mut g = load(data(&format!("{name}.tflite")), &ImportOptions::default()).unwrap();
    passes::optimize(&mut g).unwrap();
    let inputs: Vec<Tensor> = (0..g.inputs.len()).map(|k| npy::read(&data(&format!("{name}.input_{k}.npy"))).unwrap()).collect();
    let want: Vec<Tensor> = (0..g.outputs.len()).map(|k| npy::read(&data(&format!("{name}.output_{k}.npy"))).unwrap()).collect();
    let ex = export(&g, &ExportOptions::default()).unwrap();
    // The graph already has TFLite's layout: inputs stay as they are.
    for (i, e) in g.inputs.iter().zip(&ex.inputs) {
        assert_eq!(e.shape, g.value(*i).shape);
    }
    let back = load_bytes(&ex.bytes, &ImportOptions::default()).unwrap();
    for (k, (o, w)) in run(back, &inputs).iter().zip(&want).enumerate() {
        let e = rel_err(o, w);
        assert!(e < 1e-4, "{name}: re-imported export, output {k} differs from LiteRT by {e:e}");
    }
    if let Some(outs) = litert(&ex.bytes, &inputs) {
        for (k, (o, w)) in outs.iter().zip(&want).enumerate() {
            let e = rel_err(o, w);
            assert!(e < 1e-4, "{name}: LiteRT on the export, output {k} differs by {e:e}");
        }
    }
    ops_of(&ex.bytes)
}

#[test]
fn a_converted_convnet_exports_without_layout_transposes() {
    let ops = roundtrip("convnet_f32");
    assert!(!ops.contains(&"TRANSPOSE".to_string()), "{ops:?}");
    assert_eq!(ops.iter().filter(|o| *o == "CONV_2D").count(), 3, "{ops:?}");
    assert!(ops.contains(&"DEPTHWISE_CONV_2D".to_string()) && ops.contains(&"FULLY_CONNECTED".to_string()), "{ops:?}");
}

#[test]
fn the_op_zoo_round_trips() {
    roundtrip("opsnet_f32");
}

#[test]
fn an_onnx_mobilenet_exports_with_an_nhwc_input() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/models/text_direction_cls.onnx");
    let mut io = tpu_sdk_core::import::onnx::ImportOptions::default();
    io.input_shapes.insert("x".into(), vec![1, 3, 48, 192]);
    let mut g = tpu_sdk_core::import::onnx::load(&path, &io).unwrap();
    passes::optimize(&mut g).unwrap();
    let ex = export(&g, &ExportOptions::default()).unwrap();
    assert_eq!(ex.inputs[0].shape, vec![1, 48, 192, 3]);
    assert_eq!(ex.inputs[0].perm, vec![0, 2, 3, 1]);
    let ops = ops_of(&ex.bytes);
    assert!(!ops.iter().any(|o| o == "TRANSPOSE"), "{ops:?}");

    let n = 3 * 48 * 192;
    let x = Tensor::from_f32(vec![1, 3, 48, 192], (0..n).map(|i| ((i * 7919 % 1000) as f32 / 500.0) - 1.0).collect());
    let want = run(g, std::slice::from_ref(&x));
    let x_nhwc = x.permuted(&[0, 2, 3, 1]);
    let back = load_bytes(&ex.bytes, &ImportOptions::default()).unwrap();
    let got = run(back, std::slice::from_ref(&x_nhwc));
    let e = rel_err(&got[0], &want[0]);
    assert!(e < 1e-4, "re-imported export differs by {e:e}");
    if let Some(outs) = litert(&ex.bytes, &[x_nhwc]) {
        let e = rel_err(&outs[0], &want[0]);
        assert!(e < 1e-4, "LiteRT on the export differs from the CPU runtime by {e:e}");
    }
}

#[test]
fn unsupported_ops_are_named() {
    let mut g = Graph::new("t");
    let x = g.add_input("x", tpu_sdk_core::ir::DType::F32, vec![2, 3]);
    let y = g.add_value("y", tpu_sdk_core::ir::DType::F32, vec![2, 3]);
    g.add_node("cum", tpu_sdk_core::ir::Op::Unary(tpu_sdk_core::ir::UnaryOp::Erf), vec![Some(x)], vec![y]);
    g.outputs.push(y);
    let e = export(&g, &ExportOptions::default()).unwrap_err().to_string();
    assert!(e.contains("'cum'") && e.contains("Erf"), "{e}");
}
