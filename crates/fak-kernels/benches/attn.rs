//! Micro-benchmark: the two attention kernels of one KV head over a long
//! context, per ISA, at the shapes a verifying pass gives them.
//!
//! Each case is `queries × rows` at a head dim, walked as the forward pass
//! walks a paged cache: calls of one 64-row block each. Scores take
//! dims-major keys (`dot_f32_f16_cols_group`), value sums row-major values
//! (`axpy_f16_rows_group`). GMAC/s counts one multiply-add per (query,
//! row, dim). A `-cold` case cycles through 56 heads' worth of keys and
//! values (28 layers × 2 KV heads, 86 MB: more than the last-level cache),
//! as a forward pass does.
//!
//! Run with `cargo bench -p fak-kernels --bench attn`; a trailing argument
//! keeps only the cases whose label contains it (`-- hd128`). Each case is
//! timed over enough calls to take ~0.2 s, best of 3.

mod common;

use std::hint::black_box;

use common::{row as noise, time_per_call};

use fak_kernels::attn::{
    axpy_f16_rows_group_with_isa, dot_f32_f16_cols_group_with_isa, KvCols, KvRows, QueryGroup,
};
use fak_kernels::Isa;
use half::f16;

/// Rows per cache block (fak-engine's default block size).
const BLOCK: usize = 64;

fn main() {
    let filter = std::env::args().skip(1).find(|a| !a.starts_with('-'));
    // (label, head dim, queries): one decode token of Qwen2.5 (6 query
    // heads per KV head), an 8-token verifying pass, SmolLM2 (hd 64).
    let cases = [
        ("hd128-q6", 128, 6, 1),
        ("hd128-q48", 128, 48, 1),
        ("hd128-q48-cold", 128, 48, 56),
        ("hd64-q3", 64, 3, 1),
        ("hd64-q24", 64, 24, 1),
    ];
    let rows = 3008;
    let isas: Vec<Isa> = [Isa::Scalar, Isa::Avx2, Isa::Avx512]
        .into_iter()
        .filter(|i| i.is_available())
        .collect();
    println!(
        "{:<10} {:>6} {:>8} {:>8} {:>10} {:>8}",
        "case", "rows", "kernel", "isa", "us/head", "GMAC/s"
    );
    for (label, hd, g, heads) in cases {
        if filter.as_deref().is_some_and(|f| !label.contains(f)) {
            continue;
        }
        let q = noise(g * hd, 1);
        let to_f16 = |v: Vec<f32>| -> Vec<u16> {
            v.into_iter().map(|x| f16::from_f32(x).to_bits()).collect()
        };
        // Keys dims-major per block, values row-major per block.
        let keys: Vec<Vec<u16>> = (0..heads)
            .map(|h| to_f16(noise(rows * hd, 2 + 2 * h as u64)))
            .collect();
        let vals: Vec<Vec<u16>> = (0..heads)
            .map(|h| to_f16(noise(rows * hd, 3 + 2 * h as u64)))
            .collect();
        let (mut hk, mut hv) = (0, 0);
        let w = noise(g * rows, 4);
        let mut scores = vec![0.0f32; g * rows];
        let mut out = vec![0.0f32; g * hd];
        let macs = (g * rows * hd) as f64;
        for &isa in &isas {
            let t = time_per_call(|| {
                hk = (hk + 1) % heads;
                for b in (0..rows).step_by(BLOCK) {
                    let m = BLOCK.min(rows - b);
                    let kc = KvCols {
                        data: &keys[hk][b * hd..],
                        dstride: BLOCK,
                        n_rows: m,
                        width: hd,
                    };
                    let qs = QueryGroup { q: &q, n: hd };
                    dot_f32_f16_cols_group_with_isa(isa, qs, kc, &mut scores[b..], rows);
                }
                black_box(&scores);
            });
            let gmacs = macs / t.as_secs_f64() / 1e9;
            let us = t.as_secs_f64() * 1e6;
            println!(
                "{label:<10} {rows:>6} {:>8} {isa:>8?} {us:>10.1} {gmacs:>8.2}",
                "scores"
            );
            let t = time_per_call(|| {
                hv = (hv + 1) % heads;
                out.fill(0.0);
                for b in (0..rows).step_by(BLOCK) {
                    let m = BLOCK.min(rows - b);
                    let vr = KvRows {
                        data: &vals[hv][b * hd..],
                        stride: hd,
                        n_rows: m,
                        width: hd,
                    };
                    axpy_f16_rows_group_with_isa(isa, &w[b..], rows, vr, &mut out);
                }
                black_box(&out);
            });
            let gmacs = macs / t.as_secs_f64() / 1e9;
            let us = t.as_secs_f64() * 1e6;
            println!(
                "{label:<10} {rows:>6} {:>8} {isa:>8?} {us:>10.1} {gmacs:>8.2}",
                "values"
            );
        }
    }
}
