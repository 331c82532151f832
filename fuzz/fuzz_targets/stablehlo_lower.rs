//! Fuzz target `stablehlo_lower`: see `harness::stablehlo_lower`.
#![no_main]
use libfuzzer_sys::fuzz_target;

#[path = "harness.rs"]
mod harness;

fuzz_target!(|data: &[u8]| {
    harness::stablehlo_lower(data);
});
