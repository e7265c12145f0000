//! `fak bench model`: single-stream prefill and decode throughput.
//!
//! The protocol is shared with the llama.cpp peer
//! (`bench/peers/llamacpp.py single`), so the two JSON reports compare
//! one-to-one (`bench/compare.py`):
//!
//! ```text
//! token ids: the LCG stream (crate::LcgIds); every workload restarts it at state0.
//!
//! prefill P ∈ {16, 64, 256}:  empty cache ─ forward(id_1 … id_P) ─► logits of the last token
//!                             tok/s = P / time of that one forward pass
//! decode:                     empty cache ─ forward(id_1 … id_16)            (untimed prompt)
//!                             then 32 steps: forward(id_{16+s}) at position 15+s, s = 1..=32
//!                             tok/s = 1 / median step time
//! repetitions:                1 warm-up run (discarded) + `reps` runs per workload; the
//!                             median over runs is reported, with every run's value
//! ```

use std::time::Instant;

use fak_engine::{KvWindow, PagedKv, PagedKvConfig, Tenant};
use fak_model::{
    Batch, FlatKv, KeyRun, KvRun, KvStore, KvType, LogitsWanted, Model, SeqId, WindowMode,
};
use indicatif::ProgressBar;
use serde::Serialize;

use crate::context::ContextPoint;
use crate::error::{params, Result};
use crate::{median, stats, LcgIds, ModelSpec, RunHeader, Stats};

/// Prefill lengths measured, in tokens.
pub const PREFILL_LENS: [usize; 3] = [16, 64, 256];
/// Prompt length before the decode steps.
pub const DECODE_PROMPT: usize = 16;
/// Timed single-token decode steps per run.
pub const DECODE_STEPS: usize = 32;
/// Schema tag of [`Report`].
pub const SCHEMA: &str = "fak-bench-single/1";
/// Description of the token stream, recorded in every report.
pub const TOKEN_STREAM: &str = "lcg state0=2463534242 mul=6364136223846793005 \
    inc=1442695040888963407 id_n=(state_n>>33)%n_vocab from state_1; restarted per workload; \
    prefill P uses id_1..id_P; decode prompt id_1..id_16, steps id_17..id_48";

/// The KV store a run measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum KvKind {
    /// One contiguous region per sequence.
    #[default]
    Flat,
    /// The paged, copy-on-write block store (`fak_engine::DEFAULT_BLOCK_SIZE`-token blocks).
    Paged,
}

/// What `fak bench model` measures.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Params {
    pub model: ModelSpec,
    /// Measured repetitions per workload (after one warm-up run), at least 1.
    pub reps: usize,
    pub kv: KvKind,
    /// Element type of the KV cache.
    pub kv_type: KvType,
    /// Also time decode steps of agents forked from a shared context of
    /// each of these lengths ([`crate::context`]); empty: none.
    pub contexts: Vec<usize>,
    /// Whether sliding-window layers keep to their window
    /// ([`WindowMode::Full`]: every layer reads every position, to measure
    /// what the window saves; changes the results).
    pub window: WindowMode,
    /// Whether the paged stores drop sliding-window rows outside the
    /// window (only [`KvWindow::Keep`] with [`WindowMode::Full`]).
    pub kv_window: KvWindow,
}

/// One prefill length's results.
#[derive(Debug, Clone, Serialize)]
pub struct PrefillResult {
    pub n_tokens: usize,
    /// Median over the measured runs.
    pub tok_s: f64,
    /// Every measured run's tokens per second, in run order.
    pub tok_s_reps: Vec<f64>,
    /// Every measured run's wall time of the forward pass, seconds.
    pub seconds_reps: Vec<f64>,
}

/// Decode results.
#[derive(Debug, Clone, Serialize)]
pub struct DecodeResult {
    pub prompt_tokens: usize,
    pub steps: usize,
    /// Median over the measured runs of `1 / median step time`.
    pub tok_s: f64,
    /// Every measured run's `1 / median step time`.
    pub tok_s_reps: Vec<f64>,
    /// Step times over all measured runs, milliseconds.
    pub step_ms: Stats,
}

/// The JSON report (shared schema with the llama.cpp peer).
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    #[serde(flatten)]
    pub header: RunHeader,
    pub n_vocab: usize,
    pub reps: usize,
    pub token_stream: String,
    pub kv: KvKind,
    pub kv_type: &'static str,
    pub prefill: Vec<PrefillResult>,
    pub decode: DecodeResult,
    /// Decode step times at longer contexts (`--contexts`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub decode_at_context: Vec<ContextPoint>,
    /// `"full"` when sliding-window layers were made to read every
    /// position (`--window full`); absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub window: Option<&'static str>,
    /// Sliding-window rows in the paged stores: `"drop"` (outside the
    /// window, the default) or `"keep"` (`--kv-window keep`); `"keep"`
    /// whenever `window` is `"full"`.
    pub kv_window: &'static str,
}

/// Runs the protocol (see the module docs), with a progress bar on stderr.
///
/// # Errors
///
/// `reps` of 0, loading the model, model and KV errors.
pub fn run(p: &Params) -> Result<Report> {
    if p.reps == 0 {
        return Err(params("--reps must be at least 1"));
    }
    let mut model = p.model.load()?;
    model.set_window_mode(p.window);
    // Layers that read every position need every row.
    let kv_window = match p.window {
        WindowMode::Full => KvWindow::Keep,
        WindowMode::AsTrained => p.kv_window,
    };
    let n_vocab = model.config().n_vocab;
    let max_ctx = PREFILL_LENS
        .iter()
        .copied()
        .chain([DECODE_PROMPT + DECODE_STEPS])
        .max()
        .unwrap_or(DECODE_PROMPT + DECODE_STEPS);
    let runs_per_workload = p.reps + 1;
    let total = (PREFILL_LENS.len() + 1) * runs_per_workload;
    let bar = crate::progress_bar(total, "bench", "")?;

    let (prefill, tok_s_reps, all_steps_ms) = match p.kv {
        KvKind::Flat => {
            let mut kv = FlatKv::for_model_typed(model.config(), max_ctx, 1, p.kv_type)?;
            workloads(&model, &mut kv, p.reps, &bar)?
        }
        KvKind::Paged => {
            let sizes = PagedKvConfig::for_sequences(fak_engine::DEFAULT_BLOCK_SIZE, 1, max_ctx)
                .with_kv_type(p.kv_type)
                .with_window(kv_window);
            let mut kv = PagedBench {
                kv: PagedKv::new(model.config(), sizes)?,
                seq: None,
            };
            workloads(&model, &mut kv, p.reps, &bar)?
        }
    };
    bar.finish_and_clear();
    if !p.contexts.is_empty() {
        eprintln!("bench: decode at contexts {:?}", p.contexts);
    }
    let decode_at_context = crate::context::decode_at_contexts(&model, &p.contexts, kv_window)?;

    Ok(Report {
        window: (p.window == WindowMode::Full).then_some("full"),
        kv_window: kv_window.name(),
        header: RunHeader::model_run(SCHEMA, &p.model.path, &model)?,
        n_vocab,
        reps: p.reps,
        token_stream: TOKEN_STREAM.to_string(),
        kv: p.kv,
        kv_type: p.kv_type.name(),
        prefill,
        decode: DecodeResult {
            prompt_tokens: DECODE_PROMPT,
            steps: DECODE_STEPS,
            tok_s: median(&tok_s_reps),
            tok_s_reps,
            step_ms: stats(&all_steps_ms),
        },
        decode_at_context,
    })
}

/// Prefill and decode measurements: per prefill length its result; decode
/// tok/s per rep and every step's milliseconds.
type Measured = (Vec<PrefillResult>, Vec<f64>, Vec<f64>);

/// Runs the protocol's workloads (one warm-up + `reps` runs each) on `kv`.
fn workloads<K: BenchKv>(
    model: &Model,
    kv: &mut K,
    reps: usize,
    bar: &ProgressBar,
) -> Result<Measured> {
    let n_vocab = model.config().n_vocab;
    let runs_per_workload = reps + 1;
    let mut prefill = Vec::with_capacity(PREFILL_LENS.len());
    for &p in &PREFILL_LENS {
        bar.set_message(format!("prefill {p}"));
        let ids = LcgIds::take(n_vocab, p);
        let mut secs = Vec::with_capacity(reps);
        for run in 0..runs_per_workload {
            let s = time_prefill(model, kv, &ids)?;
            if run > 0 {
                secs.push(s);
            }
            bar.inc(1);
        }
        let tok_s_reps: Vec<f64> = secs.iter().map(|s| p as f64 / s.max(1e-12)).collect();
        prefill.push(PrefillResult {
            n_tokens: p,
            tok_s: median(&tok_s_reps),
            tok_s_reps,
            seconds_reps: secs,
        });
    }

    bar.set_message(format!("decode {DECODE_STEPS}"));
    let ids = LcgIds::take(n_vocab, DECODE_PROMPT + DECODE_STEPS);
    let mut tok_s_reps = Vec::with_capacity(reps);
    let mut all_steps_ms = Vec::with_capacity(reps * DECODE_STEPS);
    for run in 0..runs_per_workload {
        let steps = time_decode(model, kv, &ids)?;
        if run > 0 {
            tok_s_reps.push(1.0 / median(&steps).max(1e-12));
            all_steps_ms.extend(steps.iter().map(|s| s * 1e3));
        }
        bar.inc(1);
    }
    Ok((prefill, tok_s_reps, all_steps_ms))
}

/// One prefill of `ids` (`[P]` token ids) into an empty cache; returns seconds.
pub(crate) fn time_prefill<K: BenchKv>(model: &Model, kv: &mut K, ids: &[u32]) -> Result<f64> {
    let seq = kv.fresh()?;
    let mut batch = Batch::new();
    batch.push_seq(seq, 0, ids, LogitsWanted::Yes);
    let t0 = Instant::now();
    let logits = model.forward(&batch, kv)?;
    let s = t0.elapsed().as_secs_f64();
    std::hint::black_box(&logits);
    Ok(s)
}

/// Untimed prompt of `ids[..DECODE_PROMPT]`, then one timed single-token
/// step per remaining id. `ids`: `[DECODE_PROMPT + DECODE_STEPS]`. Returns
/// each step's seconds.
fn time_decode<K: BenchKv>(model: &Model, kv: &mut K, ids: &[u32]) -> Result<Vec<f64>> {
    let seq = kv.fresh()?;
    let (prompt, steps) = ids.split_at(DECODE_PROMPT.min(ids.len()));
    let mut batch = Batch::new();
    batch.push_seq(seq, 0, prompt, LogitsWanted::Yes);
    model.forward(&batch, kv)?;
    let mut times = Vec::with_capacity(steps.len());
    for (pos, &id) in (prompt.len() as u32..).zip(steps) {
        let mut b = Batch::new();
        b.push_seq(seq, pos, &[id], LogitsWanted::Yes);
        let t0 = Instant::now();
        let logits = model.forward(&b, kv)?;
        times.push(t0.elapsed().as_secs_f64());
        std::hint::black_box(&logits);
    }
    Ok(times)
}

/// A KV store the benchmark can empty between runs.
pub(crate) trait BenchKv: KvStore + Sync {
    /// Forgets the benchmark's sequence and returns the id of an empty one.
    ///
    /// # Errors
    ///
    /// The store's own.
    fn fresh(&mut self) -> Result<SeqId>;
}

impl BenchKv for FlatKv {
    fn fresh(&mut self) -> Result<SeqId> {
        self.clear(SeqId(0))?;
        Ok(SeqId(0))
    }
}

/// The paged store with the benchmark's one sequence.
struct PagedBench {
    kv: PagedKv,
    seq: Option<SeqId>,
}

impl KvStore for PagedBench {
    fn seq_len(&self, seq: SeqId) -> Result<usize, fak_model::KvError> {
        self.kv.seq_len(seq)
    }
    fn reserve(&mut self, seq: SeqId, n: usize) -> Result<(), fak_model::KvError> {
        self.kv.reserve(seq, n)
    }
    fn write(
        &mut self,
        layer: usize,
        seq: SeqId,
        pos: usize,
        k: &[f32],
        v: &[f32],
    ) -> Result<(), fak_model::KvError> {
        self.kv.write(layer, seq, pos, k, v)
    }
    fn commit(&mut self, seq: SeqId, n: usize) -> Result<(), fak_model::KvError> {
        self.kv.commit(seq, n)
    }
    fn kv_type(&self) -> KvType {
        self.kv.kv_type()
    }
    fn k_run(&self, layer: usize, seq: SeqId, pos: usize, end: usize, head: usize) -> KeyRun<'_> {
        self.kv.k_run(layer, seq, pos, end, head)
    }
    fn v_run(&self, layer: usize, seq: SeqId, pos: usize, end: usize, head: usize) -> KvRun<'_> {
        self.kv.v_run(layer, seq, pos, end, head)
    }
}

impl BenchKv for PagedBench {
    fn fresh(&mut self) -> Result<SeqId> {
        if let Some(s) = self.seq.take() {
            self.kv.free(s)?;
        }
        let s = self.kv.create(Tenant(0))?;
        self.seq = Some(s);
        Ok(s)
    }
}

impl Report {
    /// Human-readable summary.
    pub fn table(&self) -> String {
        let h = &self.header;
        let mut s = String::new();
        s.push_str(&format!(
            "{} {} | {} | isa {} | {} threads | {} | reps {}\n",
            h.engine.unwrap_or_default(),
            h.engine_version.as_deref().unwrap_or_default(),
            h.cpu,
            h.isa.as_deref().unwrap_or_default(),
            h.threads,
            h.model.as_deref().unwrap_or_default(),
            self.reps
        ));
        s.push_str(&format!(
            "{:<14} {:>12} {:>30}\n",
            "workload", "tok/s", "runs"
        ));
        for p in &self.prefill {
            s.push_str(&format!(
                "{:<14} {:>12.1} {:>30}\n",
                format!("prefill {}", p.n_tokens),
                p.tok_s,
                join(&p.tok_s_reps)
            ));
        }
        s.push_str(&format!(
            "{:<14} {:>12.1} {:>30}\n",
            format!("decode {}", self.decode.steps),
            self.decode.tok_s,
            join(&self.decode.tok_s_reps)
        ));
        let st = &self.decode.step_ms;
        s.push_str(&format!(
            "decode step ms: min {:.2} median {:.2} mean {:.2} p90 {:.2} max {:.2}\n",
            st.min, st.median, st.mean, st.p90, st.max
        ));
        for c in &self.decode_at_context {
            s.push_str(&format!(
                "decode step of {} agents at context {:>6}: {:.2} ms",
                c.batch, c.context, c.step_ms
            ));
            if let Some(b) = c.kv_held_bytes {
                s.push_str(&format!(
                    " | context KV held {:.2} MiB ({} rows)",
                    b as f64 / (1 << 20) as f64,
                    self.kv_window
                ));
            }
            s.push('\n');
        }
        s
    }
}

fn join(xs: &[f64]) -> String {
    xs.iter()
        .map(|x| format!("{x:.1}"))
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    /// Runs reuse one cache: each starts from an empty sequence, and decode
    /// times every step.
    #[test]
    fn prefill_and_decode_runs_reuse_the_cache() {
        let p = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../models/smollm2-135m-instruct-q4_1.gguf");
        assert!(p.exists(), "{} is missing", p.display());
        let mut model = Model::load(&p).unwrap();
        model.set_threads(2).expect("threads");
        let mut kv =
            FlatKv::for_model(model.config(), DECODE_PROMPT + DECODE_STEPS, 1).expect("kv");
        let ids = LcgIds::take(model.config().n_vocab, DECODE_PROMPT + DECODE_STEPS);
        for _ in 0..2 {
            let s = time_prefill(&model, &mut kv, &ids[..DECODE_PROMPT]).unwrap();
            assert!(s > 0.0);
        }
        for _ in 0..2 {
            let steps = time_decode(&model, &mut kv, &ids).unwrap();
            assert_eq!(steps.len(), DECODE_STEPS);
            assert!(steps.iter().all(|&s| s > 0.0));
        }
        // A prompt longer than the cache is an error, not a panic.
        let too_long = LcgIds::take(model.config().n_vocab, DECODE_PROMPT + DECODE_STEPS + 1);
        assert!(time_prefill(&model, &mut kv, &too_long).is_err());
    }
}
