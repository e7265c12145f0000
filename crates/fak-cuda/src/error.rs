//! The crate's error type.

use thiserror::Error;

/// Errors of the CUDA backend.
#[derive(Debug, Error)]
pub enum CudaError {
    /// No CUDA driver or NVRTC library could be loaded on this machine.
    #[error("no CUDA device: {0}")]
    NoDriver(String),
    /// A driver call failed.
    #[error("CUDA driver: {0}")]
    Driver(#[from] cudarc::driver::DriverError),
    /// NVRTC could not compile the kernels.
    #[error("NVRTC could not compile the kernels: {0}")]
    Compile(String),
    /// A model or tensor the device path does not support.
    #[error("not supported on the CUDA device: {0}")]
    Unsupported(String),
    /// A bad argument (spec, shape, batch).
    #[error("{0}")]
    Spec(String),
    /// Reading or writing a GGUF file.
    #[error(transparent)]
    Gguf(#[from] fak_gguf::GgufError),
    /// The CPU model (references, embeddings).
    #[error(transparent)]
    Model(#[from] fak_model::ModelError),
    /// A CPU kernel (references, embeddings).
    #[error(transparent)]
    Kernel(#[from] fak_kernels::KernelError),
}
