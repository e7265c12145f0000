//! Sequences, sampling and generation on top of [`fak_model::Model`].
//!
//! A [`Sequence`] owns one sequence's KV store and token history; it can
//! ingest a prompt (prefill), decode token by token, and rewind to a shared
//! prefix (used by chat to reuse the conversation so far).
//!
//! [`Sequences`] runs many sequences over one paged, copy-on-write KV
//! cache ([`PagedKv`], bookkeeping from fak-kv): ragged steps mixing
//! prefill chunks and decode tokens, O(blocks) forks, prefix reuse through
//! the radix index, and exact span eviction.

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
