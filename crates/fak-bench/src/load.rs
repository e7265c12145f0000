//! The one model loader of the benchmarks and of `fak project`, and the one
//! reader of a model file's metadata ([`open_gguf`]).

use std::path::{Path, PathBuf};

use fak_model::Model;

use crate::error::{Error, Result};

/// Which model file to load, on how many threads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelSpec {
    /// Path to a GGUF model file.
    pub path: PathBuf,
    /// Worker threads (`None`: the model's default, all cores).
    pub threads: Option<usize>,
}

/// Loads the model at `path`, with `threads` threads when given.
///
/// # Errors
///
/// [`Error::Load`] when the file does not load; [`Error::Threads`] when the
/// pool could not start that many threads (or the count is out of range).
pub fn load_model(path: &Path, threads: Option<usize>) -> Result<Model> {
    let mut model = Model::load(path).map_err(|source| Error::Load {
        path: path.to_path_buf(),
        source,
    })?;
    if let Some(t) = threads {
        model
            .set_threads(t)
            .map_err(|source| Error::Threads { wanted: t, source })?;
    }
    Ok(model)
}

/// The GGUF at `path`, opened (metadata parsed, tensors mapped, not read),
/// and its model configuration: what `fak project`'s model identity and
/// the roofline's model shape both read.
///
/// # Errors
///
/// [`Error::Gguf`] when the file does not open (`opening`) or its metadata
/// is not a supported model (`reading`).
pub(crate) fn open_gguf(path: &Path) -> Result<(fak_gguf::GgufFile, fak_gguf::ModelConfig)> {
    let gguf = |what| {
        move |source| Error::Gguf {
            what,
            path: path.to_path_buf(),
            source,
        }
    };
    let f = fak_gguf::GgufFile::open(path).map_err(gguf("opening"))?;
    let c = fak_gguf::model_config(&f).map_err(gguf("reading"))?;
    Ok((f, c))
}

impl ModelSpec {
    /// [`load_model`] of this spec.
    ///
    /// # Errors
    ///
    /// As [`load_model`].
    pub fn load(&self) -> Result<Model> {
        load_model(&self.path, self.threads)
    }
}

/// `threads` as given (a pool refuses 0 or too many), or every core the
/// OS reports when `None` (at least 1, at most
/// [`MAX_THREADS`](fak_kernels::pool::MAX_THREADS)).
pub fn threads_or_all(threads: Option<usize>) -> usize {
    threads.unwrap_or_else(|| {
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
            .min(fak_kernels::pool::MAX_THREADS)
    })
}
