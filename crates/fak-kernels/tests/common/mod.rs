//! Random weight rows and tolerance helpers shared by the dot-product
//! tests (`dot.rs`: scalar vs f64 reference; `simd.rs`: SIMD vs scalar).

#![allow(dead_code)]

use fak_gguf::GgmlType;
use fak_kernels::blocks::{get_scale_min_k4, BlockQ4_1, BlockQ4_K, BlockQ5_1, BlockQ5_K};
use fak_kernels::fp::{f16_to_f32, f32_to_f16};
use fak_kernels::quantize_row_to_vec;
use rand::Rng;

pub const WEIGHT_TYPES: [GgmlType; 12] = [
    GgmlType::F32,
    GgmlType::F16,
    GgmlType::BF16,
    GgmlType::Q4_0,
    GgmlType::Q4_1,
    GgmlType::Q5_0,
    GgmlType::Q5_1,
    GgmlType::Q8_0,
    GgmlType::Q4_K,
    GgmlType::Q5_K,
    GgmlType::Q6_K,
    GgmlType::Q8_K,
];

/// Byte offsets of the f16 scale fields in one block of `ty`.
pub fn f16_fields(ty: GgmlType) -> &'static [usize] {
    match ty {
        GgmlType::Q4_0 | GgmlType::Q5_0 | GgmlType::Q8_0 => &[0],
        GgmlType::Q4_1 | GgmlType::Q5_1 | GgmlType::Q4_K | GgmlType::Q5_K => &[0, 2],
        GgmlType::Q6_K => &[208],
        _ => &[],
    }
}

pub fn sane_scale(rng: &mut impl Rng) -> f32 {
    let mag = 2f32.powf(rng.gen_range(-8.0..2.0));
    if rng.gen() {
        mag
    } else {
        -mag
    }
}

/// A random valid weight row of `n` elements of `ty`.
pub fn random_weights(ty: GgmlType, n: usize, rng: &mut impl Rng) -> Vec<u8> {
    if !ty.is_quantized() {
        let x: Vec<f32> = (0..n).map(|_| rng.gen_range(-1.0f32..1.0)).collect();
        return quantize_row_to_vec(ty, &x).expect("float weights");
    }
    let (bs, ts) = (ty.block_size(), ty.type_size());
    let mut row = vec![0u8; n / bs * ts];
    rng.fill(row.as_mut_slice());
    for block in row.chunks_exact_mut(ts) {
        for &off in f16_fields(ty) {
            block[off..off + 2].copy_from_slice(&f32_to_f16(sane_scale(rng)).to_le_bytes());
        }
        if ty == GgmlType::Q8_K {
            block[0..4].copy_from_slice(&sane_scale(rng).to_le_bytes());
        }
    }
    row
}

/// Per-element min parts of a weight row (zero for types without mins).
pub fn min_parts(ty: GgmlType, w: &[u8], n: usize) -> Vec<f32> {
    let mut out = vec![0.0f32; n];
    match ty {
        GgmlType::Q4_1 | GgmlType::Q5_1 => {
            for (blk, o) in w.chunks_exact(ty.type_size()).zip(out.chunks_exact_mut(32)) {
                let m = if ty == GgmlType::Q4_1 {
                    BlockQ4_1::from_bytes(blk.try_into().expect("q4_1 block")).m
                } else {
                    BlockQ5_1::from_bytes(blk.try_into().expect("q5_1 block")).m
                };
                o.fill(f16_to_f32(m));
            }
        }
        GgmlType::Q4_K | GgmlType::Q5_K => {
            for (blk, o) in w
                .chunks_exact(ty.type_size())
                .zip(out.chunks_exact_mut(256))
            {
                let (dmin, scales) = if ty == GgmlType::Q4_K {
                    let b = BlockQ4_K::from_bytes(blk.try_into().expect("q4_k block"));
                    (b.dmin, b.scales)
                } else {
                    let b = BlockQ5_K::from_bytes(blk.try_into().expect("q5_k block"));
                    (b.dmin, b.scales)
                };
                let (_, m) = get_scale_min_k4(&scales);
                for (sub, &mv) in o.chunks_exact_mut(32).zip(&m) {
                    sub.fill(f16_to_f32(dmin) * f32::from(mv));
                }
            }
        }
        _ => {}
    }
    out
}
