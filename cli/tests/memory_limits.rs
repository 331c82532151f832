//! Memory bombs: small model files that ask for terabytes. Each must end with exit code 3 and a message naming
//! the node, the shape and the size, on the CPU (`run`), cloud-tpu (`compile` to StableHLO) and the Edge TPU
//! (`compile`): never an abort from the allocator, never the OOM killer. The models are built here in Rust
//! (ONNX through the importer's prost messages, TFLite through the flatbuffer builder).

use std::path::{Path, PathBuf};
use std::process::Output;

use prost::Message;
use tpu_sdk::core::format::tflite::builder::{BufferT, ModelT, OperatorCodeT, OperatorT, SubGraphT, TensorT};
use tpu_sdk::core::import::onnx::proto::{
    data_type as dt, tensor_shape_proto::{dimension::Value as Dim, Dimension}, type_proto, GraphProto, ModelProto, NodeProto,
    OperatorSetIdProto, TensorProto, TensorShapeProto, TypeProto, ValueInfoProto,
};
use tpu_sdk::core::npy;
use tpu_sdk::{DType, Tensor};
use tpu_sdk_test_support::cli::{self, expect};

fn tpu_sdk(args: &[&str]) -> Output {
    cli::run(env!("CARGO_BIN_EXE_tpu-sdk"), args)
}

fn vi(name: &str, elem: i32, dims: &[i64]) -> ValueInfoProto {
    ValueInfoProto {
        name: Some(name.into()),
        r#type: Some(TypeProto {
            value: Some(type_proto::Value::TensorType(type_proto::Tensor {
                elem_type: Some(elem),
                shape: Some(TensorShapeProto {
                    dim: dims.iter().map(|&d| Dimension { value: Some(Dim::DimValue(d)), denotation: None }).collect(),
                }),
            })),
            denotation: None,
        }),
        ..Default::default()
    }
}

fn node(op: &str, ins: &[&str], outs: &[&str]) -> NodeProto {
    NodeProto {
        op_type: Some(op.into()),
        name: Some(format!("{op}_node")),
        input: ins.iter().map(|s| s.to_string()).collect(),
        output: outs.iter().map(|s| s.to_string()).collect(),
        ..Default::default()
    }
}

fn i64s(name: &str, v: &[i64]) -> TensorProto {
    TensorProto { name: Some(name.into()), dims: vec![v.len() as i64], data_type: Some(dt::INT64), int64_data: v.to_vec(), ..Default::default() }
}

fn f32s(name: &str, dims: &[i64], v: &[f32]) -> TensorProto {
    TensorProto { name: Some(name.into()), dims: dims.to_vec(), data_type: Some(dt::FLOAT), float_data: v.to_vec(), ..Default::default() }
}

/// A model with float input `x` of `x_dims`, extra graph inputs, the nodes, initializers, and output `y`.
fn onnx(dir: &Path, name: &str, x_dims: &[i64], extra_inputs: Vec<ValueInfoProto>, nodes: Vec<NodeProto>, inits: Vec<TensorProto>) -> PathBuf {
    let mut inputs = vec![vi("x", dt::FLOAT, x_dims)];
    inputs.extend(extra_inputs);
    let m = ModelProto {
        ir_version: Some(8),
        opset_import: vec![OperatorSetIdProto { domain: Some(String::new()), version: Some(17) }],
        graph: Some(GraphProto {
            name: Some(name.into()),
            node: nodes,
            initializer: inits,
            input: inputs,
            output: vec![ValueInfoProto { name: Some("y".into()), ..Default::default() }],
            ..Default::default()
        }),
        ..Default::default()
    };
    let p = dir.join(format!("{name}.onnx"));
    std::fs::write(&p, m.encode_to_vec()).unwrap();
    p
}

fn save(dir: &Path, name: &str, t: &Tensor) -> String {
    let p = dir.join(name);
    npy::write(&p, t).unwrap();
    p.to_str().unwrap().to_string()
}

/// Exit 3 with a resource-limit message that names `what` and a size.
fn refused(o: Output, what: &str, case: &str) {
    let (_, err) = expect(o, 3);
    assert!(err.contains("resource limit") && err.contains(what) && err.contains("memory budget"), "{case}: {err}");
    assert!(!err.contains("panicked"), "{case}: {err}");
}

/// The bombs whose sizes are known when the model is loaded.
fn static_bombs(dir: &Path) -> Vec<(&'static str, PathBuf, &'static str)> {
    vec![
        (
            "ConstantOfShape [100000, 100000, 100]",
            onnx(dir, "cos", &[1], vec![], vec![node("ConstantOfShape", &["s"], &["c"]), node("Add", &["x", "c"], &["y"])], vec![i64s("s", &[100_000, 100_000, 100])]),
            "f32[100000, 100000, 100]",
        ),
        ("Expand to [2^40]", onnx(dir, "expand", &[1], vec![], vec![node("Expand", &["x", "s"], &["y"])], vec![i64s("s", &[1 << 40])]), "(Expand)"),
        ("Tile by 2^36", onnx(dir, "tile", &[1], vec![], vec![node("Tile", &["x", "r"], &["y"])], vec![i64s("r", &[1 << 36])]), "(Tile)"),
        (
            "Range 0..1e12",
            onnx(
                dir,
                "range",
                &[1],
                vec![],
                vec![node("Range", &["a", "b", "d"], &["r"]), node("Add", &["x", "r"], &["y"])],
                vec![f32s("a", &[], &[0.0]), f32s("b", &[], &[1e12]), f32s("d", &[], &[1.0])],
            ),
            "(Range)",
        ),
        (
            "Resize by 1e5",
            onnx(
                dir,
                "resize",
                &[1, 1, 4, 4],
                vec![],
                vec![node("Resize", &["x", "", "sc"], &["y"])],
                vec![f32s("sc", &[4], &[1.0, 1.0, 1e5, 1e5])],
            ),
            "(Resize)",
        ),
        (
            "Expand to a shape overflowing 64 bits",
            onnx(dir, "overflow", &[1], vec![], vec![node("Expand", &["x", "s"], &["y"])], vec![i64s("s", &[1 << 40, 1 << 40])]),
            "more than 2^64 bytes",
        ),
        (
            "Expand to Concat(Shape(x), [1e6, 1e6])",
            onnx(
                dir,
                "concat_shape",
                &[2, 3],
                vec![],
                vec![
                    node("Shape", &["x"], &["sx"]),
                    NodeProto { attribute: vec![axis0()], ..node("Concat", &["sx", "big"], &["s"]) },
                    node("Reshape", &["x", "r4"], &["x4"]),
                    node("Expand", &["x4", "s"], &["y"]),
                ],
                vec![i64s("big", &[1_000_000, 1_000_000]), i64s("r4", &[2, 3, 1, 1])],
            ),
            "(Expand)",
        ),
    ]
}

fn axis0() -> tpu_sdk::core::import::onnx::proto::AttributeProto {
    use tpu_sdk::core::import::onnx::proto::{attr_type, AttributeProto};
    AttributeProto { name: Some("axis".into()), r#type: Some(attr_type::INT), i: Some(0), ..Default::default() }
}

#[test]
fn static_memory_bombs_are_refused_on_every_target() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let x1 = save(d, "x1.npy", &Tensor::from_f32(vec![1], vec![1.0]));
    let x4 = save(d, "x4.npy", &Tensor::from_f32(vec![1, 1, 4, 4], vec![1.0; 16]));
    let x23 = save(d, "x23.npy", &Tensor::from_f32(vec![2, 3], vec![1.0; 6]));
    let cal1 = save(d, "cal1.npy", &Tensor::from_f32(vec![2, 1], vec![1.0, 2.0]));
    for (case, model, what) in static_bombs(d) {
        let m = model.to_str().unwrap();
        let x = match model.file_stem().unwrap().to_str().unwrap() {
            "resize" => &x4,
            "concat_shape" => &x23,
            _ => &x1,
        };
        refused(tpu_sdk(&["run", m, "--input", x]), what, &format!("{case}: run"));
        let mlir = d.join("m.mlir");
        refused(tpu_sdk(&["compile", m, "--target", "cloud-tpu", "-o", mlir.to_str().unwrap()]), what, &format!("{case}: cloud-tpu compile"));
        assert!(!mlir.exists(), "{case}: a refused compile leaves no file");
        if x == &x1 {
            let q = d.join("m.tflite");
            refused(
                tpu_sdk(&["compile", m, "--target", "edgetpu", "--calibration", &cal1, "-o", q.to_str().unwrap()]),
                what,
                &format!("{case}: edgetpu compile"),
            );
            assert!(!q.exists(), "{case}: a refused compile leaves no file");
        }
    }
}

#[test]
fn shapes_read_from_inputs_are_checked_before_the_kernel_runs() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    // ConstantOfShape and Expand of a shape the caller passes at run time
    let m = onnx(
        d,
        "dyn",
        &[1],
        vec![vi("s", dt::INT64, &[3])],
        vec![node("ConstantOfShape", &["s"], &["c"]), node("Add", &["x", "c"], &["y"])],
        vec![],
    );
    let x = save(d, "x.npy", &Tensor::from_f32(vec![1], vec![1.0]));
    let big = save(d, "big.npy", &Tensor::from_i64(vec![3], vec![100_000, 100_000, 100]));
    refused(tpu_sdk(&["run", m.to_str().unwrap(), "--input", &x, "--input", &big]), "(ConstantOfShape)", "run-time shape");
    // a small shape still runs
    let small = save(d, "small.npy", &Tensor::from_i64(vec![3], vec![2, 1, 1]));
    let out = d.join("out");
    expect(tpu_sdk(&["run", m.to_str().unwrap(), "--input", &x, "--input", &small, "--output-dir", out.to_str().unwrap()]), 0);
    let y = npy::read(&out.join("output_0.npy")).unwrap();
    assert_eq!(y.shape, vec![2, 1, 1]);
    assert_eq!(y.dtype(), DType::F32);
}

#[test]
fn max_memory_and_its_environment_variable_set_the_budget() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    // 1 MiB of activations: fine by default, refused under a 512 KiB budget
    let m = onnx(d, "mib", &[1], vec![], vec![node("Expand", &["x", "s"], &["y"])], vec![i64s("s", &[1 << 18])]);
    let x = save(d, "x.npy", &Tensor::from_f32(vec![1], vec![1.0]));
    let m = m.to_str().unwrap();
    expect(tpu_sdk(&["run", m, "--input", &x, "--output-dir", d.join("o").to_str().unwrap()]), 0);
    let (_, err) = expect(tpu_sdk(&["run", m, "--input", &x, "--max-memory", "512K"]), 3);
    assert!(err.contains("1.0 MB") && err.contains("512.0 KB") && err.contains("set by --max-memory"), "{err}");
    let o = cli::command(env!("CARGO_BIN_EXE_tpu-sdk")).args(["run", m, "--input", &x]).env("TPU_SDK_MAX_MEMORY", "100K").output().unwrap();
    let (_, err) = expect(o, 3);
    assert!(err.contains("set by TPU_SDK_MAX_MEMORY"), "{err}");
    let (_, err) = expect(tpu_sdk(&["run", m, "--input", &x, "--max-memory", "lots"]), 2);
    assert!(err.contains("not a size"), "{err}");
}

/// A TFLite model whose activation claims 2^31·2^31 floats (its file is a few hundred bytes); with
/// `constant`, the RELU reads a constant of that shape backed by 4 bytes of data instead.
fn tflite_bomb(constant: bool) -> Vec<u8> {
    let t = |name: &str, shape: Vec<i32>, buffer: u32| TensorT { shape, type_: 0, buffer, name: name.into(), ..Default::default() };
    let huge = vec![i32::MAX, i32::MAX];
    let m = ModelT {
        version: 3,
        operator_codes: vec![OperatorCodeT::builtin(19, 1)], // RELU
        subgraphs: vec![SubGraphT {
            tensors: vec![t("x", huge.clone(), 0), t("y", huge.clone(), 0), t("w", huge, 1)],
            inputs: vec![0],
            outputs: vec![1],
            operators: vec![OperatorT { opcode_index: 0, inputs: vec![if constant { 2 } else { 0 }], outputs: vec![1], ..Default::default() }],
            name: Some("main".into()),
        }],
        buffers: vec![BufferT::default(), BufferT { data: vec![0; 4] }],
        ..Default::default()
    };
    m.to_bytes()
}

#[test]
fn a_tflite_tensor_claiming_exabytes_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let p = tmp.path().join("bomb.tflite");
    std::fs::write(&p, tflite_bomb(false)).unwrap();
    let p = p.to_str().unwrap();
    // inspect reads shapes and allocates nothing: it works
    expect(tpu_sdk(&["inspect", p]), 0);
    // the session plans its buffers before it looks at inputs: no input needs to be (or could be) made
    let x = save(tmp.path(), "x.npy", &Tensor::from_f32(vec![1], vec![1.0]));
    refused(tpu_sdk(&["run", p, "--input", &x]), "f32[2147483647, 2147483647] needs 16.0 EB", "tflite run");
    let mlir = tmp.path().join("m.mlir");
    refused(tpu_sdk(&["compile", p, "--target", "cloud-tpu", "-o", mlir.to_str().unwrap()]), "(Relu)", "tflite cloud-tpu");
    let (_, err) = expect(tpu_sdk(&["bench", p]), 3);
    assert!(err.contains("resource limit"), "bench allocates its own inputs: {err}");
    // a constant whose shape claims exabytes and whose data is 4 bytes: a malformed model
    let c = tmp.path().join("const.tflite");
    std::fs::write(&c, tflite_bomb(true)).unwrap();
    let (_, err) = expect(tpu_sdk(&["inspect", c.to_str().unwrap()]), 3);
    assert!(err.contains("tensor 'w'") && err.contains("has 4 bytes of data"), "{err}");
}

#[test]
fn an_initializer_whose_dims_claim_more_than_its_data_is_a_malformed_model() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    // dims [1e6, 1e6] (4 TB of floats) with one value; and dims whose product overflows 64 bits
    for (name, dims) in [("short", vec![1_000_000i64, 1_000_000]), ("overflow", vec![1 << 40, 1 << 40])] {
        let m = onnx(d, name, &[1], vec![], vec![node("Add", &["x", "w"], &["y"])], vec![f32s("w", &dims, &[1.0])]);
        for args in [vec!["inspect", m.to_str().unwrap()], vec!["compile", m.to_str().unwrap(), "--target", "cloud-tpu", "-o", "/dev/null/x.mlir"]] {
            let (_, err) = expect(tpu_sdk(&args), 3);
            assert!(err.contains("initializer 'w'") && !err.contains("panicked"), "{name}: {err}");
        }
    }
}
