//! `fak project`: MODELED fleet projections from measured rates.
//!
//! ```text
//!  fak project --model M --agents A --turns T --prefix P [--decode D] [--result R]
//!              [--rates single.json] [--rates batch.json] [--fleet fleet.json]
//!              [--threads N] [--out PACKET.json] [--json]
//!  fak project validate PACKET.json
//!  fak project calibrate --model M [--rates ...] --fleet fleet.json [--json]
//!
//!  rates files ──► inputs ──► calc::project ──► outputs (every figure MODELED,
//!  (or brief in-process            │             naming the measured inputs
//!   measurement)                   │             it rests on)
//!                                  └──► packet JSON + packet_sha256
//!
//!  validate: packet.inputs ──► same code ──► compare with packet.outputs, then
//!            sha256 over the canonical serialization (sorted keys, compact)
//! ```
//!
//! The model is in [`calc`]; reading rates files and measuring in-process is
//! in [`inputs`]. A projection packet with `--fleet` also carries the
//! calibration (projected vs measured agent-turns/s per fleet run);
//! `fak project calibrate` prints just that.

mod calc;
mod inputs;

use std::path::PathBuf;

use anyhow::{bail, Context};
use serde_json::Value;

use calc::{Inputs, Meta, ModelInfo, Recipe, Workload};

#[derive(clap::Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct ProjectArgs {
    #[command(subcommand)]
    cmd: Option<ProjectCmd>,
    #[command(flatten)]
    proj: ProjectionArgs,
}

#[derive(clap::Subcommand)]
enum ProjectCmd {
    /// Recompute a packet's outputs from its own inputs and check its sha256.
    Validate(ValidateArgs),
    /// Projected vs measured agent-turns/s for every run of a fleet report.
    Calibrate(CalibrateArgs),
}

/// Where the measured rates come from.
#[derive(clap::Args)]
struct RatesArgs {
    /// Path to the GGUF model the rates were measured on.
    #[arg(long, short = 'm', required = true)]
    model: Option<PathBuf>,
    /// Rates file: a `fak bench model --json` (fak-bench-single/1) or a
    /// `fak bench batch --json` (fak-bench-batch/1) report; repeatable. A
    /// kind not given is measured briefly in-process.
    #[arg(long)]
    rates: Vec<PathBuf>,
    /// Threads for in-process measurement; must match the rates files' threads.
    #[arg(long, short = 't')]
    threads: Option<usize>,
}

#[derive(clap::Args)]
struct ProjectionArgs {
    #[command(flatten)]
    rates: RatesArgs,
    /// Agents A.
    #[arg(long, required = true)]
    agents: Option<usize>,
    /// Turns T per agent.
    #[arg(long, required = true)]
    turns: Option<usize>,
    /// Shared prefix tokens P.
    #[arg(long, required = true)]
    prefix: Option<usize>,
    /// Tokens D decoded per turn.
    #[arg(long, default_value_t = 32)]
    decode: usize,
    /// Result tokens R ingested per turn.
    #[arg(long, default_value_t = 64)]
    result: usize,
    /// A `fak bench fleet --json` report: adds a calibration section.
    #[arg(long)]
    fleet: Option<PathBuf>,
    /// Write the packet to this file.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Print the packet on stdout (the table goes to stderr).
    #[arg(long)]
    json: bool,
}

#[derive(clap::Args)]
struct ValidateArgs {
    /// A packet written by `fak project --out`.
    packet: PathBuf,
}

#[derive(clap::Args)]
struct CalibrateArgs {
    #[command(flatten)]
    rates: RatesArgs,
    /// A `fak bench fleet --json` report.
    #[arg(long)]
    fleet: PathBuf,
    /// Print the calibration as JSON on stdout.
    #[arg(long)]
    json: bool,
}

pub fn run(a: ProjectArgs) -> anyhow::Result<()> {
    match a.cmd {
        Some(ProjectCmd::Validate(v)) => validate(&v),
        Some(ProjectCmd::Calibrate(c)) => calibrate(&c),
        None => projection(&a.proj),
    }
}

/// The command line, for the packet's provenance.
fn command_line() -> String {
    std::env::args()
        .map(|s| {
            if s.is_empty() || s.contains(|c: char| c.is_whitespace() || c == '"') {
                format!("{s:?}")
            } else {
                s
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The model's identity and every measured input (rates files, or a brief
/// in-process measurement for the kinds not given).
fn gather(r: &RatesArgs, fleet: Option<&PathBuf>) -> anyhow::Result<(ModelInfo, Inputs)> {
    let path = r.model.as_ref().context("--model is required")?;
    let model = inputs::model_info(path)?;
    let rates = inputs::read_rates(&r.rates, &model, r.threads)?;
    let fleet = fleet.map(|f| inputs::read_fleet(f, &model)).transpose()?;
    let loaded = match (&rates.prefill, &rates.decode) {
        (Some(_), Some(_)) => None,
        _ => {
            eprintln!("fak project: measuring the missing rates in-process (a few seconds)");
            Some(inputs::load_model(path, r.threads)?)
        }
    };
    // Context points come with a single-stream file (if it has them), or
    // are measured in-process along with the prefill rates.
    let context = match (rates.context, rates.prefill.is_some(), &loaded) {
        (Some(c), _, _) => Some(c),
        (None, false, Some(m)) => Some(inputs::measure_context(m)?),
        _ => None,
    };
    let prefill = match (rates.prefill, &loaded) {
        (Some(p), _) => p,
        (None, Some(m)) => inputs::measure_prefill(m)?,
        (None, None) => bail!("no prefill rates"),
    };
    let decode = match (rates.decode, &loaded) {
        (Some(d), _) => d,
        (None, Some(m)) => inputs::measure_decode(m)?,
        (None, None) => bail!("no batched decode rates"),
    };
    Ok((
        model,
        Inputs {
            prefill_tok_s: prefill,
            batch_decode_tok_s: decode,
            decode_at_context: context,
            fleet,
        },
    ))
}

fn projection(a: &ProjectionArgs) -> anyhow::Result<()> {
    let (Some(agents), Some(turns), Some(prefix)) = (a.agents, a.turns, a.prefix) else {
        bail!("give --agents, --turns and --prefix");
    };
    let workload = Workload {
        agents,
        turns,
        prefix,
        decode: a.decode,
        result: a.result,
    };
    if [agents, turns, prefix, a.decode, a.result].contains(&0) {
        bail!("--agents, --turns, --prefix, --decode and --result must all be at least 1");
    }
    let (model, inputs) = gather(&a.rates, a.fleet.as_ref())?;
    let recipe = Recipe {
        meta: Meta {
            engine_version: env!("CARGO_PKG_VERSION").to_string(),
            command: command_line(),
        },
        model,
        workload,
        inputs,
    };
    let packet = calc::packet(recipe)?;
    let text = serde_json::to_string_pretty(&packet)?;
    if let Some(out) = &a.out {
        std::fs::write(out, format!("{text}\n"))
            .with_context(|| format!("writing {}", out.display()))?;
    }
    let table = packet_table(&packet);
    if a.json {
        eprint!("{table}");
        println!("{text}");
    } else {
        print!("{table}");
        if let Some(out) = &a.out {
            println!("packet written to {}", out.display());
        }
    }
    Ok(())
}

/// Output figures in the order the table shows them.
const TABLE_ORDER: &[&str] = &[
    "agent_turns_per_s",
    "wall_s",
    "prefix_s",
    "ingest_s_per_turn",
    "decode_step_s",
    "ttft_ms",
    "kv_bytes",
    "no_reuse_agent_turns_per_s",
    "no_reuse_wall_s",
    "no_reuse_prefix_s",
    "no_reuse_kv_bytes",
    "reuse_speedup",
    "prefill_tok_s_at_prefix",
    "prefill_tok_s_at_ingest",
    "batch_decode_tok_s_at_agents",
];

fn int(v: &Value) -> u64 {
    v.as_u64().unwrap_or(0)
}

fn num(v: &Value, path: &[&str]) -> f64 {
    path.iter()
        .try_fold(v, |v, k| v.get(*k))
        .and_then(Value::as_f64)
        .unwrap_or(f64::NAN)
}

/// Human summary of a packet.
fn packet_table(p: &Value) -> String {
    let w = &p["workload"];
    let mut s = format!(
        "MODELED projection for {} | A={} T={} P={} D={} R={}\n",
        p["model"]["file"].as_str().unwrap_or("?"),
        int(&w["agents"]),
        int(&w["turns"]),
        int(&w["prefix"]),
        int(&w["decode"]),
        int(&w["result"])
    );
    s.push_str(&format!(
        "{:<28} {:>16} {:>14}\n",
        "figure (MODELED)", "value", "unit"
    ));
    let o = &p["outputs"];
    let mut keys: Vec<&str> = TABLE_ORDER.to_vec();
    for k in o.as_object().into_iter().flat_map(|m| m.keys()) {
        if !keys.contains(&k.as_str()) {
            keys.push(k);
        }
    }
    for k in keys {
        let Some(f) = o.get(k) else { continue };
        let unit = f["unit"].as_str().unwrap_or("");
        let v = f["value"].as_f64().unwrap_or(f64::NAN);
        let (v, unit) = match unit {
            "bytes" => (v / (1024.0 * 1024.0), "MiB"),
            u => (v, u),
        };
        s.push_str(&format!("{k:<28} {v:>16.4} {unit:>14}\n"));
    }
    for n in p["notes"].as_array().into_iter().flatten() {
        s.push_str(&format!("note: {}\n", n.as_str().unwrap_or("")));
    }
    if p.get("calibration").is_some() {
        s.push_str(&calibration_table(&p["calibration"]));
    }
    s
}

fn calibration_table(c: &Value) -> String {
    let mut s = format!(
        "{:>5} {:>3} {:>3} {:>3} {:>4} {:>12} {:>12} {:>9}\n",
        "P", "T", "A", "D", "R", "projected", "measured", "rel err"
    );
    for r in c["runs"].as_array().into_iter().flatten() {
        let sh = &r["shape"];
        s.push_str(&format!(
            "{:>5} {:>3} {:>3} {:>3} {:>4} {:>12.3} {:>12.3} {:>8.1}%\n",
            int(&sh["prefix"]),
            int(&sh["turns"]),
            int(&sh["agents"]),
            int(&sh["decode"]),
            int(&sh["result"]),
            num(r, &["projected_agent_turns_per_s", "value"]),
            num(r, &["measured_agent_turns_per_s", "value"]),
            100.0 * num(r, &["rel_err"])
        ));
    }
    s.push_str(&format!(
        "mean |rel err| over {} runs: {:.1}%, mean |err| {:.3} agent-turns/s (MODELED vs MEASURED)\n",
        int(&c["n_runs"]),
        100.0 * num(c, &["mean_abs_rel_err"]),
        num(c, &["mean_abs_err"])
    ));
    s
}

fn validate(a: &ValidateArgs) -> anyhow::Result<()> {
    let p = &a.packet;
    let text = std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?;
    let v: Value =
        serde_json::from_str(&text).with_context(|| format!("parsing {}", p.display()))?;
    calc::validate(&v).with_context(|| format!("{} is not valid", p.display()))?;
    println!("OK {}", p.display());
    Ok(())
}

fn calibrate(a: &CalibrateArgs) -> anyhow::Result<()> {
    let (model, inputs) = gather(&a.rates, Some(&a.fleet))?;
    let c = calc::calibrate(&model, &inputs)?.context("no fleet runs")?;
    if a.json {
        let out = serde_json::json!({
            "schema": "fak-project-calibration/1",
            "label": calc::MODELED,
            "model": model,
            "inputs": inputs,
            "calibration": c,
        });
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        print!("{}", calibration_table(&c));
    }
    Ok(())
}
