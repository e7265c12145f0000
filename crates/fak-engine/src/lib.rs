//! The request lifecycle of fak: [`Engine`] takes [`Request`]s, runs them
//! together over one paged KV cache, and returns [`Event`]s.
//!
//! ```text
//!   Engine::add(Request) ─► RequestId      validated, queued (limits, max_tokens
//!                                          resolved here, once, for every API)
//!   Engine::step() ─► Vec<Event>           admit while the KV pool holds the prompt,
//!                                          one ragged forward pass (prompt chunks,
//!                                          decode tokens, verified drafts), sample,
//!                                          stop rules, detokenize
//!   Engine::cancel(RequestId)              freed now, Finished(Cancelled) next step
//!   sessions: create / fork / evict / free contexts that outlive a request
//! ```
//!
//! One thread owns an `Engine` (the server's engine thread, `fak generate`,
//! the benchmarks); everything a request needs that is not the model's
//! math lives here: scheduling and preemption ([`EngineConfig`],
//! [`PrefillMix`]), the KV budget ([`PagedKvConfig`], [`MaxTokens`]),
//! sampling ([`Sampler`]), grammar-held output ([`Constraint`]), stop
//! strings, exact speculative decoding ([`Speculative`]) and agent
//! sessions. A sequence's logits do not depend on what runs beside it.
//!
//! Below it, [`Sequences`] runs many sequences over one paged,
//! copy-on-write KV cache ([`PagedKv`], bookkeeping from fak-kv): ragged
//! steps mixing prefill chunks and decode tokens, O(blocks) forks, prefix
//! reuse through the radix index, and exact span eviction. [`Fleet`] drives
//! agents of one fleet as engine sessions; [`generate`] and
//! [`generate_many`] are one-shot clients of `Engine`; [`Sequence`] is one
//! flat sequence (tests and the single-stream benchmark).

#![forbid(unsafe_code)]

mod constraint;
mod drafter;
mod engine;
mod error;
mod fleet;
mod generate;
mod ids;
mod many;
mod paged;
mod request;
mod sampling;
mod seqs;
mod spec;

pub use constraint::Constraint;
pub use drafter::DraftParams;
#[cfg(feature = "fault-injection")]
pub use engine::MaskFault;
pub use engine::{
    Engine, EngineConfig, MaskMode, PrefillMix, Residency, SessionBlocks, DEFAULT_TOKEN_BUDGET,
    SERIAL_PREFILL,
};
pub use error::EngineError;
pub use fak_kv::{block_hash, KvEvent, PoolStats, Tenant};
pub use fleet::{AgentId, Fleet, FleetConfig, FleetCounters, FleetEvent};
pub use generate::{
    check_context, generate, generate_drafted, request_context, CtxLimit, Drafting, GenerateParams,
    Generation, Sequence,
};
pub use many::{generate_many, BatchMode, ManyParams};
pub use paged::{
    GroupStats, KvBudget, KvBudgetError, KvWindow, PagedKv, PagedKvConfig, DEFAULT_BLOCK_SIZE,
    FLEET_BLOCK_SIZE, MAX_SEQUENCES_KV_BYTES,
};
pub use request::{
    Context, EngineStats, Event, FinishReason, MaxTokens, Request, RequestId, SessionId, SpecMode,
    Speculation, StepLogprobs, StopAt, StopRules, TokenLogprob, Usage,
};
/// The full-vocabulary-sort sampler that [`Sampler`] replaced: a benchmark
/// baseline and test oracle, not for production.
#[doc(hidden)]
pub use sampling::reference as sampling_reference;
pub use sampling::{argmax, BadSampling, Logprobs, Sampler, SamplingParams, MAX_TOP_LOGPROBS};
pub use seqs::{Append, EvictMode, EvictReport, PrefixCache, Rows, Sequences};
pub use spec::{longest_match, prompt_lookup, LookupParams, Match, Speculative};
