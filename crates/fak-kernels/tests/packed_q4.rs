//! The packed Q4_0, Q4_1, Q5_1, IQ4_NL and MXFP4 products (`fak_kernels::packed`,
//! `PackedFormat::Q4_0` / `Q4_1` / `Q5_1` / `IQ4NL` / `MXFP4`): every ISA this CPU can run
//! gives, for every element, exactly the bits of the scalar `vec_dot` of
//! its weight and token rows (`fak_kernels::scalar::vec_dot_q4_0_q8_0` /
//! `vec_dot_q4_1_q8_1` / `vec_dot_q5_1_q8_1` / `vec_dot_iq4_nl_q8_0`), which are the bits of
//! the arithmetic written out
//! below from the unpacked blocks. Odd shapes (one block, many blocks,
//! every token tile width, products past the stack's sum table, weights
//! over several chunks and past the prefetch size), row sub-ranges and
//! extreme quants change nothing; bad shapes are typed errors.
//!
//! Inputs are fresh random blocks (fixed seeds plus one new seed per run,
//! and proptest's cases); all quant bytes are random (activation quants
//! include -128).

use fak_gguf::GgmlType;
use fak_kernels::blocks::{
    BlockIQ4_NL, BlockMXFP4, BlockQ4_0, BlockQ4_1, BlockQ5_1, BlockQ8_0, BlockQ8_1,
};
use fak_kernels::fp::{f16_to_f32, f32_to_f16};
use fak_kernels::packed::{
    packed_gemm, packed_gemm_with_isa, PackedFormat, PackedMatrix, GROUP_ROWS,
};
use fak_kernels::{quantize_acts, scalar, Isa, KernelError};
mod common;
use common::check_row_ranges;
use proptest::prelude::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const FORMATS: [PackedFormat; 5] = [
    PackedFormat::Q4_0,
    PackedFormat::Q4_1,
    PackedFormat::Q5_1,
    PackedFormat::IQ4NL,
    PackedFormat::MXFP4,
];

fn seeds() -> [u64; 4] {
    [1, 2, 3, rand::random()]
}

fn half(rng: &mut StdRng, lo: f32) -> u16 {
    f32_to_f16(rng.gen_range(lo..0.05))
}

/// `n` random weight blocks of `format` (Q4_1's and Q5_1's mins of
/// either sign).
fn weights(format: PackedFormat, rng: &mut StdRng, n: usize) -> Vec<u8> {
    let mut out = Vec::new();
    for _ in 0..n {
        match format {
            PackedFormat::Q4_0 => out.extend(
                BlockQ4_0 {
                    d: half(rng, 1e-4),
                    qs: rng.gen(),
                }
                .to_bytes(),
            ),
            PackedFormat::IQ4NL => out.extend(
                BlockIQ4_NL {
                    d: half(rng, 1e-4),
                    qs: rng.gen(),
                }
                .to_bytes(),
            ),
            // Every exponent whose scale an f16 holds (2^-24 to 2^15).
            PackedFormat::MXFP4 => out.extend(
                BlockMXFP4 {
                    e: rng.gen_range(104..=143),
                    qs: rng.gen(),
                }
                .to_bytes(),
            ),
            PackedFormat::Q5_1 => out.extend(
                BlockQ5_1 {
                    d: half(rng, 1e-4),
                    m: half(rng, -0.05),
                    qh: rng.gen(),
                    qs: rng.gen(),
                }
                .to_bytes(),
            ),
            _ => out.extend(
                BlockQ4_1 {
                    d: half(rng, 1e-4),
                    m: half(rng, -0.05),
                    qs: rng.gen(),
                }
                .to_bytes(),
            ),
        }
    }
    out
}

/// `n` random activation blocks for `format` (Q8_0, or Q8_1 with a random
/// `s`); every quant byte random.
fn acts(format: PackedFormat, rng: &mut StdRng, n: usize) -> Vec<u8> {
    let mut out = Vec::new();
    for _ in 0..n {
        let qs: [i8; 32] = std::array::from_fn(|_| rng.gen());
        match format {
            PackedFormat::Q4_0 | PackedFormat::IQ4NL | PackedFormat::MXFP4 => out.extend(
                BlockQ8_0 {
                    d: half(rng, 1e-4),
                    qs,
                }
                .to_bytes(),
            ),
            _ => out.extend(
                BlockQ8_1 {
                    d: half(rng, 1e-4),
                    s: half(rng, -0.05),
                    qs,
                }
                .to_bytes(),
            ),
        }
    }
    out
}

/// Σ q·x over one block: the integer part of both formats' products.
fn int_dot<Q: Copy + Into<i32>>(q: &[Q], x: &[i8]) -> i32 {
    q.iter()
        .zip(x)
        .map(|(&q, &x)| q.into() * i32::from(x))
        .sum()
}

/// The arithmetic of the module diagram over one row pair, from the
/// unpacked GGUF blocks: Q4_0 `acc + (f32(s) · d_w) · d_x`, IQ4_NL `acc +
/// (d_w · d_x) · f32(s)`, Q4_1 and Q5_1 `acc + ((d_w · d_x) · f32(s) + m_w · s_x)`,
/// blocks in order from 0.0.
fn written_out(format: PackedFormat, w: &[u8], a: &[u8]) -> f32 {
    let (wb, ab) = (format.ty().type_size(), format.act_ty().type_size());
    let mut acc = 0.0f32;
    for (wb, ab) in w.chunks_exact(wb).zip(a.chunks_exact(ab)) {
        if format == PackedFormat::Q4_0 {
            let (x, y) = (
                BlockQ4_0::from_bytes(wb.try_into().unwrap()),
                BlockQ8_0::from_bytes(ab.try_into().unwrap()),
            );
            let s = int_dot(&x.quants(), &y.qs);
            acc += (s as f32 * f16_to_f32(x.d)) * f16_to_f32(y.d);
        } else if format == PackedFormat::IQ4NL {
            let (x, y) = (
                BlockIQ4_NL::from_bytes(wb.try_into().unwrap()),
                BlockQ8_0::from_bytes(ab.try_into().unwrap()),
            );
            let s = int_dot(&x.quants(), &y.qs);
            acc += (f16_to_f32(x.d) * f16_to_f32(y.d)) * s as f32;
        } else if format == PackedFormat::MXFP4 {
            let (x, y) = (
                BlockMXFP4::from_bytes(wb.try_into().unwrap()),
                BlockQ8_0::from_bytes(ab.try_into().unwrap()),
            );
            let s = int_dot(&x.quants(), &y.qs);
            acc += (fak_kernels::fp::e8m0_to_f32_half(x.e) * f16_to_f32(y.d)) * s as f32;
        } else if format == PackedFormat::Q5_1 {
            let (x, y) = (
                BlockQ5_1::from_bytes(wb.try_into().unwrap()),
                BlockQ8_1::from_bytes(ab.try_into().unwrap()),
            );
            let s = int_dot(&x.quants(), &y.qs);
            let dd = f16_to_f32(x.d) * f16_to_f32(y.d);
            acc += dd * s as f32 + f16_to_f32(x.m) * f16_to_f32(y.s);
        } else {
            let (x, y) = (
                BlockQ4_1::from_bytes(wb.try_into().unwrap()),
                BlockQ8_1::from_bytes(ab.try_into().unwrap()),
            );
            let s = int_dot(&x.quants(), &y.qs);
            let dd = f16_to_f32(x.d) * f16_to_f32(y.d);
            acc += dd * s as f32 + f16_to_f32(x.m) * f16_to_f32(y.s);
        }
    }
    acc
}

/// The scalar `vec_dot` of one row pair (the bits every ISA must give).
fn scalar_dot(format: PackedFormat, n: usize, w: &[u8], a: &[u8]) -> f32 {
    match format {
        PackedFormat::Q4_0 => scalar::vec_dot_q4_0_q8_0(n, w, a).unwrap(),
        PackedFormat::IQ4NL => scalar::vec_dot_iq4_nl_q8_0(n, w, a).unwrap(),
        PackedFormat::MXFP4 => scalar::vec_dot_mxfp4_q8_0(n, w, a).unwrap(),
        PackedFormat::Q5_1 => scalar::vec_dot_q5_1_q8_1(n, w, a).unwrap(),
        _ => scalar::vec_dot_q4_1_q8_1(n, w, a).unwrap(),
    }
}

/// Packs `w` (`rows` rows of `nb` blocks) and asserts that every ISA
/// gives, in an output of row stride `stride` (NaN past `rows` left
/// alone), the scalar `vec_dot`'s bits for every (token, row), and that
/// those equal [`written_out`]'s.
fn assert_scalar_bits(
    format: PackedFormat,
    (w, a): (&[u8], &[u8]),
    (nb, rows, n_tok): (usize, usize, usize),
    stride: usize,
    what: &str,
) {
    let n = nb * 32;
    let (wr, ar) = (
        nb * format.ty().type_size(),
        nb * format.act_ty().type_size(),
    );
    let p = PackedMatrix::pack(format, w, rows, n).unwrap();
    assert_eq!((p.rows(), p.n(), p.format()), (rows, n, format));
    // The GGUF size, but MXFP4's, whose f16 scales take one byte more
    // than its E8M0 exponents.
    let gguf = w.len() / format.ty().type_size()
        * if format == PackedFormat::MXFP4 {
            18
        } else {
            format.ty().type_size()
        };
    assert_eq!(p.bytes(), gguf, "{format:?}: the packed size");
    let mut want = vec![f32::NAN; n_tok * stride];
    for t in 0..n_tok {
        for j in 0..rows {
            let (wj, at) = (&w[j * wr..(j + 1) * wr], &a[t * ar..(t + 1) * ar]);
            let v = scalar_dot(format, n, wj, at);
            assert_eq!(
                v.to_bits(),
                written_out(format, wj, at).to_bits(),
                "{what}: {format:?} the scalar vec_dot is the written-out arithmetic"
            );
            want[t * stride + j] = v;
        }
    }
    for isa in Isa::available() {
        let mut out = vec![f32::NAN; n_tok * stride];
        packed_gemm_with_isa(isa, &p, 0..rows, (a, n_tok), &mut out, stride).unwrap();
        for (i, (got, want)) in out.iter().zip(&want).enumerate() {
            assert_eq!(
                got.to_bits(),
                want.to_bits(),
                "{what}: {format:?} {isa:?} nb {nb} rows {rows} n_tok {n_tok}: \
                 token {} row {}: {got} vs scalar {want}",
                i / stride,
                i % stride
            );
        }
    }
}

/// Random rows of the given shape, checked by [`assert_scalar_bits`].
fn check_random(format: PackedFormat, seed: u64, (nb, rows, n_tok): (usize, usize, usize)) {
    let mut rng = StdRng::seed_from_u64(seed);
    let w = weights(format, &mut rng, rows * nb);
    let a = acts(format, &mut rng, n_tok * nb);
    let what = format!("seed {seed}");
    assert_scalar_bits(format, (&w, &a), (nb, rows, n_tok), rows + 3, &what);
}

/// One block and several, every token tile width (1-8) and more, one to
/// five groups.
#[test]
fn every_isa_gives_the_scalar_vec_dot_bits() {
    for seed in seeds() {
        for format in FORMATS {
            for nb in [1usize, 2, 3, 7, 18] {
                for rows in [8usize, 16, 40] {
                    for n_tok in [0usize, 1, 2, 3, 4, 5, 6, 7, 8, 9, 11, 17] {
                        check_random(format, seed, (nb, rows, n_tok));
                    }
                }
            }
        }
    }
}

/// The AVX2 loop's edges: Q4_0 sums tables larger than the stack's
/// (1,024 entries, 8 per block of each started 8-token tile: the
/// per-thread table, for one token of 520 blocks and 9 tokens of 240;
/// 11 tokens of 48 blocks fill 768), groups over several 64 KiB chunks (a group of 240
/// blocks is 34,560 bytes of Q4_0), and more than 1 MiB of weights (the
/// first token tile of a chunk asks for them ahead).
#[test]
fn wide_rows_chunks_and_large_weights_give_the_scalar_bits() {
    for format in FORMATS {
        for (nb, rows, n_tok) in [
            (520usize, 8usize, 1usize),
            (520, 16, 3),
            (48, 24, 11),
            (240, 24, 9),
            (240, 256, 9),
            (240, 256, 1),
        ] {
            check_random(format, 11, (nb, rows, n_tok));
        }
    }
}

/// Activations as the model makes them (`quantize_acts` of random
/// floats: Q8_1's `s` then matches its quants).
#[test]
fn quantized_activations_give_the_scalar_bits() {
    for format in FORMATS {
        let mut rng = StdRng::seed_from_u64(5);
        let (nb, rows, n_tok) = (18usize, 32usize, 6usize);
        let w = weights(format, &mut rng, rows * nb);
        let x: Vec<f32> = (0..n_tok * nb * 32)
            .map(|_| rng.gen_range(-2.0f32..2.0))
            .collect();
        let mut a = vec![0u8; n_tok * nb * format.act_ty().type_size()];
        quantize_acts(format.act_ty(), &x, &mut a).unwrap();
        assert_scalar_bits(format, (&w, &a), (nb, rows, n_tok), rows, "quantized");
    }
}

/// Quants at the ends of their ranges: every nibble 15 (or 0, or mixed;
/// Q5_1's high bits likewise) against activation quants all -128 or all
/// 127. With 15 · -128 in every product, a block's eight steps sum to
/// -30,720 in the AVX2 tile's `i16` lanes, the most they can hold here
/// (Q5_1's 31 · -128 would not fit: its tile widens every two steps); IQ4_NL's nibbles 0 (level -127)
/// against -128 make its level tile's `maddubs` pairs 32,512, the most
/// they reach.
#[test]
fn extreme_quants_give_the_scalar_bits() {
    let (nb, rows) = (2usize, 8usize);
    for format in FORMATS {
        for (wfill, afill) in [(0xFFu8, -128i8), (0xFF, 127), (0x00, -128), (0xF0, 127)] {
            let w: Vec<u8> = (0..rows * nb)
                .flat_map(|j| {
                    let d = f32_to_f16(0.01 * (j % rows + 1) as f32);
                    match format {
                        PackedFormat::Q4_0 => BlockQ4_0 { d, qs: [wfill; 16] }.to_bytes().to_vec(),
                        PackedFormat::IQ4NL => {
                            BlockIQ4_NL { d, qs: [wfill; 16] }.to_bytes().to_vec()
                        }
                        PackedFormat::MXFP4 => BlockMXFP4 {
                            e: 104 + (j % 40) as u8,
                            qs: [wfill; 16],
                        }
                        .to_bytes()
                        .to_vec(),
                        PackedFormat::Q5_1 => BlockQ5_1 {
                            d,
                            m: f32_to_f16(-0.03),
                            qh: [wfill; 4],
                            qs: [wfill; 16],
                        }
                        .to_bytes()
                        .to_vec(),
                        _ => BlockQ4_1 {
                            d,
                            m: f32_to_f16(-0.03),
                            qs: [wfill; 16],
                        }
                        .to_bytes()
                        .to_vec(),
                    }
                })
                .collect();
            for n_tok in [1usize, 2, 5, 8, 9] {
                let a: Vec<u8> = (0..n_tok * nb)
                    .flat_map(|_| match format {
                        PackedFormat::Q4_0 | PackedFormat::IQ4NL | PackedFormat::MXFP4 => {
                            BlockQ8_0 {
                                d: f32_to_f16(0.02),
                                qs: [afill; 32],
                            }
                            .to_bytes()
                            .to_vec()
                        }
                        _ => BlockQ8_1 {
                            d: f32_to_f16(0.02),
                            s: f32_to_f16(0.02 * 32.0 * f32::from(afill)),
                            qs: [afill; 32],
                        }
                        .to_bytes()
                        .to_vec(),
                    })
                    .collect();
                let what = format!("weights {wfill:#x} acts {afill}");
                assert_scalar_bits(format, (&w, &a), (nb, rows, n_tok), rows, &what);
            }
        }
    }
}

/// Block sums of 14-16 significant bits against scales with full f16
/// mantissas. `d_w · d_x` is exact in f32 (two 11-bit mantissas), and so
/// is `f32(s) · d_w` while `s` has at most 13 significant bits, so with
/// typical random blocks Q4_0's `(f32(s) · d_w) · d_x` and `(d_w · d_x) ·
/// f32(s)` round the same exact product once and agree; here `f32(s) ·
/// d_w` rounds, and only the scalar order gives the scalar bits. Every
/// product of a block has one sign (nibbles 0 or 15, activation quants of
/// 100-127 in size, signed to match), so `|s|` reaches 2^14-2^16.
#[test]
fn large_block_sums_give_the_scalar_bits() {
    for seed in seeds() {
        for format in FORMATS {
            let mut rng = StdRng::seed_from_u64(seed);
            let (nb, rows, n_tok) = (6usize, 16usize, 9usize);
            let mut w = weights(format, &mut rng, rows * nb);
            let wb = format.ty().type_size();
            let qs_at = wb - 16;
            // Each block: nibbles all 0 or all 15; full-mantissa scales.
            let high: Vec<bool> = (0..rows * nb).map(|_| rng.gen()).collect();
            for (blk, &h) in w.chunks_exact_mut(wb).zip(&high) {
                let d = f32_to_f16(rng.gen_range(1e-3f32..2e-3) * (1.0 + rng.gen::<f32>()));
                if format == PackedFormat::MXFP4 {
                    // MXFP4's scale is its first byte, a power of two.
                    blk[0] = rng.gen_range(104..=143);
                } else {
                    blk[..2].copy_from_slice(&d.to_le_bytes());
                }
                blk[qs_at..].fill(if h { 0xFF } else { 0x00 });
            }
            let mut a = acts(format, &mut rng, n_tok * nb);
            let ab = format.act_ty().type_size();
            let xs_at = ab - 32;
            for (i, blk) in a.chunks_exact_mut(ab).enumerate() {
                // Signed to match row 0's block: positive products for
                // nibbles 15 (q = 7 for Q4_0), and for Q4_0's nibbles 0
                // (q = -8) negative activations; Q4_1's nibbles 0 give 0.
                let up = high[i % nb] || matches!(format, PackedFormat::Q4_1 | PackedFormat::Q5_1);
                for x in &mut blk[xs_at..] {
                    let m: i8 = rng.gen_range(100..=127);
                    *x = if up { m } else { -m } as u8;
                }
            }
            let what = format!("large sums, seed {seed}");
            assert_scalar_bits(format, (&w, &a), (nb, rows, n_tok), rows, &what);
        }
    }
}

/// Group-aligned row ranges (how the model splits rows across threads)
/// give exactly the columns of the whole product, and one token alone its
/// row of a many-token product.
#[test]
fn row_ranges_and_single_tokens_match_the_whole_product() {
    for format in FORMATS {
        let mut rng = StdRng::seed_from_u64(9);
        let (rows, nb, n_tok) = (48usize, 3usize, 7usize);
        let w = weights(format, &mut rng, rows * nb);
        let a = acts(format, &mut rng, n_tok * nb);
        let p = PackedMatrix::pack(format, &w, rows, nb * 32).unwrap();
        check_row_ranges(&p, &a, n_tok, rows, &format!("{format:?}"));
    }
}

/// Rows not a multiple of 8 are not packed (the model keeps such a
/// matrix in its GGUF rows), nor are partial blocks or short slices;
/// activations of the wrong type's length are refused.
#[test]
fn bad_shapes_are_errors() {
    let mut rng = StdRng::seed_from_u64(7);
    assert_eq!(PackedFormat::of(GgmlType::Q4_0), Some(PackedFormat::Q4_0));
    assert_eq!(PackedFormat::of(GgmlType::Q4_1), Some(PackedFormat::Q4_1));
    assert_eq!(PackedFormat::of(GgmlType::Q5_1), Some(PackedFormat::Q5_1));
    assert_eq!(PackedFormat::Q5_1.act_ty(), GgmlType::Q8_1);
    assert_eq!(
        PackedFormat::of(GgmlType::IQ4_NL),
        Some(PackedFormat::IQ4NL)
    );
    assert_eq!(PackedFormat::IQ4NL.act_ty(), GgmlType::Q8_0);
    assert_eq!(PackedFormat::of(GgmlType::MXFP4), Some(PackedFormat::MXFP4));
    assert_eq!(PackedFormat::MXFP4.act_ty(), GgmlType::Q8_0);
    assert_eq!(PackedFormat::Q4_1.act_ty(), GgmlType::Q8_1);
    for format in FORMATS {
        let wb = format.ty().type_size();
        let w = weights(format, &mut rng, 12 * 2);
        for rows in [1usize, 7, 12] {
            assert!(matches!(
                PackedMatrix::pack(format, &w[..rows * 2 * wb], rows, 64),
                Err(KernelError::RowGroup {
                    group: GROUP_ROWS,
                    ..
                })
            ));
        }
        assert!(matches!(
            PackedMatrix::pack(format, &w[..8 * wb], 8, 33),
            Err(KernelError::PartialBlock { .. })
        ));
        assert!(matches!(
            PackedMatrix::pack(format, &w[..8 * 2 * wb - 1], 8, 64),
            Err(KernelError::Length { .. })
        ));
        let p = PackedMatrix::pack(format, &w[..8 * 2 * wb], 8, 64).unwrap();
        let a = acts(format, &mut rng, 2 * 2);
        let mut out = vec![0.0f32; 16];
        let short = a.len() - 1;
        assert!(matches!(
            packed_gemm(&p, 0..8, (&a[..short], 2), &mut out, 8),
            Err(KernelError::Length { .. })
        ));
        for rows in [0..4, 4..8, 0..16] {
            assert!(matches!(
                packed_gemm(&p, rows, (&a, 2), &mut out, 8),
                Err(KernelError::RowGroup { .. })
            ));
        }
        assert!(matches!(
            packed_gemm(&p, 0..8, (&a, 2), &mut out[..15], 8),
            Err(KernelError::Length { .. })
        ));
    }
    // A Q8_0 activation row is 2 bytes per block short of a Q8_1 row.
    let w = weights(PackedFormat::Q4_1, &mut rng, 8);
    let p = PackedMatrix::pack(PackedFormat::Q4_1, &w, 8, 32).unwrap();
    let a0 = acts(PackedFormat::Q4_0, &mut rng, 1);
    let mut out = vec![0.0f32; 8];
    assert!(matches!(
        packed_gemm(&p, 0..8, (&a0, 1), &mut out, 8),
        Err(KernelError::Length { .. })
    ));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Any shape and any blocks: every ISA gives the scalar `vec_dot`'s
    /// bits.
    #[test]
    fn any_shape_gives_the_scalar_bits(
        f in 0usize..FORMATS.len(),
        nb in 1usize..12,
        groups in 1usize..4,
        n_tok in 0usize..12,
        seed in any::<u64>(),
    ) {
        let format = FORMATS[f];
        check_random(format, seed, (nb, groups * GROUP_ROWS, n_tok));
    }
}

/// MXFP4 takes the packed layout only where every block scale is an exact
/// f16 (exponents 104 to 143); one block outside keeps the whole matrix
/// on the row kernels.
#[test]
fn mxfp4_packs_only_exact_f16_scales() {
    let block = |e: u8| BlockMXFP4 { e, qs: [0x71; 16] }.to_bytes();
    for (e, packs) in [
        (103u8, false),
        (104, true),
        (127, true),
        (143, true),
        (144, false),
        (0, false),
        (255, false),
    ] {
        let rows: Vec<u8> = (0..8)
            .flat_map(|r| block(if r == 5 { e } else { 120 }))
            .collect();
        assert_eq!(PackedFormat::MXFP4.packs(&rows), packs, "e = {e}");
    }
    assert!(PackedFormat::Q4_0.packs(&[0u8; 18]));
}
