//! Errors of the benchmark protocols and of the projection model.
//!
//! Every message reads as one line. Where a message names a flag
//! (`--reps`, `--prefix`, ...) it is the `fak` command's flag of the same
//! name as the params field; fak-cli prints the error with its sources
//! (`{:#}`), so an error with a `source` shows `message: source`.

use std::path::PathBuf;

/// What went wrong in a benchmark run or a projection.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A parameter is out of range or a required one is missing.
    #[error("{0}")]
    Params(String),
    /// An input file (rates, fleet report, packet) cannot be used as it is.
    #[error("{0}")]
    Input(String),
    /// Reading or opening a file failed.
    #[error("{what} {}", path.display())]
    Io {
        /// `opening` or `reading`.
        what: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// JSON that cannot be parsed or does not have the expected fields.
    #[error("{what}")]
    Json {
        /// What was being read, e.g. `parsing FILE`.
        what: String,
        #[source]
        source: serde_json::Error,
    },
    /// Serializing a packet failed.
    #[error(transparent)]
    Serde(#[from] serde_json::Error),
    /// The model file could not be loaded.
    #[error("loading {}", path.display())]
    Load {
        path: PathBuf,
        #[source]
        source: fak_model::ModelError,
    },
    /// The model's GGUF metadata could not be read.
    #[error("{what} {}", path.display())]
    Gguf {
        /// `opening` or `reading`.
        what: &'static str,
        path: PathBuf,
        #[source]
        source: fak_gguf::GgufError,
    },
    /// The thread pool did not start as many threads as asked for.
    #[error("--threads {wanted}")]
    Threads {
        wanted: usize,
        #[source]
        source: fak_model::ModelError,
    },
    /// A probe's thread pool failed to start or a pass failed.
    #[error("{what}")]
    Pool {
        /// What the pool was doing.
        what: &'static str,
        #[source]
        source: fak_kernels::pool::PoolError,
    },
    /// A probe's buffer could not be allocated.
    #[error("cannot allocate {mib} MiB")]
    Alloc {
        mib: usize,
        #[source]
        source: std::collections::TryReserveError,
    },
    /// The progress bar's template is malformed.
    #[error("progress bar template")]
    Template(#[from] indicatif::style::TemplateError),
    /// A forward pass failed.
    #[error(transparent)]
    Model(#[from] fak_model::ModelError),
    /// The KV store refused an access.
    #[error(transparent)]
    Kv(#[from] fak_model::KvError),
    /// The engine (sequences, fleet) failed.
    #[error(transparent)]
    Engine(#[from] fak_engine::EngineError),
    /// The model's tokenizer or chat template could not be read or used.
    #[error(transparent)]
    Tokenizer(#[from] fak_tokenizer::TokenizerError),
    /// A projection packet that does not validate.
    #[error("{} is not valid", path.display())]
    NotValid {
        path: PathBuf,
        #[source]
        source: Box<Error>,
    },
}

/// `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Shorthand for [`Error::Params`].
pub(crate) fn params(msg: impl Into<String>) -> Error {
    Error::Params(msg.into())
}

/// Shorthand for [`Error::Input`].
pub(crate) fn input(msg: impl Into<String>) -> Error {
    Error::Input(msg.into())
}

/// Shorthand for [`Error::Json`].
pub(crate) fn json(what: impl Into<String>) -> impl FnOnce(serde_json::Error) -> Error {
    let what = what.into();
    move |source| Error::Json { what, source }
}
