//! The `tpu-sdk` command-line tool: the command line is in the library ([`tpu_sdk::cmd::main`], which
//! `python -m tpu_sdk` runs too; exit codes are listed there).

use std::process::ExitCode;

fn main() -> ExitCode {
    ExitCode::from(tpu_sdk::cmd::main(std::env::args_os()))
}
