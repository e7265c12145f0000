//! What a dot product's two rows must be, shared by the scalar references
//! (`dot`, `dot_k`), the ISA dispatch and the SIMD twins: the activation
//! type that pairs with a weight type ([`vec_dot_type`]), which weight types
//! have a dot product ([`can_vec_dot`]), the length check of one row pair
//! (`check_dot`) and the pairing of a checked row pair's blocks
//! (`block_pairs`).
//!
//! A leaf (it imports only the error types), so the kernels that use these
//! do not import each other for them.

use fak_gguf::GgmlType;

use crate::error::{KernelError, Op, Operand, RowCheck};

/// The format activations must be quantized to before [`crate::vec_dot`] with a
/// weight row of type `ty` (ggml's `vec_dot_type`).
///
/// Q4_0/Q5_0/Q8_0/IQ4_NL/MXFP4/NVFP4/Q1_0 → Q8_0; Q4_1/Q5_1 → Q8_1; the k-quants and IQ4_XS
/// and the codebook and ternary formats (IQ1_*, IQ2_*, IQ3_*, TQ1_0,
/// TQ2_0) → Q8_K; F32, F16
/// and BF16 pair with themselves. Types without a dot product map to
/// themselves, and [`crate::vec_dot`] rejects them.
pub fn vec_dot_type(ty: GgmlType) -> GgmlType {
    use GgmlType::*;
    match ty {
        Q4_0 | Q5_0 | Q8_0 | IQ4_NL | MXFP4 | NVFP4 | Q1_0 => Q8_0,
        Q4_1 | Q5_1 => Q8_1,
        Q2_K | Q3_K | Q4_K | Q5_K | Q6_K | Q8_K | IQ4_XS => Q8_K,
        IQ1_S | IQ1_M | IQ2_XXS | IQ2_XS | IQ2_S | IQ3_XXS | IQ3_S | TQ1_0 | TQ2_0 => Q8_K,
        other => other,
    }
}

/// Whether [`crate::vec_dot`] supports weights of type `ty`.
pub fn can_vec_dot(ty: GgmlType) -> bool {
    use GgmlType::*;
    matches!(
        ty,
        F32 | F16
            | BF16
            | Q4_0
            | Q4_1
            | Q5_0
            | Q5_1
            | Q8_0
            | Q2_K
            | Q3_K
            | Q4_K
            | Q5_K
            | Q6_K
            | Q8_K
            | IQ4_NL
            | IQ4_XS
            | IQ1_S
            | IQ1_M
            | IQ2_XXS
            | IQ2_XS
            | IQ2_S
            | IQ3_XXS
            | IQ3_S
            | TQ1_0
            | TQ2_0
            | MXFP4
            | NVFP4
            | Q1_0
    )
}

/// Checks `n`, `w` and `a` for a dot product of weight type `wty`.
pub(crate) fn check_dot(wty: GgmlType, n: usize, w: &[u8], a: &[u8]) -> Result<(), KernelError> {
    RowCheck {
        op: Op::VecDot,
        ty: wty,
        n,
    }
    .expect_row(Operand::WeightRow, w.len())?;
    let aty = vec_dot_type(wty);
    RowCheck {
        op: Op::VecDot,
        ty: aty,
        n,
    }
    .expect_row(Operand::ActivationRow, a.len())
}

/// Pairs up the weight and activation blocks of a checked row.
#[inline]
pub(crate) fn block_pairs<'a, const BW: usize, const BA: usize>(
    w: &'a [u8],
    a: &'a [u8],
) -> impl Iterator<Item = (&'a [u8; BW], &'a [u8; BA])> {
    w.as_chunks::<BW>().0.iter().zip(a.as_chunks::<BA>().0)
}
