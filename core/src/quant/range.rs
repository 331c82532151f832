//! How an activation's quantization range is chosen from what calibration observed: `minmax` (the observed
//! extremes), `percentile:P` (clip the `(100-P)/2`% tails on each side of the observed distribution) or `mse`
//! (the clipping range whose int8 quantization of the observed distribution has the least mean squared
//! error).

use std::fmt;

use crate::{Error, Result};

/// Bins of the histograms `percentile` and `mse` build.
pub const BINS: usize = 2048;

/// A range-selection method.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum RangeMethod {
    /// The observed minimum and maximum.
    MinMax,
    /// Keep `P` percent of the observed values, clipping the two tails equally.
    Percentile(f64),
    /// Minimise the quantization MSE over the observed histogram.
    Mse,
}

impl RangeMethod {
    /// Parses `minmax`, `percentile:P` (0 < P ≤ 100) or `mse`.
    pub fn parse(s: &str) -> Result<RangeMethod> {
        let bad = || Error::Unsupported(format!("calibration method '{s}': use `minmax`, `percentile:P` (e.g. percentile:99.99) or `mse`"));
        match s.trim() {
            "minmax" => Ok(RangeMethod::MinMax),
            "mse" => Ok(RangeMethod::Mse),
            other => {
                let p = other.strip_prefix("percentile:").ok_or_else(bad)?;
                let p: f64 = p.trim().parse().map_err(|_| bad())?;
                if !(p > 0.0 && p <= 100.0) {
                    return Err(bad());
                }
                Ok(RangeMethod::Percentile(p))
            }
        }
    }
    /// Whether the method needs a histogram (a second calibration pass).
    pub fn needs_histogram(self) -> bool {
        !matches!(self, RangeMethod::MinMax)
    }
}

impl fmt::Display for RangeMethod {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RangeMethod::MinMax => f.write_str("minmax"),
            RangeMethod::Percentile(p) => write!(f, "percentile:{p}"),
            RangeMethod::Mse => f.write_str("mse"),
        }
    }
}

/// What calibration saw of one value: its extremes and (for histogram methods) a histogram of [min, max].
#[derive(Clone, Debug)]
pub struct Observed {
    /// Smallest value seen.
    pub min: f32,
    /// Largest value seen.
    pub max: f32,
    /// Counts of [`BINS`] equal bins over [min, max] (empty for `minmax`).
    pub hist: Vec<u64>,
}

impl Default for Observed {
    fn default() -> Self {
        Observed { min: f32::INFINITY, max: f32::NEG_INFINITY, hist: Vec::new() }
    }
}

impl Observed {
    /// Widens the extremes with `data` (non-finite values are ignored).
    pub fn add_minmax(&mut self, data: &[f32]) {
        for &x in data {
            if x.is_finite() {
                self.min = self.min.min(x);
                self.max = self.max.max(x);
            }
        }
    }
    /// Adds `data` to the histogram over the (already final) [min, max].
    pub fn add_hist(&mut self, data: &[f32]) {
        if self.hist.is_empty() {
            self.hist = vec![0; BINS];
        }
        let (lo, hi) = (self.min as f64, self.max as f64);
        let w = (hi - lo) / BINS as f64;
        for &x in data {
            if !x.is_finite() {
                continue;
            }
            let b = if w > 0.0 { (((x as f64 - lo) / w) as usize).min(BINS - 1) } else { 0 };
            self.hist[b] += 1;
        }
    }
    /// Whether anything was seen.
    pub fn seen(&self) -> bool {
        self.min <= self.max
    }
    /// The range `method` picks.
    pub fn range(&self, method: RangeMethod) -> (f32, f32) {
        if !self.seen() {
            return (0.0, 0.0);
        }
        let total: u64 = self.hist.iter().sum();
        if total == 0 || self.max <= self.min {
            return (self.min, self.max);
        }
        match method {
            RangeMethod::MinMax => (self.min, self.max),
            RangeMethod::Percentile(p) => self.percentile_range(p, total),
            RangeMethod::Mse => self.mse_range(),
        }
    }

    fn bin_width(&self) -> f64 {
        (self.max as f64 - self.min as f64) / BINS as f64
    }

    fn percentile_range(&self, p: f64, total: u64) -> (f32, f32) {
        let tail = (100.0 - p) / 200.0 * total as f64;
        let w = self.bin_width();
        // Lower edge: the first bin where the cumulative count exceeds the tail.
        let mut acc = 0.0;
        let mut lo = self.min as f64;
        for (i, &c) in self.hist.iter().enumerate() {
            acc += c as f64;
            if acc > tail {
                lo = self.min as f64 + i as f64 * w;
                break;
            }
        }
        let mut acc = 0.0;
        let mut hi = self.max as f64;
        for (i, &c) in self.hist.iter().enumerate().rev() {
            acc += c as f64;
            if acc > tail {
                hi = self.min as f64 + (i + 1) as f64 * w;
                break;
            }
        }
        (lo.max(self.min as f64) as f32, hi.min(self.max as f64) as f32)
    }

    /// Quantization MSE of the histogram (bin centres) under int8 parameters for [lo, hi].
    pub fn quant_mse(&self, lo: f32, hi: f32) -> f64 {
        let (s, z) = super::params::asymmetric(lo, hi);
        let (s, z) = (s as f64, z as f64);
        let w = self.bin_width();
        let mut err = 0.0;
        for (i, &c) in self.hist.iter().enumerate() {
            if c == 0 {
                continue;
            }
            let x = self.min as f64 + (i as f64 + 0.5) * w;
            let q = ((x / s).round() + z).clamp(-128.0, 127.0);
            let d = (q - z) * s;
            err += c as f64 * (x - d) * (x - d);
        }
        err
    }

    fn mse_range(&self) -> (f32, f32) {
        // Shrink the observed range towards 0 by a common factor, then refine each end alone.
        let (mut lo, mut hi) = (self.min, self.max);
        let mut best = self.quant_mse(lo, hi);
        for k in 1..100 {
            let f = 1.0 - k as f32 / 100.0;
            let e = self.quant_mse(self.min * f, self.max * f);
            if e < best {
                best = e;
                lo = self.min * f;
                hi = self.max * f;
            }
        }
        let (base_lo, base_hi) = (lo, hi);
        for k in 1..50 {
            let f = 1.0 - k as f32 / 100.0;
            let e = self.quant_mse(base_lo * f, base_hi);
            if e < best {
                best = e;
                lo = base_lo * f;
                hi = base_hi;
            }
        }
        let base_lo = lo;
        for k in 1..50 {
            let f = 1.0 - k as f32 / 100.0;
            let e = self.quant_mse(base_lo, base_hi * f);
            if e < best {
                best = e;
                hi = base_hi * f;
            }
        }
        (lo, hi)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn observe(data: &[f32]) -> Observed {
        let mut o = Observed::default();
        o.add_minmax(data);
        o.add_hist(data);
        o
    }

    #[test]
    fn parse_methods() {
        assert_eq!(RangeMethod::parse("minmax").unwrap(), RangeMethod::MinMax);
        assert_eq!(RangeMethod::parse("percentile:99.9").unwrap(), RangeMethod::Percentile(99.9));
        assert!(RangeMethod::parse("percentile:0").is_err());
        assert!(RangeMethod::parse("kl").unwrap_err().to_string().contains("minmax"));
    }

    #[test]
    fn percentile_clips_outliers_and_mse_is_no_worse_than_minmax() {
        // 10,000 values in [-1, 1] and one outlier at 100.
        let mut d: Vec<f32> = (0..10_000).map(|i| (i as f32 / 5000.0) - 1.0).collect();
        d.push(100.0);
        let o = observe(&d);
        assert_eq!(o.range(RangeMethod::MinMax), (-1.0, 100.0));
        let (lo, hi) = o.range(RangeMethod::Percentile(99.9));
        assert!(lo < -0.9 && hi < 2.0 && hi > 0.9, "{lo} {hi}");
        let (lo, hi) = o.range(RangeMethod::Mse);
        assert!(o.quant_mse(lo, hi) <= o.quant_mse(-1.0, 100.0));
    }

    #[test]
    fn mse_clips_a_heavy_tail() {
        // Laplace-distributed values (inverse CDF on a regular grid): extremes near ±9.9, most mass near 0;
        // the quantization-MSE-optimal range clips the tails.
        let n = 20_000;
        let d: Vec<f32> = (0..n)
            .map(|i| {
                let u = (i as f64 + 0.5) / n as f64;
                (if u < 0.5 { (2.0 * u).ln() } else { -(2.0 * (1.0 - u)).ln() }) as f32
            })
            .collect();
        let o = observe(&d);
        let (lo, hi) = o.range(RangeMethod::Mse);
        assert!(hi < o.max && lo > o.min, "{lo} {hi} of {} {}", o.min, o.max);
        assert!(o.quant_mse(lo, hi) < o.quant_mse(o.min, o.max));
    }
}
