//! Helpers shared by the micro-benchmarks.

use std::hint::black_box;
use std::time::{Duration, Instant};

/// A deterministic pseudo-random f32 row in `-1..1` (xorshift).
pub fn row(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 40) as f32 / (1u64 << 23) as f32 - 1.0
        })
        .collect()
}

/// Best-of-3 mean time per call of `f`: calls are doubled until a batch
/// takes 50 ms, then three rounds of ~0.2 s each are timed.
#[allow(dead_code)] // `packed_k` times whole products its own way
pub fn time_per_call<R>(mut f: impl FnMut() -> R) -> Duration {
    let mut calls = 1u32;
    loop {
        let t = Instant::now();
        for _ in 0..calls {
            black_box(f());
        }
        if t.elapsed() > Duration::from_millis(50) {
            break;
        }
        calls = calls.saturating_mul(2);
    }
    let target = Duration::from_millis(200);
    (0..3)
        .map(|_| {
            let t = Instant::now();
            let mut done = 0u32;
            while t.elapsed() < target {
                for _ in 0..calls {
                    black_box(f());
                }
                done += calls;
            }
            t.elapsed() / done.max(1)
        })
        .min()
        .unwrap_or_default()
}
