//! `fak bench ...`: the flags of every benchmark, turned into the params of
//! its protocol in fak-bench (`fak_bench::{single, batch, constrained,
//! fleet, evict, bandwidth, peak, sampling, verify}`); the report is printed as JSON (`--json`) or as its
//! table.

use anyhow::bail;
use fak_bench::{
    bandwidth, batch, constrained, evict, fleet, peak, sampling, single, verify, ModelSpec,
    Workload,
};
use serde::Serialize;

use crate::{KvTypeArg, ModelArgs};

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
    Bandwidth(BandwidthArgs),
    /// Int8 multiply-add and f32 FMA throughput (the roofline's compute denominators).
    Peak(PeakArgs),
    /// Aggregate decode throughput of many sequences through the paged KV cache.
    Batch(BenchBatchArgs),
    /// Decode throughput with every request held to a JSON schema vs free, alternated.
    Constrained(BenchConstrainedArgs),
    /// Cost of evicting a span from one sequence (exact vs re-ingest vs shift).
    Evict(BenchEvictArgs),
    /// Agent fleets: shared prefix, many agents, many turns.
    Fleet(BenchFleetArgs),
    /// Microseconds per sampled token outside the forward pass, the old
    /// full-vocabulary sort vs the sampler.
    Sampling(SamplingArgs),
    /// What a pass verifying k draft tokens costs against a one-token
    /// step: the most any speculative decoding can gain on this machine.
    Verify(BenchVerifyArgs),
}

#[derive(clap::Args)]
struct BenchVerifyArgs {
    #[command(flatten)]
    model: ModelArgs,
    /// Cached positions before the measured passes.
    #[arg(long, default_value_t = 512)]
    context: usize,
    /// Tokens per measured pass, comma-separated (1, a plain step, is always measured).
    #[arg(long, value_delimiter = ',', default_values_t = verify::DEFAULT_WIDTHS)]
    widths: Vec<usize>,
    /// Measured rounds over every width (after one warm-up round).
    #[arg(long, default_value_t = 7)]
    reps: usize,
    /// Per-token draft acceptance rates to model the best draft length for
    /// (MODELED), comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "0.5,0.7,0.87,0.95")]
    acceptance: Vec<f64>,
    /// Print one JSON report on stdout instead of a table.
    #[arg(long)]
    json: bool,
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
    #[arg(long, value_enum, default_value_t = KvTypeArg::F16)]
    kv_type: KvTypeArg,
    /// Also time decode steps of 8 agents forked from a shared context of
    /// each of these lengths (comma-separated, e.g. 64,1024,2048; paged f16
    /// cache): the input of `fak project`'s attention term. Reported as
    /// `decode_at_context`.
    #[arg(long, value_delimiter = ',')]
    contexts: Vec<usize>,
    /// Sliding-window layers (gemma3's local layers): as trained, or full
    /// (every layer reads every position; changes the results, for
    /// measuring what the window saves).
    #[arg(long, value_enum, default_value_t = WindowArg::AsTrained)]
    window: WindowArg,
    /// Sliding-window rows in the paged KV (gemma3's local layers): drop
    /// the blocks outside the window, or keep every row (to compare; the
    /// results are the same). `--window full` always keeps.
    #[arg(long, value_enum, default_value_t = KvWindowArg::Drop)]
    kv_window: KvWindowArg,
}

/// `--kv-window` values (fak_engine::KvWindow) of `fak bench model` and
/// `fak serve`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum KvWindowArg {
    /// Release local layers' blocks outside the window.
    Drop,
    /// Keep every layer's rows for every position.
    Keep,
}

impl From<KvWindowArg> for fak_engine::KvWindow {
    fn from(a: KvWindowArg) -> fak_engine::KvWindow {
        match a {
            KvWindowArg::Drop => fak_engine::KvWindow::Drop,
            KvWindowArg::Keep => fak_engine::KvWindow::Keep,
        }
    }
}

/// `--window` values of `fak bench model`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum WindowArg {
    /// Local layers read only their window.
    AsTrained,
    /// Every layer reads every position.
    Full,
}

/// `--kv` values of `fak bench model`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum KvKind {
    /// One contiguous region per sequence.
    Flat,
    /// The paged, copy-on-write block store (`fak_engine::DEFAULT_BLOCK_SIZE`-token blocks).
    Paged,
}

#[derive(clap::Args)]
struct BandwidthArgs {
    /// Threads, 1..=1024 (default: all cores).
    #[arg(long, short = 't', value_parser = crate::parse_threads)]
    threads: Option<usize>,
    /// Buffer size in MiB (default 1024; keep it well above the L3 cache).
    #[arg(long, default_value_t = 1024)]
    size_mib: usize,
    /// Timed passes after one warm-up.
    #[arg(long, default_value_t = 5)]
    reps: usize,
    /// Print one JSON object on stdout.
    #[arg(long)]
    json: bool,
}

#[derive(clap::Args)]
struct SamplingArgs {
    /// Model files whose logits to draw from (after a short text and a
    /// few greedy steps), comma-separated.
    #[arg(long, short = 'm', value_delimiter = ',')]
    model: Vec<std::path::PathBuf>,
    /// Synthetic logits of these vocabulary sizes, comma-separated
    /// (default 49152,151936 when no --model is given).
    #[arg(long, value_delimiter = ',')]
    vocab: Vec<usize>,
    /// Timed draws per source, setting and implementation.
    #[arg(long, default_value_t = 200)]
    draws: usize,
    /// Threads of the models' forward passes (the draws run on one).
    #[arg(long, short = 't', value_parser = crate::parse_threads)]
    threads: Option<usize>,
    /// Print one JSON object on stdout.
    #[arg(long)]
    json: bool,
}

#[derive(clap::Args)]
struct PeakArgs {
    /// Threads, 1..=1024 (default: all cores).
    #[arg(long, short = 't', value_parser = crate::parse_threads)]
    threads: Option<usize>,
    /// Rounds per thread per pass (256 int8 multiply-adds, or 192 f32 FMAs, each).
    #[arg(long, default_value_t = 4_000_000)]
    rounds: u64,
    /// Timed passes after one warm-up.
    #[arg(long, default_value_t = 5)]
    reps: usize,
    /// Print one JSON object on stdout.
    #[arg(long)]
    json: bool,
}

#[derive(clap::Args)]
struct BenchBatchArgs {
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
    #[arg(long, value_enum, default_value_t = KvTypeArg::F16)]
    kv_type: KvTypeArg,
    #[command(flatten)]
    machine: crate::project::MachineArgs,
    /// Print one JSON report on stdout instead of a table.
    #[arg(long)]
    json: bool,
}

#[derive(clap::Args)]
struct BenchConstrainedArgs {
    #[command(flatten)]
    model: ModelArgs,
    /// Batch sizes (requests decoding together), comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1,8")]
    batch: Vec<usize>,
    /// Pairs of runs (free, then constrained) per batch size.
    #[arg(long, default_value_t = 3)]
    reps: usize,
    /// Tokens each request generates.
    #[arg(long, default_value_t = 64)]
    tokens: usize,
    /// Sampling temperature (0: greedy).
    #[arg(long, default_value_t = constrained::DEFAULT_TEMPERATURE)]
    temp: f32,
    /// Nucleus (top-p) cut; below 1 every constrained sample needs its mask.
    #[arg(long, default_value_t = 1.0)]
    top_p: f32,
    /// Mask modes to run, comma-separated, each after every free run.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "check-first,overlap"
    )]
    mask_modes: Vec<MaskModeArg>,
    /// Print one JSON report on stdout instead of a table.
    #[arg(long)]
    json: bool,
}

/// `--mask-modes` values (fak_engine::MaskMode).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum MaskModeArg {
    /// After the forward pass: check the sampled token, mask on a miss.
    CheckFirst,
    /// During the forward pass, on a worker thread.
    Overlap,
}

impl From<MaskModeArg> for fak_engine::MaskMode {
    fn from(a: MaskModeArg) -> fak_engine::MaskMode {
        match a {
            MaskModeArg::CheckFirst => fak_engine::MaskMode::CheckFirst,
            MaskModeArg::Overlap => fak_engine::MaskMode::Overlap,
        }
    }
}

#[derive(clap::Args)]
struct BenchEvictArgs {
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

#[derive(clap::Args)]
struct BenchFleetArgs {
    #[command(flatten)]
    model: ModelArgs,
    /// A named workload: probe, interactive, long, bounded-long.
    #[arg(long, conflicts_with_all = ["prefix", "turns", "agents", "decode", "result"])]
    profile: Option<String>,
    /// Shared prefix tokens P.
    #[arg(long)]
    prefix: Option<usize>,
    /// Turns T per agent.
    #[arg(long)]
    turns: Option<usize>,
    /// Agents A.
    #[arg(long)]
    agents: Option<usize>,
    /// Tokens D decoded per turn.
    #[arg(long, default_value_t = 32)]
    decode: usize,
    /// Result tokens R ingested per turn.
    #[arg(long, default_value_t = 64)]
    result: usize,
    /// Also run with no reuse (every agent prefills the prefix itself).
    #[arg(long)]
    ablation: bool,
    /// Most tokens per forward pass.
    #[arg(long, default_value_t = 512)]
    budget: usize,
    /// Tokens per KV block (fleets' long contexts read faster in longer
    /// blocks; see `fak_engine::FLEET_BLOCK_SIZE`).
    #[arg(long, default_value_t = fak_engine::FLEET_BLOCK_SIZE)]
    block_size: usize,
    /// Element type of the KV cache.
    #[arg(long, value_enum, default_value_t = KvTypeArg::F16)]
    kv_type: KvTypeArg,
    #[command(flatten)]
    machine: crate::project::MachineArgs,
    /// Speculative decoding of the agents' turns (`lookup`, `auto`): the
    /// generated ids are the same; the report gives the acceptance.
    #[arg(long, value_enum, default_value_t = crate::SpeculativeArg::Off)]
    speculative: crate::SpeculativeArg,
    /// Print one JSON report on stdout instead of a table.
    #[arg(long)]
    json: bool,
}

impl ModelArgs {
    /// The model to benchmark.
    fn spec(&self) -> ModelSpec {
        ModelSpec {
            path: self.model.clone(),
            threads: self.threads,
        }
    }
}

/// How a report is printed.
#[derive(Clone, Copy)]
enum Json {
    /// Pretty-printed (the model benchmarks' reports).
    Pretty,
    /// One line (the machine probes' reports).
    Line,
}

/// Prints `report` as JSON when `json` is set, else as its `table`.
fn print<R: Serialize>(
    report: &R,
    json: bool,
    style: Json,
    table: fn(&R) -> String,
) -> anyhow::Result<()> {
    match (json, style) {
        (true, Json::Pretty) => outln!("{}", serde_json::to_string_pretty(report)?)?,
        (true, Json::Line) => outln!("{}", serde_json::to_string(report)?)?,
        (false, _) => out!("{}", table(report))?,
    }
    Ok(())
}

pub fn run(a: BenchArgs) -> anyhow::Result<()> {
    match a.what {
        BenchWhat::Model(m) => {
            let r = single::run(&single::Params {
                model: m.model.spec(),
                reps: m.reps,
                kv: match m.kv {
                    KvKind::Flat => single::KvKind::Flat,
                    KvKind::Paged => single::KvKind::Paged,
                },
                kv_type: m.kv_type.into(),
                contexts: m.contexts,
                window: match m.window {
                    WindowArg::AsTrained => fak_model::WindowMode::AsTrained,
                    WindowArg::Full => fak_model::WindowMode::Full,
                },
                kv_window: m.kv_window.into(),
            })?;
            print(&r, m.json, Json::Pretty, single::Report::table)
        }
        BenchWhat::Bandwidth(b) => {
            let r = bandwidth::run(&bandwidth::Params {
                threads: b.threads,
                size_mib: b.size_mib,
                reps: b.reps,
            })?;
            print(&r, b.json, Json::Line, bandwidth::BandwidthReport::table)
        }
        BenchWhat::Peak(p) => {
            let r = peak::run(&peak::Params {
                threads: p.threads,
                rounds: p.rounds,
                reps: p.reps,
            })?;
            print(&r, p.json, Json::Line, peak::PeakReport::table)
        }
        BenchWhat::Sampling(s) => {
            let vocab = if s.vocab.is_empty() && s.model.is_empty() {
                vec![49152, 151_936]
            } else {
                s.vocab
            };
            let sources = s
                .model
                .into_iter()
                .map(sampling::Source::Model)
                .chain(vocab.into_iter().map(sampling::Source::Synthetic))
                .collect();
            let r = sampling::run(&sampling::Params {
                sources,
                draws: s.draws,
                threads: s.threads,
            })?;
            print(&r, s.json, Json::Pretty, sampling::SamplingReport::table)
        }
        BenchWhat::Verify(v) => {
            let r = verify::run(&verify::Params {
                model: v.model.spec(),
                context: v.context,
                widths: v.widths,
                reps: v.reps,
                acceptance: v.acceptance,
            })?;
            print(&r, v.json, Json::Pretty, verify::Report::table)
        }
        BenchWhat::Batch(b) => {
            let r = batch::run(&batch::Params {
                model: b.model.spec(),
                batch: b.batch,
                reps: b.reps,
                ubatch: b.ubatch,
                block_size: b.block_size,
                kv_type: b.kv_type.into(),
            })?;
            print(&r, b.json, Json::Pretty, batch::BatchReport::table)
        }
        BenchWhat::Constrained(c) => {
            let r = constrained::run(&constrained::Params {
                model: c.model.spec(),
                batch: c.batch,
                reps: c.reps,
                tokens: c.tokens,
                temperature: c.temp,
                top_p: c.top_p,
                mask_modes: c.mask_modes.into_iter().map(Into::into).collect(),
            })?;
            print(&r, c.json, Json::Pretty, constrained::Report::table)
        }
        BenchWhat::Evict(e) => {
            let r = evict::run(&evict::Params {
                model: e.model.spec(),
                len: e.len,
                span: e.span,
                at: e.at,
                reps: e.reps,
                ubatch: e.ubatch,
            })?;
            print(&r, e.json, Json::Pretty, evict::EvictReport::table)
        }
        BenchWhat::Fleet(f) => {
            let workloads = match (f.profile, f.prefix, f.turns, f.agents) {
                (Some(name), ..) => fleet::Workloads::Profile(name),
                (None, Some(prefix), Some(turns), Some(agents)) => {
                    fleet::Workloads::One(Workload {
                        prefix,
                        turns,
                        agents,
                        decode: f.decode,
                        result: f.result,
                    })
                }
                _ => bail!("give --profile NAME, or --prefix, --turns and --agents"),
            };
            let r = fleet::run(&fleet::Params {
                model: f.model.spec(),
                workloads,
                ablation: f.ablation,
                budget: f.budget,
                block_size: f.block_size,
                kv_type: f.kv_type.into(),
                machine: f.machine.spec(),
                speculative: match f.speculative {
                    crate::SpeculativeArg::Draft => {
                        bail!("fak bench fleet runs no draft model: --speculative off, lookup or auto")
                    }
                    s => s.into(),
                },
            })?;
            print(&r, f.json, Json::Pretty, fleet::FleetReport::table)
        }
    }
}
