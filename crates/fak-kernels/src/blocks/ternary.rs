//! The ternary formats TQ1_0 and TQ2_0: 256 weights per super-block, each
//! `d · t` with a trit `t` in {−1, 0, 1} and one f16 scale `d`. They decode
//! to the codebook formats' integers ([`Sub32`]: magnitudes 0 or 1, sign
//! bytes, scale codes 0 so every scale `2s + 1` is 1), so they share their
//! dot products, tiles and float step (`(d_w · d_a) · Σ t · a`, ggml's
//! order for both types).
//!
//! Layouts (bytes):
//!
//! ```text
//!   TQ2_0  66: qs[64], d.  Element 128·h + 32·l + k is bits 2l..2l+2 of
//!              qs[32·h + k] (h < 2, l < 4, k < 32), minus 1.
//!   TQ1_0  54: qs[48], qh[4], d.  Five trits per qs byte, four per qh
//!              byte, stored as a fixed-point fraction: trit l of byte b
//!              is ((b · 3^l mod 256) · 3) >> 8, minus 1.
//!              elements   0..160: trit l of qs[m],      element 32·l + m
//!              elements 160..240: trit l of qs[32 + m], element 160 + 16·l + m
//!              elements 240..256: trit l of qh[j],      element 240 + 4·l + j
//! ```
//!
//! A TQ2_0 code of 3 (never written by ggml's quantizer) is the value 2,
//! as ggml's dequantizer and dot product read it.

use super::iq_grid::Sub32;

/// The f16 scale of a TQ2_0 block: bytes 64..66.
#[inline(always)]
pub(crate) fn tq2_0_d(b: &[u8; 66]) -> u16 {
    u16::from_le_bytes([b[64], b[65]])
}

/// The f16 scale of a TQ1_0 block: bytes 52..54.
#[inline(always)]
pub(crate) fn tq1_0_d(b: &[u8; 54]) -> u16 {
    u16::from_le_bytes([b[52], b[53]])
}

/// Eight codes `u` (one per byte, each `0..4`, the value `u − 1`) as
/// magnitude and sign bytes ([`Sub32`]'s layout), without branches:
/// `z` marks the codes 0 (value −1), `|u − 1| = u + 2z − 1`.
#[inline(always)]
fn mag_sign(u: u64) -> (u64, u64) {
    const ONES: u64 = 0x0101_0101_0101_0101;
    let z = !(u | (u >> 1)) & ONES;
    (u + 2 * z - ONES, ONES | (z * 0xFE))
}

/// A sub-block from its 32 codes (`0..4` each, value `code − 1`), in
/// element order.
#[inline(always)]
fn from_codes(codes: [u64; 4]) -> Sub32 {
    let (mut mag, mut sign) = ([0u64; 4], [0u64; 4]);
    for k in 0..4 {
        (mag[k], sign[k]) = mag_sign(codes[k]);
    }
    Sub32 {
        mag,
        sign,
        scales: [0, 0],
        shift: [0; 4],
    }
}

/// TQ2_0 sub-block `ib` (elements `32·ib..32·ib + 32`).
#[inline]
pub(crate) fn tq2_0(b: &[u8; 66], ib: usize) -> Sub32 {
    let (base, shift) = (32 * (ib / 4), 2 * (ib % 4));
    let mut codes = [0u64; 4];
    for (k, c) in codes.iter_mut().enumerate() {
        let mut w = [0u8; 8];
        w.copy_from_slice(&b[base + 8 * k..base + 8 * k + 8]);
        *c = (u64::from_le_bytes(w) >> shift) & 0x0303_0303_0303_0303;
    }
    from_codes(codes)
}

/// Trit `l` of a TQ1_0 byte, as its code `0..3`.
#[inline(always)]
fn trit(b: u8, l: usize) -> u8 {
    const POW3: [u8; 5] = [1, 3, 9, 27, 81];
    let q = b.wrapping_mul(POW3[l]);
    ((u16::from(q) * 3) >> 8) as u8
}

/// TQ1_0 sub-block `ib` (elements `32·ib..32·ib + 32`).
#[inline]
pub(crate) fn tq1_0(b: &[u8; 54], ib: usize) -> Sub32 {
    let mut c = [0u8; 32];
    match ib {
        0..5 => {
            for (m, v) in c.iter_mut().enumerate() {
                *v = trit(b[m], ib);
            }
        }
        5..7 => {
            // Trits 2(ib − 5) and 2(ib − 5) + 1 of the 16 bytes qs[32..48].
            let l0 = 2 * (ib - 5);
            for m in 0..16 {
                c[m] = trit(b[32 + m], l0);
                c[16 + m] = trit(b[32 + m], l0 + 1);
            }
        }
        _ => {
            for m in 0..16 {
                c[m] = trit(b[32 + m], 4);
            }
            for l in 0..4 {
                for j in 0..4 {
                    c[16 + 4 * l + j] = trit(b[48 + j], l);
                }
            }
        }
    }
    let mut codes = [0u64; 4];
    for (k, code) in codes.iter_mut().enumerate() {
        let mut w = [0u8; 8];
        w.copy_from_slice(&c[8 * k..8 * k + 8]);
        *code = u64::from_le_bytes(w);
    }
    from_codes(codes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_become_magnitudes_and_signs() {
        for u in 0..4u64 {
            let (m, s) = mag_sign(u * 0x0101_0101_0101_0101);
            let v = u as i32 - 1;
            assert_eq!(m, v.unsigned_abs() as u64 * 0x0101_0101_0101_0101, "{u}");
            let sb = if v < 0 { 0xFF } else { 0x01 };
            assert_eq!(s, sb * 0x0101_0101_0101_0101, "{u}");
        }
    }

    #[test]
    fn tq1_0_trits_read_back_what_ggml_packs() {
        // ggml packs five codes c0..c4 (c0 most significant) as
        // ceil(Σ c_n 3^(4−n) · 256 / 243).
        for v in 0..243u16 {
            let codes = [v / 81, v / 27 % 3, v / 9 % 3, v / 3 % 3, v % 3];
            let b = (v * 256).div_ceil(243) as u8;
            for (l, &want) in codes.iter().enumerate() {
                assert_eq!(u16::from(trit(b, l)), want, "{v} {l}");
            }
        }
    }
}
