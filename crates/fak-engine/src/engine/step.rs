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

use super::drafts::DraftSource;
use super::masks::{Job, MaskMode, MaskWorker, Pending};
use super::pick::{sample_constrained, sample_ready, step_logprobs};
use super::text::Scan;
use super::{Engine, Phase, PrefillMix, Slot};
use crate::constraint::{Check, Ready};
use crate::error::EngineError;
use crate::request::{Context, EngineStats, Event, FinishReason, RequestId, StepLogprobs, StopAt};
use crate::seqs::{Append, PrefixCache, Rows};
use crate::spec::PassSoFar;

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
            let decode = plan.iter().all(|i| i.kind == ItemKind::Decode);
            let positions = if decode { self.positions(&plan) } else { 0.0 };
            let attention = self.seqs.forward_times().all().attention;
            let started = std::time::Instant::now();
            let ran = self.run(&plan, &mut on_logits);
            if ran.is_ok() {
                let secs = started.elapsed().as_secs_f64();
                let tokens = plan.iter().map(|i| i.ids.len()).sum();
                self.drafts.pass_cost.observe(tokens, secs);
                if decode {
                    let attention = self
                        .seqs
                        .forward_times()
                        .all()
                        .attention
                        .saturating_sub(attention);
                    self.drafts.decode_cost.observe(
                        tokens,
                        secs,
                        attention.as_secs_f64(),
                        positions,
                    );
                }
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
            let positions = chosen
                .iter()
                .filter_map(|&s| self.slots[s as usize].live.as_ref()?.seq)
                .map(|seq| self.seqs.tokens(seq).map_or(0, <[u32]>::len) as f64 + 1.0)
                .sum();
            let mut pass = PassSoFar::plain(take, positions);
            for &slot in &chosen {
                let d = if spare > 0 {
                    self.draft(slot, spare, &mut pass)
                } else {
                    (Vec::new(), None)
                };
                spare -= d.0.len();
                drafts.push(d);
            }
            if spare > 0 && self.drafts.model.is_some() {
                let slots = &mut self.slots;
                self.drafts
                    .model_drafts(slots, &self.seqs, &chosen, &mut drafts, spare);
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

    /// The positions of a decode plan's sequences (each one's length
    /// with the pass's first token), before it runs.
    fn positions(&self, plan: &[Item]) -> f64 {
        plan.iter()
            .map(|i| self.seqs.tokens(i.seq).map_or(0, <[u32]>::len) as f64 + 1.0)
            .sum()
    }

    /// Draft tokens for a decoding request (at most `room`), and where
    /// they came from ([`Drafts::propose`]).
    fn draft(
        &mut self,
        slot: u32,
        room: usize,
        pass: &mut PassSoFar,
    ) -> (Vec<u32>, Option<DraftSource>) {
        let Some(l) = self.slots[slot as usize].live.as_mut() else {
            return (Vec::new(), None);
        };
        let tokens = l.seq.and_then(|seq| self.seqs.tokens(seq).ok());
        self.drafts.propose(l, tokens, self.tok, room, pass)
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
}
