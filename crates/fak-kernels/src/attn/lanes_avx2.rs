//! Attention scores with one register lane per *query* (AVX2 + FMA +
//! F16C), for groups of many queries over the same key rows: a fleet's
//! shared prefix, or a prefill chunk's tokens × the query heads of one KV
//! head.
//!
//! The other AVX2 score kernels keep one lane per key row, which needs each
//! 8 × 8 tile of f16 keys transposed in registers; with many queries that
//! transpose and the per-tile scatter of results dominated. Here the keys
//! stay in row order and the (few, reused) queries are transposed once:
//!
//! ```text
//!   qt[d]  = dim d of queries g0..g0+8, one per lane  (once per call)
//!   kf[j]  = key row r+j widened to f32  (once per row, for every pass)
//!   per dim d in order, per row j of the 8:
//!       acc[j] = fma(qt[d], kf[j][d], acc[j])          (fused)
//!   acc[j] lane l = score(query g0+l, row r+j)  ──8×8 transpose──►
//!   out[(g0+l) · out_stride + r .. + 8]                 one store per query
//! ```
//!
//! Each score is still `acc = acc + q[d] · k[d]` over `d` in index order
//! from `0.0`, the scalar twin's arithmetic, so the results are bit for bit
//! those of [`crate::attn::scalar::dot_f32_f16`]: only which lane computes
//! which score changes.

use std::arch::x86_64::*;
use std::mem::MaybeUninit;

use crate::simd::ops_avx2::load8_f16;

/// Widest head [`rows_group_lanes`] takes (its stack buffers hold this
/// many dims).
pub(crate) const LANE_DIMS: usize = 256;

/// Transposes an 8 × 8 `f32` matrix: `r[i]` lane `j` becomes lane `i` of
/// the result's vector `j`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn transpose8x8_ps(r: [__m256; 8]) -> [__m256; 8] {
    let t0 = _mm256_unpacklo_ps(r[0], r[1]);
    let t1 = _mm256_unpackhi_ps(r[0], r[1]);
    let t2 = _mm256_unpacklo_ps(r[2], r[3]);
    let t3 = _mm256_unpackhi_ps(r[2], r[3]);
    let t4 = _mm256_unpacklo_ps(r[4], r[5]);
    let t5 = _mm256_unpackhi_ps(r[4], r[5]);
    let t6 = _mm256_unpacklo_ps(r[6], r[7]);
    let t7 = _mm256_unpackhi_ps(r[6], r[7]);
    let u0 = _mm256_shuffle_ps::<0x44>(t0, t2);
    let u1 = _mm256_shuffle_ps::<0xEE>(t0, t2);
    let u2 = _mm256_shuffle_ps::<0x44>(t1, t3);
    let u3 = _mm256_shuffle_ps::<0xEE>(t1, t3);
    let u4 = _mm256_shuffle_ps::<0x44>(t4, t6);
    let u5 = _mm256_shuffle_ps::<0xEE>(t4, t6);
    let u6 = _mm256_shuffle_ps::<0x44>(t5, t7);
    let u7 = _mm256_shuffle_ps::<0xEE>(t5, t7);
    [
        _mm256_permute2f128_ps::<0x20>(u0, u4),
        _mm256_permute2f128_ps::<0x20>(u1, u5),
        _mm256_permute2f128_ps::<0x20>(u2, u6),
        _mm256_permute2f128_ps::<0x20>(u3, u7),
        _mm256_permute2f128_ps::<0x31>(u0, u4),
        _mm256_permute2f128_ps::<0x31>(u1, u5),
        _mm256_permute2f128_ps::<0x31>(u2, u6),
        _mm256_permute2f128_ps::<0x31>(u3, u7),
    ]
}

/// Widens key row `row` (at most `LANE_DIMS` f16 values) into the front
/// of `dst`; returns how many values it wrote.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn widen_row(row: &[u16], dst: &mut [MaybeUninit<f32>; LANE_DIMS]) -> usize {
    let (chunks, tail) = row.as_chunks::<8>();
    let (dc, _) = dst.as_chunks_mut::<8>();
    let mut done = 0;
    for (c, d) in chunks.iter().zip(dc.iter_mut()) {
        // SAFETY: `d` is 8 writable f32 slots; `storeu` needs no alignment.
        unsafe { _mm256_storeu_ps(d.as_mut_ptr().cast(), load8_f16(c)) };
        done += 8;
    }
    for (d, &h) in dst.iter_mut().skip(done).zip(tail) {
        d.write(crate::fp::f16_to_f32(h));
        done += 1;
    }
    done
}

/// Writes dims `0..n` of queries `g0..g0 + lanes` of `q` (`[G, n]`) into
/// `qt[..n]`, one lane per query (lanes past `lanes` zero): 8 × 8 blocks
/// transposed in registers, tail dims one at a time.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn transpose_queries(
    q: &[f32],
    n: usize,
    (g0, lanes): (usize, usize),
    qt: &mut [MaybeUninit<__m256>],
) {
    let n8 = n / 8 * 8;
    let query = |l: usize| q.get((g0 + l) * n..(g0 + l + 1) * n).filter(|_| l < lanes);
    for i in (0..n8).step_by(8) {
        let mut rows = [_mm256_setzero_ps(); 8];
        for (l, v) in rows.iter_mut().enumerate() {
            if let Some(c) = query(l).and_then(|x| x.get(i..i + 8)) {
                // SAFETY: `c` is 8 readable f32.
                *v = unsafe { _mm256_loadu_ps(c.as_ptr()) };
            }
        }
        for (d, c) in qt.iter_mut().skip(i).zip(transpose8x8_ps(rows)) {
            d.write(c);
        }
    }
    for (d, slot) in qt.iter_mut().enumerate().take(n).skip(n8) {
        let mut lane = [0.0f32; 8];
        for (l, x) in lane.iter_mut().enumerate() {
            *x = query(l).and_then(|x| x.get(d).copied()).unwrap_or(0.0);
        }
        // SAFETY: `lane` is 8 readable f32.
        slot.write(unsafe { _mm256_loadu_ps(lane.as_ptr()) });
    }
}

/// The `R` rows' running sums over dims `0..qt.len()`: `acc[j]` lane `l`
/// is the score of query lane `l` against row `j` (`kf[j]`).
///
/// # Safety
///
/// `qt.len() <= LANE_DIMS`, and dims `0..qt.len()` of every `kf[j]` are
/// written.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn row_sums<const R: usize>(
    qt: &[__m256],
    kf: &[[MaybeUninit<f32>; LANE_DIMS]; R],
) -> [__m256; R] {
    let mut acc = [_mm256_setzero_ps(); R];
    for (d, &qv) in qt.iter().enumerate().take(LANE_DIMS) {
        for (a, k) in acc.iter_mut().zip(kf) {
            // SAFETY: dim `d < qt.len()` of each row is written (caller).
            let x = unsafe { k.get_unchecked(d).assume_init() };
            *a = _mm256_fmadd_ps(qv, _mm256_set1_ps(x), *a);
        }
    }
    acc
}

/// Transposed query vectors [`rows_group_lanes`] keeps on its stack (64
/// KiB): 32 passes of 8 queries at head dim 64.
const QT_VECS: usize = 8 * LANE_DIMS;

/// Scores of all `q.len() / n` queries (`q`: `[G, n]`) against rows
/// `0..n_rows` of `k` (row `r` at `r * stride`), into
/// `out[g * out_stride + r]`. Queries go 8 to a pass; every pass of a
/// group (as many as [`QT_VECS`] holds) runs over each 8-row key tile
/// while it is widened in L1, so a row is widened once per group, not
/// once per pass.
///
/// # Safety
///
/// `0 < n <= LANE_DIMS`; `n_rows == 0` or `(n_rows - 1) * stride + n <=
/// k.len()`; `n_rows <= out_stride` and `(G - 1) * out_stride + n_rows <=
/// out.len()`; the CPU must support AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn rows_group_lanes(
    q: &[f32],
    n: usize,
    k: &[u16],
    stride: usize,
    n_rows: usize,
    out: &mut [f32],
    out_stride: usize,
) {
    let n = n.clamp(1, LANE_DIMS);
    let g_all = q.len() / n;
    let passes = g_all.div_ceil(8);
    let per_group = QT_VECS / n;
    // Uninitialised on purpose: these calls often cover one KV block,
    // where zeroing the buffers cost as much as the sums. Only written
    // dims are read (`row_sums`' contract).
    let mut qt = [const { MaybeUninit::<__m256>::uninit() }; QT_VECS];
    let mut kf = [[const { MaybeUninit::<f32>::uninit() }; LANE_DIMS]; 8];
    let row = |r: usize| k.get(r * stride..r * stride + n).unwrap_or(&[]);
    // Queries pass `p` holds (8, or fewer in the last pass).
    let lanes = |p: usize| (g_all - p * 8).min(8);
    for p0 in (0..passes).step_by(per_group) {
        let group = p0..(p0 + per_group).min(passes);
        for (p, slot) in group.clone().zip(qt.chunks_exact_mut(n)) {
            transpose_queries(q, n, (p * 8, lanes(p)), slot);
        }
        // SAFETY: `transpose_queries` wrote `n` vectors per pass of the
        // group; `MaybeUninit<T>` has `T`'s layout.
        let qt: &[__m256] =
            unsafe { std::slice::from_raw_parts(qt.as_ptr().cast(), group.len() * n) };
        let mut r = 0;
        while r + 8 <= n_rows {
            let mut written = n;
            for (j, dst) in kf.iter_mut().enumerate() {
                written = written.min(widen_row(row(r + j), dst));
            }
            if written < n {
                return;
            }
            for (p, qp) in group.clone().zip(qt.chunks_exact(n)) {
                // SAFETY: every row's dims `0..n` are written (checked above).
                let cols = transpose8x8_ps(unsafe { row_sums::<8>(qp, &kf) });
                for (l, c) in cols.into_iter().enumerate().take(lanes(p)) {
                    let at = (p * 8 + l) * out_stride + r;
                    if let Some(o) = out.get_mut(at..at + 8) {
                        // SAFETY: `o` is 8 writable f32; `storeu` needs no alignment.
                        unsafe { _mm256_storeu_ps(o.as_mut_ptr(), c) };
                    }
                }
            }
            r += 8;
        }
        while r < n_rows {
            let Some(one) = kf.first_chunk_mut::<1>() else {
                return;
            };
            if widen_row(row(r), &mut one[0]) < n {
                return;
            }
            for (p, qp) in group.clone().zip(qt.chunks_exact(n)) {
                // SAFETY: the row's dims `0..n` are written (checked above).
                let [acc] = unsafe { row_sums::<1>(qp, one) };
                let mut lane = [0.0f32; 8];
                // SAFETY: `lane` is 8 writable f32.
                unsafe { _mm256_storeu_ps(lane.as_mut_ptr(), acc) };
                for (l, &s) in lane.iter().enumerate().take(lanes(p)) {
                    if let Some(o) = out.get_mut((p * 8 + l) * out_stride + r) {
                        *o = s;
                    }
                }
            }
            r += 1;
        }
    }
}
