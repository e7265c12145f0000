//! The request-lifecycle engine: one scheduler for every request, driven
//! by one owner (the engine thread), over one paged KV cache.
//!
//! ```text
//!   add(Request) ─► validate ─► queue (FIFO) ──admit when the KV pool can
//!                                  ▲            take the prompt's blocks──┐
//!                                  │ preempt youngest (blocks freed,      ▼
//!                                  │ recomputed later, same tokens)   running
//!   step():                        │                                      │
//!     1. admit from the queue (prefix cache looked up per tenant)         │
//!     2. plan one pass of ≤ token_budget tokens:                          │
//!          decode tokens, round-robin from a rotating cursor              │
//!          + prefill chunks, oldest admission first                       │
//!     3. forward; out of blocks ─► preempt the youngest, plan again ──────┘
//!     4. sample (penalties, top-k/p, min-p), stop rules, text ─► events
//!     5. finished: publish blocks to the prefix cache, free the sequence
//! ```
//!
//! A request's tokens are fed one step after they are sampled: a decode
//! item is the request's last sampled token, and its logits give the next
//! one. A request's last token is never fed (nobody reads its logits); in
//! a [`Context::Session`] it is kept and fed first at the next request.
//!
//! Every request's logits are a function of its own tokens only (the
//! model is batch-invariant and the cache stores rows exactly), so where
//! it runs, what runs beside it, and whether it was preempted and
//! recomputed never change its output.

mod drafts;
mod lifecycle;
mod masks;
mod pick;
mod sessions;
mod step;
#[cfg(test)]
mod tests;
mod text;

#[cfg(feature = "fault-injection")]
pub use crate::constraint::MaskFault;
pub use masks::MaskMode;
pub use sessions::{Residency, SessionBlocks};

use std::collections::VecDeque;
use std::time::Instant;

use fak_model::{Model, SeqId};
use fak_tokenizer::{StreamDecoder, Tokenizer};

use crate::constraint::{ConstraintState, Grammars};
use crate::error::EngineError;
use crate::paged::PagedKvConfig;
use crate::request::{
    Context, EngineStats, Event, FinishReason, MaxTokens, Request, RequestId, Usage,
};
use crate::sampling::{Logprobs, Sampler, MAX_TOP_LOGPROBS};
use crate::seqs::{PrefixCache, Sequences};
use sessions::SessionSlot;
use text::StopScanner;

/// Default most tokens in one forward pass.
pub const DEFAULT_TOKEN_BUDGET: usize = 512;

/// How a pass takes in prompts that wait to be prefilled (after its
/// decode tokens, within the token budget).
///
/// ```text
///   8 prompts of ~100 tokens arrive together, budget 512:
///   Fill     pass 1: p1 p2 p3 p4 p5 (+p6…)  ── first tokens of p1..p5 after 500 tokens
///            pass 2: p6 p7 p8               ── p6..p8 after 800
///   Serial   pass 1: p1 ── pass 2: p2 ── …  ── p_k's first token after k·100 tokens
/// ```
///
/// A pass's fixed cost is reading every weight once, which on CPUs costs
/// about as much as computing a handful of tokens (the machine's int8
/// peak over its read bandwidth: ~6 tokens of a Q8_0 model on a 2-core
/// Zen 3). Beyond that, putting two prompts in one pass only delays the
/// first one's first token by the second one's compute. `Serial` starts
/// prompts one after another, so a burst's median time to first token is
/// about half of `Fill`'s, at the same total compute; and once the
/// requests of a closed loop finish at different passes, their successors
/// arrive spread out too.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PrefillMix {
    /// Prefill chunks fill the budget, oldest request first: the fewest
    /// passes for a batch of prompts (offline batches, fleets).
    Fill,
    /// A pass starts another request's prefill only while it holds fewer
    /// than `join_below` tokens (decode tokens included); the prefill it
    /// runs may still take the whole budget. Tiny prompts still share a
    /// pass; longer ones go one per pass, oldest first.
    Serial {
        /// Tokens below which a pass takes in one more prompt.
        join_below: usize,
    },
}

/// The serving default: [`PrefillMix::Serial`] joining prompts while a
/// pass holds fewer than 16 tokens (a few times a CPU's weight-read cost
/// in tokens, so bursts of short prompts still batch).
pub const SERIAL_PREFILL: PrefillMix = PrefillMix::Serial { join_below: 16 };

/// Sizes and policies of an [`Engine`].
#[derive(Debug, Clone, Copy)]
pub struct EngineConfig {
    /// KV cache sizes.
    pub kv: PagedKvConfig,
    /// Most tokens in one forward pass (decode tokens first, then prefill
    /// chunks).
    pub token_budget: usize,
    /// Most requests admitted at once.
    pub max_running: usize,
    /// Most requests waiting for admission; [`Engine::add`] refuses more
    /// with [`EngineError::QueueFull`]. `None`: no limit.
    pub max_waiting: Option<usize>,
    /// Most tokens one sequence may hold (prompt plus generated).
    pub n_ctx: usize,
    /// Whether requests reuse, and offer, cached prefixes.
    pub prefix_cache: PrefixCache,
    /// How a pass takes in prompts waiting to be prefilled.
    pub prefill: PrefillMix,
    /// Where constrained requests' token masks are computed.
    pub mask: MaskMode,
}

impl EngineConfig {
    /// Room for `n_req` requests of up to `n_ctx` tokens each, all running
    /// at once, in [`DEFAULT_BLOCK_SIZE`](crate::paged::DEFAULT_BLOCK_SIZE)-token
    /// blocks (one spare block per request for a copy-on-write).
    pub fn for_requests(
        n_req: usize,
        n_ctx: usize,
        kv_type: fak_model::KvType,
        prefix_cache: PrefixCache,
    ) -> EngineConfig {
        let bs = crate::paged::DEFAULT_BLOCK_SIZE;
        let n_req = n_req.max(1);
        EngineConfig {
            kv: PagedKvConfig::for_sequences(bs, n_req, n_ctx.saturating_add(bs))
                .with_kv_type(kv_type),
            token_budget: DEFAULT_TOKEN_BUDGET,
            max_running: n_req,
            max_waiting: None,
            n_ctx,
            prefix_cache,
            prefill: SERIAL_PREFILL,
            mask: MaskMode::default(),
        }
    }
}

/// What bounds a request's output: the context and the KV pool. The one
/// place a [`MaxTokens`] becomes a number of tokens, and the number is
/// checked (see [`MaxTokens`] for the rule).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct OutputBounds {
    /// Most tokens one sequence may hold.
    n_ctx: usize,
    /// Tokens per KV block.
    block_size: usize,
    /// Physical KV blocks.
    n_blocks: usize,
}

impl OutputBounds {
    fn of(cfg: &EngineConfig) -> OutputBounds {
        OutputBounds {
            n_ctx: cfg.n_ctx,
            block_size: cfg.kv.block_size.max(1),
            n_blocks: cfg.kv.n_blocks,
        }
    }

    /// Most tokens a sequence can hold: the context, and no more than the
    /// pool could ever give one request alone, one block spare for a
    /// copy-on-write of a shared partial block.
    fn most_tokens(self) -> usize {
        let pool = self
            .n_blocks
            .saturating_sub(1)
            .saturating_mul(self.block_size);
        self.n_ctx.min(pool)
    }

    /// The output budget of a request with `n_prompt` tokens before its
    /// output: `Room` and `Ceiling` never ask for more than fits (but for
    /// at least 1 token, so a full context is refused by
    /// [`OutputBounds::check`], not answered with nothing).
    fn resolve(self, max: MaxTokens, n_prompt: usize) -> usize {
        let room = self.most_tokens().saturating_sub(n_prompt).max(1);
        match max {
            MaxTokens::Strict(n) => n,
            MaxTokens::Ceiling(n) => n.min(room),
            MaxTokens::Room => room,
        }
    }

    /// Whether `n_prompt` tokens plus `max_tokens` fit the context, and
    /// the pool on its own (or the request could never finish).
    ///
    /// # Errors
    ///
    /// [`EngineError::ContextOverflow`], [`EngineError::RequestTooLarge`].
    fn check(self, n_prompt: usize, max_tokens: usize) -> Result<(), EngineError> {
        let total = n_prompt
            .checked_add(max_tokens)
            .filter(|&t| t <= self.n_ctx)
            .ok_or(EngineError::ContextOverflow {
                n_prompt_tokens: n_prompt,
                max_tokens,
                n_ctx: self.n_ctx,
            })?;
        // +1: a copy-on-write of a shared partial block.
        let needed = total.div_ceil(self.block_size) + 1;
        if needed > self.n_blocks {
            return Err(EngineError::RequestTooLarge {
                needed_blocks: needed,
                n_blocks: self.n_blocks,
            });
        }
        Ok(())
    }
}

/// Where a request is in its lifecycle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Queued,
    Prefill,
    Decode,
}

/// A live request.
struct Live {
    req: Request,
    /// Most tokens to generate: `req.max_tokens` resolved at
    /// [`Engine::add`] ([`OutputBounds::resolve`]).
    max_tokens: usize,
    phase: Phase,
    /// The sequence, while admitted.
    seq: Option<SeqId>,
    /// Tokens the sequence held before this request (its session's).
    base: usize,
    /// A dropped session's tokens, fed again before the prompt (kept so a
    /// rollback can drop the session again as it was).
    restore: Option<Vec<u32>>,
    /// Tokens this request appends before it samples: the session's unfed
    /// token, then the prompt (and, after a preemption, what it generated).
    input: Vec<u32>,
    /// Length of `input` at [`Engine::add`] (before any preemption).
    n_input: usize,
    /// How many of `input` are in the sequence.
    fed: usize,
    /// Sampled tokens (a stop token is not kept).
    generated: Vec<u32>,
    /// The last sampled token, not yet fed.
    unfed: Option<u32>,
    sampler: Sampler,
    /// The grammar the output must match, if any.
    constraint: Option<ConstraintState>,
    decoder: StreamDecoder,
    scanner: StopScanner,
    /// Prompt tokens reused (first admission).
    cached: usize,
    /// Whether [`Event::Admitted`] was sent.
    reported: bool,
    queued_at: Instant,
    /// Admission order (higher is younger).
    ticket: u64,
    /// Where drafting from the request's prediction stands.
    pred: PredictionState,
    /// How often its prompt-lookup drafts were accepted.
    acceptance: crate::spec::Acceptance,
    /// How often its fleet-index drafts were accepted.
    fleet_acceptance: crate::spec::Acceptance,
    /// How often its draft model's drafts were accepted.
    model_acceptance: crate::spec::Acceptance,
}

/// A request's progress through its prediction (see
/// [`crate::spec::prediction_draft`]).
#[derive(Debug, Clone, Copy, Default)]
struct PredictionState {
    /// Position in the prediction where the output is expected to
    /// continue: just after the last accepted draft token.
    cursor: usize,
    /// Prediction tokens verification kept.
    accepted: usize,
    /// Prediction tokens verification rejected.
    rejected: usize,
    /// How often its drafts were accepted (their length follows it).
    acceptance: crate::spec::Acceptance,
}

struct Slot {
    generation: u32,
    live: Option<Live>,
}

/// The request-lifecycle scheduler over one model and one paged KV cache.
pub struct Engine<'m> {
    model: &'m Model,
    tok: Option<&'m Tokenizer>,
    cfg: EngineConfig,
    seqs: Sequences,
    slots: Vec<Slot>,
    free_slots: Vec<u32>,
    sessions: Vec<SessionSlot>,
    free_sessions: Vec<u32>,
    queue: VecDeque<u32>,
    /// Admitted requests, oldest admission first.
    running: Vec<u32>,
    /// Round-robin start among decoding requests.
    cursor: usize,
    next_ticket: u64,
    /// Events produced outside `step` (cancellations), sent at the next.
    pending: Vec<Event>,
    stats: EngineStats,
    /// Use counter of sessions (least recently used are dropped first).
    uses: u64,
    /// The constraint compiler, built at the first constrained request.
    grammars: Option<Grammars>,
    /// Logits of a constrained request, masked (reused between samples).
    masked: Vec<f32>,
    /// The mask worker ([`MaskMode::Overlap`]), started at the first
    /// constrained pass.
    masks: Option<masks::MaskWorker>,
    /// Speculative decoding: the draft sources and what they measured.
    drafts: drafts::Drafts<'m>,
}

impl<'m> Engine<'m> {
    /// An engine for `model`. Without a tokenizer, events carry no text,
    /// end-of-generation tokens are not known, and stop strings are
    /// refused.
    ///
    /// # Errors
    ///
    /// [`EngineError::Kv`] for unusable cache sizes.
    pub fn new(
        model: &'m Model,
        tok: Option<&'m Tokenizer>,
        cfg: EngineConfig,
    ) -> Result<Engine<'m>, EngineError> {
        let cfg = EngineConfig {
            token_budget: cfg.token_budget.max(1),
            max_running: cfg.max_running.max(1),
            ..cfg
        };
        let seqs = Sequences::new(model, cfg.kv, cfg.prefix_cache, cfg.token_budget)?;
        let stats = EngineStats {
            n_blocks: cfg.kv.n_blocks,
            block_size: cfg.kv.block_size,
            ..EngineStats::default()
        };
        Ok(Engine {
            model,
            tok,
            cfg,
            seqs,
            slots: Vec::new(),
            free_slots: Vec::new(),
            sessions: Vec::new(),
            free_sessions: Vec::new(),
            queue: VecDeque::new(),
            running: Vec::new(),
            cursor: 0,
            next_ticket: 0,
            pending: Vec::new(),
            stats,
            uses: 0,
            grammars: None,
            masked: Vec::new(),
            masks: None,
            drafts: drafts::Drafts::new(),
        })
    }

    /// Turns speculative decoding on or off from the next step on. With
    /// drafts, a sequence's ids, logits and events are the same as plain
    /// decoding's: each verified position is sampled from the model's own
    /// logits with the request's sampler (and grammar), and a draft token
    /// is kept only while it equals the sampled one (see `step.rs`).
    pub fn set_speculative(&mut self, spec: crate::spec::Speculative) {
        self.drafts.mode = spec;
    }

    /// Sets a draft model, used by [`Speculative::Draft`] and
    /// [`Speculative::Auto`]: a second model of the same vocabulary whose
    /// greedy continuations the target verifies (see the `drafter`
    /// module). Its KV pool has as many blocks as the target's.
    ///
    /// [`Speculative::Draft`]: crate::spec::Speculative::Draft
    /// [`Speculative::Auto`]: crate::spec::Speculative::Auto
    ///
    /// # Errors
    ///
    /// [`EngineError::DraftVocabMismatch`] when the vocabularies differ;
    /// [`EngineError::Kv`] for unusable sizes.
    pub fn set_draft_model(
        &mut self,
        draft: &'m Model,
        params: crate::drafter::DraftParams,
    ) -> Result<(), EngineError> {
        self.drafts.model = Some(crate::drafter::Drafter::new(
            self.model,
            draft,
            params,
            self.cfg.kv,
            self.cfg.token_budget,
        )?);
        Ok(())
    }

    /// Starts logging which prefixes the KV cache holds, for a KV-aware
    /// router (vLLM's KV-cache events; see [`fak_kv::KvEvent`]): a block is
    /// stored when its prefix becomes findable (published) and removed when
    /// the pool evicts it. The draft model's cache never reports.
    pub fn enable_kv_events(&mut self) {
        self.seqs.enable_kv_events();
    }

    /// Starts the prefix events over: the ones not yet taken are dropped,
    /// and the next ones say the cache holds nothing, then store every
    /// published block. The engine thread calls it after it had to drop
    /// events, so that a router's index is whole again.
    pub fn restart_kv_events(&mut self) {
        self.seqs.restart_kv_events();
    }

    /// The prefix events since the last call, oldest first (none unless
    /// [`Engine::enable_kv_events`] was called). The engine thread drains
    /// them after each step and hands them on; nothing slow happens here.
    pub fn take_kv_events(&mut self) -> Vec<fak_kv::KvEvent> {
        self.seqs.take_kv_events()
    }

    /// Changes where constrained requests' masks are computed, from the
    /// next step on (no mask is in flight between steps).
    pub fn set_mask_mode(&mut self, mode: MaskMode) {
        self.cfg.mask = mode;
    }

    /// The configuration.
    pub fn config(&self) -> &EngineConfig {
        &self.cfg
    }

    /// The model.
    pub fn model(&self) -> &'m Model {
        self.model
    }

    /// The sequences and their KV store (block statistics).
    pub fn sequences(&self) -> &Sequences {
        &self.seqs
    }

    /// Load and counters.
    pub fn stats(&self) -> EngineStats {
        let p = self.seqs.kv().stats();
        EngineStats {
            running: self.running.len(),
            waiting: self.queue.len(),
            sessions: self.sessions.iter().filter(|s| s.live.is_some()).count(),
            kv_usage: if p.capacity == 0 {
                0.0
            } else {
                p.used as f64 / p.capacity as f64
            },
            forward: self.seqs.forward_times(),
            draft_model_passes: self.drafts.model.as_ref().map_or(0, |d| d.counters.passes),
            draft_model_time: self
                .drafts
                .model
                .as_ref()
                .map_or_else(Default::default, |d| d.counters.time),
            draft_model_failures: self
                .drafts
                .model
                .as_ref()
                .map_or(0, |d| d.counters.failures),
            ..self.stats
        }
    }

    /// Whether a step would do anything.
    pub fn has_work(&self) -> bool {
        !self.queue.is_empty() || !self.running.is_empty() || !self.pending.is_empty()
    }

    /// Queues a request. It is checked here, so a bad request never reaches
    /// a forward pass: it fails alone, before it could fail others.
    ///
    /// # Errors
    ///
    /// [`EngineError::EmptyPrompt`], [`EngineError::TokenOutOfRange`],
    /// [`EngineError::BadSampling`], [`EngineError::BadLogprobs`],
    /// [`EngineError::StopStringsNeedTokenizer`],
    /// [`EngineError::ContextOverflow`], [`EngineError::RequestTooLarge`],
    /// [`EngineError::QueueFull`], [`EngineError::BadConstraint`],
    /// [`EngineError::ConstraintNeedsTokenizer`]; for a session
    /// [`EngineError::UnknownSession`] or [`EngineError::SessionBusy`].
    pub fn add(&mut self, req: Request) -> Result<RequestId, EngineError> {
        let (base, mut input, restore) = match req.context {
            Context::Fresh => (0, Vec::new(), None),
            Context::Session(s) => {
                let i = self.session_input(s, req.tenant)?;
                (i.base, i.feed, i.restore)
            }
        };
        input.extend_from_slice(&req.prompt);
        let n_prompt = base + input.len();
        let bounds = OutputBounds::of(&self.cfg);
        let max_tokens = bounds.resolve(req.max_tokens, n_prompt);
        if input.is_empty() && (max_tokens > 0 || req.context == Context::Fresh) {
            return Err(EngineError::EmptyPrompt);
        }
        let n_vocab = self.model.config().n_vocab;
        if let Some((index, &id)) = req
            .prompt
            .iter()
            .enumerate()
            .find(|(_, &t)| t as usize >= n_vocab)
        {
            return Err(EngineError::TokenOutOfRange { index, id, n_vocab });
        }
        req.sampling.validate()?;
        if let Logprobs::Top(n) = req.logprobs {
            if n > MAX_TOP_LOGPROBS {
                return Err(EngineError::BadLogprobs {
                    n,
                    max: MAX_TOP_LOGPROBS,
                });
            }
        }
        if self.tok.is_none() && req.stop.strings.iter().any(|s| !s.is_empty()) {
            return Err(EngineError::StopStringsNeedTokenizer);
        }
        bounds.check(n_prompt, max_tokens)?;
        if let Some(max) = self.cfg.max_waiting {
            if self.queue.len() >= max {
                return Err(EngineError::QueueFull { max_waiting: max });
            }
        }
        let constraint = match &req.constraint {
            None => None,
            Some(c) => Some(self.grammars()?.compile(c)?),
        };
        let live = Live {
            phase: Phase::Queued,
            seq: None,
            base,
            restore,
            n_input: input.len(),
            input,
            fed: 0,
            generated: Vec::new(),
            unfed: None,
            sampler: Sampler::new(req.sampling),
            constraint,
            decoder: StreamDecoder::new(),
            scanner: StopScanner::new(&req.stop.strings),
            cached: 0,
            reported: false,
            queued_at: Instant::now(),
            ticket: 0,
            pred: PredictionState::default(),
            acceptance: crate::spec::Acceptance::default(),
            fleet_acceptance: crate::spec::Acceptance::default(),
            model_acceptance: crate::spec::Acceptance::default(),
            max_tokens,
            req,
        };
        let slot = match self.free_slots.pop() {
            Some(s) => s,
            None => {
                self.slots.push(Slot {
                    generation: 0,
                    live: None,
                });
                (self.slots.len() - 1) as u32
            }
        };
        let context = live.req.context;
        let entry = &mut self.slots[slot as usize];
        entry.live = Some(live);
        let id = RequestId {
            slot,
            generation: entry.generation,
        };
        if let Context::Session(s) = context {
            if let Err(e) = self.claim_session(s, id) {
                self.slots[slot as usize].live = None;
                self.free_slots.push(slot);
                return Err(e);
            }
        }
        self.queue.push_back(slot);
        Ok(id)
    }

    /// Ends a request in any state; its KV blocks are freed now, and
    /// [`Event::Finished`] with [`FinishReason::Cancelled`] comes at the
    /// next step. A cancelled session request leaves the session as it was
    /// before the request.
    ///
    /// # Errors
    ///
    /// [`EngineError::UnknownRequest`] for an id that is finished or was
    /// never issued.
    pub fn cancel(&mut self, id: RequestId) -> Result<(), EngineError> {
        self.live(id)?;
        self.queue.retain(|&s| s != id.slot);
        let usage = self.usage(id.slot);
        self.release(id.slot, Release::Rollback)?;
        self.pending.push(Event::Finished {
            id,
            reason: FinishReason::Cancelled,
            usage,
            text: String::new(),
        });
        Ok(())
    }

    /// Builds the constraint compiler now rather than on the first
    /// constrained request. It is a token trie over the whole vocabulary
    /// (about half a second for Qwen2.5's 151,936 tokens on one Zen 5
    /// core), and built on first use it stalls every running sequence's
    /// step while the engine thread builds it. A server calls this while
    /// it loads. Without a tokenizer there is nothing to build.
    ///
    /// # Errors
    ///
    /// [`EngineError::BadConstraint`] when the vocabulary cannot carry a
    /// grammar (no end token); constrained requests then fail the same
    /// way, and the others are served.
    pub fn prepare_constraints(&mut self) -> Result<(), EngineError> {
        if self.tok.is_some() {
            self.grammars()?;
        }
        Ok(())
    }

    /// Whether the constraint compiler is built ([`Engine::prepare_constraints`]).
    pub fn constraints_ready(&self) -> bool {
        self.grammars.is_some()
    }

    /// The constraint compiler, built on first use unless
    /// [`Engine::prepare_constraints`] built it (a token trie over the
    /// whole vocabulary).
    fn grammars(&mut self) -> Result<&Grammars, EngineError> {
        let tok = self.tok.ok_or(EngineError::ConstraintNeedsTokenizer)?;
        if self.grammars.is_none() {
            self.grammars = Some(Grammars::new(tok, self.model.config().n_vocab)?);
        }
        self.grammars
            .as_ref()
            .ok_or(EngineError::ConstraintNeedsTokenizer)
    }

    fn live(&self, id: RequestId) -> Result<&Live, EngineError> {
        self.slots
            .get(id.slot as usize)
            .filter(|s| s.generation == id.generation)
            .and_then(|s| s.live.as_ref())
            .ok_or(EngineError::UnknownRequest(id))
    }

    /// Token counts of a live request so far.
    fn usage(&self, slot: u32) -> Usage {
        self.slots[slot as usize]
            .live
            .as_ref()
            .map_or(Usage::default(), |l| Usage {
                prompt_tokens: l.base + l.n_input,
                cached_tokens: l.base + l.cached,
                completion_tokens: l.generated.len(),
                accepted_prediction_tokens: l.pred.accepted,
                rejected_prediction_tokens: l.pred.rejected,
            })
    }
}

/// What releasing a request does to its sequence.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Release {
    /// The request finished: a fresh sequence is published (prefix cache)
    /// and freed; a session keeps the tokens and the last one as unfed.
    Finish,
    /// Cancelled or failed: a fresh sequence is freed; a session goes back
    /// to its state before the request.
    Rollback,
}
