//! The ONNX importer on the example model: a full import, notes about symbolic dimensions, and robustness
//! against truncated and random input (errors, never panics).

use std::path::{Path, PathBuf};

use tpu_sdk_core::import::onnx::{load, load_bytes, load_with_notes, ImportOptions};
use tpu_sdk_core::ir::DType;
use tpu_sdk_core::Error;
use tpu_sdk_test_support::Rng;

fn model_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/models/text_direction_cls.onnx")
}

fn opts() -> ImportOptions {
    let mut o = ImportOptions::default();
    o.input_shapes.insert("x".into(), vec![1, 3, 48, 192]);
    o
}

#[test]
fn imports_the_example_classifier() {
    let g = load(&model_path(), &opts()).unwrap();
    assert_eq!(g.inputs.len(), 1);
    let x = g.value(g.inputs[0]);
    assert_eq!((x.name.as_str(), x.dtype, x.shape.clone()), ("x", DType::F32, vec![1, 3, 48, 192]));
    assert_eq!(g.outputs.len(), 1);
    let y = g.value(g.outputs[0]);
    assert_eq!((y.dtype, y.shape.clone(), y.dynamic), (DType::F32, vec![1, 2], false));
    assert_eq!(g.nodes.iter().filter(|n| n.op.name() == "Conv").count(), 53);
    assert_eq!(g.nodes.iter().filter(|n| n.op.name() == "BatchNorm").count(), 35);
}

#[test]
fn notes_name_the_unset_dimensions() {
    let mut o = ImportOptions::default();
    o.input_shapes.insert("x".into(), vec![1, 3, 48]);
    let e = load(&model_path(), &o).unwrap_err();
    assert!(matches!(e, Error::InputMismatch(ref m) if m.contains("rank 3") && m.contains("rank 4")), "{e}");

    // N, H and W are symbolic ('?' and -1) and assumed 1; a 1x1 image does not fit the network's pooling
    // window, and the error says which dims were assumed.
    let e = load_with_notes(&model_path(), &ImportOptions::default()).unwrap_err().to_string();
    assert!(e.contains("input 'x' dim 2 is unknown; assumed 1") && e.contains("--input-shape x="), "{e}");
    let mut o = ImportOptions::default();
    o.input_shapes.insert("x".into(), vec![2, 3, 48, 96]);
    let (g, notes) = load_with_notes(&model_path(), &o).unwrap();
    assert!(notes.is_empty(), "{notes:?}");
    assert_eq!(g.value(g.outputs[0]).shape, vec![2, 2]);
    let e = load(Path::new("/nonexistent/model.onnx"), &o).unwrap_err();
    assert!(matches!(e, Error::Io { .. }), "{e}");
}

#[test]
fn truncated_or_random_bytes_are_errors_not_panics() {
    let bytes = std::fs::read(model_path()).unwrap();
    let o = opts();
    assert!(load_bytes(&[], None, &o).is_err());
    // Many prefixes, dense near the start (headers, first nodes) and spread over the whole file.
    let mut lengths: Vec<usize> = (0..2048.min(bytes.len())).collect();
    lengths.extend((0..bytes.len()).step_by(bytes.len() / 500 + 1));
    lengths.push(bytes.len() - 1);
    for len in lengths {
        // (a prefix that ends exactly between two top-level fields may be a valid, smaller model)
        let _ = load_bytes(&bytes[..len], None, &o);
    }
    // Random bytes, and the model with random bytes flipped.
    let mut rng = Rng::new(0x9e37_79b9_7f4a_7c15u64);
    for _ in 0..300 {
        let len = rng.below(4096) as usize;
        let buf: Vec<u8> = (0..len).map(|_| rng.byte()).collect();
        let _ = load_bytes(&buf, None, &o);
    }
    // TPU_SDK_FUZZ_ITERS raises the number of mutated models for a longer local run.
    let iters = std::env::var("TPU_SDK_FUZZ_ITERS").ok().and_then(|v| v.parse().ok()).unwrap_or(100);
    for _ in 0..iters {
        let mut m = bytes.clone();
        for _ in 0..8 {
            let i = rng.below(m.len() as u64) as usize;
            m[i] = rng.byte();
        }
        let _ = load_bytes(&m, None, &o);
    }
}

#[test]
fn structurally_mutated_models_are_errors_not_panics() {
    use prost::Message;
    use tpu_sdk_core::import::onnx::proto::ModelProto;
    let bytes = std::fs::read(model_path()).unwrap();
    let base = ModelProto::decode(bytes.as_slice()).unwrap();
    let n_nodes = base.graph.as_ref().unwrap().node.len();
    let ops = ["Conv", "Softmax", "Reshape", "Concat", "Slice", "Gather", "Resize", "Pad", "Split", "TopK", "Transpose", "MaxPool"];
    let mut rng = Rng::new(0x1234_5678_9abc_def1u64);
    let iters = std::env::var("TPU_SDK_FUZZ_ITERS").ok().and_then(|v| v.parse().ok()).unwrap_or(200);
    for _ in 0..iters {
        let mut m = base.clone();
        let g = m.graph.as_mut().unwrap();
        for _ in 0..1 + rng.below(3) {
            // mostly the nodes that are not Constants (the model has 308 Constants)
            let mut k = rng.below(n_nodes as u64) as usize;
            for _ in 0..4 {
                if g.node[k].op_type.as_deref() != Some("Constant") {
                    break;
                }
                k = rng.below(n_nodes as u64) as usize;
            }
            let node = &mut g.node[k];
            let interesting = [-1i64, 0, 1, 2, 3, -7, 1 << 40, i64::MIN, i64::MAX];
            match rng.below(6) {
                0 => node.op_type = Some(ops[rng.below(ops.len() as u64) as usize].to_string()),
                1 => {
                    let k = rng.below(node.attribute.len().max(1) as u64) as usize;
                    if let Some(a) = node.attribute.get_mut(k) {
                        a.i = Some(interesting[rng.below(interesting.len() as u64) as usize]);
                        for v in a.ints.iter_mut() {
                            *v = interesting[rng.below(interesting.len() as u64) as usize];
                        }
                    }
                }
                2 => {
                    if !node.input.is_empty() {
                        let k = rng.below(node.input.len() as u64) as usize;
                        node.input[k] = String::new();
                    }
                }
                3 => node.input.push(node.output.first().cloned().unwrap_or_default()),
                4 => {
                    if let Some(t) = node.attribute.iter_mut().find_map(|a| a.t.as_mut()) {
                        t.dims = vec![interesting[rng.below(interesting.len() as u64) as usize]];
                    }
                }
                _ => node.output.push(format!("extra{}", rng.below(3))),
            }
        }
        let _ = load_bytes(&m.encode_to_vec(), None, &opts());
    }
}
