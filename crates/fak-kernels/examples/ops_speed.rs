//! Times the row operations of `fak_kernels::ops` and the one-row
//! attention kernels of `fak_kernels::attn` on every available ISA,
//! at the sizes of SmolLM2-135M's forward pass:
//!
//! ```text
//!   dot_f32_f16  n = 64    (one attention score: head dim 64)
//!   axpy_f16     n = 64    (one weighted value row)
//!   softmax      n = 256   (scores of 256 positions)
//!   rms_norm     n = 576   (hidden size)
//!   swiglu       n = 1536  (FFN size)
//!   add_assign   n = 576   (residual)
//! ```
//!
//! Each figure is the best of 5 batches, in ns per call. Run with
//! `cargo run --release -p fak-kernels --example ops_speed`.

use std::hint::black_box;
use std::time::Instant;

use fak_kernels::fp::f32_to_f16;
use fak_kernels::Isa;
use fak_kernels::{attn, ops};

/// Best-of-5 nanoseconds per call of `f`, each batch `calls` calls long.
fn time(calls: u32, mut f: impl FnMut()) -> f64 {
    (0..5)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..calls {
                f();
            }
            t.elapsed().as_secs_f64() * 1e9 / f64::from(calls)
        })
        .fold(f64::INFINITY, f64::min)
}

/// A deterministic row of `n` values in `[-2, 2)`.
fn row(n: usize, seed: u32) -> Vec<f32> {
    (0..n)
        .map(|i| {
            let h = (i as u32 ^ seed).wrapping_mul(2_654_435_761) >> 8;
            h as f32 / (1u32 << 24) as f32 * 4.0 - 2.0
        })
        .collect()
}

fn main() {
    let q = row(64, 1);
    let k: Vec<u16> = row(64, 2).into_iter().map(f32_to_f16).collect();
    let scores: Vec<f32> = row(256, 3).iter().map(|v| v * 5.0).collect();
    let x = row(576, 4);
    let w = row(576, 5);
    let gate: Vec<f32> = row(1536, 6).iter().map(|v| v * 4.0).collect();
    let up = row(1536, 7);

    println!("{:<22} {:>10} {:>10}", "op", "isa", "ns/call");
    for isa in Isa::available() {
        let mut out64 = vec![0.0f32; 64];
        let mut s = scores.clone();
        let mut out = vec![0.0f32; 576];
        let mut g = gate.clone();
        let mut res = x.clone();
        let rows: [(&str, f64); 6] = [
            (
                "dot_f32_f16 n=64",
                time(2_000_000, || {
                    black_box(attn::dot_f32_f16_with_isa(
                        isa,
                        black_box(&q),
                        black_box(&k),
                    ));
                }),
            ),
            (
                "axpy_f16 n=64",
                time(2_000_000, || {
                    attn::axpy_f16_with_isa(isa, 1e-3, black_box(&k), black_box(&mut out64));
                }),
            ),
            (
                "softmax n=256",
                time(200_000, || {
                    s.copy_from_slice(&scores);
                    ops::softmax_with_isa(isa, black_box(&mut s));
                }),
            ),
            (
                "rms_norm n=576",
                time(200_000, || {
                    ops::rms_norm_with_isa(isa, black_box(&x), &w, 1e-5, black_box(&mut out));
                }),
            ),
            (
                "swiglu n=1536",
                time(50_000, || {
                    g.copy_from_slice(&gate);
                    ops::swiglu_with_isa(isa, black_box(&mut g), &up);
                }),
            ),
            (
                "add_assign n=576",
                time(500_000, || {
                    ops::add_assign_with_isa(isa, black_box(&mut res), &w);
                }),
            ),
        ];
        for (name, ns) in rows {
            println!("{name:<22} {:>10} {ns:>10.1}", isa.name());
        }
    }
}
