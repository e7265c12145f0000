//! The llama / qwen2 / qwen3 / gemma3 forward pass.
//!
//! A [`Model`] is stateless: it owns read-only weights (memory-mapped from
//! the GGUF file) and computes logits for a [`Batch`] of tokens, reading and
//! writing keys and values through a [`KvStore`]. A batch is *ragged*: it may
//! hold tokens of several sequences, each token with its own position, so a
//! prefill chunk of one sequence and single decode tokens of others can run in
//! one call.
//!
//! ```text
//!  Batch{token,pos,seq} ──► embed ──► [ layer × n_layer ] ──► norm ──► output ──► Logits
//!                                        │        ▲
//!                               write K,V│        │read K,V of 0..=pos
//!                                        ▼        │
//!                                      KvStore (per sequence)
//! ```
//!
//! Each token's result depends only on its own sequence's tokens: every
//! matrix product computes each output element with the same per-row dot
//! product whatever the batch holds, and attention walks each token's own
//! sequence in position order.

#![forbid(unsafe_code)]

mod attention;
mod batch;
mod error;
mod forward;
mod gemma3;
mod heads;
mod kv;
mod kv_rows;
mod matmul;
mod norms;
mod ops;
pub mod quantize;
mod rows;
pub mod synth;
mod times;
mod weights;

pub use batch::{Batch, BatchToken, LogitsWanted, SeqId};
pub use error::{BatchError, ModelError};
pub use fak_gguf::model::{
    Arch, Gemma3Params, LayerAttn, ModelConfig, QkNorm, RopeStyle, SlidingWindow,
};
pub use forward::{Logits, Workspace};
pub use gemma3::WindowMode;
pub use kv::{FlatKv, KeyRun, KvError, KvRun, KvStore, KvType, FLAT_SEG_ROWS};
pub use kv_rows::{KvRowBuf, KvRowShape, KEY_TILE_ROWS};
pub use ops::{rope_angles, rope_head, rope_shift_back};
pub use times::{ForwardTimes, PassKind, PhaseTimes};
pub use weights::{Model, Weight};
