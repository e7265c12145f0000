//! The 4-bit formats of [`crate::packed`]: Q4_0 and IQ4_NL (against Q8_0
//! activation rows) and Q4_1 (against Q8_1), 8 weight rows per group
//! block, and the scalar twin's arithmetic for them; and Q5_1, Q4_1 with
//! a fifth bit.
//!
//! ```text
//!   packed group block (8 rows, one 32-value block; position p = 4·row + i,
//!   step k = values 4k..4k+4, u[k][p] = the row's stored nibble 4k+i):
//!   Q4_0, IQ4_NL (144 B): d 8 × f16                               16 B
//!                 nibbles: chunk c (0..4), byte p =
//!                   u[2c][p] | u[2c+1][p] << 4                   128 B
//!   Q4_1 (160 B): d 8 × f16 | m 8 × f16                           32 B
//!                 nibbles as Q4_0                                128 B
//!   Q5_1 (192 B): Q4_1's 160 bytes (nibbles: the low 4 bits of u)
//!                 | high bits: byte p, bit k = u[k][p] >> 4        32 B
//!
//!   per row r, token t, block b (Q8_0: d_x, quants x; Q8_1 adds s_x):
//!     Q4_0:   s   = Σ (u − 8) · x                              exact i32
//!             acc = acc + (f32(s) · d_w) · d_x
//!     IQ4_NL: s   = Σ L[u] · x       (L: the 16 levels, IQ4_LEVELS)
//!             acc = acc + (d_w · d_x) · f32(s)
//!     Q4_1, Q5_1:
//!             s   = Σ u · x                                    exact i32
//!             acc = acc + ((d_w · d_x) · f32(s) + m_w · s_x)
//!   y[t][8g + r] = acc after the last block (blocks in order, from 0.0)
//! ```
//!
//! The float steps are those of the scalar row products
//! ([`crate::scalar::vec_dot_q4_0_q8_0`]: `sumi as f32 * d_w * d_a`;
//! [`crate::scalar::vec_dot_iq4_nl_q8_0`]: `(d_a * d_w) * sumi as f32`,
//! the same bits as `(d_w · d_x)` since a product does not depend on its
//! operands' order; [`crate::scalar::vec_dot_q4_1_q8_1`]: `(d_w * d_a) *
//! sumi as f32 + m_w * s_a`, as [`crate::scalar::vec_dot_q5_1_q8_1`]), in their order and without fused
//! multiply-adds, so a packed element has the bits of the scalar
//! `vec_dot` of its weight and token rows on every ISA. (The other packed formats share one float step,
//! `acc + (d_w · d_x) · f32(s)`; here each format keeps its own, because
//! the model's `FAK_ISA=scalar` output must not change.)
//!
//! The sizes equal the GGUF blocks' (8 × 18, 8 × 20 and 8 × 24 bytes). The
//! nibble chunks are Q5_0's without its high-bit plane, and Q4_K's with
//! one block instead of eight.

use super::layout::{q4, PackedFormat, QK, STEP, STEPS};
use crate::blocks::{
    BlockIQ4_NL, BlockMXFP4, BlockQ4_0, BlockQ4_1, BlockQ5_1, IQ4_LEVELS, MXFP4_LEVELS,
};
use crate::fp::f16_to_f32;

/// The nibble chunks' offset in a group block of `format` (Q4_0, IQ4_NL,
/// Q4_1 or Q5_1).
fn nib(format: PackedFormat) -> usize {
    if matches!(format, PackedFormat::Q4_1 | PackedFormat::Q5_1) {
        q4::NIB_1
    } else {
        q4::NIB_0
    }
}

/// Writes row `r`'s stored nibbles `u` (element order) and scale bytes.
fn put(dst: &mut [u8], format: PackedFormat, r: usize, d: u16, u: &[u8; QK]) {
    dst[q4::D + 2 * r..q4::D + 2 * r + 2].copy_from_slice(&d.to_le_bytes());
    let nib = nib(format);
    for k in 0..STEPS {
        for i in 0..STEP {
            let p = r * STEP + i;
            dst[nib + 32 * (k / 2) + p] |= (u[k * STEP + i] & 15) << (4 * (k % 2));
        }
    }
}

/// Packs row `r` of a Q4_0 group block from its GGUF block `b`.
pub(crate) fn encode_q4_0(dst: &mut [u8], r: usize, b: &[u8; BlockQ4_0::BYTES]) {
    let blk = BlockQ4_0::from_bytes(b);
    let u = blk.quants().map(|q| (q + 8) as u8);
    put(dst, PackedFormat::Q4_0, r, blk.d, &u);
}

/// Packs row `r` of an IQ4_NL group block from its GGUF block `b`: the
/// level indices, element `j` from the low nibble of `qs[j]` and `j + 16`
/// from its high one.
pub(crate) fn encode_iq4_nl(dst: &mut [u8], r: usize, b: &[u8; BlockIQ4_NL::BYTES]) {
    let blk = BlockIQ4_NL::from_bytes(b);
    let u: [u8; QK] = std::array::from_fn(|j| (blk.qs[j % 16] >> (4 * (j / 16))) & 15);
    put(dst, PackedFormat::IQ4NL, r, blk.d, &u);
}

/// The f16 bits of MXFP4's block scale `2^(e − 128)`, where f16 holds it
/// exactly: `e` in `104..=143` (2^-24, the least subnormal, to 2^15).
pub(crate) fn mxfp4_half(e: u8) -> Option<u16> {
    let k = i32::from(e) - 128;
    match k {
        -24..=-15 => Some(1 << (k + 24)),
        -14..=15 => Some(((k + 15) as u16) << 10),
        _ => None,
    }
}

/// Whether MXFP4 rows `data` (whole 17-byte blocks) can take the packed
/// layout: every block's scale is an exact f16. Real weights' exponents
/// sit far inside that range; a matrix with one outside stays on the row
/// kernels.
pub(crate) fn mxfp4_packs(data: &[u8]) -> bool {
    data.chunks_exact(BlockMXFP4::BYTES)
        .all(|b| mxfp4_half(b[0]).is_some())
}

/// Packs row `r` of an MXFP4 group block from its GGUF block `b`, its
/// scale as the exact f16 [`mxfp4_half`] (the caller has checked
/// [`mxfp4_packs`]; an exponent outside it would write 0).
pub(crate) fn encode_mxfp4(dst: &mut [u8], r: usize, b: &[u8; BlockMXFP4::BYTES]) {
    let blk = BlockMXFP4::from_bytes(b);
    let u: [u8; QK] = std::array::from_fn(|j| (blk.qs[j % 16] >> (4 * (j / 16))) & 15);
    put(
        dst,
        PackedFormat::MXFP4,
        r,
        mxfp4_half(blk.e).unwrap_or(0),
        &u,
    );
}

/// Packs row `r` of a Q4_1 group block from its GGUF block `b`.
pub(crate) fn encode_q4_1(dst: &mut [u8], r: usize, b: &[u8; BlockQ4_1::BYTES]) {
    let blk = BlockQ4_1::from_bytes(b);
    dst[q4::M + 2 * r..q4::M + 2 * r + 2].copy_from_slice(&blk.m.to_le_bytes());
    put(dst, PackedFormat::Q4_1, r, blk.d, &blk.quants());
}

/// Packs row `r` of a Q5_1 group block from its GGUF block `b`.
pub(crate) fn encode_q5_1(dst: &mut [u8], r: usize, b: &[u8; BlockQ5_1::BYTES]) {
    let blk = BlockQ5_1::from_bytes(b);
    dst[q4::M + 2 * r..q4::M + 2 * r + 2].copy_from_slice(&blk.m.to_le_bytes());
    let u = blk.quants();
    put(dst, PackedFormat::Q5_1, r, blk.d, &u);
    for k in 0..STEPS {
        for i in 0..STEP {
            dst[q4::HIGH_5 + r * STEP + i] |= (u[k * STEP + i] >> 4 & 1) << k;
        }
    }
}

/// Row `r`'s stored quants (element order) in a group block of `format`:
/// the nibbles (`0..16`), with Q5_1's high bits (`0..32`).
pub(crate) fn row_nibbles(format: PackedFormat, b: &[u8], r: usize) -> [u8; QK] {
    let nib = nib(format);
    let byte = |at: usize| b.get(at).copied().unwrap_or(0);
    let mut u = [0u8; QK];
    for k in 0..STEPS {
        for i in 0..STEP {
            let at = nib + 32 * (k / 2) + r * STEP + i;
            u[k * STEP + i] = (byte(at) >> (4 * (k % 2))) & 15;
            if format == PackedFormat::Q5_1 {
                u[k * STEP + i] |= (byte(q4::HIGH_5 + r * STEP + i) >> k & 1) << 4;
            }
        }
    }
    u
}

/// f16 number `i` of the 8 at byte `at` of `b` (0.0 past the end, which
/// the fixed layouts rule out).
fn half(b: &[u8], at: usize, i: usize) -> f32 {
    match b.get(at + 2 * i..at + 2 * i + 2) {
        Some(h) => f16_to_f32(u16::from_le_bytes([h[0], h[1]])),
        None => 0.0,
    }
}

/// One block of the scalar twin: `o[r] = acc` of the module diagram for
/// the group block `wb` (row nibbles `u`) and one activation block `ab`
/// (Q8_0 for Q4_0 and IQ4_NL, Q8_1 for Q4_1 and Q5_1).
pub(crate) fn block_scalar(
    format: PackedFormat,
    wb: &[u8],
    u: &[[u8; QK]; 8],
    ab: &[u8],
    o: &mut [f32],
) {
    // Q8_0: d at 0, quants at 2; Q8_1: d at 0, s at 2, quants at 4.
    let q1 = matches!(format, PackedFormat::Q4_1 | PackedFormat::Q5_1);
    let xs = ab.get(if q1 { 4 } else { 2 }..).unwrap_or(&[]);
    let dx = half(ab, 0, 0);
    for (r, acc) in o.iter_mut().enumerate() {
        let dw = half(wb, q4::D, r);
        if matches!(format, PackedFormat::IQ4NL | PackedFormat::MXFP4) {
            let table = if format == PackedFormat::MXFP4 {
                MXFP4_LEVELS
            } else {
                IQ4_LEVELS
            };
            let s: i32 = u[r]
                .iter()
                .zip(xs)
                .map(|(&w, &x)| {
                    let level = table.get(usize::from(w)).copied().unwrap_or(0);
                    i32::from(level) * i32::from(x as i8)
                })
                .sum();
            *acc += (dw * dx) * s as f32;
        } else if q1 {
            let s: i32 = u[r]
                .iter()
                .zip(xs)
                .map(|(&w, &x)| i32::from(w) * i32::from(x as i8))
                .sum();
            let (m, sx) = (half(wb, q4::M, r), half(ab, 2, 0));
            *acc += (dw * dx) * s as f32 + m * sx;
        } else {
            let s: i32 = u[r]
                .iter()
                .zip(xs)
                .map(|(&w, &x)| (i32::from(w) - 8) * i32::from(x as i8))
                .sum();
            *acc += s as f32 * dw * dx;
        }
    }
}
