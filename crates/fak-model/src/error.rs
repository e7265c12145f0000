//! Errors of model loading and the forward pass.

use crate::kv::KvError;

/// What went wrong while loading a model or running a forward pass.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    /// The GGUF file could not be read or failed validation.
    #[error(transparent)]
    Gguf(#[from] fak_gguf::GgufError),
    /// A tensor the architecture needs is absent.
    #[error("missing tensor '{0}'")]
    MissingTensor(String),
    /// A kernel rejected its input (unsupported type, bad length).
    #[error("tensor '{tensor}': {source}")]
    Kernel {
        tensor: String,
        #[source]
        source: fak_kernels::KernelError,
    },
    /// A tensor's type cannot be used where it appears.
    #[error("tensor '{tensor}': type {ty} is not supported here ({why})")]
    UnsupportedType {
        tensor: String,
        ty: fak_gguf::GgmlType,
        why: &'static str,
    },
    /// The batch is malformed.
    #[error("invalid batch: {0}")]
    Batch(#[from] BatchError),
    /// The matmul thread pool could not be started or a worker failed.
    #[error("thread pool: {0}")]
    Pool(#[from] fak_kernels::pool::PoolError),
    /// The KV store refused an access.
    #[error(transparent)]
    Kv(#[from] KvError),
}

/// A malformed batch or product, named by what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BatchError {
    /// A token id outside the vocabulary.
    #[error("token {index}: id {id} is not below n_vocab {n_vocab}")]
    TokenOutOfRange {
        index: usize,
        id: u32,
        n_vocab: usize,
    },
    /// A token at a position that is not its sequence's next one.
    #[error("token {index}: sequence {seq} expects position {expected}, got {got}")]
    Position {
        index: usize,
        seq: u32,
        expected: usize,
        got: u32,
    },
    /// Activations or output that do not fit a weight's shape.
    #[error("matmul '{tensor}': activations [{n_tok}, {n_in}] and output of {out_len} values do not fit [{n_out}, {w_in}]")]
    Shape {
        tensor: String,
        n_tok: usize,
        n_in: usize,
        out_len: usize,
        n_out: usize,
        w_in: usize,
    },
    /// Weight rows outside the tensor's bytes.
    #[error("matmul '{tensor}': weight rows {lo}..{hi} are outside the tensor")]
    WeightRows {
        tensor: String,
        lo: usize,
        hi: usize,
    },
}
