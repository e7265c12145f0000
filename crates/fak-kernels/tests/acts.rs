//! The run-time activation quantizer (`quantize_acts`): llama.cpp's CPU
//! `from_float` arithmetic for Q8_0/Q8_1, the same bits on every ISA, and
//! the reference quantizer for every other type.

use fak_gguf::GgmlType;
use fak_kernels::{quantize_acts_with_isa, quantize_row, Isa};
use proptest::prelude::*;

fn acts(isa: Isa, ty: GgmlType, x: &[f32]) -> Vec<u8> {
    let mut out = vec![0u8; ty.row_bytes(x.len() as u64).expect("whole blocks") as usize];
    quantize_acts_with_isa(isa, ty, x, &mut out).expect("quantize");
    out
}

/// Ties go to even and the scale is `127 / amax`: for amax 127, x·id is
/// exactly x, so 2.5 → 2, 3.5 → 4, -2.5 → -2 (the reference gives 3, 4, -3).
#[test]
fn q8_0_rounds_ties_to_even() {
    let mut x = [0.0f32; 32];
    x[0] = 127.0;
    x[1] = 2.5;
    x[2] = 3.5;
    x[3] = -2.5;
    for isa in Isa::available() {
        let b = acts(isa, GgmlType::Q8_0, &x);
        assert_eq!(
            &b[2..6],
            &[127u8, 2, 4, (-2i8) as u8],
            "{isa}: run-time quants"
        );
    }
    let mut r = vec![0u8; 34];
    quantize_row(GgmlType::Q8_0, &x, &mut r).expect("reference");
    assert_eq!(&r[2..6], &[127u8, 3, 4, (-3i8) as u8], "reference quants");
}

#[test]
fn zero_blocks_and_q8_1_sums() {
    for isa in Isa::available() {
        let b = acts(isa, GgmlType::Q8_0, &[0.0; 64]);
        assert!(b.iter().all(|&v| v == 0));
        let mut x = [0.25f32; 32];
        x[5] = -1.0;
        let b = acts(isa, GgmlType::Q8_1, &x);
        let qs: i32 = b[4..36].iter().map(|&q| i32::from(q as i8)).sum();
        let d = half::f16::from_bits(u16::from_le_bytes([b[0], b[1]])).to_f32();
        let s = half::f16::from_bits(u16::from_le_bytes([b[2], b[3]])).to_f32();
        let want = qs as f32 * (1.0 / 127.0);
        assert!(
            (s - want).abs() <= 1e-3 * want.abs(),
            "{isa}: s {s} vs {want}"
        );
        assert!((d - 1.0 / 127.0).abs() < 1e-5);
    }
}

#[test]
fn other_types_use_the_reference_quantizer() {
    let x: Vec<f32> = (0..256).map(|i| (i as f32 * 0.37).sin() * 3.0).collect();
    for ty in [GgmlType::Q8_K, GgmlType::F16] {
        let mut r = vec![0u8; ty.row_bytes(256).expect("row") as usize];
        quantize_row(ty, &x, &mut r).expect("reference");
        for isa in Isa::available() {
            assert_eq!(acts(isa, ty, &x), r, "{ty:?} on {isa}");
        }
    }
}

#[test]
fn bad_lengths_are_errors() {
    let mut out = vec![0u8; 33];
    assert!(quantize_acts_with_isa(Isa::Scalar, GgmlType::Q8_0, &[0.0; 32], &mut out).is_err());
    assert!(quantize_acts_with_isa(Isa::Scalar, GgmlType::Q8_0, &[0.0; 31], &mut out).is_err());
}

proptest! {
    /// Every ISA gives the scalar twin's bytes, for any finite inputs.
    #[test]
    fn every_isa_matches_scalar(
        x in proptest::collection::vec(-1e6f32..1e6, 64),
        scale in -30i32..30,
    ) {
        let x: Vec<f32> = x.iter().map(|v| v * 2f32.powi(scale)).collect();
        for ty in [GgmlType::Q8_0, GgmlType::Q8_1] {
            let want = acts(Isa::Scalar, ty, &x);
            for isa in Isa::available() {
                prop_assert_eq!(&acts(isa, ty, &x), &want, "{:?} on {}", ty, isa);
            }
        }
    }
}
