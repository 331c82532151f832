//! Reading sample sets (calibration and evaluation data) for `compile`: each sample is one full set of graph
//! inputs, in graph input order.
//!
//! Accepted forms:
//! * a `.npy` file holding N samples stacked on the first axis (single-input models): shape `[N, ...input]`,
//!   or exactly the input shape when the input's first (batch) dimension is N·b;
//! * a folder of `.npy` files, one sample each (single-input models), taken in name order;
//! * a folder of sub-folders, one per sample, each holding `<input name>.npy` for every input (multi-input
//!   models);
//! * a folder of images (`.png`, `.jpg`, `.jpeg`, `.bmp`, `.webp`), preprocessed exactly as `run --image`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use anyhow::Result;
use tpu_sdk::core::import::{DeclaredDim, DeclaredInput};
use tpu_sdk::{DType, Graph, LoadOptions, Tensor};

use super::image_input::{self, ImageArgs};
use super::UsageError;

const IMAGE_EXTS: &[&str] = &["png", "jpg", "jpeg", "bmp", "webp", "gif", "tif", "tiff"];

fn ext(p: &Path) -> String {
    p.extension().map(|e| e.to_string_lossy().to_ascii_lowercase()).unwrap_or_default()
}

/// The entries of folder `path` in name order, hidden ones (`.name`) left out.
fn visible_entries(path: &Path) -> Result<Vec<PathBuf>> {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(path)?.filter_map(|e| e.ok().map(|e| e.path())).filter(|p| !p.file_name().is_some_and(|n| n.to_string_lossy().starts_with('.'))).collect();
    entries.sort();
    Ok(entries)
}

/// Loads samples for `graph` from `path` (see the module docs).
pub fn load(path: &Path, graph: &Graph, image: &ImageArgs) -> Result<Vec<Vec<Tensor>>> {
    let names: Vec<String> = graph.inputs.iter().map(|&i| graph.value(i).name.clone()).collect();
    if path.is_dir() {
        let entries = visible_entries(path)?;
        let dirs: Vec<&PathBuf> = entries.iter().filter(|p| p.is_dir()).collect();
        let npys: Vec<&PathBuf> = entries.iter().filter(|p| p.is_file() && ext(p) == "npy").collect();
        let images: Vec<&PathBuf> = entries.iter().filter(|p| p.is_file() && IMAGE_EXTS.contains(&ext(p).as_str())).collect();
        if !dirs.is_empty() && npys.is_empty() && images.is_empty() {
            return dirs.iter().map(|d| load_named(d, graph, &names)).collect();
        }
        if graph.inputs.len() != 1 {
            return Err(UsageError(format!(
                "{}: this model has {} inputs ({}); give one sub-folder per sample holding {}",
                path.display(),
                names.len(),
                names.join(", "),
                names.iter().map(|n| format!("{n}.npy")).collect::<Vec<_>>().join(", ")
            ))
            .into());
        }
        let v = graph.value(graph.inputs[0]);
        if !npys.is_empty() {
            return npys.iter().map(|p| Ok(vec![one_sample(&tpu_sdk::core::npy::read(p)?, &v.shape, &v.name, p)?])).collect();
        }
        if !images.is_empty() {
            return images.iter().map(|p| Ok(vec![image_input::load(p, v.dtype, &v.shape, image)?])).collect();
        }
        return Err(UsageError(format!("{}: no .npy files, images or sample folders in it", path.display())).into());
    }
    if graph.inputs.len() != 1 {
        return Err(UsageError(format!(
            "{}: a single .npy holds samples for one input, but this model has {} ({}); give a folder with one sub-folder per sample holding <input name>.npy",
            path.display(),
            names.len(),
            names.join(", ")
        ))
        .into());
    }
    if IMAGE_EXTS.contains(&ext(path).as_str()) {
        let v = graph.value(graph.inputs[0]);
        return Ok(vec![vec![image_input::load(path, v.dtype, &v.shape, image)?]]);
    }
    let all = tpu_sdk::core::npy::read(path)?;
    let v = graph.value(graph.inputs[0]);
    split(&all, &v.shape, &v.name, path)
}

/// Shapes for the inputs that the model file leaves free (and that neither `--input-shape` nor `--dim` sets),
/// read from the first sample at `path` (the forms of [`load`]): a sample fixes every dimension a model may
/// leave open. Image samples fix only a free batch dimension (to 1), since images are resized to the input's
/// size; other free dimensions then need `--input-shape`.
pub fn free_input_shapes(path: &Path, declared: &[DeclaredInput], opts: &LoadOptions) -> Result<HashMap<String, Vec<usize>>> {
    let mut shapes = HashMap::new();
    for (k, input) in declared.iter().enumerate() {
        let resolved = |d: &DeclaredDim| match d {
            DeclaredDim::Fixed(_) => true,
            DeclaredDim::Symbol(s) => opts.dims.contains_key(s),
            DeclaredDim::Free => false,
        };
        if opts.input_shapes.contains_key(&input.name) || input.dims.as_ref().is_some_and(|d| d.iter().all(resolved)) {
            continue;
        }
        let Some(sample) = first_sample(path, declared, k)? else { continue };
        let shape = match (sample, &input.dims) {
            (Sample::Image, Some(dims)) if dims.iter().skip(1).all(resolved) => {
                // The batch is the only free dimension: one image per sample.
                dims.iter().enumerate().map(|(i, d)| if i == 0 { 1 } else { fixed_or_dim(d, opts) }).collect()
            }
            (Sample::Image, _) => {
                return Err(UsageError(format!(
                    "input '{}' leaves dimensions free ({}) and image samples are resized to the input's size: give it with --input-shape {}=D0,D1,...",
                    input.name,
                    describe(input.dims.as_deref()),
                    input.name
                ))
                .into())
            }
            (Sample::Array { shape, stacked }, dims) => {
                let rank = dims.as_ref().map_or(shape.len().saturating_sub(usize::from(stacked)), Vec::len);
                if stacked && shape.len() == rank + 1 {
                    shape[1..].to_vec() // [N, ...input]
                } else if shape.len() == rank {
                    match dims {
                        // [N·b, ...]: N samples of the input's batch b (1 where the batch is free).
                        Some(d) if stacked && rank > 0 => [&[fixed_or_dim(&d[0], opts)], &shape[1..]].concat(),
                        _ => shape,
                    }
                } else if !stacked && shape.len() == rank + 1 && shape[0] == 1 {
                    shape[1..].to_vec()
                } else {
                    return Err(tpu_sdk::Error::InputMismatch(format!(
                        "{}: a sample of shape {shape:?} does not fit input '{}' ({})",
                        path.display(),
                        input.name,
                        describe(dims.as_deref())
                    ))
                    .into());
                }
            }
        };
        shapes.insert(input.name.clone(), shape);
    }
    Ok(shapes)
}

fn fixed_or_dim(d: &DeclaredDim, opts: &LoadOptions) -> usize {
    match d {
        DeclaredDim::Fixed(n) => *n,
        DeclaredDim::Symbol(s) => opts.dims.get(s).copied().unwrap_or(1),
        DeclaredDim::Free => 1,
    }
}

fn describe(dims: Option<&[DeclaredDim]>) -> String {
    match dims {
        None => "no declared shape".into(),
        Some(d) => {
            let parts: Vec<String> = d
                .iter()
                .map(|d| match d {
                    DeclaredDim::Fixed(n) => n.to_string(),
                    DeclaredDim::Symbol(s) => s.clone(),
                    DeclaredDim::Free => "?".into(),
                })
                .collect();
            format!("[{}]", parts.join(", "))
        }
    }
}

/// The first sample of input `k`: an image, or an array (`stacked`: a single `.npy` of N samples).
enum Sample {
    Image,
    Array { shape: Vec<usize>, stacked: bool },
}

fn first_sample(path: &Path, declared: &[DeclaredInput], k: usize) -> Result<Option<Sample>> {
    let array = |p: &Path, stacked: bool| -> Result<Option<Sample>> { Ok(Some(Sample::Array { shape: tpu_sdk::core::npy::read(p)?.shape, stacked })) };
    if !path.is_dir() {
        if IMAGE_EXTS.contains(&ext(path).as_str()) {
            return Ok(Some(Sample::Image));
        }
        return if declared.len() == 1 { array(path, true) } else { Ok(None) }; // load() explains the forms
    }
    let entries = visible_entries(path)?;
    if let Some(p) = entries.iter().find(|p| p.is_file() && ext(p) == "npy") {
        return if declared.len() == 1 { array(p, false) } else { Ok(None) };
    }
    if entries.iter().any(|p| p.is_file() && IMAGE_EXTS.contains(&ext(p).as_str())) {
        return Ok(Some(Sample::Image));
    }
    match entries.iter().find(|p| p.is_dir()).map(|d| d.join(format!("{}.npy", declared[k].name))) {
        Some(f) if f.is_file() => array(&f, false),
        _ => Ok(None),
    }
}

/// One sample per sub-folder: `<input>.npy` for every input.
fn load_named(dir: &Path, graph: &Graph, names: &[String]) -> Result<Vec<Tensor>> {
    graph
        .inputs
        .iter()
        .zip(names)
        .map(|(&i, n)| {
            let p = dir.join(format!("{n}.npy"));
            if !p.is_file() {
                return Err(UsageError(format!("{}: missing {n}.npy (each sample folder holds one .npy per input: {})", dir.display(), names.join(", "))).into());
            }
            one_sample(&tpu_sdk::core::npy::read(&p)?, &graph.value(i).shape, n, &p)
        })
        .collect()
}

/// A tensor that is exactly one sample of an input (a leading 1 may be missing or extra).
fn one_sample(t: &Tensor, want: &[usize], name: &str, path: &Path) -> Result<Tensor> {
    let n: usize = want.iter().product();
    if t.len() != n {
        return Err(tpu_sdk::Error::InputMismatch(format!("{}: shape {:?} is not one sample of input '{name}' {want:?}", path.display(), t.shape)).into());
    }
    Ok(as_f32(t, want))
}

/// N samples stacked on the first axis of `all`.
fn split(all: &Tensor, want: &[usize], name: &str, path: &Path) -> Result<Vec<Vec<Tensor>>> {
    let per: usize = want.iter().product();
    let total = all.len();
    // [N, ...input], or [N·b, ...] for an input with batch b.
    let stacked = all.shape.len() == want.len() + 1 && all.shape[1..] == *want;
    let batched = !want.is_empty() && all.shape.len() == want.len() && all.shape[1..] == want[1..] && want[0] > 0 && all.shape[0] % want[0] == 0;
    if per == 0 || total == 0 || !(stacked || batched) {
        return Err(tpu_sdk::Error::InputMismatch(format!(
            "{}: shape {:?} is not N samples of input '{name}' {want:?}: expected [N, {}]",
            path.display(),
            all.shape,
            want.iter().map(|d| d.to_string()).collect::<Vec<_>>().join(", ")
        ))
        .into());
    }
    let v = all.to_f64_vec();
    Ok((0..total / per).map(|i| vec![Tensor::from_f32(want.to_vec(), v[i * per..(i + 1) * per].iter().map(|&x| x as f32).collect())]).collect())
}

fn as_f32(t: &Tensor, shape: &[usize]) -> Tensor {
    if t.dtype() == DType::F32 {
        return Tensor { shape: shape.to_vec(), data: t.data.clone() };
    }
    Tensor::from_f32(shape.to_vec(), t.to_f64_vec().iter().map(|&x| x as f32).collect())
}
