//! Scalar number conversions that every kernel shares, each bit-exact with
//! the corresponding ggml helper.
//!
//! * f32 → f16: round-to-nearest-even (via the `half` crate); a NaN input
//!   becomes the quiet NaN `0x7E00` with the input's sign, as in ggml's
//!   software `GGML_FP32_TO_FP16`, whatever its payload.
//! * f16 → f32: exact, branch-free so that rows vectorize (checked against
//!   `half` on all 65536 inputs).
//! * bf16 ⇄ f32: round-to-nearest-even; NaNs keep their top bits and are
//!   forced quiet (`| 0x0040`), as in `ggml_compute_fp32_to_bf16`.
//! * `nearest_int` (crate-internal): ggml's magic-number rounding used by
//!   the k-quant quantizers.

/// Converts IEEE binary16 bits to `f32`: exact for every finite value and
/// infinity; NaNs keep their payload and become quiet (as with F16C and the
/// `half` crate, against which all 65536 inputs are tested).
///
/// Branch-free, so that row conversions vectorize:
///
/// ```text
///   f16  s eeeee mmmmmmmmmm
///   f32  s 000eeeee mmmmmmmmmm0000000000000   (bits shifted left by 13)
///        = value · 2^-112 for normal and subnormal f16 alike
///        → multiply by 2^112 (exact; needs subnormals not flushed, Rust's default)
///   eeeee = 11111 (inf/NaN): exponent forced to all ones instead
/// ```
#[inline]
pub fn f16_to_f32(bits: u16) -> f32 {
    let h = u32::from(bits);
    let sign = (h & 0x8000) << 16;
    let magnitude = h & 0x7FFF;
    let shifted = magnitude << 13;
    let finite = (f32::from_bits(shifted) * f32::from_bits(0x7780_0000)).to_bits(); // · 2^112
    let quiet = if magnitude > 0x7C00 { 0x0040_0000 } else { 0 };
    let special = 0x7F80_0000 | shifted | quiet;
    f32::from_bits(sign | if magnitude >= 0x7C00 { special } else { finite })
}

/// Converts an `f32` to IEEE binary16 bits, rounding to nearest even.
///
/// Overflow gives ±infinity; NaN gives `sign | 0x7E00`.
#[inline]
pub fn f32_to_f16(x: f32) -> u16 {
    if x.is_nan() {
        let sign = ((x.to_bits() >> 16) & 0x8000) as u16;
        sign | 0x7E00
    } else {
        half::f16::from_f32(x).to_bits()
    }
}

/// Half the value of an E8M0 exponent byte, `2^(e − 128)`, exactly (ggml's
/// `GGML_E8M0_TO_FP32_HALF`): the two smallest are `f32` subnormals, and
/// 255 (E8M0's NaN) reads as `2^127`, as in ggml.
#[inline]
pub fn e8m0_to_f32_half(e: u8) -> f32 {
    let bits = if e < 2 {
        0x0020_0000u32 << e
    } else {
        (u32::from(e) - 1) << 23
    };
    f32::from_bits(bits)
}

/// Half the value of a UE4M3 scale byte (unsigned, 4 exponent bits with
/// bias 7, 3 mantissa bits), exactly as ggml's `ggml_ue4m3_to_fp32` (which
/// halves to match the doubled E2M1 levels): 0 and 0x7F read as 0, bit 7 is
/// ignored.
///
/// ```text
///   e = (x >> 3) & 15, m = x & 7:   e = 0: m · 2^-10    else (8 + m) · 2^(e − 11)
/// ```
#[inline]
pub fn ue4m3_to_f32_half(x: u8) -> f32 {
    if x == 0x7F {
        return 0.0;
    }
    let (e, m) = (i32::from((x >> 3) & 0x0F), f32::from(x & 7));
    // 2^k for k in -11..=4: a normal f32.
    let pow2 = |k: i32| f32::from_bits(((127 + k) as u32) << 23);
    if e == 0 {
        m * pow2(-10)
    } else {
        (8.0 + m) * pow2(e - 11)
    }
}

/// The UE4M3 byte of a positive scale, as ggml's `ggml_fp32_to_ue4m3`:
/// 0 for `x ≤ 0` or NaN, `x` capped at 448, subnormals rounded half up, the
/// mantissa rounded half up by its fourth bit, 0x7E past the top exponent.
pub fn f32_to_ue4m3(x: f32) -> u8 {
    // `!(x > 0)`, as ggml writes it, is also true for NaN.
    if x.partial_cmp(&0.0) != Some(std::cmp::Ordering::Greater) {
        return 0;
    }
    let x = if x > 448.0 { 448.0 } else { x };
    let bits = x.to_bits();
    let exp = ((bits >> 23) & 0xFF) as i32 - 127 + 7;
    if exp <= 0 {
        let man = ((x * 512.0 + 0.5) as i32).min(7);
        return if man < 1 { 0 } else { man as u8 };
    }
    if exp >= 15 {
        return 0x7E;
    }
    let mut man = ((bits >> 20) & 7) as i32 + ((bits >> 19) & 1) as i32;
    let mut exp = exp;
    if man > 7 {
        man = 0;
        exp += 1;
        if exp >= 15 {
            return 0x7E;
        }
    }
    ((exp << 3) | man) as u8
}

/// Converts bfloat16 bits to `f32` (exact: bf16 is the top half of an f32).
#[inline]
pub fn bf16_to_f32(bits: u16) -> f32 {
    f32::from_bits(u32::from(bits) << 16)
}

/// Converts an `f32` to bfloat16 bits, rounding to nearest even; subnormals
/// are kept and NaNs are made quiet.
#[inline]
pub fn f32_to_bf16(x: f32) -> u16 {
    half::bf16::from_f32(x).to_bits()
}

/// Rounds to the nearest integer, ties to even, the way ggml's k-quant
/// helper does it: add `1.5 * 2^23` and read the low mantissa bits.
///
/// ```text
///   x + 12582912.0  ──►  f32 whose ulp is 1, so the addition rounds x
///   bits & 0x7FFFFF ──►  2^22 + round(x)        (valid for |x| < 2^22)
///   - 0x400000      ──►  round(x)
/// ```
///
/// Outside `|x| < 2^22` (and for NaN) the result is meaningless but
/// deterministic and identical to ggml's, which is what bit-exact
/// quantization needs; it never panics.
#[inline]
pub(crate) fn nearest_int(x: f32) -> i32 {
    let v = x + 12_582_912.0;
    (v.to_bits() & 0x007F_FFFF) as i32 - 0x0040_0000
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_int_ties_to_even() {
        assert_eq!(nearest_int(0.5), 0);
        assert_eq!(nearest_int(1.5), 2);
        assert_eq!(nearest_int(2.5), 2);
        assert_eq!(nearest_int(-0.5), 0);
        assert_eq!(nearest_int(-1.5), -2);
        assert_eq!(nearest_int(-2.6), -3);
        assert_eq!(nearest_int(127.4), 127);
        assert_eq!(nearest_int(-4_194_303.0), -4_194_303);
    }

    #[test]
    fn f16_to_f32_matches_half_on_every_input() {
        for bits in 0..=u16::MAX {
            let want = half::f16::from_bits(bits).to_f32_const().to_bits();
            assert_eq!(f16_to_f32(bits).to_bits(), want, "f16 bits {bits:#06x}");
            let hw = half::f16::from_bits(bits).to_f32().to_bits();
            assert_eq!(want, hw, "half's two paths differ at {bits:#06x}");
        }
    }

    #[test]
    fn f16_nan_is_canonical() {
        assert_eq!(f32_to_f16(f32::NAN), 0x7E00);
        assert_eq!(f32_to_f16(-f32::NAN), 0xFE00);
        assert_eq!(f32_to_f16(f32::from_bits(0x7F80_0001)), 0x7E00);
        assert_eq!(f32_to_f16(f32::INFINITY), 0x7C00);
        assert_eq!(f32_to_f16(65_520.0), 0x7C00);
        assert_eq!(f32_to_f16(65_519.99), 0x7BFF);
    }

    #[test]
    fn bf16_rounds_to_even_and_quiets_nan() {
        // 1 + 2^-8 is halfway between two bf16 values: ties to the even one (1.0).
        assert_eq!(f32_to_bf16(1.0 + 1.0 / 256.0), 0x3F80);
        // 1 + 3 * 2^-8 is halfway, the even neighbour is above.
        assert_eq!(f32_to_bf16(1.0 + 3.0 / 256.0), 0x3F82);
        assert_eq!(f32_to_bf16(f32::from_bits(0x7F80_0001)), 0x7FC0);
        assert_eq!(bf16_to_f32(0x3F80), 1.0);
    }
}
