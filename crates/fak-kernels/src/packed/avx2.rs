//! AVX2 kernels of [`crate::packed`]: one register holds the running sums
//! of 8 weight rows, and a tile runs one 8-row group against `T` tokens.
//! Q8_0's signed tiles (the `sign` / `maddubs` / `madd` chain) are in
//! `q8_avx2.rs`, Q4_0's and Q4_1's in `q4_avx2.rs`, the
//! k-quants' in `k_avx2.rs`; this file holds Q5_0 and the dispatch. Q5_0 rebuilds each step's quants plus 16
//! from its bit planes and runs an unsigned tile ([`tile_q5`]) that needs
//! no sign trick, in its own loop ([`gemm_q5`]) that shares each
//! activation block's sum across a chunk of groups. Every tile ends its
//! blocks with the same float steps ([`scale_block`]: `acc + (d_w · d_x)
//! · f32(s)`), exactly the scalar twin's.

use std::arch::x86_64::*;

use super::layout::{PackedArgs, PackedFormat, Q5_0_BYTES, SCALE_BYTES, STEPS};
use super::tiles::{
    blocks_at, bytes32, load, prefetch_ahead, quad, scale_block, store, AB, TILE_TOKENS,
};

/// Q5_0's step decoding (its loop is [`gemm_q5`]).
pub(super) struct Q5;

impl Q5 {
    /// Step `k`'s quants plus 16 (`0..32`, unsigned): nibble plane `k / 2`
    /// (low or high half), plus 16 where the high-bit plane's bit `k` is
    /// set.
    #[inline]
    #[target_feature(enable = "avx2")]
    pub(super) fn unsigned_step(b: &[u8; Q5_0_BYTES], k: usize) -> __m256i {
        let nib = load(bytes32(b, SCALE_BYTES + 32 * (k / 2)));
        let low = _mm256_set1_epi8(15);
        let q4 = if k.is_multiple_of(2) {
            _mm256_and_si256(nib, low)
        } else {
            _mm256_and_si256(_mm256_srli_epi16::<4>(nib), low)
        };
        let hb = load(bytes32(b, SCALE_BYTES + 128));
        let bit = _mm256_set1_epi8((1u8 << k) as i8);
        let set = _mm256_cmpeq_epi8(_mm256_and_si256(hb, bit), bit);
        _mm256_or_si256(q4, _mm256_and_si256(set, _mm256_set1_epi8(16)))
    }
}

/// The sum of an activation block's 32 quants, in every lane.
#[inline]
#[target_feature(enable = "avx2")]
fn block_sum(ab: &[u8; AB]) -> __m256i {
    let x = load(bytes32(ab, 2));
    let p = _mm256_madd_epi16(
        _mm256_maddubs_epi16(_mm256_set1_epi8(1), x),
        _mm256_set1_epi16(1),
    );
    let s = _mm256_add_epi32(p, _mm256_shuffle_epi32::<0b0100_1110>(p));
    let s = _mm256_add_epi32(s, _mm256_shuffle_epi32::<0b1011_0001>(s));
    _mm256_add_epi32(s, _mm256_permute2x128_si256::<1>(s, s))
}

/// The Q5_0 tile: the Q8_0 tiles' sums without the sign trick. The quants
/// plus 16 are unsigned (below 32), so `maddubs` takes them directly; its
/// pair sums (at most `2 · 31 · 128` in size) add up exactly in `i16` over
/// 4 steps (half a block), and the offset comes off in integers:
/// `Σ q·x = Σ (q + 16)·x − 16 · Σ x`. `sums[t][b]` is `16 · Σ x` of token
/// `t`'s block `b` where [`gemm_q5`] computed it; past the end of
/// `sums[t]` the tile sums the block itself. Same exact `i32` sum, same
/// float steps, so the same bits as the scalar twin.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn tile_q5<const T: usize>(
    w: &[[u8; Q5_0_BYTES]],
    a: [&[[u8; AB]]; T],
    sums: [&[i32]; T],
) -> [__m256; T] {
    let ones = _mm256_set1_epi16(1);
    let mut acc = [_mm256_setzero_ps(); T];
    for (b, wb) in w.iter().enumerate() {
        if T == 1 {
            prefetch_ahead(wb);
        }
        let ab = blocks_at(&a, b);
        let mut sumi = [_mm256_setzero_si256(); T];
        for h in 0..2 {
            let mut s = [_mm256_setzero_si256(); T];
            for kk in 0..STEPS / 2 {
                let k = h * (STEPS / 2) + kk;
                let u = Q5::unsigned_step(wb, k);
                for t in 0..T {
                    let x = _mm256_set1_epi32(quad::<2, AB>(ab[t], k));
                    s[t] = _mm256_add_epi16(s[t], _mm256_maddubs_epi16(u, x));
                }
            }
            for t in 0..T {
                sumi[t] = _mm256_add_epi32(sumi[t], _mm256_madd_epi16(s[t], ones));
            }
        }
        for t in 0..T {
            let off = match sums[t].get(b) {
                Some(&x16) => _mm256_set1_epi32(x16),
                None => _mm256_slli_epi32::<4>(block_sum(ab[t])),
            };
            sumi[t] = _mm256_sub_epi32(sumi[t], off);
        }
        scale_block(wb, ab, sumi, &mut acc);
    }
    acc
}

/// Groups per chunk of [`gemm_q5`] (32 weight rows).
const Q5_CHUNK_GROUPS: usize = 4;

/// Activation blocks per token whose sums [`gemm_q5`] keeps on its stack
/// (rows of up to 32,768 values); later blocks are summed in the tile.
const Q5_SUM_BLOCKS: usize = 1024;

/// Q5_0's loop over groups and tokens. Unlike the k-quants' loops, groups go in
/// chunks of [`Q5_CHUNK_GROUPS`], and each token tile's `16 · Σ x` per
/// activation block is computed once per chunk and shared by its groups
/// (it was once per group); a chunk's weights stay in L1 across the
/// tokens.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn gemm_q5(g: &PackedArgs<'_>, out: &mut [f32]) {
    let nb = g.nb.max(1);
    let (blocks, _) = g.w.as_chunks::<Q5_0_BYTES>();
    let (acts, _) = g.a.as_chunks::<AB>();
    let arow = |t: usize| acts.get(t * g.nb..(t + 1) * g.nb).unwrap_or(&[]);
    let mut sums = [[0i32; Q5_SUM_BLOCKS]; TILE_TOKENS];
    for (ci, chunk) in blocks.chunks(nb * Q5_CHUNK_GROUPS).enumerate() {
        let col0 = ci * Q5_CHUNK_GROUPS * 8;
        let mut t0 = 0;
        while t0 < g.n_tok {
            let tt = (g.n_tok - t0).min(TILE_TOKENS);
            let mut a: [&[[u8; AB]]; TILE_TOKENS] = [&[]; TILE_TOKENS];
            for t in 0..tt {
                a[t] = arow(t0 + t);
                for (o, ab) in sums[t].iter_mut().zip(a[t]) {
                    *o = _mm256_cvtsi256_si32(_mm256_slli_epi32::<4>(block_sum(ab)));
                }
            }
            let s: [&[i32]; TILE_TOKENS] =
                std::array::from_fn(|t| &sums[t][..a[t].len().min(Q5_SUM_BLOCKS)]);
            for (gi, group) in chunk.chunks_exact(nb).enumerate() {
                let col = col0 + gi * 8;
                if tt == TILE_TOKENS {
                    let y = tile_q5::<TILE_TOKENS>(group, a, s);
                    for (t, v) in y.into_iter().enumerate() {
                        store(out, (t0 + t) * g.out_stride + col, v);
                    }
                } else {
                    for t in 0..tt {
                        let [v] = tile_q5::<1>(group, [a[t]], [s[t]]);
                        store(out, (t0 + t) * g.out_stride + col, v);
                    }
                }
            }
            t0 += tt;
        }
    }
}

/// The packed product of [`crate::packed::packed_gemm`].
///
/// # Safety
///
/// The CPU must support AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn gemm(g: &PackedArgs<'_>, out: &mut [f32]) {
    match g.format {
        // SAFETY: this function runs with AVX2, FMA and F16C.
        PackedFormat::Q8_0 => unsafe { super::q8_avx2::gemm_q8(g, out) },
        // SAFETY: this function runs with AVX2, FMA and F16C.
        PackedFormat::Q1_0 => unsafe { super::q1_avx2::gemm(g, out) },
        // SAFETY: this function runs with AVX2, FMA and F16C.
        PackedFormat::NVFP4 => unsafe { super::nv_avx2::gemm(g, out) },
        PackedFormat::Q5_0 => gemm_q5(g, out),
        PackedFormat::Q4_0
        | PackedFormat::Q4_1
        | PackedFormat::Q5_1
        | PackedFormat::IQ4NL
        | PackedFormat::MXFP4
        | PackedFormat::IQ4XS => {
            // SAFETY: this function runs with AVX2, FMA and F16C.
            unsafe { super::q4_avx2::gemm(g, out) }
        }
        PackedFormat::Q4K
        | PackedFormat::Q5K
        | PackedFormat::Q6K
        | PackedFormat::Q2K
        | PackedFormat::Q3K => {
            // SAFETY: this function runs with AVX2, FMA and F16C.
            unsafe { super::k_avx2::gemm(g, out) }
        }
    }
}
