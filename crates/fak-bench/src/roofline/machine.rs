//! The measured machine a roofline rests on: read bandwidth
//! (`fak bench bandwidth`), int8 multiply-add peak (`fak bench peak`) and,
//! when given, an f32 FMA peak.
//!
//! ```text
//!  --bandwidth FILE  a fak-bench-bandwidth/1 report ─┐ read_gb_per_s_median
//!  (absent)          measured in-process, 512 MiB ×3 ┘
//!  --peak FILE       a fak-bench-peak/1 report ──────┐ int8_gmacs_per_s_median
//!  (absent)          measured in-process, 4M rounds ×3┘
//!  --f32-gflops X    given on the command line (fak has no f32 probe yet);
//!  (absent)          attention arithmetic is left unbounded
//! ```
//!
//! A report's threads must match the run's: peaks scale with cores.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{input, params, Result};
use crate::{bandwidth, peak, sha256_file};

/// Where each machine figure comes from.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MachineSpec {
    /// A `fak bench bandwidth --json` report; `None`: measure in-process.
    pub bandwidth: Option<PathBuf>,
    /// A `fak bench peak --json` report; `None`: measure in-process.
    pub peak: Option<PathBuf>,
    /// f32 GFLOP/s (2 per FMA) for the attention arithmetic; `None`: no bound.
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
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub f32_gflops: Option<f64>,
    pub f32_source: String,
}

impl Machine {
    /// One line: the figures and their sources.
    pub fn line(&self) -> String {
        format!(
            "{} threads: {:.1} GB/s ({}), int8 {:.1} GMAC/s ({}), f32 {} ({})",
            self.threads,
            self.read_gb_per_s,
            self.bandwidth_source,
            self.int8_gmacs_per_s,
            self.peak_source,
            self.f32_gflops
                .map_or("unbounded".to_string(), |g| format!("{g:.1} GFLOP/s")),
            self.f32_source
        )
    }
}

/// Reads `key` and `threads` of the `schema` report at `path`.
fn read_report(path: &Path, schema: &str, key: &str, threads: usize) -> Result<(f64, String)> {
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
    let x = v[key]
        .as_f64()
        .filter(|x| x.is_finite() && *x > 0.0)
        .ok_or_else(|| input(format!("{}: no positive {key}", path.display())))?;
    let sha = sha256_file(path)?;
    Ok((
        x,
        format!(
            "measured: {} (sha256 {})",
            path.display(),
            sha.get(..12).unwrap_or(&sha)
        ),
    ))
}

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
            Some(p) => read_report(p, bandwidth::SCHEMA, "read_gb_per_s_median", threads)?,
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
        let (int8_gmacs_per_s, peak_source) = match &self.peak {
            Some(p) => read_report(p, peak::SCHEMA, "int8_gmacs_per_s_median", threads)?,
            None => {
                let r = peak::run(&peak::Params {
                    threads: Some(threads),
                    rounds: 4_000_000,
                    reps: 3,
                })?;
                (
                    r.int8_gmacs_per_s_median,
                    "measured in-process (fak bench peak --rounds 4000000 --reps 3)".into(),
                )
            }
        };
        Ok(Machine {
            threads,
            read_gb_per_s,
            bandwidth_source,
            int8_gmacs_per_s,
            peak_source,
            f32_gflops: self.f32_gflops,
            f32_source: match self.f32_gflops {
                Some(_) => "given on the command line (--f32-gflops), not measured".into(),
                None => "none given: attention arithmetic not bounded".into(),
            },
        })
    }
}
