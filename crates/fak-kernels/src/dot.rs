//! Scalar reference dot products of one weight row with one activation row,
//! following ggml's generic (non-SIMD) `ggml_vec_dot_*` semantics. These are
//! the "twins" that SIMD kernels are tested against.
//!
//! The weight row stays in its own format; the activation row is quantized
//! to [`crate::vec_dot_type`] of the weight type. Per block, the products are
//! summed exactly in integers; only the block's scale is applied in float:
//!
//! ```text
//!   weight block  ─┐
//!                  ├─► sumi = Σ q_w · q_a   (i32, exact)
//!   act. block    ─┘        │
//!                           ▼
//!   sumf += scale(sumi)      (f32, one rounding chain per block, ggml's order)
//! ```
//!
//! | weight | activation | per-block float step (ggml's operation order) |
//! |---|---|---|
//! | Q4_0 | Q8_0 | `sumf += (sumi as f32 * d_w) * d_a` |
//! | Q5_0 | Q8_0 | `sumf += (d_w * d_a) * sumi as f32` |
//! | Q8_0 | Q8_0 | `sumf += sumi as f32 * (d_w * d_a)` |
//! | Q4_1, Q5_1 | Q8_1 | `sumf += (d_w * d_a) * sumi as f32 + m_w * s_a` |
//! | IQ4_NL | Q8_0 | `sumf += (d_a * d_w) * sumi as f32`, `sumi` over the levels |
//! | MXFP4 | Q8_0 | as IQ4_NL, `d_w = 2^(e − 128)` over the doubled E2M1 levels |
//! | NVFP4 | Q8_0 | per 16-value sub-block `sumf += (d_a * d_s) * sumi as f32` |
//! | Q1_0 | Q8_0 | per 128: `s += d_a * sumi as f32` over its 4 Q8_0 blocks, `sumf += d_w * s` |
//! | Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, Q8_K, IQ4_XS | Q8_K | see `dot_k` |
//! | IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S | Q8_K | see `grid` |
//! | F32, F16 | same | 4 × 8 fused `f32` lanes, then `f64` (see [`float_lanes`]) |
//! | BF16 | BF16 | 16 fused `f32` lanes over element pairs, then `f64` (see [`bf16_pair_lanes`]) |
//!
//! Every per-type function validates `n` and both slice lengths once and
//! returns an error instead of panicking.

use fak_gguf::GgmlType;

use crate::blocks::GridFormat;
use crate::blocks::{
    BlockIQ4_NL, BlockMXFP4, BlockNVFP4, BlockQ1_0, BlockQ4_0, BlockQ4_1, BlockQ5_0, BlockQ5_1,
    BlockQ8_0, BlockQ8_1,
};
use crate::dot_k;
use crate::dot_rows::{block_pairs, check_dot};
use crate::error::{KernelError, Op};
use crate::fp::{bf16_to_f32, e8m0_to_f32_half, f16_to_f32, ue4m3_to_f32_half};
use crate::grid;

/// Dot product of one row of `n` weights with one row of `n` activations.
///
/// * `w`: `n` elements of `ty`, exactly `ty.row_bytes(n)` bytes.
/// * `a`: `n` elements of `vec_dot_type(ty)`, exactly that type's
///   `row_bytes(n)` bytes.
///
/// # Errors
///
/// [`KernelError::Unsupported`] for weight types without a dot product;
/// [`KernelError::PartialBlock`] if `n` is not a whole number of blocks;
/// [`KernelError::Length`] if either slice is not exactly one row.
pub fn vec_dot(ty: GgmlType, n: usize, w: &[u8], a: &[u8]) -> Result<f32, KernelError> {
    match ty {
        GgmlType::F32 => vec_dot_f32(n, w, a),
        GgmlType::F16 => vec_dot_f16(n, w, a),
        GgmlType::BF16 => vec_dot_bf16(n, w, a),
        GgmlType::Q4_0 => vec_dot_q4_0_q8_0(n, w, a),
        GgmlType::Q4_1 => vec_dot_q4_1_q8_1(n, w, a),
        GgmlType::Q5_0 => vec_dot_q5_0_q8_0(n, w, a),
        GgmlType::Q5_1 => vec_dot_q5_1_q8_1(n, w, a),
        GgmlType::Q8_0 => vec_dot_q8_0_q8_0(n, w, a),
        GgmlType::IQ4_NL => vec_dot_iq4_nl_q8_0(n, w, a),
        GgmlType::MXFP4 => vec_dot_mxfp4_q8_0(n, w, a),
        GgmlType::NVFP4 => vec_dot_nvfp4_q8_0(n, w, a),
        GgmlType::Q1_0 => vec_dot_q1_0_q8_0(n, w, a),
        GgmlType::Q2_K => dot_k::vec_dot_q2_k_q8_k(n, w, a),
        GgmlType::Q3_K => dot_k::vec_dot_q3_k_q8_k(n, w, a),
        GgmlType::IQ4_XS => dot_k::vec_dot_iq4_xs_q8_k(n, w, a),
        GgmlType::Q4_K => dot_k::vec_dot_q4_k_q8_k(n, w, a),
        GgmlType::Q5_K => dot_k::vec_dot_q5_k_q8_k(n, w, a),
        GgmlType::Q6_K => dot_k::vec_dot_q6_k_q8_k(n, w, a),
        GgmlType::Q8_K => dot_k::vec_dot_q8_k_q8_k(n, w, a),
        _ => match GridFormat::of(ty) {
            Some(fmt) => grid::vec_dot_grid_q8_k(fmt, n, w, a),
            None => Err(KernelError::Unsupported { op: Op::VecDot, ty }),
        },
    }
}

/// Exact integer dot product of two equally long quant arrays.
#[inline]
fn idot<const N: usize>(x: &[i8; N], y: &[i8; N]) -> i32 {
    x.iter()
        .zip(y)
        .map(|(&p, &q)| i32::from(p) * i32::from(q))
        .sum()
}

/// Exact integer dot product of unsigned and signed quants.
#[inline]
fn udot<const N: usize>(x: &[u8; N], y: &[i8; N]) -> i32 {
    x.iter()
        .zip(y)
        .map(|(&p, &q)| i32::from(p) * i32::from(q))
        .sum()
}

/// Q4_0 weights · Q8_0 activations.
///
/// * `w`: `n / 32` Q4_0 blocks (`n / 32 * 18` bytes); `a`: `n / 32` Q8_0
///   blocks (`n / 32 * 34` bytes); `n` a multiple of 32.
///
/// # Errors
///
/// As [`vec_dot`].
pub fn vec_dot_q4_0_q8_0(n: usize, w: &[u8], a: &[u8]) -> Result<f32, KernelError> {
    check_dot(GgmlType::Q4_0, n, w, a)?;
    let mut sumf = 0.0f32;
    for (bw, ba) in block_pairs::<{ BlockQ4_0::BYTES }, { BlockQ8_0::BYTES }>(w, a) {
        let (x, y) = (BlockQ4_0::from_bytes(bw), BlockQ8_0::from_bytes(ba));
        let sumi = idot(&x.quants(), &y.qs);
        sumf += sumi as f32 * f16_to_f32(x.d) * f16_to_f32(y.d);
    }
    Ok(sumf)
}

/// IQ4_NL weights · Q8_0 activations, as ggml's generic kernel: per block
/// `sumf += (d_a * d_w) * (sumi_lo + sumi_hi) as f32`.
///
/// * `w`: `n / 32` IQ4_NL blocks (`n / 32 * 18` bytes); `a`: `n / 32` Q8_0
///   blocks (`n / 32 * 34` bytes).
///
/// # Errors
///
/// As [`vec_dot`].
pub fn vec_dot_iq4_nl_q8_0(n: usize, w: &[u8], a: &[u8]) -> Result<f32, KernelError> {
    check_dot(GgmlType::IQ4_NL, n, w, a)?;
    let mut sumf = 0.0f32;
    for (bw, ba) in block_pairs::<{ BlockIQ4_NL::BYTES }, { BlockQ8_0::BYTES }>(w, a) {
        let (x, y) = (BlockIQ4_NL::from_bytes(bw), BlockQ8_0::from_bytes(ba));
        let sumi = idot(&x.quants(), &y.qs);
        sumf += (f16_to_f32(y.d) * f16_to_f32(x.d)) * sumi as f32;
    }
    Ok(sumf)
}

/// MXFP4 weights · Q8_0 activations, as ggml's generic kernel: per block
/// `sumf += (d_a * d_w) * (sumi_lo + sumi_hi) as f32` with `d_w =
/// 2^(e − 128)` and `sumi` over the doubled levels ([`BlockMXFP4`]).
///
/// * `w`: `n / 32` MXFP4 blocks (`n / 32 * 17` bytes); `a`: `n / 32` Q8_0
///   blocks (`n / 32 * 34` bytes).
///
/// # Errors
///
/// As [`vec_dot`].
pub fn vec_dot_mxfp4_q8_0(n: usize, w: &[u8], a: &[u8]) -> Result<f32, KernelError> {
    check_dot(GgmlType::MXFP4, n, w, a)?;
    let mut sumf = 0.0f32;
    for (bw, ba) in block_pairs::<{ BlockMXFP4::BYTES }, { BlockQ8_0::BYTES }>(w, a) {
        let (x, y) = (BlockMXFP4::from_bytes(bw), BlockQ8_0::from_bytes(ba));
        let sumi = idot(&x.quants(), &y.qs);
        sumf += (f16_to_f32(y.d) * e8m0_to_f32_half(x.e)) * sumi as f32;
    }
    Ok(sumf)
}

/// NVFP4 weights · Q8_0 activations, as ggml's generic kernel: each
/// 16-value sub-block `s` of a 64-value block meets half of one Q8_0 block,
/// `sumf += (d_a * d_s) * (sumi_lo + sumi_hi) as f32`.
///
/// * `w`: `n / 64` NVFP4 blocks (`n / 64 * 36` bytes); `a`: `n / 32` Q8_0
///   blocks (`n / 32 * 34` bytes).
///
/// # Errors
///
/// As [`vec_dot`].
pub fn vec_dot_nvfp4_q8_0(n: usize, w: &[u8], a: &[u8]) -> Result<f32, KernelError> {
    check_dot(GgmlType::NVFP4, n, w, a)?;
    let mut sumf = 0.0f32;
    for (bw, ba) in block_pairs::<{ BlockNVFP4::BYTES }, { 2 * BlockQ8_0::BYTES }>(w, a) {
        let x = BlockNVFP4::from_bytes(bw);
        let q = x.quants();
        let ys = ba.as_chunks::<{ BlockQ8_0::BYTES }>().0;
        for (s, (q16, &ds)) in q.as_chunks::<16>().0.iter().zip(&x.d).enumerate() {
            let y = BlockQ8_0::from_bytes(&ys[s / 2]);
            let x16: &[i8; 16] = y.qs[16 * (s % 2)..16 * (s % 2) + 16]
                .try_into()
                .unwrap_or(&[0; 16]);
            let sumi = idot(q16, x16);
            sumf += (f16_to_f32(y.d) * ue4m3_to_f32_half(ds)) * sumi as f32;
        }
    }
    Ok(sumf)
}

/// Q1_0 weights · Q8_0 activations, as ggml's generic kernel: per 128-value
/// block, `s += d_a * sumi as f32` over its four Q8_0 blocks (`sumi` the
/// exact sum of the activations under set bits minus the others), then
/// `sumf += d_w * s`.
///
/// * `w`: `n / 128` Q1_0 blocks (`n / 128 * 18` bytes); `a`: `n / 32` Q8_0
///   blocks (`n / 32 * 34` bytes).
///
/// # Errors
///
/// As [`vec_dot`].
pub fn vec_dot_q1_0_q8_0(n: usize, w: &[u8], a: &[u8]) -> Result<f32, KernelError> {
    check_dot(GgmlType::Q1_0, n, w, a)?;
    let mut sumf = 0.0f32;
    for (bw, ba) in block_pairs::<{ BlockQ1_0::BYTES }, { 4 * BlockQ8_0::BYTES }>(w, a) {
        let x = BlockQ1_0::from_bytes(bw);
        let q = x.quants();
        let mut s = 0.0f32;
        for (q32, yb) in q
            .as_chunks::<32>()
            .0
            .iter()
            .zip(ba.as_chunks::<{ BlockQ8_0::BYTES }>().0)
        {
            let y = BlockQ8_0::from_bytes(yb);
            s += f16_to_f32(y.d) * idot(q32, &y.qs) as f32;
        }
        sumf += f16_to_f32(x.d) * s;
    }
    Ok(sumf)
}

/// Q4_1 weights · Q8_1 activations.
///
/// * `w`: `n / 32` Q4_1 blocks (`n / 32 * 20` bytes); `a`: `n / 32` Q8_1
///   blocks (`n / 32 * 36` bytes); `n` a multiple of 32.
///
/// # Errors
///
/// As [`vec_dot`].
pub fn vec_dot_q4_1_q8_1(n: usize, w: &[u8], a: &[u8]) -> Result<f32, KernelError> {
    check_dot(GgmlType::Q4_1, n, w, a)?;
    let mut sumf = 0.0f32;
    for (bw, ba) in block_pairs::<{ BlockQ4_1::BYTES }, { BlockQ8_1::BYTES }>(w, a) {
        let (x, y) = (BlockQ4_1::from_bytes(bw), BlockQ8_1::from_bytes(ba));
        let sumi = udot(&x.quants(), &y.qs);
        sumf +=
            (f16_to_f32(x.d) * f16_to_f32(y.d)) * sumi as f32 + f16_to_f32(x.m) * f16_to_f32(y.s);
    }
    Ok(sumf)
}

/// Q5_0 weights · Q8_0 activations.
///
/// * `w`: `n / 32` Q5_0 blocks (`n / 32 * 22` bytes); `a`: `n / 32` Q8_0
///   blocks (`n / 32 * 34` bytes); `n` a multiple of 32.
///
/// # Errors
///
/// As [`vec_dot`].
pub fn vec_dot_q5_0_q8_0(n: usize, w: &[u8], a: &[u8]) -> Result<f32, KernelError> {
    check_dot(GgmlType::Q5_0, n, w, a)?;
    let mut sumf = 0.0f32;
    for (bw, ba) in block_pairs::<{ BlockQ5_0::BYTES }, { BlockQ8_0::BYTES }>(w, a) {
        let (x, y) = (BlockQ5_0::from_bytes(bw), BlockQ8_0::from_bytes(ba));
        let sumi = idot(&x.quants(), &y.qs);
        sumf += (f16_to_f32(x.d) * f16_to_f32(y.d)) * sumi as f32;
    }
    Ok(sumf)
}

/// Q5_1 weights · Q8_1 activations.
///
/// * `w`: `n / 32` Q5_1 blocks (`n / 32 * 24` bytes); `a`: `n / 32` Q8_1
///   blocks (`n / 32 * 36` bytes); `n` a multiple of 32.
///
/// # Errors
///
/// As [`vec_dot`].
pub fn vec_dot_q5_1_q8_1(n: usize, w: &[u8], a: &[u8]) -> Result<f32, KernelError> {
    check_dot(GgmlType::Q5_1, n, w, a)?;
    let mut sumf = 0.0f32;
    for (bw, ba) in block_pairs::<{ BlockQ5_1::BYTES }, { BlockQ8_1::BYTES }>(w, a) {
        let (x, y) = (BlockQ5_1::from_bytes(bw), BlockQ8_1::from_bytes(ba));
        let sumi = udot(&x.quants(), &y.qs);
        sumf +=
            (f16_to_f32(x.d) * f16_to_f32(y.d)) * sumi as f32 + f16_to_f32(x.m) * f16_to_f32(y.s);
    }
    Ok(sumf)
}

/// Q8_0 weights · Q8_0 activations.
///
/// * `w`, `a`: `n / 32` Q8_0 blocks each (`n / 32 * 34` bytes); `n` a
///   multiple of 32.
///
/// # Errors
///
/// As [`vec_dot`].
pub fn vec_dot_q8_0_q8_0(n: usize, w: &[u8], a: &[u8]) -> Result<f32, KernelError> {
    check_dot(GgmlType::Q8_0, n, w, a)?;
    let mut sumf = 0.0f32;
    for (bw, ba) in block_pairs::<{ BlockQ8_0::BYTES }, { BlockQ8_0::BYTES }>(w, a) {
        let (x, y) = (BlockQ8_0::from_bytes(bw), BlockQ8_0::from_bytes(ba));
        let sumi = idot(&x.qs, &y.qs);
        sumf += sumi as f32 * (f16_to_f32(x.d) * f16_to_f32(y.d));
    }
    Ok(sumf)
}

/// Elements per chunk of the float dot products: 4 accumulators × 8 lanes.
const FLOAT_CHUNK: usize = 32;

/// The lanes' part of the float dot products (F32, F16, BF16), in the
/// order the SIMD twins add (`simd::avx2::dot_f32` and its siblings), so
/// that every ISA gives the same bits:
///
/// ```text
///   chunk i = elements 32i..32i+32, chunks in order:
///     acc[c][l] = fma(w[32i + 8c + l], a[32i + 8c + l], acc[c][l])   c < 4, l < 8
///   v[l] = (acc[0][l] + acc[1][l]) + (acc[2][l] + acc[3][l])
///   sum  = ((v0 + v4) + (v2 + v6)) + ((v1 + v5) + (v3 + v7))
/// ```
///
/// Products are fused into the accumulators (one rounding each, as
/// `vfmadd` does). Returns the sum and how many elements it covered (the
/// whole chunks); the callers add the rest in `f64`. ggml's scalar code
/// sums the same `f32` products in `f64` (`ggml_float`) instead: the two
/// differ by float rounding only.
///
/// * `w`, `a`: little-endian rows of `E`-byte elements decoded by `dec`,
///   the same length.
///
/// `f32::mul_add` is a library call where the build targets no FMA
/// instruction, so where the CPU has one the same code runs compiled for
/// it (the same fused operation, the same bits; the scalar path's F16
/// goldens took three times as long through the call).
#[inline]
fn float_lanes<const E: usize>(w: &[u8], a: &[u8], dec: &impl Fn([u8; E]) -> f32) -> (f32, usize) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("fma") {
        // SAFETY: the CPU has FMA (checked just above).
        return unsafe { float_lanes_fma(w, a, dec) };
    }
    float_lanes_body(w, a, dec)
}

/// [`float_lanes`] compiled for FMA.
///
/// # Safety
///
/// The CPU must support FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "fma")]
unsafe fn float_lanes_fma<const E: usize>(
    w: &[u8],
    a: &[u8],
    dec: &impl Fn([u8; E]) -> f32,
) -> (f32, usize) {
    float_lanes_body(w, a, dec)
}

/// The body of [`float_lanes`].
#[inline(always)]
fn float_lanes_body<const E: usize>(
    w: &[u8],
    a: &[u8],
    dec: &impl Fn([u8; E]) -> f32,
) -> (f32, usize) {
    let (wv, av) = (w.as_chunks::<E>().0, a.as_chunks::<E>().0);
    let mut acc = [[0.0f32; 8]; 4];
    let (wc, ac) = (
        wv.as_chunks::<FLOAT_CHUNK>().0,
        av.as_chunks::<FLOAT_CHUNK>().0,
    );
    for (x, y) in wc.iter().zip(ac) {
        for (c, lanes) in acc.iter_mut().enumerate() {
            for (l, s) in lanes.iter_mut().enumerate() {
                let k = 8 * c + l;
                *s = dec(x[k]).mul_add(dec(y[k]), *s);
            }
        }
    }
    let v: [f32; 8] = std::array::from_fn(|l| (acc[0][l] + acc[1][l]) + (acc[2][l] + acc[3][l]));
    let sum = ((v[0] + v[4]) + (v[2] + v[6])) + ((v[1] + v[5]) + (v[3] + v[7]));
    (sum, wc.len().min(ac.len()) * FLOAT_CHUNK)
}

/// The products past the lanes' chunks (from element `from` on), each in
/// `f32`, widened to `f64`.
fn float_tail<'a, const E: usize>(
    w: &'a [u8],
    a: &'a [u8],
    from: usize,
    dec: &'a impl Fn([u8; E]) -> f32,
) -> impl Iterator<Item = f64> + 'a {
    let pairs = block_pairs::<E, E>(w, a).skip(from);
    pairs.map(move |(x, y)| f64::from(dec(*x) * dec(*y)))
}

/// Float dot whose tail is summed apart and added once (F32: the SIMD
/// twin's `float_dot`).
#[inline]
fn float_dot<const E: usize>(w: &[u8], a: &[u8], dec: impl Fn([u8; E]) -> f32) -> f32 {
    let (lanes, from) = float_lanes(w, a, &dec);
    (f64::from(lanes) + float_tail(w, a, from, &dec).sum::<f64>()) as f32
}

/// F32 · F32 (`w`, `a`: `n` little-endian `f32`s each), in the SIMD
/// kernels' order: products fused into 4 × 8 `f32` lanes over 32-element
/// chunks, the lanes added in a fixed order, then the products past the
/// last whole chunk added in `f64` as one sum.
///
/// # Errors
///
/// As [`vec_dot`].
pub fn vec_dot_f32(n: usize, w: &[u8], a: &[u8]) -> Result<f32, KernelError> {
    check_dot(GgmlType::F32, n, w, a)?;
    Ok(float_dot::<4>(w, a, f32::from_le_bytes))
}

/// F16 · F16 (`w`, `a`: `n` little-endian f16s each), in the SIMD
/// kernels' order: as [`vec_dot_f32`], except that the products past the
/// last whole chunk are added to the lanes' sum in `f64` one by one.
///
/// # Errors
///
/// As [`vec_dot`].
pub fn vec_dot_f16(n: usize, w: &[u8], a: &[u8]) -> Result<f32, KernelError> {
    check_dot(GgmlType::F16, n, w, a)?;
    let dec = |b: [u8; 2]| f16_to_f32(u16::from_le_bytes(b));
    let (lanes, from) = float_lanes(w, a, &dec);
    let sum = float_tail(w, a, from, &dec).fold(f64::from(lanes), |s, p| s + p);
    Ok(sum as f32)
}

/// BF16 · BF16 (`w`, `a`: `n` little-endian bf16s each), in the order of
/// the SIMD kernels and of `vdpbf16ps`: 16 `f32` lanes over each chunk of
/// 32 elements, lane `j` fusing the products of elements `2j + 1`, then
/// `2j`; the lanes added in a fixed order; then the products past the
/// last whole chunk added in `f64` as one sum.
///
/// # Errors
///
/// As [`vec_dot`].
pub fn vec_dot_bf16(n: usize, w: &[u8], a: &[u8]) -> Result<f32, KernelError> {
    check_dot(GgmlType::BF16, n, w, a)?;
    let dec = |b: [u8; 2]| bf16_to_f32(u16::from_le_bytes(b));
    let (lanes, from) = bf16_pair_lanes(w, a);
    Ok((f64::from(lanes) + float_tail(w, a, from, &dec).sum::<f64>()) as f32)
}

/// The lanes' part of the BF16 dot product: 16 lanes over each chunk of
/// 32 elements, lane `j` taking the pair of elements `2j` and `2j + 1`,
/// the odd one first, each product fused into the lane:
///
/// ```text
///   chunk i = elements 32i..32i+32, chunks in order; e = 32i + 2j:
///     acc[j] = fma(w[e + 1], a[e + 1], acc[j])       j < 16
///     acc[j] = fma(w[e],     a[e],     acc[j])
///   v[l] = acc[l] + acc[l + 8]                        l < 8
///   sum  = ((v0 + v4) + (v2 + v6)) + ((v1 + v5) + (v3 + v7))
/// ```
///
/// That is what `vdpbf16ps` computes per lane (measured against it on
/// 32 M random lanes, Zen 4) whenever no input and no partial sum is
/// subnormal (the instruction flushes those to zero; these `f32` steps
/// do not). Returns the sum and the elements it covered (whole chunks).
///
/// * `w`, `a`: little-endian bf16 rows of the same length.
#[must_use]
pub(crate) fn bf16_pair_lanes(w: &[u8], a: &[u8]) -> (f32, usize) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("fma") {
        // SAFETY: the CPU has FMA (checked just above).
        return unsafe { bf16_pair_lanes_fma(w, a) };
    }
    bf16_pair_lanes_body(w, a)
}

/// [`bf16_pair_lanes`] compiled for FMA (the same operations: `mul_add`
/// becomes one instruction instead of a call to the C library's `fmaf`).
///
/// # Safety
///
/// The CPU must support FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "fma")]
unsafe fn bf16_pair_lanes_fma(w: &[u8], a: &[u8]) -> (f32, usize) {
    bf16_pair_lanes_body(w, a)
}

/// The body of [`bf16_pair_lanes`].
#[inline(always)]
fn bf16_pair_lanes_body(w: &[u8], a: &[u8]) -> (f32, usize) {
    let dec = |b: [u8; 2]| bf16_to_f32(u16::from_le_bytes(b));
    let (wv, av) = (w.as_chunks::<2>().0, a.as_chunks::<2>().0);
    let mut acc = [0.0f32; 16];
    let (wc, ac) = (
        wv.as_chunks::<FLOAT_CHUNK>().0,
        av.as_chunks::<FLOAT_CHUNK>().0,
    );
    for (x, y) in wc.iter().zip(ac) {
        for (j, s) in acc.iter_mut().enumerate() {
            let (odd, even) = (2 * j + 1, 2 * j);
            *s = dec(x[odd]).mul_add(dec(y[odd]), *s);
            *s = dec(x[even]).mul_add(dec(y[even]), *s);
        }
    }
    let v: [f32; 8] = std::array::from_fn(|l| acc[l] + acc[l + 8]);
    let sum = ((v[0] + v[4]) + (v[2] + v[6])) + ((v[1] + v[5]) + (v[3] + v[7]));
    (sum, wc.len().min(ac.len()) * FLOAT_CHUNK)
}
