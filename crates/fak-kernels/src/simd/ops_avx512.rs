//! AVX-512 twins of the two row operations of [`crate::ops`] that spend
//! their time in `exp`: `softmax` (attention weights) and `swiglu` (the
//! FFN gate). Their `exp` runs in `f64` ([`crate::expf::expf`]), so 16
//! lanes of `f32` are two registers of 8 `f64` here, where AVX2 needs four
//! of 4.
//!
//! Bit-identical to the AVX2 and scalar twins:
//!
//! * [`exp16`] is [`crate::expf::expf`] lane by lane: the same constants,
//!   the same three fused multiply-adds, the same single rounding to `f32`
//!   and the same special cases; the 32-entry table is read with two
//!   permutes instead of a gather (the same entries).
//! * `softmax` sums in the scalar twin's 8 `f64` lanes (element `i` into
//!   lane `i % 8`, in index order: a 16-element chunk adds its low 8, then
//!   its high 8), reduced as `hsum(lanes 0..4 + lanes 4..8)`.
//! * The last partial chunk is padded (`-inf` for softmax, which adds
//!   `+0.0` to a lane, `0.0` for swiglu) and copied back, as in AVX2.
//!
//! ```text
//!   x[16] ─► low 8 / high 8 widened to f64 ─► exp8_pd ─► rounded to f32
//!     x > 88.72 → +inf,  x < -103.97 (and -inf) → +0,  NaN → x + x
//! ```

use std::arch::x86_64::*;

use super::ops_avx2::{pad, unpad};
use crate::expf::{C0, C1, C2, INV_LN2_32, OVERFLOW_ABOVE, SHIFT, TAB, UNDERFLOW_BELOW};

/// Loads 16 `f32`.
#[inline]
#[target_feature(enable = "avx512f")]
fn load16(x: &[f32; 16]) -> __m512 {
    // SAFETY: `x` holds exactly 16 f32; `loadu` has no alignment requirement.
    unsafe { _mm512_loadu_ps(x.as_ptr()) }
}

/// Stores 16 `f32`.
#[inline]
#[target_feature(enable = "avx512f")]
fn store16(x: &mut [f32; 16], v: __m512) {
    // SAFETY: `x` holds exactly 16 f32; `storeu` has no alignment requirement.
    unsafe { _mm512_storeu_ps(x.as_mut_ptr(), v) }
}

/// The low and high 8 lanes widened to `f64`.
#[inline]
#[target_feature(enable = "avx512f")]
fn widen(v: __m512) -> (__m512d, __m512d) {
    let hi = _mm256_castpd_ps(_mm512_extractf64x4_pd::<1>(_mm512_castps_pd(v)));
    (
        _mm512_cvtps_pd(_mm512_castps512_ps256(v)),
        _mm512_cvtps_pd(hi),
    )
}

/// `TAB[idx]` for 8 indices in `0..32`: two 16-entry permutes, picked by
/// bit 4.
#[inline]
#[target_feature(enable = "avx512f")]
fn table(idx: __m512i) -> __m512i {
    // SAFETY: `TAB` holds 32 u64 = 4 × 64 bytes; `loadu` needs no alignment.
    let t = unsafe {
        let p = TAB.as_ptr().cast::<__m512i>();
        [
            _mm512_loadu_si512(p),
            _mm512_loadu_si512(p.add(1)),
            _mm512_loadu_si512(p.add(2)),
            _mm512_loadu_si512(p.add(3)),
        ]
    };
    let low = _mm512_permutex2var_epi64(t[0], idx, t[1]);
    let high = _mm512_permutex2var_epi64(t[2], idx, t[3]);
    let upper = _mm512_test_epi64_mask(idx, _mm512_set1_epi64(16));
    _mm512_mask_blend_epi64(upper, low, high)
}

/// `e^x` on 8 `f64` lanes holding `f32` inputs: `exp4_pd` of the AVX2
/// twin on twice the lanes, operation for operation. Inputs outside
/// `[-103.97, 88.72]` give garbage here that [`exp16`] replaces.
#[inline]
#[target_feature(enable = "avx512f")]
fn exp8_pd(xd: __m512d) -> __m512d {
    let shift = _mm512_set1_pd(f64::from_bits(SHIFT));
    let inv = _mm512_set1_pd(f64::from_bits(INV_LN2_32));
    let kd = _mm512_add_pd(_mm512_mul_pd(inv, xd), shift);
    let ki = _mm512_castpd_si512(kd);
    let kd = _mm512_sub_pd(kd, shift);
    let r = _mm512_fmsub_pd(inv, xd, kd);
    let idx = _mm512_and_si512(ki, _mm512_set1_epi64(31));
    let s = _mm512_castsi512_pd(_mm512_add_epi64(table(idx), _mm512_slli_epi64::<47>(ki)));
    let z = _mm512_fmadd_pd(
        _mm512_set1_pd(f64::from_bits(C0)),
        r,
        _mm512_set1_pd(f64::from_bits(C1)),
    );
    let r2 = _mm512_mul_pd(r, r);
    let y = _mm512_fmadd_pd(_mm512_set1_pd(f64::from_bits(C2)), r, _mm512_set1_pd(1.0));
    let y = _mm512_fmadd_pd(z, r2, y);
    _mm512_mul_pd(y, s)
}

/// `e^x` on 16 lanes: bit-identical to [`crate::expf::expf`] on every
/// input (see the module diagram).
#[inline]
#[target_feature(enable = "avx512f")]
fn exp16(x: __m512) -> __m512 {
    let (lo, hi) = widen(x);
    let lo = _mm512_cvtpd_ps(exp8_pd(lo));
    let hi = _mm512_cvtpd_ps(exp8_pd(hi));
    let y = _mm512_castpd_ps(_mm512_insertf64x4::<1>(
        _mm512_castpd256_pd512(_mm256_castps_pd(lo)),
        _mm256_castps_pd(hi),
    ));
    let over = _mm512_cmp_ps_mask::<_CMP_GT_OQ>(x, _mm512_set1_ps(f32::from_bits(OVERFLOW_ABOVE)));
    let under =
        _mm512_cmp_ps_mask::<_CMP_LT_OQ>(x, _mm512_set1_ps(-f32::from_bits(UNDERFLOW_BELOW)));
    let nan = _mm512_cmp_ps_mask::<_CMP_UNORD_Q>(x, x);
    let y = _mm512_mask_blend_ps(over, y, _mm512_set1_ps(f32::INFINITY));
    let y = _mm512_maskz_mov_ps(!under, y);
    _mm512_mask_blend_ps(nan, y, _mm512_add_ps(x, x))
}

/// `(a0 + a2) + (a1 + a3)` of `lanes 0..4 + lanes 4..8`: the AVX2 twin's
/// final reduction of its two 4-lane sums.
#[inline]
#[target_feature(enable = "avx512f")]
fn hsum8_pd(v: __m512d) -> f64 {
    let v = _mm256_add_pd(_mm512_castpd512_pd256(v), _mm512_extractf64x4_pd::<1>(v));
    let q = _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd::<1>(v));
    _mm_cvtsd_f64(_mm_add_sd(q, _mm_unpackhi_pd(q, q)))
}

/// AVX-512 twin of `ops::scalar::softmax`, bit-identical to it (see the
/// module overview).
///
/// * `x`: `[n]` f32, softmaxed in place.
///
/// # Safety
///
/// The CPU must support AVX-512 F (and AVX2, FMA, F16C).
#[target_feature(enable = "avx2,fma,f16c,avx512f")]
pub(crate) unsafe fn softmax(x: &mut [f32]) {
    if x.is_empty() {
        return;
    }
    let (xc, xt) = x.as_chunks::<16>();
    let mut mv = _mm512_set1_ps(f32::NEG_INFINITY);
    for c in xc {
        // NaN lanes of `c` give the second operand, the running max.
        mv = _mm512_max_ps(load16(c), mv);
    }
    let mut lanes = [0.0f32; 16];
    store16(&mut lanes, mv);
    let max = lanes
        .iter()
        .chain(xt)
        .copied()
        .fold(f32::NEG_INFINITY, f32::max);

    let mv = _mm512_set1_ps(max);
    let mut sum = _mm512_setzero_pd();
    let mut exp_add = |c: &mut [f32; 16]| {
        let e = exp16(_mm512_sub_ps(load16(c), mv));
        store16(c, e);
        let (lo, hi) = widen(e);
        sum = _mm512_add_pd(sum, lo);
        sum = _mm512_add_pd(sum, hi);
    };
    let (xc, xt) = x.as_chunks_mut::<16>();
    for c in xc.iter_mut() {
        exp_add(c);
    }
    if !xt.is_empty() {
        let mut b: [f32; 16] = pad(xt, f32::NEG_INFINITY);
        exp_add(&mut b);
        unpad(xt, &b);
    }
    let inv = (1.0 / hsum8_pd(sum)) as f32;
    let iv = _mm512_set1_ps(inv);
    for c in xc.iter_mut() {
        store16(c, _mm512_mul_ps(load16(c), iv));
    }
    for v in xt.iter_mut() {
        *v *= inv;
    }
}

/// AVX-512 twin of `ops::scalar::swiglu`, bit-identical to it: `gate[i] =
/// (g / (1 + exp(-g))) · up[i]` over `min(gate.len(), up.len())` elements.
///
/// * `gate`, `up`: `[n]` f32.
///
/// # Safety
///
/// The CPU must support AVX-512 F (and AVX2, FMA, F16C).
#[target_feature(enable = "avx2,fma,f16c,avx512f")]
pub(crate) unsafe fn swiglu(gate: &mut [f32], up: &[f32]) {
    let n = gate.len().min(up.len());
    let (gate, up) = (&mut gate[..n], &up[..n]);
    let one = _mm512_set1_ps(1.0);
    let body = |g: &mut [f32; 16], u: &[f32; 16]| {
        let gv = load16(g);
        let neg = _mm512_castsi512_ps(_mm512_xor_si512(
            _mm512_castps_si512(gv),
            _mm512_set1_epi32(i32::MIN),
        ));
        let s = _mm512_div_ps(gv, _mm512_add_ps(one, exp16(neg)));
        store16(g, _mm512_mul_ps(s, load16(u)));
    };
    let (gc, gt) = gate.as_chunks_mut::<16>();
    let (uc, ut) = up.as_chunks::<16>();
    for (g, u) in gc.iter_mut().zip(uc) {
        body(g, u);
    }
    if !gt.is_empty() {
        let mut gb: [f32; 16] = pad(gt, 0.0);
        body(&mut gb, &pad(ut, 0.0));
        unpad(gt, &gb);
    }
}
