//! Sequences, sampling and generation on top of [`fak_model::Model`].
//!
//! A [`Sequence`] owns one sequence's KV store and token history; it can
//! ingest a prompt (prefill), decode token by token, and rewind to a shared
//! prefix (used by chat to reuse the conversation so far). The fleet
//! scheduler and paged KV arrive with the shared-KV work; this crate is
//! where they will live.

mod generate;
mod sampling;

pub use generate::{generate, FinishReason, GenerateParams, Generation, Sequence, StopAt};
pub use sampling::{argmax, Sampler, SamplingParams};

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
}
