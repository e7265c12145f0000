//! Random weight rows and tolerance helpers shared by the dot-product
//! tests (`dot.rs`: scalar vs f64 reference; `simd.rs`: SIMD vs scalar),
//! and the packed products' row-range check (`packed.rs`, `packed_q4.rs`)
//! and bit check against a scalar twin (`packed_nv.rs`, `packed_q1.rs`).

#![allow(dead_code)]

use fak_gguf::GgmlType;
use fak_kernels::blocks::{
    get_scale_min_k4, BlockQ2_K, BlockQ4_1, BlockQ4_K, BlockQ5_1, BlockQ5_K,
};
use fak_kernels::fp::{f16_to_f32, f32_to_f16};
use fak_kernels::quantize_row_to_vec;
use rand::Rng;

/// The codebook formats (IQ1_*, IQ2_*, IQ3_*) and the ternary ones, which
/// decode to the same integers.
pub const GRID_TYPES: [GgmlType; 9] = [
    GgmlType::IQ1_S,
    GgmlType::IQ1_M,
    GgmlType::IQ2_XXS,
    GgmlType::IQ2_XS,
    GgmlType::IQ2_S,
    GgmlType::IQ3_XXS,
    GgmlType::IQ3_S,
    GgmlType::TQ1_0,
    GgmlType::TQ2_0,
];

/// Every weight type with a dot product: the others, then [`GRID_TYPES`].
pub const WEIGHT_TYPES: [GgmlType; 28] = concat(&OTHER_WEIGHT_TYPES, &GRID_TYPES);

const fn concat<const A: usize, const B: usize, const N: usize>(
    a: &[GgmlType; A],
    b: &[GgmlType; B],
) -> [GgmlType; N] {
    assert!(A + B == N);
    let mut out = [GgmlType::F32; N];
    let mut i = 0;
    while i < N {
        out[i] = if i < A { a[i] } else { b[i - A] };
        i += 1;
    }
    out
}

const OTHER_WEIGHT_TYPES: [GgmlType; 19] = [
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
    GgmlType::Q2_K,
    GgmlType::Q3_K,
    GgmlType::IQ4_NL,
    GgmlType::IQ4_XS,
    GgmlType::MXFP4,
    GgmlType::NVFP4,
    GgmlType::Q1_0,
];

/// Byte offsets of the f16 scale fields in one block of `ty`.
pub fn f16_fields(ty: GgmlType) -> &'static [usize] {
    match ty {
        GgmlType::Q4_0 | GgmlType::Q5_0 | GgmlType::Q8_0 | GgmlType::Q1_0 => &[0],
        GgmlType::IQ4_NL | GgmlType::IQ4_XS => &[0],
        GgmlType::IQ1_S
        | GgmlType::IQ2_XXS
        | GgmlType::IQ2_XS
        | GgmlType::IQ2_S
        | GgmlType::IQ3_XXS
        | GgmlType::IQ3_S => &[0],
        GgmlType::Q2_K => &[80, 82],
        GgmlType::Q3_K => &[108],
        GgmlType::Q4_1 | GgmlType::Q5_1 | GgmlType::Q4_K | GgmlType::Q5_K => &[0, 2],
        GgmlType::Q6_K => &[208],
        GgmlType::TQ1_0 => &[52],
        GgmlType::TQ2_0 => &[64],
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
        if ty == GgmlType::MXFP4 {
            // An E8M0 exponent near 2^0, as the f16 scales above.
            block[0] = rng.gen_range(118..=130);
        }
        if ty == GgmlType::Q8_K {
            block[0..4].copy_from_slice(&sane_scale(rng).to_le_bytes());
        }
        if ty == GgmlType::IQ1_M {
            // IQ1_M's f16 scale is the top nibbles of its four scale words.
            let d = f32_to_f16(sane_scale(rng));
            for k in 0..4 {
                let at = 48 + 2 * k;
                let w = u16::from_le_bytes([block[at], block[at + 1]]) & 0x0FFF;
                let w = w | (((d >> (4 * k)) & 0xF) << 12);
                block[at..at + 2].copy_from_slice(&w.to_le_bytes());
            }
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
        GgmlType::Q2_K => {
            for (blk, o) in w.chunks_exact(84).zip(out.chunks_exact_mut(256)) {
                let b = BlockQ2_K::from_bytes(blk.try_into().expect("q2_k block"));
                for (sub, &sc) in o.chunks_exact_mut(16).zip(&b.scales) {
                    sub.fill(f16_to_f32(b.dmin) * f32::from(sc >> 4));
                }
            }
        }
        _ => {}
    }
    out
}

/// Group-aligned row ranges of a packed product (how the model splits rows
/// across threads) give exactly the columns of the whole product, and one
/// token alone gives its row of the many-token product. `a`: `n_tok`
/// activation rows of equal length, row-major; `p` has `rows` rows;
/// `what` names the case in failures. Shared by `packed.rs` and
/// `packed_q4.rs`.
pub fn check_row_ranges(
    p: &fak_kernels::packed::PackedMatrix,
    a: &[u8],
    n_tok: usize,
    rows: usize,
    what: &str,
) {
    use fak_kernels::packed::packed_gemm;
    let mut whole = vec![0.0f32; n_tok * rows];
    packed_gemm(p, 0..rows, (a, n_tok), &mut whole, rows).unwrap();
    for (lo, hi) in [(0usize, 8usize), (8, 24), (16, 48), (40, 48), (24, 24)] {
        let mut part = vec![f32::NAN; n_tok * (hi - lo)];
        packed_gemm(p, lo..hi, (a, n_tok), &mut part, hi - lo).unwrap();
        for t in 0..n_tok {
            for j in lo..hi {
                assert_eq!(
                    part[t * (hi - lo) + j - lo].to_bits(),
                    whole[t * rows + j].to_bits(),
                    "{what} rows {lo}..{hi}, token {t}, row {j}"
                );
            }
        }
    }
    // One token alone gives its row of the many-token product.
    let ab = a.len() / n_tok;
    for t in 0..n_tok {
        let mut one = vec![0.0f32; rows];
        packed_gemm(p, 0..rows, (&a[t * ab..(t + 1) * ab], 1), &mut one, rows).unwrap();
        let same = one
            .iter()
            .zip(&whole[t * rows..(t + 1) * rows])
            .all(|(x, y)| x.to_bits() == y.to_bits());
        assert!(same, "{what} token {t}");
    }
}

/// A scalar twin's dot product of one weight row and one activation row
/// of `n` values (`fak_kernels::scalar::vec_dot_*`).
pub type ScalarDot = fn(usize, &[u8], &[u8]) -> Result<f32, fak_kernels::KernelError>;

/// `p`'s product on every ISA this CPU runs gives each (token, row)
/// element the bits of `dot` on that row and token, and writes nothing
/// past the rows. `w`: `p`'s GGUF rows, `w_row` bytes each; `a`: `n_tok`
/// activation rows, `a_row` bytes each; `what` names the case in failures.
/// Shared by `packed_nv.rs` and `packed_q1.rs`.
pub fn check_packed_bits(
    p: &fak_kernels::packed::PackedMatrix,
    (w, w_row): (&[u8], usize),
    (a, a_row): (&[u8], usize),
    n_tok: usize,
    dot: ScalarDot,
    what: &str,
) {
    let (rows, n) = (p.rows(), p.n());
    let stride = rows + 3;
    for isa in fak_kernels::Isa::available() {
        let mut out = vec![f32::NAN; n_tok * stride];
        fak_kernels::packed::packed_gemm_with_isa(isa, p, 0..rows, (a, n_tok), &mut out, stride)
            .expect("gemm");
        for t in 0..n_tok {
            for j in 0..rows {
                let want = dot(
                    n,
                    &w[j * w_row..(j + 1) * w_row],
                    &a[t * a_row..(t + 1) * a_row],
                )
                .expect("dot");
                let got = out[t * stride + j];
                assert_eq!(
                    got.to_bits(),
                    want.to_bits(),
                    "{what} {isa}: token {t} row {j}: {got} vs {want}"
                );
            }
            assert!(
                out[t * stride + rows].is_nan(),
                "{what} {isa}: wrote past the rows"
            );
        }
    }
}
