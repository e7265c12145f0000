//! Invariants of the scalar conversions and block codecs.
//!
//! * f32 → f16 and f32 → bf16 round to the nearest representable value,
//!   ties to the even one, checked against the neighbours of the result
//!   (an oracle independent of the conversion code).
//! * f16/bf16 → f32 is exact: converting back gives the same bits.
//! * Every block type's `from_bytes`/`to_bytes` is a lossless round trip.

use fak_kernels::blocks::{
    BlockQ4_0, BlockQ4_1, BlockQ4_K, BlockQ5_0, BlockQ5_1, BlockQ5_K, BlockQ6_K, BlockQ8_0,
    BlockQ8_1, BlockQ8_K,
};
use fak_kernels::fp::{bf16_to_f32, f16_to_f32, f32_to_bf16, f32_to_f16};
use proptest::prelude::*;

/// Checks that `bits` (decoded by `dec`) is the nearest of its neighbours
/// to `x`, with ties going to an even mantissa. `max_bits` is the largest
/// finite magnitude.
fn check_nearest(x: f32, bits: u16, dec: fn(u16) -> f32, max_bits: u16) -> Result<(), String> {
    let mag = bits & 0x7FFF;
    let got = f64::from(dec(bits));
    let xd = f64::from(x);
    if mag > max_bits {
        // Rounded to infinity: x must be at least halfway past the largest finite value.
        let top = f64::from(dec(max_bits));
        let next = top + (top - f64::from(dec(max_bits - 1)));
        return if xd.abs() >= (top + next) / 2.0 && got == xd.signum() * f64::INFINITY {
            Ok(())
        } else {
            Err(format!("{x:e} overflowed to {got} ({bits:#06x})"))
        };
    }
    let err = (got - xd).abs();
    let sign = bits & 0x8000;
    let neighbours = [mag.checked_sub(1), (mag < max_bits).then_some(mag + 1)];
    for nb in neighbours.into_iter().flatten() {
        let other = (f64::from(dec(sign | nb)) - xd).abs();
        if other < err || (other == err && mag & 1 == 1) {
            return Err(format!(
                "{x:e} → {got:e} ({bits:#06x}), but {:#06x} is nearer or even",
                sign | nb
            ));
        }
    }
    // Crossing zero: -0/+0 neighbours are equal in value, nothing else to check.
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2048))]

    #[test]
    fn f16_rounds_to_nearest_even(bits in any::<u32>()) {
        let x = f32::from_bits(bits);
        prop_assume!(x.is_finite());
        if let Err(e) = check_nearest(x, f32_to_f16(x), f16_to_f32, 0x7BFF) {
            prop_assert!(false, "{}", e);
        }
    }

    #[test]
    fn f16_in_range_rounds_to_nearest_even(m in -65520.0f32..65520.0, scale in -30i32..1) {
        let x = m * 2f32.powi(scale);
        if let Err(e) = check_nearest(x, f32_to_f16(x), f16_to_f32, 0x7BFF) {
            prop_assert!(false, "{}", e);
        }
    }

    #[test]
    fn bf16_rounds_to_nearest_even(bits in any::<u32>()) {
        let x = f32::from_bits(bits);
        prop_assume!(x.is_finite());
        if let Err(e) = check_nearest(x, f32_to_bf16(x), bf16_to_f32, 0x7F7F) {
            prop_assert!(false, "{}", e);
        }
    }

    #[test]
    fn half_formats_widen_exactly(bits in any::<u16>()) {
        let h = f16_to_f32(bits);
        if h.is_nan() {
            prop_assert_eq!(f32_to_f16(h) & 0x7FFF, 0x7E00);
        } else {
            prop_assert_eq!(f32_to_f16(h), bits);
        }
        let b = bf16_to_f32(bits);
        prop_assert_eq!(b.to_bits(), u32::from(bits) << 16);
        if !b.is_nan() {
            prop_assert_eq!(f32_to_bf16(b), bits);
        }
    }

    #[test]
    fn block_codecs_round_trip(bytes in prop::collection::vec(any::<u8>(), 292)) {
        macro_rules! round_trip {
            ($t:ty) => {{
                let raw: [u8; <$t>::BYTES] = std::array::from_fn(|i| bytes[i]);
                prop_assert_eq!(<$t>::from_bytes(&raw).to_bytes(), raw, "{}", stringify!($t));
            }};
        }
        round_trip!(BlockQ4_0);
        round_trip!(BlockQ4_1);
        round_trip!(BlockQ5_0);
        round_trip!(BlockQ5_1);
        round_trip!(BlockQ8_0);
        round_trip!(BlockQ8_1);
        round_trip!(BlockQ4_K);
        round_trip!(BlockQ5_K);
        round_trip!(BlockQ6_K);
        round_trip!(BlockQ8_K);
    }
}

#[test]
fn f16_known_values() {
    assert_eq!(f32_to_f16(1.0), 0x3C00);
    assert_eq!(f32_to_f16(-2.0), 0xC000);
    assert_eq!(f32_to_f16(65504.0), 0x7BFF);
    assert_eq!(f32_to_f16(2f32.powi(-24)), 0x0001);
    assert_eq!(f32_to_f16(2f32.powi(-25)), 0x0000); // tie → even (zero)
    assert_eq!(f32_to_f16(3.0 * 2f32.powi(-25)), 0x0002); // tie → even
    assert_eq!(f16_to_f32(0x0001), 2f32.powi(-24));
    assert_eq!(f16_to_f32(0xFC00), f32::NEG_INFINITY);
}
