//! Packed NVFP4 (`PackedFormat::NVFP4`): every ISA this CPU runs gives each
//! (token, row) element the bits of the scalar `vec_dot` of that row and
//! token, for any number of rows, tokens and blocks, over every UE4M3
//! scale byte and at the quants' extremes.

use fak_gguf::GgmlType;
use fak_kernels::blocks::{BlockNVFP4, BlockQ8_0};
use fak_kernels::fp::f32_to_f16;
use fak_kernels::packed::{PackedFormat, PackedMatrix};
use fak_kernels::scalar;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

mod common;

/// `rows` rows of `nb` NVFP4 blocks, random codes and scale bytes (every
/// byte, 0x7F and bit 7 included); `code`: every nibble that code instead.
fn weights(rng: &mut StdRng, rows: usize, nb: usize, code: Option<u8>) -> Vec<u8> {
    (0..rows * nb)
        .flat_map(|_| {
            let qs: [u8; 32] = match code {
                None => rng.gen(),
                Some(c) => [c | (c << 4); 32],
            };
            BlockNVFP4 { d: rng.gen(), qs }.to_bytes()
        })
        .collect()
}

/// `n_tok` Q8_0 rows of `2 · nb` blocks; `fill`: every quant that value.
fn acts(rng: &mut StdRng, n_tok: usize, nb: usize, fill: Option<i8>) -> Vec<u8> {
    (0..n_tok * 2 * nb)
        .flat_map(|_| {
            let qs: [i8; 32] =
                std::array::from_fn(|_| fill.unwrap_or_else(|| rng.gen_range(-127..=127)));
            BlockQ8_0 {
                d: f32_to_f16(rng.gen_range(1e-4f32..0.05)),
                qs,
            }
            .to_bytes()
        })
        .collect()
}

fn check(w: &[u8], a: &[u8], (rows, nb, n_tok): (usize, usize, usize), what: &str) {
    let p = PackedMatrix::pack(PackedFormat::NVFP4, w, rows, nb * 64).expect("pack");
    let w_rows = (w, nb * BlockNVFP4::BYTES);
    let a_rows = (a, 2 * nb * BlockQ8_0::BYTES);
    common::check_packed_bits(&p, w_rows, a_rows, n_tok, scalar::vec_dot_nvfp4_q8_0, what);
}

#[test]
fn every_isa_gives_the_scalar_vec_dot_bits() {
    let mut rng = StdRng::seed_from_u64(13);
    for (rows, nb) in [(8usize, 1usize), (16, 3), (24, 9)] {
        for n_tok in [1usize, 2, 4, 5, 9] {
            let w = weights(&mut rng, rows, nb, None);
            let a = acts(&mut rng, n_tok, nb, None);
            check(
                &w,
                &a,
                (rows, nb, n_tok),
                &format!("{rows} rows × {nb} blocks"),
            );
        }
    }
}

/// Codes of ±12 (7 and 15) against quants all ±127: each 16-value
/// sub-block sums to ±24,384 in pairs, within the tile's `i16` lanes.
#[test]
fn extreme_quants_give_the_scalar_bits() {
    let mut rng = StdRng::seed_from_u64(3);
    for code in [7u8, 15] {
        for fill in [127i8, -127] {
            let w = weights(&mut rng, 16, 2, Some(code));
            let a = acts(&mut rng, 5, 2, Some(fill));
            check(&w, &a, (16, 2, 5), &format!("code {code} quants {fill}"));
        }
    }
}

#[test]
fn nvfp4_is_packed_against_q8_0() {
    assert_eq!(PackedFormat::of(GgmlType::NVFP4), Some(PackedFormat::NVFP4));
    assert_eq!(PackedFormat::NVFP4.act_ty(), GgmlType::Q8_0);
}
