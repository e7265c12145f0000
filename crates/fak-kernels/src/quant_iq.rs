//! Quantizers for the non-linear 4-bit formats (IQ4_NL, IQ4_XS, MXFP4),
//! bit-identical to what ggml's `quantize_iq4_nl` / `quantize_iq4_xs` write
//! without an importance matrix (llama.cpp's quantizer runs these, not the
//! `_ref` functions, which search less), and to `quantize_row_mxfp4_ref`.
//!
//! Per 32 values (weights `w = x²`, levels `L` = [`IQ4_LEVELS`]):
//!
//! ```text
//!   max    = the value of largest magnitude
//!   d      = -max / L[0];  each x to its nearest level at x / d;  d = Σwqx / Σwq²
//!   search the inverse scales (t + L[0]) / max, t in -7..=7: keep the fit with
//!          the largest (Σwqx)² / Σwq²
//!   IQ4_NL: d is the block's f16 scale; each x to its nearest level at x / d
//!   IQ4_XS: D = -(the block scale of largest magnitude) / 32, stored f16;
//!           each block's scale as l = clamp(nearest_int(d / D), -32, 31),
//!           6 bits (l + 32); each x to its nearest level at x / (D·l)
//! ```
//!
//! "Nearest level" is ggml's `best_index_int8`: a binary search, ties to the
//! upper level. All sums run in `f32`, sequentially, in ggml's order.
//!
//! MXFP4 (levels `M` = [`MXFP4_LEVELS`], doubled E2M1 values):
//!
//! ```text
//!   amax = the largest |x|;  e = floor(log2(amax)) − 2 + 127 (0 for amax = 0)
//!   d    = 2^(e − 128);      each x to the first level with the least |M[i]·d − x|
//! ```
//!
//! NVFP4, per 16 values: `d = ue4m3(amax / 6)` (halved on reading, as the
//! levels are doubled), each x to its level as MXFP4's.

use crate::blocks::{BlockIQ4_NL, BlockIQ4_XS, BlockMXFP4, BlockNVFP4, IQ4_LEVELS, MXFP4_LEVELS};
use crate::fp::{e8m0_to_f32_half, f32_to_f16, f32_to_ue4m3, nearest_int, ue4m3_to_f32_half};

/// ggml's threshold below which a block counts as all zeros.
const GROUP_MAX_EPS: f32 = 1e-15;
/// Candidate inverse scales tried on each side of the first guess.
const NTRY: i32 = 7;

/// The index of the level nearest to `x` (ggml's `best_index_int8` over
/// [`IQ4_LEVELS`] `L`), without its branches.
///
/// ggml returns 0 at or below `L[0]`, 15 at or above `L[15]`, and
/// otherwise binary-searches the `hi` with `L[hi − 1] ≤ x < L[hi]` and takes
/// `hi − 1` if `x − L[hi − 1] < L[hi] − x`, else `hi` (ties go up). That
/// `hi` is one more than the number of inner levels `L[1..15]` at or below
/// `x`, and the same rule on it gives 0 below `L[0]` (`x − L[0] ≤ 0 <
/// L[1] − x`) and 15 above `L[15]` (`x − L[14] > 0 ≥ L[15] − x`), so one
/// count and one comparison give ggml's index for every `x` but NaN (every
/// comparison false: the search ends at 15). The quantizers call this 16
/// times per value, and the search's branches went the wrong way about
/// once per call.
fn best_index(x: f32) -> u8 {
    if x.is_nan() {
        return 15;
    }
    let l = |i: usize| f32::from(IQ4_LEVELS[i]);
    let hi = 1 + IQ4_LEVELS[1..15]
        .iter()
        .map(|&v| usize::from(f32::from(v) <= x))
        .sum::<usize>();
    (hi - usize::from(x - l(hi - 1) < l(hi) - x)) as u8
}

/// The weighted fit of `x` to the levels at inverse scale `id`:
/// `(Σ w·q·x, Σ w·q²)`.
fn fit(x: &[f32; 32], id: f32) -> (f32, f32) {
    let (mut sumqx, mut sumq2) = (0.0f32, 0.0f32);
    for &v in x {
        let q = f32::from(IQ4_LEVELS[usize::from(best_index(id * v))]);
        let w = v * v;
        sumqx += w * q * v;
        sumq2 += w * q * q;
    }
    (sumqx, sumq2)
}

/// The scale of one 32-value block (0 for an all-zero block).
fn block_scale(x: &[f32; 32]) -> f32 {
    let (mut amax, mut max) = (0.0f32, 0.0f32);
    for &v in x {
        let ax = v.abs();
        if ax > amax {
            amax = ax;
            max = v;
        }
    }
    if amax < GROUP_MAX_EPS {
        return 0.0;
    }
    let l0 = f32::from(IQ4_LEVELS[0]);
    let d = -max / l0;
    let (sumqx, sumq2) = fit(x, 1.0 / d);
    let mut d = if sumq2 > 0.0 { sumqx / sumq2 } else { 0.0 };
    let mut best = d * sumqx;
    for t in -NTRY..=NTRY {
        let id = (t + i32::from(IQ4_LEVELS[0])) as f32 / max;
        let (sumqx, sumq2) = fit(x, id);
        if sumq2 > 0.0 && sumqx * sumqx > best * sumq2 {
            d = sumqx / sumq2;
            best = d * sumqx;
        }
    }
    d
}

/// Packs 32 level indices as index pairs: `j` low, `j + 16` high.
fn pack(idx: &[u8; 32]) -> [u8; 16] {
    std::array::from_fn(|j| idx[j] | (idx[j + 16] << 4))
}

/// IQ4_NL: one f16 scale per 32 values.
pub(crate) fn quant_iq4_nl(x: &[f32; 32]) -> BlockIQ4_NL {
    let d = block_scale(x);
    let id = if d != 0.0 { 1.0 / d } else { 0.0 };
    BlockIQ4_NL {
        d: f32_to_f16(d),
        qs: pack(&x.map(|v| best_index(id * v))),
    }
}

/// MXFP4: one E8M0 exponent per 32 values, as ggml's reference quantizer.
///
/// `log2` is the C library's `log2f` (as ggml's), so the exponent of a
/// maximum just below a power of two follows that library's rounding; the
/// float-to-byte conversion keeps the low byte of the integer, as ggml's
/// x86-64 build does.
pub(crate) fn quant_mxfp4(x: &[f32; 32]) -> BlockMXFP4 {
    let mut amax = 0.0f32;
    for &v in x {
        if amax < v.abs() {
            amax = v.abs();
        }
    }
    let e = if amax > 0.0 {
        (amax.log2().floor() - 2.0 + 127.0) as i32 as u8
    } else {
        0
    };
    let d = e8m0_to_f32_half(e);
    BlockMXFP4 {
        e,
        qs: std::array::from_fn(|j| best_fp4(x[j], d) | (best_fp4(x[j + 16], d) << 4)),
    }
}

/// ggml's `best_index_mxfp4`: the first level `i` with the least
/// `|M[i] · d − v|` (so −0, code 8, is never chosen).
fn best_fp4(v: f32, d: f32) -> u8 {
    let (mut best, mut err) = (0u8, (f32::from(MXFP4_LEVELS[0]) * d - v).abs());
    for (i, &l) in MXFP4_LEVELS.iter().enumerate().skip(1) {
        let e = (f32::from(l) * d - v).abs();
        if e < err {
            (best, err) = (i as u8, e);
        }
    }
    best
}

/// NVFP4: a UE4M3 scale per 16 values, as ggml's reference quantizer.
pub(crate) fn quant_nvfp4(x: &[f32; 64]) -> BlockNVFP4 {
    let mut out = BlockNVFP4 {
        d: [0; 4],
        qs: [0; 32],
    };
    for (s, xb) in x.as_chunks::<16>().0.iter().enumerate() {
        let mut amax = 0.0f32;
        for &v in xb {
            if amax < v.abs() {
                amax = v.abs();
            }
        }
        let ue = f32_to_ue4m3(amax / 6.0);
        out.d[s] = ue;
        let d = ue4m3_to_f32_half(ue);
        for j in 0..8 {
            out.qs[8 * s + j] = best_fp4(xb[j], d) | (best_fp4(xb[8 + j], d) << 4);
        }
    }
    out
}

/// IQ4_XS: 8 blocks of 32 with 6-bit scales under one f16 scale.
pub(crate) fn quant_iq4_xs(x: &[f32; 256]) -> BlockIQ4_XS {
    let blocks = x.as_chunks::<32>().0;
    let mut scales = [0.0f32; 8];
    let (mut amax_scale, mut max_scale) = (0.0f32, 0.0f32);
    for (s, xb) in scales.iter_mut().zip(blocks) {
        *s = block_scale(xb);
        if s.abs() > amax_scale {
            amax_scale = s.abs();
            max_scale = *s;
        }
    }
    let d = -max_scale / 32.0;
    let id = if d != 0.0 { 1.0 / d } else { 0.0 };
    let mut out = BlockIQ4_XS {
        d: f32_to_f16(d),
        scales_h: 0,
        scales_l: [0; 4],
        qs: [0; 128],
    };
    for (ib, (xb, &s)) in blocks.iter().zip(&scales).enumerate() {
        let l = nearest_int(id * s).clamp(-32, 31);
        let dl = d * l as f32;
        let idl = if dl != 0.0 { 1.0 / dl } else { 0.0 };
        let packed = pack(&xb.map(|v| best_index(idl * v)));
        out.qs[16 * ib..16 * ib + 16].copy_from_slice(&packed);
        let l = (l + 32) as u8;
        out.scales_l[ib / 2] |= (l & 0x0F) << (4 * (ib % 2));
        out.scales_h |= u16::from(l >> 4) << (2 * ib);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fp::f16_to_f32;

    #[test]
    fn best_index_finds_the_nearest_level_ties_up() {
        assert_eq!(best_index(-500.0), 0);
        assert_eq!(best_index(500.0), 15);
        assert_eq!(best_index(0.0), 8); // -10 and 1: 1 is nearer
        assert_eq!(best_index(-4.5), 8); // halfway between -10 and 1: the upper
        assert_eq!(best_index(-4.6), 7);
        for (i, &l) in IQ4_LEVELS.iter().enumerate() {
            assert_eq!(usize::from(best_index(f32::from(l))), i);
        }
    }

    /// ggml's `best_index_int8` as it is written: the bounds, a binary
    /// search, the tie rule.
    fn ggml_best_index(x: f32) -> u8 {
        let l = |i: usize| f32::from(IQ4_LEVELS[i]);
        if x <= l(0) {
            return 0;
        }
        if x >= l(15) {
            return 15;
        }
        let (mut lo, mut hi) = (0usize, 15usize);
        while hi - lo > 1 {
            let mid = (lo + hi) / 2;
            if x < l(mid) {
                hi = mid;
            } else {
                lo = mid;
            }
        }
        if x - l(hi - 1) < l(hi) - x {
            (hi - 1) as u8
        } else {
            hi as u8
        }
    }

    /// The counting form gives ggml's index at every level, every
    /// midpoint and the floats around them, across the range and beyond
    /// it, at the infinities and at NaN.
    #[test]
    fn best_index_is_ggmls_search() {
        let mut xs = vec![
            f32::NAN,
            -f32::NAN,
            f32::INFINITY,
            f32::NEG_INFINITY,
            0.0,
            -0.0,
        ];
        xs.extend([f32::MAX, f32::MIN, f32::MIN_POSITIVE, -f32::MIN_POSITIVE]);
        let levels = IQ4_LEVELS.map(f32::from);
        let mid = levels.windows(2).map(|w| (w[0] + w[1]) / 2.0);
        for c in levels.into_iter().chain(mid) {
            let mut up = c;
            let mut down = c;
            for _ in 0..64 {
                xs.extend([up, down]);
                up = up.next_up();
                down = down.next_down();
            }
        }
        let mut x = -200.0f32;
        while x <= 200.0 {
            xs.push(x);
            x += 0.0137;
        }
        for x in xs {
            assert_eq!(
                best_index(x),
                ggml_best_index(x),
                "x = {x:e} ({:#x})",
                x.to_bits()
            );
        }
    }

    #[test]
    fn zero_blocks_give_zero_scales() {
        let b = quant_iq4_nl(&[0.0; 32]);
        assert_eq!(b.d, 0);
        let b = quant_iq4_xs(&[0.0; 256]);
        // -0/32 is stored as f16 -0, as ggml stores it.
        assert_eq!(b.d, 0x8000);
        assert!(b.signed_scales().iter().all(|&s| s == 0));
    }

    #[test]
    fn round_trip_error_is_small() {
        let x: [f32; 256] = std::array::from_fn(|i| ((i as f32) * 0.37).sin() * 2.0);
        let nl: Vec<f32> = x
            .as_chunks::<32>()
            .0
            .iter()
            .flat_map(|xb| {
                let b = quant_iq4_nl(xb);
                let d = f16_to_f32(b.d);
                b.quants().map(|q| d * f32::from(q))
            })
            .collect();
        let xs = quant_iq4_xs(&x);
        let d = f16_to_f32(xs.d);
        let q = xs.quants();
        let sc = xs.signed_scales();
        for (i, &v) in x.iter().enumerate() {
            assert!((nl[i] - v).abs() < 0.25, "iq4_nl {i}: {} vs {v}", nl[i]);
            let y = d * f32::from(sc[i / 32]) * f32::from(q[i]);
            assert!((y - v).abs() < 0.3, "iq4_xs {i}: {y} vs {v}");
        }
    }
}
