//! Scalar reference dot products of k-quant weight rows with Q8_K
//! activation rows, following ggml's generic kernels step for step.
//!
//! ggml's generic k-quant kernels accumulate in 8 integer lanes, lane `l`
//! taking every element `e` with `e % 8 == l`, each product weighted by its
//! sub-block's scale; the float scale is applied per lane and per
//! super-block, and the lanes are added up only at the very end:
//!
//! ```text
//!   per super-block i:   aux[l]  = Σ_{e%8==l} sc[sub(e)] · q_w[e] · q_a[e]     (i32, exact)
//!                        sums[l] += (d_w · d_a) · aux[l]                        (f32, 8 lanes)
//!                        sumf    -= (dmin_w · d_a) · Σ_g bsums_a[g] · m[g/2]    (Q4_K, Q5_K only)
//!   at the end:          sumf    += sums[0] + … + sums[7]   (left to right)
//! ```
//!
//! Q3_K takes Q6_K's lanes; Q2_K and IQ4_XS follow their own generic
//! kernels (one integer sum per super-block, or per 32 elements), given
//! with each function.
//!
//! Reproducing the lanes keeps the float rounding identical to ggml's
//! generic code (as compiled without FMA contraction). The min term uses
//! the activation block's stored `bsums`, as ggml does.

use fak_gguf::GgmlType;

use crate::blocks::{
    get_scale_min_k4, BlockIQ4_XS, BlockQ2_K, BlockQ3_K, BlockQ4_K, BlockQ5_K, BlockQ6_K, BlockQ8_K,
};
use crate::dot_rows::{block_pairs, check_dot};
use crate::error::KernelError;
use crate::fp::f16_to_f32;

/// Integer lanes of one super-block: lane `l` sums `scale(e) * w[e] * a[e]`
/// over elements `e % 8 == l`, `scale(e) = scales[e / G]`.
///
/// * `w`, `a`: `[256]` quants in element order.
/// * `scales`: `[256 / G]` sub-block scales.
#[inline]
fn lane_sums<const G: usize>(w: &[i8; 256], a: &[i8; 256], scales: &[i32]) -> [i32; 8] {
    let mut aux = [0i32; 8];
    let groups = w.chunks_exact(G).zip(a.chunks_exact(G)).zip(scales);
    for ((wg, ag), &s) in groups {
        for (w8, a8) in wg.chunks_exact(8).zip(ag.chunks_exact(8)) {
            for ((acc, &p), &q) in aux.iter_mut().zip(w8).zip(a8) {
                *acc += s * (i32::from(p) * i32::from(q));
            }
        }
    }
    aux
}

/// Min term of Q4_K/Q5_K: `Σ_g bsums[g] * m[g / 2]` over the 16 groups.
#[inline]
fn min_term(bsums: &[i16; 16], mins: &[u8; 8]) -> i32 {
    bsums
        .chunks_exact(2)
        .zip(mins)
        .map(|(pair, &m)| {
            pair.iter()
                .map(|&b| i32::from(b) * i32::from(m))
                .sum::<i32>()
        })
        .sum()
}

/// Shared Q4_K/Q5_K body over the decoded pieces of each super-block.
struct WithMins {
    /// Super-block scale, f16 bits.
    d: u16,
    /// Super-block min scale, f16 bits.
    dmin: u16,
    /// Packed 6-bit scales and mins.
    scales: [u8; 12],
    /// Unsigned quants (< 32) in element order, as `i8`.
    q: [i8; 256],
}

#[inline]
fn dot_with_mins(blocks: impl Iterator<Item = (WithMins, BlockQ8_K)>) -> f32 {
    let mut sums = [0.0f32; 8];
    let mut sumf = 0.0f32;
    for (x, y) in blocks {
        let (sc, m) = get_scale_min_k4(&x.scales);
        let sumi = min_term(&y.bsums, &m);
        let aux = lane_sums::<32>(&x.q, &y.qs, &sc.map(i32::from));
        let d = f16_to_f32(x.d) * y.d;
        for (s, &v) in sums.iter_mut().zip(&aux) {
            *s += d * v as f32;
        }
        let dmin = f16_to_f32(x.dmin) * y.d;
        sumf -= dmin * sumi as f32;
    }
    for s in sums {
        sumf += s;
    }
    sumf
}

/// Q4_K weights · Q8_K activations.
///
/// * `w`: `n` Q4_K elements (`n / 256 * 144` bytes); `a`: `n` Q8_K elements
///   (`n / 256 * 292` bytes).
///
/// # Errors
///
/// As [`crate::vec_dot`].
pub fn vec_dot_q4_k_q8_k(n: usize, w: &[u8], a: &[u8]) -> Result<f32, KernelError> {
    check_dot(GgmlType::Q4_K, n, w, a)?;
    let blocks = block_pairs::<{ BlockQ4_K::BYTES }, { BlockQ8_K::BYTES }>(w, a).map(|(bw, ba)| {
        let x = BlockQ4_K::from_bytes(bw);
        let q = x.quants().map(|v| v as i8);
        (
            WithMins {
                d: x.d,
                dmin: x.dmin,
                scales: x.scales,
                q,
            },
            BlockQ8_K::from_bytes(ba),
        )
    });
    Ok(dot_with_mins(blocks))
}

/// Q5_K weights · Q8_K activations.
///
/// * `w`: `n` Q5_K elements (`n / 256 * 176` bytes); `a`: `n` Q8_K elements.
///
/// # Errors
///
/// As [`crate::vec_dot`].
pub fn vec_dot_q5_k_q8_k(n: usize, w: &[u8], a: &[u8]) -> Result<f32, KernelError> {
    check_dot(GgmlType::Q5_K, n, w, a)?;
    let blocks = block_pairs::<{ BlockQ5_K::BYTES }, { BlockQ8_K::BYTES }>(w, a).map(|(bw, ba)| {
        let x = BlockQ5_K::from_bytes(bw);
        let q = x.quants().map(|v| v as i8);
        (
            WithMins {
                d: x.d,
                dmin: x.dmin,
                scales: x.scales,
                q,
            },
            BlockQ8_K::from_bytes(ba),
        )
    });
    Ok(dot_with_mins(blocks))
}

/// Q6_K weights · Q8_K activations.
///
/// * `w`: `n` Q6_K elements (`n / 256 * 210` bytes); `a`: `n` Q8_K elements.
///
/// # Errors
///
/// As [`crate::vec_dot`].
pub fn vec_dot_q6_k_q8_k(n: usize, w: &[u8], a: &[u8]) -> Result<f32, KernelError> {
    check_dot(GgmlType::Q6_K, n, w, a)?;
    let mut sums = [0.0f32; 8];
    for (bw, ba) in block_pairs::<{ BlockQ6_K::BYTES }, { BlockQ8_K::BYTES }>(w, a) {
        let (x, y) = (BlockQ6_K::from_bytes(bw), BlockQ8_K::from_bytes(ba));
        let aux = lane_sums::<16>(&x.quants(), &y.qs, &x.scales.map(i32::from));
        let d = f16_to_f32(x.d) * y.d;
        for (s, &v) in sums.iter_mut().zip(&aux) {
            *s += d * v as f32;
        }
    }
    let mut sumf = 0.0f32;
    for s in sums {
        sumf += s;
    }
    Ok(sumf)
}

/// Q3_K weights · Q8_K activations: the lanes of Q6_K, with scales
/// `s − 32` per 16 elements and quants in `-4..4`.
///
/// * `w`: `n` Q3_K elements (`n / 256 * 110` bytes); `a`: `n` Q8_K elements.
///
/// # Errors
///
/// As [`crate::vec_dot`].
pub fn vec_dot_q3_k_q8_k(n: usize, w: &[u8], a: &[u8]) -> Result<f32, KernelError> {
    check_dot(GgmlType::Q3_K, n, w, a)?;
    let mut sums = [0.0f32; 8];
    for (bw, ba) in block_pairs::<{ BlockQ3_K::BYTES }, { BlockQ8_K::BYTES }>(w, a) {
        let (x, y) = (BlockQ3_K::from_bytes(bw), BlockQ8_K::from_bytes(ba));
        let aux = lane_sums::<16>(&x.quants(), &y.qs, &x.signed_scales().map(i32::from));
        let d = f16_to_f32(x.d) * y.d;
        for (s, &v) in sums.iter_mut().zip(&aux) {
            *s += d * v as f32;
        }
    }
    let mut sumf = 0.0f32;
    for s in sums {
        sumf += s;
    }
    Ok(sumf)
}

/// Q2_K weights · Q8_K activations, as ggml's generic kernel: one exact
/// integer sum per super-block, then
/// `sumf += (d_a·d_w)·isum − (d_a·dmin_w)·Σ_g bsums[g]·min[g]`.
///
/// * `w`: `n` Q2_K elements (`n / 256 * 84` bytes); `a`: `n` Q8_K elements.
///
/// # Errors
///
/// As [`crate::vec_dot`].
pub fn vec_dot_q2_k_q8_k(n: usize, w: &[u8], a: &[u8]) -> Result<f32, KernelError> {
    check_dot(GgmlType::Q2_K, n, w, a)?;
    let mut sumf = 0.0f32;
    for (bw, ba) in block_pairs::<{ BlockQ2_K::BYTES }, { BlockQ8_K::BYTES }>(w, a) {
        let (x, y) = (BlockQ2_K::from_bytes(bw), BlockQ8_K::from_bytes(ba));
        let summs: i32 = y
            .bsums
            .iter()
            .zip(&x.scales)
            .map(|(&b, &sc)| i32::from(b) * i32::from(sc >> 4))
            .sum();
        let q = x.quants();
        let isum: i32 = q
            .chunks_exact(16)
            .zip(y.qs.chunks_exact(16))
            .zip(&x.scales)
            .map(|((wg, ag), &sc)| {
                let s: i32 = wg
                    .iter()
                    .zip(ag)
                    .map(|(&p, &q)| i32::from(p) * i32::from(q))
                    .sum();
                i32::from(sc & 0x0F) * s
            })
            .sum();
        let dall = y.d * f16_to_f32(x.d);
        let dmin = y.d * f16_to_f32(x.dmin);
        sumf += dall * isum as f32 - dmin * summs as f32;
    }
    Ok(sumf)
}

/// IQ4_XS weights · Q8_K activations, as ggml's generic kernel: per
/// 32-element sub-block `sumf += (d_w·d_a·(ls − 32))·Σ L[q]·a`, in order.
///
/// * `w`: `n` IQ4_XS elements (`n / 256 * 136` bytes); `a`: `n` Q8_K
///   elements.
///
/// # Errors
///
/// As [`crate::vec_dot`].
pub fn vec_dot_iq4_xs_q8_k(n: usize, w: &[u8], a: &[u8]) -> Result<f32, KernelError> {
    check_dot(GgmlType::IQ4_XS, n, w, a)?;
    let mut sumf = 0.0f32;
    for (bw, ba) in block_pairs::<{ BlockIQ4_XS::BYTES }, { BlockQ8_K::BYTES }>(w, a) {
        let (x, y) = (BlockIQ4_XS::from_bytes(bw), BlockQ8_K::from_bytes(ba));
        let d4d8 = f16_to_f32(x.d) * y.d;
        let q = x.quants();
        for ((wg, ag), &ls) in q
            .chunks_exact(32)
            .zip(y.qs.chunks_exact(32))
            .zip(&x.signed_scales())
        {
            let sumi: i32 = wg
                .iter()
                .zip(ag)
                .map(|(&p, &q)| i32::from(p) * i32::from(q))
                .sum();
            sumf += (d4d8 * f32::from(ls)) * sumi as f32;
        }
    }
    Ok(sumf)
}

/// Q8_K weights · Q8_K activations (no ggml counterpart: ggml never stores
/// weights as Q8_K). Per block `sumf += sumi as f32 * (d_w * d_a)`, as for
/// Q8_0.
///
/// * `w`, `a`: `n` Q8_K elements each (`n / 256 * 292` bytes).
///
/// # Errors
///
/// As [`crate::vec_dot`].
pub fn vec_dot_q8_k_q8_k(n: usize, w: &[u8], a: &[u8]) -> Result<f32, KernelError> {
    check_dot(GgmlType::Q8_K, n, w, a)?;
    let mut sumf = 0.0f32;
    for (bw, ba) in block_pairs::<{ BlockQ8_K::BYTES }, { BlockQ8_K::BYTES }>(w, a) {
        let (x, y) = (BlockQ8_K::from_bytes(bw), BlockQ8_K::from_bytes(ba));
        let sumi: i32 =
            x.qs.iter()
                .zip(&y.qs)
                .map(|(&p, &q)| i32::from(p) * i32::from(q))
                .sum();
        sumf += sumi as f32 * (x.d * y.d);
    }
    Ok(sumf)
}
