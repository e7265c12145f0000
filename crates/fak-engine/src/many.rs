//! Generation for several prompts at once, through [`Sequences`].
//!
//! ```text
//!   Together:  step([p0 prompt, p1 prompt, ...])      one ragged prefill
//!              step([p0 tok, p1 tok, ...])            one batch per decode step
//!              (finished sequences drop out)
//!   Alone:     the same, one prompt after the other
//! ```
//!
//! Both modes give every prompt the same tokens and the same logits, bit
//! for bit: that is the batch-invariance property, and `on_logits` lets a
//! caller hash every step's logits to prove it from outside.

use fak_kv::Tenant;
use fak_model::{LogitsWanted, Model, SeqId};
use fak_tokenizer::{StreamDecoder, Tokenizer};

use crate::generate::{FinishReason, GenerateParams, Generation, StopAt};
use crate::paged::PagedKvConfig;
use crate::sampling::Sampler;
use crate::seqs::{Append, PrefixCache, Sequences};
use crate::EngineError;

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
pub struct ManyParams {
    /// Per-prompt generation settings (every prompt gets its own sampler
    /// seeded with `sampling.seed`).
    pub gen: GenerateParams,
    /// Scheduling.
    pub mode: BatchMode,
    /// Tokens per KV block.
    pub block_size: usize,
    /// Most tokens in one forward call.
    pub max_batch_tokens: usize,
}

struct Live {
    index: usize,
    seq: SeqId,
    sampler: Sampler,
    decoder: StreamDecoder,
    logits: Vec<f32>,
    done: bool,
}

/// Generates a continuation of every prompt. `on_logits(i, logits)` sees
/// every step's logits (`[n_vocab]`) of prompt `i`, in step order.
///
/// # Errors
///
/// [`EngineError::EmptyPrompt`] if a prompt has no tokens; model and KV
/// errors.
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
            step_logits: Vec::new(),
        })
        .collect();
    if params.gen.max_tokens == 0 || prompts.is_empty() {
        return Ok(out);
    }
    let bs = params.block_size.max(1);
    let blocks: usize = prompts
        .iter()
        .map(|p| (p.len() + params.gen.max_tokens).div_ceil(bs) + 1)
        .sum();
    let sizes = PagedKvConfig {
        block_size: bs,
        n_blocks: blocks,
        kv_type: params.gen.kv_type,
    };
    let mut seqs = Sequences::new(model, sizes, PrefixCache::Off, params.max_batch_tokens)?;
    let groups: Vec<Vec<usize>> = match params.mode {
        BatchMode::Together => vec![(0..prompts.len()).collect()],
        BatchMode::Alone => (0..prompts.len()).map(|i| vec![i]).collect(),
    };
    for group in groups {
        run_group(
            model,
            tok,
            &mut seqs,
            prompts,
            &group,
            params,
            &mut out,
            &mut on_logits,
        )?;
    }
    Ok(out)
}

#[allow(clippy::too_many_arguments)]
fn run_group(
    model: &Model,
    tok: &Tokenizer,
    seqs: &mut Sequences,
    prompts: &[Vec<u32>],
    group: &[usize],
    params: &ManyParams,
    out: &mut [Generation],
    on_logits: &mut impl FnMut(usize, &[f32]),
) -> Result<(), EngineError> {
    let mut live: Vec<Live> = group
        .iter()
        .map(|&i| Live {
            index: i,
            seq: seqs.create(Tenant(0)),
            sampler: Sampler::new(params.gen.sampling),
            decoder: StreamDecoder::new(),
            logits: Vec::new(),
            done: false,
        })
        .collect();
    let items: Vec<Append<'_>> = live
        .iter()
        .map(|l| Append {
            seq: l.seq,
            ids: &prompts[l.index],
            logits: LogitsWanted::Yes,
        })
        .collect();
    let first = seqs.step(model, &items)?;
    for (l, lg) in live.iter_mut().zip(first) {
        l.logits = lg.ok_or(EngineError::NoLogits)?;
    }
    loop {
        let mut next: Vec<(SeqId, [u32; 1])> = Vec::new();
        for l in live.iter_mut().filter(|l| !l.done) {
            on_logits(l.index, &l.logits);
            let id = l.sampler.sample(&l.logits).ok_or(EngineError::NoLogits)?;
            let g = &mut out[l.index];
            if params.gen.stop == StopAt::EndOfGeneration && tok.is_eog(id) {
                g.finish = FinishReason::EndOfGeneration;
                l.done = true;
                continue;
            }
            g.generated_ids.push(id);
            g.text.push_str(&l.decoder.push(tok, id));
            if g.generated_ids.len() >= params.gen.max_tokens {
                l.done = true;
                continue;
            }
            next.push((l.seq, [id]));
        }
        if next.is_empty() {
            break;
        }
        let items: Vec<Append<'_>> = next
            .iter()
            .map(|(seq, id)| Append {
                seq: *seq,
                ids: id,
                logits: LogitsWanted::Yes,
            })
            .collect();
        let res = seqs.step(model, &items)?;
        let mut res = res.into_iter();
        for l in live.iter_mut().filter(|l| !l.done) {
            l.logits = res.next().flatten().ok_or(EngineError::NoLogits)?;
        }
    }
    for mut l in live {
        out[l.index].text.push_str(&l.decoder.finish());
        seqs.free(l.seq)?;
    }
    Ok(())
}
