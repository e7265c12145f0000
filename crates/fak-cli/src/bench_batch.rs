//! `fak bench batch`: aggregate decode throughput of B sequences decoding
//! together through the paged KV cache.
//!
//! Protocol (shared with `bench/peers/llamacpp.py batched`):
//!
//! ```text
//!   one LCG stream per (B, rep), ids numbered 1, 2, 3, ... (see bench.rs)
//!   sequence i (0-based) prompt = ids 16·i+1 ..= 16·i+16
//!   prefill  all B prompts, ragged batches of ≤ --ubatch tokens, logits for
//!            each sequence's last prompt token                     (timed)
//!   decode   16 steps; step s = one batch of B tokens, sequence i feeds
//!            id 16·B + s·B + i + 1, logits for all B                (timed)
//!   decode tok/s = B·16 / Σ step times
//! ```

use std::time::Instant;

use anyhow::{bail, Context};
use fak_engine::{PagedKvConfig, PrefixCache, Sequences, Tenant};
use fak_model::{Model, SeqId};
use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;

use crate::bench::{cpu_model, load_model, median, model_file_name, sha256_file, LcgIds};
use crate::ModelArgs;

/// Prompt tokens per sequence.
pub const PROMPT_TOKENS: usize = 16;
/// Decode steps.
pub const DECODE_STEPS: usize = 16;
/// Schema tag of [`BatchReport`].
pub const SCHEMA: &str = "fak-bench-batch/1";
const TOKEN_STREAM: &str = "lcg state0=2463534242 mul=6364136223846793005 \
    inc=1442695040888963407 id_n=(state_n>>33)%n_vocab from state_1; one stream per (B, rep); \
    sequence i prompt ids 16i+1..16i+16; decode step s feeds sequence i id 16B+sB+i+1";

#[derive(clap::Args)]
pub struct BenchBatchArgs {
    #[command(flatten)]
    model: ModelArgs,
    /// Batch sizes (sequences decoding together), comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1,8,32,128,256,512,1024")]
    batch: Vec<usize>,
    /// Measured repetitions per batch size (the median is reported).
    #[arg(long, default_value_t = 1)]
    reps: usize,
    /// Most tokens per forward call during prefill.
    #[arg(long, default_value_t = 512)]
    ubatch: usize,
    /// Tokens per KV block.
    #[arg(long, default_value_t = fak_engine::DEFAULT_BLOCK_SIZE)]
    block_size: usize,
    /// Element type of the KV cache.
    #[arg(long, value_enum, default_value_t = crate::KvTypeArg::F16)]
    kv_type: crate::KvTypeArg,
    /// Print one JSON report on stdout instead of a table.
    #[arg(long)]
    json: bool,
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
    pub schema: &'static str,
    pub engine: &'static str,
    pub engine_version: String,
    pub cpu: String,
    pub isa: String,
    pub threads: usize,
    pub model: String,
    pub model_sha256: String,
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

fn run_once(model: &Model, b: usize, a: &BenchBatchArgs) -> anyhow::Result<Timing> {
    let n_vocab = model.config().n_vocab;
    let (prompts, steps) = batch_ids(n_vocab, b);
    let sizes = PagedKvConfig::for_sequences(a.block_size, b, PROMPT_TOKENS + DECODE_STEPS)
        .with_kv_type(a.kv_type.into());
    let mut seqs = Sequences::new(model, sizes, PrefixCache::Off, a.ubatch)?;
    let ids: Vec<SeqId> = (0..b).map(|_| seqs.create(Tenant(0))).collect();
    let mut sink = 0.0f32;
    let items = crate::bench::appends(&ids, &prompts);
    let t0 = Instant::now();
    seqs.step_with(model, &items, |_, row| sink += row[0])?;
    let prefill_s = t0.elapsed().as_secs_f64();
    let mut steps_s = Vec::with_capacity(DECODE_STEPS);
    let mut one = vec![[0u32; 1]; b];
    for step in &steps {
        for (o, &id) in one.iter_mut().zip(step) {
            o[0] = id;
        }
        let items = crate::bench::appends(&ids, &one);
        let t = Instant::now();
        seqs.step_with(model, &items, |_, row| sink += row[0])?;
        steps_s.push(t.elapsed().as_secs_f64());
    }
    std::hint::black_box(sink);
    Ok(Timing { prefill_s, steps_s })
}

pub fn run(a: BenchBatchArgs) -> anyhow::Result<()> {
    if a.reps == 0 || a.batch.is_empty() || a.batch.contains(&0) {
        bail!("--reps and every --batch size must be at least 1");
    }
    let path = &a.model.model;
    let model = load_model(&a.model)?;
    let bar = ProgressBar::new((a.batch.len() * a.reps + 1) as u64);
    bar.set_style(
        ProgressStyle::with_template("{prefix} [{bar:30}] {pos}/{len} {msg}")
            .context("progress bar template")?
            .progress_chars("=> "),
    );
    bar.set_prefix("bench batch");
    bar.set_message("warm-up B=1");
    run_once(&model, 1, &a)?;
    bar.inc(1);
    let mut results = Vec::with_capacity(a.batch.len());
    for &b in &a.batch {
        bar.set_message(format!("B={b}"));
        let mut runs = Vec::with_capacity(a.reps);
        for _ in 0..a.reps {
            runs.push(run_once(&model, b, &a)?);
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
    let report = BatchReport {
        schema: SCHEMA,
        engine: "fak",
        engine_version: env!("CARGO_PKG_VERSION").to_string(),
        cpu: cpu_model(),
        isa: fak_kernels::isa().name().to_string(),
        threads: model.threads(),
        model: model_file_name(path),
        model_sha256: sha256_file(path)?,
        n_vocab: model.config().n_vocab,
        prompt_tokens: PROMPT_TOKENS,
        decode_steps: DECODE_STEPS,
        reps: a.reps,
        kv: "paged",
        kv_type: fak_model::KvType::from(a.kv_type).name(),
        block_size: a.block_size,
        ubatch: a.ubatch,
        token_stream: TOKEN_STREAM,
        results,
    };
    if a.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        println!(
            "{:>6} {:>12} {:>14} {:>12}",
            "B", "prefill t/s", "decode t/s", "step ms"
        );
        for r in &report.results {
            println!(
                "{:>6} {:>12.1} {:>14.1} {:>12.2}",
                r.batch, r.prefill_tok_s, r.decode_tok_s, r.decode_step_ms_median
            );
        }
    }
    Ok(())
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
