//! `fak bench peak`: int8 multiply-add and f32 FMA throughput, the
//! roofline's compute denominators (`int8 MACs of the weight matrices ÷
//! int8 peak`, `f32 attention MACs ÷ f32 FMA peak`).
//!
//! Every thread of the model's persistent pool runs
//! [`fak_kernels::peak::int8_mac_loop`], then (in passes of their own)
//! [`fak_kernels::peak::f32_fma_loop`] (register-resident int8 dot
//! products, f32 fused multiply-add chains on the chosen ISA; the kernels
//! stay in fak-kernels, this is their driver) for the same number of rounds:
//!
//! ```text
//! GMAC/s   = threads × rounds × 256 / wall time / 1e9      (ops = 2 × MACs)
//! GFLOP/s  = 2 × Σ FMAs the f32 kernels report (rounds × 192 each) / wall time / 1e9
//! per probe: 1 warm-up pass + `reps` passes, median reported
//! ```

use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};
use std::time::Instant;

use fak_kernels::peak::{f32_fma_loop, int8_mac_loop, F32_CHAINS, MACS_PER_ROUND};
use fak_kernels::pool::ThreadPool;
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
    /// Rounds per thread per pass (256 int8 multiply-adds, or 192 f32
    /// FMAs, each).
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
    /// f32 FMA peak, 2 flops per FMA.
    pub f32_gflops_median: f64,
    pub f32_gflops_runs: Vec<f64>,
    /// f32 FMAs every thread's kernel reported per pass, summed.
    pub f32_fmas_per_pass: u64,
    /// Sum of every thread's chain sum, in thread order: the same on every ISA.
    pub f32_checksum: f64,
}

/// One warm-up then `reps` timed runs of `pass`, which returns the work it
/// did; the rates (work / s / 1e9).
fn timed(reps: usize, mut pass: impl FnMut() -> Result<f64>) -> Result<Vec<f64>> {
    pass()?;
    (0..reps)
        .map(|_| {
            let t0 = Instant::now();
            let work = pass()?;
            Ok(work / t0.elapsed().as_secs_f64() / 1e9)
        })
        .collect()
}

/// `f` on every thread of `pool`.
fn on_pool(pool: &ThreadPool, f: impl Fn(usize) + Sync) -> Result<()> {
    pool.run(|k, _| f(k)).map_err(|source| Error::Pool {
        what: "probe pass",
        source,
    })
}

/// Runs the probes (see the module docs).
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
    let pool = ThreadPool::new(threads).map_err(|source| Error::Pool {
        what: "starting the thread pool",
        source,
    })?;
    let sums: Vec<AtomicI32> = (0..threads).map(|_| AtomicI32::new(0)).collect();
    let int8 = timed(p.reps, || {
        on_pool(&pool, |k| {
            let v0: [i8; 32] = std::array::from_fn(|b| (b as i8).wrapping_mul(37) ^ k as i8);
            sums[k].store(int8_mac_loop(isa, p.rounds, v0), Ordering::Relaxed);
        })?;
        Ok(threads as f64 * p.rounds as f64 * MACS_PER_ROUND as f64)
    })?;
    let checksum = sums
        .iter()
        .map(|s| s.load(Ordering::Relaxed))
        .fold(0i32, i32::wrapping_add);
    // Per thread: the FMAs its kernel reported and its checksum's bits.
    let f32_out: Vec<(AtomicU64, AtomicU64)> = (0..threads)
        .map(|_| (AtomicU64::new(0), AtomicU64::new(0)))
        .collect();
    let fmas = || {
        f32_out
            .iter()
            .map(|(n, _)| n.load(Ordering::Relaxed))
            .sum::<u64>()
    };
    let f32_runs = timed(p.reps, || {
        on_pool(&pool, |k| {
            // Chains in [1, 2), different on every thread.
            let x0: [f32; F32_CHAINS] =
                std::array::from_fn(|c| 1.0 + ((c * 7 + k * 13) % 64) as f32 / 64.0);
            let r = f32_fma_loop(isa, p.rounds, &x0);
            f32_out[k].0.store(r.fmas, Ordering::Relaxed);
            f32_out[k].1.store(r.checksum.to_bits(), Ordering::Relaxed);
        })?;
        Ok(2.0 * fmas() as f64)
    })?;
    let f32_checksum = f32_out
        .iter()
        .map(|(_, c)| f64::from_bits(c.load(Ordering::Relaxed)))
        .sum();
    let mut header = RunHeader::probe(SCHEMA, threads);
    header.isa = Some(isa.to_string());
    let int8_median = median(&int8);
    Ok(PeakReport {
        header,
        rounds: p.rounds,
        reps: p.reps,
        int8_gmacs_per_s_median: int8_median,
        int8_gops_per_s_median: 2.0 * int8_median,
        int8_gmacs_per_s_runs: int8,
        checksum,
        f32_gflops_median: median(&f32_runs),
        f32_gflops_runs: f32_runs,
        f32_fmas_per_pass: fmas(),
        f32_checksum,
    })
}

impl PeakReport {
    /// Two human-readable lines.
    pub fn table(&self) -> String {
        let isa = self.header.isa.as_deref().unwrap_or_default();
        format!(
            "int8 peak: {:.1} GMAC/s = {:.1} GOPS median ({} threads, {isa})\n\
             f32 peak: {:.1} GFLOP/s = {:.1} GFMA/s median ({} threads, {isa})\n",
            self.int8_gmacs_per_s_median,
            self.int8_gops_per_s_median,
            self.header.threads,
            self.f32_gflops_median,
            self.f32_gflops_median / 2.0,
            self.header.threads,
        )
    }
}
