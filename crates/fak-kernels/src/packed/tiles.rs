//! The pieces that the packed products' SIMD kernels share
//! (`avx2`, `q8_avx2`, `q4_avx2`, `k_avx2`, `vnni`, `q4_vnni`, `k_vnni`):
//! fixed-offset loads of a group block, the weight prefetch, the
//! activation quads, the float end of a block ([`scale_block`]), the move
//! of a high-bit plane's bit into a quant ([`bit_to`], [`bit_to16`]), the
//! 8- and 16-lane stores and the token tile sizes.
//!
//! A leaf: it imports only the block types and the packed geometry
//! (`super::layout`), so the kernel files import it and never each other
//! in a loop.

use std::arch::x86_64::*;

use super::layout::SCALE_BYTES;
use crate::blocks::BlockQ8_0;

/// Activation block bytes.
pub(super) const AB: usize = BlockQ8_0::BYTES;

/// Tokens per AVX2 tile of Q5_0 and the k-quants (measured best of 2–6 on
/// the 1536 × 576 and 576 × 1536 Q8_0 products with the earlier Q8_0
/// tile: 4 fills the 16 registers without spilling; Q8_0 now has its own
/// tiles of up to 8).
pub(super) const TILE_TOKENS: usize = 4;

/// Tokens per VNNI tile: eight sums, the shared correction, the weights,
/// one broadcast and eight float accumulators fit in 32 registers.
pub(super) const VNNI_TILE: usize = 8;

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
/// 1.5B model's decode there (docs/PERFORMANCE.md). On Zen 4 with the
/// `t1` hint below, 8 KiB beat 4 KiB on that decode: 19.2 and 22.0 against
/// 18.2 and 16.5 tok/s on one thread, 33.2 and 32.6 against 26.3 and 28.1
/// on two (`fak bench model --reps 1`, alternated twice); 2 KiB was far
/// slower (10.8-11.5 on one thread), 16 KiB mixed.
///
/// The hint asks for L2 (`prefetcht1`), not L1 (`prefetcht0`). On an AMD
/// Zen 4 core, single-token products streaming from DRAM
/// (`cargo bench -p fak-kernels --bench packed_k`, one thread) ran Q6_K at
/// 7.5-8.4 GB/s with `t0` and 15.3-17.6 GB/s with `t1` (the core's read
/// bandwidth: 16.8 GB/s), Q4_K at 12.5-13.5 and 17.0-18.8 GB/s; `nta`
/// measured as `t0`, `t2` as `t1`. The 1.5B model's decode went from
/// 20.1-21.6 to 27.8-28.0 tok/s (2 threads). Lines asked into L1 ahead of
/// use likely hold the L1 miss buffers that the demand loads need.
pub(super) const PREFETCH_BYTES: usize = 8192;

/// Asks for the cache lines [`PREFETCH_BYTES`] past the start of `wb`
/// (one block's worth: the tiles call it once per block, so the hints run
/// a fixed distance ahead of the reads). One-token tiles ask (they stream
/// the weights: decode), and so does the first tile of a VNNI two-group
/// kernel over a group ([`Weights`]); the later tiles of a prefill find
/// the weights in cache, and the AVX2 wide tiles, compute-bound, measured
/// a few percent slower with the hints.
#[inline(always)]
pub(super) fn prefetch_ahead<const B: usize>(wb: &[u8; B]) {
    let base = wb.as_ptr().wrapping_add(PREFETCH_BYTES);
    for line in (0..B).step_by(64) {
        // SAFETY: a prefetch is a hint that never faults, whatever the
        // address; the pointer is never dereferenced.
        unsafe { _mm_prefetch::<_MM_HINT_T1>(base.wrapping_add(line).cast()) };
    }
}

/// Whether a wide tile asks for its weights ahead ([`prefetch_ahead`]).
/// A batch of a few tokens (a fleet's decode step) runs one tile per
/// group, which streams the weights from DRAM as a one-token tile does;
/// in prefill, the later tiles over the same group find them in cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Weights {
    /// The first token tile over a group: prefetch.
    Streamed,
    /// A later tile over the same group: no hints.
    Cached,
}

impl Weights {
    /// [`Weights::Streamed`] for the tile starting at token `t0`.
    pub(super) fn at(t0: usize) -> Weights {
        if t0 == 0 {
            Weights::Streamed
        } else {
            Weights::Cached
        }
    }
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

/// Activation rows `t0..t0 + T` of `acts` (`nb` blocks each; an empty row
/// past the end, which the callers' checked lengths rule out). A plain
/// loop: `array::from_fn` with a closure compiled to an out-of-line call
/// per tile inside the `target_feature` tile drivers (1.5% of a fleet's
/// samples, in that call's prologue).
#[inline(always)]
pub(super) fn act_rows<const A: usize, const T: usize>(
    acts: &[[u8; A]],
    nb: usize,
    t0: usize,
) -> [&[[u8; A]]; T] {
    let mut a: [&[[u8; A]]; T] = [&[]; T];
    for (t, row) in a.iter_mut().enumerate() {
        let lo = (t0 + t) * nb;
        *row = acts.get(lo..lo + nb).unwrap_or(&[]);
    }
    a
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

/// Writes one token's 16 row results at `out[at..at + 16]` (skipped if
/// `out` is too short, which the caller's checks rule out).
#[inline]
#[target_feature(enable = "avx512f")]
pub(super) fn store16(out: &mut [f32], at: usize, v: __m512) {
    if let Some(o) = out.get_mut(at..at + 16) {
        // SAFETY: `o` is 16 writable f32s; `storeu` needs no alignment.
        unsafe { _mm512_storeu_ps(o.as_mut_ptr(), v) };
    }
}

/// Bit `bit` of each byte of `h` (a high-bit plane) moved to bit `to`,
/// the rest zero: one 16-bit shift and a mask. With `to` at most 4 the
/// bits that a shift carries over from the byte's neighbour land away
/// from bit `to` (below it for a left shift of at most `to`, above it for
/// a right shift of at most `7 − to`).
#[inline]
#[target_feature(enable = "avx2")]
pub(super) fn bit_to(h: __m256i, bit: usize, to: usize) -> __m256i {
    let moved = if bit <= to {
        _mm256_sll_epi16(h, _mm_cvtsi32_si128((to - bit) as i32))
    } else {
        _mm256_srl_epi16(h, _mm_cvtsi32_si128((bit - to) as i32))
    };
    _mm256_and_si256(moved, _mm256_set1_epi8(1 << to))
}

/// [`bit_to`] on 512 bits.
#[inline]
#[target_feature(enable = "avx2,avx512f,avx512bw")]
pub(super) fn bit_to16(h: __m512i, bit: usize, to: usize) -> __m512i {
    let moved = if bit <= to {
        _mm512_sll_epi16(h, _mm_cvtsi32_si128((to - bit) as i32))
    } else {
        _mm512_srl_epi16(h, _mm_cvtsi32_si128((bit - to) as i32))
    };
    _mm512_and_si512(moved, _mm512_set1_epi8(1 << to))
}
