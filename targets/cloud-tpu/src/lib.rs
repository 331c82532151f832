//! # tpu-sdk-cloud-tpu
//!
//! The Cloud TPU target: lowers the core IR to StableHLO ([`lower`]), compiles and runs it through the PJRT C API
//! ([`pjrt`]) with libtpu on Cloud TPU VMs or any other PJRT plugin (for example the XLA CPU plugin) elsewhere.
//! [`CloudTpuTarget`] implements [`tpu_sdk_core::target::Target`] as `cloud-tpu`.
#![warn(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]

mod artifact;
pub mod bf16;
pub mod cache;
pub mod discover;
mod error;
pub mod lower;
pub mod pjrt;
mod resident;
pub mod shard;
mod target;
mod tensor_split;

pub use error::{Error, Result};
pub use resident::CloudTpuResident;
pub use target::{
    devices, AotArtifact, CloudTpuExecutable, CloudTpuTarget, DataParallelExecutable, PlatformInfo, ReplicatedExecutable,
    ShardedExecutable,
};
