//! Coral USB Accelerators, recognised by vendor/product id.
//!
//! Before its firmware is loaded the accelerator enumerates as `1a6e:089a` (Global Unichip, boot/DFU mode);
//! libedgetpu downloads the firmware on first use and it re-enumerates as `18d1:9302` (Google), ready.

use std::path::PathBuf;

use tpu_sdk_core::target::DeviceInfo;
use tpu_sdk_core::Result;

use super::Host;

/// Vendor/product id of an accelerator in boot mode (no firmware yet).
pub const BOOT_ID: (u16, u16) = (0x1a6e, 0x089a);
/// Vendor/product id of an accelerator running its firmware.
pub const READY_ID: (u16, u16) = (0x18d1, 0x9302);

/// One USB device as a lister reports it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct UsbDevice {
    /// USB vendor id.
    pub vendor_id: u16,
    /// USB product id.
    pub product_id: u16,
    /// Bus number.
    pub bus: u8,
    /// Device address on the bus.
    pub address: u8,
    /// Port numbers from the root hub down (`[2, 3]` is bus path `B-2.3`).
    pub ports: Vec<u8>,
    /// Serial number string, when the device reports one.
    pub serial: Option<String>,
    /// Negotiated speed (`high`, `super`...), when known.
    pub speed: Option<String>,
}

impl UsbDevice {
    /// The Linux bus path (`1-2.3`; the sysfs name under `/sys/bus/usb/devices`).
    pub fn bus_path(&self) -> String {
        let ports: Vec<String> = self.ports.iter().map(|p| p.to_string()).collect();
        if ports.is_empty() {
            format!("usb{}", self.bus)
        } else {
            format!("{}-{}", self.bus, ports.join("."))
        }
    }

    /// The usbfs node (`/dev/bus/usb/001/004`) relative to the `/dev` root.
    pub fn usbfs_node(&self) -> PathBuf {
        PathBuf::from(format!("bus/usb/{:03}/{:03}", self.bus, self.address))
    }
}

/// Lists attached USB devices.
pub trait UsbLister {
    /// Every attached USB device; a machine without a USB stack gives an empty list.
    fn list(&self) -> std::io::Result<Vec<UsbDevice>>;
}

/// The real USB list, through `nusb` (pure Rust; on Linux it reads sysfs).
#[derive(Clone, Copy, Debug, Default)]
pub struct NusbLister;

impl UsbLister for NusbLister {
    fn list(&self) -> std::io::Result<Vec<UsbDevice>> {
        use nusb::MaybeFuture;
        // No USB stack (containers, machines without /sys/bus/usb): nothing attached. nusb reports that case
        // as a generic error, so look first.
        if cfg!(target_os = "linux") && !std::path::Path::new("/sys/bus/usb/devices").exists() {
            return Ok(Vec::new());
        }
        let devices = nusb::list_devices().wait().map_err(std::io::Error::from)?;
        Ok(devices
            .map(|d| UsbDevice {
                vendor_id: d.vendor_id(),
                product_id: d.product_id(),
                bus: bus_number(&d),
                address: d.device_address(),
                ports: d.port_chain().to_vec(),
                serial: d.serial_number().map(str::to_string),
                speed: d.speed().map(|s| format!("{s:?}").to_ascii_lowercase()),
            })
            .collect())
    }
}

#[cfg(target_os = "linux")]
fn bus_number(d: &nusb::DeviceInfo) -> u8 {
    d.busnum()
}

#[cfg(not(target_os = "linux"))]
fn bus_number(d: &nusb::DeviceInfo) -> u8 {
    d.bus_id().parse().unwrap_or(0)
}

/// The Coral accelerators among `host`'s USB devices, sorted by bus path, numbered `usb:0`, `usb:1`, ...
pub fn find(host: &dyn Host) -> Result<Vec<DeviceInfo>> {
    let all = host
        .usb_devices()
        .map_err(|e| tpu_sdk_core::Error::Device(format!("cannot list USB devices: {e}")))?;
    let mut coral: Vec<UsbDevice> = all.into_iter().filter(|d| [BOOT_ID, READY_ID].contains(&(d.vendor_id, d.product_id))).collect();
    coral.sort_by_key(|d| (d.bus, d.ports.clone()));
    Ok(coral.iter().enumerate().map(|(i, d)| info(host, i, d)).collect())
}

fn info(host: &dyn Host, index: usize, d: &UsbDevice) -> DeviceInfo {
    let node = host.dev().join(d.usbfs_node());
    let mut state = if (d.vendor_id, d.product_id) == BOOT_ID {
        "boot mode: firmware is loaded on first use".to_string()
    } else {
        "ready".to_string()
    };
    // Where usbfs is not mounted (containers) the permission cannot be checked; the runtime will say.
    if node.exists() && !host.can_read_write(&node) {
        state = super::permission_hint(&node, "plugdev");
    }
    let mut details = vec![
        ("usb_id".to_string(), format!("{:04x}:{:04x}", d.vendor_id, d.product_id)),
        ("bus".to_string(), d.bus.to_string()),
        ("address".to_string(), d.address.to_string()),
    ];
    if let Some(s) = &d.speed {
        details.push(("speed".into(), s.clone()));
    }
    if let Some(s) = &d.serial {
        details.push(("serial".into(), s.clone()));
    }
    DeviceInfo {
        target: "edgetpu".into(),
        id: format!("usb:{index}"),
        kind: "Coral USB Accelerator".into(),
        state,
        location: format!("usb {}", d.bus_path()),
        details,
    }
}
