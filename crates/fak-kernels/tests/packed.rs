//! The packed Q8_0 and Q5_0 products (`fak_kernels::packed`): every ISA this CPU
//! can run gives the bits of the scalar twin, which gives the bits of the
//! arithmetic written out below from the unpacked blocks; the result stays
//! close to `vec_dot`; sub-ranges, strides and thread-style splits change
//! nothing; bad shapes are typed errors.
//!
//! Inputs are fresh random blocks (three fixed seeds plus one new seed per
//! run), over 1-7 blocks per row, 8-40 rows and 0-11 tokens (whole and
//! partial 4-token tiles), with weight quants including -128.

use fak_kernels::blocks::{BlockQ5_0, BlockQ8_0};
use fak_kernels::fp::{f16_to_f32, f32_to_f16};
use fak_kernels::packed::{
    packed_gemm, packed_gemm_with_isa, PackedFormat, PackedMatrix, GROUP_ROWS,
};
use fak_kernels::{vec_dot, Isa, KernelError};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

fn seeds() -> [u64; 4] {
    [1, 2, 3, rand::random()]
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

/// `n` random weight blocks of `format` as bytes (Q8_0 quants include
/// -128; Q5_0 bytes are all random).
fn weights(format: PackedFormat, rng: &mut StdRng, n: usize) -> Vec<u8> {
    match format {
        PackedFormat::Q8_0 => blocks(rng, n, -128),
        PackedFormat::Q5_0 => (0..n)
            .flat_map(|_| {
                BlockQ5_0 {
                    d: f32_to_f16(rng.gen_range(1e-4f32..0.05)),
                    qh: rng.gen(),
                    qs: rng.gen(),
                }
                .to_bytes()
            })
            .collect(),
    }
}

/// Scale bits and signed quants of one GGUF weight block.
fn decode(format: PackedFormat, b: &[u8]) -> (u16, [i8; 32]) {
    match format {
        PackedFormat::Q8_0 => {
            let blk = BlockQ8_0::from_bytes(b.try_into().unwrap());
            (blk.d, blk.qs)
        }
        PackedFormat::Q5_0 => {
            let blk = BlockQ5_0::from_bytes(b.try_into().unwrap());
            (blk.d, blk.quants())
        }
    }
}

/// The documented arithmetic, from the unpacked rows: per block,
/// `acc = acc + (d_w · d_x) · f32(Σ q_w · q_x)`.
fn reference(format: PackedFormat, w: &[u8], a: &[u8]) -> f32 {
    let wb = format.ty().type_size();
    let mut acc = 0.0f32;
    for (wb, ab) in w.chunks_exact(wb).zip(a.chunks_exact(34)) {
        let (d, q) = decode(format, wb);
        let dw = f16_to_f32(d);
        let dx = f16_to_f32(u16::from_le_bytes([ab[0], ab[1]]));
        let s: i32 = (0..32)
            .map(|i| i32::from(q[i]) * i32::from(ab[2 + i] as i8))
            .sum();
        acc += (dw * dx) * s as f32;
    }
    acc
}

const FORMATS: [PackedFormat; 2] = [PackedFormat::Q8_0, PackedFormat::Q5_0];

#[test]
fn every_isa_gives_the_reference_bits() {
    for (seed, format) in seeds().into_iter().flat_map(|s| FORMATS.map(|f| (s, f))) {
        let mut rng = StdRng::seed_from_u64(seed);
        let wb = format.ty().type_size();
        for nb in [1usize, 2, 3, 7] {
            let n = nb * 32;
            for rows in [8usize, 16, 40] {
                for n_tok in [0usize, 1, 3, 4, 5, 8, 11] {
                    let w = weights(format, &mut rng, rows * nb);
                    let a = blocks(&mut rng, n_tok * nb, -127);
                    let p = PackedMatrix::pack(format, &w, rows, n).unwrap();
                    assert_eq!((p.rows(), p.n(), p.format()), (rows, n, format));
                    assert_eq!(p.bytes(), w.len());
                    let stride = rows + 5;
                    let mut want = vec![f32::NAN; n_tok * stride];
                    for t in 0..n_tok {
                        for j in 0..rows {
                            want[t * stride + j] = reference(
                                format,
                                &w[j * nb * wb..(j + 1) * nb * wb],
                                &a[t * nb * 34..(t + 1) * nb * 34],
                            );
                        }
                    }
                    for isa in Isa::available() {
                        let mut out = vec![f32::NAN; n_tok * stride];
                        packed_gemm_with_isa(isa, &p, 0..rows, (&a, n_tok), &mut out, stride)
                            .unwrap();
                        let same = out
                            .iter()
                            .zip(&want)
                            .all(|(x, y)| x.to_bits() == y.to_bits());
                        assert!(
                            same,
                            "seed {seed} {isa:?} nb {nb} rows {rows} n_tok {n_tok}"
                        );
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
    let (rows, nb, n_tok) = (48usize, 5usize, 7usize);
    let w = weights(format, &mut rng, rows * nb);
    let a = blocks(&mut rng, n_tok * nb, -127);
    let p = PackedMatrix::pack(format, &w, rows, nb * 32).unwrap();
    let mut whole = vec![0.0f32; n_tok * rows];
    packed_gemm(&p, 0..rows, (&a, n_tok), &mut whole, rows).unwrap();
    for (lo, hi) in [(0usize, 8usize), (8, 24), (16, 48), (40, 48), (24, 24)] {
        let mut part = vec![f32::NAN; n_tok * (hi - lo)];
        packed_gemm(&p, lo..hi, (&a, n_tok), &mut part, hi - lo).unwrap();
        for t in 0..n_tok {
            for j in lo..hi {
                assert_eq!(
                    part[t * (hi - lo) + j - lo].to_bits(),
                    whole[t * rows + j].to_bits(),
                    "{format:?} rows {lo}..{hi}, token {t}, row {j}"
                );
            }
        }
    }
    // One token alone gives its row of the many-token product.
    for t in 0..n_tok {
        let mut one = vec![0.0f32; rows];
        packed_gemm(
            &p,
            0..rows,
            (&a[t * nb * 34..(t + 1) * nb * 34], 1),
            &mut one,
            rows,
        )
        .unwrap();
        let same = one
            .iter()
            .zip(&whole[t * rows..(t + 1) * rows])
            .all(|(x, y)| x.to_bits() == y.to_bits());
        assert!(same, "{format:?} token {t}");
    }
}

/// The packed product computes the same dot products as `vec_dot`, up to
/// float rounding (it scales exact block sums in another order).
#[test]
fn close_to_vec_dot() {
    for format in FORMATS {
        close_to_vec_dot_for(format);
    }
}

fn close_to_vec_dot_for(format: PackedFormat) {
    let mut rng = StdRng::seed_from_u64(5);
    let (rows, nb, n_tok) = (32usize, 18usize, 6usize);
    let wb = format.ty().type_size();
    let w = match format {
        PackedFormat::Q8_0 => blocks(&mut rng, rows * nb, -127),
        PackedFormat::Q5_0 => weights(format, &mut rng, rows * nb),
    };
    let a = blocks(&mut rng, n_tok * nb, -127);
    let p = PackedMatrix::pack(format, &w, rows, nb * 32).unwrap();
    let mut out = vec![0.0f32; n_tok * rows];
    packed_gemm(&p, 0..rows, (&a, n_tok), &mut out, rows).unwrap();
    for t in 0..n_tok {
        for j in 0..rows {
            let want = vec_dot(
                format.ty(),
                nb * 32,
                &w[j * nb * wb..(j + 1) * nb * wb],
                &a[t * nb * 34..(t + 1) * nb * 34],
            )
            .unwrap();
            let got = out[t * rows + j];
            assert!(
                (got - want).abs() <= 1e-5 * want.abs().max(1.0),
                "{format:?} row {j} token {t}: {got} vs {want}"
            );
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
