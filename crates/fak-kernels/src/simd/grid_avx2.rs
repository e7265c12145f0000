//! AVX2 twin of the codebook formats' integer sums (`crate::grid`).
//!
//! A decoded sub-block is 32 magnitudes and 32 sign bytes (4 `u64`s each,
//! straight from the codebook and sign tables). One sub-block against 32
//! activation quants `a`:
//!
//! ```text
//!   p16 = maddubs(mag, sign(a, sign))             16 × i16: mag·(±a) in pairs   (|.| ≤ 2·62·128)
//!   acc += madd(p16, [2s0+1 ×8 | 2s1+1 ×8])        8 × i32
//!   IQ1: sacc += madd(maddubs(1, a), [shift·scale per 8 values])
//! ```
//!
//! Every step is an exact integer, so the sums equal the scalar
//! `grid::block_sums` for any activation row the quantizer writes (which
//! never holds -128, whose sign flip `sign_epi8` cannot represent); the
//! float step after them is the scalar one. Results are therefore the
//! scalar twin's bits.

use std::arch::x86_64::*;

use crate::blocks::{GridBlock, Sub32};

/// One sub-block's words in registers: magnitudes, sign bytes, the two
/// scales per 16-bit pair lane, and (IQ1) shift times scale per pair lane.
struct SubVecs {
    mag: __m256i,
    sign: __m256i,
    scales: __m256i,
    shifts: Option<__m256i>,
}

/// The register words of `s`; `shifted`: IQ1 (shift signs present).
#[inline]
#[target_feature(enable = "avx2")]
fn sub_vecs(s: &Sub32, shifted: bool) -> SubVecs {
    let q64 = |v: [u64; 4]| _mm256_set_epi64x(v[3] as i64, v[2] as i64, v[1] as i64, v[0] as i64);
    SubVecs {
        mag: q64(s.mag),
        sign: q64(s.sign),
        scales: _mm256_set_m128i(
            _mm_set1_epi16(s.scale(1) as i16),
            _mm_set1_epi16(s.scale(0) as i16),
        ),
        // Pair lanes 4k..4k+3 hold group k's values.
        shifts: shifted.then(|| {
            q64(std::array::from_fn(|k| {
                let v = i32::from(s.shift[k]) * s.scale(k / 2);
                u64::from(v as i16 as u16) * 0x0001_0001_0001_0001
            }))
        }),
    }
}

/// Adds one sub-block against 32 activation quants `av` to the integer
/// lanes `acc` (values) and `sacc` (IQ1 shifts).
#[inline]
#[target_feature(enable = "avx2")]
fn sub_step(v: &SubVecs, av: __m256i, acc: &mut __m256i, sacc: &mut __m256i) {
    let p16 = _mm256_maddubs_epi16(v.mag, _mm256_sign_epi8(av, v.sign));
    *acc = _mm256_add_epi32(*acc, _mm256_madd_epi16(p16, v.scales));
    if let Some(w) = v.shifts {
        let pairs = _mm256_maddubs_epi16(_mm256_set1_epi8(1), av);
        *sacc = _mm256_add_epi32(*sacc, _mm256_madd_epi16(pairs, w));
    }
}

/// `(isum, ssum)` of one decoded super-block against 256 activation quants
/// (`crate::grid::block_sums`).
///
/// * `g`: the decoded weights; `a`: `[256]` Q8_K quants.
///
/// # Safety
///
/// The CPU must support AVX2.
#[target_feature(enable = "avx2")]
pub(crate) unsafe fn block_sums(g: &GridBlock, a: &[i8; 256]) -> (i32, i32) {
    // SAFETY: this function's caller guarantees AVX2.
    let [sums] = unsafe { block_sums_n(g, [a]) };
    sums
}

/// [`block_sums`] of one decoded super-block against `N` tokens' quants at
/// once: each sub-block's words are put in registers once for all of them
/// (prefill reuses one decoded row for every token).
///
/// * `g`: the decoded weights; `a`: `N` rows of `[256]` Q8_K quants.
///
/// # Safety
///
/// The CPU must support AVX2.
#[target_feature(enable = "avx2")]
pub(crate) unsafe fn block_sums_n<const N: usize>(
    g: &GridBlock,
    a: [&[i8; 256]; N],
) -> [(i32, i32); N] {
    let mut acc = [_mm256_setzero_si256(); N];
    let mut sacc = [_mm256_setzero_si256(); N];
    // IQ1 blocks carry a shift on every group; the other formats on none.
    let shifted = g.subs[0].shift[0] != 0;
    for (ib, sub) in g.subs.iter().enumerate() {
        let v = sub_vecs(sub, shifted);
        for t in 0..N {
            // SAFETY: `a[t]` holds 256 bytes; sub-block `ib` is 32 of them
            // (the load is unaligned).
            let av = unsafe { _mm256_loadu_si256(a[t].as_ptr().add(32 * ib).cast()) };
            sub_step(&v, av, &mut acc[t], &mut sacc[t]);
        }
    }
    std::array::from_fn(|t| (hsum(acc[t]), hsum(sacc[t])))
}

/// [`block_sums`] straight from one encoded block: `sub` decodes each
/// sub-block and its words go into registers without a decoded copy of the
/// block in memory (the one-token path: nothing to reuse).
///
/// * `b`: one encoded block; `a`: `[256]` Q8_K quants; `sub`: the format's
///   sub-block decoder; `shifted`: IQ1 (shift signs present).
///
/// # Safety
///
/// The CPU must support AVX2.
#[inline]
#[target_feature(enable = "avx2")]
pub(crate) unsafe fn block_sums_fused<const B: usize>(
    b: &[u8; B],
    a: &[i8; 256],
    sub: impl Fn(&[u8; B], usize) -> Sub32,
    shifted: bool,
) -> (i32, i32) {
    let mut acc = _mm256_setzero_si256();
    let mut sacc = _mm256_setzero_si256();
    for (ib, x) in a.as_chunks::<32>().0.iter().enumerate() {
        // SAFETY: `x` is 32 readable bytes; the load is unaligned.
        let av = unsafe { _mm256_loadu_si256(x.as_ptr().cast()) };
        sub_step(&sub_vecs(&sub(b, ib), shifted), av, &mut acc, &mut sacc);
    }
    (hsum(acc), hsum(sacc))
}

/// The sum of 8 `i32` lanes (exact: the lanes never overflow).
#[inline]
#[target_feature(enable = "avx2")]
fn hsum(v: __m256i) -> i32 {
    let s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256::<1>(v));
    let s = _mm_add_epi32(s, _mm_shuffle_epi32::<0b01_00_11_10>(s));
    let s = _mm_add_epi32(s, _mm_shuffle_epi32::<0b10_11_00_01>(s));
    _mm_cvtsi128_si32(s)
}

/// One sub-block of ternary codes (`0..4`, the value `code − 1`) against
/// 32 activation quants: `|v| · (±a)` in pairs, then pairs of pairs.
#[inline]
#[target_feature(enable = "avx2")]
fn ternary_step(codes: __m256i, av: __m256i, acc: &mut __m256i) {
    let v = _mm256_sub_epi8(codes, _mm256_set1_epi8(1));
    let p16 = _mm256_maddubs_epi16(_mm256_abs_epi8(v), _mm256_sign_epi8(av, v));
    *acc = _mm256_add_epi32(*acc, _mm256_madd_epi16(p16, _mm256_set1_epi16(1)));
}

/// The 32 activation quants of sub-block `ib`.
#[inline]
#[target_feature(enable = "avx2")]
fn quants32(a: &[i8; 256], ib: usize) -> __m256i {
    let x = &a[32 * ib..32 * ib + 32];
    // SAFETY: `x` is 32 readable bytes; the load is unaligned.
    unsafe { _mm256_loadu_si256(x.as_ptr().cast()) }
}

/// TQ2_0's exact sum `Σ (code − 1) · a` over one block, its codes straight
/// from the 2-bit fields ([`crate::grid::block_sums`]'s integer for this
/// format, without the decoded block).
///
/// * `b`: one TQ2_0 block; `a`: its `[256]` Q8_K quants.
#[inline]
#[target_feature(enable = "avx2")]
pub(crate) fn tq2_0_sum(b: &[u8; 66], a: &[i8; 256]) -> i32 {
    let three = _mm256_set1_epi8(3);
    let mut acc = _mm256_setzero_si256();
    for h in 0..2 {
        let q = &b[32 * h..32 * h + 32];
        // SAFETY: `q` is 32 readable bytes; the load is unaligned.
        let q = unsafe { _mm256_loadu_si256(q.as_ptr().cast()) };
        let codes = [
            q,
            _mm256_srli_epi16::<2>(q),
            _mm256_srli_epi16::<4>(q),
            _mm256_srli_epi16::<6>(q),
        ];
        for (l, c) in codes.into_iter().enumerate() {
            ternary_step(_mm256_and_si256(c, three), quants32(a, 4 * h + l), &mut acc);
        }
    }
    hsum(acc)
}

/// Trit `l` of 32 bytes at once, `((b · 3^l mod 256) · 3) >> 8` in 16-bit
/// lanes (`mul_lo`/`mul_hi`: `3^l` for the bytes each 128-bit lane's low
/// and high unpack takes), back in byte order by the lane-wise pack.
#[inline]
#[target_feature(enable = "avx2")]
fn trits32(bytes: __m256i, mul_lo: __m256i, mul_hi: __m256i) -> __m256i {
    let zero = _mm256_setzero_si256();
    let (low, three) = (_mm256_set1_epi16(0xFF), _mm256_set1_epi16(3));
    let lo = _mm256_and_si256(
        _mm256_mullo_epi16(_mm256_unpacklo_epi8(bytes, zero), mul_lo),
        low,
    );
    let hi = _mm256_and_si256(
        _mm256_mullo_epi16(_mm256_unpackhi_epi8(bytes, zero), mul_hi),
        low,
    );
    _mm256_packus_epi16(
        _mm256_srli_epi16::<8>(_mm256_mullo_epi16(lo, three)),
        _mm256_srli_epi16::<8>(_mm256_mullo_epi16(hi, three)),
    )
}

/// TQ1_0's exact sum `Σ (trit − 1) · a` over one block, 32 trits per
/// step (`blocks::ternary`'s element order: sub-blocks 0–4 are trit `l`
/// of `qs[0..32]`; 5 and 6 two trits of `qs[32..48]`; 7 trit 4 of those
/// and the four trits of `qh`).
///
/// * `b`: one TQ1_0 block; `a`: its `[256]` Q8_K quants.
#[inline]
#[target_feature(enable = "avx2")]
pub(crate) fn tq1_0_sum(b: &[u8; 54], a: &[i8; 256]) -> i32 {
    const POW3: [i16; 5] = [1, 3, 9, 27, 81];
    let load16 = |at: usize| -> __m128i {
        let mut v = [0u8; 16];
        v.copy_from_slice(&b[at..at + 16]);
        // SAFETY: `v` is 16 readable bytes; the load is unaligned.
        unsafe { _mm_loadu_si128(v.as_ptr().cast()) }
    };
    let mut acc = _mm256_setzero_si256();
    let q32 = _mm256_set_m128i(load16(16), load16(0));
    for (l, &p) in POW3.iter().enumerate() {
        let m = _mm256_set1_epi16(p);
        ternary_step(trits32(q32, m, m), quants32(a, l), &mut acc);
    }
    let q16 = load16(32);
    let both = _mm256_set_m128i(q16, q16);
    for (ib, l0) in [(5usize, 0usize), (6, 2)] {
        let m = _mm256_set_m128i(_mm_set1_epi16(POW3[l0 + 1]), _mm_set1_epi16(POW3[l0]));
        ternary_step(trits32(both, m, m), quants32(a, ib), &mut acc);
    }
    // Low lane: trit 4 of qs[32..48]; high lane: qh's four bytes four
    // times over, byte 4l + j its trit l of qh[j].
    let qh = u32::from_le_bytes([b[48], b[49], b[50], b[51]]);
    let last = _mm256_set_m128i(_mm_set1_epi32(qh as i32), q16);
    let m81 = _mm_set1_epi16(81);
    let mul_lo = _mm256_set_m128i(_mm_setr_epi16(1, 1, 1, 1, 3, 3, 3, 3), m81);
    let mul_hi = _mm256_set_m128i(_mm_setr_epi16(9, 9, 9, 9, 27, 27, 27, 27), m81);
    ternary_step(trits32(last, mul_lo, mul_hi), quants32(a, 7), &mut acc);
    hsum(acc)
}
