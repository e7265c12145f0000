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
//! No step sorts the vocabulary (`keep` has the diagram). Top-k is one
//! pass with a small buffer; the softmax (max, exp, an f64 sum) and min-p
//! (`p ≥ min_p · p_max`) are linear passes, and without top-k the
//! exponentials run on fak-kernels' SIMD `exp` (bit-identical to glibc's
//! `expf`); top-p sorts only the nucleus, collected in bands of falling
//! weight; the draw walks the kept tokens in a fixed order (ascending id,
//! or the nucleus's). The kept set and its probabilities are those of
//! sorting everything by descending logit, ties by ascending id (the unit
//! tests hold them to [`reference::full_sort`], the old sampler, kept
//! for them and as `fak bench sampling`'s baseline).
//!
//! [`SamplingParams::validate`] is the one place where settings from a
//! flag or a request are checked.

mod keep;
pub mod reference;

use rand::Rng;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use keep::{walk, walk_dense, Buffers, Kept};

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
    buffers: Buffers,
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
            buffers: Buffers::default(),
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
    ///
    /// Costs O(n_vocab) plus, with top-p, sorting the nucleus (and the
    /// candidates above its last threshold); no step sorts the vocabulary.
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
        let u = match self.buffers.keep(logits, &p) {
            Kept::Nothing => return None,
            Kept::Dense { sum } => {
                let r = self.rng.gen::<f32>() * sum as f32;
                return walk_dense(&self.buffers.weights, r);
            }
            Kept::Listed { total } => self.rng.gen::<f32>() * total,
        };
        walk(&self.buffers.candidates, u)
    }
}

#[cfg(test)]
mod tests;
