//! The AVX2 building blocks shared by the dot products (`avx2`) and their
//! matrix tiles (`gemm_avx2`): loads from a block image at offsets checked
//! at compile time, the exact byte products into `i32` lanes, nibble and
//! bit-plane unpacking, and the fixed-order horizontal sum.
//!
//! A leaf, so the two kernel files share these without importing each
//! other for them.

use std::arch::x86_64::*;

/// Loads 32 bytes starting at byte `OFF` of an `N`-byte block image; the
/// range is checked at compile time.
#[inline]
#[target_feature(enable = "avx2")]
pub(super) fn load32<const OFF: usize, const N: usize>(b: &[u8; N]) -> __m256i {
    const { assert!(OFF + 32 <= N) };
    // SAFETY: OFF + 32 <= N (checked above), so the 32 bytes are inside `b`;
    // `loadu` has no alignment requirement.
    unsafe { _mm256_loadu_si256(b.as_ptr().add(OFF).cast()) }
}

/// Loads 16 bytes starting at byte `OFF` of an `N`-byte block image; the
/// range is checked at compile time.
#[inline]
#[target_feature(enable = "avx2")]
pub(super) fn load16<const OFF: usize, const N: usize>(b: &[u8; N]) -> __m128i {
    const { assert!(OFF + 16 <= N) };
    // SAFETY: OFF + 16 <= N (checked above), so the 16 bytes are inside `b`.
    unsafe { _mm_loadu_si128(b.as_ptr().add(OFF).cast()) }
}

/// Reads the little-endian `u16` at byte `OFF` of a block image.
#[inline(always)]
pub(super) fn u16_at<const OFF: usize, const N: usize>(b: &[u8; N]) -> u16 {
    const { assert!(OFF + 2 <= N) };
    u16::from_le_bytes([b[OFF], b[OFF + 1]])
}

/// Reads the little-endian `f32` at byte `OFF` of a block image.
#[inline(always)]
pub(super) fn f32_at<const OFF: usize, const N: usize>(b: &[u8; N]) -> f32 {
    const { assert!(OFF + 4 <= N) };
    f32::from_le_bytes([b[OFF], b[OFF + 1], b[OFF + 2], b[OFF + 3]])
}

/// Sum of the 8 lanes in a fixed order:
/// `((a0+a4)+(a2+a6)) + ((a1+a5)+(a3+a7))`.
#[inline]
#[target_feature(enable = "avx2")]
pub(super) fn hsum_ps(v: __m256) -> f32 {
    let q = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
    let d = _mm_add_ps(q, _mm_movehl_ps(q, q));
    let s = _mm_add_ss(d, _mm_movehdup_ps(d));
    _mm_cvtss_f32(s)
}

/// Sum of the 8 `i32` lanes (exact).
#[inline]
#[target_feature(enable = "avx2")]
pub(super) fn hsum_epi32(v: __m256i) -> i32 {
    let q = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256::<1>(v));
    let d = _mm_add_epi32(q, _mm_unpackhi_epi64(q, q));
    let s = _mm_add_epi32(d, _mm_shuffle_epi32::<0b01>(d));
    _mm_cvtsi128_si32(s)
}

/// Unsigned bytes `x` (each `< 128`) times signed bytes `y`, pairwise summed
/// into 8 exact `i32` lanes (lane `k` covers bytes `4k..4k+4`).
#[inline]
#[target_feature(enable = "avx2")]
pub(super) fn dot_u8_i8(x: __m256i, y: __m256i) -> __m256i {
    let pairs = _mm256_maddubs_epi16(x, y);
    _mm256_madd_epi16(pairs, _mm256_set1_epi16(1))
}

/// Signed bytes `x` times signed bytes `y` (`y` in `-127..=127`), summed
/// into 8 exact `i32` lanes.
#[inline]
#[target_feature(enable = "avx2")]
pub(super) fn dot_i8_i8(x: __m256i, y: __m256i) -> __m256i {
    let ax = _mm256_sign_epi8(x, x);
    let sy = _mm256_sign_epi8(y, x);
    dot_u8_i8(ax, sy)
}

/// Splits 16 nibble-pair bytes into 32 values: byte `j` low nibble → `j`,
/// high nibble → `j + 16` (the legacy Q4/Q5 layout).
#[inline]
#[target_feature(enable = "avx2")]
pub(super) fn nibbles_16(packed: __m128i) -> __m256i {
    let mask = _mm_set1_epi8(0x0F);
    let lo = _mm_and_si128(packed, mask);
    let hi = _mm_and_si128(_mm_srli_epi16::<4>(packed), mask);
    _mm256_set_m128i(hi, lo)
}

/// Expands a 32-bit bit plane into 32 bytes: byte `j` is `0xFF` if bit `j`
/// is set, else `0`.
#[inline]
#[target_feature(enable = "avx2")]
pub(crate) fn bits_to_bytes(bits: u32) -> __m256i {
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
