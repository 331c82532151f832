//! `tpu_sdk._native`: the Rust side of the `tpu_sdk` Python package (see python/README.md). The Python modules
//! around it (`tpu_sdk/__init__.py`, `tpu_sdk/coral/`) give the documented API; this module holds what needs
//! the library: loading and running models, compiling, inspecting, listing devices and the command line.
//!
//! Errors become the exceptions of `tpu_sdk._errors` by the CLI's exit code (2 `InputError`, 3 `ModelError`,
//! 4 `DeviceError`, otherwise `Error`), with the CLI's message. The GIL is released while a model loads, runs or
//! compiles.

mod input_buffer;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use numpy::{PyArray1, PyArrayDescrMethods, PyArrayDyn, PyArrayMethods, PyUntypedArray, PyUntypedArrayMethods};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyType};

use input_buffer::InputBuffer;
use tpu_sdk::cmd::{ModelArgs, ModelOnTarget, Opened, TargetArgs};
use tpu_sdk::core::import::DeclaredDim;
use tpu_sdk::core::ir::TensorData;
use tpu_sdk::core::target::Progress;
use tpu_sdk::{DType, Executable, Model, Tensor};

/// The exception class `name` of `tpu_sdk._errors` raised with `msg`.
fn raise(py: Python<'_>, name: &str, msg: String) -> PyErr {
    let class = py.import("tpu_sdk._errors").and_then(|m| m.getattr(name)).and_then(|c| Ok(c.downcast_into::<PyType>()?));
    match class {
        Ok(c) => PyErr::from_type(c, msg),
        Err(e) => e,
    }
}

/// An error of the library or the command line's code as the exception its exit code stands for.
fn to_py(py: Python<'_>, e: anyhow::Error) -> PyErr {
    let name = match tpu_sdk::cmd::exit_code(&e) {
        2 => "InputError",
        3 => "ModelError",
        4 => "DeviceError",
        _ => "Error",
    };
    raise(py, name, format!("{e:#}"))
}

fn input_error(py: Python<'_>, msg: String) -> PyErr {
    raise(py, "InputError", msg)
}

/// numpy's name of a dtype (what a Python user reads in messages and in `Session.inputs`).
fn numpy_name(d: DType) -> &'static str {
    match d {
        DType::F32 => "float32",
        DType::F64 => "float64",
        DType::F16 => "float16",
        // numpy has no bfloat16: such inputs take float32 arrays (rounded to bf16), outputs come as float32
        DType::BF16 => "float32",
        DType::I8 => "int8",
        DType::U8 => "uint8",
        DType::I16 => "int16",
        DType::I32 => "int32",
        DType::I64 => "int64",
        DType::Bool => "bool",
    }
}

/// The numpy dtype of arrays for a model's `d` inputs and outputs.
fn numpy_dtype(py: Python<'_>, d: DType) -> Bound<'_, numpy::PyArrayDescr> {
    match d {
        DType::F32 | DType::BF16 => numpy::dtype::<f32>(py),
        DType::F64 => numpy::dtype::<f64>(py),
        DType::F16 => numpy::dtype::<half::f16>(py),
        DType::I8 => numpy::dtype::<i8>(py),
        DType::U8 => numpy::dtype::<u8>(py),
        DType::I16 => numpy::dtype::<i16>(py),
        DType::I32 => numpy::dtype::<i32>(py),
        DType::I64 => numpy::dtype::<i64>(py),
        DType::Bool => numpy::dtype::<bool>(py),
    }
}

fn shape_text(shape: &[Option<usize>]) -> String {
    let dims: Vec<String> = shape.iter().map(|d| d.map_or("?".to_string(), |d| d.to_string())).collect();
    format!("[{}]", dims.join(", "))
}

/// A copy of a numpy array's elements (row-major, whatever its strides) and its shape.
fn read_array<T: numpy::Element + Copy>(a: &Bound<'_, PyAny>) -> PyResult<(Vec<usize>, Vec<T>)> {
    let arr = a.downcast::<PyArrayDyn<T>>()?;
    let ro = arr.readonly();
    let shape = ro.shape().to_vec();
    input_buffer::note_copy(ro.len() * std::mem::size_of::<T>());
    let v = match ro.as_slice() {
        Ok(s) => s.to_vec(),
        Err(_) => ro.as_array().iter().copied().collect(),
    };
    Ok((shape, v))
}

/// The tensor of a numpy array whose dtype is `want`'s (the caller checked it); bf16 inputs take float32.
fn to_tensor(a: &Bound<'_, PyAny>, want: DType) -> PyResult<Tensor> {
    let (shape, data) = match want {
        DType::F32 => read_array::<f32>(a).map(|(s, v)| (s, TensorData::F32(v)))?,
        DType::BF16 => read_array::<f32>(a).map(|(s, v)| (s, TensorData::BF16(v.into_iter().map(half::bf16::from_f32).collect())))?,
        DType::F64 => read_array::<f64>(a).map(|(s, v)| (s, TensorData::F64(v)))?,
        DType::F16 => read_array::<half::f16>(a).map(|(s, v)| (s, TensorData::F16(v)))?,
        DType::I8 => read_array::<i8>(a).map(|(s, v)| (s, TensorData::I8(v)))?,
        DType::U8 => read_array::<u8>(a).map(|(s, v)| (s, TensorData::U8(v)))?,
        DType::I16 => read_array::<i16>(a).map(|(s, v)| (s, TensorData::I16(v)))?,
        DType::I32 => read_array::<i32>(a).map(|(s, v)| (s, TensorData::I32(v)))?,
        DType::I64 => read_array::<i64>(a).map(|(s, v)| (s, TensorData::I64(v)))?,
        DType::Bool => read_array::<bool>(a).map(|(s, v)| (s, TensorData::Bool(v)))?,
    };
    Ok(Tensor { shape, data })
}

/// A numpy array that takes over the tensor's storage (no copy; bf16 becomes float32).
fn to_numpy<'py>(py: Python<'py>, t: Tensor) -> PyResult<Bound<'py, PyAny>> {
    let shape = t.shape;
    macro_rules! arr {
        ($v:expr) => {
            PyArray1::from_vec(py, $v).reshape(shape)?.into_any()
        };
    }
    Ok(match t.data {
        TensorData::F32(v) => arr!(v),
        TensorData::F64(v) => arr!(v),
        TensorData::F16(v) => arr!(v),
        TensorData::BF16(v) => arr!(v.into_iter().map(f32::from).collect::<Vec<f32>>()),
        TensorData::I8(v) => arr!(v),
        TensorData::U8(v) => arr!(v),
        TensorData::I16(v) => arr!(v),
        TensorData::I32(v) => arr!(v),
        TensorData::I64(v) => arr!(v),
        TensorData::Bool(v) => arr!(v),
    })
}

/// One input of a run: a copy of the caller's array, or the tensor of an `input_array` array, read in place.
enum Feed<'py> {
    Copied(Tensor),
    InPlace(Bound<'py, InputBuffer>),
}

impl Feed<'_> {
    fn tensor(&self) -> &Tensor {
        match self {
            Feed::Copied(t) => t,
            Feed::InPlace(b) => b.get().tensor(),
        }
    }
}

/// A model input or output as `Session.inputs` / `.outputs` describe it.
#[derive(Clone, Debug)]
struct Port {
    name: String,
    dtype: DType,
    /// `None` for a dimension the file leaves free (inputs only).
    shape: Vec<Option<usize>>,
    /// Per-tensor or per-axis scales and zero points of a quantized tensor, and the axis.
    quant: Option<(Vec<f32>, Vec<i64>, Option<usize>)>,
}

impl Port {
    fn of(v: &tpu_sdk::core::ir::Value, free: &[bool]) -> Port {
        Port {
            name: v.name.clone(),
            dtype: v.dtype,
            shape: v.shape.iter().enumerate().map(|(k, &d)| (!free.get(k).copied().unwrap_or(false)).then_some(d)).collect(),
            quant: v.quant.as_ref().map(|q| (q.scale.clone(), q.zero_point.clone(), q.axis)),
        }
    }

    fn to_py<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        d.set_item("name", &self.name)?;
        d.set_item("dtype", numpy_name(self.dtype))?;
        d.set_item("shape", self.shape.clone())?;
        match &self.quant {
            Some((s, z, a)) => d.set_item("quantization", (s.clone(), z.clone(), *a))?,
            None => d.set_item("quantization", py.None())?,
        }
        Ok(d)
    }
}

/// A model loaded and prepared for the input shapes `shapes`.
struct Prepared {
    shapes: Vec<Vec<usize>>,
    exe: Box<dyn Executable>,
}

/// How many input-shape specialisations of a model with free dimensions a session keeps prepared.
const KEEP_PREPARED: usize = 4;

/// The inputs (initializers left out) and outputs an ONNX file declares, with `None` for dims it leaves free
/// (`None` when the file is not an ONNX model that can be read, or declares a type this module does not know).
fn onnx_ports(path: &std::path::Path) -> Option<(Vec<Port>, Vec<Port>)> {
    use tpu_sdk::core::import::onnx::proto::{self, tensor_shape_proto::dimension::Value as Dim};
    if !path.extension().is_some_and(|e| e.eq_ignore_ascii_case("onnx")) {
        return None;
    }
    let bytes = std::fs::read(path).ok()?;
    let m = <proto::ModelProto as prost::Message>::decode(bytes.as_slice()).ok()?;
    let g = m.graph?;
    let inits: std::collections::HashSet<&str> = g.initializer.iter().filter_map(|t| t.name.as_deref()).collect();
    let port = |vi: &proto::ValueInfoProto| -> Option<Port> {
        let Some(proto::type_proto::Value::TensorType(tt)) = vi.r#type.as_ref()?.value.as_ref() else { return None };
        let dtype = match tt.elem_type? {
            1 => DType::F32,
            2 => DType::U8,
            3 => DType::I8,
            5 => DType::I16,
            6 => DType::I32,
            7 => DType::I64,
            9 => DType::Bool,
            10 => DType::F16,
            11 => DType::F64,
            16 => DType::BF16,
            _ => return None,
        };
        let shape = tt.shape.as_ref()?.dim.iter().map(|d| match d.value {
            Some(Dim::DimValue(v)) if v >= 0 => usize::try_from(v).ok(),
            _ => None,
        });
        Some(Port { name: vi.name.clone()?, dtype, shape: shape.collect(), quant: None })
    };
    let ins = g.input.iter().filter(|vi| !inits.contains(vi.name.as_deref().unwrap_or(""))).map(port).collect::<Option<Vec<_>>>()?;
    let outs = g.output.iter().map(port).collect::<Option<Vec<_>>>()?;
    Some((ins, outs))
}

/// A rayon pool whose workers compute with subnormals flushed to zero, as CPU sessions do
/// (`tpu_sdk::core::runtime::fp_env`).
fn pool_builder() -> rayon::ThreadPoolBuilder {
    rayon::ThreadPoolBuilder::new().start_handler(|_| tpu_sdk::core::runtime::fp_env::flush_denormals())
}

/// The pool of sessions made with `threads=None`: one worker per core, shared by every such session (rayon's
/// global pool would leave the caller's thread running beside its workers). `None` when its threads cannot
/// start: the caller's thread then runs alone.
fn default_pool() -> Option<&'static rayon::ThreadPool> {
    static POOL: std::sync::OnceLock<Option<rayon::ThreadPool>> = std::sync::OnceLock::new();
    POOL.get_or_init(|| pool_builder().build().ok()).as_ref()
}

/// A model prepared for a target (the `tpu_sdk.Session` wrapper in Python holds one).
#[pyclass(module = "tpu_sdk._native", frozen)]
struct NativeSession {
    on: ModelOnTarget,
    pool: Option<rayon::ThreadPool>,
    inputs: Vec<Port>,
    outputs: Vec<Port>,
    /// Which dims of each input the file leaves free and no `input_shapes` sets: those may change from run
    /// to run (the model is then loaded and prepared again for the new shapes, as `tpu-sdk run` loads it for
    /// the shapes of its inputs).
    free: Vec<Vec<bool>>,
    prepared: Mutex<Vec<Prepared>>,
}

impl NativeSession {
    /// Loads the model for `shapes` (of the inputs with free dims; `None`: as the file and options say) and
    /// prepares it.
    fn prepare(on: &ModelOnTarget, shapes: Option<&[(String, Vec<usize>)]>) -> anyhow::Result<(Model, Box<dyn Executable>)> {
        let mut on = on.clone();
        if let Some(shapes) = shapes {
            on.model.input_shapes.retain(|s| !shapes.iter().any(|(n, _)| s.split_once('=').is_some_and(|(k, _)| k == n)));
            for (n, s) in shapes {
                on.model.input_shapes.push(format!("{n}={}", s.iter().map(|d| d.to_string()).collect::<Vec<_>>().join(",")));
            }
        }
        let Opened { target, model, .. } = on.open(&[])?;
        let exe = target.prepare(model.graph().clone())?;
        Ok((model, exe))
    }

    /// Runs `f` inside the session's pool (`threads=N`) or the process-wide default one, so the calling
    /// thread's serial work does not compete with idle-spinning pool workers (as the CLI runs its commands
    /// inside `rayon::ThreadPool::install`).
    fn in_pool<R: Send>(&self, f: impl FnOnce() -> R + Send) -> R {
        match self.pool() {
            Some(p) => p.install(f),
            None => f(),
        }
    }

    fn pool(&self) -> Option<&rayon::ThreadPool> {
        self.pool.as_ref().or_else(|| default_pool())
    }

    /// The feeds (name → array) as tensors in the model's input order, checked against the inputs' dtypes and
    /// fixed dims: arrays from `input_array` as they are, others copied.
    fn tensors<'py>(&self, py: Python<'py>, feeds: &Bound<'py, PyDict>) -> PyResult<Vec<Feed<'py>>> {
        let names: Vec<&str> = self.inputs.iter().map(|p| p.name.as_str()).collect();
        let mut slots: Vec<Option<Feed<'py>>> = (0..self.inputs.len()).map(|_| None).collect();
        for (k, v) in feeds.iter() {
            let name: String = k.extract().map_err(|_| input_error(py, format!("feed keys are input names (str), not {}", k.get_type())))?;
            let i = names
                .iter()
                .position(|n| *n == name)
                .ok_or_else(|| input_error(py, format!("the model has no input '{name}' (inputs: {})", names.join(", "))))?;
            let port = &self.inputs[i];
            let arr = v.downcast::<PyUntypedArray>().map_err(|_| {
                input_error(py, format!("input '{name}': expected a numpy array, given {}", v.get_type()))
            })?;
            let given_shape: Vec<Option<usize>> = arr.shape().iter().map(|&d| Some(d)).collect();
            let dtype_ok = arr.dtype().is_equiv_to(&numpy_dtype(py, port.dtype));
            let shape_ok = given_shape.len() == port.shape.len() && port.shape.iter().zip(&given_shape).all(|(w, g)| w.is_none() || w == g);
            if !dtype_ok || !shape_ok {
                let given_dtype = arr.dtype().to_string();
                return Err(input_error(
                    py,
                    format!(
                        "input '{name}': expected {}{}, given {given_dtype}{}",
                        numpy_name(port.dtype),
                        shape_text(&port.shape),
                        shape_text(&given_shape)
                    ),
                ));
            }
            slots[i] = Some(match InputBuffer::behind(arr) {
                Some(b) => Feed::InPlace(b),
                None => Feed::Copied(to_tensor(arr.as_any(), port.dtype)?),
            });
        }
        slots
            .into_iter()
            .enumerate()
            .map(|(i, t)| t.ok_or_else(|| input_error(py, format!("input '{}' is missing", names[i]))))
            .collect()
    }

    /// Runs `inputs` on the executable prepared for their shapes (preparing one when there is none yet), with
    /// the GIL released.
    fn run_tensors(&self, py: Python<'_>, inputs: &[&Tensor]) -> PyResult<Vec<Tensor>> {
        let shapes: Vec<Vec<usize>> = inputs.iter().map(|t| t.shape.clone()).collect();
        let r = py.allow_threads(|| -> anyhow::Result<Vec<Tensor>> {
            let mut prepared = self.prepared.lock().unwrap_or_else(|p| p.into_inner());
            let k = match prepared.iter().position(|p| p.shapes == shapes) {
                Some(k) => k,
                None => {
                    let free: Vec<(String, Vec<usize>)> = self
                        .inputs
                        .iter()
                        .zip(&shapes)
                        .zip(&self.free)
                        .filter(|(_, f)| f.iter().any(|&x| x))
                        .map(|((p, s), _)| (p.name.clone(), s.clone()))
                        .collect();
                    let (_, exe) = self.in_pool(|| NativeSession::prepare(&self.on, Some(&free)))?;
                    if prepared.len() >= KEEP_PREPARED {
                        prepared.remove(0);
                    }
                    prepared.push(Prepared { shapes: shapes.clone(), exe });
                    prepared.len() - 1
                }
            };
            let exe = &mut prepared[k].exe;
            Ok(self.in_pool(|| exe.run_refs(inputs))?)
        });
        r.map_err(|e| to_py(py, e))
    }
}

#[pymethods]
impl NativeSession {
    #[new]
    #[pyo3(signature = (path, target="cpu", threads=None, input_shapes=None, plugin=None, device=None))]
    fn new(
        py: Python<'_>,
        path: PathBuf,
        target: &str,
        threads: Option<usize>,
        input_shapes: Option<HashMap<String, Vec<usize>>>,
        plugin: Option<PathBuf>,
        device: Option<String>,
    ) -> PyResult<NativeSession> {
        if !tpu_sdk::targets::names().contains(&target) {
            return Err(input_error(py, format!("unknown target '{target}' (this build has: {})", tpu_sdk::targets::names().join(", "))));
        }
        let pool = match threads {
            Some(0) => return Err(input_error(py, "threads must be at least 1".into())),
            Some(n) => Some(pool_builder().num_threads(n).build().map_err(|e| raise(py, "Error", format!("cannot start {n} threads: {e}")))?),
            None => None,
        };
        let mut shapes: Vec<(String, Vec<usize>)> = input_shapes.unwrap_or_default().into_iter().collect();
        shapes.sort();
        let on = ModelOnTarget {
            model: model_args(&path, &shapes),
            target: TargetArgs { target: target.to_string(), plugin, device, replicas: None, shard: Vec::new() },
        };
        let mut s = NativeSession { on, pool, inputs: Vec::new(), outputs: Vec::new(), free: Vec::new(), prepared: Mutex::new(Vec::new()) };
        let declared = Model::declared_inputs(&path).unwrap_or_default();
        let free_of = |name: &str, rank: usize| -> Vec<bool> {
            match declared.iter().find(|d| d.name == name).and_then(|d| d.dims.as_ref()) {
                Some(dims) if !shapes.iter().any(|(n, _)| n == name) && dims.len() == rank => {
                    dims.iter().map(|d| !matches!(d, DeclaredDim::Fixed(_))).collect()
                }
                _ => vec![false; rank],
            }
        };
        let (model, exe) = match py.allow_threads(|| s.in_pool(|| NativeSession::prepare(&s.on, None))) {
            Ok(m) => m,
            Err(e) => {
                // A model whose free dims cannot all be 1 (a pooling window larger than a 1-pixel image) is
                // prepared on its first run, for the shapes given; until then the file's declarations say what
                // its inputs and outputs are.
                let ports = onnx_ports(&path).filter(|(ins, _)| ins.iter().any(|p| p.shape.iter().any(Option::is_none)));
                let Some((ins, outs)) = ports else { return Err(to_py(py, e)) };
                s.free = ins.iter().map(|p| if shapes.iter().any(|(n, _)| *n == p.name) { vec![false; p.shape.len()] } else { p.shape.iter().map(Option::is_none).collect() }).collect();
                s.inputs = ins;
                s.outputs = outs;
                return Ok(s);
            }
        };
        let g = model.graph();
        for &i in &g.inputs {
            let v = g.value(i);
            let free = free_of(&v.name, v.shape.len());
            s.inputs.push(Port::of(v, &free));
            s.free.push(free);
        }
        s.outputs = g.outputs.iter().map(|&o| Port::of(g.value(o), &[])).collect();
        let shapes = g.inputs.iter().map(|&i| g.value(i).shape.clone()).collect();
        s.prepared.lock().unwrap_or_else(|p| p.into_inner()).push(Prepared { shapes, exe });
        Ok(s)
    }

    /// The inputs: dicts of name, dtype (numpy's name), shape (None for free dims), quantization.
    #[getter]
    fn inputs<'py>(&self, py: Python<'py>) -> PyResult<Vec<Bound<'py, PyDict>>> {
        self.inputs.iter().map(|p| p.to_py(py)).collect()
    }

    /// The outputs, as `inputs` (shapes as prepared for the file's shapes, free dims taken as 1).
    #[getter]
    fn outputs<'py>(&self, py: Python<'py>) -> PyResult<Vec<Bound<'py, PyDict>>> {
        self.outputs.iter().map(|p| p.to_py(py)).collect()
    }

    #[getter]
    fn target(&self) -> String {
        self.on.target.target.clone()
    }

    #[getter]
    fn path(&self) -> PathBuf {
        self.on.model.model.clone()
    }

    /// A zeroed array for input `name` (of `shape`, which inputs with free dims need) that runs read in place:
    /// fill it and pass it in `run`'s feeds, and it is not copied. A bf16 input gives a float32 array, converted
    /// on each run.
    #[pyo3(signature = (name, shape=None))]
    fn input_array<'py>(&self, py: Python<'py>, name: &str, shape: Option<Vec<usize>>) -> PyResult<Bound<'py, PyAny>> {
        let names: Vec<&str> = self.inputs.iter().map(|p| p.name.as_str()).collect();
        let port = self
            .inputs
            .iter()
            .find(|p| p.name == name)
            .ok_or_else(|| input_error(py, format!("the model has no input '{name}' (inputs: {})", names.join(", "))))?;
        let shape: Vec<usize> = match shape {
            Some(s) => {
                let fits = s.len() == port.shape.len() && port.shape.iter().zip(&s).all(|(w, g)| w.is_none_or(|w| w == *g));
                if !fits {
                    let given: Vec<Option<usize>> = s.iter().map(|&d| Some(d)).collect();
                    return Err(input_error(py, format!("input '{name}' is {}, shape {} does not fit it", shape_text(&port.shape), shape_text(&given))));
                }
                s
            }
            None => port.shape.iter().map(|d| d.ok_or(())).collect::<Result<_, ()>>().map_err(|_| {
                input_error(py, format!("input '{name}' is {}: give the shape of the array (shape=[...])", shape_text(&port.shape)))
            })?,
        };
        tpu_sdk::core::limits::check_tensor(&format!("input '{name}'"), port.dtype, &shape).map_err(|e| to_py(py, e.into()))?;
        match InputBuffer::array(py, port.dtype, &shape)? {
            Some(a) => Ok(a),
            None => Ok(numpy::PyArrayDyn::<f32>::zeros(py, numpy::ndarray::IxDyn(&shape), false).into_any()),
        }
    }

    /// Runs the model on `feeds` (input name → array) and returns output name → array, in output order.
    fn run<'py>(&self, py: Python<'py>, feeds: &Bound<'py, PyDict>) -> PyResult<Bound<'py, PyDict>> {
        let feeds = self.tensors(py, feeds)?;
        let inputs: Vec<&Tensor> = feeds.iter().map(Feed::tensor).collect();
        let outputs = self.run_tensors(py, &inputs)?;
        let d = PyDict::new(py);
        for (p, t) in self.outputs.iter().zip(outputs) {
            d.set_item(&p.name, to_numpy(py, t)?)?;
        }
        Ok(d)
    }

    /// Times `iterations` runs after `warmup` untimed ones on `feeds` (default: the deterministic random inputs
    /// `tpu-sdk bench` makes) and returns the document `tpu-sdk bench --json` prints (as JSON text). Ctrl-C
    /// stops it between runs.
    #[pyo3(signature = (iterations=50, warmup=5, feeds=None))]
    fn bench(&self, py: Python<'_>, iterations: usize, warmup: usize, feeds: Option<&Bound<'_, PyDict>>) -> PyResult<String> {
        if iterations == 0 {
            return Err(input_error(py, "iterations must be at least 1".into()));
        }
        let feeds = match feeds {
            Some(f) => self.tensors(py, f)?,
            None => {
                let mut made = Vec::with_capacity(self.inputs.len());
                for (k, p) in self.inputs.iter().enumerate() {
                    let shape: Vec<usize> = p.shape.iter().map(|d| d.unwrap_or(1)).collect();
                    tpu_sdk::core::limits::check_tensor(&format!("bench's random input '{}'", p.name), p.dtype, &shape).map_err(|e| to_py(py, e.into()))?;
                    made.push(Feed::Copied(tpu_sdk::cmd::random_tensor(p.dtype, &shape, k as u64 + 1)));
                }
                made
            }
        };
        let inputs: Vec<&Tensor> = feeds.iter().map(Feed::tensor).collect();
        for _ in 0..warmup {
            self.run_tensors(py, &inputs)?;
            py.check_signals()?;
        }
        let mut times: Vec<Duration> = Vec::with_capacity(iterations);
        let cpu0 = tpu_sdk::cmd::bench::process_cpu_time();
        for _ in 0..iterations {
            let t0 = Instant::now();
            self.run_tensors(py, &inputs)?;
            times.push(t0.elapsed());
            py.check_signals()?;
        }
        let cpu = cpu0.zip(tpu_sdk::cmd::bench::process_cpu_time()).map(|(a, b)| b.saturating_sub(a) / iterations as u32);
        let batch = inputs.first().and_then(|t| t.shape.first().copied()).unwrap_or(1).max(1);
        let st = tpu_sdk::cmd::bench::Stats::of(&times, batch);
        let threads = self.pool().map_or(1, |p| p.current_num_threads());
        let doc = serde_json::json!({
            "model": self.on.model.model.display().to_string(),
            "target": self.on.target.target,
            "iterations": iterations,
            "warmup": warmup,
            "batch": batch,
            "peak_resident_bytes": tpu_sdk::cmd::bench::peak_resident_bytes(),
            "threads": threads,
            "latency_ms": st.json(),
            "cpu_ms_per_run": cpu.map(|c| c.as_secs_f64() * 1e3),
            "throughput_per_s": st.throughput,
            "profile": [],
        });
        Ok(doc.to_string())
    }
}

/// Raised inside a compile by its progress callback once Python asked to stop (Ctrl-C).
struct Cancelled;

/// `tpu-sdk compile ARGS --json`: compiles in a worker thread while this one waits with the GIL released,
/// checking for Ctrl-C every 100 ms; returns the report (JSON text). On Ctrl-C the compile stops at its next
/// progress step (without writing its output when that comes before the end) and KeyboardInterrupt is
/// raised at once.
#[pyfunction]
fn compile(py: Python<'_>, args: Vec<String>) -> PyResult<String> {
    let a = tpu_sdk::cmd::compile::parse_args(&args).map_err(|e| input_error(py, e.to_string().trim_end().trim_start_matches("error: ").to_string()))?;
    let cancel = Arc::new(AtomicBool::new(false));
    let stop = cancel.clone();
    let progress = Progress(Some(Arc::new(move |_: &str, _: u64, _: u64| {
        if stop.load(Ordering::Relaxed) {
            std::panic::resume_unwind(Box::new(Cancelled));
        }
    })));
    let (tx, rx) = std::sync::mpsc::channel();
    let rx = Mutex::new(rx); // (a Receiver is not Sync: allow_threads needs the closure's borrows Send)
    std::thread::Builder::new()
        .name("tpu-sdk compile".into())
        .spawn(move || {
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| tpu_sdk::cmd::compile::compile(&a, progress)));
            let _ = tx.send(r);
        })
        .map_err(|e| raise(py, "Error", format!("cannot start the compile thread: {e}")))?;
    loop {
        match py.allow_threads(|| rx.lock().unwrap_or_else(|p| p.into_inner()).recv_timeout(Duration::from_millis(100))) {
            Ok(Ok(Ok(out))) => return Ok(out.report_json.unwrap_or_else(|| "{}".into())),
            Ok(Ok(Err(e))) => return Err(to_py(py, e)),
            Ok(Err(panic)) => {
                let what = panic.downcast_ref::<String>().cloned().or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()));
                return Err(raise(py, "Error", format!("internal error while compiling: {}", what.unwrap_or_else(|| "a panic".into()))));
            }
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                if let Err(e) = py.check_signals() {
                    cancel.store(true, Ordering::Relaxed);
                    return Err(e);
                }
            }
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => return Err(raise(py, "Error", "the compile thread ended without a result".into())),
        }
    }
}

/// The CLI's model arguments for `path` with full input shapes by name (`--input-shape NAME=D0,D1,...`).
fn model_args(path: &Path, shapes: &[(String, Vec<usize>)]) -> ModelArgs {
    ModelArgs {
        model: path.to_path_buf(),
        dims: Vec::new(),
        input_shapes: shapes.iter().map(|(n, s)| format!("{n}={}", s.iter().map(|d| d.to_string()).collect::<Vec<_>>().join(","))).collect(),
        no_optimize: false,
        bind: Vec::new(),
        bound: Vec::new(),
    }
}

/// `tpu-sdk inspect MODEL --json` (JSON text).
#[pyfunction]
#[pyo3(signature = (path, input_shapes=None))]
fn inspect(py: Python<'_>, path: PathBuf, input_shapes: Option<HashMap<String, Vec<usize>>>) -> PyResult<String> {
    let mut shapes: Vec<(String, Vec<usize>)> = input_shapes.unwrap_or_default().into_iter().collect();
    shapes.sort();
    let a = model_args(&path, &shapes);
    let tflite = path.extension().is_some_and(|e| e.eq_ignore_ascii_case("tflite"));
    let model = py.allow_threads(|| a.load()).map_err(|e| to_py(py, e))?;
    Ok(tpu_sdk::cmd::inspect::json_doc(&model, tflite).to_string())
}

/// `tpu-sdk devices [--target T] --json` (JSON text: devices and problems).
#[pyfunction]
#[pyo3(signature = (target=None, plugin=None))]
fn devices(py: Python<'_>, target: Option<String>, plugin: Option<PathBuf>) -> PyResult<String> {
    if let Some(t) = target.as_deref().filter(|t| !tpu_sdk::targets::names().contains(t)) {
        return Err(input_error(py, format!("unknown target '{t}' (this build has: {})", tpu_sdk::targets::names().join(", "))));
    }
    let (devices, problems) = py.allow_threads(|| tpu_sdk::cmd::devices::find(target.as_deref(), plugin.as_deref()));
    Ok(tpu_sdk::cmd::devices::json_doc(&devices, &problems).to_string())
}

/// The targets in this build, the default first.
#[pyfunction]
fn targets() -> Vec<&'static str> {
    tpu_sdk::targets::names()
}

/// The `tpu-sdk` command line (`argv` with the program's name first); returns its exit code.
#[pyfunction]
fn cli_main(py: Python<'_>, argv: Vec<String>) -> u8 {
    py.allow_threads(|| {
        let code = tpu_sdk::cmd::main(argv);
        use std::io::Write;
        let _ = std::io::stdout().flush();
        code
    })
}

/// What the `coral` Interpreter reads from a `.tflite` file itself (JSON text): `inputs` / `outputs` as
/// `[tensor number, name]` pairs of the first subgraph, and `signatures`: `{key: {"inputs": {name: number},
/// "outputs": {...}, "subgraph_index": n}}`. Raises `ModelError` for a file that is not a readable TFLite model.
#[pyfunction]
fn tflite_interface(py: Python<'_>, path: PathBuf) -> PyResult<String> {
    let r = py.allow_threads(|| -> tpu_sdk::Result<_> {
        let bytes = std::fs::read(&path).map_err(|e| tpu_sdk::Error::Io { path: path.display().to_string(), source: e })?;
        tpu_sdk::core::import::tflite::file_interface(&bytes)
    });
    let fi = r.map_err(|e| to_py(py, e.into()))?;
    let maps = |v: &[(String, u32)]| v.iter().map(|(n, t)| (n.clone(), serde_json::json!(t))).collect::<serde_json::Map<_, _>>();
    let signatures: serde_json::Map<String, serde_json::Value> = fi
        .signatures
        .iter()
        .map(|d| (d.key.clone(), serde_json::json!({"inputs": maps(&d.inputs), "outputs": maps(&d.outputs), "subgraph_index": d.subgraph_index})))
        .collect();
    Ok(serde_json::json!({"inputs": fi.inputs, "outputs": fi.outputs, "signatures": signatures}).to_string())
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    // as the CLI: the CPU runtime spreads each GEMM over the rayon pool itself (see tpu_sdk::cmd::main)
    if std::env::var_os("MATMUL_NUM_THREADS").is_none() {
        std::env::set_var("MATMUL_NUM_THREADS", "1");
    }
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_class::<NativeSession>()?;
    m.add_class::<InputBuffer>()?;
    m.add_function(wrap_pyfunction!(input_buffer::_input_bytes_copied, m)?)?;
    m.add_function(wrap_pyfunction!(compile, m)?)?;
    m.add_function(wrap_pyfunction!(inspect, m)?)?;
    m.add_function(wrap_pyfunction!(devices, m)?)?;
    m.add_function(wrap_pyfunction!(targets, m)?)?;
    m.add_function(wrap_pyfunction!(cli_main, m)?)?;
    m.add_function(wrap_pyfunction!(tflite_interface, m)?)?;
    Ok(())
}
