//! `fak bench constrained`: what grammar-constrained decoding costs, as
//! decode tok/s with every request held to a JSON schema against the same
//! requests unconstrained, alternated in one process, for each mask mode
//! (`fak_engine::MaskMode`: check first after the forward pass, or
//! overlapped with it on a worker).
//!
//! Protocol:
//!
//! ```text
//!   one Engine (prefix cache off), the model's chat template around PROMPT
//!   per batch size B, per rep:  free run, then one constrained run per
//!     mask mode (F C1 C2 F C1 C2 ...)
//!     B requests, request i sampled at `temperature` (0: greedy) and
//!     `top_p` with seed i, each exactly `tokens` tokens long:
//!       free         end tokens do not stop it (StopAt::Never)
//!       constrained  SCHEMA, an array of at least 1000 objects, so the
//!                    grammar never accepts (never allows an end token)
//!                    before `tokens`
//!     timed: the engine steps after every request has its first token
//!     (pure decode steps: B tokens each); decode tok/s = tokens / time
//!   ratio = constrained / free tok/s of the same rep, per mode; the median
//!   of the ratios is reported, with each run's mask time per token
//! ```
//!
//! Masks are computed inside `Engine::step`, so the step times include
//! them wherever the engine computes them.

use std::collections::HashSet;
use std::fmt::Write as _;
use std::time::{Duration, Instant};

use fak_engine::{
    Constraint, Engine, EngineConfig, EngineStats, Event, MaskMode, PagedKvConfig, PrefixCache,
    Request, SamplingParams, StopAt, StopRules,
};
use fak_model::{KvType, Model};
use fak_tokenizer::{ChatMessage, ChatTemplate, EncodeOptions, Tokenizer};
use serde::Serialize;

use crate::error::{params, Result};
use crate::{median, ModelSpec, RunHeader};

/// Schema tag of [`Report`].
pub const SCHEMA: &str = "fak-bench-constrained/2";
/// The user message every request answers.
pub const PROMPT: &str = "List people as a JSON array of objects with name, age, city and tags.";
/// The JSON schema of the constrained runs: free strings (large masks),
/// bounded integers, an enum and nested arrays.
pub const JSON_SCHEMA: &str = r#"{"type":"array","minItems":1000,"items":{"type":"object","properties":{"name":{"type":"string","maxLength":24},"age":{"type":"integer","minimum":0,"maximum":120},"city":{"type":"string","enum":["Paris","Lima","Osaka","Accra","Oslo"]},"tags":{"type":"array","items":{"type":"string","maxLength":10},"maxItems":3}},"required":["name","age","city","tags"],"additionalProperties":false}}"#;
/// The sampling temperature of `fak bench constrained` by default.
pub const DEFAULT_TEMPERATURE: f32 = 0.8;

/// What `fak bench constrained` measures.
#[derive(Debug, Clone, PartialEq)]
pub struct Params {
    pub model: ModelSpec,
    /// Batch sizes (requests decoding together), each at least 1.
    pub batch: Vec<usize>,
    /// Pairs of runs (free, constrained) per batch size.
    pub reps: usize,
    /// Tokens each request generates (at least 2).
    pub tokens: usize,
    /// Sampling temperature (0: greedy).
    pub temperature: f32,
    /// Nucleus cut (1: none; below 1 every constrained sample masks).
    pub top_p: f32,
    /// Mask modes, each run after the free run of every rep (at least 1).
    pub mask_modes: Vec<MaskMode>,
}

/// A mask mode's name in reports (as the CLI flag spells it).
pub fn mask_mode_name(m: MaskMode) -> &'static str {
    match m {
        MaskMode::CheckFirst => "check-first",
        MaskMode::Overlap => "overlap",
    }
}

/// One run's measurements.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Run {
    /// Tokens of the timed steps.
    pub decode_tokens: u64,
    pub decode_s: f64,
    pub decode_tok_s: f64,
    /// Samples of the timed steps whose token passed the grammar check
    /// (no mask applied), and masks computed; the time of checks, masks
    /// and waits on the engine thread per token (the engine's
    /// `constraint_mask_time` + `constraint_wait_time`).
    pub checks: u64,
    pub masks: u64,
    pub mask_us_per_token: f64,
    /// The mask worker's time per token (overlap: during the forward).
    pub worker_us_per_token: f64,
    /// Time of the timed steps outside the forward passes, per token
    /// (scheduling, masks, sampling).
    pub outside_forward_us_per_token: f64,
}

/// One mask mode's constrained runs at one batch size.
#[derive(Debug, Clone, Serialize)]
pub struct ModeResult {
    pub mask_mode: &'static str,
    pub constrained_tok_s: f64,
    /// Median of the per-rep ratios constrained / free.
    pub ratio_median: f64,
    pub ratios: Vec<f64>,
    pub constrained: Vec<Run>,
}

/// One batch size's measurements.
#[derive(Debug, Clone, Serialize)]
pub struct BatchResult {
    pub batch: usize,
    pub free_tok_s: f64,
    pub free: Vec<Run>,
    pub modes: Vec<ModeResult>,
}

/// The JSON report.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    #[serde(flatten)]
    pub header: RunHeader,
    pub prompt: &'static str,
    pub prompt_tokens: usize,
    pub json_schema: &'static str,
    pub tokens: usize,
    pub temperature: f32,
    pub top_p: f32,
    pub reps: usize,
    pub order: &'static str,
    pub results: Vec<BatchResult>,
}

/// Free or constrained.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Free,
    Constrained,
}

fn prompt(model: &Model, tok: &Tokenizer) -> Result<Vec<u32>> {
    let text = match ChatTemplate::from_gguf(model.gguf())? {
        Some(t) => t.render(
            &[ChatMessage {
                role: "user".into(),
                content: PROMPT.into(),
            }],
            true,
        )?,
        None => PROMPT.to_string(),
    };
    Ok(tok.encode(&text, EncodeOptions::default()))
}

/// The counters a run's timed steps moved.
struct Delta {
    checks: u64,
    masks: u64,
    /// Checks, masks and waits on the engine thread.
    engine: Duration,
    worker: Duration,
    forward: Duration,
}

fn delta(before: &EngineStats, after: &EngineStats) -> Delta {
    Delta {
        checks: after.constraint_checks - before.constraint_checks,
        masks: after.constraint_masks - before.constraint_masks,
        engine: (after.constraint_mask_time + after.constraint_wait_time)
            - (before.constraint_mask_time + before.constraint_wait_time),
        worker: after.constraint_worker_time - before.constraint_worker_time,
        forward: after.forward.all().total() - before.forward.all().total(),
    }
}

/// The sampling of one run's requests.
#[derive(Debug, Clone, Copy)]
struct Sampling {
    temperature: f32,
    top_p: f32,
}

fn run_once(
    e: &mut Engine<'_>,
    prompt: &[u32],
    b: usize,
    tokens: usize,
    sampling: Sampling,
    mode: Mode,
) -> Result<Run> {
    for i in 0..b {
        e.add(Request {
            sampling: SamplingParams {
                temperature: sampling.temperature,
                top_p: sampling.top_p,
                seed: i as u64,
                ..SamplingParams::greedy()
            },
            stop: StopRules {
                eog: StopAt::Never,
                ..StopRules::default()
            },
            constraint: (mode == Mode::Constrained)
                .then(|| Constraint::JsonSchema(JSON_SCHEMA.to_string())),
            ..Request::greedy(prompt.to_vec(), tokens)
        })?;
    }
    let mut started = HashSet::new();
    let mut before = None;
    let mut decode = Duration::ZERO;
    let mut decode_tokens = 0u64;
    while e.has_work() {
        let t = Instant::now();
        let events = e.step()?;
        let dt = t.elapsed();
        let timed = before.is_some();
        for ev in events {
            match ev {
                Event::Token { id, .. } => {
                    decode_tokens += u64::from(timed);
                    started.insert(id);
                }
                Event::Failed { error, .. } => return Err(error.into()),
                Event::Admitted { .. } | Event::Finished { .. } => {}
            }
        }
        if timed {
            decode += dt;
        } else if started.len() == b {
            before = Some(e.stats());
        }
    }
    let d = match &before {
        Some(s) => delta(s, &e.stats()),
        None => delta(&e.stats(), &e.stats()),
    };
    let per_token = |d: Duration| d.as_secs_f64() * 1e6 / decode_tokens.max(1) as f64;
    let decode_s = decode.as_secs_f64();
    Ok(Run {
        decode_tokens,
        decode_s,
        decode_tok_s: decode_tokens as f64 / decode_s.max(1e-12),
        checks: d.checks,
        masks: d.masks,
        mask_us_per_token: per_token(d.engine),
        worker_us_per_token: per_token(d.worker),
        outside_forward_us_per_token: per_token(decode.saturating_sub(d.forward)),
    })
}

/// Runs the protocol (see the module docs) at every batch size, after a
/// warm-up pair at the first one, with a progress bar on stderr.
///
/// # Errors
///
/// `reps` or a batch size of 0, `tokens` below 2, no mask mode, bad
/// sampling settings, loading the model or its tokenizer, engine errors.
pub fn run(p: &Params) -> Result<Report> {
    if p.reps == 0 || p.batch.is_empty() || p.batch.contains(&0) {
        return Err(params("--reps and every --batch size must be at least 1"));
    }
    if p.tokens < 2 {
        return Err(params("--tokens must be at least 2"));
    }
    if p.mask_modes.is_empty() {
        return Err(params("--mask-modes needs at least one mode"));
    }
    let sampling = Sampling {
        temperature: p.temperature,
        top_p: p.top_p,
    };
    SamplingParams {
        temperature: p.temperature,
        top_p: p.top_p,
        ..SamplingParams::greedy()
    }
    .validate()
    .map_err(|e| params(format!("--temp/--top-p: {e}")))?;
    let model = p.model.load()?;
    let tok = Tokenizer::from_gguf(model.gguf())?;
    let prompt = prompt(&model, &tok)?;
    let most = p.batch.iter().copied().max().unwrap_or(1);
    let n_ctx = prompt.len() + p.tokens + 1;
    let block_size = fak_engine::DEFAULT_BLOCK_SIZE;
    let cfg = EngineConfig {
        kv: PagedKvConfig::for_sequences(block_size, most, n_ctx + block_size)
            .with_kv_type(KvType::F16),
        token_budget: (most * prompt.len()).max(most),
        max_running: most,
        max_waiting: None,
        n_ctx,
        prefix_cache: PrefixCache::Off,
        // The batch's prompts go in together; the decode steps are timed.
        prefill: fak_engine::PrefillMix::Fill,
        mask: p.mask_modes[0],
    };
    let mut e = Engine::new(&model, Some(&tok), cfg)?;
    let n_modes = p.mask_modes.len();
    let bar = crate::progress_bar(
        (p.batch.len() * p.reps + 1) * (1 + n_modes),
        "bench constrained",
        "",
    )?;
    bar.set_message("warm-up");
    run_once(&mut e, &prompt, p.batch[0], p.tokens, sampling, Mode::Free)?;
    bar.inc(1);
    for &m in &p.mask_modes {
        e.set_mask_mode(m);
        run_once(
            &mut e,
            &prompt,
            p.batch[0],
            p.tokens,
            sampling,
            Mode::Constrained,
        )?;
        bar.inc(1);
    }
    let tok_s = |runs: &[Run]| median(&runs.iter().map(|r| r.decode_tok_s).collect::<Vec<_>>());
    let mut results = Vec::with_capacity(p.batch.len());
    for &b in &p.batch {
        bar.set_message(format!("B={b}"));
        let mut free = Vec::new();
        let mut constrained: Vec<Vec<Run>> = vec![Vec::new(); n_modes];
        for _ in 0..p.reps {
            free.push(run_once(
                &mut e,
                &prompt,
                b,
                p.tokens,
                sampling,
                Mode::Free,
            )?);
            bar.inc(1);
            for (runs, &m) in constrained.iter_mut().zip(&p.mask_modes) {
                e.set_mask_mode(m);
                let r = run_once(&mut e, &prompt, b, p.tokens, sampling, Mode::Constrained)?;
                runs.push(r);
                bar.inc(1);
            }
        }
        let modes = constrained
            .into_iter()
            .zip(&p.mask_modes)
            .map(|(runs, &m)| {
                let ratios: Vec<f64> = free
                    .iter()
                    .zip(&runs)
                    .map(|(f, c)| c.decode_tok_s / f.decode_tok_s.max(1e-12))
                    .collect();
                ModeResult {
                    mask_mode: mask_mode_name(m),
                    constrained_tok_s: tok_s(&runs),
                    ratio_median: median(&ratios),
                    ratios,
                    constrained: runs,
                }
            })
            .collect();
        results.push(BatchResult {
            batch: b,
            free_tok_s: tok_s(&free),
            free,
            modes,
        });
    }
    bar.finish_and_clear();
    Ok(Report {
        header: RunHeader::model_run(SCHEMA, &p.model.path, &model)?,
        prompt: PROMPT,
        prompt_tokens: prompt.len(),
        json_schema: JSON_SCHEMA,
        tokens: p.tokens,
        temperature: p.temperature,
        top_p: p.top_p,
        reps: p.reps,
        order: "per batch size: (free, then constrained per mask mode) x reps",
        results,
    })
}

impl Report {
    /// Human-readable summary: one line per batch size and mask mode.
    pub fn table(&self) -> String {
        let mut s = format!(
            "temperature {} top-p {}\n{:>5} {:>12} {:>10} {:>16} {:>12} {:>14} {:>16}\n",
            self.temperature,
            self.top_p,
            "B",
            "mask mode",
            "free t/s",
            "constrained t/s",
            "ratio (med)",
            "mask us/token",
            "worker us/token"
        );
        for r in &self.results {
            for m in &r.modes {
                let med =
                    |f: fn(&Run) -> f64| median(&m.constrained.iter().map(f).collect::<Vec<_>>());
                let _ = writeln!(
                    s,
                    "{:>5} {:>12} {:>10.1} {:>16.1} {:>12.3} {:>14.1} {:>16.1}",
                    r.batch,
                    m.mask_mode,
                    r.free_tok_s,
                    m.constrained_tok_s,
                    m.ratio_median,
                    med(|c| c.mask_us_per_token),
                    med(|c| c.worker_us_per_token)
                );
            }
        }
        s
    }
}
