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
//! * `dot_f32_f16`: 4 × 8 fused `f32` lanes instead of one running sum.
//! * `axpy_f16`: bit-identical (multiply, then add, per lane).
//! * `dot_f32_f16_rows`: bit-identical (one running sum per row, 8 or 16
//!   rows side by side in the lanes).
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
fn load8(x: &[f32; 8]) -> __m256 {
    // SAFETY: `x` holds exactly 8 f32; `loadu` has no alignment requirement.
    unsafe { _mm256_loadu_ps(x.as_ptr()) }
}

/// Stores 8 `f32`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn store8(x: &mut [f32; 8], v: __m256) {
    // SAFETY: `x` holds exactly 8 f32; `storeu` has no alignment requirement.
    unsafe { _mm256_storeu_ps(x.as_mut_ptr(), v) }
}

/// Loads 8 f16 bit patterns and widens them to `f32` (exact; NaNs become
/// quiet, as in [`crate::fp::f16_to_f32`]).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn load8_f16(x: &[u16; 8]) -> __m256 {
    // SAFETY: `x` holds exactly 8 u16 = 16 bytes; `loadu` has no alignment
    // requirement.
    _mm256_cvtph_ps(unsafe { _mm_loadu_si128(x.as_ptr().cast()) })
}

/// Copies `src` (fewer than `N` elements: a chunk remainder) into a buffer
/// of `N` elements filled with `fill` past its end.
#[inline(always)]
fn pad<T: Copy, const N: usize>(src: &[T], fill: T) -> [T; N] {
    let mut b = [fill; N];
    for (d, &s) in b.iter_mut().zip(src) {
        *d = s;
    }
    b
}

/// Copies the first `dst.len()` elements of `src` back into `dst`.
#[inline(always)]
fn unpad<const N: usize>(dst: &mut [f32], src: &[f32; N]) {
    for (d, &s) in dst.iter_mut().zip(src) {
        *d = s;
    }
}

/// Horizontal sum `((a0+a4)+(a2+a6)) + ((a1+a5)+(a3+a7))`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn hsum_ps(v: __m256) -> f32 {
    let q = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
    let d = _mm_add_ps(q, _mm_movehl_ps(q, q));
    let s = _mm_add_ss(d, _mm_movehdup_ps(d));
    _mm_cvtss_f32(s)
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

/// AVX2 twin of `ops::scalar::dot_f32_f16`: `Σ q[i] · f16(k[i])` over
/// `min(q.len(), k.len())` elements in 4 × 8 fused `f32` lanes.
///
/// * `q`: `[n]` f32; `k`: `[n]` f16 bit patterns.
///
/// ```text
///   32-element chunks:  acc[j] += q[32c+8j..][..8] · k[..]   j = 0..4
///   remainder (< 32):   whole 8s into acc[0], acc[1], acc[2]; the last
///                       partial 8 (zero-padded) into acc[3]
///   result:             hsum((acc0 + acc1) + (acc2 + acc3))
/// ```
///
/// # Safety
///
/// The CPU must support AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn dot_f32_f16(q: &[f32], k: &[u16]) -> f32 {
    let n = q.len().min(k.len());
    let (q, k) = (&q[..n], &k[..n]);
    let mut acc = [_mm256_setzero_ps(); 4];
    let (qc, qt) = q.as_chunks::<32>();
    let (kc, kt) = k.as_chunks::<32>();
    for (x, y) in qc.iter().zip(kc) {
        let xs = x.as_chunks::<8>().0;
        let ys = y.as_chunks::<8>().0;
        for ((a, xv), yv) in acc.iter_mut().zip(xs).zip(ys) {
            *a = _mm256_fmadd_ps(load8(xv), load8_f16(yv), *a);
        }
    }
    let (q8, qr) = qt.as_chunks::<8>();
    let (k8, kr) = kt.as_chunks::<8>();
    for ((a, xv), yv) in acc.iter_mut().zip(q8).zip(k8) {
        *a = _mm256_fmadd_ps(load8(xv), load8_f16(yv), *a);
    }
    if !qr.is_empty() {
        let xv: [f32; 8] = pad(qr, 0.0);
        let yv: [u16; 8] = pad(kr, 0);
        acc[3] = _mm256_fmadd_ps(load8(&xv), load8_f16(&yv), acc[3]);
    }
    hsum_ps(_mm256_add_ps(
        _mm256_add_ps(acc[0], acc[1]),
        _mm256_add_ps(acc[2], acc[3]),
    ))
}

/// AVX2 twin of `ops::scalar::axpy_f16`: `out[i] = out[i] + a · f16(v[i])`
/// (multiply, then add: bit-identical to the scalar twin)
/// over `min(v.len(), out.len())` elements.
///
/// * `v`: `[n]` f16 bit patterns; `out`: `[n]` f32.
///
/// # Safety
///
/// The CPU must support AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn axpy_f16(a: f32, v: &[u16], out: &mut [f32]) {
    let n = v.len().min(out.len());
    let (v, out) = (&v[..n], &mut out[..n]);
    let av = _mm256_set1_ps(a);
    let (oc, ot) = out.as_chunks_mut::<8>();
    let (vc, vt) = v.as_chunks::<8>();
    for (o, x) in oc.iter_mut().zip(vc) {
        store8(o, _mm256_add_ps(load8(o), _mm256_mul_ps(av, load8_f16(x))));
    }
    if !ot.is_empty() {
        let mut ob: [f32; 8] = pad(ot, 0.0);
        let vb: [u16; 8] = pad(vt, 0);
        let r = _mm256_add_ps(load8(&ob), _mm256_mul_ps(av, load8_f16(&vb)));
        store8(&mut ob, r);
        unpad(ot, &ob);
    }
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

/// Transposes an 8 × 8 matrix of 16-bit values: `rows[r]` lane `c` becomes
/// `out[c]` lane `r`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn transpose8x8_epi16(r: [__m128i; 8]) -> [__m128i; 8] {
    let t0 = _mm_unpacklo_epi16(r[0], r[1]);
    let t1 = _mm_unpackhi_epi16(r[0], r[1]);
    let t2 = _mm_unpacklo_epi16(r[2], r[3]);
    let t3 = _mm_unpackhi_epi16(r[2], r[3]);
    let t4 = _mm_unpacklo_epi16(r[4], r[5]);
    let t5 = _mm_unpackhi_epi16(r[4], r[5]);
    let t6 = _mm_unpacklo_epi16(r[6], r[7]);
    let t7 = _mm_unpackhi_epi16(r[6], r[7]);
    let u0 = _mm_unpacklo_epi32(t0, t2);
    let u1 = _mm_unpackhi_epi32(t0, t2);
    let u2 = _mm_unpacklo_epi32(t1, t3);
    let u3 = _mm_unpackhi_epi32(t1, t3);
    let u4 = _mm_unpacklo_epi32(t4, t6);
    let u5 = _mm_unpackhi_epi32(t4, t6);
    let u6 = _mm_unpacklo_epi32(t5, t7);
    let u7 = _mm_unpackhi_epi32(t5, t7);
    [
        _mm_unpacklo_epi64(u0, u4),
        _mm_unpackhi_epi64(u0, u4),
        _mm_unpacklo_epi64(u1, u5),
        _mm_unpackhi_epi64(u1, u5),
        _mm_unpacklo_epi64(u2, u6),
        _mm_unpackhi_epi64(u2, u6),
        _mm_unpacklo_epi64(u3, u7),
        _mm_unpackhi_epi64(u3, u7),
    ]
}

/// Loads dims `i..i + 8` of rows `r..r + 8` (row `j` starts at
/// `k[(r + j) * stride]`) and returns them transposed: vector `c` holds dim
/// `i + c` of the 8 rows, widened to `f32`.
///
/// # Safety
///
/// `(r + 7) * stride + i + 8 <= k.len()`; the CPU must support AVX2 and F16C.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn load_cols(k: &[u16], stride: usize, r: usize, i: usize) -> [__m256; 8] {
    let base = k.as_ptr();
    // SAFETY: the caller guarantees every row's 8 values lie inside `k`.
    let rows: [__m128i; 8] =
        std::array::from_fn(|j| unsafe { _mm_loadu_si128(base.add((r + j) * stride + i).cast()) });
    transpose8x8_epi16(rows).map(|c| _mm256_cvtph_ps(c))
}

/// AVX2 twin of `ops::scalar::dot_f32_f16_rows`, bit-identical to it: lane
/// `j` keeps row `r + j`'s running sum `acc = acc + q[i] · k[i]` in index
/// order (multiply, then add), so the vector code only changes which row a
/// lane works on, never the arithmetic. 16 rows run side by side while they
/// last (two independent add chains), then 8, then the scalar twin.
///
/// ```text
///   rows r..r+8, dims i..i+8          transposed: one vector per dim
///   r+0: k00 k01 .. k07               dim i+0: k00 k10 .. k70  ─► acc += q[i+0]·dim
///   ...                     ──►       ...
///   r+7: k70 k71 .. k77               dim i+7: k07 k17 .. k77  ─► acc += q[i+7]·dim
/// ```
///
/// * `q`: `[n]`; `k`: rows of `n` f16 at stride `stride`; `out`: `[n_rows]`.
///
/// # Safety
///
/// `n_rows == 0` or `(n_rows - 1) * stride + q.len() <= k.len()`, and
/// `out.len() >= n_rows`; the CPU must support AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn dot_f32_f16_rows(
    q: &[f32],
    k: &[u16],
    stride: usize,
    n_rows: usize,
    out: &mut [f32],
) {
    let n = q.len();
    let n8 = n / 8 * 8;
    let finish = |acc: __m256, r: usize, out: &mut [f32]| {
        let mut lanes = [0.0f32; 8];
        store8(&mut lanes, acc);
        for (j, mut a) in lanes.into_iter().enumerate() {
            let row = &k[(r + j) * stride..(r + j) * stride + n];
            for (x, &y) in q[n8..].iter().zip(&row[n8..]) {
                a += x * crate::fp::f16_to_f32(y);
            }
            out[r + j] = a;
        }
    };
    let mut r = 0;
    while r + 16 <= n_rows {
        let (mut a0, mut a1) = (_mm256_setzero_ps(), _mm256_setzero_ps());
        for i in (0..n8).step_by(8) {
            // SAFETY: rows r..r+16 hold dims 0..n (caller's bound), i + 8 <= n.
            let (c0, c1) = unsafe { (load_cols(k, stride, r, i), load_cols(k, stride, r + 8, i)) };
            for c in 0..8 {
                let qv = _mm256_set1_ps(q[i + c]);
                a0 = _mm256_add_ps(a0, _mm256_mul_ps(qv, c0[c]));
                a1 = _mm256_add_ps(a1, _mm256_mul_ps(qv, c1[c]));
            }
        }
        finish(a0, r, out);
        finish(a1, r + 8, out);
        r += 16;
    }
    while r + 8 <= n_rows {
        let mut a0 = _mm256_setzero_ps();
        for i in (0..n8).step_by(8) {
            // SAFETY: rows r..r+8 hold dims 0..n (caller's bound), i + 8 <= n.
            let c0 = unsafe { load_cols(k, stride, r, i) };
            for (c, col) in c0.iter().enumerate() {
                a0 = _mm256_add_ps(a0, _mm256_mul_ps(_mm256_set1_ps(q[i + c]), *col));
            }
        }
        finish(a0, r, out);
        r += 8;
    }
    for rr in r..n_rows {
        out[rr] = crate::ops::scalar::dot_f32_f16(q, &k[rr * stride..rr * stride + n]);
    }
}

/// AVX2 twin of `ops::scalar::dot_f32_f16_rows_group`, bit-identical to
/// it: the queries run in passes of up to 4 ([`rows_group`]); a single
/// query takes [`dot_f32_f16_rows`].
///
/// * `q`: `[G, n]`; `k`: rows of `n` f16 at `stride`; `out`: `[G,
///   out_stride]`.
///
/// # Safety
///
/// `n > 0`; `n_rows == 0` or `(n_rows - 1) * stride + n <= k.len()`; for
/// `G = q.len() / n > 1`, `n_rows <= out_stride` and
/// `(G - 1) * out_stride + n_rows <= out.len()` (for `G == 1`,
/// `n_rows <= out.len()`); the CPU must support AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn dot_f32_f16_rows_group(
    q: &[f32],
    n: usize,
    k: &[u16],
    stride: usize,
    n_rows: usize,
    out: &mut [f32],
    out_stride: usize,
) {
    let g_all = q.len() / n;
    if g_all == 1 {
        // SAFETY: the caller's bounds for one query.
        return unsafe { dot_f32_f16_rows(&q[..n], k, stride, n_rows, out) };
    }
    if g_all > 4 && n <= TILE_DIMS {
        // SAFETY: the caller's bounds.
        return unsafe { rows_group_tiled(q, n, k, stride, n_rows, out, out_stride) };
    }
    let mut g0 = 0;
    while g0 < g_all {
        let (qg, og) = (&q[g0 * n..], &mut out[g0 * out_stride..]);
        // SAFETY (each arm): the caller's bounds, for queries g0.. .
        let done = unsafe {
            match g_all - g0 {
                1 => rows_group::<1>(qg, n, k, stride, n_rows, og, out_stride),
                2 => rows_group::<2>(qg, n, k, stride, n_rows, og, out_stride),
                3 => rows_group::<3>(qg, n, k, stride, n_rows, og, out_stride),
                _ => rows_group::<4>(qg, n, k, stride, n_rows, og, out_stride),
            }
        };
        g0 += done;
    }
}

/// Widest head that [`rows_group_tiled`] keeps a transposed key tile of.
const TILE_DIMS: usize = 256;

/// Many queries (more than 4; e.g. a prefill chunk's tokens × the query
/// heads of one KV head): each 8-row key tile is transposed once into a
/// stack buffer, then every query, 8 at a time, runs the lane-per-row sums
/// of [`dot_f32_f16_rows`] over it (the same arithmetic, so the same bits).
///
/// # Safety
///
/// As [`dot_f32_f16_rows_group`], and `n <= TILE_DIMS`.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn rows_group_tiled(
    q: &[f32],
    n: usize,
    k: &[u16],
    stride: usize,
    n_rows: usize,
    out: &mut [f32],
    out_stride: usize,
) {
    let g_all = q.len() / n;
    let n8 = n / 8 * 8;
    let mut tile = [_mm256_setzero_ps(); TILE_DIMS];
    let mut r = 0;
    while r + 8 <= n_rows {
        for i in (0..n8).step_by(8) {
            // SAFETY: rows r..r+8 hold dims 0..n (caller's bound), i + 8 <= n.
            let cols = unsafe { load_cols(k, stride, r, i) };
            tile[i..i + 8].copy_from_slice(&cols);
        }
        let mut g0 = 0;
        while g0 < g_all {
            let left = g_all - g0;
            let (qg, og) = (&q[g0 * n..], &mut out[g0 * out_stride..]);
            let t = &tile[..n8];
            let at = (stride, r);
            // Up to 8 queries per pass: 8 independent add chains hide the
            // add latency (4 measured latency-bound).
            g0 += match left {
                1 => tile_queries::<1>(t, qg, n, k, at, og, out_stride),
                2 => tile_queries::<2>(t, qg, n, k, at, og, out_stride),
                3 => tile_queries::<3>(t, qg, n, k, at, og, out_stride),
                4 => tile_queries::<4>(t, qg, n, k, at, og, out_stride),
                5 => tile_queries::<5>(t, qg, n, k, at, og, out_stride),
                6 => tile_queries::<6>(t, qg, n, k, at, og, out_stride),
                7 => tile_queries::<7>(t, qg, n, k, at, og, out_stride),
                _ => tile_queries::<8>(t, qg, n, k, at, og, out_stride),
            };
        }
        r += 8;
    }
    for rr in r..n_rows {
        let row = &k[rr * stride..rr * stride + n];
        for (g, qg) in q.chunks_exact(n).enumerate() {
            out[g * out_stride + rr] = crate::ops::scalar::dot_f32_f16(qg, row);
        }
    }
}

/// The first `G` queries of `q` over one transposed key tile (`tile[d]`:
/// dim `d` of rows `r..r + 8`); dims past the tile run in scalar order per
/// row. Returns `G`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn tile_queries<const G: usize>(
    tile: &[__m256],
    q: &[f32],
    n: usize,
    k: &[u16],
    (stride, r): (usize, usize),
    out: &mut [f32],
    out_stride: usize,
) -> usize {
    let n8 = tile.len().min(n);
    let qs: [&[f32]; G] = std::array::from_fn(|g| &q[g * n..(g + 1) * n]);
    let qp = q[..G * n].as_ptr();
    let mut acc = [_mm256_setzero_ps(); G];
    for (d, col) in tile[..n8].iter().enumerate() {
        for (g, a) in acc.iter_mut().enumerate() {
            // SAFETY: `g < G` and `d < n8 <= n`, so `g * n + d < G * n`,
            // inside `q[..G * n]` (checked above). Unchecked: the indexed
            // form kept a bounds check per query and dim in this loop.
            let x = unsafe { *qp.add(g * n + d) };
            *a = _mm256_add_ps(*a, _mm256_mul_ps(_mm256_set1_ps(x), *col));
        }
    }
    for (g, (a, qg)) in acc.into_iter().zip(qs).enumerate() {
        let mut lanes = [0.0f32; 8];
        store8(&mut lanes, a);
        for (j, mut s) in lanes.into_iter().enumerate() {
            let row = &k[(r + j) * stride..(r + j) * stride + n];
            for (x, &y) in qg[n8..].iter().zip(&row[n8..]) {
                s += x * crate::fp::f16_to_f32(y);
            }
            out[g * out_stride + r + j] = s;
        }
    }
    G
}

/// Scores of the first `G` queries of `q` (one pass); returns `G`. Each
/// 8 × 8 key tile is loaded and transposed once, then every query keeps
/// its own lane-per-row running sums (the arithmetic of
/// [`dot_f32_f16_rows`]).
///
/// # Safety
///
/// As [`dot_f32_f16_rows_group`], with `q` holding at least `G` queries
/// and `out` their `G` output rows.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn rows_group<const G: usize>(
    q: &[f32],
    n: usize,
    k: &[u16],
    stride: usize,
    n_rows: usize,
    out: &mut [f32],
    out_stride: usize,
) -> usize {
    let n8 = n / 8 * 8;
    let qs: [&[f32]; G] = std::array::from_fn(|g| &q[g * n..(g + 1) * n]);
    let qp = q[..G * n].as_ptr();
    let mut r = 0;
    while r + 8 <= n_rows {
        let mut acc = [_mm256_setzero_ps(); G];
        for i in (0..n8).step_by(8) {
            // SAFETY: rows r..r+8 hold dims 0..n (caller's bound), i + 8 <= n.
            let cols = unsafe { load_cols(k, stride, r, i) };
            for (g, a) in acc.iter_mut().enumerate() {
                for (c, col) in cols.iter().enumerate() {
                    // SAFETY: g < G and i + c < n8 <= n: inside q[..G * n].
                    let x = unsafe { *qp.add(g * n + i + c) };
                    *a = _mm256_add_ps(*a, _mm256_mul_ps(_mm256_set1_ps(x), *col));
                }
            }
        }
        for (g, (a, qg)) in acc.into_iter().zip(qs).enumerate() {
            let mut lanes = [0.0f32; 8];
            store8(&mut lanes, a);
            for (j, mut s) in lanes.into_iter().enumerate() {
                let row = &k[(r + j) * stride..(r + j) * stride + n];
                for (x, &y) in qg[n8..].iter().zip(&row[n8..]) {
                    s += x * crate::fp::f16_to_f32(y);
                }
                out[g * out_stride + r + j] = s;
            }
        }
        r += 8;
    }
    for rr in r..n_rows {
        let row = &k[rr * stride..rr * stride + n];
        for (g, qg) in qs.iter().enumerate() {
            out[g * out_stride + rr] = crate::ops::scalar::dot_f32_f16(qg, row);
        }
    }
    G
}

/// AVX2 twin of `ops::scalar::axpy_f16_rows`, bit-identical to it: for each
/// row `r` in order, `out[i] = out[i] + w[r] · f16(v[r * stride + i])`
/// (multiply, then add), with `out` held in registers across the rows
/// when it is 64 wide (the head dim of both supported models); other
/// widths run the single-row twin per row.
///
/// * `w`: `[n_rows]`; `v`: rows of `out.len()` f16 at `stride`; `out`: `[n]`.
///
/// # Safety
///
/// `n_rows == 0` or `(n_rows - 1) * stride + out.len() <= v.len()`, and
/// `w.len() >= n_rows`; the CPU must support AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn axpy_f16_rows(
    w: &[f32],
    v: &[u16],
    stride: usize,
    n_rows: usize,
    out: &mut [f32],
) {
    let n = out.len();
    if n != 64 {
        for (r, &wr) in w.iter().enumerate().take(n_rows) {
            // SAFETY: as this function's (row r lies inside `v`).
            unsafe { axpy_f16(wr, &v[r * stride..r * stride + n], out) };
        }
        return;
    }
    let Some(o) = out.first_chunk_mut::<64>() else {
        return;
    };
    let (oc, _) = o.as_chunks_mut::<8>();
    let mut acc = [_mm256_setzero_ps(); 8];
    for (a, c) in acc.iter_mut().zip(oc.iter()) {
        *a = load8(c);
    }
    for (r, &wr) in w.iter().enumerate().take(n_rows) {
        let wv = _mm256_set1_ps(wr);
        let row = &v[r * stride..r * stride + 64];
        let (rc, _) = row.as_chunks::<8>();
        for (a, x) in acc.iter_mut().zip(rc) {
            *a = _mm256_add_ps(*a, _mm256_mul_ps(wv, load8_f16(x)));
        }
    }
    for (a, c) in acc.iter().zip(oc.iter_mut()) {
        store8(c, *a);
    }
}
