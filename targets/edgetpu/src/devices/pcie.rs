//! Coral PCIe and M.2 Edge TPUs: the gasket/apex kernel driver exposes each card as `/sys/class/apex/apex_N`
//! and `/dev/apex_N`. A card (PCI id `1ac1:089a`) that shows under `/sys/bus/pci/devices` without an apex
//! entry means the driver is missing; that is reported with what to install.

use std::path::{Path, PathBuf};

use tpu_sdk_core::target::DeviceInfo;
use tpu_sdk_core::Result;

use super::Host;

/// PCI vendor/device id of the Edge TPU (Global Unichip "Apex").
pub const PCI_ID: (u16, u16) = (0x1ac1, 0x089a);

/// What to do when the card is present but the driver is not.
pub const DRIVER_HINT: &str = "apex driver missing: install gasket-dkms (Coral's apt repository; on recent kernels build it from github.com/google/gasket-driver), then `sudo modprobe apex` or reboot";

/// The Edge TPU cards `host` shows: usable ones as `pci:0`, `pci:1`, ... (by apex number), then cards without
/// a driver (id `-`).
pub fn find(host: &dyn Host) -> Result<Vec<DeviceInfo>> {
    let class = host.sysfs().join("class/apex");
    let mut apex: Vec<(u32, PathBuf)> = read_dir_names(&class)
        .into_iter()
        .filter_map(|n| n.strip_prefix("apex_").and_then(|k| k.parse().ok()).map(|k| (k, class.join(&n))))
        .collect();
    apex.sort();
    let mut bound = Vec::new();
    let mut out = Vec::new();
    for (i, (n, entry)) in apex.iter().enumerate() {
        let pci = std::fs::read_link(entry.join("device")).ok().and_then(|p| p.file_name().map(|f| f.to_string_lossy().into_owned()));
        let node = host.dev().join(format!("apex_{n}"));
        let state = if !node.exists() {
            format!("no device node {}: the apex driver is loaded but udev did not create the node (check `dmesg | grep apex`)", node.display())
        } else if !host.can_read_write(&node) {
            super::permission_hint(&node, "apex")
        } else {
            "ready".to_string()
        };
        let mut details = Vec::new();
        if let Some(p) = &pci {
            details.push(("pci".to_string(), p.clone()));
            bound.push(p.clone());
        }
        // The apex driver reports the die temperature in millidegrees Celsius.
        if let Some(t) = std::fs::read_to_string(entry.join("temp")).ok().and_then(|s| s.trim().parse::<i64>().ok()) {
            details.push(("temp_c".to_string(), format!("{:.1}", t as f64 / 1000.0)));
        }
        out.push(DeviceInfo {
            target: "edgetpu".into(),
            id: format!("pci:{i}"),
            kind: "Coral PCIe/M.2 Edge TPU".into(),
            state,
            location: node.display().to_string(),
            details,
        });
    }
    let pci_root = host.sysfs().join("bus/pci/devices");
    let mut cards: Vec<String> = read_dir_names(&pci_root).into_iter().filter(|a| is_edgetpu(&pci_root.join(a))).collect();
    cards.sort();
    for addr in cards.into_iter().filter(|a| !bound.contains(a)) {
        let driver = std::fs::read_link(pci_root.join(&addr).join("driver")).ok().and_then(|p| p.file_name().map(|f| f.to_string_lossy().into_owned()));
        let state = match &driver {
            Some(d) if d != "apex" => format!("bound to driver '{d}', not apex: {DRIVER_HINT}"),
            _ => DRIVER_HINT.to_string(),
        };
        out.push(DeviceInfo {
            target: "edgetpu".into(),
            id: "-".into(),
            kind: "Coral PCIe/M.2 Edge TPU".into(),
            state,
            location: format!("pci {addr}"),
            details: vec![("pci".into(), addr.clone())],
        });
    }
    Ok(out)
}

fn read_dir_names(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .map(|rd| rd.filter_map(|e| e.ok()).map(|e| e.file_name().to_string_lossy().into_owned()).collect())
        .unwrap_or_default()
}

/// Whether the PCI function at `dir` (a `/sys/bus/pci/devices/ADDR` folder) is an Edge TPU.
fn is_edgetpu(dir: &Path) -> bool {
    let id = |f: &str| std::fs::read_to_string(dir.join(f)).ok().and_then(|s| u16::from_str_radix(s.trim().trim_start_matches("0x"), 16).ok());
    (id("vendor"), id("device")) == (Some(PCI_ID.0), Some(PCI_ID.1))
}
