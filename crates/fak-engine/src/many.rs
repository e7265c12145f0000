//! Generation for several prompts at once: requests of one [`Engine`].
//!
//! ```text
//!   Together:  add(p0), add(p1), ...  then step until done: ragged
//!              prefill chunks and one decode token per request per pass
//!              (finished requests drop out)
//!   Alone:     add(p0), step until done; add(p1), ...
//! ```
//!
//! Both modes give every prompt the same tokens and the same logits, bit
//! for bit: that is the batch-invariance property, and `on_logits` lets a
//! caller hash every step's logits to prove it from outside.

use std::collections::HashMap;

use fak_model::Model;
use fak_tokenizer::Tokenizer;

use crate::engine::{Engine, EngineConfig};
use crate::error::EngineError;
use crate::generate::{drain, request_context, GenerateParams, Generation, Output};
use crate::paged::PagedKvConfig;
use crate::request::{FinishReason, RequestId};
use crate::seqs::PrefixCache;

/// How [`generate_many`] schedules its prompts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BatchMode {
    /// All prompts in one ragged batch per step.
    Together,
    /// One prompt at a time.
    Alone,
}

/// Options of [`generate_many`].
#[derive(Debug, Clone, Copy)]
pub struct ManyParams<'a> {
    /// Per-prompt generation settings (every prompt gets its own sampler
    /// seeded with `sampling.seed`).
    pub gen: GenerateParams,
    /// Scheduling.
    pub mode: BatchMode,
    /// Tokens per KV block.
    pub block_size: usize,
    /// Most tokens in one forward call.
    pub max_batch_tokens: usize,
    /// A draft model (for [`crate::spec::Speculative::Draft`] and `Auto`).
    pub draft: Option<crate::generate::Drafting<'a>>,
}

/// Generates a continuation of every prompt. `on_logits(i, logits)` sees
/// every step's logits (`[n_vocab]`) of prompt `i`, in step order.
///
/// # Errors
///
/// [`EngineError::EmptyPrompt`] if a prompt has no tokens; the context
/// checks of [`check_context`](crate::generate::check_context) for the longest
/// prompt; [`EngineError::Kv`] for a block size or token budget of 0; the
/// first request failure.
pub fn generate_many(
    model: &Model,
    tok: &Tokenizer,
    prompts: &[Vec<u32>],
    params: &ManyParams,
    mut on_logits: impl FnMut(usize, &[f32]),
) -> Result<Vec<Generation>, EngineError> {
    if prompts.iter().any(Vec::is_empty) {
        return Err(EngineError::EmptyPrompt);
    }
    let mut out: Vec<Generation> = prompts
        .iter()
        .map(|p| Generation {
            prompt_ids: p.clone(),
            generated_ids: Vec::new(),
            text: String::new(),
            finish: FinishReason::Length,
            stats: crate::request::EngineStats::default(),
        })
        .collect();
    let longest = prompts.iter().map(Vec::len).max().unwrap_or(0);
    let limit = params.gen.ctx_limit;
    let n_ctx = request_context(model.config(), longest, params.gen.max_tokens, limit)?;
    if params.gen.max_tokens == 0 || prompts.is_empty() {
        return Ok(out);
    }
    if params.block_size == 0 || params.max_batch_tokens == 0 {
        return Err(EngineError::Kv(fak_kv::KvError::BadConfig(format!(
            "block size {} and most tokens per forward call {} must both be at least 1",
            params.block_size, params.max_batch_tokens
        ))));
    }
    let bs = params.block_size;
    // Every prompt's context fits n_ctx (checked above), so each term is
    // at most n_ctx / bs + 2; only the sum can overflow.
    let blocks = prompts
        .iter()
        .try_fold(0usize, |sum, p| {
            sum.checked_add((p.len() + params.gen.max_tokens).div_ceil(bs) + 1)
        })
        .ok_or_else(|| {
            EngineError::Kv(fak_kv::KvError::BadConfig(format!(
                "{} prompts of up to {n_ctx} tokens overflow the KV block count",
                prompts.len()
            )))
        })?;
    let cfg = EngineConfig {
        kv: PagedKvConfig {
            block_size: bs,
            n_blocks: blocks,
            kv_type: params.gen.kv_type,
            window: crate::paged::KvWindow::Drop,
        },
        token_budget: params.max_batch_tokens,
        max_running: prompts.len(),
        max_waiting: None,
        n_ctx,
        prefix_cache: PrefixCache::Off,
        // An offline batch: the fewest passes win.
        prefill: crate::engine::PrefillMix::Fill,
        mask: crate::engine::MaskMode::default(),
    };
    let mut engine = Engine::new(model, Some(tok), cfg)?;
    engine.set_speculative(params.gen.speculative);
    if let Some(d) = params.draft {
        engine.set_draft_model(d.model, d.params)?;
    }
    let groups: Vec<Vec<usize>> = match params.mode {
        BatchMode::Together => vec![(0..prompts.len()).collect()],
        BatchMode::Alone => (0..prompts.len()).map(|i| vec![i]).collect(),
    };
    for group in groups {
        let mut index: HashMap<RequestId, usize> = HashMap::new();
        for &i in &group {
            let id = engine.add(params.gen.request(prompts[i].clone()))?;
            index.insert(id, i);
        }
        drain(
            &mut engine,
            |id, l| {
                if let Some(&i) = index.get(&id) {
                    on_logits(i, l);
                }
            },
            |id, o| {
                let Some(g) = index.get(&id).and_then(|&i| out.get_mut(i)) else {
                    return;
                };
                match o {
                    Output::Token(t, text) => {
                        g.generated_ids.push(t);
                        g.text.push_str(text);
                    }
                    Output::Done(reason, text) => {
                        g.text.push_str(text);
                        g.finish = reason;
                    }
                }
            },
        )?;
    }
    let stats = engine.stats();
    for g in &mut out {
        g.stats = stats;
    }
    Ok(out)
}
