//! GGUF reading, writing and validation. No compute lives here.
pub mod types;
pub use types::{GgmlType, QK_K};
