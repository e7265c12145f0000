//! Token sampling: greedy, or temperature with top-k, top-p and min-p,
//! seeded; presence and frequency penalties.
//!
//! Order of operations (as llama.cpp's common sampler chain): penalties on
//! the raw logits, then top-k, then temperature-scaled softmax, then top-p,
//! then min-p, then a draw from the seeded RNG. Temperature 0 means greedy
//! (after penalties): the highest logit wins and ties go to the lowest id.
//!
//! ```text
//!   logits ─► − presence·[seen] − frequency·count ─► top-k ─► softmax(/T)
//!          ─► top-p ─► min-p (p ≥ min_p · p_max) ─► draw (ChaCha8, seeded)
//! ```
//!
//! [`SamplingParams::validate`] is the one place where settings from a
//! flag or a request are checked.

use rand::Rng;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

/// Whether the engine reports log-probabilities.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Logprobs {
    /// No log-probabilities.
    #[default]
    Off,
    /// The chosen token's log-probability and the `n` most likely
    /// alternatives (`0..=20`).
    Top(usize),
}

/// Most alternatives [`Logprobs::Top`] may ask for (as OpenAI's API).
pub const MAX_TOP_LOGPROBS: usize = 20;

/// How to pick the next token.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SamplingParams {
    /// Softmax temperature; `<= 0` means greedy.
    pub temperature: f32,
    /// Keep only the `top_k` most likely tokens (`0` = all).
    pub top_k: usize,
    /// Keep the smallest set whose probability reaches `top_p` (`1.0` = all).
    pub top_p: f32,
    /// Keep tokens whose probability is at least `min_p` times the most
    /// likely one's (`0.0` = all).
    pub min_p: f32,
    /// Subtracted once from the logit of every token generated so far
    /// (OpenAI's `presence_penalty`, `-2..=2`).
    pub presence_penalty: f32,
    /// Subtracted from a token's logit once per time it was generated
    /// (OpenAI's `frequency_penalty`, `-2..=2`).
    pub frequency_penalty: f32,
    /// Seed of the random generator.
    pub seed: u64,
}

impl Default for SamplingParams {
    fn default() -> SamplingParams {
        SamplingParams::greedy()
    }
}

/// A sampling setting outside its range.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{name} must be {range}, got {value}")]
pub struct BadSampling {
    /// The setting (`temperature`, `top_p`, ...).
    pub name: &'static str,
    /// What it must be.
    pub range: &'static str,
    /// What it was.
    pub value: f64,
}

impl SamplingParams {
    /// Greedy decoding.
    pub fn greedy() -> SamplingParams {
        SamplingParams {
            temperature: 0.0,
            top_k: 0,
            top_p: 1.0,
            min_p: 0.0,
            presence_penalty: 0.0,
            frequency_penalty: 0.0,
            seed: 0,
        }
    }

    /// Checks every setting's range (NaN is never valid): temperature
    /// `0..=100`, top-p `(0, 1]`, min-p `0..=1`, penalties `-2..=2`.
    ///
    /// # Errors
    ///
    /// [`BadSampling`] naming the first setting out of range.
    pub fn validate(&self) -> Result<(), BadSampling> {
        let checks: [(&'static str, f32, &'static str, bool); 5] = [
            (
                "temperature",
                self.temperature,
                "within 0..=100",
                (0.0..=100.0).contains(&self.temperature),
            ),
            (
                "top_p",
                self.top_p,
                "within (0, 1]",
                self.top_p > 0.0 && self.top_p <= 1.0,
            ),
            (
                "min_p",
                self.min_p,
                "within 0..=1",
                (0.0..=1.0).contains(&self.min_p),
            ),
            (
                "presence_penalty",
                self.presence_penalty,
                "within -2..=2",
                (-2.0..=2.0).contains(&self.presence_penalty),
            ),
            (
                "frequency_penalty",
                self.frequency_penalty,
                "within -2..=2",
                (-2.0..=2.0).contains(&self.frequency_penalty),
            ),
        ];
        for (name, value, range, ok) in checks {
            if !ok {
                return Err(BadSampling {
                    name,
                    range,
                    value: f64::from(value),
                });
            }
        }
        Ok(())
    }

    /// Whether any penalty is set.
    fn penalized(&self) -> bool {
        self.presence_penalty != 0.0 || self.frequency_penalty != 0.0
    }
}

/// A stateful sampler (owns its RNG stream).
#[derive(Debug, Clone)]
pub struct Sampler {
    params: SamplingParams,
    rng: ChaCha8Rng,
    candidates: Vec<(u32, f32)>,
    /// Times each token was generated (for the penalties), sorted by id.
    counts: Vec<(u32, u32)>,
    /// Penalized copy of the logits.
    adjusted: Vec<f32>,
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
            counts: Vec::new(),
            adjusted: Vec::new(),
        }
    }

    /// Records a generated token for the presence and frequency
    /// penalties (call once per token the request outputs).
    pub fn accept(&mut self, token: u32) {
        if !self.params.penalized() {
            return;
        }
        match self.counts.binary_search_by_key(&token, |c| c.0) {
            Ok(i) => self.counts[i].1 += 1,
            Err(i) => self.counts.insert(i, (token, 1)),
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
        let logits = if p.penalized() && !self.counts.is_empty() {
            self.adjusted.clear();
            self.adjusted.extend_from_slice(logits);
            for &(t, n) in &self.counts {
                if let Some(v) = self.adjusted.get_mut(t as usize) {
                    *v -= p.presence_penalty + p.frequency_penalty * n as f32;
                }
            }
            &self.adjusted[..]
        } else {
            logits
        };
        if p.temperature <= 0.0 || p.temperature.is_nan() {
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
        if p.min_p > 0.0 {
            // Sorted descending, so c[0] is the most likely.
            let floor = c[0].1 * p.min_p;
            let keep = c.iter().take_while(|e| e.1 >= floor).count();
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
            ..SamplingParams::greedy()
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

    #[test]
    fn validate_rejects_out_of_range_and_nan() {
        let g = SamplingParams::greedy();
        assert!(g.validate().is_ok());
        for bad in [
            SamplingParams {
                temperature: f32::NAN,
                ..g
            },
            SamplingParams {
                temperature: -1.0,
                ..g
            },
            SamplingParams { top_p: 1.5, ..g },
            SamplingParams { top_p: 0.0, ..g },
            SamplingParams { min_p: -0.1, ..g },
            SamplingParams {
                presence_penalty: 3.0,
                ..g
            },
            SamplingParams {
                frequency_penalty: f32::NAN,
                ..g
            },
        ] {
            assert!(bad.validate().is_err(), "{bad:?}");
        }
        let e = SamplingParams { top_p: 2.0, ..g }.validate().unwrap_err();
        assert_eq!(e.to_string(), "top_p must be within (0, 1], got 2");
    }

    #[test]
    fn penalties_change_greedy_choice() {
        let logits = [1.0, 0.9, 0.1];
        let mut s = Sampler::new(SamplingParams {
            presence_penalty: 0.5,
            ..SamplingParams::greedy()
        });
        assert_eq!(s.sample(&logits), Some(0));
        s.accept(0);
        assert_eq!(s.sample(&logits), Some(1));
        let mut f = Sampler::new(SamplingParams {
            frequency_penalty: 0.06,
            ..SamplingParams::greedy()
        });
        f.accept(0);
        assert_eq!(f.sample(&logits), Some(0), "one use: 1.0 - 0.06 > 0.9");
        f.accept(0);
        assert_eq!(f.sample(&logits), Some(1), "two uses: 1.0 - 0.12 < 0.9");
    }

    #[test]
    fn min_p_drops_unlikely_tokens() {
        // p ∝ e^0, e^-10: the second is far below 0.5 · p_max.
        let logits = [0.0, -10.0];
        for seed in 0..50 {
            let mut s = Sampler::new(SamplingParams {
                temperature: 1.0,
                min_p: 0.5,
                seed,
                ..SamplingParams::greedy()
            });
            assert_eq!(s.sample(&logits), Some(0));
        }
    }

    proptest! {
        #[test]
        fn top_k_one_is_greedy(logits in proptest::collection::vec(-50.0f32..50.0, 1..200), seed in any::<u64>()) {
            let mut s = Sampler::new(SamplingParams { temperature: 1.3, top_k: 1, seed, ..SamplingParams::greedy() });
            prop_assert_eq!(s.sample(&logits), argmax(&logits));
        }

        #[test]
        fn sample_stays_in_top_k(logits in proptest::collection::vec(-50.0f32..50.0, 5..200), seed in any::<u64>()) {
            let mut s = Sampler::new(SamplingParams { temperature: 1.0, top_k: 3, seed, ..SamplingParams::greedy() });
            let id = s.sample(&logits).unwrap() as usize;
            let greater = logits.iter().filter(|&&v| v > logits[id]).count();
            prop_assert!(greater < 3);
        }
    }
}
