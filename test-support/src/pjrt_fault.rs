//! The fault-injecting PJRT plugin (`targets/cloud-tpu/tests/stubs/pjrt_fault.c`): a plugin that forwards to a
//! real one and makes chosen calls fail, built here with `cc`, one library per fault list.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Builds the plugin forwarding to `real` with `faults` (`NAME@N` or `NAME@N+`, comma-separated; see the C
/// file). `None`, with a note, when there is no C compiler. The library is named after the fault list, since a
/// process keeps a loaded plugin by path.
pub fn build(real: &Path, faults: &str) -> Option<PathBuf> {
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    if Command::new(&cc).arg("--version").output().is_err() {
        crate::oracle::skip(&format!("no C compiler ({cc}) to build the fault-injecting PJRT plugin"));
        return None;
    }
    let src = crate::repo().join("targets/cloud-tpu/tests/stubs/pjrt_fault.c");
    // The directory is named after everything the library is built from (the process, the real plugin's path,
    // the fault list, the source), not the process id alone: `/tmp` outlives a run, process ids repeat across
    // runs, and a library left by an earlier run would forward to a plugin that may no longer exist there.
    let source = std::fs::read(&src).unwrap_or_else(|e| panic!("cannot read {}: {e}", src.display()));
    let mut key = std::collections::hash_map::DefaultHasher::new();
    std::hash::Hash::hash(&(std::process::id(), real, faults, &source, this_process_nonce()), &mut key);
    let dir = std::env::temp_dir().join(format!("tpu-sdk-pjrt-fault-{}-{:016x}", std::process::id(), std::hash::Hasher::finish(&key)));
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("cannot create {}: {e}", dir.display()));
    let tag: String = faults.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '_' }).collect();
    let out = dir.join(format!("libpjrt_fault_{tag}.so"));
    if !out.exists() {
        // Tests of one binary run in parallel: build under a unique name, then rename into place.
        let tmp = dir.join(format!("libpjrt_fault_{tag}.{:?}.tmp", std::thread::current().id()).replace(['(', ')'], ""));
        let o = Command::new(&cc)
            .args(["-shared", "-fPIC", "-O1", "-g", "-Wall", "-Werror"])
            .arg(format!("-DREAL_PLUGIN=\"{}\"", real.display()))
            .arg(format!("-DFAULTS=\"{faults}\""))
            .arg(&src)
            .arg("-o")
            .arg(&tmp)
            .args(["-ldl", "-lpthread"])
            .output()
            .expect("the C compiler runs");
        assert!(o.status.success(), "cc pjrt_fault.c: {}", String::from_utf8_lossy(&o.stderr));
        std::fs::rename(&tmp, &out).unwrap();
    }
    Some(out)
}

/// Asserts that `e` is the binding's report of an injected failure of `PJRT_<function>`: it names the function
/// and carries the plugin's message.
pub fn assert_injected(e: &dyn std::fmt::Display, function: &str) {
    let text = e.to_string();
    assert!(text.contains(&format!("PJRT_{function}")), "the error names the function PJRT_{function}: {text}");
    assert!(text.contains("injected fault"), "the error carries the plugin's message: {text}");
}

/// A value fixed for this process and different across processes that reuse its id: the time of the first call.
fn this_process_nonce() -> u128 {
    static NONCE: std::sync::OnceLock<u128> = std::sync::OnceLock::new();
    *NONCE.get_or_init(|| std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos()))
}
