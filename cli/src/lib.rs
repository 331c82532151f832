//! The `tpu-sdk` library facade: re-exports the core crate; the targets follow behind cargo features.

pub use tpu_sdk_core as core;
