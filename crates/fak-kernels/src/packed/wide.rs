//! Packed Q3_K and Q5_K over many tokens on the AVX2 tiles of
//! [`super::k_avx2`] and the VNNI tiles of [`super::k_vnni`]: each group's
//! quants unpacked once per product instead of once per tile of tokens.
//!
//! A tile's step reads 8 rows × 4 quants of one group block. Q4_K's are a
//! masked load; Q5_K's join a nibble and a bit of a high-bit plane, Q3_K's
//! two bits of one plane and one of another (5–8 instructions), and that
//! work is done again for every tile of 4 tokens, beside each token's
//! `maddubs`, broadcast and add. So a product of [`MIN_TOKENS`] or more
//! writes each group, one at a time, into a scratch of wide blocks and
//! runs every token tile over those:
//!
//! ```text
//!   wide block (one super-block of an 8-row group):
//!     | the packed group block, as it is (B bytes: scales, mins, d) |
//!     | step 0 (32 B) | step 1 | ... | step 63 |      (2,048 B)
//!   step k: the packed tile's own unpacked quants of step k, stored
//!   tile:   step = one load; scales, offsets and the float term read the
//!           packed block at the head, as the packed tile does
//! ```
//!
//! On one Zen 3 core, a `[8960 × 1536]` product of 64 tokens
//! (`GEMM_SPEED_ONLY=q5_k GEMM_SPEED_SHAPE=8960,1536,64 cargo run
//! --release -p fak-kernels --example gemm_speed`, alternated) ran at 61–68
//! against 41–44 G multiply-adds/s for Q5_K and 59 against 45–46 for
//! Q3_K. Q6_K (54–56 either way) and Q2_K (55–63 either way) gained
//! nothing: Q2_K's step is one shift and a mask, and Q6_K's tile is held
//! by its `i16` runs of two steps (a `madd` per two `maddubs`), so they
//! stay on the packed tiles.
//!
//! The stored steps are the packed tile's step values, so every integer
//! sum and every float step is the packed tile's: the outputs are the
//! same bits (and so the scalar dot product's), whatever the number of
//! tokens. Nothing is kept between products; the model holds the packed
//! blocks only.
//!
//! The VNNI tiles ([`super::k_vnni`]) read wide blocks too, two groups
//! side by side ([`gemm_vnni`]), from [`MIN_TOKENS_VNNI`] tokens on: their
//! tiles take 8 tokens, so unpacking costs them half as much per token.
//! On a Zen 4 (2 threads, `fak bench model`, alternated 3×), the 1.5B
//! Qwen2.5-Coder's prefill of 256 tokens ran 1.08× faster for Q5_K_M
//! (180–185 against 158–171 tok/s) and 1.10× for Q3_K_M (169–185
//! against 165–167).

use std::arch::x86_64::*;
use std::cell::RefCell;
use std::marker::PhantomData;

use super::k_avx2::{group_tiles, KSteps, AB, Q3K, Q5K};
use super::k_vnni::{load_pair, pair_groups, pair_tiles, PairSteps};
use super::layout::{q3k, q5k, PackedArgs, K_STEPS};
use super::tiles::{bytes32, load, prefetch_ahead, Weights};

/// Fewest tokens whose product takes the wide blocks. Fewer (a verifying
/// pass of up to 8 tokens, decode) unpack in the tiles: unpacking a group
/// costs about one tile's unpacking plus the stores, which pays once it
/// saves a few tiles (at 16 tokens, the `[8960 × 1536]` Q3_K product
/// above: 41 against 29 G multiply-adds/s).
pub(super) const MIN_TOKENS: usize = 16;

/// [`MIN_TOKENS`] of the VNNI tiles, whose tiles take 8 tokens each, so
/// that unpacking in the tiles costs half as much per token. On one Zen 4
/// core, the `[8960 × 1536]` products (medians of 3–5, alternated) of 16
/// tokens ran at 2.5 ms wide against 1.9 packed (Q5_K), 32 tokens at 4.0
/// against 4.1 (Q5_K) and 3.9 against 3.9 (Q3_K), 48 tokens at 5.4
/// against 6.0 (Q5_K) and 5.5 against 5.9 (Q3_K), 64 tokens at 6.9
/// against 7.9 (Q5_K) and 7.0 against 7.6 (Q3_K).
pub(super) const MIN_TOKENS_VNNI: usize = 40;

/// Unpacked bytes per super-block of a group: 64 steps of 32.
pub(super) const U: usize = 32 * K_STEPS;

/// A packed k-quant format `S`, read from wide blocks.
pub(super) struct Wide<S>(PhantomData<S>);

/// `KSteps` of `Wide<$s>` on blocks of `$b + U` bytes: the step is a load
/// from the unpacked tail; everything else is `$s`'s, on the head.
macro_rules! wide_steps {
    ($s:ty, $b:expr) => {
        impl Wide<$s> {
            /// The packed group block at the head of a wide one.
            #[inline(always)]
            fn head(b: &[u8; $b + U]) -> &[u8; $b] {
                match b.first_chunk::<{ $b }>() {
                    Some(h) => h,
                    None => &[0; $b],
                }
            }
        }

        impl KSteps<{ $b + U }> for Wide<$s> {
            const SUB_STEPS: usize = <$s as KSteps<{ $b }>>::SUB_STEPS;
            const I16_STEPS: usize = <$s as KSteps<{ $b }>>::I16_STEPS;
            const PAIR_STREAMED: bool = false;

            #[inline]
            #[target_feature(enable = "avx2")]
            unsafe fn step(b: &[u8; $b + U], k: usize) -> __m256i {
                load(bytes32(b, $b + 32 * k))
            }

            #[inline]
            #[target_feature(enable = "avx2")]
            unsafe fn scales(b: &[u8; $b + U], j: usize) -> __m256i {
                // SAFETY: the caller's promise (AVX2), passed on.
                unsafe { <$s as KSteps<{ $b }>>::scales(Self::head(b), j) }
            }

            #[inline]
            #[target_feature(enable = "avx2")]
            unsafe fn offsets(b: &[u8; $b + U], a: &[u8; AB]) -> __m256i {
                // SAFETY: as above.
                unsafe { <$s as KSteps<{ $b }>>::offsets(Self::head(b), a) }
            }

            #[inline]
            #[target_feature(enable = "avx2")]
            unsafe fn offset_pair(b: &[u8; $b + U], m: usize) -> __m256i {
                // SAFETY: as above.
                unsafe { <$s as KSteps<{ $b }>>::offset_pair(Self::head(b), m) }
            }

            const OFFSET_SHIFT: i32 = <$s as KSteps<{ $b }>>::OFFSET_SHIFT;

            #[inline]
            #[target_feature(enable = "avx2,f16c")]
            unsafe fn term(b: &[u8; $b + U], dx: __m256, sumi: __m256i, summ: __m256i) -> __m256 {
                // SAFETY: the caller's promise (AVX2 and F16C), passed on.
                unsafe { <$s as KSteps<{ $b }>>::term(Self::head(b), dx, sumi, summ) }
            }
        }
    };
}

wide_steps!(Q3K, q3k::BYTES);
wide_steps!(Q5K, q5k::BYTES);

/// `PairSteps` of `Wide<$s>`: two groups' stored steps side by side.
macro_rules! wide_pair_steps {
    ($s:ty, $b:expr) => {
        impl PairSteps<{ $b + U }> for Wide<$s> {
            #[inline]
            #[target_feature(enable = "avx2,avx512f,avx512bw")]
            unsafe fn step16(b: [&[u8; $b + U]; 2], k: usize) -> __m512i {
                load_pair(b, $b + 32 * k)
            }
        }
    };
}

wide_pair_steps!(Q3K, q3k::BYTES);
wide_pair_steps!(Q5K, q5k::BYTES);

thread_local! {
    /// Each thread's wide blocks of one group, reused across products.
    static SCRATCH: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// `out = W · a` for every group of `g` (format `S`, packed blocks of `B`
/// bytes; `W = B + U`), each group unpacked once into wide blocks, then
/// every token tile over them.
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn gemm<S: KSteps<B>, const B: usize, const W: usize>(
    g: &PackedArgs<'_>,
    out: &mut [f32],
) where
    Wide<S>: KSteps<W>,
{
    let nb = g.nb.max(1);
    let (blocks, _) = g.w.as_chunks::<B>();
    for_wide::<S, B, W>(blocks.chunks_exact(nb), nb, |gi, wide| {
        group_tiles::<Wide<S>, W>(g, wide, gi * 8, Weights::Cached, out);
    });
}

/// [`gemm`] on the VNNI tiles: every pair of groups of `g` unpacked
/// once into wide blocks, then every token tile over them
/// ([`pair_tiles`]).
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
pub(super) fn gemm_vnni<S: KSteps<B>, const B: usize, const W: usize>(
    g: &PackedArgs<'_>,
    out: &mut [f32],
) where
    Wide<S>: PairSteps<W>,
{
    let nb = g.nb.max(1);
    let (blocks, _) = g.w.as_chunks::<B>();
    for_wide::<S, B, W>(blocks.chunks(2 * nb), 2 * nb, |pi, wide| {
        pair_tiles::<Wide<S>, W>(g, pair_groups(wide, nb), pi * 16, Weights::Cached, out);
    });
}

/// Each run of packed blocks of `runs` (at most `most` blocks) unpacked
/// into this thread's wide blocks, then `tiles(i, wide)` for run `i`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn for_wide<'a, S: KSteps<B>, const B: usize, const W: usize>(
    runs: impl Iterator<Item = &'a [[u8; B]]>,
    most: usize,
    mut tiles: impl FnMut(usize, &[[u8; W]]),
) {
    SCRATCH.with_borrow_mut(|scratch| {
        if scratch.len() < most * W {
            scratch.resize(most * W, 0);
        }
        let (wide, _) = scratch.as_chunks_mut::<W>();
        for (i, run) in runs.enumerate() {
            let wide = &mut wide[..run.len().min(most)];
            for (wb, dst) in run.iter().zip(wide.iter_mut()) {
                prefetch_ahead(wb);
                unpack::<S, B, W>(wb, dst);
            }
            tiles(i, wide);
        }
    });
}

/// Writes `wb` and its 64 unpacked steps into `dst`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn unpack<S: KSteps<B>, const B: usize, const W: usize>(wb: &[u8; B], dst: &mut [u8; W]) {
    let (head, tail) = dst.split_at_mut(B.min(W));
    head.copy_from_slice(wb);
    for (k, s) in tail.chunks_exact_mut(32).take(K_STEPS).enumerate() {
        // SAFETY: this function runs with AVX2 enabled.
        let u = unsafe { S::step(wb, k) };
        // SAFETY: `s` is 32 writable bytes; `storeu` needs no alignment.
        unsafe { _mm256_storeu_si256(s.as_mut_ptr().cast(), u) };
    }
}
