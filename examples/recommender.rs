//! A DLRM-style recommender built with the Rust graph builder and run on a target: click probabilities for a
//! batch of (user, item) requests.
//!
//! ```text
//! cargo run --release --example recommender -- [--target cpu|cloud-tpu] [--batch N] [--seed S]
//! ```
//!
//! The model is DLRM's shape (Naumov et al., 2019) at a small size, with seeded random weights: 13 dense
//! features through a bottom MLP (13 → 64 → 16, ReLU); 4 categorical features, each a bag of 3 ids summed from
//! its embedding table (1000 × 16: an `EmbeddingBag` as `Gather` + `ReduceSum`); the pairwise dot products of
//! the 5 feature vectors (the upper triangle of Z·Zᵀ, 10 values) next to the bottom MLP's output; a top MLP
//! (26 → 32 → 1) and a sigmoid. The same model is also computed with plain loops here, and the target's
//! answer must agree with it (1e-5), so the example checks itself wherever it runs.

use tpu_sdk::core::ir::builder::GraphBuilder;
use tpu_sdk::core::ir::ops::ReduceOp;
use tpu_sdk::core::ir::{Graph, Op, UnaryOp};
use tpu_sdk::core::runtime::CpuEval;
use tpu_sdk::{DType, Tensor};

#[path = "common.rs"]
mod common;

const DENSE: usize = 13;
const TABLES: usize = 4;
const ROWS: usize = 1000;
const BAG: usize = 3;
const DIM: usize = 16;
const FEATURES: usize = TABLES + 1;
const PAIRS: usize = FEATURES * (FEATURES - 1) / 2;

struct Args {
    target: String,
    batch: usize,
    seed: u64,
}

fn parse() -> Result<Args, String> {
    let mut a = Args { target: "cpu".into(), batch: 8, seed: 1 };
    let mut it = std::env::args().skip(1);
    while let Some(x) = it.next() {
        let mut value = |flag: &str| it.next().ok_or_else(|| format!("{flag} needs a value"));
        match x.as_str() {
            "--target" => a.target = value("--target")?,
            "--batch" => a.batch = value("--batch")?.parse().map_err(|_| "--batch: not a count")?,
            "--seed" => a.seed = value("--seed")?.parse().map_err(|_| "--seed: not a number")?,
            "-h" | "--help" => return Err(String::new()),
            f => return Err(format!("unknown argument {f}")),
        }
    }
    if a.batch == 0 {
        return Err("--batch must be at least 1".into());
    }
    Ok(a)
}

fn main() {
    common::main(parse, "recommender [--target cpu|cloud-tpu] [--batch N] [--seed S]", run)
}

/// Seeded uniform values in [-scale, scale) (xorshift64*).
struct Rand(u64);

impl Rand {
    fn next(&mut self) -> f32 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        ((self.0.wrapping_mul(0x2545F4914F6CDD1D) >> 40) as f32) / (1u64 << 24) as f32
    }
    fn tensor(&mut self, shape: &[usize], scale: f32) -> Tensor {
        let n = shape.iter().product();
        Tensor::from_f32(shape.to_vec(), (0..n).map(|_| (self.next() * 2.0 - 1.0) * scale).collect())
    }
}

/// The weights: bottom MLP, embedding tables, top MLP (each layer a [in, out] matrix and a bias).
struct Weights {
    bottom: Vec<(Tensor, Tensor)>,
    tables: Vec<Tensor>,
    top: Vec<(Tensor, Tensor)>,
}

fn weights(seed: u64) -> Weights {
    let mut r = Rand(seed.wrapping_mul(0x9E3779B97F4A7C15) | 1);
    let mut mlp = |sizes: &[usize]| -> Vec<(Tensor, Tensor)> {
        sizes.windows(2).map(|w| (r.tensor(&[w[0], w[1]], (6.0 / (w[0] + w[1]) as f32).sqrt()), r.tensor(&[w[1]], 0.1))).collect()
    };
    let bottom = mlp(&[DENSE, 64, DIM]);
    let top = mlp(&[DIM + PAIRS, 32, 1]);
    let tables = (0..TABLES).map(|_| r.tensor(&[ROWS, DIM], 0.5)).collect();
    Weights { bottom, tables, top }
}

/// The model as a graph: inputs `dense` f32 [batch, 13] and `ids_k` i64 [batch, 3]; output the click probability [batch, 1].
fn build(w: &Weights, batch: usize) -> tpu_sdk::Result<Graph> {
    let mut b = GraphBuilder::with_eval("dlrm", &CpuEval);
    let dense = b.input("dense", DType::F32, &[batch, DENSE]);
    let ids: Vec<_> = (0..TABLES).map(|k| b.input(&format!("ids_{k}"), DType::I64, &[batch, BAG])).collect();
    let mlp = |b: &mut GraphBuilder, mut x, layers: &[(Tensor, Tensor)], name: &str, last_relu: bool| -> tpu_sdk::Result<_> {
        for (k, (m, bias)) in layers.iter().enumerate() {
            let m = b.constant(&format!("{name}{k}.weight"), m.clone());
            let bias = b.constant(&format!("{name}{k}.bias"), bias.clone());
            let y = b.matmul(x, m)?;
            x = b.add(y, bias)?;
            if k + 1 < layers.len() || last_relu {
                x = b.relu(x)?;
            }
        }
        Ok(x)
    };
    let bottom = mlp(&mut b, dense, &w.bottom, "bottom", true)?;
    // EmbeddingBag(sum): gather the bag's rows, sum them
    let mut features = vec![b.reshape(bottom, &[batch as i64, 1, DIM as i64])?];
    for (k, t) in w.tables.iter().enumerate() {
        let table = b.constant(&format!("table{k}"), t.clone());
        let rows = b.op(Op::Gather { axis: 0 }, &[table, ids[k]])?; // [batch, 3, 16]
        let sum = b.op(Op::Reduce { op: ReduceOp::Sum, axes: Some(vec![1]), keepdims: true, noop_with_empty_axes: false }, &[rows])?;
        features.push(sum); // [batch, 1, 16]
    }
    let z = b.op(Op::Concat { axis: 1 }, &features)?; // [batch, 5, 16]
    let zt = b.op(Op::Transpose { perm: vec![0, 2, 1] }, &[z])?;
    let dots = b.matmul(z, zt)?; // [batch, 5, 5]
    let flat = b.reshape(dots, &[batch as i64, (FEATURES * FEATURES) as i64])?;
    let upper: Vec<i64> = (0..FEATURES).flat_map(|i| (i + 1..FEATURES).map(move |j| (i * FEATURES + j) as i64)).collect();
    let upper = b.constant("upper_triangle", Tensor::from_i64(vec![PAIRS], upper));
    let pairs = b.op(Op::Gather { axis: 1 }, &[flat, upper])?; // [batch, 10]
    let top_in = b.op(Op::Concat { axis: 1 }, &[bottom, pairs])?; // [batch, 26]
    let logit = mlp(&mut b, top_in, &w.top, "top", false)?;
    let p = b.op(Op::Unary(UnaryOp::Sigmoid), &[logit])?;
    b.output(p);
    b.finish()
}

/// The same model with plain loops.
fn reference(w: &Weights, dense: &[f32], ids: &[Vec<i64>], batch: usize) -> Vec<f32> {
    fn layer(x: &[f32], (m, bias): &(Tensor, Tensor), relu: bool) -> Vec<f32> {
        let (m, bias) = (m.as_f32().unwrap(), bias.as_f32().unwrap());
        let out = bias.len();
        (0..out)
            .map(|j| {
                let v = bias[j] + x.iter().enumerate().map(|(i, &xi)| xi * m[i * out + j]).sum::<f32>();
                if relu { v.max(0.0) } else { v }
            })
            .collect()
    }
    (0..batch)
        .map(|n| {
            let mut x = dense[n * DENSE..(n + 1) * DENSE].to_vec();
            for l in &w.bottom {
                x = layer(&x, l, true);
            }
            let mut feats = vec![x.clone()];
            for (k, t) in w.tables.iter().enumerate() {
                let t = t.as_f32().unwrap();
                let mut s = vec![0.0f32; DIM];
                for &id in &ids[k][n * BAG..(n + 1) * BAG] {
                    s.iter_mut().zip(&t[id as usize * DIM..(id as usize + 1) * DIM]).for_each(|(a, b)| *a += b);
                }
                feats.push(s);
            }
            let mut top = x;
            for i in 0..FEATURES {
                for j in i + 1..FEATURES {
                    top.push(feats[i].iter().zip(&feats[j]).map(|(a, b)| a * b).sum());
                }
            }
            for (k, l) in w.top.iter().enumerate() {
                top = layer(&top, l, k + 1 < w.top.len());
            }
            1.0 / (1.0 + (-top[0]).exp())
        })
        .collect()
}

fn run(a: Args) -> Result<(), Box<dyn std::error::Error>> {
    let w = weights(a.seed);
    let graph = build(&w, a.batch)?;
    let model = tpu_sdk::Model::from_graph(graph)?;
    let mut exe = model.prepare(&a.target)?;
    // a batch of requests: dense features and the ids of each categorical feature's bag
    let mut r = Rand(a.seed.wrapping_add(17) | 1);
    let dense = r.tensor(&[a.batch, DENSE], 1.0);
    let ids: Vec<Vec<i64>> = (0..TABLES).map(|_| (0..a.batch * BAG).map(|_| (r.next() * ROWS as f32) as i64 % ROWS as i64).collect()).collect();
    let mut inputs = vec![dense.clone()];
    inputs.extend(ids.iter().map(|v| Tensor::from_i64(vec![a.batch, BAG], v.clone())));
    let t0 = std::time::Instant::now();
    let out = exe.run(&inputs)?;
    let ms = t0.elapsed().as_secs_f64() * 1e3;
    let p = out[0].as_f32().ok_or("the model returned no f32 probabilities")?;
    let want = reference(&w, dense.as_f32().unwrap(), &ids, a.batch);
    let worst = p.iter().zip(&want).map(|(a, b)| (a - b).abs()).fold(0.0f32, f32::max);
    for (n, prob) in p.iter().enumerate() {
        println!("request {n:>3}: click probability {prob:.4}");
    }
    println!("{} requests on {} in {ms:.2} ms; largest difference from the loop reference {worst:.1e}", a.batch, a.target);
    if worst > 1e-5 {
        return Err(format!("the {} target differs from the loop reference by {worst}", a.target).into());
    }
    Ok(())
}
