//! Vectorized row operations of the forward pass: RMSNorm, softmax,
//! SwiGLU, residual adds, and a vector `exp`. The attention kernels over
//! K/V rows are in [`crate::attn`].
//!
//! Every function runs on the kernels of the process-wide [`isa()`]; the
//! `*_with_isa` variants take the [`Isa`] explicitly (for tests and
//! benchmarks), and [`scalar`] holds the scalar twins with the same
//! signatures:
//!
//! ```text
//!   softmax(x) ─► softmax_with_isa(isa(), x) ─► Avx512 and available? ─yes─► simd::ops_avx512
//!                                                  │ no                         (softmax, swiglu)
//!                                                  ▼
//!                                               Avx2/Avx512 and available? ─yes─► simd::ops_avx2
//!                                                  │ no (Scalar, other CPU/arch)
//!                                                  ▼
//!                                               scalar::softmax
//! ```
//!
//! The scalar twins repeat the arithmetic of the forward pass's original
//! scalar code (sums of squares and softmax sums in `f64`), with fak's
//! own `exp` ([`crate::expf`]: glibc's `expf` algorithm, bit-identical to
//! it on x86-64 glibc 2.36) instead of the platform's libm. Every kernel
//! here is bit-identical on every ISA: RMSNorm (its `f64` sum in the AVX2
//! lane order), softmax and SwiGLU (the same `exp` and sum order), residual
//! adds; the attention kernels (`crate::attn`) are too. `FAK_ISA`
//! therefore never changes a logit through these kernels: a teacher-forced
//! golden once showed a 1-ulp `exp` difference growing into ~1% of the
//! logit range (docs/GOLDENS.md).
//!
//! Results depend only on the inputs and the ISA: never on slice alignment,
//! thread or batch, so logits stay batch-invariant.
//!
//! Length convention: arguments that pair up element by element should have
//! equal lengths (callers pass equal lengths). On a mismatch nothing panics:
//! the operation covers the shortest of them, as a `zip` would.

use crate::isa::{isa, Isa};
#[cfg(target_arch = "x86_64")]
use crate::simd::{ops_avx2, ops_avx512};

/// The scalar twins of the dispatched operations (same signatures), equal
/// bit for bit to the forward pass's original scalar code.
pub mod scalar {
    use crate::expf::expf;

    /// The order in which the AVX2 twins add up their `f64` lanes (`L` is
    /// 8 or 16: two or four `__m256d`, added as a tree, then the four lanes
    /// of the result): `v[j] = Σ_k lanes[4k + j]` (pairwise), then
    /// `(v0 + v2) + (v1 + v3)`.
    fn lane_sum<const L: usize>(lanes: &[f64; L]) -> f64 {
        let mut v = [0.0f64; 4];
        for (j, vj) in v.iter_mut().enumerate() {
            let l = |k: usize| lanes[4 * k + j];
            *vj = if L == 16 {
                (l(0) + l(1)) + (l(2) + l(3))
            } else {
                l(0) + l(1)
            };
        }
        (v[0] + v[2]) + (v[1] + v[3])
    }

    /// RMSNorm: `out[i] = (x[i] · scale) · w[i]` with
    /// `scale = 1 / sqrt(mean(x²) + eps)`, the (exact) squares summed in
    /// `f64` in 16 interleaved lanes (element `i` into lane `i % 16`),
    /// combined in the AVX2 twin's order, so both give the same bits.
    ///
    /// * `x`: `[n]` f32 (the mean is over all of it); `w`: `[n]` f32 norm
    ///   weights; `out`: `[n]` f32, written over the shortest length.
    pub fn rms_norm(x: &[f32], w: &[f32], eps: f32, out: &mut [f32]) {
        let mut lanes = [0.0f64; 16];
        for (i, &v) in x.iter().enumerate() {
            lanes[i % 16] += (v as f64) * (v as f64);
        }
        let sum = lane_sum(&lanes);
        let mean = (sum / x.len() as f64) as f32;
        let scale = 1.0f32 / (mean + eps).sqrt();
        for ((o, &v), &g) in out.iter_mut().zip(x).zip(w) {
            *o = (v * scale) * g;
        }
    }

    /// In-place softmax of `x` (`[n]` f32): `exp(x[i] - max)` with
    /// [`expf`], summed in `f64` in 8 interleaved lanes (combined as the
    /// AVX2 twin does), then multiplied by `(1 / sum) as f32`.
    /// `-inf` entries get weight 0; a row of only `-inf` becomes NaN.
    pub fn softmax(x: &mut [f32]) {
        let max = x.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        let mut lanes = [0.0f64; 8];
        for (i, v) in x.iter_mut().enumerate() {
            *v = expf(*v - max);
            lanes[i % 8] += *v as f64;
        }
        let sum = lane_sum(&lanes);
        let inv = (1.0 / sum) as f32;
        for v in x.iter_mut() {
            *v *= inv;
        }
    }

    /// SwiGLU: `gate[i] = (g / (1 + exp(-g))) · up[i]` with `g = gate[i]`,
    /// over `min(gate.len(), up.len())` elements.
    ///
    /// * `gate`, `up`: `[n]` f32.
    pub fn swiglu(gate: &mut [f32], up: &[f32]) {
        for (g, &u) in gate.iter_mut().zip(up) {
            let s = *g / (1.0 + expf(-*g));
            *g = s * u;
        }
    }

    /// `x[i] += y[i]` over `min(x.len(), y.len())` elements.
    ///
    /// * `x`, `y`: `[n]` f32.
    pub fn add_assign(x: &mut [f32], y: &[f32]) {
        for (a, &b) in x.iter_mut().zip(y) {
            *a += b;
        }
    }

    /// `x[i] = exp(x[i])` with [`expf`] (`x`: `[n]` f32).
    pub fn exp_in_place(x: &mut [f32]) {
        for v in x.iter_mut() {
            *v = expf(*v);
        }
    }
}

/// Whether the AVX2 twins may run for `isa` on this CPU.
#[cfg(target_arch = "x86_64")]
#[inline]
fn avx2_ok(isa: Isa) -> bool {
    isa != Isa::Scalar && Isa::Avx2.is_available()
}

/// Whether the AVX-512 twins may run for `isa` on this CPU.
#[cfg(target_arch = "x86_64")]
fn avx512_ok(isa: Isa) -> bool {
    isa == Isa::Avx512 && Isa::Avx512.is_available()
}

/// RMSNorm on the kernels of [`isa()`]; see [`rms_norm_with_isa`].
#[inline]
pub fn rms_norm(x: &[f32], w: &[f32], eps: f32, out: &mut [f32]) {
    rms_norm_with_isa(isa(), x, w, eps, out)
}

/// RMSNorm on the kernels of `isa`:
/// `out[i] = (x[i] · scale) · w[i]`, `scale = 1 / sqrt(mean(x²) + eps)`.
///
/// * `x`: `[n]` f32 (the mean is over all of it); `w`: `[n]` f32 norm
///   weights; `out`: `[n]` f32, written over the shortest of the three.
///
/// The sum of squares is accumulated in `f64` on every ISA (each square is
/// exact there) in the same 16 lanes and order: **bit-identical on every
/// ISA**.
pub fn rms_norm_with_isa(isa: Isa, x: &[f32], w: &[f32], eps: f32, out: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    if avx2_ok(isa) {
        // SAFETY: `avx2_ok` checked that the CPU has AVX2, FMA and F16C.
        return unsafe { ops_avx2::rms_norm(x, w, eps, out) };
    }
    let _ = isa;
    scalar::rms_norm(x, w, eps, out)
}

/// In-place softmax on the kernels of [`isa()`]; see [`softmax_with_isa`].
#[inline]
pub fn softmax(x: &mut [f32]) {
    softmax_with_isa(isa(), x)
}

/// In-place softmax of `x` (`[n]` f32) on the kernels of `isa`:
/// `x[i] = exp(x[i] - max) · (1 / Σ exp(x[j] - max))`, the sum in `f64`.
///
/// `-inf` entries (masked scores) get weight exactly 0 as long as one entry
/// is finite; a row of only `-inf` or NaN becomes NaN on every ISA.
/// **Bit-identical on every ISA**: the same `exp` ([`crate::expf`]) and
/// the same `f64` lane order for the sum.
pub fn softmax_with_isa(isa: Isa, x: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    if avx512_ok(isa) {
        // SAFETY: `avx512_ok` checked that the CPU has AVX-512 F (and AVX2).
        return unsafe { ops_avx512::softmax(x) };
    }
    #[cfg(target_arch = "x86_64")]
    if avx2_ok(isa) {
        // SAFETY: `avx2_ok` checked that the CPU has AVX2, FMA and F16C.
        return unsafe { ops_avx2::softmax(x) };
    }
    let _ = isa;
    scalar::softmax(x)
}

/// SwiGLU on the kernels of [`isa()`]; see [`swiglu_with_isa`].
#[inline]
pub fn swiglu(gate: &mut [f32], up: &[f32]) {
    swiglu_with_isa(isa(), gate, up)
}

/// SwiGLU on the kernels of `isa`: `gate[i] = silu(gate[i]) · up[i]` with
/// `silu(g) = g / (1 + exp(-g))`, over `min(gate.len(), up.len())` elements.
///
/// * `gate`, `up`: `[n]` f32 (the FFN gate and up projections).
///
/// **Bit-identical on every ISA** (the same `exp`, [`crate::expf`], then
/// the same division and product; `g < -88.72` gives `-0·u`).
pub fn swiglu_with_isa(isa: Isa, gate: &mut [f32], up: &[f32]) {
    #[cfg(target_arch = "x86_64")]
    if avx512_ok(isa) {
        // SAFETY: `avx512_ok` checked that the CPU has AVX-512 F (and AVX2).
        return unsafe { ops_avx512::swiglu(gate, up) };
    }
    #[cfg(target_arch = "x86_64")]
    if avx2_ok(isa) {
        // SAFETY: `avx2_ok` checked that the CPU has AVX2, FMA and F16C.
        return unsafe { ops_avx2::swiglu(gate, up) };
    }
    let _ = isa;
    scalar::swiglu(gate, up)
}

/// `x[i] += y[i]` on the kernels of [`isa()`]; see [`add_assign_with_isa`].
#[inline]
pub fn add_assign(x: &mut [f32], y: &[f32]) {
    add_assign_with_isa(isa(), x, y)
}

/// `x[i] += y[i]` over `min(x.len(), y.len())` elements on the kernels of
/// `isa`; bit-identical on every ISA.
///
/// * `x`, `y`: `[n]` f32.
pub fn add_assign_with_isa(isa: Isa, x: &mut [f32], y: &[f32]) {
    #[cfg(target_arch = "x86_64")]
    if avx2_ok(isa) {
        // SAFETY: `avx2_ok` checked that the CPU has AVX2, FMA and F16C.
        return unsafe { ops_avx2::add_assign(x, y) };
    }
    let _ = isa;
    scalar::add_assign(x, y)
}

/// `x[i] = e^x[i]` in place on the kernels of [`isa()`]; see
/// [`exp_in_place_with_isa`].
#[inline]
pub fn exp_in_place(x: &mut [f32]) {
    exp_in_place_with_isa(isa(), x)
}

/// `x[i] = e^x[i]` in place (`x`: `[n]` f32) on the kernels of `isa`: the
/// `exp` that [`softmax_with_isa`] and [`swiglu_with_isa`] use.
///
/// [`crate::expf::expf`] on every ISA, **bit-identical** (the AVX2 twin
/// runs its `f64` algorithm on 2 × 4 lanes): below 0.502 ulp from the
/// exact `e^x`; `x > 88.72 → +inf`, `x < -103.97 → +0`, `-inf → +0`,
/// NaN → NaN.
pub fn exp_in_place_with_isa(isa: Isa, x: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    if avx2_ok(isa) {
        // SAFETY: `avx2_ok` checked that the CPU has AVX2, FMA and F16C.
        return unsafe { ops_avx2::exp_in_place(x) };
    }
    let _ = isa;
    scalar::exp_in_place(x)
}
