//! Choosing the next token from logits: greedy, or sampling after temperature, top-k and nucleus (top-p)
//! filtering, from a seeded generator so that a seed reproduces a run.

/// How the next token is chosen.
#[derive(Clone, Debug, PartialEq)]
pub struct Sampling {
    /// 0 (the default): greedy, the most likely token (the lowest id among equals). Above 0: logits are divided
    /// by it before the softmax (below 1 sharper, above 1 flatter).
    pub temperature: f32,
    /// Keep only the k most likely tokens (sampling only).
    pub top_k: Option<usize>,
    /// Keep the smallest set of most likely tokens whose probabilities reach p (sampling only).
    pub top_p: Option<f32>,
    /// Seed of the random generator (sampling only).
    pub seed: u64,
}

impl Default for Sampling {
    fn default() -> Sampling {
        Sampling { temperature: 0.0, top_k: None, top_p: None, seed: 0 }
    }
}

impl Sampling {
    /// Checks the values (a negative temperature, top-k 0, top-p outside (0, 1]).
    pub fn check(&self) -> Result<(), String> {
        if !(self.temperature >= 0.0 && self.temperature.is_finite()) {
            return Err(format!("temperature {} must be 0 (greedy) or positive", self.temperature));
        }
        if self.top_k == Some(0) {
            return Err("top-k must be at least 1".into());
        }
        if let Some(p) = self.top_p {
            if !(p > 0.0 && p <= 1.0) {
                return Err(format!("top-p {p} must be in (0, 1]"));
            }
        }
        Ok(())
    }

    /// Whether this picks the most likely token.
    pub fn is_greedy(&self) -> bool {
        self.temperature == 0.0
    }
}

/// A small, fast, seeded generator (PCG-XSH-RR 64/32): the same seed gives the same tokens on every machine.
#[derive(Clone, Debug)]
pub struct Rng {
    state: u64,
}

impl Rng {
    const MUL: u64 = 6364136223846793005;
    const INC: u64 = 1442695040888963407;

    /// A generator seeded with `seed`.
    pub fn new(seed: u64) -> Rng {
        let mut r = Rng { state: 0 };
        r.next_u32();
        r.state = r.state.wrapping_add(seed);
        r.next_u32();
        r
    }

    /// The next 32 random bits.
    pub fn next_u32(&mut self) -> u32 {
        let old = self.state;
        self.state = old.wrapping_mul(Self::MUL).wrapping_add(Self::INC);
        let xorshifted = (((old >> 18) ^ old) >> 27) as u32;
        xorshifted.rotate_right((old >> 59) as u32)
    }

    /// A uniform number in [0, 1).
    pub fn next_f64(&mut self) -> f64 {
        let hi = (self.next_u32() >> 5) as u64; // 27 bits
        let lo = (self.next_u32() >> 6) as u64; // 26 bits
        ((hi << 26) | lo) as f64 / (1u64 << 53) as f64
    }
}

/// Picks the next token from `logits` (one per vocabulary entry). NaN logits count as the least likely.
pub fn pick(logits: &[f32], s: &Sampling, rng: &mut Rng) -> usize {
    if s.is_greedy() || logits.len() <= 1 {
        return argmax(logits);
    }
    // candidates sorted by logit, most likely first (ties: lower id first)
    let mut idx: Vec<usize> = (0..logits.len()).filter(|&i| !logits[i].is_nan()).collect();
    if idx.is_empty() {
        return 0;
    }
    idx.sort_by(|&a, &b| logits[b].total_cmp(&logits[a]).then(a.cmp(&b)));
    if let Some(k) = s.top_k {
        idx.truncate(k.max(1));
    }
    let t = s.temperature as f64;
    let max = logits[idx[0]] as f64;
    let mut probs: Vec<f64> = idx.iter().map(|&i| ((logits[i] as f64 - max) / t).exp()).collect();
    let sum: f64 = probs.iter().sum();
    probs.iter_mut().for_each(|p| *p /= sum);
    if let Some(p) = s.top_p {
        let mut acc = 0.0;
        let mut keep = probs.len();
        for (k, q) in probs.iter().enumerate() {
            acc += q;
            if acc >= p as f64 {
                keep = k + 1;
                break;
            }
        }
        probs.truncate(keep);
        idx.truncate(keep);
        let sum: f64 = probs.iter().sum();
        probs.iter_mut().for_each(|p| *p /= sum);
    }
    let u = rng.next_f64();
    let mut acc = 0.0;
    for (k, q) in probs.iter().enumerate() {
        acc += q;
        if u < acc {
            return idx[k];
        }
    }
    idx[probs.len() - 1]
}

/// The index of the largest logit (the first among equals; NaN never wins).
pub fn argmax(logits: &[f32]) -> usize {
    let mut best = 0;
    let mut best_v = f32::NEG_INFINITY;
    for (i, &v) in logits.iter().enumerate() {
        if v > best_v {
            best = i;
            best_v = v;
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn greedy_takes_the_first_largest_and_skips_nan() {
        assert_eq!(argmax(&[0.5, 2.0, f32::NAN, 2.0]), 1);
        assert_eq!(pick(&[f32::NAN, -1.0, -3.0], &Sampling::default(), &mut Rng::new(1)), 1);
    }

    #[test]
    fn a_seed_reproduces_and_filters_hold() {
        let logits: Vec<f32> = (0..50).map(|i| ((i * 37) % 11) as f32 * 0.3).collect();
        let s = Sampling { temperature: 1.0, top_k: Some(5), top_p: None, seed: 7 };
        let run = |seed| {
            let mut r = Rng::new(seed);
            (0..200).map(|_| pick(&logits, &s, &mut r)).collect::<Vec<_>>()
        };
        assert_eq!(run(7), run(7));
        assert_ne!(run(7), run(8));
        // top-k 5: only the five largest logits are ever drawn (10 is the largest value: ids with (i*37)%11 == 10)
        let mut top: Vec<usize> = (0..50).collect();
        top.sort_by(|&a, &b| logits[b].total_cmp(&logits[a]).then(a.cmp(&b)));
        let allowed = &top[..5];
        assert!(run(3).iter().all(|t| allowed.contains(t)));
        // top-p tiny: only the most likely token
        let s = Sampling { temperature: 1.0, top_k: None, top_p: Some(1e-6), seed: 0 };
        let mut r = Rng::new(0);
        assert!((0..50).all(|_| pick(&logits, &s, &mut r) == top[0]));
    }

    #[test]
    fn sampling_follows_the_softmax() {
        // two tokens with logits ln 3 and 0: probabilities 3/4 and 1/4
        let logits = [3f32.ln(), 0.0];
        let s = Sampling { temperature: 1.0, ..Sampling::default() };
        let mut r = Rng::new(42);
        let n = 20000;
        let zeros = (0..n).filter(|_| pick(&logits, &s, &mut r) == 0).count();
        let f = zeros as f64 / n as f64;
        assert!((f - 0.75).abs() < 0.015, "{f}");
    }

    #[test]
    fn checks_values() {
        assert!(Sampling { temperature: -1.0, ..Sampling::default() }.check().is_err());
        assert!(Sampling { top_k: Some(0), ..Sampling::default() }.check().is_err());
        assert!(Sampling { top_p: Some(1.5), ..Sampling::default() }.check().is_err());
        assert!(Sampling { temperature: 0.8, top_k: Some(40), top_p: Some(0.9), seed: 1 }.check().is_ok());
    }
}
