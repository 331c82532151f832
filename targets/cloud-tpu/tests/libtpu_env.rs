//! Loading a file named like libtpu off a TPU VM first sets the environment that keeps libtpu from querying the
//! GCE metadata server or other workers (`TPU_SKIP_MDS_QUERY=1`, ...). A separate test binary, because it
//! changes this process's environment.

use tpu_sdk_cloud_tpu::discover::on_tpu_vm;
use tpu_sdk_cloud_tpu::pjrt::Plugin;

#[test]
fn loading_libtpu_off_a_tpu_vm_sets_the_no_metadata_environment_first() {
    if on_tpu_vm() {
        eprintln!("note: this is a TPU VM; libtpu is loaded with its real environment there");
        return;
    }
    for k in ["TPU_SKIP_MDS_QUERY", "TPU_ACCELERATOR_TYPE", "TPU_WORKER_ID", "TPU_WORKER_HOSTNAMES"] {
        assert!(std::env::var_os(k).is_none(), "{k} must be unset for this test");
    }
    // A file named libtpu.so that is not a library: the load fails, but only after the environment was set.
    let dir = std::env::temp_dir().join(format!("tpu-sdk-libtpu-env-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let fake = dir.join("libtpu.so");
    std::fs::write(&fake, b"not an ELF file").unwrap();
    let e = Plugin::load(&fake).unwrap_err().to_string();
    assert!(e.contains("libtpu.so"), "{e}");
    assert_eq!(std::env::var("TPU_SKIP_MDS_QUERY").as_deref(), Ok("1"));
    assert_eq!(std::env::var("TPU_ACCELERATOR_TYPE").as_deref(), Ok("v5litepod-4"));
    assert_eq!(std::env::var("TPU_WORKER_ID").as_deref(), Ok("0"));
    assert_eq!(std::env::var("TPU_WORKER_HOSTNAMES").as_deref(), Ok("localhost"));
    let _ = std::fs::remove_dir_all(&dir);
}
