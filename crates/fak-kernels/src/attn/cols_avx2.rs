//! AVX2 + F16C twin of the dims-major score kernel
//! ([`crate::attn::dot_f32_f16_cols_group`]): one lane per key row, 8 rows
//! to a register, every query broadcast; and [`Cols`], the call both SIMD
//! twins take.
//!
//! Dim `d` of 8 consecutive rows is one contiguous 16-byte f16 load in the
//! dims-major layout, converted once and used by every query of the pass,
//! so nothing is transposed:
//!
//! ```text
//!   per pass of Q ≤ 6 queries, per tile of R vectors (8 rows each):
//!     for d in 0..dims:                       (in order, from 0.0)
//!       kv[j]     = f32(k[d * dstride + r0 + 8j ..+8])    j < R
//!       acc[g][j] = fma(q_g[d], kv[j], acc[g][j])        (fused; g in
//!                   order, one broadcast of q_g[d] live at a time)
//!     acc[g][j] ──store──► out[g · out_stride + r0 + 8j ..+8]
//!   last n_rows % 8 rows: each dim copied into a zero-padded vector
//! ```
//!
//! Each lane computes exactly the scalar twin's running sum of one (query,
//! row), so the scores are bit-identical on every ISA. `R + 1 + Q · R`
//! registers stay within the 16 `ymm`s, with at least 8 accumulators in
//! flight for `Q > 1`. Six queries a pass (12 accumulators) share each
//! converted key vector among more multiply-adds than four did: the
//! conversions and broadcasts run on the pipes the fused multiply-adds
//! leave free (docs/PERFORMANCE.md, "six queries per dims-major score pass").

use std::arch::x86_64::*;

use crate::simd::ops_avx2::{load8_f16, pad, store8};

/// Rows per register.
const LANES: usize = 8;

/// One dims-major score call after the dispatcher's clipping.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Cols<'a> {
    /// `[G, n]` queries.
    pub q: &'a [f32],
    /// Query stride (the query head dim).
    pub n: usize,
    /// Dims summed per score (`<= n`).
    pub dims: usize,
    /// Keys, dim `d` of row `r` at `d * dstride + r`.
    pub k: &'a [u16],
    /// Distance between consecutive dims, in values.
    pub dstride: usize,
}

/// Scores of queries `g0..g0 + Q` against rows `r0..r0 + 8 R` over dims
/// `0..c.dims`.
///
/// # Safety
///
/// Queries `g0..g0 + Q` lie inside `c.q`; dims `0..c.dims` of rows
/// `r0..r0 + 8 R` lie inside `c.k`; each query's outputs
/// `g · out_stride + r0 .. + 8 R` lie inside `out`; the CPU must support
/// AVX2 and F16C.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn tile<const Q: usize, const R: usize>(
    c: &Cols<'_>,
    (g0, r0): (usize, usize),
    out: &mut [f32],
    out_stride: usize,
) {
    let mut acc = [[_mm256_setzero_ps(); R]; Q];
    let qp = c.q.as_ptr().wrapping_add(g0 * c.n);
    let kp = c.k.as_ptr().wrapping_add(r0);
    for d in 0..c.dims {
        let kd = kp.wrapping_add(d * c.dstride);
        let mut kv = [_mm256_setzero_ps(); R];
        for (j, v) in kv.iter_mut().enumerate() {
            // SAFETY: dim `d` of rows `r0 + 8j .. + 8` lies inside `c.k`
            // (caller); `loadu` needs no alignment.
            let h = unsafe { _mm_loadu_si128(kd.add(j * LANES).cast()) };
            *v = _mm256_cvtph_ps(h);
        }
        for (g, a) in acc.iter_mut().enumerate() {
            // SAFETY: query `g0 + g` lies inside `c.q` and `d < c.dims <= c.n`.
            let q = _mm256_set1_ps(unsafe { *qp.add(g * c.n + d) });
            for (x, &k) in a.iter_mut().zip(&kv) {
                *x = _mm256_fmadd_ps(q, k, *x);
            }
        }
    }
    let op = out.as_mut_ptr();
    for (g, a) in acc.iter().enumerate() {
        for (j, &x) in a.iter().enumerate() {
            // SAFETY: these 8 outputs lie inside `out` (caller).
            unsafe { _mm256_storeu_ps(op.add((g0 + g) * out_stride + r0 + j * LANES), x) };
        }
    }
}

/// Scores of queries `g0..g0 + Q` against the `m < 8` rows from `r0`: each
/// dim's `m` values copied into a zero-padded vector (the padding lanes'
/// sums are dropped).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn tail<const Q: usize>(
    c: &Cols<'_>,
    (g0, r0, m): (usize, usize, usize),
    out: &mut [f32],
    out_stride: usize,
) {
    let mut acc = [_mm256_setzero_ps(); Q];
    for d in 0..c.dims {
        let at = d * c.dstride + r0;
        let vals = c.k.get(at..at + m).unwrap_or_default();
        let kv = load8_f16(&pad::<u16, LANES>(vals, 0));
        for (g, a) in acc.iter_mut().enumerate() {
            let x = c.q.get((g0 + g) * c.n + d).copied().unwrap_or(0.0);
            *a = _mm256_fmadd_ps(_mm256_set1_ps(x), kv, *a);
        }
    }
    for (g, &a) in acc.iter().enumerate() {
        let mut lanes = [0.0f32; LANES];
        store8(&mut lanes, a);
        let at = (g0 + g) * out_stride + r0;
        if let Some(o) = out.get_mut(at..at + m) {
            o.copy_from_slice(&lanes[..m]);
        }
    }
}

/// Queries `g0..g0 + Q` over every row: tiles of `R` vectors, then of 4
/// and 2 (where `R` is larger), then single vectors, then the last
/// `n_rows % 8` rows.
///
/// # Safety
///
/// As [`dot_f32_f16_cols_group`], for queries `g0..g0 + Q`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn pass<const Q: usize, const R: usize>(
    c: &Cols<'_>,
    g0: usize,
    n_rows: usize,
    out: &mut [f32],
    out_stride: usize,
) {
    let mut r = 0;
    while r + R * LANES <= n_rows {
        // SAFETY: rows `r..r + 8 R <= n_rows`, inside the caller's bounds.
        unsafe { tile::<Q, R>(c, (g0, r), out, out_stride) };
        r += R * LANES;
    }
    // What is left of a short block in fewer, still independent, chains.
    while R > 4 && r + 4 * LANES <= n_rows {
        // SAFETY: rows `r..r + 4 · 8 <= n_rows`, inside the caller's bounds.
        unsafe { tile::<Q, 4>(c, (g0, r), out, out_stride) };
        r += 4 * LANES;
    }
    while R > 2 && r + 2 * LANES <= n_rows {
        // SAFETY: rows `r..r + 2 · 8 <= n_rows`, inside the caller's bounds.
        unsafe { tile::<Q, 2>(c, (g0, r), out, out_stride) };
        r += 2 * LANES;
    }
    while r + LANES <= n_rows {
        // SAFETY: rows `r..r + 8 <= n_rows`, inside the caller's bounds.
        unsafe { tile::<Q, 1>(c, (g0, r), out, out_stride) };
        r += LANES;
    }
    if r < n_rows {
        tail::<Q>(c, (g0, r, n_rows - r), out, out_stride);
    }
}

/// AVX2 twin of `attn::scalar::dot_f32_f16_cols_group`, bit-identical to
/// it: passes of 6 queries (then 4, 3, 2 or 1) over tiles of 16 to 64 rows.
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
/// AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn dot_f32_f16_cols_group(
    c: &Cols<'_>,
    n_rows: usize,
    out: &mut [f32],
    out_stride: usize,
) {
    let g_all = c.q.len() / c.n;
    let mut g0 = 0;
    while g0 < g_all {
        // Queries in this pass: 6 while 6 or more are left, else 4, else
        // the last 1-3.
        let q = match g_all - g0 {
            left @ 0..=3 => left,
            4 | 5 => 4,
            _ => 6,
        };
        // SAFETY: in every arm, the caller's bounds, for queries g0.. .
        unsafe {
            match q {
                1 => pass::<1, 8>(c, g0, n_rows, out, out_stride),
                2 => pass::<2, 4>(c, g0, n_rows, out, out_stride),
                3 => pass::<3, 3>(c, g0, n_rows, out, out_stride),
                4 => pass::<4, 2>(c, g0, n_rows, out, out_stride),
                _ => pass::<6, 2>(c, g0, n_rows, out, out_stride),
            }
        }
        g0 += q;
    }
}
