//! The candidates a temperature draw keeps (top-k → softmax → top-p →
//! min-p) and the inverse-CDF walk over them, without sorting the
//! vocabulary.
//!
//! ```text
//!   top-k > 0 ─► top_k: one pass, a buffer of ≤ max(2k, 256) cut back by
//!   │             select_nth ─► k Candidates ─► softmax (expf) ─► list path
//!   │
//!   no top-k ─► dense: max (8 lanes) ─► w[i] = e^((l_i − max)/T) for every
//!               token (fak_kernels' exp, SIMD; NaN → 0) ─► f64 sum (8 lanes)
//!      ├─ top-p: bands w ∈ [1/16^(r+1), 1/16^r) collected, sorted, summed
//!      │         until the mass reaches top_p ─► min-p over those ─► List
//!      ├─ min-p: one pass, p_i = (w_i/sum) as f32 ≥ min_p · p_max ─► List
//!      └─ neither: every token ─► Dense (walk the weights)
//! ```
//!
//! A probability is `(w / sum) as f32` with `w = expf((logit − max) / T)`
//! (`w = 1` for the logits equal to the maximum, so an infinite maximum
//! stays finite: +inf logits share the mass, all -inf is uniform) and
//! `sum` their `f64` sum: what the full sort computed, except the order of
//! that sum. Every step relies on `w` never decreasing as the logit grows
//! (`expf` is monotone): the tokens above a weight are exactly the first
//! ones in [`by_logit`] order.

use std::cmp::Ordering;

use fak_kernels::expf::expf;

use super::SamplingParams;

/// A token still in the running: its logit, and its probability once the
/// softmax ran.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Candidate {
    pub(super) id: u32,
    pub(super) logit: f32,
    pub(super) prob: f32,
}

/// The sampling order: descending logit, ascending id on ties (probability
/// never increases along it, so it is also the order of the nucleus).
pub(super) fn by_logit(a: &Candidate, b: &Candidate) -> Ordering {
    b.logit.total_cmp(&a.logit).then(a.id.cmp(&b.id))
}

/// Top-p's first weight threshold is `1 / NUCLEUS_STEP` (the largest
/// weight is 1), and each round divides it by as much again.
const NUCLEUS_STEP: f32 = 16.0;

/// Below this threshold top-p's last round takes every weight above 0 (at
/// most 11 rounds).
const NUCLEUS_LOWEST: f32 = 1.0 / (1u64 << 40) as f32;

/// Top-k's buffer holds at least this many candidates before it is cut
/// back to `k`.
const TOP_K_BUFFER: usize = 256;

/// What [`Buffers::keep`] kept.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Kept {
    /// Nothing (every logit NaN, or none).
    Nothing,
    /// Every non-NaN token, token `i` with probability
    /// `weights[i] / sum` (NaN tokens have weight 0).
    Dense { sum: f64 },
    /// The tokens in `candidates`, with their probabilities, which add up
    /// to `total`.
    Listed { total: f32 },
}

/// The sampler's scratch space.
#[derive(Debug, Clone, Default)]
pub(super) struct Buffers {
    pub(super) candidates: Vec<Candidate>,
    /// `[n_vocab]` weights, on the path without top-k.
    pub(super) weights: Vec<f32>,
}

impl Buffers {
    /// The tokens `p` keeps from `logits` (see the module docs).
    /// `p.temperature` must be above 0.
    pub(super) fn keep(&mut self, logits: &[f32], p: &SamplingParams) -> Kept {
        let c = &mut self.candidates;
        c.clear();
        if p.top_k > 0 && p.top_k < logits.len() {
            top_k(c, logits, p.top_k);
            let max = c.iter().fold(f32::NEG_INFINITY, |m, e| m.max(e.logit));
            let mut sum = 0.0f64;
            for e in c.iter_mut() {
                e.prob = weight(e.logit, max, p.temperature);
                sum += f64::from(e.prob);
            }
            if c.is_empty() {
                return Kept::Nothing;
            }
            for e in c.iter_mut() {
                e.prob = (f64::from(e.prob) / sum) as f32;
            }
            let p_max = (1.0 / sum) as f32;
            if p.top_p < 1.0 {
                nucleus(c, p.top_p);
            }
            return min_p(c, p_max, p.min_p);
        }
        let w = &mut self.weights;
        let max = max_of(logits);
        w.clear();
        w.extend(logits.iter().map(|&l| scaled(l, max, p.temperature)));
        fak_kernels::ops::exp_in_place(w);
        let sum = sum_of(w);
        // Every non-NaN token at the maximum weighs 1.
        if sum.is_nan() || sum <= 0.0 {
            return Kept::Nothing;
        }
        let p_max = (1.0 / sum) as f32;
        if p.top_p < 1.0 && nucleus_dense(c, logits, w, sum, p.top_p) {
            return min_p(c, p_max, p.min_p);
        }
        let floor = if p.min_p > 0.0 { p_max * p.min_p } else { 0.0 };
        if floor > p_max {
            // Min-p above 1: only the most likely token.
            c.extend(
                logits
                    .iter()
                    .enumerate()
                    .filter(|(_, l)| !l.is_nan())
                    .map(|(i, &logit)| Candidate {
                        id: i as u32,
                        logit,
                        prob: p_max,
                    })
                    .min_by(by_logit),
            );
            return Kept::Listed { total: p_max };
        }
        if floor > 0.0 {
            // No probability below `floor · (1 − 1e-6)` before its f32
            // rounding reaches `floor` after it: skip those unrounded.
            let lo = f64::from(floor) * sum * (1.0 - 1e-6);
            let mut total = 0.0f32;
            for (i, &wi) in w.iter().enumerate() {
                if f64::from(wi) >= lo {
                    let prob = (f64::from(wi) / sum) as f32;
                    if prob >= floor {
                        total += prob;
                        c.push(Candidate {
                            id: i as u32,
                            logit: logits[i],
                            prob,
                        });
                    }
                }
            }
            return Kept::Listed { total };
        }
        Kept::Dense { sum }
    }
}

/// `(logit − max) / T`, 0 at the maximum (see the module docs), `-inf`
/// for a NaN logit or a NaN quotient (`-inf / inf`), so that its weight
/// is 0.
fn scaled(logit: f32, max: f32, temperature: f32) -> f32 {
    if logit == max {
        return 0.0;
    }
    let x = (logit - max) / temperature;
    if x.is_nan() {
        f32::NEG_INFINITY
    } else {
        x
    }
}

/// `e^scaled` (1 at the maximum).
fn weight(logit: f32, max: f32, temperature: f32) -> f32 {
    expf(scaled(logit, max, temperature))
}

/// The largest non-NaN value (`-inf` if none), in 8 lanes.
fn max_of(x: &[f32]) -> f32 {
    let pick = |m: f32, v: f32| if v > m { v } else { m };
    let mut lanes = [f32::NEG_INFINITY; 8];
    let mut chunks = x.chunks_exact(8);
    for ch in &mut chunks {
        for (m, &v) in lanes.iter_mut().zip(ch) {
            *m = pick(*m, v);
        }
    }
    let tail = chunks
        .remainder()
        .iter()
        .fold(f32::NEG_INFINITY, |m, &v| pick(m, v));
    lanes.iter().fold(tail, |m, &v| pick(m, v))
}

/// `Σ x` in `f64`, in 8 interleaved lanes (a fixed order).
fn sum_of(x: &[f32]) -> f64 {
    let mut lanes = [0.0f64; 8];
    let mut chunks = x.chunks_exact(8);
    for ch in &mut chunks {
        for (s, &v) in lanes.iter_mut().zip(ch) {
            *s += f64::from(v);
        }
    }
    let tail: f64 = chunks.remainder().iter().map(|&v| f64::from(v)).sum();
    ((lanes[0] + lanes[4]) + (lanes[1] + lanes[5]))
        + ((lanes[2] + lanes[6]) + (lanes[3] + lanes[7]))
        + tail
}

/// Min-p over the listed candidates `c`: keeps those at or above
/// `p_max · min_p` (the most likely one always passes unless `min_p > 1`,
/// when only it stays).
fn min_p(c: &mut Vec<Candidate>, p_max: f32, min_p: f32) -> Kept {
    if min_p > 0.0 {
        let floor = p_max * min_p;
        if floor > p_max {
            let best = c.iter().copied().min_by(by_logit);
            c.clear();
            c.extend(best);
        } else {
            c.retain(|e| e.prob >= floor);
        }
    }
    Kept::Listed {
        total: c.iter().map(|e| e.prob).sum(),
    }
}

/// Top-k in one pass over `logits`: fills `c` with the `k` first non-NaN
/// candidates in [`by_logit`] order (`1 <= k`), in no particular order.
///
/// The buffer takes candidates until it holds `max(2k, TOP_K_BUFFER)`,
/// then a selection cuts it back to the best `k`; from then on only a
/// logit above the `k`-th kept one can enter (an equal one comes later,
/// so its id is higher and it ranks below).
fn top_k(c: &mut Vec<Candidate>, logits: &[f32], k: usize) {
    let cap = (2 * k).max(TOP_K_BUFFER);
    let mut floor: Option<f32> = None;
    for (i, &logit) in logits.iter().enumerate() {
        if logit.is_nan() || floor.is_some_and(|f| logit.total_cmp(&f) != Ordering::Greater) {
            continue;
        }
        c.push(Candidate {
            id: i as u32,
            logit,
            prob: 0.0,
        });
        if c.len() == cap {
            c.select_nth_unstable_by(k - 1, by_logit);
            c.truncate(k);
            floor = Some(c[k - 1].logit);
        }
    }
    if c.len() > k {
        c.select_nth_unstable_by(k - 1, by_logit);
        c.truncate(k);
    }
}

/// Adds the probabilities of `c[from..to]` (sorted) onto `acc` in f32;
/// at the first that brings it to `top_p`, truncates `c` after it and
/// says so.
fn reach(c: &mut Vec<Candidate>, from: usize, to: usize, acc: &mut f32, top_p: f32) -> bool {
    for i in from..to {
        *acc += c[i].prob;
        if *acc >= top_p {
            c.truncate(i + 1);
            return true;
        }
    }
    false
}

/// Top-p over the listed candidates `c` (with their probabilities):
/// truncates `c` to its first candidates in [`by_logit`] order whose
/// probabilities, summed in that order in f32, reach `top_p` (all of them
/// if the sum never does).
///
/// Sorts only the head it keeps: each round moves the rest's candidates
/// with a probability of at least a threshold to the front of the rest
/// (they are the next ones in order), sorts them and adds them up; the
/// threshold starts at `p_max / NUCLEUS_STEP` and shrinks by that step;
/// the last round takes every candidate above 0 (the rest are 0, so the
/// sum would never grow).
fn nucleus(c: &mut Vec<Candidate>, top_p: f32) {
    let n = c.len();
    let p_max = c.iter().fold(0.0f32, |m, e| m.max(e.prob));
    let mut acc = 0.0f32;
    let mut sorted = 0;
    let mut t = p_max / NUCLEUS_STEP;
    loop {
        // A NaN threshold (NaN probabilities) ends it too.
        let last = t.is_nan() || t < NUCLEUS_LOWEST * p_max;
        let mut head = sorted;
        for j in sorted..n {
            let prob = c[j].prob;
            if if last { prob > 0.0 } else { prob >= t } {
                c.swap(head, j);
                head += 1;
            }
        }
        c[sorted..head].sort_unstable_by(by_logit);
        if reach(c, sorted, head, &mut acc, top_p) || last || head == n {
            return;
        }
        sorted = head;
        t /= NUCLEUS_STEP;
    }
}

/// Top-p without top-k, on the dense weights `w` (`sum`: their sum): fills
/// `c` with the nucleus, sorted, and returns true; returns false (and
/// leaves `c` empty) when the mass never reaches `top_p`, so every token
/// stays. Each round collects one band of weights, `[t, previous t)`,
/// starting with `[1/16, 1]`; the last round takes every weight above 0
/// below the previous band.
fn nucleus_dense(c: &mut Vec<Candidate>, logits: &[f32], w: &[f32], sum: f64, top_p: f32) -> bool {
    let mut acc = 0.0f32;
    let mut hi = f32::INFINITY;
    let mut t = 1.0 / NUCLEUS_STEP;
    loop {
        let last = t < NUCLEUS_LOWEST;
        let lo = if last { f32::from_bits(1) } else { t };
        let from = c.len();
        for (i, &wi) in w.iter().enumerate() {
            if wi >= lo && wi < hi {
                c.push(Candidate {
                    id: i as u32,
                    logit: logits[i],
                    prob: (f64::from(wi) / sum) as f32,
                });
            }
        }
        c[from..].sort_unstable_by(by_logit);
        if reach(c, from, c.len(), &mut acc, top_p) {
            return true;
        }
        if last {
            c.clear();
            return false;
        }
        hi = t;
        t /= NUCLEUS_STEP;
    }
}

/// The inverse-CDF walk over `c` at `r` (in `0..sum of c's probs`): the
/// first candidate whose cumulative probability passes `r`. When rounding
/// leaves `r` past the end, the last candidate with a positive probability
/// (never one at 0, such as a token a grammar masked to -inf); the first
/// candidate if none is positive; `None` if `c` is empty.
pub(super) fn walk(c: &[Candidate], mut r: f32) -> Option<u32> {
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

/// [`walk`] over dense weights (`r` in `0..Σ w`); tokens of weight 0 (NaN,
/// -inf, underflow) are never drawn.
pub(super) fn walk_dense(w: &[f32], mut r: f32) -> Option<u32> {
    let mut last = None;
    for (i, &wi) in w.iter().enumerate() {
        if wi > 0.0 {
            if r < wi {
                return Some(i as u32);
            }
            r -= wi;
            last = Some(i as u32);
        }
    }
    last
}
