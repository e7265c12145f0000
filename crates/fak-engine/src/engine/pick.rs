//! One row of logits into one token: the sampler, held to the request's
//! grammar where it has one, and the log-probabilities the request asked
//! for. Plain decoding and every verified row of a draft come through
//! here, so a draft's rows are drawn exactly as plain decoding draws them.
//!
//! ```text
//!   raw logits ─► sample ─► grammar allows it? (Check::First) ─► token
//!                                   │ no, or no such check
//!                                   ▼
//!               masked copy (grammar's mask) ─► sample ─► token
//! ```

use super::text::logprobs;
use crate::constraint::{Check, ConstraintState, Ready};
use crate::error::EngineError;
use crate::request::{EngineStats, StepLogprobs};
use crate::sampling::{Logprobs, Sampler};

/// A constrained request's token: drawn from the raw logits and checked
/// against the grammar where that is exact ([`Check::First`]), else (or
/// when the check fails) drawn from the masked logits, left in `masked`
/// (see the `constraint` module).
pub(super) fn sample_constrained(
    c: &mut ConstraintState,
    sampler: &mut Sampler,
    check: Check,
    logits: &[f32],
    masked: &mut Vec<f32>,
    stats: &mut EngineStats,
) -> Result<Option<u32>, EngineError> {
    if check == Check::First {
        if let Some(t) = sampler.sample(logits) {
            if c.allows(t)? {
                stats.constraint_checks += 1;
                return Ok(Some(t));
            }
        }
    }
    masked.clear();
    masked.extend_from_slice(logits);
    c.apply(masked)?;
    stats.constraint_masks += 1;
    Ok(sampler.sample(masked))
}

/// [`sample_constrained`] with the grammar's verdict computed beforehand
/// ([`MaskMode::Overlap`]): the same draws, the check a bit test.
pub(super) fn sample_ready(
    c: &mut ConstraintState,
    ready: &Ready,
    sampler: &mut Sampler,
    check: Check,
    logits: &[f32],
    masked: &mut Vec<f32>,
    stats: &mut EngineStats,
) -> Option<u32> {
    if check == Check::First {
        if let Some(t) = sampler.sample(logits) {
            if c.allows_ready(ready, t) {
                stats.constraint_checks += 1;
                return Some(t);
            }
        }
    }
    masked.clear();
    masked.extend_from_slice(logits);
    c.apply_ready(ready, masked);
    sampler.sample(masked)
}

/// The log-probabilities of `token` a request asked for: from the masked
/// logits for a constrained request (which with log-probabilities always
/// masks, leaving them in `masked`), else from the raw ones.
pub(super) fn step_logprobs(
    live: &super::Live,
    masked: &[f32],
    logits: &[f32],
    token: u32,
) -> Option<StepLogprobs> {
    let Logprobs::Top(n) = live.req.logprobs else {
        return None;
    };
    let l = if live.constraint.is_some() {
        masked
    } else {
        logits
    };
    Some(logprobs(l, token, n))
}
