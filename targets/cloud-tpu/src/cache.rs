//! The on-disk compilation cache: serialized executables keyed by everything that determines them.
//!
//! Key: SHA-256 of the plugin (path, size, modification time, API version), the platform (name and version),
//! the program text and the serialized compile options. A hit loads the executable with
//! `PJRT_Executable_DeserializeAndLoad`; anything unreadable or rejected by the plugin is recompiled and
//! overwritten. Entries are written atomically (temporary file, then rename), so concurrent processes sharing a
//! folder never read a partial file.

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::error::Result;
use crate::pjrt::{Client, CompileOptions, LoadedExecutable, Plugin};

/// A folder of compiled executables.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CompileCache {
    dir: PathBuf,
}

/// Whether [`CompileCache::compile`] compiled or loaded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CacheOutcome {
    /// Loaded from the cache.
    Hit,
    /// Compiled (and stored).
    Miss,
}

impl CompileCache {
    /// A cache in `dir` (created on first store).
    pub fn new(dir: impl Into<PathBuf>) -> CompileCache {
        CompileCache { dir: dir.into() }
    }

    /// The folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The cache key of compiling `mlir` with `options` on `client` of `plugin`.
    pub fn key(plugin: &Plugin, client: &Client, mlir: &str, options: &CompileOptions) -> Result<String> {
        let mut h = Sha256::new();
        h.update(b"tpu-sdk pjrt compile cache v1\0");
        h.update(plugin.path().as_os_str().as_encoded_bytes());
        h.update(b"\0");
        if let Ok(m) = std::fs::metadata(plugin.path()) {
            h.update(m.len().to_le_bytes());
            if let Ok(t) = m.modified().and_then(|t| t.duration_since(std::time::UNIX_EPOCH).map_err(std::io::Error::other)) {
                h.update(t.as_nanos().to_le_bytes());
            }
        }
        let (major, minor) = plugin.api_version();
        h.update(major.to_le_bytes());
        h.update(minor.to_le_bytes());
        h.update(client.platform_name()?.as_bytes());
        h.update(b"\0");
        h.update(client.platform_version()?.as_bytes());
        h.update(b"\0");
        h.update(options.encode());
        h.update(b"\0");
        h.update(mlir.as_bytes());
        Ok(h.finalize().iter().map(|b| format!("{b:02x}")).collect())
    }

    /// Loads the executable for `mlir` from the cache, or compiles and stores it.
    pub fn compile(
        &self,
        plugin: &Plugin,
        client: &Client,
        mlir: &str,
        options: &CompileOptions,
    ) -> Result<(LoadedExecutable, CacheOutcome)> {
        let key = Self::key(plugin, client, mlir, options)?;
        let path = self.dir.join(format!("{key}.pjrt"));
        if let Ok(bytes) = std::fs::read(&path) {
            if let Ok(exe) = client.load_serialized(&bytes) {
                return Ok((exe, CacheOutcome::Hit));
            }
        }
        let exe = client.compile(mlir, options)?;
        // Storing is best effort: a read-only or full disk must not fail the compilation.
        if let Ok(bytes) = exe.serialize() {
            let _ = self.store(&path, &bytes);
        }
        Ok((exe, CacheOutcome::Miss))
    }

    fn store(&self, path: &Path, bytes: &[u8]) -> std::io::Result<()> {
        std::fs::create_dir_all(&self.dir)?;
        let tmp = self.dir.join(format!(
            ".{}.{}.tmp",
            path.file_name().and_then(|n| n.to_str()).unwrap_or("entry"),
            std::process::id()
        ));
        std::fs::write(&tmp, bytes)?;
        std::fs::rename(&tmp, path)
    }
}
