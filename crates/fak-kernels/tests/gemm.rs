//! `gemm` is bit-identical, element by element, to `vec_dot` on the same
//! ISA, for every tile shape and position, and rejects bad shapes.

mod common;

use common::{random_weights, GRID_TYPES};
use fak_gguf::GgmlType;
use fak_kernels::gemm::{gemm, gemm_with_isa};
use fak_kernels::{quantize_row_to_vec, vec_dot_type, vec_dot_with_isa, Isa, KernelError};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// Types with AVX2 tiles first, then ones that fall back to `vec_dot`;
/// the tests take the codebook formats (one decode per row) after them.
const TYPES: [GgmlType; 14] = [
    GgmlType::Q8_0,
    GgmlType::Q4_K,
    GgmlType::Q6_K,
    GgmlType::Q4_0,
    GgmlType::Q4_1,
    GgmlType::Q5_0,
    GgmlType::Q5_1,
    GgmlType::Q5_K,
    GgmlType::Q8_K,
    GgmlType::F16,
    GgmlType::F32,
    GgmlType::MXFP4,
    GgmlType::NVFP4,
    GgmlType::Q1_0,
];

const ROWS: [usize; 8] = [1, 2, 3, 4, 5, 7, 8, 13];
const TOKS: [usize; 8] = [1, 2, 3, 4, 5, 7, 9, 16];

/// `rows` random weight rows and `toks` quantized random activation rows
/// of 3 blocks each: `(n, w, a, w_row_bytes, a_row_bytes)`.
fn operands(
    ty: GgmlType,
    rows: usize,
    toks: usize,
    seed: u64,
) -> (usize, Vec<u8>, Vec<u8>, usize, usize) {
    let mut rng = StdRng::seed_from_u64(seed);
    let n = 3 * ty.block_size().max(32);
    let w: Vec<u8> = (0..rows)
        .flat_map(|_| random_weights(ty, n, &mut rng))
        .collect();
    let aty = vec_dot_type(ty);
    let a: Vec<u8> = (0..toks)
        .flat_map(|_| {
            let x: Vec<f32> = (0..n).map(|_| rng.gen_range(-2.0f32..2.0)).collect();
            quantize_row_to_vec(aty, &x).unwrap()
        })
        .collect();
    (n, w.clone(), a.clone(), w.len() / rows, a.len() / toks)
}

/// Every element of every `n_rows × n_tok` product is the bits of
/// `vec_dot_with_isa` of its rows, on every available ISA.
#[test]
fn every_element_is_vec_dot_bits() {
    let (max_r, max_t) = (13, 16);
    for (k, ty) in TYPES.into_iter().chain(GRID_TYPES).enumerate() {
        let (n, w, a, wrb, arb) = operands(ty, max_r, max_t, 100 + k as u64);
        for isa in Isa::available() {
            let want: Vec<Vec<u32>> = (0..max_t)
                .map(|t| {
                    (0..max_r)
                        .map(|j| {
                            let (wr, ar) = (&w[j * wrb..(j + 1) * wrb], &a[t * arb..(t + 1) * arb]);
                            vec_dot_with_isa(isa, ty, n, wr, ar).unwrap().to_bits()
                        })
                        .collect()
                })
                .collect();
            for rows in ROWS {
                for toks in TOKS {
                    let stride = rows + 3;
                    let mut out = vec![f32::NAN; toks * stride];
                    gemm_with_isa(
                        isa,
                        ty,
                        n,
                        &w[..rows * wrb],
                        rows,
                        &a[..toks * arb],
                        toks,
                        &mut out,
                        stride,
                    )
                    .unwrap();
                    for t in 0..toks {
                        for j in 0..rows {
                            assert_eq!(
                                out[t * stride + j].to_bits(),
                                want[t][j],
                                "{ty} {isa:?} rows {rows} toks {toks}: element ({t}, {j})"
                            );
                        }
                        // The padding past n_rows is never written.
                        assert!(out[t * stride + rows..(t + 1) * stride]
                            .iter()
                            .all(|v| v.is_nan()));
                    }
                }
            }
        }
    }
}

/// A product over any sub-range of rows and tokens gives the same bits as
/// the full product (tile-position invariance), and `gemm` equals
/// `gemm_with_isa(isa())`.
#[test]
fn sub_ranges_match_the_full_product() {
    let (rows, toks) = (13, 16);
    for (k, ty) in TYPES.into_iter().chain(GRID_TYPES).enumerate() {
        let (n, w, a, wrb, arb) = operands(ty, rows, toks, 200 + k as u64);
        for isa in Isa::available() {
            let mut full = vec![0.0f32; toks * rows];
            gemm_with_isa(isa, ty, n, &w, rows, &a, toks, &mut full, rows).unwrap();
            if isa == fak_kernels::isa() {
                let mut dflt = vec![0.0f32; toks * rows];
                gemm(ty, n, &w, rows, &a, toks, &mut dflt, rows).unwrap();
                assert!(full
                    .iter()
                    .zip(&dflt)
                    .all(|(x, y)| x.to_bits() == y.to_bits()));
            }
            for (r0, r1) in [(0, 1), (1, 4), (3, 8), (5, 13), (12, 13), (2, 11)] {
                for (t0, t1) in [(0, 1), (1, 2), (3, 10), (7, 16), (15, 16), (1, 16)] {
                    let (nr, nt) = (r1 - r0, t1 - t0);
                    let mut out = vec![0.0f32; nt * nr];
                    gemm_with_isa(
                        isa,
                        ty,
                        n,
                        &w[r0 * wrb..r1 * wrb],
                        nr,
                        &a[t0 * arb..t1 * arb],
                        nt,
                        &mut out,
                        nr,
                    )
                    .unwrap();
                    for t in 0..nt {
                        for j in 0..nr {
                            assert_eq!(
                                out[t * nr + j].to_bits(),
                                full[(t0 + t) * rows + r0 + j].to_bits(),
                                "{ty} {isa:?} rows {r0}..{r1} toks {t0}..{t1}"
                            );
                        }
                    }
                }
            }
        }
    }
}

/// The AVX2 tiles stay close to the scalar reference (they differ only in
/// float accumulation order).
#[test]
fn avx2_is_close_to_scalar() {
    if !Isa::Avx2.is_available() {
        return;
    }
    let (rows, toks) = (5, 7);
    for (k, ty) in TYPES.into_iter().chain(GRID_TYPES).enumerate() {
        let (n, w, a, _, _) = operands(ty, rows, toks, 300 + k as u64);
        let mut s = vec![0.0f32; rows * toks];
        let mut v = vec![0.0f32; rows * toks];
        gemm_with_isa(Isa::Scalar, ty, n, &w, rows, &a, toks, &mut s, rows).unwrap();
        gemm_with_isa(Isa::Avx2, ty, n, &w, rows, &a, toks, &mut v, rows).unwrap();
        let scale = s.iter().fold(1.0f32, |m, x| m.max(x.abs()));
        for (x, y) in s.iter().zip(&v) {
            assert!((x - y).abs() <= 1e-4 * scale, "{ty}: {x} vs {y}");
        }
    }
}

/// Empty products succeed without touching `out`.
#[test]
fn empty_products_are_ok() {
    let (n, w, a, _, _) = operands(GgmlType::Q8_0, 2, 2, 1);
    let mut out = [7.0f32; 2];
    gemm(GgmlType::Q8_0, n, &w, 2, &[], 0, &mut out, 2).unwrap();
    gemm(GgmlType::Q8_0, n, &[], 0, &a, 2, &mut out, 0).unwrap();
    assert_eq!(out, [7.0; 2]);
}

#[test]
fn bad_shapes_are_errors() {
    let ty = GgmlType::Q8_0;
    let (n, w, a, wrb, arb) = operands(ty, 3, 2, 2);
    let mut out = vec![0.0f32; 6];
    let len_err = |r: Result<(), KernelError>| match r {
        Err(KernelError::Length { operand, .. }) => operand,
        other => panic!("expected a length error, got {other:?}"),
    };
    use fak_kernels::Operand;
    assert_eq!(
        len_err(gemm(ty, n, &w[..2 * wrb + 1], 3, &a, 2, &mut out, 3)),
        Operand::WeightRow
    );
    assert_eq!(
        len_err(gemm(ty, n, &w, 3, &a[..arb], 2, &mut out, 3)),
        Operand::ActivationRow
    );
    assert_eq!(
        len_err(gemm(ty, n, &w, 3, &a, 2, &mut out[..5], 3)),
        Operand::FloatOutput
    );
    assert_eq!(
        len_err(gemm(ty, n, &w, 3, &a, 2, &mut out, 2)),
        Operand::FloatOutput
    );
    // One token needs only n_rows values, whatever the stride.
    gemm(ty, n, &w, 3, &a[..arb], 1, &mut out[..3], 0).unwrap();
    assert!(matches!(
        gemm(ty, n + 1, &w, 3, &a, 2, &mut out, 3),
        Err(KernelError::PartialBlock { .. })
    ));
    assert!(matches!(
        gemm(GgmlType::I8, 256, &[], 0, &[], 0, &mut out, 3),
        Err(KernelError::Unsupported { .. })
    ));
    if !Isa::Avx512.is_available() {
        assert!(matches!(
            gemm_with_isa(Isa::Avx512, ty, n, &w, 3, &a, 2, &mut out, 3),
            Err(KernelError::IsaUnavailable { .. })
        ));
    }
}

/// The F16 and BF16 tiles (4 rows × 6 tokens on AVX-512, 2 × 6 on AVX2)
/// give every element the scalar twin's `vec_dot` bits for row lengths with and without a
/// part past the last 32-element chunk, every tile remainder, products
/// over several blocks of widened tokens (6 on AVX2, 48 on AVX-512), and values
/// across each format's range (subnormals, large magnitudes, signed
/// zeros).
#[test]
fn half_tiles_are_vec_dot_bits_at_any_length() {
    for ty in [GgmlType::F16, GgmlType::BF16] {
        half_tiles_match(ty, Values::Extremes);
    }
}

/// BF16 over values of a model's ranges (normal, none tiny), where CPUs
/// with AVX-512 BF16 run `vdpbf16ps` tiles: still the scalar twin's bits.
#[test]
fn bf16_tiles_over_model_ranges_are_vec_dot_bits() {
    half_tiles_match(GgmlType::BF16, Values::Normal);
}

/// The values a half-tile test draws.
#[derive(Clone, Copy, PartialEq)]
enum Values {
    /// Subnormals, signed zeros and the largest values among normal ones.
    Extremes,
    /// Normal values in `±[2^-20, 8)` and zeros.
    Normal,
}

fn half_tiles_match(ty: GgmlType, values: Values) {
    let mut rng = StdRng::seed_from_u64(7);
    let bits = |rng: &mut StdRng| -> u16 {
        if values == Values::Normal {
            let x = rng.gen_range(-8.0f32..8.0) * 2f32.powi(-rng.gen_range(0..18));
            return if rng.gen_range(0..10) == 0 {
                0
            } else {
                half::bf16::from_f32(x).to_bits()
            };
        }
        let sign = rng.gen::<u16>() & 0x8000;
        let x = rng.gen_range(-3.0f32..3.0);
        let (subnormal, largest, normal) = match ty {
            GgmlType::F16 => (0x0400u16, 0x7bffu16, half::f16::from_f32(x).to_bits()),
            // bf16's largest finite value would overflow every sum: one
            // near f16's keeps the large products finite.
            _ => (0x0080u16, 0x477fu16, half::bf16::from_f32(x).to_bits()),
        };
        match rng.gen_range(0..8) {
            0 => rng.gen_range(0..subnormal) | sign,
            1 => 0x8000,
            2 => largest ^ sign,
            _ => normal,
        }
    };
    for n in [8usize, 32, 40, 109, 576] {
        let (rows, toks) = (9, 53);
        let row = |rng: &mut StdRng| -> Vec<u8> {
            (0..n).flat_map(|_| bits(rng).to_le_bytes()).collect()
        };
        let w: Vec<u8> = (0..rows).flat_map(|_| row(&mut rng)).collect();
        let a: Vec<u8> = (0..toks).flat_map(|_| row(&mut rng)).collect();
        for isa in Isa::available() {
            for (r, t) in [
                (1, 1),
                (4, 3),
                (5, 2),
                (9, 7),
                (3, 1),
                (8, 6),
                (2, 13),
                (9, 53),
            ] {
                let stride = r + 1;
                let mut out = vec![f32::NAN; t * stride];
                gemm_with_isa(
                    isa,
                    ty,
                    n,
                    &w[..r * 2 * n],
                    r,
                    &a[..t * 2 * n],
                    t,
                    &mut out,
                    stride,
                )
                .unwrap();
                for ti in 0..t {
                    for j in 0..r {
                        // The scalar twin's bits, on every ISA.
                        let want = vec_dot_with_isa(
                            Isa::Scalar,
                            ty,
                            n,
                            &w[j * 2 * n..(j + 1) * 2 * n],
                            &a[ti * 2 * n..(ti + 1) * 2 * n],
                        )
                        .unwrap();
                        assert_eq!(
                            out[ti * stride + j].to_bits(),
                            want.to_bits(),
                            "{ty:?} {isa:?} n {n} {r}×{t}: ({ti}, {j})"
                        );
                    }
                    assert!(out[ti * stride + r].is_nan());
                }
            }
        }
    }
}
