//! `fak project`: MODELED fleet projections from measured rates.
//!
//! ```text
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
//! in [`inputs`]. A projection packet with a fleet report also carries the
//! calibration (projected vs measured agent-turns/s per fleet run);
//! [`calibration`] gives just that.

pub mod calc;
pub mod inputs;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::error::{input, params, Error, Result};
use calc::{Inputs, Meta, ModelInfo, Recipe, Workload};

/// Where the measured rates come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RatesParams {
    /// The GGUF model the rates were measured on.
    pub model: PathBuf,
    /// Rates files: a `fak-bench-single/1` and a `fak-bench-batch/1` report
    /// at most; a kind not given is measured briefly in-process.
    pub rates: Vec<PathBuf>,
    /// Threads for in-process measurement; must match the rates files' threads.
    pub threads: Option<usize>,
}

/// What a projection packet is made from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProjectionParams {
    pub rates: RatesParams,
    pub workload: Workload,
    /// A `fak-bench-fleet/1` report: adds a calibration section.
    pub fleet: Option<PathBuf>,
    /// The command line, recorded in the packet's `meta`.
    pub command: String,
}

/// The model's identity and every measured input (rates files, or a brief
/// in-process measurement for the kinds not given; a note on stderr says so).
///
/// # Errors
///
/// Unreadable or mismatched rates files, loading the model, model errors.
pub fn gather(r: &RatesParams, fleet: Option<&Path>) -> Result<(ModelInfo, Inputs)> {
    let path = &r.model;
    let model = inputs::model_info(path)?;
    let rates = inputs::read_rates(&r.rates, &model, r.threads)?;
    let fleet = fleet.map(|f| inputs::read_fleet(f, &model)).transpose()?;
    let loaded = match (&rates.prefill, &rates.decode) {
        (Some(_), Some(_)) => None,
        _ => {
            eprintln!("fak project: measuring the missing rates in-process (a few seconds)");
            Some(crate::load_model(path, r.threads)?)
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
        (None, None) => return Err(input("no prefill rates")),
    };
    let decode = match (rates.decode, &loaded) {
        (Some(d), _) => d,
        (None, Some(m)) => inputs::measure_decode(m)?,
        (None, None) => return Err(input("no batched decode rates")),
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

/// The projection packet of `p` (with its `packet_sha256`).
///
/// # Errors
///
/// A workload count of 0, and as [`gather`] and [`calc::packet`].
pub fn projection(p: &ProjectionParams) -> Result<Value> {
    if !p.workload.is_nonzero() {
        return Err(params(
            "--agents, --turns, --prefix, --decode and --result must all be at least 1",
        ));
    }
    let (model, inputs) = gather(&p.rates, p.fleet.as_deref())?;
    calc::packet(Recipe {
        meta: Meta {
            engine_version: crate::ENGINE_VERSION.to_string(),
            command: p.command.clone(),
        },
        model,
        workload: p.workload,
        inputs,
    })
}

/// Projected vs measured agent-turns/s for every run of the fleet report
/// at `fleet`, as the `fak-project-calibration/1` object.
///
/// # Errors
///
/// A report without usable runs, and as [`gather`].
pub fn calibration(r: &RatesParams, fleet: &Path) -> Result<Value> {
    let (model, inputs) = gather(r, Some(fleet))?;
    let c = calc::calibrate(&model, &inputs)?.ok_or_else(|| input("no fleet runs"))?;
    Ok(serde_json::json!({
        "schema": "fak-project-calibration/1",
        "label": calc::MODELED,
        "model": model,
        "inputs": inputs,
        "calibration": c,
    }))
}

/// Checks the packet in the file at `path` ([`calc::validate`]).
///
/// # Errors
///
/// An unreadable file, or [`Error::NotValid`] with the first mismatch.
pub fn validate_file(path: &Path) -> Result<()> {
    calc::validate(&inputs::read_value(path)?).map_err(|e| Error::NotValid {
        path: path.to_path_buf(),
        source: Box::new(e),
    })
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
pub fn packet_table(p: &Value) -> String {
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
    let _ = writeln!(
        s,
        "{:<28} {:>16} {:>14}",
        "figure (MODELED)", "value", "unit"
    );
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
        let _ = writeln!(s, "{k:<28} {v:>16.4} {unit:>14}");
    }
    for n in p["notes"].as_array().into_iter().flatten() {
        let _ = writeln!(s, "note: {}", n.as_str().unwrap_or(""));
    }
    if p.get("calibration").is_some() {
        s.push_str(&calibration_table(&p["calibration"]));
    }
    s
}

/// Human summary of a calibration (a packet's `calibration`, or the
/// `calibration` of [`calibration`]'s object).
pub fn calibration_table(c: &Value) -> String {
    let mut s = format!(
        "{:>5} {:>3} {:>3} {:>3} {:>4} {:>12} {:>12} {:>9}\n",
        "P", "T", "A", "D", "R", "projected", "measured", "rel err"
    );
    for r in c["runs"].as_array().into_iter().flatten() {
        let sh = &r["shape"];
        let _ = writeln!(
            s,
            "{:>5} {:>3} {:>3} {:>3} {:>4} {:>12.3} {:>12.3} {:>8.1}%",
            int(&sh["prefix"]),
            int(&sh["turns"]),
            int(&sh["agents"]),
            int(&sh["decode"]),
            int(&sh["result"]),
            num(r, &["projected_agent_turns_per_s", "value"]),
            num(r, &["measured_agent_turns_per_s", "value"]),
            100.0 * num(r, &["rel_err"])
        );
    }
    let _ = writeln!(
        s,
        "mean |rel err| over {} runs: {:.1}%, mean |err| {:.3} agent-turns/s (MODELED vs MEASURED)",
        int(&c["n_runs"]),
        100.0 * num(c, &["mean_abs_rel_err"]),
        num(c, &["mean_abs_err"])
    );
    s
}
