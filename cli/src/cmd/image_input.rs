//! Turning an image file into a model input: decode, resize, normalise, lay out as NCHW or NHWC.

use std::path::Path;

use anyhow::Result;
use tpu_sdk::core::ir::Value;
use tpu_sdk::preprocess::{self, ImagePreprocess};
use tpu_sdk::{DType, Tensor};

use super::UsageError;

/// Channel layout of an image input.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Layout {
    /// [N, C, H, W] (ONNX convention).
    Nchw,
    /// [N, H, W, C] (TFLite convention).
    Nhwc,
}

/// Preprocessing flags shared by `run` and (later) calibration.
#[derive(clap::Args, Debug, Clone)]
pub struct ImageArgs {
    /// Per-channel mean subtracted after scaling pixels to [0, 1], e.g. `0.485,0.456,0.406` (one value: all).
    #[arg(long, value_name = "M[,M,M]")]
    pub mean: Option<String>,
    /// Per-channel standard deviation divided by after the mean, e.g. `0.229,0.224,0.225`.
    #[arg(long, value_name = "S[,S,S]")]
    pub std: Option<String>,
    /// Layout of the image input (default: from the input shape: channels of 1 or 3 at axis 1 → nchw, else nhwc).
    #[arg(long, value_enum)]
    pub layout: Option<Layout>,
}

fn per_channel(s: &Option<String>, default: f32, flag: &str) -> Result<[f32; 3]> {
    let Some(s) = s else { return Ok([default; 3]) };
    let v = super::parse_list::<f32>(s).map_err(|e| UsageError(format!("--{flag}: {e}")))?;
    match v.len() {
        1 => Ok([v[0]; 3]),
        3 => Ok([v[0], v[1], v[2]]),
        n => Err(UsageError(format!("--{flag}: expected 1 or 3 values, got {n}")).into()),
    }
}

/// The preprocessing these flags describe.
pub fn preprocess(a: &ImageArgs) -> Result<ImagePreprocess> {
    let std = per_channel(&a.std, 1.0, "std")?;
    if std.iter().any(|&s| s == 0.0) {
        return Err(UsageError("--std must not be 0".into()).into());
    }
    let layout = a.layout.map(|l| match l {
        Layout::Nchw => preprocess::Layout::Nchw,
        Layout::Nhwc => preprocess::Layout::Nhwc,
    });
    Ok(ImagePreprocess { mean: per_channel(&a.mean, 0.0, "mean")?, std, layout })
}

/// Loads `path` as a value of the model input `input` (its dtype, shape and quantization parameters).
pub fn load_value(path: &Path, input: &Value, a: &ImageArgs) -> Result<Tensor> {
    Ok(preprocess::image_file_to_tensor(path, input, &preprocess(a)?)?)
}

/// Loads `path` as an unquantized model input of type `dtype` and `shape` (rank 4, batch 1).
///
/// f32 inputs get `(pixel / 255 - mean) / std`; u8 inputs get raw pixels; i8 inputs get `pixel - 128`.
#[allow(dead_code)] // kept for callers that have no graph value at hand
pub fn load(path: &Path, dtype: DType, shape: &[usize], a: &ImageArgs) -> Result<Tensor> {
    let v = Value { name: "image".into(), dtype, shape: shape.to_vec(), constant: None, quant: None, dynamic: false };
    load_value(path, &v, a)
}
