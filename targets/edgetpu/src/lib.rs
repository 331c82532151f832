//! # tpu-sdk-edgetpu
//!
//! The Coral Edge TPU target (issue 3). So far:
//!
//! * [`rules`]: the Edge TPU rules analyzer — per op of a TFLite model, TPU or CPU and why, from Coral's
//!   published constraints (no compiler needed);
//! * [`compiler`]: the `edgetpu_compiler` driver — finds and runs the compiler, parses its report;
//! * [`report`]: the mapping report both produce (text table and JSON);
//! * [`export`]: f32 core graphs (NCHW) to TFLite flatbuffers (NHWC).
//!
//! Reading TFLite files (schema, import into the core IR) lives in `tpu_sdk_core::import::tflite`.
//! Quantization, int8 export and running on devices come next.
#![warn(missing_docs)]

pub mod compiler;
pub mod devices;
pub mod export;
pub mod pipeline;
pub mod report;
pub mod rules;
pub mod runtime;
mod target;

pub use target::EdgeTpuTarget;
pub use report::{MappingReport, OpMapping, OpSummary, Placement, ReportSource};
