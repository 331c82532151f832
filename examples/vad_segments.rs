//! Voice-activity detection over a WAV file: silero-vad run chunk by chunk with its LSTM state carried between
//! chunks, and the speech segments printed.
//!
//! ```text
//! cargo run --release --example vad_segments -- MODEL.onnx AUDIO.wav [--target T] [--threshold P]
//!     [--min-silence-ms MS] [--min-speech-ms MS]
//! cargo run --release --example vad_segments -- silero_vad_16k_op15.onnx cli/tests/data/speech_16k.wav
//! ```
//!
//! The model is silero-vad's ONNX file as its PyPI wheel ships it (`pip download silero-vad --no-deps`, then
//! `silero_vad/data/silero_vad_16k_op15.onnx` from the wheel; the zoo caches it in
//! `.cache/zoo/models/silero_vad_16k/model.onnx`). Audio must be 16 kHz (convert with
//! `ffmpeg -i in.wav -ac 1 -ar 16000 out.wav`); several channels are averaged. Each step feeds 512 new samples
//! preceded by the 64 before them, and the `stateN` output back into the `state` input ([`Stream`]): the same
//! as `tpu-sdk run MODEL --input input=AUDIO.wav --input sr=SR.npy --chunk 512 --context 64
//! --state-from stateN=state`. A segment starts where the speech probability reaches the threshold and ends
//! after `--min-silence-ms` below `threshold - 0.15`; segments shorter than `--min-speech-ms` are dropped.

use std::path::PathBuf;
use std::time::Instant;

use tpu_sdk::core::stream::{chunks, state_links, Stream};
use tpu_sdk::{DType, Tensor};

#[path = "common.rs"]
mod common;

const RATE: u32 = 16000;
const CHUNK: usize = 512;
const CONTEXT: usize = 64;

struct Args {
    model: PathBuf,
    audio: PathBuf,
    target: String,
    threshold: f32,
    min_silence_ms: f32,
    min_speech_ms: f32,
}

fn parse() -> Result<Args, String> {
    let mut it = std::env::args().skip(1);
    let mut pos = Vec::new();
    let mut a = Args { model: PathBuf::new(), audio: PathBuf::new(), target: "cpu".into(), threshold: 0.5, min_silence_ms: 300.0, min_speech_ms: 250.0 };
    while let Some(x) = it.next() {
        let mut num = |flag: &str| -> Result<f32, String> {
            it.next().ok_or_else(|| format!("{flag} needs a value"))?.parse().map_err(|_| format!("{flag}: not a number"))
        };
        match x.as_str() {
            "--target" => a.target = it.next().ok_or("--target needs a value")?,
            "--threshold" => a.threshold = num("--threshold")?,
            "--min-silence-ms" => a.min_silence_ms = num("--min-silence-ms")?,
            "--min-speech-ms" => a.min_speech_ms = num("--min-speech-ms")?,
            "-h" | "--help" => return Err(String::new()),
            f if f.starts_with("--") => return Err(format!("unknown flag {f}")),
            _ => pos.push(PathBuf::from(x)),
        }
    }
    match <[PathBuf; 2]>::try_from(pos) {
        Ok([m, w]) => {
            a.model = m;
            a.audio = w;
            Ok(a)
        }
        Err(_) => Err("expected MODEL and AUDIO".into()),
    }
}

fn main() {
    common::main(parse, "vad_segments MODEL.onnx AUDIO.wav [--target T] [--threshold P] [--min-silence-ms MS] [--min-speech-ms MS]", run)
}

fn run(a: Args) -> Result<(), Box<dyn std::error::Error>> {
    let audio = tpu_sdk::core::wav::read(&a.audio)?;
    if audio.sample_rate != RATE {
        return Err(format!("{} is {} Hz; silero-vad here takes {RATE} Hz (ffmpeg -i IN -ac 1 -ar {RATE} OUT.wav)", a.audio.display(), audio.sample_rate).into());
    }
    let (channels, frames) = (audio.samples.shape[0], audio.samples.shape[1]);
    let x = audio.samples.as_f32().expect("wav::read gives f32");
    let mono: Vec<f32> = (0..frames).map(|f| (0..channels).map(|c| x[c * frames + f]).sum::<f32>() / channels as f32).collect();
    let mono = Tensor::from_f32(vec![1, frames], mono);

    // the model's free dims (batch, sequence) fixed to one step's shapes
    let mut opts = tpu_sdk::LoadOptions::default();
    opts.input_shapes.insert("input".into(), vec![1, CONTEXT + CHUNK]);
    opts.input_shapes.insert("state".into(), vec![2, 1, 128]);
    let model = tpu_sdk::Model::load_with(&a.model, &opts)?;
    let g = model.graph();
    let links = state_links(g, &[("stateN".into(), "state".into())])?;
    let mut vad = Stream::new(model.prepare(&a.target)?, g, links, vec![None])?;
    let sr = Tensor::from_i64(vec![], vec![RATE as i64]);
    if g.inputs.iter().any(|&i| g.value(i).name == "sr" && g.value(i).dtype != DType::I64) {
        return Err("this model's 'sr' input is not int64: is it silero-vad?".into());
    }

    let t0 = Instant::now();
    let (pieces, _) = chunks(&mono, CHUNK, CONTEXT)?;
    let mut probs = Vec::new();
    for piece in pieces {
        let out = vad.step(&[piece, sr.clone()])?;
        probs.push(out[0].as_f32().ok_or("output 0 is not f32")?[0]);
    }
    let ms = t0.elapsed().as_secs_f64() * 1e3;

    let step_s = CHUNK as f32 / RATE as f32;
    let segments = segments(&probs, a.threshold, (a.min_silence_ms / 1e3 / step_s).ceil() as usize);
    println!("{}: {:.2} s of audio, {} steps on {} in {ms:.1} ms ({:.3} ms per step)", a.audio.display(), frames as f32 / RATE as f32, probs.len(), a.target, ms / probs.len() as f64);
    for (s, e) in segments.into_iter().filter(|(s, e)| (e - s) as f32 * step_s * 1e3 >= a.min_speech_ms) {
        println!("speech {:>7.2} s - {:>7.2} s", s as f32 * step_s, e as f32 * step_s);
    }
    Ok(())
}

/// Speech segments as [start, end) step indices: one starts at a step with probability >= `threshold` and ends
/// once `min_silence` steps in a row fall below `threshold - 0.15` (silero's own hysteresis).
fn segments(probs: &[f32], threshold: f32, min_silence: usize) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let (mut start, mut quiet) = (None, 0usize);
    for (k, &p) in probs.iter().enumerate() {
        match start {
            None if p >= threshold => {
                start = Some(k);
                quiet = 0;
            }
            Some(s) if p < threshold - 0.15 => {
                quiet += 1;
                if quiet >= min_silence.max(1) {
                    out.push((s, k + 1 - quiet));
                    start = None;
                }
            }
            Some(_) => quiet = 0,
            None => {}
        }
    }
    if let Some(s) = start {
        out.push((s, probs.len() - quiet));
    }
    out
}
