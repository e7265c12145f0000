//! `fak bench peak`: int8 multiply-add throughput, the prefill roofline's
//! denominator (`int8 ops per token ÷ peak`).
//!
//! Every thread of the model's persistent pool runs
//! [`fak_kernels::peak::int8_mac_loop`] (register-resident int8 dot
//! products on the chosen ISA; the kernel stays in fak-kernels, this is its
//! driver) for the same number of rounds:
//!
//! ```text
//! GMAC/s = threads × rounds × 256 / wall time / 1e9      (ops = 2 × MACs)
//! 1 warm-up pass + `reps` passes, median reported
//! ```

use std::sync::atomic::{AtomicI32, Ordering};
use std::time::Instant;

use fak_kernels::peak::{int8_mac_loop, MACS_PER_ROUND};
use serde::Serialize;

use crate::error::{params, Error, Result};
use crate::{median, threads_or_all, RunHeader};

/// Schema tag of [`PeakReport`].
pub const SCHEMA: &str = "fak-bench-peak/1";

/// What `fak bench peak` measures.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Params {
    /// Threads (`None`: all cores).
    pub threads: Option<usize>,
    /// Rounds per thread per pass (256 int8 multiply-adds each).
    pub rounds: u64,
    /// Timed passes after one warm-up.
    pub reps: usize,
}

/// The JSON report.
#[derive(Debug, Clone, Serialize)]
pub struct PeakReport {
    /// Schema, cpu, isa and threads.
    #[serde(flatten)]
    pub header: RunHeader,
    pub rounds: u64,
    pub reps: usize,
    pub int8_gmacs_per_s_median: f64,
    pub int8_gops_per_s_median: f64,
    pub int8_gmacs_per_s_runs: Vec<f64>,
    /// Wrapping sum of every thread's result: the same on every ISA.
    pub checksum: i32,
}

/// Runs the probe (see the module docs).
///
/// # Errors
///
/// `rounds` or `reps` of 0, thread-pool errors.
pub fn run(p: &Params) -> Result<PeakReport> {
    if p.rounds == 0 || p.reps == 0 {
        return Err(params("--rounds and --reps must be at least 1"));
    }
    let threads = threads_or_all(p.threads);
    let isa = fak_kernels::isa();
    let pool = fak_kernels::pool::ThreadPool::new(threads).map_err(|source| Error::Pool {
        what: "starting the thread pool",
        source,
    })?;
    let sums: Vec<AtomicI32> = (0..threads).map(|_| AtomicI32::new(0)).collect();
    let pass = || -> Result<f64> {
        let t0 = Instant::now();
        pool.run(|k, _| {
            let v0: [i8; 32] = std::array::from_fn(|b| (b as i8).wrapping_mul(37) ^ k as i8);
            sums[k].store(int8_mac_loop(isa, p.rounds, v0), Ordering::Relaxed);
        })
        .map_err(|source| Error::Pool {
            what: "probe pass",
            source,
        })?;
        let dt = t0.elapsed().as_secs_f64();
        let macs = threads as f64 * p.rounds as f64 * MACS_PER_ROUND as f64;
        Ok(macs / dt / 1e9)
    };
    pass()?;
    let mut runs = Vec::with_capacity(p.reps);
    for _ in 0..p.reps {
        runs.push(pass()?);
    }
    let median = median(&runs);
    let checksum = sums
        .iter()
        .map(|s| s.load(Ordering::Relaxed))
        .fold(0i32, i32::wrapping_add);
    let mut header = RunHeader::probe(SCHEMA, threads);
    header.isa = Some(isa.to_string());
    Ok(PeakReport {
        header,
        rounds: p.rounds,
        reps: p.reps,
        int8_gmacs_per_s_median: median,
        int8_gops_per_s_median: 2.0 * median,
        int8_gmacs_per_s_runs: runs,
        checksum,
    })
}

impl PeakReport {
    /// One human-readable line.
    pub fn table(&self) -> String {
        format!(
            "int8 peak: {:.1} GMAC/s = {:.1} GOPS median ({} threads, {})\n",
            self.int8_gmacs_per_s_median,
            self.int8_gops_per_s_median,
            self.header.threads,
            self.header.isa.as_deref().unwrap_or_default()
        )
    }
}
