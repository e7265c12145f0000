//! Token sampling: greedy, or temperature with top-k and top-p, seeded.
//!
//! Order of operations (as llama.cpp's common sampler chain): top-k, then
//! temperature-scaled softmax, then top-p, then a draw from the seeded RNG.
//! Temperature 0 (or below) means greedy: the highest logit wins and ties go
//! to the lowest id.

use rand::Rng;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

/// How to pick the next token.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SamplingParams {
    /// Softmax temperature; `<= 0` means greedy.
    pub temperature: f32,
    /// Keep only the `top_k` most likely tokens (`0` = all).
    pub top_k: usize,
    /// Keep the smallest set whose probability reaches `top_p` (`1.0` = all).
    pub top_p: f32,
    /// Seed of the random generator.
    pub seed: u64,
}

impl SamplingParams {
    /// Greedy decoding.
    pub fn greedy() -> SamplingParams {
        SamplingParams {
            temperature: 0.0,
            top_k: 0,
            top_p: 1.0,
            seed: 0,
        }
    }
}

/// A stateful sampler (owns its RNG stream).
#[derive(Debug, Clone)]
pub struct Sampler {
    params: SamplingParams,
    rng: ChaCha8Rng,
    candidates: Vec<(u32, f32)>,
}

/// Index of the largest value, lowest index on ties. `None` if empty or all
/// values are NaN.
pub fn argmax(logits: &[f32]) -> Option<u32> {
    let mut best: Option<(usize, f32)> = None;
    for (i, &v) in logits.iter().enumerate() {
        if v.is_nan() {
            continue;
        }
        match best {
            Some((_, b)) if v <= b => {}
            _ => best = Some((i, v)),
        }
    }
    best.map(|(i, _)| i as u32)
}

impl Sampler {
    /// A sampler with its RNG seeded from `params.seed`.
    pub fn new(params: SamplingParams) -> Sampler {
        Sampler {
            params,
            rng: ChaCha8Rng::seed_from_u64(params.seed),
            candidates: Vec::new(),
        }
    }

    /// The parameters.
    pub fn params(&self) -> &SamplingParams {
        &self.params
    }

    /// Picks a token from `logits` (`[n_vocab]`). Returns `None` only when
    /// every logit is NaN or the vector is empty.
    pub fn sample(&mut self, logits: &[f32]) -> Option<u32> {
        let p = self.params;
        if p.temperature <= 0.0 {
            return argmax(logits);
        }
        let c = &mut self.candidates;
        c.clear();
        c.extend(
            logits
                .iter()
                .enumerate()
                .filter(|(_, v)| !v.is_nan())
                .map(|(i, &v)| (i as u32, v)),
        );
        if c.is_empty() {
            return None;
        }
        // Descending logit, ascending id on ties.
        let by_logit = |a: &(u32, f32), b: &(u32, f32)| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0));
        if p.top_k > 0 && p.top_k < c.len() {
            c.select_nth_unstable_by(p.top_k - 1, by_logit);
            c.truncate(p.top_k);
        }
        c.sort_unstable_by(by_logit);
        let max = c[0].1;
        let mut sum = 0.0f64;
        for e in c.iter_mut() {
            e.1 = ((e.1 - max) / p.temperature).exp();
            sum += e.1 as f64;
        }
        for e in c.iter_mut() {
            e.1 = (e.1 as f64 / sum) as f32;
        }
        if p.top_p < 1.0 {
            let mut acc = 0.0f32;
            let mut keep = c.len();
            for (i, e) in c.iter().enumerate() {
                acc += e.1;
                if acc >= p.top_p {
                    keep = i + 1;
                    break;
                }
            }
            c.truncate(keep.max(1));
        }
        let total: f32 = c.iter().map(|e| e.1).sum();
        let mut r = self.rng.gen::<f32>() * total;
        for e in c.iter() {
            if r < e.1 {
                return Some(e.0);
            }
            r -= e.1;
        }
        c.last().map(|e| e.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn greedy_picks_max_lowest_on_tie() {
        assert_eq!(argmax(&[1.0, 3.0, 3.0, 2.0]), Some(1));
        assert_eq!(argmax(&[f32::NAN, -1.0]), Some(1));
        assert_eq!(argmax(&[]), None);
        let mut s = Sampler::new(SamplingParams::greedy());
        assert_eq!(s.sample(&[0.0, 0.5, -2.0]), Some(1));
    }

    #[test]
    fn same_seed_same_draws() {
        let logits: Vec<f32> = (0..100).map(|i| ((i * 37 % 11) as f32) * 0.3).collect();
        let p = SamplingParams {
            temperature: 0.9,
            top_k: 40,
            top_p: 0.95,
            seed: 7,
        };
        let mut a = Sampler::new(p);
        let mut b = Sampler::new(p);
        let da: Vec<_> = (0..50).map(|_| a.sample(&logits)).collect();
        let db: Vec<_> = (0..50).map(|_| b.sample(&logits)).collect();
        assert_eq!(da, db);
        let mut c = Sampler::new(SamplingParams { seed: 8, ..p });
        let dc: Vec<_> = (0..50).map(|_| c.sample(&logits)).collect();
        assert_ne!(da, dc);
    }

    proptest! {
        #[test]
        fn top_k_one_is_greedy(logits in proptest::collection::vec(-50.0f32..50.0, 1..200), seed in any::<u64>()) {
            let mut s = Sampler::new(SamplingParams { temperature: 1.3, top_k: 1, top_p: 1.0, seed });
            prop_assert_eq!(s.sample(&logits), argmax(&logits));
        }

        #[test]
        fn sample_stays_in_top_k(logits in proptest::collection::vec(-50.0f32..50.0, 5..200), seed in any::<u64>()) {
            let mut s = Sampler::new(SamplingParams { temperature: 1.0, top_k: 3, top_p: 1.0, seed });
            let id = s.sample(&logits).unwrap() as usize;
            let greater = logits.iter().filter(|&&v| v > logits[id]).count();
            prop_assert!(greater < 3);
        }
    }
}
