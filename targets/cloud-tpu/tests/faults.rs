//! PJRT faults: a plugin whose calls fail. `tests/stubs/pjrt_fault.c` is a PJRT plugin that forwards to the real
//! XLA CPU plugin and makes chosen calls return an error (built here with `cc`, one library per fault list):
//! initialisation, client creation, compilation, upload, execution (once, or from the N-th call on: a device that
//! vanishes mid-run), download, reloading a serialized executable. Each must give an error that names the PJRT
//! function and carries the plugin's message, through the library (the command line: cli/tests/cloud_tpu_cli.rs), and the binding must
//! destroy every error object and every buffer on those paths: `failures_leak_nothing` re-runs the failing
//! workload under valgrind's memcheck (0 bytes definitely or indirectly lost; the injected errors are plain
//! `malloc`s, so one the binding forgot to destroy would show).

mod common;

use std::path::PathBuf;

use tpu_sdk_cloud_tpu::pjrt::{CompileOptions, Plugin};
use tpu_sdk_cloud_tpu::CloudTpuTarget;
use tpu_sdk_core::ir::*;
use tpu_sdk_core::target::Target;
use tpu_sdk_test_support::pjrt_fault::{self, assert_injected};
use tpu_sdk_test_support::valgrind;

const MUL_ADD: &str = "func.func @main(%a: tensor<4x8xf32>, %b: tensor<4x8xf32>) -> (tensor<4x8xf32>) {
  %0 = stablehlo.multiply %a, %b : tensor<4x8xf32>
  %1 = stablehlo.add %0, %a : tensor<4x8xf32>
  return %1 : tensor<4x8xf32>
}";

fn setup(faults: &str) -> Option<(PathBuf, PathBuf)> {
    let real = common::cpu_plugin()?;
    let shim = pjrt_fault::build(&real, faults)?;
    Some((real, shim))
}

fn inputs() -> (Tensor, Tensor) {
    let a = Tensor::from_f32(vec![4, 8], (0..32).map(|i| i as f32).collect());
    let b = Tensor::from_f32(vec![4, 8], (0..32).map(|i| 0.5 * i as f32).collect());
    (a, b)
}

#[test]
fn with_no_faults_the_forwarding_plugin_runs_like_the_real_one() {
    let Some((_, shim)) = setup("") else { return };
    let plugin = Plugin::load(&shim).unwrap();
    let client = plugin.client().unwrap();
    let dev = &client.addressable_devices().unwrap()[0];
    let exe = client.compile(MUL_ADD, &CompileOptions::portable()).unwrap();
    let (a, b) = inputs();
    let out = exe.execute(&[&client.upload(&a, dev).unwrap(), &client.upload(&b, dev).unwrap()], Some(dev)).unwrap();
    assert_eq!(out[0].to_tensor().unwrap().as_f32().unwrap()[3], 3.0 * 1.5 + 3.0);
}

#[test]
fn a_plugin_that_is_not_one_or_fails_to_initialise_is_refused() {
    let Some((_, shim)) = setup("GetPjrtApi@1") else { return };
    let e = Plugin::load(&shim).err().expect("a null table is refused").to_string();
    assert!(e.contains("GetPjrtApi returned null") && e.contains("libpjrt_fault"), "{e}");
    let Some((_, shim)) = setup("Plugin_Initialize@1") else { return };
    let e = Plugin::load(&shim).err().expect("initialisation failure is refused");
    assert_injected(&e, "Plugin_Initialize");
}

#[test]
fn client_compile_upload_download_and_reload_failures_are_errors() {
    let Some((_, shim)) = setup("Client_Create@1") else { return };
    let plugin = Plugin::load(&shim).unwrap();
    assert_injected(&plugin.client().err().expect("client creation fails"), "Client_Create");
    // The next client works: a failed creation leaves nothing behind.
    plugin.client().expect("the second client");

    let Some((_, shim)) =
        setup("Client_Compile@1,Client_BufferFromHostBuffer@2,Buffer_ToHostBuffer@1,Executable_DeserializeAndLoad@1")
    else {
        return;
    };
    let plugin = Plugin::load(&shim).unwrap();
    let client = plugin.client().unwrap();
    let dev = &client.addressable_devices().unwrap()[0];
    assert_injected(&client.compile(MUL_ADD, &CompileOptions::portable()).err().expect("compile fails"), "Client_Compile");
    let exe = client.compile(MUL_ADD, &CompileOptions::portable()).expect("the second compile");
    let (a, b) = inputs();
    let ab = client.upload(&a, dev).unwrap();
    assert_injected(&client.upload(&b, dev).err().expect("the second upload fails"), "Client_BufferFromHostBuffer");
    let bb = client.upload(&b, dev).unwrap();
    let out = exe.execute(&[&ab, &bb], Some(dev)).unwrap();
    assert_injected(&out[0].to_tensor().err().expect("download fails"), "Buffer_ToHostBuffer");
    assert_eq!(out[0].to_tensor().unwrap().as_f32().unwrap()[3], 3.0 * 1.5 + 3.0);
    let bytes = exe.serialize().unwrap();
    assert_injected(&client.load_serialized(&bytes).err().expect("reload fails"), "Executable_DeserializeAndLoad");
    client.load_serialized(&bytes).expect("the second reload");
}

/// y = relu(x·w + 1): a model for the `Target` path.
fn small_model() -> Graph {
    let mut g = Graph::new("small");
    let x = g.add_input("x", DType::F32, vec![2, 8]);
    let w = g.add_constant("w", Tensor::from_f32(vec![8, 4], (0..32).map(|i| (i % 5) as f32 - 2.0).collect()));
    let y = g.add_value("y", DType::F32, vec![2, 4]);
    g.add_node("mm", Op::MatMul, vec![Some(x), Some(w)], vec![y]);
    g.outputs.push(y);
    g
}

#[test]
fn a_device_that_vanishes_mid_run_fails_every_later_run_with_a_clear_error() {
    let Some((_, shim)) = setup("LoadedExecutable_Execute@3+") else { return };
    let target = CloudTpuTarget::with_plugin(&shim);
    let mut exe = target.prepare(small_model()).expect("compiles");
    let x = Tensor::from_f32(vec![2, 8], (0..16).map(|i| i as f32 * 0.25).collect());
    let first = exe.run(&[x.clone()]).expect("run 1");
    assert_eq!(exe.run(&[x.clone()]).expect("run 2"), first);
    for _ in 0..3 {
        assert_injected(&exe.run(&[x.clone()]).err().expect("the device is gone"), "LoadedExecutable_Execute");
    }
}

const FAULT_ROUNDS_VAR: &str = "TPU_SDK_FAULT_LEAK_WORKLOAD";

/// Every failure above in one process, for valgrind (a no-op unless the parent test set the variable).
#[test]
fn fault_workload() {
    let Ok(shim) = std::env::var(FAULT_ROUNDS_VAR) else { return };
    let plugin = Plugin::load(&shim).unwrap();
    assert!(plugin.client().is_err());
    let client = plugin.client().unwrap();
    let dev = &client.addressable_devices().unwrap()[0];
    assert!(client.compile(MUL_ADD, &CompileOptions::portable()).is_err());
    let exe = client.compile(MUL_ADD, &CompileOptions::portable()).unwrap();
    let (a, b) = inputs();
    let ab = client.upload(&a, dev).unwrap();
    assert!(client.upload(&b, dev).is_err());
    let bb = client.upload(&b, dev).unwrap();
    assert!(exe.execute(&[&ab, &bb], Some(dev)).is_err());
    let out = exe.execute(&[&ab, &bb], Some(dev)).unwrap();
    assert!(out[0].to_tensor().is_err());
    out[0].to_tensor().unwrap();
    let bytes = exe.serialize().unwrap();
    assert!(client.load_serialized(&bytes).is_err());
    let again = client.load_serialized(&bytes).unwrap();
    assert!(again.execute(&[&ab, &bb], Some(dev)).is_err(), "every execute from the 3rd on fails");
}

#[test]
fn failures_leak_nothing() {
    if std::env::var(FAULT_ROUNDS_VAR).is_ok() {
        return;
    }
    let faults = "Client_Create@1,Client_Compile@1,Client_BufferFromHostBuffer@2,LoadedExecutable_Execute@1,\
                  LoadedExecutable_Execute@3+,Buffer_ToHostBuffer@1,Executable_DeserializeAndLoad@1";
    let Some((_, shim)) = setup(faults) else { return };
    if !valgrind::available() {
        return;
    }
    let (v, log) = valgrind::memcheck("fault_workload", &[(FAULT_ROUNDS_VAR, shim.as_os_str())]);
    let (d, i) = (v.definitely, v.indirectly);
    assert_eq!(d + i, 0, "the failure paths leaked {d} bytes definitely and {i} indirectly:\n{log}");
}
