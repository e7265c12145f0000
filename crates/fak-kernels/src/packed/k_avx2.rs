//! AVX2 kernel of the packed k-quants ([`super::k`]): one register
//! lane per weight row, a tile of one 8-row group against `T` tokens.
//!
//! ```text
//!   per super-block, per sub-block j:
//!     per run of I16_STEPS steps k of j (8 for Q4_K, 4 for Q5_K, 2 for
//!     Q6_K):
//!                       u = the step's unsigned quants (8 rows × 4)
//!                       per token t: s[t] += maddubs(u, x_t[k])  (i16, exact)
//!       per token t:    sumi[t] += madd(s[t], sc[j])      (i32, exact)
//!   per token t: summ = Σ_j m[j] · bsum_t[j]; acc[t] = acc[t] + term
//!                (term: Q4_K, Q5_K (d·d_x)·f32(sumi) − (dmin·d_x)·f32(summ),
//!                       Q6_K       (d·d_x)·f32(sumi − summ))
//! ```
//!
//! `u` is unsigned (below 64) and `x` signed, so `maddubs` needs no sign
//! fix-up and its pair sums (at most 2 · 63 · 128) cannot saturate; a run
//! of `I16_STEPS` of them still fits in `i16`, so one `madd` against the
//! sub-block scale replaces a `madd` per step and a `vpmulld` (all three
//! share the two vector-multiply pipes of Zen 3).

use std::arch::x86_64::*;

use super::layout::{gk, q2k, q3k, q4k, q5k, q6k, PackedArgs, PackedFormat, K_STEPS};
use super::tiles::{
    act_rows, bit_to, blocks_at, bytes32, load, prefetch_ahead, quad, store, Weights, TILE_TOKENS,
};
use crate::blocks::BlockQ8_K;

/// Activation (Q8_K) block bytes.
pub(super) const AB: usize = BlockQ8_K::BYTES;

/// Byte offset of a Q8_K block's `bsums`.
pub(super) const BSUMS: usize = 260;

/// How a packed k-quant group block yields its operands.
pub(super) trait KSteps<const B: usize> {
    /// Steps per sub-block (8 for 32 values, 4 for 16).
    const SUB_STEPS: usize;

    /// Steps whose `maddubs` pair sums add up exactly in `i16`: with
    /// quants below `2^b` and activations in `-128..=127`, each pair sum
    /// is at most `2 · (2^b − 1) · 128` in size (3,840 for Q4_K, 7,936
    /// for Q5_K, 16,128 for Q6_K), so 8 (Q4_K), 4 (Q5_K) or 2 (Q6_K) of
    /// them stay below `i16::MAX`.
    const I16_STEPS: usize;

    /// Whether the VNNI two-group tile ([`super::k_vnni`]) also
    /// takes a whole tile of tokens whose weights stream from DRAM, or the
    /// one-group tile does. Measured on a Zen 5 core, 8 tokens against a
    /// DRAM-sized matrix (`cargo bench -p fak-kernels --bench packed_k --
    /// widths`): Q4_K 8.6 ms paired against 9.9 one group at a time; Q5_K
    /// 14.2 against 9.5; Q6_K 8.3 against 5.4; Q2_K 5.2 against 9.0; Q3_K
    /// 7.6 against 10.3.
    const PAIR_STREAMED: bool;

    /// Step `k`'s unsigned quants (8 rows × 4).
    ///
    /// # Safety
    ///
    /// The CPU must support AVX2.
    unsafe fn step(b: &[u8; B], k: usize) -> __m256i;

    /// Sub-block `j`'s scales, one `i32` per row.
    ///
    /// # Safety
    ///
    /// The CPU must support AVX2.
    unsafe fn scales(b: &[u8; B], j: usize) -> __m256i;

    /// `summ` per row for one activation block.
    ///
    /// # Safety
    ///
    /// The CPU must support AVX2.
    unsafe fn offsets(b: &[u8; B], a: &[u8; AB]) -> __m256i;

    /// `summ` as 8 `i16`-pair dot products: pair `m` holds, per row, the
    /// two `i16` factors of activation sums `bsums[2m]` and
    /// `bsums[2m + 1]`, so that `summ = (Σ_m pairs[m] · bsum_pair[m]) <<
    /// OFFSET_SHIFT` (the VNNI tiles of [`super::k_vnni`] sum them
    /// with `vpdpwssd`).
    ///
    /// # Safety
    ///
    /// The CPU must support AVX2.
    unsafe fn offset_pair(b: &[u8; B], m: usize) -> __m256i;

    /// The shift that ends [`KSteps::offset_pair`]'s sum.
    const OFFSET_SHIFT: i32;

    /// The super-block's float term per row, from the exact `sumi` and
    /// `summ` and the activation scale `dx` (see [`super::k`]).
    ///
    /// # Safety
    ///
    /// The CPU must support AVX2 and F16C.
    unsafe fn term(b: &[u8; B], dx: __m256, sumi: __m256i, summ: __m256i) -> __m256;
}

/// 8 bytes of `b` from `at` (zeros past the end, which the layouts rule
/// out) in the low half of a vector.
#[inline]
#[target_feature(enable = "avx2")]
fn bytes8<const B: usize>(b: &[u8; B], at: usize) -> __m128i {
    let mut v = [0u8; 8];
    if let Some(s) = b.get(at..at + 8) {
        v.copy_from_slice(s);
    }
    _mm_set_epi64x(0, i64::from_le_bytes(v))
}

/// 8 × f16 at `at`, as f32.
#[inline]
#[target_feature(enable = "avx2,f16c")]
fn halves<const B: usize>(b: &[u8; B], at: usize) -> __m256 {
    let mut v = [0u8; 16];
    if let Some(s) = b.get(at..at + 16) {
        v.copy_from_slice(s);
    }
    // SAFETY: 16 readable bytes; `loadu` needs no alignment.
    _mm256_cvtph_ps(unsafe { _mm_loadu_si128(v.as_ptr().cast()) })
}

/// `bsums[g]` of a Q8_K block.
#[inline(always)]
fn bsum(a: &[u8; AB], g: usize) -> i32 {
    let at = BSUMS + 2 * g;
    match a.get(at..at + 2) {
        Some(s) => i32::from(i16::from_le_bytes([s[0], s[1]])),
        None => 0,
    }
}

/// The 4-bit quants of step `k` from the nibble chunks at `nib`.
#[inline]
#[target_feature(enable = "avx2")]
fn nibbles<const B: usize>(b: &[u8; B], nib: usize, k: usize) -> __m256i {
    let chunk = load(bytes32(b, nib + 32 * (k / 2)));
    let low = _mm256_set1_epi8(15);
    if k.is_multiple_of(2) {
        _mm256_and_si256(chunk, low)
    } else {
        _mm256_and_si256(_mm256_srli_epi16::<4>(chunk), low)
    }
}

pub(super) struct Q4K;
pub(super) struct Q5K;
pub(super) struct Q6K;
pub(super) struct Q2K;
pub(super) struct Q3K;

/// The scales, mins and float term of a Q4_K group block, which a Q5_K
/// group block shares (the same fields at the same offsets,
/// [`super::layout::q5k`]): the bodies of both formats' [`KSteps`]
/// methods of those names.
mod with_mins {
    use std::arch::x86_64::*;

    use super::{bsum, bytes8, halves, pair16, AB};
    use crate::packed::layout::q4k;

    /// Sub-block `j`'s scales, one `i32` per row.
    #[inline]
    #[target_feature(enable = "avx2")]
    pub(super) fn scales<const B: usize>(b: &[u8; B], j: usize) -> __m256i {
        _mm256_cvtepu8_epi32(bytes8(b, q4k::SC + 8 * j))
    }

    /// `Σ_j m[j] · (bsums[2j] + bsums[2j + 1])` per row.
    #[inline]
    #[target_feature(enable = "avx2")]
    pub(super) fn offsets<const B: usize>(b: &[u8; B], a: &[u8; AB]) -> __m256i {
        let mut s = _mm256_setzero_si256();
        for j in 0..8 {
            let m = _mm256_cvtepu8_epi32(bytes8(b, q4k::M + 8 * j));
            let x = _mm256_set1_epi32(bsum(a, 2 * j) + bsum(a, 2 * j + 1));
            s = _mm256_add_epi32(s, _mm256_mullo_epi32(m, x));
        }
        s
    }

    /// `m[j]` in both halves: `m[j] · (bsums[2j] + bsums[2j + 1])`.
    #[inline]
    #[target_feature(enable = "avx2")]
    pub(super) fn offset_pair<const B: usize>(b: &[u8; B], m: usize) -> __m256i {
        pair16(_mm256_cvtepu8_epi32(bytes8(b, q4k::M + 8 * m)))
    }

    /// `(d · dx) · f32(sumi) − (dmin · dx) · f32(summ)`.
    #[inline]
    #[target_feature(enable = "avx2,f16c")]
    pub(super) fn term<const B: usize>(
        b: &[u8; B],
        dx: __m256,
        sumi: __m256i,
        summ: __m256i,
    ) -> __m256 {
        term_at(b, (q4k::D, q4k::DMIN), dx, (sumi, summ))
    }

    /// `(d · dx) · f32(sumi) − (dmin · dx) · f32(summ)`, with the rows'
    /// `d` and `dmin` at byte offsets `at` (Q2_K's term too).
    #[inline]
    #[target_feature(enable = "avx2,f16c")]
    pub(in super::super) fn term_at<const B: usize>(
        b: &[u8; B],
        at: (usize, usize),
        dx: __m256,
        (sumi, summ): (__m256i, __m256i),
    ) -> __m256 {
        let (d, dm) = (halves(b, at.0), halves(b, at.1));
        _mm256_sub_ps(
            _mm256_mul_ps(_mm256_mul_ps(d, dx), _mm256_cvtepi32_ps(sumi)),
            _mm256_mul_ps(_mm256_mul_ps(dm, dx), _mm256_cvtepi32_ps(summ)),
        )
    }
}

impl KSteps<{ q4k::BYTES }> for Q4K {
    const SUB_STEPS: usize = 8;
    const I16_STEPS: usize = 8;
    const PAIR_STREAMED: bool = true;

    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn step(b: &[u8; q4k::BYTES], k: usize) -> __m256i {
        nibbles(b, q4k::NIB, k)
    }

    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn scales(b: &[u8; q4k::BYTES], j: usize) -> __m256i {
        with_mins::scales(b, j)
    }

    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn offsets(b: &[u8; q4k::BYTES], a: &[u8; AB]) -> __m256i {
        with_mins::offsets(b, a)
    }

    /// `m[j]` in both halves: `m[j] · (bsums[2j] + bsums[2j + 1])`.
    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn offset_pair(b: &[u8; q4k::BYTES], m: usize) -> __m256i {
        with_mins::offset_pair(b, m)
    }

    const OFFSET_SHIFT: i32 = 0;

    /// `(d · dx) · f32(sumi) − (dmin · dx) · f32(summ)`.
    #[inline]
    #[target_feature(enable = "avx2,f16c")]
    unsafe fn term(b: &[u8; q4k::BYTES], dx: __m256, sumi: __m256i, summ: __m256i) -> __m256 {
        with_mins::term(b, dx, sumi, summ)
    }
}

impl KSteps<{ q5k::BYTES }> for Q5K {
    const SUB_STEPS: usize = 8;
    const I16_STEPS: usize = 4;
    const PAIR_STREAMED: bool = false;

    /// The nibbles, with bit `k % 8` of each byte of high-bit chunk
    /// `k / 8` moved to bit 4: one 16-bit shift and a mask (the bits the
    /// shift carries over from the byte's neighbour land below bit 4 for a
    /// left shift of at most 4, above it for a right shift of at most 3).
    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn step(b: &[u8; q5k::BYTES], k: usize) -> __m256i {
        let low = nibbles(b, q5k::NIB, k);
        let high = load(bytes32(b, q5k::HIGH + 32 * (k / 8)));
        _mm256_or_si256(low, bit_to(high, k % 8, 4))
    }

    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn scales(b: &[u8; q5k::BYTES], j: usize) -> __m256i {
        with_mins::scales(b, j)
    }

    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn offsets(b: &[u8; q5k::BYTES], a: &[u8; AB]) -> __m256i {
        with_mins::offsets(b, a)
    }

    /// As Q4_K's.
    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn offset_pair(b: &[u8; q5k::BYTES], m: usize) -> __m256i {
        with_mins::offset_pair(b, m)
    }

    const OFFSET_SHIFT: i32 = 0;

    /// As Q4_K's: `(d · dx) · f32(sumi) − (dmin · dx) · f32(summ)`.
    #[inline]
    #[target_feature(enable = "avx2,f16c")]
    unsafe fn term(b: &[u8; q5k::BYTES], dx: __m256, sumi: __m256i, summ: __m256i) -> __m256 {
        with_mins::term(b, dx, sumi, summ)
    }
}

/// The scales, offsets and float term of the formats with signed 8-bit
/// sub-block scales and quants offset by `2^SHIFT` (Q6_K: 32, Q3_K: 4),
/// their scales at byte `sc` and `d` at byte `d` of a group block: the
/// bodies of both formats' [`KSteps`] methods of those names. The offset
/// `summ = 2^SHIFT · Σ_j sc[j] · bsums[j]` is exact and comes off in
/// integers: `sumi` and `summ` can both be far above 2^24, where
/// converting each to f32 first loses the digits of their difference.
mod signed {
    use std::arch::x86_64::*;

    use super::{bsum, bytes8, halves, pack16, AB};

    /// Sub-block `j`'s scales, one `i32` per row.
    #[inline]
    #[target_feature(enable = "avx2")]
    pub(super) fn scales<const B: usize>(b: &[u8; B], sc: usize, j: usize) -> __m256i {
        _mm256_cvtepi8_epi32(bytes8(b, sc + 8 * j))
    }

    /// `2^SHIFT · Σ_j sc[j] · bsums[j]` per row.
    #[inline]
    #[target_feature(enable = "avx2")]
    pub(super) fn offsets<const B: usize, const SHIFT: i32>(
        b: &[u8; B],
        sc: usize,
        a: &[u8; AB],
    ) -> __m256i {
        let mut s = _mm256_setzero_si256();
        for j in 0..16 {
            let x = _mm256_set1_epi32(bsum(a, j));
            s = _mm256_add_epi32(s, _mm256_mullo_epi32(scales(b, sc, j), x));
        }
        _mm256_sll_epi32(s, _mm_cvtsi32_si128(SHIFT))
    }

    /// `(sc[2m], sc[2m + 1])`: the offset after `OFFSET_SHIFT`.
    #[inline]
    #[target_feature(enable = "avx2")]
    pub(super) fn offset_pair<const B: usize>(b: &[u8; B], sc: usize, m: usize) -> __m256i {
        pack16(scales(b, sc, 2 * m), scales(b, sc, 2 * m + 1))
    }

    /// `(d · dx) · f32(sumi − summ)`.
    #[inline]
    #[target_feature(enable = "avx2,f16c")]
    pub(super) fn term<const B: usize>(
        b: &[u8; B],
        d: usize,
        dx: __m256,
        (sumi, summ): (__m256i, __m256i),
    ) -> __m256 {
        _mm256_mul_ps(
            _mm256_mul_ps(halves(b, d), dx),
            _mm256_cvtepi32_ps(_mm256_sub_epi32(sumi, summ)),
        )
    }
}

impl KSteps<{ q6k::BYTES }> for Q6K {
    const SUB_STEPS: usize = 4;
    const I16_STEPS: usize = 2;
    const PAIR_STREAMED: bool = false;

    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn step(b: &[u8; q6k::BYTES], k: usize) -> __m256i {
        let low = nibbles(b, q6k::NIB, k);
        let high = load(bytes32(b, q6k::HIGH + 32 * (k / 4)));
        let count = _mm_cvtsi32_si128(2 * (k % 4) as i32);
        let h = _mm256_and_si256(_mm256_srl_epi16(high, count), _mm256_set1_epi8(3));
        _mm256_or_si256(low, _mm256_slli_epi16::<4>(h))
    }

    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn scales(b: &[u8; q6k::BYTES], j: usize) -> __m256i {
        signed::scales(b, q6k::SC, j)
    }

    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn offsets(b: &[u8; q6k::BYTES], a: &[u8; AB]) -> __m256i {
        signed::offsets::<_, 5>(b, q6k::SC, a)
    }

    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn offset_pair(b: &[u8; q6k::BYTES], m: usize) -> __m256i {
        signed::offset_pair(b, q6k::SC, m)
    }

    const OFFSET_SHIFT: i32 = 5;

    #[inline]
    #[target_feature(enable = "avx2,f16c")]
    unsafe fn term(b: &[u8; q6k::BYTES], dx: __m256, sumi: __m256i, summ: __m256i) -> __m256 {
        signed::term(b, q6k::D, dx, (sumi, summ))
    }
}

/// The decoded codebook tiles of `super::grid`: signed values offset by
/// `2^SHIFT` (16 or 64) into unsigned bytes, `I16` steps per `i16` run
/// (4 below 32, 1 below 128), signed scales per 16 values read per `SUB`
/// steps (8: the formats whose scales cover 32 values, one multiply per
/// 32 values instead of two); `EIGHTHS` (IQ1): the integers are eighths,
/// so the float term takes `· 0.125` before the scales.
pub(super) struct Grid<const SHIFT: i32, const I16: usize, const EIGHTHS: bool, const SUB: usize>;

impl<const SHIFT: i32, const I16: usize, const EIGHTHS: bool, const SUB: usize>
    KSteps<{ gk::BYTES }> for Grid<SHIFT, I16, EIGHTHS, SUB>
{
    const SUB_STEPS: usize = SUB;
    const I16_STEPS: usize = I16;
    const PAIR_STREAMED: bool = false;

    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn step(b: &[u8; gk::BYTES], k: usize) -> __m256i {
        load(bytes32(b, gk::U + 32 * k))
    }

    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn scales(b: &[u8; gk::BYTES], j: usize) -> __m256i {
        // Sub-block `j` of `SUB` steps starts at 16-value scale `j · SUB / 4`.
        signed::scales(b, gk::SC, j * SUB / 4)
    }

    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn offsets(b: &[u8; gk::BYTES], a: &[u8; AB]) -> __m256i {
        signed::offsets::<{ gk::BYTES }, SHIFT>(b, gk::SC, a)
    }

    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn offset_pair(b: &[u8; gk::BYTES], m: usize) -> __m256i {
        signed::offset_pair(b, gk::SC, m)
    }

    const OFFSET_SHIFT: i32 = SHIFT;

    #[inline]
    #[target_feature(enable = "avx2,f16c")]
    unsafe fn term(b: &[u8; gk::BYTES], dx: __m256, sumi: __m256i, summ: __m256i) -> __m256 {
        if EIGHTHS {
            let eighths = _mm256_mul_ps(
                _mm256_cvtepi32_ps(_mm256_sub_epi32(sumi, summ)),
                _mm256_set1_ps(0.125),
            );
            _mm256_mul_ps(_mm256_mul_ps(halves(b, gk::D), dx), eighths)
        } else {
            signed::term(b, gk::D, dx, (sumi, summ))
        }
    }
}

impl KSteps<{ q2k::BYTES }> for Q2K {
    const SUB_STEPS: usize = 4;
    /// A sub-block: its `maddubs` pair sums are at most `2 · 3 · 128`.
    const I16_STEPS: usize = 4;
    const PAIR_STREAMED: bool = true;

    /// Bits `2(k % 4)..2(k % 4) + 2` of each byte of chunk `k / 4` (the
    /// 16-bit shift carries the neighbour byte's bits above bit 1, where
    /// the mask drops them).
    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn step(b: &[u8; q2k::BYTES], k: usize) -> __m256i {
        let chunk = load(bytes32(b, q2k::Q + 32 * (k / 4)));
        let count = _mm_cvtsi32_si128(2 * (k % 4) as i32);
        _mm256_and_si256(_mm256_srl_epi16(chunk, count), _mm256_set1_epi8(3))
    }

    /// The low nibbles of sub-block `j`'s bytes.
    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn scales(b: &[u8; q2k::BYTES], j: usize) -> __m256i {
        let sm = _mm256_cvtepu8_epi32(bytes8(b, q2k::SM + 8 * j));
        _mm256_and_si256(sm, _mm256_set1_epi32(15))
    }

    /// `Σ_j m[j] · bsums[j]` per row.
    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn offsets(b: &[u8; q2k::BYTES], a: &[u8; AB]) -> __m256i {
        let mut s = _mm256_setzero_si256();
        for j in 0..16 {
            let m = Self::min(b, j);
            s = _mm256_add_epi32(s, _mm256_mullo_epi32(m, _mm256_set1_epi32(bsum(a, j))));
        }
        s
    }

    /// `(m[2m], m[2m + 1])`: `Σ_j m[j] · bsums[j]`.
    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn offset_pair(b: &[u8; q2k::BYTES], m: usize) -> __m256i {
        pack16(Self::min(b, 2 * m), Self::min(b, 2 * m + 1))
    }

    const OFFSET_SHIFT: i32 = 0;

    /// As Q4_K's: `(d · dx) · f32(sumi) − (dmin · dx) · f32(summ)`.
    #[inline]
    #[target_feature(enable = "avx2,f16c")]
    unsafe fn term(b: &[u8; q2k::BYTES], dx: __m256, sumi: __m256i, summ: __m256i) -> __m256 {
        with_mins::term_at(b, (q2k::D, q2k::DMIN), dx, (sumi, summ))
    }
}

impl KSteps<{ q3k::BYTES }> for Q3K {
    const SUB_STEPS: usize = 4;
    /// A sub-block: its `maddubs` pair sums are at most `2 · 7 · 128`.
    const I16_STEPS: usize = 4;
    const PAIR_STREAMED: bool = true;

    /// The low 2 bits as Q2_K's, with bit `k % 8` of each byte of
    /// high-bit chunk `k / 8` moved to bit 2 (a 16-bit shift of at most 2
    /// left or 5 right carries the neighbour byte's bits only below or
    /// above bit 2).
    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn step(b: &[u8; q3k::BYTES], k: usize) -> __m256i {
        let chunk = load(bytes32(b, q3k::Q + 32 * (k / 4)));
        let count = _mm_cvtsi32_si128(2 * (k % 4) as i32);
        let low = _mm256_and_si256(_mm256_srl_epi16(chunk, count), _mm256_set1_epi8(3));
        let high = load(bytes32(b, q3k::HIGH + 32 * (k / 8)));
        _mm256_or_si256(low, bit_to(high, k % 8, 2))
    }

    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn scales(b: &[u8; q3k::BYTES], j: usize) -> __m256i {
        signed::scales(b, q3k::SC, j)
    }

    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn offsets(b: &[u8; q3k::BYTES], a: &[u8; AB]) -> __m256i {
        signed::offsets::<_, 2>(b, q3k::SC, a)
    }

    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn offset_pair(b: &[u8; q3k::BYTES], m: usize) -> __m256i {
        signed::offset_pair(b, q3k::SC, m)
    }

    const OFFSET_SHIFT: i32 = 2;

    #[inline]
    #[target_feature(enable = "avx2,f16c")]
    unsafe fn term(b: &[u8; q3k::BYTES], dx: __m256, sumi: __m256i, summ: __m256i) -> __m256 {
        signed::term(b, q3k::D, dx, (sumi, summ))
    }
}

impl Q2K {
    /// Sub-block `j`'s mins (the high nibbles), one `i32` per row.
    #[inline]
    #[target_feature(enable = "avx2")]
    fn min(b: &[u8; q2k::BYTES], j: usize) -> __m256i {
        _mm256_srli_epi32::<4>(_mm256_cvtepu8_epi32(bytes8(b, q2k::SM + 8 * j)))
    }
}

/// Each row's `i32` scale in both `i16` halves of its lane, so that
/// `madd(s, pair16(sc))` is `sc · (s_lo + s_hi)` per row (scales fit in
/// `i16`: 6 bits for Q4_K, `i8` for Q6_K).
#[inline]
#[target_feature(enable = "avx2")]
fn pair16(sc: __m256i) -> __m256i {
    pack16(sc, sc)
}

/// Each lane's `i32` from `lo` in its low `i16` half and from `hi` in its
/// high half (both fit in `i16`).
#[inline]
#[target_feature(enable = "avx2")]
fn pack16(lo: __m256i, hi: __m256i) -> __m256i {
    let lo = _mm256_and_si256(lo, _mm256_set1_epi32(0xFFFF));
    _mm256_or_si256(lo, _mm256_slli_epi32::<16>(hi))
}

/// One group (`w`: its super-blocks) times `T` activation rows; returns
/// the 8 row results of each token. `STREAMED` weights (from DRAM) are
/// asked for ahead ([`prefetch_ahead`]).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn tile<S: KSteps<B>, const B: usize, const T: usize, const STREAMED: bool>(
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
            // SAFETY: this function runs with AVX2, FMA and F16C enabled
            // (also for the calls below).
            let sc = pair16(unsafe { S::scales(wb, j) });
            for k0 in (0..S::SUB_STEPS).step_by(S::I16_STEPS) {
                let mut s = [_mm256_setzero_si256(); T];
                for kk in k0..k0 + S::I16_STEPS {
                    let k = j * S::SUB_STEPS + kk;
                    // SAFETY: as above.
                    let u = unsafe { S::step(wb, k) };
                    for t in 0..T {
                        let x = _mm256_set1_epi32(quad::<4, AB>(ab[t], k));
                        s[t] = _mm256_add_epi16(s[t], _mm256_maddubs_epi16(u, x));
                    }
                }
                for t in 0..T {
                    sumi[t] = _mm256_add_epi32(sumi[t], _mm256_madd_epi16(s[t], sc));
                }
            }
        }
        for t in 0..T {
            // SAFETY: as above.
            let summ = unsafe { S::offsets(wb, ab[t]) };
            let dx = _mm256_set1_ps(f32::from_le_bytes([ab[t][0], ab[t][1], ab[t][2], ab[t][3]]));
            // SAFETY: as above.
            let v = unsafe { S::term(wb, dx, sumi[t], summ) };
            acc[t] = _mm256_add_ps(acc[t], v);
        }
    }
    acc
}

/// Every group against every whole [`TILE_TOKENS`] of tokens, then the
/// remaining tokens as one narrower tile: a pass verifying a draft of a
/// few tokens unpacks each weight block once per tile, not once per token
/// (one token takes [`gemm_one`]). The first tile over a group streams the weights from DRAM and asks for
/// them ahead; on a Zen 5 core (`FAK_ISA=avx2`), 4 tokens against a
/// DRAM-sized Q6_K matrix took 9.9 ms without the hints, more than two
/// one-token passes with them (4.1 ms).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn gemm_k<S: KSteps<B>, const B: usize>(g: &PackedArgs<'_>, out: &mut [f32]) {
    let nb = g.nb.max(1);
    let (blocks, _) = g.w.as_chunks::<B>();
    for (gi, group) in blocks.chunks_exact(nb).enumerate() {
        group_tiles::<S, B>(g, group, gi * 8, Weights::Streamed, out);
    }
}

/// One group (`group`: its blocks, output rows `col..col + 8`) against
/// every token of `g`, in tiles of [`TILE_TOKENS`] and one narrower tile;
/// `weights`: whether the first tile streams the group's blocks from DRAM
/// ([`Weights::Streamed`]) or finds them in cache (a scratch just written).
/// Each tile instance is called from one place, so that it inlines here.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn group_tiles<S: KSteps<B>, const B: usize>(
    g: &PackedArgs<'_>,
    group: &[[u8; B]],
    col: usize,
    weights: Weights,
    out: &mut [f32],
) {
    const T: usize = TILE_TOKENS;
    let (acts, _) = g.a.as_chunks::<AB>();
    let full = g.n_tok / T * T;
    let streamed = weights == Weights::Streamed;
    for t0 in (0..full).step_by(T) {
        let a: [&[[u8; AB]]; T] = act_rows(acts, g.nb, t0);
        let y = if t0 == 0 && streamed {
            tile::<S, B, T, true>(group, a)
        } else {
            tile::<S, B, T, false>(group, a)
        };
        for (t, v) in y.into_iter().enumerate() {
            store(out, (t0 + t) * g.out_stride + col, v);
        }
    }
    let (rest, streamed) = (g.n_tok - full, full == 0 && streamed);
    let a3: [&[[u8; AB]]; 3] = act_rows(acts, g.nb, full);
    let ys: [__m256; 3] = match (rest, streamed) {
        (0, _) => return,
        (1, _) => pad(tile::<S, B, 1, false>(group, [a3[0]])),
        (2, true) => pad(tile::<S, B, 2, true>(group, [a3[0], a3[1]])),
        (2, false) => pad(tile::<S, B, 2, false>(group, [a3[0], a3[1]])),
        (_, true) => tile::<S, B, 3, true>(group, a3),
        (_, false) => tile::<S, B, 3, false>(group, a3),
    };
    for (t, v) in ys.into_iter().take(rest).enumerate() {
        store(out, (full + t) * g.out_stride + col, v);
    }
}

/// One token (decode) against every group, streaming the weights and
/// asking for them ahead. A function of its own, so that its loop
/// compiles alone: inside [`gemm_k`] a DRAM-sized Q4_K product ran 4%
/// slower (Zen 5, `FAK_ISA=avx2`).
#[inline(never)]
#[target_feature(enable = "avx2,fma,f16c")]
fn gemm_one<S: KSteps<B>, const B: usize>(g: &PackedArgs<'_>, out: &mut [f32]) {
    let nb = g.nb.max(1);
    let (blocks, _) = g.w.as_chunks::<B>();
    let (acts, _) = g.a.as_chunks::<AB>();
    for (gi, group) in blocks.chunks_exact(nb).enumerate() {
        let [v] = tile::<S, B, 1, true>(group, act_rows(acts, g.nb, 0));
        store(out, gi * 8, v);
    }
}

/// `y` followed by zeros, as 3 results.
#[inline(always)]
fn pad<const N: usize>(y: [__m256; N]) -> [__m256; 3] {
    // SAFETY: an all-zero bit pattern is a valid `__m256`.
    let mut out = [unsafe { std::mem::zeroed::<__m256>() }; 3];
    out[..N].copy_from_slice(&y);
    out
}

/// The packed k-quant products of [`crate::packed::packed_gemm`]
/// (`g.format` is Q4_K, Q5_K, Q6_K, Q2_K or Q3_K; other formats write
/// nothing).
///
/// # Safety
///
/// The CPU must support AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn gemm(g: &PackedArgs<'_>, out: &mut [f32]) {
    use super::wide::{self, U};
    let wide = g.n_tok >= wide::MIN_TOKENS;
    match g.format {
        PackedFormat::Q4K if g.n_tok == 1 => gemm_one::<Q4K, { q4k::BYTES }>(g, out),
        PackedFormat::Q5K if g.n_tok == 1 => gemm_one::<Q5K, { q5k::BYTES }>(g, out),
        PackedFormat::Q6K if g.n_tok == 1 => gemm_one::<Q6K, { q6k::BYTES }>(g, out),
        PackedFormat::Q2K if g.n_tok == 1 => gemm_one::<Q2K, { q2k::BYTES }>(g, out),
        PackedFormat::Q3K if g.n_tok == 1 => gemm_one::<Q3K, { q3k::BYTES }>(g, out),
        PackedFormat::Q4K => gemm_k::<Q4K, { q4k::BYTES }>(g, out),
        PackedFormat::Q5K if wide => wide::gemm::<Q5K, { q5k::BYTES }, { q5k::BYTES + U }>(g, out),
        PackedFormat::Q3K if wide => wide::gemm::<Q3K, { q3k::BYTES }, { q3k::BYTES + U }>(g, out),
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
