//! AVX-512 VNNI tile of the packed Q4_0, IQ4_NL, Q4_1 and IQ4_XS products
//! (`super::q4`): the AVX2 tile of [`super::q4_avx2`] with
//! each step's products summed by one `vpdpbusd` (unsigned nibbles
//! against signed activations, straight into `i32`), as the k-quants'
//! [`super::k_vnni`] tile does, instead of `maddubs`, an `i16` add
//! and the block's `madd`.
//!
//! ```text
//!   per block b, chunk c (0..4): u0, u1 = the nibbles of steps 2c, 2c+1
//!     per token t:  s[t] = dpbusd(dpbusd(s[t], u0, x_t[2c]), u1, x_t[2c+1])
//!   per token t:    sumi = s[t] (− 8 · Σ x_t for Q4_0)        exact i32
//!                   acc[t] = the AVX2 tile's float end (`Q4Format::end`)
//! ```
//!
//! IQ4_NL's nibbles become its levels plus 128 (1 to 241, unsigned) by a
//! byte shuffle, and `128 · Σ x` comes off: `Σ (L + 128) · x − 128 · Σ x
//! = Σ L · x`, exactly. IQ4_XS does the same per 32-value sub-block, its
//! `Σ x` from the Q8_K block's own sums (`bsums`, which its quantizer
//! writes with the quants), and takes each sub-block's float step with
//! its own scale ([`tile_scaled_vnni`]).
//!
//! A lane's sum stays below `32 · 241 · 128` in size, so `vpdpbusd` (no
//! saturation) gives the AVX2 tile's exact `sumi`, and the float steps are
//! the same function: every element has the scalar twin's bits. The loop
//! over groups and tokens (chunks, tiles of up to 8 tokens, the sums
//! table, the prefetch) is the AVX2 one's ([`gemm_q4`]).
//!
//! The tests of `tests/packed_q4.rs` compare every ISA the CPU runs with
//! the scalar `vec_dot`, so an AVX-512 VNNI machine checks this tile.

use std::arch::x86_64::*;

use super::layout::{iq4xs, q4, PackedArgs, PackedFormat, QK, QK_K, STEPS};
use super::q4_avx2::{
    byte_scales, gemm_q4, halves, levels, q8k_d, q8k_sub_sum, quad_at, Iq4Nl, Iq4Xs, Nibbles,
    Q4Format, Q4Tile, Q40, Q41, Q4_TILE,
};
use super::tiles::{blocks_at, bytes32, load, prefetch_ahead, Weights};
use crate::blocks::{BlockQ8_0, BlockQ8_1, BlockQ8_K};

/// The VNNI tile kind ([`tile_vnni`]).
struct Vnni;

impl Q4Tile for Vnni {
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
    unsafe fn tile<F: Q4Format<B, A>, const B: usize, const A: usize, const T: usize>(
        w: &[[u8; B]],
        a: [&[[u8; A]]; T],
        sums: &[i32],
        weights: Weights,
    ) -> [__m256; T] {
        tile_vnni::<F, B, A, T>(w, a, sums, weights)
    }
}

/// One group (`w`: its blocks) times `T` activation rows; the 8 row
/// results of each token (the AVX2 tile's arguments and results).
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
fn tile_vnni<F: Q4Format<B, A>, const B: usize, const A: usize, const T: usize>(
    w: &[[u8; B]],
    a: [&[[u8; A]]; T],
    sums: &[i32],
    weights: Weights,
) -> [__m256; T] {
    if matches!(F::NIBBLES, Nibbles::ScaledLevels) {
        return tile_scaled_vnni::<F, B, A, T>(w, a, weights);
    }
    let low = _mm256_set1_epi8(15);
    let table = levels(128);
    let code = |u: __m256i| match F::NIBBLES {
        Nibbles::Plain => u,
        Nibbles::Levels | Nibbles::ScaledLevels => _mm256_shuffle_epi8(table, u),
    };
    let mut acc = [_mm256_setzero_ps(); T];
    for (b, wb) in w.iter().enumerate() {
        if weights == Weights::Streamed {
            prefetch_ahead(wb);
        }
        let ab = blocks_at(&a, b);
        let mut s = [_mm256_setzero_si256(); T];
        for c in 0..STEPS / 2 {
            let n = load(bytes32(wb, F::NIB + 32 * c));
            let u0 = code(_mm256_and_si256(n, low));
            let u1 = code(_mm256_and_si256(_mm256_srli_epi16::<4>(n), low));
            for t in 0..T {
                let x0 = _mm256_set1_epi32(quad_at(ab[t], F::XOFF, 2 * c));
                let x1 = _mm256_set1_epi32(quad_at(ab[t], F::XOFF, 2 * c + 1));
                s[t] = _mm256_dpbusd_epi32(s[t], u0, x0);
                s[t] = _mm256_dpbusd_epi32(s[t], u1, x1);
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
            let mut sumi = s[t];
            if F::OFFSET != 0 {
                sumi = _mm256_sub_epi32(sumi, _mm256_set1_epi32(offs[t]));
            }
            // SAFETY: this function runs with AVX2 and F16C enabled.
            acc[t] = unsafe { F::end(acc[t], sumi, dw, mw, ab[t]) };
        }
    }
    acc
}

/// [`tile_vnni`] for IQ4_XS: per super-block `d_w · d_x`, then per
/// 32-value sub-block its levels plus 128 against the activations, less
/// `128 · Σ x`, and its float step with its own scales.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
fn tile_scaled_vnni<F: Q4Format<B, A>, const B: usize, const A: usize, const T: usize>(
    w: &[[u8; B]],
    a: [&[[u8; A]]; T],
    weights: Weights,
) -> [__m256; T] {
    let low = _mm256_set1_epi8(15);
    let table = levels(128);
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
                let u0 = _mm256_shuffle_epi8(table, _mm256_and_si256(n, low));
                let u1 =
                    _mm256_shuffle_epi8(table, _mm256_and_si256(_mm256_srli_epi16::<4>(n), low));
                for t in 0..T {
                    let x0 = _mm256_set1_epi32(quad_at(ab[t], F::XOFF, 8 * j + 2 * c));
                    let x1 = _mm256_set1_epi32(quad_at(ab[t], F::XOFF, 8 * j + 2 * c + 1));
                    s[t] = _mm256_dpbusd_epi32(s[t], u0, x0);
                    s[t] = _mm256_dpbusd_epi32(s[t], u1, x1);
                }
            }
            for t in 0..T {
                let off = _mm256_set1_epi32(128 * q8k_sub_sum(ab[t], j));
                // SAFETY: this function runs with AVX2 and F16C enabled.
                acc[t] = unsafe { F::end(acc[t], _mm256_sub_epi32(s[t], off), dd[t], ls, ab[t]) };
            }
        }
    }
    acc
}

/// The packed Q4_0, Q4_1, IQ4_NL and IQ4_XS products on VNNI (other formats write
/// nothing).
///
/// # Safety
///
/// The CPU must support AVX2, FMA, F16C and AVX-512 F, BW, VL and VNNI.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
pub(crate) unsafe fn gemm_vnni(g: &PackedArgs<'_>, out: &mut [f32]) {
    // SAFETY: this function runs with every feature the VNNI tile needs.
    unsafe {
        match g.format {
            PackedFormat::Q4_0 => {
                gemm_q4::<Q40, Vnni, { q4::BYTES_0 }, { BlockQ8_0::BYTES }>(g, out)
            }
            PackedFormat::Q4_1 => {
                gemm_q4::<Q41, Vnni, { q4::BYTES_1 }, { BlockQ8_1::BYTES }>(g, out)
            }
            PackedFormat::IQ4NL => {
                gemm_q4::<Iq4Nl, Vnni, { q4::BYTES_0 }, { BlockQ8_0::BYTES }>(g, out)
            }
            PackedFormat::IQ4XS => {
                gemm_q4::<Iq4Xs, Vnni, { iq4xs::BYTES }, { BlockQ8_K::BYTES }>(g, out)
            }
            PackedFormat::Q8_0
            | PackedFormat::Q5_0
            | PackedFormat::Q4K
            | PackedFormat::Q5K
            | PackedFormat::Q6K => {}
        }
    }
}
