//! The AVX2 tile of packed NVFP4 (layout and arithmetic: `nv`): 8 rows ×
//! up to [`NV_TILE`] tokens, each chunk's codes turned into levels once
//! for the tile's tokens; the float steps lane by lane in the scalar order.

use std::arch::x86_64::*;

use super::layout::{nv, PackedArgs, GROUP_ROWS};
use super::tiles::store;
use crate::blocks::{BlockQ8_0, MXFP4_LEVELS};

/// Tokens per tile.
pub(super) const NV_TILE: usize = 4;

/// One group (`w`: its `nb` group blocks) against `T` tokens (`a[t]`:
/// `2 · nb` Q8_0 blocks each): the 8 row results per token.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn tile<const T: usize>(w: &[[u8; nv::BYTES]], a: [&[[u8; BlockQ8_0::BYTES]]; T]) -> [__m256; T] {
    let l = MXFP4_LEVELS;
    let table = _mm256_broadcastsi128_si256(_mm_setr_epi8(
        l[0], l[1], l[2], l[3], l[4], l[5], l[6], l[7], l[8], l[9], l[10], l[11], l[12], l[13],
        l[14], l[15],
    ));
    let (low, ones16) = (_mm256_set1_epi8(15), _mm256_set1_epi16(1));
    let mut acc = [_mm256_setzero_ps(); T];
    for (b, wb) in w.iter().enumerate() {
        for s in 0..4 {
            let mut p16 = [_mm256_setzero_si256(); T];
            for c in 2 * s..2 * s + 2 {
                let at = nv::NIB + 32 * c;
                // SAFETY: a group block holds 32 bytes at `at` (c < 8).
                let n = unsafe { _mm256_loadu_si256(wb.as_ptr().add(at).cast()) };
                let w0 = _mm256_shuffle_epi8(table, _mm256_and_si256(n, low));
                let w1 =
                    _mm256_shuffle_epi8(table, _mm256_and_si256(_mm256_srli_epi16::<4>(n), low));
                for t in 0..T {
                    // Steps 2c and 2c + 1: values 8c..8c + 8 of the block,
                    // Q8_0 block 2b + c / 4 at 8 (c % 4).
                    let Some(ab) = a[t].get(2 * b + c / 4) else {
                        continue;
                    };
                    let q = &ab[2 + 8 * (c % 4)..10 + 8 * (c % 4)];
                    let x0 = _mm256_set1_epi32(i32::from_le_bytes([q[0], q[1], q[2], q[3]]));
                    let x1 = _mm256_set1_epi32(i32::from_le_bytes([q[4], q[5], q[6], q[7]]));
                    let p0 = _mm256_maddubs_epi16(_mm256_abs_epi8(x0), _mm256_sign_epi8(w0, x0));
                    let p1 = _mm256_maddubs_epi16(_mm256_abs_epi8(x1), _mm256_sign_epi8(w1, x1));
                    p16[t] = _mm256_add_epi16(p16[t], _mm256_add_epi16(p0, p1));
                }
            }
            // SAFETY: the 8 f16 scales of sub-block `s` are 16 bytes at 16s.
            let ds =
                _mm256_cvtph_ps(unsafe { _mm_loadu_si128(wb.as_ptr().add(nv::D + 16 * s).cast()) });
            for t in 0..T {
                let Some(ab) = a[t].get(2 * b + s / 2) else {
                    continue;
                };
                let sumi = _mm256_madd_epi16(p16[t], ones16);
                let dx = _mm256_cvtph_ps(_mm_set1_epi16(i16::from_le_bytes([ab[0], ab[1]])));
                acc[t] = _mm256_add_ps(
                    acc[t],
                    _mm256_mul_ps(_mm256_mul_ps(dx, ds), _mm256_cvtepi32_ps(sumi)),
                );
            }
        }
    }
    acc
}

/// Every group of `g` against every token, [`NV_TILE`] tokens at a time
/// (the rest one by one); `out[t · out_stride + 8·group + r]`.
///
/// # Safety
///
/// The CPU must support AVX2, FMA and F16C; the caller has checked every
/// length.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn gemm(g: &PackedArgs<'_>, out: &mut [f32]) {
    let nb = g.nb.max(1);
    let groups = g.w.as_chunks::<{ nv::BYTES }>().0;
    let acts = g.a.as_chunks::<{ BlockQ8_0::BYTES }>().0;
    let per_tok = 2 * nb;
    let row = |t: usize| acts.get(t * per_tok..(t + 1) * per_tok).unwrap_or(&[]);
    for (gi, w) in groups.chunks(nb).enumerate() {
        let col = gi * GROUP_ROWS;
        let mut t0 = 0;
        while t0 + NV_TILE <= g.n_tok {
            let a: [&[[u8; BlockQ8_0::BYTES]]; NV_TILE] =
                [row(t0), row(t0 + 1), row(t0 + 2), row(t0 + 3)];
            let y = tile::<NV_TILE>(w, a);
            for (t, v) in y.into_iter().enumerate() {
                store(out, (t0 + t) * g.out_stride + col, v);
            }
            t0 += NV_TILE;
        }
        while t0 < g.n_tok {
            let [v] = tile::<1>(w, [row(t0)]);
            store(out, t0 * g.out_stride + col, v);
            t0 += 1;
        }
    }
}
