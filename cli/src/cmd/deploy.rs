//! `tpu-sdk deploy MODEL --target edgetpu --host user@host`: compile, upload over SSH, optionally run there.

use anyhow::Result;

/// Arguments of `deploy`.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    model: super::ModelArgs,
}

/// Runs `deploy`.
pub fn main(a: Args) -> Result<()> {
    let _ = a.model;
    Err(super::UsageError("deploy is not implemented yet".into()).into())
}
