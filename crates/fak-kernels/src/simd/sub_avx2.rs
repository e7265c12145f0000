//! AVX2 twins of the formats whose float step comes per sub-block of a
//! block, NVFP4 (a UE4M3 scale per 16 values) and Q1_0 (a 128-value block
//! over four Q8_0 blocks), which the per-block tiles of `gemm_avx2` cannot
//! express. Their integer sums are exact on AVX2; the float steps then run
//! one by one in the scalar twin's order, so every result is the scalar
//! twin's bits, and a product of many tokens (one of these per element)
//! gives every element the same bits as one token.
//!
//! ```text
//!   NVFP4 (36 B) · 2 Q8_0 blocks (68 B):
//!     codes → nibbles → levels (byte shuffle); sub-blocks 0|2 and 1|3 share
//!     a register (one per 128-bit lane) against the matching activation
//!     halves; 4 exact sums;  sumf += (d_a · d_s) · f32(sum_s), s = 0..4
//!   Q1_0 (18 B) · 4 Q8_0 blocks (136 B):
//!     per Q8_0 block k: signs from 32 bits, sum_k = Σ sign · a (exact)
//!     s += d_a,k · f32(sum_k);  then sumf += d_w · s
//! ```

use std::arch::x86_64::*;

use super::avx2_blocks::{bits_to_bytes, dot_i8_i8, dot_u8_i8, hsum_epi32, load16, load32};
use crate::blocks::MXFP4_LEVELS;
use crate::fp::{f16_to_f32, ue4m3_to_f32_half};

/// NVFP4 weights · Q8_0 activations ([`crate::scalar::vec_dot_nvfp4_q8_0`]'s
/// bits).
///
/// * `w`: NVFP4 row; `a`: Q8_0 row of the same length (two blocks per
///   NVFP4 block); extra bytes are ignored.
///
/// # Safety
///
/// The CPU must support AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn dot_nvfp4_q8_0(w: &[u8], a: &[u8]) -> f32 {
    let l = MXFP4_LEVELS;
    let levels = _mm256_broadcastsi128_si256(_mm_setr_epi8(
        l[0], l[1], l[2], l[3], l[4], l[5], l[6], l[7], l[8], l[9], l[10], l[11], l[12], l[13],
        l[14], l[15],
    ));
    let low4 = _mm256_set1_epi8(0x0F);
    let mut sumf = 0.0f32;
    for (bw, ba) in w.as_chunks::<36>().0.iter().zip(a.as_chunks::<68>().0) {
        let qs = load32::<4, 36>(bw);
        let (lo, hi) = (
            _mm256_and_si256(qs, low4),
            _mm256_and_si256(_mm256_srli_epi16::<4>(qs), low4),
        );
        // Lane 0: sub-blocks 0 (low) and 1 (high); lane 1: 2 and 3. Each
        // sub-block's 16 values are its 8 low nibbles, then its 8 high.
        let w02 = _mm256_shuffle_epi8(levels, _mm256_unpacklo_epi64(lo, hi));
        let w13 = _mm256_shuffle_epi8(levels, _mm256_unpackhi_epi64(lo, hi));
        let (a0, a1) = (
            ba.first_chunk::<34>().unwrap_or(&[0; 34]),
            ba.last_chunk::<34>().unwrap_or(&[0; 34]),
        );
        let a02 = _mm256_set_m128i(load16::<2, 34>(a1), load16::<2, 34>(a0));
        let a13 = _mm256_set_m128i(load16::<18, 34>(a1), load16::<18, 34>(a0));
        let (p02, p13) = (dot_i8_i8(w02, a02), dot_i8_i8(w13, a13));
        // Lanes 0-3 of p02 sum sub-block 0, 4-7 sub-block 2; p13: 1 and 3.
        let h = _mm256_hadd_epi32(p02, p13);
        let h = _mm256_hadd_epi32(h, h);
        let sums = [
            _mm256_extract_epi32::<0>(h),
            _mm256_extract_epi32::<1>(h),
            _mm256_extract_epi32::<4>(h),
            _mm256_extract_epi32::<5>(h),
        ];
        let dy = [
            f16_to_f32(u16::from_le_bytes([a0[0], a0[1]])),
            f16_to_f32(u16::from_le_bytes([a1[0], a1[1]])),
        ];
        for (s, &sumi) in sums.iter().enumerate() {
            sumf += (dy[s / 2] * ue4m3_to_f32_half(bw[s])) * sumi as f32;
        }
    }
    sumf
}

/// Q1_0 weights · Q8_0 activations ([`crate::scalar::vec_dot_q1_0_q8_0`]'s
/// bits). `sign` needs the activation quants in `-127..=127`, which is all
/// the Q8_0 quantizer writes.
///
/// * `w`: Q1_0 row; `a`: Q8_0 row of the same length (four blocks per Q1_0
///   block); extra bytes are ignored.
///
/// # Safety
///
/// The CPU must support AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn dot_q1_0_q8_0(w: &[u8], a: &[u8]) -> f32 {
    let ones = _mm256_set1_epi8(1);
    let mut sumf = 0.0f32;
    for (bw, ba) in w.as_chunks::<18>().0.iter().zip(a.as_chunks::<136>().0) {
        let mut s = 0.0f32;
        for (k, yb) in ba.as_chunks::<34>().0.iter().enumerate() {
            let bits =
                u32::from_le_bytes([bw[2 + 4 * k], bw[3 + 4 * k], bw[4 + 4 * k], bw[5 + 4 * k]]);
            // +1 where the bit is set (the mask's 0xFF inverted, then | 1),
            // −1 (0xFF) elsewhere.
            let unset = _mm256_xor_si256(bits_to_bytes(bits), _mm256_set1_epi8(-1));
            let signs = _mm256_or_si256(unset, ones);
            let signed = _mm256_sign_epi8(load32::<2, 34>(yb), signs);
            let sumi = hsum_epi32(dot_u8_i8(ones, signed));
            s += f16_to_f32(u16::from_le_bytes([yb[0], yb[1]])) * sumi as f32;
        }
        sumf += f16_to_f32(u16::from_le_bytes([bw[0], bw[1]])) * s;
    }
    sumf
}
