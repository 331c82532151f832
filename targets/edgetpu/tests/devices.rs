//! Device discovery against fixture machines: fake sysfs/dev trees in a temp folder and made-up USB lists.

use std::collections::HashSet;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

use tpu_sdk_edgetpu::devices::{self, Host, ProcessIds, UsbDevice};

struct FakeHost {
    root: tempfile::TempDir,
    sys: PathBuf,
    dev: PathBuf,
    usb: std::io::Result<Vec<UsbDevice>>,
    denied: HashSet<PathBuf>,
}

impl FakeHost {
    fn new(usb: Vec<UsbDevice>) -> FakeHost {
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(root.path().join("sys")).unwrap();
        std::fs::create_dir_all(root.path().join("dev")).unwrap();
        let (sys, dev) = (root.path().join("sys"), root.path().join("dev"));
        FakeHost { root, sys, dev, usb: Ok(usb), denied: HashSet::new() }
    }
    fn write(&self, rel: &str, text: &str) {
        let p = self.root.path().join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
    fn mkdir(&self, rel: &str) -> PathBuf {
        let p = self.root.path().join(rel);
        std::fs::create_dir_all(&p).unwrap();
        p
    }
    /// A PCI function with Coral's id at `addr`, optionally bound to the apex driver as apex_N.
    fn pci_card(&self, addr: &str, apex: Option<u32>) {
        self.write(&format!("sys/bus/pci/devices/{addr}/vendor"), "0x1ac1\n");
        self.write(&format!("sys/bus/pci/devices/{addr}/device"), "0x089a\n");
        if let Some(n) = apex {
            let drv = self.mkdir("sys/bus/pci/drivers/apex");
            symlink(&drv, self.root.path().join(format!("sys/bus/pci/devices/{addr}/driver"))).unwrap();
            let entry = self.mkdir(&format!("sys/class/apex/apex_{n}"));
            symlink(self.root.path().join(format!("sys/bus/pci/devices/{addr}")), entry.join("device")).unwrap();
        }
    }
}

impl Host for FakeHost {
    fn usb_devices(&self) -> std::io::Result<Vec<UsbDevice>> {
        match &self.usb {
            Ok(v) => Ok(v.clone()),
            Err(e) => Err(std::io::Error::new(e.kind(), e.to_string())),
        }
    }
    fn sysfs(&self) -> &Path {
        &self.sys
    }
    fn dev(&self) -> &Path {
        &self.dev
    }
    fn can_read_write(&self, node: &Path) -> bool {
        !self.denied.contains(node)
    }
}

fn usb(vid: u16, pid: u16, bus: u8, addr: u8, ports: &[u8]) -> UsbDevice {
    UsbDevice { vendor_id: vid, product_id: pid, bus, address: addr, ports: ports.to_vec(), serial: None, speed: Some("high".into()) }
}

#[test]
fn usb_accelerators_in_boot_and_ready_mode_sorted_by_bus_path() {
    let host = FakeHost::new(vec![
        usb(0x046d, 0xc52b, 1, 2, &[1]),     // a mouse: ignored
        usb(0x18d1, 0x9302, 2, 5, &[1, 4]),  // ready
        usb(0x1a6e, 0x089a, 1, 7, &[3]),     // boot mode
        usb(0x18d1, 0x4ee7, 1, 9, &[2]),     // another Google device (a phone): ignored
    ]);
    let d = devices::list_on(&host).unwrap();
    assert_eq!(d.len(), 2, "{d:#?}");
    assert_eq!((d[0].id.as_str(), d[0].location.as_str()), ("usb:0", "usb 1-3"));
    assert!(d[0].state.starts_with("boot mode"), "{}", d[0].state);
    assert_eq!((d[1].id.as_str(), d[1].location.as_str(), d[1].state.as_str()), ("usb:1", "usb 2-1.4", "ready"));
    assert!(d[1].details.contains(&("usb_id".into(), "18d1:9302".into())));
    assert!(d.iter().all(|x| x.target == "edgetpu" && x.kind == "Coral USB Accelerator"));
}

#[test]
fn usb_node_without_permission_says_to_add_the_udev_rule() {
    let mut host = FakeHost::new(vec![usb(0x18d1, 0x9302, 1, 4, &[2])]);
    host.write("dev/bus/usb/001/004", "");
    host.denied.insert(host.root.path().join("dev/bus/usb/001/004"));
    let d = devices::list_on(&host).unwrap();
    assert!(d[0].state.contains("no permission on") && d[0].state.contains("udev") && d[0].state.contains("plugdev"), "{}", d[0].state);
}

#[test]
fn no_devices_is_an_empty_list() {
    let host = FakeHost::new(vec![]);
    assert!(devices::list_on(&host).unwrap().is_empty());
}

#[test]
fn usb_listing_failure_is_a_device_error_not_a_panic() {
    let mut host = FakeHost::new(vec![]);
    host.usb = Err(std::io::Error::new(std::io::ErrorKind::PermissionDenied, "denied"));
    let e = devices::list_on(&host).unwrap_err();
    assert!(matches!(e, tpu_sdk_core::Error::Device(_)), "{e}");
}

#[test]
fn pcie_cards_through_the_apex_class() {
    let mut host = FakeHost::new(vec![]);
    host.pci_card("0000:03:00.0", Some(1));
    host.pci_card("0000:01:00.0", Some(0));
    host.write("sys/class/apex/apex_0/temp", "41250\n");
    host.write("dev/apex_0", "");
    host.write("dev/apex_1", "");
    host.denied.insert(host.root.path().join("dev/apex_1"));
    let d = devices::list_on(&host).unwrap();
    assert_eq!(d.len(), 2, "{d:#?}");
    assert_eq!((d[0].id.as_str(), d[0].state.as_str()), ("pci:0", "ready"));
    assert!(d[0].location.ends_with("dev/apex_0"));
    assert!(d[0].details.contains(&("pci".into(), "0000:01:00.0".into())));
    assert!(d[0].details.contains(&("temp_c".into(), "41.2".into())) || d[0].details.contains(&("temp_c".into(), "41.3".into())));
    assert_eq!(d[1].id, "pci:1");
    assert!(d[1].state.contains("no permission on") && d[1].state.contains("apex"), "{}", d[1].state);
}

#[test]
fn pcie_card_without_driver_says_what_to_install() {
    let host = FakeHost::new(vec![]);
    host.pci_card("0000:01:00.0", None);
    host.write("sys/bus/pci/devices/0000:00:1f.0/vendor", "0x8086\n"); // not a Coral card
    host.write("sys/bus/pci/devices/0000:00:1f.0/device", "0x089a\n");
    let d = devices::list_on(&host).unwrap();
    assert_eq!(d.len(), 1, "{d:#?}");
    assert_eq!(d[0].id, "-");
    assert_eq!(d[0].location, "pci 0000:01:00.0");
    assert!(d[0].state.contains("gasket-dkms") && d[0].state.contains("apex"), "{}", d[0].state);
}

#[test]
fn apex_entry_without_device_node() {
    let host = FakeHost::new(vec![]);
    host.pci_card("0000:01:00.0", Some(0));
    let d = devices::list_on(&host).unwrap();
    assert_eq!(d.len(), 1);
    assert!(d[0].state.contains("no device node"), "{}", d[0].state);
}

#[test]
fn mode_bits_decide_access() {
    let ids = ProcessIds { uid: 1000, gids: vec![1000, 46] };
    assert!(ids.may_read_write(0o660, 0, 46)); // group plugdev
    assert!(!ids.may_read_write(0o660, 0, 0));
    assert!(ids.may_read_write(0o600, 1000, 0));
    assert!(!ids.may_read_write(0o644, 0, 46));
    assert!(ids.may_read_write(0o666, 0, 0));
    assert!(ProcessIds { uid: 0, gids: vec![0] }.may_read_write(0o600, 5, 5));
    let status = "Name:\tx\nUid:\t1000\t1001\t1000\t1000\nGid:\t100\t101\t100\t100\nGroups:\t4 24 46 \n";
    assert_eq!(ProcessIds::parse_status(status), Some(ProcessIds { uid: 1001, gids: vec![101, 4, 24, 46] }));
}

/// The real search on this machine: whatever is attached (often nothing; there may be no USB stack at all)
/// it answers without an error.
#[test]
fn real_machine_search_answers() {
    let d = devices::list().unwrap();
    eprintln!("edgetpu devices on this machine: {d:#?}");
}
