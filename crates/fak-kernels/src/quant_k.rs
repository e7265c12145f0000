//! Reference quantizers for the 256-element formats (Q2_K, Q3_K, Q4_K, Q5_K,
//! Q6_K, Q8_K), bit-identical to ggml's `quantize_row_q*_K_ref`.
//!
//! ```text
//!   Q8_K  iscale = -127 / max;  q = min(127, nearest_int(iscale * x));  d = 1 / iscale
//!   Q6_K  per 16 values: a scale from make_qx_quants (rmse search, weights x²)
//!         iscale = -128 / (scale of largest magnitude);  d = f16(1 / iscale)
//!         sc = min(127, nearest_int(iscale * scale));  q = clamp(nearest_int(x / (d*sc)), -32, 31)
//!   Q4_K  per 32 values: scale and min from make_qkx2_quants (weights av_x + |x|),
//!   Q5_K  both re-quantized to 6 bits against the largest; q = nearest_int((x + dmin*m) / (d*sc))
//!   Q2_K  per 16 values: scale and min from make_qkx2_quants (weights |x|, absolute errors),
//!         both re-quantized to 4 bits against the largest; q = clamp(nearest_int((x + dm) / d), 0, 3)
//!   Q3_K  per 16 values: a scale from make_q3_quants (rmse refinement, weights x²)
//!         iscale = -32 / (scale of largest magnitude);  d = f16(1 / iscale)
//!         s = clamp(nearest_int(iscale * scale), -32, 31);  q = clamp(nearest_int(x / (d*s)), -4, 3)
//! ```
//!
//! All accumulations run in `f32`, sequentially, in ggml's order; nothing is
//! fused, so the floating-point results match ggml's C exactly.

use crate::blocks::{
    get_scale_min_k4, pack_scale_min_k4, BlockQ2_K, BlockQ3_K, BlockQ4_K, BlockQ5_K, BlockQ6_K,
    BlockQ8_K,
};
use crate::fp::{f16_to_f32, f32_to_f16, nearest_int};
use crate::isa::Isa;
use crate::simd;

/// ggml's threshold below which a group counts as all zeros.
const GROUP_MAX_EPS: f32 = 1e-15;

/// Q8_K: one scale per 256 values, plus the 16-value group sums.
///
/// An all-zero block gets `d = 0`, zero quants and zero sums (ggml leaves
/// the sums untouched there; from a zeroed buffer that is the same bytes).
pub(crate) fn quant_q8_k(isa: Isa, x: &[f32; 256]) -> BlockQ8_K {
    let max = match simd::absmax_256(isa, x) {
        // The value of largest magnitude, first on ties (as the loop below).
        Some(amax) => x.iter().copied().find(|v| v.abs() == amax).unwrap_or(0.0),
        None => {
            let (mut max, mut amax) = (0.0f32, 0.0f32);
            for &v in x {
                let ax = v.abs();
                if ax > amax {
                    amax = ax;
                    max = v;
                }
            }
            max
        }
    };
    if max == 0.0 {
        return BlockQ8_K {
            d: 0.0,
            qs: [0; 256],
            bsums: [0; 16],
        };
    }
    let iscale = -127.0 / max;
    let qs = simd::quant_q8_k_quants(isa, x, iscale)
        .unwrap_or_else(|| x.map(|v| nearest_int(iscale * v).min(127) as i8));
    let mut bsums = [0i16; 16];
    for (s, group) in bsums.iter_mut().zip(qs.chunks_exact(16)) {
        let sum: i32 = group.iter().map(|&q| i32::from(q)).sum();
        *s = sum as i16;
    }
    BlockQ8_K {
        d: 1.0 / iscale,
        qs,
        bsums,
    }
}

/// ggml's `make_qx_quants(16, 32, x, L, rmse_type = 1, NULL)`: finds the
/// scale of 16 values for 6-bit signed quants by trying 19 candidate
/// inverse scales and keeping the best weighted least-squares fit (weights
/// `x²`). Writes `L = q + 32` (in `0..64`) and returns the scale.
fn make_qx_quants_q6(x: &[f32; 16], levels: &mut [u8; 16]) -> f32 {
    const NMAX: i32 = 32;
    let (mut max, mut amax) = (0.0f32, 0.0f32);
    for &v in x {
        let ax = v.abs();
        if ax > amax {
            amax = ax;
            max = v;
        }
    }
    if amax < GROUP_MAX_EPS {
        *levels = [0; 16];
        return 0.0;
    }
    let quant = |iscale: f32, v: f32| nearest_int(iscale * v).clamp(-NMAX, NMAX - 1);
    // Weighted sums of l·x and l² for one candidate inverse scale.
    let sums = |iscale: f32| {
        let (mut sumlx, mut suml2) = (0.0f32, 0.0f32);
        for &v in x {
            let l = quant(iscale, v) as f32;
            let w = v * v;
            sumlx += w * v * l;
            suml2 += w * l * l;
        }
        (sumlx, suml2)
    };
    let iscale = -(NMAX as f32) / max;
    for (lv, &v) in levels.iter_mut().zip(x) {
        *lv = (quant(iscale, v) + NMAX) as u8;
    }
    let (sumlx, suml2) = sums(iscale);
    let mut scale = if suml2 != 0.0 { sumlx / suml2 } else { 0.0 };
    let mut best = scale * sumlx;
    for is in (-9..=9).filter(|&is| is != 0) {
        let iscale = -(NMAX as f32 + 0.1 * is as f32) / max;
        let (sumlx, suml2) = sums(iscale);
        if suml2 > 0.0 && sumlx * sumlx > best * suml2 {
            for (lv, &v) in levels.iter_mut().zip(x) {
                *lv = (quant(iscale, v) + NMAX) as u8;
            }
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    scale
}

/// Q6_K: 16 signed 8-bit sub-block scales under one f16 scale, 6-bit quants.
pub(crate) fn quant_q6_k(x: &[f32; 256]) -> BlockQ6_K {
    let mut levels = [0u8; 256];
    let mut scales = [0.0f32; 16];
    let (mut max_scale, mut max_abs_scale) = (0.0f32, 0.0f32);
    let groups = x
        .as_chunks::<16>()
        .0
        .iter()
        .zip(levels.as_chunks_mut::<16>().0);
    for ((xg, lg), s) in groups.zip(scales.iter_mut()) {
        *s = make_qx_quants_q6(xg, lg);
        if s.abs() > max_abs_scale {
            max_abs_scale = s.abs();
            max_scale = *s;
        }
    }
    if max_abs_scale < GROUP_MAX_EPS {
        return BlockQ6_K {
            ql: [0; 128],
            qh: [0; 64],
            scales: [0; 16],
            d: 0,
        };
    }
    let iscale = -128.0 / max_scale;
    let d = f32_to_f16(1.0 / iscale);
    let sc = scales.map(|s| nearest_int(iscale * s).min(127) as i8);
    let groups = x
        .as_chunks::<16>()
        .0
        .iter()
        .zip(levels.as_chunks_mut::<16>().0);
    for ((xg, lg), &s) in groups.zip(&sc) {
        let dg = f16_to_f32(d) * f32::from(s);
        if dg == 0.0 {
            continue;
        }
        for (lv, &v) in lg.iter_mut().zip(xg) {
            *lv = (nearest_int(v / dg).clamp(-32, 31) + 32) as u8;
        }
    }
    // Byte i of ql (half h = i / 64) packs elements 128h + (i % 64) (low
    // nibble) and 128h + (i % 64) + 64 (high nibble); byte i of qh (half
    // h = i / 32) packs bits 4-5 of elements 128h + i % 32 + {0, 32, 64, 96}.
    let ql = std::array::from_fn(|i| {
        let e = 128 * (i / 64) + i % 64;
        (levels[e] & 0x0F) | ((levels[e + 64] & 0x0F) << 4)
    });
    let qh = std::array::from_fn(|i| {
        let e = 128 * (i / 32) + i % 32;
        (0..4).fold(0u8, |acc, k| acc | ((levels[e + 32 * k] >> 4) << (2 * k)))
    });
    BlockQ6_K {
        ql,
        qh,
        scales: sc,
        d,
    }
}

/// Search parameters of `make_qkx2_quants`.
#[derive(Debug, Clone, Copy)]
struct Qkx2Params {
    /// Largest quant (15 for Q4_K, 31 for Q5_K).
    nmax: i32,
    /// First candidate offset added to `nmax`.
    rmin: f32,
    /// Step between candidates.
    rdelta: f32,
    /// Number of steps (candidates `0..=nstep`).
    nstep: i32,
    /// Errors as absolute values (Q2_K) rather than squares.
    use_mad: bool,
}

/// ggml's `make_qkx2_quants(N, nmax, x, weights, L, &min, Laux, rmin,
/// rdelta, nstep, use_mad)`: fits `x ≈ scale * L - min` with
/// unsigned `L` in `0..=nmax`, searching inverse scales and refining each
/// by weighted least squares. Returns `(scale, min)`; `min` is returned
/// negated as ggml stores it (`the_min = -min`).
fn make_qkx2_quants<const N: usize>(
    x: &[f32; N],
    weights: &[f32; N],
    levels: &mut [u8; N],
    p: Qkx2Params,
) -> (f32, f32) {
    let err = |diff: f32| if p.use_mad { diff.abs() } else { diff * diff };
    let (mut min, mut max) = (x[0], x[0]);
    let mut sum_w = weights[0];
    let mut sum_x = sum_w * x[0];
    for (&v, &w) in x.iter().zip(weights).skip(1) {
        if v < min {
            min = v;
        }
        if v > max {
            max = v;
        }
        sum_w += w;
        sum_x += w * v;
    }
    if min > 0.0 {
        min = 0.0;
    }
    if max == min {
        *levels = [0; N];
        return (0.0, -min);
    }
    let nmax = p.nmax as f32;
    let quant = |iscale: f32, v: f32, min: f32| nearest_int(iscale * (v - min)).clamp(0, p.nmax);
    let mut iscale = nmax / (max - min);
    let mut scale = 1.0 / iscale;
    let mut best_error = 0.0f32;
    for ((lv, &v), &w) in levels.iter_mut().zip(x).zip(weights) {
        *lv = quant(iscale, v, min) as u8;
        let diff = scale * f32::from(*lv) + min - v;
        best_error += w * err(diff);
    }
    if p.nstep < 1 {
        return (scale, -min);
    }
    let mut aux = [0u8; N];
    for is in 0..=p.nstep {
        iscale = (p.rmin + p.rdelta * is as f32 + nmax) / (max - min);
        let (mut sum_l, mut sum_l2, mut sum_xl) = (0.0f32, 0.0f32, 0.0f32);
        for ((a, &v), &w) in aux.iter_mut().zip(x).zip(weights) {
            let l = quant(iscale, v, min);
            *a = l as u8;
            let l = l as f32;
            sum_l += w * l;
            sum_l2 += w * l * l;
            sum_xl += w * l * v;
        }
        let det = sum_w * sum_l2 - sum_l * sum_l;
        if det > 0.0 {
            let mut this_scale = (sum_w * sum_xl - sum_x * sum_l) / det;
            let mut this_min = (sum_l2 * sum_x - sum_l * sum_xl) / det;
            if this_min > 0.0 {
                this_min = 0.0;
                this_scale = sum_xl / sum_l2;
            }
            let mut cur_error = 0.0f32;
            for ((&a, &v), &w) in aux.iter().zip(x).zip(weights) {
                let diff = this_scale * f32::from(a) + this_min - v;
                cur_error += w * err(diff);
            }
            if cur_error < best_error {
                *levels = aux;
                best_error = cur_error;
                scale = this_scale;
                min = this_min;
            }
        }
    }
    (scale, -min)
}

/// Shared Q4_K/Q5_K body: returns `(d, dmin, packed scales, levels)` with
/// levels in `0..=p.nmax`, in element order.
fn quant_k_with_mins(x: &[f32; 256], p: Qkx2Params) -> (u16, u16, [u8; 12], [u8; 256]) {
    let mut levels = [0u8; 256];
    let mut scales = [0.0f32; 8];
    let mut mins = [0.0f32; 8];
    let (mut max_scale, mut max_min) = (0.0f32, 0.0f32);
    let subs = x
        .as_chunks::<32>()
        .0
        .iter()
        .zip(levels.as_chunks_mut::<32>().0);
    for ((xs, ls), (s, m)) in subs.zip(scales.iter_mut().zip(mins.iter_mut())) {
        let mut sum_x2 = 0.0f32;
        for &v in xs {
            sum_x2 += v * v;
        }
        let av_x = (sum_x2 / 32.0).sqrt();
        let weights = xs.map(|v| av_x + v.abs());
        (*s, *m) = make_qkx2_quants(xs, &weights, ls, p);
        if *s > max_scale {
            max_scale = *s;
        }
        if *m > max_min {
            max_min = *m;
        }
    }
    let inv_scale = if max_scale > 0.0 {
        63.0 / max_scale
    } else {
        0.0
    };
    let inv_min = if max_min > 0.0 { 63.0 / max_min } else { 0.0 };
    let ls = scales.map(|s| (nearest_int(inv_scale * s) as u8).min(63));
    let lm = mins.map(|m| (nearest_int(inv_min * m) as u8).min(63));
    let packed = pack_scale_min_k4(&ls, &lm);
    let d = f32_to_f16(max_scale / 63.0);
    let dmin = f32_to_f16(max_min / 63.0);
    let (sc, m) = get_scale_min_k4(&packed);
    let subs = x
        .as_chunks::<32>()
        .0
        .iter()
        .zip(levels.as_chunks_mut::<32>().0);
    for ((xs, lv), (&sc, &m)) in subs.zip(sc.iter().zip(&m)) {
        let ds = f16_to_f32(d) * f32::from(sc);
        if ds == 0.0 {
            continue;
        }
        let dm = f16_to_f32(dmin) * f32::from(m);
        for (l, &v) in lv.iter_mut().zip(xs) {
            *l = nearest_int((v + dm) / ds).clamp(0, p.nmax) as u8;
        }
    }
    (d, dmin, packed, levels)
}

/// Q4_K: 8 sub-blocks with 6-bit scales and mins, 4-bit quants.
pub(crate) fn quant_q4_k(x: &[f32; 256]) -> BlockQ4_K {
    let p = Qkx2Params {
        nmax: 15,
        rmin: -1.0,
        rdelta: 0.1,
        nstep: 20,
        use_mad: false,
    };
    let (d, dmin, scales, levels) = quant_k_with_mins(x, p);
    let qs = std::array::from_fn(|i| {
        let (c, l) = (i / 32, i % 32);
        levels[64 * c + l] | (levels[64 * c + 32 + l] << 4)
    });
    BlockQ4_K {
        d,
        dmin,
        scales,
        qs,
    }
}

/// Q5_K: as Q4_K with a fifth bit per quant in `qh`.
pub(crate) fn quant_q5_k(x: &[f32; 256]) -> BlockQ5_K {
    let p = Qkx2Params {
        nmax: 31,
        rmin: -0.5,
        rdelta: 0.1,
        nstep: 15,
        use_mad: false,
    };
    let (d, dmin, scales, levels) = quant_k_with_mins(x, p);
    let qs = std::array::from_fn(|i| {
        let (c, l) = (i / 32, i % 32);
        (levels[64 * c + l] & 0x0F) | ((levels[64 * c + 32 + l] & 0x0F) << 4)
    });
    let qh = std::array::from_fn(|l| {
        let mut h = 0u8;
        for c in 0..4 {
            h |= ((levels[64 * c + l] >> 4) & 1) << (2 * c);
            h |= ((levels[64 * c + 32 + l] >> 4) & 1) << (2 * c + 1);
        }
        h
    });
    BlockQ5_K {
        d,
        dmin,
        scales,
        qh,
        qs,
    }
}

/// ggml's `make_q3_quants(16, 4, x, L, do_rmse = true)`: signed 3-bit
/// quants (`-4..4`) of 16 values with weights `x²`, refined for up to 5
/// rounds one quant at a time while the weighted fit improves. Writes
/// `L = q + 4` (in `0..8`) and returns the scale.
fn make_q3_quants(x: &[f32; 16], levels: &mut [i8; 16]) -> f32 {
    const NMAX: i32 = 4;
    let (mut max, mut amax) = (0.0f32, 0.0f32);
    for &v in x {
        let ax = v.abs();
        if ax > amax {
            amax = ax;
            max = v;
        }
    }
    if amax < GROUP_MAX_EPS {
        *levels = [0; 16];
        return 0.0;
    }
    let iscale = -(NMAX as f32) / max;
    let (mut sumlx, mut suml2) = (0.0f32, 0.0f32);
    for (lv, &v) in levels.iter_mut().zip(x) {
        let l = nearest_int(iscale * v).clamp(-NMAX, NMAX - 1);
        *lv = l as i8;
        let w = v * v;
        sumlx += w * v * l as f32;
        suml2 += w * l as f32 * l as f32;
    }
    for _ in 0..5 {
        let mut changed = 0;
        for (lv, &v) in levels.iter_mut().zip(x) {
            let w = v * v;
            let cur = f32::from(*lv);
            let mut slx = sumlx - w * v * cur;
            if slx > 0.0 {
                let mut sl2 = suml2 - w * cur * cur;
                let new_l = nearest_int(v * sl2 / slx).clamp(-NMAX, NMAX - 1);
                if new_l != i32::from(*lv) {
                    let nl = new_l as f32;
                    slx += w * v * nl;
                    sl2 += w * nl * nl;
                    if sl2 > 0.0 && slx * slx * suml2 > sumlx * sumlx * sl2 {
                        *lv = new_l as i8;
                        sumlx = slx;
                        suml2 = sl2;
                        changed += 1;
                    }
                }
            }
        }
        if changed == 0 {
            break;
        }
    }
    for lv in levels.iter_mut() {
        *lv += NMAX as i8;
    }
    if suml2 > 0.0 {
        sumlx / suml2
    } else {
        0.0
    }
}

/// Q3_K: 16 sub-blocks of 16 with 6-bit scales under one f16 scale, 3-bit
/// quants (ggml's `quantize_row_q3_K_ref`).
pub(crate) fn quant_q3_k(x: &[f32; 256]) -> BlockQ3_K {
    let mut levels = [0i8; 256];
    let mut scales = [0.0f32; 16];
    let (mut amax, mut max_scale) = (0.0f32, 0.0f32);
    let subs = x
        .as_chunks::<16>()
        .0
        .iter()
        .zip(levels.as_chunks_mut::<16>().0);
    for ((xs, ls), s) in subs.zip(scales.iter_mut()) {
        *s = make_q3_quants(xs, ls);
        if s.abs() > amax {
            amax = s.abs();
            max_scale = *s;
        }
    }
    let mut out = BlockQ3_K {
        hmask: [0; 32],
        qs: [0; 64],
        scales: [0; 12],
        d: 0,
    };
    if max_scale != 0.0 {
        let iscale = -32.0 / max_scale;
        for (j, &s) in scales.iter().enumerate() {
            let l = (nearest_int(iscale * s).clamp(-32, 31) + 32) as u8;
            if j < 8 {
                out.scales[j] = l & 0x0F;
            } else {
                out.scales[j - 8] |= (l & 0x0F) << 4;
            }
            out.scales[8 + j % 4] |= (l >> 4) << (2 * (j / 4));
        }
        out.d = f32_to_f16(1.0 / iscale);
    }
    let d = f16_to_f32(out.d);
    let subs = x
        .as_chunks::<16>()
        .0
        .iter()
        .zip(levels.as_chunks_mut::<16>().0);
    for ((xs, ls), &sc) in subs.zip(&out.signed_scales()) {
        let ds = d * f32::from(sc);
        if ds == 0.0 {
            continue;
        }
        for (l, &v) in ls.iter_mut().zip(xs) {
            *l = (nearest_int(v / ds).clamp(-4, 3) + 4) as i8;
        }
    }
    for (j, l) in levels.iter_mut().enumerate() {
        if *l > 3 {
            out.hmask[j % 32] |= 1 << (j / 32);
            *l -= 4;
        }
    }
    for (i, q) in out.qs.iter_mut().enumerate() {
        let (n, l) = (i / 32, i % 32);
        let at = |k: usize| levels[128 * n + 32 * k + l] as u8;
        *q = at(0) | (at(1) << 2) | (at(2) << 4) | (at(3) << 6);
    }
    out
}

/// Q2_K: 16 sub-blocks of 16 with 4-bit scales and mins under two f16
/// scales, 2-bit quants (ggml's `quantize_row_q2_K_ref`).
pub(crate) fn quant_q2_k(x: &[f32; 256]) -> BlockQ2_K {
    const Q4SCALE: f32 = 15.0;
    let p = Qkx2Params {
        nmax: 3,
        rmin: -0.5,
        rdelta: 0.1,
        nstep: 15,
        use_mad: true,
    };
    let mut levels = [0u8; 256];
    let mut scales = [0.0f32; 16];
    let mut mins = [0.0f32; 16];
    let (mut max_scale, mut max_min) = (0.0f32, 0.0f32);
    let subs = x
        .as_chunks::<16>()
        .0
        .iter()
        .zip(levels.as_chunks_mut::<16>().0);
    for ((xs, ls), (s, m)) in subs.zip(scales.iter_mut().zip(mins.iter_mut())) {
        let weights = xs.map(f32::abs);
        (*s, *m) = make_qkx2_quants(xs, &weights, ls, p);
        if *s > max_scale {
            max_scale = *s;
        }
        if *m > max_min {
            max_min = *m;
        }
    }
    let mut out = BlockQ2_K {
        scales: [0; 16],
        qs: [0; 64],
        d: 0,
        dmin: 0,
    };
    if max_scale > 0.0 {
        let iscale = Q4SCALE / max_scale;
        for (o, &s) in out.scales.iter_mut().zip(&scales) {
            *o = nearest_int(iscale * s) as u8;
        }
        out.d = f32_to_f16(max_scale / Q4SCALE);
    }
    if max_min > 0.0 {
        let iscale = Q4SCALE / max_min;
        for (o, &m) in out.scales.iter_mut().zip(&mins) {
            *o |= (nearest_int(iscale * m) as u8) << 4;
        }
        out.dmin = f32_to_f16(max_min / Q4SCALE);
    }
    let (d, dmin) = (f16_to_f32(out.d), f16_to_f32(out.dmin));
    let subs = x
        .as_chunks::<16>()
        .0
        .iter()
        .zip(levels.as_chunks_mut::<16>().0);
    for ((xs, ls), &sc) in subs.zip(&out.scales) {
        let ds = d * f32::from(sc & 0x0F);
        if ds == 0.0 {
            continue;
        }
        let dm = dmin * f32::from(sc >> 4);
        for (l, &v) in ls.iter_mut().zip(xs) {
            *l = nearest_int((v + dm) / ds).clamp(0, 3) as u8;
        }
    }
    for (i, q) in out.qs.iter_mut().enumerate() {
        let (n, l) = (i / 32, i % 32);
        let at = |k: usize| levels[128 * n + 32 * k + l];
        *q = at(0) | (at(1) << 2) | (at(2) << 4) | (at(3) << 6);
    }
    out
}
