//! The `edgetpu` target: [`Target`] for Coral Edge TPUs. `compile` quantizes and exports (see
//! [`crate::compile`]); `devices` lists Coral devices; `prepare` runs on one.

use std::path::{Path, PathBuf};

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

    /// The devices libedgetpu can open (`usb:N`, `pci:N` as `--device` names them): the runtime's own list,
    /// which is what running needs (it loads the USB firmware of boot-mode devices itself).
    fn runnable_devices(&self) -> Result<Vec<String>> {
        let libs = crate::runtime::Libraries::from_env()?;
        Ok(crate::runtime::device_names(&libs.edgetpu.list_devices()))
    }

    /// A compiled Edge TPU model (`edgetpu-custom-op` inside) runs as it is: its interface is read from the file.
    fn interface_of(&self, model_file: &Path) -> Result<Option<Graph>> {
        if !model_file.extension().is_some_and(|e| e.eq_ignore_ascii_case("tflite")) {
            return Ok(None);
        }
        let bytes = std::fs::read(model_file).map_err(|e| tpu_sdk_core::Error::Io { path: model_file.display().to_string(), source: e })?;
        if !crate::runtime::is_compiled_for_edgetpu(&bytes)? {
            return Ok(None);
        }
        crate::runtime::signature(&bytes).map(Some)
    }

    fn compile(&self, graph: Graph, opts: &CompileOptions) -> Result<CompileOutput> {
        crate::pipeline::compile(graph, opts)
    }
}
