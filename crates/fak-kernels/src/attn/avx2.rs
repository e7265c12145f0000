//! AVX2 + FMA + F16C twins of the f16 attention kernels in
//! [`crate::attn`]: scores of one or many queries against 8-row key tiles
//! (transposed in registers, one lane per row), value sums of one or many
//! queries, and the one-row `dot_f32_f16` and `axpy_f16`. All but
//! `dot_f32_f16` (4 × 8 fused lanes) are bit-identical to their scalar
//! twins: the vector code changes which row or query a lane works on,
//! never the order of a single score's or output element's operations.

use std::arch::x86_64::*;

use super::lanes_avx2::{rows_group_lanes, LANE_DIMS};
use super::types::KvRows;
use crate::simd::ops_avx2::{load8, load8_f16, pad, store8, unpad};

/// Smallest query group that [`rows_group_lanes`] (one lane per query)
/// takes.
const LANES_FROM: usize = 5;

/// Transposes an 8 × 8 matrix of 16-bit values: `rows[r]` lane `c` becomes
/// `out[c]` lane `r`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn transpose8x8_epi16(r: [__m128i; 8]) -> [__m128i; 8] {
    let t0 = _mm_unpacklo_epi16(r[0], r[1]);
    let t1 = _mm_unpackhi_epi16(r[0], r[1]);
    let t2 = _mm_unpacklo_epi16(r[2], r[3]);
    let t3 = _mm_unpackhi_epi16(r[2], r[3]);
    let t4 = _mm_unpacklo_epi16(r[4], r[5]);
    let t5 = _mm_unpackhi_epi16(r[4], r[5]);
    let t6 = _mm_unpacklo_epi16(r[6], r[7]);
    let t7 = _mm_unpackhi_epi16(r[6], r[7]);
    let u0 = _mm_unpacklo_epi32(t0, t2);
    let u1 = _mm_unpackhi_epi32(t0, t2);
    let u2 = _mm_unpacklo_epi32(t1, t3);
    let u3 = _mm_unpackhi_epi32(t1, t3);
    let u4 = _mm_unpacklo_epi32(t4, t6);
    let u5 = _mm_unpackhi_epi32(t4, t6);
    let u6 = _mm_unpacklo_epi32(t5, t7);
    let u7 = _mm_unpackhi_epi32(t5, t7);
    [
        _mm_unpacklo_epi64(u0, u4),
        _mm_unpackhi_epi64(u0, u4),
        _mm_unpacklo_epi64(u1, u5),
        _mm_unpackhi_epi64(u1, u5),
        _mm_unpacklo_epi64(u2, u6),
        _mm_unpackhi_epi64(u2, u6),
        _mm_unpacklo_epi64(u3, u7),
        _mm_unpackhi_epi64(u3, u7),
    ]
}

/// Loads dims `i..i + 8` of rows `r..r + 8` (row `j` starts at
/// `k[(r + j) * stride]`) and returns them transposed: vector `c` holds dim
/// `i + c` of the 8 rows, widened to `f32`.
///
/// # Safety
///
/// `(r + 7) * stride + i + 8 <= k.len()`; the CPU must support AVX2 and F16C.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn load_cols(k: &[u16], stride: usize, r: usize, i: usize) -> [__m256; 8] {
    let base = k.as_ptr();
    // Plain loops: `array::from_fn` / `map` closures were left un-inlined
    // in this `target_feature` code (they showed in `perf` on their own).
    let mut rows = [_mm_setzero_si128(); 8];
    for (j, row) in rows.iter_mut().enumerate() {
        // SAFETY: the caller guarantees every row's 8 values lie inside `k`.
        *row = unsafe { _mm_loadu_si128(base.add((r + j) * stride + i).cast()) };
    }
    let cols = transpose8x8_epi16(rows);
    let mut out = [_mm256_setzero_ps(); 8];
    for (o, c) in out.iter_mut().zip(cols) {
        *o = _mm256_cvtph_ps(c);
    }
    out
}

/// Writes the scores of key rows `r..r + 8` for query `q` into
/// `out[0..8]`: lane `j` of `acc` holds row `r + j`'s running sum over dims
/// `0..n8`; the dims past `n8` are added in scalar order.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn finish8(acc: __m256, q: &[f32], k: &[u16], (stride, r): (usize, usize), out: &mut [f32]) {
    let n = q.len();
    let n8 = n / 8 * 8;
    let mut lanes = [0.0f32; 8];
    store8(&mut lanes, acc);
    for (j, (mut s, o)) in lanes.into_iter().zip(out.iter_mut()).enumerate() {
        let row = &k[(r + j) * stride..(r + j) * stride + n];
        for (x, &y) in q[n8..].iter().zip(&row[n8..]) {
            s = x.mul_add(crate::fp::f16_to_f32(y), s);
        }
        *o = s;
    }
}

/// Scores of the key rows `r0..n_rows` that do not fill an 8-row tile, one
/// scalar dot per (query, row): `out[g * out_stride + row]`.
fn leftover_rows<'q>(
    qs: impl Iterator<Item = &'q [f32]> + Clone,
    k: &[u16],
    (stride, r0, n_rows): (usize, usize, usize),
    out: &mut [f32],
    out_stride: usize,
) {
    for rr in r0..n_rows {
        for (g, qg) in qs.clone().enumerate() {
            let row = &k[rr * stride..rr * stride + qg.len()];
            out[g * out_stride + rr] = super::scalar::dot_f32_f16(qg, row);
        }
    }
}

/// AVX2 twin of `attn::scalar::dot_f32_f16_rows`, bit-identical to it: lane
/// `j` keeps row `r + j`'s running sum `acc = fma(q[i], k[i], acc)` in
/// index order (one fused multiply-add), so the vector code only changes
/// which row a lane works on, never the arithmetic. 16 rows run side by
/// side while they last (two independent chains), then 8, then the scalar
/// twin.
///
/// ```text
///   rows r..r+8, dims i..i+8          transposed: one vector per dim
///   r+0: k00 k01 .. k07               dim i+0: k00 k10 .. k70  ─► acc += q[i+0]·dim
///   ...                     ──►       ...
///   r+7: k70 k71 .. k77               dim i+7: k07 k17 .. k77  ─► acc += q[i+7]·dim
/// ```
///
/// * `q`: `[n]`; `k`: rows of `n` f16 at stride `stride`; `out`: `[n_rows]`.
///
/// # Safety
///
/// `n_rows == 0` or `(n_rows - 1) * stride + q.len() <= k.len()`, and
/// `out.len() >= n_rows`; the CPU must support AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn dot_f32_f16_rows(
    q: &[f32],
    k: &[u16],
    stride: usize,
    n_rows: usize,
    out: &mut [f32],
) {
    let n = q.len();
    let n8 = n / 8 * 8;
    let finish =
        |acc: __m256, r: usize, out: &mut [f32]| finish8(acc, q, k, (stride, r), &mut out[r..]);
    let mut r = 0;
    while r + 16 <= n_rows {
        let (mut a0, mut a1) = (_mm256_setzero_ps(), _mm256_setzero_ps());
        for i in (0..n8).step_by(8) {
            // SAFETY: rows r..r+16 hold dims 0..n (caller's bound), i + 8 <= n.
            let (c0, c1) = unsafe { (load_cols(k, stride, r, i), load_cols(k, stride, r + 8, i)) };
            for c in 0..8 {
                let qv = _mm256_set1_ps(q[i + c]);
                a0 = _mm256_fmadd_ps(qv, c0[c], a0);
                a1 = _mm256_fmadd_ps(qv, c1[c], a1);
            }
        }
        finish(a0, r, out);
        finish(a1, r + 8, out);
        r += 16;
    }
    while r + 8 <= n_rows {
        let mut a0 = _mm256_setzero_ps();
        for i in (0..n8).step_by(8) {
            // SAFETY: rows r..r+8 hold dims 0..n (caller's bound), i + 8 <= n.
            let c0 = unsafe { load_cols(k, stride, r, i) };
            for (c, col) in c0.iter().enumerate() {
                a0 = _mm256_fmadd_ps(_mm256_set1_ps(q[i + c]), *col, a0);
            }
        }
        finish(a0, r, out);
        r += 8;
    }
    leftover_rows(std::iter::once(q), k, (stride, r, n_rows), out, 0);
}

/// AVX2 twin of `attn::scalar::dot_f32_f16_rows_group`, bit-identical to
/// it: the queries run in passes of up to 4 ([`rows_group`]); a single
/// query takes [`dot_f32_f16_rows`].
///
/// * `q`: `[G, n]`; `k`: rows of `n` f16 at `stride`; `out`: `[G,
///   out_stride]`.
///
/// # Safety
///
/// `n > 0`; `n_rows == 0` or `(n_rows - 1) * stride + n <= k.len()`; for
/// `G = q.len() / n > 1`, `n_rows <= out_stride` and
/// `(G - 1) * out_stride + n_rows <= out.len()` (for `G == 1`,
/// `n_rows <= out.len()`); the CPU must support AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn dot_f32_f16_rows_group(
    q: &[f32],
    n: usize,
    k: &[u16],
    stride: usize,
    n_rows: usize,
    out: &mut [f32],
    out_stride: usize,
) {
    let g_all = q.len() / n;
    if g_all == 1 {
        // SAFETY: the caller's bounds for one query.
        return unsafe { dot_f32_f16_rows(&q[..n], k, stride, n_rows, out) };
    }
    if g_all >= LANES_FROM && n <= LANE_DIMS {
        // SAFETY: the caller's bounds, and `n <= LANE_DIMS`.
        return unsafe { rows_group_lanes(q, n, k, stride, n_rows, out, out_stride) };
    }
    if g_all > 4 && n <= TILE_DIMS {
        // SAFETY: the caller's bounds.
        return unsafe { rows_group_tiled(q, n, k, stride, n_rows, out, out_stride) };
    }
    let mut g0 = 0;
    while g0 < g_all {
        let (qg, og) = (&q[g0 * n..], &mut out[g0 * out_stride..]);
        // SAFETY: in every arm, the caller's bounds, for queries g0.. .
        let done = unsafe {
            match g_all - g0 {
                1 => rows_group::<1>(qg, n, k, stride, n_rows, og, out_stride),
                2 => rows_group::<2>(qg, n, k, stride, n_rows, og, out_stride),
                3 => rows_group::<3>(qg, n, k, stride, n_rows, og, out_stride),
                _ => rows_group::<4>(qg, n, k, stride, n_rows, og, out_stride),
            }
        };
        g0 += done;
    }
}

/// Widest head that [`rows_group_tiled`] keeps a transposed key tile of.
const TILE_DIMS: usize = 256;

/// Many queries (more than 4; e.g. a prefill chunk's tokens × the query
/// heads of one KV head): each 8-row key tile is transposed once into a
/// stack buffer, then every query, 8 at a time, runs the lane-per-row sums
/// of [`dot_f32_f16_rows`] over it (the same arithmetic, so the same bits).
///
/// # Safety
///
/// As [`dot_f32_f16_rows_group`], and `n <= TILE_DIMS`.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn rows_group_tiled(
    q: &[f32],
    n: usize,
    k: &[u16],
    stride: usize,
    n_rows: usize,
    out: &mut [f32],
    out_stride: usize,
) {
    let g_all = q.len() / n;
    let n8 = n / 8 * 8;
    let mut tile = [_mm256_setzero_ps(); TILE_DIMS];
    let mut r = 0;
    while r + 8 <= n_rows {
        for i in (0..n8).step_by(8) {
            // SAFETY: rows r..r+8 hold dims 0..n (caller's bound), i + 8 <= n.
            let cols = unsafe { load_cols(k, stride, r, i) };
            tile[i..i + 8].copy_from_slice(&cols);
        }
        let mut g0 = 0;
        while g0 < g_all {
            let left = g_all - g0;
            let (qg, og) = (&q[g0 * n..], &mut out[g0 * out_stride..]);
            let t = &tile[..n8];
            let at = (stride, r);
            // Up to 8 queries per pass: 8 independent add chains hide the
            // add latency (4 measured latency-bound).
            g0 += match left {
                1 => tile_queries::<1>(t, qg, n, k, at, og, out_stride),
                2 => tile_queries::<2>(t, qg, n, k, at, og, out_stride),
                3 => tile_queries::<3>(t, qg, n, k, at, og, out_stride),
                4 => tile_queries::<4>(t, qg, n, k, at, og, out_stride),
                5 => tile_queries::<5>(t, qg, n, k, at, og, out_stride),
                6 => tile_queries::<6>(t, qg, n, k, at, og, out_stride),
                7 => tile_queries::<7>(t, qg, n, k, at, og, out_stride),
                _ => tile_queries::<8>(t, qg, n, k, at, og, out_stride),
            };
        }
        r += 8;
    }
    leftover_rows(q.chunks_exact(n), k, (stride, r, n_rows), out, out_stride);
}

/// The first `G` queries of `q` over one transposed key tile (`tile[d]`:
/// dim `d` of rows `r..r + 8`); dims past the tile run in scalar order per
/// row. Returns `G`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn tile_queries<const G: usize>(
    tile: &[__m256],
    q: &[f32],
    n: usize,
    k: &[u16],
    (stride, r): (usize, usize),
    out: &mut [f32],
    out_stride: usize,
) -> usize {
    let n8 = tile.len().min(n);
    let qp = q[..G * n].as_ptr();
    let mut acc = [_mm256_setzero_ps(); G];
    for (d, col) in tile[..n8].iter().enumerate() {
        for (g, a) in acc.iter_mut().enumerate() {
            // SAFETY: `g < G` and `d < n8 <= n`, so `g * n + d < G * n`,
            // inside `q[..G * n]` (checked above). Unchecked: the indexed
            // form kept a bounds check per query and dim in this loop.
            let x = unsafe { *qp.add(g * n + d) };
            *a = _mm256_fmadd_ps(_mm256_set1_ps(x), *col, *a);
        }
    }
    for (g, a) in acc.into_iter().enumerate() {
        let qg = &q[g * n..(g + 1) * n];
        finish8(a, qg, k, (stride, r), &mut out[g * out_stride + r..]);
    }
    G
}

/// Scores of the first `G` queries of `q` (one pass); returns `G`. Each
/// 8 × 8 key tile is loaded and transposed once, then every query keeps
/// its own lane-per-row running sums (the arithmetic of
/// [`dot_f32_f16_rows`]).
///
/// # Safety
///
/// As [`dot_f32_f16_rows_group`], with `q` holding at least `G` queries
/// and `out` their `G` output rows.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn rows_group<const G: usize>(
    q: &[f32],
    n: usize,
    k: &[u16],
    stride: usize,
    n_rows: usize,
    out: &mut [f32],
    out_stride: usize,
) -> usize {
    let n8 = n / 8 * 8;
    let qs: [&[f32]; G] = std::array::from_fn(|g| &q[g * n..(g + 1) * n]);
    let qp = q[..G * n].as_ptr();
    let mut r = 0;
    while r + 8 <= n_rows {
        let mut acc = [_mm256_setzero_ps(); G];
        for i in (0..n8).step_by(8) {
            // SAFETY: rows r..r+8 hold dims 0..n (caller's bound), i + 8 <= n.
            let cols = unsafe { load_cols(k, stride, r, i) };
            for (g, a) in acc.iter_mut().enumerate() {
                for (c, col) in cols.iter().enumerate() {
                    // SAFETY: g < G and i + c < n8 <= n: inside q[..G * n].
                    let x = unsafe { *qp.add(g * n + i + c) };
                    *a = _mm256_fmadd_ps(_mm256_set1_ps(x), *col, *a);
                }
            }
        }
        for (g, (a, qg)) in acc.into_iter().zip(qs).enumerate() {
            finish8(a, qg, k, (stride, r), &mut out[g * out_stride + r..]);
        }
        r += 8;
    }
    leftover_rows(qs.into_iter(), k, (stride, r, n_rows), out, out_stride);
    G
}

/// AVX2 twin of `attn::scalar::axpy_f16_rows_group`, bit-identical to it:
/// for a head width that is a multiple of 64, each 64-column slice of a
/// tile of up to 8 value rows is converted to `f32` once into a stack
/// buffer, then every query adds its weighted rows in order (`out = out +
/// w · v`, multiply then add) with those 64 outputs in registers; other
/// widths run [`axpy_f16_rows`] per query.
///
/// ```text
///   for each tile of ≤ 8 rows, for each 64-column slice c:
///     tile[r][..] = f32(v[r0 + r][c..c + 64])          once per tile
///     for each query g:  acc = out[g][c..c + 64]
///       for r in order:  acc = acc + w[g][r0 + r] · tile[r]
///     out[g][c..c + 64] = acc
/// ```
///
/// * `w`: `[G, w_stride]`; `out`: `[G, rows.width]`.
///
/// # Safety
///
/// `rows.n_rows == 0` or `(rows.n_rows - 1) * rows.stride + rows.width <=
/// rows.data.len()`; every query's `rows.n_rows` weights lie inside `w` at
/// `g * w_stride` (and `n_rows <= w_stride` when `G > 1`); the CPU must
/// support AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn axpy_f16_rows_group(
    w: &[f32],
    w_stride: usize,
    rows: KvRows<'_>,
    out: &mut [f32],
) {
    let n = rows.width;
    let (v, stride, n_rows) = (rows.data, rows.stride, rows.n_rows);
    if n == 0 || !n.is_multiple_of(64) {
        for (g, o) in out.chunks_exact_mut(n.max(1)).enumerate() {
            // SAFETY: the caller's bounds, for query g.
            unsafe { axpy_f16_rows(&w[g * w_stride..], v, stride, n_rows, o) };
        }
        return;
    }
    let mut tile = [[_mm256_setzero_ps(); 8]; 8];
    let mut r0 = 0;
    while r0 < n_rows {
        let m = (n_rows - r0).min(8);
        for c0 in (0..n).step_by(64) {
            for (r, t) in tile.iter_mut().enumerate().take(m) {
                let at = (r0 + r) * stride + c0;
                let row = &v[at..at + 64];
                let (rc, _) = row.as_chunks::<8>();
                for (x, c) in t.iter_mut().zip(rc) {
                    *x = load8_f16(c);
                }
            }
            for (g, o) in out.chunks_exact_mut(n).enumerate() {
                let Some(o) = o[c0..].first_chunk_mut::<64>() else {
                    continue;
                };
                let (oc, _) = o.as_chunks_mut::<8>();
                let mut acc = [_mm256_setzero_ps(); 8];
                for (a, c) in acc.iter_mut().zip(oc.iter()) {
                    *a = load8(c);
                }
                let wg = &w[g * w_stride + r0..g * w_stride + r0 + m];
                for (t, &wr) in tile.iter().zip(wg) {
                    let wv = _mm256_set1_ps(wr);
                    for (a, x) in acc.iter_mut().zip(t) {
                        *a = _mm256_add_ps(*a, _mm256_mul_ps(wv, *x));
                    }
                }
                for (a, c) in acc.iter().zip(oc.iter_mut()) {
                    store8(c, *a);
                }
            }
        }
        r0 += m;
    }
}

/// AVX2 twin of `attn::scalar::axpy_f16_rows`, bit-identical to it: for each
/// row `r` in order, `out[i] = out[i] + w[r] · f16(v[r * stride + i])`
/// (multiply, then add), with `out` held in registers across the rows
/// when it is 64 wide (the head dim of both supported models); other
/// widths run the single-row twin per row.
///
/// * `w`: `[n_rows]`; `v`: rows of `out.len()` f16 at `stride`; `out`: `[n]`.
///
/// # Safety
///
/// `n_rows == 0` or `(n_rows - 1) * stride + out.len() <= v.len()`, and
/// `w.len() >= n_rows`; the CPU must support AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn axpy_f16_rows(
    w: &[f32],
    v: &[u16],
    stride: usize,
    n_rows: usize,
    out: &mut [f32],
) {
    let n = out.len();
    if n != 64 {
        for (r, &wr) in w.iter().enumerate().take(n_rows) {
            // SAFETY: as this function's (row r lies inside `v`).
            unsafe { axpy_f16(wr, &v[r * stride..r * stride + n], out) };
        }
        return;
    }
    let Some(o) = out.first_chunk_mut::<64>() else {
        return;
    };
    let (oc, _) = o.as_chunks_mut::<8>();
    let mut acc = [_mm256_setzero_ps(); 8];
    for (a, c) in acc.iter_mut().zip(oc.iter()) {
        *a = load8(c);
    }
    for (r, &wr) in w.iter().enumerate().take(n_rows) {
        let wv = _mm256_set1_ps(wr);
        let row = &v[r * stride..r * stride + 64];
        let (rc, _) = row.as_chunks::<8>();
        for (a, x) in acc.iter_mut().zip(rc) {
            *a = _mm256_add_ps(*a, _mm256_mul_ps(wv, load8_f16(x)));
        }
    }
    for (a, c) in acc.iter().zip(oc.iter_mut()) {
        store8(c, *a);
    }
}

/// Horizontal sum `((a0+a4)+(a2+a6)) + ((a1+a5)+(a3+a7))`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn hsum_ps(v: __m256) -> f32 {
    let q = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
    let d = _mm_add_ps(q, _mm_movehl_ps(q, q));
    let s = _mm_add_ss(d, _mm_movehdup_ps(d));
    _mm_cvtss_f32(s)
}

/// AVX2 twin of `attn::scalar::dot_f32_f16`: `Σ q[i] · f16(k[i])` over
/// `min(q.len(), k.len())` elements in 4 × 8 fused `f32` lanes.
///
/// * `q`: `[n]` f32; `k`: `[n]` f16 bit patterns.
///
/// ```text
///   32-element chunks:  acc[j] += q[32c+8j..][..8] · k[..]   j = 0..4
///   remainder (< 32):   whole 8s into acc[0], acc[1], acc[2]; the last
///                       partial 8 (zero-padded) into acc[3]
///   result:             hsum((acc0 + acc1) + (acc2 + acc3))
/// ```
///
/// # Safety
///
/// The CPU must support AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn dot_f32_f16(q: &[f32], k: &[u16]) -> f32 {
    let n = q.len().min(k.len());
    let (q, k) = (&q[..n], &k[..n]);
    let mut acc = [_mm256_setzero_ps(); 4];
    let (qc, qt) = q.as_chunks::<32>();
    let (kc, kt) = k.as_chunks::<32>();
    for (x, y) in qc.iter().zip(kc) {
        let xs = x.as_chunks::<8>().0;
        let ys = y.as_chunks::<8>().0;
        for ((a, xv), yv) in acc.iter_mut().zip(xs).zip(ys) {
            *a = _mm256_fmadd_ps(load8(xv), load8_f16(yv), *a);
        }
    }
    let (q8, qr) = qt.as_chunks::<8>();
    let (k8, kr) = kt.as_chunks::<8>();
    for ((a, xv), yv) in acc.iter_mut().zip(q8).zip(k8) {
        *a = _mm256_fmadd_ps(load8(xv), load8_f16(yv), *a);
    }
    if !qr.is_empty() {
        let xv: [f32; 8] = pad(qr, 0.0);
        let yv: [u16; 8] = pad(kr, 0);
        acc[3] = _mm256_fmadd_ps(load8(&xv), load8_f16(&yv), acc[3]);
    }
    hsum_ps(_mm256_add_ps(
        _mm256_add_ps(acc[0], acc[1]),
        _mm256_add_ps(acc[2], acc[3]),
    ))
}

/// AVX2 twin of `attn::scalar::axpy_f16`: `out[i] = out[i] + a · f16(v[i])`
/// (multiply, then add: bit-identical to the scalar twin)
/// over `min(v.len(), out.len())` elements.
///
/// * `v`: `[n]` f16 bit patterns; `out`: `[n]` f32.
///
/// # Safety
///
/// The CPU must support AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn axpy_f16(a: f32, v: &[u16], out: &mut [f32]) {
    let n = v.len().min(out.len());
    let (v, out) = (&v[..n], &mut out[..n]);
    let av = _mm256_set1_ps(a);
    let (oc, ot) = out.as_chunks_mut::<8>();
    let (vc, vt) = v.as_chunks::<8>();
    for (o, x) in oc.iter_mut().zip(vc) {
        store8(o, _mm256_add_ps(load8(o), _mm256_mul_ps(av, load8_f16(x))));
    }
    if !ot.is_empty() {
        let mut ob: [f32; 8] = pad(ot, 0.0);
        let vb: [u16; 8] = pad(vt, 0);
        let r = _mm256_add_ps(load8(&ob), _mm256_mul_ps(av, load8_f16(&vb)));
        store8(&mut ob, r);
        unpad(ot, &ob);
    }
}
