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

/// TQ1_0 sub-block `ib` (elements `32·ib..32·ib + 32`): its 32 codes in
/// SSE2 steps on x86-64 (16 trits per step, [`trits16`]), one trit at a
/// time elsewhere; the same integers either way.
#[inline]
pub(crate) fn tq1_0(b: &[u8; 54], ib: usize) -> Sub32 {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: SSE2 is part of every x86-64 CPU.
    let c = unsafe { tq1_0_codes_sse2(b, ib) };
    #[cfg(not(target_arch = "x86_64"))]
    let c = tq1_0_codes(b, ib);
    let mut codes = [0u64; 4];
    for (k, code) in codes.iter_mut().enumerate() {
        let mut w = [0u8; 8];
        w.copy_from_slice(&c[8 * k..8 * k + 8]);
        *code = u64::from_le_bytes(w);
    }
    from_codes(codes)
}

/// Trit `l` of 16 bytes at once (`mul`: `3^l` per byte as 16-bit lanes,
/// the low 8 bytes' then the high 8 bytes'): `((b · 3^l mod 256) · 3) >> 8`
/// in 16-bit lanes, which hold every intermediate (at most 255 · 81 and
/// 255 · 3).
#[cfg(target_arch = "x86_64")]
#[inline]
#[target_feature(enable = "sse2")]
fn trits16(
    bytes: std::arch::x86_64::__m128i,
    mul: [std::arch::x86_64::__m128i; 2],
) -> std::arch::x86_64::__m128i {
    use std::arch::x86_64::*;
    let zero = _mm_setzero_si128();
    let (low, three) = (_mm_set1_epi16(0xFF), _mm_set1_epi16(3));
    let (a, b) = (
        _mm_unpacklo_epi8(bytes, zero),
        _mm_unpackhi_epi8(bytes, zero),
    );
    let a = _mm_and_si128(_mm_mullo_epi16(a, mul[0]), low);
    let b = _mm_and_si128(_mm_mullo_epi16(b, mul[1]), low);
    let a = _mm_srli_epi16::<8>(_mm_mullo_epi16(a, three));
    let b = _mm_srli_epi16::<8>(_mm_mullo_epi16(b, three));
    _mm_packus_epi16(a, b)
}

/// 16 bytes of `b` from byte `at` (`at + 16 ≤ 54`).
#[cfg(target_arch = "x86_64")]
#[inline]
#[target_feature(enable = "sse2")]
fn load16(b: &[u8; 54], at: usize) -> std::arch::x86_64::__m128i {
    let mut v = [0u8; 16];
    v.copy_from_slice(&b[at..at + 16]);
    // SAFETY: `v` is 16 readable bytes; `loadu` needs no alignment.
    unsafe { std::arch::x86_64::_mm_loadu_si128(v.as_ptr().cast()) }
}

/// [`tq1_0_codes`] in SSE2 steps.
#[cfg(target_arch = "x86_64")]
#[inline]
#[target_feature(enable = "sse2")]
fn tq1_0_codes_sse2(b: &[u8; 54], ib: usize) -> [u8; 32] {
    use std::arch::x86_64::*;
    const POW3: [i16; 5] = [1, 3, 9, 27, 81];
    let (lo, hi) = if ib < 5 {
        let m = _mm_set1_epi16(POW3[ib]);
        (
            trits16(load16(b, 0), [m, m]),
            trits16(load16(b, 16), [m, m]),
        )
    } else if ib < 7 {
        let l0 = 2 * (ib - 5);
        let (m0, m1) = (_mm_set1_epi16(POW3[l0]), _mm_set1_epi16(POW3[l0 + 1]));
        let q = load16(b, 32);
        (trits16(q, [m0, m0]), trits16(q, [m1, m1]))
    } else {
        // qh's four bytes, four times over: lane 4l + j is trit l of qh[j].
        let qh = u32::from_le_bytes([b[48], b[49], b[50], b[51]]);
        let m4 = _mm_set1_epi16(POW3[4]);
        let mul = [
            _mm_setr_epi16(1, 1, 1, 1, 3, 3, 3, 3),
            _mm_setr_epi16(9, 9, 9, 9, 27, 27, 27, 27),
        ];
        (
            trits16(load16(b, 32), [m4, m4]),
            trits16(_mm_set1_epi32(qh as i32), mul),
        )
    };
    let mut c = [0u8; 32];
    // SAFETY: `c` is 32 writable bytes; `storeu` needs no alignment.
    unsafe {
        _mm_storeu_si128(c.as_mut_ptr().cast(), lo);
        _mm_storeu_si128(c.as_mut_ptr().add(16).cast(), hi);
    }
    c
}

/// TQ1_0 sub-block `ib`'s 32 codes (`0..3`), one trit at a time.
#[cfg_attr(target_arch = "x86_64", allow(dead_code))]
fn tq1_0_codes(b: &[u8; 54], ib: usize) -> [u8; 32] {
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
    c
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

    /// The SSE2 decode gives the one-trit-at-a-time codes for every byte
    /// value in every position.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn sse2_trits_are_the_scalar_ones() {
        for v in 0..=255u8 {
            let b: [u8; 54] = std::array::from_fn(|i| v.wrapping_add((i * 37) as u8));
            for ib in 0..8 {
                // SAFETY: SSE2 is part of every x86-64 CPU.
                let sse2 = unsafe { tq1_0_codes_sse2(&b, ib) };
                assert_eq!(sse2, tq1_0_codes(&b, ib), "{v} {ib}");
            }
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
