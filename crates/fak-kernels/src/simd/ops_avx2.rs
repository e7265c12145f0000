//! AVX2 + FMA + F16C twins of the row operations in [`crate::ops`].
//!
//! Every kernel walks its rows in whole 8-lane vectors; the last partial
//! vector (fewer than 8 elements) is copied into a padded 8-element buffer,
//! run through the same vector code and copied back. Which code touches an
//! element therefore depends only on its index and the row length, never on
//! the address of the slice, and the results are a function of the inputs
//! alone.
//!
//! Differences from the scalar twins:
//!
//! * `rms_norm`: bit-identical (the exact `f64` squares go into 4 × 4
//!   lanes; the scalar twin adds in those lanes, in the same order).
//! * `softmax`, `swiglu`, `exp`: bit-identical; [`exp8`] is the scalar
//!   [`crate::expf::expf`] on 2 × 4 `f64` lanes, and the softmax sum uses
//!   the scalar twin's 2 × 4 `f64` lanes and order.
//! * `add_assign`: bit-identical.

use std::arch::x86_64::*;

use crate::expf::{C0, C1, C2, INV_LN2_32, OVERFLOW_ABOVE, SHIFT, TAB, UNDERFLOW_BELOW};

/// Loads 8 `f32`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn load8(x: &[f32; 8]) -> __m256 {
    // SAFETY: `x` holds exactly 8 f32; `loadu` has no alignment requirement.
    unsafe { _mm256_loadu_ps(x.as_ptr()) }
}

/// Stores 8 `f32`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn store8(x: &mut [f32; 8], v: __m256) {
    // SAFETY: `x` holds exactly 8 f32; `storeu` has no alignment requirement.
    unsafe { _mm256_storeu_ps(x.as_mut_ptr(), v) }
}

/// Loads 8 f16 bit patterns and widens them to `f32` (exact; NaNs become
/// quiet, as in [`crate::fp::f16_to_f32`]).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn load8_f16(x: &[u16; 8]) -> __m256 {
    // SAFETY: `x` holds exactly 8 u16 = 16 bytes; `loadu` has no alignment
    // requirement.
    _mm256_cvtph_ps(unsafe { _mm_loadu_si128(x.as_ptr().cast()) })
}

/// Copies `src` (fewer than `N` elements: a chunk remainder) into a buffer
/// of `N` elements filled with `fill` past its end.
#[inline(always)]
pub(crate) fn pad<T: Copy, const N: usize>(src: &[T], fill: T) -> [T; N] {
    let mut b = [fill; N];
    for (d, &s) in b.iter_mut().zip(src) {
        *d = s;
    }
    b
}

/// Copies the first `dst.len()` elements of `src` back into `dst`.
#[inline(always)]
pub(crate) fn unpad<const N: usize>(dst: &mut [f32], src: &[f32; N]) {
    for (d, &s) in dst.iter_mut().zip(src) {
        *d = s;
    }
}

/// Horizontal sum `(a0+a2) + (a1+a3)`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn hsum_pd(v: __m256d) -> f64 {
    let q = _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd::<1>(v));
    _mm_cvtsd_f64(_mm_add_sd(q, _mm_unpackhi_pd(q, q)))
}

/// The 8 lanes widened to `f64`: `(lanes 0..4, lanes 4..8)`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn widen(v: __m256) -> (__m256d, __m256d) {
    (
        _mm256_cvtps_pd(_mm256_castps256_ps128(v)),
        _mm256_cvtps_pd(_mm256_extractf128_ps::<1>(v)),
    )
}

/// `e^x` on 4 `f64` lanes holding `f32` inputs: the general path of
/// [`crate::expf::expf`], operation for operation (same constants, the same
/// three fused multiply-adds), before the final rounding to `f32`. Inputs
/// outside `[-103.97, 88.72]` give garbage here that [`exp8`] replaces.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn exp4_pd(xd: __m256d) -> __m256d {
    let shift = _mm256_set1_pd(f64::from_bits(SHIFT));
    let inv = _mm256_set1_pd(f64::from_bits(INV_LN2_32));
    let kd = _mm256_add_pd(_mm256_mul_pd(inv, xd), shift);
    let ki = _mm256_castpd_si256(kd);
    let kd = _mm256_sub_pd(kd, shift);
    let r = _mm256_fmsub_pd(inv, xd, kd);
    let idx = _mm256_and_si256(ki, _mm256_set1_epi64x(31));
    // SAFETY: every index is `ki & 31`, inside the 32 entries of `TAB`.
    let tab = unsafe { _mm256_i64gather_epi64::<8>(TAB.as_ptr().cast::<i64>(), idx) };
    let s = _mm256_castsi256_pd(_mm256_add_epi64(tab, _mm256_slli_epi64::<47>(ki)));
    let z = _mm256_fmadd_pd(
        _mm256_set1_pd(f64::from_bits(C0)),
        r,
        _mm256_set1_pd(f64::from_bits(C1)),
    );
    let r2 = _mm256_mul_pd(r, r);
    let y = _mm256_fmadd_pd(_mm256_set1_pd(f64::from_bits(C2)), r, _mm256_set1_pd(1.0));
    let y = _mm256_fmadd_pd(z, r2, y);
    _mm256_mul_pd(y, s)
}

/// `e^x` on 8 lanes: bit-identical to [`crate::expf::expf`] (glibc's
/// `expf` algorithm in `f64`, below 0.502 ulp) on every input.
///
/// ```text
///   x ─► two halves widened to f64 ─► exp4_pd ─► rounded to f32 (once)
///     x > 88.72 → +inf,  x < -103.97 (and -inf) → +0,  NaN → x + x
/// ```
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn exp8(x: __m256) -> __m256 {
    let lo = _mm256_cvtpd_ps(exp4_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(x))));
    let hi = _mm256_cvtpd_ps(exp4_pd(_mm256_cvtps_pd(_mm256_extractf128_ps::<1>(x))));
    let y = _mm256_set_m128(hi, lo);
    let over = _mm256_cmp_ps::<_CMP_GT_OQ>(x, _mm256_set1_ps(f32::from_bits(OVERFLOW_ABOVE)));
    let under = _mm256_cmp_ps::<_CMP_LT_OQ>(x, _mm256_set1_ps(-f32::from_bits(UNDERFLOW_BELOW)));
    let nan = _mm256_cmp_ps::<_CMP_UNORD_Q>(x, x);
    let y = _mm256_blendv_ps(y, _mm256_set1_ps(f32::INFINITY), over);
    let y = _mm256_andnot_ps(under, y);
    _mm256_blendv_ps(y, _mm256_add_ps(x, x), nan)
}

/// AVX2 twin of `ops::scalar::rms_norm`: sum of squares in 4 × 4 `f64`
/// lanes (16 elements per step, zero-padded remainder), reduced as
/// `hsum((l0 + l1) + (l2 + l3))`; then the scalar `scale` and the scalar
/// `(x · scale) · w` per element.
///
/// * `x`, `w`, `out`: `[n]` f32; the mean is over all of `x`, the output
///   over `min` of the three lengths.
///
/// # Safety
///
/// The CPU must support AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn rms_norm(x: &[f32], w: &[f32], eps: f32, out: &mut [f32]) {
    let mut acc = [_mm256_setzero_pd(); 4];
    let mut add16 = |c: &[f32; 16]| {
        let halves = c.as_chunks::<8>().0;
        let (a, b) = widen(load8(&halves[0]));
        let (c, d) = widen(load8(&halves[1]));
        for (s, v) in acc.iter_mut().zip([a, b, c, d]) {
            // The f64 square of an f32 is exact, so fma == add of the square.
            *s = _mm256_fmadd_pd(v, v, *s);
        }
    };
    let (xc, xt) = x.as_chunks::<16>();
    for c in xc {
        add16(c);
    }
    if !xt.is_empty() {
        add16(&pad(xt, 0.0));
    }
    let sum = hsum_pd(_mm256_add_pd(
        _mm256_add_pd(acc[0], acc[1]),
        _mm256_add_pd(acc[2], acc[3]),
    ));
    let mean = (sum / x.len() as f64) as f32;
    let scale = 1.0f32 / (mean + eps).sqrt();
    let sv = _mm256_set1_ps(scale);
    let n = out.len().min(x.len()).min(w.len());
    let (oc, ot) = out[..n].as_chunks_mut::<8>();
    let (xc, xt) = x[..n].as_chunks::<8>();
    let (wc, wt) = w[..n].as_chunks::<8>();
    for ((o, xv), wv) in oc.iter_mut().zip(xc).zip(wc) {
        store8(o, _mm256_mul_ps(_mm256_mul_ps(load8(xv), sv), load8(wv)));
    }
    for ((o, &v), &g) in ot.iter_mut().zip(xt).zip(wt) {
        *o = (v * scale) * g;
    }
}

/// AVX2 twin of `ops::scalar::softmax`, in place on `x` (`[n]` f32).
///
/// ```text
///   pass 1: max = max over x (vector max, NaN ignored as by f32::max)
///   pass 2: x[i] = exp8(x[i] - max); sum += x[i] in 2 × 4 f64 lanes
///           (remainder padded with -inf, which contributes 0)
///   pass 3: x[i] *= (1 / sum) as f32
/// ```
///
/// A row of only `-inf` (or NaN) becomes NaN, as in the scalar twin.
///
/// # Safety
///
/// The CPU must support AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn softmax(x: &mut [f32]) {
    if x.is_empty() {
        return;
    }
    let (xc, xt) = x.as_chunks::<8>();
    let mut mv = _mm256_set1_ps(f32::NEG_INFINITY);
    for c in xc {
        // NaN lanes of `c` give the second operand, the running max.
        mv = _mm256_max_ps(load8(c), mv);
    }
    let mut lanes = [0.0f32; 8];
    store8(&mut lanes, mv);
    let max = lanes
        .iter()
        .chain(xt)
        .copied()
        .fold(f32::NEG_INFINITY, f32::max);

    let mv = _mm256_set1_ps(max);
    let mut sum = [_mm256_setzero_pd(); 2];
    let mut exp_add = |c: &mut [f32; 8]| {
        let e = exp8(_mm256_sub_ps(load8(c), mv));
        store8(c, e);
        let (lo, hi) = widen(e);
        sum[0] = _mm256_add_pd(sum[0], lo);
        sum[1] = _mm256_add_pd(sum[1], hi);
    };
    let (xc, xt) = x.as_chunks_mut::<8>();
    for c in xc.iter_mut() {
        exp_add(c);
    }
    if !xt.is_empty() {
        let mut b: [f32; 8] = pad(xt, f32::NEG_INFINITY);
        exp_add(&mut b);
        unpad(xt, &b);
    }
    let inv = (1.0 / hsum_pd(_mm256_add_pd(sum[0], sum[1]))) as f32;
    let iv = _mm256_set1_ps(inv);
    for c in xc.iter_mut() {
        store8(c, _mm256_mul_ps(load8(c), iv));
    }
    for v in xt.iter_mut() {
        *v *= inv;
    }
}

/// AVX2 twin of `ops::scalar::swiglu`: `gate[i] = (g / (1 + exp8(-g))) · up[i]`
/// over `min(gate.len(), up.len())` elements.
///
/// * `gate`, `up`: `[n]` f32.
///
/// # Safety
///
/// The CPU must support AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn swiglu(gate: &mut [f32], up: &[f32]) {
    let n = gate.len().min(up.len());
    let (gate, up) = (&mut gate[..n], &up[..n]);
    let one = _mm256_set1_ps(1.0);
    let sign = _mm256_set1_ps(-0.0);
    let body = |g: &mut [f32; 8], u: &[f32; 8]| {
        let gv = load8(g);
        let e = exp8(_mm256_xor_ps(gv, sign));
        let s = _mm256_div_ps(gv, _mm256_add_ps(one, e));
        store8(g, _mm256_mul_ps(s, load8(u)));
    };
    let (gc, gt) = gate.as_chunks_mut::<8>();
    let (uc, ut) = up.as_chunks::<8>();
    for (g, u) in gc.iter_mut().zip(uc) {
        body(g, u);
    }
    if !gt.is_empty() {
        let mut gb: [f32; 8] = pad(gt, 0.0);
        body(&mut gb, &pad(ut, 0.0));
        unpad(gt, &gb);
    }
}

/// AVX2 twin of `ops::scalar::add_assign` (bit-identical): `x[i] += y[i]`
/// over `min(x.len(), y.len())` elements.
///
/// * `x`, `y`: `[n]` f32.
///
/// # Safety
///
/// The CPU must support AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn add_assign(x: &mut [f32], y: &[f32]) {
    let n = x.len().min(y.len());
    let (x, y) = (&mut x[..n], &y[..n]);
    let (xc, xt) = x.as_chunks_mut::<8>();
    let (yc, yt) = y.as_chunks::<8>();
    for (a, b) in xc.iter_mut().zip(yc) {
        store8(a, _mm256_add_ps(load8(a), load8(b)));
    }
    for (a, &b) in xt.iter_mut().zip(yt) {
        *a += b;
    }
}

/// AVX2 twin of `ops::scalar::exp_in_place`: `x[i] = exp8(x[i])` (`[n]`
/// f32; remainder zero-padded).
///
/// # Safety
///
/// The CPU must support AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn exp_in_place(x: &mut [f32]) {
    let (xc, xt) = x.as_chunks_mut::<8>();
    for c in xc {
        store8(c, exp8(load8(c)));
    }
    if !xt.is_empty() {
        let mut b: [f32; 8] = pad(xt, 0.0);
        let e = exp8(load8(&b));
        store8(&mut b, e);
        unpad(xt, &b);
    }
}
