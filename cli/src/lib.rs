//! # tpu-sdk
//!
//! Run neural networks on Google's TPUs — Cloud TPUs through PJRT, Coral Edge TPUs — and on a fast reference
//! CPU runtime that needs no accelerator at all.
//!
//! This crate is both the `tpu-sdk` command-line tool and a small library facade over
//! [`tpu_sdk_core`] (re-exported as [`core`]) and the target crates (behind the `cloud-tpu` and `edgetpu`
//! features). Load a [`Model`], optionally optimise it, [`Model::prepare`] it for a target and run it:
//!
//! ```
//! # std::env::set_current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/..")).unwrap();
//! use tpu_sdk::{DType, LoadOptions, Model, Tensor};
//!
//! let mut opts = LoadOptions::default();
//! opts.input_shapes.insert("x".into(), vec![1, 3, 48, 192]); // the model leaves N, H, W symbolic
//! let model = Model::load_with("examples/models/text_direction_cls.onnx", &opts)?;
//! let mut exe = model.prepare("cpu")?;
//! let outputs = exe.run(&[Tensor::zeros(DType::F32, vec![1, 3, 48, 192])])?;
//! let scores = outputs[0].as_f32().unwrap();
//! assert_eq!(scores.len(), 2); // upright text, text rotated by 180°
//! # Ok::<(), tpu_sdk::Error>(())
//! ```
#![warn(missing_docs)]

use std::collections::HashMap;
use std::path::{Path, PathBuf};

pub use tpu_sdk_core as core;
pub use tpu_sdk_core::ir::{DType, Graph, Tensor};
pub use tpu_sdk_core::target::{Executable, Target};
pub use tpu_sdk_core::{Error, Result};

// The command line's modules name this crate `tpu_sdk`, as when they were the binary's.
extern crate self as tpu_sdk;

#[doc(hidden)]
#[allow(missing_docs)]
pub mod cmd;
pub mod generate;
pub mod preprocess;
pub mod targets;

/// The README's code blocks, compiled and run as doc-tests.
#[doc = include_str!("../../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;

/// How to load a model.
#[derive(Clone, Debug, Default)]
pub struct LoadOptions {
    /// Sizes for named symbolic dimensions (for example `batch` → 8).
    pub dims: HashMap<String, usize>,
    /// Full shapes for inputs, by input name; overrides symbolic and unknown dims.
    pub input_shapes: HashMap<String, Vec<usize>>,
    /// Skip the optimisation passes (keep the graph as imported).
    pub no_optimize: bool,
    /// Inputs bound to fixed values, by name: they become constants and leave the model's inputs, so an `If`
    /// they decide folds to the branch they take (ONNX models only).
    pub input_values: HashMap<String, Tensor>,
}

/// The model file formats, told by the file's extension.
enum Format {
    Onnx,
    Tflite,
}

impl Format {
    fn of(path: &Path) -> Result<Format> {
        match path.extension().and_then(|e| e.to_str()).unwrap_or("").to_ascii_lowercase().as_str() {
            "onnx" | "" => Ok(Format::Onnx),
            "tflite" => Ok(Format::Tflite),
            other => Err(Error::Unsupported(format!("model format '.{other}' of {} (supported: .onnx, .tflite)", path.display()))),
        }
    }
}

/// A model loaded into the core IR.
#[derive(Clone, Debug)]
pub struct Model {
    graph: Graph,
    path: Option<PathBuf>,
}

impl Model {
    /// Loads an ONNX model (`.onnx`) with default options and optimises it.
    pub fn load(path: impl AsRef<Path>) -> Result<Model> {
        Model::load_with(path, &LoadOptions::default())
    }

    /// Loads a model with options.
    pub fn load_with(path: impl AsRef<Path>, opts: &LoadOptions) -> Result<Model> {
        let path = path.as_ref();
        let mut graph = match Format::of(path)? {
            Format::Onnx => {
                let io = tpu_sdk_core::import::onnx::ImportOptions {
                    dims: opts.dims.clone(),
                    input_shapes: opts.input_shapes.clone(),
                    input_values: opts.input_values.clone(),
                };
                tpu_sdk_core::import::onnx::load(path, &io)?
            }
            Format::Tflite if !opts.input_values.is_empty() => {
                return Err(Error::Unsupported(format!("binding inputs to values is supported for ONNX models, not for {}", path.display())));
            }
            Format::Tflite => {
                let io = tpu_sdk_core::import::tflite::ImportOptions { input_shapes: opts.input_shapes.clone() };
                tpu_sdk_core::import::tflite::load(path, &io)?
            }
        };
        if !opts.no_optimize {
            tpu_sdk_core::passes::optimize(&mut graph)?;
        }
        Ok(Model { graph, path: Some(path.to_path_buf()) })
    }

    /// The inputs `path` declares and which of their dimensions it leaves free, read without importing the
    /// model (`.onnx`, `.tflite`).
    pub fn declared_inputs(path: impl AsRef<Path>) -> Result<Vec<tpu_sdk_core::import::DeclaredInput>> {
        let path = path.as_ref();
        match Format::of(path)? {
            Format::Onnx => tpu_sdk_core::import::onnx::declared_inputs(path),
            Format::Tflite => tpu_sdk_core::import::tflite::declared_inputs(path),
        }
    }

    /// Wraps a graph built in code (see [`tpu_sdk_core::ir::builder`]).
    pub fn from_graph(graph: Graph) -> Result<Model> {
        tpu_sdk_core::ir::verify::verify(&graph)?;
        Ok(Model { graph, path: None })
    }

    /// A model whose program stays in its file and runs as it is on a target (a compiled Edge TPU model):
    /// `interface` holds only the inputs and outputs (see [`tpu_sdk_core::target::Target::interface_of`]).
    pub fn from_interface(interface: Graph, path: impl Into<PathBuf>) -> Model {
        Model { graph: interface, path: Some(path.into()) }
    }

    /// The graph.
    pub fn graph(&self) -> &Graph {
        &self.graph
    }

    /// The file the model came from, if any.
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// Prepares the model for a target by name (`cpu`, and `cloud-tpu`/`edgetpu` when built in).
    pub fn prepare(&self, target: &str) -> Result<Box<dyn Executable>> {
        targets::by_name(target)?.prepare(self.graph.clone())
    }
}
