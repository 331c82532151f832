//! `tpu-sdk deploy` against a real OpenSSH server that each test starts on 127.0.0.1 (a free port, host and
//! user keys generated in a temp folder). Checksums are checked with the system's `sha256sum`.
//!
//! Needs `sshd` and `ssh-keygen` (Debian: openssh-server, openssh-client). Without them the tests say so and
//! pass, unless TPU_SDK_REQUIRE_SSHD=1 (CI), where they fail.
#![cfg(feature = "edgetpu")]

use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use tpu_sdk_test_support::cli::{self, expect, noise};
use tpu_sdk_test_support::repo;

const SSHD: &str = "/usr/sbin/sshd";

/// A private sshd; killed when dropped.
struct Sshd {
    child: Child,
    port: u16,
    dir: tempfile::TempDir,
    user: String,
}

impl Drop for Sshd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn keygen(path: &Path) {
    let st = Command::new("ssh-keygen").args(["-q", "-t", "ed25519", "-N", "", "-C", "tpu-sdk-test", "-f"]).arg(path).status().unwrap();
    assert!(st.success(), "ssh-keygen failed");
}

fn current_user() -> String {
    let o = Command::new("id").arg("-un").output().unwrap();
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

/// Starts sshd, or returns `None` (after saying why) when it is not installed and not required.
fn sshd() -> Option<Sshd> {
    let have = Path::new(SSHD).exists() && Command::new("ssh-keygen").arg("-?").output().is_ok() && Command::new("ssh").arg("-V").output().is_ok();
    if !have {
        if std::env::var("TPU_SDK_REQUIRE_SSHD").as_deref() == Ok("1") {
            panic!("TPU_SDK_REQUIRE_SSHD=1 but {SSHD}, ssh or ssh-keygen is missing (apt-get install openssh-server openssh-client)");
        }
        eprintln!("SKIPPED: {SSHD} not found (apt-get install openssh-server openssh-client); deploy tests need a real SSH server");
        return None;
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    keygen(&d.join("host_key"));
    keygen(&d.join("user_key"));
    keygen(&d.join("other_key"));
    std::fs::copy(d.join("user_key.pub"), d.join("authorized_keys")).unwrap();
    let user = current_user();
    // sshd running as root insists on its privilege-separation folder.
    if user == "root" {
        let _ = std::fs::create_dir_all("/run/sshd");
    }
    let host_pub = std::fs::read_to_string(d.join("host_key.pub")).unwrap();
    // The port is picked by binding port 0 and letting it go, so another process (a parallel test's sshd, or an
    // outgoing connection's local port) can take it before this sshd binds it. A probe connection alone could
    // then reach someone else's listener; this sshd is up only once it wrote its pid file (after binding) and is
    // still running. Otherwise it is restarted on a fresh port.
    let mut log = String::new();
    for _attempt in 0..5 {
        let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let config = format!(
            "Port {port}\nListenAddress 127.0.0.1\nHostKey {d}/host_key\nPidFile {d}/sshd.pid\nAuthorizedKeysFile {d}/authorized_keys\n\
             StrictModes no\nUsePAM no\nPasswordAuthentication no\nKbdInteractiveAuthentication no\nPubkeyAuthentication yes\n\
             PermitRootLogin prohibit-password\nAllowUsers {user}\nLogLevel ERROR\nMaxStartups 50\nMaxSessions 50\n",
            d = d.display()
        );
        std::fs::write(d.join("sshd_config"), config).unwrap();
        std::fs::write(d.join("known_hosts"), format!("[127.0.0.1]:{port} {host_pub}")).unwrap();
        let _ = std::fs::remove_file(d.join("sshd.pid"));
        let mut child = Command::new(SSHD)
            .args(["-D", "-e", "-f"])
            .arg(d.join("sshd_config"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(d.join("sshd.log")).unwrap())
            .spawn()
            .unwrap();
        let pid = child.id().to_string();
        let t0 = Instant::now();
        let up = loop {
            if child.try_wait().unwrap().is_some() {
                break false; // it could not bind the port (or failed otherwise): see the log
            }
            let wrote_pid = std::fs::read_to_string(d.join("sshd.pid")).is_ok_and(|p| p.trim() == pid);
            if wrote_pid && TcpStream::connect(("127.0.0.1", port)).is_ok() {
                // Still ours after the probe: a bind failure would have ended it before the pid file.
                break child.try_wait().unwrap().is_none();
            }
            assert!(t0.elapsed() < Duration::from_secs(10), "sshd did not start: {}", std::fs::read_to_string(d.join("sshd.log")).unwrap_or_default());
            std::thread::sleep(Duration::from_millis(20));
        };
        if up {
            return Some(Sshd { child, port, dir, user });
        }
        let _ = child.kill();
        let _ = child.wait();
        log = std::fs::read_to_string(d.join("sshd.log")).unwrap_or_default();
    }
    panic!("sshd did not start on any of 5 free ports; its last log: {log}");
}

impl Sshd {
    fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }
    /// Arguments that reach this server with `key`.
    fn ssh_args(&self, key: &str) -> Vec<String> {
        vec![
            "--host".into(),
            format!("{}@127.0.0.1", self.user),
            "--port".into(),
            self.port.to_string(),
            "--identity".into(),
            self.path(key).display().to_string(),
            "--ssh-option".into(),
            format!("UserKnownHostsFile={}", self.path("known_hosts").display()),
            "--ssh-option".into(),
            "GlobalKnownHostsFile=/dev/null".into(),
            "--ssh-option".into(),
            "StrictHostKeyChecking=yes".into(),
        ]
    }
    /// `tpu-sdk deploy MODEL --target T ...` into the remote folder `remote/models`.
    fn deploy(&self, model: &Path, target: &str, extra: &[&str]) -> Output {
        self.deploy_cmd(model, target, extra).output().unwrap()
    }
    fn deploy_cmd(&self, model: &Path, target: &str, extra: &[&str]) -> Command {
        let mut c = cli::command(env!("CARGO_BIN_EXE_tpu-sdk"));
        c.args(["--threads", "2", "deploy"]).arg(model).args(["--target", target]);
        c.args(self.ssh_args("user_key")).arg("--remote-dir").arg(self.path("remote/models")).args(extra);
        c.stdin(Stdio::null());
        c
    }
}

fn json(o: Output) -> serde_json::Value {
    let (out, _) = expect(o, 0);
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("not JSON ({e}):\n{out}"))
}

/// SHA-256 by the system's `sha256sum` (the peer for our own hashing).
fn sha256sum(p: &Path) -> String {
    let o = Command::new("sha256sum").arg(p).output().unwrap();
    assert!(o.status.success());
    String::from_utf8_lossy(&o.stdout).split_whitespace().next().unwrap().to_string()
}

/// A file of noise named like a model: the upload tests deploy it with `--target cpu`, which uploads MODEL
/// as it is (for `--target edgetpu` a `.tflite` must be a real model: a float one is compiled first).
fn write_model(dir: &Path, name: &str, seed: u8, len: usize) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, noise(len, seed as u64 | 1)).unwrap();
    p
}

fn leftovers(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).filter(|n| n.contains(".upload.") || n.contains(".swap") || n.ends_with(".tmp")).collect()
}

#[test]
fn deploy_uploads_verifies_and_skips_the_second_time() {
    let Some(s) = sshd() else { return };
    let local = tempfile::tempdir().unwrap();
    let model = write_model(local.path(), "m.tflite", 1, 300_000);
    let doc = json(s.deploy(&model, "cpu", &["--json"]));
    let remote = s.path("remote/models/m.tflite");
    assert_eq!(std::fs::read(&remote).unwrap(), std::fs::read(&model).unwrap());
    assert_eq!(doc["model"]["sha256"], sha256sum(&model));
    assert_eq!(doc["model"]["uploaded_bytes"], 300_000);
    assert_eq!(doc["model"]["kept_previous"], false);
    let mtime = std::fs::metadata(&remote).unwrap().modified().unwrap();

    let doc = json(s.deploy(&model, "cpu", &["--json"]));
    assert_eq!(doc["model"]["uploaded_bytes"], 0, "the second deploy must skip the upload: {doc}");
    assert_eq!(std::fs::metadata(&remote).unwrap().modified().unwrap(), mtime);
    let (out, _) = expect(s.deploy(&model, "cpu", &[]), 0);
    assert!(out.contains("already up to date"), "{out}");
    assert!(leftovers(&s.path("remote/models")).is_empty());
}

#[test]
fn deploy_replaces_atomically_and_rolls_back() {
    use std::os::unix::fs::MetadataExt;
    let Some(s) = sshd() else { return };
    let local = tempfile::tempdir().unwrap();
    let v1 = write_model(local.path(), "v1.bin", 1, 50_000);
    let v2 = write_model(local.path(), "v2.bin", 2, 60_000);
    let model = local.path().join("net.tflite");
    let remote = s.path("remote/models/net.tflite");
    let prev = s.path("remote/models/net.tflite.prev");

    // Rolling back with nothing deployed is a clear error.
    std::fs::copy(&v1, &model).unwrap();
    let (_, err) = expect(s.deploy(&model, "cpu", &["--rollback"]), 4);
    assert!(err.contains("no previous version"), "{err}");

    expect(s.deploy(&model, "cpu", &[]), 0);
    let inode_v1 = std::fs::metadata(&remote).unwrap().ino();
    std::fs::copy(&v2, &model).unwrap();
    let (out, _) = expect(s.deploy(&model, "cpu", &[]), 0);
    assert!(out.contains("previous version kept"), "{out}");
    assert_eq!(sha256sum(&remote), sha256sum(&v2));
    assert_eq!(sha256sum(&prev), sha256sum(&v1));
    // Replaced by a rename (a new inode); the old file itself became .prev (a hard link, not a copy).
    assert_ne!(std::fs::metadata(&remote).unwrap().ino(), inode_v1);
    assert_eq!(std::fs::metadata(&prev).unwrap().ino(), inode_v1);
    assert!(leftovers(&s.path("remote/models")).is_empty());

    let doc = json(s.deploy(&model, "cpu", &["--rollback", "--json"]));
    assert_eq!(doc["model"]["sha256"], sha256sum(&v1));
    assert_eq!(sha256sum(&remote), sha256sum(&v1));
    assert_eq!(sha256sum(&prev), sha256sum(&v2));
    expect(s.deploy(&model, "cpu", &["--rollback"]), 0);
    assert_eq!(sha256sum(&remote), sha256sum(&v2));
    assert!(leftovers(&s.path("remote/models")).is_empty());
}

/// The deploy process is killed while the file is streaming: the remote model stays the old one, complete,
/// and the next deploy cleans up and succeeds.
#[test]
fn interrupted_upload_leaves_the_old_model() {
    let Some(s) = sshd() else { return };
    let local = tempfile::tempdir().unwrap();
    let model = local.path().join("big.tflite");
    let old = write_model(local.path(), "old.bin", 3, 10_000);
    std::fs::copy(&old, &model).unwrap();
    expect(s.deploy(&model, "cpu", &[]), 0);
    let remote_dir = s.path("remote/models");
    let remote = remote_dir.join("big.tflite");

    write_model(local.path(), "big.tflite", 4, 192 << 20);
    let mut child = s.deploy_cmd(&model, "cpu", &["--json"]).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
    let t0 = Instant::now();
    let mut seen = 0;
    while seen == 0 {
        assert!(t0.elapsed() < Duration::from_secs(60), "the upload never started");
        assert!(child.try_wait().unwrap().is_none(), "deploy finished before it could be interrupted");
        seen = std::fs::read_dir(&remote_dir)
            .unwrap()
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().contains(".upload."))
            .map(|e| e.metadata().map(|m| m.len()).unwrap_or(0))
            .max()
            .unwrap_or(0);
        std::thread::sleep(Duration::from_millis(1));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(sha256sum(&remote), sha256sum(&old), "an interrupted upload changed the model");
    assert!(!remote_dir.join("big.tflite.prev").exists());

    let doc = json(s.deploy(&model, "cpu", &["--json"]));
    assert_eq!(doc["model"]["uploaded_bytes"], 192 << 20);
    assert_eq!(sha256sum(&remote), sha256sum(&model));
    assert!(leftovers(&remote_dir).is_empty(), "{:?}", leftovers(&remote_dir));
}

/// A source that fails midway (a read error, like a vanished file) fails the upload and leaves the model.
#[test]
fn failed_stream_leaves_the_old_model() {
    use tpu_sdk_edgetpu::deploy::{install, install_from, Session, SshConfig};
    let Some(s) = sshd() else { return };
    let local = tempfile::tempdir().unwrap();
    let old = write_model(local.path(), "old.bin", 5, 20_000);
    let cfg = SshConfig {
        host: format!("{}@127.0.0.1", s.user),
        port: Some(s.port),
        identity: Some(s.path("user_key")),
        options: vec![format!("UserKnownHostsFile={}", s.path("known_hosts").display()), "StrictHostKeyChecking=yes".into()],
        program: None,
    };
    let session = Session::connect(cfg).unwrap();
    let dir = s.path("remote/lib").display().to_string();
    install(&session, &old, &dir, "x.tflite", false, &Default::default()).unwrap();

    /// `.0` bytes of 7, then an error (`.1`) or the end.
    struct Failing(usize, bool);
    impl std::io::Read for Failing {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            if self.0 == 0 && self.1 {
                return Err(std::io::Error::other("disk went away"));
            }
            let n = buf.len().min(self.0);
            buf[..n].fill(7);
            self.0 -= n;
            Ok(n)
        }
    }
    let e = install_from(&session, &mut Failing(100_000, true), 1_000_000, &"ab".repeat(32), &dir, "x.tflite", false, &Default::default()).unwrap_err();
    assert!(e.to_string().contains("interrupted"), "{e}");
    assert_eq!(sha256sum(&s.path("remote/lib/x.tflite")), sha256sum(&old));
    // A complete stream whose bytes do not match the expected checksum is rejected on the remote.
    let e = install_from(&session, &mut Failing(1000, false), 1000, &"ab".repeat(32), &dir, "x.tflite", false, &Default::default());
    let e = e.unwrap_err().to_string();
    assert!(e.contains("checksum mismatch"), "{e}");
    assert_eq!(sha256sum(&s.path("remote/lib/x.tflite")), sha256sum(&old));
    // A source shorter than announced is an interrupted upload too.
    let e = install_from(&session, &mut Failing(500, false), 1000, &"ab".repeat(32), &dir, "x.tflite", false, &Default::default());
    assert!(e.unwrap_err().to_string().contains("ended after 500 of 1000 bytes"));
    assert_eq!(sha256sum(&s.path("remote/lib/x.tflite")), sha256sum(&old));
}

#[test]
fn login_failures_are_clear_errors() {
    let Some(s) = sshd() else { return };
    let local = tempfile::tempdir().unwrap();
    let model = write_model(local.path(), "m.tflite", 6, 1000);

    // A key the server does not know.
    let args: Vec<String> = s.ssh_args("other_key");
    let out = Command::new(env!("CARGO_BIN_EXE_tpu-sdk"))
        .current_dir(repo())
        .arg("deploy")
        .arg(&model)
        .args(["--target", "cpu"])
        .args(&args)
        .arg("--remote-dir")
        .arg(s.path("remote/models"))
        .output()
        .unwrap();
    let (_, err) = expect(out, 4);
    assert!(err.contains("refused the login") && err.contains("--identity"), "{err}");

    // Nothing listens on this port.
    let closed = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let mut args = s.ssh_args("user_key");
    args[3] = closed.to_string();
    let out = cli::command(env!("CARGO_BIN_EXE_tpu-sdk")).arg("deploy").arg(&model).args(["--target", "cpu"]).args(&args).output().unwrap();
    let (_, err) = expect(out, 4);
    assert!(err.contains("cannot reach"), "{err}");

    let mut args = s.ssh_args("user_key");
    args[5] = s.path("no_such_key").display().to_string();
    let out = cli::command(env!("CARGO_BIN_EXE_tpu-sdk")).arg("deploy").arg(&model).args(["--target", "cpu"]).args(&args).output().unwrap();
    let (_, err) = expect(out, 4);
    assert!(err.contains("no such key file"), "{err}");

    // A remote folder the user may not create.
    if s.user != "root" {
        let (_, err) = expect(s.deploy(&model, "cpu", &["--remote-dir", "/proc/tpu-sdk-test"]), 4);
        assert!(err.contains("failed"), "{err}");
    }
}

/// `--with-runtime --run` on localhost (same architecture): uploads this very binary and runs the example
/// model with it there; the remote result equals a local run on the same (seeded) random input.
#[test]
fn with_runtime_and_run_on_localhost() {
    let Some(s) = sshd() else { return };
    let model = repo().join("examples/models/text_direction_cls.onnx");
    let bin_dir = s.path("remote/bin");
    let doc = json(s.deploy(
        &model,
        "cpu",
        &["--with-runtime", "--runtime-dir", bin_dir.to_str().unwrap(), "--run", "--input-shape", "x=1,3,48,192", "--json"],
    ));
    let exe = Path::new(env!("CARGO_BIN_EXE_tpu-sdk"));
    assert_eq!(sha256sum(&bin_dir.join("tpu-sdk")), sha256sum(exe));
    assert_eq!(doc["runtime"]["arch"], std::env::consts::ARCH);
    assert!(doc["run"]["latency_ms"].as_f64().unwrap() > 0.0, "{doc}");
    let local = Command::new(exe)
        .current_dir(repo())
        .args(["run", "examples/models/text_direction_cls.onnx", "--input-shape", "x=1,3,48,192", "--random-input", "--top-k", "1", "--json"])
        .output()
        .unwrap();
    let local = json(local);
    assert_eq!(doc["run"]["top"]["index"], local["top_k"][0]["index"]);
    let (r, l) = (doc["run"]["top"]["score"].as_f64().unwrap(), local["top_k"][0]["score"].as_f64().unwrap());
    assert!((r - l).abs() < 1e-6, "remote {r} local {l}");

    // The binary is not uploaded again; the text output names latency and the top class.
    let (out, _) = expect(
        s.deploy(&model, "cpu", &["--with-runtime", "--runtime-dir", bin_dir.to_str().unwrap(), "--run", "--input-shape", "x=1,3,48,192"]),
        0,
    );
    assert!(out.contains("tpu-sdk is already up to date") && out.contains(" ms, top-1 class "), "{out}");

    // A runtime binary built for another CPU is refused before anything is sent.
    let local_dir = tempfile::tempdir().unwrap();
    let fake = local_dir.path().join("tpu-sdk-other");
    let mut elf = vec![0x7f, b'E', b'L', b'F', 2, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 0];
    elf.extend_from_slice(&(if std::env::consts::ARCH == "aarch64" { 62u16 } else { 183u16 }).to_le_bytes());
    elf.resize(64, 0);
    std::fs::write(&fake, elf).unwrap();
    let (_, err) = expect(s.deploy(&model, "cpu", &["--with-runtime", "--runtime-binary", fake.to_str().unwrap()]), 4);
    assert!(err.contains("but the remote machine is"), "{err}");

    // --run without a runtime on the remote PATH says to add --with-runtime (the remote PATH has no tpu-sdk).
    let o = s.deploy(&model, "cpu", &["--run", "--input-shape", "x=1,3,48,192"]);
    if Command::new("sh").args(["-c", "command -v tpu-sdk"]).output().map(|o| !o.status.success()).unwrap_or(true) {
        let (_, err) = expect(o, 4);
        assert!(err.contains("--with-runtime"), "{err}");
    }
}

#[test]
fn deploying_an_onnx_model_compiles_it_deterministically() {
    let Some(s) = sshd() else { return };
    let local = tempfile::tempdir().unwrap();
    // Eight pseudo-random calibration samples for the shipped model's [1, 3, 48, 192] input.
    let mut x = 99u64;
    let data: Vec<f32> = (0..8 * 3 * 48 * 192)
        .map(|_| {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (x >> 40) as f32 / (1u64 << 23) as f32 - 1.0
        })
        .collect();
    let cal = local.path().join("cal.npy");
    tpu_sdk::core::npy::write(&cal, &tpu_sdk::Tensor::from_f32(vec![8, 1, 3, 48, 192], data)).unwrap();
    let model = repo().join("examples/models/text_direction_cls.onnx");
    let args = ["--calibration", cal.to_str().unwrap(), "--input-shape", "x=1,3,48,192", "--json"];
    let first = json(s.deploy(&model, "edgetpu", &args));
    assert!(first["model"]["uploaded_bytes"].as_u64().unwrap() > 0, "{first}");
    // The same compile gives byte-identical files: the second deploy finds the remote checksum equal.
    let second = json(s.deploy(&model, "edgetpu", &args));
    assert_eq!(second["model"]["uploaded_bytes"], 0, "the recompiled model must be identical: {second}");
    let remote: Vec<String> = std::fs::read_dir(s.path("remote/models")).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    assert!(remote.iter().any(|n| n.ends_with(".tflite")), "{remote:?}");
}

/// `--target edgetpu` with a `.tflite`: a float model is compiled (quantized to int8) as `compile` does, with
/// its free batch taken from the calibration samples; a full-integer model is uploaded as it is; a file that
/// is not a TFLite model is refused before anything is sent.
#[test]
fn deploying_a_tflite_for_the_edge_tpu_compiles_only_float_models() {
    use tpu_sdk_edgetpu::runtime::has_integer_activations;
    let Some(s) = sshd() else { return };
    let local = tempfile::tempdir().unwrap();
    let data = repo().join("targets/edgetpu/tests/data");
    let remote = |name: &str| std::fs::read(s.path(&format!("remote/models/{name}"))).unwrap();

    // A float model with calibration samples: what lands is an int8 model, not the float file.
    let float = data.join("convnet_f32.tflite");
    let input = tpu_sdk::core::npy::read(&data.join("convnet_f32.input_0.npy")).unwrap();
    let mut rng = tpu_sdk_test_support::random::Rng::new(7);
    let cal = local.path().join("cal.npy");
    let shape: Vec<usize> = [&[8], &input.shape[1..]].concat();
    tpu_sdk::core::npy::write(&cal, &rng.tensor(tpu_sdk::DType::F32, &shape)).unwrap();
    let doc = json(s.deploy(&float, "edgetpu", &["--calibration", cal.to_str().unwrap(), "--json"]));
    assert!(doc["model"]["uploaded_bytes"].as_u64().unwrap() > 0, "{doc}");
    let uploaded = remote("convnet_f32.tflite");
    assert_ne!(uploaded, std::fs::read(&float).unwrap(), "the float file itself was uploaded");
    assert!(has_integer_activations(&uploaded).unwrap(), "the uploaded model is not full-integer");
    // Without samples the float model cannot be compiled: the error says what to pass, nothing is sent.
    let (_, err) = expect(s.deploy(&float, "edgetpu", &[]), 2);
    assert!(err.contains("--calibration"), "{err}");
    assert_eq!(remote("convnet_f32.tflite"), uploaded);

    // A full-integer model goes as it is; calibration samples for it are a usage error.
    let int8 = data.join("convnet_int8.tflite");
    json(s.deploy(&int8, "edgetpu", &["--json"]));
    assert_eq!(remote("convnet_int8.tflite"), std::fs::read(&int8).unwrap());
    let (_, err) = expect(s.deploy(&int8, "edgetpu", &["--calibration", cal.to_str().unwrap()]), 2);
    assert!(err.contains("already a full-integer"), "{err}");

    // Noise named .tflite is no model.
    let noise = write_model(local.path(), "noise.tflite", 9, 5000);
    let (_, err) = expect(s.deploy(&noise, "edgetpu", &[]), 3);
    assert!(err.contains("noise.tflite"), "{err}");
}

/// An ssh wrapper that cuts the connection once: on its `FAULT_AT`-th invocation it starts the real ssh, waits
/// `FAULT_MS` milliseconds and then SIGKILLs every ssh process of this deploy's control socket (the shared
/// master connection and the client), as a dropped network link would; other invocations run ssh as is.
const FAULTY_SSH: &str = r#"#!/bin/sh
n=$(( $(cat "$FAULT_DIR/count" 2>/dev/null || echo 0) + 1 ))
echo "$n" > "$FAULT_DIR/count"
if [ "$n" != "$FAULT_AT" ]; then exec ssh "$@"; fi
ctl=""
for a in "$@"; do case "$a" in ControlPath=*) ctl="${a#ControlPath=}";; esac; done
ssh "$@" &
pid=$!
sleep "$FAULT_SECS"
echo cut > "$FAULT_DIR/cut"
[ -n "$ctl" ] && pkill -9 -f -- "$ctl"
kill -9 "$pid" 2>/dev/null
exit 255
"#;

/// 100 deploys, each cut at a random moment of a random step (connect, prepare, upload, install): after each the
/// remote folder holds the old or the new model, complete (its SHA-256 is one of the two), and the next deploy
/// without faults succeeds. `TPU_SDK_DEPLOY_FAULT_RUNS` changes the count.
#[test]
fn deploys_cut_at_random_points_leave_a_consistent_device() {
    let Some(s) = sshd() else { return };
    let local = tempfile::tempdir().unwrap();
    let wrapper = local.path().join("faulty-ssh");
    std::fs::write(&wrapper, FAULTY_SSH).unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let model = local.path().join("m.tflite");
    let remote_dir = s.path("remote/models");
    let remote = remote_dir.join("m.tflite");
    let runs: usize = std::env::var("TPU_SDK_DEPLOY_FAULT_RUNS").ok().and_then(|v| v.parse().ok()).unwrap_or(100);
    let mut rng = 0x2545_F491_4F6C_DD1Du64;
    let mut next = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    // versions alternate, so every deploy has something to replace
    let versions: Vec<PathBuf> = (0..2).map(|v| write_model(local.path(), &format!("v{v}.bin"), 10 + v as u8, (1 << 20) + v * 4096)).collect();
    std::fs::copy(&versions[0], &model).unwrap();
    expect(s.deploy(&model, "cpu", &[]), 0);
    let (mut cut, mut failed, mut consistent) = (0, 0, 0);
    for run in 0..runs {
        let (old, new) = (&versions[run % 2], &versions[(run + 1) % 2]);
        std::fs::copy(new, &model).unwrap();
        let fault = tempfile::tempdir().unwrap();
        let at = 1 + next() % 4;
        let secs = format!("0.{:03}", next() % 400);
        let o = s
            .deploy_cmd(&model, "cpu", &["--ssh-program", wrapper.to_str().unwrap()])
            .env("FAULT_DIR", fault.path())
            .env("FAULT_AT", at.to_string())
            .env("FAULT_SECS", &secs)
            .output()
            .unwrap();
        cut += fault.path().join("cut").exists() as usize;
        failed += !o.status.success() as usize;
        if !o.status.success() {
            let err = String::from_utf8_lossy(&o.stderr);
            assert!(err.starts_with("error: ") && !err.contains("panicked"), "run {run}: {err}");
        }
        std::thread::sleep(Duration::from_millis(50)); // a remote command the cut orphaned finishes or dies
        let now = sha256sum(&remote);
        assert!(now == sha256sum(old) || now == sha256sum(new), "run {run} (cut at ssh call {at} after {secs} s): the model is neither version");
        if remote_dir.join("m.tflite.prev").exists() {
            let prev = sha256sum(&remote_dir.join("m.tflite.prev"));
            assert!(prev == sha256sum(old) || prev == sha256sum(new), "run {run}: m.tflite.prev is neither version");
        }
        consistent += 1;
        // the next deploy (no fault) completes the job and cleans up
        let doc = json(s.deploy(&model, "cpu", &["--json"]));
        assert_eq!(doc["model"]["sha256"], sha256sum(new));
        assert_eq!(sha256sum(&remote), sha256sum(new), "run {run}: the retry did not install the new model");
        assert!(leftovers(&remote_dir).is_empty(), "run {run}: {:?}", leftovers(&remote_dir));
    }
    eprintln!("deploy fault injection: {consistent} of {runs} runs left a consistent device ({cut} connections cut, {failed} deploys failed with an error, each retried successfully)");
    assert!(cut >= runs / 2, "too few cuts landed ({cut} of {runs}): the harness is not injecting faults");
    // rollback after all that still swaps the two complete versions
    expect(s.deploy(&model, "cpu", &["--rollback"]), 0);
    assert_eq!(sha256sum(&remote), sha256sum(&versions[(runs + 1) % 2]), "rollback restores the version before the last");
}

/// A small tmpfs mounted at a folder (root only); unmounted when dropped.
struct Mount(PathBuf);

impl Mount {
    fn tmpfs(at: &Path, size: &str) -> Option<Mount> {
        std::fs::create_dir_all(at).unwrap();
        let o = Command::new("mount").args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"]).arg(at).output().ok()?;
        o.status.success().then(|| Mount(at.to_path_buf()))
    }
    fn read_only(&self) -> bool {
        Command::new("mount").args(["-o", "remount,ro"]).arg(&self.0).status().is_ok_and(|s| s.success())
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

/// The remote folder is a full disk, then a read-only file system: each deploy fails with the system's reason,
/// the model there stays the old one, complete, and no partial upload is left taking space. (Needs permission
/// to mount a tmpfs, i.e. root; otherwise the test says so and passes, as root ignores file modes and nothing
/// else can make a folder unwritable for it.)
#[test]
fn a_full_or_read_only_remote_disk_fails_clearly_and_keeps_the_model() {
    let Some(s) = sshd() else { return };
    let remote_dir = s.path("remote/small");
    let Some(m) = Mount::tmpfs(&remote_dir, "512k") else {
        eprintln!("skipped: cannot mount a tmpfs here (not root)");
        return;
    };
    let local = tempfile::tempdir().unwrap();
    let model = write_model(local.path(), "m.tflite", 21, 100_000);
    let old = sha256sum(&model);
    let deploy = |model: &Path| {
        cli::command(env!("CARGO_BIN_EXE_tpu-sdk"))
            .args(["deploy"])
            .arg(model)
            .args(["--target", "cpu"])
            .args(s.ssh_args("user_key"))
            .arg("--remote-dir")
            .arg(&remote_dir)
            .stdin(Stdio::null())
            .output()
            .unwrap()
    };
    expect(deploy(&model), 0);
    // 1 MB does not fit in what is left of 512 KB
    write_model(local.path(), "m.tflite", 22, 1 << 20);
    let (_, err) = expect(deploy(&model), 4);
    assert!(err.contains("No space left on device"), "{err}");
    assert_eq!(sha256sum(&remote_dir.join("m.tflite")), old, "the old model is intact");
    assert!(leftovers(&remote_dir).is_empty(), "the partial upload is removed: {:?}", leftovers(&remote_dir));
    // a small new version fits once the partial file is gone
    write_model(local.path(), "m.tflite", 23, 50_000);
    expect(deploy(&model), 0);
    let current = sha256sum(&model);
    assert_eq!(sha256sum(&remote_dir.join("m.tflite")), current);
    // read-only: refused, nothing changes
    assert!(m.read_only(), "remount read-only");
    write_model(local.path(), "m.tflite", 24, 50_000);
    let (_, err) = expect(deploy(&model), 4);
    assert!(err.contains("Read-only file system"), "{err}");
    assert_eq!(sha256sum(&remote_dir.join("m.tflite")), current);
}
