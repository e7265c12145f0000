//! AVX-512 VNNI kernels of the packed k-quants ([`super::k`]): the
//! steps of [`super::k_avx2`] with each step's products summed by
//! one `vpdpbusd` (unsigned quants against signed activations, straight
//! into `i32`) instead of `maddubs` and `madd`.
//!
//! Prefill runs two neighbouring 8-row groups at once in 512-bit
//! registers, as the Q8_0 and Q5_0 tiles of [`super::vnni`] do:
//!
//! ```text
//!   groups g, g+1; tokens t0..t0+8 ([`TILE`]); per super-block:
//!     per sub-block j:
//!       per step k of j:
//!         u = [ step k of g | step k of g+1 ]      (16 rows × 4 quants)
//!         per token t: s[t] = dpbusd(s[t], u, x_t[k] in every lane)
//!       per token t: sumi[t] += s[t] · [ sc_g[j] | sc_g+1[j] ]  (vpmulld)
//!     per token t: summ = Σ_m dpwssd(offset pairs m, bsums of t)
//!                  acc[t] += [ term_g | term_g+1 ]  (each half the
//!                                                    256-bit float steps)
//! ```
//!
//! Every lane runs the integer and float steps of the 256-bit tile
//! ([`tile_vnni`]), so each output has the same bits on every ISA. The
//! last group of an odd count takes the 256-bit tile. The tokens after
//! the last whole tile take one narrower tile of the same steps, so a pass
//! of a few tokens (a draft being verified) unpacks each weight block once.
//! A single token streams the weights from DRAM (decode) through the
//! 256-bit tile and asks for them ahead ([`prefetch_ahead`]).

use std::arch::x86_64::*;

use super::k_avx2::{Grid, KSteps, AB, BSUMS, Q2K, Q3K, Q4K, Q5K, Q6K};
use super::layout::{gk, q2k, q3k, q4k, q5k, q6k, PackedArgs, PackedFormat, K_STEPS};
use super::tiles::{
    act_rows, bit_to16, blocks_at, bytes32, load, prefetch_ahead, quad, store, store16, Weights,
    VNNI_TILE as TILE,
};

/// One group (`w`: its super-blocks) times `T` activation rows; returns
/// the 8 row results of each token. Each step is one `vpdpbusd` into an
/// `i32` sub-block sum, which takes its scale with one `vpmulld` per
/// sub-block; the same exact `sumi` and float steps as the AVX2 tile.
/// `STREAMED` weights (from DRAM) are asked for ahead ([`prefetch_ahead`]);
/// a constant, so that the one-token tile of decode compiles as tightly as
/// without the choice (a run-time flag cost it 12% of its bandwidth).
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
fn tile_vnni<S: KSteps<B>, const B: usize, const T: usize, const STREAMED: bool>(
    w: &[[u8; B]],
    a: [&[[u8; AB]]; T],
) -> [__m256; T] {
    let mut acc = [_mm256_setzero_ps(); T];
    for (b, wb) in w.iter().enumerate() {
        if STREAMED {
            prefetch_ahead(wb);
        }
        let ab = blocks_at(&a, b);
        let mut sumi = [_mm256_setzero_si256(); T];
        for j in 0..K_STEPS / S::SUB_STEPS {
            let mut s = [_mm256_setzero_si256(); T];
            for kk in 0..S::SUB_STEPS {
                let k = j * S::SUB_STEPS + kk;
                // SAFETY: this function runs with AVX2, FMA and F16C
                // enabled (also for the calls below).
                let u = unsafe { S::step(wb, k) };
                for t in 0..T {
                    let x = _mm256_set1_epi32(quad::<4, AB>(ab[t], k));
                    s[t] = _mm256_dpbusd_epi32(s[t], u, x);
                }
            }
            // SAFETY: as above.
            let sc = unsafe { S::scales(wb, j) };
            for t in 0..T {
                sumi[t] = _mm256_add_epi32(sumi[t], _mm256_mullo_epi32(s[t], sc));
            }
        }
        let mut pairs = [_mm256_setzero_si256(); 8];
        for (m, p) in pairs.iter_mut().enumerate() {
            // SAFETY: as above.
            *p = unsafe { S::offset_pair(wb, m) };
        }
        let shift = _mm_cvtsi32_si128(S::OFFSET_SHIFT);
        for t in 0..T {
            let mut summ = _mm256_setzero_si256();
            for (m, p) in pairs.iter().enumerate() {
                let x = _mm256_set1_epi32(quad::<BSUMS, AB>(ab[t], m));
                summ = _mm256_dpwssd_epi32(summ, *p, x);
            }
            let summ = _mm256_sll_epi32(summ, shift);
            let dx = _mm256_set1_ps(scale(ab[t]));
            // SAFETY: as above.
            let v = unsafe { S::term(wb, dx, sumi[t], summ) };
            acc[t] = _mm256_add_ps(acc[t], v);
        }
    }
    acc
}

/// A Q8_K activation block's f32 scale (its first four bytes).
#[inline(always)]
fn scale(ab: &[u8; AB]) -> f32 {
    f32::from_le_bytes([ab[0], ab[1], ab[2], ab[3]])
}

/// `lo` in the low and `hi` in the high 256 bits.
#[inline]
#[target_feature(enable = "avx512f")]
fn join(lo: __m256i, hi: __m256i) -> __m512i {
    _mm512_inserti64x4::<1>(_mm512_castsi256_si512(lo), hi)
}

/// The low and high 256 bits.
#[inline]
#[target_feature(enable = "avx512f")]
fn halves(v: __m512i) -> (__m256i, __m256i) {
    (_mm512_castsi512_si256(v), _mm512_extracti64x4_epi64::<1>(v))
}

/// A k-quant format's steps of two neighbouring groups at once, decoded
/// in 512-bit registers: the same bytes as two [`KSteps::step`]s side by
/// side, with half the shifts and masks.
pub(super) trait PairSteps<const B: usize>: KSteps<B> {
    /// Step `k` of `b[0]` in the low and of `b[1]` in the high 256 bits.
    ///
    /// # Safety
    ///
    /// The CPU must support AVX2 and AVX-512 F and BW.
    unsafe fn step16(b: [&[u8; B]; 2], k: usize) -> __m512i;
}

/// 32 bytes at byte `at` of each of two group blocks, the first in the
/// low 256 bits.
#[inline]
#[target_feature(enable = "avx2,avx512f")]
pub(super) fn load_pair<const B: usize>(b: [&[u8; B]; 2], at: usize) -> __m512i {
    join(load(bytes32(b[0], at)), load(bytes32(b[1], at)))
}

/// The 4-bit quants of step `k` from the nibble chunks at `nib`.
#[inline]
#[target_feature(enable = "avx2,avx512f,avx512bw")]
fn nibbles16<const B: usize>(b: [&[u8; B]; 2], nib: usize, k: usize) -> __m512i {
    let chunk = load_pair(b, nib + 32 * (k / 2));
    let low = _mm512_set1_epi8(15);
    if k.is_multiple_of(2) {
        _mm512_and_si512(chunk, low)
    } else {
        _mm512_and_si512(_mm512_srli_epi16::<4>(chunk), low)
    }
}

/// Bits `2(k % 4)..2(k % 4) + 2` of each byte of the 2-bit chunk
/// `k / 4` at `at` (the bits a 16-bit shift carries over from the
/// neighbour byte land above bit 1).
#[inline]
#[target_feature(enable = "avx2,avx512f,avx512bw")]
fn crumbs16<const B: usize>(b: [&[u8; B]; 2], at: usize, k: usize) -> __m512i {
    let chunk = load_pair(b, at + 32 * (k / 4));
    let count = _mm_cvtsi32_si128(2 * (k % 4) as i32);
    _mm512_and_si512(_mm512_srl_epi16(chunk, count), _mm512_set1_epi8(3))
}

impl PairSteps<{ q4k::BYTES }> for Q4K {
    #[inline]
    #[target_feature(enable = "avx2,avx512f,avx512bw")]
    unsafe fn step16(b: [&[u8; q4k::BYTES]; 2], k: usize) -> __m512i {
        nibbles16(b, q4k::NIB, k)
    }
}

impl PairSteps<{ q5k::BYTES }> for Q5K {
    #[inline]
    #[target_feature(enable = "avx2,avx512f,avx512bw")]
    unsafe fn step16(b: [&[u8; q5k::BYTES]; 2], k: usize) -> __m512i {
        let high = load_pair(b, q5k::HIGH + 32 * (k / 8));
        _mm512_or_si512(nibbles16(b, q5k::NIB, k), bit_to16(high, k % 8, 4))
    }
}

impl PairSteps<{ q6k::BYTES }> for Q6K {
    #[inline]
    #[target_feature(enable = "avx2,avx512f,avx512bw")]
    unsafe fn step16(b: [&[u8; q6k::BYTES]; 2], k: usize) -> __m512i {
        let high = crumbs16(b, q6k::HIGH, k);
        _mm512_or_si512(nibbles16(b, q6k::NIB, k), _mm512_slli_epi16::<4>(high))
    }
}

impl PairSteps<{ q2k::BYTES }> for Q2K {
    #[inline]
    #[target_feature(enable = "avx2,avx512f,avx512bw")]
    unsafe fn step16(b: [&[u8; q2k::BYTES]; 2], k: usize) -> __m512i {
        crumbs16(b, q2k::Q, k)
    }
}

impl PairSteps<{ q3k::BYTES }> for Q3K {
    #[inline]
    #[target_feature(enable = "avx2,avx512f,avx512bw")]
    unsafe fn step16(b: [&[u8; q3k::BYTES]; 2], k: usize) -> __m512i {
        let high = load_pair(b, q3k::HIGH + 32 * (k / 8));
        _mm512_or_si512(crumbs16(b, q3k::Q, k), bit_to16(high, k % 8, 2))
    }
}

impl<const SHIFT: i32, const I16: usize, const EIGHTHS: bool, const SUB: usize>
    PairSteps<{ gk::BYTES }> for Grid<SHIFT, I16, EIGHTHS, SUB>
{
    #[inline]
    #[target_feature(enable = "avx2,avx512f,avx512bw")]
    unsafe fn step16(b: [&[u8; gk::BYTES]; 2], k: usize) -> __m512i {
        load_pair(b, gk::U + 32 * k)
    }
}

/// [`tile_vnni`] for `T` tokens (at most [`TILE`]) over two neighbouring
/// groups at once (the module diagram): lane `r < 8` is row `r` of `w[0]`, lane `8 + r`
/// row `r` of `w[1]`. Returns each token's 16 row results.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
fn tile_pair<S: PairSteps<B>, const B: usize, const T: usize>(
    w: [&[[u8; B]]; 2],
    a: [&[[u8; AB]]; T],
    weights: Weights,
) -> [__m512; T] {
    let mut acc = [_mm512_setzero_ps(); T];
    for (b, (w0, w1)) in w[0].iter().zip(w[1]).enumerate() {
        if weights == Weights::Streamed {
            prefetch_ahead(w0);
            prefetch_ahead(w1);
        }
        let ab = blocks_at(&a, b);
        let mut sumi = [_mm512_setzero_si512(); T];
        for j in 0..K_STEPS / S::SUB_STEPS {
            let mut s = [_mm512_setzero_si512(); T];
            for kk in 0..S::SUB_STEPS {
                let k = j * S::SUB_STEPS + kk;
                // SAFETY: this function runs with AVX2, FMA, F16C and
                // AVX-512 enabled (also for the calls below).
                let u = unsafe { S::step16([w0, w1], k) };
                for t in 0..T {
                    let x = _mm512_set1_epi32(quad::<4, AB>(ab[t], k));
                    s[t] = _mm512_dpbusd_epi32(s[t], u, x);
                }
            }
            // SAFETY: as above.
            let sc = unsafe { join(S::scales(w0, j), S::scales(w1, j)) };
            for t in 0..T {
                sumi[t] = _mm512_add_epi32(sumi[t], _mm512_mullo_epi32(s[t], sc));
            }
        }
        let mut pairs = [_mm512_setzero_si512(); 8];
        for (m, p) in pairs.iter_mut().enumerate() {
            // SAFETY: as above.
            *p = unsafe { join(S::offset_pair(w0, m), S::offset_pair(w1, m)) };
        }
        let shift = _mm_cvtsi32_si128(S::OFFSET_SHIFT);
        for t in 0..T {
            let mut summ = _mm512_setzero_si512();
            for (m, p) in pairs.iter().enumerate() {
                let x = _mm512_set1_epi32(quad::<BSUMS, AB>(ab[t], m));
                summ = _mm512_dpwssd_epi32(summ, *p, x);
            }
            let (sumi_lo, sumi_hi) = halves(sumi[t]);
            let (summ_lo, summ_hi) = halves(_mm512_sll_epi32(summ, shift));
            let dx = _mm256_set1_ps(scale(ab[t]));
            // SAFETY: as above.
            let (lo, hi) = unsafe {
                (
                    S::term(w0, dx, sumi_lo, summ_lo),
                    S::term(w1, dx, sumi_hi, summ_hi),
                )
            };
            let v = _mm512_castsi512_ps(join(_mm256_castps_si256(lo), _mm256_castps_si256(hi)));
            acc[t] = _mm512_add_ps(acc[t], v);
        }
    }
    acc
}

/// Every pair of groups against every whole [`TILE`] of tokens, then the
/// remaining tokens as one narrower tile ([`rest`]): a pass verifying a
/// draft of a few tokens unpacks each weight block once, not once per
/// token. One token takes [`gemm_one`].
///
/// Each tile function is called from one place only, so that it inlines
/// into its caller: called from two, `tile_pair` stayed out of line and
/// the 1.5B model's prefill ran 4% slower (Zen 5).
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
pub(super) fn gemm_k<S: PairSteps<B>, const B: usize>(g: &PackedArgs<'_>, out: &mut [f32]) {
    let nb = g.nb.max(1);
    let (blocks, _) = g.w.as_chunks::<B>();
    for (pi, pair) in blocks.chunks(2 * nb).enumerate() {
        pair_tiles::<S, B>(g, pair_groups(pair, nb), pi * 16, Weights::Streamed, out);
    }
}

/// A run of two groups' blocks (`nb` each) as the two groups, or as one
/// group and none where the run holds only the last of an odd count.
pub(super) fn pair_groups<T>(pair: &[T], nb: usize) -> [&[T]; 2] {
    match pair.split_at_checked(nb) {
        Some((g0, g1)) if g1.len() == nb => [g0, g1],
        _ => [pair, &[]],
    }
}

/// One pair of groups (`groups[1]` empty for the last of an odd count)
/// against every token: every whole [`TILE`], then the rest as one
/// narrower tile ([`rest`]). Their results go to columns `col..col + 16`.
/// `first`: how the first tile finds the weights (streamed from memory
/// and asked for ahead, or already in cache).
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
pub(super) fn pair_tiles<S: PairSteps<B>, const B: usize>(
    g: &PackedArgs<'_>,
    groups: [&[[u8; B]]; 2],
    col: usize,
    first: Weights,
    out: &mut [f32],
) {
    let (acts, _) = g.a.as_chunks::<AB>();
    let full = g.n_tok / TILE * TILE;
    // A pass of exactly one tile (a fleet's step of 8 agents) streams the
    // weights through it; formats that stream better one group at a time
    // take it so (`KSteps::PAIR_STREAMED`). Prefill's first tile stays
    // paired: there the later tiles dominate, and they are paired.
    let one_group = g.n_tok == TILE && !S::PAIR_STREAMED;
    for t0 in (0..full).step_by(TILE) {
        let a: [&[[u8; AB]]; TILE] = act_rows(acts, g.nb, t0);
        let weights = if t0 == 0 { first } else { Weights::Cached };
        if one_group || groups[1].is_empty() {
            for (h, group) in groups.iter().enumerate().filter(|(_, w)| !w.is_empty()) {
                let y = match weights {
                    Weights::Streamed => tile_vnni::<S, B, TILE, true>(group, a),
                    Weights::Cached => tile_vnni::<S, B, TILE, false>(group, a),
                };
                for (t, v) in y.into_iter().enumerate() {
                    store(out, (t0 + t) * g.out_stride + col + 8 * h, v);
                }
            }
        } else {
            let y = tile_pair::<S, B, TILE>(groups, a, weights);
            for (t, v) in y.into_iter().enumerate() {
                store16(out, (t0 + t) * g.out_stride + col, v);
            }
        }
    }
    let at = At {
        groups,
        acts,
        g,
        col,
    };
    match (g.n_tok - full, full) {
        (0, _) => {}
        // After whole tiles the weights are in cache.
        (1, _) => rest::<S, B, 1, false>(&at, full, out),
        (2, 0) => rest::<S, B, 2, true>(&at, 0, out),
        (3, 0) => rest::<S, B, 3, true>(&at, 0, out),
        (4, 0) => rest::<S, B, 4, true>(&at, 0, out),
        (5, 0) => rest::<S, B, 5, true>(&at, 0, out),
        (6, 0) => rest::<S, B, 6, true>(&at, 0, out),
        (_, 0) => rest::<S, B, 7, true>(&at, 0, out),
        (2, _) => rest::<S, B, 2, false>(&at, full, out),
        (3, _) => rest::<S, B, 3, false>(&at, full, out),
        (4, _) => rest::<S, B, 4, false>(&at, full, out),
        (5, _) => rest::<S, B, 5, false>(&at, full, out),
        (6, _) => rest::<S, B, 6, false>(&at, full, out),
        (_, _) => rest::<S, B, 7, false>(&at, full, out),
    }
}

/// One token (decode) against every group: the 256-bit one-token tile,
/// streaming the weights and asking for them ahead. A function of its own,
/// so that its loop compiles alone: inside [`gemm_k`] the 1.5B model's
/// decode ran 4% slower (Zen 5).
#[inline(never)]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
fn gemm_one<S: KSteps<B>, const B: usize>(g: &PackedArgs<'_>, out: &mut [f32]) {
    let nb = g.nb.max(1);
    let (blocks, _) = g.w.as_chunks::<B>();
    let (acts, _) = g.a.as_chunks::<AB>();
    for (gi, group) in blocks.chunks_exact(nb).enumerate() {
        let [v] = tile_vnni::<S, B, 1, true>(group, act_rows(acts, g.nb, 0));
        store(out, gi * 8, v);
    }
}

/// One pair of groups (or the last, unpaired group) and where its results
/// go: columns `col..col + 16` of every token row.
struct At<'a, 'g, const B: usize> {
    groups: [&'a [[u8; B]]; 2],
    acts: &'a [[u8; AB]],
    g: &'a PackedArgs<'g>,
    col: usize,
}

/// Tokens `t0..t0 + T` (fewer than a [`TILE`]) against `at`'s groups, one
/// group at a time through the 256-bit tile, asking for `STREAMED`
/// weights ahead. On a Zen 5 core, 2 to 7 tokens against a DRAM-sized
/// Q6_K matrix ran at 17–30 GB/s this way and at 11–15 GB/s through the
/// two-group tile (`cargo bench -p fak-kernels --bench packed_k --
/// widths`). Out of line: it runs once per pair of groups and call.
#[inline(never)]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
fn rest<S: KSteps<B>, const B: usize, const T: usize, const STREAMED: bool>(
    at: &At<'_, '_, B>,
    t0: usize,
    out: &mut [f32],
) {
    let a: [&[[u8; AB]]; T] = act_rows(at.acts, at.g.nb, t0);
    for (h, group) in at.groups.iter().enumerate().filter(|(_, w)| !w.is_empty()) {
        let y = tile_vnni::<S, B, T, STREAMED>(group, a);
        for (t, v) in y.into_iter().enumerate() {
            store(out, (t0 + t) * at.g.out_stride + at.col + 8 * h, v);
        }
    }
}

/// The packed k-quant products on VNNI (`g.format` is Q4_K, Q5_K, Q6_K, Q2_K or Q3_K;
/// other formats write nothing).
///
/// # Safety
///
/// The CPU must support AVX2, FMA, F16C and AVX-512 F, BW, VL and VNNI.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
pub(crate) unsafe fn gemm_vnni(g: &PackedArgs<'_>, out: &mut [f32]) {
    use super::wide::{self, U};
    let wide = g.n_tok >= wide::MIN_TOKENS_VNNI;
    match g.format {
        PackedFormat::Q4K if g.n_tok == 1 => gemm_one::<Q4K, { q4k::BYTES }>(g, out),
        PackedFormat::Q5K if g.n_tok == 1 => gemm_one::<Q5K, { q5k::BYTES }>(g, out),
        PackedFormat::Q6K if g.n_tok == 1 => gemm_one::<Q6K, { q6k::BYTES }>(g, out),
        PackedFormat::Q2K if g.n_tok == 1 => gemm_one::<Q2K, { q2k::BYTES }>(g, out),
        PackedFormat::Q3K if g.n_tok == 1 => gemm_one::<Q3K, { q3k::BYTES }>(g, out),
        PackedFormat::Q4K => gemm_k::<Q4K, { q4k::BYTES }>(g, out),
        PackedFormat::Q5K if wide => {
            wide::gemm_vnni::<Q5K, { q5k::BYTES }, { q5k::BYTES + U }>(g, out)
        }
        PackedFormat::Q3K if wide => {
            wide::gemm_vnni::<Q3K, { q3k::BYTES }, { q3k::BYTES + U }>(g, out)
        }
        PackedFormat::Q5K => gemm_k::<Q5K, { q5k::BYTES }>(g, out),
        PackedFormat::Q6K => gemm_k::<Q6K, { q6k::BYTES }>(g, out),
        PackedFormat::Q2K => gemm_k::<Q2K, { q2k::BYTES }>(g, out),
        PackedFormat::Q3K => gemm_k::<Q3K, { q3k::BYTES }>(g, out),
        PackedFormat::Q8_0
        | PackedFormat::Q5_0
        | PackedFormat::Q4_0
        | PackedFormat::Q4_1
        | PackedFormat::Q5_1
        | PackedFormat::IQ4NL
        | PackedFormat::MXFP4
        | PackedFormat::Q1_0
        | PackedFormat::NVFP4
        | PackedFormat::IQ4XS => {}
    }
}
