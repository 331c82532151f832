//! TFLite import against LiteRT: models made by TensorFlow's converter (f32, f16 weights, int8) are imported
//! into the core IR, run on the CPU runtime and compared with LiteRT's outputs (reference kernels),
//! recorded next to the models by `scripts/make_tflite_fixtures.py`.

use std::path::PathBuf;

use tpu_sdk_core::import::tflite::{load, ImportOptions};
use tpu_sdk_core::ir::Tensor;
use tpu_sdk_core::runtime::Session;
use tpu_sdk_core::{npy, passes};

fn data(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data").join(name)
}

/// Max |a - b| / (1 + |b|) over all elements.
fn rel_err(a: &Tensor, b: &Tensor) -> f64 {
    assert_eq!(a.shape, b.shape, "shapes differ");
    a.to_f64_vec().iter().zip(b.to_f64_vec()).map(|(x, y)| (x - y).abs() / (1.0 + y.abs())).fold(0.0, f64::max)
}

fn check(name: &str, optimize: bool) {
    let mut g = load(data(&format!("{name}.tflite")), &ImportOptions::default()).unwrap_or_else(|e| panic!("{name}: {e}"));
    if optimize {
        passes::optimize(&mut g).unwrap();
    }
    let n_in = g.inputs.len();
    let inputs: Vec<Tensor> = (0..n_in).map(|k| npy::read(&data(&format!("{name}.input_{k}.npy"))).unwrap()).collect();
    for (k, &i) in g.inputs.iter().enumerate() {
        assert_eq!(g.value(i).shape, inputs[k].shape, "{name}: input {k} ('{}')", g.value(i).name);
    }
    let mut s = Session::new(g).unwrap();
    let outs = s.run(&inputs).unwrap_or_else(|e| panic!("{name}: {e}"));
    for (k, o) in outs.iter().enumerate() {
        let want = npy::read(&data(&format!("{name}.output_{k}.npy"))).unwrap();
        let e = rel_err(o, &want);
        assert!(e < 1e-4, "{name} (optimize={optimize}): output {k} differs from LiteRT by {e:e}\n ours {:?}\n litert {:?}", o.to_f64_vec(), want.to_f64_vec());
    }
}

#[test]
fn f32_convnet_matches_litert() {
    check("convnet_f32", false);
    check("convnet_f32", true);
}

#[test]
fn f16_weight_convnet_matches_litert() {
    // DEQUANTIZE of f16 constants folds into f32 constants: no DEQUANTIZE survives.
    let g = load(data("convnet_f16.tflite"), &ImportOptions::default()).unwrap();
    assert!(g.nodes.iter().all(|n| !n.op.name().contains("Dequantize") && !n.op.name().contains("Cast")));
    check("convnet_f16", false);
    check("convnet_f16", true);
}

#[test]
fn f32_op_zoo_matches_litert() {
    // MUL/ADD/SUB/DIV with broadcasting, MEAN, ABS, RESIZE_BILINEAR (half-pixel), RESIZE_NEAREST_NEIGHBOR,
    // MAX_POOL_2D, STRIDED_SLICE, LOGISTIC, TANH, CONCATENATION, PAD, TRANSPOSE, GATHER, BATCH_MATMUL,
    // REDUCE_MAX, RESHAPE, FULLY_CONNECTED (keep_num_dims).
    check("opsnet_f32", false);
    check("opsnet_f32", true);
}

#[test]
fn names_come_from_the_tensors() {
    let g = load(data("opsnet_f32.tflite"), &ImportOptions::default()).unwrap();
    let names: Vec<&str> = g.inputs.iter().map(|&i| g.value(i).name.as_str()).collect();
    assert_eq!(names, ["serving_default_b:0", "serving_default_a:0"]);
    let outs: Vec<&str> = g.outputs.iter().map(|&i| g.value(i).name.as_str()).collect();
    assert_eq!(outs, ["StatefulPartitionedCall_1:1", "StatefulPartitionedCall_1:0"]);
}

#[test]
fn int8_convnet_imports_and_runs() {
    // The int8 runtime's bit-exactness against LiteRT is tested in core/tests/tflite_int8.rs; here the
    // edgetpu fixture (int8 I/O) must import and match LiteRT's reference kernels' recorded output.
    let name = "convnet_int8";
    let g = load(data(&format!("{name}.tflite")), &ImportOptions::default()).unwrap();
    let input = npy::read(&data(&format!("{name}.input_0.npy"))).unwrap();
    let out = Session::new(g).unwrap().run(&[input]).unwrap();
    let want = npy::read(&data(&format!("{name}.output_0.npy"))).unwrap();
    assert_eq!(out[0].to_i64_vec(), want.to_i64_vec());
}
