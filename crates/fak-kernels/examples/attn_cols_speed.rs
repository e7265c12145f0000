//! Times the row-major grouped score kernel (`attn::dot_f32_f16_rows_group`,
//! keys `[row][dim]` at SmolLM2's KV stride 192) against the dims-major one
//! (`attn::dot_f32_f16_cols_group`, each block's keys `[dim][block rows]`)
//! on the same keys, per query-row on the process ISA: `G` queries of head
//! dim 64 over 1024 key rows, in calls of 256 rows (the fleet's KV block)
//! and of 64 rows. Checks first that both give the same bits.
//!
//! `cargo run --release -p fak-kernels --example attn_cols_speed`; best of
//! 21; `FAK_ISA=avx2` for the AVX2 twins.

use std::time::Instant;

use fak_kernels::attn::{self, KvCols, QueryGroup};
use fak_kernels::fp::f32_to_f16;

/// Head dim, row-major KV stride, rows.
const N: usize = 64;
const STRIDE: usize = 192;
const ROWS: usize = 1024;

/// Best of 21 runs of `reps` calls of `f`, in seconds per call.
fn best(reps: usize, mut f: impl FnMut()) -> f64 {
    (0..21)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..reps {
                f();
            }
            t.elapsed().as_secs_f64()
        })
        .fold(f64::INFINITY, f64::min)
        / reps as f64
}

fn main() {
    let rows: Vec<u16> = (0..ROWS * STRIDE)
        .map(|i| f32_to_f16(((i * 7919) % 1000) as f32 / 500.0 - 1.0))
        .collect();
    println!("isa: {}", fak_kernels::isa());
    println!("  G  block | row-major ns/(q,row) GFLOP/s | dims-major ns/(q,row) GFLOP/s | speedup");
    for block in [256usize, 64] {
        // Block b's keys dims-major: dim d of row r at b·N·block + d·block + r.
        let mut cols = vec![0u16; ROWS * N];
        for r in 0..ROWS {
            let (b, rr) = (r / block, r % block);
            for d in 0..N {
                cols[b * N * block + d * block + rr] = rows[r * STRIDE + d];
            }
        }
        for g in [1usize, 3, 4, 7, 12, 24, 48] {
            let q: Vec<f32> = (0..g * N)
                .map(|i| ((i * 31) % 97) as f32 / 97.0 - 0.5)
                .collect();
            let qs = QueryGroup { q: &q, n: N };
            let mut old = vec![0.0f32; g * ROWS];
            let mut new = vec![1.0f32; g * ROWS];
            let run_old = |out: &mut [f32]| {
                for r0 in (0..ROWS).step_by(block) {
                    let (kb, ob) = (&rows[r0 * STRIDE..], &mut out[r0..]);
                    attn::dot_f32_f16_rows_group(qs, kb, STRIDE, block, ob, ROWS);
                }
            };
            let run_new = |out: &mut [f32]| {
                for r0 in (0..ROWS).step_by(block) {
                    let k = KvCols {
                        data: &cols[r0 * N..(r0 + block) * N],
                        dstride: block,
                        n_rows: block,
                        width: N,
                    };
                    attn::dot_f32_f16_cols_group(qs, k, &mut out[r0..], ROWS);
                }
            };
            run_old(&mut old);
            run_new(&mut new);
            let same = old
                .iter()
                .zip(&new)
                .all(|(a, b)| a.to_bits() == b.to_bits());
            assert!(same, "G={g} block={block}: the two kernels' scores differ");
            let reps = 6_000 / g + 1;
            let per = |secs: f64| secs * 1e9 / (g * ROWS) as f64;
            let t_old = per(best(reps, || run_old(&mut old)));
            let t_new = per(best(reps, || run_new(&mut new)));
            let gflops = |ns: f64| 2.0 * N as f64 / ns;
            println!(
                "{g:>3} {block:>6} | {t_old:>20.3} {:>7.1} | {t_new:>21.3} {:>7.1} | {:>6.2}x",
                gflops(t_old),
                gflops(t_new),
                t_old / t_new
            );
        }
    }
}
