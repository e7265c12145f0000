//! The Q8_0 attention kernels (`fak_kernels::attn`) agree bit for bit
//! with their scalar twins on every ISA this CPU can run, and the scalar
//! twins compute the f32 running sums over the dequantized values that the
//! f16 kernels compute over f16 values (a reference written out below).
//!
//! Inputs are fresh random blocks and queries (three fixed seeds plus one
//! new seed per run, printed on failure), over group sizes 1-9, row counts
//! 0-41 (whole and partial 8-row tiles), head dims 32-288 (288 is past the
//! AVX2 tile and runs the scalar twin) and row strides wider than a head.

use fak_gguf::GgmlType;
use fak_kernels::attn::{self, scalar, KvRowsQ8, QueryGroup};
use fak_kernels::blocks::BlockQ8_0;
use fak_kernels::fp::{f16_to_f32, f32_to_f16};
use fak_kernels::{quantize_acts_with_isa, Isa};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

fn seeds() -> [u64; 4] {
    [1, 2, 3, rand::random()]
}

fn blocks(rng: &mut StdRng, n: usize) -> Vec<BlockQ8_0> {
    (0..n)
        .map(|_| BlockQ8_0 {
            d: f32_to_f16(rng.gen_range(1e-4f32..0.05)),
            qs: std::array::from_fn(|_| rng.gen_range(-127i8..=127)),
        })
        .collect()
}

fn f32s(rng: &mut StdRng, n: usize) -> Vec<f32> {
    (0..n).map(|_| rng.gen_range(-2.0f32..2.0)).collect()
}

/// Value `i` of a row of blocks, dequantized.
fn value(row: &[BlockQ8_0], i: usize) -> f32 {
    let b = &row[i / 32];
    f16_to_f32(b.d) * f32::from(b.qs[i % 32])
}

/// Shapes: (head dim, extra blocks of stride beyond the head).
const SHAPES: [(usize, usize); 6] = [(32, 0), (64, 0), (64, 2), (128, 4), (256, 0), (288, 1)];

#[test]
fn scores_match_scalar_twin_and_reference_on_every_isa() {
    for seed in seeds() {
        let mut rng = StdRng::seed_from_u64(seed);
        for (width, extra) in SHAPES {
            let nb = width / 32;
            let stride = nb + extra;
            for g in [1usize, 2, 3, 4, 5, 7, 9] {
                for n_rows in [0usize, 1, 7, 8, 9, 16, 23, 41] {
                    let data = blocks(&mut rng, n_rows * stride + nb);
                    let q = f32s(&mut rng, g * width);
                    let out_stride = n_rows + 3;
                    let rows = KvRowsQ8 {
                        data: &data,
                        stride,
                        n_rows,
                        width,
                    };
                    let qs = QueryGroup { q: &q, n: width };
                    let mut want = vec![f32::NAN; g * out_stride];
                    scalar::dot_f32_q8_0_rows_group(qs, rows, &mut want, out_stride);
                    for j in 0..g {
                        for r in 0..n_rows {
                            let row = &data[r * stride..r * stride + nb];
                            let mut acc = 0.0f32;
                            for i in 0..width {
                                acc = q[j * width + i].mul_add(value(row, i), acc);
                            }
                            let got = want[j * out_stride + r];
                            assert_eq!(got.to_bits(), acc.to_bits(), "seed {seed} ref g{j} r{r}");
                        }
                    }
                    for isa in Isa::available() {
                        let mut got = vec![f32::NAN; g * out_stride];
                        attn::dot_f32_q8_0_rows_group_with_isa(isa, qs, rows, &mut got, out_stride);
                        let same = got
                            .iter()
                            .zip(&want)
                            .all(|(a, b)| a.to_bits() == b.to_bits());
                        assert!(
                            same,
                            "seed {seed} {isa:?} width {width} stride {stride} g {g} rows {n_rows}"
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn value_sums_match_scalar_twin_and_reference_on_every_isa() {
    for seed in seeds() {
        let mut rng = StdRng::seed_from_u64(seed);
        for (width, extra) in SHAPES {
            let nb = width / 32;
            let stride = nb + extra;
            for g in [1usize, 2, 3, 5, 9] {
                for n_rows in [0usize, 1, 7, 8, 9, 16, 23, 41] {
                    let data = blocks(&mut rng, n_rows * stride + nb);
                    let w_stride = n_rows + 2;
                    let w = f32s(&mut rng, g * w_stride);
                    let start = f32s(&mut rng, g * width);
                    let rows = KvRowsQ8 {
                        data: &data,
                        stride,
                        n_rows,
                        width,
                    };
                    let mut want = start.clone();
                    scalar::axpy_q8_0_rows_group(&w, w_stride, rows, &mut want);
                    let mut reference = start.clone();
                    for j in 0..g {
                        for r in 0..n_rows {
                            let row = &data[r * stride..r * stride + nb];
                            for i in 0..width {
                                reference[j * width + i] += w[j * w_stride + r] * value(row, i);
                            }
                        }
                    }
                    let same = |a: &[f32], b: &[f32]| {
                        a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits())
                    };
                    assert!(same(&want, &reference), "seed {seed} reference");
                    for isa in Isa::available() {
                        let mut got = start.clone();
                        attn::axpy_q8_0_rows_group_with_isa(isa, &w, w_stride, rows, &mut got);
                        assert!(
                            same(&got, &want),
                            "seed {seed} {isa:?} width {width} stride {stride} g {g} rows {n_rows}"
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn short_inputs_skip_rows_without_panicking() {
    let mut rng = StdRng::seed_from_u64(9);
    let data = blocks(&mut rng, 10);
    let q = f32s(&mut rng, 2 * 64);
    for isa in Isa::available() {
        // 9 rows of 2 blocks at stride 2 need 18 blocks: only 5 fit.
        let rows = KvRowsQ8 {
            data: &data,
            stride: 2,
            n_rows: 9,
            width: 64,
        };
        let mut out = vec![f32::NAN; 2 * 9];
        attn::dot_f32_q8_0_rows_group_with_isa(isa, QueryGroup { q: &q, n: 64 }, rows, &mut out, 9);
        assert!(out[..5].iter().all(|x| x.is_finite()), "{isa:?}");
        assert!(out[5..9].iter().all(|x| x.is_nan()), "{isa:?}");
        let mut sums = vec![0.0f32; 2 * 64];
        let w = vec![1.0f32; 3];
        attn::axpy_q8_0_rows_group_with_isa(isa, &w, 1, rows, &mut sums);
        // Weights hold 1 row for the first query (w_stride 1, 2 queries).
        let mut one = vec![0.0f32; 64];
        scalar::axpy_q8_0_rows_group(&w[..1], 1, KvRowsQ8 { n_rows: 1, ..rows }, &mut one);
        assert_eq!(&sums[..64], &one[..], "{isa:?}");
    }
}

#[test]
fn quantizer_is_llama_cpp_runtime_q8_0_on_every_isa() {
    for seed in seeds() {
        let mut rng = StdRng::seed_from_u64(seed);
        let mut x: Vec<f32> = (0..256).map(|_| rng.gen_range(-3.0f32..3.0)).collect();
        x[40..72].iter_mut().for_each(|v| *v = 0.0);
        let mut bytes = vec![0u8; 8 * BlockQ8_0::BYTES];
        quantize_acts_with_isa(Isa::Scalar, GgmlType::Q8_0, &x, &mut bytes).expect("quantize");
        let want: Vec<BlockQ8_0> = bytes
            .chunks_exact(BlockQ8_0::BYTES)
            .map(|c| BlockQ8_0::from_bytes(c.try_into().expect("34 bytes")))
            .collect();
        let mut got = vec![BlockQ8_0 { d: 0, qs: [0; 32] }; 8];
        attn::quantize_q8_0_blocks(&x, &mut got);
        assert_eq!(got, want, "seed {seed}");
    }
}

#[test]
fn hadamard_rotation_is_orthonormal_and_self_inverse() {
    let mut rng = StdRng::seed_from_u64(5);
    for n in [2usize, 4, 32, 64, 128, 256] {
        // The explicit Sylvester matrix, H[i][j] = (-1)^popcount(i & j) / √n.
        let h = |i: usize, j: usize| {
            let s = if (i & j).count_ones().is_multiple_of(2) {
                1.0
            } else {
                -1.0
            };
            s / (n as f64).sqrt()
        };
        let q = f32s(&mut rng, 3 * n);
        let k = f32s(&mut rng, 3 * n);
        let (mut hq, mut hk) = (q.clone(), k.clone());
        attn::hadamard_rotate(&mut hq, n);
        attn::hadamard_rotate(&mut hk, n);
        for c in 0..3 {
            for i in 0..n {
                let want: f64 = (0..n).map(|j| h(i, j) * f64::from(q[c * n + j])).sum();
                assert!(
                    (f64::from(hq[c * n + i]) - want).abs() < 1e-5,
                    "n {n} H·q[{i}]"
                );
            }
            let dot = |a: &[f32], b: &[f32]| -> f64 {
                a.iter()
                    .zip(b)
                    .map(|(x, y)| f64::from(*x) * f64::from(*y))
                    .sum()
            };
            let (d0, d1) = (
                dot(&q[c * n..][..n], &k[c * n..][..n]),
                dot(&hq[c * n..][..n], &hk[c * n..][..n]),
            );
            assert!(
                (d0 - d1).abs() < 1e-4 * (1.0 + d0.abs()),
                "n {n}: {d0} vs {d1}"
            );
        }
        let mut back = hq.clone();
        attn::hadamard_rotate(&mut back, n);
        for (a, b) in back.iter().zip(&q) {
            assert!((a - b).abs() < 1e-5, "n {n}: self-inverse");
        }
    }
    // Not a power of two: untouched.
    let mut x = vec![1.0f32, 2.0, 3.0];
    attn::hadamard_rotate(&mut x, 3);
    assert_eq!(x, [1.0, 2.0, 3.0]);
}
