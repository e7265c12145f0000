//! Dequantization: one row of block-encoded bytes to `f32`, bit-identical to
//! ggml's `dequantize_row_*` / `ggml_*_to_fp32_row`.
//!
//! Bit-exactness comes from doing the same float operations in the same
//! order as ggml's C (Rust never fuses `a * b + c` into an FMA on its own):
//!
//! ```text
//!   Q4_0, Q5_0, Q8_0, Q8_1, Q8_K   x = q as f32 * d
//!   Q4_1, Q5_1                     x = q as f32 * d + m
//!   Q4_K, Q5_K                     x = (d * sc as f32) * q as f32 - (dmin * m as f32)
//!   Q6_K                           x = (d * sc as f32) * q as f32
//!   Q2_K                           x = (d * (sc & 15) as f32) * q as f32 - (dmin * (sc >> 4) as f32)
//!   Q3_K                           x = (d * (s - 32) as f32) * q as f32
//!   IQ4_NL                         x = d * L[q] as f32
//!   IQ4_XS                         x = (d * (ls - 32) as f32) * L[q] as f32
//!   IQ1_*, IQ2_*, IQ3_*            see `grid`
//! ```

use fak_gguf::GgmlType;

use crate::blocks::{
    get_scale_min_k4, BlockIQ4_NL, BlockIQ4_XS, BlockMXFP4, BlockNVFP4, BlockQ1_0, BlockQ2_K,
    BlockQ3_K, BlockQ4_0, BlockQ4_1, BlockQ4_K, BlockQ5_0, BlockQ5_1, BlockQ5_K, BlockQ6_K,
    BlockQ8_0, BlockQ8_1, BlockQ8_K, GridFormat,
};
use crate::error::{KernelError, Op, Operand, RowCheck};
use crate::fp::{bf16_to_f32, e8m0_to_f32_half, f16_to_f32, ue4m3_to_f32_half};
use crate::grid;

/// Whether [`dequantize_row`] supports `ty`.
pub fn can_dequantize(ty: GgmlType) -> bool {
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
            | MXFP4
            | NVFP4
            | Q1_0
    ) || GridFormat::of(ty).is_some()
}

/// Decodes one row of `dst.len()` elements of type `ty` into `dst`.
///
/// * `src`: the row's encoded bytes, exactly `ty.row_bytes(dst.len())` of
///   them (whole blocks, little-endian, any alignment).
/// * `dst`: `[n]` output values, `n` a multiple of `ty.block_size()`.
///
/// Supported: F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1, Q2_K,
/// Q3_K, Q4_K, Q5_K, Q6_K, Q8_K, IQ4_NL, IQ4_XS, MXFP4, NVFP4, Q1_0 and the codebook and
/// ternary formats (IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S,
/// TQ1_0, TQ2_0; see `grid`). Results are bit-identical to ggml's dequantizers
/// (Q8_1 has none in ggml; it decodes as `d * q` like Q8_0).
///
/// # Errors
///
/// [`KernelError::Unsupported`] for other types; [`KernelError::PartialBlock`]
/// if `dst.len()` is not a whole number of blocks; [`KernelError::Length`]
/// if `src` is not exactly one row.
pub fn dequantize_row(ty: GgmlType, src: &[u8], dst: &mut [f32]) -> Result<(), KernelError> {
    if !can_dequantize(ty) {
        return Err(KernelError::Unsupported {
            op: Op::Dequantize,
            ty,
        });
    }
    let check = RowCheck {
        op: Op::Dequantize,
        ty,
        n: dst.len(),
    };
    check.expect_row(Operand::EncodedInput, src.len())?;
    match ty {
        GgmlType::F32 => each_block::<4, 1>(src, dst, |b, y| y[0] = f32::from_le_bytes(*b)),
        GgmlType::F16 => {
            each_block::<2, 1>(src, dst, |b, y| y[0] = f16_to_f32(u16::from_le_bytes(*b)))
        }
        GgmlType::BF16 => {
            each_block::<2, 1>(src, dst, |b, y| y[0] = bf16_to_f32(u16::from_le_bytes(*b)))
        }
        GgmlType::Q4_0 => each_block(src, dst, dequant_q4_0),
        GgmlType::Q4_1 => each_block(src, dst, dequant_q4_1),
        GgmlType::Q5_0 => each_block(src, dst, dequant_q5_0),
        GgmlType::Q5_1 => each_block(src, dst, dequant_q5_1),
        GgmlType::Q8_0 => each_block(src, dst, dequant_q8_0),
        GgmlType::Q8_1 => each_block(src, dst, dequant_q8_1),
        GgmlType::Q4_K => each_block(src, dst, dequant_q4_k),
        GgmlType::Q5_K => each_block(src, dst, dequant_q5_k),
        GgmlType::Q6_K => each_block(src, dst, dequant_q6_k),
        GgmlType::Q8_K => each_block(src, dst, dequant_q8_k),
        GgmlType::Q2_K => each_block(src, dst, dequant_q2_k),
        GgmlType::Q3_K => each_block(src, dst, dequant_q3_k),
        GgmlType::IQ4_NL => each_block(src, dst, dequant_iq4_nl),
        GgmlType::IQ4_XS => each_block(src, dst, dequant_iq4_xs),
        GgmlType::MXFP4 => each_block(src, dst, dequant_mxfp4),
        GgmlType::NVFP4 => each_block(src, dst, dequant_nvfp4),
        GgmlType::Q1_0 => each_block(src, dst, dequant_q1_0),
        _ => match GridFormat::of(ty) {
            Some(fmt) => {
                for (b, y) in src
                    .chunks_exact(fmt.bytes())
                    .zip(dst.as_chunks_mut::<256>().0)
                {
                    grid::dequant_block(fmt, b, y);
                }
            }
            None => {
                return Err(KernelError::Unsupported {
                    op: Op::Dequantize,
                    ty,
                })
            }
        },
    }
    Ok(())
}

/// [`dequantize_row`] into a new vector of `n` values.
///
/// # Errors
///
/// As [`dequantize_row`].
pub fn dequantize_row_to_vec(ty: GgmlType, src: &[u8], n: usize) -> Result<Vec<f32>, KernelError> {
    if !can_dequantize(ty) {
        return Err(KernelError::Unsupported {
            op: Op::Dequantize,
            ty,
        });
    }
    RowCheck {
        op: Op::Dequantize,
        ty,
        n,
    }
    .expect_row(Operand::EncodedInput, src.len())?;
    let mut out = vec![0.0; n];
    dequantize_row(ty, src, &mut out)?;
    Ok(out)
}

/// Runs `f` on each `B`-byte block of `src` and its `E` output values.
/// Lengths were validated by the caller; a mismatch would only shorten the
/// loop, never index out of bounds.
#[inline]
fn each_block<const B: usize, const E: usize>(
    src: &[u8],
    dst: &mut [f32],
    f: impl Fn(&[u8; B], &mut [f32; E]),
) {
    let (blocks, _) = src.as_chunks::<B>();
    let (outs, _) = dst.as_chunks_mut::<E>();
    for (b, y) in blocks.iter().zip(outs) {
        f(b, y);
    }
}

/// One Q4_0 block: `b` its encoded bytes, `y` its values in element order.
fn dequant_q4_0(b: &[u8; BlockQ4_0::BYTES], y: &mut [f32; 32]) {
    let b = BlockQ4_0::from_bytes(b);
    let d = f16_to_f32(b.d);
    for (y, q) in y.iter_mut().zip(b.quants()) {
        *y = f32::from(q) * d;
    }
}

/// One Q4_1 block: `b` its encoded bytes, `y` its values in element order.
fn dequant_q4_1(b: &[u8; BlockQ4_1::BYTES], y: &mut [f32; 32]) {
    let b = BlockQ4_1::from_bytes(b);
    let (d, m) = (f16_to_f32(b.d), f16_to_f32(b.m));
    for (y, q) in y.iter_mut().zip(b.quants()) {
        *y = f32::from(q) * d + m;
    }
}

/// One Q5_0 block: `b` its encoded bytes, `y` its values in element order.
fn dequant_q5_0(b: &[u8; BlockQ5_0::BYTES], y: &mut [f32; 32]) {
    let b = BlockQ5_0::from_bytes(b);
    let d = f16_to_f32(b.d);
    for (y, q) in y.iter_mut().zip(b.quants()) {
        *y = f32::from(q) * d;
    }
}

/// One Q5_1 block: `b` its encoded bytes, `y` its values in element order.
fn dequant_q5_1(b: &[u8; BlockQ5_1::BYTES], y: &mut [f32; 32]) {
    let b = BlockQ5_1::from_bytes(b);
    let (d, m) = (f16_to_f32(b.d), f16_to_f32(b.m));
    for (y, q) in y.iter_mut().zip(b.quants()) {
        *y = f32::from(q) * d + m;
    }
}

/// One Q8_0 block: `b` its encoded bytes, `y` its values in element order.
fn dequant_q8_0(b: &[u8; BlockQ8_0::BYTES], y: &mut [f32; 32]) {
    let b = BlockQ8_0::from_bytes(b);
    let d = f16_to_f32(b.d);
    for (y, q) in y.iter_mut().zip(b.qs) {
        *y = f32::from(q) * d;
    }
}

/// One Q8_1 block: `b` its encoded bytes, `y` its values in element order.
fn dequant_q8_1(b: &[u8; BlockQ8_1::BYTES], y: &mut [f32; 32]) {
    let b = BlockQ8_1::from_bytes(b);
    let d = f16_to_f32(b.d);
    for (y, q) in y.iter_mut().zip(b.qs) {
        *y = f32::from(q) * d;
    }
}

/// Shared Q4_K/Q5_K body: `q` are the unsigned quants in element order.
#[inline]
fn dequant_k_with_mins(d: u16, dmin: u16, scales: &[u8; 12], q: &[u8; 256], y: &mut [f32; 256]) {
    let (d, dmin) = (f16_to_f32(d), f16_to_f32(dmin));
    let (sc, m) = get_scale_min_k4(scales);
    let sub = y
        .chunks_exact_mut(32)
        .zip(q.chunks_exact(32))
        .zip(sc.iter().zip(&m));
    for ((y, q), (&sc, &m)) in sub {
        let d1 = d * f32::from(sc);
        let m1 = dmin * f32::from(m);
        for (y, &q) in y.iter_mut().zip(q) {
            *y = d1 * f32::from(q) - m1;
        }
    }
}

/// One Q4_K block: `b` its encoded bytes, `y` its values in element order.
fn dequant_q4_k(b: &[u8; BlockQ4_K::BYTES], y: &mut [f32; 256]) {
    let b = BlockQ4_K::from_bytes(b);
    dequant_k_with_mins(b.d, b.dmin, &b.scales, &b.quants(), y);
}

/// One Q5_K block: `b` its encoded bytes, `y` its values in element order.
fn dequant_q5_k(b: &[u8; BlockQ5_K::BYTES], y: &mut [f32; 256]) {
    let b = BlockQ5_K::from_bytes(b);
    dequant_k_with_mins(b.d, b.dmin, &b.scales, &b.quants(), y);
}

/// One Q6_K block: `b` its encoded bytes, `y` its values in element order.
fn dequant_q6_k(b: &[u8; BlockQ6_K::BYTES], y: &mut [f32; 256]) {
    let b = BlockQ6_K::from_bytes(b);
    let d = f16_to_f32(b.d);
    let q = b.quants();
    for ((y, q), &sc) in y
        .chunks_exact_mut(16)
        .zip(q.chunks_exact(16))
        .zip(&b.scales)
    {
        let ds = d * f32::from(sc);
        for (y, &q) in y.iter_mut().zip(q) {
            *y = ds * f32::from(q);
        }
    }
}

/// One Q2_K block: `b` its encoded bytes, `y` its values in element order.
fn dequant_q2_k(b: &[u8; BlockQ2_K::BYTES], y: &mut [f32; 256]) {
    let b = BlockQ2_K::from_bytes(b);
    let (d, dmin) = (f16_to_f32(b.d), f16_to_f32(b.dmin));
    let q = b.quants();
    for ((y, q), &sc) in y
        .chunks_exact_mut(16)
        .zip(q.chunks_exact(16))
        .zip(&b.scales)
    {
        let dl = d * f32::from(sc & 0x0F);
        let ml = dmin * f32::from(sc >> 4);
        for (y, &q) in y.iter_mut().zip(q) {
            *y = dl * f32::from(q) - ml;
        }
    }
}

/// One Q3_K block: `b` its encoded bytes, `y` its values in element order.
fn dequant_q3_k(b: &[u8; BlockQ3_K::BYTES], y: &mut [f32; 256]) {
    let b = BlockQ3_K::from_bytes(b);
    let d = f16_to_f32(b.d);
    let q = b.quants();
    for ((y, q), &s) in y
        .chunks_exact_mut(16)
        .zip(q.chunks_exact(16))
        .zip(&b.signed_scales())
    {
        let dl = d * f32::from(s);
        for (y, &q) in y.iter_mut().zip(q) {
            *y = dl * f32::from(q);
        }
    }
}

/// One IQ4_NL block: `b` its encoded bytes, `y` its values in element order.
fn dequant_iq4_nl(b: &[u8; BlockIQ4_NL::BYTES], y: &mut [f32; 32]) {
    let b = BlockIQ4_NL::from_bytes(b);
    let d = f16_to_f32(b.d);
    for (y, q) in y.iter_mut().zip(b.quants()) {
        *y = d * f32::from(q);
    }
}

/// One MXFP4 block: `b` its encoded bytes, `y` its values in element order
/// (ggml: `level · d`, an exact `i8` times the power of two `d`).
fn dequant_mxfp4(b: &[u8; BlockMXFP4::BYTES], y: &mut [f32; 32]) {
    let b = BlockMXFP4::from_bytes(b);
    let d = e8m0_to_f32_half(b.e);
    for (y, q) in y.iter_mut().zip(b.quants()) {
        *y = f32::from(q) * d;
    }
}

/// One NVFP4 block: `b` its encoded bytes, `y` its values in element order
/// (ggml: `level · d_s`, each sub-block's halved UE4M3 scale).
fn dequant_nvfp4(b: &[u8; BlockNVFP4::BYTES], y: &mut [f32; 64]) {
    let b = BlockNVFP4::from_bytes(b);
    let q = b.quants();
    for ((y, q), &ds) in y
        .as_chunks_mut::<16>()
        .0
        .iter_mut()
        .zip(q.as_chunks::<16>().0)
        .zip(&b.d)
    {
        let d = ue4m3_to_f32_half(ds);
        for (y, &q) in y.iter_mut().zip(q) {
            *y = f32::from(q) * d;
        }
    }
}

/// One Q1_0 block: `b` its encoded bytes, `y` its values (`±d`) in element
/// order.
fn dequant_q1_0(b: &[u8; BlockQ1_0::BYTES], y: &mut [f32; 128]) {
    let b = BlockQ1_0::from_bytes(b);
    let d = f16_to_f32(b.d);
    for (y, q) in y.iter_mut().zip(b.quants()) {
        *y = if q > 0 { d } else { -d };
    }
}

/// One IQ4_XS block: `b` its encoded bytes, `y` its values in element order.
fn dequant_iq4_xs(b: &[u8; BlockIQ4_XS::BYTES], y: &mut [f32; 256]) {
    let b = BlockIQ4_XS::from_bytes(b);
    let d = f16_to_f32(b.d);
    let q = b.quants();
    for ((y, q), &ls) in y
        .chunks_exact_mut(32)
        .zip(q.chunks_exact(32))
        .zip(&b.signed_scales())
    {
        let dl = d * f32::from(ls);
        for (y, &q) in y.iter_mut().zip(q) {
            *y = dl * f32::from(q);
        }
    }
}

/// One Q8_K block: `b` its encoded bytes, `y` its values in element order.
fn dequant_q8_k(b: &[u8; BlockQ8_K::BYTES], y: &mut [f32; 256]) {
    let b = BlockQ8_K::from_bytes(b);
    for (y, q) in y.iter_mut().zip(b.qs) {
        *y = b.d * f32::from(q);
    }
}
