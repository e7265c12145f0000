//! AVX2 twins of the activation quantizers (Q8_0/Q8_1 and Q8_K, and the
//! F16/BF16 encodings of `f16_row` and `bf16_row`), bit-for-bit equal to
//! the scalar references in `quant`, `quant_k` and `fp`.
//!
//! Every float step is the same IEEE operation as in the scalar code (one
//! multiply, one add), only done 8 lanes at a time; the maximum of absolute
//! values does not depend on order once NaNs are excluded, so a block that
//! holds a NaN is left to the scalar code (which defines where a NaN wins):
//!
//! ```text
//!   Q8_0/Q8_1:  p = x · id          q = low byte of cvtt(roundf(p))
//!               roundf(p) = trunc(p) + (|p − trunc(p)| ≥ ½ ? ±1 : 0)   (exact)
//!   Q8_K:       p = iscale · x      q = low byte of min(127, bits(p + 1.5·2²³) & 0x7FFFFF − 2²²)
//! ```

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::*;

/// Loads 8 floats starting at element `OFF` of an `N`-float array; the
/// range is checked at compile time.
#[inline]
#[target_feature(enable = "avx2")]
fn load8<const OFF: usize, const N: usize>(x: &[f32; N]) -> __m256 {
    const { assert!(OFF + 8 <= N) };
    // SAFETY: OFF + 8 <= N (checked above), so the 8 floats are inside `x`.
    unsafe { _mm256_loadu_ps(x.as_ptr().add(OFF)) }
}

/// Whether any lane of `v` is NaN.
#[inline]
#[target_feature(enable = "avx2")]
fn has_nan(v: __m256) -> bool {
    _mm256_movemask_ps(_mm256_cmp_ps::<_CMP_UNORD_Q>(v, v)) != 0
}

/// `|v|` lane-wise (clears the sign bit).
#[inline]
#[target_feature(enable = "avx2")]
fn abs_ps(v: __m256) -> __m256 {
    _mm256_andnot_ps(_mm256_set1_ps(-0.0), v)
}

/// Largest lane of `v` (no NaNs).
#[inline]
#[target_feature(enable = "avx2")]
fn hmax_ps(v: __m256) -> f32 {
    let q = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
    let d = _mm_max_ps(q, _mm_movehl_ps(q, q));
    _mm_cvtss_f32(_mm_max_ss(d, _mm_movehdup_ps(d)))
}

/// C's `roundf` (half away from zero), exactly: `trunc(p)` plus `±1` when
/// the dropped fraction is at least one half. NaN stays NaN.
#[inline]
#[target_feature(enable = "avx2")]
fn round_half_away(p: __m256) -> __m256 {
    let t = _mm256_round_ps::<{ _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC }>(p);
    let frac = abs_ps(_mm256_sub_ps(p, t));
    let up = _mm256_cmp_ps::<_CMP_GE_OQ>(frac, _mm256_set1_ps(0.5));
    let sign = _mm256_and_ps(p, _mm256_set1_ps(-0.0));
    let one = _mm256_or_ps(_mm256_set1_ps(1.0), sign);
    _mm256_add_ps(t, _mm256_and_ps(up, one))
}

/// Low bytes of 4 × 8 `i32` lanes, in lane order (`a` first): C's
/// `(int8_t)` of each value.
#[inline]
#[target_feature(enable = "avx2")]
fn low_bytes(a: __m256i, b: __m256i, c: __m256i, d: __m256i) -> __m256i {
    let m = _mm256_set1_epi32(0xFF);
    let ab = _mm256_packus_epi32(_mm256_and_si256(a, m), _mm256_and_si256(b, m));
    let cd = _mm256_packus_epi32(_mm256_and_si256(c, m), _mm256_and_si256(d, m));
    let abcd = _mm256_packus_epi16(ab, cd);
    _mm256_permutevar8x32_epi32(abcd, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7))
}

/// Stores 32 bytes into `out[OFF..OFF + 32]`; the range is checked at
/// compile time.
#[inline]
#[target_feature(enable = "avx2")]
fn store32<const OFF: usize, const N: usize>(out: &mut [i8; N], v: __m256i) {
    const { assert!(OFF + 32 <= N) };
    // SAFETY: OFF + 32 <= N (checked above), so the 32 bytes are inside `out`.
    unsafe { _mm256_storeu_si256(out.as_mut_ptr().add(OFF).cast(), v) }
}

/// AVX2 twin of the Q8_0/Q8_1 block body (`quant::quant_8bit`).
///
/// * `x`: the block's 32 values, element order.
///
/// Returns the scale `d = absmax / 127` and the 32 quants, or `None` if the
/// block holds a NaN (the caller then runs the scalar code).
///
/// # Safety
///
/// The CPU must support AVX2.
#[target_feature(enable = "avx2")]
pub(crate) unsafe fn quant_8bit(x: &[f32; 32]) -> Option<(f32, [i8; 32])> {
    let (v, amax) = block_absmax(x)?;
    let d = amax / 127.0;
    let id = if d != 0.0 { 1.0 / d } else { 0.0 };
    let idv = _mm256_set1_ps(id);
    // A plain loop: an `array::map` closure was left un-inlined here.
    let mut q = [_mm256_setzero_si256(); 4];
    for (qi, vi) in q.iter_mut().zip(v) {
        *qi = _mm256_cvttps_epi32(round_half_away(_mm256_mul_ps(vi, idv)));
    }
    let mut out = [0i8; 32];
    store32::<0, 32>(&mut out, low_bytes(q[0], q[1], q[2], q[3]));
    Some((d, out))
}

/// The 32 values of a Q8_0/Q8_1 block as 4 vectors, and their largest
/// magnitude; `None` if the block holds a NaN.
#[inline]
#[target_feature(enable = "avx2")]
fn block_absmax(x: &[f32; 32]) -> Option<([__m256; 4], f32)> {
    let v = [
        load8::<0, 32>(x),
        load8::<8, 32>(x),
        load8::<16, 32>(x),
        load8::<24, 32>(x),
    ];
    if v.iter().any(|&vi| has_nan(vi)) {
        return None;
    }
    let amax = hmax_ps(_mm256_max_ps(
        _mm256_max_ps(abs_ps(v[0]), abs_ps(v[1])),
        _mm256_max_ps(abs_ps(v[2]), abs_ps(v[3])),
    ));
    Some((v, amax))
}

/// AVX2 twin of the runtime activation quantizer's Q8_0/Q8_1 body
/// (`quant::quant_8bit_acts`): `d = absmax / 127`, `id = 127 / absmax`
/// (0 for an all-zero block), quants `x · id` rounded to nearest, ties to
/// even. This is the arithmetic of llama.cpp's x86 `quantize_row_q8_0`.
///
/// Returns `None` if the block holds a NaN (the caller runs the scalar code).
///
/// # Safety
///
/// The CPU must support AVX2.
#[target_feature(enable = "avx2")]
pub(crate) unsafe fn quant_8bit_acts(x: &[f32; 32]) -> Option<(f32, [i8; 32])> {
    let (v, amax) = block_absmax(x)?;
    let d = amax / 127.0;
    let id = if amax != 0.0 { 127.0 / amax } else { 0.0 };
    let idv = _mm256_set1_ps(id);
    // A plain loop: an `array::map` closure was left un-inlined here (1-2%
    // of a fleet run in `perf`).
    let mut q = [_mm256_setzero_si256(); 4];
    for (qi, vi) in q.iter_mut().zip(v) {
        let r = _mm256_round_ps::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(
            _mm256_mul_ps(vi, idv),
        );
        *qi = _mm256_cvttps_epi32(r);
    }
    let mut out = [0i8; 32];
    store32::<0, 32>(&mut out, low_bytes(q[0], q[1], q[2], q[3]));
    Some((d, out))
}

/// AVX2 twin of the Q8_K quant step (`quant_k::quant_q8_k` after the scale
/// is known): `min(127, nearest_int(iscale · x)) as i8` for all 256 values.
///
/// * `x`: the block's 256 values, element order.
/// * `iscale`: `-127 / max`, `max` the value of largest magnitude.
///
/// # Safety
///
/// The CPU must support AVX2.
#[target_feature(enable = "avx2")]
pub(crate) unsafe fn quant_q8_k_quants(x: &[f32; 256], iscale: f32) -> [i8; 256] {
    let mut out = [0i8; 256];
    let (chunks, _) = x.as_chunks::<32>();
    let (outs, _) = out.as_chunks_mut::<32>();
    let s = _mm256_set1_ps(iscale);
    let magic = _mm256_set1_ps(12_582_912.0);
    let (mant, bias, top) = (
        _mm256_set1_epi32(0x007F_FFFF),
        _mm256_set1_epi32(0x0040_0000),
        _mm256_set1_epi32(127),
    );
    for (xc, oc) in chunks.iter().zip(outs) {
        let q = [
            load8::<0, 32>(xc),
            load8::<8, 32>(xc),
            load8::<16, 32>(xc),
            load8::<24, 32>(xc),
        ]
        .map(|v| {
            let r = _mm256_castps_si256(_mm256_add_ps(_mm256_mul_ps(s, v), magic));
            _mm256_min_epi32(_mm256_sub_epi32(_mm256_and_si256(r, mant), bias), top)
        });
        store32::<0, 32>(oc, low_bytes(q[0], q[1], q[2], q[3]));
    }
    out
}

/// Largest `|x|` of a Q8_K block, or `None` if the block holds a NaN.
///
/// * `x`: the block's 256 values.
///
/// # Safety
///
/// The CPU must support AVX2.
#[target_feature(enable = "avx2")]
pub(crate) unsafe fn absmax_256(x: &[f32; 256]) -> Option<f32> {
    let (chunks, _) = x.as_chunks::<8>();
    let mut m = _mm256_setzero_ps();
    let mut nan = _mm256_setzero_ps();
    for c in chunks {
        let v = load8::<0, 8>(c);
        nan = _mm256_or_ps(nan, _mm256_cmp_ps::<_CMP_UNORD_Q>(v, v));
        m = _mm256_max_ps(m, abs_ps(v));
    }
    if _mm256_movemask_ps(nan) != 0 {
        return None;
    }
    Some(hmax_ps(m))
}

/// `fp::f32_to_f16` of every value of `src` into `dst` (2 little-endian
/// bytes each, as many as both hold), 8 at a time: `vcvtps2ph` rounds to
/// nearest even exactly as the scalar conversion does, subnormals and
/// overflow to infinity included; a NaN becomes the scalar code's quiet
/// NaN (its sign, `0x7E00`) where the instruction would keep part of the
/// payload. Values past the last 8 take the scalar code.
///
/// # Safety
///
/// The CPU must support AVX2 and F16C.
#[target_feature(enable = "avx2,f16c")]
pub(super) unsafe fn f16_row(src: &[f32], dst: &mut [u8]) {
    let (sc, _) = src.as_chunks::<8>();
    let (dc, _) = dst.as_chunks_mut::<16>();
    let done = sc.len().min(dc.len()) * 8;
    for (s, d) in sc.iter().zip(dc.iter_mut()) {
        // SAFETY: `s` is 8 readable f32s; `loadu` needs no alignment.
        let x = unsafe { _mm256_loadu_ps(s.as_ptr()) };
        let h = _mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(x);
        let nan = _mm256_cmp_ps::<_CMP_UNORD_Q>(x, x);
        // Each NaN lane's sign | 0x7E00, in the lane's low 16 bits.
        let sign = _mm256_srli_epi32::<16>(_mm256_castps_si256(x));
        let quiet = _mm256_or_si256(
            _mm256_and_si256(sign, _mm256_set1_epi32(0x8000)),
            _mm256_set1_epi32(0x7E00),
        );
        let quiet = _mm256_packus_epi32(quiet, quiet);
        let quiet = _mm256_permute4x64_epi64::<0b1000>(quiet);
        let nan = _mm256_packs_epi32(_mm256_castps_si256(nan), _mm256_castps_si256(nan));
        let nan = _mm256_permute4x64_epi64::<0b1000>(nan);
        let h = _mm_blendv_epi8(
            h,
            _mm256_castsi256_si128(quiet),
            _mm256_castsi256_si128(nan),
        );
        // SAFETY: `d` is 16 writable bytes; `storeu` needs no alignment.
        unsafe { _mm_storeu_si128(d.as_mut_ptr().cast(), h) };
    }
    let rest = src.iter().zip(dst.as_chunks_mut::<2>().0).skip(done);
    for (&x, d) in rest {
        *d = crate::fp::f32_to_f16(x).to_le_bytes();
    }
}

/// `fp::f32_to_bf16` of every value of `src` into `dst` (2 little-endian
/// bytes each, as many as both hold), 8 at a time, in integer steps: the
/// top 16 bits of each value, plus one where the dropped 16 bits are
/// above half, or exactly half and the kept bits odd (nearest, ties to
/// even; a carry into the exponent rounds up to the next binade or to
/// infinity); a NaN keeps its top 16 bits with the quiet bit (`0x0040`)
/// set. Values past the last 8 take the scalar code.
///
/// # Safety
///
/// The CPU must support AVX2.
#[target_feature(enable = "avx2")]
pub(super) unsafe fn bf16_row(src: &[f32], dst: &mut [u8]) {
    let (sc, _) = src.as_chunks::<8>();
    let (dc, _) = dst.as_chunks_mut::<16>();
    let done = sc.len().min(dc.len()) * 8;
    for (s, d) in sc.iter().zip(dc.iter_mut()) {
        // SAFETY: `s` is 8 readable f32s; `loadu` needs no alignment.
        let x = unsafe { _mm256_loadu_si256(s.as_ptr().cast()) };
        let top = _mm256_srli_epi32::<16>(x);
        // x + 0x7FFF + (kept bits odd), then the top 16 bits: nearest, ties
        // to even (no overflow past bit 31: a NaN is replaced below).
        let odd = _mm256_and_si256(top, _mm256_set1_epi32(1));
        let bias = _mm256_add_epi32(_mm256_set1_epi32(0x7FFF), odd);
        let rounded = _mm256_srli_epi32::<16>(_mm256_add_epi32(x, bias));
        let abs = _mm256_and_si256(x, _mm256_set1_epi32(0x7FFF_FFFF));
        let nan = _mm256_cmpgt_epi32(abs, _mm256_set1_epi32(0x7F80_0000));
        let quiet = _mm256_or_si256(top, _mm256_set1_epi32(0x0040));
        let v = _mm256_blendv_epi8(rounded, quiet, nan);
        let v = _mm256_permute4x64_epi64::<0b1000>(_mm256_packus_epi32(v, v));
        // SAFETY: `d` is 16 writable bytes; `storeu` needs no alignment.
        unsafe { _mm_storeu_si128(d.as_mut_ptr().cast(), _mm256_castsi256_si128(v)) };
    }
    let rest = src.iter().zip(dst.as_chunks_mut::<2>().0).skip(done);
    for (&x, d) in rest {
        *d = crate::fp::f32_to_bf16(x).to_le_bytes();
    }
}
