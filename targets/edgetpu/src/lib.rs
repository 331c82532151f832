//! # tpu-sdk-edgetpu
//!
//! The Coral Edge TPU target (issue 3):
//!
//! * [`rules`]: the Edge TPU rules analyzer — per op of a TFLite model, TPU or CPU and why, from Coral's
//!   published constraints (no compiler needed);
//! * [`compiler`]: the `edgetpu_compiler` driver — finds and runs the compiler, parses its report;
//! * [`report`]: the mapping report both produce (text table and JSON);
//! * [`export`]: f32 and int8 (quantized by `tpu_sdk_core::quant`) core graphs (NCHW) to TFLite flatbuffers
//!   (NHWC, schema v3, per-axis quantization, signature defs, `min_runtime_version` metadata);
//! * [`pipeline`]: `compile --target edgetpu`: calibrate, quantize, export, predict the mapping, run
//!   `edgetpu_compiler` when installed, and measure the int8 model's error against the float model;
//! * [`TfliteTarget`]: `compile --target tflite`: the float model as a TFLite file LiteRT runs on any CPU (for
//!   machines without an Edge TPU, and models with an op that has no int8 form).
//!
//! * [`devices`]: Coral USB accelerators and PCIe/M.2 cards on this machine, with what to fix when one
//!   cannot be used;
//! * [`deploy`]: uploading models (and the runtime binary) over SSH, atomically, with rollback;
//! * [`runtime`]: running compiled models through the system's TFLite C library and libedgetpu.
//!
//! The TFLite flatbuffer reader/writer lives in `tpu_sdk_core::format::tflite`, the import into the core IR in
//! `tpu_sdk_core::import::tflite`.
#![warn(missing_docs)]

pub mod compiler;
pub mod deploy;
pub mod devices;
pub mod export;
pub mod pipeline;
pub mod report;
pub mod rules;
pub mod runtime;
mod target;
mod tflite_target;

pub use target::EdgeTpuTarget;
pub use tflite_target::TfliteTarget;
pub use report::{MappingReport, OpMapping, OpSummary, Placement, ReportSource};
