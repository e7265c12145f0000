//! Quantizers for the ternary formats (TQ1_0, TQ2_0), bit-identical to
//! ggml's `quantize_row_tq1_0_ref` / `quantize_row_tq2_0_ref`:
//!
//! ```text
//!   d = amax (the largest |x| of the 256),  id = 1/d (0 where d = 0)
//!   code = lround(x · id) + 1          (−1, 0, 1 → 0, 1, 2; ties away from 0)
//!   TQ2_0: byte 32·h + k holds the codes of elements 128·h + 32·l + k
//!          in bits 2l..2l+2
//!   TQ1_0: five codes c0..c4 (c0 most significant) in base 3, then
//!          q = ceil(q · 256 / 243), so that trit l reads back as
//!          ((q · 3^l mod 256) · 3) >> 8; the four codes of a qh byte
//!          are shifted up one trit first
//! ```
//!
//! The element order of each byte's codes is `blocks::ternary`'s.

use crate::fp::f32_to_f16;

/// ggml's `d` and `id` of a super-block: its largest magnitude and the
/// reciprocal (0 for an all-zero block).
fn scale(x: &[f32; 256]) -> (f32, f32) {
    let mut amax = 0.0f32;
    for &v in x {
        // ggml's MAX(amax, |v|), which keeps `amax` only where it is larger.
        let a = v.abs();
        amax = if amax > a { amax } else { a };
    }
    let id = if amax != 0.0 { 1.0 / amax } else { 0.0 };
    (amax, id)
}

/// The code of one value: `lround(x · id) + 1`.
#[inline]
fn code(x: f32, id: f32) -> i32 {
    (x * id).round() as i32 + 1
}

/// Packs codes base 3, the first most significant, as ggml's `u8` steps.
fn base3(codes: impl Iterator<Item = i32>) -> u8 {
    codes.fold(0u8, |q, c| q.wrapping_mul(3).wrapping_add(c as u8))
}

/// ggml's fixed-point step: `ceil(q · 256 / 243)`, truncated to a byte.
fn fixed(q: u8) -> u8 {
    (u16::from(q) * 256).div_ceil(243) as u8
}

/// One TQ2_0 block (66 bytes: `qs[64]`, `d`).
pub(crate) fn quant_tq2_0(x: &[f32; 256]) -> [u8; 66] {
    let (d, id) = scale(x);
    let mut b = [0u8; 66];
    for h in 0..2 {
        for m in 0..32 {
            let mut q = 0i32;
            for n in 0..4 {
                q += (code(x[128 * h + 32 * n + m], id) & 3) << (2 * n);
            }
            b[32 * h + m] = q as u8;
        }
    }
    b[64..66].copy_from_slice(&f32_to_f16(d).to_le_bytes());
    b
}

/// One TQ1_0 block (54 bytes: `qs[48]`, `qh[4]`, `d`).
pub(crate) fn quant_tq1_0(x: &[f32; 256]) -> [u8; 54] {
    let (d, id) = scale(x);
    let mut b = [0u8; 54];
    for m in 0..32 {
        b[m] = fixed(base3((0..5).map(|n| code(x[m + 32 * n], id))));
    }
    for m in 0..16 {
        b[32 + m] = fixed(base3((0..5).map(|n| code(x[160 + m + 16 * n], id))));
    }
    for j in 0..4 {
        let q = base3((0..4).map(|m| code(x[240 + j + 4 * m], id)));
        b[48 + j] = fixed(q.wrapping_mul(3));
    }
    b[52..54].copy_from_slice(&f32_to_f16(d).to_le_bytes());
    b
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::blocks::GridFormat;

    /// Ternary inputs come back as themselves times the block's scale.
    #[test]
    fn ternary_values_round_trip() {
        let x: [f32; 256] = std::array::from_fn(|i| [(-1.0), 0.0, 1.0][(i * 7 + i / 3) % 3] * 0.5);
        for (fmt, bytes) in [
            (GridFormat::TQ1_0, quant_tq1_0(&x).to_vec()),
            (GridFormat::TQ2_0, quant_tq2_0(&x).to_vec()),
        ] {
            let mut y = [0.0f32; 256];
            crate::grid::dequant_block(fmt, &bytes, &mut y);
            assert_eq!(y, x, "{fmt:?}");
        }
    }
}
