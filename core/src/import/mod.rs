//! Model importers: files in other formats into the core [`crate::ir::Graph`].

pub mod onnx;
pub mod tflite;
