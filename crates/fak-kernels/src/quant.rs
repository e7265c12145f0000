//! Quantization: one row of `f32` to block-encoded bytes, bit-identical to
//! ggml's reference quantizers (`quantize_row_*_ref`, which is what
//! `ggml_quantize_chunk` runs when no importance matrix is given).
//!
//! The 32-element formats reproduce ggml's exact arithmetic, including its
//! quirks:
//!
//! ```text
//!   Q4_0   d = max / -8   (max = the value of largest magnitude)
//!          q = min(15, trunc_i8(x * (1/d) + 8.5))
//!   Q4_1   d = (max - min) / 15,  q = min(15, trunc_i8((x - min) * (1/d) + 0.5))
//!   Q5_0   d = max / -16,         q = min(31, trunc_i8(x * (1/d) + 16.5))
//!   Q5_1   d = (max - min) / 31,  q = trunc_u8((x - min) * (1/d) + 0.5)
//!   Q8_0   d = amax / 127,        q = roundf(x * (1/d))        (ties away from 0)
//!   Q8_1   as Q8_0, plus s = f16(sum(q) as f32 * d)
//! ```
//!
//! `1/d` is replaced by 0 when `d == 0`; `d` and `m` are stored as f16
//! (round to nearest even). The k-quant formats live in `quant_k`.
//!
//! Q8_0, Q8_1 and Q8_K (the activation formats of the hot path) run on
//! bit-identical SIMD twins when [`isa()`] allows (see `simd`).

use fak_gguf::GgmlType;

use crate::blocks::{
    pack_5bit, BlockQ1_0, BlockQ4_0, BlockQ4_1, BlockQ5_0, BlockQ5_1, BlockQ8_0, BlockQ8_1,
};
use crate::error::{KernelError, Op, Operand, RowCheck};
use crate::fp::{f32_to_bf16, f32_to_f16};
use crate::isa::{isa, Isa};
use crate::quant_iq;
use crate::quant_k;
use crate::quant_tq;
use crate::simd;

/// Whether [`quantize_row`] supports `ty`.
pub fn can_quantize(ty: GgmlType) -> bool {
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
            | Q8_1
            | Q2_K
            | Q3_K
            | Q4_K
            | Q5_K
            | Q6_K
            | Q8_K
            | IQ4_NL
            | IQ4_XS
            | TQ1_0
            | TQ2_0
            | MXFP4
            | NVFP4
            | Q1_0
    )
}

/// Encodes one row of `src.len()` values as type `ty` into `dst`.
///
/// * `src`: `[n]` input values, `n` a multiple of `ty.block_size()`.
/// * `dst`: exactly `ty.row_bytes(n)` bytes, written as whole blocks in the
///   on-disk (little-endian) layout.
///
/// Supported: F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1, Q2_K,
/// Q3_K, Q4_K, Q5_K, Q6_K, Q8_K, IQ4_NL, IQ4_XS, TQ1_0, TQ2_0, MXFP4, NVFP4, Q1_0. The output is bit-identical to
/// ggml's reference quantizers (for IQ4_NL and IQ4_XS: to its
/// `quantize_iq4_*` without an importance matrix, as `quant_iq` says) for finite inputs (non-finite inputs give deterministic
/// output that follows ggml's C on x86-64 as far as C defines it).
///
/// # Errors
///
/// [`KernelError::Unsupported`] for other types; [`KernelError::PartialBlock`]
/// if `src.len()` is not a whole number of blocks; [`KernelError::Length`]
/// if `dst` is not exactly one row.
pub fn quantize_row(ty: GgmlType, src: &[f32], dst: &mut [u8]) -> Result<(), KernelError> {
    quantize_with(isa(), ty, src, dst, Flavor::Reference)
}

/// [`quantize_row`] on the kernels of a given `isa` instead of [`isa()`].
/// The output is the same bits on every ISA (the Q8_0, Q8_1 and Q8_K
/// quantizers have SIMD twins that are bit-identical to the scalar code);
/// this entry point exists to test exactly that.
///
/// # Errors
///
/// [`KernelError::IsaUnavailable`] if this CPU cannot run `isa`; otherwise
/// as [`quantize_row`].
pub fn quantize_row_with_isa(
    isa: Isa,
    ty: GgmlType,
    src: &[f32],
    dst: &mut [u8],
) -> Result<(), KernelError> {
    if !isa.is_available() {
        return Err(KernelError::IsaUnavailable { isa });
    }
    quantize_with(isa, ty, src, dst, Flavor::Reference)
}

/// Quantizes a row of activations into a dot-product format the way
/// llama.cpp's CPU backend does at run time (its `from_float`), which for
/// Q8_0 and Q8_1 is not the reference quantizer of [`quantize_row`]:
///
/// ```text
///   reference (quantize_row):  id = 1 / (amax / 127),  q = round(x·id)   ties away from 0
///   run time  (this):          id = 127 / amax,        q = rint(x·id)    ties to even
/// ```
///
/// Matching it keeps fak's matrix-product inputs identical to llama.cpp's.
/// Other types (Q8_K, F16, ...) quantize exactly as [`quantize_row`]. The
/// result is the same bits on every ISA (scalar twin and AVX2 twin agree;
/// blocks holding a NaN take the scalar path).
///
/// * `src`: `[n]` f32; `dst`: exactly `ty.row_bytes(n)` bytes.
///
/// # Errors
///
/// As [`quantize_row`].
pub fn quantize_acts(ty: GgmlType, src: &[f32], dst: &mut [u8]) -> Result<(), KernelError> {
    quantize_acts_with_isa(isa(), ty, src, dst)
}

/// [`quantize_acts`] on the kernels of a given `isa` (the output does not
/// depend on it; this exists to test exactly that).
///
/// # Errors
///
/// [`KernelError::IsaUnavailable`] if this CPU cannot run `isa`; otherwise
/// as [`quantize_row`].
pub fn quantize_acts_with_isa(
    isa: Isa,
    ty: GgmlType,
    src: &[f32],
    dst: &mut [u8],
) -> Result<(), KernelError> {
    if !isa.is_available() {
        return Err(KernelError::IsaUnavailable { isa });
    }
    quantize_with(isa, ty, src, dst, Flavor::Runtime)
}

/// Runtime activation body (see [`quantize_acts`]): the scale and the
/// quants `rint(x · 127 / amax)`.
#[inline]
fn quant_8bit_acts(isa: Isa, x: &[f32; 32]) -> (f32, [i8; 32]) {
    if let Some(simd) = simd::quant_8bit_acts(isa, x) {
        return simd;
    }
    let amax = absmax(x);
    let d = amax / 127.0;
    let id = if amax != 0.0 { 127.0 / amax } else { 0.0 };
    (d, x.map(|v| c_trunc_to_i8((v * id).round_ties_even())))
}

/// Which Q8_0/Q8_1 quantizer runs (the other types have one).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Flavor {
    /// ggml's reference quantizer (files, `quantize_row`).
    Reference,
    /// llama.cpp's CPU run-time activation quantizer (`quantize_acts`).
    Runtime,
}

/// Shared body of the quantize entry points.
fn quantize_with(
    isa: Isa,
    ty: GgmlType,
    src: &[f32],
    dst: &mut [u8],
    flavor: Flavor,
) -> Result<(), KernelError> {
    if !can_quantize(ty) {
        return Err(KernelError::Unsupported {
            op: Op::Quantize,
            ty,
        });
    }
    let check = RowCheck {
        op: Op::Quantize,
        ty,
        n: src.len(),
    };
    check.expect_row(Operand::EncodedOutput, dst.len())?;
    match ty {
        GgmlType::F32 => each_block::<1, 4>(src, dst, |x| x[0].to_le_bytes()),
        GgmlType::F16 | GgmlType::BF16 if simd::half_row(isa, ty == GgmlType::BF16, src, dst) => {}
        GgmlType::F16 => each_block::<1, 2>(src, dst, |x| f32_to_f16(x[0]).to_le_bytes()),
        GgmlType::BF16 => each_block::<1, 2>(src, dst, |x| f32_to_bf16(x[0]).to_le_bytes()),
        GgmlType::Q4_0 => each_block(src, dst, |x| quant_q4_0(x).to_bytes()),
        GgmlType::Q4_1 => each_block(src, dst, |x| quant_q4_1(x).to_bytes()),
        GgmlType::Q5_0 => each_block(src, dst, |x| quant_q5_0(x).to_bytes()),
        GgmlType::Q5_1 => each_block(src, dst, |x| quant_q5_1(x).to_bytes()),
        GgmlType::Q8_0 => each_block(src, dst, |x| quant_q8_0(isa, x, flavor).to_bytes()),
        GgmlType::Q8_1 => each_block(src, dst, |x| quant_q8_1(isa, x, flavor).to_bytes()),
        GgmlType::Q2_K => each_block(src, dst, |x| quant_k::quant_q2_k(x).to_bytes()),
        GgmlType::Q3_K => each_block(src, dst, |x| quant_k::quant_q3_k(x).to_bytes()),
        GgmlType::Q4_K => each_block(src, dst, |x| quant_k::quant_q4_k(x).to_bytes()),
        GgmlType::IQ4_NL => each_block(src, dst, |x| quant_iq::quant_iq4_nl(x).to_bytes()),
        GgmlType::IQ4_XS => each_block(src, dst, |x| quant_iq::quant_iq4_xs(x).to_bytes()),
        GgmlType::Q5_K => each_block(src, dst, |x| quant_k::quant_q5_k(x).to_bytes()),
        GgmlType::Q6_K => each_block(src, dst, |x| quant_k::quant_q6_k(x).to_bytes()),
        GgmlType::Q8_K => each_block(src, dst, |x| quant_k::quant_q8_k(isa, x).to_bytes()),
        GgmlType::TQ1_0 => each_block(src, dst, quant_tq::quant_tq1_0),
        GgmlType::TQ2_0 => each_block(src, dst, quant_tq::quant_tq2_0),
        GgmlType::MXFP4 => each_block(src, dst, |x| quant_iq::quant_mxfp4(x).to_bytes()),
        GgmlType::NVFP4 => each_block(src, dst, |x| quant_iq::quant_nvfp4(x).to_bytes()),
        GgmlType::Q1_0 => each_block(src, dst, |x| quant_q1_0(x).to_bytes()),
        _ => {
            return Err(KernelError::Unsupported {
                op: Op::Quantize,
                ty,
            })
        }
    }
    Ok(())
}

/// [`quantize_row`] into a new vector of `ty.row_bytes(src.len())` bytes.
///
/// # Errors
///
/// As [`quantize_row`] (the output length is always right).
pub fn quantize_row_to_vec(ty: GgmlType, src: &[f32]) -> Result<Vec<u8>, KernelError> {
    if !can_quantize(ty) {
        return Err(KernelError::Unsupported {
            op: Op::Quantize,
            ty,
        });
    }
    let bytes = RowCheck {
        op: Op::Quantize,
        ty,
        n: src.len(),
    }
    .bytes()?;
    let mut out = vec![0u8; bytes];
    quantize_row(ty, src, &mut out)?;
    Ok(out)
}

/// Runs `f` on each `E`-value block of `src` and stores the `B` bytes it
/// returns. Lengths were validated by the caller.
#[inline]
fn each_block<const E: usize, const B: usize>(
    src: &[f32],
    dst: &mut [u8],
    f: impl Fn(&[f32; E]) -> [u8; B],
) {
    let (blocks, _) = src.as_chunks::<E>();
    let (outs, _) = dst.as_chunks_mut::<B>();
    for (x, out) in blocks.iter().zip(outs) {
        *out = f(x);
    }
}

/// C's `(int8_t)f` as x86-64 compilers emit it: truncate toward zero to a
/// 32-bit integer (`cvttss2si`: NaN and out-of-range give `i32::MIN`), then
/// keep the low byte. Only matters for non-finite or absurd inputs.
#[inline]
pub(crate) fn c_trunc_to_i8(f: f32) -> i8 {
    c_trunc_to_i32(f) as i8
}

/// C's `(uint8_t)f` on x86-64; see [`c_trunc_to_i8`].
#[inline]
pub(crate) fn c_trunc_to_u8(f: f32) -> u8 {
    c_trunc_to_i32(f) as u8
}

#[inline]
fn c_trunc_to_i32(f: f32) -> i32 {
    if f.is_nan() || !(-2_147_483_648.0..2_147_483_648.0).contains(&f) {
        i32::MIN
    } else {
        f as i32
    }
}

/// `1/d`, or 0 when `d == 0` (ggml's `d ? 1.0f/d : 0.0f`).
#[inline]
fn inverse_or_zero(d: f32) -> f32 {
    if d != 0.0 {
        1.0 / d
    } else {
        0.0
    }
}

/// The value of largest magnitude (the first one on ties), 0 for all zeros.
#[inline]
fn signed_absmax(x: &[f32]) -> f32 {
    let (mut amax, mut max) = (0.0f32, 0.0f32);
    for &v in x {
        if amax < v.abs() {
            amax = v.abs();
            max = v;
        }
    }
    max
}

/// `(min, max)` as ggml's Q4_1/Q5_1 loops compute them.
#[inline]
fn min_max(x: &[f32]) -> (f32, f32) {
    let (mut min, mut max) = (f32::MAX, -f32::MAX);
    for &v in x {
        if v < min {
            min = v;
        }
        if v > max {
            max = v;
        }
    }
    (min, max)
}

/// Largest magnitude via ggml's `MAX(amax, fabsf(v))` (NaN-propagating in
/// the same way as the C ternary).
#[inline]
fn absmax(x: &[f32]) -> f32 {
    let mut amax = 0.0f32;
    for &v in x {
        amax = if amax > v.abs() { amax } else { v.abs() };
    }
    amax
}

/// Quantizes one Q4_0 block of 32 values (`x`, element order).
fn quant_q4_0(x: &[f32; 32]) -> BlockQ4_0 {
    let d = signed_absmax(x) / -8.0;
    let id = inverse_or_zero(d);
    let q = x.map(|v| c_trunc_to_i8(v * id + 8.5).min(15) as u8);
    let (lo, hi) = q.split_at(16);
    let mut qs = [0u8; 16];
    for ((b, &l), &h) in qs.iter_mut().zip(lo).zip(hi) {
        *b = l | (h << 4);
    }
    BlockQ4_0 {
        d: f32_to_f16(d),
        qs,
    }
}

/// Quantizes one Q4_1 block of 32 values (`x`, element order).
fn quant_q4_1(x: &[f32; 32]) -> BlockQ4_1 {
    let (min, max) = min_max(x);
    let d = (max - min) / 15.0;
    let id = inverse_or_zero(d);
    let q = x.map(|v| c_trunc_to_i8((v - min) * id + 0.5).min(15) as u8);
    let (lo, hi) = q.split_at(16);
    let mut qs = [0u8; 16];
    for ((b, &l), &h) in qs.iter_mut().zip(lo).zip(hi) {
        *b = l | (h << 4);
    }
    BlockQ4_1 {
        d: f32_to_f16(d),
        m: f32_to_f16(min),
        qs,
    }
}

/// Quantizes one Q5_0 block of 32 values (`x`, element order).
fn quant_q5_0(x: &[f32; 32]) -> BlockQ5_0 {
    let d = signed_absmax(x) / -16.0;
    let id = inverse_or_zero(d);
    let q = x.map(|v| c_trunc_to_i8(v * id + 16.5).min(31) as u8);
    let (qs, qh) = pack_5bit(&q);
    BlockQ5_0 {
        d: f32_to_f16(d),
        qh,
        qs,
    }
}

/// Quantizes one Q5_1 block of 32 values (`x`, element order).
fn quant_q5_1(x: &[f32; 32]) -> BlockQ5_1 {
    let (min, max) = min_max(x);
    let d = (max - min) / 31.0;
    let id = inverse_or_zero(d);
    let q = x.map(|v| c_trunc_to_u8((v - min) * id + 0.5));
    let (qs, qh) = pack_5bit(&q);
    BlockQ5_1 {
        d: f32_to_f16(d),
        m: f32_to_f16(min),
        qh,
        qs,
    }
}

/// Q8_0/Q8_1 body: the scale and the rounded quants.
#[inline]
fn quant_8bit(isa: Isa, x: &[f32; 32]) -> (f32, [i8; 32]) {
    if let Some(simd) = simd::quant_8bit(isa, x) {
        return simd;
    }
    let d = absmax(x) / 127.0;
    let id = inverse_or_zero(d);
    (d, x.map(|v| c_trunc_to_i8((v * id).round())))
}

/// The Q8_0/Q8_1 body of `flavor`.
#[inline]
fn quant_8bit_of(isa: Isa, x: &[f32; 32], flavor: Flavor) -> (f32, [i8; 32]) {
    match flavor {
        Flavor::Reference => quant_8bit(isa, x),
        Flavor::Runtime => quant_8bit_acts(isa, x),
    }
}

/// Run-time Q8_0 quantization of `src` into whole blocks (see
/// [`crate::attn::quantize_q8_0_blocks`]); blocks past `src` are left
/// as they are.
pub(crate) fn quantize_q8_0_blocks(isa: Isa, src: &[f32], dst: &mut [BlockQ8_0]) {
    for (x, b) in src.chunks_exact(32).zip(dst) {
        if let Ok(x) = <&[f32; 32]>::try_from(x) {
            *b = quant_q8_0(isa, x, Flavor::Runtime);
        }
    }
}

/// Quantizes one Q8_0 block of 32 values (`x`, element order).
fn quant_q8_0(isa: Isa, x: &[f32; 32], flavor: Flavor) -> BlockQ8_0 {
    let (d, qs) = quant_8bit_of(isa, x, flavor);
    BlockQ8_0 {
        d: f32_to_f16(d),
        qs,
    }
}

/// Quantizes one Q8_1 block of 32 values (`x`, element order).
fn quant_q8_1(isa: Isa, x: &[f32; 32], flavor: Flavor) -> BlockQ8_1 {
    let (d, qs) = quant_8bit_of(isa, x, flavor);
    let sum: i32 = qs.iter().map(|&q| i32::from(q)).sum();
    BlockQ8_1 {
        d: f32_to_f16(d),
        s: f32_to_f16(sum as f32 * d),
        qs,
    }
}

/// Q1_0, as ggml's reference quantizer: `d` the mean magnitude (summed in
/// order, then divided by 128), stored f16; bit `j` set where `x[j] ≥ 0`.
fn quant_q1_0(x: &[f32; 128]) -> BlockQ1_0 {
    let mut sum_abs = 0.0f32;
    for &v in x {
        sum_abs += v.abs();
    }
    let mut qs = [0u8; 16];
    for (j, &v) in x.iter().enumerate() {
        if v >= 0.0 {
            qs[j / 8] |= 1 << (j % 8);
        }
    }
    BlockQ1_0 {
        d: f32_to_f16(sum_abs / 128.0),
        qs,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn c_truncation_matches_x86() {
        assert_eq!(c_trunc_to_i8(15.99), 15);
        assert_eq!(c_trunc_to_i8(-0.99), 0);
        assert_eq!(c_trunc_to_i8(-1.5), -1);
        assert_eq!(c_trunc_to_i8(f32::NAN), 0);
        assert_eq!(c_trunc_to_i8(3.0e9), 0);
        assert_eq!(c_trunc_to_u8(31.5), 31);
        assert_eq!(c_trunc_to_u8(300.0), 44);
    }

    #[test]
    fn q4_0_uses_signed_max() {
        // Largest magnitude is negative: d = -8 / -8 = 1, so -8 maps to q = 0.
        let mut x = [0.0f32; 32];
        x[0] = -8.0;
        x[1] = 7.0;
        x[2] = 7.6; // 7.6 + 8.5 = 16.1 → 16 → clamped to 15
        let b = quant_q4_0(&x);
        assert_eq!(f16_bits_to(b.d), 1.0);
        let q = b.quants();
        assert_eq!((q[0], q[1], q[2], q[3]), (-8, 7, 7, 0));
    }

    #[test]
    fn q8_0_rounds_half_away_from_zero() {
        let mut x = [0.0f32; 32];
        x[0] = 127.0;
        x[1] = 2.5;
        x[2] = -2.5;
        x[3] = 0.5;
        let b = quant_q8_0(Isa::Scalar, &x, Flavor::Reference);
        assert_eq!(&b.qs[..4], &[127, 3, -3, 1]);
    }

    #[test]
    fn q8_1_sum_field() {
        let x: [f32; 32] = std::array::from_fn(|i| i as f32 - 10.0);
        let b = quant_q8_1(Isa::Scalar, &x, Flavor::Reference);
        let d = crate::fp::f16_to_f32(b.d);
        let sum: i32 = b.qs.iter().map(|&q| i32::from(q)).sum();
        assert_eq!(b.s, f32_to_f16(sum as f32 * (21.0 / 127.0)));
        assert!((d - 21.0 / 127.0).abs() < 1e-4);
    }

    fn f16_bits_to(bits: u16) -> f32 {
        crate::fp::f16_to_f32(bits)
    }
}
