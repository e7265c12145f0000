//! `fak bench peak`: int8 multiply-add throughput, the prefill roofline's
//! denominator (`int8 ops per token ÷ peak`).
//!
//! Every thread of the model's persistent pool runs
//! [`fak_kernels::peak::int8_mac_loop`] (register-resident int8 dot
//! products on the chosen ISA) for the same number of rounds:
//!
//! ```text
//! GMAC/s = threads × rounds × 256 / wall time / 1e9      (ops = 2 × MACs)
//! 1 warm-up pass + `reps` passes, median reported
//! ```

use std::sync::atomic::{AtomicI32, Ordering};
use std::time::Instant;

use anyhow::{bail, Context};
use fak_kernels::peak::{int8_mac_loop, MACS_PER_ROUND};
use serde::Serialize;

#[derive(clap::Args)]
pub struct PeakArgs {
    /// Threads (default: all cores).
    #[arg(long, short = 't')]
    threads: Option<usize>,
    /// Rounds per thread per pass (256 int8 multiply-adds each).
    #[arg(long, default_value_t = 4_000_000)]
    rounds: u64,
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
    isa: String,
    threads: usize,
    rounds: u64,
    reps: usize,
    int8_gmacs_per_s_median: f64,
    int8_gops_per_s_median: f64,
    int8_gmacs_per_s_runs: Vec<f64>,
    checksum: i32,
}

pub fn run(a: PeakArgs) -> anyhow::Result<()> {
    if a.rounds == 0 || a.reps == 0 {
        bail!("--rounds and --reps must be at least 1");
    }
    let threads = crate::bench::threads_or_all(a.threads);
    let isa = fak_kernels::isa();
    let pool = fak_kernels::pool::ThreadPool::new(threads).context("starting the thread pool")?;
    let sums: Vec<AtomicI32> = (0..threads).map(|_| AtomicI32::new(0)).collect();
    let pass = || -> anyhow::Result<f64> {
        let t0 = Instant::now();
        pool.run(|k, _| {
            let v0: [i8; 32] = std::array::from_fn(|b| (b as i8).wrapping_mul(37) ^ k as i8);
            sums[k].store(int8_mac_loop(isa, a.rounds, v0), Ordering::Relaxed);
        })
        .context("probe pass")?;
        let dt = t0.elapsed().as_secs_f64();
        let macs = threads as f64 * a.rounds as f64 * MACS_PER_ROUND as f64;
        Ok(macs / dt / 1e9)
    };
    pass()?;
    let mut runs = Vec::with_capacity(a.reps);
    for _ in 0..a.reps {
        runs.push(pass()?);
    }
    let median = crate::bench::median(&runs);
    let checksum = sums
        .iter()
        .map(|s| s.load(Ordering::Relaxed))
        .fold(0i32, i32::wrapping_add);
    let report = Report {
        schema: "fak-bench-peak/1",
        cpu: crate::bench::cpu_model(),
        isa: isa.to_string(),
        threads,
        rounds: a.rounds,
        reps: a.reps,
        int8_gmacs_per_s_median: median,
        int8_gops_per_s_median: 2.0 * median,
        int8_gmacs_per_s_runs: runs,
        checksum,
    };
    if a.json {
        println!("{}", serde_json::to_string(&report)?);
    } else {
        println!(
            "int8 peak: {:.1} GMAC/s = {:.1} GOPS median ({} threads, {})",
            median, report.int8_gops_per_s_median, threads, report.isa
        );
    }
    Ok(())
}
