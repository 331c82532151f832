//! Raspberry Pi demo: classify every image in a folder, or frames from the Pi camera, printing per-frame
//! latency and the top class, then a latency summary.
//!
//! ```text
//! pi_classify MODEL (--images DIR | --camera N) [--labels FILE] [--target cpu|edgetpu] [--device usb:0]
//!     [--mean M[,M,M]] [--std S[,S,S]] [--input-shape NAME=D0,D1,D2,D3] [--json]
//! ```
//!
//! `--camera N` captures N frames with `rpicam-still` (Raspberry Pi OS Bookworm) or `libcamera-still`
//! (Bullseye) when one of them is installed, and says so plainly when neither is. On the Pi, after
//! `tpu-sdk deploy` (see README.md next to this file), run it with `--target edgetpu` on the `_edgetpu.tflite`
//! model; everywhere else `--target cpu` (the default) runs the same model on the reference CPU runtime.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use tpu_sdk::preprocess::{image_file_to_tensor, ImagePreprocess};

#[path = "../common.rs"]
mod common;
use common::{three, top_k};

enum Source {
    Folder(PathBuf),
    Camera(usize),
}

struct Args {
    model: PathBuf,
    source: Source,
    labels: Option<PathBuf>,
    target: String,
    pre: ImagePreprocess,
    input_shape: Option<(String, Vec<usize>)>,
    json: bool,
}

fn parse() -> Result<Args, String> {
    let mut it = std::env::args().skip(1);
    let (mut model, mut source) = (None, None);
    let (mut labels, mut target, mut pre, mut input_shape, mut json) = (None, "cpu".to_string(), ImagePreprocess::default(), None, false);
    while let Some(x) = it.next() {
        let mut val = |flag: &str| it.next().ok_or_else(|| format!("{flag} needs a value"));
        match x.as_str() {
            "--images" => source = Some(Source::Folder(val("--images")?.into())),
            "--camera" => source = Some(Source::Camera(val("--camera")?.parse().map_err(|_| "--camera: not a number")?)),
            "--labels" => labels = Some(val("--labels")?.into()),
            "--target" => target = val("--target")?,
            "--mean" => pre.mean = three(&val("--mean")?)?,
            "--std" => pre.std = three(&val("--std")?)?,
            "--input-shape" => {
                let s = val("--input-shape")?;
                let (name, dims) = s.split_once('=').ok_or("--input-shape: expected NAME=D0,D1,...")?;
                let dims = dims.split(',').map(|d| d.trim().parse().map_err(|_| format!("--input-shape: '{d}'"))).collect::<Result<_, _>>()?;
                input_shape = Some((name.to_string(), dims));
            }
            "--json" => json = true,
            "-h" | "--help" => return Err(String::new()),
            f if f.starts_with("--") => return Err(format!("unknown flag {f}")),
            _ if model.is_none() => model = Some(PathBuf::from(x)),
            _ => return Err(format!("unexpected argument {x}")),
        }
    }
    Ok(Args {
        model: model.ok_or("expected MODEL")?,
        source: source.ok_or("expected --images DIR or --camera N")?,
        labels,
        target,
        pre,
        input_shape,
        json,
    })
}

/// The image files of a folder, sorted by name.
fn images_in(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.extension().and_then(|e| e.to_str()).is_some_and(|e| ["png", "jpg", "jpeg", "bmp"].contains(&e.to_ascii_lowercase().as_str()))
        })
        .collect();
    v.sort();
    Ok(v)
}

/// Captures one still with the Pi camera into `out`.
fn capture(tool: &str, out: &Path) -> Result<(), String> {
    let st = Command::new(tool)
        .args(["-n", "-t", "1", "--width", "640", "--height", "480", "-o"])
        .arg(out)
        .status()
        .map_err(|e| format!("cannot start {tool}: {e}"))?;
    if st.success() {
        Ok(())
    } else {
        Err(format!("{tool} failed ({st}); is the camera connected and enabled?"))
    }
}

fn camera_tool() -> Option<&'static str> {
    ["rpicam-still", "libcamera-still"].into_iter().find(|t| {
        std::env::var_os("PATH").is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(t).is_file()))
    })
}

fn main() {
    common::main(parse, "pi_classify MODEL (--images DIR | --camera N) [--labels FILE] [--target T] [--mean M] [--std S] [--input-shape NAME=D0,...] [--json]", run)
}

fn run(a: Args) -> Result<(), Box<dyn std::error::Error>> {
    let model = common::load_image_model(&a.model, a.input_shape.as_ref(), "demo")?;
    let g = model.graph();
    let input = g.value(g.inputs[0]).clone();
    let labels = common::labels(a.labels.as_deref())?;
    let mut exe = model.prepare(&a.target)?;

    let frames: Box<dyn Iterator<Item = Result<PathBuf, String>>> = match &a.source {
        Source::Folder(dir) => {
            let files = images_in(dir).map_err(|e| format!("cannot list {}: {e}", dir.display()))?;
            if files.is_empty() {
                return Err(format!("no .png/.jpg/.bmp images in {}", dir.display()).into());
            }
            Box::new(files.into_iter().map(Ok))
        }
        Source::Camera(n) => {
            let tool = camera_tool().ok_or("no camera tool: install rpicam-apps (Raspberry Pi OS Bookworm) or libcamera-apps, or use --images DIR")?;
            let dir = std::env::temp_dir().join(format!("pi_classify.{}", std::process::id()));
            std::fs::create_dir_all(&dir)?;
            Box::new((0..*n).map(move |i| {
                let p = dir.join(format!("frame_{i:04}.jpg"));
                capture(tool, &p).map(|_| p)
            }))
        }
    };
    let mut latencies = Vec::new();
    for frame in frames {
        let path = frame?;
        let x = image_file_to_tensor(&path, &input, &a.pre)?;
        let t0 = Instant::now();
        let out = exe.run(&[x])?;
        let ms = t0.elapsed().as_secs_f64() * 1e3;
        latencies.push(ms);
        let scores = out.first().ok_or("the model has no outputs")?.to_f64_vec();
        let (best, score) = top_k(&scores, 1).first().copied().ok_or("the model's first output is empty")?;
        let name = labels.get(best).cloned().unwrap_or_else(|| format!("class {best}"));
        let file = path.file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default();
        if a.json {
            println!("{{\"frame\": {:?}, \"class\": {best}, \"label\": {name:?}, \"score\": {score:.6}, \"latency_ms\": {ms:.3}}}", file);
        } else {
            println!("{file:<28} {name:<16} {score:.4}  {ms:8.2} ms");
        }
    }
    let mut sorted = latencies.clone();
    sorted.sort_by(f64::total_cmp);
    let mean = sorted.iter().sum::<f64>() / sorted.len().max(1) as f64;
    let median = sorted.get(sorted.len() / 2).copied().unwrap_or(0.0);
    if !a.json {
        println!("{} frames on {}: median {median:.2} ms, mean {mean:.2} ms, {:.1} frames/s", sorted.len(), a.target, 1e3 / mean.max(1e-9));
    }
    Ok(())
}
