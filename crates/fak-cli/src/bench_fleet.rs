//! `fak bench fleet`: A agents share a P-token prefix and run T turns; each
//! turn an agent ingests R private result tokens and decodes D tokens
//! greedily. Shared with `bench/peers/llamacpp.py fleet`:
//!
//! ```text
//!   one LCG stream per run (see bench.rs): prefix = ids 1..=P, then for
//!   turn t, agent a (turn-major): that agent's R result ids
//!   turn ingest = [previous turn's last generated token] + R result ids
//!   wall clock  = prefix + every turn of every agent
//!   agent-turns/s = A·T / wall;  TTFT = turn submitted → its first token
//! ```
//!
//! fak computes the prefix once and forks every agent from it; turns run
//! through the fleet scheduler without a barrier between agents (an agent
//! starts its next turn as soon as its previous one is done). `--ablation`
//! repeats the run with no reuse: every agent prefills the prefix itself.

use std::time::Instant;

use anyhow::{bail, Context};
use fak_engine::{
    AgentId, Fleet, FleetConfig, FleetEvent, PagedKvConfig, PrefixCache, SamplingParams, Tenant,
};
use fak_model::Model;
use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::bench::{cpu_model, load_model, model_file_name, sha256_file, LcgIds};
use crate::ModelArgs;

/// Schema tag of [`FleetReport`].
pub const SCHEMA: &str = "fak-bench-fleet/1";
const TOKEN_STREAM: &str = "lcg state0=2463534242 mul=6364136223846793005 \
    inc=1442695040888963407 id_n=(state_n>>33)%n_vocab from state_1; one stream per run; \
    prefix ids 1..P, then per turn t, per agent a (turn-major) R result ids";

/// One workload shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Shape {
    pub prefix: usize,
    pub turns: usize,
    pub agents: usize,
    pub decode: usize,
    pub result: usize,
}

/// The named profiles: every combination of their lists.
pub fn profile(name: &str) -> Option<Vec<Shape>> {
    let (p, ts, as_, d, r): (usize, &[usize], &[usize], usize, usize) = match name {
        "probe" => (1024, &[10], &[8], 32, 64),
        "interactive" => (2048, &[10, 20], &[8, 12, 16, 20], 64, 256),
        "long" => (1024, &[40, 80], &[8, 12, 16, 20], 32, 48),
        "bounded-long" => (1024, &[40, 80], &[8, 20], 32, 48),
        _ => return None,
    };
    Some(
        ts.iter()
            .flat_map(|&t| {
                as_.iter().map(move |&a| Shape {
                    prefix: p,
                    turns: t,
                    agents: a,
                    decode: d,
                    result: r,
                })
            })
            .collect(),
    )
}

#[derive(clap::Args)]
pub struct BenchFleetArgs {
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
    #[arg(long, value_enum, default_value_t = crate::KvTypeArg::F16)]
    pub kv_type: crate::KvTypeArg,
    /// Print one JSON report on stdout instead of a table.
    #[arg(long)]
    json: bool,
}

/// Measurements of one run.
#[derive(Debug, Clone, Serialize)]
pub struct RunResult {
    pub agent_turns_per_s: f64,
    pub wall_s: f64,
    pub prefix_s: f64,
    pub ttft_ms_p50: f64,
    pub ttft_ms_p95: f64,
    pub prefix_evaluations: u64,
    pub tokens_computed: u64,
    pub tokens_reused: u64,
    pub forward_passes: u64,
    pub peak_rss_mb: f64,
    pub generated_sha256: String,
    pub status: String,
}

/// One shape's row of the report.
#[derive(Debug, Clone, Serialize)]
pub struct FleetRun {
    pub profile: Option<String>,
    #[serde(flatten)]
    pub shape: Shape,
    #[serde(flatten)]
    pub result: RunResult,
    /// The no-reuse run (internal comparison, not the headline).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ablation: Option<RunResult>,
}

/// The JSON report (shared schema with the llama.cpp peer).
#[derive(Debug, Clone, Serialize)]
pub struct FleetReport {
    pub schema: &'static str,
    pub engine: &'static str,
    pub engine_version: String,
    pub cpu: String,
    pub isa: String,
    pub threads: usize,
    pub model: String,
    pub model_sha256: String,
    pub kv: &'static str,
    pub kv_type: &'static str,
    pub block_size: usize,
    pub token_budget: usize,
    pub token_stream: &'static str,
    pub runs: Vec<FleetRun>,
}

/// The prefix and every agent's per-turn results of one run.
pub fn fleet_ids(n_vocab: usize, s: &Shape) -> (Vec<u32>, Vec<Vec<Vec<u32>>>) {
    let mut st = LcgIds::new(n_vocab);
    let prefix: Vec<u32> = st.by_ref().take(s.prefix).collect();
    let mut results = vec![Vec::with_capacity(s.turns); s.agents];
    for _ in 0..s.turns {
        for r in results.iter_mut() {
            r.push(st.by_ref().take(s.result).collect());
        }
    }
    (prefix, results)
}

/// Nearest-rank percentile of an unsorted sample (0 when empty).
fn percentile(xs: &[f64], p: f64) -> f64 {
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    if v.is_empty() {
        return 0.0;
    }
    let rank = ((p / 100.0) * v.len() as f64).ceil() as usize;
    v[rank.clamp(1, v.len()) - 1]
}

/// The process's peak resident set (VmHWM), in MiB; 0 if unknown.
fn peak_rss_mb() -> f64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    s.lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reuse {
    Fork,
    None,
}

fn run_shape(
    model: &Model,
    s: &Shape,
    a: &BenchFleetArgs,
    reuse: Reuse,
    bar: &ProgressBar,
) -> anyhow::Result<RunResult> {
    let (prefix, results) = fleet_ids(model.config().n_vocab, s);
    let bs = a.block_size.max(1);
    let per_agent = (s.turns * (s.result + s.decode)).div_ceil(bs) + 2;
    let n_blocks = match reuse {
        Reuse::Fork => s.prefix.div_ceil(bs) + 1 + s.agents * per_agent,
        Reuse::None => s.agents * (per_agent + s.prefix.div_ceil(bs) + 1),
    };
    let cfg = FleetConfig {
        kv: PagedKvConfig {
            block_size: bs,
            n_blocks,
            kv_type: a.kv_type.into(),
        },
        token_budget: a.budget,
        prefix_cache: match reuse {
            Reuse::Fork => PrefixCache::On,
            Reuse::None => PrefixCache::Off,
        },
        tenant: Tenant(0),
    };
    let t0 = Instant::now();
    let mut fleet = Fleet::new(model, cfg)?;
    let root = match reuse {
        Reuse::Fork => Some(fleet.prefix(&prefix)?),
        Reuse::None => None,
    };
    let prefix_s = t0.elapsed().as_secs_f64();
    let agents: Vec<AgentId> = (0..s.agents)
        .map(|_| fleet.spawn(root, SamplingParams::greedy()))
        .collect::<Result<_, _>>()?;
    let mut generated: Vec<Vec<u32>> = vec![Vec::new(); s.agents];
    let mut turns_done = vec![0usize; s.agents];
    let mut ttft_ms = Vec::with_capacity(s.agents * s.turns);
    for (i, &ag) in agents.iter().enumerate() {
        let first: Vec<u32> = match reuse {
            Reuse::Fork => results[i][0].clone(),
            Reuse::None => [prefix.as_slice(), &results[i][0]].concat(),
        };
        fleet.submit(ag, &first, s.decode)?;
    }
    while !fleet.is_idle() {
        for ev in fleet.step()? {
            match ev {
                FleetEvent::FirstToken { ttft, .. } => ttft_ms.push(ttft.as_secs_f64() * 1e3),
                FleetEvent::TurnDone {
                    agent,
                    generated: g,
                } => {
                    let i = agent.0 as usize;
                    generated[i].extend(g);
                    turns_done[i] += 1;
                    bar.inc(1);
                    if turns_done[i] < s.turns {
                        fleet.submit(agent, &results[i][turns_done[i]], s.decode)?;
                    }
                }
            }
        }
    }
    let wall_s = t0.elapsed().as_secs_f64();
    let mut h = Sha256::new();
    for g in &generated {
        for t in g {
            h.update(t.to_le_bytes());
        }
    }
    let c = fleet.counters();
    Ok(RunResult {
        agent_turns_per_s: (s.agents * s.turns) as f64 / wall_s.max(1e-12),
        wall_s,
        prefix_s,
        ttft_ms_p50: percentile(&ttft_ms, 50.0),
        ttft_ms_p95: percentile(&ttft_ms, 95.0),
        prefix_evaluations: match reuse {
            Reuse::Fork => c.prefix_evaluations,
            Reuse::None => s.agents as u64,
        },
        tokens_computed: c.tokens_computed,
        tokens_reused: c.tokens_reused,
        forward_passes: c.passes,
        peak_rss_mb: peak_rss_mb(),
        generated_sha256: h.finalize().iter().map(|b| format!("{b:02x}")).collect(),
        status: "ok".into(),
    })
}

pub fn run(a: BenchFleetArgs) -> anyhow::Result<()> {
    let shapes = match &a.profile {
        Some(p) => profile(p).with_context(|| {
            format!("unknown profile {p:?} (probe, interactive, long, bounded-long)")
        })?,
        None => match (a.prefix, a.turns, a.agents) {
            (Some(prefix), Some(turns), Some(agents)) => vec![Shape {
                prefix,
                turns,
                agents,
                decode: a.decode,
                result: a.result,
            }],
            _ => bail!("give --profile NAME, or --prefix, --turns and --agents"),
        },
    };
    if shapes
        .iter()
        .any(|s| s.prefix == 0 || s.turns == 0 || s.agents == 0 || s.decode == 0 || s.result == 0)
    {
        bail!("--prefix, --turns, --agents, --decode and --result must all be at least 1");
    }
    let path = &a.model.model;
    let model = load_model(&a.model)?;
    let reps = if a.ablation { 2 } else { 1 };
    let total: usize = shapes.iter().map(|s| s.agents * s.turns * reps).sum();
    let bar = ProgressBar::new(total as u64);
    bar.set_style(
        ProgressStyle::with_template("{prefix} [{bar:30}] {pos}/{len} agent-turns {msg}")
            .context("progress bar template")?
            .progress_chars("=> "),
    );
    bar.set_prefix("bench fleet");
    let mut runs = Vec::with_capacity(shapes.len());
    for s in &shapes {
        bar.set_message(format!("A={} T={} P={}", s.agents, s.turns, s.prefix));
        let result = run_shape(&model, s, &a, Reuse::Fork, &bar)?;
        let ablation = if a.ablation {
            bar.set_message(format!("A={} T={} ablation", s.agents, s.turns));
            Some(run_shape(&model, s, &a, Reuse::None, &bar)?)
        } else {
            None
        };
        runs.push(FleetRun {
            profile: a.profile.clone(),
            shape: *s,
            result,
            ablation,
        });
    }
    bar.finish_and_clear();
    let report = FleetReport {
        schema: SCHEMA,
        engine: "fak",
        engine_version: env!("CARGO_PKG_VERSION").to_string(),
        cpu: cpu_model(),
        isa: fak_kernels::isa().name().to_string(),
        threads: model.threads(),
        model: model_file_name(path),
        model_sha256: sha256_file(path)?,
        kv: "paged",
        kv_type: fak_model::KvType::from(a.kv_type).name(),
        block_size: a.block_size,
        token_budget: a.budget,
        token_stream: TOKEN_STREAM,
        runs,
    };
    if a.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        println!(
            "{:>5} {:>3} {:>3} {:>3} {:>4} {:>14} {:>9} {:>9} {:>9}",
            "P", "T", "A", "D", "R", "agent-turns/s", "wall s", "ttft p50", "ttft p95"
        );
        for r in &report.runs {
            let s = &r.shape;
            println!(
                "{:>5} {:>3} {:>3} {:>3} {:>4} {:>14.3} {:>9.2} {:>9.1} {:>9.1}",
                s.prefix,
                s.turns,
                s.agents,
                s.decode,
                s.result,
                r.result.agent_turns_per_s,
                r.result.wall_s,
                r.result.ttft_ms_p50,
                r.result.ttft_ms_p95
            );
            if let Some(ab) = &r.ablation {
                println!(
                    "{:>28} {:>14.3} {:>9.2} {:>9.1} {:>9.1}  (no reuse)",
                    "", ab.agent_turns_per_s, ab.wall_s, ab.ttft_ms_p50, ab.ttft_ms_p95
                );
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn profiles_expand_to_every_combination() {
        assert_eq!(profile("probe").map(|v| v.len()), Some(1));
        assert_eq!(profile("interactive").map(|v| v.len()), Some(8));
        assert_eq!(profile("long").map(|v| v.len()), Some(8));
        let b = profile("bounded-long").expect("profile");
        assert_eq!(b.len(), 4);
        assert!(b
            .iter()
            .all(|s| s.prefix == 1024 && s.decode == 32 && s.result == 48));
        assert!(profile("nope").is_none());
    }

    #[test]
    fn ids_are_prefix_then_turn_major_results() {
        let s = Shape {
            prefix: 5,
            turns: 2,
            agents: 3,
            decode: 1,
            result: 4,
        };
        let (p, r) = fleet_ids(1000, &s);
        let all = LcgIds::take(1000, 5 + 2 * 3 * 4);
        assert_eq!(p, all[..5]);
        assert_eq!(r[0][0], all[5..9]);
        assert_eq!(r[1][0], all[9..13]);
        assert_eq!(r[0][1], all[17..21]);
    }

    #[test]
    fn percentile_is_nearest_rank() {
        let xs: Vec<f64> = (1..=20).map(f64::from).collect();
        assert_eq!(percentile(&xs, 50.0), 10.0);
        assert_eq!(percentile(&xs, 95.0), 19.0);
        assert_eq!(percentile(&[], 50.0), 0.0);
    }
}
