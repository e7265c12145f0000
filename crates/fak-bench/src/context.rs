//! Decode step time against context length: the measured input behind
//! the attention term of `fak project` (`fak bench model --contexts ...`).
//!
//! ```text
//!   a root sequence of LCG ids; for each context c, ascending (e.g. 64, 1024, 2048):
//!     grow the root to c positions (untimed prefill); point: kv_held_bytes = the
//!       K/V bytes of the blocks the root holds (used blocks × block bytes)
//!     fork CONTEXT_BATCH agents from it (shared blocks, as a fleet does)
//!     one untimed step, then CONTEXT_STEPS timed steps of one token per agent
//!     point: context = c + 1 + CONTEXT_STEPS / 2, step_ms = median step
//!     free the agents
//! ```
//!
//! The slope between the shortest and longest context, divided by the
//! agents per step, is what one more cached position costs one decoded
//! token when agents share their prefix and decode together: attention
//! reads every position (each shared key tile once for the agents of a
//! chunk), on all threads.

use std::time::Instant;

use fak_engine::{KvWindow, PagedKvConfig, PrefixCache, Sequences, Tenant};
use fak_model::{Model, SeqId};
use serde::{Deserialize, Serialize};

use crate::error::Result;
use crate::{appends, median, LcgIds};

/// Timed decode steps per context.
pub const CONTEXT_STEPS: usize = 8;
/// Agents forked from the shared context, decoding together.
pub const CONTEXT_BATCH: usize = 8;
/// Most tokens per forward pass while growing the root.
const UBATCH: usize = 512;
/// KV block size, tokens: a fleet's (these agents stand in for one).
const BLOCK: usize = fak_engine::FLEET_BLOCK_SIZE;

/// Median decode step time of [`CONTEXT_BATCH`] agents at one context.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ContextPoint {
    /// Cached positions each agent attends over (middle of the timed steps).
    pub context: usize,
    /// Agents decoding together (one token each per step).
    #[serde(default = "one")]
    pub batch: usize,
    /// Median step time, milliseconds.
    pub step_ms: f64,
    /// K/V bytes of the blocks the shared context held before the agents
    /// forked (used blocks × block bytes, every layer group); absent in
    /// reports from before it was measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kv_held_bytes: Option<usize>,
}

fn one() -> usize {
    1
}

/// Measures a [`ContextPoint`] at each of `contexts` (sorted,
/// deduplicated), sliding-window rows kept or dropped as `window` says;
/// see the module docs.
///
/// # Errors
///
/// Model and KV errors.
pub fn decode_at_contexts(
    model: &Model,
    contexts: &[usize],
    window: KvWindow,
) -> Result<Vec<ContextPoint>> {
    let mut cs: Vec<usize> = contexts.iter().copied().filter(|&c| c > 0).collect();
    cs.sort_unstable();
    cs.dedup();
    let Some(&last) = cs.last() else {
        return Ok(Vec::new());
    };
    let per_agent = (CONTEXT_STEPS + 1).div_ceil(BLOCK) + 1;
    let sizes = PagedKvConfig {
        block_size: BLOCK,
        n_blocks: last.div_ceil(BLOCK) + 1 + CONTEXT_BATCH * per_agent,
        kv_type: fak_model::KvType::F16,
        window,
    };
    let mut seqs = Sequences::new(model, sizes, PrefixCache::Off, UBATCH)?;
    let mut ids = LcgIds::new(model.config().n_vocab);
    let root = seqs.create(Tenant(0))?;
    let mut len = 0usize;
    let mut points = Vec::with_capacity(cs.len());
    let mut sink = 0.0f32;
    for &c in &cs {
        if len < c {
            let grow: Vec<u32> = ids.by_ref().take(c - len).collect();
            seqs.ingest(model, root, &grow)?;
            len = c;
        }
        let kv_held_bytes = Some(seqs.kv().held_bytes());
        let agents: Vec<SeqId> = (0..CONTEXT_BATCH)
            .map(|_| seqs.fork(root))
            .collect::<Result<_, _>>()?;
        let mut times = Vec::with_capacity(CONTEXT_STEPS);
        for step in 0..=CONTEXT_STEPS {
            let toks: Vec<[u32; 1]> = ids.by_ref().take(CONTEXT_BATCH).map(|t| [t]).collect();
            let items = appends(&agents, &toks);
            let t0 = Instant::now();
            seqs.step_with(model, &items, |_, row| {
                sink += row.first().copied().unwrap_or(0.0)
            })?;
            if step > 0 {
                times.push(t0.elapsed().as_secs_f64() * 1e3);
            }
        }
        for a in agents {
            seqs.free(a)?;
        }
        points.push(ContextPoint {
            context: c + 1 + CONTEXT_STEPS / 2,
            batch: CONTEXT_BATCH,
            step_ms: median(&times),
            kv_held_bytes,
        });
    }
    std::hint::black_box(sink);
    Ok(points)
}
