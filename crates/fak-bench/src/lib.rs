//! fak's benchmark protocols and the fleet projection model: the library
//! behind `fak bench` and `fak project`.
//!
//! ```text
//! protocol        module       report schema            llama.cpp peer
//! fak bench model single       fak-bench-single/1       llamacpp.py single
//!   --contexts    context      (decode_at_context)
//! fak bench batch batch        fak-bench-batch/1        llamacpp.py batched
//! fak bench constrained        fak-bench-constrained/2  (free vs JSON-schema decode)
//! fak bench fleet fleet        fak-bench-fleet/1        llamacpp.py fleet
//! fak bench evict evict        fak-bench-evict/1
//! fak bench bandwidth          fak-bench-bandwidth/1    (machine probe)
//! fak bench peak  peak         fak-bench-peak/1         (int8 and f32 machine probes; kernels in fak_kernels::peak)
//! fak bench sampling sampling  fak-bench-sampling/1     (µs per draw outside the forward pass, old full sort vs new)
//! fak bench verify verify      fak-bench-verify/1       (a k-token verifying pass against a 1-token step: the bound of speculation)
//! fak project     project      fak-project/1            (MODELED, from the reports above)
//! fak project roofline roofline fak-roofline/1         (MODELED bound per fleet phase; in fleet reports)
//! ```
//!
//! Every protocol takes a plain params struct and returns its report; the
//! `fak` binary parses flags into those params and prints the report as
//! JSON or as the report's `table()`. The shared pieces: the token stream
//! ([`LcgIds`]), the report header ([`RunHeader`], flattened into every
//! report), the statistics ([`mod@stats`]), the model loader ([`load_model`])
//! and the fleet workload shape ([`Workload`], also the projection's).
//! Errors are typed ([`Error`]); progress bars go to stderr.

#![forbid(unsafe_code)]

pub mod bandwidth;
pub mod batch;
pub mod constrained;
pub mod context;
mod error;
pub mod evict;
pub mod fleet;
mod header;
mod ids;
mod load;
pub mod peak;
pub mod phases;
pub mod project;
pub mod roofline;
pub mod sampling;
pub mod single;
pub mod stats;
pub mod verify;

pub use error::{Error, Result};
pub use fleet::Workload;
pub use header::{
    cpu_model, hex, model_file_name, parse_cpu_model, sha256_file, RunHeader, ENGINE_VERSION,
};
pub use ids::{appends, LcgIds, LCG_STATE0};
pub use load::{load_model, threads_or_all, ModelSpec};
pub use stats::{median, percentile, stats, Stats};

use indicatif::{ProgressBar, ProgressStyle};

/// A progress bar on stderr of `len` steps: `{prefix} [{bar:30}] {pos}/{len}
/// {unit}{msg}` (`unit` ends with a space when given).
fn progress_bar(len: usize, prefix: &'static str, unit: &str) -> Result<ProgressBar> {
    let bar = ProgressBar::new(len as u64);
    bar.set_style(
        ProgressStyle::with_template(&format!(
            "{{prefix}} [{{bar:30}}] {{pos}}/{{len}} {unit}{{msg}}"
        ))?
        .progress_chars("=> "),
    );
    bar.set_prefix(prefix);
    Ok(bar)
}
