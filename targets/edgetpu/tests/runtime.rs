//! The Edge TPU runtime's loading code against stub shared libraries built here with `cc` (tests/stubs/:
//! the TFLite C API and libedgetpu symbols, logging every call). Checks the call sequence, the delegate
//! options, device selection and the error paths. No real Edge TPU or libedgetpu is involved: what these
//! tests cannot show (a real delegate running a real model) is listed in targets/edgetpu/README.md.

mod common;

use common::{model, Stubs};
use tpu_sdk_core::ir::Tensor;
use tpu_sdk_core::Error;
use tpu_sdk_edgetpu::runtime::{self, Interpreter, Libraries};

fn stubs(defines: &[&str]) -> Option<Stubs> {
    Stubs::build(defines)
}

fn opts(v: &[(&str, &str)]) -> Vec<(String, String)> {
    v.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

fn input() -> Tensor {
    Tensor::from_vec(vec![1, 8], vec![-128i8, -3, 0, 1, 2, 50, 100, 127]).unwrap()
}

#[test]
fn edgetpu_models_are_recognised_by_their_custom_op() {
    assert!(runtime::is_compiled_for_edgetpu(&model("edgetpu-custom-op")).unwrap());
    assert!(!runtime::is_compiled_for_edgetpu(&model("some-other-op")).unwrap());
    assert!(matches!(runtime::is_compiled_for_edgetpu(b"not a model"), Err(Error::InvalidModel(_))));
}

#[test]
fn signature_of_a_compiled_model() {
    let g = runtime::signature(&model("edgetpu-custom-op")).unwrap();
    assert_eq!(g.inputs.len(), 1);
    assert_eq!(g.outputs.len(), 1);
    let (i, o) = (g.value(g.inputs[0]), g.value(g.outputs[0]));
    assert_eq!((i.name.as_str(), i.dtype, i.shape.clone()), ("input", tpu_sdk_core::ir::DType::I8, vec![1, 8]));
    assert_eq!(o.name, "output");
    let q = i.quant.as_ref().expect("the input's quantization");
    assert_eq!((q.scale.clone(), q.zero_point.clone()), (vec![0.5], vec![-3]));
    assert!(g.nodes.is_empty());
}

#[test]
fn call_sequence_options_and_data_through_the_delegate() {
    let Some(s) = stubs(&[]) else { return };
    let libs = Libraries::load(&s.tflite, &s.edgetpu).unwrap();
    let bytes = model("edgetpu-custom-op");
    let n = bytes.len();
    let o = opts(&[("Performance", "High"), ("Usb.AlwaysDfu", "False"), ("Usb.MaxBulkInQueueLength", "16")]);
    let mut it = Interpreter::new(&libs, bytes, Some("usb:1"), &o).unwrap();
    assert_eq!(it.device.path, "/sys/bus/usb/devices/2-2");
    assert_eq!(it.inputs(), vec![("input".to_string(), tpu_sdk_core::ir::DType::I8, vec![1, 8])]);
    let out = it.run(&[input()]).unwrap();
    assert_eq!(out, vec![input()]);
    // A wrong input is refused before anything reaches the library.
    let e = it.run(&[Tensor::zeros(tpu_sdk_core::ir::DType::F32, vec![1, 8])]).unwrap_err();
    assert!(matches!(e, Error::InputMismatch(_)), "{e}");
    drop(it);
    assert_eq!(
        s.log(),
        vec![
            "edgetpu_list_devices".to_string(),
            "edgetpu_free_devices".into(),
            "edgetpu_create_delegate type=1 name=/sys/bus/usb/devices/2-2 Performance=High Usb.AlwaysDfu=False Usb.MaxBulkInQueueLength=16".into(),
            format!("TfLiteModelCreate {n}"),
            "TfLiteInterpreterOptionsCreate".into(),
            "TfLiteInterpreterOptionsAddDelegate magic=ed6e".into(),
            "TfLiteInterpreterCreate delegate=yes".into(),
            "TfLiteInterpreterAllocateTensors".into(),
            "TfLiteInterpreterInvoke".into(),
            // Freed in the C API's order: interpreter, then its delegate, then options and model.
            "TfLiteInterpreterDelete".into(),
            "edgetpu_free_delegate magic=ed6e".into(),
            "TfLiteInterpreterOptionsDelete".into(),
            "TfLiteModelDelete".into(),
        ]
    );
}

#[test]
fn device_selection() {
    let Some(s) = stubs(&[]) else { return };
    let libs = Libraries::load(&s.tflite, &s.edgetpu).unwrap();
    let it = Interpreter::new(&libs, model("edgetpu-custom-op"), Some("pci:0"), &[]).unwrap();
    assert_eq!(it.device.path, "/dev/apex_0");
    drop(it);
    let it = Interpreter::new(&libs, model("edgetpu-custom-op"), None, &[]).unwrap();
    assert_eq!(it.device.path, "/sys/bus/usb/devices/2-1");
    drop(it);
    assert!(s.log().iter().any(|l| l == "edgetpu_create_delegate type=0 name=/dev/apex_0"), "{:?}", s.log());
    let e = Interpreter::new(&libs, model("edgetpu-custom-op"), Some("usb:7"), &[]).err().unwrap().to_string();
    assert!(e.contains("no Edge TPU usb:7") && e.contains("usb:0 (/sys/bus/usb/devices/2-1)") && e.contains("pci:0 (/dev/apex_0)"), "{e}");
    let e = Interpreter::new(&libs, model("edgetpu-custom-op"), Some("tpu0"), &[]).err().unwrap().to_string();
    assert!(e.contains("usb:N or pci:N"), "{e}");
}

#[test]
fn no_device_is_a_clear_error() {
    let Some(s) = stubs(&["NO_DEVICES"]) else { return };
    let libs = Libraries::load(&s.tflite, &s.edgetpu).unwrap();
    let e = Interpreter::new(&libs, model("edgetpu-custom-op"), None, &[]).err().unwrap();
    assert!(matches!(&e, Error::Device(m) if m.contains("no Edge TPU found")), "{e}");
}

#[test]
fn delegate_that_cannot_open_the_device() {
    let Some(s) = stubs(&["DELEGATE_NULL"]) else { return };
    let libs = Libraries::load(&s.tflite, &s.edgetpu).unwrap();
    let e = Interpreter::new(&libs, model("edgetpu-custom-op"), None, &[]).err().unwrap();
    assert!(matches!(&e, Error::Device(m) if m.contains("could not open") && m.contains("udev")), "{e}");
    assert!(!s.log().iter().any(|l| l.starts_with("TfLiteModelCreate")));
}

#[test]
fn model_for_a_newer_runtime_says_what_to_update_and_frees_everything() {
    let Some(s) = stubs(&["FAIL_ALLOCATE"]) else { return };
    let libs = Libraries::load(&s.tflite, &s.edgetpu).unwrap();
    let e = Interpreter::new(&libs, model("edgetpu-custom-op"), None, &[]).err().unwrap().to_string();
    assert!(e.contains("newer Edge TPU runtime") && e.contains("RuntimeVersion(13)") && e.contains("edgetpu_compiler -m"), "{e}");
    let log = s.log();
    for call in ["TfLiteInterpreterDelete", "edgetpu_free_delegate magic=ed6e", "TfLiteInterpreterOptionsDelete", "TfLiteModelDelete"] {
        assert!(log.iter().any(|l| l == call), "{call} missing: {log:?}");
    }
}

/// The device goes away between two inferences (the library's invoke starts failing): a device error that says
/// what to do, the interpreter stays usable for the error path, and dropping it frees the interpreter, the
/// delegate, the options and the model.
#[test]
fn a_device_that_vanishes_mid_run_is_a_clear_error_and_frees_everything() {
    let Some(s) = stubs(&["FAIL_INVOKE_AFTER=1"]) else { return };
    let libs = Libraries::load(&s.tflite, &s.edgetpu).unwrap();
    let mut it = Interpreter::new(&libs, model("edgetpu-custom-op"), None, &[]).unwrap();
    assert_eq!(it.run(&[input()]).unwrap(), vec![input()]);
    for _ in 0..2 {
        let e = it.run(&[input()]).unwrap_err();
        assert!(matches!(&e, Error::Device(m) if m.contains("unplugged") && m.contains("tpu-sdk devices")), "{e}");
    }
    drop(it);
    let log = s.log();
    for call in ["TfLiteInterpreterDelete", "edgetpu_free_delegate magic=ed6e", "TfLiteInterpreterOptionsDelete", "TfLiteModelDelete"] {
        assert_eq!(log.iter().filter(|l| *l == call).count(), 1, "{call} once: {log:?}");
    }
}

#[test]
fn invalid_model_bytes() {
    let Some(s) = stubs(&[]) else { return };
    let libs = Libraries::load(&s.tflite, &s.edgetpu).unwrap();
    let e = Interpreter::new(&libs, b"garbage!".to_vec(), None, &[]).err().unwrap();
    assert!(matches!(e, Error::InvalidModel(_)), "{e}");
    assert!(s.log().iter().any(|l| l.starts_with("edgetpu_free_delegate")), "the delegate leaked: {:?}", s.log());
}

#[test]
fn missing_or_wrong_libraries_say_what_to_install() {
    let Some(s) = stubs(&[]) else { return };
    let nowhere = s.dir.path().join("nowhere/libtensorflowlite_c.so");
    let e = Libraries::load(&nowhere, &s.edgetpu).err().unwrap().to_string();
    assert!(e.contains("TensorFlow Lite C library") && e.contains("TPU_SDK_TFLITE_C_LIB"), "{e}");
    let e = Libraries::load(&s.tflite, &s.dir.path().join("nowhere/libedgetpu.so.1")).err().unwrap().to_string();
    assert!(e.contains("libedgetpu1-std") && e.contains("TPU_SDK_LIBEDGETPU"), "{e}");
    // A library without the C API's symbols (here: libedgetpu in place of TFLite).
    let e = Libraries::load(&s.edgetpu, &s.edgetpu).err().unwrap().to_string();
    assert!(e.contains("has no symbol TfLiteModelCreate"), "{e}");
}

#[test]
fn delegate_options_are_checked() {
    assert!(runtime::parse_options("Performance=Max,Usb.AlwaysDfu=True,Usb.MaxBulkInQueueLength=255").is_ok());
    for bad in ["Performance=Turbo", "Usb.AlwaysDfu=yes", "Usb.MaxBulkInQueueLength=256", "Colour=red", "Performance"] {
        assert!(matches!(runtime::parse_options(bad), Err(Error::Unsupported(_))), "{bad}");
    }
}

#[test]
fn prepare_needs_the_model_file() {
    let g = tpu_sdk_core::ir::Graph::default();
    let e = runtime::prepare(g, None, None, &[]).err().unwrap().to_string();
    assert!(e.contains("compiled .tflite"), "{e}");
}
