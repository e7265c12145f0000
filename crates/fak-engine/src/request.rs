//! What a client hands the [`Engine`](crate::Engine) and what it gets back:
//! requests, their ids, and the events a step reports.
//!
//! ```text
//!   add(Request) ──► RequestId (slot, generation)     never reused
//!        │
//!        ▼   Queued ──admit──► Prefill ──► Decode ──► Finished
//!            ▲                     │          │          (Stop / Length / Cancelled)
//!            └──── preempted ◄─────┴──────────┘
//!   step() ──► [Admitted, Token, Token, ..., Finished | Failed]
//! ```

use std::time::Duration;

use fak_kv::Tenant;

use crate::constraint::Constraint;
use crate::error::EngineError;
pub use crate::ids::{RequestId, SessionId};
use crate::sampling::{Logprobs, SamplingParams};

/// Whether an end-of-generation token ends a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StopAt {
    /// Stop at an end-of-generation token (not included in the output).
    #[default]
    EndOfGeneration,
    /// Always produce `max_tokens` tokens (benchmarks).
    Never,
}

/// When a request stops before `max_tokens`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StopRules {
    /// End-of-generation tokens of the vocabulary.
    pub eog: StopAt,
    /// More token ids that stop generation (not included in the output).
    pub token_ids: Vec<u32>,
    /// Strings that stop generation; the text ends before the first match.
    /// Text that could still become a match is held back until it
    /// resolves.
    pub strings: Vec<String>,
}

/// Where a request's tokens go.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Context {
    /// A new sequence: the prompt is looked up in the tenant's prefix
    /// cache, and the sequence is dropped when the request ends.
    #[default]
    Fresh,
    /// Append to a session: its tokens stay before the prompt, and the
    /// prompt plus the generated tokens stay in it afterwards.
    Session(SessionId),
}

/// How many tokens a request may generate. [`Engine::add`](crate::Engine::add)
/// turns it into one number, once, from the tokens before the output (the
/// prompt, and a session's tokens), the context `n_ctx` and the KV pool:
///
/// ```text
///   room = min(n_ctx, (n_blocks - 1) · block_size) - tokens before, at least 1
///            (one block spare: a copy-on-write of a shared partial block)
///   Strict(n)   n          refused unless it fits
///   Ceiling(n)  min(n, room)
///   Room        room
///   refused: tokens before + n > n_ctx                  EngineError::ContextOverflow
///            ⌈(tokens before + n) / block_size⌉ + 1 > n_blocks
///                                                       EngineError::RequestTooLarge
/// ```
///
/// A prompt that fills the context leaves a room of 1, which is refused
/// (with the numbers a client can act on) rather than answered with no
/// tokens: only a limit of 0 asks for nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MaxTokens {
    /// At most `n` tokens; the request is refused unless the tokens before
    /// the output plus `n` fit both the context and the pool (chat and
    /// completions: a given `max_tokens`). `Strict(0)` generates nothing:
    /// a session request that only appends its prompt.
    Strict(usize),
    /// At most `n` tokens, cut to the room when that is less (the Messages
    /// and Responses APIs, whose clients ask for more than any context).
    Ceiling(usize),
    /// As many tokens as there is room for (no limit given).
    Room,
}

/// One generation request.
#[derive(Debug, Clone)]
pub struct Request {
    /// Prompt token ids (for a session: the tokens to append).
    pub prompt: Vec<u32>,
    /// Sampling settings ([`SamplingParams::validate`] is checked at
    /// [`Engine::add`](crate::Engine::add)).
    pub sampling: SamplingParams,
    /// Most tokens to generate, resolved against the context and the KV
    /// pool at [`Engine::add`](crate::Engine::add); `Strict(0)` only
    /// appends the prompt (sessions).
    pub max_tokens: MaxTokens,
    /// Stop conditions.
    pub stop: StopRules,
    /// Log-probabilities to report with each token.
    pub logprobs: Logprobs,
    /// Cache namespace: prefix blocks are never shared across tenants.
    pub tenant: Tenant,
    /// Fresh sequence or an existing session.
    pub context: Context,
    /// A grammar the output must match (compiled at
    /// [`Engine::add`](crate::Engine::add); `None`: free text).
    pub constraint: Option<Constraint>,
    /// How the request takes part in speculative decoding.
    pub speculation: Speculation,
}

/// Whether the engine may draft tokens for a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SpecMode {
    /// As the engine is set ([`Engine::set_speculative`](crate::Engine::set_speculative)),
    /// and from the request's prediction whatever the engine's setting.
    #[default]
    Engine,
    /// Never: plain decoding (the output is the same either way; this
    /// only changes the speed).
    Off,
}

/// A request's part in speculative decoding.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Speculation {
    /// Whether drafts are made for it.
    pub mode: SpecMode,
    /// Tokens the caller expects the output to repeat, mostly in order
    /// (OpenAI's Predicted Outputs: a file being edited). Drafts come
    /// from here first; verification keeps the output exactly what plain
    /// decoding would write.
    pub prediction: Vec<u32>,
}

impl Request {
    /// A greedy request for at most `max_tokens` tokens after `prompt`
    /// ([`MaxTokens::Strict`]), in tenant 0.
    pub fn greedy(prompt: Vec<u32>, max_tokens: usize) -> Request {
        Request {
            prompt,
            sampling: SamplingParams::greedy(),
            max_tokens: MaxTokens::Strict(max_tokens),
            stop: StopRules::default(),
            logprobs: Logprobs::Off,
            tenant: Tenant(0),
            context: Context::Fresh,
            constraint: None,
            speculation: Speculation::default(),
        }
    }
}

/// Why a request ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FinishReason {
    /// An end-of-generation token was sampled.
    EndOfGeneration,
    /// One of the request's stop token ids was sampled.
    StopToken(u32),
    /// Stop string `k` of the request matched.
    StopString(usize),
    /// `max_tokens` were generated, or the context is full.
    Length,
    /// [`Engine::cancel`](crate::Engine::cancel) ended it.
    Cancelled,
}

impl FinishReason {
    /// The OpenAI name: `stop`, `length` or `cancelled`.
    pub fn openai(self) -> &'static str {
        match self {
            FinishReason::EndOfGeneration
            | FinishReason::StopToken(_)
            | FinishReason::StopString(_) => "stop",
            FinishReason::Length => "length",
            FinishReason::Cancelled => "cancelled",
        }
    }
}

/// The log-probability of one candidate token.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TokenLogprob {
    /// Token id.
    pub token: u32,
    /// Natural log of its probability under the model's logits (before
    /// penalties, temperature or filters).
    pub logprob: f32,
}

/// Log-probabilities reported with a generated token.
#[derive(Debug, Clone, PartialEq)]
pub struct StepLogprobs {
    /// The chosen token.
    pub chosen: TokenLogprob,
    /// The most likely tokens, most likely first (ties: lower id first).
    pub top: Vec<TokenLogprob>,
}

/// Token counts of a request.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    /// Prompt tokens (for a session: the tokens appended by this request,
    /// plus the session's tokens before it).
    pub prompt_tokens: usize,
    /// Prompt tokens whose KV was reused rather than computed (the prefix
    /// cache's hit, or the session's tokens).
    pub cached_tokens: usize,
    /// Tokens generated (a stop token is not counted).
    pub completion_tokens: usize,
    /// Draft tokens taken from the request's prediction that verification
    /// kept (they are in the output).
    pub accepted_prediction_tokens: usize,
    /// Draft tokens taken from the request's prediction that verification
    /// rejected (computed, not in the output).
    pub rejected_prediction_tokens: usize,
}

/// Something that happened to a request during a step.
#[derive(Debug)]
pub enum Event {
    /// The request left the queue and got KV blocks; `cached_tokens` of its
    /// prompt were found in the prefix cache (or its session).
    Admitted {
        /// The request.
        id: RequestId,
        /// Prompt tokens reused.
        cached_tokens: usize,
        /// Time spent waiting in the queue.
        queued: Duration,
    },
    /// A generated token.
    Token {
        /// The request.
        id: RequestId,
        /// Token id.
        token: u32,
        /// Text released by this token: complete UTF-8 only, with text that
        /// may still become a stop string held back (so possibly empty, or
        /// longer than the token's own piece).
        text: String,
        /// Log-probabilities, when the request asked for them.
        logprobs: Option<StepLogprobs>,
    },
    /// The request ended; its KV blocks are released.
    Finished {
        /// The request.
        id: RequestId,
        /// Why.
        reason: FinishReason,
        /// Token counts.
        usage: Usage,
        /// Text held back that turned out not to be a stop string (emitted
        /// last; usually empty).
        text: String,
    },
    /// The request failed alone; the others go on.
    Failed {
        /// The request.
        id: RequestId,
        /// What went wrong.
        error: EngineError,
    },
}

impl Event {
    /// The request the event is about.
    pub fn id(&self) -> RequestId {
        match self {
            Event::Admitted { id, .. }
            | Event::Token { id, .. }
            | Event::Finished { id, .. }
            | Event::Failed { id, .. } => *id,
        }
    }
}

/// A snapshot of the engine's load and counters (what `/metrics` serves).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct EngineStats {
    /// Requests admitted and not finished.
    pub running: usize,
    /// Requests waiting for admission.
    pub waiting: usize,
    /// Fraction of KV blocks in use by live sequences, `0..=1`.
    pub kv_usage: f64,
    /// Physical KV blocks.
    pub n_blocks: usize,
    /// Tokens per block.
    pub block_size: usize,
    /// Prompt tokens looked up in the prefix cache.
    pub prefix_queries_tokens: u64,
    /// Of those, tokens found.
    pub prefix_hits_tokens: u64,
    /// Prompt tokens of admitted requests.
    pub prompt_tokens: u64,
    /// Tokens generated.
    pub generation_tokens: u64,
    /// Requests preempted (blocks freed, recomputed later).
    pub preemptions: u64,
    /// Forward passes run.
    pub passes: u64,
    /// Tokens run through the model.
    pub tokens_computed: u64,
    /// Live sessions (resident or dropped).
    pub sessions: usize,
    /// Idle sessions whose KV rows were dropped under pressure (or on
    /// request); their tokens are recomputed at their next request.
    pub sessions_dropped: u64,
    /// Token masks computed for constrained requests (samples whose
    /// token did not pass the check, or whose settings need the mask).
    pub constraint_masks: u64,
    /// Samples of constrained requests whose token the grammar allowed at
    /// the check, with no mask computed.
    pub constraint_checks: u64,
    /// Time spent on constraints while sampling: checks, computing masks
    /// and applying them to the logits (and the second draw after a miss).
    pub constraint_mask_time: Duration,
    /// [`MaskMode::Overlap`](crate::MaskMode::Overlap): time the engine
    /// thread waited for the mask worker after the forward passes.
    pub constraint_wait_time: Duration,
    /// [`MaskMode::Overlap`](crate::MaskMode::Overlap): time the mask
    /// worker spent computing masks (on its own thread, during the
    /// forward passes).
    pub constraint_worker_time: Duration,
    /// [`MaskMode::Overlap`](crate::MaskMode::Overlap): mask worker
    /// threads started (the first, and one for each that died).
    pub mask_workers_started: u64,
    /// Time inside the forward passes, by phase and pass kind.
    pub forward: fak_model::ForwardTimes,
    /// Drafts verified (speculative decoding): one per sequence per pass
    /// that carried draft tokens.
    pub spec_drafts: u64,
    /// Draft tokens verified.
    pub spec_draft_tokens: u64,
    /// Draft tokens accepted (each saved one pass of its sequence).
    pub spec_accepted_tokens: u64,
    /// Of the draft tokens verified, those from the tenant's recent
    /// outputs (the fleet index).
    pub spec_fleet_draft_tokens: u64,
    /// Of those, the ones accepted.
    pub spec_fleet_accepted_tokens: u64,
    /// Draft tokens a grammar forced (constrained requests).
    pub spec_grammar_draft_tokens: u64,
    /// Of those, the ones accepted.
    pub spec_grammar_accepted_tokens: u64,
    /// Draft tokens the draft model proposed.
    pub spec_model_draft_tokens: u64,
    /// Of those, the ones accepted.
    pub spec_model_accepted_tokens: u64,
    /// The draft model's forward passes.
    pub draft_model_passes: u64,
    /// Time in them.
    pub draft_model_time: Duration,
    /// Steps whose model drafts failed (the draft pool ran out): their
    /// mirrors were dropped, and those steps verified no model draft.
    pub draft_model_failures: u64,
}
