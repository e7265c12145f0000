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
//! * `rms_norm`: the squares are exact in `f64` either way; only the order
//!   of the `f64` additions differs (4 × 4 lanes). The output multiplies are
//!   the scalar ones.
//! * `softmax`, `swiglu`, `exp`: the polynomial [`exp8`] instead of libm's
//!   `expf` (relative error below `1e-7`, see its docs); the softmax sum is
//!   in `f64` like the scalar one, in 2 × 4 lanes.
//! * `add_assign`: bit-identical.

use std::arch::x86_64::*;

/// `log2(e)`.
const LOG2E: f32 = std::f32::consts::LOG2_E;
/// `ln 2` split Cephes-style: `LN2_HI` has 9 significant bits, so `n · LN2_HI`
/// is exact for the `|n| ≤ 159` that occur; `LN2_HI + LN2_LO ≈ ln 2`.
const LN2_HI: f32 = 0.693_359_4;
/// Low part of `ln 2` (see [`LN2_HI`]).
const LN2_LO: f32 = -2.121_944_4e-4;
/// Inputs above this give `+inf` (`ln(f32::MAX) ≈ 88.72`).
const EXP_HI: f32 = 89.0;
/// Inputs below this give `+0` (`exp(-104) < 2^-150`, half the smallest
/// subnormal).
const EXP_LO: f32 = -110.0;
/// Cephes `expf` minimax coefficients of `(e^r - 1 - r) / r²`, highest first.
const EXP_POLY: [f32; 6] = [
    1.987_569_1e-4,
    1.398_199_9e-3,
    8.333_452e-3,
    4.166_579_6e-2,
    1.666_666_5e-1,
    0.5, // Cephes 5.0000001201e-1, which rounds to 0.5 in f32
];

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

/// `e^x` on 8 lanes, Cephes-style with a split `2^n` scale.
///
/// ```text
///   x ─► clamp to [-110, 89] (NaN stays NaN)
///     n = round(x · log2 e)                 integer, |n| ≤ 159
///     r = (x - n·LN2_HI) - n·LN2_LO         |r| ≲ ln2/2, nearly exact (FMA)
///     p = 1 + r + r²·P(r)                   degree-5 minimax P (Cephes expf)
///     e^x = p · 2^n = (p · 2^⌊n/2⌋) · 2^(n-⌊n/2⌋)
///             └ exact, normal ┘    └ one rounding: correct subnormals,
///                                    +0 below ≈ -103.97, +inf above ≈ 88.72
/// ```
///
/// Each factor `2^k` has `|k| ≤ 80`, so it is a normal float built from its
/// exponent bits. Maximum relative error against the exact `e^x` for
/// results in the normal range (`x` in `[-87.33, 88.72]`): `8.5e-8`, i.e.
/// within 1 ulp (at most 1 ulp from libm `expf` too), checked on every such
/// `f32` by the ignored test `exp_exhaustive_normal_range` in `tests/ops.rs`
/// (documented bound: `1e-7`). Subnormal results are rounded once from the
/// scaled polynomial (absolute error ≤ `2^-149` beyond the relative one).
/// Special inputs: `-inf → +0`, `+inf → +inf`, NaN → NaN.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn exp8(x: __m256) -> __m256 {
    // `max_ps`/`min_ps` return their second operand when either is NaN, so
    // putting `x` second keeps NaN.
    let x = _mm256_min_ps(
        _mm256_set1_ps(EXP_HI),
        _mm256_max_ps(_mm256_set1_ps(EXP_LO), x),
    );
    let n = _mm256_round_ps::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(_mm256_mul_ps(
        x,
        _mm256_set1_ps(LOG2E),
    ));
    let r = _mm256_fnmadd_ps(n, _mm256_set1_ps(LN2_HI), x);
    let r = _mm256_fnmadd_ps(n, _mm256_set1_ps(LN2_LO), r);
    let mut p = _mm256_set1_ps(EXP_POLY[0]);
    for &c in &EXP_POLY[1..] {
        p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(c));
    }
    let y = _mm256_add_ps(
        _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), r),
        _mm256_set1_ps(1.0),
    );
    // `n` is integral (or NaN, where `y` is NaN too and the scale is moot).
    let ni = _mm256_cvtps_epi32(n);
    let n1 = _mm256_srai_epi32::<1>(ni);
    let n2 = _mm256_sub_epi32(ni, n1);
    let bias = _mm256_set1_epi32(127);
    let s1 = _mm256_castsi256_ps(_mm256_slli_epi32::<23>(_mm256_add_epi32(n1, bias)));
    let s2 = _mm256_castsi256_ps(_mm256_slli_epi32::<23>(_mm256_add_epi32(n2, bias)));
    _mm256_mul_ps(_mm256_mul_ps(y, s1), s2)
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
