//! Wrong lengths and unsupported types are errors that name what was wrong,
//! never panics.

use fak_gguf::GgmlType;
use fak_kernels::{
    dequantize_row, quantize_row, vec_dot, vec_dot_q4_0_q8_0, vec_dot_q6_k_q8_k, vec_dot_type,
    KernelError, Op, Operand,
};
use proptest::prelude::*;

#[test]
fn dequantize_rejects_short_and_long_sources() {
    let mut dst = vec![0.0f32; 64];
    for len in [0usize, 35, 37, 100] {
        let src = vec![0u8; len];
        let err = dequantize_row(GgmlType::Q4_0, &src, &mut dst).expect_err("bad length accepted");
        assert_eq!(
            err,
            KernelError::Length {
                op: Op::Dequantize,
                ty: GgmlType::Q4_0,
                operand: Operand::EncodedInput,
                n: 64,
                expected: 36,
                actual: len,
            }
        );
    }
    let msg = dequantize_row(GgmlType::Q4_0, &[0u8; 35], &mut dst)
        .expect_err("short")
        .to_string();
    assert!(
        msg.contains("q4_0") && msg.contains("35") && msg.contains("36") && msg.contains("64"),
        "{msg}"
    );
}

#[test]
fn partial_blocks_are_rejected() {
    let mut dst = vec![0.0f32; 40];
    let err = dequantize_row(GgmlType::Q8_0, &[0u8; 34], &mut dst).expect_err("partial block");
    assert_eq!(
        err,
        KernelError::PartialBlock {
            op: Op::Dequantize,
            ty: GgmlType::Q8_0,
            n: 40,
            block_size: 32
        }
    );
    let src = vec![0.5f32; 300];
    let err = quantize_row(GgmlType::Q6_K, &src, &mut [0u8; 210]).expect_err("partial super-block");
    assert_eq!(
        err,
        KernelError::PartialBlock {
            op: Op::Quantize,
            ty: GgmlType::Q6_K,
            n: 300,
            block_size: 256
        }
    );
    let err = vec_dot(GgmlType::Q4_K, 100, &[], &[]).expect_err("partial dot");
    assert!(
        matches!(
            err,
            KernelError::PartialBlock {
                op: Op::VecDot,
                block_size: 256,
                ..
            }
        ),
        "{err}"
    );
}

#[test]
fn quantize_rejects_wrong_destination() {
    let src = vec![1.0f32; 64];
    let mut dst = vec![0u8; 67];
    let err = quantize_row(GgmlType::Q8_0, &src, &mut dst).expect_err("long dst");
    assert_eq!(
        err,
        KernelError::Length {
            op: Op::Quantize,
            ty: GgmlType::Q8_0,
            operand: Operand::EncodedOutput,
            n: 64,
            expected: 68,
            actual: 67,
        }
    );
    let err = quantize_row(GgmlType::F16, &src, &mut [0u8; 127]).expect_err("short f16 dst");
    assert!(
        matches!(
            err,
            KernelError::Length {
                expected: 128,
                actual: 127,
                ..
            }
        ),
        "{err}"
    );
}

#[test]
fn vec_dot_checks_both_rows() {
    let w = vec![0u8; 18];
    let a = vec![0u8; 34];
    assert!(vec_dot(GgmlType::Q4_0, 32, &w, &a).is_ok());
    let err = vec_dot(GgmlType::Q4_0, 32, &w[..17], &a).expect_err("short w");
    assert!(
        matches!(
            err,
            KernelError::Length {
                operand: Operand::WeightRow,
                ty: GgmlType::Q4_0,
                ..
            }
        ),
        "{err}"
    );
    let err = vec_dot_q4_0_q8_0(32, &w, &a[..33]).expect_err("short a");
    assert_eq!(
        err,
        KernelError::Length {
            op: Op::VecDot,
            ty: GgmlType::Q8_0,
            operand: Operand::ActivationRow,
            n: 32,
            expected: 34,
            actual: 33,
        }
    );
    let err =
        vec_dot_q6_k_q8_k(512, &[0u8; 420], &[0u8; 292]).expect_err("one activation block for two");
    assert!(
        matches!(
            err,
            KernelError::Length {
                expected: 584,
                actual: 292,
                ..
            }
        ),
        "{err}"
    );
    let msg = err.to_string();
    assert!(
        msg.contains("activation row") && msg.contains("q8_k"),
        "{msg}"
    );
}

#[test]
fn unsupported_types_are_named() {
    for ty in [GgmlType::I8, GgmlType::I32, GgmlType::F64] {
        let err = dequantize_row(ty, &[], &mut []).expect_err("dequantize");
        assert_eq!(
            err,
            KernelError::Unsupported {
                op: Op::Dequantize,
                ty
            }
        );
        assert!(err.to_string().contains(ty.name()));
        let err = quantize_row(ty, &[], &mut []).expect_err("quantize");
        assert_eq!(
            err,
            KernelError::Unsupported {
                op: Op::Quantize,
                ty
            }
        );
        let err = vec_dot(ty, 0, &[], &[]).expect_err("vec_dot");
        assert_eq!(err, KernelError::Unsupported { op: Op::VecDot, ty });
    }
    let err = vec_dot(GgmlType::Q8_1, 32, &[0u8; 36], &[0u8; 36]).expect_err("q8_1 weights");
    assert_eq!(
        err,
        KernelError::Unsupported {
            op: Op::VecDot,
            ty: GgmlType::Q8_1
        }
    );
}

#[test]
fn empty_rows_are_fine() {
    for ty in [GgmlType::F32, GgmlType::Q4_0, GgmlType::Q6_K] {
        dequantize_row(ty, &[], &mut []).expect("empty dequantize");
        quantize_row(ty, &[], &mut []).expect("empty quantize");
        let a: &[u8] = &[];
        assert_eq!(vec_dot(ty, 0, &[], a).expect("empty dot"), 0.0);
    }
}

fn any_type() -> impl Strategy<Value = GgmlType> {
    prop::sample::select(GgmlType::ALL.to_vec())
}

/// Types `dequantize_row` supports, drawn directly (no rejection: rejecting
/// a third of the draws hits proptest's global-reject cap at high case
/// counts).
fn decodable_type() -> impl Strategy<Value = GgmlType> {
    let ok: Vec<GgmlType> = GgmlType::ALL
        .into_iter()
        .filter(|&t| fak_kernels::can_dequantize(t))
        .collect();
    prop::sample::select(ok)
}

proptest! {
    /// Arbitrary lengths and bytes never panic; when the call succeeds the
    /// lengths were exactly right.
    #[test]
    fn arbitrary_arguments_never_panic(
        ty in any_type(),
        n in 0usize..1100,
        wlen in 0usize..1200,
        alen in 0usize..1400,
        bytes in prop::collection::vec(any::<u8>(), 1400),
    ) {
        let row = |t: GgmlType| t.row_bytes(n as u64).map(|b| b as usize);
        // Half of the time, use the exact lengths (when they fit the buffer).
        let (wlen, alen) = if bytes[0] & 1 == 0 {
            let fit = |l: Option<usize>, d: usize| l.filter(|&l| l <= 1400).unwrap_or(d);
            (fit(row(ty), wlen), fit(row(vec_dot_type(ty)), alen))
        } else {
            (wlen, alen)
        };
        let mut out = vec![0.0f32; n];
        match dequantize_row(ty, &bytes[..wlen], &mut out) {
            Ok(()) => prop_assert_eq!(row(ty), Some(wlen)),
            Err(_) => prop_assert!(row(ty) != Some(wlen) || !fak_kernels::can_dequantize(ty)),
        }
        let src = vec![0.25f32; n];
        let mut enc = vec![0u8; wlen];
        match quantize_row(ty, &src, &mut enc) {
            Ok(()) => prop_assert_eq!(row(ty), Some(wlen)),
            Err(_) => prop_assert!(row(ty) != Some(wlen) || !fak_kernels::can_quantize(ty)),
        }
        match vec_dot(ty, n, &bytes[..wlen], &bytes[..alen]) {
            Ok(_) => {
                prop_assert_eq!(row(ty), Some(wlen));
                prop_assert_eq!(row(vec_dot_type(ty)), Some(alen));
            }
            Err(_) => prop_assert!(
                row(ty) != Some(wlen) || row(vec_dot_type(ty)) != Some(alen) || !fak_kernels::can_vec_dot(ty)
            ),
        }
    }

    /// Random bytes of the right length always decode (no panic, no error).
    #[test]
    fn random_blocks_always_decode(ty in decodable_type(), blocks in 0usize..4, seed in any::<u64>()) {
        let n = blocks * ty.block_size();
        let len = blocks * ty.type_size();
        let bytes: Vec<u8> = (0..len).map(|i| (seed.rotate_left(i as u32 % 64) >> 3) as u8 ^ i as u8).collect();
        let mut out = vec![0.0f32; n];
        prop_assert!(dequantize_row(ty, &bytes, &mut out).is_ok());
    }
}
