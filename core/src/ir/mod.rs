//! The target-agnostic core IR: dtypes, tensors, ops, graphs, shape inference and verification.

mod dtype;
mod graph;
mod op;
mod tensor;
pub mod infer;
pub mod verify;
pub mod display;
pub mod builder;

pub use dtype::DType;
pub use graph::{Graph, Node, NodeId, QuantParams, Value, ValueId};
pub use op::*;
pub use tensor::{Element, Tensor, TensorData};
