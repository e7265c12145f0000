//! The dims-major score kernel (`attn::dot_f32_f16_cols_group`, keys at
//! `d * dstride + r`) gives, bit for bit on every ISA this CPU can run,
//! the scores that the scalar row-major kernel
//! (`attn::scalar::dot_f32_f16_rows_group`) gives on the row-major copy of
//! the same keys; and it clips short buffers instead of panicking.
//!
//! Inputs: random queries and f16 keys (three fixed seeds plus one new
//! seed per run, printed on failure, and a proptest), with negative zeros,
//! subnormals, the largest finite f16 and infinities among the keys, and
//! zeros and f32 subnormals among the queries. Shapes: head dims 64, 128,
//! 256 and odd small ones, 0–299 rows (whole and partial 8- and 16-row
//! vectors and 64-row tiles), `dstride` from `n_rows` up, groups of 1–20
//! queries (every pass size of both SIMD twins).
//!
//! Equality is of the `f32` bits, except that any NaN equals any NaN
//! (Rust leaves NaN payloads unspecified; an infinite key can make a NaN).

use fak_kernels::attn::{self, scalar, KvCols, QueryGroup};
use fak_kernels::fp::{f16_to_f32, f32_to_f16};
use fak_kernels::Isa;
use proptest::prelude::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

fn seeds() -> [u64; 4] {
    [1, 2, 3, rand::random()]
}

/// A random f16 key: mostly in `[-3, 3)`, sometimes a special value.
fn key(rng: &mut StdRng) -> u16 {
    match rng.gen_range(0..400) {
        0..=3 => 0x8000,                             // -0.0
        4..=7 => 0x0000,                             // +0.0
        8..=15 => rng.gen_range(1..0x0400) | 0x8000, // negative subnormal
        16..=23 => rng.gen_range(1..0x0400),         // positive subnormal
        24 => 0x7BFF,                                // 65504
        25 => 0xFBFF,                                // -65504
        26 => 0x7C00,                                // +inf
        27 => 0xFC00,                                // -inf
        _ => f32_to_f16(rng.gen_range(-3.0f32..3.0)),
    }
}

/// A random query value: mostly in `[-2, 2)`, sometimes a zero or an f32
/// subnormal.
fn query(rng: &mut StdRng) -> f32 {
    match rng.gen_range(0..100) {
        0 => 0.0,
        1 => -0.0,
        2 => f32::from_bits(rng.gen_range(1..0x0080_0000)),
        _ => rng.gen_range(-2.0f32..2.0),
    }
}

/// `f32` bits, with every NaN the same.
fn bits(x: &[f32]) -> Vec<u32> {
    x.iter()
        .map(|v| if v.is_nan() { u32::MAX } else { v.to_bits() })
        .collect()
}

/// Marks outputs the kernel must not write.
const UNTOUCHED: f32 = 12345.0;

/// Keys of `n_rows` rows of `width` dims, dims-major at `dstride`, and
/// their row-major copy at row stride `width`.
fn keys(rng: &mut StdRng, width: usize, dstride: usize, n_rows: usize) -> (Vec<u16>, Vec<u16>) {
    let rows: Vec<u16> = (0..n_rows * width).map(|_| key(rng)).collect();
    let mut cols = vec![0x7E00u16; width * dstride]; // NaN padding: never read
    for r in 0..n_rows {
        for d in 0..width {
            cols[d * dstride + r] = rows[r * width + d];
        }
    }
    (cols, rows)
}

/// Checks one shape on every ISA against the scalar row-major kernel, and
/// that outputs past `n_rows` in each query's row stay untouched.
fn check(rng: &mut StdRng, (n, g, n_rows, dstride): (usize, usize, usize, usize), tag: &str) {
    let (cols, rows) = keys(rng, n, dstride, n_rows);
    let q: Vec<f32> = (0..g * n).map(|_| query(rng)).collect();
    let qs = QueryGroup { q: &q, n };
    let out_stride = n_rows + 3;
    let mut want = vec![UNTOUCHED; g * out_stride];
    scalar::dot_f32_f16_rows_group(qs, &rows, n, n_rows, &mut want, out_stride);
    let k = KvCols {
        data: &cols,
        dstride,
        n_rows,
        width: n,
    };
    let mut twin = vec![UNTOUCHED; g * out_stride];
    scalar::dot_f32_f16_cols_group(qs, k, &mut twin, out_stride);
    let shape = format!("n={n} g={g} rows={n_rows} dstride={dstride} {tag}");
    assert_eq!(bits(&twin), bits(&want), "scalar twin {shape}");
    for isa in Isa::available() {
        let mut got = vec![UNTOUCHED; g * out_stride];
        attn::dot_f32_f16_cols_group_with_isa(isa, qs, k, &mut got, out_stride);
        assert_eq!(bits(&got), bits(&want), "{isa} {shape}");
        for gi in 0..g {
            let row = &got[gi * out_stride..(gi + 1) * out_stride];
            assert!(
                row[n_rows..].iter().all(|&v| v == UNTOUCHED),
                "{isa} {shape}"
            );
        }
    }
}

/// Every group size 1–20 at SmolLM2's head dim over row counts around
/// each vector and tile edge and the fleet's block sizes (64, 256), and
/// the wider and odd head dims with fewer group sizes.
#[test]
fn scores_are_bit_identical_to_scalar_row_major_on_every_isa() {
    const ROWS: [usize; 16] = [
        0, 1, 7, 8, 9, 15, 16, 17, 33, 63, 64, 65, 127, 129, 256, 299,
    ];
    for seed in seeds() {
        let mut rng = StdRng::seed_from_u64(seed);
        let tag = format!("seed={seed}");
        for n_rows in ROWS {
            for g in 1..=20 {
                check(&mut rng, (64, g, n_rows, n_rows), &tag);
            }
            for (n, extra) in [(1, 0), (3, 5), (13, 1), (128, 64), (256, 0), (65, 16)] {
                for g in [1, 3, 4, 5, 9] {
                    check(&mut rng, (n, g, n_rows, n_rows + extra), &tag);
                }
            }
        }
        // A block's capacity larger than its filled rows (dstride 256).
        for n_rows in [1, 40, 200] {
            check(&mut rng, (64, 3, n_rows, 256), &tag);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    /// Random shapes: dims 1–20 or a model head dim, 0–299 rows, `dstride`
    /// up to 40 past `n_rows`, 1–20 queries.
    #[test]
    fn random_shapes_are_bit_identical_to_scalar_row_major(
        n in prop_oneof![1usize..=20, Just(64usize), Just(128), Just(256)],
        n_rows in 0usize..300,
        extra in 0usize..40,
        g in 1usize..=20,
        seed in any::<u64>(),
    ) {
        let mut rng = StdRng::seed_from_u64(seed);
        check(&mut rng, (n, g, n_rows, n_rows + extra), &format!("seed={seed}"));
    }
}

/// Each score is one running sum in dim order with a fused multiply-add
/// per term, `acc = fma(q[d], k[d], acc)` from `0.0` (not a multiply,
/// a rounding, then an add): checked for the scalar row-major kernel,
/// which the test above ties every other kernel and ISA to.
#[test]
fn scores_are_fused_running_sums() {
    for seed in seeds() {
        let mut rng = StdRng::seed_from_u64(seed);
        for (n, g, n_rows) in [(64usize, 3usize, 40usize), (128, 2, 17), (7, 5, 9)] {
            let rows: Vec<u16> = (0..n_rows * n)
                .map(|_| f32_to_f16(rng.gen_range(-3.0f32..3.0)))
                .collect();
            let q: Vec<f32> = (0..g * n).map(|_| rng.gen_range(-2.0f32..2.0)).collect();
            let mut got = vec![UNTOUCHED; g * n_rows];
            let qs = QueryGroup { q: &q, n };
            scalar::dot_f32_f16_rows_group(qs, &rows, n, n_rows, &mut got, n_rows);
            for gi in 0..g {
                for r in 0..n_rows {
                    let mut acc = 0.0f32;
                    for d in 0..n {
                        acc = q[gi * n + d].mul_add(f16_to_f32(rows[r * n + d]), acc);
                    }
                    let at = gi * n_rows + r;
                    assert_eq!(
                        got[at].to_bits(),
                        acc.to_bits(),
                        "seed {seed} n={n} query {gi} row {r}"
                    );
                }
            }
        }
    }
}

/// Short buffers clip the call to the rows that fit; nothing panics.
#[test]
fn short_buffers_clip_rows_and_never_panic() {
    let mut rng = StdRng::seed_from_u64(7);
    let (n, g, n_rows, dstride) = (64usize, 3usize, 40usize, 48usize);
    let (cols, rows) = keys(&mut rng, n, dstride, n_rows);
    let q: Vec<f32> = (0..g * n).map(|_| query(&mut rng)).collect();
    let qs = QueryGroup { q: &q, n };
    let out_stride = n_rows;
    let mut want = vec![UNTOUCHED; g * out_stride];
    scalar::dot_f32_f16_rows_group(qs, &rows, n, n_rows, &mut want, out_stride);
    let k = KvCols {
        data: &cols,
        dstride,
        n_rows,
        width: n,
    };
    for isa in [Isa::Scalar].into_iter().chain(Isa::available()) {
        let run = |k: KvCols<'_>, out: &mut [f32], out_stride: usize| {
            attn::dot_f32_f16_cols_group_with_isa(isa, qs, k, out, out_stride);
        };
        // Keys cut inside the last dim: only the rows whose last dim fits.
        let cut = (n - 1) * dstride + 21;
        let mut got = vec![UNTOUCHED; g * out_stride];
        run(
            KvCols {
                data: &cols[..cut],
                ..k
            },
            &mut got,
            out_stride,
        );
        for gi in 0..g {
            let (o, w) = (gi * out_stride, &want[gi * out_stride..]);
            assert_eq!(bits(&got[o..o + 21]), bits(&w[..21]), "{isa}");
            assert!(got[o + 21..o + n_rows].iter().all(|&v| v == UNTOUCHED));
        }
        // Keys shorter than the last dim's start: no row.
        let mut got = vec![UNTOUCHED; g * out_stride];
        let short = KvCols {
            data: &cols[..(n - 1) * dstride],
            ..k
        };
        run(short, &mut got, out_stride);
        assert!(got.iter().all(|&v| v == UNTOUCHED), "{isa}");
        // The last query's output row holds only 5 values: 5 rows each.
        let mut got = vec![UNTOUCHED; 2 * out_stride + 5];
        run(k, &mut got, out_stride);
        for gi in 0..g {
            let (o, w) = (gi * out_stride, &want[gi * out_stride..]);
            assert_eq!(bits(&got[o..o + 5]), bits(&w[..5]), "{isa}");
        }
        assert!(got[5..out_stride].iter().all(|&v| v == UNTOUCHED));
        // An output stride below n_rows: the rows of the stride.
        let mut got = vec![UNTOUCHED; g * 10];
        run(k, &mut got, 10);
        for gi in 0..g {
            let w = &want[gi * out_stride..];
            assert_eq!(bits(&got[gi * 10..gi * 10 + 10]), bits(&w[..10]), "{isa}");
        }
        // n_rows past dstride: rows past dstride would be the next dim's.
        let mut got = vec![UNTOUCHED; g * 60];
        run(KvCols { n_rows: 60, ..k }, &mut got, 60);
        for gi in 0..g {
            let w = &want[gi * out_stride..];
            assert_eq!(bits(&got[gi * 60..gi * 60 + n_rows]), bits(&w[..n_rows]));
            assert!(got[gi * 60 + dstride..gi * 60 + 60]
                .iter()
                .all(|&v| v == UNTOUCHED));
        }
        // Narrower keys than queries: the dims of the keys (a zip).
        let narrow: Vec<f32> = q.chunks(n).flat_map(|c| c[..20].to_vec()).collect();
        let mut want20 = vec![UNTOUCHED; g * out_stride];
        let q20 = QueryGroup { q: &narrow, n: 20 };
        let mut rows20 = Vec::new();
        for r in 0..n_rows {
            rows20.extend_from_slice(&rows[r * n..r * n + 20]);
        }
        scalar::dot_f32_f16_rows_group(q20, &rows20, 20, n_rows, &mut want20, out_stride);
        let mut got = vec![UNTOUCHED; g * out_stride];
        run(KvCols { width: 20, ..k }, &mut got, out_stride);
        assert_eq!(bits(&got), bits(&want20), "{isa}");
        // Degenerate shapes and huge strides: no panic, no write.
        let mut got = vec![UNTOUCHED; 8];
        let empty = QueryGroup { q: &q, n: 0 };
        attn::dot_f32_f16_cols_group_with_isa(isa, empty, k, &mut got, 4);
        run(
            KvCols {
                dstride: usize::MAX,
                ..k
            },
            &mut got,
            4,
        );
        run(k, &mut got, usize::MAX);
        run(KvCols { data: &[], ..k }, &mut got, 4);
        assert!(got.iter().all(|&v| v == UNTOUCHED), "{isa}");
        // No key dims: every score is the empty sum, 0.0.
        run(KvCols { width: 0, ..k }, &mut got, 2);
        assert!(got[..6].iter().all(|&v| v.to_bits() == 0), "{isa}");
    }
}
