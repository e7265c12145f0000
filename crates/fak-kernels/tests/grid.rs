//! The codebook formats (IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS,
//! IQ3_S): every ISA gives the scalar twin's bits, because their products
//! are exact integers with one float step per super-block.

mod common;

use common::random_weights;
use fak_gguf::GgmlType;
use fak_kernels::blocks::GridFormat;
use fak_kernels::{quantize_row_to_vec, scalar, vec_dot_with_isa, Isa};
use proptest::prelude::*;
use rand::{Rng, SeedableRng};

fn check_bits(fmt: GridFormat, blocks: usize, seed: u64, act_scale: f32) -> Result<(), String> {
    let ty = fmt.ty();
    let n = 256 * blocks;
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let w = random_weights(ty, n, &mut rng);
    let x: Vec<f32> = (0..n)
        .map(|i| {
            // Alternate full-scale and random activations: the quantizer
            // then writes ±127 as well as small values.
            if i % 7 == 0 {
                act_scale * if rng.gen() { 1.0 } else { -1.0 }
            } else {
                rng.gen_range(-act_scale..act_scale)
            }
        })
        .collect();
    let a = quantize_row_to_vec(GgmlType::Q8_K, &x).map_err(|e| e.to_string())?;
    let want = scalar::vec_dot_grid_q8_k(fmt, n, &w, &a).map_err(|e| e.to_string())?;
    for isa in Isa::available() {
        let got = vec_dot_with_isa(isa, ty, n, &w, &a).map_err(|e| e.to_string())?;
        if got.to_bits() != want.to_bits() {
            return Err(format!(
                "{ty} {isa} n={n} seed={seed}: {got} vs scalar {want}"
            ));
        }
    }
    Ok(())
}

#[test]
fn every_isa_gives_the_scalar_bits() {
    for fmt in GridFormat::ALL {
        for (seed, blocks) in [(1, 1), (2, 3), (3, 19)] {
            check_bits(fmt, blocks, seed, 2.0).unwrap_or_else(|e| panic!("{e}"));
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    #[test]
    fn every_isa_gives_the_scalar_bits_random(seed in any::<u64>(), blocks in 1usize..6, k in 0usize..7) {
        if let Err(e) = check_bits(GridFormat::ALL[k], blocks, seed, 1.0) {
            prop_assert!(false, "{}", e);
        }
    }
}
