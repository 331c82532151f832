//! WAV audio as model input: PCM (8/16/24/32-bit integer) or IEEE float samples, read with `hound` into an f32
//! tensor `[channels, frames]` in [-1, 1] (what audio models such as voice-activity detectors take).

use std::path::Path;

use crate::ir::Tensor;
use crate::{Error, Result};

/// A decoded WAV file.
#[derive(Clone, Debug)]
pub struct Audio {
    /// Samples as `[channels, frames]`, scaled to [-1, 1].
    pub samples: Tensor,
    /// Frames per second.
    pub sample_rate: u32,
}

/// Reads `path`. A file that is not a WAV, is truncated, or would need more memory than the budget is an
/// [`Error::InputMismatch`] naming the file and the problem.
pub fn read(path: &Path) -> Result<Audio> {
    // opening is the only step whose failure is about the file system; once open, whatever hound cannot read is
    // the file's content (a short read is a truncated file)
    let file = std::fs::File::open(path).map_err(|source| Error::Io { path: path.display().to_string(), source })?;
    let bad = |e: hound::Error| match e {
        hound::Error::IoError(e) => Error::InputMismatch(format!("{}: not a readable WAV file: it ends early or cannot be read ({e})", path.display())),
        e => Error::InputMismatch(format!("{}: not a readable WAV file: {e}", path.display())),
    };
    let mut r = hound::WavReader::new(std::io::BufReader::new(file)).map_err(bad)?;
    let spec = r.spec();
    let channels = spec.channels as usize;
    if channels == 0 {
        return Err(Error::InputMismatch(format!("{}: the WAV header declares 0 channels", path.display())));
    }
    let frames = r.duration() as usize;
    crate::limits::check_tensor(&format!("audio {}", path.display()), crate::ir::DType::F32, &[channels, frames])?;
    let mut interleaved: Vec<f32> = Vec::with_capacity(frames * channels);
    match spec.sample_format {
        hound::SampleFormat::Float => {
            for s in r.samples::<f32>() {
                interleaved.push(s.map_err(bad)?);
            }
        }
        hound::SampleFormat::Int => {
            let scale = 1.0 / (1u64 << (spec.bits_per_sample.clamp(1, 32) - 1)) as f64;
            for s in r.samples::<i32>() {
                interleaved.push((s.map_err(bad)? as f64 * scale) as f32);
            }
        }
    }
    if interleaved.len() != frames * channels {
        return Err(Error::InputMismatch(format!(
            "{}: the WAV header promises {frames} frames, the data holds {}",
            path.display(),
            interleaved.len() / channels
        )));
    }
    // interleaved frames → one row per channel
    let mut planar = vec![0f32; interleaved.len()];
    for (f, frame) in interleaved.chunks_exact(channels).enumerate() {
        for (c, &v) in frame.iter().enumerate() {
            planar[c * frames + f] = v;
        }
    }
    Ok(Audio { samples: Tensor::from_f32(vec![channels, frames], planar), sample_rate: spec.sample_rate })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(path: &Path, spec: hound::WavSpec, samples: &[i32]) {
        let mut w = hound::WavWriter::create(path, spec).unwrap();
        for &s in samples {
            w.write_sample(s).unwrap();
        }
        w.finalize().unwrap();
    }

    #[test]
    fn reads_16_bit_stereo_as_planar_floats() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a.wav");
        let spec = hound::WavSpec { channels: 2, sample_rate: 16000, bits_per_sample: 16, sample_format: hound::SampleFormat::Int };
        write(&p, spec, &[0, 16384, -32768, 32767, 8192, -8192]);
        let a = read(&p).unwrap();
        assert_eq!(a.sample_rate, 16000);
        assert_eq!(a.samples.shape, vec![2, 3]);
        let v = a.samples.as_f32().unwrap();
        assert_eq!(&v[..3], &[0.0, -1.0, 0.25]);
        assert!((v[3] - 0.5).abs() < 1e-7 && (v[4] - 32767.0 / 32768.0).abs() < 1e-7 && (v[5] + 0.25).abs() < 1e-7);
    }

    #[test]
    fn a_truncated_or_foreign_file_is_an_input_error() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a.wav");
        let spec = hound::WavSpec { channels: 1, sample_rate: 8000, bits_per_sample: 16, sample_format: hound::SampleFormat::Int };
        write(&p, spec, &(0..1000).collect::<Vec<_>>());
        let bytes = std::fs::read(&p).unwrap();
        for cut in [0, 10, 44, 500, bytes.len() - 1] {
            std::fs::write(&p, &bytes[..cut]).unwrap();
            let e = read(&p).unwrap_err().to_string();
            assert!(e.contains("WAV") || e.contains("a.wav"), "cut at {cut}: {e}");
        }
        std::fs::write(&p, b"not a wav file at all, just text").unwrap();
        assert!(read(&p).unwrap_err().to_string().contains("not a readable WAV file"));
    }
}
