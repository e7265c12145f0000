//! AVX-512 twins of the two attention kernels that many queries share: the
//! lane-per-query scores of [`super::lanes_avx2`] with 16 queries to
//! a register instead of 8, and the grouped value sums of
//! [`super::avx2::axpy_f16_rows_group`] with 16 lanes to a register and
//! four queries' outputs in registers at a time.
//!
//! Every lane does exactly what its AVX2 (and scalar) twin does: scores
//! are `acc = acc + q[d] · k[d]` over `d` in order from `0.0`, value sums
//! `out = out + w[r] · v[r]` over rows in order, each a multiply and then
//! an add. So the outputs are bit-identical on every ISA; only how many
//! lanes one instruction covers changes.
//!
//! ```text
//!   scores, per pass of 16 queries (two 8-query transposes, joined):
//!     qt[d] = dim d of queries g0..g0+16, one per lane
//!     acc[j] = acc[j] + qt[d] · k[r+j][d]     j < 8 rows, d in order
//!     low / high halves of acc[0..8] ──8×8 transpose each──► 16 query rows
//! ```

use std::arch::x86_64::*;
use std::mem::MaybeUninit;

pub(crate) use super::lanes_avx2::LANE_DIMS;
use super::lanes_avx2::{transpose8x8_ps, transpose_queries, widen_row};
use super::types::KvRows;

/// Queries per pass.
const PASS: usize = 16;

/// 16-lane transposed query vectors kept on the stack (64 KiB): 16 passes
/// at head dim 64.
const QT_VECS: usize = 4 * LANE_DIMS;

/// `acc[j]` lane `l` = the running score of query lane `l` against row
/// `j`, over dims `0..qt.len()` (the scalar order).
///
/// # Safety
///
/// `qt.len() <= LANE_DIMS`, and dims `0..qt.len()` of every `kf[j]` are
/// written.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl")]
unsafe fn row_sums<const R: usize>(
    qt: &[__m512],
    kf: &[[MaybeUninit<f32>; LANE_DIMS]; R],
) -> [__m512; R] {
    let mut acc = [_mm512_setzero_ps(); R];
    for (d, &qv) in qt.iter().enumerate().take(LANE_DIMS) {
        for (a, k) in acc.iter_mut().zip(kf) {
            // SAFETY: dim `d < qt.len()` of each row is written (caller).
            let x = unsafe { k.get_unchecked(d).assume_init() };
            *a = _mm512_fmadd_ps(qv, _mm512_set1_ps(x), *a);
        }
    }
    acc
}

/// Writes pass `p`'s transposed queries (16 lanes, dims `0..n`) into
/// `slot[..n]`: queries `16p..16p + 8` in the low halves, the next 8 in
/// the high halves (lanes past the last query are zero).
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl")]
fn transpose_pass(
    q: &[f32],
    n: usize,
    (p, g_all): (usize, usize),
    slot: &mut [MaybeUninit<__m512>],
) {
    let mut lo = [const { MaybeUninit::<__m256>::uninit() }; LANE_DIMS];
    let mut hi = [const { MaybeUninit::<__m256>::uninit() }; LANE_DIMS];
    let g0 = p * PASS;
    let lanes_lo = g_all.saturating_sub(g0).min(8);
    let lanes_hi = g_all.saturating_sub(g0 + 8).min(8);
    transpose_queries(q, n, (g0, lanes_lo), &mut lo[..n]);
    transpose_queries(q, n, (g0 + 8, lanes_hi), &mut hi[..n]);
    for ((d, l), h) in slot.iter_mut().zip(&lo[..n]).zip(&hi[..n]) {
        // SAFETY: `transpose_queries` wrote dims `0..n` of both halves.
        let (l, h) = unsafe { (l.assume_init(), h.assume_init()) };
        let joined = _mm512_insertf64x4::<1>(
            _mm512_castpd256_pd512(_mm256_castps_pd(l)),
            _mm256_castps_pd(h),
        );
        d.write(_mm512_castpd_ps(joined));
    }
}

/// [`super::lanes_avx2::rows_group_lanes`] with 16 queries per pass.
///
/// # Safety
///
/// As `rows_group_lanes`: `0 < n <= LANE_DIMS`; `n_rows == 0` or
/// `(n_rows - 1) * stride + n <= k.len()`; `n_rows <= out_stride` and
/// `(G - 1) * out_stride + n_rows <= out.len()`; the CPU must support
/// AVX2, FMA, F16C and AVX-512 F and VL.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl")]
pub(crate) unsafe fn rows_group_lanes(
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
    let passes = g_all.div_ceil(PASS);
    let per_group = (QT_VECS / n).max(1);
    let mut qt = [const { MaybeUninit::<__m512>::uninit() }; QT_VECS];
    let mut kf = [[const { MaybeUninit::<f32>::uninit() }; LANE_DIMS]; 8];
    let row = |r: usize| k.get(r * stride..r * stride + n).unwrap_or(&[]);
    // Writes query `g`'s scores `s` of rows `r..r + s.len()`.
    let mut put = |g: usize, r: usize, s: &[f32]| {
        if g < g_all {
            let at = g * out_stride + r;
            if let Some(o) = out.get_mut(at..at + s.len()) {
                o.copy_from_slice(s);
            }
        }
    };
    for p0 in (0..passes).step_by(per_group) {
        let group = p0..(p0 + per_group).min(passes);
        for (p, slot) in group.clone().zip(qt.chunks_exact_mut(n)) {
            transpose_pass(q, n, (p, g_all), slot);
        }
        // SAFETY: `transpose_pass` wrote `n` vectors per pass of the group;
        // `MaybeUninit<T>` has `T`'s layout.
        let qt: &[__m512] =
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
                let acc = unsafe { row_sums::<8>(qp, &kf) };
                let lo = transpose8x8_ps(acc.map(|a| _mm512_castps512_ps256(a)));
                let hi =
                    transpose8x8_ps(acc.map(|a| {
                        _mm256_castpd_ps(_mm512_extractf64x4_pd::<1>(_mm512_castps_pd(a)))
                    }));
                for (l, c) in lo.into_iter().chain(hi).enumerate() {
                    let mut s = [0.0f32; 8];
                    // SAFETY: `s` is 8 writable f32.
                    unsafe { _mm256_storeu_ps(s.as_mut_ptr(), c) };
                    put(p * PASS + l, r, &s);
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
                let mut lane = [0.0f32; PASS];
                // SAFETY: `lane` is 16 writable f32.
                unsafe { _mm512_storeu_ps(lane.as_mut_ptr(), acc) };
                for (l, s) in lane.iter().enumerate() {
                    put(p * PASS + l, r, std::slice::from_ref(s));
                }
            }
            r += 1;
        }
    }
}

/// Value rows converted to `f32` per tile of [`axpy_f16_rows_group`].
const VALUE_TILE_ROWS: usize = 16;

/// Widest head [`axpy_f16_rows_group`] tiles; wider ones run the AVX2 twin.
const VALUE_MAX_WIDTH: usize = 256;

/// Registers per 64-column slice of a value row.
const SLICE: usize = 4;

/// Adds the weighted tile rows `0..m` to the outputs of queries `g0..g0 +
/// Q`, one 64-column slice at a time with the `Q × 4` outputs of a slice
/// in registers: for each row in order, `acc = acc + w · v` (multiply,
/// then add), the scalar twin's operations.
///
/// * `tile`: `[m, nv]` converted rows (`nv = width / 16` registers each);
///   `w` at `g * w_stride + r0 + r`; `out`: `[G, nv · 16]`.
///
/// # Safety
///
/// Rows `0..m` of `tile` are written; every query `g0..g0 + Q` has weights
/// `r0..r0 + m` inside `w` at `g * w_stride` and `nv · 16` outputs inside
/// `out` at `g * nv · 16`; `nv` is a multiple of 4; the CPU must support
/// AVX-512 F.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl")]
unsafe fn add_rows<const Q: usize>(
    tile: &[MaybeUninit<__m512>],
    (nv, m): (usize, usize),
    (w, w_stride, r0): (&[f32], usize, usize),
    g0: usize,
    out: &mut [f32],
) {
    let (tp, wp, op) = (tile.as_ptr(), w.as_ptr(), out.as_mut_ptr());
    let width = nv * 16;
    for c in (0..nv).step_by(SLICE) {
        let mut acc = [[_mm512_setzero_ps(); SLICE]; Q];
        for (g, a) in acc.iter_mut().enumerate() {
            for (j, x) in a.iter_mut().enumerate() {
                // SAFETY: query `g0 + g`'s outputs lie inside `out` (caller).
                *x = unsafe { _mm512_loadu_ps(op.add((g0 + g) * width + (c + j) * 16)) };
            }
        }
        for r in 0..m {
            let mut t = [_mm512_setzero_ps(); SLICE];
            for (j, x) in t.iter_mut().enumerate() {
                // SAFETY: row `r < m` of the tile is written (caller).
                *x = unsafe { (*tp.add(r * nv + c + j)).assume_init() };
            }
            for (g, a) in acc.iter_mut().enumerate() {
                // SAFETY: the query's weight of row `r0 + r` lies inside `w`.
                let wv = _mm512_set1_ps(unsafe { *wp.add((g0 + g) * w_stride + r0 + r) });
                for (x, &v) in a.iter_mut().zip(&t) {
                    *x = _mm512_add_ps(*x, _mm512_mul_ps(wv, v));
                }
            }
        }
        for (g, a) in acc.iter().enumerate() {
            for (j, &x) in a.iter().enumerate() {
                // SAFETY: as the loads above.
                unsafe { _mm512_storeu_ps(op.add((g0 + g) * width + (c + j) * 16), x) };
            }
        }
    }
}

/// [`super::avx2::axpy_f16_rows_group`] with 16 lanes to a register, and
/// four queries per pass over a tile of up to 16 rows, for a head width
/// that is a multiple of 64 (up to 256); other widths run the AVX2 twin.
///
/// ```text
///   for each tile of ≤ 16 rows:
///     tile[r][..] = f32(v[r0 + r][..])                 once per tile
///     for each pass of ≤ 4 queries, each 64-column slice c:
///       acc[q][0..4] = out[g0 + q][c..c + 64]          16 registers
///       for r in order, for q:  acc[q] = acc[q] + w[g0 + q][r0 + r] · tile[r][c..]
///       out[g0 + q][c..c + 64] = acc[q]
/// ```
///
/// Four queries give sixteen independent add chains, where one query's
/// four would wait on the add latency; each tile register loaded serves
/// all four.
///
/// # Safety
///
/// As the AVX2 twin's, and the CPU must support AVX-512 F and VL as well.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl")]
pub(crate) unsafe fn axpy_f16_rows_group(
    w: &[f32],
    w_stride: usize,
    rows: KvRows<'_>,
    out: &mut [f32],
) {
    let (v, stride, n_rows, n) = (rows.data, rows.stride, rows.n_rows, rows.width);
    if n == 0 || !n.is_multiple_of(64) || n > VALUE_MAX_WIDTH {
        // SAFETY: the caller's bounds and CPU.
        return unsafe { super::avx2::axpy_f16_rows_group(w, w_stride, rows, out) };
    }
    let nv = n / 16;
    let g_all = out.len() / n;
    let mut tile =
        [const { MaybeUninit::<__m512>::uninit() }; VALUE_TILE_ROWS * VALUE_MAX_WIDTH / 16];
    let mut r0 = 0;
    while r0 < n_rows {
        let m = (n_rows - r0).min(VALUE_TILE_ROWS);
        for (r, t) in tile.chunks_exact_mut(nv).enumerate().take(m) {
            let Some(row) = v.get((r0 + r) * stride..(r0 + r) * stride + n) else {
                return;
            };
            let (rc, _) = row.as_chunks::<16>();
            for (x, c) in t.iter_mut().zip(rc) {
                // SAFETY: `c` is 16 readable u16; `loadu` needs no alignment.
                x.write(_mm512_cvtph_ps(unsafe {
                    _mm256_loadu_si256(c.as_ptr().cast())
                }));
            }
        }
        let mut g0 = 0;
        while g0 < g_all {
            let left = g_all - g0;
            let ws = (w, w_stride, r0);
            // SAFETY: rows `0..m` of the tile were written above; queries
            // `g0..g0 + left.min(4)` have `r0 + m <= n_rows` weights in `w`
            // and `n` outputs in `out` (the caller's bounds); `nv` is a
            // multiple of 4 (`n` is a multiple of 64).
            unsafe {
                match left {
                    1 => add_rows::<1>(&tile, (nv, m), ws, g0, out),
                    2 => add_rows::<2>(&tile, (nv, m), ws, g0, out),
                    3 => add_rows::<3>(&tile, (nv, m), ws, g0, out),
                    _ => add_rows::<4>(&tile, (nv, m), ws, g0, out),
                }
            }
            g0 += left.min(4);
        }
        r0 += m;
    }
}
