//! AVX2 + FMA + F16C dot-product kernels, twins of the scalar references in
//! `dot` and `dot_k`.
//!
//! Integer work per block is exact, as in the scalar code; what differs is
//! the float accumulation: each block's 8 integer lane sums are converted to
//! `f32` and fused-multiply-added into 8 float lanes, which are added up in
//! a fixed order at the end:
//!
//! ```text
//!   w block ─► 32 × u8/i8 ─┐  maddubs   madd(1)             cvt    fmadd(d)
//!   a block ─► 32 × i8   ──┴─► 16 × i16 ───► 8 × i32 (exact) ──► 8 × f32 ──► acc[8]
//!   end: hsum(acc) = ((a0+a4)+(a2+a6)) + ((a1+a5)+(a3+a7))
//! ```
//!
//! The quantized formats except Q8_K are `1 × 1` tiles of `gemm_avx2`,
//! so the matrix tiles run exactly the same per-element steps and `gemm`
//! is bit-identical to these dot products. They keep one accumulator per
//! element, blocks in order (llama.cpp's AVX2 order); only Q8_K · Q8_K
//! alternates two accumulators (even and odd blocks, added before `hsum`). Min/offset terms (Q4_1/Q5_1 `m·s`, Q4_K/Q5_K
//! `dmin·Σ bsums·m`) are summed separately in scalar `f32`. F32 and F16
//! fuse `f32` products into 4 × 8 lanes, BF16 into 16 lanes of element
//! pairs (as `vdpbf16ps` does), and finish in `f64`, as the scalar twins
//! do.
//!
//! `maddubs` multiplies unsigned by signed bytes. Signed × signed products
//! use `|w| · (a · sign(w))`, which is exact as long as the activation
//! quants lie in `-127..=127` (all that the Q8_0/Q8_1 quantizers produce).
//!
//! Every kernel takes rows that the caller has already validated (whole
//! blocks, equal block counts); extra bytes are ignored, never read past.

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::*;

use super::avx2_blocks::{dot_i8_i8, f32_at, hsum_ps, load16, load32};
use super::gemm_avx2;
use crate::blocks::{
    BlockIQ4_NL, BlockIQ4_XS, BlockMXFP4, BlockQ2_K, BlockQ3_K, BlockQ4_0, BlockQ4_1, BlockQ4_K,
    BlockQ5_0, BlockQ5_1, BlockQ5_K, BlockQ6_K, BlockQ8_0, BlockQ8_1, BlockQ8_K,
};
use crate::dot_rows::block_pairs;
use crate::fp::{bf16_to_f32, f16_to_f32};

/// Sums per-block terms `d · sumi` (8 lanes each) with fused multiply-adds
/// into two accumulators (even blocks into the first, odd into the
/// second, so consecutive blocks do not wait on each other), then adds
/// the two and reduces with [`hsum_ps`].
#[inline]
#[target_feature(enable = "avx2,fma")]
fn accumulate(mut terms: impl Iterator<Item = (__m256, __m256i)>) -> f32 {
    let (mut even, mut odd) = (_mm256_setzero_ps(), _mm256_setzero_ps());
    while let Some((d0, s0)) = terms.next() {
        even = _mm256_fmadd_ps(d0, _mm256_cvtepi32_ps(s0), even);
        let Some((d1, s1)) = terms.next() else {
            break;
        };
        odd = _mm256_fmadd_ps(d1, _mm256_cvtepi32_ps(s1), odd);
    }
    hsum_ps(_mm256_add_ps(even, odd))
}

/// AVX2 twin of [`crate::scalar::vec_dot_q8_0_q8_0`]: a `1 × 1` tile of
/// [`gemm_avx2`] (see its module doc).
///
/// * `w`: Q8_0 row; `a`: Q8_0 row with the same number of blocks.
///
/// # Safety
///
/// The CPU must support AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn dot_q8_0_q8_0(w: &[u8], a: &[u8]) -> f32 {
    // SAFETY: the caller guarantees AVX2, FMA and F16C.
    unsafe {
        gemm_avx2::dot::<gemm_avx2::Q8_0Dot, { BlockQ8_0::BYTES }, { BlockQ8_0::BYTES }>(w, a)
    }
}

/// AVX2 twin of [`crate::scalar::vec_dot_q4_0_q8_0`]: a `1 × 1` tile of
/// [`gemm_avx2`] (see its module doc).
///
/// * `w`: Q4_0 row; `a`: Q8_0 row with the same number of blocks.
///
/// # Safety
///
/// The CPU must support AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn dot_q4_0_q8_0(w: &[u8], a: &[u8]) -> f32 {
    // SAFETY: the caller guarantees AVX2, FMA and F16C.
    unsafe {
        gemm_avx2::dot::<gemm_avx2::Q4_0Dot, { BlockQ4_0::BYTES }, { BlockQ8_0::BYTES }>(w, a)
    }
}

/// AVX2 twin of [`crate::scalar::vec_dot_mxfp4_q8_0`]: a `1 × 1` tile of
/// [`gemm_avx2::MXFP4Dot`] (the doubled E2M1 levels by a byte shuffle).
///
/// * `w`: MXFP4 row; `a`: Q8_0 row with the same number of blocks.
///
/// # Safety
///
/// The CPU must support AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn dot_mxfp4_q8_0(w: &[u8], a: &[u8]) -> f32 {
    // SAFETY: the caller guarantees AVX2, FMA and F16C.
    unsafe {
        gemm_avx2::dot::<gemm_avx2::MXFP4Dot, { BlockMXFP4::BYTES }, { BlockQ8_0::BYTES }>(w, a)
    }
}

/// AVX2 twin of [`crate::scalar::vec_dot_iq4_nl_q8_0`]: a `1 × 1` tile of
/// [`gemm_avx2`] (see its module doc); each index byte picks its level with
/// one byte shuffle.
///
/// * `w`: IQ4_NL row; `a`: Q8_0 row with the same number of blocks.
///
/// # Safety
///
/// The CPU must support AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn dot_iq4_nl_q8_0(w: &[u8], a: &[u8]) -> f32 {
    // SAFETY: the caller guarantees AVX2, FMA and F16C.
    unsafe {
        gemm_avx2::dot::<gemm_avx2::IQ4NLDot, { BlockIQ4_NL::BYTES }, { BlockQ8_0::BYTES }>(w, a)
    }
}

/// AVX2 twin of [`crate::scalar::vec_dot_iq4_xs_q8_k`]: a `1 × 1` tile of
/// [`gemm_avx2`]; each sub-block's scale multiplies its integer sums, and
/// the super-block's float scale is applied once (the scalar reference
/// scales each sub-block in float: the results agree to rounding).
///
/// * `w`: IQ4_XS row; `a`: Q8_K row with the same number of blocks.
///
/// # Safety
///
/// The CPU must support AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn dot_iq4_xs_q8_k(w: &[u8], a: &[u8]) -> f32 {
    // SAFETY: the caller guarantees AVX2, FMA and F16C.
    unsafe {
        gemm_avx2::dot::<gemm_avx2::IQ4XSDot, { BlockIQ4_XS::BYTES }, { BlockQ8_K::BYTES }>(w, a)
    }
}

/// AVX2 twin of [`crate::scalar::vec_dot_q2_k_q8_k`]: a `1 × 1` tile of
/// [`gemm_avx2`] (sub-block scales on the integer sums, the min term from
/// the activation block's sums).
///
/// * `w`: Q2_K row; `a`: Q8_K row with the same number of blocks.
///
/// # Safety
///
/// The CPU must support AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn dot_q2_k_q8_k(w: &[u8], a: &[u8]) -> f32 {
    // SAFETY: the caller guarantees AVX2, FMA and F16C.
    unsafe { gemm_avx2::dot::<gemm_avx2::Q2KDot, { BlockQ2_K::BYTES }, { BlockQ8_K::BYTES }>(w, a) }
}

/// AVX2 twin of [`crate::scalar::vec_dot_q3_k_q8_k`]: a `1 × 1` tile of
/// [`gemm_avx2`] (sub-block scales on the integer sums).
///
/// * `w`: Q3_K row; `a`: Q8_K row with the same number of blocks.
///
/// # Safety
///
/// The CPU must support AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn dot_q3_k_q8_k(w: &[u8], a: &[u8]) -> f32 {
    // SAFETY: the caller guarantees AVX2, FMA and F16C.
    unsafe { gemm_avx2::dot::<gemm_avx2::Q3KDot, { BlockQ3_K::BYTES }, { BlockQ8_K::BYTES }>(w, a) }
}

/// AVX2 twin of [`crate::scalar::vec_dot_q4_1_q8_1`]: a `1 × 1` tile of
/// [`gemm_avx2`] (see its module doc).
///
/// * `w`: Q4_1 row; `a`: Q8_1 row with the same number of blocks.
///
/// # Safety
///
/// The CPU must support AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn dot_q4_1_q8_1(w: &[u8], a: &[u8]) -> f32 {
    // SAFETY: the caller guarantees AVX2, FMA and F16C.
    unsafe {
        gemm_avx2::dot::<gemm_avx2::Q4_1Dot, { BlockQ4_1::BYTES }, { BlockQ8_1::BYTES }>(w, a)
    }
}

/// AVX2 twin of [`crate::scalar::vec_dot_q5_0_q8_0`]: a `1 × 1` tile of
/// [`gemm_avx2`] (see its module doc).
///
/// * `w`: Q5_0 row; `a`: Q8_0 row with the same number of blocks.
///
/// # Safety
///
/// The CPU must support AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn dot_q5_0_q8_0(w: &[u8], a: &[u8]) -> f32 {
    // SAFETY: the caller guarantees AVX2, FMA and F16C.
    unsafe {
        gemm_avx2::dot::<gemm_avx2::Q5_0Dot, { BlockQ5_0::BYTES }, { BlockQ8_0::BYTES }>(w, a)
    }
}

/// AVX2 twin of [`crate::scalar::vec_dot_q5_1_q8_1`]: a `1 × 1` tile of
/// [`gemm_avx2`] (see its module doc).
///
/// * `w`: Q5_1 row; `a`: Q8_1 row with the same number of blocks.
///
/// # Safety
///
/// The CPU must support AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn dot_q5_1_q8_1(w: &[u8], a: &[u8]) -> f32 {
    // SAFETY: the caller guarantees AVX2, FMA and F16C.
    unsafe {
        gemm_avx2::dot::<gemm_avx2::Q5_1Dot, { BlockQ5_1::BYTES }, { BlockQ8_1::BYTES }>(w, a)
    }
}

/// AVX2 twin of [`crate::scalar::vec_dot_q8_k_q8_k`].
///
/// * `w`, `a`: Q8_K rows with the same number of super-blocks.
///
/// # Safety
///
/// The CPU must support AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn dot_q8_k_q8_k(w: &[u8], a: &[u8]) -> f32 {
    let terms = block_pairs::<{ BlockQ8_K::BYTES }, { BlockQ8_K::BYTES }>(w, a).map(|(bw, ba)| {
        let parts = [
            dot_i8_i8(load32::<4, 292>(bw), load32::<4, 292>(ba)),
            dot_i8_i8(load32::<36, 292>(bw), load32::<36, 292>(ba)),
            dot_i8_i8(load32::<68, 292>(bw), load32::<68, 292>(ba)),
            dot_i8_i8(load32::<100, 292>(bw), load32::<100, 292>(ba)),
            dot_i8_i8(load32::<132, 292>(bw), load32::<132, 292>(ba)),
            dot_i8_i8(load32::<164, 292>(bw), load32::<164, 292>(ba)),
            dot_i8_i8(load32::<196, 292>(bw), load32::<196, 292>(ba)),
            dot_i8_i8(load32::<228, 292>(bw), load32::<228, 292>(ba)),
        ];
        let sumi = parts
            .into_iter()
            .fold(_mm256_setzero_si256(), |s, p| _mm256_add_epi32(s, p));
        let d = f32_at::<0, 292>(bw) * f32_at::<0, 292>(ba);
        (_mm256_set1_ps(d), sumi)
    });
    accumulate(terms)
}

/// AVX2 twin of [`crate::scalar::vec_dot_q4_k_q8_k`]: a `1 × 1` tile of
/// [`gemm_avx2`] (see its module doc).
///
/// * `w`: Q4_K row; `a`: Q8_K row with the same number of blocks.
///
/// # Safety
///
/// The CPU must support AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn dot_q4_k_q8_k(w: &[u8], a: &[u8]) -> f32 {
    // SAFETY: the caller guarantees AVX2, FMA and F16C.
    unsafe { gemm_avx2::dot::<gemm_avx2::Q4KDot, { BlockQ4_K::BYTES }, { BlockQ8_K::BYTES }>(w, a) }
}

/// AVX2 twin of [`crate::scalar::vec_dot_q5_k_q8_k`]: a `1 × 1` tile of
/// [`gemm_avx2`] (see its module doc).
///
/// * `w`: Q5_K row; `a`: Q8_K row with the same number of blocks.
///
/// # Safety
///
/// The CPU must support AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn dot_q5_k_q8_k(w: &[u8], a: &[u8]) -> f32 {
    // SAFETY: the caller guarantees AVX2, FMA and F16C.
    unsafe { gemm_avx2::dot::<gemm_avx2::Q5KDot, { BlockQ5_K::BYTES }, { BlockQ8_K::BYTES }>(w, a) }
}

/// AVX2 twin of [`crate::scalar::vec_dot_q6_k_q8_k`]: a `1 × 1` tile of
/// [`gemm_avx2`] (see its module doc).
///
/// * `w`: Q6_K row; `a`: Q8_K row with the same number of blocks.
///
/// # Safety
///
/// The CPU must support AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn dot_q6_k_q8_k(w: &[u8], a: &[u8]) -> f32 {
    // SAFETY: the caller guarantees AVX2, FMA and F16C.
    unsafe { gemm_avx2::dot::<gemm_avx2::Q6KDot, { BlockQ6_K::BYTES }, { BlockQ8_K::BYTES }>(w, a) }
}

/// AVX2/F16C twin of [`crate::scalar::vec_dot_f16`] (same bits): `f32`
/// products of F16C-converted halves, fused into 4 × 8 float lanes, the
/// lanes summed in a fixed order; each product of a tail of fewer than 32
/// elements is then added in `f64`.
///
/// * `w`, `a`: little-endian f16 rows of the same length (bytes).
///
/// # Safety
///
/// The CPU must support AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn dot_f16(w: &[u8], a: &[u8]) -> f32 {
    let mut acc = [_mm256_setzero_ps(); 4];
    let (wc, wt) = w.as_chunks::<64>();
    let (ac, at) = a.as_chunks::<64>();
    for (x, y) in wc.iter().zip(ac) {
        let xs = [
            load16::<0, 64>(x),
            load16::<16, 64>(x),
            load16::<32, 64>(x),
            load16::<48, 64>(x),
        ];
        let ys = [
            load16::<0, 64>(y),
            load16::<16, 64>(y),
            load16::<32, 64>(y),
            load16::<48, 64>(y),
        ];
        for ((s, xv), yv) in acc.iter_mut().zip(xs).zip(ys) {
            *s = _mm256_fmadd_ps(_mm256_cvtph_ps(xv), _mm256_cvtph_ps(yv), *s);
        }
    }
    let lanes = _mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3]));
    let mut sum = f64::from(hsum_ps(lanes));
    for (x, y) in wt.as_chunks::<2>().0.iter().zip(at.as_chunks::<2>().0) {
        let p = f16_to_f32(u16::from_le_bytes(*x)) * f16_to_f32(u16::from_le_bytes(*y));
        sum += f64::from(p);
    }
    sum as f32
}

/// The F32 body: each `C`-byte chunk (32 elements) becomes 4 × 8
/// `f32` lanes through `load`; products are fused into 4 accumulators whose
/// lanes are summed in `f64` at the end; the elements past the last whole
/// chunk go through `tail`, in `f64`.
#[inline]
#[target_feature(enable = "avx2,fma")]
fn float_dot<const C: usize>(
    w: &[u8],
    a: &[u8],
    load: impl Fn(&[u8; C]) -> [__m256; 4],
    tail: impl Fn(&[u8], &[u8]) -> f64,
) -> f32 {
    let mut acc = [_mm256_setzero_ps(); 4];
    let (wc, wt) = w.as_chunks::<C>();
    let (ac, at) = a.as_chunks::<C>();
    for (x, y) in wc.iter().zip(ac) {
        for ((s, xv), yv) in acc.iter_mut().zip(load(x)).zip(load(y)) {
            *s = _mm256_fmadd_ps(xv, yv, *s);
        }
    }
    let lanes = _mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3]));
    (f64::from(hsum_ps(lanes)) + tail(wt, at)) as f32
}

/// AVX2/FMA twin of [`crate::scalar::vec_dot_f32`]: fused `f32` lanes,
/// summed in `f64` at the end.
///
/// * `w`, `a`: little-endian f32 rows of the same length (bytes).
///
/// # Safety
///
/// The CPU must support AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn dot_f32(w: &[u8], a: &[u8]) -> f32 {
    let load = |c: &[u8; 128]| {
        [
            _mm256_castsi256_ps(load32::<0, 128>(c)),
            _mm256_castsi256_ps(load32::<32, 128>(c)),
            _mm256_castsi256_ps(load32::<64, 128>(c)),
            _mm256_castsi256_ps(load32::<96, 128>(c)),
        ]
    };
    let tail = |wt: &[u8], at: &[u8]| {
        let pairs = wt.as_chunks::<4>().0.iter().zip(at.as_chunks::<4>().0);
        pairs
            .map(|(x, y)| f64::from(f32::from_le_bytes(*x) * f32::from_le_bytes(*y)))
            .sum::<f64>()
    };
    float_dot(w, a, load, tail)
}

/// The odd (high half) and even (low half, shifted up) bf16 of each
/// 32-bit word of `v`, as `f32` (exact: bf16 is the top half of an f32).
#[inline]
#[target_feature(enable = "avx2")]
pub(super) fn bf16_pairs(v: __m256i) -> (__m256, __m256) {
    let odd = _mm256_and_si256(v, _mm256_set1_epi32(0xffff_0000_u32 as i32));
    let even = _mm256_slli_epi32::<16>(v);
    (_mm256_castsi256_ps(odd), _mm256_castsi256_ps(even))
}

/// AVX2/FMA twin of [`crate::scalar::vec_dot_bf16`] (same bits): 16 lanes
/// over each 64-byte chunk (two registers of 8; lane `j` the pair of
/// elements `2j`, `2j + 1`), the odd element's product fused first, then
/// the even one's; `(lanes 0..8) + (lanes 8..16)` summed in a fixed order,
/// the tail's products summed apart in `f64` and added once.
///
/// * `w`, `a`: little-endian bf16 rows of the same length (bytes).
///
/// # Safety
///
/// The CPU must support AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn dot_bf16(w: &[u8], a: &[u8]) -> f32 {
    let mut acc = [_mm256_setzero_ps(); 2];
    let (wc, wt) = w.as_chunks::<64>();
    let (ac, at) = a.as_chunks::<64>();
    for (x, y) in wc.iter().zip(ac) {
        let xs = [load32::<0, 64>(x), load32::<32, 64>(x)];
        let ys = [load32::<0, 64>(y), load32::<32, 64>(y)];
        for ((s, xv), yv) in acc.iter_mut().zip(xs).zip(ys) {
            let ((xo, xe), (yo, ye)) = (bf16_pairs(xv), bf16_pairs(yv));
            *s = _mm256_fmadd_ps(xo, yo, *s);
            *s = _mm256_fmadd_ps(xe, ye, *s);
        }
    }
    let lanes = _mm256_add_ps(acc[0], acc[1]);
    let pairs = wt.as_chunks::<2>().0.iter().zip(at.as_chunks::<2>().0);
    let tail = pairs
        .map(|(x, y)| {
            let p = bf16_to_f32(u16::from_le_bytes(*x)) * bf16_to_f32(u16::from_le_bytes(*y));
            f64::from(p)
        })
        .sum::<f64>();
    (f64::from(hsum_ps(lanes)) + tail) as f32
}
