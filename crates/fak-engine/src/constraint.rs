//! Constrained decoding with llguidance: a request's output is held to a
//! grammar (a JSON schema, any JSON object, a regex or a Lark grammar).
//!
//! ```text
//!   Engine::add ──► Grammars::compile(constraint) ──► Matcher (per request)
//!                     (ParserFactory over a token trie, built once from the
//!                      tokenizer: token id → bytes, control tokens marked)
//!   each sample, when the sampling settings allow it (Check::First):
//!                 token := sample(logits)            no mask
//!                 allows(token)?  one token through the lexer and parser
//!                   yes ──► token                    (most tokens)
//!                   no  ──► the masked path below, a second draw
//!   otherwise:    compute_mask() ──► logits of disallowed tokens = -inf,
//!                 32 ids per mask word; end-of-generation tokens allowed
//!                 only when it accepts ──► sample
//!   each token:   matcher.consume(token)
//! ```
//!
//! Why checking first is exact: masking and renormalizing `p` gives
//! `p(x) / p(A)` on the allowed set `A`. Drawing `x ~ p` and keeping it
//! when `x ∈ A`, else drawing from the masked distribution, gives
//! `p(x) + (1 − p(A)) · p(x) / p(A) = p(x) / p(A)`: the same distribution
//! (rejection sampling with one try). Greedy picks the same token either
//! way. It does not hold once top-k, top-p or min-p cut the distribution
//! before the draw (they would cut the unmasked one), nor for
//! log-probabilities (reported from the masked logits), so those requests
//! always take the masked path ([`Check::for_request`]).
//!
//! A mask and a check depend only on the request's own matcher, which only
//! sees the request's own tokens, and the path taken only on the request's
//! own settings and draws, so constrained outputs keep the engine's batch
//! invariance.
//!
//! The test-only [`MaskFault`] (the `fault-injection` feature) sits here,
//! beside the constraint state that carries it to the mask worker of
//! `engine/masks.rs`, which imports it from this module.

use std::sync::Arc;

use llguidance::api::TopLevelGrammar;
use llguidance::toktrie::{ApproximateTokEnv, SimpleVob, TokEnv, TokRxInfo, TokTrie};
use llguidance::{Matcher, ParserFactory};

use fak_tokenizer::Tokenizer;

use crate::error::EngineError;
use crate::sampling::{Logprobs, SamplingParams};

/// A failure the mask worker injects when a marked request's matcher is
/// next lent to it (tests of [`MaskMode::Overlap`](crate::engine::MaskMode::Overlap)'s error paths; the
/// `fault-injection` feature).
#[cfg(feature = "fault-injection")]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MaskFault {
    /// The matcher enters llguidance's error state on the worker, as a
    /// failing grammar would leave it.
    MatcherError,
    /// Computing the request's verdict panics on the worker.
    Panic,
    /// The worker thread dies holding every matcher of the pass.
    WorkerDies,
}

/// What a request's output must match.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Constraint {
    /// Any JSON object (OpenAI's `response_format: json_object`).
    JsonObject,
    /// JSON valid under this JSON schema (the schema's JSON text).
    JsonSchema(String),
    /// Text matching this regular expression (whole output).
    Regex(String),
    /// Text in the language of this Lark grammar (llguidance's dialect:
    /// `%json {...}` embeds a JSON schema).
    Lark(String),
}

/// Compiles constraints against one vocabulary (built once per engine).
pub(crate) struct Grammars {
    factory: ParserFactory,
    /// End-of-generation ids of the vocabulary.
    eog: Vec<u32>,
}

impl Grammars {
    /// A compiler for `tok`'s vocabulary, padded to the model's `n_vocab`
    /// (ids without a token never pass a mask).
    pub(crate) fn new(tok: &Tokenizer, n_vocab: usize) -> Result<Grammars, EngineError> {
        let eog = tok.eog_ids();
        let eos = tok
            .eos()
            .or_else(|| eog.first().copied())
            .ok_or_else(|| EngineError::BadConstraint("the vocabulary has no end token".into()))?;
        let words: Vec<Vec<u8>> = (0..n_vocab as u32)
            .map(|id| {
                let b = tok.token_bytes(id);
                if tok.is_control(id) || tok.is_eog(id) {
                    // llguidance's marker: never matched as text.
                    let mut w = Vec::with_capacity(b.len() + 1);
                    w.push(TokTrie::SPECIAL_TOKEN_MARKER);
                    w.extend_from_slice(b);
                    w
                } else {
                    b.to_vec()
                }
            })
            .collect();
        let info = TokRxInfo::new(n_vocab as u32, eos);
        let trie = TokTrie::from(&info, &words).with_eos_tokens(&eog);
        let env: TokEnv = Arc::new(ApproximateTokEnv::new(trie));
        let mut factory = ParserFactory::new_simple(&env)
            .map_err(|e| EngineError::BadConstraint(format!("token trie: {e}")))?;
        factory.quiet();
        Ok(Grammars { factory, eog })
    }

    /// A fresh matcher for `c`.
    ///
    /// # Errors
    ///
    /// [`EngineError::BadConstraint`] naming what did not compile.
    pub(crate) fn compile(&self, c: &Constraint) -> Result<ConstraintState, EngineError> {
        let grammar = match c {
            Constraint::JsonObject => {
                TopLevelGrammar::from_json_schema(compact(serde_json::json!({"type": "object"})))
            }
            Constraint::JsonSchema(text) => {
                let v: serde_json::Value = serde_json::from_str(text).map_err(|e| {
                    EngineError::BadConstraint(format!("the schema is not JSON: {e}"))
                })?;
                TopLevelGrammar::from_json_schema(compact(v))
            }
            Constraint::Regex(rx) => TopLevelGrammar::from_regex(rx),
            Constraint::Lark(g) => TopLevelGrammar::from_lark(g.clone()),
        };
        let parser = self
            .factory
            .create_parser(grammar)
            .map_err(|e| EngineError::BadConstraint(e.to_string()))?;
        let matcher = Matcher::new(Ok(parser));
        if let Some(e) = matcher.get_error() {
            return Err(EngineError::BadConstraint(e));
        }
        Ok(ConstraintState {
            matcher: Some(matcher),
            eog: self.eog.clone(),
            saved: Vec::new(),
            #[cfg(feature = "fault-injection")]
            fault: None,
        })
    }
}

/// JSON without whitespace between tokens (llguidance's default allows
/// any run of it, where small models can loop), unless the schema sets
/// its own `x-guidance` options.
fn compact(mut schema: serde_json::Value) -> serde_json::Value {
    if let Some(o) = schema.as_object_mut() {
        o.entry("x-guidance")
            .or_insert_with(|| serde_json::json!({"whitespace_flexible": false}));
    }
    schema
}

/// Whether a constrained request's sampled token is checked against the
/// grammar before any mask is computed (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Check {
    /// Sample from the raw logits, check the token, mask only on a miss.
    First,
    /// Always mask, then sample.
    MaskFirst,
}

impl Check {
    /// [`Check::First`] exactly when it gives the masked path's
    /// distribution: greedy, or a plain temperature draw (no top-k, top-p
    /// or min-p cut), and no log-probabilities.
    pub(crate) fn for_request(s: &SamplingParams, logprobs: Logprobs) -> Check {
        let uncut = s.top_k == 0 && s.top_p >= 1.0 && s.min_p <= 0.0;
        if logprobs == Logprobs::Off && (s.temperature <= 0.0 || uncut) {
            Check::First
        } else {
            Check::MaskFirst
        }
    }
}

/// One request's grammar state.
pub(crate) struct ConstraintState {
    /// The matcher; `None` only while it is lent to the mask worker (or
    /// if the worker lost it: every later use then fails).
    matcher: Option<Matcher>,
    eog: Vec<u32>,
    /// End-of-generation logits saved while a mask is applied.
    saved: Vec<(usize, f32)>,
    /// A fault the mask worker injects when the matcher is next lent
    /// (tests of its error paths only).
    #[cfg(feature = "fault-injection")]
    fault: Option<MaskFault>,
}

/// The grammar's verdict on the next token, computed before the logits
/// exist (by the mask worker, `MaskMode::Overlap`): exactly what
/// [`ConstraintState::allows`] and [`ConstraintState::apply`] would
/// decide from the same matcher state.
pub(crate) struct Ready {
    /// Whether the grammar accepts the output so far (end tokens allowed).
    accepting: bool,
    /// Tokens allowed next; `None` when the matcher is stopped (none).
    mask: Option<SimpleVob>,
}

impl Ready {
    /// Computes the verdict from `m`'s current state (a full mask).
    ///
    /// # Errors
    ///
    /// [`EngineError::ConstraintFailed`] when the matcher is in its error
    /// state (llguidance reports such a matcher as stopped, which would
    /// otherwise read as "the grammar is complete: end here") or fails
    /// now.
    pub(crate) fn compute(m: &mut Matcher) -> Result<Ready, EngineError> {
        check_error(m)?;
        let stopped = m.is_stopped();
        let accepting = stopped || m.is_accepting().map_err(failed)?;
        let mask = if stopped {
            None
        } else {
            Some(m.compute_mask().map_err(failed)?)
        };
        Ok(Ready { accepting, mask })
    }
}

impl ConstraintState {
    fn matcher(&mut self) -> Result<&mut Matcher, EngineError> {
        self.matcher.as_mut().ok_or_else(lost)
    }

    /// Lends the matcher (to the mask worker); [`ConstraintState::put_back`]
    /// returns it. Until then every other method fails.
    pub(crate) fn lend(&mut self) -> Option<Matcher> {
        self.matcher.take()
    }

    /// Sets the fault injected when the matcher is next lent.
    #[cfg(feature = "fault-injection")]
    pub(crate) fn set_fault(&mut self, fault: MaskFault) {
        self.fault = Some(fault);
    }

    /// The fault to inject at this lend, once.
    #[cfg(feature = "fault-injection")]
    pub(crate) fn take_fault(&mut self) -> Option<MaskFault> {
        self.fault.take()
    }

    /// Takes back a lent matcher.
    pub(crate) fn put_back(&mut self, m: Matcher) {
        self.matcher = Some(m);
    }

    /// Whether the grammar allows `token` next: one token through the
    /// lexer and parser, no mask. An end-of-generation token is allowed
    /// only when the grammar accepts the output so far, as in
    /// [`ConstraintState::apply`].
    pub(crate) fn allows(&mut self, token: u32) -> Result<bool, EngineError> {
        let eog = self.eog.contains(&token);
        let m = self.matcher()?;
        check_error(m)?;
        if eog {
            return Ok(m.is_stopped() || m.is_accepting().map_err(failed)?);
        }
        if m.is_stopped() {
            return Ok(false);
        }
        Ok(m.validate_tokens(&[token]).map_err(failed)? == 1)
    }

    /// [`ConstraintState::allows`] from a verdict computed beforehand: a
    /// bit test.
    pub(crate) fn allows_ready(&self, ready: &Ready, token: u32) -> bool {
        if self.eog.contains(&token) {
            return ready.accepting;
        }
        ready
            .mask
            .as_ref()
            .is_some_and(|m| (token as usize) < m.len() && m.is_allowed(token))
    }

    /// Sets the logits of tokens the grammar does not allow next to
    /// `-inf`; end-of-generation tokens stay only when the grammar
    /// accepts the output so far.
    pub(crate) fn apply(&mut self, logits: &mut [f32]) -> Result<(), EngineError> {
        let ready = Ready::compute(self.matcher()?)?;
        self.apply_ready(&ready, logits);
        Ok(())
    }

    /// [`ConstraintState::apply`] with a verdict computed beforehand.
    pub(crate) fn apply_ready(&mut self, ready: &Ready, logits: &mut [f32]) {
        self.saved.clear();
        for &t in &self.eog {
            if let Some(&v) = logits.get(t as usize) {
                self.saved.push((t as usize, v));
            }
        }
        match &ready.mask {
            None => logits.fill(f32::NEG_INFINITY),
            Some(mask) => mask_words(mask, logits),
        }
        for &(i, v) in &self.saved {
            logits[i] = if ready.accepting {
                v
            } else {
                f32::NEG_INFINITY
            };
        }
    }

    /// Advances the grammar past a sampled token (not an end token).
    pub(crate) fn consume(&mut self, token: u32) -> Result<(), EngineError> {
        self.matcher()?.consume_token(token).map_err(failed)
    }

    /// The text the grammar forces next, whatever is sampled (a JSON
    /// key's tail, `": "`, closing brackets): a draft for speculation
    /// (see [`ConstraintState::forced`]). Empty when nothing is forced, the
    /// matcher is lent, or it failed.
    fn forced_bytes(&mut self) -> Vec<u8> {
        match self.matcher.as_mut() {
            Some(m) if !m.is_error() && !m.is_stopped() => m.compute_ff_bytes(),
            _ => Vec::new(),
        }
    }

    /// The longest prefix of `tokens` the grammar accepts from its current
    /// state, without advancing it (0 when the matcher is lent or failed).
    pub(crate) fn valid_prefix(&mut self, tokens: &[u32]) -> usize {
        match self.matcher.as_mut() {
            Some(m) if !m.is_error() => m.validate_tokens(tokens).unwrap_or(0),
            _ => 0,
        }
    }

    /// Tokens the grammar forces next, at most `max`: [`forced_bytes`]
    /// tokenized by the model's own tokenizer, less the last token (the
    /// model may write a longer token that also covers what follows), cut
    /// to the prefix the grammar accepts. A draft, verified like any other:
    /// the model may still spell the forced text with other tokens.
    ///
    /// [`forced_bytes`]: ConstraintState::forced_bytes
    pub(crate) fn forced(&mut self, tok: &fak_tokenizer::Tokenizer, max: usize) -> Vec<u32> {
        let bytes = self.forced_bytes();
        let text = match std::str::from_utf8(&bytes) {
            Ok(t) => t,
            // A forced run that ends inside a character: its whole
            // characters.
            Err(e) => std::str::from_utf8(&bytes[..e.valid_up_to()]).unwrap_or_default(),
        };
        if text.is_empty() {
            return Vec::new();
        }
        let opts = fak_tokenizer::EncodeOptions {
            special: fak_tokenizer::SpecialTokens::Plain,
            add: fak_tokenizer::AddSpecial::Never,
        };
        let mut ids = tok.encode(text, opts);
        ids.pop();
        ids.truncate(max);
        let n = self.valid_prefix(&ids);
        ids.truncate(n);
        ids
    }
}

/// A matcher in its error state as the engine's error: it must fail its
/// request, never end it as if the grammar were complete.
fn check_error(m: &Matcher) -> Result<(), EngineError> {
    match m.get_error() {
        Some(e) => Err(failed(e)),
        None => Ok(()),
    }
}

/// The error of a request whose matcher the mask worker did not return.
fn lost() -> EngineError {
    EngineError::ConstraintFailed("the mask worker lost the grammar state".into())
}

/// A matcher's error as the engine's.
pub(crate) fn failed(e: impl std::fmt::Display) -> EngineError {
    EngineError::ConstraintFailed(e.to_string())
}

/// Sets `logits[i]` to `-inf` for every id `i` whose bit in `mask` is
/// clear (ids past the mask too), one 32-id word at a time: a word of all
/// ones is skipped, a word of zeros filled. Same result as
/// [`mask_ids`], its per-id twin (tested against it).
fn mask_words(mask: &SimpleVob, logits: &mut [f32]) {
    let words = mask.as_slice();
    for (w, chunk) in logits.chunks_mut(32).enumerate() {
        let bits = words.get(w).copied().unwrap_or(0);
        if bits == u32::MAX {
            continue;
        }
        if bits == 0 {
            chunk.fill(f32::NEG_INFINITY);
            continue;
        }
        for (j, v) in chunk.iter_mut().enumerate() {
            if bits >> j & 1 == 0 {
                *v = f32::NEG_INFINITY;
            }
        }
    }
}

/// [`mask_words`] one id at a time (the reference).
#[cfg(test)]
fn mask_ids(mask: &SimpleVob, logits: &mut [f32]) {
    for (i, v) in logits.iter_mut().enumerate() {
        if i >= mask.len() || !mask.is_allowed(i as u32) {
            *v = f32::NEG_INFINITY;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mask_words_equals_the_per_id_twin() {
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        // Mask sizes around word edges, logits longer and shorter than it.
        for (n_mask, n_logits) in [(64, 64), (70, 70), (49152, 49152), (100, 130), (130, 100)] {
            for density in [0u64, 1, 8, 31, 32] {
                let mut mask = SimpleVob::alloc(n_mask);
                for i in 0..n_mask {
                    if next() % 32 < density {
                        mask.allow_token(i as u32);
                    }
                }
                // Whole words of ones and of zeros.
                if n_mask >= 64 {
                    mask.allow_range(0..=31);
                }
                let logits: Vec<f32> = (0..n_logits).map(|_| (next() % 1000) as f32).collect();
                let (mut a, mut b) = (logits.clone(), logits);
                mask_words(&mask, &mut a);
                mask_ids(&mask, &mut b);
                assert_eq!(a, b, "mask {n_mask} logits {n_logits} density {density}/32");
            }
        }
    }

    #[test]
    fn check_first_only_where_it_is_exact() {
        let g = SamplingParams::greedy();
        let t = SamplingParams {
            temperature: 0.7,
            ..g
        };
        assert_eq!(Check::for_request(&g, Logprobs::Off), Check::First);
        assert_eq!(Check::for_request(&t, Logprobs::Off), Check::First);
        assert_eq!(Check::for_request(&g, Logprobs::Top(2)), Check::MaskFirst);
        for cut in [
            SamplingParams { top_k: 40, ..t },
            SamplingParams { top_p: 0.9, ..t },
            SamplingParams { min_p: 0.05, ..t },
        ] {
            assert_eq!(Check::for_request(&cut, Logprobs::Off), Check::MaskFirst);
        }
        // Greedy ignores the cuts: the top token survives all of them.
        let gk = SamplingParams { top_k: 40, ..g };
        assert_eq!(Check::for_request(&gk, Logprobs::Off), Check::First);
    }
}
