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
//!   auto: each source drafts only while its acceptance pays for the rows
//!   it adds, by the pass costs measured (spec::drafting_pays)
//! ```

use fak_kv::Tenant;
use fak_tokenizer::Tokenizer;

use super::{Live, Slot};
use crate::drafter::{DraftJob, Drafter};
use crate::request::SpecMode;
use crate::seqs::Sequences;
use crate::spec::{self, FleetIndex, PassCost, Speculative};

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
    /// Measured pass cost (for [`Speculative::Auto`]).
    pub(super) pass_cost: PassCost,
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
    /// `tokens` (`None`: not readable), at most `room`, in a decode step of
    /// `batch` requests; and where they came from: the request's prediction first, then what its
    /// grammar forces, then prompt lookup and the fleet index when the
    /// engine drafts (for a constrained request cut to what its grammar
    /// accepts). None when the request opted out, and never more than it
    /// may still generate after the token this pass samples anyway.
    pub(super) fn propose(
        &mut self,
        l: &mut Live,
        tokens: Option<&[u32]>,
        tok: Option<&Tokenizer>,
        room: usize,
        batch: usize,
    ) -> (Vec<u32>, Option<DraftSource>) {
        let none = (Vec::new(), None);
        let lookup = self.mode.lookup();
        // Draft lengths of prompt lookup and of the fleet index, each scored
        // on its own acceptance: with `auto`, a source drafts only where it
        // pays, as long as its acceptance says; one left out drifts back to
        // be tried again.
        let (mut own, mut fleet) = (0, 0);
        if let Some(p) = lookup {
            (own, fleet) = (p.max_draft, p.max_draft);
            if let Speculative::Auto(_) = self.mode {
                let fit = self.pass_cost.fit();
                for (acc, len) in [
                    (&mut l.acceptance, &mut own),
                    (&mut l.fleet_acceptance, &mut fleet),
                ] {
                    let rate = acc.rate();
                    let pays = fit.is_none_or(|(a, b)| spec::drafting_pays(a, b, batch, rate));
                    if pays {
                        *len = acc.draft_len(p.max_draft);
                    } else {
                        *len = 0;
                        acc.idle();
                    }
                }
            }
        }
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
        let k = l.pred.acceptance.draft_len(spec::LONG_DRAFT).min(max);
        if let Some((start, d)) = spec::prediction_draft(ctx, &spec.prediction, l.pred.cursor, k) {
            return (d.to_vec(), Some(DraftSource::Prediction { start }));
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
        let with = |n: usize| spec::LookupParams {
            max_draft: n.min(max),
            ..params
        };
        // A match of `max_ngram` tokens at full acceptance (a file being
        // re-emitted) earns a long draft, as a prediction does.
        let found: &[u32] = match (own > 0)
            .then(|| spec::prompt_lookup(ctx, params))
            .flatten()
        {
            Some(m) => {
                let long = own == params.max_draft && m.matched >= params.max_ngram;
                let k = if long { spec::LONG_DRAFT } else { own };
                m.draft(ctx, k.min(max))
            }
            None => &[],
        };
        let (d, source) = match found {
            [] if fleet > 0 => (
                self.fleet.draft(l.req.tenant, ctx, with(fleet)),
                DraftSource::Fleet,
            ),
            [] => return none,
            d => (d, DraftSource::Lookup),
        };
        let n = match l.constraint.as_mut() {
            Some(c) => c.valid_prefix(d),
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
