//! Times grouped attention scores (`attn::dot_f32_f16_rows_group`) per
//! query-row on the process ISA: `G` queries of head dim 64 over 1024 key
//! rows at SmolLM2's KV stride (192), for the group sizes attention uses
//! (1 token: 3 heads, or 7 for Qwen2.5-0.5B; several tokens or sequences
//! sharing rows: more). Each group runs twice: over the 1024 rows in one
//! call, and in calls of 16 rows (one paged KV block each, as the engine
//! walks a sequence).
//!
//! `cargo run --release -p fak-kernels --example attn_speed`; best of 21.

use std::time::Instant;

use fak_kernels::attn::{self, QueryGroup};
use fak_kernels::fp::f32_to_f16;

fn main() {
    let (n, stride, rows) = (64usize, 192usize, 1024usize);
    let k: Vec<u16> = (0..rows * stride)
        .map(|i| f32_to_f16(((i * 7919) % 1000) as f32 / 500.0 - 1.0))
        .collect();
    println!("isa: {}", fak_kernels::isa());
    for g in [1usize, 3, 4, 6, 7, 8, 12, 24, 48] {
        let q: Vec<f32> = (0..g * n)
            .map(|i| ((i * 31) % 97) as f32 / 97.0 - 0.5)
            .collect();
        let mut out = vec![0.0f32; g * rows];
        let reps = 6_000 / g.max(1) + 1;
        let mut per = [0.0f64; 2];
        for (slot, block) in per.iter_mut().zip([rows, 16]) {
            let best = (0..21)
                .map(|_| {
                    let t = Instant::now();
                    for _ in 0..reps {
                        let qs = QueryGroup { q: &q, n };
                        for r0 in (0..rows).step_by(block) {
                            let (kb, ob) = (&k[r0 * stride..], &mut out[r0..]);
                            attn::dot_f32_f16_rows_group(qs, kb, stride, block, ob, rows);
                        }
                    }
                    t.elapsed().as_secs_f64()
                })
                .fold(f64::INFINITY, f64::min);
            *slot = best * 1e9 / (reps * g * rows) as f64;
        }
        println!(
            "G={g:>3}: {:6.3} ns per (query, row) in one call ({:.2} GFLOP/s), {:6.3} in 16-row calls ({:.2} GFLOP/s)",
            per[0],
            2.0 * n as f64 / per[0],
            per[1],
            2.0 * n as f64 / per[1]
        );
    }
}
