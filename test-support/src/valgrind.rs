//! Leak checks under valgrind's memcheck: a test re-runs one test of its own executable under valgrind (with
//! an environment variable that turns that test into the workload) and reads the leak summary.

use std::process::Command;

/// Bytes valgrind reported lost, by kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Leaks {
    /// "definitely lost"
    pub definitely: u64,
    /// "indirectly lost"
    pub indirectly: u64,
    /// "possibly lost"
    pub possibly: u64,
}

/// Whether valgrind is installed; when it is not, says so and returns false, or fails the test when
/// `TPU_SDK_REQUIRE_VALGRIND=1`.
pub fn available() -> bool {
    if Command::new("valgrind").arg("--version").output().is_ok() {
        return true;
    }
    assert!(
        std::env::var("TPU_SDK_REQUIRE_VALGRIND").as_deref() != Ok("1"),
        "TPU_SDK_REQUIRE_VALGRIND=1 but valgrind is not installed (apt install valgrind)"
    );
    eprintln!("note: valgrind is not installed; skipping the leak check (apt install valgrind)");
    false
}

/// Runs the test `test` of the current test executable under memcheck with the environment `env`, asserts
/// that it passed, and returns the leak summary and valgrind's log.
pub fn memcheck(test: &str, env: &[(&str, &std::ffi::OsStr)]) -> (Leaks, String) {
    let mut cmd = Command::new("valgrind");
    cmd.args(["--leak-check=full", "--errors-for-leak-kinds=definite", "--num-callers=40"])
        .arg(std::env::current_exe().expect("the test executable"))
        .args(["--exact", test, "--nocapture", "--test-threads=1"]);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("valgrind runs");
    let log = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{test} failed under valgrind:\n{}{log}", String::from_utf8_lossy(&out.stdout));
    let bytes = |kind: &str| -> u64 {
        // "==123==    definitely lost: 1,234 bytes in 5 blocks"; absent when nothing leaked at all.
        log.lines()
            .find_map(|l| l.split_once(&format!("{kind} lost: ")).map(|(_, r)| r.to_string()))
            .map(|r| r.split_whitespace().next().unwrap_or("0").replace(',', "").parse().expect("a byte count"))
            .unwrap_or(0)
    };
    (Leaks { definitely: bytes("definitely"), indirectly: bytes("indirectly"), possibly: bytes("possibly") }, log)
}
