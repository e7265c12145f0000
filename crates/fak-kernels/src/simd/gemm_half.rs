//! F16 and BF16 matrix products as register tiles, bit-identical per
//! element to the AVX2 dot products of those types (`avx2::dot_f16`,
//! `avx2::dot_bf16`), which both SIMD ISAs run.
//!
//! F16's dot product keeps four 8-lane `f32` accumulators: lane `l` of
//! `acc[c]` sums the products of elements `32·i + 8·c + l` (fused
//! multiply-adds, chunks `i` in order); at the end
//! `((acc0 + acc1) + (acc2 + acc3))` is summed across its lanes in a fixed
//! order and widened to `f64`, and the elements past the last whole chunk
//! add their products to the `f64` sum one by one ([`Half::end`]). BF16's
//! runs 16 lanes over element pairs instead (as `vdpbf16ps` does, its
//! tiles in [`super::gemm_bf16`]) and sums its tail apart, adding that sum
//! once; this module drives both and holds F16's tiles. A tile runs the same lanes for several rows and tokens
//! at once, so each weight is widened once per tile (AVX2) or once per
//! row group and block of tokens (AVX-512) instead of once per element of
//! the output, and each activation once per call:
//!
//! ```text
//!   AVX-512: a zmm holds acc0|acc1 (elements 32i..32i+16) or acc2|acc3
//!            (32i+16..32i+32): 4 rows × 6 tokens, one half per pass,
//!            over the group's rows widened to f32 before its tiles run
//!   AVX2:    one ymm per accumulator: 2 rows × 6 tokens, one acc per pass,
//!            each row's values widened in the tile
//!   per pass, per chunk:  w[r] = row r's values as f32
//!                         acc[t][r] = fma(w[r], x[t], acc[t][r])
//!   end: lanes = (acc0 + acc1) + (acc2 + acc3) ─► the dot product's hsum
//!        (four rows at a time on AVX-512: `hsum4`), stored straight
//!        into the output ─► its tail (`Half::end`), where a row has one
//! ```
//!
//! On AVX-512 the code around the inner loop weighs as much as the loop
//! for short rows (576 values: 18 chunks per pass), so it stays lean: the
//! tile reads `f32` weights (no conversion in the loop), stores the four
//! rows' sums of a token with one 128-bit store, and skips `end` where
//! rows have no tail. Its functions enable AVX-512VL: without it the
//! accumulators, which end in 256-bit additions, were held to the 16
//! registers that VEX-encoded instructions can name and spilled on every
//! step. One Zen 4 core, `F16 [1536 × 576] × 256` tokens: 35 against 44
//! G multiply-adds/s, `[576 × 1536]`: 35 against 47 (the `fma` peak is
//! about 56).
//!
//! A pass keeps only its accumulators, weights and one token in
//! registers: with both halves of every chunk at once (48 accumulators
//! on AVX-512), the accumulators lived on the stack and every
//! multiply-add stored one; SmolLM2-135M F16's prefill ran at 603
//! against 905 tok/s in passes (Zen 5, 2 threads, `fak bench model`).
//!
//! Every lane sees the same operands in the same order as in the dot
//! product (the activations are widened to `f32`, exactly, before the
//! tiles run), so an output element depends only on its weight row and
//! token row, never on the tile it lands in.

use std::arch::x86_64::*;

use super::avx2_blocks::hsum_ps;
use super::gemm_avx2::GemmArgs;
use super::gemm_bf16::{self, Exps};
use crate::fp::{bf16_to_f32, f16_to_f32};

/// Elements per accumulation chunk of the dot products.
pub(super) const CHUNK: usize = 32;

/// Rows and tokens of the AVX-512 tile.
pub(super) const R512: usize = 4;
pub(super) const T512: usize = 6;

/// Rows and tokens of the AVX2 tile.
const R256: usize = 2;
const T256: usize = 6;

/// Fewest tokens a product takes the tiles for (F16 and BF16 alike). Fewer (decode) stream
/// the weights from memory once whatever the tile, and one row at a time
/// streams faster than four interleaved: SmolLM2-135M F16 decoded at 175
/// tok/s through the dot product against 105 through 4 × 1 tiles (Zen 5,
/// 2 threads, `fak bench model`).
pub(crate) const MIN_TOKENS: usize = 3;

thread_local! {
    /// Each thread's widened activations (a token block × `n`), reused.
    static ACTS: std::cell::RefCell<Vec<f32>> = const { std::cell::RefCell::new(Vec::new()) };
    /// Each thread's widened weight rows (a row group × `n`), reused.
    static WIDE: std::cell::RefCell<Vec<f32>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// A 16-bit float weight format: the value of an element, which dot
/// product the format runs, and how that dot product ends.
pub(crate) trait Half {
    /// The value of one element's little-endian bits.
    fn value(bits: [u8; 2]) -> f32;

    /// Whether the dot product runs 16 lanes of element pairs (BF16,
    /// [`super::gemm_bf16`]) rather than 4 × 8 lanes of single elements.
    const PAIRS: bool;

    /// The dot product's result from its lanes' sum `h` and the elements
    /// past the last whole chunk (`w`, `x`: those of the weight row and of
    /// the token row, widened; as many as both hold).
    fn end(h: f32, w: &[f32], x: &[f32]) -> f32;
}

/// IEEE half precision (`avx2::dot_f16`).
pub(crate) struct F16;

/// bfloat16 (`avx2::dot_bf16`).
pub(crate) struct Bf16;

impl Half for F16 {
    #[inline(always)]
    fn value(bits: [u8; 2]) -> f32 {
        f16_to_f32(u16::from_le_bytes(bits))
    }

    const PAIRS: bool = false;

    /// `dot_f16`'s end: each product after the lanes' sum, in `f64`.
    #[inline]
    fn end(h: f32, w: &[f32], x: &[f32]) -> f32 {
        let mut sum = f64::from(h);
        for (&wv, &xv) in w.iter().zip(x) {
            sum += f64::from(wv * xv);
        }
        sum as f32
    }
}

impl Half for Bf16 {
    #[inline(always)]
    fn value(bits: [u8; 2]) -> f32 {
        bf16_to_f32(u16::from_le_bytes(bits))
    }

    const PAIRS: bool = true;

    /// `dot_bf16`'s end: the products after the lanes' sum summed apart
    /// (as `Iterator::sum` does), then added once, in `f64`.
    #[inline]
    fn end(h: f32, w: &[f32], x: &[f32]) -> f32 {
        let tail = w.iter().zip(x).map(|(&wv, &xv)| f64::from(wv * xv));
        (f64::from(h) + tail.sum::<f64>()) as f32
    }
}

/// The 8 f16 values (16 bytes) at `p`, widened (exact).
///
/// # Safety
///
/// The CPU must support AVX2 and F16C; `p` must point to 16 readable
/// bytes.
#[inline]
#[target_feature(enable = "avx2,f16c")]
unsafe fn f16x8(p: *const u8) -> __m256 {
    // SAFETY: the caller's promise: 16 readable bytes at `p`.
    _mm256_cvtph_ps(unsafe { _mm_loadu_si128(p.cast()) })
}

/// Widens the little-endian f16 values of `src` into `dst` (as many as
/// both hold), 8 at a time; exact, as every f16 is an `f32`.
#[inline]
#[target_feature(enable = "avx2,f16c")]
fn widen(src: &[u8], dst: &mut [f32]) {
    let (sc, _) = src.as_chunks::<16>();
    let (dc, _) = dst.as_chunks_mut::<8>();
    let done = sc.len().min(dc.len()) * 8;
    for (s8, d8) in sc.iter().zip(dc.iter_mut()) {
        // SAFETY: `s8` is 16 readable bytes; AVX2 and F16C are enabled.
        let v = unsafe { f16x8(s8.as_ptr()) };
        // SAFETY: `d8` is 8 writable f32s; `storeu` needs no alignment.
        unsafe { _mm256_storeu_ps(d8.as_mut_ptr(), v) };
    }
    for (i, d) in dst.iter_mut().enumerate().skip(done) {
        *d = value_at::<F16>(src, i);
    }
}

/// The value at element `i` of a little-endian row (0.0 past the end,
/// which the callers' checked lengths rule out).
#[inline(always)]
pub(super) fn value_at<H: Half>(row: &[u8], i: usize) -> f32 {
    match row.get(2 * i..2 * i + 2) {
        Some(b) => H::value([b[0], b[1]]),
        None => 0.0,
    }
}

/// `R` widened weight rows × `T` widened token rows over `chunks` whole
/// chunks: each pair's `(acc0 + acc1) + (acc2 + acc3)` summed across its
/// lanes (`hsum_ps`'s order) into `y[t] + r`.
///
/// The two halves of every chunk run in two passes over the rows: one
/// half's accumulators, weights and token stay in registers (`R·T + R +
/// 1` of 32), where both at once spilled the accumulators to the stack on
/// every step.
///
/// # Safety
///
/// The CPU must support AVX-512F; each of `w` and `x` must point to
/// `32 · chunks` readable `f32`s, each of `y` to `R` writable ones.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl")]
unsafe fn tile512<const R: usize, const T: usize>(
    w: &[*const f32; R],
    x: &[*const f32; T],
    chunks: usize,
    y: &[*mut f32; T],
) {
    let (wp, xp) = (*w, *x);
    let half = |h: usize| {
        let mut acc = [[_mm512_setzero_ps(); R]; T];
        for i in 0..chunks {
            let at = CHUNK * i + 16 * h;
            // SAFETY: `at + 16 ≤ 32 · chunks` values, readable (the
            // caller's promise); `loadu` needs no alignment.
            let wv: [__m512; R] =
                std::array::from_fn(|r| unsafe { _mm512_loadu_ps(wp[r].add(at)) });
            for (t, at_) in acc.iter_mut().enumerate() {
                // SAFETY: as for the weights.
                let xv = unsafe { _mm512_loadu_ps(xp[t].add(at)) };
                for (a, wr) in at_.iter_mut().zip(wv) {
                    *a = _mm512_fmadd_ps(wr, xv, *a);
                }
            }
        }
        // acc0 + acc1, or acc2 + acc3.
        let mut sum = [[_mm256_setzero_ps(); R]; T];
        for (st, at_) in sum.iter_mut().zip(&acc) {
            for (s, a) in st.iter_mut().zip(at_) {
                let (lo, hi) = halves(*a);
                *s = _mm256_add_ps(lo, hi);
            }
        }
        sum
    };
    let lo = half(0);
    let hi = half(1);
    for ((&yt, lt), ht) in y.iter().zip(&lo).zip(&hi) {
        let mut lanes = [_mm256_setzero_ps(); R];
        for ((l, a), b) in lanes.iter_mut().zip(lt).zip(ht) {
            *l = _mm256_add_ps(*a, *b);
        }
        // SAFETY: `yt` points to `R` writable f32s (the caller's promise).
        unsafe { store_sums(lanes, yt) };
    }
}

/// Each of `lanes` summed across its 8 lanes (`hsum_ps`'s order; four
/// rows at a time with `hsum4`) into `y + r`.
///
/// # Safety
///
/// `y` must point to `R` writable `f32`s.
#[inline]
#[target_feature(enable = "avx2")]
pub(super) unsafe fn store_sums<const R: usize>(lanes: [__m256; R], y: *mut f32) {
    if let Ok(l4) = <[__m256; 4]>::try_from(&lanes[..]) {
        // SAFETY: `y` points to `R` = 4 writable f32s (the caller's
        // promise); `storeu` needs no alignment.
        unsafe { _mm_storeu_ps(y, hsum4(l4)) };
    } else {
        for (r, l) in lanes.into_iter().enumerate() {
            // SAFETY: `y` points to `R` writable f32s and `r < R`.
            unsafe { *y.add(r) = hsum_ps(l) };
        }
    }
}

/// The low and high 8 lanes of a 512-bit vector.
#[inline]
#[target_feature(enable = "avx512f")]
fn halves(v: __m512) -> (__m256, __m256) {
    (
        _mm512_castps512_ps256(v),
        _mm256_castpd_ps(_mm512_extractf64x4_pd::<1>(_mm512_castps_pd(v))),
    )
}

/// One of the four accumulators (`c`: the values `32·i + 8·c ..
/// 32·i + 8·c + 8` of every chunk `i`) of `R` weight rows × `T` widened
/// token rows over `chunks` whole chunks, as `[token][row]`.
///
/// # Safety
///
/// The CPU must support AVX2, FMA and F16C; each of `wp` must point to
/// `64 · chunks` readable bytes, each of `xp` to `32 · chunks` readable
/// `f32`s.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn pass256<const R: usize, const T: usize>(
    wp: [*const u8; R],
    xp: [*const f32; T],
    chunks: usize,
    c: usize,
) -> [[__m256; R]; T] {
    let mut acc = [[_mm256_setzero_ps(); R]; T];
    for i in 0..chunks {
        let mut wv = [_mm256_setzero_ps(); R];
        for (v, p) in wv.iter_mut().zip(wp) {
            // SAFETY: the 16 bytes at `64·i + 16·c` are inside the row
            // (the caller's promise); AVX2 and F16C are enabled.
            *v = unsafe { f16x8(p.add(2 * CHUNK * i + 16 * c)) };
        }
        for (t, at) in acc.iter_mut().enumerate() {
            // SAFETY: the 8 values at `32·i + 8·c` are inside the token row.
            let xv = unsafe { _mm256_loadu_ps(xp[t].add(CHUNK * i + 8 * c)) };
            for (a, wr) in at.iter_mut().zip(wv) {
                *a = _mm256_fmadd_ps(wr, xv, *a);
            }
        }
    }
    acc
}

/// `R` weight rows × `T` widened token rows over `chunks` whole chunks:
/// each pair's `(acc0 + acc1) + (acc2 + acc3)` summed across its lanes
/// (`hsum_ps`) into `y[t] + r`, the four accumulators in four passes so
/// that one pass's `R·T` of them, its `R` weights and a token fit AVX2's
/// 16 registers.
///
/// # Safety
///
/// The CPU must support AVX2, FMA and F16C; each of `w` must point to
/// `64 · chunks` readable bytes, each of `x` to `32 · chunks` readable
/// `f32`s, each of `y` to `R` writable ones.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn tile256<const R: usize, const T: usize>(
    w: &[*const u8; R],
    x: &[*const f32; T],
    chunks: usize,
    y: &[*mut f32; T],
) {
    // SAFETY: the caller's promises (here and for the three other passes).
    let a0 = unsafe { pass256::<R, T>(*w, *x, chunks, 0) };
    // SAFETY: as above.
    let a1 = unsafe { pass256::<R, T>(*w, *x, chunks, 1) };
    let mut a01 = [[_mm256_setzero_ps(); R]; T];
    for ((s, p), q) in a01.iter_mut().zip(&a0).zip(&a1) {
        for ((s, p), q) in s.iter_mut().zip(p).zip(q) {
            *s = _mm256_add_ps(*p, *q);
        }
    }
    // In memory while the last two passes run: kept in registers, the
    // sums crowded the passes' accumulators, which then spilled on every
    // step.
    std::hint::black_box(&mut a01);
    // SAFETY: as above.
    let a2 = unsafe { pass256::<R, T>(*w, *x, chunks, 2) };
    // SAFETY: as above.
    let a3 = unsafe { pass256::<R, T>(*w, *x, chunks, 3) };
    for (((&yt, s), p), q) in y.iter().zip(&a01).zip(&a2).zip(&a3) {
        let mut lanes = [_mm256_setzero_ps(); R];
        for (((l, s), p), q) in lanes.iter_mut().zip(s).zip(p).zip(q) {
            *l = _mm256_add_ps(*s, _mm256_add_ps(*p, *q));
        }
        // SAFETY: `yt` points to `R` writable f32s (the caller's promise).
        unsafe { store_sums(lanes, yt) };
    }
}

/// Which tile shape a product runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Tiles {
    /// 4 rows × 6 tokens of 512-bit accumulators.
    Avx512,
    /// 2 rows × 6 tokens of 256-bit accumulators.
    Avx2,
}

impl Tiles {
    /// Tokens widened at once: every row group runs over them before the
    /// next block.
    ///
    /// * AVX-512: 48. The block's activations (48 × 4 bytes per value:
    ///   288 KiB for rows of 1,536) stay in L2 while every row group, its
    ///   weights in L1, runs over them (96 measured the same on a Zen 5).
    /// * AVX2: 6, one tile. A tile's two rows use each activation vector
    ///   for only two multiply-adds, so with a larger block the
    ///   activations streaming from L2 held the tiles back; one tile's
    ///   tokens stay in L1 (for rows up to about 1,300 values), and the
    ///   weights, used six times each, stream instead. One Zen 3 core,
    ///   48 tokens (`GEMM_SPEED_ONLY=f16 GEMM_SPEED_SHAPE=1536,576,48
    ///   cargo run --release -p fak-kernels --example gemm_speed`):
    ///   1.61 ms at 6, 1.91 at 12, 1.94 at 24, 2.43 at 48; `[576 ×
    ///   1536]`: 2.22, 2.20, 2.51, 2.87 ms. SmolLM2-135M F16's prefill of
    ///   256 tokens, 2 threads: 288 against 221 tok/s, BF16 329 against
    ///   283 (`fak bench model`, alternated three times).
    fn token_block(self) -> usize {
        match self {
            Tiles::Avx512 => 48,
            Tiles::Avx2 => 6,
        }
    }
}

/// The F16 or BF16 product `out[t * out_stride + j] = dot(w_row(j),
/// a_row(t))` (`g.nb`: the row length `n`, the blocks being single
/// values; `w`: `[n_rows, n]`, `a`: `[n_tok, n]`, both little-endian
/// values of format `H`).
///
/// ```text
///   per block of Tiles::token_block() tokens (widened to f32 once):
///     per group of rows (4 on AVX-512, 2 on AVX2; weights stay in L1):
///       per 6 tokens of the block: one tile
/// ```
///
/// # Safety
///
/// The CPU must support AVX2, FMA and F16C, and AVX-512F for
/// [`Tiles::Avx512`]; the lengths must have been validated (`w` and
/// `a` whole rows, `out` long enough for `out_stride`).
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn gemm<H: Half>(tiles: Tiles, g: &GemmArgs<'_>, out: &mut [f32]) {
    let n = g.nb;
    let row = 2 * n;
    let chunks = n / CHUNK;
    let whole = chunks * CHUNK;
    let wrow = |j: usize| g.w.get(j * row..(j + 1) * row).unwrap_or(&[]);
    // `vdpbf16ps` for BF16 where the CPU has it (AVX-512 tiles only).
    let dp = H::PAIRS && tiles == Tiles::Avx512 && is_x86_feature_detected!("avx512bf16");
    ACTS.with_borrow_mut(|xs| {
        let token_block = tiles.token_block();
        // 64-byte aligned, so that no 512-bit load of a token splits a
        // cache line.
        let len = token_block.min(g.n_tok) * n;
        xs.resize(len + 16, 0.0);
        let off = xs.as_ptr().align_offset(64).min(16);
        let xs = &mut xs[off..off + len];
        for b0 in (0..g.n_tok).step_by(token_block) {
            let tb = (g.n_tok - b0).min(token_block);
            let raw = g.a.get(b0 * row..(b0 + tb) * row).unwrap_or(&[]);
            let mut range = Exps::EMPTY;
            for t in 0..tb {
                let a = raw.get(t * row..(t + 1) * row).unwrap_or(&[]);
                if let Some(dst) = xs.get_mut(t * n..(t + 1) * n) {
                    if H::PAIRS {
                        gemm_bf16::widen_pairs(a, dst);
                        if dp {
                            range = range.join(Exps::of(a));
                        }
                    } else {
                        widen(a, dst);
                    }
                }
            }
            let block = Block {
                n_rows: g.n_rows,
                tokens: tb,
                n,
                chunks,
                whole,
            };
            match tiles {
                Tiles::Avx512 if H::PAIRS => {
                    let mut o = Outputs {
                        out: &mut *out,
                        b0,
                        stride: g.out_stride,
                    };
                    let dp = dp.then_some(range);
                    // SAFETY: the caller's CPU guarantee for this tile shape
                    // (`Isa::Avx512` includes AVX-512VL); `dp` only where the
                    // CPU has AVX-512 BF16 (checked above).
                    unsafe { gemm_bf16::rows512(block, g.w, (xs, raw), dp, &mut o) }
                }
                Tiles::Avx512 => WIDE.with_borrow_mut(|wide| {
                    // 64-byte aligned, as the tokens.
                    wide.resize(R512 * n + 16, 0.0);
                    let off = wide.as_ptr().align_offset(64).min(16);
                    let wide = &mut wide[off..off + R512 * n];
                    let mut o = Outputs {
                        out: &mut *out,
                        b0,
                        stride: g.out_stride,
                    };
                    // SAFETY: the caller's CPU guarantee for this tile shape
                    // (`Isa::Avx512` includes AVX-512VL).
                    unsafe { rows512(block, &wrow, xs, wide, &mut o) }
                }),
                Tiles::Avx2 => {
                    let mut o = Outputs {
                        out: &mut *out,
                        b0,
                        stride: g.out_stride,
                    };
                    rows256::<H>(block, g.w, xs, &mut o)
                }
            }
        }
    });
}

/// A block of widened tokens against every weight row.
#[derive(Clone, Copy)]
pub(super) struct Block {
    pub(super) n_rows: usize,
    /// Tokens in the block.
    pub(super) tokens: usize,
    /// Values per row.
    pub(super) n: usize,
    /// Whole 32-value chunks per row.
    pub(super) chunks: usize,
    /// Values in them (`32 · chunks`); the rest of a row is its tail.
    pub(super) whole: usize,
}

/// `hsum_ps` of four vectors at once, lane `r` of the result the sum of
/// `v[r]`: the same additions of the same operands in the same order,
/// `((a0+a4)+(a2+a6)) + ((a1+a5)+(a3+a7))`, four rows to a vector.
#[inline]
#[target_feature(enable = "avx2")]
pub(super) fn hsum4(v: [__m256; 4]) -> __m128 {
    let q = v.map(|x| _mm_add_ps(_mm256_castps256_ps128(x), _mm256_extractf128_ps::<1>(x)));
    // Transpose: c[k] holds lane k of q[0..4].
    let t0 = _mm_unpacklo_ps(q[0], q[1]);
    let t1 = _mm_unpacklo_ps(q[2], q[3]);
    let t2 = _mm_unpackhi_ps(q[0], q[1]);
    let t3 = _mm_unpackhi_ps(q[2], q[3]);
    let c0 = _mm_movelh_ps(t0, t1);
    let c1 = _mm_movehl_ps(t1, t0);
    let c2 = _mm_movelh_ps(t2, t3);
    let c3 = _mm_movehl_ps(t3, t2);
    _mm_add_ps(_mm_add_ps(c0, c2), _mm_add_ps(c1, c3))
}

/// Where a block's outputs go: token `t`'s row `j` is `out[(b0 + t) *
/// stride + j]`.
pub(super) struct Outputs<'o> {
    pub(super) out: &'o mut [f32],
    pub(super) b0: usize,
    pub(super) stride: usize,
}

/// Pointers to `K` rows of `len` elements of `v` (rows back to back), the
/// first at row `first`, or `None` where the last would run past the end.
#[inline]
pub(super) fn row_ptrs<E, const K: usize>(
    v: &[E],
    len: usize,
    first: usize,
) -> Option<[*const E; K]> {
    if v.len() < (first + K) * len {
        return None;
    }
    let mut p = [v.as_ptr(); K];
    for (k, q) in p.iter_mut().enumerate() {
        // SAFETY: row `first + k` ends inside `v` (checked above).
        *q = unsafe { q.add((first + k) * len) };
    }
    Some(p)
}

impl Outputs<'_> {
    /// Pointers to the outputs of rows `j0..j0 + R` for tokens `t0..t0 +
    /// T` of the block (`R` values from each), or `None` where one falls
    /// outside the output or two tokens' could overlap (`stride < R`).
    #[inline]
    pub(super) fn ptrs<const R: usize, const T: usize>(
        &mut self,
        j0: usize,
        t0: usize,
    ) -> Option<[*mut f32; T]> {
        let at = |t: usize| (self.b0 + t0 + t) * self.stride + j0;
        if self.stride < R || self.out.len() < at(T.saturating_sub(1)) + R {
            return None;
        }
        let mut p = [self.out.as_mut_ptr(); T];
        for (t, q) in p.iter_mut().enumerate() {
            // SAFETY: `at(t) + R ≤ at(T - 1) + R ≤ out.len()` (checked).
            *q = unsafe { q.add(at(t)) };
        }
        Some(p)
    }
}

/// F16 on AVX-512: every group of [`R512`] rows, widened once into `wide`
/// (`[R512, n]`), against the block's widened tokens `xs` (`[b.tokens,
/// n]`), [`T512`] at a time, into `o` (BF16 runs [`gemm_bf16::rows512`]).
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl")]
fn rows512<'w>(
    b: Block,
    wrow: &impl Fn(usize) -> &'w [u8],
    xs: &[f32],
    wide: &mut [f32],
    o: &mut Outputs<'_>,
) {
    /// Rows `j0..j0 + R` (widened: `w`, `[R, n]`) × tokens `t0..t0 + T`.
    #[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl")]
    fn run<const R: usize, const T: usize>(
        (j0, t0): (usize, usize),
        w: &[f32],
        xs: &[f32],
        b: Block,
        o: &mut Outputs<'_>,
    ) {
        let n = b.n;
        let (Some(wp), Some(xp), Some(yp)) = (
            row_ptrs::<f32, R>(w, n, 0),
            row_ptrs::<f32, T>(xs, n, t0),
            o.ptrs::<R, T>(j0, t0),
        ) else {
            return;
        };
        // SAFETY: AVX-512F is enabled; every row and token row holds `n ≥
        // 32 · chunks` values, and every token's `R` outputs are inside
        // `out` and apart from the others' (checked above).
        unsafe { tile512::<R, T>(&wp, &xp, b.chunks, &yp) };
        if b.whole == n {
            // Each `end` would add an empty tail: `f32 → f64 → f32` is exact
            // and an empty `f64` sum is −0.0, the identity of addition
            // (`end_of_an_empty_tail_is_the_identity`).
            return;
        }
        for t in 0..T {
            let xt = xs
                .get((t0 + t) * n + b.whole..(t0 + t + 1) * n)
                .unwrap_or(&[]);
            for r in 0..R {
                let wt = w.get(r * n + b.whole..(r + 1) * n).unwrap_or(&[]);
                let at = (o.b0 + t0 + t) * o.stride + j0 + r;
                if let Some(y) = o.out.get_mut(at) {
                    *y = F16::end(*y, wt, xt);
                }
            }
        }
    }
    #[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl")]
    fn group<const R: usize>(j0: usize, w: &[f32], xs: &[f32], b: Block, o: &mut Outputs<'_>) {
        for t0 in (0..b.tokens).step_by(T512) {
            let at = (j0, t0);
            match (b.tokens - t0).min(T512) {
                1 => run::<R, 1>(at, w, xs, b, o),
                2 => run::<R, 2>(at, w, xs, b, o),
                3 => run::<R, 3>(at, w, xs, b, o),
                4 => run::<R, 4>(at, w, xs, b, o),
                5 => run::<R, 5>(at, w, xs, b, o),
                _ => run::<R, 6>(at, w, xs, b, o),
            }
        }
    }
    let n = wide.len() / R512;
    for j0 in (0..b.n_rows).step_by(R512) {
        let rows = (b.n_rows - j0).min(R512);
        for (r, dst) in wide.chunks_exact_mut(n).take(rows).enumerate() {
            widen(wrow(j0 + r), dst);
        }
        let w = wide.get(..rows * n).unwrap_or(&[]);
        match rows {
            1 => group::<1>(j0, w, xs, b, o),
            2 => group::<2>(j0, w, xs, b, o),
            3 => group::<3>(j0, w, xs, b, o),
            _ => group::<4>(j0, w, xs, b, o),
        }
    }
}

/// Every pair of rows (`w`: every row, `2n` bytes each) against the
/// block's widened tokens `xs` (`[b.tokens, n]`; BF16's pair by pair),
/// [`T256`] at a time, into `o`.
#[target_feature(enable = "avx2,fma,f16c")]
fn rows256<H: Half>(b: Block, w: &[u8], xs: &[f32], o: &mut Outputs<'_>) {
    /// Rows `j0..j0 + R` × tokens `t0..t0 + T`.
    #[target_feature(enable = "avx2,fma,f16c")]
    fn run<H: Half, const R: usize, const T: usize>(
        (j0, t0): (usize, usize),
        w: &[u8],
        xs: &[f32],
        b: Block,
        o: &mut Outputs<'_>,
    ) {
        let n = b.n;
        let (Some(wp), Some(xp), Some(yp)) = (
            row_ptrs::<u8, R>(w, 2 * n, j0),
            row_ptrs::<f32, T>(xs, n, t0),
            o.ptrs::<R, T>(j0, t0),
        ) else {
            return;
        };
        // SAFETY: AVX2, FMA and F16C are enabled; every row and token row
        // holds `n ≥ 32 · chunks` values, and every token's `R` outputs
        // are inside `out` and apart from the others' (checked above).
        unsafe {
            if H::PAIRS {
                gemm_bf16::tile256::<R, T>(&wp, &xp, b.chunks, &yp);
            } else {
                tile256::<R, T>(&wp, &xp, b.chunks, &yp);
            }
        }
        if b.whole == n {
            // Each `end` would add an empty tail: the identity
            // (`end_of_an_empty_tail_is_the_identity`).
            return;
        }
        tails::<H, R, T>((j0, t0), w, xs, b, o);
    }
    #[target_feature(enable = "avx2,fma,f16c")]
    fn group<H: Half, const R: usize>(
        j0: usize,
        w: &[u8],
        xs: &[f32],
        b: Block,
        o: &mut Outputs<'_>,
    ) {
        for t0 in (0..b.tokens).step_by(T256) {
            let at = (j0, t0);
            match (b.tokens - t0).min(T256) {
                1 => run::<H, R, 1>(at, w, xs, b, o),
                2 => run::<H, R, 2>(at, w, xs, b, o),
                3 => run::<H, R, 3>(at, w, xs, b, o),
                4 => run::<H, R, 4>(at, w, xs, b, o),
                5 => run::<H, R, 5>(at, w, xs, b, o),
                _ => run::<H, R, 6>(at, w, xs, b, o),
            }
        }
    }
    for j0 in (0..b.n_rows).step_by(R256) {
        match b.n_rows - j0 {
            1 => group::<H, 1>(j0, w, xs, b, o),
            _ => group::<H, 2>(j0, w, xs, b, o),
        }
    }
}

/// The dot products' ends for rows `j0..j0 + R` (raw, in `w`: every
/// row, `2n` bytes each) × tokens `t0..t0 + T` of the block (`xs`,
/// widened), over the elements past the last whole chunk, whose products
/// the tiles left out: each output, the lanes' sum, becomes [`Half::end`]
/// of it.
pub(super) fn tails<H: Half, const R: usize, const T: usize>(
    (j0, t0): (usize, usize),
    w: &[u8],
    xs: &[f32],
    b: Block,
    o: &mut Outputs<'_>,
) {
    let (n, row) = (b.n, 2 * b.n);
    for t in 0..T {
        let xt = xs
            .get((t0 + t) * n + b.whole..(t0 + t + 1) * n)
            .unwrap_or(&[]);
        for r in 0..R {
            let wr = w.get((j0 + r) * row..(j0 + r + 1) * row).unwrap_or(&[]);
            let mut wt = [0.0f32; CHUNK];
            for (i, v) in wt.iter_mut().enumerate().take(xt.len()) {
                *v = value_at::<H>(wr, b.whole + i);
            }
            let at = (o.b0 + t0 + t) * o.stride + j0 + r;
            if let Some(y) = o.out.get_mut(at) {
                *y = H::end(*y, &wt[..xt.len().min(CHUNK)], xt);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The AVX-512 tiles store the lanes' sum itself when a row has no
    /// tail: that is each type's `end` over an empty tail, for every
    /// value (signed zeros, subnormals, infinities, NaN).
    #[test]
    fn end_of_an_empty_tail_is_the_identity() {
        let values = [
            0.0,
            -0.0,
            1.5,
            -2.0e-40,
            3.0e38,
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::NAN,
        ];
        for h in values {
            assert_eq!(F16::end(h, &[], &[]).to_bits(), h.to_bits(), "F16, {h}");
            assert_eq!(Bf16::end(h, &[], &[]).to_bits(), h.to_bits(), "BF16, {h}");
        }
    }
}
