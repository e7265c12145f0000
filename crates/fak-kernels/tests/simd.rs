//! The SIMD kernels agree with their scalar twins, on every ISA this CPU
//! can run, for every weight type.
//!
//! Weight rows are random valid blocks (random bytes, f16 scales in
//! ±[2^-8, 2^2]); activation rows are random f32 rows quantized with
//! `quantize_row`, as in the model. The float types (F32, F16, BF16) give
//! the scalar twin's bits on every path. Integer block sums are exact on
//! every path, so the quantized types' dot products differ only by float
//! accumulation order:
//!
//! ```text
//!   |simd - scalar| ≤ 1e-5 · Σ_i (|w'_i| + |min_i|) · |a'_i| + 1e-30
//! ```
//!
//! with `w'`, `a'` the dequantized rows and `min_i` the min part of a
//! weight with mins (Q4_1/Q5_1: `m`; Q4_K/Q5_K: `dmin·m_sub`), which can
//! cancel against the scaled part.

use fak_gguf::GgmlType;
use fak_kernels::fp::f32_to_f16;
use fak_kernels::isa::{choose_isa, ISA_ENV_VAR};
use fak_kernels::{
    dequantize_row, isa, parse_isa, quantize_row_to_vec, scalar, vec_dot, vec_dot_type,
    vec_dot_with_isa, Isa, KernelError,
};
use proptest::prelude::*;
use rand::{Rng, SeedableRng};

mod common;
use common::*;

/// The rounding scale `Σ (|w'_i| + |min_i|) · |a'_i|` of a dot product.
fn magnitude(ty: GgmlType, n: usize, w: &[u8], a: &[u8]) -> f64 {
    let mut wf = vec![0.0f32; n];
    let mut af = vec![0.0f32; n];
    dequantize_row(ty, w, &mut wf).expect("dequantize weights");
    dequantize_row(vec_dot_type(ty), a, &mut af).expect("dequantize activations");
    wf.iter()
        .zip(&min_parts(ty, w, n))
        .zip(&af)
        .map(|((&p, &m), &q)| (f64::from(p).abs() + f64::from(m).abs()) * f64::from(q).abs())
        .sum()
}

/// A random weight row and a quantized random activation row.
fn random_pair(ty: GgmlType, n: usize, seed: u64) -> (Vec<u8>, Vec<u8>) {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let w = random_weights(ty, n, &mut rng);
    let x: Vec<f32> = (0..n).map(|_| rng.gen_range(-2.0f32..2.0)).collect();
    let a = quantize_row_to_vec(vec_dot_type(ty), &x).expect("quantize activations");
    (w, a)
}

/// Compares every available ISA with the scalar twin on one random pair.
fn check_all_isas(ty: GgmlType, n: usize, seed: u64) -> Result<(), String> {
    let (w, a) = random_pair(ty, n, seed);
    let want = scalar::vec_dot(ty, n, &w, &a).map_err(|e| e.to_string())?;
    let tol = 1e-5 * magnitude(ty, n, &w, &a) + 1e-30;
    for isa in Isa::available() {
        let got = vec_dot_with_isa(isa, ty, n, &w, &a).map_err(|e| e.to_string())?;
        let err = (f64::from(got) - f64::from(want)).abs();
        if err.is_nan() || err > tol || !got.is_finite() {
            return Err(format!(
                "{ty} n={n} seed={seed} {isa}: {got} vs scalar {want} (|diff| {err:e} > {tol:e})"
            ));
        }
        if isa == Isa::Scalar && got.to_bits() != want.to_bits() {
            return Err(format!(
                "{ty} n={n}: Isa::Scalar {got} is not scalar {want}"
            ));
        }
        // The float types' twins add in the SIMD lanes' order: equal bits.
        if ty.block_size() == 1 && got.to_bits() != want.to_bits() {
            return Err(format!(
                "{ty} n={n} seed={seed} {isa}: {got} is not the scalar twin's {want}"
            ));
        }
    }
    Ok(())
}

/// Row lengths for `ty`: one block, a few, and model-sized rows (896 and
/// 4864 elements are Qwen2.5-0.5B's hidden and FFN widths).
fn lengths(ty: GgmlType) -> Vec<usize> {
    match ty.block_size() {
        1 => vec![1, 7, 8, 31, 32, 33, 100, 896],
        32 => vec![32, 64, 96, 224, 896, 4864],
        _ => vec![256, 512, 768, 4864],
    }
}

#[test]
fn simd_matches_scalar_for_every_type_and_length() {
    for ty in WEIGHT_TYPES {
        for n in lengths(ty) {
            for seed in 0..3 {
                check_all_isas(ty, n, seed).unwrap_or_else(|e| panic!("{e}"));
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn simd_matches_scalar_random(seed in any::<u64>(), blocks in 1usize..12) {
        for ty in WEIGHT_TYPES {
            let n = blocks * ty.block_size() * if ty.block_size() == 1 { 37 } else { 1 };
            if let Err(e) = check_all_isas(ty, n, seed) {
                prop_assert!(false, "{}", e);
            }
        }
    }
}

/// Extreme quants: every weight byte pattern and activations at ±127 give
/// the exact integer sums on every path (the float steps see the same
/// integers; with unit scales the result is exact).
#[test]
fn extreme_quants_are_exact() {
    let one = f32_to_f16(1.0).to_le_bytes();
    // Q8_0 weights run through all byte values; activations alternate ±127.
    let n = 256;
    let mut w = vec![0u8; n / 32 * 34];
    let mut a = vec![0u8; n / 32 * 34];
    for (b, (wb, ab)) in w
        .chunks_exact_mut(34)
        .zip(a.chunks_exact_mut(34))
        .enumerate()
    {
        wb[0..2].copy_from_slice(&one);
        ab[0..2].copy_from_slice(&one);
        for i in 0..32 {
            wb[2 + i] = (b * 32 + i) as u8;
            ab[2 + i] = if (i + b) % 3 == 0 {
                127
            } else {
                (-127i8) as u8
            };
        }
    }
    let want = scalar::vec_dot(GgmlType::Q8_0, n, &w, &a).expect("scalar");
    for isa in Isa::available() {
        let got = vec_dot_with_isa(isa, GgmlType::Q8_0, n, &w, &a).expect("simd");
        assert_eq!(got, want, "Q8_0 {isa}");
    }
    // Q6_K/Q4_K with Q8_K activations at -128 and 127 (Q8_K's full range).
    for ty in [GgmlType::Q4_K, GgmlType::Q6_K] {
        let mut rng = rand::rngs::StdRng::seed_from_u64(11);
        let mut w = random_weights(ty, 512, &mut rng);
        for blk in w.chunks_exact_mut(ty.type_size()) {
            for &off in f16_fields(ty) {
                blk[off..off + 2].copy_from_slice(&one);
            }
        }
        let mut a = vec![0u8; 2 * 292];
        for blk in a.chunks_exact_mut(292) {
            blk[0..4].copy_from_slice(&1.0f32.to_le_bytes());
            for (i, q) in blk[4..260].iter_mut().enumerate() {
                *q = if i % 2 == 0 { 0x80 } else { 127 };
            }
            for g in 0..16 {
                let s: i16 = (0..16)
                    .map(|i| if i % 2 == 0 { -128i16 } else { 127 })
                    .sum();
                blk[260 + 2 * g..262 + 2 * g].copy_from_slice(&s.to_le_bytes());
            }
        }
        let want = scalar::vec_dot(ty, 512, &w, &a).expect("scalar");
        for isa in Isa::available() {
            let got = vec_dot_with_isa(isa, ty, 512, &w, &a).expect("simd");
            assert_eq!(got, want, "{ty} {isa}");
        }
    }
}

#[test]
fn per_type_functions_follow_vec_dot() {
    type Dot = fn(usize, &[u8], &[u8]) -> Result<f32, KernelError>;
    let table: [(GgmlType, Dot); 12] = [
        (GgmlType::F32, fak_kernels::vec_dot_f32),
        (GgmlType::F16, fak_kernels::vec_dot_f16),
        (GgmlType::BF16, fak_kernels::vec_dot_bf16),
        (GgmlType::Q4_0, fak_kernels::vec_dot_q4_0_q8_0),
        (GgmlType::Q4_1, fak_kernels::vec_dot_q4_1_q8_1),
        (GgmlType::Q5_0, fak_kernels::vec_dot_q5_0_q8_0),
        (GgmlType::Q5_1, fak_kernels::vec_dot_q5_1_q8_1),
        (GgmlType::Q8_0, fak_kernels::vec_dot_q8_0_q8_0),
        (GgmlType::Q4_K, fak_kernels::vec_dot_q4_k_q8_k),
        (GgmlType::Q5_K, fak_kernels::vec_dot_q5_k_q8_k),
        (GgmlType::Q6_K, fak_kernels::vec_dot_q6_k_q8_k),
        (GgmlType::Q8_K, fak_kernels::vec_dot_q8_k_q8_k),
    ];
    for (ty, f) in table {
        let n = if ty.block_size() == 1 { 300 } else { 1024 };
        let (w, a) = random_pair(ty, n, 5);
        let via_vec_dot = vec_dot(ty, n, &w, &a).expect("vec_dot");
        let via_isa = vec_dot_with_isa(isa(), ty, n, &w, &a).expect("vec_dot_with_isa");
        let direct = f(n, &w, &a).expect("per-type");
        assert_eq!(direct.to_bits(), via_vec_dot.to_bits(), "{ty}");
        assert_eq!(direct.to_bits(), via_isa.to_bits(), "{ty}");
        // Repeated calls give the same bits (no hidden state).
        assert_eq!(f(n, &w, &a).expect("again").to_bits(), direct.to_bits());
    }
}

#[test]
fn bad_lengths_are_errors_on_every_isa() {
    for ty in WEIGHT_TYPES {
        let n = ty.block_size() * 2;
        let (w, a) = random_pair(ty, n, 3);
        for isa in Isa::available() {
            let short_w = vec_dot_with_isa(isa, ty, n, &w[..w.len() - 1], &a);
            assert!(
                matches!(short_w, Err(KernelError::Length { .. })),
                "{ty} {isa}"
            );
            let short_a = vec_dot_with_isa(isa, ty, n, &w, &a[..a.len() - 1]);
            assert!(
                matches!(short_a, Err(KernelError::Length { .. })),
                "{ty} {isa}"
            );
            if ty.block_size() > 1 {
                let partial = vec_dot_with_isa(isa, ty, n - 1, &w, &a);
                assert!(
                    matches!(partial, Err(KernelError::PartialBlock { .. })),
                    "{ty} {isa}"
                );
            }
        }
    }
}

#[test]
fn unavailable_isa_is_an_error() {
    let (w, a) = random_pair(GgmlType::Q8_0, 32, 1);
    for isa in Isa::ALL {
        let r = vec_dot_with_isa(isa, GgmlType::Q8_0, 32, &w, &a);
        if isa.is_available() {
            assert!(r.is_ok(), "{isa}");
        } else {
            assert_eq!(r, Err(KernelError::IsaUnavailable { isa }));
        }
    }
}

#[test]
fn isa_names_parse() {
    assert_eq!(parse_isa("scalar"), Some(Isa::Scalar));
    assert_eq!(parse_isa("avx2"), Some(Isa::Avx2));
    assert_eq!(parse_isa("avx512"), Some(Isa::Avx512));
    assert_eq!(parse_isa(" AVX2\n"), Some(Isa::Avx2));
    assert_eq!(parse_isa(""), None);
    assert_eq!(parse_isa("avx"), None);
    assert_eq!(parse_isa("sse4"), None);
    assert_eq!(parse_isa("avx512vnni"), None);
    for isa in Isa::ALL {
        assert_eq!(parse_isa(&isa.to_string()), Some(isa));
    }
}

#[test]
fn isa_selection_rule() {
    assert_eq!(choose_isa(None, Isa::Avx2), Ok(Isa::Avx2));
    assert_eq!(choose_isa(Some("scalar"), Isa::Avx2), Ok(Isa::Scalar));
    assert_eq!(choose_isa(Some("avx2"), Isa::Avx512), Ok(Isa::Avx2));
    let too_wide = choose_isa(Some("avx512"), Isa::Avx2).expect_err("unsupported");
    assert!(too_wide.contains(ISA_ENV_VAR) && too_wide.contains("avx512"));
    let unknown = choose_isa(Some("neon"), Isa::Scalar).expect_err("unknown");
    assert!(unknown.contains("\"neon\""), "{unknown}");
}

#[test]
fn detected_features_match_available_isas() {
    let features = fak_kernels::detected_isa_features();
    if Isa::Avx2.is_available() {
        for f in ["avx2", "fma", "f16c"] {
            assert!(features.contains(&f), "{f} missing from {features:?}");
        }
    }
    if Isa::Avx512.is_available() {
        assert!(features.contains(&"avx512vnni"));
    }
    // The process-wide choice honours FAK_ISA when it is valid here.
    let forced = std::env::var(ISA_ENV_VAR).ok();
    if let Some(want) = forced.as_deref().and_then(parse_isa) {
        if want.is_available() {
            assert_eq!(isa(), want);
        }
    }
}

/// The result depends only on the bytes and the ISA: not on the rows'
/// alignment in memory, not on what surrounds them, not on earlier calls.
#[test]
fn results_do_not_depend_on_placement() {
    for ty in WEIGHT_TYPES {
        let n = if ty.block_size() == 1 { 96 } else { 1024 };
        let (w, a) = random_pair(ty, n, 9);
        for isa in Isa::available() {
            let want = vec_dot_with_isa(isa, ty, n, &w, &a).expect("dot").to_bits();
            for shift in 1..4 {
                let mut wbuf = vec![0xEEu8; w.len() + 8];
                let mut abuf = vec![0x11u8; a.len() + 8];
                wbuf[shift..shift + w.len()].copy_from_slice(&w);
                abuf[shift + 1..shift + 1 + a.len()].copy_from_slice(&a);
                let got = vec_dot_with_isa(
                    isa,
                    ty,
                    n,
                    &wbuf[shift..shift + w.len()],
                    &abuf[shift + 1..shift + 1 + a.len()],
                )
                .expect("shifted dot");
                assert_eq!(got.to_bits(), want, "{ty} {isa} shift {shift}");
            }
        }
    }
}
