//! TFLite import of what TensorFlow's converter emits, against LiteRT: the models of `tests/data/converter/`
//! (written by `tests/data/make_converter_fixtures.py` with TensorFlow 2.21: one per op family — SHAPE,
//! PACK/UNPACK, SPLIT/SPLIT_V, FILL/BROADCAST_TO/ZEROS_LIKE, TRANSPOSE_CONV, GATHER_ND, SELECT/SELECT_V2,
//! ONE_HOT, CUMSUM, L2_NORMALIZATION/LOCAL_RESPONSE_NORMALIZATION, REVERSE_V2, SCATTER_ND,
//! SPACE_TO_BATCH_ND/BATCH_TO_SPACE_ND, RANGE/FLOOR_DIV/FLOOR_MOD/NOT_EQUAL/LOGICAL_*, ADD_N/ROUND/SIGN/TOPK_V2
//! — a Keras transformer block and a U-Net, each also with fp16 weights, and one with int8 kernels between
//! QUANTIZE and DEQUANTIZE) are imported, run by the CPU runtime (as imported, and optimized) on seeded
//! random inputs, and compared with LiteRT's builtin kernels (`tpu_sdk_test_support::litert`) run on the same
//! file and inputs.
//!
//! The bar is mediapipe.rs's: each float output may differ from LiteRT's builtin kernels by at most
//! `max(1e-4 · max|output|, 4 · max|builtin − reference|, 1e-6)` (LiteRT's reference kernels, where they run
//! the model, give LiteRT's own spread); integer outputs must be equal.
//!
//! Every input keeps a free batch dimension in the file (signature -1, shape 1), so the `tf.shape` subgraphs
//! survive conversion: the importer must fold them to constants (no Shape node is left once optimized).

use std::path::PathBuf;

use tpu_sdk_core::import::tflite::{load, ImportOptions};
use tpu_sdk_core::ir::{DType, Graph, Op, Tensor};
use tpu_sdk_core::passes;
use tpu_sdk_core::runtime::Session;
use tpu_sdk_test_support::{litert, oracle, random_inputs};

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/converter").join(format!("{name}.tflite"))
}

fn max_abs_diff(a: &Tensor, b: &Tensor) -> f64 {
    a.to_f64_vec().iter().zip(b.to_f64_vec()).map(|(x, y)| (x - y).abs()).fold(0.0, f64::max)
}

fn ops(g: &Graph) -> Vec<String> {
    g.nodes.iter().map(|n| n.op.name()).collect()
}

/// Imports fixture `name`, runs it as imported and optimized, and compares both with LiteRT; returns the
/// optimized graph and LiteRT's outputs.
fn check(name: &str) -> Option<(Graph, Vec<Tensor>)> {
    let py = oracle::python()?;
    let path = fixture(name);
    let g = load(&path, &ImportOptions::default()).unwrap_or_else(|e| panic!("{name}: {e}"));
    let inputs = random_inputs(&g, 0x5EED + name.len() as u64);
    let sets = std::slice::from_ref(&inputs);
    let builtin = litert::run_file(&py, &path, litert::OPTIMIZED, sets).unwrap_or_else(|e| panic!("LiteRT on {name}: {e}")).remove(0);
    // The reference kernels lack some op versions: then the spread is taken as 0.
    let reference = litert::run_file(&py, &path, litert::REFERENCE, sets).ok().map(|mut r| r.remove(0));
    let mut optimized = g.clone();
    passes::optimize(&mut optimized).unwrap_or_else(|e| panic!("{name}: optimize: {e}"));
    let mut worst = 0f64;
    for (label, graph) in [("as imported", &g), ("optimized", &optimized)] {
        let ours = Session::new(graph.clone()).and_then(|mut s| s.run(&inputs)).unwrap_or_else(|e| panic!("{name} ({label}): {e}"));
        assert_eq!(ours.len(), builtin.len(), "{name} ({label}): output count");
        for (k, (o, b)) in ours.iter().zip(&builtin).enumerate() {
            assert_eq!(o.shape, b.shape, "{name} ({label}) output {k}: shape");
            assert_eq!(o.dtype(), b.dtype(), "{name} ({label}) output {k}: dtype");
            if !o.dtype().is_float() {
                assert_eq!(o.to_i64_vec(), b.to_i64_vec(), "{name} ({label}) output {k}");
                continue;
            }
            let scale = b.to_f64_vec().iter().fold(0f64, |m, v| m.max(v.abs()));
            let spread = reference.as_ref().map_or(0.0, |r| max_abs_diff(b, &r[k]));
            let tol = (1e-4 * scale).max(4.0 * spread).max(1e-6);
            let err = max_abs_diff(o, b);
            assert!(
                err <= tol,
                "{name} ({label}) output {k}: max |ours - LiteRT| = {err:.3e} > {tol:.3e} (max |output| {scale:.3e}, builtin vs reference {spread:.3e})"
            );
            worst = worst.max(err / scale.max(1e-30));
        }
    }
    println!("{name}: {} outputs, max |ours - LiteRT| / max|output| = {worst:.2e}; optimized: {:?}", builtin.len(), ops(&optimized));
    Some((optimized, builtin))
}

/// Checks fixture `name` and that its shape subgraphs folded away.
fn check_folded(name: &str) {
    if let Some((g, _)) = check(name) {
        let left: Vec<String> = ops(&g).into_iter().filter(|o| o == "Shape" || o == "ConstantOfShape").collect();
        assert!(left.is_empty(), "{name}: shape subgraphs did not fold: {left:?}");
    }
}

/// Imports fixture `name` with its free batch set to `batch` (ImportOptions::input_shapes), runs the batch,
/// and compares each sample with LiteRT run on it alone (the file's batch of 1): the shape subgraphs must fold
/// with the given batch, not the file's.
fn check_batch(name: &str, batch: usize) {
    let Some(py) = oracle::python() else { return };
    let path = fixture(name);
    let g1 = load(&path, &ImportOptions::default()).unwrap_or_else(|e| panic!("{name}: {e}"));
    let mut opts = ImportOptions::default();
    for &v in &g1.inputs {
        let mut shape = g1.value(v).shape.clone();
        shape[0] = batch;
        opts.input_shapes.insert(g1.value(v).name.clone(), shape);
    }
    let mut g = load(&path, &opts).unwrap_or_else(|e| panic!("{name} (batch {batch}): {e}"));
    passes::optimize(&mut g).unwrap_or_else(|e| panic!("{name}: optimize: {e}"));
    assert!(!ops(&g).iter().any(|o| o == "Shape"), "{name} (batch {batch}): shape subgraphs did not fold: {:?}", ops(&g));
    let inputs = random_inputs(&g, 0xBA7C + batch as u64);
    // Sample b of a [batch, ...] tensor as a [1, ...] tensor.
    let sample = |t: &Tensor, b: usize| {
        let n = t.len() / batch;
        let mut shape = t.shape.clone();
        shape[0] = 1;
        Tensor::from_f32(shape, t.to_f64_vec()[b * n..(b + 1) * n].iter().map(|&v| v as f32).collect())
    };
    let sets: Vec<Vec<Tensor>> = (0..batch).map(|b| inputs.iter().map(|t| sample(t, b)).collect()).collect();
    let theirs = litert::run_file(&py, &path, litert::OPTIMIZED, &sets).unwrap_or_else(|e| panic!("LiteRT on {name}: {e}"));
    let ours = Session::new(g).and_then(|mut s| s.run(&inputs)).unwrap_or_else(|e| panic!("{name} (batch {batch}): {e}"));
    for (k, o) in ours.iter().enumerate() {
        assert_eq!(o.shape[0], batch, "{name} output {k}: shape {:?}", o.shape);
        for (b, set) in theirs.iter().enumerate() {
            let (mine, want) = (sample(o, b), &set[k]);
            assert_eq!(mine.shape, want.shape, "{name} output {k} sample {b}");
            let scale = want.to_f64_vec().iter().fold(0f64, |m, v| m.max(v.abs()));
            let err = max_abs_diff(&mine, want);
            assert!(err <= (1e-4 * scale).max(1e-6), "{name} output {k} sample {b}: max |ours - LiteRT| = {err:.3e} (max |output| {scale:.3e})");
        }
    }
}

#[test]
fn a_free_batch_set_at_import_folds_the_shape_subgraphs_with_it() {
    for name in ["shape_reshape", "transformer", "unet"] {
        check_batch(name, 3);
    }
}

#[test]
fn shape_strided_slice_pack_reshape_folds_and_matches_litert() {
    check_folded("shape_reshape");
}

#[test]
fn pack_unpack_match_litert() {
    check("pack_unpack");
}

#[test]
fn split_and_split_v_match_litert() {
    check("split");
}

#[test]
fn fill_broadcast_to_zeros_like_match_litert() {
    check_folded("fill_broadcast");
    check_folded("zeros_like");
}

#[test]
fn transpose_conv_same_valid_and_kernel_below_stride_match_litert() {
    if let Some((g, _)) = check("transpose_conv") {
        assert_eq!(g.nodes.iter().filter(|n| matches!(n.op, Op::ConvTranspose(_))).count(), 4, "{:?}", ops(&g));
    }
}

#[test]
fn quantize_split_dequantize_chain_is_bit_exact_with_litert() {
    // Int8 kernels with float I/O: QUANTIZE → SPLIT/SPLIT_V/MUL/ADD/SUM/CONCATENATION on int8 → DEQUANTIZE.
    if let Some((g, litert)) = check("split_int8") {
        let inputs = random_inputs(&g, 0x5EED + "split_int8".len() as u64);
        let ours = Session::new(g).and_then(|mut s| s.run(&inputs)).unwrap();
        for (k, (o, t)) in ours.iter().zip(&litert).enumerate() {
            assert_eq!(o.as_f32().unwrap(), t.as_f32().unwrap(), "split_int8 output {k}");
        }
    }
}

#[test]
fn gather_nd_and_scatter_nd_match_litert() {
    check("gather_nd");
    check("scatter_nd");
}

#[test]
fn select_and_select_v2_match_litert() {
    check("select");
}

#[test]
fn one_hot_with_negative_indices_matches_litert() {
    if let Some((_, litert)) = check("one_hot") {
        // Index -1 (argmax 0, minus 1) gives an all-off row in TensorFlow (the IR's OneHot would count it from
        // the back): the inputs must contain one for this to test that.
        let rows = litert[0].to_f64_vec();
        assert!(rows.chunks(6).any(|r| r.iter().all(|&v| v == -0.5)), "no all-off row in {rows:?}");
    }
}

#[test]
fn cumsum_matches_litert() {
    check("cumsum");
}

#[test]
fn l2_and_local_response_normalization_match_litert() {
    check("norms");
}

#[test]
fn reverse_v2_matches_litert() {
    check("reverse");
}

#[test]
fn space_to_batch_and_batch_to_space_match_litert() {
    check("space_batch");
}

#[test]
fn range_floor_div_floor_mod_not_equal_and_logic_match_litert() {
    check_folded("shape_math");
}

#[test]
fn add_n_round_sign_and_top_k_match_litert() {
    check("misc_math");
}

#[test]
fn keras_transformer_block_with_dynamic_reshape_matches_litert() {
    check_folded("transformer");
}

#[test]
fn keras_transformer_block_with_fp16_weights_matches_litert() {
    check_folded("transformer_f16");
}

#[test]
fn keras_unet_matches_litert() {
    check_folded("unet");
}

#[test]
fn keras_unet_with_fp16_weights_matches_litert() {
    // The fp16 weights' DEQUANTIZE folds into f32 constants: no Dequantize or Cast survives the import.
    let g = load(fixture("unet_f16"), &ImportOptions::default()).unwrap();
    let dequantized = |op: &Op| matches!(op, Op::DequantizeLinear { .. } | Op::Cast { to: DType::F32 });
    assert!(!g.nodes.iter().any(|n| dequantized(&n.op)), "{:?}", ops(&g));
    check_folded("unet_f16");
}
