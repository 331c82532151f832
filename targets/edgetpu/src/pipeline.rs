//! The Edge TPU compile pipeline: calibrate and quantize a float graph to int8, export it as a TFLite model,
//! check it against the Edge TPU's rules, and run `edgetpu_compiler` when it is installed.

use tpu_sdk_core::ir::Graph;
use tpu_sdk_core::target::{CompileOptions, CompileOutput};
use tpu_sdk_core::{Error, Result};

/// Compiles `graph` for the Edge TPU (see the module docs).
pub fn compile(graph: Graph, opts: &CompileOptions) -> Result<CompileOutput> {
    let _ = (graph, opts);
    Err(Error::Unsupported("compiling for the Edge TPU is not implemented yet".into()))
}
