//! `fak bench batch`: aggregate decode throughput of B sequences decoding
//! together through the paged KV cache.
//!
//! Protocol (shared with `bench/peers/llamacpp.py batched`):
//!
//! ```text
//!   one LCG stream per (B, rep), ids numbered 1, 2, 3, ... (crate::LcgIds)
//!   sequence i (0-based) prompt = ids 16·i+1 ..= 16·i+16
//!   prefill  all B prompts, ragged batches of ≤ ubatch tokens, logits for
//!            each sequence's last prompt token                     (timed)
//!   decode   16 steps; step s = one batch of B tokens, sequence i feeds
//!            id 16·B + s·B + i + 1, logits for all B                (timed)
//!   decode tok/s = B·16 / Σ step times
//! ```

use std::fmt::Write as _;
use std::time::Instant;

use fak_engine::{PagedKvConfig, PrefixCache, Sequences, Tenant};
use fak_model::{KvType, Model, SeqId};
use serde::Serialize;

use crate::error::{params, Result};
use crate::{appends, median, LcgIds, ModelSpec, RunHeader};

/// Prompt tokens per sequence.
pub const PROMPT_TOKENS: usize = 16;
/// Decode steps.
pub const DECODE_STEPS: usize = 16;
/// Schema tag of [`BatchReport`].
pub const SCHEMA: &str = "fak-bench-batch/1";
const TOKEN_STREAM: &str = "lcg state0=2463534242 mul=6364136223846793005 \
    inc=1442695040888963407 id_n=(state_n>>33)%n_vocab from state_1; one stream per (B, rep); \
    sequence i prompt ids 16i+1..16i+16; decode step s feeds sequence i id 16B+sB+i+1";

/// What `fak bench batch` measures.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Params {
    pub model: ModelSpec,
    /// Batch sizes (sequences decoding together), each at least 1.
    pub batch: Vec<usize>,
    /// Measured repetitions per batch size (the median is reported).
    pub reps: usize,
    /// Most tokens per forward call during prefill.
    pub ubatch: usize,
    /// Tokens per KV block.
    pub block_size: usize,
    /// Element type of the KV cache.
    pub kv_type: KvType,
}

/// One batch size's measurements.
#[derive(Debug, Clone, Serialize)]
pub struct BatchResult {
    pub batch: usize,
    pub status: String,
    pub prefill_s: f64,
    pub prefill_tok_s: f64,
    pub decode_s: f64,
    pub decode_tok_s: f64,
    pub decode_step_ms_median: f64,
    pub decode_tok_s_reps: Vec<f64>,
}

/// The JSON report (shared schema with the llama.cpp peer).
#[derive(Debug, Clone, Serialize)]
pub struct BatchReport {
    #[serde(flatten)]
    pub header: RunHeader,
    pub n_vocab: usize,
    pub prompt_tokens: usize,
    pub decode_steps: usize,
    pub reps: usize,
    pub kv: &'static str,
    pub kv_type: &'static str,
    pub block_size: usize,
    pub ubatch: usize,
    pub token_stream: &'static str,
    pub results: Vec<BatchResult>,
}

/// The ids of one (B, rep) run: `B` prompts of 16 ids, then 16 steps of B ids.
pub fn batch_ids(n_vocab: usize, b: usize) -> (Vec<Vec<u32>>, Vec<Vec<u32>>) {
    let mut s = LcgIds::new(n_vocab);
    let prompts = (0..b)
        .map(|_| s.by_ref().take(PROMPT_TOKENS).collect())
        .collect();
    let steps = (0..DECODE_STEPS)
        .map(|_| s.by_ref().take(b).collect())
        .collect();
    (prompts, steps)
}

struct Timing {
    prefill_s: f64,
    steps_s: Vec<f64>,
}

fn run_once(model: &Model, b: usize, p: &Params) -> Result<Timing> {
    let n_vocab = model.config().n_vocab;
    let (prompts, steps) = batch_ids(n_vocab, b);
    let sizes = PagedKvConfig::for_sequences(p.block_size, b, PROMPT_TOKENS + DECODE_STEPS)
        .with_kv_type(p.kv_type);
    let mut seqs = Sequences::new(model, sizes, PrefixCache::Off, p.ubatch)?;
    let ids: Vec<SeqId> = (0..b)
        .map(|_| seqs.create(Tenant(0)))
        .collect::<Result<_, _>>()?;
    let mut sink = 0.0f32;
    let items = appends(&ids, &prompts);
    let t0 = Instant::now();
    seqs.step_with(model, &items, |_, row| sink += row[0])?;
    let prefill_s = t0.elapsed().as_secs_f64();
    let mut steps_s = Vec::with_capacity(DECODE_STEPS);
    let mut one = vec![[0u32; 1]; b];
    for step in &steps {
        for (o, &id) in one.iter_mut().zip(step) {
            o[0] = id;
        }
        let items = appends(&ids, &one);
        let t = Instant::now();
        seqs.step_with(model, &items, |_, row| sink += row[0])?;
        steps_s.push(t.elapsed().as_secs_f64());
    }
    std::hint::black_box(sink);
    Ok(Timing { prefill_s, steps_s })
}

/// Runs the protocol (see the module docs) at every batch size, after a
/// B=1 warm-up, with a progress bar on stderr.
///
/// # Errors
///
/// `reps` or a batch size of 0, loading the model, model and KV errors.
pub fn run(p: &Params) -> Result<BatchReport> {
    if p.reps == 0 || p.batch.is_empty() || p.batch.contains(&0) {
        return Err(params("--reps and every --batch size must be at least 1"));
    }
    let model = p.model.load()?;
    let bar = crate::progress_bar(p.batch.len() * p.reps + 1, "bench batch", "")?;
    bar.set_message("warm-up B=1");
    run_once(&model, 1, p)?;
    bar.inc(1);
    let mut results = Vec::with_capacity(p.batch.len());
    for &b in &p.batch {
        bar.set_message(format!("B={b}"));
        let mut runs = Vec::with_capacity(p.reps);
        for _ in 0..p.reps {
            runs.push(run_once(&model, b, p)?);
            bar.inc(1);
        }
        let tok_s: Vec<f64> = runs
            .iter()
            .map(|r| (b * DECODE_STEPS) as f64 / r.steps_s.iter().sum::<f64>().max(1e-12))
            .collect();
        let decode_s: Vec<f64> = runs.iter().map(|r| r.steps_s.iter().sum()).collect();
        let prefill_s: Vec<f64> = runs.iter().map(|r| r.prefill_s).collect();
        let steps_ms: Vec<f64> = runs
            .iter()
            .flat_map(|r| r.steps_s.iter().map(|s| s * 1e3))
            .collect();
        let pf = median(&prefill_s);
        results.push(BatchResult {
            batch: b,
            status: "ok".into(),
            prefill_s: pf,
            prefill_tok_s: (b * PROMPT_TOKENS) as f64 / pf.max(1e-12),
            decode_s: median(&decode_s),
            decode_tok_s: median(&tok_s),
            decode_step_ms_median: median(&steps_ms),
            decode_tok_s_reps: tok_s,
        });
    }
    bar.finish_and_clear();
    Ok(BatchReport {
        header: RunHeader::model_run(SCHEMA, &p.model.path, &model)?,
        n_vocab: model.config().n_vocab,
        prompt_tokens: PROMPT_TOKENS,
        decode_steps: DECODE_STEPS,
        reps: p.reps,
        kv: "paged",
        kv_type: p.kv_type.name(),
        block_size: p.block_size,
        ubatch: p.ubatch,
        token_stream: TOKEN_STREAM,
        results,
    })
}

impl BatchReport {
    /// Human-readable summary: one line per batch size.
    pub fn table(&self) -> String {
        let mut s = format!(
            "{:>6} {:>12} {:>14} {:>12}\n",
            "B", "prefill t/s", "decode t/s", "step ms"
        );
        for r in &self.results {
            let _ = writeln!(
                s,
                "{:>6} {:>12.1} {:>14.1} {:>12.2}",
                r.batch, r.prefill_tok_s, r.decode_tok_s, r.decode_step_ms_median
            );
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_continue_one_stream() {
        let (p, s) = batch_ids(1000, 3);
        let all: Vec<u32> = LcgIds::take(1000, 3 * 16 + 16 * 3);
        assert_eq!(p[0], all[0..16]);
        assert_eq!(p[2], all[32..48]);
        assert_eq!(s[0], all[48..51]);
        assert_eq!(s[15], all[48 + 45..48 + 48]);
    }
}
