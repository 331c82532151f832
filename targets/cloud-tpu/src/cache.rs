//! The on-disk compilation cache: serialized executables keyed by everything that determines them.
//!
//! - **Key**: SHA-256 of the plugin (path, size, modification time, API version), the platform (name and
//!   version), the serialized compile options (replicas, partitions, device assignment) and the program text
//!   (which carries the sharding annotations). A topology compiled ahead of time is part of the key too
//!   ([`CompileCache::key_for`]).
//! - **Entries** (`KEY.pjrt`): a header (magic, SHA-256 of the payload, how long the compilation took) and the
//!   plugin's serialized executable. An entry whose checksum does not match, or that the plugin rejects, is
//!   removed and recompiled, never loaded.
//! - **Atomic writes**: a temporary file in the same folder, then a rename; readers never see a partial entry.
//! - **Lock**: `KEY.lock`, created with `O_EXCL` and holding the owner's process id. A process (or thread) that
//!   finds it waits for the owner to finish and then loads the owner's entry, so parallel processes compile a
//!   program once. A lock whose owner process is gone, or that is older than [`STALE_LOCK_SECS`], is stale and
//!   taken over.
//! - **Size limit**: after each store the least recently used entries (by modification time, which a hit
//!   refreshes) are removed until the folder holds at most [`CompileCache::max_bytes`].
//! - **In memory**: in front of the folder, the last [`MEMORY_ENTRIES`] executables this process compiled or
//!   loaded stay loaded, keyed by (folder, key, client): compiling the same program again in one process (a
//!   second model instance, a server re-preparing a model) costs one hash of the program and no plugin call
//!   ([`CacheOutcome::MemoryHit`]). Memory hits are not counted in the folder's statistics.
//! - **Statistics** (`stats`): hits, misses, corrupt entries, evictions, and the total time spent compiling
//!   (misses) and loading (hits), from which `tpu-sdk cache stats` prints the measured hit speedup.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant, SystemTime};

use sha2::{Digest, Sha256};

use crate::error::Result;
use crate::pjrt::{Client, CompileOptions, LoadedExecutable, Plugin};

/// First bytes of every entry.
const MAGIC: &[u8; 8] = b"TPUSDKX1";
/// Header length: magic, SHA-256 of the payload, compile time in nanoseconds (u64 LE).
const HEADER: usize = 8 + 32 + 8;
/// A lock file older than this is considered abandoned (a compilation never takes this long).
pub const STALE_LOCK_SECS: u64 = 1800;
/// How many executables the in-memory layer keeps loaded per process (least recently used ones are dropped).
pub const MEMORY_ENTRIES: usize = 32;
/// Default size limit (bytes) when `$TPU_SDK_COMPILE_CACHE_MAX_MB` is not set: 2 GiB.
pub const DEFAULT_MAX_BYTES: u64 = 2 << 30;

/// A folder of compiled executables.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CompileCache {
    dir: PathBuf,
    max_bytes: u64,
}

/// Whether [`CompileCache::compile`] compiled or loaded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CacheOutcome {
    /// Loaded from the cache folder.
    Hit,
    /// Already loaded in this process (the in-memory layer): nothing was read or compiled.
    MemoryHit,
    /// Compiled (and stored).
    Miss,
}

impl CacheOutcome {
    /// `hit`, `memory-hit` or `miss` (JSON output).
    pub fn name(self) -> &'static str {
        match self {
            CacheOutcome::Hit => "hit",
            CacheOutcome::MemoryHit => "memory-hit",
            CacheOutcome::Miss => "miss",
        }
    }
}

/// What one cache lookup did, with its timings.
#[derive(Clone, Debug, PartialEq)]
pub struct CacheReport {
    /// Hit or miss.
    pub outcome: CacheOutcome,
    /// The entry's key (hex SHA-256).
    pub key: String,
    /// Seconds this lookup took: loading (hit) or compiling (miss).
    pub seconds: f64,
    /// Seconds the entry took to compile when it was stored (known on hits and misses).
    pub compile_seconds: Option<f64>,
    /// True when an existing entry was corrupt (bad checksum or rejected by the plugin) and was recompiled.
    pub recovered_corrupt: bool,
    /// Entries removed to respect the size limit after storing.
    pub evicted: usize,
}

impl CacheReport {
    /// Compile time divided by load time, on a hit.
    pub fn speedup(&self) -> Option<f64> {
        match (self.outcome, self.compile_seconds) {
            (CacheOutcome::Hit | CacheOutcome::MemoryHit, Some(c)) if self.seconds > 0.0 => Some(c / self.seconds),
            _ => None,
        }
    }

    /// One line for summaries: `cache hit: loaded in 3.1 ms (compiled in 412.0 ms: 133x faster)`.
    pub fn describe(&self) -> String {
        match self.outcome {
            CacheOutcome::Hit => match (self.compile_seconds, self.speedup()) {
                (Some(c), Some(s)) => format!(
                    "compile cache hit: loaded in {:.1} ms (compiling took {:.1} ms: {s:.0}x faster)",
                    self.seconds * 1e3,
                    c * 1e3
                ),
                _ => format!("compile cache hit: loaded in {:.1} ms", self.seconds * 1e3),
            },
            CacheOutcome::MemoryHit => format!(
                "compile cache hit in memory: reused in {:.3} ms{}",
                self.seconds * 1e3,
                self.compile_seconds.map(|c| format!(" (compiling took {:.1} ms)", c * 1e3)).unwrap_or_default()
            ),
            CacheOutcome::Miss => format!(
                "compile cache miss: compiled in {:.1} ms and stored{}{}",
                self.seconds * 1e3,
                if self.recovered_corrupt { " (a corrupt entry was replaced)" } else { "" },
                if self.evicted > 0 { format!(", {} old entr(y/ies) evicted", self.evicted) } else { String::new() }
            ),
        }
    }
}

/// Totals of a cache folder (`tpu-sdk cache stats`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CacheStats {
    /// The folder.
    pub dir: PathBuf,
    /// Number of entries.
    pub entries: usize,
    /// Bytes used by the entries.
    pub bytes: u64,
    /// The size limit.
    pub max_bytes: u64,
    /// Lookups answered from the cache.
    pub hits: u64,
    /// Lookups that compiled.
    pub misses: u64,
    /// Corrupt entries found (and recompiled).
    pub corrupt: u64,
    /// Entries evicted by the size limit.
    pub evictions: u64,
    /// Total seconds spent compiling on misses.
    pub compile_seconds: f64,
    /// Total seconds spent loading on hits.
    pub load_seconds: f64,
}

impl CacheStats {
    /// Mean compile time of a miss divided by the mean load time of a hit (the measured hit speedup).
    pub fn speedup(&self) -> Option<f64> {
        if self.hits == 0 || self.misses == 0 || self.load_seconds <= 0.0 {
            return None;
        }
        Some((self.compile_seconds / self.misses as f64) / (self.load_seconds / self.hits as f64))
    }
}

/// The cache folder the command line uses: `$TPU_SDK_COMPILE_CACHE` (`off`, `0` or `none` disables the
/// cache), else `$XDG_CACHE_HOME/tpu-sdk/xla`, else `~/.cache/tpu-sdk/xla`. `None` when disabled or when no
/// home folder is known.
pub fn default_dir() -> Option<PathBuf> {
    dir_from(|k| std::env::var_os(k).filter(|v| !v.is_empty()).map(PathBuf::from))
}

fn dir_from(get: impl Fn(&str) -> Option<PathBuf>) -> Option<PathBuf> {
    if let Some(v) = get("TPU_SDK_COMPILE_CACHE") {
        let s = v.to_string_lossy().to_ascii_lowercase();
        return if ["off", "0", "none", "false"].contains(&s.as_str()) { None } else { Some(v) };
    }
    if let Some(x) = get("XDG_CACHE_HOME") {
        return Some(x.join("tpu-sdk/xla"));
    }
    get("HOME").map(|h| h.join(".cache/tpu-sdk/xla"))
}

/// The size limit from `$TPU_SDK_COMPILE_CACHE_MAX_MB` (mebibytes), else [`DEFAULT_MAX_BYTES`].
pub fn default_max_bytes() -> u64 {
    std::env::var("TPU_SDK_COMPILE_CACHE_MAX_MB")
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map_or(DEFAULT_MAX_BYTES, |mb| mb.saturating_mul(1 << 20))
}

impl CompileCache {
    /// A cache in `dir` (created on first store) with the size limit of [`default_max_bytes`].
    pub fn new(dir: impl Into<PathBuf>) -> CompileCache {
        CompileCache { dir: dir.into(), max_bytes: default_max_bytes() }
    }

    /// The same cache with another size limit (bytes).
    pub fn with_max_bytes(mut self, max_bytes: u64) -> CompileCache {
        self.max_bytes = max_bytes;
        self
    }

    /// The folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The size limit in bytes.
    pub fn max_bytes(&self) -> u64 {
        self.max_bytes
    }

    /// The cache key of compiling `mlir` with `options` on `client` of `plugin`.
    pub fn key(plugin: &Plugin, client: &Client, mlir: &str, options: &CompileOptions) -> Result<String> {
        Self::key_for(plugin, &client.platform_name()?, &client.platform_version()?, None, mlir, options)
    }

    /// The cache key from its parts: the plugin file and API version, the platform name and version, the
    /// topology of an ahead-of-time compilation (`None`: the local devices), the program and the options.
    pub fn key_for(
        plugin: &Plugin,
        platform: &str,
        platform_version: &str,
        topology: Option<&str>,
        mlir: &str,
        options: &CompileOptions,
    ) -> Result<String> {
        let mut h = Sha256::new();
        h.update(b"tpu-sdk pjrt compile cache v2\0");
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
        for part in [platform, platform_version, topology.unwrap_or("<local>")] {
            h.update(part.as_bytes());
            h.update(b"\0");
        }
        h.update(options.encode());
        h.update(b"\0");
        h.update(mlir.as_bytes());
        Ok(hex(&h.finalize()))
    }

    fn entry_path(&self, key: &str) -> PathBuf {
        self.dir.join(format!("{key}.pjrt"))
    }

    /// Loads the executable for `mlir` from the cache, or compiles and stores it.
    pub fn compile(
        &self,
        plugin: &Plugin,
        client: &Client,
        mlir: &str,
        options: &CompileOptions,
    ) -> Result<(LoadedExecutable, CacheOutcome)> {
        self.compile_reported(plugin, client, mlir, options).map(|(e, r)| (e, r.outcome))
    }

    /// [`CompileCache::compile`] with what happened and how long it took.
    pub fn compile_reported(
        &self,
        plugin: &Plugin,
        client: &Client,
        mlir: &str,
        options: &CompileOptions,
    ) -> Result<(LoadedExecutable, CacheReport)> {
        let key = Self::key(plugin, client, mlir, options)?;
        let t0 = Instant::now();
        if let Some((exe, compile_seconds)) = memory_get(&self.dir, &key, client.id()) {
            let report = CacheReport {
                outcome: CacheOutcome::MemoryHit,
                key,
                seconds: t0.elapsed().as_secs_f64(),
                compile_seconds,
                recovered_corrupt: false,
                evicted: 0,
            };
            return Ok((exe, report));
        }
        let load = |bytes: &[u8]| client.load_serialized(bytes).ok();
        let compile = || {
            let exe = client.compile(mlir, options)?;
            let bytes = exe.serialize().ok();
            Ok((exe, bytes))
        };
        let (exe, report) = self.get_or_compile(&key, load, compile)?;
        memory_put(&self.dir, &key, client.id(), &exe, report.compile_seconds);
        Ok((exe, report))
    }

    /// Drops this folder's executables from the in-memory layer (the next lookup reads the folder).
    pub fn forget_in_memory(&self) {
        memory().lock().unwrap_or_else(|p| p.into_inner()).entries.retain(|e| e.dir != self.dir);
    }

    /// The cache protocol, independent of what is cached: `load` turns a verified payload into a value (`None`:
    /// the plugin rejects it, so it is treated as corrupt), `compile` makes the value and, when it can be
    /// serialized, its payload. Holds the entry's lock while compiling.
    pub fn get_or_compile<T>(
        &self,
        key: &str,
        load: impl Fn(&[u8]) -> Option<T>,
        compile: impl FnOnce() -> Result<(T, Option<Vec<u8>>)>,
    ) -> Result<(T, CacheReport)> {
        let path = self.entry_path(key);
        let mut corrupt = false;
        let t0 = Instant::now();
        if let Some(v) = self.try_load(&path, &load, &mut corrupt) {
            return Ok(self.hit(key, &path, v, t0));
        }
        // Take the entry's lock; if another process holds it, wait for its entry instead of compiling too.
        let lock = loop {
            match Lock::acquire(&self.dir, key) {
                Ok(Some(l)) => break Some(l),
                Ok(None) => {
                    std::thread::sleep(Duration::from_millis(15));
                    if path.is_file() {
                        let t0 = Instant::now();
                        if let Some(v) = self.try_load(&path, &load, &mut corrupt) {
                            return Ok(self.hit(key, &path, v, t0));
                        }
                    }
                }
                // The folder cannot be created or written: compile without the cache.
                Err(_) => break None,
            }
        };
        // The owner before us may have stored the entry between our first look and taking the lock.
        let t0 = Instant::now();
        if lock.is_some() {
            if let Some(v) = self.try_load(&path, &load, &mut corrupt) {
                return Ok(self.hit(key, &path, v, t0));
            }
        }
        let t0 = Instant::now();
        let (value, bytes) = compile()?;
        let seconds = t0.elapsed().as_secs_f64();
        let mut evicted = 0;
        // Storing is best effort: a read-only or full disk must not fail the compilation.
        if let (Some(bytes), Some(_)) = (bytes, &lock) {
            if self.store(&path, &bytes, seconds).is_ok() {
                evicted = self.evict(&path);
            }
        }
        drop(lock);
        self.record(|s| {
            s.misses += 1;
            s.compile_seconds += seconds;
            s.corrupt += corrupt as u64;
            s.evictions += evicted as u64;
        });
        let report = CacheReport {
            outcome: CacheOutcome::Miss,
            key: key.to_string(),
            seconds,
            compile_seconds: Some(seconds),
            recovered_corrupt: corrupt,
            evicted,
        };
        Ok((value, report))
    }

    /// Reads and verifies an entry; a corrupt one is removed (and `corrupt` set).
    fn try_load<T>(&self, path: &Path, load: &impl Fn(&[u8]) -> Option<T>, corrupt: &mut bool) -> Option<(T, f64)> {
        let bytes = std::fs::read(path).ok()?;
        let verified = parse_entry(&bytes).and_then(|(compile_s, payload)| load(payload).map(|v| (v, compile_s)));
        if verified.is_none() {
            *corrupt = true;
            let _ = std::fs::remove_file(path);
        }
        verified
    }

    fn hit<T>(&self, key: &str, path: &Path, (value, compile_s): (T, f64), t0: Instant) -> (T, CacheReport) {
        let seconds = t0.elapsed().as_secs_f64();
        // Least recently used: a hit makes the entry young again.
        if let Ok(f) = std::fs::File::options().write(true).open(path) {
            let _ = f.set_modified(SystemTime::now());
        }
        self.record(|s| {
            s.hits += 1;
            s.load_seconds += seconds;
        });
        let report = CacheReport {
            outcome: CacheOutcome::Hit,
            key: key.to_string(),
            seconds,
            compile_seconds: Some(compile_s),
            recovered_corrupt: false,
            evicted: 0,
        };
        (value, report)
    }

    fn store(&self, path: &Path, payload: &[u8], compile_seconds: f64) -> std::io::Result<()> {
        std::fs::create_dir_all(&self.dir)?;
        let mut bytes = Vec::with_capacity(HEADER + payload.len());
        bytes.extend_from_slice(MAGIC);
        bytes.extend_from_slice(&Sha256::digest(payload));
        bytes.extend_from_slice(&((compile_seconds * 1e9) as u64).to_le_bytes());
        bytes.extend_from_slice(payload);
        write_atomically(path, &bytes)
    }

    /// Removes the least recently used entries (never `keep`) until the folder is within the size limit.
    fn evict(&self, keep: &Path) -> usize {
        let mut entries = self.entries();
        let mut total: u64 = entries.iter().map(|e| e.1).sum();
        if total <= self.max_bytes {
            return 0;
        }
        entries.sort_by_key(|e| e.2);
        let mut n = 0;
        for (p, size, _) in entries {
            if total <= self.max_bytes {
                break;
            }
            if p == keep {
                continue;
            }
            if std::fs::remove_file(&p).is_ok() {
                total -= size;
                n += 1;
            }
        }
        n
    }

    /// (path, bytes, last use) of every entry.
    fn entries(&self) -> Vec<(PathBuf, u64, SystemTime)> {
        let Ok(rd) = std::fs::read_dir(&self.dir) else { return Vec::new() };
        rd.flatten()
            .filter(|e| e.path().extension().is_some_and(|x| x == "pjrt"))
            .filter_map(|e| {
                let m = e.metadata().ok()?;
                Some((e.path(), m.len(), m.modified().unwrap_or(SystemTime::UNIX_EPOCH)))
            })
            .collect()
    }

    /// Entries, bytes and the recorded counters.
    pub fn stats(&self) -> CacheStats {
        let entries = self.entries();
        let mut s = read_stats(&self.dir.join("stats"));
        s.dir = self.dir.clone();
        s.entries = entries.len();
        s.bytes = entries.iter().map(|e| e.1).sum();
        s.max_bytes = self.max_bytes;
        s
    }

    /// Removes every entry, lock and the counters; returns (entries removed, bytes freed).
    pub fn clear(&self) -> std::io::Result<(usize, u64)> {
        self.forget_in_memory();
        let entries = self.entries();
        let mut freed = (0, 0);
        for (p, size, _) in entries {
            std::fs::remove_file(&p)?;
            freed.0 += 1;
            freed.1 += size;
        }
        if let Ok(rd) = std::fs::read_dir(&self.dir) {
            for e in rd.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                if name == "stats" || name.ends_with(".tmp") || name.ends_with(".lock") {
                    let _ = std::fs::remove_file(e.path());
                }
            }
        }
        Ok(freed)
    }

    /// Updates the counters under the `stats` lock (best effort: skipped when the folder is not writable).
    fn record(&self, f: impl FnOnce(&mut CacheStats)) {
        if std::fs::create_dir_all(&self.dir).is_err() {
            return;
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        let lock = loop {
            match Lock::acquire(&self.dir, "stats") {
                Ok(Some(l)) => break l,
                Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(2)),
                _ => return,
            }
        };
        let path = self.dir.join("stats");
        let mut s = read_stats(&path);
        f(&mut s);
        let text = format!(
            "hits {}\nmisses {}\ncorrupt {}\nevictions {}\ncompile_seconds {}\nload_seconds {}\n",
            s.hits, s.misses, s.corrupt, s.evictions, s.compile_seconds, s.load_seconds
        );
        let _ = write_atomically(&path, text.as_bytes());
        drop(lock);
    }
}

/// One executable of the in-memory layer.
struct MemoryEntry {
    dir: PathBuf,
    key: String,
    client: usize,
    exe: LoadedExecutable,
    compile_seconds: Option<f64>,
    last_use: u64,
}

/// The in-memory layer: entries and a use counter (for least-recently-used order).
#[derive(Default)]
struct Memory {
    entries: Vec<MemoryEntry>,
    clock: u64,
}

fn memory() -> &'static Mutex<Memory> {
    static MEMORY: OnceLock<Mutex<Memory>> = OnceLock::new();
    MEMORY.get_or_init(Mutex::default)
}

/// The executable kept for (dir, key, client), with the time its compilation took.
fn memory_get(dir: &Path, key: &str, client: usize) -> Option<(LoadedExecutable, Option<f64>)> {
    let mut m = memory().lock().unwrap_or_else(|p| p.into_inner());
    m.clock += 1;
    let now = m.clock;
    let e = m.entries.iter_mut().find(|e| e.client == client && e.key == key && e.dir == dir)?;
    e.last_use = now;
    Some((e.exe.clone(), e.compile_seconds))
}

/// Keeps `exe` for (dir, key, client), dropping the least recently used entry beyond [`MEMORY_ENTRIES`].
/// An entry holds its client alive, so a client id is never reused while an entry names it.
fn memory_put(dir: &Path, key: &str, client: usize, exe: &LoadedExecutable, compile_seconds: Option<f64>) {
    let mut m = memory().lock().unwrap_or_else(|p| p.into_inner());
    m.clock += 1;
    let last_use = m.clock;
    m.entries.retain(|e| !(e.client == client && e.key == key && e.dir == dir));
    if m.entries.len() >= MEMORY_ENTRIES {
        if let Some(oldest) = m.entries.iter().enumerate().min_by_key(|(_, e)| e.last_use).map(|(i, _)| i) {
            m.entries.swap_remove(oldest);
        }
    }
    m.entries.push(MemoryEntry { dir: dir.to_path_buf(), key: key.to_string(), client, exe: exe.clone(), compile_seconds, last_use });
}

/// (compile seconds, payload) of a well-formed entry whose checksum matches.
fn parse_entry(bytes: &[u8]) -> Option<(f64, &[u8])> {
    if bytes.len() < HEADER || &bytes[..8] != MAGIC {
        return None;
    }
    let payload = &bytes[HEADER..];
    if Sha256::digest(payload).as_slice() != &bytes[8..40] {
        return None;
    }
    let nanos = u64::from_le_bytes(bytes[40..48].try_into().ok()?);
    Some((nanos as f64 / 1e9, payload))
}

fn read_stats(path: &Path) -> CacheStats {
    let mut s = CacheStats::default();
    if let Ok(text) = std::fs::read_to_string(path) {
        for line in text.lines() {
            let Some((k, v)) = line.split_once(' ') else { continue };
            match k {
                "hits" => s.hits = v.parse().unwrap_or(0),
                "misses" => s.misses = v.parse().unwrap_or(0),
                "corrupt" => s.corrupt = v.parse().unwrap_or(0),
                "evictions" => s.evictions = v.parse().unwrap_or(0),
                "compile_seconds" => s.compile_seconds = v.parse().unwrap_or(0.0),
                "load_seconds" => s.load_seconds = v.parse().unwrap_or(0.0),
                _ => {}
            }
        }
    }
    s
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|b| format!("{b:02x}")).collect()
}

/// Writes `bytes` to `path` through a temporary file in the same folder and a rename.
pub(crate) fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    static SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "out".into());
    let seq = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let tmp = dir.join(format!(".{name}.{}.{seq}.tmp", std::process::id()));
    let result = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// An exclusive lock file (`NAME.lock`, created with `O_EXCL`), removed when dropped.
struct Lock {
    path: PathBuf,
}

impl Lock {
    /// `Ok(Some)` when taken, `Ok(None)` when another live owner holds it, `Err` when the folder is unusable.
    fn acquire(dir: &Path, name: &str) -> std::io::Result<Option<Lock>> {
        std::fs::create_dir_all(dir)?;
        let path = dir.join(format!("{name}.lock"));
        for _ in 0..2 {
            match std::fs::File::options().write(true).create_new(true).open(&path) {
                Ok(mut f) => {
                    let _ = write!(f, "{}", std::process::id());
                    return Ok(Some(Lock { path }));
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                    if !is_stale(&path) {
                        return Ok(None);
                    }
                    // The owner died: take the lock over (one retry).
                    let _ = std::fs::remove_file(&path);
                }
                Err(e) => return Err(e),
            }
        }
        Ok(None)
    }
}

impl Drop for Lock {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// A lock is stale when the process that wrote it no longer exists (checked through `/proc` where there is
/// one) or when it is older than [`STALE_LOCK_SECS`].
fn is_stale(path: &Path) -> bool {
    let Ok(meta) = std::fs::metadata(path) else { return false };
    let age = meta.modified().ok().and_then(|m| SystemTime::now().duration_since(m).ok()).unwrap_or_default();
    if age > Duration::from_secs(STALE_LOCK_SECS) {
        return true;
    }
    let owner = std::fs::read_to_string(path).ok().and_then(|s| s.trim().parse::<u32>().ok());
    match owner {
        Some(pid) if Path::new("/proc/self").exists() => !Path::new(&format!("/proc/{pid}")).exists(),
        // Being written right now (empty) or no /proc: trust the age alone.
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    fn tmp(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("tpu-sdk-cache-unit-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    type R<T> = Result<(T, Option<Vec<u8>>)>;

    #[test]
    fn default_dir_follows_the_environment() {
        let get = |m: &'static [(&'static str, &'static str)]| move |k: &str| m.iter().find(|e| e.0 == k).map(|e| PathBuf::from(e.1));
        assert_eq!(dir_from(get(&[("TPU_SDK_COMPILE_CACHE", "/c"), ("HOME", "/h")])), Some(PathBuf::from("/c")));
        assert_eq!(dir_from(get(&[("TPU_SDK_COMPILE_CACHE", "off"), ("HOME", "/h")])), None);
        assert_eq!(dir_from(get(&[("XDG_CACHE_HOME", "/x"), ("HOME", "/h")])), Some(PathBuf::from("/x/tpu-sdk/xla")));
        assert_eq!(dir_from(get(&[("HOME", "/h")])), Some(PathBuf::from("/h/.cache/tpu-sdk/xla")));
    }

    #[test]
    fn parallel_lookups_of_one_key_compile_once() {
        let dir = tmp("parallel");
        let compiles = Arc::new(AtomicUsize::new(0));
        let handles: Vec<_> = (0..4)
            .map(|_| {
                let (dir, compiles) = (dir.clone(), compiles.clone());
                std::thread::spawn(move || {
                    let c = CompileCache::new(&dir);
                    let (v, r) = c
                        .get_or_compile(
                            "k",
                            |b| Some(b.to_vec()),
                            || -> R<Vec<u8>> {
                                compiles.fetch_add(1, Ordering::SeqCst);
                                std::thread::sleep(Duration::from_millis(200));
                                Ok((b"exe".to_vec(), Some(b"exe".to_vec())))
                            },
                        )
                        .unwrap();
                    assert_eq!(v, b"exe");
                    r.outcome
                })
            })
            .collect();
        let outcomes: Vec<CacheOutcome> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        assert_eq!(compiles.load(Ordering::SeqCst), 1, "{outcomes:?}");
        assert_eq!(outcomes.iter().filter(|o| **o == CacheOutcome::Miss).count(), 1);
        let s = CompileCache::new(&dir).stats();
        assert_eq!((s.entries, s.hits, s.misses), (1, 3, 1));
        assert!(!dir.join("k.lock").exists());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_stale_lock_of_a_dead_process_is_taken_over() {
        let dir = tmp("stale");
        std::fs::create_dir_all(&dir).unwrap();
        // A pid that cannot exist (above the kernel's pid_max limit of 2^22).
        std::fs::write(dir.join("k.lock"), "4999999").unwrap();
        let (v, r) = CompileCache::new(&dir).get_or_compile("k", |b| Some(b.to_vec()), || -> R<Vec<u8>> { Ok((vec![1], Some(vec![1]))) }).unwrap();
        assert_eq!((v, r.outcome), (vec![1], CacheOutcome::Miss));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn corrupt_entries_are_recompiled_and_the_lru_entry_is_evicted() {
        let dir = tmp("lru");
        let c = CompileCache::new(&dir).with_max_bytes(2 * (HEADER as u64 + 100) + 10);
        let put = |k: &str| c.get_or_compile(k, |b| Some(b.to_vec()), || -> R<Vec<u8>> { Ok((vec![7; 100], Some(vec![7; 100]))) }).unwrap().1;
        assert_eq!(put("a").outcome, CacheOutcome::Miss);
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(put("b").outcome, CacheOutcome::Miss);
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(put("a").outcome, CacheOutcome::Hit, "a is now the most recently used");
        std::thread::sleep(Duration::from_millis(20));
        let r = put("c");
        assert_eq!((r.outcome, r.evicted), (CacheOutcome::Miss, 1));
        assert!(dir.join("a.pjrt").exists() && !dir.join("b.pjrt").exists() && dir.join("c.pjrt").exists());
        // Flip one payload byte: the checksum catches it and the entry is compiled again.
        let p = dir.join("a.pjrt");
        let mut bytes = std::fs::read(&p).unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        std::fs::write(&p, bytes).unwrap();
        let r = put("a");
        assert_eq!((r.outcome, r.recovered_corrupt), (CacheOutcome::Miss, true));
        assert_eq!(put("a").outcome, CacheOutcome::Hit);
        let s = c.stats();
        assert_eq!((s.corrupt, s.evictions, s.entries), (1, 1, 2));
        assert_eq!(c.clear().unwrap().0, s.entries);
        assert_eq!(c.stats().entries, 0);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
