//! Fuzz target `tflite_import`: see `harness::tflite_import`.
#![no_main]
use libfuzzer_sys::fuzz_target;

#[path = "harness.rs"]
mod harness;

fuzz_target!(|data: &[u8]| harness::tflite_import(data));
