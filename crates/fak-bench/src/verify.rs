//! `fak bench verify`: what verifying a draft costs next to a plain
//! decode step, the measured bound of speculative decoding on a machine.
//!
//! A verifying pass appends the last sampled token and `d` draft tokens
//! to one sequence and wants logits after every one of them. If all `d`
//! are accepted, the pass makes `d + 1` tokens; a plain step makes one.
//! So no draft source, however good, can make decoding faster than
//!
//! ```text
//!   bound(n) = n · t(1) / t(n)        n = d + 1 tokens in the pass, t(n) its time
//! ```
//!
//! and at a per-token acceptance `r` (each draft token kept with
//! probability `r` while the ones before it were), the expected speedup
//! of a draft of `d` is (MODELED from the measured `t`):
//!
//! ```text
//!   E(d) = 1 + r + r² + … + r^d = (1 − r^(d+1)) / (1 − r)
//!   speedup(d) = E(d) · t(1) / t(d + 1)
//! ```
//!
//! The protocol runs the engine's own path (`Sequences` over the paged
//! cache, `Rows::Every`, greedy argmax of every row as verification does):
//!
//! ```text
//!   root: `context` LCG ids, untimed; one agent forked from it, one
//!   untimed 1-token step (its tail block becomes its own)
//!   round r = 0 (warm-up, discarded), 1..=reps:
//!     for each width n (order rotated by r):
//!       time step(agent, n LCG ids, logits after every id)
//!       truncate the agent back (untimed), as a rejected draft is
//!   t(n) = median over the measured rounds
//! ```
//!
//! Weight bytes (every `blk.*` matrix and the output head) over `t(1)` is
//! the read bandwidth a plain step reaches: compare `fak bench bandwidth`.
//! Each width also reports the time its passes spent in attention (the
//! forward pass's own phase clock), which grows with the context.

use std::time::Instant;

use fak_engine::{Append, PagedKvConfig, PrefixCache, Rows, Sequences, Tenant};
use fak_model::{KvType, LogitsWanted};
use serde::Serialize;

use crate::error::{params, Result};
use crate::roofline::ModelShape;
use crate::{median, LcgIds, ModelSpec, RunHeader};

/// Schema tag of [`Report`].
pub const SCHEMA: &str = "fak-bench-verify/1";
/// Pass widths measured by default: a plain step, and drafts of 1..=15.
pub const DEFAULT_WIDTHS: [usize; 9] = [1, 2, 3, 4, 5, 6, 9, 12, 16];
/// Most tokens in one pass (the engine's prefill chunk).
const MAX_WIDTH: usize = 512;

/// What `fak bench verify` measures.
#[derive(Debug, Clone, PartialEq)]
pub struct Params {
    pub model: ModelSpec,
    /// Cached positions before the measured passes (at least 1).
    pub context: usize,
    /// Tokens per measured pass; 1 is always added.
    pub widths: Vec<usize>,
    /// Measured rounds (after one warm-up round), at least 1.
    pub reps: usize,
    /// Per-token acceptance rates to model the best draft length for,
    /// each in 0..=1.
    pub acceptance: Vec<f64>,
}

/// One pass width's result.
#[derive(Debug, Clone, Serialize)]
pub struct Width {
    /// Tokens in the pass (`d + 1` for a draft of `d`).
    pub tokens: usize,
    /// Median pass time, milliseconds.
    pub ms: f64,
    /// Every measured round's pass time, milliseconds.
    pub ms_reps: Vec<f64>,
    /// Median time in attention (K/V writes, scores, softmax, value sums)
    /// within the pass, milliseconds; the rest is weight products and the
    /// small per-token operations.
    pub attention_ms: f64,
    /// `t(n) / t(1)`.
    pub cost: f64,
    /// `n · t(1) / t(n)`: the speedup if every draft token is accepted.
    pub bound: f64,
}

/// The best draft length at one acceptance rate (MODELED from the
/// measured widths).
#[derive(Debug, Clone, Serialize)]
pub struct Modeled {
    /// Per-token acceptance rate.
    pub acceptance: f64,
    /// Draft tokens of the best measured width.
    pub draft: usize,
    /// Expected tokens made per pass at that draft length.
    pub tokens_per_pass: f64,
    /// Expected speedup over plain decoding.
    pub speedup: f64,
}

/// The JSON report.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    #[serde(flatten)]
    pub header: RunHeader,
    pub reps: usize,
    pub context: usize,
    /// Bytes of the weights one pass reads (every `blk.*` matrix and the
    /// output head).
    pub weight_bytes: u64,
    /// `weight_bytes / t(1)`, GB/s: the read rate of a plain step.
    pub plain_step_gbs: f64,
    pub widths: Vec<Width>,
    /// The highest `bound` over the measured widths.
    pub best_bound: f64,
    /// MODELED: the best draft length at each `--acceptance` rate.
    pub modeled: Vec<Modeled>,
}

/// Runs the protocol (see the module docs), with a progress bar on stderr.
///
/// # Errors
///
/// `reps` or `context` of 0, a width of 0 or above 512, an acceptance
/// outside 0..=1; loading the model; model and KV errors.
pub fn run(p: &Params) -> Result<Report> {
    if p.reps == 0 {
        return Err(params("--reps must be at least 1"));
    }
    if p.context == 0 {
        return Err(params("--context must be at least 1"));
    }
    if let Some(&w) = p.widths.iter().find(|&&w| w == 0 || w > MAX_WIDTH) {
        return Err(params(format!("--widths: {w} is not in 1..={MAX_WIDTH}")));
    }
    if let Some(&r) = p.acceptance.iter().find(|r| !(0.0..=1.0).contains(*r)) {
        return Err(params(format!("--acceptance: {r} is not in 0..=1")));
    }
    let mut widths = p.widths.clone();
    widths.push(1);
    widths.sort_unstable();
    widths.dedup();

    let model = p.model.load()?;
    let shape = ModelShape::from_gguf(&p.model.path, KvType::F16)?;
    let weight_bytes = shape.layer_weight_bytes + shape.output_weight_bytes;
    let max_w = widths.last().copied().unwrap_or(1);
    let block = fak_engine::DEFAULT_BLOCK_SIZE;
    let sizes = PagedKvConfig::for_sequences(block, 1, p.context + 1 + max_w)
        .with_window(fak_engine::KvWindow::Keep);
    // Room for the agent's own tail block beside the shared root.
    let sizes = PagedKvConfig {
        n_blocks: sizes.n_blocks + 2,
        ..sizes
    };
    let mut seqs = Sequences::new(&model, sizes, PrefixCache::Off, MAX_WIDTH)?;
    let mut ids = LcgIds::new(model.config().n_vocab);
    let root = seqs.create(Tenant(0))?;
    let grow: Vec<u32> = ids.by_ref().take(p.context).collect();
    seqs.ingest(&model, root, &grow)?;
    let agent = seqs.fork(root)?;
    let first: Vec<u32> = ids.by_ref().take(1).collect();
    seqs.step(&model, &[append(agent, &first)])?;
    let base = p.context + 1;

    let bar = crate::progress_bar((p.reps + 1) * widths.len(), "verify", "passes ")?;
    let mut times: Vec<Vec<f64>> = vec![Vec::with_capacity(p.reps); widths.len()];
    let mut attention: Vec<Vec<f64>> = vec![Vec::with_capacity(p.reps); widths.len()];
    let mut sink = 0usize;
    for round in 0..=p.reps {
        for k in 0..widths.len() {
            let i = (k + round) % widths.len();
            let n = widths[i];
            bar.set_message(format!("width {n}"));
            let toks: Vec<u32> = ids.by_ref().take(n).collect();
            let before = seqs.forward_times().all().attention;
            let t0 = Instant::now();
            seqs.step_rows_with(
                &model,
                &[append(agent, &toks)],
                &[Rows::Every],
                |_, _, row| {
                    sink = sink.wrapping_add(fak_engine::argmax(row).unwrap_or(0) as usize);
                },
            )?;
            let ms = t0.elapsed().as_secs_f64() * 1e3;
            let attn = seqs.forward_times().all().attention.saturating_sub(before);
            seqs.truncate(agent, base)?;
            if round > 0 {
                times[i].push(ms);
                attention[i].push(attn.as_secs_f64() * 1e3);
            }
            bar.inc(1);
        }
    }
    bar.finish_and_clear();
    std::hint::black_box(sink);

    let t1 = median(&times[0]);
    let widths: Vec<Width> = widths
        .iter()
        .zip(times)
        .zip(attention)
        .map(|((&n, ms_reps), attn)| {
            let ms = median(&ms_reps);
            let cost = ms / t1.max(1e-12);
            Width {
                tokens: n,
                ms,
                ms_reps,
                attention_ms: median(&attn),
                cost,
                bound: n as f64 / cost.max(1e-12),
            }
        })
        .collect();
    let best_bound = widths.iter().map(|w| w.bound).fold(0.0, f64::max);
    let modeled = p
        .acceptance
        .iter()
        .map(|&r| best_draft(&widths, r))
        .collect();
    Ok(Report {
        header: RunHeader::model_run(SCHEMA, &p.model.path, &model)?,
        reps: p.reps,
        context: p.context,
        weight_bytes,
        plain_step_gbs: weight_bytes as f64 / (t1.max(1e-12) * 1e-3) / 1e9,
        widths,
        best_bound,
        modeled,
    })
}

fn append(seq: fak_model::SeqId, ids: &[u32]) -> Append<'_> {
    Append {
        seq,
        ids,
        logits: LogitsWanted::Yes,
    }
}

/// Expected tokens per pass of a draft of `d` at per-token acceptance `r`:
/// `1 + r + … + r^d`.
pub fn tokens_per_pass(d: usize, r: f64) -> f64 {
    (0..=d).map(|i| r.powi(i as i32)).sum()
}

/// The width that maximizes `tokens_per_pass(n − 1, r) / cost(n)`.
fn best_draft(widths: &[Width], r: f64) -> Modeled {
    widths
        .iter()
        .map(|w| {
            let e = tokens_per_pass(w.tokens - 1, r);
            Modeled {
                acceptance: r,
                draft: w.tokens - 1,
                tokens_per_pass: e,
                speedup: e / w.cost.max(1e-12),
            }
        })
        .fold(None, |best: Option<Modeled>, m| match best {
            Some(b) if b.speedup >= m.speedup => Some(b),
            _ => Some(m),
        })
        .unwrap_or(Modeled {
            acceptance: r,
            draft: 0,
            tokens_per_pass: 1.0,
            speedup: 1.0,
        })
}

impl Report {
    /// Human-readable summary.
    pub fn table(&self) -> String {
        let h = &self.header;
        let mut s = format!(
            "{} | isa {} | {} threads | {} | context {} | reps {}\n\
             plain step reads {:.2} GB of weights at {:.1} GB/s\n",
            h.cpu,
            h.isa.as_deref().unwrap_or_default(),
            h.threads,
            h.model.as_deref().unwrap_or_default(),
            self.context,
            self.reps,
            self.weight_bytes as f64 / 1e9,
            self.plain_step_gbs,
        );
        s.push_str(&format!(
            "{:>6} {:>10} {:>14} {:>10} {:>22}\n",
            "tokens", "pass ms", "attention ms", "t(n)/t(1)", "bound n·t(1)/t(n)"
        ));
        for w in &self.widths {
            s.push_str(&format!(
                "{:>6} {:>10.2} {:>14.2} {:>10.2} {:>21.2}×\n",
                w.tokens, w.ms, w.attention_ms, w.cost, w.bound
            ));
        }
        s.push_str(&format!(
            "no draft can beat {:.2}× plain decoding here\n",
            self.best_bound
        ));
        for m in &self.modeled {
            s.push_str(&format!(
                "MODELED at acceptance {:.2}: best draft {} → {:.2} tokens/pass, {:.2}× plain\n",
                m.acceptance, m.draft, m.tokens_per_pass, m.speedup
            ));
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_per_pass_is_the_geometric_sum() {
        assert_eq!(tokens_per_pass(0, 0.5), 1.0);
        assert_eq!(tokens_per_pass(3, 1.0), 4.0);
        assert!((tokens_per_pass(2, 0.5) - 1.75).abs() < 1e-12);
        assert_eq!(tokens_per_pass(8, 0.0), 1.0);
    }

    fn width(tokens: usize, cost: f64) -> Width {
        Width {
            tokens,
            ms: cost,
            ms_reps: vec![cost],
            attention_ms: 0.0,
            cost,
            bound: tokens as f64 / cost,
        }
    }

    /// A flat cost picks the longest draft at full acceptance; a steep
    /// one picks plain decoding at low acceptance.
    #[test]
    fn best_draft_follows_cost_and_rate() {
        let ws = [width(1, 1.0), width(2, 1.1), width(9, 1.5)];
        let m = best_draft(&ws, 1.0);
        assert_eq!(m.draft, 8);
        assert!((m.speedup - 6.0).abs() < 1e-9);
        let steep = [width(1, 1.0), width(2, 1.9), width(9, 8.0)];
        let m = best_draft(&steep, 0.3);
        assert_eq!(m.draft, 0);
        assert_eq!(m.speedup, 1.0);
    }

    #[test]
    fn bad_params_are_refused() {
        let spec = ModelSpec {
            path: "missing.gguf".into(),
            threads: None,
        };
        let ok = Params {
            model: spec,
            context: 16,
            widths: vec![1, 4],
            reps: 1,
            acceptance: vec![0.9],
        };
        for bad in [
            Params {
                reps: 0,
                ..ok.clone()
            },
            Params {
                context: 0,
                ..ok.clone()
            },
            Params {
                widths: vec![0],
                ..ok.clone()
            },
            Params {
                widths: vec![513],
                ..ok.clone()
            },
            Params {
                acceptance: vec![1.5],
                ..ok.clone()
            },
        ] {
            assert!(matches!(run(&bad), Err(crate::Error::Params(_))));
        }
    }

    /// The protocol runs on a small model: every width measured, the
    /// plain width first with cost 1.
    #[test]
    fn runs_on_a_small_model() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../models/smollm2-135m-instruct-q4_1.gguf");
        let r = run(&Params {
            model: ModelSpec {
                path,
                threads: Some(2),
            },
            context: 70,
            widths: vec![3, 2],
            reps: 2,
            acceptance: vec![0.8],
        })
        .unwrap();
        let ns: Vec<usize> = r.widths.iter().map(|w| w.tokens).collect();
        assert_eq!(ns, [1, 2, 3]);
        assert_eq!(r.widths[0].cost, 1.0);
        assert!(r.widths.iter().all(|w| w.ms_reps.len() == 2 && w.ms > 0.0));
        assert!(r
            .widths
            .iter()
            .all(|w| w.attention_ms > 0.0 && w.attention_ms < w.ms));
        assert!(r.best_bound >= 1.0);
        assert_eq!(r.modeled.len(), 1);
        assert!(r.table().contains("no draft can beat"));
    }
}
