//! AVX-512 twin of the dims-major score kernel
//! ([`crate::attn::dot_f32_f16_cols_group`]): one lane per key row, 16 rows
//! to a register, every query broadcast.
//!
//! Dim `d` of 16 consecutive rows is one contiguous 32-byte f16 load in the
//! dims-major layout, converted once (`vcvtph2ps`) and used by every query
//! of the pass, so nothing is transposed:
//!
//! ```text
//!   per pass of Q ≤ 4 queries, per tile of R vectors (16 rows each):
//!     for d in 0..dims:                       (in order, from 0.0)
//!       kv[j]     = f32(k[d * dstride + r0 + 16j ..+16])   j < R
//!       acc[g][j] = fma(q_g[d], kv[j], acc[g][j])         (fused)
//!     acc[g][j] ──store──► out[g · out_stride + r0 + 16j ..+16]
//!   last tile of fewer than 16 rows: masked loads and stores
//! ```
//!
//! Each lane computes exactly the scalar twin's running sum of one (query,
//! row), so the scores are bit-identical on every ISA; the `Q × R`
//! independent accumulators hide the add latency.

use std::arch::x86_64::*;

use super::cols_avx2::Cols;

/// Rows per register.
const LANES: usize = 16;

/// Scores of queries `g0..g0 + Q` against the `16 R` rows from `r0`, over
/// dims `0..c.dims`; rows of the last vector past `r0 + 16 (R - 1) + m` are
/// neither read nor written (`m = 16` outside the tail).
///
/// # Safety
///
/// Queries `g0..g0 + Q` lie inside `c.q`; dims `0..c.dims` of rows
/// `r0..r0 + 16 (R - 1) + m` lie inside `c.k`; each query's outputs
/// `g · out_stride + r0 ..` for those rows lie inside `out`; the CPU must
/// support AVX-512 F, BW and VL and F16C.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl")]
unsafe fn tile<const Q: usize, const R: usize>(
    c: &Cols<'_>,
    (g0, r0, m): (usize, usize, usize),
    out: &mut [f32],
    out_stride: usize,
) {
    let mask: __mmask16 = if m >= LANES { !0 } else { (1 << m) - 1 };
    let mut acc = [[_mm512_setzero_ps(); R]; Q];
    let qp = c.q.as_ptr().wrapping_add(g0 * c.n);
    let kp = c.k.as_ptr().wrapping_add(r0);
    for d in 0..c.dims {
        let kd = kp.wrapping_add(d * c.dstride);
        let mut kv = [_mm512_setzero_ps(); R];
        for (j, v) in kv.iter_mut().enumerate() {
            let at = kd.wrapping_add(j * LANES);
            // SAFETY: dim `d` of these rows lies inside `c.k` (caller); the
            // mask drops the lanes past the last row of the tail, and
            // masked-off lanes are never read.
            let h = unsafe {
                if j + 1 == R && m < LANES {
                    _mm256_maskz_loadu_epi16(mask, at.cast())
                } else {
                    _mm256_loadu_si256(at.cast())
                }
            };
            *v = _mm512_cvtph_ps(h);
        }
        for (g, a) in acc.iter_mut().enumerate() {
            // SAFETY: query `g0 + g` lies inside `c.q` and `d < c.dims <= c.n`.
            let qv = _mm512_set1_ps(unsafe { *qp.add(g * c.n + d) });
            for (x, &v) in a.iter_mut().zip(&kv) {
                *x = _mm512_fmadd_ps(qv, v, *x);
            }
        }
    }
    let op = out.as_mut_ptr();
    for (g, a) in acc.iter().enumerate() {
        for (j, &x) in a.iter().enumerate() {
            let at = op.wrapping_add((g0 + g) * out_stride + r0 + j * LANES);
            // SAFETY: these outputs lie inside `out` (caller); the mask
            // drops the lanes past the last row of the tail.
            unsafe {
                if j + 1 == R && m < LANES {
                    _mm512_mask_storeu_ps(at, mask, x);
                } else {
                    _mm512_storeu_ps(at, x);
                }
            }
        }
    }
}

/// Queries `g0..g0 + Q` over every row: tiles of `R` vectors, then of 4
/// and 2 (where `R` is larger), then single vectors, then one masked
/// vector for the last `n_rows % 16` rows.
///
/// # Safety
///
/// As [`dot_f32_f16_cols_group`], for queries `g0..g0 + Q`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl")]
unsafe fn pass<const Q: usize, const R: usize>(
    c: &Cols<'_>,
    g0: usize,
    n_rows: usize,
    out: &mut [f32],
    out_stride: usize,
) {
    let mut r = 0;
    while r + R * LANES <= n_rows {
        // SAFETY: rows `r..r + 16 R <= n_rows`, inside the caller's bounds.
        unsafe { tile::<Q, R>(c, (g0, r, LANES), out, out_stride) };
        r += R * LANES;
    }
    // What is left of a short block in fewer, still independent, chains.
    while R > 4 && r + 4 * LANES <= n_rows {
        // SAFETY: rows `r..r + 4 · 16 <= n_rows`, inside the caller's bounds.
        unsafe { tile::<Q, 4>(c, (g0, r, LANES), out, out_stride) };
        r += 4 * LANES;
    }
    while R > 2 && r + 2 * LANES <= n_rows {
        // SAFETY: rows `r..r + 2 · 16 <= n_rows`, inside the caller's bounds.
        unsafe { tile::<Q, 2>(c, (g0, r, LANES), out, out_stride) };
        r += 2 * LANES;
    }
    while r + LANES <= n_rows {
        // SAFETY: rows `r..r + 16 <= n_rows`, inside the caller's bounds.
        unsafe { tile::<Q, 1>(c, (g0, r, LANES), out, out_stride) };
        r += LANES;
    }
    if r < n_rows {
        // SAFETY: rows `r..n_rows` (masked), inside the caller's bounds.
        unsafe { tile::<Q, 1>(c, (g0, r, n_rows - r), out, out_stride) };
    }
}

/// AVX-512 twin of `attn::scalar::dot_f32_f16_cols_group`, bit-identical
/// to it: passes of 4 queries (then 3, 2 or 1) over tiles of 64 rows (128
/// for a single query).
///
/// * `c`: `[G, n]` queries and `[dims, dstride]` keys; `out`: `[G,
///   out_stride]`.
///
/// # Safety
///
/// `c.n > 0` and `c.dims <= c.n`; `n_rows == 0` or `c.dims == 0` or
/// `(c.dims - 1) * c.dstride + n_rows <= c.k.len()`; for `G = c.q.len() /
/// c.n > 1`, `n_rows <= out_stride` and `(G - 1) * out_stride + n_rows <=
/// out.len()` (for `G == 1`, `n_rows <= out.len()`); the CPU must support
/// AVX-512 F, BW and VL, AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl")]
pub(crate) unsafe fn dot_f32_f16_cols_group(
    c: &Cols<'_>,
    n_rows: usize,
    out: &mut [f32],
    out_stride: usize,
) {
    let g_all = c.q.len() / c.n;
    let mut g0 = 0;
    while g0 < g_all {
        let left = g_all - g0;
        // SAFETY: in every arm, the caller's bounds, for queries g0.. .
        unsafe {
            match left {
                1 => pass::<1, 8>(c, g0, n_rows, out, out_stride),
                2 => pass::<2, 4>(c, g0, n_rows, out, out_stride),
                3 => pass::<3, 4>(c, g0, n_rows, out, out_stride),
                _ => pass::<4, 4>(c, g0, n_rows, out, out_stride),
            }
        }
        g0 += left.min(4);
    }
}
