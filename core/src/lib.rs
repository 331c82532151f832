//! # tpu-sdk-core
//!
//! The target-agnostic centre of tpu-sdk: the typed dataflow [`ir`], model importers ([`import`]), the model
//! file [`format`]s that importers, exporters and passes share, optimisation [`passes`], int8 [`quant`]ization,
//! `.npy` I/O ([`npy`]) and the reference CPU [`runtime`], which is the default target and the numerical oracle
//! for every other target. Targets implement [`target::Target`].
#![warn(missing_docs)]

pub mod error;
pub mod format;
pub mod import;
pub mod ir;
pub mod limits;
pub mod npy;
pub mod passes;
pub mod quant;
pub mod runtime;
pub mod stream;
pub mod wav;
pub mod target;

pub use error::{Error, Result};
