//! AVX-512 VNNI kernel of [`crate::packed`] for Q8_0: the packed layout and
//! the float steps of [`super::packed_avx2`], with each step's products
//! summed by one `vpdpbusd` (four `u8 · i8` products added into an `i32`
//! lane, no `i16` stage) instead of the AVX2 chain of `sign`, `maddubs`
//! and `madd`.
//!
//! `vpdpbusd` multiplies unsigned by signed bytes. The activation quants
//! are made unsigned by adding 128 (`x ^ 0x80` as a byte), and the excess
//! comes off in integers once per block:
//!
//! ```text
//!   per block b:
//!     per token t:  xu[t] = x[t] + 128 (32 bytes, once per block)
//!     per step k (values 4k..4k+4):
//!       w      = 32 bytes: rows 0..8 × 4 quants        (loaded once per tile)
//!       c     += dpbusd(128, w)           = 128 · Σ w     (shared by the tile)
//!       per token t: s[t] += dpbusd(xu[t][4k..4k+4] in every lane, w)
//!     per token t:  s[t] - c = Σ w · x                   exact i32
//!                   acc[t] = acc[t] + (d_w · d_x[t]) · f32(s[t] - c)
//! ```
//!
//! A lane's sum stays below `2^20` in size (32 products of at most
//! `255 · 128`), so every integer step is exact, for any `i8` weight and
//! activation, `-128` included. The float steps are [`scale_block`]'s, so
//! the output has the scalar twin's bits. With AVX-512VL's 32 vector
//! registers a tile holds eight tokens.

use std::arch::x86_64::*;

use super::packed_avx2::{blocks_at, bytes32, load, quad, scale_block, store, AB};
use crate::packed::{PackedArgs, Q8_0_BYTES, SCALE_BYTES, STEPS};

/// Tokens per tile: eight sums, the shared correction, the weights, one
/// broadcast and eight float accumulators fit in 32 registers.
const TILE: usize = 8;

/// One Q8_0 group (`w`: its blocks) times `T` activation rows; returns the
/// 8 row results of each token.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
fn tile_q8<const T: usize>(w: &[[u8; Q8_0_BYTES]], a: [&[[u8; AB]]; T]) -> [__m256; T] {
    let bias = _mm256_set1_epi8(i8::MIN);
    let mut acc = [_mm256_setzero_ps(); T];
    let mut xu = [[0u8; 32]; T];
    for (b, wb) in w.iter().enumerate() {
        let ab = blocks_at(&a, b);
        for t in 0..T {
            let x = _mm256_xor_si256(load(bytes32(ab[t], 2)), bias);
            // SAFETY: `xu[t]` is 32 writable bytes; `storeu` needs no
            // alignment.
            unsafe { _mm256_storeu_si256(xu[t].as_mut_ptr().cast(), x) };
        }
        // Keeps `xu` in memory: each step then broadcasts its quads with a
        // load (`vpbroadcastd ymm, m32`) instead of two shuffles on the
        // one shuffle port.
        std::hint::black_box(&mut xu);
        let mut corr = _mm256_setzero_si256();
        let mut sumi = [_mm256_setzero_si256(); T];
        for k in 0..STEPS {
            let wq = load(bytes32(wb, SCALE_BYTES + 32 * k));
            corr = _mm256_dpbusd_epi32(corr, bias, wq);
            for t in 0..T {
                let x = _mm256_set1_epi32(quad::<0, 32>(&xu[t], k));
                sumi[t] = _mm256_dpbusd_epi32(sumi[t], x, wq);
            }
        }
        for s in sumi.iter_mut() {
            *s = _mm256_sub_epi32(*s, corr);
        }
        scale_block(wb, ab, sumi, &mut acc);
    }
    acc
}

/// Every group of `g.w` against every token: tiles of [`TILE`] tokens,
/// then one token at a time.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
fn gemm_q8(g: &PackedArgs<'_>, out: &mut [f32]) {
    let nb = g.nb.max(1);
    let (blocks, _) = g.w.as_chunks::<Q8_0_BYTES>();
    let (acts, _) = g.a.as_chunks::<AB>();
    let arow = |t: usize| acts.get(t * g.nb..(t + 1) * g.nb).unwrap_or(&[]);
    let full = g.n_tok / TILE * TILE;
    for (gi, group) in blocks.chunks_exact(nb).enumerate() {
        let col = gi * 8;
        for t0 in (0..full).step_by(TILE) {
            let a: [&[[u8; AB]]; TILE] = std::array::from_fn(|t| arow(t0 + t));
            for (t, v) in tile_q8::<TILE>(group, a).into_iter().enumerate() {
                store(out, (t0 + t) * g.out_stride + col, v);
            }
        }
        for t in full..g.n_tok {
            let [v] = tile_q8::<1>(group, [arow(t)]);
            store(out, t * g.out_stride + col, v);
        }
    }
}

/// The Q8_0 packed product of [`crate::packed::packed_gemm`] (the caller
/// checked the format).
///
/// # Safety
///
/// The CPU must support AVX2, FMA, F16C and AVX-512 F, BW, VL and VNNI
/// (what [`crate::isa::Isa::Avx512`] requires).
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
pub(crate) unsafe fn gemm_q8_0(g: &PackedArgs<'_>, out: &mut [f32]) {
    gemm_q8(g, out);
}
