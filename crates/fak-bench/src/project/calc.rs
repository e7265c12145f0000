//! The analytic fleet model behind `fak project`, and the packet it writes.
//!
//! Everything here is a pure function of a [`Recipe`] (model shape, workload,
//! measured rates), so `fak project validate` can rebuild a packet from its
//! own inputs with the same code and the same f64 operations.
//!
//! ```text
//!  measured rates                       model
//!  prefill tok/s  @ n = 16, 64, 256      r_p(n): linear in ln n between the two
//!  decode  tok/s  @ B = 1, 8, 32, ...    r_d(B): nearest measured points, clamped
//!                                                outside the measured range
//!
//!  decode step ms of B agents forked   f(c): extra seconds per agent token at
//!  from a shared context c             context c over the shortest measured c,
//!                                      piecewise linear through the points
//!
//!  prefix_s   = P / r_p(P)                       + P·f(P/2)
//!  ingest_s_k = A·(R+1) / r_p(A·(R+1))           + A·(R+1)·f(ctx_ingest_k)   turn k
//!  step_s_k   = A / r_d(A)                       + A·f(ctx_decode_k)
//!  wall_s     = prefix_s + Σ_k (ingest_s_k + D·step_s_k)
//!  agent-turns/s = A·T / wall_s
//! ```
//!
//! The rates are measured at short contexts; `f` adds what attending over a
//! fleet's growing contexts costs, turn by turn.

pub use crate::context::ContextPoint;
pub use crate::fleet::Workload;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use crate::error::{input, json, Result};

/// Schema tag of a projection packet.
pub const SCHEMA: &str = "fak-project/1";
/// The label every projected figure carries.
pub const MODELED: &str = "MODELED";

/// What the model file contributes: its identity and KV geometry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelInfo {
    pub file: String,
    pub sha256: String,
    pub n_layer: usize,
    /// `n_head_kv · head_dim`: K (and V) elements per token per layer.
    pub n_kv_dim: usize,
}

/// Where a set of measurements came from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Source {
    /// The rates file as given on the command line; `None` when `fak
    /// project` measured in-process.
    pub file: Option<String>,
    /// SHA-256 of that file.
    pub sha256: Option<String>,
    pub schema: String,
    pub threads: usize,
    /// How the numbers were measured.
    pub how: String,
}

impl Source {
    /// Short reference used in `rests_on` lists.
    fn cite(&self) -> String {
        match (&self.file, &self.sha256) {
            (Some(f), Some(h)) => format!("{f} (sha256 {})", h.get(..12).unwrap_or(h)),
            (Some(f), None) => f.clone(),
            _ => format!("in-process measurement ({} threads)", self.threads),
        }
    }
}

/// One measured prefill rate: a single forward pass of `n_tokens`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PrefillPoint {
    pub n_tokens: usize,
    pub tok_s: f64,
}

/// One measured aggregate decode rate of `batch` sequences.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct DecodePoint {
    pub batch: usize,
    pub tok_s: f64,
}

/// One measured fleet run (for calibration).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct FleetPoint {
    #[serde(flatten)]
    pub shape: Workload,
    pub agent_turns_per_s: f64,
}

/// Measurements plus their source.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Measured<T> {
    pub source: Source,
    pub points: Vec<T>,
}

/// Every measured input of a packet.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Inputs {
    pub prefill_tok_s: Measured<PrefillPoint>,
    pub batch_decode_tok_s: Measured<DecodePoint>,
    /// Decode step times at long contexts (the attention term); absent in
    /// packets made from rates files without them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decode_at_context: Option<Measured<ContextPoint>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fleet: Option<Measured<FleetPoint>>,
}

/// Provenance copied verbatim into the packet.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Meta {
    pub engine_version: String,
    pub command: String,
}

/// Everything a packet is computed from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Recipe {
    pub meta: Meta,
    pub model: ModelInfo,
    pub workload: Workload,
    pub inputs: Inputs,
}

/// A projected figure: its value, unit, label and what it rests on.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Figure {
    pub value: f64,
    pub unit: &'static str,
    pub label: &'static str,
    pub rests_on: Vec<String>,
}

/// A rate read off measured points, with the points it used.
#[derive(Debug, Clone, PartialEq)]
pub struct Lookup {
    pub value: f64,
    pub rests_on: Vec<String>,
    /// Set when `x` was outside the measured range.
    pub clamp_note: Option<String>,
}

/// Linear interpolation of `y` in `ln x` over `pts` (`(x, y)`, any order),
/// clamped to the end points outside the measured range. `what` names the
/// quantity in the returned references (e.g. `prefill_tok_s`).
pub fn interp_log(pts: &[(usize, f64)], x: usize, what: &str, src: &Source) -> Option<Lookup> {
    let mut v: Vec<(usize, f64)> = pts.iter().copied().filter(|p| p.0 > 0).collect();
    v.sort_by_key(|p| p.0);
    v.dedup_by_key(|p| p.0);
    let cite = |p: &(usize, f64)| format!("{what}@{}={} from {}", p.0, p.1, src.cite());
    let (first, last) = (v.first()?, v.last()?);
    if x <= first.0 || x >= last.0 {
        let p = if x <= first.0 { first } else { last };
        let clamp_note = (x != p.0).then(|| {
            format!(
                "{what} at {x} is outside the measured range {}..{}: clamped to the value at {}",
                first.0, last.0, p.0
            )
        });
        return Some(Lookup {
            value: p.1,
            rests_on: vec![cite(p)],
            clamp_note,
        });
    }
    let i = v.iter().position(|p| p.0 >= x)?;
    let hi = v.get(i)?;
    if hi.0 == x {
        return Some(Lookup {
            value: hi.1,
            rests_on: vec![cite(hi)],
            clamp_note: None,
        });
    }
    let lo = v.get(i.checked_sub(1)?)?;
    let t = ((x as f64).ln() - (lo.0 as f64).ln()) / ((hi.0 as f64).ln() - (lo.0 as f64).ln());
    Some(Lookup {
        value: lo.1 + (hi.1 - lo.1) * t,
        rests_on: vec![cite(lo), cite(hi)],
        clamp_note: None,
    })
}

/// Text of the formulas, written into every packet.
pub const FORMULAS: &[&str] = &[
    "r_p(n) = prefill tok/s at n tokens: measured single-stream prefill rates, linear in ln(n) between the nearest measured n, clamped outside the measured range",
    "r_d(B) = aggregate batched decode tok/s at B sequences: measured, linear in ln(B) between the nearest measured B, clamped outside the measured range",
    "g(c) = decode step ms of B agents forked from a shared context of c positions: linear between the measured contexts, the last segment's slope (at least 0) past the longest, g(c_min) below the shortest;  f(c) = max(0, g(c) - g(c_min)) / 1000 / B: extra seconds per decoded token at context c (0 when fewer than two contexts were measured)",
    "ctx_ingest_k = P + k*(R+1+D) + (R+1)/2;  ctx_decode_k = P + k*(R+1+D) + (R+1) + D/2 for turn k = 0..T-1 (average cached positions of the turn's ingest and decode tokens)",
    "prefix_s = P / r_p(P) + P*f(P/2)",
    "ingest_tokens = A*(R+1);  ingest_s_k = ingest_tokens / r_p(ingest_tokens) + ingest_tokens*f(ctx_ingest_k);  ingest_s = mean over k",
    "decode_step_s_k = A / r_d(A) + A*f(ctx_decode_k);  decode_step_s = mean over k",
    "attention_s = P*f(P/2) + sum over k of (ingest_tokens*f(ctx_ingest_k) + D*A*f(ctx_decode_k))",
    "wall_s = prefix_s + sum over k of (ingest_s_k + D*decode_step_s_k) = prefix_s + T*(ingest_s + D*decode_step_s)",
    "agent_turns_per_s = A*T / wall_s",
    "ttft_ms = 1000*ingest_s (mean over turns)",
    "kv_bytes_per_token = 2 (K and V) * n_layer * n_kv_dim * 2 (f16 bytes)",
    "kv_bytes = kv_bytes_per_token * (P + A*T*(R+D))",
    "no_reuse_prefix_s = A*(P / r_p(P) + P*f(P/2));  no_reuse_wall_s = no_reuse_prefix_s + T*(ingest_s + D*decode_step_s)",
    "no_reuse_agent_turns_per_s = A*T / no_reuse_wall_s;  no_reuse_kv_bytes = kv_bytes_per_token * A*(P + T*(R+D))",
    "reuse_speedup = no_reuse_wall_s / wall_s",
    "calibration, per fleet run: err = projected - measured agent_turns_per_s, rel_err = err / measured; mean_abs_err = mean |err|, mean_abs_rel_err = mean |rel_err|",
];

/// Assumptions of the model, written into every packet.
pub const ASSUMPTIONS: &[&str] = &[
    "every turn is synchronous across agents: all A agents ingest their R+1 tokens in one batched prefill, then decode D steps together",
    "ttft is the time of one turn's batched ingest (every agent's first token comes from the logits of that ingest)",
    "the prefix is computed once and shared by all agents (forked); the no-reuse variant prefills it once per agent",
    "sampling, scheduling and KV bookkeeping cost nothing beyond the measured forward passes",
];

/// Known limitations, written into every packet.
pub const LIMITATIONS: &[&str] = &[
    "attention over long contexts is modeled from B forked agents' decode steps at a shared context (f): a fleet's private per-agent tails, its ingest runs and agent counts other than B share key tiles differently, which f does not follow; past the longest measured context f is extrapolated; without decode_at_context points attention growth is NOT modeled and long runs are over-projected",
    "prefill rates are single-sequence rates; a batched ingest of many agents' tokens may run at a different rate",
    "the forward-pass token budget (fleet --budget) is not modeled: large ingests are split into several passes",
    "KV bytes count f16 K/V payload only: no paged-block rounding, no allocator or bookkeeping overhead",
    "measured rates carry run-to-run noise of the machine they were taken on; the packet inherits it",
];

fn fig(value: f64, unit: &'static str, rests_on: Vec<String>) -> Figure {
    Figure {
        value,
        unit,
        label: MODELED,
        rests_on,
    }
}

fn union(parts: &[&[String]]) -> Vec<String> {
    let mut v: Vec<String> = Vec::new();
    for s in parts.iter().flat_map(|p| p.iter()) {
        if !v.contains(s) {
            v.push(s.clone());
        }
    }
    v
}

/// The projected figures of one workload.
#[derive(Debug, Clone, PartialEq)]
pub struct Projection {
    pub figures: Vec<(&'static str, Figure)>,
    pub agent_turns_per_s: f64,
    pub notes: Vec<String>,
}

/// Projects `w` from the measured inputs and the model's KV geometry.
pub fn project(w: &Workload, model: &ModelInfo, inputs: &Inputs) -> Result<Projection> {
    let psrc = &inputs.prefill_tok_s.source;
    let dsrc = &inputs.batch_decode_tok_s.source;
    let ppts: Vec<(usize, f64)> = inputs
        .prefill_tok_s
        .points
        .iter()
        .map(|p| (p.n_tokens, p.tok_s))
        .collect();
    let dpts: Vec<(usize, f64)> = inputs
        .batch_decode_tok_s
        .points
        .iter()
        .map(|p| (p.batch, p.tok_s))
        .collect();
    if ppts.iter().chain(&dpts).any(|p| p.1.is_nan() || p.1 <= 0.0) {
        return Err(input("every measured rate must be a positive number"));
    }
    let (a, t, p, d, r) = (
        w.agents as f64,
        w.turns as f64,
        w.prefix as f64,
        w.decode as f64,
        w.result as f64,
    );
    let ingest_tokens = w.agents.saturating_mul(w.result.saturating_add(1));
    let rp_prefix = interp_log(&ppts, w.prefix, "prefill_tok_s", psrc)
        .ok_or_else(|| input("no positive prefill rate in the inputs"))?;
    let rp_ingest = interp_log(&ppts, ingest_tokens, "prefill_tok_s", psrc)
        .ok_or_else(|| input("no positive prefill rate in the inputs"))?;
    let rd = interp_log(&dpts, w.agents, "batch_decode_tok_s", dsrc)
        .ok_or_else(|| input("no positive batched decode rate in the inputs"))?;
    let attn = attention_cost(inputs.decode_at_context.as_ref());
    let mut notes: Vec<String> = Vec::new();
    if attn.rests_on.is_empty() {
        notes.push(
            "no decode_at_context points (fak bench model --contexts ...): attention growth with context is not modeled".into(),
        );
    }
    for n in [&rp_prefix, &rp_ingest, &rd]
        .iter()
        .filter_map(|l| l.clamp_note.clone())
    {
        if !notes.contains(&n) {
            notes.push(n);
        }
    }

    let per_turn = r + 1.0 + d;
    let it = ingest_tokens as f64;
    let prefix_attn_s = p * attn.extra_s(p / 2.0);
    let (mut ingest_attn, mut step_attn) = (0.0, 0.0);
    for k in 0..w.turns {
        let base = p + k as f64 * per_turn;
        ingest_attn += it * attn.extra_s(base + (r + 1.0) / 2.0);
        step_attn += a * attn.extra_s(base + (r + 1.0) + d / 2.0);
    }
    let attention_s = prefix_attn_s + ingest_attn + d * step_attn;
    let prefix_s = p / rp_prefix.value + prefix_attn_s;
    let ingest_s = it / rp_ingest.value + ingest_attn / t;
    let step_s = a / rd.value + step_attn / t;
    let turns_s = t * (it / rp_ingest.value + d * (a / rd.value)) + ingest_attn + d * step_attn;
    let wall_s = prefix_s + turns_s;
    let atps = a * t / wall_s;
    let kv_per_tok = 2.0 * model.n_layer as f64 * model.n_kv_dim as f64 * 2.0;
    let kv = kv_per_tok * (p + a * t * (r + d));
    let nr_prefix_s = a * (p / rp_prefix.value + prefix_attn_s);
    let nr_wall_s = nr_prefix_s + turns_s;
    let nr_kv = kv_per_tok * a * (p + t * (r + d));
    let geom = vec![format!(
        "model {}: n_layer={} n_kv_dim={} (GGUF metadata), f16 K/V",
        model.file, model.n_layer, model.n_kv_dim
    )];
    let all = union(&[
        &rp_prefix.rests_on,
        &rp_ingest.rests_on,
        &rd.rests_on,
        &attn.rests_on,
    ]);
    let with_attn = |base: &[String]| union(&[base, &attn.rests_on]);
    let mut figures = vec![
        (
            "prefill_tok_s_at_prefix",
            fig(rp_prefix.value, "tok/s", rp_prefix.rests_on.clone()),
        ),
        (
            "prefill_tok_s_at_ingest",
            fig(rp_ingest.value, "tok/s", rp_ingest.rests_on.clone()),
        ),
        (
            "batch_decode_tok_s_at_agents",
            fig(rd.value, "tok/s", rd.rests_on.clone()),
        ),
        (
            "prefix_s",
            fig(prefix_s, "s", with_attn(&rp_prefix.rests_on)),
        ),
        (
            "ingest_s_per_turn",
            fig(ingest_s, "s", with_attn(&rp_ingest.rests_on)),
        ),
        ("decode_step_s", fig(step_s, "s", with_attn(&rd.rests_on))),
        ("wall_s", fig(wall_s, "s", all.clone())),
        ("agent_turns_per_s", fig(atps, "agent-turns/s", all.clone())),
        (
            "ttft_ms",
            fig(1e3 * ingest_s, "ms", with_attn(&rp_ingest.rests_on)),
        ),
        ("kv_bytes", fig(kv, "bytes", geom.clone())),
        (
            "no_reuse_prefix_s",
            fig(nr_prefix_s, "s", with_attn(&rp_prefix.rests_on)),
        ),
        ("no_reuse_wall_s", fig(nr_wall_s, "s", all.clone())),
        (
            "no_reuse_agent_turns_per_s",
            fig(a * t / nr_wall_s, "agent-turns/s", all.clone()),
        ),
        ("no_reuse_kv_bytes", fig(nr_kv, "bytes", geom)),
        ("reuse_speedup", fig(nr_wall_s / wall_s, "x", all)),
    ];
    if !attn.rests_on.is_empty() {
        figures.push(("attention_s", fig(attention_s, "s", attn.rests_on.clone())));
    }
    Ok(Projection {
        figures,
        agent_turns_per_s: atps,
        notes,
    })
}

/// The measured attention growth `f` (see [`FORMULAS`]) and the points it
/// rests on (none: `f = 0`).
struct AttentionCost {
    /// `(context, step ms)`, ascending context, at least two.
    pts: Vec<(f64, f64)>,
    /// Agents per measured step.
    batch: f64,
    rests_on: Vec<String>,
}

impl AttentionCost {
    /// `f(c)`: extra seconds per decoded token at context `c`.
    fn extra_s(&self, c: f64) -> f64 {
        let (Some(&(x0, y0)), Some(&(xn, yn))) = (self.pts.first(), self.pts.last()) else {
            return 0.0;
        };
        let g = if c <= x0 {
            y0
        } else if c >= xn {
            let (xa, ya) = self.pts[self.pts.len() - 2];
            let slope = ((yn - ya) / (xn - xa)).max(0.0);
            yn + (c - xn) * slope
        } else {
            let i = self
                .pts
                .iter()
                .position(|&(x, _)| x >= c)
                .unwrap_or(1)
                .max(1);
            let ((xa, ya), (xb, yb)) = (self.pts[i - 1], self.pts[i]);
            ya + (yb - ya) * (c - xa) / (xb - xa)
        };
        (g - y0).max(0.0) / 1e3 / self.batch
    }
}

/// [`AttentionCost`] of the measured points (fewer than two usable
/// contexts: none).
fn attention_cost(pts: Option<&Measured<ContextPoint>>) -> AttentionCost {
    let mut cost = AttentionCost {
        pts: Vec::new(),
        batch: 1.0,
        rests_on: Vec::new(),
    };
    let Some(m) = pts else {
        return cost;
    };
    let mut v: Vec<&ContextPoint> = m
        .points
        .iter()
        .filter(|p| p.context > 0 && p.step_ms.is_finite() && p.step_ms > 0.0)
        .collect();
    v.sort_by_key(|p| p.context);
    v.dedup_by_key(|p| p.context);
    if v.len() < 2 {
        return cost;
    }
    cost.batch = v.iter().map(|p| p.batch).max().unwrap_or(1).max(1) as f64;
    cost.pts = v.iter().map(|p| (p.context as f64, p.step_ms)).collect();
    cost.rests_on = v
        .iter()
        .map(|p| {
            format!(
                "decode_step_ms@context{}x{}={} from {}",
                p.context,
                p.batch,
                p.step_ms,
                m.source.cite()
            )
        })
        .collect();
    cost
}

/// Projected vs measured agent-turns/s for every measured fleet run.
pub fn calibrate(model: &ModelInfo, inputs: &Inputs) -> Result<Option<Value>> {
    let Some(fleet) = &inputs.fleet else {
        return Ok(None);
    };
    let mut runs = Vec::with_capacity(fleet.points.len());
    let (mut rel_sum, mut abs_sum) = (0.0, 0.0);
    for f in &fleet.points {
        let pr = project(&f.shape, model, inputs)?;
        let proj = pr
            .figures
            .iter()
            .find(|(k, _)| *k == "agent_turns_per_s")
            .map(|(_, f)| f.clone())
            .unwrap_or_else(|| fig(pr.agent_turns_per_s, "agent-turns/s", Vec::new()));
        let rel = (proj.value - f.agent_turns_per_s) / f.agent_turns_per_s;
        let err = proj.value - f.agent_turns_per_s;
        rel_sum += rel.abs();
        abs_sum += err.abs();
        runs.push(json!({
            "shape": f.shape,
            "projected_agent_turns_per_s": proj,
            "measured_agent_turns_per_s": {
                "value": f.agent_turns_per_s,
                "label": "MEASURED",
                "source": fleet.source.cite(),
            },
            "err": err,
            "rel_err": rel,
            "notes": pr.notes,
        }));
    }
    let n = runs.len().max(1) as f64;
    Ok(Some(json!({
        "runs": runs,
        "mean_abs_rel_err": rel_sum / n,
        "mean_abs_err": abs_sum / n,
        "n_runs": fleet.points.len(),
    })))
}

/// The packet of `r`, without `packet_sha256`.
pub fn packet_body(r: &Recipe) -> Result<Value> {
    let pr = project(&r.workload, &r.model, &r.inputs)?;
    let mut outputs = serde_json::Map::new();
    for (k, f) in &pr.figures {
        outputs.insert((*k).to_string(), serde_json::to_value(f)?);
    }
    let w = &r.workload;
    let kv_per_tok = 4u64
        .saturating_mul(r.model.n_layer as u64)
        .saturating_mul(r.model.n_kv_dim as u64);
    let per_turn = (w.result as u64).saturating_add(w.decode as u64);
    let kv_tokens = (w.agents as u64)
        .saturating_mul(w.turns as u64)
        .saturating_mul(per_turn)
        .saturating_add(w.prefix as u64);
    let mut body = json!({
        "schema": SCHEMA,
        "label": MODELED,
        "meta": r.meta,
        "model": r.model,
        "workload": r.workload,
        "inputs": r.inputs,
        "derived": {
            "ingest_tokens_per_turn": (w.agents as u64).saturating_mul((w.result as u64).saturating_add(1)),
            "kv_bytes_per_token": kv_per_tok,
            "kv_tokens": kv_tokens,
        },
        "formulas": FORMULAS,
        "assumptions": ASSUMPTIONS,
        "limitations": LIMITATIONS,
        "notes": pr.notes,
        "outputs": outputs,
    });
    if let (Some(c), Some(m)) = (calibrate(&r.model, &r.inputs)?, body.as_object_mut()) {
        m.insert("calibration".into(), c);
    }
    // What any reader of the JSON text sees (serde_json's default float
    // parsing may differ from the computed f64 in the last bit).
    Ok(serde_json::from_str(&serde_json::to_string(&body)?)?)
}

/// Compact JSON with every object's keys sorted (byte order), recursively:
/// the serialization `packet_sha256` is taken over.
pub fn canonical(v: &Value) -> String {
    let mut s = String::new();
    write_canonical(v, &mut s);
    s
}

fn write_canonical(v: &Value, out: &mut String) {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            out.push('{');
            for (i, k) in keys.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String((*k).clone()).to_string());
                out.push(':');
                if let Some(x) = m.get(*k) {
                    write_canonical(x, out);
                }
            }
            out.push('}');
        }
        Value::Array(a) => {
            out.push('[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(x, out);
            }
            out.push(']');
        }
        leaf => out.push_str(&leaf.to_string()),
    }
}

/// Hex SHA-256 of the canonical serialization of `v`.
pub fn sha256_canonical(v: &Value) -> String {
    crate::hex(&Sha256::digest(canonical(v).as_bytes()))
}

/// Normalizes a recipe to what a reader of its JSON text gets back, so a
/// packet rebuilt from its own text reproduces the same f64 operations.
pub fn settle(r: Recipe) -> Result<Recipe> {
    let mut cur = r;
    for _ in 0..8 {
        let text = serde_json::to_string(&cur)?;
        let next: Recipe = serde_json::from_str(&text)?;
        if serde_json::to_string(&next)? == text {
            return Ok(next);
        }
        cur = next;
    }
    Ok(cur)
}

/// The full packet of `r`: its body plus `packet_sha256`.
pub fn packet(r: Recipe) -> Result<Value> {
    let r = settle(r)?;
    let mut body = packet_body(&r)?;
    let sha = sha256_canonical(&body);
    if let Some(m) = body.as_object_mut() {
        m.insert("packet_sha256".into(), Value::String(sha));
    }
    Ok(body)
}

/// The path of the first place where `want` and `got` differ, if any.
pub fn first_diff(path: &str, want: &Value, got: &Value) -> Option<String> {
    match (want, got) {
        (Value::Object(a), Value::Object(b)) => {
            let mut keys: Vec<&String> = a.keys().chain(b.keys()).collect();
            keys.sort();
            keys.dedup();
            keys.into_iter().find_map(|k| {
                let p = format!("{path}.{k}");
                match (a.get(k), b.get(k)) {
                    (Some(x), Some(y)) => first_diff(&p, x, y),
                    (Some(_), None) => Some(format!("{p} is missing")),
                    (None, _) => Some(format!("{p} is unexpected")),
                }
            })
        }
        (Value::Array(a), Value::Array(b)) if a.len() == b.len() => a
            .iter()
            .zip(b)
            .enumerate()
            .find_map(|(i, (x, y))| first_diff(&format!("{path}[{i}]"), x, y)),
        _ if want == got => None,
        _ => Some(format!("{path}: packet has {got}, its inputs give {want}")),
    }
}

/// Checks a packet: rebuilds it from its own inputs and compares every
/// field, then checks `packet_sha256`. Returns the first mismatch.
pub fn validate(packet: &Value) -> Result<()> {
    let Some(obj) = packet.as_object() else {
        return Err(input("a packet is a JSON object"));
    };
    if obj.get("schema").and_then(Value::as_str) != Some(SCHEMA) {
        return Err(input(format!(
            "not a {SCHEMA} packet (schema is {:?})",
            obj.get("schema")
        )));
    }
    let recipe: Recipe = serde_json::from_value(packet.clone()).map_err(json(
        "reading the packet's meta, model, workload and inputs",
    ))?;
    let mut body = obj.clone();
    let claimed = body
        .remove("packet_sha256")
        .ok_or_else(|| input("packet_sha256 is missing"))?;
    let body = Value::Object(body);
    let want = packet_body(&recipe)?;
    if let Some(d) = first_diff("", &want, &body) {
        return Err(input(format!("mismatch at {}", d.trim_start_matches('.'))));
    }
    let sha = sha256_canonical(&body);
    if claimed.as_str() != Some(sha.as_str()) {
        return Err(input(format!(
            "packet_sha256 mismatch: packet has {claimed}, its contents hash to {sha}"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn src() -> Source {
        Source {
            file: Some("rates/single.json".into()),
            sha256: Some("ab".repeat(32)),
            schema: "fak-bench-single/1".into(),
            threads: 2,
            how: "test".into(),
        }
    }

    #[test]
    fn interpolation_is_linear_in_ln_and_clamps() {
        let pts = [(64, 200.0), (16, 100.0), (256, 300.0)];
        let s = src();
        let at = |x| interp_log(&pts, x, "r", &s).unwrap();
        assert_eq!(at(16).value, 100.0);
        assert_eq!(at(64).rests_on.len(), 1);
        assert!((at(32).value - 150.0).abs() < 1e-9);
        assert!((at(128).value - 250.0).abs() < 1e-9);
        assert_eq!(at(128).rests_on.len(), 2);
        assert_eq!(at(8).value, 100.0);
        assert!(at(8).clamp_note.is_some());
        assert_eq!(at(1024).value, 300.0);
        assert!(at(1024).clamp_note.unwrap().contains("clamped"));
        assert!(at(256).clamp_note.is_none());
        assert!(interp_log(&[], 3, "r", &s).is_none());
    }

    #[test]
    fn canonical_sorts_keys_recursively() {
        let v = json!({"b": 1, "a": {"d": [1, {"z": 0, "y": 2.5}], "c": "x"}});
        assert_eq!(
            canonical(&v),
            r#"{"a":{"c":"x","d":[1,{"y":2.5,"z":0}]},"b":1}"#
        );
    }

    #[test]
    fn first_diff_names_the_path() {
        let a = json!({"o": {"x": [1, 2]}, "k": 1});
        let b = json!({"o": {"x": [1, 3]}, "k": 1});
        assert!(first_diff("", &a, &b).unwrap().starts_with(".o.x[1]"));
        assert_eq!(first_diff("", &a, &a), None);
    }

    fn recipe(prefill: Vec<(usize, f64)>, decode: Vec<(usize, f64)>, w: Workload) -> Recipe {
        let mut dsrc = src();
        dsrc.file = None;
        dsrc.sha256 = None;
        Recipe {
            meta: Meta {
                engine_version: "0".into(),
                command: "fak project \"x\"".into(),
            },
            model: ModelInfo {
                file: "m.gguf".into(),
                sha256: "cd".repeat(32),
                n_layer: 30,
                n_kv_dim: 192,
            },
            workload: w,
            inputs: Inputs {
                prefill_tok_s: Measured {
                    source: src(),
                    points: prefill
                        .into_iter()
                        .map(|(n_tokens, tok_s)| PrefillPoint { n_tokens, tok_s })
                        .collect(),
                },
                batch_decode_tok_s: Measured {
                    source: dsrc.clone(),
                    points: decode
                        .into_iter()
                        .map(|(batch, tok_s)| DecodePoint { batch, tok_s })
                        .collect(),
                },
                decode_at_context: None,
                fleet: Some(Measured {
                    source: dsrc,
                    points: vec![FleetPoint {
                        shape: w,
                        agent_turns_per_s: 1.0 / 3.0,
                    }],
                }),
            },
        }
    }

    #[test]
    fn a_rate_of_zero_is_an_error_not_a_panic() {
        let w = Workload {
            agents: 2,
            turns: 1,
            prefix: 1,
            decode: 1,
            result: 1,
        };
        assert!(packet(recipe(vec![(16, 0.0)], vec![(1, 1.0)], w)).is_err());
        assert!(packet(recipe(vec![], vec![(1, 1.0)], w)).is_err());
    }

    proptest::proptest! {
        /// A packet written as pretty JSON and read back validates: the
        /// exact comparison survives serde_json's float round trip.
        #[test]
        fn packets_round_trip_through_json_text(
            prefill in proptest::collection::vec((1usize..4096, 1e-3f64..1e6), 1..5),
            decode in proptest::collection::vec((1usize..2048, 1e-3f64..1e6), 1..6),
            agents in 1usize..300,
            turns in 1usize..100,
            prefix in 1usize..10_000,
            decode_len in 1usize..200,
            result in 1usize..1000,
        ) {
            let w = Workload { agents, turns, prefix, decode: decode_len, result };
            let p = packet(recipe(prefill, decode, w)).unwrap();
            let text = serde_json::to_string_pretty(&p).unwrap();
            let back: Value = serde_json::from_str(&text).unwrap();
            proptest::prop_assert!(validate(&back).is_ok(), "{:?}", validate(&back));
        }
    }
}
