//! Deterministic pseudo-random tensors of every IR dtype, from one generator: the same seed gives the same
//! values on every machine and in every test.

use half::{bf16, f16};
use tpu_sdk_core::ir::{DType, Graph, Tensor, TensorData};

/// A small deterministic generator (a 64-bit linear congruential one, Knuth's MMIX constants; the top bits
/// are used, never the weak low ones).
#[derive(Clone, Debug)]
pub struct Rng(u64);

const MUL: u64 = 6364136223846793005;
const INC: u64 = 1442695040888963407;

impl Rng {
    /// A generator for `seed` (any value, 0 included).
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(MUL).wrapping_add(INC))
    }

    /// A generator whose stream continues from the raw state `state` (`Rng::new(seed)` starts from the state
    /// after one step from `seed`); for tests whose thresholds were set on such a stream.
    pub fn from_state(state: u64) -> Rng {
        Rng(state)
    }

    /// The next 64-bit state; its high bits are the random ones.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_mul(MUL).wrapping_add(INC);
        self.0
    }

    /// Uniform in [0, 1), on a grid of 2^-24 (exact in f32).
    pub fn unit(&mut self) -> f32 {
        (self.next_u64() >> 40) as f32 / (1u64 << 24) as f32
    }

    /// Uniform in [lo, hi).
    pub fn uniform(&mut self, lo: f32, hi: f32) -> f32 {
        self.unit() * (hi - lo) + lo
    }

    /// Uniform in [0, n).
    pub fn below(&mut self, n: u64) -> u64 {
        (((self.next_u64() >> 32) * n) >> 32).min(n.saturating_sub(1))
    }

    /// A byte, uniform over all 256 values.
    pub fn byte(&mut self) -> u8 {
        (self.next_u64() >> 56) as u8
    }

    /// A tensor of `dtype` and `shape`: floats (f32, f64, f16, bf16) uniform in [-1, 1); i8 and u8 over
    /// their whole range (quantized data); i16, i32 and i64 in [0, 20) (valid as indices, counts and axes of
    /// small inputs); booleans true or false with equal odds.
    pub fn tensor(&mut self, dtype: DType, shape: &[usize]) -> Tensor {
        let n: usize = shape.iter().product();
        let data = match dtype {
            DType::F32 => TensorData::F32((0..n).map(|_| self.uniform(-1.0, 1.0)).collect()),
            DType::F64 => TensorData::F64((0..n).map(|_| self.uniform(-1.0, 1.0) as f64).collect()),
            DType::F16 => TensorData::F16((0..n).map(|_| f16::from_f32(self.uniform(-1.0, 1.0))).collect()),
            DType::BF16 => TensorData::BF16((0..n).map(|_| bf16::from_f32(self.uniform(-1.0, 1.0))).collect()),
            DType::I8 => TensorData::I8((0..n).map(|_| self.byte() as i8).collect()),
            DType::U8 => TensorData::U8((0..n).map(|_| self.byte()).collect()),
            DType::I16 => TensorData::I16((0..n).map(|_| self.below(20) as i16).collect()),
            DType::I32 => TensorData::I32((0..n).map(|_| self.below(20) as i32).collect()),
            DType::I64 => TensorData::I64((0..n).map(|_| self.below(20) as i64).collect()),
            DType::Bool => TensorData::Bool((0..n).map(|_| self.next_u64() >> 63 == 1).collect()),
        };
        Tensor::new(shape.to_vec(), data).expect("length matches shape")
    }

    /// An f32 tensor uniform in [lo, hi).
    pub fn f32_tensor(&mut self, shape: &[usize], lo: f32, hi: f32) -> Tensor {
        let n: usize = shape.iter().product();
        Tensor::from_f32(shape.to_vec(), (0..n).map(|_| self.uniform(lo, hi)).collect())
    }
}

/// A tensor of `dtype` and `shape` from `seed` (see [`Rng::tensor`] for the value ranges).
pub fn random_tensor(dtype: DType, shape: &[usize], seed: u64) -> Tensor {
    Rng::new(seed).tensor(dtype, shape)
}

/// An f32 tensor uniform in [-1, 1) from `seed`.
pub fn rand_f32(shape: &[usize], seed: u64) -> Tensor {
    random_tensor(DType::F32, shape, seed)
}

/// One tensor per input of `g` (its dtype and shape), input `k` from seed `seed + k`.
pub fn random_inputs(g: &Graph, seed: u64) -> Vec<Tensor> {
    g.inputs.iter().enumerate().map(|(k, &i)| random_tensor(g.value(i).dtype, &g.value(i).shape, seed + k as u64)).collect()
}

/// `n` sets of f32 inputs of `shapes` (calibration or evaluation samples), uniform in [lo, hi), all from one
/// generator seeded with `seed`.
pub fn f32_samples(shapes: &[Vec<usize>], n: usize, seed: u64, lo: f32, hi: f32) -> Vec<Vec<Tensor>> {
    let mut rng = Rng::new(seed);
    (0..n).map(|_| shapes.iter().map(|s| rng.f32_tensor(s, lo, hi)).collect()).collect()
}
