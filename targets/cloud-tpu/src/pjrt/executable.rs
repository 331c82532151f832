//! Compiled, loaded executables.

use std::sync::Arc;

use super::buffer::Buffer;
use super::client::Device;
use super::ffi::LoadedExecutableHandle;
use crate::error::Result;

/// A program compiled and loaded on a client's devices. Clones share the one PJRT executable (it is destroyed
/// with the last clone); PJRT allows concurrent executions of one executable.
#[derive(Clone)]
pub struct LoadedExecutable {
    h: Arc<LoadedExecutableHandle>,
}

impl std::fmt::Debug for LoadedExecutable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "LoadedExecutable({} outputs)", self.num_outputs())
    }
}

impl LoadedExecutable {
    pub(crate) fn new(h: LoadedExecutableHandle) -> LoadedExecutable {
        LoadedExecutable { h: Arc::new(h) }
    }

    /// Number of outputs per device.
    pub fn num_outputs(&self) -> usize {
        self.h.num_outputs()
    }

    /// The executable's name (the module name).
    pub fn name(&self) -> Result<String> {
        self.h.executable()?.name()
    }

    /// A fingerprint of the compiled program (equal for equal inputs and compiler versions), if the plugin has one.
    pub fn fingerprint(&self) -> Result<String> {
        self.h.executable()?.fingerprint()
    }

    /// Platform-specific serialization, loadable with [`super::Client::load_serialized`].
    pub fn serialize(&self) -> Result<Vec<u8>> {
        self.h.executable()?.serialize()
    }

    /// The devices the executable runs on, in (replica, partition) order of its device assignment.
    pub fn addressable_devices(&self) -> Result<Vec<Device>> {
        let client_devices = self.h.addressable_devices()?;
        client_devices.into_iter().map(Device::from_handle).collect()
    }

    /// Runs once and waits for the outputs: on the executable's (single-device) assignment when `device` is `None`,
    /// or on `device` for an executable compiled with [`super::CompileOptions::portable`].
    pub fn execute(&self, args: &[&Buffer], device: Option<&Device>) -> Result<Vec<Buffer>> {
        let list: Vec<_> = args.iter().map(|b| &b.h).collect();
        let mut outs = self.h.execute(&[list], device.map(|d| &d.h))?;
        Ok(outs.pop().unwrap_or_default().into_iter().map(Buffer::new).collect())
    }

    /// Runs on every device of the assignment at once: `args[d]` are the inputs of the d-th device (replica) and
    /// the result's `[d]` its outputs.
    pub fn execute_replicated(&self, args: &[Vec<&Buffer>]) -> Result<Vec<Vec<Buffer>>> {
        let lists: Vec<Vec<_>> = args.iter().map(|l| l.iter().map(|b| &b.h).collect()).collect();
        let outs = self.h.execute(&lists, None)?;
        Ok(outs.into_iter().map(|l| l.into_iter().map(Buffer::new).collect()).collect())
    }
}
