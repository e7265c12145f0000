//! Single-sequence generation: [`generate`] is one request through the
//! [`Engine`]; [`Sequence`] is one flat-KV sequence that tests and the
//! single-stream benchmark drive by hand.

use std::ops::ControlFlow;

use fak_model::{
    Batch, FlatKv, KvStore, KvType, LogitsWanted, Model, ModelConfig, SeqId, Workspace,
};
use fak_tokenizer::Tokenizer;

use crate::engine::{Engine, EngineConfig};
use crate::error::EngineError;
use crate::request::{Event, FinishReason, Request, RequestId, StopAt, StopRules};
use crate::sampling::SamplingParams;
use crate::seqs::PrefixCache;

/// What to generate.
#[derive(Debug, Clone, Copy)]
pub struct GenerateParams {
    /// Maximum number of new tokens.
    pub max_tokens: usize,
    /// Sampling settings.
    pub sampling: SamplingParams,
    /// Stop condition.
    pub stop: StopAt,
    /// Element type of the KV cache.
    pub kv_type: KvType,
    /// Whether decoding verifies drafted tokens (the output is the same).
    pub speculative: crate::spec::Speculative,
    /// Whether the context may exceed the model's trained context.
    pub ctx_limit: CtxLimit,
}

/// How far a context may reach.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CtxLimit {
    /// At most the model's trained context (`n_ctx_train`, the GGUF's
    /// `context_length`).
    #[default]
    Trained,
    /// Beyond it too, when asked for explicitly (positions past
    /// `n_ctx_train` are outside what the model was trained on; the KV
    /// size is still checked).
    BeyondTrained,
}

/// Checks a context of `n_ctx` tokens for `model` under `limit`, before
/// anything is allocated for it.
///
/// # Errors
///
/// [`EngineError::ZeroContext`] for 0; [`EngineError::BeyondTrainedContext`]
/// when `n_ctx > model.n_ctx_train` under [`CtxLimit::Trained`].
pub fn check_context(
    model: &ModelConfig,
    n_ctx: usize,
    limit: CtxLimit,
) -> Result<(), EngineError> {
    if n_ctx == 0 {
        return Err(EngineError::ZeroContext);
    }
    if limit == CtxLimit::Trained && n_ctx > model.n_ctx_train {
        return Err(EngineError::BeyondTrainedContext {
            n_ctx,
            n_ctx_train: model.n_ctx_train,
        });
    }
    Ok(())
}

/// The context `prompt + max_tokens` of one request, checked by
/// [`check_context`].
///
/// # Errors
///
/// As [`check_context`]; [`EngineError::BeyondTrainedContext`] also when
/// the sum overflows.
pub fn request_context(
    model: &ModelConfig,
    prompt_len: usize,
    max_tokens: usize,
    limit: CtxLimit,
) -> Result<usize, EngineError> {
    let n_ctx = prompt_len
        .checked_add(max_tokens)
        .ok_or(EngineError::BeyondTrainedContext {
            n_ctx: usize::MAX,
            n_ctx_train: model.n_ctx_train,
        })?;
    check_context(model, n_ctx, limit)?;
    Ok(n_ctx)
}

/// The result of [`generate`].
#[derive(Debug, Clone)]
pub struct Generation {
    /// The prompt's token ids.
    pub prompt_ids: Vec<u32>,
    /// The new token ids (without a final end-of-generation token).
    pub generated_ids: Vec<u32>,
    /// The new tokens as text.
    pub text: String,
    /// Why it stopped.
    pub finish: FinishReason,
    /// The engine's counters at the end (forward passes, draft tokens and
    /// those accepted); for a batch, the whole batch's.
    pub stats: crate::request::EngineStats,
}

/// One sequence with its own KV store.
pub struct Sequence {
    kv: FlatKv,
    ws: Workspace,
    tokens: Vec<u32>,
}

const SEQ: SeqId = SeqId(0);

impl Sequence {
    /// A sequence for `model` with room for `n_ctx` positions.
    ///
    /// # Errors
    ///
    /// [`EngineError::Model`] if the KV store's size overflows or cannot
    /// be allocated.
    pub fn new(model: &Model, n_ctx: usize) -> Result<Sequence, EngineError> {
        Sequence::with_kv_type(model, n_ctx, KvType::F16)
    }

    /// Like [`Sequence::new`], with the KV cache stored as `kv_type`.
    ///
    /// # Errors
    ///
    /// [`EngineError::Model`] if `kv_type` cannot hold the model's rows.
    pub fn with_kv_type(
        model: &Model,
        n_ctx: usize,
        kv_type: KvType,
    ) -> Result<Sequence, EngineError> {
        let kv = FlatKv::for_model_typed(model.config(), n_ctx, 1, kv_type)
            .map_err(fak_model::ModelError::from)?;
        Ok(Sequence {
            kv,
            ws: Workspace::new(),
            tokens: Vec::new(),
        })
    }

    /// Tokens held so far.
    pub fn tokens(&self) -> &[u32] {
        &self.tokens
    }

    /// Context capacity.
    pub fn n_ctx(&self) -> usize {
        self.kv.n_ctx()
    }

    /// Keeps only the first `n` tokens (their KV stays valid).
    pub fn truncate(&mut self, n: usize) -> Result<(), EngineError> {
        self.kv
            .truncate(SEQ, n)
            .map_err(fak_model::ModelError::from)?;
        self.tokens.truncate(n);
        Ok(())
    }

    /// Feeds `ids` and returns the logits after the last one (`[n_vocab]`).
    pub fn ingest(&mut self, model: &Model, ids: &[u32]) -> Result<Vec<f32>, EngineError> {
        if ids.is_empty() {
            return Err(EngineError::EmptyPrompt);
        }
        let needed = self.tokens.len() + ids.len();
        if needed > self.kv.n_ctx() {
            return Err(EngineError::ContextFull {
                needed,
                n_ctx: self.kv.n_ctx(),
            });
        }
        let start = self.kv.seq_len(SEQ).map_err(fak_model::ModelError::from)?;
        let mut batch = Batch::new();
        batch.push_seq(SEQ, start as u32, ids, LogitsWanted::Yes);
        let logits = model.forward_into(&batch, &mut self.kv, &mut self.ws)?;
        self.tokens.extend_from_slice(ids);
        Ok(logits.row(0).to_vec())
    }
}

/// Generates from `prompt_ids`: one request through an [`Engine`] sized
/// for it. `on_logits` sees every step's logits (`[n_vocab]`) before the
/// step samples from them; `on_text` receives each piece of text as soon
/// as it forms complete UTF-8, and may end the generation early with
/// [`ControlFlow::Break`] (the result then says
/// [`FinishReason::Cancelled`]).
///
/// # Errors
///
/// [`EngineError::EmptyPrompt`]; [`check_context`]'s errors for
/// `prompt + max_tokens`; the request's own error if it fails.
pub fn generate(
    model: &Model,
    tok: &Tokenizer,
    prompt_ids: &[u32],
    params: &GenerateParams,
    on_logits: impl FnMut(&[f32]),
    on_text: impl FnMut(&str) -> ControlFlow<()>,
) -> Result<Generation, EngineError> {
    generate_drafted(model, None, tok, prompt_ids, params, on_logits, on_text)
}

/// A draft model and how it drafts ([`Engine::set_draft_model`]).
#[derive(Clone, Copy)]
pub struct Drafting<'a> {
    pub model: &'a Model,
    pub params: crate::drafter::DraftParams,
}

impl std::fmt::Debug for Drafting<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Drafting")
            .field("model", &self.model.config().arch)
            .field("params", &self.params)
            .finish()
    }
}

/// [`generate`] with a draft model for [`crate::spec::Speculative::Draft`] and
/// [`crate::spec::Speculative::Auto`] (the output is the same).
///
/// # Errors
///
/// As [`generate`]; [`EngineError::DraftVocabMismatch`].
pub fn generate_drafted(
    model: &Model,
    draft: Option<Drafting<'_>>,
    tok: &Tokenizer,
    prompt_ids: &[u32],
    params: &GenerateParams,
    mut on_logits: impl FnMut(&[f32]),
    mut on_text: impl FnMut(&str) -> ControlFlow<()>,
) -> Result<Generation, EngineError> {
    let mut out = Generation {
        prompt_ids: prompt_ids.to_vec(),
        generated_ids: Vec::new(),
        text: String::new(),
        finish: FinishReason::Length,
        stats: crate::request::EngineStats::default(),
    };
    if prompt_ids.is_empty() {
        return Err(EngineError::EmptyPrompt);
    }
    let n_ctx = request_context(
        model.config(),
        prompt_ids.len(),
        params.max_tokens,
        params.ctx_limit,
    )?;
    if params.max_tokens == 0 {
        return Ok(out);
    }
    let cfg = EngineConfig::for_requests(1, n_ctx, params.kv_type, PrefixCache::Off);
    let mut engine = Engine::new(model, Some(tok), cfg)?;
    engine.set_speculative(params.speculative);
    if let Some(d) = draft {
        engine.set_draft_model(d.model, d.params)?;
    }
    engine.add(params.request(prompt_ids.to_vec()))?;
    while engine.has_work() {
        let mut flow = ControlFlow::Continue(());
        for ev in engine.step_observe(|_, l| on_logits(l))? {
            match ev {
                Event::Token { token, text, .. } => {
                    out.generated_ids.push(token);
                    if !text.is_empty() && flow.is_continue() {
                        out.text.push_str(&text);
                        flow = on_text(&text);
                    }
                }
                Event::Finished { reason, text, .. } => {
                    if !text.is_empty() && flow.is_continue() {
                        out.text.push_str(&text);
                        flow = on_text(&text);
                    }
                    out.finish = reason;
                }
                Event::Failed { error, .. } => return Err(error),
                Event::Admitted { .. } => {}
            }
        }
        if flow.is_break() {
            out.finish = FinishReason::Cancelled;
            break;
        }
    }
    out.stats = engine.stats();
    Ok(out)
}

impl GenerateParams {
    /// The engine request for `prompt` with these settings.
    pub fn request(&self, prompt: Vec<u32>) -> Request {
        Request {
            sampling: self.sampling,
            stop: StopRules {
                eog: self.stop,
                ..StopRules::default()
            },
            ..Request::greedy(prompt, self.max_tokens)
        }
    }
}

/// What [`drain`] hands its caller for one request.
pub(crate) enum Output<'a> {
    /// A generated token and the text it released.
    Token(u32, &'a str),
    /// The request ended; the text it released last.
    Done(FinishReason, &'a str),
}

/// Steps `engine` until it has no work, passing every request's tokens and
/// end to `on_output`; returns how many requests ended.
///
/// # Errors
///
/// The first request failure, or an engine error.
pub(crate) fn drain(
    engine: &mut Engine<'_>,
    mut on_logits: impl FnMut(RequestId, &[f32]),
    mut on_output: impl FnMut(RequestId, Output<'_>),
) -> Result<usize, EngineError> {
    let mut done = 0;
    while engine.has_work() {
        for ev in engine.step_observe(&mut on_logits)? {
            match ev {
                Event::Token {
                    id, token, text, ..
                } => on_output(id, Output::Token(token, &text)),
                Event::Finished {
                    id, reason, text, ..
                } => {
                    done += 1;
                    on_output(id, Output::Done(reason, &text));
                }
                Event::Failed { error, .. } => return Err(error),
                Event::Admitted { .. } => {}
            }
        }
    }
    Ok(done)
}
