//! [`EngineError`], the one error type of generation, in a leaf module so
//! every module of the crate can return it without importing the crate
//! root; `lib.rs` re-exports it as `fak_engine::EngineError`.

use crate::ids::{RequestId, SessionId};
use crate::sampling::BadSampling;

/// Errors of generation. Variants name what was wrong with a request (a
/// client's fault: a 400 over HTTP) apart from what went wrong inside
/// ([`EngineError::is_client_error`]).
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
    /// A context of 0 tokens.
    #[error("the context must hold at least 1 token")]
    ZeroContext,
    /// A context beyond the model's trained context, not allowed
    /// explicitly ([`CtxLimit::BeyondTrained`](crate::CtxLimit::BeyondTrained)).
    #[error(
        "a context of {n_ctx} tokens exceeds the model's trained context of {n_ctx_train} \
         (allow it explicitly: fak's --allow-ctx-beyond-train)"
    )]
    BeyondTrainedContext { n_ctx: usize, n_ctx_train: usize },
    /// The model produced no usable logits.
    #[error("the model produced no usable logits (all NaN)")]
    NoLogits,
    /// The KV cache bookkeeping refused an operation.
    #[error(transparent)]
    Kv(#[from] fak_kv::KvError),
    /// No sequence has this id.
    #[error("unknown sequence {0}")]
    UnknownSeq(u32),
    /// No live request has this id (finished, or never issued).
    #[error("unknown request {0}")]
    UnknownRequest(RequestId),
    /// No live session has this id (freed, never issued, or another
    /// tenant's).
    #[error("unknown session {}.{}", .0.slot, .0.generation)]
    UnknownSession(SessionId),
    /// The session is serving another request.
    #[error("session {}.{} is busy with another request", .0.slot, .0.generation)]
    SessionBusy(SessionId),
    /// A prompt token is not in the vocabulary.
    #[error("prompt token {index} has id {id}, which is not below n_vocab {n_vocab}")]
    TokenOutOfRange {
        index: usize,
        id: u32,
        n_vocab: usize,
    },
    /// The prompt plus `max_tokens` exceed the context.
    #[error(
        "the prompt has {n_prompt_tokens} tokens and max_tokens is {max_tokens}, \
         which exceeds the context of {n_ctx} tokens"
    )]
    ContextOverflow {
        n_prompt_tokens: usize,
        max_tokens: usize,
        n_ctx: usize,
    },
    /// A sampling setting is out of range.
    #[error(transparent)]
    BadSampling(#[from] BadSampling),
    /// Too many top log-probabilities asked for.
    #[error("top_logprobs must be at most {max}, got {n}")]
    BadLogprobs { n: usize, max: usize },
    /// Stop strings need the tokenizer's text.
    #[error("stop strings need an engine with a tokenizer")]
    StopStringsNeedTokenizer,
    /// The request could never fit the KV pool, even alone.
    #[error("the request needs {needed_blocks} KV blocks but the pool has {n_blocks}")]
    RequestTooLarge {
        needed_blocks: usize,
        n_blocks: usize,
    },
    /// The waiting queue is full.
    #[error("the queue is full ({max_waiting} requests waiting)")]
    QueueFull { max_waiting: usize },
    /// Nothing is running and the pool still cannot take the request
    /// (sessions hold the blocks).
    #[error("the KV pool cannot take the request: {needed} blocks needed, {available} free")]
    KvExhausted { needed: usize, available: usize },
    /// The engine stopped after an internal failure.
    #[error("the engine stopped: {0}")]
    Stopped(String),
    /// The agent is in the middle of a turn.
    #[error("agent {0} is busy with a turn")]
    AgentBusy(u32),
    /// A constraint that does not compile (bad schema, regex or grammar).
    #[error("the constraint does not compile: {0}")]
    BadConstraint(String),
    /// Constraints need the tokenizer's vocabulary.
    #[error("constrained decoding needs an engine with a tokenizer")]
    ConstraintNeedsTokenizer,
    /// The grammar failed while generating.
    #[error("the constraint failed while generating: {0}")]
    ConstraintFailed(String),
    /// The operation needs K/V rows of sliding-window layers that were
    /// dropped (outside the window, [`KvWindow::Drop`](crate::KvWindow::Drop)) and cannot be
    /// done exactly without them.
    #[error(
        "sequence {seq}: the operation needs sliding-window K/V rows from position {needed_from}, \
         but rows before position {first_kept} were dropped (outside the window); \
         use exact eviction, or keep every row (--kv-window keep)"
    )]
    WindowDropped {
        seq: u32,
        needed_from: usize,
        first_kept: usize,
    },
    /// The draft model's vocabulary is not the target's.
    #[error("the draft model cannot draft for this model: {0}")]
    DraftVocabMismatch(String),
    /// An eviction span that is empty or not inside the sequence.
    #[error("span {start}..{end} is empty or not inside a sequence of {len} tokens")]
    BadSpan {
        start: usize,
        end: usize,
        len: usize,
    },
}

impl EngineError {
    /// Whether the request was at fault (bad input), as opposed to the
    /// engine or the load: HTTP 400 against 5xx.
    pub fn is_client_error(&self) -> bool {
        matches!(
            self,
            EngineError::ContextFull { .. }
                | EngineError::EmptyPrompt
                | EngineError::ZeroContext
                | EngineError::BeyondTrainedContext { .. }
                | EngineError::UnknownSeq(_)
                | EngineError::BadSpan { .. }
                | EngineError::WindowDropped { .. }
                | EngineError::TokenOutOfRange { .. }
                | EngineError::ContextOverflow { .. }
                | EngineError::BadSampling(_)
                | EngineError::BadLogprobs { .. }
                | EngineError::StopStringsNeedTokenizer
                | EngineError::BadConstraint(_)
                | EngineError::ConstraintNeedsTokenizer
                | EngineError::RequestTooLarge { .. }
        )
    }
}
