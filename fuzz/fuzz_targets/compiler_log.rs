//! Fuzz target `compiler_log`: see `harness::compiler_log`.
#![no_main]
use libfuzzer_sys::fuzz_target;

#[path = "harness.rs"]
mod harness;

fuzz_target!(|data: &[u8]| harness::compiler_log(data));
