//! Fuzz target `graph_build` (structure-aware): see `harness::graph_build`.
#![no_main]
use libfuzzer_sys::fuzz_target;

#[path = "harness.rs"]
mod harness;

fuzz_target!(|data: &[u8]| {
    harness::graph_build(data);
});
