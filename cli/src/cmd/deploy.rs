//! `tpu-sdk deploy MODEL --target edgetpu --host user@host`: compile, upload over SSH, optionally run there.
//!
//! The SSH protocol (temp name, remote SHA-256 check, atomic rename, `.prev` for `--rollback`, skip when the
//! remote file already matches) lives in `tpu_sdk_edgetpu::deploy`; this command gathers the artifact,
//! shows progress and prints what happened. Remote failures (unreachable host, refused key, no permission,
//! a failed remote run) exit with code 4.

use std::path::PathBuf;

use anyhow::Result;

use super::image_input::ImageArgs;
use super::ModelArgs;

/// Arguments of `deploy`.
#[derive(clap::Args, Debug)]
#[cfg_attr(not(feature = "edgetpu"), allow(dead_code))]
pub struct Args {
    #[command(flatten)]
    model: ModelArgs,
    /// What the model is for: `edgetpu` (compiled like `compile --target edgetpu`, float `.tflite` files
    /// included, unless MODEL is already a full-integer or Edge TPU `.tflite`) or `cpu` (uploaded as it is,
    /// for the CPU runtime on the remote machine).
    #[arg(long, default_value = "edgetpu", value_parser = ["edgetpu", "cpu"])]
    target: String,
    /// The remote machine: `user@host` or an alias from ~/.ssh/config.
    #[arg(long, value_name = "USER@HOST")]
    host: String,
    /// SSH port (default: 22 or the ssh config's).
    #[arg(long)]
    port: Option<u16>,
    /// The private key to log in with (default: the ssh agent and default keys).
    #[arg(long, value_name = "KEY")]
    identity: Option<PathBuf>,
    /// An extra ssh option, as for `ssh -o` (repeatable), e.g. `StrictHostKeyChecking=accept-new`.
    #[arg(long = "ssh-option", value_name = "KEY=VALUE")]
    ssh_options: Vec<String>,
    /// The ssh client to run (default: `ssh` on PATH); any wrapper that takes ssh's arguments works.
    #[arg(long, value_name = "PROGRAM")]
    ssh_program: Option<PathBuf>,
    /// Remote folder for models (`~` is the remote home).
    #[arg(long, default_value = "~/tpu-sdk/models", value_name = "DIR")]
    remote_dir: String,
    /// edgetpu: calibration samples for compiling (as for `compile`).
    #[arg(long, value_name = "PATH")]
    calibration: Option<PathBuf>,
    /// edgetpu: how activation ranges come from calibration (as for `compile`).
    #[arg(long, value_name = "METHOD")]
    calibration_method: Option<tpu_sdk::core::quant::RangeMethod>,
    /// edgetpu: the `edgetpu_compiler` to run (default: search PATH).
    #[arg(long, value_name = "PATH")]
    edgetpu_compiler: Option<PathBuf>,
    #[command(flatten)]
    image_args: ImageArgs,
    /// Put back the version that the last deploy of this model replaced (no upload).
    #[arg(long)]
    rollback: bool,
    /// Also upload the `tpu-sdk` binary matching the remote CPU (to --runtime-dir).
    #[arg(long)]
    with_runtime: bool,
    /// The `tpu-sdk` binary to upload with --with-runtime (default: this one when the architectures match,
    /// else target/aarch64-unknown-linux-gnu/release/tpu-sdk).
    #[arg(long, value_name = "PATH")]
    runtime_binary: Option<PathBuf>,
    /// Remote folder for the runtime binary.
    #[arg(long, default_value = "~/tpu-sdk/bin", value_name = "DIR")]
    runtime_dir: String,
    /// After uploading, run one inference there on random inputs and print its latency and top result.
    #[arg(long)]
    run: bool,
    /// --run: the remote device (`usb:0`, `pci:0`).
    #[arg(long)]
    device: Option<String>,
    /// Print a JSON document instead of text.
    #[arg(long)]
    json: bool,
}

/// Runs `deploy`.
pub fn main(a: Args) -> Result<()> {
    #[cfg(feature = "edgetpu")]
    return imp::main(a);
    #[cfg(not(feature = "edgetpu"))]
    {
        let _ = a;
        Err(super::UsageError("deploy needs a build with the `edgetpu` feature".into()).into())
    }
}

#[cfg(feature = "edgetpu")]
mod imp {
    use std::path::{Path, PathBuf};

    use anyhow::{Context, Result};
    use serde_json::json;
    use tpu_sdk::core::target::{CompileOptions, EdgeTpuOptions, Progress};
    use tpu_sdk_edgetpu::deploy::{self, ssh, Session, SshConfig};

    use super::super::UsageError;
    use super::Args;

    pub(super) fn main(a: Args) -> Result<()> {
        let model = &a.model.model;
        if !a.rollback && !model.is_file() {
            return Err(UsageError(format!("{}: no such model file", model.display())).into());
        }
        let work = TempDir::new()?;
        let (artifact, name) = if a.rollback { (None, remote_name(&a, None)) } else {
            let art = artifact(&a, &work)?;
            let name = remote_name(&a, Some(&art));
            (Some(art), name)
        };

        let session = Session::connect(SshConfig {
            host: a.host.clone(),
            port: a.port,
            identity: a.identity.clone(),
            options: a.ssh_options.clone(),
            program: a.ssh_program.clone(),
        })?;
        let mut doc = json!({"host": a.host, "target": a.target});
        let dir = a.remote_dir.trim_end_matches('/').to_string();
        match &artifact {
            None => {
                let sha = deploy::rollback(&session, &dir, &name)?;
                say(&a, format!("rolled back {}:{dir}/{name} to the previous version (sha256 {sha}); the replaced one is now {name}.prev", a.host));
                doc["model"] = json!({"path": format!("{dir}/{name}"), "sha256": sha, "rolled_back": true});
            }
            Some(file) => {
                let done = deploy::install(&session, file, &dir, &name, false, &bytes_bar(a.json))?;
                say(&a, describe(&a.host, &done, &name));
                doc["model"] = json!({"path": done.path, "sha256": done.sha256, "uploaded_bytes": done.uploaded_bytes, "kept_previous": done.kept_previous});
            }
        }
        let mut remote_bin = "tpu-sdk".to_string();
        if a.with_runtime {
            let arch = deploy::remote_arch(&session)?;
            let bin = deploy::runtime_binary(&arch, a.runtime_binary.as_deref(), Path::new("."))?;
            let rdir = a.runtime_dir.trim_end_matches('/').to_string();
            let done = deploy::install(&session, &bin, &rdir, "tpu-sdk", true, &bytes_bar(a.json))?;
            say(&a, describe(&a.host, &done, "tpu-sdk"));
            doc["runtime"] = json!({"path": done.path, "arch": arch, "sha256": done.sha256, "uploaded_bytes": done.uploaded_bytes});
            remote_bin = done.path;
        }
        if a.run {
            let r = remote_run(&a, &session, &remote_bin, &format!("{dir}/{name}"))?;
            let latency = r["latency_ms"].as_f64().unwrap_or(f64::NAN);
            let top = &r["top_k"][0];
            let top_text = match top["index"].as_u64() {
                Some(i) => format!("class {i} score {:.6}", top["score"].as_f64().unwrap_or(f64::NAN)),
                None => "no output".into(),
            };
            say(&a, format!("ran {name} on {} ({}): {latency:.2} ms, top-1 {top_text}", a.host, a.target));
            doc["run"] = json!({"latency_ms": latency, "top": top.clone()});
        }
        if a.json {
            println!("{}", serde_json::to_string_pretty(&doc)?);
        }
        Ok(())
    }

    fn say(a: &Args, line: String) {
        if !a.json {
            println!("{line}");
        }
    }

    fn describe(host: &str, d: &deploy::Installed, name: &str) -> String {
        if d.uploaded_bytes == 0 {
            format!("{host}:{} is already up to date (sha256 {}), upload skipped", d.path, d.sha256)
        } else {
            let prev = if d.kept_previous { format!("; previous version kept as {name}.prev (--rollback)") } else { String::new() };
            format!("uploaded {} bytes to {host}:{} (sha256 {} verified on the remote){prev}", d.uploaded_bytes, d.path, d.sha256)
        }
    }

    /// The file to upload: MODEL itself for `--target cpu`, an Edge TPU model (`edgetpu-custom-op` inside) or a
    /// full-integer `.tflite`; anything else (ONNX, a float `.tflite`) is compiled as `compile --target edgetpu` does:
    /// a float file on an Edge TPU machine would only run on its CPU.
    fn artifact(a: &Args, work: &TempDir) -> Result<PathBuf> {
        let model = &a.model.model;
        let as_is = |why: &str| -> Result<PathBuf> {
            match a.calibration {
                Some(_) => Err(UsageError(format!("--calibration applies only when deploy compiles the model, and {why}")).into()),
                None => Ok(model.clone()),
            }
        };
        if a.target == "cpu" {
            return as_is("--target cpu uploads MODEL as it is");
        }
        if model.extension().is_some_and(|e| e.eq_ignore_ascii_case("tflite")) {
            let bytes = std::fs::read(model).with_context(|| format!("cannot read {}", model.display()))?;
            let cannot_load = || format!("cannot load {}", model.display());
            if tpu_sdk_edgetpu::runtime::is_compiled_for_edgetpu(&bytes).with_context(cannot_load)? {
                return as_is("MODEL is already compiled for the Edge TPU");
            }
            if tpu_sdk_edgetpu::runtime::has_integer_activations(&bytes).with_context(cannot_load)? {
                return as_is("MODEL is already a full-integer .tflite");
            }
        }
        let m = a.model.load_for_samples(a.calibration.as_deref())?;
        let g = m.graph();
        let calibration = match &a.calibration {
            Some(p) => super::super::samples::load(p, g, &a.image_args).with_context(|| format!("cannot read calibration samples {}", p.display()))?,
            None => Vec::new(),
        };
        let stem = model.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|| "model".into());
        let mut edgetpu = EdgeTpuOptions { calibration, edgetpu_compiler: a.edgetpu_compiler.clone(), ..Default::default() };
        if let Some(m) = a.calibration_method {
            edgetpu.method = m;
        }
        let opts = CompileOptions {
            output: work.0.join(format!("{stem}.tflite")),
            source: Some(model.clone()),
            target: edgetpu.into(),
            ..Default::default()
        };
        let out = tpu_sdk::targets::by_name("edgetpu")?.compile(g.clone(), &opts).with_context(|| format!("cannot compile {} for the Edge TPU", model.display()))?;
        if !a.json && !out.summary.is_empty() {
            println!("{}", out.summary.trim_end());
        }
        out.files.first().cloned().ok_or_else(|| anyhow::anyhow!("compiling {} produced no file", model.display()))
    }

    /// The remote file name: the artifact's own name; for `--rollback` (no artifact), MODEL's name for a
    /// `.tflite` or `--target cpu`, else `<stem>_edgetpu.tflite` when compiled by edgetpu_compiler... which is not
    /// known without compiling, so the name a compile would give without the Edge TPU compiler: `<stem>.tflite`
    /// — pass the compiled `.tflite` itself as MODEL to roll back a `_edgetpu` model.
    fn remote_name(a: &Args, artifact: Option<&Path>) -> String {
        let model = &a.model.model;
        let file_name = |p: &Path| p.file_name().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|| "model".into());
        match artifact {
            Some(p) => file_name(p),
            None if a.target == "cpu" || model.extension().is_some_and(|e| e.eq_ignore_ascii_case("tflite")) => file_name(model),
            None => format!("{}.tflite", model.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|| "model".into())),
        }
    }

    /// Runs `tpu-sdk run MODEL --random-input --top-k 1 --json` on the remote machine and returns its JSON.
    fn remote_run(a: &Args, s: &Session, bin: &str, model: &str) -> Result<serde_json::Value> {
        let mut cmd = vec![ssh::remote_word(bin), "run".into(), ssh::remote_word(model), "--target".into(), a.target.clone()];
        cmd.extend(["--random-input", "--top-k", "1", "--json"].map(String::from));
        if let Some(d) = &a.device {
            cmd.extend(["--device".into(), ssh::quote(d)]);
        }
        for d in &a.model.dims {
            cmd.extend(["--dim".into(), ssh::quote(d)]);
        }
        for d in &a.model.input_shapes {
            cmd.extend(["--input-shape".into(), ssh::quote(d)]);
        }
        let out = s.run(&cmd.join(" "))?;
        if out.status.code() == Some(255) {
            return Err(ssh::classify(&a.host, &out).into());
        }
        let err = String::from_utf8_lossy(&out.stderr).trim().to_string();
        if out.status.code() == Some(127) {
            return Err(tpu_sdk::Error::Device(format!(
                "`{bin}` is not installed on {} (or not on the PATH of a non-interactive login): add --with-runtime to upload it",
                a.host
            ))
            .into());
        }
        if !out.status.success() {
            return Err(tpu_sdk::Error::Device(format!("the run on {} failed: {err}", a.host)).into());
        }
        let text = String::from_utf8_lossy(&out.stdout);
        serde_json::from_str(&text).map_err(|e| tpu_sdk::Error::Device(format!("the run on {} printed no result ({e}): {text}{err}", a.host)).into())
    }

    /// An indicatif byte bar driven by the upload's progress (hidden with `--json`).
    fn bytes_bar(hidden: bool) -> Progress {
        super::super::progress_bar(hidden, "{prefix} [{bar:30}] {bytes}/{total_bytes} {bytes_per_sec} {eta}")
    }

    /// A private scratch folder for the compiled artifact, removed when dropped.
    struct TempDir(PathBuf);

    impl TempDir {
        fn new() -> Result<TempDir> {
            let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.subsec_nanos()).unwrap_or(0);
            let p = std::env::temp_dir().join(format!("tpu-sdk-deploy-{}-{nanos:x}", std::process::id()));
            std::fs::create_dir_all(&p).with_context(|| format!("cannot create {}", p.display()))?;
            Ok(TempDir(p))
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}
