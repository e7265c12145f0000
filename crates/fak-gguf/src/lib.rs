//! GGUF reading, writing and validation. No compute lives here.
//!
//! * [`GgufFile`] parses and strictly validates a GGUF v2/v3 file (memory
//!   mapped or in memory); every accessor afterwards is bounds-safe.
//! * [`GgufWriter`] produces files the reader accepts.
//! * [`model::model_config`] checks a file's llama / qwen2 / qwen3 hyperparameters
//!   against its tensor shapes and returns a [`ModelConfig`].
//!
//! Shapes are in ggml order throughout: `dims[0]` is the contiguous row
//! length.

mod cursor;
pub mod error;
pub mod file;
mod metadata;
pub mod model;
pub mod tensor;
pub mod types;
pub mod value;
pub mod writer;

pub use error::GgufError;
pub use file::{GgufFile, GGUF_MAGIC};
pub use metadata::{ALIGNMENT_KEY, DEFAULT_ALIGNMENT, MAX_ALIGNMENT, MAX_KEY_LEN};
pub use model::{model_config, Arch, ModelConfig, QkNorm, RopeStyle};
pub use tensor::{tensor_n_bytes, TensorInfo, MAX_DIMS, MAX_TENSOR_NAME_LEN};
pub use types::{GgmlType, QK_K};
pub use value::{MetaArray, MetaValue, ValueType, MAX_ARRAY_DEPTH};
pub use writer::GgufWriter;
