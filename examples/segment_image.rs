//! Semantic segmentation of an image with any segmentation model (a UNet, DeepLab, ...) on any target: the
//! class of every pixel (argmax over the model's class axis), written as a colour PNG, and each class's share.
//!
//! ```text
//! cargo run --release --example segment_image -- MODEL IMAGE -o MASK.png [--target T] [--mean M] [--std S]
//! cargo run --release --example segment_image -- .cache/zoo/models/keras_unet/model.tflite \
//!     examples/images/text_upright.png -o /tmp/mask.png --mean 0.5 --std 0.5
//! ```
//!
//! The output is read as `[1, H, W, classes]` for TFLite models (NHWC) and `[1, classes, H, W]` for ONNX ones;
//! the mask has the model's output size. `zoo/build_keras.py` builds the UNet used in CI (seeded random weights,
//! so its classes mean nothing; the pipeline is the point), and `tpu-sdk compile MODEL --target edgetpu
//! --calibration ...` makes the int8 file for a Coral.

use std::path::PathBuf;
use std::time::Instant;

use tpu_sdk::preprocess::{image_file_to_tensor, ImagePreprocess};

#[path = "common.rs"]
mod common;
use common::three;

struct Args {
    model: PathBuf,
    image: PathBuf,
    output: PathBuf,
    target: String,
    pre: ImagePreprocess,
}

fn parse() -> Result<Args, String> {
    let mut it = std::env::args().skip(1);
    let mut pos = Vec::new();
    let (mut output, mut target, mut pre) = (None, "cpu".to_string(), ImagePreprocess::default());
    while let Some(x) = it.next() {
        let mut val = |flag: &str| it.next().ok_or_else(|| format!("{flag} needs a value"));
        match x.as_str() {
            "-o" | "--output" => output = Some(PathBuf::from(val("-o")?)),
            "--target" => target = val("--target")?,
            "--mean" => pre.mean = three(&val("--mean")?)?,
            "--std" => pre.std = three(&val("--std")?)?,
            "-h" | "--help" => return Err(String::new()),
            f if f.starts_with('-') => return Err(format!("unknown flag {f}")),
            _ => pos.push(PathBuf::from(x)),
        }
    }
    let [model, image] = <[PathBuf; 2]>::try_from(pos).map_err(|_| "expected MODEL and IMAGE")?;
    Ok(Args { model, image, output: output.ok_or("-o MASK.png is required")?, target, pre })
}

fn main() {
    common::main(parse, "segment_image MODEL IMAGE -o MASK.png [--target T] [--mean M] [--std S]", run)
}

/// A colour per class (a fixed palette, repeated).
fn colour(class: usize) -> [u8; 3] {
    const P: [[u8; 3]; 8] = [[0, 0, 0], [230, 25, 75], [60, 180, 75], [255, 225, 25], [0, 130, 200], [245, 130, 48], [145, 30, 180], [70, 240, 240]];
    P[class % P.len()]
}

fn run(a: Args) -> Result<(), Box<dyn std::error::Error>> {
    let model = common::load_image_model(&a.model, None, "example")?;
    let g = model.graph();
    let input = image_file_to_tensor(&a.image, g.value(g.inputs[0]), &a.pre)?;
    let mut exe = model.prepare(&a.target)?;
    let t0 = Instant::now();
    let out = exe.run(&[input])?;
    let ms = t0.elapsed().as_secs_f64() * 1e3;
    let y = out.first().ok_or("the model has no outputs")?;
    let channels_last = a.model.extension().is_some_and(|e| e.eq_ignore_ascii_case("tflite"));
    let (h, w, classes) = match (y.shape.as_slice(), channels_last) {
        ([1, h, w, c], true) => (*h, *w, *c),
        ([1, c, h, w], false) => (*h, *w, *c),
        (s, _) => return Err(format!("output 0 is {s:?}; a segmentation map is [1, H, W, classes] (TFLite) or [1, classes, H, W] (ONNX)").into()),
    };
    let v = y.to_f64_vec();
    let at = |i: usize, j: usize, c: usize| if channels_last { v[(i * w + j) * classes + c] } else { v[(c * h + i) * w + j] };
    let mut counts = vec![0usize; classes.max(1)];
    let mut img = image::RgbImage::new(w as u32, h as u32);
    for i in 0..h {
        for j in 0..w {
            // one class: a probability map, thresholded at 0.5; several: the most likely
            let class = if classes == 1 { usize::from(at(i, j, 0) > 0.5) } else { (0..classes).max_by(|&p, &q| at(i, j, p).total_cmp(&at(i, j, q))).unwrap_or(0) };
            let last = counts.len() - 1;
            counts[class.min(last)] += 1;
            img.put_pixel(j as u32, i as u32, image::Rgb(colour(class)));
        }
    }
    img.save(&a.output).map_err(|e| format!("{}: {e}", a.output.display()))?;
    println!("{} on {} in {ms:.2} ms: {w}×{h} mask with {classes} classes written to {}", a.image.display(), a.target, a.output.display());
    for (c, n) in counts.iter().enumerate().filter(|(_, &n)| n > 0) {
        println!("  class {c:>2}: {:5.1}% of pixels", 100.0 * *n as f64 / (h * w) as f64);
    }
    Ok(())
}
