//! Classify an image with any model and any target built into this binary.
//!
//! ```text
//! cargo run --release --example classify_image -- MODEL IMAGE [--labels FILE] [--top-k K] [--target T]
//!     [--mean M[,M,M]] [--std S[,S,S]] [--input-shape NAME=D0,D1,D2,D3]
//! cargo run --release --example classify_image -- examples/models/text_direction_cls.onnx \
//!     examples/images/text_upside_down.png --labels examples/models/text_direction_cls.labels.txt \
//!     --mean 0.5 --std 0.5 --input-shape x=1,3,48,192
//! ```
//!
//! The image is decoded and resized with the `image` crate, normalised as `(pixel / 255 - mean) / std` and laid
//! out as the model's input wants (NCHW for ONNX models, NHWC for TFLite ones; int8 inputs are quantized with
//! the input's parameters). Prints the top-k classes with their scores and the inference latency.

use std::path::PathBuf;
use std::time::Instant;

use tpu_sdk::preprocess::{image_file_to_tensor, ImagePreprocess};

#[path = "common.rs"]
mod common;
use common::{three, top_k};

struct Args {
    model: PathBuf,
    image: PathBuf,
    labels: Option<PathBuf>,
    top_k: usize,
    target: String,
    pre: ImagePreprocess,
    input_shape: Option<(String, Vec<usize>)>,
}

fn parse() -> Result<Args, String> {
    let mut it = std::env::args().skip(1);
    let mut pos = Vec::new();
    let mut a = Args {
        model: PathBuf::new(),
        image: PathBuf::new(),
        labels: None,
        top_k: 5,
        target: "cpu".into(),
        pre: ImagePreprocess::default(),
        input_shape: None,
    };
    while let Some(x) = it.next() {
        let mut val = |flag: &str| it.next().ok_or_else(|| format!("{flag} needs a value"));
        match x.as_str() {
            "--labels" => a.labels = Some(val("--labels")?.into()),
            "--top-k" => a.top_k = val("--top-k")?.parse().map_err(|_| "--top-k: not a number".to_string())?,
            "--target" => a.target = val("--target")?,
            "--mean" => a.pre.mean = three(&val("--mean")?)?,
            "--std" => a.pre.std = three(&val("--std")?)?,
            "--input-shape" => {
                let s = val("--input-shape")?;
                let (name, dims) = s.split_once('=').ok_or("--input-shape: expected NAME=D0,D1,...")?;
                let dims = dims.split(',').map(|d| d.trim().parse().map_err(|_| format!("--input-shape: '{d}'"))).collect::<Result<_, _>>()?;
                a.input_shape = Some((name.to_string(), dims));
            }
            "-h" | "--help" => return Err(String::new()),
            f if f.starts_with("--") => return Err(format!("unknown flag {f}")),
            _ => pos.push(PathBuf::from(x)),
        }
    }
    match <[PathBuf; 2]>::try_from(pos) {
        Ok([m, i]) => {
            a.model = m;
            a.image = i;
            Ok(a)
        }
        Err(_) => Err("expected MODEL and IMAGE".into()),
    }
}

fn main() {
    common::main(parse, "classify_image MODEL IMAGE [--labels FILE] [--top-k K] [--target T] [--mean M] [--std S] [--input-shape NAME=D0,D1,D2,D3]", run)
}

fn run(a: Args) -> Result<(), Box<dyn std::error::Error>> {
    let model = common::load_image_model(&a.model, a.input_shape.as_ref(), "example")?;
    let g = model.graph();
    let input = image_file_to_tensor(&a.image, g.value(g.inputs[0]), &a.pre)?;
    let mut exe = model.prepare(&a.target)?;
    let t0 = Instant::now();
    let out = exe.run(&[input])?;
    let ms = t0.elapsed().as_secs_f64() * 1e3;

    let scores = out.first().ok_or("the model has no outputs")?.to_f64_vec();
    let labels = common::labels(a.labels.as_deref())?;
    println!("{} on {} in {ms:.2} ms", a.image.display(), a.target);
    for (rank, (i, score)) in top_k(&scores, a.top_k).into_iter().enumerate() {
        let name = labels.get(i).cloned().unwrap_or_else(|| format!("class {i}"));
        println!("{:>2}. {name:<24} {score:.4}", rank + 1);
    }
    Ok(())
}
