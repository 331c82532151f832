//! The `edgetpu` target: [`Target`] for Coral Edge TPUs. `compile` quantizes and exports (see
//! [`crate::compile`]); `devices` lists Coral devices; `prepare` runs on one.

use std::path::PathBuf;

use tpu_sdk_core::ir::Graph;
use tpu_sdk_core::target::{CompileOptions, CompileOutput, DeviceInfo, Executable, Target};
use tpu_sdk_core::Result;

/// The Coral Edge TPU target (`edgetpu`).
#[derive(Clone, Debug, Default)]
pub struct EdgeTpuTarget {
    /// Which device runs models (`usb:0`, `pci:0`); `None` takes the first one found.
    pub device: Option<String>,
    /// The `.tflite` file the graph was loaded from: the Edge TPU runs the file's compiled program, which the
    /// graph does not hold (set by the CLI's `run`/`bench`).
    pub model_file: Option<PathBuf>,
    /// libedgetpu delegate options (`Performance`, `Usb.AlwaysDfu`, `Usb.MaxBulkInQueueLength`).
    pub options: Vec<(String, String)>,
}

impl Target for EdgeTpuTarget {
    fn name(&self) -> &str {
        "edgetpu"
    }

    fn prepare(&self, graph: Graph) -> Result<Box<dyn Executable>> {
        crate::runtime::prepare(graph, self.device.as_deref(), self.model_file.as_deref(), &self.options)
    }

    fn devices(&self) -> Result<Vec<DeviceInfo>> {
        crate::devices::list()
    }

    fn compile(&self, graph: Graph, opts: &CompileOptions) -> Result<CompileOutput> {
        crate::pipeline::compile(graph, opts)
    }
}
