//! `tpu-sdk devices [--target T] [--json]`: the devices every built-in target finds on this machine.

use anyhow::Result;
use serde_json::json;
use tpu_sdk::core::target::DeviceInfo;

use super::TargetArgs;

/// Arguments of `devices`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Only this target's devices (default: every target in this build).
    #[arg(long, value_parser = clap::builder::PossibleValuesParser::new(tpu_sdk::targets::names()))]
    target: Option<String>,
    /// cloud-tpu: the PJRT plugin library to load (default: search).
    #[arg(long, value_name = "PATH")]
    plugin: Option<std::path::PathBuf>,
    /// Print a JSON document instead of text.
    #[arg(long)]
    json: bool,
}

/// Runs `devices`. A target whose search fails is reported (with why) and the others are still listed; no
/// device at all is a normal answer (exit 0).
pub fn main(a: Args) -> Result<()> {
    let (devices, problems) = find(a.target.as_deref(), a.plugin.as_deref());
    if a.json {
        println!("{}", serde_json::to_string_pretty(&json_doc(&devices, &problems))?);
        return Ok(());
    }
    if devices.is_empty() {
        println!("no devices found");
    }
    for d in &devices {
        let details = d.details.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(" ");
        println!("{:<10} {:<8} {:<28} {:<12} {}  {details}", d.target, d.id, d.kind, d.state, d.location);
    }
    for (t, m) in &problems {
        println!("{t}: {m}");
    }
    Ok(())
}

/// The devices of `target` (default: every target in this build), and for each target whose search failed, why.
pub fn find(target: Option<&str>, plugin: Option<&std::path::Path>) -> (Vec<DeviceInfo>, Vec<(String, String)>) {
    let names: Vec<String> = match target {
        Some(t) => vec![t.to_string()],
        None => tpu_sdk::targets::names().into_iter().map(String::from).collect(),
    };
    let mut devices = Vec::new();
    let mut problems: Vec<(String, String)> = Vec::new();
    for name in &names {
        let plugin = if name == "cloud-tpu" { plugin.map(|p| p.to_path_buf()) } else { None };
        let t = TargetArgs { target: name.clone(), plugin, device: None, replicas: None, shard: Vec::new() };
        match t.configure(None).and_then(|t| Ok(t.build().devices()?)) {
            Ok(d) => devices.extend(d),
            Err(e) => problems.push((name.clone(), format!("{e:#}"))),
        }
    }
    (devices, problems)
}

/// The `--json` document: the devices and the targets whose search failed.
pub fn json_doc(devices: &[DeviceInfo], problems: &[(String, String)]) -> serde_json::Value {
    json!({
        "devices": devices.iter().map(|d| json!({
            "target": d.target, "id": d.id, "kind": d.kind, "state": d.state, "location": d.location,
            "details": d.details.iter().map(|(k, v)| (k.clone(), json!(v))).collect::<serde_json::Map<_, _>>(),
        })).collect::<Vec<_>>(),
        "problems": problems.iter().map(|(t, m)| json!({"target": t, "message": m})).collect::<Vec<_>>(),
    })
}
