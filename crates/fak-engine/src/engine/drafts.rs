//! The drafting part of the engine: where a decoding request's draft
//! comes from each step, and the state that choice needs. The step loop
//! asks it for drafts while it plans a pass ([`Drafts::propose`],
//! [`Drafts::model_drafts`]), and tells it what each pass cost
//! (`pass_cost`), what each finished request wrote ([`Drafts::record`])
//! and which requests left ([`Drafts::release`]). It reads a request's
//! tokens and its speculation state; it never touches the KV cache, the
//! queue or the sampler, so a draft can change how fast the output comes,
//! never what it is.
//!
//! ```text
//!   per decoding request, first source that has something:
//!     prediction (the request's) ─► grammar-forced text ─► prompt lookup
//!     ─► fleet index (the tenant's recent outputs)
//!   then, for requests still without a draft, one batch of draft-model
//!   passes (model_drafts)
//!   auto: each source drafts the length whose pass makes the most tokens
//!   per second, at its per-token acceptance, by the decode passes' measured
//!   times (spec::best_draft), or nothing
//! ```

use fak_kv::Tenant;
use fak_tokenizer::Tokenizer;

use super::{Live, Slot};
use crate::drafter::{DraftJob, Drafter};
use crate::request::SpecMode;
use crate::seqs::Sequences;
use crate::spec::{
    self, Acceptance, DecodeCost, DraftAsk, DraftChoice, FleetIndex, PassCost, PassSoFar,
    Speculative,
};

/// Where a draft came from (for the request's prediction counters).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum DraftSource {
    /// The request's prediction, starting at this position in it.
    Prediction { start: usize },
    /// Prompt lookup over the sequence's own context.
    Lookup,
    /// The tenant's recent outputs (the fleet index).
    Fleet,
    /// Text the request's grammar forces next.
    Grammar,
    /// The draft model.
    Model,
}

/// The engine's drafting state.
pub(super) struct Drafts<'m> {
    /// Whether decode items carry drafts to verify, and from what.
    pub(super) mode: Speculative,
    /// A sequence's context, gathered for a draft lookup (reused).
    context: Vec<u32>,
    /// Measured pass cost, a line through every pass (for
    /// [`Speculative::Auto`] until `decode_cost` has the rows it needs).
    pub(super) pass_cost: PassCost,
    /// Measured decode passes by rows (for [`Speculative::Auto`]).
    pub(super) decode_cost: DecodeCost,
    /// Recent outputs per tenant, a draft source.
    fleet: FleetIndex,
    /// The draft model, when one is set.
    pub(super) model: Option<Drafter<'m>>,
}

impl<'m> Drafts<'m> {
    /// No speculation, nothing measured.
    pub(super) fn new() -> Drafts<'m> {
        Drafts {
            mode: Speculative::Off,
            context: Vec::new(),
            pass_cost: PassCost::default(),
            decode_cost: DecodeCost::default(),
            fleet: FleetIndex::default(),
            model: None,
        }
    }

    /// Records a finished request's output for its tenant's fleet index.
    pub(super) fn record(&mut self, tenant: Tenant, generated: &[u32]) {
        self.fleet.record(tenant, generated);
    }

    /// Drops what the draft model keeps for the request in `slot`.
    pub(super) fn release(&mut self, slot: u32) {
        if let Some(d) = self.model.as_mut() {
            d.release(slot);
        }
    }

    /// Draft tokens for the decoding request `l`, whose sequence holds
    /// `tokens` (`None`: not readable), at most `room`, added to the decode
    /// pass `pass` (which the draft is added to); and where they came
    /// from: the request's prediction first, then what its grammar forces,
    /// then prompt lookup and the fleet index when the engine drafts (for a
    /// constrained request cut to what its grammar accepts). None when the
    /// request opted out, and never more than it may still generate after
    /// the token this pass samples anyway.
    pub(super) fn propose(
        &mut self,
        l: &mut Live,
        tokens: Option<&[u32]>,
        tok: Option<&Tokenizer>,
        room: usize,
        pass: &mut PassSoFar,
    ) -> (Vec<u32>, Option<DraftSource>) {
        let (d, source) = self.find(l, tokens, tok, room, *pass);
        if let Some(source) = source.filter(|_| !d.is_empty()) {
            let kept = match source {
                DraftSource::Prediction { .. } => l.pred.acceptance.expected(d.len()),
                DraftSource::Lookup => l.acceptance.expected(d.len()),
                DraftSource::Fleet => l.fleet_acceptance.expected(d.len()),
                DraftSource::Model => l.model_acceptance.expected(d.len()),
                DraftSource::Grammar => d.len() as f64,
            };
            pass.add(d.len(), kept);
        }
        (d, source)
    }

    /// [`Drafts::propose`]'s draft.
    fn find(
        &mut self,
        l: &mut Live,
        tokens: Option<&[u32]>,
        tok: Option<&Tokenizer>,
        room: usize,
        pass: PassSoFar,
    ) -> (Vec<u32>, Option<DraftSource>) {
        let none = (Vec::new(), None);
        let lookup = self.mode.lookup();
        let grammar = self.mode != Speculative::Off;
        let spec = &l.req.speculation;
        if spec.mode == SpecMode::Off
            || (lookup.is_none() && spec.prediction.is_empty() && !grammar)
        {
            return none;
        }
        let Some(unfed) = l.unfed else {
            return none;
        };
        let left = l.max_tokens.saturating_sub(l.generated.len() + 1);
        let max = room.min(left);
        if max == 0 {
            return none;
        }
        let Some(tokens) = tokens else {
            return none;
        };
        let ctx = &mut self.context;
        ctx.clear();
        ctx.extend_from_slice(tokens);
        ctx.push(unfed);
        if !spec.prediction.is_empty() {
            let k = l.pred.acceptance.draft_len(spec::LONG_DRAFT).min(max);
            let slope = self.pass_cost.fit().map(|(_, b)| b);
            let cost = (&self.decode_cost, slope);
            let k = prediction_len(cost, &mut l.pred.acceptance, k, pass);
            let found = spec::prediction_draft(ctx, &spec.prediction, l.pred.cursor, k);
            if let Some((start, d)) = found.filter(|(_, d)| !d.is_empty()) {
                return (d.to_vec(), Some(DraftSource::Prediction { start }));
            }
        }
        // The grammar has already taken the unfed token (it was accepted).
        if let (true, Some(c), Some(tok)) = (grammar, l.constraint.as_mut(), tok) {
            let d = c.forced(tok, spec::LONG_DRAFT.min(max));
            if !d.is_empty() {
                return (d, Some(DraftSource::Grammar));
            }
        }
        let Some(params) = lookup else {
            return none;
        };
        let auto = matches!(self.mode, Speculative::Auto(_));
        let length = Length {
            cost: &self.decode_cost,
            fit: self.pass_cost.fit(),
            pass,
            auto,
            max_draft: params.max_draft,
        };
        // Prompt lookup; a match of `max_ngram` tokens (a file being
        // re-emitted) may earn a long draft, as a prediction does.
        let mut found: &[u32] = &[];
        if let Some(m) = spec::prompt_lookup(ctx, params) {
            let long = m.matched >= params.max_ngram;
            let cap = m.draft(ctx, max).len();
            let n = length.choose(&mut l.acceptance, cap, long);
            found = m.draft(ctx, n);
        }
        let (d, source) = if found.is_empty() {
            let n = length.choose(&mut l.fleet_acceptance, max, false);
            if n == 0 {
                return none;
            }
            let with = spec::LookupParams {
                max_draft: n,
                ..params
            };
            let d = self.fleet.draft(l.req.tenant, ctx, with).to_vec();
            (d, DraftSource::Fleet)
        } else {
            (found.to_vec(), DraftSource::Lookup)
        };
        let n = match l.constraint.as_mut() {
            Some(c) => c.valid_prefix(&d),
            None => d.len(),
        };
        if n == 0 {
            return none;
        }
        (d[..n].to_vec(), Some(source))
    }

    /// Draft-model drafts for the chosen decoding requests that have no
    /// draft yet, within `spare` tokens: all of them in the same few draft
    /// passes. [`Speculative::Auto`] drafts for a sequence only while
    /// [`model_drafting_pays`] says so at its acceptance.
    ///
    /// [`Speculative::Auto`]: crate::spec::Speculative::Auto
    /// [`model_drafting_pays`]: spec::model_drafting_pays
    pub(super) fn model_drafts(
        &mut self,
        slots: &mut [Slot],
        seqs: &Sequences,
        chosen: &[u32],
        drafts: &mut [(Vec<u32>, Option<DraftSource>)],
        mut spare: usize,
    ) {
        let auto = match self.mode {
            Speculative::Draft => false,
            Speculative::Auto(_) => true,
            _ => return,
        };
        let Some(drafter) = self.model.as_mut() else {
            return;
        };
        let batch = chosen.len();
        let target = self.pass_cost.fit();
        let cost = drafter.cost.per_token();
        let max_draft = drafter.params.max_draft;
        let mut jobs = Vec::new();
        let mut at = Vec::new();
        for (k, &slot) in chosen.iter().enumerate() {
            if spare == 0 {
                break;
            }
            if drafts.get(k).is_none_or(|d| !d.0.is_empty()) {
                continue;
            }
            let generation = slots[slot as usize].generation;
            let Some(l) = slots[slot as usize].live.as_mut() else {
                continue;
            };
            if l.req.speculation.mode == SpecMode::Off {
                continue;
            }
            let (Some(seq), Some(unfed)) = (l.seq, l.unfed) else {
                continue;
            };
            if auto {
                let rate = l.model_acceptance.rate();
                let pays = target.is_none_or(|t| spec::model_drafting_pays(t, cost, batch, rate));
                if !pays {
                    l.model_acceptance.idle();
                    continue;
                }
            }
            let left = l.max_tokens.saturating_sub(l.generated.len() + 1);
            let max = l.model_acceptance.draft_len(max_draft).min(left).min(spare);
            let Ok(context) = seqs.tokens(seq) else {
                continue;
            };
            if max == 0 {
                continue;
            }
            spare -= max;
            jobs.push(DraftJob {
                slot,
                generation,
                tenant: l.req.tenant,
                context,
                unfed,
                max,
                out: Vec::new(),
            });
            at.push(k);
        }
        if jobs.is_empty() {
            return;
        }
        drafter.draft(&mut jobs);
        for (job, k) in jobs.into_iter().zip(at) {
            let mut d = job.out;
            let constraint = slots[job.slot as usize]
                .live
                .as_mut()
                .and_then(|l| l.constraint.as_mut());
            if let Some(c) = constraint {
                let n = c.valid_prefix(&d);
                d.truncate(n);
            }
            if let (false, Some(slot)) = (d.is_empty(), drafts.get_mut(k)) {
                *slot = (d, Some(DraftSource::Model));
            }
        }
    }
}

/// How long a lookup or fleet draft may be, from one source's acceptance
/// and what passes cost.
struct Length<'c> {
    cost: &'c DecodeCost,
    /// The line through every pass, `(a, b)`.
    fit: Option<(f64, f64)>,
    /// The decode pass the draft joins.
    pass: PassSoFar,
    /// [`Speculative::Auto`]: draft where it pays; else always.
    auto: bool,
    /// The lookup's usual draft length.
    max_draft: usize,
}

/// How many of a prediction's next `k` tokens (the length its acceptance
/// asks for) to draft: once the decode passes' rows are timed, the length
/// up to `k` whose pass makes the most tokens per second at the
/// prediction's chances, or none where plain decoding is faster (a
/// prediction the model does not follow then costs nothing); `k` until
/// then. Whatever `--speculative` says: the request asked for its
/// prediction, and drafting it can only change the speed. `cost`: the
/// timed passes and the slope to extrapolate them with (as
/// [`spec::best_draft`]).
fn prediction_len(
    (cost, slope): (&DecodeCost, Option<f64>),
    acc: &mut Acceptance,
    k: usize,
    pass: PassSoFar,
) -> usize {
    if k == 0 {
        return 0;
    }
    let ask = DraftAsk {
        pass,
        acceptance: acc,
        max: k,
    };
    match spec::best_draft(cost, slope, ask) {
        DraftChoice::Draft(n) => n,
        DraftChoice::Plain => {
            acc.idle();
            0
        }
        DraftChoice::Unmeasured => k,
    }
}

impl Length<'_> {
    /// Tokens to draft (0: none) for a source accepted as `acc` measures,
    /// of at most `cap` available; `long`: the draft continues a match of
    /// the lookup's full length, which may earn [`spec::LONG_DRAFT`]
    /// tokens. A source that does not pay drafts nothing and idles.
    fn choose(&self, acc: &mut Acceptance, cap: usize, long: bool) -> usize {
        let most = if long {
            spec::LONG_DRAFT
        } else {
            self.max_draft
        }
        .min(cap);
        if !self.auto {
            return most;
        }
        let slope = self.fit.map(|(_, b)| b);
        let ask = DraftAsk {
            pass: self.pass,
            acceptance: acc,
            max: most,
        };
        let choice = spec::best_draft(self.cost, slope, ask);
        match choice {
            DraftChoice::Draft(n) => n,
            DraftChoice::Plain => {
                acc.idle();
                0
            }
            DraftChoice::Unmeasured => {
                // Until the rows are timed: the line through every pass
                // and a length by the acceptance rate (try it with no line).
                let rate = acc.rate();
                let batch = self.pass.rows;
                let pays = self
                    .fit
                    .is_none_or(|(a, b)| spec::drafting_pays(a, b, batch, rate));
                if !pays {
                    acc.idle();
                    return 0;
                }
                let n = acc.draft_len(self.max_draft);
                if long && n == self.max_draft {
                    most
                } else {
                    n.min(most)
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A prediction the model does not follow (SmolLM2-135M re-emitting a
    /// file it does not copy: 9% of the prediction's tokens kept) cost
    /// plain decoding a fifth of its speed under `--speculative off`,
    /// where its drafts had no cost model. Once the passes are timed, such
    /// a prediction drafts nothing, a followed one its whole length, and
    /// until then the length its acceptance asks for.
    #[test]
    fn a_prediction_drafts_only_where_its_pass_pays() {
        // SmolLM2-135M Q8_0 on a Zen 5: one row 4.2 ms, 3 rows 4.96, 8
        // rows 6.97.
        let mut cost = DecodeCost::default();
        for (n, t) in [(1, 4.2), (3, 4.96), (8, 6.97)] {
            cost.observe(n, t * 1e-3, 0.0, 0.0);
        }
        let pass = PassSoFar::plain(1, 0.0);
        let mut missed = Acceptance::default();
        for _ in 0..50 {
            missed.record(8, 0);
        }
        assert_eq!(prediction_len((&cost, None), &mut missed, 8, pass), 0);
        let mut followed = Acceptance::default();
        for _ in 0..50 {
            followed.record(8, 8);
        }
        assert_eq!(prediction_len((&cost, None), &mut followed, 8, pass), 8);
        let untimed = DecodeCost::default();
        assert_eq!(prediction_len((&untimed, None), &mut missed, 3, pass), 3);
        assert_eq!(prediction_len((&cost, None), &mut followed, 0, pass), 0);
    }
}
