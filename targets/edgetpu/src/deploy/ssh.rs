//! A connection to a remote machine through the system's `ssh`.
//!
//! Why the `ssh` binary and not an SSH library: it already knows the user's keys, agent, `~/.ssh/config`
//! (jump hosts, aliases) and `known_hosts`, and needs no async runtime. Every command runs with
//! `BatchMode=yes` (never a password prompt that would hang a script) over one shared connection
//! (`ControlMaster`, socket in a private temp folder), so a deploy authenticates once. Files are streamed
//! through `ssh HOST 'cat > TMP'`, which lets the caller report progress byte by byte.
//!
//! ssh exits with 255 for its own failures and with the remote command's status otherwise;
//! [`classify`] turns ssh's messages into errors that say what to fix.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use tpu_sdk_core::target::Progress;
use tpu_sdk_core::{Error, Result};

/// How to reach the remote machine.
#[derive(Clone, Debug, Default)]
pub struct SshConfig {
    /// `user@host` or a `~/.ssh/config` alias.
    pub host: String,
    /// Port (`-p`); `None` uses ssh's default or config.
    pub port: Option<u16>,
    /// Private key (`-i`, with `IdentitiesOnly=yes`); `None` uses the agent and default keys.
    pub identity: Option<PathBuf>,
    /// Extra `-o` options (`KEY=VALUE`), e.g. `UserKnownHostsFile=...`.
    pub options: Vec<String>,
    /// The ssh program (default `ssh`).
    pub program: Option<PathBuf>,
}

/// An open connection: a control socket shared by every command. Dropping it closes the connection.
#[derive(Debug)]
pub struct Session {
    cfg: SshConfig,
    control_dir: PathBuf,
}

impl Session {
    /// Connects (authenticates once) and returns the session; the error says what failed (unreachable host,
    /// key refused, unknown host key).
    pub fn connect(cfg: SshConfig) -> Result<Session> {
        if cfg.host.trim().is_empty() || cfg.host.starts_with('-') {
            return Err(Error::Device(format!("--host '{}': expected user@host", cfg.host)));
        }
        if let Some(id) = &cfg.identity {
            if !id.is_file() {
                return Err(Error::Device(format!("--identity {}: no such key file", id.display())));
            }
        }
        remove_stale_control_dirs();
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.subsec_nanos()).unwrap_or(0);
        let control_dir = std::env::temp_dir().join(format!("tpu-sdk-ssh-{}-{nanos:x}", std::process::id()));
        std::fs::create_dir(&control_dir).map_err(|e| Error::Io { path: control_dir.display().to_string(), source: e })?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let _ = std::fs::set_permissions(&control_dir, std::fs::Permissions::from_mode(0o700));
        }
        let s = Session { cfg, control_dir };
        let out = s.run("true")?;
        if !out.status.success() {
            return Err(classify(&s.cfg.host, &out));
        }
        Ok(s)
    }

    /// The host as given.
    pub fn host(&self) -> &str {
        &self.cfg.host
    }

    fn command(&self) -> Command {
        let mut c = Command::new(self.cfg.program.clone().unwrap_or_else(|| "ssh".into()));
        c.args(["-o", "BatchMode=yes", "-o", "ConnectTimeout=15", "-o", "ServerAliveInterval=15"]);
        c.args(["-o", "ControlMaster=auto", "-o", "ControlPersist=15"]);
        c.arg("-o").arg(format!("ControlPath={}", self.control_dir.join("s").display()));
        if let Some(p) = self.cfg.port {
            c.args(["-p", &p.to_string()]);
        }
        if let Some(id) = &self.cfg.identity {
            c.arg("-i").arg(id).args(["-o", "IdentitiesOnly=yes"]);
        }
        for o in &self.cfg.options {
            c.arg("-o").arg(o);
        }
        c
    }

    /// Runs `script` with `sh` on the remote machine and returns its output (the status is the script's, or
    /// 255 when ssh itself failed).
    pub fn run(&self, script: &str) -> Result<Output> {
        let mut c = self.command();
        c.arg("--").arg(&self.cfg.host).arg(format!("sh -c {}", quote(script)));
        c.stdin(Stdio::null());
        c.output().map_err(|e| spawn_error(&e))
    }

    /// Runs `script` and returns its stdout; a failure is a [`Error::Device`] that quotes the remote stderr.
    pub fn check(&self, what: &str, script: &str) -> Result<String> {
        let out = self.run(script)?;
        if out.status.code() == Some(255) {
            return Err(classify(&self.cfg.host, &out));
        }
        if !out.status.success() {
            let err = String::from_utf8_lossy(&out.stderr).trim().to_string();
            let hint = if err.contains("Permission denied") || err.contains("Read-only file system") { " (the remote user may not write there: choose another --remote-dir)" } else { "" };
            return Err(Error::Device(format!("{what} on {} failed: {err}{hint}", self.cfg.host)));
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// Streams `len` bytes from `src` into the remote `script` 's stdin (e.g. `cat > FILE`), reporting progress
    /// as `what`. A read error or a failed transfer is an error; what the remote wrote stays where it is.
    pub fn upload(&self, src: &mut dyn Read, len: u64, script: &str, what: &str, progress: &Progress) -> Result<()> {
        let mut c = self.command();
        c.arg("--").arg(&self.cfg.host).arg(format!("sh -c {}", quote(script)));
        c.stdin(Stdio::piped()).stdout(Stdio::null()).stderr(Stdio::piped());
        let mut child = c.spawn().map_err(|e| spawn_error(&e))?;
        let mut stdin = child.stdin.take().expect("stdin is piped");
        let mut buf = vec![0u8; 256 * 1024];
        let mut done = 0u64;
        progress.report(what, 0, len);
        let copied: std::io::Result<()> = (|| loop {
            let n = src.read(&mut buf)?;
            if n == 0 {
                return match done == len {
                    true => Ok(()),
                    false => Err(std::io::Error::new(std::io::ErrorKind::UnexpectedEof, format!("the source ended after {done} of {len} bytes"))),
                };
            }
            stdin.write_all(&buf[..n])?;
            done += n as u64;
            progress.report(what, done.min(len), len);
        })();
        drop(stdin);
        let out = child.wait_with_output().map_err(|e| spawn_error(&e))?;
        if out.status.code() == Some(255) {
            return Err(classify(&self.cfg.host, &out));
        }
        if let Err(e) = copied {
            return Err(Error::Device(format!("upload to {} interrupted after {done} of {len} bytes: {e}", self.cfg.host)));
        }
        if !out.status.success() {
            let err = String::from_utf8_lossy(&out.stderr).trim().to_string();
            return Err(Error::Device(format!("upload to {} failed: {err}", self.cfg.host)));
        }
        Ok(())
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        let mut c = self.command();
        c.args(["-O", "exit", "--"]).arg(&self.cfg.host).stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null());
        let _ = c.status();
        let _ = std::fs::remove_dir_all(&self.control_dir);
    }
}

/// Removes the empty control folders of deploys that were killed (their process is gone; the ssh master
/// removed its socket when it timed out). A folder that still holds a socket is left alone.
fn remove_stale_control_dirs() {
    if !cfg!(target_os = "linux") {
        return; // process liveness is read from /proc
    }
    let Ok(rd) = std::fs::read_dir(std::env::temp_dir()) else { return };
    for e in rd.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(pid) = name.strip_prefix("tpu-sdk-ssh-").and_then(|r| r.split('-').next()).and_then(|p| p.parse::<u32>().ok()) else { continue };
        if pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_dir(e.path());
        }
    }
}

fn spawn_error(e: &std::io::Error) -> Error {
    if e.kind() == std::io::ErrorKind::NotFound {
        Error::Device("the `ssh` program is not installed (Debian/Ubuntu: sudo apt-get install openssh-client)".into())
    } else {
        Error::Device(format!("cannot start ssh: {e}"))
    }
}

/// Turns a failed ssh's stderr into an error that says what to fix.
pub fn classify(host: &str, out: &Output) -> Error {
    let err = String::from_utf8_lossy(&out.stderr);
    let said: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty() && !l.starts_with("Warning: Permanently added")).collect();
    let said = said.join("; ");
    let what = if err.contains("Permission denied") || err.contains("Too many authentication failures") {
        format!("{host} refused the login: the key was not accepted (check --identity, and that its public key is in the remote ~/.ssh/authorized_keys; passwords are never asked)")
    } else if err.contains("Host key verification failed") || err.contains("REMOTE HOST IDENTIFICATION HAS CHANGED") {
        format!("the host key of {host} is unknown or changed: connect once with `ssh {host}` to check and accept it, or fix ~/.ssh/known_hosts")
    } else if ["Connection refused", "Could not resolve hostname", "timed out", "No route to host", "Network is unreachable", "Connection closed by", "Connection reset"]
        .iter()
        .any(|m| err.contains(m))
    {
        format!("cannot reach {host}: is the machine on and sshd running, and are host and --port right?")
    } else {
        format!("ssh to {host} failed")
    };
    Error::Device(format!("{what} (ssh said: {})", if said.is_empty() { "nothing" } else { &said }))
}

/// Quotes `s` for a POSIX shell (single quotes).
pub fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// A remote path as a shell word: `~/x` becomes `"$HOME"/'x'` so the remote shell expands the home folder.
pub fn remote_word(path: &str) -> String {
    if path == "~" {
        "\"$HOME\"".into()
    } else if let Some(rest) = path.strip_prefix("~/") {
        format!("\"$HOME\"/{}", quote(rest))
    } else {
        quote(path)
    }
}

/// The parent of a remote path (`~/a/b` → `~/a`).
pub fn remote_parent(path: &str) -> String {
    let p = Path::new(path.trim_end_matches('/'));
    p.parent().map(|p| p.display().to_string()).filter(|s| !s.is_empty()).unwrap_or_else(|| ".".into())
}
