//! Times grouped attention scores and value sums over KV rows that live in
//! DRAM, as a fleet's cache does (it outgrows L3): 2048 rows per pass,
//! each pass at a new place in a 96 MiB buffer, in 64-row calls (one KV
//! block each), against 1024 rows that stay in cache.
//!
//! `STRIDE` is the distance between one head's rows in values: 192 is
//! SmolLM2's whole KV row (three 64-wide heads side by side, the old
//! row-major layout); 64 is a head's rows back to back (the head-major
//! layout of `fak_model::KvRowBuf`).
//!
//! Dims-major scores (`attn::dot_f32_f16_cols_group`) read the same bytes
//! as one 64-row block of keys stored dims-major (fak's f16 key layout;
//! meaningful with the default stride 64).
//!
//! `STRIDE=192 cargo run --release -p fak-kernels --example attn_mem`
//! (default 64); best of 7, GMAC/s on one thread.

use std::time::Instant;

use fak_kernels::attn::{self, KvCols, KvRows, QueryGroup};
use fak_kernels::fp::f32_to_f16;

fn main() {
    let n = 64usize;
    let stride: usize = std::env::var("STRIDE")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(64)
        .max(n);
    let big_rows = 96 * 1024 * 1024 / (2 * stride);
    let k: Vec<u16> = (0..big_rows * stride)
        .map(|i| f32_to_f16(((i * 7919) % 1000) as f32 / 500.0 - 1.0))
        .collect();
    println!("isa: {}, row stride {stride} values", fak_kernels::isa());
    let rows = 2048usize;
    for g in [3usize, 12, 48] {
        let q: Vec<f32> = (0..g * n)
            .map(|i| ((i * 31) % 97) as f32 / 97.0 - 0.5)
            .collect();
        let w: Vec<f32> = (0..g * rows).map(|i| (i % 13) as f32 * 0.01).collect();
        let mut scores = vec![0.0f32; g * rows];
        let mut sums = vec![0.0f32; g * n];
        for (label, span) in [("cached", rows), ("dram", big_rows)] {
            let reps = 60_000 / (16 * g) + 1;
            let mut base = 0usize;
            let mut best = [f64::INFINITY; 3];
            for _ in 0..7 {
                for (which, b) in best.iter_mut().enumerate() {
                    let t = Instant::now();
                    for _ in 0..reps {
                        base = (base + rows) % (span - rows + 1);
                        for r0 in (0..rows).step_by(64) {
                            let kb = &k[(base + r0) * stride..];
                            if which == 0 {
                                let qs = QueryGroup { q: &q, n };
                                let out = &mut scores[r0..];
                                attn::dot_f32_f16_rows_group(qs, kb, stride, 64, out, rows);
                            } else if which == 2 {
                                // The same bytes read as one 64-row block
                                // of dims-major keys (64 dims x 64 rows).
                                let qs = QueryGroup { q: &q, n };
                                let out = &mut scores[r0..];
                                let kc = KvCols {
                                    data: kb,
                                    dstride: 64,
                                    n_rows: 64,
                                    width: n,
                                };
                                attn::dot_f32_f16_cols_group(qs, kc, out, rows);
                            } else {
                                let vr = KvRows {
                                    data: kb,
                                    stride,
                                    n_rows: 64,
                                    width: n,
                                };
                                attn::axpy_f16_rows_group(&w[r0..], rows, vr, &mut sums);
                            }
                        }
                    }
                    let macs = (reps * g * rows * n) as f64;
                    *b = b.min(t.elapsed().as_secs_f64() / macs);
                }
            }
            println!(
                "G={g:>2} {label:>6}: scores {:5.2} GMAC/s, dims-major scores {:5.2} GMAC/s, value sums {:5.2} GMAC/s",
                1e-9 / best[0],
                1e-9 / best[2],
                1e-9 / best[1]
            );
        }
    }
}
