//! A request's way into and out of the running set: admission while the
//! KV pool can hold its prompt, and the ways it leaves (finished, failed,
//! preempted to be recomputed later, cancelled), each settling its
//! sequence: published to the prefix cache, freed, or a session cut back.
//!
//! ```text
//!   queue ─admit─► running ─finish/fail─► release ─► slot free
//!                    │  └─preempt─► queue head (recomputed when admitted:
//!                    │                          the same logits)
//!   Release::Finish: a fresh sequence is published, then freed;
//!   Release::Rollback: a session goes back to what it held before
//! ```

use super::{Engine, Live, Phase, Release};
use crate::error::EngineError;
use crate::request::{Context, Event, FinishReason, RequestId};
use crate::seqs::PrefixCache;

impl Engine<'_> {
    /// Admits queued requests, oldest first, while the pool can hold their
    /// prompts. A request whose prompt shares whole blocks with one that is
    /// prefilling now waits for those blocks to reach the prefix cache
    /// instead of computing them a second time (later requests may pass
    /// it meanwhile).
    pub(super) fn admit(&mut self, events: &mut Vec<Event>) -> Result<(), EngineError> {
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
                Context::Fresh => (self.seqs.create(live.req.tenant)?, true),
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
    pub(super) fn awaits_prefix(&self, live: &Live) -> bool {
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
            self.drafts.record(l.req.tenant, &l.generated);
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
    pub(super) fn fail(
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
    pub(super) fn preempt(&mut self, slot: u32) -> Result<(), EngineError> {
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
        self.drafts.release(slot);
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
