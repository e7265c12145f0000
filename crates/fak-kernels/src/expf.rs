//! The `f32` exponential of the forward pass (softmax and SwiGLU), one
//! algorithm on every ISA so that `FAK_ISA` never changes a logit through
//! `exp`.
//!
//! It is the algorithm of glibc's `expf` (ARM optimized-routines, glibc
//! 2.28+), as glibc's x86-64 FMA build runs it, in `f64`:
//!
//! ```text
//!   z  = x · (32 / ln 2)          kd = round(z) (shift trick), ki = bits(kd)
//!   r  = fma(x, 32/ln2, -kd)      |r| ≤ 1/2, i.e. x = (kd + r) · ln2 / 32
//!   s  = 2^(kd/32) = bits(TAB[ki % 32] + (ki << 47))
//!   e^x ≈ s · (1 + C2·r + r²·(C0·r + C1))   three fused multiply-adds
//!   x > 88.72 → +inf,  x < -103.97 → +0,  NaN → NaN
//! ```
//!
//! The error is below 0.502 ulp (glibc's bound for this algorithm), so the
//! result is the correctly rounded `e^x` for all but a few inputs. Over all
//! 2^32 `f32` inputs it is bit-identical to glibc 2.36's `expf` on an
//! FMA-capable x86-64 (run once when this was written: 0 differences; the
//! same loop with a plain `z - kd` for `r`, as glibc's non-FMA build
//! computes it, gave 2). The scalar twin ([`expf`]) uses `f64::mul_add`
//! and the AVX2 twin (`simd::ops_avx2`) `vfmadd…pd` on the same constants,
//! so the two give the same bits for every input; `tests/ops.rs` checks
//! that on dense sweeps and the special values.
//!
//! Why this and not a cheaper `f32` polynomial: the AVX2 path once used a
//! Cephes-style `f32` polynomial (within 1 ulp), and the teacher-forced
//! goldens (crates/fak-model/tests/teacher.rs, docs/GOLDENS.md) showed
//! that its ~1-ulp differences from libm, passed through every softmax and
//! SwiGLU and the 8-bit activation rounding of 24 layers, moved Qwen2.5's
//! logits by about 1% of their range at every decode step: as much as the
//! scalar path's whole error against llama.cpp.

/// `TAB[i] = bits(2^(i/32)) - (i << 47)`: the table of glibc's
/// `__exp2f_data` (`EXP2F_TABLE_BITS` = 5).
pub(crate) const TAB: [u64; 32] = [
    0x3ff0000000000000,
    0x3fefd9b0d3158574,
    0x3fefb5586cf9890f,
    0x3fef9301d0125b51,
    0x3fef72b83c7d517b,
    0x3fef54873168b9aa,
    0x3fef387a6e756238,
    0x3fef1e9df51fdee1,
    0x3fef06fe0a31b715,
    0x3feef1a7373aa9cb,
    0x3feedea64c123422,
    0x3feece086061892d,
    0x3feebfdad5362a27,
    0x3feeb42b569d4f82,
    0x3feeab07dd485429,
    0x3feea47eb03a5585,
    0x3feea09e667f3bcd,
    0x3fee9f75e8ec5f74,
    0x3feea11473eb0187,
    0x3feea589994cce13,
    0x3feeace5422aa0db,
    0x3feeb737b0cdc5e5,
    0x3feec49182a3f090,
    0x3feed503b23e255d,
    0x3feee89f995ad3ad,
    0x3feeff76f2fb5e47,
    0x3fef199bdd85529c,
    0x3fef3720dcef9069,
    0x3fef5818dcfba487,
    0x3fef7c97337b9b5f,
    0x3fefa4afa2a490da,
    0x3fefd0765b6e4540,
];

/// `32 / ln 2` (glibc `invln2_scaled`, `0x1.71547652b82fep+0 · 32`).
pub(crate) const INV_LN2_32: u64 = 0x40471547652b82fe;
/// `0x1.8p+52`: adding it rounds a `|z| < 2^51` to an integer (ties to
/// even) held in the low mantissa bits.
pub(crate) const SHIFT: u64 = 0x4338000000000000;
/// Polynomial `C0·r³ + C1·r² + C2·r + 1 ≈ 2^(r/32)` (glibc `poly_scaled`).
pub(crate) const C0: u64 = 0x3ebc6af84b912394;
/// See [`C0`].
pub(crate) const C1: u64 = 0x3f2ebfce50fac4f3;
/// See [`C0`].
pub(crate) const C2: u64 = 0x3f962e42ff0c52d6;
/// Largest `x` with a finite `e^x`: `0x1.62e42ep6` ≈ 88.72 (bits of the f32).
pub(crate) const OVERFLOW_ABOVE: u32 = 0x42b17217;
/// `x` below `-0x1.9fe368p6` ≈ -103.97 gives +0 (bits of the positive f32).
pub(crate) const UNDERFLOW_BELOW: u32 = 0x42cff1b4;

/// `e^x` (see the module docs): the scalar twin of the AVX2 `exp8`.
#[inline]
pub fn expf(x: f32) -> f32 {
    if x.is_nan() {
        return x + x;
    }
    if x > f32::from_bits(OVERFLOW_ABOVE) {
        return f32::INFINITY;
    }
    if x < -f32::from_bits(UNDERFLOW_BELOW) {
        return 0.0;
    }
    let shift = f64::from_bits(SHIFT);
    let inv = f64::from_bits(INV_LN2_32);
    let xd = f64::from(x);
    let kd = inv * xd + shift;
    let ki = kd.to_bits();
    let kd = kd - shift;
    let r = inv.mul_add(xd, -kd);
    let t = TAB[(ki % 32) as usize].wrapping_add(ki << 47);
    let s = f64::from_bits(t);
    let z = f64::from_bits(C0).mul_add(r, f64::from_bits(C1));
    let r2 = r * r;
    let y = f64::from_bits(C2).mul_add(r, 1.0);
    let y = z.mul_add(r2, y);
    (y * s) as f32
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The table is `2^(i/32)` less the exponent step that `ki << 47` adds.
    #[test]
    fn table_is_powers_of_two() {
        for (i, &t) in TAB.iter().enumerate() {
            let v = f64::from_bits(t + ((i as u64) << 47));
            let want = (i as f64 / 32.0).exp2();
            assert!(
                (v - want).abs() <= want * 2.3e-16,
                "TAB[{i}]: {v} vs {want}"
            );
        }
    }

    #[test]
    fn close_to_f64_exp() {
        // Normal results only (x ≥ -87.3): below, an ulp is absolute.
        for i in -1970..=2000 {
            let x = i as f32 * 0.0443;
            let want = f64::from(x).exp();
            let got = f64::from(expf(x));
            // 0.502 ulp of the f32 result (ulp = 2^-23 relative, at most).
            assert!(
                (got - want).abs() <= want * 0.502 * 2f64.powi(-23),
                "expf({x}) = {got}, want {want}"
            );
        }
    }
}
