//! Byte-level BPE and SentencePiece tokenization and chat templates, built
//! from GGUF metadata and checked token-for-token against llama.cpp.
//!
//! * [`Tokenizer`]: text → ids ([`Tokenizer::encode`], special tokens parsed
//!   like llama.cpp's CLI) and ids → bytes/text ([`Tokenizer::token_bytes`],
//!   [`Tokenizer::decode`]).
//! * [`StreamDecoder`]: ids → text during generation, never splitting a
//!   UTF-8 character.
//! * [`ChatTemplate`]: `tokenizer.chat_template` rendered with minijinja.
//! * [`HfTokenizerFiles`]: the vocabulary as a Hugging Face
//!   `tokenizer.json` + `tokenizer_config.json` that tokenizes exactly as
//!   fak does, or a refusal naming what cannot be written that way.
//!
//! Supported: `tokenizer.ggml.model = "gpt2"` with the pre-tokenizers in
//! [`PreTokenizer`] (llama.cpp's `default`, GPT-2, SmolLM/StarCoder, Qwen2
//! and Llama 3 groups), and `"llama"` (SentencePiece, [`VocabKind::Spm`]:
//! score-ordered merges, `▁` spaces, byte fallback). Other families are
//! refused with [`TokenizerError::UnsupportedModel`]. See
//! `docs/tokenizer.md` for the pipeline and the llama.cpp behaviours
//! reproduced.
//!
//! ```text
//! text ─► special tokens cut out ─► pre-tokenizer words ─► BPE per word ─► ids
//! ids  ─► token_bytes (GPT-2 byte map undone) ─► UTF-8 (StreamDecoder / decode)
//! ```

#![forbid(unsafe_code)]

mod bpe;
mod chat;
mod error;
mod gguf;
mod hf_export;
mod limits;
mod pretok;
mod spm;
mod stream;
mod tokenizer;
mod unicode;
mod vocab;

pub use chat::{ChatMessage, ChatTemplate, FunctionCall, ToolCall, ToolMessage, ToolSyntax};
pub use error::TokenizerError;
pub use hf_export::{HfExportOptions, HfExportSummary, HfTokenizerFiles};
pub use limits::{TemplateLimit, TEMPLATE_FUEL, TEMPLATE_MAX_OUTPUT};
pub use pretok::{AddToken, MergePolicy, PreSettings, PreTokenizer};
pub use stream::StreamDecoder;
pub use tokenizer::{AddSpecial, EncodeOptions, SpecialTokens, Tokenizer, TokenizerConfig};
pub use vocab::{SpecialStrip, SpecialTokenIds, TokenType, VocabKind};
