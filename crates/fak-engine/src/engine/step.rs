//! One engine step: admit, plan a pass, run it, turn logits into events.
//!
//! ```text
//!   queue ─admit─► running [r0 r1 r2 r3]        (oldest admission first)
//!   plan:  decode r1 r3 (round-robin from the cursor)  + prefill r0[12..76]
//!          └──────────── ≤ token_budget tokens, one forward call ─────┘
//!          (PrefillMix::Serial: a second prompt joins only a pass still
//!           below `join_below` tokens; Fill: prompts fill the budget)
//!   out of KV blocks?  preempt the youngest running request and plan again
//! ```
//!
//! A plan never exceeds the token budget, and the sequences run a step of
//! at most that many tokens as one forward call, so logits reach the
//! sampler only after the whole pass succeeded: a failed pass samples
//! nothing, and a retry draws the same random numbers.

use fak_model::{LogitsWanted, SeqId};

use super::masks::{Job, MaskMode, MaskWorker, Pending};
use super::text::{logprobs, Scan};
use super::{Engine, Phase, PrefillMix, Release, Slot};
use crate::constraint::{Check, ConstraintState, Ready};
use crate::error::EngineError;
use crate::request::{
    Context, EngineStats, Event, FinishReason, RequestId, SpecMode, StepLogprobs, StopAt,
};
use crate::sampling::{Logprobs, Sampler};
use crate::seqs::{Append, PrefixCache, Rows};

/// What one item of a pass does for its request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ItemKind {
    /// Part of the prompt; `last` when it completes it.
    Prefill { last: bool },
    /// The request's last sampled token.
    Decode,
}

struct Item {
    slot: u32,
    seq: SeqId,
    ids: Vec<u32>,
    kind: ItemKind,
    logits: LogitsWanted,
    /// A decode item carrying draft tokens after its unfed one: the
    /// sequence's length before the pass (rejected rows are cut back to
    /// what plain decoding would hold).
    verify: Option<usize>,
    /// Where the draft came from.
    source: Option<DraftSource>,
}

/// Where a draft came from (for the request's prediction counters).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum DraftSource {
    /// The request's prediction, starting at this position in it.
    Prediction { start: usize },
    /// Prompt lookup over the sequence's own context.
    Lookup,
    /// The tenant's recent outputs (the fleet index).
    Fleet,
    /// Text the request's grammar forces next.
    Grammar,
    /// The draft model.
    Model,
}

/// A constrained request's token: drawn from the raw logits and checked
/// against the grammar where that is exact ([`Check::First`]), else (or
/// when the check fails) drawn from the masked logits, left in `masked`
/// (see the `constraint` module).
fn sample_constrained(
    c: &mut ConstraintState,
    sampler: &mut Sampler,
    check: Check,
    logits: &[f32],
    masked: &mut Vec<f32>,
    stats: &mut EngineStats,
) -> Result<Option<u32>, EngineError> {
    if check == Check::First {
        if let Some(t) = sampler.sample(logits) {
            if c.allows(t)? {
                stats.constraint_checks += 1;
                return Ok(Some(t));
            }
        }
    }
    masked.clear();
    masked.extend_from_slice(logits);
    c.apply(masked)?;
    stats.constraint_masks += 1;
    Ok(sampler.sample(masked))
}

/// [`sample_constrained`] with the grammar's verdict computed beforehand
/// ([`MaskMode::Overlap`]): the same draws, the check a bit test.
fn sample_ready(
    c: &mut ConstraintState,
    ready: &Ready,
    sampler: &mut Sampler,
    check: Check,
    logits: &[f32],
    masked: &mut Vec<f32>,
    stats: &mut EngineStats,
) -> Option<u32> {
    if check == Check::First {
        if let Some(t) = sampler.sample(logits) {
            if c.allows_ready(ready, t) {
                stats.constraint_checks += 1;
                return Some(t);
            }
        }
    }
    masked.clear();
    masked.extend_from_slice(logits);
    c.apply_ready(ready, masked);
    sampler.sample(masked)
}

/// Waits for the mask worker's verdicts of a pass and gives the lent
/// matchers back to their requests; `ready[k]` is item k's verdict.
fn settle(
    worker: Option<&MaskWorker>,
    pending: Pending,
    plan: &[Item],
    slots: &mut [Slot],
    ready: &mut [Option<Result<Ready, EngineError>>],
    stats: &mut EngineStats,
) {
    let t0 = std::time::Instant::now();
    let (done, lost) = MaskWorker::wait(worker, pending);
    stats.constraint_wait_time += t0.elapsed();
    for d in done {
        stats.constraint_masks += 1;
        stats.constraint_worker_time += d.took;
        let state = plan
            .get(d.item)
            .and_then(|i| slots.get_mut(i.slot as usize))
            .and_then(|e| e.live.as_mut())
            .and_then(|l| l.constraint.as_mut());
        if let Some(c) = state {
            c.put_back(d.matcher);
        }
        if let Some(r) = ready.get_mut(d.item) {
            *r = Some(d.ready);
        }
    }
    for k in lost {
        if let Some(r) = ready.get_mut(k) {
            *r = Some(Err(EngineError::ConstraintFailed(
                "the mask worker stopped".into(),
            )));
        }
    }
}

/// The log-probabilities of `token` a request asked for: from the masked
/// logits for a constrained request (which with log-probabilities always
/// masks, leaving them in `masked`), else from the raw ones.
fn step_logprobs(
    live: &super::Live,
    masked: &[f32],
    logits: &[f32],
    token: u32,
) -> Option<StepLogprobs> {
    let Logprobs::Top(n) = live.req.logprobs else {
        return None;
    };
    let l = if live.constraint.is_some() {
        masked
    } else {
        logits
    };
    Some(logprobs(l, token, n))
}

/// What the sampler made of an item's logits.
#[derive(Default)]
struct Picked {
    token: Option<u32>,
    logprobs: Option<StepLogprobs>,
    /// The request's constraint failed to give a mask.
    error: Option<EngineError>,
    /// A verified draft: the tokens sampled, one per row, up to and
    /// including the first that differs from the draft (already taken by
    /// the sampler and the grammar, in order, as plain decoding takes
    /// them), each with its log-probabilities when the request asked.
    verified: Vec<(u32, Option<StepLogprobs>)>,
    /// The rows after a mismatch are not sampled.
    verify_done: bool,
}

/// Whether the sampler has taken a token already.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Drawn {
    /// Not yet: [`Engine::accept`] passes it to the sampler.
    Pending,
    /// Taken when it was sampled (a verified draft's rows), by the
    /// sampler and by the grammar.
    Taken,
}

fn out_of_blocks(e: &EngineError) -> bool {
    matches!(
        e,
        EngineError::Model(fak_model::ModelError::Kv(
            fak_model::KvError::OutOfBlocks { .. }
        ))
    )
}

impl Engine<'_> {
    /// Runs one step: admits what the KV pool can take, runs one forward
    /// pass of at most the token budget, and returns what happened.
    /// Returns no events when there is nothing to do.
    ///
    /// # Errors
    ///
    /// Only bookkeeping failures of the engine itself; a request's own
    /// failure is an [`Event::Failed`] and the others go on.
    pub fn step(&mut self) -> Result<Vec<Event>, EngineError> {
        self.step_observe(|_, _| {})
    }

    /// [`Engine::step`], calling `on_logits(id, logits)` with every
    /// request's logits (`[n_vocab]`) before it samples from them.
    ///
    /// # Errors
    ///
    /// As [`Engine::step`].
    pub fn step_observe(
        &mut self,
        mut on_logits: impl FnMut(RequestId, &[f32]),
    ) -> Result<Vec<Event>, EngineError> {
        let mut events = std::mem::take(&mut self.pending);
        self.admit(&mut events)?;
        loop {
            let plan = self.plan();
            if plan.is_empty() {
                break;
            }
            let started = std::time::Instant::now();
            let ran = self.run(&plan, &mut on_logits);
            if ran.is_ok() {
                let tokens = plan.iter().map(|i| i.ids.len()).sum();
                self.pass_cost
                    .observe(tokens, started.elapsed().as_secs_f64());
            }
            match ran {
                Ok(picked) => {
                    for (item, p) in plan.into_iter().zip(picked) {
                        self.process(item, p, &mut events)?;
                    }
                    break;
                }
                Err(e) if out_of_blocks(&e) => {
                    // Idle sessions' rows go first, then running requests.
                    if self.drop_lru_session()? {
                        continue;
                    }
                    let youngest = self.running.iter().copied().max_by_key(|&s| {
                        self.slots[s as usize].live.as_ref().map_or(0, |l| l.ticket)
                    });
                    match youngest {
                        Some(s) if self.running.len() > 1 => self.preempt(s)?,
                        Some(s) => self.fail(s, e, &mut events)?,
                        None => break,
                    }
                }
                Err(e) => {
                    // Find the request(s) at fault: run each item alone.
                    if plan.len() == 1 {
                        self.fail(plan[0].slot, e, &mut events)?;
                        break;
                    }
                    for item in plan {
                        match self.run(std::slice::from_ref(&item), &mut on_logits) {
                            Ok(mut p) => {
                                self.process(item, p.pop().unwrap_or_default(), &mut events)?
                            }
                            Err(e) => self.fail(item.slot, e, &mut events)?,
                        }
                    }
                    break;
                }
            }
        }
        Ok(events)
    }

    /// Admits queued requests, oldest first, while the pool can hold their
    /// prompts. A request whose prompt shares whole blocks with one that is
    /// prefilling now waits for those blocks to reach the prefix cache
    /// instead of computing them a second time (later requests may pass
    /// it meanwhile).
    fn admit(&mut self, events: &mut Vec<Event>) -> Result<(), EngineError> {
        let mut at = 0;
        while self.running.len() < self.cfg.max_running && at < self.queue.len() {
            let slot = self.queue[at];
            let Some(live) = self.slots[slot as usize].live.as_ref() else {
                self.queue.remove(at);
                continue;
            };
            if self.awaits_prefix(live) {
                at += 1;
                continue;
            }
            let (seq, fresh) = match live.req.context {
                Context::Fresh => (self.seqs.create(live.req.tenant), true),
                Context::Session(s) => (self.session_seq(s)?, false),
            };
            let attachable = self.cfg.prefix_cache == PrefixCache::On
                && (fresh || self.seqs.tokens(seq)?.is_empty());
            let cached = if attachable {
                self.seqs.attach_prefix(seq, &live.input)?
            } else {
                0
            };
            let bs = self.cfg.kv.block_size;
            let held = self.seqs.tokens(seq)?.len();
            let end = live.base + live.input.len();
            let needed = end.div_ceil(bs).saturating_sub(held / bs) + 1;
            let p = self.seqs.kv().stats();
            let mut available = p.free + p.cached;
            // Idle sessions give up their rows, least recently used first.
            while needed > available && self.drop_lru_session()? {
                let p = self.seqs.kv().stats();
                available = p.free + p.cached;
            }
            if needed > available {
                if fresh {
                    self.seqs.free(seq)?;
                } else if cached > 0 {
                    self.seqs.truncate(seq, 0)?;
                }
                if self.running.is_empty() {
                    self.queue.remove(at);
                    let e = EngineError::KvExhausted { needed, available };
                    self.fail(slot, e, events)?;
                    continue;
                }
                break;
            }
            self.queue.remove(at);
            let ticket = self.next_ticket;
            self.next_ticket += 1;
            let generation = self.slots[slot as usize].generation;
            let Some(live) = self.slots[slot as usize].live.as_mut() else {
                continue;
            };
            live.seq = Some(seq);
            live.fed = cached;
            live.phase = Phase::Prefill;
            live.ticket = ticket;
            if !live.reported {
                live.reported = true;
                live.cached = cached;
                self.stats.prefix_queries_tokens += live.input.len() as u64;
                self.stats.prefix_hits_tokens += cached as u64;
                self.stats.prompt_tokens += (live.base + live.n_input) as u64;
                events.push(Event::Admitted {
                    id: RequestId { slot, generation },
                    cached_tokens: live.base + cached,
                    queued: live.queued_at.elapsed(),
                });
            }
            self.running.push(slot);
            let live = self.slots[slot as usize].live.as_ref();
            if live.is_some_and(|l| l.fed == l.input.len()) {
                // Nothing to compute (an empty append to a session).
                self.finish(slot, FinishReason::Length, events)?;
            }
        }
        Ok(())
    }

    /// Whether `live` should wait for a running prefill to publish blocks
    /// of a prompt they share (same tenant, whole blocks beyond what is
    /// computed so far).
    fn awaits_prefix(&self, live: &super::Live) -> bool {
        if self.cfg.prefix_cache != PrefixCache::On || live.req.context != Context::Fresh {
            return false;
        }
        let bs = self.cfg.kv.block_size;
        // At most all but the last prompt token can come from the cache.
        let usable = live.input.len().saturating_sub(1);
        self.running.iter().any(|&r| {
            let Some(o) = self.slots[r as usize].live.as_ref() else {
                return false;
            };
            if o.phase != Phase::Prefill
                || o.req.context != Context::Fresh
                || o.req.tenant != live.req.tenant
            {
                return false;
            }
            let common = live
                .input
                .iter()
                .zip(&o.input)
                .take(usable)
                .take_while(|(a, b)| a == b)
                .count();
            common / bs > o.fed / bs
        })
    }

    /// One pass: decode tokens round-robin, then prefill chunks oldest
    /// first, within the token budget (decode leaves at least one token to
    /// a pending prefill when the budget is above 1). How many requests'
    /// prefills share the pass is the config's [`PrefillMix`].
    fn plan(&mut self) -> Vec<Item> {
        let mut budget = self.cfg.token_budget;
        let mut plan = Vec::new();
        let decoding: Vec<u32> = self
            .running
            .iter()
            .copied()
            .filter(|&s| {
                self.slots[s as usize]
                    .live
                    .as_ref()
                    .is_some_and(|l| l.phase == Phase::Decode && l.unfed.is_some())
            })
            .collect();
        if !decoding.is_empty() {
            let n = decoding.len();
            let start = self.cursor % n;
            // Leave a token of the budget to a pending prefill: with decode
            // taking it all, at most `token_budget` requests ever decoded
            // and the others waited, unprefilled, until one finished (found
            // by tests/engine.rs, round-robin). With a budget of 1, decode
            // still goes first.
            let prefilling = self.running.iter().any(|&s| {
                self.slots[s as usize]
                    .live
                    .as_ref()
                    .is_some_and(|l| l.phase == Phase::Prefill && l.fed < l.input.len())
            });
            let cap = if prefilling && budget > 1 {
                budget - 1
            } else {
                budget
            };
            let take = n.min(cap);
            // Tokens of the budget left for drafts, after one per decode.
            let mut spare = cap - take;
            let chosen: Vec<u32> = (0..take).map(|k| decoding[(start + k) % n]).collect();
            let mut drafts = Vec::with_capacity(take);
            for &slot in &chosen {
                let d = if spare > 0 {
                    self.draft(slot, spare, take)
                } else {
                    (Vec::new(), None)
                };
                spare -= d.0.len();
                drafts.push(d);
            }
            if spare > 0 && self.drafter.is_some() {
                self.model_drafts(&chosen, &mut drafts, spare);
            }
            for (slot, (draft, source)) in chosen.into_iter().zip(drafts) {
                budget -= draft.len();
                if let Some(l) = self.slots[slot as usize].live.as_ref() {
                    if let (Some(seq), Some(t)) = (l.seq, l.unfed) {
                        let verify = if draft.is_empty() {
                            None
                        } else {
                            self.seqs.tokens(seq).ok().map(<[u32]>::len)
                        };
                        let mut ids = vec![t];
                        ids.extend_from_slice(&draft);
                        plan.push(Item {
                            slot,
                            seq,
                            ids,
                            kind: ItemKind::Decode,
                            logits: LogitsWanted::Yes,
                            verify,
                            source,
                        });
                    }
                }
            }
            budget -= take;
            self.cursor = (start + take) % n;
        }
        let mut prefills = 0usize;
        for &slot in &self.running {
            if budget == 0 {
                break;
            }
            if let PrefillMix::Serial { join_below } = self.cfg.prefill {
                if prefills > 0 && self.cfg.token_budget - budget >= join_below {
                    break;
                }
            }
            let Some(l) = self.slots[slot as usize].live.as_ref() else {
                continue;
            };
            let Some(seq) = l.seq else { continue };
            if l.phase != Phase::Prefill {
                continue;
            }
            let n = (l.input.len() - l.fed).min(budget);
            if n == 0 {
                continue;
            }
            let last = l.fed + n == l.input.len();
            plan.push(Item {
                slot,
                seq,
                ids: l.input[l.fed..l.fed + n].to_vec(),
                kind: ItemKind::Prefill { last },
                logits: if last && l.max_tokens > 0 {
                    LogitsWanted::Yes
                } else {
                    LogitsWanted::No
                },
                verify: None,
                source: None,
            });
            budget -= n;
            prefills += 1;
        }
        plan
    }

    /// Draft tokens for a decoding request (at most `room`), and where
    /// they came from: the request's prediction first, then what its
    /// grammar forces, then prompt lookup and the fleet index when the
    /// engine drafts (for a constrained request cut to what its grammar
    /// accepts). None when the request opted out, and never more than it
    /// may still generate after the token this pass samples anyway.
    fn draft(&mut self, slot: u32, room: usize, batch: usize) -> (Vec<u32>, Option<DraftSource>) {
        let none = (Vec::new(), None);
        let lookup = self.spec.lookup();
        // Draft lengths of prompt lookup and of the fleet index, each scored
        // on its own acceptance: with `auto`, a source drafts only where it
        // pays, as long as its acceptance says; one left out drifts back to
        // be tried again.
        let (mut own, mut fleet) = (0, 0);
        if let (Some(p), Some(l)) = (lookup, self.slots[slot as usize].live.as_mut()) {
            (own, fleet) = (p.max_draft, p.max_draft);
            if let crate::spec::Speculative::Auto(_) = self.spec {
                let fit = self.pass_cost.fit();
                for (acc, len) in [
                    (&mut l.acceptance, &mut own),
                    (&mut l.fleet_acceptance, &mut fleet),
                ] {
                    let rate = acc.rate();
                    let pays =
                        fit.is_none_or(|(a, b)| crate::spec::drafting_pays(a, b, batch, rate));
                    if pays {
                        *len = acc.draft_len(p.max_draft);
                    } else {
                        *len = 0;
                        acc.idle();
                    }
                }
            }
        }
        let grammar = self.spec != crate::spec::Speculative::Off;
        let Some(l) = self.slots[slot as usize].live.as_mut() else {
            return none;
        };
        let spec = &l.req.speculation;
        if spec.mode == SpecMode::Off
            || (lookup.is_none() && spec.prediction.is_empty() && !grammar)
        {
            return none;
        }
        let (Some(seq), Some(unfed)) = (l.seq, l.unfed) else {
            return none;
        };
        let left = l.max_tokens.saturating_sub(l.generated.len() + 1);
        let max = room.min(left);
        if max == 0 {
            return none;
        }
        let Ok(tokens) = self.seqs.tokens(seq) else {
            return none;
        };
        let ctx = &mut self.spec_context;
        ctx.clear();
        ctx.extend_from_slice(tokens);
        ctx.push(unfed);
        let k = l
            .pred
            .acceptance
            .draft_len(crate::spec::LONG_DRAFT)
            .min(max);
        if let Some((start, d)) =
            crate::spec::prediction_draft(ctx, &spec.prediction, l.pred.cursor, k)
        {
            return (d.to_vec(), Some(DraftSource::Prediction { start }));
        }
        // The grammar has already taken the unfed token (it was accepted).
        if let (true, Some(c), Some(tok)) = (grammar, l.constraint.as_mut(), self.tok) {
            let d = c.forced(tok, crate::spec::LONG_DRAFT.min(max));
            if !d.is_empty() {
                return (d, Some(DraftSource::Grammar));
            }
        }
        let Some(params) = lookup else {
            return none;
        };
        let with = |n: usize| crate::spec::LookupParams {
            max_draft: n.min(max),
            ..params
        };
        // A match of `max_ngram` tokens at full acceptance (a file being
        // re-emitted) earns a long draft, as a prediction does.
        let found: &[u32] = match (own > 0)
            .then(|| crate::spec::prompt_lookup(ctx, params))
            .flatten()
        {
            Some(m) => {
                let long = own == params.max_draft && m.matched >= params.max_ngram;
                let k = if long { crate::spec::LONG_DRAFT } else { own };
                m.draft(ctx, k.min(max))
            }
            None => &[],
        };
        let (d, source) = match found {
            [] if fleet > 0 => (
                self.fleet_index.draft(l.req.tenant, ctx, with(fleet)),
                DraftSource::Fleet,
            ),
            [] => return none,
            d => (d, DraftSource::Lookup),
        };
        let n = match l.constraint.as_mut() {
            Some(c) => c.valid_prefix(d),
            None => d.len(),
        };
        if n == 0 {
            return none;
        }
        (d[..n].to_vec(), Some(source))
    }

    /// Draft-model drafts for the chosen decoding requests that have no
    /// draft yet, within `spare` tokens: all of them in the same few draft
    /// passes. [`Speculative::Auto`] drafts for a sequence only while
    /// [`model_drafting_pays`] says so at its acceptance.
    ///
    /// [`Speculative::Auto`]: crate::spec::Speculative::Auto
    /// [`model_drafting_pays`]: crate::spec::model_drafting_pays
    fn model_drafts(
        &mut self,
        chosen: &[u32],
        drafts: &mut [(Vec<u32>, Option<DraftSource>)],
        mut spare: usize,
    ) {
        let auto = match self.spec {
            crate::spec::Speculative::Draft => false,
            crate::spec::Speculative::Auto(_) => true,
            _ => return,
        };
        let Some(drafter) = self.drafter.as_mut() else {
            return;
        };
        let batch = chosen.len();
        let target = self.pass_cost.fit();
        let cost = drafter.cost.per_token();
        let max_draft = drafter.params.max_draft;
        let mut jobs = Vec::new();
        let mut at = Vec::new();
        for (k, &slot) in chosen.iter().enumerate() {
            if spare == 0 {
                break;
            }
            if drafts.get(k).is_none_or(|d| !d.0.is_empty()) {
                continue;
            }
            let generation = self.slots[slot as usize].generation;
            let Some(l) = self.slots[slot as usize].live.as_mut() else {
                continue;
            };
            if l.req.speculation.mode == SpecMode::Off {
                continue;
            }
            let (Some(seq), Some(unfed)) = (l.seq, l.unfed) else {
                continue;
            };
            if auto {
                let rate = l.model_acceptance.rate();
                let pays =
                    target.is_none_or(|t| crate::spec::model_drafting_pays(t, cost, batch, rate));
                if !pays {
                    l.model_acceptance.idle();
                    continue;
                }
            }
            let left = l.max_tokens.saturating_sub(l.generated.len() + 1);
            let max = l.model_acceptance.draft_len(max_draft).min(left).min(spare);
            let Ok(context) = self.seqs.tokens(seq) else {
                continue;
            };
            if max == 0 {
                continue;
            }
            spare -= max;
            jobs.push(crate::drafter::DraftJob {
                slot,
                generation,
                tenant: l.req.tenant,
                context,
                unfed,
                max,
                out: Vec::new(),
            });
            at.push(k);
        }
        if jobs.is_empty() {
            return;
        }
        drafter.draft(&mut jobs);
        for (job, k) in jobs.into_iter().zip(at) {
            let mut d = job.out;
            let constraint = self.slots[job.slot as usize]
                .live
                .as_mut()
                .and_then(|l| l.constraint.as_mut());
            if let Some(c) = constraint {
                let n = c.valid_prefix(&d);
                d.truncate(n);
            }
            if let (false, Some(slot)) = (d.is_empty(), drafts.get_mut(k)) {
                *slot = (d, Some(DraftSource::Model));
            }
        }
    }

    /// Runs a plan as one forward pass and samples every item that asked
    /// for logits.
    fn run(
        &mut self,
        plan: &[Item],
        on_logits: &mut impl FnMut(RequestId, &[f32]),
    ) -> Result<Vec<Picked>, EngineError> {
        debug_assert!(plan.iter().map(|i| i.ids.len()).sum::<usize>() <= self.cfg.token_budget);
        let items: Vec<Append<'_>> = plan
            .iter()
            .map(|i| Append {
                seq: i.seq,
                ids: &i.ids,
                logits: i.logits,
            })
            .collect();
        let mut picked: Vec<Picked> = plan.iter().map(|_| Picked::default()).collect();
        let pending = self.lend_matchers(plan);
        let mut waiting = Some(pending);
        let mut ready: Vec<Option<Result<Ready, EngineError>>> =
            plan.iter().map(|_| None).collect();
        let worker = self.masks.as_ref();
        let slots = &mut self.slots;
        let masked = &mut self.masked;
        let stats = &mut self.stats;
        let tok = self.tok;
        let rows: Vec<Rows> = plan
            .iter()
            .map(|i| {
                if i.verify.is_some() {
                    Rows::Every
                } else {
                    Rows::Last
                }
            })
            .collect();
        let result = self
            .seqs
            .step_rows_with(self.model, &items, &rows, |k, j, logits| {
                if let Some(p) = waiting.take() {
                    // The forward pass is done: the worker's verdicts now.
                    settle(worker, p, plan, slots, &mut ready, stats);
                }
                let (Some(item), Some(out)) = (plan.get(k), picked.get_mut(k)) else {
                    return;
                };
                let Some(entry) = slots.get_mut(item.slot as usize) else {
                    return;
                };
                let id = RequestId {
                    slot: item.slot,
                    generation: entry.generation,
                };
                let Some(live) = entry.live.as_mut() else {
                    return;
                };
                if item.verify.is_some() {
                    // Row j is the distribution after ids[j]; it is sampled
                    // only while every earlier row's token equalled the draft
                    // token after it (rows come in order). The sampler and
                    // the grammar take each token at once, as plain
                    // decoding's steps would before the next draw.
                    if out.verify_done {
                        return;
                    }
                    on_logits(id, logits);
                    let check = Check::for_request(&live.req.sampling, live.req.logprobs);
                    let drawn = match live.constraint.as_mut() {
                        None => Ok(live.sampler.sample(logits)),
                        Some(c) => {
                            let t0 = std::time::Instant::now();
                            let r = sample_constrained(
                                c,
                                &mut live.sampler,
                                check,
                                logits,
                                masked,
                                stats,
                            );
                            stats.constraint_mask_time += t0.elapsed();
                            r
                        }
                    };
                    let t = match drawn {
                        Ok(Some(t)) => t,
                        Ok(None) => {
                            out.verify_done = true;
                            return;
                        }
                        Err(e) => {
                            out.error = Some(e);
                            out.verify_done = true;
                            return;
                        }
                    };
                    live.sampler.accept(t);
                    let lp = step_logprobs(live, masked, logits, t);
                    out.verified.push((t, lp));
                    if item.ids.get(j + 1) != Some(&t) {
                        out.verify_done = true;
                    }
                    // A token that ends the request is never consumed; one
                    // the grammar takes is, before the next row's mask.
                    let ends =
                        tok.is_some_and(|k| k.is_eog(t)) || live.req.stop.token_ids.contains(&t);
                    if let (false, Some(c)) = (ends, live.constraint.as_mut()) {
                        if let Err(e) = c.consume(t) {
                            // Plain decoding fails here without emitting t.
                            out.verified.pop();
                            out.error = Some(e);
                            out.verify_done = true;
                        }
                    }
                    return;
                }
                on_logits(id, logits);
                let token = match live.constraint.as_mut() {
                    None => live.sampler.sample(logits),
                    Some(c) => {
                        let t0 = std::time::Instant::now();
                        let check = Check::for_request(&live.req.sampling, live.req.logprobs);
                        let r = match ready.get_mut(k).and_then(Option::take) {
                            Some(Ok(v)) => Ok(sample_ready(
                                c,
                                &v,
                                &mut live.sampler,
                                check,
                                logits,
                                masked,
                                stats,
                            )),
                            Some(Err(e)) => Err(e),
                            None => sample_constrained(
                                c,
                                &mut live.sampler,
                                check,
                                logits,
                                masked,
                                stats,
                            ),
                        };
                        stats.constraint_mask_time += t0.elapsed();
                        match r {
                            Ok(t) => t,
                            Err(e) => {
                                out.error = Some(e);
                                return;
                            }
                        }
                    }
                };
                out.token = token;
                out.logprobs = token.and_then(|t| step_logprobs(live, masked, logits, t));
            });
        if let Some(p) = waiting.take() {
            // No logits came (a failed pass): the matchers still go back.
            settle(worker, p, plan, slots, &mut ready, stats);
        }
        result?;
        self.stats.passes += 1;
        self.stats.tokens_computed += plan.iter().map(|i| i.ids.len() as u64).sum::<u64>();
        Ok(picked)
    }

    /// [`MaskMode::Overlap`]: lends the matcher of every constrained item
    /// that will sample to the mask worker (started on first use, and
    /// again if it died), which computes their verdicts while the forward
    /// pass runs.
    fn lend_matchers(&mut self, plan: &[Item]) -> Pending {
        if self.cfg.mask != MaskMode::Overlap {
            return Pending::None;
        }
        let mut jobs = Vec::new();
        for (k, item) in plan.iter().enumerate() {
            // A verified draft's rows are masked one after another, each
            // after the grammar took the token before.
            if item.logits != LogitsWanted::Yes || item.verify.is_some() {
                continue;
            }
            let state = self
                .slots
                .get_mut(item.slot as usize)
                .and_then(|e| e.live.as_mut())
                .and_then(|l| l.constraint.as_mut());
            let Some(state) = state else { continue };
            #[cfg(feature = "fault-injection")]
            let fault = state.take_fault();
            if let Some(matcher) = state.lend() {
                jobs.push(Job {
                    item: k,
                    matcher,
                    #[cfg(feature = "fault-injection")]
                    fault,
                });
            }
        }
        if !jobs.is_empty() && self.masks.as_ref().is_none_or(MaskWorker::is_dead) {
            // The old worker (if any) is joined as it drops.
            self.masks = MaskWorker::start();
            if self.masks.is_some() {
                self.stats.mask_workers_started += 1;
            }
        }
        MaskWorker::submit(self.masks.as_ref(), jobs)
    }

    /// Applies an item's results to its request.
    fn process(
        &mut self,
        item: Item,
        picked: Picked,
        events: &mut Vec<Event>,
    ) -> Result<(), EngineError> {
        let slot = item.slot;
        let publish = {
            let Some(live) = self.slots[slot as usize].live.as_mut() else {
                return Ok(());
            };
            match item.kind {
                ItemKind::Prefill { last } => {
                    live.fed += item.ids.len();
                    let fresh = live.req.context == Context::Fresh;
                    if !last {
                        // Every whole block computed so far is findable
                        // at once: requests sharing the prompt wait for it
                        // (`awaits_prefix`) rather than compute it again.
                        if fresh && self.cfg.prefix_cache == PrefixCache::On {
                            self.seqs.publish(item.seq)?;
                        }
                        return Ok(());
                    }
                    live.phase = Phase::Decode;
                    fresh
                }
                ItemKind::Decode => {
                    live.unfed = None;
                    false
                }
            }
        };
        if let Some(before) = item.verify {
            return self.process_verified(item, before, picked, events);
        }
        if publish && self.cfg.prefix_cache == PrefixCache::On {
            // Concurrent requests with the same prompt find it from now on.
            self.seqs.publish(item.seq)?;
        }
        let max_tokens = self.slots[slot as usize]
            .live
            .as_ref()
            .map_or(0, |l| l.max_tokens);
        if max_tokens == 0 {
            return self.finish(slot, FinishReason::Length, events);
        }
        if let Some(e) = picked.error {
            return self.fail(slot, e, events);
        }
        let Some(token) = picked.token else {
            return self.fail(slot, EngineError::NoLogits, events);
        };
        self.accept(slot, token, picked.logprobs, events)
    }

    /// A verified draft's tokens: the rows after the last one kept are cut
    /// from the sequence (it then holds what plain decoding would: the
    /// old unfed token and every emitted token but the last), and each
    /// token goes through the stop rules and text in order, as if sampled
    /// one pass at a time; a token that ends the request ends the list.
    fn process_verified(
        &mut self,
        item: Item,
        before: usize,
        picked: Picked,
        events: &mut Vec<Event>,
    ) -> Result<(), EngineError> {
        let slot = item.slot;
        let tokens = picked.verified;
        if tokens.is_empty() {
            let e = picked.error.unwrap_or(EngineError::NoLogits);
            return self.fail(slot, e, events);
        }
        let (drafted, kept) = (item.ids.len() - 1, tokens.len() - 1);
        self.stats.spec_drafts += 1;
        self.stats.spec_draft_tokens += drafted as u64;
        self.stats.spec_accepted_tokens += kept as u64;
        if let Some(l) = self.slots[slot as usize].live.as_mut() {
            match item.source {
                Some(DraftSource::Prediction { start }) => {
                    l.pred.accepted += kept;
                    l.pred.rejected += drafted - kept;
                    l.pred.cursor = start + kept;
                    l.pred.acceptance.record(drafted, kept);
                }
                Some(DraftSource::Lookup) => l.acceptance.record(drafted, kept),
                Some(DraftSource::Fleet) => {
                    l.fleet_acceptance.record(drafted, kept);
                    self.stats.spec_fleet_draft_tokens += drafted as u64;
                    self.stats.spec_fleet_accepted_tokens += kept as u64;
                }
                Some(DraftSource::Grammar) => {
                    self.stats.spec_grammar_draft_tokens += drafted as u64;
                    self.stats.spec_grammar_accepted_tokens += kept as u64;
                }
                Some(DraftSource::Model) => {
                    l.model_acceptance.record(drafted, kept);
                    self.stats.spec_model_draft_tokens += drafted as u64;
                    self.stats.spec_model_accepted_tokens += kept as u64;
                }
                None => {}
            }
        }
        self.seqs.truncate(item.seq, before + tokens.len())?;
        let generation = self.slots[slot as usize].generation;
        for (t, lp) in tokens {
            self.accept_drawn(slot, t, lp, events, Drawn::Taken)?;
            let entry = &self.slots[slot as usize];
            if entry.generation != generation || entry.live.is_none() {
                return Ok(());
            }
        }
        // The grammar failed on the last token sampled: as plain decoding
        // would, after every token before it.
        match picked.error {
            Some(e) => self.fail(slot, e, events),
            None => Ok(()),
        }
    }

    /// A sampled token: stop rules, text, and the next step's input.
    fn accept(
        &mut self,
        slot: u32,
        token: u32,
        logprobs: Option<StepLogprobs>,
        events: &mut Vec<Event>,
    ) -> Result<(), EngineError> {
        self.accept_drawn(slot, token, logprobs, events, Drawn::Pending)
    }

    /// [`Engine::accept`], saying whether the sampler already took the
    /// token (a verified draft's tokens are taken as they are sampled).
    fn accept_drawn(
        &mut self,
        slot: u32,
        token: u32,
        logprobs: Option<StepLogprobs>,
        events: &mut Vec<Event>,
        drawn: Drawn,
    ) -> Result<(), EngineError> {
        let n_ctx = self.cfg.n_ctx;
        let tok = self.tok;
        let generation = self.slots[slot as usize].generation;
        let Some(live) = self.slots[slot as usize].live.as_mut() else {
            return Ok(());
        };
        let id = RequestId { slot, generation };
        let eog = tok.is_some_and(|t| t.is_eog(token));
        // A constrained request ends at the end token its grammar allowed.
        if eog && (live.req.stop.eog == StopAt::EndOfGeneration || live.constraint.is_some()) {
            live.unfed = Some(token);
            return self.finish(slot, FinishReason::EndOfGeneration, events);
        }
        if live.req.stop.token_ids.contains(&token) {
            live.unfed = Some(token);
            return self.finish(slot, FinishReason::StopToken(token), events);
        }
        if let (Drawn::Pending, Some(c)) = (drawn, live.constraint.as_mut()) {
            if let Err(e) = c.consume(token) {
                return self.fail(slot, e, events);
            }
        }
        live.generated.push(token);
        if drawn == Drawn::Pending {
            live.sampler.accept(token);
        }
        live.unfed = Some(token);
        self.stats.generation_tokens += 1;
        let piece = match tok {
            Some(t) => live.decoder.push(t, token),
            None => String::new(),
        };
        let (text, stopped) = match live.scanner.push(&piece) {
            Scan::Release(t) => (t, None),
            Scan::Stop(k, t) => (t, Some(k)),
        };
        let done_len = live.generated.len() >= live.max_tokens;
        // The unfed token needs a position at the next step.
        let full = live.base + live.fed + 1 >= n_ctx;
        events.push(Event::Token {
            id,
            token,
            text,
            logprobs,
        });
        match stopped {
            Some(k) => self.finish(slot, FinishReason::StopString(k), events),
            None if done_len || full => self.finish(slot, FinishReason::Length, events),
            None => Ok(()),
        }
    }

    /// Ends a request normally.
    pub(super) fn finish(
        &mut self,
        slot: u32,
        reason: FinishReason,
        events: &mut Vec<Event>,
    ) -> Result<(), EngineError> {
        let generation = self.slots[slot as usize].generation;
        let text = match self.slots[slot as usize].live.as_mut() {
            Some(l) if !matches!(reason, FinishReason::StopString(_)) => {
                let mut t = l.scanner.finish();
                t.push_str(&l.decoder.finish());
                t
            }
            _ => String::new(),
        };
        let usage = self.usage(slot);
        if let Some(l) = self.slots[slot as usize].live.as_ref() {
            self.fleet_index.record(l.req.tenant, &l.generated);
        }
        self.release(slot, Release::Finish)?;
        events.push(Event::Finished {
            id: RequestId { slot, generation },
            reason,
            usage,
            text,
        });
        Ok(())
    }

    /// Ends a request with an error; the others go on.
    fn fail(
        &mut self,
        slot: u32,
        error: EngineError,
        events: &mut Vec<Event>,
    ) -> Result<(), EngineError> {
        let generation = self.slots[slot as usize].generation;
        self.release(slot, Release::Rollback)?;
        events.push(Event::Failed {
            id: RequestId { slot, generation },
            error,
        });
        Ok(())
    }

    /// Frees a running request's blocks and puts it back at the head of
    /// the queue; it recomputes its prompt and what it generated when
    /// admitted again, which gives the same logits.
    fn preempt(&mut self, slot: u32) -> Result<(), EngineError> {
        self.running.retain(|&s| s != slot);
        let prefix = self.cfg.prefix_cache;
        let Some(live) = self.slots[slot as usize].live.as_mut() else {
            return Ok(());
        };
        if let Some(seq) = live.seq.take() {
            match live.req.context {
                Context::Fresh => {
                    if prefix == PrefixCache::On {
                        // Released blocks stay findable until the pool needs them.
                        self.seqs.publish(seq)?;
                    }
                    self.seqs.free(seq)?;
                }
                Context::Session(_) => self.seqs.truncate(seq, live.base)?,
            }
        }
        live.input.truncate(live.n_input);
        live.input.extend_from_slice(&live.generated);
        live.fed = 0;
        live.unfed = None;
        live.phase = Phase::Queued;
        self.queue.push_front(slot);
        self.stats.preemptions += 1;
        Ok(())
    }

    /// Removes a request from the tables and settles its sequence.
    pub(super) fn release(&mut self, slot: u32, how: Release) -> Result<(), EngineError> {
        self.running.retain(|&s| s != slot);
        self.queue.retain(|&s| s != slot);
        let entry = &mut self.slots[slot as usize];
        let Some(live) = entry.live.take() else {
            return Ok(());
        };
        entry.generation = entry.generation.wrapping_add(1);
        self.free_slots.push(slot);
        if let Some(d) = self.drafter.as_mut() {
            d.release(slot);
        }
        match live.req.context {
            Context::Fresh => {
                if let Some(seq) = live.seq {
                    if how == Release::Finish && self.cfg.prefix_cache == PrefixCache::On {
                        self.seqs.publish(seq)?;
                    }
                    self.seqs.free(seq)?;
                }
            }
            Context::Session(s) => {
                let rollback = how == Release::Rollback;
                match (live.restore, rollback) {
                    (Some(tokens), true) => self.unrestore(s, tokens)?,
                    (None, true) => {
                        if let Some(seq) = live.seq {
                            self.seqs.truncate(seq, live.base)?;
                        }
                    }
                    _ => {}
                }
                if let Some(sess) = self.session_mut(s) {
                    sess.busy = None;
                    if !rollback {
                        sess.unfed = live.unfed;
                    }
                }
            }
        }
        Ok(())
    }
}
