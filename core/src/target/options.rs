//! The compile options of each target, typed: [`TargetOptions`] holds one variant per target, and every value
//! that has a syntax (`--emit`, `--topology`, `--shard`, `--calibration-method`, `--io-dtype`) is a type with
//! a [`FromStr`] whose error says what is accepted.
//!
//! Why here, in core, and not in each target's crate: [`Target::compile`](super::Target::compile) takes
//! [`CompileOptions`](super::CompileOptions), and core never depends on a target crate, so the options a caller
//! hands to a target must be types core knows. They are plain data — no behaviour of any target lives here —
//! which is what lets the command line parse every flag once (clap calls these `FromStr`s) and each target take
//! its own variant without re-reading strings. A closed enum, like `Op`, makes adding a target a compile error
//! in every `match` until each caller has decided. The shard-spec syntax is checked here; resolving a spec
//! against a graph (which weights, which axes) stays with the cloud-tpu target (`tpu_sdk_cloud_tpu::shard`).

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

use crate::ir::{DType, Tensor};
use crate::quant::RangeMethod;
use crate::{Error, Result};

/// Why an option value does not parse (the message says what is accepted).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OptionError(pub String);

impl fmt::Display for OptionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for OptionError {}

/// The options of the one target a compilation is for.
#[derive(Clone, Debug, Default)]
pub enum TargetOptions {
    /// The CPU runtime: nothing to set (it has no compile step).
    #[default]
    Cpu,
    /// `--target cloud-tpu`.
    CloudTpu(CloudTpuOptions),
    /// `--target edgetpu`.
    EdgeTpu(EdgeTpuOptions),
    /// `--target tflite`: a float TFLite model (nothing to set).
    Tflite,
}

impl TargetOptions {
    /// The name of the target these options are for (`cpu`, `cloud-tpu`, `edgetpu`, `tflite`).
    pub fn target_name(&self) -> &'static str {
        match self {
            TargetOptions::Cpu => "cpu",
            TargetOptions::CloudTpu(_) => "cloud-tpu",
            TargetOptions::EdgeTpu(_) => "edgetpu",
            TargetOptions::Tflite => "tflite",
        }
    }

    /// The cloud-tpu options, for the target called `target`; another target's options are the caller's mistake.
    pub fn cloud_tpu(&self, target: &str) -> Result<&CloudTpuOptions> {
        match self {
            TargetOptions::CloudTpu(o) => Ok(o),
            other => Err(other.given_to(target)),
        }
    }

    /// The edgetpu options, for the target called `target`; another target's options are the caller's mistake.
    pub fn edge_tpu(&self, target: &str) -> Result<&EdgeTpuOptions> {
        match self {
            TargetOptions::EdgeTpu(o) => Ok(o),
            other => Err(other.given_to(target)),
        }
    }

    /// The error for these options reaching the target called `target`.
    fn given_to(&self, target: &str) -> Error {
        Error::Unsupported(format!("the {target} target was given the compile options of --target {}", self.target_name()))
    }
}

impl From<CloudTpuOptions> for TargetOptions {
    fn from(o: CloudTpuOptions) -> TargetOptions {
        TargetOptions::CloudTpu(o)
    }
}

impl From<EdgeTpuOptions> for TargetOptions {
    fn from(o: EdgeTpuOptions) -> TargetOptions {
        TargetOptions::EdgeTpu(o)
    }
}

/// `compile --target cloud-tpu`: what to write and for which devices.
#[derive(Clone, Debug, Default)]
pub struct CloudTpuOptions {
    /// Compile ahead of time for this TPU topology (`--topology v5e:2x2`) instead of for the local plugin.
    pub topology: Option<Topology>,
    /// Compute dtype (`--dtype`; `bf16` casts weights and activations); `None` computes in f32.
    pub dtype: Option<DType>,
    /// What to write (`--emit`); `None` picks from the output's extension ([`Emit::for_output`]).
    pub emit: Option<Emit>,
    /// Data-parallel replicas compiled into the program (`--replicas`); `None` is one.
    pub replicas: Option<usize>,
    /// Tensor-parallel annotations (`--shard`, repeatable).
    pub shard: Vec<ShardSpec>,
    /// The PJRT plugin to compile with (`--plugin`).
    pub plugin: Option<PathBuf>,
}

impl CloudTpuOptions {
    /// The partition count asked for with `--shard parts=N` (the last one wins).
    pub fn parts(&self) -> Option<usize> {
        self.shard.iter().rev().find_map(|s| match s {
            ShardSpec::Parts(n) => Some(*n),
            _ => None,
        })
    }
}

/// An enum whose values are written as names on the command line: `name()`, `Display` and a `FromStr` whose
/// error (`$why`, given the unknown name) says what is accepted.
macro_rules! named_values {
    ($(#[$doc:meta])* $t:ident { $($(#[$vdoc:meta])* $v:ident = $name:literal),* $(,)? } else $why:expr) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub enum $t {
            $($(#[$vdoc])* $v),*
        }

        impl $t {
            /// Every value, as the command line writes it.
            pub const NAMES: &'static [&'static str] = &[$($name),*];

            /// The value as the command line writes it.
            pub fn name(self) -> &'static str {
                match self {
                    $($t::$v => $name),*
                }
            }
        }

        impl FromStr for $t {
            type Err = OptionError;
            fn from_str(s: &str) -> std::result::Result<$t, OptionError> {
                match s.trim() {
                    $($name => Ok($t::$v),)*
                    other => Err(OptionError(($why)(other))),
                }
            }
        }

        impl fmt::Display for $t {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.name())
            }
        }
    };
}

named_values! {
    /// What `compile --target cloud-tpu` writes.
    Emit {
        /// StableHLO text.
        Mlir = "mlir",
        /// A serialized PJRT executable.
        Executable = "executable",
    } else |other| format!("--emit '{other}': cloud-tpu writes 'mlir' (StableHLO text) or 'executable'")
}

impl Emit {
    /// What an output file asks for when `--emit` is not given: `mlir` for a `.mlir` file, else `executable`.
    pub fn for_output(output: &std::path::Path) -> Emit {
        if output.extension().is_some_and(|e| e.eq_ignore_ascii_case("mlir")) {
            Emit::Mlir
        } else {
            Emit::Executable
        }
    }
}

/// A TPU topology as libtpu names it: a chip generation and the chips along each axis (`v5e:2x2`, `v4:2x2x1`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Topology {
    /// The chip generation (`v5e`, `v6e`, `v4`).
    pub chip: String,
    /// Chips along each axis (`[2, 2]`).
    pub shape: Vec<usize>,
}

impl FromStr for Topology {
    type Err = OptionError;
    fn from_str(s: &str) -> std::result::Result<Topology, OptionError> {
        let bad = || OptionError(format!("topology '{s}': expected CHIP:AxB or CHIP:AxBxC, e.g. v5e:2x2, v6e:1x1, v4:2x2x1"));
        let (chip, dims) = s.trim().split_once(':').ok_or_else(bad)?;
        let shape = dims.split('x').map(|d| d.trim().parse::<usize>().ok().filter(|&d| d > 0)).collect::<Option<Vec<_>>>().ok_or_else(bad)?;
        if chip.trim().is_empty() || chip.contains(char::is_whitespace) {
            return Err(bad());
        }
        Ok(Topology { chip: chip.trim().to_string(), shape })
    }
}

impl fmt::Display for Topology {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let dims: Vec<String> = self.shape.iter().map(|d| d.to_string()).collect();
        write!(f, "{}:{}", self.chip, dims.join("x"))
    }
}

/// XLA's SPMD partitioner, named by `--shard partitioner=...` (the cloud-tpu target picks the annotation
/// dialect from it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Partitioner {
    /// GSPMD (`gspmd`).
    Gspmd,
    /// Shardy (`shardy`, also `sdy`), the default.
    Shardy,
}

/// One `--shard` value (see `tpu_sdk_cloud_tpu::shard` for what each does).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ShardSpec {
    /// `WEIGHT=AXIS`: split the named weight along `axis` (negative counts from the end).
    Weight {
        /// The constant's name.
        name: String,
        /// The axis, as given.
        axis: i64,
    },
    /// `auto`: every MatMul/Gemm weight, alternating column and row splits.
    Auto,
    /// `parts=N`: the number of partitions (at least 1).
    Parts(usize),
    /// `partitioner=gspmd|shardy`.
    Partitioner(Partitioner),
}

impl FromStr for ShardSpec {
    type Err = OptionError;
    fn from_str(s: &str) -> std::result::Result<ShardSpec, OptionError> {
        let bad = |why: String| OptionError(format!("{why} (syntax: WEIGHT=AXIS, auto, parts=N, partitioner=gspmd|shardy)"));
        let s = s.trim();
        if s == "auto" {
            return Ok(ShardSpec::Auto);
        }
        if let Some(n) = s.strip_prefix("parts=") {
            let n = n.trim().parse().ok().filter(|&n| n >= 1).ok_or_else(|| bad("parts=N needs a count of at least 1".into()))?;
            return Ok(ShardSpec::Parts(n));
        }
        if let Some(p) = s.strip_prefix("partitioner=") {
            return match p.trim() {
                "gspmd" => Ok(ShardSpec::Partitioner(Partitioner::Gspmd)),
                "shardy" | "sdy" => Ok(ShardSpec::Partitioner(Partitioner::Shardy)),
                other => Err(bad(format!("unknown partitioner '{other}' (gspmd or shardy)"))),
            };
        }
        let (name, axis) = s.split_once('=').ok_or_else(|| bad("expected WEIGHT=AXIS".into()))?;
        let axis = axis.trim().parse().map_err(|_| bad(format!("'{axis}' is not an axis")))?;
        if name.trim().is_empty() {
            return Err(bad("the weight name is empty".into()));
        }
        Ok(ShardSpec::Weight { name: name.trim().to_string(), axis })
    }
}

impl fmt::Display for ShardSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ShardSpec::Weight { name, axis } => write!(f, "{name}={axis}"),
            ShardSpec::Auto => f.write_str("auto"),
            ShardSpec::Parts(n) => write!(f, "parts={n}"),
            ShardSpec::Partitioner(Partitioner::Gspmd) => f.write_str("partitioner=gspmd"),
            ShardSpec::Partitioner(Partitioner::Shardy) => f.write_str("partitioner=shardy"),
        }
    }
}

/// `compile --target edgetpu`: the data and choices of quantizing to int8.
#[derive(Clone, Debug)]
pub struct EdgeTpuOptions {
    /// Calibration samples, each one full set of graph inputs (graph input order).
    pub calibration: Vec<Vec<Tensor>>,
    /// How activation ranges are chosen from calibration (`--calibration-method`; default `minmax`).
    pub method: RangeMethod,
    /// Samples to measure the quantized model's error on (default: the calibration samples).
    pub eval: Vec<Vec<Tensor>>,
    /// The dtype of the model's inputs and outputs (`--io-dtype`).
    pub io_dtype: IoDType,
    /// The `edgetpu_compiler` to run (default: search PATH).
    pub edgetpu_compiler: Option<PathBuf>,
}

impl Default for EdgeTpuOptions {
    fn default() -> EdgeTpuOptions {
        EdgeTpuOptions { calibration: Vec::new(), method: RangeMethod::MinMax, eval: Vec::new(), io_dtype: IoDType::Int8, edgetpu_compiler: None }
    }
}

named_values! {
    /// The dtype of a quantized model's inputs and outputs (`--io-dtype`).
    IoDType {
        /// int8, what the Edge TPU needs.
        Int8 = "int8",
        /// float, with QUANTIZE/DEQUANTIZE at the edges.
        Float = "float",
    } else |other| format!("io dtype '{other}': use `int8` or `float`")
}

/// `minmax`, `percentile:P` or `mse` (the parser is [`RangeMethod::parse`]).
impl FromStr for RangeMethod {
    type Err = OptionError;
    fn from_str(s: &str) -> std::result::Result<RangeMethod, OptionError> {
        RangeMethod::parse(s).map_err(|e| match e {
            Error::Unsupported(m) => OptionError(m),
            other => OptionError(other.to_string()),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_parse_and_print_back() {
        for s in ["w1=-1", "auto", "parts=4", "partitioner=gspmd", "partitioner=shardy"] {
            assert_eq!(s.parse::<ShardSpec>().unwrap().to_string(), s);
        }
        assert_eq!("partitioner=sdy".parse::<ShardSpec>().unwrap(), ShardSpec::Partitioner(Partitioner::Shardy));
        assert_eq!(" w = 2 ".parse::<ShardSpec>().unwrap(), ShardSpec::Weight { name: "w".into(), axis: 2 });
        let t: Topology = "v4:2x2x1".parse().unwrap();
        assert_eq!((t.chip.as_str(), t.shape.clone(), t.to_string()), ("v4", vec![2, 2, 1], "v4:2x2x1".to_string()));
        assert_eq!("float".parse::<IoDType>().unwrap(), IoDType::Float);
        assert_eq!("mlir".parse::<Emit>().unwrap(), Emit::Mlir);
        assert_eq!(Emit::for_output(std::path::Path::new("m.MLIR")), Emit::Mlir);
        assert_eq!("percentile:99.9".parse::<RangeMethod>().unwrap(), RangeMethod::Percentile(99.9));
    }

    #[test]
    fn malformed_values_say_what_is_accepted() {
        for (spec, want) in [("w1", "WEIGHT=AXIS"), ("parts=0", "at least 1"), ("w=x", "'x' is not an axis"), ("partitioner=mpmd", "unknown partitioner 'mpmd'")] {
            let e = spec.parse::<ShardSpec>().unwrap_err().to_string();
            assert!(e.contains(want) && e.contains("syntax:"), "{spec}: {e}");
        }
        assert!("tflite".parse::<Emit>().unwrap_err().to_string().contains("'mlir'"));
        for t in ["v5e", "v5e:2xq", "v5e:0x2", ":2x2"] {
            assert!(t.parse::<Topology>().unwrap_err().to_string().contains("v5e:2x2"), "{t}");
        }
        assert!("kl".parse::<RangeMethod>().unwrap_err().to_string().contains("percentile"));
    }

    #[test]
    fn a_target_given_another_targets_options_says_so() {
        let o = TargetOptions::from(EdgeTpuOptions::default());
        assert_eq!(o.target_name(), "edgetpu");
        assert!(o.edge_tpu("edgetpu").is_ok());
        let e = o.cloud_tpu("cloud-tpu").unwrap_err().to_string();
        assert!(e.contains("cloud-tpu target") && e.contains("--target edgetpu"), "{e}");
        assert!(TargetOptions::Cpu.edge_tpu("edgetpu").is_err());
    }
}
