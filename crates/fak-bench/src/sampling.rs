//! `fak bench sampling`: the cost of one draw of `fak_engine::Sampler`
//! outside the forward pass, against the full-vocabulary sort it replaced.
//!
//! For each logits source (a model's logits after a short text and a few
//! greedy steps, or synthetic logits of a given vocabulary size) and each
//! of four settings, draws alternate between the full sort (the sampler as
//! it was before it stopped sorting: collect every candidate, sort the
//! vocabulary, walk; `fak_engine::sampling_reference::full_sort_draw`, the
//! oracle of fak-engine's sampling tests too, here with libm's `exp` as the
//! old sampler had) and `Sampler::sample`, each draw timed on its own; the
//! medians are reported:
//!
//! ```text
//! source × setting ─► draws × (time full_sort_draw, time Sampler::sample)
//!                                 cycling over the source's logit vectors
//! report: median µs per draw, old and new; the kept count (old's nucleus)
//! ```
//!
//! The settings: temperature 1 alone (OpenAI's default), temperature 0.7 with
//! top-p 0.9, top-k 40 with top-p 0.95, min-p 0.05 (the last two at
//! temperature 1).

use std::path::PathBuf;
use std::time::Instant;

use fak_engine::sampling_reference::full_sort_draw;
use fak_engine::{Sampler, SamplingParams, Sequence};
use fak_tokenizer::{EncodeOptions, Tokenizer};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde::Serialize;

use crate::error::{params, Result};
use crate::{load_model, median, model_file_name, RunHeader};

/// Schema tag of [`SamplingReport`].
pub const SCHEMA: &str = "fak-bench-sampling/1";

/// The text whose continuation logits a model source uses.
pub const TEXT: &str = "Once upon a time, in a small village by the sea, there lived a";

/// Logit vectors per model source: after the text, then after each of
/// this many minus one greedy tokens.
pub const MODEL_STEPS: usize = 8;

/// Where the logits come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// A model's logits after [`TEXT`] and greedy steps ([`MODEL_STEPS`]
    /// vectors).
    Model(PathBuf),
    /// One synthetic vector of this vocabulary size (see [`synthetic`]).
    Synthetic(usize),
}

/// What `fak bench sampling` measures.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Params {
    pub sources: Vec<Source>,
    /// Timed draws per source, setting and implementation.
    pub draws: usize,
    /// Threads of a model's forward pass (the draws run on one thread).
    pub threads: Option<usize>,
}

/// One source × setting.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    /// Model file name, or `synthetic`.
    pub source: String,
    pub n_vocab: usize,
    pub setting: String,
    pub temperature: f32,
    pub top_k: usize,
    pub top_p: f32,
    pub min_p: f32,
    /// Median over the logit vectors of how many tokens the old sampler
    /// kept to draw from.
    pub kept_median: f64,
    pub old_us_median: f64,
    pub new_us_median: f64,
    /// `old_us_median / new_us_median`.
    pub speedup: f64,
}

/// The JSON report.
#[derive(Debug, Clone, Serialize)]
pub struct SamplingReport {
    /// Schema, cpu and threads (1: the draws).
    #[serde(flatten)]
    pub header: RunHeader,
    pub draws: usize,
    pub rows: Vec<Row>,
}

/// The four settings (name, params without seed).
pub fn settings() -> Vec<(&'static str, SamplingParams)> {
    let g = SamplingParams::greedy();
    vec![
        (
            "temp 1",
            SamplingParams {
                temperature: 1.0,
                ..g
            },
        ),
        (
            "temp 0.7, top-p 0.9",
            SamplingParams {
                temperature: 0.7,
                top_p: 0.9,
                ..g
            },
        ),
        (
            "top-k 40, top-p 0.95",
            SamplingParams {
                temperature: 1.0,
                top_k: 40,
                top_p: 0.95,
                ..g
            },
        ),
        (
            "min-p 0.05",
            SamplingParams {
                temperature: 1.0,
                min_p: 0.05,
                ..g
            },
        ),
    ]
}

/// Synthetic logits of `n_vocab` tokens: a bulk of roughly normal values
/// (σ ≈ 2, the sum of four LCG uniforms) and a head of 16 tokens spread
/// over 12..16, scattered through the vocabulary.
pub fn synthetic(n_vocab: usize) -> Vec<f32> {
    let mut s = crate::LCG_STATE0;
    let mut uniform = || {
        s = s
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (s >> 40) as f32 / (1u64 << 24) as f32
    };
    let mut v: Vec<f32> = (0..n_vocab)
        .map(|_| (uniform() + uniform() + uniform() + uniform() - 2.0) * 3.5)
        .collect();
    for k in 0..16usize.min(n_vocab) {
        let at = (k * 7919 + 13) % n_vocab;
        v[at] = 12.0 + k as f32 / 4.0;
    }
    v
}

/// The logit vectors of `source` and its name.
fn logits_of(source: &Source, threads: Option<usize>) -> Result<(String, Vec<Vec<f32>>)> {
    match source {
        Source::Synthetic(n) => {
            if *n == 0 {
                return Err(params("--vocab sizes must be at least 1"));
            }
            Ok(("synthetic".to_string(), vec![synthetic(*n)]))
        }
        Source::Model(path) => {
            let model = load_model(path, threads)?;
            let tok = Tokenizer::from_gguf(model.gguf())?;
            let ids = tok.encode(TEXT, EncodeOptions::default());
            let mut seq = Sequence::new(&model, ids.len() + MODEL_STEPS)?;
            let mut out = vec![seq.ingest(&model, &ids)?];
            while out.len() < MODEL_STEPS {
                let last = out.last().map(|l| fak_engine::argmax(l));
                let Some(Some(next)) = last else { break };
                out.push(seq.ingest(&model, &[next])?);
            }
            Ok((model_file_name(path), out))
        }
    }
}

/// Runs the benchmark (see the module docs).
///
/// # Errors
///
/// No sources, 0 draws, a vocabulary size of 0; loading a model or its
/// tokenizer, the forward pass.
pub fn run(p: &Params) -> Result<SamplingReport> {
    if p.sources.is_empty() || p.draws == 0 {
        return Err(params("give at least one source, and --draws of 1 or more"));
    }
    let mut rows = Vec::new();
    for source in &p.sources {
        let (name, vectors) = logits_of(source, p.threads)?;
        for (setting, sp) in settings() {
            let sp = SamplingParams { seed: 1, ..sp };
            let mut sampler = Sampler::new(sp);
            let mut rng = ChaCha8Rng::seed_from_u64(sp.seed);
            let mut buf = Vec::new();
            let (mut old, mut new, mut kept) = (Vec::new(), Vec::new(), Vec::new());
            // One untimed warm-up draw each.
            std::hint::black_box(full_sort_draw(
                &vectors[0],
                &sp,
                f32::exp,
                &mut rng,
                &mut buf,
            ));
            std::hint::black_box(sampler.sample(&vectors[0]));
            for i in 0..p.draws {
                let l = &vectors[i % vectors.len()];
                let t0 = Instant::now();
                let r = std::hint::black_box(full_sort_draw(l, &sp, f32::exp, &mut rng, &mut buf));
                old.push(t0.elapsed().as_secs_f64() * 1e6);
                let t0 = Instant::now();
                std::hint::black_box(sampler.sample(l));
                new.push(t0.elapsed().as_secs_f64() * 1e6);
                if i < vectors.len() {
                    kept.push(r.map_or(0, |r| r.1) as f64);
                }
            }
            let (o, n) = (median(&old), median(&new));
            rows.push(Row {
                source: name.clone(),
                n_vocab: vectors[0].len(),
                setting: setting.to_string(),
                temperature: sp.temperature,
                top_k: sp.top_k,
                top_p: sp.top_p,
                min_p: sp.min_p,
                kept_median: median(&kept),
                old_us_median: o,
                new_us_median: n,
                speedup: if n > 0.0 { o / n } else { 0.0 },
            });
        }
    }
    Ok(SamplingReport {
        header: RunHeader::probe(SCHEMA, 1),
        draws: p.draws,
        rows,
    })
}

impl SamplingReport {
    /// A markdown table, one row per source × setting.
    pub fn table(&self) -> String {
        let mut s = format!(
            "sampling, median µs per draw over {} draws ({})\n\n\
             | logits | V | setting | kept (old) | old: full sort | new | old / new |\n\
             |---|---|---|---|---|---|---|\n",
            self.draws, self.header.cpu
        );
        for r in &self.rows {
            s += &format!(
                "| {} | {} | {} | {} | {:.1} | {:.1} | {:.1}x |\n",
                r.source,
                r.n_vocab,
                r.setting,
                r.kept_median,
                r.old_us_median,
                r.new_us_median,
                r.speedup
            );
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The old and the new sampler keep the same tokens (checked as sets
    /// in fak-engine's unit tests; here: each only draws tokens the other
    /// could, on the bench's own synthetic logits).
    #[test]
    fn reference_and_sampler_draw_from_the_same_set() {
        let l = synthetic(5000);
        for (_, sp) in settings() {
            let mut rng = ChaCha8Rng::seed_from_u64(3);
            let mut buf = Vec::new();
            let mut kept = std::collections::HashSet::new();
            let mut s = Sampler::new(SamplingParams { seed: 3, ..sp });
            let mut drawn = std::collections::HashSet::new();
            for _ in 0..300 {
                let (t, _) = full_sort_draw(&l, &sp, f32::exp, &mut rng, &mut buf).expect("token");
                kept.extend(buf.iter().map(|e| e.0));
                drawn.insert(t);
                drawn.insert(s.sample(&l).expect("token"));
            }
            assert!(drawn.is_subset(&kept), "{sp:?}");
        }
    }

    #[test]
    fn no_sources_is_an_error() {
        let p = Params {
            sources: vec![],
            draws: 1,
            threads: None,
        };
        assert!(run(&p).is_err());
    }

    #[test]
    fn synthetic_report_has_a_row_per_setting() {
        let p = Params {
            sources: vec![Source::Synthetic(300)],
            draws: 3,
            threads: None,
        };
        let r = run(&p).expect("report");
        assert_eq!(r.rows.len(), settings().len());
        assert!(r
            .rows
            .iter()
            .all(|r| r.n_vocab == 300 && r.kept_median >= 1.0));
        assert!(r.table().contains("top-k 40, top-p 0.95"));
    }
}
