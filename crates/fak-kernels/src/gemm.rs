//! Matrix products of block-format weight rows with quantized activation
//! rows, bit-identical per element to [`crate::vec_dot`] on the same ISA.
//!
//! ```text
//!   gemm(ty, n, w, n_rows, a, n_tok, out, out_stride)
//!     └─► validate lengths once ─► isa? ─ Scalar ──────────► scalar vec_dot per element
//!                                      └ Avx2/Avx512 ─► tile for ty? ─ yes ─► R rows × T tokens tiles
//!                                                     │              └ no ──► vec_dot per element
//!                                                     └ F16/BF16, ≥ 3 tokens ─► simd::gemm_half (4 × 6 on AVX-512, 2 × 6 on AVX2)
//!   codebook formats (IQ1_*, IQ2_*, IQ3_*) ─► grid::gemm: ≥ 2 tokens: each 8-row group decoded once into
//!                                            packed k-quant tiles (packed::grid); one: each block into registers
//!
//!   out (row-major, stride out_stride):
//!     token t: [ y(t,0) y(t,1) ... y(t,n_rows-1) | ignored up to out_stride ]
//! ```
//!
//! Batch invariance: an element `out[t, j]` is a function of weight row `j`,
//! activation row `t` and the ISA alone. The AVX2 tiles and the AVX2
//! `vec_dot` share one per-element float accumulation (see
//! `simd::gemm_avx2`), so it does not matter how many tokens are in the
//! call, where a token or row lands in a tile, or how callers split rows
//! across threads.

use fak_gguf::GgmlType;

use crate::blocks::GridFormat;
use crate::dispatch::vec_dot_with_isa;
use crate::dot;
use crate::dot_rows::{can_vec_dot, vec_dot_type};
use crate::error::{KernelError, Op, Operand, RowCheck};
use crate::isa::{isa, Isa};
#[cfg(target_arch = "x86_64")]
use crate::simd::Kernel;

/// `out[t * out_stride + j] = vec_dot(ty, n, w_row(j), a_row(t))` for
/// `j in 0..n_rows`, `t in 0..n_tok`, bit-identical to [`crate::vec_dot`]
/// on the kernels of [`isa()`].
///
/// * `w`: `n_rows` weight rows of `ty`, each `ty.row_bytes(n)` bytes,
///   contiguous (`[n_rows, n]`, row-major).
/// * `a`: `n_tok` activation rows of [`vec_dot_type`]`(ty)`, each that
///   type's `row_bytes(n)` bytes, contiguous (`[n_tok, n]`, row-major).
/// * `out`: `[n_tok, out_stride]` f32, row-major; only the first `n_rows`
///   values of each token row are written, so it needs at least
///   `(n_tok - 1) * out_stride + n_rows` values (nothing when `n_tok` or
///   `n_rows` is 0).
///
/// # Errors
///
/// [`KernelError::Unsupported`] for weight types without a dot product;
/// [`KernelError::PartialBlock`] if `n` is not a whole number of blocks;
/// [`KernelError::Length`] (op `VecDot`) if `w` is not exactly `n_rows`
/// rows (operand `WeightRow`), `a` not exactly `n_tok` rows
/// (`ActivationRow`), or `out` too short (`FloatOutput`; also when
/// `out_stride < n_rows` with more than one token: then `expected` is
/// `n_rows` and `actual` the stride); [`KernelError::TooLarge`] if a size
/// overflows `usize`.
#[allow(clippy::too_many_arguments)] // the agreed matmul signature
pub fn gemm(
    ty: GgmlType,
    n: usize,
    w: &[u8],
    n_rows: usize,
    a: &[u8],
    n_tok: usize,
    out: &mut [f32],
    out_stride: usize,
) -> Result<(), KernelError> {
    run(isa(), ty, n, (w, n_rows), (a, n_tok), out, out_stride)
}

/// [`gemm`] on the kernels of a given `isa` instead of [`isa()`];
/// bit-identical per element to [`crate::vec_dot_with_isa`] with the same
/// `isa`. For tests and benchmarks.
///
/// # Errors
///
/// [`KernelError::IsaUnavailable`] if this CPU cannot run `isa`; otherwise
/// as [`gemm`].
#[allow(clippy::too_many_arguments)] // the agreed matmul signature
pub fn gemm_with_isa(
    isa: Isa,
    ty: GgmlType,
    n: usize,
    w: &[u8],
    n_rows: usize,
    a: &[u8],
    n_tok: usize,
    out: &mut [f32],
    out_stride: usize,
) -> Result<(), KernelError> {
    if !isa.is_available() {
        return Err(KernelError::IsaUnavailable { isa });
    }
    run(isa, ty, n, (w, n_rows), (a, n_tok), out, out_stride)
}

/// Byte length of `rows` rows of `row_bytes` bytes, or `TooLarge`.
fn rows_len(check: RowCheck, row_bytes: usize, rows: usize) -> Result<usize, KernelError> {
    row_bytes.checked_mul(rows).ok_or(KernelError::TooLarge {
        op: check.op,
        ty: check.ty,
        n: check.n,
    })
}

/// Validates the shapes once; returns the row byte sizes `(w, a)`.
fn validate(
    ty: GgmlType,
    n: usize,
    (w, n_rows): (&[u8], usize),
    (a, n_tok): (&[u8], usize),
    out: &[f32],
    out_stride: usize,
) -> Result<(usize, usize), KernelError> {
    if !can_vec_dot(ty) {
        return Err(KernelError::Unsupported { op: Op::VecDot, ty });
    }
    let wcheck = RowCheck {
        op: Op::VecDot,
        ty,
        n,
    };
    let acheck = RowCheck {
        op: Op::VecDot,
        ty: vec_dot_type(ty),
        n,
    };
    let (wrb, arb) = (wcheck.bytes()?, acheck.bytes()?);
    wcheck.expect(Operand::WeightRow, rows_len(wcheck, wrb, n_rows)?, w.len())?;
    acheck.expect(
        Operand::ActivationRow,
        rows_len(acheck, arb, n_tok)?,
        a.len(),
    )?;
    if n_tok == 0 || n_rows == 0 {
        return Ok((wrb, arb));
    }
    let out_check = RowCheck {
        op: Op::VecDot,
        ty,
        n: n_rows,
    };
    if n_tok > 1 && out_stride < n_rows {
        return Err(KernelError::Length {
            op: Op::VecDot,
            ty,
            operand: Operand::FloatOutput,
            n: n_rows,
            expected: n_rows,
            actual: out_stride,
        });
    }
    let need = rows_len(out_check, out_stride, n_tok - 1)?
        .checked_add(n_rows)
        .ok_or(KernelError::TooLarge {
            op: Op::VecDot,
            ty,
            n: n_rows,
        })?;
    if out.len() < need {
        return Err(KernelError::Length {
            op: Op::VecDot,
            ty,
            operand: Operand::FloatOutput,
            n: n_rows,
            expected: need,
            actual: out.len(),
        });
    }
    Ok((wrb, arb))
}

/// Shared body of the entry points; `isa` must be available.
fn run(
    isa: Isa,
    ty: GgmlType,
    n: usize,
    (w, n_rows): (&[u8], usize),
    (a, n_tok): (&[u8], usize),
    out: &mut [f32],
    out_stride: usize,
) -> Result<(), KernelError> {
    let (wrb, arb) = validate(ty, n, (w, n_rows), (a, n_tok), out, out_stride)?;
    if n_tok == 0 || n_rows == 0 {
        return Ok(());
    }
    #[cfg(target_arch = "x86_64")]
    if matches!(ty, GgmlType::F16 | GgmlType::BF16)
        && isa != Isa::Scalar
        && n > 0
        && n_tok >= crate::simd::gemm_half::MIN_TOKENS
        && Isa::Avx2.is_available()
    {
        use crate::simd::gemm_half::{gemm, Bf16, Tiles, F16};
        let g = crate::simd::gemm_avx2::GemmArgs {
            nb: n,
            w,
            n_rows,
            a,
            n_tok,
            out_stride,
        };
        let tiles = if isa == Isa::Avx512 && Isa::Avx512.is_available() {
            Tiles::Avx512
        } else {
            Tiles::Avx2
        };
        // SAFETY: `Isa::Avx2.is_available()` means AVX2, FMA and F16C, and
        // `Isa::Avx512` AVX-512F as well; `validate` checked every length.
        unsafe {
            match ty {
                GgmlType::F16 => gemm::<F16>(tiles, &g, out),
                _ => gemm::<Bf16>(tiles, &g, out),
            }
        }
        return Ok(());
    }
    #[cfg(target_arch = "x86_64")]
    if isa != Isa::Scalar && n > 0 && Isa::Avx2.is_available() {
        if let Some(kernel) = Kernel::for_type(ty) {
            let g = crate::simd::gemm_avx2::GemmArgs {
                nb: n / ty.block_size(),
                w,
                n_rows,
                a,
                n_tok,
                out_stride,
            };
            // SAFETY: `Isa::Avx2.is_available()` means AVX2, FMA and F16C;
            // `validate` checked every length the tiles rely on.
            if unsafe { crate::simd::gemm_avx2::gemm(kernel, &g, out) } {
                return Ok(());
            }
        }
    }
    if let Some(fmt) = GridFormat::of(ty) {
        crate::grid::gemm(isa, fmt, n, (w, n_rows), (a, n_tok), out, out_stride);
        return Ok(());
    }
    for t in 0..n_tok {
        let arow = a.get(t * arb..(t + 1) * arb).unwrap_or_default();
        for j in 0..n_rows {
            let wrow = w.get(j * wrb..(j + 1) * wrb).unwrap_or_default();
            let y = match isa {
                Isa::Scalar => dot::vec_dot(ty, n, wrow, arow)?,
                Isa::Avx2 | Isa::Avx512 => vec_dot_with_isa(isa, ty, n, wrow, arow)?,
            };
            if let Some(o) = out.get_mut(t * out_stride + j) {
                *o = y;
            }
        }
    }
    Ok(())
}
