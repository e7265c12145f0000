//! AVX2 kernel of [`crate::packed`]: one register holds the running sums
//! of 8 weight rows, and a tile runs one 8-row group against `T` tokens.
//! Q8_0 runs the signed tile below ([`tile_q8`]); Q5_0 rebuilds each
//! step's quants plus 16 from its bit planes and runs an unsigned tile
//! ([`tile_q5`]) that needs no sign trick, in its own loop ([`gemm_q5`])
//! that shares each activation block's sum across a chunk of groups. Both
//! end each block the same way ([`scale_block`]).
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
//! 128). The float steps are exactly the scalar twin's.

use std::arch::x86_64::*;

use crate::blocks::BlockQ8_0;
use crate::packed_layout::{PackedArgs, PackedFormat, Q5_0_BYTES, Q8_0_BYTES, SCALE_BYTES, STEPS};

/// Activation block bytes.
pub(super) const AB: usize = BlockQ8_0::BYTES;

/// Tokens per tile (measured best of 2–6 on the 1536 × 576 and 576 × 1536
/// Q8_0 products: 4 fills the 16 registers without spilling).
pub(super) const TILE_TOKENS: usize = 4;

/// 32 bytes of `b` from byte `at` (zeros if out of range, which the fixed
/// layouts rule out).
#[inline(always)]
pub(super) fn bytes32<const B: usize>(b: &[u8; B], at: usize) -> &[u8; 32] {
    match b
        .get(at..at + 32)
        .and_then(|s| <&[u8; 32]>::try_from(s).ok())
    {
        Some(s) => s,
        None => &[0; 32],
    }
}

/// Loads 32 bytes.
#[inline]
#[target_feature(enable = "avx2")]
pub(super) fn load(b: &[u8; 32]) -> __m256i {
    // SAFETY: 32 readable bytes; `loadu` needs no alignment.
    unsafe { _mm256_loadu_si256(b.as_ptr().cast()) }
}

/// How far ahead of the block being read [`prefetch_ahead`] asks for
/// weight bytes. Decode streams every weight matrix from DRAM once per
/// token; without the hint the hardware prefetcher fell behind on the
/// packed k-quant blocks (two streams per Q6_K block: nibbles and high
/// bits), and a `[71680 × 1536]` single-token Q6_K product ran at 5 GB/s
/// on one Zen 3 core instead of 11. 2–8 KiB ahead measured the same on the
/// 1.5B model's decode (docs/PERFORMANCE.md); 4 KiB is the middle.
pub(super) const PREFETCH_BYTES: usize = 4096;

/// Asks for the cache lines [`PREFETCH_BYTES`] past the start of `wb`
/// (one block's worth: the tiles call it once per block, so the hints run
/// a fixed distance ahead of the reads). Only one-token tiles ask: they
/// stream the weights (decode), while a wider tile spends `T` times the
/// work on each byte and is compute-bound, where the hints measured a few
/// percent slower.
#[inline(always)]
pub(super) fn prefetch_ahead<const B: usize>(wb: &[u8; B]) {
    let base = wb.as_ptr().wrapping_add(PREFETCH_BYTES);
    for line in (0..B).step_by(64) {
        // SAFETY: a prefetch is a hint that never faults, whatever the
        // address; the pointer is never dereferenced.
        unsafe { _mm_prefetch::<_MM_HINT_T0>(base.wrapping_add(line).cast()) };
    }
}

/// Q8_0's [`Tiles`].
struct Q8;
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

/// The four activation quants `4k..4k+4` of an `N`-byte activation block
/// whose quants start at byte `OFF`, as one `i32` (0 past the end, which
/// the callers' fixed layouts rule out).
#[inline(always)]
pub(super) fn quad<const OFF: usize, const N: usize>(b: &[u8; N], k: usize) -> i32 {
    let at = OFF + 4 * k;
    match b.get(at..at + 4) {
        Some(q) => i32::from_le_bytes([q[0], q[1], q[2], q[3]]),
        None => 0,
    }
}

/// Block `b` of each of `T` activation rows (a zero block past a row's
/// end, which the callers' checked lengths rule out).
#[inline(always)]
pub(super) fn blocks_at<'a, const N: usize, const T: usize>(
    a: &[&'a [[u8; N]]; T],
    b: usize,
) -> [&'a [u8; N]; T] {
    let mut ab: [&[u8; N]; T] = [&[0; N]; T];
    for t in 0..T {
        if let Some(x) = a[t].get(b) {
            ab[t] = x;
        }
    }
    ab
}

/// The end of a block for `T` tokens: `acc[t] = acc[t] + (d_w · d_x[t]) ·
/// f32(sumi[t])`, with the 8 row scales `d_w` at the front of `wb` and
/// each token's scale at the front of its activation block.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn scale_block<const B: usize, const T: usize>(
    wb: &[u8; B],
    ab: [&[u8; AB]; T],
    sumi: [__m256i; T],
    acc: &mut [__m256; T],
) {
    let mut scales = [0u8; SCALE_BYTES];
    scales.copy_from_slice(&wb[..SCALE_BYTES]);
    // SAFETY: 16 readable bytes; `loadu` needs no alignment.
    let dw = _mm256_cvtph_ps(unsafe { _mm_loadu_si128(scales.as_ptr().cast()) });
    for t in 0..T {
        let bits = u16::from_le_bytes([ab[t][0], ab[t][1]]);
        let dx = _mm256_cvtph_ps(_mm_set1_epi16(bits as i16));
        let d = _mm256_mul_ps(dw, dx);
        acc[t] = _mm256_add_ps(acc[t], _mm256_mul_ps(d, _mm256_cvtepi32_ps(sumi[t])));
    }
}

/// One Q8_0 group (`w`: its `nb` blocks) times `T` activation rows;
/// returns the 8 row results of each token.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn tile_q8<const T: usize>(w: &[[u8; Q8_0_BYTES]], a: [&[[u8; AB]]; T]) -> [__m256; T] {
    let ones = _mm256_set1_epi16(1);
    let mut acc = [_mm256_setzero_ps(); T];
    for (b, wb) in w.iter().enumerate() {
        if T == 1 {
            prefetch_ahead(wb);
        }
        let ab = blocks_at(&a, b);
        let mut sumi = [_mm256_setzero_si256(); T];
        for k in 0..STEPS {
            let wq = load(bytes32(wb, SCALE_BYTES + 32 * k));
            let aw = _mm256_sign_epi8(wq, wq);
            for t in 0..T {
                let x = _mm256_set1_epi32(quad::<2, AB>(ab[t], k));
                let p = _mm256_maddubs_epi16(aw, _mm256_sign_epi8(x, wq));
                sumi[t] = _mm256_add_epi32(sumi[t], _mm256_madd_epi16(p, ones));
            }
        }
        scale_block(wb, ab, sumi, &mut acc);
    }
    acc
}

/// The Q5_0 tile: [`tile_q8`]'s sums without the sign trick. The quants
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

/// Q5_0's loop over groups and tokens. Unlike [`gemm_tiles`], groups go in
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

/// Writes one token's 8 row results at `out[at..at + 8]` (skipped if
/// `out` is too short, which the caller's checks rule out).
#[inline]
#[target_feature(enable = "avx2")]
pub(super) fn store(out: &mut [f32], at: usize, v: __m256) {
    if let Some(o) = out.get_mut(at..at + 8) {
        // SAFETY: `o` is 8 writable f32s; `storeu` needs no alignment.
        unsafe { _mm256_storeu_ps(o.as_mut_ptr(), v) };
    }
}

/// A packed format's register tiles: one group of `B`-byte blocks against
/// `T` tokens or one token of `A`-byte activation blocks. The AVX2 tiles
/// take [`TILE_TOKENS`] tokens; the VNNI k-quant tiles
/// ([`super::packed_vnni::TILE`]) take 8.
pub(super) trait Tiles<const B: usize, const A: usize, const T: usize> {
    /// The 8 row results of each of `T` tokens.
    ///
    /// # Safety
    ///
    /// The CPU must support the tile's features: AVX2, FMA and F16C, and
    /// AVX-512 F/BW/VL/VNNI for the VNNI tiles.
    unsafe fn tile(w: &[[u8; B]], a: [&[[u8; A]]; T]) -> [__m256; T];

    /// The 8 row results of one token.
    ///
    /// # Safety
    ///
    /// As [`Tiles::tile`].
    unsafe fn tile1(w: &[[u8; B]], a: &[[u8; A]]) -> __m256;
}

impl Tiles<Q8_0_BYTES, AB, TILE_TOKENS> for Q8 {
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn tile(w: &[[u8; Q8_0_BYTES]], a: [&[[u8; AB]]; TILE_TOKENS]) -> [__m256; TILE_TOKENS] {
        tile_q8::<TILE_TOKENS>(w, a)
    }

    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn tile1(w: &[[u8; Q8_0_BYTES]], a: &[[u8; AB]]) -> __m256 {
        let [v] = tile_q8::<1>(w, [a]);
        v
    }
}

/// Every group of `g.w` against every token, `T` at a time, then one at a
/// time (the loop of Q8_0, Q4_K and Q6_K on AVX2, and of the k-quants on
/// VNNI, where the caller is a VNNI function and `K`'s tiles inline into
/// it; Q5_0 has its own, [`gemm_q5`]).
///
/// # Safety
///
/// The CPU must support what `K`'s tiles need (see [`Tiles::tile`]).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn gemm_tiles<
    K: Tiles<B, A, T>,
    const B: usize,
    const A: usize,
    const T: usize,
>(
    g: &PackedArgs<'_>,
    out: &mut [f32],
) {
    let nb = g.nb.max(1);
    let (blocks, _) = g.w.as_chunks::<B>();
    let (acts, _) = g.a.as_chunks::<A>();
    let arow = |t: usize| acts.get(t * g.nb..(t + 1) * g.nb).unwrap_or(&[]);
    let full = g.n_tok / T * T;
    for (gi, group) in blocks.chunks_exact(nb).enumerate() {
        let col = gi * 8;
        for t0 in (0..full).step_by(T) {
            let a: [&[[u8; A]]; T] = std::array::from_fn(|t| arow(t0 + t));
            // SAFETY: the caller's CPU guarantee (also for `tile1` below).
            let y = unsafe { K::tile(group, a) };
            for (t, v) in y.into_iter().enumerate() {
                store(out, (t0 + t) * g.out_stride + col, v);
            }
        }
        for t in full..g.n_tok {
            // SAFETY: as above.
            let v = unsafe { K::tile1(group, arow(t)) };
            store(out, t * g.out_stride + col, v);
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
        PackedFormat::Q8_0 => unsafe { gemm_tiles::<Q8, Q8_0_BYTES, AB, TILE_TOKENS>(g, out) },
        PackedFormat::Q5_0 => gemm_q5(g, out),
        // SAFETY: this function runs with AVX2, FMA and F16C.
        PackedFormat::Q4K | PackedFormat::Q6K => unsafe { super::packed_k_avx2::gemm(g, out) },
    }
}
