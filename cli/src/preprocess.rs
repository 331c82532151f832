//! Turning an image into a model input: decode, resize, normalise, lay out as NCHW or NHWC, and quantize
//! for int8/uint8 inputs. Shared by `tpu-sdk run --image`, calibration from image folders and the examples.

use std::path::Path;

use tpu_sdk_core::ir::{DType, QuantParams, Tensor, Value};
use tpu_sdk_core::{Error, Result};

/// Channel layout of an image input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    /// [N, C, H, W] (ONNX convention).
    Nchw,
    /// [N, H, W, C] (TFLite convention).
    Nhwc,
}

/// How pixels become input values: `(pixel / 255 - mean[c]) / std[c]`, then quantized with the input's
/// parameters when the input is int8/uint8.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ImagePreprocess {
    /// Per-channel mean (RGB), subtracted after scaling pixels to [0, 1].
    pub mean: [f32; 3],
    /// Per-channel standard deviation (RGB), divided by after the mean.
    pub std: [f32; 3],
    /// Layout of the input; `None` guesses from the shape (1 or 3 channels at axis 1 → NCHW, else NHWC).
    pub layout: Option<Layout>,
}

impl Default for ImagePreprocess {
    fn default() -> Self {
        ImagePreprocess { mean: [0.0; 3], std: [1.0; 3], layout: None }
    }
}

/// Loads the image file at `path` as a value of `input`'s type and shape (rank 4, batch 1).
pub fn image_file_to_tensor(path: &Path, input: &Value, p: &ImagePreprocess) -> Result<Tensor> {
    let img = image::open(path).map_err(|e| Error::InputMismatch(format!("cannot decode image {}: {e}", path.display())))?;
    image_to_tensor(&img, input, p)
}

/// Converts a decoded image into a value of `input`'s type and shape (rank 4, batch 1).
///
/// f32 inputs get `(pixel / 255 - mean) / std`. Quantized inputs (int8/uint8 with quantization parameters, as
/// in int8 TFLite models) get that value quantized: `round(v / scale) + zero_point`, saturated. Unquantized
/// u8 inputs get raw pixels and i8 inputs `pixel - 128`.
pub fn image_to_tensor(img: &image::DynamicImage, input: &Value, p: &ImagePreprocess) -> Result<Tensor> {
    let shape = &input.shape;
    if shape.len() != 4 || shape[0] != 1 {
        return Err(Error::InputMismatch(format!(
            "an image input needs shape [1, C, H, W] or [1, H, W, C]; input '{}' is {shape:?}",
            input.name
        )));
    }
    let layout = p.layout.unwrap_or(if shape[1] == 3 || shape[1] == 1 { Layout::Nchw } else { Layout::Nhwc });
    let (c, h, w) = match layout {
        Layout::Nchw => (shape[1], shape[2], shape[3]),
        Layout::Nhwc => (shape[3], shape[1], shape[2]),
    };
    if c != 1 && c != 3 {
        return Err(Error::InputMismatch(format!(
            "input '{}' has {c} channels; images give 1 or 3 (shape {shape:?}, layout {layout:?})",
            input.name
        )));
    }
    if p.std.iter().any(|&s| s == 0.0) {
        return Err(Error::InputMismatch("the normalisation std must not be 0".into()));
    }
    let img = img.resize_exact(w as u32, h as u32, image::imageops::FilterType::Triangle);
    let pixels: Vec<[u8; 3]> = if c == 3 {
        img.to_rgb8().pixels().map(|px| px.0).collect()
    } else {
        img.to_luma8().pixels().map(|px| [px.0[0]; 3]).collect()
    };
    let index = |y: usize, x: usize, ch: usize| match layout {
        Layout::Nchw => (ch * h + y) * w + x,
        Layout::Nhwc => (y * w + x) * c + ch,
    };
    let norm = |v: u8, ch: usize| (v as f32 / 255.0 - p.mean[ch]) / p.std[ch];
    let quant = input.quant.as_ref().map(per_tensor).transpose()?;
    let mut t = Tensor::zeros(input.dtype, shape.to_vec());
    macro_rules! fill {
        ($ty:ty, $f:expr) => {{
            let out = t.view_mut::<$ty>().ok_or_else(|| Error::InputMismatch("input buffer type".into()))?;
            for y in 0..h {
                for x in 0..w {
                    let px = pixels[y * w + x];
                    for ch in 0..c {
                        out[index(y, x, ch)] = $f(px[ch], ch);
                    }
                }
            }
        }};
    }
    match (input.dtype, quant) {
        (DType::F32, _) => fill!(f32, norm),
        (DType::I8, Some((s, z))) => fill!(i8, |v, ch| quantize(norm(v, ch), s, z, -128.0, 127.0) as i8),
        (DType::U8, Some((s, z))) => fill!(u8, |v, ch| quantize(norm(v, ch), s, z, 0.0, 255.0) as u8),
        (DType::U8, None) => fill!(u8, |v: u8, _| v),
        (DType::I8, None) => fill!(i8, |v: u8, _| (v as i16 - 128) as i8),
        (other, _) => {
            return Err(Error::InputMismatch(format!("input '{}' is {other}; images become f32, u8 or i8", input.name)))
        }
    }
    Ok(t)
}

fn per_tensor(q: &QuantParams) -> Result<(f32, f32)> {
    match (q.scale.as_slice(), q.zero_point.as_slice()) {
        ([s], [z]) if *s > 0.0 => Ok((*s, *z as f32)),
        _ => Err(Error::Unsupported("image inputs with per-channel quantization".into())),
    }
}

/// TFLite's input quantization: round half away from zero, then saturate.
fn quantize(v: f32, scale: f32, zero_point: f32, lo: f32, hi: f32) -> f32 {
    ((v / scale).round() + zero_point).clamp(lo, hi)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn value(dtype: DType, shape: Vec<usize>, quant: Option<QuantParams>) -> Value {
        Value { name: "x".into(), dtype, shape, constant: None, quant, dynamic: false }
    }

    fn checker() -> image::DynamicImage {
        // 2x1 image: a black pixel then a white one.
        let mut img = image::RgbImage::new(2, 1);
        img.put_pixel(1, 0, image::Rgb([255, 255, 255]));
        image::DynamicImage::ImageRgb8(img)
    }

    #[test]
    fn f32_nchw_is_normalised_per_channel() {
        let p = ImagePreprocess { mean: [0.5; 3], std: [0.5; 3], layout: None };
        let t = image_to_tensor(&checker(), &value(DType::F32, vec![1, 3, 1, 2], None), &p).unwrap();
        assert_eq!(t.view::<f32>().unwrap(), &[-1.0, 1.0, -1.0, 1.0, -1.0, 1.0]);
    }

    #[test]
    fn int8_inputs_are_quantized_with_the_inputs_parameters() {
        // real = 1/128 * (q + 1): black (0.0) → -1, white (1.0) → 127.
        let q = QuantParams { scale: vec![1.0 / 128.0], zero_point: vec![-1], axis: None };
        let p = ImagePreprocess { layout: Some(Layout::Nhwc), ..ImagePreprocess::default() };
        let t = image_to_tensor(&checker(), &value(DType::I8, vec![1, 1, 2, 3], Some(q)), &p).unwrap();
        assert_eq!(t.view::<i8>().unwrap(), &[-1, -1, -1, 127, 127, 127]);
    }

    #[test]
    fn wrong_rank_is_an_input_mismatch() {
        let e = image_to_tensor(&checker(), &value(DType::F32, vec![3, 1, 2], None), &ImagePreprocess::default()).unwrap_err();
        assert!(matches!(e, Error::InputMismatch(_)), "{e}");
    }
}
