//! The `tpu-sdk` command-line tool.

fn main() {
    println!(
        "tpu-sdk {}: the inspect/compile/run/deploy/devices/bench commands are not implemented yet (issue 2 is in progress)",
        env!("CARGO_PKG_VERSION")
    );
}
