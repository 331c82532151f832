//! Reading sample sets (calibration and evaluation data) for `compile`: each sample is one full set of graph
//! inputs.

use std::path::Path;

use anyhow::Result;
use tpu_sdk::{Graph, Tensor};

use super::image_input::ImageArgs;
use super::UsageError;

/// Loads samples for `graph` from `path`: a .npy holding N samples on its first axis (single-input models).
pub fn load(path: &Path, graph: &Graph, image: &ImageArgs) -> Result<Vec<Vec<Tensor>>> {
    let _ = image;
    if graph.inputs.len() != 1 {
        return Err(UsageError(format!("samples for a model with {} inputs are not supported yet", graph.inputs.len())).into());
    }
    let all = tpu_sdk::core::npy::read(path)?;
    let want = &graph.value(graph.inputs[0]).shape;
    let per: usize = want.iter().product();
    let total: usize = all.shape.iter().product();
    let n = if per == 0 { 0 } else { total / per };
    if n == 0 || n * per != total {
        return Err(UsageError(format!("{}: shape {:?} is not N samples of the input shape {want:?}", path.display(), all.shape)).into());
    }
    let v = all.to_f64_vec();
    Ok((0..n)
        .map(|i| {
            let mut t = Tensor::zeros(tpu_sdk::DType::F32, want.clone());
            for (d, s) in t.view_mut::<f32>().expect("f32 tensor").iter_mut().zip(&v[i * per..(i + 1) * per]) {
                *d = *s as f32;
            }
            vec![t]
        })
        .collect())
}
