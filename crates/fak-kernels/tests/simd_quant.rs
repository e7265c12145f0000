//! The SIMD activation quantizers (Q8_0, Q8_1, Q8_K, and the F16 and BF16
//! encodings) produce exactly the same bytes as the scalar references, on
//! every ISA this CPU can run, including for ties, zeros, signed zeros,
//! subnormals, infinities, NaNs and huge values.

use fak_gguf::GgmlType;
use fak_kernels::{quantize_row_with_isa, Isa, KernelError};
use proptest::prelude::*;
use rand::{Rng, SeedableRng};

const TYPES: [GgmlType; 3] = [GgmlType::Q8_0, GgmlType::Q8_1, GgmlType::Q8_K];

/// Quantizes `x` as `ty` on every available ISA and checks that all the
/// outputs equal the scalar one.
fn check_same_bytes(ty: GgmlType, x: &[f32]) -> Result<(), String> {
    let bytes = x.len() / ty.block_size() * ty.type_size();
    let mut want = vec![0u8; bytes];
    quantize_row_with_isa(Isa::Scalar, ty, x, &mut want).map_err(|e| e.to_string())?;
    for isa in Isa::available() {
        let mut got = vec![0xA5u8; bytes];
        quantize_row_with_isa(isa, ty, x, &mut got).map_err(|e| e.to_string())?;
        if let Some(i) = got.iter().zip(&want).position(|(g, w)| g != w) {
            return Err(format!(
                "{ty} {isa}: byte {i} is {:#04x}, scalar {:#04x} (n = {})",
                got[i],
                want[i],
                x.len()
            ));
        }
    }
    Ok(())
}

/// A random row of `n` values with a per-block magnitude, sprinkled with
/// special values when `specials` is set.
fn random_row(n: usize, rng: &mut impl Rng, specials: bool) -> Vec<f32> {
    const SPECIAL: [f32; 9] = [
        0.0,
        -0.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        1e-40,
        -3.0e38,
        0.5,
        -2.5,
    ];
    let mut x = Vec::with_capacity(n);
    for chunk in 0..n.div_ceil(32) {
        let scale = 2f32.powi(rng.gen_range(-20..20));
        for _ in 0..32.min(n - chunk * 32) {
            let v = if specials && rng.gen_ratio(1, 40) {
                SPECIAL[rng.gen_range(0..SPECIAL.len())]
            } else {
                rng.gen_range(-1.0f32..1.0) * scale
            };
            x.push(v);
        }
    }
    x
}

#[test]
fn random_rows_give_the_same_bytes() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(42);
    for ty in TYPES {
        for n in [256, 512, 896 * 2 / 7 * 7, 4864] {
            let n = n / ty.block_size() * ty.block_size();
            for specials in [false, true] {
                for _ in 0..20 {
                    let x = random_row(n, &mut rng, specials);
                    check_same_bytes(ty, &x).unwrap_or_else(|e| panic!("{e}"));
                }
            }
        }
    }
}

#[test]
fn ties_and_edge_blocks_give_the_same_bytes() {
    // With amax = 127 the inverse scale is 1, so k + 0.5 lands on a tie of
    // roundf (Q8_0/Q8_1) and of nearest_int (Q8_K, after the scale).
    let ties: Vec<f32> = (0..256)
        .map(|i| {
            if i == 0 {
                127.0
            } else {
                (i % 127) as f32 - 63.5
            }
        })
        .collect();
    let zeros = vec![0.0f32; 256];
    let neg_zeros = vec![-0.0f32; 256];
    let mut one_inf = vec![1.0f32; 256];
    one_inf[77] = f32::INFINITY;
    let mut one_nan = vec![1.0f32; 256];
    one_nan[3] = f32::NAN;
    let mut tied_max: Vec<f32> = (0..256).map(|i| (i as f32) / 300.0).collect();
    tied_max[10] = -5.0;
    tied_max[20] = 5.0;
    let subnormal = vec![1e-42f32; 256];
    let huge: Vec<f32> = (0..256)
        .map(|i| if i % 2 == 0 { 3e38 } else { -1e38 })
        .collect();
    for x in [
        ties, zeros, neg_zeros, one_inf, one_nan, tied_max, subnormal, huge,
    ] {
        for ty in TYPES {
            check_same_bytes(ty, &x).unwrap_or_else(|e| panic!("{e}"));
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn arbitrary_bit_patterns_give_the_same_bytes(
        bits in proptest::collection::vec(any::<u32>(), 256..=256),
    ) {
        let x: Vec<f32> = bits.into_iter().map(f32::from_bits).collect();
        for ty in TYPES.into_iter().chain([GgmlType::F16, GgmlType::BF16]) {
            if let Err(e) = check_same_bytes(ty, &x) {
                prop_assert!(false, "{}", e);
            }
        }
    }

    #[test]
    fn finite_rows_give_the_same_bytes(
        x in proptest::collection::vec(-1e6f32..1e6, 512..=512),
    ) {
        for ty in TYPES {
            if let Err(e) = check_same_bytes(ty, &x) {
                prop_assert!(false, "{}", e);
            }
        }
    }
}

/// The 16-bit float encodings of `x` on every ISA equal the scalar ones.
fn check_half_rows(x: &[f32]) {
    for ty in [GgmlType::F16, GgmlType::BF16] {
        if let Err(e) = check_same_bytes(ty, x) {
            panic!("{e}");
        }
    }
}

/// A sweep of bit patterns across every sign, exponent and NaN payload
/// (a stride through all 2^32), every rounding tie and its neighbours of
/// both 16-bit formats, and every row length's tail up to 8 values.
#[test]
fn half_rows_give_the_same_bytes() {
    let sweep: Vec<f32> = (0..1u64 << 32)
        .step_by(4099)
        .map(|b| f32::from_bits(b as u32))
        .collect();
    check_half_rows(&sweep);
    let mut ties = Vec::new();
    for top in (0u32..1 << 16).step_by(7) {
        for low in [
            0x0FFF, 0x1000, 0x1001, 0x3000, 0x7FFF, 0x8000, 0x8001, 0x17FFF,
        ] {
            // F16's dropped 13 bits and BF16's 16 around their halves.
            ties.push(f32::from_bits((top << 16) | (low & 0xFFFF)));
            ties.push(f32::from_bits((top << 16) ^ low));
        }
    }
    check_half_rows(&ties);
    for n in 0..=19 {
        check_half_rows(&sweep[1000..1000 + n]);
    }
}

#[test]
fn unavailable_isa_is_refused() {
    let x = vec![1.0f32; 32];
    let mut out = vec![0u8; 34];
    for isa in Isa::ALL {
        let r = quantize_row_with_isa(isa, GgmlType::Q8_0, &x, &mut out);
        if isa.is_available() {
            assert_eq!(r, Ok(()));
        } else {
            assert_eq!(r, Err(KernelError::IsaUnavailable { isa }));
        }
    }
}
