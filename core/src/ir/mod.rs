//! The target-agnostic core IR: dtypes, tensors, ops, graphs, shape inference and verification.

mod dtype;
mod graph;
pub mod ops;
mod tensor;
pub mod infer;
pub mod verify;
pub mod display;
pub mod builder;

pub use dtype::DType;
pub use graph::{Graph, Node, NodeId, QuantParams, Value, ValueId};
pub use ops::{
    Activation, AutoPad, BinaryOp, ConvAttrs, ConvTransposeAttrs, CoordTransform, NearestMode, Op, PadMode, PoolAttrs, QuantRounding,
    ReduceOp, ResizeAttrs, ResizeMode, UnaryOp,
};
pub use infer::{ConstEval, NoFold};
pub use tensor::{Element, Tensor, TensorData};
