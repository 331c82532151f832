//! Post-training full-integer quantization (TFLite int8 scheme).
//!
//! [`prepare`] rewrites the few float ops int8 has no kernel for into equivalent ones; [`calibrate`] runs the float graph on sample inputs and records every float activation's range (and a
//! histogram for the `percentile`/`mse` [`RangeMethod`]s); [`quantize`] turns the float graph into an int8
//! graph following the TFLite int8 specification ([`params`]); [`compare`] measures how far the int8
//! model's outputs are from the float model's (SQNR, max abs error).

pub mod calibrate;
pub mod compare;
mod decompose;
pub use decompose::MAX_UNROLLED_GRU_STEPS;
mod lstm;
pub mod params;
pub mod prepare;
pub mod quantize;
pub mod range;
pub mod unroll;

pub use calibrate::{calibrate, Calibration};
pub use compare::{compare, Comparison, OutputError};
pub use prepare::prepare;
pub use quantize::{quantize, QuantizeOptions};
pub use range::RangeMethod;
