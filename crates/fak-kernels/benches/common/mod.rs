//! Helpers shared by the micro-benchmarks.

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
