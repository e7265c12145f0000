//! The codebook formats (IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS,
//! IQ3_S) and the ternary ones (TQ1_0, TQ2_0): every ISA gives the scalar twin's bits, because their products
//! are exact integers with one float step per super-block. A product of
//! many tokens (rows decoded once per 8-row group into the packed k-quant
//! tiles) gives every element the bits of that one scalar dot product.

mod common;

use common::random_weights;
use fak_gguf::GgmlType;
use fak_kernels::blocks::GridFormat;
use fak_kernels::gemm::gemm_with_isa;
use fak_kernels::{quantize_row_to_vec, scalar, vec_dot_with_isa, Isa};
use proptest::prelude::*;
use rand::{Rng, SeedableRng};

/// One Q8_K activation row of `n` values: full-scale values every 7th
/// (the quantizer then writes ±127 and -128) between random ones.
fn activations(n: usize, act_scale: f32, rng: &mut impl Rng) -> Result<Vec<u8>, String> {
    let x: Vec<f32> = (0..n)
        .map(|i| {
            if i % 7 == 0 {
                act_scale * if rng.gen() { 1.0 } else { -1.0 }
            } else {
                rng.gen_range(-act_scale..act_scale)
            }
        })
        .collect();
    quantize_row_to_vec(GgmlType::Q8_K, &x).map_err(|e| e.to_string())
}

fn check_bits(fmt: GridFormat, blocks: usize, seed: u64, act_scale: f32) -> Result<(), String> {
    let ty = fmt.ty();
    let n = 256 * blocks;
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let w = random_weights(ty, n, &mut rng);
    let a = activations(n, act_scale, &mut rng)?;
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

/// `rows` weight rows against `toks` tokens on every ISA: every element
/// equals the scalar dot product's bits. 8-row groups go in pairs, so
/// 29 rows hold a pair, an odd group and 5 rows past the groups.
fn check_product(fmt: GridFormat, rows: usize, toks: usize, seed: u64) -> Result<(), String> {
    let (ty, n) = (fmt.ty(), 512);
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let w: Vec<Vec<u8>> = (0..rows).map(|_| random_weights(ty, n, &mut rng)).collect();
    let a: Vec<Vec<u8>> = (0..toks)
        .map(|t| activations(n, 1.0 + t as f32, &mut rng))
        .collect::<Result<_, _>>()?;
    let (wf, af) = (w.concat(), a.concat());
    let stride = rows + 2;
    for isa in Isa::available() {
        let mut out = vec![f32::NAN; toks * stride];
        gemm_with_isa(isa, ty, n, &wf, rows, &af, toks, &mut out, stride)
            .map_err(|e| e.to_string())?;
        for (t, at) in a.iter().enumerate() {
            for (j, wr) in w.iter().enumerate() {
                let want = scalar::vec_dot_grid_q8_k(fmt, n, wr, at).map_err(|e| e.to_string())?;
                let got = out[t * stride + j];
                if got.to_bits() != want.to_bits() {
                    return Err(format!(
                        "{ty} {isa} {rows} rows × {toks} tokens, row {j} token {t}: {got} vs scalar {want}"
                    ));
                }
            }
        }
    }
    Ok(())
}

#[test]
fn products_of_many_tokens_give_the_scalar_bits() {
    for (k, fmt) in GridFormat::ALL.into_iter().enumerate() {
        for (rows, toks) in [(29, 1), (29, 2), (29, 3), (16, 9), (24, 17), (8, 8)] {
            check_product(fmt, rows, toks, 50 + k as u64).unwrap_or_else(|e| panic!("{e}"));
        }
    }
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
    fn every_isa_gives_the_scalar_bits_random(seed in any::<u64>(), blocks in 1usize..6, k in 0usize..GridFormat::ALL.len()) {
        if let Err(e) = check_bits(GridFormat::ALL[k], blocks, seed, 1.0) {
            prop_assert!(false, "{}", e);
        }
    }

    #[test]
    fn products_give_the_scalar_bits_random(seed in any::<u64>(), rows in 1usize..40, toks in 1usize..12, k in 0usize..GridFormat::ALL.len()) {
        if let Err(e) = check_product(GridFormat::ALL[k], rows, toks, seed) {
            prop_assert!(false, "{}", e);
        }
    }
}
