//! The MODELED roofline of a fleet workload: bytes moved and operations per
//! phase, and the time each phase cannot beat on a machine of measured
//! bandwidth and peaks. `fak project roofline` prints it; `fak bench fleet`
//! sets it beside the measured phases ([`crate::phases`]) and reports the
//! achieved fraction (modeled time / measured time).
//!
//! ```text
//!  unit (one pass, or a turn's ingest)   bytes  = weights read + KV rows read + KV rows written
//!                                        ops    = matmul MACs (int8) + attention MACs (f32)
//!  bound_s(unit) = max(bytes / read bandwidth,
//!                      matmul MACs / int8 peak + attention MACs / f32 FMA peak)
//!  phase bound   = Σ bound_s over its units (units run one after another)
//!  rule: the compute terms add (the same cores run the int8 matmuls and the
//!        f32 attention one after the other); memory and compute overlap,
//!        so their max bounds a unit
//!
//!  per (query token, key row), per layer: 2 · n_head · head_dim attention MACs
//!                                         (scores q·k, then the value sum p·v)
//!  prefix       P tokens, ceil(P / budget) passes, no logits; token i reads rows 0..=i
//!  result ingest turn k: each agent feeds n_k = R (+1 after turn 0: the last
//!               token it generated) tokens over c_k cached rows
//!               (c_0 = P, c_k = P + k·(R+D) − 1); logits for its last token
//!  decode       D − 1 steps per turn (the first token comes from the ingest);
//!               one token per agent per step, every one with logits
//!  KV reads     the shared prefix rows once per unit (grouped attention scores
//!               each shared key tile once for every agent), each agent's own
//!               rows once
//! ```
//!
//! Every figure is MODELED; the measured inputs are named in [`Machine`]
//! (the f32 FMA peak is `fak bench peak`'s, like the int8 one). What the
//! model leaves out: activations and logits traffic, norms, RoPE, softmax,
//! and re-reads when a turn's ingest is split over passes (only the weights
//! are counted once per pass).

pub mod machine;

use std::path::{Path, PathBuf};

use fak_model::KvType;
use serde::{Deserialize, Serialize};

use crate::error::Result;
use crate::{model_file_name, sha256_file, threads_or_all, Workload};
pub use machine::{Machine, MachineSpec};

/// The label every roofline figure carries.
pub const MODELED: &str = "MODELED";
/// Schema tag of [`RooflineReport`].
pub const SCHEMA: &str = "fak-roofline/1";

/// What the model file contributes to the roofline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelShape {
    pub n_layer: u64,
    /// `n_head · head_dim`: query elements per token per layer.
    pub q_dim: u64,
    /// Bytes of every `blk.*` weight matrix: what one pass reads.
    pub layer_weight_bytes: u64,
    /// Multiply-adds of those matrices per token.
    pub layer_macs_per_token: u64,
    /// Bytes of the output head (`output.weight`, or the tied `token_embd.weight`).
    pub output_weight_bytes: u64,
    /// Multiply-adds of the output head per token that wants logits.
    pub output_macs_per_token: u64,
    /// Bytes of one position's K and V rows over every layer, in the cache's type.
    pub kv_bytes_per_pos: u64,
}

impl ModelShape {
    /// The shape of the GGUF at `path` with a `kv_type` cache.
    ///
    /// # Errors
    ///
    /// [`Error::Gguf`](crate::Error::Gguf) when the file does not open or
    /// its metadata is not a supported model;
    /// [`Error::Input`](crate::Error::Input) without an output head.
    pub fn from_gguf(path: &Path, kv_type: KvType) -> Result<ModelShape> {
        let (f, c) = crate::load::open_gguf(path)?;
        let (mut lw, mut lm) = (0u64, 0u64);
        for t in f.tensors() {
            if t.name.starts_with("blk.") && t.dims.len() >= 2 {
                lw += t.n_bytes;
                lm += t.n_elements();
            }
        }
        let out = f
            .tensor("output.weight")
            .or_else(|| f.tensor("token_embd.weight"))
            .ok_or_else(|| crate::error::input("the model has no output head"))?;
        let n_kv_dim = c.n_embd_kv();
        Ok(ModelShape {
            n_layer: c.n_layer as u64,
            q_dim: (c.n_head * c.head_dim) as u64,
            layer_weight_bytes: lw,
            layer_macs_per_token: lm,
            output_weight_bytes: out.n_bytes,
            output_macs_per_token: out.n_elements(),
            kv_bytes_per_pos: 2 * c.n_layer as u64 * kv_type.row_bytes(n_kv_dim) as u64,
        })
    }

    /// Attention multiply-adds of one query token against one key row, over
    /// every layer: scores and value sums, `2 · q_dim` each layer.
    pub fn attention_macs_per_row(&self) -> u64 {
        2 * self.q_dim * self.n_layer
    }
}

/// Bytes and operations of one or more units of work.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cost {
    /// Units (passes, or turn ingests) the cost is summed over.
    pub units: u64,
    /// Forward passes.
    pub passes: u64,
    /// Tokens fed.
    pub tokens: u64,
    pub weight_bytes: u64,
    /// KV rows of the shared prefix read (once per unit).
    pub kv_shared_read_bytes: u64,
    /// KV rows private to an agent read.
    pub kv_private_read_bytes: u64,
    pub kv_write_bytes: u64,
    /// Weight multiply-adds (int8 products of quantized weights).
    pub matmul_macs: u64,
    /// Attention multiply-adds (f32).
    pub attention_macs: u64,
}

impl Cost {
    /// Every byte the unit moves.
    pub fn bytes(&self) -> u64 {
        self.weight_bytes
            + self.kv_shared_read_bytes
            + self.kv_private_read_bytes
            + self.kv_write_bytes
    }

    fn plus(&self, o: &Cost) -> Cost {
        Cost {
            units: self.units + o.units,
            passes: self.passes + o.passes,
            tokens: self.tokens + o.tokens,
            weight_bytes: self.weight_bytes + o.weight_bytes,
            kv_shared_read_bytes: self.kv_shared_read_bytes + o.kv_shared_read_bytes,
            kv_private_read_bytes: self.kv_private_read_bytes + o.kv_private_read_bytes,
            kv_write_bytes: self.kv_write_bytes + o.kv_write_bytes,
            matmul_macs: self.matmul_macs + o.matmul_macs,
            attention_macs: self.attention_macs + o.attention_macs,
        }
    }
}

/// Which roof bounds a unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Limit {
    Memory,
    Compute,
}

/// A phase's cost and its time bounds on a [`Machine`], in seconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct PhaseBound {
    #[serde(flatten)]
    pub cost: Cost,
    /// Σ bytes / bandwidth.
    pub memory_s: f64,
    /// Σ matmul MACs / int8 peak.
    pub matmul_s: f64,
    /// Σ attention MACs / f32 FMA peak.
    pub attention_s: f64,
    /// Σ over units of max(memory, matmul + attention): the phase's bound.
    pub bound_s: f64,
    /// Units bound by memory (the rest by compute).
    pub memory_bound_units: u64,
}

impl PhaseBound {
    fn add(&mut self, c: &Cost, m: &Machine) {
        let memory_s = c.bytes() as f64 / (m.read_gb_per_s * 1e9);
        let matmul_s = c.matmul_macs as f64 / (m.int8_gmacs_per_s * 1e9);
        let attention_s = c.attention_macs as f64 / (m.f32_gflops / 2.0 * 1e9);
        self.cost = self.cost.plus(c);
        self.memory_s += memory_s;
        self.matmul_s += matmul_s;
        self.attention_s += attention_s;
        let compute_s = matmul_s + attention_s;
        self.bound_s += memory_s.max(compute_s);
        if memory_s >= compute_s {
            self.memory_bound_units += c.units;
        }
    }

    /// The limit of most of its units.
    pub fn limit(&self) -> Limit {
        if 2 * self.memory_bound_units >= self.cost.units {
            Limit::Memory
        } else {
            Limit::Compute
        }
    }
}

/// What a roofline is computed for.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RooflineParams {
    pub shape: ModelShape,
    pub workload: Workload,
    /// Most tokens per forward pass (as `fak bench fleet --budget`).
    pub budget: usize,
}

/// The MODELED roofline of a fleet workload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FleetRoofline {
    pub label: String,
    #[serde(flatten)]
    pub params: RooflineParams,
    pub machine: Machine,
    pub prefix: PhaseBound,
    /// Every turn's result ingest.
    pub result_ingest: PhaseBound,
    /// Every decode step.
    pub decode: PhaseBound,
    /// The first and the last decode step (the shortest and longest contexts).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_decode_step: Option<PhaseBound>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_decode_step: Option<PhaseBound>,
    /// prefix + result ingest + decode.
    pub total_s: f64,
}

/// Rows read once per unit by a batch whose agents each attend
/// `private_rows` own rows past the `shared` prefix.
fn kv_read(s: &ModelShape, shared: u64, private_rows: u64) -> (u64, u64) {
    (
        shared * s.kv_bytes_per_pos,
        private_rows * s.kv_bytes_per_pos,
    )
}

/// The cost of the prefix: `P` tokens in `ceil(P / budget)` passes.
pub fn prefix_cost(s: &ModelShape, p: u64, budget: u64) -> Cost {
    let passes = p.div_ceil(budget);
    // Each pass reads every row up to its last token once.
    let rows_read: u64 = (1..=passes).map(|c| (c * budget).min(p)).sum();
    Cost {
        units: 1,
        passes,
        tokens: p,
        weight_bytes: passes * s.layer_weight_bytes,
        kv_shared_read_bytes: rows_read * s.kv_bytes_per_pos,
        kv_private_read_bytes: 0,
        kv_write_bytes: p * s.kv_bytes_per_pos,
        matmul_macs: p * s.layer_macs_per_token,
        // token i (0-based) attends rows 0..=i: Σ (i + 1) = P (P + 1) / 2.
        attention_macs: p * (p + 1) / 2 * s.attention_macs_per_row(),
    }
}

/// One batch of agents' tokens: what a turn's ingest or a decode step feeds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AgentBatch {
    /// Rows of the shared prefix (`P`).
    pub prefix_rows: u64,
    /// Agents in the batch (`A`).
    pub agents: u64,
    /// Tokens each agent feeds.
    pub tokens: u64,
    /// Rows each agent holds before the batch (prefix included).
    pub cached_rows: u64,
}

/// The cost of one turn's ingest `b` in passes of at most `budget` tokens.
pub fn ingest_cost(s: &ModelShape, b: &AgentBatch, budget: u64) -> Cost {
    let (p, a, n, c) = (b.prefix_rows, b.agents, b.tokens, b.cached_rows);
    let passes = (a * n).div_ceil(budget);
    let (shared, private) = kv_read(s, p, a * (c - p + n));
    Cost {
        units: 1,
        passes,
        tokens: a * n,
        weight_bytes: passes * s.layer_weight_bytes + s.output_weight_bytes,
        kv_shared_read_bytes: shared,
        kv_private_read_bytes: private,
        kv_write_bytes: a * n * s.kv_bytes_per_pos,
        matmul_macs: a * n * s.layer_macs_per_token + a * s.output_macs_per_token,
        // token i of n attends c + i + 1 rows: Σ = n·c + n (n + 1) / 2.
        attention_macs: a * (n * c + n * (n + 1) / 2) * s.attention_macs_per_row(),
    }
}

/// The cost of one decode step `b` (one token per agent, every one with logits).
pub fn decode_cost(s: &ModelShape, b: &AgentBatch) -> Cost {
    let (p, a, c) = (b.prefix_rows, b.agents, b.cached_rows);
    let (shared, private) = kv_read(s, p, a * (c + 1 - p));
    Cost {
        units: 1,
        passes: 1,
        tokens: a,
        weight_bytes: s.layer_weight_bytes + s.output_weight_bytes,
        kv_shared_read_bytes: shared,
        kv_private_read_bytes: private,
        kv_write_bytes: a * s.kv_bytes_per_pos,
        matmul_macs: a * (s.layer_macs_per_token + s.output_macs_per_token),
        attention_macs: a * (c + 1) * s.attention_macs_per_row(),
    }
}

/// The roofline of `r` on machine `m` (see the module docs).
pub fn fleet_roofline(r: &RooflineParams, m: &Machine) -> FleetRoofline {
    let s = &r.shape;
    let w = &r.workload;
    let (p, a, d, rr) = (
        w.prefix as u64,
        w.agents as u64,
        w.decode as u64,
        w.result as u64,
    );
    let budget = r.budget.max(1) as u64;
    let mut prefix = PhaseBound::default();
    prefix.add(&prefix_cost(s, p, budget), m);
    let mut ingest = PhaseBound::default();
    let mut decode = PhaseBound::default();
    let (mut first, mut last) = (None, None);
    for k in 0..w.turns as u64 {
        let (n, c) = if k == 0 {
            (rr, p)
        } else {
            (rr + 1, p + k * (rr + d) - 1)
        };
        let turn = AgentBatch {
            prefix_rows: p,
            agents: a,
            tokens: n,
            cached_rows: c,
        };
        ingest.add(&ingest_cost(s, &turn, budget), m);
        for j in 1..d {
            let step = decode_cost(
                s,
                &AgentBatch {
                    tokens: 1,
                    cached_rows: c + n + j - 1,
                    ..turn
                },
            );
            let mut one = PhaseBound::default();
            one.add(&step, m);
            first.get_or_insert(one);
            last = Some(one);
            decode.add(&step, m);
        }
    }
    FleetRoofline {
        label: MODELED.into(),
        params: *r,
        machine: m.clone(),
        total_s: prefix.bound_s + ingest.bound_s + decode.bound_s,
        prefix,
        result_ingest: ingest,
        decode,
        first_decode_step: first,
        last_decode_step: last,
    }
}

impl FleetRoofline {
    /// Human-readable table: one line per phase.
    pub fn table(&self) -> String {
        use std::fmt::Write as _;
        let w = &self.params.workload;
        let mib = |b: u64| b as f64 / (1024.0 * 1024.0);
        let g = |x: u64| x as f64 / 1e9;
        let mut out = format!(
            "MODELED roofline | P={} T={} A={} D={} R={} budget {} | {}\n",
            w.prefix,
            w.turns,
            w.agents,
            w.decode,
            w.result,
            self.params.budget,
            self.machine.line()
        );
        let _ = writeln!(
            out,
            "{:<18} {:>6} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>8}",
            "phase (MODELED)",
            "passes",
            "wt MiB",
            "kvsh MiB",
            "kvpr MiB",
            "mm GMAC",
            "att GMAC",
            "mem s",
            "mm s",
            "att s",
            "bound s",
            "limit"
        );
        let rows = [
            ("prefix", Some(&self.prefix)),
            ("result ingest", Some(&self.result_ingest)),
            ("decode", Some(&self.decode)),
            ("first decode step", self.first_decode_step.as_ref()),
            ("last decode step", self.last_decode_step.as_ref()),
        ];
        for (name, b) in rows {
            let Some(b) = b else { continue };
            let c = &b.cost;
            let _ = writeln!(
                out,
                "{:<18} {:>6} {:>9.1} {:>9.1} {:>9.1} {:>9.2} {:>9.2} {:>9.4} {:>9.4} {:>9.4} {:>9.4} {:>8}",
                name,
                c.passes,
                mib(c.weight_bytes),
                mib(c.kv_shared_read_bytes),
                mib(c.kv_private_read_bytes),
                g(c.matmul_macs),
                g(c.attention_macs),
                b.memory_s,
                b.matmul_s,
                b.attention_s,
                b.bound_s,
                match b.limit() {
                    Limit::Memory => "memory",
                    Limit::Compute => "compute",
                }
            );
        }
        let _ = writeln!(
            out,
            "total bound {:.3} s = {:.3} agent-turns/s at most (MODELED)",
            self.total_s,
            (w.agents * w.turns) as f64 / self.total_s.max(1e-12)
        );
        out
    }
}

/// What `fak project roofline` computes.
#[derive(Debug, Clone, PartialEq)]
pub struct ReportParams {
    pub model: PathBuf,
    /// Threads the machine figures are for (`None`: all cores).
    pub threads: Option<usize>,
    pub workload: Workload,
    pub budget: usize,
    pub kv_type: KvType,
    pub machine: MachineSpec,
}

/// `fak project roofline`'s report.
#[derive(Debug, Clone, Serialize)]
pub struct RooflineReport {
    pub schema: &'static str,
    pub model: String,
    pub model_sha256: String,
    pub kv_type: &'static str,
    #[serde(flatten)]
    pub roofline: FleetRoofline,
}

/// The roofline of `p`'s workload on this machine (figures read from the
/// reports given, the others measured now).
///
/// # Errors
///
/// A workload count or budget of 0, and as [`ModelShape::from_gguf`] and
/// [`MachineSpec::resolve`].
pub fn report(p: &ReportParams) -> Result<RooflineReport> {
    if !p.workload.is_nonzero() || p.budget == 0 {
        return Err(crate::error::params(
            "--prefix, --turns, --agents, --decode, --result and --budget must all be at least 1",
        ));
    }
    let shape = ModelShape::from_gguf(&p.model, p.kv_type)?;
    let machine = p.machine.resolve(threads_or_all(p.threads))?;
    Ok(RooflineReport {
        schema: SCHEMA,
        model: model_file_name(&p.model),
        model_sha256: sha256_file(&p.model)?,
        kv_type: p.kv_type.name(),
        roofline: fleet_roofline(
            &RooflineParams {
                shape,
                workload: p.workload,
                budget: p.budget,
            },
            &machine,
        ),
    })
}

#[cfg(test)]
mod tests;
