//! quantize → dequantize stays within each format's error bound.
//!
//! Rows are random (uniform, sum-of-uniforms and rows with outliers, at
//! scales 2^-6 … 2^10, so that every
//! stored f16 scale and min is in range). Bounds, per element `x`, with `e16(v)` the f16
//! rounding error of `v` (`max(|v|·2^-11, 2^-25)`, the second term for
//! subnormal results):
//!
//! | format | block statistic | bound on `|x - x'|` |
//! |---|---|---|
//! | F16  | – | `e16(x)`; `|x| ≥ 65520` becomes ±infinity |
//! | BF16 | – | `|x|·2^-8 + 2^-134` |
//! | Q8_0, Q8_1 | `d = amax/127` | `d/2 + 127·e16(d)` |
//! | Q4_0 | `d = amax/8` | `d + 8·e16(d)` (the top level is clamped: a full step) |
//! | Q5_0 | `d = amax/16` | `d + 16·e16(d)` |
//! | Q4_1 | `d = (max-min)/15` | `d/2 + 15·e16(d) + e16(min)` |
//! | Q5_1 | `d = (max-min)/31` | `d/2 + 31·e16(d) + e16(min)` |
//! | Q8_K | `d = amax/127` (f32) | `d/2` |
//! | Q6_K, Q5_K, Q4_K | super-block `amax` | `0.05`, `0.12`, `0.2` `× amax` |
//!
//! each plus `1e-6·amax` of float slack. The k-quant bounds are empirical
//! (worst seen over 9000 rows: 0.023, 0.062, 0.106) with about 2× margin;
//! a wrong bit layout produces errors of order `amax`.

use fak_gguf::GgmlType;
use fak_kernels::{dequantize_row, quantize_row_to_vec};
use proptest::prelude::*;

fn e16(v: f64) -> f64 {
    (v.abs() * 2f64.powi(-11)).max(2f64.powi(-25))
}

/// The per-element error bound of one block (see the module docs).
fn block_bound(ty: GgmlType, x: &[f32]) -> f64 {
    let amax = x.iter().map(|v| f64::from(v.abs())).fold(0.0, f64::max);
    let min = x
        .iter()
        .map(|&v| f64::from(v))
        .fold(f64::INFINITY, f64::min);
    let max = x
        .iter()
        .map(|&v| f64::from(v))
        .fold(f64::NEG_INFINITY, f64::max);
    let slack = 1e-6 * amax;
    let bound = match ty {
        GgmlType::Q8_0 | GgmlType::Q8_1 => {
            let d = amax / 127.0;
            d / 2.0 + 127.0 * e16(d)
        }
        GgmlType::Q4_0 => {
            let d = amax / 8.0;
            d + 8.0 * e16(d)
        }
        GgmlType::Q5_0 => {
            let d = amax / 16.0;
            d + 16.0 * e16(d)
        }
        GgmlType::Q4_1 => {
            let d = (max - min) / 15.0;
            d / 2.0 + 15.0 * e16(d) + e16(min)
        }
        GgmlType::Q5_1 => {
            let d = (max - min) / 31.0;
            d / 2.0 + 31.0 * e16(d) + e16(min)
        }
        GgmlType::Q8_K => amax / 127.0 / 2.0,
        GgmlType::Q6_K => 0.05 * amax,
        GgmlType::Q5_K => 0.12 * amax,
        GgmlType::Q4_K => 0.2 * amax,
        other => panic!("no block bound for {other}"),
    };
    bound + slack
}

/// Quantizes and dequantizes `x`, returning the first element that breaks
/// its bound.
fn check_round_trip(ty: GgmlType, x: &[f32]) -> Result<(), String> {
    let q = quantize_row_to_vec(ty, x).map_err(|e| e.to_string())?;
    let mut y = vec![0.0f32; x.len()];
    dequantize_row(ty, &q, &mut y).map_err(|e| e.to_string())?;
    let bs = ty.block_size();
    for (b, (xb, yb)) in x.chunks(bs).zip(y.chunks(bs)).enumerate() {
        let bound = match ty {
            GgmlType::F16 | GgmlType::BF16 => 0.0,
            _ => block_bound(ty, xb),
        };
        for (i, (&xv, &yv)) in xb.iter().zip(yb).enumerate() {
            if ty == GgmlType::F16 && xv.abs() >= 65520.0 {
                // Beyond f16's range (and its rounding margin): infinity.
                if yv != xv.signum() * f32::INFINITY {
                    return Err(format!("f16 element {i}: {xv} → {yv}, expected infinity"));
                }
                continue;
            }
            let err = (f64::from(xv) - f64::from(yv)).abs();
            let bound = match ty {
                GgmlType::F16 => e16(f64::from(xv)),
                GgmlType::BF16 => f64::from(xv).abs() * 2f64.powi(-8) + 2f64.powi(-134),
                _ => bound,
            };
            if err.is_nan() || err > bound {
                return Err(format!(
                    "{ty} block {b} element {i}: x {xv} → {yv}, error {err:e} > bound {bound:e}"
                ));
            }
        }
    }
    Ok(())
}

/// A 512-element row: shape 0 uniform, 1 sum of four uniforms, 2 uniform
/// with every 37th value 20× larger; all times `2^exp` (|x| < 2^15).
fn row() -> impl Strategy<Value = Vec<f32>> {
    (
        0u8..3,
        -6i32..=10,
        prop::collection::vec(-1.0f32..1.0, 512 * 4),
    )
        .prop_map(|(shape, exp, u)| {
            let scale = 2f32.powi(exp);
            (0..512)
                .map(|i| match shape {
                    0 => u[i] * scale,
                    1 => u[4 * i..4 * i + 4].iter().sum::<f32>() * scale,
                    _ if i % 37 == 0 => u[i] * scale * 20.0,
                    _ => u[i] * scale,
                })
                .collect()
        })
}

const TYPES: [GgmlType; 12] = [
    GgmlType::F16,
    GgmlType::BF16,
    GgmlType::Q4_0,
    GgmlType::Q4_1,
    GgmlType::Q5_0,
    GgmlType::Q5_1,
    GgmlType::Q8_0,
    GgmlType::Q8_1,
    GgmlType::Q8_K,
    GgmlType::Q6_K,
    GgmlType::Q5_K,
    GgmlType::Q4_K,
];

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn quantize_dequantize_within_bound(x in row()) {
        for ty in TYPES {
            if let Err(e) = check_round_trip(ty, &x) {
                prop_assert!(false, "{}", e);
            }
        }
    }

    #[test]
    fn f32_rows_round_trip_exactly(x in prop::collection::vec(any::<f32>(), 0..64)) {
        let q = quantize_row_to_vec(GgmlType::F32, &x).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let mut y = vec![0.0f32; x.len()];
        dequantize_row(GgmlType::F32, &q, &mut y).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let xb: Vec<u32> = x.iter().map(|v| v.to_bits()).collect();
        let yb: Vec<u32> = y.iter().map(|v| v.to_bits()).collect();
        prop_assert_eq!(xb, yb);
    }
}

#[test]
fn all_zero_rows_stay_zero() {
    let x = vec![0.0f32; 256];
    for ty in TYPES {
        let q = quantize_row_to_vec(ty, &x).expect("quantize zeros");
        let mut y = vec![1.0f32; 256];
        dequantize_row(ty, &q, &mut y).expect("dequantize zeros");
        assert!(
            y.iter().all(|&v| v == 0.0),
            "{ty}: zeros came back as {:?}",
            &y[..4]
        );
    }
}

#[test]
fn exact_grid_values_survive_q8_0() {
    // amax 127 gives d = 1 exactly, so every integer in range is exact.
    let mut x: Vec<f32> = (0..32).map(|i| i as f32 - 16.0).collect();
    x[0] = 127.0;
    let q = quantize_row_to_vec(GgmlType::Q8_0, &x).expect("quantize");
    let mut y = vec![0.0f32; 32];
    dequantize_row(GgmlType::Q8_0, &q, &mut y).expect("dequantize");
    assert_eq!(x, y);
}

#[test]
fn zeroed_q8_0_blocks_are_zero_blocks() {
    use fak_kernels::blocks::BlockQ8_0;
    let zero = BlockQ8_0 { d: 0, qs: [0; 32] };
    for n in [0, 1, 7, 4096] {
        let v = BlockQ8_0::zeroed_vec(n).expect("allocates");
        assert_eq!(v.len(), n);
        assert_eq!(v.capacity(), n);
        assert!(v.iter().all(|b| *b == zero));
    }
    // Too many blocks for `isize` is refused, not a panic.
    assert!(BlockQ8_0::zeroed_vec(usize::MAX / 2).is_none());
}
