//! Constrained decoding with llguidance: a request's output is held to a
//! grammar (a JSON schema, any JSON object, a regex or a Lark grammar).
//!
//! ```text
//!   Engine::add ──► Grammars::compile(constraint) ──► Matcher (per request)
//!                     (ParserFactory over a token trie, built once from the
//!                      tokenizer: token id → bytes, control tokens marked)
//!   each sample:  matcher.mask() ──► logits of disallowed tokens = -inf
//!                 end-of-generation tokens allowed only when it accepts
//!   each token:   matcher.consume(token)
//! ```
//!
//! A mask depends only on the request's own matcher, which only sees the
//! request's own tokens, so constrained outputs keep the engine's batch
//! invariance.

use std::sync::Arc;

use llguidance::api::TopLevelGrammar;
use llguidance::toktrie::{ApproximateTokEnv, TokEnv, TokRxInfo, TokTrie};
use llguidance::{Matcher, ParserFactory};

use fak_tokenizer::Tokenizer;

use crate::EngineError;

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
            matcher,
            eog: self.eog.clone(),
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

/// One request's grammar state.
pub(crate) struct ConstraintState {
    matcher: Matcher,
    eog: Vec<u32>,
}

impl ConstraintState {
    /// Sets the logits of tokens the grammar does not allow next to
    /// `-inf`; end-of-generation tokens stay only when the grammar
    /// accepts the output so far.
    pub(crate) fn apply(&mut self, logits: &mut [f32]) -> Result<(), EngineError> {
        let accepting = self.matcher.is_stopped()
            || self
                .matcher
                .is_accepting()
                .map_err(|e| EngineError::ConstraintFailed(e.to_string()))?;
        if self.matcher.is_stopped() {
            for (i, v) in logits.iter_mut().enumerate() {
                if !self.eog.contains(&(i as u32)) {
                    *v = f32::NEG_INFINITY;
                }
            }
            return Ok(());
        }
        let mask = self
            .matcher
            .compute_mask()
            .map_err(|e| EngineError::ConstraintFailed(e.to_string()))?;
        for (i, v) in logits.iter_mut().enumerate() {
            let id = i as u32;
            let ok = if self.eog.contains(&id) {
                accepting
            } else {
                i < mask.len() && mask.is_allowed(id)
            };
            if !ok {
                *v = f32::NEG_INFINITY;
            }
        }
        Ok(())
    }

    /// Advances the grammar past a sampled token (not an end token).
    pub(crate) fn consume(&mut self, token: u32) -> Result<(), EngineError> {
        self.matcher
            .consume_token(token)
            .map_err(|e| EngineError::ConstraintFailed(e.to_string()))
    }
}
