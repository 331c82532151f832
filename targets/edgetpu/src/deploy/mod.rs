//! Putting models (and the `tpu-sdk` runtime) on a remote machine over SSH without ever leaving a broken
//! file there.
//!
//! [`install`] is the one protocol every upload follows, in the remote folder `DIR`:
//! 1. `mkdir -p DIR`; remove stale `.NAME.upload.*` files of interrupted uploads; hash `DIR/NAME` if it exists.
//!    When that hash equals the local one, nothing is sent (a second deploy is a no-op).
//! 2. stream the file to `DIR/.NAME.upload.TAG` (progress reported);
//! 3. hash the temp file on the remote (`sha256sum`, or `shasum -a 256`) and compare with the local SHA-256;
//!    on a mismatch delete it and fail;
//! 4. keep the current `DIR/NAME` as `DIR/NAME.prev` (hard link, or copy then rename), then
//!    `mv -f` the temp file onto `DIR/NAME` — a rename within one folder, atomic on POSIX file systems.
//!
//! So `DIR/NAME` is always either the old complete file or the new complete file: an upload interrupted at
//! any point leaves the old one in place. [`rollback`] swaps `NAME` and `NAME.prev` the same way.

use std::io::Read;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};
use tpu_sdk_core::target::Progress;
use tpu_sdk_core::{Error, Result};

pub mod ssh;

pub use ssh::{Session, SshConfig};

/// What [`install`] did.
#[derive(Clone, Debug, PartialEq)]
pub struct Installed {
    /// The remote path (as given, `~` unexpanded).
    pub path: String,
    /// SHA-256 of the file, hex.
    pub sha256: String,
    /// Bytes sent (0 when the remote file already matched).
    pub uploaded_bytes: u64,
    /// Whether a previous, different version was kept as `NAME.prev`.
    pub kept_previous: bool,
}

/// SHA-256 of a local file, hex.
pub fn sha256_file(path: &Path) -> Result<String> {
    let mut f = std::fs::File::open(path).map_err(|e| Error::Io { path: path.display().to_string(), source: e })?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = f.read(&mut buf).map_err(|e| Error::Io { path: path.display().to_string(), source: e })?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    Ok(hex(&h.finalize()))
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// The remote shell function `sum` that prints a file's SHA-256 (from stdin).
const SUM_FN: &str = "sum() { if command -v sha256sum >/dev/null 2>&1; then sha256sum | cut -d' ' -f1; \
elif command -v shasum >/dev/null 2>&1; then shasum -a 256 | cut -d' ' -f1; \
else echo 'neither sha256sum nor shasum is installed (install coreutils)' >&2; exit 5; fi; }";

fn check_name(name: &str) -> Result<()> {
    if name.is_empty() || name.contains('/') || name.starts_with('.') {
        return Err(Error::Device(format!("remote file name '{name}' must be a plain file name")));
    }
    Ok(())
}

/// Uploads the local file `src` to `dir/name` on the remote by the protocol in the module docs.
/// `executable` sets mode 755 (for the runtime binary).
pub fn install(s: &Session, src: &Path, dir: &str, name: &str, executable: bool, progress: &Progress) -> Result<Installed> {
    let sha = sha256_file(src)?;
    let len = std::fs::metadata(src).map_err(|e| Error::Io { path: src.display().to_string(), source: e })?.len();
    let mut f = std::fs::File::open(src).map_err(|e| Error::Io { path: src.display().to_string(), source: e })?;
    install_from(s, &mut f, len, &sha, dir, name, executable, progress)
}

/// [`install`] from any reader of `len` bytes whose SHA-256 is `sha256` (hex). A reader that fails midway
/// fails the upload and leaves the remote `dir/name` as it was.
#[allow(clippy::too_many_arguments)]
pub fn install_from(
    s: &Session,
    src: &mut dyn Read,
    len: u64,
    sha256: &str,
    dir: &str,
    name: &str,
    executable: bool,
    progress: &Progress,
) -> Result<Installed> {
    check_name(name)?;
    if sha256.len() != 64 || !sha256.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(Error::Device(format!("'{sha256}' is not a SHA-256 in hex")));
    }
    let d = ssh::remote_word(dir);
    let n = ssh::quote(name);
    let path = format!("{}/{name}", dir.trim_end_matches('/'));
    let current = s.check(
        &format!("preparing {dir}"),
        &format!(
            "set -e; {SUM_FN}; d={d}; n={n}; mkdir -p \"$d\"; rm -f \"$d\"/.\"$n\".upload.*; \
             if [ -f \"$d/$n\" ]; then sum < \"$d/$n\"; fi"
        ),
    )?;
    let current = current.trim();
    if current == sha256 {
        return Ok(Installed { path, sha256: sha256.into(), uploaded_bytes: 0, kept_previous: false });
    }
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
    let tag = format!("{}-{nanos:x}", std::process::id());
    if let Err(e) = s.upload(src, len, &format!("d={d}; n={n}; cat > \"$d/.$n.upload.{tag}\""), &format!("uploading {name}"), progress) {
        // best effort: a partial file must not keep a full disk full (the next deploy removes it anyway)
        let _ = s.run(&format!("d={d}; n={n}; rm -f \"$d/.$n.upload.{tag}\""));
        return Err(e);
    }
    let chmod = if executable { "chmod 755 \"$t\"; " } else { "" };
    s.check(
        &format!("installing {path}"),
        &format!(
            "set -e; {SUM_FN}; d={d}; n={n}; t=\"$d/.$n.upload.{tag}\"; h=$(sum < \"$t\"); \
             if [ \"$h\" != {sha256} ]; then rm -f \"$t\"; echo \"checksum mismatch after upload (remote $h, local {sha256}); the old file is unchanged\" >&2; exit 3; fi; \
             {chmod}if [ -f \"$d/$n\" ]; then ln -f \"$d/$n\" \"$d/$n.prev\" 2>/dev/null || {{ cp -p \"$d/$n\" \"$d/.$n.prev.tmp\" && mv -f \"$d/.$n.prev.tmp\" \"$d/$n.prev\"; }}; fi; \
             mv -f \"$t\" \"$d/$n\""
        ),
    )?;
    Ok(Installed { path, sha256: sha256.into(), uploaded_bytes: len, kept_previous: !current.is_empty() })
}

/// Swaps `dir/name` with `dir/name.prev` (the version before the last deploy); returns the SHA-256 of the
/// file now in place. Rolling back twice returns to where it started.
pub fn rollback(s: &Session, dir: &str, name: &str) -> Result<String> {
    check_name(name)?;
    let d = ssh::remote_word(dir);
    let n = ssh::quote(name);
    let out = s.check(
        &format!("rolling back {dir}/{name}"),
        &format!(
            "set -e; {SUM_FN}; d={d}; n={n}; \
             if [ ! -f \"$d/$n.prev\" ]; then echo \"no previous version of $n in {dir} (nothing was replaced there yet)\" >&2; exit 3; fi; \
             if [ -f \"$d/$n\" ]; then ln -f \"$d/$n\" \"$d/.$n.swap\"; fi; mv -f \"$d/$n.prev\" \"$d/$n\"; \
             if [ -f \"$d/.$n.swap\" ]; then mv -f \"$d/.$n.swap\" \"$d/$n.prev\"; fi; sum < \"$d/$n\""
        ),
    )?;
    Ok(out.trim().to_string())
}

/// Whether `dir/name` has a previous version.
pub fn has_previous(s: &Session, dir: &str, name: &str) -> Result<bool> {
    let out = s.check("looking for a previous version", &format!("if [ -f {}/{}.prev ]; then echo yes; fi", ssh::remote_word(dir), ssh::quote(name)))?;
    Ok(out.trim() == "yes")
}

/// The remote machine's CPU architecture in Rust's naming (`x86_64`, `aarch64`, `arm`...), from `uname -m`.
pub fn remote_arch(s: &Session) -> Result<String> {
    let m = s.check("uname -m", "uname -m")?;
    Ok(rust_arch(m.trim()).to_string())
}

/// Maps a `uname -m` answer to Rust's architecture name.
pub fn rust_arch(uname: &str) -> &str {
    match uname {
        "amd64" => "x86_64",
        "arm64" | "armv8l" | "aarch64_be" => "aarch64",
        "armv7l" | "armv6l" => "arm",
        "i686" | "i386" => "x86",
        other => other,
    }
}

/// The architecture an ELF executable was built for (Rust naming), `None` when `path` is not an ELF file.
pub fn elf_arch(path: &Path) -> Option<&'static str> {
    let mut h = [0u8; 20];
    std::fs::File::open(path).ok()?.read_exact(&mut h).ok()?;
    if &h[..4] != b"\x7fELF" {
        return None;
    }
    let machine = if h[5] == 2 { u16::from_be_bytes([h[18], h[19]]) } else { u16::from_le_bytes([h[18], h[19]]) };
    Some(match machine {
        62 => "x86_64",
        183 => "aarch64",
        40 => "arm",
        3 => "x86",
        243 => "riscv64",
        _ => "unknown",
    })
}

/// Picks the `tpu-sdk` binary to upload to a machine of architecture `arch`: `explicit` when given (its ELF
/// architecture must match), this executable when the architectures agree, otherwise a cross-built binary at
/// `target/<arch>-unknown-linux-gnu/release/tpu-sdk` under `search_root`.
pub fn runtime_binary(arch: &str, explicit: Option<&Path>, search_root: &Path) -> Result<PathBuf> {
    let check = |p: &Path| -> Result<PathBuf> {
        match elf_arch(p) {
            Some(a) if a == arch => Ok(p.to_path_buf()),
            Some(a) => Err(Error::Device(format!("{} is built for {a}, but the remote machine is {arch}", p.display()))),
            None => Err(Error::Device(format!("{} is not a Linux executable (ELF)", p.display()))),
        }
    };
    if let Some(p) = explicit {
        return check(p);
    }
    if arch == std::env::consts::ARCH {
        return std::env::current_exe().map_err(|e| Error::Device(format!("cannot find this tpu-sdk executable: {e}")));
    }
    let cross = search_root.join(format!("target/{arch}-unknown-linux-gnu/release/tpu-sdk"));
    if cross.is_file() {
        return check(&cross);
    }
    Err(Error::Device(format!(
        "the remote machine is {arch} and this tpu-sdk is {}: cross-build one (`rustup target add {arch}-unknown-linux-gnu && cargo build --release -p tpu-sdk --target {arch}-unknown-linux-gnu`, needs a {arch} linker such as gcc-aarch64-linux-gnu) or pass --runtime-binary PATH",
        std::env::consts::ARCH
    )))
}
