//! Executables that keep part of their state where the target computes — device memory of an accelerator —
//! between calls: a generation's key/value cache goes from one decode step to the next without a copy to the
//! host. Links pair an output with the input it feeds on the next call (`present.0.key` → `past_key_values.0.key`).

use std::any::Any;

use crate::ir::{DType, Tensor};
use crate::Result;

/// An output that becomes an input of the next call: `(output index, input index)` in graph order.
pub type ResidentLink = (usize, usize);

/// The resident values of a [`ResidentExecutable`] moved out of it, to be put into another executable of the same
/// target (a decode program after the prefill program). What it holds is the target's own (device buffers).
pub struct ResidentState(pub Box<dyn Any + Send>);

impl std::fmt::Debug for ResidentState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ResidentState(..)")
    }
}

/// Host ↔ target traffic of a [`ResidentExecutable`] so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Transfers {
    /// Tensors copied to the target, and their bytes.
    pub uploads: u64,
    /// Bytes copied to the target.
    pub upload_bytes: u64,
    /// Tensors copied to the host, and their bytes.
    pub downloads: u64,
    /// Bytes copied to the host.
    pub download_bytes: u64,
    /// Of the downloads, those of resident values ([`ResidentExecutable::state_to_host`]).
    pub state_downloads: u64,
}

/// A compiled model whose linked outputs stay on the target and feed the linked inputs of the next call.
pub trait ResidentExecutable: Send {
    /// Runs on the inputs that are not resident (graph input order, linked inputs left out) and returns the
    /// outputs that are not resident (graph output order, linked outputs left out). The linked outputs replace
    /// the resident values.
    fn run(&mut self, inputs: &[Tensor]) -> Result<Vec<Tensor>>;

    /// Sets the resident values from the host (one tensor per link, in link order).
    fn set_state(&mut self, state: &[Tensor]) -> Result<()>;

    /// Copies the resident values to the host (link order).
    fn state_to_host(&mut self) -> Result<Vec<Tensor>>;

    /// Moves the resident values out, leaving none.
    fn take_state(&mut self) -> Result<ResidentState>;

    /// Puts in resident values taken from another executable of the same target and shapes; an error when they
    /// come from another kind of executable.
    fn put_state(&mut self, state: ResidentState) -> Result<()>;

    /// The traffic so far.
    fn transfers(&self) -> Transfers;

    /// The dtype and shape of each resident value (link order): what [`ResidentExecutable::set_state`] takes,
    /// which may differ from the graph's (a bf16 program stores its state in bf16).
    fn state_types(&self) -> Vec<(DType, Vec<usize>)>;
}
