//! The packed IQ4_XS product (`fak_kernels::packed`, `PackedFormat::IQ4XS`):
//! every ISA this CPU can run gives, for every element, exactly the bits
//! of the scalar `vec_dot_iq4_xs_q8_k` of its weight and token rows, whose
//! float steps the packed layout keeps (one per 32-value sub-block,
//! `acc + (d_w · d_x · f32(ls)) · f32(S)`). Odd shapes, every token tile
//! width, row sub-ranges and extreme levels, scales and activations change
//! nothing.
//!
//! Weights are random blocks (every scale and index byte random);
//! activations are Q8_K rows as the model makes them (`quantize_acts`,
//! whose block sums the VNNI tile reads), plus hand-made extreme ones.

use fak_gguf::GgmlType;
use fak_kernels::blocks::{BlockIQ4_XS, BlockQ8_K};
use fak_kernels::fp::f32_to_f16;
use fak_kernels::packed::{packed_gemm_with_isa, PackedFormat, PackedMatrix, GROUP_ROWS};
use fak_kernels::{quantize_acts, scalar, Isa};
mod common;
use common::check_row_ranges;
use proptest::prelude::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const QK_K: usize = 256;

/// `n` random IQ4_XS blocks.
fn weights(rng: &mut StdRng, n: usize) -> Vec<u8> {
    (0..n)
        .flat_map(|_| {
            let mut qs = [0u8; 128];
            rng.fill(&mut qs[..]);
            BlockIQ4_XS {
                d: f32_to_f16(rng.gen_range(1e-4f32..0.05)),
                scales_h: rng.gen(),
                scales_l: rng.gen(),
                qs,
            }
            .to_bytes()
        })
        .collect()
}

/// `n_tok` Q8_K rows of `nb` blocks, quantized from random floats.
fn acts(rng: &mut StdRng, n_tok: usize, nb: usize) -> Vec<u8> {
    let x: Vec<f32> = (0..n_tok * nb * QK_K)
        .map(|_| rng.gen_range(-2.0f32..2.0))
        .collect();
    let mut a = vec![0u8; n_tok * nb * BlockQ8_K::BYTES];
    quantize_acts(GgmlType::Q8_K, &x, &mut a).unwrap();
    a
}

/// Packs `w` and asserts every ISA's output (row stride `stride`, NaN past
/// `rows` left alone) has the scalar `vec_dot`'s bits.
fn assert_scalar_bits(w: &[u8], a: &[u8], (nb, rows, n_tok): (usize, usize, usize), what: &str) {
    let n = nb * QK_K;
    let (wr, ar) = (nb * BlockIQ4_XS::BYTES, nb * BlockQ8_K::BYTES);
    let p = PackedMatrix::pack(PackedFormat::IQ4XS, w, rows, n).unwrap();
    let stride = rows + 3;
    let mut want = vec![f32::NAN; n_tok * stride];
    for t in 0..n_tok {
        for j in 0..rows {
            let (wj, at) = (&w[j * wr..(j + 1) * wr], &a[t * ar..(t + 1) * ar]);
            want[t * stride + j] = scalar::vec_dot_iq4_xs_q8_k(n, wj, at).unwrap();
        }
    }
    for isa in Isa::available() {
        let mut out = vec![f32::NAN; n_tok * stride];
        packed_gemm_with_isa(isa, &p, 0..rows, (a, n_tok), &mut out, stride).unwrap();
        for (i, (got, want)) in out.iter().zip(&want).enumerate() {
            assert_eq!(
                got.to_bits(),
                want.to_bits(),
                "{what}: {isa:?} nb {nb} rows {rows} n_tok {n_tok}: token {} row {}: {got} vs scalar {want}",
                i / stride,
                i % stride
            );
        }
    }
}

fn check_random(seed: u64, (nb, rows, n_tok): (usize, usize, usize)) {
    let mut rng = StdRng::seed_from_u64(seed);
    let w = weights(&mut rng, rows * nb);
    let a = acts(&mut rng, n_tok, nb);
    assert_scalar_bits(&w, &a, (nb, rows, n_tok), &format!("seed {seed}"));
}

/// One super-block and several, every token tile width (1-8) and more,
/// one to five groups.
#[test]
fn every_isa_gives_the_scalar_vec_dot_bits() {
    for seed in [1, 2, 3, rand::random()] {
        for nb in [1usize, 2, 3, 7] {
            for rows in [8usize, 16, 40] {
                for n_tok in [0usize, 1, 2, 3, 5, 8, 9, 17] {
                    check_random(seed, (nb, rows, n_tok));
                }
            }
        }
    }
}

/// Level 113 or -127 in every position (indices 15 or 0), the largest
/// scales of either sign (`ls − 32` of 31 and -32), against activations
/// of all -128 or all 127 with their block sums.
#[test]
fn extreme_levels_scales_and_activations_give_the_scalar_bits() {
    let (nb, rows) = (2usize, 8usize);
    for (fill, scales_l, scales_h) in [
        (0xFFu8, 0xFFu8, 0xFFFFu16),
        (0x00, 0x00, 0x0000),
        (0xF0, 0x0F, 0xAAAA),
    ] {
        let w: Vec<u8> = (0..rows * nb)
            .flat_map(|j| {
                BlockIQ4_XS {
                    d: f32_to_f16(0.01 * (j % rows + 1) as f32),
                    scales_h,
                    scales_l: [scales_l; 4],
                    qs: [fill; 128],
                }
                .to_bytes()
            })
            .collect();
        for x in [-128i8, 127] {
            for n_tok in [1usize, 2, 5, 9] {
                let a: Vec<u8> = (0..n_tok * nb)
                    .flat_map(|_| {
                        BlockQ8_K {
                            d: 0.02,
                            qs: [x; 256],
                            bsums: [16 * i16::from(x); 16],
                        }
                        .to_bytes()
                    })
                    .collect();
                let what = format!("indices {fill:#x} scales {scales_l:#x}/{scales_h:#x} acts {x}");
                assert_scalar_bits(&w, &a, (nb, rows, n_tok), &what);
            }
        }
    }
}

/// Group-aligned row ranges give exactly the columns of the whole
/// product; IQ4_XS has a packed format, against Q8_K.
#[test]
fn row_ranges_match_the_whole_product() {
    assert_eq!(
        PackedFormat::of(GgmlType::IQ4_XS),
        Some(PackedFormat::IQ4XS)
    );
    assert_eq!(PackedFormat::IQ4XS.act_ty(), GgmlType::Q8_K);
    let mut rng = StdRng::seed_from_u64(9);
    let (rows, nb, n_tok) = (48usize, 2usize, 7usize);
    let w = weights(&mut rng, rows * nb);
    let a = acts(&mut rng, n_tok, nb);
    let p = PackedMatrix::pack(PackedFormat::IQ4XS, &w, rows, nb * QK_K).unwrap();
    check_row_ranges(&p, &a, n_tok, rows, "IQ4XS");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// Any shape and any blocks: every ISA gives the scalar `vec_dot`'s
    /// bits.
    #[test]
    fn any_shape_gives_the_scalar_bits(
        nb in 1usize..6,
        groups in 1usize..4,
        n_tok in 0usize..12,
        seed in any::<u64>(),
    ) {
        check_random(seed, (nb, groups * GROUP_ROWS, n_tok));
    }
}
