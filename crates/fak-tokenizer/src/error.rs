//! The crate's error type. Every message names what was wrong (the metadata
//! key, the merge line, the template problem) so a CLI can print it as is.

use thiserror::Error;

/// Everything that can go wrong building a tokenizer or rendering a chat
/// template. Encoding and decoding themselves never fail.
#[derive(Debug, Error)]
pub enum TokenizerError {
    /// A metadata value was missing, of the wrong type or malformed in the
    /// GGUF file.
    #[error("GGUF metadata: {0}")]
    Gguf(#[from] fak_gguf::GgufError),

    /// A key the tokenizer cannot work without is absent.
    #[error("GGUF metadata key {key} is missing; the file has no usable tokenizer")]
    MissingKey {
        /// The absent key.
        key: &'static str,
    },

    /// `tokenizer.ggml.model` names a tokenizer family fak does not implement.
    #[error("tokenizer model {model:?} ({family}) is not supported; fak supports \"gpt2\" (byte-level BPE) and \"llama\" (SentencePiece)")]
    UnsupportedModel {
        /// The value of `tokenizer.ggml.model`.
        model: String,
        /// llama.cpp's name for that family (`WPM`, `UGM`, `RWKV`, ...), or
        /// `unknown tokenizer family`.
        family: &'static str,
    },

    /// `tokenizer.ggml.scores` is shorter than the vocabulary.
    #[error("tokenizer.ggml.scores has {got} entries but the vocabulary has {want}")]
    ScoreCount {
        /// Entries in the scores array.
        got: usize,
        /// Entries in the vocabulary.
        want: usize,
    },

    /// `tokenizer.ggml.pre` names a pre-tokenizer fak does not implement.
    #[error("pre-tokenizer {name:?} (tokenizer.ggml.pre) is not supported; known: {known}")]
    UnsupportedPreTokenizer {
        /// The value of `tokenizer.ggml.pre`.
        name: String,
        /// Comma-separated list of the names that are supported.
        known: String,
    },

    /// The vocabulary is empty.
    #[error("the vocabulary (tokenizer.ggml.tokens) is empty")]
    EmptyVocab,

    /// The vocabulary has more entries than a `u32` id can address.
    #[error("the vocabulary has {n} tokens, more than u32 ids can address")]
    VocabTooLarge {
        /// Number of tokens.
        n: usize,
    },

    /// Two vocabulary entries have the same text.
    #[error("duplicate token {text:?} in the vocabulary: ids {first} and {second}")]
    DuplicateToken {
        /// The repeated text.
        text: String,
        /// The earlier id.
        first: u32,
        /// The later id.
        second: u32,
    },

    /// `tokenizer.ggml.token_type` is shorter than the vocabulary.
    #[error("tokenizer.ggml.token_type has {got} entries but the vocabulary has {want}")]
    TokenTypeCount {
        /// Entries in the type array.
        got: usize,
        /// Entries in the vocabulary.
        want: usize,
    },

    /// A pre-tokenizer regex failed to compile (a bug in this crate's table).
    #[error("pre-tokenizer regex {pattern:?} does not compile: {message}")]
    Regex {
        /// The (collapsed) pattern that failed.
        pattern: String,
        /// The regex engine's message.
        message: String,
    },

    /// The chat template does not parse.
    #[error("chat template does not compile: {0}")]
    TemplateSyntax(String),

    /// Rendering the chat template failed (including `raise_exception`).
    #[error("chat template rendering failed: {0}")]
    TemplateRender(String),

    /// Something fak does cannot be written in a Hugging Face
    /// `tokenizer.json` exactly (see [`crate::HfTokenizerFiles`]).
    #[error("cannot export a Hugging Face tokenizer that tokenizes exactly as fak: {what}")]
    Unexpressible {
        /// What cannot be expressed, and why.
        what: String,
    },

    /// Rendering the chat template ran past one of its limits (an
    /// endless or exploding template).
    #[error("chat template rendering stopped: it exceeded the {limit}")]
    TemplateLimit {
        /// Which limit.
        limit: crate::limits::TemplateLimit,
    },
}
