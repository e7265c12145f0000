//! AVX-512 VNNI tile of the packed Q4_0, IQ4_NL, Q4_1, Q5_1 and IQ4_XS products
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
//!                   acc[t] = the AVX2 tile's float end ([`end`])
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
//! A whole tile of 8 tokens runs two neighbouring groups at once in
//! 512-bit registers ([`tile_pair`], [`tile_pair_scaled`]), as the Q8_0
//! and k-quant tiles do:
//!
//! ```text
//!   groups g, g+1; per block b, chunk c:
//!     n = [ 32 nibble bytes of g | 32 of g+1 ]        (one 512-bit value)
//!     u0, u1 = n & 15, (n >> 4) & 15   (IQ4: levels + 128 by shuffle)
//!     per token t: s[t] = dpbusd(dpbusd(s[t], u0, x_t[2c]), u1, x_t[2c+1])
//!   per token t: acc[t] = end16(acc[t], s[t] − offset, [d_g | d_g+1], ...)
//! ```
//!
//! Each lane's integer and float steps are the 256-bit tile's
//! ([`Q4Format::END`] describes the float step once for both widths), so
//! the bits do not change; the pair halves the broadcasts, loop steps and
//! float ends per weight. Against 64 tokens of a `[2048 × 1536]` matrix
//! on one Zen 5 core (`cargo bench -p fak-kernels --bench packed_k -- "x
//! 64 tok"`), Q4_0 went from 176 to 305 GMAC/s, Q4_1 from 157 to 273,
//! IQ4_NL from 177 to 301 and IQ4_XS from 192 to 347. Fewer tokens
//! (decode, a draft being verified) keep the 256-bit tile.
//!
//! The tests of `tests/packed_q4.rs` compare every ISA the CPU runs with
//! the scalar `vec_dot`, so an AVX-512 VNNI machine checks this tile.

use std::arch::x86_64::*;

use super::layout::{iq4xs, q4, PackedArgs, PackedFormat, QK, QK_K, STEPS};
use super::q4_avx2::{
    byte_scales, end, gemm_q4, halves, levels, q8k_d, q8k_sub_sum, quad_at, sums_at, End, Iq4Nl,
    Iq4Xs, Mxfp4, Nibbles, Q4Format, Q4Tile, Q40, Q41, Q4_TILE, Q51,
};
use super::tiles::{
    act_rows, bit_to, bit_to16, blocks_at, bytes32, load, prefetch_ahead, store16, Weights,
};
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

    #[inline]
    #[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
    unsafe fn pair<F: Q4Format<B, A>, const B: usize, const A: usize>(
        g: &PackedArgs<'_>,
        groups: [&[[u8; B]]; 2],
        (t0, col): (usize, usize),
        sums: &[i32],
        weights: Weights,
        out: &mut [f32],
    ) {
        let (acts, _) = g.a.as_chunks::<A>();
        let nb = g.nb;
        let a: [&[[u8; A]]; Q4_TILE] = act_rows(acts, nb, t0);
        let at = sums_at(t0, 0, nb);
        let s = sums.get(at..at + nb * Q4_TILE).unwrap_or(&[]);
        let y = match F::NIBBLES {
            Nibbles::ScaledLevels => tile_pair_scaled::<F, B, A>(groups, a, weights),
            Nibbles::Plain | Nibbles::Levels | Nibbles::Five => {
                tile_pair::<F, B, A>(groups, a, s, weights)
            }
        };
        for (t, v) in y.into_iter().enumerate() {
            store16(out, (t0 + t) * g.out_stride + col, v);
        }
    }
}

/// The float end of one block for one token over two groups' 16 lanes
/// (row `r` of the first group in lane `r`, of the second in lane
/// `8 + r`): [`end`]'s steps for `F`, lane for lane, in 512-bit
/// registers, with the same arguments.
#[inline]
#[target_feature(enable = "avx512f")]
fn end16<F: Q4Format<B, A>, const B: usize, const A: usize>(
    acc: __m512,
    sumi: __m512i,
    dw: __m512,
    mw: __m512,
    ab: &[u8; A],
) -> __m512 {
    let s = _mm512_cvtepi32_ps(sumi);
    let term = match F::END {
        End::SumFirst => _mm512_mul_ps(_mm512_mul_ps(s, dw), half16_at(ab, 0)),
        End::ScalesFirst => _mm512_mul_ps(_mm512_mul_ps(dw, half16_at(ab, 0)), s),
        End::WithMin => {
            let (dx, sx) = (half16_at(ab, 0), half16_at(ab, 2));
            _mm512_add_ps(
                _mm512_mul_ps(_mm512_mul_ps(dw, dx), s),
                _mm512_mul_ps(mw, sx),
            )
        }
        End::SubScaled => _mm512_mul_ps(_mm512_mul_ps(dw, mw), s),
    };
    _mm512_add_ps(acc, term)
}

/// The f16 at byte `at` of an activation block, broadcast as f32 (the
/// same conversion as the AVX2 tile's).
#[inline]
#[target_feature(enable = "avx512f")]
fn half16_at<const A: usize>(ab: &[u8; A], at: usize) -> __m512 {
    let bits = match ab.get(at..at + 2) {
        Some(h) => u16::from_le_bytes([h[0], h[1]]),
        None => 0,
    };
    _mm512_cvtph_ps(_mm256_set1_epi16(bits as i16))
}

/// 16 × f16 at byte `at` of two group blocks (8 each), as f32: the first
/// group's rows in lanes 0..8.
#[inline]
#[target_feature(enable = "avx512f")]
fn halves16<const B: usize>(b: [&[u8; B]; 2], at: usize) -> __m512 {
    let mut v = [0u8; 32];
    for (h, blk) in b.into_iter().enumerate() {
        if let (Some(s), Some(o)) = (blk.get(at..at + 16), v.get_mut(16 * h..16 * h + 16)) {
            o.copy_from_slice(s);
        }
    }
    // SAFETY: 32 readable bytes; `loadu` needs no alignment.
    _mm512_cvtph_ps(unsafe { _mm256_loadu_si256(v.as_ptr().cast()) })
}

/// 16 signed byte scales at byte `at` of two group blocks (8 each), as
/// f32: the first group's rows in lanes 0..8.
#[inline]
#[target_feature(enable = "avx512f")]
fn byte_scales16<const B: usize>(b: [&[u8; B]; 2], at: usize) -> __m512 {
    let mut v = [0u8; 16];
    for (h, blk) in b.into_iter().enumerate() {
        if let (Some(s), Some(o)) = (blk.get(at..at + 8), v.get_mut(8 * h..8 * h + 8)) {
            o.copy_from_slice(s);
        }
    }
    // SAFETY: 16 readable bytes; `loadu` needs no alignment.
    let x = unsafe { _mm_loadu_si128(v.as_ptr().cast()) };
    _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(x))
}

/// 32 bytes at byte `at` of each of two group blocks: the first in the
/// low 256 bits.
#[inline]
#[target_feature(enable = "avx512f")]
fn load_pair<const B: usize>(b: [&[u8; B]; 2], at: usize) -> __m512i {
    let (lo, hi) = (load(bytes32(b[0], at)), load(bytes32(b[1], at)));
    _mm512_inserti64x4::<1>(_mm512_castsi256_si512(lo), hi)
}

/// [`tile_vnni`] over two neighbouring groups at once for [`Q4_TILE`]
/// tokens (Q4_0, Q4_1, Q5_1, IQ4_NL): each step's nibbles of both groups share
/// one 512-bit `vpdpbusd` per token, every lane's integer and float steps
/// those of the 256-bit tile. Returns each token's 16 row results.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
fn tile_pair<F: Q4Format<B, A>, const B: usize, const A: usize>(
    w: [&[[u8; B]]; 2],
    a: [&[[u8; A]]; Q4_TILE],
    sums: &[i32],
    weights: Weights,
) -> [__m512; Q4_TILE] {
    let low = _mm512_set1_epi8(15);
    let table = _mm512_broadcast_i32x4(_mm256_castsi256_si128(levels(F::LEVELS, 128)));
    let mut acc = [_mm512_setzero_ps(); Q4_TILE];
    for (b, (w0, w1)) in w[0].iter().zip(w[1]).enumerate() {
        if weights == Weights::Streamed {
            prefetch_ahead(w0);
            prefetch_ahead(w1);
        }
        let ab = blocks_at(&a, b);
        let h = match F::NIBBLES {
            Nibbles::Five => load_pair([w0, w1], F::HIGH),
            _ => _mm512_setzero_si512(),
        };
        // Step `k`'s quants from its nibbles `u`.
        let code = |u: __m512i, k: usize| match F::NIBBLES {
            Nibbles::Plain => u,
            Nibbles::Five => _mm512_or_si512(u, bit_to16(h, k, 4)),
            Nibbles::Levels | Nibbles::ScaledLevels => _mm512_shuffle_epi8(table, u),
        };
        let mut s = [_mm512_setzero_si512(); Q4_TILE];
        for c in 0..STEPS / 2 {
            let n = load_pair([w0, w1], F::NIB + 32 * c);
            let u0 = code(_mm512_and_si512(n, low), 2 * c);
            let u1 = code(_mm512_and_si512(_mm512_srli_epi16::<4>(n), low), 2 * c + 1);
            for t in 0..Q4_TILE {
                let x0 = _mm512_set1_epi32(quad_at(ab[t], F::XOFF, 2 * c));
                let x1 = _mm512_set1_epi32(quad_at(ab[t], F::XOFF, 2 * c + 1));
                s[t] = _mm512_dpbusd_epi32(s[t], u0, x0);
                s[t] = _mm512_dpbusd_epi32(s[t], u1, x1);
            }
        }
        let dw = halves16([w0, w1], q4::D);
        let mw = if F::OFFSET != 0 {
            dw
        } else {
            halves16([w0, w1], q4::M)
        };
        let offs: &[i32; Q4_TILE] = sums
            .get(b * Q4_TILE..(b + 1) * Q4_TILE)
            .and_then(|o| o.try_into().ok())
            .unwrap_or(&[0; Q4_TILE]);
        for t in 0..Q4_TILE {
            let mut sumi = s[t];
            if F::OFFSET != 0 {
                sumi = _mm512_sub_epi32(sumi, _mm512_set1_epi32(offs[t]));
            }
            acc[t] = end16::<F, B, A>(acc[t], sumi, dw, mw, ab[t]);
        }
    }
    acc
}

/// [`tile_pair`] for IQ4_XS: [`tile_scaled_vnni`]'s steps over two
/// neighbouring groups in 512-bit registers.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
fn tile_pair_scaled<F: Q4Format<B, A>, const B: usize, const A: usize>(
    w: [&[[u8; B]]; 2],
    a: [&[[u8; A]]; Q4_TILE],
    weights: Weights,
) -> [__m512; Q4_TILE] {
    let low = _mm512_set1_epi8(15);
    let table = _mm512_broadcast_i32x4(_mm256_castsi256_si128(levels(F::LEVELS, 128)));
    let mut acc = [_mm512_setzero_ps(); Q4_TILE];
    for (b, (w0, w1)) in w[0].iter().zip(w[1]).enumerate() {
        if weights == Weights::Streamed {
            prefetch_ahead(w0);
            prefetch_ahead(w1);
        }
        let ab = blocks_at(&a, b);
        let dw = halves16([w0, w1], iq4xs::D);
        let dd: [__m512; Q4_TILE] =
            std::array::from_fn(|t| _mm512_mul_ps(dw, _mm512_set1_ps(q8k_d(ab[t]))));
        for j in 0..QK_K / QK {
            let ls = byte_scales16([w0, w1], iq4xs::LS + 8 * j);
            let mut s = [_mm512_setzero_si512(); Q4_TILE];
            for c in 0..STEPS / 2 {
                let n = load_pair([w0, w1], F::NIB + 32 * (4 * j + c));
                let u0 = _mm512_shuffle_epi8(table, _mm512_and_si512(n, low));
                let u1 =
                    _mm512_shuffle_epi8(table, _mm512_and_si512(_mm512_srli_epi16::<4>(n), low));
                for t in 0..Q4_TILE {
                    let x0 = _mm512_set1_epi32(quad_at(ab[t], F::XOFF, 8 * j + 2 * c));
                    let x1 = _mm512_set1_epi32(quad_at(ab[t], F::XOFF, 8 * j + 2 * c + 1));
                    s[t] = _mm512_dpbusd_epi32(s[t], u0, x0);
                    s[t] = _mm512_dpbusd_epi32(s[t], u1, x1);
                }
            }
            for t in 0..Q4_TILE {
                let off = _mm512_set1_epi32(128 * q8k_sub_sum(ab[t], j));
                acc[t] = end16::<F, B, A>(acc[t], _mm512_sub_epi32(s[t], off), dd[t], ls, ab[t]);
            }
        }
    }
    acc
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
    let table = levels(F::LEVELS, 128);
    let mut acc = [_mm256_setzero_ps(); T];
    for (b, wb) in w.iter().enumerate() {
        if weights == Weights::Streamed {
            prefetch_ahead(wb);
        }
        let ab = blocks_at(&a, b);
        let h = match F::NIBBLES {
            Nibbles::Five => load(bytes32(wb, F::HIGH)),
            _ => _mm256_setzero_si256(),
        };
        // Step `k`'s quants from its nibbles `u`.
        let code = |u: __m256i, k: usize| match F::NIBBLES {
            Nibbles::Plain => u,
            Nibbles::Five => _mm256_or_si256(u, bit_to(h, k, 4)),
            Nibbles::Levels | Nibbles::ScaledLevels => _mm256_shuffle_epi8(table, u),
        };
        let mut s = [_mm256_setzero_si256(); T];
        for c in 0..STEPS / 2 {
            let n = load(bytes32(wb, F::NIB + 32 * c));
            let u0 = code(_mm256_and_si256(n, low), 2 * c);
            let u1 = code(_mm256_and_si256(_mm256_srli_epi16::<4>(n), low), 2 * c + 1);
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
            acc[t] = end::<F, B, A>(acc[t], sumi, dw, mw, ab[t]);
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
    let table = levels(F::LEVELS, 128);
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
                acc[t] = end::<F, B, A>(acc[t], _mm256_sub_epi32(s[t], off), dd[t], ls, ab[t]);
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
            PackedFormat::Q5_1 => {
                gemm_q4::<Q51, Vnni, { q4::BYTES_5 }, { BlockQ8_1::BYTES }>(g, out)
            }
            PackedFormat::IQ4NL => {
                gemm_q4::<Iq4Nl, Vnni, { q4::BYTES_0 }, { BlockQ8_0::BYTES }>(g, out)
            }
            PackedFormat::MXFP4 => {
                gemm_q4::<Mxfp4, Vnni, { q4::BYTES_0 }, { BlockQ8_0::BYTES }>(g, out)
            }
            PackedFormat::IQ4XS => {
                gemm_q4::<Iq4Xs, Vnni, { iq4xs::BYTES }, { BlockQ8_K::BYTES }>(g, out)
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
