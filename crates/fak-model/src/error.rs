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
    Batch(String),
    /// The matmul thread pool could not be started or a worker failed.
    #[error("thread pool: {0}")]
    Pool(#[from] fak_kernels::pool::PoolError),
    /// The KV store refused an access.
    #[error(transparent)]
    Kv(#[from] KvError),
}
