//! The measured machine a roofline rests on: read bandwidth
//! (`fak bench bandwidth`), int8 multiply-add peak and f32 FMA peak (both
//! `fak bench peak`).
//!
//! ```text
//!  --bandwidth FILE  a fak-bench-bandwidth/1 report ─┐ read_gb_per_s_median
//!  (absent)          measured in-process, 512 MiB ×3 ┘
//!  --peak FILE       a fak-bench-peak/1 report ──────┐ int8_gmacs_per_s_median,
//!  (absent)          measured in-process, 4M rounds ×3┘ f32_gflops_median
//!  --f32-gflops X    given on the command line: overrides the f32 peak
//!  (a FILE without f32_gflops_median, from before the f32 probe: the f32
//!   peak alone is measured in-process, and its source says so)
//! ```
//!
//! A report's threads must match the run's: peaks scale with cores.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::{input, params, Result};
use crate::{bandwidth, peak, sha256_file};

/// Where each machine figure comes from.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MachineSpec {
    /// A `fak bench bandwidth --json` report; `None`: measure in-process.
    pub bandwidth: Option<PathBuf>,
    /// A `fak bench peak --json` report; `None`: measure in-process.
    pub peak: Option<PathBuf>,
    /// f32 GFLOP/s (2 per FMA) for the attention arithmetic; `None`: the
    /// peak report's (or measured in-process).
    pub f32_gflops: Option<f64>,
}

/// The measured machine figures, each with where it came from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Machine {
    pub threads: usize,
    pub read_gb_per_s: f64,
    pub bandwidth_source: String,
    pub int8_gmacs_per_s: f64,
    pub peak_source: String,
    /// f32 FMA peak in GFLOP/s (2 flops per FMA).
    pub f32_gflops: f64,
    pub f32_source: String,
}

impl Machine {
    /// One line: the figures and their sources.
    pub fn line(&self) -> String {
        format!(
            "{} threads: {:.1} GB/s ({}), int8 {:.1} GMAC/s ({}), f32 {:.1} GFLOP/s ({})",
            self.threads,
            self.read_gb_per_s,
            self.bandwidth_source,
            self.int8_gmacs_per_s,
            self.peak_source,
            self.f32_gflops,
            self.f32_source
        )
    }
}

/// The `schema` report at `path`, checked to be of `threads` threads, and
/// the source line naming it.
fn read_report(path: &Path, schema: &str, threads: usize) -> Result<(Value, String)> {
    let v = crate::project::inputs::read_value(path)?;
    let got = v["schema"].as_str().unwrap_or("");
    if got != schema {
        return Err(input(format!(
            "{}: schema {got:?}, expected {schema:?}",
            path.display()
        )));
    }
    let t = v["threads"].as_u64().unwrap_or(0) as usize;
    if t != threads {
        return Err(input(format!(
            "{}: measured with {t} threads, this run uses {threads}",
            path.display()
        )));
    }
    let sha = sha256_file(path)?;
    let source = format!(
        "measured: {} (sha256 {})",
        path.display(),
        sha.get(..12).unwrap_or(&sha)
    );
    Ok((v, source))
}

/// The positive finite number at `key` of the report `v` read from `path`;
/// `None` when the key is absent.
fn positive(v: &Value, key: &str, path: &Path) -> Result<Option<f64>> {
    if v.get(key).is_none() {
        return Ok(None);
    }
    v[key]
        .as_f64()
        .filter(|x| x.is_finite() && *x > 0.0)
        .map(Some)
        .ok_or_else(|| input(format!("{}: no positive {key}", path.display())))
}

/// [`positive`], the key required.
fn required(v: &Value, key: &str, path: &Path) -> Result<f64> {
    positive(v, key, path)?.ok_or_else(|| input(format!("{}: no positive {key}", path.display())))
}

/// `fak bench peak` run in-process with the roofline's defaults.
fn measure_peak(threads: usize) -> Result<peak::PeakReport> {
    peak::run(&peak::Params {
        threads: Some(threads),
        rounds: 4_000_000,
        reps: 3,
    })
}

/// How [`measure_peak`] ran, for a source line.
const PEAK_IN_PROCESS: &str = "measured in-process (fak bench peak --rounds 4000000 --reps 3)";

impl MachineSpec {
    /// The machine figures for a run on `threads` threads: read from the
    /// reports given, the others measured now.
    ///
    /// # Errors
    ///
    /// A report that cannot be read, has another schema or thread count,
    /// an f32 peak that is not a positive number, probe errors.
    pub fn resolve(&self, threads: usize) -> Result<Machine> {
        if let Some(g) = self.f32_gflops {
            if !(g.is_finite() && g > 0.0) {
                return Err(params("--f32-gflops must be a positive number"));
            }
        }
        let (read_gb_per_s, bandwidth_source) = match &self.bandwidth {
            Some(p) => {
                let (v, source) = read_report(p, bandwidth::SCHEMA, threads)?;
                (required(&v, "read_gb_per_s_median", p)?, source)
            }
            None => {
                let r = bandwidth::run(&bandwidth::Params {
                    threads: Some(threads),
                    size_mib: 512,
                    reps: 3,
                })?;
                (
                    r.read_gb_per_s_median,
                    "measured in-process (fak bench bandwidth --size-mib 512 --reps 3)".into(),
                )
            }
        };
        // (int8 peak, its source, the f32 peak and its source if known).
        let (int8_gmacs_per_s, peak_source, f32_read) = match &self.peak {
            Some(p) => {
                let (v, source) = read_report(p, peak::SCHEMA, threads)?;
                let int8 = required(&v, "int8_gmacs_per_s_median", p)?;
                let f32_read = positive(&v, "f32_gflops_median", p)?.map(|g| (g, source.clone()));
                (int8, source, f32_read)
            }
            None => {
                let r = measure_peak(threads)?;
                (
                    r.int8_gmacs_per_s_median,
                    PEAK_IN_PROCESS.to_string(),
                    Some((r.f32_gflops_median, PEAK_IN_PROCESS.to_string())),
                )
            }
        };
        let (f32_gflops, f32_source) = match (self.f32_gflops, f32_read) {
            (Some(g), _) => (
                g,
                "given on the command line (--f32-gflops), not measured".to_string(),
            ),
            (None, Some(read)) => read,
            (None, None) => (
                measure_peak(threads)?.f32_gflops_median,
                format!("{PEAK_IN_PROCESS}: the --peak report has no f32_gflops_median"),
            ),
        };
        Ok(Machine {
            threads,
            read_gb_per_s,
            bandwidth_source,
            int8_gmacs_per_s,
            peak_source,
            f32_gflops,
            f32_source,
        })
    }
}
