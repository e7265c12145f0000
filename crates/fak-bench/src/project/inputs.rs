//! The measured inputs of `fak project`: rates files from `fak bench model`
//! (`fak-bench-single/1`), `fak bench batch` (`fak-bench-batch/1`) and
//! `fak bench fleet` (`fak-bench-fleet/1`), or a brief in-process
//! measurement when a kind of rates file is not given.
//!
//! ```text
//!  in-process (only for what no --rates file supplies):
//!    prefill   one warm-up forward of 256 LCG ids, then one timed forward
//!              of the first n ids, n ∈ {16, 64, 256}, each into an empty cache
//!    decode    B ∈ {1, 8, 32}: B prompts of 16 ids (untimed), then 8 timed
//!              steps of B tokens through fak_engine::Sequences;
//!              tok/s = 8·B / Σ step times
//!    context   (only when no fak-bench-single/1 file is given; a given file
//!              supplies its decode_at_context points, if it has any)
//!              8 agents forked from a shared context of 64 and of 1024
//!              ids, decoding together (crate::context); median
//!              step ms per context
//! ```

use std::path::{Path, PathBuf};
use std::time::Instant;

use fak_engine::{PagedKvConfig, PrefixCache, Sequences, Tenant};
use fak_model::{FlatKv, Model, SeqId};
use serde::Deserialize;

use super::calc::{
    ContextPoint, DecodePoint, FleetPoint, Measured, ModelInfo, PrefillPoint, Source, Workload,
};
use crate::error::{input, json, Error, Result};
use crate::{appends, model_file_name, sha256_file, LcgIds};

/// Prefill length measured in-process.
pub const MEASURE_PREFILL: usize = 256;
/// Contexts of the in-process attention measurement.
pub const MEASURE_CONTEXTS: [usize; 2] = [64, 1024];
/// Batch sizes measured in-process.
pub const MEASURE_BATCHES: [usize; 3] = [1, 8, 32];
/// Timed decode steps per batch size in-process.
pub const MEASURE_STEPS: usize = 8;
const MEASURE_PROMPT: usize = 16;

#[derive(Deserialize)]
struct Head {
    schema: String,
    model_sha256: String,
    threads: usize,
}

#[derive(Deserialize)]
struct Single {
    prefill: Vec<PrefillPoint>,
    #[serde(default)]
    decode_at_context: Vec<ContextPoint>,
}

#[derive(Deserialize)]
struct BatchRow {
    batch: usize,
    status: String,
    decode_tok_s: f64,
}

#[derive(Deserialize)]
struct BatchFile {
    results: Vec<BatchRow>,
}

#[derive(Deserialize)]
struct FleetRow {
    #[serde(flatten)]
    shape: Workload,
    agent_turns_per_s: f64,
    status: String,
}

#[derive(Deserialize)]
struct FleetFile {
    runs: Vec<FleetRow>,
}

/// The rates given on the command line, sorted by kind.
#[derive(Default)]
pub struct Rates {
    pub prefill: Option<Measured<PrefillPoint>>,
    pub decode: Option<Measured<DecodePoint>>,
    /// The single-stream file's `decode_at_context` points, if it has any.
    pub context: Option<Measured<ContextPoint>>,
}

/// The text of the file at `path`.
fn read_text(path: &Path) -> Result<String> {
    std::fs::read_to_string(path).map_err(|source| Error::Io {
        what: "reading",
        path: path.to_path_buf(),
        source,
    })
}

/// The JSON value in the file at `path`.
pub(crate) fn read_value(path: &Path) -> Result<serde_json::Value> {
    serde_json::from_str(&read_text(path)?).map_err(json(format!("parsing {}", path.display())))
}

fn read_json(path: &Path) -> Result<(serde_json::Value, Head, Source)> {
    let v = read_value(path)?;
    let head: Head = serde_json::from_value(v.clone()).map_err(json(format!(
        "{}: not a fak bench report (needs schema, model_sha256, threads)",
        path.display()
    )))?;
    let src = Source {
        file: Some(path.display().to_string()),
        sha256: Some(sha256_file(path)?),
        schema: head.schema.clone(),
        threads: head.threads,
        how: String::new(),
    };
    Ok((v, head, src))
}

fn check_model(path: &Path, head: &Head, model: &ModelInfo) -> Result<()> {
    if head.model_sha256 != model.sha256 {
        return Err(input(format!(
            "{} was measured on a model with sha256 {}, but {} has sha256 {}",
            path.display(),
            head.model_sha256,
            model.file,
            model.sha256
        )));
    }
    Ok(())
}

fn check_threads(path: &Path, head: &Head, threads: Option<usize>) -> Result<()> {
    match threads {
        Some(t) if t != head.threads => Err(input(format!(
            "{} was measured with {} threads, but --threads is {t}",
            path.display(),
            head.threads
        ))),
        _ => Ok(()),
    }
}

/// Reads `--rates` files: at most one `fak-bench-single/1` and one
/// `fak-bench-batch/1`, each measured on `model` (same sha256) and, when
/// `threads` is given, with that many threads.
pub fn read_rates(files: &[PathBuf], model: &ModelInfo, threads: Option<usize>) -> Result<Rates> {
    let mut rates = Rates::default();
    for path in files {
        let (v, head, mut src) = read_json(path)?;
        check_model(path, &head, model)?;
        check_threads(path, &head, threads)?;
        match head.schema.as_str() {
            crate::single::SCHEMA => {
                if rates.prefill.is_some() {
                    return Err(input("two fak-bench-single/1 rates files: give one"));
                }
                let s: Single = serde_json::from_value(v)
                    .map_err(json(format!("{}: reading prefill", path.display())))?;
                if !s.decode_at_context.is_empty() {
                    let mut csrc = src.clone();
                    csrc.how = "fak bench model --contexts: agents forked from a shared root grown to each context (untimed), then timed steps of one token per agent; median step ms".into();
                    rates.context = Some(Measured {
                        source: csrc,
                        points: s.decode_at_context,
                    });
                }
                src.how = "fak bench model: single-stream prefill, one forward of n LCG ids into an empty cache; median over reps".into();
                rates.prefill = Some(Measured {
                    source: src,
                    points: s.prefill,
                });
            }
            crate::batch::SCHEMA => {
                if rates.decode.is_some() {
                    return Err(input("two fak-bench-batch/1 rates files: give one"));
                }
                let b: BatchFile = serde_json::from_value(v)
                    .map_err(json(format!("{}: reading results", path.display())))?;
                src.how = "fak bench batch: aggregate decode tok/s of B sequences (16-token prompts, 16 steps), status ok rows".into();
                let points: Vec<DecodePoint> = b
                    .results
                    .iter()
                    .filter(|r| r.status == "ok")
                    .map(|r| DecodePoint {
                        batch: r.batch,
                        tok_s: r.decode_tok_s,
                    })
                    .collect();
                if points.is_empty() {
                    return Err(input(format!(
                        "{}: no result with status ok",
                        path.display()
                    )));
                }
                rates.decode = Some(Measured {
                    source: src,
                    points,
                });
            }
            other => {
                return Err(input(format!(
                    "{}: schema {other:?} is not a rates file (want {} or {})",
                    path.display(),
                    crate::single::SCHEMA,
                    crate::batch::SCHEMA
                )))
            }
        }
    }
    Ok(rates)
}

/// Reads a `fak-bench-fleet/1` report measured on `model`: its status-ok runs.
pub fn read_fleet(path: &Path, model: &ModelInfo) -> Result<Measured<FleetPoint>> {
    let (v, head, mut src) = read_json(path)?;
    if head.schema != crate::fleet::SCHEMA {
        return Err(input(format!(
            "{}: schema {:?} is not {}",
            path.display(),
            head.schema,
            crate::fleet::SCHEMA
        )));
    }
    check_model(path, &head, model)?;
    let f: FleetFile =
        serde_json::from_value(v).map_err(json(format!("{}: reading runs", path.display())))?;
    let points: Vec<FleetPoint> = f
        .runs
        .iter()
        .filter(|r| r.status == "ok" && r.agent_turns_per_s > 0.0)
        .map(|r| FleetPoint {
            shape: r.shape,
            agent_turns_per_s: r.agent_turns_per_s,
        })
        .collect();
    if points.is_empty() {
        return Err(input(format!("{}: no run with status ok", path.display())));
    }
    src.how = "fak bench fleet: measured agent-turns/s per run (status ok runs)".into();
    Ok(Measured {
        source: src,
        points,
    })
}

/// Identity and KV geometry of the model file (metadata only; no weights
/// are read).
pub fn model_info(path: &Path) -> Result<ModelInfo> {
    let (_, c) = crate::load::open_gguf(path)?;
    Ok(ModelInfo {
        file: model_file_name(path),
        sha256: sha256_file(path)?,
        n_layer: c.n_layer,
        n_kv_dim: c.n_embd_kv(),
    })
}

/// The [`Source`] of an in-process measurement on `model`.
fn in_process(model: &Model, schema: &str, how: String) -> Source {
    Source {
        file: None,
        sha256: None,
        schema: schema.into(),
        threads: model.threads(),
        how,
    }
}

/// One untimed warm-up prefill of [`MEASURE_PREFILL`] ids, then one timed
/// prefill of each length of [`crate::single::PREFILL_LENS`] (16, 64, 256).
pub fn measure_prefill(model: &Model) -> Result<Measured<PrefillPoint>> {
    let ids = LcgIds::take(model.config().n_vocab, MEASURE_PREFILL);
    let mut kv = FlatKv::for_model(model.config(), MEASURE_PREFILL, 1)?;
    let mut once =
        |n: usize| crate::single::time_prefill(model, &mut kv, ids.get(..n).unwrap_or(&ids));
    once(MEASURE_PREFILL)?;
    let points = crate::single::PREFILL_LENS
        .iter()
        .filter(|&&n| n <= MEASURE_PREFILL)
        .map(|&n| {
            Ok(PrefillPoint {
                n_tokens: n,
                tok_s: n as f64 / once(n)?.max(1e-12),
            })
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(Measured {
        source: in_process(model, crate::single::SCHEMA, format!(
                "fak project in-process: one warm-up forward of {MEASURE_PREFILL} LCG ids, then one timed forward of the first n LCG ids into an empty FlatKv cache per n"
            )),
        points,
    })
}

/// Single-sequence decode step times at [`MEASURE_CONTEXTS`].
pub fn measure_context(model: &Model) -> Result<Measured<ContextPoint>> {
    let points =
        crate::context::decode_at_contexts(model, &MEASURE_CONTEXTS, fak_engine::KvWindow::Drop)?;
    Ok(Measured {
        source: in_process(model, crate::single::SCHEMA, format!(
                "fak project in-process: {} agents forked from a root of LCG ids grown to each context of {MEASURE_CONTEXTS:?} (untimed), then {} timed steps of one token per agent; median step ms",
                crate::context::CONTEXT_BATCH,
                crate::context::CONTEXT_STEPS
            )),
        points,
    })
}

/// Aggregate decode tok/s of `b` sequences: untimed 16-id prompts, then
/// [`MEASURE_STEPS`] timed steps of one token per sequence.
fn decode_rate(model: &Model, b: usize) -> Result<f64> {
    let mut ids = LcgIds::new(model.config().n_vocab);
    let sizes = PagedKvConfig::for_sequences(
        fak_engine::DEFAULT_BLOCK_SIZE,
        b,
        MEASURE_PROMPT + MEASURE_STEPS,
    );
    let mut seqs = Sequences::new(model, sizes, PrefixCache::Off, 512)?;
    let seq_ids: Vec<SeqId> = (0..b)
        .map(|_| seqs.create(Tenant(0)))
        .collect::<Result<_, _>>()?;
    let prompts: Vec<Vec<u32>> = (0..b)
        .map(|_| ids.by_ref().take(MEASURE_PROMPT).collect())
        .collect();
    let items = appends(&seq_ids, &prompts);
    let mut sink = 0.0f32;
    seqs.step_with(model, &items, |_, row| {
        sink += row.first().copied().unwrap_or(0.0)
    })?;
    let mut total = 0.0;
    for _ in 0..MEASURE_STEPS {
        let step: Vec<[u32; 1]> = ids.by_ref().take(b).map(|id| [id]).collect();
        let items = appends(&seq_ids, &step);
        let t0 = Instant::now();
        seqs.step_with(model, &items, |_, row| {
            sink += row.first().copied().unwrap_or(0.0)
        })?;
        total += t0.elapsed().as_secs_f64();
    }
    std::hint::black_box(sink);
    Ok((b * MEASURE_STEPS) as f64 / total.max(1e-12))
}

/// Batched decode at every size of [`MEASURE_BATCHES`], after a B=1 warm-up.
pub fn measure_decode(model: &Model) -> Result<Measured<DecodePoint>> {
    decode_rate(model, 1)?;
    let points = MEASURE_BATCHES
        .iter()
        .map(|&b| {
            Ok(DecodePoint {
                batch: b,
                tok_s: decode_rate(model, b)?,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let block = fak_engine::DEFAULT_BLOCK_SIZE;
    Ok(Measured {
        source: in_process(model, crate::batch::SCHEMA, format!(
                "fak project in-process: after a B=1 warm-up, per B: B prompts of {MEASURE_PROMPT} LCG ids (untimed), then {MEASURE_STEPS} timed steps of B tokens through fak_engine::Sequences (paged KV, block {block}); tok/s = {MEASURE_STEPS}*B / sum of step times"
            )),
        points,
    })
}
