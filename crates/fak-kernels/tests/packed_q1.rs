//! Packed Q1_0 (`PackedFormat::Q1_0`): every ISA this CPU runs gives each
//! (token, row) element the bits of the scalar `vec_dot` of that row and
//! token, for any number of rows, tokens and blocks, and at the quants'
//! extremes.

use fak_gguf::GgmlType;
use fak_kernels::blocks::{BlockQ1_0, BlockQ8_0};
use fak_kernels::fp::f32_to_f16;
use fak_kernels::packed::{PackedFormat, PackedMatrix};
use fak_kernels::scalar;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

mod common;

/// `rows` rows of `nb` Q1_0 blocks; `sign`: `None` for random bits, else
/// every bit set (`true`) or clear.
fn weights(rng: &mut StdRng, rows: usize, nb: usize, sign: Option<bool>) -> Vec<u8> {
    (0..rows * nb)
        .flat_map(|_| {
            let qs: [u8; 16] = match sign {
                None => rng.gen(),
                Some(true) => [0xFF; 16],
                Some(false) => [0; 16],
            };
            let d = f32_to_f16(rng.gen_range(-0.05f32..0.05));
            BlockQ1_0 { d, qs }.to_bytes()
        })
        .collect()
}

/// `n_tok` Q8_0 rows of `4 · nb` blocks; `fill`: every quant that value.
fn acts(rng: &mut StdRng, n_tok: usize, nb: usize, fill: Option<i8>) -> Vec<u8> {
    (0..n_tok * 4 * nb)
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
    let p = PackedMatrix::pack(PackedFormat::Q1_0, w, rows, nb * 128).expect("pack");
    assert_eq!(p.bytes(), w.len(), "{what}: the GGUF size");
    let w_rows = (w, nb * BlockQ1_0::BYTES);
    let a_rows = (a, 4 * nb * BlockQ8_0::BYTES);
    common::check_packed_bits(&p, w_rows, a_rows, n_tok, scalar::vec_dot_q1_0_q8_0, what);
}

#[test]
fn every_isa_gives_the_scalar_vec_dot_bits() {
    let mut rng = StdRng::seed_from_u64(11);
    for (rows, nb) in [(8usize, 1usize), (16, 3), (24, 12)] {
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

/// Every bit set or clear against quants all ±127: each 32-value step sums
/// to ±4,064 in the tile's `i16` lanes, the most it reaches.
#[test]
fn extreme_quants_give_the_scalar_bits() {
    let mut rng = StdRng::seed_from_u64(5);
    for sign in [true, false] {
        for fill in [127i8, -127] {
            let w = weights(&mut rng, 16, 2, Some(sign));
            let a = acts(&mut rng, 5, 2, Some(fill));
            check(&w, &a, (16, 2, 5), &format!("bits {sign} quants {fill}"));
        }
    }
}

#[test]
fn q1_0_is_packed_against_q8_0() {
    assert_eq!(PackedFormat::of(GgmlType::Q1_0), Some(PackedFormat::Q1_0));
    assert_eq!(PackedFormat::Q1_0.act_ty(), GgmlType::Q8_0);
}
