//! `fak bench fleet`: A agents share a P-token prefix and run T turns; each
//! turn an agent ingests R private result tokens and decodes D tokens
//! greedily. Shared with `bench/peers/llamacpp.py fleet`:
//!
//! ```text
//!   one LCG stream per run (crate::LcgIds): prefix = ids 1..=P, then for
//!   turn t, agent a (turn-major): that agent's R result ids
//!   turn ingest = [previous turn's last generated token] + R result ids
//!   wall clock  = prefix + every turn of every agent
//!   agent-turns/s = A·T / wall;  TTFT = turn submitted → its first token
//! ```
//!
//! fak computes the prefix once and forks every agent from it; turns run
//! through the fleet scheduler without a barrier between agents (an agent
//! starts its next turn as soon as its previous one is done). The ablation
//! repeats the run with no reuse: every agent prefills the prefix itself.
//!
//! Each run with reuse also carries its MODELED roofline
//! ([`crate::roofline`]) beside the measured phases, and the achieved
//! fraction (MODELED bound / MEASURED seconds) per phase and overall; the
//! machine figures it rests on are the report's `machine`.

use std::fmt::Write as _;
use std::time::Instant;

use fak_engine::{
    AgentId, Fleet, FleetConfig, FleetEvent, PagedKvConfig, PrefixCache, SamplingParams, Tenant,
};
use fak_model::{KvType, Model};
use indicatif::ProgressBar;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::error::{params, Result};
use crate::roofline::{
    fleet_roofline, FleetRoofline, Machine, MachineSpec, ModelShape, RooflineParams,
};
use crate::{hex, percentile, LcgIds, ModelSpec, RunHeader};

/// Schema tag of [`FleetReport`].
pub const SCHEMA: &str = "fak-bench-fleet/1";
const TOKEN_STREAM: &str = "lcg state0=2463534242 mul=6364136223846793005 \
    inc=1442695040888963407 id_n=(state_n>>33)%n_vocab from state_1; one stream per run; \
    prefix ids 1..P, then per turn t, per agent a (turn-major) R result ids";

/// One fleet workload: what `fak bench fleet` runs and what `fak project`
/// projects. Its keys are those of a `fak-bench-fleet/1` run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Workload {
    /// Shared prefix tokens P.
    pub prefix: usize,
    /// Turns T per agent.
    pub turns: usize,
    /// Agents A.
    pub agents: usize,
    /// Tokens D decoded per turn.
    pub decode: usize,
    /// Result tokens R ingested per turn.
    pub result: usize,
}

impl Workload {
    /// Whether every count is at least 1.
    pub fn is_nonzero(&self) -> bool {
        ![
            self.prefix,
            self.turns,
            self.agents,
            self.decode,
            self.result,
        ]
        .contains(&0)
    }
}

/// The named profiles: every combination of their lists.
pub fn profile(name: &str) -> Option<Vec<Workload>> {
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
                as_.iter().map(move |&a| Workload {
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

/// Which workloads a fleet benchmark runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Workloads {
    /// A named profile ([`profile`]): probe, interactive, long, bounded-long.
    Profile(String),
    /// One workload.
    One(Workload),
}

/// What `fak bench fleet` measures.
#[derive(Debug, Clone, PartialEq)]
pub struct Params {
    pub model: ModelSpec,
    pub workloads: Workloads,
    /// Also run with no reuse (every agent prefills the prefix itself).
    pub ablation: bool,
    /// Most tokens per forward pass.
    pub budget: usize,
    /// Tokens per KV block.
    pub block_size: usize,
    /// Element type of the KV cache.
    pub kv_type: KvType,
    /// Where the roofline's machine figures come from (each run reports
    /// its MODELED bound per phase and the achieved fraction).
    pub machine: MachineSpec,
    /// Whether decode verifies drafted tokens (the generated ids are the
    /// same; the report gives the acceptance).
    pub speculative: fak_engine::Speculative,
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
    /// Draft tokens verified, and those accepted (speculative decoding;
    /// 0 when off).
    pub draft_tokens: u64,
    pub accepted_draft_tokens: u64,
    pub status: String,
    /// Measured time per phase (forward-pass clocks).
    pub phases: crate::phases::Phases,
    /// The MODELED bound per phase and the achieved fraction (the run with
    /// reuse only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub roofline: Option<RunRoofline>,
}

/// Achieved fraction of the roofline: MODELED bound / MEASURED time.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Achieved {
    /// Prefix bound / measured prefix wall time.
    pub prefix: f64,
    /// (prefix + result ingest) bound / measured ingest passes.
    pub ingest: f64,
    /// Decode bound / measured decode passes.
    pub decode: f64,
    /// Total bound / wall time.
    pub overall: f64,
}

/// Rates the run achieved: MODELED operation counts / MEASURED seconds of
/// the matmul and attention clocks (compare with the machine's peaks).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct AchievedRates {
    pub ingest_matmul_gmacs_per_s: f64,
    pub ingest_attention_gmacs_per_s: f64,
    pub decode_matmul_gmacs_per_s: f64,
    pub decode_attention_gmacs_per_s: f64,
}

/// A run's roofline beside its measured phases.
#[derive(Debug, Clone, Serialize)]
pub struct RunRoofline {
    /// The MODELED bounds (the machine figures are in the report's `machine`).
    #[serde(flatten)]
    pub modeled: RunBounds,
    pub achieved_fraction: Achieved,
    pub achieved_rates: AchievedRates,
}

/// The MODELED phase bounds of one run, in seconds, with their counts.
#[derive(Debug, Clone, Serialize)]
pub struct RunBounds {
    pub label: &'static str,
    pub prefix: crate::roofline::PhaseBound,
    pub result_ingest: crate::roofline::PhaseBound,
    pub decode: crate::roofline::PhaseBound,
    pub total_s: f64,
}

impl RunRoofline {
    /// The roofline `r` beside the measured `m`.
    pub fn new(r: &FleetRoofline, m: &RunResult) -> RunRoofline {
        let frac = |modeled: f64, measured: f64| {
            if measured > 0.0 {
                modeled / measured
            } else {
                0.0
            }
        };
        let ingest = r.prefix.cost;
        let ingest_mm = (ingest.matmul_macs + r.result_ingest.cost.matmul_macs) as f64;
        let ingest_att = (ingest.attention_macs + r.result_ingest.cost.attention_macs) as f64;
        let ph = &m.phases;
        RunRoofline {
            achieved_rates: AchievedRates {
                ingest_matmul_gmacs_per_s: frac(ingest_mm / 1e9, ph.ingest.matmul_s),
                ingest_attention_gmacs_per_s: frac(ingest_att / 1e9, ph.ingest.attention_s),
                decode_matmul_gmacs_per_s: frac(
                    r.decode.cost.matmul_macs as f64 / 1e9,
                    ph.decode.matmul_s,
                ),
                decode_attention_gmacs_per_s: frac(
                    r.decode.cost.attention_macs as f64 / 1e9,
                    ph.decode.attention_s,
                ),
            },
            achieved_fraction: Achieved {
                prefix: frac(r.prefix.bound_s, m.prefix_s),
                ingest: frac(
                    r.prefix.bound_s + r.result_ingest.bound_s,
                    m.phases.ingest.total_s,
                ),
                decode: frac(r.decode.bound_s, m.phases.decode.total_s),
                overall: frac(r.total_s, m.wall_s),
            },
            modeled: RunBounds {
                label: crate::roofline::MODELED,
                prefix: r.prefix,
                result_ingest: r.result_ingest,
                decode: r.decode,
                total_s: r.total_s,
            },
        }
    }
}

/// One workload's row of the report.
#[derive(Debug, Clone, Serialize)]
pub struct FleetRun {
    pub profile: Option<String>,
    #[serde(flatten)]
    pub shape: Workload,
    #[serde(flatten)]
    pub result: RunResult,
    /// The no-reuse run (internal comparison, not the headline).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ablation: Option<RunResult>,
}

/// The JSON report (shared schema with the llama.cpp peer).
#[derive(Debug, Clone, Serialize)]
pub struct FleetReport {
    #[serde(flatten)]
    pub header: RunHeader,
    pub kv: &'static str,
    pub kv_type: &'static str,
    pub block_size: usize,
    pub token_budget: usize,
    /// `off`, `lookup` or `auto`.
    pub speculative: &'static str,
    pub token_stream: &'static str,
    /// The measured machine figures the runs' rooflines rest on.
    pub machine: Machine,
    pub runs: Vec<FleetRun>,
}

/// The prefix and every agent's per-turn results of one run.
pub fn fleet_ids(n_vocab: usize, s: &Workload) -> (Vec<u32>, Vec<Vec<Vec<u32>>>) {
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
    s: &Workload,
    p: &Params,
    reuse: Reuse,
    bar: &ProgressBar,
) -> Result<RunResult> {
    let (prefix, results) = fleet_ids(model.config().n_vocab, s);
    let bs = p.block_size.max(1);
    let per_agent = (s.turns * (s.result + s.decode)).div_ceil(bs) + 2;
    let n_blocks = match reuse {
        Reuse::Fork => s.prefix.div_ceil(bs) + 1 + s.agents * per_agent,
        Reuse::None => s.agents * (per_agent + s.prefix.div_ceil(bs) + 1),
    };
    let cfg = FleetConfig {
        kv: PagedKvConfig {
            block_size: bs,
            n_blocks,
            kv_type: p.kv_type,
            window: fak_engine::KvWindow::Drop,
        },
        token_budget: p.budget,
        prefix_cache: match reuse {
            Reuse::Fork => PrefixCache::On,
            Reuse::None => PrefixCache::Off,
        },
        tenant: Tenant(0),
        speculative: p.speculative,
    };
    // The clock starts once the fleet exists (KV allocated), as the peer's
    // starts after its context is created.
    let mut fleet = Fleet::new(model, cfg)?;
    let t0 = Instant::now();
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
        generated_sha256: hex(&h.finalize()),
        draft_tokens: c.draft_tokens,
        accepted_draft_tokens: c.accepted_draft_tokens,
        status: "ok".into(),
        phases: crate::phases::Phases::new(&c.forward, wall_s),
        roofline: None,
    })
}

/// Runs every workload of `p` (and its ablation when asked), with a
/// progress bar on stderr.
///
/// # Errors
///
/// An unknown profile, a workload count of 0, loading the model, model,
/// KV and fleet errors.
pub fn run(p: &Params) -> Result<FleetReport> {
    let (name, shapes) = match &p.workloads {
        Workloads::Profile(name) => (
            Some(name.clone()),
            profile(name).ok_or_else(|| {
                params(format!(
                    "unknown profile {name:?} (probe, interactive, long, bounded-long)"
                ))
            })?,
        ),
        Workloads::One(w) => (None, vec![*w]),
    };
    if !shapes.iter().all(Workload::is_nonzero) {
        return Err(params(
            "--prefix, --turns, --agents, --decode and --result must all be at least 1",
        ));
    }
    let model = p.model.load()?;
    let shape = ModelShape::from_gguf(&p.model.path, p.kv_type)?;
    let machine = p.machine.resolve(model.threads())?;
    let reps = if p.ablation { 2 } else { 1 };
    let total: usize = shapes.iter().map(|s| s.agents * s.turns * reps).sum();
    let bar = crate::progress_bar(total, "bench fleet", "agent-turns ")?;
    let mut runs = Vec::with_capacity(shapes.len());
    for s in &shapes {
        bar.set_message(format!("A={} T={} P={}", s.agents, s.turns, s.prefix));
        let mut result = run_shape(&model, s, p, Reuse::Fork, &bar)?;
        let modeled = fleet_roofline(
            &RooflineParams {
                shape,
                workload: *s,
                budget: p.budget,
            },
            &machine,
        );
        result.roofline = Some(RunRoofline::new(&modeled, &result));
        let ablation = if p.ablation {
            bar.set_message(format!("A={} T={} ablation", s.agents, s.turns));
            Some(run_shape(&model, s, p, Reuse::None, &bar)?)
        } else {
            None
        };
        runs.push(FleetRun {
            profile: name.clone(),
            shape: *s,
            result,
            ablation,
        });
    }
    bar.finish_and_clear();
    Ok(FleetReport {
        header: RunHeader::model_run(SCHEMA, &p.model.path, &model)?,
        kv: "paged",
        kv_type: p.kv_type.name(),
        block_size: p.block_size,
        token_budget: p.budget,
        speculative: match p.speculative {
            fak_engine::Speculative::Off => "off",
            fak_engine::Speculative::Lookup(_) => "lookup",
            fak_engine::Speculative::Auto(_) => "auto",
            fak_engine::Speculative::Draft => "draft",
        },
        token_stream: TOKEN_STREAM,
        machine,
        runs,
    })
}

impl FleetReport {
    /// Human-readable summary: one line per run (and its ablation).
    pub fn table(&self) -> String {
        let mut out = format!(
            "{:>5} {:>3} {:>3} {:>3} {:>4} {:>14} {:>9} {:>9} {:>9}\n",
            "P", "T", "A", "D", "R", "agent-turns/s", "wall s", "ttft p50", "ttft p95"
        );
        for r in &self.runs {
            let s = &r.shape;
            let _ = writeln!(
                out,
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
            let _ = writeln!(out, "      {}", r.result.phases.line());
            if r.result.draft_tokens > 0 {
                let _ = writeln!(
                    out,
                    "      speculation: {} of {} draft tokens accepted ({:.0}%)",
                    r.result.accepted_draft_tokens,
                    r.result.draft_tokens,
                    100.0 * r.result.accepted_draft_tokens as f64 / r.result.draft_tokens as f64
                );
            }
            if let Some(rl) = &r.result.roofline {
                let a = &rl.achieved_fraction;
                let _ = writeln!(
                    out,
                    "      MODELED bound {:.2} s (prefix {:.2}, result ingest {:.2}, decode {:.2}); \
                     achieved fraction of the roofline: ingest {:.3}, decode {:.3}, overall {:.3}",
                    rl.modeled.total_s,
                    rl.modeled.prefix.bound_s,
                    rl.modeled.result_ingest.bound_s,
                    rl.modeled.decode.bound_s,
                    a.ingest,
                    a.decode,
                    a.overall
                );
            }
            if let Some(ab) = &r.ablation {
                let _ = writeln!(
                    out,
                    "{:>28} {:>14.3} {:>9.2} {:>9.1} {:>9.1}  (no reuse)",
                    "", ab.agent_turns_per_s, ab.wall_s, ab.ttft_ms_p50, ab.ttft_ms_p95
                );
            }
        }
        out
    }
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
        let s = Workload {
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

    /// A run's keys are `profile`, then the workload's, in the order of
    /// `fak-bench-fleet/1`.
    #[test]
    fn workload_keys_follow_the_fleet_schema() {
        let w = Workload {
            prefix: 1,
            turns: 2,
            agents: 3,
            decode: 4,
            result: 5,
        };
        assert_eq!(
            serde_json::to_string(&w).expect("json"),
            r#"{"prefix":1,"turns":2,"agents":3,"decode":4,"result":5}"#
        );
        assert!(w.is_nonzero());
        assert!(!Workload { turns: 0, ..w }.is_nonzero());
    }
}
