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

mod fleet;
mod generate;
mod many;
mod paged;
mod sampling;
mod seqs;

pub use fak_kv::{PoolStats, Tenant};
pub use fleet::{AgentId, Fleet, FleetConfig, FleetCounters, FleetEvent};
pub use generate::{generate, FinishReason, GenerateParams, Generation, Sequence, StopAt};
pub use many::{generate_many, BatchMode, ManyParams};
pub use paged::{PagedKv, PagedKvConfig, DEFAULT_BLOCK_SIZE, FLEET_BLOCK_SIZE};
pub use sampling::{argmax, Sampler, SamplingParams};
pub use seqs::{Append, EvictMode, EvictReport, PrefixCache, Sequences};

/// Errors of generation.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// The model failed.
    #[error(transparent)]
    Model(#[from] fak_model::ModelError),
    /// The request does not fit the context.
    #[error("{needed} tokens do not fit the context of {n_ctx}")]
    ContextFull { needed: usize, n_ctx: usize },
    /// The prompt is empty.
    #[error("the prompt is empty (no tokens to condition on)")]
    EmptyPrompt,
    /// The model produced no usable logits.
    #[error("the model produced no usable logits (all NaN)")]
    NoLogits,
    /// The KV cache bookkeeping refused an operation.
    #[error(transparent)]
    Kv(#[from] fak_kv::KvError),
    /// No sequence has this id.
    #[error("unknown sequence {0}")]
    UnknownSeq(u32),
    /// The agent is in the middle of a turn.
    #[error("agent {0} is busy with a turn")]
    AgentBusy(u32),
    /// An eviction span that is empty or not inside the sequence.
    #[error("span {start}..{end} is empty or not inside a sequence of {len} tokens")]
    BadSpan {
        start: usize,
        end: usize,
        len: usize,
    },
}
