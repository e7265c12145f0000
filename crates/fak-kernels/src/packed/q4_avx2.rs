//! AVX2 kernels of the packed Q4_0, IQ4_NL, Q4_1 and IQ4_XS products
//! (`super::q4`, IQ4_XS's layout in `super::k`): one register lane per
//! weight row, a tile of one 8-row group against 1 to [`Q4_TILE`]
//! tokens.
//!
//! ```text
//!   per block b:
//!     per chunk c (0..4):  n   = 32 bytes of nibbles (8 rows × 2 steps × 4)
//!                          u0  = n & 15, u1 = (n >> 4) & 15   steps 2c, 2c+1
//!       per token t:       s[t] += maddubs(u0, x_t[2c]) + maddubs(u1, x_t[2c+1])
//!                                                       (i16, exact)
//!     per token t:         sumi = madd(s[t], 1)                  exact i32
//!       Q4_0:              sumi −= 8 · Σ x_t   (from the sums table)
//!                          acc[t] = acc[t] + (f32(sumi) · d_w) · d_x
//!       Q4_1:              acc[t] = acc[t] + ((d_w · d_x) · f32(sumi) + m_w · s_x)
//! ```
//!
//! The stored nibbles `u` are unsigned (below 16) and the activations
//! signed, so `maddubs` takes them as they are: a pair sum is at most
//! `2 · 15 · 128 = 3840` in size, and the 8 steps of a block add up to at
//! most 30,720, exactly in `i16`. Q4_0's offset of 8 comes off in
//! integers (`Σ (u − 8) · x = Σ u · x − 8 · Σ x`), with each activation
//! block's `8 · Σ x` computed once per product ([`XSums`]) and shared by
//! every group. The float steps are each format's scalar `vec_dot`'s, in
//! its order and without fused multiply-adds, so every element has the
//! scalar twin's bits.
//!
//! IQ4_NL's nibbles index 16 signed levels (−127 to 113): a byte shuffle
//! turns them into levels, and a pair of level · activation products can
//! reach 2 · 127 · 128, too large for `maddubs` with the levels as its
//! unsigned side. [`tile_levels`] feeds it `|x|` (128 for −128, exactly,
//! as unsigned) against the levels with `x`'s sign, and widens each
//! step's pairs to `i32` at once:
//!
//! ```text
//!   per chunk c:  w0, w1 = levels of u0, u1        (shuffle, once per tile)
//!     per token:  s[t] += madd(maddubs(|x0|, sign(w0, x0)), 1)
//!                       + madd(maddubs(|x1|, sign(w1, x1)), 1)   exact i32
//!                 acc[t] = acc[t] + (d_w · d_x) · f32(s[t])
//! ```
//!
//! IQ4_XS runs the same steps per 32-value sub-block of its 256-value
//! super-blocks ([`tile_scaled`]), each sub-block's sum scaled by its own
//! 6-bit scale: `acc + (d_w · d_x · f32(ls)) · f32(S)`.
//!
//! The loop is the Q8_0 one's (`q8_avx2`): groups in chunks of
//! [`CHUNK_BYTES`], token tiles inside a chunk, one-token products (decode)
//! straight over the groups with the weights asked for ahead.

use std::arch::x86_64::*;

use super::layout::{iq4xs, q4, PackedArgs, PackedFormat, QK, QK_K, STEPS};
use super::tiles::{act_rows, bit_to, blocks_at, bytes32, load, prefetch_ahead, store, Weights};
use crate::blocks::{BlockQ8_0, BlockQ8_1, BlockQ8_K, IQ4_LEVELS, MXFP4_LEVELS};

/// Most tokens in one tile: eight `i16` sums, the two steps' nibbles, a
/// mask and a broadcast fill 12 of the 16 registers; the float
/// accumulators live on the stack between blocks.
pub(super) const Q4_TILE: usize = 8;

/// Weight bytes of a chunk of groups: the chunk's weights stay in L2
/// across the token tiles, and a tile's activations in L1 across the
/// chunk's groups.
const CHUNK_BYTES: usize = 64 * 1024;

/// Selected weights above this many bytes are streamed from beyond the
/// core's L2, so the first token tile of each chunk asks for them ahead.
const PREFETCH_MIN_BYTES: usize = 1 << 20;

/// Entries of the sums table ([`sums_at`]) a product keeps on the stack
/// (one token of up to 128 blocks: decode's rows of up to 4,096 values);
/// larger products keep them in a per-thread buffer ([`XSUMS`]).
const STACK_SUMS: usize = 128 * Q4_TILE;

/// What a format's stored nibbles stand for.
pub(super) enum Nibbles {
    /// Themselves (below 16), the unsigned side of the byte products.
    Plain,
    /// Indices of IQ4_NL's 16 signed levels ([`IQ4_LEVELS`]).
    Levels,
    /// Level indices in 32-value sub-blocks with their own scales:
    /// IQ4_XS's super-blocks, against Q8_K.
    ScaledLevels,
    /// The low 4 bits of 5-bit quants, the fifth in a high-bit plane
    /// ([`Q4Format::HIGH`]): Q5_1.
    Five,
}

/// The float step that ends a block (a sub-block for IQ4_XS) in a
/// format's scalar `vec_dot`, with `s = f32(sumi)`: each tile kind writes
/// it in its own registers from this one description.
pub(super) enum End {
    /// `acc + (s · d_w) · d_x` (Q4_0).
    SumFirst,
    /// `acc + (d_w · d_x) · s` (IQ4_NL).
    ScalesFirst,
    /// `acc + ((d_w · d_x) · s + m_w · s_x)` (Q4_1).
    WithMin,
    /// `acc + (dd · ls) · s`, `dd = d_w · d_x` per super-block and `ls`
    /// the sub-block's scale (IQ4_XS).
    SubScaled,
}

/// A 4-bit packed format and its activation blocks (`B`-byte group
/// blocks, `A`-byte activation blocks).
pub(super) trait Q4Format<const B: usize, const A: usize> {
    /// Byte offset of the nibble chunks in a group block.
    const NIB: usize;
    /// Byte offset of the quants in an activation block.
    const XOFF: usize;
    /// What the nibbles stand for.
    const NIBBLES: Nibbles;
    /// Byte offset of the high-bit plane ([`Nibbles::Five`]; 0 otherwise):
    /// byte `p`, bit `k` is the fifth bit of step `k`'s quant `p`.
    const HIGH: usize = 0;
    /// `o` where `o · Σ x` comes off each block sum of the unsigned
    /// operands: 8 for Q4_0 (`u − 8`), 128 for IQ4_NL on the VNNI tile
    /// (levels + 128), 0 for Q4_1 (the sums table is not made).
    const OFFSET: i32;
    /// The block's float step ([`end`] computes it).
    const END: End;
    /// The 16 levels the nibbles index ([`Nibbles::Levels`] and
    /// [`Nibbles::ScaledLevels`]).
    const LEVELS: [i8; 16] = IQ4_LEVELS;
}

/// The end of one block for one token: `acc` plus the block's term
/// ([`Q4Format::END`]), from the exact `sumi` (offset already taken off),
/// the rows' `d_w` and `m_w` (f32; for IQ4_XS `d_w · d_x` and the
/// sub-block scales) and the activation block `ab` (`d_x` at byte 0, Q8_1's
/// `s_x` at byte 2). No fused multiply-adds: each format's scalar
/// `vec_dot` order.
#[inline]
#[target_feature(enable = "avx2,f16c")]
pub(super) fn end<F: Q4Format<B, A>, const B: usize, const A: usize>(
    acc: __m256,
    sumi: __m256i,
    dw: __m256,
    mw: __m256,
    ab: &[u8; A],
) -> __m256 {
    let s = _mm256_cvtepi32_ps(sumi);
    let term = match F::END {
        End::SumFirst => _mm256_mul_ps(_mm256_mul_ps(s, dw), half_at(ab, 0)),
        End::ScalesFirst => _mm256_mul_ps(_mm256_mul_ps(dw, half_at(ab, 0)), s),
        End::WithMin => _mm256_add_ps(
            _mm256_mul_ps(_mm256_mul_ps(dw, half_at(ab, 0)), s),
            _mm256_mul_ps(mw, half_at(ab, 2)),
        ),
        End::SubScaled => _mm256_mul_ps(_mm256_mul_ps(dw, mw), s),
    };
    _mm256_add_ps(acc, term)
}

/// A tile kind's one-group tile ([`tile`] here, the VNNI one in
/// `q4_vnni`), for the shared loop ([`gemm_q4`]).
pub(super) trait Q4Tile {
    /// One group (`w`: its blocks) times `T` activation rows: the 8 row
    /// results of each token, as [`tile`].
    ///
    /// # Safety
    ///
    /// The CPU must support the tile's features: AVX2, FMA and F16C, and
    /// AVX-512 F/BW/VL/VNNI for the VNNI tile.
    unsafe fn tile<F: Q4Format<B, A>, const B: usize, const A: usize, const T: usize>(
        w: &[[u8; B]],
        a: [&[[u8; A]]; T],
        sums: &[i32],
        weights: Weights,
    ) -> [__m256; T];

    /// Two neighbouring groups (`groups`, each of `nb` blocks) against
    /// the [`Q4_TILE`] tokens from `t0`, their 16 results per token stored
    /// from column `col`; `sums` is the whole sums table.
    /// Here each group through [`Q4Tile::tile`]; the VNNI kind runs both
    /// in one 512-bit tile.
    ///
    /// # Safety
    ///
    /// As [`Q4Tile::tile`].
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn pair<F: Q4Format<B, A>, const B: usize, const A: usize>(
        g: &PackedArgs<'_>,
        groups: [&[[u8; B]]; 2],
        (t0, col): (usize, usize),
        sums: &[i32],
        weights: Weights,
        out: &mut [f32],
    ) where
        Self: Sized,
    {
        for (h, group) in groups.into_iter().enumerate() {
            // SAFETY: the caller's CPU guarantee.
            unsafe {
                run_tile::<F, Self, B, A, Q4_TILE>(g, group, (t0, col + 8 * h), sums, weights, out)
            };
        }
    }
}

/// The AVX2 tile kind ([`tile`]).
pub(super) struct Avx2;

impl Q4Tile for Avx2 {
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn tile<F: Q4Format<B, A>, const B: usize, const A: usize, const T: usize>(
        w: &[[u8; B]],
        a: [&[[u8; A]]; T],
        sums: &[i32],
        weights: Weights,
    ) -> [__m256; T] {
        tile::<F, B, A, T>(w, a, sums, weights)
    }
}

/// Q4_0 against Q8_0 activations.
pub(super) struct Q40;

/// Q4_1 against Q8_1 activations.
pub(super) struct Q41;

/// IQ4_NL against Q8_0 activations.
pub(super) struct Iq4Nl;

/// MXFP4 (IQ4_NL's layout, its own levels) against Q8_0 activations.
pub(super) struct Mxfp4;

/// Q5_1 against Q8_1 activations.
pub(super) struct Q51;

/// IQ4_XS against Q8_K activations.
pub(super) struct Iq4Xs;

/// The f16 at byte `at` of an activation block, broadcast as f32.
#[inline]
#[target_feature(enable = "avx2,f16c")]
fn half_at<const A: usize>(ab: &[u8; A], at: usize) -> __m256 {
    let bits = match ab.get(at..at + 2) {
        Some(h) => u16::from_le_bytes([h[0], h[1]]),
        None => 0,
    };
    _mm256_cvtph_ps(_mm_set1_epi16(bits as i16))
}

impl Q4Format<{ q4::BYTES_0 }, { BlockQ8_0::BYTES }> for Q40 {
    const NIB: usize = q4::NIB_0;
    const XOFF: usize = 2;
    const NIBBLES: Nibbles = Nibbles::Plain;
    const OFFSET: i32 = 8;
    const END: End = End::SumFirst;
}

impl Q4Format<{ q4::BYTES_1 }, { BlockQ8_1::BYTES }> for Q41 {
    const NIB: usize = q4::NIB_1;
    const XOFF: usize = 4;
    const NIBBLES: Nibbles = Nibbles::Plain;
    const OFFSET: i32 = 0;
    const END: End = End::WithMin;
}

impl Q4Format<{ q4::BYTES_5 }, { BlockQ8_1::BYTES }> for Q51 {
    const NIB: usize = q4::NIB_1;
    const XOFF: usize = 4;
    const NIBBLES: Nibbles = Nibbles::Five;
    const HIGH: usize = q4::HIGH_5;
    const OFFSET: i32 = 0;
    const END: End = End::WithMin;
}

impl Q4Format<{ q4::BYTES_0 }, { BlockQ8_0::BYTES }> for Iq4Nl {
    const NIB: usize = q4::NIB_0;
    const XOFF: usize = 2;
    const NIBBLES: Nibbles = Nibbles::Levels;
    const OFFSET: i32 = 128;
    const END: End = End::ScalesFirst;
}

impl Q4Format<{ q4::BYTES_0 }, { BlockQ8_0::BYTES }> for Mxfp4 {
    const NIB: usize = q4::NIB_0;
    const XOFF: usize = 2;
    const NIBBLES: Nibbles = Nibbles::Levels;
    const OFFSET: i32 = 128;
    const END: End = End::ScalesFirst;
    const LEVELS: [i8; 16] = MXFP4_LEVELS;
}

impl Q4Format<{ iq4xs::BYTES }, { BlockQ8_K::BYTES }> for Iq4Xs {
    const NIB: usize = iq4xs::NIB;
    const XOFF: usize = 4;
    const NIBBLES: Nibbles = Nibbles::ScaledLevels;
    const OFFSET: i32 = 0;
    const END: End = End::SubScaled;
}

/// The f32 scale at the start of a Q8_K block (0.0 if short, which the
/// layouts rule out).
#[inline(always)]
pub(super) fn q8k_d<const A: usize>(ab: &[u8; A]) -> f32 {
    match ab.get(..4) {
        Some(d) => f32::from_le_bytes([d[0], d[1], d[2], d[3]]),
        None => 0.0,
    }
}

/// `Σ x` over sub-block `j` (32 values) of a Q8_K block, from its bsums.
#[inline(always)]
pub(super) fn q8k_sub_sum<const A: usize>(ab: &[u8; A], j: usize) -> i32 {
    let at = |g: usize| match ab.get(260 + 2 * g..262 + 2 * g) {
        Some(b) => i32::from(i16::from_le_bytes([b[0], b[1]])),
        None => 0,
    };
    at(2 * j) + at(2 * j + 1)
}

/// The 8 rows' signed byte scales at byte `at` of a group block, as f32.
#[inline]
#[target_feature(enable = "avx2")]
pub(super) fn byte_scales<const B: usize>(b: &[u8; B], at: usize) -> __m256 {
    let mut v = [0u8; 16];
    if let Some(s) = b.get(at..at + 8) {
        v[..8].copy_from_slice(s);
    }
    // SAFETY: 16 readable bytes; `loadu` needs no alignment.
    let x = unsafe { _mm_loadu_si128(v.as_ptr().cast()) };
    _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(x))
}

/// A format's 16 levels in both 128-bit halves, plus `bias` each (as
/// bytes: 0 for the signed levels, 128 for the VNNI tile's unsigned ones).
#[inline]
#[target_feature(enable = "avx2")]
pub(super) fn levels(table: [i8; 16], bias: u8) -> __m256i {
    let l: [u8; 16] = table.map(|v| (v as u8).wrapping_add(bias));
    // SAFETY: `l` is 16 readable bytes; `loadu` needs no alignment.
    let v = unsafe { _mm_loadu_si128(l.as_ptr().cast()) };
    _mm256_broadcastsi128_si256(v)
}

/// 8 × f16 at byte `at` of a group block, as f32 (zeros past the end,
/// which the layouts rule out).
#[inline]
#[target_feature(enable = "avx2,f16c")]
pub(super) fn halves<const B: usize>(b: &[u8; B], at: usize) -> __m256 {
    let mut v = [0u8; 16];
    if let Some(s) = b.get(at..at + 16) {
        v.copy_from_slice(s);
    }
    // SAFETY: 16 readable bytes; `loadu` needs no alignment.
    _mm256_cvtph_ps(unsafe { _mm_loadu_si128(v.as_ptr().cast()) })
}

/// Activation quants `4k..4k+4` of a block whose quants start at `off`,
/// as one `i32` (0 past the end, which the layouts rule out).
#[inline(always)]
pub(super) fn quad_at<const A: usize>(ab: &[u8; A], off: usize, k: usize) -> i32 {
    let at = off + 4 * k;
    match ab.get(at..at + 4) {
        Some(q) => i32::from_le_bytes([q[0], q[1], q[2], q[3]]),
        None => 0,
    }
}

/// `o · Σ x` of an activation block whose quants start at `off` (`o` at
/// most 128: the pairs' sums, below 256 in size, times `o` stay `i32`).
#[inline]
#[target_feature(enable = "avx2")]
fn xsum<const A: usize>(ab: &[u8; A], off: usize, o: i32) -> i32 {
    let x = load(bytes32(ab, off));
    let p = _mm256_madd_epi16(
        _mm256_maddubs_epi16(_mm256_set1_epi8(1), x),
        _mm256_set1_epi16(o as i16),
    );
    let s = _mm_add_epi32(_mm256_castsi256_si128(p), _mm256_extracti128_si256::<1>(p));
    let s = _mm_add_epi32(s, _mm_shuffle_epi32::<0b0100_1110>(s));
    let s = _mm_add_epi32(s, _mm_shuffle_epi32::<0b1011_0001>(s));
    _mm_cvtsi128_si32(s)
}

/// Where token `t`'s block `b` has its `o · Σ x` in the sums table: by
/// token tile, then block, then token in the tile, so that a tile reads
/// its tokens' sums of a block from one place.
#[inline(always)]
pub(super) fn sums_at(t: usize, b: usize, nb: usize) -> usize {
    ((t / Q4_TILE) * nb + b) * Q4_TILE + t % Q4_TILE
}

/// One group (`w`: its blocks) times `T` activation rows; the 8 row
/// results of each token. `sums` is the tile's part of the sums table
/// (Q4_0: block `b` of token `t` at `b · Q4_TILE + t`; a missing entry
/// reads as 0, which the caller's whole table rules out). IQ4_NL's
/// levels run in [`tile_levels`].
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn tile<F: Q4Format<B, A>, const B: usize, const A: usize, const T: usize>(
    w: &[[u8; B]],
    a: [&[[u8; A]]; T],
    sums: &[i32],
    weights: Weights,
) -> [__m256; T] {
    match F::NIBBLES {
        Nibbles::Levels => return tile_levels::<F, B, A, T>(w, a, weights),
        Nibbles::ScaledLevels => return tile_scaled::<F, B, A, T>(w, a, weights),
        Nibbles::Five => return tile_five::<F, B, A, T>(w, a, weights),
        Nibbles::Plain => {}
    }
    let ones = _mm256_set1_epi16(1);
    let low = _mm256_set1_epi8(15);
    let mut acc = [_mm256_setzero_ps(); T];
    for (b, wb) in w.iter().enumerate() {
        if weights == Weights::Streamed {
            prefetch_ahead(wb);
        }
        let ab = blocks_at(&a, b);
        let mut s = [_mm256_setzero_si256(); T];
        for c in 0..STEPS / 2 {
            let n = load(bytes32(wb, F::NIB + 32 * c));
            let u0 = _mm256_and_si256(n, low);
            let u1 = _mm256_and_si256(_mm256_srli_epi16::<4>(n), low);
            for t in 0..T {
                let x0 = _mm256_set1_epi32(quad_at(ab[t], F::XOFF, 2 * c));
                let x1 = _mm256_set1_epi32(quad_at(ab[t], F::XOFF, 2 * c + 1));
                s[t] = _mm256_add_epi16(s[t], _mm256_maddubs_epi16(u0, x0));
                s[t] = _mm256_add_epi16(s[t], _mm256_maddubs_epi16(u1, x1));
            }
        }
        let dw = halves(wb, q4::D);
        let mw = if F::OFFSET != 0 {
            dw
        } else {
            halves(wb, q4::M)
        };
        let offs: &[i32; Q4_TILE] = sums
            .get(b * Q4_TILE..(b + 1) * Q4_TILE)
            .and_then(|o| o.try_into().ok())
            .unwrap_or(&[0; Q4_TILE]);
        for t in 0..T {
            let mut sumi = _mm256_madd_epi16(s[t], ones);
            if F::OFFSET != 0 {
                sumi = _mm256_sub_epi32(sumi, _mm256_set1_epi32(offs[t]));
            }
            acc[t] = end::<F, B, A>(acc[t], sumi, dw, mw, ab[t]);
        }
    }
    acc
}

/// [`tile`] for Q5_1: each step's quants are its nibbles with the fifth
/// bit from the high-bit plane (`bit_to`). A `maddubs` pair reaches
/// `2 · 31 · 128`, so a block's eight steps could leave `i16`: each
/// chunk's two steps are widened to `i32` at once.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn tile_five<F: Q4Format<B, A>, const B: usize, const A: usize, const T: usize>(
    w: &[[u8; B]],
    a: [&[[u8; A]]; T],
    weights: Weights,
) -> [__m256; T] {
    let ones = _mm256_set1_epi16(1);
    let low = _mm256_set1_epi8(15);
    let mut acc = [_mm256_setzero_ps(); T];
    for (b, wb) in w.iter().enumerate() {
        if weights == Weights::Streamed {
            prefetch_ahead(wb);
        }
        let ab = blocks_at(&a, b);
        let h = load(bytes32(wb, F::HIGH));
        let mut s = [_mm256_setzero_si256(); T];
        for c in 0..STEPS / 2 {
            let n = load(bytes32(wb, F::NIB + 32 * c));
            let u0 = _mm256_or_si256(_mm256_and_si256(n, low), bit_to(h, 2 * c, 4));
            let u1 = _mm256_or_si256(
                _mm256_and_si256(_mm256_srli_epi16::<4>(n), low),
                bit_to(h, 2 * c + 1, 4),
            );
            for t in 0..T {
                let x0 = _mm256_set1_epi32(quad_at(ab[t], F::XOFF, 2 * c));
                let x1 = _mm256_set1_epi32(quad_at(ab[t], F::XOFF, 2 * c + 1));
                let p =
                    _mm256_add_epi16(_mm256_maddubs_epi16(u0, x0), _mm256_maddubs_epi16(u1, x1));
                s[t] = _mm256_add_epi32(s[t], _mm256_madd_epi16(p, ones));
            }
        }
        let dw = halves(wb, q4::D);
        let mw = halves(wb, q4::M);
        for t in 0..T {
            acc[t] = end::<F, B, A>(acc[t], s[t], dw, mw, ab[t]);
        }
    }
    acc
}

/// [`tile`] for IQ4_NL: the nibbles become signed levels, and each
/// step's products widen to `i32` at once (see the module doc); no
/// offset comes off.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn tile_levels<F: Q4Format<B, A>, const B: usize, const A: usize, const T: usize>(
    w: &[[u8; B]],
    a: [&[[u8; A]]; T],
    weights: Weights,
) -> [__m256; T] {
    let ones = _mm256_set1_epi16(1);
    let low = _mm256_set1_epi8(15);
    let table = levels(F::LEVELS, 0);
    let mut acc = [_mm256_setzero_ps(); T];
    for (b, wb) in w.iter().enumerate() {
        if weights == Weights::Streamed {
            prefetch_ahead(wb);
        }
        let ab = blocks_at(&a, b);
        let mut s = [_mm256_setzero_si256(); T];
        for c in 0..STEPS / 2 {
            let n = load(bytes32(wb, F::NIB + 32 * c));
            let w0 = _mm256_shuffle_epi8(table, _mm256_and_si256(n, low));
            let w1 = _mm256_shuffle_epi8(table, _mm256_and_si256(_mm256_srli_epi16::<4>(n), low));
            for t in 0..T {
                let x0 = _mm256_set1_epi32(quad_at(ab[t], F::XOFF, 2 * c));
                let x1 = _mm256_set1_epi32(quad_at(ab[t], F::XOFF, 2 * c + 1));
                let p0 = _mm256_maddubs_epi16(_mm256_abs_epi8(x0), _mm256_sign_epi8(w0, x0));
                let p1 = _mm256_maddubs_epi16(_mm256_abs_epi8(x1), _mm256_sign_epi8(w1, x1));
                let p = _mm256_add_epi32(_mm256_madd_epi16(p0, ones), _mm256_madd_epi16(p1, ones));
                s[t] = _mm256_add_epi32(s[t], p);
            }
        }
        let dw = halves(wb, q4::D);
        for t in 0..T {
            acc[t] = end::<F, B, A>(acc[t], s[t], dw, dw, ab[t]);
        }
    }
    acc
}

/// [`tile_levels`] for IQ4_XS: per super-block `d_w · d_x`, then per
/// 32-value sub-block its levels' exact sum and its float step
/// ([`Q4Format::end`] with the sub-block's scales).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn tile_scaled<F: Q4Format<B, A>, const B: usize, const A: usize, const T: usize>(
    w: &[[u8; B]],
    a: [&[[u8; A]]; T],
    weights: Weights,
) -> [__m256; T] {
    let ones = _mm256_set1_epi16(1);
    let low = _mm256_set1_epi8(15);
    let table = levels(F::LEVELS, 0);
    let mut acc = [_mm256_setzero_ps(); T];
    for (b, wb) in w.iter().enumerate() {
        if weights == Weights::Streamed {
            prefetch_ahead(wb);
        }
        let ab = blocks_at(&a, b);
        let dw = halves(wb, iq4xs::D);
        let dd: [__m256; T] =
            std::array::from_fn(|t| _mm256_mul_ps(dw, _mm256_set1_ps(q8k_d(ab[t]))));
        for j in 0..QK_K / QK {
            let ls = byte_scales(wb, iq4xs::LS + 8 * j);
            let mut s = [_mm256_setzero_si256(); T];
            for c in 0..STEPS / 2 {
                let n = load(bytes32(wb, F::NIB + 32 * (4 * j + c)));
                let w0 = _mm256_shuffle_epi8(table, _mm256_and_si256(n, low));
                let w1 =
                    _mm256_shuffle_epi8(table, _mm256_and_si256(_mm256_srli_epi16::<4>(n), low));
                for t in 0..T {
                    let x0 = _mm256_set1_epi32(quad_at(ab[t], F::XOFF, 8 * j + 2 * c));
                    let x1 = _mm256_set1_epi32(quad_at(ab[t], F::XOFF, 8 * j + 2 * c + 1));
                    let p0 = _mm256_maddubs_epi16(_mm256_abs_epi8(x0), _mm256_sign_epi8(w0, x0));
                    let p1 = _mm256_maddubs_epi16(_mm256_abs_epi8(x1), _mm256_sign_epi8(w1, x1));
                    let p =
                        _mm256_add_epi32(_mm256_madd_epi16(p0, ones), _mm256_madd_epi16(p1, ones));
                    s[t] = _mm256_add_epi32(s[t], p);
                }
            }
            for t in 0..T {
                acc[t] = end::<F, B, A>(acc[t], s[t], dd[t], ls, ab[t]);
            }
        }
    }
    acc
}

/// One group against `T` tokens from `t0` on `K`'s tile, stored at
/// column `col`.
///
/// # Safety
///
/// The CPU must support what `K`'s tile needs (see [`Q4Tile::tile`]).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn run_tile<F: Q4Format<B, A>, K: Q4Tile, const B: usize, const A: usize, const T: usize>(
    g: &PackedArgs<'_>,
    group: &[[u8; B]],
    (t0, col): (usize, usize),
    sums: &[i32],
    weights: Weights,
    out: &mut [f32],
) {
    let (acts, _) = g.a.as_chunks::<A>();
    let nb = g.nb;
    let a: [&[[u8; A]]; T] = act_rows(acts, nb, t0);
    let at = sums_at(t0, 0, nb);
    let s = sums.get(at..at + nb * Q4_TILE).unwrap_or(&[]);
    // SAFETY: the caller's CPU guarantee.
    let y = unsafe { K::tile::<F, B, A, T>(group, a, s, weights) };
    for (t, v) in y.into_iter().enumerate() {
        store(out, (t0 + t) * g.out_stride + col, v);
    }
}

/// Every group against every token on `K`'s tiles, given the sums table
/// (Q4_0 and IQ4_NL; empty for Q4_1). A token tile starts at a multiple of
/// [`Q4_TILE`].
///
/// # Safety
///
/// The CPU must support what `K`'s tile needs (see [`Q4Tile::tile`]).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn gemm_with<F: Q4Format<B, A>, K: Q4Tile, const B: usize, const A: usize>(
    g: &PackedArgs<'_>,
    sums: &[i32],
    out: &mut [f32],
) {
    let nb = g.nb.max(1);
    let (blocks, _) = g.w.as_chunks::<B>();
    if g.n_tok == 1 {
        for (gi, group) in blocks.chunks_exact(nb).enumerate() {
            let at = (0, gi * 8);
            // SAFETY: the caller's CPU guarantee.
            unsafe { run_tile::<F, K, B, A, 1>(g, group, at, sums, Weights::Streamed, out) };
        }
        return;
    }
    let big = g.w.len() > PREFETCH_MIN_BYTES;
    // An even number of groups per chunk, so that whole tiles pair them.
    let chunk_groups = (CHUNK_BYTES / (nb * B)).max(2) / 2 * 2;
    for (ci, chunk) in blocks.chunks(nb * chunk_groups).enumerate() {
        let mut t0 = 0;
        while t0 < g.n_tok {
            let tt = (g.n_tok - t0).min(Q4_TILE);
            let pf = if tt == 1 || (big && t0 == 0) {
                Weights::Streamed
            } else {
                Weights::Cached
            };
            if tt == Q4_TILE {
                for (pi, pair) in chunk.chunks(2 * nb).enumerate() {
                    let at = (t0, (ci * chunk_groups + 2 * pi) * 8);
                    // SAFETY: the caller's CPU guarantee.
                    unsafe {
                        match pair.split_at_checked(nb) {
                            Some((g0, g1)) if g1.len() == nb => {
                                K::pair::<F, B, A>(g, [g0, g1], at, sums, pf, out)
                            }
                            _ => run_tile::<F, K, B, A, Q4_TILE>(g, pair, at, sums, pf, out),
                        }
                    }
                }
                t0 += tt;
                continue;
            }
            for (gi, group) in chunk.chunks_exact(nb).enumerate() {
                let at = (t0, (ci * chunk_groups + gi) * 8);
                // SAFETY: the caller's CPU guarantee.
                unsafe {
                    match tt {
                        1 => run_tile::<F, K, B, A, 1>(g, group, at, sums, pf, out),
                        2 => run_tile::<F, K, B, A, 2>(g, group, at, sums, pf, out),
                        3 => run_tile::<F, K, B, A, 3>(g, group, at, sums, pf, out),
                        4 => run_tile::<F, K, B, A, 4>(g, group, at, sums, pf, out),
                        5 => run_tile::<F, K, B, A, 5>(g, group, at, sums, pf, out),
                        6 => run_tile::<F, K, B, A, 6>(g, group, at, sums, pf, out),
                        7 => run_tile::<F, K, B, A, 7>(g, group, at, sums, pf, out),
                        _ => run_tile::<F, K, B, A, Q4_TILE>(g, group, at, sums, pf, out),
                    }
                }
            }
            t0 += tt;
        }
    }
}

thread_local! {
    /// Each thread's sums table for products larger than [`STACK_SUMS`]
    /// entries: it grows to the largest product seen and is reused, so a
    /// warm product allocates nothing.
    static XSUMS: std::cell::RefCell<Vec<i32>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Fills `table` ([`sums_at`]'s layout, whole token tiles) with `o · Σ x`
/// of every activation block (`nb` per token).
#[inline]
#[target_feature(enable = "avx2")]
fn fill_sums<const A: usize>(
    acts: &[[u8; A]],
    (nb, xoff, o): (usize, usize, i32),
    table: &mut [i32],
) {
    for (i, ab) in acts.iter().enumerate() {
        if let Some(e) = table.get_mut(sums_at(i / nb, i % nb, nb)) {
            *e = xsum(ab, xoff, o);
        }
    }
}

/// The product for format `F` on `K`'s tiles: Q4_0 and IQ4_NL first sum
/// every activation block once (on the stack for small products, decode's; in
/// [`XSUMS`] otherwise).
///
/// # Safety
///
/// The CPU must support what `K`'s tile needs (see [`Q4Tile::tile`]).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn gemm_q4<F: Q4Format<B, A>, K: Q4Tile, const B: usize, const A: usize>(
    g: &PackedArgs<'_>,
    out: &mut [f32],
) {
    if F::OFFSET == 0 {
        // SAFETY: the caller's CPU guarantee (also below).
        unsafe { gemm_with::<F, K, B, A>(g, &[], out) };
        return;
    }
    let nb = g.nb.max(1);
    let (acts, _) = g.a.as_chunks::<A>();
    let acts = acts.get(..g.n_tok.saturating_mul(g.nb)).unwrap_or(acts);
    let n = g.n_tok.div_ceil(Q4_TILE).saturating_mul(nb * Q4_TILE);
    if n <= STACK_SUMS {
        let mut table = [0i32; STACK_SUMS];
        fill_sums(acts, (nb, F::XOFF, F::OFFSET), &mut table);
        // SAFETY: as above.
        unsafe { gemm_with::<F, K, B, A>(g, &table, out) };
        return;
    }
    XSUMS.with_borrow_mut(|table| {
        table.clear();
        table.resize(n, 0);
        fill_sums(acts, (nb, F::XOFF, F::OFFSET), table);
        // SAFETY: as above.
        unsafe { gemm_with::<F, K, B, A>(g, table, out) };
    });
}

/// The packed Q4_0, Q4_1, IQ4_NL and IQ4_XS products of [`crate::packed::packed_gemm`]
/// (other formats write nothing).
///
/// # Safety
///
/// The CPU must support AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn gemm(g: &PackedArgs<'_>, out: &mut [f32]) {
    // SAFETY: this function runs with AVX2, FMA and F16C, what the AVX2
    // tile needs.
    unsafe {
        match g.format {
            PackedFormat::Q4_0 => {
                gemm_q4::<Q40, Avx2, { q4::BYTES_0 }, { BlockQ8_0::BYTES }>(g, out)
            }
            PackedFormat::Q4_1 => {
                gemm_q4::<Q41, Avx2, { q4::BYTES_1 }, { BlockQ8_1::BYTES }>(g, out)
            }
            PackedFormat::Q5_1 => {
                gemm_q4::<Q51, Avx2, { q4::BYTES_5 }, { BlockQ8_1::BYTES }>(g, out)
            }
            PackedFormat::IQ4NL => {
                gemm_q4::<Iq4Nl, Avx2, { q4::BYTES_0 }, { BlockQ8_0::BYTES }>(g, out)
            }
            PackedFormat::MXFP4 => {
                gemm_q4::<Mxfp4, Avx2, { q4::BYTES_0 }, { BlockQ8_0::BYTES }>(g, out)
            }
            PackedFormat::IQ4XS => {
                gemm_q4::<Iq4Xs, Avx2, { iq4xs::BYTES }, { BlockQ8_K::BYTES }>(g, out)
            }
            PackedFormat::Q8_0
            | PackedFormat::Q5_0
            | PackedFormat::Q4K
            | PackedFormat::Q5K
            | PackedFormat::Q6K
            | PackedFormat::Q2K
            | PackedFormat::Q3K
            | PackedFormat::Q1_0
            | PackedFormat::NVFP4 => {}
        }
    }
}
