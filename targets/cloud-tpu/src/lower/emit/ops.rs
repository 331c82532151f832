//! The value-to-value StableHLO ops of the emitter: constants, elementwise arithmetic and comparisons,
//! conversions, broadcasts and data movement (reshape, transpose, slice, concat, pad), iota.

use tpu_sdk_core::ir::{Activation, DType, Tensor};

use super::{compare_type, dense, list, scalar_literal, ty, Cx, V};
use crate::error::{Error, Result};

impl Cx<'_> {
    /// A constant tensor.
    pub fn constant(&mut self, t: &Tensor) -> V {
        let ty = ty(t.dtype(), &t.shape);
        self.emit(format!("stablehlo.constant {} : {ty}", dense(t)), t.dtype(), t.shape.clone())
    }

    /// A constant of `shape` with every element `x` (deduplicated).
    pub fn splat(&mut self, x: f64, dtype: DType, shape: &[usize]) -> V {
        let lit = scalar_literal(x, dtype);
        let t = ty(dtype, shape);
        if let Some(n) = self.splats.get(&(lit.clone(), t.clone())) {
            return V { name: n.clone(), dtype, shape: shape.to_vec() };
        }
        let v = self.emit(format!("stablehlo.constant dense<{lit}> : {t}"), dtype, shape.to_vec());
        self.splats.insert((lit, t), v.name.clone());
        v
    }

    /// A scalar constant.
    pub fn scalar(&mut self, x: f64, dtype: DType) -> V {
        self.splat(x, dtype, &[])
    }

    /// A splat constant shaped and typed like `like`.
    pub fn splat_like(&mut self, x: f64, like: &V) -> V {
        self.splat(x, like.dtype, &like.shape.clone())
    }

    /// `stablehlo.<op>` of one operand (same type out).
    pub fn unary(&mut self, op: &str, a: &V) -> V {
        let t = a.ty();
        self.emit(format!("stablehlo.{op} {} : {t}", a.name), a.dtype, a.shape.clone())
    }

    /// `chlo.<op>` of one operand (same type out).
    pub fn chlo_unary(&mut self, op: &str, a: &V) -> V {
        let t = a.ty();
        self.emit(format!("chlo.{op} {} : {t} -> {t}", a.name), a.dtype, a.shape.clone())
    }

    /// `stablehlo.<op>` of two operands of the same type.
    pub fn binary(&mut self, op: &str, a: &V, b: &V) -> V {
        debug_assert_eq!((a.dtype, &a.shape), (b.dtype, &b.shape), "{op} operands");
        let t = a.ty();
        self.emit(format!("stablehlo.{op} {}, {} : {t}", a.name, b.name), a.dtype, a.shape.clone())
    }

    /// Binary op with a scalar constant right operand.
    pub fn binary_scalar(&mut self, op: &str, a: &V, x: f64) -> V {
        let c = self.splat_like(x, a);
        self.binary(op, a, &c)
    }

    /// `a + b`, `a - b`, `a * b`, `a / b` for equal types.
    pub fn add(&mut self, a: &V, b: &V) -> V {
        self.binary("add", a, b)
    }
    /// `a - b`.
    pub fn sub(&mut self, a: &V, b: &V) -> V {
        self.binary("subtract", a, b)
    }
    /// `a * b`.
    pub fn mul(&mut self, a: &V, b: &V) -> V {
        self.binary("multiply", a, b)
    }
    /// `a / b`.
    pub fn div(&mut self, a: &V, b: &V) -> V {
        self.binary("divide", a, b)
    }

    /// Element type conversion (no-op for the same type).
    pub fn convert(&mut self, a: &V, dtype: DType) -> V {
        if a.dtype == dtype {
            return a.clone();
        }
        if dtype == DType::Bool {
            let zero = self.splat_like(0.0, a);
            return self.compare("NE", a, &zero);
        }
        let out = ty(dtype, &a.shape);
        self.emit(format!("stablehlo.convert {} : ({}) -> {out}", a.name, a.ty()), dtype, a.shape.clone())
    }

    /// `stablehlo.compare` (direction EQ, NE, LT, LE, GT, GE) of two equal-typed operands → i1.
    pub fn compare(&mut self, dir: &str, a: &V, b: &V) -> V {
        let kind = compare_type(a.dtype);
        let out = ty(DType::Bool, &a.shape);
        self.emit(
            format!("stablehlo.compare {dir}, {}, {}, {kind} : ({}, {}) -> {out}", a.name, b.name, a.ty(), b.ty()),
            DType::Bool,
            a.shape.clone(),
        )
    }

    /// `cond ? a : b` for equal shapes.
    pub fn select(&mut self, cond: &V, a: &V, b: &V) -> V {
        self.emit(format!("stablehlo.select {}, {}, {} : {}, {}", cond.name, a.name, b.name, cond.ty(), a.ty()), a.dtype, a.shape.clone())
    }

    /// `clamp(lo, x, hi)` with scalar bounds.
    pub fn clamp(&mut self, x: &V, lo: f64, hi: f64) -> V {
        let l = self.scalar(lo, x.dtype);
        let h = self.scalar(hi, x.dtype);
        let t = x.ty();
        self.emit(
            format!("stablehlo.clamp {}, {}, {} : ({}, {t}, {}) -> {t}", l.name, x.name, h.name, l.ty(), h.ty()),
            x.dtype,
            x.shape.clone(),
        )
    }

    /// `max(x, 0)`.
    pub fn relu(&mut self, x: &V) -> V {
        self.binary_scalar("maximum", x, 0.0)
    }

    /// Applies a fused activation.
    pub fn activation(&mut self, x: V, act: Option<Activation>) -> V {
        match act {
            None => x,
            Some(Activation::Relu) => self.relu(&x),
            Some(Activation::Relu6) => self.clamp(&x, 0.0, 6.0),
            Some(Activation::Clip { min, max }) => self.clamp(&x, min as f64, max as f64),
            Some(Activation::Silu) => {
                let s = self.unary("logistic", &x);
                self.mul(&x, &s)
            }
        }
    }

    /// `broadcast_in_dim`: operand dim i becomes result dim `dims[i]`.
    pub fn broadcast_in_dim(&mut self, a: &V, dims: &[usize], shape: &[usize]) -> V {
        if a.shape == shape && dims.iter().enumerate().all(|(i, &d)| i == d) {
            return a.clone();
        }
        let out = ty(a.dtype, shape);
        self.emit(
            format!("stablehlo.broadcast_in_dim {}, dims = {} : ({}) -> {out}", a.name, list(dims), a.ty()),
            a.dtype,
            shape.to_vec(),
        )
    }

    /// Numpy-style broadcast of `a` to `shape` (trailing dims aligned). The caller guarantees compatibility.
    pub fn broadcast_to(&mut self, a: &V, shape: &[usize]) -> Result<V> {
        let mut a = a.clone();
        // Leading size-1 dims beyond the target rank carry nothing: drop them.
        if a.rank() > shape.len() && a.shape[..a.rank() - shape.len()].iter().all(|&d| d == 1) {
            let keep = a.shape[a.rank() - shape.len()..].to_vec();
            a = self.reshape(&a, &keep);
        }
        let r = a.rank();
        if r > shape.len() || a.shape.iter().zip(&shape[shape.len() - r..]).any(|(&s, &t)| s != t && s != 1) {
            return Err(Error::Invalid(format!("cannot broadcast {:?} to {shape:?}", a.shape)));
        }
        // broadcast_in_dim expands size-1 operand dims to any size.
        let dims: Vec<usize> = (shape.len() - r..shape.len()).collect();
        Ok(self.broadcast_in_dim(&a, &dims, shape))
    }

    /// Broadcasts a 1-D per-channel vector (length `shape[axis]`) along `axis` of `shape`.
    pub fn broadcast_along(&mut self, a: &V, axis: usize, shape: &[usize]) -> V {
        self.broadcast_in_dim(a, &[axis], shape)
    }

    /// Reshape (no-op for the same shape).
    pub fn reshape(&mut self, a: &V, shape: &[usize]) -> V {
        if a.shape == shape {
            return a.clone();
        }
        let out = ty(a.dtype, shape);
        self.emit(format!("stablehlo.reshape {} : ({}) -> {out}", a.name, a.ty()), a.dtype, shape.to_vec())
    }

    /// Transpose: result dim i is operand dim `perm[i]`.
    pub fn transpose(&mut self, a: &V, perm: &[usize]) -> V {
        if perm.iter().enumerate().all(|(i, &p)| i == p) {
            return a.clone();
        }
        let shape: Vec<usize> = perm.iter().map(|&p| a.shape[p]).collect();
        let out = ty(a.dtype, &shape);
        self.emit(format!("stablehlo.transpose {}, dims = {} : ({}) -> {out}", a.name, list(perm), a.ty()), a.dtype, shape)
    }

    /// Static slice with positive strides.
    pub fn slice(&mut self, a: &V, start: &[usize], limit: &[usize], stride: &[usize]) -> V {
        let shape: Vec<usize> = (0..a.rank())
            .map(|i| if limit[i] > start[i] { (limit[i] - start[i]).div_ceil(stride[i]) } else { 0 })
            .collect();
        if shape == a.shape {
            return a.clone();
        }
        let ranges: Vec<String> = (0..a.rank()).map(|i| format!("{}:{}:{}", start[i], limit[i].max(start[i]), stride[i])).collect();
        let out = ty(a.dtype, &shape);
        self.emit(format!("stablehlo.slice {} [{}] : ({}) -> {out}", a.name, ranges.join(", "), a.ty()), a.dtype, shape)
    }

    /// `a[start..limit]` along one axis.
    pub fn slice_axis(&mut self, a: &V, axis: usize, start: usize, limit: usize) -> V {
        let mut s = vec![0; a.rank()];
        let mut l = a.shape.clone();
        s[axis] = start;
        l[axis] = limit;
        self.slice(a, &s, &l, &vec![1; a.rank()])
    }

    /// Reverses the given dims.
    pub fn reverse(&mut self, a: &V, dims: &[usize]) -> V {
        if dims.is_empty() {
            return a.clone();
        }
        self.emit(format!("stablehlo.reverse {}, dims = {} : {}", a.name, list(dims), a.ty()), a.dtype, a.shape.clone())
    }

    /// Concatenation along `axis` of values of one dtype.
    pub fn concat(&mut self, vs: &[V], axis: usize) -> V {
        if vs.len() == 1 {
            return vs[0].clone();
        }
        let mut shape = vs[0].shape.clone();
        shape[axis] = vs.iter().map(|v| v.shape[axis]).sum();
        let names: Vec<&str> = vs.iter().map(|v| v.name.as_str()).collect();
        let tys: Vec<String> = vs.iter().map(|v| v.ty()).collect();
        let out = ty(vs[0].dtype, &shape);
        self.emit(
            format!("stablehlo.concatenate {}, dim = {axis} : ({}) -> {out}", names.join(", "), tys.join(", ")),
            vs[0].dtype,
            shape,
        )
    }

    /// `stablehlo.pad` with a scalar padding value (negative amounts crop).
    pub fn pad(&mut self, a: &V, value: &V, low: &[i64], high: &[i64], interior: &[i64]) -> V {
        if low.iter().chain(high).chain(interior).all(|&p| p == 0) {
            return a.clone();
        }
        let shape: Vec<usize> = (0..a.rank())
            .map(|i| {
                let n = a.shape[i] as i64;
                let inner = if n > 0 { n + (n - 1) * interior[i] } else { 0 };
                (inner + low[i] + high[i]).max(0) as usize
            })
            .collect();
        let out = ty(a.dtype, &shape);
        self.emit(
            format!(
                "stablehlo.pad {}, {}, low = {}, high = {}, interior = {} : ({}, {}) -> {out}",
                a.name,
                value.name,
                list(low),
                list(high),
                list(interior),
                a.ty(),
                value.ty()
            ),
            a.dtype,
            shape,
        )
    }

    /// `iota` along `dim` of a tensor of `shape`.
    pub fn iota(&mut self, dim: usize, dtype: DType, shape: &[usize]) -> V {
        let out = ty(dtype, shape);
        self.emit(format!("stablehlo.iota dim = {dim} : {out}"), dtype, shape.to_vec())
    }
}
