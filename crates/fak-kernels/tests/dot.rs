//! `vec_dot(ty, w, quantize(vec_dot_type(ty), a))` agrees with the f64 dot
//! product of the two dequantized rows, for every supported weight type.
//!
//! Weight rows are random valid blocks (random bytes with sane f16 scales
//! in ±[2^-8, 2^2]); activations are random f32 rows quantized with
//! `quantize_row`. The two sides compute the same sum in a different order,
//! so the tolerance is rounding-sized:
//!
//! ```text
//!   |vec_dot - Σ w'·a'| ≤ 1e-5 · (Σ|w'_i·a'_i| + Σ|min_i·a'_i|)      (+ for Q4_1/Q5_1)
//!                         + Σ_blocks |m_w| · e16(s_a)
//! ```
//!
//! where `min_i` is the min part of a weight with mins (Q4_1/Q5_1: `m`;
//! Q4_K/Q5_K: `dmin·m_sub`; Q2_K: `dmin·(sc >> 4)`), which can cancel against the scaled part, and
//! the last term covers Q8_1's `s = f16(d·Σq)`, which the dot uses in place
//! of `f16(d)·Σq`. Two roundings separate them: `d` is the unrounded f32
//! scale, so `|d - f16(d)|·|Σq| ≤ 2^-11·|f16(d)·Σq|`, and the f16 store of
//! `s` adds at most half an ulp, `2^-11·|s|` (plus `2^-25` if subnormal):
//!
//! ```text
//!   e16(s_a) = 2^-11 · (|s| + |f16(d)·Σq|) + 2^-25
//! ```

use fak_gguf::GgmlType;
use fak_kernels::blocks::BlockQ8_1;
use fak_kernels::fp::{f16_to_f32, f32_to_f16};
use fak_kernels::{dequantize_row, quantize_row_to_vec, vec_dot, vec_dot_type};
use proptest::prelude::*;
use rand::{Rng, SeedableRng};

mod common;
use common::*;

/// Σ_blocks |m_w| · e16(s_a) for Q4_1/Q5_1 (0 otherwise); `af` is the
/// dequantized activation row (`f16(d)·q` per element).
fn q8_1_sum_allowance(ty: GgmlType, w: &[u8], a: &[u8], af: &[f32]) -> f64 {
    if !matches!(ty, GgmlType::Q4_1 | GgmlType::Q5_1) {
        return 0.0;
    }
    let mins = min_parts(ty, w, a.len() / 36 * 32);
    a.chunks_exact(36)
        .zip(mins.chunks_exact(32))
        .zip(af.chunks_exact(32))
        .map(|((blk, m), x)| {
            let s = f64::from(f16_to_f32(
                BlockQ8_1::from_bytes(blk.try_into().expect("q8_1 block")).s,
            ));
            let rounded_sum: f64 = x.iter().map(|&v| f64::from(v)).sum();
            f64::from(m[0].abs())
                * ((s.abs() + rounded_sum.abs()) * 2f64.powi(-11) + 2f64.powi(-25))
        })
        .sum()
}

fn check_dot(ty: GgmlType, n: usize, seed: u64) -> Result<(), String> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let w = random_weights(ty, n, &mut rng);
    let aty = vec_dot_type(ty);
    let x: Vec<f32> = (0..n).map(|_| rng.gen_range(-2.0f32..2.0)).collect();
    let a = quantize_row_to_vec(aty, &x).map_err(|e| e.to_string())?;
    let got = vec_dot(ty, n, &w, &a).map_err(|e| e.to_string())?;
    let mut wf = vec![0.0f32; n];
    let mut af = vec![0.0f32; n];
    dequantize_row(ty, &w, &mut wf).map_err(|e| e.to_string())?;
    dequantize_row(aty, &a, &mut af).map_err(|e| e.to_string())?;
    let exact: f64 = wf
        .iter()
        .zip(&af)
        .map(|(&p, &q)| f64::from(p) * f64::from(q))
        .sum();
    let scale: f64 = wf
        .iter()
        .zip(&min_parts(ty, &w, n))
        .zip(&af)
        .map(|((&p, &m), &q)| (f64::from(p).abs() + f64::from(m).abs()) * f64::from(q).abs())
        .sum();
    let tol = 1e-5 * scale + q8_1_sum_allowance(ty, &w, &a, &af) * 1.01;
    let err = (f64::from(got) - exact).abs();
    if err <= tol {
        Ok(())
    } else {
        Err(format!(
            "{ty}·{aty} n={n} seed={seed}: vec_dot {got} vs {exact} (|diff| {err:e} > tol {tol:e})"
        ))
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn vec_dot_matches_dequantized_dot(seed in any::<u64>(), blocks in 1usize..5) {
        for ty in WEIGHT_TYPES {
            if let Err(e) = check_dot(ty, blocks * 256, seed) {
                prop_assert!(false, "{}", e);
            }
        }
    }
}

/// Regression: CI drew this seed, where `s = f16(d·Σq)` with the unrounded
/// `d` differs from `f16(d)·Σq` by more than half an f16 ulp of `s`.
#[test]
fn q5_1_sum_field_uses_the_unrounded_scale() {
    check_dot(GgmlType::Q5_1, 256, 8741342447819267135).unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn every_weight_type_has_a_dot() {
    for ty in WEIGHT_TYPES {
        assert!(fak_kernels::can_vec_dot(ty), "{ty}");
        check_dot(ty, 512, 7).unwrap_or_else(|e| panic!("{e}"));
    }
}

#[test]
fn vec_dot_types_follow_ggml() {
    use GgmlType::*;
    let table = [
        (Q4_0, Q8_0),
        (Q5_0, Q8_0),
        (Q8_0, Q8_0),
        (Q4_1, Q8_1),
        (Q5_1, Q8_1),
        (Q2_K, Q8_K),
        (Q3_K, Q8_K),
        (Q4_K, Q8_K),
        (Q5_K, Q8_K),
        (Q6_K, Q8_K),
        (Q8_K, Q8_K),
        (IQ4_NL, Q8_0),
        (IQ4_XS, Q8_K),
        (MXFP4, Q8_0),
        (NVFP4, Q8_0),
        (Q1_0, Q8_0),
        (TQ1_0, Q8_K),
        (TQ2_0, Q8_K),
        (F32, F32),
        (F16, F16),
        (BF16, BF16),
    ];
    for (w, a) in table {
        assert_eq!(vec_dot_type(w), a, "vec_dot_type({w})");
    }
}

#[test]
fn dot_of_known_q8_0_rows() {
    // Blocks built by hand: w quants i - 16 with d_w = 0.5, a quants 3 with
    // d_a = 0.25.
    let mut w = vec![0u8; 34];
    w[0..2].copy_from_slice(&f32_to_f16(0.5).to_le_bytes());
    let mut a = vec![0u8; 34];
    a[0..2].copy_from_slice(&f32_to_f16(0.25).to_le_bytes());
    for i in 0..32 {
        w[2 + i] = (i as i8 - 16) as u8;
        a[2 + i] = 3;
    }
    // Σ (i - 16) · 3 over i in 0..32 = 3 · (-16) = -48, times 0.5 · 0.25.
    let got = vec_dot(GgmlType::Q8_0, 32, &w, &a).expect("dot");
    assert_eq!(got, -48.0 * 0.125);
}
