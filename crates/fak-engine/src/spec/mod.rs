//! Draft sources for speculative decoding: tokens a sequence is likely to
//! write next, proposed so that one forward pass can verify several.
//!
//! Prompt lookup: agents re-emit what they have read (a file they edit, a
//! tool result they quote, a call shape they wrote before), so the tokens
//! that followed an earlier occurrence of the sequence's last few tokens
//! are a cheap, often right guess.
//!
//! ```text
//!   context:  … a b c X Y Z … a b c ▮          (▮: the next token to write)
//!                   └────┘ earlier occurrence of the suffix "a b c"
//!   draft:           X Y Z                      (at most k tokens, taken from
//!                                                after the earlier occurrence that
//!                                                matches the most tokens, the
//!                                                latest of equals: `longest_match`)
//! ```
//!
//! A draft only proposes: verification samples every position from the
//! model's own logits and keeps a draft token only while it equals the
//! sampled one, so a draft can make decoding faster, never different.
//! Whether a draft is worth its rows is [`cost`]'s question.

mod cost;

pub use cost::{
    best_draft, drafting_pays, model_drafting_pays, Acceptance, DecodeCost, DraftAsk, DraftChoice,
    PassCost, PassSoFar,
};

/// Whether the engine drafts tokens to verify, and from what.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Speculative {
    /// Plain decoding: one token per sequence per pass.
    #[default]
    Off,
    /// Drafts from the sequence's own context ([`prompt_lookup`]), always.
    Lookup(LookupParams),
    /// Prompt lookup and the fleet index where they pay: each sequence
    /// drafts the length that makes its pass the most tokens per second
    /// (`best_draft`), by the decode passes' times the engine measures
    /// (`DecodeCost`) and the per-token acceptance its drafts have had
    /// (`Acceptance::per_token`). With a draft model, it drafts
    /// for the sequences lookup finds nothing for, where
    /// `model_drafting_pays` says so.
    Auto(LookupParams),
    /// The draft model only (`Engine::set_draft_model`), for every
    /// decoding sequence; requests' predictions and grammars still draft.
    Draft,
}

impl Speculative {
    /// The lookup parameters, unless speculation is off.
    pub fn lookup(self) -> Option<LookupParams> {
        match self {
            Speculative::Lookup(p) | Speculative::Auto(p) => Some(p),
            Speculative::Off | Speculative::Draft => None,
        }
    }
}

/// Tokens a verifying pass of one sequence takes for little more than
/// the cost of its first: the token tile of the AVX-512 VNNI k-quant
/// kernels (two tiles of the AVX2 ones). A pass of one token more starts
/// another tile. On a Zen 5 (`fak bench verify`, Qwen2.5-Coder-1.5B
/// Q4_K_M, 2 threads), passes of 8 and 9 tokens cost 2.46 and 3.31 plain
/// steps. So drafts stop one short of a tile: the sampled token and the
/// draft fill it.
pub const PASS_TILE: usize = 8;

/// How prompt lookup searches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LookupParams {
    /// Fewest tokens a match must have: the context's last `min_ngram`
    /// tokens must occur earlier.
    pub min_ngram: usize,
    /// Most tokens a match is measured over. Of several occurrences, the
    /// one matching the context's end for the most tokens (up to this)
    /// wins; a match this long also earns a long draft (`spec::LONG_DRAFT`, two tiles).
    pub max_ngram: usize,
    /// Most draft tokens proposed.
    pub max_draft: usize,
}

impl Default for LookupParams {
    fn default() -> LookupParams {
        LookupParams {
            min_ngram: 2,
            max_ngram: 16,
            max_draft: PASS_TILE - 1,
        }
    }
}

/// Where a lookup found a draft: the continuation starts at `from` in the
/// searched tokens, and the `matched` tokens before it equal the end of
/// the context.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Match {
    pub from: usize,
    pub matched: usize,
}

impl Match {
    /// The draft of at most `k` tokens in `hay`, the tokens searched.
    pub fn draft(self, hay: &[u32], k: usize) -> &[u32] {
        let from = self.from.min(hay.len());
        &hay[from..(from + k).min(hay.len())]
    }
}

/// The occurrence in `hay` that matches the end of `context` for the most
/// tokens: the latest end `from < hay.len()` (so a continuation follows)
/// where `hay[from - m..from] == context[context.len() - m..]` for the
/// largest `m` in `min..=max` (matches counted up to `max`), the latest of
/// equals. `hay` may be `context` itself: `from` stops short of its end,
/// so the context's own end never matches itself.
///
/// ```text
///   hay:      … p q a b c X …   … z a b c Y …      (a b c: the context's end)
///   context:  … p q a b c                         first: 5 tokens matched
///   the later "z a b c" matches 3: the longer match wins, draft X …
/// ```
///
/// The latest-of-the-longest rule is what a re-emitted file needs: a
/// short suffix such as `    }\n` occurs all over a source file, and its
/// latest occurrence is usually the wrong place to copy from; the longest
/// match pins the line being copied.
///
/// Costs one pass over `hay` plus up to `max` comparisons per occurrence
/// of the context's last `min` tokens.
pub fn longest_match(hay: &[u32], context: &[u32], min: usize, max: usize) -> Option<Match> {
    let len = context.len();
    if min == 0 || len < min || hay.len() <= min {
        return None;
    }
    let max = max.max(min);
    let tail = &context[len - min..];
    let mut best: Option<Match> = None;
    for from in (min..hay.len()).rev() {
        if &hay[from - min..from] != tail {
            continue;
        }
        let mut m = min;
        while m < max && m < from && m < len && hay[from - m - 1] == context[len - m - 1] {
            m += 1;
        }
        if best.is_none_or(|b| m > b.matched) {
            best = Some(Match { from, matched: m });
            if m == max {
                break;
            }
        }
    }
    best
}

/// Where prompt lookup finds the draft after `context` (the sequence's
/// tokens so far, prompt and output): the earlier occurrence that
/// [`longest_match`] picks, at least `min_ngram` tokens matched. Take the
/// draft with [`Match::draft`] on `context`. `None` when no suffix of
/// `min_ngram` tokens occurs earlier.
pub fn prompt_lookup(context: &[u32], p: LookupParams) -> Option<Match> {
    longest_match(context, context, p.min_ngram, p.max_ngram)
}

/// Recent outputs of each tenant's requests: agents of one fleet write the
/// same tool-call shapes and near-identical turns, so a sequence's last
/// few tokens, found in another request's output, often continue the same
/// way there.
///
/// ```text
///   tenant 7:  [out 1] [out 2] … [out k]        newest last; at most
///              ▲ looked up newest first          OUTPUTS_PER_TENANT outputs and
///   tenant 9:  [out 1] …                          TOKENS_PER_TENANT tokens each
/// ```
///
/// Bounded: per tenant by outputs and tokens (oldest dropped first), and
/// by tenants (the least recently written tenant dropped first). A lookup
/// only ever reads the asking request's own tenant.
#[derive(Debug, Default)]
pub struct FleetIndex {
    tenants: std::collections::HashMap<fak_kv::Tenant, TenantOutputs>,
    /// Write counter (tenant recency).
    clock: u64,
}

#[derive(Debug, Default)]
struct TenantOutputs {
    outputs: std::collections::VecDeque<Vec<u32>>,
    tokens: usize,
    written: u64,
}

/// Outputs kept per tenant.
pub const OUTPUTS_PER_TENANT: usize = 64;
/// Tokens kept per tenant.
pub const TOKENS_PER_TENANT: usize = 16 * 1024;
/// Tenants kept.
pub const FLEET_TENANTS: usize = 256;
/// Outputs shorter than this are not kept (nothing to continue).
const MIN_OUTPUT: usize = 4;

impl FleetIndex {
    /// Records a finished request's output for its tenant.
    pub fn record(&mut self, tenant: fak_kv::Tenant, output: &[u32]) {
        if output.len() < MIN_OUTPUT {
            return;
        }
        self.clock += 1;
        if !self.tenants.contains_key(&tenant) && self.tenants.len() >= FLEET_TENANTS {
            if let Some(old) = self
                .tenants
                .iter()
                .min_by_key(|(_, t)| t.written)
                .map(|(k, _)| *k)
            {
                self.tenants.remove(&old);
            }
        }
        let t = self.tenants.entry(tenant).or_default();
        t.written = self.clock;
        let kept = &output[output.len().saturating_sub(TOKENS_PER_TENANT)..];
        t.tokens += kept.len();
        t.outputs.push_back(kept.to_vec());
        while t.outputs.len() > OUTPUTS_PER_TENANT || t.tokens > TOKENS_PER_TENANT {
            match t.outputs.pop_front() {
                Some(o) => t.tokens -= o.len(),
                None => break,
            }
        }
    }

    /// Tokens kept for `tenant`.
    #[cfg(test)]
    fn tokens(&self, tenant: fak_kv::Tenant) -> usize {
        self.tenants.get(&tenant).map_or(0, |t| t.tokens)
    }

    /// The draft `tenant`'s recent outputs propose after `context`: the
    /// tokens that follow the longest match of `context`'s end
    /// ([`longest_match`], `min_ngram..=max_ngram` tokens) in any kept
    /// output, the newest output's of equals, at most `max_draft`.
    pub fn draft(&self, tenant: fak_kv::Tenant, context: &[u32], p: LookupParams) -> &[u32] {
        let Some(t) = self.tenants.get(&tenant) else {
            return &[];
        };
        if p.max_draft == 0 {
            return &[];
        }
        let mut best: Option<(&[u32], Match)> = None;
        for out in t.outputs.iter().rev() {
            if let Some(m) = longest_match(out, context, p.min_ngram, p.max_ngram) {
                if best.is_none_or(|(_, b)| m.matched > b.matched) {
                    best = Some((out, m));
                }
            }
        }
        best.map_or(&[], |(out, m)| m.draft(out, p.max_draft))
    }
}

/// Most draft tokens taken at once where the evidence is strong (a
/// prediction, what a grammar forces, a prompt-lookup match of
/// `max_ngram` tokens): a pass of two whole tiles ([`PASS_TILE`]). On a
/// Zen 5 (`fak bench verify --context 3000`, Qwen2.5-Coder-1.5B Q4_K_M,
/// 2 threads) a pass of 16 tokens cost 1.71 passes of 8.
pub const LONG_DRAFT: usize = 2 * PASS_TILE - 1;

/// Longest output suffix matched against a prediction.
const PREDICTION_MAX_NGRAM: usize = 8;

/// The draft a request's prediction proposes after `context` (the
/// sequence's tokens so far, ending with the token this pass feeds): the
/// tokens of `prediction` that follow the longest suffix of `context` (up
/// to 8 tokens, at least 1) found in it. Of several occurrences of that
/// suffix, the first one ending at or after `cursor` (where the output is
/// expected to continue: just after the last accepted prediction token)
/// wins, else the first one.
///
/// The draft's length follows the evidence: `max_draft` where the match
/// continues the last accepted stretch (it ends at `cursor` or one past
/// it), else twice the matched length at most. Right after an edit the
/// output and the prediction differ, and a one-token match elsewhere in
/// the prediction is as likely chance as realignment; a long rejected
/// draft costs its rows in the verifying pass, which a compute-bound
/// step pays in full.
///
/// Returns the draft's start in `prediction` with the draft, or `None`.
///
/// ```text
///   prediction:  fn a() { x } fn b() { y }      cursor after "fn a() { x }"
///   context:     … fn b() {  ▮                   suffix "fn b() {" found at
///   draft:                 y }                   the occurrence past the cursor
/// ```
///
/// Costs O(`prediction.len()` × 8) comparisons at most.
pub fn prediction_draft<'p>(
    context: &[u32],
    prediction: &'p [u32],
    cursor: usize,
    max_draft: usize,
) -> Option<(usize, &'p [u32])> {
    if max_draft == 0 || prediction.is_empty() {
        return None;
    }
    for n in (1..=PREDICTION_MAX_NGRAM.min(context.len())).rev() {
        let suffix = &context[context.len() - n..];
        // Occurrences with at least one token after them.
        let mut hits =
            (0..prediction.len().saturating_sub(n)).filter(|&i| &prediction[i..i + n] == suffix);
        let first = hits.next();
        let at = first
            .filter(|&i| i + n >= cursor)
            .or_else(|| hits.find(|&i| i + n >= cursor))
            .or(first);
        if let Some(i) = at {
            let from = i + n;
            let aligned = from == cursor || from == cursor + 1;
            let k = if aligned {
                max_draft
            } else {
                max_draft.min(2 * n)
            };
            let to = (from + k).min(prediction.len());
            return Some((from, &prediction[from..to]));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn lookup(c: &[u32], k: usize) -> Vec<u32> {
        prompt_lookup(c, LookupParams::default())
            .map_or(&[][..], |m| m.draft(c, k))
            .to_vec()
    }

    #[test]
    fn follows_the_latest_of_the_longest_earlier_matches() {
        // "1 2 3" occurred twice before, each matching 3 tokens; the latest
        // continuation wins.
        let c = [1, 2, 3, 7, 8, 1, 2, 3, 9, 10, 11, 5, 1, 2, 3];
        assert_eq!(lookup(&c, 3), [9, 10, 11]);
        assert_eq!(lookup(&c, 1), [9]);
        // A longer match beats a later, shorter one.
        let c = [4, 1, 2, 3, 50, 2, 3, 60, 1, 2, 3];
        assert_eq!(lookup(&c, 2), [50, 2]);
        // The continuation may run up to the end of the context.
        let c = [1, 2, 1, 2];
        assert_eq!(lookup(&c, 8), [1, 2]);
    }

    /// A re-emitted file: the context's last 4 tokens occur twice, and only
    /// the earlier occurrence continues the line being copied (5 tokens
    /// match there). A lookup that takes the latest occurrence of the
    /// longest suffix of at most 4 tokens drafts 60 and is rejected.
    #[test]
    fn a_match_longer_than_a_short_suffix_pins_the_copied_line() {
        let c = [9, 1, 2, 3, 4, 50, 7, 1, 2, 3, 4, 60, 9, 1, 2, 3, 4];
        assert_eq!(lookup(&c, 2), [50, 7]);
        let m = prompt_lookup(&c, LookupParams::default()).expect("a match");
        assert_eq!(
            m,
            Match {
                from: 5,
                matched: 5
            }
        );
        // Matches are counted up to max_ngram, then the latest wins.
        let short = LookupParams {
            max_ngram: 4,
            ..LookupParams::default()
        };
        assert_eq!(
            prompt_lookup(&c, short),
            Some(Match {
                from: 11,
                matched: 4
            })
        );
    }

    #[test]
    fn nothing_to_propose() {
        assert!(lookup(&[], 4).is_empty());
        assert!(lookup(&[1], 4).is_empty());
        assert!(lookup(&[1, 2, 3, 4], 4).is_empty());
        assert!(lookup(&[1, 2, 1, 2], 0).is_empty());
        // A single repeated token is below min_ngram = 2.
        assert!(lookup(&[5, 9, 5], 4).is_empty());
    }

    proptest! {
        /// The match is one: the `matched` tokens before `from` equal the
        /// context's end, within min_ngram..=max_ngram, a continuation
        /// follows, and no earlier occurrence matches more tokens, nor a
        /// later one as many (checked against every end by brute force).
        #[test]
        fn the_match_is_the_latest_of_the_longest(
            c in proptest::collection::vec(0u32..4, 0..60),
            max in 2usize..8,
        ) {
            let p = LookupParams { max_ngram: max, ..LookupParams::default() };
            let len = c.len();
            // Tokens the occurrence ending at `e` matches, up to `max`.
            let matched = |e: usize| (0..=max.min(e)).rev()
                .find(|&m| c[e - m..e] == c[len - m..]).unwrap_or(0);
            let best = (p.min_ngram..len).rev()
                .map(|e| (e, matched(e)))
                .filter(|&(_, m)| m >= p.min_ngram)
                .fold(None::<(usize, usize)>, |b, (e, m)| match b {
                    Some((_, bm)) if bm >= m => b,
                    _ => Some((e, m)),
                });
            let got = prompt_lookup(&c, p);
            prop_assert_eq!(got.map(|m| (m.from, m.matched)), best);
            if let Some(m) = got {
                prop_assert!(m.from < len);
                prop_assert!(m.draft(&c, 3).len() <= 3);
            }
        }
    }

    #[test]
    fn prediction_drafts_follow_the_longest_suffix_past_the_cursor() {
        // "1 2 3" occurs twice; past cursor 4 the second one wins.
        let pred = [1, 2, 3, 9, 9, 1, 2, 3, 7, 8];
        assert_eq!(
            prediction_draft(&[5, 1, 2, 3], &pred, 0, 4),
            Some((3, &pred[3..7]))
        );
        assert_eq!(
            prediction_draft(&[5, 1, 2, 3], &pred, 4, 2),
            Some((8, &pred[8..10]))
        );
        // A longer suffix beats a shorter one: "9 1" only matches once.
        assert_eq!(
            prediction_draft(&[9, 1], &pred, 0, 3),
            Some((6, &pred[6..9]))
        );
        // A one-token match away from the cursor drafts 2 tokens; the same
        // match continuing the accepted stretch drafts them all.
        let long = [4, 1, 2, 3, 5, 6, 7, 8, 9, 10];
        assert_eq!(
            prediction_draft(&[0, 4], &long, 5, 8),
            Some((1, &long[1..3]))
        );
        assert_eq!(
            prediction_draft(&[0, 4], &long, 1, 8),
            Some((1, &long[1..9]))
        );
        assert_eq!(
            prediction_draft(&[0, 4], &long, 0, 8),
            Some((1, &long[1..9]))
        );
        // Nothing after the match, no match, or no room: no draft.
        assert_eq!(prediction_draft(&[7, 8], &pred, 0, 3), None);
        assert_eq!(prediction_draft(&[4], &pred, 0, 3), None);
        assert_eq!(prediction_draft(&[1, 2], &pred, 0, 0), None);
        assert_eq!(prediction_draft(&[1, 2], &[], 0, 3), None);
    }

    #[test]
    fn fleet_index_drafts_within_a_tenant_and_stays_bounded() {
        use fak_kv::Tenant;
        let mut f = FleetIndex::default();
        let p = LookupParams::default();
        f.record(Tenant(1), &[10, 11, 12, 13, 14, 15]);
        assert_eq!(f.draft(Tenant(1), &[9, 11, 12], p), &[13, 14, 15]);
        // Another tenant never sees it.
        assert!(f.draft(Tenant(2), &[9, 11, 12], p).is_empty());
        // The newest output with the suffix wins.
        f.record(Tenant(1), &[11, 12, 99, 98]);
        assert_eq!(f.draft(Tenant(1), &[11, 12], p), &[99, 98]);
        // Bounded by tokens per tenant, oldest first.
        for k in 0..100u32 {
            f.record(Tenant(1), &vec![k; 1000]);
        }
        assert!(f.tokens(Tenant(1)) <= TOKENS_PER_TENANT);
        assert!(f.draft(Tenant(1), &[9, 11, 12], p).is_empty());
        // Bounded by tenants.
        for k in 0..(FLEET_TENANTS as u64 + 10) {
            f.record(Tenant(100 + k), &[1, 2, 3, 4]);
        }
        assert!(f.tenants.len() <= FLEET_TENANTS);
    }
}
