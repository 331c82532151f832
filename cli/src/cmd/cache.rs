//! `tpu-sdk cache stats|clear`: the cloud-tpu compilation cache.

use anyhow::Result;

/// Arguments of `cache`.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(subcommand)]
    action: Action,
}

/// What to do with the cache.
#[derive(clap::Subcommand, Debug)]
enum Action {
    /// Entries, size and hit counts.
    Stats,
    /// Remove every entry.
    Clear,
}

/// Runs `cache`.
pub fn main(a: Args) -> Result<()> {
    let _ = a.action;
    Err(super::UsageError("the compilation cache commands are not implemented yet".into()).into())
}
