//! Single-sequence generation.

use fak_model::{Batch, FlatKv, KvStore, KvType, LogitsWanted, Model, SeqId, Workspace};
use fak_tokenizer::{StreamDecoder, Tokenizer};

use crate::sampling::{Sampler, SamplingParams};
use crate::EngineError;

/// When to stop before `max_tokens`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopAt {
    /// Stop at an end-of-generation token (not included in the output).
    EndOfGeneration,
    /// Always produce `max_tokens` tokens.
    Never,
}

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
}

/// Why generation ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FinishReason {
    /// `max_tokens` were produced.
    Length,
    /// An end-of-generation token was sampled.
    EndOfGeneration,
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
    /// Logits of every step (`[n_steps][n_vocab]`), when requested.
    pub step_logits: Vec<Vec<f32>>,
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
    pub fn new(model: &Model, n_ctx: usize) -> Sequence {
        Sequence {
            kv: FlatKv::for_model(model.config(), n_ctx, 1),
            ws: Workspace::new(),
            tokens: Vec::new(),
        }
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

/// Generates from `prompt_ids`. `on_text` receives each piece of text as
/// soon as it forms complete UTF-8. When `keep_logits` is set, every step's
/// logits are returned too.
pub fn generate(
    model: &Model,
    tok: &Tokenizer,
    prompt_ids: &[u32],
    params: &GenerateParams,
    keep_logits: bool,
    mut on_text: impl FnMut(&str),
) -> Result<Generation, EngineError> {
    let n_ctx = prompt_ids.len() + params.max_tokens;
    let mut seq = Sequence::with_kv_type(model, n_ctx.max(1), params.kv_type)?;
    let mut sampler = Sampler::new(params.sampling);
    let mut decoder = StreamDecoder::new();
    let mut out = Generation {
        prompt_ids: prompt_ids.to_vec(),
        generated_ids: Vec::new(),
        text: String::new(),
        finish: FinishReason::Length,
        step_logits: Vec::new(),
    };
    if params.max_tokens == 0 {
        return Ok(out);
    }
    let mut logits = seq.ingest(model, prompt_ids)?;
    loop {
        let id = sampler.sample(&logits).ok_or(EngineError::NoLogits)?;
        if keep_logits {
            out.step_logits.push(logits.clone());
        }
        if params.stop == StopAt::EndOfGeneration && tok.is_eog(id) {
            out.finish = FinishReason::EndOfGeneration;
            break;
        }
        out.generated_ids.push(id);
        let piece = decoder.push(tok, id);
        if !piece.is_empty() {
            on_text(&piece);
            out.text.push_str(&piece);
        }
        if out.generated_ids.len() >= params.max_tokens {
            break;
        }
        logits = seq.ingest(model, &[id])?;
    }
    let rest = decoder.finish();
    if !rest.is_empty() {
        on_text(&rest);
        out.text.push_str(&rest);
    }
    Ok(out)
}
