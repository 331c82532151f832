//! Small helpers shared by the examples (included with `#[path]`; not an example itself).

#![allow(dead_code)]

use std::path::Path;

/// The examples' `main`: arguments from `parse` (when it fails: its message and `usage`, exit status 2), then
/// `run` on them (when it fails: its error, exit status 1).
pub fn main<A>(parse: fn() -> Result<A, String>, usage: &str, run: fn(A) -> Result<(), Box<dyn std::error::Error>>) {
    let a = match parse() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}\nusage: {usage}");
            std::process::exit(2);
        }
    };
    if let Err(e) = run(a) {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

/// Parses `M` or `M,M,M` into three per-channel values.
pub fn three(s: &str) -> Result<[f32; 3], String> {
    let v: Vec<f32> = s.split(',').map(|x| x.trim().parse::<f32>().map_err(|_| format!("'{x}' is not a number"))).collect::<Result<_, _>>()?;
    match v.as_slice() {
        [a] => Ok([*a; 3]),
        [a, b, c] => Ok([*a, *b, *c]),
        _ => Err(format!("'{s}': expected 1 or 3 values")),
    }
}

/// The `k` highest scores as (class index, score), best first; ties keep the lower index first.
pub fn top_k(scores: &[f64], k: usize) -> Vec<(usize, f64)> {
    let mut idx: Vec<usize> = (0..scores.len()).collect();
    idx.sort_by(|&x, &y| scores[y].total_cmp(&scores[x]).then(x.cmp(&y)));
    idx.into_iter().take(k).map(|i| (i, scores[i])).collect()
}

/// Class names, one per line (empty without a file).
pub fn labels(path: Option<&Path>) -> std::io::Result<Vec<String>> {
    match path {
        Some(p) => Ok(std::fs::read_to_string(p)?.lines().map(|l| l.trim().to_string()).collect()),
        None => Ok(Vec::new()),
    }
}

/// Loads `model` (with `input_shape` fixing one input's shape, if given) and checks it has the single image
/// input the examples feed (`what`: the example's word for itself in the error).
pub fn load_image_model(model: &Path, input_shape: Option<&(String, Vec<usize>)>, what: &str) -> Result<tpu_sdk::Model, Box<dyn std::error::Error>> {
    let mut opts = tpu_sdk::LoadOptions::default();
    if let Some((name, shape)) = input_shape {
        opts.input_shapes.insert(name.clone(), shape.clone());
    }
    let m = tpu_sdk::Model::load_with(model, &opts)?;
    let n = m.graph().inputs.len();
    if n != 1 {
        return Err(format!("{} has {n} inputs; this {what} needs a single image input", model.display()).into());
    }
    Ok(m)
}
