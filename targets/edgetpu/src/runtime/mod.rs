//! Running models on an Edge TPU through the system's TFLite C library and `libedgetpu`.
//!
//! Both libraries are opened at run time ([`tflite_ffi`], [`edgetpu_ffi`]; the only `unsafe` code of the
//! runtime). The model runs from its `.tflite` bytes — the Edge TPU program is the `edgetpu-custom-op`
//! inside the file, which the core IR does not represent — so [`crate::EdgeTpuTarget::model_file`] carries
//! the file the CLI loaded. A model without that op (not compiled by `edgetpu_compiler`) runs on the CPU
//! runtime instead, with a notice.
//!
//! Libraries: `libtensorflowlite_c.so` and `libedgetpu.so.1` through the dynamic loader's search path, or
//! the files named by `TPU_SDK_TFLITE_C_LIB` and `TPU_SDK_LIBEDGETPU`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use tpu_sdk_core::format::tflite::{dtype_of as tflite_dtype_of, schema};
use tpu_sdk_core::ir::{DType, Graph, Tensor};
use tpu_sdk_core::target::{Executable, Target};
use tpu_sdk_core::{Error, Result};

/// Resolves symbol `$name` of the loaded library `$lib` as the type of the field it initialises; a missing
/// symbol returns `Err($missing($name))` from the enclosing function.
macro_rules! sym {
    ($lib:expr, $name:literal, $missing:expr) => {{
        // SAFETY: see the docs of the binding that uses it (`tflite_ffi`, `edgetpu_ffi`): the name and the
        // field's type come from the library's published C header.
        match unsafe { $lib.get(concat!($name, "\0").as_bytes()) } {
            Ok(s) => *s,
            Err(_) => return Err($missing($name)),
        }
    }};
}

pub mod edgetpu_ffi;
pub mod tflite_ffi;

use edgetpu_ffi::{DeviceType, EdgeTpuC};
use tflite_ffi::{BuildError, Interp, TfLiteC};

/// Environment variable naming the TFLite C library file.
pub const TFLITE_LIB_ENV: &str = "TPU_SDK_TFLITE_C_LIB";
/// Environment variable naming the libedgetpu file.
pub const EDGETPU_LIB_ENV: &str = "TPU_SDK_LIBEDGETPU";
/// The name of the custom op that holds the compiled Edge TPU program.
pub const CUSTOM_OP: &str = "edgetpu-custom-op";

/// What to install when the TFLite C library is missing.
pub const TFLITE_INSTALL_HINT: &str = "cannot load the TensorFlow Lite C library (libtensorflowlite_c.so): build it from TensorFlow \
(`bazel build -c opt //tensorflow/lite/c:tensorflowlite_c`, or the CMake target tensorflow-lite-c) in the TensorFlow version your \
libedgetpu was built against (libedgetpu 16.0 / grouper: TF 2.5-2.16), put it on the loader path (e.g. /usr/local/lib, then \
`sudo ldconfig`) or point TPU_SDK_TFLITE_C_LIB at it";
/// What to install when libedgetpu is missing.
pub const EDGETPU_INSTALL_HINT: &str = "cannot load libedgetpu.so.1: install Coral's Edge TPU runtime \
(`sudo apt-get install libedgetpu1-std` from Coral's apt repository packages.cloud.google.com/apt coral-edgetpu-stable; \
libedgetpu1-max for full clock speed) or point TPU_SDK_LIBEDGETPU at the library";

/// The two libraries, loaded.
#[derive(Clone)]
pub struct Libraries {
    /// The TFLite C API.
    pub tflite: Arc<TfLiteC>,
    /// libedgetpu.
    pub edgetpu: Arc<EdgeTpuC>,
}

impl Libraries {
    /// Loads the libraries at these paths (bare names are searched by the dynamic loader).
    pub fn load(tflite: &Path, edgetpu: &Path) -> Result<Libraries> {
        let edgetpu = Arc::new(EdgeTpuC::load(edgetpu)?);
        let tflite = Arc::new(TfLiteC::load(tflite)?);
        Ok(Libraries { tflite, edgetpu })
    }

    /// Loads the libraries named by the environment, or the system's.
    pub fn from_env() -> Result<Libraries> {
        let path = |var: &str, default: &str| std::env::var_os(var).map(PathBuf::from).unwrap_or_else(|| PathBuf::from(default));
        Libraries::load(&path(TFLITE_LIB_ENV, "libtensorflowlite_c.so"), &path(EDGETPU_LIB_ENV, "libedgetpu.so.1"))
    }
}

/// Checks delegate options against what libedgetpu accepts: `Performance` (Low|Medium|High|Max),
/// `Usb.AlwaysDfu` (True|False), `Usb.MaxBulkInQueueLength` (0..=255).
pub fn check_options(options: &[(String, String)]) -> Result<()> {
    for (k, v) in options {
        let ok = match k.as_str() {
            "Performance" => ["Low", "Medium", "High", "Max"].contains(&v.as_str()),
            "Usb.AlwaysDfu" => ["True", "False"].contains(&v.as_str()),
            "Usb.MaxBulkInQueueLength" => v.parse::<u8>().is_ok(),
            _ => return Err(Error::Unsupported(format!("unknown Edge TPU option '{k}' (known: Performance, Usb.AlwaysDfu, Usb.MaxBulkInQueueLength)"))),
        };
        if !ok {
            let allowed = match k.as_str() {
                "Performance" => "Low, Medium, High or Max",
                "Usb.AlwaysDfu" => "True or False",
                _ => "0 to 255",
            };
            return Err(Error::Unsupported(format!("Edge TPU option {k}={v}: expected {allowed}")));
        }
    }
    Ok(())
}

/// Parses `Performance=High,Usb.AlwaysDfu=False` into checked option pairs.
pub fn parse_options(s: &str) -> Result<Vec<(String, String)>> {
    let v: Vec<(String, String)> = s
        .split(',')
        .filter(|p| !p.trim().is_empty())
        .map(|p| p.split_once('=').map(|(k, v)| (k.trim().to_string(), v.trim().to_string())).ok_or_else(|| Error::Unsupported(format!("Edge TPU option '{p}': expected NAME=VALUE"))))
        .collect::<Result<_>>()?;
    check_options(&v)?;
    Ok(v)
}

/// Whether a `.tflite` file holds a compiled Edge TPU program (the `edgetpu-custom-op`).
pub fn is_compiled_for_edgetpu(bytes: &[u8]) -> Result<bool> {
    let m = schema::parse_model(bytes).map_err(|e| Error::InvalidModel(e.to_string()))?;
    Ok(m.operator_codes()
        .map(|codes| codes.iter().any(|c| c.code() == schema::builtin_operator::CUSTOM && c.custom_code() == Some(CUSTOM_OP)))
        .unwrap_or(false))
}

/// Whether a `.tflite` file is a full-integer model, the kind `edgetpu_compiler` takes as it is: some tensor
/// that the model computes (no constant data) is int8/uint8 with quantization parameters. Float models,
/// including those with fp16 or dynamic-range (int8 weight, float activation) weights, are not.
pub fn has_integer_activations(bytes: &[u8]) -> Result<bool> {
    let m = schema::parse_model(bytes).map_err(|e| Error::InvalidModel(e.to_string()))?;
    let Some(sg) = m.subgraphs().filter(|s| !s.is_empty()).map(|s| s.get(0)) else { return Ok(false) };
    for t in sg.tensors().into_iter().flat_map(|v| v.iter()) {
        let integer = matches!(t.type_(), schema::tensor_type::INT8 | schema::tensor_type::UINT8);
        let quantized = t.quantization().and_then(|q| q.scale()).is_some_and(|s| !s.is_empty());
        if integer && quantized && schema::buffer_data(&m, bytes, t.buffer()).map_err(Error::InvalidModel)?.is_empty() {
            return Ok(true);
        }
    }
    Ok(false)
}

/// The interface of a `.tflite` model — its first subgraph's inputs and outputs (names, dtypes, shapes), no
/// nodes. For a compiled Edge TPU model that is all the CLI needs to make inputs and name outputs, since
/// the program itself (the `edgetpu-custom-op`) runs inside libedgetpu.
pub fn signature(bytes: &[u8]) -> Result<Graph> {
    let m = schema::parse_model(bytes).map_err(|e| Error::InvalidModel(e.to_string()))?;
    let sg = m.subgraphs().filter(|s| !s.is_empty()).map(|s| s.get(0)).ok_or_else(|| Error::InvalidModel("the model has no subgraphs".into()))?;
    let tensors = sg.tensors().ok_or_else(|| Error::InvalidModel("the model's subgraph has no tensors".into()))?;
    let mut g = Graph::new(sg.name().unwrap_or("tflite"));
    let add = |g: &mut Graph, k: i32| -> Result<tpu_sdk_core::ir::ValueId> {
        let t = (k >= 0 && (k as usize) < tensors.len()).then(|| tensors.get(k as usize)).ok_or_else(|| Error::InvalidModel(format!("tensor index {k} out of range")))?;
        let name = t.name().unwrap_or("").to_string();
        let d = tflite_dtype_of(t.type_()).ok_or_else(|| Error::Unsupported(format!("tensor '{name}' has TFLite type {}", t.type_())))?;
        let shape = t.shape().map(|s| s.iter().map(|x| x.max(0) as usize).collect()).unwrap_or_default();
        let v = g.add_value(name, d, shape);
        // Per-tensor parameters of quantized inputs/outputs: `run --image` quantizes with them.
        if let Some(q) = t.quantization() {
            let (scale, zero_point) = (schema::to_vec(q.scale()), schema::to_vec(q.zero_point()));
            if scale.len() == 1 {
                let zero_point = if zero_point.len() == 1 { zero_point } else { vec![0] };
                g.value_mut(v).quant = Some(tpu_sdk_core::ir::QuantParams { scale, zero_point, axis: None });
            }
        }
        Ok(v)
    };
    for k in sg.inputs().map(|v| v.iter().collect::<Vec<i32>>()).unwrap_or_default() {
        let v = add(&mut g, k)?;
        g.inputs.push(v);
    }
    for k in sg.outputs().map(|v| v.iter().collect::<Vec<i32>>()).unwrap_or_default() {
        let v = add(&mut g, k)?;
        g.outputs.push(v);
    }
    Ok(g)
}

/// How `--device` names each of libedgetpu's devices: `usb:N` / `pci:N`, numbered per kind in list order.
pub fn device_names(devices: &[edgetpu_ffi::Device]) -> Vec<String> {
    let (mut u, mut p) = (0, 0);
    devices
        .iter()
        .map(|d| {
            let (kind, c) = if d.kind == DeviceType::Usb { ("usb", &mut u) } else { ("pci", &mut p) };
            *c += 1;
            format!("{kind}:{}", *c - 1)
        })
        .collect()
}

/// Finds `device` (`usb:N`, `pci:N`; `None`: the first) among libedgetpu's devices.
pub fn select_device(devices: &[edgetpu_ffi::Device], device: Option<&str>) -> Result<edgetpu_ffi::Device> {
    if devices.is_empty() {
        return Err(Error::Device(
            "no Edge TPU found: plug in the Coral USB Accelerator (a USB 3 port is fastest) or check the PCIe card's apex driver; `tpu-sdk devices --target edgetpu` shows what this machine sees".into(),
        ));
    }
    let Some(want) = device else { return Ok(devices[0].clone()) };
    let (kind, index) = want
        .split_once(':')
        .and_then(|(k, n)| {
            let kind = match k {
                "usb" => DeviceType::Usb,
                "pci" => DeviceType::Pci,
                _ => return None,
            };
            n.parse::<usize>().ok().map(|n| (kind, n))
        })
        .ok_or_else(|| Error::Device(format!("--device '{want}': Edge TPUs are named usb:N or pci:N (see `tpu-sdk devices --target edgetpu`)")))?;
    let found: Vec<String> = device_names(devices).iter().zip(devices).map(|(n, d)| format!("{n} ({})", d.path)).collect();
    devices
        .iter()
        .filter(|d| d.kind == kind)
        .nth(index)
        .cloned()
        .ok_or_else(|| Error::Device(format!("no Edge TPU {want}; found: {}", found.join(", "))))
}

/// A model loaded into a TFLite interpreter with the Edge TPU delegate.
pub struct Interpreter {
    interp: Interp,
    inputs: Vec<(DType, Vec<usize>, usize, String)>,
    outputs: Vec<(DType, Vec<usize>, usize, String)>,
    /// The device it runs on.
    pub device: edgetpu_ffi::Device,
}

fn dtype_of(t: i32) -> Option<DType> {
    // TfLiteType values from tensorflow/lite/core/c/c_api_types.h.
    Some(match t {
        1 => DType::F32,
        2 => DType::I32,
        3 => DType::U8,
        4 => DType::I64,
        7 => DType::I16,
        9 => DType::I8,
        11 => DType::F64,
        _ => return None,
    })
}

impl Interpreter {
    /// Creates the delegate for `device` with `options`, the interpreter for `model`, and allocates tensors.
    pub fn new(libs: &Libraries, model: Vec<u8>, device: Option<&str>, options: &[(String, String)]) -> Result<Interpreter> {
        check_options(options)?;
        let dev = select_device(&libs.edgetpu.list_devices(), device)?;
        let delegate = libs.edgetpu.create_delegate(dev.kind, &dev.path, options)?.ok_or_else(|| {
            Error::Device(format!(
                "libedgetpu could not open the Edge TPU at {}: check that no other process uses it and that you may open it (udev rules: see targets/edgetpu/README.md); a USB accelerator may need replugging after a firmware error",
                dev.path
            ))
        })?;
        let mut interp = Interp::new(&libs.tflite, model, delegate).map_err(|e| match e {
            BuildError::Model => Error::InvalidModel("the TFLite library rejected the model file (not a valid .tflite)".into()),
            BuildError::Interpreter => Error::Device(format!(
                "the TFLite library ({}) could not build an interpreter with the Edge TPU delegate: libedgetpu ({}) and the TFLite C library must come from matching TensorFlow versions",
                libs.tflite.version(),
                libs.edgetpu.version()
            )),
        })?;
        if !interp.allocate() {
            return Err(Error::Device(format!(
                "preparing the model for the Edge TPU failed (see the library's message above). Most often the model was compiled for a newer Edge TPU runtime than the installed one ({}): update libedgetpu, or recompile with `edgetpu_compiler -m <runtime version>`",
                libs.edgetpu.version()
            )));
        }
        let info = |t: Option<tflite_ffi::TensorInfo>| -> Result<(DType, Vec<usize>, usize, String)> {
            let t = t.ok_or_else(|| Error::Device("the TFLite library returned no tensor".into()))?;
            let d = dtype_of(t.ty).ok_or_else(|| Error::Unsupported(format!("tensor '{}' has TfLiteType {}, which tpu-sdk does not exchange", t.name, t.ty)))?;
            Ok((d, t.shape, t.bytes, t.name))
        };
        let (ni, no) = interp.counts();
        let inputs = (0..ni).map(|k| info(interp.input_info(k))).collect::<Result<Vec<_>>>()?;
        let outputs = (0..no).map(|k| info(interp.output_info(k))).collect::<Result<Vec<_>>>()?;
        Ok(Interpreter { interp, inputs, outputs, device: dev })
    }

    /// Input names, dtypes and shapes.
    pub fn inputs(&self) -> Vec<(String, DType, Vec<usize>)> {
        self.inputs.iter().map(|(d, s, _, n)| (n.clone(), *d, s.clone())).collect()
    }

    /// Runs one inference.
    pub fn run(&mut self, inputs: &[Tensor]) -> Result<Vec<Tensor>> {
        let refs: Vec<&Tensor> = inputs.iter().collect();
        self.run_refs(&refs)
    }

    /// [`Interpreter::run`] on borrowed inputs (they are copied into the TFLite interpreter's tensors either way).
    pub fn run_refs(&mut self, inputs: &[&Tensor]) -> Result<Vec<Tensor>> {
        if inputs.len() != self.inputs.len() {
            return Err(Error::InputMismatch(format!("the model takes {} inputs, {} given", self.inputs.len(), inputs.len())));
        }
        for (k, (x, (d, shape, bytes, name))) in inputs.iter().zip(&self.inputs).enumerate() {
            if x.dtype() != *d || &x.shape != shape {
                return Err(Error::InputMismatch(format!("input '{name}' takes {d}{shape:?}, given {}{:?}", x.dtype(), x.shape)));
            }
            let b = to_bytes(x)?;
            if b.len() != *bytes || !self.interp.copy_in(k, &b) {
                return Err(Error::Device(format!("copying input '{name}' into the interpreter failed")));
            }
        }
        if !self.interp.invoke() {
            return Err(Error::Device(format!(
                "the Edge TPU inference failed on {} (the library's message is above): if the device was unplugged or \
                 reset, reconnect it, check `tpu-sdk devices`, and load the model again",
                self.device.path
            )));
        }
        self.outputs
            .iter()
            .enumerate()
            .map(|(k, (d, shape, bytes, name))| {
                let mut b = vec![0u8; *bytes];
                if !self.interp.copy_out(k, &mut b) {
                    return Err(Error::Device(format!("reading output '{name}' failed")));
                }
                from_bytes(*d, shape.clone(), &b)
            })
            .collect()
    }
}

impl Executable for Interpreter {
    fn run(&mut self, inputs: &[Tensor]) -> Result<Vec<Tensor>> {
        Interpreter::run(self, inputs)
    }
    fn run_refs(&mut self, inputs: &[&Tensor]) -> Result<Vec<Tensor>> {
        Interpreter::run_refs(self, inputs)
    }
}

macro_rules! le_types {
    ($($d:ident => $t:ty),*) => {
        fn to_bytes(x: &Tensor) -> Result<Vec<u8>> {
            match x.dtype() {
                $(DType::$d => Ok(x.view::<$t>().unwrap_or(&[]).iter().flat_map(|v| v.to_le_bytes()).collect()),)*
                other => Err(Error::Unsupported(format!("the Edge TPU runtime does not exchange {other} tensors"))),
            }
        }
        fn from_bytes(d: DType, shape: Vec<usize>, b: &[u8]) -> Result<Tensor> {
            match d {
                $(DType::$d => {
                    const N: usize = std::mem::size_of::<$t>();
                    let v: Vec<$t> = b.chunks_exact(N).map(|c| <$t>::from_le_bytes(c.try_into().expect("chunk of N bytes"))).collect();
                    Tensor::from_vec(shape, v).ok_or_else(|| Error::Device("output size does not match its shape".into()))
                })*
                other => Err(Error::Unsupported(format!("the Edge TPU runtime does not exchange {other} tensors"))),
            }
        }
    };
}
le_types!(F32 => f32, F64 => f64, I8 => i8, U8 => u8, I16 => i16, I32 => i32, I64 => i64);

/// Prepares a model for the Edge TPU `device` (`usb:0`, `pci:0`; `None`: the first one). `model_file` is the
/// `.tflite` the graph came from; without the `edgetpu-custom-op` it runs on the CPU runtime (notice on
/// stderr).
pub fn prepare(graph: Graph, device: Option<&str>, model_file: Option<&Path>, options: &[(String, String)]) -> Result<Box<dyn Executable>> {
    let hint = "the edgetpu runtime runs compiled .tflite files (`tpu-sdk compile MODEL --target edgetpu -o model.tflite`, then `tpu-sdk run model_edgetpu.tflite --target edgetpu`)";
    let Some(path) = model_file else {
        return Err(Error::Unsupported(format!("{hint}; this model did not come from one")));
    };
    if !path.extension().is_some_and(|e| e.eq_ignore_ascii_case("tflite")) {
        return Err(Error::Unsupported(format!("{hint}; {} is not one", path.display())));
    }
    let bytes = std::fs::read(path).map_err(|e| Error::Io { path: path.display().to_string(), source: e })?;
    if !is_compiled_for_edgetpu(&bytes)? {
        eprintln!(
            "notice: {} has no {CUSTOM_OP} (it was not compiled with edgetpu_compiler): running it on the CPU runtime",
            path.display()
        );
        return tpu_sdk_core::runtime::CpuTarget.prepare(graph);
    }
    let libs = Libraries::from_env()?;
    Ok(Box::new(Interpreter::new(&libs, bytes, device, options)?))
}
