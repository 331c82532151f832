//! The target abstraction: a backend that turns a graph into something runnable.
//!
//! Core defines the trait and implements it for the CPU ([`crate::runtime::CpuTarget`]); the Cloud TPU and
//! Edge TPU crates implement it for their hardware. Core never knows which targets exist.

use crate::ir::{Graph, Tensor};
use crate::Result;

/// A compiled model that can be run repeatedly.
pub trait Executable: Send {
    /// Runs on `inputs` (graph input order) and returns outputs in graph output order.
    fn run(&mut self, inputs: &[Tensor]) -> Result<Vec<Tensor>>;
}

/// A backend.
pub trait Target: Send + Sync {
    /// Short name used on the command line (`cpu`, `cloud-tpu`, `edgetpu`).
    fn name(&self) -> &str;
    /// Prepares `graph` for execution on this target.
    fn prepare(&self, graph: Graph) -> Result<Box<dyn Executable>>;
}
