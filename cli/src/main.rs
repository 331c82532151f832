//! The `tpu-sdk` command-line tool.
//!
//! Exit codes: 0 success; 1 a failure while running (I/O, a kernel error); 2 bad usage or inputs that do not
//! match the model (count, shape, dtype); 3 the model cannot be loaded (malformed, or uses something
//! unsupported, or would need more memory than the budget: `--max-memory`); 4 a device or accelerator runtime is missing or failed.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod cmd;

/// Run neural networks on TPUs and on the CPU.
#[derive(Parser)]
#[command(name = "tpu-sdk", version, about)]
struct Cli {
    /// Worker threads for the CPU runtime (default: all cores).
    #[arg(long, global = true)]
    threads: Option<usize>,
    /// Most memory a model may make tpu-sdk allocate (2G, 512M, bytes); a model that needs more is refused with
    /// what it would allocate (default: 75% of physical memory, or TPU_SDK_MAX_MEMORY).
    #[arg(long, global = true, value_name = "SIZE", value_parser = tpu_sdk::core::limits::parse_size)]
    max_memory: Option<u64>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Print a model's graph: ops, shapes, dtypes, parameter count, MACs.
    Inspect(cmd::inspect::Args),
    /// Run a model on inputs (.npy files or an image) and write its outputs as .npy files.
    Run(cmd::run::Args),
    /// Measure a model's latency and throughput.
    Bench(cmd::bench::Args),
    /// Compile a model for a target: an int8 TFLite model for the Edge TPU, StableHLO or a TPU executable.
    Compile(cmd::compile::Args),
    /// List the devices of every target in this build (Coral USB/PCIe Edge TPUs, PJRT devices, the CPU).
    Devices(cmd::devices::Args),
    /// Compile, upload a model to a device over SSH and optionally run it there.
    Deploy(cmd::deploy::Args),
    /// Inspect or clear the cloud-tpu compilation cache.
    Cache(cmd::cache::Args),
    /// Generate text with a decoder language model (prefill, then token by token with a key/value cache).
    Generate(cmd::generate::Args),
}

fn exit_code(e: &anyhow::Error) -> u8 {
    for cause in e.chain() {
        if let Some(core) = cause.downcast_ref::<tpu_sdk::Error>() {
            return match core {
                tpu_sdk::Error::InputMismatch(_) => 2,
                tpu_sdk::Error::InvalidModel(_) | tpu_sdk::Error::Unsupported(_) | tpu_sdk::Error::ResourceLimit(_) => 3,
                tpu_sdk::Error::Device(_) => 4,
                _ => 1,
            };
        }
        if cause.downcast_ref::<cmd::UsageError>().is_some() {
            return 2;
        }
    }
    1
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if cli.max_memory.is_some() {
        tpu_sdk::core::limits::set_memory_budget(cli.max_memory);
    }
    let threads = cli.threads.unwrap_or_else(|| std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1));
    // The CPU runtime's GEMM driver spreads every GEMM over the rayon pool itself; with matrixmultiply
    // single-threaded it also need not cut its calls small to keep matrixmultiply from threading them
    // (small calls re-pack the operands: that made 2 threads slower than 1 on conv-heavy models).
    if std::env::var_os("MATMUL_NUM_THREADS").is_none() {
        std::env::set_var("MATMUL_NUM_THREADS", "1");
    }
    if let Err(e) = rayon::ThreadPoolBuilder::new().num_threads(threads).build_global() {
        eprintln!("warning: could not size the thread pool: {e}");
    }
    let r = match cli.command {
        Command::Inspect(a) => cmd::inspect::main(a),
        Command::Run(a) => cmd::run::main(a),
        Command::Bench(a) => cmd::bench::main(a, threads),
        Command::Compile(a) => cmd::compile::main(a),
        Command::Devices(a) => cmd::devices::main(a),
        Command::Deploy(a) => cmd::deploy::main(a),
        Command::Cache(a) => cmd::cache::main(a),
        Command::Generate(a) => cmd::generate::main(a),
    };
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(exit_code(&e))
        }
    }
}
