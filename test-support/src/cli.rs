//! Helpers of the command-line tests: run the `tpu-sdk` binary (its path comes from the test crate's
//! `env!("CARGO_BIN_EXE_tpu-sdk")`, known only there) in the workspace root, and check exit codes.

use std::process::{Command, Output};

/// A command running the binary `bin` in the workspace root (paths in arguments are relative to it).
pub fn command(bin: &str) -> Command {
    let mut c = Command::new(bin);
    c.current_dir(crate::repo());
    c
}

/// Runs `bin --threads 2 ARGS...` in the workspace root.
pub fn run(bin: &str, args: &[&str]) -> Output {
    command(bin).args(["--threads", "2"]).args(args).output().unwrap()
}

/// (stdout, stderr) as text.
pub fn text(o: &Output) -> (String, String) {
    (String::from_utf8_lossy(&o.stdout).into_owned(), String::from_utf8_lossy(&o.stderr).into_owned())
}

/// Asserts the exit code and that nothing panicked; returns (stdout, stderr).
pub fn expect(o: Output, code: i32) -> (String, String) {
    let (out, err) = text(&o);
    assert!(!err.contains("panicked"), "the CLI panicked:\n{err}");
    assert_eq!(o.status.code(), Some(code), "stdout:\n{out}\nstderr:\n{err}");
    (out, err)
}

/// Asserts success and that nothing panicked; returns stdout.
pub fn ok(o: Output) -> String {
    let (out, err) = text(&o);
    assert!(o.status.success() && !err.contains("panicked"), "stdout:\n{out}\nstderr:\n{err}");
    out
}

/// Asserts failure without a panic; returns stderr.
pub fn fails(o: Output) -> String {
    let (out, err) = text(&o);
    assert!(!o.status.success() && !err.contains("panicked"), "stdout:\n{out}\nstderr:\n{err}");
    err
}

/// `n` pseudo-random bytes from `seed` (xorshift64; `seed` must not be 0): noise for the broken-file tests.
pub fn noise(n: usize, seed: u64) -> Vec<u8> {
    let mut s = seed;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s as u8
        })
        .collect()
}

/// Broken copies of a model file for the never-panic tests: empty, then `bytes` cut at each of `lengths`,
/// each with a name saying how it is broken.
pub fn truncations(bytes: &[u8], lengths: &[usize]) -> Vec<(String, Vec<u8>)> {
    let mut cases: Vec<(String, Vec<u8>)> = vec![("empty".into(), vec![])];
    cases.extend(lengths.iter().map(|&len| (format!("truncated at {len}"), bytes[..len].to_vec())));
    cases
}

/// Asserts that the CLI refused a broken model file (`what` says how it is broken): exit status 3 and a
/// message starting `cannot load`, never a panic.
pub fn assert_cannot_load(o: Output, what: &str) {
    let (_, err) = expect(o, 3);
    assert!(err.contains("cannot load") && err.len() > 30, "{what}: {err}");
}
