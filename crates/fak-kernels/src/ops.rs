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
//!   softmax(x) ─► softmax_with_isa(isa(), x) ─► Avx2/Avx512 and available? ─yes─► simd::ops_avx2
//!                                                  │ no (Scalar, other CPU/arch)
//!                                                  ▼
//!                                               scalar::softmax
//! ```
//!
//! The scalar twins repeat the arithmetic of the forward pass's original
//! scalar code operation for operation (sums of squares and softmax sums in
//! `f64`, libm `expf`), so `FAK_ISA=scalar` reproduces its numbers bit for
//! bit. The AVX2 twins differ only in float rounding, with tolerances in
//! each function's docs (`add_assign` is bit-identical); the `Avx512` ISA
//! runs the AVX2 twins.
//!
//! Results depend only on the inputs and the ISA: never on slice alignment,
//! thread or batch, so logits stay batch-invariant.
//!
//! Length convention: arguments that pair up element by element should have
//! equal lengths (callers pass equal lengths). On a mismatch nothing panics:
//! the operation covers the shortest of them, as a `zip` would.

use crate::isa::{isa, Isa};
#[cfg(target_arch = "x86_64")]
use crate::simd::ops_avx2;

/// The scalar twins of the dispatched operations (same signatures), equal
/// bit for bit to the forward pass's original scalar code.
pub mod scalar {
    /// RMSNorm: `out[i] = (x[i] · scale) · w[i]` with
    /// `scale = 1 / sqrt(mean(x²) + eps)`, the sum of squares in `f64` in
    /// index order.
    ///
    /// * `x`: `[n]` f32 (the mean is over all of it); `w`: `[n]` f32 norm
    ///   weights; `out`: `[n]` f32, written over the shortest length.
    pub fn rms_norm(x: &[f32], w: &[f32], eps: f32, out: &mut [f32]) {
        let sum: f64 = x.iter().map(|&v| (v as f64) * (v as f64)).sum();
        let mean = (sum / x.len() as f64) as f32;
        let scale = 1.0f32 / (mean + eps).sqrt();
        for ((o, &v), &g) in out.iter_mut().zip(x).zip(w) {
            *o = (v * scale) * g;
        }
    }

    /// In-place softmax of `x` (`[n]` f32): `exp(x[i] - max)` with libm
    /// `expf`, summed in `f64`, then multiplied by `(1 / sum) as f32`.
    /// `-inf` entries get weight 0; a row of only `-inf` becomes NaN.
    pub fn softmax(x: &mut [f32]) {
        let max = x.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        let mut sum = 0.0f64;
        for v in x.iter_mut() {
            *v = (*v - max).exp();
            sum += *v as f64;
        }
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
            let s = *g / (1.0 + (-*g).exp());
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

    /// `x[i] = exp(x[i])` with libm `expf` (`x`: `[n]` f32).
    pub fn exp_in_place(x: &mut [f32]) {
        for v in x.iter_mut() {
            *v = v.exp();
        }
    }
}

/// Whether the AVX2 twins may run for `isa` on this CPU.
#[cfg(target_arch = "x86_64")]
#[inline]
fn avx2_ok(isa: Isa) -> bool {
    isa != Isa::Scalar && Isa::Avx2.is_available()
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
/// exact there); the AVX2 twin only adds in a different order, so its
/// output is within `1e-6` relative of the scalar twin's (in practice
/// nearly always equal).
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
/// is finite; a row of only `-inf` or NaN becomes NaN on every ISA. The AVX2
/// twin uses a polynomial `exp` (relative error below `1e-7`, see
/// [`exp_in_place_with_isa`]): each weight is within `1e-6` relative of the
/// scalar twin's.
pub fn softmax_with_isa(isa: Isa, x: &mut [f32]) {
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
/// The AVX2 twin uses the polynomial `exp`: within `1e-6` relative of the
/// scalar twin (same infinities, zeros and NaNs: `g ≤ -89` gives `-0·u`).
pub fn swiglu_with_isa(isa: Isa, gate: &mut [f32], up: &[f32]) {
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
/// Scalar: libm `expf`. AVX2: Cephes-style polynomial (range reduction by
/// `ln 2`, degree-5 minimax, split `2^n` scale) with relative error below
/// `1e-7` against the exact `e^x` for normal results (checked on every such
/// `f32` input: at most `8.5e-8`, within 1 ulp of libm `expf`);
/// subnormal results (`x` in about `[-103.9, -87.3]`) are correctly scaled
/// with at most `2^-149` absolute error; `x < -103.97 → +0`,
/// `x > 88.72 → +inf`, `-inf → +0`, NaN → NaN.
pub fn exp_in_place_with_isa(isa: Isa, x: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    if avx2_ok(isa) {
        // SAFETY: `avx2_ok` checked that the CPU has AVX2, FMA and F16C.
        return unsafe { ops_avx2::exp_in_place(x) };
    }
    let _ = isa;
    scalar::exp_in_place(x)
}
