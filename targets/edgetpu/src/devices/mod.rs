//! Finding Coral Edge TPUs on this machine: USB accelerators ([`usb`]) and PCIe/M.2 cards ([`pcie`]).
//!
//! Everything the search reads comes through a [`Host`]: the USB device list, the sysfs and `/dev` roots and
//! the permission check. [`SystemHost`] is the real machine; tests pass a fake one (a temporary sysfs tree
//! and a made-up USB list).
//!
//! Ids follow the runtime's `--device` syntax: `usb:0`, `usb:1`, ... for USB accelerators sorted by bus path,
//! `pci:0`, ... for `/dev/apex_N` sorted by N. A card the kernel sees but cannot use (no apex driver) is
//! listed with id `-` and a state that says what to install.

use std::path::{Path, PathBuf};

use tpu_sdk_core::target::DeviceInfo;
use tpu_sdk_core::Result;

pub mod pcie;
pub mod usb;

pub use usb::{NusbLister, UsbDevice, UsbLister};

/// Where the search looks: the USB list, the sysfs and `/dev` roots, and who may open a device node.
pub trait Host {
    /// The USB devices attached (all of them; the search picks Coral's ids). No USB stack is an empty list.
    fn usb_devices(&self) -> std::io::Result<Vec<UsbDevice>>;
    /// The sysfs root (`/sys`).
    fn sysfs(&self) -> &Path;
    /// The device-node root (`/dev`).
    fn dev(&self) -> &Path;
    /// Whether this process may open `node` for reading and writing (what the runtime needs).
    fn can_read_write(&self, node: &Path) -> bool;
}

/// The machine this process runs on.
#[derive(Clone, Debug)]
pub struct SystemHost {
    sysfs: PathBuf,
    dev: PathBuf,
}

impl Default for SystemHost {
    fn default() -> Self {
        SystemHost { sysfs: PathBuf::from("/sys"), dev: PathBuf::from("/dev") }
    }
}

impl Host for SystemHost {
    fn usb_devices(&self) -> std::io::Result<Vec<UsbDevice>> {
        NusbLister.list()
    }
    fn sysfs(&self) -> &Path {
        &self.sysfs
    }
    fn dev(&self) -> &Path {
        &self.dev
    }
    fn can_read_write(&self, node: &Path) -> bool {
        use std::os::unix::fs::MetadataExt;
        match (std::fs::metadata(node), ProcessIds::current()) {
            (Ok(m), Some(ids)) => ids.may_read_write(m.mode(), m.uid(), m.gid()),
            // Unknown: let the runtime try and report what the kernel says.
            _ => true,
        }
    }
}

/// The user and group ids of a process, for checking a device node's mode bits.
#[derive(Clone, Debug, PartialEq)]
pub struct ProcessIds {
    /// Effective user id.
    pub uid: u32,
    /// Effective group id and supplementary groups.
    pub gids: Vec<u32>,
}

impl ProcessIds {
    /// This process's ids, read from `/proc/self/status` (`None` where that file does not exist).
    pub fn current() -> Option<ProcessIds> {
        let s = std::fs::read_to_string("/proc/self/status").ok()?;
        ProcessIds::parse_status(&s)
    }

    /// Parses the `Uid:`, `Gid:` and `Groups:` lines of a `/proc/PID/status` text (effective ids).
    pub fn parse_status(s: &str) -> Option<ProcessIds> {
        let field = |name: &str| s.lines().find_map(|l| l.strip_prefix(name)).map(|v| v.split_whitespace().filter_map(|x| x.parse::<u32>().ok()).collect::<Vec<_>>());
        let uid = *field("Uid:")?.get(1)?;
        let mut gids = vec![*field("Gid:")?.get(1)?];
        gids.extend(field("Groups:").unwrap_or_default());
        Some(ProcessIds { uid, gids })
    }

    /// Whether a node with `mode`, owned by `owner`:`group`, can be opened read-write by these ids.
    pub fn may_read_write(&self, mode: u32, owner: u32, group: u32) -> bool {
        if self.uid == 0 {
            return true;
        }
        let bits = if self.uid == owner {
            mode >> 6
        } else if self.gids.contains(&group) {
            mode >> 3
        } else {
            mode
        };
        bits & 0o6 == 0o6
    }
}

/// The Edge TPUs present on this machine; none is a normal answer.
pub fn list() -> Result<Vec<DeviceInfo>> {
    list_on(&SystemHost::default())
}

/// The Edge TPUs `host` shows.
pub fn list_on(host: &dyn Host) -> Result<Vec<DeviceInfo>> {
    let mut out = usb::find(host)?;
    out.extend(pcie::find(host)?);
    Ok(out)
}

/// The udev rules that let a normal user open Coral devices (what Coral's runtime packages install).
pub const UDEV_RULES: &str = r#"# /etc/udev/rules.d/99-edgetpu-accelerator.rules
SUBSYSTEM=="usb",ATTRS{idVendor}=="1a6e",ATTRS{idProduct}=="089a",GROUP="plugdev",MODE="0664"
SUBSYSTEM=="usb",ATTRS{idVendor}=="18d1",ATTRS{idProduct}=="9302",GROUP="plugdev",MODE="0664"
# /etc/udev/rules.d/65-apex.rules
SUBSYSTEM=="apex",MODE="0660",GROUP="apex""#;

/// The hint for a device node this user may not open.
pub(crate) fn permission_hint(node: &Path, group: &str) -> String {
    format!(
        "no permission on {}: add the udev rule (see `targets/edgetpu/README.md`, Devices), add your user to group '{group}' (sudo usermod -aG {group} $USER), then replug or reboot",
        node.display()
    )
}
