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

use anyhow::{bail, Context};
use serde::Serialize;

#[derive(clap::Args)]
pub struct BandwidthArgs {
    /// Threads (default: all cores).
    #[arg(long, short = 't')]
    threads: Option<usize>,
    /// Buffer size in MiB (default 1024; keep it well above the L3 cache).
    #[arg(long, default_value_t = 1024)]
    size_mib: usize,
    /// Timed passes after one warm-up.
    #[arg(long, default_value_t = 5)]
    reps: usize,
    /// Print one JSON object on stdout.
    #[arg(long)]
    json: bool,
}

#[derive(Serialize)]
struct Report {
    schema: &'static str,
    cpu: String,
    threads: usize,
    size_mib: usize,
    reps: usize,
    read_gb_per_s_median: f64,
    read_gb_per_s_runs: Vec<f64>,
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

pub fn run(a: BandwidthArgs) -> anyhow::Result<()> {
    if a.size_mib == 0 || a.reps == 0 {
        bail!("--size-mib and --reps must be at least 1");
    }
    let threads = crate::bench::threads_or_all(a.threads);
    let n = a
        .size_mib
        .checked_mul(1 << 20)
        .map(|b| b / 8)
        .context("--size-mib is too large")?;
    let mut buf: Vec<u64> = Vec::new();
    buf.try_reserve_exact(n)
        .with_context(|| format!("cannot allocate {} MiB", a.size_mib))?;
    buf.extend((0..n as u64).map(|i| i.wrapping_mul(0x9E37_79B9_7F4A_7C15)));
    let pool = fak_kernels::pool::ThreadPool::new(threads).context("starting the thread pool")?;
    let sums: Vec<AtomicU64> = (0..threads).map(|_| AtomicU64::new(0)).collect();
    let per = n.div_ceil(threads);
    let pass = || -> anyhow::Result<f64> {
        let t0 = Instant::now();
        pool.run(|k, _| {
            let lo = (k * per).min(n);
            let hi = ((k + 1) * per).min(n);
            sums[k].store(sum_slice(&buf[lo..hi]), Ordering::Relaxed);
        })
        .context("bandwidth pass")?;
        let dt = t0.elapsed().as_secs_f64();
        std::hint::black_box(
            sums.iter()
                .map(|s| s.load(Ordering::Relaxed))
                .fold(0u64, u64::wrapping_add),
        );
        Ok((n * 8) as f64 / dt / 1e9)
    };
    pass()?;
    let mut runs = Vec::with_capacity(a.reps);
    for _ in 0..a.reps {
        runs.push(pass()?);
    }
    let median = crate::bench::median(&runs);
    let report = Report {
        schema: "fak-bench-bandwidth/1",
        cpu: crate::bench::cpu_model(),
        threads,
        size_mib: a.size_mib,
        reps: a.reps,
        read_gb_per_s_median: median,
        read_gb_per_s_runs: runs,
    };
    if a.json {
        println!("{}", serde_json::to_string(&report)?);
    } else {
        let runs: Vec<String> = report
            .read_gb_per_s_runs
            .iter()
            .map(|r| format!("{r:.1}"))
            .collect();
        println!(
            "read bandwidth: {:.1} GB/s median ({} threads, {} MiB, runs {})",
            median,
            threads,
            a.size_mib,
            runs.join(" ")
        );
    }
    Ok(())
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
