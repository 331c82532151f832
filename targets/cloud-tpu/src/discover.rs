//! Finding a PJRT plugin, and making libtpu safe to load on machines that are not TPU VMs.
//!
//! Search order (the first that applies wins):
//! 1. an explicit path (`--plugin PATH`, [`crate::CloudTpuTarget::plugin`]);
//! 2. `$PJRT_PLUGIN_LIBRARY_PATH`;
//! 3. `$TPU_LIBRARY_PATH` (libtpu's own variable);
//! 4. on a Cloud TPU VM only: `libtpu/libtpu.so` from the `libtpu` Python package;
//! 5. `fastatomstruct_xla_cpu/libpjrt_cpu.so` from the `fastatomstruct-xla-cpu` Python package (the XLA CPU
//!    plugin: runs the same StableHLO on the host's cores).
//!
//! Python packages are looked for in the site-packages folders of `$VIRTUAL_ENV`, `$CONDA_PREFIX`, a `.venv` in
//! the current folder or its parents, `~/.local`, `/usr/local` and `/usr`, then in those that the interpreter
//! `$TPU_SDK_PYTHON` (or `python3`) reports.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Once;

use crate::error::{Error, Result};

/// Where a plugin was found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PluginSource {
    /// Given explicitly (`--plugin`).
    Explicit,
    /// From an environment variable (its name).
    Env(&'static str),
    /// The `libtpu` Python package.
    LibtpuPackage,
    /// The `fastatomstruct-xla-cpu` Python package (XLA CPU plugin).
    CpuPackage,
}

/// A plugin file and where it came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FoundPlugin {
    /// The shared library.
    pub path: PathBuf,
    /// How it was found.
    pub source: PluginSource,
}

/// What to install or set when no plugin is found.
pub const INSTALL_HINT: &str = "pass --plugin PATH or set PJRT_PLUGIN_LIBRARY_PATH to a PJRT plugin (.so); on a Cloud TPU VM \
     `pip install libtpu`; on any other Linux x86-64 machine `pip install fastatomstruct-xla-cpu` (the XLA CPU plugin)";

/// Finds a plugin (see the module docs for the order).
pub fn find_plugin(explicit: Option<&Path>) -> Result<FoundPlugin> {
    if let Some(p) = explicit {
        return existing(p, "--plugin").map(|path| FoundPlugin { path, source: PluginSource::Explicit });
    }
    for var in ["PJRT_PLUGIN_LIBRARY_PATH", "TPU_LIBRARY_PATH"] {
        if let Some(v) = std::env::var_os(var).filter(|v| !v.is_empty()) {
            return existing(Path::new(&v), var).map(|path| FoundPlugin { path, source: PluginSource::Env(var) });
        }
    }
    let dirs = site_packages_dirs();
    if on_tpu_vm() {
        if let Some(path) = find_in(&dirs, "libtpu/libtpu.so") {
            return Ok(FoundPlugin { path, source: PluginSource::LibtpuPackage });
        }
    }
    if let Some(path) = find_in(&dirs, "fastatomstruct_xla_cpu/libpjrt_cpu.so") {
        return Ok(FoundPlugin { path, source: PluginSource::CpuPackage });
    }
    let looked: Vec<String> = dirs.iter().map(|d| d.display().to_string()).collect();
    Err(Error::PluginNotFound(format!(
        "{INSTALL_HINT} (searched site-packages: {})",
        if looked.is_empty() { "none found".to_string() } else { looked.join(", ") }
    )))
}

/// The XLA CPU plugin from the `fastatomstruct-xla-cpu` package, if installed (for tests and `--plugin cpu`).
pub fn find_cpu_plugin() -> Option<PathBuf> {
    find_in(&site_packages_dirs(), "fastatomstruct_xla_cpu/libpjrt_cpu.so")
}

fn existing(p: &Path, what: &str) -> Result<PathBuf> {
    if p.is_file() {
        Ok(p.to_path_buf())
    } else {
        Err(Error::PluginNotFound(format!("{what} names {}, which is not a file; {INSTALL_HINT}", p.display())))
    }
}

fn find_in(dirs: &[PathBuf], rel: &str) -> Option<PathBuf> {
    dirs.iter().map(|d| d.join(rel)).find(|p| p.is_file())
}

/// Candidate site-packages folders, most specific first, without duplicates.
pub fn site_packages_dirs() -> Vec<PathBuf> {
    let mut prefixes: Vec<PathBuf> = Vec::new();
    for var in ["VIRTUAL_ENV", "CONDA_PREFIX"] {
        if let Some(v) = std::env::var_os(var).filter(|v| !v.is_empty()) {
            prefixes.push(PathBuf::from(v));
        }
    }
    if let Ok(cwd) = std::env::current_dir() {
        for dir in cwd.ancestors() {
            let venv = dir.join(".venv");
            if venv.is_dir() {
                prefixes.push(venv);
            }
        }
    }
    if let Some(home) = std::env::var_os("HOME") {
        prefixes.push(Path::new(&home).join(".local"));
    }
    prefixes.push("/usr/local".into());
    prefixes.push("/usr".into());
    let mut dirs = Vec::new();
    for p in prefixes {
        for lib in ["lib", "lib64"] {
            if let Ok(rd) = std::fs::read_dir(p.join(lib)) {
                let mut found: Vec<PathBuf> = rd
                    .flatten()
                    .filter(|e| e.file_name().to_string_lossy().starts_with("python3"))
                    .flat_map(|e| [e.path().join("site-packages"), e.path().join("dist-packages")])
                    .filter(|d| d.is_dir())
                    .collect();
                found.sort();
                found.reverse(); // newest python3.X first
                dirs.extend(found);
            }
        }
        let debian = p.join("lib/python3/dist-packages");
        if debian.is_dir() {
            dirs.push(debian);
        }
    }
    dirs.extend(python_reported_dirs());
    let mut seen = std::collections::HashSet::new();
    dirs.retain(|d| seen.insert(d.canonicalize().unwrap_or_else(|_| d.clone())));
    dirs
}

/// The site-packages folders the configured Python interpreter reports (empty when there is none).
fn python_reported_dirs() -> Vec<PathBuf> {
    let python = std::env::var_os("TPU_SDK_PYTHON").filter(|v| !v.is_empty()).unwrap_or_else(|| "python3".into());
    let script = "import site, sys\nfor p in site.getsitepackages() + [site.getusersitepackages()]: print(p)";
    match Command::new(python).args(["-c", script]).output() {
        Ok(o) if o.status.success() => {
            String::from_utf8_lossy(&o.stdout).lines().map(PathBuf::from).filter(|p| p.is_dir()).collect()
        }
        _ => Vec::new(),
    }
}

/// True on a Cloud TPU VM: a Google TPU PCI device (vendor 0x1ae0) or a TPU device node (`/dev/accel0`,
/// `/dev/vfio/0`) is present.
pub fn on_tpu_vm() -> bool {
    if Path::new("/dev/accel0").exists() {
        return true;
    }
    if let Ok(rd) = std::fs::read_dir("/sys/bus/pci/devices") {
        for e in rd.flatten() {
            if let Ok(v) = std::fs::read_to_string(e.path().join("vendor")) {
                if v.trim() == "0x1ae0" {
                    return true;
                }
            }
        }
    }
    false
}

/// True when the file name looks like libtpu (`libtpu.so`, `libtpu-nightly.so`, ...).
pub fn looks_like_libtpu(path: &Path) -> bool {
    path.file_name().is_some_and(|n| n.to_string_lossy().starts_with("libtpu"))
}

/// The environment variables to set before loading libtpu: none on a TPU VM; elsewhere the ones that keep libtpu
/// from querying the GCE metadata server or contacting other workers (so that it can be loaded, for example to
/// compile ahead of time, without any network traffic). `get` reads the current environment.
pub fn libtpu_env_overrides(on_tpu_vm: bool, get: impl Fn(&str) -> Option<String>) -> Vec<(&'static str, String)> {
    if on_tpu_vm {
        return Vec::new();
    }
    let mut v = vec![("TPU_SKIP_MDS_QUERY", "1".to_string())];
    if get("TPU_ACCELERATOR_TYPE").filter(|s| !s.is_empty()).is_none() {
        v.push(("TPU_ACCELERATOR_TYPE", "v5litepod-4".to_string()));
    }
    v.push(("TPU_WORKER_ID", "0".to_string()));
    v.push(("TPU_WORKER_HOSTNAMES", "localhost".to_string()));
    v
}

/// Applies [`libtpu_env_overrides`] to this process (once). Called by [`crate::pjrt::Plugin::load`] before it loads
/// a file that looks like libtpu. Like any change of the environment it must not race with other threads reading
/// the environment; the SDK does it before it starts threads that touch the plugin.
pub fn prepare_libtpu_env() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        for (k, v) in libtpu_env_overrides(on_tpu_vm(), |k| std::env::var(k).ok()) {
            std::env::set_var(k, v);
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn libtpu_env_off_a_tpu_vm_stays_local_and_keeps_a_chosen_accelerator_type() {
        let empty = HashMap::<String, String>::new();
        let v = libtpu_env_overrides(false, |k| empty.get(k).cloned());
        let m: HashMap<_, _> = v.into_iter().collect();
        assert_eq!(m["TPU_SKIP_MDS_QUERY"], "1");
        assert_eq!(m["TPU_ACCELERATOR_TYPE"], "v5litepod-4");
        assert_eq!(m["TPU_WORKER_ID"], "0");
        assert_eq!(m["TPU_WORKER_HOSTNAMES"], "localhost");

        let set: HashMap<String, String> = [("TPU_ACCELERATOR_TYPE".to_string(), "v6e-8".to_string())].into();
        let v = libtpu_env_overrides(false, |k| set.get(k).cloned());
        assert!(v.iter().all(|(k, _)| *k != "TPU_ACCELERATOR_TYPE"));
        assert!(v.iter().any(|(k, v)| *k == "TPU_WORKER_HOSTNAMES" && v == "localhost"));

        assert!(libtpu_env_overrides(true, |k| empty.get(k).cloned()).is_empty());
    }

    #[test]
    fn explicit_paths_that_do_not_exist_are_reported_with_what_to_do() {
        let e = find_plugin(Some(Path::new("/nonexistent/libpjrt.so"))).unwrap_err().to_string();
        assert!(e.contains("/nonexistent/libpjrt.so") && e.contains("--plugin") && e.contains("pip install"), "{e}");
    }

    #[test]
    fn recognises_libtpu_file_names() {
        assert!(looks_like_libtpu(Path::new("/x/site-packages/libtpu/libtpu.so")));
        assert!(!looks_like_libtpu(Path::new("/x/libpjrt_cpu.so")));
    }
}
