//! `fak bench model`: single-stream prefill and decode throughput.
//!
//! The protocol is shared with the llama.cpp peer
//! (`bench/peers/llamacpp.py single`), so the two JSON reports compare
//! one-to-one (`bench/compare.py`):
//!
//! ```text
//! token ids: LCG  state0 = 2463534242
//!                 state_{n+1} = state_n · 6364136223846793005 + 1442695040888963407  (mod 2^64)
//!                 id_n = (state_n >> 33) mod n_vocab,  n = 1, 2, …
//!            every workload restarts the stream at state0.
//!
//! prefill P ∈ {16, 64, 256}:  empty cache ─ forward(id_1 … id_P) ─► logits of the last token
//!                             tok/s = P / time of that one forward pass
//! decode:                     empty cache ─ forward(id_1 … id_16)            (untimed prompt)
//!                             then 32 steps: forward(id_{16+s}) at position 15+s, s = 1..=32
//!                             tok/s = 1 / median step time
//! repetitions:                1 warm-up run (discarded) + `reps` runs per workload; the
//!                             median over runs is reported, with every run's value
//! ```

use std::fs::File;
use std::io::Read;
use std::path::Path;
use std::time::Instant;

use anyhow::{bail, Context};
use fak_engine::{Append, PagedKv, PagedKvConfig, Tenant};
use fak_model::{Batch, FlatKv, KvRun, KvStore, LogitsWanted, Model, SeqId};
use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::ModelArgs;

/// Prefill lengths measured, in tokens.
pub const PREFILL_LENS: [usize; 3] = [16, 64, 256];
/// Prompt length before the decode steps.
pub const DECODE_PROMPT: usize = 16;
/// Timed single-token decode steps per run.
pub const DECODE_STEPS: usize = 32;
/// First LCG state; `id_1` comes from the state after it.
pub const LCG_STATE0: u64 = 2463534242;
const LCG_MUL: u64 = 6364136223846793005;
const LCG_INC: u64 = 1442695040888963407;

#[derive(clap::Args)]
pub struct BenchArgs {
    #[command(subcommand)]
    what: BenchWhat,
}

#[derive(clap::Subcommand)]
enum BenchWhat {
    /// Single-stream prefill and decode throughput of one model.
    Model(BenchModelArgs),
    /// Memory read bandwidth (the decode roofline's denominator).
    Bandwidth(crate::bandwidth::BandwidthArgs),
    /// Int8 multiply-add throughput (the prefill roofline's denominator).
    Peak(crate::peak::PeakArgs),
    /// Aggregate decode throughput of many sequences through the paged KV cache.
    Batch(crate::bench_batch::BenchBatchArgs),
    /// Cost of evicting a span from one sequence (exact vs re-ingest vs shift).
    Evict(crate::bench_evict::BenchEvictArgs),
    /// Agent fleets: shared prefix, many agents, many turns.
    Fleet(crate::bench_fleet::BenchFleetArgs),
}

#[derive(clap::Args)]
struct BenchModelArgs {
    #[command(flatten)]
    model: ModelArgs,
    /// Measured repetitions per workload (after one warm-up run).
    #[arg(long, default_value_t = 3)]
    reps: usize,
    /// Print one JSON report on stdout instead of a table.
    #[arg(long)]
    json: bool,
    /// KV store: flat (contiguous) or paged (the block store that batches
    /// and fleets use).
    #[arg(long, value_enum, default_value_t = KvKind::Flat)]
    kv: KvKind,
    /// Element type of the KV cache.
    #[arg(long, value_enum, default_value_t = crate::KvTypeArg::F16)]
    kv_type: crate::KvTypeArg,
    /// Also time decode steps of 8 agents forked from a shared context of
    /// each of these lengths (comma-separated, e.g. 64,1024,2048; paged f16
    /// cache): the input of `fak project`'s attention term. Reported as
    /// `decode_at_context`.
    #[arg(long, value_delimiter = ',')]
    contexts: Vec<usize>,
}

/// The token-id stream of the protocol (see the module docs).
#[derive(Debug, Clone)]
pub struct LcgIds {
    state: u64,
    n_vocab: u64,
}

impl LcgIds {
    /// A stream at `state0` for a vocabulary of `n_vocab` (at least 1) ids.
    pub fn new(n_vocab: usize) -> LcgIds {
        LcgIds {
            state: LCG_STATE0,
            n_vocab: (n_vocab as u64).max(1),
        }
    }

    /// The first `n` ids of a fresh stream.
    pub fn take(n_vocab: usize, n: usize) -> Vec<u32> {
        LcgIds::new(n_vocab).take(n).collect()
    }
}

impl Iterator for LcgIds {
    type Item = u32;

    fn next(&mut self) -> Option<u32> {
        self.state = self.state.wrapping_mul(LCG_MUL).wrapping_add(LCG_INC);
        // The remainder is below n_vocab, itself a usize-sized vocabulary.
        Some(((self.state >> 33) % self.n_vocab) as u32)
    }
}

/// One [`Append`] per sequence: `seqs[i]` gets `ids[i]`, logits wanted
/// (pairs past the shorter list are dropped).
pub fn appends<'a, T: AsRef<[u32]>>(seqs: &[SeqId], ids: &'a [T]) -> Vec<Append<'a>> {
    seqs.iter()
        .zip(ids)
        .map(|(&seq, t)| Append {
            seq,
            ids: t.as_ref(),
            logits: LogitsWanted::Yes,
        })
        .collect()
}

/// Summary statistics of a sample, in the sample's unit.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Stats {
    pub min: f64,
    pub median: f64,
    pub mean: f64,
    pub p90: f64,
    pub max: f64,
}

/// `threads`, or every core the OS reports when `None`; at least 1.
pub fn threads_or_all(threads: Option<usize>) -> usize {
    threads
        .unwrap_or_else(|| {
            std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1)
        })
        .max(1)
}

/// Median of `xs` (mean of the two middle values for even lengths); 0 when empty.
pub fn median(xs: &[f64]) -> f64 {
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    match n {
        0 => 0.0,
        _ if n % 2 == 1 => v[n / 2],
        _ => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// Min, median, mean, nearest-rank 90th percentile and max of `xs`.
pub fn stats(xs: &[f64]) -> Stats {
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n == 0 {
        return Stats {
            min: 0.0,
            median: 0.0,
            mean: 0.0,
            p90: 0.0,
            max: 0.0,
        };
    }
    let rank = (0.9 * n as f64).ceil() as usize;
    Stats {
        min: v[0],
        median: median(&v),
        mean: v.iter().sum::<f64>() / n as f64,
        p90: v[rank.clamp(1, n) - 1],
        max: v[n - 1],
    }
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
    pub schema: &'static str,
    pub engine: &'static str,
    pub engine_version: String,
    pub cpu: String,
    pub isa: String,
    pub threads: usize,
    pub model: String,
    pub model_sha256: String,
    pub n_vocab: usize,
    pub reps: usize,
    pub token_stream: String,
    pub kv: KvKind,
    pub kv_type: &'static str,
    pub prefill: Vec<PrefillResult>,
    pub decode: DecodeResult,
    /// Decode step times at longer contexts (`--contexts`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub decode_at_context: Vec<crate::bench_context::ContextPoint>,
}

/// Schema tag of [`Report`].
pub const SCHEMA: &str = "fak-bench-single/1";
/// Description of the token stream, recorded in every report.
pub const TOKEN_STREAM: &str = "lcg state0=2463534242 mul=6364136223846793005 \
    inc=1442695040888963407 id_n=(state_n>>33)%n_vocab from state_1; restarted per workload; \
    prefill P uses id_1..id_P; decode prompt id_1..id_16, steps id_17..id_48";

pub fn run(a: BenchArgs) -> anyhow::Result<()> {
    match a.what {
        BenchWhat::Model(m) => bench_model(m),
        BenchWhat::Bandwidth(b) => crate::bandwidth::run(b),
        BenchWhat::Peak(p) => crate::peak::run(p),
        BenchWhat::Batch(b) => crate::bench_batch::run(b),
        BenchWhat::Fleet(f) => crate::bench_fleet::run(f),
        BenchWhat::Evict(e) => crate::bench_evict::run(e),
    }
}

fn bench_model(a: BenchModelArgs) -> anyhow::Result<()> {
    if a.reps == 0 {
        bail!("--reps must be at least 1");
    }
    let path = &a.model.model;
    let model = load_model(&a.model)?;
    let n_vocab = model.config().n_vocab;
    let max_ctx = PREFILL_LENS
        .iter()
        .copied()
        .chain([DECODE_PROMPT + DECODE_STEPS])
        .max()
        .unwrap_or(DECODE_PROMPT + DECODE_STEPS);
    let runs_per_workload = a.reps + 1;
    let total = (PREFILL_LENS.len() + 1) * runs_per_workload;
    let bar = ProgressBar::new(total as u64);
    bar.set_style(
        ProgressStyle::with_template("{prefix} [{bar:30}] {pos}/{len} {msg}")
            .context("progress bar template")?
            .progress_chars("=> "),
    );
    bar.set_prefix("bench");

    let (prefill, tok_s_reps, all_steps_ms) = match a.kv {
        KvKind::Flat => {
            let mut kv = FlatKv::for_model_typed(model.config(), max_ctx, 1, a.kv_type.into())?;
            workloads(&model, &mut kv, a.reps, &bar)?
        }
        KvKind::Paged => {
            let sizes = PagedKvConfig::for_sequences(fak_engine::DEFAULT_BLOCK_SIZE, 1, max_ctx)
                .with_kv_type(a.kv_type.into());
            let mut kv = PagedBench {
                kv: PagedKv::new(model.config(), sizes)?,
                seq: None,
            };
            workloads(&model, &mut kv, a.reps, &bar)?
        }
    };
    bar.finish_and_clear();
    if !a.contexts.is_empty() {
        eprintln!("bench: decode at contexts {:?}", a.contexts);
    }
    let decode_at_context = crate::bench_context::decode_at_contexts(&model, &a.contexts)?;

    let report = Report {
        schema: SCHEMA,
        engine: "fak",
        engine_version: env!("CARGO_PKG_VERSION").to_string(),
        cpu: cpu_model(),
        isa: fak_kernels::isa().name().to_string(),
        threads: model.threads(),
        model: model_file_name(path),
        model_sha256: sha256_file(path)?,
        n_vocab,
        reps: a.reps,
        token_stream: TOKEN_STREAM.to_string(),
        kv: a.kv,
        kv_type: fak_model::KvType::from(a.kv_type).name(),
        prefill,
        decode: DecodeResult {
            prompt_tokens: DECODE_PROMPT,
            steps: DECODE_STEPS,
            tok_s: median(&tok_s_reps),
            tok_s_reps,
            step_ms: stats(&all_steps_ms),
        },
        decode_at_context,
    };
    if a.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", table(&report));
    }
    Ok(())
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
) -> anyhow::Result<Measured> {
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
fn time_prefill<K: BenchKv>(model: &Model, kv: &mut K, ids: &[u32]) -> anyhow::Result<f64> {
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
fn time_decode<K: BenchKv>(model: &Model, kv: &mut K, ids: &[u32]) -> anyhow::Result<Vec<f64>> {
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
trait BenchKv: KvStore + Sync {
    /// Forgets the benchmark's sequence and returns the id of an empty one.
    fn fresh(&mut self) -> anyhow::Result<SeqId>;
}

impl BenchKv for FlatKv {
    fn fresh(&mut self) -> anyhow::Result<SeqId> {
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
    fn kv_type(&self) -> fak_model::KvType {
        self.kv.kv_type()
    }
    fn k_run(&self, layer: usize, seq: SeqId, pos: usize, end: usize, head: usize) -> KvRun<'_> {
        self.kv.k_run(layer, seq, pos, end, head)
    }
    fn v_run(&self, layer: usize, seq: SeqId, pos: usize, end: usize, head: usize) -> KvRun<'_> {
        self.kv.v_run(layer, seq, pos, end, head)
    }
}

impl BenchKv for PagedBench {
    fn fresh(&mut self) -> anyhow::Result<SeqId> {
        if let Some(s) = self.seq.take() {
            self.kv.free(s)?;
        }
        let s = self.kv.create(Tenant(0));
        self.seq = Some(s);
        Ok(s)
    }
}

/// `--kv` values of `fak bench model`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum KvKind {
    /// One contiguous region per sequence.
    Flat,
    /// The paged, copy-on-write block store (`fak_engine::DEFAULT_BLOCK_SIZE`-token blocks).
    Paged,
}

/// Loads the benchmark's model with the requested thread count; an error
/// if the pool could not start that many threads.
pub fn load_model(args: &ModelArgs) -> anyhow::Result<Model> {
    let path = &args.model;
    let mut model = Model::load(path).with_context(|| format!("loading {}", path.display()))?;
    if let Some(t) = args.threads {
        model.set_threads(t);
        if model.threads() != t.max(1) {
            bail!(
                "could not start {t} threads (the model runs with {})",
                model.threads()
            );
        }
    }
    Ok(model)
}

/// The model file's name as the reports record it.
pub fn model_file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.display().to_string())
}

/// The first `model name` line of /proc/cpuinfo, or "unknown".
pub fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| parse_cpu_model(&s))
        .unwrap_or_else(|| "unknown".to_string())
}

/// Extracts the `model name` value from /proc/cpuinfo text.
pub fn parse_cpu_model(cpuinfo: &str) -> Option<String> {
    cpuinfo.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        (k.trim() == "model name").then(|| v.trim().to_string())
    })
}

/// Hex SHA-256 of a file, streamed in 1 MiB chunks.
pub fn sha256_file(path: &Path) -> anyhow::Result<String> {
    let mut f = File::open(path).with_context(|| format!("opening {}", path.display()))?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = f
            .read(&mut buf)
            .with_context(|| format!("reading {}", path.display()))?;
        if n == 0 {
            break;
        }
        h.update(buf.get(..n).unwrap_or_default());
    }
    Ok(h.finalize().iter().map(|b| format!("{b:02x}")).collect())
}

/// Human-readable summary of a report.
pub fn table(r: &Report) -> String {
    let mut s = String::new();
    s.push_str(&format!(
        "{} {} | {} | isa {} | {} threads | {} | reps {}\n",
        r.engine, r.engine_version, r.cpu, r.isa, r.threads, r.model, r.reps
    ));
    s.push_str(&format!(
        "{:<14} {:>12} {:>30}\n",
        "workload", "tok/s", "runs"
    ));
    for p in &r.prefill {
        s.push_str(&format!(
            "{:<14} {:>12.1} {:>30}\n",
            format!("prefill {}", p.n_tokens),
            p.tok_s,
            join(&p.tok_s_reps)
        ));
    }
    s.push_str(&format!(
        "{:<14} {:>12.1} {:>30}\n",
        format!("decode {}", r.decode.steps),
        r.decode.tok_s,
        join(&r.decode.tok_s_reps)
    ));
    let st = &r.decode.step_ms;
    s.push_str(&format!(
        "decode step ms: min {:.2} median {:.2} mean {:.2} p90 {:.2} max {:.2}\n",
        st.min, st.median, st.mean, st.p90, st.max
    ));
    for c in &r.decode_at_context {
        s.push_str(&format!(
            "decode step of {} agents at context {:>6}: {:.2} ms\n",
            c.batch, c.context, c.step_ms
        ));
    }
    s
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
    use proptest::prelude::*;

    #[test]
    fn lcg_matches_the_protocol() {
        // Computed independently with Python's big integers.
        assert_eq!(
            LcgIds::take(49152, 5),
            vec![18117, 44637, 44831, 22441, 6062]
        );
        assert_eq!(
            LcgIds::take(151936, 5),
            vec![124613, 146141, 47647, 107561, 45358]
        );
    }

    #[test]
    fn median_and_stats() {
        assert_eq!(median(&[]), 0.0);
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), 2.5);
        let s = stats(&[5.0, 1.0, 4.0, 2.0, 3.0, 6.0, 7.0, 8.0, 9.0, 10.0]);
        assert_eq!(
            s,
            Stats {
                min: 1.0,
                median: 5.5,
                mean: 5.5,
                p90: 9.0,
                max: 10.0
            }
        );
    }

    #[test]
    fn cpu_model_line_is_found() {
        let text = "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 9B14\nflags\t: fpu\n";
        assert_eq!(parse_cpu_model(text).as_deref(), Some("AMD EPYC 9B14"));
        assert_eq!(parse_cpu_model("processor : 0\n"), None);
    }

    /// Runs reuse one cache: each starts from an empty sequence, and decode
    /// times every step.
    #[test]
    fn prefill_and_decode_runs_reuse_the_cache() {
        let p = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../models/smollm2-135m-instruct-q4_1.gguf");
        assert!(p.exists(), "{} is missing", p.display());
        let mut model = Model::load(&p).unwrap();
        model.set_threads(2);
        let mut kv = FlatKv::for_model(model.config(), DECODE_PROMPT + DECODE_STEPS, 1);
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

    proptest! {
        /// Ids are always inside the vocabulary and the stream is a pure
        /// function of its position.
        #[test]
        fn lcg_ids_are_in_range_and_prefix_stable(n_vocab in 1usize..200_000, n in 0usize..300) {
            let long = LcgIds::take(n_vocab, n + 10);
            let short = LcgIds::take(n_vocab, n);
            prop_assert!(long.iter().all(|&id| (id as usize) < n_vocab));
            prop_assert_eq!(&long[..n], &short[..]);
        }

        /// The median lies between min and max and splits the sample.
        #[test]
        fn median_is_central(xs in proptest::collection::vec(-1e6f64..1e6, 1..50)) {
            let m = median(&xs);
            let s = stats(&xs);
            prop_assert!(s.min <= m && m <= s.max);
            prop_assert!(s.min <= s.p90 && s.p90 <= s.max);
            let below = xs.iter().filter(|&&x| x < m).count();
            let above = xs.iter().filter(|&&x| x > m).count();
            prop_assert!(below <= xs.len() / 2 && above <= xs.len() / 2);
        }
    }
}
