//! The packed Q8_0, Q5_0, Q4_K, Q5_K, Q6_K, Q2_K and Q3_K products (`fak_kernels::packed`;
//! Q4_0, Q4_1 and IQ4_NL in `packed_q4.rs`, IQ4_XS in `packed_iq4xs.rs`): every ISA this CPU
//! can run gives the bits of the scalar twin, which gives the bits of the
//! arithmetic written out below from the unpacked blocks; the result stays
//! close to `vec_dot`; sub-ranges, strides and thread-style splits change
//! nothing; bad shapes are typed errors.
//!
//! Inputs are fresh random blocks (three fixed seeds plus one new seed per
//! run), over 1-7 blocks per row, 8-40 rows and 0-17 tokens (whole and
//! partial 4-token tiles, and every Q8_0 AVX2 tile width 1-8), with Q8_0
//! weight quants including -128 and all other quant bytes random.

use fak_kernels::blocks::{
    get_scale_min_k4, BlockQ2_K, BlockQ3_K, BlockQ4_K, BlockQ5_0, BlockQ5_K, BlockQ6_K, BlockQ8_0,
    BlockQ8_K,
};
use fak_kernels::fp::{f16_to_f32, f32_to_f16};
use fak_kernels::packed::{
    packed_gemm, packed_gemm_with_isa, PackedFormat, PackedMatrix, GROUP_ROWS,
};
use fak_kernels::{quantize_acts, vec_dot, Isa, KernelError};
mod common;
use common::check_row_ranges;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

fn seeds() -> [u64; 4] {
    [1, 2, 3, rand::random()]
}

const FORMATS: [PackedFormat; 7] = [
    PackedFormat::Q8_0,
    PackedFormat::Q5_0,
    PackedFormat::Q4K,
    PackedFormat::Q5K,
    PackedFormat::Q6K,
    PackedFormat::Q2K,
    PackedFormat::Q3K,
];

/// Values per block of `format`.
fn qk(format: PackedFormat) -> usize {
    format.ty().block_size()
}

/// `n` Q8_0 blocks as bytes; quants from `lo..=127`.
fn blocks(rng: &mut StdRng, n: usize, lo: i8) -> Vec<u8> {
    (0..n)
        .flat_map(|_| {
            BlockQ8_0 {
                d: f32_to_f16(rng.gen_range(1e-4f32..0.05)),
                qs: std::array::from_fn(|_| rng.gen_range(lo..=127)),
            }
            .to_bytes()
        })
        .collect()
}

fn bytes<const N: usize>(rng: &mut StdRng) -> [u8; N] {
    let mut b = [0u8; N];
    rng.fill(&mut b[..]);
    b
}

fn half(rng: &mut StdRng) -> u16 {
    f32_to_f16(rng.gen_range(1e-4f32..0.05))
}

/// `n` random weight blocks of `format` as bytes (Q8_0 quants include
/// -128; the other formats' quant bytes are all random).
fn weights(format: PackedFormat, rng: &mut StdRng, n: usize) -> Vec<u8> {
    let mut out = Vec::new();
    for _ in 0..n {
        match format {
            PackedFormat::Q8_0 => out.extend(blocks(rng, 1, -128)),
            PackedFormat::Q4_0
            | PackedFormat::Q4_1
            | PackedFormat::Q5_1
            | PackedFormat::IQ4NL
            | PackedFormat::MXFP4
            | PackedFormat::Q1_0
            | PackedFormat::NVFP4
            | PackedFormat::IQ4XS => {
                unreachable!("tests/packed_q4.rs, tests/packed_iq4xs.rs")
            }
            PackedFormat::Q5_0 => out.extend(
                BlockQ5_0 {
                    d: half(rng),
                    qh: rng.gen(),
                    qs: rng.gen(),
                }
                .to_bytes(),
            ),
            PackedFormat::Q4K => out.extend(
                BlockQ4_K {
                    d: half(rng),
                    dmin: half(rng),
                    scales: rng.gen(),
                    qs: bytes(rng),
                }
                .to_bytes(),
            ),
            PackedFormat::Q5K => out.extend(
                BlockQ5_K {
                    d: half(rng),
                    dmin: half(rng),
                    scales: rng.gen(),
                    qh: rng.gen(),
                    qs: bytes(rng),
                }
                .to_bytes(),
            ),
            PackedFormat::Q6K => out.extend(
                BlockQ6_K {
                    ql: bytes(rng),
                    qh: bytes(rng),
                    scales: rng.gen(),
                    d: half(rng),
                }
                .to_bytes(),
            ),
            PackedFormat::Q2K => out.extend(
                BlockQ2_K {
                    scales: rng.gen(),
                    qs: bytes(rng),
                    d: half(rng),
                    dmin: half(rng),
                }
                .to_bytes(),
            ),
            PackedFormat::Q3K => out.extend(
                BlockQ3_K {
                    hmask: rng.gen(),
                    qs: bytes(rng),
                    scales: rng.gen(),
                    d: half(rng),
                }
                .to_bytes(),
            ),
        }
    }
    out
}

/// `n_tok` activation rows of `nb` blocks for `format`'s products: random
/// Q8_0 blocks, or Q8_K rows quantized from random floats.
fn acts(format: PackedFormat, rng: &mut StdRng, n_tok: usize, nb: usize) -> Vec<u8> {
    if format.act_ty() == fak_gguf::GgmlType::Q8_0 {
        return blocks(rng, n_tok * nb, -127);
    }
    let x: Vec<f32> = (0..n_tok * nb * 256)
        .map(|_| rng.gen_range(-2.0f32..2.0))
        .collect();
    let mut a = vec![0u8; n_tok * nb * BlockQ8_K::BYTES];
    quantize_acts(format.act_ty(), &x, &mut a).unwrap();
    a
}

/// Scale bits and signed quants of one 32-value GGUF weight block.
fn decode(format: PackedFormat, b: &[u8]) -> (u16, [i8; 32]) {
    match format {
        PackedFormat::Q8_0 => {
            let blk = BlockQ8_0::from_bytes(b.try_into().unwrap());
            (blk.d, blk.qs)
        }
        _ => {
            let blk = BlockQ5_0::from_bytes(b.try_into().unwrap());
            (blk.d, blk.quants())
        }
    }
}

/// One block's term of the documented arithmetic, from the unpacked GGUF
/// blocks: `(sa, ia, sb, ib)` with term `sa · ia − sb · ib` (`sb = ib = 0`
/// for the formats without a separate offset term).
fn block_ints(format: PackedFormat, wb: &[u8], ab: &[u8]) -> (f32, i32, f32, i32) {
    match format {
        PackedFormat::Q4_0
        | PackedFormat::Q4_1
        | PackedFormat::Q5_1
        | PackedFormat::IQ4NL
        | PackedFormat::MXFP4
        | PackedFormat::Q1_0
        | PackedFormat::NVFP4
        | PackedFormat::IQ4XS => {
            unreachable!("tests/packed_q4.rs, tests/packed_iq4xs.rs")
        }
        PackedFormat::Q8_0 | PackedFormat::Q5_0 => {
            let (d, q) = decode(format, wb);
            let dx = f16_to_f32(u16::from_le_bytes([ab[0], ab[1]]));
            let s: i32 = (0..32)
                .map(|i| i32::from(q[i]) * i32::from(ab[2 + i] as i8))
                .sum();
            (f16_to_f32(d) * dx, s, 0.0, 0)
        }
        PackedFormat::Q4K | PackedFormat::Q5K => {
            // Q5_K is Q4_K with 5-bit quants.
            let (d, dmin, scales, u) = if format == PackedFormat::Q4K {
                let w = BlockQ4_K::from_bytes(wb.try_into().unwrap());
                (w.d, w.dmin, w.scales, w.quants())
            } else {
                let w = BlockQ5_K::from_bytes(wb.try_into().unwrap());
                (w.d, w.dmin, w.scales, w.quants())
            };
            let a = BlockQ8_K::from_bytes(ab.try_into().unwrap());
            let (sc, m) = get_scale_min_k4(&scales);
            let (mut sumi, mut summ) = (0i32, 0i32);
            for j in 0..8 {
                let s: i32 = (32 * j..32 * j + 32)
                    .map(|e| i32::from(u[e]) * i32::from(a.qs[e]))
                    .sum();
                sumi += i32::from(sc[j]) * s;
                let bsum = i32::from(a.bsums[2 * j]) + i32::from(a.bsums[2 * j + 1]);
                summ += i32::from(m[j]) * bsum;
            }
            let (d, dm) = (f16_to_f32(d), f16_to_f32(dmin));
            (d * a.d, sumi, dm * a.d, summ)
        }
        PackedFormat::Q6K => {
            let w = BlockQ6_K::from_bytes(wb.try_into().unwrap());
            let a = BlockQ8_K::from_bytes(ab.try_into().unwrap());
            let u = w.quants().map(|q| i32::from(q) + 32);
            let (mut sumi, mut summ) = (0i32, 0i32);
            for j in 0..16 {
                let s: i32 = (16 * j..16 * j + 16)
                    .map(|e| u[e] * i32::from(a.qs[e]))
                    .sum();
                let sc = i32::from(w.scales[j]);
                sumi += sc * s;
                summ += 32 * sc * i32::from(a.bsums[j]);
            }
            (f16_to_f32(w.d) * a.d, sumi - summ, 0.0, 0)
        }
        PackedFormat::Q2K => {
            let w = BlockQ2_K::from_bytes(wb.try_into().unwrap());
            let a = BlockQ8_K::from_bytes(ab.try_into().unwrap());
            let u = w.quants();
            let (mut sumi, mut summ) = (0i32, 0i32);
            for j in 0..16 {
                let s: i32 = (16 * j..16 * j + 16)
                    .map(|e| i32::from(u[e]) * i32::from(a.qs[e]))
                    .sum();
                sumi += i32::from(w.scales[j] & 15) * s;
                summ += i32::from(w.scales[j] >> 4) * i32::from(a.bsums[j]);
            }
            let (d, dm) = (f16_to_f32(w.d), f16_to_f32(w.dmin));
            (d * a.d, sumi, dm * a.d, summ)
        }
        PackedFormat::Q3K => {
            let w = BlockQ3_K::from_bytes(wb.try_into().unwrap());
            let a = BlockQ8_K::from_bytes(ab.try_into().unwrap());
            let u = w.quants().map(|q| i32::from(q) + 4);
            let (mut sumi, mut summ) = (0i32, 0i32);
            for (j, sc) in w.signed_scales().into_iter().enumerate() {
                let s: i32 = (16 * j..16 * j + 16)
                    .map(|e| u[e] * i32::from(a.qs[e]))
                    .sum();
                sumi += i32::from(sc) * s;
                summ += 4 * i32::from(sc) * i32::from(a.bsums[j]);
            }
            (f16_to_f32(w.d) * a.d, sumi - summ, 0.0, 0)
        }
    }
}

/// Pairs of weight and activation blocks of one row product.
fn block_pairs<'a>(
    format: PackedFormat,
    w: &'a [u8],
    a: &'a [u8],
) -> impl Iterator<Item = (&'a [u8], &'a [u8])> {
    let (wb, ab) = (format.ty().type_size(), format.act_ty().type_size());
    w.chunks_exact(wb).zip(a.chunks_exact(ab))
}

/// The documented arithmetic over whole rows, blocks in order from 0.0.
fn reference(format: PackedFormat, w: &[u8], a: &[u8]) -> f32 {
    block_pairs(format, w, a).fold(0.0f32, |acc, (wb, ab)| {
        let (sa, ia, sb, ib) = block_ints(format, wb, ab);
        acc + (sa * ia as f32 - sb * ib as f32)
    })
}

/// [`reference`] for every weight row of `w` (`rows` rows) and token row of
/// `a` (`n_tok` rows), laid out `[n_tok, stride]` with NaN past `rows`.
fn reference_outputs(
    format: PackedFormat,
    (w, rows): (&[u8], usize),
    (a, n_tok): (&[u8], usize),
    stride: usize,
) -> Vec<f32> {
    let mut want = vec![f32::NAN; n_tok * stride];
    if rows == 0 || n_tok == 0 {
        return want;
    }
    let (wr, ar) = (w.len() / rows, a.len() / n_tok);
    for t in 0..n_tok {
        for j in 0..rows {
            want[t * stride + j] =
                reference(format, &w[j * wr..(j + 1) * wr], &a[t * ar..(t + 1) * ar]);
        }
    }
    want
}

/// The same dot product in f64, and the sum of its terms' magnitudes.
fn exact(format: PackedFormat, w: &[u8], a: &[u8]) -> (f64, f64) {
    block_pairs(format, w, a).fold((0.0, 0.0), |(v, m), (wb, ab)| {
        let (sa, ia, sb, ib) = block_ints(format, wb, ab);
        let (x, y) = (f64::from(sa) * f64::from(ia), f64::from(sb) * f64::from(ib));
        (v + x - y, m + x.abs() + y.abs())
    })
}

/// Draws `rows` random `format` weight rows of `nb` blocks, then `n_tok`
/// activation rows, from `rng` (seeded with `seed`), packs the weights, and
/// asserts that every ISA this CPU can run gives [`reference_outputs`]'
/// bits in an output of row stride `stride` (NaN past `rows` on both
/// sides). Returns the packed matrix.
fn assert_every_isa_gives_the_reference_bits(
    format: PackedFormat,
    (seed, rng): (u64, &mut StdRng),
    (nb, rows, n_tok): (usize, usize, usize),
    stride: usize,
) -> PackedMatrix {
    let w = weights(format, rng, rows * nb);
    let a = acts(format, rng, n_tok, nb);
    let p = PackedMatrix::pack(format, &w, rows, nb * qk(format)).unwrap();
    let want = reference_outputs(format, (&w, rows), (&a, n_tok), stride);
    for isa in Isa::available() {
        let mut out = vec![f32::NAN; n_tok * stride];
        packed_gemm_with_isa(isa, &p, 0..rows, (&a, n_tok), &mut out, stride).unwrap();
        for (i, (got, want)) in out.iter().zip(&want).enumerate() {
            let (t, j) = (i / stride, i % stride);
            assert_eq!(
                got.to_bits(),
                want.to_bits(),
                "seed {seed} {format:?} {isa:?} nb {nb} rows {rows} n_tok {n_tok}: \
                 token {t} row {j}"
            );
        }
    }
    p
}

#[test]
fn every_isa_gives_the_reference_bits() {
    for (seed, format) in seeds().into_iter().flat_map(|s| FORMATS.map(|f| (s, f))) {
        let mut rng = StdRng::seed_from_u64(seed);
        for nb in [1usize, 2, 3, 7] {
            let n = nb * qk(format);
            for rows in [8usize, 16, 40] {
                for n_tok in [0usize, 1, 2, 3, 4, 5, 6, 7, 8, 9, 11, 12, 15, 16, 17] {
                    let p = assert_every_isa_gives_the_reference_bits(
                        format,
                        (seed, &mut rng),
                        (nb, rows, n_tok),
                        rows + 5,
                    );
                    assert_eq!((p.rows(), p.n(), p.format()), (rows, n, format));
                    let gb = format.group_block_bytes();
                    assert_eq!(p.bytes(), rows / GROUP_ROWS * nb * gb);
                }
            }
        }
    }
}

/// Rows wider than the AVX2 Q5_0 loop keeps activation sums for (1,024
/// blocks): the tile sums the later blocks itself, with the same bits.
#[test]
fn wide_q5_0_rows_give_the_reference_bits() {
    let mut rng = StdRng::seed_from_u64(7);
    let (nb, rows, n_tok) = (1030usize, 40usize, 5usize);
    assert_every_isa_gives_the_reference_bits(
        PackedFormat::Q5_0,
        (7, &mut rng),
        (nb, rows, n_tok),
        rows,
    );
}

/// The AVX2 Q8_0 loop's edges: groups in several chunks (a chunk holds 64
/// KiB of weights: one group of 240 blocks), rows wider than its
/// per-thread table of activation scales (512 blocks: the tile converts
/// the later scales itself), and more than 1 MiB of weights (the first
/// token tile of a chunk prefetches). Every ISA gives the reference bits
/// for every tile width. The shapes run one after the other on one
/// thread, wide rows before narrow ones, so a tile that read scales an
/// earlier product left in the table would fail here.
#[test]
fn q8_0_chunks_and_wide_rows_give_the_reference_bits() {
    let mut rng = StdRng::seed_from_u64(11);
    for (nb, rows, n_tok) in [
        (240usize, 24usize, 9usize),
        (3, 720, 3),
        (520, 16, 10),
        (240, 136, 7),
        (7, 16, 8),
    ] {
        assert_every_isa_gives_the_reference_bits(
            PackedFormat::Q8_0,
            (11, &mut rng),
            (nb, rows, n_tok),
            rows,
        );
    }
}

/// Products of many tokens over Q3_K and Q5_K unpack each group once into
/// a scratch of wide blocks (`packed::wide`) and run the tiles over it:
/// every ISA still gives the reference bits, for tile counts with and
/// without a narrower last tile, paired and unpaired groups (VNNI), on
/// shapes run one after the other on one
/// thread (wide rows before narrow ones, so a tile that read blocks an
/// earlier product left in the scratch would fail here).
#[test]
fn products_of_many_tokens_over_wide_blocks_give_the_reference_bits() {
    for format in [
        PackedFormat::Q3K,
        PackedFormat::Q5K,
        PackedFormat::Q2K,
        PackedFormat::Q6K,
    ] {
        let mut rng = StdRng::seed_from_u64(13);
        for (nb, rows, n_tok) in [
            (7usize, 24usize, 16usize),
            (5, 8, 19),
            (2, 16, 33),
            (1, 8, 64),
            // The VNNI tiles' wide blocks (40 tokens on): a pair of groups
            // and an odd one, whole tiles of 8 and a narrower rest.
            (3, 24, 45),
            (2, 16, 40),
        ] {
            assert_every_isa_gives_the_reference_bits(
                format,
                (13, &mut rng),
                (nb, rows, n_tok),
                rows + 3,
            );
        }
    }
}

/// Quants at the ends of their ranges: every weight quant at its largest
/// (15 for Q4_K, 31 for Q5_K, 63 for Q6_K, 3 for Q2_K, 7 for Q3_K, 31 for Q5_0, -128 for Q8_0) against
/// activation quants all -128 or all 127 (-127 for the Q8_0-activation
/// formats, whose sign trick is documented for `-127..=127`, the range
/// their quantizer produces), with scales at their extremes.
/// The AVX2 k-quant tiles add 8 (Q4_K), 4 (Q5_K) or 2 (Q6_K) steps of `maddubs`
/// pair sums in `i16` before widening; this is where that would overflow.
#[test]
fn extreme_quants_give_the_reference_bits() {
    let nb = 2;
    for format in FORMATS {
        let wbytes = format.ty().type_size();
        let n = nb * qk(format);
        let rows = 8;
        for (wfill, afill) in [(0xFFu8, -128i8), (0xFF, 127), (0x80, -128), (0x7F, -128)] {
            let block = |j: usize| -> Vec<u8> {
                let mut b = vec![wfill; wbytes];
                match format {
                    PackedFormat::Q4_0
                    | PackedFormat::Q4_1
                    | PackedFormat::Q5_1
                    | PackedFormat::IQ4NL
                    | PackedFormat::MXFP4
                    | PackedFormat::Q1_0
                    | PackedFormat::NVFP4
                    | PackedFormat::IQ4XS => {
                        unreachable!("tests/packed_q4.rs, tests/packed_iq4xs.rs")
                    }
                    PackedFormat::Q8_0 | PackedFormat::Q5_0 => {
                        b[..2].copy_from_slice(&f32_to_f16(0.01 * (j + 1) as f32).to_le_bytes())
                    }
                    PackedFormat::Q4K | PackedFormat::Q5K => {
                        b[..2].copy_from_slice(&f32_to_f16(0.01).to_le_bytes());
                        b[2..4].copy_from_slice(&f32_to_f16(0.002).to_le_bytes());
                    }
                    PackedFormat::Q6K => {
                        let d = wbytes - 2;
                        b[d..].copy_from_slice(&f32_to_f16(0.01).to_le_bytes());
                    }
                    PackedFormat::Q2K => {
                        b[80..82].copy_from_slice(&f32_to_f16(0.01).to_le_bytes());
                        b[82..84].copy_from_slice(&f32_to_f16(0.002).to_le_bytes());
                    }
                    PackedFormat::Q3K => {
                        b[108..110].copy_from_slice(&f32_to_f16(0.01).to_le_bytes());
                    }
                }
                b
            };
            let w: Vec<u8> = (0..rows * nb).flat_map(|j| block(j % rows)).collect();
            let a: Vec<u8> = if format.act_ty() == fak_gguf::GgmlType::Q8_0 {
                let afill = afill.max(-127);
                (0..nb)
                    .flat_map(|_| {
                        let blk = BlockQ8_0 {
                            d: f32_to_f16(0.02),
                            qs: [afill; 32],
                        };
                        blk.to_bytes()
                    })
                    .collect()
            } else {
                (0..nb)
                    .flat_map(|_| {
                        let blk = BlockQ8_K {
                            d: 0.02,
                            qs: [afill; 256],
                            bsums: [16 * i16::from(afill); 16],
                        };
                        blk.to_bytes()
                    })
                    .collect()
            };
            let p = PackedMatrix::pack(format, &w, rows, n).unwrap();
            let want: Vec<u32> = (0..rows)
                .map(|j| {
                    reference(format, &w[j * nb * wbytes..(j + 1) * nb * wbytes], &a).to_bits()
                })
                .collect();
            assert!(want.iter().all(|b| f32::from_bits(*b).is_finite()));
            for isa in Isa::available() {
                let mut out = vec![f32::NAN; rows];
                packed_gemm_with_isa(isa, &p, 0..rows, (&a, 1), &mut out, rows).unwrap();
                let got: Vec<u32> = out.iter().map(|x| x.to_bits()).collect();
                assert_eq!(
                    got, want,
                    "{format:?} {isa:?} weights {wfill:#x} acts {afill}"
                );
                for k in (2..=9).chain([16, 17]) {
                    let mut many = vec![f32::NAN; k * rows];
                    let ak: Vec<u8> = a.iter().copied().cycle().take(k * a.len()).collect();
                    packed_gemm_with_isa(isa, &p, 0..rows, (&ak, k), &mut many, rows).unwrap();
                    for t in 0..k {
                        let got: Vec<u32> = many[t * rows..(t + 1) * rows]
                            .iter()
                            .map(|x| x.to_bits())
                            .collect();
                        assert_eq!(got, want, "{format:?} {isa:?} {k} tokens, token {t}");
                    }
                }
            }
        }
    }
}

/// Group-aligned row ranges (how the model splits rows across threads)
/// give exactly the columns of the whole product.
#[test]
fn row_ranges_match_the_whole_product() {
    for format in FORMATS {
        row_ranges_match(format);
    }
}

fn row_ranges_match(format: PackedFormat) {
    let mut rng = StdRng::seed_from_u64(9);
    let (rows, nb, n_tok) = (48usize, 3usize, 7usize);
    let w = weights(format, &mut rng, rows * nb);
    let a = acts(format, &mut rng, n_tok, nb);
    let p = PackedMatrix::pack(format, &w, rows, nb * qk(format)).unwrap();
    check_row_ranges(&p, &a, n_tok, rows, &format!("{format:?}"));
}

/// The packed product computes the same dot products as `vec_dot`: both
/// are within 1e-6 of the terms' magnitude of the exact (f64) value (the
/// result itself can be a small difference of large block terms).
#[test]
fn close_to_vec_dot() {
    for format in FORMATS {
        close_to_vec_dot_for(format);
    }
}

fn close_to_vec_dot_for(format: PackedFormat) {
    let mut rng = StdRng::seed_from_u64(5);
    let nb = if qk(format) == 32 { 18 } else { 4 };
    let (rows, n_tok) = (32usize, 6usize);
    let (wb, ab) = (format.ty().type_size(), format.act_ty().type_size());
    let w = match format {
        PackedFormat::Q8_0 => blocks(&mut rng, rows * nb, -127),
        _ => weights(format, &mut rng, rows * nb),
    };
    let a = acts(format, &mut rng, n_tok, nb);
    let p = PackedMatrix::pack(format, &w, rows, nb * qk(format)).unwrap();
    let mut out = vec![0.0f32; n_tok * rows];
    packed_gemm(&p, 0..rows, (&a, n_tok), &mut out, rows).unwrap();
    for t in 0..n_tok {
        for j in 0..rows {
            let want = vec_dot(
                format.ty(),
                nb * qk(format),
                &w[j * nb * wb..(j + 1) * nb * wb],
                &a[t * nb * ab..(t + 1) * nb * ab],
            )
            .unwrap();
            let got = out[t * rows + j];
            let (x, mag) = exact(
                format,
                &w[j * nb * wb..(j + 1) * nb * wb],
                &a[t * nb * ab..(t + 1) * nb * ab],
            );
            for (name, y) in [("packed", got), ("vec_dot", want)] {
                assert!(
                    (f64::from(y) - x).abs() <= 1e-6 * mag,
                    "{format:?} row {j} token {t}: {name} {y} vs exact {x} (terms {mag})"
                );
            }
        }
    }
}

#[test]
fn bad_shapes_are_errors() {
    let mut rng = StdRng::seed_from_u64(7);
    let w = blocks(&mut rng, 12 * 2, -127);
    assert!(matches!(
        PackedMatrix::pack(PackedFormat::Q8_0, &w, 12, 64),
        Err(KernelError::RowGroup {
            rows: 12,
            group: GROUP_ROWS
        })
    ));
    assert!(matches!(
        PackedMatrix::pack(PackedFormat::Q8_0, &w[..8 * 34], 8, 33),
        Err(KernelError::PartialBlock { .. })
    ));
    assert!(matches!(
        PackedMatrix::pack(PackedFormat::Q8_0, &w[..8 * 2 * 34 - 1], 8, 64),
        Err(KernelError::Length { .. })
    ));
    let p = PackedMatrix::pack(PackedFormat::Q8_0, &w[..16 * 34], 8, 64).unwrap();
    let a = blocks(&mut rng, 2 * 2, -127);
    let mut out = vec![0.0f32; 16];
    for rows in [0..4, 4..8, 0..16] {
        assert!(matches!(
            packed_gemm(&p, rows, (&a, 2), &mut out, 8),
            Err(KernelError::RowGroup { .. })
        ));
    }
    assert!(matches!(
        packed_gemm(&p, 0..8, (&a[..67], 2), &mut out, 8),
        Err(KernelError::Length { .. })
    ));
    assert!(matches!(
        packed_gemm(&p, 0..8, (&a, 2), &mut out[..15], 8),
        Err(KernelError::Length { .. })
    ));
    assert!(matches!(
        packed_gemm(&p, 0..8, (&a, 2), &mut out, 7),
        Err(KernelError::Length { .. })
    ));
    if !Isa::Avx512.is_available() {
        assert!(matches!(
            packed_gemm_with_isa(Isa::Avx512, &p, 0..8, (&a, 2), &mut out, 8),
            Err(KernelError::IsaUnavailable { .. })
        ));
    }
}
