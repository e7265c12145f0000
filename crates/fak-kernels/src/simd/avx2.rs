//! AVX2 + FMA + F16C dot-product kernels, twins of the scalar references in
//! `dot` and `dot_k`.
//!
//! Integer work per block is exact, as in the scalar code; what differs is
//! the float accumulation: each block's 8 integer lane sums are converted to
//! `f32` and fused-multiply-added into 8 float lanes, which are added up in
//! a fixed order at the end:
//!
//! ```text
//!   w block ─► 32 × u8/i8 ─┐  maddubs   madd(1)             cvt    fmadd(d)
//!   a block ─► 32 × i8   ──┴─► 16 × i16 ───► 8 × i32 (exact) ──► 8 × f32 ──► acc[8]
//!   end: hsum(acc) = ((a0+a4)+(a2+a6)) + ((a1+a5)+(a3+a7))
//! ```
//!
//! The 32-element formats alternate two accumulators (even and odd blocks,
//! added before `hsum`) so that consecutive blocks do not wait on each
//! other; the k-quants use one per row. Min/offset terms (Q4_1/Q5_1 `m·s`,
//! Q4_K/Q5_K `dmin·Σ bsums·m`) are summed separately in scalar `f32`. The
//! float formats (F32/F16/BF16) fuse `f32` products into 4 × 8 lanes and
//! finish in `f64`, like the scalar code.
//!
//! `maddubs` multiplies unsigned by signed bytes. Signed × signed products
//! use `|w| · (a · sign(w))`, which is exact as long as the activation
//! quants lie in `-127..=127` (all that the Q8_0/Q8_1 quantizers produce).
//!
//! Every kernel takes rows that the caller has already validated (whole
//! blocks, equal block counts); extra bytes are ignored, never read past.

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::*;

use crate::blocks::{
    get_scale_min_k4, BlockQ4_0, BlockQ4_1, BlockQ4_K, BlockQ5_0, BlockQ5_1, BlockQ5_K, BlockQ6_K,
    BlockQ8_0, BlockQ8_1, BlockQ8_K,
};
use crate::dot::block_pairs;
use crate::fp::{bf16_to_f32, f16_to_f32};

/// Loads 32 bytes starting at byte `OFF` of an `N`-byte block image; the
/// range is checked at compile time.
#[inline]
#[target_feature(enable = "avx2")]
fn load32<const OFF: usize, const N: usize>(b: &[u8; N]) -> __m256i {
    const { assert!(OFF + 32 <= N) };
    // SAFETY: OFF + 32 <= N (checked above), so the 32 bytes are inside `b`;
    // `loadu` has no alignment requirement.
    unsafe { _mm256_loadu_si256(b.as_ptr().add(OFF).cast()) }
}

/// Loads 16 bytes starting at byte `OFF` of an `N`-byte block image; the
/// range is checked at compile time.
#[inline]
#[target_feature(enable = "avx2")]
fn load16<const OFF: usize, const N: usize>(b: &[u8; N]) -> __m128i {
    const { assert!(OFF + 16 <= N) };
    // SAFETY: OFF + 16 <= N (checked above), so the 16 bytes are inside `b`.
    unsafe { _mm_loadu_si128(b.as_ptr().add(OFF).cast()) }
}

/// Reads the little-endian `u16` at byte `OFF` of a block image.
#[inline(always)]
fn u16_at<const OFF: usize, const N: usize>(b: &[u8; N]) -> u16 {
    const { assert!(OFF + 2 <= N) };
    u16::from_le_bytes([b[OFF], b[OFF + 1]])
}

/// Reads the little-endian `f32` at byte `OFF` of a block image.
#[inline(always)]
fn f32_at<const OFF: usize, const N: usize>(b: &[u8; N]) -> f32 {
    const { assert!(OFF + 4 <= N) };
    f32::from_le_bytes([b[OFF], b[OFF + 1], b[OFF + 2], b[OFF + 3]])
}

/// Q4_K min term `Σ_g bsums[g] · m[g / 2]`, exact.
///
/// * `bsums`: the 16 `i16` group sums of a Q8_K block.
/// * `m`: the 8 six-bit sub-block mins.
#[inline]
#[target_feature(enable = "avx2")]
fn min_term(bsums: __m256i, m: [u8; 8]) -> i32 {
    let pairs = _mm256_madd_epi16(bsums, _mm256_set1_epi16(1));
    let mins = _mm256_cvtepu8_epi32(_mm_set_epi64x(0, i64::from_le_bytes(m)));
    let v = _mm256_mullo_epi32(pairs, mins);
    let q = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256::<1>(v));
    let d = _mm_add_epi32(q, _mm_unpackhi_epi64(q, q));
    let s = _mm_add_epi32(d, _mm_shuffle_epi32::<0b01>(d));
    _mm_cvtsi128_si32(s)
}

/// Converts up to four f16 values with F16C (exact, like
/// [`f16_to_f32`]) and multiplies them in pairs: lane 0 = `f0 · f1`,
/// lane 2 = `f2 · f3` (lanes 1 and 3 are don't-cares).
#[inline]
#[target_feature(enable = "avx2,f16c")]
fn f16_products(f0: u16, f1: u16, f2: u16, f3: u16) -> __m128 {
    let bits = u64::from(f0) | u64::from(f1) << 16 | u64::from(f2) << 32 | u64::from(f3) << 48;
    let v = _mm_cvtph_ps(_mm_cvtsi64_si128(bits as i64));
    _mm_mul_ps(v, _mm_movehdup_ps(v))
}

/// `f16(w_bits) · f16(a_bits)` broadcast to 8 lanes.
#[inline]
#[target_feature(enable = "avx2,f16c")]
fn f16_product_x8(w_bits: u16, a_bits: u16) -> __m256 {
    _mm256_broadcastss_ps(f16_products(w_bits, a_bits, 0, 0))
}

/// Sum of the 8 lanes in a fixed order:
/// `((a0+a4)+(a2+a6)) + ((a1+a5)+(a3+a7))`.
#[inline]
#[target_feature(enable = "avx2")]
fn hsum_ps(v: __m256) -> f32 {
    let q = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
    let d = _mm_add_ps(q, _mm_movehl_ps(q, q));
    let s = _mm_add_ss(d, _mm_movehdup_ps(d));
    _mm_cvtss_f32(s)
}

/// Unsigned bytes `x` (each `< 128`) times signed bytes `y`, pairwise summed
/// into 8 exact `i32` lanes (lane `k` covers bytes `4k..4k+4`).
#[inline]
#[target_feature(enable = "avx2")]
fn dot_u8_i8(x: __m256i, y: __m256i) -> __m256i {
    let pairs = _mm256_maddubs_epi16(x, y);
    _mm256_madd_epi16(pairs, _mm256_set1_epi16(1))
}

/// Signed bytes `x` times signed bytes `y` (`y` in `-127..=127`), summed
/// into 8 exact `i32` lanes.
#[inline]
#[target_feature(enable = "avx2")]
fn dot_i8_i8(x: __m256i, y: __m256i) -> __m256i {
    let ax = _mm256_sign_epi8(x, x);
    let sy = _mm256_sign_epi8(y, x);
    dot_u8_i8(ax, sy)
}

/// Splits 16 nibble-pair bytes into 32 values: byte `j` low nibble → `j`,
/// high nibble → `j + 16` (the legacy Q4/Q5 layout).
#[inline]
#[target_feature(enable = "avx2")]
fn nibbles_16(packed: __m128i) -> __m256i {
    let mask = _mm_set1_epi8(0x0F);
    let lo = _mm_and_si128(packed, mask);
    let hi = _mm_and_si128(_mm_srli_epi16::<4>(packed), mask);
    _mm256_set_m128i(hi, lo)
}

/// Expands a 32-bit bit plane into 32 bytes: byte `j` is `0xFF` if bit `j`
/// is set, else `0`.
#[inline]
#[target_feature(enable = "avx2")]
fn bits_to_bytes(bits: u32) -> __m256i {
    // Byte j takes byte j/8 of `bits` (the shuffle works per 128-bit lane,
    // and both lanes hold the broadcast word) ...
    let spread = _mm256_shuffle_epi8(
        _mm256_set1_epi32(bits as i32),
        _mm256_setr_epi64x(
            0,
            0x0101_0101_0101_0101,
            0x0202_0202_0202_0202,
            0x0303_0303_0303_0303,
        ),
    );
    // ... then every bit except bit j%8 is forced on; all ones iff bit set.
    let others = _mm256_set1_epi64x(0x7FBF_DFEF_F7FB_FDFEu64 as i64);
    _mm256_cmpeq_epi8(_mm256_or_si256(spread, others), _mm256_set1_epi8(-1))
}

/// Sums per-block terms `d · sumi` (8 lanes each) with fused multiply-adds
/// into two accumulators (even blocks into the first, odd into the
/// second, so consecutive blocks do not wait on each other), then adds
/// the two and reduces with [`hsum_ps`].
#[inline]
#[target_feature(enable = "avx2,fma")]
fn accumulate(mut terms: impl Iterator<Item = (__m256, __m256i)>) -> f32 {
    let (mut even, mut odd) = (_mm256_setzero_ps(), _mm256_setzero_ps());
    while let Some((d0, s0)) = terms.next() {
        even = _mm256_fmadd_ps(d0, _mm256_cvtepi32_ps(s0), even);
        let Some((d1, s1)) = terms.next() else {
            break;
        };
        odd = _mm256_fmadd_ps(d1, _mm256_cvtepi32_ps(s1), odd);
    }
    hsum_ps(_mm256_add_ps(even, odd))
}

/// AVX2 twin of [`crate::scalar::vec_dot_q8_0_q8_0`].
///
/// * `w`, `a`: Q8_0 rows of the same number of whole blocks.
///
/// # Safety
///
/// The CPU must support AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn dot_q8_0_q8_0(w: &[u8], a: &[u8]) -> f32 {
    let terms = block_pairs::<{ BlockQ8_0::BYTES }, { BlockQ8_0::BYTES }>(w, a).map(|(bw, ba)| {
        let sumi = dot_i8_i8(load32::<2, 34>(bw), load32::<2, 34>(ba));
        let d = f16_product_x8(u16_at::<0, 34>(bw), u16_at::<0, 34>(ba));
        (d, sumi)
    });
    accumulate(terms)
}

/// AVX2 twin of [`crate::scalar::vec_dot_q4_0_q8_0`].
///
/// * `w`: Q4_0 row; `a`: Q8_0 row with the same number of blocks.
///
/// # Safety
///
/// The CPU must support AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn dot_q4_0_q8_0(w: &[u8], a: &[u8]) -> f32 {
    let eight = _mm256_set1_epi8(8);
    let terms = block_pairs::<{ BlockQ4_0::BYTES }, { BlockQ8_0::BYTES }>(w, a).map(|(bw, ba)| {
        let x = _mm256_sub_epi8(nibbles_16(load16::<2, 18>(bw)), eight);
        let sumi = dot_i8_i8(x, load32::<2, 34>(ba));
        let d = f16_product_x8(u16_at::<0, 18>(bw), u16_at::<0, 34>(ba));
        (d, sumi)
    });
    accumulate(terms)
}

/// AVX2 twin of [`crate::scalar::vec_dot_q4_1_q8_1`].
///
/// * `w`: Q4_1 row; `a`: Q8_1 row with the same number of blocks.
///
/// # Safety
///
/// The CPU must support AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn dot_q4_1_q8_1(w: &[u8], a: &[u8]) -> f32 {
    let mut mins = _mm_setzero_ps();
    let terms = block_pairs::<{ BlockQ4_1::BYTES }, { BlockQ8_1::BYTES }>(w, a).map(|(bw, ba)| {
        let x = nibbles_16(load16::<4, 20>(bw));
        let sumi = dot_u8_i8(x, load32::<4, 36>(ba));
        let (dw, da) = (u16_at::<0, 20>(bw), u16_at::<0, 36>(ba));
        let p = f16_products(dw, da, u16_at::<2, 20>(bw), u16_at::<2, 36>(ba));
        mins = _mm_add_ss(mins, _mm_movehl_ps(p, p));
        (_mm256_broadcastss_ps(p), sumi)
    });
    let scaled = accumulate(terms);
    scaled + _mm_cvtss_f32(mins)
}

/// AVX2 twin of [`crate::scalar::vec_dot_q5_0_q8_0`].
///
/// * `w`: Q5_0 row; `a`: Q8_0 row with the same number of blocks.
///
/// # Safety
///
/// The CPU must support AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn dot_q5_0_q8_0(w: &[u8], a: &[u8]) -> f32 {
    let (bit4, sixteen) = (_mm256_set1_epi8(0x10), _mm256_set1_epi8(16));
    let terms = block_pairs::<{ BlockQ5_0::BYTES }, { BlockQ8_0::BYTES }>(w, a).map(|(bw, ba)| {
        let qh = u32::from_le_bytes([bw[2], bw[3], bw[4], bw[5]]);
        let high = _mm256_and_si256(bits_to_bytes(qh), bit4);
        let q5 = _mm256_or_si256(nibbles_16(load16::<6, 22>(bw)), high);
        let sumi = dot_i8_i8(_mm256_sub_epi8(q5, sixteen), load32::<2, 34>(ba));
        let d = f16_product_x8(u16_at::<0, 22>(bw), u16_at::<0, 34>(ba));
        (d, sumi)
    });
    accumulate(terms)
}

/// AVX2 twin of [`crate::scalar::vec_dot_q5_1_q8_1`].
///
/// * `w`: Q5_1 row; `a`: Q8_1 row with the same number of blocks.
///
/// # Safety
///
/// The CPU must support AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn dot_q5_1_q8_1(w: &[u8], a: &[u8]) -> f32 {
    let bit4 = _mm256_set1_epi8(0x10);
    let mut mins = _mm_setzero_ps();
    let terms = block_pairs::<{ BlockQ5_1::BYTES }, { BlockQ8_1::BYTES }>(w, a).map(|(bw, ba)| {
        let qh = u32::from_le_bytes([bw[4], bw[5], bw[6], bw[7]]);
        let high = _mm256_and_si256(bits_to_bytes(qh), bit4);
        let x = _mm256_or_si256(nibbles_16(load16::<8, 24>(bw)), high);
        let sumi = dot_u8_i8(x, load32::<4, 36>(ba));
        let (dw, da) = (u16_at::<0, 24>(bw), u16_at::<0, 36>(ba));
        let p = f16_products(dw, da, u16_at::<2, 24>(bw), u16_at::<2, 36>(ba));
        mins = _mm_add_ss(mins, _mm_movehl_ps(p, p));
        (_mm256_broadcastss_ps(p), sumi)
    });
    let scaled = accumulate(terms);
    scaled + _mm_cvtss_f32(mins)
}

/// AVX2 twin of [`crate::scalar::vec_dot_q8_k_q8_k`].
///
/// * `w`, `a`: Q8_K rows with the same number of super-blocks.
///
/// # Safety
///
/// The CPU must support AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn dot_q8_k_q8_k(w: &[u8], a: &[u8]) -> f32 {
    let terms = block_pairs::<{ BlockQ8_K::BYTES }, { BlockQ8_K::BYTES }>(w, a).map(|(bw, ba)| {
        let parts = [
            dot_i8_i8(load32::<4, 292>(bw), load32::<4, 292>(ba)),
            dot_i8_i8(load32::<36, 292>(bw), load32::<36, 292>(ba)),
            dot_i8_i8(load32::<68, 292>(bw), load32::<68, 292>(ba)),
            dot_i8_i8(load32::<100, 292>(bw), load32::<100, 292>(ba)),
            dot_i8_i8(load32::<132, 292>(bw), load32::<132, 292>(ba)),
            dot_i8_i8(load32::<164, 292>(bw), load32::<164, 292>(ba)),
            dot_i8_i8(load32::<196, 292>(bw), load32::<196, 292>(ba)),
            dot_i8_i8(load32::<228, 292>(bw), load32::<228, 292>(ba)),
        ];
        let sumi = parts
            .into_iter()
            .fold(_mm256_setzero_si256(), |s, p| _mm256_add_epi32(s, p));
        let d = f32_at::<0, 292>(bw) * f32_at::<0, 292>(ba);
        (_mm256_set1_ps(d), sumi)
    });
    accumulate(terms)
}

/// Whether a k-quant with mins has a fifth quant bit (Q5_K) or not (Q4_K).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum QuantBits {
    /// Q4_K: 4-bit quants in `qs` only.
    Four,
    /// Q5_K: bit 4 of each quant in the `qh` plane at byte 16.
    Five,
}

/// Copies `LEN` bytes from byte `OFF` of an `N`-byte block image; the range
/// is checked at compile time.
#[inline(always)]
fn bytes_at<const OFF: usize, const LEN: usize, const N: usize>(b: &[u8; N]) -> [u8; LEN] {
    const { assert!(OFF + LEN <= N) };
    std::array::from_fn(|i| b[OFF + i])
}

/// Shared Q4_K/Q5_K body over `N`-byte weight blocks (`d` at 0, `dmin` at
/// 2, packed scales at 4, for Q5_K `qh` at 16, and `qs` in the last 128
/// bytes).
///
/// Per super-block, 64-element chunk `c` holds sub-blocks `2c` (low
/// nibbles of `qs[32c..32c+32]`, Q5_K: plus bit `2c` of `qh[l]` as bit 4)
/// and `2c+1` (high nibbles, bit `2c+1`); each is dotted with its 32
/// activations and weighted by its 6-bit scale, all in `i32`:
///
/// ```text
///   sumi  = Σ_c sc[2c]·(lo_c · y[64c..64c+32]) + sc[2c+1]·(hi_c · y[64c+32..64c+64])
///   acc  += (d_w · d_a) · sumi                  (8 lanes, fused)
///   mins -= (dmin_w · d_a) · Σ_g bsums[g]·m[g/2]
/// ```
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn dot_k_mins<const N: usize>(w: &[u8], a: &[u8], bits: QuantBits) -> f32 {
    let mut acc = _mm256_setzero_ps();
    let mut mins = 0.0f32;
    let low = _mm256_set1_epi8(0x0F);
    let bit4 = _mm256_set1_epi8(0x10);
    for (bw, ba) in block_pairs::<N, { BlockQ8_K::BYTES }>(w, a) {
        let Some((_, qs)) = bw.split_last_chunk::<128>() else {
            continue;
        };
        let (sc, m) = get_scale_min_k4(&bytes_at::<4, 12, N>(bw));
        let min_sum = min_term(load32::<260, 292>(ba), m);
        let qh = load32::<16, N>(bw);
        let chunks = [
            (
                load32::<0, 128>(qs),
                load32::<4, 292>(ba),
                load32::<36, 292>(ba),
            ),
            (
                load32::<32, 128>(qs),
                load32::<68, 292>(ba),
                load32::<100, 292>(ba),
            ),
            (
                load32::<64, 128>(qs),
                load32::<132, 292>(ba),
                load32::<164, 292>(ba),
            ),
            (
                load32::<96, 128>(qs),
                load32::<196, 292>(ba),
                load32::<228, 292>(ba),
            ),
        ];
        let mut sumi = _mm256_setzero_si256();
        for (c, ((q4, y_lo, y_hi), s)) in chunks.into_iter().zip(sc.as_chunks::<2>().0).enumerate()
        {
            let mut lo = _mm256_and_si256(q4, low);
            let mut hi = _mm256_and_si256(_mm256_srli_epi16::<4>(q4), low);
            if bits == QuantBits::Five {
                let (m_lo, m_hi) = (
                    _mm256_set1_epi8((1u8 << (2 * c)) as i8),
                    _mm256_set1_epi8((1u8 << (2 * c + 1)) as i8),
                );
                let h_lo = _mm256_cmpeq_epi8(_mm256_and_si256(qh, m_lo), m_lo);
                let h_hi = _mm256_cmpeq_epi8(_mm256_and_si256(qh, m_hi), m_hi);
                lo = _mm256_or_si256(lo, _mm256_and_si256(h_lo, bit4));
                hi = _mm256_or_si256(hi, _mm256_and_si256(h_hi, bit4));
            }
            let p_lo = _mm256_madd_epi16(
                _mm256_maddubs_epi16(lo, y_lo),
                _mm256_set1_epi16(i16::from(s[0])),
            );
            let p_hi = _mm256_madd_epi16(
                _mm256_maddubs_epi16(hi, y_hi),
                _mm256_set1_epi16(i16::from(s[1])),
            );
            sumi = _mm256_add_epi32(sumi, _mm256_add_epi32(p_lo, p_hi));
        }
        let yd = f32_at::<0, 292>(ba);
        let d = f16_to_f32(u16_at::<0, N>(bw)) * yd;
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
        mins -= (f16_to_f32(u16_at::<2, N>(bw)) * yd) * min_sum as f32;
    }
    mins + hsum_ps(acc)
}

/// AVX2 twin of [`crate::scalar::vec_dot_q4_k_q8_k`] (see `dot_k_mins`).
///
/// * `w`: Q4_K row; `a`: Q8_K row with the same number of super-blocks.
///
/// # Safety
///
/// The CPU must support AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn dot_q4_k_q8_k(w: &[u8], a: &[u8]) -> f32 {
    dot_k_mins::<{ BlockQ4_K::BYTES }>(w, a, QuantBits::Four)
}

/// AVX2 twin of [`crate::scalar::vec_dot_q5_k_q8_k`] (see `dot_k_mins`).
///
/// * `w`: Q5_K row; `a`: Q8_K row with the same number of super-blocks.
///
/// # Safety
///
/// The CPU must support AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn dot_q5_k_q8_k(w: &[u8], a: &[u8]) -> f32 {
    dot_k_mins::<{ BlockQ5_K::BYTES }>(w, a, QuantBits::Five)
}

/// Q6_K helper: 32 six-bit values (`0..64`) times 32 activations, minus 32
/// times the activations, with bytes `0..16` weighted by `s0` and bytes
/// `16..32` by `s1`: 8 exact `i32` lanes.
#[inline]
#[target_feature(enable = "avx2")]
fn q6_part(q: __m256i, y: __m256i, s0: i8, s1: i8) -> __m256i {
    let prod = _mm256_maddubs_epi16(q, y);
    let bias = _mm256_maddubs_epi16(_mm256_set1_epi8(32), y);
    let scales = _mm256_set_m128i(_mm_set1_epi16(i16::from(s1)), _mm_set1_epi16(i16::from(s0)));
    _mm256_madd_epi16(_mm256_sub_epi16(prod, bias), scales)
}

/// AVX2 twin of [`crate::scalar::vec_dot_q6_k_q8_k`].
///
/// * `w`: Q6_K row; `a`: Q8_K row with the same number of super-blocks.
///
/// Each 128-element half `h` reads `ql[64h..64h+64]` and `qh[32h..32h+32]`:
///
/// ```text
///   elements  0..32 : ql[l]    & 15 | (qh[l]      & 3) << 4
///   elements 32..64 : ql[32+l] & 15 | (qh[l] >> 2 & 3) << 4
///   elements 64..96 : ql[l]    >> 4 | (qh[l] >> 4 & 3) << 4
///   elements 96..128: ql[32+l] >> 4 | (qh[l] >> 6    ) << 4
/// ```
///
/// # Safety
///
/// The CPU must support AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn dot_q6_k_q8_k(w: &[u8], a: &[u8]) -> f32 {
    let mut acc = _mm256_setzero_ps();
    let m4 = _mm256_set1_epi8(0x0F);
    let m2 = _mm256_set1_epi8(0x03);
    for (bw, ba) in block_pairs::<{ BlockQ6_K::BYTES }, { BlockQ8_K::BYTES }>(w, a) {
        let sc = [
            [
                bw[192], bw[193], bw[194], bw[195], bw[196], bw[197], bw[198], bw[199],
            ],
            [
                bw[200], bw[201], bw[202], bw[203], bw[204], bw[205], bw[206], bw[207],
            ],
        ]
        .map(|half| half.map(|v| v as i8));
        let halves = [
            (
                load32::<0, 210>(bw),
                load32::<32, 210>(bw),
                load32::<128, 210>(bw),
                [
                    load32::<4, 292>(ba),
                    load32::<36, 292>(ba),
                    load32::<68, 292>(ba),
                    load32::<100, 292>(ba),
                ],
            ),
            (
                load32::<64, 210>(bw),
                load32::<96, 210>(bw),
                load32::<160, 210>(bw),
                [
                    load32::<132, 292>(ba),
                    load32::<164, 292>(ba),
                    load32::<196, 292>(ba),
                    load32::<228, 292>(ba),
                ],
            ),
        ];
        let mut sumi = _mm256_setzero_si256();
        for ((qa, qb, qh, y), s) in halves.into_iter().zip(sc) {
            let q0 = _mm256_or_si256(
                _mm256_and_si256(qa, m4),
                _mm256_slli_epi16::<4>(_mm256_and_si256(qh, m2)),
            );
            let q1 = _mm256_or_si256(
                _mm256_and_si256(qb, m4),
                _mm256_slli_epi16::<2>(_mm256_and_si256(qh, _mm256_set1_epi8(0x0C))),
            );
            let q2 = _mm256_or_si256(
                _mm256_and_si256(_mm256_srli_epi16::<4>(qa), m4),
                _mm256_and_si256(qh, _mm256_set1_epi8(0x30)),
            );
            let q3 = _mm256_or_si256(
                _mm256_and_si256(_mm256_srli_epi16::<4>(qb), m4),
                _mm256_srli_epi16::<2>(_mm256_and_si256(qh, _mm256_set1_epi8(0xC0u8 as i8))),
            );
            let parts = [
                q6_part(q0, y[0], s[0], s[1]),
                q6_part(q1, y[1], s[2], s[3]),
                q6_part(q2, y[2], s[4], s[5]),
                q6_part(q3, y[3], s[6], s[7]),
            ];
            for p in parts {
                sumi = _mm256_add_epi32(sumi, p);
            }
        }
        let d = f16_to_f32(u16_at::<208, 210>(bw)) * f32_at::<0, 292>(ba);
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
    }
    hsum_ps(acc)
}

/// AVX2/F16C twin of [`crate::scalar::vec_dot_f16`]: `f32` products of
/// F16C-converted halves, fused into 4 × 8 float lanes, lanes summed in
/// `f64`; a tail of fewer than 32 elements is summed in `f64` directly.
///
/// * `w`, `a`: little-endian f16 rows of the same length (bytes).
///
/// # Safety
///
/// The CPU must support AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn dot_f16(w: &[u8], a: &[u8]) -> f32 {
    let mut acc = [_mm256_setzero_ps(); 4];
    let (wc, wt) = w.as_chunks::<64>();
    let (ac, at) = a.as_chunks::<64>();
    for (x, y) in wc.iter().zip(ac) {
        let xs = [
            load16::<0, 64>(x),
            load16::<16, 64>(x),
            load16::<32, 64>(x),
            load16::<48, 64>(x),
        ];
        let ys = [
            load16::<0, 64>(y),
            load16::<16, 64>(y),
            load16::<32, 64>(y),
            load16::<48, 64>(y),
        ];
        for ((s, xv), yv) in acc.iter_mut().zip(xs).zip(ys) {
            *s = _mm256_fmadd_ps(_mm256_cvtph_ps(xv), _mm256_cvtph_ps(yv), *s);
        }
    }
    let lanes = _mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3]));
    let mut sum = f64::from(hsum_ps(lanes));
    for (x, y) in wt.as_chunks::<2>().0.iter().zip(at.as_chunks::<2>().0) {
        let p = f16_to_f32(u16::from_le_bytes(*x)) * f16_to_f32(u16::from_le_bytes(*y));
        sum += f64::from(p);
    }
    sum as f32
}

/// Shared F32/BF16 body: each `C`-byte chunk (32 elements) becomes 4 × 8
/// `f32` lanes through `load`; products are fused into 4 accumulators whose
/// lanes are summed in `f64` at the end; the elements past the last whole
/// chunk go through `tail`, in `f64`.
#[inline]
#[target_feature(enable = "avx2,fma")]
fn float_dot<const C: usize>(
    w: &[u8],
    a: &[u8],
    load: impl Fn(&[u8; C]) -> [__m256; 4],
    tail: impl Fn(&[u8], &[u8]) -> f64,
) -> f32 {
    let mut acc = [_mm256_setzero_ps(); 4];
    let (wc, wt) = w.as_chunks::<C>();
    let (ac, at) = a.as_chunks::<C>();
    for (x, y) in wc.iter().zip(ac) {
        for ((s, xv), yv) in acc.iter_mut().zip(load(x)).zip(load(y)) {
            *s = _mm256_fmadd_ps(xv, yv, *s);
        }
    }
    let lanes = _mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3]));
    (f64::from(hsum_ps(lanes)) + tail(wt, at)) as f32
}

/// AVX2/FMA twin of [`crate::scalar::vec_dot_f32`]: fused `f32` lanes,
/// summed in `f64` at the end.
///
/// * `w`, `a`: little-endian f32 rows of the same length (bytes).
///
/// # Safety
///
/// The CPU must support AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn dot_f32(w: &[u8], a: &[u8]) -> f32 {
    let load = |c: &[u8; 128]| {
        [
            _mm256_castsi256_ps(load32::<0, 128>(c)),
            _mm256_castsi256_ps(load32::<32, 128>(c)),
            _mm256_castsi256_ps(load32::<64, 128>(c)),
            _mm256_castsi256_ps(load32::<96, 128>(c)),
        ]
    };
    let tail = |wt: &[u8], at: &[u8]| {
        let pairs = wt.as_chunks::<4>().0.iter().zip(at.as_chunks::<4>().0);
        pairs
            .map(|(x, y)| f64::from(f32::from_le_bytes(*x) * f32::from_le_bytes(*y)))
            .sum::<f64>()
    };
    float_dot(w, a, load, tail)
}

/// Widens 8 bf16 values to `f32` (bf16 is the top half of an f32).
#[inline]
#[target_feature(enable = "avx2")]
fn bf16x8(v: __m128i) -> __m256 {
    _mm256_castsi256_ps(_mm256_slli_epi32::<16>(_mm256_cvtepu16_epi32(v)))
}

/// AVX2/FMA twin of [`crate::scalar::vec_dot_bf16`]: exact widening, fused
/// `f32` lanes, summed in `f64` at the end.
///
/// * `w`, `a`: little-endian bf16 rows of the same length (bytes).
///
/// # Safety
///
/// The CPU must support AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn dot_bf16(w: &[u8], a: &[u8]) -> f32 {
    let load = |c: &[u8; 64]| {
        [
            bf16x8(load16::<0, 64>(c)),
            bf16x8(load16::<16, 64>(c)),
            bf16x8(load16::<32, 64>(c)),
            bf16x8(load16::<48, 64>(c)),
        ]
    };
    let tail = |wt: &[u8], at: &[u8]| {
        let pairs = wt.as_chunks::<2>().0.iter().zip(at.as_chunks::<2>().0);
        pairs
            .map(|(x, y)| {
                let p = bf16_to_f32(u16::from_le_bytes(*x)) * bf16_to_f32(u16::from_le_bytes(*y));
                f64::from(p)
            })
            .sum::<f64>()
    };
    float_dot(w, a, load, tail)
}
