//! The BF16 register tiles of [`super::gemm_half`]: BF16's dot product
//! (`scalar::vec_dot_bf16`, `avx2::dot_bf16`) runs 16 `f32` lanes over
//! each chunk of 32 values, lane `j` fusing the products of the pair of
//! elements `2j + 1`, then `2j`, which is what one `vdpbf16ps` does to
//! each lane. So a tile can run:
//!
//! ```text
//!   AVX-512 BF16: acc[t][r] = vdpbf16ps(acc[t][r], w[r], x[t])   (raw bf16,
//!                 32 values per register, nothing widened)
//!   AVX-512F:     acc = fma(w_odd, x_odd, acc); acc = fma(w_even, x_even, acc)
//!                 (w_odd = word & 0xffff0000, w_even = word << 16: one zmm)
//!   AVX2:         the same on 8 lanes, pairs 0..8 then 8..16 in two passes
//!   end:          lanes l + (l + 8), then `hsum_ps`'s order, then the tail
//! ```
//!
//! The widened activations are stored pair by pair: per chunk, the odd
//! values of pairs 0..16, then the even ones (the tail past the last whole
//! chunk in order), so a tile loads them as they are.
//!
//! `vdpbf16ps` flushes subnormal inputs and results to zero, the fused
//! steps do not; otherwise the two are the same bits (measured on 32 M
//! random lanes on a Zen 4, subnormals and underflowing products
//! included, against the flushing emulation; docs/journal). So the
//! instruction runs only where nothing can be subnormal ([`Exps::exact`]):
//! every value of a tile is a multiple of `2^(e − 7)` for `e` the exponent
//! of its operand's smallest nonzero value (8-bit mantissas), so every
//! product and every partial sum is a multiple of `2^(e_w + e_x − 14)`,
//! and if that is at least `2^−126` (and no input is subnormal) no nonzero
//! partial sum is subnormal. The largest exponents keep every sum finite.
//! Elsewhere (tiny or subnormal values, infinities) the fused steps run.
//!
//! The tiles stay lean around their loops, as F16's do (`gemm_half`):
//! pointers in, the sums stored straight into the output, no closures or
//! arrays returned, AVX-512VL enabled so that the accumulators may use
//! all 32 registers. One Zen 4 core, BF16 `[1536 × 576] × 256` tokens of
//! model-range values: 70–90 G multiply-adds/s through `vdpbf16ps`
//! against 31–40 on the FMA tiles before (`[576 × 1536]`: 92–102 against
//! 25–35); SmolLM2-135M BF16's prefill of 256 tokens, 2 threads: 1,120
//! against 630 tok/s (medians of 5 alternations).

use std::arch::x86_64::*;

use super::avx2::bf16_pairs;
use super::gemm_half::{row_ptrs, store_sums, tails, Bf16, Block, Outputs, CHUNK, R512, T512};

/// The range of a set of bf16 values: the bits of the smallest and
/// largest magnitude among the nonzero ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Exps {
    /// `|v|`'s bits, the smallest over the nonzero values (`0x7fff` when
    /// there are none).
    min: u16,
    /// `|v|`'s bits, the largest (0 when every value is zero).
    max: u16,
}

impl Exps {
    /// No values.
    pub(crate) const EMPTY: Exps = Exps {
        min: 0x7fff,
        max: 0,
    };

    /// The range of both.
    pub(crate) fn join(self, o: Exps) -> Exps {
        Exps {
            min: self.min.min(o.min),
            max: self.max.max(o.max),
        }
    }

    /// The range of the little-endian bf16 values of `row`, 16 at a time.
    #[target_feature(enable = "avx2")]
    pub(crate) fn of(row: &[u8]) -> Exps {
        let (chunks, rest) = row.as_chunks::<32>();
        let abs = _mm256_set1_epi16(0x7fff);
        let (mut lo, mut hi) = (abs, _mm256_setzero_si256());
        for c in chunks {
            // SAFETY: `c` is 32 readable bytes; `loadu` needs no alignment.
            let v = _mm256_and_si256(unsafe { _mm256_loadu_si256(c.as_ptr().cast()) }, abs);
            hi = _mm256_max_epu16(hi, v);
            // Zeros count as the largest magnitude for the minimum.
            let zero = _mm256_cmpeq_epi16(v, _mm256_setzero_si256());
            lo = _mm256_min_epu16(lo, _mm256_or_si256(v, _mm256_and_si256(zero, abs)));
        }
        let (mut l, mut h) = ([0u16; 16], [0u16; 16]);
        // SAFETY: `l` and `h` are 32 writable bytes each.
        unsafe {
            _mm256_storeu_si256(l.as_mut_ptr().cast(), lo);
            _mm256_storeu_si256(h.as_mut_ptr().cast(), hi);
        }
        let mut e = Exps {
            min: l.into_iter().min().unwrap_or(0x7fff),
            max: h.into_iter().max().unwrap_or(0),
        };
        for b in rest.as_chunks::<2>().0 {
            let m = u16::from_le_bytes(*b) & 0x7fff;
            if m != 0 {
                e.min = e.min.min(m);
            }
            e.max = e.max.max(m);
        }
        e
    }

    /// Whether `vdpbf16ps` over weights of range `self` and activations of
    /// range `x` gives the fused steps' bits: no subnormal, infinite or NaN
    /// value, the smallest exponents summing to at least `−112` (products
    /// on a grid of `2^−126` or coarser) and the largest to at most `100`
    /// (sums of fewer than `2^20` products stay finite).
    pub(crate) fn exact(self, x: Exps, n: usize) -> bool {
        let finite_normal = |e: Exps| e.min >= 0x0080 && e.max < 0x7f80;
        let exp = |bits: u16| i32::from(bits >> 7) - 127;
        if !(finite_normal(self) && finite_normal(x)) || n >= 1 << 20 {
            return false;
        }
        // All-zero operands make every product zero.
        self.max == 0
            || x.max == 0
            || (exp(self.min) + exp(x.min) >= -112 && exp(self.max) + exp(x.max) <= 100)
    }
}

/// Widens the little-endian bf16 `src` into `dst` pair by pair (the
/// module docs' layout): per whole chunk the odd values of its 16 pairs,
/// then the even ones; the rest in order. Exact.
#[inline]
#[target_feature(enable = "avx2")]
pub(crate) fn widen_pairs(src: &[u8], dst: &mut [f32]) {
    let (sc, _) = src.as_chunks::<64>();
    let (dc, _) = dst.as_chunks_mut::<CHUNK>();
    let done = sc.len().min(dc.len()) * CHUNK;
    for (s, d) in sc.iter().zip(dc.iter_mut()) {
        for h in 0..2 {
            // SAFETY: `s` is 64 readable bytes, so the 32 at `32·h` are
            // inside it; `loadu` needs no alignment.
            let v = unsafe { _mm256_loadu_si256(s.as_ptr().add(32 * h).cast()) };
            let (odd, even) = bf16_pairs(v);
            // SAFETY: `d` is 32 writable f32s, so the 8 at `8·h` and at
            // `16 + 8·h` are inside it; `storeu` needs no alignment.
            unsafe {
                _mm256_storeu_ps(d.as_mut_ptr().add(8 * h), odd);
                _mm256_storeu_ps(d.as_mut_ptr().add(16 + 8 * h), even);
            }
        }
    }
    for (i, d) in dst.iter_mut().enumerate().skip(done) {
        *d = match src.get(2 * i..2 * i + 2) {
            Some(b) => crate::fp::bf16_to_f32(u16::from_le_bytes([b[0], b[1]])),
            None => 0.0,
        };
    }
}

/// `R` raw bf16 weight rows × `T` pair-widened token rows over `chunks`
/// whole chunks on AVX-512F (the fused steps): each pair's lanes summed
/// (`l + (l + 8)`, then `hsum_ps`'s order) into `y[t] + r`.
///
/// # Safety
///
/// The CPU must support AVX-512F/VL and FMA; each of `w` must point to
/// `64 · chunks` readable bytes, each of `x` to `32 · chunks` readable
/// `f32`s, each of `y` to `R` writable ones.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl")]
pub(super) unsafe fn tile512<const R: usize, const T: usize>(
    w: &[*const u8; R],
    x: &[*const f32; T],
    chunks: usize,
    y: &[*mut f32; T],
) {
    let (wp, xp) = (*w, *x);
    let mut acc = [[_mm512_setzero_ps(); R]; T];
    let high = _mm512_set1_epi32(0xffff_0000_u32 as i32);
    for i in 0..chunks {
        // Odd values first, then even ones: one register of weights per row
        // at a time keeps R·T accumulators, R weights and a token in the
        // 32 registers.
        for part in 0..2 {
            let mut wv = [_mm512_setzero_ps(); R];
            for (v, p) in wv.iter_mut().zip(wp) {
                // SAFETY: every row holds `chunks` chunks of 64 bytes (the
                // caller's promise); `loadu` needs no alignment.
                let b = unsafe { _mm512_loadu_si512(p.add(2 * CHUNK * i).cast()) };
                let b = if part == 0 {
                    _mm512_and_si512(b, high)
                } else {
                    _mm512_slli_epi32::<16>(b)
                };
                *v = _mm512_castsi512_ps(b);
            }
            for (t, at) in acc.iter_mut().enumerate() {
                // SAFETY: every token row holds `chunks` chunks of 32
                // values, so the 16 at `32·i + 16·part` are inside it.
                let xv = unsafe { _mm512_loadu_ps(xp[t].add(CHUNK * i + 16 * part)) };
                for (a, wr) in at.iter_mut().zip(wv) {
                    *a = _mm512_fmadd_ps(wr, xv, *a);
                }
            }
        }
    }
    // SAFETY: the caller's promise for `y`.
    unsafe { store_folded(&acc, y) };
}

/// [`tile512`] through `vdpbf16ps`, over raw bf16 token rows `a`: the
/// same bits wherever the operands' ranges pass [`Exps::exact`] (the
/// caller's to check).
///
/// # Safety
///
/// The CPU must support AVX-512F/VL and AVX-512 BF16; each of `w` and `a`
/// must point to `64 · chunks` readable bytes, each of `y` to `R`
/// writable `f32`s.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512bf16")]
pub(super) unsafe fn tile_dp<const R: usize, const T: usize>(
    w: &[*const u8; R],
    a: &[*const u8; T],
    chunks: usize,
    y: &[*mut f32; T],
) {
    let (wp, ap) = (*w, *a);
    let mut acc = [[_mm512_setzero_ps(); R]; T];
    for i in 0..chunks {
        let mut wv = [bh(_mm512_setzero_si512()); R];
        for (v, p) in wv.iter_mut().zip(wp) {
            // SAFETY: every row holds `chunks` chunks of 64 bytes (the
            // caller's promise); `loadu` needs no alignment.
            *v = bh(unsafe { _mm512_loadu_si512(p.add(2 * CHUNK * i).cast()) });
        }
        for (t, at) in acc.iter_mut().enumerate() {
            // SAFETY: as above, for the token rows.
            let xv = bh(unsafe { _mm512_loadu_si512(ap[t].add(2 * CHUNK * i).cast()) });
            for (a, wr) in at.iter_mut().zip(wv) {
                *a = _mm512_dpbf16_ps(*a, wr, xv);
            }
        }
    }
    // SAFETY: the caller's promise for `y`.
    unsafe { store_folded(&acc, y) };
}

/// Each accumulator's 16 lanes summed (`l + (l + 8)`, then `hsum_ps`'s
/// order) into `y[t] + r` ([`store_sums`] of the folded lanes).
///
/// # Safety
///
/// Each of `y` must point to `R` writable `f32`s.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl")]
unsafe fn store_folded<const R: usize, const T: usize>(acc: &[[__m512; R]; T], y: &[*mut f32; T]) {
    for (&yt, at) in y.iter().zip(acc) {
        let mut lanes = [_mm256_setzero_ps(); R];
        for (l, a) in lanes.iter_mut().zip(at) {
            *l = fold(*a);
        }
        // SAFETY: `yt` points to `R` writable f32s (the caller's promise).
        unsafe { store_sums(lanes, yt) };
    }
}

/// Every group of [`R512`] raw bf16 weight rows (`w`: every row, `2n`
/// bytes each) against the block's tokens, [`T512`] at a time, into `o`:
/// `xs` the block's tokens widened pair by pair (`[b.tokens, n]`), `a` as
/// they came (`b.tokens` rows of `2n` bytes); `dp`: the block's
/// activations' range, where the CPU has AVX-512 BF16 (a group takes
/// `vdpbf16ps` where [`Exps::exact`] passes its rows' range with it; the
/// rows' range is taken just before their tiles read them, so the rows
/// come from memory once).
///
/// # Safety
///
/// The CPU must support AVX2, FMA, F16C and AVX-512F/VL, and AVX-512 BF16
/// if `dp` is set.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl")]
pub(super) unsafe fn rows512(
    b: Block,
    w: &[u8],
    (xs, a): (&[f32], &[u8]),
    dp: Option<Exps>,
    o: &mut Outputs<'_>,
) {
    /// Rows `j0..j0 + R` × tokens `t0..t0 + T`, through `vdpbf16ps` if
    /// `dp`.
    ///
    /// # Safety
    ///
    /// AVX-512 BF16 if `dp`.
    #[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl")]
    unsafe fn run<const R: usize, const T: usize>(
        (j0, t0, dp): (usize, usize, bool),
        w: &[u8],
        (xs, a): (&[f32], &[u8]),
        b: Block,
        o: &mut Outputs<'_>,
    ) {
        let n = b.n;
        let (Some(wp), Some(yp)) = (row_ptrs::<u8, R>(w, 2 * n, j0), o.ptrs::<R, T>(j0, t0)) else {
            return;
        };
        if dp {
            let Some(ap) = row_ptrs::<u8, T>(a, 2 * n, t0) else {
                return;
            };
            // SAFETY: AVX-512 BF16 (the caller's promise with `dp`); every
            // row holds `chunks` chunks, every token's `R` outputs are
            // inside `out` and apart from the others' (checked above).
            unsafe { tile_dp::<R, T>(&wp, &ap, b.chunks, &yp) };
        } else {
            let Some(xp) = row_ptrs::<f32, T>(xs, n, t0) else {
                return;
            };
            // SAFETY: as for `tile_dp`, without its instruction.
            unsafe { tile512::<R, T>(&wp, &xp, b.chunks, &yp) };
        }
        if b.whole == n {
            // Each `end` would add an empty tail: the identity
            // (`end_of_an_empty_tail_is_the_identity`).
            return;
        }
        tails::<Bf16, R, T>((j0, t0), w, xs, b, o);
    }
    /// # Safety
    ///
    /// AVX-512 BF16 if `dp` is set.
    #[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl")]
    unsafe fn group<const R: usize>(
        j0: usize,
        w: &[u8],
        xa: (&[f32], &[u8]),
        b: Block,
        dp: Option<Exps>,
        o: &mut Outputs<'_>,
    ) {
        // `vdpbf16ps` where it gives the fused steps' bits for every row
        // of the group and every token of the block.
        let dp = dp.is_some_and(|xe| {
            let row = 2 * b.n;
            let rows = w.get(j0 * row..(j0 + R) * row).unwrap_or(&[]);
            Exps::of(rows).exact(xe, b.whole)
        });
        for t0 in (0..b.tokens).step_by(T512) {
            let at = (j0, t0, dp);
            // SAFETY: `dp` only where the caller's `dp` is set: its promise.
            unsafe {
                match (b.tokens - t0).min(T512) {
                    1 => run::<R, 1>(at, w, xa, b, o),
                    2 => run::<R, 2>(at, w, xa, b, o),
                    3 => run::<R, 3>(at, w, xa, b, o),
                    4 => run::<R, 4>(at, w, xa, b, o),
                    5 => run::<R, 5>(at, w, xa, b, o),
                    _ => run::<R, 6>(at, w, xa, b, o),
                }
            }
        }
    }
    for j0 in (0..b.n_rows).step_by(R512) {
        let xa = (xs, a);
        // SAFETY: the caller's promise, passed on.
        unsafe {
            match (b.n_rows - j0).min(R512) {
                1 => group::<1>(j0, w, xa, b, dp, o),
                2 => group::<2>(j0, w, xa, b, dp, o),
                3 => group::<3>(j0, w, xa, b, dp, o),
                _ => group::<4>(j0, w, xa, b, dp, o),
            }
        }
    }
}

/// 32 bf16 values from their 64 bytes.
#[inline(always)]
fn bh(v: __m512i) -> __m512bh {
    // SAFETY: both are 64 bytes of plain data, any bits valid.
    unsafe { std::mem::transmute::<__m512i, __m512bh>(v) }
}

/// Lanes `l` and `l + 8` added (the dot product's first fold).
#[inline]
#[target_feature(enable = "avx2,avx512f,avx512vl")]
fn fold(v: __m512) -> __m256 {
    let lo = _mm512_castps512_ps256(v);
    let hi = _mm256_castpd_ps(_mm512_extractf64x4_pd::<1>(_mm512_castps_pd(v)));
    _mm256_add_ps(lo, hi)
}

/// Pairs `8·h .. 8·h + 8` of every chunk of `R` weight rows × `T`
/// pair-widened token rows over `chunks` whole chunks, on AVX2: 8 of the
/// 16 lanes, as `[token][row]`.
///
/// # Safety
///
/// The CPU must support AVX2 and FMA; each of `wp` must point to `64 ·
/// chunks` readable bytes, each of `xp` to `32 · chunks` readable `f32`s.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn pass256<const R: usize, const T: usize>(
    wp: [*const u8; R],
    xp: [*const f32; T],
    chunks: usize,
    h: usize,
) -> [[__m256; R]; T] {
    let mut acc = [[_mm256_setzero_ps(); R]; T];
    for i in 0..chunks {
        for part in 0..2 {
            let mut wv = [_mm256_setzero_ps(); R];
            for (v, p) in wv.iter_mut().zip(wp) {
                // SAFETY: the 32 bytes at `64·i + 32·h` are inside the row
                // (the caller's promise); `loadu` needs no alignment.
                let b = unsafe { _mm256_loadu_si256(p.add(2 * CHUNK * i + 32 * h).cast()) };
                let (odd, even) = bf16_pairs(b);
                *v = if part == 0 { odd } else { even };
            }
            for (t, at) in acc.iter_mut().enumerate() {
                // SAFETY: the 8 values at `32·i + 16·part + 8·h` are inside
                // the token row (the caller's promise).
                let xv = unsafe { _mm256_loadu_ps(xp[t].add(CHUNK * i + 16 * part + 8 * h)) };
                for (a, wr) in at.iter_mut().zip(wv) {
                    *a = _mm256_fmadd_ps(wr, xv, *a);
                }
            }
        }
    }
    acc
}

/// [`tile512`] on AVX2: pairs 0..8 and 8..16 of every chunk in two
/// passes, so that one pass's `R·T` accumulators, `R` weights and a token
/// fit the 16 registers; the two passes' lanes added (`l + (l + 8)`) and
/// summed (`hsum_ps`) into `y[t] + r`.
///
/// # Safety
///
/// The CPU must support AVX2 and FMA; each of `w` must point to `64 ·
/// chunks` readable bytes, each of `x` to `32 · chunks` readable `f32`s,
/// each of `y` to `R` writable ones.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn tile256<const R: usize, const T: usize>(
    w: &[*const u8; R],
    x: &[*const f32; T],
    chunks: usize,
    y: &[*mut f32; T],
) {
    // SAFETY: the caller's promises.
    let lo = unsafe { pass256::<R, T>(*w, *x, chunks, 0) };
    // SAFETY: as above.
    let hi = unsafe { pass256::<R, T>(*w, *x, chunks, 1) };
    for ((&yt, l), h) in y.iter().zip(&lo).zip(&hi) {
        let mut lanes = [_mm256_setzero_ps(); R];
        for ((s, l), h) in lanes.iter_mut().zip(l).zip(h) {
            *s = _mm256_add_ps(*l, *h);
        }
        // SAFETY: `yt` points to `R` writable f32s (the caller's promise).
        unsafe { store_sums(lanes, yt) };
    }
}
#[cfg(test)]
mod tests {
    //! `vdpbf16ps` against the fused steps, on this CPU (where it has
    //! AVX-512 BF16), for the ranges [`Exps::exact`] lets through and for
    //! ranges where the instruction's flushing shows.

    use super::*;

    /// A small deterministic generator (xorshift64).
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }

        /// A bf16 with a random sign and mantissa and an exponent in
        /// `lo..=hi` (unbiased), or zero one time in eight.
        fn bf16(&mut self, lo: i32, hi: i32) -> [u8; 2] {
            let r = self.next();
            if r.is_multiple_of(8) {
                return [0, 0];
            }
            let span = u64::try_from(hi - lo + 1).unwrap_or(1);
            let e = lo + i32::try_from((r >> 8) % span).unwrap_or(0) + 127;
            let bits = ((r >> 40) as u16 & 0x8000) | ((e as u16) << 7) | ((r >> 20) as u16 & 0x7f);
            bits.to_le_bytes()
        }
    }

    /// Four rows against six tokens of `chunks` chunks, with weight and
    /// activation exponents in the given ranges: whether `Exps::exact`
    /// passes them, and whether `vdpbf16ps` gave the fused steps' bits.
    fn case(rng: &mut Rng, chunks: usize, we: (i32, i32), xe: (i32, i32)) -> (bool, bool) {
        let n = CHUNK * chunks;
        let row = |rng: &mut Rng, (lo, hi): (i32, i32)| -> Vec<u8> {
            (0..n).flat_map(|_| rng.bf16(lo, hi)).collect()
        };
        let w: Vec<Vec<u8>> = (0..4).map(|_| row(rng, we)).collect();
        let a: Vec<Vec<u8>> = (0..6).map(|_| row(rng, xe)).collect();
        let mut x = vec![vec![0f32; n]; 6];
        for (xt, at) in x.iter_mut().zip(&a) {
            // SAFETY: the callers check AVX2.
            unsafe { widen_pairs(at, xt) };
        }
        let wp: [*const u8; 4] = std::array::from_fn(|r| w[r].as_ptr());
        let ap: [*const u8; 6] = std::array::from_fn(|t| a[t].as_ptr());
        let xp: [*const f32; 6] = std::array::from_fn(|t| x[t].as_ptr());
        let tile = |dp: bool| -> Vec<u32> {
            let mut y = [0f32; 24];
            let base = y.as_mut_ptr();
            // SAFETY: `4·t + 4 ≤ 24`.
            let yp: [*mut f32; 6] = std::array::from_fn(|t| unsafe { base.add(4 * t) });
            // SAFETY: the callers check AVX-512F/VL, FMA and AVX-512 BF16;
            // every row holds `chunks` chunks; `yp` as above.
            unsafe {
                if dp {
                    tile_dp::<4, 6>(&wp, &ap, chunks, &yp);
                } else {
                    tile512::<4, 6>(&wp, &xp, chunks, &yp);
                }
            }
            y.map(f32::to_bits).to_vec()
        };
        let range = |rows: &[Vec<u8>]| {
            rows.iter().fold(Exps::EMPTY, |e, r| {
                // SAFETY: the callers check AVX2.
                e.join(unsafe { Exps::of(r) })
            })
        };
        let exact = range(&w).exact(range(&a), n);
        (exact, tile(false) == tile(true))
    }

    #[test]
    fn dpbf16_gives_the_fused_bits_wherever_exact_allows() {
        if !(is_x86_feature_detected!("avx512f")
            && is_x86_feature_detected!("avx512vl")
            && is_x86_feature_detected!("avx2")
            && is_x86_feature_detected!("avx512bf16")
            && is_x86_feature_detected!("fma"))
        {
            return;
        }
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        let (mut passed, mut flushed) = (0, 0);
        // (weights, activations) exponent ranges: model-like; both at the
        // bound (smallest exponents −56 + −56 = −112: passes); past it
        // (−57 + −57, −64 + −64: products below 2^−126, rejected); large.
        let ranges = [
            ((-20, 2), (-12, 6)),
            ((-56, -40), (-56, -40)),
            ((-57, -50), (-57, -50)),
            ((-64, -60), (-64, -60)),
            ((30, 50), (30, 50)),
            ((40, 60), (40, 60)),
        ];
        for _ in 0..40 {
            for (we, xe) in ranges {
                for chunks in [1, 3] {
                    let (exact, same) = case(&mut rng, chunks, we, xe);
                    if exact {
                        passed += 1;
                        assert!(same, "vdpbf16ps left the fused steps at {we:?} × {xe:?}");
                    } else if !same {
                        flushed += 1;
                    }
                }
            }
        }
        // Both kinds of case happened: the instruction ran where allowed,
        // and where it was refused it would have given other bits.
        assert!(passed >= 40 * 2 * 2, "{passed} exact cases");
        assert!(flushed > 0, "no case showed the flush");
    }

    #[test]
    fn exact_refuses_subnormal_infinite_and_tiny_ranges() {
        if !is_x86_feature_detected!("avx2") {
            return;
        }
        let of = |v: &[u16]| {
            let bytes: Vec<u8> = v.iter().flat_map(|b| b.to_le_bytes()).collect();
            // SAFETY: AVX2, checked above.
            unsafe { Exps::of(&bytes) }
        };
        let one = of(&[0x3f80]);
        assert!(one.exact(one, 32));
        assert!(!of(&[0x3f80, 0x0001]).exact(one, 32), "subnormal weight");
        assert!(!one.exact(of(&[0x7f80]), 32), "infinity");
        assert!(!one.exact(of(&[0x7fc0]), 32), "NaN");
        // 2^-56 · 2^-56 = 2^-112: its grid 2^-126 is the smallest normal.
        let e = |x: i32| of(&[(((x + 127) as u16) << 7)]);
        assert!(e(-56).exact(e(-56), 32));
        assert!(!e(-57).exact(e(-56), 32));
        assert!(e(50).exact(e(50), 32));
        assert!(!e(51).exact(e(50), 32));
        // All-zero operands: every product is zero.
        assert!(of(&[0, 0x8000]).exact(e(-100), 32));
        assert!(!of(&[0, 0x8000]).exact(of(&[0x0001]), 32));
        assert!(!one.exact(one, 1 << 20));
    }

    #[test]
    fn range_is_the_smallest_and_largest_nonzero_magnitude() {
        if !is_x86_feature_detected!("avx2") {
            return;
        }
        let mut rng = Rng(7);
        for len in [0usize, 1, 15, 16, 17, 40, 576] {
            for _ in 0..20 {
                let v: Vec<u16> = (0..len)
                    .map(|_| match rng.next() % 4 {
                        0 => 0,
                        1 => 0x8000,
                        _ => u16::from_le_bytes(rng.bf16(-130, 127)),
                    })
                    .collect();
                let bytes: Vec<u8> = v.iter().flat_map(|b| b.to_le_bytes()).collect();
                let mags = v.iter().map(|b| b & 0x7fff);
                let want = Exps {
                    min: mags.clone().filter(|&m| m != 0).min().unwrap_or(0x7fff),
                    max: mags.max().unwrap_or(0),
                };
                // SAFETY: AVX2, checked above.
                assert_eq!(unsafe { Exps::of(&bytes) }, want, "{len}");
            }
        }
    }
}
