//! Turning an image file into a model input: decode, resize, normalise, lay out as NCHW or NHWC.

use std::path::Path;

use anyhow::{Context, Result};
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

/// Loads `path` as the model input of type `dtype` and `shape` (rank 4, batch 1).
///
/// f32 inputs get `(pixel / 255 - mean) / std`; u8 inputs get raw pixels; i8 inputs get `pixel - 128`.
pub fn load(path: &Path, dtype: DType, shape: &[usize], a: &ImageArgs) -> Result<Tensor> {
    if shape.len() != 4 || shape[0] != 1 {
        return Err(tpu_sdk::Error::InputMismatch(format!(
            "--image needs a model input of shape [1, C, H, W] or [1, H, W, C]; this model's input is {shape:?}"
        ))
        .into());
    }
    let layout = a.layout.unwrap_or(if shape[1] == 3 || shape[1] == 1 { Layout::Nchw } else { Layout::Nhwc });
    let (c, h, w) = match layout {
        Layout::Nchw => (shape[1], shape[2], shape[3]),
        Layout::Nhwc => (shape[3], shape[1], shape[2]),
    };
    if c != 1 && c != 3 {
        return Err(tpu_sdk::Error::InputMismatch(format!("--image: the input has {c} channels; images give 1 or 3 (shape {shape:?}, layout {layout:?})")).into());
    }
    let img = image::open(path).with_context(|| format!("cannot decode image {}", path.display()))?;
    let img = img.resize_exact(w as u32, h as u32, image::imageops::FilterType::Triangle);
    let pixels: Vec<[u8; 3]> = if c == 3 {
        img.to_rgb8().pixels().map(|p| p.0).collect()
    } else {
        img.to_luma8().pixels().map(|p| [p.0[0]; 3]).collect()
    };
    let mean = per_channel(&a.mean, 0.0, "mean")?;
    let std = per_channel(&a.std, 1.0, "std")?;
    if std.iter().any(|&s| s == 0.0) {
        return Err(UsageError("--std must not be 0".into()).into());
    }
    let index = |y: usize, x: usize, ch: usize| match layout {
        Layout::Nchw => (ch * h + y) * w + x,
        Layout::Nhwc => (y * w + x) * c + ch,
    };
    let mut t = Tensor::zeros(dtype, shape.to_vec());
    macro_rules! fill {
        ($ty:ty, $f:expr) => {{
            let out = t.view_mut::<$ty>().expect("zeros made this dtype");
            for y in 0..h {
                for x in 0..w {
                    let p = pixels[y * w + x];
                    for ch in 0..c {
                        out[index(y, x, ch)] = $f(p[ch], ch);
                    }
                }
            }
        }};
    }
    match dtype {
        DType::F32 => fill!(f32, |v: u8, ch: usize| (v as f32 / 255.0 - mean[ch]) / std[ch]),
        DType::U8 => fill!(u8, |v: u8, _| v),
        DType::I8 => fill!(i8, |v: u8, _| (v as i16 - 128) as i8),
        other => {
            return Err(tpu_sdk::Error::InputMismatch(format!("--image: the model input is {other}; images become f32, u8 or i8")).into())
        }
    }
    Ok(t)
}
