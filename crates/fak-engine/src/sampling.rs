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
//! No step sorts the vocabulary. Top-k is a selection (`select_nth`); the
//! softmax (max, exp, an f64 sum) and min-p (`p ≥ min_p · p_max`) are
//! linear passes; top-p selects and sorts only a growing head of the
//! candidates until its mass reaches `top_p`; the draw walks the kept
//! candidates in a fixed but unspecified order. The kept set and its
//! probabilities are those of sorting everything by descending logit,
//! ties by ascending id (the unit tests hold them to such a reference).
//!
//! [`SamplingParams::validate`] is the one place where settings from a
//! flag or a request are checked.

use std::cmp::Ordering;

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
    candidates: Vec<Candidate>,
    /// Times each token was generated (for the penalties), sorted by id.
    counts: Vec<(u32, u32)>,
    /// Penalized copy of the logits.
    adjusted: Vec<f32>,
}

/// A token still in the running: its logit, and its probability once the
/// softmax ran.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Candidate {
    id: u32,
    logit: f32,
    prob: f32,
}

/// The sampling order: descending logit, ascending id on ties (probability
/// never increases along it, so it is also the order of the nucleus).
fn by_logit(a: &Candidate, b: &Candidate) -> Ordering {
    b.logit.total_cmp(&a.logit).then(a.id.cmp(&b.id))
}

/// How many of the most likely candidates top-p sorts first; it sorts
/// four times as many each round until their mass reaches `top_p`.
const NUCLEUS_FIRST: usize = 64;

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

/// Fills `c` with the candidates `p` keeps from `logits` and their
/// probabilities (before the renormalisation the draw implies); leaves it
/// empty when every logit is NaN or there are none. `p.temperature` must
/// be above 0.
///
/// No step sorts the vocabulary: top-k is a selection, the softmax and
/// min-p are linear passes, and top-p sorts only the head it keeps (see
/// [`nucleus`]). The order of `c` afterwards is deterministic but
/// otherwise unspecified.
fn keep(c: &mut Vec<Candidate>, logits: &[f32], p: &SamplingParams) {
    c.clear();
    c.extend(
        logits
            .iter()
            .enumerate()
            .filter(|(_, v)| !v.is_nan())
            .map(|(i, &logit)| Candidate {
                id: i as u32,
                logit,
                prob: 0.0,
            }),
    );
    if p.top_k > 0 && p.top_k < c.len() {
        c.select_nth_unstable_by(p.top_k - 1, by_logit);
        c.truncate(p.top_k);
    }
    let Some(best) = c.iter().copied().min_by(by_logit) else {
        return;
    };
    let max = best.logit;
    let mut sum = 0.0f64;
    for e in c.iter_mut() {
        // The tokens at the maximum get e^0 = 1 by definition, which also
        // keeps an infinite maximum finite: +inf logits share the mass,
        // all -inf is uniform.
        e.prob = if e.logit == max {
            1.0
        } else {
            ((e.logit - max) / p.temperature).exp()
        };
        sum += f64::from(e.prob);
    }
    for e in c.iter_mut() {
        e.prob = (f64::from(e.prob) / sum) as f32;
    }
    let p_max = (1.0 / sum) as f32;
    if p.top_p < 1.0 {
        nucleus(c, p.top_p);
    }
    if p.min_p > 0.0 {
        let floor = p_max * p.min_p;
        if c.iter().any(|e| e.prob >= floor) {
            c.retain(|e| e.prob >= floor);
        } else {
            // Only a min-p above 1 gets here; the most likely token stays.
            c.clear();
            c.push(Candidate { prob: p_max, ..best });
        }
    }
}

/// Top-p: truncates `c` to its first candidates in [`by_logit`] order whose
/// probabilities, summed in that order in f32, reach `top_p` (all of them
/// if the sum never does), leaving them sorted.
///
/// Sorts only a growing head: select the best [`NUCLEUS_FIRST`], sort
/// them, add them up; if the sum falls short, select and sort the next
/// ones up to four times the head, and so on. A head whose last
/// probability is 0 ends the search (the rest are 0 too, so the sum never
/// grows and everything stays).
fn nucleus(c: &mut Vec<Candidate>, top_p: f32) {
    let n = c.len();
    let mut acc = 0.0f32;
    let mut sorted = 0;
    let mut head = NUCLEUS_FIRST.min(n);
    while sorted < n {
        let rest = &mut c[sorted..];
        let take = head - sorted;
        if take < rest.len() {
            rest.select_nth_unstable_by(take - 1, by_logit);
        }
        rest[..take].sort_unstable_by(by_logit);
        for i in sorted..head {
            acc += c[i].prob;
            if acc >= top_p {
                c.truncate(i + 1);
                return;
            }
        }
        if c[head - 1].prob == 0.0 {
            return;
        }
        sorted = head;
        head = head.saturating_mul(4).min(n);
    }
}

/// The inverse-CDF walk over `c` at `r` (in `0..sum of c's probs`): the
/// first candidate whose cumulative probability passes `r`. When rounding
/// leaves `r` past the end, the last candidate with a positive probability
/// (never one at 0, such as a token a grammar masked to -inf); the first
/// candidate if none is positive; `None` if `c` is empty.
fn walk(c: &[Candidate], mut r: f32) -> Option<u32> {
    let mut last = None;
    for e in c {
        if e.prob > 0.0 {
            if r < e.prob {
                return Some(e.id);
            }
            r -= e.prob;
            last = Some(e.id);
        }
    }
    last.or_else(|| c.first().map(|e| e.id))
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
    ///
    /// Costs O(n_vocab) plus, with top-p, sorting the nucleus (and at most
    /// four times as many candidates); no step sorts the vocabulary.
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
        keep(&mut self.candidates, logits, &p);
        let c = &self.candidates;
        if c.is_empty() {
            return None;
        }
        let total: f32 = c.iter().map(|e| e.prob).sum();
        walk(c, self.rng.gen::<f32>() * total)
    }
}

#[cfg(test)]
mod tests;
