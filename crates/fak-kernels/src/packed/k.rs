//! The k-quant formats of [`crate::packed`]: Q4_K, Q5_K, Q6_K, Q2_K and
//! Q3_K super-blocks (256 values) of 8 weight rows, against Q8_K activation
//! rows; and IQ4_XS, whose super-blocks hold IQ4_NL's level indices
//! (below).
//!
//! A weight value is `d · sc[j] · u − dm · m[j]` with an unsigned quant
//! `u` and a per-sub-block scale `sc[j]` and offset `m[j]`:
//!
//! ```text
//!   Q4_K: u in 0..16, sub-blocks of 32, dm = dmin, m[j] = the 6-bit min
//!   Q5_K: u in 0..32, otherwise as Q4_K
//!   Q6_K: u in 0..64, sub-blocks of 16, dm = d,    m[j] = 32 · sc[j]
//!   Q2_K: u in 0..4,  sub-blocks of 16, dm = dmin, m[j] = the 4-bit min
//!   Q3_K: u in 0..8,  sub-blocks of 16, dm = d,    m[j] = 4 · sc[j]
//!         (sc[j] the signed 6-bit scale minus 32; u = q + 4)
//!
//!   packed group block (8 rows, one super-block; position p = 4·row + i,
//!   step k = values 4k..4k+4, u[k][p] = row's value 4k+i):
//!   Q4_K (1184 B): d 8 × f16 | dmin 8 × f16 | sc[j][row] 8 × 8 u8
//!                  | m[j][row] 8 × 8 u8 | nibbles: chunk c (32 B), byte p =
//!                    u[2c][p] | u[2c+1][p] << 4                 (32 chunks)
//!   Q5_K (1440 B): Q4_K's 1184 bytes (nibbles: the low 4 bits of u)
//!                  | high bits: chunk c, byte p, bit i =
//!                    u[8c+i][p] >> 4                             (8 chunks)
//!   Q6_K (1680 B): d 8 × f16 | sc[j][row] 16 × 8 i8
//!                  | nibbles as Q4_K (low 4 bits)               (32 chunks)
//!                  | high bits: chunk c, byte p, bits 2i..2i+2 =
//!                    u[4c+i][p] >> 4                            (16 chunks)
//!   Q2_K (672 B):  d 8 × f16 | dmin 8 × f16 | sm[j][row] 16 × 8 u8 (GGUF's
//!                    byte: sc[j] | m[j] << 4) | 2-bit chunks: chunk c (32 B),
//!                    byte p, bits 2i..2i+2 = u[4c+i][p]           (16 chunks)
//!   Q3_K (912 B):  d 8 × f16 | sc[j][row] 16 × 8 i8 | 2-bit chunks as
//!                    Q2_K's (the low 2 bits)                     (16 chunks)
//!                  | high bits: chunk c, byte p, bit i =
//!                    u[8c+i][p] >> 2                              (8 chunks)
//!
//!   per row r, token t (Q8_K: f32 d_x, quants x, bsums B16), super-block:
//!     S[j]  = Σ_{values of sub-block j} u · x                  exact i32
//!     sumi  = Σ_j sc[j] · S[j]                                 exact i32
//!     summ  = Σ_j m[j] · (Σ x over sub-block j, from bsums)    exact i32
//!     Q4_K, Q5_K, Q2_K:
//!           acc = acc + ((d · d_x) · f32(sumi) − (dmin · d_x) · f32(summ))
//!     Q6_K, Q3_K:
//!           acc = acc + (d · d_x) · f32(sumi − summ)
//! ```
//!
//! Q6_K and Q3_K take their offsets off in integers: `sumi` and `summ` can both be
//! far above 2^24, where converting each to f32 first loses the digits of
//! their difference (a first version did, and missed `vec_dot` by 5e-5
//! relative). Q4_K's and Q5_K's mins use their own scale, so they stay a
//! float term, as in llama.cpp.
//!
//! IQ4_XS (1104 B): d 8 × f16 | ls[j][row] 8 × 8 i8 (the 6-bit scales
//! minus 32) | nibbles as Q4_K (the level indices). Its float steps are
//! per 32-value sub-block, as in its scalar `vec_dot`:
//!
//! ```text
//!   per row r, token t, super-block:  dd = d · d_x
//!     per sub-block j:  S[j] = Σ L[u] · x       (L: IQ4_LEVELS)  exact i32
//!                       acc  = acc + (dd · f32(ls[j])) · f32(S[j])
//! ```
//!
//! Q6_K is 8 × 210 bytes and Q2_K 8 × 84, exactly the GGUF sizes; Q4_K's unpacked scales
//! make it 1184 instead of 1152 bytes (3% more), and Q5_K 1440 instead of
//! 1408 (2% more), IQ4_XS 1104 instead of 1088 (1.5% more), Q3_K 912
//! instead of 880 (3.6% more). A Q5_K step's high bits are one bit of each byte of a
//! chunk, so the kernels shift that bit to bit 4 and merge it into the
//! step's nibbles with one `and` and one `or`.

use super::layout::{iq4xs, q2k, q3k, q4k, q5k, q6k, K_STEPS, QK_K, STEP};
use crate::blocks::{
    get_scale_min_k4, BlockIQ4_XS, BlockQ2_K, BlockQ3_K, BlockQ4_K, BlockQ5_K, BlockQ6_K,
    BlockQ8_K, IQ4_LEVELS,
};
use crate::fp::f16_to_f32;

/// Writes the 4-bit quants `u` (256, element order) of row `r` into the
/// nibble chunks at `nib`.
fn put_nibbles(dst: &mut [u8], nib: usize, r: usize, u: &[u8; QK_K]) {
    for k in 0..K_STEPS {
        for i in 0..STEP {
            let p = r * STEP + i;
            dst[nib + 32 * (k / 2) + p] |= (u[k * STEP + i] & 15) << (4 * (k % 2));
        }
    }
}

/// Writes row `r`'s scales `d`, `dmin` (f16 bits) and packed 6-bit
/// scales and mins into a Q4_K (or Q5_K) group block.
fn put_scales_mins(dst: &mut [u8], r: usize, (d, dmin): (u16, u16), scales: &[u8; 12]) {
    let (sc, m) = get_scale_min_k4(scales);
    dst[q4k::D + 2 * r..q4k::D + 2 * r + 2].copy_from_slice(&d.to_le_bytes());
    dst[q4k::DMIN + 2 * r..q4k::DMIN + 2 * r + 2].copy_from_slice(&dmin.to_le_bytes());
    for j in 0..8 {
        dst[q4k::SC + 8 * j + r] = sc[j];
        dst[q4k::M + 8 * j + r] = m[j];
    }
}

/// Packs row `r` of a group block from its GGUF Q4_K block `b`.
pub(crate) fn encode_q4_k(dst: &mut [u8], r: usize, b: &[u8; BlockQ4_K::BYTES]) {
    let blk = BlockQ4_K::from_bytes(b);
    put_scales_mins(dst, r, (blk.d, blk.dmin), &blk.scales);
    put_nibbles(dst, q4k::NIB, r, &blk.quants());
}

/// Packs row `r` of a group block from its GGUF Q5_K block `b`.
pub(crate) fn encode_q5_k(dst: &mut [u8], r: usize, b: &[u8; BlockQ5_K::BYTES]) {
    let blk = BlockQ5_K::from_bytes(b);
    put_scales_mins(dst, r, (blk.d, blk.dmin), &blk.scales);
    let u = blk.quants();
    put_nibbles(dst, q5k::NIB, r, &u);
    for k in 0..K_STEPS {
        for i in 0..STEP {
            let p = r * STEP + i;
            dst[q5k::HIGH + 32 * (k / 8) + p] |= (u[k * STEP + i] >> 4 & 1) << (k % 8);
        }
    }
}

/// Packs row `r` of a group block from its GGUF IQ4_XS block `b`: the
/// super-block scale, the sub-blocks' signed scales and the level
/// indices (sub-block `ib`'s element `j` from the low nibble of
/// `qs[16·ib + j]`, `j + 16` from its high one).
pub(crate) fn encode_iq4_xs(dst: &mut [u8], r: usize, b: &[u8; BlockIQ4_XS::BYTES]) {
    let blk = BlockIQ4_XS::from_bytes(b);
    dst[iq4xs::D + 2 * r..iq4xs::D + 2 * r + 2].copy_from_slice(&blk.d.to_le_bytes());
    for (j, ls) in blk.signed_scales().into_iter().enumerate() {
        dst[iq4xs::LS + 8 * j + r] = ls as u8;
    }
    let u: [u8; QK_K] = std::array::from_fn(|e| {
        let (ib, j) = (e / 32, e % 32);
        (blk.qs[16 * ib + j % 16] >> (4 * (j / 16))) & 15
    });
    put_nibbles(dst, iq4xs::NIB, r, &u);
}

/// Packs row `r` of a group block from its GGUF Q6_K block `b`.
pub(crate) fn encode_q6_k(dst: &mut [u8], r: usize, b: &[u8; BlockQ6_K::BYTES]) {
    let blk = BlockQ6_K::from_bytes(b);
    dst[q6k::D + 2 * r..q6k::D + 2 * r + 2].copy_from_slice(&blk.d.to_le_bytes());
    for j in 0..16 {
        dst[q6k::SC + 8 * j + r] = blk.scales[j] as u8;
    }
    let u = blk.quants().map(|q| (q + 32) as u8);
    put_nibbles(dst, q6k::NIB, r, &u);
    for k in 0..K_STEPS {
        for i in 0..STEP {
            let p = r * STEP + i;
            dst[q6k::HIGH + 32 * (k / 4) + p] |= (u[k * STEP + i] >> 4) << (2 * (k % 4));
        }
    }
}

/// Writes the low 2 bits of the quants `u` (256, element order) of row
/// `r` into the 2-bit chunks at `at`.
fn put_crumbs(dst: &mut [u8], at: usize, r: usize, u: &[u8; QK_K]) {
    for k in 0..K_STEPS {
        for i in 0..STEP {
            let p = r * STEP + i;
            dst[at + 32 * (k / 4) + p] |= (u[k * STEP + i] & 3) << (2 * (k % 4));
        }
    }
}

/// Row `r`'s 2-bit quants read back from the 2-bit chunks at `at`.
fn crumbs(b: &[u8], at: usize, r: usize) -> [u8; QK_K] {
    let mut u = [0u8; QK_K];
    for k in 0..K_STEPS {
        for i in 0..STEP {
            u[k * STEP + i] = (b[at + 32 * (k / 4) + r * STEP + i] >> (2 * (k % 4))) & 3;
        }
    }
    u
}

/// Packs row `r` of a group block from its GGUF Q2_K block `b`.
pub(crate) fn encode_q2_k(dst: &mut [u8], r: usize, b: &[u8; BlockQ2_K::BYTES]) {
    let blk = BlockQ2_K::from_bytes(b);
    dst[q2k::D + 2 * r..q2k::D + 2 * r + 2].copy_from_slice(&blk.d.to_le_bytes());
    dst[q2k::DMIN + 2 * r..q2k::DMIN + 2 * r + 2].copy_from_slice(&blk.dmin.to_le_bytes());
    for (j, &sm) in blk.scales.iter().enumerate() {
        dst[q2k::SM + 8 * j + r] = sm;
    }
    put_crumbs(dst, q2k::Q, r, &blk.quants().map(|q| q as u8));
}

/// Packs row `r` of a group block from its GGUF Q3_K block `b`: `u = q +
/// 4`, its low 2 bits in the 2-bit chunks and bit 2 in the high-bit ones.
pub(crate) fn encode_q3_k(dst: &mut [u8], r: usize, b: &[u8; BlockQ3_K::BYTES]) {
    let blk = BlockQ3_K::from_bytes(b);
    dst[q3k::D + 2 * r..q3k::D + 2 * r + 2].copy_from_slice(&blk.d.to_le_bytes());
    for (j, sc) in blk.signed_scales().into_iter().enumerate() {
        dst[q3k::SC + 8 * j + r] = sc as u8;
    }
    let u = blk.quants().map(|q| (q + 4) as u8);
    put_crumbs(dst, q3k::Q, r, &u);
    for k in 0..K_STEPS {
        for i in 0..STEP {
            let p = r * STEP + i;
            dst[q3k::HIGH + 32 * (k / 8) + p] |= (u[k * STEP + i] >> 2 & 1) << (k % 8);
        }
    }
}

/// Row `r`'s 4-bit quants read back from the nibble chunks at `nib`.
fn nibbles(b: &[u8], nib: usize, r: usize) -> [u8; QK_K] {
    let mut u = [0u8; QK_K];
    for k in 0..K_STEPS {
        for i in 0..STEP {
            u[k * STEP + i] = (b[nib + 32 * (k / 2) + r * STEP + i] >> (4 * (k % 2))) & 15;
        }
    }
    u
}

/// `Σ u · x` over each sub-block of `sub` values.
fn sub_sums<const N: usize>(u: &[u8; QK_K], x: &[i8; QK_K], sub: usize) -> [i32; N] {
    let mut s = [0i32; N];
    for (e, (&u, &x)) in u.iter().zip(x).enumerate() {
        s[e / sub] += i32::from(u) * i32::from(x);
    }
    s
}

/// Row `r`'s unsigned quants in a packed Q4_K group block `b`.
pub(crate) fn row_quants_q4_k(b: &[u8], r: usize) -> [u8; QK_K] {
    nibbles(b, q4k::NIB, r)
}

/// Row `r`'s level indices in a packed IQ4_XS group block `b`.
pub(crate) fn row_quants_iq4_xs(b: &[u8], r: usize) -> [u8; QK_K] {
    nibbles(b, iq4xs::NIB, r)
}

/// Row `r`'s unsigned quants in a packed Q5_K group block `b`.
pub(crate) fn row_quants_q5_k(b: &[u8], r: usize) -> [u8; QK_K] {
    let mut u = nibbles(b, q5k::NIB, r);
    for (k, q) in u.chunks_exact_mut(STEP).enumerate() {
        for (i, q) in q.iter_mut().enumerate() {
            let hb = b[q5k::HIGH + 32 * (k / 8) + r * STEP + i] >> (k % 8) & 1;
            *q |= hb << 4;
        }
    }
    u
}

/// Row `r`'s unsigned quants in a packed Q2_K group block `b`.
pub(crate) fn row_quants_q2_k(b: &[u8], r: usize) -> [u8; QK_K] {
    crumbs(b, q2k::Q, r)
}

/// Row `r`'s unsigned quants (`q + 4`) in a packed Q3_K group block `b`.
pub(crate) fn row_quants_q3_k(b: &[u8], r: usize) -> [u8; QK_K] {
    let mut u = crumbs(b, q3k::Q, r);
    for (k, q) in u.chunks_exact_mut(STEP).enumerate() {
        for (i, q) in q.iter_mut().enumerate() {
            let hb = b[q3k::HIGH + 32 * (k / 8) + r * STEP + i] >> (k % 8) & 1;
            *q |= hb << 2;
        }
    }
    u
}

/// Row `r`'s unsigned quants in a packed Q6_K group block `b`.
pub(crate) fn row_quants_q6_k(b: &[u8], r: usize) -> [u8; QK_K] {
    let mut u = nibbles(b, q6k::NIB, r);
    for (k, q) in u.chunks_exact_mut(STEP).enumerate() {
        for (i, q) in q.iter_mut().enumerate() {
            let hb = b[q6k::HIGH + 32 * (k / 4) + r * STEP + i] >> (2 * (k % 4)) & 3;
            *q |= hb << 4;
        }
    }
    u
}

/// The scalar twin's element: packed row `r` of one group block `b` (its
/// quants `u`, from [`row_quants_q4_k`]) against one Q8_K activation
/// block `a`, added to `acc` (module diagram). Also Q5_K's (`u` from
/// [`row_quants_q5_k`]): its group block starts with Q4_K's fields.
pub(crate) fn element_q4_k(b: &[u8], r: usize, u: &[u8; QK_K], a: &BlockQ8_K, acc: f32) -> f32 {
    let s = sub_sums::<8>(u, &a.qs, 32);
    let (mut sumi, mut summ) = (0i32, 0i32);
    for j in 0..8 {
        sumi += i32::from(b[q4k::SC + 8 * j + r]) * s[j];
        let bsum = i32::from(a.bsums[2 * j]) + i32::from(a.bsums[2 * j + 1]);
        summ += i32::from(b[q4k::M + 8 * j + r]) * bsum;
    }
    let d = f16_to_f32(u16::from_le_bytes([
        b[q4k::D + 2 * r],
        b[q4k::D + 2 * r + 1],
    ]));
    let dm = f16_to_f32(u16::from_le_bytes([
        b[q4k::DMIN + 2 * r],
        b[q4k::DMIN + 2 * r + 1],
    ]));
    acc + ((d * a.d) * sumi as f32 - (dm * a.d) * summ as f32)
}

/// As [`element_q4_k`], for IQ4_XS (`u` from [`row_quants_iq4_xs`]): the
/// module diagram's steps, those of `vec_dot_iq4_xs_q8_k`.
pub(crate) fn element_iq4_xs(b: &[u8], r: usize, u: &[u8; QK_K], a: &BlockQ8_K, acc: f32) -> f32 {
    let d = f16_to_f32(u16::from_le_bytes([
        b[iq4xs::D + 2 * r],
        b[iq4xs::D + 2 * r + 1],
    ]));
    let dd = d * a.d;
    let mut acc = acc;
    for (j, (us, xs)) in u.chunks_exact(32).zip(a.qs.chunks_exact(32)).enumerate() {
        let ls = b[iq4xs::LS + 8 * j + r] as i8;
        let s: i32 = us
            .iter()
            .zip(xs)
            .map(|(&q, &x)| {
                let level = IQ4_LEVELS.get(usize::from(q)).copied().unwrap_or(0);
                i32::from(level) * i32::from(x)
            })
            .sum();
        acc += (dd * f32::from(ls)) * s as f32;
    }
    acc
}

/// As [`element_q4_k`], for Q6_K (`u` from [`row_quants_q6_k`]).
pub(crate) fn element_q6_k(b: &[u8], r: usize, u: &[u8; QK_K], a: &BlockQ8_K, acc: f32) -> f32 {
    element_offset(b, r, (u, a), (q6k::D, q6k::SC, 32), acc)
}

/// The element of a format with signed 16-value sub-block scales and
/// quants offset by `m` (Q6_K: 32, Q3_K: 4), its `d` and scales at byte
/// offsets `d_at` and `sc_at`: `acc + (d · d_x) · f32(sumi − summ)`.
fn element_offset(
    b: &[u8],
    r: usize,
    (u, a): (&[u8; QK_K], &BlockQ8_K),
    (d_at, sc_at, m): (usize, usize, i32),
    acc: f32,
) -> f32 {
    let s = sub_sums::<16>(u, &a.qs, 16);
    let (mut sumi, mut summ) = (0i32, 0i32);
    for j in 0..16 {
        let sc = i32::from(b[sc_at + 8 * j + r] as i8);
        sumi += sc * s[j];
        summ += m * sc * i32::from(a.bsums[j]);
    }
    let d = f16_to_f32(u16::from_le_bytes([b[d_at + 2 * r], b[d_at + 2 * r + 1]]));
    acc + (d * a.d) * (sumi - summ) as f32
}

/// As [`element_q4_k`], for Q2_K (`u` from [`row_quants_q2_k`]): the
/// steps of `vec_dot_q2_k_q8_k`.
pub(crate) fn element_q2_k(b: &[u8], r: usize, u: &[u8; QK_K], a: &BlockQ8_K, acc: f32) -> f32 {
    let s = sub_sums::<16>(u, &a.qs, 16);
    let (mut sumi, mut summ) = (0i32, 0i32);
    for j in 0..16 {
        let sm = b[q2k::SM + 8 * j + r];
        sumi += i32::from(sm & 15) * s[j];
        summ += i32::from(sm >> 4) * i32::from(a.bsums[j]);
    }
    let d = f16_to_f32(u16::from_le_bytes([
        b[q2k::D + 2 * r],
        b[q2k::D + 2 * r + 1],
    ]));
    let dm = f16_to_f32(u16::from_le_bytes([
        b[q2k::DMIN + 2 * r],
        b[q2k::DMIN + 2 * r + 1],
    ]));
    acc + ((d * a.d) * sumi as f32 - (dm * a.d) * summ as f32)
}

/// As [`element_q6_k`], for Q3_K (`u` from [`row_quants_q3_k`]).
pub(crate) fn element_q3_k(b: &[u8], r: usize, u: &[u8; QK_K], a: &BlockQ8_K, acc: f32) -> f32 {
    element_offset(b, r, (u, a), (q3k::D, q3k::SC, 4), acc)
}
