//! Fuzz target `session_run`: see `harness::session_run`.
#![no_main]
use libfuzzer_sys::fuzz_target;

#[path = "harness.rs"]
mod harness;

fuzz_target!(|data: &[u8]| {
    harness::session_run(data);
});
