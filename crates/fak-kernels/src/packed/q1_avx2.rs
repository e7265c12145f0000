//! The AVX2 tile of packed Q1_0 (layout and arithmetic: `q1`): 8 rows ×
//! up to [`Q1_TILE`] tokens, each step's 32 sign bits expanded once for
//! the tile's tokens; the float steps lane by lane in the scalar order.

use std::arch::x86_64::*;

use super::layout::{q1, PackedArgs, GROUP_ROWS};
use super::tiles::store;
use crate::blocks::BlockQ8_0;
use crate::simd::avx2_blocks::bits_to_bytes;

/// Tokens per tile: per token an `i16` sum and the float sum of the block
/// stay in registers beside the step's signs and broadcast quants.
pub(super) const Q1_TILE: usize = 4;

/// Q8_0 blocks under one Q1_0 block.
const SUBS: usize = 4;

/// One group (`w`: its `nb` group blocks) against `T` tokens (`a[t]`:
/// `4 · nb` Q8_0 blocks each): the 8 row results per token.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn tile<const T: usize>(w: &[[u8; q1::BYTES]], a: [&[[u8; BlockQ8_0::BYTES]]; T]) -> [__m256; T] {
    let (ones8, ones16) = (_mm256_set1_epi8(1), _mm256_set1_epi16(1));
    let all = _mm256_set1_epi8(-1);
    let mut acc = [_mm256_setzero_ps(); T];
    for (b, wb) in w.iter().enumerate() {
        let mut s = [_mm256_setzero_ps(); T];
        for k in 0..SUBS {
            let mut p16 = [_mm256_setzero_si256(); T];
            for j in 0..8 {
                let at = q1::BITS + 4 * (8 * k + j);
                let bits = u32::from_le_bytes([wb[at], wb[at + 1], wb[at + 2], wb[at + 3]]);
                // +1 where the bit is set, −1 elsewhere.
                let signs = _mm256_or_si256(_mm256_xor_si256(bits_to_bytes(bits), all), ones8);
                for t in 0..T {
                    let Some(ab) = a[t].get(SUBS * b + k) else {
                        continue;
                    };
                    let q = &ab[2 + 4 * j..6 + 4 * j];
                    let x = _mm256_set1_epi32(i32::from_le_bytes([q[0], q[1], q[2], q[3]]));
                    let prod = _mm256_sign_epi8(x, signs);
                    p16[t] = _mm256_add_epi16(p16[t], _mm256_maddubs_epi16(ones8, prod));
                }
            }
            for t in 0..T {
                let Some(ab) = a[t].get(SUBS * b + k) else {
                    continue;
                };
                let sumi = _mm256_madd_epi16(p16[t], ones16);
                let dx = _mm256_cvtph_ps(_mm_set1_epi16(i16::from_le_bytes([ab[0], ab[1]])));
                s[t] = _mm256_add_ps(s[t], _mm256_mul_ps(dx, _mm256_cvtepi32_ps(sumi)));
            }
        }
        // SAFETY: the 8 f16 scales are the first 16 bytes of the block.
        let dw = _mm256_cvtph_ps(unsafe { _mm_loadu_si128(wb.as_ptr().cast()) });
        for t in 0..T {
            acc[t] = _mm256_add_ps(acc[t], _mm256_mul_ps(dw, s[t]));
        }
    }
    acc
}

/// Every group of `g` against every token, [`Q1_TILE`] tokens at a time
/// (the rest one by one); `out[t · out_stride + 8·group + r]`.
///
/// # Safety
///
/// The CPU must support AVX2, FMA and F16C; the caller has checked every
/// length.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn gemm(g: &PackedArgs<'_>, out: &mut [f32]) {
    let nb = g.nb.max(1);
    let groups = g.w.as_chunks::<{ q1::BYTES }>().0;
    let acts = g.a.as_chunks::<{ BlockQ8_0::BYTES }>().0;
    let per_tok = SUBS * nb;
    let row = |t: usize| acts.get(t * per_tok..(t + 1) * per_tok).unwrap_or(&[]);
    for (gi, w) in groups.chunks(nb).enumerate() {
        let col = gi * GROUP_ROWS;
        let mut t0 = 0;
        while t0 + Q1_TILE <= g.n_tok {
            let a: [&[[u8; BlockQ8_0::BYTES]]; Q1_TILE] =
                [row(t0), row(t0 + 1), row(t0 + 2), row(t0 + 3)];
            let y = tile::<Q1_TILE>(w, a);
            for (t, v) in y.into_iter().enumerate() {
                store(out, (t0 + t) * g.out_stride + col, v);
            }
            t0 += Q1_TILE;
        }
        while t0 < g.n_tok {
            let [v] = tile::<1>(w, [row(t0)]);
            store(out, t0 * g.out_stride + col, v);
            t0 += 1;
        }
    }
}
