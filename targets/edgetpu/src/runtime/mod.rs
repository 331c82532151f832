//! Running models on an Edge TPU through the system's TFLite C library and `libedgetpu`.

use tpu_sdk_core::ir::Graph;
use tpu_sdk_core::target::Executable;
use tpu_sdk_core::{Error, Result};

/// Prepares `graph` to run on the Edge TPU `device` (`usb:0`, `pci:0`; `None`: the first one).
pub fn prepare(graph: Graph, device: Option<&str>) -> Result<Box<dyn Executable>> {
    let _ = (graph, device);
    Err(Error::Unsupported("running on an Edge TPU device is not implemented yet".into()))
}
