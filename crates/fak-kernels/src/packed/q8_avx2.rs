//! AVX2 Q8_0 tiles of [`crate::packed`]: one 8-row group against 1 to
//! [`Q8_TILE`] tokens in one pass over the group's blocks.
//!
//! ```text
//!   per block b, step k (values 4k..4k+4 of the block):
//!     w   = 32 bytes: rows 0..8 × 4 quants          (loaded once per tile)
//!     |w| = sign(w, w)
//!     per token t:  x = the token's 4 quants, broadcast to all 8 lanes
//!                   s[t] += madd(maddubs(|w|, sign(x, w)), 1)   exact i32
//!   per token t:    acc[t] = acc[t] + (d_w · d_x[t]) · f32(s[t])
//! ```
//!
//! `|w| · sign(x, w)` is `w · x` for `x` in `-127..=127` (what the Q8_0
//! activation quantizer produces); pairs of such products stay below
//! `i16::MAX` even for a weight of `-128` (read by `maddubs` as unsigned
//! 128). The float steps are exactly the scalar twin's, so a token's
//! result does not depend on the tile it lands in.
//!
//! A token's step costs four vector operations (`sign`, `maddubs`, `madd`,
//! `add`); the shared load and `|w|` of each step are spread over the
//! tile's tokens, so a product of `n` tokens runs as tiles of up to 8
//! (`n = 6` is one 6-token tile, not a 4-token tile and two 1-token ones).
//! The tile reads its blocks through pointers checked once per tile (the
//! bounds-checked, zero-block-on-miss reads of [`super::tiles`]
//! cost selects and spills in this loop).

use std::arch::x86_64::*;

use super::layout::{PackedArgs, Q8_0_BYTES, SCALE_BYTES, STEPS};
use super::tiles::{act_rows, bytes32, load, prefetch_ahead, quad, scale_block, store, AB};
use crate::fp::f16_to_f32;

/// Most tokens in one tile: eight `i32` sums, the step's weights, `|w|`,
/// a broadcast and a product fill 13 of the 16 registers; the 8 float
/// accumulators live on the stack between blocks.
pub(super) const Q8_TILE: usize = 8;

/// Whether a tile asks for the weight bytes ahead of its reads
/// ([`prefetch_ahead`]).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Prefetch {
    /// Hints [`super::tiles::PREFETCH_BYTES`] ahead of each block.
    Ahead,
    /// No hints.
    Off,
}

/// Weight bytes of a chunk of groups: each token tile converts its
/// activation scales to f32 once per chunk ([`Scales`]), and the chunk's
/// weights stay in L2 across the token tiles.
const CHUNK_BYTES: usize = 64 * 1024;

/// Blocks per token whose f32 scales a token tile keeps in its thread's
/// table (rows of up to 16,384 values: 16 KiB for 8 tokens); a tile
/// converts later blocks' scales itself.
const DX_BLOCKS: usize = 512;

/// A token tile's activation scales as f32, `[t][b]`: the same values as
/// the f16 at the front of each activation block (the conversion is
/// exact), converted once per chunk of groups instead of once per group.
type Scales = [[f32; DX_BLOCKS]; Q8_TILE];

/// One Q8_0 group (`w`: its blocks) times `T` activation rows (`a`: each
/// at least `w.len()` blocks; a shorter row makes the tile return zeros,
/// which the callers' checked lengths rule out); the 8 row results of
/// each token.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn tile<const T: usize>(
    w: &[[u8; Q8_0_BYTES]],
    a: [&[[u8; AB]]; T],
    dx: &Scales,
    prefetch: Prefetch,
) -> [__m256; T] {
    let ones = _mm256_set1_epi16(1);
    let mut acc = [_mm256_setzero_ps(); T];
    let nb = w.len();
    if a.iter().any(|r| r.len() < nb) {
        return acc;
    }
    let wp = w.as_ptr();
    let ap: [*const [u8; AB]; T] = std::array::from_fn(|t| a[t].as_ptr());
    for b in 0..nb {
        // SAFETY: `b < nb = w.len()`.
        let wb = unsafe { &*wp.add(b) };
        if prefetch == Prefetch::Ahead {
            prefetch_ahead(wb);
        }
        // SAFETY: `b < nb <= a[t].len()` for every `t` (checked above).
        let ab: [&[u8; AB]; T] = std::array::from_fn(|t| unsafe { &*ap[t].add(b) });
        let mut sumi = [_mm256_setzero_si256(); T];
        for k in 0..STEPS {
            // SAFETY: bytes `16 + 32k .. 48 + 32k` of the 272-byte block
            // (`k < 8`); `loadu` needs no alignment.
            let wq = unsafe { _mm256_loadu_si256(wb.as_ptr().add(SCALE_BYTES + 32 * k).cast()) };
            let aw = _mm256_sign_epi8(wq, wq);
            for t in 0..T {
                // SAFETY: bytes `2 + 4k .. 6 + 4k` of the 34-byte block
                // (`k < 8`); `read_unaligned` needs no alignment.
                let q = unsafe { ab[t].as_ptr().add(2 + 4 * k).cast::<i32>().read_unaligned() };
                let x = _mm256_set1_epi32(q);
                let p = _mm256_maddubs_epi16(aw, _mm256_sign_epi8(x, wq));
                sumi[t] = _mm256_add_epi32(sumi[t], _mm256_madd_epi16(p, ones));
            }
        }
        // The end of the block, as `scale_block`: `acc + (d_w · d_x) ·
        // f32(s)`, with `d_x` from the table while it lasts.
        // SAFETY: bytes `0..16` of the block; `loadu` needs no alignment.
        let dw = _mm256_cvtph_ps(unsafe { _mm_loadu_si128(wb.as_ptr().cast()) });
        for t in 0..T {
            let dxt = match dx[t].get(b) {
                Some(&d) => _mm256_set1_ps(d),
                None => _mm256_set1_ps(f16_to_f32(u16::from_le_bytes([ab[t][0], ab[t][1]]))),
            };
            let d = _mm256_mul_ps(dw, dxt);
            acc[t] = _mm256_add_ps(acc[t], _mm256_mul_ps(d, _mm256_cvtepi32_ps(sumi[t])));
        }
    }
    acc
}

/// One group against `T` tokens from `t0`, stored at column `col`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn run_tile<const T: usize>(
    g: &PackedArgs<'_>,
    group: &[[u8; Q8_0_BYTES]],
    (t0, col): (usize, usize),
    dx: &Scales,
    prefetch: Prefetch,
    out: &mut [f32],
) {
    let (acts, _) = g.a.as_chunks::<AB>();
    let a: [&[[u8; AB]]; T] = act_rows(acts, g.nb, t0);
    let y = tile::<T>(group, a, dx, prefetch);
    for (t, v) in y.into_iter().enumerate() {
        store(out, (t0 + t) * g.out_stride + col, v);
    }
}

/// One group against one token: the one-token tile as it was before the
/// multi-token tiles (bounds-checked reads, scale converted per block,
/// prefetch on every block), kept for decode's products, where it
/// measured faster than [`tile`]`::<1>` with its scale table
/// (docs/PERFORMANCE.md).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn tile_one(w: &[[u8; Q8_0_BYTES]], a: &[[u8; AB]]) -> __m256 {
    let ones = _mm256_set1_epi16(1);
    let mut acc = [_mm256_setzero_ps(); 1];
    for (wb, ab) in w.iter().zip(a) {
        prefetch_ahead(wb);
        let mut sumi = [_mm256_setzero_si256(); 1];
        for k in 0..STEPS {
            let wq = load(bytes32(wb, SCALE_BYTES + 32 * k));
            let aw = _mm256_sign_epi8(wq, wq);
            let x = _mm256_set1_epi32(quad::<2, AB>(ab, k));
            let p = _mm256_maddubs_epi16(aw, _mm256_sign_epi8(x, wq));
            sumi[0] = _mm256_add_epi32(sumi[0], _mm256_madd_epi16(p, ones));
        }
        scale_block(wb, [ab], sumi, &mut acc);
    }
    acc[0]
}

/// The Q8_0 product on AVX2: the groups in chunks of [`CHUNK_BYTES`];
/// per chunk, the tokens in tiles of [`Q8_TILE`] and one tile of the
/// rest, each tile's scales converted once ([`Scales`]) and run against
/// every group of the chunk. One-token tiles always prefetch, and wider
/// tiles do on a chunk's first token tile, whatever the product's size: a
/// decode step of a few tokens streams every matrix from DRAM (a 2-thread
/// step's chunks of rows are 0.1–4 MiB), and in prefill the later tiles
/// find the chunk in cache (docs/PERFORMANCE.md, "the Q8_0 weight prefetch on every product":
/// fleet probe 1.02× in three alternated pairs). A one-token product
/// (decode) runs [`tile_one`] over the groups instead.
///
/// # Safety
///
/// The CPU must support AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn gemm_q8(g: &PackedArgs<'_>, out: &mut [f32]) {
    let nb = g.nb.max(1);
    let (blocks, _) = g.w.as_chunks::<Q8_0_BYTES>();
    let (acts, _) = g.a.as_chunks::<AB>();
    if g.n_tok == 1 {
        let a = acts.get(..g.nb).unwrap_or(&[]);
        for (gi, group) in blocks.chunks_exact(nb).enumerate() {
            store(out, gi * 8, tile_one(group, a));
        }
        return;
    }
    DX.with_borrow_mut(|dx| {
        // SAFETY: the caller's CPU guarantee.
        unsafe { tiles(g, dx, out) }
    });
}

thread_local! {
    /// Each thread's [`Scales`], zeroed once per thread rather than once
    /// per product (16 KiB, about 1,700 times per 2-thread decode step of
    /// SmolLM2). A token tile reads only the entries it has just written
    /// (blocks `0..nb` of its own rows), so what earlier products left is
    /// never read.
    static DX: std::cell::RefCell<Box<Scales>> =
        std::cell::RefCell::new(Box::new([[0.0; DX_BLOCKS]; Q8_TILE]));
}

/// The multi-token part of [`gemm_q8`], with the thread's scale table.
///
/// # Safety
///
/// The CPU must support AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn tiles(g: &PackedArgs<'_>, dx: &mut Scales, out: &mut [f32]) {
    let nb = g.nb.max(1);
    let (blocks, _) = g.w.as_chunks::<Q8_0_BYTES>();
    let (acts, _) = g.a.as_chunks::<AB>();
    let chunk_groups = (CHUNK_BYTES / (nb * Q8_0_BYTES)).max(1);
    for (ci, chunk) in blocks.chunks(nb * chunk_groups).enumerate() {
        let mut t0 = 0;
        while t0 < g.n_tok {
            let left = g.n_tok - t0;
            let tt = left.min(Q8_TILE);
            for (t, row) in dx.iter_mut().enumerate().take(tt) {
                let ab = acts
                    .get((t0 + t) * g.nb..(t0 + t + 1) * g.nb)
                    .unwrap_or(&[]);
                for (d, b) in row.iter_mut().zip(ab) {
                    *d = f16_to_f32(u16::from_le_bytes([b[0], b[1]]));
                }
            }
            let pf = if left == 1 || t0 == 0 {
                Prefetch::Ahead
            } else {
                Prefetch::Off
            };
            for (gi, group) in chunk.chunks_exact(nb).enumerate() {
                let at = (t0, (ci * chunk_groups + gi) * 8);
                match tt {
                    1 => run_tile::<1>(g, group, at, dx, pf, out),
                    2 => run_tile::<2>(g, group, at, dx, pf, out),
                    3 => run_tile::<3>(g, group, at, dx, pf, out),
                    4 => run_tile::<4>(g, group, at, dx, pf, out),
                    5 => run_tile::<5>(g, group, at, dx, pf, out),
                    6 => run_tile::<6>(g, group, at, dx, pf, out),
                    7 => run_tile::<7>(g, group, at, dx, pf, out),
                    _ => run_tile::<Q8_TILE>(g, group, at, dx, pf, out),
                }
            }
            t0 += tt;
        }
    }
}
