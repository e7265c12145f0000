//! `fak bench bandwidth`: a memory read-bandwidth probe.
//!
//! Decode is bound by how fast the weights stream from memory, so its
//! roofline is `weight bytes per token / read bandwidth`. This probe reads a
//! buffer much larger than the caches with the same persistent thread pool
//! the model uses, each thread summing one contiguous slice:
//!
//! ```text
//! buffer (size MiB of u64) ─ split in T contiguous slices ─► thread k sums slice k
//! GB/s = bytes / wall time of one full pass;  1 warm-up pass + `reps` passes, median reported
//! ```

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use serde::Serialize;

use crate::error::{params, Error, Result};
use crate::{median, threads_or_all, RunHeader};

/// Schema tag of [`BandwidthReport`].
pub const SCHEMA: &str = "fak-bench-bandwidth/1";

/// What `fak bench bandwidth` measures.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Params {
    /// Threads (`None`: all cores).
    pub threads: Option<usize>,
    /// Buffer size in MiB (keep it well above the L3 cache).
    pub size_mib: usize,
    /// Timed passes after one warm-up.
    pub reps: usize,
}

/// The JSON report.
#[derive(Debug, Clone, Serialize)]
pub struct BandwidthReport {
    /// Schema, cpu and threads.
    #[serde(flatten)]
    pub header: RunHeader,
    pub size_mib: usize,
    pub reps: usize,
    pub read_gb_per_s_median: f64,
    pub read_gb_per_s_runs: Vec<f64>,
}

fn sum_slice(s: &[u64]) -> u64 {
    // Four independent accumulators so the loop is bound by loads, not by
    // the add latency chain.
    let mut acc = [0u64; 4];
    let mut chunks = s.chunks_exact(4);
    for c in &mut chunks {
        acc[0] = acc[0].wrapping_add(c[0]);
        acc[1] = acc[1].wrapping_add(c[1]);
        acc[2] = acc[2].wrapping_add(c[2]);
        acc[3] = acc[3].wrapping_add(c[3]);
    }
    let tail: u64 = chunks
        .remainder()
        .iter()
        .fold(0u64, |a, &b| a.wrapping_add(b));
    acc.iter().fold(tail, |a, &b| a.wrapping_add(b))
}

/// Runs the probe (see the module docs).
///
/// # Errors
///
/// A size or `reps` of 0, a buffer that cannot be allocated, thread-pool
/// errors.
pub fn run(p: &Params) -> Result<BandwidthReport> {
    if p.size_mib == 0 || p.reps == 0 {
        return Err(params("--size-mib and --reps must be at least 1"));
    }
    let threads = threads_or_all(p.threads);
    let pool = fak_kernels::pool::ThreadPool::new(threads).map_err(|source| Error::Pool {
        what: "starting the thread pool",
        source,
    })?;
    let n = p
        .size_mib
        .checked_mul(1 << 20)
        .map(|b| b / 8)
        .ok_or_else(|| params("--size-mib is too large"))?;
    let mut buf: Vec<u64> = Vec::new();
    buf.try_reserve_exact(n).map_err(|source| Error::Alloc {
        mib: p.size_mib,
        source,
    })?;
    buf.extend((0..n as u64).map(|i| i.wrapping_mul(0x9E37_79B9_7F4A_7C15)));
    let sums: Vec<AtomicU64> = (0..threads).map(|_| AtomicU64::new(0)).collect();
    let per = n.div_ceil(threads);
    let pass = || -> Result<f64> {
        let t0 = Instant::now();
        pool.run(|k, _| {
            let lo = (k * per).min(n);
            let hi = ((k + 1) * per).min(n);
            sums[k].store(sum_slice(&buf[lo..hi]), Ordering::Relaxed);
        })
        .map_err(|source| Error::Pool {
            what: "bandwidth pass",
            source,
        })?;
        let dt = t0.elapsed().as_secs_f64();
        std::hint::black_box(
            sums.iter()
                .map(|s| s.load(Ordering::Relaxed))
                .fold(0u64, u64::wrapping_add),
        );
        Ok((n * 8) as f64 / dt / 1e9)
    };
    pass()?;
    let mut runs = Vec::with_capacity(p.reps);
    for _ in 0..p.reps {
        runs.push(pass()?);
    }
    Ok(BandwidthReport {
        header: RunHeader::probe(SCHEMA, threads),
        size_mib: p.size_mib,
        reps: p.reps,
        read_gb_per_s_median: median(&runs),
        read_gb_per_s_runs: runs,
    })
}

impl BandwidthReport {
    /// One human-readable line.
    pub fn table(&self) -> String {
        let runs: Vec<String> = self
            .read_gb_per_s_runs
            .iter()
            .map(|r| format!("{r:.1}"))
            .collect();
        format!(
            "read bandwidth: {:.1} GB/s median ({} threads, {} MiB, runs {})\n",
            self.read_gb_per_s_median,
            self.header.threads,
            self.size_mib,
            runs.join(" ")
        )
    }
}

#[cfg(test)]
mod tests {
    use super::sum_slice;

    #[test]
    fn sum_matches_naive() {
        for len in [0usize, 1, 3, 4, 5, 17, 1000] {
            let v: Vec<u64> = (0..len as u64)
                .map(|i| i.wrapping_mul(0x9E37_79B9_7F4A_7C15))
                .collect();
            let naive = v.iter().fold(0u64, |a, &b| a.wrapping_add(b));
            assert_eq!(sum_slice(&v), naive, "len {len}");
        }
    }
}
