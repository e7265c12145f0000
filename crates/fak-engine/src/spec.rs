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
//!                                                after the latest earlier match
//!                                                of the longest suffix that has one)
//! ```
//!
//! A draft only proposes: verification samples every position from the
//! model's own logits and keeps a draft token only while it equals the
//! sampled one, so a draft can make decoding faster, never different.

/// Whether the engine drafts tokens to verify, and from what.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Speculative {
    /// Plain decoding: one token per sequence per pass.
    #[default]
    Off,
    /// Drafts from the sequence's own context ([`prompt_lookup`]).
    Lookup(LookupParams),
}

/// How prompt lookup searches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LookupParams {
    /// Shortest suffix matched (tokens).
    pub min_ngram: usize,
    /// Longest suffix matched (tokens); longer matches are tried first.
    pub max_ngram: usize,
    /// Most draft tokens proposed.
    pub max_draft: usize,
}

impl Default for LookupParams {
    fn default() -> LookupParams {
        LookupParams {
            min_ngram: 2,
            max_ngram: 4,
            max_draft: 8,
        }
    }
}

/// The draft prompt lookup proposes after `context` (the sequence's
/// tokens so far, prompt and output): the tokens that followed the latest
/// earlier occurrence of its longest suffix of `min_ngram..=max_ngram`
/// tokens that occurs earlier, at most `max_draft` of them. Empty when no
/// suffix occurs earlier, or `max_draft` is 0.
///
/// Costs O(`context.len()` × `max_ngram`) comparisons at most.
pub fn prompt_lookup(context: &[u32], p: LookupParams) -> &[u32] {
    let len = context.len();
    if p.max_draft == 0 || p.min_ngram == 0 {
        return &[];
    }
    for n in (p.min_ngram..=p.max_ngram.min(len.saturating_sub(1))).rev() {
        let suffix = &context[len - n..];
        // Latest start i < len - n with context[i..i + n] == suffix: its
        // continuation starts at i + n < len.
        let found = (0..len - n).rev().find(|&i| &context[i..i + n] == suffix);
        if let Some(i) = found {
            let from = i + n;
            let to = (from + p.max_draft).min(len);
            return &context[from..to];
        }
    }
    &[]
}

/// Most draft tokens taken from a prediction at once.
pub const PREDICTION_MAX_DRAFT: usize = 16;

/// Longest output suffix matched against a prediction.
const PREDICTION_MAX_NGRAM: usize = 8;

/// The draft a request's prediction proposes after `context` (the
/// sequence's tokens so far, ending with the token this pass feeds): the
/// tokens of `prediction` that follow the longest suffix of `context` (up
/// to 8 tokens, at least 1) found in it, at most `max_draft`. Of several
/// occurrences of that suffix, the first one ending at or after `cursor`
/// (where the output is expected to continue: just after the last
/// accepted prediction token) wins, else the first one.
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
            let to = (from + max_draft).min(prediction.len());
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
        prompt_lookup(
            c,
            LookupParams {
                max_draft: k,
                ..LookupParams::default()
            },
        )
        .to_vec()
    }

    #[test]
    fn follows_the_latest_earlier_occurrence_of_the_longest_suffix() {
        // "1 2 3" occurred twice before; the latest continuation wins.
        let c = [1, 2, 3, 7, 8, 1, 2, 3, 9, 10, 11, 5, 1, 2, 3];
        assert_eq!(lookup(&c, 3), [9, 10, 11]);
        assert_eq!(lookup(&c, 1), [9]);
        // A longer suffix beats a later, shorter one.
        let c = [4, 1, 2, 3, 50, 2, 3, 60, 1, 2, 3];
        assert_eq!(lookup(&c, 2), [50, 2]);
        // The continuation may run up to the end of the context.
        let c = [1, 2, 1, 2];
        assert_eq!(lookup(&c, 8), [1, 2]);
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
        /// A draft continues an earlier occurrence of the context's suffix
        /// of at least min_ngram tokens, within max_draft.
        #[test]
        fn a_draft_continues_an_earlier_match(
            c in proptest::collection::vec(0u32..4, 0..60),
            k in 0usize..10,
        ) {
            let p = LookupParams { max_draft: k, ..LookupParams::default() };
            let d = prompt_lookup(&c, p);
            prop_assert!(d.len() <= k);
            if !d.is_empty() {
                // d is a slice of c: find where.
                let from = d.as_ptr() as usize - c.as_ptr() as usize;
                let from = from / std::mem::size_of::<u32>();
                let n = (p.min_ngram..=p.max_ngram)
                    .rev()
                    .find(|&n| n <= from && c.len() >= n && c[from - n..from] == c[c.len() - n..]);
                prop_assert!(n.is_some(), "no matching n-gram before the draft");
                prop_assert!(from < c.len());
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
        // Nothing after the match, no match, or no room: no draft.
        assert_eq!(prediction_draft(&[7, 8], &pred, 0, 3), None);
        assert_eq!(prediction_draft(&[4], &pred, 0, 3), None);
        assert_eq!(prediction_draft(&[1, 2], &pred, 0, 0), None);
        assert_eq!(prediction_draft(&[1, 2], &[], 0, 3), None);
    }
}
