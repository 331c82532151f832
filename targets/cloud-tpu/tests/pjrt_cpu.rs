//! The PJRT binding against a real plugin: the XLA CPU plugin (`fastatomstruct-xla-cpu`, 4 CPU devices).

mod common;

use tpu_sdk_cloud_tpu::pjrt::{CompileOptions, NamedValue, Plugin};
use tpu_sdk_cloud_tpu::Error;
use tpu_sdk_core::ir::{Tensor, TensorData};

const ADD: &str = "func.func @main(%a: tensor<2x2xf32>, %b: tensor<2x2xf32>) -> tensor<2x2xf32> {
  %0 = stablehlo.add %a, %b : tensor<2x2xf32>
  return %0 : tensor<2x2xf32>
}";

fn plugin() -> Option<Plugin> {
    common::cpu_plugin().map(|p| Plugin::load(p).expect("the CPU plugin loads"))
}

#[test]
fn loads_the_plugin_and_reports_version_attributes_and_four_cpu_devices() {
    let Some(p) = plugin() else { return };
    let (major, minor) = p.api_version();
    assert_eq!(major, 0);
    assert!(minor >= 40, "API 0.{minor}");
    let attrs = p.attributes().unwrap();
    assert!(attrs.iter().any(|(k, _)| k == "xla_version"), "{attrs:?}");
    let v = p.stablehlo_versions().unwrap();
    let cur = v.current.expect("stablehlo_current_version");
    assert_eq!(cur.len(), 3);
    assert!(cur[0] >= 1, "{cur:?}");
    let c = p.client().unwrap();
    assert_eq!(c.platform_name().unwrap(), "cpu");
    let devs = c.devices().unwrap();
    assert_eq!(devs.len(), 4);
    assert_eq!(c.addressable_devices().unwrap().len(), 4);
    let ids: Vec<i32> = devs.iter().map(|d| d.id()).collect();
    assert_eq!(ids, vec![0, 1, 2, 3]);
    for d in &devs {
        assert_eq!(d.info().kind, "cpu");
        assert!(d.info().addressable);
        assert!(d.info().description.contains(&d.id().to_string()), "{:?}", d.info());
    }
    // Loading the same file again gives the same plugin (loaded and initialised once per process).
    let again = Plugin::load(p.path()).unwrap();
    assert_eq!(again.api_version(), p.api_version());
}

#[test]
fn compiles_and_runs_hand_written_stablehlo_on_a_chosen_device() {
    let Some(p) = plugin() else { return };
    let c = p.client().unwrap();
    let exe = c.compile(ADD, &CompileOptions::portable()).unwrap();
    assert_eq!(exe.num_outputs(), 1);
    let devs = c.addressable_devices().unwrap();
    for dev in [&devs[0], &devs[2]] {
        let a = c.upload(&Tensor::from_f32(vec![2, 2], vec![1.0, 2.0, 3.0, 4.0]), dev).unwrap();
        let b = c.upload(&Tensor::from_f32(vec![2, 2], vec![10.0, 20.0, 30.0, 40.0]), dev).unwrap();
        assert_eq!(a.dims().unwrap(), vec![2, 2]);
        let y = exe.execute(&[&a, &b], Some(dev)).unwrap();
        assert_eq!(y.len(), 1);
        assert_eq!(y[0].to_tensor().unwrap(), Tensor::from_f32(vec![2, 2], vec![11.0, 22.0, 33.0, 44.0]));
    }
}

#[test]
fn moves_every_dtype_to_the_device_and_back_and_returns_several_outputs() {
    let Some(p) = plugin() else { return };
    let c = p.client().unwrap();
    let dev = &c.addressable_devices().unwrap()[1];
    let tensors = vec![
        Tensor::from_f32(vec![3], vec![1.5, -0.0, f32::INFINITY]),
        Tensor::new(vec![2], TensorData::F64(vec![1e300, -2.5])).unwrap(),
        Tensor::new(vec![2], TensorData::F16(vec![half::f16::from_f32(0.5), half::f16::from_f32(-3.0)])).unwrap(),
        Tensor::new(vec![2], TensorData::BF16(vec![half::bf16::from_f32(1.0), half::bf16::from_f32(-7.0)])).unwrap(),
        Tensor::new(vec![2], TensorData::I8(vec![-128, 127])).unwrap(),
        Tensor::new(vec![2], TensorData::U8(vec![0, 255])).unwrap(),
        Tensor::new(vec![2], TensorData::I16(vec![-300, 300])).unwrap(),
        Tensor::new(vec![1, 2], TensorData::I32(vec![i32::MIN, 7])).unwrap(),
        Tensor::from_i64(vec![2, 1], vec![i64::MAX, -1]),
        Tensor::new(vec![3], TensorData::Bool(vec![true, false, true])).unwrap(),
        Tensor::from_f32(vec![], vec![42.0]),
        Tensor::from_f32(vec![0, 3], vec![]),
    ];
    // An identity function over all of them: each returned buffer is a device-side copy.
    let tys: Vec<String> =
        tensors.iter().map(|t| tpu_sdk_cloud_tpu::lower::tensor_type(t.dtype(), &t.shape)).collect();
    let args: Vec<String> = tys.iter().enumerate().map(|(i, t)| format!("%a{i}: {t}")).collect();
    let rets: Vec<String> = (0..tys.len()).map(|i| format!("%a{i}")).collect();
    let src = format!(
        "func.func @main({}) -> ({}) {{\n  return {} : {}\n}}",
        args.join(", "),
        tys.join(", "),
        rets.join(", "),
        tys.join(", ")
    );
    let exe = c.compile(&src, &CompileOptions::on_device(dev.id())).unwrap();
    assert_eq!(exe.num_outputs(), tensors.len());
    assert_eq!(exe.addressable_devices().unwrap(), vec![dev.clone()]);
    let bufs: Vec<_> = tensors.iter().map(|t| c.upload(t, dev).unwrap()).collect();
    let refs: Vec<_> = bufs.iter().collect();
    let outs = exe.execute(&refs, None).unwrap();
    for (t, o) in tensors.iter().zip(&outs) {
        assert_eq!(&o.to_tensor().unwrap(), t);
        assert_eq!(o.dtype().unwrap(), t.dtype());
    }
}

#[test]
fn replicated_execution_runs_one_program_on_two_devices_with_their_own_inputs() {
    let Some(p) = plugin() else { return };
    let c = p.client().unwrap();
    let devs = c.addressable_devices().unwrap();
    let opts = CompileOptions { num_replicas: 2, device_assignment: Some(vec![vec![1], vec![3]]), ..Default::default() };
    let exe = c.compile(ADD, &opts).unwrap();
    let on = exe.addressable_devices().unwrap();
    assert_eq!(on.iter().map(|d| d.id()).collect::<Vec<_>>(), vec![1, 3]);
    let x0 = c.upload(&Tensor::from_f32(vec![2, 2], vec![1.0; 4]), &devs[1]).unwrap();
    let x1 = c.upload(&Tensor::from_f32(vec![2, 2], vec![5.0; 4]), &devs[3]).unwrap();
    let outs = exe.execute_replicated(&[vec![&x0, &x0], vec![&x1, &x1]]).unwrap();
    assert_eq!(outs[0][0].to_tensor().unwrap().as_f32().unwrap(), &[2.0; 4]);
    assert_eq!(outs[1][0].to_tensor().unwrap().as_f32().unwrap(), &[10.0; 4]);
}

#[test]
fn serialized_executables_load_back_and_run() {
    let Some(p) = plugin() else { return };
    let c = p.client().unwrap();
    let exe = c.compile(ADD, &CompileOptions::default()).unwrap();
    let bytes = exe.serialize().unwrap();
    assert!(!bytes.is_empty());
    let back = c.load_serialized(&bytes).unwrap();
    let dev = &c.addressable_devices().unwrap()[0];
    let a = c.upload(&Tensor::from_f32(vec![2, 2], vec![1.0, 2.0, 3.0, 4.0]), dev).unwrap();
    let y = back.execute(&[&a, &a], None).unwrap();
    assert_eq!(y[0].to_tensor().unwrap().as_f32().unwrap(), &[2.0, 4.0, 6.0, 8.0]);
}

#[test]
fn compiler_errors_come_back_as_messages_not_crashes() {
    let Some(p) = plugin() else { return };
    let c = p.client().unwrap();
    let e = c.compile("func.func @main(%a: tensor<2xf32>) -> tensor<2xf32> { bogus }", &CompileOptions::default()).unwrap_err();
    let msg = e.to_string();
    assert!(matches!(e, Error::Pjrt { .. }), "{e:?}");
    assert!(msg.contains("PJRT_Client_Compile") && msg.contains("bogus"), "{msg}");
    // A type error in otherwise well-formed StableHLO.
    let bad = "func.func @main(%a: tensor<2xf32>, %b: tensor<3xf32>) -> tensor<2xf32> {\n  %0 = stablehlo.add %a, %b : tensor<2xf32>\n  return %0 : tensor<2xf32>\n}";
    let msg = c.compile(bad, &CompileOptions::default()).unwrap_err().to_string();
    assert!(msg.contains("PJRT_Client_Compile"), "{msg}");
    // Wrong number of arguments at execution.
    let exe = c.compile(ADD, &CompileOptions::default()).unwrap();
    let dev = &c.addressable_devices().unwrap()[0];
    let a = c.upload(&Tensor::from_f32(vec![2, 2], vec![0.0; 4]), dev).unwrap();
    let msg = exe.execute(&[&a], None).unwrap_err().to_string();
    assert!(msg.contains("PJRT_LoadedExecutable_Execute"), "{msg}");
}

#[test]
fn client_options_are_passed_to_the_plugin() {
    let Some(p) = plugin() else { return };
    let c = p.client_with_options(&[("cpu_device_count".into(), NamedValue::Int64(2))]).unwrap();
    assert_eq!(c.devices().unwrap().len(), 2);
}

#[test]
fn missing_or_foreign_libraries_are_clear_errors() {
    let e = Plugin::load("/nonexistent/dir/libpjrt_cpu.so").unwrap_err().to_string();
    assert!(e.contains("/nonexistent/dir/libpjrt_cpu.so") && e.contains("cannot open"), "{e}");
    // A real shared library that is not a PJRT plugin.
    let libm = ["/lib/x86_64-linux-gnu/libm.so.6", "/usr/lib/x86_64-linux-gnu/libm.so.6", "/lib64/libm.so.6"]
        .into_iter()
        .find(|p| std::path::Path::new(p).exists());
    if let Some(libm) = libm {
        let e = Plugin::load(libm).unwrap_err().to_string();
        assert!(e.contains("GetPjrtApi"), "{e}");
    }
}
