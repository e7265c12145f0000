//! The public dot products: validate once, then run the kernel of the
//! process-wide [`isa()`] (or an explicitly chosen [`Isa`]).
//!
//! ```text
//!   vec_dot(ty, n, w, a)
//!     └─► with_isa(isa(), ...) ─► SIMD twin for ty? ─no──► scalar::vec_dot
//!                                  │ yes
//!                                  ▼
//!                           check lengths ─► simd::run ─► f32
//! ```
//!
//! The scalar references stay reachable as [`crate::scalar`]. For given
//! inputs the result depends only on the ISA, never on the data or on
//! anything else, so a batch of rows gives the same numbers as one row at a
//! time.

use fak_gguf::GgmlType;

use crate::dot;
use crate::dot_rows::check_dot;
use crate::error::KernelError;
use crate::isa::{isa, Isa};
use crate::simd::{self, Kernel};

/// Dot product of one row of `n` weights with one row of `n` activations,
/// on the kernels of [`isa()`].
///
/// * `w`: `n` elements of `ty`, exactly `ty.row_bytes(n)` bytes.
/// * `a`: `n` elements of [`crate::vec_dot_type`]`(ty)`, exactly that
///   type's `row_bytes(n)` bytes.
///
/// The SIMD kernels compute the same exact integer block sums as the scalar
/// references in [`crate::scalar`] and differ only in the order of the
/// float accumulation (relative differences of order `1e-6` of `Σ|w_i·a_i|`).
/// The SIMD signed-by-signed products (Q8_0, Q4_0, Q5_0, Q8_K weights) take
/// `|w| · (a · sign(w))`, exact for any weight byte and for activation
/// quants in `-127..=127`, which is all that [`crate::quantize_row`]
/// produces; a hand-made activation row holding `-128` there may sum
/// differently from the scalar reference (never undefined behaviour).
///
/// # Errors
///
/// [`KernelError::Unsupported`] for weight types without a dot product;
/// [`KernelError::PartialBlock`] if `n` is not a whole number of blocks;
/// [`KernelError::Length`] if either slice is not exactly one row.
pub fn vec_dot(ty: GgmlType, n: usize, w: &[u8], a: &[u8]) -> Result<f32, KernelError> {
    with_isa(isa(), ty, n, w, a)
}

/// [`vec_dot`] on the kernels of a given `isa` instead of [`isa()`]; for
/// tests and benchmarks that compare paths.
///
/// # Errors
///
/// [`KernelError::IsaUnavailable`] if this CPU cannot run `isa`; otherwise
/// as [`vec_dot`].
pub fn vec_dot_with_isa(
    isa: Isa,
    ty: GgmlType,
    n: usize,
    w: &[u8],
    a: &[u8],
) -> Result<f32, KernelError> {
    if !isa.is_available() {
        return Err(KernelError::IsaUnavailable { isa });
    }
    with_isa(isa, ty, n, w, a)
}

/// Shared body of the dispatched entry points; `isa` must be available
/// (otherwise the scalar reference runs).
fn with_isa(isa: Isa, ty: GgmlType, n: usize, w: &[u8], a: &[u8]) -> Result<f32, KernelError> {
    let Some(kernel) = Kernel::for_type(ty).filter(|_| isa != Isa::Scalar) else {
        return dot::vec_dot(ty, n, w, a);
    };
    if !kernel.rows_fit(n, w, a) {
        check_dot(ty, n, w, a)?;
        // Unreachable while `rows_fit` and `check_dot` agree (a unit test
        // checks that they do); the scalar path is always a valid answer.
        return dot::vec_dot(ty, n, w, a);
    }
    match simd::run(isa, kernel, w, a) {
        Some(v) => Ok(v),
        None => dot::vec_dot(ty, n, w, a),
    }
}

/// The per-type entry points: each is [`vec_dot`] with its type fixed,
/// on [`isa()`]'s kernel, its doc naming its scalar reference.
macro_rules! per_type_vec_dot {
    ($($name:ident: $ty:ident, $what:literal;)*) => {$(
        #[doc = concat!($what, ".")]
        ///
        /// Runs on [`isa()`]'s kernel; the scalar reference is
        #[doc = concat!("[`crate::scalar::", stringify!($name), "`].")]
        ///
        /// # Errors
        ///
        /// As [`vec_dot`].
        pub fn $name(n: usize, w: &[u8], a: &[u8]) -> Result<f32, KernelError> {
            with_isa(isa(), GgmlType::$ty, n, w, a)
        }
    )*};
}

per_type_vec_dot! {
    vec_dot_f32: F32, "F32 · F32 (`w`, `a`: `n` little-endian `f32`s each)";
    vec_dot_f16: F16, "F16 · F16 (`w`, `a`: `n` little-endian f16s each)";
    vec_dot_bf16: BF16, "BF16 · BF16 (`w`, `a`: `n` little-endian bf16s each)";
    vec_dot_q4_0_q8_0: Q4_0,
        "Q4_0 weights · Q8_0 activations (`w`: `n / 32 * 18` bytes, `a`: `n / 32 * 34` bytes)";
    vec_dot_q4_1_q8_1: Q4_1,
        "Q4_1 weights · Q8_1 activations (`w`: `n / 32 * 20` bytes, `a`: `n / 32 * 36` bytes)";
    vec_dot_q5_0_q8_0: Q5_0,
        "Q5_0 weights · Q8_0 activations (`w`: `n / 32 * 22` bytes, `a`: `n / 32 * 34` bytes)";
    vec_dot_q5_1_q8_1: Q5_1,
        "Q5_1 weights · Q8_1 activations (`w`: `n / 32 * 24` bytes, `a`: `n / 32 * 36` bytes)";
    vec_dot_q8_0_q8_0: Q8_0, "Q8_0 weights · Q8_0 activations (`w`, `a`: `n / 32 * 34` bytes each)";
    vec_dot_q4_k_q8_k: Q4_K,
        "Q4_K weights · Q8_K activations (`w`: `n / 256 * 144` bytes, `a`: `n / 256 * 292` bytes)";
    vec_dot_q5_k_q8_k: Q5_K,
        "Q5_K weights · Q8_K activations (`w`: `n / 256 * 176` bytes, `a`: `n / 256 * 292` bytes)";
    vec_dot_q6_k_q8_k: Q6_K,
        "Q6_K weights · Q8_K activations (`w`: `n / 256 * 210` bytes, `a`: `n / 256 * 292` bytes)";
    vec_dot_q8_k_q8_k: Q8_K, "Q8_K weights · Q8_K activations (`w`, `a`: `n / 256 * 292` bytes each)";
    vec_dot_q2_k_q8_k: Q2_K,
        "Q2_K weights · Q8_K activations (`w`: `n / 256 * 84` bytes, `a`: `n / 256 * 292` bytes)";
    vec_dot_q3_k_q8_k: Q3_K,
        "Q3_K weights · Q8_K activations (`w`: `n / 256 * 110` bytes, `a`: `n / 256 * 292` bytes)";
    vec_dot_iq4_nl_q8_0: IQ4_NL,
        "IQ4_NL weights · Q8_0 activations (`w`: `n / 32 * 18` bytes, `a`: `n / 32 * 34` bytes)";
    vec_dot_mxfp4_q8_0: MXFP4,
        "MXFP4 weights · Q8_0 activations (`w`: `n / 32 * 17` bytes, `a`: `n / 32 * 34` bytes)";
    vec_dot_nvfp4_q8_0: NVFP4,
        "NVFP4 weights · Q8_0 activations (`w`: `n / 64 * 36` bytes, `a`: `n / 32 * 34` bytes)";
    vec_dot_q1_0_q8_0: Q1_0,
        "Q1_0 weights · Q8_0 activations (`w`: `n / 128 * 18` bytes, `a`: `n / 32 * 34` bytes)";
    vec_dot_iq4_xs_q8_k: IQ4_XS,
        "IQ4_XS weights · Q8_K activations (`w`: `n / 256 * 136` bytes, `a`: `n / 256 * 292` bytes)";
}
