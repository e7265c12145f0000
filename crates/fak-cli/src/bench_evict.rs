//! `fak bench evict`: the cost of removing a span from one sequence.
//!
//! ```text
//!   tokens: LCG ids 1..=L (one stream, see bench.rs); span = [at, at + S)
//!   root  = the L tokens, computed once (untimed); every rep forks it
//!   exact    evict(fork, span, Exact)   truncate to `at`, recompute the tail   (timed)
//!   reingest fork of the first `at` tokens, ingest ids at+S..L               (timed)
//!   shift    evict(fork, span, Shift)   APPROXIMATE: move rows, re-rope keys  (timed)
//!   full     a fresh sequence prefilling all L - S remaining tokens           (timed)
//!   span     fork of the first `at` tokens, ingest the span's S tokens        (timed)
//! ```
//!
//! With `--at L - S - k` the span is the sequence's last S tokens but k: an
//! agent evicting its last tool result (S = R) with the k tokens it
//! generated after it; `exact / span` is then "eviction cost over that
//! result's ingest cost".
//!
//! Exact eviction is truncation plus re-ingesting the tail, so its cost
//! should equal `reingest`; `full` is what an engine without exact
//! eviction would pay.

use std::time::Instant;

use anyhow::bail;
use fak_engine::{EvictMode, PagedKvConfig, PrefixCache, Sequences, Tenant};
use serde::Serialize;

use crate::bench::{cpu_model, load_model, median, model_file_name, sha256_file, LcgIds};
use crate::ModelArgs;

/// Schema tag of [`EvictReport`].
pub const SCHEMA: &str = "fak-bench-evict/1";

#[derive(clap::Args)]
pub struct BenchEvictArgs {
    #[command(flatten)]
    model: ModelArgs,
    /// Sequence length L.
    #[arg(long, default_value_t = 1100)]
    len: usize,
    /// Span length S.
    #[arg(long, default_value_t = 64)]
    span: usize,
    /// Span start (default: the middle of the sequence).
    #[arg(long)]
    at: Option<usize>,
    /// Measured repetitions (median reported).
    #[arg(long, default_value_t = 3)]
    reps: usize,
    /// Most tokens per forward call.
    #[arg(long, default_value_t = 512)]
    ubatch: usize,
    /// Print one JSON report on stdout instead of a table.
    #[arg(long)]
    json: bool,
}

/// Median seconds of each operation.
#[derive(Debug, Clone, Serialize)]
pub struct EvictTimes {
    pub exact_s: f64,
    pub reingest_s: f64,
    pub shift_s: f64,
    pub full_recompute_s: f64,
    /// exact / reingest (the issue's bound: at most 1).
    pub exact_over_reingest: f64,
    /// Ingesting the span's own tokens after the kept prefix.
    pub span_ingest_s: f64,
    /// exact / span_ingest.
    pub exact_over_span_ingest: f64,
    pub exact_s_reps: Vec<f64>,
    pub reingest_s_reps: Vec<f64>,
}

/// The JSON report.
#[derive(Debug, Clone, Serialize)]
pub struct EvictReport {
    pub schema: &'static str,
    pub engine: &'static str,
    pub cpu: String,
    pub isa: String,
    pub threads: usize,
    pub model: String,
    pub model_sha256: String,
    pub len: usize,
    pub span: usize,
    pub at: usize,
    pub tail_tokens: usize,
    pub reps: usize,
    pub times: EvictTimes,
}

pub fn run(a: BenchEvictArgs) -> anyhow::Result<()> {
    let at = a.at.unwrap_or(a.len.saturating_sub(a.span) / 2);
    if a.reps == 0 || a.span == 0 || at == 0 || at + a.span >= a.len {
        bail!(
            "need reps >= 1, span >= 1 and 0 < at, at + span < len (got at {at}, span {}, len {})",
            a.span,
            a.len
        );
    }
    let path = &a.model.model;
    let model = load_model(&a.model)?;
    let ids: Vec<u32> = LcgIds::take(model.config().n_vocab, a.len);
    let tail: Vec<u32> = ids[at + a.span..].to_vec();
    let remaining: Vec<u32> = [&ids[..at], &tail[..]].concat();
    let sizes = PagedKvConfig::for_sequences(16, 6, a.len + 16);
    let mut seqs = Sequences::new(&model, sizes, PrefixCache::Off, a.ubatch)?;
    eprintln!("bench evict: computing the {}-token sequence", a.len);
    let root = seqs.create(Tenant(0));
    seqs.ingest(&model, root, &ids)?;
    let mut exact = Vec::new();
    let mut reingest = Vec::new();
    let mut shift = Vec::new();
    let mut full = Vec::new();
    let mut span_in = Vec::new();
    let span_ids: Vec<u32> = ids[at..at + a.span].to_vec();
    for rep in 0..=a.reps {
        let s = seqs.fork(root)?;
        let t = Instant::now();
        seqs.evict(&model, s, at..at + a.span, EvictMode::Exact)?;
        let e = t.elapsed().as_secs_f64();
        seqs.free(s)?;

        let s = seqs.fork(root)?;
        seqs.truncate(s, at)?;
        let t = Instant::now();
        seqs.ingest(&model, s, &tail)?;
        let r = t.elapsed().as_secs_f64();
        seqs.free(s)?;

        let s = seqs.fork(root)?;
        let t = Instant::now();
        seqs.evict(&model, s, at..at + a.span, EvictMode::Shift)?;
        let sh = t.elapsed().as_secs_f64();
        seqs.free(s)?;

        let s = seqs.create(Tenant(0));
        let t = Instant::now();
        seqs.ingest(&model, s, &remaining)?;
        let f = t.elapsed().as_secs_f64();
        seqs.free(s)?;
        let s = seqs.fork(root)?;
        seqs.truncate(s, at)?;
        let t = Instant::now();
        seqs.ingest(&model, s, &span_ids)?;
        let si = t.elapsed().as_secs_f64();
        seqs.free(s)?;
        if rep > 0 {
            span_in.push(si);
            exact.push(e);
            reingest.push(r);
            shift.push(sh);
            full.push(f);
        }
        eprintln!("bench evict: rep {rep}/{} done", a.reps);
    }
    let (e, r) = (median(&exact), median(&reingest));
    let report = EvictReport {
        schema: SCHEMA,
        engine: "fak",
        cpu: cpu_model(),
        isa: fak_kernels::isa().name().to_string(),
        threads: model.threads(),
        model: model_file_name(path),
        model_sha256: sha256_file(path)?,
        len: a.len,
        span: a.span,
        at,
        tail_tokens: tail.len(),
        reps: a.reps,
        times: EvictTimes {
            exact_s: e,
            reingest_s: r,
            shift_s: median(&shift),
            full_recompute_s: median(&full),
            exact_over_reingest: e / r.max(1e-12),
            span_ingest_s: median(&span_in),
            exact_over_span_ingest: e / median(&span_in).max(1e-12),
            exact_s_reps: exact,
            reingest_s_reps: reingest,
        },
    };
    if a.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        let t = &report.times;
        println!(
            "remove {} of {} tokens at {} ({} tail tokens):",
            a.span,
            a.len,
            at,
            tail.len()
        );
        println!("  exact evict      {:>9.1} ms", t.exact_s * 1e3);
        println!("  re-ingest tail   {:>9.1} ms", t.reingest_s * 1e3);
        println!("  exact/re-ingest  {:>9.3}", t.exact_over_reingest);
        println!("  shift (approx.)  {:>9.1} ms", t.shift_s * 1e3);
        println!("  ingest the span  {:>9.1} ms", t.span_ingest_s * 1e3);
        println!("  exact/span       {:>9.3}", t.exact_over_span_ingest);
        println!("  full recompute   {:>9.1} ms", t.full_recompute_s * 1e3);
    }
    Ok(())
}
