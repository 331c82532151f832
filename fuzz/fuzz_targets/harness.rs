//! What each fuzz target does with its input, in one place: the libFuzzer targets (`fuzz_targets/*.rs`) call
//! these, and `cli/tests/fuzz_regressions.rs` replays the inputs kept in `fuzz/regressions/<target>/` through
//! the same functions on the stable toolchain. Every function must return for any input: errors are expected,
//! panics, aborts and hangs are the bugs the fuzzer looks for.
#![allow(dead_code)]

use tpu_sdk_core::ir::{DType, Graph, Tensor, TensorData};
use tpu_sdk_core::runtime::Session;

/// Budget for what one input may make the SDK allocate (libFuzzer's RSS limit is 2 GB): a model asking for
/// more must be refused with an error, as on a user's machine.
pub const BUDGET: u64 = 64 << 20;

/// Inputs larger than this many elements are not made (the run is skipped).
const MAX_INPUT: u64 = 1 << 16;

fn init() {
    tpu_sdk_core::limits::set_memory_budget(Some(BUDGET));
}

/// The bytes as a TFLite model when they carry its file identifier, else as an ONNX model.
fn import(data: &[u8]) -> Option<Graph> {
    init();
    if data.len() >= 8 && &data[4..8] == b"TFL3" {
        return tpu_sdk_core::import::tflite::load_bytes(data, &Default::default()).ok();
    }
    tpu_sdk_core::import::onnx::load_bytes(data, None, &Default::default()).ok()
}

/// ONNX protobuf decoding, import (shape inference, constant folding), verification, optimisation passes.
pub fn onnx_import(data: &[u8]) {
    init();
    if let Ok(mut g) = tpu_sdk_core::import::onnx::load_bytes(data, None, &Default::default()) {
        let _ = tpu_sdk_core::ir::verify::verify(&g);
        let _ = tpu_sdk_core::passes::optimize(&mut g);
    }
}

/// TFLite flatbuffer reading and import (sparse tensors, quantization), optimisation passes.
pub fn tflite_import(data: &[u8]) {
    init();
    if let Ok(mut g) = tpu_sdk_core::import::tflite::load_bytes(data, &Default::default()) {
        let _ = tpu_sdk_core::passes::optimize(&mut g);
    }
}

/// The `.npy` reader; a tensor it reads round-trips through the writer.
pub fn npy_read(data: &[u8]) {
    init();
    if let Ok(t) = tpu_sdk_core::npy::from_bytes(data) {
        let bytes = tpu_sdk_core::npy::to_bytes(&t).expect("a tensor that was read can be written");
        let back = tpu_sdk_core::npy::from_bytes(&bytes).expect("what the writer writes, the reader reads");
        assert_eq!(back.shape, t.shape);
        assert_eq!(back.dtype(), t.dtype());
    }
}

/// The parser of `edgetpu_compiler`'s log.
pub fn compiler_log(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let _ = tpu_sdk_edgetpu::compiler::parse_version(&text);
    let _ = tpu_sdk_edgetpu::compiler::parse_report(&text);
}

/// StableHLO emission of whatever the importers accept; true when it wrote a module.
pub fn stablehlo_lower(data: &[u8]) -> bool {
    let Some(mut g) = import(data) else { return false };
    tpu_sdk_core::passes::optimize(&mut g).is_ok() && tpu_sdk_cloud_tpu::lower::lower(&g).is_ok()
}

fn input(dtype: DType, shape: &[usize], seed: u64) -> Option<Tensor> {
    let n = tpu_sdk_core::limits::numel(shape).filter(|&n| n <= MAX_INPUT)? as usize;
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut next = move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    };
    let data = match dtype {
        DType::F32 => TensorData::F32((0..n).map(|_| (next() % 2001) as f32 / 1000.0 - 1.0).collect()),
        DType::I64 => TensorData::I64((0..n).map(|_| (next() % 4) as i64).collect()),
        DType::I32 => TensorData::I32((0..n).map(|_| (next() % 4) as i32).collect()),
        DType::I8 => TensorData::I8((0..n).map(|_| next() as i8).collect()),
        DType::U8 => TensorData::U8((0..n).map(|_| next() as u8).collect()),
        DType::Bool => TensorData::Bool((0..n).map(|_| next() % 2 == 0).collect()),
        other => TensorData::zeros(other, n),
    };
    Some(Tensor { shape: shape.to_vec(), data })
}

/// The CPU runtime on imported graphs: a `Session` run on deterministic inputs of the declared types (floats in
/// [-1, 1], integers in 0..4 so that index inputs are often valid); true when the run succeeded.
pub fn session_run(data: &[u8]) -> bool {
    let Some(mut g) = import(data) else { return false };
    if tpu_sdk_core::passes::optimize(&mut g).is_err() {
        return false;
    }
    let mut inputs = Vec::new();
    for (k, &i) in g.inputs.iter().enumerate() {
        let v = g.value(i);
        if v.dynamic {
            return false;
        }
        match input(v.dtype, &v.shape, k as u64 + data.len() as u64) {
            Some(t) => inputs.push(t),
            None => return false,
        }
    }
    Session::new(g).is_ok_and(|mut s| s.run(&inputs).is_ok())
}
