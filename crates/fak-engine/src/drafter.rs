//! A draft model: a second, smaller GGUF of the same vocabulary proposes
//! the next few tokens of a sequence, and the target verifies them in one
//! pass (`engine/step.rs`). A draft only proposes, so it changes how fast
//! the output comes, never what it is.
//!
//! The draft model keeps its own paged KV: one *mirror* sequence per
//! running request, holding a prefix of what the target's sequence holds.
//! Mirrors are never kept in step by hand through forks, evictions,
//! truncation or rejected drafts: before each draft, a mirror is cut back
//! to the longest prefix it shares with the target's tokens and fed the
//! rest, which covers all of those at once.
//!
//! ```text
//!   target   [ prompt ............ generated ][unfed]
//!   mirror   [ prompt ............ gen ][x y]           x y: an old, rejected draft
//!            └──── common prefix ─────┘  cut here, feed the rest (round 0)
//!   round 0: all mirrors' catch-up tokens in one ragged pass → d1 per sequence
//!   round r: each still-drafting mirror feeds its last draft token → d(r+1)
//!            a sequence stops at its length, or when its draft's top
//!            probability falls below `p_min`
//! ```
//!
//! A new mirror starts from the draft cache's longest cached prefix (per
//! tenant), and a finished request's mirror is published before it is
//! freed, so a fleet's shared prompt and a session's earlier turns are
//! computed once by the draft model too. If the draft pool runs out, every
//! mirror is dropped and the step goes on without model drafts.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use fak_kv::Tenant;
use fak_model::{LogitsWanted, Model, SeqId};
use fak_tokenizer::Tokenizer;

use crate::error::EngineError;
use crate::paged::PagedKvConfig;
use crate::seqs::{Append, PrefixCache, Sequences};

/// How a draft model drafts.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DraftParams {
    /// Most tokens drafted per sequence per step.
    pub max_draft: usize,
    /// A sequence stops drafting at a token whose probability under the
    /// draft model is below this (the token is not drafted).
    pub p_min: f32,
}

impl Default for DraftParams {
    fn default() -> DraftParams {
        DraftParams {
            max_draft: crate::spec::PASS_TILE - 1,
            p_min: 0.6,
        }
    }
}

/// One sequence to draft for.
pub(crate) struct DraftJob<'a> {
    /// The engine's slot and generation of the request (a mirror's key).
    pub slot: u32,
    pub generation: u32,
    pub tenant: Tenant,
    /// The target sequence's tokens, then its unfed token.
    pub context: &'a [u32],
    pub unfed: u32,
    /// Most tokens to draft.
    pub max: usize,
    /// The draft, filled in.
    pub out: Vec<u32>,
}

struct Mirror {
    generation: u32,
    seq: SeqId,
}

/// Seconds of draft-model work per token it drafted, an exponentially
/// weighted ratio over recent steps: what drafting one more token costs,
/// every pass included (catch-up, and the last pass of a sequence that
/// stops on an unsure token and drafts nothing from it).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct DraftCost {
    secs: f64,
    tokens: f64,
}

impl DraftCost {
    fn observe(&mut self, secs: f64, tokens: usize) {
        let d = 0.9;
        self.secs = self.secs * d + secs;
        self.tokens = self.tokens * d + tokens as f64;
    }

    /// Seconds per drafted token; `None` before a token was drafted.
    pub fn per_token(&self) -> Option<f64> {
        (self.tokens >= 0.5).then(|| self.secs / self.tokens)
    }
}

/// Counters of the draft model's work.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct DrafterCounters {
    pub passes: u64,
    pub time: Duration,
    pub failures: u64,
}

/// The draft model, its KV and its mirrors (owned by the engine).
pub(crate) struct Drafter<'m> {
    model: &'m Model,
    seqs: Sequences,
    mirrors: HashMap<u32, Mirror>,
    pub params: DraftParams,
    /// Draft time per drafted token, measured.
    pub cost: DraftCost,
    /// Ids at or above this are not the target's (padding rows of a
    /// larger draft vocabulary): a draft stops there.
    n_vocab: usize,
    pub counters: DrafterCounters,
    /// A round's items (reused).
    feed: Vec<Vec<u32>>,
}

/// Whether `draft`'s vocabulary is `target`'s: the same number of tokens,
/// each with the same bytes.
fn check_vocab(target: &Tokenizer, draft: &Tokenizer) -> Result<(), EngineError> {
    if target.n_vocab() != draft.n_vocab() {
        return Err(EngineError::DraftVocabMismatch(format!(
            "the target has {} tokens, the draft model {}",
            target.n_vocab(),
            draft.n_vocab()
        )));
    }
    match (0..target.n_vocab() as u32).find(|&i| target.token_bytes(i) != draft.token_bytes(i)) {
        Some(i) => Err(EngineError::DraftVocabMismatch(format!(
            "token {i} is {:?} in the target and {:?} in the draft model",
            String::from_utf8_lossy(target.token_bytes(i)),
            String::from_utf8_lossy(draft.token_bytes(i))
        ))),
        None => Ok(()),
    }
}

/// The most likely token and its probability (softmax of `logits`).
fn top(logits: &[f32]) -> Option<(u32, f32)> {
    let t = crate::sampling::argmax(logits)?;
    let max = logits[t as usize];
    let sum: f64 = logits
        .iter()
        .filter(|v| !v.is_nan())
        .map(|&v| f64::from(v - max).exp())
        .sum();
    Some((t, (1.0 / sum) as f32))
}

impl<'m> Drafter<'m> {
    /// A drafter for a target `target` drafted for by `draft`, its KV
    /// sized as `kv` (the target's block count holds at least as many
    /// tokens), forward calls of at most `max_batch_tokens`.
    ///
    /// # Errors
    ///
    /// [`EngineError::DraftVocabMismatch`] when the vocabularies differ;
    /// [`EngineError::Kv`] for unusable sizes.
    pub fn new(
        target: &Model,
        draft: &'m Model,
        params: DraftParams,
        kv: PagedKvConfig,
        max_batch_tokens: usize,
    ) -> Result<Drafter<'m>, EngineError> {
        let tok = |m: &Model, what: &str| {
            Tokenizer::from_gguf(m.gguf()).map_err(|e| {
                EngineError::DraftVocabMismatch(format!("the {what}'s tokenizer: {e}"))
            })
        };
        check_vocab(&tok(target, "target")?, &tok(draft, "draft model")?)?;
        Ok(Drafter {
            model: draft,
            seqs: Sequences::new(draft, kv, PrefixCache::On, max_batch_tokens)?,
            mirrors: HashMap::new(),
            params,
            cost: DraftCost::default(),
            n_vocab: target.config().n_vocab.min(draft.config().n_vocab),
            counters: DrafterCounters::default(),
            feed: Vec::new(),
        })
    }

    /// Drops a request's mirror (its rows stay findable by prefix).
    pub fn release(&mut self, slot: u32) {
        if let Some(m) = self.mirrors.remove(&slot) {
            let _ = self.seqs.publish(m.seq);
            let _ = self.seqs.free(m.seq);
        }
    }

    /// Drops every mirror (after a failed pass).
    fn release_all(&mut self) {
        let slots: Vec<u32> = self.mirrors.keys().copied().collect();
        for s in slots {
            self.release(s);
        }
    }

    /// The mirror of a job, created (from the cached prefix) if the slot
    /// has none or an older request's, and cut to what it shares with the
    /// target; the tokens it must be fed.
    fn sync(&mut self, job: &DraftJob<'_>) -> Result<(SeqId, Vec<u32>), EngineError> {
        if self
            .mirrors
            .get(&job.slot)
            .is_some_and(|m| m.generation != job.generation)
        {
            self.release(job.slot);
        }
        let seq = match self.mirrors.get(&job.slot) {
            Some(m) => m.seq,
            None => {
                let seq = self.seqs.create(job.tenant)?;
                self.mirrors.insert(
                    job.slot,
                    Mirror {
                        generation: job.generation,
                        seq,
                    },
                );
                let full = [job.context, &[job.unfed]].concat();
                self.seqs.attach_prefix(seq, &full)?;
                seq
            }
        };
        // The shared prefix of the mirror and the context; the unfed token
        // is always fed (its logits give the first draft token).
        let held = self.seqs.tokens(seq)?;
        let common = held
            .iter()
            .zip(job.context)
            .take_while(|(a, b)| a == b)
            .count();
        if common < held.len() {
            self.seqs.truncate(seq, common)?;
        }
        let mut feed = job.context[common..].to_vec();
        feed.push(job.unfed);
        Ok((seq, feed))
    }

    /// Fills every job's `out` with up to `max` drafted tokens, the
    /// draft model's greedy continuation. A failure drops every mirror
    /// and leaves the drafts empty: drafting is never a request's error.
    pub fn draft(&mut self, jobs: &mut [DraftJob<'_>]) {
        let t0 = Instant::now();
        let r = self.try_draft(jobs);
        let drafted = jobs.iter().map(|j| j.out.len()).sum();
        self.cost.observe(t0.elapsed().as_secs_f64(), drafted);
        if r.is_err() {
            self.counters.failures += 1;
            self.release_all();
            for j in jobs.iter_mut() {
                j.out.clear();
            }
        }
    }

    fn try_draft(&mut self, jobs: &mut [DraftJob<'_>]) -> Result<(), EngineError> {
        let mut seqs = Vec::with_capacity(jobs.len());
        self.feed.clear();
        for j in jobs.iter() {
            let (seq, feed) = self.sync(j)?;
            seqs.push(seq);
            self.feed.push(feed);
        }
        let mut active: Vec<bool> = jobs.iter().map(|j| j.max > 0).collect();
        for round in 0.. {
            let which: Vec<usize> = (0..jobs.len()).filter(|&k| active[k]).collect();
            if which.is_empty() {
                break;
            }
            if round > 0 {
                for &k in &which {
                    let last = *jobs[k].out.last().unwrap_or(&jobs[k].unfed);
                    self.feed[k].clear();
                    self.feed[k].push(last);
                }
            }
            let items: Vec<Append<'_>> = which
                .iter()
                .map(|&k| Append {
                    seq: seqs[k],
                    ids: &self.feed[k],
                    logits: LogitsWanted::Yes,
                })
                .collect();
            let t0 = Instant::now();
            let mut picked: Vec<Option<(u32, f32)>> = vec![None; which.len()];
            self.seqs.step_with(self.model, &items, |i, logits| {
                if let Some(p) = picked.get_mut(i) {
                    *p = top(logits);
                }
            })?;
            let took = t0.elapsed();
            self.counters.passes += 1;
            self.counters.time += took;
            for (&k, p) in which.iter().zip(picked) {
                let j = &mut jobs[k];
                match p {
                    Some((t, p)) if (t as usize) < self.n_vocab && p >= self.params.p_min => {
                        j.out.push(t);
                        active[k] = j.out.len() < j.max;
                    }
                    _ => active[k] = false,
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::top;

    #[test]
    fn top_is_the_argmax_and_its_softmax_probability() {
        let (t, p) = top(&[0.0, 2.0_f32.ln(), 0.0]).expect("a token");
        assert_eq!(t, 1);
        assert!((p - 0.5).abs() < 1e-6, "{p}");
        assert_eq!(top(&[f32::NAN, 1.0]).map(|x| x.0), Some(1));
    }
}
