//! `fak project`: MODELED fleet projections from measured rates.
//!
//! ```text
//!  fak project --model M --agents A --turns T --prefix P [--decode D] [--result R]
//!              [--rates single.json] [--rates batch.json] [--fleet fleet.json]
//!              [--threads N] [--out PACKET.json] [--json]
//!  fak project validate PACKET.json
//!  fak project calibrate --model M [--rates ...] --fleet fleet.json [--json]
//!  fak project roofline --model M --agents A --turns T --prefix P [--decode D]
//!              [--result R] [--budget N] [--kv-type f16|q8_0] [--threads N]
//!              [--bandwidth bw.json] [--peak peak.json] [--f32-gflops X] [--json]
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
//! The model, the rates files and the in-process measurement are in
//! `fak_bench::project`; this module turns the flags into its params and
//! prints. A projection packet with `--fleet` also carries the calibration
//! (projected vs measured agent-turns/s per fleet run); `fak project
//! calibrate` prints just that. `fak project roofline` prints the MODELED
//! roofline of a fleet workload (`fak_bench::roofline`): bytes and
//! operations per phase and the time bound of each on this machine's
//! measured bandwidth, int8 peak and f32 FMA peak.

use std::path::PathBuf;

use anyhow::{bail, Context};
use fak_bench::project::{self as proj, ProjectionParams, RatesParams};
use fak_bench::roofline::{self, MachineSpec};
use fak_bench::Workload;

use crate::KvTypeArg;

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
    /// The MODELED roofline of a fleet workload: bytes, operations and the
    /// time bound of each phase on this machine's measured bandwidth and peaks.
    Roofline(RooflineArgs),
}

/// Where a roofline's machine figures come from (also `fak bench fleet`'s).
#[derive(clap::Args)]
pub struct MachineArgs {
    /// A `fak bench bandwidth --json` report (same threads); default:
    /// measured in-process (512 MiB, 3 passes).
    #[arg(long)]
    bandwidth: Option<PathBuf>,
    /// A `fak bench peak --json` report (same threads): its int8 and f32
    /// peaks; default: measured in-process (4M rounds, 3 passes). A report
    /// without the f32 peak (older fak) gets that one measured in-process.
    #[arg(long)]
    peak: Option<PathBuf>,
    /// f32 GFLOP/s (2 per FMA) that bounds the attention arithmetic, in
    /// place of the measured f32 FMA peak (`fak bench peak`).
    #[arg(long)]
    f32_gflops: Option<f64>,
}

impl MachineArgs {
    pub fn spec(&self) -> MachineSpec {
        MachineSpec {
            bandwidth: self.bandwidth.clone(),
            peak: self.peak.clone(),
            f32_gflops: self.f32_gflops,
        }
    }
}

#[derive(clap::Args)]
struct RooflineArgs {
    /// Path to the GGUF model.
    #[arg(long, short = 'm')]
    model: PathBuf,
    /// Threads the machine figures are for (default: all cores).
    #[arg(long, short = 't', value_parser = crate::parse_threads)]
    threads: Option<usize>,
    /// Agents A.
    #[arg(long)]
    agents: usize,
    /// Turns T per agent.
    #[arg(long)]
    turns: usize,
    /// Shared prefix tokens P.
    #[arg(long)]
    prefix: usize,
    /// Tokens D decoded per turn.
    #[arg(long, default_value_t = 32)]
    decode: usize,
    /// Result tokens R ingested per turn.
    #[arg(long, default_value_t = 64)]
    result: usize,
    /// Most tokens per forward pass (as `fak bench fleet --budget`).
    #[arg(long, default_value_t = 512)]
    budget: usize,
    /// Element type of the KV cache.
    #[arg(long, value_enum, default_value_t = KvTypeArg::F16)]
    kv_type: KvTypeArg,
    #[command(flatten)]
    machine: MachineArgs,
    /// Print the report as JSON on stdout.
    #[arg(long)]
    json: bool,
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
        Some(ProjectCmd::Validate(v)) => {
            proj::validate_file(&v.packet)?;
            outln!("OK {}", v.packet.display())?;
            Ok(())
        }
        Some(ProjectCmd::Calibrate(c)) => calibrate(&c),
        Some(ProjectCmd::Roofline(r)) => roofline_cmd(&r),
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

impl RatesArgs {
    fn params(&self) -> anyhow::Result<RatesParams> {
        Ok(RatesParams {
            model: self.model.clone().context("--model is required")?,
            rates: self.rates.clone(),
            threads: self.threads,
        })
    }
}

fn projection(a: &ProjectionArgs) -> anyhow::Result<()> {
    let (Some(agents), Some(turns), Some(prefix)) = (a.agents, a.turns, a.prefix) else {
        bail!("give --agents, --turns and --prefix");
    };
    let packet = proj::projection(&ProjectionParams {
        rates: a.rates.params()?,
        workload: Workload {
            prefix,
            turns,
            agents,
            decode: a.decode,
            result: a.result,
        },
        fleet: a.fleet.clone(),
        command: command_line(),
    })?;
    let text = serde_json::to_string_pretty(&packet)?;
    if let Some(out) = &a.out {
        std::fs::write(out, format!("{text}\n"))
            .with_context(|| format!("writing {}", out.display()))?;
    }
    let table = proj::packet_table(&packet);
    if a.json {
        eprint!("{table}");
        outln!("{text}")?;
    } else {
        out!("{table}")?;
        if let Some(out) = &a.out {
            outln!("packet written to {}", out.display())?;
        }
    }
    Ok(())
}

fn calibrate(a: &CalibrateArgs) -> anyhow::Result<()> {
    let out = proj::calibration(&a.rates.params()?, &a.fleet)?;
    if a.json {
        outln!("{}", serde_json::to_string_pretty(&out)?)?;
    } else {
        out!("{}", proj::calibration_table(&out["calibration"]))?;
    }
    Ok(())
}

fn roofline_cmd(a: &RooflineArgs) -> anyhow::Result<()> {
    let r = roofline::report(&roofline::ReportParams {
        model: a.model.clone(),
        threads: a.threads,
        workload: Workload {
            prefix: a.prefix,
            turns: a.turns,
            agents: a.agents,
            decode: a.decode,
            result: a.result,
        },
        budget: a.budget,
        kv_type: a.kv_type.into(),
        machine: a.machine.spec(),
    })?;
    if a.json {
        outln!("{}", serde_json::to_string_pretty(&r)?)?;
    } else {
        out!("{}", r.roofline.table())?;
    }
    Ok(())
}
